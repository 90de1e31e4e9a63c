// SPDX-License-Identifier: MIT
/*
 * Q6_K held packed (gemm.h, struct cpu_gemm_packed): 16 rows re-laid once
 * at load into 52 units a superblock plus the d's, exactly as large as
 * the rows were, so that a decode step runs straight on the weights with
 * no panel to make (making gemm_k_avx512.c's 81-unit panel was the
 * largest cost of a 4-token step).
 *
 * Unit u of a superblock holds block bytes 4u..4u + 3 of each row (ql,
 * qh and the scales lie back to back in block_q6_K), so the units are the
 * transposed dwords that q6k_panel_sb makes. The kernels below do what
 * q6k_unpack did to them in registers, a group of 16 elements at a time
 * just before its products: the 6-bit quants as bytes 0..63, the -32
 * coming from the tokens' bsums. That is about ten register operations
 * a group, once for all the tokens of a tile. One core of a Zen 4 VM,
 * 151936 rows of 1024 (128 MB; a plain read of it runs at 21 GB/s), min
 * of 9: 4 tokens 5.3 ms against 10.9 for panel and run; one token
 * through run_exact 5.6 ms against 7.7 for dot_row on each row.
 *
 * Order: run is q6k_tile's per (row, token), bit for bit: per group the
 * int sum from -32 * bsum, times the scale into s, then one float chain
 * acc = fma(s, dw * da, acc). run_exact is cpu_q6_K_avx512's (ggml's
 * x86 order): eight int32 lanes a superblock, lane l taking elements
 * 4l..4l + 3 of every 32 (packed unit e goes to lane e % 8) times their
 * scale, less 32 (bsum[2l] sc[2l] + bsum[2l + 1] sc[2l + 1]); then
 * acc[l] = fma(d, lane, acc[l]) and hsum8's tree. With the rows in the
 * 16 lanes of a register, that is eight int and eight float registers a
 * token.
 *
 * pack and unpack_row are plain C: they run at load and on reads of the
 * weights' bytes, not per step. Try it: make build/tests/engine/
 * test_gemm_packed_q6k && build/tests/engine/test_gemm_packed_q6k
 */
#include <string.h>

#include "cpu.h"
#include "gemm.h"
#include "gemm_k.h"

#if !defined(__x86_64__)
static void q6kp_run(int64_t n, const void *panel, const void *acts, int nt,
		     float *const *y, int64_t row0, const void *ahead,
		     size_t ahead_bytes)
{
}
static void q6kp_run_exact(int64_t n, const void *panel, const void *acts,
			   int nt, float *const *y, int64_t row0,
			   const void *ahead, size_t ahead_bytes)
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

#define Q6KP_TILE 8

/* Unit u of the packed superblock at p (only 32-byte aligned: gemm.h). */
CPU_TARGET static GEMM_INLINE __m512i q6kp_unit(const uint8_t *p, int u)
{
	return _mm512_loadu_si512(p + GEMM_UNIT * u);
}

/* Four bytes at p, broadcast to every lane (vpdpbusd's memory operand). */
CPU_TARGET static GEMM_INLINE __m512i q6kp_bcast4(const uint8_t *p)
{
	int32_t v;

	memcpy(&v, p, sizeof(v));
	return _mm512_set1_epi32(v);
}

/*
 * The qh units of quarter (h, q) of the superblock (qh dwords 8h + 4q..,
 * the high bits of the elements 128h + 16q + 32k.. of groups k = 0..3),
 * split once into bits 0, 1, 4, 5 (qa) and 2, 3, 6, 7 (qb) of each byte,
 * so that each group's two bits reach bits 4, 5 with at most one 16-bit
 * shift and nothing above them: no mask per group.
 */
CPU_TARGET static GEMM_INLINE void q6kp_qh(const uint8_t *p, int h, int q,
					   __m512i qa[4], __m512i qb[4])
{
	int i;

	GEMM_UNROLL
	for (i = 0; i < 4; i++) {
		const __m512i v = q6kp_unit(p, Q6KP_QH + 8 * h + 4 * q + i);

		qa[i] = _mm512_and_si512(v, _mm512_set1_epi8(0x33));
		qb[i] = _mm512_and_si512(v, _mm512_set1_epi8((char)0xcc));
	}
}

/*
 * Group 8h + 2k + q (elements 128h + 32k + 16q..) as four units of bytes
 * 0..63, unit i elements 4i..4i + 3 of each row: ql's low nibbles (k < 2)
 * or high ones, below qh's bits 2k, 2k + 1 (dequantize_row_q6_K).
 */
CPU_TARGET static GEMM_INLINE void q6kp_group(const uint8_t *p, int h, int q,
					      int k, const __m512i qa[4],
					      const __m512i qb[4], __m512i w[4])
{
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	int i;

	GEMM_UNROLL
	for (i = 0; i < 4; i++) {
		__m512i ql = q6kp_unit(p, 16 * h + 8 * (k % 2) + 4 * q + i);
		__m512i hi = k == 0 ? _mm512_slli_epi16(qa[i], 4) :
			     k == 1 ? _mm512_slli_epi16(qb[i], 2) :
			     k == 2 ? qa[i] :
				      _mm512_srli_epi16(qb[i], 2);

		if (k >= 2)
			ql = _mm512_srli_epi16(ql, 4);
		/* m4 ? ql : hi, bitwise */
		w[i] = _mm512_ternarylogic_epi32(m4, ql, hi, 0xca);
	}
}

/*
 * Bytes b0 and b1 (< 4) of each dword of v as a pair of int16 (b0 low),
 * each shifted left by 8 - sh: vpshufb puts them in the high bytes, the
 * arithmetic shift sign-extends.
 */
CPU_TARGET static GEMM_INLINE __m512i q6kp_pair16(__m512i v, int b0, int b1,
						  int sh)
{
	const uint32_t c = 0x00800080u | (uint32_t)b0 << 8 | (uint32_t)b1 << 24;
	const __m512i ctl = _mm512_set4_epi32((int)(c + 0x0c000c00u),
					      (int)(c + 0x08000800u),
					      (int)(c + 0x04000400u), (int)c);

	return _mm512_srai_epi16(_mm512_shuffle_epi8(v, ctl), sh);
}

/* The 16 rows' d's of superblock ib as floats. */
CPU_TARGET static GEMM_INLINE __m512 q6kp_d(const uint8_t *dd, int64_t ib)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256(
		(const __m256i *)(dd + Q6KP_D_BYTES * (size_t)ib)));
}

/*
 * One superblock's integer sums s[t] of T tokens (q6k_tile's): per group
 * its four units made once and put through vpdpbusd for every token,
 * each token's sum from -32 * bsum, times the scale into s.
 */
CPU_TARGET static GEMM_INLINE void
q6kp_sums(const int T, const uint8_t *p, const uint8_t *at, size_t ab,
	  __m512i *s, const struct cpu_gemm_ahead *ahead, int64_t step)
{
	int j, k, t, i;

	/* quarters (h, q), unrolled: every offset a constant */
	GEMM_UNROLL
	for (j = 0; j < 4; j++) {
		const int h = j / 2, q = j % 2;
		__m512i qa[4], qb[4];

		cpu_gemm_ahead_step(ahead, step + j);
		q6kp_qh(p, h, q, qa, qb);
		GEMM_UNROLL
		for (k = 0; k < 4; k++) {
			const int g = 8 * h + 2 * k + q;
			/* its scale, byte g % 4: as int32, for vpmulld */
			const __m512i sc = _mm512_srai_epi32(
				_mm512_slli_epi32(q6kp_unit(p, Q6KP_SC + g / 4),
						  24 - 8 * (g % 4)),
				24);
			__m512i w[4];

			q6kp_group(p, h, q, k, qa, qb, w);
			GEMM_UNROLL
			for (t = 0; t < T; t++) {
				const uint8_t *a = at + ab * t + 16 * g;
				__m512i sum = q6kp_bcast4(at + ab * t +
							  GEMM_QK + 4 * g);

				GEMM_UNROLL
				for (i = 0; i < 4; i++)
					sum = _mm512_dpbusd_epi32(
						sum, w[i],
						q6kp_bcast4(a + 4 * i));
				s[t] = _mm512_add_epi32(
					s[t], _mm512_mullo_epi32(sum, sc));
			}
		}
	}
}

/* T tokens (T <= Q6KP_TILE) against the panel p, into y[t][row0..]. */
CPU_TARGET static GEMM_INLINE void q6kp_tile(const int T, int64_t nb,
					     const uint8_t *p, const uint8_t *a,
					     size_t ab, float *const *y,
					     int64_t row0,
					     const struct cpu_gemm_ahead *ahead)
{
	const uint8_t *dd = p + Q6KP_SB * nb;
	const float *da[Q6KP_TILE];
	__m512 acc[Q6KP_TILE];
	int64_t ib;
	int t;

	GEMM_UNROLL
	for (t = 0; t < T; t++) {
		acc[t] = _mm512_setzero_ps();
		da[t] = (const float *)(a + ab * t + Q6K_ACT * nb);
	}
	for (ib = 0; ib < nb; ib++, p += Q6KP_SB) {
		__m512i s[Q6KP_TILE];
		__m512 dw;

		GEMM_UNROLL
		for (t = 0; t < T; t++)
			s[t] = _mm512_setzero_si512();
		q6kp_sums(T, p, a + Q6K_ACT * ib, ab, s, ahead, 4 * ib);
		dw = q6kp_d(dd, ib);
		GEMM_UNROLL
		for (t = 0; t < T; t++)
			acc[t] = _mm512_fmadd_ps(
				_mm512_cvtepi32_ps(s[t]),
				_mm512_mul_ps(dw, _mm512_set1_ps(da[t][ib])),
				acc[t]);
	}
	GEMM_UNROLL
	for (t = 0; t < T; t++)
		_mm512_storeu_ps(y[t] + row0, acc[t]);
}

CPU_TARGET static void q6kp_run(int64_t n, const void *panel, const void *acts,
				int nt, float *const *y, int64_t row0,
				const void *ahead, size_t ahead_bytes)
{
	const size_t ab = cpu_q6k_act_bytes(n);
	const int64_t nb = n / GEMM_QK;
	const uint8_t *a = acts;
	/* spread over the first tile's four quarters a superblock */
	struct cpu_gemm_ahead pf = cpu_gemm_ahead(ahead, ahead_bytes, 4 * nb);
	int t = 0;

	for (; t + Q6KP_TILE <= nt; t += Q6KP_TILE, pf.bytes = 0)
		q6kp_tile(Q6KP_TILE, nb, panel, a + ab * t, ab, y + t, row0,
			  &pf);
	switch (nt - t) {
	case 7:
		q6kp_tile(7, nb, panel, a + ab * t, ab, y + t, row0, &pf);
		break;
	case 6:
		q6kp_tile(6, nb, panel, a + ab * t, ab, y + t, row0, &pf);
		break;
	case 5:
		q6kp_tile(5, nb, panel, a + ab * t, ab, y + t, row0, &pf);
		break;
	case 4:
		q6kp_tile(4, nb, panel, a + ab * t, ab, y + t, row0, &pf);
		break;
	case 3:
		q6kp_tile(3, nb, panel, a + ab * t, ab, y + t, row0, &pf);
		break;
	case 2:
		q6kp_tile(2, nb, panel, a + ab * t, ab, y + t, row0, &pf);
		break;
	case 1:
		q6kp_tile(1, nb, panel, a + ab * t, ab, y + t, row0, &pf);
		break;
	default: break;
	}
}

/*
 * One superblock of one token in cpu_q6_K_avx512's eight lanes, L[l]
 * lane l of each row. Each unit's products go through vpmaddubsw (two
 * products of 63 * 128 at most: no saturation) and vpdpwssd against its
 * scale in both int16 halves, into the lane of its unit; each lane
 * starts at its -32 (bsum sc) pair, with 32 sc against -bsum (int16
 * both: -32 bsum is not). Integers, exact in any order.
 */
CPU_TARGET static GEMM_INLINE void
q6kp_lanes(const uint8_t *p, const uint8_t *at, __m512i L[8],
	   const struct cpu_gemm_ahead *ahead, int64_t step)
{
	/* -bsum[2l], -bsum[2l + 1] as the int16 pair of dword l */
	const __m512i nbs = _mm512_castsi256_si512(_mm512_cvtepi32_epi16(
		_mm512_srai_epi32(_mm512_loadu_si512(at + GEMM_QK), 5)));
	int j, k, l, i;

	GEMM_UNROLL
	for (l = 0; l < 8; l++)
		L[l] = _mm512_dpwssd_epi32(
			_mm512_setzero_si512(),
			q6kp_pair16(q6kp_unit(p, Q6KP_SC + l / 2), 2 * (l % 2),
				    2 * (l % 2) + 1, 3),
			_mm512_permutexvar_epi32(_mm512_set1_epi32(l), nbs));
	/* quarters (h, q), unrolled: every offset a constant */
	GEMM_UNROLL
	for (j = 0; j < 4; j++) {
		const int h = j / 2, q = j % 2;
		__m512i qa[4], qb[4];

		cpu_gemm_ahead_step(ahead, step + j);
		q6kp_qh(p, h, q, qa, qb);
		GEMM_UNROLL
		for (k = 0; k < 4; k++) {
			const int g = 8 * h + 2 * k + q;
			const __m512i sc = q6kp_pair16(
				q6kp_unit(p, Q6KP_SC + g / 4), g % 4, g % 4, 8);
			__m512i w[4];

			q6kp_group(p, h, q, k, qa, qb, w);
			/* unit 4g + i: lane 4q + i */
			GEMM_UNROLL
			for (i = 0; i < 4; i++)
				L[4 * q + i] = _mm512_dpwssd_epi32(
					L[4 * q + i],
					_mm512_maddubs_epi16(
						w[i], q6kp_bcast4(at + 16 * g +
								  4 * i)),
					sc);
		}
	}
}

/* One token against the panel p in the one-token order, into y[row0..]. */
CPU_TARGET static void q6kp_exact1(int64_t nb, const uint8_t *p,
				   const uint8_t *a, float *y,
				   const struct cpu_gemm_ahead *ahead)
{
	const uint8_t *dd = p + Q6KP_SB * nb;
	const float *da = (const float *)(a + Q6K_ACT * nb);
	__m512 acc[8], r[4];
	int64_t ib;
	int l;

	GEMM_UNROLL
	for (l = 0; l < 8; l++)
		acc[l] = _mm512_setzero_ps();
	for (ib = 0; ib < nb; ib++, p += Q6KP_SB) {
		__m512i L[8];
		__m512 d;

		q6kp_lanes(p, a + Q6K_ACT * ib, L, ahead, 4 * ib);
		d = _mm512_mul_ps(q6kp_d(dd, ib), _mm512_set1_ps(da[ib]));
		GEMM_UNROLL
		for (l = 0; l < 8; l++)
			acc[l] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(L[l]),
						 acc[l]);
	}
	/* hsum8: high half + low half, then (0 + 2) + (1 + 3) */
	GEMM_UNROLL
	for (l = 0; l < 4; l++)
		r[l] = _mm512_add_ps(acc[l + 4], acc[l]);
	_mm512_storeu_ps(y, _mm512_add_ps(_mm512_add_ps(r[0], r[2]),
					  _mm512_add_ps(r[1], r[3])));
}

/* Token by token: only the one-token step (nt 1) needs to be fast. */
CPU_TARGET static void q6kp_run_exact(int64_t n, const void *panel,
				      const void *acts, int nt, float *const *y,
				      int64_t row0, const void *ahead,
				      size_t ahead_bytes)
{
	const size_t ab = cpu_q6k_act_bytes(n);
	const int64_t nb = n / GEMM_QK;
	/* spread over the first token's four quarters a superblock */
	struct cpu_gemm_ahead pf = cpu_gemm_ahead(ahead, ahead_bytes, 4 * nb);
	int t;

	for (t = 0; t < nt; t++, pf.bytes = 0)
		q6kp_exact1(nb, panel, (const uint8_t *)acts + ab * t,
			    y[t] + row0, &pf);
}
#endif /* __x86_64__ */

const struct cpu_gemm_packed cpu_gemm_q6_K_packed = {
	.pack = cpu_q6k_pack,
	.unpack_row = cpu_q6k_unpack_row,
	.run = q6kp_run,
	.run_exact = q6kp_run_exact,
};
