// SPDX-License-Identifier: MIT
/*
 * File bytes to another device's memory through a ring of page-locked
 * host buffers (io.h, io_stage_file): the disk fills buffer k (io_uring,
 * O_DIRECT, several reads in flight) while the device copies buffer k-1
 * out; a buffer is refilled only after the device says its last copy is
 * done. So the load runs at about the slower of the disk and the link,
 * and the weights never take host memory beyond the ring.
 *
 * io/ knows nothing of the device: the caller's sink allocates the
 * buffers (the CUDA module's cudaHostAlloc) and copies (cudaMemcpyAsync
 * plus an event per buffer). tests/io/test_stage.c drives the ring with a
 * sink that copies late, at the wait, so that a buffer reused too soon
 * shows as wrong bytes.
 *
 * A window is buf_bytes of the file, aligned for O_DIRECT; ranges are
 * read in order of their file offsets, whatever order they were given
 * in, and the gaps between them are read through when smaller than a
 * window (a GGUF's tensors are back to back).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "weights_internal.h"

#define STAGE_BUFS 4
#define STAGE_BUF_BYTES (64u << 20)
#define STAGE_MAX_BUFS 16 /* the CUDA module's copy slots */
#define STAGE_READ_CHUNK (8u << 20)
#define STAGE_DEPTH 8

struct stage {
	const struct io_stage_sink *sink;
	const struct io_stage_options *opt;
	struct io_stage_range *r; /* sorted by offset */
	size_t n;
	uint8_t *buf[STAGE_MAX_BUFS];
	bool pending[STAGE_MAX_BUFS]; /* copies issued from it */
	uint32_t n_bufs;
	size_t buf_bytes;
	struct io_ring *ring;
	int fd;
	const char *path;
	uint64_t file_size, total, done;
	struct io_stage_stats *st;
};

static double stage_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int stage_cmp(const void *a, const void *b)
{
	const struct io_stage_range *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Wait for the copies out of buffer k, if any. */
static int stage_wait(struct stage *s, uint32_t k, struct err *err)
{
	double t0;
	int rc;

	if (!s->pending[k])
		return 0;
	t0 = stage_now();
	rc = s->sink->wait(s->sink->arg, k, err);
	s->st->wait_seconds += stage_now() - t0;
	s->pending[k] = false;
	return rc;
}

/* Read [w0, w1) of the file into buffer k (w0 aligned). */
static int stage_read(struct stage *s, uint32_t k, uint64_t w0, uint64_t w1,
		      uint64_t need_end, struct err *err)
{
	double t0 = stage_now();
	int rc;

	if (s->ring)
		rc = io_ring_read(s->ring, s->fd, s->path, w0, w1 - w0,
				  s->buf[k], s->file_size, need_end, NULL, NULL,
				  err);
	else
		rc = io_pread_range(s->fd, s->path, w0, w1 - w0, s->buf[k],
				    s->file_size, need_end, STAGE_READ_CHUNK, 2,
				    NULL, NULL, err);
	s->st->read_seconds += stage_now() - t0;
	if (!rc)
		s->st->bytes_read += w1 - w0;
	return rc;
}

/*
 * Copy out of buffer k, which holds the file's [w0, w1), every part of
 * the ranges from *first on that falls in it; ranges that end inside the
 * window are done (*first moves past them).
 */
static int stage_copy(struct stage *s, uint32_t k, uint64_t w0, uint64_t w1,
		      size_t *first, struct err *err)
{
	size_t i;
	int rc;

	for (i = *first; i < s->n && s->r[i].off < w1; i++) {
		const struct io_stage_range *r = &s->r[i];
		uint64_t a = r->off > w0 ? r->off : w0;
		uint64_t b = r->off + r->len < w1 ? r->off + r->len : w1;

		if (a >= b)
			continue;
		rc = s->sink->copy(s->sink->arg,
				   (uint8_t *)r->dst + (a - r->off),
				   s->buf[k] + (a - w0), b - a, k, err);
		if (rc)
			return rc;
		s->pending[k] = true;
		s->st->bytes_copied += b - a;
		s->done += b - a;
	}
	/* ranges wholly before the next window are finished */
	while (*first < s->n && s->r[*first].off + s->r[*first].len <= w1)
		(*first)++;
	if (s->opt->progress)
		s->opt->progress(s->opt->progress_arg, s->done, s->total);
	return 0;
}

/* The next window: from the first unfinished byte, aligned, buf_bytes. */
static bool stage_window(const struct stage *s, size_t first, uint64_t at,
			 uint64_t *w0, uint64_t *w1, uint64_t *need_end)
{
	uint64_t start, end = 0;
	size_t i;

	if (first >= s->n)
		return false;
	start = s->r[first].off > at ? s->r[first].off : at;
	*w0 = start & ~(uint64_t)(IO_PAGE - 1);
	*w1 = *w0 + s->buf_bytes;
	/* the bytes some range needs in this window: the file must hold them */
	for (i = first; i < s->n && s->r[i].off < *w1; i++) {
		uint64_t e = s->r[i].off + s->r[i].len;

		if (e > end)
			end = e;
	}
	if (end < *w1)
		*w1 = (end + IO_PAGE - 1) & ~(uint64_t)(IO_PAGE - 1);
	*need_end = end < *w1 ? end : *w1;
	return true;
}

static int stage_run(struct stage *s, struct err *err)
{
	uint64_t w0, w1, need_end, at = 0, windows = 0;
	size_t first = 0;
	uint32_t k;
	int rc;

	while (stage_window(s, first, at, &w0, &w1, &need_end)) {
		k = (uint32_t)(windows++ % s->n_bufs);
		if ((rc = stage_wait(s, k, err)) ||
		    (rc = stage_read(s, k, w0, w1, need_end, err)) ||
		    (rc = stage_copy(s, k, w0, w1, &first, err)))
			return rc;
		at = w1;
	}
	for (k = 0; k < s->n_bufs; k++)
		if ((rc = stage_wait(s, k, err)))
			return rc;
	return 0;
}

static int stage_open(struct stage *s, bool direct, struct err *err)
{
	struct stat sb;

	s->fd = open(s->path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
	if (s->fd < 0)
		return err_set(err, errno, "%s: %s", s->path, strerror(errno));
	if (fstat(s->fd, &sb)) {
		close(s->fd);
		s->fd = -1;
		return err_set(err, errno, "%s: %s", s->path, strerror(errno));
	}
	s->file_size = (uint64_t)sb.st_size;
	return 0;
}

static void stage_release(struct stage *s)
{
	uint32_t k;
	struct err e = { 0 };

	/* nothing may still copy out of a buffer that is freed */
	for (k = 0; k < s->n_bufs; k++)
		if (s->pending[k])
			s->sink->wait(s->sink->arg, k, &e);
	for (k = 0; k < s->n_bufs; k++)
		if (s->buf[k])
			s->sink->host_free(s->sink->arg, s->buf[k]);
	io_ring_close(s->ring);
	if (s->fd >= 0)
		close(s->fd);
	free(s->r);
}

static int stage_check(const struct io_stage_range *r, size_t n,
		       const struct io_stage_options *opt, struct err *err)
{
	size_t i;

	if ((opt->n_bufs &&
	     (opt->n_bufs < 1 || opt->n_bufs > STAGE_MAX_BUFS)) ||
	    (opt->buf_bytes &&
	     (opt->buf_bytes < IO_PAGE || opt->buf_bytes % IO_PAGE)))
		return err_set(
			err, EINVAL,
			"staging: %u buffers of %zu bytes (1..%d buffers, a multiple of %u bytes)",
			opt->n_bufs, opt->buf_bytes, STAGE_MAX_BUFS, IO_PAGE);
	for (i = 0; i < n; i++)
		if (!r[i].dst || r[i].off + r[i].len < r[i].off)
			return err_set(
				err, EINVAL,
				"staging: range %zu has no destination or wraps",
				i);
	return 0;
}

int io_stage_file(const char *path, const struct io_stage_range *ranges,
		  size_t n, const struct io_stage_sink *sink,
		  const struct io_stage_options *opt, struct io_stage_stats *st,
		  struct err *err)
{
	static const struct io_stage_options defaults;
	struct io_stage_stats local;
	struct stage s = { 0 };
	struct err e = { 0 };
	double t0 = stage_now();
	bool direct;
	uint32_t k;
	size_t i;
	int rc;

	if (!opt)
		opt = &defaults;
	if (!st)
		st = &local;
	memset(st, 0, sizeof(*st));
	if ((rc = stage_check(ranges, n, opt, err)))
		return rc;
	s.sink = sink;
	s.opt = opt;
	s.st = st;
	s.path = path;
	s.fd = -1;
	s.n_bufs = opt->n_bufs ? opt->n_bufs : STAGE_BUFS;
	s.buf_bytes = opt->buf_bytes ? opt->buf_bytes : STAGE_BUF_BYTES;
	s.r = malloc((n ? n : 1) * sizeof(*s.r));
	if (!s.r)
		return err_set(err, ENOMEM, "out of memory");
	memcpy(s.r, ranges, n * sizeof(*s.r));
	qsort(s.r, n, sizeof(*s.r), stage_cmp);
	/* empty ranges need nothing */
	for (i = 0, s.n = 0; i < n; i++)
		if (s.r[i].len)
			s.r[s.n++] = s.r[i];
	for (i = 0; i < s.n; i++)
		s.total += s.r[i].len;
	for (k = 0; k < s.n_bufs; k++) {
		if ((rc = sink->host_alloc(sink->arg, (void **)&s.buf[k],
					   s.buf_bytes, err)))
			goto out;
		if ((uintptr_t)s.buf[k] % IO_PAGE) {
			rc = err_set(
				err, EINVAL,
				"staging: a buffer not aligned to %u bytes",
				IO_PAGE);
			goto out;
		}
	}
	if (!opt->no_uring && !getenv("LLMFS_NO_URING") &&
	    io_ring_open(&s.ring, STAGE_DEPTH, STAGE_READ_CHUNK, &e) == 0)
		st->uring = true;
	direct = !opt->no_direct && !getenv("LLMFS_NO_DIRECT");
	rc = stage_open(&s, direct, &e);
	if (rc == -EINVAL && direct) { /* tmpfs and such */
		direct = false;
		rc = stage_open(&s, false, err);
	} else if (rc) {
		*err = e;
	}
	if (rc)
		goto out;
	st->direct = direct;
	rc = stage_run(&s, err);
	if (rc == -EINVAL && direct && st->bytes_copied == 0) {
		/* a filesystem that takes the open and refuses the read */
		close(s.fd);
		s.fd = -1;
		st->direct = false;
		st->bytes_read = 0;
		s.done = 0;
		if (!(rc = stage_open(&s, false, err)))
			rc = stage_run(&s, err);
	}
	if (rc == -ENODATA) /* err says where the file ends */
		rc = -EINVAL;
out:
	stage_release(&s);
	st->seconds = stage_now() - t0;
	return rc;
}
