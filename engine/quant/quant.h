/* SPDX-License-Identifier: MIT */
/*
 * Tensor element types inside the engine: conversion to and from float,
 * quantization of activations and the dot products of a weight row with an
 * activation row, computed as ggml's CPU backend computes them.
 *
 * ggml never multiplies a quantized weight with float activations: the
 * activation row is first quantized to the weight type's "vec_dot type"
 * (Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants, F16
 * for F16, BF16 for BF16, F32 for F32), then an integer (or half) dot
 * product runs block by block. Doing the same is what makes the logits
 * token-exact with llama.cpp (../shared/README.md, section 4).
 *
 * Everything that differs by type is one row of one table. The layout of
 * a type (its name, elements and bytes per block) is io/'s
 * (io_type_info: the GGUF reader needs it first); quant_traits() (traits.c)
 * adds what the engine does with it, as ggml's type_traits[] does: the
 * conversions, the vec_dot type and the dots in scalar C. Two sets of
 * dots sit in it: ggml's scalar order (vec_dot_ref, the portable
 * reference, for tests) and the reference build's order in scalar C
 * (vec_dot, engine/quant/quant_x86.c and dot.c), which a backend's
 * vector kernels reproduce bit for bit. Those vector kernels are the
 * backend's own columns (the CPU's, as ggml's type_traits_cpu[], sit in
 * its folder). There is no switch on a tensor type elsewhere.
 */
#ifndef LLMFS_ENGINE_QUANT_H
#define LLMFS_ENGINE_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../io/io.h"

/*
 * The kernels' shapes. nb counts blocks of the type (elements for the
 * float types, whose block is one element); n counts elements.
 */
typedef void (*quant_to_float_fn)(const void *x, float *y, int64_t nb);
typedef void (*quant_from_float_fn)(const float *x, void *y, int64_t nb);
typedef float (*quant_dot_ref_fn)(int64_t nb, const void *w, const void *a);
typedef float (*quant_dot_fn)(int64_t n, const void *w, const void *a);
/* nr weight rows against nt activation rows at once (a CPU tile kernel). */
typedef void (*quant_tile_fn)(int64_t n, const void *w, size_t row_bytes,
			      int nr, const void *const *a, const uint8_t *qs,
			      int nt, float *out);

/*
 * What the engine does with one tensor type, as ggml's type_traits[] (the
 * layout is io_type_info's). A NULL kernel means there is none: an
 * unknown type has every field 0.
 */
struct quant_type_traits {
	bool weight;	       /* the engine computes with it (13 types) */
	bool kv;	       /* attention runs over a K/V cache of it */
	uint32_t vec_dot_type; /* weights: what activations become first */
	quant_to_float_fn to_float;
	/* activations round as ggml's x86 CPU backend, weights as _ref */
	quant_from_float_fn from_float;
	/* ggml's quantize_row_*_ref (llama-quantize without an imatrix) */
	quant_from_float_fn from_float_ref;
	/* ggml's scalar (_generic) order: the portable reference, for tests */
	quant_dot_ref_fn vec_dot_ref;
	/* the reference build's order in scalar C (any CPU) */
	quant_dot_fn vec_dot;
	/*
	 * llama.cpp's CPU_REPACK gemv order: the types its x86 CPU backend
	 * holds interleaved (q4_0, q4_K, q2_K) have one (engine_tensor.llama_repacked)
	 */
	quant_dot_fn vec_dot_repacked;
	/*
	 * How ggml's one-token flash attention reads a K/V cache of this
	 * type: as halves (V accumulated in F16), as floats, or each row
	 * through the type's dot and to_float.
	 */
	enum quant_kv_elem {
		QUANT_KV_CONVERT,
		QUANT_KV_F16,
		QUANT_KV_F32,
	} kv_elem;
};

/* traits.c's table, and the row of zeros of the types it does not know */
extern const struct quant_type_traits quant_type_table[IO_TYPE_COUNT];
extern const struct quant_type_traits quant_type_unknown;

/*
 * The row of type; for a type the engine does not know, a row of zeros.
 * Inline: the tile and row kernels are looked up per matmul row.
 */
static inline const struct quant_type_traits *quant_traits(uint32_t type)
{
	return type < IO_TYPE_COUNT ? &quant_type_table[type] :
				      &quant_type_unknown;
}

/* Elements and bytes of a block of type; 0 for a type io/ does not know. */
static inline uint32_t quant_blck_size(uint32_t type)
{
	const struct io_type_info *t = io_type_info(type);

	return t ? t->block_elems : 0;
}

static inline uint32_t quant_type_size(uint32_t type)
{
	const struct io_type_info *t = io_type_info(type);

	return t ? t->block_bytes : 0;
}

/* ggml's name of type ("q4_K"), "?" for a type io/ does not know. */
static inline const char *quant_type_name(uint32_t type)
{
	const struct io_type_info *t = io_type_info(type);

	return t ? t->name : "?";
}

/* IEEE half and bfloat16 conversions, rounding to nearest even. */
float quant_fp16_to_fp32(uint16_t h);
uint16_t quant_fp32_to_fp16(float f);
float quant_bf16_to_fp32(uint16_t h);
uint16_t quant_fp32_to_bf16(float f);

/* True for the weight types the engine computes with (13 types). */
int quant_type_supported(uint32_t type);

/* The type activations are converted to before a dot with this weight type. */
uint32_t quant_vec_dot_type(uint32_t type);

/*
 * Convert n floats (n a multiple of the block size) to type: the activation
 * quantizers (Q8_0, Q8_1, Q8_K, F16, BF16, F32 copy) round as ggml's x86
 * CPU backend does; the weight types use ggml's reference quantizers
 * (for writing synthetic models). Scalar C: a backend converts with its
 * own kernels, which give the same bits.
 */
void quant_from_float(uint32_t type, const float *x, void *y, int64_t n);

/*
 * ggml's reference quantizers (quantize_row_*_ref), what llama-quantize
 * writes without an importance matrix: differs from quant_from_float only
 * for Q8_0 and Q8_1 (id = 1/d and roundf, ties away from zero). Every
 * type of quant_type_supported() and Q8_K is implemented; an unknown type
 * writes nothing.
 */
void quant_from_float_ref(uint32_t type, const float *x, void *y, int64_t n);

/* Convert n elements of type (n a multiple of the block size) to floats. */
void quant_to_float(uint32_t type, const void *x, float *y, int64_t n);

/*
 * Dot product of n elements: a weight row w of type and an activation row a
 * of quant_vec_dot_type(type), as made by quant_from_float. Integer sums
 * per block and float scaling in the order of ggml's scalar (_generic)
 * kernels; NAN for a type that quant_type_supported() rejects.
 */
float quant_vec_dot(uint32_t type, int64_t n, const void *w, const void *a);

/*
 * The same dot product summed in the order of ggml's AVX2 kernels
 * (ggml-cpu's arch/x86/quants.c), as libggml-cpu-zen4.so runs them: eight
 * float lanes with fused multiply-adds, then ggml's horizontal sum. Bit for
 * bit what the golden build computes, for the ten block types; F32, F16 and
 * BF16 fall back to quant_vec_dot (their zen4 order is the vec_dot
 * column, dot.c). Scalar C, slower than quant_vec_dot.
 */
float quant_vec_dot_x86(uint32_t type, int64_t n, const void *w, const void *a);

#endif
