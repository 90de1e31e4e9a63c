// SPDX-License-Identifier: MIT
/*
 * Grammar tests (engine/grammar): GBNF parsing and its errors, the masks
 * against a direct check of every token, answers under format=json that a
 * JSON parser takes.
 *
 * The direct check decodes each token's piece and runs it through the
 * stacks one code point at a time (gram_token_allowed), with none of the
 * trie, the cache keys or the escapes of mask.c: the masks must agree
 * with it on every token of the vocabulary at every step of seeded random
 * walks through several grammars, on the 16k and the 152k vocabularies.
 *
 * GRAMMAR_SCHEMA_CASES=FILE (tests/engine/grammar-llama.sh) runs instead
 * the JSON schema cases of llama.cpp's own test-json-schema-to-grammar,
 * extracted to FILE: the GBNF made here must be llama.cpp's, line for line.
 */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/engine.h"
#include "../../engine/grammar/internal.h"
#include "../common/check_main.h"

static struct engine_model *model16k, *model152k;

static struct engine_model *open_model(const char *stem)
{
	struct engine_model_options opt = { .n_ctx = 1024, .threads = 1 };
	struct engine_model *m = NULL;
	struct err err = { 0 };
	char path[4096];

	if (engine_model_open(&m, check_shared_model(path, sizeof(path), stem),
			      &opt, &err))
		return NULL;
	return m;
}

static int grammar_setup(void)
{
	int rc = check_need_model("tiny-qwen3-bpe16k-f16");

	if (!rc)
		rc = check_need_model("tiny-qwen2-bpe152k-legacyq");
	if (rc)
		return rc;
	model16k = open_model("tiny-qwen3-bpe16k-f16");
	model152k = open_model("tiny-qwen2-bpe152k-legacyq");
	return model16k && model152k ? 0 : 1;
}

static void grammar_teardown(void)
{
	engine_model_free(model16k);
	engine_model_free(model152k);
}

/* ---- parsing ----------------------------------------------------------- */

static void expect_error(const char *gbnf, const char *msg)
{
	struct engine_grammar *g = NULL;
	struct err err = { 0 };

	ck_assert_int_eq(
		engine_grammar_new(&g, model16k, gbnf, strlen(gbnf), &err),
		-EINVAL);
	ck_assert_ptr_null(g);
	ck_assert_msg(strstr(err.msg, msg), "'%s': got '%s', want '%s'", gbnf,
		      err.msg, msg);
}

START_TEST(test_grammar_errors_name_the_position)
{
	expect_error("root ::= \"a\"\nitem := \"b\"\n",
		     "line 2 column 6: expecting ::=");
	expect_error("root ::= \"abc",
		     "line 1 column 14: unexpected end of input");
	expect_error("root ::= [a-", "unexpected end of input");
	expect_error("root ::= foo\n",
		     "line 1 column 10: undefined rule 'foo'");
	expect_error("item ::= \"x\"\n", "no rule named 'root'");
	expect_error("root ::= \"\\q\"", "line 1 column 11: unknown escape");
	expect_error("root ::= \"\\x4\"", "expecting 2 hex digits");
	expect_error("root ::= *", "expecting an item before */+/?/{");
	expect_error("root ::= \"a\"{3,2}", "maximum below its minimum");
	expect_error("root ::= \"a\"{2001}", "too many repetitions");
	expect_error("root ::= (\"a\" \"b\"", "expecting ')'");
	expect_error("root ::= root \"a\" | \"b\"", "left recursion");
	expect_error("root ::= x\nx ::= \"a\"? root", "left recursion");
	expect_error("root ::= <[99999999]>", "token id past the vocabulary");
	expect_error("root ::= <nonsense-token-text>", "not a single token");
	expect_error("root ::= \"a\" \x01", "expecting a newline");
	expect_error("", "no rules");
}
END_TEST

START_TEST(test_grammar_parses_llama_grammars)
{
	static const char *const ok[] = {
		engine_grammar_json,
		"root ::= item+\nitem ::= \"- \" [^\\r\\n\\x0b\\x0c\\x85\\u2028"
		"\\u2029]+ \"\\n\"\n",
		"root  ::= (expr \"=\" ws term \"\\n\")+\nexpr  ::= term ([-+*/] "
		"term)*\nterm  ::= ident | num | \"(\" ws expr \")\" ws\nident ::= "
		"[a-z] [a-z0-9_]* ws\nnum   ::= [0-9]+ ws\nws    ::= [ \\t\\n]*\n",
		"root ::= ([] \"a\" # comments\r\n  | \"b\"{0,2} . "
		"[^\\]x]{1,})\n",
		"root ::= <[5]> !<[7]> \"x\"?\n",
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct engine_grammar *g = NULL;
		struct err err = { 0 };

		ck_assert_msg(!engine_grammar_new(&g, model16k, ok[i],
						  strlen(ok[i]), &err),
			      "grammar %zu: %s", i, err.msg);
		engine_grammar_unref(g);
	}
}
END_TEST

/* ---- masks against the direct check ------------------------------------ */

/* What llama.cpp's grammar sampler decides for token t alone. */
static bool direct_allowed(struct engine_grammar_matcher *mt, int32_t t)
{
	bool ok = false;

	ck_assert_int_eq(gram_matcher_direct(mt, t, &ok), 0);
	return ok;
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * Random walks: at each step the mask must equal the direct check on
 * every token; then a random allowed token is accepted (half of the time
 * one that leaves a character unfinished, when there is one).
 */
static void walk_compare(struct engine_model *m, const char *gbnf,
			 uint64_t seed, int walks, int steps)
{
	uint32_t n_vocab = engine_model_info(m)->n_vocab;
	struct engine_grammar *g = NULL;
	struct err err = { 0 };
	int32_t *allowed = malloc(n_vocab * sizeof(*allowed));
	const uint64_t seed0 = seed;

	ck_assert_ptr_nonnull(allowed);
	ck_assert_msg(!engine_grammar_new(&g, m, gbnf, strlen(gbnf), &err),
		      "%s", err.msg);
	for (int w = 0; w < walks; w++) {
		struct engine_grammar_matcher *mt = NULL;

		ck_assert_int_eq(engine_grammar_matcher_new(&mt, g, &err), 0);
		for (int s = 0; s < steps; s++) {
			const uint64_t *mask;
			uint32_t n_allowed = 0, n_partial = 0, wrong = 0;
			int32_t pick, first_wrong = -1;

			ck_assert_int_eq(
				engine_grammar_matcher_mask(mt, &mask, &err),
				0);
			for (uint32_t t = 0; t < n_vocab; t++) {
				bool a = (mask[t >> 6] >> (t & 63)) & 1;

				if (a != direct_allowed(mt, (int32_t)t)) {
					if (!wrong++)
						first_wrong = (int32_t)t;
				}
				if (a)
					allowed[n_allowed++] = (int32_t)t;
			}
			ck_assert_msg(
				!wrong,
				"walk %d step %d: %u tokens differ, first "
				"%d",
				w, s, wrong, first_wrong);
			if (!n_allowed)
				break;
			/* prefer tokens that end inside a character */
			for (uint32_t i = 0; i < n_allowed; i++) {
				const struct gram_vocab *v = gram_matcher_vocab(
					mt);
				const uint8_t *pc = v->piece[allowed[i]];
				uint32_t len = v->piece_len[allowed[i]];

				if (len && (pc[len - 1] & 0xc0) >= 0x80 &&
				    (pc[len - 1] & 0xe0) != 0x80)
					allowed[n_partial++] = allowed[i];
			}
			if (n_partial && rng_next(&seed) % 2)
				pick = allowed[rng_next(&seed) % n_partial];
			else
				pick = allowed[rng_next(&seed) % n_allowed];
			if (engine_token_is_eog(m, pick))
				break;
			ck_assert_msg(
				!engine_grammar_matcher_accept(mt, pick, &err),
				"seed %llu walk %d step %d: %s",
				(unsigned long long)seed0, w, s, err.msg);
		}
		engine_grammar_matcher_free(mt);
	}
	engine_grammar_unref(g);
	free(allowed);
}

static const char grammar_unicode[] =
	"root ::= (cjk | quote | word){1,8} \".\"\n"
	"cjk ::= [\\u4e00-\\u9fff]{1,4}\n"
	"quote ::= \"\\u00ab\" [^\\u00bb\\n]{0,6} \"\\u00bb\"\n"
	"word ::= \" \"? [a-zA-Z\\u00e0-\\u00ff]+\n";

static const char grammar_list[] =
	"root ::= item+\n"
	"item ::= \"- \" [^\\r\\n\\x0b\\x0c\\x85\\u2028\\u2029]+ \"\\n\"\n";

static const char grammar_tokens[] =
	"root ::= (\"a\" | <[300]>) !<[13]> [a-z ]{0,12} (<[198]> | \"!\")\n";

START_TEST(test_grammar_masks_match_direct_16k)
{
	walk_compare(model16k, engine_grammar_json, 1, 3, 40);
	walk_compare(model16k, grammar_unicode, 2, 3, 30);
	walk_compare(model16k, grammar_list, 3, 2, 30);
	walk_compare(model16k, grammar_tokens, 4, 4, 16);
}
END_TEST

START_TEST(test_grammar_masks_match_direct_152k)
{
	walk_compare(model152k, engine_grammar_json, 5, 1, 25);
	walk_compare(model152k, grammar_unicode, 6, 1, 20);
}
END_TEST

/* ---- answers ------------------------------------------------------------ */

/* One answer of m under g: its text in out (cap bytes); 1 if it ended. */
static int answer(struct engine_model *m, struct engine_grammar *g,
		  const char *prompt, uint64_t seed, char *out, size_t cap)
{
	struct engine_generate_options opt = { 0 };
	struct engine_generation *gen = NULL;
	struct engine_ctx *ctx = NULL;
	struct engine_seq *seq = NULL;
	struct err err = { 0 };
	size_t len = 0, n;
	char buf[4096];
	int rc;

	engine_sampling_defaults(&opt.sampling);
	opt.sampling.seed = seed;
	opt.sampling.temperature = 1.0f;
	opt.max_tokens = 64;
	opt.grammar = g;
	ck_assert_int_eq(engine_ctx_new(&ctx, m, NULL, &err), 0);
	ck_assert_int_eq(engine_seq_new(ctx, &seq, &err), 0);
	ck_assert_msg(!engine_generation_new(&gen, m, seq, prompt,
					     strlen(prompt), &opt, &err),
		      "%s", err.msg);
	while ((rc = engine_generation_step(gen, buf, sizeof(buf), &n, &err)) >=
	       0) {
		ck_assert_uint_lt(len + n, cap);
		memcpy(out + len, buf, n);
		len += n;
		if (rc == 0)
			break;
	}
	ck_assert_msg(rc >= 0, "%s", err.msg);
	out[len] = '\0';
	n = engine_generation_stats(gen)->gen_tokens;
	{
		size_t np, nt;
		const int32_t *t = engine_generation_tokens(gen, &np, &nt);

		rc = engine_token_is_eog(m, t[nt - 1]);
	}
	engine_generation_free(gen);
	engine_seq_free(seq);
	engine_ctx_free(ctx);
	return rc;
}

START_TEST(test_grammar_json_answers_parse)
{
	struct engine_grammar *g = NULL;
	struct err err = { 0 };
	char *text = malloc(1 << 20);
	int n = 0;

	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(engine_grammar_new(&g, model152k, engine_grammar_json,
					    strlen(engine_grammar_json), &err),
			 0);
	for (uint64_t seed = 1; seed <= 200; seed++) {
		json_error_t jerr;
		json_t *j;

		answer(model152k, g, "A JSON object:", seed, text, 1 << 20);
		j = json_loads(text, JSON_DECODE_ANY, &jerr);
		ck_assert_msg(j && json_is_object(j),
			      "seed %llu: '%s' does not parse: %s",
			      (unsigned long long)seed, text, jerr.text);
		json_decref(j);
		n++;
	}
	ck_assert_int_eq(n, 200);
	engine_grammar_unref(g);
	free(text);
}
END_TEST

/* ---- llama.cpp's JSON schema cases --------------------------------------- */

/* llama.cpp's trim(): outer blanks, and the blanks starting each line */
static char *trim_lines(const char *s)
{
	char *out = malloc(strlen(s) + 1), *o = out;
	bool line_start = true;

	while (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t')
		s++;
	for (; *s; s++) {
		if (line_start && (*s == ' ' || *s == '\t'))
			continue;
		line_start = *s == '\n';
		*o++ = *s;
	}
	while (o > out && (o[-1] == ' ' || o[-1] == '\n' || o[-1] == '\r' ||
			   o[-1] == '\t'))
		o--;
	*o = '\0';
	return out;
}

START_TEST(test_grammar_llama_schema_cases)
{
	const char *path = getenv("GRAMMAR_SCHEMA_CASES");
	json_error_t jerr;
	json_t *cases = json_load_file(path, 0, &jerr), *c;
	size_t i;
	int failed = 0;

	ck_assert_msg(cases && json_array_size(cases) > 50, "%s: %s", path,
		      jerr.text);
	json_array_foreach(cases, i, c)
	{
		const char *name = json_string_value(
			json_object_get(c, "name"));
		const char *schema = json_string_value(
			json_object_get(c, "schema"));
		const char *want = json_string_value(
			json_object_get(c, "grammar"));
		bool ok_expected = json_is_true(json_object_get(c, "success"));
		struct err err = { 0 };
		char *got = NULL;
		int rc = engine_json_schema_to_gbnf(schema, strlen(schema),
						    &got, &err);

		if (!ok_expected) {
			if (!rc) {
				printf("case '%s': no error, got\n%s\n", name,
				       got);
				failed++;
			}
		} else if (rc) {
			printf("case '%s': %s\n", name, err.msg);
			failed++;
		} else {
			char *a = trim_lines(got), *b = trim_lines(want);

			if (strcmp(a, b)) {
				printf("case '%s':\n--- llama.cpp\n%s\n--- "
				       "ours\n%s\n",
				       name, b, a);
				failed++;
			}
			free(a);
			free(b);
		}
		free(got);
	}
	ck_assert_msg(!failed, "%d of %zu cases differ", failed,
		      json_array_size(cases));
	json_decref(cases);
}
END_TEST

static Suite *grammar_suite(void)
{
	Suite *s = suite_create("grammar");
	TCase *tc = tcase_create("grammar");

	/* the JSON answers take minutes on a loaded 2-core machine */
	tcase_set_timeout(tc, 1800);
	if (getenv("GRAMMAR_SCHEMA_CASES")) {
		tcase_add_test(tc, test_grammar_llama_schema_cases);
	} else {
		tcase_add_test(tc, test_grammar_errors_name_the_position);
		tcase_add_test(tc, test_grammar_parses_llama_grammars);
		tcase_add_test(tc, test_grammar_masks_match_direct_16k);
		tcase_add_test(tc, test_grammar_masks_match_direct_152k);
		tcase_add_test(tc, test_grammar_json_answers_parse);
	}
	suite_add_tcase(s, tc);
	return s;
}

const struct check_main check_main = {
	.setup = grammar_setup,
	.suite = grammar_suite,
	.teardown = grammar_teardown,
};
