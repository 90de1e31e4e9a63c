/* SPDX-License-Identifier: MIT */
/*
 * Model stores: the directories where other tools keep the models a user
 * already has, mounted as they are (Documentation/stores.md).
 *
 *   ollama    MODELS/manifests/HOST/NAMESPACE/MODEL/TAG (JSON, its layers
 *             by media type) and MODELS/blobs/sha256-HEX     store_ollama.c
 *   hf        the Hugging Face hub cache: models--ORG--NAME/{refs/main,
 *             snapshots/REV/FILE -> ../../blobs/HASH}          store_hf.c
 *   lmstudio  LM Studio: PUBLISHER/REPO/FILE.gguf             store_files.c
 *   llamacpp  llama.cpp's flat download cache: ORG_REPO_FILE.gguf beside
 *             manifest=ORG=REPO=TAG.json                      store_files.c
 *
 * A scan (one per kind) lists what a store holds now as items: the name
 * the store gives each model, the GGUF to load, what else the store says
 * (Ollama's params, system prompt, template), or why the model cannot be
 * loaded (a broken manifest, a missing blob, a dangling link: the item's
 * error, which becomes the model's one errors line). store.c turns items
 * into model directories and, when inotify says the store changed, scans
 * again and adds or removes directories to match; store_watch.c is the
 * watching thread. Nothing is ever written into a store.
 */
#ifndef LLMFS_FS_STORE_H
#define LLMFS_FS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct err;
struct fs;
struct fs_buf;
struct fs_model;
struct fs_store;
struct store_watch;

enum fs_store_kind {
	FS_STORE_OLLAMA,
	FS_STORE_HF,
	FS_STORE_LMSTUDIO,
	FS_STORE_LLAMACPP,
	FS_STORE_KINDS,
};

/* One model a scan found. Every string is owned (free with the item). */
struct fs_store_item {
	const struct fs_store *store; /* the store that holds it */
	char *name;    /* the directory wanted: the store's name, '/' as "--" */
	char *key;     /* the store's own full name for it */
	char *path;    /* the GGUF (first part of a split one), in the store */
	char *ident;   /* what changes when the model does (digests, inodes) */
	char *error;   /* NULL, or why it cannot load (one errors line) */
	char *config;  /* NULL, or key=value lines for its config file */
	char *params;  /* NULL, or the store's parameters as "k=v k=v" */
	char *ignored; /* NULL, or parameters llmfs has no use for */
	char *tmpl;    /* NULL, or the store's own chat template */
	uint32_t n_ctx; /* the store's context length, 0 if it names none */
};

struct fs_store_list {
	struct fs_store_item **v;
	size_t n, cap;
};

/* A kind of store: its name, how to recognize and how to read one. */
struct fs_store_ops {
	const char *name; /* "ollama", as --store names it */
	/* Does dir look like a store of this kind? */
	bool (*detect)(const char *dir);
	/*
	 * Append an item per model of root to out. 0, or -ENOMEM (out then
	 * holds what was found so far); trouble with one model is that
	 * item's error, never a failed scan.
	 */
	int (*scan)(const struct fs_store *st, const char *root,
		    struct fs_store_list *out);
	/*
	 * Where this kind lives when --store names no path: the first of
	 * its usual places that is a directory, into out; -ENOENT if none.
	 */
	int (*default_root)(char *out, size_t cap);
};

extern const struct fs_store_ops fs_store_ollama;
extern const struct fs_store_ops fs_store_hf;
extern const struct fs_store_ops fs_store_lmstudio;
extern const struct fs_store_ops fs_store_llamacpp;

/* ---- items and lists (store.c) ---------------------------------------- */

/*
 * A new item of st for the model named key, its directory name derived
 * from key ('/' as "--"); NULL when out of memory. The scanner fills in
 * the rest with fs_store_set.
 */
struct fs_store_item *fs_store_item_new(const struct fs_store *st,
					const char *key);
void fs_store_item_free(struct fs_store_item *it);
/* *field = printf(fmt, ...), replacing what it held; -ENOMEM. */
int fs_store_set(char **field, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* it->error = printf(fmt, ...): -ENOENT (it cannot load), or -ENOMEM. */
int fs_store_error(struct fs_store_item *it, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Takes it (freed on failure): 0 or -ENOMEM. */
int fs_store_list_add(struct fs_store_list *l, struct fs_store_item *it);
void fs_store_list_free(struct fs_store_list *l);

/* ---- helpers for the scanners (store.c) ------------------------------- */

/* The whole file at path, NUL-terminated, at most max bytes: 0 or -errno. */
int fs_store_read_file(const char *path, size_t max, char **out, size_t *len);
bool fs_store_is_dir(const char *path);
/* $HOME, else the user's home from passwd (a service has no $HOME). */
const char *fs_store_home(void);
/* snprintf into a path buffer: 0, or -ENAMETOOLONG when it did not fit. */
int fs_store_path(char *out, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The names in a directory, sorted, without the dot ones. */
struct fs_store_names {
	char **v;
	size_t n, cap;
};
/* 0 (an empty list for a directory that cannot be read), or -ENOMEM. */
int fs_store_names(const char *dir, struct fs_store_names *out);
void fs_store_names_free(struct fs_store_names *l);
/* llama.cpp's split name PREFIX-0000K-of-0000N.gguf: K and N, else 1, 1. */
void fs_store_split(const char *file, unsigned *no, unsigned *count);
/*
 * Is a .gguf file a model llama.cpp would load, not a vision projector,
 * an imatrix or a draft head (download.cpp, gguf_filename_is_model), and
 * not a later part of a split model?
 */
bool fs_store_gguf_is_model(const char *file);
/*
 * llama.cpp's tag of a model file (get_gguf_split_info): the last
 * [-.]WORD of its stem, split suffix removed, upper case ("Q4_K_M");
 * else the stem itself. out is at least 256 bytes.
 */
void fs_store_gguf_tag(const char *file, char *out, size_t cap);
/*
 * Check that every part of the model at path exists: 0, or the item's
 * error set (a dangling link, a missing part) and -ENOENT; -ENOMEM.
 */
int fs_store_check_parts(struct fs_store_item *it, const char *path);

/* ---- the daemon's side (store.c, store_watch.c) ------------------------ */

/* "ollama", or "ollama:PATH": the kind and its root. -EINVAL with a line. */
int fs_store_parse(const char *arg, enum fs_store_kind *kind, char *root,
		   size_t cap, struct err *err);
/* The kind dir is a store of, or -1 (a plain directory of files). */
int fs_store_detect(const char *dir);
/*
 * Open a store of kind at root and make a model directory for each of
 * its models (not started: the mount starts every model). 0, or -errno
 * with the reason in err (the mount fails).
 */
int fs_store_open(struct fs *fs, enum fs_store_kind kind, const char *root,
		  struct err *err);
/* Watch every store for changes (a thread); after the models started. */
int fs_store_watch_start(struct fs *fs);
/* Stop watching, and end the retirements waiting; any thread, twice ok. */
void fs_store_stop(struct fs *fs);
void fs_store_free(struct fs *fs);

/* store_watch.c: the inotify thread, its start and stop. */
void fs_store_watch_stop(struct fs *fs);
/* For it: the stores, their roots, the slot for its state. */
size_t fs_store_count(struct fs *fs);
const char *fs_store_root(struct fs *fs, size_t store);
struct store_watch **fs_store_watch_state(struct fs *fs);
/* The store changed: scan it at the next fs_store_rescan. */
void fs_store_mark(struct fs *fs, size_t store);
/* Scan the stores marked (all: every one) and apply what changed. */
void fs_store_rescan(struct fs *fs, bool all);

/* For models and info: "ollama:/root/.ollama/models" or "file:PATH". */
int fs_store_source(struct fs_model *fm, struct fs_buf *b);
/* info's lines of a store's model (source, source_name, ...). */
int fs_store_info(struct fs_model *fm, struct fs_buf *b);

#endif
