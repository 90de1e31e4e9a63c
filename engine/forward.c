// SPDX-License-Identifier: MIT
/*
 * The forward pass: one token at a time through the graph llama.cpp
 * builds for llama, qwen2, qwen3 and qwen3moe (src/models/<arch>.cpp,
 * src/llama-graph.cpp), every op as engine/ops.c computes it.
 *
 *   x = token_embd[token]
 *   per layer:  x += wo . attention(rope(q), rope(k), v)   of rms_norm(x)
 *               x += ffn(rms_norm(x))   (SwiGLU, or top-k of n experts)
 *   logits = output . rms_norm(x)
 *
 * A batch of several sequences is evaluated item by item and token by
 * token: that is llama.cpp's one-token path, whose logits are the
 * reference's (a multi-token kernel would round differently).
 */
#include <errno.h>
#include <string.h>

#include "kv.h"
#include "ops.h"
#include "quant.h"

/* y += b, an optional F32 bias (ggml_add) */
static void forward_add_bias(float *y, const struct engine_tensor *b)
{
	const float *bias;
	int64_t i;

	if (!engine_tensor_present(b))
		return;
	bias = (const float *)engine_tensor_data(b);
	for (i = 0; i < b->info->ne[0]; i++)
		y[i] = y[i] + bias[i];
}

/* Per-head RMS norm of n_head rows of head_dim (qwen3's Q/K norms). */
static void forward_head_norm(float *x, uint32_t n_head, uint32_t head_dim,
		const struct engine_tensor *w, float eps)
{
	const float *wd = (const float *)engine_tensor_data(w);
	uint32_t h;

	for (h = 0; h < n_head; h++)
		ops_rms_norm(x + (size_t)h * head_dim, x + (size_t)h * head_dim,
				wd, head_dim, eps);
}

/*
 * y = w . x for several weights in a row that read the same x: x is
 * converted to a vec_dot type only when the type changes (*act_type holds
 * the type s->act has x in; UINT32_MAX at the start of a run).
 */
static void forward_matvec(struct engine_model *m, float *y,
		const struct engine_tensor *w, int64_t e, const float *x,
		uint32_t *act_type)
{
	uint32_t vdt = quant_vec_dot_type(w->info->type);

	if (*act_type != vdt) {
		ops_matvec_prepare(w, x, m->s.act);
		*act_type = vdt;
	}
	ops_matvec_act(m->pool, y, w, e, m->s.act);
}

static void forward_attention(struct engine_model *m, struct engine_seq *seq,
		uint32_t il, uint32_t pos)
{
	const struct engine_hparams *hp = &m->hp;
	const struct engine_layer *l = &m->layers[il];
	struct engine_scratch *s = &m->s;
	const uint32_t group = hp->n_head / hp->n_head_kv;
	/* bytes of one cached element */
	const size_t kv_elem = seq->k_row /
		((size_t)hp->n_head_kv * hp->head_dim);
	uint32_t h, act_type = UINT32_MAX;

	/* the three projections share one converted activation per type */
	forward_matvec(m, s->q, &l->wq, 0, s->xn, &act_type);
	forward_matvec(m, s->k, &l->wk, 0, s->xn, &act_type);
	forward_matvec(m, s->v, &l->wv, 0, s->xn, &act_type);
	forward_add_bias(s->q, &l->bq);
	forward_add_bias(s->k, &l->bk);
	forward_add_bias(s->v, &l->bv);

	if (hp->qk_norm) {
		forward_head_norm(s->q, hp->n_head, hp->head_dim, &l->q_norm,
				hp->rms_norm_eps);
		forward_head_norm(s->k, hp->n_head_kv, hp->head_dim, &l->k_norm,
				hp->rms_norm_eps);
	}
	ops_rope(s->q, hp->n_head, hp->head_dim, hp->n_rot, hp->rope_mode,
			s->rope);
	ops_rope(s->k, hp->n_head_kv, hp->head_dim, hp->n_rot, hp->rope_mode,
			s->rope);

	/* the cache stores K and V rounded to its type (F16) */
	quant_from_float(m->info.kv_type, s->k, engine_seq_k(seq, il, pos),
			(int64_t)hp->n_head_kv * hp->head_dim);
	quant_from_float(m->info.kv_type, s->v, engine_seq_v(seq, il, pos),
			(int64_t)hp->n_head_kv * hp->head_dim_v);

	for (h = 0; h < hp->n_head; h++) {
		uint32_t kvh = h / group;

		ops_attention_f16(s->att + (size_t)h * hp->head_dim_v,
			s->q + (size_t)h * hp->head_dim,
			engine_seq_k(seq, il, 0) + kvh * hp->head_dim * kv_elem,
			seq->k_row,
			engine_seq_v(seq, il, 0) +
				kvh * hp->head_dim_v * kv_elem,
			seq->v_row, pos + 1, hp->head_dim, hp->head_dim_v,
			hp->kq_scale, s->qh, s->acc);
	}
	ops_matvec(m->pool, s->tmp, &l->wo, 0, s->att, s->act);
	forward_add_bias(s->tmp, &l->bo);
}

static void forward_ffn_dense(struct engine_model *m,
		const struct engine_layer *l)
{
	struct engine_scratch *s = &m->s;
	uint32_t act_type = UINT32_MAX;

	forward_matvec(m, s->up, &l->ffn_up, 0, s->xn, &act_type);
	forward_matvec(m, s->gate, &l->ffn_gate, 0, s->xn, &act_type);
	ops_swiglu(s->gate, s->gate, s->up, m->hp.n_ff);
	ops_matvec(m->pool, s->tmp, &l->ffn_down, 0, s->gate, s->act);
}

/*
 * build_moe_ffn with softmax gating: probabilities over all experts, the
 * top k (argsort, descending), their weights optionally divided by their
 * sum, each selected expert's SwiGLU FFN scaled by its weight and the
 * results added in selection order.
 */
static void forward_ffn_moe(struct engine_model *m,
		const struct engine_layer *l)
{
	const struct engine_hparams *hp = &m->hp;
	struct engine_scratch *s = &m->s;
	uint32_t sel[ENGINE_MAX_EXPERTS_USED], k = hp->n_expert_used, i, j;
	float w[ENGINE_MAX_EXPERTS_USED];
	double sum = 0.0;

	ops_matvec(m->pool, s->router, &l->ffn_gate_inp, 0, s->xn, s->act);
	ops_softmax(s->router, hp->n_expert);
	/* selection sort: highest first, the lower id on ties */
	for (i = 0; i < k; i++) {
		uint32_t best = UINT32_MAX;

		for (j = 0; j < hp->n_expert; j++) {
			uint32_t t;
			bool taken = false;

			for (t = 0; t < i; t++)
				taken |= sel[t] == j;
			if (taken)
				continue;
			if (best == UINT32_MAX ||
			    s->router[j] > s->router[best])
				best = j;
		}
		sel[i] = best;
		w[i] = s->router[best];
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
	for (i = 0; i < k; i++) {
		/* the down projection overwrites s->act: convert xn again */
		uint32_t act_type = UINT32_MAX;

		forward_matvec(m, s->up, &l->ffn_up_exps, sel[i], s->xn,
				&act_type);
		forward_matvec(m, s->gate, &l->ffn_gate_exps, sel[i], s->xn,
				&act_type);
		ops_swiglu(s->gate, s->gate, s->up, hp->n_ff);
		ops_matvec(m->pool, s->tmp, &l->ffn_down_exps, sel[i],
				s->gate, s->act);
		for (j = 0; j < hp->n_embd; j++) {
			float e = s->tmp[j] * w[i];

			s->moe[j] = i == 0 ? e : s->moe[j] + e;
		}
	}
	memcpy(s->tmp, s->moe, hp->n_embd * sizeof(float));
}

/* One token at position seq->n_past; logits if wanted. */
static void forward_token(struct engine_model *m, struct engine_seq *seq,
		int32_t token, float *logits)
{
	const struct engine_hparams *hp = &m->hp;
	struct engine_scratch *s = &m->s;
	const float *freqs = NULL;
	uint32_t pos = seq->n_past, il, i;

	ops_get_row(s->x, &m->tok_embd, token);
	if (engine_tensor_present(&m->rope_freqs))
		freqs = (const float *)engine_tensor_data(&m->rope_freqs);
	ops_rope_cache(s->rope, pos, hp->n_rot, hp->rope_freq_base,
			hp->rope_freq_scale, freqs);

	for (il = 0; il < hp->n_layer; il++) {
		const struct engine_layer *l = &m->layers[il];

		ops_rms_norm(s->xn, s->x, (const float *)engine_tensor_data(
				&l->attn_norm), hp->n_embd, hp->rms_norm_eps);
		forward_attention(m, seq, il, pos);
		for (i = 0; i < hp->n_embd; i++)
			s->x[i] = s->tmp[i] + s->x[i];

		ops_rms_norm(s->xn, s->x, (const float *)engine_tensor_data(
				&l->ffn_norm), hp->n_embd, hp->rms_norm_eps);
		if (hp->n_expert)
			forward_ffn_moe(m, l);
		else
			forward_ffn_dense(m, l);
		for (i = 0; i < hp->n_embd; i++)
			s->x[i] = s->tmp[i] + s->x[i];
	}
	seq->n_past = pos + 1;
	if (!logits)
		return;
	ops_rms_norm(s->xn, s->x, (const float *)engine_tensor_data(
			&m->output_norm), hp->n_embd, hp->rms_norm_eps);
	ops_matvec(m->pool, logits, &m->output, 0, s->xn, s->act);
}

static int forward_check(struct engine_model *m,
		const struct engine_batch_item *it, size_t idx, struct err *err)
{
	size_t i;

	if (!it->seq || it->seq->model != m)
		return err_set(err, EINVAL,
			"batch item %zu: sequence of another model", idx);
	if (it->n_tokens && !it->tokens)
		return err_set(err, EINVAL, "batch item %zu: no tokens", idx);
	if (it->n_tokens > it->seq->n_ctx - it->seq->n_past)
		return err_set(err, ENOSPC,
			"context full: %u + %zu tokens > n_ctx %u",
			it->seq->n_past, it->n_tokens, it->seq->n_ctx);
	for (i = 0; i < it->n_tokens; i++)
		if (it->tokens[i] < 0 ||
		    (uint32_t)it->tokens[i] >= m->hp.n_vocab)
			return err_set(err, EINVAL,
				"token id %d out of range (n_vocab %u)",
				it->tokens[i], m->hp.n_vocab);
	return 0;
}

int engine_forward(struct engine_model *m, struct engine_batch_item *items,
		size_t n_items, struct err *err)
{
	size_t i, t;
	int ret;

	/* all or nothing: no sequence moves if any item is bad */
	for (i = 0; i < n_items; i++)
		if ((ret = forward_check(m, &items[i], i, err)))
			return ret;
	for (i = 0; i < n_items; i++) {
		struct engine_batch_item *it = &items[i];

		for (t = 0; t < it->n_tokens; t++)
			forward_token(m, it->seq, it->tokens[t],
				t + 1 == it->n_tokens ? it->logits : NULL);
	}
	return 0;
}
