/* SPDX-License-Identifier: MIT */
/*
 * fs/ internals, shared by the files of this folder only.
 *
 *   ops.c      the FUSE low-level operations table: short handlers
 *   kinds.c    the table of the kinds of node: name, directory, mode,
 *              text and file operations of each (struct fs_kind_info)
 *   tree.c     inode numbers, attributes, lookups and listings
 *   files.c    open/read/write/flush/poll/release, through the table
 *   prompt.c   the prompt files: generate, chat, tokenize, embed
 *   model.c    one directory per model: naming, state, its one thread
 *              (the queue, the stop; the provider's load/start/step/
 *              cancel: provider.h)
 *   local/     the local provider: a GGUF model run by the engine (the
 *              only engine user for it: local/local.h lists its files)
 *   remote/    the remote provider: an OpenAI-compatible server
 *              (remote/remote.h)
 *   stream.c   one generation's output: buffer, parked reads, poll
 *   session.c  sessions/N and the answers waiting for a reader
 *   config.c   key=value sampling settings
 *   text.c     models, status, metrics, stats
 *   errors.c   the per-model errors file
 *   limits.c   per-uid limits: sessions, answers, prompt bytes
 *   budget.c   the daemon's one memory budget, shared by every model
 *   release.c  when a prompt is submitted: the releases in flight
 *   buf.c      growable byte buffers; sha256.c the info file's digest
 *   mount_args.c argv: options, -o lists, sources (mount.h)
 *   mount.c    the daemon: models, mount, signals, unmount (fs_main)
 *   progress.c the load bar of `llmfs -f` on a terminal
 *   store*.c   models of other tools' stores (Ollama, Hugging Face, LM
 *              Studio, llama.cpp), watched with inotify (store.h)
 *
 * Locks. Each guards what its field's comment says; "by lock" there means
 * the struct's own lock.
 *
 *   fs_handle.lock        one open file: its input, stream, charges
 *   fs.progress_lock      the load bar's state and stderr (+ progress_cond)
 *   fs.reap_lock          reap_stop only (+ reap_cond); released before
 *                         the reaper walks the models
 *   fs.wake_lock          the waker's queue: wake_head/tail, a stream's
 *                         wake_queued/wake_next, wake_running/stop,
 *                         budget_kick (+ wake_cond)
 *   fs_model.lock         a model's state, queue, jobs, config, stats,
 *                         sessions (and each session's fields), pending
 *                         answers (+ wake, the scheduler's condvar)
 *   fs_model.weights_lock rwlock: readers of weights/ and the weights
 *                         index (read) against a placement change (write)
 *   fs_stream.lock        one answer: refs, text, state, cancel, poll handle
 *   fs.wait_lock          the parked reads (fs.waiters, fs_stream.waiters)
 *   fs.handles_lock       the list of open files
 *   fs.read_lock          one reader of /dev/fuse at a time (release.c)
 *   fs.release_lock       the releases read and not yet handled
 *                         (+ release_cond)
 *   fs.use_lock           the per-uid charges (limits.c)
 *   fs.models_lock        appending to fs.models; each model's gone and
 *                         users (+ models_cond)
 *   fs_stores.lock        (store.c) a store's scan and the changes it
 *                         makes, the retire threads' list
 *   fs_errors.lock        one model's errors ring
 *   remote.wake_lock      a remote model's curl multi handle, against
 *                         curl_multi_wakeup from other threads (remote.h)
 *
 * Order: a thread holding one of these takes only locks below it in this
 * list (and never one of its own kind twice), outermost first:
 *
 *   fs_handle.lock -> fs_model.lock -> fs_stream.lock -> fs.wait_lock
 *   fs.progress_lock -> fs_model.lock   (the bar reads each model's state)
 *   fs.wake_lock -> fs_stream.lock      (a reference for the queue)
 *   fs_handle.lock, fs_model.lock, KV pool lock -> fs.wake_lock  (the
 *       memory budget's release hook, budget.c, runs under any of them and
 *       only sets a flag; the waker holds fs.wake_lock over nothing else)
 *   fs_model.weights_lock -> fs_errors.lock
 *   fs_stores.lock -> fs.models_lock, fs_errors.lock (a rescan makes and
 *                     hides models; no other lock of fs/ is held then)
 *   fs.read_lock -> fs.release_lock     (a release noted as it is read)
 *   fs.handles_lock, fs.use_lock, fs_errors.lock, fs.reap_lock,
 *   fs.models_lock, fs.release_lock and remote.wake_lock are leaves:
 *   nothing of fs/ is
 *   taken under them.
 *
 * Hence fs_stream_put() (its last reference takes fs_model.lock to drop
 * the session's) and fs_stream_cancel() are never called with
 * fs_model.lock or fs_stream.lock held: code holding fs_model.lock that
 * must drop a stream unlocks around the put (session.c).
 *
 * Locks of other modules taken under ours: the engine's KV pool lock
 * (struct engine_kv_pool), inside fs_model.lock when a session's kept
 * sequence is copied, truncated or freed (kvcache.c, kvsnap.c, the local
 * provider's session_free);
 * libfuse's session lock, under fs_stream.lock and fs.wait_lock
 * (fuse_req_interrupted in fs_stream_read). The other way round: the
 * loader calls sched_progress() with its own lock (io/'s weights lock)
 * held, and it takes fs_model.lock, so no engine call that waits for the
 * load (a forward pass waiting for a tensor) is made under fs_model.lock;
 * libfuse calls stream_interrupt() with the request's own lock held, and
 * it takes fs.wait_lock, so fuse_req_interrupt_func (which takes that
 * request lock) is called with no lock of fs/ held.
 *
 * Calls out: no lock of fs/ is held while calling into libfuse, except
 * fuse_req_interrupted (above), the reply of a weights/ tensor read,
 * sent under the read lock of weights_lock so that a placement cannot
 * move the bytes being copied out, and a rescan's notices to the kernel
 * (fuse_lowlevel_notify_inval_*) under fs_stores.lock, which no FUSE
 * handler ever takes.
 *
 * Flags read without a lock: fs.signalled (_Atomic, set by the shutdown
 * thread); fs_model.stop (_Atomic), written under fs_model.lock, read bare
 * by the sha256 threads as a hint to give up early (a late read costs one
 * more block of hashing) and by the scheduler just after it took its queue
 * (a stop seen one round late ends the same queue on the unmount path).
 */
#ifndef LLMFS_FS_INTERNAL_H
#define LLMFS_FS_INTERNAL_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "../engine/engine.h"
#include "fs.h"
#include "provider.h"

/* ---- buffers ----------------------------------------------------------- */

/* p is NUL-terminated once anything was added; len excludes the NUL. */
struct fs_buf {
	char *p;
	size_t len;
	size_t cap;
};

int fs_buf_add(struct fs_buf *b, const void *data, size_t n);
int fs_buf_printf(struct fs_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void fs_buf_free(struct fs_buf *b);
/* Hand the bytes over: *out owns them (free(3)); b is left empty. */
char *fs_buf_detach(struct fs_buf *b, size_t *len);

/* Monotonic and wall clocks in seconds. */
double fs_now(void);
double fs_wall(void);

/* ---- errors file ------------------------------------------------------- */

#define FS_ERRORS_MAX 100

struct fs_errors {
	pthread_mutex_t lock;
	char *lines[FS_ERRORS_MAX]; /* oldest first; "TIMESTAMP message" */
	uid_t uids[FS_ERRORS_MAX];  /* whose request caused each line */
	unsigned n;
	uint64_t total;
};

/*
 * The uid a line of errors is charged to: set by every FUSE handler (the
 * requester) and by the scheduler around the work of one stream; -1 is
 * the daemon's own (load, sha256). A full ring drops the oldest line of
 * the uid holding the most lines, so that one user's flood only ever
 * pushes out that user's lines.
 */
#define FS_UID_DAEMON ((uid_t)-1)
extern _Thread_local uid_t fs_errors_uid;

void fs_errors_init(struct fs_errors *e);
void fs_errors_destroy(struct fs_errors *e);
/* Control bytes and bytes of invalid UTF-8 in the message are escaped. */
void fs_errors_add(struct fs_errors *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* An engine message without its own "generate: " prefix, for "chat: ...". */
const char *fs_errors_bare(const char *msg);
int fs_errors_format(struct fs_errors *e, struct fs_buf *b);

/* ---- config ------------------------------------------------------------ */

#define FS_STOP_MAX 8

enum fs_config_key {
	FS_CONFIG_TEMPERATURE,
	FS_CONFIG_TOP_K,
	FS_CONFIG_TOP_P,
	FS_CONFIG_MIN_P,
	FS_CONFIG_REPEAT_PENALTY,
	FS_CONFIG_SEED,
	FS_CONFIG_MAX_TOKENS,
	FS_CONFIG_STOP,
	FS_CONFIG_SYSTEM,
	/* constrained output and log-probabilities (config_grammar.c) */
	FS_CONFIG_FORMAT,
	FS_CONFIG_JSON_SCHEMA,
	FS_CONFIG_GRAMMAR,
	FS_CONFIG_LOGPROBS,
	FS_CONFIG_THINK,
	FS_CONFIG_COUNT,
};

/* Most alternatives per token in sessions/N/logprobs (OpenAI's limit). */
#define FS_LOGPROBS_MAX 20

struct fs_config {
	struct engine_sampling sampling;
	uint32_t max_tokens;
	char *stop[FS_STOP_MAX];
	size_t n_stop;
	char *system; /* chat's system prompt, NULL for none */
	/*
	 * At most one of format, json_schema and grammar is set (the last
	 * written); compiled is its grammar for the model (a reference).
	 * json_schema and grammar hold what was written: the text, or an
	 * absolute path that was read.
	 */
	char *format; /* "json" or NULL */
	char *json_schema;
	char *grammar;
	struct engine_grammar *compiled;
	uint32_t logprobs; /* alternatives per token in sessions/N/logprobs */
	enum engine_think think; /* chat: on (default), off, hide */
	unsigned set; /* bit per enum fs_config_key: set here (overrides) */
};

/* What a config write may need besides its text. */
struct fs_config_source {
	const struct engine_model *m; /* to compile grammars; NULL: none */
	uid_t uid;		      /* the writer: paths are read for the
					 daemon's own uid and root only */
	bool remote;		      /* a remote model: no grammars */
};

void fs_config_defaults(struct fs_config *c);
void fs_config_free(struct fs_config *c);
int fs_config_copy(struct fs_config *dst, const struct fs_config *src);
/*
 * Apply key=value lines to c, all or nothing: -EINVAL with the bad line in
 * err, c untouched. fs_config_write_for also takes the grammar keys
 * (format, json_schema, grammar) with what src gives; without a source
 * they fail with -EINVAL unless they clear.
 */
int fs_config_write(struct fs_config *c, const char *text, size_t len,
		    struct err *err);
int fs_config_write_for(struct fs_config *c, const char *text, size_t len,
			const struct fs_config_source *src, struct err *err);
/* config_grammar.c: one grammar key's value into c (-EINVAL, -EACCES). */
int fs_config_set_grammar(struct fs_config *c, enum fs_config_key k,
			  const char *v, const struct fs_config_source *src,
			  struct err *err);
void fs_config_grammar_free(struct fs_config *c);
int fs_config_grammar_copy(struct fs_config *dst, const struct fs_config *src);
/* Effective settings: base, with the keys set in over replaced. */
int fs_config_merge(struct fs_config *out, const struct fs_config *base,
		    const struct fs_config *over);
int fs_config_format(const struct fs_config *c, struct fs_buf *b);
/* s as a config value: C escapes for control bytes, \\ and a last blank. */
int fs_config_escape(struct fs_buf *b, const char *s);

/* ---- streams: the output of one generation ----------------------------- */

enum fs_gen_kind {
	FS_GEN_GENERATE,
	FS_GEN_CHAT,
	FS_GEN_TOKENIZE,  /* the "answer" is the token ids of the text */
	FS_GEN_EMBED,	  /* its embedding, a number per line (embed.c) */
	FS_GEN_EMBED_F32, /* the same as little-endian float32 */
	FS_GEN_KINDS,
};

enum fs_stream_state {
	FS_STREAM_QUEUED,
	FS_STREAM_RUNNING,
	FS_STREAM_DONE,
	FS_STREAM_FAILED,
};

struct fs_model;
struct fs_session;

/*
 * Who submitted an answer of the shell idiom: the process session and
 * uid of the writer, and the start time of the session's leader (0 once
 * it exited), so that a session id recycled by another process session
 * never matches.
 */
struct fs_who {
	pid_t sid;
	uid_t uid;
	uint64_t start; /* /proc/SID/stat starttime, clock ticks */
};
/*
 * Ticks are 10 ms: two sessions made in one tick have the same start, so
 * the pending answer also holds a pidfd of the writer's leader. A leader
 * that died while a live one now has its id means a recycled id.
 */

struct fs_stream {
	pthread_mutex_t lock;
	unsigned refs;		    /* protected by lock */
	struct fs_buf out;	    /* the answer so far; protected by lock */
	size_t rpos;		    /* bytes the reader consumed */
	enum fs_stream_state state; /* protected by lock */
	int error;		    /* negative errno when FAILED */
	bool cancel;		    /* protected by lock */
	bool paused;		    /* unread text over the limit; lock */
	struct fuse_pollhandle *ph; /* protected by lock */
	unsigned waiters;	    /* parked reads; protected by wait_lock */
	uint32_t n_prompt, n_total; /* tokens in the sequence; by lock */

	/* Input, fixed when submitted. */
	uint64_t id;		 /* per model, from 1 */
	pid_t sid;		 /* of the writer */
	uid_t uid;		 /* of the writer: charged to it */
	bool charged;		 /* one of uid's FS_USE_GENERATIONS */
	bool is_turn;		 /* counted in session->turns (fm->lock) */
	uint64_t prompt_charged; /* uid's FS_USE_PROMPT_BYTES it holds */
	uint64_t out_charged;	 /* bytes of out in the memory budget; lock */
	struct fs_model *model;
	struct fs_session *session; /* reference, or NULL */
	char *prompt;
	size_t prompt_len;
	enum fs_gen_kind kind;
	struct fs_config cfg; /* effective settings */

	bool wake_queued; /* on fs.wake_head; by fs.wake_lock */
	struct fs_stream *wake_next;

	struct fs_stream *next; /* in fs_model.queue or a provider's list */
	/*
	 * The provider's own state of this stream (struct fs_local_stream):
	 * provider->stream_size bytes, zeroed by fs_stream_new, released by
	 * provider->stream_free at the last reference, as alloc_netdev's
	 * sizeof_priv and netdev_priv(); only its folder reads it.
	 */
	_Alignas(max_align_t) unsigned char provider_state[];
};

struct fs_stream *fs_stream_new(struct fs_model *fm, struct fs_session *ss,
				const char *prompt, size_t len,
				enum fs_gen_kind kind,
				const struct fs_config *cfg);
struct fs_stream *fs_stream_get(struct fs_stream *s);
void fs_stream_put(struct fs_stream *s);
/* Scheduler side: more text, the end (error 0 or negative errno). */
void fs_stream_append(struct fs_stream *s, const char *text, size_t n);
void fs_stream_finish(struct fs_stream *s, int error);
/*
 * The prompt is no longer needed (it was tokenized; no history keeps it):
 * free it and give its bytes back to the writer's allowance.
 */
void fs_stream_drop_prompt(struct fs_stream *s);
/* Bytes appended and not yet read: the scheduler pauses past a limit. */
size_t fs_stream_unread(struct fs_stream *s);
/* Reader side: stop the generation (no-op once it ended). */
void fs_stream_cancel(struct fs_stream *s);
bool fs_stream_cancelled(struct fs_stream *s);
/* Reply to req now, or park it until text or the end arrives. */
void fs_stream_read(struct fs_stream *s, fuse_req_t req, size_t size);
void fs_stream_poll(struct fs_stream *s, fuse_req_t req,
		    struct fuse_pollhandle *ph);

/* ---- sessions ---------------------------------------------------------- */

struct fs_session {
	unsigned refs; /* protected by fs_model.lock */
	uint64_t id;
	uid_t uid;
	gid_t gid;
	double ctime, atime;	/* fs_wall(); atime by fs_model.lock */
	bool removed;		/* rmdir'ed or timed out */
	struct fs_config over;	/* overrides; by fs_model.lock */
	struct fs_buf history;	/* by fs_model.lock */
	struct fs_buf logprobs; /* the last answer's, JSON lines; by lock */
	struct fs_stream *pending[FS_GEN_KINDS]; /* submitted, not yet opened */
	uint32_t kv_used; /* tokens of its last sequence */
	/*
	 * Turns submitted and not ended (by fm->lock): a snapshot restore
	 * meanwhile is EBUSY.
	 */
	unsigned turns;
	struct fs_buf reasoning; /* of the last chat answer; by lock */
	struct fs_session *next;
	/*
	 * The provider's own state of this session (struct
	 * fs_local_session: its kept sequence, conversation, chat messages):
	 * provider->session_size bytes, zeroed by fs_session_create,
	 * released by provider->session_free; only its folder reads it.
	 */
	_Alignas(max_align_t) unsigned char provider_state[];
};

/* An answer submitted by `cat prompt > generate`, by process session. */
struct fs_pending {
	struct fs_who who;
	int leader; /* pidfd of the session's leader, or -1 */
	enum fs_gen_kind kind;
	double when;
	struct fs_stream *stream;
	struct fs_pending *next;
};

/* All with fm->lock held. */
struct fs_session *fs_session_find(struct fs_model *fm, uint64_t id);
/* NULL with *rc -EMFILE past uid's limit (and an errors line), -ENOMEM. */
struct fs_session *fs_session_create(struct fs_model *fm, uid_t uid, gid_t gid,
				     int *rc);
void fs_session_remove(struct fs_model *fm, struct fs_session *ss);
/* Drop a reference; fm->lock held. */
void fs_session_put(struct fs_model *fm, struct fs_session *ss);
/*
 * Replace the waiting answer for (ss or who, kind); takes s's reference.
 * leader: a pidfd of who's session leader opened while the writer ran
 * (duplicated, not taken), or -1.
 */
void fs_pending_set(struct fs_model *fm, struct fs_session *ss,
		    const struct fs_who *who, int leader, enum fs_gen_kind kind,
		    struct fs_stream *s);
/* Take the waiting answer (caller owns the reference), or NULL. */
struct fs_stream *fs_pending_take(struct fs_model *fm, struct fs_session *ss,
				  const struct fs_who *who,
				  enum fs_gen_kind kind);
/* Remove idle sessions and stale answers; returns how many went. */
unsigned fs_session_reap(struct fs_model *fm, double now, double idle);
void fs_session_free_all(struct fs_model *fm);

/* ---- models ------------------------------------------------------------ */

enum fs_model_state {
	FS_MODEL_LOADING,
	FS_MODEL_READY,
	FS_MODEL_FAILED,
};

struct fs_stats {
	uint64_t requests;
	uint64_t failed;
	uint64_t cancelled;
	uint64_t tokens_in;
	uint64_t tokens_in_evaluated; /* not found in a kept sequence */
	uint64_t kv_waited;	      /* generations that waited for KV room */
	unsigned kv_waiting;	      /* waiting now */
	uint64_t tokens_out;
	double ttft_last_ms;
	double ttft_ms[256]; /* ring of the last ones, for the median */
	unsigned n_ttft;
	double prefill_tps; /* of the last generation */
	double decode_tps;
	double decode_tokens; /* totals, for the Prometheus counters */
	double decode_secs;
	unsigned active;
};

struct fs_job;

struct fs_model {
	struct fs *fs;
	unsigned idx;
	char *name;
	char *path; /* the GGUF file, or the server's URL */
	const struct fs_provider *provider; /* set before the thread starts */
	/*
	 * the provider's own state, read only by its folder (fs/local/,
	 * fs/remote/): struct fs_local (the engine's model, context, chat
	 * template, file type, digest), struct remote. The core asks the
	 * provider table for what it needs of it (fs_model_engine).
	 */
	void *provider_data;

	pthread_mutex_t lock;
	pthread_cond_t wake;	   /* the model's thread waits here */
	enum fs_model_state state; /* protected by lock */
	char load_error[512];
	uint64_t load_done, load_total;
	double load_start, load_secs;
	_Atomic bool stop; /* written under lock, read bare too */

	struct fs_config config; /* protected by lock */
	struct fs_errors errors;
	struct fs_stats stats;	     /* protected by lock */
	struct fs_stream *queue;     /* submitted, not started; by lock */
	struct fs_job *jobs;	     /* by lock */
	struct fs_session *sessions; /* by lock */
	/* memory the budget's waker saw come back (budget.c); by lock */
	uint64_t budget_kicks;
	uint64_t next_session;
	uint64_t next_stream;
	struct fs_pending *pending;    /* by lock */
	uint64_t unpaused;	       /* readers that made room; by lock */
	pthread_rwlock_t weights_lock; /* readers of weights/, vs placement */

	pthread_t thread;
	bool thread_started;

	/*
	 * A model of a store (store.h): what the store says of it, owned;
	 * NULL for a file or server named on the command line. n_ctx is the
	 * store's context length (Ollama's num_ctx), 0 for the default.
	 */
	struct fs_store_item *item;
	uint32_t n_ctx;
	/*
	 * Removed from its store: hidden from lookups and listings (gone);
	 * its engine model is freed once nobody uses it (users: references
	 * of fs_model_get and open files), the struct only at unmount, so
	 * that a stale inode still finds it. Both by fs.models_lock.
	 */
	bool gone;
	bool retired; /* gone, unused, its engine model being freed */
	unsigned users;
};

/*
 * Work that must run on the scheduler thread (placement, kv, sessions/N/kv):
 * run() replies to req; cancelled says the model stops or failed.
 */
struct fs_job {
	void (*run)(struct fs_model *fm, struct fs_job *job, bool cancelled);
	fuse_req_t req;
	struct fs_handle *h;
	size_t size;
	off_t off;
	struct fuse_file_info fi;
	struct fs_job *next;
};

int fs_model_new(struct fs *fs, struct fs_model **out, const char *name,
		 const char *path, struct err *err);
void fs_model_free(struct fs_model *fm);
int fs_model_start(struct fs_model *fm, struct err *err);
void fs_model_stop(struct fs_model *fm);
void fs_model_submit(struct fs_model *fm, struct fs_stream *s);
void fs_model_job(struct fs_model *fm, struct fs_job *job);
enum fs_model_state fs_model_state(struct fs_model *fm);
/* Tell the model's thread that its queue or a stream changed (no lock). */
void fs_model_wake(struct fs_model *fm);
/* A name for a model file: its stem, lower case, safe characters only. */
void fs_model_slug(const char *path, char *out, size_t cap);
/*
 * Can name be a new model's directory: not reserved, not taken by a model
 * that is not gone? fs.models_lock held, or no other thread started yet.
 */
bool fs_model_name_ok(struct fs *fs, const char *name);
/*
 * Append fm to fs.models and give it its index, under fs.models_lock:
 * 0, or -ENOSPC past FS_MODELS_MAX models in the mount's life.
 */
int fs_model_add(struct fs *fs, struct fs_model *fm);
/*
 * The model at index i with a use reference (fs_model_put), or NULL when
 * there is none or it is gone (removed from its store); with gone_too,
 * a gone model is given as long as it was not retired (freed).
 */
struct fs_model *fs_model_get(struct fs *fs, unsigned i, bool gone_too);
void fs_model_put(struct fs_model *fm);
bool fs_model_gone(struct fs_model *fm);
/*
 * The engine model fm's provider runs (its engine_model operation), for
 * a caller that saw fm->state READY; NULL for a provider that runs none
 * (remote). Read-only; the provider frees it.
 */
struct engine_model *fs_model_engine(struct fs_model *fm);

/* text.c: the contents of the generated files. */
int fs_text_models(struct fs *fs, struct fs_buf *b);
/* "loading", "ready", "failed" */
const char *fs_model_state_name(enum fs_model_state st);
int fs_text_status(struct fs *fs, struct fs_buf *b);
int fs_text_metrics(struct fs *fs, struct fs_buf *b);
int fs_text_stats(struct fs_model *fm, struct fs_buf *b);

/* --kv-type-k/-v and --kv-mem for mount.c (fs/local/kvfile.c): 0, or
 * -EINVAL after a line. BYTES with an optional k, M or G suffix (powers
 * of 1024). */
int fs_kv_type_option(const char *s, const char **out);
int fs_kv_bytes_option(const char *s, uint64_t *out);

/* sha256.c */
int fs_sha256_file(const char *path, char hex[65], const _Atomic bool *stop);

/* ---- the daemon -------------------------------------------------------- */

struct fs_options {
	unsigned threads;
	unsigned n_ctx;
	uint64_t kv_mem;       /* --kv-mem: each model's KV cap, 0 = none */
	uint64_t mem_budget;   /* --mem-budget: the daemon's, 0 = derived */
	const char *kv_type_k; /* --kv-type-k, --kv-type-v; NULL = f16 */
	const char *kv_type_v;
	bool ro;
	bool allow_other;
	bool foreground;
	bool debug;
	double idle_timeout;	  /* seconds of no use before sessions/N goes */
	enum io_numa_policy numa; /* --numa, for every model's load */
	int numa_node;
	struct io_device_set
		devices; /* the machine + --devices / LLMFS_DEVICES */
	bool progress;	 /* -f with stderr on a terminal: a load bar */
	/* Limits (limits.c); 0 means the default there. */
	unsigned max_sessions;	   /* --max-sessions: per uid */
	unsigned max_generations;  /* --max-generations: per uid */
	uint64_t max_prompt_bytes; /* --max-prompt-bytes: per uid */
	uint64_t stream_buffer;	   /* --stream-buffer: unread bytes */
	unsigned prefill_chunk;	   /* --prefill-chunk: tokens per step */
	bool shared_config;	   /* --shared-config: anyone may write */
	bool batch_exact;	   /* --batch-exact: engine_model_options */
	/* --placement: a placement line for each local model at its load */
	const char *placement;
	/*
	 * --devices auto found a GPU: without --placement, each local
	 * model's load applies the planner's pick ("auto") before its
	 * weights are read, a failure leaving it on the CPU
	 */
	bool place_auto;
};

/* ---- per-uid limits (limits.c) ------------------------------------------ */

enum fs_use {
	FS_USE_SESSIONS,     /* sessions/N directories */
	FS_USE_GENERATIONS,  /* answers queued, running or unread */
	FS_USE_PROMPT_BYTES, /* written to generate/chat, not submitted */
	FS_USE_COUNT,
};

struct fs_uid_use {
	uid_t uid;
	uint64_t n[FS_USE_COUNT];
	struct fs_uid_use *next;
};

/*
 * Charge n of u to uid: 0, or past its limit -EMFILE (sessions), -EAGAIN
 * (generations), -ENOMEM (prompt bytes), nothing charged; the caller
 * writes the errors line (fs_use_what says what ran out).
 */
int fs_use_charge(struct fs *fs, uid_t uid, enum fs_use u, uint64_t n);
void fs_use_release(struct fs *fs, uid_t uid, enum fs_use u, uint64_t n);
uint64_t fs_use_limit(const struct fs *fs, enum fs_use u);
const char *fs_use_what(enum fs_use u);
void fs_use_free_all(struct fs *fs);
/*
 * Bytes a uid writes that the daemon keeps until they are taken (a
 * prompt, a snapshot): its --max-prompt-bytes allowance and the memory
 * budget. 0, or -ENOMEM after an errors line of fm naming what ran out
 * (what: "generate", "kv snapshot", ...).
 */
int fs_input_charge(struct fs_model *fm, uid_t uid, uint64_t n,
		    const char *what);
void fs_input_release(struct fs *fs, uid_t uid, uint64_t n);
uint64_t fs_stream_buffer(const struct fs *fs);
unsigned fs_prefill_chunk(const struct fs *fs);
/* May uid write the model-wide config and placement? */
bool fs_may_write_model(const struct fs *fs, uid_t uid);

struct fs_waiter;
struct fs_snap_write;
struct fs_release;
struct fs_stores;

/* Inode numbers hold the model's index + 1 in 16 bits (fs_node). */
#define FS_MODELS_MAX 65535u

struct fs {
	struct fs_options opt;
	/*
	 * FS_MODELS_MAX slots, filled in order and never emptied, so that
	 * a reader may walk them without a lock: a slot is set before
	 * n_models counts it. A model removed from its store stays (gone).
	 */
	struct fs_model **models;
	_Atomic unsigned n_models;
	pthread_mutex_t models_lock; /* appends; each model's gone, users */
	pthread_cond_t models_cond;  /* a gone model's users dropped */
	struct fs_stores *stores;    /* store.c, NULL without one */
	struct fuse_session *se;
	double start;
	double start_wall;
	uid_t uid; /* owner of the tree */
	gid_t gid;

	pthread_mutex_t wait_lock; /* parked reads of every stream */
	struct fs_waiter *waiters;

	pthread_mutex_t wake_lock; /* streams with news for their readers */
	pthread_cond_t wake_cond;
	struct fs_stream *wake_head, *wake_tail;
	bool wake_running, wake_stop;
	pthread_t waker;

	pthread_mutex_t handles_lock; /* open files, freed at unmount */
	struct fs_handle *handles;

	const char *mountpoint;
	int sig_pipe[2]; /* signal handler -> shutdown thread */
	pthread_t main_thread;
	pthread_t shutdown;
	bool shutdown_started;
	/* Set by the shutdown thread once a signal asked for the end. */
	_Atomic bool signalled;

	pthread_mutex_t progress_lock; /* the load bar on stderr */
	pthread_cond_t progress_cond;
	bool progress_stop, progress_shown;
	pthread_t progress;
	bool progress_started;

	pthread_mutex_t use_lock; /* per-uid charges */
	struct fs_uid_use *use;

	pthread_mutex_t reap_lock;
	pthread_cond_t reap_cond;
	bool reap_stop;
	pthread_t reaper;
	bool reaper_started;

	/* Releases read from the kernel, not yet handled (release.c). */
	pthread_mutex_t read_lock;
	pthread_mutex_t release_lock;
	pthread_cond_t release_cond;
	uint64_t release_tickets;    /* by release_lock */
	struct fs_release *releases; /* by release_lock */
	bool release_stop;	     /* by release_lock: the daemon ends */

	/* One memory budget for every model and buffer (budget.c). */
	struct engine_budget *budget;
	_Atomic unsigned budget_starved;  /* models waiting for room */
	_Atomic uint64_t budget_pressure; /* bumped: drop a kept cache */
	bool budget_kick; /* by wake_lock: wake the starved models */
};

/*
 * Releases (release.c): the daemon reads /dev/fuse itself, noting the
 * release of each write-only generate, chat and tokenize descriptor as
 * the kernel hands it out; fs_release_done when handled (after its prompt
 * was submitted); fs_release_wait returns once every release noted before
 * the caller's request was handled (or the daemon ends).
 */
int fs_release_start(struct fs *fs);
void fs_release_done(struct fs *fs, const struct fs_handle *h);
void fs_release_wait(struct fs *fs);
void fs_release_stop(struct fs *fs);
void fs_release_free_all(struct fs *fs);

/*
 * The memory budget (budget.c). fs_budget_start fixes the total (before
 * the models start); the buffers' charges: charge (-ENOMEM when full),
 * force (bytes that exist already: an answer's text), release.
 */
int fs_budget_start(struct fs *fs, struct err *err);
void fs_budget_stop(struct fs *fs);
int fs_budget_charge(struct fs *fs, uint64_t n);
void fs_budget_force(struct fs *fs, uint64_t n);
void fs_budget_release(struct fs *fs, uint64_t n);
/* The waker: every scheduler looks at the budget again. */
void fs_budget_wake_models(struct fs *fs);
/* status's memory_budget lines. */
int fs_budget_text(struct fs *fs, struct fs_buf *b);

/*
 * The load bar (progress.c): one line on stderr, redrawn with \r while a
 * model loads, erased when none does; only with fs.opt.progress.
 */
int fs_progress_start(struct fs *fs);
void fs_progress_stop(struct fs *fs);
/* A line on stderr that does not mangle the bar (foreground only). */
void fs_progress_print(struct fs *fs, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Answer every parked read: its text, else EIO (the daemon ends). */
void fs_waiters_flush(struct fs *fs);
/* The thread that answers parked reads, off the scheduler's path. */
int fs_waker_start(struct fs *fs);
void fs_waker_stop(struct fs *fs);

/* ---- the tree ---------------------------------------------------------- */

enum fs_kind {
	FS_KIND_NONE = 0,
	FS_KIND_ROOT = 1, /* so that the root's inode is FUSE_ROOT_ID */
	FS_KIND_MODELS,
	FS_KIND_STATUS,
	FS_KIND_METRICS,
	FS_KIND_MODEL_DIR,
	FS_KIND_GENERATE,
	FS_KIND_CHAT,
	FS_KIND_CONFIG,
	FS_KIND_INFO,
	FS_KIND_STATS,
	FS_KIND_TOKENIZE,
	FS_KIND_EMBED,
	FS_KIND_EMBED_F32,
	FS_KIND_ERRORS,
	FS_KIND_PLACEMENT,
	FS_KIND_KV,
	FS_KIND_WEIGHTS,
	FS_KIND_WEIGHTS_INDEX,
	FS_KIND_WEIGHTS_TENSOR,
	FS_KIND_SESSIONS,
	FS_KIND_SESSIONS_NEW,
	FS_KIND_SESSION_DIR,
	FS_KIND_SESSION_GENERATE,
	FS_KIND_SESSION_CHAT,
	FS_KIND_SESSION_CONFIG,
	FS_KIND_SESSION_HISTORY,
	FS_KIND_SESSION_KV,
	FS_KIND_SESSION_LOGPROBS,
	FS_KIND_SESSION_REASONING,
	FS_KIND_COUNT,
};

/*
 * An inode number is the node itself, so that nothing needs to be
 * remembered between lookup and forget: bits 0-7 the kind, 8-23 the model
 * index + 1, 24-63 the session id or the tensor index.
 */
struct fs_node {
	enum fs_kind kind;
	unsigned model; /* index into fs.models */
	uint64_t aux;	/* session id or tensor index */
};

fuse_ino_t fs_node_ino(const struct fs_node *n);
void fs_node_of(fuse_ino_t ino, struct fs_node *n);

struct fs_handle;
struct fs_dir_snap;

/*
 * What an open file of a kind does beyond serving its text (files.c
 * calls these; a NULL member takes the default said beside it).
 */
struct fs_file_ops {
	/*
	 * After the checks, the session and the text: 0, a negative errno,
	 * or 1 when the reply to req comes later (a job on the model's
	 * thread answers the open). NULL: 0.
	 */
	int (*open)(struct fs *fs, fuse_req_t req, struct fs_handle *h,
		    struct fuse_file_info *fi);
	/* Replies to req, now or later. NULL: h->text from off. */
	void (*read)(struct fs *fs, fuse_req_t req, struct fs_handle *h,
		     size_t size, off_t off);
	/* 0 (all taken), 1 (replied later) or a negative errno. NULL: EBADF */
	int (*write)(struct fs *fs, fuse_req_t req, struct fs_handle *h,
		     const char *buf, size_t size);
	/* 1 when it replied to req (now or later). NULL: 0 */
	int (*flush)(struct fs *fs, fuse_req_t req, struct fs_handle *h);
	/* Replies to req. NULL: ready (fs_file_poll_ready) */
	void (*poll)(struct fs *fs, fuse_req_t req, struct fs_handle *h,
		     struct fuse_pollhandle *ph);
	/* The description's last close, before h is freed. NULL: nothing */
	void (*release)(struct fs *fs, struct fs_handle *h);
};

/*
 * The children of a directory that are not rows of the table: the models
 * under the root, sessions/N, weights/<tensor> (tree.c).
 */
struct fs_dir_ops {
	/* name in dir into *out: 0, or -ENOENT. fm: dir's model, or NULL */
	int (*lookup)(struct fs *fs, struct fs_model *fm,
		      const struct fs_node *dir, const char *name,
		      struct fs_node *out);
	/*
	 * Such child i of dir into *child and *name (static, the model's, or
	 * written into tmp): 1, FS_TREE_SKIP, or 0 past the last.
	 */
	int (*entry)(struct fs *fs, struct fs_model *fm,
		     const struct fs_node *dir, uint64_t i,
		     const struct fs_dir_snap *snap, struct fs_node *child,
		     const char **name, char *tmp, size_t tmp_cap);
	/*
	 * Optional: at opendir, the children a listing walks, taken once
	 * (sessions/: *out malloc'ed, free(3)); 0 or a negative errno.
	 */
	int (*snapshot)(struct fs *fs, const struct fs_node *dir,
			struct fs_dir_snap **out);
};

/*
 * One kind of node: where it is, its mode, what its text is and what its
 * open file does. kinds.c has the table, a row per enum fs_kind; tree.c
 * and files.c read the rows, so that nothing switches over the kinds.
 */
struct fs_kind_info {
	const char *name;     /* in its directory; NULL: a name of its own
				(a model, a session, a tensor: parent's dir) */
	enum fs_kind parent;  /* the directory that lists it */
	mode_t mode;	      /* type and bits; -o ro takes the write bits */
	bool top;	      /* of no model: the root and its files */
	bool setting;	      /* model-wide: the mount owner's to write,
				unless --shared-config */
	bool session;	      /* sessions/N or in it: its creator's alone */
	bool prompt;	      /* writes a prompt, reads its answer */
	enum fs_gen_kind gen; /* prompt: what the answer is */
	/* Does provider p give this node? NULL: every provider does. */
	bool (*provided)(const struct fs_provider *p);
	/*
	 * A readable descriptor's text, made whole at open into h->text:
	 * 0 or a negative errno. NULL: none (or made by file->open).
	 */
	int (*text)(struct fs *fs, struct fs_handle *h, fuse_req_t req);
	/*
	 * Attributes of its own beyond the row's (a size), fm its model:
	 * 0, or -ENOENT when the node is not there. NULL: none.
	 */
	int (*stat)(struct fs_model *fm, const struct fs_node *n,
		    struct stat *st);
	const struct fs_file_ops *file; /* NULL: the text alone */
	const struct fs_dir_ops *dir;	/* NULL: the table's rows alone */
};

extern const struct fs_kind_info fs_kinds[FS_KIND_COUNT];
extern const struct fs_file_ops fs_file_prompt; /* prompt.c */
extern const struct fs_dir_ops fs_dir_root, fs_dir_sessions,
	fs_dir_weights; /* tree.c */
/*
 * The local provider's files (fs/local/files.c): placement, kv,
 * sessions/N/kv and weights/<tensor>, and their attributes.
 */
extern const struct fs_file_ops fs_local_placement_ops, fs_local_kv_ops,
	fs_local_snapshot_ops, fs_local_tensor_ops;
int fs_local_tensor_stat(struct fs_model *fm, const struct fs_node *n,
			 struct stat *st);

static inline bool fs_kind_is_dir(enum fs_kind k)
{
	return S_ISDIR(fs_kinds[k].mode);
}

/*
 * A file whose writes are a prompt and whose reads its answer: generate,
 * chat, tokenize, embed, embed.f32 and a session's generate and chat.
 */
static inline bool fs_kind_takes_prompt(enum fs_kind k)
{
	return fs_kinds[k].prompt;
}
/* 0 or -ENOENT (the node is gone: a removed session, a bad index). */
int fs_tree_stat(struct fs *fs, const struct fs_node *n, struct stat *st,
		 fuse_req_t req);
int fs_tree_lookup(struct fs *fs, const struct fs_node *parent,
		   const char *name, struct fs_node *out);
/* The session ids of a sessions/ listing, taken at opendir. */
struct fs_dir_snap {
	size_t n;
	uint64_t ids[];
};

/*
 * Directory entry i of dir into *child and *name (a static or the
 * model's string); 1 if there is one, FS_TREE_SKIP for an index with
 * nothing to list, 0 past the end. sessions/ lists the ids of snap.
 */
int fs_tree_entry(struct fs *fs, const struct fs_node *dir, uint64_t i,
		  const struct fs_dir_snap *snap, struct fs_node *child,
		  const char **name, char *tmp, size_t tmp_cap);
/*
 * The model of node n with a use reference (fs_model_put), or NULL; a
 * gone model only with gone_too (see fs_model_get).
 */
struct fs_model *fs_tree_model_get(struct fs *fs, const struct fs_node *n,
				   bool gone_too);
/* A listing's entry that is not there (a gone model's slot): skip it. */
#define FS_TREE_SKIP 2
/* Does fm's provider give this file (provider.c)? The optional ones. */
bool fs_provider_has(const struct fs_model *fm, enum fs_kind k);

/* ---- open files -------------------------------------------------------- */

struct fs_handle {
	struct fs_node node;
	struct fs_model *fm;
	struct fs_session *session; /* reference, for sessions/N files */
	pthread_mutex_t lock;
	struct fs_buf in;   /* bytes written: prompt, text, commands */
	struct fs_buf text; /* snapshot served by reads */
	bool have_text;
	struct fs_stream *stream;   /* generate/chat: the answer */
	struct fs_snap_write *snap; /* sessions/N/kv: a restore (kvsnap.c) */
	pid_t sid;		    /* of the writer */
	struct fs_who who;	    /* of the writer */
	int who_leader;	  /* pidfd of who's leader at the write, or -1 */
	uid_t uid;	  /* of the opener */
	uint64_t charged; /* bytes of in charged to uid */
	int failed;	  /* a write failed: nothing submitted */
	bool wrote;
	bool readable;
	struct fs_handle *prev, *next; /* in fs.handles */
};

int fs_file_open(struct fs *fs, fuse_req_t req, const struct fs_node *n,
		 struct fuse_file_info *fi);
void fs_file_read(struct fs *fs, fuse_req_t req, struct fs_handle *h,
		  size_t size, off_t off);
int fs_file_write(struct fs *fs, fuse_req_t req, struct fs_handle *h,
		  const char *buf, size_t size);
/* 1 when the reply to req comes later (a snapshot's restore), else 0. */
int fs_file_flush(struct fs *fs, fuse_req_t req, struct fs_handle *h);
void fs_file_release(struct fs *fs, struct fs_handle *h);
void fs_file_poll(struct fs *fs, fuse_req_t req, struct fs_handle *h,
		  struct fuse_pollhandle *ph);
/* Serve [off, off+size) of h->text. */
void fs_file_reply_text(fuse_req_t req, struct fs_handle *h, size_t size,
			off_t off);
/* The reply of a file with nothing to wait for: readable (and writable). */
void fs_file_poll_ready(fuse_req_t req, struct fs_handle *h,
			struct fuse_pollhandle *ph);
/*
 * Queue run(fm, job, cancelled) on h's model's thread, which replies to
 * req: 1, or -ENOMEM.
 */
int fs_file_job(struct fs_handle *h, fuse_req_t req,
		void (*run)(struct fs_model *, struct fs_job *, bool),
		size_t size, off_t off, const struct fuse_file_info *fi);

extern const struct fuse_lowlevel_ops fs_ops;

#endif
