// SPDX-License-Identifier: MIT
/*
 * The forward pass: the graph llama.cpp builds for llama, qwen2, qwen3 and
 * qwen3moe (src/models/<arch>.cpp, src/llama-graph.cpp), every op through
 * the model's backend (engine/backend.h), the K/V rows through the
 * cache's interface (kv.h).
 *
 *   x = token_embd[token]
 *   per layer:  x += wo . attention(rope(q), rope(k), v)   of rms_norm(x)
 *               x += ffn(rms_norm(x))   (SwiGLU, or top-k of n experts)
 *   logits = output . rms_norm(x)    (rms_norm(x) is the embedding)
 *
 * Batched, with the one-token path's numbers. All tokens of all items (up
 * to FORWARD_CHUNK at a time) go through the model layer by layer, so
 * that each weight matrix is read once per layer for the whole batch
 * (the backend's matmul). Yet nothing a token computes depends on the
 * others: each (weight row, token) dot product is the call the one-token
 * path makes on the same converted activation row; norms, rope, SwiGLU
 * and the MoE routing are per token; attention is per token over its own
 * sequence's cache. So every token's logits are bit for bit those of
 * evaluating it alone, which is llama.cpp's one-token path, whose logits
 * are the reference's (a multi-token ggml kernel would round differently:
 * the batched pass only changes the order in which independent results
 * are computed, never how one is).
 *
 * Async loading: each tensor is waited for (io_placement_wait) right
 * before its first use in a pass, so that a first pass runs layer by
 * layer behind the disk; a failed load ends the pass with its error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "kv.h"

/* Token rows of one pass; longer batches are split (bounded memory). */
#define FORWARD_CHUNK 128

/* One token of the pass. */
struct forward_row {
	struct engine_seq *seq;
	uint32_t pos;
	int32_t token;
	float *logits; /* NULL unless its item's last token wants them */
	float *embd;   /* its final-normed state goes here (or is added) */
	bool embd_add; /* mean pooling: summed over the item's rows */
};

/*
 * Per token row r: x + r * n_embd and so on; converted activations at
 * act + r * act_row. Allocated for cap rows, grown up to FORWARD_CHUNK.
 */
struct forward_scratch {
	uint32_t cap;
	size_t act_row; /* bytes of the widest converted row */
	struct forward_row *rows;
	uint32_t *all;	     /* 0 .. n-1 */
	uint32_t *live;	     /* rows computed past attention this layer */
	float *x;	     /* [n_embd] residual streams */
	float *xn;	     /* [n_embd] normed input of a block */
	float *q, *k, *v;    /* [n_head * head_dim], [n_head_kv * ...] */
	float *att;	     /* [n_head * head_dim_v] */
	float *tmp;	     /* [n_embd] a block's output */
	float *gate, *up;    /* [n_ff] */
	float *router;	     /* [n_expert] */
	float *rope;	     /* [n_rot] cos/sin at the row's position */
	float *exp_out;	     /* [n_expert_used][n_embd] each expert's output */
	float *exp_w;	     /* [n_expert_used] */
	uint32_t *exp_sel;   /* [n_expert_used] */
	uint32_t *exp_slot;  /* [cap] row * n_expert_used + i, per matmul row */
	uint8_t *xn_act[2];  /* xn converted to two vec_dot types */
	uint32_t xn_type[2]; /* UINT32_MAX: stale */
	int xn_last;	     /* the slot converted or used last */
	const uint32_t *xn_idx; /* the rows xn holds */
	uint32_t xn_n;
	uint8_t *act;		  /* other converted inputs (att, swiglu) */
	const void **acts;	  /* [cap] matmul inputs */
	float **ys;		  /* [cap] matmul outputs */
	struct engine_seq **seqs; /* [cap] each row's sequence, for attention */
	uint32_t *pos;		  /* [cap] each row's position */
	void *att_work;		  /* the backend's attention_work_bytes */
	void *mem;
};

/* One pass over n rows. */
struct forward_pass {
	struct engine_ctx *ctx;
	const struct engine_model *m; /* the context's */
	struct engine_backend *be;    /* the context's */
	struct forward_scratch *s;
	uint32_t n;
	uint32_t n_live;
	struct err *err;
};

void engine_forward_release(struct engine_ctx *ctx)
{
	if (ctx->fwd)
		free(ctx->fwd->mem);
	free(ctx->fwd);
	ctx->fwd = NULL;
}

static size_t forward_max(size_t a, size_t b)
{
	return a > b ? a : b;
}

/* Carve n bytes (64-aligned) at address *p (a mere count in pass 0). */
static void *forward_take(uintptr_t *p, size_t n)
{
	void *r = (void *)*p;

	*p += (n + 63) & ~(size_t)63;
	return r;
}

/* Buffers for cap rows; the old ones are kept if big enough. */
static int forward_reserve(struct engine_ctx *ctx, uint32_t cap,
			   struct err *err)
{
	const struct engine_hparams *hp = &ctx->model->hp;
	const size_t nq = (size_t)hp->n_head * hp->head_dim;
	const size_t nk = (size_t)hp->n_head_kv * hp->head_dim;
	const size_t nv = (size_t)hp->n_head_kv * hp->head_dim_v;
	const size_t natt = (size_t)hp->n_head * hp->head_dim_v;
	const size_t ku = hp->n_expert_used;
	const size_t E = hp->n_embd;
	struct engine_backend *be = ctx->backend;
	struct forward_scratch *s = ctx->fwd, *ns;
	const size_t att_work = be->iface->attention_work_bytes(be, hp, cap);
	size_t act_row, bytes, c = cap;
	uintptr_t p;
	int pass;

	if (s && s->cap >= cap)
		return 0;
	/* the widest vec_dot row: F32 is 4 bytes an element, the rest less */
	act_row = 4 * forward_max(forward_max(E, hp->n_ff), natt) + 64;
	ns = calloc(1, sizeof(*ns));
	if (!ns)
		return err_set(err, ENOMEM, "out of memory");
	/* pass 0 adds up the size, pass 1 carves the buffers */
	for (pass = 0, p = 0, bytes = 0; pass < 2; pass++) {
		uintptr_t base = p;

		ns->rows = forward_take(&p, c * sizeof(*ns->rows));
		ns->all = forward_take(&p, c * sizeof(uint32_t));
		ns->live = forward_take(&p, c * sizeof(uint32_t));
		ns->x = forward_take(&p, c * E * sizeof(float));
		ns->xn = forward_take(&p, c * E * sizeof(float));
		ns->q = forward_take(&p, c * nq * sizeof(float));
		ns->k = forward_take(&p, c * nk * sizeof(float));
		ns->v = forward_take(&p, c * nv * sizeof(float));
		ns->att = forward_take(&p, c * natt * sizeof(float));
		ns->tmp = forward_take(&p, c * E * sizeof(float));
		ns->gate = forward_take(&p, c * hp->n_ff * sizeof(float));
		ns->up = forward_take(&p, c * hp->n_ff * sizeof(float));
		ns->router = forward_take(&p, c * hp->n_expert * sizeof(float));
		ns->rope = forward_take(&p, c * hp->n_rot * sizeof(float));
		ns->exp_out = forward_take(&p, c * ku * E * sizeof(float));
		ns->exp_w = forward_take(&p, c * ku * sizeof(float));
		ns->exp_sel = forward_take(&p, c * ku * sizeof(uint32_t));
		ns->exp_slot = forward_take(&p, c * sizeof(uint32_t));
		ns->xn_act[0] = forward_take(&p, c * act_row);
		ns->xn_act[1] = forward_take(&p, c * act_row);
		ns->act = forward_take(&p, c * act_row);
		ns->acts = forward_take(&p, c * sizeof(void *));
		ns->ys = forward_take(&p, c * sizeof(float *));
		ns->seqs = forward_take(&p, c * sizeof(*ns->seqs));
		ns->pos = forward_take(&p, c * sizeof(uint32_t));
		ns->att_work = forward_take(&p, att_work);
		if (pass == 0) {
			bytes = (size_t)(p - base) + 64;
			ns->mem = malloc(bytes);
			if (!ns->mem) {
				free(ns);
				return err_set(
					err, ENOMEM,
					"out of memory for %zu bytes of forward buffers (%u tokens)",
					bytes, cap);
			}
			/* align the start: the offsets above are 64-aligned */
			p = ((uintptr_t)ns->mem + 63) & ~(uintptr_t)63;
		}
	}
	ns->cap = cap;
	ns->act_row = act_row;
	ns->xn_type[0] = ns->xn_type[1] = UINT32_MAX;
	engine_forward_release(ctx);
	ctx->fwd = ns;
	return 0;
}

/*
 * Wait until t's bytes are loaded (at once unless the model loads
 * asynchronously), and pack them then if the model packs as it loads; a
 * failed load gives its own message.
 */
static int forward_wait(struct forward_pass *p, const struct engine_tensor *t)
{
	int ret;

	if (!engine_tensor_present(t))
		return 0;
	ret = io_placement_wait(t->place);
	if (ret == 0) {
		/*
		 * an asynchronous load's tensors are packed as they arrive,
		 * by one context at a time (several may share the model)
		 */
		if (p->m->pack_on_wait) {
			pthread_mutex_lock(&p->ctx->model->pack_lock);
			engine_backend_pack(p->be, t);
			pthread_mutex_unlock(&p->ctx->model->pack_lock);
		}
		return 0;
	}
	if (io_weights_wait(p->m->weights, p->err) >= 0)
		err_set(p->err, -ret, "%s: loading tensor '%s' failed",
			p->m->path, t->info->name);
	return ret;
}

/* y = x / rms(x) * w for rows idx[0..n) */
struct forward_norm_job {
	struct engine_backend *be;
	float *y;
	const float *x, *w;
	const uint32_t *idx;
	int64_t width;
	float eps;
};

static void forward_norm_row(void *arg, uint32_t j)
{
	const struct forward_norm_job *job = arg;
	const size_t o = (size_t)job->idx[j] * job->width;

	job->be->iface->rms_norm(job->be, job->y + o, job->x + o, job->w,
				 job->width, job->eps);
}

static int forward_norm(struct forward_pass *p, float *y, const float *x,
			const struct engine_tensor *w, const uint32_t *idx,
			uint32_t n)
{
	const struct engine_hparams *hp = &p->m->hp;
	struct engine_backend *be = p->be;
	int ret;
	struct forward_norm_job job = { be,
					y,
					x,
					(const float *)engine_tensor_data(w),
					idx,
					hp->n_embd,
					hp->rms_norm_eps };

	if ((ret = forward_wait(p, w)))
		return ret;
	be->iface->for_rows(be, forward_norm_row, &job, n);
	/* xn changed: its conversions are stale */
	if (y == p->s->xn) {
		p->s->xn_type[0] = p->s->xn_type[1] = UINT32_MAX;
		p->s->xn_idx = idx;
		p->s->xn_n = n;
	}
	return 0;
}

/* Row idx[j] of y (ld floats apart) += row idx[j] of x (x_ld apart). */
struct forward_add_job {
	struct engine_backend *be;
	float *y;
	const float *x;
	size_t ld, x_ld;
	const uint32_t *idx;
	int64_t width;
};

static void forward_add_row(void *arg, uint32_t j)
{
	const struct forward_add_job *job = arg;

	job->be->iface->add(job->be, job->y + job->idx[j] * job->ld,
			    job->x + job->idx[j] * job->x_ld, job->width);
}

static void forward_add(struct forward_pass *p, float *y, size_t ld,
			const float *x, size_t x_ld, const uint32_t *idx,
			uint32_t n, int64_t width)
{
	struct engine_backend *be = p->be;
	struct forward_add_job job = { be, y, x, ld, x_ld, idx, width };

	be->iface->for_rows(be, forward_add_row, &job, n);
}

/* y += b, an optional F32 bias (ggml_add), for rows idx[0..n) */
static int forward_bias(struct forward_pass *p, float *y, size_t ld,
			const struct engine_tensor *b, const uint32_t *idx,
			uint32_t n)
{
	int ret;

	if (!engine_tensor_present(b))
		return 0;
	if ((ret = forward_wait(p, b)))
		return ret;
	forward_add(p, y, ld, (const float *)engine_tensor_data(b), 0, idx, n,
		    b->info->ne[0]);
	return 0;
}

/* Rows idx[0..n) of src (ld floats, width used) into dst, type vdt. */
struct forward_convert_job {
	struct engine_backend *be;
	uint32_t vdt;
	const float *src;
	size_t ld;
	int64_t width;
	uint8_t *dst;
	size_t dst_ld;
	const uint32_t *idx;
};

static void forward_convert_row(void *arg, uint32_t j)
{
	const struct forward_convert_job *job = arg;

	job->be->iface->convert(
		job->be, job->vdt, job->src + job->idx[j] * job->ld,
		job->dst + job->idx[j] * job->dst_ld, job->width);
}

static void forward_convert(struct forward_pass *p, uint32_t vdt,
			    const float *src, size_t ld, int64_t width,
			    uint8_t *dst, const uint32_t *idx, uint32_t n)
{
	struct engine_backend *be = p->be;
	struct forward_convert_job job = { be,	  vdt, src,	      ld,
					   width, dst, p->s->act_row, idx };

	be->iface->for_rows(be, forward_convert_row, &job, n);
}

/*
 * The rows of xn in w's vec_dot type. The last two
 * conversions are kept, as the one-token path converted once per run of
 * same-type matmuls (the result is the same either way).
 */
static const uint8_t *forward_xn_act(struct forward_pass *p,
				     const struct engine_tensor *w)
{
	struct forward_scratch *s = p->s;
	struct engine_backend *be = p->be;
	uint32_t vdt = be->iface->vec_dot_type(be, w->info->type);
	int k;

	for (k = 0; k < 2; k++) {
		if (s->xn_type[k] == vdt) {
			s->xn_last = k;
			return s->xn_act[k];
		}
	}
	k = !s->xn_last;
	forward_convert(p, vdt, s->xn, p->m->hp.n_embd, p->m->hp.n_embd,
			s->xn_act[k], s->xn_idx, s->xn_n);
	s->xn_type[k] = vdt;
	s->xn_last = k;
	return s->xn_act[k];
}

/* Row idx[j] of y (ld floats apart) = w . row idx[j] of act. */
static int forward_mm(struct forward_pass *p, float *y, size_t ld,
		      const struct engine_tensor *w, int64_t e,
		      const uint8_t *act, const uint32_t *idx, uint32_t n)
{
	struct forward_scratch *s = p->s;
	uint32_t j;
	int ret;

	if ((ret = forward_wait(p, w)))
		return ret;
	for (j = 0; j < n; j++) {
		s->acts[j] = act + idx[j] * s->act_row;
		s->ys[j] = y + idx[j] * ld;
	}
	if (n)
		p->be->iface->matmul(p->be, s->ys, w, e, n,
				     (const void *const *)s->acts);
	return 0;
}

/*
 * One token's products with several weights in one pool run (Q, K and V;
 * up and gate): a barrier per run is a good part of a 0.6B model's token.
 * The backend splits the rows of all the weights over its threads by their
 * bytes, each row the dot the one-weight matmul gives it, so the bits do
 * not change.
 */
/*
 * y_k = w_k . xn of the one row idx, k < n, in one pool run; 1 if the
 * weights need more than the two converted copies of xn kept (the caller
 * then goes weight by weight), or a load error.
 */
static int forward_mv_fused(struct forward_pass *p, float *const *y,
			    const struct engine_tensor *const *w, uint32_t n,
			    uint32_t idx)
{
	struct engine_backend *be = p->be;
	struct forward_scratch *s = p->s;
	struct engine_mv mv[3];
	uint32_t types[3], nt = 0, k, t;
	int ret;

	for (k = 0; k < n; k++) {
		uint32_t vdt = be->iface->vec_dot_type(be, w[k]->info->type);

		for (t = 0; t < nt && types[t] != vdt; t++)
			;
		if (t == nt)
			types[nt++] = vdt;
		if (nt > 2 || w[k]->info->ne[2] > 1)
			return 1;
	}
	for (k = 0; k < n; k++) {
		if ((ret = forward_wait(p, w[k])))
			return ret;
		mv[k].y = y[k];
		mv[k].w = w[k];
		mv[k].act = forward_xn_act(p, w[k]) + idx * s->act_row;
	}
	be->iface->matvec_multi(be, mv, n);
	return 0;
}

/* Per-head RMS norm of n_head rows of head_dim (qwen3's Q/K norms). */
static void forward_head_norm(struct engine_backend *be, float *x,
			      uint32_t n_head, uint32_t head_dim,
			      const struct engine_tensor *w, float eps)
{
	const float *wd = (const float *)engine_tensor_data(w);
	uint32_t h;

	for (h = 0; h < n_head; h++)
		be->iface->rms_norm(be, x + (size_t)h * head_dim,
				    x + (size_t)h * head_dim, wd, head_dim,
				    eps);
}

struct forward_qkv_job {
	struct forward_pass *p;
	const struct engine_layer *l;
	uint32_t il;
};

/* Row j's K normed and roped, then K and V into its sequence's cache. */
static void forward_kv_row(void *arg, uint32_t j)
{
	const struct forward_qkv_job *job = arg;
	const struct engine_hparams *hp = &job->p->m->hp;
	struct engine_backend *be = job->p->be;
	struct forward_scratch *s = job->p->s;
	const struct forward_row *r = &s->rows[j];
	float *k = s->k + j * (size_t)hp->n_head_kv * hp->head_dim;
	uint32_t type_k, type_v;
	uint8_t *kdst, *vdst;

	if (hp->qk_norm)
		forward_head_norm(be, k, hp->n_head_kv, hp->head_dim,
				  &job->l->k_norm, hp->rms_norm_eps);
	be->iface->rope(be, k, hp->n_head_kv, hp->head_dim, hp->n_rot,
			hp->rope_mode, s->rope + (size_t)j * hp->n_rot);
	engine_seq_types(r->seq, &type_k, &type_v);
	engine_kv_rows(r->seq, job->il, r->pos, &kdst, &vdst);
	be->iface->convert(be, type_k, k, kdst,
			   (int64_t)hp->n_head_kv * hp->head_dim);
	be->iface->convert(be, type_v,
			   s->v + j * (size_t)hp->n_head_kv * hp->head_dim_v,
			   vdst, (int64_t)hp->n_head_kv * hp->head_dim_v);
}

/* Live row j's Q normed and roped. */
static void forward_q_row(void *arg, uint32_t j)
{
	const struct forward_qkv_job *job = arg;
	const struct engine_hparams *hp = &job->p->m->hp;
	struct engine_backend *be = job->p->be;
	struct forward_scratch *s = job->p->s;
	const uint32_t b = s->live[j];
	float *q = s->q + b * (size_t)hp->n_head * hp->head_dim;

	if (hp->qk_norm)
		forward_head_norm(be, q, hp->n_head, hp->head_dim,
				  &job->l->q_norm, hp->rms_norm_eps);
	be->iface->rope(be, q, hp->n_head, hp->head_dim, hp->n_rot,
			hp->rope_mode, s->rope + (size_t)b * hp->n_rot);
}

/*
 * Q, K, V of every row; K and V into the cache of each row's sequence
 * (rounded to its type, F16) before any row attends, so that a row at
 * position pos sees its sequence's positions 0..pos, the earlier ones of
 * this very pass included. Then attention and wo for the live rows.
 */
static int forward_attention(struct forward_pass *p, uint32_t il)
{
	const struct engine_model *m = p->m;
	struct engine_backend *be = p->be;
	const struct engine_hparams *hp = &m->hp;
	const struct engine_layer *l = &m->layers[il];
	struct forward_scratch *s = p->s;
	const size_t nq = (size_t)hp->n_head * hp->head_dim;
	const size_t nk = (size_t)hp->n_head_kv * hp->head_dim;
	const size_t nv = (size_t)hp->n_head_kv * hp->head_dim_v;
	const size_t natt = (size_t)hp->n_head * hp->head_dim_v;
	bool fused = false;
	struct forward_qkv_job qkv = { p, l, il };
	const struct engine_att_batch att = {
		.hp = hp,
		.il = il,
		.n_ctx = m->info.n_ctx,
		.idx = s->live,
		.n = p->n_live,
		.seq = s->seqs,
		.pos = s->pos,
		.q = s->q,
		.q_ld = nq,
		.out = s->att,
		.out_ld = natt,
		.work = s->att_work,
	};
	int ret = 0;

	/* one token: Q, K and V in one pool run */
	if (p->n == 1 && p->n_live == 1) {
		float *ys[3] = { s->q, s->k, s->v };
		const struct engine_tensor *ws[3] = { &l->wq, &l->wk, &l->wv };

		ret = forward_mv_fused(p, ys, ws, 3, 0);
		if (ret < 0)
			return ret;
		fused = !ret;
	}
	/* the three projections share the converted xn of each type */
	if ((!fused &&
	     ((ret = forward_mm(p, s->q, nq, &l->wq, 0,
				forward_xn_act(p, &l->wq), s->live,
				p->n_live)) ||
	      (ret = forward_mm(p, s->k, nk, &l->wk, 0,
				forward_xn_act(p, &l->wk), s->all, p->n)) ||
	      (ret = forward_mm(p, s->v, nv, &l->wv, 0,
				forward_xn_act(p, &l->wv), s->all, p->n)))) ||
	    (ret = forward_bias(p, s->q, nq, &l->bq, s->live, p->n_live)) ||
	    (ret = forward_bias(p, s->k, nk, &l->bk, s->all, p->n)) ||
	    (ret = forward_bias(p, s->v, nv, &l->bv, s->all, p->n)) ||
	    (ret = forward_wait(p, &l->q_norm)) ||
	    (ret = forward_wait(p, &l->k_norm)))
		return ret;

	be->iface->for_rows(be, forward_kv_row, &qkv, p->n);
	be->iface->for_rows(be, forward_q_row, &qkv, p->n_live);
	be->iface->attention(be, &att);

	forward_convert(p, be->iface->vec_dot_type(be, l->wo.info->type),
			s->att, natt, (int64_t)natt, s->act, s->live,
			p->n_live);
	if ((ret = forward_mm(p, s->tmp, hp->n_embd, &l->wo, 0, s->act, s->live,
			      p->n_live)))
		return ret;
	return forward_bias(p, s->tmp, hp->n_embd, &l->bo, s->live, p->n_live);
}

/* Live row j: gate = silu(gate) * up, then into ffn_down's vec_dot type. */
struct forward_swiglu_job {
	struct forward_pass *p;
	uint32_t vdt;
};

static void forward_swiglu_row(void *arg, uint32_t j)
{
	const struct forward_swiglu_job *job = arg;
	struct engine_backend *be = job->p->be;
	struct forward_scratch *s = job->p->s;
	const int64_t n_ff = job->p->m->hp.n_ff;
	const size_t o = (size_t)s->live[j] * n_ff;

	be->iface->swiglu(be, s->gate + o, s->gate + o, s->up + o, n_ff);
	be->iface->convert(be, job->vdt, s->gate + o,
			   s->act + s->live[j] * s->act_row, n_ff);
}

static int forward_ffn_dense(struct forward_pass *p,
			     const struct engine_layer *l)
{
	const struct engine_hparams *hp = &p->m->hp;
	struct engine_backend *be = p->be;
	struct forward_scratch *s = p->s;
	struct forward_swiglu_job sw = {
		p, be->iface->vec_dot_type(be, l->ffn_down.info->type)
	};
	int ret = 1;

	/* one token: up and gate in one pool run */
	if (p->n_live == 1) {
		float *ys[2] = { s->up + (size_t)s->live[0] * hp->n_ff,
				 s->gate + (size_t)s->live[0] * hp->n_ff };
		const struct engine_tensor *ws[2] = { &l->ffn_up,
						      &l->ffn_gate };

		ret = forward_mv_fused(p, ys, ws, 2, s->live[0]);
		if (ret < 0)
			return ret;
	}
	if (ret && ((ret = forward_mm(p, s->up, hp->n_ff, &l->ffn_up, 0,
				      forward_xn_act(p, &l->ffn_up), s->live,
				      p->n_live)) ||
		    (ret = forward_mm(p, s->gate, hp->n_ff, &l->ffn_gate, 0,
				      forward_xn_act(p, &l->ffn_gate), s->live,
				      p->n_live))))
		return ret;
	be->iface->for_rows(be, forward_swiglu_row, &sw, p->n_live);
	return forward_mm(p, s->tmp, hp->n_embd, &l->ffn_down, 0, s->act,
			  s->live, p->n_live);
}

/*
 * Route every live row, then run each expert once for the rows that
 * chose it, and add each row's expert outputs, scaled by their weights,
 * in its selection order.
 */
static int forward_ffn_moe(struct forward_pass *p, const struct engine_layer *l)
{
	const struct engine_hparams *hp = &p->m->hp;
	struct engine_backend *be = p->be;
	struct forward_scratch *s = p->s;
	const uint32_t k = hp->n_expert_used;
	const size_t E = hp->n_embd;
	const uint8_t *act_up, *act_gate;
	uint32_t j, i, e, n;
	int ret;

	if ((ret = forward_mm(p, s->router, hp->n_expert, &l->ffn_gate_inp, 0,
			      forward_xn_act(p, &l->ffn_gate_inp), s->live,
			      p->n_live)))
		return ret;
	for (j = 0; j < p->n_live; j++) {
		uint32_t b = s->live[j];
		float *router = s->router + (size_t)b * hp->n_expert;

		be->iface->moe_route(be, hp, router, s->exp_sel + (size_t)b * k,
				     s->exp_w + (size_t)b * k);
	}
	if ((ret = forward_wait(p, &l->ffn_up_exps)) ||
	    (ret = forward_wait(p, &l->ffn_gate_exps)) ||
	    (ret = forward_wait(p, &l->ffn_down_exps)))
		return ret;
	/* both kept by forward_xn_act's two slots */
	act_up = forward_xn_act(p, &l->ffn_up_exps);
	act_gate = forward_xn_act(p, &l->ffn_gate_exps);
	for (e = 0; e < hp->n_expert; e++) {
		/* the rows that chose e: a row picks an expert at most once */
		for (n = 0, j = 0; j < p->n_live; j++) {
			uint32_t b = s->live[j];

			for (i = 0; i < k; i++) {
				if (s->exp_sel[(size_t)b * k + i] != e)
					continue;
				s->acts[n] = act_up + b * s->act_row;
				s->ys[n] = s->up + (size_t)n * hp->n_ff;
				/* where this expert's output goes */
				s->exp_slot[n] = b * k + i;
				n++;
			}
		}
		if (!n)
			continue;
		be->iface->matmul(be, s->ys, &l->ffn_up_exps, e, n,
				  (const void *const *)s->acts);
		for (j = 0; j < n; j++) {
			s->acts[j] = act_gate +
				     ((const uint8_t *)s->acts[j] - act_up);
			s->ys[j] = s->gate + (size_t)j * hp->n_ff;
		}
		be->iface->matmul(be, s->ys, &l->ffn_gate_exps, e, n,
				  (const void *const *)s->acts);
		for (j = 0; j < n; j++) {
			float *g = s->gate + (size_t)j * hp->n_ff;
			uint8_t *a = s->act + (size_t)j * s->act_row;

			be->iface->swiglu(be, g, g,
					  s->up + (size_t)j * hp->n_ff,
					  hp->n_ff);
			be->iface->convert(
				be,
				be->iface->vec_dot_type(
					be, l->ffn_down_exps.info->type),
				g, a, hp->n_ff);
			s->acts[j] = a;
			s->ys[j] = s->exp_out + (size_t)s->exp_slot[j] * E;
		}
		be->iface->matmul(be, s->ys, &l->ffn_down_exps, e, n,
				  (const void *const *)s->acts);
	}
	for (j = 0; j < p->n_live; j++) {
		uint32_t b = s->live[j];

		be->iface->moe_combine(be, s->tmp + b * E,
				       s->exp_out + (size_t)b * k * E,
				       s->exp_w + (size_t)b * k, k, E);
	}
	return 0;
}

/* x += tmp for the live rows */
static void forward_residual(struct forward_pass *p)
{
	const size_t E = p->m->hp.n_embd;
	struct forward_scratch *s = p->s;

	/* x + t rounds as t + x: the backend's add is the same bits */
	forward_add(p, s->x, E, s->tmp, E, s->live, p->n_live, (int64_t)E);
}

/* The final-normed states of the live rows that want them (embeddings). */
static void forward_embeddings(struct forward_pass *p)
{
	struct forward_scratch *s = p->s;
	uint32_t E = p->m->hp.n_embd;

	for (uint32_t j = 0; j < p->n_live; j++) {
		const struct forward_row *r = &s->rows[s->live[j]];
		const float *x = s->xn + (size_t)s->live[j] * E;

		if (!r->embd)
			continue;
		if (!r->embd_add) {
			memcpy(r->embd, x, E * sizeof(*x));
			continue;
		}
		for (uint32_t e = 0; e < E; e++)
			r->embd[e] += x[e];
	}
}

/* The rows s->rows[0..n) through the model; logits where wanted. */
static int forward_chunk(struct forward_pass *p)
{
	const struct engine_model *m = p->m;
	struct engine_backend *be = p->be;
	const struct engine_hparams *hp = &m->hp;
	struct forward_scratch *s = p->s;
	const float *freqs = NULL;
	uint32_t j, il, n_out = 0;
	int ret;

	if ((ret = forward_wait(p, &m->tok_embd)) ||
	    (ret = forward_wait(p, &m->rope_freqs)))
		return ret;
	if (engine_tensor_present(&m->rope_freqs))
		freqs = (const float *)engine_tensor_data(&m->rope_freqs);
	for (j = 0; j < p->n; j++) {
		s->all[j] = j;
		s->live[j] = j;
		s->seqs[j] = s->rows[j].seq;
		s->pos[j] = s->rows[j].pos;
		be->iface->get_rows(be, s->x + (size_t)j * hp->n_embd,
				    &m->tok_embd, s->rows[j].token);
		be->iface->rope_cache(be, s->rope + (size_t)j * hp->n_rot,
				      s->rows[j].pos, hp->n_rot,
				      hp->rope_freq_base, hp->rope_freq_scale,
				      freqs);
	}
	p->n_live = p->n;

	for (il = 0; il < hp->n_layer; il++) {
		const struct engine_layer *l = &m->layers[il];

		/*
		 * The last layer's K and V are stored for every row; the rest
		 * of it only matters for the rows whose logits are wanted.
		 */
		if (il + 1 == hp->n_layer) {
			for (n_out = 0, j = 0; j < p->n; j++)
				if (s->rows[j].logits || s->rows[j].embd)
					s->live[n_out++] = j;
			p->n_live = n_out;
		}
		if ((ret = forward_norm(p, s->xn, s->x, &l->attn_norm, s->all,
					p->n)) ||
		    (ret = forward_attention(p, il)))
			return ret;
		forward_residual(p);
		if ((ret = forward_norm(p, s->xn, s->x, &l->ffn_norm, s->live,
					p->n_live)))
			return ret;
		ret = hp->n_expert ? forward_ffn_moe(p, l) :
				     forward_ffn_dense(p, l);
		if (ret)
			return ret;
		forward_residual(p);
	}
	if (!p->n_live)
		return 0;
	if ((ret = forward_norm(p, s->xn, s->x, &m->output_norm, s->live,
				p->n_live)) ||
	    (ret = forward_wait(p, &m->output)))
		return ret;
	forward_embeddings(p);
	/* the output matrix for the rows that want logits */
	for (n_out = 0, j = 0; j < p->n_live; j++)
		if (s->rows[s->live[j]].logits)
			s->live[n_out++] = s->live[j];
	if (!n_out)
		return 0;
	forward_convert(p, be->iface->vec_dot_type(be, m->output.info->type),
			s->xn, hp->n_embd, hp->n_embd, s->act, s->live, n_out);
	for (j = 0; j < n_out; j++) {
		s->acts[j] = s->act + s->live[j] * s->act_row;
		s->ys[j] = s->rows[s->live[j]].logits;
	}
	be->iface->matmul(be, s->ys, &m->output, 0, n_out,
			  (const void *const *)s->acts);
	return 0;
}

/*
 * Where row r (token t of item it) puts its state, by the pooling its
 * sequence asks for (engine_seq_set_embedding).
 */
static void forward_row_embd(struct forward_row *r,
			     const struct engine_batch_item *it, size_t t)
{
	enum engine_pooling pooling;
	float *embd = engine_seq_embedding(it->seq, &pooling);

	r->embd = NULL;
	r->embd_add = false;
	if (!embd)
		return;
	switch (pooling) {
	case ENGINE_POOLING_MEAN:
		r->embd = embd;
		r->embd_add = true;
		break;
	case ENGINE_POOLING_CLS:
		/* the sequence's first token, whichever item brings it */
		if (r->pos == 0)
			r->embd = embd;
		break;
	default: /* none and last: the last token's */
		if (t + 1 == it->n_tokens)
			r->embd = embd;
		break;
	}
}

/* Tokens the items before item idx append to the same sequence. */
static size_t forward_before(const struct engine_batch_item *items, size_t idx)
{
	size_t i, n = 0;

	for (i = 0; i < idx; i++)
		if (items[i].seq == items[idx].seq)
			n += items[i].n_tokens;
	return n;
}

static int forward_check(struct engine_ctx *ctx,
			 const struct engine_batch_item *items, size_t idx,
			 struct err *err)
{
	const struct engine_batch_item *it = &items[idx];
	const struct engine_hparams *hp = &ctx->model->hp;
	uint32_t n_ctx, n_past;
	size_t i, before;

	if (!it->seq || engine_seq_ctx(it->seq) != ctx)
		return err_set(err, EINVAL,
			       "batch item %zu: sequence of another context",
			       idx);
	if (it->n_tokens && !it->tokens)
		return err_set(err, EINVAL, "batch item %zu: no tokens", idx);
	/* an item after another of the same sequence continues it */
	before = forward_before(items, idx);
	n_ctx = engine_seq_capacity(it->seq);
	n_past = engine_seq_length(it->seq);
	if (before > n_ctx - n_past || it->n_tokens > n_ctx - n_past - before)
		return err_set(err, ENOSPC,
			       "context full: %u + %zu tokens > n_ctx %u",
			       n_past, before + it->n_tokens, n_ctx);
	for (i = 0; i < it->n_tokens; i++)
		if (it->tokens[i] < 0 || (uint32_t)it->tokens[i] >= hp->n_vocab)
			return err_set(err, EINVAL,
				       "token id %d out of range (n_vocab %u)",
				       it->tokens[i], hp->n_vocab);
	return 0;
}

int engine_forward(struct engine_ctx *ctx, struct engine_batch_item *items,
		   size_t n_items, struct err *err)
{
	struct forward_pass p = {
		.ctx = ctx, .m = ctx->model, .be = ctx->backend, .err = err
	};
	size_t i, t, total = 0;
	int ret;

	/* all or nothing: no sequence moves if any item is bad */
	for (i = 0; i < n_items; i++) {
		if ((ret = forward_check(ctx, items, i, err)))
			return ret;
		total += items[i].n_tokens;
	}
	if (!total)
		return 0;
	/* the blocks of every position written, or no pass at all */
	for (i = 0; i < n_items; i++) {
		struct engine_batch_item *it = &items[i];

		uint32_t end = engine_seq_length(it->seq) +
			       (uint32_t)(forward_before(items, i) +
					  it->n_tokens);

		ret = engine_seq_grow(it->seq, end, err);
		if (!ret)
			ret = engine_seq_tokens_reserve(it->seq, end, err);
		if (ret) {
			for (t = 0; t <= i; t++)
				engine_seq_shrink(items[t].seq);
			return ret;
		}
	}
	ret = forward_reserve(
		ctx, total < FORWARD_CHUNK ? (uint32_t)total : FORWARD_CHUNK,
		err);
	if (ret)
		goto out_shrink;
	p.s = ctx->fwd;
	/*
	 * Rows in item order, each item's tokens at the positions after its
	 * sequence's (and any earlier item's of the same sequence); n_past
	 * moves only once every chunk went through, so a failure (a load
	 * error) appends nothing.
	 */
	for (i = 0; i < n_items; i++) {
		struct engine_batch_item *it = &items[i];
		uint32_t pos = engine_seq_length(it->seq) +
			       (uint32_t)forward_before(items, i);

		for (t = 0; t < it->n_tokens; t++) {
			struct forward_row *r = &p.s->rows[p.n++];

			r->seq = it->seq;
			r->pos = pos + (uint32_t)t;
			r->token = it->tokens[t];
			r->logits = t + 1 == it->n_tokens ? it->logits : NULL;
			forward_row_embd(r, it, t);
			if (p.n == p.s->cap) {
				if ((ret = forward_chunk(&p)))
					goto out_shrink;
				p.n = 0;
			}
		}
	}
	if (p.n && (ret = forward_chunk(&p)))
		goto out_shrink;
	for (i = 0; i < n_items; i++)
		engine_seq_append(items[i].seq, items[i].tokens,
				  items[i].n_tokens);
	return 0;

out_shrink:
	for (i = 0; i < n_items; i++)
		engine_seq_shrink(items[i].seq);
	return ret;
}
