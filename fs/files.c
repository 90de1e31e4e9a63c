// SPDX-License-Identifier: MIT
/*
 * What open, read, write, flush, poll and release do for each kind of file.
 *
 * Text files (models, status, info, config, ...) are generated whole at
 * open, like a seq_file, and reads serve that snapshot. generate and chat
 * stream: a read-write descriptor submits what it wrote at its first read;
 * a write-only descriptor submits everything written through its open
 * file description at the description's last close (the release: every
 * process that held it closed it, release.c), for the next reader of the
 * same process session (or of the same sessions/N directory).
 * Files whose contents need the engine (placement, kv, sessions/N/kv) are
 * made by the model's scheduler thread: the FUSE request is queued as a
 * job and answered from there. tokenize is answered as generate is, by a
 * stream that the scheduler fills.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Prompts and tokenize input larger than this fail the write (EFBIG). */
#define FILES_INPUT_MAX (4u << 20)

/* The files that stream an answer to what was written. */
static enum fs_gen_kind files_gen_kind(enum fs_kind k)
{
	if (k == FS_K_TOKENIZE)
		return FS_GEN_TOKENIZE;
	if (k == FS_K_EMBED)
		return FS_GEN_EMBED;
	if (k == FS_K_EMBED_F32)
		return FS_GEN_EMBED_F32;
	return k == FS_K_CHAT || k == FS_K_SCHAT ? FS_GEN_CHAT :
						   FS_GEN_GENERATE;
}

/*
 * Fields 6 (session) and 22 (start time) of /proc/PID/stat; -1 when the
 * process is gone.
 */
static int files_stat_fields(pid_t pid, long *sid, unsigned long long *start)
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
 */
static void files_who(fuse_req_t req, struct fs_who *who)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	unsigned long long start = 0;
	long sid, lsid;

	who->uid = ctx->uid;
	who->sid = ctx->pid;
	who->start = 0;
	if (files_stat_fields(ctx->pid, &sid, &start))
		return;
	who->sid = (pid_t)sid;
	if (files_stat_fields((pid_t)sid, &lsid, &start) || lsid != sid)
		start = 0;
	who->start = start;
}

/* The prompt bytes h holds go back to its uid's allowance. */
static void files_uncharge(struct fs_handle *h)
{
	if (!h->charged)
		return;
	fs_input_release(h->fm->fs, h->uid, h->charged);
	h->charged = 0;
}

static void files_touch(struct fs_handle *h)
{
	if (!h->session)
		return;
	pthread_mutex_lock(&h->fm->lock);
	h->session->atime = fs_wall();
	pthread_mutex_unlock(&h->fm->lock);
}

/* ---- generate and chat ------------------------------------------------- */

/* The prefix of errors lines about a write to a file of kind k. */
static const char *files_kind_name(enum fs_kind k)
{
	if (k == FS_K_TOKENIZE)
		return "tokenize";
	if (k == FS_K_EMBED || k == FS_K_EMBED_F32)
		return "embed";
	return k == FS_K_CHAT || k == FS_K_SCHAT ? "chat" : "generate";
}

/* A new generation of what h holds; h->lock held. */
static struct fs_stream *files_submit(struct fs_handle *h)
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
			       files_gen_kind(h->node.kind), &cfg);
	fs_config_free(&cfg);
	fs_buf_free(&h->in);
	if (s) {
		/* The prompt's bytes stay charged until it is tokenized. */
		s->prompt_charged = h->charged;
		h->charged = 0;
	}
	files_uncharge(h);
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
			      files_kind_name(h->node.kind), (unsigned)s->uid,
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
static void files_submit_pending(struct fs_handle *h)
{
	struct fs_stream *s = files_submit(h);

	if (!s)
		return;
	pthread_mutex_lock(&h->fm->lock);
	fs_pending_set(h->fm, h->session, &h->who, files_gen_kind(h->node.kind),
		       s);
	pthread_mutex_unlock(&h->fm->lock);
}

/* The stream a read or poll of h consumes, or NULL for EOF. */
static struct fs_stream *files_gen_stream(struct fs_handle *h, fuse_req_t req)
{
	struct fs_stream *s;

	pthread_mutex_lock(&h->lock);
	if (!h->stream && h->in.len && !h->failed)
		h->stream = files_submit(h);
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

		files_who(req, &who);
		pthread_mutex_lock(&h->fm->lock);
		h->stream = fs_pending_take(h->fm, h->session, &who,
					    files_gen_kind(h->node.kind));
		pthread_mutex_unlock(&h->fm->lock);
	}
	s = h->stream ? fs_stream_get(h->stream) : NULL;
	pthread_mutex_unlock(&h->lock);
	return s;
}

/* Has the reader of s seen all of it, its end included? */
static bool files_stream_drained(struct fs_stream *s)
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
static int files_gen_write(struct fs_handle *h, fuse_req_t req, const char *buf,
			   size_t size)
{
	struct fs_model *fm = h->fm;
	const char *what = files_kind_name(h->node.kind);
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
	if (h->stream && !files_stream_drained(h->stream)) {
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
	if (h->in.len + size > FILES_INPUT_MAX) {
		rc = -EFBIG;
		fs_errors_add(&fm->errors,
			      "%s: prompt over %u bytes; "
			      "nothing of it is submitted",
			      what, FILES_INPUT_MAX);
	} else {
		rc = fs_input_charge(fm, h->uid, size, what);
	}
	if (!rc) {
		h->charged += size;
		rc = fs_buf_add(&h->in, buf, size);
		files_who(req, &h->who);
		h->sid = h->who.sid;
		h->wrote = true;
	}
	if (rc) {
		h->failed = rc;
		fs_buf_free(&h->in);
		files_uncharge(h);
	}
out:
	pthread_mutex_unlock(&h->lock);
	if (old) {
		fs_stream_cancel(old);
		fs_stream_put(old);
	}
	return rc;
}

/* ---- jobs on the scheduler thread -------------------------------------- */

static void files_job_open_text(struct fs_model *fm, struct fs_job *job,
				bool cancelled)
{
	struct fs_handle *h = job->h;
	struct err err = { 0 };
	int rc = -EIO;

	if (!cancelled && h->node.kind == FS_K_PLACEMENT) {
		rc = fm->provider->placement_format(fm, &h->text, &err);
		if (rc && err.msg[0])
			fs_errors_add(&fm->errors, "placement: %s", err.msg);
	} else if (!cancelled) {
		rc = fm->provider->kv(fm, h->uid, &h->text);
	}
	if (rc) {
		fuse_reply_err(job->req, -rc);
		fs_file_release(fm->fs, h);
	} else {
		h->have_text = true;
		fuse_reply_open(job->req, &job->fi);
	}
	free(job);
}

static void files_job_placement(struct fs_model *fm, struct fs_job *job,
				bool cancelled)
{
	struct fs_handle *h = job->h;
	struct err err = { 0 };
	char *copy, *line, *save;
	int rc = cancelled ? -EIO : 0;

	copy = rc ? NULL : strndup(h->in.p ? h->in.p : "", h->in.len);
	if (!rc && !copy)
		rc = -ENOMEM;
	pthread_rwlock_wrlock(&fm->weights_lock);
	for (line = copy ? strtok_r(copy, "\n", &save) : NULL; line && !rc;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!*line || *line == '#')
			continue;
		rc = engine_placement_apply(fm->ctx, line, &err);
		if (rc)
			fs_errors_add(&fm->errors, "placement: %s: %s", line,
				      err.msg);
	}
	pthread_rwlock_unlock(&fm->weights_lock);
	free(copy);
	fs_buf_free(&h->in);
	if (rc)
		fuse_reply_err(job->req, -rc);
	else
		fuse_reply_write(job->req, job->size);
	free(job);
}

static int files_job(struct fs_handle *h, fuse_req_t req,
		     void (*run)(struct fs_model *, struct fs_job *, bool),
		     size_t size, off_t off, const struct fuse_file_info *fi)
{
	struct fs_job *job = calloc(1, sizeof(*job));

	if (!job)
		return -ENOMEM;
	job->run = run;
	job->req = req;
	job->h = h;
	job->size = size;
	job->off = off;
	if (fi)
		job->fi = *fi;
	fs_model_job(h->fm, job);
	return 1;
}

/* ---- open -------------------------------------------------------------- */

static int files_text(struct fs *fs, struct fs_handle *h, fuse_req_t req)
{
	struct fs_model *fm = h->fm;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs_config cfg;
	struct fs_session *ss;
	int rc = 0;

	switch (h->node.kind) {
	case FS_K_MODELS: return fs_text_models(fs, &h->text);
	case FS_K_STATUS: return fs_text_status(fs, &h->text);
	case FS_K_METRICS: return fs_text_metrics(fs, &h->text);
	case FS_K_INFO: return fm->provider->info(fm, &h->text);
	case FS_K_STATS: return fs_text_stats(fm, &h->text);
	case FS_K_ERRORS: return fs_errors_format(&fm->errors, &h->text);
	case FS_K_WINDEX: return fm->provider->weights_index(fm, &h->text);
	case FS_K_CONFIG:
	case FS_K_SCONFIG:
		pthread_mutex_lock(&fm->lock);
		rc = fs_config_merge(&cfg, &fm->config,
				     h->session ? &h->session->over : NULL);
		pthread_mutex_unlock(&fm->lock);
		if (!rc)
			rc = fs_config_format(&cfg, &h->text);
		fs_config_free(&cfg);
		return rc;
	case FS_K_SHISTORY:
		pthread_mutex_lock(&fm->lock);
		rc = fs_buf_add(&h->text, h->session->history.p,
				h->session->history.len);
		pthread_mutex_unlock(&fm->lock);
		return rc;
	case FS_K_SLOGPROBS:
		pthread_mutex_lock(&fm->lock);
		rc = fs_buf_add(&h->text, h->session->logprobs.p,
				h->session->logprobs.len);
		pthread_mutex_unlock(&fm->lock);
		return rc;
	case FS_K_SREASONING:
		pthread_mutex_lock(&fm->lock);
		rc = fs_buf_add(&h->text, h->session->reasoning.p,
				h->session->reasoning.len);
		pthread_mutex_unlock(&fm->lock);
		return rc;
	case FS_K_SNEW:
		if (fs->opt.ro)
			return -EROFS;
		pthread_mutex_lock(&fm->lock);
		ss = fs_session_create(fm, ctx->uid, ctx->gid, &rc);
		if (ss)
			rc = fs_buf_printf(&h->text, "%llu\n",
					   (unsigned long long)ss->id);
		pthread_mutex_unlock(&fm->lock);
		return rc;
	default: return 0;
	}
}

static void files_link(struct fs *fs, struct fs_handle *h)
{
	pthread_mutex_lock(&fs->handles_lock);
	h->next = fs->handles;
	if (h->next)
		h->next->prev = h;
	fs->handles = h;
	pthread_mutex_unlock(&fs->handles_lock);
}

/* A session's files are its creator's (and root's) alone. */
static int files_open_session(struct fs_handle *h)
{
	struct fs_model *fm = h->fm;
	struct fs_session *ss;
	int rc = 0;

	pthread_mutex_lock(&fm->lock);
	ss = fs_session_find(fm, h->node.aux);
	if (ss && h->uid && h->uid != ss->uid) {
		rc = -EACCES;
		ss = NULL;
	} else if (ss) {
		ss->refs++;
		ss->atime = fs_wall();
	} else {
		rc = -ENOENT;
	}
	pthread_mutex_unlock(&fm->lock);
	h->session = ss;
	return rc;
}

int fs_file_open(struct fs *fs, fuse_req_t req, const struct fs_node *n,
		 struct fuse_file_info *fi)
{
	int acc = fi->flags & O_ACCMODE;
	bool writes = acc != O_RDONLY;
	struct fs_handle *h;
	struct stat st;
	int rc;

	rc = fs_tree_stat(fs, n, &st, req);
	if (rc)
		return rc;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (writes && !(st.st_mode & 0222))
		return fs->opt.ro ? -EROFS : -EACCES;
	/* The model-wide settings are the mount owner's, unless shared. */
	if (writes &&
	    (n->kind == FS_K_CONFIG || n->kind == FS_K_PLACEMENT ||
	     n->kind == FS_K_KV) &&
	    !fs_may_write_model(fs, fuse_req_ctx(req)->uid))
		return -EACCES;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	/* an open file keeps its model: a store may remove it meanwhile */
	h->fm = fs_tree_model_get(fs, n, false);
	if (!h->fm && n->kind > FS_K_METRICS) {
		free(h);
		return -ENOENT;
	}
	pthread_mutex_init(&h->lock, NULL);
	h->node = *n;
	h->uid = fuse_req_ctx(req)->uid;
	h->readable = acc != O_WRONLY;
	fi->fh = (uintptr_t)h;
	/* Everything is generated: no page cache, sizes mean nothing. */
	fi->direct_io = 1;
	if (fs_kind_takes_prompt(n->kind))
		fi->nonseekable = 1;
	rc = n->kind >= FS_K_SDIR ? files_open_session(h) : 0;
	if (!rc && h->readable)
		rc = files_text(fs, h, req);
	if (rc) {
		fs_file_release(fs, h);
		return rc;
	}
	h->have_text = true;
	files_link(fs, h);
	if (h->readable && (n->kind == FS_K_PLACEMENT || n->kind == FS_K_KV)) {
		h->have_text = false;
		return files_job(h, req, files_job_open_text, 0, 0, fi);
	}
	if (h->readable && n->kind == FS_K_SKV) {
		h->have_text = false;
		return files_job(h, req, fs_kvsnap_read_job, 0, 0, fi);
	}
	return 0;
}

/* ---- read, write, flush, poll, release --------------------------------- */

/*
 * The reply goes out of a copy, as stream replies do: once the kernel has
 * the bytes, the reader may close and another FUSE thread may release h
 * (and its text) while this thread is still inside fuse_reply_buf().
 */
void fs_file_reply_text(fuse_req_t req, struct fs_handle *h, size_t size,
			off_t off)
{
	char *copy;

	if (off < 0 || (size_t)off >= h->text.len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > h->text.len - off)
		size = h->text.len - off;
	copy = malloc(size);
	if (!copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(copy, h->text.p + off, size);
	fuse_reply_buf(req, copy, size);
	free(copy);
}

static void files_read_tensor(fuse_req_t req, struct fs_handle *h, size_t size,
			      off_t off)
{
	struct fs_model *fm = h->fm;
	const void *data;
	uint64_t bytes;

	pthread_rwlock_rdlock(&fm->weights_lock);
	if (engine_tensor_bytes(fm->m, h->node.aux, &data, &bytes)) {
		pthread_rwlock_unlock(&fm->weights_lock);
		fuse_reply_err(req, EIO);
		return;
	}
	if (off < 0 || (uint64_t)off >= bytes)
		size = 0;
	else if (size > bytes - off)
		size = bytes - off;
	if (size && !data) {
		/*
		 * packed for the kernels, or in a device's memory: the
		 * file's bytes are made again
		 */
		char *copy = malloc(size);

		if (copy)
			engine_tensor_read(fm->m, h->node.aux, (uint64_t)off,
					   size, copy);
		pthread_rwlock_unlock(&fm->weights_lock);
		if (copy)
			fuse_reply_buf(req, copy, size);
		else
			fuse_reply_err(req, ENOMEM);
		free(copy);
		return;
	}
	fuse_reply_buf(req, size ? (const char *)data + off : NULL, size);
	pthread_rwlock_unlock(&fm->weights_lock);
}

void fs_file_read(struct fs *fs, fuse_req_t req, struct fs_handle *h,
		  size_t size, off_t off)
{
	struct fs_stream *s;

	files_touch(h);
	if (fs_kind_takes_prompt(h->node.kind)) {
		int failed;

		pthread_mutex_lock(&h->lock);
		failed = h->stream ? 0 : h->failed;
		pthread_mutex_unlock(&h->lock);
		if (failed) {
			/* Its prompt was refused: say so again, never EOF. */
			fuse_reply_err(req, -failed);
			return;
		}
		s = files_gen_stream(h, req);
		if (!s) {
			fuse_reply_buf(req, NULL, 0);
			return;
		}
		fs_stream_read(s, req, size);
		fs_stream_put(s);
		return;
	}
	switch (h->node.kind) {
	case FS_K_WTENSOR: files_read_tensor(req, h, size, off); return;
	default: break;
	}
	fs_file_reply_text(req, h, size, off);
}

int fs_file_write(struct fs *fs, fuse_req_t req, struct fs_handle *h,
		  const char *buf, size_t size)
{
	struct fs_model *fm = h->fm;
	struct err err = { 0 };
	int rc;

	files_touch(h);
	if (fs_kind_takes_prompt(h->node.kind))
		return files_gen_write(h, req, buf, size);
	switch (h->node.kind) {
	case FS_K_CONFIG:
	case FS_K_SCONFIG: {
		struct fs_config_source src = {
			.uid = fuse_req_ctx(req)->uid,
			.remote = !strcmp(fm->provider->name, "remote"),
		};

		pthread_mutex_lock(&fm->lock);
		/* grammars are compiled for a loaded local model */
		if (fm->state == FS_MODEL_READY)
			src.m = fm->m;
		rc = fs_config_write_for(h->session ? &h->session->over :
						      &fm->config,
					 buf, size, &src, &err);
		pthread_mutex_unlock(&fm->lock);
		if (rc)
			fs_errors_add(&fm->errors, "%s", err.msg);
		return rc;
	}
	case FS_K_PLACEMENT:
		if (fs_model_state(fm) != FS_MODEL_READY) {
			fs_errors_add(&fm->errors,
				      "placement: the model is not loaded");
			return -EIO;
		}
		if (size > 4096) {
			fs_errors_add(&fm->errors,
				      "placement: commands over 4096 bytes");
			return -EINVAL;
		}
		if (memchr(buf, '\0', size)) {
			fs_errors_add(&fm->errors,
				      "placement: a NUL byte in the commands");
			return -EINVAL;
		}
		fs_buf_free(&h->in);
		rc = fs_buf_add(&h->in, buf, size);
		return rc ? rc :
			    files_job(h, req, files_job_placement, size, 0,
				      NULL);
	case FS_K_SKV: return fs_kvsnap_write(h, buf, size);
	case FS_K_KV:
		if (fs_model_state(fm) != FS_MODEL_READY) {
			fs_errors_add(&fm->errors,
				      "kv: the model is not loaded");
			return -EIO;
		}
		if (size > 4096) {
			fs_errors_add(&fm->errors,
				      "kv: writes over 4096 bytes");
			return -EINVAL;
		}
		fs_buf_free(&h->in);
		rc = fs_buf_add(&h->in, buf, size);
		return rc ? rc :
			    files_job(h, req, fs_kvfile_write_job, size, 0,
				      NULL);
	default: return -EBADF;
	}
}

int fs_file_flush(struct fs *fs, fuse_req_t req, struct fs_handle *h)
{
	if (h->node.kind == FS_K_SKV) {
		int rc = fs_kvsnap_close(h);

		if (rc == 1)
			return files_job(h, req, fs_kvsnap_restore_job, 0, 0,
					 NULL) == 1;
		if (rc)
			fuse_reply_err(req, -rc);
		return rc != 0;
	}
	/*
	 * generate, chat, tokenize: a close while other processes still hold
	 * the description (`{ cat a; cat b; } > generate`) does not end the
	 * prompt; the release does (fs_file_release).
	 */
	return 0;
}

void fs_file_poll(struct fs *fs, fuse_req_t req, struct fs_handle *h,
		  struct fuse_pollhandle *ph)
{
	struct fs_stream *s = NULL;

	if (fs_kind_takes_prompt(h->node.kind) && h->readable)
		s = files_gen_stream(h, req);
	if (!s) {
		if (ph)
			fuse_pollhandle_destroy(ph);
		fuse_reply_poll(
			req, POLLIN | POLLRDNORM |
				     (h->readable ? 0 : POLLOUT | POLLWRNORM));
		return;
	}
	fs_stream_poll(s, req, ph);
	fs_stream_put(s);
}

void fs_file_release(struct fs *fs, struct fs_handle *h)
{
	struct fs_model *fm = h->fm;

	if (fs_kind_takes_prompt(h->node.kind) && h->in.len && !h->stream &&
	    !h->readable && !h->failed)
		files_submit_pending(h);
	fs_release_done(fs, h);
	if (h->stream) {
		fs_stream_cancel(h->stream);
		fs_stream_put(h->stream);
	}
	pthread_mutex_lock(&fs->handles_lock);
	if (h->prev)
		h->prev->next = h->next;
	else if (fs->handles == h)
		fs->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->handles_lock);
	if (h->session) {
		pthread_mutex_lock(&fm->lock);
		h->session->atime = fs_wall();
		fs_session_put(fm, h->session);
		pthread_mutex_unlock(&fm->lock);
	}
	fs_kvsnap_release(h);
	fs_buf_free(&h->in);
	files_uncharge(h);
	fs_buf_free(&h->text);
	pthread_mutex_destroy(&h->lock);
	fs_model_put(fm);
	free(h);
}
