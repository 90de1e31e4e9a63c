// SPDX-License-Identifier: MIT
/*
 * The statements of the parser (parse.h): set, if/elif/else, for, macro,
 * call, filter, break, continue, each with its closing tag, and the
 * program: text, comments, {{ expressions }} and statements in order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

static int tp_any(struct tparser *p, struct tnode **out);

/* Statements up to {% one-of-names, into *list. */
static int tp_body(struct tparser *p, const char *const *names,
		   struct tnode ***list, size_t *n)
{
	struct tlist l = { 0 };
	struct tnode *nd;
	int rc;

	while (!tp_statement(p, names)) {
		if (p->cur >= p->n) {
			free(l.v);
			return tp_fail(p, "unexpected end of template");
		}
		rc = tp_any(p, &nd);
		if (!rc)
			rc = tlist_add(p, &l, nd);
		if (rc) {
			free(l.v);
			return rc;
		}
	}
	return tlist_done(p, &l, list, n);
}

/* ---- statements -------------------------------------------------------- */

static int tp_set(struct tparser *p, struct tnode *nd)
{
	static const char *const endset[] = { "endset", NULL };
	int rc = tp_sequence(p, false, &nd->a);

	if (rc)
		return rc;
	if (tp_is(p, TT_EQUALS)) {
		p->cur++;
		rc = tp_sequence(p, false, &nd->b);
	} else {
		rc = tp_expect(p, TT_CLOSE_STMT, "expected %}");
		if (!rc)
			rc = tp_body(p, endset, &nd->list, &nd->n);
		if (!rc)
			rc = tp_expect(p, TT_OPEN_STMT, "expected {%");
		if (!rc)
			rc = tp_expect_ident(p, "endset");
	}
	if (!rc)
		rc = tp_expect(p, TT_CLOSE_STMT, "expected %}");
	return rc;
}

static int tp_if(struct tparser *p, struct tnode *nd)
{
	static const char *const stops[] = { "elif", "else", "endif", NULL };
	static const char *const endif[] = { "endif", NULL };
	struct tnode *elif;
	int rc = tp_expression(p, &nd->a);

	if (!rc)
		rc = tp_expect(p, TT_CLOSE_STMT, "expected %}");
	if (!rc)
		rc = tp_body(p, stops, &nd->list, &nd->n);
	if (rc)
		return rc;
	if (tp_ident_at(p, p->cur + 1, "elif")) {
		p->cur += 2;
		elif = tp_node(p, TN_IF);
		nd->list2 = tarena_alloc(p->arena, sizeof(*nd->list2));
		if (!elif || !nd->list2)
			return tp_nomem(p);
		nd->list2[0] = elif;
		nd->n2 = 1;
		if (++p->depth > TPARSE_MAX_DEPTH)
			return tp_fail(p, "nested too deep");
		rc = tp_if(p, elif);
		p->depth--;
		return rc;
	}
	if (tp_ident_at(p, p->cur + 1, "else")) {
		p->cur += 2;
		rc = tp_expect(p, TT_CLOSE_STMT, "expected %}");
		if (!rc)
			rc = tp_body(p, endif, &nd->list2, &nd->n2);
	}
	return rc;
}

static int tp_for(struct tparser *p, struct tnode *nd)
{
	static const char *const stops[] = { "endfor", "else", NULL };
	static const char *const endfor[] = { "endfor", NULL };
	int rc = tp_sequence(p, true, &nd->a);

	if (rc)
		return rc;
	if (nd->a->kind != TN_IDENT && nd->a->kind != TN_TUPLE)
		return tp_fail(p, "expected a name or a tuple after for");
	if (!tp_ident(p, "in"))
		return tp_fail(p, "expected 'in'");
	p->cur++;
	rc = tp_expression(p, &nd->b);
	if (!rc)
		rc = tp_expect(p, TT_CLOSE_STMT, "expected %}");
	if (!rc)
		rc = tp_body(p, stops, &nd->list, &nd->n);
	if (!rc && tp_ident_at(p, p->cur + 1, "else")) {
		p->cur += 2;
		rc = tp_expect(p, TT_CLOSE_STMT, "expected %}");
		if (!rc)
			rc = tp_body(p, endfor, &nd->list2, &nd->n2);
	}
	return rc;
}

static int tp_macro(struct tparser *p, struct tnode *nd)
{
	static const char *const endmacro[] = { "endmacro", NULL };
	struct tnode *name;
	int rc = tp_primary(p, &name);

	if (rc)
		return rc;
	if (name->kind != TN_IDENT)
		return tp_fail(p, "expected a macro name");
	nd->s = name->s;
	nd->len = name->len;
	rc = tp_args(p, true, &nd->list2, &nd->n2);
	if (!rc)
		rc = tp_expect(p, TT_CLOSE_STMT, "expected %}");
	if (!rc)
		rc = tp_body(p, endmacro, &nd->list, &nd->n);
	return rc;
}

static int tp_call_statement(struct tparser *p, struct tnode *nd)
{
	static const char *const endcall[] = { "endcall", NULL };
	struct tnode *callee, *call;
	int rc = 0;

	if (tp_is(p, TT_LPAREN))
		rc = tp_args(p, true, &nd->list2, &nd->n2);
	if (!rc)
		rc = tp_primary(p, &callee);
	if (rc)
		return rc;
	if (callee->kind != TN_IDENT)
		return tp_fail(p, "expected a name after call");
	call = tp_node(p, TN_CALL);
	if (!call)
		return tp_nomem(p);
	call->a = callee;
	nd->a = call;
	rc = tp_args(p, false, &call->list, &call->n);
	if (!rc)
		rc = tp_expect(p, TT_CLOSE_STMT, "expected %}");
	if (!rc)
		rc = tp_body(p, endcall, &nd->list, &nd->n);
	if (!rc)
		rc = tp_end_tag(p, "endcall");
	return rc;
}

static int tp_filter_statement(struct tparser *p, struct tnode *nd)
{
	static const char *const endfilter[] = { "endfilter", NULL };
	int rc = tp_primary(p, &nd->a);

	if (!rc && nd->a->kind == TN_IDENT && tp_is(p, TT_LPAREN))
		rc = tp_call(p, nd->a, &nd->a);
	if (!rc)
		rc = tp_expect(p, TT_CLOSE_STMT, "expected %}");
	if (!rc)
		rc = tp_body(p, endfilter, &nd->list, &nd->n);
	if (!rc)
		rc = tp_end_tag(p, "endfilter");
	return rc;
}

static int tp_statement_tag(struct tparser *p, struct tnode **out)
{
	static const struct {
		const char *name;
		enum tnode_kind kind;
		const char *end; /* the closing tag, parsed here */
	} kinds[] = {
		{ "set", TN_SET, NULL },
		{ "if", TN_IF, "endif" },
		{ "macro", TN_MACRO, "endmacro" },
		{ "for", TN_FOR, "endfor" },
		{ "call", TN_CALL_STMT, NULL },
		{ "filter", TN_FILTER_STMT, NULL },
		{ "break", TN_BREAK, NULL },
		{ "continue", TN_CONTINUE, NULL },
	};
	struct tnode *nd;
	size_t i;
	int rc;

	p->cur++; /* {% */
	if (!tp_is(p, TT_IDENT))
		return tp_fail(p, "unknown statement");
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (tp_ident(p, kinds[i].name))
			break;
	if (i == sizeof(kinds) / sizeof(kinds[0]))
		return tp_fail(p, "unknown statement");
	nd = tp_node(p, kinds[i].kind);
	if (!nd)
		return tp_nomem(p);
	p->cur++;
	if (++p->depth > TPARSE_MAX_DEPTH)
		return tp_fail(p, "nested too deep");
	switch (kinds[i].kind) {
	case TN_SET: rc = tp_set(p, nd); break;
	case TN_IF: rc = tp_if(p, nd); break;
	case TN_MACRO: rc = tp_macro(p, nd); break;
	case TN_FOR: rc = tp_for(p, nd); break;
	case TN_CALL_STMT: rc = tp_call_statement(p, nd); break;
	case TN_FILTER_STMT: rc = tp_filter_statement(p, nd); break;
	default: rc = tp_expect(p, TT_CLOSE_STMT, "expected %}"); break;
	}
	p->depth--;
	if (!rc && kinds[i].end)
		rc = tp_end_tag(p, kinds[i].end);
	*out = nd;
	return rc;
}

static int tp_any(struct tparser *p, struct tnode **out)
{
	const struct ttok *t = &p->tok[p->cur];
	struct tnode *nd;
	int rc;

	switch (t->type) {
	case TT_COMMENT:
	case TT_TEXT:
		nd = tp_node(p, t->type == TT_TEXT ? TN_TEXT : TN_COMMENT);
		if (!nd)
			return tp_nomem(p);
		nd->s = t->s;
		nd->len = t->len;
		p->cur++;
		*out = nd;
		return 0;
	case TT_OPEN_STMT: return tp_statement_tag(p, out);
	case TT_OPEN_EXPR:
		p->cur++;
		rc = tp_expression(p, out);
		if (!rc)
			rc = tp_expect(p, TT_CLOSE_EXPR, "expected }}");
		return rc;
	default: return tp_fail(p, "unexpected token");
	}
}

int tparse(struct tarena *a, const struct ttok *tok, size_t n,
	   struct tnode **out, struct err *err)
{
	struct tparser p = { .arena = a, .tok = tok, .n = n, .err = err };
	struct tlist body = { 0 };
	struct tnode *prog, *nd;
	int rc = 0;

	while (p.cur < p.n && !rc) {
		rc = tp_any(&p, &nd);
		if (!rc)
			rc = tlist_add(&p, &body, nd);
	}
	if (rc) {
		free(body.v);
		return rc;
	}
	prog = tp_node(&p, TN_PROGRAM);
	if (!prog) {
		free(body.v);
		return tp_nomem(&p);
	}
	*out = prog;
	return tlist_done(&p, &body, &prog->list, &prog->n);
}
