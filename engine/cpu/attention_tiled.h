/* SPDX-License-Identifier: MIT */
/*
 * Tiled flash attention for a prompt (the fast order of a batch, taken
 * when engine_backend.batch_exact is false): the queries of one sequence
 * that share a KV head, up to ATT_TILE_ROWS (query, head) rows at once,
 * over the cached positions in blocks of ATT_TILE_BLOCK. Each block's K
 * and V rows are converted to F32 once for all the rows of the tile; the
 * scores, the online softmax and the V sums are F32 with the rows in the
 * vector lanes (no horizontal sums); a row sees the positions up to its
 * own (the causal mask; the masked cells contribute nothing, as in
 * ggml's flash attention). Q is rounded to K's vec_dot type first (F16
 * for F16 K), as ggml does.
 *
 * Not the one-token path's bits (that path rounds the V sum to F16 at
 * every position): softmax(Q.K^T * scale) V within F32 rounding.
 * tests/engine/test_attention.c holds it to a double-precision reference.
 */
#ifndef LLMFS_ENGINE_CPU_ATTENTION_TILED_H
#define LLMFS_ENGINE_CPU_ATTENTION_TILED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attention.h"

/* (query, head) rows of one tile: eight vectors of 16 lanes */
#define ATT_TILE_ROWS 128
/* the longest head a tile takes */
#define ATT_TILE_DIM_MAX 256
/* positions converted and scored at a time */
#define ATT_TILE_BLOCK 64

/*
 * Whether the tiled path computes for sh: F16 or F32 K and V, head dims
 * multiples of 16 up to 256 (at every CPU level: the scalar one defines
 * the order, engine/cpu/isa.h's tile kernels give its bits).
 */
bool att_tile_usable(const struct att_shape *sh);

/* Bytes of per-thread scratch att_tile_begin needs (any type pair). */
size_t att_tile_scratch_bytes(const struct att_shape *sh);

/* One tile's state; its arrays live in the borrowed scratch. */
struct att_tile {
	const struct att_shape *sh;
	uint32_t rows;	  /* n_q * n_group: row i * n_group + g */
	uint32_t ld;	  /* rows rounded up to 16: the lanes */
	uint32_t pos_max; /* the last position any row sees */
	float *qt;	  /* [head_dim][ld] Q, transposed, rounded */
	int32_t *pos;	  /* [ld] each row's position, -1 past rows */
	float *m, *s;	  /* [ld] the running maximum and sum */
	float *o;	  /* [ld][head_dim_v] the unnormalized result */
	float *kn, *vn;	  /* [ATT_TILE_BLOCK][head_dim(_v)] a block */
	float *p;	  /* [ATT_TILE_BLOCK + 1][ld] scores, weights */
};

/*
 * Positions a row sees in the block at c0 of n (the same count at every
 * level: it decides which positions a row pair's FMA chain takes).
 */
static inline uint32_t att_tile_seen(const struct att_tile *t, uint32_t row,
				     uint32_t c0, uint32_t n)
{
	int64_t k = (int64_t)t->pos[row] - c0 + 1;

	return k <= 0 ? 0 : k >= n ? n : (uint32_t)k;
}

/*
 * Start a tile of n_q queries of n_group heads each (n_q * n_group <=
 * ATT_TILE_ROWS): head g of query i has its Q at q[i] + g * head_dim and
 * sees the positions 0..pos[i]. scratch: att_tile_scratch_bytes,
 * 64-aligned, borrowed until att_tile_end. sh must be att_tile_usable.
 */
void att_tile_begin(struct att_tile *t, const struct att_shape *sh,
		    uint32_t n_q, uint32_t n_group, const float *const *q,
		    const uint32_t *pos, void *scratch);

/*
 * Positions c0 .. c0 + n - 1 (the calls may cut the positions anywhere,
 * in any order): K rows at k + i * k_stride, V rows at v + i * v_stride.
 * Positions past every row's own are not read.
 */
void att_tile_run(struct att_tile *t, uint32_t c0, const uint8_t *k,
		  size_t k_stride, const uint8_t *v, size_t v_stride,
		  uint32_t n);

/*
 * The normalized result of head g of query i into out[i] + g * head_dim_v
 * (0 for a row that saw no position); n_group as att_tile_begin's.
 */
void att_tile_end(struct att_tile *t, float *const *out, uint32_t n_group);

#endif
