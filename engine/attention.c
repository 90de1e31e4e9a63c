// SPDX-License-Identifier: MIT
/*
 * Flash attention of one head over typed K/V rows (see attention.h).
 * The order is ggml's one_chunk loop; the per-element vector steps have an
 * AVX-512 version (F16C conversions with round-to-nearest-even, one FMA per
 * element) picked once at run time, which gives the scalar code's bits.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "attention.h"
#include "cpu/cpu.h"
#include "cpu/isa.h"
#include "quant/dot.h"
#include "quant/quant.h"

/* ggml's C is compiled without contraction; so is this (see quant). */
#ifdef __clang__
#pragma clang fp contract(off)
#endif

bool att_type_supported(uint32_t type)
{
	return quant_traits(type)->kv;
}

/* ---- the vector steps -------------------------------------------------- */

#if defined(__x86_64__)
#include <immintrin.h>

#include "cpu/reduce_avx512.h"

#define ATT_TARGET __attribute__((target("avx512f,f16c,fma")))

/* y += x * v on F16 rows, 16 at a time, the tail masked */
ATT_TARGET static void att_mad_f16_avx512(uint16_t *y, const uint16_t *x,
					  float v, uint32_t n)
{
	const __m512 vv = _mm512_set1_ps(v);
	uint32_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512 ax = _mm512_cvtph_ps(
			_mm256_loadu_si256((const __m256i *)(x + i)));
		__m512 ay = _mm512_cvtph_ps(
			_mm256_loadu_si256((const __m256i *)(y + i)));

		ay = _mm512_fmadd_ps(ax, vv, ay);
		_mm256_storeu_si256(
			(__m256i *)(y + i),
			_mm512_cvtps_ph(ay, _MM_FROUND_TO_NEAREST_INT |
						    _MM_FROUND_NO_EXC));
	}
	for (; i < n; i++) {
		__m128 ax = _mm_cvtph_ps(_mm_cvtsi32_si128(x[i]));
		__m128 ay = _mm_cvtph_ps(_mm_cvtsi32_si128(y[i]));

		ay = _mm_fmadd_ss(ax, _mm_set_ss(v), ay);
		y[i] = (uint16_t)_mm_cvtsi128_si32(_mm_cvtps_ph(
			ay, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	}
}

ATT_TARGET static void att_scale_f16_avx512(uint16_t *y, float v, uint32_t n)
{
	const __m512 vv = _mm512_set1_ps(v);
	uint32_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512 ay = _mm512_cvtph_ps(
			_mm256_loadu_si256((const __m256i *)(y + i)));

		ay = _mm512_mul_ps(ay, vv);
		_mm256_storeu_si256(
			(__m256i *)(y + i),
			_mm512_cvtps_ph(ay, _MM_FROUND_TO_NEAREST_INT |
						    _MM_FROUND_NO_EXC));
	}
	for (; i < n; i++) {
		__m128 ay = _mm_cvtph_ps(_mm_cvtsi32_si128(y[i]));

		ay = _mm_mul_ss(ay, _mm_set_ss(v));
		y[i] = (uint16_t)_mm_cvtsi128_si32(_mm_cvtps_ph(
			ay, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	}
}

ATT_TARGET static void att_f16_to_f32_avx512(float *y, const uint16_t *x,
					     uint32_t n)
{
	uint32_t i = 0;

	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(
						(const __m256i *)(x + i))));
	for (; i < n; i++)
		y[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(x[i])));
}

ATT_TARGET static void att_mad_f32_avx512(float *y, const float *x, float v,
					  uint32_t n)
{
	const __m512 vv = _mm512_set1_ps(v);
	uint32_t i = 0;

	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i,
				 _mm512_fmadd_ps(_mm512_loadu_ps(x + i), vv,
						 _mm512_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] = fmaf(x[i], v, y[i]);
}

ATT_TARGET static inline __m512 att_ld16(const uint16_t *p)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* F32 to F16 to F32: the value an F16 accumulator holds after a store */
ATT_TARGET static inline __m512 att_round16(__m512 v)
{
	return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT |
							  _MM_FROUND_NO_EXC));
}

/*
 * expf of 16 floats with the bits of glibc's expf (__expf_fma, the variant
 * libm picks on a CPU with FMA; sysdeps/ieee754/flt-32/e_expf.c), which is
 * what ggml's flash attention calls once per position: in double,
 * x * 32/ln2 = k + r, 2^(k/32) from a 32-entry table, a cubic in r, with
 * the same four FMAs the compiled libm uses (read from its disassembly).
 * The constants are libm's __exp2f_data. Lanes past |x| >= 88 (and NaN,
 * infinities) take libm's own expf. att_simd_init() checks the result
 * against libm on this machine and keeps the scalar calls if any differs
 * (another libm).
 */
static const uint64_t att_exp2_table[32] = {
	0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f,
	0x3fef9301d0125b51, 0x3fef72b83c7d517b, 0x3fef54873168b9aa,
	0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715,
	0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
	0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
	0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74,
	0x3feea11473eb0187, 0x3feea589994cce13, 0x3feeace5422aa0db,
	0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
	0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c,
	0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
	0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};

ATT_TARGET static inline __m256 att_expf8(__m256 x)
{
	const __m512d invln2n = _mm512_set1_pd(0x1.71547652b82fep+5);
	const __m512d shift = _mm512_set1_pd(0x1.8p+52);
	const __m512d c0 = _mm512_set1_pd(0x1.c6af84b912394p-20);
	const __m512d c1 = _mm512_set1_pd(0x1.ebfce50fac4f3p-13);
	const __m512d c2 = _mm512_set1_pd(0x1.62e42ff0c52d6p-6);
	const __m512d one = _mm512_set1_pd(1.0);
	__m512d xd = _mm512_cvtps_pd(x), kd, r, z, r2, y;
	__m512i ki, t;

	kd = _mm512_fmadd_pd(invln2n, xd, shift);
	ki = _mm512_castpd_si512(kd);
	kd = _mm512_sub_pd(kd, shift);
	r = _mm512_fmsub_pd(invln2n, xd, kd);
	t = _mm512_i64gather_epi64(_mm512_and_si512(ki, _mm512_set1_epi64(31)),
				   (const void *)att_exp2_table, 8);
	t = _mm512_add_epi64(t, _mm512_slli_epi64(ki, 47));
	z = _mm512_fmadd_pd(c0, r, c1);
	r2 = _mm512_mul_pd(r, r);
	y = _mm512_fmadd_pd(r, c2, one);
	y = _mm512_fmadd_pd(z, r2, y);
	y = _mm512_mul_pd(y, _mm512_castsi512_pd(t));
	return _mm512_cvtpd_ps(y);
}

ATT_TARGET static void att_expf16_avx512(float *y, const float *x)
{
	__m512 v = _mm512_loadu_ps(x);
	/* top12(x) & 0x7ff > top12(88.0f) - 1: libm's special-case branch */
	__mmask16 slow = _mm512_cmpgt_epu32_mask(
		_mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 20),
				 _mm512_set1_epi32(0x7ff)),
		_mm512_set1_epi32(0x42a));
	__m256 lo = att_expf8(_mm512_castps512_ps256(v));
	__m256 hi = att_expf8(_mm256_castpd_ps(
		_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
	float in[16];
	int i;

	_mm512_storeu_ps(in, v); /* y may be x */
	_mm256_storeu_ps(y, lo);
	_mm256_storeu_ps(y + 8, hi);
	for (i = 0; slow && i < 16; i++)
		if (slow & (1u << i))
			y[i] = expf(in[i]);
}

static bool att_expf_exact;

#define ATT_FAST_MAX 256 /* the longest head att_run_f16 takes */

/*
 * att_step for F16 K and V, n positions in one loop: dot_f16's K.Q (four
 * accumulators over steps of 64, reduced as cpu_reduce4; dk a multiple of
 * 64, so no tail), the online softmax, and ggml_vec_mad_f16 on an
 * accumulator kept in registers as the floats its F16 values stand for
 * (each step rounds through F16 as the store would). Q is converted once,
 * not per position. Inlined with constant dk and dv for the common head,
 * so the loops unroll and Q and the accumulator stay in registers.
 */
ATT_TARGET static inline __attribute__((always_inline)) void
att_run_f16_core(struct att_state *st, const uint8_t *k, size_t k_stride,
		 const uint8_t *v, size_t v_stride, uint32_t n, uint32_t dk,
		 uint32_t dv)
{
	const float scale = st->sh->scale;
	const uint16_t *q16 = (const uint16_t *)st->q;
	__m512 q[ATT_FAST_MAX / 16], acc[ATT_FAST_MAX / 16];
	float M = st->M, S = st->S;
	uint32_t c, c0, i;

	for (i = 0; i < dk / 16; i++)
		q[i] = att_ld16(q16 + 16 * i);
	for (i = 0; i < dv / 16; i++)
		acc[i] = att_ld16(st->acc16 + 16 * i);
	for (c0 = 0; c0 < n; c0 += 16) {
		const uint32_t m = n - c0 < 16 ? n - c0 : 16;
		float sc[16], e[16];
		uint32_t up = 0;

		/* the scores first: they do not depend on the softmax state */
		for (c = 0; c < m; c++) {
			const uint16_t *kr =
				(const uint16_t *)(k + (c0 + c) * k_stride);
			__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0,
			       a3 = a0;
			float s;

			for (i = 0; i < dk / 16; i += 4) {
				a0 = _mm512_fmadd_ps(att_ld16(kr + 16 * i),
						     q[i], a0);
				a1 = _mm512_fmadd_ps(att_ld16(kr + 16 * i + 16),
						     q[i + 1], a1);
				a2 = _mm512_fmadd_ps(att_ld16(kr + 16 * i + 32),
						     q[i + 2], a2);
				a3 = _mm512_fmadd_ps(att_ld16(kr + 16 * i + 48),
						     q[i + 3], a3);
			}
			s = cpu_hsum16(_mm512_add_ps(_mm512_add_ps(a0, a2),
						     _mm512_add_ps(a1, a3)));
			s = s * scale;
			s += 0.0f;
			sc[c] = s;
		}
		/*
		 * The running maximum, and each position's one expf argument:
		 * mold - M where the maximum moves, s - M where it does not.
		 */
		for (c = 0; c < 16; c++) {
			if (c >= m) {
				e[c] = 0.0f;
			} else if (sc[c] > M) {
				e[c] = M - sc[c];
				M = sc[c];
				up |= 1u << c;
			} else {
				e[c] = sc[c] - M;
			}
		}
		if (att_expf_exact) {
			att_expf16_avx512(e, e);
		} else {
			for (c = 0; c < m; c++)
				e[c] = expf(e[c]);
		}
		for (c = 0; c < m; c++) {
			const uint16_t *vr =
				(const uint16_t *)(v + (c0 + c) * v_stride);
			float ms = 1.0f, vs = 1.0f;
			__m512 vv;

			if (up & (1u << c)) {
				ms = e[c];
				vv = _mm512_set1_ps(ms);
				for (i = 0; i < dv / 16; i++)
					acc[i] = att_round16(
						_mm512_mul_ps(acc[i], vv));
			} else {
				vs = e[c];
			}
			vv = _mm512_set1_ps(vs);
			for (i = 0; i < dv / 16; i++)
				acc[i] = att_round16(_mm512_fmadd_ps(
					att_ld16(vr + 16 * i), vv, acc[i]));
			S = S * ms + vs;
		}
	}
	for (i = 0; i < dv / 16; i++)
		_mm256_storeu_si256(
			(__m256i *)(st->acc16 + 16 * i),
			_mm512_cvtps_ph(acc[i], _MM_FROUND_TO_NEAREST_INT |
							_MM_FROUND_NO_EXC));
	st->M = M;
	st->S = S;
}

ATT_TARGET static void att_run_f16_avx512(struct att_state *st,
					  const uint8_t *k, size_t k_stride,
					  const uint8_t *v, size_t v_stride,
					  uint32_t n)
{
	const uint32_t dk = st->sh->head_dim, dv = st->sh->head_dim_v;

	if (dk == 128 && dv == 128)
		att_run_f16_core(st, k, k_stride, v, v_stride, n, 128, 128);
	else
		att_run_f16_core(st, k, k_stride, v, v_stride, n, dk, dv);
}

static bool att_simd;
static pthread_once_t att_simd_once = PTHREAD_ONCE_INIT;

/* Does att_expf16_avx512 give libm's bits here? 65,536 spread inputs. */
static bool att_expf_check(void)
{
	float x[16], y[16];
	uint32_t i, j, bits;

	for (i = 0; i < 65536; i += 16) {
		for (j = 0; j < 16; j++) {
			bits = (i + j) << 16 | (((i + j) * 0x9e37u) & 0xffff);
			memcpy(&x[j], &bits, sizeof(bits));
		}
		att_expf16_avx512(y, x);
		for (j = 0; j < 16; j++)
			if (memcmp(&y[j], &(float){ expf(x[j]) }, 4) &&
			    !(isnan(y[j]) && isnan(expf(x[j]))))
				return false;
	}
	return true;
}

static void att_simd_init(void)
{
	__builtin_cpu_init();
	/* the AVX-512 steps where the CPU's level is AVX-512 */
	att_simd = cpu_isa() == cpu_isa_named("avx512");
	att_expf_exact = att_simd && att_expf_check();
}
#else
static bool att_simd;
static pthread_once_t att_simd_once = PTHREAD_ONCE_INIT;
static void att_simd_init(void)
{
}
static void att_mad_f16_avx512(uint16_t *y, const uint16_t *x, float v,
			       uint32_t n)
{
}
static void att_scale_f16_avx512(uint16_t *y, float v, uint32_t n)
{
}
static void att_f16_to_f32_avx512(float *y, const uint16_t *x, uint32_t n)
{
}
static void att_mad_f32_avx512(float *y, const float *x, float v, uint32_t n)
{
}
#define ATT_FAST_MAX 0
static const bool att_expf_exact;
static void att_expf16_avx512(float *y, const float *x)
{
}
static void att_run_f16_avx512(struct att_state *st, const uint8_t *k,
			       size_t k_stride, const uint8_t *v,
			       size_t v_stride, uint32_t n)
{
}
#endif

bool att_simd_usable(void)
{
	pthread_once(&att_simd_once, att_simd_init);
	return att_simd;
}

bool att_expf_batch(float *y, const float *x, size_t n)
{
	size_t i = 0;

	if (att_simd_usable() && att_expf_exact)
		for (; i + 16 <= n; i += 16)
			att_expf16_avx512(y + i, x + i);
	for (; i < n; i++)
		y[i] = expf(x[i]);
	return att_expf_exact;
}

/*
 * ggml_vec_mad_f16: a vector FMA over whole steps and a scalar tail that
 * GCC contracts to the same FMA, so one fmaf per element.
 */
void att_mad_f16(uint16_t *y, const uint16_t *x, float v, uint32_t n, bool simd)
{
	uint32_t i;

	if (simd && att_simd_usable()) {
		att_mad_f16_avx512(y, x, v, n);
		return;
	}
	for (i = 0; i < n; i++)
		y[i] = quant_fp32_to_fp16(fmaf(quant_fp16_to_fp32(x[i]), v,
					       quant_fp16_to_fp32(y[i])));
}

/* ggml_vec_scale_f16: y = y * v, rounded to F16 */
void att_scale_f16(uint16_t *y, float v, uint32_t n, bool simd)
{
	uint32_t i;

	if (simd && att_simd_usable()) {
		att_scale_f16_avx512(y, v, n);
		return;
	}
	for (i = 0; i < n; i++)
		y[i] = quant_fp32_to_fp16(quant_fp16_to_fp32(y[i]) * v);
}

void att_f16_to_f32(float *y, const uint16_t *x, uint32_t n, bool simd)
{
	uint32_t i;

	if (simd && att_simd_usable()) {
		att_f16_to_f32_avx512(y, x, n);
		return;
	}
	for (i = 0; i < n; i++)
		y[i] = quant_fp16_to_fp32(x[i]);
}

/* ggml_vec_mad_f32: one FMA per element, vector part and tail alike */
static void att_mad_f32(float *y, const float *x, float v, uint32_t n)
{
	uint32_t i;

	if (att_simd_usable()) {
		att_mad_f32_avx512(y, x, v, n);
		return;
	}
	for (i = 0; i < n; i++)
		y[i] = fmaf(x[i], v, y[i]);
}

static void att_scale_f32(float *y, float v, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		y[i] = y[i] * v;
}

/* ---- one head ---------------------------------------------------------- */

size_t att_scratch_bytes(const struct att_shape *sh)
{
	/* Q as F32 is the widest vec_dot row */
	return cpu_align64((size_t)sh->head_dim * 4 + 64) +
	       cpu_align64((size_t)sh->head_dim_v * 2) +
	       2 * cpu_align64((size_t)sh->head_dim_v * 4);
}

void att_begin(struct att_state *st, const struct att_shape *sh, const float *q,
	       void *scratch)
{
	uint8_t *p = scratch;

	st->sh = sh;
	st->M = -INFINITY;
	st->S = 0.0f;
	st->q = p;
	p += cpu_align64((size_t)sh->head_dim * 4 + 64);
	st->acc16 = (uint16_t *)p;
	p += cpu_align64((size_t)sh->head_dim_v * 2);
	st->acc32 = (float *)p;
	p += cpu_align64((size_t)sh->head_dim_v * 4);
	st->v32 = (float *)p;
	if (sh->type_v == IO_TYPE_F16)
		memset(st->acc16, 0, sh->head_dim_v * sizeof(*st->acc16));
	else
		memset(st->acc32, 0, sh->head_dim_v * sizeof(*st->acc32));
	quant_from_float(quant_vec_dot_type(sh->type_k), q, st->q,
			 sh->head_dim);
}

/* One position: s = K.Q scaled, then the online softmax step. */
static void att_step(struct att_state *st, const uint8_t *k, const uint8_t *v)
{
	const struct att_shape *sh = st->sh;
	const uint32_t dv = sh->head_dim_v;
	float s, ms = 1.0f, vs = 1.0f;

	s = dot_row(sh->type_k, sh->head_dim, k, st->q, false);
	s = s * sh->scale;
	s += 0.0f; /* the mask of a visible position */
	if (s > st->M) {
		float mold = st->M;

		st->M = s;
		ms = expf(mold - st->M);
		if (sh->type_v == IO_TYPE_F16)
			att_scale_f16(st->acc16, ms, dv, true);
		else
			att_scale_f32(st->acc32, ms, dv);
	} else {
		vs = expf(s - st->M);
	}
	if (sh->type_v == IO_TYPE_F16) {
		att_mad_f16(st->acc16, (const uint16_t *)v, vs, dv, true);
	} else if (sh->type_v == IO_TYPE_F32) {
		att_mad_f32(st->acc32, (const float *)v, vs, dv);
	} else {
		quant_to_float(sh->type_v, v, st->v32, dv);
		att_mad_f32(st->acc32, st->v32, vs, dv);
	}
	st->S = st->S * ms + vs;
}

void att_run_steps(struct att_state *st, const uint8_t *k, size_t k_stride,
		   const uint8_t *v, size_t v_stride, uint32_t n)
{
	uint32_t c;

	for (c = 0; c < n; c++)
		att_step(st, k + c * k_stride, v + c * v_stride);
}

void att_run(struct att_state *st, const uint8_t *k, size_t k_stride,
	     const uint8_t *v, size_t v_stride, uint32_t n)
{
	const struct att_shape *sh = st->sh;

	if (sh->type_k == IO_TYPE_F16 && sh->type_v == IO_TYPE_F16 &&
	    sh->head_dim % 64 == 0 && sh->head_dim <= ATT_FAST_MAX &&
	    sh->head_dim_v % 16 == 0 && sh->head_dim_v <= ATT_FAST_MAX &&
	    att_simd_usable()) {
		att_run_f16_avx512(st, k, k_stride, v, v_stride, n);
		return;
	}
	att_run_steps(st, k, k_stride, v, v_stride, n);
}

void att_vkq(struct att_state *st, float *vkq)
{
	const uint32_t dv = st->sh->head_dim_v;

	if (st->sh->type_v == IO_TYPE_F16)
		att_f16_to_f32(vkq, st->acc16, dv, true);
	else if (vkq != st->acc32)
		memcpy(vkq, st->acc32, dv * sizeof(*vkq));
}

void att_end(struct att_state *st, float *out)
{
	float s_inv = st->S == 0.0f ? 0.0f : 1.0f / st->S;

	att_vkq(st, out);
	att_scale_f32(out, s_inv, st->sh->head_dim_v);
}

/*
 * The reduction is C++ built with contraction: GCC fuses the first
 * product of a*b + c*d and rounds the second.
 */
void att_merge(float *out, const float *partials, size_t stride, uint32_t n,
	       uint32_t head_dim_v)
{
	float M = -INFINITY, S = 0.0f;
	uint32_t c, d;

	memset(out, 0, head_dim_v * sizeof(*out));
	for (c = 0; c < n; c++) {
		const float *p = partials + c * stride;
		float mc = p[0], sc = p[1], mn, so, sn;

		if (sc == 0.0f)
			continue;
		mn = fmaxf(M, mc);
		so = expf(M - mn);
		sn = expf(mc - mn);
		for (d = 0; d < head_dim_v; d++)
			out[d] = fmaf(out[d], so, p[2 + d] * sn);
		S = fmaf(S, so, sc * sn);
		M = mn;
	}
	if (S != 0.0f)
		att_scale_f32(out, 1.0f / S, head_dim_v);
}
