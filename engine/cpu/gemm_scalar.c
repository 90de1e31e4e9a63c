// SPDX-License-Identifier: MIT
/*
 * The GEMM kernels of the scalar level (engine/cpu/isa.h): the one
 * definition, in plain C, of the order the vector levels' GEMM kernels
 * give bit for bit (gemm.h), so that a batch takes the same path and
 * gets the same floats whatever the level.
 *
 *   run (Q8_0, Q6_K): per (row, token) one float chain over the blocks,
 *   acc = fma((float)s, dw * da, acc), s the block's exact integer sum;
 *   Q6_K's s = sum over its sixteen groups of scale * (sum(q a) - 32 *
 *   bsum), q in 0..63, as the vector kernels take the -32 from the
 *   activations' bsums.
 *   run (Q4_K) = run_exact: dot.c's dot_q4_k_repacked.
 *   run_exact (Q8_0, Q6_K): the one-token kernel (quant_x86.c's order).
 *
 * A panel, packed at load or per step, is gemm_layout.c's packed layout:
 * the kernels read each row back out of it (unpack_row) and compute on
 * the file's blocks. The activations stay the rows the one-token path
 * quantized. Slow, and only ever the reference: a CPU without a vector
 * level, LLMFS_CPU=scalar, and the tests.
 */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "gemm.h"
#include "gemm_k.h"
#include "gemm_run.h"
#include "../quant/quant_internal.h"

#ifdef __clang__
#pragma clang fp contract(off)
#endif

/* One (row, token) of a packed panel: w the row's blocks, a the token's. */
typedef float (*gemm_scalar_fn)(int64_t n, const uint8_t *w, const uint8_t *a);

static float gemm_scalar_q8_0(int64_t n, const uint8_t *w, const uint8_t *a)
{
	const struct block_q8_0 *bw = (const void *)w, *ba = (const void *)a;
	float acc = 0.0f;
	int64_t i;
	int k;

	for (i = 0; i < n / QK8_0; i++) {
		int32_t s = 0;

		for (k = 0; k < QK8_0; k++)
			s += bw[i].qs[k] * ba[i].qs[k];
		acc = fmaf((float)s, quant_h2f(bw[i].d) * quant_h2f(ba[i].d),
			   acc);
	}
	return acc;
}

/* Q6_K block i's element e as 0..63 (ggml's dequantize_row_q6_K) */
static int gemm_q6k_q(const struct block_q6_K *b, int e)
{
	const int h = e / 128, k = e % 128 / 32, l = e % 32;
	const uint8_t ql = b->ql[64 * h + 32 * (k % 2) + l];
	const uint8_t qh = b->qh[32 * h + l];

	return ((k < 2 ? ql & 0xf : ql >> 4) | ((qh >> (2 * k)) & 3) << 4);
}

static float gemm_scalar_q6_K(int64_t n, const uint8_t *w, const uint8_t *a)
{
	const struct block_q6_K *bw = (const void *)w;
	const struct block_q8_K *ba = (const void *)a;
	float acc = 0.0f;
	int64_t i;
	int g, e;

	for (i = 0; i < n / QK_K; i++) {
		int32_t s = 0;

		for (g = 0; g < 16; g++) {
			int32_t p = -32 * ba[i].bsums[g];

			for (e = 16 * g; e < 16 * g + 16; e++)
				p += gemm_q6k_q(&bw[i], e) * ba[i].qs[e];
			s += bw[i].scales[g] * p;
		}
		acc = fmaf((float)s, quant_h2f(bw[i].d) * ba[i].d, acc);
	}
	return acc;
}

static float gemm_scalar_q4_K(int64_t n, const uint8_t *w, const uint8_t *a)
{
	return quant_traits(IO_TYPE_Q4_K)->vec_dot_repacked(n, w, a);
}

static float gemm_scalar_q8_0_exact(int64_t n, const uint8_t *w,
				    const uint8_t *a)
{
	return quant_traits(IO_TYPE_Q8_0)->vec_dot(n, w, a);
}

static float gemm_scalar_q6_K_exact(int64_t n, const uint8_t *w,
				    const uint8_t *a)
{
	return quant_traits(IO_TYPE_Q6_K)->vec_dot(n, w, a);
}

/* ---- the shared shape: unpack a row, compute per token ----------------- */

struct gemm_scalar_type {
	uint32_t type;
	void (*unpack_row)(int64_t n, const void *panel, int r, void *row);
	void (*pack)(int64_t n, const void *rows, size_t row_bytes,
		     void *panel);
};

static const struct gemm_scalar_type gemm_scalar_q8_0_t = { IO_TYPE_Q8_0,
							    cpu_q80_unpack_row,
							    cpu_q80_pack };
static const struct gemm_scalar_type gemm_scalar_q4_K_t = { IO_TYPE_Q4_K,
							    cpu_q4k_unpack_row,
							    cpu_q4k_pack };
static const struct gemm_scalar_type gemm_scalar_q6_K_t = { IO_TYPE_Q6_K,
							    cpu_q6k_unpack_row,
							    cpu_q6k_pack };

static size_t gemm_scalar_row_bytes(uint32_t type, int64_t n)
{
	return (size_t)(n / quant_blck_size(type)) * quant_type_size(type);
}

/* rows [0, nr) of a packed panel against nt tokens, one by one */
static void gemm_scalar_rows(const struct gemm_scalar_type *st,
			     gemm_scalar_fn f, int64_t n, const void *panel,
			     int nr, const void *acts, int nt, float *const *y,
			     int64_t row0)
{
	const size_t ab = cpu_align64(
		gemm_scalar_row_bytes(quant_vec_dot_type(st->type), n));
	uint8_t row[CPU_PACKED_ROW_MAX];
	int r, t;

	for (r = 0; r < nr; r++) {
		st->unpack_row(n, panel, r, row);
		for (t = 0; t < nt; t++)
			y[t][row0 + r] = f(n, row,
					   (const uint8_t *)acts + ab * t);
	}
}

/*
 * A per-step panel: the packed layout of rows [0, nr), the rest zero
 * (made in the panel's second half, which run never reads).
 */
static void gemm_scalar_panel(const struct gemm_scalar_type *st, int64_t n,
			      const void *w, size_t row_bytes, int nr,
			      void *panel)
{
	uint8_t *rows = (uint8_t *)panel + CPU_GEMM_ROWS * row_bytes;

	if (nr == CPU_GEMM_ROWS) {
		st->pack(n, w, row_bytes, panel);
		return;
	}
	memcpy(rows, w, row_bytes * (size_t)nr);
	memset(rows + row_bytes * (size_t)nr, 0,
	       row_bytes * (size_t)(CPU_GEMM_ROWS - nr));
	st->pack(n, rows, row_bytes, panel);
}

/* ---- the tables -------------------------------------------------------- */

#define GEMM_SCALAR(name, st, run_fn, exact_fn, at) \
	static size_t name##_panel_bytes(int64_t n) \
	{ \
		return 2 * CPU_GEMM_ROWS * \
		       gemm_scalar_row_bytes((st).type, n); \
	} \
	static void name##_panel(int64_t n, const void *w, size_t row_bytes, \
				 int nr, void *panel) \
	{ \
		gemm_scalar_panel(&(st), n, w, row_bytes, nr, panel); \
	} \
	static size_t name##_act_bytes(int64_t n) \
	{ \
		return cpu_align64(gemm_scalar_row_bytes(at, n)); \
	} \
	static void name##_act_pack(int64_t n, const void *a, void *dst) \
	{ \
		memcpy(dst, a, gemm_scalar_row_bytes(at, n)); \
	} \
	static void name##_run(int64_t n, const void *panel, int nr, \
			       const void *acts, int nt, float *const *y, \
			       int64_t row0, const void *ahead, \
			       size_t ahead_bytes) \
	{ \
		gemm_scalar_rows(&(st), run_fn, n, panel, nr, acts, nt, y, \
				 row0); \
	} \
	static void name##_packed_run(int64_t n, const void *panel, \
				      const void *acts, int nt, \
				      float *const *y, int64_t row0, \
				      const void *ahead, size_t ahead_bytes) \
	{ \
		gemm_scalar_rows(&(st), run_fn, n, panel, CPU_GEMM_ROWS, acts, \
				 nt, y, row0); \
	} \
	static void name##_packed_exact(int64_t n, const void *panel, \
					const void *acts, int nt, \
					float *const *y, int64_t row0, \
					const void *ahead, size_t ahead_bytes) \
	{ \
		gemm_scalar_rows(&(st), exact_fn, n, panel, CPU_GEMM_ROWS, \
				 acts, nt, y, row0); \
	}

GEMM_SCALAR(q80, gemm_scalar_q8_0_t, gemm_scalar_q8_0, gemm_scalar_q8_0_exact,
	    IO_TYPE_Q8_0)
GEMM_SCALAR(q4k, gemm_scalar_q4_K_t, gemm_scalar_q4_K, gemm_scalar_q4_K,
	    IO_TYPE_Q8_K)
GEMM_SCALAR(q6k, gemm_scalar_q6_K_t, gemm_scalar_q6_K, gemm_scalar_q6_K_exact,
	    IO_TYPE_Q8_K)

static const struct cpu_gemm_packed gemm_scalar_q8_0_packed = {
	.pack = cpu_q80_pack,
	.unpack_row = cpu_q80_unpack_row,
	.run = q80_packed_run,
	.run_exact = q80_packed_exact,
};

static const struct cpu_gemm_packed gemm_scalar_q4_K_packed = {
	.pack = cpu_q4k_pack,
	.unpack_row = cpu_q4k_unpack_row,
	.run = q4k_packed_run,
	.run_exact = q4k_packed_exact,
	.repacked_order = true,
};

static const struct cpu_gemm_packed gemm_scalar_q6_K_packed = {
	.pack = cpu_q6k_pack,
	.unpack_row = cpu_q6k_unpack_row,
	.run = q6k_packed_run,
	.run_exact = q6k_packed_exact,
};

/* exact and min_tokens as the AVX-512 level's: the path is the level's bits */
const struct cpu_gemm_kernels cpu_gemm_q8_0_scalar = {
	.panel_bytes = q80_panel_bytes,
	.panel = q80_panel,
	.act_bytes = q80_act_bytes,
	.act_pack = q80_act_pack,
	.run = q80_run,
	.exact = false,
	.min_tokens = 5,
	.packed = &gemm_scalar_q8_0_packed,
};

const struct cpu_gemm_kernels cpu_gemm_q4_K_scalar = {
	.panel_bytes = q4k_panel_bytes,
	.panel = q4k_panel,
	.act_bytes = q4k_act_bytes,
	.act_pack = q4k_act_pack,
	.run = q4k_run,
	.exact = true,
	.min_tokens = 2,
	.packed = &gemm_scalar_q4_K_packed,
};

const struct cpu_gemm_kernels cpu_gemm_q6_K_scalar = {
	.panel_bytes = q6k_panel_bytes,
	.panel = q6k_panel,
	.act_bytes = q6k_act_bytes,
	.act_pack = q6k_act_pack,
	.run = q6k_run,
	.exact = false,
	.min_tokens = 2,
	.packed = &gemm_scalar_q6_K_packed,
};
