// SPDX-License-Identifier: MIT
/*
 * The engine against llama.cpp: every model in $SHARED/models with a
 * golden file $SHARED/golden/<stem>.jsonl, every prompt in it, judged by
 * the rule of ../shared/README.md, section 4, with the per-model rel_tol
 * and margin of golden/thresholds.json:
 *
 *   1. teacher-forced, one token at a time over prompt_tokens + tokens:
 *      the logits of the five golden top-5 ids within
 *      rel_tol * max(1, |golden|), and the argmax equal to tokens[s] at
 *      every step whose golden margin is >= margin;
 *   2. free-running greedy decoding of 48 tokens from prompt_tokens (which
 *      the engine's tokenizer must reproduce from the prompt text) equal
 *      to tokens up to the first step whose golden margin is < margin.
 *
 * Prints per model the largest relative error and how many of the 48
 * free-running tokens each prompt matched (Documentation/engine.md quotes
 * these figures).
 *
 *   make build/tests/engine/test_golden && build/tests/engine/test_golden
 *
 * With GOLDEN_KV=TYPE_K/TYPE_V (q8_0/q4_0, ...) the models run with that
 * KV cache and the golden files are $GOLDEN_DIR/<stem>.<k>-<v>.jsonl,
 * made by the same llama.cpp with the same cache types
 * (tools/golden-kv.mjs; tests/engine/golden-kv.sh runs this); models
 * without such a file are left out. GOLDEN_PLACEMENT="all ref0" runs each
 * model where that placement command puts it (tests/engine/ref0.sh),
 * applied before the weights are read (load.defer: the device's tensors
 * go from the file straight there, as llmfs-run --placement loads them),
 * GOLDEN_PLACEMENT_THEN a second command after the load ("kv cpu").
 * GOLDEN_THREADS=N runs the engine with
 * N threads (the reference's 2 matter past 256 positions: kv.md).
 */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/engine.h"
#include "../../engine/tokenizer/tokenizer.h"
#include "../common/check_main.h"

#define GOLDEN_STEPS 48
#define GOLDEN_MAX_MODELS 32

static char golden_dir[1100];
static const char *kv_type_k, *kv_type_v;
static char golden_suffix[160] = ".jsonl";
static char golden_label[80];
static char *model_stems[GOLDEN_MAX_MODELS];
static int n_models;

static int32_t golden_argmax(const float *x, uint32_t n)
{
	uint32_t i, best = 0;

	/* strictly greater: the lowest id wins a tie, as llama.cpp's greedy */
	for (i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return (int32_t)best;
}

static int32_t *golden_ids(json_t *arr, size_t *n)
{
	size_t i;
	int32_t *ids;

	ck_assert_msg(json_is_array(arr), "golden: token list is not an array");
	*n = json_array_size(arr);
	ids = malloc((*n ? *n : 1) * sizeof(*ids));
	ck_assert_ptr_nonnull(ids);
	for (i = 0; i < *n; i++)
		ids[i] = (int32_t)json_integer_value(json_array_get(arr, i));
	return ids;
}

struct golden_stats {
	double max_rel; /* over all steps and top-5 ids */
	int full;	/* prompts whose 48 free tokens all match */
	int prompts;
	char prefixes[256]; /* matched free-running prefix per prompt */
};

static void golden_forward(struct engine_ctx *ctx, struct engine_seq *seq,
			   const int32_t *tok, size_t n, float *logits)
{
	struct engine_batch_item it = {
		.seq = seq,
		.tokens = tok,
		.n_tokens = n,
		.logits = logits,
	};
	struct err err = { 0 };

	ck_assert_msg(engine_forward(ctx, &it, 1, &err) == 0, "forward: %s",
		      err.msg);
}

/* Rule 1 over one golden line. */
static void golden_teacher_forced(struct engine_ctx *ctx, json_t *line,
				  const int32_t *prompt, size_t n_prompt,
				  const int32_t *tokens, double rel_tol,
				  double margin, struct golden_stats *st)
{
	const struct engine_model_info *info = engine_model_info(
		engine_ctx_model(ctx));
	json_t *top5 = json_object_get(line, "top5");
	struct engine_seq *seq = NULL;
	struct err err = { 0 };
	float *logits = malloc(info->n_vocab * sizeof(float));
	size_t s, j;

	ck_assert_ptr_nonnull(logits);
	ck_assert_int_eq(json_array_size(top5), GOLDEN_STEPS);
	ck_assert_msg(engine_seq_new(ctx, &seq, &err) == 0, "%s", err.msg);
	golden_forward(ctx, seq, prompt, n_prompt, logits);
	for (s = 0; s < GOLDEN_STEPS; s++) {
		json_t *step = json_array_get(top5, s);
		double g0, g1;

		if (s > 0)
			golden_forward(ctx, seq, &tokens[s - 1], 1, logits);
		for (j = 0; j < 5; j++) {
			json_t *pair = json_array_get(step, j);
			int32_t id = (int32_t)json_integer_value(
				json_array_get(pair, 0));
			double g = json_number_value(json_array_get(pair, 1));
			double e = logits[id];
			double rel = fabs(e - g) / fmax(1.0, fabs(g));

			if (rel > st->max_rel)
				st->max_rel = rel;
			ck_assert_msg(
				rel <= rel_tol,
				"step %zu: logit of token %d is %.9g, llama.cpp %.9g (rel %.3g > %.3g)",
				s, id, e, g, rel, rel_tol);
		}
		g0 = json_number_value(
			json_array_get(json_array_get(step, 0), 1));
		g1 = json_number_value(
			json_array_get(json_array_get(step, 1), 1));
		if (g0 - g1 >= margin)
			ck_assert_msg(
				golden_argmax(logits, info->n_vocab) ==
					tokens[s],
				"step %zu: argmax %d, llama.cpp %d (margin %.3g)",
				s, golden_argmax(logits, info->n_vocab),
				tokens[s], g0 - g1);
	}
	engine_seq_free(seq);
	free(logits);
}

/* Rule 2: greedy from the prompt alone; the generated ids go to gen. */
static void golden_free_running(struct engine_ctx *ctx, const int32_t *prompt,
				size_t n_prompt, int32_t *gen)
{
	const struct engine_model_info *info = engine_model_info(
		engine_ctx_model(ctx));
	struct engine_seq *seq = NULL;
	struct err err = { 0 };
	float *logits = malloc(info->n_vocab * sizeof(float));
	size_t s;

	ck_assert_ptr_nonnull(logits);
	ck_assert_msg(engine_seq_new(ctx, &seq, &err) == 0, "%s", err.msg);
	golden_forward(ctx, seq, prompt, n_prompt, logits);
	for (s = 0; s < GOLDEN_STEPS; s++) {
		gen[s] = golden_argmax(logits, info->n_vocab);
		if (s + 1 < GOLDEN_STEPS)
			golden_forward(ctx, seq, &gen[s], 1, logits);
	}
	ck_assert_uint_eq(engine_seq_length(seq), n_prompt + GOLDEN_STEPS - 1);
	engine_seq_free(seq);
	free(logits);
}

static void golden_check_tokenizer(struct engine_model *m, json_t *line,
				   const int32_t *prompt, size_t n_prompt)
{
	const char *text = json_string_value(json_object_get(line, "prompt"));
	int32_t *toks = NULL;
	size_t n = 0, i;
	struct err err = { 0 };

	ck_assert_ptr_nonnull(text);
	ck_assert_msg(engine_tokenize(m, text, strlen(text), true, true, &toks,
				      &n, &err) == 0,
		      "tokenize: %s", err.msg);
	ck_assert_msg(n == n_prompt,
		      "prompt tokenized to %zu tokens, llama.cpp %zu", n,
		      n_prompt);
	for (i = 0; i < n; i++)
		ck_assert_msg(toks[i] == prompt[i],
			      "prompt token %zu: %d, llama.cpp %d", i, toks[i],
			      prompt[i]);
	free(toks);
}

/*
 * The text of gen as golden.mjs renders it: node-llama-cpp's
 * detokenize(tokens, false, prompt) detokenizes the prompt's non-control
 * tokens followed by gen and keeps what follows the prompt's own text, so
 * a SentencePiece word keeps its leading space after a prompt and loses
 * it at the start of a text.
 */
static char *golden_text(struct engine_model *m, const int32_t *prompt,
			 size_t n_prompt, const int32_t *gen, size_t n_gen)
{
	const struct engine_vocab *v = engine_model_vocab(m);
	int32_t *all = malloc((n_prompt + n_gen) * sizeof(*all));
	char *full = NULL, *pre = NULL, *text;
	size_t len = 0, pre_len = 0, n = 0, i;
	struct err err = { 0 };

	ck_assert_ptr_nonnull(all);
	for (i = 0; i < n_prompt; i++)
		if (!engine_vocab_is_control(v, prompt[i]))
			all[n++] = prompt[i];
	memcpy(all + n, gen, n_gen * sizeof(*all));
	ck_assert_msg(engine_vocab_detokenize(v, all, n + n_gen, false, &full,
					      &len, &err) == 0,
		      "detokenize: %s", err.msg);
	ck_assert_msg(engine_vocab_detokenize(v, all, n, false, &pre, &pre_len,
					      &err) == 0,
		      "detokenize: %s", err.msg);
	ck_assert(pre_len <= len && !memcmp(full, pre, pre_len));
	text = strdup(full + pre_len);
	ck_assert_ptr_nonnull(text);
	free(all);
	free(full);
	free(pre);
	return text;
}

START_TEST(test_golden_model)
{
	const char *stem = model_stems[_i];
	struct golden_stats st = { 0 };
	struct engine_model_options opt = { .n_ctx = 1024 };
	struct engine_ctx_options copt = { .threads = 1,
					   .kv_type_k = kv_type_k,
					   .kv_type_v = kv_type_v };
	const char *threads = getenv("GOLDEN_THREADS");

	/* llama.cpp's split of long attention depends on its thread count */
	if (threads)
		copt.threads = (uint32_t)atoi(threads);
	/* GOLDEN_BATCH_EXACT=1: a prompt's rows in the one-token order too */
	copt.batch_exact = getenv("GOLDEN_BATCH_EXACT") &&
			   atoi(getenv("GOLDEN_BATCH_EXACT"));
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;
	struct err err = { 0 };
	char path[1600], line_buf[1 << 17];
	double rel_tol, margin;
	static const char *const place_vars[] = { "GOLDEN_PLACEMENT",
						  "GOLDEN_PLACEMENT_THEN" };
	size_t max_prompts = SIZE_MAX;
	FILE *f;
	int k;

	check_golden_thresholds(stem, &rel_tol, &margin);
	check_shared_model(path, sizeof(path), stem);
	/* placed before the weights are read, as llmfs-run --placement does */
	opt.load.defer = getenv("GOLDEN_PLACEMENT") != NULL;
	ck_assert_msg(engine_model_open(&m, path, &opt, &err) == 0, "%s: %s",
		      path, err.msg);
	ck_assert_msg(engine_ctx_new(&ctx, m, &copt, &err) == 0, "%s: %s", path,
		      err.msg);
	/*
	 * GOLDEN_PLACEMENT: where the weights compute ("all ref0"), then
	 * GOLDEN_PLACEMENT_THEN ("kv cpu")
	 */
	for (k = 0; k < 2; k++) {
		if (getenv(place_vars[k]) && *getenv(place_vars[k]))
			ck_assert_msg(
				engine_placement_apply(
					ctx, getenv(place_vars[k]), &err) == 0,
				"%s: placement '%s': %s", path,
				getenv(place_vars[k]), err.msg);
		if (k == 0 && opt.load.defer)
			ck_assert_msg(engine_model_load(m, &err) == 0, "%s: %s",
				      path, err.msg);
	}
	snprintf(path, sizeof(path), "%s/%s%s", golden_dir, stem,
		 golden_suffix);
	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	/* GOLDEN_PROMPTS=N: the first N prompts only (a slow backend) */
	if (getenv("GOLDEN_PROMPTS"))
		max_prompts = (size_t)atoi(getenv("GOLDEN_PROMPTS"));
	while ((size_t)st.prompts < max_prompts &&
	       fgets(line_buf, sizeof(line_buf), f)) {
		json_error_t jerr;
		json_t *line = json_loads(line_buf, 0, &jerr);
		int32_t *prompt, *tokens, gen[GOLDEN_STEPS];
		size_t n_prompt, n_tokens, s, matched, limit;
		json_t *top5;
		char *text;

		ck_assert_msg(line != NULL, "%s: %s", path, jerr.text);
		prompt = golden_ids(json_object_get(line, "prompt_tokens"),
				    &n_prompt);
		tokens = golden_ids(json_object_get(line, "tokens"), &n_tokens);
		ck_assert_int_eq(n_tokens, GOLDEN_STEPS);
		golden_check_tokenizer(m, line, prompt, n_prompt);
		golden_teacher_forced(ctx, line, prompt, n_prompt, tokens,
				      rel_tol, margin, &st);

		golden_free_running(ctx, prompt, n_prompt, gen);
		top5 = json_object_get(line, "top5");
		for (limit = 0; limit < GOLDEN_STEPS; limit++) {
			json_t *step = json_array_get(top5, limit);
			double g0 = json_number_value(
				json_array_get(json_array_get(step, 0), 1));
			double g1 = json_number_value(
				json_array_get(json_array_get(step, 1), 1));

			if (g0 - g1 < margin)
				break;
		}
		for (matched = 0; matched < GOLDEN_STEPS; matched++)
			if (gen[matched] != tokens[matched])
				break;
		ck_assert_msg(
			matched >= limit,
			"%s: free-running token %zu is %d, llama.cpp %d (must match up to %zu)",
			stem, matched, gen[matched], tokens[matched], limit);
		st.prompts++;
		st.full += matched == GOLDEN_STEPS;
		s = strlen(st.prefixes);
		snprintf(st.prefixes + s, sizeof(st.prefixes) - s, "%s%zu",
			 s ? " " : "", matched);
		if (!strcmp(stem, "stories260K")) {
			const char *want = json_string_value(
				json_object_get(line, "text"));

			text = golden_text(m, prompt, n_prompt, gen,
					   GOLDEN_STEPS);
			printf("stories260K: %s%s\n",
			       json_string_value(
				       json_object_get(line, "prompt")),
			       text);
			if (matched == GOLDEN_STEPS)
				ck_assert_str_eq(text, want);
			free(text);
		}
		free(prompt);
		free(tokens);
		json_decref(line);
	}
	fclose(f);
	engine_ctx_free(ctx);
	engine_model_free(m);
	ck_assert_int_gt(st.prompts, 0);
	printf("%s%-28s max rel err %.3g (tol %.3g), 48/48 in %d of %d prompts, matched prefixes: %s\n",
	       golden_label, stem, st.max_rel, rel_tol, st.full, st.prompts,
	       st.prefixes);
	fflush(stdout);
}
END_TEST

static int golden_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * GOLDEN_MODELS=STEM,STEM...: only those (a slow backend, the CUDA
 * simulator, runs one or two); unset: every model.
 */
static bool golden_model_wanted(const char *stem, size_t len)
{
	const char *want = getenv("GOLDEN_MODELS"), *p;

	if (!want)
		return true;
	for (p = want; *p; p += strcspn(p, ","), p += *p == ',') {
		if (strcspn(p, ",") == len && !strncmp(p, stem, len))
			return true;
	}
	return false;
}

/* The stems of models that have a golden file (and are wanted). */
static void golden_find_models(void)
{
	char path[1200];
	struct dirent *de;
	DIR *d;

	check_shared_path(path, sizeof(path), "models");
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d)) && n_models < GOLDEN_MAX_MODELS) {
		size_t len = strlen(de->d_name);
		char golden[1400];
		FILE *f;

		if (len < 6 || strcmp(de->d_name + len - 5, ".gguf") ||
		    !golden_model_wanted(de->d_name, len - 5))
			continue;
		snprintf(golden, sizeof(golden), "%s/%.*s%s", golden_dir,
			 (int)(len - 5), de->d_name, golden_suffix);
		f = fopen(golden, "r");
		if (!f)
			continue;
		fclose(f);
		model_stems[n_models++] = strndup(de->d_name, len - 5);
	}
	closedir(d);
	qsort(model_stems, n_models, sizeof(model_stems[0]), golden_cmp);
}

/* GOLDEN_DIR (default <shared>/golden) and GOLDEN_KV=TYPE_K/TYPE_V (the
 * golden files of a quantized KV cache, *.TYPE_K-TYPE_V.jsonl). */
static int golden_setup(void)
{
	const char *env = getenv("GOLDEN_DIR"), *kv;

	if (env)
		snprintf(golden_dir, sizeof(golden_dir), "%s", env);
	else
		snprintf(golden_dir, sizeof(golden_dir), "%s/golden",
			 check_shared_dir());
	if ((kv = getenv("GOLDEN_KV"))) {
		static char types[64];
		char *slash;

		snprintf(types, sizeof(types), "%s", kv);
		slash = strchr(types, '/');
		if (!slash) {
			printf("GOLDEN_KV=%s: want TYPE_K/TYPE_V\n", kv);
			return 1;
		}
		*slash = '\0';
		kv_type_k = types;
		kv_type_v = slash + 1;
		snprintf(golden_suffix, sizeof(golden_suffix), ".%s-%s.jsonl",
			 kv_type_k, kv_type_v);
		snprintf(golden_label, sizeof(golden_label), "%s/%s ",
			 kv_type_k, kv_type_v);
	}
	golden_find_models();
	if (n_models == 0) {
		printf("no models with golden files %s/*%s\n", golden_dir,
		       golden_suffix);
		return CHECK_SKIP;
	}
	return 0;
}

static void golden_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_golden_model, 0, n_models);
}

static void golden_teardown(void)
{
	for (int i = 0; i < n_models; i++)
		free(model_stems[i]);
}

const struct check_main check_main = {
	.name = "golden",
	.timeout = 300,
	.setup = golden_setup,
	.add_tests = golden_tests,
	.teardown = golden_teardown,
};
