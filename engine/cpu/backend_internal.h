/* SPDX-License-Identifier: MIT */
/*
 * Inside the CPU backend (backend.c, rows.c, attention_batch.c): its
 * state and the ops each file implements for backend.c's table.
 */
#ifndef LLMFS_ENGINE_CPU_BACKEND_INTERNAL_H
#define LLMFS_ENGINE_CPU_BACKEND_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "../backend.h"
#include "threadpool.h"

/* engine_backend.ctx of the CPU backend */
struct cpu_backend {
	struct cpu_threadpool *pool;
	/* reserve's, for batches of up to cap rows */
	uint32_t cap;
	uint32_t ptr_cap;    /* entries of ys and acts */
	float **ys;	     /* a matmul's outputs, row by row */
	const void **acts;   /* its inputs */
	void *att_work;	     /* cpu_attention_work_bytes, 64-aligned */
	size_t att_work_cap; /* bytes of att_work */
};

static inline struct cpu_backend *cpu_state(const struct engine_backend *be)
{
	return be->ctx;
}

static inline struct cpu_threadpool *cpu_pool(const struct engine_backend *be)
{
	return cpu_state(be)->pool;
}

/* the pool's threads */
static inline uint32_t cpu_threads(const struct engine_backend *be)
{
	return cpu_threadpool_size(cpu_pool(be));
}

/*
 * row(op, r) for every row r of the batch (idx[j] for j < n; idx NULL:
 * j), split over the pool in one run; a few rows run on the caller. The
 * rows do not depend on each other, so the split changes no bit.
 */
void cpu_rows_run(struct engine_backend *be,
		  void (*row)(const void *op, uint32_t r), const void *op,
		  const uint32_t *idx, uint32_t n);

/* rows.c: the row ops of backend.h */
void cpu_get_rows(struct engine_backend *be, float *y, size_t y_ld,
		  const struct engine_tensor *w, const int32_t *tokens,
		  uint32_t n);
void cpu_rope_cache(struct engine_backend *be, float *cache, size_t cache_ld,
		    const uint32_t *pos, uint32_t n,
		    const struct engine_hparams *hp, const float *freq_factors);
void cpu_rms_norm_rows(struct engine_backend *be, float *y, const float *x,
		       size_t ld, uint32_t width, uint32_t per_row,
		       const float *w, float eps, const uint32_t *idx,
		       uint32_t n);
void cpu_add_rows(struct engine_backend *be, float *y, size_t y_ld,
		  const float *x, size_t x_ld, uint32_t width,
		  const uint32_t *idx, uint32_t n);
void cpu_convert_rows(struct engine_backend *be, uint32_t type, const float *x,
		      size_t x_ld, uint32_t width, void *y, size_t y_ld,
		      const uint32_t *idx, uint32_t n);
void cpu_rope_rows(struct engine_backend *be, float *x, size_t ld,
		   uint32_t n_head, const struct engine_hparams *hp,
		   const float *cache, size_t cache_ld, const uint32_t *idx,
		   uint32_t n);
void cpu_swiglu_rows(struct engine_backend *be, float *g, const float *u,
		     size_t ld, uint32_t width, const uint32_t *idx,
		     uint32_t n);
void cpu_kv_store_rows(struct engine_backend *be, const float *k, size_t k_ld,
		       uint32_t k_width, const float *v, size_t v_ld,
		       uint32_t v_width, const struct engine_kv_slot *slots,
		       uint32_t n);
void cpu_moe_route_rows(struct engine_backend *be,
			const struct engine_hparams *hp, float *router,
			size_t ld, uint32_t *sel, float *weights,
			const uint32_t *idx, uint32_t n);
void cpu_moe_combine_rows(struct engine_backend *be, float *out, size_t out_ld,
			  const float *eo, const float *weights, uint32_t k,
			  uint32_t width, const uint32_t *idx, uint32_t n);

/* attention_batch.c: the attention op and its work memory */
size_t cpu_attention_work_bytes(const struct engine_backend *be,
				const struct engine_hparams *hp, uint32_t cap);
void cpu_attention(struct engine_backend *be,
		   const struct engine_att_batch *ab);

#endif
