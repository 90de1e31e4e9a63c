// SPDX-License-Identifier: MIT
/*
 * The kinds of node of the tree (Documentation/ABI.md), one row each: its
 * name and directory, its mode, what its text is and what its open file
 * does. tree.c walks the rows for lookups and listings, files.c calls
 * their handlers; a new file is a new enum fs_kind and a new row, as a
 * lib9p server fills in its Srv (STYLE.md, section 1).
 *
 * The handlers of the small files live here: the text files, the
 * settings (config, placement, kv), a session's kv snapshot and the
 * weights/ tensors. The prompt files are prompt.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

_Static_assert(FS_KIND_COUNT < 256, "the kind must fit in 8 bits of the inode");

/* ---- which provider gives which file (provider.h) ---------------------- */

static bool kinds_has_kv(const struct fs_provider *p)
{
	return p->kv;
}

static bool kinds_has_placement(const struct fs_provider *p)
{
	return p->placement_format;
}

static bool kinds_has_weights(const struct fs_provider *p)
{
	return p->weights_index;
}

static bool kinds_has_logprobs(const struct fs_provider *p)
{
	return p->session_logprobs;
}

static bool kinds_has_reasoning(const struct fs_provider *p)
{
	return p->reasoning;
}

static bool kinds_has_embed(const struct fs_provider *p)
{
	return p->embed;
}

bool fs_provider_has(const struct fs_model *fm, enum fs_kind k)
{
	const struct fs_provider *p = fm ? fm->provider : NULL;

	return !p || !fs_kinds[k].provided || fs_kinds[k].provided(p);
}

/* ---- text made at open ------------------------------------------------- */

static int kinds_models(struct fs *fs, struct fs_handle *h, fuse_req_t req)
{
	return fs_text_models(fs, &h->text);
}

static int kinds_status(struct fs *fs, struct fs_handle *h, fuse_req_t req)
{
	return fs_text_status(fs, &h->text);
}

static int kinds_metrics(struct fs *fs, struct fs_handle *h, fuse_req_t req)
{
	return fs_text_metrics(fs, &h->text);
}

static int kinds_info(struct fs *fs, struct fs_handle *h, fuse_req_t req)
{
	return h->fm->provider->info(h->fm, &h->text);
}

static int kinds_stats(struct fs *fs, struct fs_handle *h, fuse_req_t req)
{
	return fs_text_stats(h->fm, &h->text);
}

static int kinds_errors(struct fs *fs, struct fs_handle *h, fuse_req_t req)
{
	return fs_errors_format(&h->fm->errors, &h->text);
}

static int kinds_weights_index(struct fs *fs, struct fs_handle *h,
			       fuse_req_t req)
{
	return h->fm->provider->weights_index(h->fm, &h->text);
}

/* The effective settings: the model's, with a session's overrides. */
static int kinds_config(struct fs *fs, struct fs_handle *h, fuse_req_t req)
{
	struct fs_model *fm = h->fm;
	struct fs_config cfg;
	int rc;

	pthread_mutex_lock(&fm->lock);
	rc = fs_config_merge(&cfg, &fm->config,
			     h->session ? &h->session->over : NULL);
	pthread_mutex_unlock(&fm->lock);
	if (!rc)
		rc = fs_config_format(&cfg, &h->text);
	fs_config_free(&cfg);
	return rc;
}

/* A copy of one of the session's buffers, taken under the model's lock. */
static int kinds_session_buf(struct fs_handle *h, const struct fs_buf *b)
{
	int rc;

	pthread_mutex_lock(&h->fm->lock);
	rc = fs_buf_add(&h->text, b->p, b->len);
	pthread_mutex_unlock(&h->fm->lock);
	return rc;
}

static int kinds_history(struct fs *fs, struct fs_handle *h, fuse_req_t req)
{
	return kinds_session_buf(h, &h->session->history);
}

static int kinds_logprobs(struct fs *fs, struct fs_handle *h, fuse_req_t req)
{
	return kinds_session_buf(h, &h->session->logprobs);
}

static int kinds_reasoning(struct fs *fs, struct fs_handle *h, fuse_req_t req)
{
	return kinds_session_buf(h, &h->session->reasoning);
}

/* sessions/new: reading it makes a session; its text is the number. */
static int kinds_session_new(struct fs *fs, struct fs_handle *h, fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs_model *fm = h->fm;
	struct fs_session *ss;
	int rc = 0;

	if (fs->opt.ro)
		return -EROFS;
	pthread_mutex_lock(&fm->lock);
	ss = fs_session_create(fm, ctx->uid, ctx->gid, &rc);
	if (ss)
		rc = fs_buf_printf(&h->text, "%llu\n",
				   (unsigned long long)ss->id);
	pthread_mutex_unlock(&fm->lock);
	return rc;
}

/* ---- config ------------------------------------------------------------ */

static int kinds_config_write(struct fs *fs, fuse_req_t req,
			      struct fs_handle *h, const char *buf, size_t size)
{
	struct fs_model *fm = h->fm;
	struct fs_config_source src = {
		.uid = fuse_req_ctx(req)->uid,
		.remote = !strcmp(fm->provider->name, "remote"),
	};
	struct err err = { 0 };
	int rc;

	pthread_mutex_lock(&fm->lock);
	/* grammars are compiled for a loaded local model */
	if (fm->state == FS_MODEL_READY)
		src.m = fm->m;
	rc = fs_config_write_for(h->session ? &h->session->over : &fm->config,
				 buf, size, &src, &err);
	pthread_mutex_unlock(&fm->lock);
	if (rc)
		fs_errors_add(&fm->errors, "%s", err.msg);
	return rc;
}

static const struct fs_file_ops kinds_config_ops = {
	.write = kinds_config_write,
};

/* ---- placement and kv: made and changed on the model's thread ---------- */

static void kinds_job_open_text(struct fs_model *fm, struct fs_job *job,
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

static void kinds_job_placement(struct fs_model *fm, struct fs_job *job,
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

/* A readable placement or kv descriptor's text comes from the job. */
static int kinds_open_by_job(struct fs *fs, fuse_req_t req, struct fs_handle *h,
			     struct fuse_file_info *fi)
{
	if (!h->readable)
		return 0;
	h->have_text = false;
	return fs_file_job(h, req, kinds_job_open_text, 0, 0, fi);
}

static int kinds_placement_write(struct fs *fs, fuse_req_t req,
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
		    fs_file_job(h, req, kinds_job_placement, size, 0, NULL);
}

static int kinds_kv_write(struct fs *fs, fuse_req_t req, struct fs_handle *h,
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

static const struct fs_file_ops kinds_placement_ops = {
	.open = kinds_open_by_job,
	.write = kinds_placement_write,
};

static const struct fs_file_ops kinds_kv_ops = {
	.open = kinds_open_by_job,
	.write = kinds_kv_write,
};

/* ---- sessions/N/kv: a snapshot (kvsnap.c) ------------------------------ */

static int kinds_snapshot_open(struct fs *fs, fuse_req_t req,
			       struct fs_handle *h, struct fuse_file_info *fi)
{
	if (!h->readable)
		return 0;
	h->have_text = false;
	return fs_file_job(h, req, fs_kvsnap_read_job, 0, 0, fi);
}

static int kinds_snapshot_write(struct fs *fs, fuse_req_t req,
				struct fs_handle *h, const char *buf,
				size_t size)
{
	return fs_kvsnap_write(h, buf, size);
}

/* A whole snapshot is restored at the close that ends it. */
static int kinds_snapshot_flush(struct fs *fs, fuse_req_t req,
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

static void kinds_snapshot_release(struct fs *fs, struct fs_handle *h)
{
	fs_kvsnap_release(h);
}

static const struct fs_file_ops kinds_snapshot_ops = {
	.open = kinds_snapshot_open,
	.write = kinds_snapshot_write,
	.flush = kinds_snapshot_flush,
	.release = kinds_snapshot_release,
};

/* ---- weights/<tensor> -------------------------------------------------- */

static void kinds_tensor_read(struct fs *fs, fuse_req_t req,
			      struct fs_handle *h, size_t size, off_t off)
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

/* Its size is the tensor's bytes, once the model is loaded. */
static int kinds_tensor_stat(struct fs_model *fm, const struct fs_node *n,
			     struct stat *st)
{
	struct engine_tensor_info t;

	if (fs_model_state(fm) != FS_MODEL_READY ||
	    engine_model_tensor(fm->m, n->aux, &t))
		return -ENOENT;
	st->st_size = t.bytes;
	st->st_blocks = (st->st_size + 511) / 512;
	return 0;
}

static const struct fs_file_ops kinds_tensor_ops = {
	.read = kinds_tensor_read,
};

/* ---- the table --------------------------------------------------------- */

const struct fs_kind_info fs_kinds[FS_KIND_COUNT] = {
	/* an inode number that names no node: ENOENT (tree.c) */
	[FS_KIND_NONE] = { .top = true },
	[FS_KIND_ROOT] = {
		.mode = S_IFDIR | 0555,
		.top = true,
		.dir = &fs_dir_root,
	},
	[FS_KIND_MODELS] = {
		.name = "models", .parent = FS_KIND_ROOT,
		.mode = S_IFREG | 0444, .top = true, .text = kinds_models,
	},
	[FS_KIND_STATUS] = {
		.name = "status", .parent = FS_KIND_ROOT,
		.mode = S_IFREG | 0444, .top = true, .text = kinds_status,
	},
	[FS_KIND_METRICS] = {
		.name = "metrics", .parent = FS_KIND_ROOT,
		.mode = S_IFREG | 0444, .top = true, .text = kinds_metrics,
	},
	/* <model>/: its name is the model's (fs_dir_root) */
	[FS_KIND_MODEL_DIR] = {
		.parent = FS_KIND_ROOT, .mode = S_IFDIR | 0555,
	},
	[FS_KIND_GENERATE] = {
		.name = "generate", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFREG | 0666, .prompt = true,
		.gen = FS_GEN_GENERATE, .file = &fs_file_prompt,
	},
	[FS_KIND_CHAT] = {
		.name = "chat", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFREG | 0666, .prompt = true, .gen = FS_GEN_CHAT,
		.file = &fs_file_prompt,
	},
	[FS_KIND_CONFIG] = {
		.name = "config", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFREG | 0644, .setting = true, .text = kinds_config,
		.file = &kinds_config_ops,
	},
	[FS_KIND_INFO] = {
		.name = "info", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFREG | 0444, .text = kinds_info,
	},
	[FS_KIND_STATS] = {
		.name = "stats", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFREG | 0444, .text = kinds_stats,
	},
	[FS_KIND_TOKENIZE] = {
		.name = "tokenize", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFREG | 0666, .prompt = true,
		.gen = FS_GEN_TOKENIZE, .file = &fs_file_prompt,
	},
	[FS_KIND_EMBED] = {
		.name = "embed", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFREG | 0666, .prompt = true, .gen = FS_GEN_EMBED,
		.provided = kinds_has_embed, .file = &fs_file_prompt,
	},
	[FS_KIND_EMBED_F32] = {
		.name = "embed.f32", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFREG | 0666, .prompt = true,
		.gen = FS_GEN_EMBED_F32, .provided = kinds_has_embed,
		.file = &fs_file_prompt,
	},
	[FS_KIND_ERRORS] = {
		.name = "errors", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFREG | 0444, .text = kinds_errors,
	},
	[FS_KIND_PLACEMENT] = {
		.name = "placement", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFREG | 0644, .setting = true,
		.provided = kinds_has_placement, .file = &kinds_placement_ops,
	},
	[FS_KIND_KV] = {
		.name = "kv", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFREG | 0644, .setting = true,
		.provided = kinds_has_kv, .file = &kinds_kv_ops,
	},
	[FS_KIND_WEIGHTS] = {
		.name = "weights", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFDIR | 0555, .provided = kinds_has_weights,
		.dir = &fs_dir_weights,
	},
	[FS_KIND_WEIGHTS_INDEX] = {
		.name = "index", .parent = FS_KIND_WEIGHTS,
		.mode = S_IFREG | 0444, .provided = kinds_has_weights,
		.text = kinds_weights_index,
	},
	/* weights/<tensor>: named after its tensor (fs_dir_weights) */
	[FS_KIND_WEIGHTS_TENSOR] = {
		.parent = FS_KIND_WEIGHTS, .mode = S_IFREG | 0444,
		.provided = kinds_has_weights, .stat = kinds_tensor_stat,
		.file = &kinds_tensor_ops,
	},
	/* Sticky, as /tmp: anyone may rmdir a session of their own. */
	[FS_KIND_SESSIONS] = {
		.name = "sessions", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFDIR | S_ISVTX | 0777, .dir = &fs_dir_sessions,
	},
	[FS_KIND_SESSIONS_NEW] = {
		.name = "new", .parent = FS_KIND_SESSIONS,
		.mode = S_IFREG | 0444, .text = kinds_session_new,
	},
	/*
	 * sessions/N/: named by its number (fs_dir_sessions); a session is
	 * its creator's alone (fs_file_open checks too)
	 */
	[FS_KIND_SESSION_DIR] = {
		.parent = FS_KIND_SESSIONS, .mode = S_IFDIR | 0700,
		.session = true,
	},
	[FS_KIND_SESSION_GENERATE] = {
		.name = "generate", .parent = FS_KIND_SESSION_DIR,
		.mode = S_IFREG | 0600, .session = true, .prompt = true,
		.gen = FS_GEN_GENERATE, .file = &fs_file_prompt,
	},
	[FS_KIND_SESSION_CHAT] = {
		.name = "chat", .parent = FS_KIND_SESSION_DIR,
		.mode = S_IFREG | 0600, .session = true, .prompt = true,
		.gen = FS_GEN_CHAT, .file = &fs_file_prompt,
	},
	[FS_KIND_SESSION_CONFIG] = {
		.name = "config", .parent = FS_KIND_SESSION_DIR,
		.mode = S_IFREG | 0600, .session = true, .text = kinds_config,
		.file = &kinds_config_ops,
	},
	[FS_KIND_SESSION_HISTORY] = {
		.name = "history", .parent = FS_KIND_SESSION_DIR,
		.mode = S_IFREG | 0400, .session = true,
		.text = kinds_history,
	},
	/* a session's snapshot: the same cache as kv */
	[FS_KIND_SESSION_KV] = {
		.name = "kv", .parent = FS_KIND_SESSION_DIR,
		.mode = S_IFREG | 0600, .session = true,
		.provided = kinds_has_kv, .file = &kinds_snapshot_ops,
	},
	[FS_KIND_SESSION_LOGPROBS] = {
		.name = "logprobs", .parent = FS_KIND_SESSION_DIR,
		.mode = S_IFREG | 0400, .session = true,
		.provided = kinds_has_logprobs, .text = kinds_logprobs,
	},
	[FS_KIND_SESSION_REASONING] = {
		.name = "reasoning", .parent = FS_KIND_SESSION_DIR,
		.mode = S_IFREG | 0400, .session = true,
		.provided = kinds_has_reasoning, .text = kinds_reasoning,
	},
};
