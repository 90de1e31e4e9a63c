/* SPDX-License-Identifier: MIT */
/*
 * A small persistent thread pool for splitting one operation (the rows of
 * a matmul) over the threads a model was opened with. The caller runs a
 * share itself; workers (pinned with LLMFS_PIN_THREADS=1) spin briefly
 * for the next job and then sleep on a futex, so a job costs no wake-up
 * while jobs follow each other and an idle model costs no CPU.
 */
#ifndef LLMFS_ENGINE_POOL_H
#define LLMFS_ENGINE_POOL_H

#include <stdint.h>

#include "../io/io.h"

struct engine_pool;

/* fn(arg, ith, nth) is called once for each ith in [0, nth). */
typedef void (*engine_pool_fn)(void *arg, uint32_t ith, uint32_t nth);

/* threads in all, the caller included; 0 or 1 starts no worker. */
int engine_pool_new(struct engine_pool **out, uint32_t threads,
		    struct err *err);
void engine_pool_free(struct engine_pool *p);
/* Threads a job is split into (1 for a NULL pool). */
uint32_t engine_pool_size(const struct engine_pool *p);
/* The default thread count: the physical cores this process may use. */
uint32_t engine_pool_default_threads(void);
/*
 * bytes of scratch memory owned by the pool (grown as needed, freed with
 * it; the previous contents are not kept), for the job its caller is
 * about to run; NULL for a NULL pool or when out of memory.
 */
void *engine_pool_scratch(struct engine_pool *p, size_t bytes);
/* Run fn on every thread and return when all are done; NULL p: inline. */
void engine_pool_run(struct engine_pool *p, engine_pool_fn fn, void *arg);

#endif
