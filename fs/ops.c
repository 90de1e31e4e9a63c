// SPDX-License-Identifier: MIT
/*
 * The FUSE low-level operations: a table of short handlers, as lib9p's
 * ramfs fills in its Srv. Each decodes the inode, calls the helper that
 * does the work (tree.c, files.c), and replies once. A helper that returns
 * 1 has queued the request and replies later (a parked read, a job on the
 * scheduler thread).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

/* Seconds the kernel may cache names and attributes: sessions come and go. */
#define OPS_TIMEOUT 1.0

/* Every handler starts here: its errors lines go to the requester. */
static struct fs *ops_fs(fuse_req_t req)
{
	fs_errors_uid = fuse_req_ctx(req)->uid;
	return fuse_req_userdata(req);
}

static struct fs_handle *ops_handle(struct fuse_file_info *fi)
{
	return (struct fs_handle *)(uintptr_t)fi->fh;
}

static void ops_init(void *userdata, struct fuse_conn_info *conn)
{
	/* Writes must reach us as they are made, never cached. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/*
	 * A release waits in the kernel behind max_background others: the
	 * shell idiom's reader counts on it reaching us in order (release.c).
	 */
	conn->max_background = 1024;
	conn->congestion_threshold = 768;
}

static void ops_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = { 0 };
	struct fs_node p, n;
	int rc;

	fs_node_of(parent, &p);
	rc = fs_tree_lookup(ops_fs(req), &p, name, &n);
	if (!rc)
		rc = fs_tree_stat(ops_fs(req), &n, &e.attr, req);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	e.ino = e.attr.st_ino;
	e.attr_timeout = OPS_TIMEOUT;
	e.entry_timeout = OPS_TIMEOUT;
	fuse_reply_entry(req, &e);
}

static void ops_getattr(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	struct stat st;
	struct fs_node n;
	int rc;

	fs_node_of(ino, &n);
	rc = fs_tree_stat(ops_fs(req), &n, &st, req);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, OPS_TIMEOUT);
}

/*
 * `cat prompt > generate` truncates first: accept it, and touch. A file
 * nobody may write (0444, or all of them under -o ro) cannot be truncated
 * either, not even by root: it is generated.
 */
static void ops_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
			int to_set, struct fuse_file_info *fi)
{
	const int ok = FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME |
		       FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
		       FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME;
	struct fs *fs = ops_fs(req);
	struct stat st;
	struct fs_node n;
	int rc;

	if (to_set & ~ok) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fs_node_of(ino, &n);
	rc = fs_tree_stat(fs, &n, &st, req);
	if (!rc && (to_set & FUSE_SET_ATTR_SIZE)) {
		if (S_ISDIR(st.st_mode))
			rc = -EISDIR;
		else if (fs->opt.ro)
			rc = -EROFS;
		else if (!(st.st_mode & 0222))
			rc = -EACCES;
	}
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	ops_getattr(req, ino, fi);
}

/*
 * An open directory: a model's holds a use reference, so that a model
 * removed from its store keeps what a listing reads (weights/ names)
 * until it is closed; sessions/ lists the snapshot taken here.
 */
struct ops_dir {
	struct fs_model *fm;
	struct fs_dir_snap *snap;
};

static void ops_opendir(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	struct fs *fs = ops_fs(req);
	struct ops_dir *d;
	struct stat st;
	struct fs_node n;
	int rc;

	fs_node_of(ino, &n);
	rc = fs_tree_stat(fs, &n, &st, req);
	if (!rc && !S_ISDIR(st.st_mode))
		rc = -ENOTDIR;
	d = rc ? NULL : calloc(1, sizeof(*d));
	if (!rc && !d)
		rc = -ENOMEM;
	if (!rc && !fs_kinds[n.kind].top &&
	    !(d->fm = fs_tree_model_get(fs, &n, false)))
		rc = -ENOENT;
	if (!rc && fs_kinds[n.kind].dir && fs_kinds[n.kind].dir->snapshot)
		rc = fs_kinds[n.kind].dir->snapshot(fs, &n, &d->snap);
	if (rc) {
		if (d)
			fs_model_put(d->fm);
		free(d);
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uintptr_t)d;
	fuse_reply_open(req, fi);
}

static void ops_releasedir(fuse_req_t req, fuse_ino_t ino,
			   struct fuse_file_info *fi)
{
	struct ops_dir *d = (struct ops_dir *)(uintptr_t)fi->fh;

	if (d) {
		fs_model_put(d->fm);
		free(d->snap);
		free(d);
	}
	fuse_reply_err(req, 0);
}

static void ops_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	struct fs *fs = ops_fs(req);
	struct ops_dir *d = (struct ops_dir *)(uintptr_t)fi->fh;
	struct fs_node dir, child;
	struct stat st = { 0 };
	char tmp[32], *buf;
	const char *name;
	size_t len = 0, need;
	int rc = 0;

	fs_node_of(ino, &dir);
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (uint64_t i = off;; i++) {
		if (i < 2) {
			name = i ? ".." : ".";
			st.st_ino = ino;
			st.st_mode = S_IFDIR;
		} else {
			rc = fs_tree_entry(fs, &dir, i - 2, d ? d->snap : NULL,
					   &child, &name, tmp, sizeof(tmp));
			if (rc == FS_TREE_SKIP)
				continue;
			if (rc <= 0)
				break;
			st.st_ino = fs_node_ino(&child);
			st.st_mode = fs_kind_is_dir(child.kind) ? S_IFDIR :
								  S_IFREG;
		}
		need = fuse_add_direntry(req, buf + len, size - len, name, &st,
					 i + 1);
		if (need > size - len)
			break;
		len += need;
	}
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, buf, len);
	free(buf);
}

static void ops_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_node n;
	int rc;

	fs_node_of(ino, &n);
	rc = fs_file_open(ops_fs(req), req, &n, fi);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (rc == 0)
		fuse_reply_open(req, fi);
}

static void ops_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	fs_file_read(ops_fs(req), req, ops_handle(fi), size, off);
}

static void ops_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		      size_t size, off_t off, struct fuse_file_info *fi)
{
	int rc = fs_file_write(ops_fs(req), req, ops_handle(fi), buf, size);

	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (rc == 0)
		fuse_reply_write(req, size);
}

static void ops_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (!fs_file_flush(ops_fs(req), req, ops_handle(fi)))
		fuse_reply_err(req, 0);
}

static void ops_release(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	fs_file_release(ops_fs(req), ops_handle(fi));
	fuse_reply_err(req, 0);
}

static void ops_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct fuse_pollhandle *ph)
{
	fs_file_poll(ops_fs(req), req, ops_handle(fi), ph);
}

static void ops_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = ops_fs(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs_node p, n;
	struct fs_model *fm;
	struct fs_session *ss = NULL;
	int rc;

	fs_node_of(parent, &p);
	rc = fs_tree_lookup(fs, &p, name, &n);
	if (!rc && n.kind != FS_KIND_SESSION_DIR)
		rc = fs_kind_is_dir(n.kind) ? -EPERM : -ENOTDIR;
	if (!rc && !(fm = fs_tree_model_get(fs, &n, false)))
		rc = -ENOENT;
	if (!rc) {
		pthread_mutex_lock(&fm->lock);
		ss = fs_session_find(fm, n.aux);
		/* The kernel checks the sticky bit too; this holds without. */
		if (ss && ctx->uid && ctx->uid != ss->uid &&
		    ctx->uid != fs->uid)
			rc = -EPERM;
		else if (ss)
			fs_session_remove(fm, ss);
		else
			rc = -ENOENT;
		pthread_mutex_unlock(&fm->lock);
		fs_model_put(fm);
	}
	fuse_reply_err(req, -rc);
}

/* Names are made by the filesystem (sessions/new), never by the user. */
static void ops_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode)
{
	fuse_reply_err(req, EPERM);
}

static void ops_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, dev_t rdev)
{
	fuse_reply_err(req, EPERM);
}

static void ops_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EPERM);
}

const struct fuse_lowlevel_ops fs_ops = {
	.init = ops_init,
	.lookup = ops_lookup,
	.getattr = ops_getattr,
	.setattr = ops_setattr,
	.opendir = ops_opendir,
	.releasedir = ops_releasedir,
	.readdir = ops_readdir,
	.open = ops_open,
	.read = ops_read,
	.write = ops_write,
	.flush = ops_flush,
	.release = ops_release,
	.poll = ops_poll,
	.rmdir = ops_rmdir,
	.mkdir = ops_mkdir,
	.mknod = ops_mknod,
	.unlink = ops_unlink,
};
