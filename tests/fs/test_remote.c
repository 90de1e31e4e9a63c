/* SPDX-License-Identifier: MIT */
/*
 * fs_remote_attach(): the --remote option's URL and sub-options, and what
 * a remote model's directory and info file show before its thread runs.
 * Every bad spec is refused with its reason and leaves no provider behind;
 * the API key is in no text. The requests themselves are tested against a
 * real llama-server by tests/fs/remote.sh.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../fs/internal.h"
#include "../common/check_main.h"

static struct fs remote_fs;

static struct fs_model *remote_model(void)
{
	struct fs_model *fm = NULL;
	struct err err = { 0 };

	ck_assert_int_eq(fs_model_new(&remote_fs, &fm, "r", "", &err), 0);
	return fm;
}

/* A key file with these contents; the caller unlinks it. */
static void remote_key_file(char *path, size_t cap, const char *text)
{
	int fd;

	snprintf(path, cap, "/tmp/llmfs-test-key.XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (int)strlen(text));
	close(fd);
}

static char *remote_info(struct fs_model *fm)
{
	struct fs_buf b = { 0 };

	ck_assert_int_eq(fm->provider->info(fm, &b), 0);
	return fs_buf_detach(&b, NULL);
}

START_TEST(test_remote_attach_url_and_defaults)
{
	struct fs_model *fm = remote_model();
	struct err err = { 0 };
	char *info;

	ck_assert_int_eq(
		fs_remote_attach(fm, "http://127.0.0.1:8080/v1/", &err), 0);
	ck_assert_ptr_eq(fm->provider, &fs_provider_remote);
	ck_assert_str_eq(fm->path, "http://127.0.0.1:8080");
	info = remote_info(fm);
	ck_assert_str_eq(info, "name r\nstate loading\n"
			       "backend remote http://127.0.0.1:8080\nmodel -\n"
			       "api_key none\ntimeout_s 60\n");
	free(info);
	fs_model_free(fm);
}
END_TEST

START_TEST(test_remote_files_absent)
{
	struct fs_model *fm = remote_model();
	struct err err = { 0 };

	ck_assert(fs_provider_has(fm, FS_KIND_PLACEMENT));
	ck_assert(fs_provider_has(fm, FS_KIND_WEIGHTS));
	ck_assert_int_eq(fs_remote_attach(fm,
					  "https://example.org,"
					  "model=m,timeout=2.5",
					  &err),
			 0);
	for (enum fs_kind k = FS_KIND_MODEL_DIR; k < FS_KIND_COUNT; k++) {
		bool local_only = k == FS_KIND_PLACEMENT || k == FS_KIND_KV ||
				  k == FS_KIND_WEIGHTS ||
				  k == FS_KIND_WEIGHTS_INDEX ||
				  k == FS_KIND_WEIGHTS_TENSOR ||
				  k == FS_KIND_SESSION_KV ||
				  k == FS_KIND_SESSION_LOGPROBS ||
				  k == FS_KIND_SESSION_REASONING ||
				  k == FS_KIND_EMBED || k == FS_KIND_EMBED_F32;

		ck_assert_int_eq(fs_provider_has(fm, k), !local_only);
	}
	fs_model_free(fm);
}
END_TEST

START_TEST(test_remote_key_never_shown)
{
	struct fs_model *fm = remote_model();
	struct err err = { 0 };
	char path[64], spec[128], *info;

	remote_key_file(path, sizeof(path), "  sk-secret-42 \nsecond line\n");
	snprintf(spec, sizeof(spec), "http://h,key_file=%s", path);
	ck_assert_int_eq(fs_remote_attach(fm, spec, &err), 0);
	info = remote_info(fm);
	ck_assert_ptr_null(strstr(info, "sk-secret-42"));
	ck_assert_ptr_nonnull(strstr(info, "api_key set\n"));
	free(info);
	fs_model_free(fm);
	unlink(path);
}
END_TEST

static const char *const bad_specs[] = {
	"",
	"ftp://host",
	"host:8080",
	"http://a b",
	"http://u:pw@h:8080/v1",
	"http://h,timeout=0",
	"http://h,timeout=-1",
	"http://h,timeout=abc",
	"http://h,timeout=",
	"http://h,model=",
	"http://h,bogus=1",
	"http://h,key_file=",
	"http://h,key_file=/nonexistent/key",
	"http://h,ca_file=",
	"http://h,ca_file=/nonexistent/ca.pem",
};

START_TEST(test_remote_attach_rejects)
{
	struct fs_model *fm = remote_model();
	struct err err = { 0 };
	int rc = fs_remote_attach(fm, bad_specs[_i], &err);

	ck_assert_msg(rc == -EINVAL || rc == -ENOENT, "%s: %d", bad_specs[_i],
		      rc);
	ck_assert(err.msg[0]);
	ck_assert_ptr_eq(fm->provider, &fs_provider_local);
	ck_assert_ptr_null(fm->provider_data);
	fs_model_free(fm);
}
END_TEST

START_TEST(test_remote_key_file_rejects)
{
	static const char *const bad[] = { "", "\n", "two words\n", "   \n" };
	char path[64], spec[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct fs_model *fm = remote_model();
		struct err err = { 0 };

		remote_key_file(path, sizeof(path), bad[i]);
		snprintf(spec, sizeof(spec), "http://h,key_file=%s", path);
		ck_assert_int_eq(fs_remote_attach(fm, spec, &err), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err.msg, "key_file"));
		fs_model_free(fm);
		unlink(path);
	}
}
END_TEST

static void remote_tests(TCase *tc)
{
	tcase_add_test(tc, test_remote_attach_url_and_defaults);
	tcase_add_test(tc, test_remote_files_absent);
	tcase_add_test(tc, test_remote_key_never_shown);
	tcase_add_loop_test(tc, test_remote_attach_rejects, 0,
			    sizeof(bad_specs) / sizeof(bad_specs[0]));
	tcase_add_test(tc, test_remote_key_file_rejects);
}

const struct check_main check_main = {
	.name = "fs_remote",
	.tcase = "remote",
	.add_tests = remote_tests,
};
