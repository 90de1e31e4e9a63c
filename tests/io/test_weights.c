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

#include "weights_fake.h"
#include "../../io/weights_internal.h"
#include "../common/check_main.h"

/* kB of huge pages /proc/self/smaps counts in the mapping holding p. */
static long smaps_huge_kb(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	unsigned long lo, hi;
	bool in = false;
	long kb = -1;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' '))
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
		else if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

/*
 * io_weights_collapse_step merges the weights into huge pages a step at a
 * time and changes no byte; where the kernel has no MADV_COLLAPSE (EINVAL
 * on a plain populated 2 MiB of anonymous memory) it must stop at once.
 */
START_TEST(test_weights_collapse_steps)
{
	struct io_load_options opt = { .no_uring = true, .no_direct = true };
	struct io_weights *w = NULL;
	struct err err = { 0 };
	struct fake f;
	struct io_mem probe;
	int steps = 0, able, rc;
	size_t merged, total = 0;

	ck_assert_int_eq(io_mem_alloc(&probe, 2u << 20, -1, &err), 0);
	memset(probe.base, 1, probe.size);
	able = io_mem_collapse(&probe, 0, probe.size) != -EINVAL;
	io_mem_free(&probe);

	fake_make(&f, "/tmp", 4096 + 96, (9u << 20) + 123);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	while ((rc = io_weights_collapse_step(w, 2u << 20, &merged)) == 1) {
		ck_assert_int_lt(++steps, 1000);
		total += merged;
	}
	total += merged;
	ck_assert_int_eq(rc, able ? 0 : -EOPNOTSUPP);
	ck_assert_int_eq(io_weights_collapse_step(w, 2u << 20, &merged), 0);
	ck_assert_uint_eq(merged, 0);
	check_bytes(&f.g, w);
	if (able) {
		/*
		 * 9 MiB of tensor: at least 4 whole 2 MiB pages, in steps,
		 * and the steps count what smaps shows
		 */
		ck_assert_int_ge(steps, 3);
		ck_assert_uint_ge(total, 4 * (2u << 20));
		ck_assert_int_ge(
			smaps_huge_kb(io_weights_placement(w, 0)->data),
			(long)(total >> 10));
	} else {
		ck_assert_int_eq(steps, 0);
		ck_assert_uint_eq(total, 0);
	}
	io_weights_free(w);
	unlink(f.path);
}
END_TEST

START_TEST(test_weights_pread_fake)
{
	struct io_load_options opt = { .no_uring = true, .no_direct = true };
	struct io_weights *w = NULL;
	struct err err = { 0 };
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
		snprintf(s->notice[s->n_notice++], sizeof(s->notice[0]), "%s",
			 msg);
}

/* Each read path, forced by options, gives the file's bytes. */
static const struct {
	bool no_uring, no_direct, uring, direct;
} paths[] = {
	{ false, false, true, true },
	{ false, true, true, false },
	{ true, false, false, true },
	{ true, true, false, false },
};

START_TEST(test_weights_paths_fake)
{
	struct io_load_options opt = { .no_uring = paths[_i].no_uring,
				       .no_direct = paths[_i].no_direct,
				       .queue_depth = 3 };
	const struct io_load_stats *st;
	struct io_weights *w = NULL;
	struct err err = { 0 };
	struct seen seen = { 0 };
	struct fake f;

	opt.progress = seen_progress;
	opt.progress_arg = &seen;
	opt.notice = seen_notice;
	opt.notice_arg = &seen;
	fake_make(&f, "/tmp", 4096 * 3 + 32, (5u << 20) + 4000);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	check_bytes(&f.g, w);
	st = io_weights_stats(w);
	/* What the environment refuses falls back (test_uring checks how). */
	ck_assert_int_eq(st->uring, paths[_i].uring && uring_allowed());
	ck_assert_int_eq(st->direct,
			 paths[_i].direct && direct_allowed(f.path));
	ck_assert_uint_eq(st->tensor_bytes, f.g.tensor_bytes);
	ck_assert_uint_ge(st->bytes, f.g.tensor_bytes);
	ck_assert_uint_eq(seen.total, f.g.tensor_bytes);
	ck_assert_uint_eq(seen.last, f.g.tensor_bytes);
	ck_assert_uint_ge(seen.calls, 2);
	io_weights_free(w);
	unlink(f.path);
}
END_TEST

/* A file already in the page cache is copied from there, not re-read. */
START_TEST(test_weights_cached_file_skips_direct)
{
	const struct io_load_stats *st;
	struct io_weights *w = NULL;
	struct err err = { 0 };
	struct fake f;
	uint8_t *buf;
	int fd;

	fake_make(&f, "/tmp", 4096 + 64, (3u << 20) + 11);
	buf = malloc(f.file.size);
	fd = open(f.path, O_RDONLY);
	ck_assert_int_eq(read(fd, buf, f.file.size), (ssize_t)f.file.size);
	close(fd);
	free(buf);
	ck_assert_int_eq(io_weights_load(&w, &f.g, NULL, &err), 0);
	st = io_weights_stats(w);
	ck_assert(st->cached);
	ck_assert(!st->direct);
	check_bytes(&f.g, w);
	io_weights_free(w);
	/* Dropped from the cache again: O_DIRECT. */
	fd = open(f.path, O_RDONLY);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	ck_assert_int_eq(io_weights_load(&w, &f.g, NULL, &err), 0);
	st = io_weights_stats(w);
	ck_assert(!st->cached);
	ck_assert_int_eq(st->direct, direct_allowed(f.path));
	check_bytes(&f.g, w);
	io_weights_free(w);
	unlink(f.path);
}
END_TEST

/*
 * Async: io_weights_load returns at once; each tensor's bytes are right as
 * soon as io_placement_wait says they are in, whatever order the reads
 * complete in (small reads, several in flight, every path).
 */
START_TEST(test_weights_async_ready_in_order)
{
	struct io_load_options opt = { .no_uring = paths[_i].no_uring,
				       .no_direct = paths[_i].no_direct,
				       .queue_depth = 8,
				       .read_kib = 64,
				       .async = true };
	struct io_weights *w = NULL;
	struct err err = { 0 };
	struct fake f;
	uint64_t i;
	uint8_t *want;
	int fd;

	fake_make(&f, "/tmp", 4096 * 2 + 160, (6u << 20) + 321);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	fd = open(f.path, O_RDONLY);
	for (i = 0; i < f.g.n_tensors; i++) {
		const struct io_gguf_tensor *t = &f.g.tensors[i];
		const struct io_placement *p = io_weights_placement(w, i);

		ck_assert_int_eq(io_placement_wait(p), 0);
		ck_assert_uint_eq(__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE),
				  1);
		want = malloc(t->bytes);
		ck_assert_int_eq(pread(fd, want, t->bytes, (off_t)t->offset),
				 (ssize_t)t->bytes);
		ck_assert_msg(memcmp(p->data, want, t->bytes) == 0,
			      "tensor %s ready before its bytes", t->name);
		free(want);
	}
	close(fd);
	ck_assert_int_eq(io_weights_wait(w, &err), 0);
	ck_assert_uint_ge(io_weights_stats(w)->bytes, f.g.tensor_bytes);
	check_bytes(&f.g, w);
	io_weights_free(w);
	/* Freed while still loading: the loader is joined first. */
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	io_weights_free(w);
	unlink(f.path);
}
END_TEST

/* An async load that fails wakes its waiters with the error. */
START_TEST(test_weights_async_failure)
{
	struct io_load_options opt = { .no_uring = paths[_i].no_uring,
				       .no_direct = paths[_i].no_direct,
				       .async = true };
	struct io_weights *w = NULL;
	struct err err = { 0 };
	struct fake f;

	fake_make(&f, "/tmp", 4096 + 96, (1u << 20) + 123);
	ck_assert_int_eq(truncate(f.path, 500000), 0);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	ck_assert_int_eq(io_placement_wait(io_weights_placement(w, 3)),
			 -EINVAL);
	ck_assert_int_eq(io_weights_wait(w, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, f.path));
	ck_assert_int_eq(io_weights_move(w, 0, "cpu", &err), -EINVAL);
	io_weights_free(w);
	unlink(f.path);
}
END_TEST

/* A file shorter than its tensor infos say fails cleanly on every path. */
START_TEST(test_weights_truncated)
{
	struct io_load_options opt = { .no_uring = paths[_i].no_uring,
				       .no_direct = paths[_i].no_direct,
				       .notice = seen_notice };
	struct io_weights *w = NULL;
	struct seen seen = { 0 };
	struct err err = { 0 };
	struct fake f;

	opt.notice_arg = &seen;
	fake_make(&f, "/tmp", 4096 + 96, (1u << 20) + 123);
	ck_assert_int_eq(truncate(f.path, 500000), 0);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), -EINVAL);
	ck_assert_ptr_null(w);
	ck_assert_ptr_nonnull(strstr(err.msg, f.path));
	ck_assert_int_eq(err.code, EINVAL);
	/* A short file is not a refused O_DIRECT read: no fallback notice. */
	ck_assert_msg(seen.n_notice == 0 || !strstr(seen.notice[0], "O_DIRECT"),
		      "%s", seen.notice[0]);
	unlink(f.path);
}
END_TEST

/*
 * cpu -> numa0 -> cpu: bytes unchanged at every step, the per-file region
 * freed once its last tensor has left, moved regions freed in turn.
 */
START_TEST(test_weights_move_round_trip)
{
	struct io_load_options opt = { 0 };
	struct io_weights *w = NULL;
	struct err err = { 0 };
	uint64_t some[] = { 0, 2 }, all[] = { 0, 1, 2, 3 };
	struct fake f;
	void *p1;

	fake_make(&f, "/tmp", 4096 + 32, (2u << 20) + 999);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	ck_assert_uint_eq(w->n_regions, 1);
	ck_assert_uint_eq(w->regions[0].refs, 4);
	ck_assert_int_eq(io_weights_move_many(w, some, 2, "numa0", &err), 0);
	ck_assert_str_eq(io_weights_placement(w, 0)->device, "numa0");
	ck_assert_str_eq(io_weights_placement(w, 1)->device, "cpu");
	ck_assert_str_eq(io_weights_placement(w, 2)->device, "numa0");
	ck_assert_uint_eq(w->regions[0].refs, 2);
	ck_assert_ptr_nonnull(w->regions[0].mem.base);
	check_bytes(&f.g, w);
	/* Already there: nothing happens. */
	p1 = io_weights_placement(w, 0)->data;
	ck_assert_int_eq(io_weights_move(w, 0, "numa0", &err), 0);
	ck_assert_ptr_eq(io_weights_placement(w, 0)->data, p1);
	ck_assert_uint_eq(w->n_regions, 2);
	ck_assert_int_eq(io_weights_move_many(w, all, 4, "numa0", &err), 0);
	ck_assert_ptr_null(w->regions[0].mem.base);
	ck_assert_ptr_eq(io_weights_placement(w, 0)->data, p1);
	check_bytes(&f.g, w);
	ck_assert_int_eq(io_weights_move_many(w, all, 4, "cpu", &err), 0);
	ck_assert_ptr_null(w->regions[1].mem.base);
	ck_assert_ptr_null(w->regions[2].mem.base);
	ck_assert_uint_eq(w->regions[3].refs, 4);
	ck_assert_str_eq(io_weights_placement(w, 3)->device, "cpu");
	ck_assert_uint_eq((uintptr_t)io_weights_placement(w, 1)->data % 64, 0);
	check_bytes(&f.g, w);
	ck_assert_int_eq(io_weights_move(w, 4, "cpu", &err), -EINVAL);
	io_weights_free(w);
	unlink(f.path);
}
END_TEST

/* A split model loads as one: each part into its own region. */
START_TEST(test_weights_split_model)
{
	static const uint64_t part1[] = { 1000003, 64, 2u << 20 };
	static const uint64_t part2[] = { 77, (3u << 20) + 9 };
	struct io_load_options opt = { .no_uring = paths[_i].no_uring,
				       .no_direct = paths[_i].no_direct,
				       .queue_depth = 4 };
	char dir[] = "/tmp/llmfs-split-XXXXXX", p1[64], p2[64];
	struct io_weights *w = NULL;
	struct io_gguf *g = NULL;
	struct err err = { 0 };

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(p1, sizeof(p1), "%s/m-00001-of-00002.gguf", dir);
	snprintf(p2, sizeof(p2), "%s/m-00002-of-00002.gguf", dir);
	split_part_write(p1, 0, 2, 5, part1, 3);
	split_part_write(p2, 1, 2, 5, part2, 2);
	ck_assert_msg(io_gguf_open(&g, p1, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(g->n_files, 2);
	ck_assert_uint_eq(g->n_tensors, 5);
	ck_assert_msg(io_weights_load(&w, g, &opt, &err) == 0, "%s", err.msg);
	check_bytes(g, w);
	ck_assert_uint_eq(io_weights_stats(w)->uring,
			  paths[_i].uring && uring_allowed());
	ck_assert_uint_eq(w->n_regions, 2);
	ck_assert_uint_eq(io_weights_stats(w)->tensor_bytes, g->tensor_bytes);
	io_weights_free(w);
	io_gguf_close(g);
	unlink(p1);
	unlink(p2);
	rmdir(dir);
}
END_TEST

static const char *const models[] = {
	"llama-2-tiny-random.gguf",	  "stories260K.gguf",
	"tiny-llama-spm32k-kquant.gguf",  "tiny-qwen2-bpe152k-legacyq.gguf",
	"tiny-qwen3-bpe16k-f16.gguf",	  "tiny-qwen3-bpe16k-mixq.gguf",
	"tiny-qwen3moe-bpe16k-q4km.gguf",
};

/* Every tensor of every shared model, on the default path and on pread. */
START_TEST(test_weights_shared_models)
{
	struct io_load_options opt = { 0 };
	struct io_weights *w = NULL;
	struct io_gguf *g = NULL;
	struct err err = { 0 };
	char path[4096];
	int pass;

	snprintf(path, sizeof(path), "%s/models/%s", check_shared_dir(),
		 models[_i]);
	ck_assert_msg(io_gguf_open(&g, path, &err) == 0, "%s", err.msg);
	for (pass = 0; pass < 2; pass++) {
		opt.no_uring = pass == 1;
		ck_assert_msg(io_weights_load(&w, g, &opt, &err) == 0, "%s",
			      err.msg);
		check_bytes(g, w);
		ck_assert_uint_eq(io_weights_stats(w)->tensor_bytes,
				  g->tensor_bytes);
		io_weights_free(w);
	}
	io_gguf_close(g);
}
END_TEST

static Suite *weights_suite(void)
{
	Suite *s = suite_create("io_weights");
	TCase *tc = tcase_create("load");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_weights_pread_fake);
	tcase_add_test(tc, test_weights_collapse_steps);
	tcase_add_loop_test(tc, test_weights_truncated, 0,
			    sizeof(paths) / sizeof(paths[0]));
	tcase_add_loop_test(tc, test_weights_paths_fake, 0,
			    sizeof(paths) / sizeof(paths[0]));
	tcase_add_test(tc, test_weights_move_round_trip);
	tcase_add_test(tc, test_weights_cached_file_skips_direct);
	tcase_add_loop_test(tc, test_weights_async_ready_in_order, 0,
			    sizeof(paths) / sizeof(paths[0]));
	tcase_add_loop_test(tc, test_weights_async_failure, 0,
			    sizeof(paths) / sizeof(paths[0]));
	tcase_add_loop_test(tc, test_weights_split_model, 0,
			    sizeof(paths) / sizeof(paths[0]));
	tcase_add_loop_test(tc, test_weights_shared_models, 0,
			    sizeof(models) / sizeof(models[0]));
	suite_add_tcase(s, tc);
	return s;
}

const struct check_main check_main = { .suite = weights_suite };
