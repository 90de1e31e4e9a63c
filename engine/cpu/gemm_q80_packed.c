// SPDX-License-Identifier: MIT
/*
 * Q8_0 held packed (gemm.h, struct cpu_gemm_packed), AVX-512: 16 rows
 * re-laid once at load, 8 units a block (unit j: qs dword j of each row)
 * and the d's after all blocks, exactly as large as the rows, so that a
 * step of one token or a few runs straight on the weights: no panel made
 * per step (gemm_avx512.c's panel was most of a few-token step) and one
 * sequential stream per thread instead of one per row.
 *
 * The quants stay signed as the file has them; vpdpbusd wants unsigned
 * weights, so each unit is XORed with 0x80 in a register (w + 128), once
 * for all the tokens of a tile, and the tokens' corrections (-128 sum(a),
 * gemm_k.h's cpu_q80_act_pack) start the int32 sums: exact for any byte
 * on either side.
 *
 * Order: run is gemm_avx512.c's (one float chain per (row, token),
 * acc = fma((float)s, dw * da, acc)), bit for bit; run_exact is
 * quant_q8_0_dot_x86's: eight int32 lanes a block, lane j the four
 * products of unit j (elements 4j..4j + 3, as ggml's 32-byte loads put
 * them), acc[j] = fma(dw * da, lane, acc[j]), then hsum8's tree, with the
 * 16 rows in the lanes: no horizontal sum at all.
 *
 * Tested by tests/engine/test_gemm_packed.c against cpu_gemm_q8_0 and
 * dot_row.
 */
#include <string.h>

#include "cpu.h"
#include "gemm.h"
#include "gemm_k.h"

#if !defined(__x86_64__)
const struct cpu_gemm_packed cpu_gemm_q8_0_packed;
#else
#include <immintrin.h>

#define CPU_TARGET \
	__attribute__(( \
		target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define GEMM_INLINE inline __attribute__((always_inline))
#define GEMM_UNROLL _Pragma("GCC unroll 16")

#define Q80P_TILE 8

/* Unit u of block ib of the panel p, + 128 (vpdpbusd's unsigned side). */
CPU_TARGET static GEMM_INLINE __m512i q80p_unit(const uint8_t *p, int64_t ib,
						int u)
{
	return _mm512_xor_si512(
		_mm512_loadu_si512(p + Q80P_SB * ib + GEMM_UNIT * u),
		_mm512_set1_epi8((char)0x80));
}

/* The 16 rows' d's of block ib as floats. */
CPU_TARGET static GEMM_INLINE __m512 q80p_d(const uint8_t *p, int64_t nb,
					    int64_t ib)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256(
		(const __m256i *)(p + Q80P_SB * nb + Q80P_D_BYTES * ib)));
}

/* Four bytes at p, broadcast to every lane. */
CPU_TARGET static GEMM_INLINE __m512i q80p_bcast4(const void *p)
{
	int32_t v;

	memcpy(&v, p, sizeof(v));
	return _mm512_set1_epi32(v);
}

/* T tokens (T <= Q80P_TILE) against the panel p, into y[t][row0..]. */
CPU_TARGET static GEMM_INLINE void
q80p_tile(const int T, int64_t n, const uint8_t *p, const uint8_t *a, size_t ab,
	  float *const *y, int64_t row0, const struct cpu_gemm_ahead *ahead)
{
	const int64_t nb = n / 32;
	__m512 acc[Q80P_TILE];
	int64_t ib;
	int t, j;

	GEMM_UNROLL
	for (t = 0; t < T; t++)
		acc[t] = _mm512_setzero_ps();
	for (ib = 0; ib < nb; ib++) {
		const __m512 dw = q80p_d(p, nb, ib);
		__m512i wq[8];

		cpu_gemm_ahead_step(ahead, ib);
		GEMM_UNROLL
		for (j = 0; j < 8; j++)
			wq[j] = q80p_unit(p, ib, j);
		GEMM_UNROLL
		for (t = 0; t < T; t++) {
			const uint8_t *at = a + ab * t;
			const float da = ((const float *)(at + n))[ib];
			__m512i s = q80p_bcast4(at + n + 4 * nb + 4 * ib);

			GEMM_UNROLL
			for (j = 0; j < 8; j++)
				s = _mm512_dpbusd_epi32(
					s, wq[j],
					q80p_bcast4(at + 32 * ib + 4 * j));
			acc[t] = _mm512_fmadd_ps(
				_mm512_cvtepi32_ps(s),
				_mm512_mul_ps(dw, _mm512_set1_ps(da)), acc[t]);
		}
	}
	GEMM_UNROLL
	for (t = 0; t < T; t++)
		_mm512_storeu_ps(y[t] + row0, acc[t]);
}

CPU_TARGET static void q80p_run(int64_t n, const void *panel, const void *acts,
				int nt, float *const *y, int64_t row0,
				const void *ahead, size_t ahead_bytes)
{
	const size_t ab = cpu_q80_act_bytes(n);
	const uint8_t *a = acts;
	/* spread over the first tile's blocks */
	struct cpu_gemm_ahead pf = cpu_gemm_ahead(ahead, ahead_bytes, n / 32);
	int t = 0;

	for (; t + Q80P_TILE <= nt; t += Q80P_TILE, pf.bytes = 0)
		q80p_tile(Q80P_TILE, n, panel, a + ab * t, ab, y + t, row0,
			  &pf);
	switch (nt - t) {
	case 7: q80p_tile(7, n, panel, a + ab * t, ab, y + t, row0, &pf); break;
	case 6: q80p_tile(6, n, panel, a + ab * t, ab, y + t, row0, &pf); break;
	case 5: q80p_tile(5, n, panel, a + ab * t, ab, y + t, row0, &pf); break;
	case 4: q80p_tile(4, n, panel, a + ab * t, ab, y + t, row0, &pf); break;
	case 3: q80p_tile(3, n, panel, a + ab * t, ab, y + t, row0, &pf); break;
	case 2: q80p_tile(2, n, panel, a + ab * t, ab, y + t, row0, &pf); break;
	case 1: q80p_tile(1, n, panel, a + ab * t, ab, y + t, row0, &pf); break;
	default: break;
	}
}

/* One token against the panel p in the one-token order, into y[0..15]. */
CPU_TARGET static void q80p_exact1(int64_t n, const uint8_t *p,
				   const uint8_t *a, float *y,
				   const struct cpu_gemm_ahead *ahead)
{
	const int64_t nb = n / 32;
	const float *da = (const float *)(a + n);
	const int32_t *unit = (const int32_t *)(a + n + 8 * nb);
	__m512 acc[8], r[4];
	int64_t ib;
	int j;

	GEMM_UNROLL
	for (j = 0; j < 8; j++)
		acc[j] = _mm512_setzero_ps();
	for (ib = 0; ib < nb; ib++) {
		const __m512 d = _mm512_mul_ps(q80p_d(p, nb, ib),
					       _mm512_set1_ps(da[ib]));

		cpu_gemm_ahead_step(ahead, ib);
		GEMM_UNROLL
		for (j = 0; j < 8; j++) {
			__m512i s = _mm512_dpbusd_epi32(
				_mm512_set1_epi32(unit[8 * ib + j]),
				q80p_unit(p, ib, j),
				q80p_bcast4(a + 32 * ib + 4 * j));

			acc[j] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s),
						 acc[j]);
		}
	}
	/* hsum8: high half + low half, then (0 + 2) + (1 + 3) */
	GEMM_UNROLL
	for (j = 0; j < 4; j++)
		r[j] = _mm512_add_ps(acc[j + 4], acc[j]);
	_mm512_storeu_ps(y, _mm512_add_ps(_mm512_add_ps(r[0], r[2]),
					  _mm512_add_ps(r[1], r[3])));
}

CPU_TARGET static void q80p_run_exact(int64_t n, const void *panel,
				      const void *acts, int nt, float *const *y,
				      int64_t row0, const void *ahead,
				      size_t ahead_bytes)
{
	const size_t ab = cpu_q80_act_bytes(n);
	struct cpu_gemm_ahead pf = cpu_gemm_ahead(ahead, ahead_bytes, n / 32);
	int t;

	for (t = 0; t < nt; t++, pf.bytes = 0)
		q80p_exact1(n, panel, (const uint8_t *)acts + ab * t,
			    y[t] + row0, &pf);
}

const struct cpu_gemm_packed cpu_gemm_q8_0_packed = {
	.pack = cpu_q80_pack,
	.unpack_row = cpu_q80_unpack_row,
	.run = q80p_run,
	.run_exact = q80p_run_exact,
};
#endif /* __x86_64__ */
