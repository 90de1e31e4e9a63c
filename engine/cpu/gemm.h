/* SPDX-License-Identifier: MIT */
/*
 * The batched matmul as a matrix multiply (engine/cpu/gemm_*.c): weight
 * rows in the lanes. A panel holds CPU_GEMM_ROWS weight rows re-laid so
 * that one 512-bit register carries four consecutive elements of each of
 * 16 rows; vpdpbusd against four bytes of one token, broadcast, gives each
 * row's integer partial in its own lane. A block's integer sum per (row,
 * token) then needs no horizontal add, and a panel, made once, serves
 * every token of the batch.
 *
 * Order: per (row, token), each block's integer sum is exact (integer
 * sums do not depend on their order); the floats are one chain per row
 * over the blocks, acc = fma((float)s, dw * da, acc), as ggml's repacked
 * gemvs do. For repacked Q4_K that is the one-token path's order, bit for
 * bit. For Q8_0 and Q6_K it is not (their one-token kernels fold eight
 * lanes at the end), so the driver uses those only when the backend's
 * batch_exact is off; the logits then stay within ../shared/README.md
 * section 4's tolerance.
 *
 * Each level of engine/cpu/isa.h has its own kernels for these types
 * (the AVX-512 ones below, gemm_avx2.c, and gemm_scalar.c, which defines
 * the order); vector ones are built with __attribute__((target)): call
 * a level's only where it is usable (cpu_isa() picks).
 */
#ifndef LLMFS_ENGINE_CPU_GEMM_H
#define LLMFS_ENGINE_CPU_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu.h"

#define CPU_GEMM_ROWS 16

/*
 * A matrix held packed: each 16 rows as one panel exactly as large as
 * the 16 rows in the file (16 x row_bytes), rearranged so that a register
 * holds a dword of each row, so that a step of a few tokens has no panel
 * to make (a panel made per step was 42% of a 4-token decode step; one
 * made once and kept larger than the rows read slower than making it:
 * Documentation/engine.md). Only matrices whose rows are a multiple of
 * 16 are packed (engine_tensor.packed), in place at load. The layouts,
 * per 256-element superblock ib of the 16 rows r, 64-byte units:
 *
 *   Q4_K, 36 units at ib * 2304: unit j < 32 holds qs dword j of each
 *   row (bytes 4r..4r + 3: block bytes 16 + 4j..), unit 32 the dword
 *   d | dmin << 16 (block bytes 0..3), units 33..35 the scale dwords
 *   (block bytes 4 + 4k..).
 *
 *   Q6_K, 52 units at ib * 3328: units j < 32 the ql dwords, 32..47 the
 *   qh dwords, 48..51 the scale dwords (block bytes 4j, 128 + 4j,
 *   192 + 4k); after all nb superblocks' units, the d's, 32 bytes a
 *   superblock at nb * 3328 + 32 ib (row r's fp16 at 2r).
 *
 *   Q8_0, per 32-element block ib, 8 units at ib * 512: unit j holds qs
 *   dword j of each row (signed, as the file has it); after all nb
 *   blocks' units, the d's, 32 bytes a block at nb * 512 + 32 ib.
 *
 * The layouts are data, the same at every level (gemm_layout.c makes
 * them); each level of engine/cpu/isa.h has its own kernels for them.
 * A panel starts wherever the tensor's rows do (only 32-byte aligned,
 * as GGUF aligns its tensors), so the kernels load it unaligned.
 */
struct cpu_gemm_packed {
	/* 16 rows of n elements at rows, row_bytes apart, into panel */
	void (*pack)(int64_t n, const void *rows, size_t row_bytes,
		     void *panel);
	/* Row r (< 16) of a packed panel back into its file bytes at row. */
	void (*unpack_row)(int64_t n, const void *panel, int r, void *row);
	/*
	 * As cpu_gemm_kernels.run, on a packed panel (all 16 rows): the
	 * fast order (gemm.h's one chain per row). ahead is the next panel
	 * of the matrix, which follows this one in memory where it is
	 * given, so a kernel may prefetch on past its panel's end up to
	 * ahead + ahead_bytes (AVX2's q6k_exact1 does).
	 */
	void (*run)(int64_t n, const void *panel, const void *acts, int nt,
		    float *const *y, int64_t row0, const void *ahead,
		    size_t ahead_bytes);
	/*
	 * The same, each (row, token) in the one-token path's bits of this
	 * type (dot_row_fn(type, repacked) of the row as the file holds it):
	 * what a one-token step and batch_exact use.
	 */
	void (*run_exact)(int64_t n, const void *panel, const void *acts,
			  int nt, float *const *y, int64_t row0,
			  const void *ahead, size_t ahead_bytes);
	/*
	 * the engine_tensor.llama_repacked of the tensors whose one-token bits
	 * run_exact gives (only those are packed)
	 */
	bool repacked_order;
};

/* One weight type's kernels; n (elements per row) a multiple of its block. */
struct cpu_gemm_kernels {
	/* bytes of one panel of CPU_GEMM_ROWS rows of n elements (64-aligned) */
	size_t (*panel_bytes)(int64_t n);
	/*
	 * Rows [0, nr) of w, row_bytes apart, in the type's plain block
	 * layout, into panel (64-aligned, panel_bytes); rows nr.. read as 0.
	 * It prefetches what it reads next and the next panel's rows (the
	 * matrix is contiguous; a prefetch past its end does not fault), so
	 * that a few-token batch still streams at memory speed.
	 */
	void (*panel)(int64_t n, const void *w, size_t row_bytes, int nr,
		      void *panel);
	/* bytes of one token's activations in the kernel's form (64-aligned) */
	size_t (*act_bytes)(int64_t n);
	/*
	 * One token's activation row a (the weight type's vec_dot_type, as
	 * the one-token path quantizes it) into the kernel's form at dst.
	 */
	void (*act_pack)(int64_t n, const void *a, void *dst);
	/*
	 * y[t][row0 + r] = row r of the panel . token t for r < nr, t < nt:
	 * acts holds nt tokens act_bytes(n) apart, as act_pack made them.
	 * Any nt >= 1; the kernel takes the tokens a register tile at a time.
	 * While it computes, it prefetches the ahead_bytes at ahead (the
	 * panel after next: cpu_gemm_ahead), or nothing for 0.
	 */
	void (*run)(int64_t n, const void *panel, int nr, const void *acts,
		    int nt, float *const *y, int64_t row0, const void *ahead,
		    size_t ahead_bytes);
	/*
	 * true: run gives the bits of the one-token path of a repacked
	 * tensor (engine_tensor.llama_repacked; see above)
	 */
	bool exact;
	/*
	 * Batches from this many tokens take the GEMM; smaller ones the
	 * tile kernels (cpu.h), whose rows need no panel made first.
	 */
	uint32_t min_tokens;
	/* the packed form's kernels, or NULL where the type has none */
	const struct cpu_gemm_packed *packed;
};

/*
 * A run's prefetch of the panel after next, spread over its steps: a
 * panel's run touches no weight memory, so without it the memory sits
 * idle while the core computes, and a decode batch costs the panel's read
 * plus its run instead of the larger of the two (gemm_run.c has the
 * figures). cpu_gemm_ahead_step asks for one step's share, whole lines.
 */
struct cpu_gemm_ahead {
	const char *p;
	size_t bytes, per_step;
};

static inline struct cpu_gemm_ahead cpu_gemm_ahead(const void *p, size_t bytes,
						   int64_t steps)
{
	struct cpu_gemm_ahead a = { p, bytes, 0 };

	if (steps > 0)
		a.per_step = cpu_align64((bytes + (size_t)steps - 1) /
					 (size_t)steps);
	return a;
}

/*
 * Part k of n of a run's prefetch, each part `steps` steps: a kernel
 * that passes over its panel n times (the AVX2 halves, NEON's quarters)
 * spreads the prefetch over every pass, so that the memory is busy while
 * the later passes compute from cache.
 */
static inline struct cpu_gemm_ahead
cpu_gemm_ahead_part(const void *p, size_t bytes, int64_t steps, int k, int n)
{
	struct cpu_gemm_ahead a = cpu_gemm_ahead(p, bytes, steps * n);
	const size_t o = a.per_step * (size_t)steps * (size_t)k;

	if (o >= bytes)
		a.bytes = 0;
	else {
		a.p += o;
		a.bytes -= o;
	}
	return a;
}

/* Step `step`'s part of a into L2. */
static inline void cpu_gemm_ahead_step(const struct cpu_gemm_ahead *a,
				       int64_t step)
{
	size_t o = a->per_step * (size_t)step;
	const size_t end = o + a->per_step < a->bytes ? o + a->per_step :
							a->bytes;

	for (; o < end; o += 64)
		__builtin_prefetch(a->p + o, 0, 2);
}

extern const struct cpu_gemm_kernels cpu_gemm_q8_0; /* gemm_avx512.c */
extern const struct cpu_gemm_kernels cpu_gemm_q4_K; /* gemm_k_avx512.c */
extern const struct cpu_gemm_kernels cpu_gemm_q6_K; /* gemm_k_avx512.c */
extern const struct cpu_gemm_packed
	cpu_gemm_q4_K_packed; /* gemm_q4k_packed.c */
extern const struct cpu_gemm_packed
	cpu_gemm_q6_K_packed; /* gemm_q6k_packed.c */
extern const struct cpu_gemm_packed
	cpu_gemm_q8_0_packed; /* gemm_q80_packed.c */
/* the scalar level's: the order's one definition (gemm_scalar.c) */
extern const struct cpu_gemm_kernels cpu_gemm_q8_0_scalar;
extern const struct cpu_gemm_kernels cpu_gemm_q4_K_scalar;
extern const struct cpu_gemm_kernels cpu_gemm_q6_K_scalar;
/* the AVX2 level's, on the packed layouts (gemm_avx2.c) */
extern const struct cpu_gemm_kernels cpu_gemm_q8_0_avx2;
extern const struct cpu_gemm_kernels cpu_gemm_q4_K_avx2;
extern const struct cpu_gemm_kernels cpu_gemm_q6_K_avx2;

#endif
