/* SPDX-License-Identifier: MIT */
/*
 * quant.h's dispatchers, the IEEE half / bfloat16 conversions and the three
 * float types (F32, F16, BF16). The block types live in quant_legacy.c and
 * quant_k.c; Documentation/quantization.md says which ggml function each
 * kernel follows and what was measured against libggml.
 */
#include <math.h>
#include <string.h>

#include "quant_internal.h"

/* ---- half and bfloat16 -------------------------------------------------- */

float quant_fp16_to_fp32(uint16_t h)
{
	return quant_h2f(h);
}

/*
 * Round to nearest even as the F16C instruction vcvtps2ph does with
 * imm8 = 0 (what ggml's CPU backend uses on x86): overflow goes to inf,
 * NaNs stay NaN with the quiet bit set and the top of the payload kept.
 */
uint16_t quant_fp32_to_fp16(float f)
{
	union { float f; uint32_t u; } v = { .f = f };
	uint16_t sign = (uint16_t)((v.u >> 16) & 0x8000);
	uint32_t a = v.u & 0x7fffffff;
	union { float f; uint32_t u; } s;

	if (a > 0x7f800000)
		return sign | 0x7e00 | (uint16_t)((a >> 13) & 0x3ff);
	if (a >= 0x477ff000)  /* >= 65520 rounds past 65504 */
		return sign | 0x7c00;
	if (a < 0x38800000) {
		/*
		 * Below 2^-14 the half is a multiple of 2^-24: scale up
		 * (exact) and round to an integer with the 1.5 * 2^23 trick,
		 * ties to even; 1024 becomes the smallest normal, as it should.
		 */
		s.u = a;
		s.f = s.f * 0x1p24f + 12582912.f;
		return sign | (uint16_t)((s.u & 0x007fffff) - 0x00400000);
	}
	a += 0x0fff + ((a >> 13) & 1);
	return sign | (uint16_t)((a - (112u << 23)) >> 13);
}

float quant_bf16_to_fp32(uint16_t h)
{
	union { uint32_t u; float f; } v = { .u = (uint32_t)h << 16 };

	return v.f;
}

/* ggml_compute_fp32_to_bf16: ties to even, NaNs made quiet. */
uint16_t quant_fp32_to_bf16(float f)
{
	union { float f; uint32_t u; } v = { .f = f };

	if ((v.u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((v.u >> 16) | 64);
	return (uint16_t)((v.u + (0x7fff + ((v.u >> 16) & 1))) >> 16);
}

/* ---- float types -------------------------------------------------------- */

static void quant_f16_to_float(const uint16_t *x, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = quant_h2f(x[i]);
}

static void quant_f16_from_float(const float *x, uint16_t *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = quant_fp32_to_fp16(x[i]);
}

static void quant_bf16_to_float(const uint16_t *x, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = quant_bf16_to_fp32(x[i]);
}

static void quant_bf16_from_float(const float *x, uint16_t *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = quant_fp32_to_bf16(x[i]);
}

/*
 * The float dots follow ggml's scalar path (vec.cpp without GGML_SIMD):
 * each product rounded to float, then summed in double (ggml_float).
 */
static float quant_f32_dot(int64_t n, const float *x, const float *y)
{
	double sum = 0.0;

	for (int64_t i = 0; i < n; i++)
		sum += (double)(x[i] * y[i]);
	return (float)sum;
}

static float quant_f16_dot(int64_t n, const uint16_t *x, const uint16_t *y)
{
	double sum = 0.0;

	for (int64_t i = 0; i < n; i++)
		sum += (double)(quant_h2f(x[i]) * quant_h2f(y[i]));
	return (float)sum;
}

static float quant_bf16_dot(int64_t n, const uint16_t *x, const uint16_t *y)
{
	double sum = 0.0;

	for (int64_t i = 0; i < n; i++)
		sum += (double)(quant_bf16_to_fp32(x[i]) *
				quant_bf16_to_fp32(y[i]));
	return (float)sum;
}

/* ---- dispatch ------------------------------------------------------------ */

int quant_type_supported(uint32_t type)
{
	switch (type) {
	case IO_TYPE_F32:
	case IO_TYPE_F16:
	case IO_TYPE_BF16:
	case IO_TYPE_Q4_0:
	case IO_TYPE_Q4_1:
	case IO_TYPE_Q5_0:
	case IO_TYPE_Q5_1:
	case IO_TYPE_Q8_0:
	case IO_TYPE_Q2_K:
	case IO_TYPE_Q3_K:
	case IO_TYPE_Q4_K:
	case IO_TYPE_Q5_K:
	case IO_TYPE_Q6_K:
		return 1;
	default:
		return 0;
	}
}

/* ggml-cpu.c, type_traits_cpu[].vec_dot_type */
uint32_t quant_vec_dot_type(uint32_t type)
{
	switch (type) {
	case IO_TYPE_Q4_0:
	case IO_TYPE_Q5_0:
	case IO_TYPE_Q8_0:
		return IO_TYPE_Q8_0;
	case IO_TYPE_Q4_1:
	case IO_TYPE_Q5_1:
		return IO_TYPE_Q8_1;
	case IO_TYPE_Q2_K:
	case IO_TYPE_Q3_K:
	case IO_TYPE_Q4_K:
	case IO_TYPE_Q5_K:
	case IO_TYPE_Q6_K:
		return IO_TYPE_Q8_K;
	case IO_TYPE_F16:
		return IO_TYPE_F16;
	case IO_TYPE_BF16:
		return IO_TYPE_BF16;
	default:
		return IO_TYPE_F32;
	}
}

static int quant_block_elems(uint32_t type)
{
	switch (type) {
	case IO_TYPE_F32:
	case IO_TYPE_F16:
	case IO_TYPE_BF16:
		return 1;
	case IO_TYPE_Q2_K:
	case IO_TYPE_Q3_K:
	case IO_TYPE_Q4_K:
	case IO_TYPE_Q5_K:
	case IO_TYPE_Q6_K:
	case IO_TYPE_Q8_K:
		return QK_K;
	default:
		return 32;
	}
}

void quant_from_float(uint32_t type, const float *x, void *y, int64_t n)
{
	int64_t nb = n / quant_block_elems(type);

	switch (type) {
	case IO_TYPE_F32: memmove(y, x, (size_t)n * sizeof(float)); break;
	case IO_TYPE_F16: quant_f16_from_float(x, y, n); break;
	case IO_TYPE_BF16: quant_bf16_from_float(x, y, n); break;
	case IO_TYPE_Q4_0: quant_q4_0_from_float(x, y, nb); break;
	case IO_TYPE_Q4_1: quant_q4_1_from_float(x, y, nb); break;
	case IO_TYPE_Q5_0: quant_q5_0_from_float(x, y, nb); break;
	case IO_TYPE_Q5_1: quant_q5_1_from_float(x, y, nb); break;
	case IO_TYPE_Q8_0: quant_q8_0_from_float(x, y, nb); break;
	case IO_TYPE_Q8_1: quant_q8_1_from_float(x, y, nb); break;
	case IO_TYPE_Q2_K: quant_q2_K_from_float(x, y, nb); break;
	case IO_TYPE_Q3_K: quant_q3_K_from_float(x, y, nb); break;
	case IO_TYPE_Q4_K: quant_q4_K_from_float(x, y, nb); break;
	case IO_TYPE_Q5_K: quant_q5_K_from_float(x, y, nb); break;
	case IO_TYPE_Q6_K: quant_q6_K_from_float(x, y, nb); break;
	case IO_TYPE_Q8_K: quant_q8_K_from_float(x, y, nb); break;
	default: break;
	}
}

void quant_from_float_ref(uint32_t type, const float *x, void *y, int64_t n)
{
	int64_t nb = n / quant_block_elems(type);

	switch (type) {
	case IO_TYPE_Q8_0: quant_q8_0_from_float_ref(x, y, nb); break;
	case IO_TYPE_Q8_1: quant_q8_1_from_float_ref(x, y, nb); break;
	default: quant_from_float(type, x, y, n); break;
	}
}

void quant_to_float(uint32_t type, const void *x, float *y, int64_t n)
{
	int64_t nb = n / quant_block_elems(type);

	switch (type) {
	case IO_TYPE_F32: memmove(y, x, (size_t)n * sizeof(float)); break;
	case IO_TYPE_F16: quant_f16_to_float(x, y, n); break;
	case IO_TYPE_BF16: quant_bf16_to_float(x, y, n); break;
	case IO_TYPE_Q4_0: quant_q4_0_to_float(x, y, nb); break;
	case IO_TYPE_Q4_1: quant_q4_1_to_float(x, y, nb); break;
	case IO_TYPE_Q5_0: quant_q5_0_to_float(x, y, nb); break;
	case IO_TYPE_Q5_1: quant_q5_1_to_float(x, y, nb); break;
	case IO_TYPE_Q8_0: quant_q8_0_to_float(x, y, nb); break;
	case IO_TYPE_Q8_1: quant_q8_1_to_float(x, y, nb); break;
	case IO_TYPE_Q2_K: quant_q2_K_to_float(x, y, nb); break;
	case IO_TYPE_Q3_K: quant_q3_K_to_float(x, y, nb); break;
	case IO_TYPE_Q4_K: quant_q4_K_to_float(x, y, nb); break;
	case IO_TYPE_Q5_K: quant_q5_K_to_float(x, y, nb); break;
	case IO_TYPE_Q6_K: quant_q6_K_to_float(x, y, nb); break;
	case IO_TYPE_Q8_K: quant_q8_K_to_float(x, y, nb); break;
	default: break;
	}
}

float quant_vec_dot(uint32_t type, int64_t n, const void *w, const void *a)
{
	int64_t nb = n / quant_block_elems(type);

	switch (type) {
	case IO_TYPE_F32: return quant_f32_dot(n, w, a);
	case IO_TYPE_F16: return quant_f16_dot(n, w, a);
	case IO_TYPE_BF16: return quant_bf16_dot(n, w, a);
	case IO_TYPE_Q4_0: return quant_q4_0_dot(nb, w, a);
	case IO_TYPE_Q4_1: return quant_q4_1_dot(nb, w, a);
	case IO_TYPE_Q5_0: return quant_q5_0_dot(nb, w, a);
	case IO_TYPE_Q5_1: return quant_q5_1_dot(nb, w, a);
	case IO_TYPE_Q8_0: return quant_q8_0_dot(nb, w, a);
	case IO_TYPE_Q2_K: return quant_q2_K_dot(nb, w, a);
	case IO_TYPE_Q3_K: return quant_q3_K_dot(nb, w, a);
	case IO_TYPE_Q4_K: return quant_q4_K_dot(nb, w, a);
	case IO_TYPE_Q5_K: return quant_q5_K_dot(nb, w, a);
	case IO_TYPE_Q6_K: return quant_q6_K_dot(nb, w, a);
	default: return NAN;
	}
}
