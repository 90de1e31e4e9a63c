/* SPDX-License-Identifier: MIT */
/*
 * The AVX2 kernels (x86-64-v3: AVX2, FMA, F16C), twins of cpu.h's
 * AVX-512 ones: each sums in exactly the order of the scalar emulation
 * it replaces (engine/quant/dot.c, engine/quant/quant_x86.c, ops.c), so
 * every x86 path gives the same floats, bit for bit. A 16-lane AVX-512
 * accumulator is two 8-lane halves here with the same per-lane FMAs; the
 * integer lanes come from vpmaddubsw + vpmaddwd instead of vpdpbusd,
 * equal wherever no 16-bit pair sum can saturate (each kernel says why it
 * cannot); the horizontal sums follow the same trees (reduce_avx2.h).
 *
 * The activation rows are what this engine's quantizers make: int8
 * quants in [-127, 127] (ggml's Q8_0, Q8_1 and Q8_K never give -128).
 * The Q8_0 kernels rely on it (ggml's sign trick, |w| . sign(a, w), is
 * exact for any weight byte then); every other kernel takes any bytes.
 *
 * Built with __attribute__((target)), not with global flags: call them
 * only where the CPU has AVX2, FMA and F16C.
 */
#ifndef LLMFS_ENGINE_CPU_AVX2_H
#define LLMFS_ENGINE_CPU_AVX2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* AVX2, FMA and F16C: x86-64-v3. */
bool cpu_avx2_usable(void);

/* cpu.h's float dots' vector parts (np a multiple of 64), the same bits. */
float cpu_f32_main_avx2(int64_t np, const float *x, const float *y);
float cpu_f16_main_avx2(int64_t np, const uint16_t *x, const uint16_t *y);
void cpu_bf16_main_avx2(int64_t np, const uint16_t *x, const uint16_t *y,
			float c[2]);

/* quant_vec_dot_x86 of the block types (n a multiple of the block). */
float cpu_q8_0_avx2(int64_t n, const void *w, const void *a);
float cpu_q4_0_avx2(int64_t n, const void *w, const void *a);
float cpu_q4_1_avx2(int64_t n, const void *w, const void *a);
float cpu_q5_0_avx2(int64_t n, const void *w, const void *a);
float cpu_q5_1_avx2(int64_t n, const void *w, const void *a);
float cpu_q2_K_avx2(int64_t n, const void *w, const void *a);
float cpu_q3_K_avx2(int64_t n, const void *w, const void *a);
float cpu_q4_K_avx2(int64_t n, const void *w, const void *a);
float cpu_q5_K_avx2(int64_t n, const void *w, const void *a);
float cpu_q6_K_avx2(int64_t n, const void *w, const void *a);

/* dot.c's repacked gemvs: one float per row, the FMAs in dot.c's order. */
float cpu_q4_0_repacked_avx2(int64_t n, const void *w, const void *a);
float cpu_q4_K_repacked_avx2(int64_t n, const void *w, const void *a);
float cpu_q2_K_repacked_avx2(int64_t n, const void *w, const void *a);

/*
 * The element-wise steps (elem_avx2.c), each bit for bit the scalar code
 * (and cpu.h's AVX-512 twin) lane by lane.
 */
/* ops_swiglu's whole vectors: nv a multiple of 16 */
void cpu_swiglu_avx2(float *y, const float *g, const float *u, int64_t nv);
/* x[i] = ggml_v_expf(x[i] - max) for nv (a multiple of 16) floats */
void cpu_expf_sub_avx2(float *x, float max, int64_t nv);
/* y = x * s, then y * w when w is given: ops_rms_norm's scaling */
void cpu_scale_avx2(float *y, const float *x, float s, const float *w,
		    int64_t n);
/* ops_rope on one head of n_rot rotated floats (NEOX or NORM pairs) */
void cpu_rope_avx2(float *r, uint32_t n_rot, bool neox, const float *cache);
/* the activation quantizers' bits: Q8_K, Q8_0 (nb blocks), F16 (n) */
void cpu_q8_K_from_float_avx2(const float *x, void *y, int64_t nb);
void cpu_q8_0_from_float_avx2(const float *x, void *y, int64_t nb);
void cpu_f16_from_float_avx2(const float *x, void *y, int64_t n);

#endif
