/* SPDX-License-Identifier: MIT */
/*
 * The GGUF v3 writer (see io.h): metadata and tensor infos are kept in
 * memory until io_gguf_writer_begin(), tensor bytes pass through a 1 MiB
 * buffer straight to the file. The layout is gguf.cpp's: header, keys,
 * tensor infos, padding, then each tensor at an aligned offset relative to
 * the data section, padded after it. tools/llmfs-write-model is its user.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf_internal.h"

#define WRITER_BUF (1 << 20)

struct io_gguf_writer {
	uint32_t align;
	struct io_gguf_kv *kv;
	uint64_t n_kv, kv_cap;
	struct gguf_names kv_names;
	struct io_gguf_tensor *t; /* offset: relative to the data */
	uint64_t n_t, t_cap;
	struct gguf_names t_names;
	uint64_t data_bytes; /* end of the last tensor, aligned */

	int fd; /* -1 until begin */
	char *path;
	unsigned char *buf;
	size_t buf_len;
	uint64_t pos; /* bytes of data section written */
	uint64_t cur; /* tensor being written */
	bool finished;
};

/* ---- values in memory -------------------------------------------------- */

static size_t writer_scalar_size(uint32_t type)
{
	static const uint8_t size[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

	return type < sizeof(size) ? size[type] : 0;
}

static void writer_array_free(struct io_gguf_array *a)
{
	uint64_t i;

	if (a->type == IO_GGUF_STRING)
		for (i = 0; i < a->n; i++)
			free(((struct io_gguf_string *)a->data)[i].data);
	else if (a->type == IO_GGUF_ARRAY)
		for (i = 0; i < a->n; i++)
			writer_array_free(
				&((struct io_gguf_array *)a->data)[i]);
	free(a->data);
}

static int writer_str_copy(struct io_gguf_string *d,
			   const struct io_gguf_string *s)
{
	d->len = s->len;
	d->data = malloc(s->len + 1);
	if (!d->data)
		return -ENOMEM;
	memcpy(d->data, s->data, s->len);
	d->data[s->len] = '\0';
	return 0;
}

/* Deep copy; on failure d holds what was copied (free it with the array). */
static int writer_array_copy(struct io_gguf_array *d,
			     const struct io_gguf_array *s, int depth)
{
	size_t size = writer_scalar_size(s->type);
	uint64_t i;
	int ret = 0;

	d->type = s->type;
	d->n = 0;
	if (depth > GGUF_MAX_DEPTH ||
	    (!size && s->type != IO_GGUF_STRING && s->type != IO_GGUF_ARRAY))
		return -EINVAL;
	if (size) {
		if (s->n > SIZE_MAX / size)
			return -ENOMEM;
		d->data = malloc(s->n * size + 1);
		if (!d->data)
			return -ENOMEM;
		memcpy(d->data, s->data, s->n * size);
		d->n = s->n;
		return 0;
	}
	size = s->type == IO_GGUF_STRING ? sizeof(struct io_gguf_string) :
					   sizeof(struct io_gguf_array);
	if (s->n > SIZE_MAX / size)
		return -ENOMEM;
	d->data = calloc(s->n + 1, size);
	if (!d->data)
		return -ENOMEM;
	for (i = 0; !ret && i < s->n; i++, d->n++) {
		if (s->type == IO_GGUF_STRING)
			ret = writer_str_copy(
				&((struct io_gguf_string *)d->data)[i],
				&((const struct io_gguf_string *)s->data)[i]);
		else
			ret = writer_array_copy(
				&((struct io_gguf_array *)d->data)[i],
				&((const struct io_gguf_array *)s->data)[i],
				depth + 1);
	}
	return ret;
}

int io_gguf_writer_new(struct io_gguf_writer **out, uint32_t alignment,
		       struct err *err)
{
	struct io_gguf_writer *w;

	*out = NULL;
	if (!alignment)
		alignment = 32;
	if (alignment & (alignment - 1))
		return err_set(err, EINVAL,
			       "gguf writer: alignment %" PRIu32
			       " is not a power of two",
			       alignment);
	w = calloc(1, sizeof(*w));
	if (!w)
		return err_set(err, ENOMEM, "gguf writer: out of memory");
	w->align = alignment;
	w->fd = -1;
	*out = w;
	if (alignment != 32 &&
	    io_gguf_writer_add_u32(w, "general.alignment", alignment, err)) {
		io_gguf_writer_free(w);
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

void io_gguf_writer_free(struct io_gguf_writer *w)
{
	uint64_t i;

	if (!w)
		return;
	if (w->fd >= 0) {
		close(w->fd);
		if (!w->finished)
			unlink(w->path);
	}
	for (i = 0; i < w->n_kv; i++) {
		free(w->kv[i].key);
		if (w->kv[i].value.type == IO_GGUF_STRING)
			free(w->kv[i].value.str.data);
		else if (w->kv[i].value.type == IO_GGUF_ARRAY)
			writer_array_free(&w->kv[i].value.arr);
	}
	free(w->kv);
	for (i = 0; i < w->n_t; i++)
		free(w->t[i].name);
	free(w->t);
	gguf_names_free(&w->kv_names);
	gguf_names_free(&w->t_names);
	free(w->path);
	free(w->buf);
	free(w);
}

int io_gguf_writer_add(struct io_gguf_writer *w, const char *key,
		       const struct io_gguf_value *v, struct err *err)
{
	struct io_gguf_kv *kv;
	int ret = 0;

	if (w->fd >= 0 || w->finished)
		return err_set(err, EINVAL,
			       "gguf writer: key '%s' added "
			       "after the header was written",
			       key);
	if (!*key || gguf_names_find(&w->kv_names, key) >= 0)
		return err_set(err, EINVAL, "gguf writer: %s key '%s'",
			       *key ? "duplicate" : "empty", key);
	if (gguf_grow((void **)&w->kv, &w->kv_cap, w->n_kv + 1, sizeof(*w->kv)))
		return err_set(err, ENOMEM, "gguf writer: out of memory");
	kv = &w->kv[w->n_kv];
	memset(kv, 0, sizeof(*kv));
	kv->key = strdup(key);
	if (!kv->key)
		return err_set(err, ENOMEM, "gguf writer: out of memory");
	kv->value = *v;
	if (v->type == IO_GGUF_STRING)
		ret = writer_str_copy(&kv->value.str, &v->str);
	else if (v->type == IO_GGUF_ARRAY)
		ret = writer_array_copy(&kv->value.arr, &v->arr, 0);
	else if (!writer_scalar_size(v->type))
		ret = -EINVAL;
	if (!ret)
		ret = gguf_names_add(&w->kv_names, kv->key, w->n_kv);
	if (ret) {
		if (v->type == IO_GGUF_ARRAY)
			writer_array_free(&kv->value.arr);
		else if (v->type == IO_GGUF_STRING)
			free(kv->value.str.data);
		free(kv->key);
		return err_set(err, -ret, "gguf writer: key '%s': %s", key,
			       ret == -EINVAL ? "invalid value type" :
						"out of memory");
	}
	w->n_kv++;
	return 0;
}

int io_gguf_writer_add_u32(struct io_gguf_writer *w, const char *key,
			   uint32_t v, struct err *err)
{
	struct io_gguf_value x = { .type = IO_GGUF_UINT32, .u64 = v };

	return io_gguf_writer_add(w, key, &x, err);
}

int io_gguf_writer_add_i32(struct io_gguf_writer *w, const char *key, int32_t v,
			   struct err *err)
{
	struct io_gguf_value x = { .type = IO_GGUF_INT32, .i64 = v };

	return io_gguf_writer_add(w, key, &x, err);
}

int io_gguf_writer_add_f32(struct io_gguf_writer *w, const char *key, float v,
			   struct err *err)
{
	struct io_gguf_value x = { .type = IO_GGUF_FLOAT32, .f64 = v };

	return io_gguf_writer_add(w, key, &x, err);
}

int io_gguf_writer_add_bool(struct io_gguf_writer *w, const char *key, bool v,
			    struct err *err)
{
	struct io_gguf_value x = { .type = IO_GGUF_BOOL, .b = v };

	return io_gguf_writer_add(w, key, &x, err);
}

int io_gguf_writer_add_str(struct io_gguf_writer *w, const char *key,
			   const char *s, struct err *err)
{
	struct io_gguf_value x = { .type = IO_GGUF_STRING,
				   .str = { strlen(s), (char *)s } };

	return io_gguf_writer_add(w, key, &x, err);
}

int io_gguf_writer_add_array(struct io_gguf_writer *w, const char *key,
			     enum io_gguf_value_type elem_type,
			     const void *data, uint64_t n, struct err *err)
{
	struct io_gguf_value x = { .type = IO_GGUF_ARRAY,
				   .arr = { elem_type, n, (void *)data } };
	struct io_gguf_string *s;
	uint64_t i;
	int ret;

	if (elem_type != IO_GGUF_STRING)
		return io_gguf_writer_add(w, key, &x, err);
	if (n > SIZE_MAX / sizeof(*s))
		return err_set(err, ENOMEM, "gguf writer: out of memory");
	/* borrowed views of the C strings, copied by io_gguf_writer_add */
	s = malloc(n * sizeof(*s) + 1);
	if (!s)
		return err_set(err, ENOMEM, "gguf writer: out of memory");
	for (i = 0; i < n; i++) {
		s[i].data = (char *)((const char *const *)data)[i];
		s[i].len = strlen(s[i].data);
	}
	x.arr.data = s;
	ret = io_gguf_writer_add(w, key, &x, err);
	free(s);
	return ret;
}

int io_gguf_writer_add_tensor(struct io_gguf_writer *w, const char *name,
			      uint32_t type, uint32_t n_dims, const int64_t *ne,
			      struct err *err)
{
	struct io_gguf_tensor *t;
	uint64_t row, rows = 1, end;
	uint32_t i;

	if (w->fd >= 0 || w->finished)
		return err_set(err, EINVAL,
			       "gguf writer: tensor '%s' added "
			       "after the header was written",
			       name);
	if (!*name || strlen(name) >= 64 ||
	    gguf_names_find(&w->t_names, name) >= 0)
		return err_set(err, EINVAL,
			       "gguf writer: tensor name '%s' is "
			       "empty, longer than 63 bytes or a duplicate",
			       name);
	if (n_dims > IO_GGUF_MAX_DIMS)
		return err_set(err, EINVAL,
			       "gguf writer: tensor '%s' has %" PRIu32
			       " dimensions",
			       name, n_dims);
	for (i = 0; i < n_dims; i++)
		if (ne[i] <= 0)
			return err_set(err, EINVAL,
				       "gguf writer: tensor '%s' "
				       "dimension %" PRIu32 " is %" PRId64,
				       name, i, ne[i]);
	if (io_type_row_bytes(type, n_dims ? ne[0] : 1, &row))
		return err_set(err, EINVAL,
			       "gguf writer: tensor '%s': type %" PRIu32
			       " unknown or row not whole blocks",
			       name, type);
	for (i = 1; i < n_dims; i++)
		if (__builtin_mul_overflow(rows, (uint64_t)ne[i], &rows))
			return err_set(err, EOVERFLOW,
				       "gguf writer: tensor "
				       "'%s' is too large",
				       name);
	if (gguf_grow((void **)&w->t, &w->t_cap, w->n_t + 1, sizeof(*w->t)))
		return err_set(err, ENOMEM, "gguf writer: out of memory");
	t = &w->t[w->n_t];
	memset(t, 0, sizeof(*t));
	t->type = type;
	t->n_dims = n_dims;
	for (i = 0; i < IO_GGUF_MAX_DIMS; i++)
		t->ne[i] = i < n_dims ? ne[i] : 1;
	t->offset = w->data_bytes;
	if (__builtin_mul_overflow(row, rows, &t->bytes) ||
	    __builtin_add_overflow(t->offset, t->bytes, &end) ||
	    end > UINT64_MAX - w->align)
		return err_set(err, EOVERFLOW,
			       "gguf writer: tensor '%s' is "
			       "too large",
			       name);
	t->name = strdup(name);
	if (!t->name || gguf_names_add(&w->t_names, t->name, w->n_t)) {
		free(t->name);
		return err_set(err, ENOMEM, "gguf writer: out of memory");
	}
	w->data_bytes = (end + w->align - 1) / w->align * w->align;
	w->n_t++;
	return 0;
}

/* ---- the file ---------------------------------------------------------- */

static int writer_flush(struct io_gguf_writer *w, struct err *err)
{
	size_t done = 0;

	while (done < w->buf_len) {
		ssize_t n = write(w->fd, w->buf + done, w->buf_len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return err_set(err, errno, "%s: write: %s", w->path,
				       strerror(errno));
		done += (size_t)n;
	}
	w->buf_len = 0;
	return 0;
}

static int writer_put(struct io_gguf_writer *w, const void *p, size_t n,
		      struct err *err)
{
	const unsigned char *c = p;
	int ret;

	while (n) {
		size_t take = WRITER_BUF - w->buf_len;

		if (take > n)
			take = n;
		memcpy(w->buf + w->buf_len, c, take);
		w->buf_len += take;
		c += take;
		n -= take;
		if (w->buf_len == WRITER_BUF) {
			ret = writer_flush(w, err);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static int writer_zeros(struct io_gguf_writer *w, uint64_t n, struct err *err)
{
	static const unsigned char zero[64];
	int ret = 0;

	while (!ret && n) {
		size_t take = n < sizeof(zero) ? (size_t)n : sizeof(zero);

		ret = writer_put(w, zero, take, err);
		n -= take;
	}
	return ret;
}

static int writer_str(struct io_gguf_writer *w, const char *s, uint64_t len,
		      struct err *err)
{
	int ret = writer_put(w, &len, sizeof(len), err);

	return ret ? ret : writer_put(w, s, len, err);
}

static int writer_array(struct io_gguf_writer *w, const struct io_gguf_array *a,
			struct err *err)
{
	uint32_t type = a->type;
	uint64_t i;
	int ret;

	ret = writer_put(w, &type, sizeof(type), err);
	if (!ret)
		ret = writer_put(w, &a->n, sizeof(a->n), err);
	if (ret)
		return ret;
	if (writer_scalar_size(a->type))
		return writer_put(w, a->data,
				  a->n * writer_scalar_size(a->type), err);
	for (i = 0; !ret && i < a->n; i++) {
		if (a->type == IO_GGUF_STRING) {
			const struct io_gguf_string *s = &(
				(const struct io_gguf_string *)a->data)[i];

			ret = writer_str(w, s->data, s->len, err);
		} else {
			ret = writer_array(
				w, &((const struct io_gguf_array *)a->data)[i],
				err);
		}
	}
	return ret;
}

static int writer_value(struct io_gguf_writer *w, const struct io_gguf_value *v,
			struct err *err)
{
	union {
		uint8_t u8;
		uint16_t u16;
		uint32_t u32;
		float f32;
		uint64_t u64;
		double f64;
	} x;
	uint32_t type = v->type;
	int ret = writer_put(w, &type, sizeof(type), err);

	if (ret)
		return ret;
	switch (v->type) {
	case IO_GGUF_STRING: return writer_str(w, v->str.data, v->str.len, err);
	case IO_GGUF_ARRAY: return writer_array(w, &v->arr, err);
	case IO_GGUF_BOOL: x.u8 = v->b; break;
	case IO_GGUF_UINT8:
	case IO_GGUF_INT8: x.u8 = (uint8_t)v->u64; break;
	case IO_GGUF_UINT16:
	case IO_GGUF_INT16: x.u16 = (uint16_t)v->u64; break;
	case IO_GGUF_UINT32:
	case IO_GGUF_INT32: x.u32 = (uint32_t)v->u64; break;
	case IO_GGUF_FLOAT32: x.f32 = (float)v->f64; break;
	case IO_GGUF_FLOAT64: x.f64 = v->f64; break;
	default: x.u64 = v->u64; break;
	}
	return writer_put(w, &x, writer_scalar_size(v->type), err);
}

static int writer_header(struct io_gguf_writer *w, struct err *err)
{
	uint32_t version = 3;
	uint64_t i, at;
	int ret;

	ret = writer_put(w, "GGUF", 4, err);
	if (!ret)
		ret = writer_put(w, &version, sizeof(version), err);
	if (!ret)
		ret = writer_put(w, &w->n_t, sizeof(w->n_t), err);
	if (!ret)
		ret = writer_put(w, &w->n_kv, sizeof(w->n_kv), err);
	for (i = 0; !ret && i < w->n_kv; i++) {
		ret = writer_str(w, w->kv[i].key, strlen(w->kv[i].key), err);
		if (!ret)
			ret = writer_value(w, &w->kv[i].value, err);
	}
	for (i = 0; !ret && i < w->n_t; i++) {
		const struct io_gguf_tensor *t = &w->t[i];

		ret = writer_str(w, t->name, strlen(t->name), err);
		if (!ret)
			ret = writer_put(w, &t->n_dims, sizeof(t->n_dims), err);
		if (!ret)
			ret = writer_put(w, t->ne, t->n_dims * sizeof(t->ne[0]),
					 err);
		if (!ret)
			ret = writer_put(w, &t->type, sizeof(t->type), err);
		if (!ret)
			ret = writer_put(w, &t->offset, sizeof(t->offset), err);
	}
	if (ret)
		return ret;
	/* the header bytes written so far: flushed ones plus the buffer */
	at = (uint64_t)lseek(w->fd, 0, SEEK_CUR) + w->buf_len;
	return writer_zeros(w, (w->align - at % w->align) % w->align, err);
}

int io_gguf_writer_begin(struct io_gguf_writer *w, const char *path,
			 struct err *err)
{
	int ret;

	if (w->fd >= 0 || w->finished)
		return err_set(err, EINVAL, "%s: gguf writer already begun",
			       path);
	w->path = strdup(path);
	w->buf = malloc(WRITER_BUF);
	if (!w->path || !w->buf)
		return err_set(err, ENOMEM, "%s: out of memory", path);
	w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0)
		return err_set(err, errno, "%s: %s", path, strerror(errno));
	ret = writer_header(w, err);
	/* tensors of zero bytes need no data */
	while (!ret && w->cur < w->n_t && !w->t[w->cur].bytes)
		w->cur++;
	return ret;
}

int io_gguf_writer_write(struct io_gguf_writer *w, const void *data, size_t n,
			 struct err *err)
{
	const unsigned char *c = data;
	int ret;

	if (w->fd < 0 || w->finished)
		return err_set(err, EINVAL,
			       "gguf writer: data written "
			       "outside begin..finish");
	while (n) {
		const struct io_gguf_tensor *t;
		uint64_t left, take, next;

		if (w->cur >= w->n_t)
			return err_set(err, EINVAL,
				       "%s: %zu bytes of tensor "
				       "data past the last tensor",
				       w->path, n);
		t = &w->t[w->cur];
		left = t->offset + t->bytes - w->pos;
		take = n < left ? n : left;
		ret = writer_put(w, c, (size_t)take, err);
		if (ret)
			return ret;
		w->pos += take;
		c += take;
		n -= take;
		if (w->pos < t->offset + t->bytes)
			continue;
		/* tensor done: pad to the next one (or the end) */
		next = (w->pos + w->align - 1) / w->align * w->align;
		ret = writer_zeros(w, next - w->pos, err);
		if (ret)
			return ret;
		w->pos = next;
		do
			w->cur++;
		while (w->cur < w->n_t && !w->t[w->cur].bytes);
	}
	return 0;
}

int io_gguf_writer_finish(struct io_gguf_writer *w, struct err *err)
{
	int ret;

	if (w->fd < 0 || w->finished)
		return err_set(err, EINVAL,
			       "gguf writer: finish without "
			       "begin");
	if (w->cur < w->n_t)
		return err_set(
			err, EINVAL,
			"%s: tensor '%s' has %" PRIu64 " of %" PRIu64 " bytes",
			w->path, w->t[w->cur].name,
			w->pos - w->t[w->cur].offset, w->t[w->cur].bytes);
	ret = writer_flush(w, err);
	if (ret)
		return ret;
	if (close(w->fd)) {
		w->fd = -1;
		unlink(w->path);
		return err_set(err, errno, "%s: close: %s", w->path,
			       strerror(errno));
	}
	w->fd = -1;
	w->finished = true;
	return 0;
}
