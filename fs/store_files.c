// SPDX-License-Identifier: MIT
/*
 * The two stores that keep plain GGUF files, each in its own arrangement:
 *
 * LM Studio (~/.lmstudio/models, before 0.3 ~/.cache/lm-studio/models):
 * PUBLISHER/REPO/FILE.gguf, the folders named after the Hugging Face repo
 * it came from (lmstudio-community/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf). A
 * model is named as the hub cache's are, PUBLISHER/REPO:TAG.
 *
 * llama.cpp's flat download cache (~/.cache/llama.cpp, $LLAMA_CACHE), as
 * its -hf wrote it before it moved to the hub cache's layout: ORG_REPO_
 * FILE.gguf (each '/' as '_'), beside manifest=ORG=REPO=TAG.json, the hub's
 * answer for ORG/REPO:TAG, whose ggufFile.rfilename names the file. A
 * model is ORG/REPO:TAG as its --cache-list showed it; a .gguf no manifest
 * names (a Docker model pulled with -dr) is named by its file's stem.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "store.h"

/* An item for the model file at path, named key. */
static int files_model(const struct fs_store *st, const char *key,
		       const char *path, struct fs_store_list *out)
{
	struct fs_store_item *it = fs_store_item_new(st, key);
	int rc;

	if (!it || fs_store_set(&it->path, "%s", path)) {
		fs_store_item_free(it);
		return -ENOMEM;
	}
	rc = fs_store_check_parts(it, path);
	if (rc == -ENOMEM) {
		fs_store_item_free(it);
		return rc;
	}
	return fs_store_list_add(out, it);
}

/* ---- LM Studio ------------------------------------------------------------ */

/* Are there .gguf files two folders down, and none at the top? */
static bool lmstudio_detect(const char *dir)
{
	struct fs_store_names top, pub, files;
	char path[PATH_MAX], sub[PATH_MAX + 256];
	bool found = false;

	if (fs_store_names(dir, &top))
		return false;
	for (size_t i = 0; i < top.n; i++)
		if (fs_store_gguf_is_model(top.v[i])) {
			fs_store_names_free(&top);
			return false;
		}
	for (size_t i = 0; i < top.n && !found; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, top.v[i]);
		if (fs_store_names(path, &pub))
			break;
		for (size_t j = 0; j < pub.n && !found; j++) {
			snprintf(sub, sizeof(sub), "%s/%s", path, pub.v[j]);
			if (fs_store_names(sub, &files))
				break;
			for (size_t k = 0; k < files.n && !found; k++)
				found = fs_store_gguf_is_model(files.v[k]);
			fs_store_names_free(&files);
		}
		fs_store_names_free(&pub);
	}
	fs_store_names_free(&top);
	return found;
}

static int lmstudio_default_root(char *out, size_t cap)
{
	const char *home = fs_store_home();

	if (!home || !*home)
		return -ENOENT;
	snprintf(out, cap, "%s/.lmstudio/models", home);
	if (fs_store_is_dir(out))
		return 0;
	snprintf(out, cap, "%s/.cache/lm-studio/models", home);
	return fs_store_is_dir(out) ? 0 : -ENOENT;
}

static int lmstudio_repo(const struct fs_store *st, const char *pub,
			 const char *repo, const char *dir,
			 struct fs_store_list *out)
{
	struct fs_store_names files;
	char key[1024], tag[256], path[PATH_MAX];
	int rc = fs_store_names(dir, &files);

	for (size_t i = 0; i < files.n && !rc; i++) {
		if (!fs_store_gguf_is_model(files.v[i]))
			continue;
		fs_store_gguf_tag(files.v[i], tag, sizeof(tag));
		snprintf(key, sizeof(key), "%s/%s:%s", pub, repo, tag);
		if (!fs_store_path(path, sizeof(path), "%s/%s", dir,
				   files.v[i]))
			rc = files_model(st, key, path, out);
	}
	fs_store_names_free(&files);
	return rc;
}

static int lmstudio_scan(const struct fs_store *st, const char *root,
			 struct fs_store_list *out)
{
	struct fs_store_names pubs, repos;
	char path[PATH_MAX], sub[PATH_MAX];
	int rc = fs_store_names(root, &pubs);

	for (size_t i = 0; i < pubs.n && !rc; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, pubs.v[i]);
		if (!fs_store_is_dir(path) || fs_store_names(path, &repos))
			continue;
		for (size_t j = 0; j < repos.n && !rc; j++) {
			if (!fs_store_path(sub, sizeof(sub), "%s/%s", path,
					   repos.v[j]) &&
			    fs_store_is_dir(sub))
				rc = lmstudio_repo(st, pubs.v[i], repos.v[j],
						   sub, out);
		}
		fs_store_names_free(&repos);
	}
	fs_store_names_free(&pubs);
	return rc;
}

const struct fs_store_ops fs_store_lmstudio = {
	.name = "lmstudio",
	.detect = lmstudio_detect,
	.scan = lmstudio_scan,
	.default_root = lmstudio_default_root,
};

/* ---- llama.cpp's flat cache ------------------------------------------------ */

#define LLAMACPP_MANIFEST "manifest="

static bool llamacpp_is_manifest(const char *name)
{
	size_t n = strlen(name);

	return !strncmp(name, LLAMACPP_MANIFEST, strlen(LLAMACPP_MANIFEST)) &&
	       n > 5 && !strcmp(name + n - 5, ".json");
}

static bool llamacpp_detect(const char *dir)
{
	struct fs_store_names names;
	bool found = false;

	if (fs_store_names(dir, &names))
		return false;
	for (size_t i = 0; i < names.n && !found; i++)
		found = llamacpp_is_manifest(names.v[i]);
	fs_store_names_free(&names);
	return found;
}

/* fs_get_cache_directory(): LLAMA_CACHE, else XDG or ~/.cache. */
static int llamacpp_default_root(char *out, size_t cap)
{
	const char *v;

	if ((v = getenv("LLAMA_CACHE")) && *v)
		snprintf(out, cap, "%s", v);
	else if ((v = getenv("XDG_CACHE_HOME")) && *v)
		snprintf(out, cap, "%s/llama.cpp", v);
	else if ((v = fs_store_home()) && *v)
		snprintf(out, cap, "%s/.cache/llama.cpp", v);
	else
		return -ENOENT;
	return fs_store_is_dir(out) ? 0 : -ENOENT;
}

/*
 * manifest=ORG=REPO=TAG.json: the model ORG/REPO:TAG in the file its
 * ggufFile.rfilename names; *file gets that file's name in the cache.
 */
static int llamacpp_manifest(const struct fs_store *st, const char *root,
			     const char *name, char *file, size_t cap,
			     struct fs_store_list *out)
{
	char stem[512], key[1024], path[PATH_MAX], *part[4], *save, *text;
	const char *rfile = NULL;
	struct fs_store_item *it;
	json_t *m = NULL;
	int rc, n = 0;

	*file = '\0';
	snprintf(stem, sizeof(stem), "%.*s", (int)(strlen(name) - 5), name);
	for (char *p = strtok_r(stem, "=", &save); p && n < 4;
	     p = strtok_r(NULL, "=", &save))
		part[n++] = p;
	if (n != 4)
		return 0; /* not one of llama.cpp's: it skips it too */
	snprintf(key, sizeof(key), "%s/%s:%s", part[1], part[2], part[3]);
	it = fs_store_item_new(st, key);
	if (!it)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/%s", root, name);
	rc = fs_store_read_file(path, 1u << 20, &text, NULL);
	if (!rc) {
		m = json_loads(text, 0, NULL);
		rfile = json_string_value(json_object_get(
			json_object_get(m, "ggufFile"), "rfilename"));
		free(text);
	}
	if (rc == -ENOMEM)
		goto out_free;
	if (!rfile) {
		rc = fs_store_error(it, "%s: no ggufFile.rfilename in it",
				    path);
	} else {
		/* ORG/REPO + "_" + the file's path, every '/' as '_' */
		snprintf(file, cap, "%s_%s_%s", part[1], part[2], rfile);
		for (char *p = file; *p; p++)
			if (*p == '/')
				*p = '_';
		snprintf(path, sizeof(path), "%s/%s", root, file);
		rc = fs_store_set(&it->path, "%s", path);
		if (!rc)
			rc = fs_store_check_parts(it, path);
	}
	json_decref(m);
	if (rc == -ENOMEM)
		goto out_free;
	return fs_store_list_add(out, it);
out_free:
	json_decref(m);
	fs_store_item_free(it);
	return -ENOMEM;
}

static int llamacpp_scan(const struct fs_store *st, const char *root,
			 struct fs_store_list *out)
{
	struct fs_store_names names;
	char(*claimed)[256] = NULL, path[PATH_MAX], stem[256];
	size_t n_claimed = 0;
	int rc = fs_store_names(root, &names);

	if (!rc && names.n && !(claimed = calloc(names.n, sizeof(*claimed))))
		rc = -ENOMEM;
	for (size_t i = 0; i < names.n && !rc; i++)
		if (llamacpp_is_manifest(names.v[i]))
			rc = llamacpp_manifest(st, root, names.v[i],
					       claimed[n_claimed++],
					       sizeof(*claimed), out);
	/* the files no manifest names: by their stems */
	for (size_t i = 0; i < names.n && !rc; i++) {
		size_t k;

		if (!fs_store_gguf_is_model(names.v[i]))
			continue;
		for (k = 0; k < n_claimed; k++)
			if (!strcmp(claimed[k], names.v[i]))
				break;
		if (k < n_claimed)
			continue;
		snprintf(stem, sizeof(stem), "%.*s",
			 (int)(strlen(names.v[i]) - 5), names.v[i]);
		snprintf(path, sizeof(path), "%s/%s", root, names.v[i]);
		rc = files_model(st, stem, path, out);
	}
	free(claimed);
	fs_store_names_free(&names);
	return rc;
}

const struct fs_store_ops fs_store_llamacpp = {
	.name = "llamacpp",
	.detect = llamacpp_detect,
	.scan = llamacpp_scan,
	.default_root = llamacpp_default_root,
};
