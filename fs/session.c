// SPDX-License-Identifier: MIT
/*
 * sessions/N and the answers waiting for their reader.
 *
 * Reading sessions/new makes a session (Plan 9's clone file): a directory
 * with its own config overrides, its history, and its own slot for the
 * answer that `cat prompt > sessions/N/generate` submits, so that any
 * process can read it. In the model's own directory the slot is per
 * process session (getsid of the writer) instead: two shells never see each
 * other's answers.
 *
 * Everything here runs with fs_model.lock held.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct fs_session *fs_session_find(struct fs_model *fm, uint64_t id)
{
	for (struct fs_session *ss = fm->sessions; ss; ss = ss->next)
		if (ss->id == id && !ss->removed)
			return ss;
	return NULL;
}

struct fs_session *fs_session_create(struct fs_model *fm, uid_t uid,
		gid_t gid)
{
	struct fs_session *ss = calloc(1, sizeof(*ss));

	if (!ss)
		return NULL;
	ss->refs = 1;          /* the list's */
	ss->id = ++fm->next_session;
	ss->uid = uid;
	ss->gid = gid;
	ss->ctime = ss->atime = fs_wall();
	ss->next = fm->sessions;
	fm->sessions = ss;
	return ss;
}

static void session_free(struct fs_session *ss)
{
	fs_config_free(&ss->over);
	fs_buf_free(&ss->history);
	fs_buf_free(&ss->convo);
	engine_seq_free(ss->seq);
	free(ss);
}

void fs_session_put(struct fs_model *fm, struct fs_session *ss)
{
	struct fs_session **pp;

	if (!ss || --ss->refs)
		return;
	for (pp = &fm->sessions; *pp; pp = &(*pp)->next) {
		if (*pp == ss) {
			*pp = ss->next;
			break;
		}
	}
	session_free(ss);
}

/*
 * The streams are cancelled and released with fm->lock dropped: a
 * stream's last put takes the lock itself.
 */
static void session_drop_pending(struct fs_model *fm, struct fs_session *ss)
{
	for (int k = 0; k < FS_GEN_KINDS; k++) {
		struct fs_stream *s = ss->pending[k];

		if (!s)
			continue;
		ss->pending[k] = NULL;
		pthread_mutex_unlock(&fm->lock);
		fs_stream_cancel(s);
		fs_stream_put(s);
		pthread_mutex_lock(&fm->lock);
	}
}

void fs_session_remove(struct fs_model *fm, struct fs_session *ss)
{
	if (ss->removed)
		return;
	ss->removed = true;
	ss->refs++;
	session_drop_pending(fm, ss);
	ss->refs--;
	fs_session_put(fm, ss);   /* the list's reference */
}

void fs_pending_set(struct fs_model *fm, struct fs_session *ss, pid_t sid,
		enum fs_gen_kind kind, struct fs_stream *s)
{
	struct fs_stream *old = NULL;
	struct fs_pending *p;

	if (ss && ss->removed) {
		old = s;    /* rmdir'ed while its file was open: nobody can read */
	} else if (ss) {
		old = ss->pending[kind];
		ss->pending[kind] = s;
	} else {
		for (p = fm->pending; p; p = p->next)
			if (p->sid == sid && p->kind == kind)
				break;
		if (!p) {
			p = calloc(1, sizeof(*p));
			if (!p) {
				old = s;   /* nowhere to keep it */
				goto out;
			}
			p->sid = sid;
			p->kind = kind;
			p->next = fm->pending;
			fm->pending = p;
		}
		old = p->stream;
		p->stream = s;
		p->when = fs_wall();
	}
out:
	if (old) {
		pthread_mutex_unlock(&fm->lock);
		fs_stream_cancel(old);
		fs_stream_put(old);
		pthread_mutex_lock(&fm->lock);
	}
}

struct fs_stream *fs_pending_take(struct fs_model *fm, struct fs_session *ss,
		pid_t sid, enum fs_gen_kind kind)
{
	struct fs_pending **pp, *p;
	struct fs_stream *s;

	if (ss) {
		s = ss->pending[kind];
		ss->pending[kind] = NULL;
		return s;
	}
	for (pp = &fm->pending; *pp; pp = &(*pp)->next) {
		p = *pp;
		if (p->sid == sid && p->kind == kind) {
			*pp = p->next;
			s = p->stream;
			free(p);
			return s;
		}
	}
	return NULL;
}

unsigned fs_session_reap(struct fs_model *fm, double now, double idle)
{
	struct fs_pending **pp, *p;
	struct fs_session *ss;
	unsigned n = 0;

again:
	for (ss = fm->sessions; ss; ss = ss->next) {
		/*
		 * A session in use (an open file, a running generation)
		 * stays; an unread answer holds a reference too.
		 */
		unsigned held = 1;

		for (int k = 0; k < FS_GEN_KINDS; k++)
			held += !!ss->pending[k];

		if (!ss->removed && ss->refs == held && now - ss->atime > idle) {
			fs_session_remove(fm, ss);
			n++;
			goto again;   /* the list changed under us */
		}
	}
	for (pp = &fm->pending; *pp;) {
		p = *pp;
		if (now - p->when > idle) {
			*pp = p->next;
			pthread_mutex_unlock(&fm->lock);
			fs_stream_cancel(p->stream);
			fs_stream_put(p->stream);
			pthread_mutex_lock(&fm->lock);
			free(p);
			n++;
			pp = &fm->pending;
		} else {
			pp = &p->next;
		}
	}
	return n;
}

void fs_session_free_all(struct fs_model *fm)
{
	struct fs_pending *p;

	pthread_mutex_lock(&fm->lock);
	while (fm->pending) {
		p = fm->pending;
		fm->pending = p->next;
		pthread_mutex_unlock(&fm->lock);
		fs_stream_cancel(p->stream);
		fs_stream_put(p->stream);
		free(p);
		pthread_mutex_lock(&fm->lock);
	}
	while (fm->sessions) {
		struct fs_session *ss = fm->sessions;

		if (!ss->removed) {
			fs_session_remove(fm, ss);
			continue;
		}
		/* Held by something that is gone at unmount: free anyway. */
		fm->sessions = ss->next;
		session_free(ss);
	}
	pthread_mutex_unlock(&fm->lock);
}
