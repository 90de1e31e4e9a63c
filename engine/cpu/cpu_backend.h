/* SPDX-License-Identifier: MIT */
/*
 * The CPU backend as the registry (engine/backend.c) sees it: the one
 * header of this folder that code outside it includes.
 */
#ifndef LLMFS_ENGINE_CPU_BACKEND_H
#define LLMFS_ENGINE_CPU_BACKEND_H

#include <stdint.h>

struct engine_backend;
struct err;

/*
 * The CPU backend with a pool of threads threads (0: one per physical
 * core), in *out (engine_backend_free frees it). -ENOMEM with a message.
 */
int cpu_backend_new(struct engine_backend **out, uint32_t threads,
		    struct err *err);

#endif
