/* SPDX-License-Identifier: MIT */
/*
 * Model providers: what answers for a model directory. fs/ talks to a
 * model through one table of operations, as lib9p's Srv or ggml's backend
 * interface: the local GGUF engine is one provider (fs/local/), an
 * OpenAI-compatible HTTP server another (fs/remote/,
 * Documentation/remote.md).
 *
 * Who owns what. The core (model.c) owns the model's one thread, the
 * queue of submitted streams and jobs, the stop and the unmount's end of
 * everything in flight: its loop takes what the FUSE threads queued, hands
 * each stream to start(), runs the jobs, lets the provider step(), and
 * sleeps on fm->wake while idle() says there is nothing to do. The
 * provider owns what it took: the streams it runs or holds, and its state
 * behind fm->provider_data, which nothing outside its folder reads.
 *
 * The required operations run the model (load, start, step, idle, cancel,
 * free: the model's thread) and describe it (info, models_line: any
 * thread). The optional ones give the files that only some providers have:
 * a NULL operation means its files are absent from the model's directory
 * (fs_provider_has), so that `ls` shows what works. Three more give the
 * core what it needs of the provider's state without reading it: its
 * lines of stats, the engine model (fs_model_engine), the KV figures.
 *
 * A provider's state per stream and per session sits in the tail of
 * struct fs_stream and struct fs_session (provider_state): the core
 * allocates stream_size and session_size bytes more, zeroed, with each,
 * and calls stream_free and session_free when it frees them.
 */
#ifndef LLMFS_FS_PROVIDER_H
#define LLMFS_FS_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct engine_kv_stats;
struct engine_model;
struct err;
struct fs_buf;
struct fs_model;
struct fs_session;
struct fs_stream;

struct fs_provider {
	const char *name; /* "local", "remote" */

	/* ---- the model's thread ---- */
	/*
	 * First: attach the provider's state and load the model (connect to
	 * the server): fm->state goes from LOADING to READY or FAILED, now
	 * or in a later step.
	 */
	void (*load)(struct fs_model *fm);
	/*
	 * Take a submitted stream and its reference: begin it, hold it
	 * until the model is ready, or end it at once (cancelled, the load
	 * failed). Also at the unmount, for a stream the core already ended
	 * with EIO and cancelled: the provider's accounting of it.
	 */
	void (*start)(struct fs_model *fm, struct fs_stream *s);
	/*
	 * One round of work over what it holds (a forward pass over every
	 * active generation; the HTTP transfers). It may wait, for as long
	 * as wake() can end the wait.
	 */
	void (*step)(struct fs_model *fm);
	/*
	 * With fm->lock held: nothing to do until a new stream, a job, a
	 * wake or the stop, so the core may sleep on fm->wake.
	 */
	bool (*idle)(struct fs_model *fm);
	/*
	 * Optional: work for when it is idle, a piece at a time, no lock
	 * held (the local weights' huge-page merge); false once none is
	 * left. A prompt that arrives waits one piece at most.
	 */
	bool (*background)(struct fs_model *fm);
	/*
	 * The unmount: end every stream it holds or runs, a reader still
	 * there with EIO (never an EOF that would pass for the whole
	 * answer); returns how many answers it cut short so.
	 */
	unsigned (*cancel)(struct fs_model *fm);

	/* ---- any thread, no lock held ---- */
	/*
	 * Called after fm->queue, fm->jobs or fm->stop changed, or a stream
	 * was cancelled: wakes a step() that waits on something else than
	 * fm->wake. NULL: fm->wake is enough.
	 */
	void (*wake)(struct fs_model *fm);
	/* The info file; the model's line of /models ("name arch params
	 * quant state"). */
	int (*info)(struct fs_model *fm, struct fs_buf *b);
	int (*models_line)(struct fs_model *fm, struct fs_buf *b);
	/* Frees what the provider attached to fm (after its thread ended). */
	void (*free)(struct fs_model *fm);

	/*
	 * Its state in each stream's and session's provider_state: the
	 * bytes the core adds to each, zeroed. Optional frees of what that
	 * state holds, called once, before the core frees the struct: a
	 * stream's at its last fs_stream_put (any thread, no lock held), a
	 * session's at its last fs_session_put or at the unmount (any
	 * thread, fm->lock held; before free).
	 */
	size_t stream_size;
	size_t session_size;
	void (*stream_free)(struct fs_stream *s);
	void (*session_free)(struct fs_model *fm, struct fs_session *ss);
	/*
	 * Optional, with fm->lock held: its own lines of the stats file
	 * (the local weights' huge-page merge).
	 */
	int (*stats)(struct fs_model *fm, struct fs_buf *b);

	/* ---- optional, any thread, once fm->state was seen READY ---- */
	/*
	 * The engine model it runs, read-only, for what the core compiles or
	 * looks up against it (config's grammars, the names under weights/):
	 * fs_model_engine. NULL, or a NULL op: none.
	 */
	struct engine_model *(*engine_model)(struct fs_model *fm);
	/* Its KV cache's figures for the budget's lines; false: none. */
	bool (*kv_stats)(struct fs_model *fm, struct engine_kv_stats *out);
	/*
	 * The planner's alternatives with their estimates and measured
	 * speeds (engine_placement_plan_text), for status, once the host's
	 * bandwidth is known (a read of placement measures it); NULL: none.
	 */
	int (*plan)(struct fs_model *fm, char *buf, size_t cap,
		    struct err *err);

	/* ---- optional: NULL and the file is absent ---- */
	/* the model's thread; another uid's sequences shown as "other" */
	int (*kv)(struct fs_model *fm, uid_t uid, struct fs_buf *b);
	int (*placement_format)(struct fs_model *fm, struct fs_buf *b,
				struct err *err); /* the model's thread */
	int (*weights_index)(struct fs_model *fm, struct fs_buf *b);
	/* sessions/N/logprobs: the engine's log-probabilities of each token */
	bool session_logprobs;
	bool reasoning; /* split a chat answer's thinking (chat.c) */
	bool embed;	/* embed streams (embed.c) */
};

/* The local GGUF engine (fs/local/provider.c): every operation. */
extern const struct fs_provider fs_provider_local;
/*
 * An OpenAI-compatible server (fs/remote/remote.c): no kv, placement,
 * weights or sessions/N/logprobs.
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
