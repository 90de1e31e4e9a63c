/* SPDX-License-Identifier: MIT */
/*
 * quant.h's dispatchers (each one row of quant_traits(), traits.c), the
 * IEEE half / bfloat16 conversions and the three float types (F32, F16,
 * BF16). The block types live in quant_legacy.c and quant_k.c;
 * Documentation/quantization.md says which ggml function each kernel
 * follows and what was measured against libggml.
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
	union {
		float f;
		uint32_t u;
	} v = { .f = f };
	uint16_t sign = (uint16_t)((v.u >> 16) & 0x8000);
	uint32_t a = v.u & 0x7fffffff;
	union {
		float f;
		uint32_t u;
	} s;

	if (a > 0x7f800000)
		return sign | 0x7e00 | (uint16_t)((a >> 13) & 0x3ff);
	if (a >= 0x477ff000) /* >= 65520 rounds past 65504 */
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
	union {
		uint32_t u;
		float f;
	} v = { .u = (uint32_t)h << 16 };

	return v.f;
}

/* ggml_compute_fp32_to_bf16: ties to even, NaNs made quiet. */
uint16_t quant_fp32_to_bf16(float f)
{
	union {
		float f;
		uint32_t u;
	} v = { .f = f };

	if ((v.u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((v.u >> 16) | 64);
	return (uint16_t)((v.u + (0x7fff + ((v.u >> 16) & 1))) >> 16);
}

/* ---- float types (a block is one element: nb == n) --------------------- */

void quant_f32_to_float(const void *x, float *y, int64_t n)
{
	memmove(y, x, (size_t)n * sizeof(float));
}

void quant_f32_from_float(const float *x, void *y, int64_t n)
{
	memmove(y, x, (size_t)n * sizeof(float));
}

void quant_f16_to_float(const void *vx, float *y, int64_t n)
{
	const uint16_t *x = vx;

	for (int64_t i = 0; i < n; i++)
		y[i] = quant_h2f(x[i]);
}

void quant_f16_from_float(const float *x, void *vy, int64_t n)
{
	uint16_t *y = vy;

	for (int64_t i = 0; i < n; i++)
		y[i] = quant_fp32_to_fp16(x[i]);
}

void quant_bf16_to_float(const void *vx, float *y, int64_t n)
{
	const uint16_t *x = vx;

	for (int64_t i = 0; i < n; i++)
		y[i] = quant_bf16_to_fp32(x[i]);
}

void quant_bf16_from_float(const float *x, void *vy, int64_t n)
{
	uint16_t *y = vy;

	for (int64_t i = 0; i < n; i++)
		y[i] = quant_fp32_to_bf16(x[i]);
}

/* ---- dispatch: one row of quant_traits() ------------------------------- */

int quant_type_supported(uint32_t type)
{
	return quant_traits(type)->weight;
}

/* ggml-cpu.c, type_traits_cpu[].vec_dot_type; F32 for an unknown type */
uint32_t quant_vec_dot_type(uint32_t type)
{
	const struct quant_type_traits *t = quant_traits(type);

	return t->weight ? t->vec_dot_type : IO_TYPE_F32;
}

void quant_from_float(uint32_t type, const float *x, void *y, int64_t n)
{
	const struct quant_type_traits *t = quant_traits(type);

	if (t->from_float)
		t->from_float(x, y, n / quant_blck_size(type));
}

void quant_from_float_ref(uint32_t type, const float *x, void *y, int64_t n)
{
	const struct quant_type_traits *t = quant_traits(type);

	if (t->from_float_ref)
		t->from_float_ref(x, y, n / quant_blck_size(type));
}

void quant_to_float(uint32_t type, const void *x, float *y, int64_t n)
{
	const struct quant_type_traits *t = quant_traits(type);

	if (t->to_float)
		t->to_float(x, y, n / quant_blck_size(type));
}

float quant_vec_dot(uint32_t type, int64_t n, const void *w, const void *a)
{
	const struct quant_type_traits *t = quant_traits(type);

	if (!t->weight || !t->vec_dot_ref)
		return NAN;
	return t->vec_dot_ref(n / quant_blck_size(type), w, a);
}

/*
 * The block types' scalar emulation of the zen4 kernels; the float types
 * keep ggml's scalar order here (their zen4 order is dot.c's dot_row).
 */
float quant_vec_dot_x86(uint32_t type, int64_t n, const void *w, const void *a)
{
	const struct quant_type_traits *t = quant_traits(type);

	if (quant_blck_size(type) > 1 && t->weight && t->vec_dot)
		return t->vec_dot(n, w, a);
	return quant_vec_dot(type, n, w, a);
}
