// SPDX-License-Identifier: MIT
/*
 * The files only a local model has (their rows in fs/kinds.c name these
 * operations): placement and kv, whose text is made and whose writes are
 * applied on the model's thread (a job: fs_file_job); sessions/N/kv, a
 * snapshot of a session's cache (kvsnap.c); weights/<tensor>, the bytes
 * of one tensor, read under the weights lock so that a placement change
 * never tears a read.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "local.h"

/* ---- placement and kv: made and changed on the model's thread ---------- */

static void files_job_open_text(struct fs_model *fm, struct fs_job *job,
				bool cancelled)
{
	struct fs_handle *h = job->h;
	struct err err = { 0 };
	int rc = -EIO;

	if (!cancelled && h->node.kind == FS_KIND_PLACEMENT) {
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
		rc = engine_placement_apply(fs_local(fm)->ctx, line, &err);
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

/* A readable placement or kv descriptor's text comes from the job. */
static int files_open_by_job(struct fs *fs, fuse_req_t req, struct fs_handle *h,
			     struct fuse_file_info *fi)
{
	if (!h->readable)
		return 0;
	h->have_text = false;
	return fs_file_job(h, req, files_job_open_text, 0, 0, fi);
}

static int files_placement_write(struct fs *fs, fuse_req_t req,
				 struct fs_handle *h, const char *buf,
				 size_t size)
{
	struct fs_model *fm = h->fm;
	int rc;

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
		    fs_file_job(h, req, files_job_placement, size, 0, NULL);
}

static int files_kv_write(struct fs *fs, fuse_req_t req, struct fs_handle *h,
			  const char *buf, size_t size)
{
	struct fs_model *fm = h->fm;
	int rc;

	if (fs_model_state(fm) != FS_MODEL_READY) {
		fs_errors_add(&fm->errors, "kv: the model is not loaded");
		return -EIO;
	}
	if (size > 4096) {
		fs_errors_add(&fm->errors, "kv: writes over 4096 bytes");
		return -EINVAL;
	}
	fs_buf_free(&h->in);
	rc = fs_buf_add(&h->in, buf, size);
	return rc ? rc :
		    fs_file_job(h, req, fs_kvfile_write_job, size, 0, NULL);
}

const struct fs_file_ops fs_local_placement_ops = {
	.open = files_open_by_job,
	.write = files_placement_write,
};

const struct fs_file_ops fs_local_kv_ops = {
	.open = files_open_by_job,
	.write = files_kv_write,
};

/* ---- sessions/N/kv: a snapshot (kvsnap.c) ------------------------------ */

static int files_snapshot_open(struct fs *fs, fuse_req_t req,
			       struct fs_handle *h, struct fuse_file_info *fi)
{
	if (!h->readable)
		return 0;
	h->have_text = false;
	return fs_file_job(h, req, fs_kvsnap_read_job, 0, 0, fi);
}

static int files_snapshot_write(struct fs *fs, fuse_req_t req,
				struct fs_handle *h, const char *buf,
				size_t size)
{
	return fs_kvsnap_write(h, buf, size);
}

/* A whole snapshot is restored at the close that ends it. */
static int files_snapshot_flush(struct fs *fs, fuse_req_t req,
				struct fs_handle *h)
{
	int rc = fs_kvsnap_close(h);

	if (rc == 1)
		return fs_file_job(h, req, fs_kvsnap_restore_job, 0, 0, NULL) ==
		       1;
	if (rc)
		fuse_reply_err(req, -rc);
	return rc != 0;
}

static void files_snapshot_release(struct fs *fs, struct fs_handle *h)
{
	fs_kvsnap_release(h);
}

const struct fs_file_ops fs_local_snapshot_ops = {
	.open = files_snapshot_open,
	.write = files_snapshot_write,
	.flush = files_snapshot_flush,
	.release = files_snapshot_release,
};

/* ---- weights/<tensor> -------------------------------------------------- */

static void files_tensor_read(struct fs *fs, fuse_req_t req,
			      struct fs_handle *h, size_t size, off_t off)
{
	struct fs_model *fm = h->fm;
	const void *data;
	uint64_t bytes;

	pthread_rwlock_rdlock(&fm->weights_lock);
	if (engine_tensor_bytes(fs_local(fm)->m, h->node.aux, &data, &bytes)) {
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
			engine_tensor_read(fs_local(fm)->m, h->node.aux,
					   (uint64_t)off, size, copy);
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

/* Its size is the tensor's bytes, once the model is loaded. */
int fs_local_tensor_stat(struct fs_model *fm, const struct fs_node *n,
			 struct stat *st)
{
	struct engine_tensor_info t;

	if (fs_model_state(fm) != FS_MODEL_READY ||
	    engine_model_tensor(fs_local(fm)->m, n->aux, &t))
		return -ENOENT;
	st->st_size = t.bytes;
	st->st_blocks = (st->st_size + 511) / 512;
	return 0;
}

const struct fs_file_ops fs_local_tensor_ops = {
	.read = files_tensor_read,
};
