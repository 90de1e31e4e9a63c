// SPDX-License-Identifier: MIT
/*
 * The CUDA backend's ops on the KV cache (backend_internal.h): K and V
 * stored at their slots, attention over a sequence's blocks (with its
 * rows quantized for wo in the same launch where the module can), and
 * the fused norm, rope and store of the heads (qk_rope_store). Each op
 * sends its block tables of device addresses (the engine's KV pool keeps
 * each block of each layer apart) into the parameter area first.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"

/* ---- the KV cache ------------------------------------------------------ */

/*
 * The lists a KV op takes, for rows rows with mb blocks each: K and V
 * block addresses, then the rows' sequence slots (row j's own: j) and
 * positions, built in host memory and read by the module from dev
 * (cb_lists), bytes of them.
 */
struct cb_kv_lists {
	const uint8_t **k_blocks, **v_blocks;
	int32_t *seq_of, *pos;
	size_t bytes;
	void *host, *dev;
	struct cuda_kv *kv; /* its k_blocks, v_blocks, max_blocks */
	const int32_t *dev_seq, *dev_pos; /* dev's */
};

static int cb_kv_lists(struct engine_backend *be, uint32_t rows, uint32_t mb,
		       struct cb_kv_lists *l)
{
	const size_t nb = (size_t)rows * mb * sizeof(void *);
	uint8_t *h, *d;
	uint32_t j;

	l->bytes = 2 * nb + 2 * (size_t)rows * sizeof(int32_t);
	if (!(l->host = h = cb_lists(be, l->bytes, &l->dev)))
		return -ENOMEM;
	d = l->dev;
	l->k_blocks = (const uint8_t **)h;
	l->v_blocks = (const uint8_t **)(h + nb);
	l->seq_of = (int32_t *)(h + 2 * nb);
	l->pos = l->seq_of + rows;
	memset(h, 0, 2 * nb);
	for (j = 0; j < rows; j++)
		l->seq_of[j] = (int32_t)j;
	l->kv->k_blocks = (const uint8_t *const *)d;
	l->kv->v_blocks = (const uint8_t *const *)(d + nb);
	l->kv->max_blocks = mb;
	l->dev_seq = (const int32_t *)(d + 2 * nb);
	l->dev_pos = l->dev_seq + rows;
	return 0;
}

/* whether slots i and j have the same cache types */
static bool cb_slots_join(const void *arg, uint32_t i, uint32_t j)
{
	const struct engine_kv_slot *s = arg;

	return s[j].type_k == s[i].type_k && s[j].type_v == s[i].type_v;
}

/*
 * Each row's K and V at its slot: row j a sequence of one block that
 * starts at the slot (position 0), in runs of the same cache types.
 */
void cb_kv_store_rows(struct engine_backend *be, const float *k, size_t k_ld,
		      uint32_t k_width, const float *v, size_t v_ld,
		      uint32_t v_width, const struct engine_kv_slot *slots,
		      uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	struct cuda_kv kv = { .n_head_kv = cb->hp.n_head_kv,
			      .head_dim = cb->hp.head_dim,
			      .head_dim_v = cb->hp.head_dim_v };
	struct cb_kv_lists l = { .kv = &kv };
	struct cb_runs it = { .n = n, .joins = cb_slots_join, .arg = slots };
	struct err err = { 0 };
	uint32_t j;

	cb_graph_op(be, __func__, n, k);
	if (!n || cb_kv_lists(be, n, 1, &l))
		return;
	for (j = 0; j < n; j++) {
		l.k_blocks[j] = slots[j].k;
		l.v_blocks[j] = slots[j].v;
		l.pos[j] = 0;
	}
	if (cb_send(be, l.dev, l.host, l.bytes))
		return;
	while (cb_runs_next(be, &it)) {
		kv.type_k = slots[it.j].type_k;
		kv.type_v = slots[it.j].type_v;
		cb_check(be,
			 cb_call_kv_store(be, &kv, 0, k + (size_t)it.j * k_ld,
					  k_ld, v + (size_t)it.j * v_ld, v_ld,
					  l.dev_seq + it.j, l.dev_pos + it.j,
					  it.len, &err),
			 &err);
	}
}

/* whether rows i and j see their caches in the same types and strides */
static bool cb_views_join(const void *arg, uint32_t i, uint32_t j)
{
	const struct engine_kv_view *v = arg;

	return v[j].type_k == v[i].type_k && v[j].type_v == v[i].type_v &&
	       v[j].k_stride == v[i].k_stride && v[j].v_stride == v[i].v_stride;
}

/*
 * Whether b's rows are those of the lists qk_rope_store sent last, for
 * the same layer, and nothing was sent since: then attention reads them.
 */
static bool cb_kv_again(struct engine_backend *be,
			const struct engine_att_batch *b)
{
	const struct cuda_backend *cb = be->ctx;
	const struct cb_kv_last *k = &cb->kv_last;
	uint32_t j;

	if (!k->valid || k->il != b->il || k->n != b->n ||
	    k->seq != (const void *)b->seq || k->pos != (const void *)b->pos ||
	    k->lists_no != cb->lists_no ||
	    k->recorded != cb_graph_recording(be))
		return false;
	for (j = 0; b->idx && j < b->n; j++)
		if (b->idx[j] != j)
			return false;
	return true;
}

/*
 * Each row's lists for attention: block addresses of its sequence's
 * blocks of layer il (engine_kv_view) and its position; each row's last
 * view, its types and strides, into cb->views. Or those qk_rope_store
 * sent (cb_kv_again), every row's view k->view. 0, or the failure.
 */
static int cb_attention_lists(struct engine_backend *be,
			      const struct engine_att_batch *b,
			      struct cb_kv_lists *l, bool *again)
{
	struct cuda_backend *cb = be->ctx;
	const struct cb_kv_last *k = &cb->kv_last;
	struct engine_kv_view *views;
	struct err err = { 0 };
	uint32_t j, r, mb = 1, blk;

	if ((*again = cb_kv_again(be, b))) {
		l->kv->k_blocks = k->k_blocks;
		l->kv->v_blocks = k->v_blocks;
		l->kv->max_blocks = k->mb;
		l->dev_seq = k->dev_seq;
		l->dev_pos = k->dev_pos;
		return 0;
	}
	for (j = 0; j < b->n; j++) {
		r = cb_row(b->idx, j);
		if (b->pos[r] / CUDA_KV_BLOCK + 1 > mb)
			mb = b->pos[r] / CUDA_KV_BLOCK + 1;
	}
	/* each row's last view: its types and strides (host only) */
	if (b->n > cb->views_cap) {
		views = realloc(cb->views, (size_t)b->n * sizeof(*views));
		if (!views) {
			err_set(&err, ENOMEM, "out of memory");
			cb_check(be, -ENOMEM, &err);
			return -ENOMEM;
		}
		cb->views = views;
		cb->views_cap = b->n;
	}
	views = cb->views;
	if (cb_kv_lists(be, b->n, mb, l))
		return -ENOMEM;
	for (j = 0; j < b->n; j++) {
		r = cb_row(b->idx, j);
		l->pos[j] = (int32_t)b->pos[r];
		for (blk = 0; blk <= b->pos[r] / CUDA_KV_BLOCK; blk++) {
			engine_kv_view(b->seq[r], b->il, blk * CUDA_KV_BLOCK,
				       blk * CUDA_KV_BLOCK + 1, &views[j]);
			l->k_blocks[(size_t)j * mb + blk] = views[j].k;
			l->v_blocks[(size_t)j * mb + blk] = views[j].v;
		}
	}
	return cb_send(be, l->dev, l->host, l->bytes);
}

/*
 * Attention of each row over its sequence's blocks of layer il, by
 * address (engine_kv_view), in runs of consecutive rows of the same
 * cache types; with act, each run's rows quantized to type into act too
 * by the merge, where the module can: false where a run was not (the
 * caller converts them).
 */
static bool cb_attention_to(struct engine_backend *be,
			    const struct engine_att_batch *b, uint32_t type,
			    void *act, size_t act_ld)
{
	struct cuda_backend *cb = be->ctx;
	const struct engine_hparams *hp = b->hp;
	struct cuda_kv kv = { .n_head_kv = hp->n_head_kv,
			      .head_dim = hp->head_dim,
			      .head_dim_v = hp->head_dim_v };
	struct cb_kv_lists l = { .kv = &kv };
	struct cb_runs it = { .idx = b->idx,
			      .n = b->n,
			      .joins = cb_views_join };
	const struct engine_kv_view *view;
	struct err err = { 0 };
	bool merged = act != NULL, again;
	int ret;

	cb_graph_op(be, __func__, b->n, b->out);
	if (!b->n || cb->err.code || cb_attention_lists(be, b, &l, &again))
		return false;
	it.arg = cb->views;
	/* qk_rope_store's rows share one view: one run */
	if (again)
		it.joins = NULL;
	while (cb_runs_next(be, &it)) {
		const float *q = b->q + (size_t)it.r * b->q_ld;
		float *out = b->out + (size_t)it.r * b->out_ld;

		view = again ? &cb->kv_last.view : &cb->views[it.j];
		kv.type_k = view->type_k;
		kv.type_v = view->type_v;
		kv.k_row = view->k_stride;
		kv.v_row = view->v_stride;
		if (merged) {
			ret = cb_call_attention_quantize(
				be, &kv, b->il, q, b->q_ld, hp->n_head,
				hp->kq_scale, l.dev_seq + it.j,
				l.dev_pos + it.j, b->n_ctx, out, b->out_ld,
				type, (uint8_t *)act + (size_t)it.r * act_ld,
				act_ld, it.len, &err);
			if (ret != -ENOTSUP) {
				cb_check(be, ret, &err);
				continue;
			}
			merged = false;
		}
		cb_check(be,
			 cb_call_attention(be, &kv, b->il, q, b->q_ld,
					   hp->n_head, hp->kq_scale,
					   l.dev_seq + it.j, l.dev_pos + it.j,
					   b->n_ctx, out, b->out_ld, it.len,
					   &err),
			 &err);
	}
	return merged;
}

void cb_attention(struct engine_backend *be, const struct engine_att_batch *b)
{
	cb_attention_to(be, b, IO_TYPE_F32, NULL, 0);
}

/*
 * Attention, its rows quantized for wo by the merge's launch where they
 * are quantized at all (cb_quantizes) and the module's merge can; else
 * attention and convert_rows.
 */
void cb_attention_convert(struct engine_backend *be,
			  const struct engine_att_batch *b, uint32_t type,
			  void *act, size_t act_ld)
{
	struct cuda_backend *cb = be->ctx;
	const struct engine_hparams *hp = b->hp;
	const bool quantize = type != IO_TYPE_F32 &&
			      cb_quantizes(be, type, b->n);

	if (cb_attention_to(be, b, type, quantize ? act : NULL, act_ld)) {
		cb_act_set(cb, act, true);
		return;
	}
	cb_convert_rows(be, type, b->out, b->out_ld,
			hp->n_head * hp->head_dim_v, act, act_ld, b->idx, b->n);
}

/*
 * The heads normed and roped, K and V stored, in one launch: each row a
 * sequence of its own whose table has only the block of its position
 * (the kernel stores at the position in it and ropes with the position).
 * The separate ops where the rows' caches differ in types or strides,
 * or the module's kernel does not take them (-ENOTSUP).
 */
void cb_qk_rope_store(struct engine_backend *be,
		      const struct engine_qk_batch *b)
{
	struct cuda_backend *cb = be->ctx;
	const struct engine_hparams *hp = b->hp;
	struct cuda_kv kv = { .n_head_kv = hp->n_head_kv,
			      .head_dim = hp->head_dim,
			      .head_dim_v = hp->head_dim_v };
	const struct cuda_qk_rope q = {
		.q = b->q,
		.k = b->k,
		.v = b->v,
		.q_ld = b->q_ld,
		.k_ld = b->k_ld,
		.v_ld = b->v_ld,
		.q_norm = b->q_norm,
		.k_norm = b->k_norm,
		.eps = hp->rms_norm_eps,
		.n_head = hp->n_head,
		.n_rot = hp->n_rot,
		.mode = hp->rope_mode == ENGINE_ROPE_NEOX ? CUDA_ROPE_NEOX :
							    CUDA_ROPE_NORM,
		.freq_base = hp->rope_freq_base,
		.freq_scale = hp->rope_freq_scale,
		.freq_factors = cb->rope_ff_set ? cb->rope_ff : NULL,
	};
	struct cb_kv_lists l = { .kv = &kv };
	struct engine_kv_view view, first = { 0 };
	struct err err = { 0 };
	uint32_t j, blk, mb = 1;
	int ret;

	cb_graph_op(be, __func__, b->n, b->q);
	cb->kv_last.valid = false;
	if (!b->n || cb->err.code)
		return;
	for (j = 0; j < b->n; j++)
		if (b->pos[j] / CUDA_KV_BLOCK + 1 > mb)
			mb = b->pos[j] / CUDA_KV_BLOCK + 1;
	if (cb_kv_lists(be, b->n, mb, &l))
		return;
	/* every block, as attention's: it reads these lists again */
	for (j = 0; j < b->n; j++) {
		for (blk = 0; blk <= b->pos[j] / CUDA_KV_BLOCK; blk++) {
			engine_kv_view(b->seq[j], b->il, blk * CUDA_KV_BLOCK,
				       blk * CUDA_KV_BLOCK + 1, &view);
			l.k_blocks[(size_t)j * mb + blk] = view.k;
			l.v_blocks[(size_t)j * mb + blk] = view.v;
		}
		if (!j)
			first = view;
		if (view.type_k != first.type_k ||
		    view.type_v != first.type_v ||
		    view.k_stride != first.k_stride ||
		    view.v_stride != first.v_stride)
			goto out_apart;
		l.pos[j] = (int32_t)b->pos[j];
	}
	kv.type_k = first.type_k;
	kv.type_v = first.type_v;
	kv.k_row = first.k_stride;
	kv.v_row = first.v_stride;
	if (cb_send(be, l.dev, l.host, l.bytes))
		return;
	ret = cb_call_qk_rope_store(be, &kv, b->il, &q, l.dev_seq, l.dev_pos,
				    b->n, &err);
	if (ret != -ENOTSUP) {
		cb_check(be, ret, &err);
		cb->kv_last = (struct cb_kv_last){
			.valid = !ret,
			.recorded = cb_graph_recording(be),
			.il = b->il,
			.n = b->n,
			.mb = mb,
			.seq = b->seq,
			.pos = b->pos,
			.lists_no = cb->lists_no,
			.k_blocks = kv.k_blocks,
			.v_blocks = kv.v_blocks,
			.dev_seq = l.dev_seq,
			.dev_pos = l.dev_pos,
			.view = first,
		};
		return;
	}
out_apart:
	if (b->k_norm)
		cb_rms_norm_rows(be, b->k, b->k, b->k_ld, hp->head_dim,
				 hp->n_head_kv, b->k_norm, hp->rms_norm_eps,
				 NULL, b->n);
	cb_rope_rows(be, b->k, b->k_ld, hp->n_head_kv, hp, b->rope, b->rope_ld,
		     NULL, b->n);
	cb_kv_store_rows(be, b->k, b->k_ld, (uint32_t)b->k_ld, b->v, b->v_ld,
			 (uint32_t)b->v_ld, b->slots, b->n);
	if (b->q_norm)
		cb_rms_norm_rows(be, b->q, b->q, b->q_ld, hp->head_dim,
				 hp->n_head, b->q_norm, hp->rms_norm_eps, NULL,
				 b->n);
	cb_rope_rows(be, b->q, b->q_ld, hp->n_head, hp, b->rope, b->rope_ld,
		     NULL, b->n);
}
