// SPDX-License-Identifier: MIT
/*
 * AVX-512 dot products (see cpu.h). Each kernel mirrors a scalar
 * emulation line for line in what touches a float: the same lanes, the
 * same fused multiply-adds, the same folds. The integer parts use vpdpbusd
 * (unsigned byte times signed byte, four products into one int32 lane,
 * no saturation), which is exact; only which elements share a lane
 * matters, and that is kept.
 *
 * GCC 12.2 once miscompiled an auto-vectorized VNNI loop here
 * (Documentation/quantization.md); these are intrinsics, so the
 * instructions are the ones written, and test_simd checks them against
 * the scalar code bit for bit.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "cpu.h"
#include "dot.h"
#include "../quant/quant_internal.h"

#if !defined(__x86_64__)
/*
 * Elsewhere there is nothing to run: cpu_avx512_usable() says so and
 * dot.c never calls the kernels, which only have to link.
 */
bool cpu_avx512_usable(void)
{
	return false;
}
float cpu_f32_main_avx512(int64_t np, const float *x, const float *y)
{
	return NAN;
}
float cpu_f16_main_avx512(int64_t np, const uint16_t *x, const uint16_t *y)
{
	return NAN;
}
void cpu_bf16_main_avx512(int64_t np, const uint16_t *x, const uint16_t *y,
			  float c[2])
{
	c[0] = c[1] = NAN;
}
float cpu_q8_0_avx512(int64_t n, const void *w, const void *a)
{
	return NAN;
}
float cpu_q4_K_avx512(int64_t n, const void *w, const void *a)
{
	return NAN;
}
float cpu_q6_K_avx512(int64_t n, const void *w, const void *a)
{
	return NAN;
}
float cpu_q4_0_avx512(int64_t n, const void *w, const void *a)
{
	return NAN;
}
float cpu_q4_1_avx512(int64_t n, const void *w, const void *a)
{
	return NAN;
}
float cpu_q5_0_avx512(int64_t n, const void *w, const void *a)
{
	return NAN;
}
float cpu_q5_1_avx512(int64_t n, const void *w, const void *a)
{
	return NAN;
}
float cpu_q2_K_avx512(int64_t n, const void *w, const void *a)
{
	return NAN;
}
float cpu_q3_K_avx512(int64_t n, const void *w, const void *a)
{
	return NAN;
}
float cpu_q5_K_avx512(int64_t n, const void *w, const void *a)
{
	return NAN;
}
float cpu_q4_0_repacked_avx512(int64_t n, const void *w, const void *a)
{
	return NAN;
}
float cpu_q4_K_repacked_avx512(int64_t n, const void *w, const void *a)
{
	return NAN;
}
float cpu_q2_K_repacked_avx512(int64_t n, const void *w, const void *a)
{
	return NAN;
}
#else
#include <immintrin.h>

#include "reduce_avx512.h"

#define CPU_TARGET \
	__attribute__(( \
		target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

static bool cpu_avx512_ok;
static pthread_once_t cpu_avx512_once = PTHREAD_ONCE_INIT;

static void cpu_avx512_init(void)
{
	__builtin_cpu_init();
	cpu_avx512_ok = __builtin_cpu_supports("avx512f") &&
			__builtin_cpu_supports("avx512bw") &&
			__builtin_cpu_supports("avx512vl") &&
			__builtin_cpu_supports("avx512vnni");
}

/* Asked once: the element-wise steps and the GEMM ask per call. */
bool cpu_avx512_usable(void)
{
	pthread_once(&cpu_avx512_once, cpu_avx512_init);
	return cpu_avx512_ok;
}

CPU_TARGET static float cpu_h2f(uint16_t h)
{
	return _cvtsh_ss(h);
}

/* acc[0] + acc[2], acc[1] + acc[3], their sum, then _mm512_reduce_add_ps. */
CPU_TARGET static float cpu_reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3)
{
	a0 = _mm512_add_ps(a0, a2);
	a1 = _mm512_add_ps(a1, a3);
	return cpu_hsum16(_mm512_add_ps(a0, a1));
}

CPU_TARGET float cpu_f32_main_avx512(int64_t np, const float *x, const float *y)
{
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	int64_t i;

	for (i = 0; i < np; i += 64) {
		a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i),
				     _mm512_loadu_ps(y + i), a0);
		a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16),
				     _mm512_loadu_ps(y + i + 16), a1);
		a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32),
				     _mm512_loadu_ps(y + i + 32), a2);
		a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48),
				     _mm512_loadu_ps(y + i + 48), a3);
	}
	return cpu_reduce4(a0, a1, a2, a3);
}

CPU_TARGET static __m512 cpu_ld_f16(const uint16_t *p)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

CPU_TARGET float cpu_f16_main_avx512(int64_t np, const uint16_t *x,
				     const uint16_t *y)
{
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	int64_t i;

	for (i = 0; i < np; i += 64) {
		a0 = _mm512_fmadd_ps(cpu_ld_f16(x + i), cpu_ld_f16(y + i), a0);
		a1 = _mm512_fmadd_ps(cpu_ld_f16(x + i + 16),
				     cpu_ld_f16(y + i + 16), a1);
		a2 = _mm512_fmadd_ps(cpu_ld_f16(x + i + 32),
				     cpu_ld_f16(y + i + 32), a2);
		a3 = _mm512_fmadd_ps(cpu_ld_f16(x + i + 48),
				     cpu_ld_f16(y + i + 48), a3);
	}
	return cpu_reduce4(a0, a1, a2, a3);
}

/*
 * dot_bf16's loop: lane l of accumulator h takes the pair 2l, 2l + 1 of
 * each 32 elements, the odd product fused in first, then the even one.
 * A bf16 is the top half of a float, so the conversion is a shift or a
 * mask, exact.
 */
CPU_TARGET void cpu_bf16_main_avx512(int64_t np, const uint16_t *x,
				     const uint16_t *y, float c[2])
{
	const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
	__m512 acc[2] = { _mm512_setzero_ps(), _mm512_setzero_ps() };
	int64_t i;
	int h;

	for (i = 0; i < np; i += 64)
		for (h = 0; h < 2; h++) {
			__m512i vx = _mm512_loadu_si512(x + i + 32 * h);
			__m512i vy = _mm512_loadu_si512(y + i + 32 * h);

			acc[h] = _mm512_fmadd_ps(
				_mm512_castsi512_ps(_mm512_and_si512(vx, hi)),
				_mm512_castsi512_ps(_mm512_and_si512(vy, hi)),
				acc[h]);
			acc[h] = _mm512_fmadd_ps(
				_mm512_castsi512_ps(_mm512_slli_epi32(vx, 16)),
				_mm512_castsi512_ps(_mm512_slli_epi32(vy, 16)),
				acc[h]);
		}
	for (h = 0; h < 2; h++)
		c[h] = cpu_hsum16(acc[h]);
}

/*
 * Eight int32 lanes, lane l = w[4l..4l+3] . a[4l..4l+3], for signed w and
 * a of any value: (w + 128) . a - 128 * (a's four). ggml's sign trick
 * (|w| . sign(a, w)) would wrap for a = -128, which the scalar code does
 * not.
 */
CPU_TARGET static __m256i cpu_lanes_s8(__m256i w, __m256i a)
{
	const __m256i bias = _mm256_set1_epi8((char)0x80);
	__m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(),
					_mm256_xor_si256(w, bias), a);

	return _mm256_sub_epi32(
		p, _mm256_dpbusd_epi32(_mm256_setzero_si256(), bias, a));
}

/* x86_dot_legacy for Q8_0: acc = fma(dw * da, lanes, acc), then hsum8. */
CPU_TARGET float cpu_q8_0_avx512(int64_t n, const void *vw, const void *va)
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
	return cpu_hsum8(acc);
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

/* Two 32-byte halves as one 64-byte vector. */
CPU_TARGET static __m512i cpu_join(__m256i lo, __m256i hi)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* 16 lanes of 64 elements folded to the 8 of a 32-element load. */
CPU_TARGET static __m256i cpu_fold(__m512i v)
{
	return _mm256_add_epi32(_mm512_castsi512_si256(v),
				_mm512_extracti64x4_epi64(v, 1));
}

/*
 * x86_dot_q45_K without the qh bits: the mins in scalar (four floats, as
 * there), the weights 0..15 straight into vpdpbusd, each 32-element
 * sub-block's lanes times its scale.
 */
CPU_TARGET float cpu_q4_K_avx512(int64_t n, const void *vw, const void *va)
{
	const struct block_q4_K *x = vw;
	const struct block_q8_K *y = va;
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	__m256 acc = _mm256_setzero_ps();
	float acc_m[4] = { 0 };
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		const float d = y[i].d * cpu_h2f(x[i].d);
		const float dmin = -y[i].d * cpu_h2f(x[i].dmin);
		__m512i isum = _mm512_setzero_si512();
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
		for (g = 0; g < 4; g++) {
			__m256i q = _mm256_loadu_si256(
				(const __m256i *)(x[i].qs + 32 * g));
			__m512i wq = cpu_join(
				_mm256_and_si256(q, m4),
				_mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
			__m512i p = _mm512_dpbusd_epi32(
				_mm512_setzero_si512(), wq,
				_mm512_loadu_si512(y[i].qs + 64 * g));
			__m512i s = cpu_join(_mm256_set1_epi32(sc[2 * g]),
					     _mm256_set1_epi32(sc[2 * g + 1]));

			isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p, s));
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d),
				      _mm256_cvtepi32_ps(cpu_fold(isum)), acc);
	}
	return cpu_hsum8(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

/*
 * x86_dot_q6_K: unsigned 6-bit weights into vpdpbusd, scales per 16
 * elements (four int32 lanes), then lane l loses 32 * (b[2l] sc[2l] +
 * b[2l+1] sc[2l+1]) as there.
 */
CPU_TARGET float cpu_q6_K_avx512(int64_t n, const void *vw, const void *va)
{
	const struct block_q6_K *x = vw;
	const struct block_q8_K *y = va;
	const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
	__m512i idx[4];
	__m256 acc = _mm256_setzero_ps();
	int64_t i, nb = n / QK_K;
	int k;

	for (k = 0; k < 4; k++)
		idx[k] = _mm512_add_epi32(_mm512_set1_epi32(4 * k),
					  _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2,
							   2, 1, 1, 1, 1, 0, 0,
							   0, 0));
	for (i = 0; i < nb; i++) {
		const float d = y[i].d * cpu_h2f(x[i].d);
		const __m512i sc = _mm512_cvtepi8_epi32(
			_mm_loadu_si128((const __m128i *)x[i].scales));
		__m512i isum = _mm512_setzero_si512();
		__m256i corr;
		int h;

		for (h = 0; h < 2; h++) {
			const uint8_t *ql = x[i].ql + 64 * h;
			__m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
			__m256i l1 = _mm256_loadu_si256(
				(const __m256i *)(ql + 32));
			__m256i qh = _mm256_loadu_si256(
				(const __m256i *)(x[i].qh + 32 * h));
			__m256i p0 = _mm256_or_si256(
				_mm256_and_si256(l0, m4),
				_mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
			__m256i p1 = _mm256_or_si256(
				_mm256_and_si256(l1, m4),
				_mm256_slli_epi16(
					_mm256_and_si256(
						_mm256_srli_epi16(qh, 2), m2),
					4));
			__m256i p2 = _mm256_or_si256(
				_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
				_mm256_slli_epi16(
					_mm256_and_si256(
						_mm256_srli_epi16(qh, 4), m2),
					4));
			__m256i p3 = _mm256_or_si256(
				_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
				_mm256_slli_epi16(
					_mm256_and_si256(
						_mm256_srli_epi16(qh, 6), m2),
					4));
			const int8_t *a = y[i].qs + 128 * h;
			__m512i q0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(),
							 cpu_join(p0, p1),
							 _mm512_loadu_si512(a));
			__m512i q1 = _mm512_dpbusd_epi32(
				_mm512_setzero_si512(), cpu_join(p2, p3),
				_mm512_loadu_si512(a + 64));

			isum = _mm512_add_epi32(
				isum, _mm512_mullo_epi32(
					      q0, _mm512_permutexvar_epi32(
							  idx[2 * h], sc)));
			isum = _mm512_add_epi32(
				isum, _mm512_mullo_epi32(
					      q1, _mm512_permutexvar_epi32(
							  idx[2 * h + 1], sc)));
		}
		/* lane l less 32 (b[2l] sc[2l] + b[2l+1] sc[2l+1]) */
		corr = _mm256_madd_epi16(
			_mm256_loadu_si256((const __m256i *)y[i].bsums),
			_mm256_cvtepi8_epi16(
				_mm_loadu_si128((const __m128i *)x[i].scales)));
		acc = _mm256_fmadd_ps(
			_mm256_set1_ps(d),
			_mm256_cvtepi32_ps(_mm256_sub_epi32(
				cpu_fold(isum), _mm256_slli_epi32(corr, 5))),
			acc);
	}
	return cpu_hsum8(acc);
}

/* The sum of eight int32 lanes (exact in any order). */
CPU_TARGET static int cpu_isum8(__m256i v)
{
	__m128i x = _mm_add_epi32(_mm256_castsi256_si128(v),
				  _mm256_extracti128_si256(v, 1));

	x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4e));
	x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xb1));
	return _mm_cvtsi128_si32(x);
}

/* dot_q4_0_repacked: acc = fma((float)sum((q - 8) a), dw * da, acc). */
CPU_TARGET float cpu_q4_0_repacked_avx512(int64_t n, const void *vw,
					  const void *va)
{
	const struct block_q4_0 *w = vw;
	const struct block_q8_0 *a = va;
	const __m128i m4 = _mm_set1_epi8(0x0f);
	const __m256i eight = _mm256_set1_epi8(8);
	float acc = 0.0f;
	int64_t i, nb = n / QK8_0;

	for (i = 0; i < nb; i++) {
		__m128i q = _mm_loadu_si128((const __m128i *)w[i].qs);
		__m256i wq = _mm256_inserti128_si256(
			_mm256_castsi128_si256(_mm_and_si128(q, m4)),
			_mm_and_si128(_mm_srli_epi16(q, 4), m4), 1);
		__m256i qa = _mm256_loadu_si256((const __m256i *)a[i].qs);
		__m256i p = _mm256_sub_epi32(
			_mm256_dpbusd_epi32(_mm256_setzero_si256(), wq, qa),
			_mm256_dpbusd_epi32(_mm256_setzero_si256(), eight, qa));

		acc = fmaf((float)cpu_isum8(p),
			   cpu_h2f(w[i].d) * cpu_h2f(a[i].d), acc);
	}
	return acc;
}

/*
 * The eight 6-bit scales and eight mins of a q4_K/q5_K block as bytes
 * (scales in out[0..7], mins in out[8..15]), unpacked with 32-bit masks
 * and shifts as ggml's kernels do (kmask1..3), not one by one.
 */
/*
 * cpu_unpack_k4 in one register: the words u0, u2, u1, u2 shifted by 0,
 * 0, 0, 4 and masked to 6, 4, 6, 4 bits, or'd with the two high bits
 * (u0, u0, u1, u1 >> 6, in lanes 1 and 3). Reads 16 bytes at q: the
 * 12 scales and 4 bytes of the block's quants after them.
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
 * sums in any order (integers): weights times activations in pairs
 * (vpmaddubsw, at most 2 * 15 * 128, no saturation), times the scale of
 * their 32 into the sum (vpdpwssd); the mins times the bsums by vpmaddwd.
 */
CPU_TARGET float cpu_q4_K_repacked_avx512(int64_t n, const void *vw,
					  const void *va)
{
	const struct block_q4_K *x = vw;
	const struct block_q8_K *y = va;
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	/* int16 lane k of the bsums' pairs: min k / 2 (at 8 + k / 2) */
	const __m256i min_idx = _mm256_set_epi16(15, 15, 14, 14, 13, 13, 12, 12,
						 11, 11, 10, 10, 9, 9, 8, 8);
	__m512i sc_idx[4];
	float acc = 0.0f, accm = 0.0f;
	int64_t i, nb = n / QK_K;
	int g;

	/* load g: its low nibbles take scale 2g, its high 2g + 1 */
	for (g = 0; g < 4; g++)
		sc_idx[g] = _mm512_inserti64x4(
			_mm512_set1_epi16((short)(2 * g)),
			_mm256_set1_epi16((short)(2 * g + 1)), 1);
	for (i = 0; i < nb; i++) {
		__m512i isum = _mm512_setzero_si512(), sc;
		__m256i sm16, pm, t;
		__m128i r;
		__m128 f;

		sm16 = _mm256_cvtepu8_epi16(cpu_unpack_k4v(x[i].scales));
		pm = _mm256_madd_epi16(
			_mm256_loadu_si256((const __m256i *)y[i].bsums),
			_mm256_permutexvar_epi16(min_idx, sm16));
		sc = _mm512_castsi256_si512(sm16);
		for (g = 0; g < 4; g++) {
			__m256i q = _mm256_loadu_si256(
				(const __m256i *)(x[i].qs + 32 * g));
			__m512i wq = cpu_join(
				_mm256_and_si256(q, m4),
				_mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
			__m512i p = _mm512_maddubs_epi16(
				wq, _mm512_loadu_si512(y[i].qs + 64 * g));

			isum = _mm512_dpwssd_epi32(
				isum, p,
				_mm512_permutexvar_epi16(sc_idx[g], sc));
		}
		/*
		 * both integer sums at once (exact in any order): lane 0 the
		 * scales', lane 1 the mins'; converted as (float)int would
		 */
		t = _mm256_hadd_epi32(cpu_fold(isum), pm);
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
 * sub-blocks of 16 elements, each times its low-nibble scale.
 */
CPU_TARGET float cpu_q2_K_repacked_avx512(int64_t n, const void *vw,
					  const void *va)
{
	const struct block_q2_K *x = vw;
	const struct block_q8_K *y = va;
	const __m256i m2 = _mm256_set1_epi8(3);
	const __m256i lo = _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0);
	float acc = 0.0f, accm = 0.0f;
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		__m256i isum = _mm256_setzero_si256();
		__m256i sc = _mm256_cvtepu8_epi32(
			_mm_loadl_epi64((const __m128i *)x[i].scales));
		__m256i sc2 = _mm256_cvtepu8_epi32(
			_mm_loadl_epi64((const __m128i *)(x[i].scales + 8)));
		int j, c, smin = 0;

		for (j = 0; j < 16; j++)
			smin += (x[i].scales[j] >> 4) * y[i].bsums[j];
		sc = _mm256_and_si256(sc, _mm256_set1_epi32(0x0f));
		sc2 = _mm256_and_si256(sc2, _mm256_set1_epi32(0x0f));
		for (c = 0; c < 2; c++) {
			__m256i q = _mm256_loadu_si256(
				(const __m256i *)(x[i].qs + 32 * c));

			for (j = 0; j < 4; j++) {
				/* sub-blocks 8c + 2j and 8c + 2j + 1 */
				__m256i s = _mm256_permutevar8x32_epi32(
					c ? sc2 : sc,
					_mm256_add_epi32(
						lo, _mm256_set1_epi32(2 * j)));
				__m256i wq = _mm256_and_si256(
					_mm256_srli_epi16(q, 2 * j), m2);
				__m256i p = _mm256_dpbusd_epi32(
					_mm256_setzero_si256(), wq,
					_mm256_loadu_si256(
						(const __m256i *)(y[i].qs +
								  128 * c +
								  32 * j)));

				isum = _mm256_add_epi32(
					isum, _mm256_mullo_epi32(p, s));
			}
		}
		acc = fmaf((float)cpu_isum8(isum), cpu_h2f(x[i].d) * y[i].d,
			   acc);
		accm = fmaf((float)smin, cpu_h2f(x[i].dmin) * y[i].d, accm);
	}
	return acc - accm;
}

/* 32 bytes of 16 where bit e of h is set (a q5 block's fifth bits). */
CPU_TARGET static __m256i cpu_bits16(uint32_t h)
{
	return _mm256_maskz_mov_epi8((__mmask32)h, _mm256_set1_epi8(16));
}

/* What tells the four legacy block types apart, for cpu_legacy. */
struct cpu_legacy_shape {
	int with_min; /* a min per block (the _1 types) */
	int five;     /* a fifth bit per element (Q5) */
	int off;      /* the offset the weights are stored with */
	size_t bw;    /* bytes of a block */
};

static const struct cpu_legacy_shape cpu_q4_0_shape = {
	0, 0, 8, sizeof(struct block_q4_0)
};
static const struct cpu_legacy_shape cpu_q4_1_shape = {
	1, 0, 0, sizeof(struct block_q4_1)
};
static const struct cpu_legacy_shape cpu_q5_0_shape = {
	0, 1, 16, sizeof(struct block_q5_0)
};
static const struct cpu_legacy_shape cpu_q5_1_shape = {
	1, 1, 0, sizeof(struct block_q5_1)
};

/*
 * x86_dot_legacy for Q4_0/Q4_1/Q5_0/Q5_1: the weights as unsigned bytes
 * (nibble, plus 16 for a set fifth bit), the offset (8 or 16) taken off
 * as off * (a's four); summs = fma(m, s, summs) for the _1 types.
 * Inlined into each type's kernel, its shape a constant there.
 */
CPU_TARGET static inline __attribute__((always_inline)) float
cpu_legacy(const struct cpu_legacy_shape *sh, int64_t n, const void *vw,
	   const void *va)
{
	const int with_min = sh->with_min, five = sh->five, off = sh->off;
	const size_t bw = sh->bw;
	/* where qs starts: after d (and m) (and qh) */
	const size_t qs_at = 2 + 2 * with_min + 4 * five;
	const size_t ab = with_min ? sizeof(struct block_q8_1) :
				     sizeof(struct block_q8_0);
	const __m128i m4 = _mm_set1_epi8(0x0f);
	const __m256i offv = _mm256_set1_epi8((char)off);
	const uint8_t *w = vw, *a = va;
	__m256 acc = _mm256_setzero_ps();
	float summs = 0.0f;
	int64_t i, nb = n / 32;

	for (i = 0; i < nb; i++, w += bw, a += ab) {
		const int8_t *qa8 = (const int8_t *)(a + (with_min ? 4 : 2));
		__m128i q = _mm_loadu_si128((const __m128i *)(w + qs_at));
		__m256i wq = _mm256_inserti128_si256(
			_mm256_castsi128_si256(_mm_and_si128(q, m4)),
			_mm_and_si128(_mm_srli_epi16(q, 4), m4), 1);
		__m256i qa = _mm256_loadu_si256((const __m256i *)qa8);
		__m256i lanes;
		uint16_t dw, da;
		float d;

		if (five) {
			uint32_t qh;

			memcpy(&qh, w + 2 + 2 * with_min, 4);
			wq = _mm256_or_si256(wq, cpu_bits16(qh));
		}
		lanes = _mm256_dpbusd_epi32(_mm256_setzero_si256(), wq, qa);
		if (off)
			lanes = _mm256_sub_epi32(
				lanes,
				_mm256_dpbusd_epi32(_mm256_setzero_si256(),
						    offv, qa));
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
				      _mm256_cvtepi32_ps(lanes), acc);
	}
	return with_min ? cpu_hsum8(acc) + summs : cpu_hsum8(acc);
}

CPU_TARGET float cpu_q4_0_avx512(int64_t n, const void *w, const void *a)
{
	return cpu_legacy(&cpu_q4_0_shape, n, w, a);
}

CPU_TARGET float cpu_q4_1_avx512(int64_t n, const void *w, const void *a)
{
	return cpu_legacy(&cpu_q4_1_shape, n, w, a);
}

CPU_TARGET float cpu_q5_0_avx512(int64_t n, const void *w, const void *a)
{
	return cpu_legacy(&cpu_q5_0_shape, n, w, a);
}

CPU_TARGET float cpu_q5_1_avx512(int64_t n, const void *w, const void *a)
{
	return cpu_legacy(&cpu_q5_1_shape, n, w, a);
}

/* Scales for a 32-element load: v[0..3] = s[j], v[4..7] = s[j + 1]. */
CPU_TARGET static __m256i cpu_pair(const int *s, int j)
{
	return _mm256_inserti128_si256(
		_mm256_castsi128_si256(_mm_set1_epi32(s[j])),
		_mm_set1_epi32(s[j + 1]), 1);
}

/*
 * x86_dot_q2_K: per block first acc = fma(-dmin, mins . bsums (lane l:
 * sub-blocks 2l, 2l + 1), acc), then acc = fma(d, lanes, acc).
 */
CPU_TARGET float cpu_q2_K_avx512(int64_t n, const void *vw, const void *va)
{
	const struct block_q2_K *x = vw;
	const struct block_q8_K *y = va;
	const __m256i m2 = _mm256_set1_epi8(3);
	__m256 acc = _mm256_setzero_ps();
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		const float d = y[i].d * cpu_h2f(x[i].d);
		const float dmin = -y[i].d * cpu_h2f(x[i].dmin);
		__m256i isum = _mm256_setzero_si256();
		int32_t prod[8];
		int sc[16], h, c, l;

		for (l = 0; l < 8; l++)
			prod[l] = (x[i].scales[2 * l] >> 4) *
					  y[i].bsums[2 * l] +
				  (x[i].scales[2 * l + 1] >> 4) *
					  y[i].bsums[2 * l + 1];
		acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin),
				      _mm256_cvtepi32_ps(_mm256_loadu_si256(
					      (const __m256i *)prod)),
				      acc);
		for (l = 0; l < 16; l++)
			sc[l] = x[i].scales[l] & 0xf;
		for (h = 0; h < 2; h++) {
			__m256i q = _mm256_loadu_si256(
				(const __m256i *)(x[i].qs + 32 * h));

			for (c = 0; c < 4; c++) {
				__m256i wq = _mm256_and_si256(
					_mm256_srli_epi16(q, 2 * c), m2);
				__m256i p = _mm256_dpbusd_epi32(
					_mm256_setzero_si256(), wq,
					_mm256_loadu_si256(
						(const __m256i *)(y[i].qs +
								  128 * h +
								  32 * c)));

				isum = _mm256_add_epi32(
					isum,
					_mm256_mullo_epi32(
						p,
						cpu_pair(sc, 8 * h + 2 * c)));
			}
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d),
				      _mm256_cvtepi32_ps(isum), acc);
	}
	return cpu_hsum8(acc);
}

/*
 * x86_dot_q3_K: weight lo - 4 + 4 * hbit taken as the unsigned lo + 4 *
 * hbit minus 4 * (a's four), times the signed 6-bit scale of its 16.
 */
CPU_TARGET float cpu_q3_K_avx512(int64_t n, const void *vw, const void *va)
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
		int sc[16], j, h, c;

		for (j = 0; j < 16; j++) {
			int lo = j < 8 ? x[i].scales[j] & 0xf :
					 x[i].scales[j - 8] >> 4;
			int hi = (x[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3;

			sc[j] = (lo | (hi << 4)) - 32;
		}
		for (h = 0; h < 2; h++) {
			__m256i q = _mm256_loadu_si256(
				(const __m256i *)(x[i].qs + 32 * h));

			for (c = 0; c < 4; c++) {
				__mmask32 hb = _mm256_test_epi8_mask(
					hm, _mm256_set1_epi8(
						    (char)(1 << (4 * h + c))));
				__m256i wq = _mm256_or_si256(
					_mm256_and_si256(
						_mm256_srli_epi16(q, 2 * c),
						m2),
					_mm256_maskz_mov_epi8(hb, four));
				__m256i qa = _mm256_loadu_si256(
					(const __m256i *)(y[i].qs + 128 * h +
							  32 * c));
				__m256i p = _mm256_sub_epi32(
					_mm256_dpbusd_epi32(
						_mm256_setzero_si256(), wq, qa),
					_mm256_dpbusd_epi32(
						_mm256_setzero_si256(), four,
						qa));

				isum = _mm256_add_epi32(
					isum,
					_mm256_mullo_epi32(
						p,
						cpu_pair(sc, 8 * h + 2 * c)));
			}
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d),
				      _mm256_cvtepi32_ps(isum), acc);
	}
	return cpu_hsum8(acc);
}

/*
 * x86_dot_q45_K for Q5_K: as cpu_q4_K_avx512 with the fifth bits (qh bit
 * 2g for the low nibbles of load g, 2g + 1 for the high) and the mins
 * summed to one integer, summs = fma(-dmin, sum, summs).
 */
CPU_TARGET float cpu_q5_K_avx512(int64_t n, const void *vw, const void *va)
{
	const struct block_q5_K *x = vw;
	const struct block_q8_K *y = va;
	const __m256i m4 = _mm256_set1_epi8(0x0f), b16 = _mm256_set1_epi8(16);
	__m256 acc = _mm256_setzero_ps();
	float summs = 0.0f;
	int64_t i, nb = n / QK_K;

	for (i = 0; i < nb; i++) {
		const float d = y[i].d * cpu_h2f(x[i].d);
		const float dmin = -y[i].d * cpu_h2f(x[i].dmin);
		const __m256i qh = _mm256_loadu_si256((const __m256i *)x[i].qh);
		__m512i isum = _mm512_setzero_si512();
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
		for (g = 0; g < 4; g++) {
			__m256i q = _mm256_loadu_si256(
				(const __m256i *)(x[i].qs + 32 * g));
			__mmask32 h0 = _mm256_test_epi8_mask(
				qh, _mm256_set1_epi8((char)(1 << (2 * g))));
			__mmask32 h1 = _mm256_test_epi8_mask(
				qh, _mm256_set1_epi8((char)(1 << (2 * g + 1))));
			__m512i wq = cpu_join(
				_mm256_or_si256(_mm256_and_si256(q, m4),
						_mm256_maskz_mov_epi8(h0, b16)),
				_mm256_or_si256(
					_mm256_and_si256(
						_mm256_srli_epi16(q, 4), m4),
					_mm256_maskz_mov_epi8(h1, b16)));
			__m512i p = _mm512_dpbusd_epi32(
				_mm512_setzero_si512(), wq,
				_mm512_loadu_si512(y[i].qs + 64 * g));
			__m512i s = cpu_join(_mm256_set1_epi32(sc[2 * g]),
					     _mm256_set1_epi32(sc[2 * g + 1]));

			isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p, s));
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d),
				      _mm256_cvtepi32_ps(cpu_fold(isum)), acc);
	}
	return cpu_hsum8(acc) + summs;
}
#endif /* __x86_64__ */
