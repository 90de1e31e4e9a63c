// SPDX-License-Identifier: MIT
/*
 * generation: a prompt in, streamed UTF-8 text out.
 *
 * One generation owns its tokens, its sampler and its detokenizer, and
 * borrows a sequence (the KV cache). It runs in three steps so that fs/'s
 * scheduler can put the items of many generations into one forward pass:
 *
 *   prepare   hand out what the next pass evaluates: the whole prompt,
 *             then the last sampled token
 *   forward   engine_forward(), done by the caller
 *   accept    sample from the logits, detokenize, hold back text that may
 *             start a stop string, decide whether to go on
 *
 * It ends at an end-of-generation token (its text is not output), at the
 * first stop string (cut just before it), at max_tokens, or when the next
 * token would not fit the context; none of these is an error.
 *
 *   struct engine_generation *g;
 *   engine_generation_new(&g, model, seq, "Once upon", 9, &opt, &err);
 *   (seq of a context on model)
 *   while ((rc = engine_generation_step(g, buf, sizeof(buf), &n, &err)) >= 0) {
 *   	fwrite(buf, 1, n, stdout);
 *   	if (rc == 0)
 *   		break;
 *   }
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"

/* Longest stop string; bounds the text held back (see gen_emit). */
#define GEN_STOP_MAX 256
/* held: < GEN_STOP_MAX kept back + one token's text (< 256) + a flush */
#define GEN_HELD_CAP 768
#define GEN_OUT_MIN 1024

struct engine_generation {
	struct engine_model *model;
	struct engine_seq *seq; /* borrowed */
	struct engine_sampler *sampler;
	struct engine_grammar_matcher *grammar; /* NULL: free text */
	struct engine_detokenizer detok;
	char **stop; /* n_stop copies of the stop strings */
	size_t n_stop;
	uint32_t max_tokens; /* 0: no limit */
	uint32_t n_ctx;
	int32_t *tokens; /* prompt, then the answer; cap */
	size_t n_prompt, n_total, cap;
	float *logits;	/* n_vocab, written by the forward pass */
	float *masked;	/* n_vocab: the logits after the grammar, if any */
	bool penalized; /* the sampler changes the logits it samples from */
	/* logprobs: one record per answer token */
	bool logprobs;
	uint32_t top_logprobs;
	float *raw; /* n_vocab: this step's logits as the model gave them */
	struct engine_token_logprobs *lp;
	size_t n_lp, cap_lp;
	float *embd; /* n_embd: an embed generation's vector */
	enum engine_pooling pooling;
	bool embedded; /* the vector is done */
	size_t n_kept; /* prompt positions the seq had */
	bool started;  /* the prompt has been handed out */
	bool pending;  /* prepared, not yet accepted */
	bool ended;
	char held[GEN_HELD_CAP]; /* text not yet output, n_held bytes */
	size_t n_held;
	struct timespec t_start, t_first;
	struct engine_generation_stats stats;
};

static double gen_ms(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e3 +
	       (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

/* ---- stop strings ------------------------------------------------------ */

/* Offset of the earliest complete stop string in held, or n_held. */
static size_t gen_stop_find(const struct engine_generation *g)
{
	size_t i, best = g->n_held;

	for (i = 0; i < g->n_stop; i++) {
		const char *p = memmem(g->held, g->n_held, g->stop[i],
				       strlen(g->stop[i]));

		if (p && (size_t)(p - g->held) < best)
			best = (size_t)(p - g->held);
	}
	return best;
}

/*
 * Offset from which held may still grow into a stop string: the earliest
 * suffix of held that is a proper prefix of some stop string.
 */
static size_t gen_stop_partial(const struct engine_generation *g)
{
	size_t j, i;

	for (j = 0; j < g->n_held; j++) {
		size_t n = g->n_held - j;

		for (i = 0; i < g->n_stop; i++) {
			if (n < strlen(g->stop[i]) &&
			    memcmp(g->held + j, g->stop[i], n) == 0)
				return j;
		}
	}
	return g->n_held;
}

/* Move the first n held bytes to out. */
static size_t gen_emit(struct engine_generation *g, char *out, size_t n)
{
	memcpy(out, g->held, n);
	memmove(g->held, g->held + n, g->n_held - n);
	g->n_held -= n;
	out[n] = '\0';
	return n;
}

/* End the generation: flush, cut at a stop string, output the rest. */
static size_t gen_finish(struct engine_generation *g, char *out)
{
	g->n_held += engine_detokenizer_flush(&g->detok, g->held + g->n_held,
					      sizeof(g->held) - g->n_held);
	g->ended = true;
	return gen_emit(g, out, gen_stop_find(g));
}

/* ---- life cycle -------------------------------------------------------- */

static int gen_copy_stops(struct engine_generation *g,
			  const struct engine_generate_options *opt,
			  struct err *err)
{
	size_t i;

	if (opt->n_stop == 0)
		return 0;
	g->stop = calloc(opt->n_stop, sizeof(*g->stop));
	if (!g->stop)
		return err_set(err, ENOMEM, "generate: out of memory");
	for (i = 0; i < opt->n_stop; i++) {
		size_t n = opt->stop[i] ? strlen(opt->stop[i]) : 0;

		if (n == 0)
			return err_set(err, EINVAL,
				       "generate: empty stop string");
		if (n > GEN_STOP_MAX)
			return err_set(
				err, EINVAL,
				"generate: stop string of %zu bytes (at most %d)",
				n, GEN_STOP_MAX);
		g->stop[i] = strdup(opt->stop[i]);
		if (!g->stop[i])
			return err_set(err, ENOMEM, "generate: out of memory");
		g->n_stop++;
	}
	return 0;
}

/* The prompt's tokens, through the chat template if asked for. */
static int gen_tokenize(struct engine_generation *g, const char *prompt,
			size_t len, const struct engine_generate_options *opt,
			struct err *err)
{
	struct engine_chat_render ro = { true, opt->think };
	struct engine_chat_message msg = { "user", NULL, NULL };
	char *text = NULL;
	size_t n = 0;
	int rc;

	if (opt->chat) {
		if (memchr(prompt, '\0', len))
			return err_set(err, EINVAL,
				       "generate: a NUL byte in the message");
		text = strndup(prompt, len);
		if (!text)
			return err_set(err, ENOMEM, "generate: out of memory");
		msg.content = text;
		rc = engine_chat_render(opt->chat, &msg, 1, &ro, &text, &len,
					err);
		free((char *)msg.content);
		if (rc)
			return rc;
		prompt = text;
	}
	/* embeddings: special tokens' text is text (node-llama-cpp's) */
	rc = engine_tokenize(g->model, prompt, len, true, !opt->embed,
			     &g->tokens, &n, err);
	free(text);
	if (rc)
		return rc;
	if (n == 0)
		return err_set(err, EINVAL,
			       "generate: the prompt gives no tokens");
	if (n > g->n_ctx)
		return err_set(
			err, ENOSPC,
			"generate: the prompt is %zu tokens, the context holds %u",
			n, g->n_ctx);
	g->n_prompt = g->n_total = g->cap = n;
	g->stats.prompt_tokens = (uint32_t)n;
	return 0;
}

int engine_generation_new(struct engine_generation **out,
			  struct engine_model *m, struct engine_seq *seq,
			  const char *prompt, size_t len,
			  const struct engine_generate_options *opt,
			  struct err *err)
{
	const struct engine_model_info *info = engine_model_info(m);
	struct engine_generate_options def;
	struct engine_generation *g;
	int rc;

	*out = NULL;
	if (engine_ctx_model(engine_seq_ctx(seq)) != m)
		return err_set(err, EINVAL,
			       "generate: the sequence is of another model");
	if (!opt) {
		memset(&def, 0, sizeof(def));
		engine_sampling_defaults(&def.sampling);
		opt = &def;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return err_set(err, ENOMEM, "generate: out of memory");
	g->model = m;
	g->seq = seq;
	g->max_tokens = opt->max_tokens;
	g->n_ctx = engine_ctx_n_ctx(engine_seq_ctx(seq));
	rc = gen_copy_stops(g, opt, err);
	if (rc)
		goto out_free;
	rc = engine_sampler_new(&g->sampler, &opt->sampling, info->n_vocab,
				err);
	if (!rc && opt->grammar)
		rc = engine_grammar_matcher_new(&g->grammar, opt->grammar, err);
	if (rc)
		goto out_free;
	g->logits = malloc((size_t)info->n_vocab * sizeof(*g->logits));
	g->penalized = opt->sampling.repeat_penalty != 1.0f &&
		       opt->sampling.repeat_last_n != 0;
	if (opt->grammar && g->penalized)
		g->masked = malloc((size_t)info->n_vocab * sizeof(*g->masked));
	g->logprobs = opt->logprobs;
	g->top_logprobs = opt->top_logprobs < ENGINE_LOGPROBS_MAX ?
				  opt->top_logprobs :
				  ENGINE_LOGPROBS_MAX;
	if (opt->logprobs)
		g->raw = malloc((size_t)info->n_vocab * sizeof(*g->raw));
	if (!g->logits || (opt->grammar && g->penalized && !g->masked) ||
	    (opt->logprobs && !g->raw)) {
		rc = err_set(err, ENOMEM, "generate: out of memory for logits");
		goto out_free;
	}
	rc = gen_tokenize(g, prompt, len, opt, err);
	if (rc)
		goto out_free;
	if (opt->embed) {
		g->embd = calloc(info->n_embd, sizeof(*g->embd));
		if (!g->embd) {
			rc = err_set(err, ENOMEM, "embed: out of memory");
			goto out_free;
		}
		g->pooling = engine_model_pooling(m);
	}
	engine_detokenizer_init(&g->detok, m);
	/* the answer continues the prompt's text (SentencePiece's space) */
	engine_detokenizer_context(&g->detok, g->tokens, g->n_prompt);
	*out = g;
	return 0;

out_free:
	engine_generation_free(g);
	return rc;
}

void engine_generation_free(struct engine_generation *g)
{
	size_t i;

	if (!g)
		return;
	for (i = 0; i < g->n_stop; i++)
		free(g->stop[i]);
	free(g->stop);
	engine_sampler_free(g->sampler);
	engine_grammar_matcher_free(g->grammar);
	/* the sequence outlives us: it must not write to embd later */
	if (g->embd && g->seq)
		engine_seq_set_embedding(g->seq, NULL, ENGINE_POOLING_NONE);
	free(g->tokens);
	free(g->logits);
	free(g->masked);
	free(g->raw);
	free(g->lp);
	free(g->embd);
	free(g);
}

/* ---- the three steps --------------------------------------------------- */

/*
 * Keep the positions of the sequence that hold the prompt's first tokens
 * (at least the last prompt token is evaluated: its logits are the first
 * answer's), drop the rest.
 */
static void gen_keep_prefix(struct engine_generation *g)
{
	const int32_t *have = engine_seq_tokens(g->seq);
	size_t n = engine_seq_length(g->seq), k = 0;

	/* an embedding sees all of its tokens (mean pooling sums them) */
	while (!g->embd && k < n && k + 1 < g->n_prompt &&
	       have[k] == g->tokens[k])
		k++;
	engine_seq_truncate(g->seq, (uint32_t)k);
	g->n_kept = k;
	g->stats.prompt_evaluated = (uint32_t)(g->n_prompt - k);
}

int engine_generation_prepare(struct engine_generation *g,
			      struct engine_batch_item *item)
{
	if (g->ended)
		return 0;
	item->seq = g->seq;
	item->logits = g->embd ? NULL : g->logits;
	if (!g->started) {
		clock_gettime(CLOCK_MONOTONIC, &g->t_start);
		g->started = true;
		gen_keep_prefix(g);
		if (g->embd)
			engine_seq_set_embedding(g->seq, g->embd, g->pooling);
	}
	if (g->n_total == g->n_prompt) {
		item->tokens = g->tokens + g->n_kept;
		item->n_tokens = g->n_prompt - g->n_kept;
	} else {
		item->tokens = g->tokens + g->n_total - 1;
		item->n_tokens = 1;
	}
	g->pending = true;
	return 1;
}

static int gen_push_token(struct engine_generation *g, int32_t t,
			  struct err *err)
{
	if (g->n_total == g->cap) {
		size_t cap = g->cap * 2 + 16;
		int32_t *p = realloc(g->tokens, cap * sizeof(*p));

		if (!p)
			return err_set(err, ENOMEM, "generate: out of memory");
		g->tokens = p;
		g->cap = cap;
	}
	g->tokens[g->n_total++] = t;
	return 0;
}

/* ---- log-probabilities ------------------------------------------------- */

/* log(sum(exp(x))) over n logits, and the best k (heap order undone). */
static double gen_logsumexp(const float *x, uint32_t n)
{
	float max = -INFINITY;
	double sum = 0.0;

	for (uint32_t i = 0; i < n; i++)
		if (x[i] > max)
			max = x[i];
	if (!isfinite(max))
		return max;
	for (uint32_t i = 0; i < n; i++)
		sum += expf(x[i] - max);
	return max + log(sum);
}

static bool gen_better(const struct engine_logprob *a,
		       const struct engine_logprob *b)
{
	return a->logprob > b->logprob ||
	       (a->logprob == b->logprob && a->token < b->token);
}

/* Insert (token, v) into the sorted top list of r (k wanted). */
static void gen_top_insert(struct engine_token_logprobs *r, uint32_t k,
			   int32_t token, float v)
{
	struct engine_logprob x = { token, v };
	uint32_t i;

	if (r->n_top == k && !gen_better(&x, &r->top[k - 1]))
		return;
	i = r->n_top < k ? r->n_top++ : k - 1;
	while (i > 0 && gen_better(&x, &r->top[i - 1])) {
		r->top[i] = r->top[i - 1];
		i--;
	}
	r->top[i] = x;
}

/* Before anything changes the logits: their log-softmax's best ones. */
static int gen_logprobs_begin(struct engine_generation *g, struct err *err)
{
	uint32_t n = engine_model_info(g->model)->n_vocab;
	struct engine_token_logprobs *r;
	double lse;

	if (g->n_lp == g->cap_lp) {
		size_t cap = g->cap_lp ? 2 * g->cap_lp : 64;
		void *p = realloc(g->lp, cap * sizeof(*g->lp));

		if (!p)
			return err_set(err, ENOMEM, "generate: out of memory");
		g->lp = p;
		g->cap_lp = cap;
	}
	memcpy(g->raw, g->logits, n * sizeof(*g->raw));
	lse = gen_logsumexp(g->raw, n);
	r = &g->lp[g->n_lp];
	memset(r, 0, sizeof(*r));
	for (uint32_t t = 0; g->top_logprobs && t < n; t++)
		gen_top_insert(r, g->top_logprobs, (int32_t)t,
			       (float)(g->raw[t] - lse));
	/* chosen.logprob holds the sum until the token is known */
	r->chosen.logprob = (float)lse;
	return 0;
}

static void gen_logprobs_end(struct engine_generation *g, int32_t t)
{
	struct engine_token_logprobs *r = &g->lp[g->n_lp++];

	r->chosen.token = t;
	r->chosen.logprob = g->raw[t] - r->chosen.logprob;
}

/* Tokens that may still be sampled, this one included (UINT32_MAX: no end). */
static uint32_t gen_budget(const struct engine_generation *g)
{
	uint32_t left = UINT32_MAX, room;

	if (g->max_tokens)
		left = g->max_tokens - g->stats.gen_tokens;
	/* each token after this one needs a position */
	room = engine_seq_capacity(g->seq) - engine_seq_length(g->seq) + 1;
	return room < left ? room : left;
}

/*
 * Sample under the grammar: only allowed tokens, and, when the tokens
 * left run short, only tokens after which the grammar can still finish
 * in time (the first pick is checked; if it would not fit, the pick is
 * made again among the best tokens that do), so that an answer cut by
 * max_tokens or the context still parses.
 */
static int gen_sample_grammar(struct engine_generation *g, int32_t *t,
			      struct err *err)
{
	uint32_t n_vocab = engine_model_info(g->model)->n_vocab;
	uint32_t left = gen_budget(g);
	int rc = engine_grammar_matcher_apply(g->grammar, g->logits, err);

	if (rc)
		return rc;
	/* only a repetition penalty changes the logits as it samples */
	if (left != UINT32_MAX && g->penalized)
		memcpy(g->masked, g->logits, n_vocab * sizeof(*g->masked));
	*t = engine_sampler_sample(g->sampler, g->logits, g->tokens,
				   g->n_total);
	if (left == UINT32_MAX ||
	    engine_grammar_matcher_fits(g->grammar, *t, left - 1))
		return 0;
	if (g->penalized)
		memcpy(g->logits, g->masked, n_vocab * sizeof(*g->logits));
	rc = engine_grammar_matcher_restrict(g->grammar, g->logits, left - 1,
					     err);
	if (!rc)
		*t = engine_sampler_sample(g->sampler, g->logits, g->tokens,
					   g->n_total);
	return rc;
}

/* The prompt went through: the vector is whole (a mean divided). */
static void gen_embedded(struct engine_generation *g)
{
	uint32_t n = engine_model_info(g->model)->n_embd;

	if (g->pooling == ENGINE_POOLING_MEAN)
		for (uint32_t e = 0; e < n; e++)
			g->embd[e] /= (float)g->n_prompt;
	engine_seq_set_embedding(g->seq, NULL, ENGINE_POOLING_NONE);
	g->embedded = true;
	g->ended = true;
	g->stats.ttft_ms = g->stats.prefill_ms;
}

int engine_generation_accept(struct engine_generation *g, char *out, size_t cap,
			     size_t *len, struct err *err)
{
	struct timespec now;
	bool first = g->n_total == g->n_prompt;
	int32_t t = 0;
	int rc;

	*len = 0;
	if (g->ended)
		return 0;
	if (cap < GEN_OUT_MIN)
		return err_set(err, EINVAL,
			       "generate: output buffer of %zu bytes", cap);
	if (!g->pending)
		return err_set(err, EINVAL, "generate: accept without prepare");
	g->pending = false;

	if (first) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		g->stats.prefill_ms = gen_ms(&g->t_start, &now);
	}
	if (g->embd) {
		/* an embedding ends at its prompt: nothing is sampled */
		gen_embedded(g);
		return 0;
	}
	if (g->logprobs && (rc = gen_logprobs_begin(g, err))) {
		g->ended = true;
		return rc;
	}
	if (g->grammar) {
		struct timespec a, b;

		clock_gettime(CLOCK_MONOTONIC, &a);
		rc = gen_sample_grammar(g, &t, err);
		clock_gettime(CLOCK_MONOTONIC, &b);
		g->stats.grammar_ms += gen_ms(&a, &b);
		if (rc) {
			g->ended = true;
			return rc;
		}
	} else {
		t = engine_sampler_sample(g->sampler, g->logits, g->tokens,
					  g->n_total);
	}
	if (g->logprobs)
		gen_logprobs_end(g, t);
	rc = gen_push_token(g, t, err);
	if (!rc && g->grammar) {
		struct timespec a, b;

		clock_gettime(CLOCK_MONOTONIC, &a);
		rc = engine_grammar_matcher_accept(g->grammar, t, err);
		clock_gettime(CLOCK_MONOTONIC, &b);
		g->stats.grammar_ms += gen_ms(&a, &b);
	}
	if (rc) {
		g->ended = true;
		return rc;
	}
	g->stats.gen_tokens++;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (first) {
		g->stats.ttft_ms = gen_ms(&g->t_start, &now);
		g->t_first = now;
	} else {
		g->stats.decode_ms = gen_ms(&g->t_first, &now);
	}

	if (engine_token_is_eog(g->model, t)) {
		*len = gen_finish(g, out);
		return 0;
	}
	g->n_held += engine_detokenizer_push(&g->detok, t, g->held + g->n_held,
					     sizeof(g->held) - g->n_held);
	if (gen_stop_find(g) < g->n_held) {
		*len = gen_emit(g, out, gen_stop_find(g));
		g->ended = true;
		return 0;
	}
	/*
	 * the next pass would put the token at position n_ctx (or past what
	 * the sequence reserved): no room
	 */
	if ((g->max_tokens && g->stats.gen_tokens >= g->max_tokens) ||
	    engine_seq_length(g->seq) >= engine_seq_capacity(g->seq)) {
		*len = gen_finish(g, out);
		return 0;
	}
	*len = gen_emit(g, out, gen_stop_partial(g));
	return 1;
}

int engine_generation_step(struct engine_generation *g, char *out, size_t cap,
			   size_t *len, struct err *err)
{
	struct engine_batch_item item;
	int rc;

	*len = 0;
	if (!engine_generation_prepare(g, &item))
		return 0;
	rc = engine_forward(engine_seq_ctx(g->seq), &item, 1, err);
	if (rc == -ENOSPC && cap >= GEN_OUT_MIN) {
		/* the sequence is full after all: end as at n_ctx */
		g->pending = false;
		*len = gen_finish(g, out);
		return 0;
	}
	if (rc) {
		g->pending = false;
		g->ended = true;
		return rc;
	}
	return engine_generation_accept(g, out, cap, len, err);
}

const struct engine_generation_stats *
engine_generation_stats(const struct engine_generation *g)
{
	return &g->stats;
}

const struct engine_token_logprobs *
engine_generation_logprobs(const struct engine_generation *g, size_t *n)
{
	*n = g->n_lp;
	return g->lp;
}

const float *engine_generation_embedding(const struct engine_generation *g,
					 size_t *n)
{
	if (!g->embedded)
		return NULL;
	if (n)
		*n = engine_model_info(g->model)->n_embd;
	return g->embd;
}

const int32_t *engine_generation_tokens(const struct engine_generation *g,
					size_t *n_prompt, size_t *n_total)
{
	if (n_prompt)
		*n_prompt = g->n_prompt;
	if (n_total)
		*n_total = g->n_total;
	return g->tokens;
}
