// SPDX-License-Identifier: MIT
/*
 * The math of one token, scalar, in the order and precision of ggml's
 * CPU kernels (ggml/src/ggml-cpu/ops.cpp, vec.h, vec.cpp). Where ggml's
 * AVX-512 code takes 16 lanes at a time and leaves the rest to a scalar
 * loop, the same split is kept here, because the two halves round
 * differently (a vector expf, a fused multiply-add).
 */
#include <math.h>
#include <string.h>

#include "ops.h"
#include "quant.h"

/* ggml's C is compiled without contraction; so is this (see quant). */
#ifdef __clang__
#pragma clang fp contract(off)
#endif

/* AVX-512 lanes of ggml's vector loops (GGML_F32_EPR, GGML_F16_STEP). */
#define OPS_LANES 16
#define OPS_F16_STEP 64

void ops_rms_norm(float *y, const float *x, const float *w, int64_t n,
		float eps)
{
	double sum = 0.0;
	float mean, scale;
	int64_t i;

	for (i = 0; i < n; i++)
		sum += (double)(x[i] * x[i]);
	mean = (float)(sum / n);
	scale = 1.0f / sqrtf(mean + eps);
	for (i = 0; i < n; i++)
		y[i] = x[i] * scale;
	if (w)
		for (i = 0; i < n; i++)
			y[i] = y[i] * w[i];
}

void ops_matvec_prepare(const struct engine_tensor *w, const float *x,
		void *act)
{
	quant_from_float(quant_vec_dot_type(w->info->type), x, act,
			w->info->ne[0]);
}

/* _mm512_reduce_add_ps of 16 lanes (GCC): halves folded down to one. */
static float ops_reduce16(const float *v)
{
	float t[16];
	int w, i;

	memcpy(t, v, sizeof(t));
	for (w = 8; w >= 1; w /= 2)
		for (i = 0; i < w; i++)
			t[i] = t[i] + t[i + w];
	return t[0];
}

/* GGML_F32_VEC_REDUCE: 4 accumulators pairwise, then the 16 lanes. */
static float ops_reduce4x16(float acc[4][OPS_LANES])
{
	int l;

	for (l = 0; l < OPS_LANES; l++) {
		acc[0][l] = acc[0][l] + acc[2][l];
		acc[1][l] = acc[1][l] + acc[3][l];
	}
	for (l = 0; l < OPS_LANES; l++)
		acc[0][l] = acc[0][l] + acc[1][l];
	return ops_reduce16(acc[0]);
}

/*
 * ggml_vec_dot_f32 (AVX-512): four 16-lane FMA accumulators over steps of
 * 64, reduced; then the float tail `sumf += x[i]*y[i]` as GCC 11 compiled
 * it in libggml-cpu-zen4.so: whole groups of 16, then one group of 8,
 * with the products rounded and added in order, and the last < 8
 * elements contracted to FMAs (vec.cpp is C++ built as gnu++17, where
 * contraction is on).
 */
static float ops_dot_f32(int64_t n, const float *x, const float *y)
{
	float acc[4][OPS_LANES] = {{0}};
	int64_t np = n & ~(int64_t)(OPS_F16_STEP - 1), i;
	float sum;
	int j, l;

	for (i = 0; i < np; i += OPS_F16_STEP)
		for (j = 0; j < 4; j++)
			for (l = 0; l < OPS_LANES; l++) {
				int64_t k = i + j * OPS_LANES + l;

				acc[j][l] = fmaf(x[k], y[k], acc[j][l]);
			}
	sum = ops_reduce4x16(acc);
	for (i = np; i < np + ((n - np) & ~(int64_t)15); i++)
		sum = sum + x[i] * y[i];
	if (n - i >= 8)
		for (j = 0; j < 8; j++, i++)
			sum = sum + x[i] * y[i];
	for (; i < n; i++)
		sum = fmaf(x[i], y[i], sum);
	return sum;
}

/* ggml_vec_dot_f16 (AVX-512 without FP16): as F32, the tail in double. */
static float ops_dot_f16(int64_t n, const uint16_t *x, const uint16_t *y)
{
	float acc[4][OPS_LANES] = {{0}};
	int64_t np = n & ~(int64_t)(OPS_F16_STEP - 1), i;
	double sum;
	int j, l;

	for (i = 0; i < np; i += OPS_F16_STEP)
		for (j = 0; j < 4; j++)
			for (l = 0; l < OPS_LANES; l++) {
				int64_t k = i + j * OPS_LANES + l;

				acc[j][l] = fmaf(quant_fp16_to_fp32(x[k]),
					quant_fp16_to_fp32(y[k]), acc[j][l]);
			}
	sum = (double)ops_reduce4x16(acc);
	for (i = np; i < n; i++)
		sum += (double)(quant_fp16_to_fp32(x[i]) *
				quant_fp16_to_fp32(y[i]));
	return (float)sum;
}

/*
 * ggml_vec_dot_bf16 with AVX512-BF16: vdpbf16ps adds the odd then the
 * even product of each pair into its lane (products of bf16 are exact in
 * float, so each step is one rounding), two accumulators over steps of
 * 64, each reduced into a double; the tail in double.
 */
static float ops_dot_bf16(int64_t n, const uint16_t *x, const uint16_t *y)
{
	float c[2][OPS_LANES] = {{0}};
	double sum = 0.0;
	int64_t i = 0;
	int h, l;

	for (; i + 64 <= n; i += 64)
		for (h = 0; h < 2; h++)
			for (l = 0; l < OPS_LANES; l++) {
				int64_t k = i + h * 32 + 2 * l;

				c[h][l] = fmaf(quant_bf16_to_fp32(x[k + 1]),
					quant_bf16_to_fp32(y[k + 1]), c[h][l]);
				c[h][l] = fmaf(quant_bf16_to_fp32(x[k]),
					quant_bf16_to_fp32(y[k]), c[h][l]);
			}
	sum += (double)ops_reduce16(c[0]);
	sum += (double)ops_reduce16(c[1]);
	for (; i < n; i++)
		sum += (double)(quant_bf16_to_fp32(x[i]) *
				quant_bf16_to_fp32(y[i]));
	return (float)sum;
}

/* One weight row . one activation row, as ggml's zen4 kernels add up. */
static float ops_dot(uint32_t type, int64_t n, const void *w, const void *a)
{
	switch (type) {
	case IO_TYPE_F32:
		return ops_dot_f32(n, w, a);
	case IO_TYPE_F16:
		return ops_dot_f16(n, w, a);
	case IO_TYPE_BF16:
		return ops_dot_bf16(n, w, a);
	default:
		return quant_vec_dot(type, n, w, a);
	}
}

void ops_matvec_rows(float *y, const struct engine_tensor *w, int64_t e,
		const void *act, int64_t r0, int64_t r1)
{
	const uint8_t *base = engine_tensor_data(w) +
		(uint64_t)e * w->info->ne[1] * w->row_bytes;
	uint32_t type = w->info->type;
	int64_t n = w->info->ne[0];
	int64_t r;

	for (r = r0; r < r1; r++)
		y[r] = ops_dot(type, n, base + r * w->row_bytes, act);
}

void ops_matvec(float *y, const struct engine_tensor *w, int64_t e,
		const float *x, void *act)
{
	ops_matvec_prepare(w, x, act);
	ops_matvec_rows(y, w, e, act, 0, w->info->ne[1]);
}

void ops_get_row(float *y, const struct engine_tensor *w, int64_t row)
{
	quant_to_float(w->info->type, engine_tensor_data(w) + row * w->row_bytes,
			y, w->info->ne[0]);
}

void ops_rope_cache(float *cache, int64_t pos, uint32_t n_rot,
		float freq_base, float freq_scale, const float *freq_factors)
{
	const float theta_scale = powf(freq_base, -2.0f / n_rot);
	float theta = (float)pos;
	uint32_t i0;

	/* ext_factor 0 (no YaRN) and attn_factor 1: mscale is 1 */
	for (i0 = 0; i0 < n_rot; i0 += 2) {
		float ff = freq_factors ? freq_factors[i0 / 2] : 1.0f;
		float t = freq_scale * (theta / ff);

		cache[i0 + 0] = cosf(t) * 1.0f;
		cache[i0 + 1] = sinf(t) * 1.0f;
		theta *= theta_scale;
	}
}

void ops_rope(float *x, uint32_t n_head, uint32_t head_dim, uint32_t n_rot,
		enum engine_rope_mode mode, const float *cache)
{
	uint32_t h, i0;

	for (h = 0; h < n_head; h++) {
		float *r = x + (size_t)h * head_dim;

		for (i0 = 0; i0 < n_rot; i0 += 2) {
			const float c = cache[i0], s = cache[i0 + 1];
			/* NORM pairs neighbours, NEOX the two halves */
			uint32_t a = mode == ENGINE_ROPE_NORM ? i0 : i0 / 2;
			uint32_t b = mode == ENGINE_ROPE_NORM ? i0 + 1 :
				i0 / 2 + n_rot / 2;
			float x0 = r[a], x1 = r[b];

			/*
			 * ops.cpp is built with contraction: GCC fuses the
			 * first product of each line, rounds the second
			 */
			r[a] = fmaf(x0, c, -(x1 * s));
			r[b] = fmaf(x0, s, x1 * c);
		}
	}
}

/*
 * ggml_v_expf (AVX-512), one lane: exp(x) = 2^n * p(b) with a degree-5
 * polynomial, the fused multiply-adds where the intrinsics fuse.
 */
static float ops_v_expf(float x)
{
	const float r = 0x1.8p23f;
	float z = fmaf(x, 0x1.715476p+0f, r);
	float n = z - r;
	float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
	float u = b * b;
	float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
			fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
			fmaf(0x1.ffffecp-1f, b, 1.0f));

	if (fabsf(n) > 192.0f)
		return n <= 0.0f ? 0.0f : INFINITY;
	/* _mm512_scalef_ps: j * 2^floor(n), n is integral here */
	return ldexpf(j, (int)n);
}

void ops_swiglu(float *y, const float *g, const float *u, int64_t n)
{
	int64_t nv = n - n % OPS_LANES;
	int64_t i = 0;

	/* ggml_v_silu on whole vectors: x / (1 + v_expf(0 - x)) */
	for (; i < nv; i++)
		y[i] = g[i] / (1.0f + ops_v_expf(0.0f - g[i])) * u[i];
	for (; i < n; i++)
		y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void ops_softmax(float *x, int64_t n)
{
	float max = -INFINITY;
	double sum = 0.0;
	float scale;
	int64_t i = 0;

	for (i = 0; i < n; i++)
		max = max > x[i] ? max : x[i];
	/* ggml_vec_soft_max_f32 */
	for (i = 0; i + OPS_LANES - 1 < n; i += OPS_LANES) {
		int l;

		for (l = 0; l < OPS_LANES; l++)
			x[i + l] = ops_v_expf(x[i + l] - max);
		sum += (double)ops_reduce16(x + i);
	}
	for (; i < n; i++) {
		float v = expf(x[i] - max);

		sum += (double)v;
		x[i] = v;
	}
	scale = (float)(1.0 / sum);
	for (i = 0; i < n; i++)
		x[i] *= scale;
}

/* y = y * v in F16: ggml_vec_scale_f16 */
static void ops_scale_f16(uint16_t *y, float v, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		y[i] = quant_fp32_to_fp16(quant_fp16_to_fp32(y[i]) * v);
}

/*
 * y += x * v in F16: ggml_vec_mad_f16, a vector FMA over whole steps of
 * 64 and a scalar tail that GCC contracts to the same FMA.
 */
static void ops_mad_f16(uint16_t *y, const uint16_t *x, float v, uint32_t n)
{
	uint32_t i = 0;

	for (; i < n; i++)
		y[i] = quant_fp32_to_fp16(fmaf(quant_fp16_to_fp32(x[i]), v,
				quant_fp16_to_fp32(y[i])));
}

void ops_attention_f16(float *out, const float *q, const uint8_t *k,
		size_t k_stride, const uint8_t *v, size_t v_stride,
		uint32_t n_kv, uint32_t head_dim, uint32_t head_dim_v,
		float scale, uint16_t *qh, uint16_t *acc)
{
	float S = 0.0f, M = -INFINITY, s_inv;
	uint32_t c, d;

	memset(acc, 0, head_dim_v * sizeof(*acc));
	quant_from_float(IO_TYPE_F16, q, qh, head_dim);
	for (c = 0; c < n_kv; c++) {
		const uint16_t *vr = (const uint16_t *)(v + c * v_stride);
		float s, ms = 1.0f, vs = 1.0f;

		s = ops_dot_f16(head_dim, (const uint16_t *)(k + c * k_stride),
				qh);
		s = s * scale;
		s += 0.0f;  /* the mask of a visible position */
		if (s > M) {
			float mold = M;

			M = s;
			ms = expf(mold - M);
			ops_scale_f16(acc, ms, head_dim_v);
		} else {
			vs = expf(s - M);
		}
		ops_mad_f16(acc, vr, vs, head_dim_v);
		S = S * ms + vs;
	}
	for (d = 0; d < head_dim_v; d++)
		out[d] = quant_fp16_to_fp32(acc[d]);
	s_inv = S == 0.0f ? 0.0f : 1.0f / S;
	for (d = 0; d < head_dim_v; d++)
		out[d] *= s_inv;
}
