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

#define ATT_TARGET __attribute__((target("avx512f,f16c,fma")))

/* y += x * v on F16 rows, 16 at a time, the tail masked */
ATT_TARGET static void att_mad_f16_avx512(uint16_t *y, const uint16_t *x,
		float v, uint32_t n)
{
	const __m512 vv = _mm512_set1_ps(v);
	uint32_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512 ax = _mm512_cvtph_ps(_mm256_loadu_si256(
				(const __m256i *)(x + i)));
		__m512 ay = _mm512_cvtph_ps(_mm256_loadu_si256(
				(const __m256i *)(y + i)));

		ay = _mm512_fmadd_ps(ax, vv, ay);
		_mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtps_ph(ay,
				_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	}
	for (; i < n; i++) {
		__m128 ax = _mm_cvtph_ps(_mm_cvtsi32_si128(x[i]));
		__m128 ay = _mm_cvtph_ps(_mm_cvtsi32_si128(y[i]));

		ay = _mm_fmadd_ss(ax, _mm_set_ss(v), ay);
		y[i] = (uint16_t)_mm_cvtsi128_si32(_mm_cvtps_ph(ay,
				_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	}
}

ATT_TARGET static void att_scale_f16_avx512(uint16_t *y, float v, uint32_t n)
{
	const __m512 vv = _mm512_set1_ps(v);
	uint32_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512 ay = _mm512_cvtph_ps(_mm256_loadu_si256(
				(const __m256i *)(y + i)));

		ay = _mm512_mul_ps(ay, vv);
		_mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtps_ph(ay,
				_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	}
	for (; i < n; i++) {
		__m128 ay = _mm_cvtph_ps(_mm_cvtsi32_si128(y[i]));

		ay = _mm_mul_ss(ay, _mm_set_ss(v));
		y[i] = (uint16_t)_mm_cvtsi128_si32(_mm_cvtps_ph(ay,
				_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
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
		_mm512_storeu_ps(y + i, _mm512_fmadd_ps(_mm512_loadu_ps(x + i),
				vv, _mm512_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] = fmaf(x[i], v, y[i]);
}

/*
 * _mm512_reduce_add_ps as dot_hsum16 folds it (lanes i and i + 8, then
 * i and i + 4, i and i + 2, 0 and 1): the same pairs, the same bits.
 */
ATT_TARGET static inline float att_hsum16(__m512 v)
{
	__m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
			_mm256_castpd_ps(_mm512_extractf64x4_pd(
				_mm512_castps_pd(v), 1)));
	__m128 q = _mm_add_ps(_mm256_castps256_ps128(h),
			_mm256_extractf128_ps(h, 1));

	q = _mm_add_ps(q, _mm_movehl_ps(q, q));
	q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
	return _mm_cvtss_f32(q);
}

ATT_TARGET static inline __m512 att_ld16(const uint16_t *p)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* F32 to F16 to F32: the value an F16 accumulator holds after a store */
ATT_TARGET static inline __m512 att_round16(__m512 v)
{
	return _mm512_cvtph_ps(_mm512_cvtps_ph(v,
			_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

#define ATT_FAST_MAX 256  /* the longest head att_run_f16 takes */

/*
 * att_step for F16 K and V, n positions in one loop: dot_f16's K.Q (four
 * accumulators over steps of 64, reduced as cpu_reduce4; dk a multiple of
 * 64, so no tail), the online softmax, and ggml_vec_mad_f16 on an
 * accumulator kept in registers as the floats its F16 values stand for
 * (each step rounds through F16 as the store would). Q is converted once,
 * not per position. Inlined with constant dk and dv for the common head,
 * so the loops unroll and Q and the accumulator stay in registers.
 */
ATT_TARGET static inline __attribute__((always_inline)) void att_run_f16_core(
		struct att_state *st, const uint8_t *k, size_t k_stride,
		const uint8_t *v, size_t v_stride, uint32_t n, uint32_t dk,
		uint32_t dv)
{
	const float scale = st->sh->scale;
	const uint16_t *q16 = (const uint16_t *)st->q;
	__m512 q[ATT_FAST_MAX / 16], acc[ATT_FAST_MAX / 16];
	float M = st->M, S = st->S;
	uint32_t c, i;

	for (i = 0; i < dk / 16; i++)
		q[i] = att_ld16(q16 + 16 * i);
	for (i = 0; i < dv / 16; i++)
		acc[i] = att_ld16(st->acc16 + 16 * i);
	for (c = 0; c < n; c++) {
		const uint16_t *kr = (const uint16_t *)(k + c * k_stride);
		const uint16_t *vr = (const uint16_t *)(v + c * v_stride);
		__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
		float s, ms = 1.0f, vs = 1.0f;
		__m512 vv;

		for (i = 0; i < dk / 16; i += 4) {
			a0 = _mm512_fmadd_ps(att_ld16(kr + 16 * i), q[i], a0);
			a1 = _mm512_fmadd_ps(att_ld16(kr + 16 * i + 16),
					q[i + 1], a1);
			a2 = _mm512_fmadd_ps(att_ld16(kr + 16 * i + 32),
					q[i + 2], a2);
			a3 = _mm512_fmadd_ps(att_ld16(kr + 16 * i + 48),
					q[i + 3], a3);
		}
		s = att_hsum16(_mm512_add_ps(_mm512_add_ps(a0, a2),
				_mm512_add_ps(a1, a3)));
		s = s * scale;
		s += 0.0f;
		if (s > M) {
			float mold = M;

			M = s;
			ms = expf(mold - M);
			vv = _mm512_set1_ps(ms);
			for (i = 0; i < dv / 16; i++)
				acc[i] = att_round16(_mm512_mul_ps(acc[i], vv));
		} else {
			vs = expf(s - M);
		}
		vv = _mm512_set1_ps(vs);
		for (i = 0; i < dv / 16; i++)
			acc[i] = att_round16(_mm512_fmadd_ps(
					att_ld16(vr + 16 * i), vv, acc[i]));
		S = S * ms + vs;
	}
	for (i = 0; i < dv / 16; i++)
		_mm256_storeu_si256((__m256i *)(st->acc16 + 16 * i),
			_mm512_cvtps_ph(acc[i],
				_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	st->M = M;
	st->S = S;
}

ATT_TARGET static void att_run_f16_avx512(struct att_state *st,
		const uint8_t *k, size_t k_stride, const uint8_t *v,
		size_t v_stride, uint32_t n)
{
	const uint32_t dk = st->sh->head_dim, dv = st->sh->head_dim_v;

	if (dk == 128 && dv == 128)
		att_run_f16_core(st, k, k_stride, v, v_stride, n, 128, 128);
	else
		att_run_f16_core(st, k, k_stride, v, v_stride, n, dk, dv);
}

static bool att_simd;
static pthread_once_t att_simd_once = PTHREAD_ONCE_INIT;

static void att_simd_init(void)
{
	__builtin_cpu_init();
	att_simd = __builtin_cpu_supports("avx512f") &&
		__builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
}
#else
static bool att_simd;
static pthread_once_t att_simd_once = PTHREAD_ONCE_INIT;
static void att_simd_init(void) { }
static void att_mad_f16_avx512(uint16_t *y, const uint16_t *x, float v,
		uint32_t n) { }
static void att_scale_f16_avx512(uint16_t *y, float v, uint32_t n) { }
static void att_f16_to_f32_avx512(float *y, const uint16_t *x,
		uint32_t n) { }
static void att_mad_f32_avx512(float *y, const float *x, float v,
		uint32_t n) { }
#define ATT_FAST_MAX 0
static void att_run_f16_avx512(struct att_state *st, const uint8_t *k,
		size_t k_stride, const uint8_t *v, size_t v_stride,
		uint32_t n) { }
#endif

bool att_simd_usable(void)
{
	pthread_once(&att_simd_once, att_simd_init);
	return att_simd;
}

/*
 * ggml_vec_mad_f16: a vector FMA over whole steps and a scalar tail that
 * GCC contracts to the same FMA, so one fmaf per element.
 */
void att_mad_f16(uint16_t *y, const uint16_t *x, float v, uint32_t n,
		bool simd)
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

static size_t att_align(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

size_t att_scratch_bytes(const struct att_shape *sh)
{
	/* Q as F32 is the widest vec_dot row */
	return att_align((size_t)sh->head_dim * 4 + 64) +
		att_align((size_t)sh->head_dim_v * 2) +
		2 * att_align((size_t)sh->head_dim_v * 4);
}

void att_begin(struct att_state *st, const struct att_shape *sh,
		const float *q, void *scratch)
{
	uint8_t *p = scratch;

	st->sh = sh;
	st->M = -INFINITY;
	st->S = 0.0f;
	st->q = p;
	p += att_align((size_t)sh->head_dim * 4 + 64);
	st->acc16 = (uint16_t *)p;
	p += att_align((size_t)sh->head_dim_v * 2);
	st->acc32 = (float *)p;
	p += att_align((size_t)sh->head_dim_v * 4);
	st->v32 = (float *)p;
	if (sh->type_v == IO_TYPE_F16)
		memset(st->acc16, 0, sh->head_dim_v * sizeof(*st->acc16));
	else
		memset(st->acc32, 0, sh->head_dim_v * sizeof(*st->acc32));
	quant_from_float(quant_vec_dot_type(sh->type_k), q, st->q,
			sh->head_dim);
}

/* One position: s = K.Q scaled, then the online softmax step. */
static void att_step(struct att_state *st, const uint8_t *k,
		const uint8_t *v)
{
	const struct att_shape *sh = st->sh;
	const uint32_t dv = sh->head_dim_v;
	float s, ms = 1.0f, vs = 1.0f;

	s = dot_row(sh->type_k, sh->head_dim, k, st->q, false);
	s = s * sh->scale;
	s += 0.0f;  /* the mask of a visible position */
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
