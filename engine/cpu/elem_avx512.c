// SPDX-License-Identifier: MIT
/*
 * The element-wise steps of a token in 16 lanes: ggml_v_expf and silu
 * (ops.c), the RMS norm's scaling, rope, and the activation
 * quantizers (Q8_K, Q8_0, F16). Each is the scalar code it replaces done
 * lane by lane with the same IEEE operations on the same values (a
 * product, a quotient, one fused multiply-add are rounded once whatever
 * the lane), so the results are bit for bit the scalar ones; nothing here
 * sums across lanes in floating point. tests/engine/test_simd.c holds
 * each to its scalar twin.
 */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "../quant/quant_internal.h"

#if !defined(__x86_64__)
void cpu_swiglu_avx512(float *y, const float *g, const float *u, int64_t nv)
{
}
void cpu_expf_sub_avx512(float *x, float max, int64_t nv)
{
}
void cpu_scale_avx512(float *y, const float *x, float s, const float *w,
		      int64_t n)
{
}
void cpu_rope_avx512(float *r, uint32_t n_rot, bool neox, const float *cache)
{
}
void cpu_q8_K_from_float_avx512(const float *x, void *y, int64_t nb)
{
}
void cpu_q8_0_from_float_avx512(const float *x, void *y, int64_t nb)
{
}
void cpu_f16_from_float_avx512(const float *x, void *y, int64_t n)
{
}
#else
#include <immintrin.h>

#define CPU_TARGET \
	__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

/*
 * ggml_v_expf (AVX-512) as ggml writes it; ops.c's ops_v_expf is this,
 * one lane. scalef(j, n) = j * 2^floor(n), rounded once: ldexpf there.
 */
CPU_TARGET static __m512 cpu_v_expf(__m512 x)
{
	const __m512 r = _mm512_set1_ps(0x1.8p23f);
	const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
	const __m512 n = _mm512_sub_ps(z, r);
	const __m512 b = _mm512_fnmadd_ps(
		n, _mm512_set1_ps(0x1.7f7d1cp-20f),
		_mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
	const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n),
					       _mm512_set1_ps(192), _CMP_GT_OQ);
	const __m512 u = _mm512_mul_ps(b, b);
	const __m512 j = _mm512_fmadd_ps(
		_mm512_fmadd_ps(
			_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b,
					_mm512_set1_ps(0x1.573e2ep-5f)),
			u,
			_mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b,
					_mm512_set1_ps(0x1.fffdb6p-2f))),
		u,
		_mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b,
				_mm512_set1_ps(1.0f)));
	const __m512 res = _mm512_scalef_ps(j, n);
	__m512 alt;

	if (_mm512_kortestz(d, d))
		return res;
	alt = _mm512_mask_blend_ps(
		_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
		_mm512_set1_ps(INFINITY), _mm512_setzero_ps());
	return _mm512_mask_blend_ps(d, res, alt);
}

CPU_TARGET void cpu_swiglu_avx512(float *y, const float *g, const float *u,
				  int64_t nv)
{
	const __m512 one = _mm512_set1_ps(1.0f);
	int64_t i;

	for (i = 0; i < nv; i += 16) {
		__m512 x = _mm512_loadu_ps(g + i);
		__m512 e = cpu_v_expf(_mm512_sub_ps(_mm512_setzero_ps(), x));
		__m512 s = _mm512_div_ps(x, _mm512_add_ps(one, e));

		_mm512_storeu_ps(y + i,
				 _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
	}
}

CPU_TARGET void cpu_expf_sub_avx512(float *x, float max, int64_t nv)
{
	const __m512 m = _mm512_set1_ps(max);
	int64_t i;

	for (i = 0; i < nv; i += 16)
		_mm512_storeu_ps(x + i, cpu_v_expf(_mm512_sub_ps(
						_mm512_loadu_ps(x + i), m)));
}

/* 0xffff >> (16 - k): the first k lanes, 0 < k <= 16 */
CPU_TARGET static __mmask16 cpu_first(int64_t k)
{
	return (__mmask16)(0xffffu >> (16 - k));
}

CPU_TARGET void cpu_scale_avx512(float *y, const float *x, float s,
				 const float *w, int64_t n)
{
	const __m512 vs = _mm512_set1_ps(s);
	int64_t i;

	for (i = 0; i < n; i += 16) {
		__mmask16 k = n - i >= 16 ? 0xffff : cpu_first(n - i);
		__m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs);

		if (w)
			v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, w + i));
		_mm512_mask_storeu_ps(y + i, k, v);
	}
}

/*
 * ops_rope's pair rotation: r[a] = fma(x0, c, -(x1 s)), r[b] = fma(x0, s,
 * x1 c); fmsub(x0, c, x1 s) is the first (negation is exact). NEOX pairs
 * element k with k + n_rot / 2, NORM neighbours; cache holds (cos, sin)
 * per pair, interleaved. 16 pairs at a time, the rest scalar.
 */
CPU_TARGET void cpu_rope_avx512(float *r, uint32_t n_rot, bool neox,
				const float *cache)
{
	const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16,
					      14, 12, 10, 8, 6, 4, 2, 0);
	const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
	const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3,
					    18, 2, 17, 1, 16, 0);
	const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
	const uint32_t half = n_rot / 2;
	uint32_t p;

	for (p = 0; p + 16 <= half; p += 16) {
		__m512 c0 = _mm512_loadu_ps(cache + 2 * p);
		__m512 c1 = _mm512_loadu_ps(cache + 2 * p + 16);
		__m512 c = _mm512_permutex2var_ps(c0, even, c1);
		__m512 s = _mm512_permutex2var_ps(c0, odd, c1);
		__m512 x0, x1, y0, y1;

		if (neox) {
			x0 = _mm512_loadu_ps(r + p);
			x1 = _mm512_loadu_ps(r + p + half);
		} else {
			__m512 a = _mm512_loadu_ps(r + 2 * p);
			__m512 b = _mm512_loadu_ps(r + 2 * p + 16);

			x0 = _mm512_permutex2var_ps(a, even, b);
			x1 = _mm512_permutex2var_ps(a, odd, b);
		}
		y0 = _mm512_fmsub_ps(x0, c, _mm512_mul_ps(x1, s));
		y1 = _mm512_fmadd_ps(x0, s, _mm512_mul_ps(x1, c));
		if (neox) {
			_mm512_storeu_ps(r + p, y0);
			_mm512_storeu_ps(r + p + half, y1);
		} else {
			_mm512_storeu_ps(r + 2 * p,
					 _mm512_permutex2var_ps(y0, lo, y1));
			_mm512_storeu_ps(r + 2 * p + 16,
					 _mm512_permutex2var_ps(y0, hi, y1));
		}
	}
	for (; p < half; p++) {
		const float c = cache[2 * p], s = cache[2 * p + 1];
		uint32_t a = neox ? p : 2 * p, b = neox ? p + half : 2 * p + 1;
		float x0 = r[a], x1 = r[b];

		r[a] = fmaf(x0, c, -(x1 * s));
		r[b] = fmaf(x0, s, x1 * c);
	}
}

/*
 * quant_nearest_int on 16 lanes, the same float add and bit operations:
 * (bits(v + 1.5 * 2^23) & 0x7fffff) - 0x400000
 */
CPU_TARGET static __m512i cpu_nearest_int(__m512 v)
{
	__m512i b = _mm512_castps_si512(
		_mm512_add_ps(v, _mm512_set1_ps(12582912.f)));

	return _mm512_sub_epi32(
		_mm512_and_si512(b, _mm512_set1_epi32(0x007fffff)),
		_mm512_set1_epi32(0x00400000));
}

/*
 * The largest |x| of n (a multiple of 16) floats, NaNs skipped as the
 * scalar `a > amax` skips them: vmaxps returns its second operand when
 * either is NaN, and the accumulator is that operand.
 */
CPU_TARGET static float cpu_absmax(const float *x, int n)
{
	__m512 acc = _mm512_setzero_ps();
	int j;

	for (j = 0; j < n; j += 16)
		acc = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + j)), acc);
	return _mm512_reduce_max_ps(acc);
}

/* quant_k.c's quant_q8_K_from_float, scalar there */
CPU_TARGET void cpu_q8_K_from_float_avx512(const float *x, void *vy, int64_t nb)
{
	struct block_q8_K *y = vy;

	for (int64_t i = 0; i < nb; i++, x += QK_K) {
		const float amax = cpu_absmax(x, QK_K);
		float max = 0.0f;

		if (!amax) {
			memset(&y[i], 0, sizeof(y[i]));
			continue;
		}
		/* the scalar loop keeps the first x[j] with |x[j]| == amax */
		for (int j = 0; j < QK_K; j += 16) {
			__mmask16 m = _mm512_cmp_ps_mask(
				_mm512_abs_ps(_mm512_loadu_ps(x + j)),
				_mm512_set1_ps(amax), _CMP_EQ_OQ);

			if (m) {
				max = x[j + __builtin_ctz(m)];
				break;
			}
		}
		const float iscale = -127.f / max;
		const __m512 vi = _mm512_set1_ps(iscale);

		for (int j = 0; j < QK_K; j += 16) {
			__m512i v = cpu_nearest_int(
				_mm512_mul_ps(vi, _mm512_loadu_ps(x + j)));
			/* v < 127 ? v : 127, then the int8_t cast */
			__m128i q = _mm512_cvtepi32_epi8(
				_mm512_min_epi32(v, _mm512_set1_epi32(127)));

			_mm_storeu_si128((__m128i *)(y[i].qs + j), q);
			y[i].bsums[j / 16] = (int16_t)_mm512_reduce_add_epi32(
				_mm512_cvtepi8_epi32(q));
		}
		y[i].d = 1 / iscale;
	}
}

/* quant_legacy.c's quant_q8_0_from_float (quant_q8_block_x86) */
CPU_TARGET void cpu_q8_0_from_float_avx512(const float *x, void *vy, int64_t nb)
{
	struct block_q8_0 *y = vy;

	for (int64_t i = 0; i < nb; i++, x += QK8_0) {
		const float max = cpu_absmax(x, QK8_0);
		const __m512 id = _mm512_set1_ps(max != 0.0f ? 127.f / max :
							       0.0f);

		for (int j = 0; j < QK8_0; j += 16) {
			__m512i v = cpu_nearest_int(
				_mm512_mul_ps(_mm512_loadu_ps(x + j), id));

			_mm_storeu_si128((__m128i *)(y[i].qs + j),
					 _mm512_cvtepi32_epi8(v));
		}
		y[i].d = _cvtss_sh(max / 127.f, _MM_FROUND_TO_NEAREST_INT);
	}
}

/* vcvtps2ph, nearest even: what quant_fp32_to_fp16 emulates */
CPU_TARGET void cpu_f16_from_float_avx512(const float *x, void *vy, int64_t n)
{
	uint16_t *y = vy;
	int64_t i;

	for (i = 0; i < n; i += 16) {
		__mmask16 k = n - i >= 16 ? 0xffff : cpu_first(n - i);
		__m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(k, x + i),
					    _MM_FROUND_TO_NEAREST_INT |
						    _MM_FROUND_NO_EXC);

		_mm256_mask_storeu_epi16(y + i, k, h);
	}
}
#endif
