// SPDX-License-Identifier: MIT
/*
 * Filters (x | name, x | name(args)) and tests (x is name), the set
 * @huggingface/jinja knows, each for the types it accepts there:
 *
 *   any       safe tojson default
 *   list      list first last length reverse sort join string unique
 *             selectattr rejectattr map
 *   string    length upper lower title capitalize trim indent join string
 *             int float replace
 *   number    abs int float string
 *   mapping   items length, and its methods (dictsort, keys, values...)
 *   boolean   bool int float string
 *
 * Any other pairing fails, as it fails there ("Unknown ArrayValue filter:
 * min"), so that a template llmfs renders is one the reference renders.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- tests ------------------------------------------------------------- */

int ttest_apply(struct trt *r, const char *name, const struct tv *a,
		const struct tv *b, bool *result)
{
	struct tv low;
	int rc;

	if (!strcmp(name, "boolean"))
		*result = a->type == TV_BOOL;
	else if (!strcmp(name, "callable"))
		*result = a->type == TV_FUNCTION;
	else if (!strcmp(name, "odd") || !strcmp(name, "even")) {
		if (a->type != TV_INT)
			return trt_fail(r, "cannot %s on %s", name,
					tv_type_name(a));
		*result = (fmod(a->n, 2) != 0) == (name[0] == 'o');
	} else if (!strcmp(name, "false") || !strcmp(name, "true"))
		*result = a->type == TV_BOOL && a->b == (name[0] == 't');
	else if (!strcmp(name, "none"))
		*result = a->type == TV_NULL;
	else if (!strcmp(name, "string"))
		*result = a->type == TV_STRING;
	else if (!strcmp(name, "number"))
		*result = tv_is_number(a);
	else if (!strcmp(name, "integer"))
		*result = a->type == TV_INT;
	else if (!strcmp(name, "iterable"))
		*result = a->type == TV_ARRAY || a->type == TV_STRING;
	else if (!strcmp(name, "mapping"))
		*result = tv_is_object(a);
	else if (!strcmp(name, "sequence"))
		*result = tv_is_array(a) || tv_is_object(a) ||
			  a->type == TV_STRING;
	else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
		if (a->type != TV_STRING)
			return trt_fail(r, "test %s of a %s", name,
					tv_type_name(a));
		rc = tstr_case(r, a->s, name[0] == 'u', &low);
		if (rc)
			return rc;
		*result = low.s->len == a->s->len &&
			  !memcmp(low.s->p, a->s->p, low.s->len);
		tv_drop(r, low);
	} else if (!strcmp(name, "defined"))
		*result = a->type != TV_UNDEFINED;
	else if (!strcmp(name, "undefined"))
		*result = a->type == TV_UNDEFINED;
	else if (!strcmp(name, "equalto") || !strcmp(name, "eq")) {
		if (!b)
			return trt_fail(r, "test %s needs a value", name);
		*result = tv_strict_equal(a, b);
	} else
		return trt_fail(r, "unknown test: %s", name);
	return 0;
}

/* ---- comparing --------------------------------------------------------- */

int tv_compare(struct trt *r, const struct tv *a, const struct tv *b,
	       bool case_sensitive, int *result)
{
	struct tv la, lb;
	double x, y;
	int rc, c;

	if (a->type == TV_NULL && b->type == TV_NULL) {
		*result = 0;
		return 0;
	}
	if (a->type == TV_UNDEFINED && b->type == TV_UNDEFINED) {
		*result = 0;
		return 0;
	}
	if (a->type == TV_NULL || b->type == TV_NULL ||
	    a->type == TV_UNDEFINED || b->type == TV_UNDEFINED)
		return trt_fail(r, "cannot compare %s with %s", tv_type_name(a),
				tv_type_name(b));
	if ((tv_is_number(a) || a->type == TV_BOOL) &&
	    (tv_is_number(b) || b->type == TV_BOOL)) {
		x = a->type == TV_BOOL ? a->b : a->n;
		y = b->type == TV_BOOL ? b->b : b->n;
		*result = x < y ? -1 : x > y ? 1 : 0;
		return 0;
	}
	if (a->type != b->type || a->type != TV_STRING)
		return trt_fail(r, "cannot compare %s and %s", tv_type_name(a),
				tv_type_name(b));
	if (case_sensitive) {
		la = *a;
		lb = *b;
		tv_ref(la);
		tv_ref(lb);
	} else {
		rc = tstr_case(r, a->s, false, &la);
		if (rc)
			return rc;
		rc = tstr_case(r, b->s, false, &lb);
		if (rc) {
			tv_drop(r, la);
			return rc;
		}
	}
	c = memcmp(la.s->p, lb.s->p,
		   la.s->len < lb.s->len ? la.s->len : lb.s->len);
	if (!c)
		c = la.s->len < lb.s->len ? -1 : la.s->len > lb.s->len;
	*result = c < 0 ? -1 : c > 0;
	tv_drop(r, la);
	tv_drop(r, lb);
	return 0;
}

/* getAttributeValue: "a.b.0" through objects and lists */
static int tattr_path(struct trt *r, const struct tv *item, const char *path,
		      struct tv *out)
{
	const struct tv *v = item, *next;
	const char *p = path, *dot;
	size_t len;

	for (;;) {
		dot = strchr(p, '.');
		len = dot ? (size_t)(dot - p) : strlen(p);
		next = NULL;
		if (tv_is_container(v)) {
			next = tobj_get(v->o, p, len);
		} else if (tv_is_array(v)) {
			char *end;
			long i = strtol(p, &end, 10);

			/* parseInt: leading digits count */
			if (end != p && i >= 0 && (size_t)i < v->a->n)
				next = &v->a->v[i];
		}
		if (!next) {
			*out = tv_undef();
			return 0;
		}
		v = next;
		if (!dot)
			break;
		p = dot + 1;
	}
	*out = *v;
	tv_ref(*out);
	return 0;
	(void)r;
}

/* ---- sort -------------------------------------------------------------- */

struct tsort {
	struct trt *r;
	bool case_sensitive, reverse;
	const struct tv *attribute; /* NULL, a string or an integer */
	int rc;
};

static int tsort_key(struct tsort *s, const struct tv *x, struct tv *key)
{
	char num[64];

	if (!s->attribute) {
		*key = *x;
		tv_ref(*key);
		return 0;
	}
	if (s->attribute->type == TV_INT) {
		tjs_number(s->attribute->n, num, sizeof(num));
		return tattr_path(s->r, x, num, key);
	}
	return tattr_path(s->r, x, s->attribute->s->p, key);
}

static int tsort_cmp(struct tsort *s, const struct tv *a, const struct tv *b)
{
	struct tv ka = tv_undef(), kb = tv_undef();
	int c = 0;

	if (s->rc)
		return 0;
	s->rc = tsort_key(s, a, &ka);
	if (!s->rc)
		s->rc = tsort_key(s, b, &kb);
	if (!s->rc)
		s->rc = tv_compare(s->r, &ka, &kb, s->case_sensitive, &c);
	tv_drop(s->r, ka);
	tv_drop(s->r, kb);
	return s->reverse ? -c : c;
}

/* stable, as JavaScript's Array.prototype.sort */
static void tsort_merge(struct tsort *s, struct tv *v, struct tv *tmp, size_t n)
{
	size_t h = n / 2, i = 0, j = h, k = 0;

	if (n < 2)
		return;
	tsort_merge(s, v, tmp, h);
	tsort_merge(s, v + h, tmp, n - h);
	while (i < h && j < n)
		tmp[k++] = tsort_cmp(s, &v[j], &v[i]) < 0 ? v[j++] : v[i++];
	while (i < h)
		tmp[k++] = v[i++];
	while (j < n)
		tmp[k++] = v[j++];
	memcpy(v, tmp, n * sizeof(*v));
}

static int tfilter_sort(struct trt *r, const struct tv *list, struct tsort *s,
			struct tv *out)
{
	struct tv *tmp;
	int rc = tv_arr(r, TV_ARRAY, list->a->n, out);

	if (rc)
		return rc;
	for (size_t i = 0; i < list->a->n; i++) {
		out->a->v[i] = list->a->v[i];
		tv_ref(out->a->v[i]);
	}
	out->a->n = list->a->n;
	tmp = malloc((list->a->n + 1) * sizeof(*tmp));
	if (!tmp)
		return err_set(r->err, ENOMEM, "template: out of memory");
	s->r = r;
	s->rc = 0;
	tsort_merge(s, out->a->v, tmp, out->a->n);
	free(tmp);
	return s->rc;
}

/* ---- JavaScript's parseInt and parseFloat ------------------------------ */

static double tjs_parse(const struct tstr *s, bool integer)
{
	const char *p = s->p;
	size_t len = s->len, i = 0, start;
	char buf[512];

	tjs_trim(&p, &len, true, false);
	if (i < len && (p[i] == '+' || p[i] == '-'))
		i++;
	start = i;
	if (!integer && len - i >= 8 && !memcmp(p + i, "Infinity", 8))
		return p[0] == '-' ? -INFINITY : INFINITY;
	while (i < len && p[i] >= '0' && p[i] <= '9')
		i++;
	if (!integer) {
		size_t d = i - start, e;

		if (i < len && p[i] == '.') {
			i++;
			while (i < len && p[i] >= '0' && p[i] <= '9') {
				i++;
				d++;
			}
		}
		if (!d)
			return NAN;
		e = i;
		if (e < len && (p[e] == 'e' || p[e] == 'E')) {
			e++;
			if (e < len && (p[e] == '+' || p[e] == '-'))
				e++;
			if (e < len && p[e] >= '0' && p[e] <= '9') {
				while (e < len && p[e] >= '0' && p[e] <= '9')
					e++;
				i = e;
			}
		}
	} else if (i == start) {
		return NAN;
	}
	if (i >= sizeof(buf))
		i = sizeof(buf) - 1;
	memcpy(buf, p, i);
	buf[i] = '\0';
	return strtod(buf, NULL);
}

/* ---- filters without arguments ----------------------------------------- */

static int tfilter_unknown(struct trt *r, const char *kind, const char *name)
{
	return trt_fail(r, "unknown %s filter: %s", kind, name);
}

static int tfilter_join(struct trt *r, const struct tv *list, const char *sep,
			size_t sep_len, struct tv *out)
{
	struct tbuf b = { 0 };
	int rc = 0;

	for (size_t i = 0; i < list->a->n && !rc; i++) {
		const struct tv *x = &list->a->v[i];

		if (i)
			rc = tbuf_add(r, &b, sep, sep_len);
		/* Array.join: null and undefined are empty */
		if (!rc && x->type != TV_NULL && x->type != TV_UNDEFINED)
			rc = tv_js_string(r, x, &b);
	}
	if (!rc)
		rc = tbuf_take(r, &b, out);
	tbuf_free(r, &b);
	return rc;
}

static int tfilter_array(struct trt *r, const struct tv *v, const char *name,
			 struct tv *out)
{
	struct tjson_opts o = { .undefined_null = false };
	struct tbuf b = { 0 };
	struct tsort s = { 0 };
	size_t n = v->a->n;
	int rc = 0;

	if (!strcmp(name, "list")) {
		*out = *v;
		tv_ref(*out);
	} else if (!strcmp(name, "first") || !strcmp(name, "last")) {
		if (!n)
			return trt_fail(r, "%s of an empty list", name);
		*out = v->a->v[name[0] == 'f' ? 0 : n - 1];
		tv_ref(*out);
	} else if (!strcmp(name, "length")) {
		*out = tv_int((double)n);
	} else if (!strcmp(name, "reverse")) {
		rc = tv_arr(r, TV_ARRAY, n, out);
		for (size_t i = 0; i < n && !rc; i++) {
			tv_ref(v->a->v[n - 1 - i]);
			rc = tarr_push(r, out->a, v->a->v[n - 1 - i]);
		}
	} else if (!strcmp(name, "sort")) {
		rc = tfilter_sort(r, v, &s, out);
	} else if (!strcmp(name, "join")) {
		rc = tfilter_join(r, v, "", 0, out);
	} else if (!strcmp(name, "string")) {
		rc = tv_to_json(r, v, &o, 0, &b);
		if (!rc)
			rc = tbuf_take(r, &b, out);
		tbuf_free(r, &b);
	} else if (!strcmp(name, "unique")) {
		rc = tv_arr(r, TV_ARRAY, 0, out);
		for (size_t i = 0; i < n && !rc; i++) {
			bool seen = false;

			for (size_t j = 0; j < out->a->n && !seen; j++)
				seen = tv_strict_equal(&out->a->v[j],
						       &v->a->v[i]);
			if (seen)
				continue;
			tv_ref(v->a->v[i]);
			rc = tarr_push(r, out->a, v->a->v[i]);
		}
	} else {
		rc = tfilter_unknown(r, "ArrayValue", name);
	}
	return rc;
}

/* indent(width, first, blank) on each line after the first */
static int tfilter_indent(struct trt *r, const struct tstr *s, size_t width,
			  bool first, bool blank, struct tv *out)
{
	const char *p = s->p, *e = p + s->len, *nl;
	struct tbuf b = { 0 };
	bool line0 = true;
	int rc = 0;

	for (;;) {
		nl = memchr(p, '\n', (size_t)(e - p));
		if (!nl)
			nl = e;
		if (!((!first && line0) || (!blank && nl == p)))
			for (size_t i = 0; i < width && !rc; i++)
				rc = tbuf_addc(r, &b, ' ');
		if (!rc)
			rc = tbuf_add(r, &b, p, (size_t)(nl - p));
		if (rc || nl == e)
			break;
		rc = tbuf_addc(r, &b, '\n');
		p = nl + 1;
		line0 = false;
	}
	if (!rc)
		rc = tbuf_take(r, &b, out);
	tbuf_free(r, &b);
	return rc;
}

static int tfilter_string(struct trt *r, const struct tv *v, const char *name,
			  struct tv *out)
{
	const char *p = v->s->p;
	size_t len = v->s->len;
	double x;

	if (!strcmp(name, "length")) {
		*out = tv_int((double)tjs_length(p, len));
		return 0;
	}
	if (!strcmp(name, "upper") || !strcmp(name, "lower"))
		return tstr_case(r, v->s, name[0] == 'u', out);
	if (!strcmp(name, "title"))
		return tstr_title(r, v->s, out);
	if (!strcmp(name, "capitalize"))
		return tstr_capitalize(r, v->s, out);
	if (!strcmp(name, "trim")) {
		tjs_trim(&p, &len, true, true);
		return tv_str(r, p, len, out);
	}
	if (!strcmp(name, "indent"))
		return tfilter_indent(r, v->s, 4, false, false, out);
	if (!strcmp(name, "join") || !strcmp(name, "string")) {
		*out = *v;
		tv_ref(*out);
		return 0;
	}
	if (!strcmp(name, "int") || !strcmp(name, "float")) {
		x = tjs_parse(v->s, name[0] == 'i');
		if (isnan(x))
			x = 0;
		*out = name[0] == 'i' ? tv_int(x) : tv_float(x);
		return 0;
	}
	return tfilter_unknown(r, "StringValue", name);
}

static int tfilter_plain(struct trt *r, const struct tv *v, const char *name,
			 struct tenv *env, struct tv *out)
{
	struct tjson_opts o = { .undefined_null = true };
	struct tbuf b = { 0 };
	struct tv fn;
	int rc;

	if (!strcmp(name, "safe")) {
		*out = *v;
		tv_ref(*out);
		return 0;
	}
	if (!strcmp(name, "tojson")) {
		rc = tv_to_json(r, v, &o, 0, &b);
		if (!rc)
			rc = tbuf_take(r, &b, out);
		tbuf_free(r, &b);
		return rc;
	}
	if (tv_is_array(v))
		return tfilter_array(r, v, name, out);
	if (v->type == TV_STRING)
		return tfilter_string(r, v, name, out);
	if (tv_is_number(v)) {
		if (!strcmp(name, "abs"))
			*out = v->type == TV_INT ? tv_int(fabs(v->n)) :
						   tv_float(fabs(v->n));
		else if (!strcmp(name, "int"))
			*out = tv_int(floor(v->n));
		else if (!strcmp(name, "float"))
			*out = tv_float(v->n);
		else if (!strcmp(name, "string")) {
			rc = tv_print(r, v, &b);
			if (!rc)
				rc = tbuf_take(r, &b, out);
			tbuf_free(r, &b);
			return rc;
		} else
			return tfilter_unknown(r, "NumericValue", name);
		return 0;
	}
	if (tv_is_object(v)) {
		if (!strcmp(name, "length")) {
			*out = tv_int((double)v->o->n);
			return 0;
		}
		rc = tbuiltin_member(r, v, name, strlen(name), &fn);
		if (rc)
			return rc;
		if (fn.type == TV_UNDEFINED)
			return tfilter_unknown(r, "ObjectValue", name);
		rc = tcall(r, &fn, NULL, 0, env, out);
		tv_drop(r, fn);
		return rc;
	}
	if (v->type == TV_BOOL) {
		if (!strcmp(name, "bool"))
			*out = *v;
		else if (!strcmp(name, "int"))
			*out = tv_int(v->b);
		else if (!strcmp(name, "float"))
			*out = tv_float(v->b);
		else if (!strcmp(name, "string"))
			return tv_str0(r, v->b ? "true" : "false", out);
		else
			return tfilter_unknown(r, "BooleanValue", name);
		return 0;
	}
	return trt_fail(r, "cannot apply filter \"%s\" to type: %s", name,
			tv_type_name(v));
}

/* ---- filters with arguments -------------------------------------------- */

/* args[i] if positional, else the keyword, else NULL */
static const struct tv *targ(const struct tv *args, size_t n, size_t i,
			     const char *kw)
{
	if (i < targ_positional(args, n))
		return &args[i];
	return kw ? targ_kw(args, n, kw) : NULL;
}

static int tfilter_tojson(struct trt *r, const struct tv *v,
			  const struct tv *args, size_t n, struct tv *out)
{
	const struct tv *indent = targ_kw(args, n, "indent");
	const struct tv *ascii = targ_kw(args, n, "ensure_ascii");
	const struct tv *sort = targ_kw(args, n, "sort_keys");
	const struct tv *sep = targ_kw(args, n, "separators");
	struct tjson_opts o = { .undefined_null = true };
	struct tbuf b = { 0 };
	int rc;

	if (indent && indent->type != TV_INT && indent->type != TV_NULL)
		return trt_fail(r, "if set, indent must be a number");
	if (ascii && ascii->type != TV_BOOL)
		return trt_fail(r, "if set, ensure_ascii must be a boolean");
	if (sort && sort->type != TV_BOOL)
		return trt_fail(r, "if set, sort_keys must be a boolean");
	if (sep && sep->type != TV_NULL) {
		if (!tv_is_array(sep) || sep->a->n != 2 ||
		    sep->a->v[0].type != TV_STRING ||
		    sep->a->v[1].type != TV_STRING)
			return trt_fail(r, "separators must be a tuple of two "
					   "strings");
		o.item_sep = sep->a->v[0].s->p;
		o.key_sep = sep->a->v[1].s->p;
	}
	if (indent && indent->type == TV_INT) {
		if (indent->n > 64)
			return trt_fail(r, "tojson: indent too large");
		o.indent = indent->n > 0 ? (int)indent->n : 0;
	}
	o.ensure_ascii = ascii && ascii->b;
	o.sort_keys = sort && sort->b;
	rc = tv_to_json(r, v, &o, 0, &b);
	if (!rc)
		rc = tbuf_take(r, &b, out);
	tbuf_free(r, &b);
	return rc;
}

static int tfilter_join_args(struct trt *r, const struct tv *v,
			     const struct tv *args, size_t n, struct tv *out)
{
	const struct tv *sep = targ(args, n, 0, "separator");
	struct tv chars;
	size_t k;
	int rc;

	if (sep && sep->type != TV_STRING)
		return trt_fail(r, "separator must be a string");
	if (tv_is_array(v))
		return tfilter_join(r, v, sep ? sep->s->p : "",
				    sep ? sep->s->len : 0, out);
	if (v->type != TV_STRING)
		return trt_fail(r, "cannot apply filter \"join\" to type: %s",
				tv_type_name(v));
	/* Array.from(string): its characters */
	rc = tv_arr(r, TV_ARRAY, 0, &chars);
	for (const char *p = v->s->p, *e = p + v->s->len; p < e && !rc;
	     p += k) {
		struct tv c;

		tutf8_decode(p, e, &k);
		rc = tv_str(r, p, k, &c);
		if (!rc)
			rc = tarr_push(r, chars.a, c);
	}
	if (!rc)
		rc = tfilter_join(r, &chars, sep ? sep->s->p : "",
				  sep ? sep->s->len : 0, out);
	tv_drop(r, chars);
	return rc;
}

static int tfilter_number_args(struct trt *r, const struct tv *v, bool integer,
			       const struct tv *args, size_t n, struct tv *out)
{
	const struct tv *def = targ(args, n, 0, "default");
	double x;

	if (v->type == TV_STRING) {
		x = tjs_parse(v->s, integer);
		if (isnan(x)) {
			*out = def ? *def : integer ? tv_int(0) : tv_float(0);
			tv_ref(*out);
		} else {
			*out = integer ? tv_int(x) : tv_float(x);
		}
		return 0;
	}
	if (tv_is_number(v)) {
		*out = *v;
		return 0;
	}
	if (v->type == TV_BOOL) {
		*out = integer ? tv_int(v->b) : tv_float(v->b);
		return 0;
	}
	return trt_fail(r, "cannot apply filter \"%s\" to type: %s",
			integer ? "int" : "float", tv_type_name(v));
}

static int tfilter_default(struct trt *r, const struct tv *v,
			   const struct tv *args, size_t n, struct tv *out)
{
	size_t npos = targ_positional(args, n);
	const struct tv *boolean = targ(args, n, 1, "boolean");

	if (boolean && boolean->type != TV_BOOL)
		return trt_fail(r, "default filter flag must be a boolean");
	if (v->type == TV_UNDEFINED ||
	    (boolean && boolean->b && !tv_truthy(v))) {
		if (npos)
			*out = args[0];
		else
			return tv_str(r, "", 0, out);
	} else {
		*out = *v;
	}
	tv_ref(*out);
	return 0;
}

static int tfilter_select(struct trt *r, const struct tv *v, bool select,
			  const struct tnode *call, struct tenv *env,
			  struct tv *out)
{
	struct tv a[3] = { tv_undef(), tv_undef(), tv_undef() }, *x;
	size_t na = call->n < 3 ? call->n : 3, i;
	bool result;
	int rc = 0;

	for (i = 0; i < v->a->n; i++)
		if (!tv_is_container(&v->a->v[i]))
			return trt_fail(r,
					"%s can only be applied to an array "
					"of objects",
					select ? "selectattr" : "rejectattr");
	for (i = 0; i < call->n; i++)
		if (call->list[i]->kind != TN_STRING)
			return trt_fail(r, "arguments of %s must be strings",
					select ? "selectattr" : "rejectattr");
	for (i = 0; i < na && !rc; i++)
		rc = teval(r, call->list[i], env, &a[i]);
	if (!rc)
		rc = tv_arr(r, TV_ARRAY, 0, out);
	for (i = 0; i < v->a->n && !rc; i++) {
		result = false;
		x = na ? tobj_get(v->a->v[i].o, a[0].s->p, a[0].s->len) : NULL;
		if (x && na >= 2)
			rc = ttest_apply(r, a[1].s->p, x,
					 na >= 3 ? &a[2] : NULL, &result);
		else if (x)
			result = tv_truthy(x);
		if (!rc && result == select) {
			tv_ref(v->a->v[i]);
			rc = tarr_push(r, out->a, v->a->v[i]);
		}
	}
	for (i = 0; i < 3; i++)
		tv_drop(r, a[i]);
	return rc;
}

static int tfilter_map(struct trt *r, const struct tv *v, const struct tv *args,
		       size_t n, struct tv *out)
{
	const struct tv *attr = targ_kw(args, n, "attribute");
	const struct tv *def = targ_kw(args, n, "default");
	struct tv x;
	int rc;

	if (!attr)
		return trt_fail(r, "map without attribute is not supported");
	if (attr->type != TV_STRING)
		return trt_fail(r, "attribute must be a string");
	rc = tv_arr(r, TV_ARRAY, v->a->n, out);
	for (size_t i = 0; i < v->a->n && !rc; i++) {
		if (!tv_is_container(&v->a->v[i]))
			return trt_fail(r, "items in map must be an object");
		rc = tattr_path(r, &v->a->v[i], attr->s->p, &x);
		if (!rc && x.type == TV_UNDEFINED && def) {
			x = *def;
			tv_ref(x);
		}
		if (!rc)
			rc = tarr_push(r, out->a, x);
	}
	return rc;
}

static int tfilter_array_args(struct trt *r, const struct tv *v,
			      const char *name, const struct tnode *call,
			      const struct tv *args, size_t n, struct tenv *env,
			      struct tv *out)
{
	const struct tv *rev, *cs, *attr;
	struct tsort s = { 0 };

	if (!strcmp(name, "sort")) {
		rev = targ(args, n, 0, "reverse");
		cs = targ(args, n, 1, "case_sensitive");
		attr = targ(args, n, 2, "attribute");
		if (rev && rev->type != TV_BOOL)
			return trt_fail(r, "reverse must be a boolean");
		if (cs && cs->type != TV_BOOL)
			return trt_fail(r, "case_sensitive must be a boolean");
		if (attr && attr->type != TV_STRING && attr->type != TV_INT &&
		    attr->type != TV_NULL)
			return trt_fail(r, "attribute must be a string, "
					   "integer, or null");
		s.reverse = rev && rev->b;
		s.case_sensitive = cs && cs->b;
		s.attribute = attr && attr->type != TV_NULL ? attr : NULL;
		return tfilter_sort(r, v, &s, out);
	}
	if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr"))
		return tfilter_select(r, v, name[0] == 's', call, env, out);
	if (!strcmp(name, "map"))
		return tfilter_map(r, v, args, n, out);
	return tfilter_unknown(r, "ArrayValue", name);
}

static int tfilter_string_args(struct trt *r, const struct tv *v,
			       const char *name, const struct tv *args,
			       size_t n, struct tv *out)
{
	const struct tv *width, *first, *blank, *count;
	size_t npos = targ_positional(args, n);

	if (!strcmp(name, "indent")) {
		width = targ(args, n, 0, "width");
		first = targ(args, n, 1, "first");
		blank = targ(args, n, 2, "blank");
		if (width && width->type != TV_INT)
			return trt_fail(r, "width must be a number");
		if (width && (width->n < 0 || width->n > 1024))
			return trt_fail(r, "indent width out of range");
		return tfilter_indent(r, v->s, width ? (size_t)width->n : 4,
				      first && tv_truthy(first),
				      blank && tv_truthy(blank), out);
	}
	if (!strcmp(name, "replace")) {
		if (npos < 2)
			return trt_fail(r, "replace() requires at least two "
					   "arguments");
		if (args[0].type != TV_STRING || args[1].type != TV_STRING)
			return trt_fail(r,
					"replace() arguments must be strings");
		count = npos > 2 ? &args[2] : targ_kw(args, n, "count");
		if (count && count->type != TV_INT && count->type != TV_NULL)
			return trt_fail(r, "replace() count argument must be a "
					   "number or null");
		return tstr_replace(
			r, v->s, args[0].s, args[1].s,
			count && count->type == TV_INT ? count->n : -1, out);
	}
	return tfilter_unknown(r, "StringValue", name);
}

static int tfilter_with_args(struct trt *r, const struct tv *v,
			     const char *name, const struct tnode *call,
			     const struct tv *args, size_t n, struct tenv *env,
			     struct tv *out)
{
	struct tv fn;
	int rc;

	if (!strcmp(name, "tojson"))
		return tfilter_tojson(r, v, args, n, out);
	if (!strcmp(name, "join"))
		return tfilter_join_args(r, v, args, n, out);
	if (!strcmp(name, "int") || !strcmp(name, "float"))
		return tfilter_number_args(r, v, name[0] == 'i', args, n, out);
	if (!strcmp(name, "default"))
		return tfilter_default(r, v, args, n, out);
	if (tv_is_array(v))
		return tfilter_array_args(r, v, name, call, args, n, env, out);
	if (v->type == TV_STRING)
		return tfilter_string_args(r, v, name, args, n, out);
	if (tv_is_object(v)) {
		rc = tbuiltin_member(r, v, name, strlen(name), &fn);
		if (rc)
			return rc;
		if (fn.type != TV_FUNCTION) {
			tv_drop(r, fn);
			return tfilter_unknown(r, "ObjectValue", name);
		}
		rc = tcall(r, &fn, args, n, env, out);
		tv_drop(r, fn);
		return rc;
	}
	return trt_fail(r, "cannot apply filter \"%s\" to type: %s", name,
			tv_type_name(v));
}

int tfilter_apply(struct trt *r, struct tv operand, const struct tnode *filter,
		  struct tenv *env, struct tv *out)
{
	struct tv *args = NULL;
	size_t n = 0;
	int rc;

	*out = tv_undef();
	if (filter->kind == TN_IDENT) {
		rc = tfilter_plain(r, &operand, filter->s, env, out);
	} else if (filter->kind == TN_CALL && filter->a->kind == TN_IDENT) {
		rc = teval_args(r, filter->list, filter->n, env, false, &args,
				&n);
		if (!rc)
			rc = tfilter_with_args(r, &operand, filter->a->s,
					       filter, args, n, env, out);
		tv_drop_all(r, args, n);
	} else {
		rc = trt_fail(r, "unknown filter");
	}
	tv_drop(r, operand);
	return rc;
}
