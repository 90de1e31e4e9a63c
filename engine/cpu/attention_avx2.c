// SPDX-License-Identifier: MIT
/*
 * Attention's vector steps at the AVX2 level (engine/cpu/isa.h's struct
 * cpu_isa_att), attention_avx512.c's twins in 8 lanes: the one-token F16
 * steps, the fused F16 loop of att_run, libm's expf on 8 lanes (in
 * double, with AVX2's gathers), and the tiled prompt attention's blocks.
 * Each gives the scalar code's bits (attention.c,
 * engine/cpu/attention_tiled.c): every float is the same chain of the same
 * operations, only the lanes differ; the horizontal sum of a K.Q is
 * dot_hsum16's tree over two 8-lane halves.
 *
 * The fused loop keeps Q and the accumulator in memory as floats, not in
 * registers as the AVX-512 one does: 16 registers hold a third of a
 * 128-wide head's Q and accumulator.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attention.h"
#include "../quant/quant.h"
#include "attention_tiled.h"
#include "cpu.h"
#include "isa.h"
#include "reduce_avx2.h"

#define ATT_TARGET __attribute__((target("avx2,f16c,fma")))
/* the register blocks' loops unrolled, so that their arrays are registers */
#define ATT_PRAGMA(x) _Pragma(#x)
#define ATT_UNROLL(n) ATT_PRAGMA(GCC unroll n)
#define ATT_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

ATT_TARGET static inline __m256 att_ld8(const uint16_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* F32 to F16 to F32: the value an F16 accumulator holds after a store */
ATT_TARGET static inline __m256 att_round8(__m256 v)
{
	return _mm256_cvtph_ps(_mm256_cvtps_ph(v, ATT_RNE));
}

/* one element of the F16 steps, as the scalar code: F16C, one rounding */
ATT_TARGET static inline uint16_t att_f16_fma1(uint16_t x, float v, uint16_t y)
{
	__m128 ax = _mm_cvtph_ps(_mm_cvtsi32_si128(x));
	__m128 ay = _mm_cvtph_ps(_mm_cvtsi32_si128(y));

	ay = _mm_fmadd_ss(ax, _mm_set_ss(v), ay);
	return (uint16_t)_mm_cvtsi128_si32(_mm_cvtps_ph(ay, ATT_RNE));
}

ATT_TARGET static void att_mad_f16_avx2(uint16_t *y, const uint16_t *x, float v,
					uint32_t n)
{
	const __m256 vv = _mm256_set1_ps(v);
	uint32_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128(
			(__m128i *)(y + i),
			_mm256_cvtps_ph(_mm256_fmadd_ps(att_ld8(x + i), vv,
							att_ld8(y + i)),
					ATT_RNE));
	for (; i < n; i++)
		y[i] = att_f16_fma1(x[i], v, y[i]);
}

ATT_TARGET static void att_scale_f16_avx2(uint16_t *y, float v, uint32_t n)
{
	const __m256 vv = _mm256_set1_ps(v);
	uint32_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128(
			(__m128i *)(y + i),
			_mm256_cvtps_ph(_mm256_mul_ps(att_ld8(y + i), vv),
					ATT_RNE));
	for (; i < n; i++) {
		__m128 ay = _mm_cvtph_ps(_mm_cvtsi32_si128(y[i]));

		ay = _mm_mul_ss(ay, _mm_set_ss(v));
		y[i] = (uint16_t)_mm_cvtsi128_si32(_mm_cvtps_ph(ay, ATT_RNE));
	}
}

ATT_TARGET static void att_f16_to_f32_avx2(float *y, const uint16_t *x,
					   uint32_t n)
{
	uint32_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, att_ld8(x + i));
	for (; i < n; i++)
		y[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(x[i])));
}

ATT_TARGET static void att_mad_f32_avx2(float *y, const float *x, float v,
					uint32_t n)
{
	const __m256 vv = _mm256_set1_ps(v);
	uint32_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i,
				 _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vv,
						 _mm256_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] = fmaf(x[i], v, y[i]);
}

/*
 * glibc's expf (__expf_fma; see attention_avx512.c) on four lanes in
 * double: the same constants, table and FMAs.
 */
static const uint64_t att_exp2_table[32] = {
	0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f,
	0x3fef9301d0125b51, 0x3fef72b83c7d517b, 0x3fef54873168b9aa,
	0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715,
	0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
	0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
	0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74,
	0x3feea11473eb0187, 0x3feea589994cce13, 0x3feeace5422aa0db,
	0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
	0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c,
	0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
	0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};

ATT_TARGET static inline __m128 att_expf4(__m128 x)
{
	const __m256d invln2n = _mm256_set1_pd(0x1.71547652b82fep+5);
	const __m256d shift = _mm256_set1_pd(0x1.8p+52);
	const __m256d c0 = _mm256_set1_pd(0x1.c6af84b912394p-20);
	const __m256d c1 = _mm256_set1_pd(0x1.ebfce50fac4f3p-13);
	const __m256d c2 = _mm256_set1_pd(0x1.62e42ff0c52d6p-6);
	const __m256d one = _mm256_set1_pd(1.0);
	__m256d xd = _mm256_cvtps_pd(x), kd, r, z, r2, y;
	__m256i ki, t;

	kd = _mm256_fmadd_pd(invln2n, xd, shift);
	ki = _mm256_castpd_si256(kd);
	kd = _mm256_sub_pd(kd, shift);
	r = _mm256_fmsub_pd(invln2n, xd, kd);
	t = _mm256_i64gather_epi64((const long long *)att_exp2_table,
				   _mm256_and_si256(ki, _mm256_set1_epi64x(31)),
				   8);
	t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
	z = _mm256_fmadd_pd(c0, r, c1);
	r2 = _mm256_mul_pd(r, r);
	y = _mm256_fmadd_pd(r, c2, one);
	y = _mm256_fmadd_pd(z, r2, y);
	y = _mm256_mul_pd(y, _mm256_castsi256_pd(t));
	return _mm256_cvtpd_ps(y);
}

ATT_TARGET static void att_expf16_avx2(float *y, const float *x)
{
	float in[16];
	uint32_t slow = 0;
	int h, i;

	memcpy(in, x, sizeof(in)); /* y may be x */
	for (h = 0; h < 2; h++) {
		const __m256 v = _mm256_loadu_ps(in + 8 * h);
		/* top12(x) & 0x7ff > top12(88.0f) - 1: libm's special case */
		const __m256i big = _mm256_cmpgt_epi32(
			_mm256_and_si256(
				_mm256_srli_epi32(_mm256_castps_si256(v), 20),
				_mm256_set1_epi32(0x7ff)),
			_mm256_set1_epi32(0x42a));

		slow |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(big))
			<< (8 * h);
		_mm_storeu_ps(y + 8 * h, att_expf4(_mm256_castps256_ps128(v)));
		_mm_storeu_ps(y + 8 * h + 4,
			      att_expf4(_mm256_extractf128_ps(v, 1)));
	}
	for (i = 0; slow && i < 16; i++)
		if (slow & (1u << i))
			y[i] = expf(in[i]);
}

/* the bytes of one row (a multiple of 64) into the cache, ahead of use */
ATT_TARGET static inline void att_prefetch_row(const uint8_t *p, size_t bytes)
{
	size_t o;

	for (o = 0; o < bytes; o += 64)
		_mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

/*
 * att_run_steps for F16 K and V, n positions in one loop (see
 * attention_avx512.c's): dot_f16's K.Q (four 16-lane accumulators, here
 * eight 8-lane ones, over steps of 64; dk a multiple of 64), the online
 * softmax in runs of 16 positions with one batch of expf, and
 * ggml_vec_mad_f16 on the accumulator held as the floats its F16 values
 * stand for (each step rounds through F16 as the store would).
 *
 * A head's rows are a KV row apart (2 KiB for 8 KV heads of 128), which
 * the hardware prefetchers follow late: the loop asks for the next run's
 * K and V rows while it computes this run's scores, and for the first
 * run's V rows on entry (the stalls on the first K and V loads of each
 * position were 56% of its samples at depth 1024, perf record).
 */
ATT_TARGET static void att_run_f16_avx2(struct att_state *st, const uint8_t *k,
					size_t k_stride, const uint8_t *v,
					size_t v_stride, uint32_t n)
{
	const uint32_t dk = st->sh->head_dim, dv = st->sh->head_dim_v;
	const float scale = st->sh->scale;
	const bool expf_exact = att_expf_exact();
	const uint16_t *q16 = (const uint16_t *)st->q;
	float q[ATT_FAST_MAX] __attribute__((aligned(32)));
	float acc[ATT_FAST_MAX] __attribute__((aligned(32)));
	float M = st->M, S = st->S;
	uint32_t c, c0, i, j;

	for (i = 0; i < dk; i += 8)
		_mm256_store_ps(q + i, att_ld8(q16 + i));
	for (i = 0; i < dv; i += 8)
		_mm256_store_ps(acc + i, att_ld8(st->acc16 + i));
	for (c = 0; c < n && c < 16; c++)
		att_prefetch_row(v + c * v_stride, dv * 2);
	for (c0 = 0; c0 < n; c0 += 16) {
		const uint32_t m = n - c0 < 16 ? n - c0 : 16;
		float sc[16], e[16];
		uint32_t up;

		/* the scores first: they do not depend on the softmax state */
		for (c = 0; c < m; c++) {
			const uint16_t *kr =
				(const uint16_t *)(k + (c0 + c) * k_stride);
			__m256 a[8];
			float s;

			if (c0 + 16 + c < n) {
				att_prefetch_row(k + (c0 + 16 + c) * k_stride,
						 dk * 2);
				att_prefetch_row(v + (c0 + 16 + c) * v_stride,
						 dv * 2);
			}
			ATT_UNROLL(8)
			for (j = 0; j < 8; j++)
				a[j] = _mm256_setzero_ps();
			for (i = 0; i < dk; i += 64)
				ATT_UNROLL(8)
			for (j = 0; j < 8; j++)
				a[j] = _mm256_fmadd_ps(
					att_ld8(kr + i + 8 * j),
					_mm256_load_ps(q + i + 8 * j), a[j]);
			/* (a0 + a2) + (a1 + a3), 16 lanes as two halves */
			s = cpu_hsum16_avx2(
				_mm256_add_ps(_mm256_add_ps(a[0], a[4]),
					      _mm256_add_ps(a[2], a[6])),
				_mm256_add_ps(_mm256_add_ps(a[1], a[5]),
					      _mm256_add_ps(a[3], a[7])));
			s = s * scale;
			s += 0.0f;
			sc[c] = s;
		}
		up = att_run_max16(sc, m, &M, e);
		if (expf_exact) {
			att_expf16_avx2(e, e);
		} else {
			for (c = 0; c < m; c++)
				e[c] = expf(e[c]);
		}
		for (c = 0; c < m; c++) {
			const uint16_t *vr =
				(const uint16_t *)(v + (c0 + c) * v_stride);
			float ms = 1.0f, vs = 1.0f;
			__m256 vv;

			if (up & (1u << c)) {
				ms = e[c];
				vv = _mm256_set1_ps(ms);
				for (i = 0; i < dv; i += 8)
					_mm256_store_ps(
						acc + i,
						att_round8(_mm256_mul_ps(
							_mm256_load_ps(acc + i),
							vv)));
			} else {
				vs = e[c];
			}
			vv = _mm256_set1_ps(vs);
			for (i = 0; i < dv; i += 8)
				_mm256_store_ps(
					acc + i,
					att_round8(_mm256_fmadd_ps(
						att_ld8(vr + i), vv,
						_mm256_load_ps(acc + i))));
			S = S * ms + vs;
		}
	}
	for (i = 0; i < dv; i += 8)
		_mm_storeu_si128(
			(__m128i *)(st->acc16 + i),
			_mm256_cvtps_ph(_mm256_load_ps(acc + i), ATT_RNE));
	st->M = M;
	st->S = S;
}

/* ---- the tiled prompt attention (attention_tiled.c's order) ---- */

/* n rows of dim elements of type into dst (F32, dim apart) */
ATT_TARGET static void att_tile_convert(float *dst, uint32_t type,
					const uint8_t *src, size_t stride,
					uint32_t n, uint32_t dim)
{
	uint32_t r, d;

	for (r = 0; r < n; r++, src += stride, dst += dim) {
		if (quant_traits(type)->kv_elem == QUANT_KV_F32) {
			memcpy(dst, src, dim * sizeof(float));
			continue;
		}
		for (d = 0; d < dim; d += 8)
			_mm256_storeu_ps(dst + d,
					 att_ld8((const uint16_t *)src + d));
	}
}

/*
 * Scores of positions [0, n4) (n4 a multiple of 4) for nrv 8-lane row
 * vectors from rv0: p[c][row] = scale * sum_d kn[c][d] * qt[d][row].
 */
ATT_TARGET static inline __attribute__((always_inline)) void
att_tile_scores_core(struct att_tile *t, uint32_t n4, uint32_t rv0,
		     uint32_t nrv)
{
	const uint32_t dk = t->sh->head_dim, ld = t->ld;
	const __m256 scale = _mm256_set1_ps(t->sh->scale);
	uint32_t c, d, i, r;

	for (c = 0; c < n4; c += 4) {
		const float *k0 = t->kn + (size_t)c * dk;
		__m256 acc[4][2];

		ATT_UNROLL(4)
		for (i = 0; i < 4; i++)
			ATT_UNROLL(2)
		for (r = 0; r < nrv; r++)
			acc[i][r] = _mm256_setzero_ps();
		for (d = 0; d < dk; d++) {
			const float *qd = t->qt + (size_t)d * ld + 8 * rv0;
			__m256 qv[2];

			ATT_UNROLL(2)
			for (r = 0; r < nrv; r++)
				qv[r] = _mm256_loadu_ps(qd + 8 * r);
			ATT_UNROLL(4)
			for (i = 0; i < 4; i++) {
				__m256 kb = _mm256_set1_ps(k0[i * dk + d]);

				ATT_UNROLL(2)
				for (r = 0; r < nrv; r++)
					acc[i][r] = _mm256_fmadd_ps(kb, qv[r],
								    acc[i][r]);
			}
		}
		ATT_UNROLL(4)
		for (i = 0; i < 4; i++)
			ATT_UNROLL(2)
		for (r = 0; r < nrv; r++)
			_mm256_storeu_ps(t->p + (size_t)(c + i) * ld +
						 8 * (rv0 + r),
					 _mm256_mul_ps(acc[i][r], scale));
	}
}

/* 8 accumulators: 2 row vectors (16 rows) at a time */
ATT_TARGET static void att_tile_scores(struct att_tile *t, uint32_t n4)
{
	const uint32_t nv = t->ld / 8;
	uint32_t rv0;

	for (rv0 = 0; rv0 < nv; rv0 += 2) {
		if (nv - rv0 == 1)
			att_tile_scores_core(t, n4, rv0, 1);
		else
			att_tile_scores_core(t, n4, rv0, 2);
	}
}

/* lanes whose row sees position c: pos >= c */
ATT_TARGET static inline __m256 att_visible(__m256i pos, uint32_t c)
{
	return _mm256_castsi256_ps(
		_mm256_cmpgt_epi32(pos, _mm256_set1_epi32((int32_t)c - 1)));
}

/* attention_tiled.c's att_tile_softmax, 8 rows at a time */
ATT_TARGET static void att_tile_softmax(struct att_tile *t, uint32_t c0,
					uint32_t n)
{
	const uint32_t ld = t->ld;
	const __m256 ninf = _mm256_set1_ps(-INFINITY);
	/* below every weight kept, above libm's slow range: zeroed after */
	const __m256 far = _mm256_set1_ps(-80.0f);
	uint32_t r, c;

	for (r = 0; r < ld; r += 8) {
		const __m256i pos = _mm256_loadu_si256(
			(const __m256i *)(t->pos + r));
		__m256 mb = ninf, mold = _mm256_loadu_ps(t->m + r), mnew;
		__m256 fresh;

		for (c = 0; c < n; c++)
			mb = _mm256_blendv_ps(
				mb,
				_mm256_max_ps(
					mb, _mm256_loadu_ps(t->p + c * ld + r)),
				att_visible(pos, c0 + c));
		mnew = _mm256_max_ps(mold, mb);
		/* no position seen before: nothing to correct (O, S are 0) */
		fresh = _mm256_cmp_ps(mold, ninf, _CMP_EQ_OQ);
		_mm256_storeu_ps(t->p + n * ld + r,
				 _mm256_blendv_ps(_mm256_sub_ps(mold, mnew),
						  _mm256_setzero_ps(), fresh));
		for (c = 0; c < n; c++) {
			float *pc = t->p + c * ld + r;

			_mm256_storeu_ps(
				pc, _mm256_blendv_ps(
					    far,
					    _mm256_sub_ps(_mm256_loadu_ps(pc),
							  mnew),
					    att_visible(pos, c0 + c)));
		}
		_mm256_storeu_ps(t->m + r, mnew);
	}
	att_expf_batch(t->p, t->p, (size_t)(n + 1) * ld);
	for (r = 0; r < ld; r += 8) {
		const __m256i pos = _mm256_loadu_si256(
			(const __m256i *)(t->pos + r));
		__m256 s = _mm256_mul_ps(_mm256_loadu_ps(t->s + r),
					 _mm256_loadu_ps(t->p + n * ld + r));

		for (c = 0; c < n; c++) {
			float *pc = t->p + c * ld + r;
			__m256 e = _mm256_and_ps(att_visible(pos, c0 + c),
						 _mm256_loadu_ps(pc));

			_mm256_storeu_ps(pc, e);
			s = _mm256_add_ps(s, e);
		}
		_mm256_storeu_ps(t->s + r, s);
	}
}

/*
 * o[row] = o[row] * factor + sum_c p[c][row] * vn[c] for nr rows from
 * row, over the first n positions, for nv 8-float vectors from d0.
 */
ATT_TARGET static inline __attribute__((always_inline)) void
att_tile_values_core(struct att_tile *t, uint32_t row, uint32_t nr, uint32_t n,
		     uint32_t n_block, uint32_t d0, uint32_t nv)
{
	const uint32_t dv = t->sh->head_dim_v, ld = t->ld;
	const float *pr = t->p + row, *fac = t->p + (size_t)n_block * ld + row;
	__m256 acc[2][4];
	uint32_t c, i, j;

	ATT_UNROLL(2)
	for (j = 0; j < nr; j++) {
		const float *o = t->o + (size_t)(row + j) * dv + d0;
		const __m256 f = _mm256_set1_ps(fac[j]);

		ATT_UNROLL(4)
		for (i = 0; i < nv; i++)
			acc[j][i] = _mm256_mul_ps(_mm256_loadu_ps(o + 8 * i),
						  f);
	}
	for (c = 0; c < n; c++) {
		const float *vr = t->vn + (size_t)c * dv + d0;
		__m256 w[2];

		ATT_UNROLL(2)
		for (j = 0; j < nr; j++)
			w[j] = _mm256_set1_ps(pr[(size_t)c * ld + j]);
		ATT_UNROLL(4)
		for (i = 0; i < nv; i++) {
			__m256 vv = _mm256_loadu_ps(vr + 8 * i);

			ATT_UNROLL(2)
			for (j = 0; j < nr; j++)
				acc[j][i] = _mm256_fmadd_ps(vv, w[j],
							    acc[j][i]);
		}
	}
	ATT_UNROLL(2)
	for (j = 0; j < nr; j++)
		ATT_UNROLL(4)
	for (i = 0; i < nv; i++)
		_mm256_storeu_ps(t->o + (size_t)(row + j) * dv + d0 + 8 * i,
				 acc[j][i]);
}

/* att_tile_values_core with nr and nv constant: 4 vectors at a time */
ATT_TARGET static void att_tile_values_rows(struct att_tile *t, uint32_t row,
					    uint32_t nr, uint32_t n,
					    uint32_t n_block)
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
	for (d0 = 0; d0 < dv; d0 += 8 * nv) {
		nv = dv - d0 < 32 ? (dv - d0) / 8 : 4;
		switch (nv) {
			ATT_TILE_NV(1);
			ATT_TILE_NV(2);
			ATT_TILE_NV(3);
			ATT_TILE_NV(4);
		}
	}
#undef ATT_TILE_NV
}

#define ATT_TILE_PAIRS
#include "attention_tile_steps.h"

/* Row r of qt: Q as K's dot sees it, rounded to F16 for F16 K. */
ATT_TARGET static void att_tile_q_avx2(struct att_tile *t, uint32_t r,
				       const float *q)
{
	const uint32_t dk = t->sh->head_dim;
	float *col = t->qt + r;
	uint32_t d, l;

	for (d = 0; d < dk; d += 8) {
		__m256 v = _mm256_loadu_ps(q + d);
		float f[8];

		if (quant_traits(t->sh->type_k)->kv_elem == QUANT_KV_F16)
			v = att_round8(v);
		_mm256_storeu_ps(f, v);
		for (l = 0; l < 8; l++)
			col[(size_t)(d + l) * t->ld] = f[l];
	}
}

const struct cpu_isa_att cpu_att_avx2 = {
	.mad_f16 = att_mad_f16_avx2,
	.scale_f16 = att_scale_f16_avx2,
	.f16_to_f32 = att_f16_to_f32_avx2,
	.mad_f32 = att_mad_f32_avx2,
	.expf16 = att_expf16_avx2,
	.run_f16 = att_run_f16_avx2,
	.tile_q = att_tile_q_avx2,
	.tile_block = att_tile_steps,
};
#endif /* __x86_64__ */
