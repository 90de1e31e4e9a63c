/* SPDX-License-Identifier: MIT */
/*
 * A tiled block's steps in their order (attention_tiled.h), written once
 * for every level: included by attention_tiled.c (the scalar level) and
 * by attention_avx2.c, attention_avx512.c and attention_neon.c, each
 * after attention_tiled.h and its own steps, which it names:
 *
 *   ATT_TARGET                 the level's target attribute, or nothing
 *   att_tile_convert(dst, type, src, stride, n, dim)
 *                              n K or V rows into F32, dim apart
 *   att_tile_scores(t, n4)     the scores of positions [0, n4)
 *   att_tile_softmax(t, c0, n) the online softmax of the block at c0
 *   att_tile_values(t, c0, n)  the V sums; or, with ATT_TILE_PAIRS
 *                              defined, att_tile_values_rows(t, row, nr,
 *                              n, n_block) for nr (1 or 2) rows from row
 *                              over their first n positions, and the
 *                              pairs' walk below
 *
 * att_tile_steps is then the level's cpu_isa_att.tile_block.
 */
#ifndef LLMFS_ENGINE_CPU_ATTENTION_TILE_STEPS_H
#define LLMFS_ENGINE_CPU_ATTENTION_TILE_STEPS_H

#include <stdint.h>
#include <string.h>

#ifdef ATT_TILE_PAIRS
/* rows in attention_tiled.c's pairs, each pair over its more-seen row's */
ATT_TARGET static void att_tile_values(struct att_tile *t, uint32_t c0,
				       uint32_t n)
{
	uint32_t row, a, b;

	for (row = 0; row + 1 < t->rows; row += 2) {
		a = att_tile_seen(t, row, c0, n);
		b = att_tile_seen(t, row + 1, c0, n);
		if (a < b)
			a = b;
		/* a row that saw nothing here keeps its maximum: factor 1 */
		if (a)
			att_tile_values_rows(t, row, 2, a, n);
	}
	if (row < t->rows) {
		a = att_tile_seen(t, row, c0, n);
		if (a)
			att_tile_values_rows(t, row, 1, a, n);
	}
}
#endif

ATT_TARGET static void att_tile_steps(struct att_tile *t, uint32_t c0,
				      const uint8_t *k, size_t k_stride,
				      const uint8_t *v, size_t v_stride,
				      uint32_t n)
{
	const uint32_t dk = t->sh->head_dim;
	uint32_t n4 = (n + 3) & ~3u;

	att_tile_convert(t->kn, t->sh->type_k, k, k_stride, n, dk);
	/* the positions past n up to n4 are scored but never kept */
	memset(t->kn + (size_t)n * dk, 0, (size_t)(n4 - n) * dk * 4);
	att_tile_convert(t->vn, t->sh->type_v, v, v_stride, n,
			 t->sh->head_dim_v);
	att_tile_scores(t, n4);
	att_tile_softmax(t, c0, n);
	att_tile_values(t, c0, n);
}

#endif
