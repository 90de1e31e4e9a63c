/* SPDX-License-Identifier: MIT */
/*
 * io_gguf_writer: what it writes reads back through io_gguf_open, and a
 * shared model copied through it (every key, every tensor) comes out byte
 * for byte as gguf-py wrote it, the layout both follow being gguf.cpp's.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../io/io.h"
#include "../common/check_main.h"

static char tmp[256];

static void tmp_setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/llmfs-gw-XXXXXX");
	ck_assert_int_ge(mkstemp(tmp), 0);
}

static void tmp_teardown(void)
{
	unlink(tmp);
}

static unsigned char *file_read(const char *path, size_t *n)
{
	struct stat st;
	unsigned char *p;
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	p = malloc((size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(read(fd, p, (size_t)st.st_size), st.st_size);
	close(fd);
	*n = (size_t)st.st_size;
	return p;
}

START_TEST(test_writer_round_trip)
{
	static const char *strs[] = { "x", "", "long string\n" };
	static const int16_t i16s[] = { -1, 2, 300 };
	struct io_gguf_array inner[2] = {
		{ IO_GGUF_INT16, 3, (void *)i16s },
		{ IO_GGUF_INT16, 0, (void *)i16s },
	};
	struct io_gguf_value nested = { .type = IO_GGUF_ARRAY,
					.arr = { IO_GGUF_ARRAY, 2, inner } };
	struct io_gguf_value u64 = { .type = IO_GGUF_UINT64,
				     .u64 = 1ull << 50 };
	const int64_t ne_a[] = { 32, 3 }, ne_b[] = { 5 };
	unsigned char data[3 * 34 + 20], *file;
	const struct io_gguf_array *a;
	struct io_gguf_writer *w;
	struct io_gguf *g;
	struct err err = { 0 };
	size_t i, n;
	uint32_t u;
	float f;

	for (i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7 + 1);
	ck_assert_int_eq(io_gguf_writer_new(&w, 64, &err), 0);
	ck_assert_int_eq(io_gguf_writer_add_str(w, "general.architecture",
						"llama", &err),
			 0);
	ck_assert_int_eq(io_gguf_writer_add_u32(w, "k.u32", 7, &err), 0);
	ck_assert_int_eq(io_gguf_writer_add_i32(w, "k.i32", -7, &err), 0);
	ck_assert_int_eq(io_gguf_writer_add_f32(w, "k.f32", 0.5f, &err), 0);
	ck_assert_int_eq(io_gguf_writer_add_bool(w, "k.bool", true, &err), 0);
	ck_assert_int_eq(io_gguf_writer_add(w, "k.u64", &u64, &err), 0);
	ck_assert_int_eq(io_gguf_writer_add_array(w, "k.strs", IO_GGUF_STRING,
						  strs, 3, &err),
			 0);
	ck_assert_int_eq(io_gguf_writer_add(w, "k.nested", &nested, &err), 0);
	ck_assert_int_eq(io_gguf_writer_add_u32(w, "k.u32", 8, &err), -EINVAL);
	ck_assert_int_eq(
		io_gguf_writer_add_tensor(w, "a", IO_TYPE_Q8_0, 2, ne_a, &err),
		0);
	ck_assert_int_eq(
		io_gguf_writer_add_tensor(w, "b", IO_TYPE_F32, 1, ne_b, &err),
		0);
	ck_assert_int_eq(
		io_gguf_writer_add_tensor(w, "a", IO_TYPE_F32, 1, ne_b, &err),
		-EINVAL);
	ck_assert_int_eq(
		io_gguf_writer_add_tensor(w, "c", IO_TYPE_Q8_0, 1, ne_b, &err),
		-EINVAL);
	ck_assert_int_eq(io_gguf_writer_begin(w, tmp, &err), 0);
	ck_assert_int_eq(io_gguf_writer_add_u32(w, "late", 1, &err), -EINVAL);
	/* odd chunks, one crossing the boundary between a and b */
	ck_assert_int_eq(io_gguf_writer_write(w, data, 5, &err), 0);
	ck_assert_int_eq(io_gguf_writer_write(w, data + 5, 100, &err), 0);
	ck_assert_int_eq(io_gguf_writer_finish(w, &err), -EINVAL);
	ck_assert_int_eq(io_gguf_writer_write(w, data + 105, 17, &err), 0);
	ck_assert_int_eq(io_gguf_writer_write(w, data, 1, &err), -EINVAL);
	ck_assert_msg(!io_gguf_writer_finish(w, &err), "%s", err.msg);
	io_gguf_writer_free(w);

	ck_assert_msg(!io_gguf_open(&g, tmp, &err), "%s", err.msg);
	ck_assert_uint_eq(g->version, 3);
	ck_assert_uint_eq(g->alignment, 64);
	ck_assert_uint_eq(g->n_kv, 9); /* with general.alignment */
	ck_assert_str_eq(io_gguf_get_str(g, "general.architecture"), "llama");
	ck_assert_int_eq(io_gguf_get_u32(g, "k.u32", &u), 0);
	ck_assert_uint_eq(u, 7);
	ck_assert_int_eq(io_gguf_find(g, "k.i32")->value.i64, -7);
	ck_assert_int_eq(io_gguf_get_f32(g, "k.f32", &f), 0);
	ck_assert_float_eq(f, 0.5f);
	ck_assert(io_gguf_find(g, "k.bool")->value.b);
	ck_assert_uint_eq(io_gguf_find(g, "k.u64")->value.u64, 1ull << 50);
	a = io_gguf_get_array(g, "k.strs", IO_GGUF_STRING);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->n, 3);
	ck_assert_str_eq(((struct io_gguf_string *)a->data)[2].data,
			 "long string\n");
	ck_assert_uint_eq(((struct io_gguf_string *)a->data)[1].len, 0);
	a = io_gguf_get_array(g, "k.nested", IO_GGUF_ARRAY);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->n, 2);
	ck_assert_uint_eq(((struct io_gguf_array *)a->data)[0].n, 3);
	ck_assert_int_eq(
		((int16_t *)((struct io_gguf_array *)a->data)[0].data)[2], 300);
	ck_assert_uint_eq(((struct io_gguf_array *)a->data)[1].n, 0);
	ck_assert_uint_eq(g->n_tensors, 2);
	ck_assert_uint_eq(g->files[0].data_offset % 64, 0);
	ck_assert_uint_eq(g->tensors[0].bytes, 102);
	ck_assert_uint_eq(g->tensors[1].offset, g->files[0].data_offset + 128);
	file = file_read(tmp, &n);
	ck_assert_int_eq(memcmp(file + g->tensors[0].offset, data, 102), 0);
	ck_assert_int_eq(memcmp(file + g->tensors[1].offset, data + 102, 20),
			 0);
	/* padded after the last tensor too, as gguf.cpp does */
	ck_assert_uint_eq(n, g->files[0].data_offset + 192);
	free(file);
	io_gguf_close(g);
}
END_TEST

START_TEST(test_writer_refuses)
{
	struct io_gguf_writer *w;
	struct io_gguf_value bad = { .type = 13 };
	struct err err = { 0 };
	const int64_t ne[] = { 4, 0 };

	ck_assert_int_eq(io_gguf_writer_new(&w, 48, &err), -EINVAL);
	ck_assert_ptr_null(w);
	ck_assert_int_eq(io_gguf_writer_new(&w, 0, &err), 0);
	ck_assert_int_eq(io_gguf_writer_add(w, "x", &bad, &err), -EINVAL);
	ck_assert_int_eq(io_gguf_writer_add_u32(w, "", 1, &err), -EINVAL);
	ck_assert_int_eq(
		io_gguf_writer_add_tensor(w, "t", IO_TYPE_F32, 2, ne, &err),
		-EINVAL);
	ck_assert_int_eq(io_gguf_writer_add_tensor(w, "t", 4, 1, ne, &err),
			 -EINVAL);
	ck_assert_int_eq(
		io_gguf_writer_add_tensor(w, "t", IO_TYPE_F32, 5, ne, &err),
		-EINVAL);
	ck_assert_int_eq(io_gguf_writer_write(w, "x", 1, &err), -EINVAL);
	ck_assert_int_eq(
		io_gguf_writer_add_tensor(w, "t", IO_TYPE_F32, 1, ne, &err), 0);
	ck_assert_int_eq(io_gguf_writer_begin(w, tmp, &err), 0);
	ck_assert_int_eq(io_gguf_writer_finish(w, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "tensor 't' has 0 of 16 bytes"), "%s",
		      err.msg);
	/* an unfinished file is removed */
	io_gguf_writer_free(w);
	ck_assert_int_ne(access(tmp, F_OK), 0);
	ck_assert_int_eq(io_gguf_writer_new(&w, 0, &err), 0);
	ck_assert_int_eq(
		io_gguf_writer_begin(w, "/nonexistent/dir/x.gguf", &err),
		-ENOENT);
	io_gguf_writer_free(w);
}
END_TEST

/* Every key and tensor of a shared model, copied: the same bytes. */
START_TEST(test_writer_copies_shared_model)
{
	static const char *const models[] = {
		"stories260K.gguf", "tiny-qwen3moe-bpe16k-q4km.gguf",
		"tiny-qwen2-bpe152k-legacyq.gguf"
	};
	struct io_gguf_writer *w;
	unsigned char *src, *dst;
	struct io_gguf *g;
	struct err err = { 0 };
	char path[4096];
	size_t n_src, n_dst;
	uint64_t i;

	snprintf(path, sizeof(path), "%s/models/%s", check_shared_dir(),
		 models[_i]);
	ck_assert_msg(!io_gguf_open(&g, path, &err), "%s", err.msg);
	src = file_read(path, &n_src);
	ck_assert_int_eq(io_gguf_writer_new(&w, g->alignment, &err), 0);
	for (i = 0; i < g->n_kv; i++)
		ck_assert_msg(!io_gguf_writer_add(w, g->kv[i].key,
						  &g->kv[i].value, &err),
			      "%s", err.msg);
	for (i = 0; i < g->n_tensors; i++)
		ck_assert_msg(!io_gguf_writer_add_tensor(
				      w, g->tensors[i].name, g->tensors[i].type,
				      g->tensors[i].n_dims, g->tensors[i].ne,
				      &err),
			      "%s", err.msg);
	ck_assert_int_eq(io_gguf_writer_begin(w, tmp, &err), 0);
	for (i = 0; i < g->n_tensors; i++)
		ck_assert_int_eq(
			io_gguf_writer_write(w, src + g->tensors[i].offset,
					     g->tensors[i].bytes, &err),
			0);
	ck_assert_msg(!io_gguf_writer_finish(w, &err), "%s", err.msg);
	io_gguf_writer_free(w);
	dst = file_read(tmp, &n_dst);
	ck_assert_uint_eq(n_dst, n_src);
	ck_assert_int_eq(memcmp(src, dst, n_src), 0);
	free(src);
	free(dst);
	io_gguf_close(g);
}
END_TEST

static void writer_tests(TCase *tc)
{
	char path[4096];
	struct stat st;

	tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
	tcase_add_test(tc, test_writer_round_trip);
	tcase_add_test(tc, test_writer_refuses);
	check_shared_path(path, sizeof(path), "models");
	if (!stat(path, &st))
		tcase_add_loop_test(tc, test_writer_copies_shared_model, 0, 3);
	else
		printf("test_gguf_writer: no %s, copy check left out\n", path);
}

/* The copy check needs the shared models: without them, not a pass. */
static int writer_left_out(void)
{
	char path[4096];
	struct stat st;

	if (!stat(check_shared_path(path, sizeof(path), "models"), &st))
		return 0;
	printf("no %s: the copy check was left out\n", path);
	return CHECK_SKIP;
}

const struct check_main check_main = {
	.name = "io_gguf_writer",
	.tcase = "writer",
	.timeout = 60,
	.add_tests = writer_tests,
	.left_out = writer_left_out,
};
