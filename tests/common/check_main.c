/* SPDX-License-Identifier: MIT */
/*
 * The main() of every Check test program: see check_main.h.
 */
#include "check_main.h"

#include <jansson.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

const char *check_shared_dir(void)
{
	const char *s = getenv("SHARED");

	return s && *s ? s : "../shared";
}

static char *path_fits(char *buf, size_t cap, int n)
{
	if (n < 0 || (size_t)n >= cap) {
		/* Inside a forked test Check reports the early exit as a
		 * failure; outside one the program fails. */
		fprintf(stderr, "path too long under %s\n", check_shared_dir());
		exit(EXIT_FAILURE);
	}
	return buf;
}

char *check_shared_path(char *buf, size_t cap, const char *fmt, ...)
{
	int n = snprintf(buf, cap, "%s/", check_shared_dir());
	va_list ap;

	path_fits(buf, cap, n);
	va_start(ap, fmt);
	n += vsnprintf(buf + n, cap - n, fmt, ap);
	va_end(ap);
	return path_fits(buf, cap, n);
}

char *check_shared_model(char *buf, size_t cap, const char *stem)
{
	return check_shared_path(buf, cap, "models/%s.gguf", stem);
}

int check_need_file(const char *path)
{
	if (access(path, R_OK) == 0)
		return 0;
	printf("no %s (set SHARED)\n", path);
	return CHECK_SKIP;
}

int check_need_model(const char *stem)
{
	char path[4096];

	return check_need_file(check_shared_model(path, sizeof(path), stem));
}

static Suite *suite_of(const struct check_main *m)
{
	Suite *su;
	TCase *tc;

	if (m->suite)
		return m->suite();
	su = suite_create(m->name);
	tc = tcase_create(m->tcase ? m->tcase : m->name);
	if (m->timeout)
		tcase_set_timeout(tc, m->timeout);
	m->add_tests(tc);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	const struct check_main *m = &check_main;
	SRunner *sr;
	int rc, failed;

	if (m->setup) {
		rc = m->setup();
		if (rc)
			return rc == CHECK_SKIP ? CHECK_SKIP : EXIT_FAILURE;
	}
	sr = srunner_create(suite_of(m));
	/* CK_ENV: CK_VERBOSITY when set, CK_NORMAL otherwise (as before). */
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (m->teardown)
		m->teardown();
	if (failed)
		return EXIT_FAILURE;
	return m->left_out ? m->left_out() : EXIT_SUCCESS;
}

void check_golden_thresholds(const char *stem, double *rel_tol, double *margin)
{
	char path[1200];
	json_error_t jerr;
	json_t *root, *entry;

	check_shared_path(path, sizeof(path), "golden/thresholds.json");
	root = json_load_file(path, 0, &jerr);
	ck_assert_msg(root != NULL, "%s: %s", path, jerr.text);
	entry = json_object_get(root, stem);
	ck_assert_msg(entry != NULL, "no thresholds for %s", stem);
	*rel_tol = json_number_value(json_object_get(entry, "rel_tol"));
	*margin = json_number_value(json_object_get(entry, "margin"));
	ck_assert(*rel_tol > 0.0 && *margin > 0.0);
	json_decref(root);
}
