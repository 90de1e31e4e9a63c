/* SPDX-License-Identifier: MIT */
/*
 * llmfs-split: cut a GGUF model into parts as llama.cpp's gguf-split
 * writes them (tools/gguf-split): PREFIX-00001-of-0000N.gguf holds every
 * key of the model and the first tensors, each later part only its
 * tensors; every part carries split.no (u16, from 0), split.count (u16)
 * and split.tensors.count (i32, all the parts' tensors). For tests of
 * split models (a Hugging Face cache with a two-part model):
 *
 *   $ build/bin/llmfs-split --parts 2 ../shared/models/stories260K.gguf /tmp/s
 *   wrote /tmp/s-00001-of-00002.gguf, /tmp/s-00002-of-00002.gguf
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../io/io.h"

static int split_keys(struct io_gguf_writer *w, const struct io_gguf *g,
		      uint16_t no, uint16_t count, bool all, struct err *err)
{
	struct io_gguf_value v = { .type = IO_GGUF_UINT16 };
	int ret = 0;

	for (uint64_t i = 0; all && i < g->n_kv && !ret; i++) {
		const char *key = g->kv[i].key;

		/* the writer writes the alignment; split.* are ours */
		if (strcmp(key, "general.alignment") &&
		    strncmp(key, "split.", 6))
			ret = io_gguf_writer_add(w, key, &g->kv[i].value, err);
	}
	v.u64 = no;
	if (!ret)
		ret = io_gguf_writer_add(w, "split.no", &v, err);
	v.u64 = count;
	if (!ret)
		ret = io_gguf_writer_add(w, "split.count", &v, err);
	if (!ret)
		ret = io_gguf_writer_add_i32(w, "split.tensors.count",
					     (int32_t)g->n_tensors, err);
	return ret;
}

/* Tensors [first, end) of g into the part at path. */
static int split_part(const struct io_gguf *g, int fd, const char *path,
		      uint16_t no, uint16_t count, uint64_t first, uint64_t end,
		      struct err *err)
{
	struct io_gguf_writer *w = NULL;
	char *buf = NULL;
	int ret = io_gguf_writer_new(&w, g->alignment == 32 ? 0 : g->alignment,
				     err);

	if (!ret)
		ret = split_keys(w, g, no, count, no == 0, err);
	for (uint64_t i = first; i < end && !ret; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];

		ret = io_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims,
						t->ne, err);
	}
	if (!ret)
		ret = io_gguf_writer_begin(w, path, err);
	for (uint64_t i = first; i < end && !ret; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];

		free(buf);
		buf = malloc(t->bytes ? t->bytes : 1);
		if (!buf)
			ret = err_set(err, ENOMEM, "out of memory");
		else if (pread(fd, buf, t->bytes, (off_t)t->offset) !=
			 (ssize_t)t->bytes)
			ret = err_set(err, EIO, "%s: short read of %s",
				      g->files[0].path, t->name);
		else
			ret = io_gguf_writer_write(w, buf, t->bytes, err);
	}
	if (!ret)
		ret = io_gguf_writer_finish(w, err);
	free(buf);
	io_gguf_writer_free(w);
	return ret;
}

int main(int argc, char **argv)
{
	struct io_gguf *g = NULL;
	struct err err = { 0 };
	char path[4096];
	unsigned long parts;
	uint64_t per;
	int fd = -1, ret;

	if (argc != 5 || strcmp(argv[1], "--parts") ||
	    (parts = strtoul(argv[2], NULL, 10)) < 2 || parts > 99) {
		fprintf(stderr,
			"usage: llmfs-split --parts N (2-99) IN.gguf PREFIX\n");
		return 2;
	}
	ret = io_gguf_open(&g, argv[3], &err);
	if (!ret && (g->n_files != 1 || g->n_tensors < parts))
		ret = err_set(&err, EINVAL,
			      "%s: one file of at least %lu tensors, please",
			      argv[3], parts);
	if (!ret && (fd = open(argv[3], O_RDONLY | O_CLOEXEC)) < 0)
		ret = err_set(&err, errno, "%s: %s", argv[3], strerror(errno));
	per = ret ? 0 : (g->n_tensors + parts - 1) / parts;
	for (unsigned long k = 0; k < parts && !ret; k++) {
		uint64_t first = k * per, end = first + per;

		snprintf(path, sizeof(path), "%s-%05lu-of-%05lu.gguf", argv[4],
			 k + 1, parts);
		ret = split_part(g, fd, path, (uint16_t)k, (uint16_t)parts,
				 first < g->n_tensors ? first : g->n_tensors,
				 end < g->n_tensors ? end : g->n_tensors, &err);
		if (!ret)
			printf("%s%s", k ? ", " : "wrote ", path);
	}
	if (fd >= 0)
		close(fd);
	io_gguf_close(g);
	if (ret) {
		fprintf(stderr, "llmfs-split: %s\n", err.msg);
		return 1;
	}
	printf("\n");
	return 0;
}
