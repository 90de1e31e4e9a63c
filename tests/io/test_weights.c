/* SPDX-License-Identifier: MIT */
/*
 * io_weights: every tensor's loaded bytes equal the same byte range of the
 * file, whichever read path loaded them.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../io/io.h"

/* A hand-made model: one file of random bytes and tensors at odd offsets. */
struct fake {
	char path[64];
	struct io_gguf g;
	struct io_gguf_file file;
	struct io_gguf_tensor t[4];
	char names[4][16];
};

static void fake_make(struct fake *f, const char *dir, uint64_t data_offset,
		      uint64_t size)
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
			.type = IO_TYPE_I8, .n_dims = 1, .ne = { (int64_t)bytes, 1, 1, 1 },
			.file = 0, .offset = off, .bytes = bytes };
		f->g.tensor_bytes += bytes;
		off += (bytes + 31) / 32 * 32;
	}
}

static void check_bytes(const struct io_gguf *g, struct io_weights *w)
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

START_TEST(test_weights_pread_fake)
{
	struct io_load_options opt = { .no_uring = true, .no_direct = true };
	struct io_weights *w = NULL;
	struct err err = {0};
	struct fake f;

	fake_make(&f, "/tmp", 4096 + 96, (3u << 20) + 123);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	check_bytes(&f.g, w);
	ck_assert_str_eq(io_weights_placement(w, 0)->device, "cpu");
	io_weights_free(w);
	unlink(f.path);
}
END_TEST

struct seen {
	uint64_t last, total, calls;
	char notice[4][600];
	int n_notice;
};

static void seen_progress(void *arg, uint64_t done, uint64_t total)
{
	struct seen *s = arg;

	ck_assert_uint_ge(done, s->last);
	ck_assert_uint_le(done, total);
	s->last = done;
	s->total = total;
	s->calls++;
}

static void seen_notice(void *arg, const char *msg)
{
	struct seen *s = arg;

	if (s->n_notice < 4)
		snprintf(s->notice[s->n_notice++], sizeof(s->notice[0]), "%s", msg);
}

/* Each read path, forced by options, gives the file's bytes. */
static const struct {
	bool no_uring, no_direct, uring, direct;
} paths[] = {
	{ false, false, true, true },
	{ false, true, true, false },
	{ true, false, false, false },
	{ true, true, false, false },
};

START_TEST(test_weights_paths_fake)
{
	struct io_load_options opt = { .no_uring = paths[_i].no_uring,
		.no_direct = paths[_i].no_direct, .queue_depth = 3 };
	const struct io_load_stats *st;
	struct io_weights *w = NULL;
	struct err err = {0};
	struct seen seen = {0};
	struct fake f;

	opt.progress = seen_progress;
	opt.progress_arg = &seen;
	opt.notice = seen_notice;
	opt.notice_arg = &seen;
	fake_make(&f, "/tmp", 4096 * 3 + 32, (5u << 20) + 4000);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	check_bytes(&f.g, w);
	st = io_weights_stats(w);
	ck_assert_int_eq(st->uring, paths[_i].uring);
	ck_assert_int_eq(st->direct, paths[_i].direct);
	ck_assert_uint_eq(st->tensor_bytes, f.g.tensor_bytes);
	ck_assert_uint_ge(st->bytes, f.g.tensor_bytes);
	ck_assert_uint_eq(seen.total, f.g.tensor_bytes);
	ck_assert_uint_eq(seen.last, f.g.tensor_bytes);
	ck_assert_uint_ge(seen.calls, 2);
	io_weights_free(w);
	unlink(f.path);
}
END_TEST


/* A file shorter than its tensor infos say fails cleanly on every path. */
START_TEST(test_weights_truncated)
{
	struct io_load_options opt = { .no_uring = paths[_i].no_uring,
		.no_direct = paths[_i].no_direct };
	struct io_weights *w = NULL;
	struct err err = {0};
	struct fake f;

	fake_make(&f, "/tmp", 4096 + 96, (1u << 20) + 123);
	ck_assert_int_eq(truncate(f.path, 500000), 0);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), -EINVAL);
	ck_assert_ptr_null(w);
	ck_assert_ptr_nonnull(strstr(err.msg, f.path));
	unlink(f.path);
}
END_TEST

static Suite *weights_suite(void)
{
	Suite *s = suite_create("io_weights");
	TCase *tc = tcase_create("load");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_weights_pread_fake);
	tcase_add_loop_test(tc, test_weights_truncated, 0,
			    sizeof(paths) / sizeof(paths[0]));
	tcase_add_loop_test(tc, test_weights_paths_fake, 0,
			    sizeof(paths) / sizeof(paths[0]));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(weights_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
