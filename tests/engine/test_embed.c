// SPDX-License-Identifier: MIT
/*
 * Embeddings: engine_seq_set_embedding and the embed generation.
 *
 * What they give is checked against what it must be, not against stored
 * numbers (tests/fs/embed.sh compares with node-llama-cpp's embedding
 * context): the last token's embedding is what the output matrix reads
 * (logits = token_embd . embedding on stories260K, whose output matrix is
 * its F32 embedding table), mean pooling sums the last-token embeddings
 * of every prefix, CLS is the first token's.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/engine.h"
#include "../common/check_main.h"

/* A one-thread context of the one-token path on the shared model stem. */
static struct engine_ctx *model_open(const char *stem)
{
	struct engine_model_options opt = { 0 };
	struct engine_ctx_options copt = { .threads = 1, .batch_exact = true };
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;
	struct err err = { 0 };
	char path[4200];

	check_shared_model(path, sizeof(path), stem);
	ck_assert_msg(engine_model_open(&m, path, &opt, &err) == 0, "%s: %s",
		      path, err.msg);
	ck_assert_msg(engine_ctx_new(&ctx, m, &copt, &err) == 0, "%s: %s", path,
		      err.msg);
	return ctx;
}

/* Free a context of model_open and its model. */
static void model_close(struct engine_ctx *ctx)
{
	struct engine_model *m = engine_ctx_model(ctx);

	engine_ctx_free(ctx);
	engine_model_free(m);
}

static int32_t *tokens_of(struct engine_ctx *m, const char *text, size_t *n)
{
	struct err err = { 0 };
	int32_t *t = NULL;

	ck_assert_int_eq(engine_tokenize(engine_ctx_model(m), text,
					 strlen(text), true, false, &t, n,
					 &err),
			 0);
	ck_assert_uint_gt(*n, 2);
	return t;
}

/* The embedding of tokens [0, n) under pooling, from a fresh sequence. */
static float *embed(struct engine_ctx *m, const int32_t *t, size_t n,
		    enum engine_pooling pooling)
{
	uint32_t E = engine_model_info(engine_ctx_model(m))->n_embd;
	float *v = calloc(E, sizeof(*v));
	struct engine_batch_item it = { NULL, t, n, NULL };
	struct engine_seq *seq = NULL;
	struct err err = { 0 };

	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(engine_seq_new(m, &seq, &err), 0);
	engine_seq_set_embedding(seq, v, pooling);
	it.seq = seq;
	ck_assert_int_eq(engine_forward(m, &it, 1, &err), 0);
	engine_seq_free(seq);
	return v;
}

static void check_close(const float *a, const float *b, uint32_t n, double tol,
			const char *what)
{
	for (uint32_t i = 0; i < n; i++)
		ck_assert_msg(fabs(a[i] - b[i]) <= tol * fmax(1, fabs(b[i])),
			      "%s [%u]: %.9g vs %.9g", what, i, a[i], b[i]);
}

START_TEST(test_embed_is_what_the_output_reads)
{
	struct engine_ctx *m = model_open("stories260K");
	const struct engine_model_info *in = engine_model_info(
		engine_ctx_model(m));
	const struct io_gguf *g = engine_model_gguf(engine_ctx_model(m));
	uint32_t E = in->n_embd, V = in->n_vocab;
	float *logits = malloc(V * sizeof(*logits)), *row, *v;
	struct engine_seq *seq = NULL;
	struct err err = { 0 };
	uint64_t ti = g->n_tensors;
	int32_t *t;
	size_t n;

	t = tokens_of(m, "Once upon a time, there was a dog", &n);
	{
		struct engine_batch_item it = { NULL, t, n, logits };

		ck_assert_int_eq(engine_seq_new(m, &seq, &err), 0);
		it.seq = seq;
		ck_assert_int_eq(engine_forward(m, &it, 1, &err), 0);
		engine_seq_free(seq);
	}
	v = embed(m, t, n, ENGINE_POOLING_NONE);
	/* tied: token_embd (F32 here) is the output matrix */
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (!strcmp(g->tensors[i].name, "token_embd.weight"))
			ti = i;
	ck_assert_uint_lt(ti, g->n_tensors);
	ck_assert_int_eq(g->tensors[ti].type, IO_TYPE_F32);
	row = malloc(E * sizeof(*row));
	for (uint32_t k = 0; k < V; k++) {
		double dot = 0;

		engine_tensor_read(engine_ctx_model(m), ti,
				   (uint64_t)k * E * sizeof(*row),
				   E * sizeof(*row), row);
		for (uint32_t e = 0; e < E; e++)
			dot += (double)row[e] * v[e];
		ck_assert_msg(fabs(dot - logits[k]) <=
				      1e-4 * fmax(1, fabs(logits[k])),
			      "logit %u: %.9g from the embedding, %.9g", k, dot,
			      logits[k]);
	}
	free(row);
	free(v);
	free(t);
	free(logits);
	model_close(m);
}
END_TEST

START_TEST(test_embed_pooling)
{
	struct engine_ctx *m = model_open("tiny-qwen3-bpe16k-f16");
	uint32_t E = engine_model_info(engine_ctx_model(m))->n_embd;
	float *mean, *cls, *last, *first, *sum = calloc(E, sizeof(*sum));
	int32_t *t;
	size_t n;

	t = tokens_of(m, "The quick brown fox jumps over the lazy dog.", &n);
	mean = embed(m, t, n, ENGINE_POOLING_MEAN);
	cls = embed(m, t, n, ENGINE_POOLING_CLS);
	last = embed(m, t, n, ENGINE_POOLING_LAST);
	for (size_t k = 1; k <= n; k++) {
		float *p = embed(m, t, k, ENGINE_POOLING_NONE);

		if (k == 1)
			check_close(cls, p, E, 0, "cls = the first token's");
		if (k == n)
			check_close(last, p, E, 0, "last = none");
		for (uint32_t e = 0; e < E; e++)
			sum[e] += p[e];
		free(p);
	}
	/* the pass sums (the generation divides): the prefixes' sum */
	check_close(mean, sum, E, 1e-5, "mean = the sum of the prefixes'");
	first = embed(m, t, 1, ENGINE_POOLING_LAST);
	check_close(first, cls, E, 0, "cls");
	free(first);
	free(mean);
	free(cls);
	free(last);
	free(sum);
	free(t);
	model_close(m);
}
END_TEST

START_TEST(test_embed_generation)
{
	static const char text[] = "<|im_start|>user is text here<|im_end|>";
	struct engine_ctx *m = model_open("tiny-qwen3-bpe16k-f16");
	uint32_t E = engine_model_info(engine_ctx_model(m))->n_embd;
	struct engine_generate_options o = { .embed = true };
	struct engine_generation *g = NULL;
	struct engine_seq *seq = NULL;
	struct err err = { 0 };
	const float *v;
	float *want;
	int32_t *t;
	size_t n, np, nt, len = 1, k;
	char out[1024];

	engine_sampling_defaults(&o.sampling);
	/* special tokens' text is text, as node-llama-cpp tokenizes */
	t = tokens_of(m, text, &n);
	want = embed(m, t, n, ENGINE_POOLING_NONE);
	ck_assert_int_eq(engine_seq_new(m, &seq, &err), 0);
	ck_assert_int_eq(engine_generation_new(&g, engine_ctx_model(m), seq,
					       text, strlen(text), &o, &err),
			 0);
	engine_generation_tokens(g, &np, &nt);
	ck_assert_uint_eq(np, n);
	ck_assert_ptr_null(engine_generation_embedding(g, &k));
	/* one pass, no text, the end */
	ck_assert_int_eq(
		engine_generation_step(g, out, sizeof(out), &len, &err), 0);
	ck_assert_uint_eq(len, 0);
	v = engine_generation_embedding(g, &k);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(k, E);
	check_close(v, want, E, 0, "the generation's = the pass's");
	ck_assert_uint_eq(engine_generation_stats(g)->gen_tokens, 0);
	engine_generation_free(g);
	/* the sequence writes nowhere once the generation is gone */
	{
		struct engine_batch_item it = { seq, t, 1, NULL };

		ck_assert_int_eq(engine_forward(m, &it, 1, &err), 0);
	}
	engine_seq_free(seq);
	ck_assert_int_eq(engine_model_pooling(engine_ctx_model(m)),
			 ENGINE_POOLING_NONE);
	ck_assert_str_eq(engine_pooling_name(ENGINE_POOLING_MEAN), "mean");
	free(want);
	free(t);
	model_close(m);
}
END_TEST

static int embed_setup(void)
{
	int rc = check_need_model("stories260K");

	return rc ? rc : check_need_model("tiny-qwen3-bpe16k-f16");
}

static void embed_tests(TCase *tc)
{
	tcase_add_test(tc, test_embed_is_what_the_output_reads);
	tcase_add_test(tc, test_embed_pooling);
	tcase_add_test(tc, test_embed_generation);
}

const struct check_main check_main = {
	.name = "embed",
	.timeout = 120,
	.setup = embed_setup,
	.add_tests = embed_tests,
};
