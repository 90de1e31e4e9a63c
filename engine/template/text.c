// SPDX-License-Identifier: MIT
/*
 * Values as text, the way @huggingface/jinja's JavaScript writes them:
 *
 *   {{ 3.0 }} "3.0"     {{ 2.5 }} "2.5"     {{ 1e21 }} "1e+21"
 *   "a" ~ 3.0 -> "a3"   (~ and + use the JavaScript value's toString)
 *   {{ [1, "a"] }} '[1, "a"]', {{ {"k": none} }} '{"k": null}'
 *   x | tojson          JSON.stringify of each value, Python's separators
 *
 * and the context: a jansson document turned into values as
 * convertToRuntimeValues() turns a JavaScript object into them (numbers
 * without a fraction are integers, keys that are array indices first).
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- buffers ----------------------------------------------------------- */

int tbuf_add(struct trt *r, struct tbuf *b, const char *p, size_t len)
{
	size_t cap;
	char *q;

	if (len >= b->cap - b->len || !b->p) {
		cap = b->cap ? b->cap : 64;
		while (cap - b->len <= len) {
			if (cap > SIZE_MAX / 2)
				return err_set(r->err, ENOMEM,
					       "template: text too long");
			cap *= 2;
		}
		if (cap - b->cap > r->max_bytes - r->live_bytes)
			return err_set(r->err, ENOMEM,
				       "template: the rendering needs more "
				       "than %zu MiB",
				       r->max_bytes >> 20);
		q = realloc(b->p, cap);
		if (!q)
			return err_set(r->err, ENOMEM,
				       "template: out of memory");
		r->live_bytes += cap - b->cap;
		b->p = q;
		b->cap = cap;
	}
	if (len)
		memcpy(b->p + b->len, p, len);
	b->len += len;
	b->p[b->len] = '\0';
	return 0;
}

int tbuf_addc(struct trt *r, struct tbuf *b, char c)
{
	return tbuf_add(r, b, &c, 1);
}

void tbuf_free(struct trt *r, struct tbuf *b)
{
	r->live_bytes -= b->cap;
	free(b->p);
	*b = (struct tbuf){ 0 };
}

int tbuf_take(struct trt *r, struct tbuf *b, struct tv *out)
{
	int rc = tv_str(r, b->p ? b->p : "", b->len, out);

	tbuf_free(r, b);
	return rc;
}

/* ---- UTF-8 and JavaScript's whitespace --------------------------------- */

uint32_t tutf8_decode(const char *p, const char *end, size_t *n)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t avail = (size_t)(end - p), len, i;
	uint32_t c;

	if (s[0] < 0x80) {
		*n = 1;
		return s[0];
	}
	if (s[0] >= 0xc2 && s[0] < 0xe0) {
		len = 2;
		c = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] < 0xf0) {
		len = 3;
		c = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] < 0xf5) {
		len = 4;
		c = s[0] & 0x07;
	} else {
		*n = 1;
		return s[0];
	}
	if (avail < len)
		goto invalid;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			goto invalid;
		c = c << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000) ||
	    c > 0x10ffff || (c >= 0xd800 && c < 0xe000))
		goto invalid;
	*n = len;
	return c;
invalid:
	*n = 1;
	return s[0];
}

size_t tutf8_encode(uint32_t c, char *out)
{
	unsigned char *o = (unsigned char *)out;

	if (c < 0x80) {
		o[0] = (unsigned char)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (unsigned char)(0xc0 | c >> 6);
		o[1] = (unsigned char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (unsigned char)(0xe0 | c >> 12);
		o[1] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
		o[2] = (unsigned char)(0x80 | (c & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | c >> 18);
	o[1] = (unsigned char)(0x80 | (c >> 12 & 0x3f));
	o[2] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
	o[3] = (unsigned char)(0x80 | (c & 0x3f));
	return 4;
}

/* \s: WhiteSpace and LineTerminator of ECMAScript */
static bool tjs_space(uint32_t c)
{
	return c == ' ' || (c >= '\t' && c <= '\r') || c == 0xa0 ||
	       c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
	       c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000 ||
	       c == 0xfeff;
}

size_t tjs_space_at(const char *p, const char *end)
{
	size_t n;
	uint32_t c;

	if (p >= end)
		return 0;
	if ((unsigned char)*p < 0x80)
		return tjs_space((unsigned char)*p) ? 1 : 0;
	c = tutf8_decode(p, end, &n);
	return n > 1 && tjs_space(c) ? n : 0;
}

void tjs_trim(const char **p, size_t *len, bool start, bool end)
{
	const char *s = *p, *e = *p + *len, *last = s, *q;
	size_t k;

	if (start)
		while ((k = tjs_space_at(s, e)))
			s += k;
	if (end) {
		/* the end of the last character that is not a space */
		last = s;
		for (q = s; q < e;) {
			k = tjs_space_at(q, e);
			if (k) {
				q += k;
				continue;
			}
			tutf8_decode(q, e, &k);
			q += k;
			last = q;
		}
		e = last;
	}
	*p = s;
	*len = (size_t)(e - s);
}

size_t tjs_length(const char *p, size_t len)
{
	const char *e = p + len;
	size_t n = 0, k;

	while (p < e) {
		uint32_t c = tutf8_decode(p, e, &k);

		n += c >= 0x10000 ? 2 : 1;
		p += k;
	}
	return n;
}

/* ---- numbers ----------------------------------------------------------- */

/*
 * Number.prototype.toString(10): the shortest digits that read back as x,
 * in plain notation from 1e-6 up to 1e21, in exponent notation outside.
 */
void tjs_number(double x, char *out, size_t cap)
{
	char digits[32], e[40], buf[64];
	int k = 0, n, p;
	size_t o = 0;
	const char *s;

	if (isnan(x) || isinf(x) || x == 0) {
		snprintf(out, cap, "%s",
			 isnan(x) ? "NaN" :
			 isinf(x) ? (x < 0 ? "-Infinity" : "Infinity") :
				    "0");
		return;
	}
	/* whole numbers below 2^53 are their digits */
	if (x == trunc(x) && fabs(x) < 9007199254740992.0) {
		snprintf(out, cap, "%lld", (long long)x);
		return;
	}
	if (x < 0)
		buf[o++] = '-';
	x = fabs(x);
	for (p = 1; p < 17; p++) {
		snprintf(e, sizeof(e), "%.*e", p - 1, x);
		if (strtod(e, NULL) == x)
			break;
	}
	snprintf(e, sizeof(e), "%.*e", p - 1, x);
	/* e is d.ddde[+-]XX: the digits, and n of 0.ddd x 10^n */
	for (s = e; *s && *s != 'e'; s++)
		if (*s != '.')
			digits[k++] = *s;
	while (k > 1 && digits[k - 1] == '0')
		k--;
	n = atoi(s + 1) + 1;
	if (k <= n && n <= 21) {
		memcpy(buf + o, digits, (size_t)k);
		o += (size_t)k;
		for (int i = k; i < n; i++)
			buf[o++] = '0';
	} else if (0 < n && n <= 21) {
		memcpy(buf + o, digits, (size_t)n);
		o += (size_t)n;
		buf[o++] = '.';
		memcpy(buf + o, digits + n, (size_t)(k - n));
		o += (size_t)(k - n);
	} else if (-6 < n && n <= 0) {
		buf[o++] = '0';
		buf[o++] = '.';
		for (int i = 0; i < -n; i++)
			buf[o++] = '0';
		memcpy(buf + o, digits, (size_t)k);
		o += (size_t)k;
	} else {
		buf[o++] = digits[0];
		if (k > 1) {
			buf[o++] = '.';
			memcpy(buf + o, digits + 1, (size_t)(k - 1));
			o += (size_t)(k - 1);
		}
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "e%c%d",
				      n - 1 < 0 ? '-' : '+', abs(n - 1));
	}
	buf[o] = '\0';
	snprintf(out, cap, "%s", buf);
}

/* FloatValue.toString(): -0.0, x.0 for whole numbers, else as JavaScript. */
static void tjs_float(double x, char *out, size_t cap)
{
	if (x == 0 && signbit(x))
		snprintf(out, cap, "-0.0");
	else if (isfinite(x) && x == floor(x) && fabs(x) < 1e21)
		snprintf(out, cap, "%.1f", x);
	else
		tjs_number(x, out, cap);
}

/* ---- toString ---------------------------------------------------------- */

int tv_print(struct trt *r, const struct tv *v, struct tbuf *b)
{
	struct tjson_opts o = { .undefined_null = false };
	char num[64];

	switch (v->type) {
	case TV_UNDEFINED: return tbuf_add(r, b, "undefined", 9);
	case TV_NULL: return tbuf_add(r, b, "null", 4);
	case TV_BOOL:
		return v->b ? tbuf_add(r, b, "true", 4) :
			      tbuf_add(r, b, "false", 5);
	case TV_INT: tjs_number(v->n, num, sizeof(num)); break;
	case TV_FLOAT: tjs_float(v->n, num, sizeof(num)); break;
	case TV_STRING: return tbuf_add(r, b, v->s->p, v->s->len);
	case TV_FUNCTION: return tbuf_add(r, b, "function", 8);
	default: return tv_to_json(r, v, &o, 0, b);
	}
	return tbuf_add(r, b, num, strlen(num));
}

int tv_js_string(struct trt *r, const struct tv *v, struct tbuf *b)
{
	char num[64];
	int rc = 0;

	switch (v->type) {
	case TV_INT:
	case TV_FLOAT:
		tjs_number(v->n, num, sizeof(num));
		return tbuf_add(r, b, num, strlen(num));
	case TV_ARRAY:
	case TV_TUPLE:
		/* Array.prototype.toString: the elements' toString(), "," */
		for (size_t i = 0; i < v->a->n && !rc; i++) {
			if (i)
				rc = tbuf_addc(r, b, ',');
			if (!rc)
				rc = tv_print(r, &v->a->v[i], b);
		}
		return rc;
	case TV_OBJECT:
	case TV_KWARGS:
	case TV_NAMESPACE: return tbuf_add(r, b, "[object Map]", 12);
	default: return tv_print(r, v, b);
	}
}

/* ---- JSON -------------------------------------------------------------- */

static int tjson_string(struct trt *r, const char *p, size_t len, bool ascii,
			struct tbuf *b)
{
	const char *s = p, *e = p + len;
	char esc[16];
	size_t n;
	uint32_t c;
	int rc = tbuf_addc(r, b, '"');

	while (!rc && s < e) {
		c = tutf8_decode(s, e, &n);
		esc[0] = '\0';
		switch (c) {
		case '"': snprintf(esc, sizeof(esc), "\\\""); break;
		case '\\': snprintf(esc, sizeof(esc), "\\\\"); break;
		case '\b': snprintf(esc, sizeof(esc), "\\b"); break;
		case '\f': snprintf(esc, sizeof(esc), "\\f"); break;
		case '\n': snprintf(esc, sizeof(esc), "\\n"); break;
		case '\r': snprintf(esc, sizeof(esc), "\\r"); break;
		case '\t': snprintf(esc, sizeof(esc), "\\t"); break;
		default:
			if (c < 0x20 || (ascii && c >= 0x7f && c < 0x10000))
				snprintf(esc, sizeof(esc), "\\u%04x", c);
			else if (ascii && c >= 0x10000)
				/* a pair of UTF-16 units, as JavaScript has */
				snprintf(esc, sizeof(esc), "\\u%04x\\u%04x",
					 0xd800 + ((c - 0x10000) >> 10),
					 0xdc00 + ((c - 0x10000) & 0x3ff));
		}
		rc = esc[0] ? tbuf_add(r, b, esc, strlen(esc)) :
			      tbuf_add(r, b, s, n);
		s += n;
	}
	return rc ? rc : tbuf_addc(r, b, '"');
}

/* localeCompare, roughly: case-insensitive first, then lower before upper */
static int tjson_key_cmp(const void *pa, const void *pb)
{
	const struct tentry *a = *(const struct tentry *const *)pa;
	const struct tentry *b = *(const struct tentry *const *)pb;
	int c = strcasecmp(a->key->p, b->key->p);

	return c ? c : -strcmp(a->key->p, b->key->p);
}

static int tjson_pad(struct trt *r, const struct tjson_opts *o, int depth,
		     struct tbuf *b)
{
	int rc = tbuf_addc(r, b, '\n');

	for (int i = 0; i < depth * o->indent && !rc; i++)
		rc = tbuf_addc(r, b, ' ');
	return rc;
}

static int tjson_object(struct trt *r, const struct tv *v,
			const struct tjson_opts *o, int depth, const char *item,
			const char *key, struct tbuf *b)
{
	const struct tentry **e;
	size_t n = v->o->n, i;
	int rc = 0;

	if (!n)
		return tbuf_add(r, b, "{}", 2);
	e = malloc(n * sizeof(*e));
	if (!e)
		return err_set(r->err, ENOMEM, "template: out of memory");
	for (i = 0; i < n; i++)
		e[i] = &v->o->e[i];
	if (o->sort_keys)
		qsort(e, n, sizeof(*e), tjson_key_cmp);
	rc = tbuf_addc(r, b, '{');
	for (i = 0; i < n && !rc; i++) {
		if (i)
			rc = tbuf_add(r, b, item, strlen(item));
		if (!rc && o->indent)
			rc = tjson_pad(r, o, depth + 1, b);
		if (!rc)
			rc = tjson_string(r, e[i]->key->p, e[i]->key->len,
					  o->ensure_ascii, b);
		if (!rc)
			rc = tbuf_add(r, b, key, strlen(key));
		if (!rc)
			rc = tv_to_json(r, &e[i]->val, o, depth + 1, b);
	}
	if (!rc && o->indent)
		rc = tjson_pad(r, o, depth, b);
	free(e);
	return rc ? rc : tbuf_addc(r, b, '}');
}

int tv_to_json(struct trt *r, const struct tv *v, const struct tjson_opts *o,
	       int depth, struct tbuf *b)
{
	const char *item = o->item_sep ? o->item_sep : o->indent ? "," : ", ";
	const char *key = o->key_sep ? o->key_sep : ": ";
	char num[64];
	int rc = 0;

	if (depth > 512)
		return trt_fail(r, "tojson: nested too deep");
	switch (v->type) {
	case TV_NULL: return tbuf_add(r, b, "null", 4);
	case TV_UNDEFINED:
		return o->undefined_null ? tbuf_add(r, b, "null", 4) :
					   tbuf_add(r, b, "undefined", 9);
	case TV_BOOL: return tv_print(r, v, b);
	case TV_INT:
	case TV_FLOAT:
		if (!isfinite(v->n))
			return tbuf_add(r, b, "null", 4);
		tjs_number(v->n, num, sizeof(num));
		return tbuf_add(r, b, num, strlen(num));
	case TV_STRING:
		return tjson_string(r, v->s->p, v->s->len, o->ensure_ascii, b);
	case TV_ARRAY:
	case TV_TUPLE:
		if (!v->a->n)
			return tbuf_add(r, b, "[]", 2);
		rc = tbuf_addc(r, b, '[');
		for (size_t i = 0; i < v->a->n && !rc; i++) {
			if (i)
				rc = tbuf_add(r, b, item, strlen(item));
			if (!rc && o->indent)
				rc = tjson_pad(r, o, depth + 1, b);
			if (!rc)
				rc = tv_to_json(r, &v->a->v[i], o, depth + 1,
						b);
		}
		if (!rc && o->indent)
			rc = tjson_pad(r, o, depth, b);
		return rc ? rc : tbuf_addc(r, b, ']');
	case TV_OBJECT:
	case TV_KWARGS:
	case TV_NAMESPACE: return tjson_object(r, v, o, depth, item, key, b);
	default:
		return trt_fail(r, "cannot convert to JSON: %s",
				tv_type_name(v));
	}
}

/* ---- the context ------------------------------------------------------- */

/* An array index as JavaScript orders keys: "0".."4294967294", canonical */
static bool tjson_index_key(const char *k, uint64_t *idx)
{
	uint64_t x = 0;
	size_t i;

	if (!k[0] || (k[0] == '0' && k[1]))
		return false;
	for (i = 0; k[i]; i++) {
		if (k[i] < '0' || k[i] > '9' || i >= 10)
			return false;
		x = x * 10 + (uint64_t)(k[i] - '0');
	}
	*idx = x;
	return x < 4294967295u;
}

static int tjson_object_in(struct trt *r, json_t *j, struct tv *out, int depth);

static int tjson_in(struct trt *r, json_t *j, struct tv *out, int depth)
{
	double x;
	int rc;

	*out = tv_undef();
	if (depth > 512)
		return trt_fail(r, "the context is nested too deep");
	switch (json_typeof(j)) {
	case JSON_NULL: *out = tv_null(); return 0;
	case JSON_TRUE: *out = tv_bool(true); return 0;
	case JSON_FALSE: *out = tv_bool(false); return 0;
	case JSON_INTEGER:
		*out = tv_int((double)json_integer_value(j));
		return 0;
	case JSON_REAL:
		x = json_real_value(j);
		*out = x == floor(x) ? tv_int(x) : tv_float(x);
		return 0;
	case JSON_STRING:
		return tv_str(r, json_string_value(j), json_string_length(j),
			      out);
	case JSON_ARRAY:
		rc = tv_arr(r, TV_ARRAY, json_array_size(j), out);
		for (size_t i = 0; i < json_array_size(j) && !rc; i++) {
			struct tv e;

			rc = tjson_in(r, json_array_get(j, i), &e, depth + 1);
			if (!rc)
				rc = tarr_push(r, out->a, e);
		}
		return rc;
	case JSON_OBJECT: return tjson_object_in(r, j, out, depth);
	}
	return trt_fail(r, "bad JSON in the context");
}

static int tjson_object_in(struct trt *r, json_t *j, struct tv *out, int depth)
{
	const char *k;
	json_t *val;
	struct tv e;
	uint64_t idx, lo = 0, best;
	bool more = true;
	int rc = tv_obj(r, TV_OBJECT, out);

	/* array-index keys first, ascending, as Object.entries() gives them */
	while (!rc && more) {
		more = false;
		best = UINT64_MAX;
		json_object_foreach(j, k, val) if (tjson_index_key(k, &idx) &&
						   idx >= lo && idx < best)
			best = idx;
		if (best == UINT64_MAX)
			break;
		json_object_foreach(j, k, val)
		{
			if (!tjson_index_key(k, &idx) || idx != best)
				continue;
			rc = tjson_in(r, val, &e, depth + 1);
			if (!rc)
				rc = tobj_set(r, out->o, k, strlen(k), e);
		}
		lo = best + 1;
		more = true;
	}
	json_object_foreach(j, k, val)
	{
		if (rc)
			break;
		if (tjson_index_key(k, &idx))
			continue;
		rc = tjson_in(r, val, &e, depth + 1);
		if (!rc)
			rc = tobj_set(r, out->o, k, strlen(k), e);
	}
	return rc;
}

int tv_from_json(struct trt *r, const void *json, struct tv *out)
{
	return tjson_in(r, (json_t *)json, out, 0);
}
