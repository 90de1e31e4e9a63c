/* SPDX-License-Identifier: MIT */
/*
 * O_DIRECT refused by the filesystem: the loader must notice, read through
 * the page cache and still load every byte. The refusal is real: a ramfs
 * (which has no direct I/O, so open(O_DIRECT) fails with EINVAL) mounted
 * in a private mount namespace of a child process. tmpfs refused O_DIRECT
 * before Linux 6.6 and is tried first. Exits 77 when neither can be had
 * (no CAP_SYS_ADMIN and a tmpfs that accepts O_DIRECT).
 */
#include <check.h>
#include <errno.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "weights_fake.h"
#include "../common/check_main.h"

static char refusing_dir[256];

static bool direct_refused_in(const char *dir)
{
	char path[300];
	bool refused;
	int fd;

	snprintf(path, sizeof(path), "%s/llmfs-probe", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return false;
	close(fd);
	fd = open(path, O_RDONLY | O_DIRECT);
	refused = fd < 0 && errno == EINVAL;
	if (fd >= 0)
		close(fd);
	unlink(path);
	return refused;
}

/* In this (already forked, test-only) process: find or make such a dir. */
static int direct_setup(void)
{
	if (direct_refused_in("/dev/shm")) {
		snprintf(refusing_dir, sizeof(refusing_dir), "/dev/shm");
		return 0;
	}
	if (unshare(CLONE_NEWNS) < 0)
		return -errno;
	if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	snprintf(refusing_dir, sizeof(refusing_dir), "/tmp/llmfs-ramfs-XXXXXX");
	if (!mkdtemp(refusing_dir))
		return -errno;
	if (mount("llmfs-test", refusing_dir, "ramfs", 0, "mode=0700") < 0) {
		rmdir(refusing_dir);
		return -errno;
	}
	return direct_refused_in(refusing_dir) ? 0 : -EOPNOTSUPP;
}

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

START_TEST(test_direct_refused_falls_back)
{
	/* On ramfs every file is in the page cache: insist on trying. */
	struct io_load_options opt = { .notice = notes_add,
				       .always_direct = true };
	const struct io_load_stats *st;
	struct io_weights *w = NULL;
	struct notes notes = { 0 };
	struct err err = { 0 };
	struct fake f;

	opt.notice_arg = &notes;
	fake_make(&f, refusing_dir, 4096 + 64, (2u << 20) + 77);
	ck_assert_msg(io_weights_load(&w, &f.g, &opt, &err) == 0, "%s",
		      err.msg);
	st = io_weights_stats(w);
	ck_assert(!st->direct);
	ck_assert_int_eq(notes.n, 1);
	ck_assert_ptr_nonnull(strstr(notes.msg[0], "O_DIRECT refused"));
	ck_assert_ptr_nonnull(strstr(notes.msg[0], f.path));
	check_bytes(&f.g, w);
	io_weights_free(w);
	/* Without insisting, the cached file is copied, no notice needed. */
	opt.always_direct = false;
	notes.n = 0;
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	ck_assert(io_weights_stats(w)->cached);
	ck_assert_int_eq(notes.n, 0);
	check_bytes(&f.g, w);
	io_weights_free(w);
	unlink(f.path);
}
END_TEST

static int direct_check_setup(void)
{
	int rc = direct_setup();

	if (rc < 0) {
		printf("no filesystem refusing O_DIRECT can be had here (ramfs mount: %s)\n",
		       strerror(-rc));
		return CHECK_SKIP;
	}
	return 0;
}

static void direct_tests(TCase *tc)
{
	tcase_add_test(tc, test_direct_refused_falls_back);
}

static void direct_teardown(void)
{
	if (strcmp(refusing_dir, "/dev/shm") != 0) {
		umount(refusing_dir);
		rmdir(refusing_dir);
	}
}

const struct check_main check_main = {
	.name = "io_direct",
	.tcase = "direct",
	.setup = direct_check_setup,
	.add_tests = direct_tests,
	.teardown = direct_teardown,
};
