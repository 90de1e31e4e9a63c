/* SPDX-License-Identifier: MIT */
/*
 * Inside the reference backend (backend.c, rows.c, attention.c): the
 * ops each file implements for backend.c's table, in scalar C, each the
 * arithmetic of llama.cpp's one-token path in the reference build's
 * order (../shared/README.md, section 1).
 */
#ifndef LLMFS_ENGINE_REF_REF_H
#define LLMFS_ENGINE_REF_REF_H

#include <stdint.h>

#include "../backend.h"

/* engine_backend.ctx of a reference backend */
struct ref_backend {
	uint32_t threads; /* what it reports as its threads */
	float *vkq;	  /* attention's state and chunk result: reserve's */
	size_t vkq_cap;	  /* floats */
};

/* rows.c */
void ref_get_rows(struct engine_backend *be, float *y, size_t y_ld,
		  const struct engine_tensor *w, const int32_t *tokens,
		  uint32_t n);
void ref_rope_cache(struct engine_backend *be, float *cache, size_t cache_ld,
		    const uint32_t *pos, uint32_t n,
		    const struct engine_hparams *hp, const float *freq_factors);
void ref_rms_norm_rows(struct engine_backend *be, float *y, const float *x,
		       size_t ld, uint32_t width, uint32_t per_row,
		       const float *w, float eps, const uint32_t *idx,
		       uint32_t n);
void ref_add_rows(struct engine_backend *be, float *y, size_t y_ld,
		  const float *x, size_t x_ld, uint32_t width,
		  const uint32_t *idx, uint32_t n);
void ref_convert_rows(struct engine_backend *be, uint32_t type, const float *x,
		      size_t x_ld, uint32_t width, void *y, size_t y_ld,
		      const uint32_t *idx, uint32_t n);
void ref_rope_rows(struct engine_backend *be, float *x, size_t ld,
		   uint32_t n_head, const struct engine_hparams *hp,
		   const float *cache, size_t cache_ld, const uint32_t *idx,
		   uint32_t n);
void ref_swiglu_rows(struct engine_backend *be, float *g, const float *u,
		     size_t ld, uint32_t width, const uint32_t *idx,
		     uint32_t n);
void ref_kv_store_rows(struct engine_backend *be, const float *k, size_t k_ld,
		       uint32_t k_width, const float *v, size_t v_ld,
		       uint32_t v_width, const struct engine_kv_slot *slots,
		       uint32_t n);
void ref_moe_route_rows(struct engine_backend *be,
			const struct engine_hparams *hp, float *router,
			size_t ld, uint32_t *sel, float *weights,
			const uint32_t *idx, uint32_t n);
void ref_moe_combine_rows(struct engine_backend *be, float *out, size_t out_ld,
			  const float *eo, const float *weights, uint32_t k,
			  uint32_t width, const uint32_t *idx, uint32_t n);
/* ggml_vec_soft_max_f32 on n floats, in place (rows.c) */
void ref_softmax(float *x, int64_t n);

/* attention.c */
size_t ref_attention_floats(const struct engine_hparams *hp, uint32_t cap,
			    uint32_t threads);
void ref_attention(struct engine_backend *be,
		   const struct engine_att_batch *ab);

#endif
