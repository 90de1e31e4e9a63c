/* SPDX-License-Identifier: MIT */
/*
 * engine/grammar: constrained decoding, shared by the files of this folder.
 *
 *   parse.c    GBNF text -> rules (llama.cpp's grammar-parser rules, its
 *              element encoding and its rewriting of * + ? {m,n} and groups)
 *   vocab.c    the vocabulary as the grammar sees it: each token's bytes
 *              decoded into code points as llama.cpp's decode_utf8 does,
 *              in a prefix tree (trie) of code points
 *   stack.c    the pushdown stacks, hash-consed into nodes, their closure
 *              (llama_grammar_advance_stack) and one code point's step
 *   mask.c     the allowed tokens of a set of stacks: per-key caches of
 *              what a stack's top allows whatever lies below, the rest
 *              resolved per stack (Documentation/generation.md)
 *   matcher.c  one generation's state: stacks, partial UTF-8, accept
 *   grammar.c  engine.h's API: compile, reference counts
 *   schema*.c  JSON schema -> GBNF (llama.cpp's json_schema_to_grammar;
 *              schema.h says which file holds what)
 *
 * The language accepted is exactly llama.cpp's (src/llama-grammar.cpp):
 * a token is allowed when its code points can be consumed from some stack,
 * its trailing partial UTF-8 sequence (if any) could still match, EOG
 * tokens only once a stack is empty; the data structures are ours.
 */
#ifndef LLMFS_ENGINE_GRAMMAR_INTERNAL_H
#define LLMFS_ENGINE_GRAMMAR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../engine.h"

/* ---- rules (parse.c) --------------------------------------------------- */

/* llama.cpp's llama_gretype, same values and meaning. */
enum gram_type {
	GRAM_END = 0,  /* end of a rule */
	GRAM_ALT = 1,  /* start of another alternative */
	GRAM_REF = 2,  /* value: rule id */
	GRAM_CHAR = 3, /* value: code point; CHAR_ALT/RNG_UPPER may follow */
	GRAM_CHAR_NOT = 4,  /* [^...] */
	GRAM_RNG_UPPER = 5, /* the preceding char is a range's lower end */
	GRAM_CHAR_ALT = 6,  /* another char of the same class */
	GRAM_CHAR_ANY = 7,  /* . */
	GRAM_TOKEN = 8,	    /* value: token id, <[id]> or <text> */
	GRAM_TOKEN_NOT = 9, /* !<...> */
};

struct gram_elem {
	uint32_t type;
	uint32_t value;
};

/*
 * All rules in one array: rule r's alternatives start at rule_start[r],
 * separated by GRAM_ALT, the last one closed by GRAM_END. A position is an
 * index into elems.
 */
struct gram_rules {
	struct gram_elem *elems;
	uint32_t n_elems;
	uint32_t *rule_start; /* n_rules */
	uint32_t n_rules;
	uint32_t root;
	char **names; /* n_rules, for messages */
};

/*
 * Tokenizes a <text> token reference: 1 and *id when it is one token of
 * the vocabulary (parse_special), 0 otherwise. NULL: no vocabulary.
 */
typedef int (*gram_token_lookup)(void *ctx, const char *text, size_t len,
				 int32_t *id);

/*
 * Parse GBNF text (len bytes; NUL refused) with the root rule "root".
 * -EINVAL with "line L column C: what" in err for a syntax error, an
 * undefined rule, a missing root or left recursion. n_vocab bounds <[id]>.
 */
int gram_parse(struct gram_rules *out, const char *text, size_t len,
	       gram_token_lookup lookup, void *ctx, uint32_t n_vocab,
	       struct err *err);
void gram_rules_free(struct gram_rules *r);

static inline bool gram_is_end(const struct gram_elem *e)
{
	return e->type == GRAM_END || e->type == GRAM_ALT;
}

static inline bool gram_is_char(uint32_t type)
{
	return type == GRAM_CHAR || type == GRAM_CHAR_NOT ||
	       type == GRAM_CHAR_ANY;
}

/* ---- vocabulary (vocab.c) ---------------------------------------------- */

/* A UTF-8 sequence cut short: llama.cpp's llama_partial_utf8. */
struct gram_partial {
	uint32_t value;
	int32_t n_remain; /* bytes still missing; -1 invalid; 0 none */
};

/*
 * The trie: node 0 is the root (no code point); nodes are in depth-first
 * preorder, so node n's subtree is [n, end[n]) and its children start at
 * n + 1. Tokens are numbered in the same order ("rank"): the tokens whose
 * code points end at n are ranks [tok_lo[n], tok_lo[n + 1]) and the
 * subtree's are [tok_lo[n], tok_lo[end[n]]). A token with a trailing
 * partial sequence sits at the node of its whole code points.
 */
struct gram_vocab {
	uint32_t n_vocab;
	uint32_t n_nodes;
	uint32_t *cp;	  /* n_nodes: the code point into the node */
	uint32_t *end;	  /* n_nodes */
	uint32_t *tok_lo; /* n_nodes + 1 */
	uint32_t n_ranked;
	int32_t *rank_id;		/* n_ranked: token id of each rank */
	uint32_t *id_rank;		/* n_vocab: UINT32_MAX if none */
	struct gram_partial *rank_tail; /* n_ranked */
	uint8_t *eog;			/* n_vocab: end-of-generation */
	int32_t *eog_ids;		/* the same as a list */
	uint32_t n_eog;
	uint8_t **piece;     /* n_vocab: token_to_piece(special) */
	uint32_t *piece_len; /* n_vocab */
	int32_t *cont;	     /* tokens starting with 10xxxxxx */
	uint32_t n_cont;
	int32_t *bytes; /* tokens of one byte (not EOG) */
	uint32_t n_bytes;
	char *arena;
};

/* Build (or get the cached) grammar view of m's vocabulary; borrowed. */
int gram_vocab_get(const struct engine_model *m, const struct gram_vocab **out,
		   struct err *err);
void gram_vocab_free(struct gram_vocab *v);

/*
 * llama.cpp's decode_utf8(piece, partial): the code points of len bytes
 * (stopping at a NUL), continuing *partial, into cps (capacity len + 4).
 * Returns the count and updates *partial; an invalid sequence gives 0
 * code points and n_remain -1.
 */
size_t gram_decode_utf8(const uint8_t *s, size_t len,
			struct gram_partial *partial, uint32_t *cps);

/* ---- stacks (stack.c) -------------------------------------------------- */

/*
 * A stack is a node: (pos, below). Node GRAM_EMPTY is the empty stack
 * (the grammar is complete), GRAM_BOTTOM the unknown rest of a stack in a
 * cache key (mask.c). A stack's top pos is a char or token element; the
 * nodes under it hold return positions (never a rule's end: a reference
 * that ends its alternative is a tail call, as in llama.cpp).
 */
#define GRAM_EMPTY 0u
#define GRAM_BOTTOM 1u

struct gram_node {
	uint32_t pos;
	uint32_t below;
};

struct gram_set {
	uint32_t *v; /* node ids, sorted, unique */
	uint32_t n, cap;
};

struct gram_stacks {
	const struct gram_rules *rules;
	struct gram_node *node; /* n_nodes */
	uint32_t n_nodes, cap_nodes;
	uint32_t *table; /* open addressing: node id + 1 */
	uint32_t table_cap;
	/* closure of each node, computed once: ids into closure_pool */
	uint32_t *closure_at; /* per node: offset + 1, 0 = not yet */
	uint32_t *closure_n;
	uint32_t *closure_pool;
	uint32_t n_pool, cap_pool;
	uint32_t *seen; /* per node: stamp of the closure walk */
	uint32_t *succ; /* per node: its stack after one character + 1 */
	uint32_t stamp;
	uint32_t *work;
	uint32_t n_work, cap_work;
	/* per position: the element after a char class, its ASCII bitmap */
	uint32_t *char_next;  /* n_elems */
	uint64_t (*ascii)[2]; /* n_elems */
};

int gram_stacks_init(struct gram_stacks *st, const struct gram_rules *rules);
void gram_stacks_free(struct gram_stacks *st);
/* The node (pos, below), made if new; UINT32_MAX when out of memory. */
uint32_t gram_node(struct gram_stacks *st, uint32_t pos, uint32_t below);
/*
 * Add to out the stacks a raw stack (top pos of any kind but a rule's end)
 * expands to: llama_grammar_advance_stack. -ENOMEM.
 */
int gram_expand(struct gram_stacks *st, uint32_t node, struct gram_set *out);
/*
 * The stacks after code point c from the stacks of in (token tops, the
 * empty stack and GRAM_BOTTOM go nowhere): llama_grammar_accept. -ENOMEM.
 */
int gram_step(struct gram_stacks *st, const struct gram_set *in, uint32_t c,
	      struct gram_set *out);
bool gram_match_char(const struct gram_stacks *st, uint32_t pos, uint32_t c);
bool gram_match_partial(const struct gram_rules *r, uint32_t pos,
			struct gram_partial p);

int gram_set_add(struct gram_set *s, uint32_t id);
void gram_set_clear(struct gram_set *s);
void gram_set_free(struct gram_set *s);
int gram_set_copy(struct gram_set *dst, const struct gram_set *src);
bool gram_set_has(const struct gram_set *s, uint32_t id);

/* ---- masks (mask.c) ---------------------------------------------------- */

struct gram_mask_cache;

int gram_mask_cache_new(struct gram_mask_cache **out, struct gram_stacks *st,
			const struct gram_vocab *v);
void gram_mask_cache_free(struct gram_mask_cache *c);
/*
 * The allowed tokens after the stacks of set, no partial UTF-8 pending:
 * bit t of mask (n_vocab bits, cleared first). -ENOMEM.
 */
int gram_mask_fill(struct gram_mask_cache *c, const struct gram_set *set,
		   uint64_t *mask);
/*
 * Whether token t (its code points cps, trailing partial tail) can be
 * consumed from the stacks of set: the direct check, for tokens after a
 * partial UTF-8 sequence and for tests.
 */
int gram_token_allowed(struct gram_stacks *st, const struct gram_set *set,
		       int32_t t, const uint32_t *cps, size_t n,
		       struct gram_partial tail, bool *ok);

struct gram_mask_stats {
	uint64_t keys, key_nodes_walked, resolutions, resolution_nodes;
};
void gram_mask_stats(const struct gram_mask_cache *c,
		     struct gram_mask_stats *s);

/* ---- matchers (grammar.c) ---------------------------------------------- */

/*
 * Whether token t may come next, decided for t alone as llama.cpp's
 * grammar sampler does (its piece decoded after the pending bytes, then
 * run through the stacks): what a mask must agree with. -ENOMEM.
 */
int gram_matcher_direct(struct engine_grammar_matcher *mt, int32_t t, bool *ok);
const struct gram_vocab *
gram_matcher_vocab(const struct engine_grammar_matcher *mt);

#endif
