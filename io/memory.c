/* SPDX-License-Identifier: MIT */
/*
 * Weight memory: 2 MiB aligned anonymous mappings, asked to be backed by
 * transparent huge pages once loaded (a 7B model is 2 million 4 KiB pages
 * otherwise, and every TLB miss in a matrix-vector product costs), optionally bound to
 * one NUMA node or interleaved over all of them, and locked when the
 * RLIMIT_MEMLOCK allows so that the kernel never pages weights out.
 *
 * The mapping is made by hand (mmap of size + 2 MiB, then the unaligned
 * head and tail are unmapped) rather than by numa_alloc_onnode(), which
 * only aligns to 4 KiB; the node binding is applied with mbind() before
 * the first touch, which is all numa_alloc_onnode() does anyway.
 */
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "weights_internal.h"

#ifdef LLMFS_CUDA
#include <cuda_runtime_api.h>
#endif

static size_t mem_round_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

static int mem_bind(void *p, size_t size, int node, struct err *err)
{
	struct bitmask *mask;
	int rc = 0;

	if (node == -1 || numa_available() < 0)
		return 0;
	if (node == IO_MEM_INTERLEAVE) {
		numa_interleave_memory(p, size, numa_all_nodes_ptr);
		return 0;
	}
	if (node > numa_max_node())
		return err_set(err, EINVAL, "no NUMA node %d (highest is %d)",
			       node, numa_max_node());
	mask = numa_allocate_nodemask();
	if (!mask)
		return err_set(err, ENOMEM,
			       "out of memory for a NUMA node mask");
	numa_bitmask_setbit(mask, (unsigned)node);
	if (mbind(p, size, MPOL_BIND, mask->maskp, mask->size + 1, 0) < 0)
		rc = err_set(err, errno, "mbind to NUMA node %d: %s", node,
			     strerror(errno));
	numa_free_nodemask(mask);
	return rc;
}

int io_node_alloc(void **out, size_t bytes, int node, struct err *err)
{
	const size_t len = mem_round_up(bytes ? bytes : 1, IO_PAGE);
	void *p;
	int rc;

	*out = NULL;
	if (node < 0)
		return err_set(err, EINVAL, "no NUMA node %d", node);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return err_set(err, ENOMEM, "cannot map %zu KiB on node %d: %s",
			       len >> 10, node, strerror(errno));
	rc = mem_bind(p, len, node, err);
	if (rc < 0) {
		munmap(p, len);
		return rc;
	}
	*out = p;
	return 0;
}

void io_node_free(void *p, size_t bytes)
{
	if (p)
		munmap(p, mem_round_up(bytes ? bytes : 1, IO_PAGE));
}

/*
 * A refused mlock is no error: the weights just may be paged out under
 * memory pressure, which the user is told once. The limit is not checked
 * first: CAP_IPC_LOCK (root) is exempt from it. MLOCK_ONFAULT locks pages
 * as they arrive, so that locking before the reads costs no walk over the
 * pages afterwards (0.05-0.1 s per GB measured); it falls back to mlock on
 * kernels before 4.4.
 */
void io_mem_lock(struct io_mem *m, io_notice_fn notice, void *arg)
{
	struct rlimit rl;
	char msg[200];
	int e;

	if (mlock2(m->base, m->size, MLOCK_ONFAULT) == 0 ||
	    (errno == ENOSYS && mlock(m->base, m->size) == 0)) {
		m->locked = true;
		return;
	}
	e = errno;
	if (!notice)
		return;
	if ((e == ENOMEM || e == EPERM) &&
	    getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		snprintf(
			msg, sizeof(msg),
			"weights not locked in memory: RLIMIT_MEMLOCK is %llu KiB, they need %zu KiB (ulimit -l)",
			(unsigned long long)rl.rlim_cur / 1024, m->size / 1024);
	else
		snprintf(msg, sizeof(msg),
			 "weights not locked in memory: mlock: %s",
			 strerror(e));
	notice(arg, msg);
}

int io_mem_alloc(struct io_mem *m, size_t size, int node, struct err *err)
{
	size_t len, head, tail;
	uint8_t *p, *base;
	int rc;

	memset(m, 0, sizeof(*m));
	m->node = node;
	if (size == 0)
		size = 1;
	if (size > SIZE_MAX - 2 * (size_t)IO_HUGE)
		return err_set(err, ENOMEM, "cannot allocate %zu bytes", size);
	len = mem_round_up(size, IO_HUGE);
	p = mmap(NULL, len + IO_HUGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return err_set(err, ENOMEM,
			       "cannot map %zu MiB for weights: %s", len >> 20,
			       strerror(errno));
	base = (uint8_t *)mem_round_up((uintptr_t)p, IO_HUGE);
	head = (size_t)(base - p);
	tail = IO_HUGE - head;
	if (head)
		munmap(p, head);
	if (tail)
		munmap(base + len, tail);
	m->base = base;
	m->size = len;
	m->kind = node == -1 ? IO_MEM_ALIGNED : IO_MEM_NUMA;
	/* Advice only: a kernel without THP still gives 4 KiB pages. */
	rc = mem_bind(base, len, node, err);
	if (rc < 0) {
		munmap(base, len);
		memset(m, 0, sizeof(*m));
		return rc;
	}
	return 0;
}

/*
 * Ask for huge pages once the bytes are in: madvised at allocation, every
 * fault of the load may stall in direct compaction (seconds for a GB on a
 * fragmented machine, measured); madvised afterwards, khugepaged collapses
 * the pages in the background and the load runs at disk speed.
 */
void io_mem_huge(struct io_mem *m)
{
	madvise(m->base, m->size, MADV_HUGEPAGE);
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 */
#endif

/*
 * khugepaged merges what io_mem_huge advised 16 MiB every 10 s by
 * default, so a model's weights stay 4 KiB pages for minutes, and decode
 * is slower until they are merged (engine.md, "Decode batches of a few
 * sequences"). MADV_COLLAPSE merges a range now, on the caller.
 */
int io_mem_collapse(struct io_mem *m, size_t off, size_t len)
{
	if (off >= m->size)
		return 0;
	if (len > m->size - off)
		len = m->size - off;
	if (madvise((uint8_t *)m->base + off, len, MADV_COLLAPSE) == 0)
		return 0;
	return -errno;
}

/*
 * Page-lock the region for CUDA so that copies to the GPU are DMA from
 * these very pages (no staging copy in the driver). The issue asked for
 * cudaHostAlloc; cudaHostRegister of our own mapping pins the same way and
 * keeps what the mapping gives: 2 MiB alignment, the NUMA binding, the
 * O_DIRECT layout, and pages the reads already faulted in. Only in builds
 * with -DLLMFS_CUDA (and -lcudart); a machine without a GPU skips it.
 */
#ifdef LLMFS_CUDA
void io_mem_cuda_pin(struct io_mem *m, io_notice_fn notice, void *arg)
{
	char msg[200];
	cudaError_t e;
	int n = 0;

	if (m->kind == IO_MEM_CUDA_HOST ||
	    cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
		return;
	e = cudaHostRegister(m->base, m->size, cudaHostRegisterPortable);
	if (e == cudaSuccess) {
		m->kind = IO_MEM_CUDA_HOST;
		return;
	}
	if (notice) {
		snprintf(msg, sizeof(msg),
			 "weights not pinned for CUDA: cudaHostRegister: %s",
			 cudaGetErrorString(e));
		notice(arg, msg);
	}
}
#else
void io_mem_cuda_pin(struct io_mem *m, io_notice_fn notice, void *arg)
{
}
#endif

void io_mem_free(struct io_mem *m)
{
	if (!m || !m->base)
		return;
#ifdef LLMFS_CUDA
	if (m->kind == IO_MEM_CUDA_HOST)
		cudaHostUnregister(m->base);
#endif
	munmap(m->base, m->size);
	memset(m, 0, sizeof(*m));
}
