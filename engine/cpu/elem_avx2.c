// SPDX-License-Identifier: MIT
/*
 * The element-wise steps of a token in 8 lanes (elem_avx512.c's twins):
 * ggml_v_expf and silu, the RMS norm's scaling, rope, and the activation
 * quantizers (Q8_K, Q8_0, F16). Each is the scalar code done lane by lane
 * with the same IEEE operations on the same values, so the results are
 * bit for bit the scalar ones (and the AVX-512 ones); nothing here sums
 * across lanes in floating point.
 *
 * AVX2 has no vscalefps: ggml_v_expf's scalef(j, n) = j * 2^n, rounded
 * once, is j * 2^t * 2^(n - t) with t = floor(n / 2). For |n| <= 192 (the
 * other lanes are blended away) both factors are normal floats, the first
 * product lands in the normal range and is exact, so only the second
 * rounds: once, as scalef and ldexpf do, subnormal results included.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "avx2.h"
#include "reduce_avx2.h"
#include "../quant/quant_internal.h"

#define CPU_TARGET __attribute__((target("avx2,fma,f16c")))

/* 2^k for integer lanes k in [-126, 127] */
CPU_TARGET static __m256 cpu_pow2(__m256i k)
{
	return _mm256_castsi256_ps(_mm256_slli_epi32(
		_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

/* ggml_v_expf (AVX-512) on 8 lanes; ops.c's ops_v_expf is one lane. */
CPU_TARGET static __m256 cpu_v_expf(__m256 x)
{
	const __m256 r = _mm256_set1_ps(0x1.8p23f);
	const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
	const __m256 n = _mm256_sub_ps(z, r);
	const __m256 b = _mm256_fnmadd_ps(
		n, _mm256_set1_ps(0x1.7f7d1cp-20f),
		_mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
	const __m256 absn = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
	const __m256 d = _mm256_cmp_ps(absn, _mm256_set1_ps(192), _CMP_GT_OQ);
	const __m256 u = _mm256_mul_ps(b, b);
	const __m256 j = _mm256_fmadd_ps(
		_mm256_fmadd_ps(
			_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b,
					_mm256_set1_ps(0x1.573e2ep-5f)),
			u,
			_mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b,
					_mm256_set1_ps(0x1.fffdb6p-2f))),
		u,
		_mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b,
				_mm256_set1_ps(1.0f)));
	const __m256i ni = _mm256_cvtps_epi32(n); /* n is integral */
	const __m256i t = _mm256_srai_epi32(ni, 1);
	const __m256 res = _mm256_mul_ps(_mm256_mul_ps(j, cpu_pow2(t)),
					 cpu_pow2(_mm256_sub_epi32(ni, t)));
	__m256 alt;

	if (_mm256_testz_ps(d, d))
		return res;
	alt = _mm256_blendv_ps(
		_mm256_set1_ps(INFINITY), _mm256_setzero_ps(),
		_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ));
	return _mm256_blendv_ps(res, alt, d);
}

CPU_TARGET void cpu_swiglu_avx2(float *y, const float *g, const float *u,
				int64_t nv)
{
	const __m256 one = _mm256_set1_ps(1.0f);
	int64_t i;

	for (i = 0; i < nv; i += 8) {
		__m256 x = _mm256_loadu_ps(g + i);
		__m256 e = cpu_v_expf(_mm256_sub_ps(_mm256_setzero_ps(), x));
		__m256 s = _mm256_div_ps(x, _mm256_add_ps(one, e));

		_mm256_storeu_ps(y + i,
				 _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
	}
}

CPU_TARGET void cpu_expf_sub_avx2(float *x, float max, int64_t nv)
{
	const __m256 m = _mm256_set1_ps(max);
	int64_t i;

	for (i = 0; i < nv; i += 8)
		_mm256_storeu_ps(x + i, cpu_v_expf(_mm256_sub_ps(
						_mm256_loadu_ps(x + i), m)));
}

CPU_TARGET void cpu_scale_avx2(float *y, const float *x, float s,
			       const float *w, int64_t n)
{
	const __m256 vs = _mm256_set1_ps(s);
	int64_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		__m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);

		if (w)
			v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
		_mm256_storeu_ps(y + i, v);
	}
	for (; i < n; i++) {
		y[i] = x[i] * s;
		if (w)
			y[i] = y[i] * w[i];
	}
}

/* Floats 0, 2, .. 14 (even) or 1, 3, .. 15 of the 16 at p. */
CPU_TARGET static void cpu_deinterleave(const float *p, __m256 *even,
					__m256 *odd)
{
	__m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
	__m256 lo = _mm256_permute2f128_ps(a, b, 0x20);
	__m256 hi = _mm256_permute2f128_ps(a, b, 0x31);

	*even = _mm256_shuffle_ps(lo, hi, 0x88);
	*odd = _mm256_shuffle_ps(lo, hi, 0xdd);
}

/*
 * ops_rope's pair rotation (see cpu_rope_avx512): r[a] = fmsub(x0, c, x1
 * s), r[b] = fma(x0, s, x1 c); 8 pairs at a time, the rest scalar.
 */
CPU_TARGET void cpu_rope_avx2(float *r, uint32_t n_rot, bool neox,
			      const float *cache)
{
	const uint32_t half = n_rot / 2;
	uint32_t p;

	for (p = 0; p + 8 <= half; p += 8) {
		__m256 c, s, x0, x1, y0, y1;

		cpu_deinterleave(cache + 2 * p, &c, &s);
		if (neox) {
			x0 = _mm256_loadu_ps(r + p);
			x1 = _mm256_loadu_ps(r + p + half);
		} else {
			cpu_deinterleave(r + 2 * p, &x0, &x1);
		}
		y0 = _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s));
		y1 = _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c));
		if (neox) {
			_mm256_storeu_ps(r + p, y0);
			_mm256_storeu_ps(r + p + half, y1);
		} else {
			__m256 lo = _mm256_unpacklo_ps(y0, y1);
			__m256 hi = _mm256_unpackhi_ps(y0, y1);

			_mm256_storeu_ps(r + 2 * p,
					 _mm256_permute2f128_ps(lo, hi, 0x20));
			_mm256_storeu_ps(r + 2 * p + 8,
					 _mm256_permute2f128_ps(lo, hi, 0x31));
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
 * quant_nearest_int on 8 lanes, the same float add and bit operations:
 * (bits(v + 1.5 * 2^23) & 0x7fffff) - 0x400000
 */
CPU_TARGET static __m256i cpu_nearest_int(__m256 v)
{
	__m256i b = _mm256_castps_si256(
		_mm256_add_ps(v, _mm256_set1_ps(12582912.f)));

	return _mm256_sub_epi32(
		_mm256_and_si256(b, _mm256_set1_epi32(0x007fffff)),
		_mm256_set1_epi32(0x00400000));
}

/* The low bytes of 16 int32 lanes (an int8_t cast each), in order. */
CPU_TARGET static __m128i cpu_bytes16(__m256i a, __m256i b)
{
	const __m256i low = _mm256_setr_epi8(
		0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
		-1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1);
	/* a's bytes in dwords 0 and 5, b's in 2 and 7 */
	__m256i v = _mm256_or_si256(
		_mm256_shuffle_epi8(a, low),
		_mm256_slli_si256(_mm256_shuffle_epi8(b, low), 8));

	return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
		v, _mm256_setr_epi32(0, 5, 2, 7, 0, 0, 0, 0)));
}

/*
 * The largest |x| of n (a multiple of 8) floats, NaNs skipped as the
 * scalar `a > amax` skips them: vmaxps returns its second operand when
 * either is NaN, and the accumulator is that operand.
 */
CPU_TARGET static float cpu_absmax(const float *x, int n)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 acc = _mm256_setzero_ps();
	__m128 m;
	int j;

	for (j = 0; j < n; j += 8)
		acc = _mm256_max_ps(
			_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), acc);
	m = _mm_max_ps(_mm256_castps256_ps128(acc),
		       _mm256_extractf128_ps(acc, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
	return _mm_cvtss_f32(m);
}

/* quant_k.c's quant_q8_K_from_float, scalar there */
CPU_TARGET void cpu_q8_K_from_float_avx2(const float *x, void *vy, int64_t nb)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	struct block_q8_K *y = vy;

	for (int64_t i = 0; i < nb; i++, x += QK_K) {
		const float amax = cpu_absmax(x, QK_K);
		float max = 0.0f;

		if (!amax) {
			memset(&y[i], 0, sizeof(y[i]));
			continue;
		}
		/* the scalar loop keeps the first x[j] with |x[j]| == amax */
		for (int j = 0; j < QK_K; j += 8) {
			int m = _mm256_movemask_ps(_mm256_cmp_ps(
				_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)),
				_mm256_set1_ps(amax), _CMP_EQ_OQ));

			if (m) {
				max = x[j + __builtin_ctz((unsigned)m)];
				break;
			}
		}
		const float iscale = -127.f / max;
		const __m256 vi = _mm256_set1_ps(iscale);
		const __m256i top = _mm256_set1_epi32(127);

		for (int j = 0; j < QK_K; j += 16) {
			/* v < 127 ? v : 127, then the int8_t cast */
			__m256i v0 = _mm256_min_epi32(
				cpu_nearest_int(_mm256_mul_ps(
					vi, _mm256_loadu_ps(x + j))),
				top);
			__m256i v1 = _mm256_min_epi32(
				cpu_nearest_int(_mm256_mul_ps(
					vi, _mm256_loadu_ps(x + j + 8))),
				top);
			__m128i q = cpu_bytes16(v0, v1);
			__m256i s = _mm256_madd_epi16(_mm256_cvtepi8_epi16(q),
						      _mm256_set1_epi16(1));

			_mm_storeu_si128((__m128i *)(y[i].qs + j), q);
			y[i].bsums[j / 16] = (int16_t)cpu_isum8_avx2(s);
		}
		y[i].d = 1 / iscale;
	}
}

/* quant_legacy.c's quant_q8_0_from_float (quant_q8_block_x86) */
CPU_TARGET void cpu_q8_0_from_float_avx2(const float *x, void *vy, int64_t nb)
{
	struct block_q8_0 *y = vy;

	for (int64_t i = 0; i < nb; i++, x += QK8_0) {
		const float max = cpu_absmax(x, QK8_0);
		const __m256 id = _mm256_set1_ps(max != 0.0f ? 127.f / max :
							       0.0f);

		for (int j = 0; j < QK8_0; j += 16)
			_mm_storeu_si128(
				(__m128i *)(y[i].qs + j),
				cpu_bytes16(
					cpu_nearest_int(_mm256_mul_ps(
						_mm256_loadu_ps(x + j), id)),
					cpu_nearest_int(_mm256_mul_ps(
						_mm256_loadu_ps(x + j + 8),
						id))));
		y[i].d = _cvtss_sh(max / 127.f, _MM_FROUND_TO_NEAREST_INT);
	}
}

/* vcvtps2ph, nearest even: what quant_fp32_to_fp16 emulates */
CPU_TARGET void cpu_f16_from_float_avx2(const float *x, void *vy, int64_t n)
{
	uint16_t *y = vy;
	int64_t i;

	for (i = 0; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(y + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(x + i),
						 _MM_FROUND_TO_NEAREST_INT |
							 _MM_FROUND_NO_EXC));
	for (; i < n; i++)
		y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}
#endif /* __x86_64__ */
