// SPDX-License-Identifier: MIT
/*
 * The forward pass's buffers (forward.h): the host's bookkeeping in one
 * allocation, and on each backend of the context its own buffers, one
 * allocation of its memory, carved as the pass uses them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"

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
static size_t forward_carve_host(struct forward_scratch *h,
				 const struct engine_hparams *hp,
				 uintptr_t base, size_t c)
{
	uintptr_t p = base;

	h->rows = forward_take(&p, c * sizeof(*h->rows));
	h->all = forward_take(&p, c * sizeof(uint32_t));
	h->live = forward_take(&p, c * sizeof(uint32_t));
	h->slots = forward_take(&p, c * h->slots_per_row * sizeof(uint32_t));
	h->pos = forward_take(&p, c * sizeof(uint32_t));
	h->tokens = forward_take(&p, c * sizeof(int32_t));
	h->seqs = forward_take(&p, c * sizeof(*h->seqs));
	h->kv = forward_take(&p, c * sizeof(*h->kv));
	h->ys = forward_take(&p, c * sizeof(*h->ys));
	h->x_host = forward_take(&p, c * hp->n_embd * sizeof(float));
	h->route_host = forward_take(&p, 2 * c * h->slots_per_row * 4);
	return (size_t)(p - base);
}

/* One backend's buffers for cap rows, from base (0: count). */
static size_t forward_carve_dev(struct forward_buffers *s,
				const struct forward_scratch *h,
				const struct engine_hparams *hp, uintptr_t base,
				size_t c)
{
	const size_t nq = (size_t)hp->n_head * hp->head_dim;
	const size_t nk = (size_t)hp->n_head_kv * hp->head_dim;
	const size_t nv = (size_t)hp->n_head_kv * hp->head_dim_v;
	const size_t natt = (size_t)hp->n_head * hp->head_dim_v;
	const size_t ku = hp->n_expert_used, E = hp->n_embd;
	const size_t k = h->slots_per_row;
	uintptr_t p = base;
	int i;

	s->x = forward_take(&p, c * E * sizeof(float));
	s->xn = forward_take(&p, c * E * sizeof(float));
	s->q = forward_take(&p, c * nq * sizeof(float));
	s->k = forward_take(&p, c * nk * sizeof(float));
	s->v = forward_take(&p, c * nv * sizeof(float));
	s->att = forward_take(&p, c * natt * sizeof(float));
	s->tmp = forward_take(&p, c * E * sizeof(float));
	s->gate = forward_take(&p, c * k * hp->n_ff * sizeof(float));
	s->up = forward_take(&p, c * k * hp->n_ff * sizeof(float));
	s->router = forward_take(&p, c * hp->n_expert * sizeof(float));
	s->rope = forward_take(&p, c * hp->n_rot * sizeof(float));
	s->expert_out = forward_take(&p, c * ku * E * sizeof(float));
	s->expert_w = forward_take(&p, c * ku * sizeof(float));
	s->expert_sel = forward_take(&p, c * ku * sizeof(uint32_t));
	for (i = 0; i < FORWARD_XN_SLOTS; i++)
		s->xn_act[i] = forward_take(&p, c * h->act_row);
	s->act = forward_take(&p, c * k * h->act_row);
	return (size_t)(p - base);
}

/* The logits' buffers of s, on its backend and on the host. */
static void forward_logits_free(struct forward_buffers *s)
{
	const struct engine_backend_i *ops = s->be->iface;

	if (s->logits)
		ops->free(s->be, s->logits);
	if (s->logits_host && ops->host_free)
		ops->host_free(s->be, s->logits_host);
	else
		free(s->logits_host);
	s->logits = s->logits_host = NULL;
	s->logits_cap = 0;
}

int forward_logits_reserve(struct forward_pass *p, uint32_t n)
{
	struct forward_buffers *s = p->s;
	struct engine_backend *be = s->be;
	const size_t row = (size_t)p->m->hp.n_vocab * sizeof(float);
	uint32_t cap = 1;

	if (s->logits_cap >= n)
		return 0;
	/*
	 * Powers of two up to the chunk's rows: a step of 16 sessions
	 * keeps 16 rows of 152k logits (9.7 MB) on each side, not a
	 * chunk's 512 (311 MB)
	 */
	while (cap < n)
		cap *= 2;
	if (cap > p->h->cap)
		cap = p->h->cap;
	forward_logits_free(s);
	s->logits = be->iface->alloc(be, cap * row);
	s->logits_host = be->iface->host_alloc ?
				 be->iface->host_alloc(be, cap * row) :
				 malloc(cap * row);
	if (!s->logits || !s->logits_host) {
		forward_logits_free(s);
		return err_set(p->err, ENOMEM,
			       "out of memory for %u rows of logits on %s", cap,
			       be->dev.name);
	}
	s->logits_cap = cap;
	return 0;
}

/* Free the buffers of h (forward_scratch) and h itself. */
static void forward_free(struct forward_scratch *h)
{
	uint32_t b;

	for (b = 0; b < h->n_buf; b++) {
		struct forward_buffers *s = &h->buf[b];

		if (s->mem)
			s->be->iface->free(s->be, s->mem);
		forward_logits_free(s);
	}
	free(h->host);
	free(h);
}

void engine_forward_release(struct engine_ctx *ctx)
{
	if (ctx->fwd)
		forward_free(ctx->fwd);
	ctx->fwd = NULL;
}

/* backend be's buffers in s, for cap rows; -ENOMEM (message) */
static int forward_buffers_new(struct forward_buffers *s,
			       const struct forward_scratch *h,
			       const struct engine_hparams *hp,
			       struct engine_backend *be, uint32_t cap,
			       struct err *err)
{
	const size_t bytes = forward_carve_dev(s, h, hp, 0, cap);
	int ret, i;

	memset(s, 0, sizeof(*s));
	s->be = be;
	if ((ret = be->iface->reserve(be, hp, cap, err)))
		return ret;
	s->mem = be->iface->alloc(be, bytes);
	if (!s->mem)
		return err_set(
			err, ENOMEM,
			"out of memory for %zu bytes of forward buffers (%u tokens) on %s",
			bytes, cap, be->dev.name);
	/* the offsets are 64-aligned; so is alloc's memory */
	forward_carve_dev(s, h, hp, (uintptr_t)s->mem, cap);
	for (i = 0; i < FORWARD_XN_SLOTS; i++)
		s->xn_type[i] = UINT32_MAX;
	return 0;
}

int forward_reserve(struct engine_ctx *ctx, uint32_t cap, struct err *err)
{
	const struct engine_hparams *hp = &ctx->model->hp;
	const size_t natt = (size_t)hp->n_head * hp->head_dim_v;
	struct forward_scratch *h = ctx->fwd;
	uint32_t b;
	int ret;

	if (h && h->cap >= cap && h->n_buf == ctx->n_backends)
		return 0;
	if (h && h->cap > cap)
		cap = h->cap;
	h = calloc(1, sizeof(*h));
	if (!h)
		return err_set(err, ENOMEM, "out of memory");
	h->slots_per_row = hp->n_expert_used ? hp->n_expert_used : 1;
	/* the widest vec_dot row: F32 is 4 bytes an element, the rest less */
	h->act_row = 4 * forward_max(forward_max(hp->n_embd, hp->n_ff), natt) +
		     64;
	h->host = malloc(forward_carve_host(h, hp, 0, cap) + 64);
	if (!h->host) {
		free(h);
		return err_set(err, ENOMEM, "out of memory");
	}
	forward_carve_host(h, hp, ((uintptr_t)h->host + 63) & ~(uintptr_t)63,
			   cap);
	h->cap = cap;
	for (b = 0; b < ctx->n_backends; b++) {
		ret = forward_buffers_new(&h->buf[b], h, hp, ctx->backends[b],
					  cap, err);
		h->n_buf = b + 1;
		if (ret) {
			forward_free(h);
			return ret;
		}
	}
	engine_forward_release(ctx);
	ctx->fwd = h;
	return 0;
}

int forward_sync(struct forward_pass *p)
{
	return p->be->iface->synchronize(p->be, p->err);
}

int forward_use(struct forward_pass *p, uint32_t b, bool copy_x)
{
	const struct engine_hparams *hp = &p->m->hp;
	struct forward_buffers *to = &p->h->buf[b];
	const size_t bytes = (size_t)p->n * hp->n_embd * sizeof(float);
	int ret;

	if (to == p->s)
		return 0;
	/* the stage left is done, and went well, before x leaves it */
	if (p->s && (ret = forward_sync(p)))
		return ret;
	if (copy_x && p->s) {
		p->be->iface->copy_out(p->be, p->h->x_host, p->s->x, bytes);
		if ((ret = forward_sync(p)))
			return ret;
		to->be->iface->copy_in(to->be, to->x, p->h->x_host, bytes);
	}
	p->s = to;
	p->be = to->be;
	if (!to->rope_ready) {
		p->be->iface->rope_cache(
			p->be, to->rope, hp->n_rot, p->h->pos, p->n, hp,
			engine_tensor_present(&p->m->rope_freqs) ?
				(const float *)engine_tensor_data(
					&p->m->rope_freqs) :
				NULL);
		to->rope_ready = true;
	}
	return 0;
}
