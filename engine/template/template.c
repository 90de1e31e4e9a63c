// SPDX-License-Identifier: MIT
/*
 * engine_template_parse / _render: the source through lexer.c and
 * parser.c once, then a render per context (eval.c) with a fresh set of
 * values that the render frees whole at its end (value.c).
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TEMPLATE_MAX_BYTES ((size_t)256 << 20)
#define TEMPLATE_MAX_STEPS 10000000ull

void *tarena_alloc(struct tarena *a, size_t size)
{
	struct tarena_chunk *c = a->head;
	size_t need = (size + sizeof(max_align_t) - 1) &
		      ~(sizeof(max_align_t) - 1);
	size_t cap;
	void *p;

	if (need < size)
		return NULL;
	if (!c || c->cap - c->used < need) {
		cap = need > 65536 ? need : 65536;
		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->next = a->head;
		c->used = 0;
		c->cap = cap;
		a->head = c;
	}
	p = (char *)c->data + c->used;
	c->used += need;
	return p;
}

void tarena_free(struct tarena *a)
{
	struct tarena_chunk *c, *next;

	for (c = a->head; c; c = next) {
		next = c->next;
		free(c);
	}
	a->head = NULL;
}

int engine_template_parse(struct engine_template **out, const char *src,
			  size_t len, struct err *err)
{
	struct engine_template *t;
	struct ttok *tok = NULL;
	size_t n = 0;
	int rc;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return err_set(err, ENOMEM, "template: out of memory");
	rc = tlex(&t->arena, src, len, &tok, &n, err);
	if (!rc)
		rc = tparse(&t->arena, tok, n, &t->program, err);
	free(tok);
	if (rc) {
		engine_template_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

void engine_template_free(struct engine_template *t)
{
	if (!t)
		return;
	tarena_free(&t->arena);
	free(t);
}

/* The context's variables into the root; a name taken by a global fails. */
static int template_context(struct trt *r, struct tenv *root,
			    const json_t *context)
{
	struct tv ctx;
	int rc;

	if (!context)
		return 0;
	if (!json_is_object(context))
		return trt_fail(r, "the context is not a JSON object");
	rc = tv_from_json(r, context, &ctx);
	for (size_t i = 0; !rc && i < ctx.o->n; i++) {
		const struct tentry *e = &ctx.o->e[i];

		if (tobj_get(root->vars, e->key->p, e->key->len))
			return trt_fail(r, "variable already declared: %s",
					e->key->p);
		tv_ref(e->val);
		rc = tenv_set(r, root, e->key->p, e->key->len, e->val);
	}
	tv_drop(r, ctx);
	return rc;
}

int engine_template_render(const struct engine_template *t, const void *context,
			   const struct engine_template_options *opt,
			   char **out, size_t *out_len, struct err *err)
{
	struct trt r;
	struct tbuf b = { 0 };
	struct tenv *root = NULL;
	int rc;

	*out = NULL;
	if (out_len)
		*out_len = 0;
	trt_init(&r, err);
	r.max_bytes = opt && opt->max_bytes ? opt->max_bytes :
					      TEMPLATE_MAX_BYTES;
	r.max_steps = opt && opt->max_steps ? opt->max_steps :
					      TEMPLATE_MAX_STEPS;
	r.now = opt ? opt->now : -1;
	rc = tenv_new(&r, NULL, &root);
	if (!rc)
		rc = tglobals_add(&r, root);
	if (!rc)
		rc = template_context(&r, root, context);
	if (!rc)
		rc = texec_block(&r, t->program->list, t->program->n, root, &b);
	if (rc > 0)
		rc = trt_fail(&r, "break or continue outside a loop");
	if (!rc) {
		*out = malloc(b.len + 1);
		if (!*out)
			rc = err_set(err, ENOMEM, "template: out of memory");
	}
	if (!rc) {
		memcpy(*out, b.p ? b.p : "", b.len);
		(*out)[b.len] = '\0';
		if (out_len)
			*out_len = b.len;
	}
	tbuf_free(&r, &b);
	tenv_drop(&r, root);
	trt_free_all(&r);
	return rc;
}
