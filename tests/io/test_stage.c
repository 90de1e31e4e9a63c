/* SPDX-License-Identifier: MIT */
/*
 * The staging ring (io_stage_file) with a device made of host memory
 * whose copies happen late: a copy is only recorded when the ring asks
 * for it and carried out when the ring waits for its buffer. A ring that
 * refilled a buffer before waiting for it, or waited for the wrong one,
 * would copy the new window's bytes and fail the byte-for-byte checks.
 * Real files, real io_uring reads, with and without O_DIRECT; tiny
 * windows so that ranges cross many of them.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../io/io.h"
#include "../common/check_main.h"

#define FILE_BYTES (3u * 1024 * 1024 + 4321)
#define MAX_COPIES 4096

static char path[512];
static uint8_t *file_bytes;

/* ---- the late-copying sink ----------------------------------------------- */

struct fake_copy {
	void *dst;
	const void *src;
	size_t n;
	unsigned slot;
};

struct fake_dev {
	struct fake_copy pending[MAX_COPIES];
	unsigned n_pending;
	unsigned allocs, frees, copies, waits;
	unsigned fail_copy_at; /* the copy that fails (1-based), 0 none */
	unsigned max_slot;
};

static int fake_host_alloc(void *arg, void **p, size_t n, struct err *err)
{
	struct fake_dev *d = arg;

	*p = aligned_alloc(4096, n);
	if (!*p)
		return err_set(err, ENOMEM, "fake: out of memory");
	/* garbage, not zeros */
	memset(*p, 0xa5, n);
	d->allocs++;
	return 0;
}

static void fake_host_free(void *arg, void *p)
{
	struct fake_dev *d = arg;

	d->frees++;
	free(p);
}

static int fake_copy(void *arg, void *dst, const void *src, size_t n,
		     unsigned slot, struct err *err)
{
	struct fake_dev *d = arg;

	if (++d->copies == d->fail_copy_at)
		return err_set(err, EIO, "fake: copy %u failed", d->copies);
	ck_assert_uint_lt(d->n_pending, MAX_COPIES);
	d->pending[d->n_pending++] = (struct fake_copy){ dst, src, n, slot };
	if (slot > d->max_slot)
		d->max_slot = slot;
	return 0;
}

static int fake_wait(void *arg, unsigned slot, struct err *err)
{
	struct fake_dev *d = arg;
	unsigned i, k = 0;

	d->waits++;
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

static struct io_stage_sink fake_sink(struct fake_dev *d)
{
	struct io_stage_sink s = { d, fake_host_alloc, fake_host_free,
				   fake_copy, fake_wait };

	memset(d, 0, sizeof(*d));
	return s;
}

/* ---- ranges -------------------------------------------------------------- */

struct plan {
	struct io_stage_range r[64];
	size_t n;
	uint8_t *dev; /* the "device memory" the ranges land in */
	size_t dev_bytes;
};

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/*
 * n ranges like a GGUF's tensors: back to back from an unaligned start,
 * some gaps, one large; shuffled; each to its own place in dev.
 */
static void plan_make(struct plan *p, size_t n)
{
	uint64_t off = 1000 + next() % 3000, at = 0;
	size_t i;

	p->n = n;
	for (i = 0; i < n; i++) {
		uint64_t len = i == n / 2 ? 700000 : 1 + next() % 60000;

		if (off + len > FILE_BYTES)
			len = FILE_BYTES - off;
		p->r[i].off = off;
		p->r[i].len = len;
		p->r[i].dst = (void *)(uintptr_t)at; /* made a pointer below */
		at += len + 64;
		off += len + (next() % 4 == 0 ? next() % 20000 : 0);
		if (off >= FILE_BYTES)
			off = next() % FILE_BYTES; /* overlapping ones too */
	}
	p->dev_bytes = at;
	p->dev = malloc(at);
	memset(p->dev, 0x5a, at);
	for (i = 0; i < n; i++)
		p->r[i].dst = p->dev + (uintptr_t)p->r[i].dst;
	for (i = n; i > 1; i--) {
		size_t j = next() % i;
		struct io_stage_range t = p->r[i - 1];

		p->r[i - 1] = p->r[j];
		p->r[j] = t;
	}
}

static void plan_check(const struct plan *p)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		ck_assert_msg(!memcmp(p->r[i].dst, file_bytes + p->r[i].off,
				      p->r[i].len),
			      "range %zu (%llu + %llu) differs", i,
			      (unsigned long long)p->r[i].off,
			      (unsigned long long)p->r[i].len);
}

static void progress(void *arg, uint64_t done, uint64_t total)
{
	uint64_t *last = arg;

	ck_assert_uint_ge(done, last[0]);
	ck_assert_uint_le(done, total);
	last[0] = done;
	last[1] = total;
}

/* every combination of ring size, window size and read path */
START_TEST(test_stage_ranges)
{
	static const uint32_t bufs[] = { 1, 2, 3, 16 };
	static const size_t sizes[] = { 4096, 16384, 1u << 20 };

	for (size_t b = 0; b < 4; b++) {
		for (size_t z = 0; z < 3; z++) {
			struct io_stage_options o = { .n_bufs = bufs[b],
						      .buf_bytes = sizes[z] };
			struct fake_dev d;
			struct io_stage_sink sink = fake_sink(&d);
			struct io_stage_stats st;
			struct err err = { 0 };
			uint64_t last[2] = { 0, 0 }, total = 0;
			struct plan p;

			o.no_uring = _i & 1;
			o.no_direct = _i & 2;
			o.progress = progress;
			o.progress_arg = last;
			plan_make(&p, 40);
			ck_assert_msg(io_stage_file(path, p.r, p.n, &sink, &o,
						    &st, &err) == 0,
				      "%s", err.msg);
			plan_check(&p);
			for (size_t i = 0; i < p.n; i++)
				total += p.r[i].len;
			ck_assert_uint_eq(st.bytes_copied, total);
			ck_assert_uint_eq(last[0], total);
			ck_assert_uint_eq(d.allocs, bufs[b]);
			ck_assert_uint_eq(d.frees, bufs[b]);
			ck_assert_uint_eq(d.n_pending, 0);
			ck_assert_uint_lt(d.max_slot, bufs[b]);
			ck_assert(st.uring == !o.no_uring);
			free(p.dev);
		}
	}
}
END_TEST

/* a range past the end: EINVAL, one line, every buffer freed */
START_TEST(test_stage_short_file)
{
	struct fake_dev d;
	struct io_stage_sink sink = fake_sink(&d);
	struct io_stage_options o = { .buf_bytes = 65536 };
	struct err err = { 0 };
	uint8_t dst[8192];
	struct io_stage_range r[2] = { { 0, 100, dst },
				       { FILE_BYTES - 10, 100, dst + 200 } };

	ck_assert_int_eq(io_stage_file(path, r, 2, &sink, &o, NULL, &err),
			 -EINVAL);
	ck_assert_msg(strstr(err.msg, path) != NULL, "%s", err.msg);
	ck_assert_uint_eq(d.allocs, d.frees);
	ck_assert_uint_eq(d.n_pending, 0);
}
END_TEST

/* the device failing a copy: its error, nothing left pending or allocated */
START_TEST(test_stage_copy_fails)
{
	struct fake_dev d;
	struct io_stage_sink sink = fake_sink(&d);
	struct io_stage_options o = { .n_bufs = 2, .buf_bytes = 16384 };
	struct err err = { 0 };
	struct plan p;

	plan_make(&p, 20);
	d.fail_copy_at = 7;
	ck_assert_int_eq(io_stage_file(path, p.r, p.n, &sink, &o, NULL, &err),
			 -EIO);
	ck_assert_str_eq(err.msg, "fake: copy 7 failed");
	ck_assert_uint_eq(d.allocs, d.frees);
	ck_assert_uint_eq(d.n_pending, 0);
	free(p.dev);
}
END_TEST

START_TEST(test_stage_bad_input)
{
	struct fake_dev d;
	struct io_stage_sink sink = fake_sink(&d);
	struct io_stage_options o = { .n_bufs = 17 };
	struct err err = { 0 };
	uint8_t dst[16];
	struct io_stage_range r = { 0, 16, dst }, nodst = { 0, 16, NULL };

	ck_assert_int_eq(io_stage_file(path, &r, 1, &sink, &o, NULL, &err),
			 -EINVAL);
	o.n_bufs = 2;
	o.buf_bytes = 5000;
	ck_assert_int_eq(io_stage_file(path, &r, 1, &sink, &o, NULL, &err),
			 -EINVAL);
	o.buf_bytes = 0;
	ck_assert_int_eq(io_stage_file(path, &nodst, 1, &sink, &o, NULL, &err),
			 -EINVAL);
	ck_assert_int_eq(io_stage_file("/nonexistent/x.gguf", &r, 1, &sink, &o,
				       NULL, &err),
			 -ENOENT);
	ck_assert_uint_eq(d.allocs, d.frees);
	/* nothing to copy: fine */
	ck_assert_int_eq(io_stage_file(path, &r, 0, &sink, &o, NULL, &err), 0);
}
END_TEST

static int stage_setup(void)
{
	const char *b = getenv("BUILD") ? getenv("BUILD") : "build";
	int fd;

	/* on the build's disk: O_DIRECT works there, unlike some tmpfs */
	snprintf(path, sizeof(path), "%s/tests/io/stage-%d.bin", b,
		 (int)getpid());
	file_bytes = malloc(FILE_BYTES);
	for (size_t i = 0; i < FILE_BYTES; i++)
		file_bytes[i] = (uint8_t)(next() >> 13);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, file_bytes, FILE_BYTES) != FILE_BYTES) {
		printf("cannot write %s\n", path);
		return 1;
	}
	close(fd);
	return 0;
}

static void stage_teardown(void)
{
	unlink(path);
	free(file_bytes);
}

static void stage_add_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_stage_ranges, 0, 4);
	tcase_add_test(tc, test_stage_short_file);
	tcase_add_test(tc, test_stage_copy_fails);
	tcase_add_test(tc, test_stage_bad_input);
}

const struct check_main check_main = {
	.name = "stage",
	.timeout = 60,
	.setup = stage_setup,
	.add_tests = stage_add_tests,
	.teardown = stage_teardown,
};
