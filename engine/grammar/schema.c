// SPDX-License-Identifier: MIT
/*
 * JSON schema -> GBNF, as llama.cpp's json_schema_to_grammar makes it
 * (common/json-schema.cpp reads the schema, common/json-schema-to-
 * grammar.cpp writes the rules), so that json_schema= constrains an answer
 * to the very language llama-server's json_schema does:
 *
 *   {"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}
 *   ->  root ::= "{" space n-kv space "}"
 *       n-kv ::= "\"n\"" space ":" space integer  ...
 *
 * What it reads: type (one or a list), enum, const, anyOf/oneOf, allOf
 * (objects merged), $ref into the same document, properties, required,
 * additionalProperties, items/prefixItems, minItems/maxItems, minLength/
 * maxLength, pattern (anchored ^...$ regular expressions), format (date,
 * time, date-time, uuid), minimum/maximum/exclusive* of integers. A
 * schema that is not one fails with -EINVAL naming its JSON pointer
 * ("#/properties/age: ..."); JSON that does not parse names the line and
 * column. An unsupported pattern accepts any string, as llama.cpp does.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- strings ----------------------------------------------------------- */

struct sb {
	char *p;
	size_t n, cap;
	bool oom;
};

static void sb_addn(struct sb *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = (b->n + n + 1) * 2;
		char *p = realloc(b->p, cap);

		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static void sb_add(struct sb *b, const char *s)
{
	sb_addn(b, s, strlen(s));
}

static void sb_printf(struct sb *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void sb_printf(struct sb *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_addn(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n :
							 sizeof(tmp) - 1);
}

/* The bytes, taken over (NULL when out of memory); b is left empty. */
static char *sb_take(struct sb *b)
{
	char *p = b->oom ? NULL : b->p;

	if (!p && !b->oom)
		p = strdup("");
	if (b->oom)
		free(b->p);
	memset(b, 0, sizeof(*b));
	return p;
}

static void sb_free(struct sb *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

static char *str_cat(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	char *s = malloc(na + nb + 1);

	if (s) {
		memcpy(s, a, na);
		memcpy(s + na, b, nb + 1);
	}
	return s;
}

/* ---- the converter ----------------------------------------------------- */

struct schema_rule {
	char *name, *body;
};

struct conv {
	json_t *root;
	struct schema_rule *rules;
	size_t n_rules, cap_rules;
	char **resolving; /* $refs being visited */
	size_t n_resolving;
	struct err *err;
	int rc; /* the first failure */
	unsigned depth;
};

/* Schemas nest at most this deep (a $ref cycle through types is fine). */
#define SCHEMA_DEPTH_MAX 200

static int conv_fail(struct conv *c, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int conv_fail(struct conv *c, const char *path, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	if (c->rc)
		return c->rc;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->rc = err_set(c->err, EINVAL, "json_schema: %.120s: %s", path, msg);
	return c->rc;
}

static int conv_nomem(struct conv *c)
{
	if (!c->rc)
		c->rc = err_set(c->err, ENOMEM, "json_schema: out of memory");
	return c->rc;
}

static const char *conv_find(const struct conv *c, const char *name)
{
	for (size_t i = 0; i < c->n_rules; i++)
		if (!strcmp(c->rules[i].name, name))
			return c->rules[i].body;
	return NULL;
}

static int conv_put(struct conv *c, const char *name, const char *body)
{
	char *b = strdup(body), *n;

	if (!b)
		return conv_nomem(c);
	for (size_t i = 0; i < c->n_rules; i++)
		if (!strcmp(c->rules[i].name, name)) {
			free(c->rules[i].body);
			c->rules[i].body = b;
			return 0;
		}
	if (c->n_rules == c->cap_rules) {
		size_t cap = c->cap_rules ? 2 * c->cap_rules : 32;
		struct schema_rule *r = realloc(c->rules, cap * sizeof(*r));

		if (!r) {
			free(b);
			return conv_nomem(c);
		}
		c->rules = r;
		c->cap_rules = cap;
	}
	n = strdup(name);
	if (!n) {
		free(b);
		return conv_nomem(c);
	}
	c->rules[c->n_rules].name = n;
	c->rules[c->n_rules].body = b;
	c->n_rules++;
	return 0;
}

/* Runs of characters other than [a-zA-Z0-9-] become one '-'. */
static char *conv_rule_name(const char *name)
{
	size_t n = strlen(name), k = 0;
	char *s = malloc(n + 1);

	if (!s)
		return NULL;
	for (size_t i = 0; i < n;) {
		char ch = name[i];

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-') {
			s[k++] = ch;
			i++;
			continue;
		}
		s[k++] = '-';
		while (i < n && !((name[i] >= 'a' && name[i] <= 'z') ||
				  (name[i] >= 'A' && name[i] <= 'Z') ||
				  (name[i] >= '0' && name[i] <= '9') ||
				  name[i] == '-'))
			i++;
	}
	s[k] = '\0';
	return s;
}

/*
 * _add_rule: name (made a valid rule name) gets body, or name<i> with the
 * first i whose rule is absent or the same. Returns the rule's name
 * (malloc'ed), NULL on failure.
 */
static char *conv_add(struct conv *c, const char *name, const char *body)
{
	char *esc = conv_rule_name(name), *key;
	const char *have;
	char num[24];

	if (!esc || c->rc) {
		free(esc);
		if (!c->rc)
			conv_nomem(c);
		return NULL;
	}
	have = conv_find(c, esc);
	if (!have || !strcmp(have, body)) {
		if (conv_put(c, esc, body)) {
			free(esc);
			return NULL;
		}
		return esc;
	}
	for (unsigned i = 0;; i++) {
		snprintf(num, sizeof(num), "%u", i);
		key = str_cat(esc, num);
		if (!key) {
			free(esc);
			conv_nomem(c);
			return NULL;
		}
		have = conv_find(c, key);
		if (!have || !strcmp(have, body))
			break;
		free(key);
	}
	free(esc);
	if (conv_put(c, key, body)) {
		free(key);
		return NULL;
	}
	return key;
}

/* ---- primitives -------------------------------------------------------- */

static const char schema_space[] = "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}";

struct schema_builtin {
	const char *name, *body, *deps[6];
};

static const struct schema_builtin schema_builtins[] = {
	{ "boolean", "(\"true\" | \"false\")", { 0 } },
	{ "decimal-part", "[0-9]{1,16}", { 0 } },
	{ "integral-part", "[0] | [1-9] [0-9]{0,15}", { 0 } },
	{ "number",
	  "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? "
	  "integral-part)?",
	  { "integral-part", "decimal-part" } },
	{ "integer", "(\"-\"? integral-part)", { "integral-part" } },
	{ "value", "object | array | string | number | boolean | null",
	  { "object", "array", "string", "number", "boolean", "null" } },
	{ "object",
	  "\"{\" space ( string \":\" space value (\",\" space string \":\" "
	  "space value)* )? space \"}\"",
	  { "string", "value" } },
	{ "array", "\"[\" space ( value (\",\" space value)* )? space \"]\"",
	  { "value" } },
	{ "uuid",
	  "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} "
	  "\"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} \"\\\"\"",
	  { 0 } },
	{ "char",
	  "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" "
	  "[0-9a-fA-F]{4})",
	  { 0 } },
	{ "string", "\"\\\"\" char* \"\\\"\"", { "char" } },
	{ "null", "\"null\"", { 0 } },
	/* string formats */
	{ "date",
	  "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | "
	  "[1-2] [0-9] | \"3\" [0-1] )",
	  { 0 } },
	{ "time",
	  "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( "
	  "\".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | \"-\" ) ( [01] [0-9] | \"2\" "
	  "[0-3] ) \":\" [0-5] [0-9] )",
	  { 0 } },
	{ "date-time", "date \"T\" time", { "date", "time" } },
	{ "date-string", "\"\\\"\" date \"\\\"\"", { "date" } },
	{ "time-string", "\"\\\"\" time \"\\\"\"", { "time" } },
	{ "date-time-string", "\"\\\"\" date-time \"\\\"\"", { "date-time" } },
};

static const struct schema_builtin *conv_builtin(const char *name)
{
	for (size_t i = 0;
	     i < sizeof(schema_builtins) / sizeof(schema_builtins[0]); i++)
		if (!strcmp(schema_builtins[i].name, name))
			return &schema_builtins[i];
	return NULL;
}

static bool conv_reserved(const char *name)
{
	return !strcmp(name, "root") || conv_builtin(name);
}

/* _add_primitive: the rule and, once, the rules it uses. */
static char *conv_primitive(struct conv *c, const char *name,
			    const char *builtin)
{
	const struct schema_builtin *b = conv_builtin(builtin);
	char *n = conv_add(c, name, b->body);

	for (size_t i = 0; n && i < 6 && b->deps[i]; i++) {
		if (!conv_find(c, b->deps[i])) {
			char *d = conv_primitive(c, b->deps[i], b->deps[i]);

			if (!d) {
				free(n);
				return NULL;
			}
			free(d);
		}
	}
	return n;
}

/* ---- literals ---------------------------------------------------------- */

/* format_literal: "..." with \r \n \" \\ escaped. */
static void conv_literal(struct sb *b, const char *s, size_t n)
{
	sb_add(b, "\"");
	for (size_t i = 0; i < n; i++) {
		switch (s[i]) {
		case '\r': sb_add(b, "\\r"); break;
		case '\n': sb_add(b, "\\n"); break;
		case '"': sb_add(b, "\\\""); break;
		case '\\': sb_add(b, "\\\\"); break;
		default: sb_addn(b, s + i, 1);
		}
	}
	sb_add(b, "\"");
}

/* A JSON string as nlohmann's dump() writes it. */
static void conv_dump_string(struct sb *b, const char *s, size_t n)
{
	sb_add(b, "\"");
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		switch (ch) {
		case '"': sb_add(b, "\\\""); break;
		case '\\': sb_add(b, "\\\\"); break;
		case '\b': sb_add(b, "\\b"); break;
		case '\f': sb_add(b, "\\f"); break;
		case '\n': sb_add(b, "\\n"); break;
		case '\r': sb_add(b, "\\r"); break;
		case '\t': sb_add(b, "\\t"); break;
		default:
			if (ch < 0x20)
				sb_printf(b, "\\u%04x", ch);
			else
				sb_addn(b, s + i, 1);
		}
	}
	sb_add(b, "\"");
}

/* A double as nlohmann writes it: shortest round trip, ".0" if whole. */
static void conv_dump_real(struct sb *b, double d)
{
	char tmp[40];

	for (int prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
		if (strtod(tmp, NULL) == d)
			break;
	}
	sb_add(b, tmp);
	if (!strpbrk(tmp, ".eEn"))
		sb_add(b, ".0");
}

/* value.dump(): compact JSON, keys in their order. */
static void conv_dump(struct sb *b, const json_t *v)
{
	const char *key;
	json_t *item;
	size_t i;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		sb_add(b, "{");
		i = 0;
		json_object_foreach((json_t *)v, key, item) {
			if (i++)
				sb_add(b, ",");
			conv_dump_string(b, key, strlen(key));
			sb_add(b, ":");
			conv_dump(b, item);
		}
		sb_add(b, "}");
		break;
	case JSON_ARRAY:
		sb_add(b, "[");
		json_array_foreach(v, i, item) {
			if (i)
				sb_add(b, ",");
			conv_dump(b, item);
		}
		sb_add(b, "]");
		break;
	case JSON_STRING:
		conv_dump_string(b, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		sb_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL: conv_dump_real(b, json_real_value(v)); break;
	case JSON_TRUE: sb_add(b, "true"); break;
	case JSON_FALSE: sb_add(b, "false"); break;
	case JSON_NULL: sb_add(b, "null"); break;
	}
}

/* _generate_constant_rule: the literal of the value's JSON text. */
static void conv_constant(struct sb *out, const json_t *v)
{
	struct sb d = { 0 };

	conv_dump(&d, v);
	if (d.oom)
		out->oom = true;
	else
		conv_literal(out, d.p ? d.p : "", d.n);
	sb_free(&d);
}

/* ---- integers in a range ----------------------------------------------- */

static void conv_digit_range(struct sb *b, char from, char to)
{
	sb_add(b, "[");
	if (from == to)
		sb_printf(b, "%c", from);
	else
		sb_printf(b, "%c-%c", from, to);
	sb_add(b, "]");
}

static void conv_more_digits(struct sb *b, int min, int max)
{
	sb_add(b, "[0-9]");
	if (min == max && min == 1)
		return;
	sb_printf(b, "{%d", min);
	if (max != min) {
		sb_add(b, ",");
		if (max != INT32_MAX)
			sb_printf(b, "%d", max);
	}
	sb_add(b, "}");
}

static void conv_repeat_char(char *s, char ch, size_t n)
{
	memset(s, ch, n);
	s[n] = '\0';
}

/* from and to have the same length */
static void conv_uniform_range(struct sb *b, const char *from, const char *to)
{
	size_t i = 0, lf = strlen(from), lt = strlen(to);

	while (i < lf && i < lt && from[i] == to[i])
		i++;
	if (i > 0)
		sb_printf(b, "\"%.*s\"", (int)i, from);
	if (i < lf && i < lt) {
		size_t sub = lf - i - 1;

		if (i > 0)
			sb_add(b, " ");
		if (sub > 0) {
			char zeros[24], nines[24];
			const char *fs = from + i + 1, *ts = to + i + 1;
			bool to_reached = false;

			conv_repeat_char(zeros, '0', sub);
			conv_repeat_char(nines, '9', sub);
			sb_add(b, "(");
			if (!strcmp(fs, zeros)) {
				conv_digit_range(b, from[i], (char)(to[i] - 1));
				sb_add(b, " ");
				conv_more_digits(b, (int)sub, (int)sub);
			} else {
				sb_printf(b, "[%c] (", from[i]);
				conv_uniform_range(b, fs, nines);
				sb_add(b, ")");
				if (from[i] < to[i] - 1) {
					sb_add(b, " | ");
					if (!strcmp(ts, nines)) {
						conv_digit_range(b,
								 (char)(from[i] + 1),
								 to[i]);
						to_reached = true;
					} else {
						conv_digit_range(
							b, (char)(from[i] + 1),
							(char)(to[i] - 1));
					}
					sb_add(b, " ");
					conv_more_digits(b, (int)sub, (int)sub);
				}
			}
			if (!to_reached) {
				sb_add(b, " | ");
				conv_digit_range(b, to[i], to[i]);
				sb_add(b, " ");
				conv_uniform_range(b, zeros, ts);
			}
			sb_add(b, ")");
		} else {
			sb_printf(b, "[%c-%c]", from[i], to[i]);
		}
	}
}

/* build_min_max_int; INT64_MIN / INT64_MAX: no bound */
static void conv_min_max(struct sb *b, int64_t min, int64_t max, int decimals,
			 bool top)
{
	bool has_min = min != INT64_MIN, has_max = max != INT64_MAX;
	int less = decimals - 1 > 1 ? decimals - 1 : 1;
	char ms[24], xs[24], nines[24];

	if (has_min && has_max) {
		if (min < 0 && max < 0) {
			sb_add(b, "\"-\" (");
			conv_min_max(b, -max, -min, decimals, true);
			sb_add(b, ")");
			return;
		}
		if (min < 0) {
			sb_add(b, "\"-\" (");
			conv_min_max(b, 0, -min, decimals, true);
			sb_add(b, ") | ");
			min = 0;
		}
		snprintf(ms, sizeof(ms), "%" PRId64, min);
		snprintf(xs, sizeof(xs), "%" PRId64, max);
		for (size_t d = strlen(ms); d < strlen(xs); d++) {
			conv_repeat_char(nines, '9', d);
			conv_uniform_range(b, ms, nines);
			ms[0] = '1';
			memset(ms + 1, '0', d);
			ms[d + 1] = '\0';
			sb_add(b, " | ");
		}
		conv_uniform_range(b, ms, xs);
		return;
	}
	if (has_min) {
		if (min < 0) {
			sb_add(b, "\"-\" (");
			conv_min_max(b, INT64_MIN, -min, decimals, false);
			sb_add(b, ") | [0] | [1-9] ");
			conv_more_digits(b, 0, decimals - 1);
		} else if (min == 0) {
			if (top) {
				sb_add(b, "[0] | [1-9] ");
				conv_more_digits(b, 0, less);
			} else {
				conv_more_digits(b, 1, decimals);
			}
		} else if (min <= 9) {
			char ch = (char)('0' + min), start = top ? '1' : '0';

			if (ch > start) {
				conv_digit_range(b, start, (char)(ch - 1));
				sb_add(b, " ");
				conv_more_digits(b, 1, less);
				sb_add(b, " | ");
			}
			conv_digit_range(b, ch, '9');
			sb_add(b, " ");
			conv_more_digits(b, 0, less);
		} else {
			size_t len;
			char ch;

			snprintf(ms, sizeof(ms), "%" PRId64, min);
			len = strlen(ms);
			ch = ms[0];
			if (ch > '1') {
				conv_digit_range(b, top ? '1' : '0',
						 (char)(ch - 1));
				sb_add(b, " ");
				conv_more_digits(b, (int)len, less);
				sb_add(b, " | ");
			}
			conv_digit_range(b, ch, ch);
			sb_add(b, " (");
			conv_min_max(b, strtoll(ms + 1, NULL, 10), INT64_MAX,
				     less, false);
			sb_add(b, ")");
			if (ch < '9') {
				sb_add(b, " | ");
				conv_digit_range(b, (char)(ch + 1), '9');
				sb_add(b, " ");
				conv_more_digits(b, (int)len - 1, less);
			}
		}
		return;
	}
	if (max >= 0) {
		if (top) {
			sb_add(b, "\"-\" [1-9] ");
			conv_more_digits(b, 0, less);
			sb_add(b, " | ");
		}
		conv_min_max(b, 0, max, decimals, true);
	} else {
		sb_add(b, "\"-\" (");
		conv_min_max(b, -max, INT64_MAX, decimals, false);
		sb_add(b, ")");
	}
}

/* build_repetition; max INT32_MAX: no bound. sep may be NULL. */
static void conv_repetition(struct sb *b, const char *item, int min, int max,
			    const char *sep)
{
	bool has_max = max != INT32_MAX;

	if (max == 0)
		return;
	if (min == 0 && max == 1) {
		sb_add(b, item);
		sb_add(b, "?");
		return;
	}
	if (!sep || !*sep) {
		sb_add(b, item);
		if (min == 1 && !has_max)
			sb_add(b, "+");
		else if (min == 0 && !has_max)
			sb_add(b, "*");
		else if (has_max)
			sb_printf(b, "{%d,%d}", min, max);
		else
			sb_printf(b, "{%d,}", min);
		return;
	}
	{
		struct sb inner = { 0 };

		sb_add(&inner, "(");
		sb_add(&inner, sep);
		sb_add(&inner, " ");
		sb_add(&inner, item);
		sb_add(&inner, ")");
		if (min == 0)
			sb_add(b, "(");
		sb_add(b, item);
		sb_add(b, " ");
		if (!inner.oom)
			conv_repetition(b, inner.p, min == 0 ? 0 : min - 1,
					has_max ? max - 1 : max, NULL);
		else
			b->oom = true;
		if (min == 0)
			sb_add(b, ")?");
		sb_free(&inner);
	}
}

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
			struct pat_item it = { lit.p ? lit.p : (char *)"", true };
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
		if (comma > start && !pat_stoi(p->s + start, comma - start, &min))
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
			char **d = b ? realloc(p->sub_id, (k + 1) * sizeof(*d)) :
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
				if (p->i + 1 < p->len && p->s[p->i + 1] == ':') {
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
static char *conv_pattern(struct conv *c, const char *pattern,
			  const char *name, const char *path)
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

/* ---- schemas ----------------------------------------------------------- */

enum schema_kind {
	KIND_ANY,
	KIND_REF,
	KIND_ANY_OF,
	KIND_ALL_OF,
	KIND_CONST,
	KIND_ENUM,
	KIND_NULL,
	KIND_BOOLEAN,
	KIND_NUMBER,
	KIND_INTEGER,
	KIND_STRING,
	KIND_ARRAY,
	KIND_TUPLE,
	KIND_OBJECT,
};

static char *conv_visit(struct conv *c, json_t *s, const char *name,
			const char *path);

static char *path_cat(const char *path, const char *a, const char *b)
{
	size_t n = strlen(path) + strlen(a) + (b ? strlen(b) : 0) + 1;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s%s%s", path, a, b ? b : "");
	return p;
}

static char *name_cat(const char *name, const char *part)
{
	size_t n = strlen(name) + strlen(part) + 2;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s%s%s", name, *name ? "-" : "", part);
	return p;
}

static bool has(const json_t *s, const char *key)
{
	return json_object_get(s, key) != NULL;
}

/* get_count: a non-negative integer, def when absent; -1 on error */
static int conv_count(struct conv *c, const json_t *s, const char *key,
		      const char *path, int def)
{
	json_t *v = json_object_get(s, key);

	if (!v)
		return def;
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		conv_fail(c, path, "%s must be a non-negative integer", key);
		return -2;
	}
	return json_integer_value(v) > INT32_MAX ? INT32_MAX :
						   (int)json_integer_value(v);
}

/* get_format: 0 none, 1 date, 2 time, 3 date-time, 4 uuid; -1 error */
static int conv_format(struct conv *c, const json_t *s, const char *path)
{
	json_t *v = json_object_get(s, "format");
	const char *f;

	if (!v)
		return 0;
	if (!json_is_string(v)) {
		conv_fail(c, path, "format must be a string");
		return -1;
	}
	f = json_string_value(v);
	if (!strcmp(f, "date"))
		return 1;
	if (!strcmp(f, "time"))
		return 2;
	if (!strcmp(f, "date-time"))
		return 3;
	if (!strcmp(f, "uuid") || (strlen(f) == 5 && !strncmp(f, "uuid", 4) &&
				   f[4] >= '1' && f[4] <= '5'))
		return 4;
	return 0;
}

/* json-schema.cpp's build_node: what kind of schema s is. */
static int conv_kind(struct conv *c, const json_t *s, const char *path,
		     enum schema_kind *k)
{
	json_t *type, *add;
	const char *t;
	bool has_properties;

	if (!json_is_object(s))
		return conv_fail(c, path, "schema must be an object");
	if (has(s, "$ref")) {
		*k = KIND_REF;
		return 0;
	}
	if (has(s, "oneOf") || has(s, "anyOf")) {
		*k = KIND_ANY_OF;
		return 0;
	}
	type = json_object_get(s, "type");
	if (json_is_array(type)) {
		if (!json_array_size(type))
			return conv_fail(c, path, "type must not be empty");
		*k = KIND_ANY_OF;
		return 0;
	}
	if (has(s, "const")) {
		*k = KIND_CONST;
		return 0;
	}
	if (has(s, "enum")) {
		json_t *e = json_object_get(s, "enum");

		if (!json_is_array(e) || !json_array_size(e))
			return conv_fail(c, path,
					 "enum must be a non-empty array");
		*k = KIND_ENUM;
		return 0;
	}
	if (type && !json_is_null(type) && !json_is_string(type))
		return conv_fail(c, path,
				 "type must be a string or an array of strings");
	t = json_is_string(type) ? json_string_value(type) : "";
	add = json_object_get(s, "additionalProperties");
	has_properties = has(s, "properties") || (add && !json_is_true(add));
	if (!*t) {
		int f = conv_format(c, s, path);

		if (f < 0)
			return c->rc;
		if (has_properties)
			*k = KIND_OBJECT;
		else if (has(s, "allOf"))
			*k = KIND_ALL_OF;
		else if (has(s, "items") || has(s, "prefixItems"))
			*k = KIND_ARRAY;
		else if (has(s, "pattern") || has(s, "minLength") ||
			 has(s, "maxLength") || f)
			*k = KIND_STRING;
		else
			*k = KIND_ANY;
	} else if (!strcmp(t, "object")) {
		*k = !has_properties && has(s, "allOf") ? KIND_ALL_OF :
							  KIND_OBJECT;
	} else if (!strcmp(t, "string")) {
		*k = has(s, "allOf") ? KIND_ALL_OF : KIND_STRING;
	} else if (!strcmp(t, "array")) {
		*k = KIND_ARRAY;
	} else if (!strcmp(t, "integer")) {
		*k = KIND_INTEGER;
	} else if (!strcmp(t, "number")) {
		*k = KIND_NUMBER;
	} else if (!strcmp(t, "boolean")) {
		*k = KIND_BOOLEAN;
	} else if (!strcmp(t, "null")) {
		*k = KIND_NULL;
	} else {
		return conv_fail(c, path, "unrecognized type %.60s", t);
	}
	if (*k == KIND_ARRAY) {
		json_t *items = json_object_get(s, "items");

		if (!items)
			items = json_object_get(s, "prefixItems");
		if (json_is_array(items))
			*k = KIND_TUPLE;
	}
	return 0;
}

/* The target of "#/a/b/0" in the document. */
static json_t *conv_resolve(struct conv *c, const char *ref, const char *path)
{
	json_t *t = c->root;
	const char *p = ref + 1;

	if (strncmp(ref, "#/", 2))
		return conv_fail(c, path,
				 "unsupported $ref %.80s, only references into "
				 "the same document are supported",
				 ref),
		       NULL;
	/* split on '/', skipping the empty piece before the first one */
	while (*p == '/') {
		const char *q = strchr(p + 1, '/');
		size_t n = q ? (size_t)(q - p - 1) : strlen(p + 1);
		char *sel = strndup(p + 1, n);

		if (!sel)
			return conv_nomem(c), NULL;
		if (json_is_object(t) && json_object_get(t, sel)) {
			t = json_object_get(t, sel);
		} else if (json_is_array(t)) {
			char *end;
			unsigned long long idx = strtoull(sel, &end, 10);

			if (end == sel || idx >= json_array_size(t)) {
				conv_fail(c, path,
					  "cannot resolve $ref %.80s, %.40s is "
					  "out of range",
					  ref, sel);
				free(sel);
				return NULL;
			}
			t = json_array_get(t, idx);
		} else {
			conv_fail(c, path,
				  "cannot resolve $ref %.80s, %.40s not found",
				  ref, sel);
			free(sel);
			return NULL;
		}
		free(sel);
		p += n + 1;
	}
	return t;
}

static char *conv_ref(struct conv *c, json_t *s, const char *path)
{
	json_t *v = json_object_get(s, "$ref");
	const char *ref, *frag;
	char *name, *esc;
	json_t *target;

	if (!json_is_string(v))
		return conv_fail(c, path, "$ref must be a string"), NULL;
	ref = json_string_value(v);
	if (!(target = conv_resolve(c, ref, path)))
		return NULL;
	frag = strchr(ref, '#') ? strchr(ref, '#') + 1 : ref;
	esc = conv_rule_name(frag);
	name = esc ? str_cat("ref", esc) : NULL;
	free(esc);
	if (!name)
		return conv_nomem(c), NULL;
	if (!conv_find(c, name)) {
		char **r;
		char *got;

		for (size_t i = 0; i < c->n_resolving; i++)
			if (!strcmp(c->resolving[i], ref))
				return name;
		r = realloc(c->resolving, (c->n_resolving + 1) * sizeof(*r));
		if (!r) {
			free(name);
			return conv_nomem(c), NULL;
		}
		c->resolving = r;
		c->resolving[c->n_resolving++] = (char *)ref;
		got = conv_visit(c, target, name, ref);
		c->n_resolving--;
		free(name);
		return got;
	}
	return name;
}

/* One object property (or the additional ones under "*"). */
struct conv_prop {
	const char *name;
	json_t *schema;
	char *kv; /* its key-value rule */
	bool required;
};

/* _not_strings: a JSON string that is none of names. */
struct not_node {
	uint32_t cp;
	size_t first_child, next; /* indices + 1 */
	bool end;
};

static size_t not_insert(struct not_node **nodes, size_t *n, size_t *cap,
			 const char *w)
{
	size_t cur = 0;
	struct gram_partial part = { 0, 0 };
	uint32_t cps[256 + 4];
	size_t k = gram_decode_utf8((const uint8_t *)w, strnlen(w, 256), &part,
				    cps);

	for (size_t i = 0; i < k; i++) {
		size_t *link = &(*nodes)[cur].first_child, prev = 0;

		/* children sorted by code point, as std::map keeps them */
		while (*link && (*nodes)[*link - 1].cp < cps[i]) {
			prev = *link;
			link = &(*nodes)[*link - 1].next;
		}
		(void)prev;
		if (*link && (*nodes)[*link - 1].cp == cps[i]) {
			cur = *link - 1;
			continue;
		}
		if (*n == *cap) {
			size_t off = (size_t)((char *)link - (char *)*nodes);
			bool inside = off < *cap * sizeof(**nodes);
			struct not_node *p = realloc(*nodes,
						     2 * *cap * sizeof(*p));

			if (!p)
				return SIZE_MAX;
			if (inside)
				link = (size_t *)((char *)p + off);
			*nodes = p;
			*cap *= 2;
		}
		(*nodes)[*n].cp = cps[i];
		(*nodes)[*n].first_child = 0;
		(*nodes)[*n].next = *link;
		(*nodes)[*n].end = false;
		*link = ++*n;
		cur = *n - 1;
	}
	(*nodes)[cur].end = true;
	return cur;
}

static void not_utf8(struct sb *b, uint32_t cp)
{
	char s[4];

	if (cp < 0x80) {
		s[0] = (char)cp;
		sb_addn(b, s, 1);
	} else if (cp < 0x800) {
		s[0] = (char)(0xc0 | cp >> 6);
		s[1] = (char)(0x80 | (cp & 0x3f));
		sb_addn(b, s, 2);
	} else if (cp < 0x10000) {
		s[0] = (char)(0xe0 | cp >> 12);
		s[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		s[2] = (char)(0x80 | (cp & 0x3f));
		sb_addn(b, s, 3);
	} else {
		s[0] = (char)(0xf0 | cp >> 18);
		s[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		s[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		s[3] = (char)(0x80 | (cp & 0x3f));
		sb_addn(b, s, 4);
	}
}

static void not_visit(struct sb *out, const struct not_node *nodes, size_t n,
		      const char *char_rule)
{
	struct sb rejects = { 0 };
	bool first = true;

	for (size_t ch = nodes[n].first_child; ch; ch = nodes[ch - 1].next) {
		not_utf8(&rejects, nodes[ch - 1].cp);
		if (!first)
			sb_add(out, " | ");
		first = false;
		sb_add(out, "[");
		not_utf8(out, nodes[ch - 1].cp);
		sb_add(out, "]");
		if (nodes[ch - 1].first_child) {
			sb_add(out, " (");
			not_visit(out, nodes, ch - 1, char_rule);
			sb_add(out, ")");
		} else {
			sb_add(out, " ");
			sb_add(out, char_rule);
			sb_add(out, "+");
		}
	}
	if (nodes[n].first_child) {
		sb_add(out, " | [^\"");
		sb_add(out, rejects.p ? rejects.p : "");
		sb_add(out, "] ");
		sb_add(out, char_rule);
		sb_add(out, "*");
	}
	if (rejects.oom)
		out->oom = true;
	sb_free(&rejects);
}

static char *conv_not_strings(struct conv *c, const struct conv_prop *props,
			      size_t n)
{
	size_t cap = 16, count = 1;
	struct not_node *nodes = calloc(cap, sizeof(*nodes));
	char *char_rule = conv_primitive(c, "char", "char");
	struct sb out = { 0 };

	if (!nodes || !char_rule) {
		free(nodes);
		free(char_rule);
		return conv_nomem(c), NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (not_insert(&nodes, &count, &cap, props[i].name) ==
		    SIZE_MAX) {
			free(nodes);
			free(char_rule);
			return conv_nomem(c), NULL;
		}
	sb_add(&out, "[\"] ( ");
	not_visit(&out, nodes, 0, char_rule);
	sb_add(&out, " )");
	if (!nodes[0].end)
		sb_add(&out, "?");
	sb_add(&out, " [\"]");
	free(nodes);
	free(char_rule);
	if (out.oom) {
		sb_free(&out);
		return conv_nomem(c), NULL;
	}
	return sb_take(&out);
}

/* get_recursive_refs: the optional properties from ks[0] on */
static void conv_optional_chain(struct conv *c, struct sb *out,
				struct conv_prop **ks, size_t n,
				bool first_optional, const char *name)
{
	const struct conv_prop *k;
	bool star;

	if (!n)
		return;
	k = ks[0];
	star = !strcmp(k->name, "*");
	if (first_optional) {
		sb_add(out, "( \",\" space ");
		sb_add(out, k->kv);
		sb_add(out, " )");
		sb_add(out, star ? "*" : "?");
	} else {
		sb_add(out, k->kv);
		if (star) {
			sb_add(out, " ( \",\" space ");
			sb_add(out, k->kv);
			sb_add(out, " )*");
		}
	}
	if (n > 1) {
		struct sb rest = { 0 };
		char *rn, *rule;

		conv_optional_chain(c, &rest, ks + 1, n - 1, true, name);
		rn = malloc(strlen(name) + strlen(k->name) + 8);
		if (rn)
			sprintf(rn, "%s%s%s-rest", name, *name ? "-" : "",
				k->name);
		rule = rn && !rest.oom ? conv_add(c, rn, rest.p ? rest.p : "") :
					 NULL;
		if (!rule && !c->rc)
			conv_nomem(c);
		sb_add(out, " ");
		sb_add(out, rule ? rule : "");
		free(rule);
		free(rn);
		sb_free(&rest);
	}
}

/* _build_object_rule; additional: the schema of other keys, or NULL. */
static char *conv_object_rule(struct conv *c, struct conv_prop *props,
			      size_t n, const char *name, json_t *additional,
			      bool additional_any, const char *path)
{
	struct conv_prop **req = calloc(n + 1, sizeof(*req));
	struct conv_prop **opt = calloc(n + 1, sizeof(*opt));
	struct conv_prop star = { .name = "*" };
	size_t n_req = 0, n_opt = 0;
	struct sb r = { 0 };

	if (!req || !opt)
		goto nomem;
	for (size_t i = 0; i < n && !c->rc; i++) {
		char *sub = name_cat(name, props[i].name), *val, *kvn;
		struct sb kv = { 0 }, key = { 0 };
		char *ppath = path_cat(path, "/properties/", props[i].name);

		val = sub && ppath ? conv_visit(c, props[i].schema, sub, ppath) :
				     NULL;
		free(ppath);
		if (!val) {
			free(sub);
			goto fail;
		}
		conv_dump_string(&key, props[i].name, strlen(props[i].name));
		conv_literal(&kv, key.p ? key.p : "", key.n);
		sb_add(&kv, " space \":\" space ");
		sb_add(&kv, val);
		kvn = str_cat(sub, "-kv");
		free(props[i].kv);
		props[i].kv = kvn && !kv.oom && !key.oom ?
				      conv_add(c, kvn, kv.p) :
				      NULL;
		free(kvn);
		free(sub);
		free(val);
		sb_free(&kv);
		sb_free(&key);
		if (!props[i].kv)
			goto fail;
		if (props[i].required)
			req[n_req++] = &props[i];
		else
			opt[n_opt++] = &props[i];
	}
	if (additional || additional_any) {
		char *sub = name_cat(name, "additional"), *val = NULL, *key,
		     *kvn, *vn = NULL;
		struct sb kv = { 0 };

		if (!sub)
			goto nomem;
		if (additional) {
			char *apath = path_cat(path, "/additionalProperties",
					       NULL);

			vn = str_cat(sub, "-value");
			val = vn && apath ? conv_visit(c, additional, vn, apath) :
					    NULL;
			free(apath);
		} else {
			val = conv_primitive(c, "value", "value");
		}
		free(vn);
		if (n) {
			char *notk = conv_not_strings(c, props, n);
			char *kn = str_cat(sub, "-k");

			key = notk && kn ? conv_add(c, kn, notk) : NULL;
			free(notk);
			free(kn);
		} else {
			key = conv_primitive(c, "string", "string");
		}
		if (val && key) {
			sb_add(&kv, key);
			sb_add(&kv, " \":\" space ");
			sb_add(&kv, val);
		}
		kvn = str_cat(sub, "-kv");
		star.kv = val && key && kvn && !kv.oom ? conv_add(c, kvn, kv.p) :
							 NULL;
		free(kvn);
		free(key);
		free(val);
		free(sub);
		sb_free(&kv);
		if (!star.kv)
			goto fail;
		opt[n_opt++] = &star;
	}
	if (!n_req && !n_opt) {
		free(req);
		free(opt);
		return strdup("\"{\" space \"}\"");
	}
	sb_add(&r, "\"{\" space ");
	for (size_t i = 0; i < n_req; i++) {
		if (i)
			sb_add(&r, " \",\" space ");
		sb_add(&r, req[i]->kv);
	}
	if (n_opt) {
		sb_add(&r, " (");
		if (n_req)
			sb_add(&r, " \",\" space ( ");
		for (size_t i = 0; i < n_opt; i++) {
			if (i)
				sb_add(&r, " | ");
			conv_optional_chain(c, &r, opt + i, n_opt - i, false,
					    name);
		}
		if (n_req)
			sb_add(&r, " )");
		sb_add(&r, " )?");
	}
	sb_add(&r, " space \"}\"");
	free(star.kv);
	free(req);
	free(opt);
	if (c->rc || r.oom) {
		sb_free(&r);
		if (!c->rc)
			conv_nomem(c);
		return NULL;
	}
	return sb_take(&r);
nomem:
	conv_nomem(c);
fail:
	free(star.kv);
	free(req);
	free(opt);
	sb_free(&r);
	return NULL;
}

static void conv_props_free(struct conv_prop *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(p[i].kv);
	free(p);
}

enum conv_required {
	CONV_REQUIRED_LISTED, /* those its "required" names */
	CONV_REQUIRED_ALL,    /* an allOf member's */
	CONV_REQUIRED_NONE,   /* an anyOf alternative's inside an allOf */
};

/* An object's properties, in their order, with required marked. */
static int conv_props(struct conv *c, json_t *s, const char *path,
		      struct conv_prop **out, size_t *n,
		      enum conv_required mode)
{
	json_t *props = json_object_get(s, "properties"), *req, *v;
	const char *key;
	size_t i, k = 0;

	if (props && !json_is_object(props))
		return conv_fail(c, path, "properties must be an object");
	req = json_object_get(s, "required");
	if (props && json_object_size(props)) {
		struct conv_prop *p = realloc(*out, (*n + json_object_size(props)) *
							    sizeof(*p));

		if (!p)
			return conv_nomem(c);
		*out = p;
		json_object_foreach(props, key, v) {
			bool r = mode == CONV_REQUIRED_ALL;
			json_t *name;

			json_array_foreach(req, i, name) {
				if (mode == CONV_REQUIRED_LISTED &&
				    json_is_string(name) &&
				    !strcmp(json_string_value(name), key))
					r = true;
			}
			p[*n + k].name = key;
			p[*n + k].schema = v;
			p[*n + k].kv = NULL;
			p[*n + k].required = r;
			k++;
		}
		*n += k;
	}
	return 0;
}

static char *conv_object(struct conv *c, json_t *s, const char *name,
			 const char *rule_name, const char *path)
{
	json_t *add = json_object_get(s, "additionalProperties");
	struct conv_prop *props = NULL;
	size_t n = 0;
	bool any = false;
	char *body, *r;

	if (add && !json_is_boolean(add) && !json_is_object(add))
		return conv_fail(c, path,
				 "additionalProperties must be a boolean or a "
				 "schema"),
		       NULL;
	if (json_is_true(add) || (!add && !has(s, "properties")))
		any = true;
	if (conv_props(c, s, path, &props, &n, CONV_REQUIRED_LISTED)) {
		conv_props_free(props, n);
		return NULL;
	}
	if (!n && any) {
		char *o = conv_primitive(c, "object", "object");

		r = o ? conv_add(c, rule_name, o) : NULL;
		free(o);
		conv_props_free(props, n);
		return r;
	}
	body = conv_object_rule(c, props, n, name,
				json_is_object(add) ? add : NULL, any, path);
	conv_props_free(props, n);
	if (!body)
		return NULL;
	r = conv_add(c, rule_name, body);
	free(body);
	return r;
}

/* _visit_all_of: the objects merged, or the values every enum shares. */
static char *conv_all_of(struct conv *c, json_t *s, const char *name,
			 const char *rule_name, const char *path)
{
	json_t *all = json_object_get(s, "allOf"), *child;
	struct conv_prop *props = NULL;
	size_t n = 0, i, n_enum = 0;
	char **enum_lit = NULL;
	unsigned *enum_count = NULL;
	char *body = NULL, *r = NULL;

	if (!json_is_array(all))
		return conv_fail(c, path, "must be an array of schemas"), NULL;
	if (!json_array_size(all))
		return conv_fail(c, path, "must not be empty"), NULL;
	json_array_foreach(all, i, child) {
		json_t *alts[1] = { child }, *list = NULL, *alt;
		size_t na = 1, j;
		bool required = true;
		enum schema_kind k;

		if (conv_kind(c, child, path, &k))
			goto out;
		if (k == KIND_ANY_OF && !json_is_array(json_object_get(child,
								       "type"))) {
			list = json_object_get(child, "oneOf");
			if (!list)
				list = json_object_get(child, "anyOf");
			required = false;
			na = json_array_size(list);
		}
		for (j = 0; j < na; j++) {
			alt = list ? json_array_get(list, j) : alts[0];
			/* follow $refs to what they name */
			for (int hop = 0; hop < 32 && json_is_object(alt) &&
					  has(alt, "$ref");
			     hop++) {
				json_t *v = json_object_get(alt, "$ref");

				alt = json_is_string(v) ?
					      conv_resolve(c,
							   json_string_value(v),
							   path) :
					      NULL;
			}
			if (c->rc)
				goto out;
			if (!alt || conv_kind(c, alt, path, &k))
				goto out;
			if (k == KIND_OBJECT) {
				if (conv_props(c, alt, path, &props, &n,
					       required ? CONV_REQUIRED_ALL :
							  CONV_REQUIRED_NONE))
					goto out;
			} else if (k == KIND_ENUM) {
				json_t *vals = json_object_get(alt, "enum"), *v;
				size_t e;

				json_array_foreach(vals, e, v) {
					struct sb lit = { 0 };
					size_t m;

					conv_constant(&lit, v);
					if (lit.oom) {
						conv_nomem(c);
						goto out;
					}
					for (m = 0; m < n_enum; m++)
						if (!strcmp(enum_lit[m], lit.p))
							break;
					if (m == n_enum) {
						char **a = realloc(enum_lit,
								   (m + 1) *
									   sizeof(*a));
						unsigned *b;

						if (a)
							enum_lit = a;
						b = a ? realloc(enum_count,
								(m + 1) *
									sizeof(*b)) :
							NULL;
						if (b)
							enum_count = b;
						if (!a || !b) {
							sb_free(&lit);
							conv_nomem(c);
							goto out;
						}
						enum_lit[m] = sb_take(&lit);
						enum_count[m] = 0;
						n_enum++;
					}
					sb_free(&lit);
					enum_count[m]++;
				}
			}
		}
	}
	if (n_enum) {
		struct sb e = { 0 };
		bool any = false;

		/* std::map order: by the literal's bytes */
		for (size_t a = 0; a < n_enum; a++)
			for (size_t b = a + 1; b < n_enum; b++)
				if (strcmp(enum_lit[b], enum_lit[a]) < 0) {
					char *t = enum_lit[a];
					unsigned u = enum_count[a];

					enum_lit[a] = enum_lit[b];
					enum_lit[b] = t;
					enum_count[a] = enum_count[b];
					enum_count[b] = u;
				}
		sb_add(&e, "(");
		for (size_t a = 0; a < n_enum; a++)
			if (enum_count[a] == json_array_size(all)) {
				if (any)
					sb_add(&e, " | ");
				sb_add(&e, enum_lit[a]);
				any = true;
			}
		sb_add(&e, ")");
		if (any && !e.oom) {
			r = conv_add(c, rule_name, e.p);
			sb_free(&e);
			goto out;
		}
		sb_free(&e);
	}
	body = conv_object_rule(c, props, n, name, NULL, false, path);
	if (body)
		r = conv_add(c, rule_name, body);
out:
	for (i = 0; i < n_enum; i++)
		free(enum_lit[i]);
	free(enum_lit);
	free(enum_count);
	free(body);
	conv_props_free(props, n);
	return r;
}

static char *conv_primitive_rule(struct conv *c, const char *rule_name,
				 const char *type)
{
	return conv_primitive(c, !strcmp(rule_name, "root") ? "root" : type,
			      type);
}

/* An alternative for each of list's schemas (or each type of a list). */
static char *conv_union(struct conv *c, json_t *s, const char *name,
			const char *path)
{
	json_t *types = json_object_get(s, "type"), *list = NULL;
	const char *key = "type";
	struct sb u = { 0 };
	size_t n;

	if (!json_is_array(types) || has(s, "$ref") || has(s, "oneOf") ||
	    has(s, "anyOf")) {
		key = has(s, "oneOf") ? "oneOf" : "anyOf";
		list = json_object_get(s, key);
		if (!json_is_array(list))
			return conv_fail(c, path, "%s must be an array of schemas",
					 key),
			       NULL;
		if (!json_array_size(list))
			return conv_fail(c, path, "%s must not be empty", key),
			       NULL;
		n = json_array_size(list);
	} else {
		n = json_array_size(types);
	}
	for (size_t i = 0; i < n && !c->rc; i++) {
		char num[48], *alt_name, *alt_path, *r;
		json_t *alt;

		snprintf(num, sizeof(num), "%s%zu",
			 *name ? "-" : "alternative-", i);
		alt_name = str_cat(name, num);
		snprintf(num, sizeof(num), "/%zu", i);
		alt_path = path_cat(path, "/", key);
		if (alt_path) {
			char *p2 = str_cat(alt_path, num);

			free(alt_path);
			alt_path = p2;
		}
		if (list) {
			alt = json_incref(json_array_get(list, i));
		} else {
			alt = json_copy(s);
			if (alt)
				json_object_set(alt, "type",
						json_array_get(types, i));
		}
		r = alt && alt_name && alt_path ?
			    conv_visit(c, alt, alt_name, alt_path) :
			    NULL;
		if (!r && !c->rc)
			conv_nomem(c);
		if (r) {
			if (i)
				sb_add(&u, " | ");
			sb_add(&u, r);
		}
		free(r);
		json_decref(alt);
		free(alt_name);
		free(alt_path);
	}
	if (c->rc) {
		sb_free(&u);
		return NULL;
	}
	if (u.oom)
		return conv_nomem(c), NULL;
	return sb_take(&u);
}

static char *conv_string(struct conv *c, json_t *s, const char *rule_name,
			 const char *path)
{
	json_t *pattern = json_object_get(s, "pattern");
	int f = conv_format(c, s, path), min, max;
	static const char *const fmt[] = { NULL, "date-string", "time-string",
					   "date-time-string" };

	if (f < 0)
		return NULL;
	if (pattern && !json_is_string(pattern))
		return conv_fail(c, path, "pattern must be a string"), NULL;
	min = conv_count(c, s, "minLength", path, 0);
	max = conv_count(c, s, "maxLength", path, -1);
	if (min < -1 || max < -1)
		return NULL;
	if (pattern && json_string_length(pattern))
		return conv_pattern(c, json_string_value(pattern), rule_name,
				    path);
	if (f == 4)
		return conv_primitive_rule(c, rule_name, "uuid");
	if (f) {
		char *p = conv_primitive(c, fmt[f], fmt[f]), *r;

		r = p ? conv_add(c, rule_name, p) : NULL;
		free(p);
		return r;
	}
	if (min > 0 || max >= 0) {
		char *ch = conv_primitive(c, "char", "char"), *r = NULL;
		struct sb b = { 0 };

		if (!ch)
			return NULL;
		sb_add(&b, "\"\\\"\" ");
		conv_repetition(&b, ch, min, max < 0 ? INT32_MAX : max, NULL);
		sb_add(&b, " \"\\\"\"");
		if (!b.oom)
			r = conv_add(c, rule_name, b.p);
		else
			conv_nomem(c);
		sb_free(&b);
		free(ch);
		return r;
	}
	return conv_primitive_rule(c, rule_name, "string");
}

/* get_bound: an integer bound, fractions rounded inwards */
static int conv_bound(struct conv *c, json_t *s, const char *key,
		      const char *path, bool round_up, int64_t *out)
{
	json_t *v = json_object_get(s, key);

	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	if (!json_is_real(v))
		return conv_fail(c, path, "%s must be a number", key);
	*out = (int64_t)(round_up ? ceil(json_real_value(v)) :
				    floor(json_real_value(v)));
	return 0;
}

static char *conv_integer(struct conv *c, json_t *s, const char *rule_name,
			  const char *path)
{
	int64_t min = INT64_MIN, max = INT64_MAX;
	struct sb b = { 0 };
	char *r = NULL;

	if (has(s, "minimum")) {
		if (conv_bound(c, s, "minimum", path, true, &min))
			return NULL;
	} else if (has(s, "exclusiveMinimum")) {
		if (conv_bound(c, s, "exclusiveMinimum", path, false, &min))
			return NULL;
		min++;
	}
	if (has(s, "maximum")) {
		if (conv_bound(c, s, "maximum", path, false, &max))
			return NULL;
	} else if (has(s, "exclusiveMaximum")) {
		if (conv_bound(c, s, "exclusiveMaximum", path, true, &max))
			return NULL;
		max--;
	}
	if (min == INT64_MIN && max == INT64_MAX)
		return conv_primitive_rule(c, rule_name, "integer");
	sb_add(&b, "(");
	conv_min_max(&b, min, max, 16, true);
	sb_add(&b, ")");
	if (!b.oom)
		r = conv_add(c, rule_name, b.p);
	else
		conv_nomem(c);
	sb_free(&b);
	return r;
}

static char *conv_array(struct conv *c, json_t *s, const char *name,
			const char *rule_name, const char *path, bool tuple)
{
	const char *key = has(s, "items") ? "items" : "prefixItems";
	json_t *items = json_object_get(s, key);
	char *sub = name_cat(name, ""), *r = NULL, *item = NULL;
	struct sb b = { 0 };
	int min, max;

	if (!sub)
		return conv_nomem(c), NULL;
	/* name_cat adds '-' after a name: "" stays "", "x" is "x-" */
	if (tuple) {
		json_t *it;
		size_t i;

		sb_add(&b, "\"[\" space ");
		json_array_foreach(items, i, it) {
			char num[40], *in, *ip;

			snprintf(num, sizeof(num), "tuple-%zu", i);
			in = str_cat(sub, num);
			snprintf(num, sizeof(num), "/%zu", i);
			ip = path_cat(path, "/", key);
			if (ip) {
				char *p2 = str_cat(ip, num);

				free(ip);
				ip = p2;
			}
			item = in && ip ? conv_visit(c, it, in, ip) : NULL;
			free(in);
			free(ip);
			if (!item)
				break;
			if (i)
				sb_add(&b, " \",\" space ");
			sb_add(&b, item);
			free(item);
			item = NULL;
		}
		sb_add(&b, " space \"]\"");
		goto done;
	}
	min = conv_count(c, s, "minItems", path, 0);
	max = conv_count(c, s, "maxItems", path, -1);
	if (min < -1 || max < -1)
		goto done;
	if (!items && min == 0 && max < 0) {
		free(sub);
		return conv_primitive_rule(c, rule_name, "array");
	}
	{
		char *in = str_cat(sub, "item"), *ip = path_cat(path, "/", key);

		if (items)
			item = in && ip ? conv_visit(c, items, in, ip) : NULL;
		else
			item = conv_primitive(c, "value", "value");
		if (!item && in && !items)
			item = NULL;
		if (in && items && !item && !c->rc)
			conv_nomem(c);
		free(in);
		free(ip);
	}
	if (item) {
		sb_add(&b, "\"[\" space ");
		conv_repetition(&b, item, min, max < 0 ? INT32_MAX : max,
				"\",\" space");
		sb_add(&b, " space \"]\"");
	}
done:
	if (!c->rc && !b.oom && b.p)
		r = conv_add(c, rule_name, b.p);
	else if (b.oom)
		conv_nomem(c);
	sb_free(&b);
	free(item);
	free(sub);
	return r;
}

/* visit: the name of the rule for schema s. */
static char *conv_visit(struct conv *c, json_t *s, const char *name,
			const char *path)
{
	char *rule_name, *r = NULL, *body = NULL;
	enum schema_kind k;
	struct sb b = { 0 };

	if (c->rc)
		return NULL;
	if (++c->depth > SCHEMA_DEPTH_MAX) {
		c->depth--;
		return conv_fail(c, path, "nested too deeply"), NULL;
	}
	if (conv_kind(c, s, path, &k)) {
		c->depth--;
		return NULL;
	}
	rule_name = conv_reserved(name) ? str_cat(name, "-") :
		    *name		    ? strdup(name) :
					      strdup("root");
	if (!rule_name) {
		c->depth--;
		return conv_nomem(c), NULL;
	}
	switch (k) {
	case KIND_REF:
		body = conv_ref(c, s, path);
		break;
	case KIND_ANY_OF: body = conv_union(c, s, name, path); break;
	case KIND_ALL_OF: r = conv_all_of(c, s, name, rule_name, path); break;
	case KIND_CONST:
		conv_constant(&b, json_object_get(s, "const"));
		break;
	case KIND_ENUM: {
		json_t *v;
		size_t i;

		sb_add(&b, "(");
		json_array_foreach(json_object_get(s, "enum"), i, v) {
			if (i)
				sb_add(&b, " | ");
			conv_constant(&b, v);
		}
		sb_add(&b, ")");
		break;
	}
	case KIND_OBJECT: r = conv_object(c, s, name, rule_name, path); break;
	case KIND_TUPLE:
	case KIND_ARRAY:
		r = conv_array(c, s, name, rule_name, path, k == KIND_TUPLE);
		break;
	case KIND_STRING: r = conv_string(c, s, rule_name, path); break;
	case KIND_INTEGER: r = conv_integer(c, s, rule_name, path); break;
	case KIND_NUMBER:
		r = conv_primitive_rule(c, rule_name, "number");
		break;
	case KIND_BOOLEAN:
		r = conv_primitive_rule(c, rule_name, "boolean");
		break;
	case KIND_NULL: r = conv_primitive_rule(c, rule_name, "null"); break;
	case KIND_ANY: body = conv_primitive(c, "value", "value"); break;
	}
	if (k == KIND_CONST || k == KIND_ENUM) {
		if (b.oom)
			conv_nomem(c);
		else
			r = conv_add(c, rule_name, b.p);
	} else if (body) {
		r = conv_add(c, rule_name, body);
	}
	if (!r && !c->rc)
		conv_nomem(c);
	sb_free(&b);
	free(body);
	free(rule_name);
	c->depth--;
	return c->rc ? (free(r), NULL) : r;
}

static int conv_rule_cmp(const void *pa, const void *pb)
{
	const struct schema_rule *a = pa, *b = pb;

	return strcmp(a->name, b->name);
}

int engine_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf,
			       struct err *err)
{
	struct conv c = { .err = err };
	json_error_t jerr;
	struct sb out = { 0 };
	char *root;

	*gbnf = NULL;
	c.root = json_loadb(schema, len, JSON_DECODE_ANY | JSON_ALLOW_NUL,
			    &jerr);
	if (!c.root)
		return err_set(err, EINVAL,
			       "json_schema: line %d column %d: %s", jerr.line,
			       jerr.column, jerr.text);
	if (conv_put(&c, "space", schema_space))
		goto out;
	root = conv_visit(&c, c.root, "", "#");
	free(root);
	if (c.rc)
		goto out;
	qsort(c.rules, c.n_rules, sizeof(*c.rules), conv_rule_cmp);
	for (size_t i = 0; i < c.n_rules; i++) {
		sb_add(&out, c.rules[i].name);
		sb_add(&out, " ::= ");
		sb_add(&out, c.rules[i].body);
		sb_add(&out, "\n");
	}
	if (out.oom)
		conv_nomem(&c);
	else
		*gbnf = sb_take(&out);
out:
	sb_free(&out);
	for (size_t i = 0; i < c.n_rules; i++) {
		free(c.rules[i].name);
		free(c.rules[i].body);
	}
	free(c.rules);
	free(c.resolving);
	json_decref(c.root);
	return c.rc;
}

int engine_grammar_from_json_schema(struct engine_grammar **out,
				    const struct engine_model *m,
				    const char *schema, size_t len,
				    struct err *err)
{
	char *gbnf;
	int rc;

	*out = NULL;
	if ((rc = engine_json_schema_to_gbnf(schema, len, &gbnf, err)))
		return rc;
	rc = engine_grammar_new(out, m, gbnf, strlen(gbnf), err);
	if (rc == -EINVAL) {
		char msg[sizeof(err->msg)];

		/* a schema llama.cpp turns into GBNF its parser refuses */
		snprintf(msg, sizeof(msg), "%s", err->msg);
		err_set(err, EINVAL, "json_schema: the schema's grammar: %s",
			msg);
	}
	free(gbnf);
	return rc;
}
