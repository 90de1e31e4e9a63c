/* SPDX-License-Identifier: MIT */
/*
 * The legacy 32-element block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (weights)
 * and Q8_0, Q8_1 (activations).
 *
 *   to_float       ggml-quants.c dequantize_row_*, operation for operation
 *   from_float     weights: quantize_row_*_ref (what llama-quantize writes
 *                  without an importance matrix); activations Q8_0/Q8_1:
 *                  the AVX2/AVX-512 quantize_row_q8_{0,1} of
 *                  ggml-cpu's arch/x86/quants.c, which scales by 127/max
 *                  and rounds ties to even, unlike the _ref versions
 *
 * Their dots in ggml's scalar order are dot_ref.c's (the reference, for
 * tests); the engine's are quant_x86.c's and engine/cpu's.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "quant_internal.h"

/* ---- to float ------------------------------------------------------------ */

void quant_q4_0_to_float(const void *vx, float *y, int64_t nb)
{
	const struct block_q4_0 *x = vx;

	for (int64_t i = 0; i < nb; i++, y += QK4_0) {
		const float d = quant_h2f(x[i].d);

		for (int j = 0; j < QK4_0 / 2; j++) {
			y[j] = ((x[i].qs[j] & 0x0f) - 8) * d;
			y[j + QK4_0 / 2] = ((x[i].qs[j] >> 4) - 8) * d;
		}
	}
}

void quant_q4_1_to_float(const void *vx, float *y, int64_t nb)
{
	const struct block_q4_1 *x = vx;

	for (int64_t i = 0; i < nb; i++, y += QK4_1) {
		const float d = quant_h2f(x[i].d);
		const float m = quant_h2f(x[i].m);

		for (int j = 0; j < QK4_1 / 2; j++) {
			y[j] = (x[i].qs[j] & 0x0f) * d + m;
			y[j + QK4_1 / 2] = (x[i].qs[j] >> 4) * d + m;
		}
	}
}

void quant_q5_0_to_float(const void *vx, float *y, int64_t nb)
{
	const struct block_q5_0 *x = vx;

	for (int64_t i = 0; i < nb; i++, y += QK5_0) {
		const float d = quant_h2f(x[i].d);
		const uint32_t qh = quant_qh(x[i].qh);

		for (int j = 0; j < QK5_0 / 2; j++) {
			int x0 = (x[i].qs[j] & 0x0f) |
				 (((qh >> j) << 4) & 0x10);
			int x1 = (x[i].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);

			y[j] = (x0 - 16) * d;
			y[j + QK5_0 / 2] = (x1 - 16) * d;
		}
	}
}

void quant_q5_1_to_float(const void *vx, float *y, int64_t nb)
{
	const struct block_q5_1 *x = vx;

	for (int64_t i = 0; i < nb; i++, y += QK5_1) {
		const float d = quant_h2f(x[i].d);
		const float m = quant_h2f(x[i].m);
		const uint32_t qh = quant_qh(x[i].qh);

		for (int j = 0; j < QK5_1 / 2; j++) {
			int x0 = (x[i].qs[j] & 0x0f) |
				 (((qh >> j) << 4) & 0x10);
			int x1 = (x[i].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);

			y[j] = x0 * d + m;
			y[j + QK5_1 / 2] = x1 * d + m;
		}
	}
}

void quant_q8_0_to_float(const void *vx, float *y, int64_t nb)
{
	const struct block_q8_0 *x = vx;

	for (int64_t i = 0; i < nb; i++, y += QK8_0) {
		const float d = quant_h2f(x[i].d);

		for (int j = 0; j < QK8_0; j++)
			y[j] = x[i].qs[j] * d;
	}
}

/* ggml has no dequantize_row_q8_1; this is the same formula as Q8_0. */
void quant_q8_1_to_float(const void *vx, float *y, int64_t nb)
{
	const struct block_q8_1 *x = vx;

	for (int64_t i = 0; i < nb; i++, y += QK8_1) {
		const float d = quant_h2f(x[i].d);

		for (int j = 0; j < QK8_1; j++)
			y[j] = x[i].qs[j] * d;
	}
}

/* ---- from float: weights (quantize_row_*_ref) ----------------------------- */

/* The element of largest magnitude, keeping its sign; the first on ties. */
static float quant_signed_absmax(const float *x, int n)
{
	float amax = 0.0f, max = 0.0f;

	for (int j = 0; j < n; j++) {
		if (amax < fabsf(x[j])) {
			amax = fabsf(x[j]);
			max = x[j];
		}
	}
	return max;
}

static void quant_minmax(const float *x, int n, float *min, float *max)
{
	*min = FLT_MAX;
	*max = -FLT_MAX;
	for (int j = 0; j < n; j++) {
		if (x[j] < *min)
			*min = x[j];
		if (x[j] > *max)
			*max = x[j];
	}
}

/*
 * ggml truncates (int8_t)(v + 8.5f) here, not round-to-nearest; the
 * conversion of a float above 127 to int8_t is undefined in C, so clamp in
 * int first (the results agree for every finite input ggml accepts).
 */
static uint8_t quant_trunc_clamp(float v, int max)
{
	int q = (int)v;

	return (uint8_t)(q < max ? q : max);
}

void quant_q4_0_from_float(const float *x, void *vy, int64_t nb)
{
	struct block_q4_0 *y = vy;

	for (int64_t i = 0; i < nb; i++, x += QK4_0) {
		const float d = quant_signed_absmax(x, QK4_0) / -8;
		const float id = d ? 1.0f / d : 0.0f;

		y[i].d = quant_fp32_to_fp16(d);
		for (int j = 0; j < QK4_0 / 2; j++) {
			uint8_t q0 = quant_trunc_clamp(x[j] * id + 8.5f, 15);
			uint8_t q1 = quant_trunc_clamp(x[j + 16] * id + 8.5f,
						       15);

			y[i].qs[j] = q0 | (q1 << 4);
		}
	}
}

void quant_q4_1_from_float(const float *x, void *vy, int64_t nb)
{
	struct block_q4_1 *y = vy;

	for (int64_t i = 0; i < nb; i++, x += QK4_1) {
		float min, max;

		quant_minmax(x, QK4_1, &min, &max);
		const float d = (max - min) / 15;
		const float id = d ? 1.0f / d : 0.0f;

		y[i].d = quant_fp32_to_fp16(d);
		y[i].m = quant_fp32_to_fp16(min);
		for (int j = 0; j < QK4_1 / 2; j++) {
			uint8_t q0 = quant_trunc_clamp((x[j] - min) * id + 0.5f,
						       15);
			uint8_t q1 = quant_trunc_clamp(
				(x[j + 16] - min) * id + 0.5f, 15);

			y[i].qs[j] = q0 | (q1 << 4);
		}
	}
}

void quant_q5_0_from_float(const float *x, void *vy, int64_t nb)
{
	struct block_q5_0 *y = vy;

	for (int64_t i = 0; i < nb; i++, x += QK5_0) {
		const float d = quant_signed_absmax(x, QK5_0) / -16;
		const float id = d ? 1.0f / d : 0.0f;
		uint32_t qh = 0;

		y[i].d = quant_fp32_to_fp16(d);
		for (int j = 0; j < QK5_0 / 2; j++) {
			uint8_t q0 = quant_trunc_clamp(x[j] * id + 16.5f, 31);
			uint8_t q1 = quant_trunc_clamp(x[j + 16] * id + 16.5f,
						       31);

			y[i].qs[j] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
			qh |= ((q0 & 0x10u) >> 4) << j;
			qh |= ((q1 & 0x10u) >> 4) << (j + 16);
		}
		memcpy(y[i].qh, &qh, sizeof(qh));
	}
}

void quant_q5_1_from_float(const float *x, void *vy, int64_t nb)
{
	struct block_q5_1 *y = vy;

	for (int64_t i = 0; i < nb; i++, x += QK5_1) {
		float min, max;
		uint32_t qh = 0;

		quant_minmax(x, QK5_1, &min, &max);
		const float d = (max - min) / 31;
		const float id = d ? 1.0f / d : 0.0f;

		y[i].d = quant_fp32_to_fp16(d);
		y[i].m = quant_fp32_to_fp16(min);
		for (int j = 0; j < QK5_1 / 2; j++) {
			/* ggml does not clamp here: (max - min) * id <= 31 */
			uint8_t q0 = quant_trunc_clamp((x[j] - min) * id + 0.5f,
						       31);
			uint8_t q1 = quant_trunc_clamp(
				(x[j + 16] - min) * id + 0.5f, 31);

			y[i].qs[j] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
			qh |= ((q0 & 0x10u) >> 4) << j;
			qh |= ((q1 & 0x10u) >> 4) << (j + 16);
		}
		memcpy(y[i].qh, &qh, sizeof(qh));
	}
}

static float quant_absmax(const float *x, int n)
{
	float amax = 0.0f;

	for (int j = 0; j < n; j++) {
		float a = fabsf(x[j]);

		amax = a > amax ? a : amax;
	}
	return amax;
}

/* quantize_row_q8_0_ref: id = 1/d, roundf (ties away from zero). */
void quant_q8_0_from_float_ref(const float *x, void *vy, int64_t nb)
{
	struct block_q8_0 *y = vy;

	for (int64_t i = 0; i < nb; i++, x += QK8_0) {
		const float d = quant_absmax(x, QK8_0) / 127;
		const float id = d ? 1.0f / d : 0.0f;

		y[i].d = quant_fp32_to_fp16(d);
		for (int j = 0; j < QK8_0; j++)
			y[i].qs[j] = (int8_t)roundf(x[j] * id);
	}
}

void quant_q8_1_from_float_ref(const float *x, void *vy, int64_t nb)
{
	struct block_q8_1 *y = vy;

	for (int64_t i = 0; i < nb; i++, x += QK8_1) {
		const float d = quant_absmax(x, QK8_1) / 127;
		const float id = d ? 1.0f / d : 0.0f;
		int sum = 0;

		y[i].d = quant_fp32_to_fp16(d);
		for (int j = 0; j < QK8_1; j++) {
			y[i].qs[j] = (int8_t)roundf(x[j] * id);
			sum += y[i].qs[j];
		}
		y[i].s = quant_fp32_to_fp16(sum * d);
	}
}

/* ---- from float: activations (x86 quantize_row_q8_{0,1}) ------------------ */

/*
 * One block as the AVX code does it: d = max/127 and, separately,
 * id = 127/max (not 1/d: the two differ in the last bit for some max),
 * x * id rounded to nearest even. Returns the sum of the quants.
 */
static int quant_q8_block_x86(const float *x, int8_t *qs, float *d)
{
	const float max = quant_absmax(x, 32);
	const float id = max != 0.0f ? 127.f / max : 0.0f;
	int sum = 0;

	*d = max / 127.f;
	for (int j = 0; j < 32; j++) {
		qs[j] = (int8_t)quant_nearest_int(x[j] * id);
		sum += qs[j];
	}
	return sum;
}

void quant_q8_0_from_float(const float *x, void *vy, int64_t nb)
{
	struct block_q8_0 *y = vy;
	float d;

	for (int64_t i = 0; i < nb; i++, x += QK8_0) {
		quant_q8_block_x86(x, y[i].qs, &d);
		y[i].d = quant_fp32_to_fp16(d);
	}
}

void quant_q8_1_from_float(const float *x, void *vy, int64_t nb)
{
	struct block_q8_1 *y = vy;
	float d;

	for (int64_t i = 0; i < nb; i++, x += QK8_1) {
		int sum = quant_q8_block_x86(x, y[i].qs, &d);

		y[i].d = quant_fp32_to_fp16(d);
		y[i].s = quant_fp32_to_fp16(d * (float)sum);
	}
}
