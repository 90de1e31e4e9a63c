/* SPDX-License-Identifier: MIT */
/*
 * The horizontal sums and lane helpers of the NEON kernels, in registers
 * and in the order of the scalar folds they replace (the same pairs as
 * reduce_avx2.h's, each add with the scalar code's operands in the same
 * places, so the same bits). An 8-lane vector is two q registers, lanes
 * 0..3 and 4..7; a 16-lane one four. Include only on aarch64.
 */
#ifndef LLMFS_ENGINE_CPU_REDUCE_NEON_H
#define LLMFS_ENGINE_CPU_REDUCE_NEON_H

#include <arm_neon.h>
#include <string.h>

/* hsum_float_8 (quant_x86.c): v[l + 4] + v[l], then (0 + 2) + (1 + 3). */
static inline float cpu_hsum8_neon(float32x4_t lo, float32x4_t hi)
{
	const float32x4_t r = vaddq_f32(hi, lo);
	const float32x2_t s = vadd_f32(vget_low_f32(r), vget_high_f32(r));

	return vget_lane_f32(s, 0) + vget_lane_f32(s, 1);
}

/*
 * dot_hsum16 of the 16 lanes v[0] (0..3) .. v[3] (12..15): lanes i and
 * i + 8, then i and i + 4, i and i + 2, 0 and 1.
 */
static inline float cpu_hsum16_neon(const float32x4_t v[4])
{
	const float32x4_t a = vaddq_f32(v[0], v[2]), b = vaddq_f32(v[1], v[3]);
	const float32x4_t c = vaddq_f32(a, b);
	const float32x2_t s = vadd_f32(vget_low_f32(c), vget_high_f32(c));

	return vget_lane_f32(s, 0) + vget_lane_f32(s, 1);
}

/*
 * GGML_F32_VEC_REDUCE of four 16-lane accumulators held as a[4j + q]
 * (lanes 4q..4q + 3 of accumulator j): (0 + 2) + (1 + 3), then
 * dot_hsum16. The float dots' fold over steps of 64 elements.
 */
static inline float cpu_reduce64_neon(float32x4_t a[16])
{
	int q;

	for (q = 0; q < 4; q++) {
		a[q] = vaddq_f32(a[q], a[8 + q]);
		a[4 + q] = vaddq_f32(a[4 + q], a[12 + q]);
		a[q] = vaddq_f32(a[q], a[4 + q]);
	}
	return cpu_hsum16_neon(a);
}

/* An IEEE half as a float (FCVT: exact, a signalling NaN made quiet). */
static inline float cpu_h2f_neon(uint16_t h)
{
	return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))),
			      0);
}

/* Four IEEE halves at p as floats. */
static inline float32x4_t cpu_ld_f16_neon(const uint16_t *p)
{
	return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

/* Four floats as IEEE halves, to nearest even (FPCR's default mode). */
static inline uint16x4_t cpu_f16_neon(float32x4_t v)
{
	return vreinterpret_u16_f16(vcvt_f16_f32(v));
}

/* Four bytes at p (any alignment), broadcast to every int32 lane. */
static inline int8x16_t cpu_bcast4_neon(const void *p)
{
	int32_t v;

	memcpy(&v, p, sizeof(v));
	return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

#ifdef NEON_DOTPROD
/*
 * acc lane l += w[4l..4l+3] . a[4l..4l+3], any signed bytes, exact: SDOT
 * where the file is built for the neon-dotprod level (NEON_DOTPROD 1),
 * else SMULL and pairwise widening adds (neon.h).
 */
static inline int32x4_t cpu_qdot16(int32x4_t acc, int8x16_t w, int8x16_t a)
{
#if NEON_DOTPROD
	return vdotq_s32(acc, w, a);
#else
	/* products in int16 (|p| <= 2^14), widened before any sum */
	const int16x8_t p0 = vmull_s8(vget_low_s8(w), vget_low_s8(a));
	const int16x8_t p1 = vmull_high_s8(w, a);

	return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)));
#endif
}
#endif

#endif
