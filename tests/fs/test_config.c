/* SPDX-License-Identifier: MIT */
/*
 * fs/config.c, fs/errors.c and fs_model_slug(): the parts of fs/ that are
 * plain functions, checked without a mount (the shell tests mount).
 *
 * The defaults are llama.cpp's (engine_sampling_defaults); every error path
 * of fs_config_write leaves the config as it was.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../fs/internal.h"
#include "../common/check_main.h"

static void config_expect_text(const struct fs_config *c, const char *want)
{
	struct fs_buf b = { 0 };

	ck_assert_int_eq(fs_config_format(c, &b), 0);
	ck_assert_str_eq(b.p, want);
	fs_buf_free(&b);
}

START_TEST(test_config_defaults_format)
{
	struct fs_config c;

	fs_config_defaults(&c);
	config_expect_text(&c, "temperature=0.8\ntop_k=40\ntop_p=0.95\n"
			       "min_p=0.05\nrepeat_penalty=1\nseed=4294967295\n"
			       "max_tokens=256\nstop=\nsystem=\nformat=\n"
			       "json_schema=\ngrammar=\nlogprobs=0\n"
			       "think=on\n");
	fs_config_free(&c);
}
END_TEST

START_TEST(test_config_write_applies_lines)
{
	const char *text =
		"# comment\n\ntemperature=0\n top_k=7 \r\n"
		"stop=\\n\\n\nstop=END\nmax_tokens=0\nseed=18446744073709551615\n"
		"think=hide\n";
	struct fs_config c;
	struct err err = { 0 };

	fs_config_defaults(&c);
	ck_assert_int_eq(fs_config_write(&c, text, strlen(text), &err), 0);
	ck_assert(c.sampling.temperature == 0);
	ck_assert_int_eq(c.sampling.top_k, 7);
	ck_assert_uint_eq(c.max_tokens, 0);
	ck_assert(c.sampling.seed == UINT64_MAX);
	ck_assert_uint_eq(c.n_stop, 2);
	ck_assert_str_eq(c.stop[0], "\n\n");
	ck_assert_str_eq(c.stop[1], "END");
	config_expect_text(
		&c, "temperature=0\ntop_k=7\ntop_p=0.95\n"
		    "min_p=0.05\nrepeat_penalty=1\nseed=18446744073709551615\n"
		    "max_tokens=0\nstop=\\n\\n\nstop=END\nsystem=\nformat=\n"
		    "json_schema=\ngrammar=\nlogprobs=0\nthink=hide\n");
	ck_assert_int_eq(c.think, ENGINE_THINK_HIDE);
	/* An empty stop= clears the list. */
	ck_assert_int_eq(fs_config_write(&c, "stop=", 5, &err), 0);
	ck_assert_uint_eq(c.n_stop, 0);
	fs_config_free(&c);
}
END_TEST

/* system: one line with escapes, read back as written; empty clears. */
START_TEST(test_config_system_prompt)
{
	const char *text = "system=You are terse.\\nAnswer in one line.\n";
	struct fs_config c, d, over, merged;
	struct err err = { 0 };

	fs_config_defaults(&c);
	ck_assert_int_eq(fs_config_write(&c, text, strlen(text), &err), 0);
	ck_assert_str_eq(c.system, "You are terse.\nAnswer in one line.");
	config_expect_text(&c, "temperature=0.8\ntop_k=40\ntop_p=0.95\n"
			       "min_p=0.05\nrepeat_penalty=1\nseed=4294967295\n"
			       "max_tokens=256\nstop=\nsystem=You are terse.\\n"
			       "Answer in one line.\nformat=\njson_schema=\n"
			       "grammar=\nlogprobs=0\nthink=on\n");
	/* a copy owns its own string */
	ck_assert_int_eq(fs_config_copy(&d, &c), 0);
	ck_assert_ptr_ne(d.system, c.system);
	ck_assert_str_eq(d.system, c.system);
	fs_config_free(&d);
	/* a session's override replaces it, an unset one inherits it */
	fs_config_defaults(&over);
	ck_assert_int_eq(fs_config_merge(&merged, &c, &over), 0);
	ck_assert_str_eq(merged.system, c.system);
	fs_config_free(&merged);
	ck_assert_int_eq(fs_config_write(&over, "system=", 7, &err), 0);
	ck_assert_int_eq(fs_config_merge(&merged, &c, &over), 0);
	ck_assert_ptr_null(merged.system);
	fs_config_free(&merged);
	fs_config_free(&over);
	/* a bad escape leaves the old prompt */
	ck_assert_int_eq(fs_config_write(&c, "system=\\q", 9, &err), -EINVAL);
	ck_assert_str_eq(c.system, "You are terse.\nAnswer in one line.");
	fs_config_free(&c);
}
END_TEST

static const char *const bad_lines[] = {
	"temperature=hot",
	"temperature=-1",
	"temperature=nan",
	"temperature=inf",
	"temperature=1e400",
	"top_p=1e-400x",
	"temperature=",
	"top_k=-1",
	"top_k=1.5",
	"top_k=99999999999",
	"top_p=1.01",
	"min_p=-0.1",
	"repeat_penalty=0",
	"seed=-1",
	"seed=18446744073709551616",
	"max_tokens=-1",
	"max_tokens=1048577",
	"temp=1",
	"nokey",
	"=1",
	"stop=\\q",
	"think=yes",
	"think=",
	"stop=\\x00",
	"stop=\\x4",
	"stop=\\x4z",
	"stop=\\xg1",
	"logprobs=21",
	"logprobs=-1",
	/* grammars need the model: a config without one refuses them */
	"format=json",
	"format=xml",
	"grammar=root ::= \"a\"",
	"json_schema={}",
};

START_TEST(test_config_write_rejects_bad_line)
{
	const char *bad = bad_lines[_i];
	char text[128];
	struct fs_config c;
	struct err err = { 0 };

	/* A good line first: all or nothing. */
	snprintf(text, sizeof(text), "top_k=3\n%s\n", bad);
	fs_config_defaults(&c);
	ck_assert_int_eq(fs_config_write(&c, text, strlen(text), &err),
			 -EINVAL);
	ck_assert_int_eq(err.code, EINVAL);
	ck_assert_msg(strstr(err.msg, "config:"), "message: %s", err.msg);
	ck_assert_int_eq(c.sampling.top_k, 40);
	fs_config_free(&c);
}
END_TEST

/*
 * A value too small for a double (a subnormal, or less) is inside the
 * range: temperature=1e-320 was refused because strtod says ERANGE.
 */
START_TEST(test_config_accepts_subnormal)
{
	static const char *const tiny[] = { "temperature=1e-320",
					    "temperature=4.9e-324",
					    "temperature=1e-400",
					    "min_p=1e-310", "top_p=2e-308" };
	struct fs_config c;
	struct err err = { 0 };

	for (size_t i = 0; i < sizeof(tiny) / sizeof(tiny[0]); i++) {
		fs_config_defaults(&c);
		ck_assert_msg(fs_config_write(&c, tiny[i], strlen(tiny[i]),
					      &err) == 0,
			      "%s: %s", tiny[i], err.msg);
		fs_config_free(&c);
	}
	fs_config_defaults(&c);
	ck_assert_int_eq(fs_config_write(&c, "temperature=1e-40", 17, &err), 0);
	ck_assert(c.sampling.temperature > 0.0f); /* a float subnormal */
	fs_config_free(&c);
}
END_TEST

/* What config reads back parses to the same: trailing blanks of a stop. */
START_TEST(test_config_format_round_trip)
{
	const char *text = "stop=\\n\\x20\nstop=a \\x20\n";
	struct fs_config c, again;
	struct fs_buf b = { 0 }, b2 = { 0 };
	struct err err = { 0 };

	fs_config_defaults(&c);
	ck_assert_int_eq(fs_config_write(&c, text, strlen(text), &err), 0);
	ck_assert_str_eq(c.stop[0], "\n ");
	ck_assert_str_eq(c.stop[1], "a  ");
	ck_assert_int_eq(fs_config_format(&c, &b), 0);
	fs_config_defaults(&again);
	ck_assert_int_eq(fs_config_write(&again, b.p, b.len, &err), 0);
	ck_assert_int_eq(fs_config_format(&again, &b2), 0);
	ck_assert_str_eq(b.p, b2.p);
	ck_assert_str_eq(again.stop[0], "\n ");
	ck_assert_str_eq(again.stop[1], "a  ");
	fs_buf_free(&b);
	fs_buf_free(&b2);
	fs_config_free(&again);
	fs_config_free(&c);
}
END_TEST

START_TEST(test_config_rejects_nul_and_too_many_stops)
{
	struct fs_config c;
	struct err err = { 0 };
	char line[32];

	fs_config_defaults(&c);
	ck_assert_int_eq(fs_config_write(&c, "top_k=1\0x", 9, &err), -EINVAL);
	for (int i = 0; i < FS_STOP_MAX; i++) {
		snprintf(line, sizeof(line), "stop=s%d", i);
		ck_assert_int_eq(fs_config_write(&c, line, strlen(line), &err),
				 0);
	}
	ck_assert_int_eq(fs_config_write(&c, "stop=x", 6, &err), -EINVAL);
	ck_assert_uint_eq(c.n_stop, FS_STOP_MAX);
	fs_config_free(&c);
}
END_TEST

START_TEST(test_config_merge_overrides_only_what_was_set)
{
	struct fs_config base, over = { 0 }, out;
	struct err err = { 0 };

	fs_config_defaults(&base);
	ck_assert_int_eq(fs_config_write(&base, "top_k=5\nstop=A", 14, &err),
			 0);
	ck_assert_int_eq(fs_config_write(&over, "temperature=0", 13, &err), 0);
	ck_assert_int_eq(fs_config_merge(&out, &base, &over), 0);
	ck_assert(out.sampling.temperature == 0);
	ck_assert_int_eq(out.sampling.top_k, 5); /* inherited */
	ck_assert_uint_eq(out.n_stop, 1);
	ck_assert_str_eq(out.stop[0], "A");
	fs_config_free(&out);
	ck_assert_int_eq(fs_config_write(&over, "stop=", 5, &err), 0);
	ck_assert_int_eq(fs_config_merge(&out, &base, &over), 0);
	ck_assert_uint_eq(out.n_stop, 0); /* cleared by over */
	fs_config_free(&out);
	ck_assert_int_eq(fs_config_merge(&out, &base, NULL), 0);
	ck_assert_int_eq(out.sampling.top_k, 5);
	fs_config_free(&out);
	/* logprobs, and the constraint keys as one: an empty one clears */
	ck_assert_int_eq(
		fs_config_write(&over, "logprobs=20\ngrammar=", 20, &err), 0);
	base.format = strdup("json");
	ck_assert_int_eq(fs_config_merge(&out, &base, &over), 0);
	ck_assert_uint_eq(out.logprobs, 20);
	ck_assert_ptr_null(out.format);
	fs_config_free(&out);
	fs_config_free(&over);
	fs_config_free(&base);
}
END_TEST

START_TEST(test_errors_keeps_last_100)
{
	struct fs_errors e;
	struct fs_buf b = { 0 };
	char *first;
	int lines = 0;

	fs_errors_init(&e);
	for (int i = 0; i < 250; i++)
		fs_errors_add(&e, "error %d\nsecond line", i);
	ck_assert_int_eq(fs_errors_format(&e, &b), 0);
	for (char *p = b.p; *p; p++)
		lines += *p == '\n';
	ck_assert_int_eq(lines, FS_ERRORS_MAX);
	first = strchr(b.p, ' ');
	ck_assert_ptr_nonnull(first);
	ck_assert(!strncmp(first, " error 150 second line\n", 23));
	ck_assert(strstr(b.p, " error 249 second line\n"));
	ck_assert_uint_eq(e.total, 250);
	fs_buf_free(&b);
	fs_errors_destroy(&e);
}
END_TEST

/* Control bytes and bad UTF-8 escaped; UTF-8 text kept. */
START_TEST(test_errors_escape)
{
	struct fs_errors e;
	struct fs_buf b = { 0 };

	fs_errors_init(&e);
	fs_errors_add(&e, "x\x1b[2JFORGED\x7f \xc3\xa9t\xc3\xa9 \xff\xc2\x9b");
	ck_assert_int_eq(fs_errors_format(&e, &b), 0);
	ck_assert_ptr_nonnull(strstr(
		b.p,
		" x\\x1b[2JFORGED\\x7f \xc3\xa9t\xc3\xa9 \\xff\\xc2\\x9b\n"));
	fs_buf_free(&b);
	fs_errors_destroy(&e);
}
END_TEST

/* A flood of one uid pushes out its own lines only. */
START_TEST(test_errors_fair_share)
{
	struct fs_errors e;
	struct fs_buf b = { 0 };
	int owner = 0, other = 0;

	fs_errors_init(&e);
	fs_errors_uid = 1000;
	for (int i = 0; i < 10; i++)
		fs_errors_add(&e, "owner %d", i);
	fs_errors_uid = 65534;
	for (int i = 0; i < 500; i++)
		fs_errors_add(&e, "flood %d", i);
	fs_errors_uid = FS_UID_DAEMON;
	ck_assert_int_eq(fs_errors_format(&e, &b), 0);
	for (char *p = b.p; (p = strchr(p, ' ')); p++) {
		owner += !strncmp(p, " owner ", 7);
		other += !strncmp(p, " flood ", 7);
	}
	ck_assert_int_eq(owner, 10);
	ck_assert_int_eq(other, FS_ERRORS_MAX - 10);
	ck_assert_ptr_nonnull(strstr(b.p, " owner 0\n"));
	ck_assert_ptr_nonnull(strstr(b.p, " flood 499\n"));
	ck_assert_uint_eq(e.total, 510);
	fs_buf_free(&b);
	fs_errors_destroy(&e);
}
END_TEST

START_TEST(test_model_slug)
{
	static const char *const cases[][2] = {
		{ "/m/Qwen3-0.6B-Q8_0.gguf", "qwen3-0.6b-q8_0" },
		{ "stories260K.gguf", "stories260k" },
		{ "a b/c d.GGUF", "c-d" },
		{ "weird name!.gguf", "weird-name-" },
		{ "..gguf", "model" },
		{ "/x/.gguf", "model" },
		{ "noext", "noext" },
	};
	char out[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fs_model_slug(cases[i][0], out, sizeof(out));
		ck_assert_str_eq(out, cases[i][1]);
	}
}
END_TEST

static void config_tests(TCase *tc)
{
	tcase_add_test(tc, test_config_defaults_format);
	tcase_add_test(tc, test_config_write_applies_lines);
	tcase_add_test(tc, test_config_system_prompt);
	tcase_add_loop_test(tc, test_config_write_rejects_bad_line, 0,
			    sizeof(bad_lines) / sizeof(bad_lines[0]));
	tcase_add_test(tc, test_config_rejects_nul_and_too_many_stops);
	tcase_add_test(tc, test_config_merge_overrides_only_what_was_set);
	tcase_add_test(tc, test_config_format_round_trip);
	tcase_add_test(tc, test_config_accepts_subnormal);
	tcase_add_test(tc, test_errors_keeps_last_100);
	tcase_add_test(tc, test_errors_escape);
	tcase_add_test(tc, test_errors_fair_share);
	tcase_add_test(tc, test_model_slug);
}

const struct check_main check_main = {
	.name = "fs_config",
	.tcase = "config",
	.add_tests = config_tests,
};
