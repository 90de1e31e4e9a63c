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

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "model.h"

/* The KV cache's blocks of one context (engine/kv.c). */
struct engine_kv_pool {
	pthread_mutex_t lock;	      /* protects what follows */
	uint64_t cap;		      /* bytes the blocks may take (--kv-mem) */
	struct engine_budget *shared; /* also charged, if any; borrowed */
	uint64_t committed;	      /* bytes promised: held or reserved */
	uint64_t used;		      /* bytes of blocks held */
	uint64_t blocks;	      /* blocks held */
	uint32_t type_k, type_v;      /* for sequences started from now on */
	bool ready;		      /* the lock was made */
};

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
