/* SPDX-License-Identifier: MIT */
/*
 * Block layouts of ggml's quantized types (ggml/src/ggml-common.h), byte
 * for byte, and the per-type kernels that traits.c puts in quant.h's
 * table. Only engine/quant/ and the backends' kernels include this;
 * everything else goes through quant.h.
 *
 * A "half" is an IEEE binary16 stored as its bits. Every struct here has
 * exactly ggml's size (checked below) and no padding, so a row of blocks
 * can be read straight from a GGUF tensor.
 */
#ifndef LLMFS_ENGINE_QUANT_INTERNAL_H
#define LLMFS_ENGINE_QUANT_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "quant.h"

/*
 * Keep a*b+c as two roundings, as ggml's C is compiled (GCC in C11 mode
 * does not contract; clang does unless told): bit-exactness depends on it.
 */
#ifdef __clang__
#pragma clang fp contract(off)
#endif

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define K_SCALE_SIZE 12

struct block_q4_0 {
	uint16_t d;	       /* scale (half) */
	uint8_t qs[QK4_0 / 2]; /* nibbles: element j low, j + 16 high */
};

struct block_q4_1 {
	uint16_t d; /* scale (half) */
	uint16_t m; /* minimum (half) */
	uint8_t qs[QK4_1 / 2];
};

struct block_q5_0 {
	uint16_t d;
	uint8_t qh[4]; /* fifth bits, element j at bit j */
	uint8_t qs[QK5_0 / 2];
};

struct block_q5_1 {
	uint16_t d;
	uint16_t m;
	uint8_t qh[4];
	uint8_t qs[QK5_1 / 2];
};

struct block_q8_0 {
	uint16_t d;
	int8_t qs[QK8_0];
};

struct block_q8_1 {
	uint16_t d;
	uint16_t s; /* d * sum(qs) (half) */
	int8_t qs[QK8_1];
};

struct block_q2_K {
	uint8_t scales[QK_K / 16]; /* low nibble scale, high nibble min */
	uint8_t qs[QK_K / 4];
	uint16_t d;    /* super-block scale of the scales */
	uint16_t dmin; /* super-block scale of the mins */
};

struct block_q3_K {
	uint8_t hmask[QK_K / 8]; /* high bits */
	uint8_t qs[QK_K / 4];	 /* low 2 bits */
	uint8_t scales[12];	 /* 16 scales of 6 bits */
	uint16_t d;
};

struct block_q4_K {
	uint16_t d;
	uint16_t dmin;
	uint8_t scales[K_SCALE_SIZE]; /* 8 scales + 8 mins of 6 bits */
	uint8_t qs[QK_K / 2];
};

struct block_q5_K {
	uint16_t d;
	uint16_t dmin;
	uint8_t scales[K_SCALE_SIZE];
	uint8_t qh[QK_K / 8];
	uint8_t qs[QK_K / 2];
};

struct block_q6_K {
	uint8_t ql[QK_K / 2]; /* low 4 bits */
	uint8_t qh[QK_K / 4]; /* high 2 bits */
	int8_t scales[QK_K / 16];
	uint16_t d;
};

struct block_q8_K {
	float d; /* a plain float, not a half */
	int8_t qs[QK_K];
	int16_t bsums[QK_K / 16]; /* sums of qs in groups of 16 */
};

_Static_assert(sizeof(struct block_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(struct block_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(struct block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(struct block_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(struct block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(struct block_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(struct block_q2_K) == 84, "q2_K layout");
_Static_assert(sizeof(struct block_q3_K) == 110, "q3_K layout");
_Static_assert(sizeof(struct block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(struct block_q5_K) == 176, "q5_K layout");
_Static_assert(sizeof(struct block_q6_K) == 210, "q6_K layout");
_Static_assert(sizeof(struct block_q8_K) == 292, "q8_K layout");

/*
 * Round to the nearest integer, ties to even, for |x| < 2^22: ggml's
 * nearest_int(), and what _mm256_round_ps(_MM_ROUND_NEAREST) gives.
 */
static inline int quant_nearest_int(float x)
{
	union {
		float f;
		int32_t i;
	} u = { .f = x + 12582912.f };

	return (u.i & 0x007fffff) - 0x00400000;
}

/*
 * quant_fp16_to_fp32 without a call or a branch, for the inner loops (the
 * compiler vectorizes it): exponent and mantissa moved into place and
 * rescaled by 2^-112 in one exact multiply, subnormals through the
 * 0.5 + m * 2^-24 magic; a signalling NaN comes out quiet, as with F16C.
 */
static inline float quant_h2f(uint16_t h)
{
	union {
		uint32_t u;
		float f;
	} w, norm, sub;
	uint32_t two_w;

	w.u = (uint32_t)h << 16;
	two_w = w.u + w.u;
	norm.u = (two_w >> 4) + (0xe0u << 23);
	norm.f *= 0x1p-112f;
	sub.u = (two_w >> 17) | (126u << 23);
	sub.f -= 0.5f;
	w.u = (w.u & 0x80000000u) | (two_w < (1u << 27) ? sub.u : norm.u);
	return w.f;
}

/* The fifth bits of a Q5 block, element j at bit j. */
static inline uint32_t quant_qh(const uint8_t qh[4])
{
	uint32_t v;

	memcpy(&v, qh, sizeof(v));
	return v;
}

/* Legacy 32-element blocks (quant_legacy.c). */
void quant_q4_0_to_float(const void *x, float *y, int64_t nb);
void quant_q4_1_to_float(const void *x, float *y, int64_t nb);
void quant_q5_0_to_float(const void *x, float *y, int64_t nb);
void quant_q5_1_to_float(const void *x, float *y, int64_t nb);
void quant_q8_0_to_float(const void *x, float *y, int64_t nb);
void quant_q8_1_to_float(const void *x, float *y, int64_t nb);
void quant_q4_0_from_float(const float *x, void *y, int64_t nb);
void quant_q4_1_from_float(const float *x, void *y, int64_t nb);
void quant_q5_0_from_float(const float *x, void *y, int64_t nb);
void quant_q5_1_from_float(const float *x, void *y, int64_t nb);
void quant_q8_0_from_float(const float *x, void *y, int64_t nb);
void quant_q8_0_from_float_ref(const float *x, void *y, int64_t nb);
void quant_q8_1_from_float(const float *x, void *y, int64_t nb);
void quant_q8_1_from_float_ref(const float *x, void *y, int64_t nb);
float quant_q4_0_dot_ref(int64_t nb, const void *w, const void *a);
float quant_q4_1_dot_ref(int64_t nb, const void *w, const void *a);
float quant_q5_0_dot_ref(int64_t nb, const void *w, const void *a);
float quant_q5_1_dot_ref(int64_t nb, const void *w, const void *a);
float quant_q8_0_dot_ref(int64_t nb, const void *w, const void *a);

/* The float types, one element a block (quant.c). */
void quant_f32_to_float(const void *x, float *y, int64_t n);
void quant_f16_to_float(const void *x, float *y, int64_t n);
void quant_bf16_to_float(const void *x, float *y, int64_t n);
void quant_f32_from_float(const float *x, void *y, int64_t n);
void quant_f16_from_float(const float *x, void *y, int64_t n);
void quant_bf16_from_float(const float *x, void *y, int64_t n);
float quant_f32_dot_ref(int64_t n, const void *w, const void *a);
float quant_f16_dot_ref(int64_t n, const void *w, const void *a);
float quant_bf16_dot_ref(int64_t n, const void *w, const void *a);

/* The reference build's order in scalar C, n elements (quant_x86.c). */
float quant_q4_0_dot_x86(int64_t n, const void *w, const void *a);
float quant_q4_1_dot_x86(int64_t n, const void *w, const void *a);
float quant_q5_0_dot_x86(int64_t n, const void *w, const void *a);
float quant_q5_1_dot_x86(int64_t n, const void *w, const void *a);
float quant_q8_0_dot_x86(int64_t n, const void *w, const void *a);
float quant_q2_K_dot_x86(int64_t n, const void *w, const void *a);
float quant_q3_K_dot_x86(int64_t n, const void *w, const void *a);
float quant_q4_K_dot_x86(int64_t n, const void *w, const void *a);
float quant_q5_K_dot_x86(int64_t n, const void *w, const void *a);
float quant_q6_K_dot_x86(int64_t n, const void *w, const void *a);

/*
 * dot.c's float dots (zen4 order) with main, the vector part of the sum
 * (np, a multiple of 64, first elements), or NULL for the scalar
 * emulation of it; _c are the scalar ones as the type table holds them,
 * with the repacked gemvs.
 */
typedef float (*dot_f32_main_fn)(int64_t np, const float *x, const float *y);
typedef float (*dot_f16_main_fn)(int64_t np, const uint16_t *x,
				 const uint16_t *y);
typedef void (*dot_bf16_main_fn)(int64_t np, const uint16_t *x,
				 const uint16_t *y, float c[2]);
float dot_f32_with(int64_t n, const float *x, const float *y,
		   dot_f32_main_fn main);
float dot_f16_with(int64_t n, const uint16_t *x, const uint16_t *y,
		   dot_f16_main_fn main);
float dot_bf16_with(int64_t n, const uint16_t *x, const uint16_t *y,
		    dot_bf16_main_fn main);
/* _mm512_reduce_add_ps of 16 floats, in GCC's order. */
float dot_hsum16(const float *v);
float dot_f32_c(int64_t n, const void *w, const void *a);
float dot_f16_c(int64_t n, const void *w, const void *a);
float dot_bf16_c(int64_t n, const void *w, const void *a);
float dot_q4_0_repacked_c(int64_t n, const void *w, const void *a);
float dot_q4_K_repacked_c(int64_t n, const void *w, const void *a);
float dot_q2_K_repacked_c(int64_t n, const void *w, const void *a);

/* K-quants, 256-element super-blocks (quant_k.c, quant_k_search.c). */
void quant_k_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m);
void quant_q3_K_scales(const uint8_t in[12], int8_t out[16]);
void quant_q2_K_to_float(const void *x, float *y, int64_t nb);
void quant_q3_K_to_float(const void *x, float *y, int64_t nb);
void quant_q4_K_to_float(const void *x, float *y, int64_t nb);
void quant_q5_K_to_float(const void *x, float *y, int64_t nb);
void quant_q6_K_to_float(const void *x, float *y, int64_t nb);
void quant_q8_K_to_float(const void *x, float *y, int64_t nb);
void quant_q2_K_from_float(const float *x, void *y, int64_t nb);
void quant_q3_K_from_float(const float *x, void *y, int64_t nb);
void quant_q4_K_from_float(const float *x, void *y, int64_t nb);
void quant_q5_K_from_float(const float *x, void *y, int64_t nb);
void quant_q6_K_from_float(const float *x, void *y, int64_t nb);
void quant_q8_K_from_float(const float *x, void *y, int64_t nb);
float quant_q2_K_dot_ref(int64_t nb, const void *w, const void *a);
float quant_q3_K_dot_ref(int64_t nb, const void *w, const void *a);
float quant_q4_K_dot_ref(int64_t nb, const void *w, const void *a);
float quant_q5_K_dot_ref(int64_t nb, const void *w, const void *a);
float quant_q6_K_dot_ref(int64_t nb, const void *w, const void *a);

#endif
