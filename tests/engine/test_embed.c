// SPDX-License-Identifier: MIT
/*
 * Embeddings: engine_seq_set_embedding and the embed generation.
 *
 * What they give is checked against what it must be, not against stored
 * numbers (tests/fs/embed.sh compares with node-llama-cpp's embedding
 * context): the last token's embedding is what the output matrix reads
 * (logits = token_embd . embedding on stories260K, whose output matrix is
 * its F32 embedding table), mean pooling sums the last-token embeddings
 * of every prefix, CLS is the first token's; the embed generation of a
 * model whose {arch}.pooling_type says mean (a copy of a shared model with
 * that key) divides that sum by the prompt's tokens.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/engine.h"
#include "../common/check_main.h"

/* A one-thread context of the one-token path on the model file path. */
static struct engine_ctx *ctx_open(const char *path)
{
	struct engine_model_options opt = { 0 };
	struct engine_ctx_options copt = { .threads = 1, .batch_exact = true };
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;
	struct err err = { 0 };

	ck_assert_msg(engine_model_open(&m, path, &opt, &err) == 0, "%s: %s",
		      path, err.msg);
	ck_assert_msg(engine_ctx_new(&ctx, m, &copt, &err) == 0, "%s: %s", path,
		      err.msg);
	return ctx;
}

/* ctx_open on the shared model stem. */
static struct engine_ctx *model_open(const char *stem)
{
	char path[4200];

	check_shared_model(path, sizeof(path), stem);
	return ctx_open(path);
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

/* ../shared/models/<stem>.gguf copied to dst with {arch}.pooling_type. */
static void model_copy_pooling(const char *stem, const char *dst,
			       uint32_t pooling)
{
	struct io_gguf_writer *w = NULL;
	struct io_gguf *g = NULL;
	struct err err = { 0 };
	char src[4200], key[160] = "";
	uint64_t i;
	int fd;

	check_shared_model(src, sizeof(src), stem);
	ck_assert_msg(io_gguf_open(&g, src, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(
		io_gguf_writer_new(&w, g->alignment == 32 ? 0 : g->alignment,
				   &err),
		0);
	for (i = 0; i < g->n_kv; i++) {
		const struct io_gguf_kv *kv = &g->kv[i];

		if (!strcmp(kv->key, "general.architecture"))
			snprintf(key, sizeof(key), "%.*s.pooling_type",
				 (int)kv->value.str.len, kv->value.str.data);
		if (!strcmp(kv->key, "general.alignment") ||
		    strstr(kv->key, ".pooling_type"))
			continue;
		ck_assert_int_eq(
			io_gguf_writer_add(w, kv->key, &kv->value, &err), 0);
	}
	ck_assert(key[0]);
	ck_assert_int_eq(io_gguf_writer_add_u32(w, key, pooling, &err), 0);
	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *tn = &g->tensors[i];

		ck_assert_int_eq(io_gguf_writer_add_tensor(w, tn->name,
							   tn->type, tn->n_dims,
							   tn->ne, &err),
				 0);
	}
	ck_assert_msg(io_gguf_writer_begin(w, dst, &err) == 0, "%s", err.msg);
	fd = open(g->files[0].path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *tn = &g->tensors[i];
		char *buf = malloc(tn->bytes);

		ck_assert_ptr_nonnull(buf);
		ck_assert_int_eq(pread(fd, buf, tn->bytes, (off_t)tn->offset),
				 (ssize_t)tn->bytes);
		ck_assert_int_eq(io_gguf_writer_write(w, buf, tn->bytes, &err),
				 0);
		free(buf);
	}
	close(fd);
	ck_assert_msg(io_gguf_writer_finish(w, &err) == 0, "%s", err.msg);
	io_gguf_writer_free(w);
	io_gguf_close(g);
}

/* Mean pooling: the generation's vector is the prefixes' sum over n. */
START_TEST(test_embed_generation_mean)
{
	static const char text[] =
		"The quick brown fox jumps over the lazy dog.";
	struct engine_generate_options o = { .embed = true };
	char dir[] = "/tmp/llmfs-test-embed-XXXXXX", path[64];
	struct engine_generation *g = NULL;
	struct engine_ctx *m;
	struct engine_seq *seq = NULL;
	struct err err = { 0 };
	size_t n, np, nt, len = 1, k;
	const float *v;
	float *sum;
	int32_t *t;
	uint32_t E;
	char out[1024];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/mean.gguf", dir);
	model_copy_pooling("tiny-qwen3-bpe16k-f16", path, ENGINE_POOLING_MEAN);
	m = ctx_open(path);
	ck_assert_int_eq(engine_model_pooling(engine_ctx_model(m)),
			 ENGINE_POOLING_MEAN);
	E = engine_model_info(engine_ctx_model(m))->n_embd;
	sum = calloc(E, sizeof(*sum));
	ck_assert_ptr_nonnull(sum);
	t = tokens_of(m, text, &n);
	for (size_t p = 1; p <= n; p++) {
		float *x = embed(m, t, p, ENGINE_POOLING_NONE);

		for (uint32_t e = 0; e < E; e++)
			sum[e] += x[e];
		free(x);
	}
	for (uint32_t e = 0; e < E; e++)
		sum[e] /= (float)n;
	engine_sampling_defaults(&o.sampling);
	ck_assert_int_eq(engine_seq_new(m, &seq, &err), 0);
	ck_assert_int_eq(engine_generation_new(&g, engine_ctx_model(m), seq,
					       text, strlen(text), &o, &err),
			 0);
	engine_generation_tokens(g, &np, &nt);
	ck_assert_uint_eq(np, n);
	ck_assert_msg(engine_generation_step(g, out, sizeof(out), &len, &err) ==
			      0,
		      "%s", err.msg);
	v = engine_generation_embedding(g, &k);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(k, E);
	check_close(v, sum, E, 1e-5,
		    "the mean generation = the prefixes' mean");
	engine_generation_free(g);
	engine_seq_free(seq);
	model_close(m);
	free(sum);
	free(t);
	unlink(path);
	rmdir(dir);
}
END_TEST

static void embed_tests(TCase *tc)
{
	tcase_add_test(tc, test_embed_is_what_the_output_reads);
	tcase_add_test(tc, test_embed_pooling);
	tcase_add_test(tc, test_embed_generation);
	tcase_add_test(tc, test_embed_generation_mean);
}

const struct check_main check_main = {
	.name = "embed",
	.timeout = 120,
	.setup = embed_setup,
	.add_tests = embed_tests,
};
