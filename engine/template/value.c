// SPDX-License-Identifier: MIT
/*
 * Template values and their memory.
 *
 * Strings, arrays, objects, functions and environments are heap objects
 * with a reference count: a struct tv that holds one owns a reference,
 * and functions return new references. A namespace can come to hold
 * itself (set ns.x = ns), which counting never frees, so every heap
 * object of a render is also on the render's list and trt_free_all()
 * frees what is left at its end. Every object is charged to the render
 * (live_bytes), which fails past max_bytes: a template cannot eat the
 * daemon's memory.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int trt_fail(struct trt *r, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return err_set(r->err, EINVAL, "template: %s", msg);
}

void trt_init(struct trt *r, struct err *err)
{
	memset(r, 0, sizeof(*r));
	r->all.prev = r->all.next = &r->all;
	r->err = err;
}

static void *th_alloc(struct trt *r, size_t bytes, enum theap_kind kind)
{
	struct theap *h;

	if (bytes > r->max_bytes - r->live_bytes) {
		err_set(r->err, ENOMEM,
			"template: the rendering needs more than %zu MiB",
			r->max_bytes >> 20);
		return NULL;
	}
	h = calloc(1, bytes);
	if (!h) {
		err_set(r->err, ENOMEM, "template: out of memory");
		return NULL;
	}
	h->refs = 1;
	h->kind = (uint8_t)kind;
	h->bytes = bytes;
	h->next = r->all.next;
	h->prev = &r->all;
	r->all.next->prev = h;
	r->all.next = h;
	r->live_bytes += bytes;
	return h;
}

/* Frees the object's own memory (not what it refers to). */
static void th_release(struct trt *r, struct theap *h)
{
	h->prev->next = h->next;
	h->next->prev = h->prev;
	r->live_bytes -= h->bytes;
	switch (h->kind) {
	case TH_ARRAY: free(((struct tarr *)h)->v); break;
	case TH_OBJECT: free(((struct tobj *)h)->e); break;
	default: break;
	}
	free(h);
}

void trt_free_all(struct trt *r)
{
	while (r->all.next != &r->all)
		th_release(r, r->all.next);
}

void tv_ref(struct tv v)
{
	if (tv_is_heap(&v))
		v.h->refs++;
}

static void th_drop(struct trt *r, struct theap *h);

void tv_drop(struct trt *r, struct tv v)
{
	if (tv_is_heap(&v))
		th_drop(r, v.h);
}

static void th_drop(struct trt *r, struct theap *h)
{
	if (!h || --h->refs)
		return;
	switch (h->kind) {
	case TH_ARRAY: {
		struct tarr *a = (struct tarr *)h;

		for (size_t i = 0; i < a->n; i++)
			tv_drop(r, a->v[i]);
		break;
	}
	case TH_OBJECT: {
		struct tobj *o = (struct tobj *)h;

		for (size_t i = 0; i < o->n; i++) {
			th_drop(r, &o->e[i].key->h);
			tv_drop(r, o->e[i].val);
		}
		break;
	}
	case TH_FUNCTION: {
		struct tfn *f = (struct tfn *)h;

		tv_drop(r, f->self);
		if (f->env)
			th_drop(r, &f->env->h);
		break;
	}
	case TH_ENV: {
		struct tenv *e = (struct tenv *)h;

		if (e->parent)
			th_drop(r, &e->parent->h);
		th_drop(r, &e->vars->h);
		break;
	}
	default: break;
	}
	th_release(r, h);
}

int tv_str(struct trt *r, const char *p, size_t len, struct tv *out)
{
	struct tstr *s;

	if (len > SIZE_MAX / 2) {
		*out = tv_undef();
		return err_set(r->err, ENOMEM, "template: string too long");
	}
	s = th_alloc(r, sizeof(*s) + len + 1, TH_STRING);
	if (!s) {
		*out = tv_undef();
		return -ENOMEM;
	}
	s->len = len;
	if (len)
		memcpy(s->p, p, len);
	s->p[len] = '\0';
	*out = (struct tv){ .type = TV_STRING, .s = s };
	return 0;
}

int tv_str0(struct trt *r, const char *p, struct tv *out)
{
	return tv_str(r, p, strlen(p), out);
}

/* Grow a malloc'ed array of elem-sized items, charged to the render. */
static int trt_grow(struct trt *r, struct theap *h, void **v, size_t *cap,
		    size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 4, add;
	void *p;

	while (c < need)
		c *= 2;
	if (c == *cap)
		return 0;
	add = (c - *cap) * elem;
	if (c > SIZE_MAX / elem || add > r->max_bytes - r->live_bytes)
		return err_set(
			r->err, ENOMEM,
			"template: the rendering needs more than %zu MiB",
			r->max_bytes >> 20);
	p = realloc(*v, c * elem);
	if (!p)
		return err_set(r->err, ENOMEM, "template: out of memory");
	*v = p;
	*cap = c;
	r->live_bytes += add;
	h->bytes += add;
	return 0;
}

int tv_arr(struct trt *r, uint8_t type, size_t cap, struct tv *out)
{
	struct tarr *a = th_alloc(r, sizeof(*a), TH_ARRAY);

	*out = tv_undef();
	if (!a)
		return -ENOMEM;
	*out = (struct tv){ .type = type, .a = a };
	if (cap)
		return trt_grow(r, &a->h, (void **)&a->v, &a->cap, cap,
				sizeof(*a->v));
	return 0;
}

int tarr_push(struct trt *r, struct tarr *a, struct tv v)
{
	int rc = trt_grow(r, &a->h, (void **)&a->v, &a->cap, a->n + 1,
			  sizeof(*a->v));

	if (rc) {
		tv_drop(r, v);
		return rc;
	}
	a->v[a->n++] = v;
	return 0;
}

int tv_obj(struct trt *r, uint8_t type, struct tv *out)
{
	return tv_obj_cap(r, type, 0, out);
}

int tv_obj_cap(struct trt *r, uint8_t type, size_t cap, struct tv *out)
{
	struct tobj *o = th_alloc(r, sizeof(*o), TH_OBJECT);

	*out = tv_undef();
	if (!o)
		return -ENOMEM;
	*out = (struct tv){ .type = type, .o = o };
	if (cap)
		return trt_grow(r, &o->h, (void **)&o->e, &o->cap, cap,
				sizeof(*o->e));
	return 0;
}

static bool tkey_eq(const struct tstr *k, const char *key, size_t len)
{
	return k->len == len && memcmp(k->p, key, len) == 0;
}

struct tv *tobj_get(const struct tobj *o, const char *key, size_t len)
{
	for (size_t i = 0; i < o->n; i++)
		if (tkey_eq(o->e[i].key, key, len))
			return &o->e[i].val;
	return NULL;
}

int tobj_put(struct trt *r, struct tobj *o, struct tstr *key, struct tv v)
{
	struct tv *old = tobj_get(o, key->p, key->len);
	int rc;

	if (old) {
		tv_drop(r, *old);
		*old = v;
		return 0;
	}
	rc = trt_grow(r, &o->h, (void **)&o->e, &o->cap, o->n + 1,
		      sizeof(*o->e));
	if (rc) {
		tv_drop(r, v);
		return rc;
	}
	key->h.refs++;
	o->e[o->n].key = key;
	o->e[o->n].val = v;
	o->n++;
	return 0;
}

int tobj_set(struct trt *r, struct tobj *o, const char *key, size_t len,
	     struct tv v)
{
	struct tv *old = tobj_get(o, key, len);
	struct tv k;
	int rc;

	if (old) {
		tv_drop(r, *old);
		*old = v;
		return 0;
	}
	rc = tv_str(r, key, len, &k);
	if (rc) {
		tv_drop(r, v);
		return rc;
	}
	rc = tobj_put(r, o, k.s, v);
	tv_drop(r, k);
	return rc;
}

bool tobj_del(struct trt *r, struct tobj *o, const char *key, size_t len)
{
	for (size_t i = 0; i < o->n; i++) {
		if (!tkey_eq(o->e[i].key, key, len))
			continue;
		th_drop(r, &o->e[i].key->h);
		tv_drop(r, o->e[i].val);
		memmove(&o->e[i], &o->e[i + 1], (o->n - i - 1) * sizeof(*o->e));
		o->n--;
		return true;
	}
	return false;
}

int tv_builtin(struct trt *r, const char *name, tbuiltin_fn fn,
	       const struct tv *self, struct tv *out)
{
	struct tfn *f = th_alloc(r, sizeof(*f), TH_FUNCTION);

	*out = tv_undef();
	if (!f)
		return -ENOMEM;
	f->kind = TF_BUILTIN;
	f->fn = fn;
	f->name = name;
	if (self) {
		f->self = *self;
		tv_ref(*self);
	}
	*out = (struct tv){ .type = TV_FUNCTION, .f = f };
	return 0;
}

int tenv_new(struct trt *r, struct tenv *parent, struct tenv **out)
{
	struct tenv *e = th_alloc(r, sizeof(*e), TH_ENV);
	struct tv vars;

	*out = NULL;
	if (!e)
		return -ENOMEM;
	if (tv_obj(r, TV_OBJECT, &vars)) {
		th_drop(r, &e->h);
		return -ENOMEM;
	}
	e->vars = vars.o;
	e->parent = parent;
	if (parent)
		parent->h.refs++;
	*out = e;
	return 0;
}

void tenv_drop(struct trt *r, struct tenv *e)
{
	if (e)
		th_drop(r, &e->h);
}

struct tv *tenv_lookup(struct tenv *e, const char *name, size_t len)
{
	struct tv *v;

	for (; e; e = e->parent)
		if ((v = tobj_get(e->vars, name, len)))
			return v;
	return NULL;
}

int tenv_set(struct trt *r, struct tenv *e, const char *name, size_t len,
	     struct tv v)
{
	return tobj_set(r, e->vars, name, len, v);
}

bool tv_truthy(const struct tv *v)
{
	switch (v->type) {
	case TV_UNDEFINED:
	case TV_NULL: return false;
	case TV_BOOL: return v->b;
	case TV_INT:
	case TV_FLOAT: return v->n != 0 && !isnan(v->n);
	case TV_STRING: return v->s->len > 0;
	case TV_ARRAY:
	case TV_TUPLE: return v->a->n > 0;
	case TV_OBJECT:
	case TV_KWARGS: return v->o->n > 0;
	default: return true; /* namespace, function */
	}
}

const char *tv_type_name(const struct tv *v)
{
	static const char *const names[] = {
		[TV_UNDEFINED] = "UndefinedValue",
		[TV_NULL] = "NullValue",
		[TV_BOOL] = "BooleanValue",
		[TV_INT] = "IntegerValue",
		[TV_FLOAT] = "FloatValue",
		[TV_STRING] = "StringValue",
		[TV_ARRAY] = "ArrayValue",
		[TV_TUPLE] = "TupleValue",
		[TV_OBJECT] = "ObjectValue",
		[TV_KWARGS] = "KeywordArgumentsValue",
		[TV_NAMESPACE] = "NamespaceValue",
		[TV_FUNCTION] = "FunctionValue",
	};

	return names[v->type];
}

/* ---- JavaScript equality ----------------------------------------------- */

/* The JavaScript value under a RuntimeValue: which kind of primitive. */
enum tjs_kind { JS_UNDEF, JS_NULL, JS_BOOL, JS_NUMBER, JS_STRING, JS_OBJECT };

static enum tjs_kind tjs_kind(const struct tv *v)
{
	switch (v->type) {
	case TV_UNDEFINED: return JS_UNDEF;
	case TV_NULL: return JS_NULL;
	case TV_BOOL: return JS_BOOL;
	case TV_INT:
	case TV_FLOAT: return JS_NUMBER;
	case TV_STRING: return JS_STRING;
	default: return JS_OBJECT;
	}
}

/* ToNumber of a string: decimal, 0x/0o/0b, Infinity; "" is 0; else NaN. */
static double tjs_string_number(const char *p, size_t len)
{
	char buf[64], *end;
	const char *s = p;
	size_t n = len;
	double x;
	int base = 0;

	tjs_trim(&s, &n, true, true);
	if (!n)
		return 0;
	if (n >= sizeof(buf))
		return NAN;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (n > 2 && buf[0] == '0' && (buf[1] | 0x20) == 'x')
		base = 16;
	else if (n > 2 && buf[0] == '0' && (buf[1] | 0x20) == 'o')
		base = 8;
	else if (n > 2 && buf[0] == '0' && (buf[1] | 0x20) == 'b')
		base = 2;
	if (base) {
		x = 0;
		for (size_t i = 2; i < n; i++) {
			int d = buf[i] >= '0' && buf[i] <= '9' ?
					buf[i] - '0' :
				(buf[i] | 0x20) >= 'a' &&
						(buf[i] | 0x20) <= 'f' ?
					(buf[i] | 0x20) - 'a' + 10 :
					99;
			if (d >= base)
				return NAN;
			x = x * base + d;
		}
		return x;
	}
	if (strcmp(buf, "Infinity") == 0 || strcmp(buf, "+Infinity") == 0)
		return INFINITY;
	if (strcmp(buf, "-Infinity") == 0)
		return -INFINITY;
	/* strtod knows inf, nan and hex floats, JavaScript does not */
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789+-.eE", buf[i]))
			return NAN;
	x = strtod(buf, &end);
	return *end ? NAN : x;
}

static double tjs_to_number(const struct tv *v)
{
	switch (tjs_kind(v)) {
	case JS_BOOL: return v->b;
	case JS_NUMBER: return v->n;
	case JS_STRING: return tjs_string_number(v->s->p, v->s->len);
	case JS_NULL: return 0;
	default: return NAN;
	}
}

bool tv_strict_equal(const struct tv *a, const struct tv *b)
{
	enum tjs_kind ka = tjs_kind(a), kb = tjs_kind(b);

	if (ka != kb)
		return false;
	switch (ka) {
	case JS_UNDEF:
	case JS_NULL: return true;
	case JS_BOOL: return a->b == b->b;
	case JS_NUMBER: return a->n == b->n;
	case JS_STRING:
		return a->s->len == b->s->len &&
		       memcmp(a->s->p, b->s->p, a->s->len) == 0;
	default: return a->h == b->h;
	}
}

/*
 * An object compared with a primitive becomes a string first: an array
 * is its elements' toString() joined by ",", a Map "[object Map]".
 */
static bool tjs_object_loose(struct trt *r, const struct tv *obj,
			     const struct tv *prim)
{
	struct tbuf b = { 0 };
	struct tv s;
	bool eq = false;

	if (tv_js_string(r, obj, &b) || tbuf_take(r, &b, &s))
		return false;
	eq = tv_loose_equal(r, &s, prim);
	tv_drop(r, s);
	return eq;
}

bool tv_loose_equal(struct trt *r, const struct tv *a, const struct tv *b)
{
	enum tjs_kind ka = tjs_kind(a), kb = tjs_kind(b);

	if (ka == kb)
		return tv_strict_equal(a, b);
	if ((ka == JS_UNDEF || ka == JS_NULL) &&
	    (kb == JS_UNDEF || kb == JS_NULL))
		return true;
	if (ka == JS_UNDEF || ka == JS_NULL || kb == JS_UNDEF || kb == JS_NULL)
		return false;
	if (ka == JS_OBJECT)
		return tjs_object_loose(r, a, b);
	if (kb == JS_OBJECT)
		return tjs_object_loose(r, b, a);
	return tjs_to_number(a) == tjs_to_number(b);
}
