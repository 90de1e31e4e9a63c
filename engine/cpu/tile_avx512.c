// SPDX-License-Identifier: MIT
/*
 * One weight row against up to CPU_TILE_TOKENS activation rows at once
 * (see cpu.h): the batched matmul's kernels. Each weight block is loaded
 * and unpacked once, then used against two tokens per 512-bit register
 * (the low 256 bits one token, the high the other), so a batch of tokens
 * reads and decodes the weights once.
 *
 * Every (row, token) result is the float the one-token kernel of
 * dot_avx512.c gives, bit for bit: the integer lanes hold the same
 * integers (integer sums are exact, so only which elements share a lane
 * is kept), and the float steps are the same operations on the same
 * values in the same order, lane for lane. Only the weight side's
 * signedness trick moves: for Q8_0 the activations are the unsigned
 * operand of vpdpbusd, (a + 128) . w - 128 * (w's four), so the
 * correction is per weight block, shared by all tokens.
 */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "dot.h"
#include "../quant/quant_internal.h"

#if !defined(__x86_64__)
void cpu_q8_0_tile_avx512(int64_t n, const void *w, size_t row_bytes, int nr,
			  const void *const *a, const uint8_t *qs, int nt,
			  float *out)
{
}
void cpu_q6_K_tile_avx512(int64_t n, const void *w, size_t row_bytes, int nr,
			  const void *const *a, const uint8_t *qs, int nt,
			  float *out)
{
}
void cpu_q4_K_repacked_tile_avx512(int64_t n, const void *w, size_t row_bytes,
				   int nr, const void *const *a,
				   const uint8_t *qs, int nt, float *out)
{
}
#else
#include <immintrin.h>

#define CPU_TARGET \
	__attribute__(( \
		target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

#define PAIRS (CPU_TILE_TOKENS / 2)
/*
 * Fully unrolled, the loops over the pairs keep each pair's accumulator
 * in a register; rolled, GCC keeps them in memory and every block waits
 * on a store-to-load round trip (measured: a third of the kernel).
 */
#define TILE_UNROLL _Pragma("GCC unroll 4")

/* Two 32-byte halves as one 64-byte vector. */
CPU_TARGET static __m512i tile_join(const void *lo, const void *hi)
{
	return _mm512_inserti64x4(
		_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
		_mm256_loadu_si256((const __m256i *)hi), 1);
}

/* 32-element chunk c of pair p (stride bytes apart) in qs (cpu.h). */
CPU_TARGET static __m512i tile_chunk(const uint8_t *qs, int64_t stride, int p,
				     int64_t c)
{
	return _mm512_loadu_si512(qs + stride * p + 64 * c);
}

/* Eight lanes of a, eight of b. */
CPU_TARGET static __m512 tile_halves(float a, float b)
{
	return _mm512_castpd_ps(_mm512_insertf64x4(
		_mm512_castpd256_pd512(_mm256_castps_pd(_mm256_set1_ps(a))),
		_mm256_castps_pd(_mm256_set1_ps(b)), 1));
}

/* The second token of pair p; an odd last token is paired with itself. */
static int tile_second(int nt, int p)
{
	return 2 * p + 1 < nt ? 2 * p + 1 : 2 * p;
}

/*
 * Each token's eight float lanes folded as hsum_float_8 into out, both
 * tokens of a pair at once: lane k + (k + 4), then (0 + 2) and (1 + 3),
 * then their sum, in lanes 0 and 8 (the same additions in the same
 * order; a + b and b + a are the same float).
 */
CPU_TARGET static void tile_store(const __m512 *acc, int nt, float *out)
{
	float t[16];
	int p;

	for (p = 0; 2 * p < nt; p++) {
		__m512 s = _mm512_add_ps(
			acc[p], _mm512_shuffle_f32x4(acc[p], acc[p],
						     _MM_SHUFFLE(2, 3, 0, 1)));

		s = _mm512_add_ps(
			s, _mm512_permute_ps(s, _MM_SHUFFLE(1, 0, 3, 2)));
		s = _mm512_add_ps(
			s, _mm512_permute_ps(s, _MM_SHUFFLE(2, 3, 0, 1)));
		_mm512_storeu_ps(t, s);
		out[2 * p] = t[0];
		if (2 * p + 1 < nt)
			out[2 * p + 1] = t[8];
	}
}

/*
 * cpu_q8_0_avx512 for R weight rows and up to eight tokens: per block,
 * row and token, acc = fma(dw * da, lanes, acc) with the same eight int32
 * lanes. The activations come packed already biased (a + 128, so they
 * are vpdpbusd's unsigned operand) and each row's lanes start from
 * -128 * (w's four) instead of subtracting it after: integer sums, so
 * the lanes are the same. Each activation load and its da serve R rows,
 * each weight load all the pairs.
 */
CPU_TARGET static inline __attribute__((always_inline)) void
tile_q8_0_rows(const int R, int64_t n, const uint8_t *w, size_t row_bytes,
	       const uint8_t *qs, int nt, float *out)
{
	const __m512i bias = _mm512_set1_epi8((char)0x80);
	__m512 acc[CPU_TILE_ROWS][PAIRS];
	int64_t i, nb = n / QK8_0;
	int p, r, np = (nt + 1) / 2;

	TILE_UNROLL
	for (r = 0; r < R; r++)
		TILE_UNROLL
	for (p = 0; p < PAIRS; p++)
		acc[r][p] = _mm512_setzero_ps();
	for (i = 0; i < nb; i++) {
		__m512i wq[CPU_TILE_ROWS], start[CPU_TILE_ROWS];
		float dw[CPU_TILE_ROWS];

		TILE_UNROLL
		for (r = 0; r < R; r++) {
			const struct block_q8_0 *b =
				(const struct block_q8_0 *)(w + row_bytes * r) +
				i;

			wq[r] = _mm512_broadcast_i64x4(
				_mm256_loadu_si256((const __m256i *)b->qs));
			/* -128 * (w's four) per lane */
			start[r] = _mm512_sub_epi32(
				_mm512_setzero_si512(),
				_mm512_dpbusd_epi32(_mm512_setzero_si512(),
						    bias, wq[r]));
			dw[r] = _cvtsh_ss(b->d);
		}
		TILE_UNROLL
		for (p = 0; p < PAIRS; p++) {
			if (p >= np)
				continue;
			const uint8_t *pq = qs + 4 * n * p;
			const __m512i qa = tile_chunk(pq, 0, 0, i);
			const __m512 da = _mm512_loadu_ps(
				(const float *)(pq + 2 * n) + 16 * i);

			TILE_UNROLL
			for (r = 0; r < R; r++) {
				__m512i lanes = _mm512_dpbusd_epi32(start[r],
								    qa, wq[r]);
				/* dw * da as the one-token kernel */
				__m512 d = _mm512_mul_ps(_mm512_set1_ps(dw[r]),
							 da);

				acc[r][p] = _mm512_fmadd_ps(
					d, _mm512_cvtepi32_ps(lanes),
					acc[r][p]);
			}
		}
	}
	TILE_UNROLL
	for (r = 0; r < R; r++)
		tile_store(acc[r], nt, out + CPU_TILE_TOKENS * r);
}

CPU_TARGET void cpu_q8_0_tile_avx512(int64_t n, const void *w, size_t row_bytes,
				     int nr, const void *const *a,
				     const uint8_t *qs, int nt, float *out)
{
	(void)a;
	switch (nr) {
	case 4: tile_q8_0_rows(4, n, w, row_bytes, qs, nt, out); break;
	case 3: tile_q8_0_rows(3, n, w, row_bytes, qs, nt, out); break;
	case 2: tile_q8_0_rows(2, n, w, row_bytes, qs, nt, out); break;
	default: tile_q8_0_rows(1, n, w, row_bytes, qs, nt, out); break;
	}
}

/*
 * cpu_q6_K_avx512 for R rows and up to eight tokens. Lane l of a token's
 * eight gathers, in each 32-element group g, the elements 4l..4l+3 times
 * the scale of their 16 (the same integer as the one-token kernel's fold
 * of sixteen lanes), less 32 * (b[2l] sc[2l] + b[2l+1] sc[2l+1]). The
 * groups' weights are unpacked as they are used, each activation chunk
 * loaded once for the R rows.
 */
CPU_TARGET static inline __attribute__((always_inline)) void
tile_q6_K_rows(const int R, int64_t n, const uint8_t *w, size_t row_bytes,
	       const void *const *va, const uint8_t *qs, int nt, float *out)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
	const struct block_q8_K *a0[PAIRS], *a1[PAIRS];
	__m512 acc[2][PAIRS];
	__m512i idx[8];
	int64_t i, nb = n / QK_K;
	int p, g, r, np = (nt + 1) / 2;

	for (p = 0; p < PAIRS; p++) {
		a0[p] = va[2 * p];
		a1[p] = va[tile_second(nt, p)];
		for (r = 0; r < R; r++)
			acc[r][p] = _mm512_setzero_ps();
	}
	/*
	 * group g, int16 lanes of element pairs: lanes 0-7 (elements 0-15)
	 * take scale 2g, lanes 8-15 scale 2g + 1, in each token's half
	 */
	for (g = 0; g < 8; g++)
		idx[g] = _mm512_add_epi16(
			_mm512_set1_epi16((short)(2 * g)),
			_mm512_broadcast_i64x4(
				_mm256_set_epi16(1, 1, 1, 1, 1, 1, 1, 1, 0, 0,
						 0, 0, 0, 0, 0, 0)));
	for (i = 0; i < nb; i++) {
		const struct block_q6_K *x[2];
		__m512i sc16[2], isum[2][PAIRS];
		int h, k;

		TILE_UNROLL
		for (r = 0; r < R; r++) {
			x[r] = (const struct block_q6_K *)(w + row_bytes * r) +
			       i;
			/* the 16 scales as int16, both halves */
			sc16[r] = _mm512_broadcast_i64x4(
				_mm256_cvtepi8_epi16(_mm_loadu_si128(
					(const __m128i *)x[r]->scales)));
			TILE_UNROLL
			for (p = 0; p < PAIRS; p++)
				isum[r][p] = _mm512_setzero_si512();
		}
		for (h = 0; h < 2; h++) {
			__m256i l0[2], l1[2], qh[2];

			TILE_UNROLL
			for (r = 0; r < R; r++) {
				const uint8_t *ql = x[r]->ql + 64 * h;

				l0[r] = _mm256_loadu_si256((const __m256i *)ql);
				l1[r] = _mm256_loadu_si256(
					(const __m256i *)(ql + 32));
				qh[r] = _mm256_loadu_si256(
					(const __m256i *)(x[r]->qh + 32 * h));
			}
			/* elements 128h + 32k .. + 31 */
			TILE_UNROLL
			for (k = 0; k < 4; k++) {
				__m512i wq[2], sg[2];

				TILE_UNROLL
				for (r = 0; r < R; r++) {
					__m256i l = k & 1 ? l1[r] : l0[r];

					if (k >= 2)
						l = _mm256_srli_epi16(l, 4);
					wq[r] = _mm512_broadcast_i64x4(_mm256_or_si256(
						_mm256_and_si256(l, m4),
						_mm256_slli_epi16(
							_mm256_and_si256(
								_mm256_srli_epi16(
									qh[r],
									2 * k),
								m2),
							4)));
					sg[r] = _mm512_permutexvar_epi16(
						idx[4 * h + k], sc16[r]);
				}
				TILE_UNROLL
				for (p = 0; p < PAIRS; p++) {
					if (p >= np)
						continue;
					/*
					 * weights times activations in pairs
					 * (vpmaddubsw: at most 2 * 63 * 128,
					 * no saturation), then times the
					 * scale into the lanes (vpdpwssd)
					 */
					const __m512i aq = tile_chunk(
						qs, 2 * n, p,
						8 * i + 4 * h + k);

					TILE_UNROLL
					for (r = 0; r < R; r++)
						isum[r][p] = _mm512_dpwssd_epi32(
							isum[r][p],
							_mm512_maddubs_epi16(
								wq[r], aq),
							sg[r]);
				}
			}
		}
		TILE_UNROLL
		for (p = 0; p < PAIRS; p++) {
			if (p >= np)
				continue;
			const __m512i bs = tile_join(a0[p][i].bsums,
						     a1[p][i].bsums);
			const __m512 da = tile_halves(a0[p][i].d, a1[p][i].d);

			TILE_UNROLL
			for (r = 0; r < R; r++) {
				/* b[2l] sc[2l] + b[2l+1] sc[2l+1], per half */
				__m512i corr = _mm512_madd_epi16(bs, sc16[r]);
				__m512i is = _mm512_sub_epi32(
					isum[r][p], _mm512_slli_epi32(corr, 5));
				__m512 d = _mm512_mul_ps(
					da, _mm512_set1_ps(_cvtsh_ss(x[r]->d)));

				acc[r][p] = _mm512_fmadd_ps(
					d, _mm512_cvtepi32_ps(is), acc[r][p]);
			}
		}
	}
	for (r = 0; r < R; r++)
		tile_store(acc[r], nt, out + CPU_TILE_TOKENS * r);
}

/*
 * The eight 6-bit scales (out[0..7]) and mins (out[8..15]) of a q4_K
 * block, as quant_k_scale_min gives them, four at a time in 32-bit words.
 */
static inline void tile_q4_K_scales(const uint8_t *q, uint8_t out[16])
{
	uint32_t u[4], m;

	memcpy(u, q, 12);
	u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
	m = u[1] & 0x3f3f3f3f;
	u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
	u[2] = m;
	u[0] &= 0x3f3f3f3f;
	memcpy(out, u, 16);
}

/*
 * Four vectors of two tokens' sixteen int32 lanes each (v[p] holds
 * tokens 2p and 2p + 1, eight lanes each) to one int32 per token,
 * tokens 0..7 in order: three rounds of adding neighbouring lanes.
 */
CPU_TARGET static __m256i tile_reduce8(const __m512i *v)
{
	const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14,
					    12, 10, 8, 6, 4, 2, 0);
	const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
	__m512i s01 = _mm512_add_epi32(
		_mm512_permutex2var_epi32(v[0], ev, v[1]),
		_mm512_permutex2var_epi32(v[0], od, v[1]));
	__m512i s23 = _mm512_add_epi32(
		_mm512_permutex2var_epi32(v[2], ev, v[3]),
		_mm512_permutex2var_epi32(v[2], od, v[3]));
	__m512i s = _mm512_add_epi32(_mm512_permutex2var_epi32(s01, ev, s23),
				     _mm512_permutex2var_epi32(s01, od, s23));

	s = _mm512_add_epi32(_mm512_permutexvar_epi32(ev, s),
			     _mm512_permutexvar_epi32(od, s));
	return _mm512_castsi512_si256(s);
}

/*
 * cpu_q4_K_repacked_avx512 (the gemv order: one float per row and token)
 * for R rows and up to eight tokens: each block's integer sums of all
 * tokens, then acc = fma(isum, dw * da, acc) and accm = fma(smin,
 * dmin * da, accm) on eight lanes, one per token; acc - accm at the end.
 * The integer sums are exact, so they may gather in any order: by 32-byte
 * load g of the weights (sub-blocks 2g and 2g + 1), each activation chunk
 * loaded once for the R rows.
 *
 * NARROW (two rows, at most four tokens, a decode batch): the two rows'
 * sums are reduced together, row 0's four tokens in lanes 0-3 and row
 * 1's in lanes 4-7 of one accumulator, each lane the same dw * da and
 * FMA as before: half the reductions, which at four tokens cost as much
 * as the multiply-adds.
 */
CPU_TARGET static inline __attribute__((always_inline)) void
tile_q4_K_rows(const int R, const bool NARROW, int64_t n, const uint8_t *w,
	       size_t row_bytes, const void *const *va, const uint8_t *qs,
	       int nt, float *out)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	const struct block_q8_K *a[CPU_TILE_TOKENS];
	__m256 acc[2], accm[2];
	int64_t i, nb = n / QK_K;
	float t[8];
	int p, g, j, r, np = (nt + 1) / 2;

	for (j = 0; j < CPU_TILE_TOKENS; j++)
		a[j] = va[j < nt ? j : nt - 1];
	for (r = 0; r < R; r++)
		acc[r] = accm[r] = _mm256_setzero_ps();
	for (i = 0; i < nb; i++) {
		const struct block_q4_K *x[2];
		__m512i isum[2][PAIRS], msum[2][PAIRS], mn16[2];
		uint8_t sm[2][16];
		uint32_t sp[2][8];

		TILE_UNROLL
		for (r = 0; r < R; r++) {
			x[r] = (const struct block_q4_K *)(w + row_bytes * r) +
			       i;
			tile_q4_K_scales(x[r]->scales, sm[r]);
			/*
			 * each scale twice, an int16 pair: vpdpwssd takes it
			 * as a broadcast memory operand, no register held
			 */
			for (j = 0; j < 8; j++)
				sp[r][j] = sm[r][j] * 0x10001u;
			/* mins as int16 pairs: bsums 2j and 2j + 1 take min j */
			{
				__m128i mn = _mm_loadl_epi64(
					(const __m128i *)(sm[r] + 8));

				mn16[r] = _mm512_broadcast_i64x4(
					_mm256_cvtepu8_epi16(
						_mm_unpacklo_epi8(mn, mn)));
			}
			TILE_UNROLL
			for (p = 0; p < PAIRS; p++)
				isum[r][p] = msum[r][p] =
					_mm512_setzero_si512();
		}
		for (g = 0; g < 4; g++) {
			__m512i lo[2], hi[2];

			TILE_UNROLL
			for (r = 0; r < R; r++) {
				const __m512i q = _mm512_broadcast_i64x4(
					_mm256_loadu_si256(
						(const __m256i *)(x[r]->qs +
								  32 * g)));

				lo[r] = _mm512_and_si512(q, m4);
				hi[r] = _mm512_and_si512(
					_mm512_srli_epi16(q, 4), m4);
			}
			TILE_UNROLL
			for (p = 0; p < PAIRS; p++) {
				if (p >= np)
					continue;
				/* pairs by vpmaddubsw (at most 2 * 15 * 128) */
				const __m512i alo = tile_chunk(qs, 2 * n, p,
							       8 * i + 2 * g);
				const __m512i ahi = tile_chunk(
					qs, 2 * n, p, 8 * i + 2 * g + 1);

				TILE_UNROLL
				for (r = 0; r < R; r++) {
					isum[r][p] = _mm512_dpwssd_epi32(
						isum[r][p],
						_mm512_maddubs_epi16(lo[r],
								     alo),
						_mm512_set1_epi32(
							(int)sp[r][2 * g]));
					isum[r][p] = _mm512_dpwssd_epi32(
						isum[r][p],
						_mm512_maddubs_epi16(hi[r],
								     ahi),
						_mm512_set1_epi32(
							(int)sp[r][2 * g + 1]));
				}
			}
		}
		TILE_UNROLL
		for (p = 0; p < PAIRS; p++) {
			if (p >= np)
				continue;
			const __m512i bs = tile_join(a[2 * p][i].bsums,
						     a[2 * p + 1][i].bsums);

			TILE_UNROLL
			for (r = 0; r < R; r++)
				msum[r][p] = _mm512_madd_epi16(bs, mn16[r]);
		}
		if (NARROW) {
			const __m512i v[4] = { isum[0][0], isum[0][1],
					       isum[1][0], isum[1][1] };
			const __m512i m[4] = { msum[0][0], msum[0][1],
					       msum[1][0], msum[1][1] };
			const __m256 vda = _mm256_set_ps(
				a[3][i].d, a[2][i].d, a[1][i].d, a[0][i].d,
				a[3][i].d, a[2][i].d, a[1][i].d, a[0][i].d);
			const float w0 = _cvtsh_ss(x[0]->d);
			const float w1 = _cvtsh_ss(x[1]->d);
			const float m0 = _cvtsh_ss(x[0]->dmin);
			const float m1 = _cvtsh_ss(x[1]->dmin);
			const __m256 d = _mm256_mul_ps(
				_mm256_set_ps(w1, w1, w1, w1, w0, w0, w0, w0),
				vda);
			const __m256 dm = _mm256_mul_ps(
				_mm256_set_ps(m1, m1, m1, m1, m0, m0, m0, m0),
				vda);

			acc[0] = _mm256_fmadd_ps(
				_mm256_cvtepi32_ps(tile_reduce8(v)), d, acc[0]);
			accm[0] = _mm256_fmadd_ps(
				_mm256_cvtepi32_ps(tile_reduce8(m)), dm,
				accm[0]);
		} else {
			/*
			 * built in registers: eight scalar stores read back as
			 * one vector would miss store-to-load forwarding
			 */
			const __m256 vda = _mm256_set_ps(
				a[7][i].d, a[6][i].d, a[5][i].d, a[4][i].d,
				a[3][i].d, a[2][i].d, a[1][i].d, a[0][i].d);

			TILE_UNROLL
			for (r = 0; r < R; r++) {
				const __m256 d = _mm256_mul_ps(
					_mm256_set1_ps(_cvtsh_ss(x[r]->d)),
					vda);
				const __m256 dm = _mm256_mul_ps(
					_mm256_set1_ps(_cvtsh_ss(x[r]->dmin)),
					vda);

				acc[r] = _mm256_fmadd_ps(
					_mm256_cvtepi32_ps(
						tile_reduce8(isum[r])),
					d, acc[r]);
				accm[r] = _mm256_fmadd_ps(
					_mm256_cvtepi32_ps(
						tile_reduce8(msum[r])),
					dm, accm[r]);
			}
		}
	}
	if (NARROW) {
		_mm256_storeu_ps(t, _mm256_sub_ps(acc[0], accm[0]));
		for (j = 0; j < nt; j++) {
			out[j] = t[j];
			out[CPU_TILE_TOKENS + j] = t[4 + j];
		}
		return;
	}
	for (r = 0; r < R; r++) {
		_mm256_storeu_ps(t, _mm256_sub_ps(acc[r], accm[r]));
		for (j = 0; j < nt; j++)
			out[CPU_TILE_TOKENS * r + j] = t[j];
	}
}

CPU_TARGET void cpu_q6_K_tile_avx512(int64_t n, const void *w, size_t row_bytes,
				     int nr, const void *const *a,
				     const uint8_t *qs, int nt, float *out)
{
	const uint8_t *rw = w;
	int r;

	/* two rows at a time, as Q4_K */
	for (r = 0; r + 1 < nr; r += 2)
		tile_q6_K_rows(2, n, rw + row_bytes * r, row_bytes, a, qs, nt,
			       out + CPU_TILE_TOKENS * r);
	if (r < nr)
		tile_q6_K_rows(1, n, rw + row_bytes * r, row_bytes, a, qs, nt,
			       out + CPU_TILE_TOKENS * r);
}

CPU_TARGET void cpu_q4_K_repacked_tile_avx512(int64_t n, const void *w,
					      size_t row_bytes, int nr,
					      const void *const *a,
					      const uint8_t *qs, int nt,
					      float *out)
{
	const uint8_t *rw = w;
	int r;

	/* two rows at a time: four would spill the sums' registers */
	for (r = 0; r + 1 < nr; r += 2) {
		if (nt <= 4)
			tile_q4_K_rows(2, true, n, rw + row_bytes * r,
				       row_bytes, a, qs, nt,
				       out + CPU_TILE_TOKENS * r);
		else
			tile_q4_K_rows(2, false, n, rw + row_bytes * r,
				       row_bytes, a, qs, nt,
				       out + CPU_TILE_TOKENS * r);
	}
	if (r < nr)
		tile_q4_K_rows(1, false, n, rw + row_bytes * r, row_bytes, a,
			       qs, nt, out + CPU_TILE_TOKENS * r);
}
#endif /* __x86_64__ */
