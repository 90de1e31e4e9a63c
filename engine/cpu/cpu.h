/* SPDX-License-Identifier: MIT */
/*
 * Vector versions of the hottest dot products, each summing in exactly
 * the order of the scalar emulation it replaces (engine/quant/dot.c,
 * engine/quant/quant_x86.c), so that the floats come out bit for bit the same;
 * tests/engine/test_simd.c holds them to that.
 *
 * Built with __attribute__((target)), not with global flags: call them
 * only where cpu_avx512_usable() says so. engine/cpu/isa.h's avx512 level
 * lists them; avx2.h has the AVX2 twins.
 */
#ifndef LLMFS_ENGINE_CPU_H
#define LLMFS_ENGINE_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * n rounded up to a whole number of 64-byte lines: the scratch, panels and
 * work memory the kernels carve are cache-line (and zmm) aligned.
 */
static inline size_t cpu_align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

/* AVX-512 F, BW, VL and VNNI, as the reference's zen4 build uses them. */
bool cpu_avx512_usable(void);

/*
 * ggml_vec_dot_f32's vector part: np (a multiple of 64) elements in four
 * 16-lane FMA accumulators, reduced as GGML_F32_VEC_REDUCE.
 */
float cpu_f32_main_avx512(int64_t np, const float *x, const float *y);

/* The same for two F16 rows (ggml_vec_dot_f16 without AVX512-FP16). */
float cpu_f16_main_avx512(int64_t np, const uint16_t *x, const uint16_t *y);

/*
 * dot.c's BF16 vector part (vdpbf16ps emulated with FMAs, odd element
 * first): np a multiple of 64; the two 16-lane accumulators' folds in c.
 */
void cpu_bf16_main_avx512(int64_t np, const uint16_t *x, const uint16_t *y,
			  float c[2]);

/* ggml_vec_dot_f32, _f16 and dot.c's BF16 with the vector parts above. */
float dot_f32_avx512(int64_t n, const void *w, const void *a);
float dot_f16_avx512(int64_t n, const void *w, const void *a);
float dot_bf16_avx512(int64_t n, const void *w, const void *a);

/* quant_vec_dot_x86 for Q8_0, Q4_K and Q6_K (n a multiple of the block). */
float cpu_q8_0_avx512(int64_t n, const void *w, const void *a);
float cpu_q4_K_avx512(int64_t n, const void *w, const void *a);
float cpu_q6_K_avx512(int64_t n, const void *w, const void *a);

/* quant_vec_dot_x86 for the other plain block types. */
float cpu_q4_0_avx512(int64_t n, const void *w, const void *a);
float cpu_q4_1_avx512(int64_t n, const void *w, const void *a);
float cpu_q5_0_avx512(int64_t n, const void *w, const void *a);
float cpu_q5_1_avx512(int64_t n, const void *w, const void *a);
float cpu_q2_K_avx512(int64_t n, const void *w, const void *a);
float cpu_q3_K_avx512(int64_t n, const void *w, const void *a);
float cpu_q5_K_avx512(int64_t n, const void *w, const void *a);

/*
 * dot.c's repacked gemvs (ggml_gemv_q4_0_8x8_q8_0, ggml_gemv_q4_K_8x8_q8_K,
 * ggml_gemv_q2_K_8x8_q8_K): one float per row, so only the integer sum of
 * each block is vectorized; the FMAs stay in dot.c's order.
 */
float cpu_q4_0_repacked_avx512(int64_t n, const void *w, const void *a);
float cpu_q4_K_repacked_avx512(int64_t n, const void *w, const void *a);
float cpu_q2_K_repacked_avx512(int64_t n, const void *w, const void *a);

/*
 * The batched matmul's kernels (engine/cpu/tile_avx512.c): nr (1..
 * CPU_TILE_ROWS) weight rows of n elements, row_bytes apart from w,
 * against nt (1..CPU_TILE_TOKENS) activation rows a[t]: out[CPU_TILE_TOKENS
 * r + t] the float the one-token kernel above gives for (row r, a[t]), bit
 * for bit, with each weight block loaded and unpacked once for all tokens
 * and each activation chunk loaded once for all rows (Q8_0).
 * qs: the tokens' int8 quants packed in pairs (dot_tile_pack): pair p
 * (tokens 2p, 2p + 1; an odd last token twice) at qs + S p, its 32-
 * element chunk c as 64 bytes at + 64 c, the first token's 32 first. For
 * Q8_0, S = 4 n, the quants are stored + 128 (as unsigned bytes) and the
 * pair's block scales follow its quants, 16 floats a block (8 for each
 * token); for Q8_K, S = 2 n and the kernels read the scales and sums from
 * a[t] itself.
 */
#define CPU_TILE_TOKENS 8
#define CPU_TILE_ROWS 4
void cpu_q8_0_tile_avx512(int64_t n, const void *w, size_t row_bytes, int nr,
			  const void *const *a, const uint8_t *qs, int nt,
			  float *out);
void cpu_q6_K_tile_avx512(int64_t n, const void *w, size_t row_bytes, int nr,
			  const void *const *a, const uint8_t *qs, int nt,
			  float *out);
void cpu_q4_K_repacked_tile_avx512(int64_t n, const void *w, size_t row_bytes,
				   int nr, const void *const *a,
				   const uint8_t *qs, int nt, float *out);

/*
 * The element-wise steps (engine/cpu/elem_avx512.c), each bit for bit the
 * scalar code named, lane by lane; where cpu_avx512_usable() (the avx512
 * level of isa.h).
 */
/* ops_swiglu's whole vectors: nv a multiple of 16 */
void cpu_swiglu_avx512(float *y, const float *g, const float *u, int64_t nv);
/* x[i] = ggml_v_expf(x[i] - max) for nv (a multiple of 16) floats */
void cpu_expf_sub_avx512(float *x, float max, int64_t nv);
/* y = x * s, then y * w when w is given: ops_rms_norm's scaling */
void cpu_scale_avx512(float *y, const float *x, float s, const float *w,
		      int64_t n);
/* ops_rope on one head of n_rot rotated floats (NEOX or NORM pairs) */
void cpu_rope_avx512(float *r, uint32_t n_rot, bool neox, const float *cache);
/* the from_float_avx512 of Q8_K, Q8_0 and F16 (traits.c) */
void cpu_q8_K_from_float_avx512(const float *x, void *y, int64_t nb);
void cpu_q8_0_from_float_avx512(const float *x, void *y, int64_t nb);
void cpu_f16_from_float_avx512(const float *x, void *y, int64_t n);

#endif
