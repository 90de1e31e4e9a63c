// SPDX-License-Identifier: MIT
/*
 * The Jinja interpreter (engine/template/).
 *
 * With TEMPLATE_REF set (tests/engine/template.sh does it), the main test:
 * every rendering @huggingface/jinja made of llama.cpp's templates
 * (TEMPLATE_DIR/NAME.jinja) for the conversations of TEMPLATE_CONVERSATIONS
 * (tools/template-ref.mjs writes TEMPLATE_REF, one JSON line each) must
 * come out byte for byte the same here; a raise_exception() there must be
 * the same raise here; what the reference itself cannot render is listed.
 *
 * Without it, the unit tests below: the semantics that the reference
 * renderings do not reach, expectations from runtime.ts's code.
 */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../engine/template/template.h"
#include "../common/check_main.h"

/* tools/template-ref.mjs's clock: 2026-02-03 04:05:06 UTC */
static int64_t template_now(void)
{
	struct tm tm = { .tm_year = 126,
			 .tm_mon = 1,
			 .tm_mday = 3,
			 .tm_hour = 4,
			 .tm_min = 5,
			 .tm_sec = 6 };

	return (int64_t)timegm(&tm);
}

/* Render src with the context given as JSON text; *out malloc'ed. */
static int render(const char *src, const char *context, char **out,
		  struct err *err)
{
	struct engine_template_options opt = { .now = template_now() };
	struct engine_template *t = NULL;
	json_t *ctx = NULL;
	int rc;

	*out = NULL;
	if (context) {
		ctx = json_loads(context, 0, NULL);
		ck_assert_msg(ctx != NULL, "bad test context: %s", context);
	}
	rc = engine_template_parse(&t, src, strlen(src), err);
	if (!rc)
		rc = engine_template_render(t, ctx, &opt, out, NULL, err);
	engine_template_free(t);
	json_decref(ctx);
	return rc;
}

static void check_render(const char *src, const char *context, const char *want)
{
	struct err err = { 0 };
	char *out;
	int rc = render(src, context, &out, &err);

	ck_assert_msg(rc == 0, "%s: %s", src, err.msg);
	ck_assert_msg(strcmp(out, want) == 0, "%s: got \"%s\", want \"%s\"",
		      src, out, want);
	free(out);
}

static void check_fails(const char *src, const char *context,
			const char *msg_part)
{
	struct err err = { 0 };
	char *out = NULL;
	int rc = render(src, context, &out, &err);

	ck_assert_msg(rc < 0, "%s: rendered \"%s\"", src, out ? out : "");
	ck_assert_msg(strstr(err.msg, msg_part),
		      "%s: message \"%s\", want "
		      "\"%s\" in it",
		      src, err.msg, msg_part);
	ck_assert_ptr_null(out);
}

/* ---- the reference ----------------------------------------------------- */

struct ref_template {
	char name[256];
	struct engine_template *t;
	char error[512]; /* parse error, "" if parsed */
};

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
		if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		} else {
			buf[n] = '\0';
		}
	}
	fclose(f);
	return buf;
}

static void ref_load(struct ref_template *rt, const char *dir, const char *name)
{
	struct err err = { 0 };
	char path[4096];
	char *src;

	if (strcmp(rt->name, name) == 0)
		return;
	engine_template_free(rt->t);
	rt->t = NULL;
	rt->error[0] = '\0';
	snprintf(rt->name, sizeof(rt->name), "%s", name);
	snprintf(path, sizeof(path), "%s/%s.jinja", dir, name);
	src = read_text(path);
	ck_assert_msg(src != NULL, "cannot read %s", path);
	if (engine_template_parse(&rt->t, src, strlen(src), &err))
		snprintf(rt->error, sizeof(rt->error), "%s", err.msg);
	free(src);
}

/* The conversation named name, as the template's context. */
static json_t *ref_context(json_t *convs, const char *name)
{
	size_t i;
	json_t *c, *ctx;

	json_array_foreach(convs, i, c)
	{
		if (strcmp(json_string_value(json_object_get(c, "name")), name))
			continue;
		ctx = json_deep_copy(c);
		json_object_del(ctx, "name");
		json_object_set_new(ctx, "bos_token", json_string("<s>"));
		json_object_set_new(ctx, "eos_token", json_string("</s>"));
		return ctx;
	}
	ck_abort_msg("no conversation %s", name);
	return NULL;
}

/* Where a and b part, for the message. */
static void ref_diff(const char *what, const char *want, const char *got)
{
	size_t i = 0;

	while (want[i] && want[i] == got[i])
		i++;
	fprintf(stderr,
		"DIFF %s at byte %zu:\n  want ...%.60s\n  got  ...%.60s\n",
		what, i, want + (i > 20 ? i - 20 : 0),
		got + (i > 20 ? i - 20 : 0));
}

START_TEST(test_template_reference)
{
	struct engine_template_options opt = { .now = template_now() };
	const char *dir = getenv("TEMPLATE_DIR");
	const char *refs = getenv("TEMPLATE_REF");
	const char *conv_path = getenv("TEMPLATE_CONVERSATIONS");
	struct ref_template rt = { 0 };
	unsigned same = 0, raised = 0, theirs = 0, bad = 0;
	json_t *convs, *line;
	char *l = NULL, *text;
	size_t cap = 0;
	FILE *f;

	ck_assert_msg(dir && conv_path, "set TEMPLATE_DIR and "
					"TEMPLATE_CONVERSATIONS too");
	convs = json_load_file(conv_path, 0, NULL);
	ck_assert_ptr_nonnull(convs);
	f = fopen(refs, "r");
	ck_assert_ptr_nonnull(f);
	while (getline(&l, &cap, f) > 0) {
		struct err err = { 0 };
		json_error_t jerr;
		const char *tname, *cname, *status, *want;
		char what[600];
		json_t *ctx;
		int rc;

		line = json_loads(l, 0, &jerr);
		ck_assert_msg(line != NULL, "bad reference line: %s",
			      jerr.text);
		tname = json_string_value(json_object_get(line, "template"));
		cname = json_string_value(
			json_object_get(line, "conversation"));
		status = json_string_value(json_object_get(line, "status"));
		snprintf(what, sizeof(what), "%s / %s", tname, cname);
		ref_load(&rt, dir, tname);
		if (!strcmp(status, "error")) {
			theirs++;
			printf("not rendered by @huggingface/jinja: %s: %s\n",
			       what,
			       json_string_value(
				       json_object_get(line, "message")));
			json_decref(line);
			continue;
		}
		if (rt.error[0]) {
			fprintf(stderr, "FAIL %s: %s\n", what, rt.error);
			bad++;
			json_decref(line);
			continue;
		}
		ctx = ref_context(convs, cname);
		text = NULL;
		rc = engine_template_render(rt.t, ctx, &opt, &text, NULL, &err);
		json_decref(ctx);
		if (!strcmp(status, "ok")) {
			want = json_string_value(json_object_get(line, "text"));
			if (rc) {
				fprintf(stderr, "FAIL %s: %s\n", what, err.msg);
				bad++;
			} else if (strcmp(text, want)) {
				ref_diff(what, want, text);
				bad++;
			} else {
				same++;
			}
		} else {
			char msg[600];

			want = json_string_value(
				json_object_get(line, "message"));
			snprintf(msg, sizeof(msg), ENGINE_TEMPLATE_RAISED "%s",
				 want);
			if (rc != -EINVAL || strcmp(err.msg, msg)) {
				fprintf(stderr,
					"FAIL %s: want the raise "
					"\"%s\", got %d \"%s\"\n",
					what, want, rc, rc ? err.msg : text);
				bad++;
			} else {
				raised++;
			}
		}
		free(text);
		json_decref(line);
	}
	free(l);
	fclose(f);
	engine_template_free(rt.t);
	json_decref(convs);
	printf("%u renderings identical, %u raised the same exception, %u "
	       "not rendered by the reference, %u wrong\n",
	       same, raised, theirs, bad);
	ck_assert_uint_eq(bad, 0);
	ck_assert_uint_gt(same, 0);
}
END_TEST

/* ---- unit tests -------------------------------------------------------- */

START_TEST(test_template_text_and_whitespace)
{
	/* one trailing newline goes; trim_blocks; lstrip_blocks; - strips */
	check_render("a\n", NULL, "a");
	check_render("a\n\n", NULL, "a\n");
	check_render("{% if true %}\nx{% endif %}\n", NULL, "x");
	check_render("  {% if true %}x{% endif %}", NULL, "x");
	check_render("a  {%- if true -%}  x  {%- endif %} b", NULL, "ax b");
	check_render("a {{- 'b' -}} c", NULL, "abc");
	check_render("a {#- note -#} b", NULL, "ab");
	/* transformers' generation tags go, dashes take the spaces too */
	check_render("x{% generation %} y {% endgeneration %}z", NULL, "x y z");
	check_render("x {%- generation -%} y {%- endgeneration %}z", NULL,
		     "xyz");
}
END_TEST

START_TEST(test_template_numbers_as_javascript)
{
	check_render("{{ 3.0 }} {{ 2.5 }} {{ 7 / 2 }} {{ 6 / 2 }}", NULL,
		     "3.0 2.5 3.5 3.0");
	check_render("{{ 'a' ~ 3.0 }} {{ 'a' + 2.5 }}", NULL, "a3 a2.5");
	check_render("{{ 10 ** 21 }} {{ 1 / 1000000 }} {{ 1 / 10000000 }}",
		     NULL, "1e+21 0.000001 1e-7");
	check_render("{{ -7 // 2 }} {{ -7 % 3 }} {{ 7.5 // 2 }}", NULL,
		     "-4 -1 3.0");
	check_render("{{ 0.1 + 0.2 }} {{ [1.5, 2.0] | tojson }}", NULL,
		     "0.30000000000000004 [1.5, 2]");
	check_render("{{ 2 ** 10 }} {{ 2 ** -1 }}", NULL, "1024 0.5");
}
END_TEST

START_TEST(test_template_loose_equality)
{
	check_render("{{ 1 == '1' }} {{ 1 == 1.0 }} {{ true == 1 }} "
		     "{{ x == none }} {{ '' == 0 }} {{ [] == [] }}",
		     NULL, "true true true true true false");
	check_render("{{ 1 in ['1'] }} {{ 1 in [1.0] }} {{ 'b' in 'abc' }} "
		     "{{ 'k' in {'k': 1} }} {{ 'x' not in y }}",
		     NULL, "false true true true true");
}
END_TEST

START_TEST(test_template_loops)
{
	check_render("{% for x in [1, 2, 3] %}{{ loop.index }}{{ x }}"
		     "{% if loop.last %}!{% endif %}{% endfor %}",
		     NULL, "112233!");
	/* the iteration that breaks or continues writes nothing */
	check_render("{% for x in [1, 2, 3] %}<{{ x }}{% if x == 2 %}"
		     "{% break %}{% endif %}>{% endfor %}",
		     NULL, "<1>");
	check_render("{% for x in [1, 2, 3] %}<{{ x }}{% if x == 2 %}"
		     "{% continue %}{% endif %}>{% endfor %}",
		     NULL, "<1><3>");
	/* else runs when no iteration ended normally */
	check_render("{% for x in [] %}x{% else %}empty{% endfor %}", NULL,
		     "empty");
	check_render(
		"{% for x in [1] %}{% continue %}{% else %}none{% endfor %}",
		NULL, "none");
	/* a set inside the loop lasts to the next iteration, not after it */
	check_render("{% set n = 0 %}{% for x in [1, 2] %}{{ n }}"
		     "{% set n = x %}{% endfor %}{{ n }}",
		     NULL, "010");
	check_render("{% set ns = namespace(n=0) %}{% for x in [1, 2] %}"
		     "{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}",
		     NULL, "3");
	check_render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }}"
		     ";{% endfor %}{% for k in {'x': 1} %}{{ k }}{% endfor %}",
		     NULL, "a=1;b=2;x");
	check_render("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}"
		     "{{ loop.length }}{% endfor %}",
		     NULL, "2242");
}
END_TEST

START_TEST(test_template_macros)
{
	check_render("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}"
		     "{{ m(1) }}{{ m(1, 2) }}{{ m(b=3, a=4) }}",
		     NULL, "1B1243");
	/* the body sees the caller's variables */
	check_render("{% macro m() %}{{ v }}{% endmacro %}{% set v = 1 %}"
		     "{{ m() }}",
		     NULL, "1");
	check_render("{% macro m() %}{{ kwargs.x }}{{ varargs | length }}"
		     "{% endmacro %}{{ m(1, 2, x=3) }}",
		     NULL, "32");
	check_fails("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", NULL,
		    "takes not more than 1");
	check_render("{% macro list() %}[{{ caller() }}]{% endmacro %}"
		     "{% call list() %}inner{% endcall %}",
		     NULL, "[inner]");
	check_render("{% filter upper %}abc{% endfilter %}", NULL, "ABC");
	check_render("{% set x %}a{{ 1 }}{% endset %}{{ x }}", NULL, "a1");
}
END_TEST

START_TEST(test_template_strings)
{
	check_render("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|"
		     "{{ ' a '.lstrip() }}|{{ ' a '.rstrip('\\n') }}|",
		     NULL, "a b|xxaxx|a | a|");
	check_render("{{ 'a,b,,c'.split(',') | tojson }} "
		     "{{ ' a  b '.split() | tojson }} "
		     "{{ 'a b c'.split(none, 1) | tojson }} "
		     "{{ 'a,b,c'.split(',', 1) | tojson }}",
		     NULL,
		     "[\"a\", \"b\", \"\", \"c\"] [\"a\", \"b\"] "
		     "[\"a\", \"b c\"] [\"a\", \"b,c\"]");
	check_render(
		"{{ 'aaa'.replace('a', 'b', 2) }} {{ 'ab'.replace('', '-') }}",
		NULL, "bba -a-b-");
	check_render("{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} "
		     "{{ 'Été'.upper() }} {{ 'abc'[::-1] }} {{ 'abc'[1] }} "
		     "{{ 'héllo'[1:3] }} {{ 'héllo' | length }}",
		     NULL, "Hello World HELLO ÉTÉ cba b él 5");
	check_render(
		"{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'x' | indent(2, true) }}",
		NULL, "a\n  b\n\n  c|  x");
	check_render(
		"{{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.endswith('bc') }}",
		NULL, "true true");
	check_render(
		"{{ '12abc' | int }} {{ 'x' | int }} {{ ' 1.5e1x' | float }} "
		"{{ 'x' | int(7) }} {{ -2.5 | int }}",
		NULL, "12 0 15.0 7 -3");
}
END_TEST

START_TEST(test_template_json)
{
	check_render("{{ {'a': [1, 'é', none, true], 'b': {}} | tojson }}",
		     NULL, "{\"a\": [1, \"é\", null, true], \"b\": {}}");
	check_render("{{ {'a': [1, 2]} | tojson(indent=2) }}", NULL,
		     "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
	check_render("{{ 'é\"\\n' | tojson(ensure_ascii=true) }}", NULL,
		     "\"\\u00e9\\\"\\n\"");
	check_render("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true, "
		     "separators=(',', ':')) }}",
		     NULL, "{\"a\":2,\"b\":1}");
	/* printing a list: JSON with undefined as undefined */
	check_render("{{ [1, 'a', x] }} {{ {'k': 'v'} }}", NULL,
		     "[1, \"a\", undefined] {\"k\": \"v\"}");
	/* the context: integral numbers are integers, index keys first */
	check_render("{{ v }} {{ w }} {{ o | tojson }}",
		     "{\"v\": 2.0, \"w\": 2.5, \"o\": {\"b\": 1, \"1\": 2}}",
		     "2 2.5 {\"1\": 2, \"b\": 1}");
}
END_TEST

START_TEST(test_template_filters)
{
	check_render("{{ [3, 1, 2] | sort | join(',') }} "
		     "{{ ['b', 'A', 'a'] | sort | join }} "
		     "{{ [1, 2] | reverse | list | first }} "
		     "{{ [1, 1, 2] | unique | length }}",
		     NULL, "1,2,3 Aab 2 2");
	check_render(
		"{% set xs = [{'r': 'a', 'n': 1}, {'r': 'b'}, {'r': 'a'}] %}"
		"{{ xs | selectattr('r', 'equalto', 'a') | list | length }}"
		"{{ xs | rejectattr('n') | list | length }}"
		"{{ xs | map(attribute='n', default=0) | join(',') }}"
		"{{ xs | sort(attribute='r', reverse=true) | map(attribute='r')"
		" | join }}",
		NULL, "221,0,0baa");
	check_render("{{ {'b': 2, 'a': 1} | dictsort | tojson }} "
		     "{{ {'a': 1}.get('a') }} {{ {'a': 1}.get('z', 5) }} "
		     "{{ {'a': 1}.get('z') }} {{ x | default('d') }} "
		     "{{ '' | default('d', true) }}",
		     NULL, "[[\"a\", 1], [\"b\", 2]] 1 5  d d");
	check_fails("{{ [1, 2] | min }}", NULL,
		    "unknown ArrayValue filter: min");
	check_fails("{{ {'a': 1} | string }}", NULL,
		    "unknown ObjectValue filter: string");
	check_fails("{{ x | trim }}", NULL,
		    "cannot apply filter \"trim\" to type: UndefinedValue");
}
END_TEST

START_TEST(test_template_tests_and_members)
{
	check_render("{{ x is defined }} {{ none is none }} {{ 1 is number }} "
		     "{{ 'a' is string }} {{ [1] is iterable }} "
		     "{{ {} is mapping }} {{ 3 is odd }} {{ 'ab' is lower }}",
		     NULL, "false true true true true true true true");
	/* undefined.attr is undefined; messages[-1]; .length */
	check_render("{{ x.y.z is defined }} {{ [1, 2, 3][-1] }} "
		     "{{ [1, 2].length }} {{ 'abc'.length }}",
		     NULL, "false 3 2 3");
	check_render("{{ 'yes' if 1 else 'no' }} {{ 'x' if 0 }}|", NULL,
		     "yes |");
}
END_TEST

START_TEST(test_template_errors)
{
	char deep[1024] = "{{ ";

	for (int i = 0; i < 300; i++)
		strcat(deep, "(");
	strcat(deep, "1 }}");
	/* the template's exception, with its message */
	check_fails("{{ raise_exception('Bad role: ' + 'x') }}", NULL,
		    ENGINE_TEMPLATE_RAISED "Bad role: x");
	/* syntax errors point at the place */
	check_fails("{% if x %}never closed", NULL, "template:");
	check_fails("{{ 'unterminated }}", NULL, "unexpected end of input");
	check_fails("{% frobnicate %}", NULL, "unknown statement near");
	check_fails(deep, NULL, "nested too deep");
	/* runaway templates end, with a message */
	check_fails("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", NULL,
		    "nested too deep");
	check_fails("{% for i in range(1000000) %}{% for j in range(1000000) %}"
		    "{% endfor %}{% endfor %}",
		    NULL, "runs too long");
	check_fails("{% set ns = namespace(s='x') %}{% for i in range(100) %}"
		    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
		    NULL, "needs more than");
	check_fails("{{ range(10000000) | length }}", NULL, "range() of more");
	check_fails("{{ true }}", "{\"true\": 1}", "already declared");
	/* a namespace that holds itself is freed at the end (ASan) */
	check_render("{% set ns = namespace() %}{% set ns.self = ns %}ok", NULL,
		     "ok");
}
END_TEST

START_TEST(test_template_strftime)
{
	setenv("TZ", "UTC", 1);
	tzset();
	check_render("{{ strftime_now('%d %b %Y %H:%M %B %% %j') }}", NULL,
		     "03 Feb 2026 04:05 February % %j");
}
END_TEST

static void template_tests(TCase *tc)
{
	tcase_add_test(tc, test_template_text_and_whitespace);
	tcase_add_test(tc, test_template_numbers_as_javascript);
	tcase_add_test(tc, test_template_loose_equality);
	tcase_add_test(tc, test_template_loops);
	tcase_add_test(tc, test_template_macros);
	tcase_add_test(tc, test_template_strings);
	tcase_add_test(tc, test_template_json);
	tcase_add_test(tc, test_template_filters);
	tcase_add_test(tc, test_template_tests_and_members);
	tcase_add_test(tc, test_template_errors);
	tcase_add_test(tc, test_template_strftime);
	if (getenv("TEMPLATE_REF"))
		tcase_add_test(tc, test_template_reference);
}

const struct check_main check_main = {
	.name = "template",
	.timeout = 120,
	.add_tests = template_tests,
};
