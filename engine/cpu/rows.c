// SPDX-License-Identifier: MIT
/*
 * The CPU backend's row ops (backend.h): each row computed by ops.c's
 * one-row code, the rows of a batch split over the thread pool by
 * cpu_rows_run. No row depends on another, so the split changes no bit.
 */
#include <stdbool.h>
#include <string.h>

#include "../quant/quant.h"
#include "backend_internal.h"
#include "dot.h"
#include "ops.h"

/*
 * Rows below this run on the caller: a pool run costs a few microseconds
 * of hand-out and barrier, a row of norm or conversion about one.
 */
#define CPU_ROWS_PARALLEL_MIN 4

struct cpu_rows_job {
	void (*row)(const void *op, uint32_t r);
	const void *op;
	const uint32_t *idx;
	uint32_t n;
};

static void cpu_rows_part(void *varg, uint32_t thread_index,
			  uint32_t thread_count)
{
	const struct cpu_rows_job *job = varg;
	uint32_t j = (uint32_t)((uint64_t)job->n * thread_index / thread_count);
	uint32_t end = (uint32_t)((uint64_t)job->n * (thread_index + 1) /
				  thread_count);

	for (; j < end; j++)
		job->row(job->op, job->idx ? job->idx[j] : j);
}

void cpu_rows_run(struct engine_backend *be,
		  void (*row)(const void *op, uint32_t r), const void *op,
		  const uint32_t *idx, uint32_t n)
{
	struct cpu_rows_job job = { row, op, idx, n };

	if (n >= CPU_ROWS_PARALLEL_MIN && cpu_threads(be) > 1)
		cpu_threadpool_run(cpu_pool(be), cpu_rows_part, &job);
	else
		cpu_rows_part(&job, 0, 1);
}

void cpu_get_rows(struct engine_backend *be, float *y, size_t y_ld,
		  const struct engine_tensor *w, const int32_t *tokens,
		  uint32_t n)
{
	uint32_t j;

	for (j = 0; j < n; j++)
		ops_get_row(y + (size_t)j * y_ld, w, tokens[j]);
}

void cpu_rope_cache(struct engine_backend *be, float *cache, size_t cache_ld,
		    const uint32_t *pos, uint32_t n,
		    const struct engine_hparams *hp, const float *freq_factors)
{
	uint32_t j;

	for (j = 0; j < n; j++)
		ops_rope_cache(cache + (size_t)j * cache_ld, pos[j], hp->n_rot,
			       hp->rope_freq_base, hp->rope_freq_scale,
			       freq_factors);
}

struct cpu_norm_op {
	float *y;
	const float *x, *w;
	size_t ld;
	uint32_t width, per_row;
	float eps;
};

static void cpu_norm_row(const void *arg, uint32_t r)
{
	const struct cpu_norm_op *o = arg;
	uint32_t h;

	for (h = 0; h < o->per_row; h++) {
		size_t at = (size_t)r * o->ld + (size_t)h * o->width;

		ops_rms_norm(o->y + at, o->x + at, o->w, o->width, o->eps);
	}
}

void cpu_rms_norm_rows(struct engine_backend *be, float *y, const float *x,
		       size_t ld, uint32_t width, uint32_t per_row,
		       const float *w, float eps, const uint32_t *idx,
		       uint32_t n)
{
	const struct cpu_norm_op o = { y, x, w, ld, width, per_row, eps };

	cpu_rows_run(be, cpu_norm_row, &o, idx, n);
}

struct cpu_add_op {
	float *y;
	const float *x;
	size_t y_ld, x_ld;
	uint32_t width;
};

static void cpu_add_row(const void *arg, uint32_t r)
{
	const struct cpu_add_op *o = arg;
	float *y = o->y + (size_t)r * o->y_ld;
	const float *x = o->x + (size_t)r * o->x_ld;
	uint32_t i;

	for (i = 0; i < o->width; i++)
		y[i] = y[i] + x[i];
}

void cpu_add_rows(struct engine_backend *be, float *y, size_t y_ld,
		  const float *x, size_t x_ld, uint32_t width,
		  const uint32_t *idx, uint32_t n)
{
	const struct cpu_add_op o = { y, x, y_ld, x_ld, width };

	cpu_rows_run(be, cpu_add_row, &o, idx, n);
}

struct cpu_convert_op {
	uint32_t type;
	const float *x;
	size_t x_ld;
	uint32_t width;
	uint8_t *y;
	size_t y_ld;
};

static void cpu_convert_row(const void *arg, uint32_t r)
{
	const struct cpu_convert_op *o = arg;

	cpu_from_float(o->type, o->x + (size_t)r * o->x_ld,
		       o->y + (size_t)r * o->y_ld, o->width);
}

void cpu_convert_rows(struct engine_backend *be, uint32_t type, const float *x,
		      size_t x_ld, uint32_t width, void *y, size_t y_ld,
		      const uint32_t *idx, uint32_t n)
{
	const struct cpu_convert_op o = { type, x, x_ld, width, y, y_ld };

	cpu_rows_run(be, cpu_convert_row, &o, idx, n);
}

struct cpu_rope_op {
	float *x;
	size_t ld;
	uint32_t n_head, head_dim, n_rot;
	enum engine_rope_mode mode;
	const float *cache;
	size_t cache_ld;
};

static void cpu_rope_row(const void *arg, uint32_t r)
{
	const struct cpu_rope_op *o = arg;

	ops_rope(o->x + (size_t)r * o->ld, o->n_head, o->head_dim, o->n_rot,
		 o->mode, o->cache + (size_t)r * o->cache_ld);
}

void cpu_rope_rows(struct engine_backend *be, float *x, size_t ld,
		   uint32_t n_head, const struct engine_hparams *hp,
		   const float *cache, size_t cache_ld, const uint32_t *idx,
		   uint32_t n)
{
	const struct cpu_rope_op o = { x,	  ld,
				       n_head,	  hp->head_dim,
				       hp->n_rot, hp->rope_mode,
				       cache,	  cache_ld };

	cpu_rows_run(be, cpu_rope_row, &o, idx, n);
}

struct cpu_swiglu_op {
	float *g;
	const float *u;
	size_t ld;
	uint32_t width;
};

static void cpu_swiglu_row(const void *arg, uint32_t r)
{
	const struct cpu_swiglu_op *o = arg;
	float *g = o->g + (size_t)r * o->ld;

	ops_swiglu(g, g, o->u + (size_t)r * o->ld, o->width);
}

void cpu_swiglu_rows(struct engine_backend *be, float *g, const float *u,
		     size_t ld, uint32_t width, const uint32_t *idx, uint32_t n)
{
	const struct cpu_swiglu_op o = { g, u, ld, width };

	cpu_rows_run(be, cpu_swiglu_row, &o, idx, n);
}

struct cpu_kv_op {
	const float *k, *v;
	size_t k_ld, v_ld;
	uint32_t k_width, v_width;
	const struct engine_kv_slot *slots;
};

static void cpu_kv_row(const void *arg, uint32_t r)
{
	const struct cpu_kv_op *o = arg;
	const struct engine_kv_slot *s = &o->slots[r];

	cpu_from_float(s->type_k, o->k + (size_t)r * o->k_ld, s->k, o->k_width);
	cpu_from_float(s->type_v, o->v + (size_t)r * o->v_ld, s->v, o->v_width);
}

void cpu_kv_store_rows(struct engine_backend *be, const float *k, size_t k_ld,
		       uint32_t k_width, const float *v, size_t v_ld,
		       uint32_t v_width, const struct engine_kv_slot *slots,
		       uint32_t n)
{
	const struct cpu_kv_op o = {
		k, v, k_ld, v_ld, k_width, v_width, slots
	};

	cpu_rows_run(be, cpu_kv_row, &o, NULL, n);
}

/*
 * build_moe_ffn with softmax gating, for one row's router logits: the
 * softmax, then the top k (argsort, descending, the lower id on ties) and
 * their weights, optionally divided by their sum.
 */
static void cpu_moe_route(const struct engine_hparams *hp, float *router,
			  uint32_t *sel, float *w)
{
	uint32_t k = hp->n_expert_used, i, j;
	double sum = 0.0;

	ops_softmax(router, hp->n_expert);

	/* selection sort: highest first, the lower id on ties */
	for (i = 0; i < k; i++) {
		uint32_t best = UINT32_MAX;

		for (j = 0; j < hp->n_expert; j++) {
			uint32_t t;
			bool taken = false;

			for (t = 0; t < i; t++)
				taken |= sel[t] == j;
			if (taken)
				continue;
			if (best == UINT32_MAX || router[j] > router[best])
				best = j;
		}
		sel[i] = best;
		w[i] = router[best];
	}
	if (hp->expert_weights_norm) {
		float fsum;

		for (i = 0; i < k; i++)
			sum += (double)w[i];
		fsum = (float)sum;
		if (fsum < 6.103515625e-5f)
			fsum = 6.103515625e-5f;
		for (i = 0; i < k; i++)
			w[i] = w[i] / fsum;
	}
}

struct cpu_route_op {
	const struct engine_hparams *hp;
	float *router;
	size_t ld;
	uint32_t *sel;
	float *w;
};

static void cpu_route_row(const void *arg, uint32_t r)
{
	const struct cpu_route_op *o = arg;
	const size_t k = o->hp->n_expert_used;

	cpu_moe_route(o->hp, o->router + (size_t)r * o->ld, o->sel + r * k,
		      o->w + r * k);
}

void cpu_moe_route_rows(struct engine_backend *be,
			const struct engine_hparams *hp, float *router,
			size_t ld, uint32_t *sel, float *weights,
			const uint32_t *idx, uint32_t n)
{
	const struct cpu_route_op o = { hp, router, ld, sel, weights };

	cpu_rows_run(be, cpu_route_row, &o, idx, n);
}

struct cpu_combine_op {
	float *out;
	size_t out_ld;
	const float *eo, *w;
	uint32_t k, width;
};

/* out = sum over i < k of w[i] * eo[i], in order of i */
static void cpu_combine_row(const void *arg, uint32_t r)
{
	const struct cpu_combine_op *o = arg;
	float *out = o->out + (size_t)r * o->out_ld;
	const float *eo = o->eo + (size_t)r * o->k * o->width;
	const float *w = o->w + (size_t)r * o->k;
	uint32_t i, c;

	for (i = 0; i < o->k; i++, eo += o->width) {
		for (c = 0; c < o->width; c++) {
			float v = eo[c] * w[i];

			out[c] = i == 0 ? v : out[c] + v;
		}
	}
}

void cpu_moe_combine_rows(struct engine_backend *be, float *out, size_t out_ld,
			  const float *eo, const float *weights, uint32_t k,
			  uint32_t width, const uint32_t *idx, uint32_t n)
{
	const struct cpu_combine_op o = { out, out_ld, eo, weights, k, width };

	cpu_rows_run(be, cpu_combine_row, &o, idx, n);
}
