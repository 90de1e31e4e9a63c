// SPDX-License-Identifier: MIT
/*
 * The reference backend's attention: each (row, head) as
 * ggml_compute_forward_flash_attn_ext_f16_one_chunk computes it for
 * llama.cpp's one-token path, in scalar C. Q converted to K's vec_dot
 * type, each cached K row dotted with it by K's dot (the type table's
 * vec_dot: the reference build's order), scaled; an online softmax with
 * libm's expf; V accumulated in an F16 vector for an F16 cache (one FMA
 * and a rounding to F16 per element and step), in F32 otherwise. A row
 * over more than ENGINE_ATT_CHUNK positions is walked in chunks of that
 * many, each from a fresh state, and their partials merged in order as
 * ggml_flash_attn_ext_reduce_partials merges llama.cpp's: the order the
 * CPU backend shares (engine/attention_order.h), whatever its thread
 * count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../attention_order.h"
#include "../kv.h"
#include "../quant/quant.h"
#include "ref.h"

#ifdef __clang__
#pragma clang fp contract(off)
#endif

/* The running state of one head over a range of positions. */
struct ref_att {
	uint32_t type_k, type_v, dk, dv;
	enum quant_kv_elem v_elem;
	float scale, M, S;
	uint8_t *q;	 /* Q in K's vec_dot type */
	uint16_t *acc16; /* F16 V */
	float *acc32;	 /* other V types */
	float *v32;	 /* one V row as floats */
};

/* floats of work memory for one head: Q (as F32, the widest), accumulators */
static size_t ref_att_head_floats(const struct engine_hparams *hp)
{
	return (size_t)hp->head_dim + 16 + 3 * (size_t)hp->head_dim_v;
}

size_t ref_attention_floats(const struct engine_hparams *hp, uint32_t cap,
			    uint32_t threads)
{
	/* one head at a time: its state and its chunk's result */
	(void)cap;
	(void)threads;
	return ref_att_head_floats(hp) + hp->head_dim_v;
}

static void ref_att_begin(struct ref_att *st, const struct engine_hparams *hp,
			  uint32_t type_k, uint32_t type_v, const float *q,
			  float *work)
{
	st->type_k = type_k;
	st->type_v = type_v;
	st->dk = hp->head_dim;
	st->dv = hp->head_dim_v;
	st->v_elem = quant_traits(type_v)->kv_elem;
	st->scale = hp->kq_scale;
	st->M = -INFINITY;
	st->S = 0.0f;
	st->q = (uint8_t *)work;
	st->acc32 = work + hp->head_dim + 16;
	st->acc16 = (uint16_t *)st->acc32;
	st->v32 = st->acc32 + hp->head_dim_v;
	memset(st->acc32, 0, st->dv * sizeof(float));
	quant_from_float(quant_vec_dot_type(type_k), q, st->q, st->dk);
}

/* One position: s = K.Q scaled, then the online softmax step. */
static void ref_att_step(struct ref_att *st, const uint8_t *k, const uint8_t *v)
{
	float s, ms = 1.0f, vs = 1.0f;
	uint32_t i;

	s = quant_traits(st->type_k)->vec_dot(st->dk, k, st->q);
	s = s * st->scale;
	s += 0.0f; /* the mask of a visible position */
	if (s > st->M) {
		float mold = st->M;

		st->M = s;
		ms = expf(mold - st->M);
		if (st->v_elem == QUANT_KV_F16)
			for (i = 0; i < st->dv; i++)
				st->acc16[i] = quant_fp32_to_fp16(
					quant_fp16_to_fp32(st->acc16[i]) * ms);
		else
			for (i = 0; i < st->dv; i++)
				st->acc32[i] = st->acc32[i] * ms;
	} else {
		vs = expf(s - st->M);
	}
	if (st->v_elem == QUANT_KV_F16) {
		const uint16_t *vh = (const uint16_t *)v;

		for (i = 0; i < st->dv; i++)
			st->acc16[i] = quant_fp32_to_fp16(
				fmaf(quant_fp16_to_fp32(vh[i]), vs,
				     quant_fp16_to_fp32(st->acc16[i])));
	} else {
		quant_to_float(st->type_v, v, st->v32, st->dv);
		for (i = 0; i < st->dv; i++)
			st->acc32[i] = fmaf(st->v32[i], vs, st->acc32[i]);
	}
	st->S = st->S * ms + vs;
}

/* Positions [c0, c1) of KV head kvh of layer il. */
static void ref_att_range(struct ref_att *st, const struct engine_seq *seq,
			  uint32_t il, uint32_t kvh, uint32_t c0, uint32_t c1)
{
	struct engine_kv_view v;
	uint32_t c, i;

	for (c = c0; c < c1; c += v.n) {
		engine_kv_view(seq, il, c, c1, &v);
		for (i = 0; i < v.n; i++)
			ref_att_step(st, v.k + kvh * v.k_head + i * v.k_stride,
				     v.v + kvh * v.v_head + i * v.v_stride);
	}
}

/* The unnormalized result in floats (head_dim_v). */
static void ref_att_vkq(const struct ref_att *st, float *vkq)
{
	uint32_t i;

	for (i = 0; i < st->dv; i++)
		vkq[i] = st->v_elem == QUANT_KV_F16 ?
				 quant_fp16_to_fp32(st->acc16[i]) :
				 st->acc32[i];
}

/* Head h of row b: one walk, or its chunks walked and merged in order. */
static void ref_att_head(struct engine_backend *be,
			 const struct engine_att_batch *ab, uint32_t b,
			 uint32_t h)
{
	const struct ref_backend *rb = be->ctx;
	const struct engine_hparams *hp = ab->hp;
	const struct engine_seq *seq = ab->seq[b];
	const uint32_t pos = ab->pos[b];
	const uint32_t kvh = h / (hp->n_head / hp->n_head_kv);
	const float *q = ab->q + (size_t)b * ab->q_ld +
			 (size_t)h * hp->head_dim;
	float *out = ab->out + (size_t)b * ab->out_ld +
		     (size_t)h * hp->head_dim_v;
	float *vkq = rb->vkq + ref_att_head_floats(hp);
	float M = -INFINITY, S = 0.0f;
	uint32_t type_k, type_v, c0, c1, d;
	struct ref_att st;

	engine_seq_types(seq, &type_k, &type_v);
	if (pos + 1 <= ENGINE_ATT_CHUNK) {
		ref_att_begin(&st, hp, type_k, type_v, q, rb->vkq);
		ref_att_range(&st, seq, ab->il, kvh, 0, pos + 1);
		ref_att_vkq(&st, out);
		for (d = 0; d < hp->head_dim_v; d++)
			out[d] = out[d] * (st.S == 0.0f ? 0.0f : 1.0f / st.S);
		return;
	}
	memset(out, 0, hp->head_dim_v * sizeof(*out));
	for (c0 = 0; c0 < pos + 1; c0 += ENGINE_ATT_CHUNK) {
		c1 = c0 + ENGINE_ATT_CHUNK < pos + 1 ? c0 + ENGINE_ATT_CHUNK :
						       pos + 1;
		ref_att_begin(&st, hp, type_k, type_v, q, rb->vkq);
		ref_att_range(&st, seq, ab->il, kvh, c0, c1);
		ref_att_vkq(&st, vkq);
		engine_att_merge_step(out, &M, &S, st.M, st.S, vkq,
				      hp->head_dim_v);
	}
	if (S != 0.0f)
		for (d = 0; d < hp->head_dim_v; d++)
			out[d] = out[d] * (1.0f / S);
}

void ref_attention(struct engine_backend *be, const struct engine_att_batch *ab)
{
	uint32_t j, h;

	for (j = 0; j < ab->n; j++)
		for (h = 0; h < ab->hp->n_head; h++)
			ref_att_head(be, ab, ab->idx[j], h);
}
