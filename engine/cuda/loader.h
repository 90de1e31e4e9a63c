/* SPDX-License-Identifier: MIT */
/*
 * The CUDA module as the engine reaches it (engine/cuda/loader.c): loaded
 * once, on first use, from $LLMFS_CUDA_MODULE or beside the executable.
 * For the engine's CUDA backend and the tests; the rest of llmfs asks
 * engine.h's engine_gpu_probe().
 */
#ifndef LLMFS_ENGINE_CUDA_LOADER_H
#define LLMFS_ENGINE_CUDA_LOADER_H

#include "../engine.h"
#include "module.h"

/*
 * The module's table, or NULL with the reason in err (no module found,
 * not loadable, another interface version). The table is the process's
 * for good: the module is never unloaded.
 */
const struct cuda_api *engine_cuda_api(struct err *err);
/* The file it was loaded from, NULL if none. */
const char *engine_cuda_module_path(void);

#endif
