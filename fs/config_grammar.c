// SPDX-License-Identifier: MIT
/*
 * The constrained-output keys of `config`: format=json, json_schema= and
 * grammar=, compiled for the model when written, so that a bad grammar or
 * schema fails the write (EINVAL, and an errors line naming the position)
 * rather than a later answer.
 *
 *   $ echo format=json > /mnt/llm/qwen/config
 *   $ echo 'json_schema={"type":"object","properties":{"n":{"type":"integer"}}}' > config
 *   $ echo json_schema=/home/me/person.schema.json > config
 *   $ printf 'grammar=root ::= "yes" | "no"\n' > config
 *   $ echo grammar=/home/me/list.gbnf > config
 *   $ echo format= > config                       # free text again
 *
 * A value starting with '/' names a file, read by the daemon: only for a
 * writer with the daemon's own uid or root (another user would read what
 * the daemon may read); others write the text itself. An inline grammar
 * takes C escapes (\n between rules), as stop strings do.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* A grammar or schema file larger than this is refused. */
#define CONFIG_GRAMMAR_FILE_MAX (1u << 20)

void fs_config_grammar_free(struct fs_config *c)
{
	free(c->format);
	free(c->json_schema);
	free(c->grammar);
	engine_grammar_unref(c->compiled);
	c->format = c->json_schema = c->grammar = NULL;
	c->compiled = NULL;
}

static int config_dup(char **dst, const char *src)
{
	*dst = NULL;
	if (src && !(*dst = strdup(src)))
		return -ENOMEM;
	return 0;
}

int fs_config_grammar_copy(struct fs_config *dst, const struct fs_config *src)
{
	if (config_dup(&dst->format, src->format) ||
	    config_dup(&dst->json_schema, src->json_schema) ||
	    config_dup(&dst->grammar, src->grammar)) {
		fs_config_grammar_free(dst);
		return -ENOMEM;
	}
	dst->compiled = engine_grammar_ref(src->compiled);
	return 0;
}

/* The whole of path into *text (NUL-terminated), for uid. */
static int config_read_file(const char *key, const char *path,
			    const struct fs_config_source *src, char **text,
			    size_t *len, struct err *err)
{
	struct stat st;
	ssize_t got = 0;
	size_t n = 0;
	char *buf;
	int fd;

	if (src->uid != 0 && src->uid != geteuid())
		return err_set(err, EACCES,
			       "config: %s: only the mount's owner and root "
			       "may name a file; write the %s itself",
			       key, key);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return err_set(err, EINVAL, "config: %s: %.200s: %s", key, path,
			       strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > CONFIG_GRAMMAR_FILE_MAX) {
		close(fd);
		return err_set(err, EINVAL,
			       "config: %s: %.200s: not a regular file of at "
			       "most %u bytes",
			       key, path, CONFIG_GRAMMAR_FILE_MAX);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return err_set(err, ENOMEM, "config: out of memory");
	}
	while (n < (size_t)st.st_size &&
	       (got = read(fd, buf + n, (size_t)st.st_size - n)) > 0)
		n += (size_t)got;
	close(fd);
	if (got < 0) {
		free(buf);
		return err_set(err, EINVAL, "config: %s: %.200s: %s", key, path,
			       strerror(errno));
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}

/* \n \t \r \\ \xHH, as stop strings take them; -EINVAL for another. */
static int config_unescape_all(const char *v, char **out, size_t *len)
{
	char *s = malloc(strlen(v) + 1);
	size_t n = 0;

	if (!s)
		return -ENOMEM;
	for (; *v; v++) {
		char c = *v;

		if (c == '\\') {
			unsigned x;

			switch (*++v) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case '\\': c = '\\'; break;
			case 'x':
				if (!v[1] || !v[2] ||
				    sscanf(v + 1, "%2x", &x) != 1 || !x ||
				    !strchr("0123456789abcdefABCDEF", v[1]) ||
				    !strchr("0123456789abcdefABCDEF", v[2])) {
					free(s);
					return -EINVAL;
				}
				c = (char)x;
				v += 2;
				break;
			default: free(s); return -EINVAL;
			}
		}
		s[n++] = c;
	}
	s[n] = '\0';
	*out = s;
	*len = n;
	return 0;
}

/* Compile text (len bytes) as key says; the message says where. */
static int config_compile(enum fs_config_key k, const char *v, const char *text,
			  size_t len, const struct engine_model *m,
			  struct engine_grammar **out, struct err *err)
{
	char msg[sizeof(err->msg)];
	int rc;

	if (k == FS_CONFIG_FORMAT)
		rc = engine_grammar_new(out, m, engine_grammar_json,
					strlen(engine_grammar_json), err);
	else if (k == FS_CONFIG_JSON_SCHEMA)
		rc = engine_grammar_from_json_schema(out, m, text, len, err);
	else
		rc = engine_grammar_new(out, m, text, len, err);
	if (!rc)
		return 0;
	snprintf(msg, sizeof(msg), "%s", err->msg);
	if (v[0] == '/')
		return err_set(err, -rc, "config: %.200s: %s", v, msg);
	return err_set(err, -rc, "config: %s", msg);
}

int fs_config_set_grammar(struct fs_config *c, enum fs_config_key k,
			  const char *v, const struct fs_config_source *src,
			  struct err *err)
{
	const char *key = k == FS_CONFIG_FORMAT	     ? "format" :
			  k == FS_CONFIG_JSON_SCHEMA ? "json_schema" :
						       "grammar";
	struct engine_grammar *g = NULL;
	char *text = NULL, *keep = NULL;
	size_t len = 0;
	int rc;

	if (!*v) {
		fs_config_grammar_free(c);
		return 0;
	}
	if (k == FS_CONFIG_FORMAT && strcmp(v, "json"))
		return err_set(err, EINVAL,
			       "config: format: '%.64s' is not json (format= "
			       "for free text)",
			       v);
	if (src && src->remote)
		return err_set(err, EINVAL,
			       "config: %s: not for a remote model (the server "
			       "decides its sampling)",
			       key);
	if (!src || !src->m)
		return err_set(err, EINVAL,
			       "config: %s: the model is not loaded yet; write "
			       "it again when it is ready",
			       key);
	if (k != FS_CONFIG_FORMAT && v[0] == '/') {
		rc = config_read_file(key, v, src, &text, &len, err);
	} else if (k == FS_CONFIG_GRAMMAR) {
		rc = config_unescape_all(v, &text, &len);
		if (rc)
			return err_set(err, -rc,
				       rc == -ENOMEM ?
					       "config: out of memory" :
					       "config: grammar: a bad escape "
					       "(\\n \\t \\r \\\\ \\xHH)");
	} else {
		rc = (text = strdup(v)) ? 0 : -ENOMEM;
		len = strlen(v);
		if (rc)
			return err_set(err, ENOMEM, "config: out of memory");
	}
	if (!rc)
		rc = config_compile(k, v, text, len, src->m, &g, err);
	if (!rc &&
	    !(keep = strdup(k == FS_CONFIG_GRAMMAR && v[0] != '/' ? text : v)))
		rc = err_set(err, ENOMEM, "config: out of memory");
	free(text);
	if (rc) {
		engine_grammar_unref(g);
		return rc;
	}
	fs_config_grammar_free(c);
	if (k == FS_CONFIG_FORMAT)
		c->format = keep;
	else if (k == FS_CONFIG_JSON_SCHEMA)
		c->json_schema = keep;
	else
		c->grammar = keep;
	c->compiled = g;
	/* one setting: writing one clears the others, here and in merges */
	c->set |= 1u << FS_CONFIG_FORMAT | 1u << FS_CONFIG_JSON_SCHEMA |
		  1u << FS_CONFIG_GRAMMAR;
	return 0;
}
