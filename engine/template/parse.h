/* SPDX-License-Identifier: MIT */
/*
 * Between the two halves of the parser: parser.c (the shared helpers and
 * the expressions) and parse_stmt.c (the statements). Only they include
 * this.
 */
#ifndef LLMFS_ENGINE_TEMPLATE_PARSE_H
#define LLMFS_ENGINE_TEMPLATE_PARSE_H

#include "internal.h"

/* deeper nesting than any template needs; bounds the C stack */
#define TPARSE_MAX_DEPTH 200

struct tparser {
	struct tarena *arena;
	const struct ttok *tok;
	size_t n, cur;
	unsigned depth;
	struct err *err;
};

/* A list being built (malloc'ed), copied into the arena when done. */
struct tlist {
	struct tnode **v;
	size_t n, cap;
};

/* One line with the source near the failure, -EINVAL. */
int tp_fail(struct tparser *p, const char *what);
int tp_nomem(struct tparser *p);
/* A zeroed node of kind in the arena, at the current token; NULL: no memory. */
struct tnode *tp_node(struct tparser *p, enum tnode_kind kind);
int tlist_add(struct tparser *p, struct tlist *l, struct tnode *nd);
/* Move the list into the arena: *out, *n; the list is emptied. */
int tlist_done(struct tparser *p, struct tlist *l, struct tnode ***out,
	       size_t *n);
bool tp_is(const struct tparser *p, enum ttok_type t);
bool tp_ident_at(const struct tparser *p, size_t i, const char *name);
bool tp_ident(const struct tparser *p, const char *name);
/* {% name ... with name one of the list (NULL-terminated) */
bool tp_statement(const struct tparser *p, const char *const *names);
int tp_expect(struct tparser *p, enum ttok_type t, const char *what);
int tp_expect_ident(struct tparser *p, const char *name);
/* {% NAME %} */
int tp_end_tag(struct tparser *p, const char *name);

/* parser.c: an expression; a or (a, b...) (primary: names only, for for) */
int tp_expression(struct tparser *p, struct tnode **out);
int tp_sequence(struct tparser *p, bool primary, struct tnode **out);
int tp_primary(struct tparser *p, struct tnode **out);
/* (args) of a call (params false) or of a macro's declaration */
int tp_args(struct tparser *p, bool params, struct tnode ***out, size_t *n);
/* callee(args), then members and further calls */
int tp_call(struct tparser *p, struct tnode *callee, struct tnode **out);

#endif
