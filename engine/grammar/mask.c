// SPDX-License-Identifier: MIT
/*
 * The allowed tokens of a set of stacks, without testing tokens one by
 * one: the vocabulary's trie is walked with the stacks, a subtree is left
 * as soon as no stack accepts its first code point, and what a walk finds
 * is cached (the idea of XGrammar's adaptive token mask cache).
 *
 * Cache key. A stack's allowed tokens depend on the whole stack, but
 * mostly on its top few entries. The key of a stack is its top
 * MASK_KEY_DEPTH entries over GRAM_BOTTOM (the stack itself when it is
 * not deeper). A key's walk starts from the key's stacks; when a path
 * pops down to GRAM_BOTTOM it cannot know what follows, and records the
 * trie node as an escape. Per key the cache keeps:
 *   accept    the tokens allowed whatever lies below (a bitmap by id)
 *   escapes   trie nodes below which more tokens may be allowed,
 *             depending on the rest of the stack
 * Per stack (node id) it keeps the tokens its escapes allow, found by
 * walking each escape's subtree with the closure of the stack's real rest.
 * A JSON grammar's stacks recur (every character of a string leaves the
 * same stack), so after the first steps a mask is a few bitmap ORs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MASK_KEY_DEPTH 3

struct mask_entry {
	uint64_t *accept; /* words; NULL: nothing */
	uint32_t *escape; /* trie nodes */
	uint32_t n_escape;
};

struct gram_mask_cache {
	struct gram_stacks *st;
	const struct gram_vocab *v;
	uint32_t words;	     /* of a bitmap by token id */
	uint32_t rank_words; /* of a bitmap by rank */
	/* per node id, grown with the stacks */
	uint32_t n_per;
	uint32_t *key_of;   /* key node id + 1 */
	uint32_t *entry_of; /* entry index + 1 (for key nodes) */
	uint32_t *res_at;   /* resolved tokens: offset + 1 into res_pool */
	uint32_t *res_n;
	int32_t *res_pool;
	uint32_t n_res, cap_res;
	struct mask_entry *entries;
	uint32_t n_entries, cap_entries;
	/* walk scratch */
	uint64_t *ranks; /* rank_words */
	struct gram_set *level;
	uint32_t n_level;
	uint32_t *esc;
	uint32_t n_esc, cap_esc;
	struct gram_mask_stats stats;
};

static int mask_per_node(struct gram_mask_cache *c)
{
	uint32_t n = c->st->cap_nodes, old = c->n_per;
	uint32_t *a, *b, *d, *e;

	if (n <= old)
		return 0;
	a = realloc(c->key_of, n * sizeof(*a));
	if (a)
		c->key_of = a;
	b = realloc(c->entry_of, n * sizeof(*b));
	if (b)
		c->entry_of = b;
	d = realloc(c->res_at, n * sizeof(*d));
	if (d)
		c->res_at = d;
	e = realloc(c->res_n, n * sizeof(*e));
	if (e)
		c->res_n = e;
	if (!a || !b || !d || !e)
		return -ENOMEM;
	memset(c->key_of + old, 0, (n - old) * sizeof(*a));
	memset(c->entry_of + old, 0, (n - old) * sizeof(*b));
	memset(c->res_at + old, 0, (n - old) * sizeof(*d));
	memset(c->res_n + old, 0, (n - old) * sizeof(*e));
	c->n_per = n;
	return 0;
}

int gram_mask_cache_new(struct gram_mask_cache **out, struct gram_stacks *st,
			const struct gram_vocab *v)
{
	struct gram_mask_cache *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->st = st;
	c->v = v;
	c->words = (v->n_vocab + 63) / 64;
	c->rank_words = (v->n_ranked + 63) / 64;
	c->ranks = calloc(c->rank_words + 1, sizeof(*c->ranks));
	if (!c->ranks || mask_per_node(c)) {
		gram_mask_cache_free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

void gram_mask_cache_free(struct gram_mask_cache *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->n_entries; i++) {
		free(c->entries[i].accept);
		free(c->entries[i].escape);
	}
	for (uint32_t i = 0; i < c->n_level; i++)
		gram_set_free(&c->level[i]);
	free(c->level);
	free(c->entries);
	free(c->key_of);
	free(c->entry_of);
	free(c->res_at);
	free(c->res_n);
	free(c->res_pool);
	free(c->ranks);
	free(c->esc);
	free(c);
}

void gram_mask_stats(const struct gram_mask_cache *c, struct gram_mask_stats *s)
{
	*s = c->stats;
}

/* ---- the walk ---------------------------------------------------------- */

static inline void mask_rank_set(uint64_t *bits, uint32_t r)
{
	bits[r >> 6] |= 1ull << (r & 63);
}

static struct gram_set *mask_level(struct gram_mask_cache *c, uint32_t depth)
{
	if (depth >= c->n_level) {
		uint32_t n = depth + 16;
		struct gram_set *l = realloc(c->level, n * sizeof(*l));

		if (!l)
			return NULL;
		memset(l + c->n_level, 0, (n - c->n_level) * sizeof(*l));
		c->level = l;
		c->n_level = n;
	}
	return &c->level[depth];
}

static int mask_escape(struct gram_mask_cache *c, uint32_t node)
{
	if (c->n_esc == c->cap_esc) {
		uint32_t cap = c->cap_esc ? 2 * c->cap_esc : 64;
		uint32_t *e = realloc(c->esc, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		c->esc = e;
		c->cap_esc = cap;
	}
	c->esc[c->n_esc++] = node;
	return 0;
}

/*
 * The tokens a token element on top allows, before any code point: its
 * token (<[id]>) or every other one (!<[id]>) with code points. (llama.cpp
 * also lets a token element judge a token whose first code points matched
 * characters before it, then fails to accept that token; here a token
 * element judges whole tokens only, as accepting does.)
 */
static void mask_token_top(struct gram_mask_cache *c, const struct gram_elem *e)
{
	const struct gram_vocab *v = c->v;
	uint32_t lo = v->tok_lo[1], hi = v->tok_lo[v->end[0]], r;

	if (v->n_nodes < 2)
		return;
	if (e->type == GRAM_TOKEN) {
		r = v->id_rank[e->value];
		if (r != UINT32_MAX && r >= lo && r < hi)
			mask_rank_set(c->ranks, r);
		return;
	}
	for (r = lo; r < hi; r++)
		if (v->rank_id[r] != (int32_t)e->value)
			mask_rank_set(c->ranks, r);
}

/*
 * Walk the subtree of trie node n, whose code points led to the stacks
 * of the set at depth; mark the ranks accepted, record escapes.
 */
static int mask_walk(struct gram_mask_cache *c, uint32_t n, uint32_t depth,
		     uint64_t *walked)
{
	const struct gram_vocab *v = c->v;
	struct gram_stacks *st = c->st;
	const struct gram_set *s = &c->level[depth];
	bool bottom = gram_set_has(s, GRAM_BOTTOM), partial_open = false;
	struct gram_set *next;
	int rc;

	(*walked)++;
	for (uint32_t r = v->tok_lo[n]; r < v->tok_lo[n + 1]; r++) {
		struct gram_partial tail = v->rank_tail[r];
		bool ok = tail.n_remain == 0;

		for (uint32_t i = 0; !ok && i < s->n; i++) {
			uint32_t x = s->v[i], pos;

			if (x == GRAM_EMPTY || x == GRAM_BOTTOM)
				continue;
			pos = st->node[x].pos;
			ok = gram_is_char(st->rules->elems[pos].type) &&
			     gram_match_partial(st->rules, pos, tail);
		}
		if (ok)
			mask_rank_set(c->ranks, r);
		else
			partial_open = true;
	}
	for (uint32_t i = 0; n == 0 && i < s->n; i++) {
		uint32_t x = s->v[i];
		const struct gram_elem *e;

		if (x == GRAM_EMPTY || x == GRAM_BOTTOM)
			continue;
		e = st->rules->elems + st->node[x].pos;
		if (e->type == GRAM_TOKEN || e->type == GRAM_TOKEN_NOT)
			mask_token_top(c, e);
	}
	if (bottom && (partial_open || n + 1 < v->end[n]) &&
	    (rc = mask_escape(c, n)))
		return rc;
	if (!(next = mask_level(c, depth + 1)))
		return -ENOMEM;
	s = &c->level[depth]; /* mask_level may have moved it */
	for (uint32_t ch = n + 1; ch < v->end[n]; ch = v->end[ch]) {
		if ((rc = gram_step(st, s, v->cp[ch], next)))
			return rc;
		if (!next->n)
			continue;
		if ((rc = mask_walk(c, ch, depth + 1, walked)))
			return rc;
		s = &c->level[depth];
		next = &c->level[depth + 1];
	}
	return 0;
}

/* Turn the marked ranks into ids: into bits (by id) or a list. */
static void mask_ranks_to_bits(struct gram_mask_cache *c, uint64_t *bits)
{
	for (uint32_t w = 0; w < c->rank_words; w++) {
		uint64_t m = c->ranks[w];

		while (m) {
			uint32_t r = w * 64 + (uint32_t)__builtin_ctzll(m);
			int32_t id = c->v->rank_id[r];

			bits[id >> 6] |= 1ull << (id & 63);
			m &= m - 1;
		}
	}
}

/* ---- keys -------------------------------------------------------------- */

/* The key node of stack x: its top MASK_KEY_DEPTH entries over BOTTOM. */
static uint32_t mask_key(struct gram_mask_cache *c, uint32_t x)
{
	struct gram_stacks *st = c->st;
	uint32_t pos[MASK_KEY_DEPTH], k = 0, y = x, key = GRAM_BOTTOM;

	if (c->key_of[x])
		return c->key_of[x] - 1;
	while (k < MASK_KEY_DEPTH && y != GRAM_EMPTY) {
		pos[k++] = st->node[y].pos;
		y = st->node[y].below;
	}
	if (y == GRAM_EMPTY) {
		key = x; /* the whole stack */
	} else {
		while (k-- > 0) {
			key = gram_node(st, pos[k], key);
			if (key == UINT32_MAX)
				return UINT32_MAX;
		}
	}
	if (mask_per_node(c))
		return UINT32_MAX;
	c->key_of[x] = key + 1;
	return key;
}

/* The real stack under x's key: what a path that escaped continues on. */
static uint32_t mask_rest(const struct gram_stacks *st, uint32_t x)
{
	for (uint32_t k = 0; k < MASK_KEY_DEPTH && x != GRAM_EMPTY; k++)
		x = st->node[x].below;
	return x;
}

static int mask_entry_build(struct gram_mask_cache *c, uint32_t key,
			    struct mask_entry *out)
{
	struct gram_set *l0 = mask_level(c, 0);
	bool any = false;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!l0)
		return -ENOMEM;
	gram_set_clear(l0);
	if ((rc = gram_set_add(l0, key)))
		return rc;
	memset(c->ranks, 0, c->rank_words * sizeof(*c->ranks));
	c->n_esc = 0;
	if ((rc = mask_walk(c, 0, 0, &c->stats.key_nodes_walked)))
		return rc;
	for (uint32_t w = 0; w < c->rank_words && !any; w++)
		any = c->ranks[w] != 0;
	if (any) {
		out->accept = calloc(c->words, sizeof(*out->accept));
		if (!out->accept)
			return -ENOMEM;
		mask_ranks_to_bits(c, out->accept);
	}
	if (c->n_esc) {
		out->escape = malloc(c->n_esc * sizeof(*out->escape));
		if (!out->escape) {
			free(out->accept);
			return -ENOMEM;
		}
		memcpy(out->escape, c->esc, c->n_esc * sizeof(*c->esc));
		out->n_escape = c->n_esc;
	}
	c->stats.keys++;
	return 0;
}

static const struct mask_entry *mask_entry(struct gram_mask_cache *c,
					   uint32_t key)
{
	struct mask_entry e;

	if (mask_per_node(c))
		return NULL;
	if (c->entry_of[key])
		return &c->entries[c->entry_of[key] - 1];
	if (c->n_entries == c->cap_entries) {
		uint32_t cap = c->cap_entries ? 2 * c->cap_entries : 16;
		struct mask_entry *p = realloc(c->entries, cap * sizeof(*p));

		if (!p)
			return NULL;
		c->entries = p;
		c->cap_entries = cap;
	}
	if (mask_entry_build(c, key, &e))
		return NULL;
	/* the walk made nodes: the per-node arrays may have grown */
	if (mask_per_node(c)) {
		free(e.accept);
		free(e.escape);
		return NULL;
	}
	c->entries[c->n_entries] = e;
	c->entry_of[key] = ++c->n_entries;
	return &c->entries[c->n_entries - 1];
}

/* The tokens x's escapes allow, walked once per stack. */
static int mask_resolve(struct gram_mask_cache *c, uint32_t x,
			const struct mask_entry *e)
{
	struct gram_set *l0;
	uint32_t start = c->n_res, rest = mask_rest(c->st, x);
	int rc;

	memset(c->ranks, 0, c->rank_words * sizeof(*c->ranks));
	for (uint32_t i = 0; i < e->n_escape; i++) {
		if (!(l0 = mask_level(c, 0)))
			return -ENOMEM;
		gram_set_clear(l0);
		if ((rc = gram_expand(c->st, rest, l0)))
			return rc;
		c->n_esc = 0;
		rc = mask_walk(c, e->escape[i], 0, &c->stats.resolution_nodes);
		if (rc)
			return rc;
	}
	for (uint32_t w = 0; w < c->rank_words; w++) {
		uint64_t m = c->ranks[w];

		while (m) {
			uint32_t r = w * 64 + (uint32_t)__builtin_ctzll(m);

			if (c->n_res == c->cap_res) {
				uint32_t cap = c->cap_res ? 2 * c->cap_res :
							    1024;
				int32_t *p = realloc(c->res_pool,
						     cap * sizeof(*p));

				if (!p)
					return -ENOMEM;
				c->res_pool = p;
				c->cap_res = cap;
			}
			c->res_pool[c->n_res++] = c->v->rank_id[r];
			m &= m - 1;
		}
	}
	if ((rc = mask_per_node(c)))
		return rc;
	c->res_at[x] = start + 1;
	c->res_n[x] = c->n_res - start;
	c->stats.resolutions++;
	return 0;
}

int gram_mask_fill(struct gram_mask_cache *c, const struct gram_set *set,
		   uint64_t *mask)
{
	const struct gram_vocab *v = c->v;
	bool eog = false;
	int rc;

	memset(mask, 0, c->words * sizeof(*mask));
	if ((rc = mask_per_node(c)))
		return rc;
	for (uint32_t i = 0; i < set->n; i++) {
		uint32_t x = set->v[i], key;
		const struct mask_entry *e;

		if (x == GRAM_EMPTY) {
			eog = true;
			continue;
		}
		if ((key = mask_key(c, x)) == UINT32_MAX ||
		    !(e = mask_entry(c, key)))
			return -ENOMEM;
		if (e->accept)
			for (uint32_t w = 0; w < c->words; w++)
				mask[w] |= e->accept[w];
		if (!e->n_escape)
			continue;
		if (!c->res_at[x] && (rc = mask_resolve(c, x, e)))
			return rc;
		for (uint32_t j = 0; j < c->res_n[x]; j++) {
			int32_t id = c->res_pool[c->res_at[x] - 1 + j];

			mask[id >> 6] |= 1ull << (id & 63);
		}
	}
	for (uint32_t i = 0; eog && i < v->n_eog; i++)
		mask[v->eog_ids[i] >> 6] |= 1ull << (v->eog_ids[i] & 63);
	return 0;
}

int gram_token_allowed(struct gram_stacks *st, const struct gram_set *set,
		       int32_t t, const uint32_t *cps, size_t n,
		       struct gram_partial tail, bool *ok)
{
	struct gram_set a = { 0 }, b = { 0 }, *cur = &a, *nxt = &b, *tmp;
	int rc = gram_set_copy(&a, set);

	*ok = false;
	for (size_t i = 0; !rc && i < n && cur->n; i++) {
		for (uint32_t j = 0; i == 0 && j < cur->n && !*ok; j++) {
			uint32_t x = cur->v[j];
			const struct gram_elem *e;

			if (x == GRAM_EMPTY || x == GRAM_BOTTOM)
				continue;
			e = st->rules->elems + st->node[x].pos;
			if (e->type == GRAM_TOKEN)
				*ok = e->value == (uint32_t)t;
			else if (e->type == GRAM_TOKEN_NOT)
				*ok = e->value != (uint32_t)t;
		}
		if (*ok)
			goto out;
		rc = gram_step(st, cur, cps[i], nxt);
		tmp = cur;
		cur = nxt;
		nxt = tmp;
	}
	if (rc || !cur->n)
		goto out;
	if (tail.n_remain == 0) {
		*ok = true;
		goto out;
	}
	for (uint32_t j = 0; j < cur->n && !*ok; j++) {
		uint32_t x = cur->v[j], pos;

		if (x == GRAM_EMPTY || x == GRAM_BOTTOM)
			continue;
		pos = st->node[x].pos;
		*ok = gram_is_char(st->rules->elems[pos].type) &&
		      gram_match_partial(st->rules, pos, tail);
	}
out:
	gram_set_free(&a);
	gram_set_free(&b);
	return rc;
}
