// SPDX-License-Identifier: MIT
/*
 * The rows-in-lanes GEMM for Q8_0 weights (gemm.h): cpu_gemm_q8_0.
 *
 * Panel, per 32-element block: eight 64-byte registers, register j
 * holding elements 4j..4j+3 of each of the 16 rows (lane r: row r), each
 * stored + 128 so that it is vpdpbusd's unsigned operand; then the 16
 * rows' scales as floats. 576 bytes for 16 rows' 544.
 *
 * Activations (act_pack, gemm_k.h's cpu_q80_act_pack), per token: the 32
 * signed quants of each block as they are, then the blocks' scales as
 * floats, then each block's correction -128 * sum(a). A (row, token, block) integer sum is then
 * sum((w + 128) a) - 128 sum(a) = sum(w a), exact: the int32 accumulator
 * starts from the correction (one broadcast load) and takes eight
 * vpdpbusd whose signed operand is four bytes of the token broadcast from
 * memory ({1to16}), so a weight register serves every token of the tile
 * and a token's four bytes every row.
 *
 * Float order, per (row, token): acc = fma((float)s, dw * da, acc) over
 * the blocks, dw * da rounded first (gemm.h). Not the one-token kernel's
 * order (eight lanes folded at the end): the driver runs this only when
 * batch_exact is off.
 */
#include <string.h>

#include "cpu.h"
#include "gemm.h"
#include "gemm_k.h"
#include "../quant/quant_internal.h"

#if !defined(__x86_64__)
/* no kernels: the driver finds run NULL and takes the tile/row paths */
const struct cpu_gemm_kernels cpu_gemm_q8_0;
#else
#include <immintrin.h>

#define CPU_TARGET \
	__attribute__(( \
		target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define CPU_INLINE inline __attribute__((always_inline))

/* bytes of one block of a panel: 8 registers of quants, 16 scales */
#define GEMM_Q8_0_BLOCK (8 * 64 + CPU_GEMM_ROWS * 4)
/* tokens a register tile holds: 8 weight registers + 8 accumulators */
#define GEMM_Q8_0_TOKENS 8
/*
 * bytes ahead each row is prefetched while a panel is made (a decode
 * batch is bound by the weights' stream: gemm_run.c); 192-384 measure
 * alike, 512 worse
 */
#define GEMM_PF_AHEAD 256

static size_t gemm_q8_0_panel_bytes(int64_t n)
{
	return (size_t)(n / QK8_0) * GEMM_Q8_0_BLOCK;
}

/*
 * Block i of 16 rows into the panel: the rows' 32 quants as 16 x 8
 * dwords, transposed to 8 x 16 (rows r and r + 8 in the two 256-bit
 * halves of one register; the 8 x 8 transposes of both halves at once
 * with in-lane unpacks, then one two-source permute per output). Fully
 * unrolled: rolled, GCC keeps the arrays on the stack.
 */
CPU_TARGET static CPU_INLINE void
gemm_q8_0_panel_block(const uint8_t *const *rows, int64_t i, uint8_t *dst)
{
	const __m512i bias = _mm512_set1_epi8((char)0x80);
	const __m512i lo = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
	const __m512i hi = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
	const size_t off = sizeof(struct block_q8_0) * (size_t)i;
	__m512i z[8], t[8], u[8];
	__m256i h = _mm256_setzero_si256();
	int r, j;

#pragma GCC unroll 8
	for (r = 0; r < 8; r++) {
		const struct block_q8_0 *b0 =
			(const struct block_q8_0 *)(rows[r] + off);
		const struct block_q8_0 *b1 =
			(const struct block_q8_0 *)(rows[r + 8] + off);

		z[r] = _mm512_inserti64x4(
			_mm512_castsi256_si512(
				_mm256_loadu_si256((const __m256i *)b0->qs)),
			_mm256_loadu_si256((const __m256i *)b1->qs), 1);
	}
#pragma GCC unroll 16
	for (r = 0; r < CPU_GEMM_ROWS; r++)
		h = _mm256_insert_epi16(
			h,
			(short)((const struct block_q8_0 *)(rows[r] + off))->d,
			r);
#pragma GCC unroll 4
	for (r = 0; r < 8; r += 2) {
		t[r] = _mm512_unpacklo_epi32(z[r], z[r + 1]);
		t[r + 1] = _mm512_unpackhi_epi32(z[r], z[r + 1]);
	}
	/* u[j] (j < 4): dword j (low lane) and j + 4 of rows 0-3; u[4 + j] 4-7 */
#pragma GCC unroll 2
	for (r = 0; r < 8; r += 4) {
		u[r + 0] = _mm512_unpacklo_epi64(t[r], t[r + 2]);
		u[r + 1] = _mm512_unpackhi_epi64(t[r], t[r + 2]);
		u[r + 2] = _mm512_unpacklo_epi64(t[r + 1], t[r + 3]);
		u[r + 3] = _mm512_unpackhi_epi64(t[r + 1], t[r + 3]);
	}
#pragma GCC unroll 4
	for (j = 0; j < 4; j++) {
		__m512i a = _mm512_permutex2var_epi64(u[j], lo, u[4 + j]);
		__m512i b = _mm512_permutex2var_epi64(u[j], hi, u[4 + j]);

		_mm512_store_si512(dst + 64 * j, _mm512_xor_si512(a, bias));
		_mm512_store_si512(dst + 64 * (j + 4),
				   _mm512_xor_si512(b, bias));
	}
	_mm512_store_ps(dst + 8 * 64, _mm512_cvtph_ps(h));
}

/* The first GEMM_PF_AHEAD bytes of 16 rows from w into L2. */
static void gemm_q8_0_prefetch_heads(const uint8_t *w, size_t row_bytes)
{
	size_t o, head = row_bytes < GEMM_PF_AHEAD ? row_bytes : GEMM_PF_AHEAD;
	int r;

	for (r = 0; r < CPU_GEMM_ROWS; r++, w += row_bytes)
		for (o = 0; o < head; o += 64)
			__builtin_prefetch(w + o, 0, 2);
}

CPU_TARGET static void gemm_q8_0_panel(int64_t n, const void *w,
				       size_t row_bytes, int nr, void *panel)
{
	static const struct block_q8_0 zero_row[1];
	const uint8_t *rows[CPU_GEMM_ROWS];
	int64_t i, nb = n / QK8_0;
	int r;

	for (r = 0; r < CPU_GEMM_ROWS; r++)
		rows[r] = r < nr ? (const uint8_t *)w + row_bytes * r : NULL;
	/*
	 * the heads of the next panel's rows, while this one is made and run
	 * (each row's stream then keeps GEMM_PF_AHEAD ahead of itself)
	 */
	gemm_q8_0_prefetch_heads((const uint8_t *)w + row_bytes * CPU_GEMM_ROWS,
				 row_bytes);
	if (nr == CPU_GEMM_ROWS) {
		for (i = 0; i < nb; i++) {
			/* each row's stream, GEMM_PF_AHEAD bytes ahead */
#pragma GCC unroll 16
			for (r = 0; r < CPU_GEMM_ROWS; r++)
				__builtin_prefetch(
					rows[r] +
						sizeof(struct block_q8_0) * i +
						GEMM_PF_AHEAD,
					0, 2);
			gemm_q8_0_panel_block(rows, i,
					      (uint8_t *)panel +
						      GEMM_Q8_0_BLOCK * i);
		}
		return;
	}
	/* a short panel: the missing rows are one zero block, reread */
	for (i = 0; i < nb; i++) {
		const uint8_t *b[CPU_GEMM_ROWS];

		for (r = 0; r < CPU_GEMM_ROWS; r++)
			b[r] = r < nr ?
				       rows[r] + sizeof(struct block_q8_0) * i :
				       (const uint8_t *)zero_row;
		gemm_q8_0_panel_block(b, 0,
				      (uint8_t *)panel + GEMM_Q8_0_BLOCK * i);
	}
}

/*
 * T tokens (a compile-time count: the accumulators stay in registers)
 * against the panel: out[t] = the 16 rows' dots with token t.
 */
CPU_TARGET static CPU_INLINE void
gemm_q8_0_tile(const int T, int64_t nb, const uint8_t *panel,
	       const uint8_t *acts, size_t ab, __m512 *out,
	       const struct cpu_gemm_ahead *ahead)
{
	const int64_t n = nb * QK8_0;
	__m512 acc[GEMM_Q8_0_TOKENS];
	int64_t i;
	int t, j;

#pragma GCC unroll 16
	for (t = 0; t < T; t++)
		acc[t] = _mm512_setzero_ps();
	for (i = 0; i < nb; i++) {
		const uint8_t *p = panel + GEMM_Q8_0_BLOCK * i;
		__m512i wq[8];
		const __m512 dw = _mm512_load_ps(p + 8 * 64);

		cpu_gemm_ahead_step(ahead, i);
#pragma GCC unroll 8
		for (j = 0; j < 8; j++)
			wq[j] = _mm512_load_si512(p + 64 * j);
#pragma GCC unroll 16
		for (t = 0; t < T; t++) {
			const uint8_t *a = acts + ab * t;
			const int32_t *q = (const int32_t *)(a + QK8_0 * i);
			const float da = ((const float *)(a + n))[i];
			__m512i s = _mm512_set1_epi32(
				((const int32_t *)(a + n + 4 * nb))[i]);

#pragma GCC unroll 8
			for (j = 0; j < 8; j++)
				s = _mm512_dpbusd_epi32(
					s, wq[j], _mm512_set1_epi32(q[j]));
			acc[t] = _mm512_fmadd_ps(
				_mm512_cvtepi32_ps(s),
				_mm512_mul_ps(dw, _mm512_set1_ps(da)), acc[t]);
		}
	}
#pragma GCC unroll 16
	for (t = 0; t < T; t++)
		out[t] = acc[t];
}

CPU_TARGET static void gemm_q8_0_run(int64_t n, const void *panel, int nr,
				     const void *acts, int nt, float *const *y,
				     int64_t row0, const void *ahead,
				     size_t ahead_bytes)
{
	const size_t ab = cpu_q80_act_bytes(n);
	const __mmask16 m = (__mmask16)((1u << nr) - 1);
	const int64_t nb = n / QK8_0;
	/* spread over the first tile's blocks */
	struct cpu_gemm_ahead pf = cpu_gemm_ahead(ahead, ahead_bytes, nb);
	__m512 out[GEMM_Q8_0_TOKENS];
	int t, k, c;

	for (t = 0; t < nt; t += c, pf.bytes = 0) {
		const uint8_t *a = (const uint8_t *)acts + ab * t;
		const struct cpu_gemm_ahead *f = &pf;

		c = nt - t < GEMM_Q8_0_TOKENS ? nt - t : GEMM_Q8_0_TOKENS;
		switch (c) {
		case 8: gemm_q8_0_tile(8, nb, panel, a, ab, out, f); break;
		case 7: gemm_q8_0_tile(7, nb, panel, a, ab, out, f); break;
		case 6: gemm_q8_0_tile(6, nb, panel, a, ab, out, f); break;
		case 5: gemm_q8_0_tile(5, nb, panel, a, ab, out, f); break;
		case 4: gemm_q8_0_tile(4, nb, panel, a, ab, out, f); break;
		case 3: gemm_q8_0_tile(3, nb, panel, a, ab, out, f); break;
		case 2: gemm_q8_0_tile(2, nb, panel, a, ab, out, f); break;
		default: gemm_q8_0_tile(1, nb, panel, a, ab, out, f); break;
		}
		for (k = 0; k < c; k++)
			_mm512_mask_storeu_ps(y[t + k] + row0, m, out[k]);
	}
}

const struct cpu_gemm_kernels cpu_gemm_q8_0 = {
	.panel_bytes = gemm_q8_0_panel_bytes,
	.panel = gemm_q8_0_panel,
	.act_bytes = cpu_q80_act_bytes,
	.act_pack = cpu_q80_act_pack,
	.run = gemm_q8_0_run,
	.exact = false,
	/*
	 * llmfs-bench -n 32 -s N, Q8_0 model, 2 threads: at 4 tokens the
	 * tiles were as fast or 10-20% faster (a panel's 16 row streams wait
	 * on memory), from 5 the GEMM 14-70% faster.
	 */
	.min_tokens = 5,
	.packed = &cpu_gemm_q8_0_packed,
};
#endif
