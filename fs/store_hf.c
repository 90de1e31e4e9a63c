// SPDX-License-Identifier: MIT
/*
 * The Hugging Face hub cache (huggingface_hub's layout, "Understand the
 * cache" in its docs; llama.cpp's common/hf-cache.cpp reads and writes the
 * same, so its -hf downloads land here too):
 *
 *   models--ORG--NAME/refs/main            the commit "main" points at
 *   models--ORG--NAME/snapshots/COMMIT/F   a link to ../../blobs/HASH
 *   models--ORG--NAME/blobs/HASH           the bytes
 *
 * Only the snapshot refs/main names counts (else, as llama.cpp does, the
 * first other ref; else the only snapshot). Each .gguf file in it that
 * llama.cpp would take for a model (not mmproj, imatrix, a draft head, or
 * a later part of a split one) is a model named as llama.cpp's -hf and
 * --cache-list name it: ORG/NAME:TAG, TAG the quantization in the file's
 * name (ORG--NAME:Q4_K_M for the directory). A split model (F-00001-of-
 * 00003.gguf) is one model; the loader reads its parts through the
 * snapshot's links. A root that is itself a models--ORG--NAME folder is a
 * cache of one repository.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "store.h"

#define HF_PREFIX "models--"

static bool hf_is_repo(const char *dir)
{
	const char *base = strrchr(dir, '/');
	char path[PATH_MAX];

	base = base ? base + 1 : dir;
	snprintf(path, sizeof(path), "%s/snapshots", dir);
	return !strncmp(base, HF_PREFIX, strlen(HF_PREFIX)) &&
	       fs_store_is_dir(path);
}

static bool hf_detect(const char *dir)
{
	struct fs_store_names names;
	char path[PATH_MAX];
	bool found = false;

	if (hf_is_repo(dir))
		return true;
	if (fs_store_names(dir, &names))
		return false;
	for (size_t i = 0; i < names.n && !found; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names.v[i]);
		found = hf_is_repo(path);
	}
	fs_store_names_free(&names);
	return found;
}

/* huggingface_hub's order: HF_HUB_CACHE, HF_HOME/hub, XDG, ~/.cache. */
static int hf_default_root(char *out, size_t cap)
{
	const char *v;

	if ((v = getenv("HF_HUB_CACHE")) && *v)
		snprintf(out, cap, "%s", v);
	else if ((v = getenv("HF_HOME")) && *v)
		snprintf(out, cap, "%s/hub", v);
	else if ((v = getenv("XDG_CACHE_HOME")) && *v)
		snprintf(out, cap, "%s/huggingface/hub", v);
	else if ((v = fs_store_home()) && *v)
		snprintf(out, cap, "%s/.cache/huggingface/hub", v);
	else
		return -ENOENT;
	return fs_store_is_dir(out) ? 0 : -ENOENT;
}

/* A commit id as refs/ holds it: 40 hex digits (llama.cpp checks so). */
static bool hf_commit_ok(const char *s)
{
	return strlen(s) == 40 && strspn(s, "0123456789abcdef") == 40;
}

/* The commit to show: refs/main, another ref, or the only snapshot. */
static int hf_commit(const char *repo, char *commit, size_t cap)
{
	struct fs_store_names refs, snaps;
	char path[PATH_MAX], *text;
	int rc = -ENOENT;

	snprintf(path, sizeof(path), "%s/refs", repo);
	if (fs_store_names(path, &refs))
		return -ENOMEM;
	for (size_t i = 0; i <= refs.n && rc; i++) {
		/* main first, then the others in name order */
		const char *ref = i == 0 ? "main" : refs.v[i - 1];

		if (i > 0 && !strcmp(ref, "main"))
			continue;
		snprintf(path, sizeof(path), "%s/refs/%s", repo, ref);
		if (fs_store_read_file(path, 256, &text, NULL))
			continue;
		text[strcspn(text, " \t\r\n")] = '\0';
		if (hf_commit_ok(text)) {
			snprintf(commit, cap, "%s", text);
			rc = 0;
		}
		free(text);
	}
	fs_store_names_free(&refs);
	if (!rc)
		return 0;
	snprintf(path, sizeof(path), "%s/snapshots", repo);
	if (fs_store_names(path, &snaps))
		return -ENOMEM;
	if (snaps.n == 1) {
		snprintf(commit, cap, "%s", snaps.v[0]);
		rc = 0;
	}
	fs_store_names_free(&snaps);
	return rc;
}

/* One model file of a snapshot (rel: its path below the snapshot). */
static int hf_model(const struct fs_store *st, const char *repo_id,
		    const char *snap, const char *commit, const char *rel,
		    struct fs_store_list *out)
{
	char key[1024], tag[256], path[PATH_MAX];
	struct fs_store_item *it;
	int rc;

	fs_store_gguf_tag(rel, tag, sizeof(tag));
	snprintf(key, sizeof(key), "%s:%s", repo_id, tag);
	if (fs_store_path(path, sizeof(path), "%s/%s", snap, rel))
		return 0; /* no path can name it */
	it = fs_store_item_new(st, key);
	if (!it || fs_store_set(&it->path, "%s", path) ||
	    fs_store_set(&it->ident, "%s/%s", commit, rel)) {
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

/* The .gguf models below dir (a snapshot, or a folder of one). */
static int hf_walk(const struct fs_store *st, const char *repo_id,
		   const char *snap, const char *commit, const char *rel,
		   int depth, struct fs_store_list *out)
{
	struct fs_store_names names;
	char dir[PATH_MAX], sub[PATH_MAX], path[PATH_MAX + 256];
	int rc;

	snprintf(dir, sizeof(dir), "%s%s%s", snap, *rel ? "/" : "", rel);
	rc = fs_store_names(dir, &names);
	for (size_t i = 0; i < names.n && !rc; i++) {
		snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "",
			 names.v[i]);
		snprintf(path, sizeof(path), "%s/%s", dir, names.v[i]);
		if (fs_store_gguf_is_model(names.v[i]))
			rc = hf_model(st, repo_id, snap, commit, sub, out);
		else if (depth < 4 && fs_store_is_dir(path))
			rc = hf_walk(st, repo_id, snap, commit, sub, depth + 1,
				     out);
	}
	fs_store_names_free(&names);
	return rc;
}

/* models--ORG--NAME: its snapshot's models, named ORG/NAME:TAG. */
static int hf_repo(const struct fs_store *st, const char *repo,
		   struct fs_store_list *out)
{
	const char *base = strrchr(repo, '/');
	char repo_id[512], commit[256], snap[PATH_MAX];
	size_t n = 0;
	int rc;

	base = (base ? base + 1 : repo) + strlen(HF_PREFIX);
	/* "--" is the hub's '/' */
	for (const char *p = base; *p && n + 1 < sizeof(repo_id); p++) {
		if (p[0] == '-' && p[1] == '-') {
			repo_id[n++] = '/';
			p++;
		} else {
			repo_id[n++] = *p;
		}
	}
	repo_id[n] = '\0';
	rc = hf_commit(repo, commit, sizeof(commit));
	if (rc)
		return rc == -ENOMEM ? rc : 0; /* no snapshot to show */
	snprintf(snap, sizeof(snap), "%s/snapshots/%s", repo, commit);
	if (!fs_store_is_dir(snap))
		return 0;
	return hf_walk(st, repo_id, snap, commit, "", 0, out);
}

static int hf_scan(const struct fs_store *st, const char *root,
		   struct fs_store_list *out)
{
	struct fs_store_names names;
	char path[PATH_MAX];
	int rc;

	if (hf_is_repo(root))
		return hf_repo(st, root, out);
	rc = fs_store_names(root, &names);
	for (size_t i = 0; i < names.n && !rc; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, names.v[i]);
		if (hf_is_repo(path))
			rc = hf_repo(st, path, out);
	}
	fs_store_names_free(&names);
	return rc;
}

const struct fs_store_ops fs_store_hf = {
	.name = "hf",
	.detect = hf_detect,
	.scan = hf_scan,
	.default_root = hf_default_root,
};
