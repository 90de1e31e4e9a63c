/* SPDX-License-Identifier: MIT */
/*
 * Which tensors are in yet. Reads complete out of order within the window
 * in flight; each file has a mark below which every byte has arrived, and
 * the ranges that arrived beyond it wait in a short sorted list until the
 * gap closes. A tensor is ready once the mark passes its end: its ready
 * flag is set (release) and waiters are woken.
 *
 * This is what lets an async load overlap the disk with the first forward
 * pass: GGUF files hold the token embedding and blk.0 first, so the first
 * layers are ready long before the last ones.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "weights_internal.h"

static int arrival_cmp(const void *a, const void *b, void *arg)
{
	const struct io_gguf *g = arg;
	const struct io_gguf_tensor *x = &g->tensors[*(const uint64_t *)a];
	const struct io_gguf_tensor *y = &g->tensors[*(const uint64_t *)b];

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return 0;
}

int io_arrival_init(struct io_weights *w, struct err *err)
{
	const struct io_gguf *g = w->g;
	uint64_t i;

	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->by_offset = malloc((g->n_tensors + 1) * sizeof(*w->by_offset));
	if (!w->by_offset)
		return err_set(err, ENOMEM,
			       "out of memory for the tensor order");
	for (i = 0; i < g->n_tensors; i++)
		w->by_offset[i] = i;
	qsort_r(w->by_offset, g->n_tensors, sizeof(*w->by_offset), arrival_cmp,
		(void *)g);
	return 0;
}

void io_arrival_destroy(struct io_weights *w)
{
	if (!w->by_offset)
		return;
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w->by_offset);
	free(w->pending);
	w->by_offset = NULL;
}

void io_arrival_file_begin(struct io_weights *w, uint32_t f, uint64_t mark)
{
	pthread_mutex_lock(&w->mu);
	w->mark = mark;
	w->n_pending = 0;
	w->cursor = w->lf[f].first;
	w->cursor_end = w->lf[f].first + w->lf[f].n;
	pthread_mutex_unlock(&w->mu);
}

/* Keep [s, e) in the sorted, merged list; false if out of memory. */
static bool arrival_pending_add(struct io_weights *w, uint64_t s, uint64_t e)
{
	struct io_span *p;
	uint32_t i = 0, j;

	while (i < w->n_pending && w->pending[i].end < s)
		i++;
	if (i < w->n_pending && w->pending[i].start <= e) {
		/* overlaps or touches span i: grow it, absorb the ones after */
		if (s < w->pending[i].start)
			w->pending[i].start = s;
		if (e > w->pending[i].end)
			w->pending[i].end = e;
		for (j = i + 1; j < w->n_pending &&
				w->pending[j].start <= w->pending[i].end;
		     j++)
			if (w->pending[j].end > w->pending[i].end)
				w->pending[i].end = w->pending[j].end;
		memmove(&w->pending[i + 1], &w->pending[j],
			(w->n_pending - j) * sizeof(*w->pending));
		w->n_pending -= j - i - 1;
		return true;
	}
	if (w->n_pending == w->cap_pending) {
		p = realloc(w->pending, (w->cap_pending * 2 + 16) * sizeof(*p));
		if (!p)
			return false;
		w->pending = p;
		w->cap_pending = w->cap_pending * 2 + 16;
	}
	memmove(&w->pending[i + 1], &w->pending[i],
		(w->n_pending - i) * sizeof(*w->pending));
	w->pending[i] = (struct io_span){ s, e };
	w->n_pending++;
	return true;
}

/* The mark after it moved: merge what waits, wake the tensors below it. */
static void arrival_advance(struct io_weights *w)
{
	const struct io_gguf_tensor *t;
	bool woke = false;

	while (w->n_pending && w->pending[0].start <= w->mark) {
		if (w->pending[0].end > w->mark)
			w->mark = w->pending[0].end;
		memmove(&w->pending[0], &w->pending[1],
			(w->n_pending - 1) * sizeof(*w->pending));
		w->n_pending--;
	}
	while (w->cursor < w->cursor_end) {
		t = &w->g->tensors[w->by_offset[w->cursor]];
		if (t->offset + t->bytes > w->mark)
			break;
		__atomic_store_n(&w->pl[w->by_offset[w->cursor]].ready, 1,
				 __ATOMIC_RELEASE);
		w->cursor++;
		woke = true;
	}
	if (woke)
		pthread_cond_broadcast(&w->cv);
}

void io_arrival_skip(struct io_weights *w, uint64_t to)
{
	pthread_mutex_lock(&w->mu);
	if (to > w->mark) {
		w->mark = to;
		arrival_advance(w);
	}
	pthread_mutex_unlock(&w->mu);
}

void io_arrival_done(void *arg, uint64_t off, uint64_t n)
{
	struct io_weights *w = arg;
	uint64_t total = w->stats.tensor_bytes, done;

	pthread_mutex_lock(&w->mu);
	w->stats.bytes += n;
	done = w->stats.bytes < total ? w->stats.bytes : total;
	if (w->opt.progress)
		w->opt.progress(w->opt.progress_arg, done, total);
	if (off > w->mark) {
		/* Out of memory: the tensors are marked ready at the end. */
		arrival_pending_add(w, off, off + n);
	} else if (off + n > w->mark) {
		w->mark = off + n;
	}
	arrival_advance(w);
	pthread_mutex_unlock(&w->mu);
}

void io_arrival_finish(struct io_weights *w, int rc, const struct err *err)
{
	uint64_t i, n = (uint64_t)w->n_copies * w->g->n_tensors;

	pthread_mutex_lock(&w->mu);
	w->finished = true;
	w->load_rc = rc;
	if (rc < 0 && err)
		w->load_err = *err;
	for (i = 0; i < n && rc == 0; i++)
		__atomic_store_n(&w->pl[i].ready, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int io_placement_wait_slow(const struct io_placement *p)
{
	struct io_weights *w = p->owner;
	int rc;

	if (!w)
		return 0;
	pthread_mutex_lock(&w->mu);
	while (!__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE) && !w->finished)
		pthread_cond_wait(&w->cv, &w->mu);
	rc = __atomic_load_n(&p->ready, __ATOMIC_ACQUIRE) ?
		     0 :
		     (w->load_rc < 0 ? w->load_rc : -EIO);
	pthread_mutex_unlock(&w->mu);
	return rc;
}

int io_weights_wait(struct io_weights *w, struct err *err)
{
	int rc;

	/* a deferred load not started: nothing is being read */
	if (!w->started)
		return 0;
	pthread_mutex_lock(&w->mu);
	while (!w->finished)
		pthread_cond_wait(&w->cv, &w->mu);
	rc = w->load_rc;
	if (rc < 0 && err)
		*err = w->load_err;
	pthread_mutex_unlock(&w->mu);
	return rc;
}
