/* SPDX-License-Identifier: MIT */
/*
 * Tensor bytes from GGUF files into compute memory.
 *
 * Each file's tensor data section is read whole into one region whose first
 * byte holds the file offset align_down(data_offset, 4096): file offsets and
 * addresses are then congruent modulo the page size, so the same layout
 * serves O_DIRECT (which reads the aligned superset of the section) and
 * buffered pread (which reads the exact bytes). A tensor's placement points
 * at base + (offset - region start), i.e. at the very bytes of the file: the
 * weights/ files of the mount are byte-identical to the GGUF's ranges.
 *
 *   io_weights_load   regions, reads (uring.c, or pread here), placements
 *   io_weights_move   one tensor into its own region on another device
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weights_internal.h"

struct io_region {
	struct io_mem mem;
	uint64_t file_start;   /* file offset held at mem.base (file regions) */
	uint64_t refs;         /* tensors resident here; freed at 0 */
};

struct io_weights {
	const struct io_gguf *g;
	struct io_load_options opt;
	struct io_placement *pl;    /* n_tensors records */
	uint32_t *region_of;        /* n_tensors region indices */
	struct io_region *regions;
	uint32_t n_regions, cap_regions;
	struct io_load_stats stats;
};

static double weights_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int weights_region_add(struct io_weights *w, uint32_t *idx,
			      struct err *err)
{
	struct io_region *r;
	uint32_t cap;

	if (w->n_regions == w->cap_regions) {
		cap = w->cap_regions ? w->cap_regions * 2 : 8;
		r = realloc(w->regions, cap * sizeof(*r));
		if (!r)
			return err_set(err, ENOMEM, "out of memory for regions");
		w->regions = r;
		w->cap_regions = cap;
	}
	*idx = w->n_regions++;
	memset(&w->regions[*idx], 0, sizeof(w->regions[*idx]));
	return 0;
}

/* The file range [start, end) that the tensors of file f occupy. */
static int weights_file_span(const struct io_gguf *g, uint32_t f,
			     uint64_t *start, uint64_t *end, uint64_t *n,
			     struct err *err)
{
	const struct io_gguf_file *file = &g->files[f];
	const struct io_gguf_tensor *t;
	uint64_t i, e = file->data_offset;

	*n = 0;
	*start = *end = file->data_offset;
	for (i = 0; i < g->n_tensors; i++) {
		t = &g->tensors[i];
		if (t->file != f)
			continue;
		if (t->offset < file->data_offset || t->bytes > file->size ||
		    t->offset > file->size - t->bytes)
			return err_set(err, EINVAL,
				       "%s: tensor %s lies outside the data section",
				       file->path, t->name);
		if (t->offset + t->bytes > e)
			e = t->offset + t->bytes;
		(*n)++;
	}
	*start = file->data_offset;
	*end = e;
	return 0;
}

static void weights_progress(struct io_weights *w, uint64_t done)
{
	if (w->opt.progress)
		w->opt.progress(w->opt.progress_arg, done, w->stats.tensor_bytes);
}

/* Buffered reads of [start, end) of path into dst, in 8 MiB steps. */
static int weights_pread(struct io_weights *w, const char *path,
			 uint64_t start, uint64_t end, uint8_t *dst,
			 uint64_t *done, struct err *err)
{
	const size_t step = 8u << 20;
	uint64_t off = start;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(err, errno, "%s: %s", path, strerror(errno));
	posix_fadvise(fd, (off_t)start, (off_t)(end - start), POSIX_FADV_SEQUENTIAL);
	while (off < end) {
		size_t len = end - off < step ? (size_t)(end - off) : step;

		n = pread(fd, dst + (off - start), len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			close(fd);
			return err_set(err, errno, "%s: read at %llu: %s", path,
				       (unsigned long long)off, strerror(errno));
		}
		if (n == 0) {
			close(fd);
			return err_set(err, EINVAL,
				       "%s: file ends at %llu, tensor data runs to %llu",
				       path, (unsigned long long)off,
				       (unsigned long long)end);
		}
		off += (uint64_t)n;
		*done += (uint64_t)n;
		weights_progress(w, *done);
	}
	close(fd);
	return 0;
}

static int weights_load_file(struct io_weights *w, uint32_t f, uint64_t *done,
			     struct err *err)
{
	const struct io_gguf *g = w->g;
	const struct io_gguf_file *file = &g->files[f];
	uint64_t start, end, n, base_off, i;
	struct io_region *r;
	uint32_t idx = 0;
	int rc;

	rc = weights_file_span(g, f, &start, &end, &n, err);
	if (rc < 0 || n == 0)
		return rc;
	rc = weights_region_add(w, &idx, err);
	if (rc < 0)
		return rc;
	r = &w->regions[idx];
	base_off = start & ~(uint64_t)(IO_PAGE - 1);
	r->file_start = base_off;
	/* Room for the aligned superset that O_DIRECT reads. */
	rc = io_mem_alloc(&r->mem, (size_t)((end - base_off + IO_PAGE - 1) &
					    ~(uint64_t)(IO_PAGE - 1)), -1, err);
	if (rc < 0)
		return rc;
	rc = weights_pread(w, file->path, start, end,
			   (uint8_t *)r->mem.base + (start - base_off), done, err);
	if (rc < 0)
		return rc;
	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];

		if (t->file != f)
			continue;
		w->pl[i].data = (uint8_t *)r->mem.base + (t->offset - base_off);
		w->pl[i].bytes = t->bytes;
		snprintf(w->pl[i].device, sizeof(w->pl[i].device), "cpu");
		w->region_of[i] = idx;
		r->refs++;
	}
	return 0;
}

static void weights_notice(void *arg, const char *msg)
{
	struct io_weights *w = arg;

	if (w->opt.notice)
		w->opt.notice(w->opt.notice_arg, msg);
}

int io_weights_load(struct io_weights **out, const struct io_gguf *g,
		    const struct io_load_options *opt, struct err *err)
{
	struct io_weights *w;
	uint64_t done = 0, i;
	double t0 = weights_now();
	uint32_t f;
	int rc;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return err_set(err, ENOMEM, "out of memory for weights");
	w->g = g;
	if (opt)
		w->opt = *opt;
	w->pl = calloc(g->n_tensors ? g->n_tensors : 1, sizeof(*w->pl));
	w->region_of = calloc(g->n_tensors ? g->n_tensors : 1,
			      sizeof(*w->region_of));
	if (!w->pl || !w->region_of) {
		rc = err_set(err, ENOMEM, "out of memory for %llu placements",
			     (unsigned long long)g->n_tensors);
		goto out_free;
	}
	for (i = 0; i < g->n_tensors; i++) {
		if (g->tensors[i].file >= g->n_files) {
			rc = err_set(err, EINVAL, "tensor %s: no file %u",
				     g->tensors[i].name, g->tensors[i].file);
			goto out_free;
		}
		w->stats.tensor_bytes += g->tensors[i].bytes;
	}
	weights_progress(w, 0);
	for (f = 0; f < g->n_files; f++) {
		rc = weights_load_file(w, f, &done, err);
		if (rc < 0)
			goto out_free;
	}
	w->stats.locked = !w->opt.no_lock;
	for (f = 0; f < w->n_regions && !w->opt.no_lock; f++) {
		io_mem_lock(&w->regions[f].mem, weights_notice, w);
		if (!w->regions[f].mem.locked)
			w->stats.locked = false;
	}
	w->stats.bytes = done;
	w->stats.n_copies = 1;
	w->stats.seconds = weights_now() - t0;
	*out = w;
	return 0;

out_free:
	io_weights_free(w);
	return rc;
}

void io_weights_free(struct io_weights *w)
{
	uint32_t i;

	if (!w)
		return;
	for (i = 0; i < w->n_regions; i++)
		io_mem_free(&w->regions[i].mem);
	free(w->regions);
	free(w->region_of);
	free(w->pl);
	free(w);
}

struct io_placement *io_weights_placement(struct io_weights *w, uint64_t i)
{
	if (!w || i >= w->g->n_tensors)
		return NULL;
	return &w->pl[i];
}

const struct io_load_stats *io_weights_stats(const struct io_weights *w)
{
	return &w->stats;
}
