/* SPDX-License-Identifier: MIT */
/*
 * io_type_info / io_type_row_bytes: ggml's block layouts.
 *
 * Two independent sources: the byte counts of the block structs in
 * ggml/src/ggml-common.h (written out here as numbers), and the shared
 * models, whose writer (gguf-py, with its own GGML_QUANT_SIZES table) laid
 * the tensors out back to back: the distance between two consecutive
 * tensor offsets is the first one's size rounded up to the alignment.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "../../io/io.h"
#include "../common/check_main.h"

static const struct {
	uint32_t type;
	const char *name;
	uint32_t elems, bytes;
} ggml_blocks[] = {
	{ IO_TYPE_F32, "f32", 1, 4 },	    { IO_TYPE_F16, "f16", 1, 2 },
	{ IO_TYPE_Q4_0, "q4_0", 32, 18 },   { IO_TYPE_Q4_1, "q4_1", 32, 20 },
	{ IO_TYPE_Q5_0, "q5_0", 32, 22 },   { IO_TYPE_Q5_1, "q5_1", 32, 24 },
	{ IO_TYPE_Q8_0, "q8_0", 32, 34 },   { IO_TYPE_Q8_1, "q8_1", 32, 36 },
	{ IO_TYPE_Q2_K, "q2_K", 256, 84 },  { IO_TYPE_Q3_K, "q3_K", 256, 110 },
	{ IO_TYPE_Q4_K, "q4_K", 256, 144 }, { IO_TYPE_Q5_K, "q5_K", 256, 176 },
	{ IO_TYPE_Q6_K, "q6_K", 256, 210 }, { IO_TYPE_Q8_K, "q8_K", 256, 292 },
	{ IO_TYPE_I8, "i8", 1, 1 },	    { IO_TYPE_I16, "i16", 1, 2 },
	{ IO_TYPE_I32, "i32", 1, 4 },	    { IO_TYPE_I64, "i64", 1, 8 },
	{ IO_TYPE_F64, "f64", 1, 8 },	    { IO_TYPE_BF16, "bf16", 1, 2 },
};

START_TEST(test_types_blocks)
{
	const struct io_type_info *t = io_type_info(ggml_blocks[_i].type);
	uint64_t bytes = 0;

	ck_assert_ptr_nonnull(t);
	ck_assert_str_eq(t->name, ggml_blocks[_i].name);
	ck_assert_uint_eq(t->block_elems, ggml_blocks[_i].elems);
	ck_assert_uint_eq(t->block_bytes, ggml_blocks[_i].bytes);
	ck_assert_int_eq(io_type_row_bytes(ggml_blocks[_i].type,
					   3 * t->block_elems, &bytes),
			 0);
	ck_assert_uint_eq(bytes, 3ull * t->block_bytes);
	ck_assert_int_eq(io_type_row_bytes(ggml_blocks[_i].type, 0, &bytes), 0);
	ck_assert_uint_eq(bytes, 0);
	if (t->block_elems > 1)
		ck_assert_int_eq(io_type_row_bytes(ggml_blocks[_i].type,
						   t->block_elems + 1, &bytes),
				 -EINVAL);
}
END_TEST

/* Numbers ggml has removed or this build does not read (IQ*, TQ*, MXFP4). */
START_TEST(test_types_unknown)
{
	static const uint32_t unknown[] = {
		4,  5,	16, 17, 18, 19, 20, 21, 22,   23,	 29,
		31, 34, 35, 39, 40, 41, 42, 43, 1000, UINT32_MAX
	};
	uint64_t bytes;
	size_t i;

	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		ck_assert_ptr_null(io_type_info(unknown[i]));
		ck_assert_int_eq(io_type_row_bytes(unknown[i], 256, &bytes),
				 -EINVAL);
	}
}
END_TEST

START_TEST(test_types_row_limits)
{
	uint64_t bytes;

	ck_assert_int_eq(io_type_row_bytes(IO_TYPE_F32, -1, &bytes), -EINVAL);
	ck_assert_int_eq(io_type_row_bytes(IO_TYPE_Q4_K, 300, &bytes), -EINVAL);
	ck_assert_int_eq(io_type_row_bytes(IO_TYPE_I8, INT64_MAX, &bytes), 0);
	ck_assert_uint_eq(bytes, (uint64_t)INT64_MAX);
	ck_assert_int_eq(io_type_row_bytes(IO_TYPE_F32, INT64_MAX, &bytes),
			 -EOVERFLOW);
	ck_assert_int_eq(io_type_row_bytes(IO_TYPE_Q8_0, 1ll << 62, &bytes), 0);
	ck_assert_uint_eq(bytes, (1ull << 57) * 34);
	ck_assert_int_eq(io_type_row_bytes(IO_TYPE_F64, INT64_MAX / 2, &bytes),
			 -EOVERFLOW);
}
END_TEST

static const char *const models[] = {
	"llama-2-tiny-random.gguf",	  "stories260K.gguf",
	"tiny-llama-spm32k-kquant.gguf",  "tiny-qwen2-bpe152k-legacyq.gguf",
	"tiny-qwen3-bpe16k-f16.gguf",	  "tiny-qwen3-bpe16k-mixq.gguf",
	"tiny-qwen3moe-bpe16k-q4km.gguf",
};

/* Every type the shared models use, sized as their writer laid them out. */
START_TEST(test_types_match_shared_layout)
{
	static bool seen[IO_TYPE_COUNT];
	struct io_gguf *g = NULL;
	struct err err = { 0 };
	char path[4096];
	uint64_t i, a;
	size_t m;
	int n_seen = 0;

	for (m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		snprintf(path, sizeof(path), "%s/models/%s", check_shared_dir(),
			 models[m]);
		ck_assert_msg(!io_gguf_open(&g, path, &err), "%s", err.msg);
		a = g->alignment;
		for (i = 0; i + 1 < g->n_tensors; i++) {
			const struct io_gguf_tensor *t = &g->tensors[i];

			ck_assert_msg(g->tensors[i + 1].offset - t->offset ==
					      (t->bytes + a - 1) / a * a,
				      "%s: %s (%s)", models[m], t->name,
				      io_type_info(t->type)->name);
			seen[t->type] = true;
		}
		io_gguf_close(g);
	}
	for (i = 0; i < IO_TYPE_COUNT; i++)
		n_seen += seen[i];
	/* f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_K..q6_K */
	ck_assert_int_eq(n_seen, 13);
}
END_TEST

static void types_tests(TCase *tc)
{
	char path[4096];
	struct stat st;

	tcase_add_loop_test(
		tc, test_types_blocks, 0,
		(int)(sizeof(ggml_blocks) / sizeof(ggml_blocks[0])));
	tcase_add_test(tc, test_types_unknown);
	tcase_add_test(tc, test_types_row_limits);
	check_shared_path(path, sizeof(path), "models");
	if (!stat(path, &st))
		tcase_add_test(tc, test_types_match_shared_layout);
	else
		printf("test_types: no %s, layout check left out\n", path);
}

/* The layout check needs the shared models: without them, not a pass. */
static int types_left_out(void)
{
	char path[4096];
	struct stat st;

	if (!stat(check_shared_path(path, sizeof(path), "models"), &st))
		return 0;
	printf("no %s: the layout check was left out\n", path);
	return CHECK_SKIP;
}

const struct check_main check_main = {
	.name = "io_types",
	.tcase = "types",
	.add_tests = types_tests,
	.left_out = types_left_out,
};
