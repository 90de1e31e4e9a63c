/* SPDX-License-Identifier: MIT */
/*
 * io_gguf_ftype and io_ftype_name: general.file_type named as
 * llama-quantize and Ollama write it, and llama.cpp's guess for a file
 * without the key (llama_model_loader: the type of the most tensors, a tie
 * to the first type to reach the count in name order, a K-quant as its _M
 * mix). Expected names from llama.cpp's tools/quantize/quantize.cpp table
 * and Ollama's fs/ggml/type.go.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../io/io.h"
#include "../common/check_main.h"

START_TEST(test_ftype_names)
{
	static const struct {
		uint32_t ftype;
		const char *name;
	} cases[] = {
		{ 0, "F32" },	     { 1, "F16" },
		{ 2, "Q4_0" },	     { 7, "Q8_0" },
		{ 10, "Q2_K" },	     { 12, "Q3_K_M" },
		{ 14, "Q4_K_S" },    { 15, "Q4_K_M" },
		{ 17, "Q5_K_M" },    { 18, "Q6_K" },
		{ 30, "IQ4_XS" },    { 32, "BF16" },
		{ 38, "MXFP4_MOE" }, { 4, "unknown" },
		{ 33, "unknown" },   { 1024 + 15, "unknown" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
		ck_assert_str_eq(io_ftype_name(cases[i].ftype), cases[i].name);
}
END_TEST

/* A file with the tensors' types given (names t0, t1, ...), and a key. */
static struct io_gguf *ftype_file(const uint32_t *types, int n, int ftype)
{
	static const int64_t ne_k[] = { 256 }, ne_f[] = { 32 };
	char path[] = "/tmp/llmfs-ftype-XXXXXX", name[16];
	struct io_gguf_writer *w;
	struct io_gguf *g;
	struct err err = { 0 };
	unsigned char zero[512] = { 0 };
	uint64_t bytes;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(io_gguf_writer_new(&w, 0, &err), 0);
	if (ftype >= 0)
		ck_assert_int_eq(io_gguf_writer_add_u32(w, "general.file_type",
							(uint32_t)ftype, &err),
				 0);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "t%d", i);
		ck_assert_int_eq(io_gguf_writer_add_tensor(
					 w, name, types[i], 1,
					 types[i] == IO_TYPE_F32 ? ne_f : ne_k,
					 &err),
				 0);
	}
	ck_assert_int_eq(io_gguf_writer_begin(w, path, &err), 0);
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(
			io_type_row_bytes(types[i],
					  types[i] == IO_TYPE_F32 ? 32 : 256,
					  &bytes),
			0);
		ck_assert_int_eq(io_gguf_writer_write(w, zero, bytes, &err), 0);
	}
	ck_assert_int_eq(io_gguf_writer_finish(w, &err), 0);
	io_gguf_writer_free(w);
	ck_assert_int_eq(io_gguf_open(&g, path, &err), 0);
	unlink(path);
	return g;
}

START_TEST(test_ftype_from_the_key)
{
	const uint32_t types[] = { IO_TYPE_F32, IO_TYPE_F32, IO_TYPE_Q4_K };
	struct io_gguf *g = ftype_file(types, 3, 15);
	bool guessed = true;

	ck_assert_uint_eq(io_gguf_ftype(g, &guessed), 15);
	ck_assert(!guessed);
	io_gguf_close(g);
}
END_TEST

START_TEST(test_ftype_guessed_as_llama_cpp)
{
	const uint32_t most_q4k[] = { IO_TYPE_Q4_K, IO_TYPE_F32, IO_TYPE_Q4_K,
				      IO_TYPE_Q6_K };
	/* t0..t3 by name: q6_K reaches 2 first (t0, t1), then f32 (t2, t3) */
	const uint32_t tie[] = { IO_TYPE_Q6_K, IO_TYPE_Q6_K, IO_TYPE_F32,
				 IO_TYPE_F32 };
	const uint32_t q3k[] = { IO_TYPE_Q3_K };
	struct io_gguf *g;
	bool guessed = false;

	g = ftype_file(most_q4k, 4, -1);
	ck_assert_uint_eq(io_gguf_ftype(g, &guessed), 15); /* Q4_K_M */
	ck_assert(guessed);
	io_gguf_close(g);
	g = ftype_file(tie, 4, -1);
	ck_assert_uint_eq(io_gguf_ftype(g, &guessed), 18); /* Q6_K */
	io_gguf_close(g);
	g = ftype_file(q3k, 1, -1);
	ck_assert_uint_eq(io_gguf_ftype(g, &guessed), 12); /* Q3_K_M */
	io_gguf_close(g);
}
END_TEST

static void ftype_tests(TCase *tc)
{
	tcase_add_test(tc, test_ftype_names);
	tcase_add_test(tc, test_ftype_from_the_key);
	tcase_add_test(tc, test_ftype_guessed_as_llama_cpp);
}

const struct check_main check_main = {
	.name = "ftype",
	.add_tests = ftype_tests,
};
