// SPDX-License-Identifier: MIT
/*
 * AVX2 dot products (see avx2.h): dot_avx512.c's kernels in 256-bit
 * registers, each returning the scalar emulation's float bit for bit.
 *
 * The integer lanes: vpmaddubsw multiplies unsigned by signed bytes and
 * adds neighbours into int16 (saturating), vpmaddwd then adds int16 pairs
 * into int32, so lane l of a 32-byte load holds elements 4l..4l+3, as
 * vpdpbusd's. Nothing saturates: the unsigned operand is a weight of at
 * most 6 bits (2 x 63 x 128 < 32767) or, for Q8_0, |w| <= 128 against
 * sign(a, w) with |a| <= 127 (2 x 128 x 127 < 32767). A sub-block's scale
 * is the second operand of the vpmaddwd (scale x (p0 + p1), the same
 * integer as the AVX-512 kernels' vpmulld of the lane).
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "avx2.h"
#include "reduce_avx2.h"
#include "../quant/quant_internal.h"

#define CPU_TARGET __attribute__((target("avx2,fma,f16c")))

static bool cpu_avx2_ok;
static pthread_once_t cpu_avx2_once = PTHREAD_ONCE_INIT;

static void cpu_avx2_init(void)
{
	__builtin_cpu_init();
	cpu_avx2_ok = __builtin_cpu_supports("avx2") &&
		      __builtin_cpu_supports("fma") &&
		      __builtin_cpu_supports("f16c");
}

bool cpu_avx2_usable(void)
{
	pthread_once(&cpu_avx2_once, cpu_avx2_init);
	return cpu_avx2_ok;
}

CPU_TARGET static float cpu_h2f(uint16_t h)
{
	return _cvtsh_ss(h);
}

/* acc[0] + acc[2], acc[1] + acc[3], their sum, then dot_hsum16. */
CPU_TARGET static float cpu_reduce4(__m256 a[8])
{
	int h;

	for (h = 0; h < 2; h++) {
		a[h] = _mm256_add_ps(a[h], a[4 + h]);
		a[2 + h] = _mm256_add_ps(a[2 + h], a[6 + h]);
		a[h] = _mm256_add_ps(a[h], a[2 + h]);
	}
	return cpu_hsum16_avx2(a[0], a[1]);
}

/*
 * ggml_vec_dot_f32's four 16-lane accumulators as eight 8-lane ones:
 * a[2j + h] holds lanes 8h..8h + 7 of accumulator j.
 */
CPU_TARGET float cpu_f32_main_avx2(int64_t np, const float *x, const float *y)
{
	__m256 a[8];
	int64_t i;
	int k;

	for (k = 0; k < 8; k++)
		a[k] = _mm256_setzero_ps();
	for (i = 0; i < np; i += 64)
		for (k = 0; k < 8; k++)
			a[k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * k),
					       _mm256_loadu_ps(y + i + 8 * k),
					       a[k]);
	return cpu_reduce4(a);
}

CPU_TARGET static __m256 cpu_ld_f16(const uint16_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

CPU_TARGET float cpu_f16_main_avx2(int64_t np, const uint16_t *x,
				   const uint16_t *y)
{
	__m256 a[8];
	int64_t i;
	int k;

	for (k = 0; k < 8; k++)
		a[k] = _mm256_setzero_ps();
	for (i = 0; i < np; i += 64)
		for (k = 0; k < 8; k++)
			a[k] = _mm256_fmadd_ps(cpu_ld_f16(x + i + 8 * k),
					       cpu_ld_f16(y + i + 8 * k), a[k]);
	return cpu_reduce4(a);
}

/*
 * dot_bf16's loop: lane l of accumulator h takes the pair 2l, 2l + 1 of
 * each 32 elements, the odd product fused in first; lanes 0..7 are the
 * first 16 elements, 8..15 the next.
 */
CPU_TARGET void cpu_bf16_main_avx2(int64_t np, const uint16_t *x,
				   const uint16_t *y, float c[2])
{
	const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
	__m256 acc[4];
	int64_t i;
	int k;

	for (k = 0; k < 4; k++)
		acc[k] = _mm256_setzero_ps();
	for (i = 0; i < np; i += 64)
		for (k = 0; k < 4; k++) {
			__m256i vx = _mm256_loadu_si256(
				(const __m256i *)(x + i + 16 * k));
			__m256i vy = _mm256_loadu_si256(
				(const __m256i *)(y + i + 16 * k));

			acc[k] = _mm256_fmadd_ps(
				_mm256_castsi256_ps(_mm256_and_si256(vx, hi)),
				_mm256_castsi256_ps(_mm256_and_si256(vy, hi)),
				acc[k]);
			acc[k] = _mm256_fmadd_ps(
				_mm256_castsi256_ps(_mm256_slli_epi32(vx, 16)),
				_mm256_castsi256_ps(_mm256_slli_epi32(vy, 16)),
				acc[k]);
		}
	c[0] = cpu_hsum16_avx2(acc[0], acc[1]);
	c[1] = cpu_hsum16_avx2(acc[2], acc[3]);
}

/* int16 pairs into int32 lanes: lane l = p[2l] + p[2l + 1] */
CPU_TARGET static __m256i cpu_pairs(__m256i p)
{
	return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/*
 * Lane l = w[4l..4l+3] . a[4l..4l+3] for signed w (any byte) and a in
 * [-127, 127]: |w| . sign(a, w), whose pair sums stay within int16.
 */
CPU_TARGET static __m256i cpu_lanes_s8(__m256i w, __m256i a)
{
	return cpu_pairs(_mm256_maddubs_epi16(_mm256_abs_epi8(w),
					      _mm256_sign_epi8(a, w)));
}

/* x86_dot_legacy for Q8_0: acc = fma(dw * da, lanes, acc), then hsum8. */
CPU_TARGET float cpu_q8_0_avx2(int64_t n, const void *vw, const void *va)
{
	const struct block_q8_0 *w = vw, *a = va;
	__m256 acc = _mm256_setzero_ps();
	int64_t i, nb = n / QK8_0;

	for (i = 0; i < nb; i++) {
		__m256i lanes = cpu_lanes_s8(
			_mm256_loadu_si256((const __m256i *)w[i].qs),
			_mm256_loadu_si256((const __m256i *)a[i].qs));
		float d = cpu_h2f(w[i].d) * cpu_h2f(a[i].d);

		acc = _mm256_fmadd_ps(_mm256_set1_ps(d),
				      _mm256_cvtepi32_ps(lanes), acc);
	}
	return cpu_hsum8_avx2(acc);
}

/* 32 bytes of 16 where bit e of h is set (a q5 block's fifth bits). */
CPU_TARGET static __m256i cpu_bits16(uint32_t h)
{
	const __m256i bit = _mm256_set1_epi64x(
		(long long)0x8040201008040201ull);
	__m256i v = _mm256_shuffle_epi8(
		_mm256_set1_epi32((int)h),
		_mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll,
				  0x0101010101010101ll, 0));

	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
	return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

/* A 16-byte row of nibbles as 32 bytes: low nibbles, then high ones. */
CPU_TARGET static __m256i cpu_nibbles(const uint8_t *qs)
{
	const __m128i m4 = _mm_set1_epi8(0x0f);
	__m128i q = _mm_loadu_si128((const __m128i *)qs);

	return _mm256_inserti128_si256(
		_mm256_castsi128_si256(_mm_and_si128(q, m4)),
		_mm_and_si128(_mm_srli_epi16(q, 4), m4), 1);
}

/*
 * x86_dot_legacy for Q4_0/Q4_1/Q5_0/Q5_1: the weights as unsigned bytes
 * (nibble, plus 16 for a set fifth bit, at most 31), the offset (8 or 16)
 * taken off in int16 as off * (a's pairs); summs = fma(m, s, summs) for
 * the _1 types.
 */
CPU_TARGET static float cpu_legacy(int64_t n, const uint8_t *w,
				   const uint8_t *a, size_t bw, int with_min,
				   int five, int off)
{
	/* where qs starts: after d (and m) (and qh) */
	const size_t qs_at = 2 + 2 * with_min + 4 * five;
	const size_t ab = with_min ? sizeof(struct block_q8_1) :
				     sizeof(struct block_q8_0);
	const __m256i offv = _mm256_set1_epi8((char)off);
	__m256 acc = _mm256_setzero_ps();
	float summs = 0.0f;
	int64_t i, nb = n / 32;

	for (i = 0; i < nb; i++, w += bw, a += ab) {
		__m256i wq = cpu_nibbles(w + qs_at);
		__m256i qa = _mm256_loadu_si256(
			(const __m256i *)(a + (with_min ? 4 : 2)));
		__m256i p;
		uint16_t dw, da;
		float d;

		if (five) {
			uint32_t qh;

			memcpy(&qh, w + 2 + 2 * with_min, 4);
			wq = _mm256_or_si256(wq, cpu_bits16(qh));
		}
		p = _mm256_maddubs_epi16(wq, qa);
		if (off)
			p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(offv, qa));
		memcpy(&dw, w, 2);
		memcpy(&da, a, 2);
		if (with_min) {
			uint16_t mw, sa;

			memcpy(&mw, w + 2, 2);
			memcpy(&sa, a + 2, 2);
			summs = fmaf(cpu_h2f(mw), cpu_h2f(sa), summs);
		}
		d = cpu_h2f(dw) * cpu_h2f(da);
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d),
				      _mm256_cvtepi32_ps(cpu_pairs(p)), acc);
	}
	return with_min ? cpu_hsum8_avx2(acc) + summs : cpu_hsum8_avx2(acc);
}

CPU_TARGET float cpu_q4_0_avx2(int64_t n, const void *w, const void *a)
{
	return cpu_legacy(n, w, a, sizeof(struct block_q4_0), 0, 0, 8);
}

CPU_TARGET float cpu_q4_1_avx2(int64_t n, const void *w, const void *a)
{
	return cpu_legacy(n, w, a, sizeof(struct block_q4_1), 1, 0, 0);
}

CPU_TARGET float cpu_q5_0_avx2(int64_t n, const void *w, const void *a)
{
	return cpu_legacy(n, w, a, sizeof(struct block_q5_0), 0, 1, 16);
}

CPU_TARGET float cpu_q5_1_avx2(int64_t n, const void *w, const void *a)
{
	return cpu_legacy(n, w, a, sizeof(struct block_q5_1), 1, 1, 0);
}

/* The 6-bit scale and min j of a q4_K block (quant_k_scale_min, inlined). */
static inline void cpu_scale_min_k4(const uint8_t *q, int j, uint8_t *sc,
				    uint8_t *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
		*m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
	}
}

/* int16 scales for a 32-element load: lanes 0..3 take s0, lanes 4..7 s1 */
CPU_TARGET static __m256i cpu_pair16(int s0, int s1)
{
	return _mm256_inserti128_si256(
		_mm256_castsi128_si256(_mm_set1_epi16((short)s0)),
		_mm_set1_epi16((short)s1), 1);
}

/*
 * Q4_K and Q5_K's sixteen lanes of a 64-element group g: low nibbles
 * (plus 16 where qh bit 2g is set, Q5_K) times scale s0, high ones (qh
 * bit 2g + 1) times s1.
 */
CPU_TARGET static __m256i cpu_q45_group(const uint8_t *qs, const int8_t *a,
					__m256i h0, __m256i h1, int s0, int s1)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	__m256i q = _mm256_loadu_si256((const __m256i *)qs);
	__m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), h0);
	__m256i hi = _mm256_or_si256(
		_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1);
	__m256i p0 = _mm256_maddubs_epi16(
		lo, _mm256_loadu_si256((const __m256i *)a));
	__m256i p1 = _mm256_maddubs_epi16(
		hi, _mm256_loadu_si256((const __m256i *)(a + 32)));

	return _mm256_add_epi32(
		_mm256_madd_epi16(p0, _mm256_set1_epi16((short)s0)),
		_mm256_madd_epi16(p1, _mm256_set1_epi16((short)s1)));
}

/*
 * x86_dot_q45_K for Q4_K: the mins in scalar (four floats, as there),
 * the weights 0..15 against the activations in pairs, each 32-element
 * sub-block's pairs times its scale.
 */
CPU_TARGET float cpu_q4_K_avx2(int64_t n, const void *vw, const void *va)
{
	const struct block_q4_K *x = vw;
	const struct block_q8_K *y = va;
	const __m256i zero = _mm256_setzero_si256();
	__m256 acc = _mm256_setzero_ps();
	float acc_m[4] = { 0 };
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		const float d = y[i].d * cpu_h2f(x[i].d);
		const float dmin = -y[i].d * cpu_h2f(x[i].dmin);
		__m256i isum = _mm256_setzero_si256();
		uint8_t sc[8], mn[8];
		int j, k, g;

		for (j = 0; j < 8; j++)
			cpu_scale_min_k4(x[i].scales, j, &sc[j], &mn[j]);
		for (k = 0; k < 4; k++) {
			const int16_t *b = y[i].bsums + 4 * k;
			int p = mn[2 * k] * (b[0] + b[1]) +
				mn[2 * k + 1] * (b[2] + b[3]);

			acc_m[k] = fmaf(dmin, (float)p, acc_m[k]);
		}
		for (g = 0; g < 4; g++)
			isum = _mm256_add_epi32(
				isum,
				cpu_q45_group(x[i].qs + 32 * g,
					      y[i].qs + 64 * g, zero, zero,
					      sc[2 * g], sc[2 * g + 1]));
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d),
				      _mm256_cvtepi32_ps(isum), acc);
	}
	return cpu_hsum8_avx2(acc) +
	       ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

/* 16 where bit b of each byte of qh is set */
CPU_TARGET static __m256i cpu_bit16(__m256i qh, int b)
{
	const __m256i m = _mm256_set1_epi8((char)(1 << b));

	return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, m), m),
				_mm256_set1_epi8(16));
}

/*
 * x86_dot_q45_K for Q5_K: as cpu_q4_K_avx2 with the fifth bits and the
 * mins summed to one integer, summs = fma(-dmin, sum, summs).
 */
CPU_TARGET float cpu_q5_K_avx2(int64_t n, const void *vw, const void *va)
{
	const struct block_q5_K *x = vw;
	const struct block_q8_K *y = va;
	__m256 acc = _mm256_setzero_ps();
	float summs = 0.0f;
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		const float d = y[i].d * cpu_h2f(x[i].d);
		const float dmin = -y[i].d * cpu_h2f(x[i].dmin);
		const __m256i qh = _mm256_loadu_si256((const __m256i *)x[i].qh);
		__m256i isum = _mm256_setzero_si256();
		uint8_t sc[8], mn[8];
		int32_t prod[4];
		int j, k, g;

		for (j = 0; j < 8; j++)
			cpu_scale_min_k4(x[i].scales, j, &sc[j], &mn[j]);
		for (k = 0; k < 4; k++) {
			const int16_t *b = y[i].bsums + 4 * k;

			prod[k] = mn[2 * k] * (b[0] + b[1]) +
				  mn[2 * k + 1] * (b[2] + b[3]);
		}
		summs = fmaf(dmin,
			     (float)(prod[0] + prod[1] + prod[2] + prod[3]),
			     summs);
		for (g = 0; g < 4; g++)
			isum = _mm256_add_epi32(
				isum, cpu_q45_group(x[i].qs + 32 * g,
						    y[i].qs + 64 * g,
						    cpu_bit16(qh, 2 * g),
						    cpu_bit16(qh, 2 * g + 1),
						    sc[2 * g], sc[2 * g + 1]));
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d),
				      _mm256_cvtepi32_ps(isum), acc);
	}
	return cpu_hsum8_avx2(acc) + summs;
}

/*
 * x86_dot_q6_K: unsigned 6-bit weights (at most 2 x 63 x 128 a pair),
 * each 32-element load's lanes 0..3 times the scale of its first 16,
 * lanes 4..7 of its second; then lane l loses 32 * (b[2l] sc[2l] +
 * b[2l+1] sc[2l+1]) as there.
 */
CPU_TARGET float cpu_q6_K_avx2(int64_t n, const void *vw, const void *va)
{
	const struct block_q6_K *x = vw;
	const struct block_q8_K *y = va;
	const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
	__m256 acc = _mm256_setzero_ps();
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		const float d = y[i].d * cpu_h2f(x[i].d);
		const int8_t *s = x[i].scales;
		__m256i isum = _mm256_setzero_si256(), corr;
		int h;

		for (h = 0; h < 2; h++) {
			const uint8_t *ql = x[i].ql + 64 * h;
			const int8_t *a = y[i].qs + 128 * h;
			const int8_t *sh = s + 8 * h;
			__m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
			__m256i l1 = _mm256_loadu_si256(
				(const __m256i *)(ql + 32));
			__m256i qh = _mm256_loadu_si256(
				(const __m256i *)(x[i].qh + 32 * h));
			__m256i q[4];
			int c;

			q[0] = _mm256_or_si256(
				_mm256_and_si256(l0, m4),
				_mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
			q[1] = _mm256_or_si256(
				_mm256_and_si256(l1, m4),
				_mm256_slli_epi16(
					_mm256_and_si256(
						_mm256_srli_epi16(qh, 2), m2),
					4));
			q[2] = _mm256_or_si256(
				_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
				_mm256_slli_epi16(
					_mm256_and_si256(
						_mm256_srli_epi16(qh, 4), m2),
					4));
			q[3] = _mm256_or_si256(
				_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
				_mm256_slli_epi16(
					_mm256_and_si256(
						_mm256_srli_epi16(qh, 6), m2),
					4));
			for (c = 0; c < 4; c++) {
				__m256i p = _mm256_maddubs_epi16(
					q[c],
					_mm256_loadu_si256(
						(const __m256i *)(a + 32 * c)));

				isum = _mm256_add_epi32(
					isum,
					_mm256_madd_epi16(
						p, cpu_pair16(sh[2 * c],
							      sh[2 * c + 1])));
			}
		}
		/* lane l less 32 (b[2l] sc[2l] + b[2l+1] sc[2l+1]) */
		corr = _mm256_madd_epi16(
			_mm256_loadu_si256((const __m256i *)y[i].bsums),
			_mm256_cvtepi8_epi16(
				_mm_loadu_si128((const __m128i *)s)));
		acc = _mm256_fmadd_ps(
			_mm256_set1_ps(d),
			_mm256_cvtepi32_ps(_mm256_sub_epi32(
				isum, _mm256_slli_epi32(corr, 5))),
			acc);
	}
	return cpu_hsum8_avx2(acc);
}

/*
 * x86_dot_q2_K: per block first acc = fma(-dmin, mins . bsums (lane l:
 * sub-blocks 2l, 2l + 1), acc), then acc = fma(d, lanes, acc); weights
 * 0..3, each 16-element sub-block times its scale.
 */
CPU_TARGET float cpu_q2_K_avx2(int64_t n, const void *vw, const void *va)
{
	const struct block_q2_K *x = vw;
	const struct block_q8_K *y = va;
	const __m256i m2 = _mm256_set1_epi8(3);
	__m256 acc = _mm256_setzero_ps();
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		const float d = y[i].d * cpu_h2f(x[i].d);
		const float dmin = -y[i].d * cpu_h2f(x[i].dmin);
		const __m128i s8 = _mm_loadu_si128(
			(const __m128i *)x[i].scales);
		/* mins (high nibbles) as int16, times the bsums in pairs */
		__m256i prod = _mm256_madd_epi16(
			_mm256_cvtepu8_epi16(_mm_srli_epi16(
				_mm_andnot_si128(_mm_set1_epi8(0x0f), s8), 4)),
			_mm256_loadu_si256((const __m256i *)y[i].bsums));
		__m256i isum = _mm256_setzero_si256();
		int h, c;

		acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin),
				      _mm256_cvtepi32_ps(prod), acc);
		for (h = 0; h < 2; h++) {
			__m256i q = _mm256_loadu_si256(
				(const __m256i *)(x[i].qs + 32 * h));

			for (c = 0; c < 4; c++) {
				const int j = 8 * h + 2 * c;
				__m256i wq = _mm256_and_si256(
					_mm256_srli_epi16(q, 2 * c), m2);
				__m256i p = _mm256_maddubs_epi16(
					wq, _mm256_loadu_si256(
						    (const __m256i *)(y[i].qs +
								      128 * h +
								      32 * c)));

				isum = _mm256_add_epi32(
					isum,
					_mm256_madd_epi16(
						p,
						cpu_pair16(x[i].scales[j] & 0xf,
							   x[i].scales[j + 1] &
								   0xf)));
			}
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d),
				      _mm256_cvtepi32_ps(isum), acc);
	}
	return cpu_hsum8_avx2(acc);
}

/*
 * x86_dot_q3_K: weight lo - 4 + 4 * hbit taken as the unsigned lo + 4 *
 * hbit (0..7) minus 4 (in int16 pairs), times the signed 6-bit scale of
 * its 16.
 */
CPU_TARGET float cpu_q3_K_avx2(int64_t n, const void *vw, const void *va)
{
	const struct block_q3_K *x = vw;
	const struct block_q8_K *y = va;
	const __m256i m2 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
	__m256 acc = _mm256_setzero_ps();
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		const float d = y[i].d * cpu_h2f(x[i].d);
		const __m256i hm = _mm256_loadu_si256(
			(const __m256i *)x[i].hmask);
		__m256i isum = _mm256_setzero_si256();
		int8_t sc[16];
		int h, c;

		quant_q3_K_scales(x[i].scales, sc);
		for (h = 0; h < 2; h++) {
			__m256i q = _mm256_loadu_si256(
				(const __m256i *)(x[i].qs + 32 * h));

			for (c = 0; c < 4; c++) {
				const int j = 8 * h + 2 * c;
				const __m256i bit = _mm256_set1_epi8(
					(char)(1 << (4 * h + c)));
				__m256i hb = _mm256_and_si256(
					_mm256_cmpeq_epi8(
						_mm256_and_si256(hm, bit), bit),
					four);
				__m256i wq = _mm256_or_si256(
					_mm256_and_si256(
						_mm256_srli_epi16(q, 2 * c),
						m2),
					hb);
				__m256i qa = _mm256_loadu_si256(
					(const __m256i *)(y[i].qs + 128 * h +
							  32 * c));
				__m256i p = _mm256_sub_epi16(
					_mm256_maddubs_epi16(wq, qa),
					_mm256_maddubs_epi16(four, qa));

				isum = _mm256_add_epi32(
					isum,
					_mm256_madd_epi16(
						p,
						cpu_pair16(sc[j], sc[j + 1])));
			}
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d),
				      _mm256_cvtepi32_ps(isum), acc);
	}
	return cpu_hsum8_avx2(acc);
}

/* dot_q4_0_repacked: acc = fma((float)sum((q - 8) a), dw * da, acc). */
CPU_TARGET float cpu_q4_0_repacked_avx2(int64_t n, const void *vw,
					const void *va)
{
	const struct block_q4_0 *w = vw;
	const struct block_q8_0 *a = va;
	const __m256i eight = _mm256_set1_epi8(8);
	float acc = 0.0f;
	int64_t i, nb = n / QK8_0;

	for (i = 0; i < nb; i++) {
		__m256i qa = _mm256_loadu_si256((const __m256i *)a[i].qs);
		__m256i p = _mm256_sub_epi16(
			_mm256_maddubs_epi16(cpu_nibbles(w[i].qs), qa),
			_mm256_maddubs_epi16(eight, qa));

		acc = fmaf((float)cpu_isum8_avx2(cpu_pairs(p)),
			   cpu_h2f(w[i].d) * cpu_h2f(a[i].d), acc);
	}
	return acc;
}

/*
 * The eight 6-bit scales (bytes 0..7) and mins (8..15) of a q4_K/q5_K
 * block in one register (dot_avx512.c's cpu_unpack_k4v). Reads 16 bytes
 * at q: the 12 scales and 4 bytes of the block's quants after them.
 */
CPU_TARGET static inline __m128i cpu_unpack_k4v(const uint8_t *q)
{
	const __m128i u = _mm_loadu_si128((const __m128i *)q);
	const __m128i a = _mm_shuffle_epi32(u, _MM_SHUFFLE(2, 1, 2, 0));
	const __m128i b = _mm_shuffle_epi32(u, _MM_SHUFFLE(1, 1, 0, 0));
	const __m128i lo = _mm_and_si128(
		_mm_srlv_epi32(a, _mm_set_epi32(4, 0, 0, 0)),
		_mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
	const __m128i hi = _mm_and_si128(
		_mm_srli_epi32(b, 2),
		_mm_set_epi32(0x30303030, 0, 0x30303030, 0));

	return _mm_or_si128(lo, hi);
}

/*
 * dot_q4_k_repacked: the block's integer sums, then its two FMAs. The
 * sums in any order (integers): weights times activations in pairs (at
 * most 2 x 15 x 128), the pairs of sub-blocks 2g and 2g + 1 times their
 * scales by vpmaddwd; the mins times the bsums by vpmaddwd.
 */
CPU_TARGET float cpu_q4_K_repacked_avx2(int64_t n, const void *vw,
					const void *va)
{
	const struct block_q4_K *x = vw;
	const struct block_q8_K *y = va;
	const __m256i zero = _mm256_setzero_si256();
	float acc = 0.0f, accm = 0.0f;
	int64_t i, nb = n / QK_K;
	int g;

	for (i = 0; i < nb; i++) {
		const __m128i sm = cpu_unpack_k4v(x[i].scales);
		/* the mins as int16, each twice: bsums 2k, 2k + 1 take min k */
		const __m128i m16 = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
		__m256i pm = _mm256_madd_epi16(
			_mm256_loadu_si256((const __m256i *)y[i].bsums),
			_mm256_inserti128_si256(
				_mm256_castsi128_si256(
					_mm_unpacklo_epi16(m16, m16)),
				_mm_unpackhi_epi16(m16, m16), 1));
		__m256i isum = _mm256_setzero_si256(), t;
		uint8_t sc[16];
		__m128i r;
		__m128 f;

		_mm_storeu_si128((__m128i *)sc, sm);
		for (g = 0; g < 4; g++)
			isum = _mm256_add_epi32(
				isum,
				cpu_q45_group(x[i].qs + 32 * g,
					      y[i].qs + 64 * g, zero, zero,
					      sc[2 * g], sc[2 * g + 1]));
		/*
		 * both integer sums at once (exact in any order): lane 0 the
		 * scales', lane 1 the mins'; converted as (float)int would
		 */
		t = _mm256_hadd_epi32(isum, pm);
		r = _mm_add_epi32(_mm256_castsi256_si128(t),
				  _mm256_extracti128_si256(t, 1));
		f = _mm_cvtepi32_ps(_mm_hadd_epi32(r, r));
		acc = fmaf(_mm_cvtss_f32(f), cpu_h2f(x[i].d) * y[i].d, acc);
		accm = fmaf(_mm_cvtss_f32(_mm_shuffle_ps(f, f, 1)),
			    cpu_h2f(x[i].dmin) * y[i].d, accm);
	}
	return acc - accm;
}

/*
 * dot_q2_k_repacked: element 128c + 32j + t is bits 2j of qs[32c + t];
 * sub-blocks of 16 elements, each times its low-nibble scale; the mins
 * (high nibbles) times the bsums.
 */
CPU_TARGET float cpu_q2_K_repacked_avx2(int64_t n, const void *vw,
					const void *va)
{
	const struct block_q2_K *x = vw;
	const struct block_q8_K *y = va;
	const __m256i m2 = _mm256_set1_epi8(3);
	float acc = 0.0f, accm = 0.0f;
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		const __m128i s8 = _mm_loadu_si128(
			(const __m128i *)x[i].scales);
		const int smin = cpu_isum8_avx2(_mm256_madd_epi16(
			_mm256_cvtepu8_epi16(_mm_srli_epi16(
				_mm_andnot_si128(_mm_set1_epi8(0x0f), s8), 4)),
			_mm256_loadu_si256((const __m256i *)y[i].bsums)));
		__m256i isum = _mm256_setzero_si256();
		int c, j;

		for (c = 0; c < 2; c++) {
			__m256i q = _mm256_loadu_si256(
				(const __m256i *)(x[i].qs + 32 * c));

			for (j = 0; j < 4; j++) {
				/* sub-blocks 8c + 2j and 8c + 2j + 1 */
				const int s = 8 * c + 2 * j;
				__m256i wq = _mm256_and_si256(
					_mm256_srli_epi16(q, 2 * j), m2);
				__m256i p = _mm256_maddubs_epi16(
					wq, _mm256_loadu_si256(
						    (const __m256i *)(y[i].qs +
								      128 * c +
								      32 * j)));

				isum = _mm256_add_epi32(
					isum,
					_mm256_madd_epi16(
						p,
						cpu_pair16(x[i].scales[s] & 0xf,
							   x[i].scales[s + 1] &
								   0xf)));
			}
		}
		acc = fmaf((float)cpu_isum8_avx2(isum),
			   cpu_h2f(x[i].d) * y[i].d, acc);
		accm = fmaf((float)smin, cpu_h2f(x[i].dmin) * y[i].d, accm);
	}
	return acc - accm;
}
#endif /* __x86_64__ */
