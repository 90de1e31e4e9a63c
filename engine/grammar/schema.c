// SPDX-License-Identifier: MIT
/*
 * JSON schema -> GBNF, as llama.cpp's json_schema_to_grammar makes it
 * (common/json-schema.cpp reads the schema, common/json-schema-to-
 * grammar.cpp writes the rules), so that json_schema= constrains an answer
 * to the very language llama-server's json_schema does:
 *
 *   {"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}
 *   ->  root ::= "{" space n-kv space "}"
 *       n-kv ::= "\"n\"" space ":" space integer  ...
 *
 * What it reads: type (one or a list), enum, const, anyOf/oneOf, allOf
 * (objects merged), $ref into the same document, properties, required,
 * additionalProperties, items/prefixItems, minItems/maxItems, minLength/
 * maxLength, pattern (anchored ^...$ regular expressions), format (date,
 * time, date-time, uuid), minimum/maximum/exclusive* of integers. A
 * schema that is not one fails with -EINVAL naming its JSON pointer
 * ("#/properties/age: ..."); JSON that does not parse names the line and
 * column. An unsupported pattern accepts any string, as llama.cpp does.
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

/* ---- the converter ----------------------------------------------------- */

int conv_fail(struct conv *c, const char *path, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	if (c->rc)
		return c->rc;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->rc = err_set(c->err, EINVAL, "json_schema: %.120s: %s", path, msg);
	return c->rc;
}

int conv_nomem(struct conv *c)
{
	if (!c->rc)
		c->rc = err_set(c->err, ENOMEM, "json_schema: out of memory");
	return c->rc;
}

const char *conv_find(const struct conv *c, const char *name)
{
	for (size_t i = 0; i < c->n_rules; i++)
		if (!strcmp(c->rules[i].name, name))
			return c->rules[i].body;
	return NULL;
}

static int conv_put(struct conv *c, const char *name, const char *body)
{
	char *b = strdup(body), *n;

	if (!b)
		return conv_nomem(c);
	for (size_t i = 0; i < c->n_rules; i++)
		if (!strcmp(c->rules[i].name, name)) {
			free(c->rules[i].body);
			c->rules[i].body = b;
			return 0;
		}
	if (c->n_rules == c->cap_rules) {
		size_t cap = c->cap_rules ? 2 * c->cap_rules : 32;
		struct schema_rule *r = realloc(c->rules, cap * sizeof(*r));

		if (!r) {
			free(b);
			return conv_nomem(c);
		}
		c->rules = r;
		c->cap_rules = cap;
	}
	n = strdup(name);
	if (!n) {
		free(b);
		return conv_nomem(c);
	}
	c->rules[c->n_rules].name = n;
	c->rules[c->n_rules].body = b;
	c->n_rules++;
	return 0;
}

/* Runs of characters other than [a-zA-Z0-9-] become one '-'. */
static char *conv_rule_name(const char *name)
{
	size_t n = strlen(name), k = 0;
	char *s = malloc(n + 1);

	if (!s)
		return NULL;
	for (size_t i = 0; i < n;) {
		char ch = name[i];

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-') {
			s[k++] = ch;
			i++;
			continue;
		}
		s[k++] = '-';
		while (i < n &&
		       !((name[i] >= 'a' && name[i] <= 'z') ||
			 (name[i] >= 'A' && name[i] <= 'Z') ||
			 (name[i] >= '0' && name[i] <= '9') || name[i] == '-'))
			i++;
	}
	s[k] = '\0';
	return s;
}

/*
 * _add_rule: name (made a valid rule name) gets body, or name<i> with the
 * first i whose rule is absent or the same. Returns the rule's name
 * (malloc'ed), NULL on failure.
 */
char *conv_add(struct conv *c, const char *name, const char *body)
{
	char *esc = conv_rule_name(name), *key;
	const char *have;
	char num[24];

	if (!esc || c->rc) {
		free(esc);
		if (!c->rc)
			conv_nomem(c);
		return NULL;
	}
	have = conv_find(c, esc);
	if (!have || !strcmp(have, body)) {
		if (conv_put(c, esc, body)) {
			free(esc);
			return NULL;
		}
		return esc;
	}
	for (unsigned i = 0;; i++) {
		snprintf(num, sizeof(num), "%u", i);
		key = str_cat(esc, num);
		if (!key) {
			free(esc);
			conv_nomem(c);
			return NULL;
		}
		have = conv_find(c, key);
		if (!have || !strcmp(have, body))
			break;
		free(key);
	}
	free(esc);
	if (conv_put(c, key, body)) {
		free(key);
		return NULL;
	}
	return key;
}

/* ---- primitives -------------------------------------------------------- */

static const char schema_space[] = "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}";

struct schema_builtin {
	const char *name, *body, *deps[6];
};

static const struct schema_builtin schema_builtins[] = {
	{ "boolean", "(\"true\" | \"false\")", { 0 } },
	{ "decimal-part", "[0-9]{1,16}", { 0 } },
	{ "integral-part", "[0] | [1-9] [0-9]{0,15}", { 0 } },
	{ "number",
	  "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? "
	  "integral-part)?",
	  { "integral-part", "decimal-part" } },
	{ "integer", "(\"-\"? integral-part)", { "integral-part" } },
	{ "value",
	  "object | array | string | number | boolean | null",
	  { "object", "array", "string", "number", "boolean", "null" } },
	{ "object",
	  "\"{\" space ( string \":\" space value (\",\" space string \":\" "
	  "space value)* )? space \"}\"",
	  { "string", "value" } },
	{ "array",
	  "\"[\" space ( value (\",\" space value)* )? space \"]\"",
	  { "value" } },
	{ "uuid",
	  "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} "
	  "\"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} \"\\\"\"",
	  { 0 } },
	{ "char",
	  "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" "
	  "[0-9a-fA-F]{4})",
	  { 0 } },
	{ "string", "\"\\\"\" char* \"\\\"\"", { "char" } },
	{ "null", "\"null\"", { 0 } },
	/* string formats */
	{ "date",
	  "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | "
	  "[1-2] [0-9] | \"3\" [0-1] )",
	  { 0 } },
	{ "time",
	  "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( "
	  "\".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | \"-\" ) ( [01] [0-9] | \"2\" "
	  "[0-3] ) \":\" [0-5] [0-9] )",
	  { 0 } },
	{ "date-time", "date \"T\" time", { "date", "time" } },
	{ "date-string", "\"\\\"\" date \"\\\"\"", { "date" } },
	{ "time-string", "\"\\\"\" time \"\\\"\"", { "time" } },
	{ "date-time-string", "\"\\\"\" date-time \"\\\"\"", { "date-time" } },
};

static const struct schema_builtin *conv_builtin(const char *name)
{
	for (size_t i = 0;
	     i < sizeof(schema_builtins) / sizeof(schema_builtins[0]); i++)
		if (!strcmp(schema_builtins[i].name, name))
			return &schema_builtins[i];
	return NULL;
}

static bool conv_reserved(const char *name)
{
	return !strcmp(name, "root") || conv_builtin(name);
}

/* _add_primitive: the rule and, once, the rules it uses. */
char *conv_primitive(struct conv *c, const char *name, const char *builtin)
{
	const struct schema_builtin *b = conv_builtin(builtin);
	char *n = conv_add(c, name, b->body);

	for (size_t i = 0; n && i < 6 && b->deps[i]; i++) {
		if (!conv_find(c, b->deps[i])) {
			char *d = conv_primitive(c, b->deps[i], b->deps[i]);

			if (!d) {
				free(n);
				return NULL;
			}
			free(d);
		}
	}
	return n;
}

/* ---- schemas ----------------------------------------------------------- */

char *path_cat(const char *path, const char *a, const char *b)
{
	size_t n = strlen(path) + strlen(a) + (b ? strlen(b) : 0) + 1;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s%s%s", path, a, b ? b : "");
	return p;
}

char *name_cat(const char *name, const char *part)
{
	size_t n = strlen(name) + strlen(part) + 2;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s%s%s", name, *name ? "-" : "", part);
	return p;
}

bool conv_has(const json_t *s, const char *key)
{
	return json_object_get(s, key) != NULL;
}

/* get_count: a non-negative integer, def when absent; -1 on error */
int conv_count(struct conv *c, const json_t *s, const char *key,
	       const char *path, int def)
{
	json_t *v = json_object_get(s, key);

	if (!v)
		return def;
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		conv_fail(c, path, "%s must be a non-negative integer", key);
		return -2;
	}
	return json_integer_value(v) > INT32_MAX ? INT32_MAX :
						   (int)json_integer_value(v);
}

/* get_format: 0 none, 1 date, 2 time, 3 date-time, 4 uuid; -1 error */
int conv_format(struct conv *c, const json_t *s, const char *path)
{
	json_t *v = json_object_get(s, "format");
	const char *f;

	if (!v)
		return 0;
	if (!json_is_string(v)) {
		conv_fail(c, path, "format must be a string");
		return -1;
	}
	f = json_string_value(v);
	if (!strcmp(f, "date"))
		return 1;
	if (!strcmp(f, "time"))
		return 2;
	if (!strcmp(f, "date-time"))
		return 3;
	if (!strcmp(f, "uuid") || (strlen(f) == 5 && !strncmp(f, "uuid", 4) &&
				   f[4] >= '1' && f[4] <= '5'))
		return 4;
	return 0;
}

/* json-schema.cpp's build_node: what kind of schema s is. */
int conv_kind(struct conv *c, const json_t *s, const char *path,
	      enum schema_kind *k)
{
	json_t *type, *add;
	const char *t;
	bool has_properties;

	if (!json_is_object(s))
		return conv_fail(c, path, "schema must be an object");
	if (conv_has(s, "$ref")) {
		*k = KIND_REF;
		return 0;
	}
	if (conv_has(s, "oneOf") || conv_has(s, "anyOf")) {
		*k = KIND_ANY_OF;
		return 0;
	}
	type = json_object_get(s, "type");
	if (json_is_array(type)) {
		if (!json_array_size(type))
			return conv_fail(c, path, "type must not be empty");
		*k = KIND_ANY_OF;
		return 0;
	}
	if (conv_has(s, "const")) {
		*k = KIND_CONST;
		return 0;
	}
	if (conv_has(s, "enum")) {
		json_t *e = json_object_get(s, "enum");

		if (!json_is_array(e) || !json_array_size(e))
			return conv_fail(c, path,
					 "enum must be a non-empty array");
		*k = KIND_ENUM;
		return 0;
	}
	if (type && !json_is_null(type) && !json_is_string(type))
		return conv_fail(
			c, path,
			"type must be a string or an array of strings");
	t = json_is_string(type) ? json_string_value(type) : "";
	add = json_object_get(s, "additionalProperties");
	has_properties = conv_has(s, "properties") ||
			 (add && !json_is_true(add));
	if (!*t) {
		int f = conv_format(c, s, path);

		if (f < 0)
			return c->rc;
		if (has_properties)
			*k = KIND_OBJECT;
		else if (conv_has(s, "allOf"))
			*k = KIND_ALL_OF;
		else if (conv_has(s, "items") || conv_has(s, "prefixItems"))
			*k = KIND_ARRAY;
		else if (conv_has(s, "pattern") || conv_has(s, "minLength") ||
			 conv_has(s, "maxLength") || f)
			*k = KIND_STRING;
		else
			*k = KIND_ANY;
	} else if (!strcmp(t, "object")) {
		*k = !has_properties && conv_has(s, "allOf") ? KIND_ALL_OF :
							       KIND_OBJECT;
	} else if (!strcmp(t, "string")) {
		*k = conv_has(s, "allOf") ? KIND_ALL_OF : KIND_STRING;
	} else if (!strcmp(t, "array")) {
		*k = KIND_ARRAY;
	} else if (!strcmp(t, "integer")) {
		*k = KIND_INTEGER;
	} else if (!strcmp(t, "number")) {
		*k = KIND_NUMBER;
	} else if (!strcmp(t, "boolean")) {
		*k = KIND_BOOLEAN;
	} else if (!strcmp(t, "null")) {
		*k = KIND_NULL;
	} else {
		return conv_fail(c, path, "unrecognized type %.60s", t);
	}
	if (*k == KIND_ARRAY) {
		json_t *items = json_object_get(s, "items");

		if (!items)
			items = json_object_get(s, "prefixItems");
		if (json_is_array(items))
			*k = KIND_TUPLE;
	}
	return 0;
}

/* The target of "#/a/b/0" in the document. */
json_t *conv_resolve(struct conv *c, const char *ref, const char *path)
{
	json_t *t = c->root;
	const char *p = ref + 1;

	if (strncmp(ref, "#/", 2))
		return conv_fail(c, path,
				 "unsupported $ref %.80s, only references into "
				 "the same document are supported",
				 ref),
		       NULL;
	/* split on '/', skipping the empty piece before the first one */
	while (*p == '/') {
		const char *q = strchr(p + 1, '/');
		size_t n = q ? (size_t)(q - p - 1) : strlen(p + 1);
		char *sel = strndup(p + 1, n);

		if (!sel)
			return conv_nomem(c), NULL;
		if (json_is_object(t) && json_object_get(t, sel)) {
			t = json_object_get(t, sel);
		} else if (json_is_array(t)) {
			char *end;
			unsigned long long idx = strtoull(sel, &end, 10);

			if (end == sel || idx >= json_array_size(t)) {
				conv_fail(c, path,
					  "cannot resolve $ref %.80s, %.40s is "
					  "out of range",
					  ref, sel);
				free(sel);
				return NULL;
			}
			t = json_array_get(t, idx);
		} else {
			conv_fail(c, path,
				  "cannot resolve $ref %.80s, %.40s not found",
				  ref, sel);
			free(sel);
			return NULL;
		}
		free(sel);
		p += n + 1;
	}
	return t;
}

static char *conv_ref(struct conv *c, json_t *s, const char *path)
{
	json_t *v = json_object_get(s, "$ref");
	const char *ref, *frag;
	char *name, *esc;
	json_t *target;

	if (!json_is_string(v))
		return conv_fail(c, path, "$ref must be a string"), NULL;
	ref = json_string_value(v);
	if (!(target = conv_resolve(c, ref, path)))
		return NULL;
	frag = strchr(ref, '#') ? strchr(ref, '#') + 1 : ref;
	esc = conv_rule_name(frag);
	name = esc ? str_cat("ref", esc) : NULL;
	free(esc);
	if (!name)
		return conv_nomem(c), NULL;
	if (!conv_find(c, name)) {
		char **r;
		char *got;

		for (size_t i = 0; i < c->n_resolving; i++)
			if (!strcmp(c->resolving[i], ref))
				return name;
		r = realloc(c->resolving, (c->n_resolving + 1) * sizeof(*r));
		if (!r) {
			free(name);
			return conv_nomem(c), NULL;
		}
		c->resolving = r;
		c->resolving[c->n_resolving++] = (char *)ref;
		got = conv_visit(c, target, name, ref);
		c->n_resolving--;
		free(name);
		return got;
	}
	return name;
}

/* visit: the name of the rule for schema s. */
char *conv_visit(struct conv *c, json_t *s, const char *name, const char *path)
{
	char *rule_name, *r = NULL, *body = NULL;
	enum schema_kind k;
	struct sb b = { 0 };

	if (c->rc)
		return NULL;
	if (++c->depth > SCHEMA_DEPTH_MAX) {
		c->depth--;
		return conv_fail(c, path, "nested too deeply"), NULL;
	}
	if (conv_kind(c, s, path, &k)) {
		c->depth--;
		return NULL;
	}
	rule_name = conv_reserved(name) ? str_cat(name, "-") :
		    *name		? strdup(name) :
					  strdup("root");
	if (!rule_name) {
		c->depth--;
		return conv_nomem(c), NULL;
	}
	switch (k) {
	case KIND_REF: body = conv_ref(c, s, path); break;
	case KIND_ANY_OF: body = conv_union(c, s, name, path); break;
	case KIND_ALL_OF: r = conv_all_of(c, s, name, rule_name, path); break;
	case KIND_CONST: conv_constant(&b, json_object_get(s, "const")); break;
	case KIND_ENUM: {
		json_t *v;
		size_t i;

		sb_add(&b, "(");
		json_array_foreach(json_object_get(s, "enum"), i, v)
		{
			if (i)
				sb_add(&b, " | ");
			conv_constant(&b, v);
		}
		sb_add(&b, ")");
		break;
	}
	case KIND_OBJECT: r = conv_object(c, s, name, rule_name, path); break;
	case KIND_TUPLE:
	case KIND_ARRAY:
		r = conv_array(c, s, name, rule_name, path, k == KIND_TUPLE);
		break;
	case KIND_STRING: r = conv_string(c, s, rule_name, path); break;
	case KIND_INTEGER: r = conv_integer(c, s, rule_name, path); break;
	case KIND_NUMBER:
		r = conv_primitive_rule(c, rule_name, "number");
		break;
	case KIND_BOOLEAN:
		r = conv_primitive_rule(c, rule_name, "boolean");
		break;
	case KIND_NULL: r = conv_primitive_rule(c, rule_name, "null"); break;
	case KIND_ANY: body = conv_primitive(c, "value", "value"); break;
	}
	if (k == KIND_CONST || k == KIND_ENUM) {
		if (b.oom)
			conv_nomem(c);
		else
			r = conv_add(c, rule_name, b.p);
	} else if (body) {
		r = conv_add(c, rule_name, body);
	}
	if (!r && !c->rc)
		conv_nomem(c);
	sb_free(&b);
	free(body);
	free(rule_name);
	c->depth--;
	return c->rc ? (free(r), NULL) : r;
}

static int conv_rule_cmp(const void *pa, const void *pb)
{
	const struct schema_rule *a = pa, *b = pb;

	return strcmp(a->name, b->name);
}

int engine_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf,
			       struct err *err)
{
	struct conv c = { .err = err };
	json_error_t jerr;
	struct sb out = { 0 };
	char *root;

	*gbnf = NULL;
	c.root = json_loadb(schema, len, JSON_DECODE_ANY | JSON_ALLOW_NUL,
			    &jerr);
	if (!c.root)
		return err_set(err, EINVAL,
			       "json_schema: line %d column %d: %s", jerr.line,
			       jerr.column, jerr.text);
	if (conv_put(&c, "space", schema_space))
		goto out;
	root = conv_visit(&c, c.root, "", "#");
	free(root);
	if (c.rc)
		goto out;
	qsort(c.rules, c.n_rules, sizeof(*c.rules), conv_rule_cmp);
	for (size_t i = 0; i < c.n_rules; i++) {
		sb_add(&out, c.rules[i].name);
		sb_add(&out, " ::= ");
		sb_add(&out, c.rules[i].body);
		sb_add(&out, "\n");
	}
	if (out.oom)
		conv_nomem(&c);
	else
		*gbnf = sb_take(&out);
out:
	sb_free(&out);
	for (size_t i = 0; i < c.n_rules; i++) {
		free(c.rules[i].name);
		free(c.rules[i].body);
	}
	free(c.rules);
	free(c.resolving);
	json_decref(c.root);
	return c.rc;
}

int engine_grammar_from_json_schema(struct engine_grammar **out,
				    const struct engine_model *m,
				    const char *schema, size_t len,
				    struct err *err)
{
	char *gbnf;
	int rc;

	*out = NULL;
	if ((rc = engine_json_schema_to_gbnf(schema, len, &gbnf, err)))
		return rc;
	rc = engine_grammar_new(out, m, gbnf, strlen(gbnf), err);
	if (rc == -EINVAL) {
		char msg[sizeof(err->msg)];

		/* a schema llama.cpp turns into GBNF its parser refuses */
		snprintf(msg, sizeof(msg), "%s", err->msg);
		err_set(err, EINVAL, "json_schema: the schema's grammar: %s",
			msg);
	}
	free(gbnf);
	return rc;
}
