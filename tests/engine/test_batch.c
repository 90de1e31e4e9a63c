// SPDX-License-Identifier: MIT
/*
 * Batched evaluation with batch_exact gives the one-token path's numbers
 * bit for bit: a prompt in one engine_forward call against the same
 * prompt token by token, several sequences in one call against each
 * alone, prompts longer than one pass's chunk, one sequence in two items
 * of a call, and the decoding that follows each (so the KV caches agree
 * too). Without it (the default: the batch GEMM's own order) a batched
 * prompt and a batched decode step stay within ../shared/README.md
 * section 4's rel_tol of the one-token logits, the argmax the same where
 * the margin is at least the model's. Also a model loaded asynchronously:
 * the same logits, and a load that fails under the first pass is that
 * pass's error, not a crash.
 *
 *   make build/tests/engine/test_batch && build/tests/engine/test_batch
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../engine/engine.h"
#include "../../engine/model.h"
#include "../common/check_main.h"

static char tmp_dir[] = "/tmp/llmfs-test-batch-XXXXXX";

/* dense f32, K-quants, legacy quants, mixed types, MoE */
static const char *const batch_models[] = {
	"stories260K",
	"tiny-llama-spm32k-kquant",
	"tiny-qwen2-bpe152k-legacyq",
	"tiny-qwen3-bpe16k-mixq",
	"tiny-qwen3moe-bpe16k-q4km",
};
#define N_MODELS (sizeof(batch_models) / sizeof(batch_models[0]))

static const char batch_text[] =
	"Once upon a time, there was a little dog named Max. He liked to "
	"run in the park with his friends.";

static void model_path(char *buf, size_t cap, const char *stem)
{
	check_shared_model(buf, cap, stem);
}

/*
 * A context on the model at path. exact: engine_ctx_options.batch_exact,
 * for the checks of bit identity with the one-token path (the default
 * order is the GEMM's).
 */
static struct engine_ctx *batch_open(const char *path, uint32_t n_ctx,
				     uint32_t threads,
				     const struct io_load_options *load,
				     bool exact)
{
	struct engine_model_options opt = { .n_ctx = n_ctx };
	struct engine_ctx_options copt = { .threads = threads,
					   .batch_exact = exact };
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;
	struct err err = { 0 };

	if (load)
		opt.load = *load;
	ck_assert_msg(engine_model_open(&m, path, &opt, &err) == 0, "%s: %s",
		      path, err.msg);
	ck_assert_msg(engine_ctx_new(&ctx, m, &copt, &err) == 0, "%s: %s", path,
		      err.msg);
	return ctx;
}

/* Free a context of batch_open and its model. */
static void batch_close(struct engine_ctx *ctx)
{
	struct engine_model *m = engine_ctx_model(ctx);

	engine_ctx_free(ctx);
	engine_model_free(m);
}

static struct engine_ctx *batch_open_stem(const char *stem, uint32_t n_ctx,
					  uint32_t threads, bool exact)
{
	char path[1200];

	model_path(path, sizeof(path), stem);
	return batch_open(path, n_ctx, threads, NULL, exact);
}

/* The tokens of text (BOS as the vocabulary says), repeated times. */
static int32_t *batch_tokens(struct engine_ctx *m, int times, size_t *n)
{
	size_t len = strlen(batch_text), i;
	char *text = malloc(len * times + 1);
	struct err err = { 0 };
	int32_t *tok = NULL;

	ck_assert_ptr_nonnull(text);
	for (i = 0; i < (size_t)times; i++)
		memcpy(text + i * len, batch_text, len);
	text[len * times] = '\0';
	ck_assert_msg(engine_tokenize(engine_ctx_model(m), text, len * times,
				      true, false, &tok, n, &err) == 0,
		      "%s", err.msg);
	ck_assert_uint_gt(*n, 8);
	free(text);
	return tok;
}

static struct engine_seq *batch_seq(struct engine_ctx *m)
{
	struct engine_seq *s = NULL;
	struct err err = { 0 };

	ck_assert_msg(engine_seq_new(m, &s, &err) == 0, "%s", err.msg);
	return s;
}

static void batch_forward(struct engine_ctx *m, struct engine_batch_item *items,
			  size_t n)
{
	struct err err = { 0 };

	ck_assert_msg(engine_forward(m, items, n, &err) == 0, "%s", err.msg);
}

/* n tokens in one call; the last one's logits. */
static void batch_whole(struct engine_ctx *m, struct engine_seq *s,
			const int32_t *tok, size_t n, float *logits)
{
	struct engine_batch_item it = { s, tok, n, logits };

	batch_forward(m, &it, 1);
}

/* n tokens, one call each; the last one's logits. */
static void batch_one_by_one(struct engine_ctx *m, struct engine_seq *s,
			     const int32_t *tok, size_t n, float *logits)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct engine_batch_item it = { s, tok + i, 1,
						i + 1 == n ? logits : NULL };

		batch_forward(m, &it, 1);
	}
}

static int32_t batch_argmax(const float *l, uint32_t n)
{
	uint32_t i, best = 0;

	for (i = 1; i < n; i++)
		if (l[i] > l[best])
			best = i;
	return (int32_t)best;
}

static float *batch_logits(const struct engine_ctx *m)
{
	float *l = malloc(engine_model_info(engine_ctx_model(m))->n_vocab *
			  sizeof(float));

	ck_assert_ptr_nonnull(l);
	return l;
}

/*
 * A prompt in one call against token by token, then three greedy tokens
 * decoded after each: every logit bit-identical. Three threads, so that
 * the matmuls and the attention are split.
 */
START_TEST(test_batch_prompt_equals_one_by_one)
{
	const char *stem = batch_models[_i];
	struct engine_ctx *m = batch_open_stem(stem, 256, 3, true);
	uint32_t nv = engine_model_info(engine_ctx_model(m))->n_vocab;
	struct engine_seq *a = batch_seq(m), *b = batch_seq(m);
	float *la = batch_logits(m), *lb = batch_logits(m);
	size_t n, step;
	int32_t *tok = batch_tokens(m, 1, &n);

	batch_whole(m, a, tok, n, la);
	batch_one_by_one(m, b, tok, n, lb);
	ck_assert_msg(
		!memcmp(la, lb, nv * sizeof(float)),
		"%s: a prompt of %zu tokens in one call differs from token by token",
		stem, n);
	for (step = 0; step < 3; step++) {
		int32_t next = batch_argmax(la, nv);

		batch_whole(m, a, &next, 1, la);
		batch_whole(m, b, &next, 1, lb);
		ck_assert_msg(
			!memcmp(la, lb, nv * sizeof(float)),
			"%s: decode step %zu after the batched prompt differs",
			stem, step);
	}
	ck_assert_uint_eq(engine_seq_length(a), n + 3);
	engine_seq_free(a);
	engine_seq_free(b);
	batch_close(m);
	free(tok);
	free(la);
	free(lb);
}
END_TEST

/*
 * Three sequences in one call (prompts of different lengths, one of them
 * wanting no logits) against each alone; then a decode step of all three
 * in one call against each alone.
 */
START_TEST(test_batch_sequences_equal_alone)
{
	const char *stem = batch_models[_i];
	struct engine_ctx *m = batch_open_stem(stem, 128, 2, true);
	uint32_t nv = engine_model_info(engine_ctx_model(m))->n_vocab;
	struct engine_seq *s[3], *r[3];
	float *l[3], *ref[3];
	struct engine_batch_item items[3];
	const size_t off[3] = { 0, 3, 5 };
	size_t n, i;
	int32_t *tok = batch_tokens(m, 1, &n), next[3];

	for (i = 0; i < 3; i++) {
		s[i] = batch_seq(m);
		r[i] = batch_seq(m);
		l[i] = batch_logits(m);
		ref[i] = batch_logits(m);
	}
	/* prompts: the text, its tail, three tokens of its middle */
	items[0] = (struct engine_batch_item){ s[0], tok, n, l[0] };
	items[1] = (struct engine_batch_item){ s[1], tok + off[1], n - off[1],
					       NULL };
	items[2] = (struct engine_batch_item){ s[2], tok + off[2], 3, l[2] };
	batch_forward(m, items, 3);
	for (i = 0; i < 3; i++)
		batch_whole(m, r[i], items[i].tokens, items[i].n_tokens,
			    ref[i]);
	ck_assert_msg(!memcmp(l[0], ref[0], nv * sizeof(float)) &&
			      !memcmp(l[2], ref[2], nv * sizeof(float)),
		      "%s: a sequence evaluated with others differs from alone",
		      stem);
	next[0] = batch_argmax(l[0], nv);
	next[1] = 42;
	next[2] = batch_argmax(l[2], nv);
	for (i = 0; i < 3; i++) {
		items[i] = (struct engine_batch_item){ s[i], &next[i], 1,
						       l[i] };
		batch_whole(m, r[i], &next[i], 1, ref[i]);
	}
	batch_forward(m, items, 3);
	for (i = 0; i < 3; i++) {
		ck_assert_msg(
			!memcmp(l[i], ref[i], nv * sizeof(float)),
			"%s: decode step of sequence %zu in a batch differs",
			stem, i);
		ck_assert_uint_eq(engine_seq_length(s[i]),
				  engine_seq_length(r[i]));
	}
	for (i = 0; i < 3; i++) {
		engine_seq_free(s[i]);
		engine_seq_free(r[i]);
		free(l[i]);
		free(ref[i]);
	}
	batch_close(m);
	free(tok);
}
END_TEST

/*
 * A prompt longer than one pass takes (64 tokens): one call, two calls
 * split elsewhere, and one sequence in two items of one call all give
 * the token-by-token logits.
 */
START_TEST(test_batch_long_prompt_in_chunks)
{
	static const char *const stems[] = { "stories260K",
					     "tiny-qwen3moe-bpe16k-q4km" };
	const char *stem = stems[_i];
	struct engine_ctx *m = batch_open_stem(stem, 512, 3, true);
	uint32_t nv = engine_model_info(engine_ctx_model(m))->n_vocab;
	struct engine_seq *a = batch_seq(m), *b = batch_seq(m);
	struct engine_seq *c = batch_seq(m), *d = batch_seq(m);
	float *la = batch_logits(m), *lb = batch_logits(m);
	float *lc = batch_logits(m), *ld = batch_logits(m);
	struct engine_batch_item items[2];
	size_t n;
	int32_t *tok = batch_tokens(m, 6, &n);

	ck_assert_uint_gt(n, 140);
	batch_whole(m, a, tok, n, la);
	batch_one_by_one(m, b, tok, n, lb);
	batch_whole(m, c, tok, 70, NULL);
	batch_whole(m, c, tok + 70, n - 70, lc);
	items[0] = (struct engine_batch_item){ d, tok, 100, NULL };
	items[1] = (struct engine_batch_item){ d, tok + 100, n - 100, ld };
	batch_forward(m, items, 2);
	ck_assert_msg(!memcmp(la, lb, nv * sizeof(float)),
		      "%s: %zu tokens in one call differ from token by token",
		      stem, n);
	ck_assert_msg(!memcmp(lc, lb, nv * sizeof(float)),
		      "%s: 70 + %zu tokens differ from token by token", stem,
		      n - 70);
	ck_assert_msg(!memcmp(ld, lb, nv * sizeof(float)),
		      "%s: one sequence in two items differs", stem);
	ck_assert_uint_eq(engine_seq_length(d), n);
	engine_seq_free(a);
	engine_seq_free(b);
	engine_seq_free(c);
	engine_seq_free(d);
	batch_close(m);
	free(tok);
	free(la);
	free(lb);
	free(lc);
	free(ld);
}
END_TEST

/*
 * Logits l of a batch against ref, the one-token path's, by section 4's
 * rule: ref's five highest logits within rel_tol * max(1, |ref|), and
 * the same argmax where ref's top two are at least margin apart. Returns
 * the largest relative error of those five.
 */
static double batch_within(const char *stem, const char *what, const float *l,
			   const float *ref, uint32_t nv, double rel_tol,
			   double margin)
{
	uint32_t top[5], i, k, j;
	double worst = 0.0;

	for (k = 0; k < 5; k++) {
		top[k] = UINT32_MAX;
		for (i = 0; i < nv; i++) {
			bool taken = false;

			for (j = 0; j < k; j++)
				taken |= top[j] == i;
			if (!taken &&
			    (top[k] == UINT32_MAX || ref[i] > ref[top[k]]))
				top[k] = i;
		}
	}
	for (k = 0; k < 5; k++) {
		double rel;

		i = top[k];
		rel = fabs((double)l[i] - ref[i]) /
		      fmax(1.0, fabs((double)ref[i]));

		ck_assert_msg(
			rel <= rel_tol,
			"%s: %s: logit %u %.6g, one token %.6g (rel %.3g > %.3g)",
			stem, what, i, l[i], ref[i], rel, rel_tol);
		worst = rel > worst ? rel : worst;
	}
	if (ref[top[0]] - ref[top[1]] >= margin)
		ck_assert_msg(batch_argmax(l, nv) == (int32_t)top[0],
			      "%s: %s: argmax %d, one token %u (margin %.3g)",
			      stem, what, batch_argmax(l, nv), top[0],
			      ref[top[0]] - ref[top[1]]);
	return worst;
}

/*
 * Without batch_exact: a prompt in one call (the GEMM over its tokens)
 * and then three decode steps of BATCH_SEQS sequences in one call (the
 * GEMM over as many tokens, on caches the batched prompts wrote) against
 * the same tokens one at a time, within the model's section 4 tolerance.
 */
#define BATCH_SEQS 6
START_TEST(test_batch_fast_within_tolerance)
{
	const char *stem = batch_models[_i];
	struct engine_ctx *m = batch_open_stem(stem, 256, 3, false);
	uint32_t nv = engine_model_info(engine_ctx_model(m))->n_vocab;
	struct engine_seq *s[BATCH_SEQS], *c = batch_seq(m);
	struct engine_batch_item it[BATCH_SEQS];
	float *l[BATCH_SEQS], *lc = batch_logits(m);
	double rel_tol, margin, worst = 0.0;
	size_t n, step, i;
	int32_t *tok = batch_tokens(m, 1, &n), next;
	char what[64];

	check_golden_thresholds(stem, &rel_tol, &margin);
	for (i = 0; i < BATCH_SEQS; i++) {
		s[i] = batch_seq(m);
		l[i] = batch_logits(m);
		batch_whole(m, s[i], tok, n, l[i]);
	}
	batch_one_by_one(m, c, tok, n, lc);
	worst = batch_within(stem, "batched prompt", l[0], lc, nv, rel_tol,
			     margin);
	for (step = 0; step < 3; step++) {
		double rel;

		next = batch_argmax(lc, nv);
		for (i = 0; i < BATCH_SEQS; i++)
			it[i] = (struct engine_batch_item){ s[i], &next, 1,
							    l[i] };
		batch_forward(m, it, BATCH_SEQS);
		batch_whole(m, c, &next, 1, lc);
		snprintf(what, sizeof(what), "decode step %zu of %d", step,
			 BATCH_SEQS);
		rel = batch_within(stem, what, l[0], lc, nv, rel_tol, margin);
		worst = rel > worst ? rel : worst;
		for (i = 1; i < BATCH_SEQS; i++)
			ck_assert_msg(!memcmp(l[0], l[i], nv * sizeof(float)),
				      "%s: %s: equal sequences differ", stem,
				      what);
	}
	printf("batch: %s: fast batches within %.3g of one token (rel_tol %.3g)\n",
	       stem, worst, rel_tol);
	for (i = 0; i < BATCH_SEQS; i++) {
		engine_seq_free(s[i]);
		free(l[i]);
	}
	engine_seq_free(c);
	batch_close(m);
	free(tok);
	free(lc);
}
END_TEST

/* Two items of one sequence count together against n_ctx. */
START_TEST(test_batch_same_sequence_context_full)
{
	struct engine_ctx *m = batch_open_stem("stories260K", 8, 1, true);
	const int32_t five[] = { 1, 403, 407, 261, 378 };
	struct engine_seq *s = batch_seq(m);
	struct engine_batch_item items[2] = {
		{ s, five, 5, NULL },
		{ s, five, 4, NULL },
	};
	struct err err = { 0 };

	ck_assert_int_eq(engine_forward(m, items, 2, &err), -ENOSPC);
	ck_assert_uint_eq(engine_seq_length(s), 0);
	items[1].n_tokens = 3;
	ck_assert_int_eq(engine_forward(m, items, 2, &err), 0);
	ck_assert_uint_eq(engine_seq_length(s), 8);
	engine_seq_free(s);
	batch_close(m);
}
END_TEST

/* Copy a shared model into tmp_dir (a file of our own, to truncate). */
static void batch_copy(const char *stem, char *dst, size_t cap)
{
	char src[1200], buf[1 << 16];
	ssize_t r;
	int in, out;

	model_path(src, sizeof(src), stem);
	snprintf(dst, cap, "%s/%s.gguf", tmp_dir, stem);
	in = open(src, O_RDONLY);
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(in, 0);
	ck_assert_int_ge(out, 0);
	while ((r = read(in, buf, sizeof(buf))) > 0)
		ck_assert_int_eq(write(out, buf, (size_t)r), r);
	ck_assert_int_eq(r, 0);
	close(in);
	close(out);
}

/*
 * An async load computes the same logits, however far the disk is, and
 * its first pass packs the matrices the synchronous open packs.
 */
START_TEST(test_batch_async_load_same_logits)
{
	const char *stem = batch_models[_i];
	struct io_load_options load = { .async = true,
					.read_kib = 4,
					.queue_depth = 2 };
	struct engine_ctx *ms, *ma;
	float *ls, *la;
	uint32_t nv;
	char path[1200];
	size_t n;
	int32_t *tok;

	model_path(path, sizeof(path), stem);
	/* the default order: both run the same batch, so the same bits */
	ms = batch_open(path, 64, 2, NULL, false);
	ma = batch_open(path, 64, 2, &load, false);
	nv = engine_model_info(engine_ctx_model(ms))->n_vocab;
	tok = batch_tokens(ms, 1, &n);
	ls = batch_logits(ms);
	la = batch_logits(ma);
	{
		struct engine_seq *sa = batch_seq(ma), *ss = batch_seq(ms);

		/* at once: the load is likely still going */
		batch_whole(ma, sa, tok, n, la);
		batch_whole(ms, ss, tok, n, ls);
		engine_seq_free(sa);
		engine_seq_free(ss);
	}
	ck_assert_msg(!memcmp(ls, la, nv * sizeof(float)),
		      "%s: logits after an async load differ", stem);
	/* its first pass packed what the synchronous open packed */
	{
		struct engine_model *mms = engine_ctx_model(ms);
		struct engine_model *mma = engine_ctx_model(ma);
		const struct io_gguf *g = engine_model_gguf(mms);
		uint64_t i;

		for (i = 0; i < g->n_tensors; i++)
			ck_assert_msg(
				io_weights_placement(engine_model_weights(mms),
						     i)
						->layout ==
					io_weights_placement(
						engine_model_weights(mma), i)
						->layout,
				"%s: %s packed after one load, not the other",
				stem, g->tensors[i].name);
	}
	batch_close(ma);
	batch_close(ms);
	free(tok);
	free(ls);
	free(la);
}
END_TEST

/*
 * An async load is packed as it arrives by the model's packer, with no
 * pass to pack it: once the load and the packer are done, every matrix
 * the synchronous open packs is packed.
 */
START_TEST(test_batch_async_load_packed_by_packer)
{
	const char *stem = batch_models[_i];
	struct io_load_options load = { .async = true,
					.read_kib = 4,
					.queue_depth = 2 };
	struct engine_ctx *ms, *ma;
	struct engine_model *mms, *mma;
	const struct io_gguf *g;
	char path[1200];
	uint64_t i, packed = 0;
	uint32_t layout;

	model_path(path, sizeof(path), stem);
	ms = batch_open(path, 64, 2, NULL, false);
	ma = batch_open(path, 64, 2, &load, false);
	mms = engine_ctx_model(ms);
	mma = engine_ctx_model(ma);
	ck_assert_ptr_nonnull(mma->packer);
	ck_assert_ptr_null(mms->packer);
	ck_assert_int_eq(io_weights_wait(engine_model_weights(mma), NULL), 0);
	engine_model_packer_join(mma);
	g = engine_model_gguf(mms);
	for (i = 0; i < g->n_tensors; i++) {
		layout = io_weights_placement(engine_model_weights(mms), i)
				 ->layout;
		packed += layout != 0;
		ck_assert_msg(io_weights_placement(engine_model_weights(mma), i)
					      ->layout == layout,
			      "%s: %s packed by the open, not by the packer",
			      stem, g->tensors[i].name);
	}
	printf("%s: %llu matrices packed by the packer\n", stem,
	       (unsigned long long)packed);
	batch_close(ma);
	batch_close(ms);
}
END_TEST

struct batch_cut {
	const char *path;
	off_t size;
	int done;
};

/* The first progress report (from io_weights_load) cuts the file. */
static void batch_cut_progress(void *arg, uint64_t done, uint64_t total)
{
	struct batch_cut *c = arg;

	(void)done;
	(void)total;
	/* later reports come from the loader thread */
	if (__atomic_fetch_add(&c->done, 1, __ATOMIC_RELAXED) == 0)
		ck_assert_int_eq(truncate(c->path, c->size), 0);
}

/*
 * The file loses its second half while it loads asynchronously: the first
 * pass waits for a tensor that never comes and fails with the load's
 * error (the file named), appending nothing; the generation API says so
 * too, and the model frees cleanly.
 */
START_TEST(test_batch_async_load_failure)
{
	struct batch_cut cut = { 0 };
	struct io_load_options load = { .async = true,
					.read_kib = 4,
					.queue_depth = 1,
					.progress = batch_cut_progress,
					.progress_arg = &cut };
	struct engine_generate_options gopt = { 0 };
	struct engine_generation *g = NULL;
	struct engine_ctx *m;
	struct engine_seq *s, *s2;
	struct err err = { 0 };
	struct stat st;
	char path[1200], out[1024];
	const int32_t tok[] = { 1, 403, 407 };
	struct engine_batch_item it;
	float *l;
	size_t len = 0;
	int ret;

	batch_copy("stories260K", path, sizeof(path));
	ck_assert_int_eq(stat(path, &st), 0);
	cut.path = path;
	cut.size = st.st_size / 2;
	m = batch_open(path, 64, 2, &load, false);
	ck_assert_int_gt(__atomic_load_n(&cut.done, __ATOMIC_RELAXED), 0);
	s = batch_seq(m);
	l = batch_logits(m);
	it = (struct engine_batch_item){ s, tok, 3, l };
	ret = engine_forward(m, &it, 1, &err);
	ck_assert_int_lt(ret, 0);
	ck_assert_int_eq(err.code, -ret);
	ck_assert_msg(strstr(err.msg, path), "%s", err.msg);
	ck_assert_uint_eq(engine_seq_length(s), 0);

	s2 = batch_seq(m);
	engine_sampling_defaults(&gopt.sampling);
	gopt.sampling.temperature = 0;
	ck_assert_int_eq(engine_generation_new(&g, engine_ctx_model(m), s2,
					       "Once", 4, &gopt, &err),
			 0);
	memset(&err, 0, sizeof(err));
	ck_assert_int_lt(
		engine_generation_step(g, out, sizeof(out), &len, &err), 0);
	ck_assert_msg(strstr(err.msg, path), "%s", err.msg);
	engine_generation_free(g);
	engine_seq_free(s2);
	engine_seq_free(s);
	batch_close(m);
	free(l);
	unlink(path);
}
END_TEST

static int batch_setup(void)
{
	char probe[1200];
	size_t i;

	for (i = 0; i < N_MODELS; i++) {
		model_path(probe, sizeof(probe), batch_models[i]);
		if (check_need_file(probe))
			return CHECK_SKIP;
	}
	if (!mkdtemp(tmp_dir)) {
		perror("mkdtemp");
		return 1;
	}
	return 0;
}

static void batch_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_batch_prompt_equals_one_by_one, 0,
			    N_MODELS);
	tcase_add_loop_test(tc, test_batch_sequences_equal_alone, 0, N_MODELS);
	tcase_add_loop_test(tc, test_batch_fast_within_tolerance, 0, N_MODELS);
	tcase_add_loop_test(tc, test_batch_long_prompt_in_chunks, 0, 2);
	tcase_add_test(tc, test_batch_same_sequence_context_full);
	tcase_add_loop_test(tc, test_batch_async_load_same_logits, 0, N_MODELS);
	tcase_add_loop_test(tc, test_batch_async_load_packed_by_packer, 0,
			    N_MODELS);
	tcase_add_test(tc, test_batch_async_load_failure);
}

static void batch_teardown(void)
{
	rmdir(tmp_dir);
}

const struct check_main check_main = {
	.name = "batch",
	.timeout = 300,
	.setup = batch_setup,
	.add_tests = batch_tests,
	.teardown = batch_teardown,
};
