/* SPDX-License-Identifier: MIT */
/*
 * The local provider's insides: a GGUF model run by the engine in this
 * process (provider.h: fs_provider_local). Only the files of fs/local/
 * include this header; the rest of fs/ reaches a local model through the
 * provider table and the few file operations internal.h names.
 *
 *   provider.c the table; free, placement text, what the core asks of
 *              this state (stats lines, engine model, KV figures), and
 *              the frees of a stream's and a session's state
 *   sched.c    load/start/step/cancel: generations batched over one forward
 *              pass per step, chunked prefill, KV admission
 *   files.c    placement, kv, sessions/N/kv and weights/<tensor>
 *   kvcache.c  sessions' kept sequences, recent ones, prefix reuse
 *   kvfile.c   the kv file and the KV options
 *   kvsnap.c   sessions/N/kv snapshots
 *   chat.c     chat turns through the model's template; thinking apart
 *   embed.c    the embed files' vectors
 *   logprobs.c sessions/N/logprobs
 *   info.c     the info, models line and weights/index texts
 *
 * Everything here runs on the model's thread (the core's loop, model.c)
 * unless its comment says otherwise.
 */
#ifndef LLMFS_FS_LOCAL_H
#define LLMFS_FS_LOCAL_H

#include "../internal.h"

/* sequences of ended generations kept for their prefixes */
#define FS_KV_RECENT 4

/* One step's forward pass: its items and the stream of each. */
struct fs_local_batch {
	struct engine_batch_item *items;
	struct fs_stream **streams;
	size_t cap;
};

/*
 * fm->provider_data of a local model: the engine's handles and what the
 * load found, then the scheduler's state. Allocated by the load, on the
 * model's thread, before fm->state leaves LOADING: a FUSE thread reads it
 * only once it saw the state READY (fm->lock orders the two).
 */
struct fs_local {
	/*
	 * Set once, when the load succeeds, before fm->state becomes READY;
	 * read-only after (any thread); freed by the provider's free.
	 */
	struct engine_model *m;
	struct engine_ctx *ctx; /* m's one context: the scheduler's */
	const struct engine_model_info *info;
	struct engine_chat *chat; /* its chat template */
	char quant[16];		  /* the file type, "Q4_K_M" */
	bool quant_guessed;	  /* no general.file_type: llama.cpp's guess */
	/* hex per file, "" until the hash thread computed it; by fm->lock */
	char sha256[65 * 4];
	pthread_t hash_thread; /* joined by the cancel at the stop */
	bool hash_started;
	/*
	 * The idle merge of the weights into huge pages (fs_local_merge_step),
	 * by fm->lock: "merging", "done" or "unsupported" once loaded, NULL
	 * before; the bytes of whole huge pages merged so far
	 */
	const char *merge_state;
	uint64_t merged_bytes;

	struct fs_stream *active;    /* generations being run */
	struct fs_stream *kv_wait;   /* waiting for KV cache room */
	struct fs_stream *turn_wait; /* a session's next turns; by fm->lock */
	struct engine_seq *kv_recent[FS_KV_RECENT]; /* newest first */
	struct fs_local_batch batch;
	/*
	 * every active generation was paused for its reader at the last
	 * step (idle), with fm->unpaused as it was then
	 */
	bool idle;
	uint64_t unpaused;
	bool merging; /* the weights' huge-page merge has more to do */
	/*
	 * The memory budget (budget.c): whether kv_wait waits for it (by
	 * fm->lock); fm->budget_kicks and fs.budget_pressure as last seen
	 */
	bool kv_starved;
	uint64_t kicks_seen, pressure_seen;
};

static inline struct fs_local *fs_local(const struct fs_model *fm)
{
	return fm->provider_data;
}

struct fs_chat_turn;
struct fs_chat_history;

/*
 * A stream's provider_state (fs_local_stream): the scheduler's, on the
 * model's thread, from start to the stream's end; the split chat answer
 * is freed with the stream (stream_free).
 */
struct fs_local_stream {
	struct engine_seq *seq;
	struct engine_generation *gen;
	struct engine_batch_item prefill; /* the prompt, fed in chunks */
	size_t prefill_done;		  /* its tokens already evaluated */
	bool prefilling;
	bool turn_started; /* it holds its session's turn_active */
	char *text;	   /* a session turn's whole prompt */
	char *turn;	   /* its new part, for the conversation */
	size_t turn_len;
	struct fs_chat_turn *chat; /* a chat answer, split (chat.c) */
};

/*
 * A session's provider_state (fs_local_session): what it keeps between
 * its turns, by fm->lock unless said otherwise; freed with the session
 * (session_free, fm->lock held).
 */
struct fs_local_session {
	/*
	 * whether the scheduler runs one of its turns: one at a time, the
	 * next waits in fs_local.turn_wait
	 */
	bool turn_active;
	struct engine_seq *seq; /* kept between turns */
	struct fs_buf convo;	/* the conversation's text */
	/*
	 * Its chat messages (the scheduler thread's: chat.c), rendered as
	 * the last chat_len bytes of convo
	 */
	struct fs_chat_history *chat;
	size_t chat_len;
	double kv_atime; /* its last turn's end */
};

static inline struct fs_local_stream *fs_local_stream(struct fs_stream *s)
{
	return (struct fs_local_stream *)s->provider_state;
}

static inline struct fs_local_session *fs_local_session(struct fs_session *ss)
{
	return (struct fs_local_session *)ss->provider_state;
}

/* sched.c: the provider's operations on the model's thread. */
void fs_local_load(struct fs_model *fm);
void fs_local_start(struct fs_model *fm, struct fs_stream *s);
void fs_local_step(struct fs_model *fm);
bool fs_local_idle(struct fs_model *fm);
bool fs_local_merge_step(struct fs_model *fm);
unsigned fs_local_cancel(struct fs_model *fm);

/* info.c: the info file, the models line, weights/index (any thread). */
int fs_text_info(struct fs_model *fm, struct fs_buf *b);
int fs_text_models_line(struct fs_model *fm, struct fs_buf *b);
int fs_text_weights_index(struct fs_model *fm, struct fs_buf *b);

/*
 * sessions/N/logprobs (logprobs.c): one JSON object per answer token of
 * lp[0..n), appended to b.
 */
int fs_logprobs_format(const struct engine_model *m,
		       const struct engine_token_logprobs *lp, size_t n,
		       struct fs_buf *b);

/* kvcache.c: what the scheduler keeps of the KV cache (its thread). */
/* s->seq for s, and the text to generate from (a session: the turn). */
int fs_kv_turn_begin(struct fs_model *fm, struct fs_stream *s, char **text,
		     size_t *len, struct err *err);
/* Start s's fresh sequence with the longest prefix held elsewhere. */
void fs_kv_prefix(struct fs_model *fm, struct fs_stream *s);
/* s ended: its session keeps the sequence and the turn, or recent does. */
void fs_kv_turn_end(struct fs_model *fm, struct fs_stream *s, int error);
/*
 * Free the least recently used kept sequence, or the cache of a turn
 * waiting in line other than except; false when none is left.
 */
bool fs_kv_drop_one(struct fs_model *fm, const struct fs_stream *except);
/* Anything fs_kv_drop_one could drop? (fm->lock held) */
bool fs_kv_has_kept(struct fs_model *fm);
void fs_kv_free_recent(struct fs_model *fm);

/*
 * chat.c (the scheduler thread). The whole prompt of chat stream s: base
 * (a session's raw text) and the rendering of the session's messages and
 * s's; *text malloc'ed. Errors are the template's (one line).
 */
int fs_chat_prompt(struct fs_model *fm, struct fs_stream *s, const char *base,
		   size_t base_len, char **text, size_t *len, struct err *err);
/* Generated text of s to its reader (thinking split apart as asked). */
void fs_chat_output(struct fs_model *fm, struct fs_stream *s, const char *text,
		    size_t n);
/* s ended: what the split held back. */
void fs_chat_output_end(struct fs_model *fm, struct fs_stream *s);
/*
 * A session's chat turn ended well: its messages get the exchange and its
 * conversation text their new rendering (fm->lock not held).
 */
int fs_chat_turn_end(struct fs_model *fm, struct fs_stream *s);
/* A generate turn: the messages become text of convo (fm->lock held). */
void fs_chat_turn_raw(struct fs_session *ss);
/* What a stream's split answer and a session's messages hold. */
void fs_chat_turn_free(struct fs_stream *s);
void fs_chat_session_free(struct fs_session *ss);

/* embed.c: an embed stream's vector into its answer (scheduler thread). */
static inline bool fs_gen_is_embed(enum fs_gen_kind k)
{
	return k == FS_GEN_EMBED || k == FS_GEN_EMBED_F32;
}
void fs_embed_output(struct fs_model *fm, struct fs_stream *s);

/* kvsnap.c: sessions/N/kv, snapshots (jobs on the scheduler thread). */
void fs_kvsnap_read_job(struct fs_model *fm, struct fs_job *job,
			bool cancelled);
/*
 * A write's bytes, taken piece by piece (the header checked at once,
 * each block put in the sequence); 0, or the refusal's negative errno
 * (after an errors line), which every later write repeats.
 */
int fs_kvsnap_write(struct fs_handle *h, const char *buf, size_t size);
/*
 * At a close: 0 (nothing written, or already taken), 1 when the snapshot
 * is whole and fs_kvsnap_restore_job must now give it to the session,
 * or the negative errno of a refused or truncated one.
 */
int fs_kvsnap_close(struct fs_handle *h);
void fs_kvsnap_restore_job(struct fs_model *fm, struct fs_job *job,
			   bool cancelled);
/* The handle goes: what its snapshot held goes back. */
void fs_kvsnap_release(struct fs_handle *h);

/* kvfile.c: the kv file and the KV options (on the scheduler thread). */
/* Another uid's sequences are shown as "other" to uid. */
int fs_text_kv(struct fs_model *fm, uid_t uid, struct fs_buf *b);
void fs_kvfile_write_job(struct fs_model *fm, struct fs_job *job,
			 bool cancelled);

#endif
