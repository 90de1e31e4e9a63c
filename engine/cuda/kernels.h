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
/*
 * y = rms_norm(x) * w (w may be NULL) and y quantized as act into q, in
 * one launch (the decode step's norms before their products); false,
 * nothing launched, where act's blocks do not divide n.
 */
bool k_rms_norm_quantize(uint32_t act, const float *x, uint64_t x_ld,
			 const float *w, float *y, uint64_t y_ld, void *q,
			 uint64_t q_ld, int64_t n, uint32_t rows, float eps,
			 cudaStream_t s);

/* ---- mmv.cu: products with a few activation rows -------------------------- */

/*
 * y rows (y_ld floats apart) = w . x rows (x_ld bytes apart, act type),
 * the weight read once for up to 8 columns.
 *
 * MoE (items != NULL): item i = (expert, first pair, count <= 8) of
 * items[3 i ..], for i < *n_items (device memory, at most max_items);
 * pair p reads x row pair_x[p], writes y row pair_y[p], with the expert's
 * matrix at w + expert * expert_bytes.
 *
 * accumulate: y += the product (a residual add fused into the product).
 * w2 (not with MoE): a second matrix of w's type and shape; y is then
 * SwiGLU(w . x, w2 . x), the CPU's SiLU (gate w, up w2).
 * n_seg > 1 (not with MoE or w2): n_seg matrices of w's type and row
 * width read as one of n_out = seg_end[n_seg - 1] rows: rows
 * [seg_end[s - 1], seg_end[s]) are matrix seg_w[s]'s, written to
 * seg_y[s] (seg_ld[s] apart); w, y and y_ld are then unused.
 */
struct mmv_args {
	const uint8_t *w, *w2;
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
	uint32_t accumulate;
	/* the order of llama.cpp's repacked gemv (engine_tensor.llama_repacked) */
	uint32_t repacked;
	uint32_t wpr; /* warps to a row: k_mmv sets it */
	uint32_t n_seg;
	const uint8_t *seg_w[3];
	int64_t seg_end[3];
	float *seg_y[3];
	uint64_t seg_ld[3];
};

/* false for a weight type without a kernel */
bool k_mmv(uint32_t w_type, const mmv_args &a, cudaStream_t s);

/* ---- mmq.cu: prompt products on int8 tensor cores -------------------------- */

/*
 * y rows (y_ld floats apart) = w . x rows for rows of x: Q8_1 rows
 * (x and x_ld 16-aligned) of n_in elements; accumulate: y += it. The
 * weights 4-aligned (a device allocation's offset in GGUF alignment).
 */
struct mmq_args {
	const uint8_t *w;
	uint64_t row_bytes;
	int64_t n_in, n_out;
	const uint8_t *x;
	uint64_t x_ld;
	float *y;
	uint64_t y_ld;
	uint32_t rows;
	uint32_t accumulate;
};

/* whether the kernel takes this weight type with rows of n_in */
bool k_mmq_takes(uint32_t w_type, int64_t n_in);
/* false, nothing launched, where it does not (or no rows) */
bool k_mmq(uint32_t w_type, const mmq_args &a, cudaStream_t s);

/* ---- dequant.cu: weights as floats or halves ------------------------------ */

/* y[r] = row ids[r] of w as floats */
bool k_get_rows(uint32_t w_type, const void *w, uint64_t row_bytes, int64_t n,
		const int32_t *ids, float *y, uint64_t y_ld, uint32_t rows,
		cudaStream_t s);
/*
 * rows [0, n_rows) of w into n_rows x n halves (row-major, contiguous):
 * F16, or bfloat16 with bf16
 */
bool k_dequant_half(uint32_t w_type, const void *w, uint64_t row_bytes,
		    int64_t n, int64_t n_rows, bool bf16, uint16_t *y,
		    cudaStream_t s);
/* rows of n floats (x_ld apart) into contiguous halves (or bfloat16) */
void k_f32_to_half(const float *x, uint64_t x_ld, bool bf16, uint16_t *y,
		   int64_t n, uint32_t rows, cudaStream_t s);

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

/* ---- kv_store.cu and attention.cu: the KV cache and attention ------------- */

/* a layer of struct cuda_kv (module.h), as the kernels take it */
struct cuda_kv_args {
	const uint8_t *pool;
	uint64_t block_bytes;
	uint64_t layer_off; /* this layer's bytes in a block */
	uint64_t k_row, v_row;
	const int32_t *tables;
	uint32_t max_blocks;
	/* or a block's K and V rows by address (struct cuda_kv) */
	const uint8_t *const *k_blocks, *const *v_blocks;
	uint32_t type_k, type_v, n_head_kv, head_dim, head_dim_v;
};

struct att_args {
	cuda_kv_args kv;
	const float *q; /* rows of n_head * head_dim, roped */
	uint64_t q_ld;
	const int32_t *seq_of, *pos; /* per row */
	float scale;
	uint32_t group;	      /* query heads per KV head */
	uint32_t n_head;      /* query heads */
	uint32_t chunk;	      /* positions a block takes */
	uint32_t exact_below; /* rows at lower positions: the CPU's order */
	uint32_t fast_exp;    /* there, CUDA's expf instead of libm's bits */
	uint32_t walk;	      /* there, how: ATT_WALK_* (k_attention sets it) */
	uint32_t n_chunks;
	float *part; /* k_att_part_floats(rows) */
	float *out;  /* rows of n_head * head_dim_v */
	uint64_t out_ld;
	/* if not NULL: out quantized as act (Q8_K or Q8_1) too, rows xq_ld
	 * bytes apart, in the merge's launch (k_att_quantizes) */
	uint8_t *xq;
	uint64_t xq_ld;
	uint32_t act;
};

/* whether the kernels handle this pair of cache types and head sizes */
bool k_kv_types_ok(uint32_t type_k, uint32_t type_v, uint32_t head_dim,
		   uint32_t head_dim_v);
bool k_kv_store(const cuda_kv_args &kv, const float *k, uint64_t k_ld,
		const float *v, uint64_t v_ld, const int32_t *seq_of,
		const int32_t *pos, uint32_t rows, cudaStream_t s);
/*
 * The decode step between its products and attention, one launch: query
 * heads RMS-normed (q_norm, if not NULL) and roped in place; K heads
 * normed (k_norm) and roped, and stored with V into the cache at each
 * row's position. The bits of rms_norm, rope and kv_store in sequence;
 * false (nothing launched) for cache types or heads it does not take.
 */
struct qk_rope_args {
	cuda_kv_args kv;
	float *q, *k;
	const float *v;
	uint64_t q_ld, k_ld, v_ld;
	const float *q_norm, *k_norm; /* head_dim weights, or NULL */
	float eps;
	uint32_t n_head, n_rot;
	int neox;
	float theta_scale; /* freq_base^(-2 / n_rot) */
	float freq_scale;
	const float *freq_factors;
	const int32_t *seq_of, *pos;
};
bool k_qk_rope_store(const qk_rope_args &a, uint32_t rows, cudaStream_t s);
/*
 * Rows below this position attend in the CPU's order (attention.cu):
 * $LLMFS_CUDA_ATT_EXACT, read at each call (256 by default, where the
 * CPU's own attention stops being one chunk; 0: none).
 */
uint32_t k_att_exact_below(void);
/*
 * Whether those rows take CUDA's expf (1 ulp apart from the CPU's at
 * times) instead of libm's bits: $LLMFS_CUDA_ATT_FAST_EXP=1, to measure
 * what the exact bits cost.
 */
uint32_t k_att_fast_exp(void);
/* positions a block takes: more for many rows, to bound the partials */
uint32_t k_att_chunk(uint32_t n_ctx, uint32_t rows);
uint64_t k_att_part_floats(const att_args &a, uint32_t rows);
size_t k_att_shared_bytes(uint32_t group, uint32_t head_dim,
			  uint32_t head_dim_v);
bool k_attention(const att_args &a, uint32_t rows, cudaStream_t s);
/* whether attention can hand out its rows quantized as act (att_args.xq) */
bool k_att_quantizes(uint32_t act, uint32_t n_head, uint32_t head_dim_v);

/* ---- moe.cu ---------------------------------------------------------------- */

bool k_moe_route(const float *logits, uint64_t ld, uint32_t n_exp, uint32_t k,
		 bool norm, int32_t *sel, float *w, uint32_t rows,
		 cudaStream_t s);
/* work items moe_group can make for pairs over n_exp experts, at most */
uint32_t k_moe_max_items(uint32_t pairs, uint32_t n_exp);
/* mmv_args' MoE lists from ids (rows x n_slots, ids_ld apart) */
void k_moe_group(const int32_t *ids, uint32_t ids_ld, uint32_t rows,
		 uint32_t n_slots, uint32_t n_exp, bool x_per_slot,
		 int32_t *items, int32_t *pair_x, int32_t *pair_y,
		 int32_t *n_items, cudaStream_t s);
void k_moe_combine(float *out, uint64_t out_ld, const float *eo, uint64_t eo_ld,
		   const float *w, uint32_t k, int64_t n, uint32_t rows,
		   cudaStream_t s);

#endif
