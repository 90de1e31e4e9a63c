/* SPDX-License-Identifier: MIT */
/*
 * io/ internals of the weights module: memory regions, the read paths
 * (io_uring + O_DIRECT, buffered pread) and the NUMA planner. Nothing
 * outside io/ includes this file.
 *
 * A region is one allocation holding the bytes of one or more tensors. The
 * loader makes one region per file (its whole tensor data section, laid out
 * so that file offset and memory address are congruent modulo 4096, which
 * is what O_DIRECT needs); io_weights_move() gives a tensor its own region.
 * A region counts the tensors resident in it and is freed when the count
 * reaches zero.
 */
#ifndef LLMFS_IO_WEIGHTS_INTERNAL_H
#define LLMFS_IO_WEIGHTS_INTERNAL_H

#include "io.h"

#define IO_PAGE 4096u
#define IO_HUGE (2u << 20)

/* ---- memory (memory.c) ------------------------------------------------- */

enum io_mem_kind {
	IO_MEM_ALIGNED,   /* posix_memalign, 2 MiB aligned */
	IO_MEM_NUMA,      /* numa_alloc_onnode / numa_alloc_interleaved */
	IO_MEM_CUDA_HOST, /* cudaHostAlloc (only with -DLLMFS_CUDA) */
};

struct io_mem {
	void *base;
	size_t size;          /* rounded up to IO_HUGE */
	enum io_mem_kind kind;
	int node;             /* -1: no particular node */
	bool locked;          /* mlock succeeded */
};

/* Called with one line when the loader falls back or degrades. */
typedef void (*io_notice_fn)(void *arg, const char *msg);

/*
 * Allocate size bytes (zero-filled on first touch), 2 MiB aligned, backed by
 * huge pages where the kernel agrees (MADV_HUGEPAGE). node >= 0 binds the
 * memory to that NUMA node, IO_MEM_INTERLEAVE interleaves it over all
 * nodes, -1 leaves it to first touch.
 */
int io_mem_alloc(struct io_mem *m, size_t size, int node, struct err *err);
/*
 * Lock m in RAM if RLIMIT_MEMLOCK allows, else say so once through notice.
 * Called after the bytes are in, so that locking faults nothing in.
 */
void io_mem_lock(struct io_mem *m, io_notice_fn notice, void *arg);
void io_mem_free(struct io_mem *m);

#define IO_MEM_INTERLEAVE (-2)

/* ---- io_uring reads (uring.c) ------------------------------------------ */

struct io_ring;

/*
 * A ring with depth entries whose reads are at most chunk bytes. Fails
 * with the errno of io_uring_setup (ENOSYS, EPERM, ENOMEM): the caller then
 * reads with pread.
 */
int io_ring_open(struct io_ring **out, uint32_t depth, uint64_t chunk,
		 struct err *err);
/* Waits for (cancels) anything in flight: call before freeing the memory. */
void io_ring_close(struct io_ring *r);
/* Register the n regions as fixed buffers; on failure reads stay plain. */
int io_ring_register(struct io_ring *r, struct io_mem *const *mem, unsigned n,
		     struct err *err);
bool io_ring_fixed(const struct io_ring *r);
int io_ring_read(struct io_ring *r, int fd, const char *path, uint64_t off,
		 uint64_t len, uint8_t *dst, uint64_t file_size,
		 uint64_t need_end, void (*step)(void *, uint64_t), void *arg,
		 struct err *err);

#endif
