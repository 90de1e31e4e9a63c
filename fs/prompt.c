// SPDX-License-Identifier: MIT
/*
 * The files whose writes are a prompt and whose reads its answer:
 * generate, chat, tokenize, embed, embed.f32 and a session's generate and
 * chat (their row of kinds.c says which answer: enum fs_gen_kind).
 *
 * A read-write descriptor submits what it wrote at its first read (or
 * poll); a write-only descriptor submits everything written through its
 * open file description at the description's last close (the release:
 * every process that held it closed it, release.c), for the next reader
 * of the same process session (or of the same sessions/N directory). The
 * answer is a stream (stream.c) that the model's thread fills.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* Prompts and tokenize input larger than this fail the write (EFBIG). */
#define PROMPT_INPUT_MAX (4u << 20)

static enum fs_gen_kind prompt_gen_kind(const struct fs_handle *h)
{
	return fs_kinds[h->node.kind].gen;
}

/* The prefix of errors lines about a write of an answer of kind k. */
static const char *prompt_kind_name(enum fs_gen_kind k)
{
	static const char *const names[FS_GEN_KINDS] = {
		[FS_GEN_GENERATE] = "generate", [FS_GEN_CHAT] = "chat",
		[FS_GEN_TOKENIZE] = "tokenize", [FS_GEN_EMBED] = "embed",
		[FS_GEN_EMBED_F32] = "embed",
	};

	return names[k];
}

/*
 * Fields 6 (session) and 22 (start time) of /proc/PID/stat; -1 when the
 * process is gone.
 */
static int prompt_stat_fields(pid_t pid, long *sid, unsigned long long *start)
{
	char path[64], buf[1024], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* comm may hold spaces and parentheses: skip to the last ')'. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1,
			 " %*c %*d %*d %ld %*d %*d %*u %*u %*u %*u "
			 "%*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
			 sid, start) != 2)
		return -1;
	return 0;
}

/*
 * Who the process behind req is, for the shell idiom: its process
 * session, uid, and the start time of the session's leader (0 once the
 * leader exited), so that a recycled session id is another key.
 *
 * With leader (a write): also a pidfd of the session's leader, or -1, so
 * that the answer's key holds that process and not a later one with its
 * id (fs_pending_set). It is opened while the writer runs and before the
 * leader's stat is read: a leader that died before that read gives no
 * start and no pidfd, so the start time kept is the pidfd's process's.
 * Each write says who writes (a description may pass between
 * processes), so each opens it again.
 */
static void prompt_who(fuse_req_t req, struct fs_who *who, int *leader)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	unsigned long long start = 0;
	long sid, lsid;
	int fd = -1;

	who->uid = ctx->uid;
	who->sid = ctx->pid;
	who->start = 0;
	if (leader)
		*leader = -1;
	if (prompt_stat_fields(ctx->pid, &sid, &start))
		return;
	who->sid = (pid_t)sid;
	if (leader)
		fd = (int)syscall(SYS_pidfd_open, who->sid, 0);
	if (prompt_stat_fields((pid_t)sid, &lsid, &start) || lsid != sid) {
		if (fd >= 0)
			close(fd);
		return;
	}
	who->start = start;
	if (leader)
		*leader = fd;
}

/* The prompt bytes h holds go back to its uid's allowance. */
static void prompt_uncharge(struct fs_handle *h)
{
	if (!h->charged)
		return;
	fs_input_release(h->fm->fs, h->uid, h->charged);
	h->charged = 0;
}

/* A new generation of what h holds; h->lock held. */
static struct fs_stream *prompt_submit(struct fs_handle *h)
{
	struct fs_model *fm = h->fm;
	struct fs_config cfg;
	struct fs_stream *s;
	size_t len = h->in.len;
	int rc;

	/* `echo prompt > generate`: the newline is echo's, not the prompt's. */
	if (len && h->in.p[len - 1] == '\n')
		len--;
	pthread_mutex_lock(&fm->lock);
	rc = fs_config_merge(&cfg, &fm->config,
			     h->session ? &h->session->over : NULL);
	if (h->session)
		h->session->refs++;
	pthread_mutex_unlock(&fm->lock);
	s = rc ? NULL :
		 fs_stream_new(fm, h->session, h->in.p ? h->in.p : "", len,
			       prompt_gen_kind(h), &cfg);
	fs_config_free(&cfg);
	fs_buf_free(&h->in);
	if (s) {
		/* The prompt's bytes stay charged until it is tokenized. */
		s->prompt_charged = h->charged;
		h->charged = 0;
	}
	prompt_uncharge(h);
	if (!s) {
		pthread_mutex_lock(&fm->lock);
		fs_session_put(fm, h->session);
		pthread_mutex_unlock(&fm->lock);
		fs_errors_add(&fm->errors, "generate: out of memory");
		return NULL;
	}
	s->sid = h->who.sid;
	s->uid = h->uid;
	rc = fs_use_charge(fm->fs, s->uid, FS_USE_GENERATIONS, 1);
	if (rc) {
		/* The reader gets the error; nothing runs. */
		fs_errors_add(&fm->errors,
			      "%s: uid %u holds %llu %s, the "
			      "limit (--max-generations); read or close them",
			      prompt_kind_name(prompt_gen_kind(h)),
			      (unsigned)s->uid,
			      (unsigned long long)fs_use_limit(
				      fm->fs, FS_USE_GENERATIONS),
			      fs_use_what(FS_USE_GENERATIONS));
		fs_stream_finish(s, rc);
		return s;
	}
	s->charged = true;
	fs_model_submit(fm, fs_stream_get(s));
	return s;
}

/* Give the waiting answer of the writer's session to the table. */
static void prompt_submit_pending(struct fs_handle *h)
{
	struct fs_stream *s = prompt_submit(h);

	if (!s)
		return;
	pthread_mutex_lock(&h->fm->lock);
	fs_pending_set(h->fm, h->session, &h->who, h->who_leader,
		       prompt_gen_kind(h), s);
	pthread_mutex_unlock(&h->fm->lock);
}

/* The stream a read or poll of h consumes, or NULL for EOF. */
static struct fs_stream *prompt_stream(struct fs_handle *h, fuse_req_t req)
{
	struct fs_stream *s;

	pthread_mutex_lock(&h->lock);
	if (!h->stream && h->in.len && !h->failed)
		h->stream = prompt_submit(h);
	if (!h->stream && h->failed) {
		pthread_mutex_unlock(&h->lock);
		return NULL;
	}
	if (!h->stream) {
		/* a prompt closed before this request reached us is in */
		pthread_mutex_unlock(&h->lock);
		fs_release_wait(h->fm->fs);
		pthread_mutex_lock(&h->lock);
	}
	if (!h->stream) {
		struct fs_who who;

		prompt_who(req, &who, NULL);
		pthread_mutex_lock(&h->fm->lock);
		h->stream = fs_pending_take(h->fm, h->session, &who,
					    prompt_gen_kind(h));
		pthread_mutex_unlock(&h->fm->lock);
	}
	s = h->stream ? fs_stream_get(h->stream) : NULL;
	pthread_mutex_unlock(&h->lock);
	return s;
}

/* Has the reader of s seen all of it, its end included? */
static bool prompt_stream_drained(struct fs_stream *s)
{
	bool done;

	pthread_mutex_lock(&s->lock);
	done = s->state == FS_STREAM_DONE && s->rpos == s->out.len;
	pthread_mutex_unlock(&s->lock);
	return done;
}

/*
 * Bytes of a prompt. A descriptor whose answer still streams refuses a new
 * prompt (EBUSY): read it to EOF first, or close. A failed write (EFBIG,
 * ENOMEM) poisons the descriptor: nothing it wrote is ever submitted.
 */
static int prompt_write_bytes(struct fs_handle *h, fuse_req_t req,
			      const char *buf, size_t size)
{
	struct fs_model *fm = h->fm;
	const char *what = prompt_kind_name(prompt_gen_kind(h));
	struct fs_stream *old = NULL;
	int rc;

	if (fs_model_state(fm) == FS_MODEL_FAILED) {
		fs_errors_add(
			&fm->errors,
			"%s: the model failed to load; see the lines above",
			what);
		return -EIO;
	}
	pthread_mutex_lock(&h->lock);
	if (h->failed) {
		rc = h->failed;
		goto out;
	}
	if (h->stream && !prompt_stream_drained(h->stream)) {
		fs_errors_add(&fm->errors,
			      "%s: a write while the answer "
			      "streams; read it to EOF or close first",
			      what);
		rc = -EBUSY;
		goto out;
	}
	if (h->stream) {
		/* A new prompt after the answer was read whole. */
		old = h->stream;
		h->stream = NULL;
	}
	if (h->in.len + size > PROMPT_INPUT_MAX) {
		rc = -EFBIG;
		fs_errors_add(&fm->errors,
			      "%s: prompt over %u bytes; "
			      "nothing of it is submitted",
			      what, PROMPT_INPUT_MAX);
	} else {
		rc = fs_input_charge(fm, h->uid, size, what);
	}
	if (!rc) {
		h->charged += size;
		rc = fs_buf_add(&h->in, buf, size);
		if (h->who_leader >= 0)
			close(h->who_leader);
		prompt_who(req, &h->who, &h->who_leader);
		h->sid = h->who.sid;
		h->wrote = true;
	}
	if (rc) {
		h->failed = rc;
		fs_buf_free(&h->in);
		prompt_uncharge(h);
	}
out:
	pthread_mutex_unlock(&h->lock);
	if (old) {
		fs_stream_cancel(old);
		fs_stream_put(old);
	}
	return rc;
}

static void prompt_read(struct fs *fs, fuse_req_t req, struct fs_handle *h,
			size_t size, off_t off)
{
	struct fs_stream *s;
	int failed;

	pthread_mutex_lock(&h->lock);
	failed = h->stream ? 0 : h->failed;
	pthread_mutex_unlock(&h->lock);
	if (failed) {
		/* Its prompt was refused: say so again, never EOF. */
		fuse_reply_err(req, -failed);
		return;
	}
	s = prompt_stream(h, req);
	if (!s) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	fs_stream_read(s, req, size);
	fs_stream_put(s);
}

static int prompt_write(struct fs *fs, fuse_req_t req, struct fs_handle *h,
			const char *buf, size_t size)
{
	return prompt_write_bytes(h, req, buf, size);
}

static void prompt_poll(struct fs *fs, fuse_req_t req, struct fs_handle *h,
			struct fuse_pollhandle *ph)
{
	struct fs_stream *s = h->readable ? prompt_stream(h, req) : NULL;

	if (!s) {
		fs_file_poll_ready(req, h, ph);
		return;
	}
	fs_stream_poll(s, req, ph);
	fs_stream_put(s);
}

static int prompt_flush(struct fs *fs, fuse_req_t req, struct fs_handle *h)
{
	/*
	 * A close(2) while other processes still hold the description
	 * (`{ cat a; cat b; } > generate`) does not end the prompt; the
	 * release does (prompt_release).
	 */
	return 0;
}

/*
 * The description's last close: a write-only descriptor's prompt is
 * submitted now.
 */
static void prompt_release(struct fs *fs, struct fs_handle *h)
{
	if (h->in.len && !h->stream && !h->readable && !h->failed)
		prompt_submit_pending(h);
	prompt_uncharge(h);
}

const struct fs_file_ops fs_file_prompt = {
	.read = prompt_read,
	.write = prompt_write,
	.flush = prompt_flush,
	.poll = prompt_poll,
	.release = prompt_release,
};
