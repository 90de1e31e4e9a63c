// SPDX-License-Identifier: MIT
/*
 * sessions/N and the answers waiting for their reader.
 *
 * Reading sessions/new makes a session (Plan 9's clone file): a directory
 * with its own config overrides, its history, and its own slot for the
 * answer that `cat prompt > sessions/N/generate` submits, so that any
 * process can read it. In the model's own directory the slot is per
 * process session instead (struct fs_who: the writer's getsid, its uid and
 * the start time of the session's leader): two shells never see each
 * other's answers, nor does a process that recycled an exited session's
 * id, nor a process of another uid in the same session.
 *
 * Everything here runs with fs_model.lock held.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

struct fs_session *fs_session_find(struct fs_model *fm, uint64_t id)
{
	for (struct fs_session *ss = fm->sessions; ss; ss = ss->next)
		if (ss->id == id && !ss->removed)
			return ss;
	return NULL;
}

struct fs_session *fs_session_create(struct fs_model *fm, uid_t uid, gid_t gid,
				     int *rc)
{
	struct fs_session *ss;

	*rc = fs_use_charge(fm->fs, uid, FS_USE_SESSIONS, 1);
	if (*rc) {
		fs_errors_add(&fm->errors,
			      "sessions/new: uid %u holds %llu %s, "
			      "the limit (--max-sessions); rmdir some",
			      (unsigned)uid,
			      (unsigned long long)fs_use_limit(fm->fs,
							       FS_USE_SESSIONS),
			      fs_use_what(FS_USE_SESSIONS));
		return NULL;
	}
	ss = calloc(1, sizeof(*ss) + fm->provider->session_size);
	if (!ss) {
		fs_use_release(fm->fs, uid, FS_USE_SESSIONS, 1);
		*rc = -ENOMEM;
		return NULL;
	}
	ss->refs = 1; /* the list's */
	ss->id = ++fm->next_session;
	ss->uid = uid;
	ss->gid = gid;
	ss->ctime = ss->atime = fs_wall();
	ss->next = fm->sessions;
	fm->sessions = ss;
	return ss;
}

static void session_free(struct fs_model *fm, struct fs_session *ss)
{
	fs_config_free(&ss->over);
	fs_buf_free(&ss->history);
	fs_buf_free(&ss->logprobs);
	fs_buf_free(&ss->reasoning);
	if (fm->provider->session_free)
		fm->provider->session_free(fm, ss);
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
	session_free(fm, ss);
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
	fs_use_release(fm->fs, ss->uid, FS_USE_SESSIONS, 1);
	ss->refs++;
	session_drop_pending(fm, ss);
	ss->refs--;
	fs_session_put(fm, ss); /* the list's reference */
}

static bool session_who_eq(const struct fs_who *a, const struct fs_who *b)
{
	return a->sid == b->sid && a->uid == b->uid && a->start == b->start;
}

/*
 * A copy of the writer's pidfd of its session leader (-1 if none). It was
 * opened at the write, while the writer ran: opened here, at the release,
 * the id could already be another session's (the writer exited, a new
 * leader took its id within the same 10 ms tick, so with the same start).
 */
static int session_leader_dup(int leader)
{
	return leader < 0 ? -1 : fcntl(leader, F_DUPFD_CLOEXEC, 0);
}

/*
 * Is the reader who the process session of p? Same keys, and not a new
 * leader that took the id of p's leader, now dead.
 */
static bool session_pending_is(const struct fs_pending *p,
			       const struct fs_who *who)
{
	if (!session_who_eq(&p->who, who))
		return false;
	if (p->leader < 0 || !who->start)
		return true;
	/* EPERM: alive, and not ours to signal */
	return syscall(SYS_pidfd_send_signal, p->leader, 0, NULL, 0) == 0 ||
	       errno != ESRCH;
}

static void session_pending_free(struct fs_pending *p)
{
	if (p->leader >= 0)
		close(p->leader);
	free(p);
}

void fs_pending_set(struct fs_model *fm, struct fs_session *ss,
		    const struct fs_who *who, int leader, enum fs_gen_kind kind,
		    struct fs_stream *s)
{
	struct fs_stream *old = NULL;
	struct fs_pending *p;

	if (ss && ss->removed) {
		old = s; /* rmdir'ed while its file was open: nobody can read */
	} else if (ss) {
		old = ss->pending[kind];
		ss->pending[kind] = s;
	} else {
		for (p = fm->pending; p; p = p->next)
			if (session_pending_is(p, who) && p->kind == kind)
				break;
		if (!p) {
			p = calloc(1, sizeof(*p));
			if (!p) {
				old = s; /* nowhere to keep it */
				goto out;
			}
			p->who = *who;
			p->leader = session_leader_dup(leader);
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
				  const struct fs_who *who,
				  enum fs_gen_kind kind)
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
		if (session_pending_is(p, who) && p->kind == kind) {
			*pp = p->next;
			s = p->stream;
			session_pending_free(p);
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

		if (!ss->removed && ss->refs == held &&
		    now - ss->atime > idle) {
			fs_session_remove(fm, ss);
			n++;
			goto again; /* the list changed under us */
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
			session_pending_free(p);
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
		session_pending_free(p);
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
		session_free(fm, ss);
	}
	pthread_mutex_unlock(&fm->lock);
}
