// SPDX-License-Identifier: MIT
/*
 * One memory budget that several holders draw on (engine.h): the KV pools
 * of every model a daemon serves, and the bytes the daemon keeps besides
 * (prompts, snapshots, answers). It only counts: a holder charges before
 * it allocates and releases after it frees, so that the sum of what all of
 * them hold stays under one number, whatever each of them does.
 *
 * Two uses, so that a full KV cache never stops a user from writing a
 * prompt: KV charges must leave `reserve` bytes free, buffer charges may
 * take the whole total. A buffer that already exists (an answer's text,
 * which a running generation cannot refuse) is forced in, over the total
 * if need be; the next KV charge then waits for it to go.
 *
 *   struct engine_budget *b;
 *   engine_budget_new(&b, 8ull << 30, NULL);
 *   ... engine_model_options.budget = b for every model ...
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine.h"

struct engine_budget {
	pthread_mutex_t lock; /* a leaf: nothing is called under it */
	uint64_t total;
	uint64_t reserve;		   /* KV charges leave this free */
	uint64_t used[ENGINE_BUDGET_USES]; /* by lock */
	uint64_t peak[ENGINE_BUDGET_USES]; /* the most used held; lock */
	void (*released)(void *arg);	   /* set before any charge */
	void *arg;
};

/* what the default budget leaves to everything else */
#define BUDGET_HEADROOM (512ull << 20)
#define BUDGET_MIN (64ull << 20)

uint64_t engine_mem_available(void)
{
	unsigned long long kb = 0;
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

uint64_t engine_budget_default(uint64_t available, uint64_t weights)
{
	uint64_t b = available > weights + BUDGET_HEADROOM ?
			     (available - weights - BUDGET_HEADROOM) / 4 * 3 :
			     0;

	return b < BUDGET_MIN ? BUDGET_MIN : b;
}

int engine_budget_new(struct engine_budget **out, uint64_t total,
		      struct err *err)
{
	struct engine_budget *b = calloc(1, sizeof(*b));
	int ret;

	*out = NULL;
	if (!b)
		return err_set(err, ENOMEM, "out of memory");
	if ((ret = pthread_mutex_init(&b->lock, NULL))) {
		free(b);
		return err_set(err, ret, "memory budget: lock: %d", ret);
	}
	b->total = total;
	/* a sixteenth for prompts and answers, 1 GiB at most */
	b->reserve = total / 16 < (1ull << 30) ? total / 16 : 1ull << 30;
	*out = b;
	return 0;
}

void engine_budget_free(struct engine_budget *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->lock);
	free(b);
}

void engine_budget_notify(struct engine_budget *b, void (*released)(void *),
			  void *arg)
{
	pthread_mutex_lock(&b->lock);
	b->released = released;
	b->arg = arg;
	pthread_mutex_unlock(&b->lock);
}

/* The most one use may ever hold. */
static uint64_t budget_limit(const struct engine_budget *b,
			     enum engine_budget_use use)
{
	return use == ENGINE_BUDGET_KV ? b->total - b->reserve : b->total;
}

uint64_t engine_budget_limit(struct engine_budget *b,
			     enum engine_budget_use use)
{
	return budget_limit(b, use); /* fixed at creation: no lock */
}

/* b->lock held */
static void budget_add(struct engine_budget *b, enum engine_budget_use use,
		       uint64_t n)
{
	b->used[use] += n;
	if (b->used[use] > b->peak[use])
		b->peak[use] = b->used[use];
}

int engine_budget_charge(struct engine_budget *b, enum engine_budget_use use,
			 uint64_t n)
{
	uint64_t limit = budget_limit(b, use), all = 0;
	int ret = 0;

	if (n > limit)
		return -ENOSPC;
	pthread_mutex_lock(&b->lock);
	for (int u = 0; u < ENGINE_BUDGET_USES; u++)
		all += b->used[u];
	if (all > limit || n > limit - all)
		ret = -EAGAIN;
	else
		budget_add(b, use, n);
	pthread_mutex_unlock(&b->lock);
	return ret;
}

void engine_budget_force(struct engine_budget *b, enum engine_budget_use use,
			 uint64_t n)
{
	pthread_mutex_lock(&b->lock);
	budget_add(b, use, n);
	pthread_mutex_unlock(&b->lock);
}

void engine_budget_release(struct engine_budget *b, enum engine_budget_use use,
			   uint64_t n)
{
	void (*released)(void *);
	void *arg;

	if (!n)
		return;
	pthread_mutex_lock(&b->lock);
	b->used[use] = b->used[use] > n ? b->used[use] - n : 0;
	released = b->released;
	arg = b->arg;
	pthread_mutex_unlock(&b->lock);
	if (released)
		released(arg);
}

void engine_budget_stats(struct engine_budget *b,
			 struct engine_budget_stats *st)
{
	pthread_mutex_lock(&b->lock);
	st->total = b->total;
	st->reserve = b->reserve;
	for (int u = 0; u < ENGINE_BUDGET_USES; u++) {
		st->used[u] = b->used[u];
		st->peak[u] = b->peak[u];
	}
	pthread_mutex_unlock(&b->lock);
}
