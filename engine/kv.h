/* SPDX-License-Identifier: MIT */
/*
 * Sequences and their KV cache, for engine/forward.c and the backends.
 *
 * A sequence's positions live in blocks of ENGINE_KV_BLOCK positions of
 * its context's pool (kv_pool.h: the block layout, the budget), taken as
 * it grows and given back when it shrinks or ends. A prefix taken from
 * another sequence (engine_seq_copy_prefix) holds the same blocks; a
 * sequence about to write into a block another one holds copies it first
 * (engine_seq_grow). K and V are stored in the sequence's types (chosen
 * when it started).
 */
#ifndef LLMFS_ENGINE_KV_H
#define LLMFS_ENGINE_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "engine.h"
#include "kv_pool.h"

/*
 * The cache behind an interface (as llama.cpp's llama_kv_cache): the
 * forward pass stores a position's K and V and asks for typed views to
 * attend over; the layout (paged blocks, kv_pool.h), the types of K and
 * V and where the memory is are kv.c's business. struct engine_seq is
 * kv.c's own.
 */

/*
 * Where position pos of layer il keeps its K row (n_head_kv * head_dim
 * elements of the sequence's K type) and its V row, in the memory of the
 * backend computing the layer: a pass stores them there (kv_store_rows).
 * The position's block must be held and the sequence's own
 * (engine_seq_grow).
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
 * Hold blocks for positions [0, n), the blocks that positions [n_past,
 * n) fall in its own (copied where another sequence holds them):
 * engine_forward, before a pass. -ENOSPC with a message when the pool's
 * budget has no room, -ENOMEM; the blocks held before stay held.
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
 * What snapshots (snapshot.c) read and write: the sequence's K/V bytes
 * block by block (positions [64 b, 64 b + 64) that it fills), each
 * layer's K rows then its V rows. engine_seq_set_tokens makes s hold n
 * positions of those tokens (fresh blocks taken from the pool: -ENOSPC)
 * whose K/V the caller then writes.
 */
size_t engine_seq_block_size(const struct engine_seq *s, uint32_t b);
void engine_seq_block_read(const struct engine_seq *s, uint32_t b, void *out);
void engine_seq_block_write(struct engine_seq *s, uint32_t b, const void *in);
int engine_seq_set_tokens(struct engine_seq *s, const int32_t *tokens,
			  uint32_t n, struct err *err);

/* The same with given K/V types (a restored snapshot's). */
int engine_seq_new_typed(struct engine_ctx *ctx, uint32_t type_k,
			 uint32_t type_v, struct engine_seq **out,
			 struct err *err);
/* Bytes of one position's K (and V) in one layer. */
void engine_seq_row_bytes(const struct engine_seq *s, uint64_t *k_row,
			  uint64_t *v_row);

/* engine_seq_new_typed: a sequence of p, ctx its owner (engine_seq_ctx) */
int engine_kv_seq_new(struct engine_kv_pool *p, struct engine_ctx *ctx,
		      uint32_t type_k, uint32_t type_v, struct engine_seq **out,
		      struct err *err);

#endif
