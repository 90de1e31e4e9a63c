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

#define ATT_TILE_DIM_MAX 256

size_t att_tile_scratch_bytes(const struct att_shape *sh)
{
	const size_t r = ATT_TILE_ROWS;

	return cpu_align64((size_t)sh->head_dim * r * 4) +
	       cpu_align64(r * 4) * 3 + cpu_align64(r * sh->head_dim_v * 4) +
	       cpu_align64((size_t)ATT_TILE_BLOCK * sh->head_dim * 4) +
	       cpu_align64((size_t)ATT_TILE_BLOCK * sh->head_dim_v * 4) +
	       cpu_align64((ATT_TILE_BLOCK + 1) * r * 4);
}

#if defined(__x86_64__)
#include <immintrin.h>

#define ATT_TILE_TARGET __attribute__((target("avx512f,f16c,fma")))
/* the register blocks' loops unrolled, so that their arrays are registers */
#define ATT_TILE_PRAGMA(x) _Pragma(#x)
#define ATT_TILE_UNROLL(n) ATT_TILE_PRAGMA(GCC unroll n)

bool att_tile_usable(const struct att_shape *sh)
{
	return (sh->type_k == IO_TYPE_F16 || sh->type_k == IO_TYPE_F32) &&
	       (sh->type_v == IO_TYPE_F16 || sh->type_v == IO_TYPE_F32) &&
	       sh->head_dim % 16 == 0 && sh->head_dim_v % 16 == 0 &&
	       sh->head_dim && sh->head_dim_v &&
	       sh->head_dim <= ATT_TILE_DIM_MAX &&
	       sh->head_dim_v <= ATT_TILE_DIM_MAX && att_simd_usable();
}

/* n rows of dim elements of type into dst (F32, dim apart) */
ATT_TILE_TARGET static void att_tile_convert(float *dst, uint32_t type,
					     const uint8_t *src, size_t stride,
					     uint32_t n, uint32_t dim)
{
	uint32_t r, d;

	for (r = 0; r < n; r++, src += stride, dst += dim) {
		if (type == IO_TYPE_F32) {
			memcpy(dst, src, dim * sizeof(float));
			continue;
		}
		for (d = 0; d < dim; d += 16)
			_mm512_storeu_ps(
				dst + d,
				_mm512_cvtph_ps(_mm256_loadu_si256(
					(const __m256i *)(src + 2 * d))));
	}
}

/*
 * Scores of positions [0, n4) (n4 a multiple of 4) for nrv row vectors
 * from rv0: p[c][row] = scale * sum_d kn[c][d] * qt[d][row].
 */
ATT_TILE_TARGET static inline __attribute__((always_inline)) void
att_tile_scores_core(struct att_tile *t, uint32_t n4, uint32_t rv0,
		     uint32_t nrv)
{
	const uint32_t dk = t->sh->head_dim, ld = t->ld;
	const __m512 scale = _mm512_set1_ps(t->sh->scale);
	uint32_t c, d, i, r;

	for (c = 0; c < n4; c += 4) {
		const float *k0 = t->kn + (size_t)c * dk;
		__m512 acc[4][4];

		ATT_TILE_UNROLL(4)
		for (i = 0; i < 4; i++)
			ATT_TILE_UNROLL(4)
		for (r = 0; r < nrv; r++)
			acc[i][r] = _mm512_setzero_ps();
		for (d = 0; d < dk; d++) {
			const float *qd = t->qt + (size_t)d * ld + 16 * rv0;
			__m512 qv[4];

			ATT_TILE_UNROLL(4)
			for (r = 0; r < nrv; r++)
				qv[r] = _mm512_loadu_ps(qd + 16 * r);
			ATT_TILE_UNROLL(4)
			for (i = 0; i < 4; i++) {
				__m512 kb = _mm512_set1_ps(k0[i * dk + d]);

				ATT_TILE_UNROLL(4)
				for (r = 0; r < nrv; r++)
					acc[i][r] = _mm512_fmadd_ps(kb, qv[r],
								    acc[i][r]);
			}
		}
		ATT_TILE_UNROLL(4)
		for (i = 0; i < 4; i++)
			ATT_TILE_UNROLL(4)
		for (r = 0; r < nrv; r++)
			_mm512_storeu_ps(t->p + (size_t)(c + i) * ld +
						 16 * (rv0 + r),
					 _mm512_mul_ps(acc[i][r], scale));
	}
}

/* 16 accumulators: up to 4 row vectors (64 rows) at a time */
ATT_TILE_TARGET static void att_tile_scores(struct att_tile *t, uint32_t n4)
{
	const uint32_t nv = t->ld / 16;
	uint32_t rv0;

	for (rv0 = 0; rv0 < nv; rv0 += 4) {
		switch (nv - rv0) {
		case 1: att_tile_scores_core(t, n4, rv0, 1); break;
		case 2: att_tile_scores_core(t, n4, rv0, 2); break;
		case 3: att_tile_scores_core(t, n4, rv0, 3); break;
		default: att_tile_scores_core(t, n4, rv0, 4); break;
		}
	}
}

/*
 * The online softmax over n scores of the block at c0: new maxima, the
 * weights exp(s - M) (0 where masked), the old sums' factors
 * exp(M_old - M) in row n of p, the sums. One call of att_expf_batch for
 * all of them: libm's expf, the one-token path's, so that the weights
 * differ from its ones by the scores' rounding only.
 */
ATT_TILE_TARGET static void att_tile_softmax(struct att_tile *t, uint32_t c0,
					     uint32_t n)
{
	const uint32_t ld = t->ld;
	const __m512 ninf = _mm512_set1_ps(-INFINITY);
	/* below every weight kept, above libm's slow range: zeroed after */
	const __m512 far = _mm512_set1_ps(-80.0f);
	uint32_t r, c;

	for (r = 0; r < ld; r += 16) {
		const __m512i pos = _mm512_loadu_si512(t->pos + r);
		__m512 mb = ninf, mold = _mm512_loadu_ps(t->m + r), mnew;
		__mmask16 fresh;

		for (c = 0; c < n; c++) {
			__mmask16 vis = _mm512_cmpge_epi32_mask(
				pos, _mm512_set1_epi32((int32_t)(c0 + c)));

			mb = _mm512_mask_max_ps(
				mb, vis, mb,
				_mm512_loadu_ps(t->p + c * ld + r));
		}
		mnew = _mm512_max_ps(mold, mb);
		/* no position seen before: nothing to correct (O, S are 0) */
		fresh = _mm512_cmp_ps_mask(mold, ninf, _CMP_EQ_OQ);
		_mm512_storeu_ps(t->p + n * ld + r,
				 _mm512_mask_sub_ps(_mm512_sub_ps(mold, mnew),
						    fresh, _mm512_setzero_ps(),
						    _mm512_setzero_ps()));
		for (c = 0; c < n; c++) {
			__mmask16 vis = _mm512_cmpge_epi32_mask(
				pos, _mm512_set1_epi32((int32_t)(c0 + c)));
			float *pc = t->p + c * ld + r;

			_mm512_storeu_ps(pc,
					 _mm512_mask_sub_ps(far, vis,
							    _mm512_loadu_ps(pc),
							    mnew));
		}
		_mm512_storeu_ps(t->m + r, mnew);
	}
	att_expf_batch(t->p, t->p, (size_t)(n + 1) * ld);
	for (r = 0; r < ld; r += 16) {
		const __m512i pos = _mm512_loadu_si512(t->pos + r);
		__m512 s = _mm512_mul_ps(_mm512_loadu_ps(t->s + r),
					 _mm512_loadu_ps(t->p + n * ld + r));

		for (c = 0; c < n; c++) {
			__mmask16 vis = _mm512_cmpge_epi32_mask(
				pos, _mm512_set1_epi32((int32_t)(c0 + c)));
			float *pc = t->p + c * ld + r;
			__m512 e = _mm512_maskz_mov_ps(vis,
						       _mm512_loadu_ps(pc));

			_mm512_storeu_ps(pc, e);
			s = _mm512_add_ps(s, e);
		}
		_mm512_storeu_ps(t->s + r, s);
	}
}

/* Positions a row sees in the block at c0 of n. */
static uint32_t att_tile_seen(const struct att_tile *t, uint32_t row,
			      uint32_t c0, uint32_t n)
{
	int64_t k = (int64_t)t->pos[row] - c0 + 1;

	return k <= 0 ? 0 : k >= n ? n : (uint32_t)k;
}

/*
 * o[row] = o[row] * factor + sum_c p[c][row] * vn[c] for nr rows from
 * row, over the first n positions, for nv vectors of head_dim_v from d0.
 */
ATT_TILE_TARGET static inline __attribute__((always_inline)) void
att_tile_values_core(struct att_tile *t, uint32_t row, uint32_t nr, uint32_t n,
		     uint32_t n_block, uint32_t d0, uint32_t nv)
{
	const uint32_t dv = t->sh->head_dim_v, ld = t->ld;
	const float *pr = t->p + row, *fac = t->p + (size_t)n_block * ld + row;
	uint32_t c, i, j;

	{
		__m512 acc[2][8];

		ATT_TILE_UNROLL(2)
		for (j = 0; j < nr; j++) {
			const float *o = t->o + (size_t)(row + j) * dv + d0;
			const __m512 f = _mm512_set1_ps(fac[j]);

			ATT_TILE_UNROLL(8)
			for (i = 0; i < nv; i++)
				acc[j][i] = _mm512_mul_ps(
					_mm512_loadu_ps(o + 16 * i), f);
		}
		for (c = 0; c < n; c++) {
			const float *vr = t->vn + (size_t)c * dv + d0;
			__m512 w[2];

			ATT_TILE_UNROLL(2)
			for (j = 0; j < nr; j++)
				w[j] = _mm512_set1_ps(pr[(size_t)c * ld + j]);
			ATT_TILE_UNROLL(8)
			for (i = 0; i < nv; i++) {
				__m512 vv = _mm512_loadu_ps(vr + 16 * i);

				ATT_TILE_UNROLL(2)
				for (j = 0; j < nr; j++)
					acc[j][i] = _mm512_fmadd_ps(vv, w[j],
								    acc[j][i]);
			}
		}
		ATT_TILE_UNROLL(2)
		for (j = 0; j < nr; j++)
			ATT_TILE_UNROLL(8)
		for (i = 0; i < nv; i++)
			_mm512_storeu_ps(t->o + (size_t)(row + j) * dv + d0 +
						 16 * i,
					 acc[j][i]);
	}
}

/* att_tile_values_core with nr and nv constant: 8 vectors at a time */
ATT_TILE_TARGET static void att_tile_values_rows(struct att_tile *t,
						 uint32_t row, uint32_t nr,
						 uint32_t n, uint32_t n_block)
{
	const uint32_t dv = t->sh->head_dim_v;
	uint32_t d0, nv;

#define ATT_TILE_NV(k) \
	case k: \
		if (nr == 2) \
			att_tile_values_core(t, row, 2, n, n_block, d0, k); \
		else \
			att_tile_values_core(t, row, 1, n, n_block, d0, k); \
		break
	for (d0 = 0; d0 < dv; d0 += 16 * nv) {
		nv = dv - d0 < 128 ? (dv - d0) / 16 : 8;
		switch (nv) {
			ATT_TILE_NV(1);
			ATT_TILE_NV(2);
			ATT_TILE_NV(3);
			ATT_TILE_NV(4);
			ATT_TILE_NV(5);
			ATT_TILE_NV(6);
			ATT_TILE_NV(7);
			ATT_TILE_NV(8);
		}
	}
#undef ATT_TILE_NV
}

ATT_TILE_TARGET static void att_tile_values(struct att_tile *t, uint32_t c0,
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

ATT_TILE_TARGET static void att_tile_block(struct att_tile *t, uint32_t c0,
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

/* Row r of qt: Q as K's dot sees it, rounded to F16 for F16 K. */
ATT_TILE_TARGET static void att_tile_q(struct att_tile *t, uint32_t r,
				       const float *q)
{
	const uint32_t dk = t->sh->head_dim;
	float *col = t->qt + r;
	uint32_t d, l;

	for (d = 0; d < dk; d += 16) {
		__m512 v = _mm512_loadu_ps(q + d);
		float f[16];

		if (t->sh->type_k == IO_TYPE_F16)
			v = _mm512_cvtph_ps(
				_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT |
							   _MM_FROUND_NO_EXC));
		_mm512_storeu_ps(f, v);
		for (l = 0; l < 16; l++)
			col[(size_t)(d + l) * t->ld] = f[l];
	}
}

#else
bool att_tile_usable(const struct att_shape *sh)
{
	return false;
}

static void att_tile_q(struct att_tile *t, uint32_t r, const float *q)
{
}

static void att_tile_block(struct att_tile *t, uint32_t c0, const uint8_t *k,
			   size_t k_stride, const uint8_t *v, size_t v_stride,
			   uint32_t n)
{
}
#endif

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
