/* SPDX-License-Identifier: MIT */
/*
 * Model providers: what answers for a model directory. fs/ talks to a model
 * through one table of operations, as lib9p's Srv or ggml's backend
 * interface: the local GGUF engine is one provider (provider.c wraps the
 * scheduler of sched.c), an OpenAI-compatible HTTP server another
 * (remote.c, Documentation/remote.md).
 *
 * The required operations run the model (serve: load, tokenize, generate
 * steps, all on the model's own thread) and describe it (info, models).
 * The optional ones give the files that only some providers have: a NULL
 * operation means its files are absent from the model's directory
 * (fs_provider_has), so that `ls` shows what works.
 */
#ifndef LLMFS_FS_PROVIDER_H
#define LLMFS_FS_PROVIDER_H

#include <stdbool.h>

struct err;
struct fs_buf;
struct fs_model;

struct fs_provider {
	const char *name; /* "local", "remote" */

	/*
	 * The model's thread (arg is the fs_model): it moves fm->state from
	 * LOADING to READY or FAILED, then takes fm->queue (generate, chat,
	 * tokenize streams) and fm->jobs until fm->stop, and ends every
	 * stream it took before it returns.
	 */
	void *(*serve)(void *arg);
	/*
	 * Called after fm->queue, fm->jobs or fm->stop changed, or a stream
	 * was cancelled, with no lock held: wakes a serve() that waits on
	 * something else than fm->wake. NULL: fm->wake is enough.
	 */
	void (*wake)(struct fs_model *fm);
	/* The info file; the model's line of /models ("name arch params
	 * quant state"). Any thread, no lock held. */
	int (*info)(struct fs_model *fm, struct fs_buf *b);
	int (*models_line)(struct fs_model *fm, struct fs_buf *b);
	/* Frees what the provider attached to fm (after serve returned). */
	void (*free)(struct fs_model *fm);

	/* Optional: NULL and the file is absent. */
	/* serve's thread; another uid's sequences shown as "other" */
	int (*kv)(struct fs_model *fm, uid_t uid, struct fs_buf *b);
	int (*placement_format)(struct fs_model *fm, struct fs_buf *b,
				struct err *err); /* serve's thread */
	int (*weights_index)(struct fs_model *fm, struct fs_buf *b);
	/* sessions/N/logprobs: the engine's log-probabilities of each token */
	bool session_logprobs;
	bool reasoning; /* split a chat answer's thinking (chat.c) */
	bool embed;	/* embed streams (embed.c) */
};

/* The local GGUF engine (provider.c): every operation. */
extern const struct fs_provider fs_provider_local;
/*
 * An OpenAI-compatible server (remote.c): no kv, placement, weights or
 * sessions/N/logprobs.
 */
extern const struct fs_provider fs_provider_remote;

/*
 * Attach a remote server to a new model (before fs_model_start): spec is
 * "URL[,model=ID][,key_file=PATH][,ca_file=PATH][,timeout=S]" as --remote
 * takes it after
 * NAME=. The key is read from key_file now and never shown in any file.
 * Returns 0, or -EINVAL/-ENOMEM/-errno with the reason in err.
 */
int fs_remote_attach(struct fs_model *fm, const char *spec, struct err *err);

#endif
