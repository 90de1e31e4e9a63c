// SPDX-License-Identifier: MIT
/*
 * A sequence and its KV cache: for every layer, the keys and values of
 * each position so far, stored in the model's kv_type (F16, as llama.cpp's
 * default cache: K and V are rounded to F16 when stored, which the logits
 * depend on).
 *
 * Layout: k[layer][pos][kv_head * head_dim], v likewise, one allocation,
 * so that a position's row of one layer is contiguous as in llama.cpp's
 * non-transposed V (flash attention).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

int engine_seq_new(struct engine_model *m, struct engine_seq **out,
		struct err *err)
{
	const struct engine_hparams *hp = &m->hp;
	const struct io_type_info *ti = io_type_info(m->info.kv_type);
	struct engine_seq *s;
	size_t k_row, v_row, bytes;

	*out = NULL;
	if (!ti || ti->block_elems != 1)
		return err_set(err, ENOTSUP, "KV cache type %u not supported",
				m->info.kv_type);
	k_row = (size_t)hp->n_head_kv * hp->head_dim * ti->block_bytes;
	v_row = (size_t)hp->n_head_kv * hp->head_dim_v * ti->block_bytes;
	bytes = (k_row + v_row) * hp->n_layer * m->info.n_ctx;
	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(err, ENOMEM, "out of memory");
	s->mem = malloc(bytes ? bytes : 1);
	if (!s->mem) {
		free(s);
		return err_set(err, ENOMEM,
			"out of memory for a KV cache of %zu bytes (%u tokens)",
			bytes, m->info.n_ctx);
	}
	s->model = m;
	s->n_ctx = m->info.n_ctx;
	s->k_row = k_row;
	s->v_row = v_row;
	s->k = s->mem;
	s->v = s->mem + k_row * hp->n_layer * s->n_ctx;
	*out = s;
	return 0;
}

void engine_seq_free(struct engine_seq *s)
{
	if (!s)
		return;
	free(s->mem);
	free(s);
}

uint32_t engine_seq_length(const struct engine_seq *s)
{
	return s->n_past;
}

void engine_seq_truncate(struct engine_seq *s, uint32_t n)
{
	if (n < s->n_past)
		s->n_past = n;
}
