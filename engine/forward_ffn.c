// SPDX-License-Identifier: MIT
/*
 * The feed-forward half of a layer (forward.h): SwiGLU of a dense model,
 * or a MoE's routing and experts, the experts on another backend where
 * placement put them elsewhere (llama.cpp's --cpu-moe).
 */
#include <stdlib.h>

#include "forward.h"

int forward_ffn_dense(struct forward_pass *p, const struct engine_layer *l)
{
	const struct engine_backend_i *ops = p->be->iface;
	const struct engine_hparams *hp = &p->m->hp;
	struct forward_buffers *s = p->s;
	struct forward_scratch *h = p->h;
	struct engine_matmul mm[2];
	int ret;

	if ((ret = forward_wait(p, &l->ffn_up)) ||
	    (ret = forward_wait(p, &l->ffn_gate)) ||
	    (ret = forward_wait(p, &l->ffn_down)))
		return ret;
	mm[0] = forward_mm(p, s->up, hp->n_ff, &l->ffn_up,
			   forward_xn_act(p, &l->ffn_up), h->live, p->n_live);
	mm[1] = forward_mm(p, s->gate, hp->n_ff, &l->ffn_gate,
			   forward_xn_act(p, &l->ffn_gate), h->live, p->n_live);
	if (ops->matmul_swiglu) {
		ops->matmul_swiglu(p->be, &mm[1], &mm[0]);
	} else {
		ops->matmul(p->be, mm, 2);
		forward_dump(p, l->ffn_up.info->name, s->up, hp->n_ff, hp->n_ff,
			     h->live, p->n_live, 1);
		forward_dump(p, l->ffn_gate.info->name, s->gate, hp->n_ff,
			     hp->n_ff, h->live, p->n_live, 1);
		ops->swiglu_rows(p->be, s->gate, s->up, hp->n_ff, hp->n_ff,
				 h->live, p->n_live);
	}
	forward_dump(p, "swiglu", s->gate, hp->n_ff, hp->n_ff, h->live,
		     p->n_live, 1);
	ops->convert_rows(p->be, forward_vdt(p, &l->ffn_down), s->gate,
			  hp->n_ff, hp->n_ff, s->act, h->act_row, h->live,
			  p->n_live);
	return forward_out(p, &l->ffn_down, s->act, NULL);
}

/*
 * Route every live row on the layer's backend: the router's logits,
 * softmax, top k, into expert_sel and expert_w.
 */
static int forward_moe_route(struct forward_pass *p,
			     const struct engine_layer *l)
{
	const struct engine_hparams *hp = &p->m->hp;
	struct forward_buffers *s = p->s;
	struct engine_matmul router;
	int ret;

	if ((ret = forward_wait(p, &l->ffn_gate_inp)))
		return ret;
	router = forward_mm(p, s->router, hp->n_expert, &l->ffn_gate_inp,
			    forward_xn_act(p, &l->ffn_gate_inp), p->h->live,
			    p->n_live);
	p->be->iface->matmul(p->be, &router, 1);
	forward_dump(p, l->ffn_gate_inp.info->name, s->router, hp->n_expert,
		     hp->n_expert, p->h->live, p->n_live, 1);
	p->be->iface->moe_route_rows(p->be, hp, s->router, hp->n_expert,
				     s->expert_sel, s->expert_w, p->h->live,
				     p->n_live);
	forward_dump(p, "expert_w", s->expert_w, hp->n_expert_used,
		     hp->n_expert_used, p->h->live, p->n_live, 1);
	return 0;
}

/*
 * Each routed row through its experts (matmul_id: the backend groups the
 * rows by expert), and each row's expert outputs added up into tmp,
 * scaled by their weights, in its selection order; on p->s, which holds
 * xn and the routing.
 */
static int forward_moe_experts(struct forward_pass *p,
			       const struct engine_layer *l)
{
	const struct engine_backend_i *ops = p->be->iface;
	const struct engine_hparams *hp = &p->m->hp;
	struct forward_buffers *s = p->s;
	struct forward_scratch *h = p->h;
	const uint32_t k = hp->n_expert_used;
	struct engine_matmul_id id = { .sel = s->expert_sel,
				       .k = k,
				       .act_ld = h->act_row,
				       .idx = h->live,
				       .n = p->n_live };
	uint32_t j, i;
	int ret;

	if ((ret = forward_wait(p, &l->ffn_up_exps)) ||
	    (ret = forward_wait(p, &l->ffn_gate_exps)) ||
	    (ret = forward_wait(p, &l->ffn_down_exps)))
		return ret;
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
			h->slots[j * k + i] = h->live[j] * k + i;
	forward_dump(p, l->ffn_up_exps.info->name, s->up, hp->n_ff, hp->n_ff,
		     h->slots, p->n_live * k, k);
	forward_dump(p, l->ffn_gate_exps.info->name, s->gate, hp->n_ff,
		     hp->n_ff, h->slots, p->n_live * k, k);
	ops->swiglu_rows(p->be, s->gate, s->up, hp->n_ff, hp->n_ff, h->slots,
			 p->n_live * k);
	forward_dump(p, "swiglu", s->gate, hp->n_ff, hp->n_ff, h->slots,
		     p->n_live * k, k);
	ops->convert_rows(p->be, forward_vdt(p, &l->ffn_down_exps), s->gate,
			  hp->n_ff, hp->n_ff, s->act, h->act_row, h->slots,
			  p->n_live * k);
	id.w = &l->ffn_down_exps;
	id.y = s->expert_out;
	id.y_ld = hp->n_embd;
	id.act = s->act;
	id.act_per_slot = true;
	ops->matmul_id(p->be, &id);
	forward_dump(p, l->ffn_down_exps.info->name, s->expert_out, hp->n_embd,
		     hp->n_embd, h->slots, p->n_live * k, k);
	ops->moe_combine_rows(p->be, s->tmp, hp->n_embd, s->expert_out,
			      s->expert_w, k, hp->n_embd, h->live, p->n_live);
	forward_dump(p, "moe_combine", s->tmp, hp->n_embd, hp->n_embd, h->live,
		     p->n_live, 1);
	return 0;
}

/*
 * The layer's experts on backend ex (placement 'experts cpu', the rest
 * of the layer on a GPU: llama.cpp's --cpu-moe): the live rows' normed
 * input, experts and weights cross to ex, the experts compute there,
 * and their combined output crosses back into the layer's tmp. Rows r0
 * .. r0 + nr cross, the span of the live rows (all of the pass's but
 * in the last layer): (2 n_embd + 2 k) x 4 bytes a row.
 */
static int forward_moe_elsewhere(struct forward_pass *p,
				 const struct engine_layer *l,
				 struct forward_buffers *ex)
{
	struct forward_buffers *home = p->s;
	struct forward_scratch *h = p->h;
	const size_t E = p->m->hp.n_embd, k = p->m->hp.n_expert_used;
	uint32_t *sel_stage = h->route_host;
	float *w_stage = (float *)(sel_stage + (size_t)h->cap * k);
	struct forward_copy in[3];
	size_t r0, nr;
	int ret, i;

	if (!p->n_live)
		return 0;
	r0 = h->live[0];
	nr = h->live[p->n_live - 1] + 1 - r0;
	/* one crossing for the three: one round trip, not three */
	in[0] = (struct forward_copy){ ex->xn + r0 * E, home->xn + r0 * E,
				       nr * E * sizeof(float), h->x_host };
	in[1] = (struct forward_copy){ ex->expert_sel + r0 * k,
				       home->expert_sel + r0 * k,
				       nr * k * sizeof(uint32_t), sel_stage };
	in[2] = (struct forward_copy){ ex->expert_w + r0 * k,
				       home->expert_w + r0 * k,
				       nr * k * sizeof(float), w_stage };
	if ((ret = forward_cross_all(p, ex->be, home->be, in, 3)))
		return ret;
	/* ex's xn is new: its conversions are stale */
	for (i = 0; i < FORWARD_XN_SLOTS; i++)
		ex->xn_type[i] = UINT32_MAX;
	ex->xn_idx = h->live;
	ex->xn_n = p->n_live;
	p->s = ex;
	p->be = ex->be;
	ret = forward_moe_experts(p, l);
	p->s = home;
	p->be = home->be;
	if (ret)
		return ret;
	/* ex's failure, if any, comes out of this crossing's synchronize */
	return forward_cross(p, home->be, home->tmp + r0 * E, ex->be,
			     ex->tmp + r0 * E, nr * E * sizeof(float),
			     h->x_host);
}

int forward_ffn_moe(struct forward_pass *p, const struct engine_layer *l,
		    uint32_t il)
{
	int ret;

	if ((ret = forward_moe_route(p, l)))
		return ret;
	ret = p->experts_be[il] == p->layer_be[il] ?
		      forward_moe_experts(p, l) :
		      forward_moe_elsewhere(p, l,
					    &p->h->buf[p->experts_be[il]]);
	if (ret)
		return ret;
	/* x += tmp, where the layer is */
	forward_residual(p);
	return 0;
}
