/* SPDX-License-Identifier: MIT */
/*
 * The integer dot kernels of the two NEON levels (neon.h), written once
 * and included once per level: by dot_neon.c with NEON_DOTPROD 0 and by
 * dot_neon_dotprod.c with NEON_DOTPROD 1 (and the dotprod target). Each
 * returns quant_x86.c's (or dot.c's repacked gemvs') float bit for bit.
 *
 * The scalar emulation's integer lane l of a 32-element load is the sum
 * of elements 4l..4l + 3; here lanes 0..3 come from the load's first 16
 * bytes and 4..7 from its second, each by cpu_qdot16. Integer sums are
 * exact in any order, so only which elements share a lane matters; the
 * float steps are the scalar code's, lane by lane, folded by hsum8.
 */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "neon.h"
#include "reduce_neon.h"
#include "../quant/quant_internal.h"

#if NEON_DOTPROD
#define NEON_QDOT_FN(name) name##_neon_dotprod
#else
#define NEON_QDOT_FN(name) name##_neon
#endif

/* lanes l = w[4l..4l+3] . a[4l..4l+3] of 16 bytes */
static inline int32x4_t cpu_qlanes16(int8x16_t w, int8x16_t a)
{
	return cpu_qdot16(vdupq_n_s32(0), w, a);
}

/* acc = fma(d, (float)lane, acc) on the 8 lanes lo, hi */
static inline void cpu_qfma8(float32x4_t acc[2], float d, int32x4_t lo,
			     int32x4_t hi)
{
	const float32x4_t vd = vdupq_n_f32(d);

	acc[0] = vfmaq_f32(acc[0], vd, vcvtq_f32_s32(lo));
	acc[1] = vfmaq_f32(acc[1], vd, vcvtq_f32_s32(hi));
}

/* x86_dot_legacy for Q8_0: acc = fma(dw * da, lanes, acc), then hsum8. */
float NEON_QDOT_FN(cpu_q8_0)(int64_t n, const void *vw, const void *va)
{
	const struct block_q8_0 *w = vw, *a = va;
	float32x4_t acc[2] = { vdupq_n_f32(0.0f), vdupq_n_f32(0.0f) };
	int64_t i, nb = n / QK8_0;

	for (i = 0; i < nb; i++) {
		const float d = cpu_h2f_neon(w[i].d) * cpu_h2f_neon(a[i].d);

		cpu_qfma8(acc, d,
			  cpu_qlanes16(vld1q_s8(w[i].qs), vld1q_s8(a[i].qs)),
			  cpu_qlanes16(vld1q_s8(w[i].qs + 16),
				       vld1q_s8(a[i].qs + 16)));
	}
	return cpu_hsum8_neon(acc[0], acc[1]);
}

/* 16 bytes of 16 where bit j of the two bytes at h is set (a fifth bit) */
static inline uint8x16_t cpu_qbits16(const uint8_t *h)
{
	const uint8x16_t bit = vreinterpretq_u8_u64(
		vdupq_n_u64(0x8040201008040201ull));
	const uint8x16_t v = vcombine_u8(vdup_n_u8(h[0]), vdup_n_u8(h[1]));

	return vandq_u8(vtstq_u8(v, bit), vdupq_n_u8(16));
}

/*
 * x86_dot_legacy for Q4_0/Q4_1/Q5_0/Q5_1: the weights as signed bytes in
 * element order (low nibbles, then high ones, plus 16 for a set fifth
 * bit, less the offset 8 or 16); summs = fma(m, s, summs) for the _1
 * types.
 */
static float cpu_qlegacy(int64_t n, const uint8_t *w, const uint8_t *a,
			 size_t bw, int with_min, int five, int off)
{
	/* where qs starts: after d (and m) (and qh) */
	const size_t qs_at = 2 + 2 * with_min + 4 * five;
	const size_t ab = with_min ? sizeof(struct block_q8_1) :
				     sizeof(struct block_q8_0);
	const int8x16_t offv = vdupq_n_s8((int8_t)off);
	float32x4_t acc[2] = { vdupq_n_f32(0.0f), vdupq_n_f32(0.0f) };
	float summs = 0.0f;
	int64_t i, nb = n / 32;

	for (i = 0; i < nb; i++, w += bw, a += ab) {
		const uint8x16_t q = vld1q_u8(w + qs_at);
		const int8_t *qa = (const int8_t *)(a + (with_min ? 4 : 2));
		uint8x16_t lo = vandq_u8(q, vdupq_n_u8(0x0f));
		uint8x16_t hi = vshrq_n_u8(q, 4);
		uint16_t dw, da;

		if (five) {
			const uint8_t *qh = w + 2 + 2 * with_min;

			lo = vorrq_u8(lo, cpu_qbits16(qh));
			hi = vorrq_u8(hi, cpu_qbits16(qh + 2));
		}
		memcpy(&dw, w, 2);
		memcpy(&da, a, 2);
		if (with_min) {
			uint16_t mw, sa;

			memcpy(&mw, w + 2, 2);
			memcpy(&sa, a + 2, 2);
			summs = fmaf(cpu_h2f_neon(mw), cpu_h2f_neon(sa), summs);
		}
		cpu_qfma8(acc, cpu_h2f_neon(dw) * cpu_h2f_neon(da),
			  cpu_qlanes16(vsubq_s8(vreinterpretq_s8_u8(lo), offv),
				       vld1q_s8(qa)),
			  cpu_qlanes16(vsubq_s8(vreinterpretq_s8_u8(hi), offv),
				       vld1q_s8(qa + 16)));
	}
	return with_min ? cpu_hsum8_neon(acc[0], acc[1]) + summs :
			  cpu_hsum8_neon(acc[0], acc[1]);
}

float NEON_QDOT_FN(cpu_q4_0)(int64_t n, const void *w, const void *a)
{
	return cpu_qlegacy(n, w, a, sizeof(struct block_q4_0), 0, 0, 8);
}

float NEON_QDOT_FN(cpu_q4_1)(int64_t n, const void *w, const void *a)
{
	return cpu_qlegacy(n, w, a, sizeof(struct block_q4_1), 1, 0, 0);
}

float NEON_QDOT_FN(cpu_q5_0)(int64_t n, const void *w, const void *a)
{
	return cpu_qlegacy(n, w, a, sizeof(struct block_q5_0), 0, 1, 16);
}

float NEON_QDOT_FN(cpu_q5_1)(int64_t n, const void *w, const void *a)
{
	return cpu_qlegacy(n, w, a, sizeof(struct block_q5_1), 1, 1, 0);
}

/* The 6-bit scale and min j of a q4_K block (quant_k_scale_min, inlined). */
static inline void cpu_qscale_min_k4(const uint8_t *q, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/*
 * The K-quants' integer lanes (x86_lanes_k): for each 32-element load c
 * of the super-block, lanes 0..3 times the scale sc[2c], lanes 4..7 times
 * sc[2c + 1], added up. w: the 32 weights as signed bytes.
 */
static inline void cpu_qk32(int32x4_t isum[2], int8x16_t w0, int8x16_t w1,
			    const int8_t *a, int s0, int s1)
{
	isum[0] = vmlaq_n_s32(isum[0], cpu_qlanes16(w0, vld1q_s8(a)), s0);
	isum[1] = vmlaq_n_s32(isum[1], cpu_qlanes16(w1, vld1q_s8(a + 16)), s1);
}

/*
 * x86_dot_q45_K: the mins in scalar (four floats for Q4_K, one FMA'd sum
 * for Q5_K, as there), each 32-element sub-block's lanes times its scale.
 */
static float cpu_qdot_q45_K(int64_t nb, const uint8_t *vx,
			    const struct block_q8_K *y, int five)
{
	const size_t bytes = five ? sizeof(struct block_q5_K) :
				    sizeof(struct block_q4_K);
	const uint8x16_t m4 = vdupq_n_u8(0x0f);
	float32x4_t acc[2] = { vdupq_n_f32(0.0f), vdupq_n_f32(0.0f) };
	float acc_m[4] = { 0 }, summs = 0.0f;
	int64_t i;

	for (i = 0; i < nb; i++, vx += bytes) {
		const struct block_q4_K *x4 = (const void *)vx;
		const struct block_q5_K *x5 = (const void *)vx;
		const uint8_t *sc12 = five ? x5->scales : x4->scales;
		const uint8_t *qs = five ? x5->qs : x4->qs;
		const float d = y[i].d * cpu_h2f_neon(x4->d);
		const float dmin = -y[i].d * cpu_h2f_neon(x4->dmin);
		int32x4_t isum[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
		uint8x16_t qh[2] = { vdupq_n_u8(0), vdupq_n_u8(0) };
		int sc[8], mn[8], prod[4], j, k, g, h;

		for (j = 0; j < 8; j++)
			cpu_qscale_min_k4(sc12, j, &sc[j], &mn[j]);
		for (k = 0; k < 4; k++) {
			const int16_t *b = y[i].bsums + 4 * k;

			prod[k] = mn[2 * k] * (b[0] + b[1]) +
				  mn[2 * k + 1] * (b[2] + b[3]);
		}
		if (five)
			summs = fmaf(
				dmin,
				(float)(prod[0] + prod[1] + prod[2] + prod[3]),
				summs);
		else
			for (k = 0; k < 4; k++)
				acc_m[k] = fmaf(dmin, (float)prod[k], acc_m[k]);
		if (five) {
			qh[0] = vld1q_u8(x5->qh);
			qh[1] = vld1q_u8(x5->qh + 16);
		}
		for (g = 0; g < 4; g++)
			for (h = 0; h < 2; h++) {
				/* elements 64g + 32h + (0..31) */
				const uint8x16_t q0 = vld1q_u8(qs + 32 * g);
				const uint8x16_t q1 = vld1q_u8(qs + 32 * g +
							       16);
				uint8x16_t w0 = h ? vshrq_n_u8(q0, 4) :
						    vandq_u8(q0, m4);
				uint8x16_t w1 = h ? vshrq_n_u8(q1, 4) :
						    vandq_u8(q1, m4);

				if (five) {
					const uint8x16_t bit = vdupq_n_u8(
						1 << (2 * g + h));
					const uint8x16_t sixteen = vdupq_n_u8(
						16);

					w0 = vorrq_u8(
						w0,
						vandq_u8(vtstq_u8(qh[0], bit),
							 sixteen));
					w1 = vorrq_u8(
						w1,
						vandq_u8(vtstq_u8(qh[1], bit),
							 sixteen));
				}
				cpu_qk32(isum, vreinterpretq_s8_u8(w0),
					 vreinterpretq_s8_u8(w1),
					 y[i].qs + 64 * g + 32 * h,
					 sc[2 * g + h], sc[2 * g + h]);
			}
		cpu_qfma8(acc, d, isum[0], isum[1]);
	}
	if (five)
		return cpu_hsum8_neon(acc[0], acc[1]) + summs;
	return cpu_hsum8_neon(acc[0], acc[1]) +
	       ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

float NEON_QDOT_FN(cpu_q4_K)(int64_t n, const void *w, const void *a)
{
	return cpu_qdot_q45_K(n / QK_K, w, a, 0);
}

float NEON_QDOT_FN(cpu_q5_K)(int64_t n, const void *w, const void *a)
{
	return cpu_qdot_q45_K(n / QK_K, w, a, 1);
}

/*
 * lane l of bsums . scales in pairs, for the 8 pairs from b: lanes 0..3
 * of lo, 4..7 of hi (b[2l] s[2l] + b[2l + 1] s[2l + 1]), s as int16.
 */
static inline void cpu_qpairs8(const int16_t *b, int16x8_t s_lo, int16x8_t s_hi,
			       int32x4_t *lo, int32x4_t *hi)
{
	const int16x8_t b0 = vld1q_s16(b), b1 = vld1q_s16(b + 8);

	*lo = vpaddq_s32(vmull_s16(vget_low_s16(b0), vget_low_s16(s_lo)),
			 vmull_high_s16(b0, s_lo));
	*hi = vpaddq_s32(vmull_s16(vget_low_s16(b1), vget_low_s16(s_hi)),
			 vmull_high_s16(b1, s_hi));
}

/*
 * x86_dot_q6_K: unsigned 6-bit weights, each 32-element load's lanes
 * 0..3 times the scale of its first 16, 4..7 of its second; then lane l
 * loses 32 (b[2l] sc[2l] + b[2l+1] sc[2l+1]).
 */
float NEON_QDOT_FN(cpu_q6_K)(int64_t n, const void *vw, const void *va)
{
	const struct block_q6_K *x = vw;
	const struct block_q8_K *y = va;
	const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(3);
	float32x4_t acc[2] = { vdupq_n_f32(0.0f), vdupq_n_f32(0.0f) };
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		const float d = y[i].d * cpu_h2f_neon(x[i].d);
		const int8_t *s = x[i].scales;
		const int8x16_t s8 = vld1q_s8(s);
		int32x4_t isum[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
		int32x4_t c_lo, c_hi;
		int h, c, k;

		for (h = 0; h < 2; h++) {
			const uint8_t *ql = x[i].ql + 64 * h;
			const uint8_t *qh = x[i].qh + 32 * h;
			const int8_t *a = y[i].qs + 128 * h;

			for (k = 0; k < 2; k++) {
				/* 16 of the 32 columns l: 16k.. */
				const uint8x16_t l0 = vld1q_u8(ql + 16 * k);
				const uint8x16_t l1 = vld1q_u8(ql + 32 +
							       16 * k);
				const uint8x16_t hb = vld1q_u8(qh + 16 * k);
				uint8x16_t q[4];

				q[0] = vorrq_u8(
					vandq_u8(l0, m4),
					vshlq_n_u8(vandq_u8(hb, m3), 4));
				q[1] = vorrq_u8(
					vandq_u8(l1, m4),
					vshlq_n_u8(
						vandq_u8(vshrq_n_u8(hb, 2), m3),
						4));
				q[2] = vorrq_u8(
					vshrq_n_u8(l0, 4),
					vshlq_n_u8(
						vandq_u8(vshrq_n_u8(hb, 4), m3),
						4));
				q[3] = vorrq_u8(
					vshrq_n_u8(l1, 4),
					vshlq_n_u8(vshrq_n_u8(hb, 6), 4));
				/* group c: elements 128h + 32c + 16k.. */
				for (c = 0; c < 4; c++)
					isum[k] = vmlaq_n_s32(
						isum[k],
						cpu_qlanes16(
							vreinterpretq_s8_u8(
								q[c]),
							vld1q_s8(a + 32 * c +
								 16 * k)),
						s[8 * h + 2 * c + k]);
			}
		}
		cpu_qpairs8(y[i].bsums, vmovl_s8(vget_low_s8(s8)),
			    vmovl_high_s8(s8), &c_lo, &c_hi);
		cpu_qfma8(acc, d, vsubq_s32(isum[0], vshlq_n_s32(c_lo, 5)),
			  vsubq_s32(isum[1], vshlq_n_s32(c_hi, 5)));
	}
	return cpu_hsum8_neon(acc[0], acc[1]);
}

/*
 * x86_dot_q2_K: per block first acc = fma(-dmin, mins . bsums (lane l:
 * sub-blocks 2l, 2l + 1), acc), then acc = fma(d, lanes, acc); weights
 * 0..3, each 16-element sub-block times its scale.
 */
float NEON_QDOT_FN(cpu_q2_K)(int64_t n, const void *vw, const void *va)
{
	const struct block_q2_K *x = vw;
	const struct block_q8_K *y = va;
	const uint8x16_t m3 = vdupq_n_u8(3);
	float32x4_t acc[2] = { vdupq_n_f32(0.0f), vdupq_n_f32(0.0f) };
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		const float d = y[i].d * cpu_h2f_neon(x[i].d);
		const float dmin = -y[i].d * cpu_h2f_neon(x[i].dmin);
		const uint8x16_t s8 = vld1q_u8(x[i].scales);
		const uint8x16_t mins = vshrq_n_u8(s8, 4);
		int32x4_t isum[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
		int32x4_t p_lo, p_hi;
		int h, c;

		cpu_qpairs8(y[i].bsums,
			    vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins))),
			    vreinterpretq_s16_u16(vmovl_high_u8(mins)), &p_lo,
			    &p_hi);
		cpu_qfma8(acc, dmin, p_lo, p_hi);
		for (h = 0; h < 2; h++) {
			const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * h);
			const uint8x16_t q1 = vld1q_u8(x[i].qs + 32 * h + 16);

			for (c = 0; c < 4; c++) {
				const int j = 8 * h + 2 * c;
				const int8x16_t sh = vdupq_n_s8(
					(int8_t)(-2 * c));

				cpu_qk32(isum,
					 vreinterpretq_s8_u8(vandq_u8(
						 vshlq_u8(q0, sh), m3)),
					 vreinterpretq_s8_u8(vandq_u8(
						 vshlq_u8(q1, sh), m3)),
					 y[i].qs + 128 * h + 32 * c,
					 x[i].scales[j] & 0xf,
					 x[i].scales[j + 1] & 0xf);
			}
		}
		cpu_qfma8(acc, d, isum[0], isum[1]);
	}
	return cpu_hsum8_neon(acc[0], acc[1]);
}

/*
 * x86_dot_q3_K: weight lo - 4 + 4 * hbit as a signed byte, times the
 * signed 6-bit scale of its 16.
 */
float NEON_QDOT_FN(cpu_q3_K)(int64_t n, const void *vw, const void *va)
{
	const struct block_q3_K *x = vw;
	const struct block_q8_K *y = va;
	const uint8x16_t m3 = vdupq_n_u8(3), four = vdupq_n_u8(4);
	float32x4_t acc[2] = { vdupq_n_f32(0.0f), vdupq_n_f32(0.0f) };
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		const float d = y[i].d * cpu_h2f_neon(x[i].d);
		const uint8x16_t hm0 = vld1q_u8(x[i].hmask);
		const uint8x16_t hm1 = vld1q_u8(x[i].hmask + 16);
		int32x4_t isum[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
		int8_t sc[16];
		int h, c;

		quant_q3_K_scales(x[i].scales, sc);
		for (h = 0; h < 2; h++) {
			const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * h);
			const uint8x16_t q1 = vld1q_u8(x[i].qs + 32 * h + 16);

			for (c = 0; c < 4; c++) {
				const int j = 8 * h + 2 * c;
				const int8x16_t sh = vdupq_n_s8(
					(int8_t)(-2 * c));
				const uint8x16_t bit = vdupq_n_u8(
					(uint8_t)(1 << (4 * h + c)));
				uint8x16_t w0 = vorrq_u8(
					vandq_u8(vshlq_u8(q0, sh), m3),
					vandq_u8(vtstq_u8(hm0, bit), four));
				uint8x16_t w1 = vorrq_u8(
					vandq_u8(vshlq_u8(q1, sh), m3),
					vandq_u8(vtstq_u8(hm1, bit), four));

				cpu_qk32(
					isum,
					vreinterpretq_s8_u8(vsubq_u8(w0, four)),
					vreinterpretq_s8_u8(vsubq_u8(w1, four)),
					y[i].qs + 128 * h + 32 * c, sc[j],
					sc[j + 1]);
			}
		}
		cpu_qfma8(acc, d, isum[0], isum[1]);
	}
	return cpu_hsum8_neon(acc[0], acc[1]);
}

/* dot_q4_0_repacked: acc = fma((float)sum((q - 8) a), dw * da, acc). */
float NEON_QDOT_FN(cpu_q4_0_repacked)(int64_t n, const void *vw, const void *va)
{
	const struct block_q4_0 *w = vw;
	const struct block_q8_0 *a = va;
	const int8x16_t eight = vdupq_n_s8(8);
	float acc = 0.0f;
	int64_t i, nb = n / QK8_0;

	for (i = 0; i < nb; i++) {
		const uint8x16_t q = vld1q_u8(w[i].qs);
		int32x4_t s = cpu_qlanes16(
			vsubq_s8(vreinterpretq_s8_u8(
					 vandq_u8(q, vdupq_n_u8(0x0f))),
				 eight),
			vld1q_s8(a[i].qs));

		s = cpu_qdot16(
			s,
			vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight),
			vld1q_s8(a[i].qs + 16));
		acc = fmaf((float)vaddvq_s32(s),
			   cpu_h2f_neon(w[i].d) * cpu_h2f_neon(a[i].d), acc);
	}
	return acc;
}

/*
 * dot_q4_k_repacked: the block's integer sums, then its two FMAs: each
 * sub-block's products times its scale, the mins times the bsum pairs.
 */
float NEON_QDOT_FN(cpu_q4_K_repacked)(int64_t n, const void *vw, const void *va)
{
	const struct block_q4_K *x = vw;
	const struct block_q8_K *y = va;
	const uint8x16_t m4 = vdupq_n_u8(0x0f);
	float acc = 0.0f, accm = 0.0f;
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		int32x4_t isum = vdupq_n_s32(0);
		int sc, mn, smin = 0, j;

		for (j = 0; j < 8; j++) {
			/* sub-block j: low (j even) or high nibbles of 32 */
			const uint8_t *qs = x[i].qs + 32 * (j / 2);
			const uint8x16_t q0 = vld1q_u8(qs);
			const uint8x16_t q1 = vld1q_u8(qs + 16);
			const int8x16_t w0 = vreinterpretq_s8_u8(
				j % 2 ? vshrq_n_u8(q0, 4) : vandq_u8(q0, m4));
			const int8x16_t w1 = vreinterpretq_s8_u8(
				j % 2 ? vshrq_n_u8(q1, 4) : vandq_u8(q1, m4));
			int32x4_t p = cpu_qlanes16(w0,
						   vld1q_s8(y[i].qs + 32 * j));

			p = cpu_qdot16(p, w1, vld1q_s8(y[i].qs + 32 * j + 16));
			cpu_qscale_min_k4(x[i].scales, j, &sc, &mn);
			isum = vmlaq_n_s32(isum, p, sc);
			smin += mn *
				(y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
		}
		acc = fmaf((float)vaddvq_s32(isum),
			   cpu_h2f_neon(x[i].d) * y[i].d, acc);
		accm = fmaf((float)smin, cpu_h2f_neon(x[i].dmin) * y[i].d,
			    accm);
	}
	return acc - accm;
}

/*
 * dot_q2_k_repacked: element 128c + 32j + t is bits 2j of qs[32c + t];
 * sub-blocks of 16 elements, each times its low-nibble scale; the mins
 * (high nibbles) times the bsums.
 */
float NEON_QDOT_FN(cpu_q2_K_repacked)(int64_t n, const void *vw, const void *va)
{
	const struct block_q2_K *x = vw;
	const struct block_q8_K *y = va;
	const uint8x16_t m3 = vdupq_n_u8(3);
	float acc = 0.0f, accm = 0.0f;
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		const uint8x16_t s8 = vld1q_u8(x[i].scales);
		const uint8x16_t mins = vshrq_n_u8(s8, 4);
		int32x4_t isum = vdupq_n_s32(0), p_lo, p_hi;
		int c, j;

		cpu_qpairs8(y[i].bsums,
			    vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins))),
			    vreinterpretq_s16_u16(vmovl_high_u8(mins)), &p_lo,
			    &p_hi);
		for (c = 0; c < 2; c++) {
			const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * c);
			const uint8x16_t q1 = vld1q_u8(x[i].qs + 32 * c + 16);

			for (j = 0; j < 4; j++) {
				/* sub-blocks 8c + 2j and 8c + 2j + 1 */
				const int s = 8 * c + 2 * j;
				const int8x16_t sh = vdupq_n_s8(
					(int8_t)(-2 * j));
				const int8_t *a = y[i].qs + 128 * c + 32 * j;

				isum = vmlaq_n_s32(
					isum,
					cpu_qlanes16(
						vreinterpretq_s8_u8(vandq_u8(
							vshlq_u8(q0, sh), m3)),
						vld1q_s8(a)),
					x[i].scales[s] & 0xf);
				isum = vmlaq_n_s32(
					isum,
					cpu_qlanes16(
						vreinterpretq_s8_u8(vandq_u8(
							vshlq_u8(q1, sh), m3)),
						vld1q_s8(a + 16)),
					x[i].scales[s + 1] & 0xf);
			}
		}
		acc = fmaf((float)vaddvq_s32(isum),
			   cpu_h2f_neon(x[i].d) * y[i].d, acc);
		accm = fmaf((float)vaddvq_s32(vaddq_s32(p_lo, p_hi)),
			    cpu_h2f_neon(x[i].dmin) * y[i].d, accm);
	}
	return acc - accm;
}

#undef NEON_QDOT_FN
