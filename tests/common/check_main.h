/* SPDX-License-Identifier: MIT */
/*
 * The one main() of every Check test program (tests/io, tests/engine,
 * tests/fs): a program describes its suite in a struct check_main named
 * check_main, and tests/common/check_main.c runs it.
 *
 * Exit codes, as tests/run reads them: 0 every test passed, 1 a test failed
 * (or the setup failed), 77 skipped (the program printed why as its last
 * line). CK_FORK=no runs the tests in-process (for gdb) and CK_VERBOSITY
 * picks Check's output, as Check documents; nothing else is read from the
 * environment here except SHARED (check_shared_dir()).
 */
#ifndef LLMFS_TESTS_CHECK_MAIN_H
#define LLMFS_TESTS_CHECK_MAIN_H

#include <check.h>
#include <stddef.h>

/* The exit code of a skipped test program (automake's convention). */
#define CHECK_SKIP 77

struct check_main {
	/* The suite's name, and its one test case's (NULL: the same). */
	const char *name;
	const char *tcase;
	/* Seconds each test may run; 0 keeps Check's default (4 s, scaled
	 * by CK_TIMEOUT_MULTIPLIER). */
	unsigned int timeout;
	/* Optional, before any test: 0 to run, CHECK_SKIP after printing why
	 * nothing can run here, any other value to fail. */
	int (*setup)(void);
	/* Adds the tests to the one test case. */
	void (*add_tests)(TCase *tc);
	/* Instead of add_tests: a suite the program builds itself (several
	 * test cases, fixtures). name, tcase and timeout are then unused. */
	Suite *(*suite)(void);
	/* Optional, after the run, whatever its result: frees what setup
	 * made. */
	void (*teardown)(void);
	/* Optional, when every test passed: 0, or CHECK_SKIP after printing
	 * which tests could not run here (a pass with parts left out is not
	 * called a pass). */
	int (*left_out)(void);
};

/* Each test program defines this. */
extern const struct check_main check_main;

/* The shared test data (models, golden files, vocabularies): $SHARED, or
 * ../shared when it is unset or empty. Never NULL. */
const char *check_shared_dir(void);

/* buf = "<shared>/" followed by the printf-formatted rest; returns buf. A
 * path that does not fit fails the running test (it exits 1): no test runs
 * on a truncated path. */
char *check_shared_path(char *buf, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* buf = "<shared>/models/<stem>.gguf"; returns buf. */
char *check_shared_model(char *buf, size_t cap, const char *stem);

/* 0 when path can be read; otherwise prints "no PATH" and returns
 * CHECK_SKIP, for a setup hook to return. */
int check_need_file(const char *path);

/* check_need_file() of check_shared_model(stem). */
int check_need_model(const char *stem);

/* The model's rel_tol and margin from golden/thresholds.json (section 4 of
 * ../shared/README.md); a missing file, model or value fails the test. */
void check_golden_thresholds(const char *stem, double *rel_tol, double *margin);

#endif
