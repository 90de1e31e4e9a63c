/* SPDX-License-Identifier: MIT */
/*
 * Test helpers of the io weights tests: a hand-made model (one file of
 * known bytes, tensors at unaligned offsets, as io_gguf_open would describe
 * it) and a byte-for-byte check of loaded weights against their files.
 */
#ifndef LLMFS_TESTS_WEIGHTS_FAKE_H
#define LLMFS_TESTS_WEIGHTS_FAKE_H

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/io_uring.h>
#include <sys/syscall.h>

#include "../../io/io.h"

/* A hand-made model: one file of random bytes and tensors at odd offsets. */
struct fake {
	char path[300];
	struct io_gguf g;
	struct io_gguf_file file;
	struct io_gguf_tensor t[4];
	char names[4][16];
};

static inline void fake_make(struct fake *f, const char *dir,
			     uint64_t data_offset, uint64_t size)
{
	uint8_t *buf = malloc(size);
	uint64_t i, off;
	int fd;

	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < size; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	snprintf(f->path, sizeof(f->path), "%s/llmfs-w-XXXXXX", dir);
	fd = mkstemp(f->path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, size), (ssize_t)size);
	/* Out of the page cache, or the loader copies from there (cached). */
	ck_assert_int_eq(fsync(fd), 0);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	free(buf);
	memset(&f->g, 0, sizeof(f->g));
	f->file.path = f->path;
	f->file.size = size;
	f->file.data_offset = data_offset;
	f->g.n_files = 1;
	f->g.files = &f->file;
	f->g.n_tensors = 4;
	f->g.tensors = f->t;
	off = data_offset;
	for (i = 0; i < 4; i++) {
		uint64_t bytes = i == 3 ? size - off : (i + 1) * 100000 + 32;

		snprintf(f->names[i], sizeof(f->names[i]), "t%llu",
			 (unsigned long long)i);
		f->t[i] = (struct io_gguf_tensor){ .name = f->names[i],
						   .type = IO_TYPE_I8,
						   .n_dims = 1,
						   .ne = { (int64_t)bytes, 1, 1,
							   1 },
						   .file = 0,
						   .offset = off,
						   .bytes = bytes };
		f->g.tensor_bytes += bytes;
		off += (bytes + 31) / 32 * 32;
	}
}

static inline void check_bytes(const struct io_gguf *g, struct io_weights *w)
{
	uint64_t i;

	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];
		struct io_placement *p = io_weights_placement(w, i);
		uint8_t *want = malloc(t->bytes);
		int fd = open(g->files[t->file].path, O_RDONLY);

		ck_assert_ptr_nonnull(p);
		ck_assert_uint_eq(p->bytes, t->bytes);
		ck_assert_int_eq(pread(fd, want, t->bytes, (off_t)t->offset),
				 (ssize_t)t->bytes);
		close(fd);
		ck_assert_msg(memcmp(p->data, want, t->bytes) == 0,
			      "tensor %s differs from the file", t->name);
		free(want);
	}
	ck_assert_ptr_null(io_weights_placement(w, g->n_tensors));
}

/* Whether this environment lets a process set up a ring at all. */
static inline bool uring_allowed(void)
{
	struct io_uring_params p;
	long fd;

	memset(&p, 0, sizeof(p));
	fd = syscall(__NR_io_uring_setup, 4, &p);
	if (fd < 0)
		return false;
	close((int)fd);
	return true;
}

static inline bool direct_allowed(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECT);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/*
 * One part of a split GGUF v3 model written byte by byte: split.no no of
 * count, n I8 tensors named tN.M of the given sizes (total: tensors of the
 * whole model), data of known bytes after a 32-byte aligned header.
 */
static inline void split_part_write(const char *path, uint16_t no,
				    uint16_t count, int32_t total,
				    const uint64_t *sizes, int n)
{
	FILE *f = fopen(path, "wb");
	uint64_t off = 0, u64, pos;
	uint32_t u32;
	uint16_t u16;
	char name[32];
	int i;

#define PUT(v) ck_assert_int_eq(fwrite(&(v), sizeof(v), 1, f), 1)
#define PUTS(s) \
	do { \
		u64 = strlen(s); \
		PUT(u64); \
		ck_assert_int_eq(fwrite(s, 1, u64, f), u64); \
	} while (0)
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fwrite("GGUF", 1, 4, f), 4);
	u32 = 3;
	PUT(u32);
	u64 = (uint64_t)n;
	PUT(u64);
	u64 = 4;
	PUT(u64);
	PUTS("general.architecture");
	u32 = 8;
	PUT(u32);
	PUTS("llama");
	PUTS("split.no");
	u32 = 2;
	PUT(u32);
	u16 = no;
	PUT(u16);
	PUTS("split.count");
	u32 = 2;
	PUT(u32);
	u16 = count;
	PUT(u16);
	PUTS("split.tensors.count");
	u32 = 5;
	PUT(u32);
	PUT(total);
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "t%u.%d", no, i);
		PUTS(name);
		u32 = 1;
		PUT(u32);
		PUT(sizes[i]);
		u32 = IO_TYPE_I8;
		PUT(u32);
		PUT(off);
		off += (sizes[i] + 31) / 32 * 32;
	}
	pos = (uint64_t)ftell(f);
	for (; pos % 32; pos++)
		fputc(0, f);
	for (u64 = 0; u64 < off; u64++)
		fputc((int)((u64 * 2654435761u + no) >> 11) & 0xff, f);
#undef PUTS
#undef PUT
	ck_assert_int_eq(fclose(f), 0);
}

#endif
