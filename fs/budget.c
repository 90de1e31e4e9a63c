// SPDX-License-Identifier: MIT
/*
 * The daemon's one memory budget (engine_budget, engine/budget.c): every
 * model's KV pool draws on it, and so do the bytes the daemon keeps for
 * its users: prompts and snapshots written and not yet taken, answers not
 * yet read. So the daemon holds at most the budget, however many models
 * it serves and whatever they are asked (Documentation/reliability.md).
 *
 * The total is fixed once, when the daemon starts: --mem-budget, or three
 * quarters of the memory available then, less the weights every model is
 * about to load (the size of its files) and 512 MiB of headroom: the memory
 * available after the weights are loaded, measured before the loads so
 * that it does not depend on their order.
 *
 * Waiting for room across models: a model whose next generation does not
 * fit (its own kept caches dropped already) is "starved". It bumps
 * fs.budget_pressure, and every other scheduler drops one kept cache per
 * bump; each release of the budget makes the waker thread wake the
 * starved schedulers, which try again. The release hook may run under a
 * model's lock or the KV pool's, so it only sets a flag under fs.wake_lock
 * (which nests under both) and leaves the waking to the waker.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

/*
 * The bytes a local model's load will take: the size of its files (the
 * tensors and a little metadata), all the parts of a split GGUF
 * (NAME-00001-of-0000N.gguf). Only stat(2): the daemon must come up even
 * when a model's file is slow to open (a network file system, a file
 * still being written); the load reports that file's errors itself.
 */
static uint64_t budget_weights(struct fs_model *fm)
{
	/* "-00001-of-00003.gguf", as llama.cpp's gguf-split names parts */
	const size_t tail = 20;
	const char *p = fm->path;
	size_t len = strlen(p);
	unsigned first, parts;
	struct stat st;
	uint64_t n;
	char *part;

	if (fm->provider != &fs_provider_local || stat(p, &st))
		return 0;
	n = (uint64_t)st.st_size;
	if (len <= tail ||
	    sscanf(p + len - tail, "-%5u-of-%5u.gguf", &first, &parts) != 2 ||
	    first != 1 || parts < 2 || !(part = strdup(p)))
		return n;
	for (unsigned i = 2; i <= parts; i++) {
		snprintf(part + len - tail, tail + 1, "-%05u-of-%05u.gguf", i,
			 parts);
		if (stat(part, &st) == 0)
			n += (uint64_t)st.st_size;
	}
	free(part);
	return n;
}

/* From any thread, maybe under a model's or the KV pool's lock. */
static void budget_released(void *arg)
{
	struct fs *fs = arg;

	if (!fs->budget_starved)
		return;
	pthread_mutex_lock(&fs->wake_lock);
	fs->budget_kick = true;
	pthread_cond_signal(&fs->wake_cond);
	pthread_mutex_unlock(&fs->wake_lock);
}

int fs_budget_start(struct fs *fs, struct err *err)
{
	uint64_t total = fs->opt.mem_budget, weights = 0;
	int rc;

	if (!total) {
		for (unsigned i = 0; i < fs->n_models; i++)
			weights += budget_weights(fs->models[i]);
		total = engine_budget_default(engine_mem_available(), weights);
	}
	rc = engine_budget_new(&fs->budget, total, err);
	if (!rc)
		engine_budget_notify(fs->budget, budget_released, fs);
	return rc;
}

void fs_budget_stop(struct fs *fs)
{
	engine_budget_free(fs->budget);
	fs->budget = NULL;
}

void fs_budget_wake_models(struct fs *fs)
{
	for (unsigned i = 0; i < fs->n_models; i++) {
		struct fs_model *fm = fs->models[i];

		pthread_mutex_lock(&fm->lock);
		fm->budget_kicks++;
		pthread_cond_signal(&fm->wake);
		pthread_mutex_unlock(&fm->lock);
	}
}

void fs_budget_force(struct fs *fs, uint64_t n)
{
	if (fs->budget && n)
		engine_budget_force(fs->budget, ENGINE_BUDGET_BUFFERS, n);
}

void fs_budget_release(struct fs *fs, uint64_t n)
{
	if (fs->budget && n)
		engine_budget_release(fs->budget, ENGINE_BUDGET_BUFFERS, n);
}

int fs_budget_charge(struct fs *fs, uint64_t n)
{
	if (!fs->budget || !n)
		return 0;
	return engine_budget_charge(fs->budget, ENGINE_BUDGET_BUFFERS, n) ?
		       -ENOMEM :
		       0;
}

int fs_budget_text(struct fs *fs, struct fs_buf *b)
{
	struct engine_budget_stats st;
	int rc;

	if (!fs->budget)
		return 0;
	engine_budget_stats(fs->budget, &st);
	rc = fs_buf_printf(b,
			   "memory_budget_bytes %llu\n"
			   "memory_budget_reserve_bytes %llu\n"
			   "memory_budget_kv_bytes %llu\n"
			   "memory_budget_kv_peak_bytes %llu\n"
			   "memory_budget_buffers_bytes %llu\n"
			   "memory_budget_buffers_peak_bytes %llu\n",
			   (unsigned long long)st.total,
			   (unsigned long long)st.reserve,
			   (unsigned long long)st.used[ENGINE_BUDGET_KV],
			   (unsigned long long)st.peak[ENGINE_BUDGET_KV],
			   (unsigned long long)st.used[ENGINE_BUDGET_BUFFERS],
			   (unsigned long long)st.peak[ENGINE_BUDGET_BUFFERS]);
	for (unsigned i = 0; i < fs->n_models && !rc; i++) {
		struct fs_model *fm = fs->models[i];
		struct engine_kv_stats kv;

		if (fs_model_state(fm) != FS_MODEL_READY ||
		    !fm->provider->kv_stats || !fm->provider->kv_stats(fm, &kv))
			continue;
		rc = fs_buf_printf(b, "memory_budget_model %s %llu %llu\n",
				   fm->name, (unsigned long long)kv.committed,
				   (unsigned long long)kv.budget);
	}
	return rc;
}
