// SPDX-License-Identifier: MIT
/*
 * The other kinds of schema: alternatives (anyOf, oneOf, a list of
 * types), strings (pattern, format, lengths), integers (ranges), arrays
 * (items, tuples, counts), as llama.cpp's converter visits them.
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

char *conv_primitive_rule(struct conv *c, const char *rule_name,
			  const char *type)
{
	return conv_primitive(c, !strcmp(rule_name, "root") ? "root" : type,
			      type);
}

/* An alternative for each of list's schemas (or each type of a list). */
char *conv_union(struct conv *c, json_t *s, const char *name, const char *path)
{
	json_t *types = json_object_get(s, "type"), *list = NULL;
	const char *key = "type";
	struct sb u = { 0 };
	size_t n;

	if (!json_is_array(types) || conv_has(s, "$ref") ||
	    conv_has(s, "oneOf") || conv_has(s, "anyOf")) {
		key = conv_has(s, "oneOf") ? "oneOf" : "anyOf";
		list = json_object_get(s, key);
		if (!json_is_array(list))
			return conv_fail(c, path,
					 "%s must be an array of schemas", key),
			       NULL;
		if (!json_array_size(list))
			return conv_fail(c, path, "%s must not be empty", key),
			       NULL;
		n = json_array_size(list);
	} else {
		n = json_array_size(types);
	}
	for (size_t i = 0; i < n && !c->rc; i++) {
		char num[48], *alt_name, *alt_path, *r;
		json_t *alt;

		snprintf(num, sizeof(num), "%s%zu",
			 *name ? "-" : "alternative-", i);
		alt_name = str_cat(name, num);
		snprintf(num, sizeof(num), "/%zu", i);
		alt_path = path_cat(path, "/", key);
		if (alt_path) {
			char *p2 = str_cat(alt_path, num);

			free(alt_path);
			alt_path = p2;
		}
		if (list) {
			alt = json_incref(json_array_get(list, i));
		} else {
			alt = json_copy(s);
			if (alt)
				json_object_set(alt, "type",
						json_array_get(types, i));
		}
		r = alt && alt_name && alt_path ?
			    conv_visit(c, alt, alt_name, alt_path) :
			    NULL;
		if (!r && !c->rc)
			conv_nomem(c);
		if (r) {
			if (i)
				sb_add(&u, " | ");
			sb_add(&u, r);
		}
		free(r);
		json_decref(alt);
		free(alt_name);
		free(alt_path);
	}
	if (c->rc) {
		sb_free(&u);
		return NULL;
	}
	if (u.oom)
		return conv_nomem(c), NULL;
	return sb_take(&u);
}

char *conv_string(struct conv *c, json_t *s, const char *rule_name,
		  const char *path)
{
	json_t *pattern = json_object_get(s, "pattern");
	int f = conv_format(c, s, path), min, max;
	static const char *const fmt[] = { NULL, "date-string", "time-string",
					   "date-time-string" };

	if (f < 0)
		return NULL;
	if (pattern && !json_is_string(pattern))
		return conv_fail(c, path, "pattern must be a string"), NULL;
	min = conv_count(c, s, "minLength", path, 0);
	max = conv_count(c, s, "maxLength", path, -1);
	if (min < -1 || max < -1)
		return NULL;
	if (pattern && json_string_length(pattern))
		return conv_pattern(c, json_string_value(pattern), rule_name,
				    path);
	if (f == 4)
		return conv_primitive_rule(c, rule_name, "uuid");
	if (f) {
		char *p = conv_primitive(c, fmt[f], fmt[f]), *r;

		r = p ? conv_add(c, rule_name, p) : NULL;
		free(p);
		return r;
	}
	if (min > 0 || max >= 0) {
		char *ch = conv_primitive(c, "char", "char"), *r = NULL;
		struct sb b = { 0 };

		if (!ch)
			return NULL;
		sb_add(&b, "\"\\\"\" ");
		conv_repetition(&b, ch, min, max < 0 ? INT32_MAX : max, NULL);
		sb_add(&b, " \"\\\"\"");
		if (!b.oom)
			r = conv_add(c, rule_name, b.p);
		else
			conv_nomem(c);
		sb_free(&b);
		free(ch);
		return r;
	}
	return conv_primitive_rule(c, rule_name, "string");
}

/* get_bound: an integer bound, fractions rounded inwards */
static int conv_bound(struct conv *c, json_t *s, const char *key,
		      const char *path, bool round_up, int64_t *out)
{
	json_t *v = json_object_get(s, key);

	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	if (!json_is_real(v))
		return conv_fail(c, path, "%s must be a number", key);
	*out = (int64_t)(round_up ? ceil(json_real_value(v)) :
				    floor(json_real_value(v)));
	return 0;
}

char *conv_integer(struct conv *c, json_t *s, const char *rule_name,
		   const char *path)
{
	int64_t min = INT64_MIN, max = INT64_MAX;
	struct sb b = { 0 };
	char *r = NULL;

	if (conv_has(s, "minimum")) {
		if (conv_bound(c, s, "minimum", path, true, &min))
			return NULL;
	} else if (conv_has(s, "exclusiveMinimum")) {
		if (conv_bound(c, s, "exclusiveMinimum", path, false, &min))
			return NULL;
		min++;
	}
	if (conv_has(s, "maximum")) {
		if (conv_bound(c, s, "maximum", path, false, &max))
			return NULL;
	} else if (conv_has(s, "exclusiveMaximum")) {
		if (conv_bound(c, s, "exclusiveMaximum", path, true, &max))
			return NULL;
		max--;
	}
	if (min == INT64_MIN && max == INT64_MAX)
		return conv_primitive_rule(c, rule_name, "integer");
	sb_add(&b, "(");
	conv_min_max(&b, min, max, 16, true);
	sb_add(&b, ")");
	if (!b.oom)
		r = conv_add(c, rule_name, b.p);
	else
		conv_nomem(c);
	sb_free(&b);
	return r;
}

char *conv_array(struct conv *c, json_t *s, const char *name,
		 const char *rule_name, const char *path, bool tuple)
{
	const char *key = conv_has(s, "items") ? "items" : "prefixItems";
	json_t *items = json_object_get(s, key);
	char *sub = name_cat(name, ""), *r = NULL, *item = NULL;
	struct sb b = { 0 };
	int min, max;

	if (!sub)
		return conv_nomem(c), NULL;
	/* name_cat adds '-' after a name: "" stays "", "x" is "x-" */
	if (tuple) {
		json_t *it;
		size_t i;

		sb_add(&b, "\"[\" space ");
		json_array_foreach(items, i, it)
		{
			char num[40], *in, *ip;

			snprintf(num, sizeof(num), "tuple-%zu", i);
			in = str_cat(sub, num);
			snprintf(num, sizeof(num), "/%zu", i);
			ip = path_cat(path, "/", key);
			if (ip) {
				char *p2 = str_cat(ip, num);

				free(ip);
				ip = p2;
			}
			item = in && ip ? conv_visit(c, it, in, ip) : NULL;
			free(in);
			free(ip);
			if (!item)
				break;
			if (i)
				sb_add(&b, " \",\" space ");
			sb_add(&b, item);
			free(item);
			item = NULL;
		}
		sb_add(&b, " space \"]\"");
		goto done;
	}
	min = conv_count(c, s, "minItems", path, 0);
	max = conv_count(c, s, "maxItems", path, -1);
	if (min < -1 || max < -1)
		goto done;
	if (min == 0 && max < 0) {
		enum schema_kind ik = KIND_ANY;

		if (items && conv_kind(c, items, path, &ik))
			goto done;
		if (ik == KIND_ANY) {
			free(sub);
			return conv_primitive_rule(c, rule_name, "array");
		}
	}
	{
		char *in = str_cat(sub, "item"), *ip = path_cat(path, "/", key);

		if (items)
			item = in && ip ? conv_visit(c, items, in, ip) : NULL;
		else
			item = conv_primitive(c, "value", "value");
		if (!item && in && !items)
			item = NULL;
		if (in && items && !item && !c->rc)
			conv_nomem(c);
		free(in);
		free(ip);
	}
	if (item) {
		sb_add(&b, "\"[\" space ");
		conv_repetition(&b, item, min, max < 0 ? INT32_MAX : max,
				"\",\" space");
		sb_add(&b, " space \"]\"");
	}
done:
	if (!c->rc && !b.oom && b.p)
		r = conv_add(c, rule_name, b.p);
	else if (b.oom)
		conv_nomem(c);
	sb_free(&b);
	free(item);
	free(sub);
	return r;
}
