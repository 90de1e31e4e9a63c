/* SPDX-License-Identifier: MIT */
/*
 * The GGUF v2/v3 reader: header, metadata, tensor infos, and split models
 * (NAME-00001-of-0000N.gguf read as one). Nothing of the tensor data is
 * read here; every tensor's offset and size is checked against its file so
 * that io/weights can read them blindly.
 *
 * The layout, as ggml/src/gguf.cpp writes it (all little-endian):
 *
 *   "GGUF" u32 version u64 n_tensors u64 n_kv
 *   n_kv      x { string key, u32 type, value }
 *   n_tensors x { string name, u32 n_dims, i64 ne[n_dims], u32 type,
 *                 u64 offset }
 *   padding to general.alignment (default 32)
 *   tensor data; each offset is relative to here and aligned
 *
 * A string is u64 length + bytes; an array is u32 element type + u64 count
 * + elements. Try it: build/bin/llmfs-inspect MODEL.gguf.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_internal.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME 64 /* ggml's GGML_MAX_NAME, with the NUL */

/* Smallest possible kv and tensor info, to bound counts by the file. */
#define GGUF_MIN_KV_BYTES (8 + 1 + 4 + 1)
#define GGUF_MIN_TENSOR_BYTES (8 + 1 + 4 + 4 + 8)

/* What io_gguf_open returns points at pub; the rest is private. */
struct gguf_model {
	struct io_gguf pub;
	struct gguf_names kv_names;	/* into pub.kv */
	struct gguf_names tensor_names; /* into pub.tensors, all files */
	uint64_t tensor_cap;
};

/* The metadata of one file of a split model. */
struct gguf_kvset {
	struct io_gguf_kv *kv;
	uint64_t n, cap;
	struct gguf_names names;
};

static struct gguf_model *gguf_model_of(const struct io_gguf *g)
{
	return (struct gguf_model *)((char *)g -
				     offsetof(struct gguf_model, pub));
}

static void gguf_kvset_free(struct gguf_kvset *s)
{
	uint64_t i;

	for (i = 0; i < s->n; i++) {
		free(s->kv[i].key);
		gguf_value_free(&s->kv[i].value);
	}
	free(s->kv);
	gguf_names_free(&s->names);
	memset(s, 0, sizeof(*s));
}

static const struct io_gguf_kv *gguf_kvset_find(const struct gguf_kvset *s,
						const char *key)
{
	int64_t i = gguf_names_find(&s->names, key);

	return i < 0 ? NULL : &s->kv[i];
}

/* r->what = "<kind> '<name>'", with bytes that would break a line shown as ? */
static void gguf_what_set(struct gguf_reader *r, const char *kind,
			  const char *name)
{
	size_t n = (size_t)snprintf(r->what, sizeof(r->what), "%s '", kind);
	size_t max = sizeof(r->what) - 5;

	while (*name && n < max) {
		unsigned char c = (unsigned char)*name++;

		r->what[n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	if (*name)
		r->what[n++] = '.', r->what[n++] = '.';
	r->what[n++] = '\'';
	r->what[n] = '\0';
}

static int gguf_kv_read(struct gguf_reader *r, struct gguf_kvset *s, uint64_t i)
{
	struct io_gguf_kv *kv;
	struct io_gguf_string key;
	uint32_t type;
	int ret;

	snprintf(r->what, sizeof(r->what), "key %" PRIu64, i);
	if (gguf_grow((void **)&s->kv, &s->cap, s->n + 1, sizeof(*s->kv)))
		return err_set(r->err, ENOMEM,
			       "%s: out of memory for %" PRIu64 " keys",
			       r->path, s->n + 1);
	ret = gguf_reader_string(r, &key);
	if (ret)
		return ret;
	kv = &s->kv[s->n++];
	memset(kv, 0, sizeof(*kv));
	kv->key = key.data;
	if (!key.len)
		return err_set(r->err, EINVAL, "%s: key %" PRIu64 " is empty",
			       r->path, i);
	gguf_what_set(r, "key", key.data);
	if (strlen(key.data) != key.len)
		return err_set(r->err, EINVAL, "%s: %s holds a NUL byte",
			       r->path, r->what);
	ret = gguf_names_add(&s->names, kv->key, s->n - 1);
	if (ret == -EEXIST)
		return err_set(r->err, EINVAL, "%s: duplicate %s", r->path,
			       r->what);
	if (ret)
		return err_set(r->err, ENOMEM, "%s: out of memory", r->path);
	ret = gguf_reader_u32(r, &type);
	if (ret)
		return ret;
	return gguf_value_read(r, &kv->value, type);
}

/* The alignment general.alignment asks for, checked, into *align. */
static int gguf_alignment(struct gguf_reader *r, const struct gguf_kvset *s,
			  uint32_t *align)
{
	const struct io_gguf_kv *kv = gguf_kvset_find(s, "general.alignment");
	uint64_t a;

	*align = GGUF_DEFAULT_ALIGNMENT;
	if (!kv)
		return 0;
	if (kv->value.type != IO_GGUF_UINT32)
		return err_set(r->err, EINVAL,
			       "%s: general.alignment must be "
			       "a uint32 (it has type %d)",
			       r->path, (int)kv->value.type);
	a = kv->value.u64;
	if (!a || (a & (a - 1)))
		return err_set(r->err, EINVAL,
			       "%s: general.alignment %" PRIu64
			       " is not a power of two",
			       r->path, a);
	*align = (uint32_t)a;
	return 0;
}

/* Shape, type and size of one tensor info; t->offset stays relative. */
static int gguf_tensor_shape(struct gguf_reader *r, struct io_gguf_tensor *t)
{
	const struct io_type_info *ti;
	uint64_t row, rows = 1, elems;
	uint32_t i;
	int ret;

	ret = gguf_reader_u32(r, &t->n_dims);
	if (ret)
		return ret;
	if (t->n_dims > IO_GGUF_MAX_DIMS)
		return err_set(r->err, EINVAL,
			       "%s: %s has %" PRIu32 " "
			       "dimensions (at most %d)",
			       r->path, r->what, t->n_dims, IO_GGUF_MAX_DIMS);
	for (i = 0; i < IO_GGUF_MAX_DIMS; i++)
		t->ne[i] = 1;
	for (i = 0; i < t->n_dims; i++) {
		ret = gguf_reader_bytes(r, &t->ne[i], sizeof(t->ne[i]));
		if (ret)
			return ret;
		if (t->ne[i] <= 0)
			return err_set(r->err, EINVAL,
				       "%s: %s: dimension %" PRIu32
				       " is %" PRId64,
				       r->path, r->what, i, t->ne[i]);
	}
	ret = gguf_reader_u32(r, &t->type);
	if (ret)
		return ret;
	ti = io_type_info(t->type);
	if (!ti)
		return err_set(r->err, EINVAL,
			       "%s: %s has unknown type %" PRIu32, r->path,
			       r->what, t->type);
	ret = io_type_row_bytes(t->type, t->ne[0], &row);
	if (ret == -EINVAL)
		return err_set(r->err, EINVAL,
			       "%s: %s: row of %" PRId64 " "
			       "elements is not a multiple of the %s block "
			       "size %" PRIu32,
			       r->path, r->what, t->ne[0], ti->name,
			       ti->block_elems);
	/* ggml counts elements in an int64 */
	if (ret ||
	    __builtin_mul_overflow((uint64_t)t->ne[1], (uint64_t)t->ne[2],
				   &rows) ||
	    __builtin_mul_overflow(rows, (uint64_t)t->ne[3], &rows) ||
	    __builtin_mul_overflow(rows, (uint64_t)t->ne[0], &elems) ||
	    elems > INT64_MAX || __builtin_mul_overflow(row, rows, &t->bytes))
		return err_set(r->err, EINVAL,
			       "%s: %s: shape [%" PRId64 ", %" PRId64
			       ", %" PRId64 ", %" PRId64 "] is too "
			       "large",
			       r->path, r->what, t->ne[0], t->ne[1], t->ne[2],
			       t->ne[3]);
	return 0;
}

static int gguf_tensor_read(struct gguf_reader *r, struct gguf_model *m,
			    uint32_t file, uint32_t align, uint64_t i)
{
	struct io_gguf_tensor *t;
	struct io_gguf_string name;
	int64_t other;
	int ret;

	snprintf(r->what, sizeof(r->what), "tensor %" PRIu64, i);
	if (gguf_grow((void **)&m->pub.tensors, &m->tensor_cap,
		      m->pub.n_tensors + 1, sizeof(*m->pub.tensors)))
		return err_set(r->err, ENOMEM,
			       "%s: out of memory for %" PRIu64 " tensors",
			       r->path, m->pub.n_tensors + 1);
	ret = gguf_reader_string(r, &name);
	if (ret)
		return ret;
	t = &m->pub.tensors[m->pub.n_tensors++];
	memset(t, 0, sizeof(*t));
	t->name = name.data;
	t->file = file;
	if (!name.len)
		return err_set(r->err, EINVAL,
			       "%s: tensor %" PRIu64 " has an "
			       "empty name",
			       r->path, i);
	gguf_what_set(r, "tensor", name.data);
	if (strlen(name.data) != name.len)
		return err_set(r->err, EINVAL, "%s: %s: name holds a NUL byte",
			       r->path, r->what);
	if (name.len >= GGUF_MAX_NAME)
		return err_set(r->err, EINVAL,
			       "%s: %s: name of %" PRIu64
			       " bytes is longer than ggml's %d",
			       r->path, r->what, name.len, GGUF_MAX_NAME - 1);
	other = gguf_names_find(&m->tensor_names, t->name);
	if (other >= 0)
		return err_set(r->err, EINVAL,
			       "%s: duplicate %s (tensors %" PRId64
			       " and %" PRIu64 ")",
			       r->path, r->what, other, m->pub.n_tensors - 1);
	if (gguf_names_add(&m->tensor_names, t->name, m->pub.n_tensors - 1))
		return err_set(r->err, ENOMEM, "%s: out of memory", r->path);
	ret = gguf_tensor_shape(r, t);
	if (!ret)
		ret = gguf_reader_u64(r, &t->offset);
	if (ret)
		return ret;
	if (t->offset % align)
		return err_set(r->err, EINVAL,
			       "%s: %s: offset %" PRIu64 " is "
			       "not a multiple of the alignment %" PRIu32,
			       r->path, r->what, t->offset, align);
	return 0;
}

/* Tensors first..n-1 belong to file f: place them in it, or refuse. */
static int gguf_tensors_place(struct gguf_reader *r, struct gguf_model *m,
			      struct io_gguf_file *f, uint64_t first)
{
	uint64_t i, room = f->size - f->data_offset;

	for (i = first; i < m->pub.n_tensors; i++) {
		struct io_gguf_tensor *t = &m->pub.tensors[i];

		if (t->offset > room || t->bytes > room - t->offset) {
			gguf_what_set(r, "tensor", t->name);
			return err_set(r->err, EINVAL,
				       "%s: %s: %" PRIu64
				       " bytes at data offset %" PRIu64 " run "
				       "past the end of the file (%" PRIu64
				       " data bytes)",
				       r->path, r->what, t->bytes, t->offset,
				       room);
		}
		t->offset += f->data_offset;
		if (__builtin_add_overflow(m->pub.tensor_bytes, t->bytes,
					   &m->pub.tensor_bytes))
			return err_set(r->err, EOVERFLOW,
				       "%s: total tensor "
				       "size overflows",
				       r->path);
	}
	return 0;
}

static int gguf_header_read(struct gguf_reader *r, uint32_t *version,
			    uint64_t *n_tensors, uint64_t *n_kv)
{
	char magic[4];
	int ret;

	snprintf(r->what, sizeof(r->what), "the header");
	ret = gguf_reader_bytes(r, magic, sizeof(magic));
	if (ret)
		return ret;
	if (memcmp(magic, GGUF_MAGIC, 4))
		return err_set(r->err, EINVAL,
			       "%s: not a GGUF file (magic "
			       "%02x %02x %02x %02x)",
			       r->path, (unsigned char)magic[0],
			       (unsigned char)magic[1], (unsigned char)magic[2],
			       (unsigned char)magic[3]);
	ret = gguf_reader_u32(r, version);
	if (ret)
		return ret;
	if (*version == 1)
		return err_set(r->err, EINVAL,
			       "%s: GGUF version 1 is not "
			       "supported (only 2 and 3)",
			       r->path);
	if (*version == 0x02000000 || *version == 0x03000000)
		return err_set(r->err, EINVAL,
			       "%s: big-endian GGUF files are "
			       "not supported",
			       r->path);
	if (*version != 2 && *version != 3)
		return err_set(r->err, EINVAL,
			       "%s: unknown GGUF version %" PRIu32
			       " (only 2 and 3)",
			       r->path, *version);
	ret = gguf_reader_u64(r, n_tensors);
	if (!ret)
		ret = gguf_reader_u64(r, n_kv);
	if (ret)
		return ret;
	if (*n_kv > gguf_reader_left(r) / GGUF_MIN_KV_BYTES)
		return err_set(r->err, EINVAL,
			       "%s: %" PRIu64 " keys cannot "
			       "fit in the %" PRIu64 " bytes of the file",
			       r->path, *n_kv, r->size);
	if (*n_tensors > gguf_reader_left(r) / GGUF_MIN_TENSOR_BYTES)
		return err_set(r->err, EINVAL,
			       "%s: %" PRIu64 " tensors cannot"
			       " fit in the %" PRIu64 " bytes of the file",
			       r->path, *n_tensors, r->size);
	return 0;
}

/*
 * Parse file number fi of m (its path and nothing else set): metadata into
 * *kvs, tensors appended to m with their absolute offsets.
 */
static int gguf_file_read(struct gguf_model *m, uint32_t fi,
			  struct gguf_kvset *kvs, uint32_t *version,
			  uint32_t *align, struct err *err)
{
	struct io_gguf_file *f = &m->pub.files[fi];
	struct gguf_reader r = { .fd = -1, .path = f->path, .err = err };
	uint64_t n_tensors, n_kv, i, first = m->pub.n_tensors;
	struct stat st;
	int ret;

	r.fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (r.fd < 0)
		return err_set(err, errno, "%s: %s", f->path, strerror(errno));
	if (fstat(r.fd, &st)) {
		ret = err_set(err, errno, "%s: %s", f->path, strerror(errno));
		goto out_close;
	}
	if (S_ISDIR(st.st_mode)) {
		ret = err_set(err, EISDIR, "%s: is a directory", f->path);
		goto out_close;
	}
	f->size = r.size = (uint64_t)st.st_size;
	r.buf = malloc(GGUF_READER_BUF);
	if (!r.buf) {
		ret = err_set(err, ENOMEM, "%s: out of memory", f->path);
		goto out_close;
	}
	ret = gguf_header_read(&r, version, &n_tensors, &n_kv);
	for (i = 0; !ret && i < n_kv; i++)
		ret = gguf_kv_read(&r, kvs, i);
	if (!ret)
		ret = gguf_alignment(&r, kvs, align);
	for (i = 0; !ret && i < n_tensors; i++)
		ret = gguf_tensor_read(&r, m, fi, *align, i);
	if (ret)
		goto out_free;
	/* r.pos <= size < 2^63, so this cannot wrap */
	f->data_offset = (r.pos + *align - 1) / *align * *align;
	if (n_tensors && f->data_offset > f->size) {
		ret = err_set(err, EINVAL,
			      "%s: truncated: the data section "
			      "would start at %" PRIu64
			      ", past the end (%" PRIu64 ")",
			      f->path, f->data_offset, f->size);
		goto out_free;
	}
	if (f->data_offset > f->size)
		f->data_offset = f->size;
	ret = gguf_tensors_place(&r, m, f, first);
out_free:
	free(r.buf);
out_close:
	close(r.fd);
	return ret;
}

/* ---- split models ------------------------------------------------------ */

/* The 5 decimal digits ending just before end, as %05d writes them. */
static const char *gguf_digits_back(const char *begin, const char *end,
				    unsigned long *v)
{
	const char *p = end;
	unsigned long x = 0, scale = 1;

	while (p > begin && p[-1] >= '0' && p[-1] <= '9' && end - p < 5) {
		p--;
		x += (unsigned long)(*p - '0') * scale;
		scale *= 10;
	}
	if (end - p < 5)
		return NULL;
	*v = x;
	return p;
}

/*
 * Does path name a part, PREFIX-NNNNN-of-MMMMM.gguf (llama.cpp's
 * llama_split_path)? Then *prefix_len, *no (1-based) and *count.
 */
static bool gguf_split_name(const char *path, size_t *prefix_len,
			    unsigned long *no, unsigned long *count)
{
	size_t len = strlen(path);
	const char *end = path + len, *p;

	if (len < 5 || strcmp(end - 5, ".gguf"))
		return false;
	p = gguf_digits_back(path, end - 5, count);
	if (!p || p - path < 4 || memcmp(p - 4, "-of-", 4))
		return false;
	p = gguf_digits_back(path, p - 4, no);
	if (!p || p == path || p[-1] != '-')
		return false;
	*prefix_len = (size_t)(p - 1 - path);
	return true;
}

/* A key's integer value, -1 if absent or not a non-negative integer. */
static int64_t gguf_kvset_int(const struct gguf_kvset *s, const char *key)
{
	const struct io_gguf_kv *kv = gguf_kvset_find(s, key);

	if (!kv)
		return -1;
	switch (kv->value.type) {
	case IO_GGUF_UINT8:
	case IO_GGUF_UINT16:
	case IO_GGUF_UINT32:
	case IO_GGUF_UINT64:
		return kv->value.u64 > INT64_MAX ? -1 : (int64_t)kv->value.u64;
	case IO_GGUF_INT8:
	case IO_GGUF_INT16:
	case IO_GGUF_INT32:
	case IO_GGUF_INT64: return kv->value.i64 < 0 ? -1 : kv->value.i64;
	default: return -1;
	}
}

/*
 * How many files the model at path spans, from its name and the split.*
 * keys of its first part (kvs); refuses a later part or a mismatch.
 */
static int gguf_split_count(const char *path, const struct gguf_kvset *kvs,
			    uint32_t *n, size_t *prefix_len, struct err *err)
{
	int64_t count = gguf_kvset_int(kvs, "split.count");
	int64_t idx = gguf_kvset_int(kvs, "split.no");
	unsigned long no, parts;

	*n = 1;
	if (!gguf_split_name(path, prefix_len, &no, &parts) || parts <= 1) {
		if (count > 1)
			return err_set(err, EINVAL,
				       "%s: split.count is %" PRId64
				       " but the name is not "
				       "NAME-00001-of-%05" PRId64 ".gguf",
				       path, count, count);
		return 0;
	}
	if (no != 1 || idx > 0)
		return err_set(err, EINVAL,
			       "%s: part %lu of %lu of a split "
			       "model; open part 00001",
			       path, idx > 0 ? (unsigned long)idx + 1 : no,
			       parts);
	if (count >= 0 && (uint64_t)count != parts)
		return err_set(err, EINVAL,
			       "%s: split.count is %" PRId64
			       " but the name says %lu parts",
			       path, count, parts);
	*n = (uint32_t)parts;
	return 0;
}

/* Read parts 2..n of a split model; their metadata is checked and dropped. */
static int gguf_split_read(struct gguf_model *m, const char *path,
			   size_t prefix_len, struct err *err)
{
	struct gguf_kvset kvs = { 0 };
	uint32_t n = m->pub.n_files, i, version, align;
	int64_t idx, count;
	int ret;

	for (i = 1; i < n; i++) {
		if (asprintf(&m->pub.files[i].path,
			     "%.*s-%05" PRIu32 "-of-%05" PRIu32 ".gguf",
			     (int)prefix_len, path, i + 1, n) < 0) {
			m->pub.files[i].path = NULL;
			return err_set(err, ENOMEM, "%s: out of memory", path);
		}
		ret = gguf_file_read(m, i, &kvs, &version, &align, err);
		if (ret)
			goto out;
		idx = gguf_kvset_int(&kvs, "split.no");
		count = gguf_kvset_int(&kvs, "split.count");
		if ((idx >= 0 && idx != i) || (count >= 0 && count != n)) {
			ret = err_set(err, EINVAL,
				      "%s: split.no/split.count "
				      "say part %" PRId64 " of %" PRId64
				      ", expected %" PRIu32 " of %" PRIu32,
				      m->pub.files[i].path, idx + 1, count,
				      i + 1, n);
			goto out;
		}
		gguf_kvset_free(&kvs);
	}
	count = gguf_kvset_int(&(struct gguf_kvset){ .kv = m->pub.kv,
						     .n = m->pub.n_kv,
						     .names = m->kv_names },
			       "split.tensors.count");
	if (count >= 0 && (uint64_t)count != m->pub.n_tensors)
		return err_set(err, EINVAL,
			       "%s: split.tensors.count is %" PRId64
			       " but the %" PRIu32 " parts hold %" PRIu64
			       " tensors",
			       path, count, n, m->pub.n_tensors);
	return 0;
out:
	gguf_kvset_free(&kvs);
	return ret;
}

/* ---- public ------------------------------------------------------------ */

int io_gguf_open(struct io_gguf **out, const char *path, struct err *err)
{
	struct gguf_model *m;
	struct gguf_kvset kvs = { 0 };
	size_t prefix_len = 0;
	uint32_t n;
	void *files;
	int ret;

	*out = NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return err_set(err, ENOMEM, "%s: out of memory", path);
	m->pub.n_files = 1;
	m->pub.files = calloc(1, sizeof(*m->pub.files));
	if (!m->pub.files || !(m->pub.files[0].path = strdup(path))) {
		ret = err_set(err, ENOMEM, "%s: out of memory", path);
		goto out_free;
	}
	ret = gguf_file_read(m, 0, &kvs, &m->pub.version, &m->pub.alignment,
			     err);
	m->pub.kv = kvs.kv;
	m->pub.n_kv = kvs.n;
	m->kv_names = kvs.names;
	if (ret)
		goto out_free;
	ret = gguf_split_count(path, &kvs, &n, &prefix_len, err);
	if (ret || n == 1)
		goto out_done;
	files = calloc(n, sizeof(*m->pub.files));
	if (!files) {
		ret = err_set(err, ENOMEM, "%s: out of memory", path);
		goto out_free;
	}
	memcpy(files, m->pub.files, sizeof(*m->pub.files));
	free(m->pub.files);
	m->pub.files = files;
	m->pub.n_files = n;
	ret = gguf_split_read(m, path, prefix_len, err);
out_done:
	if (!ret) {
		*out = &m->pub;
		return 0;
	}
out_free:
	io_gguf_close(&m->pub);
	return ret;
}

void io_gguf_close(struct io_gguf *g)
{
	struct gguf_model *m;
	uint64_t i;

	if (!g)
		return;
	m = gguf_model_of(g);
	for (i = 0; i < g->n_kv; i++) {
		free(g->kv[i].key);
		gguf_value_free(&g->kv[i].value);
	}
	free(g->kv);
	for (i = 0; i < g->n_tensors; i++)
		free(g->tensors[i].name);
	free(g->tensors);
	for (i = 0; g->files && i < g->n_files; i++)
		free(g->files[i].path);
	free(g->files);
	gguf_names_free(&m->kv_names);
	gguf_names_free(&m->tensor_names);
	free(m);
}

const struct io_gguf_kv *io_gguf_find(const struct io_gguf *g, const char *key)
{
	int64_t i = gguf_names_find(&gguf_model_of(g)->kv_names, key);

	return i < 0 ? NULL : &g->kv[i];
}

const struct io_gguf_tensor *io_gguf_find_tensor(const struct io_gguf *g,
						 const char *name)
{
	int64_t i = gguf_names_find(&gguf_model_of(g)->tensor_names, name);

	return i < 0 ? NULL : &g->tensors[i];
}
