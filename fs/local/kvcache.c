// SPDX-License-Identifier: MIT
/*
 * What the scheduler keeps of the KV cache between generations
 * (Documentation/kv.md):
 *
 *   sessions    sessions/N keeps its sequence between turns and the text
 *               of its conversation; a turn's prompt is that text plus the
 *               new text, or for chat the rendering of all its messages
 *               and the new one (chat.c), so the engine evaluates only
 *               the tokens that are new;
 *   recent      the sequences of the last few generations outside
 *               sessions, kept for their prefixes;
 *   prefix      a new sequence starts as a copy of the longest prefix of
 *               its prompt that a live, recent or session sequence holds.
 *
 * All of it counts against the model's KV cap and the daemon's memory
 * budget: when a generation cannot be admitted, the least recently used
 * recent or idle session sequence is dropped (a session rebuilds from its
 * conversation text on its next turn), then the cache a turn waiting in
 * line brought; another model's scheduler drops its own under the
 * daemon's pressure (budget.c). Everything here runs on the scheduler thread; a
 * session's seq and convo (struct fs_local_session) are also reached by
 * the provider's session_free on the thread that drops the session's last
 * reference, so they are touched under fm->lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "local.h"

/* a shorter common prefix is not worth a copy */
#define KV_PREFIX_MIN 16

static bool kv_is_turn(const struct fs_stream *s)
{
	return s->session &&
	       (s->kind == FS_GEN_GENERATE || s->kind == FS_GEN_CHAT);
}

int fs_kv_turn_begin(struct fs_model *fm, struct fs_stream *s, char **text,
		     size_t *len, struct err *err)
{
	struct fs_local_stream *ls = fs_local_stream(s);
	struct fs_local_session *lss;
	char *turn = NULL;
	size_t turn_len = s->prompt_len, base;
	struct fs_buf b = { 0 };
	int rc;

	*text = s->prompt;
	*len = s->prompt_len;
	if (!kv_is_turn(s)) {
		if (s->kind == FS_GEN_CHAT) {
			/* one message, through the template */
			rc = fs_chat_prompt(fm, s, "", 0, &ls->text, len, err);
			if (rc)
				return rc;
			*text = ls->text;
		}
		return engine_seq_new(fs_local(fm)->ctx, &ls->seq, err);
	}
	lss = fs_local_session(s->session);
	pthread_mutex_lock(&fm->lock);
	ls->seq = lss->seq;
	lss->seq = NULL;
	/* a chat turn renders the messages anew after the raw base */
	base = s->kind == FS_GEN_CHAT ? lss->convo.len - lss->chat_len :
					lss->convo.len;
	rc = fs_buf_add(&b, lss->convo.p ? lss->convo.p : "", base);
	pthread_mutex_unlock(&fm->lock);
	if (rc) {
		fs_buf_free(&b);
		return err_set(err, -rc, "out of memory");
	}
	if (s->kind == FS_GEN_CHAT) {
		rc = fs_chat_prompt(fm, s, b.p, b.len, &ls->text, len, err);
		fs_buf_free(&b);
		if (rc)
			return rc;
		*text = ls->text;
	} else {
		turn = malloc(s->prompt_len + 1);
		rc = turn ? fs_buf_add(&b, s->prompt, s->prompt_len) : -ENOMEM;
		if (rc) {
			free(turn);
			fs_buf_free(&b);
			return err_set(err, ENOMEM, "out of memory");
		}
		memcpy(turn, s->prompt, s->prompt_len + 1);
		ls->turn = turn;
		ls->turn_len = turn_len;
		ls->text = b.p;
		*text = b.p;
		*len = b.len;
	}
	if (!ls->seq)
		return engine_seq_new(fs_local(fm)->ctx, &ls->seq, err);
	return 0;
}

/* Tokens a and b have in common at their start. */
static size_t kv_common(const int32_t *a, size_t na, const int32_t *b,
			size_t nb)
{
	size_t k = 0;

	while (k < na && k < nb && a[k] == b[k])
		k++;
	return k;
}

static void kv_consider(const struct engine_seq *cand, const int32_t *tok,
			size_t n, const struct engine_seq **best,
			size_t *best_n)
{
	size_t k;

	if (!cand)
		return;
	k = kv_common(engine_seq_tokens(cand), engine_seq_length(cand), tok, n);
	if (k > *best_n) {
		*best = cand;
		*best_n = k;
	}
}

void fs_kv_prefix(struct fs_model *fm, struct fs_stream *s)
{
	struct fs_local *l = fs_local(fm);
	struct fs_local_stream *ls = fs_local_stream(s);
	const struct engine_seq *best = NULL;
	const int32_t *tok;
	struct err err = { 0 };
	size_t np, nt, best_n = 0;
	unsigned i;

	if (engine_seq_length(ls->seq) || fs_gen_is_embed(s->kind))
		return; /* a session's own sequence; an embedding sees it all */
	tok = engine_generation_tokens(ls->gen, &np, &nt);
	if (np < 2)
		return;
	for (i = 0; i < FS_KV_RECENT; i++)
		kv_consider(l->kv_recent[i], tok, np - 1, &best, &best_n);
	for (struct fs_stream *a = l->active; a; a = a->next)
		kv_consider(fs_local_stream(a)->seq, tok, np - 1, &best,
			    &best_n);
	pthread_mutex_lock(&fm->lock);
	for (struct fs_session *ss = fm->sessions; ss; ss = ss->next)
		kv_consider(fs_local_session(ss)->seq, tok, np - 1, &best,
			    &best_n);
	/* under the lock: a session's sequence cannot go meanwhile */
	if (best && best_n >= KV_PREFIX_MIN &&
	    engine_seq_copy_prefix(ls->seq, best, (uint32_t)best_n, &err))
		engine_seq_truncate(ls->seq, 0); /* evaluate it all, then */
	pthread_mutex_unlock(&fm->lock);
}

void fs_kv_turn_end(struct fs_model *fm, struct fs_stream *s, int error)
{
	struct fs_local *l = fs_local(fm);
	struct fs_local_stream *ls = fs_local_stream(s);
	struct fs_session *ss = s->session;
	struct fs_local_session *lss;
	struct engine_seq *old = NULL;
	bool removed;
	unsigned i;
	int rc = 0;

	if (!ls->seq)
		goto out;
	/* the sequence keeps only what it holds, no promise */
	engine_seq_reserve(ls->seq, engine_seq_length(ls->seq), NULL);
	if (!kv_is_turn(s)) {
		/* the oldest recent one makes room */
		old = l->kv_recent[FS_KV_RECENT - 1];
		for (i = FS_KV_RECENT - 1; i > 0; i--)
			l->kv_recent[i] = l->kv_recent[i - 1];
		l->kv_recent[0] = ls->seq;
		ls->seq = NULL;
		engine_seq_free(old);
		goto out;
	}
	lss = fs_local_session(ss);
	pthread_mutex_lock(&fm->lock);
	removed = ss->removed;
	pthread_mutex_unlock(&fm->lock);
	/* rendered without the lock: only this thread writes the messages */
	if (!removed && !error && s->kind == FS_GEN_CHAT)
		rc = fs_chat_turn_end(fm, s);
	pthread_mutex_lock(&fm->lock);
	if (!ss->removed && !error && s->kind != FS_GEN_CHAT) {
		fs_chat_turn_raw(ss);
		pthread_mutex_lock(&s->lock);
		rc = fs_buf_add(&lss->convo, ls->turn, ls->turn_len);
		if (!rc && s->out.len)
			rc = fs_buf_add(&lss->convo, s->out.p, s->out.len);
		pthread_mutex_unlock(&s->lock);
	}
	if (!ss->removed && !rc && !lss->seq) {
		lss->seq = ls->seq;
		ls->seq = NULL;
	}
	lss->kv_atime = fs_now();
	pthread_mutex_unlock(&fm->lock);
	engine_seq_free(ls->seq); /* removed meanwhile, or out of memory */
	ls->seq = NULL;
out:
	free(ls->text);
	ls->text = NULL;
	free(ls->turn);
	ls->turn = NULL;
	fs_chat_turn_free(s);
}

/*
 * The cache a turn waiting for KV room brought from its session: the last
 * in line first, never except's (what is being admitted).
 */
static struct fs_stream *kv_waiting_holder(struct fs_model *fm,
					   const struct fs_stream *except)
{
	struct fs_local *l = fs_local(fm);
	struct fs_stream *last = NULL;

	const struct engine_seq *seq;

	for (struct fs_stream *w = l->kv_wait; w; w = w->next) {
		seq = fs_local_stream(w)->seq;
		if (w != except && seq && engine_seq_length(seq))
			last = w;
	}
	return last;
}

bool fs_kv_drop_one(struct fs_model *fm, const struct fs_stream *except)
{
	struct fs_local *l = fs_local(fm);
	struct fs_local_session *lru = NULL, *lss;
	struct engine_seq *seq = NULL;
	struct fs_stream *w;
	int i;

	for (i = FS_KV_RECENT - 1; i >= 0; i--) {
		if (l->kv_recent[i]) {
			engine_seq_free(l->kv_recent[i]);
			l->kv_recent[i] = NULL;
			return true;
		}
	}
	pthread_mutex_lock(&fm->lock);
	for (struct fs_session *ss = fm->sessions; ss; ss = ss->next) {
		lss = fs_local_session(ss);
		if (lss->seq && (!lru || lss->kv_atime < lru->kv_atime))
			lru = lss;
	}
	if (lru) {
		seq = lru->seq;
		lru->seq = NULL;
	}
	pthread_mutex_unlock(&fm->lock);
	if (seq) {
		engine_seq_free(seq);
		return true;
	}
	/* it evaluates its conversation again when its turn comes */
	if ((w = kv_waiting_holder(fm, except))) {
		engine_seq_truncate(fs_local_stream(w)->seq, 0);
		return true;
	}
	return false;
}

bool fs_kv_has_kept(struct fs_model *fm)
{
	struct fs_local *l = fs_local(fm);
	const struct engine_seq *seq;
	unsigned i;

	for (i = 0; i < FS_KV_RECENT; i++)
		if (l->kv_recent[i])
			return true;
	for (struct fs_session *ss = fm->sessions; ss; ss = ss->next) {
		seq = fs_local_session(ss)->seq;
		if (seq && engine_seq_length(seq))
			return true;
	}
	return kv_waiting_holder(fm, NULL) != NULL;
}

void fs_kv_free_recent(struct fs_model *fm)
{
	struct fs_local *l = fs_local(fm);
	unsigned i;

	for (i = 0; i < FS_KV_RECENT; i++) {
		engine_seq_free(l->kv_recent[i]);
		l->kv_recent[i] = NULL;
	}
}
