/* SPDX-License-Identifier: MIT */
/*
 * Test helper of tests/io/test_gguf.c: builds small GGUF files byte by
 * byte, valid or broken in one chosen way, so that each error path of the
 * reader has a fixture made by the test itself.
 *
 * The standard file (struct fx as fx_default() leaves it):
 *   16 keys: general.architecture "llama", general.name "fixture", one of
 *   each scalar type, [string] x2, [int32] x3, [[uint8]] (nested);
 *   tensors a f32 [4, 2] @0, b q8_0 [32, 3] @32, c f16 [8] @160;
 *   the data section ends where c ends (176 bytes).
 */
#ifndef LLMFS_TESTS_GGUF_FIXTURE_H
#define LLMFS_TESTS_GGUF_FIXTURE_H

#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../io/io.h"

struct buf {
	unsigned char *p;
	size_t n, cap;
};

static inline void buf_put(struct buf *b, const void *src, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		ck_assert_ptr_nonnull(b->p);
	}
	memcpy(b->p + b->n, src, n);
	b->n += n;
}

static inline void buf_u8(struct buf *b, uint8_t v)
{
	buf_put(b, &v, 1);
}
static inline void buf_u16(struct buf *b, uint16_t v)
{
	buf_put(b, &v, 2);
}
static inline void buf_u32(struct buf *b, uint32_t v)
{
	buf_put(b, &v, 4);
}
static inline void buf_u64(struct buf *b, uint64_t v)
{
	buf_put(b, &v, 8);
}

static inline void buf_str(struct buf *b, const char *s)
{
	buf_u64(b, strlen(s));
	buf_put(b, s, strlen(s));
}

/* key + type + value header for a scalar */
static inline void buf_key(struct buf *b, const char *key, uint32_t type)
{
	buf_str(b, key);
	buf_u32(b, type);
}

struct fx_tensor {
	const char *name;
	uint32_t type;
	uint32_t n_dims;
	int64_t ne[5];
	uint64_t offset;
};

struct fx {
	char magic[5];
	uint32_t version;
	bool n_kv_set, n_tensors_set;
	uint64_t n_kv, n_tensors; /* claimed counts when set */
	bool dup_key, empty_key, nul_key;
	uint64_t name_len;    /* claimed length of general.name's value */
	int depth;	      /* nesting of the nested array (1) */
	uint32_t nested_type; /* element type of the innermost array */
	bool align_set;
	uint32_t align_type, align;
	int split_no, split_count, split_tensors; /* -1: key absent */
	int n_t;				  /* tensors written from t[] */
	struct fx_tensor t[4];
	uint64_t data_bytes; /* of the data section */
};

static inline void fx_default(struct fx *f)
{
	memset(f, 0, sizeof(*f));
	memcpy(f->magic, "GGUF", 5);
	f->version = 3;
	f->depth = 1;
	f->nested_type = IO_GGUF_UINT8;
	f->align_type = IO_GGUF_UINT32;
	f->align = 32;
	f->split_no = f->split_count = f->split_tensors = -1;
	f->n_t = 3;
	f->t[0] = (struct fx_tensor){ "a", IO_TYPE_F32, 2, { 4, 2 }, 0 };
	f->t[1] = (struct fx_tensor){ "b", IO_TYPE_Q8_0, 2, { 32, 3 }, 32 };
	f->t[2] = (struct fx_tensor){ "c", IO_TYPE_F16, 1, { 8 }, 160 };
	f->data_bytes = 176;
}

/* [[...[n x nested_type]...]] depth levels deep */
static inline void fx_nested(struct buf *b, const struct fx *f, int depth)
{
	if (depth == 0) {
		buf_u32(b, f->nested_type);
		buf_u64(b, 2);
		buf_u8(b, 7);
		buf_u8(b, 9);
		return;
	}
	buf_u32(b, IO_GGUF_ARRAY);
	buf_u64(b, 1);
	fx_nested(b, f, depth - 1);
}

static inline uint64_t fx_kv_count(const struct fx *f)
{
	return 16 + f->dup_key + f->empty_key + f->nul_key + f->align_set +
	       (f->split_no >= 0) + (f->split_count >= 0) +
	       (f->split_tensors >= 0);
}

static inline void fx_kvs(struct buf *b, const struct fx *f)
{
	buf_key(b, "general.architecture", IO_GGUF_STRING);
	buf_str(b, "llama");
	buf_key(b, "general.name", IO_GGUF_STRING);
	buf_u64(b, f->name_len ? f->name_len : 7);
	buf_put(b, "fixture", 7);
	buf_key(b, "t.u8", IO_GGUF_UINT8);
	buf_u8(b, 200);
	buf_key(b, "t.i8", IO_GGUF_INT8);
	buf_u8(b, (uint8_t)-5);
	buf_key(b, "t.u16", IO_GGUF_UINT16);
	buf_u16(b, 60000);
	buf_key(b, "t.i16", IO_GGUF_INT16);
	buf_u16(b, (uint16_t)-300);
	buf_key(b, "t.u32", IO_GGUF_UINT32);
	buf_u32(b, 4000000000u);
	buf_key(b, "t.i32", IO_GGUF_INT32);
	buf_u32(b, (uint32_t)-70000);
	buf_key(b, "t.f32", IO_GGUF_FLOAT32);
	buf_put(b, &(float){ 1.5f }, 4);
	buf_key(b, "t.bool", IO_GGUF_BOOL);
	buf_u8(b, 1);
	buf_key(b, "t.u64", IO_GGUF_UINT64);
	buf_u64(b, 1ull << 40);
	buf_key(b, "t.i64", IO_GGUF_INT64);
	buf_u64(b, (uint64_t) - (1ll << 40));
	buf_key(b, "t.f64", IO_GGUF_FLOAT64);
	buf_put(b, &(double){ -0.25 }, 8);
	buf_key(b, "t.strs", IO_GGUF_ARRAY);
	buf_u32(b, IO_GGUF_STRING);
	buf_u64(b, 2);
	buf_str(b, "a");
	buf_str(b, "bc");
	buf_key(b, "t.ints", IO_GGUF_ARRAY);
	buf_u32(b, IO_GGUF_INT32);
	buf_u64(b, 3);
	buf_u32(b, 1);
	buf_u32(b, 2);
	buf_u32(b, (uint32_t)-3);
	buf_key(b, "t.nested", IO_GGUF_ARRAY);
	fx_nested(b, f, f->depth);
	if (f->dup_key) {
		buf_key(b, "general.architecture", IO_GGUF_STRING);
		buf_str(b, "qwen2");
	}
	if (f->empty_key) {
		buf_key(b, "", IO_GGUF_UINT8);
		buf_u8(b, 1);
	}
	if (f->nul_key) {
		buf_u64(b, 3);
		buf_put(b, "a\0b", 3);
		buf_u32(b, IO_GGUF_UINT8);
		buf_u8(b, 1);
	}
	if (f->align_set) {
		buf_key(b, "general.alignment", f->align_type);
		if (f->align_type == IO_GGUF_UINT64)
			buf_u64(b, f->align);
		else
			buf_u32(b, f->align);
	}
	if (f->split_no >= 0) {
		buf_key(b, "split.no", IO_GGUF_UINT16);
		buf_u16(b, (uint16_t)f->split_no);
	}
	if (f->split_count >= 0) {
		buf_key(b, "split.count", IO_GGUF_UINT16);
		buf_u16(b, (uint16_t)f->split_count);
	}
	if (f->split_tensors >= 0) {
		buf_key(b, "split.tensors.count", IO_GGUF_INT32);
		buf_u32(b, (uint32_t)f->split_tensors);
	}
}

/* The whole file into b (emptied first). */
static inline void fx_build(struct buf *b, const struct fx *f)
{
	uint32_t align = f->align_set && f->align ? f->align : 32;
	uint64_t i;
	int k;

	b->n = 0;
	buf_put(b, f->magic, 4);
	buf_u32(b, f->version);
	buf_u64(b, f->n_tensors_set ? f->n_tensors : (uint64_t)f->n_t);
	buf_u64(b, f->n_kv_set ? f->n_kv : fx_kv_count(f));
	fx_kvs(b, f);
	for (k = 0; k < f->n_t; k++) {
		const struct fx_tensor *t = &f->t[k];
		uint32_t d;

		buf_str(b, t->name);
		buf_u32(b, t->n_dims);
		for (d = 0; d < t->n_dims && d < 5; d++)
			buf_u64(b, (uint64_t)t->ne[d]);
		buf_u32(b, t->type);
		buf_u64(b, t->offset);
	}
	while (b->n % align)
		buf_u8(b, 0);
	for (i = 0; i < f->data_bytes; i++)
		buf_u8(b, (uint8_t)(i * 37 + 11));
}

/* Write n bytes of b to path. */
static inline void fx_write(const char *path, const struct buf *b, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, b->p, n), (ssize_t)n);
	close(fd);
}

#endif
