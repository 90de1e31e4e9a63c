// SPDX-License-Identifier: MIT
/*
 * The GEMM kernels of the AVX2 level (gemm.h; engine/cpu/isa.h) on the
 * packed layouts of Q8_0, Q4_K and Q6_K (gemm_layout.c), bit for bit the
 * floats of the scalar level's (gemm_scalar.c) and the AVX-512 ones.
 *
 * A 64-byte unit holds one dword of each of 16 rows; here its two 32-byte
 * halves are rows 0..7 and 8..15, and a kernel makes two passes over a
 * panel, one per half, each with eight rows in the lanes (a panel is
 * 13 KB for a 1024-wide Q6_K row, 161 KB for the 8B's 12288-wide
 * ffn_down: the second pass reads it from L1 or L2; the prefetch of the
 * panel after next is spread over both passes). A per-step panel
 * (a matrix not packed at load) is packed into the same layout first, so
 * one set of kernels serves both.
 *
 * The integer sums: vpmaddubsw (unsigned x signed bytes, neighbours added
 * in int16) then vpmaddwd (int16 pairs into int32, by one or by the
 * sub-block's scale). Nothing saturates: Q4_K's nibbles are summed over
 * the eight units of a sub-block in int16 (8 x 2 x 15 x 128 = 30720),
 * Q6_K's 6-bit quants over two units (2 x 2 x 63 x 128 = 32256), Q8_0
 * runs ggml's sign trick, |w| . sign(a, w) (2 x 128 x 127: the
 * activations are in [-127, 127], isa.h). Integer sums are exact, so
 * only the float steps' order matters, and it is the scalar level's.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "cpu.h"
#include "gemm.h"
#include "gemm_k.h"

#define CPU_TARGET __attribute__((target("avx2,fma,f16c")))
#define GEMM_INLINE inline __attribute__((always_inline))
#define GEMM_UNROLL _Pragma("GCC unroll 16")

/* fn(T, ...) for the tile of c (1..8) tokens: T a constant in each */
#define GEMM_TILES(fn, c, ...) \
	do { \
		switch (c) { \
		case 8: fn(8, __VA_ARGS__); break; \
		case 7: fn(7, __VA_ARGS__); break; \
		case 6: fn(6, __VA_ARGS__); break; \
		case 5: fn(5, __VA_ARGS__); break; \
		case 4: fn(4, __VA_ARGS__); break; \
		case 3: fn(3, __VA_ARGS__); break; \
		case 2: fn(2, __VA_ARGS__); break; \
		default: fn(1, __VA_ARGS__); break; \
		} \
	} while (0)

/* Half h (rows 8h..8h + 7) of unit u at p. */
CPU_TARGET static GEMM_INLINE __m256i gemm_half(const uint8_t *p, int u, int h)
{
	return _mm256_loadu_si256(
		(const __m256i *)(p + GEMM_UNIT * u + 32 * h));
}

/* Four bytes at p, broadcast to every lane. */
CPU_TARGET static GEMM_INLINE __m256i gemm_bcast4(const void *p)
{
	int32_t v;

	memcpy(&v, p, sizeof(v));
	return _mm256_set1_epi32(v);
}

/* 8 IEEE halves at p as floats (the rows' d's of a half). */
CPU_TARGET static GEMM_INLINE __m256 gemm_d8(const uint8_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* Rows 8h.. of a token's result into y + row0 + 8h: only rows below nr. */
CPU_TARGET static GEMM_INLINE void gemm_store(float *y, int h, int nr, __m256 v)
{
	const int m = nr - 8 * h;
	float tmp[8];

	if (m >= 8) {
		_mm256_storeu_ps(y + 8 * h, v);
		return;
	}
	_mm256_storeu_ps(tmp, v);
	memcpy(y + 8 * h, tmp, sizeof(float) * (size_t)(m > 0 ? m : 0));
}

/* lane l = w[4l..4l+3] . a[4l..4l+3] (a in [-127, 127]) */
CPU_TARGET static GEMM_INLINE __m256i gemm_s8(__m256i aw, __m256i w, __m256i a)
{
	return _mm256_madd_epi16(
		_mm256_maddubs_epi16(aw, _mm256_sign_epi8(a, w)),
		_mm256_set1_epi16(1));
}

/* ---- Q8_0 -------------------------------------------------------------- */

#define Q80_TILE 8

/*
 * T tokens against half h of the panel: acc = fma((float)s, dw * da, acc)
 * per block, s over its eight units.
 */
CPU_TARGET static GEMM_INLINE void
q80_tile(const int T, int64_t n, const uint8_t *p, int h, const uint8_t *a,
	 size_t ab, float *const *y, int64_t row0, int nr,
	 const struct cpu_gemm_ahead *ahead)
{
	const int64_t nb = n / 32;
	__m256 acc[8];
	int64_t ib;
	int t, j;

	GEMM_UNROLL
	for (t = 0; t < T; t++)
		acc[t] = _mm256_setzero_ps();
	for (ib = 0; ib < nb; ib++) {
		const uint8_t *pb = p + Q80P_SB * ib;
		const __m256 dw = gemm_d8(p + Q80P_SB * nb + Q80P_D_BYTES * ib +
					  16 * h);
		__m256i s[8];

		cpu_gemm_ahead_step(ahead, ib);
		GEMM_UNROLL
		for (t = 0; t < T; t++)
			s[t] = _mm256_setzero_si256();
		GEMM_UNROLL
		for (j = 0; j < 8; j++) {
			const __m256i w = gemm_half(pb, j, h);
			const __m256i aw = _mm256_abs_epi8(w);

			GEMM_UNROLL
			for (t = 0; t < T; t++)
				s[t] = _mm256_add_epi32(
					s[t],
					gemm_s8(aw, w,
						gemm_bcast4(a + ab * t +
							    32 * ib + 4 * j)));
		}
		GEMM_UNROLL
		for (t = 0; t < T; t++) {
			const float da = ((const float *)(a + ab * t + n))[ib];

			acc[t] = _mm256_fmadd_ps(
				_mm256_cvtepi32_ps(s[t]),
				_mm256_mul_ps(dw, _mm256_set1_ps(da)), acc[t]);
		}
	}
	GEMM_UNROLL
	for (t = 0; t < T; t++)
		gemm_store(y[t] + row0, h, nr, acc[t]);
}

CPU_TARGET static void q80_rows(int64_t n, const void *panel, int nr,
				const void *acts, int nt, float *const *y,
				int64_t row0, const void *ahead,
				size_t ahead_bytes)
{
	const size_t ab = cpu_q80_act_bytes(n);
	const uint8_t *a = acts;
	const int halves = nr > 8 ? 2 : 1;
	int h, t, c;

	for (h = 0; h < halves; h++) {
		struct cpu_gemm_ahead pf = cpu_gemm_ahead_part(
			ahead, ahead_bytes, n / 32, h, halves);

		for (t = 0; t < nt; t += c, pf.bytes = 0) {
			c = nt - t < Q80_TILE ? nt - t : Q80_TILE;
			GEMM_TILES(q80_tile, c, n, panel, h, a + ab * t, ab,
				   y + t, row0, nr, &pf);
		}
	}
}

/* hsum8's tree over eight accumulators, lane by lane (rows in lanes) */
CPU_TARGET static GEMM_INLINE __m256 gemm_hsum8_lanes(const __m256 acc[8])
{
	__m256 r0 = _mm256_add_ps(acc[4], acc[0]);
	__m256 r1 = _mm256_add_ps(acc[5], acc[1]);
	__m256 r2 = _mm256_add_ps(acc[6], acc[2]);
	__m256 r3 = _mm256_add_ps(acc[7], acc[3]);

	return _mm256_add_ps(_mm256_add_ps(r0, r2), _mm256_add_ps(r1, r3));
}

/*
 * One token in quant_q8_0_dot_x86's order: lane j of a row is unit j's
 * four products, acc[j] = fma(dw * da, lane, acc[j]), then hsum8.
 */
CPU_TARGET static void q80_exact1(int64_t n, const uint8_t *p, const uint8_t *a,
				  float *y, const void *ahead,
				  size_t ahead_bytes)
{
	const int64_t nb = n / 32;
	/* a step per (half, block) */
	const struct cpu_gemm_ahead pf = cpu_gemm_ahead(ahead, ahead_bytes,
							2 * nb);
	const float *da = (const float *)(a + n);
	int64_t ib;
	int h, j;

	for (h = 0; h < 2; h++) {
		__m256 acc[8];

		GEMM_UNROLL
		for (j = 0; j < 8; j++)
			acc[j] = _mm256_setzero_ps();
		for (ib = 0; ib < nb; ib++) {
			const uint8_t *pb = p + Q80P_SB * ib;
			const __m256 d = _mm256_mul_ps(
				gemm_d8(p + Q80P_SB * nb + Q80P_D_BYTES * ib +
					16 * h),
				_mm256_set1_ps(da[ib]));

			cpu_gemm_ahead_step(&pf, nb * h + ib);
			GEMM_UNROLL
			for (j = 0; j < 8; j++) {
				const __m256i w = gemm_half(pb, j, h);
				const __m256i l = gemm_s8(
					_mm256_abs_epi8(w), w,
					gemm_bcast4(a + 32 * ib + 4 * j));

				acc[j] = _mm256_fmadd_ps(
					d, _mm256_cvtepi32_ps(l), acc[j]);
			}
		}
		_mm256_storeu_ps(y + 8 * h, gemm_hsum8_lanes(acc));
	}
}

/* ---- Q4_K -------------------------------------------------------------- */

#define Q4K_TILE 8

/* Byte k of each int32 lane of v in both halves of the lane's int16s */
CPU_TARGET static GEMM_INLINE __m256i gemm_byte_pair16(__m256i v, int k)
{
	const int c = (int)(0x80008000u | (uint32_t)k | (uint32_t)k << 16);
	/* dword i of a 128-bit lane is at byte 4i */
	const __m256i ctl = _mm256_add_epi32(
		_mm256_set1_epi32(c),
		_mm256_setr_epi32(0, 0x00040004, 0x00080008, 0x000c000c, 0,
				  0x00040004, 0x00080008, 0x000c000c));

	return _mm256_shuffle_epi8(v, ctl);
}

/*
 * The d's (lo) and dmin's (hi) of the 8 rows from unit Q4KP_D's half:
 * the dwords' low and high words, as floats.
 */
CPU_TARGET static GEMM_INLINE void q4k_d(__m256i u, __m256 *dw, __m256 *dm)
{
	const __m256i ctl = _mm256_setr_epi8(
		0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4,
		5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
	__m256i v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(u, ctl),
					     _MM_SHUFFLE(3, 1, 2, 0));

	*dw = _mm256_cvtph_ps(_mm256_castsi256_si128(v));
	*dm = _mm256_cvtph_ps(_mm256_extracti128_si256(v, 1));
}

/*
 * T tokens against half h of a packed Q4_K panel: dot_q4_k_repacked per
 * (row, token). Per pair of sub-blocks (2c, 2c + 1) each of its eight
 * units is unpacked once, its nibbles against the tokens' four bytes in
 * int16 (summed over the eight units), then times the scales by
 * vpmaddwd; the mins against the bsum pairs.
 */
CPU_TARGET static GEMM_INLINE void
q4k_tile(const int T, int64_t nb, const uint8_t *p, int h, const uint8_t *a,
	 size_t ab, float *const *y, int64_t row0, int nr,
	 const struct cpu_gemm_ahead *ahead)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	const __m256i k1 = _mm256_set1_epi32(0x3f3f3f3f);
	const __m256i k2 = _mm256_set1_epi32(0x0f0f0f0f);
	const __m256i k3 = _mm256_set1_epi32(0x03030303);
	__m256 acc[8], accm[8];
	int64_t ib;
	int t, c, g, k;

	GEMM_UNROLL
	for (t = 0; t < T; t++) {
		acc[t] = _mm256_setzero_ps();
		accm[t] = _mm256_setzero_ps();
	}
	for (ib = 0; ib < nb; ib++, p += Q4KP_SB) {
		const uint8_t *at = a + Q4K_ACT * ib;
		const __m256i u1 = gemm_half(p, Q4KP_SC, h);
		const __m256i u2 = gemm_half(p, Q4KP_SC + 1, h);
		const __m256i u3 = gemm_half(p, Q4KP_SC + 2, h);
		__m256i s[8], sc[2], mn[2];
		__m256 dw, dm;

		/* ggml's utmp unpacking: sc[j / 4] byte j % 4 = scale j */
		sc[0] = _mm256_and_si256(u1, k1);
		sc[1] = _mm256_or_si256(
			_mm256_and_si256(u3, k2),
			_mm256_slli_epi32(
				_mm256_and_si256(_mm256_srli_epi32(u1, 6), k3),
				4));
		GEMM_UNROLL
		for (t = 0; t < T; t++)
			s[t] = _mm256_setzero_si256();
		for (c = 0; c < 4; c++) {
			__m256i lo[8], hi[8];

			cpu_gemm_ahead_step(ahead, 4 * ib + c);
			GEMM_UNROLL
			for (t = 0; t < T; t++) {
				lo[t] = _mm256_setzero_si256();
				hi[t] = _mm256_setzero_si256();
			}
			GEMM_UNROLL
			for (g = 0; g < 8; g++) {
				const __m256i wq = gemm_half(p, 8 * c + g, h);
				const __m256i wl = _mm256_and_si256(wq, m4);
				const __m256i wh = _mm256_and_si256(
					_mm256_srli_epi16(wq, 4), m4);

				GEMM_UNROLL
				for (t = 0; t < T; t++) {
					const uint8_t *q = at + ab * t +
							   64 * c + 4 * g;

					lo[t] = _mm256_add_epi16(
						lo[t],
						_mm256_maddubs_epi16(
							wl, gemm_bcast4(q)));
					hi[t] = _mm256_add_epi16(
						hi[t],
						_mm256_maddubs_epi16(
							wh,
							gemm_bcast4(q + 32)));
				}
			}
			{
				const __m256i s0 = gemm_byte_pair16(
					sc[c / 2], 2 * (c % 2));
				const __m256i s1 = gemm_byte_pair16(
					sc[c / 2], 2 * (c % 2) + 1);

				GEMM_UNROLL
				for (t = 0; t < T; t++)
					s[t] = _mm256_add_epi32(
						s[t],
						_mm256_add_epi32(
							_mm256_madd_epi16(lo[t],
									  s0),
							_mm256_madd_epi16(hi[t],
									  s1)));
			}
		}
		/* the mins as int16 pairs (mins 2k, 2k + 1) */
		mn[0] = _mm256_and_si256(u2, k1);
		mn[1] = _mm256_or_si256(
			_mm256_and_si256(_mm256_srli_epi32(u3, 4), k2),
			_mm256_slli_epi32(
				_mm256_and_si256(_mm256_srli_epi32(u2, 6), k3),
				4));
		q4k_d(gemm_half(p, Q4KP_D, h), &dw, &dm);
		GEMM_UNROLL
		for (t = 0; t < T; t++) {
			const uint8_t *bp = at + ab * t + GEMM_QK;
			const __m256 d = _mm256_set1_ps(((
				const float *)(a + ab * t + Q4K_ACT * nb))[ib]);
			__m256i smin = _mm256_setzero_si256();

			GEMM_UNROLL
			for (k = 0; k < 4; k++) {
				__m256i v = _mm256_srli_epi32(mn[k / 2],
							      16 * (k % 2));
				__m256i m = _mm256_or_si256(
					_mm256_and_si256(
						v, _mm256_set1_epi32(0xff)),
					_mm256_slli_epi32(
						_mm256_and_si256(
							v, _mm256_set1_epi32(
								   0xff00)),
						8));

				smin = _mm256_add_epi32(
					smin,
					_mm256_madd_epi16(
						m, gemm_bcast4(bp + 4 * k)));
			}
			acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]),
						 _mm256_mul_ps(dw, d), acc[t]);
			accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(smin),
						  _mm256_mul_ps(dm, d),
						  accm[t]);
		}
	}
	GEMM_UNROLL
	for (t = 0; t < T; t++)
		gemm_store(y[t] + row0, h, nr, _mm256_sub_ps(acc[t], accm[t]));
}

CPU_TARGET static void q4k_rows(int64_t n, const void *panel, int nr,
				const void *acts, int nt, float *const *y,
				int64_t row0, const void *ahead,
				size_t ahead_bytes)
{
	const size_t ab = cpu_q4k_act_bytes(n);
	const int64_t nb = n / GEMM_QK;
	const uint8_t *a = acts;
	const int halves = nr > 8 ? 2 : 1;
	int h, t, c;

	for (h = 0; h < halves; h++) {
		struct cpu_gemm_ahead pf = cpu_gemm_ahead_part(
			ahead, ahead_bytes, 4 * nb, h, halves);

		for (t = 0; t < nt; t += c, pf.bytes = 0) {
			c = nt - t < Q4K_TILE ? nt - t : Q4K_TILE;
			GEMM_TILES(q4k_tile, c, nb, panel, h, a + ab * t, ab,
				   y + t, row0, nr, &pf);
		}
	}
}

/* ---- Q6_K -------------------------------------------------------------- */

#define Q6K_TILE 8

/*
 * Unit i of group 8hs + 2k + q (elements 128 hs + 32k + 16q + 4i..) of
 * half h as bytes 0..63: ql's low nibbles (k < 2) or high ones, below
 * qh's bits 2k, 2k + 1 (dequantize_row_q6_K).
 */
CPU_TARGET static GEMM_INLINE __m256i q6k_unit(const uint8_t *p, int h, int hs,
					       int q, int k, int i)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3);
	__m256i ql = gemm_half(p, 16 * hs + 8 * (k % 2) + 4 * q + i, h);
	__m256i qh = gemm_half(p, Q6KP_QH + 8 * hs + 4 * q + i, h);

	if (k >= 2)
		ql = _mm256_srli_epi16(ql, 4);
	if (k)
		qh = _mm256_srli_epi16(qh, 2 * k);
	return _mm256_or_si256(_mm256_and_si256(ql, m4),
			       _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
}

/*
 * Bytes b0, b1 (< 4) of each dword of v as the int16 pair of the dword
 * (b0 low), sign-extended and shifted left by 8 - sh.
 */
CPU_TARGET static GEMM_INLINE __m256i q6k_pair16(__m256i v, int b0, int b1,
						 int sh)
{
	const uint32_t c = 0x00800080u | (uint32_t)b0 << 8 | (uint32_t)b1 << 24;
	const __m256i ctl = _mm256_setr_epi32(
		(int)c, (int)(c + 0x04000400u), (int)(c + 0x08000800u),
		(int)(c + 0x0c000c00u), (int)c, (int)(c + 0x04000400u),
		(int)(c + 0x08000800u), (int)(c + 0x0c000c00u));

	return _mm256_srai_epi16(_mm256_shuffle_epi8(v, ctl), sh);
}

/*
 * The token's -bsums as int16 pairs, dword l = (-bsum[2l], -bsum[2l + 1]),
 * from the act form's -32 bsum int32s (exact multiples of 32).
 */
CPU_TARGET static GEMM_INLINE __m256i q6k_neg_bsums(const uint8_t *at)
{
	__m256i lo = _mm256_srai_epi32(
		_mm256_loadu_si256((const __m256i *)(at + GEMM_QK)), 5);
	__m256i hi = _mm256_srai_epi32(
		_mm256_loadu_si256((const __m256i *)(at + GEMM_QK + 32)), 5);

	return _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi),
					_MM_SHUFFLE(3, 1, 2, 0));
}

/*
 * T tokens against half h of a packed Q6_K panel, gemm.h's order: per
 * group its four units made once, against each token in int16 two units
 * at a time, times the group's scale into s; s plus 32 sum(sc (-bsum));
 * acc = fma(s, dw * da, acc).
 */
CPU_TARGET static GEMM_INLINE void
q6k_tile(const int T, int64_t nb, const uint8_t *p, int h, const uint8_t *a,
	 size_t ab, float *const *y, int64_t row0, int nr,
	 const struct cpu_gemm_ahead *ahead)
{
	const uint8_t *dd = p + Q6KP_SB * nb;
	__m256 acc[8];
	int64_t ib;
	int t, j, k, i;

	GEMM_UNROLL
	for (t = 0; t < T; t++)
		acc[t] = _mm256_setzero_ps();
	for (ib = 0; ib < nb; ib++, p += Q6KP_SB) {
		const uint8_t *at = a + Q6K_ACT * ib;
		__m256i s[8];

		GEMM_UNROLL
		for (t = 0; t < T; t++)
			s[t] = _mm256_setzero_si256();
		for (j = 0; j < 4; j++) {
			const int hs = j / 2, q = j % 2;

			cpu_gemm_ahead_step(ahead, 4 * ib + j);
			GEMM_UNROLL
			for (k = 0; k < 4; k++) {
				const int g = 8 * hs + 2 * k + q;
				const __m256i sc = q6k_pair16(
					gemm_half(p, Q6KP_SC + g / 4, h), g % 4,
					g % 4, 8);
				__m256i w[4];

				GEMM_UNROLL
				for (i = 0; i < 4; i++)
					w[i] = q6k_unit(p, h, hs, q, k, i);
				GEMM_UNROLL
				for (t = 0; t < T; t++) {
					const uint8_t *q4 = at + ab * t +
							    16 * g;
					__m256i p01 = _mm256_add_epi16(
						_mm256_maddubs_epi16(
							w[0], gemm_bcast4(q4)),
						_mm256_maddubs_epi16(
							w[1],
							gemm_bcast4(q4 + 4)));
					__m256i p23 = _mm256_add_epi16(
						_mm256_maddubs_epi16(
							w[2],
							gemm_bcast4(q4 + 8)),
						_mm256_maddubs_epi16(
							w[3],
							gemm_bcast4(q4 + 12)));

					s[t] = _mm256_add_epi32(
						s[t],
						_mm256_add_epi32(
							_mm256_madd_epi16(p01,
									  sc),
							_mm256_madd_epi16(p23,
									  sc)));
				}
			}
		}
		{
			const __m256 dw = gemm_d8(dd + Q6KP_D_BYTES * ib +
						  16 * h);
			__m256i scp[8];
			int l;

			/* (sc[2l], sc[2l + 1]) of each row, int16 */
			GEMM_UNROLL
			for (l = 0; l < 8; l++)
				scp[l] = q6k_pair16(
					gemm_half(p, Q6KP_SC + l / 2, h),
					2 * (l % 2), 2 * (l % 2) + 1, 8);
			GEMM_UNROLL
			for (t = 0; t < T; t++) {
				const uint8_t *att = at + ab * t;
				const __m256i bs = q6k_neg_bsums(att);
				const float da = ((
					const float *)(a + ab * t +
						       Q6K_ACT * nb))[ib];
				__m256i corr = _mm256_setzero_si256();

				GEMM_UNROLL
				for (l = 0; l < 8; l++)
					corr = _mm256_add_epi32(
						corr,
						_mm256_madd_epi16(
							scp[l],
							_mm256_permutevar8x32_epi32(
								bs,
								_mm256_set1_epi32(
									l))));
				acc[t] = _mm256_fmadd_ps(
					_mm256_cvtepi32_ps(_mm256_add_epi32(
						s[t],
						_mm256_slli_epi32(corr, 5))),
					_mm256_mul_ps(dw, _mm256_set1_ps(da)),
					acc[t]);
			}
		}
	}
	GEMM_UNROLL
	for (t = 0; t < T; t++)
		gemm_store(y[t] + row0, h, nr, acc[t]);
}

CPU_TARGET static void q6k_rows(int64_t n, const void *panel, int nr,
				const void *acts, int nt, float *const *y,
				int64_t row0, const void *ahead,
				size_t ahead_bytes)
{
	const size_t ab = cpu_q6k_act_bytes(n);
	const int64_t nb = n / GEMM_QK;
	const uint8_t *a = acts;
	const int halves = nr > 8 ? 2 : 1;
	int h, t, c;

	for (h = 0; h < halves; h++) {
		struct cpu_gemm_ahead pf = cpu_gemm_ahead_part(
			ahead, ahead_bytes, 4 * nb, h, halves);

		for (t = 0; t < nt; t += c, pf.bytes = 0) {
			c = nt - t < Q6K_TILE ? nt - t : Q6K_TILE;
			GEMM_TILES(q6k_tile, c, nb, panel, h, a + ab * t, ab,
				   y + t, row0, nr, &pf);
		}
	}
}

/*
 * Units i of the four groups 8hs + 2k + q (k 0..3) of half h against
 * the token's activations at, times their scales sc[k], summed in int32:
 * one lane's share of a quarter. ql's dword holds k = 0 (low nibbles)
 * and k = 2 (high), the next ql dword k = 1 and 3; qh's bit pairs 0..3
 * are k = 0..3, moved to bits 4..5 (m30) of the byte.
 */
CPU_TARGET static GEMM_INLINE __m256i q6k_quad(const uint8_t *p, int h, int hs,
					       int q, int i, const uint8_t *at,
					       const __m256i sc[4], __m256i m4,
					       __m256i m30)
{
	const __m256i qh = gemm_half(p, Q6KP_QH + 8 * hs + 4 * q + i, h);
	const __m256i ql0 = gemm_half(p, 16 * hs + 4 * q + i, h);
	const __m256i ql1 = gemm_half(p, 16 * hs + 8 + 4 * q + i, h);
	__m256i w[4], s;
	int k;

	w[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
			       _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
	w[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
			       _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
	w[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
			       _mm256_and_si256(qh, m30));
	w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
			       _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
	s = _mm256_setzero_si256();
	GEMM_UNROLL
	for (k = 0; k < 4; k++)
		s = _mm256_add_epi32(
			s, _mm256_madd_epi16(
				   _mm256_maddubs_epi16(
					   w[k], gemm_bcast4(at +
							     16 * (8 * hs +
								   2 * k + q) +
							     4 * i)),
				   sc[k]));
	return s;
}

/*
 * One token in cpu_q6_K_avx2's order, half h: lane l of a row takes
 * elements 4l..4l + 3 of every 32 (unit i of group g goes to lane
 * 4 (g % 2) + i), each times its group's scale, from 32 (-bsum[2l] sc[2l]
 * - bsum[2l + 1] sc[2l + 1]); then acc[l] = fma(d, lane, acc[l]) and
 * hsum8. The integer lanes are summed in any order (exact): lanes 0..3
 * (the even groups) first, then 4..7, so that four int32 lanes, four
 * scales and one unit's quants fit the 16 registers; each ql and qh
 * dword is read once for the units that share it (k and k + 2 share ql,
 * all four k share qh). The float lanes are in memory (touched once a
 * block).
 *
 * Both halves of a superblock, one after the other, before the next
 * superblock (each half's chain over the blocks is unchanged): two
 * passes over the whole panel read it twice from L2 where it is larger
 * than L1 (161 KB for the 8B's ffn_down), and the memory sat idle for
 * part of it; block by block, the second half's bytes are the lines the
 * first just brought into L1. A 12288-wide Q6_K matrix streamed by two
 * threads: 7.7 -> 11.1 GB/s; Q8_0's kernel the same way was slower, so
 * it keeps its two passes (engine.md, "AVX2").
 *
 * The prefetch runs Q6K_NEAR superblocks ahead of the kernel, into L1,
 * an eighth of a superblock a step: through this panel, its d's, and on
 * into the next one where that follows in memory (ahead, as the packed
 * matrices' callers pass it), never past it. Prefetched a whole panel
 * ahead into L2, the lines were read from L2 again, and the 8B decoded
 * 2.72 t/s against 2.92 this way (three interleaved rounds).
 */
#define Q6K_NEAR 4

/* The lines of [p, p + Q6KP_SB / 8) below end into L1. */
CPU_TARGET static GEMM_INLINE void q6k_prefetch(const char *p, const char *end)
{
	int o;

	for (o = 0; o < Q6KP_SB / 8 && p + o < end; o += 64)
		__builtin_prefetch(p + o, 0, 3);
}

CPU_TARGET static void q6k_exact1(int64_t nb, const uint8_t *p,
				  const uint8_t *a, float *y, const void *ahead,
				  size_t ahead_bytes)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
	const uint8_t *dd = p + Q6KP_SB * nb;
	const char *end = (const char *)dd + Q6KP_D_BYTES * nb;
	const float *da = (const float *)(a + Q6K_ACT * nb);
	__m256 acc[2][8];
	int64_t ib;
	int h, q, hs, k, i;

	if ((const char *)ahead == end)
		end += ahead_bytes;
	for (h = 0; h < 2; h++)
		for (i = 0; i < 8; i++)
			acc[h][i] = _mm256_setzero_ps();
	for (ib = 0; ib < nb; ib++, p += Q6KP_SB) {
		const uint8_t *at = a + Q6K_ACT * ib;
		const __m256i nbs = q6k_neg_bsums(at);

		for (h = 0; h < 2; h++) {
			const __m256 d = _mm256_mul_ps(
				gemm_d8(dd + Q6KP_D_BYTES * ib + 16 * h),
				_mm256_set1_ps(da[ib]));

			GEMM_UNROLL
			for (q = 0; q < 2; q++) {
				__m256i L[4];

				/* lane 4q + i: 32 (-bsum sc) of groups 8q + 2i, +1 */
				GEMM_UNROLL
				for (i = 0; i < 4; i++) {
					const int l = 4 * q + i;

					L[i] = _mm256_madd_epi16(
						q6k_pair16(
							gemm_half(p,
								  Q6KP_SC +
									  l / 2,
								  h),
							2 * (l % 2),
							2 * (l % 2) + 1, 3),
						_mm256_permutevar8x32_epi32(
							nbs,
							_mm256_set1_epi32(l)));
				}
				GEMM_UNROLL
				for (hs = 0; hs < 2; hs++) {
					__m256i sc[4];

					q6k_prefetch(
						(const char *)p +
							Q6K_NEAR * Q6KP_SB +
							Q6KP_SB / 8 *
								(4 * h + 2 * q +
								 hs),
						end);
					/* group 8hs + 2k + q's scale */
					GEMM_UNROLL
					for (k = 0; k < 4; k++) {
						const int g = 8 * hs + 2 * k +
							      q;

						sc[k] = q6k_pair16(
							gemm_half(p,
								  Q6KP_SC +
									  g / 4,
								  h),
							g % 4, g % 4, 8);
					}
					GEMM_UNROLL
					for (i = 0; i < 4; i++) {
						L[i] = _mm256_add_epi32(
							L[i],
							q6k_quad(p, h, hs, q, i,
								 at, sc, m4,
								 m30));
						/* summed here, not hoisted */
						__asm__("" : "+x"(L[i]));
					}
				}
				GEMM_UNROLL
				for (i = 0; i < 4; i++)
					acc[h][4 * q + i] = _mm256_fmadd_ps(
						d, _mm256_cvtepi32_ps(L[i]),
						acc[h][4 * q + i]);
			}
		}
	}
	for (h = 0; h < 2; h++)
		_mm256_storeu_ps(y + 8 * h, gemm_hsum8_lanes(acc[h]));
}

#define GEMM_LEVEL(name) name##_avx2
#include "gemm_tables.h"
#endif /* __x86_64__ */
