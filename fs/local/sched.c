// SPDX-License-Identifier: MIT
/*
 * The local provider's scheduler: what the model's one thread (the core's
 * loop, fs/model.c) runs for a local model, the only thread that calls
 * the engine for it. It loads the model (fs_local_load), starts each
 * submitted generation (fs_local_start), and makes one step over all
 * active ones (fs_local_step): engine_generation_prepare() for each, one
 * engine_forward() over the batch, engine_generation_accept() for each.
 * One forward pass per step for every generation is what lets all of them
 * progress together; a generation submitted meanwhile joins at the next
 * step (continuous batching).
 *
 * Chunked prefill: a prompt longer than fs_prefill_chunk() tokens is fed
 * in chunks, one per step, alongside the decode tokens of the others, so
 * that a long prompt delays a running answer by one chunk per token, not
 * by the whole prompt. The chunks of a step share one budget of
 * fs_prefill_chunk() tokens, the prompt with the fewest tokens left first
 * (a short prompt behind a long one starts at once).
 *
 * A generation whose reader has more than fs_stream_buffer() bytes unread
 * is paused (skipped) until the reader catches up; when every active one
 * is paused, the thread sleeps until a reader makes room.
 *
 * Idle after a load, it first merges the weights into huge pages, a step
 * at a time (fs_local_merge_step, the provider's background work), then
 * the core sleeps.
 *
 * Every failure of a generation reaches its reader as EIO (ABI.md), its
 * reason as one errors line; an answer cut short by the unmount too.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "local.h"
#include "../store.h"

static void sched_progress(void *arg, uint64_t done, uint64_t total)
{
	struct fs_model *fm = arg;

	pthread_mutex_lock(&fm->lock);
	fm->load_done = done;
	fm->load_total = total;
	pthread_mutex_unlock(&fm->lock);
}

/*
 * The loader fell back to a slower path or could not lock the weights:
 * not an error, but what the user wants to know when a load is slow.
 */
static void sched_notice(void *arg, const char *msg)
{
	struct fs_model *fm = arg;

	fs_errors_add(&fm->errors, "load: %s", msg);
	fs_progress_print(fm->fs, "llmfs: %s: %s", fm->name, msg);
}

static void *sched_hash_main(void *arg)
{
	struct fs_model *fm = arg;
	struct fs_local *l = fs_local(fm);
	char hex[65], all[sizeof(l->sha256)] = "";
	const char *path;
	size_t n = 0;

	for (uint32_t i = 0; i < 4 && (path = engine_model_file_path(l->m, i));
	     i++) {
		int rc = fs_sha256_file(path, hex, &fm->stop);

		if (rc) {
			if (rc != -ECANCELED)
				fs_errors_add(&fm->errors, "sha256: %s: %s",
					      path, strerror(-rc));
			return NULL;
		}
		n += snprintf(all + n, sizeof(all) - n, "%s%s", i ? " " : "",
			      hex);
	}
	pthread_mutex_lock(&fm->lock);
	memcpy(l->sha256, all, sizeof(all));
	pthread_mutex_unlock(&fm->lock);
	return NULL;
}

/* The file type as llama.cpp and Ollama name it: "Q4_K_M". */
static void sched_quant(struct fs_local *l)
{
	bool guessed;
	const char *type = engine_model_file_type(l->m, &guessed);

	snprintf(l->quant, sizeof(l->quant), "%s", type);
	l->quant_guessed = guessed;
}

/*
 * --kv-type-k/-v for this model; one that cannot use them (head_dim not
 * whole blocks) keeps f16 and says so in errors.
 */
static void sched_kv_types(struct fs_model *fm)
{
	const char *k = fm->fs->opt.kv_type_k, *v = fm->fs->opt.kv_type_v;
	uint32_t tk = 1, tv = 1; /* f16 */
	struct err err = { 0 };

	if (!k && !v)
		return;
	if ((k && engine_kv_type_parse(k, &tk)) ||
	    (v && engine_kv_type_parse(v, &tv)) ||
	    engine_ctx_set_kv_types(fs_local(fm)->ctx, tk, tv, &err))
		fs_errors_add(&fm->errors, "kv: %s; the cache stays f16",
			      err.msg[0] ? err.msg : "bad type");
}

static void sched_fail(struct fs_model *fm, const char *what, const char *msg)
{
	fs_errors_add(&fm->errors, "%s: %s", what, msg);
	fs_progress_print(fm->fs, "llmfs: %s: %s: %s", fm->name, what, msg);
	pthread_mutex_lock(&fm->lock);
	snprintf(fm->load_error, sizeof(fm->load_error), "%s", msg);
	fm->state = FS_MODEL_FAILED;
	fm->load_secs = fs_now() - fm->load_start;
	pthread_mutex_unlock(&fm->lock);
}

/*
 * What the load places before reading the weights: --placement, else
 * the planner's pick where --devices auto found a GPU (fs_options
 * place_auto), else nothing (all on the host, as the file is read).
 */
static const char *sched_placement(const struct fs_model *fm)
{
	return fm->fs->opt.placement  ? fm->fs->opt.placement :
	       fm->fs->opt.place_auto ? "auto" :
					NULL;
}

static void sched_load(struct fs_model *fm)
{
	const char *place = sched_placement(fm);
	const struct engine_ctx_options copt = {
		.threads = fm->fs->opt.threads,
		.kv_mem = fm->fs->opt.kv_mem,
		.budget = fm->fs->budget,
		.batch_exact = fm->fs->opt.batch_exact,
	};
	struct engine_model_options opt = {
		/* --ctx, else the store's (Ollama's num_ctx), else the file's */
		.n_ctx = fm->fs->opt.n_ctx ? fm->fs->opt.n_ctx : fm->n_ctx,
		.threads = fm->fs->opt.threads,
		.load = {
			.progress = sched_progress, .progress_arg = fm,
			.notice = sched_notice, .notice_arg = fm,
			.numa = fm->fs->opt.numa,
			.numa_node = fm->fs->opt.numa_node,
			.devices = &fm->fs->opt.devices,
			/* placed before the reading: a GPU's from the file */
			.defer = place != NULL,
		},
	};
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;
	struct fs_local *l;
	struct err err = { 0 };
	int rc;

	fm->load_start = fs_now();
	fm->provider_data = l = calloc(1, sizeof(struct fs_local));
	if (!l) {
		sched_fail(fm, "load", "out of memory");
		return;
	}
	/* a store's model it cannot give (a broken manifest, no blob) */
	if (fm->item && fm->item->error) {
		sched_fail(fm, "store", fm->item->error);
		return;
	}
	rc = engine_model_open(&m, fm->path, &opt, &err);
	if (!rc)
		rc = engine_ctx_new(&ctx, m, &copt, &err);
	if (!rc && place && (rc = engine_placement_apply(ctx, place, &err)) &&
	    !fm->fs->opt.placement) {
		/* the plan could not be placed: on the host, as without */
		fs_errors_add(&fm->errors, "load: placement auto: %s", err.msg);
		rc = 0;
	}
	if (!rc && opt.load.defer)
		rc = engine_model_load(m, &err);
	if (rc) {
		engine_ctx_free(ctx);
		engine_model_free(m);
		sched_fail(fm, "load", err.msg);
		return;
	}
	l->m = m;
	l->ctx = ctx;
	l->info = engine_model_info(m);
	sched_kv_types(fm);
	if (engine_chat_for_model(&l->chat, m, &err))
		fs_errors_add(&fm->errors, "load: %s", err.msg);
	else if (engine_chat_notice(l->chat))
		fs_errors_add(&fm->errors, "load: %s",
			      engine_chat_notice(l->chat));
	sched_quant(l);
	pthread_mutex_lock(&fm->lock);
	fm->state = FS_MODEL_READY;
	fm->load_secs = fs_now() - fm->load_start;
	pthread_mutex_unlock(&fm->lock);
	if (!pthread_create(&l->hash_thread, NULL, sched_hash_main, fm))
		l->hash_started = true;
}

/* The prefix of a stream's errors lines. */
static const char *sched_what(const struct fs_stream *s)
{
	return s->kind == FS_GEN_CHAT	? "chat" :
	       fs_gen_is_embed(s->kind) ? "embed" :
					  "generate";
}

static void sched_history(struct fs_model *fm, struct fs_stream *s)
{
	struct fs_session *ss = s->session;
	struct engine_generation *gen = fs_local_stream(s)->gen;
	struct fs_buf lp = { 0 };
	const struct engine_token_logprobs *r = NULL;
	size_t n = 0;

	/* the answer's log-probabilities, formatted outside the lock */
	if (gen)
		r = engine_generation_logprobs(gen, &n);
	if (r && fs_logprobs_format(fs_local(fm)->m, r, n, &lp))
		fs_buf_free(&lp);
	pthread_mutex_lock(&fm->lock);
	if (!ss->removed && gen) {
		fs_buf_free(&ss->logprobs);
		ss->logprobs = lp;
		lp = (struct fs_buf){ 0 };
	}
	if (!ss->removed) {
		pthread_mutex_lock(&s->lock);
		fs_buf_printf(&ss->history, "--- %s\n%s\n--- answer\n%s\n",
			      s->kind == FS_GEN_CHAT ? "chat" : "prompt",
			      s->prompt, s->out.p ? s->out.p : "");
		ss->kv_used = s->n_total;
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&fm->lock);
	fs_buf_free(&lp);
}

static void sched_stats(struct fs_model *fm, struct fs_stream *s, int error)
{
	struct engine_generation *gen = fs_local_stream(s)->gen;
	const struct engine_generation_stats *st;
	struct fs_stats *x = &fm->stats;

	if (s->kind == FS_GEN_TOKENIZE)
		return;
	pthread_mutex_lock(&fm->lock);
	x->active--;
	if (error == -ECANCELED)
		x->cancelled++;
	else if (error)
		x->failed++;
	if (gen) {
		st = engine_generation_stats(gen);
		x->tokens_in += st->prompt_tokens;
		x->tokens_in_evaluated += st->prompt_evaluated;
		x->tokens_out += st->gen_tokens;
		if (st->gen_tokens) {
			x->ttft_last_ms = st->ttft_ms;
			x->ttft_ms[x->n_ttft++ % 256] = st->ttft_ms;
		}
		if (st->prefill_ms > 0)
			x->prefill_tps = st->prompt_tokens * 1e3 /
					 st->prefill_ms;
		if (st->gen_tokens > 1 && st->decode_ms > 0) {
			x->decode_tps = (st->gen_tokens - 1) * 1e3 /
					st->decode_ms;
			/* beside the planner's estimate of this placement */
			engine_placement_note_decode(fs_local(fm)->ctx,
						     x->decode_tps);
			x->decode_tokens += st->gen_tokens - 1;
			x->decode_secs += st->decode_ms / 1e3;
		}
	}
	pthread_mutex_unlock(&fm->lock);
}

/*
 * One turn at a time per session: true when s waits behind the turn its
 * session runs (in l->turn_wait), false when s takes the session's turn
 * or is no turn.
 */
static bool sched_turn_wait(struct fs_model *fm, struct fs_stream *s)
{
	struct fs_local *l = fs_local(fm);
	struct fs_local_session *lss;
	struct fs_stream **pp;
	bool wait = false;

	if (!s->is_turn)
		return false;
	lss = fs_local_session(s->session);
	pthread_mutex_lock(&fm->lock);
	if (lss->turn_active) {
		for (pp = &l->turn_wait; *pp; pp = &(*pp)->next)
			;
		s->next = NULL;
		*pp = s;
		wait = true;
	} else {
		lss->turn_active = true;
		fs_local_stream(s)->turn_started = true;
	}
	pthread_mutex_unlock(&fm->lock);
	return wait;
}

/*
 * s's turn ended: its session's next one goes first in the queue (not
 * at the unmount: the scheduler's end takes l->turn_wait itself).
 */
static void sched_turn_next(struct fs_model *fm, struct fs_stream *s)
{
	struct fs_local *l = fs_local(fm);
	struct fs_local_stream *ls = fs_local_stream(s);
	struct fs_stream **pp, *next;

	if (!ls->turn_started)
		return;
	ls->turn_started = false;
	pthread_mutex_lock(&fm->lock);
	fs_local_session(s->session)->turn_active = false;
	for (pp = &l->turn_wait; *pp && !fm->stop; pp = &(*pp)->next) {
		next = *pp;
		if (next->session == s->session) {
			*pp = next->next;
			next->next = fm->queue;
			fm->queue = next;
			break;
		}
	}
	pthread_mutex_unlock(&fm->lock);
}

/*
 * The end of an active generation: stats, history, wake the reader. A
 * session records only the turns its conversation took (error 0): the
 * history's text is what the next turn continues.
 */
static void sched_end(struct fs_model *fm, struct fs_stream *s, int error)
{
	struct fs_local_stream *ls = fs_local_stream(s);

	fs_chat_output_end(fm, s);
	if (!error)
		fs_embed_output(fm, s);
	sched_stats(fm, s, error);
	if (s->session && s->kind != FS_GEN_TOKENIZE && !error)
		sched_history(fm, s);
	engine_generation_free(ls->gen);
	ls->gen = NULL;
	if (s->kind != FS_GEN_TOKENIZE)
		fs_kv_turn_end(fm, s, error);
	engine_seq_free(ls->seq);
	ls->seq = NULL;
	/* A cancelled stream has no reader left: EOF is as good as any. */
	fs_stream_finish(s, error == -ECANCELED ? 0 : error);
	sched_turn_next(fm, s);
	fs_stream_put(s);
}

/* tokenize: the ids of the text, as generate would feed them. */
static int sched_tokenize(struct fs_model *fm, struct fs_stream *s)
{
	struct fs_buf b = { 0 };
	struct err err = { 0 };
	int32_t *tok = NULL;
	size_t n = 0;
	int rc;

	rc = engine_tokenize(fs_local(fm)->m, s->prompt, s->prompt_len, true,
			     true, &tok, &n, &err);
	if (rc)
		fs_errors_add(&fm->errors, "tokenize: %s", err.msg);
	for (size_t i = 0; i < n && !rc; i++)
		rc = fs_buf_printf(&b, "%s%d", i ? " " : "", tok[i]);
	if (!rc)
		rc = fs_buf_add(&b, "\n", 1);
	if (!rc)
		fs_stream_append(s, b.p, b.len);
	fs_buf_free(&b);
	free(tok);
	return rc;
}

/*
 * Promise s the KV blocks of its whole run (prompt + max_tokens, or the
 * context), so that a running generation never finds the pool empty.
 * When the budget could never hold that, the budget is the run's
 * context, if the prompt fits in it. -EAGAIN: wait for room.
 */
static int sched_reserve(struct fs_model *fm, struct fs_stream *s,
			 struct err *err)
{
	uint32_t cap = engine_ctx_n_ctx(fs_local(fm)->ctx), most, need;
	struct engine_seq *seq = fs_local_stream(s)->seq;
	size_t np, nt;
	int rc;

	engine_generation_tokens(fs_local_stream(s)->gen, &np, &nt);
	need = s->cfg.max_tokens && np + s->cfg.max_tokens < cap ?
		       (uint32_t)np + s->cfg.max_tokens :
		       cap;
	if (fs_gen_is_embed(s->kind))
		need = (uint32_t)np; /* nothing is generated */
	/* kept sequences give way, least recently used first */
	while ((rc = engine_seq_reserve(seq, need, err)) == -EAGAIN &&
	       fs_kv_drop_one(fm, s))
		;
	most = engine_seq_budget_tokens(seq);
	if (rc == -ENOSPC && np < most)
		while ((rc = engine_seq_reserve(seq, most, err)) == -EAGAIN &&
		       fs_kv_drop_one(fm, s))
			;
	else if (rc == -ENOSPC) {
		struct engine_kv_stats st;

		engine_kv_stats(fs_local(fm)->ctx, &st);
		rc = err_set(
			err, ENOSPC,
			"the prompt is %zu tokens, the KV cache budget of %llu "
			"bytes holds %u (--kv-mem)",
			np, (unsigned long long)st.budget, most);
	}
	return rc;
}

/* s has its KV room: a prefix from elsewhere, and it runs. */
static void sched_run(struct fs_model *fm, struct fs_stream *s)
{
	struct fs_local *l = fs_local(fm);
	fs_kv_prefix(fm, s);
	pthread_mutex_lock(&s->lock);
	s->state = FS_STREAM_RUNNING;
	pthread_mutex_unlock(&s->lock);
	s->next = l->active;
	l->active = s;
}

/*
 * Whether kv_wait waits for the daemon's budget. A starved model asks the
 * others to drop a kept cache (budget.c), and is woken when memory comes
 * back; it is never woken by its own request.
 */
static void sched_starved(struct fs_model *fm, bool starved)
{
	struct fs_local *l = fs_local(fm);
	struct fs *fs = fm->fs;
	bool was;

	pthread_mutex_lock(&fm->lock);
	was = l->kv_starved;
	l->kv_starved = starved;
	pthread_mutex_unlock(&fm->lock);
	if (starved && !was)
		fs->budget_starved++;
	else if (!starved && was)
		fs->budget_starved--;
	if (!starved)
		return;
	fs->budget_pressure++;
	for (unsigned i = 0; i < fs->n_models; i++) {
		struct fs_model *other = fs->models[i];

		if (other == fm)
			continue;
		pthread_mutex_lock(&other->lock);
		pthread_cond_signal(&other->wake);
		pthread_mutex_unlock(&other->lock);
	}
}

/*
 * Start what waited for KV room, first come first served. What does not
 * fit now waits: a generation that could never fit failed in
 * sched_reserve (ENOSPC), and everything else that holds the budget ends
 * or is dropped in time (active generations, kept caches here and in the
 * other models).
 */
static void sched_kv_admit(struct fs_model *fm)
{
	struct fs_local *l = fs_local(fm);
	struct fs_stream *s;
	struct err err = { 0 };
	int rc;

	while ((s = l->kv_wait)) {
		rc = fs_stream_cancelled(s) ? -ECANCELED :
					      sched_reserve(fm, s, &err);
		if (rc == -EAGAIN)
			break;
		l->kv_wait = s->next;
		pthread_mutex_lock(&fm->lock);
		fm->stats.kv_waiting--;
		pthread_mutex_unlock(&fm->lock);
		if (rc) {
			if (rc != -ECANCELED)
				fs_errors_add(&fm->errors, "%s: %s",
					      sched_what(s), err.msg);
			sched_end(fm, s, rc);
			continue;
		}
		sched_run(fm, s);
	}
	sched_starved(fm, l->kv_wait != NULL);
}

static void sched_start(struct fs_model *fm, struct fs_stream *s)
{
	struct fs_local *l = fs_local(fm);
	struct fs_local_stream *ls = fs_local_stream(s);
	struct engine_generate_options opt = {
		.sampling = s->cfg.sampling,
		.max_tokens = s->cfg.max_tokens,
		.stop = (const char *const *)s->cfg.stop,
		.n_stop = s->cfg.n_stop,
		/* an embedding samples nothing: no grammar, no logprobs */
		.grammar = fs_gen_is_embed(s->kind) ? NULL : s->cfg.compiled,
		/* a session keeps its last answer's (sessions/N/logprobs) */
		.logprobs = s->session != NULL,
		.top_logprobs = s->cfg.logprobs,
		.embed = fs_gen_is_embed(s->kind),
	};
	struct err err = { 0 };
	char *text;
	size_t len;
	int rc;

	if (sched_turn_wait(fm, s))
		return;
	if (s->kind != FS_GEN_TOKENIZE) {
		pthread_mutex_lock(&fm->lock);
		fm->stats.active++;
		pthread_mutex_unlock(&fm->lock);
	}
	if (fm->state != FS_MODEL_READY) {
		rc = -EIO; /* the load failed; its errors line says why */
		goto out_end;
	}
	if (fs_stream_cancelled(s)) {
		rc = -ECANCELED;
		goto out_end;
	}
	if (s->kind == FS_GEN_TOKENIZE) {
		rc = sched_tokenize(fm, s) ? -EIO : 0;
		goto out_end;
	}
	if (s->kind == FS_GEN_CHAT && (!l->chat || engine_chat_is_raw(l->chat)))
		fs_errors_add(&fm->errors,
			      "chat: the model has no known chat template; "
			      "the prompt is used as it is");
	rc = !l->chat && s->kind == FS_GEN_CHAT ?
		     err_set(&err, ENOMEM, "no chat template (out of memory)") :
		     fs_kv_turn_begin(fm, s, &text, &len, &err);
	if (!rc)
		rc = engine_generation_new(&ls->gen, l->m, ls->seq, text, len,
					   &opt, &err);
	/* After this, only a session's history needs the prompt. */
	if (!s->session)
		fs_stream_drop_prompt(s);
	if (rc) {
		/* the prompt itself (over the context, no tokens): EIO */
		fs_errors_add(&fm->errors, "%s: %s", sched_what(s),
			      fs_errors_bare(err.msg));
		rc = -EIO;
		goto out_end;
	}
	if (l->kv_wait || (rc = sched_reserve(fm, s, &err)) == -EAGAIN) {
		/* the pool is promised to others: wait in line */
		struct fs_stream **pp = &l->kv_wait;

		while (*pp)
			pp = &(*pp)->next;
		s->next = NULL;
		*pp = s;
		pthread_mutex_lock(&fm->lock);
		fm->stats.kv_waited++;
		fm->stats.kv_waiting++;
		pthread_mutex_unlock(&fm->lock);
		return;
	}
	if (rc) {
		/* the KV budget can never hold it: ENOSPC (kv.md) */
		fs_errors_add(&fm->errors, "%s: %s", sched_what(s),
			      fs_errors_bare(err.msg));
		goto out_end;
	}
	sched_run(fm, s);
	return;
out_end:
	sched_end(fm, s, rc);
}

static int sched_batch_grow(struct fs_local_batch *b)
{
	size_t c = b->cap ? 2 * b->cap : 16;
	void *p;

	p = realloc(b->items, c * sizeof(*b->items));
	if (!p)
		return -ENOMEM;
	b->items = p;
	p = realloc(b->streams, c * sizeof(*b->streams));
	if (!p)
		return -ENOMEM;
	b->streams = p;
	b->cap = c;
	return 0;
}

static void sched_remove(struct fs_model *fm, struct fs_stream *s)
{
	struct fs_local *l = fs_local(fm);
	struct fs_stream **pp;

	for (pp = &l->active; *pp != s; pp = &(*pp)->next)
		;
	*pp = s->next;
}

/* Too much unread text: skip s until its reader catches up. */
static bool sched_paused(struct fs_model *fm, struct fs_stream *s)
{
	bool paused;

	pthread_mutex_lock(&s->lock);
	if (s->out.len - s->rpos > fs_stream_buffer(fm->fs))
		s->paused = true;
	paused = s->paused;
	pthread_mutex_unlock(&s->lock);
	return paused;
}

#define SCHED_FINITE_CHUNK 64

/*
 * No NaN or Inf among x[0..n): an exponent of all ones. Tested on the
 * bits, a chunk at a time, so that the compiler makes it a vector loop:
 * it runs over the whole vocabulary for every token of every session, on
 * the thread the engine's workers wait for.
 */
static bool sched_all_finite(const float *x, uint32_t n)
{
	const uint32_t exp = 0x7f800000;
	uint32_t i = 0, k, bits, bad;

	for (; i + SCHED_FINITE_CHUNK <= n; i += SCHED_FINITE_CHUNK) {
		bad = 0;
		for (k = 0; k < SCHED_FINITE_CHUNK; k++) {
			memcpy(&bits, x + i + k, sizeof(bits));
			bad |= (bits & exp) == exp;
		}
		if (bad)
			return false;
	}
	for (; i < n; i++)
		if (!isfinite(x[i]))
			return false;
	return true;
}

/*
 * The logits of a NaN or Inf weight (or a broken kernel) would sample
 * garbage without a word: end the generation with EIO instead.
 */
static int sched_check_logits(struct fs_model *fm, struct fs_stream *s,
			      const struct engine_batch_item *it)
{
	const struct fs_local *l = fs_local(fm);

	if (!it->logits || sched_all_finite(it->logits, l->info->n_vocab))
		return 0;
	fs_errors_add(&fm->errors,
		      "%s: the logits are not finite (NaN or Inf) at token %u: "
		      "the weights or the computation are broken",
		      sched_what(s),
		      engine_seq_length(fs_local_stream(s)->seq));
	return -EIO;
}

/*
 * Prepare s for this step: 1 with an item in *it, 0 to skip it this step
 * (paused, or a prompt to feed in chunks), or its end (0 or negative
 * errno, also in *end) with *ended set.
 */
static int sched_prepare(struct fs_model *fm, struct fs_stream *s,
			 struct engine_batch_item *it, bool *ended)
{
	struct fs_local_stream *ls = fs_local_stream(s);
	struct err err = { 0 };
	char out[4096];
	size_t len;
	int rc;

	*ended = false;
	if (fs_stream_cancelled(s)) {
		*ended = true;
		return -ECANCELED;
	}
	if (ls->prefilling || sched_paused(fm, s))
		return 0;
	fs_errors_uid = s->uid;
	rc = engine_generation_prepare(ls->gen, it);
	if (rc == 1 && engine_seq_length(ls->seq) + it->n_tokens >
			       engine_seq_capacity(ls->seq)) {
		/*
		 * The context is full: alone, the forward pass fails with
		 * -ENOSPC and the generation ends as at n_ctx, its held-back
		 * text flushed (it would fail the batch).
		 */
		len = 0;
		rc = engine_generation_step(ls->gen, out, sizeof(out), &len,
					    &err);
		fs_chat_output(fm, s, out, len);
		if (rc < 0) {
			fs_errors_add(&fm->errors, "%s: %s", sched_what(s),
				      fs_errors_bare(err.msg));
			rc = -EIO;
		}
		if (rc > 0)
			return 0;
	}
	if (rc == 1 && it->n_tokens > fs_prefill_chunk(fm->fs)) {
		ls->prefill = *it;
		ls->prefill_done = 0;
		ls->prefilling = true;
		return 0;
	}
	if (rc != 1)
		*ended = true;
	return rc;
}

/* Is s among the streams [from, n) of the batch? */
static bool sched_in_batch(const struct fs_local_batch *b, size_t from,
			   size_t n, const struct fs_stream *s)
{
	for (size_t i = from; i < n; i++)
		if (b->streams[i] == s)
			return true;
	return false;
}

/* Tokens of s's prompt still to feed in chunks. */
static size_t sched_prefill_left(struct fs_stream *s)
{
	const struct fs_local_stream *ls = fs_local_stream(s);

	return ls->prefill.n_tokens - ls->prefill_done;
}

/* This step's prompt chunks, fewest tokens left first; returns new n. */
static size_t sched_chunks(struct fs_model *fm, struct fs_local_batch *b,
			   size_t n)
{
	struct fs_local *l = fs_local(fm);
	size_t budget = fs_prefill_chunk(fm->fs), from = n, take, left;
	struct fs_stream *s, *best;
	struct fs_local_stream *ls;

	while (budget) {
		best = NULL;
		for (s = l->active; s; s = s->next)
			if (fs_local_stream(s)->prefilling &&
			    !fs_stream_cancelled(s) &&
			    !sched_in_batch(b, from, n, s) &&
			    (!best ||
			     sched_prefill_left(s) < sched_prefill_left(best)))
				best = s;
		if (!best || (n == b->cap && sched_batch_grow(b)))
			break;
		ls = fs_local_stream(best);
		left = sched_prefill_left(best);
		take = left < budget ? left : budget;
		b->items[n] = ls->prefill;
		b->items[n].tokens += ls->prefill_done;
		b->items[n].n_tokens = take;
		if (take < left)
			b->items[n].logits = NULL;
		b->streams[n++] = best;
		budget -= take;
	}
	return n;
}

/* After the forward pass: one chunk more of s's prompt; true if not done. */
static bool sched_chunk_done(struct fs_stream *s,
			     const struct engine_batch_item *it)
{
	struct fs_local_stream *ls = fs_local_stream(s);

	if (!ls->prefilling)
		return false;
	ls->prefill_done += it->n_tokens;
	if (ls->prefill_done < ls->prefill.n_tokens)
		return true;
	ls->prefilling = false;
	return false;
}

/*
 * One forward pass over every active generation (a chunk of the prompts
 * being read); returns how many items it ran, 0 when all are paused.
 */
static size_t sched_step(struct fs_model *fm, struct fs_local_batch *b)
{
	struct fs_local *l = fs_local(fm);
	struct fs_stream **pp, *s;
	struct err err = { 0 };
	char out[4096];
	size_t n = 0, len, np, nt;
	bool ended;
	int rc, frc;

	for (pp = &l->active; (s = *pp);) {
		if (n == b->cap && sched_batch_grow(b))
			break; /* the rest waits for the next step */
		rc = sched_prepare(fm, s, &b->items[n], &ended);
		if (ended) {
			*pp = s->next;
			sched_end(fm, s, rc);
			continue;
		}
		if (rc == 1)
			b->streams[n++] = s;
		pp = &s->next;
	}
	n = sched_chunks(fm, b, n);
	if (!n)
		return 0;
	frc = engine_forward(fs_local(fm)->ctx, b->items, n, &err);
	if (frc) {
		fs_errors_uid = FS_UID_DAEMON;
		fs_errors_add(&fm->errors, "forward: %s", err.msg);
		frc = -EIO;
	}
	for (size_t i = 0; i < n; i++) {
		s = b->streams[i];
		fs_errors_uid = s->uid;
		rc = frc;
		if (!rc && sched_chunk_done(s, &b->items[i]))
			continue;
		if (!rc)
			rc = sched_check_logits(fm, s, &b->items[i]);
		if (!rc) {
			len = 0;
			rc = engine_generation_accept(fs_local_stream(s)->gen,
						      out, sizeof(out), &len,
						      &err);
			fs_chat_output(fm, s, out, len);
			if (rc < 0) {
				fs_errors_add(&fm->errors, "%s: %s",
					      sched_what(s),
					      fs_errors_bare(err.msg));
				rc = -EIO;
			}
		}
		if (rc <= 0) {
			sched_remove(fm, s);
			sched_end(fm, s, rc);
			continue;
		}
		engine_generation_tokens(fs_local_stream(s)->gen, &np, &nt);
		pthread_mutex_lock(&s->lock);
		s->n_prompt = np;
		s->n_total = nt;
		pthread_mutex_unlock(&s->lock);
	}
	return n;
}

/*
 * Nothing to run (under fm->lock): no active generation or every one
 * paused for its reader at the last step (l->idle) with no reader having
 * made room since; no memory came back for what waits for KV room; and no
 * other model asked for memory that a kept cache of this one could give.
 * (New prompts, jobs and the stop are the core's to see.)
 */
bool fs_local_idle(struct fs_model *fm)
{
	struct fs_local *l = fs_local(fm);

	if (!l)
		return true; /* the load failed before its state was made */
	if (l->active && !(l->idle && fm->unpaused == l->unpaused))
		return false;
	if (l->kv_wait && fm->budget_kicks != l->kicks_seen)
		return false;
	return l->kv_wait || fm->fs->budget_pressure == l->pressure_seen ||
	       !fs_kv_has_kept(fm);
}

/* bytes of weights merged into huge pages per idle step (10-80 ms) */
#define SCHED_MERGE_STEP (32u << 20)

/*
 * Idle: merge the next piece of the weights into huge pages (they are
 * 4 KiB pages after a load until khugepaged gets to them, minutes for a
 * model, and decode is slower meanwhile: Documentation/loading.md). Here,
 * where nothing waits for the CPU, a step at a time, so that a prompt
 * arriving waits one step at most; on the one thread that moves tensors,
 * so the regions hold still. false once there is nothing left.
 */
bool fs_local_merge_step(struct fs_model *fm)
{
	struct fs_local *l = fs_local(fm);
	size_t merged;
	int more;

	if (!l || !l->m)
		return false; /* the load failed: nothing to merge */
	pthread_rwlock_rdlock(&fm->weights_lock);
	more = engine_model_merge_step(l->m, SCHED_MERGE_STEP, &merged);
	pthread_rwlock_unlock(&fm->weights_lock);
	pthread_mutex_lock(&fm->lock);
	l->merged_bytes += merged;
	l->merge_state = more > 0 ? "merging" :
			 more < 0 ? "unsupported" :
				    "done";
	pthread_mutex_unlock(&fm->lock);
	return more > 0;
}

void fs_local_load(struct fs_model *fm)
{
	struct fs_local *l;

	sched_load(fm);
	l = fs_local(fm);
	if (l && l->m) {
		pthread_mutex_lock(&fm->lock);
		l->merge_state = "merging";
		pthread_mutex_unlock(&fm->lock);
	}
}

void fs_local_start(struct fs_model *fm, struct fs_stream *s)
{
	if (!fs_local(fm)) {
		/* the load failed before its state was made: its line says why */
		fs_stream_finish(s, -EIO);
		fs_stream_put(s);
		return;
	}
	sched_start(fm, s);
}

/*
 * What the budget asked since the last step (a kept cache dropped for
 * another model), what waited for KV room, then one forward pass.
 */
void fs_local_step(struct fs_model *fm)
{
	struct fs_local *l = fs_local(fm);
	uint64_t pressure;

	if (!l)
		return;
	pthread_mutex_lock(&fm->lock);
	l->unpaused = fm->unpaused;
	l->kicks_seen = fm->budget_kicks;
	pressure = fm->fs->budget_pressure;
	pthread_mutex_unlock(&fm->lock);
	if (pressure != l->pressure_seen) {
		/* another model waits for memory: one kept cache goes */
		l->pressure_seen = pressure;
		if (!l->kv_wait)
			fs_kv_drop_one(fm, NULL);
	}
	if (l->kv_wait)
		sched_kv_admit(fm);
	l->idle = l->active && !sched_step(fm, &l->batch);
}

/* The unmount: every generation it runs or holds ends. */
unsigned fs_local_cancel(struct fs_model *fm)
{
	struct fs_local *l = fs_local(fm);
	struct fs_stream *s, *queue;
	unsigned cut = 0;

	if (!l)
		return 0;
	while ((s = l->active)) {
		l->active = s->next;
		cut += !fs_stream_cancelled(s);
		sched_end(fm, s, fs_stream_cancelled(s) ? -ECANCELED : -EIO);
	}
	while ((s = l->kv_wait)) {
		l->kv_wait = s->next;
		pthread_mutex_lock(&fm->lock);
		fm->stats.kv_waiting--;
		pthread_mutex_unlock(&fm->lock);
		cut += !fs_stream_cancelled(s);
		sched_end(fm, s, fs_stream_cancelled(s) ? -ECANCELED : -EIO);
	}
	sched_starved(fm, false);
	/* the session turns that waited: every turn before them ended */
	pthread_mutex_lock(&fm->lock);
	queue = l->turn_wait;
	l->turn_wait = NULL;
	pthread_mutex_unlock(&fm->lock);
	while ((s = queue)) {
		queue = s->next;
		cut += !fs_stream_cancelled(s);
		fs_stream_finish(s, -EIO);
		fs_stream_cancel(s);
		sched_start(fm, s);
	}
	fs_kv_free_recent(fm);
	free(l->batch.items);
	free(l->batch.streams);
	l->batch = (struct fs_local_batch){ 0 };
	/* fm->stop is set: the hash thread gives up at its next read */
	if (l->hash_started)
		pthread_join(l->hash_thread, NULL);
	l->hash_started = false;
	return cut;
}
