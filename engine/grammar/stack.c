// SPDX-License-Identifier: MIT
/*
 * Pushdown stacks as hash-consed nodes: a stack is (top position, the
 * stack below), so that two equal stacks are one id, a set of stacks is a
 * sorted array of ids, and everything computed about a stack (its
 * closure here, its allowed tokens in mask.c) is computed once.
 *
 * The closure of a stack is llama_grammar_advance_stack: a rule reference
 * on top is replaced by each alternative of the rule (pushing the return
 * position unless the reference ends its alternative: a tail call, so that
 * `x ::= "a" x |` never grows the stack), a finished alternative pops,
 * until every stack has a char or token element on top, or is empty.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- sets -------------------------------------------------------------- */

int gram_set_add(struct gram_set *s, uint32_t id)
{
	uint32_t lo = 0, hi = s->n;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (s->v[mid] == id)
			return 0;
		if (s->v[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? 2 * s->cap : 8;
		uint32_t *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	memmove(s->v + lo + 1, s->v + lo, (s->n - lo) * sizeof(*s->v));
	s->v[lo] = id;
	s->n++;
	return 0;
}

bool gram_set_has(const struct gram_set *s, uint32_t id)
{
	uint32_t lo = 0, hi = s->n;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (s->v[mid] == id)
			return true;
		if (s->v[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

void gram_set_clear(struct gram_set *s)
{
	s->n = 0;
}

void gram_set_free(struct gram_set *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

int gram_set_copy(struct gram_set *dst, const struct gram_set *src)
{
	if (dst->cap < src->n) {
		uint32_t *v = realloc(dst->v, src->n * sizeof(*v));

		if (!v)
			return -ENOMEM;
		dst->v = v;
		dst->cap = src->n;
	}
	if (src->n)
		memcpy(dst->v, src->v, src->n * sizeof(*src->v));
	dst->n = src->n;
	return 0;
}

/* ---- characters -------------------------------------------------------- */

/* llama_grammar_match_char for a code point above ASCII. */
static bool stack_match_slow(const struct gram_elem *e, uint32_t c)
{
	bool positive = e->type == GRAM_CHAR || e->type == GRAM_CHAR_ANY;
	bool found = false;

	do {
		if (e[1].type == GRAM_RNG_UPPER) {
			found = found || (e->value <= c && c <= e[1].value);
			e += 2;
		} else if (e->type == GRAM_CHAR_ANY) {
			found = true;
			e++;
		} else {
			found = found || e->value == c;
			e++;
		}
	} while (e->type == GRAM_CHAR_ALT);
	return found == positive;
}

bool gram_match_char(const struct gram_stacks *st, uint32_t pos, uint32_t c)
{
	if (c < 128)
		return (st->ascii[pos][c >> 6] >> (c & 63)) & 1;
	return stack_match_slow(st->rules->elems + pos, c);
}

bool gram_match_partial(const struct gram_rules *r, uint32_t pos,
			struct gram_partial p)
{
	const struct gram_elem *e = r->elems + pos;
	bool positive = e->type == GRAM_CHAR || e->type == GRAM_CHAR_ANY;
	uint32_t low, high;

	/* invalid, or a 7-bit character split over two bytes (overlong) */
	if (p.n_remain < 0 || (p.n_remain == 1 && p.value < 2))
		return false;
	low = p.value << (p.n_remain * 6);
	high = low | ((1u << (p.n_remain * 6)) - 1);
	if (low == 0) {
		if (p.n_remain == 2)
			low = 1u << 11;
		else if (p.n_remain == 3)
			low = 1u << 16;
	}
	do {
		if (e[1].type == GRAM_RNG_UPPER) {
			if (e->value <= high && low <= e[1].value)
				return positive;
			e += 2;
		} else if (e->type == GRAM_CHAR_ANY) {
			return true;
		} else {
			if (low <= e->value && e->value <= high)
				return positive;
			e++;
		}
	} while (e->type == GRAM_CHAR_ALT);
	return !positive;
}

/* The element after the char class at pos; its ASCII bitmap. */
static uint32_t stack_char_info(const struct gram_rules *r, uint32_t pos,
				uint64_t ascii[2])
{
	const struct gram_elem *e = r->elems + pos;

	ascii[0] = ascii[1] = 0;
	for (uint32_t c = 0; c < 128; c++)
		if (stack_match_slow(e, c))
			ascii[c >> 6] |= 1ull << (c & 63);
	do {
		e += e[1].type == GRAM_RNG_UPPER ? 2 : 1;
	} while (e->type == GRAM_CHAR_ALT);
	return (uint32_t)(e - r->elems);
}

/* ---- nodes ------------------------------------------------------------- */

static uint32_t stack_hash(uint32_t pos, uint32_t below)
{
	uint64_t h = ((uint64_t)pos << 32 | below) * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 32);
}

static int stack_grow_table(struct gram_stacks *st)
{
	uint32_t cap = st->table_cap ? 2 * st->table_cap : 1024;
	uint32_t *t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (uint32_t id = 0; id < st->n_nodes; id++) {
		uint32_t h = stack_hash(st->node[id].pos, st->node[id].below);

		while (t[h & (cap - 1)])
			h++;
		t[h & (cap - 1)] = id + 1;
	}
	free(st->table);
	st->table = t;
	st->table_cap = cap;
	return 0;
}

static int stack_grow_nodes(struct gram_stacks *st)
{
	uint32_t cap = st->cap_nodes ? 2 * st->cap_nodes : 1024;
	struct gram_node *n = realloc(st->node, cap * sizeof(*n));
	uint32_t *a, *b, *c;

	if (!n)
		return -ENOMEM;
	st->node = n;
	a = realloc(st->closure_at, cap * sizeof(*a));
	if (a)
		st->closure_at = a;
	b = realloc(st->closure_n, cap * sizeof(*b));
	if (b)
		st->closure_n = b;
	c = realloc(st->seen, cap * sizeof(*c));
	if (c)
		st->seen = c;
	if (!a || !b || !c)
		return -ENOMEM;
	a = realloc(st->succ, cap * sizeof(*a));
	if (!a)
		return -ENOMEM;
	st->succ = a;
	memset(st->succ + st->cap_nodes, 0, (cap - st->cap_nodes) * sizeof(*a));
	memset(st->closure_at + st->cap_nodes, 0,
	       (cap - st->cap_nodes) * sizeof(*a));
	memset(st->seen + st->cap_nodes, 0, (cap - st->cap_nodes) * sizeof(*c));
	st->cap_nodes = cap;
	return 0;
}

uint32_t gram_node(struct gram_stacks *st, uint32_t pos, uint32_t below)
{
	uint32_t h = stack_hash(pos, below), id;

	for (;; h++) {
		uint32_t slot = st->table[h & (st->table_cap - 1)];

		if (!slot)
			break;
		if (st->node[slot - 1].pos == pos &&
		    st->node[slot - 1].below == below)
			return slot - 1;
	}
	if (st->n_nodes == st->cap_nodes && stack_grow_nodes(st))
		return UINT32_MAX;
	id = st->n_nodes++;
	st->node[id].pos = pos;
	st->node[id].below = below;
	if (2 * st->n_nodes > st->table_cap) {
		if (stack_grow_table(st)) {
			st->n_nodes--;
			return UINT32_MAX;
		}
		return id;
	}
	st->table[h & (st->table_cap - 1)] = id + 1;
	return id;
}

int gram_stacks_init(struct gram_stacks *st, const struct gram_rules *rules)
{
	memset(st, 0, sizeof(*st));
	st->rules = rules;
	st->char_next = calloc(rules->n_elems + 1, sizeof(*st->char_next));
	st->ascii = calloc(rules->n_elems + 1, sizeof(*st->ascii));
	if (!st->char_next || !st->ascii || stack_grow_table(st) ||
	    stack_grow_nodes(st))
		goto nomem;
	for (uint32_t pos = 0; pos < rules->n_elems; pos++)
		if (gram_is_char(rules->elems[pos].type))
			st->char_next[pos] = stack_char_info(rules, pos,
							     st->ascii[pos]);
	/* the two bases: ids 0 and 1, positions that are never elements */
	if (gram_node(st, UINT32_MAX, UINT32_MAX) != GRAM_EMPTY ||
	    gram_node(st, UINT32_MAX - 1, UINT32_MAX) != GRAM_BOTTOM)
		goto nomem;
	return 0;
nomem:
	gram_stacks_free(st);
	return -ENOMEM;
}

void gram_stacks_free(struct gram_stacks *st)
{
	free(st->node);
	free(st->table);
	free(st->closure_at);
	free(st->closure_n);
	free(st->closure_pool);
	free(st->seen);
	free(st->succ);
	free(st->work);
	free(st->char_next);
	free(st->ascii);
	memset(st, 0, sizeof(*st));
}

/* ---- closure ----------------------------------------------------------- */

static int stack_work_push(struct gram_stacks *st, uint32_t id)
{
	if (st->n_work == st->cap_work) {
		uint32_t cap = st->cap_work ? 2 * st->cap_work : 64;
		uint32_t *w = realloc(st->work, cap * sizeof(*w));

		if (!w)
			return -ENOMEM;
		st->work = w;
		st->cap_work = cap;
	}
	st->work[st->n_work++] = id;
	return 0;
}

static int stack_pool_push(struct gram_stacks *st, uint32_t id)
{
	if (st->n_pool == st->cap_pool) {
		uint32_t cap = st->cap_pool ? 2 * st->cap_pool : 1024;
		uint32_t *p = realloc(st->closure_pool, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		st->closure_pool = p;
		st->cap_pool = cap;
	}
	st->closure_pool[st->n_pool++] = id;
	return 0;
}

/* Work out the closure of x into the pool (sorted, unique). */
static int stack_closure(struct gram_stacks *st, uint32_t x)
{
	const struct gram_elem *el = st->rules->elems;
	uint32_t start = st->n_pool;
	struct gram_set out = { 0 };
	int rc = 0;

	if (++st->stamp == 0) {
		memset(st->seen, 0, st->cap_nodes * sizeof(*st->seen));
		st->stamp = 1;
	}
	st->n_work = 0;
	rc = stack_work_push(st, x);
	while (!rc && st->n_work) {
		uint32_t id = st->work[--st->n_work], pos, below, base;
		const struct gram_elem *e;

		if (st->seen[id] == st->stamp)
			continue;
		st->seen[id] = st->stamp;
		if (id == GRAM_EMPTY || id == GRAM_BOTTOM) {
			rc = gram_set_add(&out, id);
			continue;
		}
		pos = st->node[id].pos;
		below = st->node[id].below;
		e = el + pos;
		if (e->type != GRAM_REF) {
			rc = gram_set_add(&out, id);
			continue;
		}
		base = below;
		if (!gram_is_end(e + 1)) {
			base = gram_node(st, pos + 1, below);
			if (base == UINT32_MAX)
				rc = -ENOMEM;
		}
		for (uint32_t a = st->rules->rule_start[e->value]; !rc;) {
			uint32_t t = base;

			if (!gram_is_end(el + a)) {
				t = gram_node(st, a, base);
				if (t == UINT32_MAX) {
					rc = -ENOMEM;
					break;
				}
			}
			rc = stack_work_push(st, t);
			while (!gram_is_end(el + a))
				a++;
			if (el[a].type != GRAM_ALT)
				break;
			a++;
		}
	}
	for (uint32_t i = 0; !rc && i < out.n; i++)
		rc = stack_pool_push(st, out.v[i]);
	gram_set_free(&out);
	if (rc) {
		st->n_pool = start;
		return rc;
	}
	/* gram_node may have grown the node arrays: index after */
	st->closure_at[x] = start + 1;
	st->closure_n[x] = st->n_pool - start;
	return 0;
}

int gram_expand(struct gram_stacks *st, uint32_t x, struct gram_set *out)
{
	int rc;

	if (!st->closure_at[x] && (rc = stack_closure(st, x)))
		return rc;
	for (uint32_t i = 0; i < st->closure_n[x]; i++) {
		rc = gram_set_add(out,
				  st->closure_pool[st->closure_at[x] - 1 + i]);
		if (rc)
			return rc;
	}
	return 0;
}

/* The raw stack after x's top character: its position moved on. */
static uint32_t stack_succ(struct gram_stacks *st, uint32_t x)
{
	uint32_t after, t;

	if (st->succ[x])
		return st->succ[x] - 1;
	after = st->char_next[st->node[x].pos];
	t = st->node[x].below;
	if (!gram_is_end(st->rules->elems + after)) {
		t = gram_node(st, after, t);
		if (t == UINT32_MAX)
			return UINT32_MAX;
	}
	st->succ[x] = t + 1;
	return t;
}

int gram_step(struct gram_stacks *st, const struct gram_set *in, uint32_t c,
	      struct gram_set *out)
{
	gram_set_clear(out);
	for (uint32_t i = 0; i < in->n; i++) {
		uint32_t x = in->v[i], pos, t;

		if (x == GRAM_EMPTY || x == GRAM_BOTTOM)
			continue;
		pos = st->node[x].pos;
		if (!gram_is_char(st->rules->elems[pos].type) ||
		    !gram_match_char(st, pos, c))
			continue;
		/* where it goes does not depend on the character: kept */
		if ((t = stack_succ(st, x)) == UINT32_MAX)
			return -ENOMEM;
		if (!st->closure_at[t] && stack_closure(st, t))
			return -ENOMEM;
		if (!out->n && out->cap >= st->closure_n[t]) {
			/* the first: already sorted and unique */
			memcpy(out->v, st->closure_pool + st->closure_at[t] - 1,
			       st->closure_n[t] * sizeof(*out->v));
			out->n = st->closure_n[t];
		} else if (gram_expand(st, t, out)) {
			return -ENOMEM;
		}
	}
	return 0;
}
