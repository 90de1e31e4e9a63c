/* SPDX-License-Identifier: MIT */
/*
 * The horizontal sums of the AVX-512 kernels (dot_avx512.c, attention.c),
 * in registers and in the order of the scalar folds they replace, so the
 * bits are the same. Include only on x86-64; call only where AVX-512 F is
 * usable (the callers' own target attributes include it).
 */
#ifndef LLMFS_ENGINE_CPU_REDUCE_AVX512_H
#define LLMFS_ENGINE_CPU_REDUCE_AVX512_H

#include <immintrin.h>

/*
 * hsum_float_8: high half + low half, then (0 + 2) + (1 + 3), in
 * registers (the same pairs, the same bits; a store and eight scalar
 * loads per row before).
 */
__attribute__((target("avx512f"))) static inline float cpu_hsum8(__m256 v)
{
	__m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1),
			      _mm256_castps256_ps128(v));

	r = _mm_add_ps(r, _mm_movehl_ps(r, r));
	r = _mm_add_ss(r, _mm_shuffle_ps(r, r, 1));
	return _mm_cvtss_f32(r);
}

/*
 * dot_hsum16 (_mm512_reduce_add_ps as ggml's GCC build folds it) in
 * registers: the same pairs in the same order (lanes i and i + 8, then i
 * and i + 4, i and i + 2, 0 and 1), so the same bits; the scalar version
 * went through memory and was 11% of a prefill.
 */
__attribute__((target("avx512f"))) static inline float cpu_hsum16(__m512 v)
{
	__m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
				 _mm256_castpd_ps(_mm512_extractf64x4_pd(
					 _mm512_castps_pd(v), 1)));
	__m128 q = _mm_add_ps(_mm256_castps256_ps128(h),
			      _mm256_extractf128_ps(h, 1));

	q = _mm_add_ps(q, _mm_movehl_ps(q, q));
	q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
	return _mm_cvtss_f32(q);
}

#endif
