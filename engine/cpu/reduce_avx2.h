/* SPDX-License-Identifier: MIT */
/*
 * The horizontal sums of the AVX2 kernels, in registers and in the order
 * of the scalar folds they replace (the same pairs as reduce_avx512.h's,
 * so the same bits). A 16-lane AVX-512 vector is two 8-lane halves here:
 * lanes 0..7 and 8..15. Include only on x86-64; call only where AVX2 is
 * usable (the callers' own target attributes include it).
 */
#ifndef LLMFS_ENGINE_CPU_REDUCE_AVX2_H
#define LLMFS_ENGINE_CPU_REDUCE_AVX2_H

#include <immintrin.h>

/* hsum_float_8: high half + low half, then (0 + 2) + (1 + 3). */
__attribute__((target("avx2"))) static inline float cpu_hsum8_avx2(__m256 v)
{
	__m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1),
			      _mm256_castps256_ps128(v));

	r = _mm_add_ps(r, _mm_movehl_ps(r, r));
	r = _mm_add_ss(r, _mm_shuffle_ps(r, r, 1));
	return _mm_cvtss_f32(r);
}

/*
 * dot_hsum16 of the 16 lanes lo (0..7) and hi (8..15): lanes i and i + 8,
 * then i and i + 4, i and i + 2, 0 and 1, as cpu_hsum16.
 */
__attribute__((target("avx2"))) static inline float cpu_hsum16_avx2(__m256 lo,
								    __m256 hi)
{
	__m256 h = _mm256_add_ps(lo, hi);
	__m128 q = _mm_add_ps(_mm256_castps256_ps128(h),
			      _mm256_extractf128_ps(h, 1));

	q = _mm_add_ps(q, _mm_movehl_ps(q, q));
	q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
	return _mm_cvtss_f32(q);
}

/* The sum of eight int32 lanes (exact in any order). */
__attribute__((target("avx2"))) static inline int cpu_isum8_avx2(__m256i v)
{
	__m128i x = _mm_add_epi32(_mm256_castsi256_si128(v),
				  _mm256_extracti128_si256(v, 1));

	x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4e));
	x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xb1));
	return _mm_cvtsi128_si32(x);
}

#endif
