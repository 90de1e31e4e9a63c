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
 * to a chunk's rows at a time) go through the model layer by layer, so
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
 * their positions, their KV slots) is the host's. A backend's failure
 * (a GPU's) comes out of its synchronize, when the pass leaves its stage
 * or reads its results: the pass fails with it and appends nothing.
 *
 * Async loading: each tensor is waited for (io_placement_wait) right
 * before its first use in a pass, so that a first pass runs layer by
 * layer behind the disk; a failed load ends the pass with its error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "kv.h"

/* Where each row's K and V go in its sequence's cache of layer il. */
static void forward_kv_slots(struct forward_pass *p, uint32_t il)
{
	struct forward_scratch *h = p->h;
	uint32_t j;

	for (j = 0; j < p->n; j++)
		engine_kv_slot(h->rows[j].seq, il, h->rows[j].pos, &h->kv[j]);
}

/* Q and K of layer il normed (qwen3) and roped, in place. */
static void forward_qk_rope(struct forward_pass *p, uint32_t il)
{
	const struct engine_backend_i *ops = p->be->iface;
	const struct engine_hparams *hp = &p->m->hp;
	const struct engine_layer *l = &p->m->layers[il];
	struct forward_buffers *s = p->s;
	struct forward_scratch *h = p->h;
	const size_t nq = (size_t)hp->n_head * hp->head_dim;
	const size_t nk = (size_t)hp->n_head_kv * hp->head_dim;

	if (hp->qk_norm)
		ops->rms_norm_rows(p->be, s->k, s->k, nk, hp->head_dim,
				   hp->n_head_kv, forward_floats(&l->k_norm),
				   hp->rms_norm_eps, h->all, p->n);
	ops->rope_rows(p->be, s->k, nk, hp->n_head_kv, hp, s->rope, hp->n_rot,
		       h->all, p->n);
	if (hp->qk_norm)
		ops->rms_norm_rows(p->be, s->q, s->q, nq, hp->head_dim,
				   hp->n_head, forward_floats(&l->q_norm),
				   hp->rms_norm_eps, h->live, p->n_live);
	ops->rope_rows(p->be, s->q, nq, hp->n_head, hp, s->rope, hp->n_rot,
		       h->live, p->n_live);
	forward_dump_layer(p, il, "q_rope", s->q, nq, nq, h->live, p->n_live,
			   1);
	forward_dump_layer(p, il, "k_rope", s->k, nk, nk, h->all, p->n, 1);
}

/*
 * Q and K of layer il normed (qwen3) and roped, K and V into the cache
 * of each row's sequence (rounded to its type, F16): one op where the
 * backend fuses them and every row is live (h->live is then h->all).
 */
static void forward_qk_rope_store(struct forward_pass *p, uint32_t il)
{
	const struct engine_backend_i *ops = p->be->iface;
	const struct engine_hparams *hp = &p->m->hp;
	const struct engine_layer *l = &p->m->layers[il];
	struct forward_buffers *s = p->s;
	struct forward_scratch *h = p->h;
	const size_t nq = (size_t)hp->n_head * hp->head_dim;
	const size_t nk = (size_t)hp->n_head_kv * hp->head_dim;
	const size_t nv = (size_t)hp->n_head_kv * hp->head_dim_v;
	const float *q_norm = hp->qk_norm ? forward_floats(&l->q_norm) : NULL;
	const float *k_norm = hp->qk_norm ? forward_floats(&l->k_norm) : NULL;

	forward_kv_slots(p, il);
	if (ops->qk_rope_store && p->n_live == p->n &&
	    (!hp->qk_norm || (q_norm && k_norm))) {
		const struct engine_qk_batch qk = {
			.hp = hp,
			.il = il,
			.n = p->n,
			.seq = h->seqs,
			.pos = h->pos,
			.slots = h->kv,
			.q = s->q,
			.k = s->k,
			.v = s->v,
			.q_ld = nq,
			.k_ld = nk,
			.v_ld = nv,
			.q_norm = q_norm,
			.k_norm = k_norm,
			.rope = s->rope,
			.rope_ld = hp->n_rot,
		};

		ops->qk_rope_store(p->be, &qk);
		/* K went into the cache only */
		forward_dump_layer(p, il, "q_rope", s->q, nq, nq, h->live,
				   p->n_live, 1);
		return;
	}
	forward_qk_rope(p, il);
	ops->kv_store_rows(p->be, s->k, nk, (uint32_t)nk, s->v, nv,
			   (uint32_t)nv, h->kv, p->n);
}

/*
 * Layer il's attention on the backend its KV cache is with, the home
 * (host) one (placement 'kv blk.N cpu', the planner's kv-in-ram: as
 * llama.cpp's --no-kv-offload, the ops that touch the cache run where it
 * is): Q and K normed and roped where the layer is (its norms' weights
 * are there), Q, K and V of the pass's rows cross to the host, K and V
 * go into the cache and the live rows attend there; their output crosses
 * back into the layer's att. (nq + nk + nv + natt) x 4 bytes a row.
 */
static int forward_attention_elsewhere(struct forward_pass *p, uint32_t il,
				       const struct engine_att_batch *att_home)
{
	const struct engine_hparams *hp = &p->m->hp;
	struct forward_buffers *home = p->s, *at = &p->h->buf[p->att_be[il]];
	struct forward_scratch *h = p->h;
	const size_t nq = (size_t)hp->n_head * hp->head_dim;
	const size_t nk = (size_t)hp->n_head_kv * hp->head_dim;
	const size_t nv = (size_t)hp->n_head_kv * hp->head_dim_v;
	const size_t natt = (size_t)hp->n_head * hp->head_dim_v;
	const size_t f = sizeof(float);
	struct engine_att_batch att = *att_home;
	struct forward_copy qkv[3];
	size_t r0, nr;
	int ret;

	/* straight into host memory: no stage */
	if (!at->be->is_host)
		return err_set(p->err, ENOTSUP,
			       "blk.%u: its KV cache is on %s, not in RAM", il,
			       at->be->dev.name);
	forward_qk_rope(p, il);
	qkv[0] = (struct forward_copy){ at->q, home->q, p->n * nq * f, NULL };
	qkv[1] = (struct forward_copy){ at->k, home->k, p->n * nk * f, NULL };
	qkv[2] = (struct forward_copy){ at->v, home->v, p->n * nv * f, NULL };
	if ((ret = forward_cross_all(p, at->be, home->be, qkv, 3)) ||
	    (ret = forward_use(p, p->att_be[il], false)))
		return ret;
	forward_kv_slots(p, il);
	p->be->iface->kv_store_rows(p->be, at->k, nk, (uint32_t)nk, at->v, nv,
				    (uint32_t)nv, h->kv, p->n);
	att.q = at->q;
	att.out = at->att;
	p->be->iface->attention(p->be, &att);
	if (p->n_live) {
		r0 = h->live[0];
		nr = h->live[p->n_live - 1] + 1 - r0;
		if ((ret = forward_cross(p, home->be, home->att + r0 * natt,
					 at->be, at->att + r0 * natt,
					 nr * natt * f, NULL)))
			return ret;
	}
	return forward_use(p, p->layer_be[il], false);
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
	struct forward_buffers *s = p->s;
	struct forward_scratch *h = p->h;
	const size_t nq = (size_t)hp->n_head * hp->head_dim;
	const size_t nk = (size_t)hp->n_head_kv * hp->head_dim;
	const size_t nv = (size_t)hp->n_head_kv * hp->head_dim_v;
	const size_t natt = (size_t)hp->n_head * hp->head_dim_v;
	const struct engine_att_batch att = {
		.hp = hp,
		.il = il,
		.n_ctx = m->info.n_ctx,
		.idx = h->live,
		.n = p->n_live,
		.seq = h->seqs,
		.pos = h->pos,
		.q = s->q,
		.q_ld = nq,
		.out = s->att,
		.out_ld = natt,
	};
	struct engine_matmul mm[3];
	int ret;

	if ((ret = forward_wait(p, &l->wq)) ||
	    (ret = forward_wait(p, &l->wk)) || (ret = forward_wait(p, &l->wv)))
		return ret;
	/* the three projections share the converted xn of each type */
	mm[0] = forward_mm(p, s->q, nq, &l->wq, forward_xn_act(p, &l->wq),
			   h->live, p->n_live);
	mm[1] = forward_mm(p, s->k, nk, &l->wk, forward_xn_act(p, &l->wk),
			   h->all, p->n);
	mm[2] = forward_mm(p, s->v, nv, &l->wv, forward_xn_act(p, &l->wv),
			   h->all, p->n);
	ops->matmul(p->be, mm, 3);
	if ((ret = forward_bias(p, s->q, nq, &l->bq, h->live, p->n_live)) ||
	    (ret = forward_bias(p, s->k, nk, &l->bk, h->all, p->n)) ||
	    (ret = forward_bias(p, s->v, nv, &l->bv, h->all, p->n)) ||
	    (ret = forward_wait(p, &l->q_norm)) ||
	    (ret = forward_wait(p, &l->k_norm)))
		return ret;
	forward_dump(p, l->wq.info->name, s->q, nq, nq, h->live, p->n_live, 1);
	forward_dump(p, l->wk.info->name, s->k, nk, nk, h->all, p->n, 1);
	forward_dump(p, l->wv.info->name, s->v, nv, nv, h->all, p->n, 1);

	if (p->att_be[il] != p->layer_be[il]) {
		if ((ret = forward_attention_elsewhere(p, il, &att)) ||
		    (ret = forward_wait(p, &l->wo)))
			return ret;
		ops->convert_rows(p->be, forward_vdt(p, &l->wo), s->att, natt,
				  (uint32_t)natt, s->act, h->act_row, h->live,
				  p->n_live);
		return forward_out(p, &l->wo, s->act, &l->bo);
	}
	forward_qk_rope_store(p, il);
	if ((ret = forward_wait(p, &l->wo)))
		return ret;
	/* wo's activations in attention's last launch where it can */
	if (ops->attention_convert) {
		ops->attention_convert(p->be, &att, forward_vdt(p, &l->wo),
				       s->act, h->act_row);
	} else {
		ops->attention(p->be, &att);
		forward_dump_layer(p, il, "att", s->att, natt, natt, h->live,
				   p->n_live, 1);
		ops->convert_rows(p->be, forward_vdt(p, &l->wo), s->att, natt,
				  (uint32_t)natt, s->act, h->act_row, h->live,
				  p->n_live);
	}
	if ((ret = forward_out(p, &l->wo, s->act, &l->bo)))
		return ret;
	forward_dump_layer(p, il, "attn_x", s->x, hp->n_embd, hp->n_embd,
			   h->live, p->n_live, 1);
	return 0;
}

/*
 * The logits of the live rows: in place where the backend's memory is
 * the host's, else through the backend's buffer and copied out.
 */
static int forward_logits(struct forward_pass *p)
{
	const struct engine_model *m = p->m;
	struct engine_backend *be = p->be;
	struct forward_buffers *s = p->s;
	struct forward_scratch *h = p->h;
	const uint32_t nv = m->hp.n_vocab;
	struct engine_matmul mm = forward_mm(p, NULL, nv, &m->output, s->act,
					     h->live, p->n_live);
	uint32_t j;
	int ret;

	/* live row j's logits: row j of the buffer, or ys[j] */
	mm.y_idx = NULL;
	if (be->is_host) {
		for (j = 0; j < p->n_live; j++)
			h->ys[j] = h->rows[h->live[j]].logits;
		mm.ys = h->ys;
		be->iface->matmul(be, &mm, 1);
		ret = forward_sync(p);
		forward_dump_logits(p, nv, h->live, p->n_live);
		return ret;
	}
	if ((ret = forward_logits_reserve(p, p->n_live)))
		return ret;
	mm.y = s->logits;
	be->iface->matmul(be, &mm, 1);
	/* one copy of every row, one wait: not a copy and a wait a row */
	be->iface->copy_out(be, s->logits_host, s->logits,
			    (size_t)p->n_live * nv * sizeof(float));
	/* a failure leaves the logits unwritten */
	if ((ret = forward_sync(p)))
		return ret;
	for (j = 0; j < p->n_live; j++)
		memcpy(h->rows[h->live[j]].logits,
		       s->logits_host + (size_t)j * nv, nv * sizeof(float));
	forward_dump_logits(p, nv, h->live, p->n_live);
	return ret;
}

/*
 * The final-normed states of the live rows that want them (embeddings),
 * out of the output stage's buffers: copied, or added (mean pooling)
 * through the host.
 */
static int forward_embeddings(struct forward_pass *p)
{
	struct engine_backend *be = p->be;
	struct forward_scratch *h = p->h;
	const uint32_t E = p->m->hp.n_embd;
	float *sum = NULL;
	uint32_t j, e;
	int ret = 0;
	bool copied = false;

	for (j = 0; j < p->n_live && !ret; j++) {
		const struct forward_row *r = &h->rows[h->live[j]];
		const float *x = p->s->xn + (size_t)h->live[j] * E;

		if (!r->embd || (ret = forward_sync(p)))
			continue;
		copied = true;
		if (!r->embd_add) {
			be->iface->copy_out(be, r->embd, x, E * sizeof(*x));
			continue;
		}
		if (!sum && !(sum = malloc(E * sizeof(*sum)))) {
			ret = err_set(p->err, ENOMEM, "out of memory");
			break;
		}
		be->iface->copy_out(be, sum, x, E * sizeof(*x));
		if ((ret = forward_sync(p)))
			break;
		for (e = 0; e < E; e++)
			r->embd[e] += sum[e];
	}
	free(sum);
	/*
	 * the last copy_out's failure too; none, no wait (a GPU's decode
	 * step, one graph up to the logits, is not cut in two)
	 */
	return ret || !copied ? ret : forward_sync(p);
}

/* The rows h->rows[0..n) through the model; logits where wanted. */
static int forward_chunk(struct forward_pass *p)
{
	const struct engine_model *m = p->m;
	const struct engine_hparams *hp = &m->hp;
	struct forward_scratch *h = p->h;
	uint32_t j, b, il, n_out = 0;
	int ret;

	if ((ret = forward_wait(p, &m->tok_embd)) ||
	    (ret = forward_wait(p, &m->rope_freqs)))
		return ret;
	for (j = 0; j < p->n; j++) {
		h->all[j] = j;
		h->live[j] = j;
		h->seqs[j] = h->rows[j].seq;
		h->pos[j] = h->rows[j].pos;
		h->tokens[j] = h->rows[j].token;
	}
	for (b = 0; b < h->n_buf; b++)
		h->buf[b].rope_ready = false;
	p->s = NULL;
	forward_dump_next();
	if ((ret = forward_use(p, p->embed_be, false)))
		return ret;
	p->be->iface->get_rows(p->be, p->s->x, hp->n_embd, &m->tok_embd,
			       h->tokens, p->n);
	forward_dump(p, m->tok_embd.info->name, p->s->x, hp->n_embd, hp->n_embd,
		     NULL, p->n, 1);
	p->n_live = p->n;

	for (il = 0; il < hp->n_layer; il++) {
		const struct engine_layer *l = &m->layers[il];
		struct forward_buffers *s;

		if ((ret = forward_use(p, p->layer_be[il], true)))
			return ret;
		s = p->s;
		/*
		 * The last layer's K and V are stored for every row; the rest
		 * of it only matters for the rows whose logits are wanted.
		 */
		if (il + 1 == hp->n_layer) {
			for (n_out = 0, j = 0; j < p->n; j++)
				if (h->rows[j].logits || h->rows[j].embd)
					h->live[n_out++] = j;
			p->n_live = n_out;
		}
		/* each block adds its output to x (forward_out) */
		if ((ret = forward_norm(p, s->xn, s->x, &l->attn_norm, h->all,
					p->n, &l->wq)) ||
		    (ret = forward_attention(p, il)) ||
		    (ret = forward_norm(
			     p, s->xn, s->x, &l->ffn_norm, h->live, p->n_live,
			     hp->n_expert ? &l->ffn_gate_inp : &l->ffn_up)))
			return ret;
		ret = hp->n_expert ? forward_ffn_moe(p, l, il) :
				     forward_ffn_dense(p, l);
		if (ret)
			return ret;
		forward_dump_layer(p, il, "ffn_x", s->x, hp->n_embd, hp->n_embd,
				   h->live, p->n_live, 1);
	}
	if (!p->n_live)
		return forward_sync(p);
	if ((ret = forward_use(p, p->output_be, true)))
		return ret;
	if ((ret = forward_norm(p, p->s->xn, p->s->x, &m->output_norm, h->live,
				p->n_live, NULL)) ||
	    (ret = forward_wait(p, &m->output)))
		return ret;
	if ((ret = forward_embeddings(p)))
		return ret;
	/* the output matrix for the rows that want logits */
	for (n_out = 0, j = 0; j < p->n_live; j++)
		if (h->rows[h->live[j]].logits)
			h->live[n_out++] = h->live[j];
	p->n_live = n_out;
	if (!n_out)
		return forward_sync(p);
	p->be->iface->convert_rows(p->be, forward_vdt(p, &m->output), p->s->xn,
				   hp->n_embd, hp->n_embd, p->s->act,
				   h->act_row, h->live, p->n_live);
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

/* The context's backend for the device t is on: -ENODEV and so on. */
static int forward_stage(struct forward_pass *p, const struct engine_tensor *t,
			 uint32_t *b)
{
	return engine_ctx_backend(p->ctx, t->place->device, b, p->err);
}

/*
 * Which backend computes each stage (the embedding, each layer, each
 * layer's experts, the output), by where its weights are (placement
 * keeps a stage's tensors on one backend), and each layer's attention
 * (the layer's, or the host's where its KV cache is in RAM); the KV
 * pool's layers follow the attention.
 */
static int forward_stages(struct forward_pass *p)
{
	const struct engine_model *m = p->m;
	uint32_t il;
	int ret;

	if ((ret = forward_stage(p, &m->tok_embd, &p->embed_be)) ||
	    (ret = forward_stage(p, &m->output_norm, &p->output_be)))
		return ret;
	for (il = 0; il < m->hp.n_layer; il++) {
		if ((ret = forward_stage(p, &m->layers[il].attn_norm,
					 &p->layer_be[il])))
			return ret;
		/* a layer's KV in RAM: its attention on the home backend */
		p->att_be[il] = p->ctx->kv_in_ram[il] ? 0 : p->layer_be[il];
		p->ctx->layer_be[il] = p->ctx->backends[p->att_be[il]];
		p->experts_be[il] = p->layer_be[il];
		if (m->hp.n_expert &&
		    (ret = forward_stage(p, &m->layers[il].ffn_up_exps,
					 &p->experts_be[il])))
			return ret;
	}
	return 0;
}

/*
 * Rows of a chunk: FORWARD_CHUNK, or more where a stage's backend asks
 * for more (batch_rows).
 */
static uint32_t forward_chunk_rows(const struct forward_pass *p)
{
	const struct engine_ctx *ctx = p->ctx;
	uint32_t il, rows = FORWARD_CHUNK, b;

	for (il = 0; il <= p->m->hp.n_layer + 1; il++) {
		b = il < p->m->hp.n_layer  ? p->layer_be[il] :
		    il == p->m->hp.n_layer ? p->embed_be :
					     p->output_be;
		if (ctx->backends[b]->batch_rows > rows)
			rows = ctx->backends[b]->batch_rows;
	}
	return rows;
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
	struct forward_pass p = { .ctx = ctx, .m = ctx->model, .err = err };
	size_t i, t, total = 0, chunk;
	int ret;

	/* all or nothing: no sequence moves if any item is bad */
	for (i = 0; i < n_items; i++) {
		if ((ret = forward_check(ctx, items, i, err)))
			return ret;
		total += items[i].n_tokens;
	}
	if (!total)
		return 0;
	p.layer_be = malloc(3 * ctx->model->hp.n_layer * sizeof(*p.layer_be));
	if (!p.layer_be)
		return err_set(err, ENOMEM, "out of memory");
	p.experts_be = p.layer_be + ctx->model->hp.n_layer;
	p.att_be = p.experts_be + ctx->model->hp.n_layer;
	if ((ret = forward_stages(&p)))
		goto out_free;
	/* the cache where its layers compute now */
	if ((ret = engine_kv_pool_follow(ctx->kv, err)))
		goto out_free;
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
			goto out_free;
		}
	}
	chunk = forward_chunk_rows(&p);
	ret = forward_reserve(ctx, total < chunk ? (uint32_t)total : chunk,
			      err);
	if (ret)
		goto out_shrink;
	p.h = ctx->fwd;
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
			struct forward_row *r = &p.h->rows[p.n++];

			r->seq = it->seq;
			r->pos = pos + (uint32_t)t;
			r->token = it->tokens[t];
			r->logits = t + 1 == it->n_tokens ? it->logits : NULL;
			forward_row_embd(r, it, t);
			if (p.n == p.h->cap) {
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
	free(p.layer_be);
	return 0;

out_shrink:
	for (i = 0; i < n_items; i++)
		engine_seq_shrink(items[i].seq);
out_free:
	free(p.layer_be);
	return ret;
}
