// SPDX-License-Identifier: MIT
/*
 * The K-quant batch kernels of gemm.h (Q4_K exact, Q6_K not): weight rows
 * in the lanes, a panel of 16 rows made once per matmul row block and
 * used against every token.
 *
 * Panels, per 256-element superblock, in 64-byte units (one register):
 *
 *   Q4_K (46 units): 32 of quants, unit 8c + g holding the dword
 *   qs[32c + 4g] of each row (four low nibbles: elements 64c + 4g..,
 *   sub-block 2c; four high nibbles: elements 64c + 32 + 4g.., sub-block
 *   2c + 1), so the kernel unpacks with one and, one shift and one and,
 *   once for all the tokens; 8 of scales (int32 per row, sub-block j); 4
 *   of mins as int16 pairs (sub-blocks 2k, 2k + 1) for vpdpwssd against
 *   the tokens' pair sums of bsums; d and dmin as floats.
 *
 *   Q6_K (81 units): 64 of quants as bytes 0..63 (the -32 comes from the
 *   tokens' bsums: a group's int accumulator starts at -32 * bsum), unit
 *   e holding elements 4e..4e+3 of each row; 16 of scales (int32 per row
 *   and 16-element group); d as floats.
 *
 * A panel is made with 16 x 16 dword transposes (unpack and lane
 * shuffles, no gathers), so a decode batch of a few tokens still gains.
 *
 * Activations (act_pack), per superblock: the 256 int8 quants as Q8_K
 * holds them, then for Q4_K the four bsum pair sums as int16 pairs
 * (bsum[4k] + bsum[4k + 1], bsum[4k + 2] + bsum[4k + 3]), for Q6_K the
 * sixteen -32 * bsum[g] as int32; after all superblocks, the d of each.
 *
 * Order: Q4_K is dot.c's dot_q4_k_repacked per (row, token), bit for bit:
 * the superblock's integer s and smin (exact, any order), then
 * acc = fma(s, dw * da, acc), accm = fma(smin, dmin * da, accm), and
 * acc - accm. Q6_K is one chain per row, acc = fma(s, dw * da, acc) with
 * s = sum over groups of sc * sum((q - 32) a): not the one-token order.
 */
#include <string.h>

#include "cpu.h"
#include "gemm.h"
#include "gemm_k.h"

/* Q4_K panel units of a superblock */
#define Q4K_QS 0
#define Q4K_SC 32
#define Q4K_MIN 40
#define Q4K_D 44
#define Q4K_DMIN 45
#define Q4K_UNITS 46
/* Q6_K panel units of a superblock */
#define Q6K_Q 0
#define Q6K_SC 64
#define Q6K_D 80
#define Q6K_UNITS 81

static size_t q4k_panel_bytes(int64_t n)
{
	return (size_t)(n / GEMM_QK) * Q4K_UNITS * GEMM_UNIT;
}

static size_t q6k_panel_bytes(int64_t n)
{
	return (size_t)(n / GEMM_QK) * Q6K_UNITS * GEMM_UNIT;
}

#if !defined(__x86_64__)
static void q4k_panel(int64_t n, const void *w, size_t row_bytes, int nr,
		      void *panel)
{
}
static void q6k_panel(int64_t n, const void *w, size_t row_bytes, int nr,
		      void *panel)
{
}
static void q4k_run(int64_t n, const void *panel, int nr, const void *acts,
		    int nt, float *const *y, int64_t row0, const void *ahead,
		    size_t ahead_bytes)
{
}
static void q6k_run(int64_t n, const void *panel, int nr, const void *acts,
		    int nt, float *const *y, int64_t row0, const void *ahead,
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

/* Row r's 64 bytes at p (row_bytes apart), zeros for rows nr.. */
CPU_TARGET static GEMM_INLINE __m512i gemm_row64(const uint8_t *p,
						 size_t row_bytes, int nr,
						 int r)
{
	return r < nr ? _mm512_loadu_si512(p + row_bytes * r) :
			_mm512_setzero_si512();
}

/*
 * out[k] lane r = in[r] dword k: four rows at a time through dword and
 * qword unpacks (each 128-bit lane then holds one dword of four rows),
 * then a 4 x 4 transpose of the 128-bit lanes.
 */
CPU_TARGET static GEMM_INLINE void gemm_transpose16(const __m512i *in,
						    __m512i *out)
{
	__m512i q[4][4];
	int i, k;

	GEMM_UNROLL
	for (i = 0; i < 4; i++) {
		__m512i a = _mm512_unpacklo_epi32(in[4 * i], in[4 * i + 1]);
		__m512i b = _mm512_unpackhi_epi32(in[4 * i], in[4 * i + 1]);
		__m512i c = _mm512_unpacklo_epi32(in[4 * i + 2], in[4 * i + 3]);
		__m512i e = _mm512_unpackhi_epi32(in[4 * i + 2], in[4 * i + 3]);

		q[i][0] = _mm512_unpacklo_epi64(a, c);
		q[i][1] = _mm512_unpackhi_epi64(a, c);
		q[i][2] = _mm512_unpacklo_epi64(b, e);
		q[i][3] = _mm512_unpackhi_epi64(b, e);
	}
	GEMM_UNROLL
	for (k = 0; k < 4; k++) {
		__m512i x0 = _mm512_shuffle_i32x4(q[0][k], q[1][k],
						  _MM_SHUFFLE(1, 0, 1, 0));
		__m512i x1 = _mm512_shuffle_i32x4(q[0][k], q[1][k],
						  _MM_SHUFFLE(3, 2, 3, 2));
		__m512i y0 = _mm512_shuffle_i32x4(q[2][k], q[3][k],
						  _MM_SHUFFLE(1, 0, 1, 0));
		__m512i y1 = _mm512_shuffle_i32x4(q[2][k], q[3][k],
						  _MM_SHUFFLE(3, 2, 3, 2));

		out[k] = _mm512_shuffle_i32x4(x0, y0, _MM_SHUFFLE(2, 0, 2, 0));
		out[4 + k] = _mm512_shuffle_i32x4(x0, y0,
						  _MM_SHUFFLE(3, 1, 3, 1));
		out[8 + k] = _mm512_shuffle_i32x4(x1, y1,
						  _MM_SHUFFLE(2, 0, 2, 0));
		out[12 + k] = _mm512_shuffle_i32x4(x1, y1,
						   _MM_SHUFFLE(3, 1, 3, 1));
	}
}

/*
 * The 16 bytes at p of each row as four registers, lane r = row r, d[k]
 * its dword k (rows nr.. zero). Register i takes rows i, 4 + i, 8 + i,
 * 12 + i in its 128-bit lanes, so that the unpacks leave lane 4L + i on
 * row 4L + i.
 */
CPU_TARGET static GEMM_INLINE void
gemm_rows16(const uint8_t *p, size_t row_bytes, int nr, __m512i d[4])
{
	__m512i in[4], a, b, c, e;
	int i, l;

	GEMM_UNROLL
	for (i = 0; i < 4; i++) {
		in[i] = _mm512_setzero_si512();
		GEMM_UNROLL
		for (l = 0; l < 4; l++)
			if (4 * l + i < nr)
				in[i] = _mm512_mask_broadcast_i32x4(
					in[i], (__mmask16)(0xf << (4 * l)),
					_mm_loadu_si128(
						(const __m128i
							 *)(p +
							    row_bytes * (4 * l +
									 i))));
	}
	a = _mm512_unpacklo_epi32(in[0], in[1]);
	b = _mm512_unpackhi_epi32(in[0], in[1]);
	c = _mm512_unpacklo_epi32(in[2], in[3]);
	e = _mm512_unpackhi_epi32(in[2], in[3]);
	d[0] = _mm512_unpacklo_epi64(a, c);
	d[1] = _mm512_unpackhi_epi64(a, c);
	d[2] = _mm512_unpacklo_epi64(b, e);
	d[3] = _mm512_unpackhi_epi64(b, e);
}

/* The low (high) halves of 16 int32 lanes as IEEE halves, to floats. */
CPU_TARGET static __m512 gemm_half_lo(__m512i v)
{
	return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

/* One superblock of a Q4_K panel (wb: row 0's block) into out. */
CPU_TARGET static GEMM_INLINE void
q4k_panel_sb(const uint8_t *wb, size_t row_bytes, int nr, __m512i *out)
{
	const __m512i kmask1 = _mm512_set1_epi32(0x3f3f3f3f);
	const __m512i kmask2 = _mm512_set1_epi32(0x0f0f0f0f);
	const __m512i kmask3 = _mm512_set1_epi32(0x03030303);
	const __m512i byte = _mm512_set1_epi32(0xff);
	__m512i in[16], u[4], sc[2], mn[2];
	int h, r, j, k;

	{

		for (h = 0; h < 2; h++) {
			GEMM_UNROLL
			for (r = 0; r < 16; r++)
				in[r] = gemm_row64(wb + 16 + 64 * h, row_bytes,
						   nr, r);
			gemm_transpose16(in, out + Q4K_QS + 16 * h);
		}
		/* u[0] = d | dmin << 16, u[1..3] the 12 scale bytes */
		gemm_rows16(wb, row_bytes, nr, u);
		/* ggml's utmp unpacking of the 6-bit scales and mins */
		sc[0] = _mm512_and_si512(u[1], kmask1);
		sc[1] = _mm512_or_si512(
			_mm512_and_si512(u[3], kmask2),
			_mm512_slli_epi32(
				_mm512_and_si512(_mm512_srli_epi32(u[1], 6),
						 kmask3),
				4));
		mn[0] = _mm512_and_si512(u[2], kmask1);
		mn[1] = _mm512_or_si512(
			_mm512_and_si512(_mm512_srli_epi32(u[3], 4), kmask2),
			_mm512_slli_epi32(
				_mm512_and_si512(_mm512_srli_epi32(u[2], 6),
						 kmask3),
				4));
		GEMM_UNROLL
		for (j = 0; j < 8; j++)
			out[Q4K_SC + j] = _mm512_and_si512(
				_mm512_srli_epi32(sc[j / 4], 8 * (j % 4)),
				byte);
		GEMM_UNROLL
		for (k = 0; k < 4; k++) {
			__m512i v = _mm512_srli_epi32(mn[k / 2], 16 * (k % 2));

			out[Q4K_MIN + k] = _mm512_or_si512(
				_mm512_and_si512(v, byte),
				_mm512_slli_epi32(
					_mm512_and_si512(
						v, _mm512_set1_epi32(0xff00)),
					8));
		}
		out[Q4K_D] = _mm512_castps_si512(gemm_half_lo(u[0]));
		out[Q4K_DMIN] = _mm512_castps_si512(
			gemm_half_lo(_mm512_srli_epi32(u[0], 16)));
	}
}

/*
 * The next panel's rows (16 rows further, the matrix being contiguous),
 * a 1/nb part of them per superblock made, so that they arrive while
 * run() works on this panel: 16 rows read a superblock at a time are
 * 16 streams, more than the hardware prefetchers follow from memory
 * (measured, 1024-element rows streamed at 4 tokens: 2-3x). Into L2:
 * into L1 it was slower. A prefetch never faults, so past the matrix's
 * end it costs nothing.
 */
CPU_TARGET static GEMM_INLINE void
gemm_prefetch_next(const uint8_t *w, size_t row_bytes, int64_t ib, size_t block)
{
	const uint8_t *p = w + CPU_GEMM_ROWS * row_bytes +
			   (size_t)ib * CPU_GEMM_ROWS * block;
	size_t o;

	for (o = 0; o < CPU_GEMM_ROWS * block; o += 64)
		_mm_prefetch((const char *)p + o, _MM_HINT_T1);
}

CPU_TARGET static void q4k_panel(int64_t n, const void *w, size_t row_bytes,
				 int nr, void *panel)
{
	const uint8_t *wb = w;
	__m512i *out = panel;
	int64_t ib, nb = n / GEMM_QK;

	/* a full panel without a test per row */
	for (ib = 0; ib < nb; ib++, wb += GEMM_Q4K_BLOCK, out += Q4K_UNITS) {
		gemm_prefetch_next(w, row_bytes, ib, GEMM_Q4K_BLOCK);
		if (nr == CPU_GEMM_ROWS)
			q4k_panel_sb(wb, row_bytes, CPU_GEMM_ROWS, out);
		else
			q4k_panel_sb(wb, row_bytes, nr, out);
	}
}

/*
 * Half h of a Q6_K superblock's quants as bytes 0..63, 16 rows in the
 * lanes, from its ql and qh dwords already transposed (ql16: ql dwords
 * 16h.., qh8: qh dwords 8h..): unit 8k + g of the half is elements
 * 128h + 32k + 4g.., the low (k < 2) or high nibbles of ql dword
 * 16h + 8 (k % 2) + g with bits 2k, 2k + 1 of qh dword 8h + g above them
 * (ggml's dequantize_row_q6_K). The same operations for every row, so
 * done after the transpose, 16 rows at once.
 */
CPU_TARGET static GEMM_INLINE void q6k_unpack(const __m512i *ql16,
					      const __m512i *qh8, __m512i *out)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
	int k, g;

	GEMM_UNROLL
	for (k = 0; k < 4; k++)
		GEMM_UNROLL
	for (g = 0; g < 8; g++) {
		__m512i ql = ql16[8 * (k % 2) + g], qh = qh8[g];

		if (k >= 2)
			ql = _mm512_srli_epi16(ql, 4);
		if (k == 0)
			qh = _mm512_slli_epi16(qh, 4);
		else if (k == 1)
			qh = _mm512_slli_epi16(qh, 2);
		else if (k == 3)
			qh = _mm512_srli_epi16(qh, 2);
		/* (ql & 0x0f) | (qh & 0x30) */
		out[8 * k + g] = _mm512_ternarylogic_epi32(
			ql, _mm512_and_si512(qh, m30), m4, 0xec);
	}
}

/* One superblock of a Q6_K panel (wb: row 0's block) into out. */
CPU_TARGET static GEMM_INLINE void
q6k_panel_sb(const uint8_t *wb, size_t row_bytes, int nr, __m512i *out)
{
	__m512i in[16], ql[16], qh[16], sc[4], dd[4];
	int h, r, g;

	{

		/* qh dwords 0..15 of each row, lane r, then each half's ql */
		GEMM_UNROLL
		for (r = 0; r < 16; r++)
			in[r] = gemm_row64(wb + 128, row_bytes, nr, r);
		gemm_transpose16(in, qh);
		for (h = 0; h < 2; h++) {
			GEMM_UNROLL
			for (r = 0; r < 16; r++)
				in[r] = gemm_row64(wb + 64 * h, row_bytes, nr,
						   r);
			gemm_transpose16(in, ql);
			q6k_unpack(ql, qh + 8 * h, out + Q6K_Q + 32 * h);
		}
		/* the 16 int8 scales at 192, sign-extended per group */
		gemm_rows16(wb + 192, row_bytes, nr, sc);
		GEMM_UNROLL
		for (g = 0; g < 16; g++)
			out[Q6K_SC + g] = _mm512_srai_epi32(
				_mm512_slli_epi32(sc[g / 4], 24 - 8 * (g % 4)),
				24);
		/* d, the last two bytes of the block: bytes 194..209 */
		gemm_rows16(wb + 194, row_bytes, nr, dd);
		out[Q6K_D] = _mm512_castps_si512(
			gemm_half_lo(_mm512_srli_epi32(dd[3], 16)));
	}
}

CPU_TARGET static void q6k_panel(int64_t n, const void *w, size_t row_bytes,
				 int nr, void *panel)
{
	const uint8_t *wb = w;
	__m512i *out = panel;
	int64_t ib, nb = n / GEMM_QK;

	for (ib = 0; ib < nb; ib++, wb += GEMM_Q6K_BLOCK, out += Q6K_UNITS) {
		gemm_prefetch_next(w, row_bytes, ib, GEMM_Q6K_BLOCK);
		if (nr == CPU_GEMM_ROWS)
			q6k_panel_sb(wb, row_bytes, CPU_GEMM_ROWS, out);
		else
			q6k_panel_sb(wb, row_bytes, nr, out);
	}
}

/* Four bytes at p, broadcast to every lane (vpdpbusd's memory operand). */
CPU_TARGET static GEMM_INLINE __m512i gemm_bcast4(const uint8_t *p)
{
	int32_t v;

	memcpy(&v, p, sizeof(v));
	return _mm512_set1_epi32(v);
}

CPU_TARGET static GEMM_INLINE void gemm_store(__m512 v, float *y, int nr)
{
	_mm512_mask_storeu_ps(y, (__mmask16)((1u << nr) - 1), v);
}

#define Q4K_TILE 4

/*
 * T tokens (T <= Q4K_TILE) against the panel: per superblock, per pair
 * of sub-blocks (2c, 2c + 1), each (c, g) unit unpacked once and put
 * through vpdpbusd for every token; the pair's sums times the scales
 * into s; the mins through vpdpwssd.
 */
CPU_TARGET static GEMM_INLINE void q4k_tile(const int T, int64_t nb,
					    const __m512i *p, const uint8_t *a,
					    size_t ab, float *const *y,
					    int64_t row0, int nr,
					    const struct cpu_gemm_ahead *ahead)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	const float *da[Q4K_TILE];
	__m512 acc[Q4K_TILE], accm[Q4K_TILE];
	int64_t ib;
	int t, c, g, k;

	GEMM_UNROLL
	for (t = 0; t < T; t++) {
		acc[t] = _mm512_setzero_ps();
		accm[t] = _mm512_setzero_ps();
		da[t] = (const float *)(a + ab * t + Q4K_ACT * nb);
	}
	for (ib = 0; ib < nb; ib++, p += Q4K_UNITS) {
		const uint8_t *at = a + Q4K_ACT * ib;
		__m512i s[Q4K_TILE];
		__m512 dw, dm;

		GEMM_UNROLL
		for (t = 0; t < T; t++)
			s[t] = _mm512_setzero_si512();
		for (c = 0; c < 4; c++) {
			__m512i lo[Q4K_TILE], hi[Q4K_TILE];

			cpu_gemm_ahead_step(ahead, 4 * ib + c);

			GEMM_UNROLL
			for (t = 0; t < T; t++) {
				lo[t] = _mm512_setzero_si512();
				hi[t] = _mm512_setzero_si512();
			}
			GEMM_UNROLL
			for (g = 0; g < 8; g++) {
				__m512i wq = _mm512_load_si512(p + 8 * c + g);
				__m512i wl = _mm512_and_si512(wq, m4);
				__m512i wh = _mm512_and_si512(
					_mm512_srli_epi16(wq, 4), m4);

				GEMM_UNROLL
				for (t = 0; t < T; t++) {
					const uint8_t *q = at + ab * t +
							   64 * c + 4 * g;

					lo[t] = _mm512_dpbusd_epi32(
						lo[t], wl, gemm_bcast4(q));
					hi[t] = _mm512_dpbusd_epi32(
						hi[t], wh, gemm_bcast4(q + 32));
				}
			}
			GEMM_UNROLL
			for (t = 0; t < T; t++)
				s[t] = _mm512_add_epi32(
					s[t],
					_mm512_add_epi32(
						_mm512_mullo_epi32(
							lo[t],
							p[Q4K_SC + 2 * c]),
						_mm512_mullo_epi32(
							hi[t], p[Q4K_SC +
								 2 * c + 1])));
		}
		dw = _mm512_castsi512_ps(p[Q4K_D]);
		dm = _mm512_castsi512_ps(p[Q4K_DMIN]);
		GEMM_UNROLL
		for (t = 0; t < T; t++) {
			const uint8_t *bp = at + ab * t + GEMM_QK;
			__m512 d = _mm512_set1_ps(da[t][ib]);
			__m512i smin = _mm512_setzero_si512();

			GEMM_UNROLL
			for (k = 0; k < 4; k++)
				smin = _mm512_dpwssd_epi32(
					smin, p[Q4K_MIN + k],
					gemm_bcast4(bp + 4 * k));
			acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]),
						 _mm512_mul_ps(dw, d), acc[t]);
			accm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(smin),
						  _mm512_mul_ps(dm, d),
						  accm[t]);
		}
	}
	GEMM_UNROLL
	for (t = 0; t < T; t++)
		gemm_store(_mm512_sub_ps(acc[t], accm[t]), y[t] + row0, nr);
}

CPU_TARGET static void q4k_run(int64_t n, const void *panel, int nr,
			       const void *acts, int nt, float *const *y,
			       int64_t row0, const void *ahead,
			       size_t ahead_bytes)
{
	const size_t ab = cpu_q4k_act_bytes(n);
	const int64_t nb = n / GEMM_QK;
	const uint8_t *a = acts;
	/* spread over the first tile's four steps a superblock */
	struct cpu_gemm_ahead pf = cpu_gemm_ahead(ahead, ahead_bytes, 4 * nb);
	int t = 0;

	for (; t + Q4K_TILE <= nt; t += Q4K_TILE, pf.bytes = 0)
		q4k_tile(Q4K_TILE, nb, panel, a + ab * t, ab, y + t, row0, nr,
			 &pf);
	switch (nt - t) {
	case 3:
		q4k_tile(3, nb, panel, a + ab * t, ab, y + t, row0, nr, &pf);
		break;
	case 2:
		q4k_tile(2, nb, panel, a + ab * t, ab, y + t, row0, nr, &pf);
		break;
	case 1:
		q4k_tile(1, nb, panel, a + ab * t, ab, y + t, row0, nr, &pf);
		break;
	default: break;
	}
}

#define Q6K_TILE 8

/*
 * T tokens (T <= Q6K_TILE): per 16-element group, its four units used
 * by every token, each token's sum starting at -32 * bsum, then times
 * the group's scale into s.
 */
CPU_TARGET static GEMM_INLINE void q6k_tile(const int T, int64_t nb,
					    const __m512i *p, const uint8_t *a,
					    size_t ab, float *const *y,
					    int64_t row0, int nr,
					    const struct cpu_gemm_ahead *ahead)
{
	const float *da[Q6K_TILE];
	__m512 acc[Q6K_TILE];
	int64_t ib;
	int t, g, k;

	GEMM_UNROLL
	for (t = 0; t < T; t++) {
		acc[t] = _mm512_setzero_ps();
		da[t] = (const float *)(a + ab * t + Q6K_ACT * nb);
	}
	for (ib = 0; ib < nb; ib++, p += Q6K_UNITS) {
		const uint8_t *at = a + Q6K_ACT * ib;
		__m512i s[Q6K_TILE];
		__m512 dw;

		GEMM_UNROLL
		for (t = 0; t < T; t++)
			s[t] = _mm512_setzero_si512();
		for (g = 0; g < 16; g++) {
			__m512i wq[4], sc = p[Q6K_SC + g];

			cpu_gemm_ahead_step(ahead, 16 * ib + g);

			GEMM_UNROLL
			for (k = 0; k < 4; k++)
				wq[k] = p[Q6K_Q + 4 * g + k];
			GEMM_UNROLL
			for (t = 0; t < T; t++) {
				const uint8_t *q = at + ab * t + 16 * g;
				__m512i sum = gemm_bcast4(at + ab * t +
							  GEMM_QK + 4 * g);

				GEMM_UNROLL
				for (k = 0; k < 4; k++)
					sum = _mm512_dpbusd_epi32(
						sum, wq[k],
						gemm_bcast4(q + 4 * k));
				s[t] = _mm512_add_epi32(
					s[t], _mm512_mullo_epi32(sum, sc));
			}
		}
		dw = _mm512_castsi512_ps(p[Q6K_D]);
		GEMM_UNROLL
		for (t = 0; t < T; t++)
			acc[t] = _mm512_fmadd_ps(
				_mm512_cvtepi32_ps(s[t]),
				_mm512_mul_ps(dw, _mm512_set1_ps(da[t][ib])),
				acc[t]);
	}
	GEMM_UNROLL
	for (t = 0; t < T; t++)
		gemm_store(acc[t], y[t] + row0, nr);
}

CPU_TARGET static void q6k_run(int64_t n, const void *panel, int nr,
			       const void *acts, int nt, float *const *y,
			       int64_t row0, const void *ahead,
			       size_t ahead_bytes)
{
	const size_t ab = cpu_q6k_act_bytes(n);
	const int64_t nb = n / GEMM_QK;
	const uint8_t *a = acts;
	/* spread over the first tile's 16 groups a superblock */
	struct cpu_gemm_ahead pf = cpu_gemm_ahead(ahead, ahead_bytes, 16 * nb);
	int t = 0;

	for (; t + Q6K_TILE <= nt; t += Q6K_TILE, pf.bytes = 0)
		q6k_tile(Q6K_TILE, nb, panel, a + ab * t, ab, y + t, row0, nr,
			 &pf);
	switch (nt - t) {
	case 7:
		q6k_tile(7, nb, panel, a + ab * t, ab, y + t, row0, nr, &pf);
		break;
	case 6:
		q6k_tile(6, nb, panel, a + ab * t, ab, y + t, row0, nr, &pf);
		break;
	case 5:
		q6k_tile(5, nb, panel, a + ab * t, ab, y + t, row0, nr, &pf);
		break;
	case 4:
		q6k_tile(4, nb, panel, a + ab * t, ab, y + t, row0, nr, &pf);
		break;
	case 3:
		q6k_tile(3, nb, panel, a + ab * t, ab, y + t, row0, nr, &pf);
		break;
	case 2:
		q6k_tile(2, nb, panel, a + ab * t, ab, y + t, row0, nr, &pf);
		break;
	case 1:
		q6k_tile(1, nb, panel, a + ab * t, ab, y + t, row0, nr, &pf);
		break;
	default: break;
	}
}
#endif /* __x86_64__ */

const struct cpu_gemm_kernels cpu_gemm_q4_K = {
	.panel_bytes = q4k_panel_bytes,
	.panel = q4k_panel,
	.act_bytes = cpu_q4k_act_bytes,
	.act_pack = cpu_q4k_act_pack,
	.run = q4k_run,
	.exact = true,
	/*
	 * llmfs-bench -n 32 -s N, Q4_K_M model (Q4_K and Q6_K), 2 threads,
	 * GEMM from 2 tokens against the tiles: 2 sequences 47.8 against
	 * 39.8 t/s, 3 62.6 against 48.4, 4 69.4 against 54.3.
	 */
	.min_tokens = 2,
	.packed = &cpu_gemm_q4_K_packed,
};

const struct cpu_gemm_kernels cpu_gemm_q6_K = {
	.panel_bytes = q6k_panel_bytes,
	.panel = q6k_panel,
	.act_bytes = cpu_q6k_act_bytes,
	.act_pack = cpu_q6k_act_pack,
	.run = q6k_run,
	.exact = false,
	.min_tokens = 2, /* as Q4_K's, measured on the same model */
	.packed = &cpu_gemm_q6_K_packed,
};
