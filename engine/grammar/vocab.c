// SPDX-License-Identifier: MIT
/*
 * The vocabulary as a grammar sees it, built once per vocabulary and kept
 * with it (engine_vocab_cache_set): each token's piece as llama.cpp's
 * token_to_piece(special = true) gives it, decoded into code points by
 * llama.cpp's decode_utf8, and all of them in one trie of code points so
 * that a mask is a walk of the trie, not a test of 151,936 strings.
 *
 * Tokens that no grammar state can accept when no partial UTF-8 sequence
 * is pending stay out of the trie: an empty piece, one starting with a NUL
 * byte, one that does not decode (a stray continuation byte). EOG tokens
 * stay out too (they are allowed exactly when a stack is empty). Tokens
 * starting with a continuation byte are listed apart (cont): they are the
 * only candidates after a token that ended inside a character.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../tokenizer/tokenizer.h"
#include "internal.h"

size_t gram_decode_utf8(const uint8_t *s, size_t len,
			struct gram_partial *partial, uint32_t *cps)
{
	static const int len_of[] = { 1, 1, 1, 1, 1, 1, 1, 1,
				      0, 0, 0, 0, 2, 2, 3, 4 };
	const uint8_t *end = s + len;
	uint32_t value = partial->value;
	int remain = partial->n_remain;
	size_t n = 0;

	/* continue the character the last piece began */
	while (s < end && *s && remain > 0) {
		if ((*s >> 6) != 2) {
			partial->value = 0;
			partial->n_remain = -1;
			return 0;
		}
		value = (value << 6) + (*s & 0x3f);
		s++;
		remain--;
	}
	if (partial->n_remain > 0 && remain == 0)
		cps[n++] = value;
	while (s < end && *s) {
		remain = len_of[*s >> 4] - 1;
		if (remain < 0) {
			partial->value = 0;
			partial->n_remain = -1;
			return 0;
		}
		value = *s & ((1u << (7 - remain)) - 1);
		s++;
		while (s < end && *s && remain > 0) {
			value = (value << 6) + (*s & 0x3f);
			s++;
			remain--;
		}
		if (remain == 0)
			cps[n++] = value;
	}
	partial->value = value;
	partial->n_remain = remain;
	return n;
}

struct vocab_entry {
	int32_t id;
	uint32_t off, n; /* code points in the pool */
	struct gram_partial tail;
};

static int vocab_cmp(const void *pa, const void *pb, void *arg)
{
	const struct vocab_entry *a = pa, *b = pb;
	const uint32_t *pool = arg;
	uint32_t n = a->n < b->n ? a->n : b->n;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t x = pool[a->off + i], y = pool[b->off + i];

		if (x != y)
			return x < y ? -1 : 1;
	}
	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

void gram_vocab_free(struct gram_vocab *v)
{
	if (!v)
		return;
	free(v->cp);
	free(v->end);
	free(v->tok_lo);
	free(v->rank_id);
	free(v->id_rank);
	free(v->rank_tail);
	free(v->eog);
	free(v->eog_ids);
	free(v->piece);
	free(v->piece_len);
	free(v->cont);
	free(v->bytes);
	free(v->arena);
	free(v);
}

static void vocab_free_any(void *p)
{
	gram_vocab_free(p);
}

/* The pieces of every token into one arena. */
static int vocab_pieces(struct gram_vocab *v, const struct engine_vocab *ev)
{
	size_t total = 0, off = 0;
	uint32_t i;

	for (i = 0; i < v->n_vocab; i++) {
		v->piece_len[i] = (uint32_t)engine_vocab_piece(
			ev, (int32_t)i, false, true, NULL, 0);
		total += v->piece_len[i];
	}
	v->arena = malloc(total + 1);
	if (!v->arena)
		return -ENOMEM;
	for (i = 0; i < v->n_vocab; i++) {
		v->piece[i] = (uint8_t *)v->arena + off;
		engine_vocab_piece(ev, (int32_t)i, false, true, v->arena + off,
				   v->piece_len[i]);
		off += v->piece_len[i];
		v->eog[i] = engine_vocab_is_eog(ev, (int32_t)i);
		if (v->eog[i])
			v->eog_ids[v->n_eog++] = (int32_t)i;
		else if (v->piece_len[i] == 1)
			v->bytes[v->n_bytes++] = (int32_t)i;
	}
	return 0;
}

/* The decodable tokens, sorted by code points, and the cont list. */
static int vocab_entries(struct gram_vocab *v, struct vocab_entry **out,
			 uint32_t **pool_out, uint32_t *n_out)
{
	size_t pool_n = 0;
	uint32_t *pool, n = 0;
	struct vocab_entry *e;

	for (uint32_t i = 0; i < v->n_vocab; i++)
		pool_n += v->piece_len[i] + 1;
	pool = malloc(pool_n * sizeof(*pool) + 16);
	e = malloc(v->n_vocab * sizeof(*e));
	v->cont = malloc(v->n_vocab * sizeof(*v->cont));
	if (!pool || !e || !v->cont) {
		free(pool);
		free(e);
		return -ENOMEM;
	}
	pool_n = 0;
	for (uint32_t i = 0; i < v->n_vocab; i++) {
		struct gram_partial tail = { 0, 0 };
		const uint8_t *s = v->piece[i];
		size_t k;

		if (v->eog[i] || v->piece_len[i] == 0 || s[0] == 0)
			continue;
		if ((s[0] >> 6) == 2)
			v->cont[v->n_cont++] = (int32_t)i;
		k = gram_decode_utf8(s, v->piece_len[i], &tail, pool + pool_n);
		if (tail.n_remain < 0)
			continue;
		e[n].id = (int32_t)i;
		e[n].off = (uint32_t)pool_n;
		e[n].n = (uint32_t)k;
		e[n].tail = tail;
		pool_n += k;
		n++;
	}
	qsort_r(e, n, sizeof(*e), vocab_cmp, pool);
	*out = e;
	*pool_out = pool;
	*n_out = n;
	return 0;
}

/* The trie in depth-first preorder from the sorted entries. */
static int vocab_trie(struct gram_vocab *v, const struct vocab_entry *e,
		      const uint32_t *pool, uint32_t n)
{
	uint32_t cap = 1024, depth = 0, *path, path_cap = 64;
	uint32_t *cp = malloc(cap * sizeof(*cp));
	uint32_t *end = malloc(cap * sizeof(*end));
	uint32_t *lo = malloc((cap + 1) * sizeof(*lo));

	path = malloc(path_cap * sizeof(*path));
	v->rank_id = malloc((n ? n : 1) * sizeof(*v->rank_id));
	v->id_rank = malloc(v->n_vocab * sizeof(*v->id_rank));
	v->rank_tail = malloc((n ? n : 1) * sizeof(*v->rank_tail));
	if (!cp || !end || !lo || !path || !v->rank_id || !v->rank_tail ||
	    !v->id_rank)
		goto nomem;
	memset(v->id_rank, 0xff, v->n_vocab * sizeof(*v->id_rank));
	cp[0] = 0;
	lo[0] = 0;
	path[0] = 0;
	v->n_nodes = 1;
	for (uint32_t r = 0; r < n; r++) {
		const uint32_t *c = pool + e[r].off;
		uint32_t keep = 0;

		/* the path shared with the previous entry stays open */
		if (r > 0) {
			const uint32_t *p = pool + e[r - 1].off;

			while (keep < depth && keep < e[r].n &&
			       p[keep] == c[keep])
				keep++;
		}
		while (depth > keep)
			end[path[depth--]] = v->n_nodes;
		for (; depth < e[r].n; depth++) {
			if (v->n_nodes + 1 >= cap) {
				uint32_t *a, *b, *d;

				cap *= 2;
				a = realloc(cp, cap * sizeof(*cp));
				if (a)
					cp = a;
				b = realloc(end, cap * sizeof(*end));
				if (b)
					end = b;
				d = realloc(lo, (cap + 1) * sizeof(*lo));
				if (d)
					lo = d;
				if (!a || !b || !d)
					goto nomem;
			}
			if (depth + 2 >= path_cap) {
				uint32_t *q = realloc(path, 2 * path_cap *
								    sizeof(*q));

				if (!q)
					goto nomem;
				path = q;
				path_cap *= 2;
			}
			cp[v->n_nodes] = c[depth];
			lo[v->n_nodes] = r;
			path[depth + 1] = v->n_nodes++;
		}
		v->rank_id[r] = e[r].id;
		v->id_rank[e[r].id] = r;
		v->rank_tail[r] = e[r].tail;
	}
	while (depth > 0)
		end[path[depth--]] = v->n_nodes;
	end[0] = v->n_nodes;
	lo[v->n_nodes] = n;
	v->n_ranked = n;
	v->cp = cp;
	v->end = end;
	v->tok_lo = lo;
	free(path);
	return 0;
nomem:
	free(cp);
	free(end);
	free(lo);
	free(path);
	return -ENOMEM;
}

static int vocab_build(struct gram_vocab *v, const struct engine_vocab *ev)
{
	struct vocab_entry *e = NULL;
	uint32_t *pool = NULL, n = 0;
	int rc;

	v->n_vocab = engine_vocab_size(ev);
	v->piece = calloc(v->n_vocab, sizeof(*v->piece));
	v->piece_len = calloc(v->n_vocab, sizeof(*v->piece_len));
	v->eog = calloc(v->n_vocab, 1);
	v->eog_ids = calloc(v->n_vocab, sizeof(*v->eog_ids));
	v->bytes = calloc(v->n_vocab, sizeof(*v->bytes));
	if (!v->piece || !v->piece_len || !v->eog || !v->eog_ids || !v->bytes)
		return -ENOMEM;
	rc = vocab_pieces(v, ev);
	if (!rc)
		rc = vocab_entries(v, &e, &pool, &n);
	if (!rc)
		rc = vocab_trie(v, e, pool, n);
	free(e);
	free(pool);
	return rc;
}

int gram_vocab_get(const struct engine_model *m, const struct gram_vocab **out,
		   struct err *err)
{
	const struct engine_vocab *ev = engine_model_vocab(m);
	struct gram_vocab *v = engine_vocab_cache_get(ev), *won;

	if (v) {
		*out = v;
		return 0;
	}
	v = calloc(1, sizeof(*v));
	if (!v || vocab_build(v, ev)) {
		gram_vocab_free(v);
		return err_set(err, ENOMEM,
			       "grammar: out of memory for the token trie");
	}
	won = engine_vocab_cache_set(ev, v, vocab_free_any);
	if (won != v)
		gram_vocab_free(v);
	*out = won;
	return 0;
}
