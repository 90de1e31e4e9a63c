// SPDX-License-Identifier: MIT
/*
 * The reference backend (ref_backend.h): every op of engine/backend.h in
 * scalar C, llama.cpp's one-token path (the type table's scalar kernels,
 * engine/quant/), on the caller's thread. Its memory is its own: the
 * forward pass's scratch, the KV blocks and the weights placed on "ref0"
 * are its allocations, and the host's bytes come in and go out through
 * copy_in/copy_out as they would to a device (is_host is false).
 *
 * Where the CPU backend runs a packed or repacked matrix, this reads the
 * file's layout (a tensor moved here is copied out of the packing) and
 * runs the dot of the order the CPU's kernel gives: the bits are the
 * same, slower.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../quant/quant.h"
#include "ref.h"
#include "ref_backend.h"

void *ref_backend_alloc(size_t bytes)
{
	void *p = NULL;

	if (posix_memalign(&p, 64, bytes ? bytes : 1))
		return NULL;
	return p;
}

void ref_backend_free(void *p)
{
	free(p);
}

void ref_backend_copy(void *dst, const void *src, size_t bytes)
{
	memcpy(dst, src, bytes);
}

static void ref_destroy(struct engine_backend *be)
{
	struct ref_backend *rb = be->ctx;

	free(rb->vkq);
	free(rb);
	free(be);
}

static void *ref_alloc(struct engine_backend *be, size_t bytes)
{
	return ref_backend_alloc(bytes);
}

static void ref_free(struct engine_backend *be, void *p)
{
	ref_backend_free(p);
}

static void ref_copy(struct engine_backend *be, void *dst, const void *src,
		     size_t bytes)
{
	ref_backend_copy(dst, src, bytes);
}

/* every op ran to its end on the caller's thread, and cannot fail */
static int ref_synchronize(struct engine_backend *be, struct err *err)
{
	return 0;
}

static int ref_reserve(struct engine_backend *be,
		       const struct engine_hparams *hp, uint32_t cap,
		       struct err *err)
{
	struct ref_backend *rb = be->ctx;
	const size_t n = ref_attention_floats(hp, cap, rb->threads);
	float *p;

	if (n <= rb->vkq_cap)
		return 0;
	p = ref_backend_alloc(n * sizeof(float));
	if (!p)
		return err_set(err, ENOMEM,
			       "out of memory for ref0's work memory");
	free(rb->vkq);
	rb->vkq = p;
	rb->vkq_cap = n;
	return 0;
}

static bool ref_supports(const struct engine_backend *be, enum engine_op op,
			 uint32_t type)
{
	const struct quant_type_traits *t = quant_traits(type);

	switch (op) {
	case ENGINE_OP_GET_ROWS: return t->to_float != NULL;
	case ENGINE_OP_MATMUL: return t->weight && t->vec_dot;
	case ENGINE_OP_CONVERT: return t->from_float != NULL;
	case ENGINE_OP_ATTENTION: return t->kv && t->vec_dot;
	default: return false;
	}
}

static uint32_t ref_vec_dot_type(const struct engine_backend *be, uint32_t type)
{
	return quant_vec_dot_type(type);
}

/* The dot the CPU's one-token path runs for w: the repacked gemv or not. */
static quant_dot_fn ref_dot_of(const struct engine_tensor *w)
{
	const struct quant_type_traits *t = quant_traits(w->info->type);

	return w->llama_repacked && t->vec_dot_repacked ? t->vec_dot_repacked :
							  t->vec_dot;
}

/* y = row r of w (of expert e) . act */
static float ref_dot(const struct engine_tensor *w, quant_dot_fn dot, int64_t e,
		     int64_t r, const void *act)
{
	const uint8_t *row = engine_tensor_data(w) +
			     ((uint64_t)e * w->info->ne[1] + (uint64_t)r) *
				     w->row_bytes;

	return dot(w->info->ne[0], row, act);
}

static void ref_matmul_one(const struct engine_matmul *mm)
{
	const quant_dot_fn dot = ref_dot_of(mm->w);
	const int64_t rows = mm->w->info->ne[1];
	uint32_t j;
	int64_t r;

	for (j = 0; j < mm->n; j++) {
		const void *act = (const uint8_t *)mm->act +
				  (size_t)(mm->act_idx ? mm->act_idx[j] : j) *
					  mm->act_ld;
		float *y = mm->y +
			   (size_t)(mm->y_idx ? mm->y_idx[j] : j) * mm->y_ld;

		for (r = 0; r < rows; r++)
			y[r] = ref_dot(mm->w, dot, mm->expert, r, act);
	}
}

static void ref_matmul(struct engine_backend *be,
		       const struct engine_matmul *mm, uint32_t count)
{
	uint32_t k;

	for (k = 0; k < count; k++)
		ref_matmul_one(&mm[k]);
}

static void ref_matmul_id(struct engine_backend *be,
			  const struct engine_matmul_id *m)
{
	const quant_dot_fn dot = ref_dot_of(m->w);
	const int64_t rows = m->w->info->ne[1];
	uint32_t j, i;
	int64_t r;

	for (j = 0; j < m->n; j++) {
		const size_t b = m->idx ? m->idx[j] : j;

		for (i = 0; i < m->k; i++) {
			const size_t slot = b * m->k + i;
			const void *act = (const uint8_t *)m->act +
					  (m->act_per_slot ? slot : b) *
						  m->act_ld;
			float *y = m->y + slot * m->y_ld;

			for (r = 0; r < rows; r++)
				y[r] = ref_dot(m->w, dot, m->sel[slot], r, act);
		}
	}
}

static const struct engine_backend_i ref_backend_i = {
	.name = "ref",
	.destroy = ref_destroy,
	.alloc = ref_alloc,
	.free = ref_free,
	.copy_in = ref_copy,
	.copy_out = ref_copy,
	.copy = ref_copy,
	.synchronize = ref_synchronize,
	.reserve = ref_reserve,
	.supports = ref_supports,
	.vec_dot_type = ref_vec_dot_type,
	.get_rows = ref_get_rows,
	.rope_cache = ref_rope_cache,
	.rms_norm_rows = ref_rms_norm_rows,
	.add_rows = ref_add_rows,
	.convert_rows = ref_convert_rows,
	.rope_rows = ref_rope_rows,
	.swiglu_rows = ref_swiglu_rows,
	.kv_store_rows = ref_kv_store_rows,
	.matmul = ref_matmul,
	.matmul_id = ref_matmul_id,
	.moe_route_rows = ref_moe_route_rows,
	.moe_combine_rows = ref_moe_combine_rows,
	.attention = ref_attention,
};

int ref_backend_new(struct engine_backend **out, uint32_t threads,
		    struct err *err)
{
	struct engine_backend *be = calloc(1, sizeof(*be));
	struct ref_backend *rb = calloc(1, sizeof(*rb));

	*out = NULL;
	if (!be || !rb) {
		free(be);
		free(rb);
		return err_set(err, ENOMEM, "out of memory");
	}
	rb->threads = threads ? threads : 1;
	be->threads = rb->threads;
	be->iface = &ref_backend_i;
	be->ctx = rb;
	be->is_host = false;
	be->dev.kind = IO_DEVICE_GPU;
	be->dev.index = 0;
	strcpy(be->dev.name, "ref0");
	*out = be;
	return 0;
}
