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
 * evaluating it alone (with batch_exact; else within the GEMM's
 * tolerance of it), which is llama.cpp's one-token path, whose logits
 * are the reference's (a multi-token ggml kernel would round differently:
 * the batched pass only changes the order in which independent results
 * are computed, never how one is).
 *
 * Every op is one call of the backend over the whole batch (backend.h):
 * the pass names no device, holds its floats in the backend's memory and
 * copies the logits out once. Only the rows' bookkeeping (which rows,
 * their positions, their KV slots) is the host's.
 *
 * Async loading: each tensor is waited for (io_placement_wait) right
 * before its first use in a pass, so that a first pass runs layer by
 * layer behind the disk; a failed load ends the pass with its error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "context.h"
#include "kv.h"

/* Token rows of one pass; longer batches are split (bounded memory). */
#define FORWARD_CHUNK 128
/* xn converted to this many vec_dot types at once (Q, K and V may differ) */
#define FORWARD_XN_SLOTS 3

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
 * The pass's buffers for cap rows, grown up to FORWARD_CHUNK. The host
 * keeps the rows' bookkeeping; the floats are in the backend's memory:
 * token row r's at x + r * n_embd and so on, its converted activations at
 * act + r * act_row, and a MoE's per expert slot (row r's i-th expert:
 * slot r * k + i) at up + (r * k + i) * n_ff and so on.
 */
struct forward_scratch {
	uint32_t cap;
	uint32_t slots_per_row; /* n_expert_used, or 1 */
	size_t act_row;		/* bytes of the widest converted row */
	/* the host's */
	struct forward_row *rows;
	uint32_t *all;		   /* 0 .. n-1 */
	uint32_t *live;		   /* rows computed past attention this layer */
	uint32_t *slots;	   /* [cap * k] the live rows' expert slots */
	uint32_t *pos;		   /* [cap] each row's position */
	int32_t *tokens;	   /* [cap] each row's token */
	struct engine_seq **seqs;  /* [cap] each row's sequence */
	struct engine_kv_slot *kv; /* [cap] where each row's K/V go */
	float **ys;		   /* [cap] the logits, for a host backend */
	void *host;
	/* the backend's */
	float *x;	   /* [n_embd] residual streams */
	float *xn;	   /* [n_embd] normed input of a block */
	float *q, *k, *v;  /* [n_head * head_dim], [n_head_kv * ...] */
	float *att;	   /* [n_head * head_dim_v] */
	float *tmp;	   /* [n_embd] a block's output */
	float *gate, *up;  /* [k][n_ff] */
	float *router;	   /* [n_expert] */
	float *rope;	   /* [n_rot] cos/sin at the row's position */
	float *exp_out;	   /* [k][n_embd] each expert's output */
	float *exp_w;	   /* [k] the experts' weights */
	uint32_t *exp_sel; /* [k] the experts */
	uint8_t *xn_act[FORWARD_XN_SLOTS];  /* xn in vec_dot types */
	uint32_t xn_type[FORWARD_XN_SLOTS]; /* UINT32_MAX: stale */
	const uint32_t *xn_idx;		    /* the rows xn holds */
	uint32_t xn_n;
	uint8_t *act; /* [k] other converted inputs (att, swiglu) */
	void *mem;
	float *logits; /* [logits_cap][n_vocab], a device backend's */
	uint32_t logits_cap;
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
	struct forward_scratch *s = ctx->fwd;
	struct engine_backend *be = ctx->backend;

	if (!s)
		return;
	if (s->mem)
		be->iface->free(be, s->mem);
	if (s->logits)
		be->iface->free(be, s->logits);
	free(s->host);
	free(s);
	ctx->fwd = NULL;
}

static size_t forward_max(size_t a, size_t b)
{
	return a > b ? a : b;
}

/* Carve n bytes (64-aligned) at address *p (a mere count at first). */
static void *forward_take(uintptr_t *p, size_t n)
{
	void *r = (void *)*p;

	*p += (n + 63) & ~(size_t)63;
	return r;
}

/* The host's part of the buffers for cap rows, from base (0: count). */
static size_t forward_carve_host(struct forward_scratch *s, uintptr_t base,
				 size_t c)
{
	uintptr_t p = base;

	s->rows = forward_take(&p, c * sizeof(*s->rows));
	s->all = forward_take(&p, c * sizeof(uint32_t));
	s->live = forward_take(&p, c * sizeof(uint32_t));
	s->slots = forward_take(&p, c * s->slots_per_row * sizeof(uint32_t));
	s->pos = forward_take(&p, c * sizeof(uint32_t));
	s->tokens = forward_take(&p, c * sizeof(int32_t));
	s->seqs = forward_take(&p, c * sizeof(*s->seqs));
	s->kv = forward_take(&p, c * sizeof(*s->kv));
	s->ys = forward_take(&p, c * sizeof(*s->ys));
	return (size_t)(p - base);
}

/* The backend's part of the buffers for cap rows, from base (0: count). */
static size_t forward_carve_dev(struct forward_scratch *s,
				const struct engine_hparams *hp, uintptr_t base,
				size_t c)
{
	const size_t nq = (size_t)hp->n_head * hp->head_dim;
	const size_t nk = (size_t)hp->n_head_kv * hp->head_dim;
	const size_t nv = (size_t)hp->n_head_kv * hp->head_dim_v;
	const size_t natt = (size_t)hp->n_head * hp->head_dim_v;
	const size_t ku = hp->n_expert_used, E = hp->n_embd;
	uintptr_t p = base;
	int i;

	s->x = forward_take(&p, c * E * sizeof(float));
	s->xn = forward_take(&p, c * E * sizeof(float));
	s->q = forward_take(&p, c * nq * sizeof(float));
	s->k = forward_take(&p, c * nk * sizeof(float));
	s->v = forward_take(&p, c * nv * sizeof(float));
	s->att = forward_take(&p, c * natt * sizeof(float));
	s->tmp = forward_take(&p, c * E * sizeof(float));
	s->gate = forward_take(&p,
			       c * s->slots_per_row * hp->n_ff * sizeof(float));
	s->up = forward_take(&p,
			     c * s->slots_per_row * hp->n_ff * sizeof(float));
	s->router = forward_take(&p, c * hp->n_expert * sizeof(float));
	s->rope = forward_take(&p, c * hp->n_rot * sizeof(float));
	s->exp_out = forward_take(&p, c * ku * E * sizeof(float));
	s->exp_w = forward_take(&p, c * ku * sizeof(float));
	s->exp_sel = forward_take(&p, c * ku * sizeof(uint32_t));
	for (i = 0; i < FORWARD_XN_SLOTS; i++)
		s->xn_act[i] = forward_take(&p, c * s->act_row);
	s->act = forward_take(&p, c * s->slots_per_row * s->act_row);
	return (size_t)(p - base);
}

/* Buffers for cap rows; the old ones are kept if big enough. */
static int forward_reserve(struct engine_ctx *ctx, uint32_t cap,
			   struct err *err)
{
	const struct engine_hparams *hp = &ctx->model->hp;
	const size_t natt = (size_t)hp->n_head * hp->head_dim_v;
	struct engine_backend *be = ctx->backend;
	struct forward_scratch *ns;
	size_t host, dev;
	int i, ret;

	if (ctx->fwd && ctx->fwd->cap >= cap)
		return 0;
	if ((ret = be->iface->reserve(be, hp, cap, err)))
		return ret;
	ns = calloc(1, sizeof(*ns));
	if (!ns)
		return err_set(err, ENOMEM, "out of memory");
	ns->slots_per_row = hp->n_expert_used ? hp->n_expert_used : 1;
	/* the widest vec_dot row: F32 is 4 bytes an element, the rest less */
	ns->act_row = 4 * forward_max(forward_max(hp->n_embd, hp->n_ff), natt) +
		      64;
	host = forward_carve_host(ns, 0, cap);
	dev = forward_carve_dev(ns, hp, 0, cap);
	ns->host = malloc(host + 64);
	ns->mem = be->iface->alloc(be, dev);
	if (!ns->host || !ns->mem) {
		free(ns->host);
		if (ns->mem)
			be->iface->free(be, ns->mem);
		free(ns);
		return err_set(
			err, ENOMEM,
			"out of memory for %zu bytes of forward buffers (%u tokens) on %s",
			dev, cap, be->dev.name);
	}
	/* the offsets are 64-aligned; so is alloc's memory */
	forward_carve_host(ns, ((uintptr_t)ns->host + 63) & ~(uintptr_t)63,
			   cap);
	forward_carve_dev(ns, hp, (uintptr_t)ns->mem, cap);
	ns->cap = cap;
	for (i = 0; i < FORWARD_XN_SLOTS; i++)
		ns->xn_type[i] = UINT32_MAX;
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

/* A vector weight (norm, bias) as floats in the backend's memory. */
static const float *forward_floats(const struct engine_tensor *t)
{
	return engine_tensor_present(t) ? (const float *)engine_tensor_data(t) :
					  NULL;
}

/* y = rms_norm(x) * w for rows idx[0..n) of n_embd floats */
static int forward_norm(struct forward_pass *p, float *y, const float *x,
			const struct engine_tensor *w, const uint32_t *idx,
			uint32_t n)
{
	const struct engine_hparams *hp = &p->m->hp;
	struct forward_scratch *s = p->s;
	int ret, k;

	if ((ret = forward_wait(p, w)))
		return ret;
	p->be->iface->rms_norm_rows(p->be, y, x, hp->n_embd, hp->n_embd, 1,
				    forward_floats(w), hp->rms_norm_eps, idx,
				    n);
	/* xn changed: its conversions are stale */
	if (y == s->xn) {
		for (k = 0; k < FORWARD_XN_SLOTS; k++)
			s->xn_type[k] = UINT32_MAX;
		s->xn_idx = idx;
		s->xn_n = n;
	}
	return 0;
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
	p->be->iface->add_rows(p->be, y, ld, forward_floats(b), 0,
			       (uint32_t)b->info->ne[0], idx, n);
	return 0;
}

/* w's vec_dot type on the context's backend */
static uint32_t forward_vdt(struct forward_pass *p,
			    const struct engine_tensor *w)
{
	return p->be->iface->vec_dot_type(p->be, w->info->type);
}

/*
 * The rows of xn in w's vec_dot type. The conversions since the last
 * norm are kept, as the one-token path converted once per run of
 * same-type matmuls (the result is the same either way).
 */
static const uint8_t *forward_xn_act(struct forward_pass *p,
				     const struct engine_tensor *w)
{
	const uint32_t vdt = forward_vdt(p, w);
	struct forward_scratch *s = p->s;
	int k, free_slot = 0;

	for (k = FORWARD_XN_SLOTS - 1; k >= 0; k--) {
		if (s->xn_type[k] == vdt)
			return s->xn_act[k];
		if (s->xn_type[k] == UINT32_MAX)
			free_slot = k;
	}
	k = free_slot;
	p->be->iface->convert_rows(p->be, vdt, s->xn, p->m->hp.n_embd,
				   p->m->hp.n_embd, s->xn_act[k], s->act_row,
				   s->xn_idx, s->xn_n);
	s->xn_type[k] = vdt;
	return s->xn_act[k];
}

/* y rows idx[] (ld floats) = w . rows idx[] of act: one matmul */
static struct engine_matmul forward_mm(struct forward_pass *p, float *y,
				       size_t ld, const struct engine_tensor *w,
				       const uint8_t *act, const uint32_t *idx,
				       uint32_t n)
{
	return (struct engine_matmul){ .w = w,
				       .y = y,
				       .y_ld = ld,
				       .y_idx = idx,
				       .act = act,
				       .act_ld = p->s->act_row,
				       .act_idx = idx,
				       .n = n };
}

/* Where each row's K and V go in its sequence's cache of layer il. */
static void forward_kv_slots(struct forward_pass *p, uint32_t il)
{
	struct forward_scratch *s = p->s;
	uint32_t j;

	for (j = 0; j < p->n; j++)
		engine_kv_slot(s->rows[j].seq, il, s->rows[j].pos, &s->kv[j]);
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
	const struct engine_backend_i *ops = p->be->iface;
	const struct engine_hparams *hp = &m->hp;
	const struct engine_layer *l = &m->layers[il];
	struct forward_scratch *s = p->s;
	const size_t nq = (size_t)hp->n_head * hp->head_dim;
	const size_t nk = (size_t)hp->n_head_kv * hp->head_dim;
	const size_t nv = (size_t)hp->n_head_kv * hp->head_dim_v;
	const size_t natt = (size_t)hp->n_head * hp->head_dim_v;
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
	};
	struct engine_matmul mm[3], wo;
	int ret;

	if ((ret = forward_wait(p, &l->wq)) ||
	    (ret = forward_wait(p, &l->wk)) || (ret = forward_wait(p, &l->wv)))
		return ret;
	/* the three projections share the converted xn of each type */
	mm[0] = forward_mm(p, s->q, nq, &l->wq, forward_xn_act(p, &l->wq),
			   s->live, p->n_live);
	mm[1] = forward_mm(p, s->k, nk, &l->wk, forward_xn_act(p, &l->wk),
			   s->all, p->n);
	mm[2] = forward_mm(p, s->v, nv, &l->wv, forward_xn_act(p, &l->wv),
			   s->all, p->n);
	ops->matmul(p->be, mm, 3);
	if ((ret = forward_bias(p, s->q, nq, &l->bq, s->live, p->n_live)) ||
	    (ret = forward_bias(p, s->k, nk, &l->bk, s->all, p->n)) ||
	    (ret = forward_bias(p, s->v, nv, &l->bv, s->all, p->n)) ||
	    (ret = forward_wait(p, &l->q_norm)) ||
	    (ret = forward_wait(p, &l->k_norm)))
		return ret;

	if (hp->qk_norm)
		ops->rms_norm_rows(p->be, s->k, s->k, nk, hp->head_dim,
				   hp->n_head_kv, forward_floats(&l->k_norm),
				   hp->rms_norm_eps, s->all, p->n);
	ops->rope_rows(p->be, s->k, nk, hp->n_head_kv, hp, s->rope, hp->n_rot,
		       s->all, p->n);
	forward_kv_slots(p, il);
	ops->kv_store_rows(p->be, s->k, nk, (uint32_t)nk, s->v, nv,
			   (uint32_t)nv, s->kv, p->n);
	if (hp->qk_norm)
		ops->rms_norm_rows(p->be, s->q, s->q, nq, hp->head_dim,
				   hp->n_head, forward_floats(&l->q_norm),
				   hp->rms_norm_eps, s->live, p->n_live);
	ops->rope_rows(p->be, s->q, nq, hp->n_head, hp, s->rope, hp->n_rot,
		       s->live, p->n_live);
	ops->attention(p->be, &att);

	if ((ret = forward_wait(p, &l->wo)))
		return ret;
	ops->convert_rows(p->be, forward_vdt(p, &l->wo), s->att, natt,
			  (uint32_t)natt, s->act, s->act_row, s->live,
			  p->n_live);
	wo = forward_mm(p, s->tmp, hp->n_embd, &l->wo, s->act, s->live,
			p->n_live);
	ops->matmul(p->be, &wo, 1);
	return forward_bias(p, s->tmp, hp->n_embd, &l->bo, s->live, p->n_live);
}

static int forward_ffn_dense(struct forward_pass *p,
			     const struct engine_layer *l)
{
	const struct engine_backend_i *ops = p->be->iface;
	const struct engine_hparams *hp = &p->m->hp;
	struct forward_scratch *s = p->s;
	struct engine_matmul mm[2], down;
	int ret;

	if ((ret = forward_wait(p, &l->ffn_up)) ||
	    (ret = forward_wait(p, &l->ffn_gate)) ||
	    (ret = forward_wait(p, &l->ffn_down)))
		return ret;
	mm[0] = forward_mm(p, s->up, hp->n_ff, &l->ffn_up,
			   forward_xn_act(p, &l->ffn_up), s->live, p->n_live);
	mm[1] = forward_mm(p, s->gate, hp->n_ff, &l->ffn_gate,
			   forward_xn_act(p, &l->ffn_gate), s->live, p->n_live);
	ops->matmul(p->be, mm, 2);
	ops->swiglu_rows(p->be, s->gate, s->up, hp->n_ff, hp->n_ff, s->live,
			 p->n_live);
	ops->convert_rows(p->be, forward_vdt(p, &l->ffn_down), s->gate,
			  hp->n_ff, hp->n_ff, s->act, s->act_row, s->live,
			  p->n_live);
	down = forward_mm(p, s->tmp, hp->n_embd, &l->ffn_down, s->act, s->live,
			  p->n_live);
	ops->matmul(p->be, &down, 1);
	return 0;
}

/*
 * Route every live row on the backend, then each expert's rows through
 * it (matmul_id: the backend groups the rows by expert), and add each
 * row's expert outputs, scaled by their weights, in its selection order.
 */
static int forward_ffn_moe(struct forward_pass *p, const struct engine_layer *l)
{
	const struct engine_backend_i *ops = p->be->iface;
	const struct engine_hparams *hp = &p->m->hp;
	struct forward_scratch *s = p->s;
	const uint32_t k = hp->n_expert_used;
	struct engine_matmul router;
	struct engine_matmul_id id = { .sel = s->exp_sel,
				       .k = k,
				       .act_ld = s->act_row,
				       .idx = s->live,
				       .n = p->n_live };
	uint32_t j, i;
	int ret;

	if ((ret = forward_wait(p, &l->ffn_gate_inp)) ||
	    (ret = forward_wait(p, &l->ffn_up_exps)) ||
	    (ret = forward_wait(p, &l->ffn_gate_exps)) ||
	    (ret = forward_wait(p, &l->ffn_down_exps)))
		return ret;
	router = forward_mm(p, s->router, hp->n_expert, &l->ffn_gate_inp,
			    forward_xn_act(p, &l->ffn_gate_inp), s->live,
			    p->n_live);
	ops->matmul(p->be, &router, 1);
	ops->moe_route_rows(p->be, hp, s->router, hp->n_expert, s->exp_sel,
			    s->exp_w, s->live, p->n_live);

	id.w = &l->ffn_up_exps;
	id.y = s->up;
	id.y_ld = hp->n_ff;
	id.act = forward_xn_act(p, &l->ffn_up_exps);
	ops->matmul_id(p->be, &id);
	id.w = &l->ffn_gate_exps;
	id.y = s->gate;
	id.act = forward_xn_act(p, &l->ffn_gate_exps);
	ops->matmul_id(p->be, &id);

	/* each live row's k expert slots */
	for (j = 0; j < p->n_live; j++)
		for (i = 0; i < k; i++)
			s->slots[j * k + i] = s->live[j] * k + i;
	ops->swiglu_rows(p->be, s->gate, s->up, hp->n_ff, hp->n_ff, s->slots,
			 p->n_live * k);
	ops->convert_rows(p->be, forward_vdt(p, &l->ffn_down_exps), s->gate,
			  hp->n_ff, hp->n_ff, s->act, s->act_row, s->slots,
			  p->n_live * k);
	id.w = &l->ffn_down_exps;
	id.y = s->exp_out;
	id.y_ld = hp->n_embd;
	id.act = s->act;
	id.act_per_slot = true;
	ops->matmul_id(p->be, &id);
	ops->moe_combine_rows(p->be, s->tmp, hp->n_embd, s->exp_out, s->exp_w,
			      k, hp->n_embd, s->live, p->n_live);
	return 0;
}

/* x += tmp for the live rows */
static void forward_residual(struct forward_pass *p)
{
	const size_t E = p->m->hp.n_embd;
	struct forward_scratch *s = p->s;

	/* x + t rounds as t + x: the backend's add is the same bits */
	p->be->iface->add_rows(p->be, s->x, E, s->tmp, E, (uint32_t)E, s->live,
			       p->n_live);
}

/*
 * The logits of the live rows: in place where the backend's memory is
 * the host's, else through the backend's buffer and copied out.
 */
static int forward_logits(struct forward_pass *p)
{
	const struct engine_model *m = p->m;
	struct engine_backend *be = p->be;
	struct forward_scratch *s = p->s;
	const uint32_t nv = m->hp.n_vocab;
	struct engine_matmul mm = forward_mm(p, NULL, nv, &m->output, s->act,
					     s->live, p->n_live);
	uint32_t j;

	/* live row j's logits: row j of the buffer, or ys[j] */
	mm.y_idx = NULL;
	if (be->is_host) {
		for (j = 0; j < p->n_live; j++)
			s->ys[j] = s->rows[s->live[j]].logits;
		mm.ys = s->ys;
		be->iface->matmul(be, &mm, 1);
		be->iface->synchronize(be);
		return 0;
	}
	if (s->logits_cap < p->n_live) {
		if (s->logits)
			be->iface->free(be, s->logits);
		s->logits_cap = 0;
		s->logits = be->iface->alloc(be, (size_t)s->cap * nv *
							 sizeof(float));
		if (!s->logits)
			return err_set(p->err, ENOMEM,
				       "out of memory for the logits on %s",
				       be->dev.name);
		s->logits_cap = s->cap;
	}
	mm.y = s->logits;
	be->iface->matmul(be, &mm, 1);
	be->iface->synchronize(be);
	for (j = 0; j < p->n_live; j++)
		be->iface->copy_out(be, s->rows[s->live[j]].logits,
				    s->logits + (size_t)j * nv,
				    nv * sizeof(float));
	return 0;
}

/*
 * The final-normed states of the live rows that want them (embeddings),
 * out of the backend's memory: copied, or added (mean pooling) through
 * the host.
 */
static int forward_embeddings(struct forward_pass *p)
{
	struct engine_backend *be = p->be;
	struct forward_scratch *s = p->s;
	const uint32_t E = p->m->hp.n_embd;
	float *sum = NULL;
	uint32_t j, e;

	for (j = 0; j < p->n_live; j++) {
		const struct forward_row *r = &s->rows[s->live[j]];
		const float *x = s->xn + (size_t)s->live[j] * E;

		if (!r->embd)
			continue;
		be->iface->synchronize(be);
		if (!r->embd_add) {
			be->iface->copy_out(be, r->embd, x, E * sizeof(*x));
			continue;
		}
		if (!sum && !(sum = malloc(E * sizeof(*sum))))
			return err_set(p->err, ENOMEM, "out of memory");
		be->iface->copy_out(be, sum, x, E * sizeof(*x));
		for (e = 0; e < E; e++)
			r->embd[e] += sum[e];
	}
	free(sum);
	return 0;
}

/* The rows s->rows[0..n) through the model; logits where wanted. */
static int forward_chunk(struct forward_pass *p)
{
	const struct engine_model *m = p->m;
	const struct engine_backend_i *ops = p->be->iface;
	const struct engine_hparams *hp = &m->hp;
	struct forward_scratch *s = p->s;
	uint32_t j, il, n_out = 0;
	int ret;

	if ((ret = forward_wait(p, &m->tok_embd)) ||
	    (ret = forward_wait(p, &m->rope_freqs)))
		return ret;
	for (j = 0; j < p->n; j++) {
		s->all[j] = j;
		s->live[j] = j;
		s->seqs[j] = s->rows[j].seq;
		s->pos[j] = s->rows[j].pos;
		s->tokens[j] = s->rows[j].token;
	}
	ops->get_rows(p->be, s->x, hp->n_embd, &m->tok_embd, s->tokens, p->n);
	ops->rope_cache(p->be, s->rope, hp->n_rot, s->pos, p->n, hp,
			forward_floats(&m->rope_freqs));
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
	if (!p->n_live) {
		ops->synchronize(p->be);
		return 0;
	}
	if ((ret = forward_norm(p, s->xn, s->x, &m->output_norm, s->live,
				p->n_live)) ||
	    (ret = forward_wait(p, &m->output)))
		return ret;
	if ((ret = forward_embeddings(p)))
		return ret;
	/* the output matrix for the rows that want logits */
	for (n_out = 0, j = 0; j < p->n_live; j++)
		if (s->rows[s->live[j]].logits)
			s->live[n_out++] = s->live[j];
	p->n_live = n_out;
	if (!n_out) {
		ops->synchronize(p->be);
		return 0;
	}
	ops->convert_rows(p->be, forward_vdt(p, &m->output), s->xn, hp->n_embd,
			  hp->n_embd, s->act, s->act_row, s->live, p->n_live);
	return forward_logits(p);
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
