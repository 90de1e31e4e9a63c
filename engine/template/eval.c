// SPDX-License-Identifier: MIT
/*
 * Expressions: each returns a new reference, by @huggingface/jinja's
 * runtime.ts (Interpreter). What a reader of Python Jinja2 would not
 * expect, and runtime.ts does:
 *
 *   - == is JavaScript's loose equality (1 == "1", undefined == none),
 *     "in" a list is strict equality;
 *   - undefined.attribute is undefined, not an error;
 *   - + of a string and anything is concatenation, ~ uses the JavaScript
 *     value's toString ("a" ~ 2.0 is "a2").
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int tstep(struct trt *r)
{
	if (++r->steps > r->max_steps)
		return trt_fail(r,
				"the template runs too long (more than %llu "
				"steps)",
				(unsigned long long)r->max_steps);
	return 0;
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
