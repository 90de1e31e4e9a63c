/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend as the registry (engine/backend.c) sees it: the one
 * header of this folder that the registry includes.
 *
 * Devices "gpu0", "gpu1", ...: the GPUs of the CUDA module
 * (build/lib/llmfs-cuda.so, dlopen'ed by loader.c), each op of
 * engine/backend.h one call of the module's (module.h), its memory VRAM.
 * A device exists where the module loads and opens it; elsewhere the
 * registry has no row for it and `placement` refuses it by name.
 */
#ifndef LLMFS_ENGINE_CUDA_BACKEND_H
#define LLMFS_ENGINE_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct engine_backend;
struct err;

/*
 * Whether device ("gpu0") is a GPU of the CUDA module: the module
 * loads and opens it (once; the answer is kept for the process).
 */
bool cuda_backend_present(const char *device);

/*
 * A backend computing on device (present). threads is unused (the
 * GPU's split of long attention rows is its own). -ENODEV, -ENOMEM with
 * a message.
 */
int cuda_backend_new(struct engine_backend **out, const char *device,
		     uint32_t threads, struct err *err);

/*
 * Device memory for the weights a model places on device: NULL when out
 * of it; free; a copy in any direction (host <-> device, device <->
 * device), finished when it returns.
 */
void *cuda_backend_weights_alloc(const char *device, size_t bytes);
void cuda_backend_weights_free(const char *device, void *p);
void cuda_backend_weights_copy(const char *device, void *dst, const void *src,
			       size_t bytes);

/*
 * How a deferred load reads weights placed on device straight into its
 * VRAM (engine_backend_stage_sink): the module's pinned buffers
 * (cudaHostAlloc) and asynchronous copies on the weights' handle, one
 * copy slot per ring buffer. -ENODEV where device is not present.
 */
struct io_stage_sink;
int cuda_backend_stage_sink(const char *device, struct io_stage_sink *sink,
			    struct err *err);

/*
 * The VRAM cap of device (vram_cap.c; --devices gpu0:vram=8G on a real
 * card, set by engine_gpu_probe): the bytes the backend may place there,
 * 0 for none. capped: whether device has one, with it and the bytes
 * counted against it now.
 */
void cuda_backend_cap_set(const char *device, uint64_t cap);
bool cuda_backend_capped(const char *device, uint64_t *cap, uint64_t *used);

/*
 * Decode segments the backends of this process launched as graphs:
 * replayed as kept (no capture), and captured (a graph made or updated
 * from the segment's calls). LLMFS_CUDA_GRAPH (backend_graph.c) picks
 * how: unset or 1 replays, "capture" captures each, 0 neither.
 */
void cuda_backend_graph_counts(uint64_t *replays, uint64_t *captures);

#endif
