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
#include <stdbool.h>
#include <string.h>

#include "dot.h"
#include "quant.h"

#ifdef __clang__
#pragma clang fp contract(off)
#endif

#define DOT_LANES 16  /* floats in an AVX-512 register */
#define DOT_STEP 64   /* GGML_F32_STEP, GGML_F16_STEP */

static float dot_h2f(const uint8_t *p)
{
	uint16_t h;

	memcpy(&h, p, sizeof(h));
	return quant_fp16_to_fp32(h);
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
	float acc[4][DOT_LANES] = {{0}};
	int64_t np = n & ~(int64_t)(DOT_STEP - 1), i;
	double sum;
	int j, l;

	for (i = 0; i < np; i += DOT_STEP)
		for (j = 0; j < 4; j++)
			for (l = 0; l < DOT_LANES; l++) {
				int64_t k = i + j * DOT_LANES + l;

				acc[j][l] = fmaf(quant_fp16_to_fp32(x[k]),
					quant_fp16_to_fp32(y[k]), acc[j][l]);
			}
	sum = (double)dot_reduce4x16(acc);
	for (i = np; i < n; i++)
		sum += (double)(quant_fp16_to_fp32(x[i]) *
				quant_fp16_to_fp32(y[i]));
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

				c[h][l] = fmaf(quant_bf16_to_fp32(x[k + 1]),
					quant_bf16_to_fp32(y[k + 1]), c[h][l]);
				c[h][l] = fmaf(quant_bf16_to_fp32(x[k]),
					quant_bf16_to_fp32(y[k]), c[h][l]);
			}
	sum += (double)dot_hsum16(c[0]);
	sum += (double)dot_hsum16(c[1]);
	for (; i < n; i++)
		sum += (double)(quant_bf16_to_fp32(x[i]) *
				quant_bf16_to_fp32(y[i]));
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
			q[j + 16] = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
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

float dot_row(uint32_t type, int64_t n, const void *w, const void *a)
{
	switch (type) {
	case IO_TYPE_F32:
		return dot_f32(n, w, a);
	case IO_TYPE_F16:
		return dot_f16(n, w, a);
	case IO_TYPE_BF16:
		return dot_bf16(n, w, a);
	case IO_TYPE_Q4_0:
	case IO_TYPE_Q4_1:
	case IO_TYPE_Q5_0:
	case IO_TYPE_Q5_1:
	case IO_TYPE_Q8_0:
		return dot_legacy(type, n, w, a);
	default:
		return quant_vec_dot(type, n, w, a);
	}
}
