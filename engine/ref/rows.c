// SPDX-License-Identifier: MIT
/*
 * The reference backend's row ops: each row in scalar C as ggml's CPU
 * kernels compute it for llama.cpp's one-token path (ggml-cpu's ops.cpp,
 * vec.h, vec.cpp), where ggml's AVX-512 code takes 16 lanes at a time and
 * leaves the rest to a scalar loop keeping that split, because the two
 * halves round differently (a vector expf, a fused multiply-add). The
 * CPU backend's SIMD kernels give these bits; tests/engine/ref0.sh and
 * test_multidevice hold the two to each other through whole models.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "../quant/quant.h"
#include "../quant/quant_internal.h"
#include "ref.h"

/* ggml's C is compiled without contraction; so is this (see quant). */
#ifdef __clang__
#pragma clang fp contract(off)
#endif

/* AVX-512 lanes of ggml's vector loops (GGML_F32_EPR) */
#define REF_LANES 16

void ref_get_rows(struct engine_backend *be, float *y, size_t y_ld,
		  const struct engine_tensor *w, const int32_t *tokens,
		  uint32_t n)
{
	uint32_t j;

	for (j = 0; j < n; j++)
		quant_to_float(w->info->type,
			       engine_tensor_data(w) +
				       (uint64_t)tokens[j] * w->row_bytes,
			       y + (size_t)j * y_ld, w->info->ne[0]);
}

/* ggml_rope_cache_init, ext_factor 0 and attn_factor 1: mscale is 1 */
void ref_rope_cache(struct engine_backend *be, float *cache, size_t cache_ld,
		    const uint32_t *pos, uint32_t n,
		    const struct engine_hparams *hp, const float *freq_factors)
{
	const float theta_scale = powf(hp->rope_freq_base, -2.0f / hp->n_rot);
	uint32_t j, i0;

	for (j = 0; j < n; j++) {
		float *c = cache + (size_t)j * cache_ld;
		float theta = (float)pos[j];

		for (i0 = 0; i0 < hp->n_rot; i0 += 2) {
			float ff = freq_factors ? freq_factors[i0 / 2] : 1.0f;
			float t = hp->rope_freq_scale * (theta / ff);

			c[i0 + 0] = cosf(t) * 1.0f;
			c[i0 + 1] = sinf(t) * 1.0f;
			theta *= theta_scale;
		}
	}
}

/*
 * ggml_compute_forward_rms_norm_f32: the squares summed in order, in
 * double; then x scaled, then by the weight.
 */
static void ref_rms_norm(float *y, const float *x, const float *w, int64_t n,
			 float eps)
{
	double sum = 0.0;
	float scale;
	int64_t i;

	for (i = 0; i < n; i++)
		sum += (double)(x[i] * x[i]);
	scale = 1.0f / sqrtf((float)(sum / n) + eps);
	for (i = 0; i < n; i++)
		y[i] = x[i] * scale;
	if (w)
		for (i = 0; i < n; i++)
			y[i] = y[i] * w[i];
}

static uint32_t ref_row(const uint32_t *idx, uint32_t j)
{
	return idx ? idx[j] : j;
}

void ref_rms_norm_rows(struct engine_backend *be, float *y, const float *x,
		       size_t ld, uint32_t width, uint32_t per_row,
		       const float *w, float eps, const uint32_t *idx,
		       uint32_t n)
{
	uint32_t j, h;

	for (j = 0; j < n; j++)
		for (h = 0; h < per_row; h++) {
			size_t at = (size_t)ref_row(idx, j) * ld +
				    (size_t)h * width;

			ref_rms_norm(y + at, x + at, w, width, eps);
		}
}

void ref_add_rows(struct engine_backend *be, float *y, size_t y_ld,
		  const float *x, size_t x_ld, uint32_t width,
		  const uint32_t *idx, uint32_t n)
{
	uint32_t j, i;

	for (j = 0; j < n; j++) {
		float *yr = y + (size_t)ref_row(idx, j) * y_ld;
		const float *xr = x + (size_t)ref_row(idx, j) * x_ld;

		for (i = 0; i < width; i++)
			yr[i] = yr[i] + xr[i];
	}
}

/* the activation quantizers round as ggml's x86 backend (quant.h) */
void ref_convert_rows(struct engine_backend *be, uint32_t type, const float *x,
		      size_t x_ld, uint32_t width, void *y, size_t y_ld,
		      const uint32_t *idx, uint32_t n)
{
	uint32_t j;

	for (j = 0; j < n; j++)
		quant_from_float(type, x + (size_t)ref_row(idx, j) * x_ld,
				 (uint8_t *)y + (size_t)ref_row(idx, j) * y_ld,
				 width);
}

/*
 * ggml rope, forward: NORM pairs neighbours, NEOX the two halves. ops.cpp
 * is built with contraction: GCC fuses the first product of each line
 * and rounds the second.
 */
static void ref_rope_head(float *r, uint32_t n_rot, bool neox,
			  const float *cache)
{
	uint32_t i0;

	for (i0 = 0; i0 < n_rot; i0 += 2) {
		const float c = cache[i0], s = cache[i0 + 1];
		uint32_t a = neox ? i0 / 2 : i0;
		uint32_t b = neox ? i0 / 2 + n_rot / 2 : i0 + 1;
		float x0 = r[a], x1 = r[b];

		r[a] = fmaf(x0, c, -(x1 * s));
		r[b] = fmaf(x0, s, x1 * c);
	}
}

void ref_rope_rows(struct engine_backend *be, float *x, size_t ld,
		   uint32_t n_head, const struct engine_hparams *hp,
		   const float *cache, size_t cache_ld, const uint32_t *idx,
		   uint32_t n)
{
	const bool neox = hp->rope_mode == ENGINE_ROPE_NEOX;
	uint32_t j, h;

	for (j = 0; j < n; j++) {
		const uint32_t r = ref_row(idx, j);

		for (h = 0; h < n_head; h++)
			ref_rope_head(
				x + (size_t)r * ld + (size_t)h * hp->head_dim,
				hp->n_rot, neox, cache + (size_t)r * cache_ld);
	}
}

/*
 * ggml_v_expf (AVX-512), one lane: exp(x) = 2^n * p(b) with a degree-5
 * polynomial, the fused multiply-adds where the intrinsics fuse.
 */
static float ref_v_expf(float x)
{
	const float r = 0x1.8p23f;
	float z = fmaf(x, 0x1.715476p+0f, r);
	float n = z - r;
	float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
	float u = b * b;
	float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
			    fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
		       u, fmaf(0x1.ffffecp-1f, b, 1.0f));

	if (fabsf(n) > 192.0f)
		return n <= 0.0f ? 0.0f : INFINITY;
	/* _mm512_scalef_ps: j * 2^floor(n), n is integral here */
	return ldexpf(j, (int)n);
}

/* ggml_vec_swiglu_f32: ggml_v_silu on whole vectors, expf on the rest */
static void ref_swiglu(float *y, const float *g, const float *u, int64_t n)
{
	int64_t nv = n - n % REF_LANES, i;

	for (i = 0; i < nv; i++)
		y[i] = g[i] / (1.0f + ref_v_expf(0.0f - g[i])) * u[i];
	for (; i < n; i++)
		y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void ref_swiglu_rows(struct engine_backend *be, float *g, const float *u,
		     size_t ld, uint32_t width, const uint32_t *idx, uint32_t n)
{
	uint32_t j;

	for (j = 0; j < n; j++) {
		float *gr = g + (size_t)ref_row(idx, j) * ld;

		ref_swiglu(gr, gr, u + (size_t)ref_row(idx, j) * ld, width);
	}
}

void ref_kv_store_rows(struct engine_backend *be, const float *k, size_t k_ld,
		       uint32_t k_width, const float *v, size_t v_ld,
		       uint32_t v_width, const struct engine_kv_slot *slots,
		       uint32_t n)
{
	uint32_t j;

	for (j = 0; j < n; j++) {
		quant_from_float(slots[j].type_k, k + (size_t)j * k_ld,
				 slots[j].k, k_width);
		quant_from_float(slots[j].type_v, v + (size_t)j * v_ld,
				 slots[j].v, v_width);
	}
}

/* ggml_compute_forward_soft_max_f32 (ggml_vec_soft_max_f32) */
void ref_softmax(float *x, int64_t n)
{
	float max = -INFINITY;
	double sum = 0.0;
	float scale;
	int64_t i;
	int l;

	for (i = 0; i < n; i++)
		max = max > x[i] ? max : x[i];
	for (i = 0; i + REF_LANES - 1 < n; i += REF_LANES) {
		for (l = 0; l < REF_LANES; l++)
			x[i + l] = ref_v_expf(x[i + l] - max);
		sum += (double)dot_hsum16(x + i);
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

/*
 * build_moe_ffn with softmax gating: the softmax, the top k (argsort,
 * descending, the lower id on ties) and their weights, optionally
 * divided by their sum.
 */
static void ref_moe_route(const struct engine_hparams *hp, float *router,
			  uint32_t *sel, float *w)
{
	uint32_t k = hp->n_expert_used, i, j, t;
	double sum = 0.0;

	ref_softmax(router, hp->n_expert);
	for (i = 0; i < k; i++) {
		uint32_t best = UINT32_MAX;

		for (j = 0; j < hp->n_expert; j++) {
			bool taken = false;

			for (t = 0; t < i; t++)
				taken |= sel[t] == j;
			if (!taken &&
			    (best == UINT32_MAX || router[j] > router[best]))
				best = j;
		}
		sel[i] = best;
		w[i] = router[best];
	}
	if (hp->expert_weights_norm) {
		float fsum;

		for (i = 0; i < k; i++)
			sum += (double)w[i];
		fsum = (float)sum;
		if (fsum < 6.103515625e-5f)
			fsum = 6.103515625e-5f;
		for (i = 0; i < k; i++)
			w[i] = w[i] / fsum;
	}
}

void ref_moe_route_rows(struct engine_backend *be,
			const struct engine_hparams *hp, float *router,
			size_t ld, uint32_t *sel, float *weights,
			const uint32_t *idx, uint32_t n)
{
	const size_t k = hp->n_expert_used;
	uint32_t j;

	for (j = 0; j < n; j++) {
		const size_t r = ref_row(idx, j);

		ref_moe_route(hp, router + r * ld, sel + r * k,
			      weights + r * k);
	}
}

void ref_moe_combine_rows(struct engine_backend *be, float *out, size_t out_ld,
			  const float *eo, const float *weights, uint32_t k,
			  uint32_t width, const uint32_t *idx, uint32_t n)
{
	uint32_t j, i, c;

	for (j = 0; j < n; j++) {
		const size_t r = ref_row(idx, j);
		float *o = out + r * out_ld;
		const float *e = eo + r * k * width, *w = weights + r * k;

		for (i = 0; i < k; i++, e += width)
			for (c = 0; c < width; c++) {
				float v = e[c] * w[i];

				o[c] = i == 0 ? v : o[c] + v;
			}
	}
}
