// SPDX-License-Identifier: MIT
/*
 * Calls: the arguments of a call (positional, *spread, keyword, **spread,
 * as runtime.ts's evaluateArguments orders them), and what a call runs: a
 * builtin (builtins.c), a macro (its body in a scope under the caller's
 * environment: runtime.ts binds macros dynamically) or a call block's
 * caller() (its body under the block's environment).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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

int teval_call(struct trt *r, const struct tnode *nd, struct tenv *env,
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
