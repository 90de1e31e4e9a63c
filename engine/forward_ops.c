// SPDX-License-Identifier: MIT
/*
 * The forward pass's steps that every block uses (forward.h): waiting
 * for a weight, norms, the converted activations, the products and the
 * residual add, each one backend op or two; the crossing of a stage's
 * bytes between backends.
 */
#include "forward.h"

int forward_wait(struct forward_pass *p, const struct engine_tensor *t)
{
	uint32_t b;
	int ret;

	if (!engine_tensor_present(t))
		return 0;
	ret = io_placement_wait(t->place);
	if (ret == 0) {
		/*
		 * an asynchronous load's tensors are packed as they arrive
		 * by the model's packer (model_pack.c); one it has not
		 * reached yet here, by the backend of its device (made by
		 * forward_stages)
		 */
		if (p->m->packer &&
		    !engine_ctx_backend(p->ctx, t->place->device, &b, NULL))
			engine_model_pack_one(p->ctx->model,
					      p->ctx->backends[b], t);
		return 0;
	}
	if (io_weights_wait(p->m->weights, p->err) >= 0)
		err_set(p->err, -ret, "%s: loading tensor '%s' failed",
			p->m->path, t->info->name);
	return ret;
}

const float *forward_floats(const struct engine_tensor *t)
{
	return engine_tensor_present(t) ? (const float *)engine_tensor_data(t) :
					  NULL;
}

uint32_t forward_vdt(struct forward_pass *p, const struct engine_tensor *w)
{
	return p->be->iface->vec_dot_type(p->be, w->info->type);
}

int forward_norm(struct forward_pass *p, float *y, const float *x,
		 const struct engine_tensor *w, const uint32_t *idx, uint32_t n,
		 const struct engine_tensor *next)
{
	const struct engine_hparams *hp = &p->m->hp;
	const struct engine_backend_i *ops = p->be->iface;
	struct forward_buffers *s = p->s;
	int ret, k;

	if ((ret = forward_wait(p, w)))
		return ret;
	if (y == s->xn && next && ops->rms_norm_convert_rows) {
		ops->rms_norm_convert_rows(p->be, y, x, hp->n_embd, hp->n_embd,
					   forward_floats(w), hp->rms_norm_eps,
					   forward_vdt(p, next), s->xn_act[0],
					   p->h->act_row, idx, n);
	} else {
		ops->rms_norm_rows(p->be, y, x, hp->n_embd, hp->n_embd, 1,
				   forward_floats(w), hp->rms_norm_eps, idx, n);
		next = NULL;
	}
	forward_dump(p, w->info->name, y, hp->n_embd, hp->n_embd, idx, n, 1);
	/* xn changed: its conversions are stale, but next's */
	if (y == s->xn) {
		for (k = 0; k < FORWARD_XN_SLOTS; k++)
			s->xn_type[k] = UINT32_MAX;
		if (next)
			s->xn_type[0] = forward_vdt(p, next);
		s->xn_idx = idx;
		s->xn_n = n;
	}
	return 0;
}

int forward_bias(struct forward_pass *p, float *y, size_t ld,
		 const struct engine_tensor *b, const uint32_t *idx, uint32_t n)
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

const uint8_t *forward_xn_act(struct forward_pass *p,
			      const struct engine_tensor *w)
{
	const uint32_t vdt = forward_vdt(p, w);
	struct forward_buffers *s = p->s;
	struct forward_scratch *h = p->h;
	int k, free_slot = 0;

	for (k = FORWARD_XN_SLOTS - 1; k >= 0; k--) {
		if (s->xn_type[k] == vdt)
			return s->xn_act[k];
		if (s->xn_type[k] == UINT32_MAX)
			free_slot = k;
	}
	k = free_slot;
	p->be->iface->convert_rows(p->be, vdt, s->xn, p->m->hp.n_embd,
				   p->m->hp.n_embd, s->xn_act[k], h->act_row,
				   s->xn_idx, s->xn_n);
	s->xn_type[k] = vdt;
	return s->xn_act[k];
}

struct engine_matmul forward_mm(struct forward_pass *p, float *y, size_t ld,
				const struct engine_tensor *w,
				const uint8_t *act, const uint32_t *idx,
				uint32_t n)
{
	return (struct engine_matmul){ .w = w,
				       .y = y,
				       .y_ld = ld,
				       .y_idx = idx,
				       .act = act,
				       .act_ld = p->h->act_row,
				       .act_idx = idx,
				       .n = n };
}

void forward_residual(struct forward_pass *p)
{
	const size_t E = p->m->hp.n_embd;
	struct forward_buffers *s = p->s;
	struct forward_scratch *h = p->h;

	/* x + t rounds as t + x: the backend's add is the same bits */
	p->be->iface->add_rows(p->be, s->x, E, s->tmp, E, (uint32_t)E, h->live,
			       p->n_live);
}

int forward_out(struct forward_pass *p, const struct engine_tensor *w,
		const uint8_t *act, const struct engine_tensor *b)
{
	const size_t E = p->m->hp.n_embd;
	const struct engine_backend_i *ops = p->be->iface;
	struct forward_buffers *s = p->s;
	struct forward_scratch *h = p->h;
	const bool bias = b && engine_tensor_present(b);
	struct engine_matmul mm;
	int ret;

	if (ops->matmul_add && !bias) {
		mm = forward_mm(p, s->x, E, w, act, h->live, p->n_live);
		ops->matmul_add(p->be, &mm);
		return 0;
	}
	mm = forward_mm(p, s->tmp, E, w, act, h->live, p->n_live);
	ops->matmul(p->be, &mm, 1);
	forward_dump(p, w->info->name, s->tmp, E, (uint32_t)E, h->live,
		     p->n_live, 1);
	if (bias && (ret = forward_bias(p, s->tmp, E, b, h->live, p->n_live)))
		return ret;
	forward_residual(p);
	return 0;
}

int forward_cross_all(struct forward_pass *p, struct engine_backend *to,
		      struct engine_backend *from,
		      const struct forward_copy *copies, int n)
{
	int ret, i;

	if ((ret = from->iface->synchronize(from, p->err)))
		return ret;
	if (from->is_host) {
		for (i = 0; i < n; i++)
			to->iface->copy_in(to, copies[i].dst, copies[i].src,
					   copies[i].bytes);
		return 0;
	}
	for (i = 0; i < n; i++)
		from->iface->copy_out(
			from, to->is_host ? copies[i].dst : copies[i].stage,
			copies[i].src, copies[i].bytes);
	if ((ret = from->iface->synchronize(from, p->err)) || to->is_host)
		return ret;
	for (i = 0; i < n; i++)
		to->iface->copy_in(to, copies[i].dst, copies[i].stage,
				   copies[i].bytes);
	return 0;
}

int forward_cross(struct forward_pass *p, struct engine_backend *to, void *dst,
		  struct engine_backend *from, const void *src, size_t bytes,
		  void *stage)
{
	const struct forward_copy c = { dst, src, bytes, stage };

	return forward_cross_all(p, to, from, &c, 1);
}
