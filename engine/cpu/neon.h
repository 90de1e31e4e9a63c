/* SPDX-License-Identifier: MIT */
/*
 * The aarch64 kernels of engine/cpu/isa.h's two ARM levels, twins of
 * avx2.h's: each sums in exactly the order of the scalar emulation it
 * replaces (engine/quant/dot.c, engine/quant/quant_x86.c, ops.c,
 * attention.c), so that an ARM machine gets the logits an x86 one gets,
 * bit for bit. A 16-lane AVX-512 accumulator is four 4-lane q registers
 * here, an 8-lane AVX2 one two, with the same per-lane FMAs; the
 * horizontal sums follow the same trees (reduce_neon.h).
 *
 *   neon          ARMv8-A Advanced SIMD, which every aarch64 CPU has
 *                 (Cortex-A53/A72: Raspberry Pi 3 and 4)
 *   neon-dotprod  the same with SDOT (ARMv8.2 dotprod: Apple M1 and
 *                 later, Graviton 2+, Ampere Altra, Cortex-A76/Pi 5)
 *
 * Only the integer dots differ between the two: SDOT adds the four
 * products of lane l's bytes 4l..4l+3 into lane l, which is the scalar
 * emulation's lane exactly; without it SMULL and pairwise widening adds
 * build the same lane (every sum exact, so any int8 activation is taken:
 * neither level needs isa.h's act_127). Those kernels are written once
 * (neon_qdot.h, neon_gemm.h) and built twice, once per level
 * (dot_neon.c, dot_neon_dotprod.c, gemm_neon.c, gemm_neon_dotprod.c);
 * the float kernels are built once and both levels list them.
 *
 * Built for aarch64 only (the Makefile leaves these files out elsewhere);
 * the dotprod ones carry their own target, so call them only where
 * cpu_neon_dotprod_usable() says so.
 */
#ifndef LLMFS_ENGINE_CPU_NEON_H
#define LLMFS_ENGINE_CPU_NEON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Advanced SIMD (HWCAP_ASIMD), and that with SDOT (HWCAP_ASIMDDP). */
bool cpu_neon_usable(void);
bool cpu_neon_dotprod_usable(void);

/* cpu.h's float dots' vector parts (np a multiple of 64), the same bits. */
float cpu_f32_main_neon(int64_t np, const float *x, const float *y);
float cpu_f16_main_neon(int64_t np, const uint16_t *x, const uint16_t *y);
void cpu_bf16_main_neon(int64_t np, const uint16_t *x, const uint16_t *y,
			float c[2]);

/*
 * quant_vec_dot_x86 of the block types (n a multiple of the block) and
 * dot.c's repacked gemvs, once per level: name##_neon, name##_neon_dotprod.
 */
#define CPU_NEON_QDOT(level) \
	float cpu_q8_0_##level(int64_t n, const void *w, const void *a); \
	float cpu_q4_0_##level(int64_t n, const void *w, const void *a); \
	float cpu_q4_1_##level(int64_t n, const void *w, const void *a); \
	float cpu_q5_0_##level(int64_t n, const void *w, const void *a); \
	float cpu_q5_1_##level(int64_t n, const void *w, const void *a); \
	float cpu_q2_K_##level(int64_t n, const void *w, const void *a); \
	float cpu_q3_K_##level(int64_t n, const void *w, const void *a); \
	float cpu_q4_K_##level(int64_t n, const void *w, const void *a); \
	float cpu_q5_K_##level(int64_t n, const void *w, const void *a); \
	float cpu_q6_K_##level(int64_t n, const void *w, const void *a); \
	float cpu_q4_0_repacked_##level(int64_t n, const void *w, \
					const void *a); \
	float cpu_q4_K_repacked_##level(int64_t n, const void *w, \
					const void *a); \
	float cpu_q2_K_repacked_##level(int64_t n, const void *w, \
					const void *a);
CPU_NEON_QDOT(neon)
CPU_NEON_QDOT(neon_dotprod)
#undef CPU_NEON_QDOT

/*
 * The GEMM's kernels of Q8_0, Q4_K and Q6_K on gemm.h's packed layouts
 * (neon_gemm.h), gemm_scalar.c's bits, once per level.
 */
struct cpu_gemm_kernels;
extern const struct cpu_gemm_kernels cpu_gemm_q8_0_neon;
extern const struct cpu_gemm_kernels cpu_gemm_q4_K_neon;
extern const struct cpu_gemm_kernels cpu_gemm_q6_K_neon;
extern const struct cpu_gemm_kernels cpu_gemm_q8_0_neon_dotprod;
extern const struct cpu_gemm_kernels cpu_gemm_q4_K_neon_dotprod;
extern const struct cpu_gemm_kernels cpu_gemm_q6_K_neon_dotprod;

/* The element-wise steps (elem_neon.c), the scalar code's bits lane by lane. */
/* ops_swiglu's whole vectors: nv a multiple of 16 */
void cpu_swiglu_neon(float *y, const float *g, const float *u, int64_t nv);
/* x[i] = ggml_v_expf(x[i] - max) for nv (a multiple of 16) floats */
void cpu_expf_sub_neon(float *x, float max, int64_t nv);
/* y = x * s, then y * w when w is given: ops_rms_norm's scaling */
void cpu_scale_neon(float *y, const float *x, float s, const float *w,
		    int64_t n);
/* ops_rope on one head of n_rot rotated floats (NEOX or NORM pairs) */
void cpu_rope_neon(float *r, uint32_t n_rot, bool neox, const float *cache);
/* the activation quantizers' bits: Q8_K, Q8_0 (nb blocks), F16 (n) */
void cpu_q8_K_from_float_neon(const float *x, void *y, int64_t nb);
void cpu_q8_0_from_float_neon(const float *x, void *y, int64_t nb);
void cpu_f16_from_float_neon(const float *x, void *y, int64_t n);

#endif
