// SPDX-License-Identifier: MIT
/*
 * A loaded model's files and tensors as a reader outside the engine sees
 * them: fs/'s info file, weights/ and weights/index ask here instead of
 * reading io/'s GGUF and weights structures, so that io/ stays behind the
 * engine (Documentation/fs.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "quant/quant.h"

uint64_t engine_model_n_tensors(const struct engine_model *m)
{
	return m->gguf->n_tensors;
}

int engine_model_tensor(const struct engine_model *m, uint64_t i,
			struct engine_tensor_info *out)
{
	const struct io_gguf_tensor *t;
	const struct io_placement *p;

	if (i >= m->gguf->n_tensors)
		return -ENOENT;
	t = &m->gguf->tensors[i];
	p = io_weights_placement(m->weights, i);
	*out = (struct engine_tensor_info){
		.name = t->name,
		.type = quant_type_name(t->type),
		.n_dims = t->n_dims,
		.bytes = t->bytes,
		.offset = t->offset,
		.device = p && p->device[0] ? p->device : "cpu",
	};
	for (uint32_t d = 0; d < 4; d++)
		out->ne[d] = d < IO_GGUF_MAX_DIMS ? t->ne[d] : 1;
	return 0;
}

int engine_model_tensor_find(const struct engine_model *m, const char *name,
			     uint64_t *i)
{
	const struct io_gguf_tensor *t = io_gguf_find_tensor(m->gguf, name);

	if (!t)
		return -ENOENT;
	*i = (uint64_t)(t - m->gguf->tensors);
	return 0;
}

int engine_tensor_bytes(struct engine_model *m, uint64_t i, const void **data,
			uint64_t *bytes)
{
	const struct io_placement *p;

	if (i >= m->gguf->n_tensors)
		return -ENOENT;
	p = io_weights_placement(m->weights, i);
	if (!p || !p->data)
		return -EIO;
	*bytes = p->bytes;
	*data = p->layout || !engine_backend_device_is_host(p->device) ?
			NULL :
			p->data;
	return 0;
}

int engine_model_type_totals(const struct engine_model *m,
			     struct engine_type_total **out, size_t *n)
{
	uint64_t bytes[IO_TYPE_COUNT] = { 0 }, count[IO_TYPE_COUNT] = { 0 };
	struct engine_type_total *t;
	size_t k = 0;

	for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
		const struct io_gguf_tensor *x = &m->gguf->tensors[i];

		if (x->type < IO_TYPE_COUNT) {
			bytes[x->type] += x->bytes;
			count[x->type]++;
		}
	}
	t = calloc(IO_TYPE_COUNT, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (uint32_t type = 0; type < IO_TYPE_COUNT; type++)
		if (count[type])
			t[k++] = (struct engine_type_total){
				.type = quant_type_name(type),
				.tensors = count[type],
				.bytes = bytes[type],
			};
	*out = t;
	*n = k;
	return 0;
}

uint32_t engine_model_n_files(const struct engine_model *m)
{
	return m->gguf->n_files;
}

const char *engine_model_file_path(const struct engine_model *m, uint32_t i)
{
	return i < m->gguf->n_files ? m->gguf->files[i].path : NULL;
}

const char *engine_model_file_type(const struct engine_model *m, bool *guessed)
{
	return io_ftype_name(io_gguf_ftype(m->gguf, guessed));
}

int engine_model_merge_step(struct engine_model *m, size_t max_bytes,
			    size_t *merged)
{
	return io_weights_collapse_step(m->weights, max_bytes, merged);
}
