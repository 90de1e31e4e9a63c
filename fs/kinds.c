// SPDX-License-Identifier: MIT
/*
 * The kinds of node of the tree (Documentation/ABI.md), one row each: its
 * name and directory, its mode, what its text is and what its open file
 * does. tree.c walks the rows for lookups and listings, files.c calls
 * their handlers; a new file is a new enum fs_kind and a new row, as a
 * lib9p server fills in its Srv (STYLE.md, section 1).
 *
 * The handlers of the text files and config live here; the prompt files
 * are prompt.c's, the files only a local model has (placement, kv,
 * sessions/N/kv, weights/) fs/local/files.c's.
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
		src.m = fs_model_engine(fm);
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
		.provided = kinds_has_placement, .file = &fs_local_placement_ops,
	},
	[FS_KIND_KV] = {
		.name = "kv", .parent = FS_KIND_MODEL_DIR,
		.mode = S_IFREG | 0644, .setting = true,
		.provided = kinds_has_kv, .file = &fs_local_kv_ops,
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
		.provided = kinds_has_weights, .stat = fs_local_tensor_stat,
		.file = &fs_local_tensor_ops,
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
		.provided = kinds_has_kv, .file = &fs_local_snapshot_ops,
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
