// SPDX-License-Identifier: MIT
/*
 * The CUDA backend's ops on rows (backend_internal.h): norms, ropes, adds,
 * conversions to the module's activation types, and the products and
 * experts, each one call of the module per run of consecutive rows
 * (cb_runs_next); with the fusions the table offers (a norm with its
 * conversion, a product that adds, gate and up in one pass, Q, K and V
 * in one launch). backend.c holds the table, backend_kv.c the ops on the
 * KV cache.
 */
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"

/* ---- activations: quantized rows, or floats for cuBLAS --------------------- */

/*
 * Whether n rows converted to type become the kernel's rows of it
 * (quantized; F32 for the float weights: then the kernel reads them
 * without a copy of its own): any batch of a quantized type, since
 * ggml multiplies a quantized weight with its vec_dot rows and floats
 * miss llama.cpp's logits (../shared/README.md section 4); a float
 * type's batch up to mmv_rows (any, with batch_exact). Larger ones of
 * the float types, and with LLMFS_CUDA_MATMUL=cublas of every type,
 * stay floats for cuBLAS.
 */
bool cb_quantizes(const struct engine_backend *be, uint32_t type, uint32_t n)
{
	const struct cuda_backend *cb = be->ctx;

	return be->batch_exact || n <= cb->mmv_rows ||
	       (type != IO_TYPE_F32 && !cb->float_products);
}

uint32_t cb_mmv_rows(void)
{
	const char *e = getenv("LLMFS_CUDA_MMV_ROWS");
	const long n = e ? atol(e) : 0;

	return n >= 1 && n <= 512 ? (uint32_t)n : CB_QUANT_ROWS;
}

/* buf now holds the kernel's rows or floats (a few buffers remembered) */
void cb_act_set(struct cuda_backend *cb, const void *buf, bool act)
{
	unsigned i;

	for (i = 0; i < CB_ACTS && cb->acts[i].buf != buf; i++)
		;
	if (i == CB_ACTS)
		i = cb->acts_next++ % CB_ACTS;
	cb->acts[i].buf = buf;
	cb->acts[i].act = act;
}

/* whether buf (a product's activations) holds the kernel's rows */
static bool cb_act_rows(const struct cuda_backend *cb, const void *buf)
{
	unsigned i;

	for (i = 0; i < CB_ACTS; i++)
		if (cb->acts[i].buf == buf)
			return cb->acts[i].act;
	return false;
}

/* ---- row ops ------------------------------------------------------------- */

void cb_get_rows(struct engine_backend *be, float *y, size_t y_ld,
		 const struct engine_tensor *w, const int32_t *tokens,
		 uint32_t n)
{
	const size_t bytes = (size_t)n * sizeof(*tokens);
	struct err err = { 0 };
	void *host, *dev = NULL;

	cb_graph_op(be, __func__, n, y);
	if (!n || !(host = cb_lists(be, bytes, &dev)))
		return;
	memcpy(host, tokens, bytes);
	if (cb_send(be, dev, host, bytes))
		return;
	cb_check(be,
		 cb_call_get_rows(be, w->info->type, engine_tensor_data(w),
				  w->row_bytes, w->info->ne[0],
				  (const int32_t *)dev, y, y_ld, n, &err),
		 &err);
}

/*
 * The positions of the pass's rows, as int32, where the CPU keeps its
 * cos/sin table (cache row j: position j's; rope_rows reads them, and
 * in a graph's segment from its arena: cb_rope_send), and
 * the frequency factors (wherever the model keeps them) in VRAM, copied
 * when they are first seen there.
 */
void cb_rope_cache(struct engine_backend *be, float *cache, size_t cache_ld,
		   const uint32_t *pos, uint32_t n,
		   const struct engine_hparams *hp, const float *freq_factors)
{
	struct cuda_backend *cb = be->ctx;
	const uint32_t nf = hp->n_rot / 2;
	struct err err = { 0 };
	void *p = NULL, *host, *dev;
	int ret;

	if (cb->err.code)
		return;
	/* an allocation and a blocking copy: not in a graph */
	if (freq_factors &&
	    (nf > cb->rope_ff_cap || freq_factors != cb->rope_ff_src))
		cb_graph_flush(be);
	if (freq_factors && nf > cb->rope_ff_cap) {
		cb->api->free(cb->dev, cb->rope_ff);
		cb->rope_ff = NULL;
		cb->rope_ff_cap = 0;
		cb->rope_ff_src = NULL;
		if ((ret = cb->api->alloc(cb->dev, &p, nf * sizeof(float),
					  &err))) {
			cb_check(be, ret, &err);
			return;
		}
		cb->rope_ff = p;
		cb->rope_ff_cap = nf;
	}
	/* the model's factors do not change: one copy (blocking) a place */
	if (freq_factors && freq_factors != cb->rope_ff_src) {
		if ((ret = cb->api->copy_any(cb->dev, cb->rope_ff, freq_factors,
					     nf * sizeof(float), &err))) {
			cb_check(be, ret, &err);
			return;
		}
		cb->rope_ff_src = freq_factors;
	}
	cb->rope_ff_set = freq_factors != NULL;
	cb_graph_op(be, __func__, n, cache);
	if (!n || !(host = cb_lists(be, (size_t)n * sizeof(int32_t), &dev)))
		return;
	memcpy(host, pos, (size_t)n * sizeof(int32_t));
	cb_rope_send(be, cache, host, dev, n);
}

void cb_rope_rows(struct engine_backend *be, float *x, size_t ld,
		  uint32_t n_head, const struct engine_hparams *hp,
		  const float *cache, size_t cache_ld, const uint32_t *idx,
		  uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	const enum cuda_rope_mode mode = hp->rope_mode == ENGINE_ROPE_NEOX ?
						 CUDA_ROPE_NEOX :
						 CUDA_ROPE_NORM;
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };
	const int32_t *pos;

	cb_graph_op(be, __func__, n, x);
	pos = cb_rope_positions(be, cache);
	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb_call_rope(be, x + (size_t)it.r * ld, ld, n_head,
				      hp->head_dim, hp->n_rot, mode, pos + it.r,
				      hp->rope_freq_base, hp->rope_freq_scale,
				      cb->rope_ff_set ? cb->rope_ff : NULL,
				      it.len, &err),
			 &err);
}

void cb_rms_norm_rows(struct engine_backend *be, float *y, const float *x,
		      size_t ld, uint32_t width, uint32_t per_row,
		      const float *w, float eps, const uint32_t *idx,
		      uint32_t n)
{
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };
	uint32_t i;

	cb_graph_op(be, __func__, n, y);
	while (cb_runs_next(be, &it)) {
		const size_t r = it.r;

		if (per_row == 1)
			cb_check(be,
				 cb_call_rms_norm(be, x + r * ld, ld, w,
						  y + r * ld, ld, width, it.len,
						  eps, &err),
				 &err);
		else if (ld == (size_t)per_row * width)
			/* the heads of a row, as rows of their own */
			cb_check(be,
				 cb_call_rms_norm(be, x + r * ld, width, w,
						  y + r * ld, width, width,
						  it.len * per_row, eps, &err),
				 &err);
		else
			for (i = 0; i < it.len; i++)
				cb_check(be,
					 cb_call_rms_norm(
						 be, x + (r + i) * ld, width, w,
						 y + (r + i) * ld, width, width,
						 per_row, eps, &err),
					 &err);
	}
}

void cb_add_rows(struct engine_backend *be, float *y, size_t y_ld,
		 const float *x, size_t x_ld, uint32_t width,
		 const uint32_t *idx, uint32_t n)
{
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };

	cb_graph_op(be, __func__, n, y);
	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb_call_add(be, y + (size_t)it.r * y_ld, y_ld,
				     x + (size_t)it.r * x_ld, x_ld, width,
				     it.len, &err),
			 &err);
}

/*
 * Floats to the module's activation type (cb_vec_dot_type), or copied as
 * floats for a batch cuBLAS takes (cb_quantizes); the products read y
 * by what it holds (cb_act_rows).
 */
void cb_convert_rows(struct engine_backend *be, uint32_t type, const float *x,
		     size_t x_ld, uint32_t width, void *y, size_t y_ld,
		     const uint32_t *idx, uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	const bool act = !cb->plain && cb_quantizes(be, type, n);
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };

	cb_graph_op(be, __func__, n, y);
	cb_act_set(cb, y, act);
	if (!act)
		type = IO_TYPE_F32;
	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb_call_quantize(be, type, x + (size_t)it.r * x_ld,
					  x_ld,
					  (uint8_t *)y + (size_t)it.r * y_ld,
					  y_ld, width, it.len, &err),
			 &err);
}

/*
 * The norm and the conversion for the product after it: one launch a run
 * where the rows are quantized (the module's rms_norm_quantize), the two
 * ops where they stay floats.
 */
void cb_rms_norm_convert_rows(struct engine_backend *be, float *y,
			      const float *x, size_t ld, uint32_t width,
			      const float *w, float eps, uint32_t type,
			      void *act, size_t act_ld, const uint32_t *idx,
			      uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };

	cb_graph_op(be, __func__, n, act);
	if (!cb_quantizes(be, type, n)) {
		cb_rms_norm_rows(be, y, x, ld, width, 1, w, eps, idx, n);
		cb_convert_rows(be, type, y, ld, width, act, act_ld, idx, n);
		return;
	}
	cb_act_set(cb, act, true);
	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb_call_rms_norm_quantize(
				 be, type, x + (size_t)it.r * ld, ld, w,
				 y + (size_t)it.r * ld, ld,
				 (uint8_t *)act + (size_t)it.r * act_ld, act_ld,
				 width, it.len, eps, &err),
			 &err);
}

void cb_swiglu_rows(struct engine_backend *be, float *g, const float *u,
		    size_t ld, uint32_t width, const uint32_t *idx, uint32_t n)
{
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };

	cb_graph_op(be, __func__, n, g);
	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb_call_swiglu(be, g + (size_t)it.r * ld, ld,
					g + (size_t)it.r * ld, ld,
					u + (size_t)it.r * ld, ld, width,
					it.len, &err),
			 &err);
}

/* ---- products and experts ------------------------------------------------ */

static enum cuda_matmul_mode cb_mode(const struct engine_backend *be)
{
	/* batch_exact: every row the one-token path's integer sums */
	return be->batch_exact ? CUDA_MATMUL_MMV : CUDA_MATMUL_AUTO;
}

/* the module's product for mm (its rows set per run by cb_matmul_run) */
static struct cuda_matmul cb_matmul_desc(struct engine_backend *be,
					 const struct engine_matmul *mm)
{
	const struct cuda_backend *cb = be->ctx;
	const struct engine_tensor *w = mm->w;
	const uint64_t expert_bytes = w->row_bytes * (uint64_t)w->info->ne[1];
	const bool act = cb_act_rows(cb, mm->act);

	return (struct cuda_matmul){
		.w_type = w->info->type,
		.w = engine_tensor_data(w) +
		     (uint64_t)mm->expert * expert_bytes,
		.row_bytes = w->row_bytes,
		.repacked = w->llama_repacked,
		.n_in = w->info->ne[0],
		.n_out = w->info->ne[1],
		.x_ld = act ? mm->act_ld : mm->act_ld / sizeof(float),
		.y_ld = mm->y_ld,
		.mode = cb_mode(be),
		.x_act = act,
	};
}

/* c's rows: the run of it */
static void cb_matmul_run(const struct engine_matmul *mm,
			  const struct cb_runs *it, struct cuda_matmul *c)
{
	c->x = (const float *)((const uint8_t *)mm->act +
			       (size_t)it->r * mm->act_ld);
	c->y = mm->y + (size_t)it->r2 * mm->y_ld;
	c->rows = it->len;
}

/* mm, as c (cb_matmul_desc, with any fusion set), run by run */
static void cb_matmul_with(struct engine_backend *be,
			   const struct engine_matmul *mm, struct cuda_matmul c)
{
	struct cb_runs it = { .idx = mm->act_idx,
			      .idx2 = mm->y_idx,
			      .n = mm->n };
	struct err err = { 0 };

	while (cb_runs_next(be, &it)) {
		cb_matmul_run(mm, &it, &c);
		cb_check(be, cb_call_matmul(be, &c, &err), &err);
	}
}

/*
 * Products of one batch: where each is one run of rows (a pass's usual
 * case), one call of the module's matmul_group, which reads Q, K and V
 * of one type in one launch; else each alone.
 */
void cb_matmul(struct engine_backend *be, const struct engine_matmul *mm,
	       uint32_t count)
{
	struct cuda_matmul c[3];
	struct err err = { 0 };
	uint32_t i;

	cb_graph_op(be, __func__, mm[0].n, mm[0].w);
	for (i = 0; count > 1 && count <= 3 && i < count; i++) {
		struct cb_runs it = { .idx = mm[i].act_idx,
				      .idx2 = mm[i].y_idx,
				      .n = mm[i].n };

		if (!cb_runs_next(be, &it) || it.len != mm[i].n)
			break;
		c[i] = cb_matmul_desc(be, &mm[i]);
		cb_matmul_run(&mm[i], &it, &c[i]);
	}
	if (count > 1 && i == count) {
		cb_check(be, cb_call_matmul_group(be, c, count, &err), &err);
		return;
	}
	for (i = 0; i < count; i++)
		cb_matmul_with(be, &mm[i], cb_matmul_desc(be, &mm[i]));
}

/* y += the product, in the product's launch */
void cb_matmul_add(struct engine_backend *be, const struct engine_matmul *mm)
{
	struct cuda_matmul c = cb_matmul_desc(be, mm);

	cb_graph_op(be, __func__, mm->n, mm->w);
	c.accumulate = true;
	cb_matmul_with(be, mm, c);
}

/*
 * gate = silu(gate's product) * up's, the two matrices read in one pass
 * where they share a type, a shape and the activations.
 */
void cb_matmul_swiglu(struct engine_backend *be,
		      const struct engine_matmul *gate,
		      const struct engine_matmul *up)
{
	const struct engine_tensor *g = gate->w, *u = up->w;
	struct cuda_matmul c;

	cb_graph_op(be, __func__, gate->n, gate->w);
	if (g->info->type == u->info->type &&
	    g->info->ne[0] == u->info->ne[0] &&
	    g->info->ne[1] == u->info->ne[1] && g->row_bytes == u->row_bytes &&
	    gate->act == up->act && gate->act_idx == up->act_idx &&
	    gate->n == up->n && !gate->expert && !up->expert) {
		c = cb_matmul_desc(be, gate);
		c.w2 = engine_tensor_data(u);
		cb_matmul_with(be, gate, c);
		return;
	}
	cb_matmul(be, gate, 1);
	cb_matmul(be, up, 1);
	be->iface->swiglu_rows(be, gate->y, up->y, gate->y_ld,
			       (uint32_t)g->info->ne[1], gate->y_idx, gate->n);
}

void cb_matmul_id(struct engine_backend *be, const struct engine_matmul_id *m)
{
	struct cuda_backend *cb = be->ctx;
	const struct engine_tensor *w = m->w;
	struct cuda_matmul c = {
		.w_type = w->info->type,
		.w = engine_tensor_data(w),
		.row_bytes = w->row_bytes,
		.repacked = w->llama_repacked,
		.n_in = w->info->ne[0],
		.n_out = w->info->ne[1],
		.x_ld = cb_act_rows(cb, m->act) ? m->act_ld :
						  m->act_ld / sizeof(float),
		.y_ld = m->y_ld,
		.ids_ld = m->k,
		.n_slots = m->k,
		.x_per_slot = m->act_per_slot,
		.expert_bytes = w->row_bytes * (uint64_t)w->info->ne[1],
		.n_experts = (uint32_t)w->info->ne[2],
		.mode = cb_mode(be),
		.x_act = cb_act_rows(cb, m->act),
	};
	struct cb_runs it = { .idx = m->idx, .n = m->n };
	struct err err = { 0 };

	cb_graph_op(be, __func__, m->n, m->w);
	while (cb_runs_next(be, &it)) {
		c.x = (const float *)((const uint8_t *)m->act +
				      (size_t)it.r *
					      (m->act_per_slot ? m->k : 1) *
					      m->act_ld);
		c.ids = (const int32_t *)m->sel + (size_t)it.r * m->k;
		c.y = m->y + (size_t)it.r * m->k * m->y_ld;
		c.rows = it.len;
		cb_check(be, cb_call_matmul(be, &c, &err), &err);
	}
}

void cb_moe_route_rows(struct engine_backend *be,
		       const struct engine_hparams *hp, float *router,
		       size_t ld, uint32_t *sel, float *weights,
		       const uint32_t *idx, uint32_t n)
{
	const uint32_t k = hp->n_expert_used;
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };

	cb_graph_op(be, __func__, n, router);
	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb_call_moe_route(
				 be, router + (size_t)it.r * ld, ld,
				 hp->n_expert, k, hp->expert_weights_norm,
				 (int32_t *)sel + (size_t)it.r * k,
				 weights + (size_t)it.r * k, it.len, &err),
			 &err);
}

void cb_moe_combine_rows(struct engine_backend *be, float *out, size_t out_ld,
			 const float *eo, const float *weights, uint32_t k,
			 uint32_t width, const uint32_t *idx, uint32_t n)
{
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };

	cb_graph_op(be, __func__, n, out);
	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb_call_moe_combine(be, out + (size_t)it.r * out_ld,
					     out_ld,
					     eo + (size_t)it.r * k * width,
					     width, weights + (size_t)it.r * k,
					     k, width, it.len, &err),
			 &err);
}
