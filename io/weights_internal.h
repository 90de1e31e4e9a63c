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

#include <pthread.h>
#include <stdbool.h>

#include "io.h"

#define IO_PAGE 4096u
#define IO_HUGE (2u << 20)
#define IO_NUMA_MAX_NODES 64

/* ---- memory (memory.c) ------------------------------------------------- */

enum io_mem_kind {
	IO_MEM_ALIGNED, /* posix_memalign, 2 MiB aligned */
	IO_MEM_NUMA,	/* numa_alloc_onnode / numa_alloc_interleaved */
	IO_MEM_CUDA_HOST, /* pinned by cudaHostRegister (only with -DLLMFS_CUDA) */
};

struct io_mem {
	void *base;
	size_t size; /* rounded up to IO_HUGE */
	enum io_mem_kind kind;
	int node;    /* -1: no particular node */
	bool locked; /* mlock succeeded */
};

/* Called with one line when the loader falls back or degrades. */
typedef void (*io_notice_fn)(void *arg, const char *msg);

/*
 * Allocate size bytes (zero-filled on first touch), 2 MiB aligned. node >= 0 binds the
 * memory to that NUMA node, IO_MEM_INTERLEAVE interleaves it over all
 * nodes, -1 leaves it to first touch.
 */
int io_mem_alloc(struct io_mem *m, size_t size, int node, struct err *err);
/*
 * Lock m in RAM if RLIMIT_MEMLOCK allows, else say so once through notice.
 * Called after the bytes are in, so that locking faults nothing in.
 */
void io_mem_lock(struct io_mem *m, io_notice_fn notice, void *arg);
/* Page-lock for CUDA DMA (cudaHostRegister); a no-op without -DLLMFS_CUDA. */
void io_mem_cuda_pin(struct io_mem *m, io_notice_fn notice, void *arg);
/* MADV_HUGEPAGE, after the load (see memory.c for why not before). */
void io_mem_huge(struct io_mem *m);
/*
 * Merge [off, off + len) of m into huge pages now (MADV_COLLAPSE): 0,
 * -EINVAL where the kernel cannot (before Linux 6.1, or without THP), or
 * another negative errno for pages it could not merge this time.
 */
int io_mem_collapse(struct io_mem *m, size_t off, size_t len);
void io_mem_free(struct io_mem *m);

#define IO_MEM_INTERLEAVE (-2)

struct io_numa_plan;
struct io_span;

/* ---- the weights (weights.c, move.c) ---------------------------------- */

struct io_region {
	struct io_mem mem;
	uint64_t file_start; /* file offset held at mem.base (file regions) */
	uint64_t refs;	     /* tensors resident here; freed at 0 */
};

/* What the loader knows of one file. */
struct load_file {
	uint64_t start, end; /* the span its tensors occupy */
	uint64_t base_off;   /* start rounded down to IO_PAGE: held at base */
	uint64_t n;	     /* its tensors */
	uint64_t n_read;     /* ... read into io/'s memory (not staged) */
	uint64_t first;	     /* its first tensor in io_weights.by_offset */
	uint32_t region[IO_NUMA_MAX_NODES]; /* of each copy */
};

struct io_weights {
	const struct io_gguf *g;
	struct io_load_options opt;
	uint32_t n_copies;	      /* 1, or one per node (replicate) */
	struct io_placement *pl;      /* n_copies x n_tensors records */
	uint32_t *region_of;	      /* n_copies x n_tensors region indices */
	bool locked;		      /* the load mlocked its regions */
	char home[16];		      /* the device the load chose */
	struct io_device_set devices; /* where tensors may move */
	struct io_region *regions;
	uint32_t n_regions, cap_regions;
	/* io_weights_collapse_step's place: region, bytes in; done */
	uint32_t collapse_region;
	size_t collapse_off;
	bool collapse_done;
	struct io_load_stats stats;
	double t0; /* when the load began */

	/*
	 * A deferred load (io_load_options.defer) before io_weights_start:
	 * no region, nothing read. staged[i]: tensor i was detached to
	 * another device's memory then, and the start reads it there.
	 */
	bool deferred, started;
	bool *staged;

	/* The reading, on this thread or (async) the loader thread. */
	struct load_file *lf; /* n_files, until the load ends */
	struct io_numa_plan *plan;
	bool async;
	pthread_t loader;

	/* Arrival of the bytes (arrival.c), guarded by mu. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t *by_offset; /* tensor indices sorted by (file, offset) */
	uint64_t cursor, cursor_end; /* next tensor of the current file */
	uint64_t mark;		     /* current file in up to this offset */
	struct io_span *pending;     /* arrived beyond mark, sorted, merged */
	uint32_t n_pending, cap_pending;
	bool finished; /* the reading is over */
	int load_rc;   /* its result */
	struct err load_err;
};

struct io_span {
	uint64_t start, end;
};

/* ---- arrival (arrival.c) ----------------------------------------------- */

int io_arrival_init(struct io_weights *w, struct err *err);
void io_arrival_destroy(struct io_weights *w);
/* Reading of file f begins (again) with bytes before mark counted in. */
void io_arrival_file_begin(struct io_weights *w, uint32_t f, uint64_t mark);
/*
 * The current file's bytes before `to` count as in without being read
 * (the ranges of staged tensors the reading steps over).
 */
void io_arrival_skip(struct io_weights *w, uint64_t to);
/* done callback of the read paths: [off, off + n) of the current file. */
void io_arrival_done(void *arg, uint64_t off, uint64_t n);
/* The reading ended with rc: everything is ready, or waiters get rc. */
void io_arrival_finish(struct io_weights *w, int rc, const struct err *err);

int io_weights_region_add(struct io_weights *w, uint32_t *idx, struct err *err);
/* One resident tensor fewer; the region's memory goes with the last. */
/* region_of of a tensor whose bytes left io/'s memory (io_weights_detach) */
#define IO_REGION_NONE UINT32_MAX
void io_weights_region_put(struct io_weights *w, uint32_t idx);
void io_weights_notice(struct io_weights *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

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
/* done(arg, file offset, bytes) as reads complete, from this thread. */
int io_ring_read(struct io_ring *r, int fd, const char *path, uint64_t off,
		 uint64_t len, uint8_t *dst, uint64_t file_size,
		 uint64_t need_end, void (*done)(void *, uint64_t, uint64_t),
		 void *arg, struct err *err);

/* ---- pread reads (pread.c) --------------------------------------------- */

/*
 * Read [off, off + len) of fd into dst (which holds file offset off) with
 * `threads` threads taking chunk-sized pieces, the caller's among them;
 * done(arg, file offset, bytes) is called from any of them as bytes
 * arrive. Bytes past need_end may be missing (end of file). 0, -ENODATA
 * when the file ends before need_end (err says EINVAL), or the negative
 * errno of a failed read.
 */
int io_pread_range(int fd, const char *path, uint64_t off, uint64_t len,
		   uint8_t *dst, uint64_t file_size, uint64_t need_end,
		   uint64_t chunk, unsigned threads,
		   void (*done)(void *, uint64_t, uint64_t), void *arg,
		   struct err *err);

/* ---- NUMA (numa.c) ----------------------------------------------------- */

struct io_numa_node {
	int id;		      /* the kernel's node number */
	uint64_t free_bytes;  /* memory free on it now */
	uint64_t total_bytes; /* its memory; 0 if unknown */
	uint32_t n_cpus;
};

/* The machine as the planner sees it: real (io_numa_topology_read) or made up. */
struct io_numa_topology {
	uint32_t n_nodes; /* 0: no NUMA support, treated as one node */
	struct io_numa_node nodes[IO_NUMA_MAX_NODES];
};

/*
 * Where each copy of each tensor goes. node[c * n_tensors + i] is the node
 * of copy c of tensor i: a node id, IO_MEM_INTERLEAVE, or -1 (first touch).
 * n_copies is 1 except with IO_NUMA_REPLICATE (one per node).
 */
struct io_numa_plan {
	uint32_t n_copies;
	uint64_t n_tensors;
	int *node;
	int copy_node[IO_NUMA_MAX_NODES]; /* the node copy c serves */
	uint64_t node_bytes
		[IO_NUMA_MAX_NODES]; /* planned bytes per topology node */
};

/* Fill topo from libnuma (one node with all memory where NUMA is absent). */
int io_numa_topology_read(struct io_numa_topology *topo, struct err *err);
/*
 * Tests only: when set, io_numa_topology_read() reports what this fills in
 * instead of the machine (room checks of moves on a made-up topology).
 */
extern void (*io_numa_topology_fake)(struct io_numa_topology *topo);
/*
 * The pure planner: topology + policy (+ node for IO_NUMA_NODE) + tensor
 * sizes -> plan. -EINVAL for a node the topology lacks, -ENOSPC (naming
 * the node) when a node has no room for what the policy puts there.
 * Free the plan with io_numa_plan_free().
 */
int io_numa_plan_make(struct io_numa_plan *plan,
		      const struct io_numa_topology *topo,
		      enum io_numa_policy policy, int node,
		      const uint64_t *tensor_bytes, uint64_t n_tensors,
		      struct err *err);
void io_numa_plan_free(struct io_numa_plan *plan);

#endif
