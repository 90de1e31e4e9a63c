// SPDX-License-Identifier: MIT
/*
 * A loaded model ready to compute: the model as model.c reads it, the
 * KV cache's pool, the backend that computes the forward pass (from the
 * registry, for the device the weights were loaded on) and the
 * backend's own layout of the weights.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "kv.h"
#include "model.h"

/* The pool and the K/V types the options ask for. */
static int context_kv_init(struct engine_model *m,
			   const struct engine_model_options *opt,
			   struct err *err)
{
	uint32_t tk = IO_TYPE_F16, tv = IO_TYPE_F16;
	int ret;

	if ((ret = engine_kv_pool_init(m, opt->kv_mem, opt->budget, err)))
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
	return engine_model_set_kv_types(m, tk, tv, err);
}

/*
 * The backend's own layout of the matrices, made once at load (the CPU's
 * packed panels): a view it cannot pack, or memory for the copy that is
 * missing, leaves its matrix as the file has it, which every kernel reads
 * too. tok_embd and a tied output share one placement: the first view
 * packs it, the second finds it packed.
 */
static void context_pack(struct engine_model *m, struct engine_tensor *t)
{
	if (t->info && m->backend->iface->pack)
		m->backend->iface->pack(m->backend, t);
}

int engine_model_open(struct engine_model **out, const char *path,
		      const struct engine_model_options *opt, struct err *err)
{
	static const struct engine_model_options defaults;
	struct engine_model *m;
	int ret;

	*out = NULL;
	if (!opt)
		opt = &defaults;
	if ((ret = engine_model_load(&m, path, opt, err)))
		return ret;
	if ((ret = context_kv_init(m, opt, err)))
		goto out_free;
	ret = engine_backend_new(&m->backend, io_weights_home(m->weights),
				 opt->threads, err);
	if (ret)
		goto out_free;
	m->backend->batch_exact = opt->batch_exact;
	/*
	 * packed now, or, loading in the background, as each tensor arrives:
	 * its first wait in a pass packs it (forward.c), on the pool
	 */
	if (!opt->no_pack && !opt->load.async)
		engine_model_each_view(m, context_pack);
	m->pack_on_wait = !opt->no_pack && opt->load.async;
	*out = m;
	return 0;

out_free:
	engine_model_free(m);
	return ret;
}

void engine_model_free(struct engine_model *m)
{
	if (!m)
		return;
	engine_backend_free(m->backend);
	engine_kv_pool_destroy(m);
	engine_forward_release(m);
	engine_model_unload(m);
}

void engine_tensor_read(struct engine_model *m, uint64_t i, uint64_t off,
			size_t size, void *buf)
{
	const struct io_placement *p = io_weights_placement(m->weights, i);

	if (p->layout)
		m->backend->iface->packed_read(m->backend, &m->gguf->tensors[i],
					       p->data, off, size, buf);
	else
		memcpy(buf, (const uint8_t *)p->data + off, size);
}
