// SPDX-License-Identifier: MIT
/*
 * Open files: what open, read, write, flush, poll and release do, the
 * same for every kind of file, and where a kind differs its row of
 * kinds.c says how (struct fs_kind_info: the text made at open, its
 * struct fs_file_ops). No switch over the kinds here.
 *
 * Text files (models, status, info, config, ...) are generated whole at
 * open, like a seq_file, and reads serve that snapshot. Files whose
 * contents need the engine (placement, kv, sessions/N/kv) are made by the
 * model's thread: the FUSE request is queued as a job (fs_file_job) and
 * answered from there. The prompt files stream (prompt.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static void files_touch(struct fs_handle *h)
{
	if (!h->session)
		return;
	pthread_mutex_lock(&h->fm->lock);
	h->session->atime = fs_wall();
	pthread_mutex_unlock(&h->fm->lock);
}

int fs_file_job(struct fs_handle *h, fuse_req_t req,
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
	const struct fs_kind_info *k = &fs_kinds[n->kind];
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
	if (writes && k->setting &&
	    !fs_may_write_model(fs, fuse_req_ctx(req)->uid))
		return -EACCES;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	/* an open file keeps its model: a store may remove it meanwhile */
	h->fm = fs_tree_model_get(fs, n, false);
	if (!h->fm && !k->top) {
		free(h);
		return -ENOENT;
	}
	pthread_mutex_init(&h->lock, NULL);
	h->who_leader = -1;
	h->node = *n;
	h->uid = fuse_req_ctx(req)->uid;
	h->readable = acc != O_WRONLY;
	fi->fh = (uintptr_t)h;
	/* Everything is generated: no page cache, sizes mean nothing. */
	fi->direct_io = 1;
	if (k->prompt)
		fi->nonseekable = 1;
	rc = k->session ? files_open_session(h) : 0;
	if (!rc && h->readable && k->text)
		rc = k->text(fs, h, req);
	if (rc) {
		fs_file_release(fs, h);
		return rc;
	}
	h->have_text = true;
	files_link(fs, h);
	return k->file && k->file->open ? k->file->open(fs, req, h, fi) : 0;
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

void fs_file_read(struct fs *fs, fuse_req_t req, struct fs_handle *h,
		  size_t size, off_t off)
{
	const struct fs_file_ops *ops = fs_kinds[h->node.kind].file;

	files_touch(h);
	if (ops && ops->read)
		ops->read(fs, req, h, size, off);
	else
		fs_file_reply_text(req, h, size, off);
}

int fs_file_write(struct fs *fs, fuse_req_t req, struct fs_handle *h,
		  const char *buf, size_t size)
{
	const struct fs_file_ops *ops = fs_kinds[h->node.kind].file;

	files_touch(h);
	return ops && ops->write ? ops->write(fs, req, h, buf, size) : -EBADF;
}

int fs_file_flush(struct fs *fs, fuse_req_t req, struct fs_handle *h)
{
	const struct fs_file_ops *ops = fs_kinds[h->node.kind].file;

	return ops && ops->flush ? ops->flush(fs, req, h) : 0;
}

void fs_file_poll_ready(fuse_req_t req, struct fs_handle *h,
			struct fuse_pollhandle *ph)
{
	if (ph)
		fuse_pollhandle_destroy(ph);
	fuse_reply_poll(req, POLLIN | POLLRDNORM |
				     (h->readable ? 0 : POLLOUT | POLLWRNORM));
}

void fs_file_poll(struct fs *fs, fuse_req_t req, struct fs_handle *h,
		  struct fuse_pollhandle *ph)
{
	const struct fs_file_ops *ops = fs_kinds[h->node.kind].file;

	if (ops && ops->poll)
		ops->poll(fs, req, h, ph);
	else
		fs_file_poll_ready(req, h, ph);
}

void fs_file_release(struct fs *fs, struct fs_handle *h)
{
	const struct fs_file_ops *ops = fs_kinds[h->node.kind].file;
	struct fs_model *fm = h->fm;

	if (ops && ops->release)
		ops->release(fs, h);
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
	fs_buf_free(&h->in);
	fs_buf_free(&h->text);
	if (h->who_leader >= 0)
		close(h->who_leader);
	pthread_mutex_destroy(&h->lock);
	fs_model_put(fm);
	free(h);
}
