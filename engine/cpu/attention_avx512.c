// SPDX-License-Identifier: MIT
/*
 * Attention's vector steps at the AVX-512 level (engine/cpu/isa.h's
 * struct cpu_isa_att): the F16 steps of the one-token path
 * (ggml_vec_mad_f16 and friends, one FMA and one F16C rounding per
 * element, as the scalar code in attention.c), the fused F16
 * loop of att_run, libm's expf on 16 lanes, and the tiled prompt
 * attention's blocks (engine/cpu/attention_tiled.c has the scalar
 * definition of their order). Each gives the scalar code's bits.
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
#include "reduce_avx512.h"

#define ATT_TARGET \
	__attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c,fma")))

/* y += x * v on F16 rows, 16 at a time, the tail masked */
ATT_TARGET static void att_mad_f16_avx512(uint16_t *y, const uint16_t *x,
					  float v, uint32_t n)
{
	const __m512 vv = _mm512_set1_ps(v);
	uint32_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512 ax = _mm512_cvtph_ps(
			_mm256_loadu_si256((const __m256i *)(x + i)));
		__m512 ay = _mm512_cvtph_ps(
			_mm256_loadu_si256((const __m256i *)(y + i)));

		ay = _mm512_fmadd_ps(ax, vv, ay);
		_mm256_storeu_si256(
			(__m256i *)(y + i),
			_mm512_cvtps_ph(ay, _MM_FROUND_TO_NEAREST_INT |
						    _MM_FROUND_NO_EXC));
	}
	for (; i < n; i++) {
		__m128 ax = _mm_cvtph_ps(_mm_cvtsi32_si128(x[i]));
		__m128 ay = _mm_cvtph_ps(_mm_cvtsi32_si128(y[i]));

		ay = _mm_fmadd_ss(ax, _mm_set_ss(v), ay);
		y[i] = (uint16_t)_mm_cvtsi128_si32(_mm_cvtps_ph(
			ay, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	}
}

ATT_TARGET static void att_scale_f16_avx512(uint16_t *y, float v, uint32_t n)
{
	const __m512 vv = _mm512_set1_ps(v);
	uint32_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512 ay = _mm512_cvtph_ps(
			_mm256_loadu_si256((const __m256i *)(y + i)));

		ay = _mm512_mul_ps(ay, vv);
		_mm256_storeu_si256(
			(__m256i *)(y + i),
			_mm512_cvtps_ph(ay, _MM_FROUND_TO_NEAREST_INT |
						    _MM_FROUND_NO_EXC));
	}
	for (; i < n; i++) {
		__m128 ay = _mm_cvtph_ps(_mm_cvtsi32_si128(y[i]));

		ay = _mm_mul_ss(ay, _mm_set_ss(v));
		y[i] = (uint16_t)_mm_cvtsi128_si32(_mm_cvtps_ph(
			ay, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	}
}

ATT_TARGET static void att_f16_to_f32_avx512(float *y, const uint16_t *x,
					     uint32_t n)
{
	uint32_t i = 0;

	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(
						(const __m256i *)(x + i))));
	for (; i < n; i++)
		y[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(x[i])));
}

ATT_TARGET static void att_mad_f32_avx512(float *y, const float *x, float v,
					  uint32_t n)
{
	const __m512 vv = _mm512_set1_ps(v);
	uint32_t i = 0;

	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i,
				 _mm512_fmadd_ps(_mm512_loadu_ps(x + i), vv,
						 _mm512_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] = fmaf(x[i], v, y[i]);
}

ATT_TARGET static inline __m512 att_ld16(const uint16_t *p)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* F32 to F16 to F32: the value an F16 accumulator holds after a store */
ATT_TARGET static inline __m512 att_round16(__m512 v)
{
	return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT |
							  _MM_FROUND_NO_EXC));
}

/*
 * expf of 16 floats with the bits of glibc's expf (__expf_fma, the variant
 * libm picks on a CPU with FMA; sysdeps/ieee754/flt-32/e_expf.c), which is
 * what ggml's flash attention calls once per position: in double,
 * x * 32/ln2 = k + r, 2^(k/32) from a 32-entry table, a cubic in r, with
 * the same four FMAs the compiled libm uses (read from its disassembly).
 * The constants are libm's __exp2f_data. Lanes past |x| >= 88 (and NaN,
 * infinities) take libm's own expf. att_simd_init() checks the result
 * against libm on this machine and keeps the scalar calls if any differs
 * (another libm).
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

ATT_TARGET static inline __m256 att_expf8(__m256 x)
{
	const __m512d invln2n = _mm512_set1_pd(0x1.71547652b82fep+5);
	const __m512d shift = _mm512_set1_pd(0x1.8p+52);
	const __m512d c0 = _mm512_set1_pd(0x1.c6af84b912394p-20);
	const __m512d c1 = _mm512_set1_pd(0x1.ebfce50fac4f3p-13);
	const __m512d c2 = _mm512_set1_pd(0x1.62e42ff0c52d6p-6);
	const __m512d one = _mm512_set1_pd(1.0);
	__m512d xd = _mm512_cvtps_pd(x), kd, r, z, r2, y;
	__m512i ki, t;

	kd = _mm512_fmadd_pd(invln2n, xd, shift);
	ki = _mm512_castpd_si512(kd);
	kd = _mm512_sub_pd(kd, shift);
	r = _mm512_fmsub_pd(invln2n, xd, kd);
	t = _mm512_i64gather_epi64(_mm512_and_si512(ki, _mm512_set1_epi64(31)),
				   (const void *)att_exp2_table, 8);
	t = _mm512_add_epi64(t, _mm512_slli_epi64(ki, 47));
	z = _mm512_fmadd_pd(c0, r, c1);
	r2 = _mm512_mul_pd(r, r);
	y = _mm512_fmadd_pd(r, c2, one);
	y = _mm512_fmadd_pd(z, r2, y);
	y = _mm512_mul_pd(y, _mm512_castsi512_pd(t));
	return _mm512_cvtpd_ps(y);
}

ATT_TARGET static void att_expf16_avx512(float *y, const float *x)
{
	__m512 v = _mm512_loadu_ps(x);
	/* top12(x) & 0x7ff > top12(88.0f) - 1: libm's special-case branch */
	__mmask16 slow = _mm512_cmpgt_epu32_mask(
		_mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 20),
				 _mm512_set1_epi32(0x7ff)),
		_mm512_set1_epi32(0x42a));
	__m256 lo = att_expf8(_mm512_castps512_ps256(v));
	__m256 hi = att_expf8(_mm256_castpd_ps(
		_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
	float in[16];
	int i;

	_mm512_storeu_ps(in, v); /* y may be x */
	_mm256_storeu_ps(y, lo);
	_mm256_storeu_ps(y + 8, hi);
	for (i = 0; slow && i < 16; i++)
		if (slow & (1u << i))
			y[i] = expf(in[i]);
}

/*
 * att_step for F16 K and V, n positions in one loop: dot_f16's K.Q (four
 * accumulators over steps of 64, reduced as cpu_reduce4; dk a multiple of
 * 64, so no tail), the online softmax, and ggml_vec_mad_f16 on an
 * accumulator kept in registers as the floats its F16 values stand for
 * (each step rounds through F16 as the store would). Q is converted once,
 * not per position. Inlined with constant dk and dv for the common head,
 * so the loops unroll and Q and the accumulator stay in registers.
 */
ATT_TARGET static inline __attribute__((always_inline)) void
att_run_f16_core(struct att_state *st, const uint8_t *k, size_t k_stride,
		 const uint8_t *v, size_t v_stride, uint32_t n, uint32_t dk,
		 uint32_t dv)
{
	const float scale = st->sh->scale;
	const bool expf_exact = att_expf_exact();
	const uint16_t *q16 = (const uint16_t *)st->q;
	__m512 q[ATT_FAST_MAX / 16], acc[ATT_FAST_MAX / 16];
	float M = st->M, S = st->S;
	uint32_t c, c0, i;

	for (i = 0; i < dk / 16; i++)
		q[i] = att_ld16(q16 + 16 * i);
	for (i = 0; i < dv / 16; i++)
		acc[i] = att_ld16(st->acc16 + 16 * i);
	for (c0 = 0; c0 < n; c0 += 16) {
		const uint32_t m = n - c0 < 16 ? n - c0 : 16;
		float sc[16], e[16];
		uint32_t up;

		/* the scores first: they do not depend on the softmax state */
		for (c = 0; c < m; c++) {
			const uint16_t *kr =
				(const uint16_t *)(k + (c0 + c) * k_stride);
			__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0,
			       a3 = a0;
			float s;

			for (i = 0; i < dk / 16; i += 4) {
				a0 = _mm512_fmadd_ps(att_ld16(kr + 16 * i),
						     q[i], a0);
				a1 = _mm512_fmadd_ps(att_ld16(kr + 16 * i + 16),
						     q[i + 1], a1);
				a2 = _mm512_fmadd_ps(att_ld16(kr + 16 * i + 32),
						     q[i + 2], a2);
				a3 = _mm512_fmadd_ps(att_ld16(kr + 16 * i + 48),
						     q[i + 3], a3);
			}
			s = cpu_hsum16(_mm512_add_ps(_mm512_add_ps(a0, a2),
						     _mm512_add_ps(a1, a3)));
			s = s * scale;
			s += 0.0f;
			sc[c] = s;
		}
		up = att_run_max16(sc, m, &M, e);
		if (expf_exact) {
			att_expf16_avx512(e, e);
		} else {
			for (c = 0; c < m; c++)
				e[c] = expf(e[c]);
		}
		for (c = 0; c < m; c++) {
			const uint16_t *vr =
				(const uint16_t *)(v + (c0 + c) * v_stride);
			float ms = 1.0f, vs = 1.0f;
			__m512 vv;

			if (up & (1u << c)) {
				ms = e[c];
				vv = _mm512_set1_ps(ms);
				for (i = 0; i < dv / 16; i++)
					acc[i] = att_round16(
						_mm512_mul_ps(acc[i], vv));
			} else {
				vs = e[c];
			}
			vv = _mm512_set1_ps(vs);
			for (i = 0; i < dv / 16; i++)
				acc[i] = att_round16(_mm512_fmadd_ps(
					att_ld16(vr + 16 * i), vv, acc[i]));
			S = S * ms + vs;
		}
	}
	for (i = 0; i < dv / 16; i++)
		_mm256_storeu_si256(
			(__m256i *)(st->acc16 + 16 * i),
			_mm512_cvtps_ph(acc[i], _MM_FROUND_TO_NEAREST_INT |
							_MM_FROUND_NO_EXC));
	st->M = M;
	st->S = S;
}

ATT_TARGET static void att_run_f16_avx512(struct att_state *st,
					  const uint8_t *k, size_t k_stride,
					  const uint8_t *v, size_t v_stride,
					  uint32_t n)
{
	const uint32_t dk = st->sh->head_dim, dv = st->sh->head_dim_v;

	if (dk == 128 && dv == 128)
		att_run_f16_core(st, k, k_stride, v, v_stride, n, 128, 128);
	else
		att_run_f16_core(st, k, k_stride, v, v_stride, n, dk, dv);
}

/* ---- the tiled prompt attention ---- */

/* the register blocks' loops unrolled, so that their arrays are registers */
#define ATT_TILE_PRAGMA(x) _Pragma(#x)
#define ATT_TILE_UNROLL(n) ATT_TILE_PRAGMA(GCC unroll n)

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
ATT_TARGET static inline __attribute__((always_inline)) void
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
ATT_TARGET static void att_tile_scores(struct att_tile *t, uint32_t n4)
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
ATT_TARGET static void att_tile_softmax(struct att_tile *t, uint32_t c0,
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

/*
 * o[row] = o[row] * factor + sum_c p[c][row] * vn[c] for nr rows from
 * row, over the first n positions, for nv vectors of head_dim_v from d0.
 */
ATT_TARGET static inline __attribute__((always_inline)) void
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

#define ATT_TILE_PAIRS
#include "attention_tile_steps.h"

/* Row r of qt: Q as K's dot sees it, rounded to F16 for F16 K. */
ATT_TARGET static void att_tile_q_avx512(struct att_tile *t, uint32_t r,
					 const float *q)
{
	const uint32_t dk = t->sh->head_dim;
	float *col = t->qt + r;
	uint32_t d, l;

	for (d = 0; d < dk; d += 16) {
		__m512 v = _mm512_loadu_ps(q + d);
		float f[16];

		if (quant_traits(t->sh->type_k)->kv_elem == QUANT_KV_F16)
			v = _mm512_cvtph_ps(
				_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT |
							   _MM_FROUND_NO_EXC));
		_mm512_storeu_ps(f, v);
		for (l = 0; l < 16; l++)
			col[(size_t)(d + l) * t->ld] = f[l];
	}
}

const struct cpu_isa_att cpu_att_avx512 = {
	.mad_f16 = att_mad_f16_avx512,
	.scale_f16 = att_scale_f16_avx512,
	.f16_to_f32 = att_f16_to_f32_avx512,
	.mad_f32 = att_mad_f32_avx512,
	.expf16 = att_expf16_avx512,
	.run_f16 = att_run_f16_avx512,
	.tile_q = att_tile_q_avx512,
	.tile_block = att_tile_steps,
};
#endif /* __x86_64__ */
