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

/* The pool and the K/V types the options ask for. */
static int context_kv_init(struct engine_ctx *ctx,
			   const struct engine_ctx_options *opt,
			   struct err *err)
{
	uint32_t tk = IO_TYPE_F16, tv = IO_TYPE_F16;
	int ret;

	if ((ret = engine_kv_pool_init(ctx, opt->kv_mem, opt->budget, err)))
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
	if ((ret = context_kv_init(ctx, opt, err)))
		goto out_free;
	ret = engine_backend_new(&ctx->backend, io_weights_home(m->weights),
				 opt->threads, err);
	if (ret)
		goto out_free;
	ctx->backend->batch_exact = opt->batch_exact;
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
	engine_backend_free(ctx->backend);
	engine_kv_pool_destroy(ctx);
	engine_forward_release(ctx);
	free(ctx);
}

struct engine_model *engine_ctx_model(const struct engine_ctx *ctx)
{
	return ctx->model;
}
