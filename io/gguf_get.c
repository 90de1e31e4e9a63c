/* SPDX-License-Identifier: MIT */
/* Typed getters over a parsed GGUF's metadata (see io.h for the rules). */
#include <errno.h>
#include <string.h>

#include "io.h"

static bool gguf_is_unsigned(enum io_gguf_value_type t)
{
	return t == IO_GGUF_UINT8 || t == IO_GGUF_UINT16 ||
	       t == IO_GGUF_UINT32 || t == IO_GGUF_UINT64;
}

static bool gguf_is_signed(enum io_gguf_value_type t)
{
	return t == IO_GGUF_INT8 || t == IO_GGUF_INT16 || t == IO_GGUF_INT32 ||
	       t == IO_GGUF_INT64;
}

/* The integer value of key if it lies in [lo, hi]. */
static int gguf_get_int(const struct io_gguf *g, const char *key, int64_t lo,
			uint64_t hi, int64_t *out)
{
	const struct io_gguf_kv *kv = io_gguf_find(g, key);

	if (!kv)
		return -ENOENT;
	if (gguf_is_unsigned(kv->value.type)) {
		if (kv->value.u64 > hi)
			return -EINVAL;
		*out = (int64_t)kv->value.u64;
		return 0;
	}
	if (gguf_is_signed(kv->value.type)) {
		if (kv->value.i64 < lo ||
		    (kv->value.i64 > 0 && (uint64_t)kv->value.i64 > hi))
			return -EINVAL;
		*out = kv->value.i64;
		return 0;
	}
	return -EINVAL;
}

int io_gguf_get_u32(const struct io_gguf *g, const char *key, uint32_t *out)
{
	int64_t v;
	int ret = gguf_get_int(g, key, 0, UINT32_MAX, &v);

	if (!ret)
		*out = (uint32_t)v;
	return ret;
}

int io_gguf_get_i32(const struct io_gguf *g, const char *key, int32_t *out)
{
	int64_t v;
	int ret = gguf_get_int(g, key, INT32_MIN, INT32_MAX, &v);

	if (!ret)
		*out = (int32_t)v;
	return ret;
}

int io_gguf_get_f32(const struct io_gguf *g, const char *key, float *out)
{
	const struct io_gguf_kv *kv = io_gguf_find(g, key);

	if (!kv)
		return -ENOENT;
	if (kv->value.type != IO_GGUF_FLOAT32 &&
	    kv->value.type != IO_GGUF_FLOAT64)
		return -EINVAL;
	*out = (float)kv->value.f64;
	return 0;
}

int io_gguf_get_bool(const struct io_gguf *g, const char *key, bool *out)
{
	const struct io_gguf_kv *kv = io_gguf_find(g, key);

	if (!kv)
		return -ENOENT;
	if (kv->value.type != IO_GGUF_BOOL)
		return -EINVAL;
	*out = kv->value.b;
	return 0;
}

const char *io_gguf_get_str(const struct io_gguf *g, const char *key)
{
	const struct io_gguf_kv *kv = io_gguf_find(g, key);

	return kv && kv->value.type == IO_GGUF_STRING ? kv->value.str.data :
							NULL;
}

const struct io_gguf_array *io_gguf_get_array(const struct io_gguf *g,
					      const char *key,
					      enum io_gguf_value_type elem_type)
{
	const struct io_gguf_kv *kv = io_gguf_find(g, key);

	if (!kv || kv->value.type != IO_GGUF_ARRAY ||
	    kv->value.arr.type != elem_type)
		return NULL;
	return &kv->value.arr;
}
