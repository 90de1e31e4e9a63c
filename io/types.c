/* SPDX-License-Identifier: MIT */
/*
 * ggml's tensor element types as GGUF files number them: the block layout
 * of each, from the block structs of ggml/src/ggml-common.h (the sizes
 * their static_asserts state). A type that is missing here (the IQ and
 * ternary families, MXFP4) reads as unknown, so a file using it is refused
 * with a message instead of being misread.
 */
#include <errno.h>

#include "io.h"

#define QK_K 256 /* elements per K-quant super-block */

static const struct io_type_info io_types[IO_TYPE_COUNT] = {
	[IO_TYPE_F32] = { "f32", 1, 4 },
	[IO_TYPE_F16] = { "f16", 1, 2 },
	/* half d, 32 nibbles */
	[IO_TYPE_Q4_0] = { "q4_0", 32, 2 + 16 },
	/* half d, half m, 32 nibbles */
	[IO_TYPE_Q4_1] = { "q4_1", 32, 2 + 2 + 16 },
	/* half d, 32 high bits, 32 nibbles */
	[IO_TYPE_Q5_0] = { "q5_0", 32, 2 + 4 + 16 },
	[IO_TYPE_Q5_1] = { "q5_1", 32, 2 + 2 + 4 + 16 },
	/* half d, 32 int8 */
	[IO_TYPE_Q8_0] = { "q8_0", 32, 2 + 32 },
	/* half d, half s, 32 int8 */
	[IO_TYPE_Q8_1] = { "q8_1", 32, 2 + 2 + 32 },
	/* scales QK_K/16, qs QK_K/4, half d, half dmin */
	[IO_TYPE_Q2_K] = { "q2_K", QK_K, QK_K / 16 + QK_K / 4 + 2 + 2 },
	/* hmask QK_K/8, qs QK_K/4, 12 scale bytes, half d */
	[IO_TYPE_Q3_K] = { "q3_K", QK_K, QK_K / 8 + QK_K / 4 + 12 + 2 },
	/* half d, half dmin, 12 scale bytes, qs QK_K/2 */
	[IO_TYPE_Q4_K] = { "q4_K", QK_K, 2 + 2 + 12 + QK_K / 2 },
	/* as q4_K plus qh QK_K/8 */
	[IO_TYPE_Q5_K] = { "q5_K", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2 },
	/* ql QK_K/2, qh QK_K/4, int8 scales QK_K/16, half d */
	[IO_TYPE_Q6_K] = { "q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2 },
	/* float d, QK_K int8, QK_K/16 int16 block sums */
	[IO_TYPE_Q8_K] = { "q8_K", QK_K, 4 + QK_K + QK_K / 16 * 2 },
	[IO_TYPE_I8] = { "i8", 1, 1 },
	[IO_TYPE_I16] = { "i16", 1, 2 },
	[IO_TYPE_I32] = { "i32", 1, 4 },
	[IO_TYPE_I64] = { "i64", 1, 8 },
	[IO_TYPE_F64] = { "f64", 1, 8 },
	[IO_TYPE_BF16] = { "bf16", 1, 2 },
};

const struct io_type_info *io_type_info(uint32_t type)
{
	if (type >= IO_TYPE_COUNT || !io_types[type].name)
		return NULL;
	return &io_types[type];
}

int io_type_row_bytes(uint32_t type, int64_t n, uint64_t *bytes)
{
	const struct io_type_info *t = io_type_info(type);
	uint64_t blocks;

	if (!t || n < 0 || (uint64_t)n % t->block_elems)
		return -EINVAL;
	blocks = (uint64_t)n / t->block_elems;
	if (__builtin_mul_overflow(blocks, (uint64_t)t->block_bytes, bytes))
		return -EOVERFLOW;
	return 0;
}
