/* SPDX-License-Identifier: MIT */
/*
 * The tokenizer inside the engine: a vocabulary read from GGUF metadata
 * and the two algorithms llama.cpp uses for the models we run, token for
 * token as src/llama-vocab.cpp does them:
 *
 *   SPM  tokenizer.ggml.model "llama": SentencePiece bigram merging by
 *        score over the text with spaces as U+2581 and a leading space,
 *        byte fallback to <0xXX> tokens            (spm.c)
 *   BPE  tokenizer.ggml.model "gpt2": a pre-tokenizer per
 *        tokenizer.ggml.pre splits the text into words (pretokenize.c),
 *        GPT-2's byte-to-unicode map, merges by rank (bpe.c)
 *
 * Before either, the text of special tokens (control and user-defined,
 * and with parse_special the unknown token) is cut out of the text,
 * longest first (tokenize.c). vocab.c loads the vocabulary; detokenize.c
 * turns ids back into bytes, and detokenize_stream.c puts engine.h's
 * streaming detokenizer on a model.
 *
 * A vocabulary is immutable after engine_vocab_load() and may be used by
 * several threads at once.
 */
#ifndef LLMFS_ENGINE_TOKENIZER_H
#define LLMFS_ENGINE_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../io/io.h"

struct engine_vocab;
struct engine_model;

enum engine_vocab_type {
	ENGINE_VOCAB_SPM,
	ENGINE_VOCAB_BPE,
};

/* Token attributes, as llama.cpp's llama_token_attr bits. */
enum engine_token_attr {
	ENGINE_TOKEN_UNKNOWN = 1 << 0,
	ENGINE_TOKEN_UNUSED = 1 << 1,
	ENGINE_TOKEN_NORMAL = 1 << 2,
	ENGINE_TOKEN_CONTROL = 1 << 3,
	ENGINE_TOKEN_USER_DEFINED = 1 << 4,
	ENGINE_TOKEN_BYTE = 1 << 5,
	ENGINE_TOKEN_LSTRIP = 1 << 7,
	ENGINE_TOKEN_RSTRIP = 1 << 8,
};

/*
 * Read the vocabulary of g (tokenizer.ggml.*). Unsupported tokenizer
 * models or pre-tokenizers fail with -ENOTSUP and a message listing the
 * supported ones; missing or malformed arrays with -EINVAL. g may be
 * closed afterwards: the vocabulary copies what it keeps.
 */
int engine_vocab_load(struct engine_vocab **out, const struct io_gguf *g,
		      struct err *err);
void engine_vocab_free(struct engine_vocab *v);

enum engine_vocab_type engine_vocab_type(const struct engine_vocab *v);
uint32_t engine_vocab_size(const struct engine_vocab *v);
/* "llama" or "gpt2"; the pre-tokenizer name ("default" if none given). */
const char *engine_vocab_model_name(const struct engine_vocab *v);
const char *engine_vocab_pre_name(const struct engine_vocab *v);
/* -1 when the vocabulary has none. */
int32_t engine_vocab_bos(const struct engine_vocab *v);
int32_t engine_vocab_eos(const struct engine_vocab *v);
int32_t engine_vocab_eot(const struct engine_vocab *v);
bool engine_vocab_add_bos(const struct engine_vocab *v);
bool engine_vocab_add_eos(const struct engine_vocab *v);

/* The token's text as stored in the file (NULL for an id out of range). */
const char *engine_vocab_text(const struct engine_vocab *v, int32_t id,
			      size_t *len);
/* enum engine_token_attr bits; 0 for an id out of range. */
uint32_t engine_vocab_attr(const struct engine_vocab *v, int32_t id);
bool engine_vocab_is_eog(const struct engine_vocab *v, int32_t id);
bool engine_vocab_is_control(const struct engine_vocab *v, int32_t id);
/* The id of a token text, or -1. */
int32_t engine_vocab_find(const struct engine_vocab *v, const char *text,
			  size_t len);

/*
 * Tokenize len bytes as llama_tokenize(add_special, parse_special) does.
 * *tokens is malloc'ed (also for zero tokens); -ENOMEM, -EINVAL.
 */
int engine_vocab_tokenize(const struct engine_vocab *v, const char *text,
			  size_t len, bool add_special, bool parse_special,
			  int32_t **tokens, size_t *n, struct err *err);

/*
 * The bytes of one token as llama_token_to_piece(lstrip, special) writes
 * them: SPM U+2581 -> ' ', <0xXX> -> the byte; BPE GPT-2 code points ->
 * bytes; control and unknown tokens give nothing unless special. With
 * lstrip one leading space is dropped. Writes at most cap bytes into out
 * and returns the full length (call again with a bigger buffer if larger).
 */
size_t engine_vocab_piece(const struct engine_vocab *v, int32_t id, bool lstrip,
			  bool special, char *out, size_t cap);

/*
 * llama_detokenize(remove_special = false, unparse_special = special) of
 * n tokens: their pieces, the first one's leading space dropped for
 * SentencePiece, then llama.cpp's clean-up of spaces where the vocabulary
 * asks for it. *text is malloc'ed and NUL-terminated.
 */
int engine_vocab_detokenize(const struct engine_vocab *v, const int32_t *tokens,
			    size_t n, bool special, char **text, size_t *len,
			    struct err *err);

/*
 * The streaming detokenizer of engine.h on a vocabulary (engine.h's
 * engine_detokenizer_* call these with the model's vocabulary).
 */
struct engine_detokenizer;
size_t engine_vocab_detok_push(const struct engine_vocab *v,
			       struct engine_detokenizer *d, int32_t token,
			       char *out, size_t cap);
size_t engine_vocab_detok_flush(struct engine_detokenizer *d, char *out,
				size_t cap);
void engine_vocab_detok_context(const struct engine_vocab *v,
				struct engine_detokenizer *d,
				const int32_t *tokens, size_t n);

/*
 * One structure derived from the vocabulary and kept with it (engine/
 * grammar's token trie): _get returns it or NULL; _set stores p unless
 * another thread stored one first, and returns the one stored (the
 * caller frees p when it is not). free_fn frees it with the vocabulary.
 */
void *engine_vocab_cache_get(const struct engine_vocab *v);
void *engine_vocab_cache_set(const struct engine_vocab *v, void *p,
			     void (*free_fn)(void *));

/* Provided by engine/model.c. */
const struct engine_vocab *engine_model_vocab(const struct engine_model *m);

/* ---- inside engine/tokenizer*.c and pretokenize.c ---------------------- */

struct pretok;

/* The pre-tokenizer for tokenizer.ggml.pre = name; -ENOTSUP if unknown. */
int pretok_new(struct pretok **out, const char *name, struct err *err);
/*
 * The same with force_regex: PCRE2 also for the three patterns llama.cpp
 * scans by hand (for tests: the two must split alike).
 */
int pretok_new_regex(struct pretok **out, const char *name, bool force_regex,
		     struct err *err);
void pretok_free(struct pretok *p);
/* Settings llama.cpp ties to the pre-tokenizer name. */
bool pretok_clean_spaces(const struct pretok *p);
bool pretok_ignore_merges(const struct pretok *p);
bool pretok_forces_bos(const struct pretok *p);
bool pretok_no_bos(const struct pretok *p); /* ChatGLM: no BOS id */
/*
 * Split n code points into words: *lens (malloc'ed) receives the length
 * of each word in code points, in order, summing to n.
 */
int pretok_split(const struct pretok *p, const uint32_t *cps, size_t n,
		 size_t **lens, size_t *n_lens, struct err *err);

/* A growing array of token ids. */
struct tok_buf {
	int32_t *ids;
	size_t n, cap;
};

int tok_buf_push(struct tok_buf *b, int32_t id);

/* SPM over one fragment of text (spaces already U+2581). */
int spm_tokenize(const struct engine_vocab *v, const char *text, size_t len,
		 struct tok_buf *out);
/* BPE over one fragment of text (pre-tokenized inside). */
int bpe_tokenize(const struct engine_vocab *v, const char *text, size_t len,
		 struct tok_buf *out, struct err *err);

/* The rank of merge "left right", or -1. */
int32_t vocab_merge_rank(const struct engine_vocab *v, const char *left,
			 size_t left_len, const char *right, size_t right_len);
float vocab_score(const struct engine_vocab *v, int32_t id);
/* The token of one byte (<0xXX> for SPM, GPT-2's code point for BPE). */
int32_t vocab_byte_token(const struct engine_vocab *v, uint8_t byte);
const struct pretok *vocab_pretok(const struct engine_vocab *v);
/*
 * The ids in the order llama.cpp's token_to_id map (a libstdc++
 * unordered_map) iterates them, each text once. *order is malloc'ed;
 * returns its length, -ENOMEM, or -E2BIG past 5.9M tokens.
 */
int vocab_map_order(const struct engine_vocab *v, int32_t **order);

#endif
