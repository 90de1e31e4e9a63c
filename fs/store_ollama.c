// SPDX-License-Identifier: MIT
/*
 * Ollama's models directory ($OLLAMA_MODELS, ~/.ollama/models, or the
 * service's /usr/share/ollama/.ollama/models), as its manifest package
 * reads it (ollama/ollama, manifest/, types/model/name.go):
 *
 *   manifests/HOST/NAMESPACE/MODEL/TAG   JSON: schemaVersion 2, config,
 *                                        layers [{mediaType, digest, size}]
 *   blobs/sha256-HEX                     a layer, named by its digest
 *
 * A model is named as `ollama list` shows it (Name.DisplayShortest):
 * qwen3:8b for registry.ollama.ai/library/qwen3/8b, user/m:tag for another
 * namespace, host/ns/m:tag for another registry ('/' is "--" in the
 * directory's name). Its layers, by media type:
 *
 *   application/vnd.ollama.image.model     the GGUF
 *   application/vnd.ollama.image.params    JSON options: config defaults
 *   application/vnd.ollama.image.system    chat's system prompt (system=)
 *   application/vnd.ollama.image.template  its Go template, shown in info
 *   ...license, messages                   not used
 *   ...adapter, projector                  listed in info as not applied
 *
 * A manifest with no model layer (a cloud model, safetensors tensors) is
 * no model here; a manifest that is not JSON, or a layer whose blob is
 * missing, is a model that failed, with the reason (Ollama refuses such a
 * model too).
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "internal.h"
#include "store.h"

#define OLLAMA_MANIFEST_MAX (1u << 20)
#define OLLAMA_TEXT_MAX (64u << 10) /* a params, system or template blob */
#define OLLAMA_MEDIA "application/vnd.ollama.image."
#define OLLAMA_HOST "registry.ollama.ai"
#define OLLAMA_NAMESPACE "library"

static bool ollama_detect(const char *dir)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/manifests", dir);
	if (!fs_store_is_dir(path))
		return false;
	snprintf(path, sizeof(path), "%s/blobs", dir);
	return fs_store_is_dir(path);
}

static int ollama_default_root(char *out, size_t cap)
{
	const char *env = getenv("OLLAMA_MODELS"), *home = fs_store_home();

	if (env && *env && fs_store_is_dir(env)) {
		snprintf(out, cap, "%s", env);
		return 0;
	}
	if (home && *home) {
		snprintf(out, cap, "%s/.ollama/models", home);
		if (fs_store_is_dir(out))
			return 0;
	}
	/* where the Linux installer's service keeps them */
	snprintf(out, cap, "/usr/share/ollama/.ollama/models");
	return fs_store_is_dir(out) ? 0 : -ENOENT;
}

/* What a manifest's layers add up to, until they are the item's. */
struct ollama_parse {
	struct fs_store_item *it;
	const char *root;
	struct fs_buf config;  /* key=value lines: params, then system */
	struct fs_buf shown;   /* params as info shows them */
	struct fs_buf ignored; /* params with no use here */
	struct fs_buf skipped; /* layers not applied (adapter, projector) */
};

/* ---- params --------------------------------------------------------------- */

/* The options that are config keys: Ollama's name, ours. */
static const struct {
	const char *ollama, *key;
	bool integer;
} ollama_options[] = {
	{ "temperature", "temperature", false },
	{ "top_k", "top_k", true },
	{ "top_p", "top_p", false },
	{ "min_p", "min_p", false },
	{ "repeat_penalty", "repeat_penalty", false },
	{ "seed", "seed", true },
	{ "num_predict", "max_tokens", true },
};

static int ollama_list_add(struct fs_buf *b, const char *word)
{
	return fs_buf_printf(b, "%s%s", b->len ? " " : "", word);
}

/* key=value into the config lines, and Ollama's name=value into shown. */
static int ollama_set(struct ollama_parse *p, const char *ollama,
		      const char *key, const char *value)
{
	int rc = fs_buf_printf(&p->config, "%s=", key);

	if (!rc)
		rc = fs_config_escape(&p->config, value);
	if (!rc)
		rc = fs_buf_add(&p->config, "\n", 1);
	if (!rc)
		rc = fs_buf_printf(&p->shown, "%s%s=", p->shown.len ? " " : "",
				   ollama);
	return rc ? rc : fs_config_escape(&p->shown, value);
}

static int ollama_option(struct ollama_parse *p, const char *name, json_t *v)
{
	char value[64];
	double d;

	for (size_t i = 0; i < sizeof(ollama_options) / sizeof(*ollama_options);
	     i++) {
		if (strcmp(name, ollama_options[i].ollama))
			continue;
		if (!json_is_number(v))
			break;
		d = json_number_value(v);
		if (!strcmp(name, "num_predict") && d < 0)
			d = 0; /* -1 (no limit), -2 (fill the context) */
		if (!strcmp(name, "seed") && d < 0)
			break; /* -1: a random seed each time, as here */
		snprintf(value, sizeof(value),
			 ollama_options[i].integer ? "%.0f" : "%g", d);
		return ollama_set(p, name, ollama_options[i].key, value);
	}
	return ollama_list_add(&p->ignored, name);
}

static int ollama_stop(struct ollama_parse *p, json_t *v)
{
	json_t *s;
	size_t i;
	int rc = 0;

	if (json_is_string(v))
		return ollama_set(p, "stop", "stop", json_string_value(v));
	json_array_foreach(v, i, s) if (!rc && json_is_string(s))
		rc = ollama_set(p, "stop", "stop", json_string_value(s));
	return rc;
}

/* The params layer: a JSON object of Ollama's options (api.Options). */
static int ollama_params(struct ollama_parse *p, const char *text)
{
	json_t *o = json_loads(text, 0, NULL), *v;
	const char *name;
	int rc = 0;

	if (!json_is_object(o)) {
		json_decref(o);
		return fs_store_error(p->it,
				      "the params layer of %s: not a "
				      "JSON object",
				      p->it->key);
	}
	json_object_foreach(o, name, v)
	{
		if (!strcmp(name, "stop")) {
			rc = ollama_stop(p, v);
		} else if (!strcmp(name, "num_ctx") && json_is_integer(v) &&
			   json_integer_value(v) > 0 &&
			   json_integer_value(v) <= (1 << 24)) {
			p->it->n_ctx = (uint32_t)json_integer_value(v);
			rc = fs_buf_printf(&p->shown, "%snum_ctx=%u",
					   p->shown.len ? " " : "",
					   p->it->n_ctx);
		} else {
			rc = ollama_option(p, name, v);
		}
		if (rc)
			break;
	}
	json_decref(o);
	return rc;
}

/* ---- a manifest ----------------------------------------------------------- */

/* The system layer: config's system=, one line with escapes. */
static int ollama_system(struct ollama_parse *p, const char *text)
{
	int rc = fs_buf_add(&p->config, "system=", 7);

	if (!rc)
		rc = fs_config_escape(&p->config, text);
	return rc ? rc : fs_buf_add(&p->config, "\n", 1);
}

/* "sha256:HEX" as a blob's path; -ENOENT with the item's error if bad. */
static int ollama_blob(struct ollama_parse *p, const char *digest, char *path,
		       size_t cap)
{
	size_t n = digest ? strlen(digest) : 0;

	if (n != 71 || strncmp(digest, "sha256:", 7) ||
	    strspn(digest + 7, "0123456789abcdefABCDEF") != 64)
		return fs_store_error(p->it, "manifest of %s: bad digest '%s'",
				      p->it->key, digest ? digest : "");
	snprintf(path, cap, "%s/blobs/sha256-%s", p->root, digest + 7);
	return 0;
}

/* One layer: the model's path, or a small layer read whole. */
static int ollama_layer(struct ollama_parse *p, json_t *l)
{
	const char *media = json_string_value(json_object_get(l, "mediaType"));
	const char *digest = json_string_value(json_object_get(l, "digest"));
	char path[PATH_MAX], *text = NULL;
	struct stat st;
	int rc;

	if (!media || strncmp(media, OLLAMA_MEDIA, strlen(OLLAMA_MEDIA)))
		return 0;
	media += strlen(OLLAMA_MEDIA);
	if (!strcmp(media, "adapter") || !strcmp(media, "projector"))
		return ollama_list_add(&p->skipped, media);
	if (strcmp(media, "model") && strcmp(media, "params") &&
	    strcmp(media, "system") && strcmp(media, "template"))
		return 0; /* license, messages */
	if (!strcmp(media, "model") && p->it->path)
		return 0; /* the first model layer is the model */
	rc = ollama_blob(p, digest, path, sizeof(path));
	if (rc)
		return rc;
	if (!strcmp(media, "model"))
		return stat(path, &st) ? fs_store_error(p->it,
							"%s: the model layer "
							"of %s is missing",
							path, p->it->key) :
					 fs_store_set(&p->it->path, "%s", path);
	rc = fs_store_read_file(path, OLLAMA_TEXT_MAX, &text, NULL);
	if (rc && rc != -ENOMEM)
		return fs_store_error(p->it, "%s: the %s layer of %s: %s", path,
				      media, p->it->key, strerror(-rc));
	if (!rc && !strcmp(media, "params"))
		rc = ollama_params(p, text);
	else if (!rc && !strcmp(media, "template"))
		rc = fs_store_set(&p->it->tmpl, "%s", text);
	else if (!rc && *text) /* system: chat's system prompt */
		rc = ollama_system(p, text);
	free(text);
	return rc;
}

/* A parsed manifest's layers: -ENOENT (the item's error) when broken. */
static int ollama_layers(struct ollama_parse *p, const char *text)
{
	json_error_t jerr;
	json_t *m = json_loads(text, 0, &jerr), *layers, *l, *version;
	size_t i;
	int rc = 0;

	if (!m)
		return fs_store_error(p->it,
				      "manifest of %s: not JSON: %s (line %d)",
				      p->it->key, jerr.text, jerr.line);
	version = json_object_get(m, "schemaVersion");
	layers = json_object_get(m, "layers");
	if (!json_is_object(m) || (version && json_integer_value(version) != 2))
		rc = fs_store_error(p->it,
				    "manifest of %s: not a schemaVersion 2 "
				    "manifest",
				    p->it->key);
	else if (!json_is_array(layers))
		rc = fs_store_error(p->it, "manifest of %s: no layers",
				    p->it->key);
	json_array_foreach(layers, i, l) if (!rc) rc = ollama_layer(p, l);
	json_decref(m);
	return rc;
}

/* Hand what the layers gave over to the item. */
static void ollama_finish(struct ollama_parse *p)
{
	struct fs_store_item *it = p->it;

	if (p->skipped.len)
		fs_buf_printf(&p->ignored, "%slayers:%s",
			      p->ignored.len ? " " : "", p->skipped.p);
	it->config = fs_buf_detach(&p->config, NULL);
	it->params = fs_buf_detach(&p->shown, NULL);
	it->ignored = fs_buf_detach(&p->ignored, NULL);
	fs_buf_free(&p->skipped);
}

/*
 * manifests/HOST/NS/MODEL/TAG: one item, or none for a manifest that
 * names no GGUF (and is not broken).
 */
static int ollama_manifest(const struct fs_store *st, const char *root,
			   const char *const part[4], struct fs_store_list *out)
{
	struct ollama_parse p = { .root = root };
	char path[PATH_MAX], key[1024], shown[1024], *text = NULL;
	int rc;

	snprintf(key, sizeof(key), "%s/%s/%s:%s", part[0], part[1], part[2],
		 part[3]);
	/* Name.DisplayShortest */
	if (strcasecmp(part[0], OLLAMA_HOST))
		snprintf(shown, sizeof(shown), "%s", key);
	else if (strcasecmp(part[1], OLLAMA_NAMESPACE))
		snprintf(shown, sizeof(shown), "%s/%s:%s", part[1], part[2],
			 part[3]);
	else
		snprintf(shown, sizeof(shown), "%s:%s", part[2], part[3]);
	p.it = fs_store_item_new(st, shown);
	if (!p.it || fs_store_set(&p.it->key, "%s", key)) {
		fs_store_item_free(p.it);
		return -ENOMEM;
	}
	snprintf(path, sizeof(path), "%s/manifests/%s/%s/%s/%s", root, part[0],
		 part[1], part[2], part[3]);
	rc = fs_store_read_file(path, OLLAMA_MANIFEST_MAX, &text, NULL);
	if (rc == -ENOMEM)
		goto out_free;
	if (rc)
		rc = fs_store_error(p.it, "%s: %s", path, strerror(-rc));
	else
		rc = ollama_layers(&p, text);
	ollama_finish(&p);
	if (rc == -ENOMEM)
		goto out_free;
	/* the manifest names every layer: its bytes are the model's ident */
	if (fs_store_set(&p.it->ident, "%s", text ? text : "")) {
		rc = -ENOMEM;
		goto out_free;
	}
	free(text);
	if (!p.it->error && !p.it->path) {
		fs_store_item_free(p.it); /* no GGUF: not a model here */
		return 0;
	}
	if (!p.it->error && fs_store_check_parts(p.it, p.it->path) == -ENOMEM)
		return -ENOMEM;
	return fs_store_list_add(out, p.it);
out_free:
	free(text);
	fs_buf_free(&p.config);
	fs_buf_free(&p.shown);
	fs_buf_free(&p.ignored);
	fs_buf_free(&p.skipped);
	fs_store_item_free(p.it);
	return -ENOMEM;
}

/* Every manifests/HOST/NS/MODEL/TAG file, in name order. */
static int ollama_walk(const struct fs_store *st, const char *root,
		       const char *dir, const char **part, int depth,
		       struct fs_store_list *out)
{
	struct fs_store_names names;
	char path[PATH_MAX];
	int rc = fs_store_names(dir, &names);

	for (size_t i = 0; i < names.n && !rc; i++) {
		part[depth] = names.v[i];
		snprintf(path, sizeof(path), "%s/%s", dir, names.v[i]);
		if (depth < 3 && fs_store_is_dir(path))
			rc = ollama_walk(st, root, path, part, depth + 1, out);
		else if (depth == 3 && !fs_store_is_dir(path))
			rc = ollama_manifest(st, root, part, out);
	}
	fs_store_names_free(&names);
	return rc;
}

static int ollama_scan(const struct fs_store *st, const char *root,
		       struct fs_store_list *out)
{
	const char *part[4];
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s/manifests", root);
	return ollama_walk(st, root, dir, part, 0, out);
}

const struct fs_store_ops fs_store_ollama = {
	.name = "ollama",
	.detect = ollama_detect,
	.scan = ollama_scan,
	.default_root = ollama_default_root,
};
