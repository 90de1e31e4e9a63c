/* SPDX-License-Identifier: MIT */
/*
 * The CPU's kernels per instruction-set level: one table each (scalar,
 * avx2, avx512 on x86; neon, neon-dotprod on aarch64), chosen once from
 * the CPU's features. Every vector kernel gives the bits of the scalar
 * emulation it stands for (engine/quant/quant_x86.c, dot.c, ops.c, ...), which stays
 * the one definition of each kernel's order: so the logits are the same,
 * bit for bit, whichever table runs, and tests/engine/test_simd.c,
 * test_elem.c and test_isa.c hold every table to the scalar one.
 *
 * A NULL entry means "the scalar code": a level lists only what it
 * accelerates. Which path a computation takes (GEMM or one-token kernels,
 * tiled attention or not, packed panels or not) never depends on the
 * level, only on the data: the levels differ in speed, never in bits.
 *
 * LLMFS_CPU=scalar|avx2|avx512|neon|neon-dotprod picks a level (tests,
 * benches, a user whose CPU misreports); a level this build or CPU lacks
 * is refused with a clear error by cpu_isa_check(), which the CPU
 * backend asks before it starts.
 */
#ifndef LLMFS_ENGINE_CPU_ISA_H
#define LLMFS_ENGINE_CPU_ISA_H

#include <stdbool.h>
#include <stdint.h>

#include "../quant/quant.h"

struct err;
struct att_state;
struct att_tile;

/*
 * Attention's vector steps at one level (attention.h,
 * attention_tiled.h), each the scalar code's bits.
 */
struct cpu_isa_att {
	/* ggml_vec_mad_f16, _scale_f16, the F16 to F32 copy, _mad_f32 */
	void (*mad_f16)(uint16_t *y, const uint16_t *x, float v, uint32_t n);
	void (*scale_f16)(uint16_t *y, float v, uint32_t n);
	void (*f16_to_f32)(float *y, const uint16_t *x, uint32_t n);
	void (*mad_f32)(float *y, const float *x, float v, uint32_t n);
	/* libm's expf of 16 floats (used where att_expf_exact) */
	void (*expf16)(float *y, const float *x);
	/*
	 * att_run over F16 K and V in one loop (head dims multiples of 64
	 * for K, 16 for V, up to ATT_FAST_MAX): att_run_steps' bits
	 */
	void (*run_f16)(struct att_state *st, const uint8_t *k, size_t k_stride,
			const uint8_t *v, size_t v_stride, uint32_t n);
	/* the tiled prompt attention's Q row and block (attention_tiled.c) */
	void (*tile_q)(struct att_tile *t, uint32_t r, const float *q);
	void (*tile_block)(struct att_tile *t, uint32_t c0, const uint8_t *k,
			   size_t k_stride, const uint8_t *v, size_t v_stride,
			   uint32_t n);
};

/* One tensor type's kernels at one level (NULL: the scalar one). */
struct cpu_isa_type {
	/* the traits' vec_dot bits (the reference build's order) */
	quant_dot_fn dot;
	/* vec_dot_repacked's bits (llama.cpp's CPU_REPACK gemv order) */
	quant_dot_fn dot_repacked;
	/* from_float's bits (the activation quantizers) */
	quant_from_float_fn from_float;
	/* dot.h's tiles, [repacked]: the one-token bits, several rows and tokens */
	quant_tile_fn tile[2];
	/* the rows-in-lanes GEMM (gemm.h), in its own order */
	const struct cpu_gemm_kernels *gemm;
};

struct cpu_isa {
	const char *name;     /* LLMFS_CPU's word for it */
	const char *features; /* what the CPU must have, for messages */
	bool (*usable)(void); /* this CPU has every one of them */
	/*
	 * Its kernels take activation quants in [-127, 127] only, as every
	 * quantizer here makes them (ggml's Q8_0, Q8_1 and Q8_K never give
	 * -128); false: any int8. Weights may be any bytes at every level.
	 */
	bool act_127;
	struct cpu_isa_type type[IO_TYPE_COUNT];
	/*
	 * The float dots' vector parts (np a multiple of 64; dot.c adds
	 * the tails): ggml_vec_dot_f32 and _f16's four 16-lane
	 * accumulators, reduced; dot.c's BF16 pairs, two accumulators'
	 * folds into c.
	 */
	float (*f32_main)(int64_t np, const float *x, const float *y);
	float (*f16_main)(int64_t np, const uint16_t *x, const uint16_t *y);
	void (*bf16_main)(int64_t np, const uint16_t *x, const uint16_t *y,
			  float c[2]);
	/* ops.c's element-wise steps (whole vectors: nv a multiple of 16) */
	void (*swiglu)(float *y, const float *g, const float *u, int64_t nv);
	void (*expf_sub)(float *x, float max, int64_t nv);
	void (*scale)(float *y, const float *x, float s, const float *w,
		      int64_t n);
	void (*rope)(float *r, uint32_t n_rot, bool neox, const float *cache);
	/* attention's steps, or NULL: the scalar code */
	const struct cpu_isa_att *att;
};

/* Every level this build has, best first; the last is the scalar one. */
extern const struct cpu_isa *const cpu_isa_levels[];
extern const unsigned cpu_isa_count;

/*
 * The level the kernels run: LLMFS_CPU's where it names a level this
 * CPU has, else the best this CPU has. Chosen once.
 */
const struct cpu_isa *cpu_isa(void);

/*
 * 0, or -EINVAL (LLMFS_CPU names no level) / -ENOTSUP (this CPU lacks the
 * level's features) with the reason in err. The CPU backend refuses to
 * start on an error, so no computation runs on a level nobody asked for.
 */
int cpu_isa_check(struct err *err);

/*
 * The level LLMFS_CPU=want asks for: want NULL or empty, the best level
 * this CPU has; else the level named want, or -EINVAL (no such name) or
 * -ENOTSUP (this CPU lacks its features) with the reason in err and *out
 * NULL. cpu_isa() chooses with it once, from the environment.
 */
int cpu_isa_choose(const char *want, const struct cpu_isa **out,
		   struct err *err);

/*
 * The level named name ("scalar", "avx2", "avx512", "neon",
 * "neon-dotprod"), or NULL where this build has none by that name.
 */
const struct cpu_isa *cpu_isa_named(const char *name);

/*
 * Run level isa from now on, for the whole process (tests compare the
 * levels through whole models): only while no kernel runs.
 */
void cpu_isa_use(const struct cpu_isa *isa);

/* The kernel of (type, repacked) at level isa, the scalar one where it has none. */
quant_dot_fn cpu_isa_dot(const struct cpu_isa *isa, uint32_t type,
			 bool repacked);

/* The activation quantizer of type at level isa (the scalar one where none). */
quant_from_float_fn cpu_isa_from_float(const struct cpu_isa *isa,
				       uint32_t type);

#endif
