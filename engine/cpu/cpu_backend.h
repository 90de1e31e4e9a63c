/* SPDX-License-Identifier: MIT */
/*
 * The CPU backend as the registry (engine/backend.c) sees it: the one
 * header of this folder that code outside it includes.
 */
#ifndef LLMFS_ENGINE_CPU_BACKEND_H
#define LLMFS_ENGINE_CPU_BACKEND_H

#include <stddef.h>
#include <stdint.h>

struct engine_backend;
struct engine_tensor;
struct io_gguf_tensor;
struct err;

/*
 * The CPU backend with a pool of threads threads (0: one per physical
 * core), in *out (engine_backend_free frees it). -ENOMEM with a message.
 */
int cpu_backend_new(struct engine_backend **out, uint32_t threads,
		    struct err *err);

/*
 * The CPU's packed panels (io_placement.layout CPU_BACKEND_LAYOUT): pack
 * w in place where its type and shape allow, its panels split over be's
 * threads (0 and nothing done where not; -ENOMEM), and read a packed tensor's bytes back in the file's
 * order (engine_backend_pack, engine_backend_packed_read).
 */
#define CPU_BACKEND_LAYOUT 1
int cpu_backend_pack(struct engine_backend *be, const struct engine_tensor *w);
void cpu_backend_packed_read(const struct io_gguf_tensor *t, const void *data,
			     uint64_t off, size_t size, void *buf);

#endif
