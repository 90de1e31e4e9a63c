// SPDX-License-Identifier: MIT
/*
 * The interpreter: statements write into the output buffer of their
 * block, expressions return values (new references), by
 * @huggingface/jinja's runtime.ts (Interpreter). What a reader of Python
 * Jinja2 would not expect, and runtime.ts does:
 *
 *   - a macro's body sees the variables of the place it is called from
 *     (its scope's parent is the caller's environment);
 *   - a for loop has one scope for all its iterations: a set inside it
 *     lasts to the next iteration, not past the loop; its else block runs
 *     when no iteration ended normally (break and continue included);
 *   - the text an iteration wrote before a break or continue is dropped
 *     (the JavaScript exception discards it);
 *   - == is JavaScript's loose equality (1 == "1", undefined == none),
 *     "in" a list is strict equality;
 *   - undefined.attribute is undefined, not an error.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* calls and nested blocks in flight: far more than templates need */
#define TEVAL_MAX_DEPTH 400

int tstep(struct trt *r)
{
	if (++r->steps > r->max_steps)
		return trt_fail(r,
				"the template runs too long (more than %llu "
				"steps)",
				(unsigned long long)r->max_steps);
	return 0;
}

void tv_drop_all(struct trt *r, struct tv *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tv_drop(r, v[i]);
	free(v);
}

/* ---- arguments and calls ----------------------------------------------- */

static int targs_push(struct trt *r, struct tv **v, size_t *n, size_t *cap,
		      struct tv x)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 4;
		struct tv *p = realloc(*v, c * sizeof(*p));

		if (!p) {
			tv_drop(r, x);
			return err_set(r->err, ENOMEM,
				       "template: out of memory");
		}
		*v = p;
		*cap = c;
	}
	(*v)[(*n)++] = x;
	return 0;
}

static int targs_kwarg(struct trt *r, struct tv *kw, const char *k, size_t len,
		       struct tv val)
{
	int rc;

	if (kw->type == TV_UNDEFINED) {
		rc = tv_obj(r, TV_KWARGS, kw);
		if (rc) {
			tv_drop(r, val);
			return rc;
		}
	}
	if (tobj_get(kw->o, k, len)) {
		tv_drop(r, val);
		return trt_fail(r,
				"got multiple values for keyword argument "
				"'%.*s'",
				(int)len, k);
	}
	return tobj_set(r, kw->o, k, len, val);
}

/* the *expr of a call: its items, positional */
static int targs_spread(struct trt *r, const struct tnode *nd, struct tenv *env,
			struct tv **v, size_t *n, size_t *cap)
{
	struct tv x;
	int rc = teval(r, nd->a, env, &x);

	if (rc)
		return rc;
	if (!tv_is_array(&x)) {
		rc = trt_fail(r, "cannot unpack non-iterable type: %s",
			      tv_type_name(&x));
		tv_drop(r, x);
		return rc;
	}
	for (size_t i = 0; i < x.a->n && !rc; i++) {
		tv_ref(x.a->v[i]);
		rc = targs_push(r, v, n, cap, x.a->v[i]);
	}
	tv_drop(r, x);
	return rc;
}

/* the keyword arguments of a call, into *kw (undefined while none) */
static int targs_keywords(struct trt *r, struct tnode *const *list, size_t n,
			  struct tenv *env, struct tv *kw)
{
	struct tv x;
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		if (list[i]->kind != TN_KWARG && list[i]->kind != TN_KWSPREAD)
			continue;
		rc = teval(r, list[i]->a, env, &x);
		if (rc)
			break;
		if (list[i]->kind == TN_KWARG) {
			rc = targs_kwarg(r, kw, list[i]->s, list[i]->len, x);
			continue;
		}
		if (!tv_is_object(&x))
			rc = trt_fail(r,
				      "argument after ** must be a mapping, "
				      "not %s",
				      tv_type_name(&x));
		for (size_t j = 0; !rc && j < x.o->n; j++) {
			tv_ref(x.o->e[j].val);
			rc = targs_kwarg(r, kw, x.o->e[j].key->p,
					 x.o->e[j].key->len, x.o->e[j].val);
		}
		tv_drop(r, x);
	}
	return rc;
}

int teval_args(struct trt *r, struct tnode *const *list, size_t n,
	       struct tenv *env, bool always_kwargs, struct tv **out,
	       size_t *n_out)
{
	struct tv *v = NULL, x, kw = tv_undef();
	size_t nv = 0, cap = 0;
	int rc = 0;

	/* all positional values first, then the keyword ones (Python's order) */
	for (size_t i = 0; i < n && !rc; i++) {
		if (list[i]->kind == TN_SPREAD)
			rc = targs_spread(r, list[i], env, &v, &nv, &cap);
		else if (list[i]->kind != TN_KWARG &&
			 list[i]->kind != TN_KWSPREAD) {
			rc = teval(r, list[i], env, &x);
			if (!rc)
				rc = targs_push(r, &v, &nv, &cap, x);
		}
	}
	if (!rc)
		rc = targs_keywords(r, list, n, env, &kw);
	if (!rc && kw.type == TV_UNDEFINED && always_kwargs)
		rc = tv_obj(r, TV_KWARGS, &kw);
	if (!rc && kw.type != TV_UNDEFINED) {
		rc = targs_push(r, &v, &nv, &cap, kw);
		kw = tv_undef();
	}
	tv_drop(r, kw);
	if (rc) {
		tv_drop_all(r, v, nv);
		return rc;
	}
	*out = v;
	*n_out = nv;
	return 0;
}

static bool tnode_uses(const struct tnode *nd, const char *name)
{
	if (!nd)
		return false;
	if (nd->kind == TN_IDENT && strcmp(nd->s, name) == 0)
		return true;
	if (tnode_uses(nd->a, name) || tnode_uses(nd->b, name) ||
	    tnode_uses(nd->c, name))
		return true;
	for (size_t i = 0; i < nd->n; i++)
		if (tnode_uses(nd->list[i], name))
			return true;
	/* a macro's parameters are names it declares, not uses */
	for (size_t i = 0; nd->kind != TN_MACRO && i < nd->n2; i++)
		if (tnode_uses(nd->list2[i], name))
			return true;
	return false;
}

/*
 * kwargs and varargs exist in a macro whose body names them (and has no
 * parameter of that name): runtime.ts's findAccessedSpecialMacroArguments,
 * without its finer point of a set before the use.
 */
static bool tmacro_special(const struct tnode *params_owner,
			   struct tnode *const *body, size_t n,
			   const char *name)
{
	for (size_t i = 0; i < params_owner->n2; i++)
		if (strcmp(params_owner->list2[i]->s, name) == 0)
			return false;
	for (size_t i = 0; i < n; i++)
		if (tnode_uses(body[i], name))
			return true;
	return false;
}

/* bindMacroArguments */
static int tmacro_bind(struct trt *r, const char *name,
		       const struct tnode *owner, const struct tv *args,
		       size_t n, struct tenv *scope)
{
	size_t npos = targ_positional(args, n), i;
	struct tv kw = tv_undef(), x;
	bool pending[64] = { false };
	const struct tnode *p;
	int rc = 0;

	if (owner->n2 > 64)
		return trt_fail(r, "macro %s has too many parameters", name);
	if (npos < n) {
		rc = tv_obj(r, TV_OBJECT, &kw);
		for (i = 0; i < args[n - 1].o->n && !rc; i++) {
			tv_ref(args[n - 1].o->e[i].val);
			rc = tobj_set(r, kw.o, args[n - 1].o->e[i].key->p,
				      args[n - 1].o->e[i].key->len,
				      args[n - 1].o->e[i].val);
		}
	}
	for (i = 0; i < owner->n2 && !rc; i++) {
		p = owner->list2[i];
		x = tv_undef();
		if (i < npos) {
			x = args[i];
			tv_ref(x);
		} else if (kw.type != TV_UNDEFINED &&
			   tobj_get(kw.o, p->s, p->len)) {
			x = *tobj_get(kw.o, p->s, p->len);
			tv_ref(x);
			tobj_del(r, kw.o, p->s, p->len);
		} else if (p->kind == TN_KWARG) {
			pending[i] = true;
		}
		rc = tenv_set(r, scope, p->s, p->len, x);
	}
	if (!rc && tmacro_special(owner, owner->list, owner->n, "kwargs")) {
		if (kw.type == TV_UNDEFINED)
			rc = tv_obj(r, TV_OBJECT, &kw);
		if (!rc)
			rc = tenv_set(r, scope, "kwargs", 6, kw);
		kw = tv_undef();
	} else if (!rc && kw.type != TV_UNDEFINED && kw.o->n) {
		rc = trt_fail(r, "macro %s takes no keyword argument '%s'",
			      name, kw.o->e[0].key->p);
	}
	if (!rc && tmacro_special(owner, owner->list, owner->n, "varargs")) {
		rc = tv_arr(r, TV_ARRAY, 0, &x);
		for (i = owner->n2; i < npos && !rc; i++) {
			tv_ref(args[i]);
			rc = tarr_push(r, x.a, args[i]);
		}
		if (!rc)
			rc = tenv_set(r, scope, "varargs", 7, x);
		else
			tv_drop(r, x);
	} else if (!rc && npos > owner->n2) {
		rc = trt_fail(r, "macro %s takes not more than %zu argument(s)",
			      name, owner->n2);
	}
	tv_drop(r, kw);
	for (i = 0; i < owner->n2 && !rc; i++) {
		if (!pending[i])
			continue;
		p = owner->list2[i];
		rc = teval(r, p->a, scope, &x);
		if (!rc)
			rc = tenv_set(r, scope, p->s, p->len, x);
	}
	return rc;
}

/* A macro or a call block: a new scope under parent, the body rendered. */
static int tcall_body(struct trt *r, const struct tfn *f, struct tenv *parent,
		      const struct tv *args, size_t n, struct tv *out)
{
	const struct tnode *nd = f->node;
	struct tbuf b = { 0 };
	struct tenv *scope;
	int rc = tenv_new(r, parent, &scope);

	if (rc)
		return rc;
	rc = tmacro_bind(r, f->name, nd, args, n, scope);
	if (!rc)
		rc = texec_block(r, nd->list, nd->n, scope, &b);
	if (rc > 0)
		rc = trt_fail(r, "break or continue outside a loop");
	if (!rc)
		rc = tbuf_take(r, &b, out);
	tbuf_free(r, &b);
	tenv_drop(r, scope);
	return rc;
}

int tcall(struct trt *r, const struct tv *fn, const struct tv *args, size_t n,
	  struct tenv *env, struct tv *out)
{
	const struct tfn *f;
	int rc;

	*out = tv_undef();
	if (fn->type != TV_FUNCTION)
		return trt_fail(r,
				"cannot call something that is not a "
				"function: got %s",
				tv_type_name(fn));
	if (r->depth >= TEVAL_MAX_DEPTH)
		return trt_fail(r, "calls nested too deep");
	r->depth++;
	f = fn->f;
	switch (f->kind) {
	case TF_BUILTIN: rc = f->fn(r, &f->self, args, n, env, out); break;
	case TF_MACRO: rc = tcall_body(r, f, env, args, n, out); break;
	default: rc = tcall_body(r, f, f->env, args, n, out); break;
	}
	r->depth--;
	return rc;
}

static int teval_call(struct trt *r, const struct tnode *nd, struct tenv *env,
		      struct tv *out)
{
	struct tv *args, fn;
	size_t n;
	int rc = teval_args(r, nd->list, nd->n, env, false, &args, &n);

	if (rc)
		return rc;
	rc = teval(r, nd->a, env, &fn);
	if (!rc)
		rc = tcall(r, &fn, args, n, env, out);
	tv_drop(r, fn);
	tv_drop_all(r, args, n);
	return rc;
}

/* ---- members and slices ------------------------------------------------ */

/* Python's slice of n items, as utils.ts slice(): the indices, in order. */
static size_t tslice_indices(double n, const struct tv *start,
			     const struct tv *stop, const struct tv *step,
			     long *idx, size_t cap)
{
	double st = step->type == TV_INT ? step->n : 1, a, b;
	int dir = st > 0 ? 1 : st < 0 ? -1 : 0;
	size_t k = 0;

	if (dir >= 0) {
		a = start->type == TV_INT ? start->n : 0;
		b = stop->type == TV_INT ? stop->n : n;
		a = a < 0 ? fmax(n + a, 0) : fmin(a, n);
		b = b < 0 ? fmax(n + b, 0) : fmin(b, n);
	} else {
		a = start->type == TV_INT ? start->n : n - 1;
		b = stop->type == TV_INT ? stop->n : -1;
		a = a < 0 ? fmax(n + a, -1) : fmin(a, n - 1);
		b = b < -1 ? fmax(n + b, -1) : fmin(b, n - 1);
	}
	if (dir == 0)
		return 0;
	for (double i = a; dir * i < dir * b && k < cap; i += st)
		idx[k++] = (long)i;
	return k;
}

static int teval_slice(struct trt *r, const struct tv *obj,
		       const struct tnode *sl, struct tenv *env, struct tv *out)
{
	struct tv part[3] = { tv_undef(), tv_undef(), tv_undef() };
	const struct tnode *nodes[3] = { sl->a, sl->b, sl->c };
	uint32_t *cps = NULL;
	long *idx = NULL;
	size_t n = 0, k, i, len;
	int rc = 0;

	if (!tv_is_array(obj) && obj->type != TV_STRING)
		return trt_fail(r, "slice object must be an array or string");
	for (i = 0; i < 3 && !rc; i++)
		if (nodes[i])
			rc = teval(r, nodes[i], env, &part[i]);
	for (i = 0; i < 3 && !rc; i++)
		if (part[i].type != TV_INT && part[i].type != TV_UNDEFINED)
			rc = trt_fail(r, "slice indices must be integers or "
					 "undefined");
	if (rc)
		goto out;
	if (obj->type == TV_STRING) {
		/* Array.from(string): by code point */
		const char *p = obj->s->p, *e = p + obj->s->len;

		cps = malloc((obj->s->len + 1) * sizeof(*cps));
		if (!cps) {
			rc = err_set(r->err, ENOMEM, "template: out of memory");
			goto out;
		}
		for (; p < e; p += k)
			cps[n++] = tutf8_decode(p, e, &k);
	} else {
		n = obj->a->n;
	}
	idx = malloc((n + 1) * sizeof(*idx));
	if (!idx) {
		rc = err_set(r->err, ENOMEM, "template: out of memory");
		goto out;
	}
	len = tslice_indices((double)n, &part[0], &part[1], &part[2], idx,
			     n + 1);
	if (obj->type == TV_STRING) {
		struct tbuf b = { 0 };
		char u[4];

		for (i = 0; i < len && !rc; i++)
			rc = tbuf_add(r, &b, u, tutf8_encode(cps[idx[i]], u));
		if (!rc)
			rc = tbuf_take(r, &b, out);
		tbuf_free(r, &b);
	} else {
		rc = tv_arr(r, TV_ARRAY, len, out);
		for (i = 0; i < len && !rc; i++) {
			tv_ref(obj->a->v[idx[i]]);
			rc = tarr_push(r, out->a, obj->a->v[idx[i]]);
		}
	}
out:
	free(cps);
	free(idx);
	for (i = 0; i < 3; i++)
		tv_drop(r, part[i]);
	return rc;
}

/* s.at(i) by code point; undefined out of range */
static int tstr_at(struct trt *r, const struct tstr *s, double i,
		   struct tv *out)
{
	const char *p = s->p, *e = p + s->len;
	size_t n = 0, k;
	long want;

	for (const char *q = p; q < e; q += k, n++)
		tutf8_decode(q, e, &k);
	want = (long)trunc(i);
	if (want < 0)
		want += (long)n;
	*out = tv_undef();
	if (want < 0 || (size_t)want >= n)
		return 0;
	for (; want > 0; want--) {
		tutf8_decode(p, e, &k);
		p += k;
	}
	tutf8_decode(p, e, &k);
	return tv_str(r, p, k, out);
}

static int tmember_of(struct trt *r, const struct tv *obj,
		      const struct tv *prop, struct tv *out)
{
	struct tv *v;
	double i;

	*out = tv_undef();
	if (tv_is_container(obj)) {
		if (prop->type != TV_STRING)
			return trt_fail(r,
					"cannot access property with "
					"non-string: got %s",
					tv_type_name(prop));
		v = tobj_get(obj->o, prop->s->p, prop->s->len);
		if (v) {
			*out = *v;
			tv_ref(*out);
			return 0;
		}
		if (obj->type == TV_NAMESPACE)
			return 0;
		return tbuiltin_member(r, obj, prop->s->p, prop->s->len, out);
	}
	if (tv_is_array(obj) || obj->type == TV_STRING) {
		if (prop->type == TV_INT) {
			if (obj->type == TV_STRING)
				return tstr_at(r, obj->s, prop->n, out);
			i = trunc(prop->n);
			if (i < 0)
				i += (double)obj->a->n;
			if (i >= 0 && i < (double)obj->a->n) {
				*out = obj->a->v[(size_t)i];
				tv_ref(*out);
			}
			return 0;
		}
		if (prop->type != TV_STRING)
			return trt_fail(r,
					"cannot access property with "
					"non-string/non-number: got %s",
					tv_type_name(prop));
		return tbuiltin_member(r, obj, prop->s->p, prop->s->len, out);
	}
	if (prop->type != TV_STRING)
		return trt_fail(r,
				"cannot access property with non-string: "
				"got %s",
				tv_type_name(prop));
	return 0; /* numbers, booleans, none, undefined: no members */
}

static int teval_member(struct trt *r, const struct tnode *nd, struct tenv *env,
			struct tv *out)
{
	struct tv obj, prop = tv_undef();
	int rc = teval(r, nd->a, env, &obj);

	if (rc)
		return rc;
	if (nd->flag && nd->b->kind == TN_SLICE) {
		rc = teval_slice(r, &obj, nd->b, env, out);
		tv_drop(r, obj);
		return rc;
	}
	if (nd->flag)
		rc = teval(r, nd->b, env, &prop);
	else if (nd->b->kind == TN_INT)
		prop = tv_int(nd->b->num);
	else
		rc = tv_str(r, nd->b->s, nd->b->len, &prop);
	if (!rc)
		rc = tmember_of(r, &obj, &prop, out);
	tv_drop(r, prop);
	tv_drop(r, obj);
	return rc;
}

/* ---- operators --------------------------------------------------------- */

static bool tv_numeric_like(const struct tv *v)
{
	return tv_is_number(v) || v->type == TV_BOOL;
}

static double tv_num(const struct tv *v)
{
	return v->type == TV_BOOL ? (double)v->b : v->n;
}

static int tconcat(struct trt *r, const struct tv *a, const struct tv *b,
		   struct tv *out)
{
	struct tbuf buf = { 0 };
	int rc = tv_js_string(r, a, &buf);

	if (!rc)
		rc = tv_js_string(r, b, &buf);
	if (!rc)
		rc = tbuf_take(r, &buf, out);
	tbuf_free(r, &buf);
	return rc;
}

static int tpow(struct trt *r, const struct tv *a, const struct tv *b,
		struct tv *out)
{
	double x = tv_num(a), y = tv_num(b), z;

	if (x == 0 && y < 0)
		return trt_fail(r, "0.0 cannot be raised to a negative power");
	z = pow(x, y);
	if (!isfinite(z))
		return trt_fail(r, "exponentiation result is not a finite "
				   "real number");
	*out = a->type == TV_FLOAT || b->type == TV_FLOAT || y < 0 ?
		       tv_float(z) :
		       tv_int(z);
	return 0;
}

/* both numbers; *done when op applies to them */
static bool tarith(enum top op, const struct tv *a, const struct tv *b,
		   struct tv *out)
{
	bool f = a->type == TV_FLOAT || b->type == TV_FLOAT;
	double x = a->n, y = b->n;

	switch (op) {
	case TOP_ADD: *out = f ? tv_float(x + y) : tv_int(x + y); return true;
	case TOP_SUB: *out = f ? tv_float(x - y) : tv_int(x - y); return true;
	case TOP_MUL: *out = f ? tv_float(x * y) : tv_int(x * y); return true;
	case TOP_DIV: *out = tv_float(x / y); return true;
	case TOP_FLOORDIV:
		*out = f ? tv_float(floor(x / y)) : tv_int(floor(x / y));
		return true;
	case TOP_MOD:
		*out = f ? tv_float(fmod(x, y)) : tv_int(fmod(x, y));
		return true;
	case TOP_LT: *out = tv_bool(x < y); return true;
	case TOP_GT: *out = tv_bool(x > y); return true;
	case TOP_GE: *out = tv_bool(x >= y); return true;
	case TOP_LE: *out = tv_bool(x <= y); return true;
	default: return false;
	}
}

static bool tstr_contains(const struct tstr *hay, const struct tstr *needle)
{
	return needle->len == 0 ||
	       memmem(hay->p, hay->len, needle->p, needle->len) != NULL;
}

static const char *top_name(enum top op)
{
	static const char *const names[] = {
		[TOP_EQ] = "==",   [TOP_NE] = "!=",	    [TOP_LT] = "<",
		[TOP_GT] = ">",	   [TOP_LE] = "<=",	    [TOP_GE] = ">=",
		[TOP_IN] = "in",   [TOP_NOT_IN] = "not in", [TOP_ADD] = "+",
		[TOP_SUB] = "-",   [TOP_CONCAT] = "~",	    [TOP_MUL] = "*",
		[TOP_DIV] = "/",   [TOP_FLOORDIV] = "//",   [TOP_MOD] = "%",
		[TOP_POW] = "**",  [TOP_AND] = "and",	    [TOP_OR] = "or",
		[TOP_NOT] = "not", [TOP_NONE] = "?",
	};

	return names[op];
}

/* evaluateBinaryExpression after and/or/==/!=, in runtime.ts's order */
static int tbinary(struct trt *r, enum top op, const struct tv *a,
		   const struct tv *b, struct tv *out)
{
	bool in = op == TOP_IN || op == TOP_NOT_IN, found = false;

	if (a->type == TV_UNDEFINED || b->type == TV_UNDEFINED) {
		if (b->type == TV_UNDEFINED && in) {
			*out = tv_bool(op == TOP_NOT_IN);
			return 0;
		}
		return trt_fail(r,
				"cannot perform operation %s on undefined "
				"values",
				top_name(op));
	}
	if (a->type == TV_NULL || b->type == TV_NULL)
		return trt_fail(r, "cannot perform operation on null values");
	if (op == TOP_CONCAT)
		return tconcat(r, a, b, out);
	if (op == TOP_POW && tv_numeric_like(a) && tv_numeric_like(b))
		return tpow(r, a, b, out);
	if (tv_is_number(a) && tv_is_number(b)) {
		if (tarith(op, a, b, out))
			return 0;
	} else if (tv_is_array(a) && tv_is_array(b)) {
		if (op == TOP_ADD) {
			int rc = tv_arr(r, TV_ARRAY, a->a->n + b->a->n, out);

			for (size_t i = 0; i < a->a->n + b->a->n && !rc; i++) {
				struct tv x = i < a->a->n ?
						      a->a->v[i] :
						      b->a->v[i - a->a->n];

				tv_ref(x);
				rc = tarr_push(r, out->a, x);
			}
			return rc;
		}
	} else if (tv_is_array(b)) {
		if (in) {
			for (size_t i = 0; i < b->a->n && !found; i++)
				found = tv_strict_equal(&b->a->v[i], a);
			*out = tv_bool(found == (op == TOP_IN));
			return 0;
		}
	}
	if ((a->type == TV_STRING || b->type == TV_STRING) && op == TOP_ADD)
		return tconcat(r, a, b, out);
	if (a->type == TV_STRING && b->type == TV_STRING && in) {
		*out = tv_bool(tstr_contains(b->s, a->s) == (op == TOP_IN));
		return 0;
	}
	if (a->type == TV_STRING && tv_is_object(b) && in) {
		found = tobj_get(b->o, a->s->p, a->s->len) != NULL;
		*out = tv_bool(found == (op == TOP_IN));
		return 0;
	}
	return trt_fail(r, "unknown operator \"%s\" between %s and %s",
			top_name(op), tv_type_name(a), tv_type_name(b));
}

static int teval_binary(struct trt *r, const struct tnode *nd, struct tenv *env,
			struct tv *out)
{
	struct tv a, b;
	int rc = teval(r, nd->a, env, &a);

	if (rc)
		return rc;
	if (nd->op == TOP_AND || nd->op == TOP_OR) {
		if (tv_truthy(&a) == (nd->op == TOP_OR)) {
			*out = a;
			return 0;
		}
		tv_drop(r, a);
		return teval(r, nd->b, env, out);
	}
	rc = teval(r, nd->b, env, &b);
	if (rc) {
		tv_drop(r, a);
		return rc;
	}
	if (nd->op == TOP_EQ || nd->op == TOP_NE)
		*out = tv_bool(tv_loose_equal(r, &a, &b) == (nd->op == TOP_EQ));
	else
		rc = tbinary(r, (enum top)nd->op, &a, &b, out);
	tv_drop(r, a);
	tv_drop(r, b);
	return rc;
}

static int teval_unary(struct trt *r, const struct tnode *nd, struct tenv *env,
		       struct tv *out)
{
	struct tv a;
	double x;
	int rc = teval(r, nd->a, env, &a);

	if (rc)
		return rc;
	if (nd->op == TOP_NOT) {
		*out = tv_bool(!tv_truthy(&a));
	} else if (tv_numeric_like(&a)) {
		x = (nd->op == TOP_SUB ? -1 : 1) * tv_num(&a);
		*out = a.type == TV_FLOAT ? tv_float(x) : tv_int(x);
	} else {
		rc = trt_fail(r, "unknown operator \"%s\" for %s",
			      top_name((enum top)nd->op), tv_type_name(&a));
	}
	tv_drop(r, a);
	return rc;
}

static int teval_list(struct trt *r, const struct tnode *nd, struct tenv *env,
		      struct tv *out)
{
	struct tv x;
	int rc = tv_arr(r, nd->kind == TN_TUPLE ? TV_TUPLE : TV_ARRAY, nd->n,
			out);

	for (size_t i = 0; i < nd->n && !rc; i++) {
		rc = teval(r, nd->list[i], env, &x);
		if (!rc)
			rc = tarr_push(r, out->a, x);
	}
	return rc;
}

static int teval_object(struct trt *r, const struct tnode *nd, struct tenv *env,
			struct tv *out)
{
	struct tv k, v;
	int rc = tv_obj(r, TV_OBJECT, out);

	for (size_t i = 0; i + 1 < nd->n && !rc; i += 2) {
		rc = teval(r, nd->list[i], env, &k);
		if (rc)
			break;
		if (k.type != TV_STRING) {
			rc = trt_fail(r, "object keys must be strings: got %s",
				      tv_type_name(&k));
			tv_drop(r, k);
			break;
		}
		rc = teval(r, nd->list[i + 1], env, &v);
		if (!rc)
			rc = tobj_set(r, out->o, k.s->p, k.s->len, v);
		tv_drop(r, k);
	}
	return rc;
}

static int teval_test(struct trt *r, const struct tnode *nd, struct tenv *env,
		      struct tv *out)
{
	struct tv a;
	bool result = false;
	int rc = teval(r, nd->a, env, &a);

	if (rc)
		return rc;
	rc = ttest_apply(r, nd->s, &a, NULL, &result);
	tv_drop(r, a);
	*out = tv_bool(result != nd->flag);
	return rc;
}

static int teval_cond(struct trt *r, const struct tnode *nd, struct tenv *env,
		      struct tv *out)
{
	struct tv c;
	bool t;
	int rc = teval(r, nd->kind == TN_SELECT ? nd->b : nd->a, env, &c);

	if (rc)
		return rc;
	t = tv_truthy(&c);
	tv_drop(r, c);
	if (nd->kind == TN_SELECT) {
		*out = tv_undef();
		return t ? teval(r, nd->a, env, out) : 0;
	}
	return teval(r, t ? nd->b : nd->c, env, out);
}

int teval(struct trt *r, const struct tnode *nd, struct tenv *env,
	  struct tv *out)
{
	struct tv *v, operand;
	int rc;

	*out = tv_undef();
	rc = tstep(r);
	if (rc)
		return rc;
	switch (nd->kind) {
	case TN_TEXT:
	case TN_STRING: return tv_str(r, nd->s, nd->len, out);
	case TN_INT: *out = tv_int(nd->num); return 0;
	case TN_FLOAT: *out = tv_float(nd->num); return 0;
	case TN_IDENT:
		v = tenv_lookup(env, nd->s, nd->len);
		if (v) {
			*out = *v;
			tv_ref(*out);
		}
		return 0;
	case TN_ARRAY:
	case TN_TUPLE: return teval_list(r, nd, env, out);
	case TN_OBJECT: return teval_object(r, nd, env, out);
	case TN_MEMBER: return teval_member(r, nd, env, out);
	case TN_CALL: return teval_call(r, nd, env, out);
	case TN_BINARY: return teval_binary(r, nd, env, out);
	case TN_UNARY: return teval_unary(r, nd, env, out);
	case TN_FILTER:
		rc = teval(r, nd->a, env, &operand);
		if (rc)
			return rc;
		return tfilter_apply(r, operand, nd->b, env, out);
	case TN_TEST: return teval_test(r, nd, env, out);
	case TN_SELECT:
	case TN_TERNARY: return teval_cond(r, nd, env, out);
	case TN_COMMENT: *out = tv_null(); return 0;
	default:
		return trt_fail(r, "unexpected expression near '%.24s'",
				nd->at);
	}
}

/* ---- statements -------------------------------------------------------- */

static int tassign(struct trt *r, const struct tnode *target, struct tv v,
		   struct tenv *env);

static int tassign_tuple(struct trt *r, const struct tnode *target, struct tv v,
			 struct tenv *env)
{
	int rc = 0;

	if (!tv_is_array(&v))
		rc = trt_fail(r, "cannot unpack non-iterable type in set: %s",
			      tv_type_name(&v));
	else if (v.a->n != target->n)
		rc = trt_fail(r, "too %s items to unpack in set",
			      target->n > v.a->n ? "few" : "many");
	for (size_t i = 0; i < target->n && !rc; i++) {
		if (target->list[i]->kind != TN_IDENT) {
			rc = trt_fail(r, "cannot unpack to non-identifier in "
					 "set");
			break;
		}
		tv_ref(v.a->v[i]);
		rc = tenv_set(r, env, target->list[i]->s, target->list[i]->len,
			      v.a->v[i]);
	}
	tv_drop(r, v);
	return rc;
}

/* set: takes over v */
static int tassign(struct trt *r, const struct tnode *target, struct tv v,
		   struct tenv *env)
{
	struct tv ns;
	int rc;

	switch (target->kind) {
	case TN_IDENT: return tenv_set(r, env, target->s, target->len, v);
	case TN_TUPLE: return tassign_tuple(r, target, v, env);
	case TN_MEMBER:
		rc = teval(r, target->a, env, &ns);
		if (!rc && ns.type != TV_NAMESPACE)
			rc = trt_fail(r, "cannot assign attribute on "
					 "non-namespace object");
		else if (!rc && target->b->kind != TN_IDENT)
			rc = trt_fail(r, "cannot assign to member with "
					 "non-identifier property");
		if (!rc) {
			rc = tobj_set(r, ns.o, target->b->s, target->b->len, v);
			v = tv_undef();
		}
		tv_drop(r, ns);
		tv_drop(r, v);
		return rc;
	default:
		tv_drop(r, v);
		return trt_fail(r, "invalid target of set near '%.24s'",
				target->at);
	}
}

static int texec_set(struct trt *r, const struct tnode *nd, struct tenv *env)
{
	struct tbuf b = { 0 };
	struct tv v;
	int rc;

	if (nd->b) {
		rc = teval(r, nd->b, env, &v);
	} else {
		rc = texec_block(r, nd->list, nd->n, env, &b);
		if (!rc)
			rc = tbuf_take(r, &b, &v);
		tbuf_free(r, &b);
	}
	if (rc)
		return rc;
	return tassign(r, nd->a, v, env);
}

/* for's loop variables for item x, in scope */
static int tloop_bind(struct trt *r, const struct tnode *var,
		      const struct tv *x, struct tenv *scope)
{
	int rc = 0;

	if (var->kind == TN_IDENT) {
		tv_ref(*x);
		return tenv_set(r, scope, var->s, var->len, *x);
	}
	if (x->type != TV_ARRAY)
		return trt_fail(r, "cannot unpack non-iterable type: %s",
				tv_type_name(x));
	if (var->n != x->a->n)
		return trt_fail(r, "too %s items to unpack",
				var->n > x->a->n ? "few" : "many");
	for (size_t j = 0; j < var->n && !rc; j++) {
		if (var->list[j]->kind != TN_IDENT)
			return trt_fail(r, "cannot unpack non-identifier type");
		tv_ref(x->a->v[j]);
		rc = tenv_set(r, scope, var->list[j]->s, var->list[j]->len,
			      x->a->v[j]);
	}
	return rc;
}

/* The items the loop runs over: iterable (keys of an object), filtered. */
static int tloop_items(struct trt *r, const struct tnode *nd,
		       struct tenv *scope, struct tv *items)
{
	const struct tnode *test = NULL, *src = nd->b;
	struct tv it, c;
	struct tenv *ls;
	int rc;

	if (src->kind == TN_SELECT) {
		test = src->b;
		src = src->a;
	}
	rc = teval(r, src, scope, &it);
	if (rc)
		return rc;
	if (!tv_is_array(&it) && !tv_is_object(&it)) {
		rc = trt_fail(r,
			      "expected iterable or object type in for "
			      "loop: got %s",
			      tv_type_name(&it));
		tv_drop(r, it);
		return rc;
	}
	if (tv_is_array(&it) && !test) {
		*items = it;
		return 0;
	}
	rc = tv_arr(r, TV_ARRAY, 0, items);
	for (size_t i = 0; !rc && i < (tv_is_array(&it) ? it.a->n : it.o->n);
	     i++) {
		struct tv x;

		rc = tstep(r);
		if (rc)
			break;

		if (tv_is_array(&it)) {
			x = it.a->v[i];
			tv_ref(x);
		} else {
			rc = tv_str(r, it.o->e[i].key->p, it.o->e[i].key->len,
				    &x);
			if (rc)
				break;
		}
		if (test) {
			rc = tenv_new(r, scope, &ls);
			if (!rc)
				rc = tloop_bind(r, nd->a, &x, ls);
			if (!rc)
				rc = teval(r, test, ls, &c);
			tenv_drop(r, ls);
			if (!rc && !tv_truthy(&c)) {
				tv_drop(r, c);
				tv_drop(r, x);
				continue;
			}
			if (!rc)
				tv_drop(r, c);
		}
		if (!rc)
			rc = tarr_push(r, items->a, x);
		else
			tv_drop(r, x);
	}
	tv_drop(r, it);
	return rc;
}

/* The names of loop's attributes, made once per for statement. */
enum { TLOOP_KEYS = 9 };
static const char *const tloop_names[TLOOP_KEYS] = {
	"index", "index0", "revindex", "revindex0", "first",
	"last",	 "length", "previtem", "nextitem",
};

static int tloop_object(struct trt *r, struct tv *keys,
			const struct tarr *items, size_t i, struct tv *out)
{
	size_t n = items->n;
	struct tv v[TLOOP_KEYS] = {
		tv_int((double)i + 1),
		tv_int((double)i),
		tv_int((double)(n - i)),
		tv_int((double)(n - i - 1)),
		tv_bool(i == 0),
		tv_bool(i + 1 == n),
		tv_int((double)n),
		i > 0 ? items->v[i - 1] : tv_undef(),
		i + 1 < n ? items->v[i + 1] : tv_undef(),
	};
	int rc = tv_obj_cap(r, TV_OBJECT, TLOOP_KEYS, out);

	/* the keys differ: no lookup needed, and no growing */
	for (size_t k = 0; k < TLOOP_KEYS && !rc; k++) {
		tv_ref(v[k]);
		keys[k].s->h.refs++;
		out->o->e[k].key = keys[k].s;
		out->o->e[k].val = v[k];
		out->o->n++;
	}
	return rc;
}

static int texec_for(struct trt *r, const struct tnode *nd, struct tenv *env,
		     struct tbuf *out)
{
	struct tenv *scope;
	struct tv items = tv_undef(), loop, keys[TLOOP_KEYS];
	bool none = true;
	size_t mark, k;
	int rc = tenv_new(r, env, &scope);

	for (k = 0; k < TLOOP_KEYS; k++)
		keys[k] = tv_undef();
	for (k = 0; k < TLOOP_KEYS && !rc; k++)
		rc = tv_str0(r, tloop_names[k], &keys[k]);
	if (!rc)
		rc = tloop_items(r, nd, scope, &items);
	for (size_t i = 0; !rc && i < items.a->n; i++) {
		rc = tstep(r);
		if (!rc)
			rc = tloop_object(r, keys, items.a, i, &loop);
		if (!rc)
			rc = tenv_set(r, scope, "loop", 4, loop);
		if (!rc)
			rc = tloop_bind(r, nd->a, &items.a->v[i], scope);
		if (rc)
			break;
		mark = out->len;
		rc = texec_block(r, nd->list, nd->n, scope, out);
		if (rc == TR_CONTINUE || rc == TR_BREAK) {
			out->len = mark;
			if (out->p)
				out->p[mark] = '\0';
			if (rc == TR_BREAK) {
				rc = 0;
				break;
			}
			rc = 0;
			continue;
		}
		none = false;
	}
	if (!rc && none)
		rc = texec_block(r, nd->list2, nd->n2, scope, out);
	for (k = 0; k < TLOOP_KEYS; k++)
		tv_drop(r, keys[k]);
	tv_drop(r, items);
	tenv_drop(r, scope);
	return rc;
}

static int texec_macro(struct trt *r, const struct tnode *nd, struct tenv *env)
{
	struct tv f;
	int rc = tv_builtin(r, nd->s, NULL, NULL, &f);

	if (rc)
		return rc;
	f.f->kind = TF_MACRO;
	f.f->node = nd;
	return tenv_set(r, env, nd->s, nd->len, f);
}

/* {% call(params) m(args) %}body{% endcall %}: m runs with caller() */
static int texec_call(struct trt *r, const struct tnode *nd, struct tenv *env,
		      struct tv *out)
{
	const struct tnode *call = nd->a;
	struct tv caller, *args = NULL, fn = tv_undef();
	struct tenv *inner = NULL;
	size_t n = 0;
	int rc = tv_builtin(r, "caller", NULL, NULL, &caller);

	if (rc)
		return rc;
	caller.f->kind = TF_CALLER;
	caller.f->node = nd;
	caller.f->env = env;
	env->h.refs++;
	rc = teval_args(r, call->list, call->n, env, true, &args, &n);
	if (!rc)
		rc = teval(r, call->a, env, &fn);
	if (!rc && fn.type != TV_FUNCTION)
		rc = trt_fail(r,
			      "cannot call something that is not a "
			      "function: got %s",
			      tv_type_name(&fn));
	if (!rc)
		rc = tenv_new(r, env, &inner);
	if (!rc) {
		rc = tenv_set(r, inner, "caller", 6, caller);
		caller = tv_undef();
	}
	if (!rc)
		rc = tcall(r, &fn, args, n, inner, out);
	tenv_drop(r, inner);
	tv_drop(r, fn);
	tv_drop(r, caller);
	tv_drop_all(r, args, n);
	return rc;
}

static int texec_filter(struct trt *r, const struct tnode *nd, struct tenv *env,
			struct tv *out)
{
	struct tbuf b = { 0 };
	struct tv s;
	int rc = texec_block(r, nd->list, nd->n, env, &b);

	if (!rc)
		rc = tbuf_take(r, &b, &s);
	tbuf_free(r, &b);
	if (rc)
		return rc;
	return tfilter_apply(r, s, nd->a, env, out);
}

static int texec_one(struct trt *r, const struct tnode *nd, struct tenv *env,
		     struct tbuf *out)
{
	struct tv v = tv_undef(), c;
	bool truth;
	int rc;

	switch (nd->kind) {
	case TN_TEXT: return tbuf_add(r, out, nd->s, nd->len);
	case TN_COMMENT: return 0;
	case TN_SET: return texec_set(r, nd, env);
	case TN_MACRO: return texec_macro(r, nd, env);
	case TN_BREAK: return TR_BREAK;
	case TN_CONTINUE: return TR_CONTINUE;
	case TN_FOR: return texec_for(r, nd, env, out);
	case TN_IF:
		rc = teval(r, nd->a, env, &c);
		if (rc)
			return rc;
		truth = tv_truthy(&c);
		tv_drop(r, c);
		return truth ? texec_block(r, nd->list, nd->n, env, out) :
			       texec_block(r, nd->list2, nd->n2, env, out);
	case TN_CALL_STMT: rc = texec_call(r, nd, env, &v); break;
	case TN_FILTER_STMT: rc = texec_filter(r, nd, env, &v); break;
	default: rc = teval(r, nd, env, &v); break;
	}
	if (!rc && v.type != TV_NULL && v.type != TV_UNDEFINED)
		rc = tv_print(r, &v, out);
	tv_drop(r, v);
	return rc;
}

int texec_block(struct trt *r, struct tnode *const *list, size_t n,
		struct tenv *env, struct tbuf *out)
{
	int rc = 0;

	if (r->depth >= TEVAL_MAX_DEPTH)
		return trt_fail(r, "blocks nested too deep");
	r->depth++;
	for (size_t i = 0; i < n && !rc; i++)
		rc = texec_one(r, list[i], env, out);
	r->depth--;
	return rc;
}
