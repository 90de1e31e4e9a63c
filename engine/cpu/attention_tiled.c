// SPDX-License-Identifier: MIT
/*
 * Tiled flash attention of a tile of (query, head) rows (attention_tiled.h).
 *
 * The rows lie in the vector lanes: Q is stored transposed (qt[d][row]),
 * so a position's scores for 16 rows are 16 lanes of one FMA chain over d
 * with K's element broadcast, and the softmax's maximum and sum per row
 * are lane-wise maxima and additions over the positions. The V sums keep
 * the result rows in natural order (o[row][d]) and broadcast each row's
 * weight. Per block of 64 positions: K and V converted to F32 once, the
 * scores (4 positions x up to 4 row vectors in 16 accumulators), the new
 * maxima, one batch of expf over all the block's weights (and the
 * correction factors of the old sums), the V sums (2 rows x 8 vectors of
 * head_dim_v in 16 accumulators). Rows whose position lies before the
 * block skip its V sum. A tile holds up to 128 rows (64 queries of a
 * model with two query heads per KV head), so that each block's K and V
 * are read from the cache and converted once for all of them; the
 * scores go 64 rows at a time.
 */
#include <math.h>
#include <string.h>

#include "../quant/quant.h"
#include "attention_tiled.h"
#include "cpu.h"
#include "isa.h"

size_t att_tile_scratch_bytes(const struct att_shape *sh)
{
	const size_t r = ATT_TILE_ROWS;

	return cpu_align64((size_t)sh->head_dim * r * 4) +
	       cpu_align64(r * 4) * 3 + cpu_align64(r * sh->head_dim_v * 4) +
	       cpu_align64((size_t)ATT_TILE_BLOCK * sh->head_dim * 4) +
	       cpu_align64((size_t)ATT_TILE_BLOCK * sh->head_dim_v * 4) +
	       cpu_align64((ATT_TILE_BLOCK + 1) * r * 4);
}

bool att_tile_usable(const struct att_shape *sh)
{
	return quant_traits(sh->type_k)->kv_elem != QUANT_KV_CONVERT &&
	       quant_traits(sh->type_v)->kv_elem != QUANT_KV_CONVERT &&
	       sh->head_dim % 16 == 0 && sh->head_dim_v % 16 == 0 &&
	       sh->head_dim && sh->head_dim_v &&
	       sh->head_dim <= ATT_TILE_DIM_MAX &&
	       sh->head_dim_v <= ATT_TILE_DIM_MAX;
}

/*
 * ---- the scalar definition of a tile's order ------------------------------
 *
 * What each level's tile_block (engine/cpu/isa.h) computes, lane by lane:
 * the vector versions keep every row's own chain of floats, so they give
 * these bits.
 */

/* n rows of dim elements of type into dst (F32, dim apart) */
static void att_tile_convert(float *dst, uint32_t type, const uint8_t *src,
			     size_t stride, uint32_t n, uint32_t dim)
{
	uint32_t r;

	for (r = 0; r < n; r++, src += stride, dst += dim)
		quant_to_float(type, src, dst, dim);
}

/*
 * p[c][row] = scale * sum_d kn[c][d] * qt[d][row]: one FMA chain over d
 * per (position, row) from 0, then the product with scale.
 */
static void att_tile_scores(struct att_tile *t, uint32_t n4)
{
	const uint32_t dk = t->sh->head_dim, ld = t->ld;
	uint32_t c, d, r;

	for (c = 0; c < n4; c++)
		for (r = 0; r < ld; r++) {
			float acc = 0.0f;

			for (d = 0; d < dk; d++)
				acc = fmaf(t->kn[(size_t)c * dk + d],
					   t->qt[(size_t)d * ld + r], acc);
			t->p[(size_t)c * ld + r] = acc * t->sh->scale;
		}
}

/*
 * The online softmax over the n scores of the block at c0, per row: the
 * block's maximum over the positions it sees (max(m, p) as vmaxps: m > p
 * ? m : p), the new maximum max(old, block's); in row n of p the old
 * sums' factor's exponent (0 where nothing was seen before), in p the
 * weights' exponents (s - M, or -80 where masked); one att_expf_batch
 * over all; then the sum s * factor + the visible weights in position
 * order, the masked weights 0.
 */
static void att_tile_softmax(struct att_tile *t, uint32_t c0, uint32_t n)
{
	const uint32_t ld = t->ld;
	uint32_t r, c;

	for (r = 0; r < ld; r++) {
		float mb = -INFINITY, mold = t->m[r], mnew;

		for (c = 0; c < n; c++) {
			const float p = t->p[(size_t)c * ld + r];

			if (t->pos[r] >= (int64_t)(c0 + c))
				mb = mb > p ? mb : p;
		}
		mnew = mold > mb ? mold : mb;
		t->p[(size_t)n * ld + r] = mold == -INFINITY ? 0.0f :
							       mold - mnew;
		for (c = 0; c < n; c++) {
			float *pc = t->p + (size_t)c * ld + r;

			*pc = t->pos[r] >= (int64_t)(c0 + c) ? *pc - mnew :
							       -80.0f;
		}
		t->m[r] = mnew;
	}
	att_expf_batch(t->p, t->p, (size_t)(n + 1) * ld);
	for (r = 0; r < ld; r++) {
		float s = t->s[r] * t->p[(size_t)n * ld + r];

		for (c = 0; c < n; c++) {
			float *pc = t->p + (size_t)c * ld + r;
			float e = t->pos[r] >= (int64_t)(c0 + c) ? *pc : 0.0f;

			*pc = e;
			s = s + e;
		}
		t->s[r] = s;
	}
}

/*
 * o[row] = o[row] * factor + sum_c p[c][row] * vn[c], an FMA chain per
 * element over the first a positions: rows go in pairs (0, 1), (2, 3)...,
 * a the more of the two rows' seen positions (the other row's weights
 * past its own are 0), a pair that saw nothing here left as it is.
 */
static void att_tile_values(struct att_tile *t, uint32_t c0, uint32_t n)
{
	const uint32_t dv = t->sh->head_dim_v, ld = t->ld;
	uint32_t row, a, b, j, nr, c, d;

	for (row = 0; row < t->rows; row += 2) {
		nr = row + 1 < t->rows ? 2 : 1;
		a = att_tile_seen(t, row, c0, n);
		if (nr == 2) {
			b = att_tile_seen(t, row + 1, c0, n);
			a = a < b ? b : a;
		}
		if (!a)
			continue;
		for (j = 0; j < nr; j++) {
			float *o = t->o + (size_t)(row + j) * dv;
			const float f = t->p[(size_t)n * ld + row + j];

			for (d = 0; d < dv; d++) {
				float acc = o[d] * f;

				for (c = 0; c < a; c++)
					acc = fmaf(
						t->vn[(size_t)c * dv + d],
						t->p[(size_t)c * ld + row + j],
						acc);
				o[d] = acc;
			}
		}
	}
}

#define ATT_TARGET
#include "attention_tile_steps.h"

/* Row r of qt: Q as K's dot sees it, rounded to F16 for F16 K. */
static void att_tile_q_scalar(struct att_tile *t, uint32_t r, const float *q)
{
	const uint32_t dk = t->sh->head_dim;
	uint32_t d;

	for (d = 0; d < dk; d++)
		t->qt[(size_t)d * t->ld + r] =
			quant_traits(t->sh->type_k)->kv_elem == QUANT_KV_F16 ?
				quant_fp16_to_fp32(quant_fp32_to_fp16(q[d])) :
				q[d];
}

/* the level's tile kernels, or the scalar ones */
static void att_tile_q(struct att_tile *t, uint32_t r, const float *q)
{
	const struct cpu_isa_att *att = cpu_isa()->att;

	if (att && att->tile_q)
		att->tile_q(t, r, q);
	else
		att_tile_q_scalar(t, r, q);
}

static void att_tile_block(struct att_tile *t, uint32_t c0, const uint8_t *k,
			   size_t k_stride, const uint8_t *v, size_t v_stride,
			   uint32_t n)
{
	const struct cpu_isa_att *att = cpu_isa()->att;

	if (att && att->tile_block)
		att->tile_block(t, c0, k, k_stride, v, v_stride, n);
	else
		att_tile_steps(t, c0, k, k_stride, v, v_stride, n);
}

void att_tile_begin(struct att_tile *t, const struct att_shape *sh,
		    uint32_t n_q, uint32_t n_group, const float *const *q,
		    const uint32_t *pos, void *scratch)
{
	const uint32_t dk = sh->head_dim, dv = sh->head_dim_v;
	uint8_t *p = scratch;
	uint32_t i, g, r;

	t->sh = sh;
	t->rows = n_q * n_group;
	t->ld = (t->rows + 15) & ~15u;
	t->pos_max = 0;
	t->qt = (float *)p;
	p += cpu_align64((size_t)dk * ATT_TILE_ROWS * 4);
	t->pos = (int32_t *)p;
	p += cpu_align64(ATT_TILE_ROWS * 4);
	t->m = (float *)p;
	p += cpu_align64(ATT_TILE_ROWS * 4);
	t->s = (float *)p;
	p += cpu_align64(ATT_TILE_ROWS * 4);
	t->o = (float *)p;
	p += cpu_align64((size_t)ATT_TILE_ROWS * dv * 4);
	t->kn = (float *)p;
	p += cpu_align64((size_t)ATT_TILE_BLOCK * dk * 4);
	t->vn = (float *)p;
	p += cpu_align64((size_t)ATT_TILE_BLOCK * dv * 4);
	t->p = (float *)p;

	for (r = 0; r < t->ld; r++) {
		t->pos[r] = -1;
		t->m[r] = -INFINITY;
		t->s[r] = 0.0f;
	}
	memset(t->qt, 0, (size_t)dk * t->ld * 4);
	memset(t->o, 0, (size_t)t->rows * dv * 4);
	for (i = 0; i < n_q; i++) {
		if (pos[i] > t->pos_max)
			t->pos_max = pos[i];
		for (g = 0; g < n_group; g++) {
			r = i * n_group + g;
			t->pos[r] = (int32_t)pos[i];
			att_tile_q(t, r, q[i] + (size_t)g * dk);
		}
	}
}

void att_tile_run(struct att_tile *t, uint32_t c0, const uint8_t *k,
		  size_t k_stride, const uint8_t *v, size_t v_stride,
		  uint32_t n)
{
	uint32_t c, m;

	if (c0 > t->pos_max)
		return;
	if (n > t->pos_max - c0 + 1)
		n = t->pos_max - c0 + 1;
	for (c = 0; c < n; c += m) {
		m = n - c < ATT_TILE_BLOCK ? n - c : ATT_TILE_BLOCK;
		att_tile_block(t, c0 + c, k + c * k_stride, k_stride,
			       v + c * v_stride, v_stride, m);
	}
}

void att_tile_end(struct att_tile *t, float *const *out, uint32_t n_group)
{
	const uint32_t dv = t->sh->head_dim_v;
	uint32_t r, d;

	for (r = 0; r < t->rows; r++) {
		float *y = out[r / n_group] + (size_t)(r % n_group) * dv;
		const float *o = t->o + (size_t)r * dv;
		float s_inv = t->s[r] == 0.0f ? 0.0f : 1.0f / t->s[r];

		for (d = 0; d < dv; d++)
			y[d] = o[d] * s_inv;
	}
}
