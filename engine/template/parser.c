// SPDX-License-Identifier: MIT
/*
 * Tokens -> tree, by @huggingface/jinja's parser.ts (recursive descent,
 * the same grammar and precedence, lowest first):
 *
 *   a if cond else b  |  a if cond (select: undefined when false)
 *   or, and, not
 *   in, not in, == != < > <= >=   (one level, left to right)
 *   + - ~
 *   * / // %
 *   **                             (left-associative, as Jinja2)
 *   is [not] test
 *   | filter, | filter(args)
 *   unary - +
 *   calls, .attr, [index], [a:b:c]
 *   literals, names, (expr), (a, b), [list], {key: value}
 *
 * Statements: set (also {% set x %}...{% endset %}), if/elif/else, for
 * (with "if" filter and else), macro, call, filter, break, continue.
 * Nodes live in the template's arena.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int tp_fail(struct tparser *p, const char *what)
{
	const char *at = p->cur < p->n ? p->tok[p->cur].at :
			 p->n	       ? p->tok[p->n - 1].at :
					 "";

	return err_set(p->err, EINVAL, "template: %s near '%.24s'", what, at);
}

int tp_nomem(struct tparser *p)
{
	return err_set(p->err, ENOMEM, "template: out of memory");
}

struct tnode *tp_node(struct tparser *p, enum tnode_kind kind)
{
	struct tnode *nd = tarena_alloc(p->arena, sizeof(*nd));

	if (!nd)
		return NULL;
	memset(nd, 0, sizeof(*nd));
	nd->kind = (uint8_t)kind;
	nd->at = p->cur < p->n ? p->tok[p->cur].at :
		 p->n	       ? p->tok[p->n - 1].at :
				 "";
	return nd;
}

int tlist_add(struct tparser *p, struct tlist *l, struct tnode *nd)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		struct tnode **v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return tp_nomem(p);
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = nd;
	return 0;
}

/* Move the list into the arena: *out, *n; the list is emptied. */
int tlist_done(struct tparser *p, struct tlist *l, struct tnode ***out,
	       size_t *n)
{
	*out = NULL;
	*n = l->n;
	if (l->n) {
		*out = tarena_alloc(p->arena, l->n * sizeof(**out));
		if (!*out) {
			free(l->v);
			return tp_nomem(p);
		}
		memcpy(*out, l->v, l->n * sizeof(**out));
	}
	free(l->v);
	*l = (struct tlist){ 0 };
	return 0;
}

bool tp_is(const struct tparser *p, enum ttok_type t)
{
	return p->cur < p->n && p->tok[p->cur].type == t;
}

bool tp_ident_at(const struct tparser *p, size_t i, const char *name)
{
	return i < p->n && p->tok[i].type == TT_IDENT &&
	       strcmp(p->tok[i].s, name) == 0;
}

bool tp_ident(const struct tparser *p, const char *name)
{
	return tp_ident_at(p, p->cur, name);
}

/* {% name ... with name one of the list (NULL-terminated) */
bool tp_statement(const struct tparser *p, const char *const *names)
{
	if (!tp_is(p, TT_OPEN_STMT))
		return false;
	for (; *names; names++)
		if (tp_ident_at(p, p->cur + 1, *names))
			return true;
	return false;
}

int tp_expect(struct tparser *p, enum ttok_type t, const char *what)
{
	if (!tp_is(p, t))
		return tp_fail(p, what);
	p->cur++;
	return 0;
}

int tp_expect_ident(struct tparser *p, const char *name)
{
	if (!tp_ident(p, name))
		return tp_fail(p, name);
	p->cur++;
	return 0;
}

/* {% NAME %} */
int tp_end_tag(struct tparser *p, const char *name)
{
	int rc = tp_expect(p, TT_OPEN_STMT, "expected {%");

	if (!rc)
		rc = tp_expect_ident(p, name);
	if (!rc)
		rc = tp_expect(p, TT_CLOSE_STMT, "expected %}");
	return rc;
}

/* ---- expressions ------------------------------------------------------- */

static enum top tp_op(const struct ttok *t)
{
	static const struct {
		const char *s;
		enum top op;
	} ops[] = {
		{ "==", TOP_EQ }, { "!=", TOP_NE },   { "<", TOP_LT },
		{ ">", TOP_GT },  { "<=", TOP_LE },   { ">=", TOP_GE },
		{ "+", TOP_ADD }, { "-", TOP_SUB },   { "~", TOP_CONCAT },
		{ "*", TOP_MUL }, { "/", TOP_DIV },   { "//", TOP_FLOORDIV },
		{ "%", TOP_MOD }, { "**", TOP_POW },  { "and", TOP_AND },
		{ "or", TOP_OR }, { "not", TOP_NOT }, { "in", TOP_IN },
	};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(t->s, ops[i].s) == 0)
			return ops[i].op;
	return TOP_NONE;
}

static int tp_binary(struct tparser *p, enum top op, struct tnode *a,
		     struct tnode *b, struct tnode **out)
{
	struct tnode *nd = tp_node(p, TN_BINARY);

	if (!nd)
		return tp_nomem(p);
	nd->op = (uint8_t)op;
	nd->a = a;
	nd->b = b;
	*out = nd;
	return 0;
}

/* The slice or index inside [ ]; the bracket is already consumed. */
static int tp_member_args(struct tparser *p, struct tnode **out)
{
	struct tnode *slices[4] = { 0 }, *nd;
	size_t n = 0;
	bool is_slice = false;
	int rc;

	while (!tp_is(p, TT_RBRACKET)) {
		if (p->cur >= p->n)
			return tp_fail(p, "expected ]");
		if (n == 4)
			return tp_fail(p, "expected 0-3 arguments for a slice");
		if (tp_is(p, TT_COLON)) {
			slices[n++] = NULL;
			p->cur++;
			is_slice = true;
			continue;
		}
		rc = tp_expression(p, &slices[n++]);
		if (rc)
			return rc;
		if (tp_is(p, TT_COLON)) {
			p->cur++;
			is_slice = true;
		}
	}
	if (!n)
		return tp_fail(p, "expected an index or a slice");
	if (!is_slice) {
		*out = slices[0];
		return 0;
	}
	if (n > 3)
		return tp_fail(p, "expected 0-3 arguments for a slice");
	nd = tp_node(p, TN_SLICE);
	if (!nd)
		return tp_nomem(p);
	nd->a = slices[0];
	nd->b = slices[1];
	nd->c = slices[2];
	*out = nd;
	return 0;
}

static int tp_member(struct tparser *p, struct tnode *object,
		     struct tnode **out)
{
	struct tnode *nd, *prop;
	bool computed;
	int rc;

	while (tp_is(p, TT_DOT) || tp_is(p, TT_LBRACKET)) {
		computed = tp_is(p, TT_LBRACKET);
		p->cur++;
		if (computed) {
			rc = tp_member_args(p, &prop);
			if (!rc)
				rc = tp_expect(p, TT_RBRACKET, "expected ]");
		} else {
			rc = tp_primary(p, &prop);
			if (!rc && prop->kind != TN_IDENT &&
			    prop->kind != TN_INT)
				rc = tp_fail(p, "expected a name after '.'");
		}
		if (rc)
			return rc;
		nd = tp_node(p, TN_MEMBER);
		if (!nd)
			return tp_nomem(p);
		nd->a = object;
		nd->b = prop;
		nd->flag = computed;
		object = nd;
	}
	*out = object;
	return 0;
}

int tp_call(struct tparser *p, struct tnode *callee, struct tnode **out)
{
	struct tnode *nd = tp_node(p, TN_CALL);
	int rc;

	if (!nd)
		return tp_nomem(p);
	nd->a = callee;
	rc = tp_args(p, false, &nd->list, &nd->n);
	if (!rc)
		rc = tp_member(p, nd, out);
	if (!rc && tp_is(p, TT_LPAREN))
		rc = tp_call(p, *out, out);
	return rc;
}

static int tp_call_member(struct tparser *p, struct tnode **out)
{
	struct tnode *nd;
	int rc = tp_primary(p, &nd);

	if (!rc)
		rc = tp_member(p, nd, out);
	if (!rc && tp_is(p, TT_LPAREN))
		rc = tp_call(p, *out, out);
	return rc;
}

static int tp_unary_sign(struct tparser *p, struct tnode **out)
{
	struct tnode *nd;
	int rc;

	if (p->cur < p->n &&
	    (p->tok[p->cur].type == TT_UNARY ||
	     p->tok[p->cur].type == TT_ADD) &&
	    (strcmp(p->tok[p->cur].s, "-") == 0 ||
	     strcmp(p->tok[p->cur].s, "+") == 0)) {
		nd = tp_node(p, TN_UNARY);
		if (!nd)
			return tp_nomem(p);
		nd->op = p->tok[p->cur].s[0] == '-' ? TOP_SUB : TOP_ADD;
		p->cur++;
		if (++p->depth > TPARSE_MAX_DEPTH)
			return tp_fail(p, "nested too deep");
		rc = tp_unary_sign(p, &nd->a);
		p->depth--;
		*out = nd;
		return rc;
	}
	return tp_call_member(p, out);
}

static int tp_filter(struct tparser *p, struct tnode **out)
{
	struct tnode *operand = NULL, *filter, *nd;
	int rc = tp_unary_sign(p, &operand);

	while (!rc && tp_is(p, TT_PIPE)) {
		p->cur++;
		rc = tp_primary(p, &filter);
		if (rc)
			return rc;
		if (filter->kind != TN_IDENT)
			return tp_fail(p, "expected a filter name");
		if (tp_is(p, TT_LPAREN)) {
			rc = tp_call(p, filter, &filter);
			if (rc)
				return rc;
		}
		nd = tp_node(p, TN_FILTER);
		if (!nd)
			return tp_nomem(p);
		nd->a = operand;
		nd->b = filter;
		operand = nd;
	}
	*out = operand;
	return rc;
}

static int tp_test(struct tparser *p, struct tnode **out)
{
	struct tnode *operand = NULL, *name, *nd;
	bool negate;
	int rc = tp_filter(p, &operand);

	while (!rc && tp_ident(p, "is")) {
		p->cur++;
		negate = tp_ident(p, "not");
		if (negate)
			p->cur++;
		rc = tp_primary(p, &name);
		if (rc)
			return rc;
		if (name->kind != TN_IDENT)
			return tp_fail(p, "expected a test name");
		nd = tp_node(p, TN_TEST);
		if (!nd)
			return tp_nomem(p);
		nd->a = operand;
		nd->s = name->s;
		nd->len = name->len;
		nd->flag = negate;
		operand = nd;
	}
	*out = operand;
	return rc;
}

static int tp_power(struct tparser *p, struct tnode **out)
{
	struct tnode *left = NULL, *right;
	int rc = tp_test(p, &left);

	while (!rc && tp_is(p, TT_POW)) {
		p->cur++;
		rc = tp_test(p, &right);
		if (!rc)
			rc = tp_binary(p, TOP_POW, left, right, &left);
	}
	*out = left;
	return rc;
}

static int tp_multiplicative(struct tparser *p, struct tnode **out)
{
	struct tnode *left = NULL, *right;
	enum top op;
	int rc = tp_power(p, &left);

	while (!rc && tp_is(p, TT_MUL)) {
		op = tp_op(&p->tok[p->cur++]);
		rc = tp_power(p, &right);
		if (!rc)
			rc = tp_binary(p, op, left, right, &left);
	}
	*out = left;
	return rc;
}

static int tp_additive(struct tparser *p, struct tnode **out)
{
	struct tnode *left = NULL, *right;
	enum top op;
	int rc = tp_multiplicative(p, &left);

	while (!rc && tp_is(p, TT_ADD)) {
		op = tp_op(&p->tok[p->cur++]);
		rc = tp_multiplicative(p, &right);
		if (!rc)
			rc = tp_binary(p, op, left, right, &left);
	}
	*out = left;
	return rc;
}

static int tp_comparison(struct tparser *p, struct tnode **out)
{
	struct tnode *left = NULL, *right;
	enum top op;
	int rc = tp_additive(p, &left);

	while (!rc) {
		if (tp_ident(p, "not") && tp_ident_at(p, p->cur + 1, "in")) {
			op = TOP_NOT_IN;
			p->cur += 2;
		} else if (tp_ident(p, "in")) {
			op = TOP_IN;
			p->cur++;
		} else if (tp_is(p, TT_COMPARE)) {
			op = tp_op(&p->tok[p->cur++]);
		} else {
			break;
		}
		rc = tp_additive(p, &right);
		if (!rc)
			rc = tp_binary(p, op, left, right, &left);
	}
	*out = left;
	return rc;
}

static int tp_not(struct tparser *p, struct tnode **out)
{
	struct tnode *nd = NULL;
	int rc;

	/* "not not x": each not applies to what follows, as parser.ts */
	while (tp_ident(p, "not")) {
		p->cur++;
		nd = tp_node(p, TN_UNARY);
		if (!nd)
			return tp_nomem(p);
		nd->op = TOP_NOT;
		if (++p->depth > TPARSE_MAX_DEPTH)
			return tp_fail(p, "nested too deep");
		rc = tp_not(p, &nd->a);
		p->depth--;
		if (rc)
			return rc;
	}
	if (nd) {
		*out = nd;
		return 0;
	}
	return tp_comparison(p, out);
}

static int tp_and(struct tparser *p, struct tnode **out)
{
	struct tnode *left = NULL, *right;
	int rc = tp_not(p, &left);

	while (!rc && tp_ident(p, "and")) {
		p->cur++;
		rc = tp_not(p, &right);
		if (!rc)
			rc = tp_binary(p, TOP_AND, left, right, &left);
	}
	*out = left;
	return rc;
}

static int tp_or(struct tparser *p, struct tnode **out)
{
	struct tnode *left = NULL, *right;
	int rc = tp_and(p, &left);

	while (!rc && tp_ident(p, "or")) {
		p->cur++;
		rc = tp_and(p, &right);
		if (!rc)
			rc = tp_binary(p, TOP_OR, left, right, &left);
	}
	*out = left;
	return rc;
}

static int tp_if_expression(struct tparser *p, struct tnode **out)
{
	struct tnode *a, *test, *nd;
	int rc = tp_or(p, &a);

	if (rc || !tp_ident(p, "if")) {
		*out = a;
		return rc;
	}
	p->cur++;
	rc = tp_or(p, &test);
	if (rc)
		return rc;
	if (tp_ident(p, "else")) {
		p->cur++;
		nd = tp_node(p, TN_TERNARY);
		if (!nd)
			return tp_nomem(p);
		nd->a = test;
		nd->b = a;
		*out = nd;
		return tp_if_expression(p, &nd->c);
	}
	nd = tp_node(p, TN_SELECT);
	if (!nd)
		return tp_nomem(p);
	nd->a = a;
	nd->b = test;
	*out = nd;
	return 0;
}

int tp_expression(struct tparser *p, struct tnode **out)
{
	int rc;

	if (++p->depth > TPARSE_MAX_DEPTH)
		return tp_fail(p, "nested too deep");
	rc = tp_if_expression(p, out);
	p->depth--;
	return rc;
}

/* a or (a, b, ...) without parentheses; primary: names only (for). */
int tp_sequence(struct tparser *p, bool primary, struct tnode **out)
{
	struct tlist l = { 0 };
	struct tnode *nd;
	int rc;

	rc = primary ? tp_primary(p, &nd) : tp_expression(p, &nd);
	if (rc || !tp_is(p, TT_COMMA)) {
		*out = nd;
		return rc;
	}
	rc = tlist_add(p, &l, nd);
	while (!rc && tp_is(p, TT_COMMA)) {
		p->cur++;
		rc = primary ? tp_primary(p, &nd) : tp_expression(p, &nd);
		if (!rc)
			rc = tlist_add(p, &l, nd);
	}
	if (rc) {
		free(l.v);
		return rc;
	}
	nd = tp_node(p, TN_TUPLE);
	if (!nd) {
		free(l.v);
		return tp_nomem(p);
	}
	*out = nd;
	return tlist_done(p, &l, &nd->list, &nd->n);
}

/* (args) of a call (params false) or of a macro's declaration. */
static int tp_arg(struct tparser *p, bool params, bool *keyword_seen,
		  bool *spread_seen, struct tnode **out)
{
	struct tnode *arg, *kw;
	bool star = tp_is(p, TT_MUL) && strcmp(p->tok[p->cur].s, "*") == 0;
	int rc;

	if (params && (star || tp_is(p, TT_POW)))
		return tp_fail(p, "argument unpacking in a declaration");
	if (star) {
		if (*spread_seen)
			return tp_fail(p, "only one * unpacking is allowed");
		*spread_seen = true;
		p->cur++;
		arg = tp_node(p, TN_SPREAD);
		if (!arg)
			return tp_nomem(p);
		*out = arg;
		return tp_expression(p, &arg->a);
	}
	rc = tp_expression(p, &arg);
	if (rc)
		return rc;
	if (tp_is(p, TT_EQUALS)) {
		p->cur++;
		if (arg->kind != TN_IDENT)
			return tp_fail(p, "expected a name before '='");
		kw = tp_node(p, TN_KWARG);
		if (!kw)
			return tp_nomem(p);
		kw->s = arg->s;
		kw->len = arg->len;
		rc = tp_expression(p, &kw->a);
		if (rc)
			return rc;
		arg = kw;
	}
	if (params && arg->kind != TN_IDENT && arg->kind != TN_KWARG)
		return tp_fail(p, "expected a parameter name");
	if (arg->kind == TN_KWARG)
		*keyword_seen = true;
	else if (*keyword_seen)
		return tp_fail(p, params ? "a parameter without default "
					   "follows one with a default" :
					   "positional argument after a "
					   "keyword argument");
	else if (*spread_seen)
		return tp_fail(p, "positional argument after *");
	*out = arg;
	return 0;
}

int tp_args(struct tparser *p, bool params, struct tnode ***out, size_t *n)
{
	struct tlist l = { 0 };
	struct tnode *arg = NULL;
	bool keyword_seen = false, spread_seen = false;
	int rc = tp_expect(p, TT_LPAREN, "expected (");

	while (!rc && !tp_is(p, TT_RPAREN)) {
		if (p->cur >= p->n) {
			rc = tp_fail(p, "expected )");
			break;
		}
		if (!params && tp_is(p, TT_POW)) {
			p->cur++;
			arg = tp_node(p, TN_KWSPREAD);
			rc = arg ? tp_expression(p, &arg->a) : tp_nomem(p);
			if (!rc)
				rc = tlist_add(p, &l, arg);
			if (!rc && tp_is(p, TT_COMMA))
				p->cur++;
			if (!rc && !tp_is(p, TT_RPAREN))
				rc = tp_fail(p, "** must be the last argument");
			break;
		}
		rc = tp_arg(p, params, &keyword_seen, &spread_seen, &arg);
		if (!rc)
			rc = tlist_add(p, &l, arg);
		if (!rc && tp_is(p, TT_COMMA))
			p->cur++;
	}
	if (!rc && params) {
		/* duplicate parameter names */
		for (size_t i = 0; i < l.n && !rc; i++)
			for (size_t j = 0; j < i && !rc; j++)
				if (strcmp(l.v[i]->s, l.v[j]->s) == 0)
					rc = tp_fail(p, "duplicate parameter");
	}
	if (!rc)
		rc = tp_expect(p, TT_RPAREN, "expected )");
	if (rc) {
		free(l.v);
		return rc;
	}
	return tlist_done(p, &l, out, n);
}

static int tp_list_literal(struct tparser *p, enum tnode_kind kind,
			   enum ttok_type close, struct tnode **out)
{
	struct tlist l = { 0 };
	struct tnode *nd, *k, *v;
	int rc = 0;

	while (!rc && !tp_is(p, close)) {
		if (p->cur >= p->n) {
			rc = tp_fail(p, "unexpected end of template");
			break;
		}
		rc = tp_expression(p, &k);
		if (!rc && kind == TN_OBJECT) {
			rc = tp_expect(p, TT_COLON, "expected ':'");
			if (!rc)
				rc = tp_expression(p, &v);
			if (!rc)
				rc = tlist_add(p, &l, k);
			k = v;
		}
		if (!rc)
			rc = tlist_add(p, &l, k);
		if (!rc && tp_is(p, TT_COMMA))
			p->cur++;
	}
	nd = rc ? NULL : tp_node(p, kind);
	if (!rc && !nd)
		rc = tp_nomem(p);
	if (rc) {
		free(l.v);
		return rc;
	}
	p->cur++; /* the closing bracket */
	*out = nd;
	return tlist_done(p, &l, &nd->list, &nd->n);
}

int tp_primary(struct tparser *p, struct tnode **out)
{
	const struct ttok *t;
	struct tnode *nd;
	int rc;

	if (p->cur >= p->n)
		return tp_fail(p, "unexpected end of template");
	t = &p->tok[p->cur];
	switch (t->type) {
	case TT_NUMBER:
		nd = tp_node(p, strchr(t->s, '.') ? TN_FLOAT : TN_INT);
		if (!nd)
			return tp_nomem(p);
		nd->num = strtod(t->s, NULL);
		p->cur++;
		*out = nd;
		return 0;
	case TT_STRING: {
		size_t len = 0, i;
		char *s;

		/* adjacent literals concatenate: 'a' "b" */
		for (i = p->cur; i < p->n && p->tok[i].type == TT_STRING; i++)
			len += p->tok[i].len;
		nd = tp_node(p, TN_STRING);
		s = tarena_alloc(p->arena, len + 1);
		if (!nd || !s)
			return tp_nomem(p);
		nd->s = s;
		nd->len = len;
		for (; p->cur < i; p->cur++) {
			memcpy(s, p->tok[p->cur].s, p->tok[p->cur].len);
			s += p->tok[p->cur].len;
		}
		*s = '\0';
		*out = nd;
		return 0;
	}
	case TT_IDENT:
		nd = tp_node(p, TN_IDENT);
		if (!nd)
			return tp_nomem(p);
		nd->s = t->s;
		nd->len = t->len;
		p->cur++;
		*out = nd;
		return 0;
	case TT_LPAREN:
		p->cur++;
		rc = tp_sequence(p, false, out);
		if (!rc)
			rc = tp_expect(p, TT_RPAREN, "expected )");
		return rc;
	case TT_LBRACKET:
		p->cur++;
		return tp_list_literal(p, TN_ARRAY, TT_RBRACKET, out);
	case TT_LBRACE:
		p->cur++;
		return tp_list_literal(p, TN_OBJECT, TT_RBRACE, out);
	default: return tp_fail(p, "unexpected token");
	}
}
