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
 * This is the scalar reference; SIMD variants come later and are tested
 * against it.
 */
#ifndef LLMFS_ENGINE_QUANT_H
#define LLMFS_ENGINE_QUANT_H

#include <stdint.h>

#include "../../io/io.h"

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
 * (for writing synthetic models).
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
 * (ggml-cpu/arch/x86/quants.c), as libggml-cpu-zen4.so runs them: eight
 * float lanes with fused multiply-adds, then ggml's horizontal sum. Bit for
 * bit what the golden build computes, for the ten block types; F32, F16 and
 * BF16 fall back to quant_vec_dot (engine/ops.c has their zen4 order).
 * Scalar C, slower than quant_vec_dot.
 */
float quant_vec_dot_x86(uint32_t type, int64_t n, const void *w,
			const void *a);

#endif
