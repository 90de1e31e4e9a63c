// SPDX-License-Identifier: MIT
/*
 * The math of one token, scalar, in the order and precision of ggml's
 * CPU kernels (ggml/src/ggml-cpu/ops.cpp, vec.h, vec.cpp). Where ggml's
 * AVX-512 code takes 16 lanes at a time and leaves the rest to a scalar
 * loop, the same split is kept here, because the two halves round
 * differently (a vector expf, a fused multiply-add).
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "../quant/quant.h"
#include "../quant/quant_internal.h"
#include "cpu.h"
#include "dot.h"
#include "gemm_run.h"
#include "isa.h"
#include "ops.h"

/* ggml's C is compiled without contraction; so is this (see quant). */
#ifdef __clang__
#pragma clang fp contract(off)
#endif

/* AVX-512 lanes of ggml's vector loops (GGML_F32_EPR, GGML_F16_STEP). */
#define OPS_LANES 16
/* elements of a matrix worth splitting over the pool */
#define OPS_PARALLEL_MIN (1 << 16)

/* 1 / rms(x): the squares summed in order, in double, as ggml does */
static float ops_rms_scale(const float *x, int64_t n, float eps)
{
	double sum = 0.0;
	float mean;
	int64_t i;

	for (i = 0; i < n; i++)
		sum += (double)(x[i] * x[i]);
	mean = (float)(sum / n);
	return 1.0f / sqrtf(mean + eps);
}

void ops_rms_norm_scalar(float *y, const float *x, const float *w, int64_t n,
			 float eps)
{
	const float scale = ops_rms_scale(x, n, eps);
	int64_t i;

	for (i = 0; i < n; i++)
		y[i] = x[i] * scale;
	if (w)
		for (i = 0; i < n; i++)
			y[i] = y[i] * w[i];
}

/*
 * The sum stays the scalar chain (reordering it would round differently);
 * the two products per element are lane-wise, so 16 lanes give the same.
 */
void ops_rms_norm(float *y, const float *x, const float *w, int64_t n,
		  float eps)
{
	const struct cpu_isa *isa = cpu_isa();

	if (isa->scale)
		isa->scale(y, x, ops_rms_scale(x, n, eps), w, n);
	else
		ops_rms_norm_scalar(y, x, w, n, eps);
}

/*
 * Whether w's bytes are packed panels (engine/cpu/gemm_run.h): then each
 * row read here is unpacked first. The CPU backend's own paths for a
 * packed matrix are the panel kernels; these only serve where those
 * could not run (no scratch memory), with the same bits.
 */
static bool ops_packed(const struct engine_tensor *w)
{
	return w->place && w->place->layout != 0;
}

static void ops_matvec_packed(float *y, const struct engine_tensor *w,
			      int64_t e, const void *act, int64_t r0,
			      int64_t r1)
{
	const quant_dot_fn dot = dot_row_fn(w->info->type, w->llama_repacked);
	uint8_t row[CPU_PACKED_ROW_MAX] __attribute__((aligned(64)));
	int64_t r;

	for (r = r0; r < r1; r++) {
		cpu_gemm_unpack_row(w, e, r, row);
		y[r] = dot(w->info->ne[0], row, act);
	}
}

void ops_matvec_rows(float *y, const struct engine_tensor *w, int64_t e,
		     const void *act, int64_t r0, int64_t r1)
{
	const uint8_t *base = engine_tensor_data(w) +
			      (uint64_t)e * w->info->ne[1] * w->row_bytes;
	/* the type's kernel, fetched once for all the rows */
	const quant_dot_fn dot = dot_row_fn(w->info->type, w->llama_repacked);
	int64_t n = w->info->ne[0];
	int64_t r;

	if (ops_packed(w)) {
		ops_matvec_packed(y, w, e, act, r0, r1);
		return;
	}
	for (r = r0; r < r1; r++)
		y[r] = dot(n, base + r * w->row_bytes, act);
}

struct ops_matmul_job {
	float *const *ys;
	const struct engine_tensor *w;
	int64_t e;
	uint32_t n_tok;
	const void *const *acts;
	const uint8_t *packed; /* dot_tile_pack of acts, or NULL */
};

/* weight bytes a block of rows spans while every token passes over it */
#define OPS_MATMUL_BLOCK (32 << 10)
/* the same for the tile kernels: the block stays in L2 (1 MiB a core) */
#define OPS_TILE_BLOCK (256 << 10)
/* rows ahead the first tile of a block asks memory for */
#define OPS_TILE_PREFETCH (2 * DOT_TILE_ROWS)

/*
 * Rows [r0, r1) for every token with the tile kernels: a block of rows
 * that stays in L2 at a time; for each tile of DOT_TILE_TOKENS tokens
 * (its packed activations stay in L1), the block's rows DOT_TILE_ROWS at
 * a time. Each row is read from memory once, decoded once per tile, and
 * each activation chunk is loaded once per DOT_TILE_ROWS rows.
 *
 * The first tile of a block reads the rows from memory: it prefetches
 * OPS_TILE_PREFETCH rows ahead. With few tokens (a decode batch) the
 * kernels spend long enough on each row that the out-of-order window
 * alone keeps too few misses in flight (the page-cache mapping has 4 KiB
 * pages, which the hardware prefetchers do not cross): Q6_K at 4 tokens,
 * streaming, 15 -> 35 GMAC/s.
 */
/* Ask for bytes [p, p + n) into L2. */
static void ops_prefetch(const uint8_t *p, size_t n)
{
	size_t o;

	for (o = 0; o < n; o += 64)
		__builtin_prefetch(p + o, 0, 2);
}

static void ops_matmul_tiles(const struct ops_matmul_job *j, int64_t r0,
			     int64_t r1)
{
	const struct engine_tensor *w = j->w;
	const size_t rb = w->row_bytes;
	const uint8_t *base = engine_tensor_data(w) +
			      (uint64_t)j->e * w->info->ne[1] * rb;
	int64_t step = OPS_TILE_BLOCK / (int64_t)rb, r, re, b;
	float out[DOT_TILE_ROWS * DOT_TILE_TOKENS];
	uint32_t t, k, nt;
	int nr, q;

	if (step < DOT_TILE_ROWS)
		step = DOT_TILE_ROWS;
	for (b = r0; b < r1; b = re) {
		re = b + step < r1 ? b + step : r1;
		for (t = 0; t < j->n_tok; t += nt) {
			const void *pk = dot_tile_packed_at(
				w->info->type, w->info->ne[0], j->packed, t);

			nt = j->n_tok - t < DOT_TILE_TOKENS ? j->n_tok - t :
							      DOT_TILE_TOKENS;
			for (r = b; r < re; r += nr) {
				nr = re - r < DOT_TILE_ROWS ? (int)(re - r) :
							      DOT_TILE_ROWS;
				if (t == 0 && r + OPS_TILE_PREFETCH + nr <= r1)
					ops_prefetch(
						base + (r + OPS_TILE_PREFETCH) *
								rb,
						rb * (size_t)nr);
				dot_tile(w->info->type, w->info->ne[0],
					 base + r * rb, rb, nr, j->acts + t, pk,
					 (int)nt, out, w->llama_repacked);
				for (q = 0; q < nr; q++)
					for (k = 0; k < nt; k++)
						j->ys[t + k][r + q] =
							out[DOT_TILE_TOKENS *
								    q +
							    k];
			}
		}
	}
}

/*
 * Rows [r0, r1) for every token. Where the type has a tile kernel, see
 * ops_matmul_tiles. Otherwise a block of rows at a time, each token's dots
 * in turn, the block staying in cache while the tokens take their turns
 * on it.
 */
static void ops_matmul_rows(const struct ops_matmul_job *j, int64_t r0,
			    int64_t r1)
{
	const struct engine_tensor *w = j->w;
	int64_t step = OPS_MATMUL_BLOCK / (int64_t)w->row_bytes, r, re;
	uint32_t t;

	if (j->packed) {
		ops_matmul_tiles(j, r0, r1);
		return;
	}
	if (step < 1)
		step = 1;
	for (r = r0; r < r1; r = re) {
		re = r + step < r1 ? r + step : r1;
		for (t = 0; t < j->n_tok; t++)
			ops_matvec_rows(j->ys[t], w, j->e, j->acts[t], r, re);
	}
}

static void ops_matmul_part(void *arg, uint32_t thread_index,
			    uint32_t thread_count)
{
	const struct ops_matmul_job *j = arg;
	int64_t rows = j->w->info->ne[1];

	ops_matmul_rows(j, rows * thread_index / thread_count,
			rows * (thread_index + 1) / thread_count);
}

void ops_matmul(struct cpu_threadpool *pool, float *const *ys,
		const struct engine_tensor *w, int64_t e, uint32_t n_tok,
		const void *const *acts)
{
	struct ops_matmul_job job = { ys, w, e, n_tok, acts, NULL };
	size_t bytes = dot_tile_pack_bytes(w->info->type, w->info->ne[0],
					   n_tok);
	uint8_t *packed;

	/* the tokens' quants in the tile kernels' order, once for all rows */
	if (n_tok > 1 && !ops_packed(w) &&
	    dot_tile_able(w->info->type, w->llama_repacked) &&
	    (packed = cpu_threadpool_scratch(pool, bytes))) {
		dot_tile_pack(w->info->type, w->info->ne[0], acts, n_tok,
			      packed);
		job.packed = packed;
	}
	if (cpu_threadpool_size(pool) > 1 &&
	    w->info->ne[0] * w->info->ne[1] * n_tok >= OPS_PARALLEL_MIN)
		cpu_threadpool_run(pool, ops_matmul_part, &job);
	else
		ops_matmul_rows(&job, 0, w->info->ne[1]);
}

static void ops_get_row_packed(float *y, const struct engine_tensor *w,
			       int64_t row)
{
	uint8_t bytes[CPU_PACKED_ROW_MAX] __attribute__((aligned(64)));

	cpu_gemm_unpack_row(w, 0, row, bytes);
	quant_to_float(w->info->type, bytes, y, w->info->ne[0]);
}

void ops_get_row(float *y, const struct engine_tensor *w, int64_t row)
{
	if (ops_packed(w)) {
		ops_get_row_packed(y, w, row);
		return;
	}
	quant_to_float(w->info->type,
		       engine_tensor_data(w) + row * w->row_bytes, y,
		       w->info->ne[0]);
}

void ops_rope_cache(float *cache, int64_t pos, uint32_t n_rot, float freq_base,
		    float freq_scale, const float *freq_factors)
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

void ops_rope_scalar(float *x, uint32_t n_head, uint32_t head_dim,
		     uint32_t n_rot, enum engine_rope_mode mode,
		     const float *cache)
{
	uint32_t h, i0;

	for (h = 0; h < n_head; h++) {
		float *r = x + (size_t)h * head_dim;

		for (i0 = 0; i0 < n_rot; i0 += 2) {
			const float c = cache[i0], s = cache[i0 + 1];
			/* NORM pairs neighbours, NEOX the two halves */
			uint32_t a = mode == ENGINE_ROPE_NORM ? i0 : i0 / 2;
			uint32_t b = mode == ENGINE_ROPE_NORM ?
					     i0 + 1 :
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

void ops_rope(float *x, uint32_t n_head, uint32_t head_dim, uint32_t n_rot,
	      enum engine_rope_mode mode, const float *cache)
{
	const struct cpu_isa *isa = cpu_isa();
	uint32_t h;

	if (!isa->rope) {
		ops_rope_scalar(x, n_head, head_dim, n_rot, mode, cache);
		return;
	}
	for (h = 0; h < n_head; h++)
		isa->rope(x + (size_t)h * head_dim, n_rot,
			  mode != ENGINE_ROPE_NORM, cache);
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
			    fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
		       u, fmaf(0x1.ffffecp-1f, b, 1.0f));

	if (fabsf(n) > 192.0f)
		return n <= 0.0f ? 0.0f : INFINITY;
	/* _mm512_scalef_ps: j * 2^floor(n), n is integral here */
	return ldexpf(j, (int)n);
}

static void ops_swiglu_from(float *y, const float *g, const float *u, int64_t i,
			    int64_t n)
{
	int64_t nv = n - n % OPS_LANES;

	/* ggml_v_silu on whole vectors: x / (1 + v_expf(0 - x)) */
	for (; i < nv; i++)
		y[i] = g[i] / (1.0f + ops_v_expf(0.0f - g[i])) * u[i];
	for (; i < n; i++)
		y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void ops_swiglu_scalar(float *y, const float *g, const float *u, int64_t n)
{
	ops_swiglu_from(y, g, u, 0, n);
}

/* the whole vectors in 16 lanes where the CPU has them, the same bits */
void ops_swiglu(float *y, const float *g, const float *u, int64_t n)
{
	const struct cpu_isa *isa = cpu_isa();
	int64_t nv = 0;

	if (isa->swiglu) {
		nv = n - n % OPS_LANES;
		isa->swiglu(y, g, u, nv);
	}
	ops_swiglu_from(y, g, u, nv, n);
}

static void ops_softmax_with(float *x, int64_t n,
			     void (*expf_sub)(float *x, float max, int64_t nv))
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

		if (expf_sub)
			expf_sub(x + i, max, OPS_LANES);
		else
			for (l = 0; l < OPS_LANES; l++)
				x[i + l] = ops_v_expf(x[i + l] - max);
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

void ops_softmax_scalar(float *x, int64_t n)
{
	ops_softmax_with(x, n, NULL);
}

void ops_softmax(float *x, int64_t n)
{
	ops_softmax_with(x, n, cpu_isa()->expf_sub);
}
