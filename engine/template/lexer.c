// SPDX-License-Identifier: MIT
/*
 * The template source cut into tokens, as @huggingface/jinja's lexer.ts
 * does it (the reference of tests/engine/template.sh), step for step:
 *
 *   1. one trailing newline is dropped;
 *   2. lstrip_blocks: spaces and tabs that begin a line before "{%", "{#"
 *      or "{-" go;
 *   3. trim_blocks: the newline right after "%}", "#}" or "-}" goes;
 *   4. transformers' {% generation %} and {% endgeneration %} tags go,
 *      with the whitespace around them unless a '-' keeps it... as the
 *      regular expression of lexer.ts says;
 *
 * then text outside tags is one token, whitespace inside tags separates
 * tokens, "{%-" / "-%}" (and {{- -}} {#- -#}) strip the whitespace on
 * their side. "-" or "+" after an operator is a sign, glued to the number
 * that follows. Whitespace is JavaScript's \s (Unicode spaces included).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct tlexer {
	struct tarena *arena;
	const char *src; /* preprocessed, NUL-terminated */
	size_t len, pos;
	struct ttok *tok;
	size_t n, cap;
	struct err *err;
};

/* ---- preprocessing ----------------------------------------------------- */

/* A line starts at 0 and after \n, \r, U+2028 and U+2029 (JS's ^ with m). */
static size_t tlex_line_break(const char *p, const char *end)
{
	if (*p == '\n' || *p == '\r')
		return 1;
	if (end - p >= 3 && (unsigned char)p[0] == 0xe2 &&
	    (unsigned char)p[1] == 0x80 &&
	    ((unsigned char)p[2] == 0xa8 || (unsigned char)p[2] == 0xa9))
		return 3;
	return 0;
}

/* /^[ \t]*({[#%-])/gm -> "$1" */
static size_t tlex_lstrip_blocks(char *s, size_t len)
{
	size_t i = 0, o = 0, k, j;
	bool line_start = true;

	while (i < len) {
		if (line_start) {
			for (j = i; j < len && (s[j] == ' ' || s[j] == '\t');
			     j++)
				;
			if (j + 1 < len && s[j] == '{' &&
			    (s[j + 1] == '#' || s[j + 1] == '%' ||
			     s[j + 1] == '-'))
				i = j;
		}
		k = tlex_line_break(s + i, s + len);
		line_start = k != 0;
		if (!k)
			k = 1;
		memmove(s + o, s + i, k);
		o += k;
		i += k;
	}
	return o;
}

/* /([#%-]})\n/g -> "$1" */
static size_t tlex_trim_blocks(char *s, size_t len)
{
	size_t i = 0, o = 0;

	while (i < len) {
		if (i + 2 < len &&
		    (s[i] == '#' || s[i] == '%' || s[i] == '-') &&
		    s[i + 1] == '}' && s[i + 2] == '\n') {
			s[o++] = s[i];
			s[o++] = '}';
			i += 3;
			continue;
		}
		s[o++] = s[i++];
	}
	return o;
}

static size_t tlex_skip_space(const char *s, size_t i, size_t len)
{
	size_t k;

	while (i < len && (k = tjs_space_at(s + i, s + len)))
		i += k;
	return i;
}

/*
 * The length of "{%-? *(end)?generation *-?%}" at s[i] (with \s* for the
 * spaces), 0 if it is not one; *lstrip and *rstrip get the dashes.
 */
static size_t tlex_generation_tag(const char *s, size_t i, size_t len,
				  bool *lstrip, bool *rstrip)
{
	size_t j = i + 2;

	if (i + 1 >= len || s[i] != '{' || s[i + 1] != '%')
		return 0;
	*lstrip = j < len && s[j] == '-';
	if (*lstrip)
		j++;
	j = tlex_skip_space(s, j, len);
	if (len - j >= 3 && memcmp(s + j, "end", 3) == 0 && len - j >= 13 &&
	    memcmp(s + j + 3, "generation", 10) == 0)
		j += 3;
	if (len - j < 10 || memcmp(s + j, "generation", 10) != 0)
		return 0;
	j = tlex_skip_space(s, j + 10, len);
	*rstrip = j < len && s[j] == '-';
	if (*rstrip)
		j++;
	if (len - j < 2 || s[j] != '%' || s[j + 1] != '}')
		return 0;
	return j + 2 - i;
}

/* /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs */
static size_t tlex_generation(char *s, size_t len)
{
	size_t i = 0, o = 0, run = 0, k, tag, after;
	bool in_run = false, lstrip, rstrip;

	while (i < len) {
		tag = tlex_generation_tag(s, i, len, &lstrip, &rstrip);
		if (tag) {
			/* the whitespace before it is s[run, i), already out */
			if (in_run && lstrip)
				o -= i - run;
			after = tlex_skip_space(s, i + tag, len);
			if (!rstrip) {
				memmove(s + o, s + i + tag, after - i - tag);
				o += after - i - tag;
			}
			i = after;
			in_run = false;
			continue;
		}
		k = tjs_space_at(s + i, s + len);
		if (k && !in_run) {
			in_run = true;
			run = i;
		} else if (!k) {
			in_run = false;
			k = 1;
		}
		memmove(s + o, s + i, k);
		o += k;
		i += k;
	}
	return o;
}

/* ---- tokens ------------------------------------------------------------ */

static int tlex_fail(struct tlexer *l, const char *what)
{
	const char *at = l->src + (l->pos < l->len ? l->pos : l->len);

	return err_set(l->err, EINVAL, "template: %s near '%.24s'", what, at);
}

static int tlex_push(struct tlexer *l, enum ttok_type type, const char *s,
		     size_t len, const char *at)
{
	struct ttok *t;
	char *copy;

	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;

		t = realloc(l->tok, cap * sizeof(*t));
		if (!t)
			return err_set(l->err, ENOMEM,
				       "template: out of memory");
		l->tok = t;
		l->cap = cap;
	}
	copy = tarena_alloc(l->arena, len + 1);
	if (!copy)
		return err_set(l->err, ENOMEM, "template: out of memory");
	memcpy(copy, s, len);
	copy[len] = '\0';
	l->tok[l->n++] = (struct ttok){ type, copy, len, at };
	return 0;
}

static enum ttok_type tlex_last(const struct tlexer *l)
{
	return l->n ? l->tok[l->n - 1].type : (enum ttok_type) - 1;
}

static bool tlex_starts(const struct tlexer *l, const char *s)
{
	size_t n = strlen(s);

	return l->len - l->pos >= n && memcmp(l->src + l->pos, s, n) == 0;
}

static bool tlex_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool tlex_word(char c)
{
	return tlex_digit(c) || (c >= 'a' && c <= 'z') ||
	       (c >= 'A' && c <= 'Z') || c == '_';
}

/* stripTrailingWhitespace(): the last text token loses its trailing space */
static void tlex_strip_trailing(struct tlexer *l)
{
	struct ttok *t;

	if (!l->n || l->tok[l->n - 1].type != TT_TEXT)
		return;
	t = &l->tok[l->n - 1];
	tjs_trim(&t->s, &t->len, false, true);
	((char *)t->s)[t->len] = '\0';
	if (!t->len)
		l->n--;
}

static void tlex_skip_leading(struct tlexer *l)
{
	l->pos = tlex_skip_space(l->src, l->pos, l->len);
}

/*
 * consumeWhile() for runs of one class: digits or word characters. As in
 * lexer.ts, a run that reaches the end of the source is an error.
 */
static int tlex_run(struct tlexer *l, bool (*pred)(char), size_t *start,
		    size_t *n)
{
	*start = l->pos;
	*n = 0;
	while (l->pos < l->len && pred(l->src[l->pos])) {
		l->pos++;
		if (l->pos >= l->len)
			return tlex_fail(l, "unexpected end of input");
	}
	*n = l->pos - *start;
	return 0;
}

static int tlex_hex(const char *p, size_t n, uint32_t *v)
{
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		uint32_t d;

		if (c >= '0' && c <= '9')
			d = (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (uint32_t)(c - 'A' + 10);
		else
			return -1;
		*v = *v * 16 + d;
	}
	return 0;
}

/* One escape after a backslash, appended to out; the cursor moves on. */
static int tlex_escape(struct tlexer *l, char *out, size_t *o)
{
	static const char from[] = "ntrbfv'\"\\";
	static const char to[] = "\n\t\r\b\f\v'\"\\";
	uint32_t c, lo;
	size_t n;
	const char *hit;
	char e;

	if (l->pos >= l->len)
		return tlex_fail(l, "unexpected end of input");
	e = l->src[l->pos++];
	if (e == 'x' || e == 'u') {
		n = e == 'x' ? 2 : 4;
		if (l->len - l->pos < n || tlex_hex(l->src + l->pos, n, &c))
			return tlex_fail(l, "invalid hexadecimal escape");
		l->pos += n;
		/* a \uD8xx\uDCxx pair is one character in UTF-8 */
		if (c >= 0xd800 && c < 0xdc00 && l->len - l->pos >= 6 &&
		    l->src[l->pos] == '\\' && l->src[l->pos + 1] == 'u' &&
		    !tlex_hex(l->src + l->pos + 2, 4, &lo) && lo >= 0xdc00 &&
		    lo < 0xe000) {
			c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
			l->pos += 6;
		} else if (c >= 0xd800 && c < 0xe000) {
			c = 0xfffd; /* a lone surrogate has no UTF-8 */
		}
		*o += tutf8_encode(c, out + *o);
		return 0;
	}
	hit = e ? strchr(from, e) : NULL;
	if (!hit)
		return tlex_fail(l, "unexpected escaped character");
	out[(*o)++] = to[hit - from];
	return 0;
}

static int tlex_string(struct tlexer *l)
{
	const char *at = l->src + l->pos;
	char quote = l->src[l->pos++];
	char *buf;
	size_t o = 0;
	int rc;

	/* escapes only shrink: the rest of the source is room enough */
	buf = malloc(l->len - l->pos + 1);
	if (!buf)
		return err_set(l->err, ENOMEM, "template: out of memory");
	for (;;) {
		if (l->pos >= l->len) {
			rc = tlex_fail(l, "unexpected end of input");
			goto out;
		}
		if (l->src[l->pos] == quote)
			break;
		if (l->src[l->pos] == '\\') {
			l->pos++;
			rc = tlex_escape(l, buf, &o);
			if (rc)
				goto out;
			continue;
		}
		buf[o++] = l->src[l->pos++];
		if (l->pos >= l->len) {
			rc = tlex_fail(l, "unexpected end of input");
			goto out;
		}
	}
	l->pos++;
	rc = tlex_push(l, TT_STRING, buf, o, at);
out:
	free(buf);
	return rc;
}

/* "-" or "+" where an operand is expected: a sign, or a signed number. */
static int tlex_sign(struct tlexer *l, bool *done)
{
	enum ttok_type last = tlex_last(l);
	const char *at = l->src + l->pos;
	size_t s, n, fs, fn;
	char sign = l->src[l->pos];
	char *num;
	int rc;

	*done = false;
	if (last == TT_TEXT || last == (enum ttok_type) - 1)
		return tlex_fail(l, "unexpected character");
	if (last == TT_IDENT || last == TT_NUMBER || last == TT_STRING ||
	    last == TT_RPAREN || last == TT_RBRACKET)
		return 0; /* a binary operator */
	l->pos++;
	rc = tlex_run(l, tlex_digit, &s, &n);
	if (rc)
		return rc;
	fn = 0;
	if (n && l->pos + 1 < l->len && l->src[l->pos] == '.' &&
	    tlex_digit(l->src[l->pos + 1])) {
		l->pos++;
		rc = tlex_run(l, tlex_digit, &fs, &fn);
		if (rc)
			return rc;
	}
	num = malloc(n + fn + 3);
	if (!num)
		return err_set(l->err, ENOMEM, "template: out of memory");
	num[0] = sign;
	memcpy(num + 1, l->src + s, n);
	if (fn) {
		num[1 + n] = '.';
		memcpy(num + 2 + n, l->src + fs, fn);
	}
	rc = tlex_push(l, n ? TT_NUMBER : TT_UNARY, num,
		       1 + n + (fn ? fn + 1 : 0), at);
	free(num);
	*done = true;
	return rc;
}

static const struct {
	const char *s;
	enum ttok_type type;
} tlex_table[] = {
	{ "{%", TT_OPEN_STMT }, { "%}", TT_CLOSE_STMT },
	{ "{{", TT_OPEN_EXPR }, { "}}", TT_CLOSE_EXPR },
	{ "(", TT_LPAREN },	{ ")", TT_RPAREN },
	{ "{", TT_LBRACE },	{ "}", TT_RBRACE },
	{ "[", TT_LBRACKET },	{ "]", TT_RBRACKET },
	{ ",", TT_COMMA },	{ ".", TT_DOT },
	{ ":", TT_COLON },	{ "|", TT_PIPE },
	{ "<=", TT_COMPARE },	{ ">=", TT_COMPARE },
	{ "==", TT_COMPARE },	{ "!=", TT_COMPARE },
	{ "<", TT_COMPARE },	{ ">", TT_COMPARE },
	{ "+", TT_ADD },	{ "-", TT_ADD },
	{ "~", TT_ADD },	{ "**", TT_POW },
	{ "*", TT_MUL },	{ "//", TT_MUL },
	{ "/", TT_MUL },	{ "%", TT_MUL },
	{ "=", TT_EQUALS },
};

/* The mapping table; *done when one matched. */
static int tlex_table_match(struct tlexer *l, int *depth, bool *done)
{
	size_t i, n;

	*done = false;
	for (i = 0; i < sizeof(tlex_table) / sizeof(tlex_table[0]); i++) {
		/* inside an object literal "}}" is two braces */
		if (tlex_table[i].type == TT_CLOSE_EXPR && *depth > 0)
			continue;
		if (!tlex_starts(l, tlex_table[i].s))
			continue;
		n = strlen(tlex_table[i].s);
		if (tlex_push(l, tlex_table[i].type, tlex_table[i].s, n,
			      l->src + l->pos))
			return -ENOMEM;
		if (tlex_table[i].type == TT_OPEN_EXPR)
			*depth = 0;
		else if (tlex_table[i].type == TT_LBRACE)
			++*depth;
		else if (tlex_table[i].type == TT_RBRACE)
			--*depth;
		l->pos += n;
		*done = true;
		return 0;
	}
	return 0;
}

static int tlex_comment(struct tlexer *l)
{
	const char *at = l->src + l->pos;
	size_t start, n;
	bool strip_before, strip_after;
	int rc;

	l->pos += 2;
	strip_before = l->pos < l->len && l->src[l->pos] == '-';
	if (strip_before)
		l->pos++;
	start = l->pos;
	while (!(l->pos + 1 < l->len && l->src[l->pos] == '#' &&
		 l->src[l->pos + 1] == '}')) {
		if (l->pos + 2 >= l->len)
			return tlex_fail(l, "missing end of comment tag");
		l->pos++;
	}
	n = l->pos - start;
	strip_after = n && l->src[start + n - 1] == '-';
	if (strip_after)
		n--;
	if (strip_before)
		tlex_strip_trailing(l);
	rc = tlex_push(l, TT_COMMENT, l->src + start, n, at);
	l->pos += 2;
	if (strip_after)
		tlex_skip_leading(l);
	return rc;
}

/* Text up to the next "{%", "{{" or "{#"; *done when there was some. */
static int tlex_text(struct tlexer *l, bool *done)
{
	size_t start = l->pos;

	while (l->pos < l->len &&
	       !(l->src[l->pos] == '{' && l->pos + 1 < l->len &&
		 (l->src[l->pos + 1] == '%' || l->src[l->pos + 1] == '{' ||
		  l->src[l->pos + 1] == '#')))
		l->pos++;
	*done = l->pos > start;
	if (!*done)
		return 0;
	return tlex_push(l, TT_TEXT, l->src + start, l->pos - start,
			 l->src + start);
}

/* Whitespace inside a tag; reaching the end of the source is an error. */
static int tlex_tag_space(struct tlexer *l)
{
	size_t k;

	while (l->pos < l->len &&
	       (k = tjs_space_at(l->src + l->pos, l->src + l->len))) {
		l->pos += k;
		if (l->pos >= l->len)
			return tlex_fail(l, "unexpected end of input");
	}
	return 0;
}

static int tlex_number(struct tlexer *l)
{
	const char *at = l->src + l->pos;
	size_t s, n, fs, fn = 0;
	int rc;

	rc = tlex_run(l, tlex_digit, &s, &n);
	if (rc)
		return rc;
	if (tlex_last(l) != TT_DOT && l->pos + 1 < l->len &&
	    l->src[l->pos] == '.' && tlex_digit(l->src[l->pos + 1])) {
		l->pos++;
		rc = tlex_run(l, tlex_digit, &fs, &fn);
		if (rc)
			return rc;
		/* digits '.' digits are contiguous in the source */
		return tlex_push(l, TT_NUMBER, l->src + s, n + 1 + fn, at);
	}
	return tlex_push(l, TT_NUMBER, l->src + s, n, at);
}

static int tlex_step(struct tlexer *l, int *depth)
{
	enum ttok_type last = tlex_last(l);
	const char *at = l->src + l->pos;
	size_t s, n;
	bool done;
	char c;
	int rc;

	if (last == (enum ttok_type) - 1 || last == TT_CLOSE_STMT ||
	    last == TT_CLOSE_EXPR || last == TT_COMMENT) {
		rc = tlex_text(l, &done);
		if (rc || done)
			return rc;
	}
	if (tlex_starts(l, "{#"))
		return tlex_comment(l);
	if (tlex_starts(l, "{%-") || tlex_starts(l, "{{-")) {
		bool expr = l->src[l->pos + 1] == '{';

		tlex_strip_trailing(l);
		if (expr)
			*depth = 0;
		l->pos += 3;
		return tlex_push(l, expr ? TT_OPEN_EXPR : TT_OPEN_STMT,
				 expr ? "{{" : "{%", 2, at);
	}
	rc = tlex_tag_space(l);
	if (rc)
		return rc;
	at = l->src + l->pos;
	if (tlex_starts(l, "-%}") || tlex_starts(l, "-}}")) {
		bool expr = l->src[l->pos + 1] == '}';

		rc = tlex_push(l, expr ? TT_CLOSE_EXPR : TT_CLOSE_STMT,
			       expr ? "}}" : "%}", 2, at);
		l->pos += 3;
		tlex_skip_leading(l);
		return rc;
	}
	if (l->pos >= l->len)
		return 0;
	c = l->src[l->pos];
	if (c == '-' || c == '+') {
		rc = tlex_sign(l, &done);
		if (rc || done)
			return rc;
	}
	rc = tlex_table_match(l, depth, &done);
	if (rc || done)
		return rc;
	if (c == '\'' || c == '"')
		return tlex_string(l);
	if (tlex_digit(c))
		return tlex_number(l);
	if (tlex_word(c)) {
		rc = tlex_run(l, tlex_word, &s, &n);
		if (rc)
			return rc;
		return tlex_push(l, TT_IDENT, l->src + s, n, at);
	}
	return tlex_fail(l, "unexpected character");
}

int tlex(struct tarena *a, const char *src, size_t len, struct ttok **out,
	 size_t *n_out, struct err *err)
{
	struct tlexer l = { .arena = a, .err = err };
	int depth = 0, rc = 0;
	char *s;

	*out = NULL;
	*n_out = 0;
	s = tarena_alloc(a, len + 1);
	if (!s)
		return err_set(err, ENOMEM, "template: out of memory");
	memcpy(s, src, len);
	if (len && s[len - 1] == '\n')
		len--;
	len = tlex_lstrip_blocks(s, len);
	len = tlex_trim_blocks(s, len);
	len = tlex_generation(s, len);
	s[len] = '\0';
	l.src = s;
	l.len = len;
	while (l.pos < l.len && !rc)
		rc = tlex_step(&l, &depth);
	if (rc) {
		free(l.tok);
		return rc;
	}
	*out = l.tok;
	*n_out = l.n;
	return 0;
}
