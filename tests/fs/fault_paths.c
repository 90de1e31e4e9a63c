/*
 * fault_paths.so: an LD_PRELOAD shim that lets the shell tests hold the
 * daemon at a known point instead of hoping a sleep lands there.
 *
 *   LLMFS_TEST_GATE=PATH=FLAG[,PATH=FLAG...]
 *	open() of PATH waits until FLAG exists: a model named by PATH stays
 *	"loading" until the test creates FLAG (tests/fs/generate.sh,
 *	placement before the load, a read interrupted while it waits).
 *   LLMFS_TEST_REDIRECT=PATH=OTHER[,PATH=OTHER...]
 *	open() and fopen() of PATH open OTHER instead: /proc/meminfo as the
 *	test writes it (a device with no room: placement's ENOSPC).
 *
 * Only the exact paths named are touched; every other call goes straight
 * to libc. Under ASan set ASAN_OPTIONS=verify_asan_link_order=0.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The value of the PATH=VALUE pair of list whose PATH is path, in out. */
static int fault_lookup(const char *list, const char *path, char *out,
			size_t cap)
{
	size_t n = strlen(path);

	while (list && *list) {
		const char *end = strchr(list, ',');
		size_t len = end ? (size_t)(end - list) : strlen(list);

		if (len > n + 1 && !strncmp(list, path, n) && list[n] == '=' &&
		    len - n - 1 < cap) {
			memcpy(out, list + n + 1, len - n - 1);
			out[len - n - 1] = '\0';
			return 1;
		}
		list = end ? end + 1 : NULL;
	}
	return 0;
}

/* Waits for the gate of path, if it has one; returns the path to open. */
static const char *fault_path(const char *path, char *buf, size_t cap)
{
	char flag[4096];
	struct timespec ten_ms = { 0, 10 * 1000 * 1000 };

	if (!path)
		return path;
	if (fault_lookup(getenv("LLMFS_TEST_GATE"), path, flag, sizeof(flag)))
		while (access(flag, F_OK) != 0)
			nanosleep(&ten_ms, NULL);
	if (fault_lookup(getenv("LLMFS_TEST_REDIRECT"), path, buf, cap))
		return buf;
	return path;
}

static mode_t fault_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ?
		       (mode_t)va_arg(ap, int) :
		       0;
}

int open(const char *path, int flags, ...)
{
	static int (*real)(const char *, int, ...);
	char buf[4096];
	va_list ap;
	mode_t mode;

	if (!real)
		real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT,
							      "open");
	va_start(ap, flags);
	mode = fault_mode(flags, ap);
	va_end(ap);
	return real(fault_path(path, buf, sizeof(buf)), flags, mode);
}

int open64(const char *path, int flags, ...)
{
	static int (*real)(const char *, int, ...);
	char buf[4096];
	va_list ap;
	mode_t mode;

	if (!real)
		real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT,
							      "open64");
	va_start(ap, flags);
	mode = fault_mode(flags, ap);
	va_end(ap);
	return real(fault_path(path, buf, sizeof(buf)), flags, mode);
}

FILE *fopen(const char *path, const char *how)
{
	static FILE *(*real)(const char *, const char *);
	char buf[4096];

	if (!real)
		real = (FILE * (*)(const char *, const char *))
			dlsym(RTLD_NEXT, "fopen");
	return real(fault_path(path, buf, sizeof(buf)), how);
}

FILE *fopen64(const char *path, const char *how)
{
	static FILE *(*real)(const char *, const char *);
	char buf[4096];

	if (!real)
		real = (FILE * (*)(const char *, const char *))
			dlsym(RTLD_NEXT, "fopen64");
	return real(fault_path(path, buf, sizeof(buf)), how);
}
