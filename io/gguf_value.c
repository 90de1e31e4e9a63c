/* SPDX-License-Identifier: MIT */
/*
 * The lower half of the GGUF reader: buffered reads checked against the
 * file size, metadata values (scalars, strings, arrays nested up to
 * GGUF_MAX_DEPTH), and the name sets used to refuse duplicates.
 *
 * Counts come from the file and may be lies, so arrays of strings or
 * arrays are grown as their elements actually arrive: memory stays a small
 * multiple of the bytes really read, whatever count the header claims.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf_internal.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host, as GGUF files are"
#endif

/* ---- reading ----------------------------------------------------------- */

static int gguf_reader_fill(struct gguf_reader *r)
{
	uint64_t left = r->size - r->pos;
	size_t want = left < GGUF_READER_BUF ? (size_t)left : GGUF_READER_BUF;
	ssize_t got;

	do
		got = pread(r->fd, r->buf, want, (off_t)r->pos);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return err_set(r->err, errno,
			       "%s: read at offset %" PRIu64 ": %s", r->path,
			       r->pos, strerror(errno));
	if (got == 0)
		return err_set(r->err, EINVAL,
			       "%s: file shrank while being "
			       "read (at offset %" PRIu64 ")",
			       r->path, r->pos);
	r->buf_off = r->pos;
	r->buf_len = (size_t)got;
	return 0;
}

int gguf_reader_bytes(struct gguf_reader *r, void *dst, uint64_t n)
{
	unsigned char *out = dst;
	int ret;

	if (n > r->size - r->pos)
		return err_set(r->err, EINVAL,
			       "%s: truncated: %s needs %" PRIu64
			       " bytes at offset %" PRIu64 ", the file "
			       "ends at %" PRIu64,
			       r->path, r->what, n, r->pos, r->size);
	while (n) {
		uint64_t in, take;

		if (r->pos < r->buf_off || r->pos >= r->buf_off + r->buf_len) {
			ret = gguf_reader_fill(r);
			if (ret)
				return ret;
		}
		in = r->buf_off + r->buf_len - r->pos;
		take = n < in ? n : in;
		memcpy(out, r->buf + (r->pos - r->buf_off), (size_t)take);
		out += take;
		r->pos += take;
		n -= take;
	}
	return 0;
}

int gguf_reader_u32(struct gguf_reader *r, uint32_t *v)
{
	return gguf_reader_bytes(r, v, sizeof(*v));
}

int gguf_reader_u64(struct gguf_reader *r, uint64_t *v)
{
	return gguf_reader_bytes(r, v, sizeof(*v));
}

int gguf_reader_string(struct gguf_reader *r, struct io_gguf_string *s)
{
	uint64_t at = r->pos;
	uint64_t len;
	int ret;

	s->len = 0;
	s->data = NULL;
	ret = gguf_reader_u64(r, &len);
	if (ret)
		return ret;
	if (len > gguf_reader_left(r))
		return err_set(r->err, EINVAL,
			       "%s: %s: string length %" PRIu64
			       " at offset %" PRIu64
			       " runs past the end of the "
			       "file (%" PRIu64 " bytes left)",
			       r->path, r->what, len, at, gguf_reader_left(r));
	if (len > GGUF_MAX_STRING)
		return err_set(r->err, EINVAL,
			       "%s: %s: string of %" PRIu64
			       " bytes at offset %" PRIu64 " is over the %llu "
			       "byte limit",
			       r->path, r->what, len, at, GGUF_MAX_STRING);
	s->data = malloc((size_t)len + 1);
	if (!s->data)
		return err_set(r->err, ENOMEM,
			       "%s: out of memory for a "
			       "string of %" PRIu64 " bytes",
			       r->path, len);
	ret = gguf_reader_bytes(r, s->data, len);
	if (ret) {
		free(s->data);
		s->data = NULL;
		return ret;
	}
	s->data[len] = '\0';
	s->len = len;
	return 0;
}

int gguf_grow(void **p, uint64_t *cap, uint64_t need, size_t elem)
{
	uint64_t ncap = *cap ? *cap : 16;
	uint64_t bytes;
	void *np;

	if (need <= *cap)
		return 0;
	while (ncap < need) {
		if (ncap > UINT64_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	if (__builtin_mul_overflow(ncap, (uint64_t)elem, &bytes) ||
	    bytes > SIZE_MAX)
		return -ENOMEM;
	np = realloc(*p, (size_t)bytes);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

/* ---- values ------------------------------------------------------------ */

static const char *const gguf_type_names[] = {
	"uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
	"bool",	 "string", "array",  "uint64", "int64",	 "float64",
};

/* Bytes of a packed number or bool element; 0 for string/array/invalid. */
static size_t gguf_scalar_size(uint32_t type)
{
	switch (type) {
	case IO_GGUF_UINT8:
	case IO_GGUF_INT8:
	case IO_GGUF_BOOL: return 1;
	case IO_GGUF_UINT16:
	case IO_GGUF_INT16: return 2;
	case IO_GGUF_UINT32:
	case IO_GGUF_INT32:
	case IO_GGUF_FLOAT32: return 4;
	case IO_GGUF_UINT64:
	case IO_GGUF_INT64:
	case IO_GGUF_FLOAT64: return 8;
	default: return 0;
	}
}

uint64_t gguf_value_min_bytes(uint32_t type)
{
	if (type == IO_GGUF_STRING)
		return 8; /* the length */
	if (type == IO_GGUF_ARRAY)
		return 4 + 8; /* element type and count */
	return gguf_scalar_size(type);
}

static void gguf_array_free(struct io_gguf_array *a)
{
	uint64_t i;

	if (a->type == IO_GGUF_STRING) {
		struct io_gguf_string *s = a->data;

		for (i = 0; i < a->n; i++)
			free(s[i].data);
	} else if (a->type == IO_GGUF_ARRAY) {
		struct io_gguf_array *sub = a->data;

		for (i = 0; i < a->n; i++)
			gguf_array_free(&sub[i]);
	}
	free(a->data);
	a->data = NULL;
	a->n = 0;
}

void gguf_value_free(struct io_gguf_value *v)
{
	if (v->type == IO_GGUF_STRING) {
		free(v->str.data);
		v->str.data = NULL;
	} else if (v->type == IO_GGUF_ARRAY) {
		gguf_array_free(&v->arr);
	}
}

static int gguf_array_read(struct gguf_reader *r, struct io_gguf_array *a,
			   int depth);

/* Elements of a string or array array, grown as they arrive. */
static int gguf_array_read_items(struct gguf_reader *r, struct io_gguf_array *a,
				 uint64_t n, int depth)
{
	size_t elem = a->type == IO_GGUF_STRING ?
			      sizeof(struct io_gguf_string) :
			      sizeof(struct io_gguf_array);
	uint64_t cap = 0;
	int ret;

	while (a->n < n) {
		if (gguf_grow(&a->data, &cap, a->n + 1, elem))
			return err_set(r->err, ENOMEM,
				       "%s: %s: out of memory "
				       "for %" PRIu64 " array elements",
				       r->path, r->what, a->n + 1);
		if (a->type == IO_GGUF_STRING) {
			struct io_gguf_string *s = a->data;

			ret = gguf_reader_string(r, &s[a->n]);
		} else {
			struct io_gguf_array *sub = a->data;
			uint32_t type;
			uint64_t m;

			sub[a->n].type = IO_GGUF_UINT8;
			sub[a->n].n = 0;
			sub[a->n].data = NULL;
			ret = gguf_reader_u32(r, &type);
			if (!ret)
				ret = gguf_reader_u64(r, &m);
			if (ret)
				return ret;
			sub[a->n].type = type;
			sub[a->n].n = m;
			ret = gguf_array_read(r, &sub[a->n], depth + 1);
			if (ret)
				gguf_array_free(&sub[a->n]);
		}
		if (ret)
			return ret;
		a->n++;
	}
	return 0;
}

/*
 * On entry a->type and a->n hold the element type and count from the file;
 * on failure a holds what was read so far, to be freed with
 * gguf_array_free().
 */
static int gguf_array_read(struct gguf_reader *r, struct io_gguf_array *a,
			   int depth)
{
	uint64_t n = a->n, min = gguf_value_min_bytes(a->type);
	size_t size = gguf_scalar_size(a->type);
	uint64_t i;
	int ret;

	a->n = 0;
	a->data = NULL;
	if (!min) {
		uint32_t type = a->type;

		a->type = IO_GGUF_UINT8;
		return err_set(r->err, EINVAL,
			       "%s: %s: unknown array element "
			       "type %" PRIu32,
			       r->path, r->what, type);
	}
	if (a->type == IO_GGUF_ARRAY && depth >= GGUF_MAX_DEPTH)
		return err_set(r->err, EINVAL,
			       "%s: %s: arrays nested deeper "
			       "than %d",
			       r->path, r->what, GGUF_MAX_DEPTH);
	if (n > gguf_reader_left(r) / min)
		return err_set(r->err, EINVAL,
			       "%s: %s: array of %" PRIu64
			       " %s elements cannot fit in the %" PRIu64
			       " bytes left after offset %" PRIu64,
			       r->path, r->what, n, gguf_type_names[a->type],
			       gguf_reader_left(r), r->pos);
	if (!size)
		return gguf_array_read_items(r, a, n, depth);

	/* n * size <= bytes left, so this allocation is bounded by the file */
	a->data = malloc(n ? (size_t)(n * size) : 1);
	if (!a->data)
		return err_set(r->err, ENOMEM,
			       "%s: %s: out of memory for %" PRIu64
			       " array elements",
			       r->path, r->what, n);
	ret = gguf_reader_bytes(r, a->data, n * size);
	if (ret)
		return ret;
	if (a->type == IO_GGUF_BOOL) {
		uint8_t *b = a->data;

		for (i = 0; i < n; i++)
			b[i] = b[i] != 0;
	}
	a->n = n;
	return 0;
}

int gguf_value_read(struct gguf_reader *r, struct io_gguf_value *v,
		    uint32_t type)
{
	union {
		uint8_t u8;
		int8_t i8;
		uint16_t u16;
		int16_t i16;
		uint32_t u32;
		int32_t i32;
		float f32;
		uint64_t u64;
		int64_t i64;
		double f64;
	} x;
	size_t size = gguf_scalar_size(type);
	int ret;

	memset(v, 0, sizeof(*v));
	v->type = IO_GGUF_UINT8;
	if (type == IO_GGUF_STRING) {
		v->type = IO_GGUF_STRING;
		return gguf_reader_string(r, &v->str);
	}
	if (type == IO_GGUF_ARRAY) {
		uint32_t et;
		uint64_t n;

		ret = gguf_reader_u32(r, &et);
		if (!ret)
			ret = gguf_reader_u64(r, &n);
		if (ret)
			return ret;
		v->type = IO_GGUF_ARRAY;
		v->arr.type = et;
		v->arr.n = n;
		return gguf_array_read(r, &v->arr, 0);
	}
	if (!size)
		return err_set(r->err, EINVAL,
			       "%s: %s: unknown value type %" PRIu32, r->path,
			       r->what, type);
	ret = gguf_reader_bytes(r, &x, size);
	if (ret)
		return ret;
	v->type = type;
	switch (type) {
	case IO_GGUF_UINT8: v->u64 = x.u8; break;
	case IO_GGUF_INT8: v->i64 = x.i8; break;
	case IO_GGUF_UINT16: v->u64 = x.u16; break;
	case IO_GGUF_INT16: v->i64 = x.i16; break;
	case IO_GGUF_UINT32: v->u64 = x.u32; break;
	case IO_GGUF_INT32: v->i64 = x.i32; break;
	case IO_GGUF_FLOAT32: v->f64 = x.f32; break;
	case IO_GGUF_BOOL: v->b = x.u8 != 0; break;
	case IO_GGUF_UINT64: v->u64 = x.u64; break;
	case IO_GGUF_INT64: v->i64 = x.i64; break;
	case IO_GGUF_FLOAT64: v->f64 = x.f64; break;
	}
	return 0;
}

/* ---- name sets --------------------------------------------------------- */

struct gguf_name_slot {
	const char *name; /* NULL: empty */
	uint64_t idx;
};

static uint64_t gguf_name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 0x100000001b3ull;
	}
	return h;
}

static struct gguf_name_slot *gguf_names_slot(struct gguf_name_slot *slot,
					      uint64_t cap, const char *name)
{
	uint64_t i = gguf_name_hash(name) & (cap - 1);

	while (slot[i].name && strcmp(slot[i].name, name))
		i = (i + 1) & (cap - 1);
	return &slot[i];
}

static int gguf_names_rehash(struct gguf_names *s, uint64_t cap)
{
	struct gguf_name_slot *slot = calloc((size_t)cap, sizeof(*slot));
	uint64_t i;

	if (!slot)
		return -ENOMEM;
	for (i = 0; i < s->cap; i++)
		if (s->slot[i].name)
			*gguf_names_slot(slot, cap,
					 s->slot[i].name) = s->slot[i];
	free(s->slot);
	s->slot = slot;
	s->cap = cap;
	return 0;
}

int gguf_names_add(struct gguf_names *s, const char *name, uint64_t idx)
{
	struct gguf_name_slot *e;

	/* keep the load under one half */
	if ((s->n + 1) * 2 > s->cap) {
		uint64_t cap = s->cap ? s->cap * 2 : 64;

		if (cap > SIZE_MAX / sizeof(*s->slot) ||
		    gguf_names_rehash(s, cap))
			return -ENOMEM;
	}
	e = gguf_names_slot(s->slot, s->cap, name);
	if (e->name)
		return -EEXIST;
	e->name = name;
	e->idx = idx;
	s->n++;
	return 0;
}

int64_t gguf_names_find(const struct gguf_names *s, const char *name)
{
	const struct gguf_name_slot *e;

	if (!s->cap || !name)
		return -1;
	e = gguf_names_slot(s->slot, s->cap, name);
	return e->name ? (int64_t)e->idx : -1;
}

void gguf_names_free(struct gguf_names *s)
{
	free(s->slot);
	s->slot = NULL;
	s->cap = 0;
	s->n = 0;
}
