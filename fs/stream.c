// SPDX-License-Identifier: MIT
/*
 * A stream is the output of one generation: the scheduler appends text, one
 * reader consumes it. A read that finds nothing new is parked, not slept on:
 * its fuse_req_t waits in fs.waiters, so that a thousand slow readers hold
 * no FUSE thread. When text or the end arrives, the scheduler only queues
 * the stream (stream_kick) and the waker thread answers its parked reads
 * and polls; before the waker starts and after it stops, the thread that
 * appended answers them itself. An interrupted parked read (the reader got
 * a signal) is answered EINTR by the interrupt callback.
 *
 * Back-pressure: past fs_stream_buffer() bytes unread, the scheduler
 * pauses the generation (fs_stream_unread); the read that brings it under
 * half of that wakes the scheduler. Text read is dropped from the buffer
 * (but for sessions/N, whose history keeps the whole answer), so a stream
 * holds at most the limit plus one step's text.
 *
 * The parked reads live under one lock of the daemon, not of the stream,
 * because libfuse may call the interrupt callback after the stream's last
 * reference went; the callback only ever touches struct fs.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct fs_waiter {
	fuse_req_t req;
	size_t size;
	struct fs_stream *stream; /* a reference */
	struct fs_waiter *next;
};

struct fs_stream *fs_stream_new(struct fs_model *fm, struct fs_session *ss,
				const char *prompt, size_t len,
				enum fs_gen_kind kind,
				const struct fs_config *cfg)
{
	struct fs_stream *s = calloc(1, sizeof(*s) + fm->provider->stream_size);

	if (!s)
		return NULL;
	s->prompt = malloc(len + 1);
	if (!s->prompt || fs_config_copy(&s->cfg, cfg)) {
		free(s->prompt);
		free(s);
		return NULL;
	}
	memcpy(s->prompt, prompt, len);
	s->prompt[len] = '\0';
	s->prompt_len = len;
	pthread_mutex_init(&s->lock, NULL);
	s->refs = 1;
	s->model = fm;
	s->session = ss; /* the caller gave us its reference */
	s->kind = kind;
	return s;
}

struct fs_stream *fs_stream_get(struct fs_stream *s)
{
	pthread_mutex_lock(&s->lock);
	s->refs++;
	pthread_mutex_unlock(&s->lock);
	return s;
}

void fs_stream_put(struct fs_stream *s)
{
	struct fs_model *fm;
	unsigned refs;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	refs = --s->refs;
	pthread_mutex_unlock(&s->lock);
	if (refs)
		return;
	fm = s->model;
	if (s->charged)
		fs_use_release(fm->fs, s->uid, FS_USE_GENERATIONS, 1);
	fs_stream_drop_prompt(s);
	if (s->session) {
		pthread_mutex_lock(&fm->lock);
		fs_session_put(fm, s->session);
		pthread_mutex_unlock(&fm->lock);
	}
	if (s->ph)
		fuse_pollhandle_destroy(s->ph);
	fs_budget_release(fm->fs, s->out_charged);
	if (fm->provider->stream_free)
		fm->provider->stream_free(s);
	fs_buf_free(&s->out);
	fs_config_free(&s->cfg);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void fs_stream_drop_prompt(struct fs_stream *s)
{
	if (s->prompt_charged)
		fs_input_release(s->model->fs, s->uid, s->prompt_charged);
	s->prompt_charged = 0;
	free(s->prompt);
	s->prompt = NULL;
}

size_t fs_stream_unread(struct fs_stream *s)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = s->out.len - s->rpos;
	pthread_mutex_unlock(&s->lock);
	return n;
}

/*
 * Drop what was read, when that is most of the buffer; s->lock held. The
 * bytes dropped, for the memory budget (released with the lock dropped:
 * its hook takes fs.wake_lock, which nests outside stream locks).
 */
static size_t stream_trim(struct fs_stream *s)
{
	size_t n = s->rpos;

	if (s->session || s->rpos < 65536 || s->rpos < s->out.len / 2)
		return 0;
	memmove(s->out.p, s->out.p + s->rpos, s->out.len - s->rpos + 1);
	s->out.len -= s->rpos;
	s->rpos = 0;
	n = n < s->out_charged ? n : s->out_charged;
	s->out_charged -= n;
	return n;
}

/* A paused generation's reader made room: the scheduler goes on. */
static void stream_unpause(struct fs_stream *s)
{
	struct fs_model *fm = s->model;

	pthread_mutex_lock(&fm->lock);
	fm->unpaused++;
	pthread_cond_signal(&fm->wake);
	pthread_mutex_unlock(&fm->lock);
}

/* Answer one read from what s holds; false if it must wait. */
static bool stream_try_reply(struct fs_stream *s, fuse_req_t req, size_t size)
{
	char *data = NULL;
	size_t n = 0, trimmed = 0;
	int error = 0;
	bool unpause = false;

	pthread_mutex_lock(&s->lock);
	if (s->rpos < s->out.len) {
		n = s->out.len - s->rpos;
		if (n > size)
			n = size;
		data = malloc(n);
		if (data) {
			memcpy(data, s->out.p + s->rpos, n);
			s->rpos += n;
			trimmed = stream_trim(s);
		} else {
			error = ENOMEM;
		}
		if (s->paused && s->out.len - s->rpos <=
					 fs_stream_buffer(s->model->fs) / 2) {
			s->paused = false;
			unpause = true;
		}
	} else if (s->state == FS_STREAM_DONE) {
		/* EOF */
	} else if (s->state == FS_STREAM_FAILED) {
		error = -s->error;
		s->error = 0; /* reported once, EOF after */
		s->state = FS_STREAM_DONE;
	} else {
		pthread_mutex_unlock(&s->lock);
		return false;
	}
	pthread_mutex_unlock(&s->lock);
	fs_budget_release(s->model->fs, trimmed);
	if (unpause)
		stream_unpause(s);
	if (error)
		fuse_reply_err(req, error);
	else
		fuse_reply_buf(req, data, n);
	free(data);
	return true;
}

static void stream_interrupt(fuse_req_t req, void *arg)
{
	struct fs *fs = arg;
	struct fs_waiter **pp, *w = NULL;

	pthread_mutex_lock(&fs->wait_lock);
	for (pp = &fs->waiters; *pp; pp = &(*pp)->next) {
		if ((*pp)->req == req) {
			w = *pp;
			*pp = w->next;
			w->stream->waiters--;
			break;
		}
	}
	pthread_mutex_unlock(&fs->wait_lock);
	if (!w)
		return;
	fuse_reply_err(req, EINTR);
	fs_stream_put(w->stream);
	free(w);
}

void fs_stream_read(struct fs_stream *s, fuse_req_t req, size_t size)
{
	struct fs *fs = s->model->fs;
	struct fs_waiter *w;

	fuse_req_interrupt_func(req, stream_interrupt, fs);
	if (stream_try_reply(s, req, size))
		return;
	w = calloc(1, sizeof(*w));
	if (!w) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	w->req = req;
	w->size = size;
	w->stream = fs_stream_get(s);
	/*
	 * Park under the stream's lock, so that text appended after the
	 * check above finds the waiter; and check for an interrupt under
	 * wait_lock, which the interrupt callback takes after setting it.
	 */
	pthread_mutex_lock(&s->lock);
	if (s->rpos < s->out.len || s->state >= FS_STREAM_DONE) {
		pthread_mutex_unlock(&s->lock);
		fs_stream_put(w->stream);
		free(w);
		stream_try_reply(s, req, size);
		return;
	}
	pthread_mutex_lock(&fs->wait_lock);
	if (fuse_req_interrupted(req)) {
		pthread_mutex_unlock(&fs->wait_lock);
		s->refs--; /* not the last: the caller holds one */
		pthread_mutex_unlock(&s->lock);
		free(w);
		fuse_reply_err(req, EINTR);
		return;
	}
	w->next = fs->waiters;
	fs->waiters = w;
	s->waiters++;
	pthread_mutex_unlock(&fs->wait_lock);
	pthread_mutex_unlock(&s->lock);
}

/* Answer the parked reads of s (after new text or the end). */
static void stream_wake(struct fs_stream *s)
{
	struct fs *fs = s->model->fs;
	struct fs_waiter **pp, *w, *mine = NULL;
	struct fuse_pollhandle *ph;

	pthread_mutex_lock(&s->lock);
	ph = s->ph;
	s->ph = NULL;
	pthread_mutex_unlock(&s->lock);
	if (ph) {
		fuse_lowlevel_notify_poll(ph);
		fuse_pollhandle_destroy(ph);
	}

	pthread_mutex_lock(&fs->wait_lock);
	if (s->waiters) {
		for (pp = &fs->waiters; *pp;) {
			w = *pp;
			if (w->stream == s) {
				*pp = w->next;
				w->next = mine;
				mine = w;
				s->waiters--;
			} else {
				pp = &w->next;
			}
		}
	}
	pthread_mutex_unlock(&fs->wait_lock);
	while (mine) {
		w = mine;
		mine = w->next;
		if (stream_try_reply(s, w->req, w->size)) {
			fs_stream_put(w->stream);
			free(w);
			continue;
		}
		/* Another read of the same file took the text: wait again. */
		pthread_mutex_lock(&s->lock);
		if (s->rpos < s->out.len || s->state >= FS_STREAM_DONE) {
			pthread_mutex_unlock(&s->lock);
			w->next = mine; /* more came meanwhile: try again */
			mine = w;
			continue;
		}
		pthread_mutex_lock(&fs->wait_lock);
		w->next = fs->waiters;
		fs->waiters = w;
		s->waiters++;
		pthread_mutex_unlock(&fs->wait_lock);
		pthread_mutex_unlock(&s->lock);
	}
}

/*
 * Hand s to the waker thread: answering a read is a write(2) to /dev/fuse
 * and a wake-up of the reader, which the scheduler should not wait for
 * between two forward passes. Without a waker (before it starts, after it
 * stopped) the caller answers itself.
 */
static void stream_kick(struct fs_stream *s)
{
	struct fs *fs = s->model->fs;
	bool direct = false;

	pthread_mutex_lock(&fs->wake_lock);
	if (!fs->wake_running) {
		direct = true;
	} else if (!s->wake_queued) {
		s->wake_queued = true;
		s->wake_next = NULL;
		fs_stream_get(s);
		if (fs->wake_tail)
			fs->wake_tail->wake_next = s;
		else
			fs->wake_head = s;
		fs->wake_tail = s;
		pthread_cond_signal(&fs->wake_cond);
	}
	pthread_mutex_unlock(&fs->wake_lock);
	if (direct)
		stream_wake(s);
}

static void *stream_waker_main(void *arg)
{
	struct fs *fs = arg;
	struct fs_stream *s;

	pthread_mutex_lock(&fs->wake_lock);
	for (;;) {
		while (!fs->wake_head && !fs->wake_stop && !fs->budget_kick)
			pthread_cond_wait(&fs->wake_cond, &fs->wake_lock);
		if (fs->budget_kick) {
			/* memory came back: the starved schedulers retry */
			fs->budget_kick = false;
			pthread_mutex_unlock(&fs->wake_lock);
			fs_budget_wake_models(fs);
			pthread_mutex_lock(&fs->wake_lock);
			continue;
		}
		s = fs->wake_head;
		if (!s)
			break; /* stopping, and nothing left to deliver */
		fs->wake_head = s->wake_next;
		if (!fs->wake_head)
			fs->wake_tail = NULL;
		s->wake_queued = false;
		pthread_mutex_unlock(&fs->wake_lock);
		stream_wake(s);
		fs_stream_put(s);
		pthread_mutex_lock(&fs->wake_lock);
	}
	fs->wake_running = false;
	pthread_mutex_unlock(&fs->wake_lock);
	return NULL;
}

int fs_waker_start(struct fs *fs)
{
	int rc;

	fs->wake_running = true;
	rc = pthread_create(&fs->waker, NULL, stream_waker_main, fs);
	if (rc)
		fs->wake_running = false;
	return -rc;
}

void fs_waker_stop(struct fs *fs)
{
	bool running;

	pthread_mutex_lock(&fs->wake_lock);
	running = fs->wake_running;
	fs->wake_stop = true;
	pthread_cond_signal(&fs->wake_cond);
	pthread_mutex_unlock(&fs->wake_lock);
	if (running)
		pthread_join(fs->waker, NULL);
}

void fs_stream_append(struct fs_stream *s, const char *text, size_t n)
{
	int rc;

	if (!n)
		return;
	/* text that exists already: counted, never refused (back-pressure
	 * bounds it per stream) */
	fs_budget_force(s->model->fs, n);
	pthread_mutex_lock(&s->lock);
	rc = fs_buf_add(&s->out, text, n);
	s->out_charged += n;
	pthread_mutex_unlock(&s->lock);
	if (rc)
		fs_stream_cancel(s);
	stream_kick(s);
}

void fs_stream_finish(struct fs_stream *s, int error)
{
	bool ended = false;

	pthread_mutex_lock(&s->lock);
	if (s->state < FS_STREAM_DONE) {
		s->state = error ? FS_STREAM_FAILED : FS_STREAM_DONE;
		s->error = error;
		ended = true;
	}
	pthread_mutex_unlock(&s->lock);
	if (ended && s->is_turn) {
		pthread_mutex_lock(&s->model->lock);
		s->session->turns--;
		pthread_mutex_unlock(&s->model->lock);
	}
	stream_kick(s);
}

/*
 * Not with fm->lock held. The scheduler may sleep with every generation
 * paused (or waiting for KV room): it must look again.
 */
void fs_stream_cancel(struct fs_stream *s)
{
	pthread_mutex_lock(&s->lock);
	s->cancel = true;
	pthread_mutex_unlock(&s->lock);
	stream_unpause(s);
	fs_model_wake(s->model); /* a remote request ends at once */
}

bool fs_stream_cancelled(struct fs_stream *s)
{
	bool c;

	pthread_mutex_lock(&s->lock);
	c = s->cancel;
	pthread_mutex_unlock(&s->lock);
	return c;
}

void fs_stream_poll(struct fs_stream *s, fuse_req_t req,
		    struct fuse_pollhandle *ph)
{
	struct fuse_pollhandle *old = NULL;
	unsigned revents = 0;

	pthread_mutex_lock(&s->lock);
	if (s->rpos < s->out.len || s->state >= FS_STREAM_DONE)
		revents = POLLIN | POLLRDNORM;
	if (ph) {
		old = s->ph;
		s->ph = ph;
	}
	pthread_mutex_unlock(&s->lock);
	if (old)
		fuse_pollhandle_destroy(old);
	fuse_reply_poll(req, revents);
}

/*
 * At the end of the daemon: what the scheduler left (its text, or the
 * EIO of an answer cut short), else EIO: a read of an answer that did not
 * end is never a plain EOF.
 */
void fs_waiters_flush(struct fs *fs)
{
	struct fs_waiter *w;

	for (;;) {
		pthread_mutex_lock(&fs->wait_lock);
		w = fs->waiters;
		if (w) {
			fs->waiters = w->next;
			w->stream->waiters--;
		}
		pthread_mutex_unlock(&fs->wait_lock);
		if (!w)
			break;
		if (!stream_try_reply(w->stream, w->req, w->size))
			fuse_reply_err(w->req, EIO);
		fs_stream_put(w->stream);
		free(w);
	}
}
