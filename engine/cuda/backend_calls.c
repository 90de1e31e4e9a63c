// SPDX-License-Identifier: MIT
/*
 * The module's ops as the CUDA backend calls them (backend_internal.h,
 * cb_call_*): each takes the module's arguments but the device, and
 * either runs the module's op now or, while a graph's segment records,
 * writes the call into the segment's log (backend_graph.c), which is
 * issued into a capture at the segment's end only where the log differs
 * from the one its kept graph was captured from.
 *
 * A logged call is its arguments by value: the struct of its function
 * below, zeroed first so that its padding compares equal, pointed-to
 * structs (cuda_matmul, cuda_kv, cuda_qk_rope) copied member by member.
 * Two logs that compare equal are the same calls of the module with the
 * same arguments, so the same graph: what makes a replay without a
 * capture correct. A call that answers (-ENOTSUP: nothing enqueued, the
 * caller computes otherwise) answers from a memo of the same call
 * earlier; a call never seen starts the capture at once (live), and the
 * module answers.
 */
#include <errno.h>
#include <string.h>

#include "backend_internal.h"

enum cb_fn {
	CB_FN_QUANTIZE = 1,
	CB_FN_MATMUL,
	CB_FN_MATMUL_GROUP,
	CB_FN_GET_ROWS,
	CB_FN_RMS_NORM,
	CB_FN_ROPE,
	CB_FN_SWIGLU,
	CB_FN_ADD,
	CB_FN_KV_STORE,
	CB_FN_ATTENTION,
	CB_FN_MOE_ROUTE,
	CB_FN_MOE_COMBINE,
	CB_FN_RMS_NORM_QUANTIZE,
	CB_FN_QK_ROPE_STORE,
};

struct cb_a_quantize {
	uint32_t act, rows;
	const float *x;
	size_t x_ld;
	void *y;
	size_t y_ld;
	int64_t n;
};

struct cb_a_matmul {
	uint32_t count;
	struct cuda_matmul mm[3];
};

struct cb_a_get_rows {
	uint32_t w_type, rows;
	const void *w;
	uint64_t row_bytes;
	int64_t n;
	const int32_t *ids;
	float *y;
	size_t y_ld;
};

struct cb_a_rms_norm {
	const float *x, *w;
	float *y;
	size_t x_ld, y_ld;
	int64_t n;
	uint32_t rows;
	float eps;
};

struct cb_a_rope {
	float *x;
	size_t x_ld;
	uint32_t n_head, head_dim, n_rot, mode;
	const int32_t *pos;
	float freq_base, freq_scale;
	const float *freq_factors;
	uint32_t rows;
};

struct cb_a_swiglu {
	float *y;
	const float *g, *u;
	size_t y_ld, g_ld, u_ld;
	int64_t n;
	uint32_t rows;
};

struct cb_a_add {
	float *y;
	const float *x;
	size_t y_ld, x_ld;
	int64_t n;
	uint32_t rows;
};

struct cb_a_kv_store {
	struct cuda_kv kv;
	uint32_t il, rows;
	const float *k, *v;
	size_t k_ld, v_ld;
	const int32_t *seq_of, *pos;
};

/* attention, or attention_quantize where quantize */
struct cb_a_attention {
	struct cuda_kv kv;
	uint32_t il, n_head;
	const float *q;
	size_t q_ld;
	float scale;
	uint32_t n_ctx;
	const int32_t *seq_of, *pos;
	float *out;
	size_t out_ld;
	uint32_t act, rows;
	void *xq;
	size_t xq_ld;
	bool quantize;
};

struct cb_a_moe_route {
	const float *logits;
	size_t ld;
	uint32_t n_exp, k, rows;
	bool norm;
	int32_t *sel;
	float *w;
};

struct cb_a_moe_combine {
	float *out;
	size_t out_ld;
	const float *eo;
	size_t eo_ld;
	const float *w;
	uint32_t k, rows;
	int64_t n;
};

struct cb_a_rms_norm_quantize {
	uint32_t act, rows;
	const float *x, *w;
	float *y;
	void *q;
	size_t x_ld, y_ld, q_ld;
	int64_t n;
	float eps;
};

struct cb_a_qk_rope_store {
	struct cuda_kv kv;
	struct cuda_qk_rope a;
	uint32_t il, rows;
	const int32_t *seq_of, *pos;
};

/* ---- the arguments, their padding zero ------------------------------------ */

static void cb_copy_matmul(struct cuda_matmul *d, const struct cuda_matmul *s)
{
	memset(d, 0, sizeof(*d));
	d->w_type = s->w_type;
	d->w = s->w;
	d->row_bytes = s->row_bytes;
	d->repacked = s->repacked;
	d->n_in = s->n_in;
	d->n_out = s->n_out;
	d->x = s->x;
	d->x_ld = s->x_ld;
	d->y = s->y;
	d->y_ld = s->y_ld;
	d->rows = s->rows;
	d->ids = s->ids;
	d->ids_ld = s->ids_ld;
	d->n_slots = s->n_slots;
	d->x_per_slot = s->x_per_slot;
	d->expert_bytes = s->expert_bytes;
	d->n_experts = s->n_experts;
	d->mode = s->mode;
	d->x_act = s->x_act;
	d->accumulate = s->accumulate;
	d->w2 = s->w2;
}

static void cb_copy_kv(struct cuda_kv *d, const struct cuda_kv *s)
{
	memset(d, 0, sizeof(*d));
	d->pool = s->pool;
	d->block_bytes = s->block_bytes;
	d->k_row = s->k_row;
	d->v_row = s->v_row;
	d->type_k = s->type_k;
	d->type_v = s->type_v;
	d->n_head_kv = s->n_head_kv;
	d->head_dim = s->head_dim;
	d->head_dim_v = s->head_dim_v;
	d->tables = s->tables;
	d->max_blocks = s->max_blocks;
	d->k_blocks = s->k_blocks;
	d->v_blocks = s->v_blocks;
}

static void cb_copy_qk_rope(struct cuda_qk_rope *d,
			    const struct cuda_qk_rope *s)
{
	memset(d, 0, sizeof(*d));
	d->q = s->q;
	d->k = s->k;
	d->v = s->v;
	d->q_ld = s->q_ld;
	d->k_ld = s->k_ld;
	d->v_ld = s->v_ld;
	d->q_norm = s->q_norm;
	d->k_norm = s->k_norm;
	d->eps = s->eps;
	d->n_head = s->n_head;
	d->n_rot = s->n_rot;
	d->mode = s->mode;
	d->freq_base = s->freq_base;
	d->freq_scale = s->freq_scale;
	d->freq_factors = s->freq_factors;
}

/* ---- the module's call of a logged one ------------------------------------ */

/* whether fn's calls answer -ENOTSUP (nothing enqueued) */
static bool cb_fn_answers(uint32_t fn, const void *p)
{
	const struct cb_a_attention *at = p;

	return fn == CB_FN_QK_ROPE_STORE ||
	       (fn == CB_FN_ATTENTION && at->quantize);
}

/* the module's op of call p (fn's struct): its return */
static int cb_issue(struct cuda_backend *cb, uint32_t fn, const void *p,
		    struct err *err)
{
	const struct cuda_api *m = cb->api;
	struct cuda_dev *d = cb->dev;

	switch (fn) {
	case CB_FN_QUANTIZE: {
		const struct cb_a_quantize *a = p;

		return m->quantize(d, a->act, a->x, a->x_ld, a->y, a->y_ld,
				   a->n, a->rows, err);
	}
	case CB_FN_MATMUL: {
		const struct cb_a_matmul *a = p;

		return a->count ? m->matmul_group(d, a->mm, a->count, err) :
				  m->matmul(d, a->mm, err);
	}
	case CB_FN_GET_ROWS: {
		const struct cb_a_get_rows *a = p;

		return m->get_rows(d, a->w_type, a->w, a->row_bytes, a->n,
				   a->ids, a->y, a->y_ld, a->rows, err);
	}
	case CB_FN_RMS_NORM: {
		const struct cb_a_rms_norm *a = p;

		return m->rms_norm(d, a->x, a->x_ld, a->w, a->y, a->y_ld, a->n,
				   a->rows, a->eps, err);
	}
	case CB_FN_ROPE: {
		const struct cb_a_rope *a = p;

		return m->rope(d, a->x, a->x_ld, a->n_head, a->head_dim,
			       a->n_rot, (enum cuda_rope_mode)a->mode, a->pos,
			       a->freq_base, a->freq_scale, a->freq_factors,
			       a->rows, err);
	}
	case CB_FN_SWIGLU: {
		const struct cb_a_swiglu *a = p;

		return m->swiglu(d, a->y, a->y_ld, a->g, a->g_ld, a->u, a->u_ld,
				 a->n, a->rows, err);
	}
	case CB_FN_ADD: {
		const struct cb_a_add *a = p;

		return m->add(d, a->y, a->y_ld, a->x, a->x_ld, a->n, a->rows,
			      err);
	}
	case CB_FN_KV_STORE: {
		const struct cb_a_kv_store *a = p;

		return m->kv_store(d, &a->kv, a->il, a->k, a->k_ld, a->v,
				   a->v_ld, a->seq_of, a->pos, a->rows, err);
	}
	case CB_FN_ATTENTION: {
		const struct cb_a_attention *a = p;

		if (!a->quantize)
			return m->attention(d, &a->kv, a->il, a->q, a->q_ld,
					    a->n_head, a->scale, a->seq_of,
					    a->pos, a->n_ctx, a->out, a->out_ld,
					    a->rows, err);
		return m->attention_quantize(
			d, &a->kv, a->il, a->q, a->q_ld, a->n_head, a->scale,
			a->seq_of, a->pos, a->n_ctx, a->out, a->out_ld, a->act,
			a->xq, a->xq_ld, a->rows, err);
	}
	case CB_FN_MOE_ROUTE: {
		const struct cb_a_moe_route *a = p;

		return m->moe_route(d, a->logits, a->ld, a->n_exp, a->k,
				    a->norm, a->sel, a->w, a->rows, err);
	}
	case CB_FN_MOE_COMBINE: {
		const struct cb_a_moe_combine *a = p;

		return m->moe_combine(d, a->out, a->out_ld, a->eo, a->eo_ld,
				      a->w, a->k, a->n, a->rows, err);
	}
	case CB_FN_RMS_NORM_QUANTIZE: {
		const struct cb_a_rms_norm_quantize *a = p;

		return m->rms_norm_quantize(d, a->act, a->x, a->x_ld, a->w,
					    a->y, a->y_ld, a->q, a->q_ld, a->n,
					    a->rows, a->eps, err);
	}
	case CB_FN_QK_ROPE_STORE: {
		const struct cb_a_qk_rope_store *a = p;

		return m->qk_rope_store(d, &a->kv, a->il, &a->a, a->seq_of,
					a->pos, a->rows, err);
	}
	}
	return err_set(err, EINVAL, "no module call %u", fn);
}

/*
 * Call p (fn's struct, bytes): run now, or logged. Its return as the
 * module's: 0, -ENOTSUP (nothing enqueued) where fn answers so, else
 * the failure, kept by the caller's cb_check.
 */
static int cb_call(struct engine_backend *be, uint32_t fn, const void *p,
		   size_t bytes, struct err *err)
{
	struct cuda_backend *cb = be->ctx;
	const bool answers = cb_fn_answers(fn, p);
	int ret;

	if (cb_graph_recording(be) && !cb_graph_live(be)) {
		if (!answers)
			return cb_graph_log(be, fn, p, bytes, 0, 0);
		if (cb_graph_memo(be, fn, p, bytes, &ret))
			return cb_graph_log(be, fn, p, bytes, ret, ret);
		/* a call never seen answers now: the capture starts */
		if ((ret = cb_graph_go_live(be)))
			return ret;
	}
	ret = cb_issue(cb, fn, p, err);
	if (!cb_graph_recording(be)) {
		cb_graph_plain_call(be);
		return ret;
	}
	if (answers && (!ret || ret == -ENOTSUP))
		cb_graph_memo_set(be, fn, p, bytes, ret);
	return cb_graph_log(be, fn, p, bytes, ret, ret);
}

int cb_calls_issue(struct engine_backend *be, uint32_t fn, const void *p,
		   int expect)
{
	struct cuda_backend *cb = be->ctx;
	struct err err = { 0 };
	int ret = cb_issue(cb, fn, p, &err);

	if (ret == expect)
		return 0;
	if (!ret || ret == -ENOTSUP)
		/* the memo's answer was not the module's: never run it so */
		ret = err_set(&err, EIO,
			      "graph: call %u answered %d, the log says %d", fn,
			      ret, expect);
	cb_check(be, ret, &err);
	return ret;
}

/* ---- the calls ------------------------------------------------------------ */

int cb_call_quantize(struct engine_backend *be, uint32_t act, const float *x,
		     size_t x_ld, void *y, size_t y_ld, int64_t n,
		     uint32_t rows, struct err *err)
{
	struct cb_a_quantize a;

	memset(&a, 0, sizeof(a));
	a.act = act;
	a.x = x;
	a.x_ld = x_ld;
	a.y = y;
	a.y_ld = y_ld;
	a.n = n;
	a.rows = rows;
	return cb_call(be, CB_FN_QUANTIZE, &a, sizeof(a), err);
}

int cb_call_matmul(struct engine_backend *be, const struct cuda_matmul *mm,
		   struct err *err)
{
	struct cb_a_matmul a;

	memset(&a, 0, sizeof(a));
	cb_copy_matmul(&a.mm[0], mm);
	return cb_call(be, CB_FN_MATMUL, &a, sizeof(a), err);
}

int cb_call_matmul_group(struct engine_backend *be,
			 const struct cuda_matmul *mm, uint32_t count,
			 struct err *err)
{
	struct cb_a_matmul a;
	uint32_t i;

	if (!count || count > 3)
		return err_set(err, EINVAL, "a group of %u products", count);
	memset(&a, 0, sizeof(a));
	a.count = count;
	for (i = 0; i < count; i++)
		cb_copy_matmul(&a.mm[i], &mm[i]);
	return cb_call(be, CB_FN_MATMUL, &a, sizeof(a), err);
}

int cb_call_get_rows(struct engine_backend *be, uint32_t w_type, const void *w,
		     uint64_t row_bytes, int64_t n, const int32_t *ids,
		     float *y, size_t y_ld, uint32_t rows, struct err *err)
{
	struct cb_a_get_rows a;

	memset(&a, 0, sizeof(a));
	a.w_type = w_type;
	a.w = w;
	a.row_bytes = row_bytes;
	a.n = n;
	a.ids = ids;
	a.y = y;
	a.y_ld = y_ld;
	a.rows = rows;
	return cb_call(be, CB_FN_GET_ROWS, &a, sizeof(a), err);
}

int cb_call_rms_norm(struct engine_backend *be, const float *x, size_t x_ld,
		     const float *w, float *y, size_t y_ld, int64_t n,
		     uint32_t rows, float eps, struct err *err)
{
	struct cb_a_rms_norm a;

	memset(&a, 0, sizeof(a));
	a.x = x;
	a.x_ld = x_ld;
	a.w = w;
	a.y = y;
	a.y_ld = y_ld;
	a.n = n;
	a.rows = rows;
	a.eps = eps;
	return cb_call(be, CB_FN_RMS_NORM, &a, sizeof(a), err);
}

int cb_call_rope(struct engine_backend *be, float *x, size_t x_ld,
		 uint32_t n_head, uint32_t head_dim, uint32_t n_rot,
		 enum cuda_rope_mode mode, const int32_t *pos, float freq_base,
		 float freq_scale, const float *freq_factors, uint32_t rows,
		 struct err *err)
{
	struct cb_a_rope a;

	memset(&a, 0, sizeof(a));
	a.x = x;
	a.x_ld = x_ld;
	a.n_head = n_head;
	a.head_dim = head_dim;
	a.n_rot = n_rot;
	a.mode = (uint32_t)mode;
	a.pos = pos;
	a.freq_base = freq_base;
	a.freq_scale = freq_scale;
	a.freq_factors = freq_factors;
	a.rows = rows;
	return cb_call(be, CB_FN_ROPE, &a, sizeof(a), err);
}

int cb_call_swiglu(struct engine_backend *be, float *y, size_t y_ld,
		   const float *g, size_t g_ld, const float *u, size_t u_ld,
		   int64_t n, uint32_t rows, struct err *err)
{
	struct cb_a_swiglu a;

	memset(&a, 0, sizeof(a));
	a.y = y;
	a.y_ld = y_ld;
	a.g = g;
	a.g_ld = g_ld;
	a.u = u;
	a.u_ld = u_ld;
	a.n = n;
	a.rows = rows;
	return cb_call(be, CB_FN_SWIGLU, &a, sizeof(a), err);
}

int cb_call_add(struct engine_backend *be, float *y, size_t y_ld,
		const float *x, size_t x_ld, int64_t n, uint32_t rows,
		struct err *err)
{
	struct cb_a_add a;

	memset(&a, 0, sizeof(a));
	a.y = y;
	a.y_ld = y_ld;
	a.x = x;
	a.x_ld = x_ld;
	a.n = n;
	a.rows = rows;
	return cb_call(be, CB_FN_ADD, &a, sizeof(a), err);
}

int cb_call_kv_store(struct engine_backend *be, const struct cuda_kv *kv,
		     uint32_t il, const float *k, size_t k_ld, const float *v,
		     size_t v_ld, const int32_t *seq_of, const int32_t *pos,
		     uint32_t rows, struct err *err)
{
	struct cb_a_kv_store a;

	memset(&a, 0, sizeof(a));
	cb_copy_kv(&a.kv, kv);
	a.il = il;
	a.k = k;
	a.k_ld = k_ld;
	a.v = v;
	a.v_ld = v_ld;
	a.seq_of = seq_of;
	a.pos = pos;
	a.rows = rows;
	return cb_call(be, CB_FN_KV_STORE, &a, sizeof(a), err);
}

/* the members attention and attention_quantize share; the rest zero */
static void cb_attention_args(struct cb_a_attention *a,
			      const struct cuda_kv *kv, uint32_t il,
			      const float *q, size_t q_ld, uint32_t n_head,
			      float scale, const int32_t *seq_of,
			      const int32_t *pos, uint32_t n_ctx, float *out,
			      size_t out_ld, uint32_t rows)
{
	memset(a, 0, sizeof(*a));
	cb_copy_kv(&a->kv, kv);
	a->il = il;
	a->q = q;
	a->q_ld = q_ld;
	a->n_head = n_head;
	a->scale = scale;
	a->seq_of = seq_of;
	a->pos = pos;
	a->n_ctx = n_ctx;
	a->out = out;
	a->out_ld = out_ld;
	a->rows = rows;
}

int cb_call_attention_quantize(struct engine_backend *be,
			       const struct cuda_kv *kv, uint32_t il,
			       const float *q, size_t q_ld, uint32_t n_head,
			       float scale, const int32_t *seq_of,
			       const int32_t *pos, uint32_t n_ctx, float *out,
			       size_t out_ld, uint32_t act, void *xq,
			       size_t xq_ld, uint32_t rows, struct err *err)
{
	struct cb_a_attention a;

	cb_attention_args(&a, kv, il, q, q_ld, n_head, scale, seq_of, pos,
			  n_ctx, out, out_ld, rows);
	a.act = act;
	a.xq = xq;
	a.xq_ld = xq_ld;
	a.quantize = true;
	return cb_call(be, CB_FN_ATTENTION, &a, sizeof(a), err);
}

int cb_call_attention(struct engine_backend *be, const struct cuda_kv *kv,
		      uint32_t il, const float *q, size_t q_ld, uint32_t n_head,
		      float scale, const int32_t *seq_of, const int32_t *pos,
		      uint32_t n_ctx, float *out, size_t out_ld, uint32_t rows,
		      struct err *err)
{
	struct cb_a_attention a;

	cb_attention_args(&a, kv, il, q, q_ld, n_head, scale, seq_of, pos,
			  n_ctx, out, out_ld, rows);
	return cb_call(be, CB_FN_ATTENTION, &a, sizeof(a), err);
}

int cb_call_moe_route(struct engine_backend *be, const float *logits, size_t ld,
		      uint32_t n_exp, uint32_t k, bool norm, int32_t *sel,
		      float *w, uint32_t rows, struct err *err)
{
	struct cb_a_moe_route a;

	memset(&a, 0, sizeof(a));
	a.logits = logits;
	a.ld = ld;
	a.n_exp = n_exp;
	a.k = k;
	a.norm = norm;
	a.sel = sel;
	a.w = w;
	a.rows = rows;
	return cb_call(be, CB_FN_MOE_ROUTE, &a, sizeof(a), err);
}

int cb_call_moe_combine(struct engine_backend *be, float *out, size_t out_ld,
			const float *eo, size_t eo_ld, const float *w,
			uint32_t k, int64_t n, uint32_t rows, struct err *err)
{
	struct cb_a_moe_combine a;

	memset(&a, 0, sizeof(a));
	a.out = out;
	a.out_ld = out_ld;
	a.eo = eo;
	a.eo_ld = eo_ld;
	a.w = w;
	a.k = k;
	a.n = n;
	a.rows = rows;
	return cb_call(be, CB_FN_MOE_COMBINE, &a, sizeof(a), err);
}

int cb_call_rms_norm_quantize(struct engine_backend *be, uint32_t act,
			      const float *x, size_t x_ld, const float *w,
			      float *y, size_t y_ld, void *q, size_t q_ld,
			      int64_t n, uint32_t rows, float eps,
			      struct err *err)
{
	struct cb_a_rms_norm_quantize a;

	memset(&a, 0, sizeof(a));
	a.act = act;
	a.x = x;
	a.x_ld = x_ld;
	a.w = w;
	a.y = y;
	a.y_ld = y_ld;
	a.q = q;
	a.q_ld = q_ld;
	a.n = n;
	a.rows = rows;
	a.eps = eps;
	return cb_call(be, CB_FN_RMS_NORM_QUANTIZE, &a, sizeof(a), err);
}

int cb_call_qk_rope_store(struct engine_backend *be, const struct cuda_kv *kv,
			  uint32_t il, const struct cuda_qk_rope *q,
			  const int32_t *seq_of, const int32_t *pos,
			  uint32_t rows, struct err *err)
{
	struct cb_a_qk_rope_store a;

	memset(&a, 0, sizeof(a));
	cb_copy_kv(&a.kv, kv);
	cb_copy_qk_rope(&a.a, q);
	a.il = il;
	a.seq_of = seq_of;
	a.pos = pos;
	a.rows = rows;
	return cb_call(be, CB_FN_QK_ROPE_STORE, &a, sizeof(a), err);
}
