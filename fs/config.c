// SPDX-License-Identifier: MIT
/*
 * The `config` files: sampling defaults of a model, and the overrides of a
 * session, as key=value lines.
 *
 *   $ printf 'temperature=0\nmax_tokens=64\n' > /mnt/llm/qwen/config
 *   $ echo 'stop=\n\n' > /mnt/llm/qwen/config      # C escapes in stop
 *
 * A write is applied all or nothing: one bad line fails the write with
 * EINVAL and the line is named in the errors file.
 */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const config_names[FS_CONFIG_COUNT] = {
	[FS_CONFIG_TEMPERATURE] = "temperature",
	[FS_CONFIG_TOP_K] = "top_k",
	[FS_CONFIG_TOP_P] = "top_p",
	[FS_CONFIG_MIN_P] = "min_p",
	[FS_CONFIG_REPEAT_PENALTY] = "repeat_penalty",
	[FS_CONFIG_SEED] = "seed",
	[FS_CONFIG_MAX_TOKENS] = "max_tokens",
	[FS_CONFIG_STOP] = "stop",
	[FS_CONFIG_SYSTEM] = "system",
	[FS_CONFIG_FORMAT] = "format",
	[FS_CONFIG_JSON_SCHEMA] = "json_schema",
	[FS_CONFIG_GRAMMAR] = "grammar",
	[FS_CONFIG_LOGPROBS] = "logprobs",
	[FS_CONFIG_THINK] = "think",
};

/* think=: by enum engine_think */
static const char *const config_think[] = {
	[ENGINE_THINK_ON] = "on",
	[ENGINE_THINK_OFF] = "off",
	[ENGINE_THINK_HIDE] = "hide",
};

/* Without a config write, a generation ends after this many tokens. */
#define CONFIG_MAX_TOKENS_DEFAULT 256
#define CONFIG_MAX_TOKENS_LIMIT (1u << 20)
#define CONFIG_STOP_LEN_MAX 256
#define CONFIG_SYSTEM_LEN_MAX (64u << 10)

void fs_config_defaults(struct fs_config *c)
{
	memset(c, 0, sizeof(*c));
	engine_sampling_defaults(&c->sampling);
	c->max_tokens = CONFIG_MAX_TOKENS_DEFAULT;
}

static void config_clear_stop(struct fs_config *c)
{
	for (size_t i = 0; i < c->n_stop; i++)
		free(c->stop[i]);
	c->n_stop = 0;
}

void fs_config_free(struct fs_config *c)
{
	config_clear_stop(c);
	free(c->system);
	c->system = NULL;
	fs_config_grammar_free(c);
}

static int config_copy_stop(struct fs_config *dst, const struct fs_config *src)
{
	dst->n_stop = 0;
	for (size_t i = 0; i < src->n_stop; i++) {
		dst->stop[i] = strdup(src->stop[i]);
		if (!dst->stop[i]) {
			config_clear_stop(dst);
			return -ENOMEM;
		}
		dst->n_stop++;
	}
	return 0;
}

int fs_config_copy(struct fs_config *dst, const struct fs_config *src)
{
	*dst = *src;
	dst->system = NULL;
	dst->format = dst->json_schema = dst->grammar = NULL;
	dst->compiled = NULL;
	if (src->system && !(dst->system = strdup(src->system))) {
		dst->n_stop = 0;
		return -ENOMEM;
	}
	if (config_copy_stop(dst, src)) {
		free(dst->system);
		dst->system = NULL;
		return -ENOMEM;
	}
	if (fs_config_grammar_copy(dst, src)) {
		config_clear_stop(dst);
		free(dst->system);
		dst->system = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int config_float(const char *v, double lo, double hi, double *out)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	/*
	 * Underflow (a subnormal or smaller, temperature=1e-320) is inside
	 * the range: strtod says ERANGE but gives the nearest value; only an
	 * overflow is refused (isfinite).
	 */
	if (errno == ERANGE && fabs(d) <= DBL_MIN)
		errno = 0;
	if (errno || end == v || *end || !isfinite(d) || d < lo || d > hi)
		return -EINVAL;
	*out = d;
	return 0;
}

static int config_uint(const char *v, unsigned long long hi,
		       unsigned long long *out)
{
	unsigned long long u;
	char *end;

	if (*v < '0' || *v > '9')
		return -EINVAL;
	errno = 0;
	u = strtoull(v, &end, 10);
	if (errno || *end || u > hi)
		return -EINVAL;
	*out = u;
	return 0;
}

/* \n \t \r \\ \xHH in stop strings and system, so that a newline can be
 * written. */
static int config_unescape(const char *v, char *out, size_t cap)
{
	size_t n = 0;

	for (; *v; v++) {
		char c = *v;

		if (c == '\\') {
			v++;
			switch (*v) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case '\\': c = '\\'; break;
			case 'x': {
				unsigned x;

				/* exactly two digits: "\x4" at the end must not
				 * step over the NUL (found by fuzz_config) */
				if (!isxdigit((unsigned char)v[1]) ||
				    !isxdigit((unsigned char)v[2]) ||
				    sscanf(v + 1, "%2x", &x) != 1 || !x)
					return -EINVAL;
				c = (char)x;
				v += 2;
				break;
			}
			default: return -EINVAL;
			}
		}
		if (n + 1 >= cap)
			return -EINVAL;
		out[n++] = c;
	}
	out[n] = '\0';
	return 0;
}

/* The system prompt: at most CONFIG_SYSTEM_LEN_MAX bytes; empty clears. */
static int config_set_system(struct fs_config *c, const char *v,
			     struct err *err)
{
	size_t n = strlen(v);
	char *s;

	if (n >= CONFIG_SYSTEM_LEN_MAX)
		return err_set(err, EINVAL,
			       "config: system: longer than %u bytes",
			       CONFIG_SYSTEM_LEN_MAX - 1);
	s = malloc(n + 1);
	if (!s)
		return err_set(err, ENOMEM, "config: out of memory");
	if (config_unescape(v, s, n + 1)) {
		free(s);
		return err_set(err, EINVAL, "config: system: bad escape");
	}
	free(c->system);
	c->system = *s ? s : NULL;
	if (!*s)
		free(s);
	c->set |= 1u << FS_CONFIG_SYSTEM;
	return 0;
}

static int config_set(struct fs_config *c, enum fs_config_key k, const char *v,
		      const struct fs_config_source *src, struct err *err)
{
	unsigned long long u;
	char s[CONFIG_STOP_LEN_MAX];
	double d;
	int rc = 0;

	switch (k) {
	case FS_CONFIG_TEMPERATURE:
		if (!(rc = config_float(v, 0, 100, &d)))
			c->sampling.temperature = d;
		break;
	case FS_CONFIG_TOP_K:
		if (!(rc = config_uint(v, INT32_MAX, &u)))
			c->sampling.top_k = u;
		break;
	case FS_CONFIG_TOP_P:
		if (!(rc = config_float(v, 0, 1, &d)))
			c->sampling.top_p = d;
		break;
	case FS_CONFIG_MIN_P:
		if (!(rc = config_float(v, 0, 1, &d)))
			c->sampling.min_p = d;
		break;
	case FS_CONFIG_REPEAT_PENALTY:
		if (!(rc = config_float(v, 0.01, 100, &d)))
			c->sampling.repeat_penalty = d;
		break;
	case FS_CONFIG_SEED:
		if (!(rc = config_uint(v, UINT64_MAX, &u)))
			c->sampling.seed = u;
		break;
	case FS_CONFIG_MAX_TOKENS:
		if (!(rc = config_uint(v, CONFIG_MAX_TOKENS_LIMIT, &u)))
			c->max_tokens = u;
		break;
	case FS_CONFIG_STOP:
		if (!*v) {
			config_clear_stop(c);
			break;
		}
		if (config_unescape(v, s, sizeof(s)))
			return err_set(
				err, EINVAL,
				"config: stop: bad escape or longer than %d bytes",
				CONFIG_STOP_LEN_MAX - 1);
		if (c->n_stop == FS_STOP_MAX)
			return err_set(
				err, EINVAL,
				"config: stop: at most %d stop strings (stop= clears)",
				FS_STOP_MAX);
		c->stop[c->n_stop] = strdup(s);
		if (!c->stop[c->n_stop])
			return err_set(err, ENOMEM, "config: out of memory");
		c->n_stop++;
		break;
	case FS_CONFIG_SYSTEM: return config_set_system(c, v, err);
	case FS_CONFIG_FORMAT:
	case FS_CONFIG_JSON_SCHEMA:
	case FS_CONFIG_GRAMMAR:
		if ((rc = fs_config_set_grammar(c, k, v, src, err)))
			return rc;
		break;
	case FS_CONFIG_LOGPROBS:
		if (!(rc = config_uint(v, FS_LOGPROBS_MAX, &u)))
			c->logprobs = u;
		break;
	case FS_CONFIG_THINK:
		rc = -EINVAL;
		for (size_t i = 0; i < 3; i++)
			if (!strcmp(v, config_think[i])) {
				c->think = (enum engine_think)i;
				rc = 0;
			}
		if (rc)
			return err_set(err, EINVAL,
				       "config: bad value for think: '%.64s' "
				       "(on off hide)",
				       v);
		break;
	default: return -EINVAL;
	}
	if (rc)
		return err_set(err, EINVAL, "config: bad value for %s: '%.64s'",
			       config_names[k], v);
	c->set |= 1u << k;
	return 0;
}

static int config_line(struct fs_config *c, char *line,
		       const struct fs_config_source *src, struct err *err)
{
	char *eq, *key = line, *val;
	size_t n;

	while (*key == ' ' || *key == '\t')
		key++;
	n = strlen(key);
	while (n &&
	       (key[n - 1] == '\r' || key[n - 1] == ' ' || key[n - 1] == '\t'))
		key[--n] = '\0';
	if (!*key || *key == '#')
		return 0;
	eq = strchr(key, '=');
	if (!eq)
		return err_set(err, EINVAL,
			       "config: expected key=value: '%.64s'", key);
	*eq = '\0';
	val = eq + 1;
	for (int k = 0; k < FS_CONFIG_COUNT; k++)
		if (!strcmp(key, config_names[k]))
			return config_set(c, k, val, src, err);
	return err_set(
		err, EINVAL,
		"config: unknown key '%.64s' (temperature top_k top_p min_p "
		"repeat_penalty seed max_tokens stop system format json_schema "
		"grammar logprobs think)",
		key);
}

int fs_config_write(struct fs_config *c, const char *text, size_t len,
		    struct err *err)
{
	return fs_config_write_for(c, text, len, NULL, err);
}

int fs_config_write_for(struct fs_config *c, const char *text, size_t len,
			const struct fs_config_source *src, struct err *err)
{
	struct fs_config tmp;
	char *copy, *line, *save;
	int rc;

	if (memchr(text, '\0', len))
		return err_set(err, EINVAL, "config: NUL byte in the text");
	copy = strndup(text, len);
	if (!copy)
		return err_set(err, ENOMEM, "config: out of memory");
	rc = fs_config_copy(&tmp, c);
	if (rc) {
		free(copy);
		return err_set(err, ENOMEM, "config: out of memory");
	}
	for (line = strtok_r(copy, "\n", &save); line && !rc;
	     line = strtok_r(NULL, "\n", &save))
		rc = config_line(&tmp, line, src, err);
	free(copy);
	if (rc) {
		fs_config_free(&tmp);
		return rc;
	}
	fs_config_free(c);
	*c = tmp;
	return 0;
}

int fs_config_merge(struct fs_config *out, const struct fs_config *base,
		    const struct fs_config *over)
{
	const struct engine_sampling *o;
	int rc = fs_config_copy(out, base);

	if (rc || !over)
		return rc;
	o = &over->sampling;
	if (over->set & (1u << FS_CONFIG_TEMPERATURE))
		out->sampling.temperature = o->temperature;
	if (over->set & (1u << FS_CONFIG_TOP_K))
		out->sampling.top_k = o->top_k;
	if (over->set & (1u << FS_CONFIG_TOP_P))
		out->sampling.top_p = o->top_p;
	if (over->set & (1u << FS_CONFIG_MIN_P))
		out->sampling.min_p = o->min_p;
	if (over->set & (1u << FS_CONFIG_REPEAT_PENALTY))
		out->sampling.repeat_penalty = o->repeat_penalty;
	if (over->set & (1u << FS_CONFIG_SEED))
		out->sampling.seed = o->seed;
	if (over->set & (1u << FS_CONFIG_MAX_TOKENS))
		out->max_tokens = over->max_tokens;
	if (over->set & (1u << FS_CONFIG_THINK))
		out->think = over->think;
	if (over->set & (1u << FS_CONFIG_STOP)) {
		config_clear_stop(out);
		rc = config_copy_stop(out, over);
	}
	if (!rc && (over->set & (1u << FS_CONFIG_SYSTEM))) {
		free(out->system);
		out->system = over->system ? strdup(over->system) : NULL;
		if (over->system && !out->system)
			rc = -ENOMEM;
	}
	if (over->set & (1u << FS_CONFIG_LOGPROBS))
		out->logprobs = over->logprobs;
	/* the three constraints are one setting: the last written wins */
	if (!rc &&
	    (over->set & (1u << FS_CONFIG_FORMAT | 1u << FS_CONFIG_JSON_SCHEMA |
			  1u << FS_CONFIG_GRAMMAR))) {
		fs_config_grammar_free(out);
		rc = fs_config_grammar_copy(out, over);
	}
	out->set = base->set | over->set;
	return rc;
}

int fs_config_escape(struct fs_buf *b, const char *s)
{
	int rc = 0;

	for (; *s && !rc; s++) {
		unsigned char c = *s;

		if (c == '\n')
			rc = fs_buf_add(b, "\\n", 2);
		else if (c == '\t')
			rc = fs_buf_add(b, "\\t", 2);
		else if (c == '\r')
			rc = fs_buf_add(b, "\\r", 2);
		else if (c == '\\')
			rc = fs_buf_add(b, "\\\\", 2);
		else if (c < 0x20 || c == 0x7f)
			rc = fs_buf_printf(b, "\\x%02x", c);
		else if (c == ' ' && !s[strspn(s, " ")])
			/* a line's trailing blanks are trimmed when read back
			 * (found by fuzz_config) */
			rc = fs_buf_add(b, "\\x20", 4);
		else
			rc = fs_buf_add(b, s, 1);
	}
	return rc;
}

int fs_config_format(const struct fs_config *c, struct fs_buf *b)
{
	const struct engine_sampling *s = &c->sampling;
	int rc;

	rc = fs_buf_printf(b,
			   "temperature=%g\ntop_k=%d\ntop_p=%g\nmin_p=%g\n"
			   "repeat_penalty=%g\nseed=%llu\nmax_tokens=%u\n",
			   s->temperature, (int)s->top_k, s->top_p, s->min_p,
			   s->repeat_penalty, (unsigned long long)s->seed,
			   c->max_tokens);
	if (!rc && !c->n_stop)
		rc = fs_buf_add(b, "stop=\n", 6);
	for (size_t i = 0; i < c->n_stop && !rc; i++) {
		rc = fs_buf_add(b, "stop=", 5);
		if (!rc)
			rc = fs_config_escape(b, c->stop[i]);
		if (!rc)
			rc = fs_buf_add(b, "\n", 1);
	}
	if (!rc)
		rc = fs_buf_add(b, "system=", 7);
	if (!rc && c->system)
		rc = fs_config_escape(b, c->system);
	if (!rc)
		rc = fs_buf_add(b, "\n", 1);
	/* a schema is one line of JSON, kept as written; a grammar escaped */
	if (!rc)
		rc = fs_buf_printf(b, "format=%s\njson_schema=%s\ngrammar=",
				   c->format ? c->format : "",
				   c->json_schema ? c->json_schema : "");
	if (!rc && c->grammar)
		rc = fs_config_escape(b, c->grammar);
	if (!rc)
		rc = fs_buf_printf(b, "\nlogprobs=%u\n", c->logprobs);
	if (!rc)
		rc = fs_buf_printf(b, "think=%s\n",
				   c->think <= ENGINE_THINK_HIDE ?
					   config_think[c->think] :
					   "on");
	return rc;
}
