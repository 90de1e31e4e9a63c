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

int fs_model_start(struct fs_model *fm, struct err *err)
{
	int rc = pthread_create(&fm->thread, NULL, fm->provider->serve, fm);

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
	if (fm->hash_started)
		pthread_join(fm->hash_thread, NULL);
	fm->hash_started = false;
}

void fs_model_free(struct fs_model *fm)
{
	if (!fm)
		return;
	fs_model_stop(fm);
	fs_session_free_all(fm);
	if (fm->provider->free)
		fm->provider->free(fm);
	engine_model_free(fm->m);
	fs_config_free(&fm->config);
	fs_errors_destroy(&fm->errors);
	pthread_rwlock_destroy(&fm->weights_lock);
	pthread_cond_destroy(&fm->wake);
	pthread_mutex_destroy(&fm->lock);
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
