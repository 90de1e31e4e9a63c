/* SPDX-License-Identifier: MIT */
/*
 * The KV cache inside the engine, for engine/kv.c and engine/forward.c.
 *
 * Paged: a sequence's positions live in blocks of ENGINE_KV_BLOCK
 * positions, taken from its model's pool as the sequence grows and given
 * back when it shrinks or ends. One block holds, layer after layer, the K
 * rows of its positions and then their V rows:
 *
 *   block = [n_layer] { K[ENGINE_KV_BLOCK][k_row], V[ENGINE_KV_BLOCK][v_row] }
 *
 * so a position's row of one layer is contiguous (llama.cpp's
 * non-transposed V, as its flash attention reads it) and a run of the
 * block's positions has a constant stride. K and V are stored in the
 * sequence's types (chosen when it started).
 */
#ifndef LLMFS_ENGINE_KV_H
#define LLMFS_ENGINE_KV_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* positions per block */
#define ENGINE_KV_BLOCK 64

struct engine_seq {
	struct engine_model *model;
	uint32_t type_k, type_v;
	uint32_t n_ctx;     /* positions it may reach (its ceiling) */
	uint32_t n_past;    /* positions filled: the sequence's length */
	size_t k_row;       /* bytes of one position's keys in one layer */
	size_t v_row;
	size_t block_bytes;
	uint32_t n_blocks;  /* blocks held */
	uint32_t n_reserved; /* blocks promised by engine_seq_reserve */
	uint32_t cap;       /* entries of blocks[] */
	uint8_t **blocks;
	int32_t *tokens;    /* the token at each position [0, n_past) */
	uint32_t tokens_cap;
};

static inline uint8_t *engine_seq_k(const struct engine_seq *s, uint32_t il,
		uint32_t pos)
{
	return s->blocks[pos / ENGINE_KV_BLOCK] +
		(size_t)il * ENGINE_KV_BLOCK * (s->k_row + s->v_row) +
		(pos % ENGINE_KV_BLOCK) * s->k_row;
}

static inline uint8_t *engine_seq_v(const struct engine_seq *s, uint32_t il,
		uint32_t pos)
{
	return s->blocks[pos / ENGINE_KV_BLOCK] +
		(size_t)il * ENGINE_KV_BLOCK * (s->k_row + s->v_row) +
		ENGINE_KV_BLOCK * s->k_row + (pos % ENGINE_KV_BLOCK) * s->v_row;
}

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

/* The pool's start (engine_model_open) and end. */
int engine_kv_pool_init(struct engine_model *m, uint64_t budget,
		struct err *err);
void engine_kv_pool_destroy(struct engine_model *m);

#endif
