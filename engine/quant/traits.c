// SPDX-License-Identifier: MIT
/*
 * The engine's columns of the one table of tensor types (quant.h, struct
 * quant_type_traits): what ggml keeps in type_traits[] (ggml.c), next to
 * the layout io/types.c holds. Every dispatch on a tensor type reads a
 * row here or a backend's own columns of it (the CPU's vector kernels);
 * adding a type is adding a row (Documentation/engine.md, "How to add a
 * tensor type").
 *
 * The vec_dot_type column is ggml-cpu.c's; the kernels are named after
 * the ggml code they follow where they are defined.
 */
#include "quant_internal.h"

const struct quant_type_traits quant_type_table[IO_TYPE_COUNT] = {
	[IO_TYPE_F32] = {
		.weight = true, .kv = true, .vec_dot_type = IO_TYPE_F32,
		.kv_elem = QUANT_KV_F32,
		.to_float = quant_f32_to_float,
		.from_float = quant_f32_from_float,
		.from_float_ref = quant_f32_from_float,
		.vec_dot_ref = quant_f32_dot_ref,
		.vec_dot = dot_f32_c,
	},
	[IO_TYPE_F16] = {
		.weight = true, .kv = true, .vec_dot_type = IO_TYPE_F16,
		.kv_elem = QUANT_KV_F16,
		.to_float = quant_f16_to_float,
		.from_float = quant_f16_from_float,
		.from_float_ref = quant_f16_from_float,
		.vec_dot_ref = quant_f16_dot_ref,
		.vec_dot = dot_f16_c,
	},
	[IO_TYPE_BF16] = {
		.weight = true, .kv = true, .vec_dot_type = IO_TYPE_BF16,
		.to_float = quant_bf16_to_float,
		.from_float = quant_bf16_from_float,
		.from_float_ref = quant_bf16_from_float,
		.vec_dot_ref = quant_bf16_dot_ref,
		.vec_dot = dot_bf16_c,
	},
	[IO_TYPE_Q4_0] = {
		.weight = true, .kv = true, .vec_dot_type = IO_TYPE_Q8_0,
		.to_float = quant_q4_0_to_float,
		.from_float = quant_q4_0_from_float,
		.from_float_ref = quant_q4_0_from_float,
		.vec_dot_ref = quant_q4_0_dot_ref,
		.vec_dot = quant_q4_0_dot_x86,
		.vec_dot_repacked = dot_q4_0_repacked_c,
	},
	[IO_TYPE_Q4_1] = {
		.weight = true, .kv = true, .vec_dot_type = IO_TYPE_Q8_1,
		.to_float = quant_q4_1_to_float,
		.from_float = quant_q4_1_from_float,
		.from_float_ref = quant_q4_1_from_float,
		.vec_dot_ref = quant_q4_1_dot_ref,
		.vec_dot = quant_q4_1_dot_x86,
	},
	[IO_TYPE_Q5_0] = {
		.weight = true, .kv = true, .vec_dot_type = IO_TYPE_Q8_0,
		.to_float = quant_q5_0_to_float,
		.from_float = quant_q5_0_from_float,
		.from_float_ref = quant_q5_0_from_float,
		.vec_dot_ref = quant_q5_0_dot_ref,
		.vec_dot = quant_q5_0_dot_x86,
	},
	[IO_TYPE_Q5_1] = {
		.weight = true, .kv = true, .vec_dot_type = IO_TYPE_Q8_1,
		.to_float = quant_q5_1_to_float,
		.from_float = quant_q5_1_from_float,
		.from_float_ref = quant_q5_1_from_float,
		.vec_dot_ref = quant_q5_1_dot_ref,
		.vec_dot = quant_q5_1_dot_x86,
	},
	[IO_TYPE_Q8_0] = {
		.weight = true, .kv = true, .vec_dot_type = IO_TYPE_Q8_0,
		.to_float = quant_q8_0_to_float,
		.from_float = quant_q8_0_from_float,
		.from_float_ref = quant_q8_0_from_float_ref,
		.vec_dot_ref = quant_q8_0_dot_ref,
		.vec_dot = quant_q8_0_dot_x86,
	},
	/* Q8_1 and Q8_K are activation types only: no dot of their own */
	[IO_TYPE_Q8_1] = {
		.to_float = quant_q8_1_to_float,
		.from_float = quant_q8_1_from_float,
		.from_float_ref = quant_q8_1_from_float_ref,
	},
	[IO_TYPE_Q2_K] = {
		.weight = true, .vec_dot_type = IO_TYPE_Q8_K,
		.to_float = quant_q2_K_to_float,
		.from_float = quant_q2_K_from_float,
		.from_float_ref = quant_q2_K_from_float,
		.vec_dot_ref = quant_q2_K_dot_ref,
		.vec_dot = quant_q2_K_dot_x86,
		.vec_dot_repacked = dot_q2_K_repacked_c,
	},
	[IO_TYPE_Q3_K] = {
		.weight = true, .vec_dot_type = IO_TYPE_Q8_K,
		.to_float = quant_q3_K_to_float,
		.from_float = quant_q3_K_from_float,
		.from_float_ref = quant_q3_K_from_float,
		.vec_dot_ref = quant_q3_K_dot_ref,
		.vec_dot = quant_q3_K_dot_x86,
	},
	[IO_TYPE_Q4_K] = {
		.weight = true, .vec_dot_type = IO_TYPE_Q8_K,
		.to_float = quant_q4_K_to_float,
		.from_float = quant_q4_K_from_float,
		.from_float_ref = quant_q4_K_from_float,
		.vec_dot_ref = quant_q4_K_dot_ref,
		.vec_dot = quant_q4_K_dot_x86,
		.vec_dot_repacked = dot_q4_K_repacked_c,
	},
	[IO_TYPE_Q5_K] = {
		.weight = true, .vec_dot_type = IO_TYPE_Q8_K,
		.to_float = quant_q5_K_to_float,
		.from_float = quant_q5_K_from_float,
		.from_float_ref = quant_q5_K_from_float,
		.vec_dot_ref = quant_q5_K_dot_ref,
		.vec_dot = quant_q5_K_dot_x86,
	},
	[IO_TYPE_Q6_K] = {
		.weight = true, .vec_dot_type = IO_TYPE_Q8_K,
		.to_float = quant_q6_K_to_float,
		.from_float = quant_q6_K_from_float,
		.from_float_ref = quant_q6_K_from_float,
		.vec_dot_ref = quant_q6_K_dot_ref,
		.vec_dot = quant_q6_K_dot_x86,
	},
	[IO_TYPE_Q8_K] = {
		.to_float = quant_q8_K_to_float,
		.from_float = quant_q8_K_from_float,
		.from_float_ref = quant_q8_K_from_float,
	},
};

const struct quant_type_traits quant_type_unknown;
