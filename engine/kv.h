/* SPDX-License-Identifier: MIT */
/*
 * struct engine_seq inside the engine: the KV cache of one sequence, for
 * engine/kv.c and engine/forward.c.
 */
#ifndef LLMFS_ENGINE_KV_H
#define LLMFS_ENGINE_KV_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct engine_seq {
	struct engine_model *model;
	uint32_t n_ctx;     /* positions the cache holds */
	uint32_t n_past;    /* positions filled: the sequence's length */
	size_t k_row;       /* bytes of one position's keys in one layer */
	size_t v_row;
	uint8_t *k;         /* [n_layer][n_ctx][n_head_kv * head_dim] */
	uint8_t *v;         /* [n_layer][n_ctx][n_head_kv * head_dim_v] */
	uint8_t *mem;
};

static inline uint8_t *engine_seq_k(const struct engine_seq *s, uint32_t il,
		uint32_t pos)
{
	return s->k + ((size_t)il * s->n_ctx + pos) * s->k_row;
}

static inline uint8_t *engine_seq_v(const struct engine_seq *s, uint32_t il,
		uint32_t pos)
{
	return s->v + ((size_t)il * s->n_ctx + pos) * s->v_row;
}

#endif
