/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the GGUF reader: each input becomes a file (a memfd,
 * opened through /proc/self/fd/N, as the reader takes a path) and goes
 * through io_gguf_open. A refusal must be one line; an acceptance must
 * describe tensors that lie inside the file. tests/fuzz/run builds and runs
 * it; inputs that once crashed are kept in tests/fuzz/crashers/ and
 * replayed by tests/io/test_gguf.c.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../io/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_check(const struct io_gguf *g, size_t size)
{
	uint64_t i, j, sum = 0;

	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];

		if (t->file != 0 || t->offset < g->files[0].data_offset ||
		    t->offset > size || t->bytes > size - t->offset ||
		    io_gguf_find_tensor(g, t->name) != t)
			__builtin_trap();
		sum += t->bytes;
	}
	if (sum != g->tensor_bytes)
		__builtin_trap();
	for (i = 0; i < g->n_kv; i++) {
		const struct io_gguf_value *v = &g->kv[i].value;

		if (io_gguf_find(g, g->kv[i].key) != &g->kv[i])
			__builtin_trap();
		if (v->type == IO_GGUF_STRING && strlen(v->str.data) > v->str.len)
			__builtin_trap();
		if (v->type == IO_GGUF_ARRAY && v->arr.type == IO_GGUF_STRING)
			for (j = 0; j < v->arr.n; j++) {
				const struct io_gguf_string *s =
					&((const struct io_gguf_string *)
					  v->arr.data)[j];

				if (strlen(s->data) > s->len)
					__builtin_trap();
			}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	static int fd = -1;
	struct io_gguf *g = NULL;
	struct err err = { 0 };

	if (fd < 0) {
		fd = memfd_create("fuzz.gguf", MFD_CLOEXEC);
		if (fd < 0)
			__builtin_trap();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) !=
				 (ssize_t)size))
		__builtin_trap();
	if (io_gguf_open(&g, path, &err)) {
		if (g || !err.msg[0] || strchr(err.msg, '\n') ||
		    strncmp(err.msg, path, strlen(path)))
			__builtin_trap();
		return 0;
	}
	fuzz_check(g, size);
	io_gguf_close(g);
	return 0;
}
