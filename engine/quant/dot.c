// SPDX-License-Identifier: MIT
/*
 * Dot products in the reference build's order, in scalar C: the float
 * dots (libggml-cpu-zen4.so's AVX-512 order) and llama.cpp's repacked
 * gemv kernels (one float per row). Each function names the ggml kernel
 * it follows; the orders were read from ggml's source and checked
 * against the disassembly of libggml-cpu-zen4.so and against llama.cpp's
 * intermediate tensors (tests/engine/test_golden.c then sees the golden
 * logits to their printed 9 digits). The plain block kernels (AVX2
 * order, 8 lanes folded by hsum_float_8) live once, in quant_x86.c.
 *
 * The float dots take the vector part of their sum as a function (a
 * backend's SIMD code, with the same bits) or NULL for the scalar
 * emulation of it: the tails are the same code either way.
 */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "quant_internal.h"

#ifdef __clang__
#pragma clang fp contract(off)
#endif

#define DOT_LANES 16 /* floats in an AVX-512 register */
#define DOT_STEP 64  /* GGML_F32_STEP, GGML_F16_STEP */

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
float dot_f32_with(int64_t n, const float *x, const float *y,
		   dot_f32_main_fn main)
{
	float acc[4][DOT_LANES] = { { 0 } };
	int64_t np = n & ~(int64_t)(DOT_STEP - 1), i;
	float sum;
	int j, l;

	if (main) {
		sum = main(np, x, y);
	} else {
		for (i = 0; i < np; i += DOT_STEP)
			for (j = 0; j < 4; j++)
				for (l = 0; l < DOT_LANES; l++) {
					int64_t k = i + j * DOT_LANES + l;

					acc[j][l] = fmaf(x[k], y[k], acc[j][l]);
				}
		sum = dot_reduce4x16(acc);
	}
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
float dot_f16_with(int64_t n, const uint16_t *x, const uint16_t *y,
		   dot_f16_main_fn main)
{
	float acc[4][DOT_LANES] = { { 0 } };
	int64_t np = n & ~(int64_t)(DOT_STEP - 1), i;
	double sum;
	int j, l;

	pthread_once(&dot_half_once, dot_half_init);
	if (main) {
		sum = (double)main(np, x, y);
	} else {
		for (i = 0; i < np; i += DOT_STEP)
			for (j = 0; j < 4; j++)
				for (l = 0; l < DOT_LANES; l++) {
					int64_t k = i + j * DOT_LANES + l;

					acc[j][l] = fmaf(dot_f16f(x[k]),
							 dot_f16f(y[k]),
							 acc[j][l]);
				}
		sum = (double)dot_reduce4x16(acc);
	}
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
float dot_bf16_with(int64_t n, const uint16_t *x, const uint16_t *y,
		    dot_bf16_main_fn main)
{
	float c[2][DOT_LANES] = { { 0 } }, f[2];
	double sum = 0.0;
	int64_t i = 0;
	int h, l;

	if (main) {
		i = n & ~(int64_t)63;
		main(i, x, y, f);
	} else {
		for (; i + 64 <= n; i += 64)
			for (h = 0; h < 2; h++)
				for (l = 0; l < DOT_LANES; l++) {
					int64_t k = i + h * 32 + 2 * l;

					c[h][l] = fmaf(dot_bf16f(x[k + 1]),
						       dot_bf16f(y[k + 1]),
						       c[h][l]);
					c[h][l] = fmaf(dot_bf16f(x[k]),
						       dot_bf16f(y[k]),
						       c[h][l]);
				}
		f[0] = dot_hsum16(c[0]);
		f[1] = dot_hsum16(c[1]);
	}
	sum += (double)f[0];
	sum += (double)f[1];
	for (; i < n; i++)
		sum += (double)(dot_bf16f(x[i]) * dot_bf16f(y[i]));
	return (float)sum;
}

/* The 32 weights of a q4_0 block {d, qs[16]}: j < 16 low nibbles, then high. */
static void dot_q4_0_block(const uint8_t *b, int *q)
{
	int j;

	for (j = 0; j < 16; j++) {
		q[j] = (b[2 + j] & 0x0f) - 8;
		q[j + 16] = (b[2 + j] >> 4) - 8;
	}
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

		dot_q4_0_block(w, q);
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

/*
 * The dot.c kernels as the traits table (traits.c) holds them: n
 * elements, void rows, the scalar emulation. Each fills the half table
 * first.
 */
float dot_f32_c(int64_t n, const void *w, const void *a)
{
	return dot_f32_with(n, w, a, NULL);
}

float dot_f16_c(int64_t n, const void *w, const void *a)
{
	return dot_f16_with(n, w, a, NULL);
}

float dot_bf16_c(int64_t n, const void *w, const void *a)
{
	return dot_bf16_with(n, w, a, NULL);
}

float dot_q4_0_repacked_c(int64_t n, const void *w, const void *a)
{
	pthread_once(&dot_half_once, dot_half_init);
	return dot_q4_0_repacked(n, w, a);
}

float dot_q4_K_repacked_c(int64_t n, const void *w, const void *a)
{
	pthread_once(&dot_half_once, dot_half_init);
	return dot_q4_k_repacked(n, w, a);
}

float dot_q2_K_repacked_c(int64_t n, const void *w, const void *a)
{
	pthread_once(&dot_half_once, dot_half_init);
	return dot_q2_k_repacked(n, w, a);
}
