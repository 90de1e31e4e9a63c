// SPDX-License-Identifier: MIT
/*
 * A context (context.h): the backend that computes a model's forward
 * pass, for the device its weights were loaded on (the registry,
 * backend.c), and the KV cache's pool with the K/V types asked for. The
 * forward pass's scratch comes with the first pass (forward.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "context.h"
#include "kv.h"
#include "quant/quant.h"

/* The pool and the K/V types the options ask for. */
static int context_kv_init(struct engine_ctx *ctx,
			   const struct engine_ctx_options *opt,
			   struct err *err)
{
	uint32_t tk = IO_TYPE_F16, tv = IO_TYPE_F16;
	int ret;

	if ((ret = engine_kv_pool_new(&ctx->kv, ctx->model, ctx->layer_be,
				      ctx->kv_node, opt->kv_mem, opt->budget,
				      err)))
		return ret;
	if (opt->kv_type_k && engine_kv_type_parse(opt->kv_type_k, &tk))
		return err_set(
			err, EINVAL,
			"K cache type '%s': one of f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1",
			opt->kv_type_k);
	if (opt->kv_type_v && engine_kv_type_parse(opt->kv_type_v, &tv))
		return err_set(
			err, EINVAL,
			"V cache type '%s': one of f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1",
			opt->kv_type_v);
	return engine_ctx_set_kv_types(ctx, tk, tv, err);
}

/* The first view the backend cannot compute with, asked per view. */
struct context_check {
	struct engine_ctx *ctx;
	const struct engine_tensor *bad;
};

/* Matmul weights (every view of more than one row), the embedding's rows. */
static void context_check_view(void *arg, struct engine_tensor *t)
{
	struct context_check *c = arg;
	struct engine_backend *be = c->ctx->backend;

	if (!t->info || t->info->ne[1] <= 1 || c->bad)
		return;
	if (!be->iface->supports(be, ENGINE_OP_MATMUL, t->info->type) ||
	    (t == &c->ctx->model->tok_embd &&
	     !be->iface->supports(be, ENGINE_OP_GET_ROWS, t->info->type)))
		c->bad = t;
}

/* -ENOTSUP (naming the tensor) unless the backend computes every view. */
static int context_check(struct engine_ctx *ctx, struct err *err)
{
	struct context_check c = { ctx, NULL };

	engine_model_each_view(ctx->model, context_check_view, &c);
	if (!c.bad)
		return 0;
	return err_set(
		err, ENOTSUP,
		"%s: tensor '%s' (%s): the %s backend does not compute with its type",
		ctx->model->path, c.bad->info->name,
		quant_type_name(c.bad->info->type), ctx->backend->iface->name);
}

int engine_ctx_new(struct engine_ctx **out, struct engine_model *m,
		   const struct engine_ctx_options *opt, struct err *err)
{
	static const struct engine_ctx_options defaults;
	struct engine_ctx *ctx;
	int ret;

	*out = NULL;
	if (!opt)
		opt = &defaults;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return err_set(err, ENOMEM, "out of memory");
	ctx->model = m;
	ctx->batch_exact = opt->batch_exact;
	ret = engine_backend_new(&ctx->backend, io_weights_home(m->weights),
				 opt->threads, err);
	if (ret)
		goto out_free;
	ctx->backend->batch_exact = opt->batch_exact;
	ctx->backends[ctx->n_backends++] = ctx->backend;
	ctx->layer_be = calloc(m->hp.n_layer, sizeof(*ctx->layer_be));
	ctx->kv_in_ram = calloc(m->hp.n_layer + 1, sizeof(*ctx->kv_in_ram));
	ctx->kv_node = calloc(m->hp.n_layer + 1, sizeof(*ctx->kv_node));
	if (!ctx->layer_be || !ctx->kv_in_ram || !ctx->kv_node) {
		ret = err_set(err, ENOMEM, "out of memory");
		goto out_free;
	}
	for (uint32_t il = 0; il < m->hp.n_layer; il++) {
		ctx->layer_be[il] = ctx->backend;
		ctx->kv_node[il] = -1;
	}
	if ((ret = context_check(ctx, err)) ||
	    (ret = context_kv_init(ctx, opt, err)))
		goto out_free;
	*out = ctx;
	return 0;

out_free:
	engine_ctx_free(ctx);
	return ret;
}

void engine_ctx_free(struct engine_ctx *ctx)
{
	if (!ctx)
		return;
	uint32_t i;

	/* the scratch is in the backends' memory */
	engine_forward_release(ctx);
	engine_kv_pool_free(ctx->kv);
	for (i = 0; i < ctx->n_backends; i++)
		engine_backend_free(ctx->backends[i]);
	free(ctx->layer_be);
	free(ctx->kv_in_ram);
	free(ctx->kv_node);
	free(ctx);
}

int engine_ctx_backend(struct engine_ctx *ctx, const char *device,
		       uint32_t *index, struct err *err)
{
	struct engine_backend *be;
	uint32_t i;
	int ret;

	if (engine_backend_device_is_host(device)) {
		*index = 0;
		return 0;
	}
	for (i = 1; i < ctx->n_backends; i++) {
		if (!strcmp(ctx->backends[i]->dev.name, device)) {
			*index = i;
			return 0;
		}
	}
	if (ctx->n_backends == ENGINE_CTX_BACKENDS)
		return err_set(err, ENOSPC,
			       "%s: a context computes on %d devices at most",
			       device, ENGINE_CTX_BACKENDS);
	/* the home backend's thread count */
	ret = engine_backend_new(&be, device, ctx->backend->threads, err);
	if (ret)
		return ret;
	be->batch_exact = ctx->batch_exact;
	*index = ctx->n_backends;
	ctx->backends[ctx->n_backends++] = be;
	return 0;
}

struct engine_model *engine_ctx_model(const struct engine_ctx *ctx)
{
	return ctx->model;
}

uint32_t engine_ctx_n_ctx(const struct engine_ctx *ctx)
{
	const uint32_t n_ctx = ctx->model->info.n_ctx;

	return ctx->n_ctx_max && ctx->n_ctx_max < n_ctx ? ctx->n_ctx_max :
							  n_ctx;
}

/* ---- the KV cache's pool, kv.c's ---------------------------------------- */

int engine_ctx_set_kv_types(struct engine_ctx *ctx, uint32_t type_k,
			    uint32_t type_v, struct err *err)
{
	struct engine_backend *be = ctx->backend;

	/* (types that are no cache's at all: the pool's message) */
	if (engine_kv_type_name(type_k) && engine_kv_type_name(type_v) &&
	    (!be->iface->supports(be, ENGINE_OP_ATTENTION, type_k) ||
	     !be->iface->supports(be, ENGINE_OP_ATTENTION, type_v)))
		return err_set(
			err, EINVAL,
			"KV cache types %s/%s: the %s backend does not attend over them",
			engine_kv_type_name(type_k),
			engine_kv_type_name(type_v), be->iface->name);
	return engine_kv_pool_set_types(ctx->kv, type_k, type_v, err);
}

void engine_kv_stats(struct engine_ctx *ctx, struct engine_kv_stats *st)
{
	engine_kv_pool_stats(ctx->kv, st);
}

int engine_seq_new(struct engine_ctx *ctx, struct engine_seq **out,
		   struct err *err)
{
	uint32_t tk, tv;

	engine_kv_pool_types(ctx->kv, &tk, &tv);
	return engine_kv_seq_new(ctx->kv, ctx, tk, tv, out, err);
}

int engine_seq_new_typed(struct engine_ctx *ctx, uint32_t type_k,
			 uint32_t type_v, struct engine_seq **out,
			 struct err *err)
{
	return engine_kv_seq_new(ctx->kv, ctx, type_k, type_v, out, err);
}
