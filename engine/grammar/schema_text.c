// SPDX-License-Identifier: MIT
/*
 * The text of a schema's grammar: growing strings, GBNF literals, JSON
 * values as nlohmann's dump() writes them (a const or enum's literal),
 * integer ranges (build_min_max_int) and repetitions (build_repetition),
 * as llama.cpp's json-schema-to-grammar.cpp writes them.
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

/* ---- strings ----------------------------------------------------------- */

void sb_addn(struct sb *b, const char *s, size_t n)
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

void sb_add(struct sb *b, const char *s)
{
	sb_addn(b, s, strlen(s));
}

void sb_printf(struct sb *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_addn(b, tmp,
			(size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* The bytes, taken over (NULL when out of memory); b is left empty. */
char *sb_take(struct sb *b)
{
	char *p = b->oom ? NULL : b->p;

	if (!p && !b->oom)
		p = strdup("");
	if (b->oom)
		free(b->p);
	memset(b, 0, sizeof(*b));
	return p;
}

void sb_free(struct sb *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

char *str_cat(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	char *s = malloc(na + nb + 1);

	if (s) {
		memcpy(s, a, na);
		memcpy(s + na, b, nb + 1);
	}
	return s;
}

/* ---- literals ---------------------------------------------------------- */

/* format_literal: "..." with \r \n \" \\ escaped. */
void conv_literal(struct sb *b, const char *s, size_t n)
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
void conv_dump_string(struct sb *b, const char *s, size_t n)
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
		json_object_foreach((json_t *)v, key, item)
		{
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
		json_array_foreach(v, i, item)
		{
			if (i)
				sb_add(b, ",");
			conv_dump(b, item);
		}
		sb_add(b, "]");
		break;
	case JSON_STRING:
		conv_dump_string(b, json_string_value(v),
				 json_string_length(v));
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
void conv_constant(struct sb *out, const json_t *v)
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
						conv_digit_range(
							b, (char)(from[i] + 1),
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
void conv_min_max(struct sb *b, int64_t min, int64_t max, int decimals,
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
void conv_repetition(struct sb *b, const char *item, int min, int max,
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
