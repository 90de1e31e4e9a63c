// SPDX-License-Identifier: MIT
/*
 * Q4_K held packed (gemm.h, struct cpu_gemm_packed): 16 rows re-laid once
 * at load into 36 units a superblock, no larger than the rows were, so
 * that a decode step runs straight on the weights with no panel to make.
 *
 * Units 0..31 are the quants exactly as gemm_k_avx512.c's expanded panel
 * holds them (qs dword j of each row in lane r), so the tile kernel below
 * is q4k_tile's. What the expanded panel held precomputed (eight int32
 * scales, four int16 pairs of mins, d and dmin as floats: ten more units)
 * is made here per superblock from units 32..35, 16 rows at once with
 * ggml's kmask unpacking; that is a few dozen register operations against
 * the 64 vpdpbusd of each token, and 22% fewer bytes to stream than the
 * expanded panel (36 units, not 46).
 *
 * Order: as q4k_tile, dot.c's dot_q4_k_repacked per (row, token), so run
 * is also run_exact: the bits of the one-token path of a repacked tensor
 * and of cpu_gemm_q4_K's panel and run.
 *
 * pack and unpack_row are plain C: they run at load and on reads of the
 * weights' bytes, not per step. Tested by
 * tests/engine/test_gemm_packed_q4k.c against cpu_gemm_q4_K and dot_row.
 */
#include <string.h>

#include "cpu.h"
#include "gemm.h"
#include "gemm_k.h"

/* bytes of one packed superblock of the 16 rows */
#define Q4KP_SB (Q4K_PACKED_UNITS * GEMM_UNIT)

#if !defined(__x86_64__)
static void q4kp_run(int64_t n, const void *panel, const void *acts, int nt,
		     float *const *y, int64_t row0, const void *ahead,
		     size_t ahead_bytes)
{
}
#else
#include <immintrin.h>

#define CPU_TARGET \
	__attribute__(( \
		target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define GEMM_INLINE inline __attribute__((always_inline))
/* the loops over a tile's tokens, unrolled so each accumulator is a register */
#define GEMM_UNROLL _Pragma("GCC unroll 16")

/* tokens a tile, as q4k_run's: its accumulators fill the 32 registers */
#define Q4KP_TILE 4

/* Unit u of the packed superblock at p (only 32-byte aligned: gemm.h). */
CPU_TARGET static GEMM_INLINE __m512i q4kp_unit(const uint8_t *p, int u)
{
	return _mm512_loadu_si512(p + GEMM_UNIT * u);
}

/*
 * The eight 6-bit scales of each row, four bytes to an int32 lane (lane
 * r, byte j % 4 of sc[j / 4]: sub-block j), from the scale units: ggml's
 * utmp unpacking, the same for every row, so done on 16 rows at once.
 */
CPU_TARGET static GEMM_INLINE void q4kp_scales(const uint8_t *p, __m512i sc[2])
{
	const __m512i u1 = q4kp_unit(p, Q4KP_SC),
		      u3 = q4kp_unit(p, Q4KP_SC + 2);

	sc[0] = _mm512_and_si512(u1, _mm512_set1_epi32(0x3f3f3f3f));
	sc[1] = _mm512_or_si512(
		_mm512_and_si512(u3, _mm512_set1_epi32(0x0f0f0f0f)),
		_mm512_slli_epi32(
			_mm512_and_si512(_mm512_srli_epi32(u1, 6),
					 _mm512_set1_epi32(0x03030303)),
			4));
}

/* Byte k (< 4) of each int32 lane of v, as an int32. */
CPU_TARGET static GEMM_INLINE __m512i q4kp_byte(__m512i v, int k)
{
	return _mm512_and_si512(_mm512_srli_epi32(v, 8 * k),
				_mm512_set1_epi32(0xff));
}

/*
 * The eight mins of each row as int16 pairs (mn[k]: sub-blocks 2k, 2k + 1)
 * for vpdpwssd against the tokens' bsum pairs: the other half of the utmp
 * unpacking, done after the quants so its registers are free by then.
 */
CPU_TARGET static GEMM_INLINE void q4kp_mins(const uint8_t *p, __m512i mn[4])
{
	const __m512i u2 = q4kp_unit(p, Q4KP_SC + 1);
	const __m512i u3 = q4kp_unit(p, Q4KP_SC + 2);
	const __m512i m4 = _mm512_set1_epi32(0x0f0f0f0f);
	__m512i m[2];
	int k;

	m[0] = _mm512_and_si512(u2, _mm512_set1_epi32(0x3f3f3f3f));
	m[1] = _mm512_or_si512(
		_mm512_and_si512(_mm512_srli_epi32(u3, 4), m4),
		_mm512_slli_epi32(
			_mm512_and_si512(_mm512_srli_epi32(u2, 6),
					 _mm512_set1_epi32(0x03030303)),
			4));
	GEMM_UNROLL
	for (k = 0; k < 4; k++) {
		__m512i v = _mm512_srli_epi32(m[k / 2], 16 * (k % 2));

		mn[k] = _mm512_or_si512(
			_mm512_and_si512(v, _mm512_set1_epi32(0xff)),
			_mm512_slli_epi32(
				_mm512_and_si512(v, _mm512_set1_epi32(0xff00)),
				8));
	}
}

/*
 * One superblock's integer sums of T tokens: per pair of sub-blocks
 * (2c, 2c + 1), each quant unit unpacked once and put through vpdpbusd
 * for every token, the pair's sums times their scales into s.
 */
CPU_TARGET static GEMM_INLINE void
q4kp_sums(const int T, const uint8_t *p, const uint8_t *at, size_t ab,
	  __m512i *s, const struct cpu_gemm_ahead *ahead, int64_t step)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	__m512i sc[2];
	int t, c, g;

	q4kp_scales(p, sc);
	for (c = 0; c < 4; c++) {
		const __m512i s0 = q4kp_byte(sc[c / 2], 2 * (c % 2));
		const __m512i s1 = q4kp_byte(sc[c / 2], 2 * (c % 2) + 1);
		__m512i lo[Q4KP_TILE], hi[Q4KP_TILE];

		cpu_gemm_ahead_step(ahead, step + c);
		GEMM_UNROLL
		for (t = 0; t < T; t++) {
			lo[t] = _mm512_setzero_si512();
			hi[t] = _mm512_setzero_si512();
		}
		GEMM_UNROLL
		for (g = 0; g < 8; g++) {
			const __m512i wq = q4kp_unit(p, 8 * c + g);
			const __m512i wl = _mm512_and_si512(wq, m4);
			const __m512i wh = _mm512_and_si512(
				_mm512_srli_epi16(wq, 4), m4);

			GEMM_UNROLL
			for (t = 0; t < T; t++) {
				const uint8_t *q = at + ab * t + 64 * c + 4 * g;
				int32_t a0, a1;

				memcpy(&a0, q, 4);
				memcpy(&a1, q + 32, 4);
				lo[t] = _mm512_dpbusd_epi32(
					lo[t], wl, _mm512_set1_epi32(a0));
				hi[t] = _mm512_dpbusd_epi32(
					hi[t], wh, _mm512_set1_epi32(a1));
			}
		}
		GEMM_UNROLL
		for (t = 0; t < T; t++)
			s[t] = _mm512_add_epi32(
				s[t], _mm512_add_epi32(
					      _mm512_mullo_epi32(lo[t], s0),
					      _mm512_mullo_epi32(hi[t], s1)));
	}
}

/*
 * T tokens (T <= Q4KP_TILE) against the packed panel p, into
 * y[t][row0..row0 + 15]: per superblock the integer sums, then the mins
 * against the bsum pairs and the two FMAs of dot_q4_k_repacked.
 */
CPU_TARGET static GEMM_INLINE void q4kp_tile(const int T, int64_t nb,
					     const uint8_t *p, const uint8_t *a,
					     size_t ab, float *const *y,
					     int64_t row0,
					     const struct cpu_gemm_ahead *ahead)
{
	const float *da[Q4KP_TILE];
	__m512 acc[Q4KP_TILE], accm[Q4KP_TILE];
	int64_t ib;
	int t, k;

	GEMM_UNROLL
	for (t = 0; t < T; t++) {
		acc[t] = _mm512_setzero_ps();
		accm[t] = _mm512_setzero_ps();
		da[t] = (const float *)(a + ab * t + Q4K_ACT * nb);
	}
	for (ib = 0; ib < nb; ib++, p += Q4KP_SB) {
		const uint8_t *at = a + Q4K_ACT * ib;
		const __m512i dd = q4kp_unit(p, Q4KP_D);
		const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
		const __m512 dm = _mm512_cvtph_ps(
			_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
		__m512i s[Q4KP_TILE], mn[4];

		GEMM_UNROLL
		for (t = 0; t < T; t++)
			s[t] = _mm512_setzero_si512();
		q4kp_sums(T, p, at, ab, s, ahead, 4 * ib);
		q4kp_mins(p, mn);
		GEMM_UNROLL
		for (t = 0; t < T; t++) {
			const uint8_t *bp = at + ab * t + GEMM_QK;
			const __m512 d = _mm512_set1_ps(da[t][ib]);
			__m512i smin = _mm512_setzero_si512();

			GEMM_UNROLL
			for (k = 0; k < 4; k++) {
				int32_t pair;

				memcpy(&pair, bp + 4 * k, 4);
				smin = _mm512_dpwssd_epi32(
					smin, mn[k], _mm512_set1_epi32(pair));
			}
			acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]),
						 _mm512_mul_ps(dw, d), acc[t]);
			accm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(smin),
						  _mm512_mul_ps(dm, d),
						  accm[t]);
		}
	}
	GEMM_UNROLL
	for (t = 0; t < T; t++)
		_mm512_storeu_ps(y[t] + row0, _mm512_sub_ps(acc[t], accm[t]));
}

CPU_TARGET static void q4kp_run(int64_t n, const void *panel, const void *acts,
				int nt, float *const *y, int64_t row0,
				const void *ahead, size_t ahead_bytes)
{
	const size_t ab = cpu_q4k_act_bytes(n);
	const int64_t nb = n / GEMM_QK;
	const uint8_t *a = acts;
	/* spread over the first tile's four steps a superblock */
	struct cpu_gemm_ahead pf = cpu_gemm_ahead(ahead, ahead_bytes, 4 * nb);
	int t = 0;

	for (; t + Q4KP_TILE <= nt; t += Q4KP_TILE, pf.bytes = 0)
		q4kp_tile(Q4KP_TILE, nb, panel, a + ab * t, ab, y + t, row0,
			  &pf);
	switch (nt - t) {
	case 3:
		q4kp_tile(3, nb, panel, a + ab * t, ab, y + t, row0, &pf);
		break;
	case 2:
		q4kp_tile(2, nb, panel, a + ab * t, ab, y + t, row0, &pf);
		break;
	case 1:
		q4kp_tile(1, nb, panel, a + ab * t, ab, y + t, row0, &pf);
		break;
	default: break;
	}
}
#endif /* __x86_64__ */

const struct cpu_gemm_packed cpu_gemm_q4_K_packed = {
	.pack = cpu_q4k_pack,
	.unpack_row = cpu_q4k_unpack_row,
	.run = q4kp_run,
	/* already the one-token path's order (see the top) */
	.run_exact = q4kp_run,
	/* that order is dot_row_fn(IO_TYPE_Q4_K, true)'s */
	.repacked_order = true,
};
