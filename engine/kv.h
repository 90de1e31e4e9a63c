/* SPDX-License-Identifier: MIT */
/*
 * The KV cache inside the engine, for engine/forward.c and the backends.
 *
 * Paged: a sequence's positions live in blocks of ENGINE_KV_BLOCK
 * positions, taken from its context's pool as the sequence grows and given
 * back when it shrinks or ends. A block is one piece of memory per layer,
 * in the memory of the backend that computes the layer, holding the K
 * rows of its positions and then their V rows:
 *
 *   block = [n_layer] -> { K[ENGINE_KV_BLOCK][k_row], V[ENGINE_KV_BLOCK][v_row] }
 *
 * so a position's row of one layer is contiguous (llama.cpp's
 * non-transposed V, as its flash attention reads it) and a run of the
 * block's positions has a constant stride. K and V are stored in the
 * sequence's types (chosen when it started).
 */
#ifndef LLMFS_ENGINE_KV_H
#define LLMFS_ENGINE_KV_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "engine.h"

struct engine_model;

/* positions per block */
#define ENGINE_KV_BLOCK 64

/*
 * The cache behind an interface (as llama.cpp's llama_kv_cache): the
 * forward pass stores a position's K and V and asks for typed views to
 * attend over; the layout (paged blocks, above), the types of K and V
 * and where the memory is are kv.c's business. struct engine_seq is
 * kv.c's own.
 */

/*
 * Where position pos of layer il keeps its K row (n_head_kv * head_dim
 * elements of the sequence's K type) and its V row, in the memory of the
 * context's backend: a pass stores them there (kv_store_rows). The
 * position's block must be held (engine_seq_grow).
 */
void engine_kv_slot(struct engine_seq *s, uint32_t il, uint32_t pos,
		    struct engine_kv_slot *slot);

/*
 * A run of positions of one layer whose rows are a constant stride apart,
 * typed: what attention reads (att_run). Head h's keys start at
 * k + h * k_head, its values at v + h * v_head.
 */
struct engine_kv_view {
	uint32_t type_k, type_v;
	const uint8_t *k, *v;	   /* the run's first position */
	size_t k_stride, v_stride; /* bytes from a position to the next */
	size_t k_head, v_head;	   /* bytes from a head to the next */
	uint32_t n;		   /* positions in the run */
};

/*
 * The run of layer il from position pos up to at most end (> pos, within
 * the held blocks): the rest of pos's block or less.
 */
void engine_kv_view(const struct engine_seq *s, uint32_t il, uint32_t pos,
		    uint32_t end, struct engine_kv_view *view);

/* Where passes over s write its embedding (engine_seq_set_embedding). */
float *engine_seq_embedding(const struct engine_seq *s,
			    enum engine_pooling *pooling);

/*
 * After a pass has stored positions [n_past, n_past + n): record their
 * tokens (room reserved by engine_seq_tokens_reserve) and count them.
 */
void engine_seq_append(struct engine_seq *s, const int32_t *tokens, size_t n);

/*
 * Hold blocks for positions [0, n) (engine_forward, before a pass).
 * -ENOSPC with a message when the pool's budget has no room.
 */
int engine_seq_grow(struct engine_seq *s, uint32_t n, struct err *err);
/*
 * Room for the ids of positions [0, n) (engine_forward records each
 * position's token, for prefix reuse and snapshots).
 */
int engine_seq_tokens_reserve(struct engine_seq *s, uint32_t n,
			      struct err *err);
/* Give back the blocks past position n_past (after a failed pass). */
void engine_seq_shrink(struct engine_seq *s);

/*
 * The KV cache's blocks of one context: a cap in bytes (within a budget
 * shared with other contexts, if any), the blocks taken from the
 * backend's memory. The context owns one (engine_ctx.kv)
 * and forwards engine.h's calls to it.
 */
struct engine_kv_pool {
	pthread_mutex_t lock;	      /* protects what follows */
	uint64_t cap;		      /* bytes the blocks may take (--kv-mem) */
	struct engine_budget *shared; /* also charged, if any; borrowed */
	uint64_t committed;	      /* bytes promised: held or reserved */
	uint64_t used;		      /* bytes of blocks held */
	uint64_t blocks;	      /* blocks held */
	uint32_t type_k, type_v;      /* for sequences started from now on */
	bool ready;		      /* the lock was made */
	/* set once at init: the shapes, where the blocks live */
	const struct engine_model *model;
	struct engine_backend *backend;
	/*
	 * [n_layer] the backend that computes each layer now (NULL: all
	 * backend): new blocks of a layer go to its memory, and a
	 * sequence's blocks follow it there (engine_seq_follow). The
	 * context's to set, between passes.
	 */
	struct engine_backend **layer_be;
};

/*
 * Move the sequence's blocks of each layer to the backend that computes
 * the layer now (the pool's layer_be), through the host where they
 * change backend; before a pass. -ENOMEM (a message): the blocks moved so
 * far stay moved, the others where they were; the sequence is whole.
 */
int engine_seq_follow(struct engine_seq *s, struct err *err);

/*
 * The pool's start (engine_ctx_new) for model m, its blocks in be's
 * memory, cap bytes at most (0: the shared budget's KV limit, or without
 * one the default budget of the memory left after the weights), also
 * charged to shared if not NULL, f16/f16; and its end, once every
 * sequence of it is freed.
 */
int engine_kv_pool_init(struct engine_kv_pool *p, const struct engine_model *m,
			struct engine_backend *be, uint64_t cap,
			struct engine_budget *shared, struct err *err);
void engine_kv_pool_destroy(struct engine_kv_pool *p);
/* engine_ctx_set_kv_types, engine_kv_stats of the pool */
int engine_kv_pool_set_types(struct engine_kv_pool *p, uint32_t type_k,
			     uint32_t type_v, struct err *err);
void engine_kv_pool_types(struct engine_kv_pool *p, uint32_t *type_k,
			  uint32_t *type_v);
void engine_kv_pool_stats(struct engine_kv_pool *p, struct engine_kv_stats *st);
/* engine_seq_new_typed: a sequence of p, ctx its owner (engine_seq_ctx) */
int engine_kv_seq_new(struct engine_kv_pool *p, struct engine_ctx *ctx,
		      uint32_t type_k, uint32_t type_v, struct engine_seq **out,
		      struct err *err);

#endif
