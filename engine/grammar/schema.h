/* SPDX-License-Identifier: MIT */
/*
 * The JSON schema converter (engine_json_schema_to_gbnf), shared by its
 * files only:
 *
 *   schema.c          the rules, a schema's kind, $ref, visit, the API
 *   schema_types.c    anyOf, strings, integers, arrays
 *   schema_object.c   objects, allOf, keys that are none of some names
 *   schema_pattern.c  regular expressions -> rules
 *   schema_text.c     growing strings, literals, JSON text, integer
 *                     ranges, repetitions
 *
 * Every function that builds a rule returns its name (malloc'ed) or NULL
 * with the first failure in conv.rc and conv.err.
 */
#ifndef LLMFS_ENGINE_GRAMMAR_SCHEMA_H
#define LLMFS_ENGINE_GRAMMAR_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

struct sb {
	char *p;
	size_t n, cap;
	bool oom;
};

struct schema_rule {
	char *name, *body;
};

struct conv {
	json_t *root;
	struct schema_rule *rules;
	size_t n_rules, cap_rules;
	char **resolving; /* $refs being visited */
	size_t n_resolving;
	struct err *err;
	int rc; /* the first failure */
	unsigned depth;
};

/* Schemas nest at most this deep (a $ref cycle through types is fine). */
#define SCHEMA_DEPTH_MAX 200

enum schema_kind {
	KIND_ANY,
	KIND_REF,
	KIND_ANY_OF,
	KIND_ALL_OF,
	KIND_CONST,
	KIND_ENUM,
	KIND_NULL,
	KIND_BOOLEAN,
	KIND_NUMBER,
	KIND_INTEGER,
	KIND_STRING,
	KIND_ARRAY,
	KIND_TUPLE,
	KIND_OBJECT,
};

/* One object property (or the additional ones under "*"). */
struct conv_prop {
	const char *name;
	json_t *schema;
	char *kv; /* its key-value rule */
	bool required;
};

/* schema.c: rules by name, failures, a schema's kind, $ref, visit */
char *conv_add(struct conv *c, const char *name, const char *body);
const char *conv_find(const struct conv *c, const char *name);
int conv_nomem(struct conv *c);
char *conv_primitive(struct conv *c, const char *name, const char *builtin);
int conv_kind(struct conv *c, const json_t *s, const char *path,
	      enum schema_kind *k);
int conv_count(struct conv *c, const json_t *s, const char *key,
	       const char *path, int def);
int conv_format(struct conv *c, const json_t *s, const char *path);
bool conv_has(const json_t *s, const char *key);
json_t *conv_resolve(struct conv *c, const char *ref, const char *path);
char *conv_visit(struct conv *c, json_t *s, const char *name, const char *path);
char *name_cat(const char *name, const char *part);
char *path_cat(const char *path, const char *a, const char *b);
int conv_fail(struct conv *c, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* schema_types.c */
char *conv_primitive_rule(struct conv *c, const char *rule_name,
			  const char *type);
char *conv_union(struct conv *c, json_t *s, const char *name, const char *path);
char *conv_string(struct conv *c, json_t *s, const char *rule_name,
		  const char *path);
char *conv_integer(struct conv *c, json_t *s, const char *rule_name,
		   const char *path);
char *conv_array(struct conv *c, json_t *s, const char *name,
		 const char *rule_name, const char *path, bool tuple);

/* schema_object.c */
char *conv_object(struct conv *c, json_t *s, const char *name,
		  const char *rule_name, const char *path);
char *conv_all_of(struct conv *c, json_t *s, const char *name,
		  const char *rule_name, const char *path);

/* schema_pattern.c */
char *conv_pattern(struct conv *c, const char *pattern, const char *name,
		   const char *path);

/* schema_text.c: strings (sb_take hands the bytes over, NULL when out of
 * memory), GBNF literals, JSON text, ranges, repetitions */
void sb_add(struct sb *b, const char *s);
void sb_addn(struct sb *b, const char *s, size_t n);
void sb_free(struct sb *b);
char *sb_take(struct sb *b);
char *str_cat(const char *a, const char *b);
void conv_literal(struct sb *b, const char *s, size_t n);
void conv_dump_string(struct sb *b, const char *s, size_t n);
void conv_constant(struct sb *out, const json_t *v);
void conv_min_max(struct sb *b, int64_t min, int64_t max, int decimals,
		  bool top);
void conv_repetition(struct sb *b, const char *item, int min, int max,
		     const char *sep);
void sb_printf(struct sb *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
