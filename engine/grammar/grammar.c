// SPDX-License-Identifier: MIT
/*
 * engine.h's grammar API: compile GBNF for a model, and the matcher that
 * follows one answer through it.
 *
 *   struct engine_grammar *g;
 *   engine_grammar_new(&g, model, "root ::= \"yes\" | \"no\"", 23, &err);
 *   opt.grammar = g;            // engine_generation_new takes a reference
 *   ...
 *   engine_grammar_unref(g);
 *
 * A matcher holds a set of stacks (stack.c) and the bytes of a character
 * that the last token left unfinished (llama.cpp's partial_utf8). Its mask
 * comes from the grammar's cache (mask.c) when nothing is pending; after
 * a token that ended inside a character only the tokens that start with
 * continuation bytes can follow, and each of those is checked directly.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*
 * format=json: llama.cpp's grammars/json.gbnf (the pinned release's, MIT),
 * any JSON object, so that answers compare with llama.cpp's.
 */
const char engine_grammar_json[] =
	"root   ::= object\n"
	"value  ::= object | array | string | number | (\"true\" | \"false\" "
	"| \"null\") ws\n"
	"\n"
	"object ::=\n"
	"  \"{\" ws (\n"
	"            string \":\" ws value\n"
	"    (\",\" ws string \":\" ws value)*\n"
	"  )? \"}\" ws\n"
	"\n"
	"array  ::=\n"
	"  \"[\" ws (\n"
	"            value\n"
	"    (\",\" ws value)*\n"
	"  )? \"]\" ws\n"
	"\n"
	"string ::=\n"
	"  \"\\\"\" (\n"
	"    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
	"    \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n"
	"  )* \"\\\"\" ws\n"
	"\n"
	"number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? "
	"([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
	"\n"
	"# Optional space: by convention, applied in this grammar after literal "
	"chars when allowed\n"
	"ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

struct engine_grammar {
	_Atomic unsigned refs;
	struct gram_rules rules;
	struct gram_stacks st;
	const struct gram_vocab *v; /* the model's, borrowed */
	struct gram_mask_cache *cache;
	struct gram_set start; /* the stacks before any token */
	/* per position: bytes to finish its alternative (GRAM_FAR: never) */
	uint32_t *rest;
};

#define GRAM_FAR (UINT32_MAX / 4)

struct engine_grammar_matcher {
	struct engine_grammar *g;
	struct gram_set stacks;
	struct gram_partial partial;
	uint64_t *mask;
	struct gram_set tmp, next, one;
	uint32_t *cps; /* scratch: a piece's code points */
	size_t cap_cps;
	struct gram_set trial; /* engine_grammar_matcher_fits' stacks */
	int32_t *order;	       /* restrict's candidates */
};

/* <text> token references: the text must be one token. */
static int grammar_lookup(void *ctx, const char *text, size_t len, int32_t *id)
{
	const struct engine_model *m = ctx;
	struct err err = { 0 };
	int32_t *t = NULL;
	size_t n = 0;
	int one;

	if (engine_tokenize(m, text, len, false, true, &t, &n, &err))
		return 0;
	one = n == 1;
	if (one)
		*id = t[0];
	free(t);
	return one;
}

static int grammar_start(struct engine_grammar *g)
{
	const struct gram_elem *el = g->rules.elems;
	uint32_t a = g->rules.rule_start[g->rules.root];

	for (;;) {
		uint32_t x = GRAM_EMPTY;

		if (!gram_is_end(el + a) &&
		    (x = gram_node(&g->st, a, GRAM_EMPTY)) == UINT32_MAX)
			return -ENOMEM;
		if (gram_expand(&g->st, x, &g->start))
			return -ENOMEM;
		while (!gram_is_end(el + a))
			a++;
		if (el[a].type != GRAM_ALT)
			return 0;
		a++;
	}
}

/* ---- distances --------------------------------------------------------- */

static uint32_t grammar_add(uint32_t a, uint32_t b)
{
	return a >= GRAM_FAR || b >= GRAM_FAR ? GRAM_FAR : a + b;
}

/* The fewest bytes an element takes. */
static uint32_t grammar_elem_cost(const struct engine_grammar *g,
				  const uint32_t *rule_min, uint32_t pos)
{
	const struct gram_elem *e = g->rules.elems + pos;
	uint32_t low = UINT32_MAX;

	if (e->type == GRAM_REF)
		return rule_min[e->value];
	if (e->type == GRAM_TOKEN || e->type == GRAM_TOKEN_NOT)
		return 1;
	if (g->st.ascii[pos][0] | g->st.ascii[pos][1])
		return 1;
	if (e->type != GRAM_CHAR)
		return 2; /* a class of all but some characters */
	for (;;) {
		if (e->value < low)
			low = e->value;
		e += e[1].type == GRAM_RNG_UPPER ? 2 : 1;
		if (e->type != GRAM_CHAR_ALT)
			break;
	}
	return low < 0x800 ? 2 : low < 0x10000 ? 3 : 4;
}

/* rest[pos] for every position of every alternative, given rule_min. */
static void grammar_rests(struct engine_grammar *g, const uint32_t *rule_min)
{
	const struct gram_elem *el = g->rules.elems;
	uint32_t n = g->rules.n_elems, end = 0;

	/* backwards: each position's cost plus what follows it */
	for (uint32_t i = n; i-- > 0;) {
		if (gram_is_end(el + i)) {
			g->rest[i] = 0;
			end = i;
			continue;
		}
		if (el[i].type == GRAM_CHAR_ALT || el[i].type == GRAM_RNG_UPPER)
			continue;
		g->rest[i] = grammar_add(
			grammar_elem_cost(g, rule_min, i),
			g->rest[gram_is_char(el[i].type) ? g->st.char_next[i] :
							   i + 1]);
		(void)end;
	}
}

static int grammar_distances(struct engine_grammar *g)
{
	uint32_t *rule_min = malloc(g->rules.n_rules * sizeof(*rule_min));
	bool changed = true;

	g->rest = malloc((g->rules.n_elems + 1) * sizeof(*g->rest));
	if (!rule_min || !g->rest) {
		free(rule_min);
		return -ENOMEM;
	}
	for (uint32_t r = 0; r < g->rules.n_rules; r++)
		rule_min[r] = GRAM_FAR;
	/* shortest derivations: relax until nothing shrinks */
	while (changed) {
		changed = false;
		grammar_rests(g, rule_min);
		for (uint32_t r = 0; r < g->rules.n_rules; r++) {
			const struct gram_elem *el = g->rules.elems;
			uint32_t a = g->rules.rule_start[r], best = GRAM_FAR;

			for (;;) {
				if (g->rest[a] < best)
					best = g->rest[a];
				while (!gram_is_end(el + a))
					a++;
				if (el[a].type != GRAM_ALT)
					break;
				a++;
			}
			if (best < rule_min[r]) {
				rule_min[r] = best;
				changed = true;
			}
		}
	}
	free(rule_min);
	return 0;
}

/* Bytes to empty the stack x. */
static uint32_t grammar_stack_distance(const struct engine_grammar *g,
				       uint32_t x)
{
	uint32_t d = 0;

	while (x != GRAM_EMPTY && x != GRAM_BOTTOM) {
		d = grammar_add(d, g->rest[g->st.node[x].pos]);
		x = g->st.node[x].below;
	}
	return d;
}

static uint32_t grammar_set_distance(const struct engine_grammar *g,
				     const struct gram_set *s,
				     struct gram_partial p)
{
	uint32_t best = GRAM_FAR;

	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t d = grammar_stack_distance(g, s->v[i]);

		if (d < best)
			best = d;
	}
	return grammar_add(best, p.n_remain > 0 ? (uint32_t)p.n_remain : 0);
}

int engine_grammar_new(struct engine_grammar **out,
		       const struct engine_model *m, const char *gbnf,
		       size_t len, struct err *err)
{
	struct engine_grammar *g;
	int rc;

	*out = NULL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return err_set(err, ENOMEM, "grammar: out of memory");
	atomic_init(&g->refs, 1);
	rc = gram_vocab_get(m, &g->v, err);
	if (!rc)
		rc = gram_parse(&g->rules, gbnf, len, grammar_lookup, (void *)m,
				g->v->n_vocab, err);
	if (rc)
		goto out_free;
	if (gram_stacks_init(&g->st, &g->rules) ||
	    gram_mask_cache_new(&g->cache, &g->st, g->v) || grammar_start(g) ||
	    grammar_distances(g)) {
		rc = err_set(err, ENOMEM, "grammar: out of memory");
		goto out_free;
	}
	*out = g;
	return 0;
out_free:
	engine_grammar_unref(g);
	return rc;
}

struct engine_grammar *engine_grammar_ref(struct engine_grammar *g)
{
	if (g)
		atomic_fetch_add(&g->refs, 1);
	return g;
}

void engine_grammar_unref(struct engine_grammar *g)
{
	if (!g || atomic_fetch_sub(&g->refs, 1) != 1)
		return;
	gram_mask_cache_free(g->cache);
	gram_set_free(&g->start);
	gram_stacks_free(&g->st);
	gram_rules_free(&g->rules);
	free(g->rest);
	free(g);
}

/* ---- matcher ----------------------------------------------------------- */

int engine_grammar_matcher_new(struct engine_grammar_matcher **out,
			       struct engine_grammar *g, struct err *err)
{
	struct engine_grammar_matcher *mt = calloc(1, sizeof(*mt));

	*out = NULL;
	if (!mt)
		return err_set(err, ENOMEM, "grammar: out of memory");
	mt->g = engine_grammar_ref(g);
	mt->mask = calloc((g->v->n_vocab + 63) / 64, sizeof(*mt->mask));
	if (!mt->mask || gram_set_copy(&mt->stacks, &g->start)) {
		engine_grammar_matcher_free(mt);
		return err_set(err, ENOMEM, "grammar: out of memory");
	}
	*out = mt;
	return 0;
}

void engine_grammar_matcher_free(struct engine_grammar_matcher *mt)
{
	if (!mt)
		return;
	gram_set_free(&mt->stacks);
	gram_set_free(&mt->tmp);
	gram_set_free(&mt->next);
	gram_set_free(&mt->one);
	gram_set_free(&mt->trial);
	free(mt->order);
	free(mt->mask);
	free(mt->cps);
	engine_grammar_unref(mt->g);
	free(mt);
}

bool engine_grammar_matcher_complete(const struct engine_grammar_matcher *mt)
{
	return gram_set_has(&mt->stacks, GRAM_EMPTY);
}

/* Decode token's piece after the pending bytes into mt->cps. */
static int matcher_decode(struct engine_grammar_matcher *mt, int32_t token,
			  struct gram_partial *p, size_t *n)
{
	const struct gram_vocab *v = mt->g->v;
	size_t need = v->piece_len[token] + 4;

	if (need > mt->cap_cps) {
		uint32_t *c = realloc(mt->cps, need * sizeof(*c));

		if (!c)
			return -ENOMEM;
		mt->cps = c;
		mt->cap_cps = need;
	}
	*p = mt->partial;
	*n = gram_decode_utf8(v->piece[token], v->piece_len[token], p, mt->cps);
	return 0;
}

const struct gram_vocab *
gram_matcher_vocab(const struct engine_grammar_matcher *mt)
{
	return mt->g->v;
}

int gram_matcher_direct(struct engine_grammar_matcher *mt, int32_t t, bool *ok)
{
	const struct gram_vocab *v = mt->g->v;
	struct gram_partial p;
	size_t n;
	int rc;

	*ok = false;
	if (v->eog[t]) {
		*ok = engine_grammar_matcher_complete(mt);
		return 0;
	}
	if (!v->piece_len[t] || v->piece[t][0] == 0)
		return 0;
	if ((rc = matcher_decode(mt, t, &p, &n)))
		return rc;
	if (p.n_remain < 0)
		return 0;
	return gram_token_allowed(&mt->g->st, &mt->stacks, t, mt->cps, n, p,
				  ok);
}

/*
 * After a piece that ended inside a character only the tokens starting
 * with continuation bytes (and EOG, when complete) can follow.
 */
static int matcher_mask_partial(struct engine_grammar_matcher *mt)
{
	const struct gram_vocab *v = mt->g->v;
	bool ok;
	int rc;

	memset(mt->mask, 0, (v->n_vocab + 63) / 64 * sizeof(*mt->mask));
	for (uint32_t i = 0; i < v->n_cont; i++) {
		int32_t t = v->cont[i];

		if ((rc = gram_matcher_direct(mt, t, &ok)))
			return rc;
		if (ok)
			mt->mask[t >> 6] |= 1ull << (t & 63);
	}
	if (engine_grammar_matcher_complete(mt))
		for (uint32_t i = 0; i < v->n_eog; i++)
			mt->mask[v->eog_ids[i] >> 6] |= 1ull
							<< (v->eog_ids[i] & 63);
	return 0;
}

int engine_grammar_matcher_mask(struct engine_grammar_matcher *mt,
				const uint64_t **mask, struct err *err)
{
	int rc;

	if (mt->partial.n_remain > 0)
		rc = matcher_mask_partial(mt);
	else
		rc = gram_mask_fill(mt->g->cache, &mt->stacks, mt->mask);
	if (rc)
		return err_set(err, ENOMEM, "grammar: out of memory");
	*mask = mt->mask;
	return 0;
}

int engine_grammar_matcher_apply(struct engine_grammar_matcher *mt,
				 float *logits, struct err *err)
{
	const uint64_t *mask;
	uint32_t n = mt->g->v->n_vocab;
	bool any = false;
	int rc = engine_grammar_matcher_mask(mt, &mask, err);

	if (rc)
		return rc;
	for (uint32_t w = 0; w < (n + 63) / 64; w++) {
		uint64_t m = mask[w], cut;
		uint32_t base = w * 64;

		if (base + 64 > n)
			m |= ~0ull << (n - base); /* past the vocabulary */
		any = any || mask[w];
		/* only the tokens cut are written */
		for (cut = ~m; cut; cut &= cut - 1)
			logits[base + (uint32_t)__builtin_ctzll(cut)] =
				-INFINITY;
	}
	if (!any)
		return err_set(err, EINVAL,
			       "grammar: no token can continue the answer");
	return 0;
}

/*
 * The stacks after token (not EOG) into out and the bytes it leaves
 * pending into *p: llama_grammar_accept_token. out empty: not accepted.
 */
static int matcher_advance(struct engine_grammar_matcher *mt, int32_t token,
			   struct gram_set *out, struct gram_partial *p)
{
	struct engine_grammar *g = mt->g;
	const struct gram_elem *el = g->rules.elems;
	size_t n;
	int rc;

	if ((rc = matcher_decode(mt, token, p, &n)))
		return rc;
	gram_set_clear(out);
	for (uint32_t i = 0; !rc && i < mt->stacks.n; i++) {
		uint32_t x = mt->stacks.v[i], pos, t;
		const struct gram_elem *e;

		if (x == GRAM_EMPTY)
			continue;
		pos = g->st.node[x].pos;
		e = el + pos;
		if (e->type == GRAM_TOKEN || e->type == GRAM_TOKEN_NOT) {
			if ((e->type == GRAM_TOKEN) !=
			    (e->value == (uint32_t)token))
				continue;
			t = g->st.node[x].below;
			if (!gram_is_end(e + 1) &&
			    (t = gram_node(&g->st, pos + 1, t)) == UINT32_MAX)
				return -ENOMEM;
			rc = gram_expand(&g->st, t, out);
			continue;
		}
		gram_set_clear(&mt->one);
		if ((rc = gram_set_add(&mt->one, x)))
			break;
		for (size_t k = 0; !rc && k < n && mt->one.n; k++) {
			rc = gram_step(&g->st, &mt->one, mt->cps[k], &mt->tmp);
			if (!rc)
				rc = gram_set_copy(&mt->one, &mt->tmp);
		}
		for (uint32_t j = 0; !rc && j < mt->one.n; j++)
			rc = gram_set_add(out, mt->one.v[j]);
	}
	return rc;
}

int engine_grammar_matcher_accept(struct engine_grammar_matcher *mt,
				  int32_t token, struct err *err)
{
	struct gram_partial p;

	if (token < 0 || (uint32_t)token >= mt->g->v->n_vocab)
		return err_set(err, EINVAL, "grammar: token %d out of range",
			       token);
	if (mt->g->v->eog[token])
		return 0;
	if (matcher_advance(mt, token, &mt->next, &p))
		return err_set(err, ENOMEM, "grammar: out of memory");
	if (!mt->next.n)
		return err_set(err, EINVAL,
			       "grammar: token %d does not continue the answer",
			       token);
	if (gram_set_copy(&mt->stacks, &mt->next))
		return err_set(err, ENOMEM, "grammar: out of memory");
	mt->partial = p;
	return 0;
}

uint32_t
engine_grammar_matcher_distance(const struct engine_grammar_matcher *mt)
{
	uint32_t d = grammar_set_distance(mt->g, &mt->stacks, mt->partial);

	return d >= GRAM_FAR ? UINT32_MAX : d;
}

bool engine_grammar_matcher_fits(struct engine_grammar_matcher *mt,
				 int32_t token, uint32_t left)
{
	struct gram_partial p;

	if (token < 0 || (uint32_t)token >= mt->g->v->n_vocab)
		return false;
	if (mt->g->v->eog[token])
		return engine_grammar_matcher_complete(mt);
	if (matcher_advance(mt, token, &mt->trial, &p) || !mt->trial.n)
		return false;
	return grammar_set_distance(mt->g, &mt->trial, p) <= left;
}

/* Higher logit first, then the lower id. */
static bool restrict_better(const float *logits, int32_t a, int32_t b)
{
	return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
}

/* Min-heap on restrict_better: h[0] is the worst of those kept. */
static void restrict_down(const float *logits, int32_t *h, uint32_t n,
			  uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, w = i;
		int32_t t;

		if (l < n && restrict_better(logits, h[w], h[l]))
			w = l;
		if (r < n && restrict_better(logits, h[w], h[r]))
			w = r;
		if (w == i)
			return;
		t = h[i];
		h[i] = h[w];
		h[w] = t;
		i = w;
	}
}

static int restrict_cmp(const void *pa, const void *pb, void *arg)
{
	int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;

	return restrict_better(arg, a, b) ? -1 : restrict_better(arg, b, a);
}

/* The best k of ids[0..n) (logits not -INFINITY) to the front, sorted. */
static uint32_t restrict_best(const float *logits, int32_t *ids, uint32_t n,
			      uint32_t k)
{
	if (n > k) {
		for (uint32_t i = k / 2; i-- > 0;)
			restrict_down(logits, ids, k, i);
		for (uint32_t i = k; i < n; i++)
			if (restrict_better(logits, ids[i], ids[0])) {
				ids[0] = ids[i];
				restrict_down(logits, ids, k, 0);
			}
		n = k;
	}
	qsort_r(ids, n, sizeof(*ids), restrict_cmp, (void *)logits);
	return n;
}

#define GRAMMAR_RESTRICT_KEEP 64
#define GRAMMAR_RESTRICT_TRY 2048

int engine_grammar_matcher_restrict(struct engine_grammar_matcher *mt,
				    float *logits, uint32_t left,
				    struct err *err)
{
	const struct gram_vocab *v = mt->g->v;
	uint32_t n = 0, kept = 0;
	int32_t keep[GRAMMAR_RESTRICT_KEEP];
	float val[GRAMMAR_RESTRICT_KEEP];

	if (!mt->order) {
		mt->order = malloc(v->n_vocab * sizeof(*mt->order));
		if (!mt->order)
			return err_set(err, ENOMEM, "grammar: out of memory");
	}
	/*
	 * The best that fit stay, tried among the best GRAMMAR_RESTRICT_TRY
	 * allowed tokens, then among the one-byte ones: the next byte of the
	 * shortest way to finish always fits, and trying every token cost
	 * tens of milliseconds a step.
	 */
	for (uint32_t t = 0; t < v->n_vocab; t++)
		if (logits[t] != -INFINITY)
			mt->order[n++] = (int32_t)t;
	n = restrict_best(logits, mt->order, n, GRAMMAR_RESTRICT_TRY);
	for (uint32_t i = 0; i < n && kept < GRAMMAR_RESTRICT_KEEP; i++)
		if (engine_grammar_matcher_fits(mt, mt->order[i], left))
			keep[kept++] = mt->order[i];
	if (!kept) {
		n = 0;
		for (uint32_t i = 0; i < v->n_bytes; i++)
			if (logits[v->bytes[i]] != -INFINITY)
				mt->order[n++] = v->bytes[i];
		n = restrict_best(logits, mt->order, n, n);
		for (uint32_t i = 0; i < n && kept < GRAMMAR_RESTRICT_KEEP; i++)
			if (engine_grammar_matcher_fits(mt, mt->order[i], left))
				keep[kept++] = mt->order[i];
	}
	if (!kept)
		return 0;
	for (uint32_t i = 0; i < kept; i++)
		val[i] = logits[keep[i]];
	for (uint32_t t = 0; t < v->n_vocab; t++)
		logits[t] = -INFINITY;
	for (uint32_t i = 0; i < kept; i++)
		logits[keep[i]] = val[i];
	return 0;
}
