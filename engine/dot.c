// SPDX-License-Identifier: MIT
/*
 * Dot products in the reference build's order (see dot.h). Each function
 * names the ggml kernel it follows; the orders were read from ggml's
 * source and checked against the disassembly of libggml-cpu-zen4.so and
 * against llama.cpp's intermediate tensors (tests/engine/test_golden.c
 * then sees the golden logits to their printed 9 digits).
 *
 * The integer part of a legacy-quant block dot is exact in any order;
 * what matters is how the per-block floats are combined: ggml's AVX2 code
 * keeps 8 lanes, each the integer sum of 4 neighbouring products scaled
 * by the block's d and added with an FMA, then folds the lanes
 * (hsum_float_8).
 */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "dot.h"
#include "quant.h"

#ifdef __clang__
#pragma clang fp contract(off)
#endif

#define DOT_LANES 16  /* floats in an AVX-512 register */
#define DOT_STEP 64   /* GGML_F32_STEP, GGML_F16_STEP */

/* Every half as a float, filled once: a lookup beats the conversion. */
static float dot_half_table[1 << 16];
static pthread_once_t dot_half_once = PTHREAD_ONCE_INIT;

static void dot_half_init(void)
{
	uint32_t h;

	for (h = 0; h < (1u << 16); h++)
		dot_half_table[h] = quant_fp16_to_fp32((uint16_t)h);
}

static inline float dot_f16f(uint16_t h)
{
	return dot_half_table[h];
}

/* bf16 is the upper half of a float: exact by a shift */
static inline float dot_bf16f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static float dot_h2f(const uint8_t *p)
{
	uint16_t h;

	memcpy(&h, p, sizeof(h));
	return dot_f16f(h);
}

/* _mm512_reduce_add_ps of 16 lanes (GCC): halves folded down to one. */
float dot_hsum16(const float *v)
{
	float t[16];
	int w, i;

	memcpy(t, v, sizeof(t));
	for (w = 8; w >= 1; w /= 2)
		for (i = 0; i < w; i++)
			t[i] = t[i] + t[i + w];
	return t[0];
}

/* GGML_F32_VEC_REDUCE: 4 accumulators pairwise, then the 16 lanes. */
static float dot_reduce4x16(float acc[4][DOT_LANES])
{
	int l;

	for (l = 0; l < DOT_LANES; l++) {
		acc[0][l] = acc[0][l] + acc[2][l];
		acc[1][l] = acc[1][l] + acc[3][l];
	}
	for (l = 0; l < DOT_LANES; l++)
		acc[0][l] = acc[0][l] + acc[1][l];
	return dot_hsum16(acc[0]);
}

/*
 * ggml_vec_dot_f32 (AVX-512): four 16-lane FMA accumulators over steps of
 * 64, reduced; then the float tail `sumf += x[i]*y[i]` as GCC 11 compiled
 * it in libggml-cpu-zen4.so: whole groups of 16, then one group of 8,
 * with the products rounded and added in order, and the last < 8
 * elements contracted to FMAs (vec.cpp is C++ built as gnu++17, where
 * contraction is on).
 */
static float dot_f32(int64_t n, const float *x, const float *y)
{
	float acc[4][DOT_LANES] = {{0}};
	int64_t np = n & ~(int64_t)(DOT_STEP - 1), i;
	float sum;
	int j, l;

	for (i = 0; i < np; i += DOT_STEP)
		for (j = 0; j < 4; j++)
			for (l = 0; l < DOT_LANES; l++) {
				int64_t k = i + j * DOT_LANES + l;

				acc[j][l] = fmaf(x[k], y[k], acc[j][l]);
			}
	sum = dot_reduce4x16(acc);
	for (i = np; i < np + ((n - np) & ~(int64_t)15); i++)
		sum = sum + x[i] * y[i];
	if (n - i >= 8)
		for (j = 0; j < 8; j++, i++)
			sum = sum + x[i] * y[i];
	for (; i < n; i++)
		sum = fmaf(x[i], y[i], sum);
	return sum;
}

/* ggml_vec_dot_f16 (AVX-512 without FP16): as F32, the tail in double. */
float dot_f16(int64_t n, const uint16_t *x, const uint16_t *y)
{
	pthread_once(&dot_half_once, dot_half_init);
	float acc[4][DOT_LANES] = {{0}};
	int64_t np = n & ~(int64_t)(DOT_STEP - 1), i;
	double sum;
	int j, l;

	for (i = 0; i < np; i += DOT_STEP)
		for (j = 0; j < 4; j++)
			for (l = 0; l < DOT_LANES; l++) {
				int64_t k = i + j * DOT_LANES + l;

				acc[j][l] = fmaf(dot_f16f(x[k]), dot_f16f(y[k]),
						acc[j][l]);
			}
	sum = (double)dot_reduce4x16(acc);
	for (i = np; i < n; i++)
		sum += (double)(dot_f16f(x[i]) * dot_f16f(y[i]));
	return (float)sum;
}

/*
 * ggml_vec_dot_bf16 with AVX512-BF16: vdpbf16ps adds the odd then the
 * even product of each pair into its lane (products of bf16 are exact in
 * float, so each step is one rounding), two accumulators over steps of
 * 64, each reduced into a double; the tail in double.
 */
static float dot_bf16(int64_t n, const uint16_t *x, const uint16_t *y)
{
	float c[2][DOT_LANES] = {{0}};
	double sum = 0.0;
	int64_t i = 0;
	int h, l;

	for (; i + 64 <= n; i += 64)
		for (h = 0; h < 2; h++)
			for (l = 0; l < DOT_LANES; l++) {
				int64_t k = i + h * 32 + 2 * l;

				c[h][l] = fmaf(dot_bf16f(x[k + 1]),
					dot_bf16f(y[k + 1]), c[h][l]);
				c[h][l] = fmaf(dot_bf16f(x[k]), dot_bf16f(y[k]),
					c[h][l]);
			}
	sum += (double)dot_hsum16(c[0]);
	sum += (double)dot_hsum16(c[1]);
	for (; i < n; i++)
		sum += (double)(dot_bf16f(x[i]) * dot_bf16f(y[i]));
	return (float)sum;
}


/* hsum_float_8: the upper half onto the lower, then 2, then 1. */
static float dot_hsum8(const float *v)
{
	float r0 = v[4] + v[0], r1 = v[5] + v[1];
	float r2 = v[6] + v[2], r3 = v[7] + v[3];

	r0 = r0 + r2;
	r1 = r1 + r3;
	return r0 + r1;
}

/*
 * The 32 integer weights of one legacy block, in element order, and where
 * its d (and m) are. Layouts as ggml-common.h: q4_0 {d, qs[16]}, q4_1 {d,
 * m, qs[16]}, q5_0 {d, qh[4], qs[16]}, q5_1 {d, m, qh[4], qs[16]}, q8_0
 * {d, qs[32]}; element j < 16 is the low nibble of qs[j], j + 16 the high.
 */
static void dot_legacy_block(uint32_t type, const uint8_t *b, int *q)
{
	const uint8_t *qs;
	uint32_t qh = 0;
	int j;

	switch (type) {
	case IO_TYPE_Q8_0:
		for (j = 0; j < 32; j++)
			q[j] = (int8_t)b[2 + j];
		return;
	case IO_TYPE_Q4_0:
	case IO_TYPE_Q4_1:
		qs = b + (type == IO_TYPE_Q4_0 ? 2 : 4);
		for (j = 0; j < 16; j++) {
			q[j] = qs[j] & 0x0f;
			q[j + 16] = qs[j] >> 4;
		}
		if (type == IO_TYPE_Q4_0)
			for (j = 0; j < 32; j++)
				q[j] -= 8;
		return;
	default:  /* Q5_0, Q5_1 */
		memcpy(&qh, b + (type == IO_TYPE_Q5_0 ? 2 : 4), 4);
		qs = b + (type == IO_TYPE_Q5_0 ? 6 : 8);
		for (j = 0; j < 16; j++) {
			q[j] = (qs[j] & 0x0f) | (((qh >> j) & 1) << 4);
			q[j + 16] = (qs[j] >> 4) |
				(((qh >> (j + 16)) & 1) << 4);
		}
		if (type == IO_TYPE_Q5_0)
			for (j = 0; j < 32; j++)
				q[j] -= 16;
		return;
	}
}

/*
 * ggml_vec_dot_{q4_0,q5_0,q8_0}_q8_0 and {q4_1,q5_1}_q8_1 (AVX2 branch;
 * quants.c is C built as gnu11, so `summs += m * s` is an FMA).
 */
static float dot_legacy(uint32_t type, int64_t n, const uint8_t *w,
		const uint8_t *a)
{
	const struct io_type_info *ti = io_type_info(type);
	const bool with_min = type == IO_TYPE_Q4_1 || type == IO_TYPE_Q5_1;
	const size_t a_bytes = with_min ? 36 : 34;  /* q8_1 : q8_0 */
	float acc[8] = {0}, summs = 0.0f;
	int64_t ib, nb = n / 32;
	int q[32], l, j;

	for (ib = 0; ib < nb; ib++, w += ti->block_bytes, a += a_bytes) {
		const int8_t *qa = (const int8_t *)(a + (with_min ? 4 : 2));
		float d = dot_h2f(w) * dot_h2f(a);

		if (with_min)
			summs = fmaf(dot_h2f(w + 2), dot_h2f(a + 2), summs);
		dot_legacy_block(type, w, q);
		for (l = 0; l < 8; l++) {
			int s = 0;

			for (j = 4 * l; j < 4 * l + 4; j++)
				s += q[j] * qa[j];
			acc[l] = fmaf(d, (float)s, acc[l]);
		}
	}
	return with_min ? dot_hsum8(acc) + summs : dot_hsum8(acc);
}


/*
 * ggml_gemv_q4_0_8x8_q8_0 (x86, gemv_q4_b32_8x8_q8_0_lut_avx): a repacked
 * q4_0 matrix keeps one float per row, each block's integer sum scaled
 * with an FMA.
 */
static float dot_q4_0_repacked(int64_t n, const uint8_t *w, const uint8_t *a)
{
	float acc = 0.0f;
	int64_t ib, nb = n / 32;
	int q[32], j;

	for (ib = 0; ib < nb; ib++, w += 18, a += 34) {
		const int8_t *qa = (const int8_t *)(a + 2);
		int s = 0;

		dot_legacy_block(IO_TYPE_Q4_0, w, q);
		for (j = 0; j < 32; j++)
			s += q[j] * qa[j];
		acc = fmaf((float)s, dot_h2f(w) * dot_h2f(a), acc);
	}
	return acc;
}

/* ---- K-quants (Q8_K activations: float d, qs[256], int16 bsums[16]) ---- */

#define DOT_QK 256
#define DOT_Q8K_BYTES 292

static float dot_q8k_d(const uint8_t *a)
{
	float d;

	memcpy(&d, a, sizeof(d));
	return d;
}

static int dot_q8k_bsum(const uint8_t *a, int i)
{
	int16_t v;

	memcpy(&v, a + 4 + DOT_QK + 2 * i, sizeof(v));
	return v;
}

/* The 6-bit scale and min of sub-block j of a q4_K/q5_K block. */
static void dot_scale_min_k4(const uint8_t *q, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/*
 * The 8 integer lanes of one super-block as ggml's AVX2 K-quant kernels
 * fill them: lane l sums sc * q[e] * a[e] over elements 4l..4l+3 of every
 * 32, sc being the scale of e's sub-block (e >> shift: 5 for sub-blocks of
 * 32, 4 for 16).
 */
static void dot_lanes256(const int *q, const int *sc, int shift,
		const int8_t *qa, int lane[8])
{
	int l, g, e;

	for (l = 0; l < 8; l++) {
		lane[l] = 0;
		for (g = 0; g < DOT_QK; g += 32)
			for (e = g + 4 * l; e < g + 4 * l + 4; e++)
				lane[l] += sc[e >> shift] * q[e] * qa[e];
	}
}

/* q4_K block {d, dmin, scales[12], qs[128]}: the 256 nibbles in order. */
static void dot_q4k_q(const uint8_t *b, int *q)
{
	const uint8_t *qs = b + 16;
	int c, t;

	for (c = 0; c < 4; c++)
		for (t = 0; t < 32; t++) {
			q[64 * c + t] = qs[32 * c + t] & 0x0f;
			q[64 * c + t + 32] = qs[32 * c + t] >> 4;
		}
}

/*
 * ggml_vec_dot_q4_K_q8_K, AVX2: per block 8 integer lanes (lane l holds
 * elements 4l..4l+3 of every 32) scaled by d with an FMA, and the mins in
 * 4 lanes by -dmin; lanes folded at the end.
 */
static float dot_q4_k(int64_t n, const uint8_t *w, const uint8_t *a)
{
	float acc[8] = {0}, accm[4] = {0}, m01, m;
	int64_t ib, nb = n / DOT_QK;
	int sc[8], mn[8], q[DOT_QK], lane[8], l, k, j;

	for (ib = 0; ib < nb; ib++, w += 144, a += DOT_Q8K_BYTES) {
		const int8_t *qa = (const int8_t *)(a + 4);
		float d = dot_q8k_d(a) * dot_h2f(w);
		float dmin = -dot_q8k_d(a) * dot_h2f(w + 2);

		dot_q4k_q(w, q);
		for (j = 0; j < 8; j++)
			dot_scale_min_k4(w + 4, j, &sc[j], &mn[j]);
		for (k = 0; k < 4; k++) {
			int p = mn[2 * k] * (dot_q8k_bsum(a, 4 * k) +
					dot_q8k_bsum(a, 4 * k + 1)) +
				mn[2 * k + 1] * (dot_q8k_bsum(a, 4 * k + 2) +
					dot_q8k_bsum(a, 4 * k + 3));

			accm[k] = fmaf(dmin, (float)p, accm[k]);
		}
		dot_lanes256(q, sc, 5, qa, lane);
		for (l = 0; l < 8; l++)
			acc[l] = fmaf(d, (float)lane[l], acc[l]);
	}
	m01 = accm[0] + accm[2];
	m = accm[1] + accm[3];
	return dot_hsum8(acc) + (m01 + m);
}

/*
 * ggml_gemv_q4_K_8x8_q8_K, AVX2: what llama.cpp runs for a q4_K matrix
 * with rows in multiples of 8 (held interleaved by the CPU_REPACK buffer):
 * one float per row, the block's integer sum scaled with an FMA, the mins
 * likewise, subtracted at the end.
 */
static float dot_q4_k_repacked(int64_t n, const uint8_t *w, const uint8_t *a)
{
	float acc = 0.0f, accm = 0.0f;
	int64_t ib, nb = n / DOT_QK;
	int sc, mn, j, e, q[DOT_QK];

	for (ib = 0; ib < nb; ib++, w += 144, a += DOT_Q8K_BYTES) {
		const int8_t *qa = (const int8_t *)(a + 4);
		int s = 0, smin = 0;

		dot_q4k_q(w, q);
		for (j = 0; j < 8; j++) {
			int p = 0;

			dot_scale_min_k4(w + 4, j, &sc, &mn);
			for (e = 32 * j; e < 32 * j + 32; e++)
				p += q[e] * qa[e];
			s += sc * p;
			smin += mn * (dot_q8k_bsum(a, 2 * j) +
					dot_q8k_bsum(a, 2 * j + 1));
		}
		acc = fmaf((float)s, dot_h2f(w) * dot_q8k_d(a), acc);
		accm = fmaf((float)smin, dot_h2f(w + 2) * dot_q8k_d(a), accm);
	}
	return acc - accm;
}

/*
 * ggml_vec_dot_q6_K_q8_K, AVX2: unsigned 6-bit weights in 8 integer
 * lanes (elements 4l..4l+3 of every 32), minus 32 * the scaled bsums
 * lane by lane (lane l: bsums 2l and 2l+1), times d with an FMA.
 * q6_K block {ql[128], qh[64], scales[16], d}.
 */
static float dot_q6_k(int64_t n, const uint8_t *w, const uint8_t *a)
{
	float acc[8] = {0};
	int64_t ib, nb = n / DOT_QK;
	int q[DOT_QK], sc[16], lane[8], l, c, t;

	for (ib = 0; ib < nb; ib++, w += 210, a += DOT_Q8K_BYTES) {
		const int8_t *qa = (const int8_t *)(a + 4);
		float d = dot_q8k_d(a) * dot_h2f(w + 208);

		for (t = 0; t < 16; t++)
			sc[t] = (int8_t)w[192 + t];
		for (c = 0; c < 2; c++) {
			const uint8_t *ql = w + 64 * c, *qh = w + 128 + 32 * c;
			int *qc = q + 128 * c;

			for (t = 0; t < 32; t++) {
				qc[t] = (ql[t] & 0x0f) | ((qh[t] & 3) << 4);
				qc[t + 32] = (ql[t + 32] & 0x0f) |
					(((qh[t] >> 2) & 3) << 4);
				qc[t + 64] = (ql[t] >> 4) |
					(((qh[t] >> 4) & 3) << 4);
				qc[t + 96] = (ql[t + 32] >> 4) |
					(((qh[t] >> 6) & 3) << 4);
			}
		}
		dot_lanes256(q, sc, 4, qa, lane);
		for (l = 0; l < 8; l++) {
			int s = lane[l] - 32 *
				(dot_q8k_bsum(a, 2 * l) * sc[2 * l] +
				 dot_q8k_bsum(a, 2 * l + 1) * sc[2 * l + 1]);

			acc[l] = fmaf(d, (float)s, acc[l]);
		}
	}
	return dot_hsum8(acc);
}

/* q5_K block {d, dmin, scales[12], qh[32], qs[128]}: the 5-bit weights. */
static void dot_q5k_q(const uint8_t *b, int *q)
{
	const uint8_t *qh = b + 16, *qs = b + 48;
	int c, t;

	for (c = 0; c < 4; c++)
		for (t = 0; t < 32; t++) {
			q[64 * c + t] = (qs[32 * c + t] & 0x0f) |
				(((qh[t] >> (2 * c)) & 1) << 4);
			q[64 * c + t + 32] = (qs[32 * c + t] >> 4) |
				(((qh[t] >> (2 * c + 1)) & 1) << 4);
		}
}

/*
 * ggml_vec_dot_q5_K_q8_K, AVX2: lanes as q4_K; the mins summed to one
 * integer per block and added to a float with an FMA (gnu11 contracts
 * `summs += dmin * isum`).
 */
static float dot_q5_k(int64_t n, const uint8_t *w, const uint8_t *a)
{
	float acc[8] = {0}, summs = 0.0f;
	int64_t ib, nb = n / DOT_QK;
	int sc[8], mn[8], q[DOT_QK], lane[8], l, j;

	for (ib = 0; ib < nb; ib++, w += 176, a += DOT_Q8K_BYTES) {
		const int8_t *qa = (const int8_t *)(a + 4);
		float d = dot_q8k_d(a) * dot_h2f(w);
		float dmin = -dot_q8k_d(a) * dot_h2f(w + 2);
		int smin = 0;

		dot_q5k_q(w, q);
		for (j = 0; j < 8; j++) {
			dot_scale_min_k4(w + 4, j, &sc[j], &mn[j]);
			smin += mn[j] * (dot_q8k_bsum(a, 2 * j) +
					dot_q8k_bsum(a, 2 * j + 1));
		}
		summs = fmaf(dmin, (float)smin, summs);
		dot_lanes256(q, sc, 5, qa, lane);
		for (l = 0; l < 8; l++)
			acc[l] = fmaf(d, (float)lane[l], acc[l]);
	}
	return dot_hsum8(acc) + summs;
}

/* The 16 signed 6-bit scales of a q3_K block (ggml's kmask shuffle). */
static void dot_q3k_scales(const uint8_t *raw, int8_t *sc)
{
	const uint32_t km1 = 0x03030303, km2 = 0x0f0f0f0f;
	uint32_t aux[4], tmp;
	int i;

	memcpy(aux, raw, 12);
	tmp = aux[2];
	aux[2] = ((aux[0] >> 4) & km2) | (((tmp >> 4) & km1) << 4);
	aux[3] = ((aux[1] >> 4) & km2) | (((tmp >> 6) & km1) << 4);
	aux[0] = (aux[0] & km2) | (((tmp >> 0) & km1) << 4);
	aux[1] = (aux[1] & km2) | (((tmp >> 2) & km1) << 4);
	memcpy(sc, aux, 16);
	for (i = 0; i < 16; i++)
		sc[i] = (int8_t)(sc[i] - 32);
}

/*
 * ggml_vec_dot_q3_K_q8_K, AVX2: signed 3-bit weights in 8 integer lanes,
 * times d with an FMA. q3_K block {hmask[32], qs[64], scales[12], d}.
 */
static float dot_q3_k(int64_t n, const uint8_t *w, const uint8_t *a)
{
	float acc[8] = {0};
	int64_t ib, nb = n / DOT_QK;
	int8_t sc8[16];
	int q[DOT_QK], sc[16], lane[8], l, e;

	for (ib = 0; ib < nb; ib++, w += 110, a += DOT_Q8K_BYTES) {
		const int8_t *qa = (const int8_t *)(a + 4);
		float d = dot_q8k_d(a) * dot_h2f(w + 108);

		dot_q3k_scales(w + 96, sc8);
		for (l = 0; l < 16; l++)
			sc[l] = sc8[l];
		for (e = 0; e < DOT_QK; e++) {
			int c = e / 128, j = (e % 128) / 32, t = e % 32;

			q[e] = ((w[32 + 32 * c + t] >> (2 * j)) & 3) -
				((w[t] >> (4 * c + j)) & 1 ? 0 : 4);
		}
		dot_lanes256(q, sc, 4, qa, lane);
		for (l = 0; l < 8; l++)
			acc[l] = fmaf(d, (float)lane[l], acc[l]);
	}
	return dot_hsum8(acc);
}

/*
 * ggml_gemv_q2_K_8x8_q8_K (x86): as the q4_K gemv, one float per row.
 * q2_K block {scales[16] (scale | min << 4), qs[64], d, dmin}.
 */
static float dot_q2_k_repacked(int64_t n, const uint8_t *w, const uint8_t *a)
{
	float acc = 0.0f, accm = 0.0f;
	int64_t ib, nb = n / DOT_QK;
	int e, j;

	for (ib = 0; ib < nb; ib++, w += 84, a += DOT_Q8K_BYTES) {
		const int8_t *qa = (const int8_t *)(a + 4);
		int s = 0, smin = 0;

		for (j = 0; j < 16; j++) {
			int p = 0;

			for (e = 16 * j; e < 16 * j + 16; e++) {
				int c = e / 128, sh = 2 * ((e % 128) / 32);

				p += ((w[16 + 32 * c + e % 32] >> sh) & 3) *
					qa[e];
			}
			s += (w[j] & 0x0f) * p;
			smin += (w[j] >> 4) * dot_q8k_bsum(a, j);
		}
		acc = fmaf((float)s, dot_h2f(w + 80) * dot_q8k_d(a), acc);
		accm = fmaf((float)smin, dot_h2f(w + 82) * dot_q8k_d(a), accm);
	}
	return acc - accm;
}

float dot_row(uint32_t type, int64_t n, const void *w, const void *a,
		bool repacked)
{
	pthread_once(&dot_half_once, dot_half_init);
	switch (type) {
	case IO_TYPE_F32:
		return dot_f32(n, w, a);
	case IO_TYPE_F16:
		return dot_f16(n, w, a);
	case IO_TYPE_BF16:
		return dot_bf16(n, w, a);
	case IO_TYPE_Q4_0:
		if (repacked)
			return dot_q4_0_repacked(n, w, a);
		return dot_legacy(type, n, w, a);
	case IO_TYPE_Q4_1:
	case IO_TYPE_Q5_0:
	case IO_TYPE_Q5_1:
	case IO_TYPE_Q8_0:
		return dot_legacy(type, n, w, a);
	case IO_TYPE_Q4_K:
		if (repacked)
			return dot_q4_k_repacked(n, w, a);
		return dot_q4_k(n, w, a);
	case IO_TYPE_Q6_K:
		return dot_q6_k(n, w, a);
	case IO_TYPE_Q5_K:
		return dot_q5_k(n, w, a);
	case IO_TYPE_Q3_K:
		return dot_q3_k(n, w, a);
	case IO_TYPE_Q2_K:
		if (repacked)
			return dot_q2_k_repacked(n, w, a);
		return quant_vec_dot(type, n, w, a);
	default:
		return quant_vec_dot(type, n, w, a);
	}
}
