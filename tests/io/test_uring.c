/* SPDX-License-Identifier: MIT */
/*
 * The io_uring path and its fallback when the kernel refuses io_uring, as
 * it does under Docker's default seccomp profile: a forked child installs
 * a seccomp filter that answers io_uring_setup with EPERM (exactly what
 * Docker's profile does) and loads a model; it must fall back to pread,
 * say so once, and still load every byte.
 */
#include <check.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "weights_fake.h"
#include "../common/check_main.h"

struct notes {
	char msg[4][600];
	int n;
};

static void notes_add(void *arg, const char *msg)
{
	struct notes *n = arg;

	if (n->n < 4)
		snprintf(n->msg[n->n++], sizeof(n->msg[0]), "%s", msg);
}

static int notes_find(const struct notes *n, const char *what)
{
	int i, hits = 0;

	for (i = 0; i < n->n; i++)
		hits += strstr(n->msg[i], what) != NULL;
	return hits;
}

/* Deny io_uring_setup with EPERM, allow everything else. */
static int seccomp_deny_uring(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K,
			 SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]),
				   .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		return -errno;
	return 0;
}

/*
 * In a child (Check may run tests in-process; a filter cannot be removed),
 * so results come back as the exit status: 0 ok, else which check failed.
 */
static int uring_child_seccomp(const char *path, const struct io_gguf *g)
{
	struct io_load_options opt = { .notice = notes_add };
	const struct io_load_stats *st;
	struct io_weights *w = NULL;
	struct notes notes = { 0 };
	struct err err = { 0 };
	uint64_t i;

	opt.notice_arg = &notes;
	if (seccomp_deny_uring() < 0)
		return 10;
	if (syscall(__NR_io_uring_setup, 4, NULL) != -1 || errno != EPERM)
		return 11;
	if (io_weights_load(&w, g, &opt, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 12;
	}
	st = io_weights_stats(w);
	/* pread keeps O_DIRECT where the filesystem allows it */
	if (st->uring || st->direct != direct_allowed(path) ||
	    st->queue_depth != 4)
		return 13;
	if (notes_find(&notes, "io_uring unavailable") != 1 ||
	    notes_find(&notes, "Operation not permitted") != 1) {
		fprintf(stderr, "notices: %d '%s'\n", notes.n, notes.msg[0]);
		return 14;
	}
	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];
		uint8_t *want = malloc(t->bytes);
		int fd = open(path, O_RDONLY), same;

		if (!want || pread(fd, want, t->bytes, (off_t)t->offset) !=
				     (ssize_t)t->bytes)
			return 15;
		close(fd);
		same = memcmp(io_weights_placement(w, i)->data, want,
			      t->bytes) == 0;
		free(want);
		if (!same)
			return 16;
	}
	io_weights_free(w);
	return 0;
}

START_TEST(test_uring_seccomp_eperm_falls_back)
{
	struct fake f;
	int status;
	pid_t pid;

	fake_make(&f, "/tmp", 4096 + 64, (2u << 20) + 77);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(uring_child_seccomp(f.path, &f.g));
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	unlink(f.path);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "child failed with status %d", WEXITSTATUS(status));
}
END_TEST

/*
 * Without the filter the same process uses io_uring with O_DIRECT, or, in
 * an environment that refuses either, falls back and says so.
 */
START_TEST(test_uring_used_when_allowed)
{
	struct io_load_options opt = { .notice = notes_add };
	const struct io_load_stats *st;
	struct io_weights *w = NULL;
	struct notes notes = { 0 };
	struct err err = { 0 };
	struct fake f;

	if (getenv("LLMFS_NO_URING") || getenv("LLMFS_NO_DIRECT"))
		unsetenv("LLMFS_NO_URING"), unsetenv("LLMFS_NO_DIRECT");
	opt.notice_arg = &notes;
	fake_make(&f, "/tmp", 4096 + 64, (2u << 20) + 77);
	ck_assert_msg(io_weights_load(&w, &f.g, &opt, &err) == 0, "%s",
		      err.msg);
	st = io_weights_stats(w);
	ck_assert_int_eq(st->uring, uring_allowed());
	ck_assert_int_eq(notes_find(&notes, "io_uring unavailable"),
			 !uring_allowed());
	ck_assert_int_eq(st->direct, direct_allowed(f.path));
	check_bytes(&f.g, w);
	io_weights_free(w);
	unlink(f.path);
}
END_TEST

/* The environment forces each fallback, for tests of the layers above. */
START_TEST(test_uring_env_forces_fallbacks)
{
	const struct io_load_stats *st;
	struct io_weights *w = NULL;
	struct err err = { 0 };
	struct fake f;

	fake_make(&f, "/tmp", 4096 + 64, (1u << 20) + 5);
	setenv("LLMFS_NO_DIRECT", "1", 1);
	ck_assert_int_eq(io_weights_load(&w, &f.g, NULL, &err), 0);
	st = io_weights_stats(w);
	ck_assert(st->uring == uring_allowed() && !st->direct);
	check_bytes(&f.g, w);
	io_weights_free(w);
	setenv("LLMFS_NO_URING", "1", 1);
	ck_assert_int_eq(io_weights_load(&w, &f.g, NULL, &err), 0);
	st = io_weights_stats(w);
	ck_assert(!st->uring && !st->direct);
	check_bytes(&f.g, w);
	io_weights_free(w);
	unsetenv("LLMFS_NO_URING");
	unsetenv("LLMFS_NO_DIRECT");
	unlink(f.path);
}
END_TEST

/* Queue depths from 1 up, and reads smaller than a page of the file. */
START_TEST(test_uring_depths_and_chunks)
{
	static const uint32_t depth[] = { 1, 2, 7, 64 };
	static const char *const chunk[] = { "4", "64", "1024", "8192" };
	struct io_load_options opt = { 0 };
	struct io_weights *w = NULL;
	struct err err = { 0 };
	struct fake f;

	fake_make(&f, "/tmp", 4096 * 5 + 32, (9u << 20) + 1000);
	opt.queue_depth = depth[_i];
	setenv("LLMFS_IO_CHUNK_KB", chunk[_i], 1);
	ck_assert_msg(io_weights_load(&w, &f.g, &opt, &err) == 0, "%s",
		      err.msg);
	ck_assert_uint_eq(io_weights_stats(w)->queue_depth,
			  uring_allowed() || depth[_i] < 4 ? depth[_i] : 4);
	check_bytes(&f.g, w);
	io_weights_free(w);
	unsetenv("LLMFS_IO_CHUNK_KB");
	unlink(f.path);
}
END_TEST

static Suite *uring_suite(void)
{
	Suite *s = suite_create("io_uring");
	TCase *tc = tcase_create("uring");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_uring_seccomp_eperm_falls_back);
	tcase_add_test(tc, test_uring_used_when_allowed);
	tcase_add_test(tc, test_uring_env_forces_fallbacks);
	tcase_add_loop_test(tc, test_uring_depths_and_chunks, 0, 4);
	suite_add_tcase(s, tc);
	return s;
}

const struct check_main check_main = { .suite = uring_suite };
