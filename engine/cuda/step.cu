// SPDX-License-Identifier: MIT
/*
 * The forward pass on the device: the graph of engine/forward.c (llama,
 * qwen2, qwen3, qwen3moe) as a sequence of this module's kernels over
 * one context's buffers, so that a step never waits for the host
 * between layers and a decode step can be one CUDA graph:
 *
 *   x = token_embd[token]
 *   per layer:  x += wo . attention(rope(q), rope(k), v)  of rms_norm(x)
 *               x += ffn(rms_norm(x))  (SwiGLU, or top-k of n experts)
 *   logits = output . rms_norm(x), for the rows that want them
 *
 * Everything a step varies by (tokens, sequences, positions, which rows
 * want logits) is in one parameter block copied from pinned host memory
 * at the start of the step, and the logits go back into pinned memory
 * at its end, both inside the graph; the KV block tables change outside
 * it (only when a sequence takes a new block). So a graph captured for
 * n sequences decoding replays for any n sequences at any positions.
 *
 * Products: decode rows (and prefill, with CUDA_MATMUL_MMV) through the
 * int8 mat-vec kernel, 8 rows a weight read; prefill rows past 32
 * through cuBLAS on F16 weights (CUDA_MATMUL_AUTO / CUBLAS), or on int8
 * tensor cores (mmq.cu, CUDA_MATMUL_MMA: the 32-element and K-quants).
 */
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "blocks.cuh"
#include "internal.h"

/* products of this many rows or fewer stay on the mat-vec kernel (AUTO) */
#define STEP_MMV_ROWS 32

/*
 * STEP_MMV_ROWS, or $LLMFS_CUDA_MMV_ROWS (1 to 512): the line past
 * which a product leaves the mat-vec kernel, so that a card can measure
 * decode batches on another kernel (the int8 tensor cores where the
 * pass asks for them; cuBLAS only outside a graph). The step reads it
 * when a context is made, module.cu's products and the engine's backend
 * (backend_ops.c cb_mmv_rows, the same rule) once. Not a default until a
 * card measures it.
 */
uint32_t cuda_mmv_rows(void)
{
	const char *e = getenv("LLMFS_CUDA_MMV_ROWS");
	const long n = e ? atol(e) : 0;

	return n >= 1 && n <= 512 ? (uint32_t)n : STEP_MMV_ROWS;
}

struct step_seq {
	uint32_t len;	   /* positions stored */
	uint32_t n_blocks; /* blocks in its table row */
};

struct cuda_ctx {
	cuda_dev *d;
	cuda_model_desc m;
	std::vector<cuda_layer> layers;
	cuda_ctx_params p;
	uint32_t n_out_max; /* rows with logits a pass: max_seqs */
	uint32_t
		mmv_rows; /* products of more rows go to cuBLAS (cuda_mmv_rows) */

	/* device buffers: one allocation, carved */
	void *mem;
	uint64_t mem_bytes;
	float *x, *xn, *q, *k, *v, *att, *tmp, *gate, *up, *router, *expw;
	float *exp_out, *logits, *part;
	int32_t *sel, *lists, *lists2;
	uint8_t *xq, *xq2;
	uint64_t xq_bytes;
	uint16_t *f16w, *f16x;
	uint64_t f16w_elems;
	int32_t *params; /* tokens, seq_of, pos, out_rows: max_rows each */

	/* pinned host memory */
	int32_t *h_params;
	float *h_logits;

	/* the KV cache */
	uint8_t *kv_pool;
	cuda_kv kv;
	int32_t *d_tables;
	std::vector<int32_t> h_tables;
	std::vector<int32_t> free_blocks;
	std::vector<step_seq> seqs;

	/* what xq holds: rows of src as act (saves requantizing xn) */
	const float *xq_src;
	uint32_t xq_act, xq_rows;

	/* decode graphs by batch size; in_capture: no syncs, no cuBLAS */
	std::vector<cudaGraphExec_t> graphs;
	bool in_capture;
	cuda_ctx_stats stats;
};

/*
 * Whether a step fuses its small kernels (norm with quantization, Q/K
 * norms with RoPE and the KV store, residual adds into the products):
 * $LLMFS_CUDA_FUSE=0 runs them apart, to compare on a card (read when
 * a pass is enqueued; a graph keeps what it was captured with).
 */
static bool step_fuse(void)
{
	const char *e = getenv("LLMFS_CUDA_FUSE");

	return !e || atoi(e) != 0;
}

/* ---- programmatic launches (common.cuh) ----------------------------------- */

int cuda_pdl_state = -1;

__global__ void pdl_probe_k(int *x)
{
	cuda_pdl_start();
	if (x)
		*x = 1;
}

int cuda_pdl_probe(cudaStream_t s)
{
#ifdef LLMFS_CUDA_SIM
	(void)s;
	cuda_pdl_state = 0;
#else
	const char *e = getenv("LLMFS_CUDA_PDL");

	if (cuda_pdl_state >= 0)
		return cuda_pdl_state;
	/* off unless asked: on the H100 it gained nothing (gpu.md) */
	if (!e || !atoi(e) || cuda_device_major() < 9) {
		cuda_pdl_state = 0;
		return 0;
	}
	/* two launches in a row, the second depending on the first */
	cuda_pdl_state = 1;
	cuda_launch_pdl(pdl_probe_k, dim3(1), dim3(32), 0, s, (int *)nullptr);
	cuda_launch_pdl(pdl_probe_k, dim3(1), dim3(32), 0, s, (int *)nullptr);
	if (cudaGetLastError() != cudaSuccess ||
	    cudaStreamSynchronize(s) != cudaSuccess) {
		cudaGetLastError();
		cuda_pdl_state = 0;
	}
#endif
	return cuda_pdl_state;
}

int cuda_device_major(void)
{
	/* asked at every attention launch: a runtime call pair saved */
	static int majors[64];
	int dev = 0, major = 0;

	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0)
		return 0;
	if (dev < 64 &&
	    (major = __atomic_load_n(&majors[dev], __ATOMIC_RELAXED)))
		return major;
	if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
				   dev) != cudaSuccess)
		return 0;
	if (dev < 64)
		__atomic_store_n(&majors[dev], major, __ATOMIC_RELAXED);
	return major;
}

/* ---- buffers ------------------------------------------------------------- */

static uint64_t step_align(uint64_t n)
{
	return (n + 255) & ~(uint64_t)255;
}

/* the largest activation row the products quantize */
static uint64_t step_act_bytes(const cuda_model_desc &m, int64_t n)
{
	uint64_t most = 0;

	for (uint32_t t :
	     { (uint32_t)T_Q8_1, (uint32_t)T_Q8_K, (uint32_t)T_F32 })
		if (k_act_row_bytes(t, n) > most)
			most = k_act_row_bytes(t, n);
	return (most + 15) & ~(uint64_t)15;
}

static bool step_tensor_ok(const cuda_tensor &t, bool needed, uint32_t *type)
{
	if (!t.data)
		return !needed;
	*type = t.type;
	return k_act_type(t.type) != IO_TYPE_COUNT || t.type == T_F32;
}

/* the per-head partials of attention for up to rows rows */
static uint64_t step_part_floats(const cuda_ctx *c, uint32_t rows)
{
	att_args a = {};
	uint64_t most = 0;

	a.n_head = c->m.n_head;
	a.kv.head_dim_v = c->m.head_dim_v;
	for (uint32_t r = 1;; r = r * 2 < rows ? r * 2 : rows) {
		a.chunk = k_att_chunk(c->p.n_ctx, r);
		a.n_chunks = cuda_div_up(c->p.n_ctx, a.chunk);
		a.exact_below = k_att_exact_below();
		a.fast_exp = k_att_fast_exp();
		if (k_att_part_floats(a, r) > most)
			most = k_att_part_floats(a, r);
		if (r == rows)
			break;
	}
	return most;
}

static void step_take(uint8_t **at, void **p, uint64_t n)
{
	*p = *at;
	*at += step_align(n);
}

/* carve (base NULL: count) every buffer; returns the bytes */
static uint64_t step_carve(cuda_ctx *c, uint8_t *base)
{
	const cuda_model_desc &m = c->m;
	const uint64_t R = c->p.max_rows;
	const uint64_t ku = m.n_expert ? m.n_expert_used : 1;
	const uint64_t pairs = R * ku;
	const uint64_t nq = (uint64_t)m.n_head * m.head_dim;
	const uint64_t nk = (uint64_t)m.n_head_kv * m.head_dim;
	const uint64_t nv = (uint64_t)m.n_head_kv * m.head_dim_v;
	const uint64_t natt = (uint64_t)m.n_head * m.head_dim_v;
	const uint64_t widest = std::max<uint64_t>(
		std::max<uint64_t>(m.n_embd, m.n_ff), natt);
	const uint64_t list_ints = 3 * (uint64_t)k_moe_max_items(
					       (uint32_t)pairs,
					       m.n_expert ? m.n_expert : 1) +
				   2 * pairs + 1;
	uint8_t *at = base;

	c->xq_bytes = step_act_bytes(m, (int64_t)widest);
	step_take(&at, (void **)&c->x, R * m.n_embd * 4);
	step_take(&at, (void **)&c->xn, R * m.n_embd * 4);
	step_take(&at, (void **)&c->tmp, R * m.n_embd * 4);
	step_take(&at, (void **)&c->q, R * nq * 4);
	step_take(&at, (void **)&c->k, R * nk * 4);
	step_take(&at, (void **)&c->v, R * nv * 4);
	step_take(&at, (void **)&c->att, R * natt * 4);
	step_take(&at, (void **)&c->gate, pairs * m.n_ff * 4);
	step_take(&at, (void **)&c->up, pairs * m.n_ff * 4);
	step_take(&at, (void **)&c->router,
		  R * (m.n_expert ? m.n_expert : 1) * 4);
	step_take(&at, (void **)&c->expw, pairs * 4);
	step_take(&at, (void **)&c->sel, pairs * 4);
	step_take(&at, (void **)&c->exp_out,
		  (m.n_expert ? pairs : 1) * m.n_embd * 4);
	step_take(&at, (void **)&c->logits,
		  (uint64_t)c->n_out_max * m.n_vocab * 4);
	step_take(&at, (void **)&c->part,
		  step_part_floats(c, c->p.max_rows) * 4);
	step_take(&at, (void **)&c->lists, list_ints * 4);
	step_take(&at, (void **)&c->lists2, list_ints * 4);
	step_take(&at, (void **)&c->xq, pairs * c->xq_bytes);
	step_take(&at, (void **)&c->xq2, pairs * c->xq_bytes);
	step_take(&at, (void **)&c->params, 4 * R * 4);
	step_take(&at, (void **)&c->d_tables,
		  (uint64_t)c->p.max_seqs * c->kv.max_blocks * 4);
	/* F16 copies of a weight and its rows for cuBLAS */
	if (c->p.matmul != CUDA_MATMUL_MMV && R > c->mmv_rows) {
		step_take(&at, (void **)&c->f16w, c->f16w_elems * 2);
		step_take(&at, (void **)&c->f16x, R * widest * 2);
	}
	return (uint64_t)(at - base);
}

/* ---- products ------------------------------------------------------------ */

static void step_bias(cuda_ctx *c, float *y, uint64_t ld, const cuda_tensor &b,
		      uint32_t rows);

/*
 * Whether the int8 tensor-core kernel (mmq.cu) takes this product:
 * CUDA_MATMUL_MMA, batches past mmv_rows, the types it has (not
 * experts: they stay on the mat-vec kernel). It reads the mat-vec
 * kernel's rows (the weight's vec_dot type).
 */
static bool step_use_mmq(const cuda_ctx *c, const cuda_tensor &w,
			 uint32_t rows)
{
	return c->p.matmul == CUDA_MATMUL_MMA && rows > c->mmv_rows &&
	       w.ne[2] <= 1 && k_mmq_takes(w.type, w.ne[0]);
}


/* rows of src (ld floats) quantized for w, reusing what xq holds */
static const uint8_t *step_quantize(cuda_ctx *c, const cuda_tensor &w,
				    const float *src, uint64_t ld,
				    uint32_t rows, uint8_t *dst)
{
	const uint32_t act = k_act_type(w.type);

	if (dst == c->xq && c->xq_src == src && c->xq_act == act &&
	    c->xq_rows == rows)
		return dst;
	k_quantize(act, src, ld, dst, c->xq_bytes, w.ne[0], rows, c->d->stream);
	if (dst == c->xq) {
		c->xq_src = src;
		c->xq_act = act;
		c->xq_rows = rows;
	}
	return dst;
}

/*
 * xn = rms_norm(src) * w for the product by next: on the mat-vec kernel,
 * quantized for it in the same launch (xq then holds xn as next's
 * activations, and the product reuses them).
 */
static bool step_use_blas(const cuda_ctx *c, const cuda_tensor &w,
			  uint32_t rows);
static void step_norm(cuda_ctx *c, const float *src, const cuda_tensor &w,
		      uint32_t rows, const cuda_tensor &next)
{
	const cuda_model_desc &m = c->m;
	const uint32_t act = k_act_type(next.type);

	if (step_fuse() && !step_use_blas(c, next, rows) &&
	    next.ne[0] == m.n_embd &&
	    k_rms_norm_quantize(act, src, m.n_embd, (const float *)w.data,
				c->xn, m.n_embd, c->xq, c->xq_bytes, m.n_embd,
				rows, m.rms_norm_eps, c->d->stream)) {
		c->xq_src = c->xn;
		c->xq_act = act;
		c->xq_rows = rows;
		return;
	}
	k_rms_norm(src, m.n_embd, (const float *)w.data, c->xn, m.n_embd,
		   m.n_embd, rows, m.rms_norm_eps, c->d->stream);
	if (c->xq_src == c->xn)
		c->xq_src = nullptr;
}

/* src is about to change: what xq holds of it is stale */
static void step_dirty(cuda_ctx *c, const float *src)
{
	if (c->xq_src == src)
		c->xq_src = nullptr;
}

/*
 * Whether cuBLAS takes this product: batches past mmv_rows, outside a
 * graph, of F16 and BF16 weights (AUTO), or of any but F32 (CUBLAS, and
 * MMA where mmq.cu does not take the type: F32 weights, the router
 * among them, lose too much as halves). Quantized weights stay on the
 * int8 kernel under AUTO: it is the CPU's numbers.
 */
static bool step_use_blas(const cuda_ctx *c, const cuda_tensor &w,
			  uint32_t rows)
{
	return !c->in_capture && c->f16w && rows > c->mmv_rows &&
	       w.type != T_F32 &&
	       (uint64_t)w.ne[0] * w.ne[1] <= c->f16w_elems &&
	       (c->p.matmul == CUDA_MATMUL_CUBLAS || w.type == T_F16 ||
		w.type == T_BF16 ||
		(c->p.matmul == CUDA_MATMUL_MMA && !step_use_mmq(c, w, rows)));
}

/* whether the mat-vec kernel takes it (its fusions) */
static bool step_use_mmv(const cuda_ctx *c, const cuda_tensor &w,
			 uint32_t rows)
{
	return !step_use_blas(c, w, rows) && !step_use_mmq(c, w, rows);
}

/* y rows (y_ld) = w . x rows (x_ld), or y += it (accumulate: not cuBLAS) */
static void step_mm_to(cuda_ctx *c, const cuda_tensor &w, const float *x,
		       uint64_t x_ld, float *y, uint64_t y_ld, uint32_t rows,
		       bool accumulate, struct err *err)
{
	cudaStream_t s = c->d->stream;

	if (!rows)
		return;
	if (step_use_blas(c, w, rows)) {
		/* activations rounded as the CPU's vec_dot type for BF16 */
		const bool bf16 = w.type == T_BF16;

		k_dequant_half(w.type, w.data, w.row_bytes, w.ne[0], w.ne[1],
			       bf16, c->f16w, s);
		k_f32_to_half(x, x_ld, bf16, c->f16x, w.ne[0], rows, s);
		blas_gemm_half(c->d->blas, s, (int)w.ne[1], (int)rows,
			       (int)w.ne[0], c->f16w, (int)w.ne[0], c->f16x,
			       (int)w.ne[0], bf16, y, (int)y_ld, err);
		return;
	}
	if (step_use_mmq(c, w, rows)) {
		mmq_args q = {};

		q.w = (const uint8_t *)w.data;
		q.row_bytes = w.row_bytes;
		q.n_in = w.ne[0];
		q.n_out = w.ne[1];
		q.x = step_quantize(c, w, x, x_ld, rows, c->xq);
		q.x_ld = c->xq_bytes;
		q.y = y;
		q.y_ld = y_ld;
		q.rows = rows;
		q.accumulate = accumulate;
		k_mmq(w.type, q, s);
		return;
	}
	mmv_args a = {};

	a.w = (const uint8_t *)w.data;
	a.row_bytes = w.row_bytes;
	a.repacked = w.repacked;
	a.n_in = w.ne[0];
	a.n_out = w.ne[1];
	a.x = step_quantize(c, w, x, x_ld, rows, c->xq);
	a.x_ld = c->xq_bytes;
	a.y = y;
	a.y_ld = y_ld;
	a.n_cols = rows;
	a.accumulate = accumulate;
	k_mmv(w.type, a, s);
}

static void step_mm(cuda_ctx *c, const cuda_tensor &w, const float *x,
		    uint64_t x_ld, float *y, uint64_t y_ld, uint32_t rows,
		    struct err *err)
{
	step_mm_to(c, w, x, x_ld, y, y_ld, rows, false, err);
}

/*
 * The residual x += w . src: one launch on the mat-vec kernel (x + s is
 * the separate add's sum, bit for bit); through tmp where cuBLAS takes
 * the product or a bias comes between.
 */
static void step_mm_residual(cuda_ctx *c, const cuda_tensor &w,
			     const float *src, uint64_t src_ld,
			     const cuda_tensor &bias, uint32_t rows,
			     struct err *err)
{
	const uint64_t n = c->m.n_embd;

	if (!bias.data && step_fuse() && !step_use_blas(c, w, rows)) {
		step_mm_to(c, w, src, src_ld, c->x, n, rows, true, err);
		return;
	}
	step_mm(c, w, src, src_ld, c->tmp, n, rows, err);
	step_bias(c, c->tmp, n, bias, rows);
	k_add(c->x, n, c->tmp, n, n, rows, c->d->stream);
}

/* experts: pairs listed in lists (moe_group's layout) */
static void step_mm_experts(cuda_ctx *c, const cuda_tensor &w,
			    const uint8_t *xq, float *y, uint64_t y_ld,
			    const int32_t *lists, uint32_t pairs)
{
	const uint32_t max_items = k_moe_max_items(pairs, c->m.n_expert);
	mmv_args a = {};

	a.w = (const uint8_t *)w.data;
	a.row_bytes = w.row_bytes;
	a.repacked = w.repacked;
	a.expert_bytes = w.row_bytes * (uint64_t)w.ne[1];
	a.n_in = w.ne[0];
	a.n_out = w.ne[1];
	a.x = xq;
	a.x_ld = c->xq_bytes;
	a.y = y;
	a.y_ld = y_ld;
	a.items = lists;
	a.pair_x = lists + 3 * max_items;
	a.pair_y = a.pair_x + pairs;
	a.n_items = a.pair_y + pairs;
	a.max_items = max_items;
	k_mmv(w.type, a, c->d->stream);
}

/* ---- the graph ----------------------------------------------------------- */

static void step_bias(cuda_ctx *c, float *y, uint64_t ld, const cuda_tensor &b,
		      uint32_t rows)
{
	if (b.data)
		k_add(y, ld, (const float *)b.data, 0, b.ne[0], rows,
		      c->d->stream);
}

/* whether b can be read in one launch after a (same type and width) */
static bool step_same_rows(const cuda_tensor &a, const cuda_tensor &b)
{
	return a.type == b.type && a.ne[0] == b.ne[0] &&
	       a.row_bytes == b.row_bytes && a.repacked == b.repacked;
}

/*
 * Q, K and V of the normed rows: one launch of the mat-vec kernel over
 * the matrices that share a type (all three in a Q8_0 model; Q and K
 * where V has Q6_K, as in Q4_K_M's use_more_bits layers), the rest
 * alone; the same sums as three launches.
 */
static void step_mm_qkv(cuda_ctx *c, const cuda_layer &L, uint32_t rows,
			struct err *err)
{
	const cuda_model_desc &m = c->m;
	const cuda_tensor *w[3] = { &L.wq, &L.wk, &L.wv };
	float *y[3] = { c->q, c->k, c->v };
	const uint64_t ld[3] = { (uint64_t)m.n_head * m.head_dim,
				 (uint64_t)m.n_head_kv * m.head_dim,
				 (uint64_t)m.n_head_kv * m.head_dim_v };
	uint32_t n = 1;
	mmv_args a = {};

	if (step_fuse() && step_use_mmv(c, L.wq, rows) &&
	    step_same_rows(L.wq, L.wk))
		n = step_same_rows(L.wq, L.wv) ? 3 : 2;
	if (n == 1) {
		for (int i = 0; i < 3; i++)
			step_mm(c, *w[i], c->xn, m.n_embd, y[i], ld[i], rows,
				err);
		return;
	}
	a.w = (const uint8_t *)L.wq.data;
	a.row_bytes = L.wq.row_bytes;
	a.repacked = L.wq.repacked;
	a.n_in = L.wq.ne[0];
	a.x = step_quantize(c, L.wq, c->xn, m.n_embd, rows, c->xq);
	a.x_ld = c->xq_bytes;
	a.y = c->q;
	a.y_ld = ld[0];
	a.n_cols = rows;
	a.n_seg = n;
	for (uint32_t i = 0; i < n; i++) {
		a.seg_w[i] = (const uint8_t *)w[i]->data;
		a.seg_end[i] = (i ? a.seg_end[i - 1] : 0) + w[i]->ne[1];
		a.seg_y[i] = y[i];
		a.seg_ld[i] = ld[i];
	}
	a.n_out = a.seg_end[n - 1];
	k_mmv(L.wq.type, a, c->d->stream);
	if (n == 2)
		step_mm(c, L.wv, c->xn, m.n_embd, c->v, ld[2], rows, err);
}

/*
 * Q/K norms, RoPE and the KV store in one launch (kv_store.cu); false
 * where that kernel does not take the shapes ($LLMFS_CUDA_FUSE=0: never,
 * to compare). The same bits either way.
 */
static bool step_qk_rope_store(cuda_ctx *c, const cuda_layer &L,
			       const cuda_kv_args &kv, uint32_t rows)
{
	const cuda_model_desc &m = c->m;
	qk_rope_args a = {};

	if (!step_fuse())
		return false;
	a.kv = kv;
	a.q = c->q;
	a.k = c->k;
	a.v = c->v;
	a.q_ld = (uint64_t)m.n_head * m.head_dim;
	a.k_ld = (uint64_t)m.n_head_kv * m.head_dim;
	a.v_ld = (uint64_t)m.n_head_kv * m.head_dim_v;
	a.q_norm = m.qk_norm ? (const float *)L.q_norm.data : nullptr;
	a.k_norm = m.qk_norm ? (const float *)L.k_norm.data : nullptr;
	a.eps = m.rms_norm_eps;
	a.n_head = m.n_head;
	a.n_rot = m.n_rot;
	a.neox = m.rope_mode == CUDA_ROPE_NEOX;
	a.theta_scale = powf(m.rope_freq_base, -2.0f / (float)m.n_rot);
	a.freq_scale = m.rope_freq_scale;
	a.freq_factors = (const float *)m.rope_freqs.data;
	a.seq_of = c->params + c->p.max_rows;
	a.pos = c->params + 2 * c->p.max_rows;
	return m.n_rot && k_qk_rope_store(a, rows, c->d->stream);
}

static void step_attention(cuda_ctx *c, uint32_t il, uint32_t rows,
			   struct err *err)
{
	const cuda_model_desc &m = c->m;
	const cuda_layer &L = c->layers[il];
	cudaStream_t s = c->d->stream;
	const uint64_t nq = (uint64_t)m.n_head * m.head_dim;
	const uint64_t nk = (uint64_t)m.n_head_kv * m.head_dim;
	const uint64_t nv = (uint64_t)m.n_head_kv * m.head_dim_v;
	const uint64_t natt = (uint64_t)m.n_head * m.head_dim_v;
	const int32_t *seq_of = c->params + c->p.max_rows;
	const int32_t *pos = c->params + 2 * c->p.max_rows;
	const float *freqs = (const float *)m.rope_freqs.data;
	att_args a = {};

	step_norm(c, c->x, L.attn_norm, rows, L.wq);
	step_mm_qkv(c, L, rows, err);
	step_bias(c, c->q, nq, L.bq, rows);
	step_bias(c, c->k, nk, L.bk, rows);
	step_bias(c, c->v, nv, L.bv, rows);
	a.kv.pool = c->kv.pool;
	a.kv.block_bytes = c->kv.block_bytes;
	a.kv.layer_off = (uint64_t)il * CUDA_KV_BLOCK *
			 (c->kv.k_row + c->kv.v_row);
	a.kv.k_row = c->kv.k_row;
	a.kv.v_row = c->kv.v_row;
	a.kv.tables = c->d_tables;
	a.kv.max_blocks = c->kv.max_blocks;
	a.kv.type_k = c->kv.type_k;
	a.kv.type_v = c->kv.type_v;
	a.kv.n_head_kv = m.n_head_kv;
	a.kv.head_dim = m.head_dim;
	a.kv.head_dim_v = m.head_dim_v;
	if (!step_qk_rope_store(c, L, a.kv, rows)) {
		if (m.qk_norm) {
			k_rms_norm(c->q, m.head_dim,
				   (const float *)L.q_norm.data, c->q,
				   m.head_dim, m.head_dim, rows * m.n_head,
				   m.rms_norm_eps, s);
			k_rms_norm(c->k, m.head_dim,
				   (const float *)L.k_norm.data, c->k,
				   m.head_dim, m.head_dim, rows * m.n_head_kv,
				   m.rms_norm_eps, s);
		}
		k_rope(c->q, nq, m.n_head, m.head_dim, m.n_rot,
		       m.rope_mode == CUDA_ROPE_NEOX, pos, m.rope_freq_base,
		       m.rope_freq_scale, freqs, rows, s);
		k_rope(c->k, nk, m.n_head_kv, m.head_dim, m.n_rot,
		       m.rope_mode == CUDA_ROPE_NEOX, pos, m.rope_freq_base,
		       m.rope_freq_scale, freqs, rows, s);
		k_kv_store(a.kv, c->k, nk, c->v, nv, seq_of, pos, rows, s);
	}
	a.q = c->q;
	a.q_ld = nq;
	a.seq_of = seq_of;
	a.pos = pos;
	a.scale = m.kq_scale;
	a.group = m.n_head / m.n_head_kv;
	a.n_head = m.n_head;
	a.chunk = k_att_chunk(c->p.n_ctx, rows);
	a.n_chunks = cuda_div_up(c->p.n_ctx, a.chunk);
	a.exact_below = k_att_exact_below();
	a.fast_exp = k_att_fast_exp();
	a.part = c->part;
	a.out = c->att;
	a.out_ld = natt;
	step_dirty(c, c->att);
	/* the merge quantizes for wo (one launch fewer), where it can */
	if (step_fuse() && !step_use_blas(c, L.wo, rows) &&
	    k_att_quantizes(k_act_type(L.wo.type), m.n_head, m.head_dim_v) &&
	    L.wo.ne[0] == (int64_t)natt) {
		a.xq = c->xq;
		a.xq_ld = c->xq_bytes;
		a.act = k_act_type(L.wo.type);
	}
	k_attention(a, rows, s);
	if (a.xq) {
		c->xq_src = c->att;
		c->xq_act = a.act;
		c->xq_rows = rows;
	}
	step_mm_residual(c, L.wo, c->att, natt, L.bo, rows, err);
}

static void step_ffn_dense(cuda_ctx *c, const cuda_layer &L, uint32_t rows,
			   struct err *err)
{
	const cuda_model_desc &m = c->m;

	if (step_fuse() && L.ffn_gate.type == L.ffn_up.type &&
	    L.ffn_gate.ne[0] == L.ffn_up.ne[0] &&
	    L.ffn_gate.ne[1] == L.ffn_up.ne[1] &&
	    L.ffn_gate.row_bytes == L.ffn_up.row_bytes &&
	    L.ffn_gate.repacked == L.ffn_up.repacked &&
	    step_use_mmv(c, L.ffn_gate, rows)) {
		/* gate and up in one pass over x, SwiGLU on the way out */
		mmv_args a = {};

		a.w = (const uint8_t *)L.ffn_gate.data;
		a.w2 = (const uint8_t *)L.ffn_up.data;
		a.row_bytes = L.ffn_gate.row_bytes;
		a.repacked = L.ffn_gate.repacked;
		a.n_in = L.ffn_gate.ne[0];
		a.n_out = L.ffn_gate.ne[1];
		a.x = step_quantize(c, L.ffn_gate, c->xn, m.n_embd, rows,
				    c->xq);
		a.x_ld = c->xq_bytes;
		a.y = c->gate;
		a.y_ld = m.n_ff;
		a.n_cols = rows;
		k_mmv(L.ffn_gate.type, a, c->d->stream);
	} else {
		step_mm(c, L.ffn_up, c->xn, m.n_embd, c->up, m.n_ff, rows, err);
		step_mm(c, L.ffn_gate, c->xn, m.n_embd, c->gate, m.n_ff, rows,
			err);
		k_swiglu(c->gate, m.n_ff, c->gate, m.n_ff, c->up, m.n_ff,
			 m.n_ff, rows, c->d->stream);
	}
	step_dirty(c, c->gate);
	step_mm_residual(c, L.ffn_down, c->gate, m.n_ff, cuda_tensor{}, rows,
			 err);
}

static void step_ffn_moe(cuda_ctx *c, const cuda_layer &L, uint32_t rows,
			 struct err *err)
{
	const cuda_model_desc &m = c->m;
	const uint32_t k = m.n_expert_used, pairs = rows * k;
	const uint32_t max_items = k_moe_max_items(pairs, m.n_expert);
	cudaStream_t s = c->d->stream;
	const uint8_t *xq;

	step_mm(c, L.ffn_gate_inp, c->xn, m.n_embd, c->router, m.n_expert, rows,
		err);
	k_moe_route(c->router, m.n_expert, m.n_expert, k, m.expert_weights_norm,
		    c->sel, c->expw, rows, s);
	/* up and gate read a row per token, down one per (token, slot) */
	k_moe_group(c->sel, k, rows, k, m.n_expert, false, c->lists,
		    c->lists + 3 * max_items, c->lists + 3 * max_items + pairs,
		    c->lists + 3 * max_items + 2 * pairs, s);
	k_moe_group(c->sel, k, rows, k, m.n_expert, true, c->lists2,
		    c->lists2 + 3 * max_items,
		    c->lists2 + 3 * max_items + pairs,
		    c->lists2 + 3 * max_items + 2 * pairs, s);
	xq = step_quantize(c, L.ffn_up_exps, c->xn, m.n_embd, rows, c->xq);
	step_mm_experts(c, L.ffn_up_exps, xq, c->up, m.n_ff, c->lists, pairs);
	xq = step_quantize(c, L.ffn_gate_exps, c->xn, m.n_embd, rows, c->xq);
	step_mm_experts(c, L.ffn_gate_exps, xq, c->gate, m.n_ff, c->lists,
			pairs);
	k_swiglu(c->gate, m.n_ff, c->gate, m.n_ff, c->up, m.n_ff, m.n_ff, pairs,
		 s);
	xq = step_quantize(c, L.ffn_down_exps, c->gate, m.n_ff, pairs, c->xq2);
	step_mm_experts(c, L.ffn_down_exps, xq, c->exp_out, m.n_embd, c->lists2,
			pairs);
	k_moe_combine(c->tmp, m.n_embd, c->exp_out, m.n_embd, c->expw, k,
		      m.n_embd, rows, s);
}

/* rows out_rows[i] of x into y, i < n */
__global__ void step_gather(const float *x, uint64_t ld,
			    const int32_t *out_rows, float *y, int64_t n)
{
	cuda_pdl_start();
	const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (c < n)
		y[blockIdx.y * ld + c] = x[out_rows[blockIdx.y] * ld + c];
}

/*
 * One pass of rows rows, n_out of them with logits: the parameters in,
 * every layer, the logits out (all enqueued; a graph when capturing).
 */
static void step_enqueue(cuda_ctx *c, uint32_t rows, uint32_t n_out,
			 struct err *err)
{
	const cuda_model_desc &m = c->m;
	cudaStream_t s = c->d->stream;

	c->xq_src = nullptr;
	cudaMemcpyAsync(c->params, c->h_params,
			(size_t)4 * c->p.max_rows * sizeof(int32_t),
			cudaMemcpyHostToDevice, s);
	k_get_rows(m.tok_embd.type, m.tok_embd.data, m.tok_embd.row_bytes,
		   m.n_embd, c->params, c->x, m.n_embd, rows, s);
	for (uint32_t il = 0; il < m.n_layer; il++) {
		const cuda_layer &L = c->layers[il];

		step_attention(c, il, rows, err);
		step_norm(c, c->x, L.ffn_norm, rows,
			  m.n_expert ? L.ffn_gate_inp : L.ffn_up);
		if (m.n_expert) {
			step_ffn_moe(c, L, rows, err);
			k_add(c->x, m.n_embd, c->tmp, m.n_embd, m.n_embd, rows,
			      s);
		} else {
			step_ffn_dense(c, L, rows, err);
		}
	}
	if (!n_out)
		return;
	cuda_launch_pdl(step_gather, dim3(cuda_div_up(m.n_embd, 256), n_out),
			dim3(256), 0, s, (const float *)c->x,
			(uint64_t)m.n_embd,
			(const int32_t *)(c->params + 3 * c->p.max_rows),
			c->tmp, (int64_t)m.n_embd);
	step_norm(c, c->tmp, m.output_norm, n_out, m.output);
	step_mm(c, m.output, c->xn, m.n_embd, c->logits, m.n_vocab, n_out, err);
	cudaMemcpyAsync(c->h_logits, c->logits,
			(size_t)n_out * m.n_vocab * sizeof(float),
			cudaMemcpyDeviceToHost, s);
}

/* ---- sequences ----------------------------------------------------------- */

/* blocks for positions up to end of seq; false (nothing taken) if none */
static bool step_seq_grow(cuda_ctx *c, uint32_t seq, uint32_t end,
			  std::vector<int32_t> *taken)
{
	step_seq &sq = c->seqs[seq];
	const uint32_t need = cuda_div_up(end, CUDA_KV_BLOCK);

	while (sq.n_blocks < need) {
		if (c->free_blocks.empty())
			return false;
		const int32_t b = c->free_blocks.back();

		c->free_blocks.pop_back();
		taken->push_back(b);
		c->h_tables[(uint64_t)seq * c->kv.max_blocks + sq.n_blocks++] =
			b;
	}
	return true;
}

static void step_seq_release(cuda_ctx *c, uint32_t seq, uint32_t keep_blocks)
{
	step_seq &sq = c->seqs[seq];

	while (sq.n_blocks > keep_blocks) {
		const uint64_t i = (uint64_t)seq * c->kv.max_blocks +
				   --sq.n_blocks;

		c->free_blocks.push_back(c->h_tables[i]);
		/* an unused entry points at block 0, never outside the pool */
		c->h_tables[i] = 0;
	}
}

static int step_seq_truncate(cuda_ctx *c, uint32_t seq, uint32_t n,
			     struct err *err)
{
	if (seq >= c->p.max_seqs)
		return cuda_err(err, EINVAL, "no sequence slot %u (of %u)", seq,
				c->p.max_seqs);
	if (n < c->seqs[seq].len)
		c->seqs[seq].len = n;
	step_seq_release(c, seq, cuda_div_up(c->seqs[seq].len, CUDA_KV_BLOCK));
	return 0;
}

static uint32_t step_seq_length(const cuda_ctx *c, uint32_t seq)
{
	return seq < c->p.max_seqs ? c->seqs[seq].len : 0;
}

/* ---- a pass -------------------------------------------------------------- */

struct step_row {
	uint32_t seq, pos;
	int32_t token;
	int32_t item; /* the item whose logits this row gives, or -1 */
};

static int step_check(cuda_ctx *c, const cuda_item *items, uint32_t n,
		      std::vector<uint32_t> *end, struct err *err)
{
	if (n > c->p.max_seqs)
		return cuda_err(err, EINVAL, "%u items in a pass (at most %u)",
				n, c->p.max_seqs);
	end->assign(c->p.max_seqs, 0);
	for (uint32_t s = 0; s < c->p.max_seqs; s++)
		(*end)[s] = c->seqs[s].len;
	for (uint32_t i = 0; i < n; i++) {
		const cuda_item &it = items[i];

		if (it.seq >= c->p.max_seqs)
			return cuda_err(err, EINVAL,
					"item %u: no sequence slot %u", i,
					it.seq);
		if (it.n_tokens && !it.tokens)
			return cuda_err(err, EINVAL, "item %u: no tokens", i);
		for (uint32_t t = 0; t < it.n_tokens; t++)
			if (it.tokens[t] < 0 ||
			    (uint32_t)it.tokens[t] >= c->m.n_vocab)
				return cuda_err(
					err, EINVAL,
					"token id %d out of range (n_vocab %u)",
					it.tokens[t], c->m.n_vocab);
		if (it.n_tokens > c->p.n_ctx - (*end)[it.seq])
			return cuda_err(
				err, ENOSPC,
				"context full: %u + %u tokens > n_ctx %u",
				(*end)[it.seq], it.n_tokens, c->p.n_ctx);
		(*end)[it.seq] += it.n_tokens;
	}
	return 0;
}

/* run rows [r0, r0 + rows) of the pass; logits rows go to their items */
static int step_run(cuda_ctx *c, const step_row *r, uint32_t rows,
		    const cuda_item *items, bool graph, struct err *err)
{
	const uint32_t R = c->p.max_rows;
	uint32_t n_out = 0;
	int ret;

	for (uint32_t i = 0; i < rows; i++) {
		c->h_params[i] = r[i].token;
		c->h_params[R + i] = (int32_t)r[i].seq;
		c->h_params[2 * R + i] = (int32_t)r[i].pos;
		if (r[i].item >= 0)
			c->h_params[3 * R + n_out++] = (int32_t)i;
	}
	c->stats.passes++;
	if (graph) {
		cudaGraphExec_t &g = c->graphs[rows];

		if (!g) {
			cudaGraph_t cg = nullptr;

			if ((ret = cuda_check(
				     cudaStreamBeginCapture(
					     c->d->stream,
					     cudaStreamCaptureModeThreadLocal),
				     "graph capture", err)))
				return ret;
			c->in_capture = true;
			step_enqueue(c, rows, n_out, err);
			c->in_capture = false;
			ret = cuda_check(
				cudaStreamEndCapture(c->d->stream, &cg),
				"graph capture", err);
			if (!ret)
				ret = cuda_check(
					cudaGraphInstantiate(&g, cg, 0),
					"graph instantiate", err);
			if (cg)
				cudaGraphDestroy(cg);
			if (ret)
				return ret;
			c->stats.graphs_captured++;
		}
		if ((ret = cuda_check(cudaGraphLaunch(g, c->d->stream),
				      "graph launch", err)))
			return ret;
		c->stats.graph_launches++;
	} else {
		step_enqueue(c, rows, n_out, err);
		if (err->code)
			return -err->code;
		if ((ret = cuda_check_launch("forward pass", err)))
			return ret;
	}
	if ((ret = cuda_check(cudaStreamSynchronize(c->d->stream),
			      "forward pass", err)))
		return ret;
	for (uint32_t i = 0, o = 0; i < rows; i++)
		if (r[i].item >= 0)
			memcpy(items[r[i].item].logits,
			       c->h_logits + (uint64_t)o++ * c->m.n_vocab,
			       (size_t)c->m.n_vocab * sizeof(float));
	return 0;
}

static int step_forward(cuda_ctx *c, const cuda_item *items, uint32_t n,
			struct err *err)
{
	std::vector<uint32_t> end, len;
	std::vector<int32_t> taken;
	std::vector<step_row> rows;
	bool decode = n > 0 && !c->p.no_graphs;
	int ret;

	err->code = 0;
	if ((ret = step_check(c, items, n, &end, err)))
		return ret;
	/* every position's block, or none taken at all */
	for (uint32_t s = 0; s < c->p.max_seqs; s++) {
		if (end[s] > c->seqs[s].len &&
		    !step_seq_grow(c, s, end[s], &taken)) {
			for (uint32_t t = 0; t < c->p.max_seqs; t++)
				step_seq_release(c, t,
						 cuda_div_up(c->seqs[t].len,
							     CUDA_KV_BLOCK));
			return cuda_err(
				err, ENOSPC,
				"the GPU's KV cache is full (%llu blocks of %u positions)",
				(unsigned long long)c->p.kv_blocks,
				CUDA_KV_BLOCK);
		}
	}
	if (!taken.empty() &&
	    (ret = cuda_check(cudaMemcpyAsync(c->d_tables, c->h_tables.data(),
					      c->h_tables.size() * 4,
					      cudaMemcpyHostToDevice,
					      c->d->stream),
			      "KV tables", err)))
		return ret;
	len.assign(c->p.max_seqs, 0);
	for (uint32_t s = 0; s < c->p.max_seqs; s++)
		len[s] = c->seqs[s].len;
	for (uint32_t i = 0; i < n; i++) {
		const cuda_item &it = items[i];

		decode &= it.n_tokens == 1 && it.logits;
		for (uint32_t t = 0; t < it.n_tokens; t++)
			rows.push_back({ it.seq, len[it.seq]++, it.tokens[t],
					 t + 1 == it.n_tokens && it.logits ?
						 (int32_t)i :
						 -1 });
	}
	/* decode steps replay a graph; prefill runs in chunks of max_rows */
	decode &= rows.size() <= c->p.max_rows;
	for (size_t r0 = 0; r0 < rows.size(); r0 += c->p.max_rows) {
		uint32_t k = (uint32_t)std::min<size_t>(c->p.max_rows,
							rows.size() - r0);

		if ((ret = step_run(c, rows.data() + r0, k, items, decode,
				    err))) {
			for (uint32_t s = 0; s < c->p.max_seqs; s++)
				step_seq_release(c, s,
						 cuda_div_up(c->seqs[s].len,
							     CUDA_KV_BLOCK));
			return ret;
		}
	}
	for (uint32_t s = 0; s < c->p.max_seqs; s++)
		c->seqs[s].len = end[s];
	return 0;
}

/* ---- the context --------------------------------------------------------- */

static int step_check_model(const cuda_model_desc &m, const cuda_ctx_params &p,
			    struct err *err)
{
	uint32_t t = 0;
	bool ok = step_tensor_ok(m.tok_embd, true, &t) &&
		  step_tensor_ok(m.output, true, &t) && m.output_norm.data &&
		  m.n_head_kv && m.n_head % m.n_head_kv == 0 &&
		  m.n_head / m.n_head_kv <= 8 && m.n_rot <= m.head_dim &&
		  m.n_vocab && m.n_embd && p.max_rows && p.max_seqs &&
		  p.max_seqs <= p.max_rows && p.n_ctx &&
		  (!m.n_expert ||
		   (m.n_expert <= 256 && m.n_expert_used &&
		    m.n_expert_used <= 32 && m.n_expert_used <= m.n_expert));

	for (uint32_t il = 0; ok && il < m.n_layer; il++) {
		const cuda_layer &L = m.layers[il];

		ok = L.attn_norm.data && L.ffn_norm.data &&
		     step_tensor_ok(L.wq, true, &t) &&
		     step_tensor_ok(L.wk, true, &t) &&
		     step_tensor_ok(L.wv, true, &t) &&
		     step_tensor_ok(L.wo, true, &t) &&
		     (!m.qk_norm || (L.q_norm.data && L.k_norm.data));
		if (ok && m.n_expert)
			ok = step_tensor_ok(L.ffn_gate_inp, true, &t) &&
			     step_tensor_ok(L.ffn_up_exps, true, &t) &&
			     step_tensor_ok(L.ffn_gate_exps, true, &t) &&
			     step_tensor_ok(L.ffn_down_exps, true, &t);
		else if (ok)
			ok = step_tensor_ok(L.ffn_up, true, &t) &&
			     step_tensor_ok(L.ffn_gate, true, &t) &&
			     step_tensor_ok(L.ffn_down, true, &t);
	}
	if (!ok)
		return cuda_err(
			err, EINVAL,
			"the GPU cannot run this model (a tensor of type %u, or its shape)",
			t);
	if (!k_kv_types_ok(p.type_k, p.type_v, m.head_dim, m.head_dim_v))
		return cuda_err(
			err, EINVAL,
			"no GPU KV cache of types %u/%u with heads of %u/%u (f16, bf16, f32, q8_0)",
			p.type_k, p.type_v, m.head_dim, m.head_dim_v);
	return 0;
}

/* the largest matrix a prefill product converts to F16 */
static uint64_t step_f16_elems(const cuda_model_desc &m)
{
	uint64_t most = 0;

	for (uint32_t il = 0; il < m.n_layer; il++) {
		const cuda_layer &L = m.layers[il];

		for (const cuda_tensor *t :
		     { &L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_up, &L.ffn_gate,
		       &L.ffn_down })
			if (t->data && (uint64_t)t->ne[0] * t->ne[1] > most)
				most = (uint64_t)t->ne[0] * t->ne[1];
	}
	return most;
}

static void step_ctx_free(cuda_ctx *c)
{
	if (!c)
		return;
	cudaSetDevice(c->d->index);
	cudaStreamSynchronize(c->d->stream);
	for (cudaGraphExec_t g : c->graphs)
		if (g)
			cudaGraphExecDestroy(g);
	cudaFree(c->mem);
	cudaFree(c->kv_pool);
	cudaFreeHost(c->h_params);
	cudaFreeHost(c->h_logits);
	delete c;
}

static int step_ctx_new(cuda_dev *d, const cuda_model_desc *m,
			const cuda_ctx_params *p, cuda_ctx **out,
			struct err *err)
{
	cuda_ctx *c;
	uint64_t k_head = 0, v_head = 0;
	int ret;

	*out = nullptr;
	if ((ret = step_check_model(*m, *p, err)))
		return ret;
	c = new cuda_ctx();
	c->d = d;
	c->m = *m;
	c->layers.assign(m->layers, m->layers + m->n_layer);
	c->m.layers = c->layers.data();
	c->p = *p;
	c->n_out_max = p->max_seqs;
	c->mmv_rows = p->matmul == CUDA_MATMUL_CUBLAS ? 1 : cuda_mmv_rows();
	c->f16w_elems = step_f16_elems(*m);
	c->seqs.assign(p->max_seqs, step_seq());
	c->graphs.assign(p->max_rows + 1, nullptr);

	/* the cache: rows of every KV head, blocks of CUDA_KV_BLOCK */
	k_head = p->type_k == T_Q8_0 ? m->head_dim / 32 * 34 :
		 p->type_k == T_F32  ? 4u * m->head_dim :
				       2u * m->head_dim;
	v_head = p->type_v == T_Q8_0 ? m->head_dim_v / 32 * 34 :
		 p->type_v == T_F32  ? 4u * m->head_dim_v :
				       2u * m->head_dim_v;
	c->kv.k_row = k_head * m->n_head_kv;
	c->kv.v_row = v_head * m->n_head_kv;
	c->kv.block_bytes = (uint64_t)m->n_layer * CUDA_KV_BLOCK *
			    (c->kv.k_row + c->kv.v_row);
	c->kv.type_k = p->type_k;
	c->kv.type_v = p->type_v;
	c->kv.n_head_kv = m->n_head_kv;
	c->kv.head_dim = m->head_dim;
	c->kv.head_dim_v = m->head_dim_v;
	c->kv.max_blocks = cuda_div_up(p->n_ctx, CUDA_KV_BLOCK);
	if (!c->p.kv_blocks)
		c->p.kv_blocks = (uint64_t)p->max_seqs * c->kv.max_blocks;
	c->h_tables.assign((uint64_t)p->max_seqs * c->kv.max_blocks, 0);
	for (uint64_t b = c->p.kv_blocks; b > 0; b--)
		c->free_blocks.push_back((int32_t)(b - 1));

	cudaSetDevice(d->index);
	cuda_pdl_probe(d->stream);
	c->mem_bytes = step_carve(c, nullptr);
	if ((ret = cuda_check(cudaMalloc(&c->mem, c->mem_bytes),
			      "the GPU's forward buffers", err)) ||
	    (ret = cuda_check(cudaMalloc((void **)&c->kv_pool,
					 c->p.kv_blocks * c->kv.block_bytes),
			      "the GPU's KV cache", err)) ||
	    (ret = cuda_check(cudaHostAlloc((void **)&c->h_params,
					    (size_t)4 * p->max_rows * 4,
					    cudaHostAllocPortable),
			      "pinned parameters", err)) ||
	    (ret = cuda_check(
		     cudaHostAlloc((void **)&c->h_logits,
				   (size_t)c->n_out_max * m->n_vocab * 4,
				   cudaHostAllocPortable),
		     "pinned logits", err))) {
		cudaGetLastError();
		step_ctx_free(c);
		return ret;
	}
	step_carve(c, (uint8_t *)c->mem);
	c->kv.pool = c->kv_pool;
	c->kv.tables = c->d_tables;
	memset(c->h_params, 0, (size_t)4 * p->max_rows * 4);
	if ((ret = cuda_check(cudaMemsetAsync(c->d_tables, 0,
					      c->h_tables.size() * 4,
					      d->stream),
			      "KV tables", err))) {
		step_ctx_free(c);
		return ret;
	}
	if (c->f16w && !d->blas && !d->blas_failed &&
	    blas_open(&d->blas, d->stream, err)) {
		/* no cuBLAS: every product on the mat-vec kernel */
		d->blas_failed = true;
		c->f16w = nullptr;
		err->code = 0;
	} else if (c->f16w && !d->blas) {
		c->f16w = nullptr;
	}
	c->stats.device_bytes = c->mem_bytes +
				c->p.kv_blocks * c->kv.block_bytes;
	c->stats.kv_blocks = c->p.kv_blocks;
	*out = c;
	return 0;
}

static void step_ctx_stats(const cuda_ctx *c, cuda_ctx_stats *st)
{
	*st = c->stats;
	st->kv_blocks_free = c->free_blocks.size();
}

/* the table's entries (module.cu) */
int cuda_ctx_new(struct cuda_dev *d, const struct cuda_model_desc *m,
		 const struct cuda_ctx_params *p, struct cuda_ctx **out,
		 struct err *err)
{
	return step_ctx_new(d, m, p, out, err);
}

void cuda_ctx_free(struct cuda_ctx *c)
{
	step_ctx_free(c);
}

int cuda_ctx_forward(struct cuda_ctx *c, const struct cuda_item *items,
		     uint32_t n, struct err *err)
{
	cudaSetDevice(c->d->index);
	return step_forward(c, items, n, err);
}

int cuda_ctx_seq_truncate(struct cuda_ctx *c, uint32_t seq, uint32_t n,
			  struct err *err)
{
	return step_seq_truncate(c, seq, n, err);
}

uint32_t cuda_ctx_seq_length(const struct cuda_ctx *c, uint32_t seq)
{
	return step_seq_length(c, seq);
}

void cuda_ctx_stats_get(const struct cuda_ctx *c, struct cuda_ctx_stats *st)
{
	step_ctx_stats(c, st);
}
