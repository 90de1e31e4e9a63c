/* SPDX-License-Identifier: MIT */
/*
 * The tables of one level's GEMM kernels (gemm.h) on the packed layouts,
 * written once for the levels whose kernels share their signatures:
 * included at the end of gemm_avx2.c and of neon_gemm.h (once per NEON
 * level), after the level's kernels, which it names:
 *
 *   q80_rows, q4k_rows, q6k_rows     cpu_gemm_kernels.run
 *   q80_exact1, q6k_exact1           one token of cpu_gemm_packed.run_exact
 *                                    (each prefetches as its loop suits:
 *                                    gemm.h's cpu_gemm_packed.run)
 *   GEMM_LEVEL(name)                 the level's name for a table
 *
 * Only the calls differ between levels; what is here holds no vector code.
 */
#ifndef LLMFS_ENGINE_CPU_GEMM_TABLES_H
#define LLMFS_ENGINE_CPU_GEMM_TABLES_H

#include <string.h>

#include "cpu.h"
#include "gemm.h"
#include "gemm_k.h"

/*
 * A per-step panel: the packed layout of rows [0, nr), the rest zero,
 * made in the panel's second half first (run never reads it).
 */
static void
gemm_level_panel(void (*pack)(int64_t, const void *, size_t, void *), int64_t n,
		 const void *w, size_t row_bytes, int nr, void *panel)
{
	uint8_t *rows = (uint8_t *)panel + CPU_GEMM_ROWS * row_bytes;

	if (nr == CPU_GEMM_ROWS) {
		pack(n, w, row_bytes, panel);
		return;
	}
	memcpy(rows, w, row_bytes * (size_t)nr);
	memset(rows + row_bytes * (size_t)nr, 0,
	       row_bytes * (size_t)(CPU_GEMM_ROWS - nr));
	pack(n, rows, row_bytes, panel);
}

static size_t q80_panel_bytes(int64_t n)
{
	return 2 * CPU_GEMM_ROWS * (size_t)(n / 32) * GEMM_Q80_BLOCK;
}

static size_t q4k_panel_bytes(int64_t n)
{
	return 2 * CPU_GEMM_ROWS * (size_t)(n / GEMM_QK) * GEMM_Q4K_BLOCK;
}

static size_t q6k_panel_bytes(int64_t n)
{
	return 2 * CPU_GEMM_ROWS * (size_t)(n / GEMM_QK) * GEMM_Q6K_BLOCK;
}

static void q80_panel(int64_t n, const void *w, size_t row_bytes, int nr,
		      void *panel)
{
	gemm_level_panel(cpu_q80_pack, n, w, row_bytes, nr, panel);
}

static void q4k_panel(int64_t n, const void *w, size_t row_bytes, int nr,
		      void *panel)
{
	gemm_level_panel(cpu_q4k_pack, n, w, row_bytes, nr, panel);
}

static void q6k_panel(int64_t n, const void *w, size_t row_bytes, int nr,
		      void *panel)
{
	gemm_level_panel(cpu_q6k_pack, n, w, row_bytes, nr, panel);
}

static void q80_packed_run(int64_t n, const void *panel, const void *acts,
			   int nt, float *const *y, int64_t row0,
			   const void *ahead, size_t ahead_bytes)
{
	q80_rows(n, panel, CPU_GEMM_ROWS, acts, nt, y, row0, ahead,
		 ahead_bytes);
}

static void q4k_packed_run(int64_t n, const void *panel, const void *acts,
			   int nt, float *const *y, int64_t row0,
			   const void *ahead, size_t ahead_bytes)
{
	q4k_rows(n, panel, CPU_GEMM_ROWS, acts, nt, y, row0, ahead,
		 ahead_bytes);
}

static void q6k_packed_run(int64_t n, const void *panel, const void *acts,
			   int nt, float *const *y, int64_t row0,
			   const void *ahead, size_t ahead_bytes)
{
	q6k_rows(n, panel, CPU_GEMM_ROWS, acts, nt, y, row0, ahead,
		 ahead_bytes);
}

/* Token by token: only the one-token step (nt 1) needs to be fast. */
static void q80_packed_exact(int64_t n, const void *panel, const void *acts,
			     int nt, float *const *y, int64_t row0,
			     const void *ahead, size_t ahead_bytes)
{
	const size_t ab = cpu_q80_act_bytes(n);
	int t;

	/* the prefetch with the first token's pass */
	for (t = 0; t < nt; t++)
		q80_exact1(n, panel, (const uint8_t *)acts + ab * t,
			   y[t] + row0, ahead, t ? 0 : ahead_bytes);
}

static void q6k_packed_exact(int64_t n, const void *panel, const void *acts,
			     int nt, float *const *y, int64_t row0,
			     const void *ahead, size_t ahead_bytes)
{
	const size_t ab = cpu_q6k_act_bytes(n);
	const int64_t nb = n / GEMM_QK;
	int t;

	for (t = 0; t < nt; t++)
		q6k_exact1(nb, panel, (const uint8_t *)acts + ab * t,
			   y[t] + row0, ahead, t ? 0 : ahead_bytes);
}

static const struct cpu_gemm_packed gemm_level_q8_0_packed = {
	.pack = cpu_q80_pack,
	.unpack_row = cpu_q80_unpack_row,
	.run = q80_packed_run,
	.run_exact = q80_packed_exact,
};

static const struct cpu_gemm_packed gemm_level_q4_K_packed = {
	.pack = cpu_q4k_pack,
	.unpack_row = cpu_q4k_unpack_row,
	.run = q4k_packed_run,
	.run_exact = q4k_packed_run,
	.repacked_order = true,
};

static const struct cpu_gemm_packed gemm_level_q6_K_packed = {
	.pack = cpu_q6k_pack,
	.unpack_row = cpu_q6k_unpack_row,
	.run = q6k_packed_run,
	.run_exact = q6k_packed_exact,
};

/* exact and min_tokens as every level's: the path decides the bits */
const struct cpu_gemm_kernels GEMM_LEVEL(cpu_gemm_q8_0) = {
	.panel_bytes = q80_panel_bytes,
	.panel = q80_panel,
	.act_bytes = cpu_q80_act_bytes,
	.act_pack = cpu_q80_act_pack,
	.run = q80_rows,
	.exact = false,
	.min_tokens = 5,
	.packed = &gemm_level_q8_0_packed,
};

const struct cpu_gemm_kernels GEMM_LEVEL(cpu_gemm_q4_K) = {
	.panel_bytes = q4k_panel_bytes,
	.panel = q4k_panel,
	.act_bytes = cpu_q4k_act_bytes,
	.act_pack = cpu_q4k_act_pack,
	.run = q4k_rows,
	.exact = true,
	.min_tokens = 2,
	.packed = &gemm_level_q4_K_packed,
};

const struct cpu_gemm_kernels GEMM_LEVEL(cpu_gemm_q6_K) = {
	.panel_bytes = q6k_panel_bytes,
	.panel = q6k_panel,
	.act_bytes = cpu_q6k_act_bytes,
	.act_pack = cpu_q6k_act_pack,
	.run = q6k_rows,
	.exact = false,
	.min_tokens = 2,
	.packed = &gemm_level_q6_K_packed,
};
#endif
