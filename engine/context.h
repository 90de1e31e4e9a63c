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

struct engine_ctx {
	struct engine_model *model;	/* borrowed; read only */
	struct engine_backend *backend; /* computes the forward pass */
	struct forward_scratch *fwd;	/* grown by engine_forward */
	struct engine_kv_pool kv;
};

/* Free the forward pass's buffers (engine_ctx_free). */
void engine_forward_release(struct engine_ctx *ctx);

#endif
