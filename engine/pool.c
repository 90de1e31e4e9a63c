// SPDX-License-Identifier: MIT
/*
 * The pool: one job at a time, published under a mutex with a generation
 * number; each worker runs its share and the last one to finish wakes the
 * caller. Jobs are short (one matmul), so there is no queue.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

struct engine_pool {
	pthread_mutex_t lock;
	pthread_cond_t start;     /* workers wait here for a new generation */
	pthread_cond_t done;      /* the caller waits here for pending == 0 */
	uint64_t generation;      /* protected by lock */
	uint32_t pending;         /* workers still running; protected by lock */
	bool stop;                /* protected by lock */
	engine_pool_fn fn;
	void *arg;
	uint32_t n_threads;       /* the caller and the workers */
	uint32_t n_started;
	pthread_t *workers;
};

struct pool_worker {
	struct engine_pool *p;
	uint32_t ith;
};

static void *pool_main(void *varg)
{
	struct engine_pool *p = ((struct pool_worker *)varg)->p;
	uint32_t ith = ((struct pool_worker *)varg)->ith;
	uint64_t seen = 0;

	free(varg);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->stop && p->generation == seen)
			pthread_cond_wait(&p->start, &p->lock);
		if (p->stop)
			break;
		seen = p->generation;
		pthread_mutex_unlock(&p->lock);
		p->fn(p->arg, ith, p->n_threads);
		pthread_mutex_lock(&p->lock);
		if (--p->pending == 0)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int engine_pool_new(struct engine_pool **out, uint32_t threads,
		struct err *err)
{
	struct engine_pool *p;
	uint32_t i;

	*out = NULL;
	if (threads > 256)
		threads = 256;
	p = calloc(1, sizeof(*p));
	if (!p)
		return err_set(err, ENOMEM, "out of memory");
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->start, NULL);
	pthread_cond_init(&p->done, NULL);
	p->n_threads = threads > 1 ? threads : 1;
	if (p->n_threads > 1) {
		p->workers = calloc(p->n_threads - 1, sizeof(*p->workers));
		if (!p->workers) {
			engine_pool_free(p);
			return err_set(err, ENOMEM, "out of memory");
		}
	}
	for (i = 1; i < p->n_threads; i++) {
		struct pool_worker *w = malloc(sizeof(*w));
		int ret;

		if (!w) {
			engine_pool_free(p);
			return err_set(err, ENOMEM, "out of memory");
		}
		w->p = p;
		w->ith = i;
		ret = pthread_create(&p->workers[i - 1], NULL, pool_main, w);
		if (ret) {
			free(w);
			engine_pool_free(p);
			return err_set(err, ret,
				"cannot start a worker thread: %s",
				strerror(ret));
		}
		p->n_started++;
	}
	*out = p;
	return 0;
}

void engine_pool_free(struct engine_pool *p)
{
	uint32_t i;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->start);
	pthread_mutex_unlock(&p->lock);
	for (i = 0; i < p->n_started; i++)
		pthread_join(p->workers[i], NULL);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->start);
	pthread_mutex_destroy(&p->lock);
	free(p->workers);
	free(p);
}

uint32_t engine_pool_size(const struct engine_pool *p)
{
	return p ? p->n_threads : 1;
}

void engine_pool_run(struct engine_pool *p, engine_pool_fn fn, void *arg)
{
	if (!p || p->n_threads == 1) {
		fn(arg, 0, 1);
		return;
	}
	pthread_mutex_lock(&p->lock);
	p->fn = fn;
	p->arg = arg;
	p->pending = p->n_threads - 1;
	p->generation++;
	pthread_cond_broadcast(&p->start);
	pthread_mutex_unlock(&p->lock);
	fn(arg, 0, p->n_threads);
	pthread_mutex_lock(&p->lock);
	while (p->pending)
		pthread_cond_wait(&p->done, &p->lock);
	pthread_mutex_unlock(&p->lock);
}
