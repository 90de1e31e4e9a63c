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

/*
 * Copy the n ranges of the file at path into dev's memory through the
 * staging ring (io_stage_file with the module's pinned buffers and
 * asynchronous copies). st may be NULL.
 */
int engine_cuda_stage(const struct cuda_api *api, struct cuda_dev *dev,
		      const char *path, const struct io_stage_range *ranges,
		      size_t n, const struct io_stage_options *opt,
		      struct io_stage_stats *st, struct err *err);

/*
 * A loaded model's tensors copied into dev's memory (engine/cuda/
 * upload.c), described for api->ctx_new: from the host copy the loader
 * made, or with from_file from the file through the staging ring.
 * -ENOSPC when they do not fit (nothing stays allocated). Free with
 * engine_cuda_model_free after every context made from it.
 */
struct engine_model;
struct engine_cuda_model;
int engine_cuda_model_upload(struct engine_model *m, const struct cuda_api *api,
			     struct cuda_dev *dev, bool from_file,
			     struct engine_cuda_model **out, struct err *err);
/* how the ring went (from_file) */
const struct io_stage_stats *
engine_cuda_model_stage_stats(const struct engine_cuda_model *cm);
const struct cuda_model_desc *
engine_cuda_model_desc(const struct engine_cuda_model *cm);
/* bytes of weights copied */
uint64_t engine_cuda_model_bytes(const struct engine_cuda_model *cm);
void engine_cuda_model_free(struct engine_cuda_model *cm);

#endif
