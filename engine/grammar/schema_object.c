// SPDX-License-Identifier: MIT
/*
 * Objects as llama.cpp's json-schema-to-grammar.cpp writes them: the
 * required properties in order, then the optional ones as a chain of
 * *-rest rules, additional properties under keys that are none of the
 * named ones (_not_strings); allOf merges objects or intersects enums.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"

/* _not_strings: a JSON string that is none of names. */
struct not_node {
	uint32_t cp;
	size_t first_child, next; /* indices + 1 */
	bool end;
};

static size_t not_insert(struct not_node **nodes, size_t *n, size_t *cap,
			 const char *w)
{
	size_t cur = 0;
	struct gram_partial part = { 0, 0 };
	uint32_t cps[256 + 4];
	size_t k = gram_decode_utf8((const uint8_t *)w, strnlen(w, 256), &part,
				    cps);

	for (size_t i = 0; i < k; i++) {
		size_t *link = &(*nodes)[cur].first_child, prev = 0;

		/* children sorted by code point, as std::map keeps them */
		while (*link && (*nodes)[*link - 1].cp < cps[i]) {
			prev = *link;
			link = &(*nodes)[*link - 1].next;
		}
		(void)prev;
		if (*link && (*nodes)[*link - 1].cp == cps[i]) {
			cur = *link - 1;
			continue;
		}
		if (*n == *cap) {
			size_t off = (size_t)((char *)link - (char *)*nodes);
			bool inside = off < *cap * sizeof(**nodes);
			struct not_node *p = realloc(*nodes,
						     2 * *cap * sizeof(*p));

			if (!p)
				return SIZE_MAX;
			if (inside)
				link = (size_t *)((char *)p + off);
			*nodes = p;
			*cap *= 2;
		}
		(*nodes)[*n].cp = cps[i];
		(*nodes)[*n].first_child = 0;
		(*nodes)[*n].next = *link;
		(*nodes)[*n].end = false;
		*link = ++*n;
		cur = *n - 1;
	}
	(*nodes)[cur].end = true;
	return cur;
}

static void not_utf8(struct sb *b, uint32_t cp)
{
	char s[4];

	if (cp < 0x80) {
		s[0] = (char)cp;
		sb_addn(b, s, 1);
	} else if (cp < 0x800) {
		s[0] = (char)(0xc0 | cp >> 6);
		s[1] = (char)(0x80 | (cp & 0x3f));
		sb_addn(b, s, 2);
	} else if (cp < 0x10000) {
		s[0] = (char)(0xe0 | cp >> 12);
		s[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		s[2] = (char)(0x80 | (cp & 0x3f));
		sb_addn(b, s, 3);
	} else {
		s[0] = (char)(0xf0 | cp >> 18);
		s[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		s[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		s[3] = (char)(0x80 | (cp & 0x3f));
		sb_addn(b, s, 4);
	}
}

static void not_visit(struct sb *out, const struct not_node *nodes, size_t n,
		      const char *char_rule)
{
	struct sb rejects = { 0 };
	bool first = true;

	for (size_t ch = nodes[n].first_child; ch; ch = nodes[ch - 1].next) {
		not_utf8(&rejects, nodes[ch - 1].cp);
		if (!first)
			sb_add(out, " | ");
		first = false;
		sb_add(out, "[");
		not_utf8(out, nodes[ch - 1].cp);
		sb_add(out, "]");
		if (nodes[ch - 1].first_child) {
			sb_add(out, " (");
			not_visit(out, nodes, ch - 1, char_rule);
			sb_add(out, ")");
		} else {
			sb_add(out, " ");
			sb_add(out, char_rule);
			sb_add(out, "+");
		}
	}
	if (nodes[n].first_child) {
		sb_add(out, " | [^\"");
		sb_add(out, rejects.p ? rejects.p : "");
		sb_add(out, "] ");
		sb_add(out, char_rule);
		sb_add(out, "*");
	}
	if (rejects.oom)
		out->oom = true;
	sb_free(&rejects);
}

static char *conv_not_strings(struct conv *c, const struct conv_prop *props,
			      size_t n)
{
	size_t cap = 16, count = 1;
	struct not_node *nodes = calloc(cap, sizeof(*nodes));
	char *char_rule = conv_primitive(c, "char", "char");
	struct sb out = { 0 };

	if (!nodes || !char_rule) {
		free(nodes);
		free(char_rule);
		return conv_nomem(c), NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (not_insert(&nodes, &count, &cap, props[i].name) ==
		    SIZE_MAX) {
			free(nodes);
			free(char_rule);
			return conv_nomem(c), NULL;
		}
	sb_add(&out, "[\"] ( ");
	not_visit(&out, nodes, 0, char_rule);
	sb_add(&out, " )");
	if (!nodes[0].end)
		sb_add(&out, "?");
	sb_add(&out, " [\"]");
	free(nodes);
	free(char_rule);
	if (out.oom) {
		sb_free(&out);
		return conv_nomem(c), NULL;
	}
	return sb_take(&out);
}

/* get_recursive_refs: the optional properties from ks[0] on */
static void conv_optional_chain(struct conv *c, struct sb *out,
				struct conv_prop **ks, size_t n,
				bool first_optional, const char *name)
{
	const struct conv_prop *k;
	bool star;

	if (!n)
		return;
	k = ks[0];
	star = !strcmp(k->name, "*");
	if (first_optional) {
		sb_add(out, "( \",\" space ");
		sb_add(out, k->kv);
		sb_add(out, " )");
		sb_add(out, star ? "*" : "?");
	} else {
		sb_add(out, k->kv);
		if (star) {
			sb_add(out, " ( \",\" space ");
			sb_add(out, k->kv);
			sb_add(out, " )*");
		}
	}
	if (n > 1) {
		struct sb rest = { 0 };
		char *rn, *rule;

		conv_optional_chain(c, &rest, ks + 1, n - 1, true, name);
		rn = malloc(strlen(name) + strlen(k->name) + 8);
		if (rn)
			sprintf(rn, "%s%s%s-rest", name, *name ? "-" : "",
				k->name);
		rule = rn && !rest.oom ? conv_add(c, rn, rest.p ? rest.p : "") :
					 NULL;
		if (!rule && !c->rc)
			conv_nomem(c);
		sb_add(out, " ");
		sb_add(out, rule ? rule : "");
		free(rule);
		free(rn);
		sb_free(&rest);
	}
}

/*
 * The "NAME-PROP-kv" rule of property p: its key as a JSON string, then
 * its schema's rule. 0, or -1 (an error set, or none when a name did not
 * fit in memory: the caller's result is NULL either way).
 */
static int conv_prop_kv(struct conv *c, struct conv_prop *p, const char *name,
			const char *path)
{
	char *sub = name_cat(name, p->name), *val, *kvn;
	struct sb kv = { 0 }, key = { 0 };
	char *ppath = path_cat(path, "/properties/", p->name);

	val = sub && ppath ? conv_visit(c, p->schema, sub, ppath) : NULL;
	free(ppath);
	if (!val) {
		free(sub);
		return -1;
	}
	conv_dump_string(&key, p->name, strlen(p->name));
	conv_literal(&kv, key.p ? key.p : "", key.n);
	sb_add(&kv, " space \":\" space ");
	sb_add(&kv, val);
	kvn = str_cat(sub, "-kv");
	free(p->kv);
	p->kv = kvn && !kv.oom && !key.oom ? conv_add(c, kvn, kv.p) : NULL;
	free(kvn);
	free(sub);
	free(val);
	sb_free(&kv);
	sb_free(&key);
	return p->kv ? 0 : -1;
}

/*
 * The "NAME-additional-kv" rule: a key that is none of props[0..n) (any
 * string when n is 0), then a value of additional (any value when NULL).
 * Its name (malloc'ed), or NULL.
 */
static char *conv_additional_kv(struct conv *c, const struct conv_prop *props,
				size_t n, const char *name, json_t *additional,
				const char *path)
{
	char *sub = name_cat(name, "additional"), *val = NULL, *key, *kvn,
	     *vn = NULL, *rule;
	struct sb kv = { 0 };

	if (!sub)
		return conv_nomem(c), NULL;
	if (additional) {
		char *apath = path_cat(path, "/additionalProperties", NULL);

		vn = str_cat(sub, "-value");
		val = vn && apath ? conv_visit(c, additional, vn, apath) : NULL;
		free(apath);
	} else {
		val = conv_primitive(c, "value", "value");
	}
	free(vn);
	if (n) {
		char *notk = conv_not_strings(c, props, n);
		char *kn = str_cat(sub, "-k");

		key = notk && kn ? conv_add(c, kn, notk) : NULL;
		free(notk);
		free(kn);
	} else {
		key = conv_primitive(c, "string", "string");
	}
	if (val && key) {
		sb_add(&kv, key);
		sb_add(&kv, " \":\" space ");
		sb_add(&kv, val);
	}
	kvn = str_cat(sub, "-kv");
	rule = val && key && kvn && !kv.oom ? conv_add(c, kvn, kv.p) : NULL;
	free(kvn);
	free(key);
	free(val);
	free(sub);
	sb_free(&kv);
	return rule;
}

/*
 * The object's own rule: "{", the required key-values in order, then the
 * optional ones (opt, each the head of a chain of *-rest rules), "}".
 */
static char *conv_object_body(struct conv *c, struct conv_prop *const *req,
			      size_t n_req, struct conv_prop **opt,
			      size_t n_opt, const char *name)
{
	struct sb r = { 0 };

	if (!n_req && !n_opt)
		return strdup("\"{\" space \"}\"");
	sb_add(&r, "\"{\" space ");
	for (size_t i = 0; i < n_req; i++) {
		if (i)
			sb_add(&r, " \",\" space ");
		sb_add(&r, req[i]->kv);
	}
	if (n_opt) {
		sb_add(&r, " (");
		if (n_req)
			sb_add(&r, " \",\" space ( ");
		for (size_t i = 0; i < n_opt; i++) {
			if (i)
				sb_add(&r, " | ");
			conv_optional_chain(c, &r, opt + i, n_opt - i, false,
					    name);
		}
		if (n_req)
			sb_add(&r, " )");
		sb_add(&r, " )?");
	}
	sb_add(&r, " space \"}\"");
	if (c->rc || r.oom) {
		sb_free(&r);
		if (!c->rc)
			conv_nomem(c);
		return NULL;
	}
	return sb_take(&r);
}

/* _build_object_rule; additional: the schema of other keys, or NULL. */
static char *conv_object_rule(struct conv *c, struct conv_prop *props, size_t n,
			      const char *name, json_t *additional,
			      bool additional_any, const char *path)
{
	struct conv_prop **req = calloc(n + 1, sizeof(*req));
	struct conv_prop **opt = calloc(n + 1, sizeof(*opt));
	struct conv_prop star = { .name = "*" };
	size_t n_req = 0, n_opt = 0;
	char *r = NULL;

	if (!req || !opt) {
		conv_nomem(c);
		goto out;
	}
	for (size_t i = 0; i < n && !c->rc; i++) {
		if (conv_prop_kv(c, &props[i], name, path))
			goto out;
		if (props[i].required)
			req[n_req++] = &props[i];
		else
			opt[n_opt++] = &props[i];
	}
	if (additional || additional_any) {
		star.kv = conv_additional_kv(c, props, n, name, additional,
					     path);
		if (!star.kv)
			goto out;
		opt[n_opt++] = &star;
	}
	r = conv_object_body(c, req, n_req, opt, n_opt, name);
out:
	free(star.kv);
	free(req);
	free(opt);
	return r;
}

static void conv_props_free(struct conv_prop *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(p[i].kv);
	free(p);
}

enum conv_required {
	CONV_REQUIRED_LISTED, /* those its "required" names */
	CONV_REQUIRED_ALL,    /* an allOf member's */
	CONV_REQUIRED_NONE,   /* an anyOf alternative's inside an allOf */
};

/* An object's properties, in their order, with required marked. */
static int conv_props(struct conv *c, json_t *s, const char *path,
		      struct conv_prop **out, size_t *n,
		      enum conv_required mode)
{
	json_t *props = json_object_get(s, "properties"), *req, *v;
	const char *key;
	size_t i, k = 0;

	if (props && !json_is_object(props))
		return conv_fail(c, path, "properties must be an object");
	req = json_object_get(s, "required");
	if (props && json_object_size(props)) {
		struct conv_prop *p = realloc(
			*out, (*n + json_object_size(props)) * sizeof(*p));

		if (!p)
			return conv_nomem(c);
		*out = p;
		json_object_foreach(props, key, v)
		{
			bool r = mode == CONV_REQUIRED_ALL;
			json_t *name;

			json_array_foreach(req, i, name)
			{
				if (mode == CONV_REQUIRED_LISTED &&
				    json_is_string(name) &&
				    !strcmp(json_string_value(name), key))
					r = true;
			}
			p[*n + k].name = key;
			p[*n + k].schema = v;
			p[*n + k].kv = NULL;
			p[*n + k].required = r;
			k++;
		}
		*n += k;
	}
	return 0;
}

char *conv_object(struct conv *c, json_t *s, const char *name,
		  const char *rule_name, const char *path)
{
	json_t *add = json_object_get(s, "additionalProperties");
	struct conv_prop *props = NULL;
	size_t n = 0;
	bool any = false;
	char *body, *r;

	if (add && !json_is_boolean(add) && !json_is_object(add))
		return conv_fail(c, path,
				 "additionalProperties must be a boolean or a "
				 "schema"),
		       NULL;
	if (json_is_true(add) || (!add && !conv_has(s, "properties")))
		any = true;
	if (conv_props(c, s, path, &props, &n, CONV_REQUIRED_LISTED)) {
		conv_props_free(props, n);
		return NULL;
	}
	if (!n && any) {
		char *o = conv_primitive(c, "object", "object");

		r = o ? conv_add(c, rule_name, o) : NULL;
		free(o);
		conv_props_free(props, n);
		return r;
	}
	body = conv_object_rule(c, props, n, name,
				json_is_object(add) ? add : NULL, any, path);
	conv_props_free(props, n);
	if (!body)
		return NULL;
	r = conv_add(c, rule_name, body);
	free(body);
	return r;
}

/* allOf's enum values (their JSON literals), each with how often listed. */
struct conv_enums {
	char **lit;
	unsigned *count;
	size_t n;
};

static void conv_enums_free(struct conv_enums *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->lit[i]);
	free(e->lit);
	free(e->count);
}

/* Count each value of the enum vals: 0, or -1 out of memory. */
static int conv_enums_add(struct conv *c, struct conv_enums *e, json_t *vals)
{
	json_t *v;
	size_t i;

	json_array_foreach(vals, i, v)
	{
		struct sb lit = { 0 };
		size_t m;

		conv_constant(&lit, v);
		if (lit.oom)
			return conv_nomem(c), -1;
		for (m = 0; m < e->n; m++)
			if (!strcmp(e->lit[m], lit.p))
				break;
		if (m == e->n) {
			char **a = realloc(e->lit, (m + 1) * sizeof(*a));
			unsigned *b;

			if (a)
				e->lit = a;
			b = a ? realloc(e->count, (m + 1) * sizeof(*b)) : NULL;
			if (b)
				e->count = b;
			if (!a || !b) {
				sb_free(&lit);
				return conv_nomem(c), -1;
			}
			e->lit[m] = sb_take(&lit);
			e->count[m] = 0;
			e->n++;
		}
		sb_free(&lit);
		e->count[m]++;
	}
	return 0;
}

/*
 * "(a | b)": the values listed members times (by every member), in
 * std::map order (by the literal's bytes); NULL when none is, or out of
 * memory.
 */
static char *conv_enums_common(struct conv_enums *e, size_t members)
{
	struct sb out = { 0 };
	bool any = false;

	for (size_t a = 0; a < e->n; a++)
		for (size_t b = a + 1; b < e->n; b++)
			if (strcmp(e->lit[b], e->lit[a]) < 0) {
				char *t = e->lit[a];
				unsigned u = e->count[a];

				e->lit[a] = e->lit[b];
				e->lit[b] = t;
				e->count[a] = e->count[b];
				e->count[b] = u;
			}
	sb_add(&out, "(");
	for (size_t a = 0; a < e->n; a++)
		if (e->count[a] == members) {
			if (any)
				sb_add(&out, " | ");
			sb_add(&out, e->lit[a]);
			any = true;
		}
	sb_add(&out, ")");
	if (!any || out.oom) {
		sb_free(&out);
		return NULL;
	}
	return sb_take(&out);
}

/* What the $refs from s name, 32 hops at most; NULL when one is bad. */
static json_t *conv_follow_refs(struct conv *c, json_t *s, const char *path)
{
	for (int hop = 0; hop < 32 && json_is_object(s) && conv_has(s, "$ref");
	     hop++) {
		json_t *v = json_object_get(s, "$ref");

		s = json_is_string(v) ?
			    conv_resolve(c, json_string_value(v), path) :
			    NULL;
	}
	return s;
}

/*
 * One member of allOf: an object's properties join props (required, or
 * none required for the alternatives of an anyOf/oneOf member), an
 * enum's values are counted. 0, or -1 (the result is NULL).
 */
static int conv_all_of_member(struct conv *c, json_t *child, const char *path,
			      struct conv_prop **props, size_t *n,
			      struct conv_enums *enums)
{
	json_t *list = NULL, *alt;
	size_t na = 1, j;
	bool required = true;
	enum schema_kind k;

	if (conv_kind(c, child, path, &k))
		return -1;
	if (k == KIND_ANY_OF &&
	    !json_is_array(json_object_get(child, "type"))) {
		list = json_object_get(child, "oneOf");
		if (!list)
			list = json_object_get(child, "anyOf");
		required = false;
		na = json_array_size(list);
	}
	for (j = 0; j < na; j++) {
		alt = conv_follow_refs(
			c, list ? json_array_get(list, j) : child, path);
		if (c->rc)
			return -1;
		if (!alt || conv_kind(c, alt, path, &k))
			return -1;
		if (k == KIND_OBJECT) {
			if (conv_props(c, alt, path, props, n,
				       required ? CONV_REQUIRED_ALL :
						  CONV_REQUIRED_NONE))
				return -1;
		} else if (k == KIND_ENUM) {
			if (conv_enums_add(c, enums,
					   json_object_get(alt, "enum")))
				return -1;
		}
	}
	return 0;
}

/* _visit_all_of: the objects merged, or the values every enum shares. */
char *conv_all_of(struct conv *c, json_t *s, const char *name,
		  const char *rule_name, const char *path)
{
	json_t *all = json_object_get(s, "allOf"), *child;
	struct conv_prop *props = NULL;
	struct conv_enums enums = { 0 };
	size_t n = 0, i;
	char *body = NULL, *r = NULL;

	if (!json_is_array(all))
		return conv_fail(c, path, "must be an array of schemas"), NULL;
	if (!json_array_size(all))
		return conv_fail(c, path, "must not be empty"), NULL;
	json_array_foreach(all, i, child)
	{
		if (conv_all_of_member(c, child, path, &props, &n, &enums))
			goto out;
	}
	if (enums.n)
		body = conv_enums_common(&enums, json_array_size(all));
	if (!body)
		body = conv_object_rule(c, props, n, name, NULL, false, path);
	if (body)
		r = conv_add(c, rule_name, body);
out:
	conv_enums_free(&enums);
	free(body);
	conv_props_free(props, n);
	return r;
}
