/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the GGUF reader: each input becomes a file (a memfd,
 * opened through /proc/self/fd/N, as the reader takes a path) and goes
 * through io_gguf_open. A refusal must be one line; an acceptance must
 * describe tensors that lie inside the file. Inputs that begin with
 * "SPLIT" become the two parts of a split model instead. tests/fuzz/run builds and runs
 * it; inputs that once crashed are kept in tests/fuzz/crashers/ and
 * replayed by tests/io/test_gguf.c.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
		if (v->type == IO_GGUF_STRING &&
		    strlen(v->str.data) > v->str.len)
			__builtin_trap();
		if (v->type == IO_GGUF_ARRAY && v->arr.type == IO_GGUF_STRING)
			for (j = 0; j < v->arr.n; j++) {
				const struct io_gguf_string *s = &(
					(const struct io_gguf_string *)
						v->arr.data)[j];

				if (strlen(s->data) > s->len)
					__builtin_trap();
			}
	}
}

static void fuzz_write(int fd, const uint8_t *data, size_t size)
{
	if (ftruncate(fd, 0) ||
	    (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		__builtin_trap();
}

static void fuzz_refusal(const struct io_gguf *g, const struct err *err)
{
	if (g || !err->msg[0] || strchr(err->msg, '\n') ||
	    !strstr(err->msg, ": "))
		__builtin_trap();
}

static char split_dir[64], split_p1[128], split_p2[128];

static void fuzz_split_cleanup(void)
{
	unlink(split_p1);
	unlink(split_p2);
	rmdir(split_dir);
}

/*
 * Inputs starting with "SPLIT" and a 2-byte cut are split there into the
 * two parts of m-0000{1,2}-of-00002.gguf in a directory of /dev/shm, so the
 * split-model code is fuzzed too; other inputs are one file, a memfd.
 */
static int fuzz_split(const uint8_t *data, size_t size)
{
	static int fd1 = -1, fd2 = -1;
	struct io_gguf *g = NULL;
	struct err err = { 0 };
	size_t cut;

	if (fd1 < 0) {
		snprintf(split_dir, sizeof(split_dir), "/dev/shm/llmfs-fuzz-%d",
			 getpid());
		mkdir(split_dir, 0700);
		snprintf(split_p1, sizeof(split_p1), "%s/m-00001-of-00002.gguf",
			 split_dir);
		snprintf(split_p2, sizeof(split_p2), "%s/m-00002-of-00002.gguf",
			 split_dir);
		fd1 = open(split_p1, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		fd2 = open(split_p2, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		atexit(fuzz_split_cleanup);
		if (fd1 < 0 || fd2 < 0)
			__builtin_trap();
	}
	cut = (size_t)data[5] | (size_t)data[6] << 8;
	data += 7;
	size -= 7;
	if (cut > size)
		cut = size;
	fuzz_write(fd1, data, cut);
	fuzz_write(fd2, data + cut, size - cut);
	if (io_gguf_open(&g, split_p1, &err)) {
		fuzz_refusal(g, &err);
		return 0;
	}
	if (g->n_files == 2 && g->files[1].size != size - cut)
		__builtin_trap();
	io_gguf_close(g);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	static int fd = -1;
	struct io_gguf *g = NULL;
	struct err err = { 0 };

	if (size >= 7 && !memcmp(data, "SPLIT", 5))
		return fuzz_split(data, size);
	if (fd < 0) {
		fd = memfd_create("fuzz.gguf", MFD_CLOEXEC);
		if (fd < 0)
			__builtin_trap();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	fuzz_write(fd, data, size);
	if (io_gguf_open(&g, path, &err)) {
		fuzz_refusal(g, &err);
		if (strncmp(err.msg, path, strlen(path)))
			__builtin_trap();
		return 0;
	}
	fuzz_check(g, size);
	io_gguf_close(g);
	return 0;
}
