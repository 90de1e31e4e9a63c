// SPDX-License-Identifier: MIT
/*
 * Statements, each writing into the output buffer of its block, by
 * runtime.ts's Interpreter. What a reader of Python Jinja2 would not
 * expect, and runtime.ts does:
 *
 *   - a for loop has one scope for all its iterations: a set inside it
 *     lasts to the next iteration, not past the loop; its else block runs
 *     when no iteration ended normally (break and continue included);
 *   - the text an iteration wrote before a break or continue is dropped
 *     (the JavaScript exception discards it);
 *   - a set of ns.attr works on namespaces only.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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
