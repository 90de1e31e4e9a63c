// SPDX-License-Identifier: MIT
/*
 * The remote provider: a model directory backed by an OpenAI-compatible
 * HTTP server (llama.cpp's llama-server, vLLM), Documentation/remote.md.
 *
 *   $ llama-server -m model.gguf --port 8080 &
 *   $ llmfs --remote big=http://127.0.0.1:8080 /mnt/llm
 *   $ echo temperature=0 > /mnt/llm/big/config
 *   $ echo "Once upon a time" > /mnt/llm/big/generate
 *   $ cat /mnt/llm/big/generate
 *
 * This file holds the server (its options, its probe, its info file) and
 * the provider's operations on the model's thread (provider.h: the core's
 * loop in fs/model.c calls them); request.c one request. start makes each
 * stream an HTTP request on one curl multi handle, step drives them all
 * with curl_multi_perform/curl_multi_poll; the FUSE threads wake it with
 * curl_multi_wakeup (fs_model_wake).
 *
 * The directory is "loading" until GET /v1/models answered (or failed:
 * then the errors file says why, requests fail on their own with EIO, and
 * the probe is tried again every REMOTE_REPROBE_S seconds).
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remote.h"

#define REMOTE_REPROBE_S 10.0

static const char *const remote_states[] = {
	[FS_MODEL_LOADING] = "loading",
	[FS_MODEL_READY] = "ready",
	[FS_MODEL_FAILED] = "failed",
};

/* ---- options ----------------------------------------------------------- */

/* The key file's first line; a key is one token, no blanks. */
static int remote_read_key(struct remote *r, const char *path, struct err *err)
{
	char buf[REMOTE_KEY_MAX + 2];
	size_t n, a = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return err_set(err, errno, "key_file %s: %s", path,
			       strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	while (isspace((unsigned char)buf[a]))
		a++;
	n = strlen(buf);
	while (n > a && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	if (n == a || n - a > REMOTE_KEY_MAX || strpbrk(buf + a, " \t"))
		return err_set(err, EINVAL,
			       "key_file %s: want one key on its first line",
			       path);
	r->key = strdup(buf + a);
	explicit_bzero(buf, sizeof(buf));
	return r->key ? 0 : err_set(err, ENOMEM, "out of memory");
}

static int remote_parse_url(struct remote *r, const char *url, struct err *err)
{
	size_t n = strlen(url);
	const char *host;

	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
		return err_set(
			err, EINVAL,
			"%s: the URL must start with http:// or https://", url);
	if (strpbrk(url, " \t\r\n"))
		return err_set(err, EINVAL, "%s: blanks in the URL", url);
	/* user:password@ would show in info and errors: keys go in a file */
	host = strchr(url, '/') + 2;
	if (memchr(host, '@', strcspn(host, "/?#")))
		return err_set(err, EINVAL,
			       "credentials in the URL would be shown; "
			       "use key_file=PATH");
	while (n > 8 && url[n - 1] == '/')
		n--;
	/* The OpenAI base URL ends in /v1; the paths here start there. */
	if (n > 11 && !strncmp(url + n - 3, "/v1", 3))
		n -= 3;
	r->url = strndup(url, n);
	return r->url ? 0 : err_set(err, ENOMEM, "out of memory");
}

static int remote_parse_opt(struct remote *r, char *o, struct err *err)
{
	char *end;
	double t;

	if (!strncmp(o, "model=", 6) && o[6]) {
		free(r->model_id);
		r->model_id = strdup(o + 6);
		return r->model_id ? 0 : err_set(err, ENOMEM, "out of memory");
	}
	if (!strncmp(o, "key_file=", 9) && o[9]) {
		if (r->key) {
			explicit_bzero(r->key, strlen(r->key));
			free(r->key);
			r->key = NULL;
		}
		return remote_read_key(r, o + 9, err);
	}
	if (!strncmp(o, "ca_file=", 8) && o[8]) {
		/* absolute: the daemon changes to / when it detaches */
		free(r->ca_file);
		r->ca_file = realpath(o + 8, NULL);
		if (!r->ca_file || access(r->ca_file, R_OK))
			return err_set(err, errno, "ca_file %s: %s", o + 8,
				       strerror(errno));
		return 0;
	}
	if (!strncmp(o, "timeout=", 8)) {
		errno = 0;
		t = strtod(o + 8, &end);
		if (errno || end == o + 8 || *end || !isfinite(t) || t <= 0 ||
		    t > 86400)
			return err_set(
				err, EINVAL,
				"timeout=%s: want seconds, 0 < S <= 86400",
				o + 8);
		r->timeout = t;
		return 0;
	}
	return err_set(err, EINVAL,
		       "%s: unknown; want model=ID, key_file=PATH, "
		       "ca_file=PATH or timeout=S",
		       o);
}

static void remote_free(struct fs_model *fm)
{
	struct remote *r = fm->provider_data;

	if (!r)
		return;
	if (r->key)
		explicit_bzero(r->key, strlen(r->key));
	free(r->key);
	free(r->url);
	free(r->model_id);
	free(r->ca_file);
	fs_buf_free(&r->about);
	pthread_mutex_destroy(&r->wake_lock);
	free(r);
	fm->provider_data = NULL;
	curl_global_cleanup();
}

int fs_remote_attach(struct fs_model *fm, const char *spec, struct err *err)
{
	struct remote *r;
	char *copy, *o, *save = NULL;
	int rc;

	/* Before any thread: curl_global_init is not thread-safe. */
	if (curl_global_init(CURL_GLOBAL_DEFAULT))
		return err_set(err, EIO, "libcurl: cannot initialize");
	r = calloc(1, sizeof(*r));
	copy = strdup(spec);
	if (!r || !copy) {
		free(r);
		free(copy);
		curl_global_cleanup();
		return err_set(err, ENOMEM, "out of memory");
	}
	r->timeout = REMOTE_TIMEOUT_DEFAULT;
	pthread_mutex_init(&r->wake_lock, NULL);
	fm->provider_data = r;
	o = strtok_r(copy, ",", &save);
	rc = o ? remote_parse_url(r, o, err) : err_set(err, EINVAL, "no URL");
	while (!rc && (o = strtok_r(NULL, ",", &save)))
		rc = remote_parse_opt(r, o, err);
	free(copy);
	if (rc) {
		remote_free(fm);
		return rc;
	}
	free(fm->path);
	fm->path = strdup(r->url);
	if (!fm->path) {
		remote_free(fm);
		return err_set(err, ENOMEM, "out of memory");
	}
	fm->provider = &fs_provider_remote;
	return 0;
}

/* ---- the probe: /v1/models, /props ------------------------------------- */

static void remote_ready(struct fs_model *fm)
{
	pthread_mutex_lock(&fm->lock);
	if (fm->state == FS_MODEL_LOADING) {
		fm->state = FS_MODEL_READY;
		fm->load_secs = fs_now() - fm->load_start;
	}
	pthread_mutex_unlock(&fm->lock);
}

static void remote_about_int(struct fs_buf *b, const char *key, json_t *v)
{
	if (json_is_integer(v) && json_integer_value(v) > 0)
		fs_buf_printf(b, "%s %lld\n", key,
			      (long long)json_integer_value(v));
}

/* One string, on one line: what a server says must not add lines. */
static void remote_about_str(struct fs_buf *b, const char *key, json_t *v)
{
	const char *s = json_string_value(v);

	if (s && *s && !strpbrk(s, "\r\n"))
		fs_buf_printf(b, "%s %s\n", key, s);
}

/*
 * The entry of data[] for our model: model=ID, else the first whose id
 * can be a line of info.
 */
static json_t *remote_models_entry(struct remote *r, json_t *root)
{
	json_t *data = json_object_get(root, "data"), *m;
	size_t i;

	json_array_foreach(data, i, m)
	{
		const char *id = json_string_value(json_object_get(m, "id"));

		if (id && *id && !strpbrk(id, "\r\n") &&
		    (!r->model_id || !strcmp(id, r->model_id)))
			return m;
	}
	return NULL;
}

void remote_probe_models(struct fs_model *fm, struct remote_req *q)
{
	struct remote *r = fm->provider_data;
	json_t *root = NULL, *m = NULL, *meta;
	struct fs_buf b = { 0 };
	const char *id;

	r->n_probe--;
	if (!q->error && q->status == 200)
		root = json_loadb(q->in.p ? q->in.p : "", q->in.len, 0, NULL);
	m = root ? remote_models_entry(r, root) : NULL;
	if (!m) {
		pthread_mutex_lock(&fm->lock);
		snprintf(r->probe_error, sizeof(r->probe_error), "%s",
			 q->error || q->status != 200 ? q->msg :
			 r->model_id ? "/v1/models does not list model=" :
				       "/v1/models lists no model");
		pthread_mutex_unlock(&fm->lock);
		if (!q->error && q->status == 200)
			fs_errors_add(&fm->errors, "remote: %s/v1/models: %s",
				      r->url, r->probe_error);
		json_decref(root);
		remote_ready(fm);
		return;
	}
	id = json_string_value(json_object_get(m, "id"));
	meta = json_object_get(m, "meta"); /* llama-server */
	remote_about_str(&b, "owned_by", json_object_get(m, "owned_by"));
	remote_about_int(&b, "parameters", json_object_get(meta, "n_params"));
	remote_about_int(&b, "vocab", json_object_get(meta, "n_vocab"));
	remote_about_int(&b, "context", json_object_get(meta, "n_ctx"));
	remote_about_int(&b, "context", json_object_get(m, "max_model_len"));
	remote_about_int(&b, "context_train",
			 json_object_get(meta, "n_ctx_train"));
	remote_about_int(&b, "embedding", json_object_get(meta, "n_embd"));
	remote_about_int(&b, "model_bytes", json_object_get(meta, "size"));
	pthread_mutex_lock(&fm->lock);
	if (!r->model_id)
		r->model_id = strdup(id);
	fs_buf_free(&r->about);
	r->about = b;
	r->n_params = json_integer_value(json_object_get(meta, "n_params"));
	r->probed = true;
	r->probe_error[0] = '\0';
	pthread_mutex_unlock(&fm->lock);
	json_decref(root);
	/* llama-server says more at /props; others answer 404 there. */
	if (remote_req_new(fm, REMOTE_PROPS, NULL))
		remote_ready(fm);
	else
		r->n_probe++;
}

void remote_probe_props(struct fs_model *fm, struct remote_req *q)
{
	struct remote *r = fm->provider_data;
	json_t *root = NULL, *gen;
	struct fs_buf b = { 0 };
	const char *tmpl;

	r->n_probe--;
	if (!q->error && q->status == 200)
		root = json_loadb(q->in.p ? q->in.p : "", q->in.len, 0, NULL);
	if (root) {
		gen = json_object_get(root, "default_generation_settings");
		remote_about_int(&b, "slots",
				 json_object_get(root, "total_slots"));
		remote_about_int(&b, "slot_context",
				 json_object_get(gen, "n_ctx"));
		tmpl = json_string_value(
			json_object_get(root, "chat_template"));
		fs_buf_printf(&b, "chat_template %s\n",
			      tmpl && *tmpl ? "server" : "none");
		remote_about_str(&b, "server_file",
				 json_object_get(root, "model_path"));
		remote_about_str(&b, "server_build",
				 json_object_get(root, "build_info"));
		pthread_mutex_lock(&fm->lock);
		if (b.len)
			fs_buf_add(&r->about, b.p, b.len);
		pthread_mutex_unlock(&fm->lock);
	}
	fs_buf_free(&b);
	json_decref(root);
	remote_ready(fm);
}

static void remote_probe(struct fs_model *fm)
{
	struct remote *r = fm->provider_data;

	r->probe_at = fs_now();
	if (!remote_req_new(fm, REMOTE_MODELS, NULL))
		r->n_probe++;
	else
		remote_ready(fm);
}

/* ---- info and models --------------------------------------------------- */

static int remote_info(struct fs_model *fm, struct fs_buf *b)
{
	struct remote *r = fm->provider_data;
	int rc;

	pthread_mutex_lock(&fm->lock);
	rc = fs_buf_printf(b,
			   "name %s\nstate %s\nbackend remote %s\n"
			   "model %s\n",
			   fm->name, remote_states[fm->state], r->url,
			   r->model_id ? r->model_id : "-");
	if (!rc && r->about.len)
		rc = fs_buf_add(b, r->about.p, r->about.len);
	if (!rc && r->probe_error[0])
		rc = fs_buf_printf(b, "server_error %s\n", r->probe_error);
	if (!rc)
		rc = fs_buf_printf(b, "api_key %s\ntimeout_s %g\n",
				   r->key ? "set" : "none", r->timeout);
	pthread_mutex_unlock(&fm->lock);
	return rc;
}

static int remote_models_line(struct fs_model *fm, struct fs_buf *b)
{
	struct remote *r = fm->provider_data;
	char params[32] = "-";
	enum fs_model_state st;
	uint64_t n;

	pthread_mutex_lock(&fm->lock);
	st = fm->state;
	n = r->n_params;
	pthread_mutex_unlock(&fm->lock);
	if (n >= 1000000000ull)
		snprintf(params, sizeof(params), "%.1fB", n / 1e9);
	else if (n >= 1000000ull)
		snprintf(params, sizeof(params), "%.1fM", n / 1e6);
	else if (n)
		snprintf(params, sizeof(params), "%.0fK", n / 1e3);
	return fs_buf_printf(b, "%s remote %s - %s remote:%s\n", fm->name,
			     params, remote_states[st], r->url);
}

/* ---- the model's thread ------------------------------------------------ */

static void remote_wake(struct fs_model *fm)
{
	struct remote *r = fm->provider_data;

	if (!r)
		return;
	pthread_mutex_lock(&r->wake_lock);
	if (r->multi)
		curl_multi_wakeup(r->multi);
	pthread_mutex_unlock(&r->wake_lock);
}

/* A stream the thread took: a request, or its end now. */
static void remote_start(struct fs_model *fm, struct fs_stream *s)
{
	static const enum remote_kind kinds[FS_GEN_KINDS] = {
		[FS_GEN_GENERATE] = REMOTE_COMPLETION,
		[FS_GEN_CHAT] = REMOTE_CHAT,
		[FS_GEN_TOKENIZE] = REMOTE_TOKENIZE,
	};

	remote_req_new(fm, kinds[s->kind], s);
}

static void remote_finished(struct remote *r)
{
	struct remote_req *q;
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(r->multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		if (curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
				      (char **)&q) == CURLE_OK &&
		    q)
			remote_req_done(q, msg->data.result);
	}
}

/*
 * Requests whose reader went away end now (the server sees the close),
 * those that heard nothing for r->timeout fail; returns the milliseconds
 * until the next such deadline, at most 1000.
 */
static int remote_check(struct remote *r)
{
	struct remote_req *q, *next;
	double now = fs_now(), left, wait = 1.0;

	for (q = r->reqs; q; q = next) {
		next = q->next;
		if (q->s && fs_stream_cancelled(q->s)) {
			remote_req_abort(q, -ECANCELED);
			continue;
		}
		left = remote_req_expire(q, now, r->timeout);
		if (left > 0 && left < wait)
			wait = left;
	}
	return (int)(wait * 1000) + 1;
}

/* Held while the probe runs: prompts wait for it, as for a local load. */
static void remote_start_held(struct fs_model *fm)
{
	struct remote *r = fm->provider_data;
	struct fs_stream *s;

	if (fs_model_state(fm) == FS_MODEL_LOADING)
		return;
	while ((s = r->held)) {
		r->held = s->next;
		fs_errors_uid = s->uid;
		remote_start(fm, s);
	}
}

static void remote_load(struct fs_model *fm)
{
	struct remote *r = fm->provider_data;

	fm->load_start = fs_now();
	pthread_mutex_lock(&r->wake_lock);
	r->multi = curl_multi_init();
	pthread_mutex_unlock(&r->wake_lock);
	if (!r->multi) {
		fs_errors_add(&fm->errors, "remote: libcurl: no multi handle");
		pthread_mutex_lock(&fm->lock);
		snprintf(fm->load_error, sizeof(fm->load_error),
			 "libcurl: no multi handle");
		fm->state = FS_MODEL_FAILED;
		pthread_mutex_unlock(&fm->lock);
	} else {
		remote_probe(fm);
	}
}

/* A submitted stream: its request now, or once the probe answered. */
static void remote_take(struct fs_model *fm, struct fs_stream *s)
{
	struct remote *r = fm->provider_data;
	struct fs_stream **pp;

	for (pp = &r->held; *pp; pp = &(*pp)->next)
		;
	s->next = NULL;
	*pp = s;
	remote_start_held(fm);
}

/* The transfers of every request, waiting at most until a deadline. */
static void remote_step(struct fs_model *fm)
{
	struct remote *r = fm->provider_data;
	int running;

	remote_start_held(fm);
	if (!r->multi)
		return;
	if (!r->probed && !r->n_probe &&
	    fs_now() - r->probe_at > REMOTE_REPROBE_S)
		remote_probe(fm);
	curl_multi_perform(r->multi, &running);
	remote_finished(r);
	curl_multi_poll(r->multi, NULL, 0, remote_check(r), NULL);
}

/* fm->lock held: without a multi handle there is nothing to wait on. */
static bool remote_idle(struct fs_model *fm)
{
	struct remote *r = fm->provider_data;

	return !r->multi && !r->held;
}

static unsigned remote_cancel(struct fs_model *fm)
{
	struct remote *r = fm->provider_data;
	struct remote_req *q;
	struct fs_stream *s;
	unsigned cut = 0;
	bool live;

	while ((q = r->reqs)) {
		live = q->s && !fs_stream_cancelled(q->s);
		cut += live;
		remote_req_abort(q, live ? -EIO : -ECANCELED);
	}
	while ((s = r->held)) {
		r->held = s->next;
		cut += !fs_stream_cancelled(s);
		fs_stream_finish(s, -EIO);
		fs_stream_cancel(s);
		remote_start(fm, s); /* ends it at once: cancelled */
	}
	pthread_mutex_lock(&r->wake_lock);
	curl_multi_cleanup(r->multi);
	r->multi = NULL;
	pthread_mutex_unlock(&r->wake_lock);
	return cut;
}

const struct fs_provider fs_provider_remote = {
	.name = "remote",
	.load = remote_load,
	.start = remote_take,
	.step = remote_step,
	.idle = remote_idle,
	.cancel = remote_cancel,
	.wake = remote_wake,
	.info = remote_info,
	.models_line = remote_models_line,
	.free = remote_free,
};
