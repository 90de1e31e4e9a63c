// SPDX-License-Identifier: MIT
/*
 * One directory per model. The mount comes up before any model is loaded:
 * each model's scheduler thread loads it (state LOADING, progress in
 * `status`), then serves generations. A model that fails to load stays a
 * directory: its state says FAILED and its errors file says why.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "store.h"

void fs_model_slug(const char *path, char *out, size_t cap)
{
	const char *base = strrchr(path, '/');
	size_t n = 0, len;

	base = base ? base + 1 : path;
	len = strlen(base);
	if (len >= 5 && !strcasecmp(base + len - 5, ".gguf"))
		len -= 5;
	for (size_t i = 0; i < len && n + 1 < cap; i++) {
		unsigned char c = base[i];

		if (isalnum(c) || c == '.' || c == '_' || c == '-')
			out[n++] = tolower(c);
		else
			out[n++] = '-';
	}
	out[n] = '\0';
	if (!n || !strcmp(out, ".") || !strcmp(out, ".."))
		snprintf(out, cap, "model");
}

bool fs_model_name_ok(struct fs *fs, const char *name)
{
	static const char *const reserved[] = { "models", "status", "metrics",
						".",	  "..",	    "" };

	if (strchr(name, '/') || strlen(name) > 200)
		return false;
	for (size_t i = 0; i < sizeof(reserved) / sizeof(*reserved); i++)
		if (!strcmp(name, reserved[i]))
			return false;
	for (unsigned i = 0; i < fs->n_models; i++)
		if (!fs->models[i]->gone && !strcmp(fs->models[i]->name, name))
			return false;
	return true;
}

int fs_model_add(struct fs *fs, struct fs_model *fm)
{
	unsigned i;

	pthread_mutex_lock(&fs->models_lock);
	i = fs->n_models;
	if (i < FS_MODELS_MAX) {
		fm->idx = i;
		fs->models[i] = fm;
		fs->n_models = i + 1; /* after the slot: readers take no lock */
	}
	pthread_mutex_unlock(&fs->models_lock);
	return i < FS_MODELS_MAX ? 0 : -ENOSPC;
}

struct fs_model *fs_model_get(struct fs *fs, unsigned i, bool gone_too)
{
	struct fs_model *fm = i < fs->n_models ? fs->models[i] : NULL;

	if (!fm)
		return NULL;
	pthread_mutex_lock(&fs->models_lock);
	if (fm->gone && (!gone_too || fm->retired))
		fm = NULL;
	else
		fm->users++;
	pthread_mutex_unlock(&fs->models_lock);
	return fm;
}

void fs_model_put(struct fs_model *fm)
{
	if (!fm)
		return;
	pthread_mutex_lock(&fm->fs->models_lock);
	if (!--fm->users && fm->gone)
		pthread_cond_broadcast(&fm->fs->models_cond);
	pthread_mutex_unlock(&fm->fs->models_lock);
}

bool fs_model_gone(struct fs_model *fm)
{
	bool gone;

	pthread_mutex_lock(&fm->fs->models_lock);
	gone = fm->gone;
	pthread_mutex_unlock(&fm->fs->models_lock);
	return gone;
}

struct engine_model *fs_model_engine(struct fs_model *fm)
{
	const struct fs_provider *p = fm->provider;

	return p->engine_model ? p->engine_model(fm) : NULL;
}

int fs_model_new(struct fs *fs, struct fs_model **out, const char *name,
		 const char *path, struct err *err)
{
	struct fs_model *fm = calloc(1, sizeof(*fm));

	*out = NULL;
	if (!fm)
		return err_set(err, ENOMEM, "out of memory");
	fm->fs = fs;
	fm->name = strdup(name);
	fm->path = strdup(path);
	if (!fm->name || !fm->path) {
		free(fm->name);
		free(fm->path);
		free(fm);
		return err_set(err, ENOMEM, "out of memory");
	}
	pthread_mutex_init(&fm->lock, NULL);
	pthread_cond_init(&fm->wake, NULL);
	pthread_rwlock_init(&fm->weights_lock, NULL);
	fs_errors_init(&fm->errors);
	fs_config_defaults(&fm->config);
	fm->state = FS_MODEL_LOADING;
	fm->provider = &fs_provider_local;
	*out = fm;
	return 0;
}

/* ---- the model's thread ------------------------------------------------ */

static void model_jobs(struct fs_model *fm, struct fs_job *jobs, bool cancel)
{
	while (jobs) {
		struct fs_job *job = jobs;

		jobs = job->next;
		fs_errors_uid = fuse_req_ctx(job->req)->uid;
		job->run(fm, job, cancel || fm->state != FS_MODEL_READY);
	}
}

/*
 * The unmount: what is in flight ends now. A reader still there gets
 * EIO, never an EOF that would pass for the whole answer.
 */
static void model_end(struct fs_model *fm, struct fs_stream *queue,
		      struct fs_job *jobs)
{
	const struct fs_provider *p = fm->provider;
	struct fs_stream *s;
	unsigned cut = 0;

	fs_errors_uid = FS_UID_DAEMON;
	model_jobs(fm, jobs, true);
	while ((s = queue)) {
		queue = s->next;
		cut += !fs_stream_cancelled(s);
		fs_stream_finish(s, -EIO);
		fs_stream_cancel(s);
		p->start(fm, s);
	}
	cut += p->cancel(fm);
	if (cut)
		fs_errors_add(&fm->errors,
			      "generate: %u answers cut short by "
			      "the unmount (their readers get EIO)",
			      cut);
}

/*
 * The model's one thread, whatever its provider: load, then take what the
 * FUSE threads queued, hand it over, let the provider step; sleep while
 * neither has anything to do (the provider's background work first).
 */
static void *model_main(void *arg)
{
	struct fs_model *fm = arg;
	const struct fs_provider *p = fm->provider;
	bool background = p->background != NULL;
	struct fs_stream *queue, *s;
	struct fs_job *jobs;

	p->load(fm);
	for (;;) {
		pthread_mutex_lock(&fm->lock);
		while (!fm->stop && !fm->queue && !fm->jobs && p->idle(fm)) {
			if (!background) {
				pthread_cond_wait(&fm->wake, &fm->lock);
				continue;
			}
			pthread_mutex_unlock(&fm->lock);
			background = p->background(fm);
			pthread_mutex_lock(&fm->lock);
		}
		queue = fm->queue;
		jobs = fm->jobs;
		fm->queue = NULL;
		fm->jobs = NULL;
		pthread_mutex_unlock(&fm->lock);
		if (fm->stop)
			break;
		model_jobs(fm, jobs, false);
		while ((s = queue)) {
			queue = s->next;
			fs_errors_uid = s->uid;
			p->start(fm, s);
		}
		p->step(fm);
	}
	model_end(fm, queue, jobs);
	return NULL;
}

int fs_model_start(struct fs_model *fm, struct err *err)
{
	int rc = pthread_create(&fm->thread, NULL, model_main, fm);

	if (rc)
		return err_set(err, rc, "%s: cannot start its thread",
			       fm->name);
	fm->thread_started = true;
	return 0;
}

void fs_model_stop(struct fs_model *fm)
{
	pthread_mutex_lock(&fm->lock);
	fm->stop = true;
	pthread_cond_broadcast(&fm->wake);
	pthread_mutex_unlock(&fm->lock);
	fs_model_wake(fm);
	if (fm->thread_started)
		pthread_join(fm->thread, NULL);
	fm->thread_started = false;
}

void fs_model_free(struct fs_model *fm)
{
	if (!fm)
		return;
	fs_model_stop(fm);
	fs_session_free_all(fm);
	fm->provider->free(fm);
	fs_config_free(&fm->config);
	fs_errors_destroy(&fm->errors);
	pthread_rwlock_destroy(&fm->weights_lock);
	pthread_cond_destroy(&fm->wake);
	pthread_mutex_destroy(&fm->lock);
	fs_store_item_free(fm->item);
	free(fm->name);
	free(fm->path);
	free(fm);
}

void fs_model_submit(struct fs_model *fm, struct fs_stream *s)
{
	struct fs_stream **pp;

	pthread_mutex_lock(&fm->lock);
	if (fm->stop) {
		/*
		 * Unmounting: no new generation. Its reader gets EIO, not an
		 * EOF that would pass for an empty answer.
		 */
		pthread_mutex_unlock(&fm->lock);
		fs_stream_finish(s, -EIO);
		fs_stream_put(s);
		return;
	}
	s->next = NULL;
	for (pp = &fm->queue; *pp; pp = &(*pp)->next)
		;
	*pp = s;
	s->id = ++fm->next_stream;
	if (s->session && s->kind != FS_GEN_TOKENIZE) {
		/* a turn: a snapshot restore waits for its end (kvsnap.c) */
		s->session->turns++;
		s->is_turn = true;
	}
	if (s->kind != FS_GEN_TOKENIZE)
		fm->stats.requests++;
	pthread_cond_signal(&fm->wake);
	pthread_mutex_unlock(&fm->lock);
	fs_model_wake(fm);
}

void fs_model_job(struct fs_model *fm, struct fs_job *job)
{
	struct fs_job **pp;

	pthread_mutex_lock(&fm->lock);
	if (fm->stop) {
		pthread_mutex_unlock(&fm->lock);
		job->run(fm, job, true);
		return;
	}
	job->next = NULL;
	for (pp = &fm->jobs; *pp; pp = &(*pp)->next)
		;
	*pp = job;
	pthread_cond_signal(&fm->wake);
	pthread_mutex_unlock(&fm->lock);
	fs_model_wake(fm);
}

void fs_model_wake(struct fs_model *fm)
{
	if (fm->provider->wake)
		fm->provider->wake(fm);
}

enum fs_model_state fs_model_state(struct fs_model *fm)
{
	enum fs_model_state st;

	pthread_mutex_lock(&fm->lock);
	st = fm->state;
	pthread_mutex_unlock(&fm->lock);
	return st;
}
