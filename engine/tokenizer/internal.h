/* SPDX-License-Identifier: MIT */
/*
 * The vocabulary's layout, shared by engine/tokenizer*.c and
 * engine/tokenizer/detokenize.c only.
 */
#ifndef LLMFS_ENGINE_TOKENIZER_INTERNAL_H
#define LLMFS_ENGINE_TOKENIZER_INTERNAL_H

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "tokenizer.h"
#include "unicode.h"

struct vocab_token {
	uint32_t off, len; /* text in engine_vocab.arena */
	float score;
	uint32_t attr; /* enum engine_token_attr */
};

/* Merge "left right" of rank = index: left then right in merge_arena. */
struct vocab_merge {
	uint32_t off, left_len, right_len;
};

struct engine_vocab {
	enum engine_vocab_type type;
	char *model_name, *pre_name;
	uint32_t n_tokens;
	struct vocab_token *tokens;
	char *arena;
	uint32_t *tok_table; /* open addressing: id + 1, 0 = empty */
	size_t tok_cap;	     /* a power of two */

	uint32_t n_merges;
	struct vocab_merge *merges;
	char *merge_arena;
	uint32_t *merge_table; /* rank + 1 */
	size_t merge_cap;

	int32_t bos, eos, eot, unk, pad;
	int32_t *eog;
	size_t n_eog;
	int32_t *special; /* control/user-defined/unknown, longest first */
	size_t n_special;

	bool add_bos, add_eos, add_space_prefix, clean_spaces, ignore_merges;
	struct pretok *pretok; /* BPE only */

	/* engine_vocab_cache_*: built by its first user, freed with v */
	_Atomic(void *) cache;
	void (*cache_free)(void *);
};

/*
 * The merge loop both tokenizers share: a word is a linked list of symbols
 * (byte runs of the text), and the candidate merges of neighbours wait in
 * a heap that pops the highest priority first, the leftmost on ties.
 * SentencePiece's priority is the merged token's score, BPE's is minus the
 * merge rank (ranks are below 2^24, exact in a float).
 */
struct merge_sym {
	int32_t prev, next;
	size_t off, n;
};

struct merge_bigram {
	int32_t left, right;
	float priority;
	size_t size;
};

struct merge_heap {
	struct merge_bigram *b;
	size_t n, cap;
};

/* -ENOMEM if the heap cannot grow (it is left as it was). */
int merge_heap_push(struct merge_heap *h, struct merge_bigram x);
/* h must not be empty. */
struct merge_bigram merge_heap_pop(struct merge_heap *h);
/* Bytes of the UTF-8 sequence a lead byte starts (1 for a stray byte). */
size_t merge_utf8_len(uint8_t lead);

/* A piece of the text to tokenize, or a special token cut out of it. */
struct frag {
	int32_t token; /* -1 for text */
	size_t off, len;
};

struct frag_list {
	struct frag *f;
	size_t n, cap;
};

static inline int frag_push(struct frag_list *l, int32_t token, size_t off,
			    size_t len)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct frag *f = realloc(l->f, cap * sizeof(*f));

		if (!f)
			return -ENOMEM;
		l->f = f;
		l->cap = cap;
	}
	l->f[l->n].token = token;
	l->f[l->n].off = off;
	l->f[l->n].len = len;
	l->n++;
	return 0;
}

#endif
