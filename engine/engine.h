/* SPDX-License-Identifier: MIT */
/*
 * engine: from a GGUF file to tokens, computed as llama.cpp computes them.
 *
 *   model       hyper-parameters, tensor views and vocabulary of a loaded
 *               GGUF model, read-only once open (llama.cpp's llama_model);
 *               each tensor is reached through its io_placement record
 *   ctx         what computes with a model (llama.cpp's llama_context):
 *               the backends, their threads, the forward pass's scratch
 *               and the KV cache's pool. Several contexts may share one
 *               model.
 *   tokenizer   text <-> token ids (SentencePiece and byte-level BPE)
 *   seq         one sequence of a context: its position and its KV cache,
 *               paged from the context's pool; K and V types chosen per
 *               context (F16 by default, as llama.cpp's)
 *   forward     one pass of a context over a batch of its sequences, each
 *               with its tokens; writes the logits of each sequence's last
 *               token
 *   sampler     logits -> token (greedy at temperature 0)
 *   grammar     GBNF grammars and JSON schemas: the tokens allowed next
 *   chat        a conversation in the model's chat template (Jinja)
 *   generation  prompt -> streamed UTF-8 text, in prepare/forward/accept
 *               steps so that a scheduler can decode many at once
 *
 * Threading: a context and everything made from it is used by one thread
 * at a time (fs/'s scheduler); the engine may use more threads inside a
 * call. A model is read by its contexts' threads; it changes only through
 * engine_placement_apply, which no forward pass of any of them may run
 * beside.
 * Memory: the weights belong to io/; the engine frees only what it made.
 */
#ifndef LLMFS_ENGINE_H
#define LLMFS_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../io/io.h"

/* ---- memory budget ----------------------------------------------------- */

/*
 * One budget of bytes that several holders draw on (engine/budget.c): the
 * KV pools of the models that share it (engine_model_options.budget) and
 * whatever else their user counts in (fs/: prompts, snapshots, answers).
 * A holder charges before it allocates and releases after it frees. KV
 * charges leave a reserve free (a sixteenth of the total, 1 GiB at most)
 * so that a full cache never refuses a prompt. Thread-safe; its lock is a
 * leaf. Who calls engine_budget_new frees it, after every model using it.
 */
struct engine_budget;

enum engine_budget_use {
	ENGINE_BUDGET_KV,      /* KV blocks held or promised */
	ENGINE_BUDGET_BUFFERS, /* everything else the user counts in */
	ENGINE_BUDGET_USES,
};

struct engine_budget_stats {
	uint64_t total;
	uint64_t reserve; /* what KV charges leave free */
	uint64_t used[ENGINE_BUDGET_USES];
	uint64_t peak[ENGINE_BUDGET_USES]; /* the most each use held */
};

int engine_budget_new(struct engine_budget **out, uint64_t total,
		      struct err *err);
void engine_budget_free(struct engine_budget *b);
/*
 * Charge n bytes to use: 0; -EAGAIN when what is charged leaves no room
 * now (a release may make some); -ENOSPC when n is more than the use may
 * ever hold (engine_budget_limit). Nothing is charged on failure.
 */
int engine_budget_charge(struct engine_budget *b, enum engine_budget_use use,
			 uint64_t n);
/* Charge bytes that exist already (over the total if need be). */
void engine_budget_force(struct engine_budget *b, enum engine_budget_use use,
			 uint64_t n);
void engine_budget_release(struct engine_budget *b, enum engine_budget_use use,
			   uint64_t n);
/* The most use may hold: the total, less the reserve for KV. */
uint64_t engine_budget_limit(struct engine_budget *b,
			     enum engine_budget_use use);
void engine_budget_stats(struct engine_budget *b,
			 struct engine_budget_stats *st);
/*
 * released(arg) after each release, from the releasing thread, with no
 * lock of the budget held (but maybe the caller's: it must only signal).
 * Set it before the budget is shared.
 */
void engine_budget_notify(struct engine_budget *b, void (*released)(void *),
			  void *arg);
/* MemAvailable of /proc/meminfo in bytes, 0 if unknown. */
uint64_t engine_mem_available(void);
/*
 * The default budget: three quarters of what available leaves after
 * weights and 512 MiB of headroom, 64 MiB at least.
 */
uint64_t engine_budget_default(uint64_t available, uint64_t weights);

/* ---- model ------------------------------------------------------------- */

struct engine_model;

struct engine_model_options {
	uint32_t n_ctx; /* context length; 0 = the model's, capped at 4096 */
	/* threads that pack the matrices at open; 0 = one per physical core */
	uint32_t threads;
	/*
	 * true: leave the weights as the file has them. false (default):
	 * the CPU backend packs the Q8_0/Q4_K/Q6_K matrices it can in place,
	 * 16 rows to a panel as large as the rows (engine.md, "Packed
	 * panels"): at open after a synchronous load, or each tensor at the
	 * first forward pass that waits for it after an asynchronous one.
	 */
	bool no_pack;
	struct io_load_options load;
};

/* What a context computes with (engine_ctx_new). */
struct engine_ctx_options {
	uint32_t threads; /* 0 = one per physical core */
	/*
	 * The KV pool's cap in bytes; 0: the shared budget's KV limit, or
	 * without one the default budget of the memory left after the weights
	 */
	uint64_t kv_mem;
	/* shared with other contexts (borrowed; NULL: the pool's own cap only) */
	struct engine_budget *budget;
	const char *kv_type_k; /* "q8_0", ...; NULL = f16 */
	const char *kv_type_v;
	/*
	 * true: a batch (a prompt, or several sessions decoding together)
	 * gives every row the one-token path's bits, whatever the batch;
	 * false (default): the batch kernels' own summation order, within
	 * ../shared/README.md section 4's tolerance of it (Documentation/engine.md).
	 */
	bool batch_exact;
};

enum engine_arch {
	ENGINE_ARCH_LLAMA,
	ENGINE_ARCH_QWEN2,
	ENGINE_ARCH_QWEN3,
	ENGINE_ARCH_QWEN3MOE,
};

struct engine_model_info {
	enum engine_arch arch;
	const char *arch_name; /* general.architecture */
	const char *name;      /* general.name, or the file's stem */
	const char *path;
	uint32_t n_vocab;
	uint32_t n_embd;
	uint32_t n_layer;
	uint32_t n_head;
	uint32_t n_head_kv;
	uint32_t head_dim;
	uint32_t head_dim_v; /* of V */
	uint32_t n_ff;	     /* per expert for MoE */
	uint32_t n_expert;   /* 0 for dense models */
	uint32_t n_expert_used;
	uint32_t n_ctx_train; /* from metadata */
	uint32_t n_ctx;	      /* what sequences of this model get */
	bool n_ctx_given;     /* asked for, not the default */
	float rope_freq_base;
	float rms_norm_eps;
	uint64_t n_params; /* elements of all tensors */
	uint64_t tensor_bytes;
	const char
		*tokenizer_model;  /* "llama" (SentencePiece) or "gpt2" (BPE) */
	const char *tokenizer_pre; /* "qwen2", "llama-bpe", ... or "default" */
	const char *chat_template; /* NULL if the file has none */
	int32_t bos, eos, eot;	   /* -1 if the vocabulary has none */
	bool add_bos;
};

/*
 * Open and load a model (opt NULL: the defaults). Unsupported
 * architectures fail with -ENOTSUP and a message listing the supported
 * ones; a malformed file with -EINVAL. Free with engine_model_free(),
 * after every context made on it.
 */
int engine_model_open(struct engine_model **out, const char *path,
		      const struct engine_model_options *opt, struct err *err);
/*
 * Read the weights of a model opened with opt->load.defer: the tensors
 * placed meanwhile (engine_placement_apply on a context of m) on a device
 * with memory of its own, a GPU, straight from the file into it through
 * the staging ring (Documentation/loading.md), the rest into host memory
 * as a plain open reads them, then packed as it packs them. Until then
 * nothing may compute with m. A placement onto a host device other than
 * the load's (numaN) starts the load itself; this is then a no-op. 0, or
 * a negative errno with err (a short read: -EINVAL naming the file); m
 * is then only to be freed.
 */
int engine_model_load(struct engine_model *m, struct err *err);
void engine_model_free(struct engine_model *m);

/* ---- context ----------------------------------------------------------- */

struct engine_ctx;

/*
 * A context on m (borrowed: it must outlive the context), opt NULL: the
 * defaults. -EINVAL (a message) for a bad K/V type, -ENOMEM, -ENODEV
 * when no backend computes where the weights are. Free with
 * engine_ctx_free(), after every sequence of it.
 */
int engine_ctx_new(struct engine_ctx **out, struct engine_model *m,
		   const struct engine_ctx_options *opt, struct err *err);
void engine_ctx_free(struct engine_ctx *ctx);
/* The model the context computes with. */
struct engine_model *engine_ctx_model(const struct engine_ctx *ctx);
/*
 * Positions the sequences ctx starts from now on may reach: the model's
 * n_ctx, or fewer where a plan shrank it so that everything fits on a
 * GPU ('auto all-gpu-ctx'; any other 'auto' gives the model's back).
 */
uint32_t engine_ctx_n_ctx(const struct engine_ctx *ctx);

const struct engine_model_info *engine_model_info(const struct engine_model *m);
/* The parsed file and the loaded bytes (borrowed; owned by the model). */
const struct io_gguf *engine_model_gguf(const struct engine_model *m);
struct io_weights *engine_model_weights(struct engine_model *m);
/*
 * size bytes from off of tensor i's data as the file holds them (within
 * its bytes), into buf, whether or not the engine packed them
 * (io_placement.layout). Callers hold the weights still (no move).
 */
void engine_tensor_read(struct engine_model *m, uint64_t i, uint64_t off,
			size_t size, void *buf);

/*
 * The model's files and tensors as a reader outside the engine sees them
 * (fs/'s info, weights/ and weights/index), so that it never needs io/'s
 * GGUF or weights structures (model_tensors.c). Tensors are numbered as
 * the file lists them, from 0.
 */
struct engine_tensor_info {
	const char *name; /* as the file names it; owned by the model */
	const char *type; /* ggml's name ("q4_K"), "?" for an unknown type */
	uint32_t n_dims;
	int64_t ne[4];	 /* elements per dimension, unused = 1 */
	uint64_t bytes;	 /* of its data */
	uint64_t offset; /* absolute, in its file */
	/*
	 * where its bytes are now ("cpu", "numa0", "gpu0"): valid until a
	 * placement change, which the caller holds off
	 */
	const char *device;
};

uint64_t engine_model_n_tensors(const struct engine_model *m);
/* Tensor i into *out: 0, or -ENOENT past the last. */
int engine_model_tensor(const struct engine_model *m, uint64_t i,
			struct engine_tensor_info *out);
/* The number of the tensor called name: 0, or -ENOENT. */
int engine_model_tensor_find(const struct engine_model *m, const char *name,
			     uint64_t *i);
/*
 * Tensor i's bytes for a reader: *data points at them in host memory as
 * the file holds them, or is NULL when they must be copied out with
 * engine_tensor_read (packed for the kernels, or in a device's memory);
 * *bytes their size. -ENOENT past the last tensor, -EIO when its bytes
 * are not there (a failed load). Callers hold the weights still.
 */
int engine_tensor_bytes(struct engine_model *m, uint64_t i, const void **data,
			uint64_t *bytes);

/* Tensors and bytes of one type (engine_model_type_totals). */
struct engine_type_total {
	const char *type; /* ggml's name, "?" when the type has none */
	uint64_t tensors;
	uint64_t bytes;
};

/*
 * The model's tensors counted per known type, in the order of the type
 * numbers, types with no tensor left out: *out is malloc'ed (free(3)),
 * *n its entries. 0 or -ENOMEM.
 */
int engine_model_type_totals(const struct engine_model *m,
			     struct engine_type_total **out, size_t *n);

/* The GGUF files of the model (a split model has several), in order. */
uint32_t engine_model_n_files(const struct engine_model *m);
/* File i's path (owned by the model), NULL past the last. */
const char *engine_model_file_path(const struct engine_model *m, uint32_t i);
/*
 * The file type as llama.cpp and Ollama name it ("Q4_K_M"): the file's
 * general.file_type, or llama.cpp's guess from its tensors, with
 * *guessed set.
 */
const char *engine_model_file_type(const struct engine_model *m, bool *guessed);
/*
 * Merge up to max_bytes more of the weights into huge pages
 * (Documentation/loading.md; io_weights_collapse_step), *merged the bytes
 * this step merged: 1 while some is left, 0 when all is, a negative
 * errno when this kernel cannot. Not beside a placement change.
 */
int engine_model_merge_step(struct engine_model *m, size_t max_bytes,
			    size_t *merged);

/* ---- tokenizer --------------------------------------------------------- */

/*
 * Tokenize len bytes of text. add_special adds BOS when the vocabulary asks
 * for it; parse_special turns the text of special tokens (<|im_start|>)
 * into those tokens. *tokens is malloc'ed; the caller frees it.
 */
int engine_tokenize(const struct engine_model *m, const char *text, size_t len,
		    bool add_special, bool parse_special, int32_t **tokens,
		    size_t *n_tokens, struct err *err);

/* True for end-of-generation tokens (EOS, EOT, <|im_end|>, ...). */
bool engine_token_is_eog(const struct engine_model *m, int32_t token);

/*
 * Streaming detokenizer: feeds token after token and hands out only whole
 * UTF-8 characters, holding back the bytes of a character that spans
 * tokens. Special (control) tokens render as nothing, as llama.cpp's
 * detokenize does by default.
 */
struct engine_detokenizer {
	const struct engine_model *model;
	bool first; /* SentencePiece drops the leading space */
	uint8_t pending[8];
	size_t n_pending;
};

void engine_detokenizer_init(struct engine_detokenizer *d,
			     const struct engine_model *m);
/*
 * Append the text of token to out (capacity cap, at least 256 bytes is
 * always enough); returns the number of bytes written.
 */
size_t engine_detokenizer_push(struct engine_detokenizer *d, int32_t token,
			       char *out, size_t cap);
/* Flush what is held back at the end (invalid bytes become U+FFFD). */
size_t engine_detokenizer_flush(struct engine_detokenizer *d, char *out,
				size_t cap);
/*
 * Say which tokens precede the first one pushed (the prompt), so that the
 * text continues them as llama.cpp's completion output does: SentencePiece
 * keeps the first new token's leading space unless the last three prompt
 * tokens render as nothing (a lone BOS). Call after init, before push.
 */
void engine_detokenizer_context(struct engine_detokenizer *d,
				const int32_t *tokens, size_t n);

/* ---- sequences and the forward pass ------------------------------------ */

/*
 * The KV cache types: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 (llama.cpp's
 * -ctk/-ctv set), by ggml's names. -EINVAL for another name.
 */
int engine_kv_type_parse(const char *name, uint32_t *type);
/*
 * A KV memory size (--kv-mem): bytes, or with k, M or G (powers of 1024).
 * -EINVAL for a sign, a fraction, another suffix or an overflow.
 */
int engine_kv_bytes_parse(const char *text, uint64_t *bytes);
/* The name of a KV type, NULL for one that is not. */
const char *engine_kv_type_name(uint32_t type);
/*
 * K and V types for the context's sequences started from now on. -EINVAL
 * (and a message) for an unsupported type or one whose block does not
 * divide head_dim.
 */
int engine_ctx_set_kv_types(struct engine_ctx *ctx, uint32_t type_k,
			    uint32_t type_v, struct err *err);
/* K + V bytes per token for a type pair; 0 if the pair cannot be used. */
uint64_t engine_kv_bytes_per_token(const struct engine_model *m,
				   uint32_t type_k, uint32_t type_v);

struct engine_kv_stats {
	uint32_t type_k, type_v; /* of new sequences */
	uint64_t k_bytes_per_token, v_bytes_per_token;
	uint64_t budget;    /* the most it may hold: --kv-mem, or the
				* shared budget's KV limit if less */
	uint64_t committed; /* held or promised by reservations */
	uint64_t used;	    /* held by blocks */
	uint64_t free;	    /* what it could be promised now */
	uint64_t blocks;    /* blocks held (a shared one once) */
	uint64_t shared;    /* blocks held by several sequences */
	/*
	 * bytes the pool holds: the blocks' chunks (at most the budget,
	 * rounded up to a chunk of up to 16 blocks)
	 */
	uint64_t memory;
	uint32_t block_tokens; /* positions per block */
	uint64_t block_bytes;  /* of the current types */
};

/* The context's pool's figures; safe from any thread. */
void engine_kv_stats(struct engine_ctx *ctx, struct engine_kv_stats *st);

/*
 * One sequence: a position and its KV cache, up to info->n_ctx tokens,
 * its blocks taken from the context's pool as it grows.
 */
struct engine_seq;

int engine_seq_new(struct engine_ctx *ctx, struct engine_seq **out,
		   struct err *err);
void engine_seq_types(const struct engine_seq *s, uint32_t *type_k,
		      uint32_t *type_v);
void engine_seq_free(struct engine_seq *s);
/* The context whose pool the sequence's blocks are from. */
struct engine_ctx *engine_seq_ctx(const struct engine_seq *s);
uint32_t engine_seq_length(const struct engine_seq *s);
/* Positions the sequence may reach: n_ctx, or less after a reservation. */
uint32_t engine_seq_capacity(const struct engine_seq *s);
/* Forget everything from position n on (0 empties the sequence). */
void engine_seq_truncate(struct engine_seq *s, uint32_t n);
/*
 * Promise the sequence the blocks of n_tokens positions from the pool and
 * make n_tokens its capacity (when less than n_ctx). -ENOSPC (message)
 * when the budget could never hold them; -EAGAIN when other sequences
 * hold or were promised too much of it now (wait for one to end).
 */
int engine_seq_reserve(struct engine_seq *s, uint32_t n_tokens,
		       struct err *err);
/* Positions the whole budget could hold for s (its types), in blocks. */
uint32_t engine_seq_budget_tokens(const struct engine_seq *s);
/* The token ids of positions [0, engine_seq_length) (borrowed). */
const int32_t *engine_seq_tokens(const struct engine_seq *s);
/*
 * Make dst the first n positions of src: prefix reuse. dst holds src's
 * blocks of those positions (nothing is copied; the first write into a
 * block both hold copies that block), and its tokens. Same context and
 * K/V types, or -EINVAL; -ENOMEM (dst is then empty).
 */
int engine_seq_copy_prefix(struct engine_seq *dst, const struct engine_seq *src,
			   uint32_t n, struct err *err);

/*
 * Snapshots: a sequence's KV cache as bytes that a sequence of another
 * context of the same model (another process, after a remount) restores,
 * to go on exactly as the saved one would have (engine/snapshot.c has the
 * format; kv.md, "Snapshots"). A snapshot carries the caller's extra
 * bytes (fs/: the session's conversation) and names its model by a
 * digest of ENGINE_SNAPSHOT_MODEL bytes the caller gives (fs/: the SHA-256
 * of the model's file): the engine reads no file.
 */
#define ENGINE_SNAPSHOT_HEADER 128 /* bytes of a snapshot's header */
#define ENGINE_SNAPSHOT_MODEL 32   /* bytes of a model's digest */
#define ENGINE_SNAPSHOT_SUM 32	   /* bytes of each checksum (SHA-256) */
/* extra bytes longer than this are not a snapshot's */
#define ENGINE_SNAPSHOT_EXTRA_MAX (64ull << 20)

/*
 * s's snapshot, piece by piece to put(arg, bytes, n) (0, or a negative
 * errno that stops it): 0, put's error, or -ENOMEM.
 */
int engine_snapshot_save(const struct engine_seq *s,
			 const uint8_t model[ENGINE_SNAPSHOT_MODEL],
			 const void *extra, size_t extra_bytes,
			 int (*put)(void *arg, const void *p, size_t n),
			 void *arg);

/*
 * A snapshot's header (ENGINE_SNAPSHOT_HEADER bytes) checked for a
 * sequence of ctx, and against model's digest unless model is NULL: 0,
 * or -EINVAL with the reason (not a snapshot, another version or shape,
 * types the model cannot use, sizes, another model).
 */
int engine_snapshot_check(struct engine_ctx *ctx, const void *header,
			  const uint8_t model[ENGINE_SNAPSHOT_MODEL],
			  struct err *err);

/*
 * Restoring: a loader takes the snapshot piece by piece, as its bytes
 * arrive, so that the caller holds one piece at a time. Made from the
 * header (engine_snapshot_check's errors but the model's, which
 * engine_snapshot_load_model gives the caller to compare; -ENOMEM), it
 * says the size of the next piece it wants (0: it has them all) and takes
 * it: first the tokens, the extra bytes and their checksum (the
 * sequence's blocks are taken from the pool then: -ENOSPC), then each
 * block with its checksum. -EINVAL with the reason for a piece that is
 * not right (a checksum, a token the model has not). The caller frees
 * the loader (engine_snapshot_load_free: NULL does nothing), and the
 * sequence once it took it.
 */
struct engine_snapshot_load;

int engine_snapshot_load_new(struct engine_snapshot_load **out,
			     struct engine_ctx *ctx, const void *header,
			     struct err *err);
/* The digest of the model the snapshot was made from (borrowed). */
const uint8_t *engine_snapshot_load_model(const struct engine_snapshot_load *l);
/* Bytes of the whole snapshot, header included, as its header says. */
uint64_t engine_snapshot_load_total(const struct engine_snapshot_load *l);
/* Bytes of the next piece to take; 0 once the snapshot is whole. */
size_t engine_snapshot_load_need(const struct engine_snapshot_load *l);
/* Take the next piece: engine_snapshot_load_need bytes. */
int engine_snapshot_load_take(struct engine_snapshot_load *l, const void *piece,
			      struct err *err);
/* The extra bytes, once the first piece is taken (borrowed from l). */
const void *engine_snapshot_load_extra(const struct engine_snapshot_load *l,
				       size_t *len);
/*
 * The restored sequence, once the snapshot is whole (else NULL): the
 * caller owns it from then on.
 */
struct engine_seq *engine_snapshot_load_seq(struct engine_snapshot_load *l);
void engine_snapshot_load_free(struct engine_snapshot_load *l);

/* How tokens' states become one embedding: llama.cpp's llama_pooling_type. */
enum engine_pooling {
	ENGINE_POOLING_NONE = 0, /* no pooling: the last token's, as LAST */
	ENGINE_POOLING_MEAN = 1, /* the mean over the tokens */
	ENGINE_POOLING_CLS = 2,	 /* the first token's (position 0) */
	ENGINE_POOLING_LAST = 3, /* the last token's */
};

struct engine_batch_item {
	struct engine_seq *seq;
	const int32_t *tokens; /* appended at the sequence's position */
	size_t n_tokens;
	float *logits; /* n_vocab floats for the last token; may be NULL */
};

/*
 * From now on the forward passes over s write an embedding to embd
 * (n_embd floats): the final-normed state (what the output matrix reads)
 * of the token pooling picks (the last of an item; CLS: position 0), or,
 * for MEAN, added for every token (the caller zeroes embd and divides).
 * NULL stops it. embd is borrowed and must outlive that.
 */
void engine_seq_set_embedding(struct engine_seq *s, float *embd,
			      enum engine_pooling pooling);

/*
 * Run the tokens of every item (sequences of ctx) through the model,
 * appending them to their sequences. Each token is evaluated as
 * llama.cpp's one-token path does, so that the logits are the
 * reference's. -ENOSPC (nothing appended to any sequence) when a sequence
 * would pass its capacity or the KV pool's budget has no block left;
 * -EINVAL for a token id out of range or a sequence of another context.
 */
int engine_forward(struct engine_ctx *ctx, struct engine_batch_item *items,
		   size_t n_items, struct err *err);

/* ---- sampler ----------------------------------------------------------- */

struct engine_sampling {
	float temperature;     /* <= 0: greedy (argmax, lowest id on ties) */
	int32_t top_k;	       /* <= 0: off */
	float top_p;	       /* >= 1: off */
	float min_p;	       /* <= 0: off */
	float repeat_penalty;  /* 1: off */
	int32_t repeat_last_n; /* how many recent tokens the penalty sees */
	uint64_t seed;
};

/* llama.cpp's defaults: temp 0.8, top_k 40, top_p 0.95, min_p 0.05, ... */
void engine_sampling_defaults(struct engine_sampling *s);

struct engine_sampler;

int engine_sampler_new(struct engine_sampler **out,
		       const struct engine_sampling *params, uint32_t n_vocab,
		       struct err *err);
void engine_sampler_free(struct engine_sampler *s);
/*
 * Pick the next token from n_vocab logits (modified in place); history is
 * the sequence so far, for the repetition penalty.
 */
int32_t engine_sampler_sample(struct engine_sampler *s, float *logits,
			      const int32_t *history, size_t n_history);

/* ---- grammar ----------------------------------------------------------- */

/*
 * Constrained output: a grammar in llama.cpp's GBNF (root rule "root") for
 * one model's vocabulary. A token is allowed when llama.cpp's grammar
 * sampler would allow it; Documentation/generation.md says how the mask
 * is computed without testing every token.
 *
 * A grammar is reference counted (atomically, so any thread may take or
 * drop a reference), and caches what it learns about its stacks: the
 * matchers of one grammar must be used by one thread at a time (the
 * model's, as everything made from a model). Invalid input fails with
 * -EINVAL and a message naming the line and column (GBNF) or the JSON
 * pointer and the line and column (JSON schema).
 */
struct engine_grammar;

int engine_grammar_new(struct engine_grammar **out,
		       const struct engine_model *m, const char *gbnf,
		       size_t len, struct err *err);
/* A JSON schema, as llama.cpp's json_schema_to_grammar reads it. */
int engine_grammar_from_json_schema(struct engine_grammar **out,
				    const struct engine_model *m,
				    const char *schema, size_t len,
				    struct err *err);
/*
 * The GBNF of a JSON schema (no model needed): *gbnf is malloc'ed, the
 * caller frees it.
 */
int engine_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf,
			       struct err *err);
/* Any JSON object: llama.cpp's grammars/json.gbnf (format=json). */
extern const char engine_grammar_json[];

/* Take and drop references; the last unref frees. NULL is ignored. */
struct engine_grammar *engine_grammar_ref(struct engine_grammar *g);
void engine_grammar_unref(struct engine_grammar *g);

/* One answer's position in a grammar. */
struct engine_grammar_matcher;

int engine_grammar_matcher_new(struct engine_grammar_matcher **out,
			       struct engine_grammar *g, struct err *err);
void engine_grammar_matcher_free(struct engine_grammar_matcher *mt);
/*
 * The allowed tokens: bit t of the returned words (n_vocab bits, valid
 * until the next call) is set when token t may come next. -ENOMEM.
 */
int engine_grammar_matcher_mask(struct engine_grammar_matcher *mt,
				const uint64_t **mask, struct err *err);
/*
 * Set the logits of the tokens not allowed to -INFINITY. -EINVAL when no
 * token is allowed (the grammar cannot go on: it has no end).
 */
int engine_grammar_matcher_apply(struct engine_grammar_matcher *mt,
				 float *logits, struct err *err);
/*
 * Advance past token (which the mask allowed). An EOG token changes
 * nothing. -EINVAL (and the matcher unchanged) for a token the grammar
 * cannot take.
 */
int engine_grammar_matcher_accept(struct engine_grammar_matcher *mt,
				  int32_t token, struct err *err);
/* True when the text so far is a whole sentence of the grammar. */
bool engine_grammar_matcher_complete(const struct engine_grammar_matcher *mt);
/*
 * Finishing in time. The bytes the shortest way to finish the grammar
 * needs, from here (UINT32_MAX: it cannot finish): a bound on the tokens
 * needed, as every byte is a token of the vocabulary (byte-level BPE,
 * SentencePiece's byte fallback).
 */
uint32_t
engine_grammar_matcher_distance(const struct engine_grammar_matcher *mt);
/* Whether the grammar could still finish within left tokens after token. */
bool engine_grammar_matcher_fits(struct engine_grammar_matcher *mt,
				 int32_t token, uint32_t left);
/*
 * Keep in logits (already masked) only the best tokens, at most 64, after
 * which the grammar can still finish within left tokens; the others get
 * -INFINITY. Nothing changes when none can (the grammar cannot finish in
 * time whatever comes).
 */
int engine_grammar_matcher_restrict(struct engine_grammar_matcher *mt,
				    float *logits, uint32_t left,
				    struct err *err);

/* ---- chat templates ---------------------------------------------------- */

/*
 * A conversation as the text the model expects: the model's own Jinja
 * template (tokenizer.chat_template, run by engine/template/ as
 * @huggingface/jinja runs it), or, for a file without one or with one
 * that does not parse, a built-in format recognised from it as llama.cpp
 * does (Documentation/generation.md).
 */
struct engine_chat;

enum engine_chat_format {
	ENGINE_CHAT_RAW,    /* unknown template: the text as it is */
	ENGINE_CHAT_CHATML, /* <|im_start|>user ... (Qwen) */
	ENGINE_CHAT_LLAMA2, /* [INST] ... [/INST] */
	ENGINE_CHAT_LLAMA3, /* <|start_header_id|>user<|end_header_id|> ... */
};

struct engine_chat_message {
	const char *role;      /* "system", "user", "assistant", "tool" */
	const char *content;   /* UTF-8, NUL-terminated; NULL is "" */
	const char *reasoning; /* an assistant's reasoning_content, or NULL */
};

/* The special tokens a template writes, and what the tokenizer adds. */
struct engine_chat_tokens {
	const char *bos, *eos; /* their text; NULL if the vocabulary has none */
	bool add_bos, add_eos;
};

/*
 * The chat of a template text (tokenizer.chat_template), one of
 * llama.cpp's template names ("chatml", "llama2", "llama3"...), or NULL
 * for none (ChatML, as llama.cpp). A template that does not parse falls
 * back to a built-in format, and engine_chat_notice() says so. tokens may
 * be NULL. -ENOMEM only. Free with engine_chat_free().
 */
int engine_chat_new(struct engine_chat **out, const char *tmpl,
		    const struct engine_chat_tokens *tokens, struct err *err);
/* The same for a model: its template, its BOS and EOS. */
int engine_chat_for_model(struct engine_chat **out,
			  const struct engine_model *m, struct err *err);
void engine_chat_free(struct engine_chat *c);
/* "jinja" (the model's own), or the built-in "chatml", "llama2", "llama3", "raw". */
const char *engine_chat_kind(const struct engine_chat *c);
/* True when no format is known: messages are used as they are. */
bool engine_chat_is_raw(const struct engine_chat *c);
/* Why the model's template is not used (one line), or NULL. */
const char *engine_chat_notice(const struct engine_chat *c);

/* Thinking: what the template gets as enable_thinking. */
enum engine_think {
	ENGINE_THINK_ON,      /* true (llama.cpp's default) */
	ENGINE_THINK_OFF,     /* false */
	ENGINE_THINK_HIDE,    /* true; the caller shows only the answer */
	ENGINE_THINK_DEFAULT, /* left undefined: the template decides */
};

struct engine_chat_render {
	bool add_generation_prompt; /* end with the assistant's turn opened */
	enum engine_think think;
};

/*
 * Render n messages (o NULL: add_generation_prompt, thinking on). *out is
 * malloc'ed, NUL-terminated, *out_len bytes; the caller frees it. -EINVAL
 * with the template's message when it fails or refuses the conversation
 * (raise_exception: "Conversation roles must alternate..."), -ENOMEM.
 */
int engine_chat_render(const struct engine_chat *c,
		       const struct engine_chat_message *msg, size_t n,
		       const struct engine_chat_render *o, char **out,
		       size_t *out_len, struct err *err);

/* The built-in format a template text would get (tests, llmfs-run). */
enum engine_chat_format engine_chat_template_format(const char *tmpl);
const char *engine_chat_format_name(enum engine_chat_format f);

/* ---- reasoning ----------------------------------------------------------- */

#define ENGINE_THINK_OPEN "<think>"
#define ENGINE_THINK_CLOSE "</think>"
#define ENGINE_THINK_HOLD 32

/*
 * Does a rendered prompt end inside an open <think> block (DeepSeek-R1,
 * QwQ: the answer then starts with the reasoning)?
 */
bool engine_chat_opens_thinking(const char *prompt, size_t len);

/*
 * Streaming split of an answer into its reasoning (between <think> and
 * </think> at its start) and the answer proper (what follows, its leading
 * whitespace dropped). An answer without a block is all answer.
 */
struct engine_think_split {
	int state;
	char held[ENGINE_THINK_HOLD]; /* what may still be a tag */
	size_t n_held;
};

/* open: the prompt ended inside a block (engine_chat_opens_thinking). */
void engine_think_split_init(struct engine_think_split *t, bool open);
/*
 * Split len bytes; reasoning and answer each have room for len +
 * ENGINE_THINK_HOLD bytes and get their lengths in *n_reasoning, *n_answer.
 */
void engine_think_split_push(struct engine_think_split *t, const char *in,
			     size_t len, char *reasoning, size_t *n_reasoning,
			     char *answer, size_t *n_answer);
/* At the end: what was held back (room for ENGINE_THINK_HOLD each). */
void engine_think_split_flush(struct engine_think_split *t, char *reasoning,
			      size_t *n_reasoning, char *answer,
			      size_t *n_answer);

/* ---- generation -------------------------------------------------------- */

struct engine_generate_options {
	struct engine_sampling sampling;
	/*
	 * Only tokens this grammar allows are sampled (borrowed: the
	 * generation takes its own reference); NULL = free text.
	 */
	struct engine_grammar *grammar;
	/*
	 * Record each answer token's log-probability, with top_logprobs
	 * alternatives (at most ENGINE_LOGPROBS_MAX), for
	 * engine_generation_logprobs: the log-softmax of the model's raw
	 * logits, before penalties, grammar and temperature, as llama.cpp's
	 * n_probs and OpenAI's logprobs give them.
	 */
	bool logprobs;
	uint32_t top_logprobs;
	uint32_t max_tokens;	 /* 0 = until EOS or the context is full */
	const char *const *stop; /* stop strings, not part of the output */
	size_t n_stop;
	/* the prompt is one user message of this chat (NULL: raw text) */
	const struct engine_chat *chat;
	enum engine_think think; /* with chat */
	/*
	 * An embedding instead of text: the prompt tokenized as
	 * node-llama-cpp's embedding context does (special tokens as text,
	 * BOS/EOS as the vocabulary adds them), evaluated whole from an
	 * empty sequence, pooled as the model says; nothing is sampled.
	 */
	bool embed;
};

struct engine_generation_stats {
	uint32_t prompt_tokens;
	uint32_t prompt_evaluated; /* those not already in the sequence */
	uint32_t gen_tokens;
	double ttft_ms; /* from the first prepare to the first token */
	double prefill_ms;
	double decode_ms;  /* after the first token */
	double grammar_ms; /* in masks and grammar steps (part of the above) */
};

struct engine_generation;

/*
 * Tokenize (and template) the prompt. seq is borrowed and must outlive the
 * generation; m is the model of its context (else -EINVAL). The positions of seq that already hold the prompt's first
 * tokens are kept (a conversation's earlier turns, a copied prefix: see
 * engine_seq_copy_prefix) and only the rest is evaluated; the rest of seq
 * is dropped at the first prepare. The result is the same as evaluating
 * the whole prompt.
 */
int engine_generation_new(struct engine_generation **out,
			  struct engine_model *m, struct engine_seq *seq,
			  const char *prompt, size_t len,
			  const struct engine_generate_options *opt,
			  struct err *err);
void engine_generation_free(struct engine_generation *g);

/*
 * Fill *item with what the next forward pass must evaluate for g: the
 * prompt the first time, then the last sampled token. Returns 1 when an
 * item was filled, 0 when the generation has ended.
 */
int engine_generation_prepare(struct engine_generation *g,
			      struct engine_batch_item *item);
/*
 * After engine_forward() ran the item: sample, detokenize, check stop
 * strings and limits. Appends the new text to out (cap >= 1024) and sets
 * *len. Returns 1 if the generation goes on, 0 if it ended, negative errno.
 */
int engine_generation_accept(struct engine_generation *g, char *out, size_t cap,
			     size_t *len, struct err *err);
/* prepare + engine_forward + accept, for one generation alone. */
int engine_generation_step(struct engine_generation *g, char *out, size_t cap,
			   size_t *len, struct err *err);
const struct engine_generation_stats *
engine_generation_stats(const struct engine_generation *g);
/* The tokens of the prompt and of the answer so far. */
const int32_t *engine_generation_tokens(const struct engine_generation *g,
					size_t *n_prompt, size_t *n_total);
/*
 * An embed generation that ended: its vector, *n floats (n_embd);
 * borrowed, NULL before the end or for a text generation.
 */
const float *engine_generation_embedding(const struct engine_generation *g,
					 size_t *n);
/* The model's pooling ({arch}.pooling_type; none when absent). */
enum engine_pooling engine_model_pooling(const struct engine_model *m);
const char *engine_pooling_name(enum engine_pooling p);

#define ENGINE_LOGPROBS_MAX 20

struct engine_logprob {
	int32_t token;
	float logprob; /* natural log */
};

struct engine_token_logprobs {
	struct engine_logprob chosen; /* the token sampled */
	uint32_t n_top;
	struct engine_logprob top[ENGINE_LOGPROBS_MAX]; /* best first, ties:
							   lower id */
};

/*
 * One record per answer token so far (EOG included), when the options
 * asked for logprobs; NULL and 0 otherwise. Borrowed from g.
 */
const struct engine_token_logprobs *
engine_generation_logprobs(const struct engine_generation *g, size_t *n);
/*
 * The bytes of one token as llama.cpp's token_to_piece(special) gives
 * them (special tokens as their text); returns the full length, writing
 * at most cap bytes.
 */
size_t engine_token_piece(const struct engine_model *m, int32_t token,
			  char *out, size_t cap);

/* ---- planner ----------------------------------------------------------- */

/*
 * Where a model should live, as a pure function of the model's byte counts,
 * the devices and their bandwidths (engine/planner.c; the model behind the
 * estimates is in Documentation/placement.md). Every alternative gets an
 * estimated decode speed and a one-line reason. The choice:
 *
 *   all-gpu          everything (weights, KV for the context, scratch) fits
 *   all-gpu-ctx      else, if the context was not asked for: the largest
 *                    context that fits, everything on the GPU
 *   else the fastest estimate of those that fit of
 *   kv-in-ram        weights on the GPU with the KV cache of as many
 *                    layers as fit; the other layers' cache in host RAM,
 *                    their attention by the CPU (--no-kv-offload per layer)
 *   experts-in-ram   an MoE: all but the experts on the GPU, the experts
 *                    in host RAM, computed by the CPU or shipped per token
 *   all-cpu          everything in host RAM (also when nothing fits)
 *   split            a layer split is estimated, never chosen: the user
 *                    writes it ('blk.0-N gpu0')
 */
enum engine_plan_kind {
	ENGINE_PLAN_ALL_GPU,
	ENGINE_PLAN_ALL_GPU_CTX,
	ENGINE_PLAN_KV_IN_RAM,
	ENGINE_PLAN_EXPERTS_IN_RAM,
	ENGINE_PLAN_ALL_CPU,
	ENGINE_PLAN_SPLIT,
	ENGINE_PLAN_N,
};

/* The model's bytes as the planner sorts them. */
enum engine_plan_group {
	ENGINE_PLAN_LAYERS,  /* blk.N tensors but the experts */
	ENGINE_PLAN_EXPERTS, /* blk.N.*_exps */
	ENGINE_PLAN_INPUT,   /* token_embd */
	ENGINE_PLAN_OUTPUT,  /* output.weight, output_norm, the rest */
	ENGINE_PLAN_GROUPS
};

struct engine_plan_input {
	/* The model, bytes as stored (engine_plan_input_add_tensors). */
	uint32_t n_layer, n_embd, n_ff, n_vocab;
	uint32_t n_expert, n_expert_used; /* 0 for a dense model */
	uint64_t layer_bytes;		  /* blk.N tensors but the experts */
	uint64_t expert_bytes;		  /* blk.N.*_exps */
	uint64_t input_bytes;		  /* token_embd */
	uint64_t output_bytes; /* output.weight, output_norm, the rest */
	bool has_output;       /* false: token_embd is the output matrix too */
	/*
	 * The same bytes by weight type (io_type): a GPU reads each type at
	 * its decode product's rate (io_device_product_rate). A group's bytes
	 * not broken down here are read at the rate of a type without one.
	 */
	uint64_t type_bytes[ENGINE_PLAN_GROUPS][IO_TYPE_COUNT];
	/* The cache. */
	uint64_t kv_bytes_per_token; /* all layers, K + V, chosen types */
	uint32_t n_ctx;
	bool ctx_given; /* asked for: never shrunk */
	uint32_t n_seq; /* sequences whose cache must fit; 0 = 1 */
	uint32_t
		est_tokens; /* cached tokens the estimate assumes; 0 = n_ctx/2 */
	const char *home;   /* where all-cpu puts the weights; NULL = cpu */
	uint64_t
		host_own_bytes; /* host RAM this model holds already (free to it) */
	/* Costs; 0 takes the defaults of engine/planner.c. */
	double overhead_s;    /* fixed, per token */
	double crossing_s;    /* per hand-over between host and GPU */
	uint64_t gpu_reserve; /* VRAM the runtime keeps (context, workspace) */
	/* all-cpu's measured decode tokens/s: the host's step from it */
	double host_tok_s;
};

/* Sort n tensors into the byte counts of in (added to what is there). */
void engine_plan_input_add_tensors(struct engine_plan_input *in,
				   const struct io_gguf_tensor *t, uint64_t n);

struct engine_plan_alt {
	bool considered; /* false: does not apply here */
	bool fits;
	double tok_s;	     /* estimated decode tokens/s; 0 if it cannot run */
	uint64_t gpu_bytes;  /* weights + KV + scratch on the GPU */
	uint64_t host_bytes; /* weights + KV in host RAM */
	uint32_t n_ctx;	     /* the context it gives */
	uint32_t gpu_layers; /* split: blk.0 .. gpu_layers-1 on the GPU */
	char why[256];	     /* one line */
	/* decode tokens/s measured with this placement; 0: not measured */
	double measured_tok_s;
};

struct engine_plan {
	enum engine_plan_kind chosen;
	char gpu[16];	/* the GPU planned for; "" if none */
	char host[16];	/* host memory for what is not on the GPU */
	char home[16];	/* all-cpu's device (the load's) */
	char near[16];	/* the GPU plans' host memory (the GPU's node) */
	uint32_t n_ctx; /* the context the chosen plan gives */
	struct engine_plan_alt alt[ENGINE_PLAN_N];
	/*
	 * The costs, and whether measured (else assumed): the GPU plans'
	 * step and crossing, the GPU's reserve (io_device.reserve_bytes and
	 * what comes after the open), all-cpu's step.
	 */
	double step_s, cross_s, host_step_s;
	uint64_t reserve;
	bool step_measured, cross_measured, reserve_measured;
	bool host_step_measured;
};

/*
 * Make the plan. Pure: reads only its arguments. -EINVAL (one line) when
 * the set has no cpu device or a bandwidth the estimates need is unknown
 * (io_device_set_measure fills the host's).
 */
int engine_plan_make(struct engine_plan *plan,
		     const struct engine_plan_input *in,
		     const struct io_device_set *devs, struct err *err);
/* The input for a context: its model's tensors, context and cache types. */
void engine_plan_input_of_ctx(struct engine_ctx *ctx,
			      struct engine_plan_input *in);
const char *engine_plan_kind_name(enum engine_plan_kind kind);
/*
 * The plan as the placement file shows it: a "plan" line, one "estimate"
 * line per alternative considered, a "measured" line per alternative with
 * a measured speed, and, with a GPU, a "costs" line (the step and
 * crossing costs, measured or assumed). Returns the length written into
 * buf (truncated at cap, as snprintf).
 */
size_t engine_plan_describe(const struct engine_plan *plan, char *buf,
			    size_t cap);

/* ---- GPUs -------------------------------------------------------------- */

/*
 * Add the machine's CUDA GPUs to set (after its host devices), measured
 * by the CUDA module (build/lib/llmfs-cuda.so, loaded at the first call;
 * engine/cuda/loader.c says where it is looked for). A GPU that set
 * already has by name (described with --devices) is left as described.
 * Returns the number added, or a negative errno with the reason: -ENOENT
 * (no module, or one that cannot load: no CUDA libraries), -ENODEV (no
 * driver or no device), -EIO (the probe's process died). Callers go on
 * with the CPU either way. The module probes in a child process, so the
 * caller's process has not initialised CUDA and may still fork children
 * that compute on the GPU (a daemon, Check's tests): CUDA works in no
 * child of a process that initialised it.
 */
int engine_gpu_probe(struct io_device_set *set, struct err *err);

/* ---- placement --------------------------------------------------------- */

/*
 * The `placement` file: one line per tensor (name type shape bytes
 * device), a per-layer summary, totals per device. *text is malloc'ed.
 */
int engine_placement_format(struct engine_ctx *ctx, char **text, size_t *len,
			    struct err *err);
/*
 * Apply one placement command ("blk.0-13 gpu0", "experts cpu",
 * "output numa1", "kv blk.20-35 cpu", "auto", "auto kv-in-ram"; the
 * grammar is engine/placement.c's). -EINVAL for a bad command or an
 * unknown device, -ENOSPC when the device has no room; nothing moves then.
 * The weights are the model's: no forward pass of any context of it may
 * run meanwhile.
 */
int engine_placement_apply(struct engine_ctx *ctx, const char *command,
			   struct err *err);
/*
 * A tool's --placement LINE (NULL: none), then with cpu_moe a MoE's
 * experts to the CPU (llama.cpp's --cpu-moe): an 'all DEV' line becomes
 * 'all-but-experts DEV', so that the experts never pass through DEV's
 * memory. As engine_placement_apply.
 */
int engine_placement_apply_cpu_moe(struct engine_ctx *ctx, const char *line,
				   bool cpu_moe, struct err *err);
/*
 * Which alternative of the planner the model's placement is now: all-cpu
 * (every layer and the output on the host), all-gpu (all of them on a
 * GPU), all-gpu-ctx (so, with the context shrunk: engine_ctx_n_ctx),
 * kv-in-ram (so, with some layers' KV cache in RAM: 'kv ... cpu'),
 * experts-in-ram (all but the experts on a GPU), split (blk.0..g-1 on a
 * GPU, the rest and the output on the host); ENGINE_PLAN_N for none of
 * them. token_embd is left out (every plan may keep it in RAM).
 */
enum engine_plan_kind engine_placement_plan_kind(struct engine_ctx *ctx);
/*
 * Note a decode speed (tokens/s) measured with the placement as it is
 * now: the plan's text shows the last one of each alternative beside its
 * estimate (placement_plan.c). Any thread.
 */
void engine_placement_note_decode(struct engine_ctx *ctx, double tok_s);
/*
 * The plan of ctx's model as `placement` ends: engine_plan_describe with
 * the speeds noted. measure: measure the host's memory bandwidth first
 * if it is unknown (io_device_set_measure: 128 MiB read, a tenth of a
 * second), as `placement` and llmfs-bench --plan do; status does not,
 * so that reading it costs neither memory nor time. -EINVAL (one line)
 * when no plan can be made (a bandwidth unknown, among others).
 */
int engine_placement_plan_text(struct engine_ctx *ctx, char *buf, size_t cap,
			       bool measure, struct err *err);

#endif
