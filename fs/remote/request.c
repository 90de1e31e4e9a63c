// SPDX-License-Identifier: MIT
/*
 * One HTTP request of a remote model (remote.h): the JSON body jansson
 * builds from the stream's prompt and settings, the curl easy handle, the
 * server-sent events of a streamed answer ("data: {json}" lines, "data:
 * [DONE]" at the end, as OpenAI's API and llama-server send them), and the
 * end: the stream's last bytes or error, one errors line, the stats and
 * the session's history, as fs/local/sched.c does for a local model.
 *
 * Every function here runs on the model's thread.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote.h"

/* An answer that is not a stream (an error page, /v1/models) is kept up to
 * this size; a larger one fails. */
#define REQ_BODY_MAX (16u << 20)

static const struct {
	const char *path;
	const char *what; /* the errors line's prefix */
	bool sse;	  /* the answer is server-sent events */
} req_kinds[] = {
	[REMOTE_MODELS] = { "/v1/models", "remote", false },
	[REMOTE_PROPS] = { "/props", "remote", false },
	[REMOTE_COMPLETION] = { "/v1/completions", "generate", true },
	[REMOTE_CHAT] = { "/v1/chat/completions", "chat", true },
	[REMOTE_TOKENIZE] = { "/tokenize", "tokenize", false },
};

/* ---- the request's body ------------------------------------------------ */

/*
 * The config keys, as the API's sampling parameters. llama-server reads
 * repeat_penalty, vLLM repetition_penalty; each ignores the other's.
 */
static int req_sampling(json_t *o, const struct fs_config *c)
{
	const struct engine_sampling *sp = &c->sampling;
	json_t *stop;
	int rc = 0;

	rc |= json_object_set_new(
		o, "temperature",
		json_real(sp->temperature > 0 ? sp->temperature : 0));
	rc |= json_object_set_new(o, "top_k",
				  json_integer(sp->top_k > 0 ? sp->top_k : -1));
	rc |= json_object_set_new(o, "top_p", json_real(sp->top_p));
	rc |= json_object_set_new(o, "min_p",
				  json_real(sp->min_p > 0 ? sp->min_p : 0));
	rc |= json_object_set_new(o, "repeat_penalty",
				  json_real(sp->repeat_penalty));
	rc |= json_object_set_new(o, "repetition_penalty",
				  json_real(sp->repeat_penalty));
	rc |= json_object_set_new(o, "repeat_last_n",
				  json_integer(sp->repeat_last_n));
	/* JSON integers are signed 64-bit here: the top bit goes. */
	rc |= json_object_set_new(
		o, "seed", json_integer((json_int_t)(sp->seed & INT64_MAX)));
	if (c->max_tokens)
		rc |= json_object_set_new(o, "max_tokens",
					  json_integer(c->max_tokens));
	if (c->n_stop) {
		stop = json_array();
		rc |= json_object_set_new(o, "stop", stop);
		for (size_t i = 0; i < c->n_stop && stop && !rc; i++) {
			json_t *v = json_string(c->stop[i]);

			/* \xHH escapes can make a stop that is no text */
			if (!v)
				return -EILSEQ;
			rc |= json_array_append_new(stop, v);
		}
	}
	return rc ? -ENOMEM : 0;
}

/* The JSON of q's POST into q->body; -EINVAL if the prompt is no text. */
static int req_body(struct remote_req *q, struct remote *r)
{
	struct fs_stream *s = q->s;
	json_t *o = json_object(), *text, *msgs, *msg;
	int rc = 0;

	text = json_stringn(s->prompt, s->prompt_len);
	if (!o || !text) {
		json_decref(o);
		json_decref(text);
		return text ? -ENOMEM : -EINVAL;
	}
	if (r->model_id)
		rc |= json_object_set_new(o, "model", json_string(r->model_id));
	switch (q->kind) {
	case REMOTE_COMPLETION: rc |= json_object_set(o, "prompt", text); break;
	case REMOTE_CHAT:
		msgs = json_array();
		rc |= json_object_set_new(o, "messages", msgs);
		/* config's system=, as the conversation's first message */
		if (msgs && s->cfg.system)
			rc |= json_array_append_new(
				msgs, json_pack("{s:s, s:s}", "role", "system",
						"content", s->cfg.system));
		msg = json_pack("{s:s, s:O}", "role", "user", "content", text);
		rc |= msgs ? json_array_append_new(msgs, msg) : -1;
		break;
	default: /* tokenize: llama-server reads content, vLLM prompt */
		rc |= json_object_set(o, "content", text);
		rc |= json_object_set(o, "prompt", text);
		rc |= json_object_set_new(o, "add_special", json_true());
		rc |= json_object_set_new(o, "add_special_tokens", json_true());
		rc |= json_object_set_new(o, "parse_special", json_true());
		break;
	}
	if (req_kinds[q->kind].sse) {
		rc |= json_object_set_new(o, "stream", json_true());
		rc |= json_object_set_new(
			o, "stream_options",
			json_pack("{s:b}", "include_usage", 1));
		if (!rc)
			rc = req_sampling(o, &s->cfg);
	}
	json_decref(text);
	if (!rc)
		q->body = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (rc == -EILSEQ)
		return rc;
	return rc || !q->body ? -ENOMEM : 0;
}

/* ---- the answer -------------------------------------------------------- */

static void req_fail(struct remote_req *q, int error, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void req_fail(struct remote_req *q, int error, const char *fmt, ...)
{
	va_list ap;

	if (q->error)
		return; /* the first reason is the one to tell */
	q->error = error;
	va_start(ap, fmt);
	vsnprintf(q->msg, sizeof(q->msg), fmt, ap);
	va_end(ap);
}

/* The text of an error object: {"error": {"message": ...}} or a string. */
static const char *req_error_text(json_t *e)
{
	const char *m = json_string_value(json_object_get(e, "message"));

	return m ? m : json_is_string(e) ? json_string_value(e) : NULL;
}

/* One event of a streamed answer: its text goes to the stream. */
static void req_event(struct remote_req *q, const char *data, size_t len)
{
	json_t *o, *c0, *text, *u, *e;
	const char *t;
	size_t n;

	if (len == 6 && !memcmp(data, "[DONE]", 6)) {
		q->done = true;
		return;
	}
	o = json_loadb(data, len, 0, NULL);
	if (!o) {
		req_fail(q, -EIO, "the server sent an event that is not JSON");
		return;
	}
	e = json_object_get(o, "error");
	if (e) {
		req_fail(q, -EIO, "server: %s",
			 req_error_text(e) ? req_error_text(e) : "error");
		json_decref(o);
		return;
	}
	c0 = json_array_get(json_object_get(o, "choices"), 0);
	text = q->kind == REMOTE_CHAT ?
		       json_object_get(json_object_get(c0, "delta"),
				       "content") :
		       json_object_get(c0, "text");
	t = json_string_value(text);
	n = t ? json_string_length(text) : 0;
	if (n && !q->error) {
		q->t_last = fs_now();
		if (!q->n_pieces++)
			q->t_first = q->t_last;
		fs_stream_append(q->s, t, n);
	}
	if (json_is_string(json_object_get(c0, "finish_reason")))
		q->done = true;
	u = json_object_get(o, "usage");
	if (json_is_object(u)) {
		q->n_prompt = json_integer_value(
			json_object_get(u, "prompt_tokens"));
		q->n_gen = json_integer_value(
			json_object_get(u, "completion_tokens"));
	}
	json_decref(o);
}

/* The complete lines of q->in are events; the rest waits for more. */
static void req_sse(struct remote_req *q)
{
	char *p = q->in.p, *end = q->in.p + q->in.len, *nl;
	size_t n;

	while ((nl = memchr(p, '\n', end - p))) {
		n = nl - p;
		if (n && p[n - 1] == '\r')
			n--;
		/* "data:" lines; comments (":"), event: and id: are not text */
		if (n >= 5 && !memcmp(p, "data:", 5)) {
			size_t skip = n > 5 && p[5] == ' ' ? 6 : 5;

			req_event(q, p + skip, n - skip);
		}
		p = nl + 1;
	}
	n = end - p;
	memmove(q->in.p, p, n);
	q->in.p[n] = '\0'; /* fs_buf's promise */
	q->in.len = n;
}

static size_t req_on_data(char *p, size_t size, size_t nmemb, void *arg)
{
	struct remote_req *q = arg;
	size_t n = size * nmemb;

	/* Returning less than n aborts the transfer: the reader left. */
	if (q->s && fs_stream_cancelled(q->s))
		return 0;
	q->t_active = fs_now();
	if (!q->status)
		curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &q->status);
	if (q->in.len + n > REQ_BODY_MAX) {
		req_fail(q, -EIO, "an answer line over %u bytes", REQ_BODY_MAX);
		return 0;
	}
	if (fs_buf_add(&q->in, p, n)) {
		req_fail(q, -ENOMEM, "out of memory");
		return 0;
	}
	if (q->status == 200 && req_kinds[q->kind].sse)
		req_sse(q);
	return n;
}

/* ---- a new request ----------------------------------------------------- */

static void req_free(struct remote_req *q)
{
	curl_easy_cleanup(q->easy);
	curl_slist_free_all(q->headers);
	free(q->body);
	fs_buf_free(&q->in);
	free(q);
}

static int req_headers(struct remote_req *q, struct remote *r)
{
	char auth[REMOTE_KEY_HEADER_MAX];
	struct curl_slist *l, *n = NULL;

	l = curl_slist_append(NULL, "Content-Type: application/json");
	if (!l)
		return -ENOMEM;
	if (req_kinds[q->kind].sse) {
		n = curl_slist_append(l, "Accept: text/event-stream");
		if (!n)
			goto out_free;
	}
	if (r->key) {
		/* curl copies it; ours is wiped at once */
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s",
			 r->key);
		n = curl_slist_append(l, auth);
		explicit_bzero(auth, sizeof(auth));
		if (!n)
			goto out_free;
	}
	q->headers = l;
	return 0;
out_free:
	curl_slist_free_all(l);
	return -ENOMEM;
}

static int req_setup(struct remote_req *q, struct remote *r)
{
	char url[4096];
	CURL *e = curl_easy_init();
	int rc = 0;

	if (!e)
		return -ENOMEM;
	q->easy = e;
	snprintf(url, sizeof(url), "%s%s", r->url, req_kinds[q->kind].path);
	rc |= curl_easy_setopt(e, CURLOPT_URL, url);
	rc |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	rc |= curl_easy_setopt(e, CURLOPT_PRIVATE, q);
	rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, req_on_data);
	rc |= curl_easy_setopt(e, CURLOPT_WRITEDATA, q);
	rc |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, q->curl_error);
	rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	rc |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, q->headers);
	/*
	 * A stalled server: no connection in time here; no byte in time is
	 * remote_req_expire(), since curl's low-speed check averages over
	 * seconds and counts the upload: a POST stalled 6 s more than asked.
	 */
	rc |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
			       (long)(r->timeout * 1000));
	/* https: peer and host verified (curl's default), against ca_file */
	if (r->ca_file)
		rc |= curl_easy_setopt(e, CURLOPT_CAINFO, r->ca_file);
	if (q->body) {
		rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, q->body);
		rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE,
				       (long)strlen(q->body));
	}
	return rc ? -EIO : 0;
}

/* Stats of a finished stream, as the client saw them; fm->lock held. */
static void req_stats(struct fs_stats *x, const struct remote_req *q, int error)
{
	uint32_t gen = q && q->n_gen ? q->n_gen : q ? q->n_pieces : 0;
	double ttft;

	x->active--;
	if (error == -ECANCELED)
		x->cancelled++;
	else if (error)
		x->failed++;
	if (!q)
		return;
	x->tokens_in += q->n_prompt;
	x->tokens_out += gen;
	if (q->n_pieces) {
		ttft = (q->t_first - q->t_start) * 1e3;
		x->ttft_last_ms = ttft;
		x->ttft_ms[x->n_ttft++ % 256] = ttft;
		if (q->n_prompt && ttft > 0)
			x->prefill_tps = q->n_prompt * 1e3 / ttft;
	}
	if (gen > 1 && q->t_last > q->t_first) {
		x->decode_tps = (gen - 1) / (q->t_last - q->t_first);
		x->decode_tokens += gen - 1;
		x->decode_secs += q->t_last - q->t_first;
	}
}

/* The end of a stream the thread took (q NULL: no request was made). */
static void req_stream_end(struct fs_model *fm, struct fs_stream *s,
			   const struct remote_req *q, int error)
{
	struct fs_session *ss = s->session;

	if (q && q->n_prompt) {
		pthread_mutex_lock(&s->lock);
		s->n_prompt = q->n_prompt;
		s->n_total = q->n_prompt + q->n_gen;
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_lock(&fm->lock);
	if (s->kind != FS_GEN_TOKENIZE)
		req_stats(&fm->stats, q, error);
	/* The history, as sched.c writes it for a local model. */
	if (ss && s->kind != FS_GEN_TOKENIZE && !ss->removed) {
		pthread_mutex_lock(&s->lock);
		fs_buf_printf(&ss->history, "--- %s\n%s\n--- answer\n%s\n",
			      s->kind == FS_GEN_CHAT ? "chat" : "prompt",
			      s->prompt, s->out.p ? s->out.p : "");
		ss->kv_used = s->n_total;
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&fm->lock);
	/* A cancelled stream has no reader left: EOF is as good as any. */
	fs_stream_finish(s, error == -ECANCELED ? 0 : error);
	fs_stream_put(s);
}

int remote_req_new(struct fs_model *fm, enum remote_kind kind,
		   struct fs_stream *s)
{
	struct remote *r = fm->provider_data;
	struct remote_req *q;
	int rc;

	if (s && s->kind != FS_GEN_TOKENIZE) {
		pthread_mutex_lock(&fm->lock);
		fm->stats.active++;
		pthread_mutex_unlock(&fm->lock);
	}
	if (s && fs_stream_cancelled(s)) {
		req_stream_end(fm, s, NULL, -ECANCELED);
		return -ECANCELED;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		rc = -ENOMEM;
		goto out_end;
	}
	q->fm = fm;
	q->kind = kind;
	q->s = s;
	rc = s ? req_body(q, r) : 0;
	if (rc == -EINVAL || rc == -EILSEQ)
		fs_errors_add(&fm->errors,
			      "%s: the %s is not UTF-8 text, which a JSON API "
			      "needs",
			      req_kinds[kind].what,
			      rc == -EINVAL ? "prompt" : "stop string");
	if (rc == -EILSEQ)
		rc = -EINVAL;
	if (!rc)
		rc = req_headers(q, r);
	if (!rc) {
		rc = req_setup(q, r);
		if (rc)
			fs_errors_add(&fm->errors,
				      "%s: libcurl refused an "
				      "option: %s",
				      req_kinds[kind].what, q->curl_error);
	}
	if (!rc && curl_multi_add_handle(r->multi, q->easy))
		rc = -ENOMEM;
	if (rc)
		goto out_free;
	q->t_start = q->t_active = fs_now();
	if (s) {
		pthread_mutex_lock(&s->lock);
		s->state = FS_STREAM_RUNNING;
		pthread_mutex_unlock(&s->lock);
	}
	q->next = r->reqs;
	r->reqs = q;
	return 0;
out_free:
	if (rc == -ENOMEM)
		fs_errors_add(&fm->errors, "%s: out of memory",
			      req_kinds[kind].what);
	q->s = NULL;
	req_free(q);
out_end:
	if (s)
		req_stream_end(fm, s, NULL, rc);
	return rc;
}

static void req_unlink(struct remote_req *q)
{
	struct remote *r = q->fm->provider_data;
	struct remote_req **pp;

	for (pp = &r->reqs; *pp && *pp != q; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = q->next;
	curl_multi_remove_handle(r->multi, q->easy);
}

void remote_req_abort(struct remote_req *q, int error)
{
	struct remote *r = q->fm->provider_data;

	req_unlink(q);
	if (q->s)
		req_stream_end(q->fm, q->s, q, error);
	else
		r->n_probe--;
	req_free(q);
}

/* What went wrong at the HTTP level, as an errno (Documentation/remote.md). */
static int req_curl_errno(struct remote_req *q, CURLcode result)
{
	long os = 0;

	curl_easy_getinfo(q->easy, CURLINFO_OS_ERRNO, &os);
	switch (result) {
	case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
	case CURLE_COULDNT_RESOLVE_HOST: return -EHOSTUNREACH;
	case CURLE_COULDNT_CONNECT:
		if (os == EHOSTUNREACH || os == ENETUNREACH)
			return -EHOSTUNREACH;
		return os == ETIMEDOUT ? -ETIMEDOUT : -EIO;
	default: return -EIO;
	}
}

/* An answer that is not 200: its error message, else its first line. */
static void req_http_error(struct remote_req *q)
{
	json_t *o = json_loadb(q->in.p ? q->in.p : "", q->in.len, 0, NULL);
	const char *m = o ? req_error_text(json_object_get(o, "error")) : NULL;
	int n = q->in.p ? (int)strcspn(q->in.p, "\r\n") : 0;

	if (m)
		req_fail(q, -EIO, "HTTP %ld: %.200s", q->status, m);
	else
		req_fail(q, -EIO, "HTTP %ld: %.*s", q->status,
			 n > 200 ? 200 : n, q->in.p ? q->in.p : "");
	json_decref(o);
}

/* tokenize: {"tokens": [ids]} as "id id ...\n". */
static void req_tokens(struct remote_req *q)
{
	json_t *o = json_loadb(q->in.p ? q->in.p : "", q->in.len, 0, NULL);
	json_t *t = json_object_get(o, "tokens"), *v;
	struct fs_buf b = { 0 };
	size_t i;

	if (!json_is_array(t)) {
		req_fail(q, -EIO, "the answer has no \"tokens\" array");
		json_decref(o);
		return;
	}
	json_array_foreach(t, i, v)
	{
		/* with_pieces answers are objects with an id */
		json_t *id = json_is_object(v) ? json_object_get(v, "id") : v;

		fs_buf_printf(&b, "%s%lld", i ? " " : "",
			      (long long)json_integer_value(id));
	}
	fs_buf_add(&b, "\n", 1);
	fs_stream_append(q->s, b.p, b.len);
	fs_buf_free(&b);
	json_decref(o);
}

double remote_req_expire(struct remote_req *q, double now, double timeout)
{
	double left = q->t_active + timeout - now;

	if (left > 0)
		return left;
	req_fail(q, -ETIMEDOUT, "no answer for %g s (timeout=%g)",
		 now - q->t_active, timeout);
	remote_req_done(q, CURLE_OPERATION_TIMEDOUT);
	return 0;
}

void remote_req_done(struct remote_req *q, CURLcode result)
{
	struct fs_model *fm = q->fm;
	struct remote *r = fm->provider_data;
	bool sse = req_kinds[q->kind].sse;

	req_unlink(q);
	if (!q->status)
		curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &q->status);
	if (q->s && fs_stream_cancelled(q->s))
		q->error = -ECANCELED;
	else if (result != CURLE_OK && !q->error)
		req_fail(q, req_curl_errno(q, result), "%s",
			 q->curl_error[0] ? q->curl_error :
					    curl_easy_strerror(result));
	else if (q->status != 200)
		req_http_error(q);
	else if (sse && !q->done)
		req_fail(q, -EIO, "the stream ended before the answer did");
	else if (q->kind == REMOTE_TOKENIZE)
		req_tokens(q);
	/* A probe's failure is the errors line of remote_probe_models. */
	if (q->error && q->error != -ECANCELED &&
	    (q->s || q->kind == REMOTE_MODELS))
		fs_errors_add(&fm->errors, "%s: %s%s: %s",
			      req_kinds[q->kind].what, r->url,
			      req_kinds[q->kind].path, q->msg);
	if (q->kind == REMOTE_MODELS)
		remote_probe_models(fm, q);
	else if (q->kind == REMOTE_PROPS)
		remote_probe_props(fm, q);
	else
		req_stream_end(fm, q->s, q, q->error);
	req_free(q);
}
