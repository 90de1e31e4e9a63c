/* SPDX-License-Identifier: MIT */
/*
 * io_gguf: the shared models read as an independent parser reads them, and
 * every malformed file the reader must refuse is refused with one line.
 *
 * The expected values of the shared files come from a 40-line Python
 * struct-based GGUF parser written apart from io/gguf.c: counts, sizes and
 * two FNV-1a digests, one over every tensor info ("name type ne0,ne1,ne2,ne3
 * absolute_offset bytes\n"), one over every key and value (see
 * meta_digest() for the stream). Broken files are built by the test
 * (gguf_fixture.h), one defect each.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../io/io.h"

#include "gguf_fixture.h"
#include "../common/check_main.h"

/* ---- the shared files ---------------------------------------------------- */

static const struct shared_gguf {
	const char *name;
	uint32_t version;
	uint64_t n_kv, n_tensors, size, data_offset, tensor_bytes;
	uint64_t tensor_digest, meta_digest;
} shared[] = {
	{ "models/llama-2-tiny-random.gguf", 3, 18, 12, 1750560, 724416,
	  1026144u, 0x2bb5211d7a0d564bull, 0x422a912ab0387c7cull },
	{ "models/stories260K.gguf", 3, 17, 48, 1185280, 14080, 1171200u,
	  0x4ff3ca1fd47cba5bull, 0x55b723da535d25ffull },
	{ "models/tiny-llama-spm32k-kquant.gguf", 3, 23, 20, 5947104, 725216,
	  5221888u, 0x2a88b510167325b3ull, 0xd5a91fc5c7daf922ull },
	{ "models/tiny-qwen2-bpe152k-legacyq.gguf", 3, 22, 26, 8690656, 5930368,
	  2760288u, 0x9000787d4d11981eull, 0xb8aded2da779cea6ull },
	{ "models/tiny-qwen3-bpe16k-f16.gguf", 3, 24, 24, 2907584, 537920,
	  2369664u, 0x935ebfe30351e82dull, 0x7ae4df0a20c3f0d5ull },
	{ "models/tiny-qwen3-bpe16k-mixq.gguf", 3, 24, 25, 7886272, 537984,
	  7348262u, 0x96da03b496636e17ull, 0xdaeb73b1ae8f5f8full },
	{ "models/tiny-qwen3moe-bpe16k-q4km.gguf", 3, 27, 26, 5345920, 538304,
	  4807600u, 0x5463f1ba56aba402ull, 0x920c2677614c59edull },
	/* vocab-only: no tensors, and the files end before the aligned offset */
	{ "vocab/ggml-vocab-deepseek-coder.gguf", 3, 25, 0, 1156067, 1156067,
	  0u, 0xcbf29ce484222325ull, 0x30a8b23456dece2bull },
	{ "vocab/ggml-vocab-falcon.gguf", 3, 18, 0, 2287728, 2287728, 0u,
	  0xcbf29ce484222325ull, 0x4b5df60626f245c8ull },
	{ "vocab/ggml-vocab-gpt-2.gguf", 3, 16, 0, 1766807, 1766807, 0u,
	  0xcbf29ce484222325ull, 0xf77ee9d4d45d3000ull },
	{ "vocab/ggml-vocab-llama-spm.gguf", 3, 22, 0, 723869, 723869, 0u,
	  0xcbf29ce484222325ull, 0x9446dabc5316fe5dull },
	{ "vocab/ggml-vocab-phi-3.gguf", 3, 26, 0, 726019, 726019, 0u,
	  0xcbf29ce484222325ull, 0xcb275798cc7b6935ull },
	{ "vocab/ggml-vocab-starcoder.gguf", 3, 19, 0, 1719346, 1719346, 0u,
	  0xcbf29ce484222325ull, 0xe5546b3144a5c307ull },
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	while (n--) {
		h ^= *c++;
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t fnvs(uint64_t h, const char *s)
{
	return fnv(h, s, strlen(s));
}

static size_t scalar_size(enum io_gguf_value_type t)
{
	static const size_t size[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

	return size[t];
}

/*
 * Per key: "key type", then " value" for integers and bools, " len:" and
 * the bytes for a string, " elemtype n:" and each element for an array
 * (strings as "len:" + bytes, numbers as packed little-endian), then "\n".
 */
static uint64_t meta_digest(const struct io_gguf *g)
{
	uint64_t h = 0xcbf29ce484222325ull, i, j;
	char line[64];

	for (i = 0; i < g->n_kv; i++) {
		const struct io_gguf_value *v = &g->kv[i].value;

		h = fnvs(h, g->kv[i].key);
		snprintf(line, sizeof(line), " %d", (int)v->type);
		h = fnvs(h, line);
		switch (v->type) {
		case IO_GGUF_UINT8:
		case IO_GGUF_UINT16:
		case IO_GGUF_UINT32:
		case IO_GGUF_UINT64:
			snprintf(line, sizeof(line), " %" PRIu64, v->u64);
			h = fnvs(h, line);
			break;
		case IO_GGUF_INT8:
		case IO_GGUF_INT16:
		case IO_GGUF_INT32:
		case IO_GGUF_INT64:
			snprintf(line, sizeof(line), " %" PRId64, v->i64);
			h = fnvs(h, line);
			break;
		case IO_GGUF_BOOL: h = fnvs(h, v->b ? " 1" : " 0"); break;
		case IO_GGUF_STRING:
			snprintf(line, sizeof(line), " %" PRIu64 ":",
				 v->str.len);
			h = fnv(fnvs(h, line), v->str.data, v->str.len);
			break;
		case IO_GGUF_ARRAY:
			snprintf(line, sizeof(line), " %d %" PRIu64 ":",
				 (int)v->arr.type, v->arr.n);
			h = fnvs(h, line);
			if (v->arr.type != IO_GGUF_STRING) {
				ck_assert_int_ne(v->arr.type, IO_GGUF_ARRAY);
				h = fnv(h, v->arr.data,
					v->arr.n * scalar_size(v->arr.type));
				break;
			}
			for (j = 0; j < v->arr.n; j++) {
				const struct io_gguf_string *s = &(
					(const struct io_gguf_string *)
						v->arr.data)[j];

				snprintf(line, sizeof(line), "%" PRIu64 ":",
					 s->len);
				h = fnv(fnvs(h, line), s->data, s->len);
			}
			break;
		default: break;
		}
		h = fnvs(h, "\n");
	}
	return h;
}

static uint64_t tensor_digest(const struct io_gguf *g)
{
	uint64_t h = 0xcbf29ce484222325ull, i;
	char line[256];

	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];

		snprintf(line, sizeof(line),
			 "%s %" PRIu32 " %" PRId64 ",%" PRId64 ",%" PRId64
			 ",%" PRId64 " %" PRIu64 " %" PRIu64 "\n",
			 t->name, t->type, t->ne[0], t->ne[1], t->ne[2],
			 t->ne[3], t->offset, t->bytes);
		h = fnvs(h, line);
	}
	return h;
}

START_TEST(test_gguf_shared_files)
{
	const struct shared_gguf *e = &shared[_i];
	struct io_gguf *g = NULL;
	struct err err = { 0 };
	char path[4096];
	uint64_t i, sum = 0;

	snprintf(path, sizeof(path), "%s/%s", check_shared_dir(), e->name);
	ck_assert_msg(io_gguf_open(&g, path, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(g->version, e->version);
	ck_assert_uint_eq(g->alignment, 32);
	ck_assert_uint_eq(g->n_files, 1);
	ck_assert_str_eq(g->files[0].path, path);
	ck_assert_uint_eq(g->files[0].size, e->size);
	ck_assert_uint_eq(g->files[0].data_offset, e->data_offset);
	ck_assert_uint_eq(g->n_kv, e->n_kv);
	ck_assert_uint_eq(g->n_tensors, e->n_tensors);
	ck_assert_uint_eq(g->tensor_bytes, e->tensor_bytes);
	ck_assert_uint_eq(tensor_digest(g), e->tensor_digest);
	ck_assert_uint_eq(meta_digest(g), e->meta_digest);
	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];

		ck_assert_uint_ge(t->offset, g->files[0].data_offset);
		ck_assert_uint_eq((t->offset - g->files[0].data_offset) % 32,
				  0);
		ck_assert_uint_le(t->offset + t->bytes, g->files[0].size);
		ck_assert_ptr_eq(io_gguf_find_tensor(g, t->name), t);
		sum += t->bytes;
	}
	ck_assert_uint_eq(sum, g->tensor_bytes);
	for (i = 0; i < g->n_kv; i++)
		ck_assert_ptr_eq(io_gguf_find(g, g->kv[i].key), &g->kv[i]);
	ck_assert_ptr_null(io_gguf_find(g, "no.such.key"));
	ck_assert_ptr_null(io_gguf_find_tensor(g, "no.such.tensor"));
	ck_assert_ptr_nonnull(io_gguf_get_str(g, "general.architecture"));
	io_gguf_close(g);
}
END_TEST

/* What llama2c_to_gguf.py writes for stories260K (dim 64, 5 layers...). */
START_TEST(test_gguf_stories260k)
{
	const struct io_gguf_tensor *t;
	const struct io_gguf_array *a;
	struct io_gguf *g = NULL;
	struct err err = { 0 };
	char path[4096];
	uint32_t u;
	int32_t i;
	float f;
	bool b;

	snprintf(path, sizeof(path), "%s/models/stories260K.gguf",
		 check_shared_dir());
	ck_assert_msg(io_gguf_open(&g, path, &err) == 0, "%s", err.msg);
	t = &g->tensors[0];
	ck_assert_str_eq(t->name, "token_embd.weight");
	ck_assert_uint_eq(t->type, IO_TYPE_F32);
	ck_assert_uint_eq(t->n_dims, 2);
	ck_assert_int_eq(t->ne[0], 64);
	ck_assert_int_eq(t->ne[1], 512);
	ck_assert_uint_eq(t->bytes, 64 * 512 * 4);
	ck_assert_uint_eq(t->offset, g->files[0].data_offset);
	t = &g->tensors[1];
	ck_assert_str_eq(t->name, "output_norm.weight");
	ck_assert_uint_eq(t->n_dims, 1);
	ck_assert_int_eq(t->ne[0], 64);
	ck_assert_int_eq(t->ne[1], 1);
	t = io_gguf_find_tensor(g, "blk.4.ffn_gate.weight");
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(t->ne[0], 64);
	ck_assert_int_eq(t->ne[1], 172);
	ck_assert_str_eq(g->tensors[47].name, "blk.4.ffn_norm.weight");

	ck_assert_str_eq(io_gguf_get_str(g, "general.architecture"), "llama");
	ck_assert_int_eq(io_gguf_get_u32(g, "llama.embedding_length", &u), 0);
	ck_assert_uint_eq(u, 64);
	ck_assert_int_eq(io_gguf_get_i32(g, "llama.block_count", &i), 0);
	ck_assert_int_eq(i, 5);
	ck_assert_int_eq(io_gguf_get_u32(g, "llama.feed_forward_length", &u),
			 0);
	ck_assert_uint_eq(u, 172);
	ck_assert_int_eq(
		io_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon",
				&f),
		0);
	ck_assert_float_eq(f, 1e-5f);
	ck_assert_int_eq(io_gguf_get_bool(g, "no.such", &b), -ENOENT);
	ck_assert_int_eq(io_gguf_get_u32(g, "general.architecture", &u),
			 -EINVAL);
	ck_assert_int_eq(io_gguf_get_f32(g, "llama.block_count", &f), -EINVAL);
	ck_assert_ptr_null(io_gguf_get_str(g, "llama.block_count"));
	a = io_gguf_get_array(g, "tokenizer.ggml.tokens", IO_GGUF_STRING);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->n, 512);
	ck_assert_str_eq(((struct io_gguf_string *)a->data)[1].data, "<s>");
	ck_assert_ptr_null(
		io_gguf_get_array(g, "tokenizer.ggml.tokens", IO_GGUF_INT32));
	a = io_gguf_get_array(g, "tokenizer.ggml.scores", IO_GGUF_FLOAT32);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->n, 512);
	io_gguf_close(g);
}
END_TEST

/* ---- fixtures made here -------------------------------------------------- */

static char tmpdir[256];

static void tmp_setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/llmfs-gguf-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void tmp_teardown(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	char path[512];

	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(path, sizeof(path), "%s/%s", tmpdir,
				 e->d_name);
			unlink(path);
		}
	closedir(d);
	rmdir(tmpdir);
}

static const char *tmp_path(const char *name)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	return path;
}

/* Opening path fails with code and one line "path: ...msg...". */
static void expect_fail(const char *path, int code, const char *msg)
{
	struct io_gguf *g = (struct io_gguf *)1;
	struct err err = { 0 };
	int ret = io_gguf_open(&g, path, &err);

	ck_assert_msg(ret == -code, "%s: got %d (%s), want %d", path, ret,
		      err.msg, -code);
	ck_assert_ptr_null(g);
	ck_assert_int_eq(err.code, code);
	ck_assert_msg(!strncmp(err.msg, path, strlen(path)) &&
			      err.msg[strlen(path)] == ':',
		      "%s", err.msg);
	ck_assert_msg(!strchr(err.msg, '\n'), "two lines: %s", err.msg);
	if (msg)
		ck_assert_msg(strstr(err.msg, msg), "'%s' lacks '%s'", err.msg,
			      msg);
}

START_TEST(test_gguf_fixture_values)
{
	const struct io_gguf_array *a, *in;
	const struct io_gguf_string *s;
	struct buf b = { 0 };
	struct io_gguf *g = NULL;
	struct err err = { 0 };
	struct fx f;
	uint32_t u;
	int32_t i;
	float x;
	bool yes;

	fx_default(&f);
	fx_build(&b, &f);
	fx_write(tmp_path("ok.gguf"), &b, b.n);
	ck_assert_msg(!io_gguf_open(&g, tmp_path("ok.gguf"), &err), "%s",
		      err.msg);
	ck_assert_uint_eq(g->version, 3);
	ck_assert_uint_eq(g->alignment, 32);
	ck_assert_uint_eq(g->n_kv, 16);
	ck_assert_uint_eq(g->files[0].size, b.n);
	ck_assert_uint_eq(g->files[0].data_offset, b.n - 176);
	ck_assert_uint_eq(g->files[0].data_offset % 32, 0);
	ck_assert_str_eq(io_gguf_get_str(g, "general.name"), "fixture");
	ck_assert_int_eq(io_gguf_get_u32(g, "t.u8", &u), 0);
	ck_assert_uint_eq(u, 200);
	ck_assert_int_eq(io_gguf_get_i32(g, "t.i8", &i), 0);
	ck_assert_int_eq(i, -5);
	ck_assert_int_eq(io_gguf_get_u32(g, "t.i8", &u), -EINVAL);
	ck_assert_int_eq(io_gguf_get_u32(g, "t.u16", &u), 0);
	ck_assert_uint_eq(u, 60000);
	ck_assert_int_eq(io_gguf_get_i32(g, "t.i16", &i), 0);
	ck_assert_int_eq(i, -300);
	ck_assert_int_eq(io_gguf_get_u32(g, "t.u32", &u), 0);
	ck_assert_uint_eq(u, 4000000000u);
	ck_assert_int_eq(io_gguf_get_i32(g, "t.u32", &i), -EINVAL);
	ck_assert_int_eq(io_gguf_get_i32(g, "t.i32", &i), 0);
	ck_assert_int_eq(i, -70000);
	ck_assert_int_eq(io_gguf_get_u32(g, "t.u64", &u), -EINVAL);
	ck_assert_uint_eq(io_gguf_find(g, "t.u64")->value.u64, 1ull << 40);
	ck_assert_int_eq(io_gguf_get_i32(g, "t.i64", &i), -EINVAL);
	ck_assert_int_eq(io_gguf_find(g, "t.i64")->value.i64, -(1ll << 40));
	ck_assert_int_eq(io_gguf_get_f32(g, "t.f32", &x), 0);
	ck_assert_float_eq(x, 1.5f);
	ck_assert_int_eq(io_gguf_get_f32(g, "t.f64", &x), 0);
	ck_assert_float_eq(x, -0.25f);
	ck_assert_int_eq(io_gguf_get_bool(g, "t.bool", &yes), 0);
	ck_assert(yes);
	ck_assert_int_eq(io_gguf_get_bool(g, "t.u8", &yes), -EINVAL);
	a = io_gguf_get_array(g, "t.strs", IO_GGUF_STRING);
	ck_assert_ptr_nonnull(a);
	s = a->data;
	ck_assert_uint_eq(a->n, 2);
	ck_assert_str_eq(s[0].data, "a");
	ck_assert_uint_eq(s[1].len, 2);
	ck_assert_str_eq(s[1].data, "bc");
	a = io_gguf_get_array(g, "t.ints", IO_GGUF_INT32);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->n, 3);
	ck_assert_int_eq(((int32_t *)a->data)[2], -3);
	a = io_gguf_get_array(g, "t.nested", IO_GGUF_ARRAY);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->n, 1);
	in = a->data;
	ck_assert_int_eq(in->type, IO_GGUF_UINT8);
	ck_assert_uint_eq(in->n, 2);
	ck_assert_uint_eq(((uint8_t *)in->data)[1], 9);

	ck_assert_uint_eq(g->n_tensors, 3);
	ck_assert_str_eq(g->tensors[1].name, "b");
	ck_assert_uint_eq(g->tensors[1].type, IO_TYPE_Q8_0);
	ck_assert_uint_eq(g->tensors[1].bytes, 3 * 34);
	ck_assert_uint_eq(g->tensors[1].offset, g->files[0].data_offset + 32);
	ck_assert_uint_eq(g->tensors[2].offset, g->files[0].data_offset + 160);
	ck_assert_uint_eq(g->tensors[2].bytes, 16);
	ck_assert_uint_eq(g->tensor_bytes, 32 + 102 + 16);
	io_gguf_close(g);
	io_gguf_close(NULL);

	/* version 2 has the same layout */
	f.version = 2;
	fx_build(&b, &f);
	fx_write(tmp_path("v2.gguf"), &b, b.n);
	ck_assert_msg(!io_gguf_open(&g, tmp_path("v2.gguf"), &err), "%s",
		      err.msg);
	ck_assert_uint_eq(g->version, 2);
	io_gguf_close(g);

	/* a larger power-of-two alignment moves the data section */
	fx_default(&f);
	f.align_set = true;
	f.align = 256;
	f.t[1].offset = 256;
	f.t[2].offset = 512;
	f.data_bytes = 528;
	fx_build(&b, &f);
	fx_write(tmp_path("a256.gguf"), &b, b.n);
	ck_assert_msg(!io_gguf_open(&g, tmp_path("a256.gguf"), &err), "%s",
		      err.msg);
	ck_assert_uint_eq(g->alignment, 256);
	ck_assert_uint_eq(g->files[0].data_offset % 256, 0);
	ck_assert_uint_eq(g->files[0].data_offset, b.n - 528);
	io_gguf_close(g);
	free(b.p);
}
END_TEST

/* Every proper prefix of a valid file is refused: no byte is optional. */
START_TEST(test_gguf_truncated_everywhere)
{
	struct buf b = { 0 };
	struct fx f;
	size_t n;

	fx_default(&f);
	fx_build(&b, &f);
	for (n = 0; n < b.n; n++) {
		struct io_gguf *g = NULL;
		struct err err = { 0 };

		fx_write(tmp_path("cut.gguf"), &b, n);
		expect_fail(tmp_path("cut.gguf"), EINVAL, NULL);
		/* the reason is the file's shortness, whichever check saw it */
		io_gguf_open(&g, tmp_path("cut.gguf"), &err);
		ck_assert_msg(strstr(err.msg, ": truncated: ") ||
				      strstr(err.msg, "cannot fit in the") ||
				      strstr(err.msg, "past the end"),
			      "cut at %zu: '%s'", n, err.msg);
	}
	free(b.p);
}
END_TEST

static void mut_magic(struct fx *f)
{
	memcpy(f->magic, "GGUX", 4);
}
static void mut_v1(struct fx *f)
{
	f->version = 1;
}
static void mut_v4(struct fx *f)
{
	f->version = 4;
}
static void mut_big_endian(struct fx *f)
{
	f->version = 0x03000000;
}
static void mut_n_kv_huge(struct fx *f)
{
	f->n_kv_set = true;
	f->n_kv = 1ull << 62;
}
static void mut_n_kv_plus1(struct fx *f)
{
	f->n_kv_set = true;
	f->n_kv = fx_kv_count(f) + 1;
}
static void mut_n_tensors_huge(struct fx *f)
{
	f->n_tensors_set = true;
	f->n_tensors = UINT64_MAX;
}
static void mut_n_tensors_plus1(struct fx *f)
{
	f->n_tensors_set = true;
	f->n_tensors = 4;
}
static void mut_str_huge(struct fx *f)
{
	f->name_len = 1ull << 40;
}
static void mut_str_max(struct fx *f)
{
	f->name_len = UINT64_MAX;
}
static void mut_dup_key(struct fx *f)
{
	f->dup_key = true;
}
static void mut_empty_key(struct fx *f)
{
	f->empty_key = true;
}
static void mut_nul_key(struct fx *f)
{
	f->nul_key = true;
}
static void mut_deep(struct fx *f)
{
	f->depth = 9;
}
static void mut_elem_type(struct fx *f)
{
	f->nested_type = 13;
}
static void mut_align0(struct fx *f)
{
	f->align_set = true;
	f->align = 0;
}
static void mut_align3(struct fx *f)
{
	f->align_set = true;
	f->align = 3;
}
static void mut_align_u64(struct fx *f)
{
	f->align_set = true;
	f->align_type = IO_GGUF_UINT64;
}
static void mut_dims5(struct fx *f)
{
	f->t[1].n_dims = 5;
	f->t[1].ne[2] = f->t[1].ne[3] = f->t[1].ne[4] = 1;
}
static void mut_type4(struct fx *f)
{
	f->t[1].type = 4;
}
static void mut_type99(struct fx *f)
{
	f->t[1].type = 99;
}
static void mut_dim0(struct fx *f)
{
	f->t[1].ne[1] = 0;
}
static void mut_dim_neg(struct fx *f)
{
	f->t[0].ne[0] = -4;
}
static void mut_block(struct fx *f)
{
	f->t[1].ne[0] = 31;
}
static void mut_huge_shape(struct fx *f)
{
	f->t[0].ne[0] = 1ll << 40;
	f->t[0].ne[1] = 1ll << 40;
}
static void mut_bytes_overflow(struct fx *f)
{
	/* 2^62 elements fit in int64, their 2^64 bytes do not */
	f->t[0].ne[0] = 1ll << 32;
	f->t[0].ne[1] = 1ll << 30;
}
static void mut_misaligned(struct fx *f)
{
	f->t[1].offset = 33;
}
static void mut_past_eof(struct fx *f)
{
	f->t[2].offset = 192;
}
static void mut_offset_huge(struct fx *f)
{
	f->t[2].offset = 1ull << 63;
}
static void mut_data_short(struct fx *f)
{
	f->data_bytes = 175;
}
static void mut_dup_tensor(struct fx *f)
{
	f->t[2].name = "a";
}
static void mut_empty_name(struct fx *f)
{
	f->t[2].name = "";
}
static void mut_long_name(struct fx *f)
{
	f->t[2].name = "0123456789012345678901234567890123456789"
		       "012345678901234567890123";
}
static void mut_split_lone(struct fx *f)
{
	f->split_count = 3;
}

static const struct bad {
	const char *what;
	void (*mut)(struct fx *f);
	const char *msg;
} bad[] = {
	{ "bad magic", mut_magic, "not a GGUF file" },
	{ "v1", mut_v1, "version 1 is not supported" },
	{ "v4", mut_v4, "unknown GGUF version 4" },
	{ "big-endian", mut_big_endian, "big-endian" },
	{ "n_kv 2^62", mut_n_kv_huge, "keys cannot fit" },
	{ "n_kv + 1", mut_n_kv_plus1, NULL },
	{ "n_tensors 2^64-1", mut_n_tensors_huge, "tensors cannot fit" },
	{ "n_tensors + 1", mut_n_tensors_plus1, NULL },
	{ "string 2^40", mut_str_huge, "runs past the end" },
	{ "string 2^64-1", mut_str_max, "runs past the end" },
	{ "duplicate key", mut_dup_key,
	  "duplicate key 'general.architecture'" },
	{ "empty key", mut_empty_key, "is empty" },
	{ "NUL in key", mut_nul_key, "NUL" },
	{ "nested 9 deep", mut_deep, "nested deeper" },
	{ "element type 13", mut_elem_type, "unknown array element type 13" },
	{ "alignment 0", mut_align0, "not a power of two" },
	{ "alignment 3", mut_align3, "not a power of two" },
	{ "alignment uint64", mut_align_u64, "must be a uint32" },
	{ "n_dims 5", mut_dims5, "5 dimensions" },
	{ "type 4", mut_type4, "unknown type 4" },
	{ "type 99", mut_type99, "unknown type 99" },
	{ "dimension 0", mut_dim0, "dimension 1 is 0" },
	{ "dimension -4", mut_dim_neg, "dimension 0 is -4" },
	{ "row not whole blocks", mut_block,
	  "not a multiple of the q8_0 block" },
	{ "2^80 elements", mut_huge_shape, "too large" },
	{ "2^64 bytes", mut_bytes_overflow, "too large" },
	{ "misaligned offset", mut_misaligned,
	  "not a multiple of the alignment" },
	{ "tensor past EOF", mut_past_eof, "past the end" },
	{ "offset 2^63", mut_offset_huge, "past the end" },
	{ "data one byte short", mut_data_short, "past the end" },
	{ "duplicate tensor", mut_dup_tensor, "duplicate tensor 'a'" },
	{ "empty tensor name", mut_empty_name, "empty name" },
	{ "tensor name 64 bytes", mut_long_name, "longer than ggml's 63" },
	{ "split.count without a split name", mut_split_lone,
	  "split.count is 3" },
};

START_TEST(test_gguf_refuses)
{
	struct buf b = { 0 };
	struct fx f;

	fx_default(&f);
	bad[_i].mut(&f);
	fx_build(&b, &f);
	fx_write(tmp_path("bad.gguf"), &b, b.n);
	expect_fail(tmp_path("bad.gguf"), EINVAL, bad[_i].msg);
	free(b.p);
}
END_TEST

START_TEST(test_gguf_syscall_errors)
{
	expect_fail(tmp_path("absent.gguf"), ENOENT, "No such file");
	expect_fail(tmpdir, EISDIR, "directory");
}
END_TEST

/* ---- split models -------------------------------------------------------- */

/* NAME-00001-of-00002.gguf: tensor a; -00002-: b and c. */
static void split_write(const char *name1, const char *name2, int n_tensors,
			const char *second_b)
{
	struct buf b = { 0 };
	struct fx f;

	fx_default(&f);
	f.split_no = 0;
	f.split_count = 2;
	f.split_tensors = n_tensors;
	f.n_t = 1;
	f.data_bytes = 32;
	fx_build(&b, &f);
	fx_write(tmp_path(name1), &b, b.n);

	fx_default(&f);
	f.split_no = 1;
	f.split_count = 2;
	f.n_t = 2;
	f.t[0] = f.t[1];
	f.t[0].name = second_b;
	f.t[0].offset = 0;
	f.t[1] = f.t[2];
	f.t[1].offset = 128;
	f.data_bytes = 144;
	fx_build(&b, &f);
	fx_write(tmp_path(name2), &b, b.n);
	free(b.p);
}

START_TEST(test_gguf_split)
{
	const struct io_gguf_tensor *t;
	struct io_gguf *g = NULL;
	struct err err = { 0 };
	char first[512];

	split_write("m-00001-of-00002.gguf", "m-00002-of-00002.gguf", 3, "b");
	snprintf(first, sizeof(first), "%s", tmp_path("m-00001-of-00002.gguf"));
	ck_assert_msg(!io_gguf_open(&g, first, &err), "%s", err.msg);
	ck_assert_uint_eq(g->n_files, 2);
	ck_assert_str_eq(g->files[1].path, tmp_path("m-00002-of-00002.gguf"));
	ck_assert_uint_eq(g->n_tensors, 3);
	ck_assert_uint_eq(g->tensor_bytes, 32 + 102 + 16);
	t = io_gguf_find_tensor(g, "a");
	ck_assert_uint_eq(t->file, 0);
	ck_assert_uint_eq(t->offset, g->files[0].data_offset);
	t = io_gguf_find_tensor(g, "c");
	ck_assert_uint_eq(t->file, 1);
	ck_assert_uint_eq(t->offset, g->files[1].data_offset + 128);
	ck_assert_uint_le(t->offset + t->bytes, g->files[1].size);
	ck_assert_str_eq(io_gguf_get_str(g, "general.architecture"), "llama");
	io_gguf_close(g);

	/* the second part alone is refused, naming the first */
	expect_fail(tmp_path("m-00002-of-00002.gguf"), EINVAL,
		    "open part 00001");

	/* a missing part is the open's error, naming that part */
	unlink(tmp_path("m-00002-of-00002.gguf"));
	{
		struct err e2 = { 0 };

		ck_assert_int_eq(io_gguf_open(&g, first, &e2), -ENOENT);
		ck_assert_ptr_null(g);
		ck_assert_msg(strstr(e2.msg, "m-00002-of-00002.gguf: "), "%s",
			      e2.msg);
	}
}
END_TEST

START_TEST(test_gguf_split_refuses)
{
	char first[512];

	snprintf(first, sizeof(first), "%s", tmp_path("s-00001-of-00002.gguf"));
	split_write("s-00001-of-00002.gguf", "s-00002-of-00002.gguf", 4, "b");
	expect_fail(first, EINVAL, "split.tensors.count is 4");
	split_write("s-00001-of-00002.gguf", "s-00002-of-00002.gguf", 3, "a");
	ck_assert_ptr_nonnull(first);
	{
		struct io_gguf *g = NULL;
		struct err err = { 0 };

		/* the duplicate is found in part 2, so part 2 is named */
		ck_assert_int_eq(io_gguf_open(&g, first, &err), -EINVAL);
		ck_assert_msg(strstr(err.msg, "s-00002-of-00002.gguf: "
					      "duplicate tensor 'a'"),
			      "%s", err.msg);
	}
	/* the name says 3 parts, split.count says 2 */
	split_write("t-00001-of-00003.gguf", "t-00002-of-00003.gguf", 3, "b");
	expect_fail(tmp_path("t-00001-of-00003.gguf"), EINVAL,
		    "name says 3 parts");
}
END_TEST

/* ---- fuzz regressions ---------------------------------------------------- */

/*
 * Each input the fuzzer once crashed on now opens or fails cleanly; the
 * hand-made seeds of tests/fuzz/seeds/ named *.gguf are valid and open.
 */
static int replay_dir(const char *dir, bool must_open)
{
	struct dirent *e;
	char path[1024];
	int n = 0;
	DIR *d = opendir(dir);

	ck_assert_msg(d, "%s: %s (run from the repository root)", dir,
		      strerror(errno));
	while ((e = readdir(d))) {
		struct io_gguf *g = NULL;
		struct err err = { 0 };
		int ret;

		if (e->d_name[0] == '.' || !strcmp(e->d_name, "README"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		ret = io_gguf_open(&g, path, &err);
		if (ret) {
			/* seeds for the fuzzer's split mode are not GGUFs */
			ck_assert_msg(!must_open || !strstr(e->d_name, ".gguf"),
				      "%s", err.msg);
			ck_assert_ptr_null(g);
			ck_assert_msg(err.msg[0] && !strchr(err.msg, '\n'),
				      "%s: '%s'", path, err.msg);
		}
		io_gguf_close(g);
		n++;
	}
	closedir(d);
	return n;
}

/*
 * The inputs that once crashed the fuzzer (none yet: crashers/README), the
 * seeds (valid files), and corpus-gguf/: 132 small inputs that libFuzzer
 * kept for reaching 321 of fuzz_gguf's 322 edges (-merge=1 of a 90 s run,
 * those under 1 KiB), most of them refusals, each of which must be one
 * line. An emptied folder fails: a replay of nothing checks nothing.
 */
START_TEST(test_gguf_fuzz_inputs)
{
	int n = replay_dir("tests/fuzz/crashers", false);

	printf("test_gguf: %d fuzz regression inputs replayed\n", n);
	ck_assert_int_ge(replay_dir("tests/fuzz/seeds", true), 2);
	ck_assert_int_ge(replay_dir("tests/fuzz/corpus-gguf", false), 100);
}
END_TEST

static Suite *gguf_suite(void)
{
	Suite *s = suite_create("io_gguf");
	TCase *tc = tcase_create("shared");
	int n_shared = (int)(sizeof(shared) / sizeof(shared[0]));

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_gguf_shared_files, 0, n_shared);
	tcase_add_test(tc, test_gguf_stories260k);
	suite_add_tcase(s, tc);

	tc = tcase_create("fixtures");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
	tcase_add_test(tc, test_gguf_fixture_values);
	tcase_add_test(tc, test_gguf_truncated_everywhere);
	tcase_add_loop_test(tc, test_gguf_refuses, 0,
			    (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, test_gguf_syscall_errors);
	tcase_add_test(tc, test_gguf_split);
	tcase_add_test(tc, test_gguf_split_refuses);
	tcase_add_test(tc, test_gguf_fuzz_inputs);
	suite_add_tcase(s, tc);
	return s;
}

static int gguf_setup(void)
{
	char path[4096];
	struct stat st;

	check_shared_model(path, sizeof(path), "stories260K");
	if (stat(path, &st)) {
		printf("test_gguf: no shared models at %s (set SHARED)\n",
		       check_shared_dir());
		return CHECK_SKIP;
	}
	return 0;
}

const struct check_main check_main = {
	.setup = gguf_setup,
	.suite = gguf_suite,
};
