/* SPDX-License-Identifier: MIT */
/*
 * Inside a context (engine.h, struct engine_ctx): what computes with a
 * model, as llama.cpp's llama_context. The model is borrowed and only
 * read; everything a forward pass writes is here: the backend and its
 * threads, the pass's scratch, the KV cache's pool and the sequences
 * made from it. Only the engine's .c files include this.
 */
#ifndef LLMFS_ENGINE_CONTEXT_H
#define LLMFS_ENGINE_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "kv.h"
#include "model.h"

/* The forward pass's buffers, sized for its batch (engine/forward.c). */
struct forward_scratch;

/* Backends one context computes with at most (the host's and devices'). */
#define ENGINE_CTX_BACKENDS 4

struct engine_ctx {
	struct engine_model *model; /* borrowed; read only */
	/*
	 * [0] the home backend, of the device the weights were loaded on
	 * (the CPU's); then one per device that computes part of the model
	 * (placement), made on first use
	 */
	struct engine_backend *backends[ENGINE_CTX_BACKENDS];
	uint32_t n_backends;
	struct engine_backend *backend; /* backends[0] */
	bool batch_exact;
	/*
	 * [n_layer] the backend of each layer's attention now (the layer's,
	 * or the home one where kv_in_ram): the KV pool follows it
	 */
	struct engine_backend **layer_be;
	/*
	 * [n_layer] the layer's KV cache in host RAM and its attention on
	 * the home backend while the rest of the layer computes elsewhere
	 * (placement 'kv blk.A-B cpu', llama.cpp's --no-kv-offload per
	 * layer; the planner's kv-in-ram). Written by placement commands,
	 * read by passes: as the weights, never while a pass runs.
	 */
	bool *kv_in_ram;
	/*
	 * [n_layer] the NUMA node of a kv_in_ram layer's cache (`kv blk.A-B
	 * numaN`, kv-in-ram's host beside the GPU); -1: the home backend's
	 * memory as it allocates it. The KV pool binds the blocks there.
	 */
	int *kv_node;
	/* positions new sequences may reach; 0: the model's n_ctx */
	uint32_t n_ctx_max;
	struct forward_scratch *fwd; /* grown by engine_forward */
	struct engine_kv_pool *kv;
	/* decode tokens/s noted per placement (placement_plan.c's lock) */
	double plan_measured[ENGINE_PLAN_N];
};

/*
 * The index in ctx->backends of the backend that computes on device (the
 * home one for every host device), made now if it is not there yet.
 * -ENODEV, -ENOSPC (more than ENGINE_CTX_BACKENDS), -ENOMEM.
 */
int engine_ctx_backend(struct engine_ctx *ctx, const char *device,
		       uint32_t *index, struct err *err);

/*
 * The planner's input for ctx (engine_plan_input_of_ctx) with what ctx
 * has measured: all-cpu's decode speed (the host's step), and into the
 * model's device set the VRAM each GPU's backend took at its open (the
 * reserve). placement_plan.c.
 */
void engine_placement_plan_input(struct engine_ctx *ctx,
				 struct engine_plan_input *in);

/* Free the forward pass's buffers (engine_ctx_free). */
void engine_forward_release(struct engine_ctx *ctx);

#endif
