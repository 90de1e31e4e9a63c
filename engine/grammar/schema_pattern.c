// SPDX-License-Identifier: MIT
/*
 * A string schema's "pattern" -> rules, as llama.cpp's _visit_pattern
 * reads the regular expression: anchored ^...$, groups, classes, . | * +
 * ? {m,n}, escapes; an unsupported one accepts any string (llama.cpp
 * warns), an invalid one fails.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"

/* ---- patterns ---------------------------------------------------------- */

enum pat_status { PAT_OK, PAT_UNSUPPORTED, PAT_INVALID };

struct pat_item {
	char *s;
	bool literal;
};

struct pat_seq {
	struct pat_item *v;
	size_t n, cap;
};

struct pat {
	struct conv *c;
	const char *s;
	size_t i, len;
	int depth;
	const char *name;
	char **sub_body, **sub_id; /* the rules made for repeated groups */
	size_t n_sub;
	enum pat_status status;
	char why[160];
	bool oom;
};

#define PAT_DEPTH_MAX 100

static void pat_stop(struct pat *p, enum pat_status st, const char *why)
{
	if (p->status != PAT_OK)
		return;
	p->status = st;
	snprintf(p->why, sizeof(p->why), "%s", why);
}

static bool pat_push(struct pat *p, struct pat_seq *q, char *s, bool literal)
{
	if (!s) {
		p->oom = true;
		return false;
	}
	if (q->n == q->cap) {
		size_t cap = q->cap ? 2 * q->cap : 8;
		struct pat_item *v = realloc(q->v, cap * sizeof(*v));

		if (!v) {
			free(s);
			p->oom = true;
			return false;
		}
		q->v = v;
		q->cap = cap;
	}
	q->v[q->n].s = s;
	q->v[q->n].literal = literal;
	q->n++;
	return true;
}

static void pat_seq_free(struct pat_seq *q)
{
	for (size_t i = 0; i < q->n; i++)
		free(q->v[i].s);
	free(q->v);
	memset(q, 0, sizeof(*q));
}

/* to_rule: a literal in quotes, a rule as it is */
static char *pat_to_rule(const struct pat_item *it)
{
	if (!it->literal)
		return strdup(it->s);
	{
		size_t n = strlen(it->s);
		char *r = malloc(n + 3);

		if (r) {
			r[0] = '"';
			memcpy(r + 1, it->s, n);
			r[n + 1] = '"';
			r[n + 2] = '\0';
		}
		return r;
	}
}

/* join_seq: consecutive literals merged, the items joined by spaces. */
static char *pat_join(struct pat *p, struct pat_seq *q)
{
	struct sb out = { 0 }, lit = { 0 };
	bool first = true, have_lit = false;

	for (size_t k = 0; k <= q->n; k++) {
		if (k < q->n && q->v[k].literal) {
			sb_add(&lit, q->v[k].s);
			have_lit = true;
			continue;
		}
		if (have_lit) {
			struct pat_item it = { lit.p ? lit.p : (char *)"",
					       true };
			char *r = pat_to_rule(&it);

			if (!first)
				sb_add(&out, " ");
			sb_add(&out, r ? r : "");
			if (!r)
				out.oom = true;
			free(r);
			first = false;
			sb_free(&lit);
			have_lit = false;
		}
		if (k < q->n) {
			if (!first)
				sb_add(&out, " ");
			sb_add(&out, q->v[k].s);
			first = false;
		}
	}
	if (out.oom || lit.oom)
		p->oom = true;
	sb_free(&lit);
	return sb_take(&out);
}

/* gbnf_escape_length: the length of a GBNF escape at s[i], 0 if none */
static size_t pat_escape_len(const char *s, size_t len, size_t i)
{
	size_t hex = 0;

	if (i + 1 >= len || s[i] != '\\')
		return 0;
	switch (s[i + 1]) {
	case 'x': hex = 2; break;
	case 'u': hex = 4; break;
	case 'U': hex = 8; break;
	case 't':
	case 'r':
	case 'n':
	case '\\':
	case '"':
	case '[':
	case ']':
	case '-': return 2;
	default: return 0;
	}
	if (i + 2 + hex > len)
		return 0;
	for (size_t k = i + 2; k < i + 2 + hex; k++)
		if (!strchr("0123456789abcdefABCDEF", s[k]) || !s[k])
			return 0;
	return 2 + hex;
}

static bool pat_non_literal(char ch)
{
	return ch && strchr("|.()[]{}*+?^$", ch);
}

/* std::stoi: blanks, a sign, digits; the rest ignored. false if none. */
static bool pat_stoi(const char *s, size_t n, int *out)
{
	size_t i = 0;
	long long v = 0;
	bool neg = false, any = false;

	while (i < n && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')))
		i++;
	if (i < n && (s[i] == '+' || s[i] == '-'))
		neg = s[i++] == '-';
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
		v = v * 10 + (s[i] - '0');
		if (v > (long long)INT32_MAX + 1)
			return false;
		any = true;
	}
	if (!any || (!neg && v > INT32_MAX))
		return false;
	*out = (int)(neg ? -v : v);
	return true;
}

static char *pat_transform(struct pat *p);

/* {m}, {m,}, {,n}, {m,n} after the last item */
static void pat_braces(struct pat *p, struct pat_seq *q)
{
	size_t start = ++p->i, comma = SIZE_MAX, n_commas = 0;
	int min = 0, max = INT32_MAX;
	struct pat_item *last;
	struct sb rep = { 0 };
	char *sub;

	while (p->i < p->len && p->s[p->i] != '}') {
		if (p->s[p->i] == ',') {
			n_commas++;
			if (comma == SIZE_MAX)
				comma = p->i;
		}
		p->i++;
	}
	if (p->i >= p->len)
		return pat_stop(p, PAT_UNSUPPORTED,
				"unterminated curly brackets");
	p->i++;
	if (n_commas > 1)
		return pat_stop(p, PAT_UNSUPPORTED,
				"wrong number of values in curly brackets");
	if (comma == SIZE_MAX) {
		if (!pat_stoi(p->s + start, p->i - 1 - start, &min))
			return pat_stop(p, PAT_UNSUPPORTED,
					"invalid number in curly brackets");
		max = min;
	} else {
		if (comma > start &&
		    !pat_stoi(p->s + start, comma - start, &min))
			return pat_stop(p, PAT_UNSUPPORTED,
					"invalid number in curly brackets");
		if (p->i - 1 > comma + 1 &&
		    !pat_stoi(p->s + comma + 1, p->i - 2 - comma, &max))
			return pat_stop(p, PAT_UNSUPPORTED,
					"invalid number in curly brackets");
	}
	if (!q->n)
		return pat_stop(p, PAT_INVALID, "nothing to repeat");
	last = &q->v[q->n - 1];
	if (!last->literal) {
		size_t k;

		for (k = 0; k < p->n_sub; k++)
			if (!strcmp(p->sub_body[k], last->s))
				break;
		if (k == p->n_sub) {
			char **b = realloc(p->sub_body, (k + 1) * sizeof(*b));
			char **d = b ? realloc(p->sub_id,
					       (k + 1) * sizeof(*d)) :
				       NULL;
			char num[24];
			char *nm;

			if (b)
				p->sub_body = b;
			if (d)
				p->sub_id = d;
			if (!b || !d) {
				p->oom = true;
				return;
			}
			snprintf(num, sizeof(num), "-%zu", k + 1);
			nm = str_cat(p->name, num);
			p->sub_body[k] = strdup(last->s);
			p->sub_id[k] = nm ? conv_add(p->c, nm, last->s) : NULL;
			free(nm);
			p->n_sub++;
			if (!p->sub_body[k] || !p->sub_id[k]) {
				p->oom = true;
				return;
			}
		}
		sub = strdup(p->sub_id[k]);
	} else {
		struct pat_item it = { last->s, true };

		sub = pat_to_rule(&it);
	}
	if (!sub) {
		p->oom = true;
		return;
	}
	conv_repetition(&rep, sub, min, max, NULL);
	free(sub);
	free(last->s);
	last->s = sb_take(&rep);
	last->literal = false;
	if (!last->s)
		p->oom = true;
}

/* a run of literal characters at p->i */
static void pat_literal(struct pat *p, struct pat_seq *q)
{
	struct sb lit = { 0 };
	const char *s = p->s;
	size_t len = p->len;
	char first = s[p->i];

	while (p->i < len) {
		size_t i = p->i;

		if (s[i] == '\\') {
			size_t e;

			if (i == len - 1) {
				sb_free(&lit);
				return pat_stop(p, PAT_INVALID,
						"trailing backslash");
			}
			if (strchr("^$.[]()|{}*+?", s[i + 1]) && s[i + 1]) {
				sb_addn(&lit, s + i + 1, 1);
				p->i += 2;
				continue;
			}
			e = pat_escape_len(s, len, i);
			if (!e) {
				char why[64];

				snprintf(why, sizeof(why),
					 "unsupported escape: %.2s", s + i);
				sb_free(&lit);
				return pat_stop(p, PAT_UNSUPPORTED, why);
			}
			sb_addn(&lit, s + i, e);
			p->i += e;
		} else if (s[i] == '"') {
			sb_add(&lit, "\\\"");
			p->i++;
		} else if (!pat_non_literal(s[i]) &&
			   (i == len - 1 || lit.n == 0 || s[i + 1] == '.' ||
			    !pat_non_literal(s[i + 1]))) {
			sb_addn(&lit, s + i, 1);
			p->i++;
		} else {
			break;
		}
	}
	if (lit.n == 0) {
		char why[64];

		snprintf(why, sizeof(why), "unsupported character: %c", first);
		sb_free(&lit);
		return pat_stop(p, PAT_UNSUPPORTED, why);
	}
	pat_push(p, q, sb_take(&lit), true);
}

/* [...] copied with its escapes */
static void pat_class(struct pat *p, struct pat_seq *q)
{
	struct sb cls = { 0 };

	sb_add(&cls, "[");
	p->i++;
	while (p->i < p->len && p->s[p->i] != ']') {
		if (p->s[p->i] == '\\') {
			size_t e = pat_escape_len(p->s, p->len, p->i);

			if (!e) {
				char why[64];

				snprintf(why, sizeof(why),
					 "unsupported escape in character "
					 "class: %.2s",
					 p->s + p->i);
				sb_free(&cls);
				return pat_stop(p, PAT_UNSUPPORTED, why);
			}
			sb_addn(&cls, p->s + p->i, e);
			p->i += e;
		} else {
			sb_addn(&cls, p->s + p->i, 1);
			p->i++;
		}
	}
	if (p->i >= p->len) {
		sb_free(&cls);
		return pat_stop(p, PAT_INVALID, "unterminated character class");
	}
	sb_add(&cls, "]");
	p->i++;
	pat_push(p, q, sb_take(&cls), false);
}

static char *pat_transform(struct pat *p)
{
	struct pat_seq q = { 0 };
	char *r;

	while (p->i < p->len && p->status == PAT_OK && !p->oom) {
		char ch = p->s[p->i];

		if (ch == '.') {
			pat_push(p, &q, conv_add(p->c, "dot", "[^\\x0A\\x0D]"),
				 false);
			p->i++;
		} else if (ch == '(') {
			char *inner, *g;

			p->i++;
			if (p->i < p->len && p->s[p->i] == '?') {
				if (p->i + 1 < p->len &&
				    p->s[p->i + 1] == ':') {
					p->i += 2;
				} else {
					pat_stop(p, PAT_UNSUPPORTED,
						 "unsupported group syntax");
					break;
				}
			}
			if (++p->depth > PAT_DEPTH_MAX) {
				pat_stop(p, PAT_UNSUPPORTED,
					 "pattern nesting too deep");
				break;
			}
			inner = pat_transform(p);
			if (!inner)
				break;
			g = malloc(strlen(inner) + 3);
			if (g)
				sprintf(g, "(%s)", inner);
			free(inner);
			pat_push(p, &q, g, false);
		} else if (ch == ')') {
			p->i++;
			if (p->depth == 0) {
				pat_stop(p, PAT_INVALID,
					 "unbalanced parentheses");
				break;
			}
			p->depth--;
			r = pat_join(p, &q);
			pat_seq_free(&q);
			return r;
		} else if (ch == '^' || ch == '$') {
			pat_stop(p, PAT_UNSUPPORTED,
				 "anchor inside the pattern");
		} else if (ch == '[') {
			pat_class(p, &q);
		} else if (ch == '|') {
			pat_push(p, &q, strdup("|"), false);
			p->i++;
		} else if (ch == '*' || ch == '+' || ch == '?') {
			char *rule, *rep;

			if (!q.n) {
				pat_stop(p, PAT_INVALID, "nothing to repeat");
				break;
			}
			rule = pat_to_rule(&q.v[q.n - 1]);
			rep = rule ? malloc(strlen(rule) + 2) : NULL;
			if (rep)
				sprintf(rep, "%s%c", rule, ch);
			free(rule);
			if (!rep) {
				p->oom = true;
				break;
			}
			free(q.v[q.n - 1].s);
			q.v[q.n - 1].s = rep;
			q.v[q.n - 1].literal = false;
			p->i++;
		} else if (ch == '{') {
			pat_braces(p, &q);
		} else {
			pat_literal(p, &q);
		}
	}
	if (p->status != PAT_OK || p->oom) {
		pat_seq_free(&q);
		return NULL;
	}
	r = pat_join(p, &q);
	pat_seq_free(&q);
	return r;
}

/* _visit_pattern: NULL with c->rc set on an error */
char *conv_pattern(struct conv *c, const char *pattern, const char *name,
		   const char *path)
{
	size_t len = strlen(pattern), before = c->n_rules;
	struct pat p = { .c = c, .name = name };
	char *rule = NULL, *out = NULL;

	if (len < 2 || pattern[0] != '^' || pattern[len - 1] != '$') {
		pat_stop(&p, PAT_UNSUPPORTED, "not anchored with '^' and '$'");
	} else {
		p.s = pattern + 1;
		p.len = len - 2;
		rule = pat_transform(&p);
		if (rule && p.depth != 0)
			pat_stop(&p, PAT_INVALID, "unbalanced parentheses");
	}
	if (p.oom && !c->rc)
		conv_nomem(c);
	if (!c->rc && p.status == PAT_OK && rule) {
		struct sb b = { 0 };

		sb_add(&b, "\"\\\"\" (");
		sb_add(&b, rule);
		sb_add(&b, ") \"\\\"\"");
		if (b.oom)
			conv_nomem(c);
		else
			out = conv_add(c, name, b.p);
		sb_free(&b);
	}
	for (size_t k = 0; k < p.n_sub; k++) {
		free(p.sub_body[k]);
		free(p.sub_id[k]);
	}
	free(p.sub_body);
	free(p.sub_id);
	free(rule);
	if (c->rc || p.status == PAT_OK)
		return out;
	/* undo the rules the attempt made */
	while (c->n_rules > before) {
		c->n_rules--;
		free(c->rules[c->n_rules].name);
		free(c->rules[c->n_rules].body);
	}
	if (p.status == PAT_INVALID) {
		conv_fail(c, path, "invalid pattern %.80s: %s", pattern, p.why);
		return NULL;
	}
	/* llama.cpp warns and accepts any string */
	{
		char *s = conv_primitive(c, "string", "string");

		if (!s)
			return NULL;
		out = conv_add(c, name, s);
		free(s);
		return out;
	}
}
