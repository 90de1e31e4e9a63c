// SPDX-License-Identifier: MIT
/*
 * The element-wise steps of a token in 4 lanes (elem_avx2.c's twins, for
 * both NEON levels): ggml_v_expf and silu, the RMS norm's scaling, rope,
 * and the activation quantizers (Q8_K, Q8_0, F16). Each is the scalar
 * code done lane by lane with the same IEEE operations on the same
 * values, so the results are bit for bit the scalar ones; nothing here
 * sums across lanes in floating point.
 *
 * As on AVX2, ggml_v_expf's scalef(j, n) = j * 2^n, rounded once, is
 * j * 2^t * 2^(n - t) with t = floor(n / 2): for |n| <= 192 (the other
 * lanes are replaced) the first product is exact, only the second rounds.
 * The largest |x| of a block skips NaNs as the scalar `a > amax` does:
 * FMAXNM returns the number when one operand is a quiet NaN (activations
 * are never signalling NaNs).
 */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "neon.h"
#include "reduce_neon.h"
#include "../quant/quant_internal.h"

/* 2^k for integer lanes k in [-126, 127] */
static inline float32x4_t cpu_pow2_neon(int32x4_t k)
{
	return vreinterpretq_f32_s32(
		vshlq_n_s32(vaddq_s32(k, vdupq_n_s32(127)), 23));
}

/* ggml_v_expf (AVX-512) on 4 lanes; ops.c's ops_v_expf is one lane. */
static inline float32x4_t cpu_v_expf_neon(float32x4_t x)
{
	const float32x4_t r = vdupq_n_f32(0x1.8p23f);
	const float32x4_t z = vfmaq_f32(r, x, vdupq_n_f32(0x1.715476p+0f));
	const float32x4_t n = vsubq_f32(z, r);
	const float32x4_t b = vfmsq_f32(
		vfmsq_f32(x, n, vdupq_n_f32(0x1.62e4p-1f)), n,
		vdupq_n_f32(0x1.7f7d1cp-20f));
	const uint32x4_t d = vcgtq_f32(vabsq_f32(n), vdupq_n_f32(192.0f));
	const float32x4_t u = vmulq_f32(b, b);
	const float32x4_t j = vfmaq_f32(
		vfmaq_f32(vdupq_n_f32(1.0f), vdupq_n_f32(0x1.ffffecp-1f), b),
		vfmaq_f32(vfmaq_f32(vdupq_n_f32(0x1.fffdb6p-2f),
				    vdupq_n_f32(0x1.555e66p-3f), b),
			  vfmaq_f32(vdupq_n_f32(0x1.573e2ep-5f),
				    vdupq_n_f32(0x1.0e4020p-7f), b),
			  u),
		u);
	/* n is integral where it matters (the other lanes are replaced) */
	const int32x4_t ni = vcvtq_s32_f32(n);
	const int32x4_t t = vshrq_n_s32(ni, 1);
	const float32x4_t res = vmulq_f32(vmulq_f32(j, cpu_pow2_neon(t)),
					  cpu_pow2_neon(vsubq_s32(ni, t)));
	float32x4_t alt;

	if (!vmaxvq_u32(d))
		return res;
	alt = vbslq_f32(vclezq_f32(n), vdupq_n_f32(0.0f),
			vdupq_n_f32(INFINITY));
	return vbslq_f32(d, alt, res);
}

void cpu_swiglu_neon(float *y, const float *g, const float *u, int64_t nv)
{
	const float32x4_t one = vdupq_n_f32(1.0f);
	int64_t i;

	for (i = 0; i < nv; i += 4) {
		const float32x4_t x = vld1q_f32(g + i);
		const float32x4_t e = cpu_v_expf_neon(
			vsubq_f32(vdupq_n_f32(0.0f), x));
		const float32x4_t s = vdivq_f32(x, vaddq_f32(one, e));

		vst1q_f32(y + i, vmulq_f32(s, vld1q_f32(u + i)));
	}
}

void cpu_expf_sub_neon(float *x, float max, int64_t nv)
{
	const float32x4_t m = vdupq_n_f32(max);
	int64_t i;

	for (i = 0; i < nv; i += 4)
		vst1q_f32(x + i,
			  cpu_v_expf_neon(vsubq_f32(vld1q_f32(x + i), m)));
}

void cpu_scale_neon(float *y, const float *x, float s, const float *w,
		    int64_t n)
{
	const float32x4_t vs = vdupq_n_f32(s);
	int64_t i;

	for (i = 0; i + 4 <= n; i += 4) {
		float32x4_t v = vmulq_f32(vld1q_f32(x + i), vs);

		if (w)
			v = vmulq_f32(v, vld1q_f32(w + i));
		vst1q_f32(y + i, v);
	}
	for (; i < n; i++) {
		y[i] = x[i] * s;
		if (w)
			y[i] = y[i] * w[i];
	}
}

/*
 * ops_rope's pair rotation: r[a] = fma(x0, c, -(x1 s)), r[b] = fma(x0,
 * s, x1 c); 4 pairs at a time (LD2/ST2 split NORM's neighbours), the
 * rest scalar.
 */
void cpu_rope_neon(float *r, uint32_t n_rot, bool neox, const float *cache)
{
	const uint32_t half = n_rot / 2;
	uint32_t p;

	for (p = 0; p + 4 <= half; p += 4) {
		const float32x4x2_t cs = vld2q_f32(cache + 2 * p);
		float32x4x2_t x;
		float32x4_t y0, y1;

		if (neox) {
			x.val[0] = vld1q_f32(r + p);
			x.val[1] = vld1q_f32(r + p + half);
		} else {
			x = vld2q_f32(r + 2 * p);
		}
		y0 = vfmaq_f32(vnegq_f32(vmulq_f32(x.val[1], cs.val[1])),
			       x.val[0], cs.val[0]);
		y1 = vfmaq_f32(vmulq_f32(x.val[1], cs.val[0]), x.val[0],
			       cs.val[1]);
		if (neox) {
			vst1q_f32(r + p, y0);
			vst1q_f32(r + p + half, y1);
		} else {
			x.val[0] = y0;
			x.val[1] = y1;
			vst2q_f32(r + 2 * p, x);
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
 * quant_nearest_int on 4 lanes, the same float add and bit operations:
 * (bits(v + 1.5 * 2^23) & 0x7fffff) - 0x400000
 */
static inline int32x4_t cpu_nearest_int_neon(float32x4_t v)
{
	const int32x4_t b = vreinterpretq_s32_f32(
		vaddq_f32(v, vdupq_n_f32(12582912.f)));

	return vsubq_s32(vandq_s32(b, vdupq_n_s32(0x007fffff)),
			 vdupq_n_s32(0x00400000));
}

/* The low bytes of 16 int32 lanes (an int8_t cast each), in order. */
static inline int8x16_t cpu_bytes16_neon(const int32x4_t v[4])
{
	const int16x8_t lo = vcombine_s16(vmovn_s32(v[0]), vmovn_s32(v[1]));
	const int16x8_t hi = vcombine_s16(vmovn_s32(v[2]), vmovn_s32(v[3]));

	return vcombine_s8(vmovn_s16(lo), vmovn_s16(hi));
}

/* The largest |x| of n (a multiple of 4) floats, NaNs skipped. */
static float cpu_absmax_neon(const float *x, int n)
{
	float32x4_t acc = vdupq_n_f32(0.0f);
	int j;

	for (j = 0; j < n; j += 4)
		acc = vmaxnmq_f32(acc, vabsq_f32(vld1q_f32(x + j)));
	return vmaxnmvq_f32(acc);
}

/* quant_k.c's quant_q8_K_from_float, scalar there */
void cpu_q8_K_from_float_neon(const float *x, void *vy, int64_t nb)
{
	struct block_q8_K *y = vy;

	for (int64_t i = 0; i < nb; i++, x += QK_K) {
		const float amax = cpu_absmax_neon(x, QK_K);
		float max = 0.0f;

		if (!amax) {
			memset(&y[i], 0, sizeof(y[i]));
			continue;
		}
		/* the scalar loop keeps the first x[j] with |x[j]| == amax */
		for (int j = 0; j < QK_K; j += 4) {
			if (!vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(x + j)),
						  vdupq_n_f32(amax))))
				continue;
			while (fabsf(x[j]) != amax)
				j++;
			max = x[j];
			break;
		}
		const float iscale = -127.f / max;
		const float32x4_t vi = vdupq_n_f32(iscale);
		const int32x4_t top = vdupq_n_s32(127);

		for (int j = 0; j < QK_K; j += 16) {
			int32x4_t v[4];
			int8x16_t q;
			int k;

			/* v < 127 ? v : 127, then the int8_t cast */
			for (k = 0; k < 4; k++)
				v[k] = vminq_s32(
					cpu_nearest_int_neon(vmulq_f32(
						vi, vld1q_f32(x + j + 4 * k))),
					top);
			q = cpu_bytes16_neon(v);
			vst1q_s8(y[i].qs + j, q);
			y[i].bsums[j / 16] = vaddlvq_s8(q);
		}
		y[i].d = 1 / iscale;
	}
}

/* quant_legacy.c's quant_q8_0_from_float (quant_q8_block_x86) */
void cpu_q8_0_from_float_neon(const float *x, void *vy, int64_t nb)
{
	struct block_q8_0 *y = vy;

	for (int64_t i = 0; i < nb; i++, x += QK8_0) {
		const float max = cpu_absmax_neon(x, QK8_0);
		const float32x4_t id = vdupq_n_f32(max != 0.0f ? 127.f / max :
								 0.0f);

		for (int j = 0; j < QK8_0; j += 16) {
			int32x4_t v[4];
			int k;

			for (k = 0; k < 4; k++)
				v[k] = cpu_nearest_int_neon(vmulq_f32(
					vld1q_f32(x + j + 4 * k), id));
			vst1q_s8(y[i].qs + j, cpu_bytes16_neon(v));
		}
		y[i].d = vget_lane_u16(cpu_f16_neon(vdupq_n_f32(max / 127.f)),
				       0);
	}
}

/* FCVTN, nearest even: what quant_fp32_to_fp16 emulates */
void cpu_f16_from_float_neon(const float *x, void *vy, int64_t n)
{
	uint16_t *y = vy;
	int64_t i;

	for (i = 0; i + 4 <= n; i += 4)
		vst1_u16(y + i, cpu_f16_neon(vld1q_f32(x + i)));
	for (; i < n; i++)
		y[i] = vget_lane_u16(cpu_f16_neon(vdupq_n_f32(x[i])), 0);
}
#endif /* __aarch64__ */
