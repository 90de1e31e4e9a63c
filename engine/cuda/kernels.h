// SPDX-License-Identifier: MIT
/*
 * Inside the CUDA module: the launch functions of its kernels, each over
 * device pointers on one stream, for module.cu's ops and step.cu's
 * forward pass. C++ only; the engine sees module.h.
 *
 * Every launcher enqueues and returns: the caller checks launch errors
 * once per op (cuda_check_launch).
 */
#ifndef LLMFS_ENGINE_CUDA_KERNELS_H
#define LLMFS_ENGINE_CUDA_KERNELS_H

#include "common.cuh"

/* ---- quantize.cu --------------------------------------------------------- */

/* bytes of an activation row of n elements of act (Q8_1, Q8_K, F32) */
uint64_t k_act_row_bytes(uint32_t act, int64_t n);
/* the activation type for a weight type, IO_TYPE_COUNT if none */
uint32_t k_act_type(uint32_t w_type);
/* rows of n floats into act rows; false for an act it cannot make */
bool k_quantize(uint32_t act, const float *x, uint64_t x_ld, void *y,
		uint64_t y_ld, int64_t n, uint32_t rows, cudaStream_t s);

/* ---- mmv.cu: products with a few activation rows -------------------------- */

/*
 * y rows (y_ld floats apart) = w . x rows (x_ld bytes apart, act type),
 * the weight read once for up to 8 columns.
 *
 * MoE (items != NULL): item i = (expert, first pair, count <= 8) of
 * items[3 i ..], for i < *n_items (device memory, at most max_items);
 * pair p reads x row pair_x[p], writes y row pair_y[p], with the expert's
 * matrix at w + expert * expert_bytes.
 */
struct mmv_args {
	const uint8_t *w;
	uint64_t row_bytes, expert_bytes;
	int64_t n_in, n_out;
	const uint8_t *x;
	uint64_t x_ld;
	float *y;
	uint64_t y_ld;
	uint32_t n_cols;
	const int32_t *items, *n_items;
	const int32_t *pair_x, *pair_y;
	uint32_t max_items;
};

/* false for a weight type without a kernel */
bool k_mmv(uint32_t w_type, const mmv_args &a, cudaStream_t s);

/* ---- dequant.cu: weights as floats or halves ------------------------------ */

/* y[r] = row ids[r] of w as floats */
bool k_get_rows(uint32_t w_type, const void *w, uint64_t row_bytes, int64_t n,
		const int32_t *ids, float *y, uint64_t y_ld, uint32_t rows,
		cudaStream_t s);
/* rows [0, n_rows) of w into n_rows x n halves (row-major, contiguous) */
bool k_dequant_f16(uint32_t w_type, const void *w, uint64_t row_bytes,
		   int64_t n, int64_t n_rows, uint16_t *y, cudaStream_t s);
/* rows of n floats (x_ld apart) into contiguous halves */
void k_f32_to_f16(const float *x, uint64_t x_ld, uint16_t *y, int64_t n,
		  uint32_t rows, cudaStream_t s);

/* ---- elem.cu: per-row operations ----------------------------------------- */

void k_rms_norm(const float *x, uint64_t x_ld, const float *w, float *y,
		uint64_t y_ld, int64_t n, uint32_t rows, float eps,
		cudaStream_t s);
void k_rope(float *x, uint64_t x_ld, uint32_t n_head, uint32_t head_dim,
	    uint32_t n_rot, int neox, const int32_t *pos, float freq_base,
	    float freq_scale, const float *freq_factors, uint32_t rows,
	    cudaStream_t s);
void k_swiglu(float *y, uint64_t y_ld, const float *g, uint64_t g_ld,
	      const float *u, uint64_t u_ld, int64_t n, uint32_t rows,
	      cudaStream_t s);
void k_add(float *y, uint64_t y_ld, const float *x, uint64_t x_ld, int64_t n,
	   uint32_t rows, cudaStream_t s);

#endif
