/* SPDX-License-Identifier: MIT */
/*
 * A deferred load (io_load_options.defer, io_weights_start): tensors
 * detached before the start to a device's memory are read from the file
 * straight into it through the staging ring, the others into io/'s
 * memory, the ranges of the first stepped over. The device here is host
 * memory whose copies happen late (at the ring's wait), as in
 * test_stage.c, so a buffer reused too soon shows as wrong bytes. Every
 * read path, plain and async; a file that ends early fails the start.
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
#include "../common/check_main.h"

#define MAX_COPIES 1024

/* ---- a device of host memory, copying late -------------------------------- */

struct late_copy {
	void *dst;
	const void *src;
	size_t n;
	unsigned slot;
};

struct late_dev {
	struct late_copy pending[MAX_COPIES];
	unsigned n_pending, allocs, frees, sinks;
	size_t host_bytes; /* of the ring's buffers, at most at once */
	size_t host_now;
};

static int late_host_alloc(void *arg, void **p, size_t n, struct err *err)
{
	struct late_dev *d = arg;

	*p = aligned_alloc(4096, n);
	if (!*p)
		return err_set(err, ENOMEM, "late: out of memory");
	memset(*p, 0x5a, n);
	d->allocs++;
	d->host_now += n;
	if (d->host_now > d->host_bytes)
		d->host_bytes = d->host_now;
	return 0;
}

static void late_host_free(void *arg, void *p)
{
	struct late_dev *d = arg;

	d->frees++;
	free(p);
}

static int late_copy(void *arg, void *dst, const void *src, size_t n,
		     unsigned slot, struct err *err)
{
	struct late_dev *d = arg;

	ck_assert_uint_lt(d->n_pending, MAX_COPIES);
	d->pending[d->n_pending++] = (struct late_copy){ dst, src, n, slot };
	return 0;
}

static int late_wait(void *arg, unsigned slot, struct err *err)
{
	struct late_dev *d = arg;
	unsigned i, k = 0;

	for (i = 0; i < d->n_pending; i++) {
		if (d->pending[i].slot == slot)
			memcpy(d->pending[i].dst, d->pending[i].src,
			       d->pending[i].n);
		else
			d->pending[k++] = d->pending[i];
	}
	d->n_pending = k;
	return 0;
}

static int late_sink_of(void *arg, const char *device,
			struct io_stage_sink *sink, struct err *err)
{
	struct late_dev *d = arg;

	if (strcmp(device, "dev0"))
		return err_set(err, ENODEV, "late: no device %s", device);
	d->sinks++;
	*sink = (struct io_stage_sink){ d, late_host_alloc, late_host_free,
					late_copy, late_wait };
	return 0;
}

/* ---- the model: a large tensor between small ones --------------------------- */

/*
 * fake_make's file laid out again: t0 small, t1 3 MiB (more than the
 * loader's gap between runs), t2 small, t3 the rest.
 */
static void defer_fake(struct fake *f)
{
	const uint64_t bytes[3] = { 100000 + 32, (3u << 20) + 77, 50000 + 5 };
	uint64_t off, i;

	fake_make(f, "/tmp", 4096 * 2 + 160, (6u << 20) + 321);
	off = f->file.data_offset;
	f->g.tensor_bytes = 0;
	for (i = 0; i < 4; i++) {
		f->t[i].offset = off;
		f->t[i].bytes = i < 3 ? bytes[i] : f->file.size - off;
		f->t[i].ne[0] = (int64_t)f->t[i].bytes;
		f->g.tensor_bytes += f->t[i].bytes;
		off += (f->t[i].bytes + 31) / 32 * 32;
	}
}

static const struct {
	bool no_uring, no_direct, async;
} defer_paths[] = {
	{ false, false, false }, { false, true, false }, { true, false, false },
	{ true, true, false },	 { false, false, true }, { true, true, true },
};

struct progress {
	uint64_t last, total;
};

static void defer_progress(void *arg, uint64_t done, uint64_t total)
{
	struct progress *p = arg;

	ck_assert_uint_ge(done, p->last);
	ck_assert_uint_le(done, total);
	p->last = done;
	p->total = total;
}

/* The options of path i, progress into *pr. */
static struct io_load_options defer_opt(int i, struct progress *pr)
{
	return (struct io_load_options){ .no_uring = defer_paths[i].no_uring,
					 .no_direct = defer_paths[i].no_direct,
					 .async = defer_paths[i].async,
					 .read_kib = 64,
					 .defer = true,
					 .progress = defer_progress,
					 .progress_arg = pr };
}

/* Detach tensor i to "dev0": memory of garbage for the load to fill. */
static uint8_t *defer_detach(struct io_weights *w, const struct fake *f,
			     uint64_t i)
{
	uint8_t *mem = malloc(f->t[i].bytes);
	struct err err = { 0 };

	ck_assert_ptr_nonnull(mem);
	memset(mem, 0xee, f->t[i].bytes);
	ck_assert_int_eq(io_weights_detach(w, i, mem, "dev0", &err), 0);
	return mem;
}

/*
 * t1 and t3 staged: they hold the file's bytes, io/ read t0 and t2
 * only (not the 3 MiB of t1 between them, not t3), progress counts all.
 */
START_TEST(test_weights_defer_stages_some)
{
	struct progress pr = { 0 };
	struct io_load_options opt = defer_opt(_i, &pr);
	const struct io_load_stats *st;
	struct late_dev *d = calloc(1, sizeof(*d));
	struct io_weights *w = NULL;
	struct err err = { 0 };
	uint8_t *m1, *m3;
	struct fake f;
	uint64_t i, host_read;

	ck_assert_ptr_nonnull(d);
	defer_fake(&f);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	ck_assert(!io_weights_started(w));
	ck_assert_ptr_null(io_weights_placement(w, 0)->data);
	m1 = defer_detach(w, &f, 1);
	m3 = defer_detach(w, &f, 3);
	ck_assert_str_eq(io_weights_placement(w, 1)->device, "dev0");
	ck_assert_int_eq(io_weights_start(w, late_sink_of, d, &err), 0);
	ck_assert(io_weights_started(w));
	/* the staged tensors are in when the start returns */
	ck_assert_uint_eq(io_weights_placement(w, 1)->ready, 1);
	ck_assert_uint_eq(io_weights_placement(w, 3)->ready, 1);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(io_placement_wait(io_weights_placement(w, i)),
				 0);
	ck_assert_int_eq(io_weights_wait(w, &err), 0);
	check_bytes(&f.g, w);
	ck_assert_ptr_eq(io_weights_placement(w, 1)->data, m1);
	st = io_weights_stats(w);
	ck_assert_uint_eq(st->staged_bytes, f.t[1].bytes + f.t[3].bytes);
	ck_assert_uint_eq(d->n_pending, 0);
	ck_assert_uint_eq(d->allocs, d->frees);
	ck_assert_uint_eq(d->sinks, 1);
	ck_assert_uint_ge(st->stage_ring_bytes, d->host_bytes);
	host_read = st->bytes - st->staged_bytes;
	ck_assert_msg(host_read <= f.t[0].bytes + f.t[2].bytes + 4 * 4096,
		      "read %llu bytes into host memory for %llu",
		      (unsigned long long)host_read,
		      (unsigned long long)(f.t[0].bytes + f.t[2].bytes));
	/* the region spans t0..t2 (4 MiB in huge pages), not t3 (8 MiB) */
	ck_assert_uint_le(st->host_region_bytes, 4u << 20);
	ck_assert_uint_eq(pr.total, f.g.tensor_bytes);
	ck_assert_uint_eq(pr.last, f.g.tensor_bytes);
	/* a tensor moved back to the host after the load: a copy */
	ck_assert_int_eq(io_weights_attach_many(w, (uint64_t[]){ 1 }, 1, "cpu",
						(const void *[]){ m1 }, &err),
			 0);
	ck_assert_ptr_ne(io_weights_placement(w, 1)->data, m1);
	check_bytes(&f.g, w);
	io_weights_free(w);
	free(m1);
	free(m3);
	free(d);
	unlink(f.path);
}
END_TEST

/* Everything staged: no host memory at all; nothing staged: a plain load. */
START_TEST(test_weights_defer_all_or_none)
{
	struct progress pr = { 0 };
	struct io_load_options opt = defer_opt(_i, &pr);
	struct late_dev *d = calloc(1, sizeof(*d));
	struct io_weights *w = NULL;
	struct err err = { 0 };
	uint8_t *mem[4];
	struct fake f;
	uint64_t i;

	ck_assert_ptr_nonnull(d);
	defer_fake(&f);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	for (i = 0; i < 4; i++)
		mem[i] = defer_detach(w, &f, i);
	ck_assert_int_eq(io_weights_start(w, late_sink_of, d, &err), 0);
	ck_assert_int_eq(io_weights_wait(w, &err), 0);
	check_bytes(&f.g, w);
	ck_assert_uint_eq(io_weights_stats(w)->host_region_bytes, 0);
	ck_assert_uint_eq(io_weights_stats(w)->staged_bytes, f.g.tensor_bytes);
	ck_assert_uint_eq(pr.last, f.g.tensor_bytes);
	/* started once */
	ck_assert_int_eq(io_weights_start(w, late_sink_of, d, &err), -EINVAL);
	io_weights_free(w);
	for (i = 0; i < 4; i++)
		free(mem[i]);

	pr = (struct progress){ 0 };
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	ck_assert_int_eq(io_weights_start(w, NULL, NULL, &err), 0);
	ck_assert_int_eq(io_weights_wait(w, &err), 0);
	check_bytes(&f.g, w);
	ck_assert_uint_eq(io_weights_stats(w)->staged_bytes, 0);
	ck_assert_uint_eq(pr.last, f.g.tensor_bytes);
	io_weights_free(w);
	free(d);
	unlink(f.path);
}
END_TEST

/*
 * Before the start a detached tensor may come back (to the load's own
 * device only): it is then read with the rest. A plain load is not
 * deferred: no start.
 */
START_TEST(test_weights_defer_attach_back)
{
	struct progress pr = { 0 };
	struct io_load_options opt = defer_opt(0, &pr);
	struct late_dev *d = calloc(1, sizeof(*d));
	struct io_weights *w = NULL;
	struct err err = { 0 };
	uint8_t *m1;
	struct fake f;

	ck_assert_ptr_nonnull(d);
	defer_fake(&f);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	m1 = defer_detach(w, &f, 1);
	ck_assert_int_eq(io_weights_attach_many(w, (uint64_t[]){ 1 }, 1,
						"numa7", NULL, &err),
			 -EINVAL);
	ck_assert_int_eq(io_weights_attach_many(w, (uint64_t[]){ 1 }, 1, "cpu",
						NULL, &err),
			 0);
	ck_assert_str_eq(io_weights_placement(w, 1)->device, "cpu");
	ck_assert_int_eq(io_weights_start(w, late_sink_of, d, &err), 0);
	check_bytes(&f.g, w);
	ck_assert_uint_eq(io_weights_stats(w)->staged_bytes, 0);
	ck_assert_uint_eq(d->sinks, 0);
	io_weights_free(w);
	free(m1);

	opt.defer = false;
	pr = (struct progress){ 0 };
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	ck_assert_int_eq(io_weights_start(w, late_sink_of, d, &err), -EINVAL);
	io_weights_free(w);
	free(d);
	unlink(f.path);
}
END_TEST

/*
 * A file that ends inside a staged tensor: the start fails with the
 * file's name, waiters get the error, the ring's buffers are freed; a
 * device without a sink fails the same way.
 */
START_TEST(test_weights_defer_short_file)
{
	struct progress pr = { 0 };
	struct io_load_options opt = defer_opt(_i, &pr);
	struct late_dev *d = calloc(1, sizeof(*d));
	struct io_weights *w = NULL;
	struct err err = { 0 };
	uint8_t *m1, *m3;
	struct fake f;

	ck_assert_ptr_nonnull(d);
	defer_fake(&f);
	ck_assert_int_eq(truncate(f.path, (off_t)f.t[3].offset + 1000), 0);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	m1 = defer_detach(w, &f, 1);
	m3 = defer_detach(w, &f, 3);
	ck_assert_int_eq(io_weights_start(w, late_sink_of, d, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, f.path));
	ck_assert_int_eq(io_placement_wait(io_weights_placement(w, 0)),
			 -EINVAL);
	ck_assert_int_eq(io_weights_wait(w, &err), -EINVAL);
	ck_assert_uint_eq(d->allocs, d->frees);
	io_weights_free(w);

	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	ck_assert_int_eq(io_weights_detach(w, 1, m1, "dev9", &err), 0);
	ck_assert_int_eq(io_weights_start(w, late_sink_of, d, &err), -ENODEV);
	ck_assert_str_eq(err.msg, "late: no device dev9");
	ck_assert_int_eq(io_weights_wait(w, &err), -ENODEV);
	io_weights_free(w);
	free(m1);
	free(m3);
	free(d);
	unlink(f.path);
}
END_TEST

/*
 * A staged tensor whose range passes the file's end (a malformed
 * offset): the start fails before any read or buffer, naming it.
 */
START_TEST(test_weights_defer_bad_offset)
{
	struct progress pr = { 0 };
	struct io_load_options opt = defer_opt(0, &pr);
	struct late_dev *d = calloc(1, sizeof(*d));
	struct io_weights *w = NULL;
	struct err err = { 0 };
	uint8_t *m2;
	struct fake f;

	ck_assert_ptr_nonnull(d);
	defer_fake(&f);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	m2 = defer_detach(w, &f, 2);
	f.t[2].offset = f.file.size - 10;
	ck_assert_int_eq(io_weights_start(w, late_sink_of, d, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "tensor t2 lies outside") != NULL, "%s",
		      err.msg);
	ck_assert_uint_eq(d->allocs, 0);
	ck_assert_int_eq(io_weights_wait(w, &err), -EINVAL);
	io_weights_free(w);
	free(m2);
	free(d);
	unlink(f.path);
}
END_TEST

static Suite *weights_defer_suite(void)
{
	Suite *s = suite_create("io_weights_defer");
	TCase *tc = tcase_create("defer");
	const int n = sizeof(defer_paths) / sizeof(defer_paths[0]);

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_weights_defer_stages_some, 0, n);
	tcase_add_loop_test(tc, test_weights_defer_all_or_none, 0, n);
	tcase_add_test(tc, test_weights_defer_attach_back);
	tcase_add_loop_test(tc, test_weights_defer_short_file, 0, n);
	tcase_add_test(tc, test_weights_defer_bad_offset);
	suite_add_tcase(s, tc);
	return s;
}

const struct check_main check_main = { .suite = weights_defer_suite };
