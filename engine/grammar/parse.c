// SPDX-License-Identifier: MIT
/*
 * GBNF text -> rules, as llama.cpp's llama_grammar_parser reads it
 * (src/llama-grammar.cpp): rules `name ::= alternatives`, literals "...",
 * classes [...] and [^...], `.`, groups ( ), the repetitions * + ? {m}
 * {m,} {m,n}, comments #, token references <[id]>, <text> and !<...>.
 *
 * A repetition or a group becomes generated rules the way llama.cpp makes
 * them (S* -> S' ::= S S' | ; S{m,n} -> m copies of S then n-m nested
 * optional rules), so the stacks and the language are llama.cpp's.
 *
 *   root ::= "yes" | "no"
 *   item ::= [a-z]+ ("," [a-z]+)*
 *
 * Errors name the line and column (bytes, from 1) where reading stopped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* llama.cpp's MAX_REPETITION_THRESHOLD */
#define PARSE_REPETITION_MAX 2000

struct parse_rule {
	struct gram_elem *e;
	uint32_t n, cap;
	bool defined;
	bool generated; /* a repetition's or group's: never found by name */
	const char *first_use; /* where it was first named */
	const char *def;       /* where its definition starts */
};

struct parser {
	const char *src; /* NUL-terminated copy of the text */
	struct parse_rule *rules;
	char **names;
	uint32_t n_rules, cap_rules;
	gram_token_lookup lookup;
	void *ctx;
	uint32_t n_vocab;
	struct err *err;
	bool failed;
};

/* Record the first error, with its line and column; returns NULL. */
static const char *parse_fail(struct parser *p, const char *at,
			      const char *what)
{
	unsigned line = 1, col = 1;

	if (p->failed)
		return NULL;
	for (const char *s = p->src; s < at && *s; s++) {
		if (*s == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	err_set(p->err, EINVAL, "grammar: line %u column %u: %s", line, col,
		what);
	p->failed = true;
	return NULL;
}

static int parse_nomem(struct parser *p)
{
	if (!p->failed)
		err_set(p->err, ENOMEM, "grammar: out of memory");
	p->failed = true;
	return -ENOMEM;
}

static bool parse_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool parse_is_word(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
	       parse_is_digit(c);
}

/* ---- symbols and rules ------------------------------------------------- */

static int parse_new_symbol(struct parser *p, const char *name, size_t len,
			    uint32_t *id)
{
	if (p->n_rules == p->cap_rules) {
		uint32_t cap = p->cap_rules ? 2 * p->cap_rules : 32;
		struct parse_rule *r = realloc(p->rules, cap * sizeof(*r));
		char **n;

		if (!r)
			return parse_nomem(p);
		p->rules = r;
		n = realloc(p->names, cap * sizeof(*n));
		if (!n)
			return parse_nomem(p);
		p->names = n;
		p->cap_rules = cap;
	}
	p->names[p->n_rules] = strndup(name, len);
	if (!p->names[p->n_rules])
		return parse_nomem(p);
	memset(&p->rules[p->n_rules], 0, sizeof(p->rules[0]));
	*id = p->n_rules++;
	return 0;
}

/* llama_grammar_parser::get_symbol_id: the id of a name, new if unseen. */
static int parse_symbol(struct parser *p, const char *name, size_t len,
			uint32_t *id)
{
	for (uint32_t i = 0; i < p->n_rules; i++)
		if (!p->rules[i].generated && strlen(p->names[i]) == len &&
		    !memcmp(p->names[i], name, len)) {
			*id = i;
			return 0;
		}
	return parse_new_symbol(p, name, len, id);
}

/* generate_symbol_id: "base_N", N the id it gets. */
static int parse_generated(struct parser *p, const char *base, uint32_t *id)
{
	char name[256];
	int n = snprintf(name, sizeof(name), "%.200s_%u", base, p->n_rules);

	if (parse_new_symbol(p, name, (size_t)n, id))
		return -ENOMEM;
	p->rules[*id].generated = true;
	return 0;
}

/* A rule being built. */
struct parse_seq {
	struct gram_elem *e;
	uint32_t n, cap;
};

static int parse_push(struct parser *p, struct parse_seq *s, uint32_t type,
		      uint32_t value)
{
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? 2 * s->cap : 16;
		struct gram_elem *e = realloc(s->e, cap * sizeof(*e));

		if (!e)
			return parse_nomem(p);
		s->e = e;
		s->cap = cap;
	}
	s->e[s->n].type = type;
	s->e[s->n].value = value;
	s->n++;
	return 0;
}

static int parse_append(struct parser *p, struct parse_seq *s,
			const struct gram_elem *e, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (parse_push(p, s, e[i].type, e[i].value))
			return -ENOMEM;
	return 0;
}

/* Give rule id the elements of s (s is taken over). */
static void parse_set_rule(struct parser *p, uint32_t id, struct parse_seq *s)
{
	struct parse_rule *r = &p->rules[id];

	free(r->e);
	r->e = s->e;
	r->n = s->n;
	r->cap = s->cap;
	r->defined = true;
	s->e = NULL;
	s->n = s->cap = 0;
}

/* ---- lexical pieces ---------------------------------------------------- */

static const char *parse_space(const char *s, bool newline_ok)
{
	while (*s == ' ' || *s == '\t' || *s == '#' ||
	       (newline_ok && (*s == '\r' || *s == '\n'))) {
		if (*s == '#') {
			while (*s && *s != '\r' && *s != '\n')
				s++;
		} else {
			s++;
		}
	}
	return s;
}

static const char *parse_name(struct parser *p, const char *s)
{
	const char *q = s;

	while (parse_is_word(*q))
		q++;
	if (q == s)
		return parse_fail(p, s, "expecting a name");
	return q;
}

static const char *parse_hex(struct parser *p, const char *s, int size,
			     uint32_t *value)
{
	const char *q = s;

	*value = 0;
	for (; q < s + size && *q; q++) {
		char c = *q;

		*value <<= 4;
		if (c >= 'a' && c <= 'f')
			*value += (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			*value += (uint32_t)(c - 'A' + 10);
		else if (c >= '0' && c <= '9')
			*value += (uint32_t)(c - '0');
		else
			break;
	}
	if (q != s + size) {
		char what[64];

		snprintf(what, sizeof(what), "expecting %d hex digits", size);
		return parse_fail(p, s, what);
	}
	return q;
}

/* The code point of one UTF-8 character, not checked (llama.cpp's). */
static const char *parse_utf8(const char *s, uint32_t *value)
{
	static const int len_of[] = { 1, 1, 1, 1, 1, 1, 1, 1,
				      1, 1, 1, 1, 2, 2, 3, 4 };
	uint8_t first = (uint8_t)*s;
	int len = len_of[first >> 4];
	const char *q = s + 1;

	*value = first & ((1u << (8 - len)) - 1);
	for (; q < s + len && *q; q++)
		*value = (*value << 6) + ((uint8_t)*q & 0x3f);
	return q;
}

static const char *parse_char(struct parser *p, const char *s, uint32_t *value)
{
	if (*s == '\\') {
		switch (s[1]) {
		case 'x': return parse_hex(p, s + 2, 2, value);
		case 'u': return parse_hex(p, s + 2, 4, value);
		case 'U': return parse_hex(p, s + 2, 8, value);
		case 't': *value = '\t'; return s + 2;
		case 'r': *value = '\r'; return s + 2;
		case 'n': *value = '\n'; return s + 2;
		case '\\':
		case '"':
		case '[':
		case ']':
		case '-': *value = (uint8_t)s[1]; return s + 2;
		default: return parse_fail(p, s, "unknown escape");
		}
	}
	if (*s)
		return parse_utf8(s, value);
	return parse_fail(p, s, "unexpected end of input");
}

static const char *parse_token(struct parser *p, const char *s, uint32_t *id)
{
	const char *q = s + 1;
	int32_t t;

	if (*s != '<')
		return parse_fail(p, s, "expecting '<'");
	if (*q == '[') {
		unsigned long long v = 0;
		const char *digits = ++q;

		while (parse_is_digit(*q)) {
			v = v * 10 + (unsigned)(*q - '0');
			if (v > UINT32_MAX)
				return parse_fail(p, digits,
						  "token id out of range");
			q++;
		}
		if (q == digits)
			return parse_fail(p, q, "expecting an integer");
		if (*q != ']')
			return parse_fail(p, q, "expecting ']'");
		if (*++q != '>')
			return parse_fail(p, q, "expecting '>'");
		if (v >= p->n_vocab)
			return parse_fail(p, digits,
					  "token id past the vocabulary");
		*id = (uint32_t)v;
		return q + 1;
	}
	if (!p->lookup)
		return parse_fail(p, s, "no vocabulary to look the token up");
	while (*q && *q != '>')
		q++;
	if (*q != '>')
		return parse_fail(p, q, "expecting '>'");
	q++;
	/* <text> is text that tokenizes to exactly one token */
	if (p->lookup(p->ctx, s, (size_t)(q - s), &t) != 1)
		return parse_fail(p, s, "not a single token of the vocabulary");
	*id = (uint32_t)t;
	return q;
}

/* ---- sequences --------------------------------------------------------- */

static const char *parse_alternates(struct parser *p, const char *s,
				    const char *rule_name, uint32_t rule_id,
				    bool nested);

/*
 * llama.cpp's handle_repetitions: rewrite the last symbol of seq
 * (elements from last) as min..max copies (max UINT64_MAX: unbounded).
 */
static int parse_repeat(struct parser *p, const char *at, struct parse_seq *seq,
			uint32_t last, uint64_t *n_prev_rules,
			const char *rule_name, uint64_t min, uint64_t max)
{
	bool no_max = max == UINT64_MAX;
	uint64_t total = 1, n_opt, i;
	struct parse_seq prev = { 0 }, rec = { 0 };
	uint32_t last_rec = 0, id;
	int rc = -EINVAL;

	if (last == seq->n) {
		parse_fail(p, at, "expecting an item before */+/?/{");
		return -EINVAL;
	}
	if (!no_max && max > 0)
		total = max;
	else if (min > 0)
		total = min;
	if (*n_prev_rules * total > PARSE_REPETITION_MAX) {
		parse_fail(p, at, "too many rules from nested repetitions");
		return -EINVAL;
	}
	if (parse_append(p, &prev, seq->e + last, seq->n - last))
		goto out;
	if (min == 0) {
		seq->n = last;
	} else {
		for (i = 1; i < min; i++)
			if (parse_append(p, seq, prev.e, prev.n))
				goto out;
	}
	n_opt = no_max ? 1 : max - min;
	for (i = 0; i < n_opt; i++) {
		rec.n = 0;
		if (parse_append(p, &rec, prev.e, prev.n) ||
		    parse_generated(p, rule_name, &id))
			goto out;
		if ((i > 0 || no_max) &&
		    parse_push(p, &rec, GRAM_REF, no_max ? id : last_rec))
			goto out;
		if (parse_push(p, &rec, GRAM_ALT, 0) ||
		    parse_push(p, &rec, GRAM_END, 0))
			goto out;
		parse_set_rule(p, id, &rec);
		last_rec = id;
	}
	if (n_opt > 0 && parse_push(p, seq, GRAM_REF, last_rec))
		goto out;
	*n_prev_rules *= total;
	rc = 0;
out:
	free(prev.e);
	free(rec.e);
	return rc;
}

static const char *parse_uint(struct parser *p, const char *s, uint64_t *v)
{
	const char *q = s;

	*v = 0;
	while (parse_is_digit(*q)) {
		if (*v > (UINT64_MAX - 9) / 10)
			return parse_fail(p, s, "number too large");
		*v = *v * 10 + (uint64_t)(*q - '0');
		q++;
	}
	if (q == s)
		return parse_fail(p, s, "expecting an integer");
	return q;
}

/* {m}, {m,}, {m,n}: s is past '{' */
static const char *parse_braces(struct parser *p, const char *s, bool nested,
				uint64_t *min, uint64_t *max)
{
	s = parse_space(s, nested);
	if (!parse_is_digit(*s))
		return parse_fail(p, s, "expecting an integer");
	if (!(s = parse_uint(p, s, min)))
		return NULL;
	s = parse_space(s, nested);
	*max = UINT64_MAX;
	if (*s == '}') {
		*max = *min;
		s = parse_space(s + 1, nested);
	} else if (*s == ',') {
		s = parse_space(s + 1, nested);
		if (parse_is_digit(*s)) {
			if (!(s = parse_uint(p, s, max)))
				return NULL;
			s = parse_space(s, nested);
		}
		if (*s != '}')
			return parse_fail(p, s, "expecting '}'");
		s = parse_space(s + 1, nested);
	} else {
		return parse_fail(p, s, "expecting ','");
	}
	if (*min > PARSE_REPETITION_MAX)
		return parse_fail(p, s, "too many repetitions (at most 2000)");
	if (*max != UINT64_MAX && *max > PARSE_REPETITION_MAX)
		*max = UINT64_MAX; /* llama.cpp: unbounded */
	if (*max < *min)
		return parse_fail(p, s, "repetition maximum below its minimum");
	return s;
}

static const char *parse_class(struct parser *p, const char *s, bool nested,
			       struct parse_seq *seq)
{
	uint32_t type = GRAM_CHAR, start = seq->n, c;

	if (*s == '^') {
		s++;
		type = GRAM_CHAR_NOT;
	}
	while (*s != ']') {
		if (!*s)
			return parse_fail(p, s, "unexpected end of input");
		if (!(s = parse_char(p, s, &c)))
			return NULL;
		if (parse_push(p, seq, start < seq->n ? GRAM_CHAR_ALT : type,
			       c))
			return NULL;
		if (s[0] == '-' && s[1] != ']') {
			if (!s[1])
				return parse_fail(p, s + 1,
						  "unexpected end of input");
			if (!(s = parse_char(p, s + 1, &c)))
				return NULL;
			if (parse_push(p, seq, GRAM_RNG_UPPER, c))
				return NULL;
		}
	}
	/* [] adds nothing, as in llama.cpp */
	return parse_space(s + 1, nested);
}

static const char *parse_sequence(struct parser *p, const char *s,
				  const char *rule_name, struct parse_seq *seq,
				  bool nested)
{
	uint32_t last = seq->n, id, c;
	uint64_t n_prev_rules = 1, min, max;

	while (*s) {
		const char *at = s;

		if (*s == '"') {
			s++;
			last = seq->n;
			n_prev_rules = 1;
			while (*s != '"') {
				if (!*s)
					return parse_fail(
						p, s,
						"unexpected end of input");
				if (!(s = parse_char(p, s, &c)) ||
				    parse_push(p, seq, GRAM_CHAR, c))
					return NULL;
			}
			s = parse_space(s + 1, nested);
		} else if (*s == '[') {
			last = seq->n;
			n_prev_rules = 1;
			if (!(s = parse_class(p, s + 1, nested, seq)))
				return NULL;
		} else if (*s == '<' || *s == '!') {
			uint32_t type = GRAM_TOKEN;

			if (*s == '!') {
				type = GRAM_TOKEN_NOT;
				s++;
			}
			if (!(s = parse_token(p, s, &id)))
				return NULL;
			last = seq->n;
			n_prev_rules = 1;
			if (parse_push(p, seq, type, id))
				return NULL;
			s = parse_space(s, nested);
		} else if (parse_is_word(*s)) {
			const char *name_end = parse_name(p, s);

			if (!name_end ||
			    parse_symbol(p, s, (size_t)(name_end - s), &id))
				return NULL;
			if (!p->rules[id].first_use)
				p->rules[id].first_use = s;
			s = parse_space(name_end, nested);
			last = seq->n;
			n_prev_rules = 1;
			if (parse_push(p, seq, GRAM_REF, id))
				return NULL;
		} else if (*s == '(') {
			uint32_t before = p->n_rules;

			s = parse_space(s + 1, true);
			if (parse_generated(p, rule_name, &id))
				return NULL;
			s = parse_alternates(p, s, rule_name, id, true);
			if (!s)
				return NULL;
			n_prev_rules = p->n_rules - before > 1 ?
					       p->n_rules - before :
					       1;
			last = seq->n;
			if (parse_push(p, seq, GRAM_REF, id))
				return NULL;
			if (*s != ')')
				return parse_fail(p, s, "expecting ')'");
			s = parse_space(s + 1, nested);
		} else if (*s == '.') {
			last = seq->n;
			n_prev_rules = 1;
			if (parse_push(p, seq, GRAM_CHAR_ANY, 0))
				return NULL;
			s = parse_space(s + 1, nested);
		} else if (*s == '*' || *s == '+' || *s == '?') {
			min = *s == '+' ? 1 : 0;
			max = *s == '?' ? 1 : UINT64_MAX;
			s = parse_space(s + 1, nested);
			if (parse_repeat(p, at, seq, last, &n_prev_rules,
					 rule_name, min, max))
				return NULL;
		} else if (*s == '{') {
			if (!(s = parse_braces(p, s + 1, nested, &min, &max)) ||
			    parse_repeat(p, at, seq, last, &n_prev_rules,
					 rule_name, min, max))
				return NULL;
		} else {
			break;
		}
	}
	return s;
}

static const char *parse_alternates(struct parser *p, const char *s,
				    const char *rule_name, uint32_t rule_id,
				    bool nested)
{
	struct parse_seq seq = { 0 };

	s = parse_sequence(p, s, rule_name, &seq, nested);
	while (s && *s == '|') {
		if (parse_push(p, &seq, GRAM_ALT, 0)) {
			s = NULL;
			break;
		}
		s = parse_space(s + 1, true);
		s = parse_sequence(p, s, rule_name, &seq, nested);
	}
	if (s && !parse_push(p, &seq, GRAM_END, 0))
		parse_set_rule(p, rule_id, &seq);
	else
		s = NULL;
	free(seq.e);
	return s;
}

static const char *parse_rule(struct parser *p, const char *s)
{
	const char *name_end = parse_name(p, s), *q;
	char *name;
	uint32_t id;

	if (!name_end)
		return NULL;
	q = parse_space(name_end, false);
	if (parse_symbol(p, s, (size_t)(name_end - s), &id))
		return NULL;
	if (!p->rules[id].def)
		p->rules[id].def = s;
	if (!(q[0] == ':' && q[1] == ':' && q[2] == '='))
		return parse_fail(p, q, "expecting ::=");
	q = parse_space(q + 3, true);
	name = strndup(s, (size_t)(name_end - s));
	if (!name) {
		parse_nomem(p);
		return NULL;
	}
	q = parse_alternates(p, q, name, id, false);
	free(name);
	if (!q)
		return NULL;
	if (*q == '\r')
		q += q[1] == '\n' ? 2 : 1;
	else if (*q == '\n')
		q++;
	else if (*q)
		return parse_fail(p, q, "expecting a newline or the end");
	return parse_space(q, true);
}

/* ---- checks ------------------------------------------------------------ */

/* llama_grammar_detect_left_recursion, on the rules being built. */
static bool parse_left_recursive(struct parser *p, uint32_t r, uint8_t *state,
				 uint8_t *may_be_empty)
{
	const struct parse_rule *rule = &p->rules[r];
	bool at_start = true, recurse = true;

	if (state[r] == 1)
		return true;
	state[r] = 1;
	for (uint32_t i = 0; i < rule->n; i++) {
		if (gram_is_end(&rule->e[i])) {
			if (at_start) {
				may_be_empty[r] = 1;
				break;
			}
			at_start = true;
		} else {
			at_start = false;
		}
	}
	for (uint32_t i = 0; i < rule->n; i++) {
		const struct gram_elem *e = &rule->e[i];

		if (e->type == GRAM_REF && recurse) {
			if (parse_left_recursive(p, e->value, state,
						 may_be_empty))
				return true;
			if (!may_be_empty[e->value])
				recurse = false;
		} else {
			recurse = gram_is_end(e);
		}
	}
	state[r] = 2;
	return false;
}

static int parse_check(struct parser *p, struct gram_rules *out)
{
	uint8_t *state, *empty;
	uint32_t root = UINT32_MAX;
	char what[300];

	for (uint32_t i = 0; i < p->n_rules; i++) {
		if (!p->rules[i].defined) {
			snprintf(what, sizeof(what), "undefined rule '%.200s'",
				 p->names[i]);
			parse_fail(p, p->rules[i].first_use, what);
			return -EINVAL;
		}
		if (!strcmp(p->names[i], "root"))
			root = i;
	}
	if (root == UINT32_MAX) {
		parse_fail(p, p->src, "no rule named 'root'");
		return -EINVAL;
	}
	out->root = root;
	state = calloc(p->n_rules, 1);
	empty = calloc(p->n_rules, 1);
	if (!state || !empty) {
		free(state);
		free(empty);
		return parse_nomem(p);
	}
	for (uint32_t i = 0; i < p->n_rules; i++) {
		if (state[i] == 2)
			continue;
		if (parse_left_recursive(p, i, state, empty)) {
			uint32_t r = i;

			/* name the rule the loop runs through */
			for (uint32_t j = 0; j < p->n_rules; j++)
				if (state[j] == 1 && p->rules[j].def) {
					r = j;
					break;
				}
			snprintf(what, sizeof(what),
				 "left recursion through rule '%.200s'",
				 p->names[r]);
			parse_fail(p,
				   p->rules[r].def ? p->rules[r].def : p->src,
				   what);
			free(state);
			free(empty);
			return -EINVAL;
		}
	}
	free(state);
	free(empty);
	return 0;
}

/* Concatenate the rules into out. */
static int parse_flatten(struct parser *p, struct gram_rules *out)
{
	uint32_t n = 0, k = 0;

	for (uint32_t i = 0; i < p->n_rules; i++)
		n += p->rules[i].n;
	out->elems = malloc((n ? n : 1) * sizeof(*out->elems));
	out->rule_start = malloc(p->n_rules * sizeof(*out->rule_start));
	if (!out->elems || !out->rule_start)
		return parse_nomem(p);
	for (uint32_t i = 0; i < p->n_rules; i++) {
		out->rule_start[i] = k;
		memcpy(out->elems + k, p->rules[i].e,
		       p->rules[i].n * sizeof(*out->elems));
		k += p->rules[i].n;
	}
	out->n_elems = n;
	out->n_rules = p->n_rules;
	out->names = p->names;
	p->names = NULL;
	return 0;
}

int gram_parse(struct gram_rules *out, const char *text, size_t len,
	       gram_token_lookup lookup, void *ctx, uint32_t n_vocab,
	       struct err *err)
{
	struct parser p = {
		.lookup = lookup, .ctx = ctx, .n_vocab = n_vocab, .err = err
	};
	const char *s;
	char *copy;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (memchr(text, '\0', len))
		return err_set(err, EINVAL, "grammar: NUL byte in the text");
	copy = strndup(text, len);
	if (!copy)
		return err_set(err, ENOMEM, "grammar: out of memory");
	p.src = copy;
	s = parse_space(copy, true);
	while (s && *s)
		s = parse_rule(&p, s);
	if (!s)
		rc = -EINVAL;
	if (!rc && p.n_rules == 0) {
		parse_fail(&p, copy, "no rules");
		rc = -EINVAL;
	}
	if (!rc)
		rc = parse_check(&p, out);
	if (!rc)
		rc = parse_flatten(&p, out);
	if (p.failed && !rc)
		rc = -EINVAL;
	for (uint32_t i = 0; i < p.n_rules; i++) {
		free(p.rules[i].e);
		if (p.names)
			free(p.names[i]);
	}
	free(p.rules);
	free(p.names);
	free(copy);
	if (rc) {
		gram_rules_free(out);
		return rc == -ENOMEM ? -ENOMEM : -EINVAL;
	}
	return 0;
}

void gram_rules_free(struct gram_rules *r)
{
	if (r->names)
		for (uint32_t i = 0; i < r->n_rules; i++)
			free(r->names[i]);
	free(r->names);
	free(r->elems);
	free(r->rule_start);
	memset(r, 0, sizeof(*r));
}
