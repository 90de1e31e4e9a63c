// SPDX-License-Identifier: MIT
/*
 * Chat turns: the model's chat template around the messages, and the
 * reasoning of thinking models apart from the answer.
 *
 *   chat         the prompt is one user message, rendered alone
 *   sessions/N/chat  the session keeps its messages (user, assistant with
 *                its reasoning); each turn renders all of them and the new
 *                one, as llama-server renders a request's whole history,
 *                and the engine evaluates only the tokens that differ
 *                from what the session's sequence holds
 *
 * A session's conversation text (convo of struct fs_local_session, what
 * its KV snapshot keeps) is a base of raw text (generate turns, a restored
 * snapshot) followed by the rendering of its messages (the last chat_len
 * bytes). A generate
 * turn turns the messages into raw text (the conversation goes on as
 * text); a chat turn renders base + messages.
 *
 * config's system= is the conversation's first message, a system one.
 *
 * think (config): on (the template's enable_thinking true, llama.cpp's
 * default: the answer streams with its <think> block), off (false), hide
 * (true, but only the answer streams; the reasoning goes to
 * sessions/N/reasoning, or nowhere for the model's own chat file).
 *
 * All of it runs on the scheduler thread, which alone writes a session's
 * messages; the reasoning a reader can see is copied to ss->reasoning
 * under fm->lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "local.h"

struct fs_chat_msg {
	char *role, *content, *reasoning;
};

struct fs_chat_history {
	struct fs_chat_msg *v;
	size_t n, cap;
};

/* One chat generation's output, split. */
struct fs_chat_turn {
	struct engine_think_split split;
	bool hide;
	bool system; /* config's system= opened the conversation */
	struct fs_buf answer, reasoning; /* for the session's messages */
};

static void chat_msg_free(struct fs_chat_msg *m)
{
	free(m->role);
	free(m->content);
	free(m->reasoning);
}

static void chat_history_clear(struct fs_chat_history *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->n; i++)
		chat_msg_free(&h->v[i]);
	h->n = 0;
}

void fs_chat_session_free(struct fs_session *ss)
{
	struct fs_chat_history *h = fs_local_session(ss)->chat;

	if (h) {
		chat_history_clear(h);
		free(h->v);
		free(h);
	}
}

void fs_chat_turn_free(struct fs_stream *s)
{
	struct fs_local_stream *ls = fs_local_stream(s);

	if (!ls->chat)
		return;
	fs_buf_free(&ls->chat->answer);
	fs_buf_free(&ls->chat->reasoning);
	free(ls->chat);
	ls->chat = NULL;
}

static int chat_push(struct fs_chat_history *h, const char *role,
		     const char *content, size_t len, const char *reasoning,
		     size_t rlen)
{
	struct fs_chat_msg m = { 0 };

	if (h->n == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 8;
		struct fs_chat_msg *v = realloc(h->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	m.role = strdup(role);
	m.content = strndup(content ? content : "", len);
	m.reasoning = reasoning ? strndup(reasoning, rlen) : NULL;
	if (!m.role || !m.content || (reasoning && !m.reasoning)) {
		chat_msg_free(&m);
		return -ENOMEM;
	}
	h->v[h->n++] = m;
	return 0;
}

/*
 * Render the messages of h, after a system message and before one more
 * user message when given; with the assistant's turn opened when
 * add_prompt.
 */
static int chat_render(struct fs_model *fm, const struct fs_chat_history *h,
		       const char *system, const char *user,
		       enum engine_think think, bool add_prompt, char **out,
		       size_t *len, struct err *err)
{
	size_t n = h ? h->n : 0, k = 0;
	struct engine_chat_message *msg;
	struct engine_chat_render o = { add_prompt, think };
	int rc;

	msg = calloc(n + 2, sizeof(*msg));
	if (!msg)
		return err_set(err, ENOMEM, "out of memory");
	if (system)
		msg[k++] = (struct engine_chat_message){ "system", system,
							 NULL };
	for (size_t i = 0; i < n; i++)
		msg[k++] = (struct engine_chat_message){ h->v[i].role,
							 h->v[i].content,
							 h->v[i].reasoning };
	if (user)
		msg[k++] = (struct engine_chat_message){ "user", user, NULL };
	rc = engine_chat_render(fs_local(fm)->chat, msg, k, &o, out, len, err);
	free(msg);
	return rc;
}

static enum engine_think chat_think(const struct fs_stream *s)
{
	return s->cfg.think;
}

int fs_chat_prompt(struct fs_model *fm, struct fs_stream *s, const char *base,
		   size_t base_len, char **text, size_t *len, struct err *err)
{
	struct fs_session *ss = s->session;
	const struct fs_chat_history *h = ss ? fs_local_session(ss)->chat :
					       NULL;
	struct fs_chat_turn *t;
	const char *system = s->cfg.system;
	char *r = NULL, *all;
	size_t n = 0;
	bool open;
	int rc;

	*text = NULL;
	if (memchr(s->prompt, '\0', s->prompt_len))
		return err_set(err, EINVAL, "a NUL byte in the message");
	/* config's system= opens a conversation; later turns have it */
	if (h && h->n)
		system = NULL;
	rc = chat_render(fm, h, system, s->prompt, chat_think(s), true, &r, &n,
			 err);
	if (rc)
		return rc;
	/* the answer is split for a session's messages and for hide */
	if (ss || chat_think(s) == ENGINE_THINK_HIDE) {
		t = calloc(1, sizeof(*t));
		if (!t) {
			free(r);
			return err_set(err, ENOMEM, "out of memory");
		}
		t->hide = chat_think(s) == ENGINE_THINK_HIDE;
		t->system = system != NULL;
		/*
		 * a grammar shapes the answer from its first token: after a
		 * prompt that opened <think>, what comes is still the answer
		 */
		open = !s->cfg.compiled && engine_chat_opens_thinking(r, n);
		engine_think_split_init(&t->split, open);
		fs_local_stream(s)->chat = t;
	}
	all = malloc(base_len + n + 1);
	if (!all) {
		free(r);
		return err_set(err, ENOMEM, "out of memory");
	}
	memcpy(all, base, base_len);
	memcpy(all + base_len, r, n + 1);
	free(r);
	*text = all;
	*len = base_len + n;
	if (ss) {
		pthread_mutex_lock(&fm->lock);
		ss->reasoning.len = 0;
		fs_buf_add(&ss->reasoning, "", 0);
		pthread_mutex_unlock(&fm->lock);
	}
	return 0;
}

/* Reasoning text of a session's turn, where its reader finds it. */
static void chat_reasoning(struct fs_model *fm, struct fs_stream *s,
			   const char *p, size_t n)
{
	if (!n || !s->session)
		return;
	fs_buf_add(&fs_local_stream(s)->chat->reasoning, p, n);
	pthread_mutex_lock(&fm->lock);
	fs_buf_add(&s->session->reasoning, p, n);
	pthread_mutex_unlock(&fm->lock);
}

static void chat_split(struct fs_model *fm, struct fs_stream *s,
		       const char *text, size_t n, bool flush)
{
	char reason[4096 + ENGINE_THINK_HOLD], answer[4096 + ENGINE_THINK_HOLD];
	struct fs_chat_turn *t = fs_local_stream(s)->chat;
	size_t nr, na, k;

	do {
		k = n < 4096 ? n : 4096;
		if (flush)
			engine_think_split_flush(&t->split, reason, &nr, answer,
						 &na);
		else
			engine_think_split_push(&t->split, text, k, reason, &nr,
						answer, &na);
		chat_reasoning(fm, s, reason, nr);
		if (s->session)
			fs_buf_add(&t->answer, answer, na);
		if (t->hide)
			fs_stream_append(s, answer, na);
		text += k;
		n -= k;
	} while (n);
}

void fs_chat_output(struct fs_model *fm, struct fs_stream *s, const char *text,
		    size_t n)
{
	const struct fs_chat_turn *t = fs_local_stream(s)->chat;

	if (!t) {
		fs_stream_append(s, text, n);
		return;
	}
	if (!t->hide)
		fs_stream_append(s, text, n);
	if (n)
		chat_split(fm, s, text, n, false);
}

void fs_chat_output_end(struct fs_model *fm, struct fs_stream *s)
{
	if (fs_local_stream(s)->chat)
		chat_split(fm, s, NULL, 0, true);
}

/* The conversation keeps the answer as written: the turn's prompt and it. */
static int chat_keep_written(struct fs_model *fm, struct fs_stream *s)
{
	struct fs_local_session *lss = fs_local_session(s->session);
	const char *text = fs_local_stream(s)->text;
	struct fs_buf *convo = &lss->convo;
	size_t base;
	int rc;

	pthread_mutex_lock(&fm->lock);
	base = convo->len - lss->chat_len;
	convo->len = base;
	rc = fs_buf_add(convo, text + base, strlen(text + base));
	pthread_mutex_lock(&s->lock);
	if (!rc)
		rc = fs_buf_add(convo, s->out.p ? s->out.p : "", s->out.len);
	pthread_mutex_unlock(&s->lock);
	lss->chat_len = convo->len - base;
	pthread_mutex_unlock(&fm->lock);
	return rc;
}

int fs_chat_turn_end(struct fs_model *fm, struct fs_stream *s)
{
	struct fs_local_session *lss = fs_local_session(s->session);
	struct fs_chat_history *h = lss->chat;
	struct fs_chat_turn *t = fs_local_stream(s)->chat;
	struct err err = { 0 };
	size_t n = 0, mark, base;
	char *r = NULL;
	int rc;

	if (!h) {
		h = calloc(1, sizeof(*h));
		if (!h)
			return -ENOMEM;
		lss->chat = h;
	}
	mark = h->n;
	rc = t->system && !mark ? chat_push(h, "system", s->cfg.system,
					    strlen(s->cfg.system), NULL, 0) :
				  0;
	if (!rc)
		rc = chat_push(h, "user", s->prompt, s->prompt_len, NULL, 0);
	if (!rc)
		rc = chat_push(h, "assistant", t->answer.p, t->answer.len,
			       t->reasoning.len ? t->reasoning.p : NULL,
			       t->reasoning.len);
	if (!rc)
		rc = chat_render(fm, h, NULL, NULL, chat_think(s), false, &r,
				 &n, &err);
	if (rc && rc != -ENOMEM) {
		/* a template that will not end a conversation on an answer */
		fs_errors_add(&fm->errors,
			      "chat: %s; the conversation keeps the answer as "
			      "written",
			      fs_errors_bare(err.msg));
		return chat_keep_written(fm, s);
	}
	if (rc) {
		while (h->n > mark)
			chat_msg_free(&h->v[--h->n]);
		return -ENOMEM;
	}
	pthread_mutex_lock(&fm->lock);
	base = lss->convo.len - lss->chat_len;
	lss->convo.len = base;
	rc = fs_buf_add(&lss->convo, r, n); /* NUL-terminates at base + n */
	lss->chat_len = rc ? 0 : n;
	pthread_mutex_unlock(&fm->lock);
	free(r);
	return rc;
}

void fs_chat_turn_raw(struct fs_session *ss)
{
	struct fs_local_session *lss = fs_local_session(ss);

	chat_history_clear(lss->chat);
	lss->chat_len = 0;
}
