/* SPDX-License-Identifier: MIT */
/*
 * The CPU backend's thread pool (not to be confused with the KV cache's
 * pool of blocks): it splits one operation (the rows of a matmul) over
 * the threads a context was opened with. The caller runs a
 * share itself; workers (pinned with LLMFS_PIN_THREADS=1) spin briefly
 * for the next job and then sleep on a futex, so a job costs no wake-up
 * while jobs follow each other and an idle model costs no CPU.
 */
#ifndef LLMFS_ENGINE_CPU_THREADPOOL_H
#define LLMFS_ENGINE_CPU_THREADPOOL_H

#include <stdint.h>

#include "../../io/io.h"

struct cpu_threadpool;

/*
 * fn(arg, thread_index, thread_count) is called once for each
 * thread_index in [0, thread_count), thread_count being the pool's size.
 */
typedef void (*cpu_threadpool_fn)(void *arg, uint32_t thread_index,
				  uint32_t thread_count);

/* threads in all, the caller included; 0 or 1 starts no worker. */
int cpu_threadpool_new(struct cpu_threadpool **out, uint32_t threads,
		       struct err *err);
void cpu_threadpool_free(struct cpu_threadpool *p);
/* Threads a job is split into (1 for a NULL pool). */
uint32_t cpu_threadpool_size(const struct cpu_threadpool *p);
/* The default thread count: the physical cores this process may use. */
uint32_t cpu_threadpool_default_threads(void);
/*
 * bytes of scratch memory owned by the pool (grown as needed, freed with
 * it; the previous contents are not kept), for the job its caller is
 * about to run; NULL for a NULL pool or when out of memory.
 */
void *cpu_threadpool_scratch(struct cpu_threadpool *p, size_t bytes);
/* Run fn on every thread and return when all are done; NULL p: inline. */
void cpu_threadpool_run(struct cpu_threadpool *p, cpu_threadpool_fn fn,
			void *arg);

#endif
