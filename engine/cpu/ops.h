/* SPDX-License-Identifier: MIT */
/*
 * The operations of one token's forward pass, each computed as ggml's CPU
 * backend computes it for llama.cpp's one-token path (the zen4 build the
 * golden data came from: ../shared/README.md, section 1), so that the
 * logits are the reference's. Each function names the ggml code it
 * follows; the CPU backend (backend.c) runs them for the forward pass.
 */
#ifndef LLMFS_ENGINE_CPU_OPS_H
#define LLMFS_ENGINE_CPU_OPS_H

#include <stdint.h>

#include "../hparams.h"
#include "../tensor.h"
#include "threadpool.h"

/* y = x / rms(x) * w (w may be NULL): ggml_compute_forward_rms_norm_f32 */
void ops_rms_norm(float *y, const float *x, const float *w, int64_t n,
		  float eps);

/*
 * y[r] = row r of w (of expert e for a 3-D tensor) . x for r in [r0, r1),
 * ggml's mul_mat for one column: x is given already converted to w's
 * vec_dot type.
 */
void ops_matvec_rows(float *y, const struct engine_tensor *w, int64_t e,
		     const void *act, int64_t r0, int64_t r1);
/*
 * ys[t] = w . acts[t] for n_tok activations (each converted as for
 * ops_matvec_rows): a batched matmul that reads each block of weight rows
 * once for all tokens, every (row, token) dot computed by
 * ops_matvec_rows exactly as for one token, so the results are bit for
 * bit those of n_tok ops_matvec_rows calls. Split by rows over the pool.
 */
void ops_matmul(struct cpu_threadpool *pool, float *const *ys,
		const struct engine_tensor *w, int64_t e, uint32_t n_tok,
		const void *const *acts);
/* One row of the token embedding as floats: ggml_get_rows. */
void ops_get_row(float *y, const struct engine_tensor *w, int64_t row);

/* cos/sin per rotated pair at position pos: ggml_rope_cache_init. */
void ops_rope_cache(float *cache, int64_t pos, uint32_t n_rot, float freq_base,
		    float freq_scale, const float *freq_factors);
/* Rotate n_head heads of head_dim floats in place: ggml rope, forward. */
void ops_rope(float *x, uint32_t n_head, uint32_t head_dim, uint32_t n_rot,
	      enum engine_rope_mode mode, const float *cache);

/* y = silu(g) * u: ggml_vec_swiglu_f32. */
void ops_swiglu(float *y, const float *g, const float *u, int64_t n);

/* In-place softmax of n floats: ggml_compute_forward_soft_max_f32. */
void ops_softmax(float *x, int64_t n);

/*
 * The scalar code the four above run where the CPU lacks AVX-512 (they
 * run engine/cpu's 16-lane versions otherwise, which give the same bits):
 * for the tests that hold the two to each other.
 */
void ops_rms_norm_scalar(float *y, const float *x, const float *w, int64_t n,
			 float eps);
void ops_rope_scalar(float *x, uint32_t n_head, uint32_t head_dim,
		     uint32_t n_rot, enum engine_rope_mode mode,
		     const float *cache);
void ops_swiglu_scalar(float *y, const float *g, const float *u, int64_t n);
void ops_softmax_scalar(float *x, int64_t n);

#endif
