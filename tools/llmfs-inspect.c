/* SPDX-License-Identifier: MIT */
/*
 * llmfs-inspect: print what io/ reads from a GGUF file.
 *
 *   $ build/bin/llmfs-inspect ../shared/models/stories260K.gguf
 *   file ../shared/models/stories260K.gguf: GGUF v3, 1185280 bytes, ...
 *   general.architecture  string  "llama"
 *   tokenizer.ggml.tokens  array[string] x512  "<unk>", "<s>", ...
 *   token_embd.weight  f32  [64, 512]  131072 bytes  @ 1184
 *   ...
 *
 * Arrays are summarized (element type, count, first few items). A file io/
 * refuses gives one line on stderr and exit status 1.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../io/io.h"

#define SHOW_ITEMS 6  /* array elements printed */
#define SHOW_CHARS 60 /* characters of a string printed */

static const char *const type_names[] = {
	"uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
	"bool",	 "string", "array",  "uint64", "int64",	 "float64",
};

/* A string quoted on one line, cut at SHOW_CHARS. */
static void print_str(const struct io_gguf_string *s)
{
	uint64_t i;

	putchar('"');
	for (i = 0; i < s->len && i < SHOW_CHARS; i++) {
		unsigned char c = (unsigned char)s->data[i];

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c == '\n')
			printf("\\n");
		else if (c < 0x20 || c == 0x7f)
			printf("\\x%02x", c);
		else
			putchar(c);
	}
	putchar('"');
	if (s->len > SHOW_CHARS)
		printf("...(%" PRIu64 " bytes)", s->len);
}

static void print_array(const struct io_gguf_array *a);

/* Element i of a packed array of numbers. */
static void print_elem(const struct io_gguf_array *a, uint64_t i)
{
	const void *p = a->data;

	switch (a->type) {
	case IO_GGUF_UINT8: printf("%u", ((const uint8_t *)p)[i]); break;
	case IO_GGUF_INT8: printf("%d", ((const int8_t *)p)[i]); break;
	case IO_GGUF_UINT16: printf("%u", ((const uint16_t *)p)[i]); break;
	case IO_GGUF_INT16: printf("%d", ((const int16_t *)p)[i]); break;
	case IO_GGUF_UINT32:
		printf("%" PRIu32, ((const uint32_t *)p)[i]);
		break;
	case IO_GGUF_INT32: printf("%" PRId32, ((const int32_t *)p)[i]); break;
	case IO_GGUF_FLOAT32: printf("%g", ((const float *)p)[i]); break;
	case IO_GGUF_BOOL:
		printf("%s", ((const uint8_t *)p)[i] ? "true" : "false");
		break;
	case IO_GGUF_STRING:
		print_str(&((const struct io_gguf_string *)p)[i]);
		break;
	case IO_GGUF_ARRAY:
		print_array(&((const struct io_gguf_array *)p)[i]);
		break;
	case IO_GGUF_UINT64:
		printf("%" PRIu64, ((const uint64_t *)p)[i]);
		break;
	case IO_GGUF_INT64: printf("%" PRId64, ((const int64_t *)p)[i]); break;
	case IO_GGUF_FLOAT64: printf("%g", ((const double *)p)[i]); break;
	}
}

static void print_array(const struct io_gguf_array *a)
{
	uint64_t i;

	printf("array[%s] x%" PRIu64 " [", type_names[a->type], a->n);
	for (i = 0; i < a->n && i < SHOW_ITEMS; i++) {
		printf(i ? ", " : "");
		print_elem(a, i);
	}
	printf(a->n > SHOW_ITEMS ? ", ...]" : "]");
}

static void print_value(const struct io_gguf_value *v)
{
	switch (v->type) {
	case IO_GGUF_UINT8:
	case IO_GGUF_UINT16:
	case IO_GGUF_UINT32:
	case IO_GGUF_UINT64:
		printf("%s  %" PRIu64, type_names[v->type], v->u64);
		break;
	case IO_GGUF_INT8:
	case IO_GGUF_INT16:
	case IO_GGUF_INT32:
	case IO_GGUF_INT64:
		printf("%s  %" PRId64, type_names[v->type], v->i64);
		break;
	case IO_GGUF_FLOAT32:
	case IO_GGUF_FLOAT64:
		printf("%s  %.9g", type_names[v->type], v->f64);
		break;
	case IO_GGUF_BOOL: printf("bool  %s", v->b ? "true" : "false"); break;
	case IO_GGUF_STRING:
		printf("string  ");
		print_str(&v->str);
		break;
	case IO_GGUF_ARRAY: print_array(&v->arr); break;
	}
	putchar('\n');
}

static void print_tensors(const struct io_gguf *g)
{
	uint64_t count[IO_TYPE_COUNT] = { 0 }, bytes[IO_TYPE_COUNT] = { 0 };
	uint64_t i;
	uint32_t d;

	printf("\n%" PRIu64 " tensors:\n", g->n_tensors);
	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];

		printf("%-32s %-5s [", t->name, io_type_info(t->type)->name);
		for (d = 0; d < t->n_dims; d++)
			printf(d ? ", %" PRId64 : "%" PRId64, t->ne[d]);
		printf("]  %" PRIu64 " bytes  @ %" PRIu64, t->bytes, t->offset);
		if (g->n_files > 1)
			printf("  (file %" PRIu32 ")", t->file);
		putchar('\n');
		count[t->type]++;
		bytes[t->type] += t->bytes;
	}
	printf("\nby type:\n");
	for (d = 0; d < IO_TYPE_COUNT; d++)
		if (count[d])
			printf("%-5s %6" PRIu64 " tensors %12" PRIu64
			       " bytes\n",
			       io_type_info(d)->name, count[d], bytes[d]);
	printf("total %6" PRIu64 " tensors %12" PRIu64 " bytes\n", g->n_tensors,
	       g->tensor_bytes);
}

int main(int argc, char **argv)
{
	struct err err = { 0 };
	struct io_gguf *g;
	uint64_t i;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: llmfs-inspect MODEL.gguf\n");
		return 2;
	}
	if (io_gguf_open(&g, argv[1], &err)) {
		fprintf(stderr, "llmfs-inspect: %s\n", err.msg);
		return 1;
	}
	for (i = 0; i < g->n_files; i++)
		printf("file %s: %" PRIu64 " bytes, data at %" PRIu64 "\n",
		       g->files[i].path, g->files[i].size,
		       g->files[i].data_offset);
	printf("GGUF v%" PRIu32 ", alignment %" PRIu32 ", %" PRIu64
	       " keys, %" PRIu64 " tensors\n\n",
	       g->version, g->alignment, g->n_kv, g->n_tensors);
	for (i = 0; i < g->n_kv; i++) {
		printf("%s  ", g->kv[i].key);
		print_value(&g->kv[i].value);
	}
	print_tensors(g);
	io_gguf_close(g);
	return 0;
}
