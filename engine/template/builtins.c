// SPDX-License-Identifier: MIT
/*
 * The methods a template can call on a value, and its global functions,
 * as @huggingface/jinja defines them:
 *
 *   string   upper lower strip lstrip rstrip title capitalize startswith
 *            endswith split replace, and .length
 *   list     .length
 *   mapping  get items keys values dictsort
 *   globals  namespace range raise_exception strftime_now, and true false
 *            none True False None
 *
 * Two of its choices are kept on purpose: strip(), lstrip() and rstrip()
 * ignore their argument and trim whitespace (JavaScript's trim), and
 * case mapping is per character (towupper in C.UTF-8, not Unicode's
 * special casing: "ß".upper() stays "ß" here, is "SS" there).
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wctype.h>

#include "internal.h"

/* ranges longer than this are refused: no template needs one */
#define TRANGE_MAX (1u << 20)

size_t targ_positional(const struct tv *args, size_t n)
{
	return n && args[n - 1].type == TV_KWARGS ? n - 1 : n;
}

const struct tv *targ_kw(const struct tv *args, size_t n, const char *name)
{
	if (!n || args[n - 1].type != TV_KWARGS)
		return NULL;
	return tobj_get(args[n - 1].o, name, strlen(name));
}

/* ---- case -------------------------------------------------------------- */

static locale_t tcase_locale;
static pthread_once_t tcase_once = PTHREAD_ONCE_INIT;

static void tcase_init(void)
{
	tcase_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

static uint32_t tcase_map(uint32_t c, bool upper)
{
	if (c < 0x80)
		return upper ? (c >= 'a' && c <= 'z' ? c - 32 : c) :
			       (c >= 'A' && c <= 'Z' ? c + 32 : c);
	if (!tcase_locale)
		return c;
	return upper ? (uint32_t)towupper_l((wint_t)c, tcase_locale) :
		       (uint32_t)towlower_l((wint_t)c, tcase_locale);
}

/* Map the characters of s from index `from` (code points) up to `to`. */
static int tcase_span(struct trt *r, const struct tstr *s, bool upper,
		      size_t from, size_t to, struct tv *out)
{
	const char *p = s->p, *e = p + s->len;
	struct tbuf b = { 0 };
	char u[4];
	size_t k, i = 0;
	uint32_t c;
	int rc = 0;

	pthread_once(&tcase_once, tcase_init);
	for (; p < e && !rc; p += k, i++) {
		c = tutf8_decode(p, e, &k);
		if (i < from || i >= to || (k == 1 && c >= 0x80))
			rc = tbuf_add(r, &b, p, k);
		else
			rc = tbuf_add(r, &b, u,
				      tutf8_encode(tcase_map(c, upper), u));
	}
	if (!rc)
		rc = tbuf_take(r, &b, out);
	tbuf_free(r, &b);
	return rc;
}

int tstr_case(struct trt *r, const struct tstr *s, bool upper, struct tv *out)
{
	return tcase_span(r, s, upper, 0, SIZE_MAX, out);
}

/* charAt(0).toUpperCase() + slice(1): the rest as it is */
int tstr_capitalize(struct trt *r, const struct tstr *s, struct tv *out)
{
	size_t k;

	if (s->len && tutf8_decode(s->p, s->p + s->len, &k) >= 0x10000)
		return tv_str(r, s->p, s->len, out);
	return tcase_span(r, s, true, 0, 1, out);
}

static bool tword(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	       (c >= 'A' && c <= 'Z') || c == '_';
}

/* replace(/\b\w/g, upper): an ASCII word character after a non-word one */
int tstr_title(struct trt *r, const struct tstr *s, struct tv *out)
{
	int rc = tv_str(r, s->p, s->len, out);

	for (size_t i = 0; !rc && i < s->len; i++)
		if (tword(s->p[i]) && (i == 0 || !tword(s->p[i - 1])) &&
		    s->p[i] >= 'a' && s->p[i] <= 'z')
			out->s->p[i] = (char)(s->p[i] - 32);
	return rc;
}

/* ---- string methods ---------------------------------------------------- */

static int tm_case(struct trt *r, const struct tv *self, const struct tv *args,
		   size_t n, struct tenv *env, struct tv *out, int which)
{
	const char *p = self->s->p;
	size_t len = self->s->len;

	switch (which) {
	case 'U': return tstr_case(r, self->s, true, out);
	case 'L': return tstr_case(r, self->s, false, out);
	case 'T': return tstr_title(r, self->s, out);
	case 'C': return tstr_capitalize(r, self->s, out);
	default:
		/* strip, lstrip, rstrip: whitespace whatever the argument */
		tjs_trim(&p, &len, which != 'R', which != 'l');
		return tv_str(r, p, len, out);
	}
	(void)args;
	(void)n;
	(void)env;
}

#define TM_CASE(name, which) \
	static int name(struct trt *r, const struct tv *self, \
			const struct tv *args, size_t n, struct tenv *env, \
			struct tv *out) \
	{ \
		return tm_case(r, self, args, n, env, out, which); \
	}
TM_CASE(tm_upper, 'U')
TM_CASE(tm_lower, 'L')
TM_CASE(tm_title, 'T')
TM_CASE(tm_capitalize, 'C')
TM_CASE(tm_strip, 'S')
TM_CASE(tm_lstrip, 'l')
TM_CASE(tm_rstrip, 'R')

static bool tstr_has_at(const struct tstr *s, const struct tstr *x, bool end)
{
	if (x->len > s->len)
		return false;
	return !memcmp(s->p + (end ? s->len - x->len : 0), x->p, x->len);
}

static int tm_affix(struct trt *r, const struct tv *self, const struct tv *args,
		    size_t n, struct tv *out, bool end)
{
	const char *what = end ? "endswith" : "startswith";
	const struct tv *pat;
	bool hit = false;

	if (!n)
		return trt_fail(r, "%s() requires at least one argument", what);
	pat = &args[0];
	if (pat->type == TV_STRING) {
		hit = tstr_has_at(self->s, pat->s, end);
	} else if (tv_is_array(pat)) {
		for (size_t i = 0; i < pat->a->n && !hit; i++) {
			if (pat->a->v[i].type != TV_STRING)
				return trt_fail(r,
						"%s() tuple elements must "
						"be strings",
						what);
			hit = tstr_has_at(self->s, pat->a->v[i].s, end);
		}
	} else {
		return trt_fail(r,
				"%s() argument must be a string or tuple "
				"of strings",
				what);
	}
	*out = tv_bool(hit);
	return 0;
}

static int tm_startswith(struct trt *r, const struct tv *self,
			 const struct tv *args, size_t n, struct tenv *env,
			 struct tv *out)
{
	return tm_affix(r, self, args, n, out, false);
}

static int tm_endswith(struct trt *r, const struct tv *self,
		       const struct tv *args, size_t n, struct tenv *env,
		       struct tv *out)
{
	return tm_affix(r, self, args, n, out, true);
}

/* split() without a separator: runs of non-space, maxsplit honoured */
static int tm_split_space(struct trt *r, const struct tstr *s, double max,
			  struct tarr *out)
{
	const char *p = s->p, *e;
	size_t len = s->len, k;
	struct tv x;
	int rc = 0;

	tjs_trim(&p, &len, true, false);
	e = p + len;
	while (p < e && !rc) {
		const char *w = p;

		while (p < e && !tjs_space_at(p, e)) {
			tutf8_decode(p, e, &k);
			p += k;
		}
		if (max != -1 && (double)out->n >= max) {
			rc = tv_str(r, w, (size_t)(e - w), &x);
			if (!rc)
				rc = tarr_push(r, out, x);
			break;
		}
		rc = tv_str(r, w, (size_t)(p - w), &x);
		if (!rc)
			rc = tarr_push(r, out, x);
		while ((k = tjs_space_at(p, e)))
			p += k;
	}
	return rc;
}

static int tm_split(struct trt *r, const struct tv *self, const struct tv *args,
		    size_t n, struct tenv *env, struct tv *out)
{
	const struct tv *sep = n > 0 ? &args[0] : NULL;
	const struct tv *max = n > 1 ? &args[1] : NULL;
	const char *p = self->s->p, *e = p + self->s->len, *hit;
	double limit = max ? max->n : -1;
	struct tv x;
	int rc;

	if (sep && sep->type != TV_STRING && sep->type != TV_NULL)
		return trt_fail(r, "sep argument must be a string or null");
	if (max && max->type != TV_INT)
		return trt_fail(r, "maxsplit argument must be a number");
	rc = tv_arr(r, TV_ARRAY, 0, out);
	if (rc)
		return rc;
	if (!sep || sep->type == TV_NULL)
		return tm_split_space(r, self->s, limit, out->a);
	if (!sep->s->len)
		return trt_fail(r, "empty separator");
	for (;;) {
		hit = limit != -1 && (double)out->a->n >= limit ?
			      NULL :
			      memmem(p, (size_t)(e - p), sep->s->p,
				     sep->s->len);
		rc = tv_str(r, p, hit ? (size_t)(hit - p) : (size_t)(e - p),
			    &x);
		if (!rc)
			rc = tarr_push(r, out->a, x);
		if (rc || !hit)
			return rc;
		p = hit + sep->s->len;
	}
}

int tstr_replace(struct trt *r, const struct tstr *s, const struct tstr *old,
		 const struct tstr *rep, double count, struct tv *out)
{
	const char *p = s->p, *e = p + s->len, *hit;
	double left = count < 0 ? INFINITY : count;
	struct tbuf b = { 0 };
	size_t k;
	int rc = 0;

	if (!old->len) {
		/* /(?=)/gu: before every character and at the end */
		for (; !rc; p += k) {
			if (left > 0) {
				rc = tbuf_add(r, &b, rep->p, rep->len);
				left--;
			}
			if (rc || p >= e)
				break;
			tutf8_decode(p, e, &k);
			rc = tbuf_add(r, &b, p, k);
		}
	} else {
		while (!rc && left > 0 &&
		       (hit = memmem(p, (size_t)(e - p), old->p, old->len))) {
			rc = tbuf_add(r, &b, p, (size_t)(hit - p));
			if (!rc)
				rc = tbuf_add(r, &b, rep->p, rep->len);
			p = hit + old->len;
			left--;
		}
		if (!rc)
			rc = tbuf_add(r, &b, p, (size_t)(e - p));
	}
	if (!rc)
		rc = tbuf_take(r, &b, out);
	tbuf_free(r, &b);
	return rc;
}

static int tm_replace(struct trt *r, const struct tv *self,
		      const struct tv *args, size_t n, struct tenv *env,
		      struct tv *out)
{
	const struct tv *count = NULL;

	if (n < 2)
		return trt_fail(r, "replace() requires at least two arguments");
	if (args[0].type != TV_STRING || args[1].type != TV_STRING)
		return trt_fail(r, "replace() arguments must be strings");
	if (n > 2)
		count = args[2].type == TV_KWARGS ? targ_kw(args, n, "count") :
						    &args[2];
	if (count && count->type != TV_INT && count->type != TV_NULL)
		return trt_fail(r, "replace() count argument must be a number "
				   "or null");
	return tstr_replace(r, self->s, args[0].s, args[1].s,
			    count && count->type == TV_INT ? count->n : -1,
			    out);
}

/* ---- mapping methods --------------------------------------------------- */

static int tm_get(struct trt *r, const struct tv *self, const struct tv *args,
		  size_t n, struct tenv *env, struct tv *out)
{
	struct tv *v;

	if (!n || args[0].type != TV_STRING)
		return trt_fail(r, "object key must be a string: got %s",
				n ? tv_type_name(&args[0]) : "UndefinedValue");
	v = tobj_get(self->o, args[0].s->p, args[0].s->len);
	*out = v ? *v : n > 1 ? args[1] : tv_null();
	tv_ref(*out);
	return 0;
}

/* [[key, value], ...] */
static int tm_pairs(struct trt *r, const struct tobj *o, struct tv *out)
{
	struct tv pair, k;
	int rc = tv_arr(r, TV_ARRAY, o->n, out);

	for (size_t i = 0; i < o->n && !rc; i++) {
		rc = tv_arr(r, TV_ARRAY, 2, &pair);
		if (!rc)
			rc = tv_str(r, o->e[i].key->p, o->e[i].key->len, &k);
		if (!rc)
			rc = tarr_push(r, pair.a, k);
		tv_ref(o->e[i].val);
		if (!rc)
			rc = tarr_push(r, pair.a, o->e[i].val);
		else
			tv_drop(r, o->e[i].val);
		if (!rc)
			rc = tarr_push(r, out->a, pair);
	}
	return rc;
}

static int tm_items(struct trt *r, const struct tv *self, const struct tv *args,
		    size_t n, struct tenv *env, struct tv *out)
{
	return tm_pairs(r, self->o, out);
}

static int tm_keys(struct trt *r, const struct tv *self, const struct tv *args,
		   size_t n, struct tenv *env, struct tv *out)
{
	struct tv k;
	int rc = tv_arr(r, TV_ARRAY, self->o->n, out);

	for (size_t i = 0; i < self->o->n && !rc; i++) {
		rc = tv_str(r, self->o->e[i].key->p, self->o->e[i].key->len,
			    &k);
		if (!rc)
			rc = tarr_push(r, out->a, k);
	}
	return rc;
}

static int tm_values(struct trt *r, const struct tv *self,
		     const struct tv *args, size_t n, struct tenv *env,
		     struct tv *out)
{
	int rc = tv_arr(r, TV_ARRAY, self->o->n, out);

	for (size_t i = 0; i < self->o->n && !rc; i++) {
		tv_ref(self->o->e[i].val);
		rc = tarr_push(r, out->a, self->o->e[i].val);
	}
	return rc;
}

struct tdictsort {
	struct trt *r;
	size_t index; /* 0 key, 1 value */
	bool case_sensitive, reverse;
	int rc;
};

static int tdictsort_cmp(struct tdictsort *d, const struct tv *a,
			 const struct tv *b)
{
	int c = 0;

	if (!d->rc)
		d->rc = tv_compare(d->r, &a->a->v[d->index], &b->a->v[d->index],
				   d->case_sensitive, &c);
	return d->reverse ? -c : c;
}

static int tm_dictsort(struct trt *r, const struct tv *self,
		       const struct tv *args, size_t n, struct tenv *env,
		       struct tv *out)
{
	size_t npos = targ_positional(args, n);
	const struct tv *cs = npos > 0 ? &args[0] :
					 targ_kw(args, n, "case_sensitive");
	const struct tv *by = npos > 1 ? &args[1] : targ_kw(args, n, "by");
	const struct tv *rev = npos > 2 ? &args[2] :
					  targ_kw(args, n, "reverse");
	struct tdictsort d = { .r = r };
	struct tv *v, tmp;
	int rc;

	if (cs && cs->type != TV_BOOL)
		return trt_fail(r, "case_sensitive must be a boolean");
	if (by && (by->type != TV_STRING ||
		   (strcmp(by->s->p, "key") && strcmp(by->s->p, "value"))))
		return trt_fail(r, "by must be either 'key' or 'value'");
	if (rev && rev->type != TV_BOOL)
		return trt_fail(r, "reverse must be a boolean");
	d.case_sensitive = cs && cs->b;
	d.reverse = rev && rev->b;
	d.index = by && !strcmp(by->s->p, "value");
	rc = tm_pairs(r, self->o, out);
	if (rc)
		return rc;
	/* insertion sort: stable, and mappings are small */
	v = out->a->v;
	for (size_t i = 1; i < out->a->n && !d.rc; i++) {
		size_t j = i;

		tmp = v[i];
		while (j > 0 && tdictsort_cmp(&d, &tmp, &v[j - 1]) < 0) {
			v[j] = v[j - 1];
			j--;
		}
		v[j] = tmp;
	}
	return d.rc;
}

int tbuiltin_member(struct trt *r, const struct tv *self, const char *name,
		    size_t len, struct tv *out)
{
	static const struct {
		const char *name;
		tbuiltin_fn fn;
	} str[] = {
		{ "upper", tm_upper },	       { "lower", tm_lower },
		{ "strip", tm_strip },	       { "title", tm_title },
		{ "capitalize", tm_capitalize }, { "rstrip", tm_rstrip },
		{ "lstrip", tm_lstrip },       { "startswith", tm_startswith },
		{ "endswith", tm_endswith },   { "split", tm_split },
		{ "replace", tm_replace },
	}, obj[] = {
		{ "get", tm_get },	   { "items", tm_items },
		{ "keys", tm_keys },	   { "values", tm_values },
		{ "dictsort", tm_dictsort },
	};
	size_t i;

	*out = tv_undef();
	if (self->type == TV_STRING) {
		if (len == 6 && !memcmp(name, "length", 6)) {
			*out = tv_int(
				(double)tjs_length(self->s->p, self->s->len));
			return 0;
		}
		for (i = 0; i < sizeof(str) / sizeof(str[0]); i++)
			if (strlen(str[i].name) == len &&
			    !memcmp(str[i].name, name, len))
				return tv_builtin(r, str[i].name, str[i].fn,
						  self, out);
	} else if (tv_is_array(self)) {
		if (len == 6 && !memcmp(name, "length", 6))
			*out = tv_int((double)self->a->n);
	} else if (tv_is_object(self)) {
		for (i = 0; i < sizeof(obj) / sizeof(obj[0]); i++)
			if (strlen(obj[i].name) == len &&
			    !memcmp(obj[i].name, name, len))
				return tv_builtin(r, obj[i].name, obj[i].fn,
						  self, out);
	}
	return 0;
}

/* ---- globals ----------------------------------------------------------- */

static int tg_namespace_pair(struct trt *r, struct tobj *ns,
			     const struct tv *pair)
{
	const struct tv *k, *v;
	struct tv second;
	size_t n1, n2;
	int rc;

	if (tv_is_array(pair) && pair->a->n == 2) {
		k = &pair->a->v[0];
		v = &pair->a->v[1];
		if (k->type != TV_STRING)
			return trt_fail(r, "namespace keys must be strings");
		tv_ref(*v);
		return tobj_set(r, ns, k->s->p, k->s->len, *v);
	}
	/* a string of two characters is the pair of them */
	if (pair->type == TV_STRING && pair->s->len) {
		const char *p = pair->s->p, *e = p + pair->s->len;

		tutf8_decode(p, e, &n1);
		if (n1 < pair->s->len) {
			tutf8_decode(p + n1, e, &n2);
			if (n1 + n2 == pair->s->len) {
				rc = tv_str(r, p + n1, n2, &second);
				return rc ? rc : tobj_set(r, ns, p, n1, second);
			}
		}
	}
	return trt_fail(r, "namespace expected an object or an iterable of "
			   "[key, value] pairs");
}

static int tg_namespace(struct trt *r, const struct tv *self,
			const struct tv *args, size_t n, struct tenv *env,
			struct tv *out)
{
	size_t npos = targ_positional(args, n);
	const struct tv *src = npos ? &args[0] : NULL;
	int rc;

	if (npos > 1)
		return trt_fail(r,
				"namespace expected at most 1 argument, got "
				"%zu",
				npos);
	rc = tv_obj(r, TV_NAMESPACE, out);
	if (src && tv_is_object(src)) {
		for (size_t i = 0; i < src->o->n && !rc; i++) {
			tv_ref(src->o->e[i].val);
			rc = tobj_set(r, out->o, src->o->e[i].key->p,
				      src->o->e[i].key->len, src->o->e[i].val);
		}
	} else if (src && tv_is_array(src)) {
		for (size_t i = 0; i < src->a->n && !rc; i++)
			rc = tg_namespace_pair(r, out->o, &src->a->v[i]);
	} else if (src) {
		return trt_fail(r, "'%s' object is not iterable",
				tv_type_name(src));
	}
	for (size_t i = 0; npos < n && i < args[n - 1].o->n && !rc; i++) {
		tv_ref(args[n - 1].o->e[i].val);
		rc = tobj_set(r, out->o, args[n - 1].o->e[i].key->p,
			      args[n - 1].o->e[i].key->len,
			      args[n - 1].o->e[i].val);
	}
	return rc;
}

static int tg_raise(struct trt *r, const struct tv *self, const struct tv *args,
		    size_t n, struct tenv *env, struct tv *out)
{
	struct tbuf b = { 0 };
	int rc = 0;

	/* new Error(value): undefined gives an empty message */
	if (n && args[0].type != TV_UNDEFINED)
		rc = tv_js_string(r, &args[0], &b);
	if (!rc)
		rc = err_set(r->err, EINVAL, ENGINE_TEMPLATE_RAISED "%s",
			     b.p ? b.p : "");
	tbuf_free(r, &b);
	return rc;
}

static int tg_range(struct trt *r, const struct tv *self, const struct tv *args,
		    size_t n, struct tenv *env, struct tv *out)
{
	double start = 0, stop, step = 1;
	size_t count = 0;
	int rc;

	for (size_t i = 0; i < n; i++)
		if (!tv_is_number(&args[i]))
			return trt_fail(r, "range() arguments must be numbers");
	if (!n)
		return trt_fail(r, "range() needs an argument");
	if (n == 1) {
		stop = args[0].n;
	} else {
		start = args[0].n;
		stop = args[1].n;
		if (n > 2)
			step = args[2].n;
	}
	if (step == 0)
		return trt_fail(r, "range() step must not be zero");
	rc = tv_arr(r, TV_ARRAY, 0, out);
	for (double i = start; !rc && (step > 0 ? i < stop : i > stop);
	     i += step) {
		if (++count > TRANGE_MAX)
			return trt_fail(r, "range() of more than %u items",
					TRANGE_MAX);
		rc = tarr_push(r, out->a,
			       i == floor(i) ? tv_int(i) : tv_float(i));
	}
	return rc;
}

/* utils.ts strftime: %Y %m %d %b %B %H %M %%, local time, English months */
static int tg_strftime(struct trt *r, const struct tv *self,
		       const struct tv *args, size_t n, struct tenv *env,
		       struct tv *out)
{
	static const char *const months[] = {
		"January",   "February", "March",    "April",
		"May",	     "June",	 "July",     "August",
		"September", "October",	 "November", "December",
	};
	time_t t = r->now >= 0 ? (time_t)r->now : time(NULL);
	struct tbuf b = { 0 };
	struct tm tm;
	char x[16];
	int rc = 0;

	if (!n || args[0].type != TV_STRING)
		return trt_fail(r, "strftime_now() needs a format string");
	localtime_r(&t, &tm);
	for (const char *p = args[0].s->p; *p && !rc; p++) {
		x[0] = '\0';
		if (p[0] == '%' && p[1] && strchr("YmdbBHM%", p[1])) {
			switch (*++p) {
			case 'Y':
				snprintf(x, sizeof(x), "%d", tm.tm_year + 1900);
				break;
			case 'm':
				snprintf(x, sizeof(x), "%02d", tm.tm_mon + 1);
				break;
			case 'd':
				snprintf(x, sizeof(x), "%02d", tm.tm_mday);
				break;
			case 'b':
				snprintf(x, sizeof(x), "%.3s",
					 months[tm.tm_mon]);
				break;
			case 'B':
				snprintf(x, sizeof(x), "%s", months[tm.tm_mon]);
				break;
			case 'H':
				snprintf(x, sizeof(x), "%02d", tm.tm_hour);
				break;
			case 'M':
				snprintf(x, sizeof(x), "%02d", tm.tm_min);
				break;
			default: snprintf(x, sizeof(x), "%%"); break;
			}
			rc = tbuf_add(r, &b, x, strlen(x));
		} else {
			rc = tbuf_addc(r, &b, *p);
		}
	}
	if (!rc)
		rc = tbuf_take(r, &b, out);
	tbuf_free(r, &b);
	return rc;
}

int tglobals_add(struct trt *r, struct tenv *root)
{
	static const struct {
		const char *name;
		tbuiltin_fn fn;
	} fns[] = {
		{ "namespace", tg_namespace },
		{ "raise_exception", tg_raise },
		{ "range", tg_range },
		{ "strftime_now", tg_strftime },
	};
	static const struct {
		const char *name;
		int value; /* 0 false, 1 true, 2 none */
	} consts[] = {
		{ "false", 0 }, { "true", 1 },	{ "none", 2 },
		{ "True", 1 },	{ "False", 0 }, { "None", 2 },
	};
	struct tv v;
	int rc = 0;

	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]) && !rc; i++) {
		rc = tv_builtin(r, fns[i].name, fns[i].fn, NULL, &v);
		if (!rc)
			rc = tenv_set(r, root, fns[i].name, strlen(fns[i].name),
				      v);
	}
	for (size_t i = 0; i < sizeof(consts) / sizeof(consts[0]) && !rc; i++)
		rc = tenv_set(r, root, consts[i].name, strlen(consts[i].name),
			      consts[i].value == 2 ? tv_null() :
						     tv_bool(consts[i].value));
	return rc;
}
