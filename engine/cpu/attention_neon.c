// SPDX-License-Identifier: MIT
/*
 * Attention's vector steps at both NEON levels (engine/cpu/isa.h's struct
 * cpu_isa_att), attention_avx2.c's twins in 4 lanes: the one-token F16
 * steps, the fused F16 loop of att_run, libm's expf on 2 lanes (in
 * double), and the tiled prompt attention's blocks. Each gives the
 * scalar code's bits (engine/attention.c, engine/cpu/attention_tiled.c):
 * every float is the same chain of the same operations, only the lanes
 * differ; the horizontal sum of a K.Q is the float dots' fold
 * (cpu_reduce64_neon). Nothing here is integer, so SDOT has no part in
 * it: one set of kernels serves both levels.
 *
 * The F16 conversions are FCVT/FCVTL/FCVTN in the default FPCR mode
 * (round to nearest even, no flush to zero), the operation F16C's
 * vcvtps2ph does on x86 and quant_fp32_to_fp16 emulates.
 */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "attention.h"
#include "../quant/quant.h"
#include "attention_tiled.h"
#include "cpu.h"
#include "isa.h"
#include "reduce_neon.h"

/* the register blocks' loops unrolled, so that their arrays are registers */
/* no target attribute: every aarch64 CPU has NEON */
#define ATT_TARGET
#define ATT_PRAGMA(x) _Pragma(#x)
#define ATT_UNROLL(n) ATT_PRAGMA(GCC unroll n)

/* F32 to F16 to F32: the value an F16 accumulator holds after a store */
static inline float32x4_t att_round4(float32x4_t v)
{
	return vcvt_f32_f16(vcvt_f16_f32(v));
}

static inline void att_st_f16(uint16_t *p, float32x4_t v)
{
	vst1_u16(p, cpu_f16_neon(v));
}

/* one float as an IEEE half, as the vector stores round it */
static inline uint16_t att_f2h(float f)
{
	return vget_lane_u16(cpu_f16_neon(vdupq_n_f32(f)), 0);
}

static void att_mad_f16_neon(uint16_t *y, const uint16_t *x, float v,
			     uint32_t n)
{
	uint32_t i = 0;

	for (; i + 4 <= n; i += 4)
		att_st_f16(y + i, vfmaq_n_f32(cpu_ld_f16_neon(y + i),
					      cpu_ld_f16_neon(x + i), v));
	for (; i < n; i++)
		y[i] = att_f2h(fmaf(cpu_h2f_neon(x[i]), v, cpu_h2f_neon(y[i])));
}

static void att_scale_f16_neon(uint16_t *y, float v, uint32_t n)
{
	uint32_t i = 0;

	for (; i + 4 <= n; i += 4)
		att_st_f16(y + i, vmulq_n_f32(cpu_ld_f16_neon(y + i), v));
	for (; i < n; i++)
		y[i] = att_f2h(cpu_h2f_neon(y[i]) * v);
}

static void att_f16_to_f32_neon(float *y, const uint16_t *x, uint32_t n)
{
	uint32_t i = 0;

	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, cpu_ld_f16_neon(x + i));
	for (; i < n; i++)
		y[i] = cpu_h2f_neon(x[i]);
}

static void att_mad_f32_neon(float *y, const float *x, float v, uint32_t n)
{
	uint32_t i = 0;

	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i,
			  vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), v));
	for (; i < n; i++)
		y[i] = fmaf(x[i], v, y[i]);
}

/*
 * glibc's expf (sysdeps/ieee754/flt-32/e_expf.c) as its aarch64 build
 * computes it, on two lanes: with TOINT_INTRINSICS (sysdeps/aarch64's
 * math_private.h), k is z = x N/ln2 rounded half away from zero (FRINTA,
 * FCVTAS) and r = z - k, not the shift trick of the x86 build; the
 * polynomial's steps are contracted to the same FMAs. The same table of
 * 2^(i/32).
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

static inline float32x2_t att_expf2(float32x2_t x)
{
	const float64x2_t xd = vcvt_f64_f32(x);
	const float64x2_t z = vmulq_n_f64(xd, 0x1.71547652b82fep+5);
	const float64x2_t kd = vrndaq_f64(z);
	const uint64x2_t ki = vreinterpretq_u64_s64(vcvtaq_s64_f64(z));
	const float64x2_t r = vsubq_f64(z, kd);
	const uint64x2_t idx = vandq_u64(ki, vdupq_n_u64(31));
	uint64x2_t t = vcombine_u64(
		vdup_n_u64(att_exp2_table[vgetq_lane_u64(idx, 0)]),
		vdup_n_u64(att_exp2_table[vgetq_lane_u64(idx, 1)]));
	float64x2_t zz, r2, y;

	t = vaddq_u64(t, vshlq_n_u64(ki, 47));
	zz = vfmaq_n_f64(vdupq_n_f64(0x1.ebfce50fac4f3p-13), r,
			 0x1.c6af84b912394p-20);
	r2 = vmulq_f64(r, r);
	y = vfmaq_n_f64(vdupq_n_f64(1.0), r, 0x1.62e42ff0c52d6p-6);
	y = vfmaq_f64(y, zz, r2);
	y = vmulq_f64(y, vreinterpretq_f64_u64(t));
	return vcvt_f32_f64(y);
}

static void att_expf16_neon(float *y, const float *x)
{
	float in[16];
	uint32_t slow = 0;
	int h, i;

	memcpy(in, x, sizeof(in)); /* y may be x */
	for (h = 0; h < 4; h++) {
		const float32x4_t v = vld1q_f32(in + 4 * h);
		/* top12(x) & 0x7ff > top12(88.0f) - 1: libm's special case */
		const uint32x4_t big = vcgtq_u32(
			vandq_u32(vshrq_n_u32(vreinterpretq_u32_f32(v), 20),
				  vdupq_n_u32(0x7ff)),
			vdupq_n_u32(0x42a));
		uint32_t m[4];

		vst1q_u32(m, big);
		for (i = 0; i < 4; i++)
			slow |= (m[i] & 1u) << (4 * h + i);
		vst1q_f32(y + 4 * h, vcombine_f32(att_expf2(vget_low_f32(v)),
						  att_expf2(vget_high_f32(v))));
	}
	for (i = 0; slow && i < 16; i++)
		if (slow & (1u << i))
			y[i] = expf(in[i]);
}

/* K row kr (F16) . q (dk floats, a multiple of 64): dot_f16's bits */
static inline float att_score(const uint16_t *kr, const float *q, uint32_t dk)
{
	float32x4_t a[16];
	uint32_t i;
	int j;

	ATT_UNROLL(16)
	for (j = 0; j < 16; j++)
		a[j] = vdupq_n_f32(0.0f);
	for (i = 0; i < dk; i += 64)
		ATT_UNROLL(16)
	for (j = 0; j < 16; j++)
		a[j] = vfmaq_f32(a[j], cpu_ld_f16_neon(kr + i + 4 * j),
				 vld1q_f32(q + i + 4 * j));
	return cpu_reduce64_neon(a);
}

/*
 * att_run_steps for F16 K and V, n positions in one loop (see
 * attention_avx512.c's): dot_f16's K.Q (four 16-lane accumulators, here
 * sixteen 4-lane ones, over steps of 64; dk a multiple of 64), the online
 * softmax in runs of 16 positions with one batch of expf, and
 * ggml_vec_mad_f16 on the accumulator held as the floats its F16 values
 * stand for (each step rounds through F16 as the store would).
 */
static void att_run_f16_neon(struct att_state *st, const uint8_t *k,
			     size_t k_stride, const uint8_t *v, size_t v_stride,
			     uint32_t n)
{
	const uint32_t dk = st->sh->head_dim, dv = st->sh->head_dim_v;
	const float scale = st->sh->scale;
	const bool expf_exact = att_expf_exact();
	const uint16_t *q16 = (const uint16_t *)st->q;
	float q[ATT_FAST_MAX] __attribute__((aligned(16)));
	float acc[ATT_FAST_MAX] __attribute__((aligned(16)));
	float M = st->M, S = st->S;
	uint32_t c, c0, i;

	for (i = 0; i < dk; i += 4)
		vst1q_f32(q + i, cpu_ld_f16_neon(q16 + i));
	for (i = 0; i < dv; i += 4)
		vst1q_f32(acc + i, cpu_ld_f16_neon(st->acc16 + i));
	for (c0 = 0; c0 < n; c0 += 16) {
		const uint32_t m = n - c0 < 16 ? n - c0 : 16;
		float sc[16], e[16];
		uint32_t up;

		/* the scores first: they do not depend on the softmax state */
		for (c = 0; c < m; c++) {
			float s = att_score(
				(const uint16_t *)(k + (c0 + c) * k_stride), q,
				dk);

			s = s * scale;
			s += 0.0f;
			sc[c] = s;
		}
		up = att_run_max16(sc, m, &M, e);
		if (expf_exact) {
			att_expf16_neon(e, e);
		} else {
			for (c = 0; c < m; c++)
				e[c] = expf(e[c]);
		}
		for (c = 0; c < m; c++) {
			const uint16_t *vr =
				(const uint16_t *)(v + (c0 + c) * v_stride);
			float ms = 1.0f, vs = 1.0f;

			if (up & (1u << c)) {
				ms = e[c];
				for (i = 0; i < dv; i += 4)
					vst1q_f32(acc + i,
						  att_round4(vmulq_n_f32(
							  vld1q_f32(acc + i),
							  ms)));
			} else {
				vs = e[c];
			}
			for (i = 0; i < dv; i += 4)
				vst1q_f32(
					acc + i,
					att_round4(vfmaq_n_f32(
						vld1q_f32(acc + i),
						cpu_ld_f16_neon(vr + i), vs)));
			S = S * ms + vs;
		}
	}
	for (i = 0; i < dv; i += 4)
		att_st_f16(st->acc16 + i, vld1q_f32(acc + i));
	st->M = M;
	st->S = S;
}

/* ---- the tiled prompt attention (attention_tiled.c's order) ---- */

/* n rows of dim elements of type into dst (F32, dim apart) */
static void att_tile_convert(float *dst, uint32_t type, const uint8_t *src,
			     size_t stride, uint32_t n, uint32_t dim)
{
	uint32_t r, d;

	for (r = 0; r < n; r++, src += stride, dst += dim) {
		if (type == IO_TYPE_F32) {
			memcpy(dst, src, dim * sizeof(float));
			continue;
		}
		for (d = 0; d < dim; d += 4)
			vst1q_f32(dst + d,
				  cpu_ld_f16_neon((const uint16_t *)src + d));
	}
}

/*
 * Scores of positions [0, n4) (n4 a multiple of 4) for nrv 4-lane row
 * vectors from rv0: p[c][row] = scale * sum_d kn[c][d] * qt[d][row].
 */
static inline __attribute__((always_inline)) void
att_tile_scores_core(struct att_tile *t, uint32_t n4, uint32_t rv0,
		     uint32_t nrv)
{
	const uint32_t dk = t->sh->head_dim, ld = t->ld;
	const float scale = t->sh->scale;
	uint32_t c, d, i, r;

	for (c = 0; c < n4; c += 4) {
		const float *k0 = t->kn + (size_t)c * dk;
		float32x4_t acc[4][4];

		ATT_UNROLL(4)
		for (i = 0; i < 4; i++)
			ATT_UNROLL(4)
		for (r = 0; r < nrv; r++)
			acc[i][r] = vdupq_n_f32(0.0f);
		for (d = 0; d < dk; d++) {
			const float *qd = t->qt + (size_t)d * ld + 4 * rv0;
			float32x4_t qv[4];

			ATT_UNROLL(4)
			for (r = 0; r < nrv; r++)
				qv[r] = vld1q_f32(qd + 4 * r);
			ATT_UNROLL(4)
			for (i = 0; i < 4; i++) {
				const float kb = k0[i * dk + d];

				ATT_UNROLL(4)
				for (r = 0; r < nrv; r++)
					acc[i][r] = vfmaq_n_f32(acc[i][r],
								qv[r], kb);
			}
		}
		ATT_UNROLL(4)
		for (i = 0; i < 4; i++)
			ATT_UNROLL(4)
		for (r = 0; r < nrv; r++)
			vst1q_f32(t->p + (size_t)(c + i) * ld + 4 * (rv0 + r),
				  vmulq_n_f32(acc[i][r], scale));
	}
}

/* 16 accumulators: 4 row vectors (16 rows; ld is a multiple of 16) */
static void att_tile_scores(struct att_tile *t, uint32_t n4)
{
	const uint32_t nv = t->ld / 4;
	uint32_t rv0;

	for (rv0 = 0; rv0 < nv; rv0 += 4)
		att_tile_scores_core(t, n4, rv0, 4);
}

/* lanes whose row sees position c: pos >= c */
static inline uint32x4_t att_visible(int32x4_t pos, uint32_t c)
{
	return vcgeq_s32(pos, vdupq_n_s32((int32_t)c));
}

/* a > b ? a : b, as vmaxps and the scalar code take it */
static inline float32x4_t att_max(float32x4_t a, float32x4_t b)
{
	return vbslq_f32(vcgtq_f32(a, b), a, b);
}

/* attention_tiled.c's att_tile_softmax, 4 rows at a time */
static void att_tile_softmax(struct att_tile *t, uint32_t c0, uint32_t n)
{
	const uint32_t ld = t->ld;
	const float32x4_t ninf = vdupq_n_f32(-INFINITY);
	/* below every weight kept, above libm's slow range: zeroed after */
	const float32x4_t far = vdupq_n_f32(-80.0f);
	uint32_t r, c;

	for (r = 0; r < ld; r += 4) {
		const int32x4_t pos = vld1q_s32(t->pos + r);
		float32x4_t mb = ninf, mold = vld1q_f32(t->m + r), mnew;

		for (c = 0; c < n; c++)
			mb = vbslq_f32(
				att_visible(pos, c0 + c),
				att_max(mb, vld1q_f32(t->p + c * ld + r)), mb);
		mnew = att_max(mold, mb);
		/* no position seen before: nothing to correct (O, S are 0) */
		vst1q_f32(t->p + n * ld + r,
			  vbslq_f32(vceqq_f32(mold, ninf), vdupq_n_f32(0.0f),
				    vsubq_f32(mold, mnew)));
		for (c = 0; c < n; c++) {
			float *pc = t->p + c * ld + r;

			vst1q_f32(pc, vbslq_f32(att_visible(pos, c0 + c),
						vsubq_f32(vld1q_f32(pc), mnew),
						far));
		}
		vst1q_f32(t->m + r, mnew);
	}
	att_expf_batch(t->p, t->p, (size_t)(n + 1) * ld);
	for (r = 0; r < ld; r += 4) {
		const int32x4_t pos = vld1q_s32(t->pos + r);
		float32x4_t s = vmulq_f32(vld1q_f32(t->s + r),
					  vld1q_f32(t->p + n * ld + r));

		for (c = 0; c < n; c++) {
			float *pc = t->p + c * ld + r;
			const float32x4_t e = vreinterpretq_f32_u32(vandq_u32(
				att_visible(pos, c0 + c),
				vreinterpretq_u32_f32(vld1q_f32(pc))));

			vst1q_f32(pc, e);
			s = vaddq_f32(s, e);
		}
		vst1q_f32(t->s + r, s);
	}
}

/*
 * o[row] = o[row] * factor + sum_c p[c][row] * vn[c] for nr rows from
 * row, over the first n positions, for 16 floats from d0.
 */
static inline __attribute__((always_inline)) void
att_tile_values_core(struct att_tile *t, uint32_t row, uint32_t nr, uint32_t n,
		     uint32_t n_block, uint32_t d0)
{
	const uint32_t dv = t->sh->head_dim_v, ld = t->ld;
	const float *pr = t->p + row, *fac = t->p + (size_t)n_block * ld + row;
	float32x4_t acc[2][4];
	uint32_t c, i, j;

	ATT_UNROLL(2)
	for (j = 0; j < nr; j++) {
		const float *o = t->o + (size_t)(row + j) * dv + d0;

		ATT_UNROLL(4)
		for (i = 0; i < 4; i++)
			acc[j][i] = vmulq_n_f32(vld1q_f32(o + 4 * i), fac[j]);
	}
	for (c = 0; c < n; c++) {
		const float *vr = t->vn + (size_t)c * dv + d0;

		ATT_UNROLL(4)
		for (i = 0; i < 4; i++) {
			const float32x4_t vv = vld1q_f32(vr + 4 * i);

			ATT_UNROLL(2)
			for (j = 0; j < nr; j++)
				acc[j][i] = vfmaq_n_f32(acc[j][i], vv,
							pr[(size_t)c * ld + j]);
		}
	}
	ATT_UNROLL(2)
	for (j = 0; j < nr; j++)
		ATT_UNROLL(4)
	for (i = 0; i < 4; i++)
		vst1q_f32(t->o + (size_t)(row + j) * dv + d0 + 4 * i,
			  acc[j][i]);
}

/* att_tile_values_core with nr constant; dv is a multiple of 16 */
static void att_tile_values_rows(struct att_tile *t, uint32_t row, uint32_t nr,
				 uint32_t n, uint32_t n_block)
{
	const uint32_t dv = t->sh->head_dim_v;
	uint32_t d0;

	for (d0 = 0; d0 < dv; d0 += 16) {
		if (nr == 2)
			att_tile_values_core(t, row, 2, n, n_block, d0);
		else
			att_tile_values_core(t, row, 1, n, n_block, d0);
	}
}

#define ATT_TILE_PAIRS
#include "attention_tile_steps.h"

/* Row r of qt: Q as K's dot sees it, rounded to F16 for F16 K. */
static void att_tile_q_neon(struct att_tile *t, uint32_t r, const float *q)
{
	const uint32_t dk = t->sh->head_dim;
	float *col = t->qt + r;
	uint32_t d, l;

	for (d = 0; d < dk; d += 4) {
		float32x4_t v = vld1q_f32(q + d);
		float f[4];

		if (t->sh->type_k == IO_TYPE_F16)
			v = att_round4(v);
		vst1q_f32(f, v);
		for (l = 0; l < 4; l++)
			col[(size_t)(d + l) * t->ld] = f[l];
	}
}

const struct cpu_isa_att cpu_att_neon = {
	.mad_f16 = att_mad_f16_neon,
	.scale_f16 = att_scale_f16_neon,
	.f16_to_f32 = att_f16_to_f32_neon,
	.mad_f32 = att_mad_f32_neon,
	.expf16 = att_expf16_neon,
	.run_f16 = att_run_f16_neon,
	.tile_q = att_tile_q_neon,
	.tile_block = att_tile_steps,
};
#endif /* __aarch64__ */
