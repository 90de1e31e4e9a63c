/* SPDX-License-Identifier: MIT */
/*
 * The fast read path: io_uring with a configurable number of reads in
 * flight, straight into the final weight memory. The memory is registered
 * with the ring (in pieces of at most 1 GiB, the kernel's limit per buffer)
 * so that each read is a read_fixed and the kernel does not pin and unpin
 * the pages of every request. With O_DIRECT the disk DMA-writes into the
 * weights and the page cache is never filled with a second copy.
 *
 * Everything here fails softly: io_ring_open reports why io_uring cannot be
 * used (ENOSYS on old kernels, EPERM under Docker's default seccomp profile
 * or kernel.io_uring_disabled) and the caller reads with pread instead.
 */
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "weights_internal.h"

/*
 * Registered pieces: at most 1 GiB (the kernel's limit per buffer) and at
 * most RING_BUF_COUNT of them (its limit on the table).
 */
#define RING_BUF_MAX (1ull << 30)
#define RING_BUF_MIN (32ull << 20)
#define RING_BUF_COUNT 16384u

struct ring_slot {
	uint64_t off; /* file offset of the read */
	uint64_t len;
	uint8_t *dst;
	int buf; /* registered buffer index, -1 if none */
	bool busy;
};

struct io_ring {
	struct io_uring ring;
	uint32_t depth;
	uint64_t chunk;
	struct ring_slot *slots;
	struct iovec *iov; /* registered pieces, in address order */
	bool *pinned;	   /* piece i is in the kernel's table */
	unsigned n_iov;
	bool registered;
	bool lazy; /* pieces are pinned as the reads reach them */
};

int io_ring_open(struct io_ring **out, uint32_t depth, uint64_t chunk,
		 struct err *err)
{
	struct io_ring *r;
	int rc;

	*out = NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return err_set(err, ENOMEM, "out of memory for a ring");
	r->depth = depth;
	r->chunk = chunk;
	r->slots = calloc(depth, sizeof(*r->slots));
	if (!r->slots) {
		free(r);
		return err_set(err, ENOMEM, "out of memory for a ring");
	}
	rc = io_uring_queue_init(depth, &r->ring, 0);
	if (rc < 0) {
		free(r->slots);
		free(r);
		return err_set(err, -rc, "io_uring_setup: %s", strerror(-rc));
	}
	*out = r;
	return 0;
}

void io_ring_close(struct io_ring *r)
{
	if (!r)
		return;
	if (r->registered)
		io_uring_unregister_buffers(&r->ring);
	io_uring_queue_exit(&r->ring);
	free(r->iov);
	free(r->pinned);
	free(r->slots);
	free(r);
}

/*
 * Pinning is the expensive part of registration (every page is allocated
 * and zeroed there, about half a second per GB on a busy machine), so the
 * table is registered sparse and each piece is pinned when the first read
 * into it is submitted: the pinning of piece k+1 overlaps the disk's work
 * on piece k. Kernels before 5.19 lack sparse tables: everything is pinned
 * up front then.
 */
int io_ring_register(struct io_ring *r, struct io_mem *const *mem, unsigned n,
		     struct err *err)
{
	unsigned i, k = 0, count = 0;
	uint64_t off, total = 0, piece = RING_BUF_MIN;
	int rc;

	for (i = 0; i < n; i++)
		total += mem[i]->size;
	while (piece < RING_BUF_MAX && total / piece + n > RING_BUF_COUNT)
		piece *= 2;
	for (i = 0; i < n; i++)
		count += (unsigned)((mem[i]->size + piece - 1) / piece);
	if (count > RING_BUF_COUNT)
		return err_set(err, E2BIG,
			       "%u buffers to register (at most %u)", count,
			       RING_BUF_COUNT);
	r->iov = calloc(count ? count : 1, sizeof(*r->iov));
	r->pinned = calloc(count ? count : 1, sizeof(*r->pinned));
	if (!r->iov || !r->pinned)
		return err_set(err, ENOMEM, "out of memory for %u iovecs",
			       count);
	for (i = 0; i < n; i++) {
		for (off = 0; off < mem[i]->size; off += piece) {
			uint64_t len = mem[i]->size - off;

			r->iov[k].iov_base = (uint8_t *)mem[i]->base + off;
			r->iov[k].iov_len = len < piece ? len : piece;
			k++;
		}
	}
	r->n_iov = k;
	rc = io_uring_register_buffers_sparse(&r->ring, k);
	if (rc == 0) {
		r->lazy = true;
		r->registered = true;
		return 0;
	}
	rc = io_uring_register_buffers(&r->ring, r->iov, k);
	if (rc < 0) {
		r->n_iov = 0;
		return err_set(err, -rc, "io_uring_register_buffers: %s",
			       strerror(-rc));
	}
	for (i = 0; i < k; i++)
		r->pinned[i] = true;
	r->registered = true;
	return 0;
}

/* Pin piece i now; on failure reads into it go unregistered. */
static bool ring_pin(struct io_ring *r, unsigned i)
{
	if (r->pinned[i])
		return true;
	if (io_uring_register_buffers_update_tag(&r->ring, i, &r->iov[i], NULL,
						 1) == 1)
		r->pinned[i] = true;
	return r->pinned[i];
}

bool io_ring_fixed(const struct io_ring *r)
{
	return r->registered;
}

/* The registered piece holding p, and how many bytes of it follow p. */
static int ring_buf_find(const struct io_ring *r, const uint8_t *p,
			 uint64_t *room)
{
	unsigned i;

	for (i = 0; i < r->n_iov; i++) {
		const uint8_t *b = r->iov[i].iov_base;

		if (p >= b && p < b + r->iov[i].iov_len) {
			*room = (uint64_t)(b + r->iov[i].iov_len - p);
			return (int)i;
		}
	}
	*room = UINT64_MAX;
	return -1;
}

static void ring_prep(struct io_ring *r, int fd, unsigned s)
{
	struct ring_slot *sl = &r->slots[s];
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);

	/* Never NULL: at most depth slots are busy and the SQ has depth. */
	if (sl->buf >= 0)
		io_uring_prep_read_fixed(sqe, fd, sl->dst, (unsigned)sl->len,
					 sl->off, sl->buf);
	else
		io_uring_prep_read(sqe, fd, sl->dst, (unsigned)sl->len,
				   sl->off);
	io_uring_sqe_set_data64(sqe, s);
	sl->busy = true;
}

/*
 * Handle one completion: the bytes that count as done, or a negative errno
 * (-ENODATA: the file ended before need_end). A short read is resubmitted
 * for its rest unless the file ended; the slot stays busy then.
 */
static int64_t ring_complete(struct io_ring *r, int fd, unsigned s, int res,
			     uint64_t file_size, uint64_t need_end,
			     uint64_t *from)
{
	struct ring_slot *sl = &r->slots[s];
	uint64_t at;

	*from = sl->off;
	if (res == -EAGAIN || res == -EINTR) {
		ring_prep(r, fd, s);
		return 0;
	}
	sl->busy = false;
	if (res < 0)
		return res;
	at = sl->off + (uint64_t)res;
	if ((uint64_t)res == sl->len)
		return res;
	/* Short: O_DIRECT reads the aligned superset, which may pass EOF. */
	if (at >= file_size || res == 0)
		return at >= need_end ? res : -ENODATA;
	sl->off = at;
	sl->dst += res;
	sl->len -= (uint64_t)res;
	ring_prep(r, fd, s);
	return res;
}

/*
 * Read [off, off + len) of fd into dst with up to depth reads in flight.
 * Bytes past need_end may be missing (the end of the file); -ENODATA (err
 * says EINVAL) if the file ends before, so that the caller can tell it
 * from a read the filesystem refused (-EINVAL). On failure nothing is left in flight except when
 * io_uring_enter itself failed: io_ring_close() then waits for the rest.
 */
int io_ring_read(struct io_ring *r, int fd, const char *path, uint64_t off,
		 uint64_t len, uint8_t *dst, uint64_t file_size,
		 uint64_t need_end, void (*done)(void *, uint64_t, uint64_t),
		 void *arg, struct err *err)
{
	uint64_t next = 0, room, n, from;
	unsigned s, in_flight = 0;
	struct io_uring_cqe *cqe;
	struct ring_slot *sl;
	int64_t got;
	int rc = 0, ret;

	for (;;) {
		for (s = 0; s < r->depth && next < len && rc == 0; s++) {
			sl = &r->slots[s];
			if (sl->busy)
				continue;
			n = len - next < r->chunk ? len - next : r->chunk;
			sl->buf = -1;
			if (r->registered) {
				sl->buf = ring_buf_find(r, dst + next, &room);
				if (sl->buf < 0) {
					rc = err_set(
						err, EFAULT,
						"%s: read target outside registered memory",
						path);
					break;
				}
				if (room < n)
					n = room;
				if (!ring_pin(r, (unsigned)sl->buf))
					sl->buf = -1;
			}
			sl->off = off + next;
			sl->len = n;
			sl->dst = dst + next;
			ring_prep(r, fd, s);
			in_flight++;
			next += n;
		}
		if (!in_flight)
			break;
		ret = io_uring_submit_and_wait(&r->ring, 1);
		if (ret < 0 && ret != -EINTR) {
			if (rc == 0)
				rc = err_set(err, -ret,
					     "%s: io_uring_enter: %s", path,
					     strerror(-ret));
			break;
		}
		while (io_uring_peek_cqe(&r->ring, &cqe) == 0) {
			s = (unsigned)io_uring_cqe_get_data64(cqe);
			sl = &r->slots[s];
			got = ring_complete(r, fd, s, cqe->res, file_size,
					    need_end, &from);
			io_uring_cqe_seen(&r->ring, cqe);
			if (!sl->busy)
				in_flight--;
			if (got > 0 && done)
				done(arg, from, (uint64_t)got);
			if (got >= 0 || rc < 0)
				continue;
			if (got == -ENODATA) {
				err_set(err, EINVAL,
					"%s: file ends before its tensor data (%llu bytes)",
					path, (unsigned long long)need_end);
				rc = -ENODATA;
			} else
				rc = err_set(err, (int)-got,
					     "%s: read at %llu: %s", path,
					     (unsigned long long)sl->off,
					     strerror((int)-got));
		}
	}
	return rc;
}
