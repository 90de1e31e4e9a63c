// SPDX-License-Identifier: MIT
/*
 * Stores (store.h): a directory of another tool's models becomes one model
 * directory per model it holds, named as that tool names it, and stays in
 * step with it: when store_watch.c sees the store change, the store is
 * scanned again and the difference applied, a model that went is hidden
 * at once and freed once nobody uses it (the retire thread).
 *
 *   $ llmfs --store ollama /mnt/llm       (or: llmfs ~/.ollama/models ...)
 *   $ cat /mnt/llm/models
 *   qwen3:8b qwen3 8.2B Q4_K_M ready ollama:/root/.ollama/models
 *
 * A model is the same model as long as its item's ident is: a re-pulled
 * tag (another blob) or a broken one is a removal and an addition under
 * the same name, so a reader of the old one finishes with the old one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "store.h"

struct fs_store {
	const struct fs_store_ops *ops;
	enum fs_store_kind kind;
	char *root; /* absolute */
	bool dirty; /* changed since its last scan; by fs_stores.lock */
};

/* A thread freeing a model that went (store_retire_main). */
struct store_retire {
	struct fs_stores *ss;
	struct fs_model *fm;
	pthread_t thread;
	bool done; /* by fs_stores.lock */
	struct store_retire *next;
};

struct fs_stores {
	struct fs *fs;
	pthread_mutex_t lock; /* scans, dirty flags, the retire list */
	struct fs_store **v;
	size_t n;
	bool stop; /* by fs.models_lock: retirements give up waiting */
	bool stopped;
	struct store_retire *retiring;
	struct store_watch *watch; /* store_watch.c */
};

static const struct fs_store_ops *const store_kinds[FS_STORE_KINDS] = {
	[FS_STORE_OLLAMA] = &fs_store_ollama,
	[FS_STORE_HF] = &fs_store_hf,
	[FS_STORE_LMSTUDIO] = &fs_store_lmstudio,
	[FS_STORE_LLAMACPP] = &fs_store_llamacpp,
};

/* ---- items -------------------------------------------------------------- */

struct fs_store_item *fs_store_item_new(const struct fs_store *st,
					const char *key)
{
	struct fs_store_item *it = calloc(1, sizeof(*it));
	size_t n = 0;

	if (!it)
		return NULL;
	it->store = st;
	it->key = strdup(key);
	/* '/' cannot be in a name: "--", as the hub cache writes repo ids */
	it->name = malloc(2 * strlen(key) + 1);
	if (!it->key || !it->name) {
		fs_store_item_free(it);
		return NULL;
	}
	for (const char *p = key; *p; p++) {
		if (*p == '/') {
			it->name[n++] = '-';
			it->name[n++] = '-';
		} else {
			it->name[n++] = (unsigned char)*p < 0x20 ? '-' : *p;
		}
	}
	it->name[n] = '\0';
	return it;
}

void fs_store_item_free(struct fs_store_item *it)
{
	if (!it)
		return;
	free(it->name);
	free(it->key);
	free(it->path);
	free(it->ident);
	free(it->error);
	free(it->config);
	free(it->params);
	free(it->ignored);
	free(it->tmpl);
	free(it);
}

int fs_store_set(char **field, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	free(*field);
	*field = s;
	return 0;
}

int fs_store_list_add(struct fs_store_list *l, struct fs_store_item *it)
{
	struct fs_store_item **v;

	if (!it)
		return -ENOMEM;
	if (l->n == l->cap) {
		v = realloc(l->v, (l->cap ? 2 * l->cap : 16) * sizeof(*v));
		if (!v) {
			fs_store_item_free(it);
			return -ENOMEM;
		}
		l->v = v;
		l->cap = l->cap ? 2 * l->cap : 16;
	}
	l->v[l->n++] = it;
	return 0;
}

void fs_store_list_free(struct fs_store_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		fs_store_item_free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* ---- helpers for the scanners ------------------------------------------- */

int fs_store_read_file(const char *path, size_t max, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	ssize_t r;
	char *buf;

	*out = NULL;
	if (fd < 0)
		return -errno;
	buf = malloc(max + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (n < max && (r = read(fd, buf + n, max - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			r = -errno;
			close(fd);
			free(buf);
			return (int)r;
		}
		n += r;
	}
	/* one byte more says it was longer than max */
	r = n == max ? read(fd, buf, 1) : 0;
	close(fd);
	if (r > 0) {
		free(buf);
		return -EFBIG;
	}
	buf[n] = '\0';
	*out = buf;
	if (len)
		*len = n;
	return 0;
}

static int store_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int fs_store_names(const char *dir, struct fs_store_names *out)
{
	struct dirent *e;
	char **v;
	DIR *dp = opendir(dir);
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!dp)
		return 0; /* nothing there: nothing to list */
	while (!rc && (e = readdir(dp))) {
		if (e->d_name[0] == '.')
			continue;
		if (out->n == out->cap) {
			out->cap = out->cap ? 2 * out->cap : 16;
			v = realloc(out->v, out->cap * sizeof(*v));
			if (!v) {
				rc = -ENOMEM;
				break;
			}
			out->v = v;
		}
		out->v[out->n] = strdup(e->d_name);
		if (out->v[out->n])
			out->n++;
		else
			rc = -ENOMEM;
	}
	closedir(dp);
	if (rc)
		fs_store_names_free(out);
	else if (out->n)
		qsort(out->v, out->n, sizeof(*out->v), store_cmp);
	return rc;
}

void fs_store_names_free(struct fs_store_names *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

int fs_store_path(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, cap, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

const char *fs_store_home(void)
{
	const char *home = getenv("HOME");
	struct passwd *pw;

	if (home && *home)
		return home;
	/* a system service has no $HOME: the user's entry, as llama.cpp */
	pw = getpwuid(getuid());
	return pw && pw->pw_dir && *pw->pw_dir ? pw->pw_dir : NULL;
}

bool fs_store_is_dir(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* "-00001-of-00003.gguf" at the end of file: where it starts, or NULL. */
static const char *store_split_suffix(const char *file, unsigned *no,
				      unsigned *count)
{
	size_t len = strlen(file);
	const char *s;

	if (len < 20 || strcasecmp(file + len - 5, ".gguf"))
		return NULL;
	s = file + len - 20; /* -NNNNN-of-MMMMM.gguf */
	if (s[0] != '-' || strncasecmp(s + 6, "-of-", 4) ||
	    strspn(s + 1, "0123456789") != 5 ||
	    strspn(s + 10, "0123456789") != 5)
		return NULL;
	*no = (unsigned)strtoul(s + 1, NULL, 10);
	*count = (unsigned)strtoul(s + 10, NULL, 10);
	return s;
}

void fs_store_split(const char *file, unsigned *no, unsigned *count)
{
	if (!store_split_suffix(file, no, count)) {
		*no = 1;
		*count = 1;
	}
}

bool fs_store_gguf_is_model(const char *file)
{
	static const char *const not_models[] = { "mmproj",  "imatrix",
						  "mtp-",    "eagle3-",
						  "dflash-", "dspark-" };
	const char *base = strrchr(file, '/');
	size_t len;
	unsigned no, count;

	base = base ? base + 1 : file;
	len = strlen(base);
	if (len < 6 || strcasecmp(base + len - 5, ".gguf") || base[0] == '.')
		return false;
	for (size_t i = 0; i < sizeof(not_models) / sizeof(*not_models); i++)
		if (strstr(base, not_models[i]))
			return false;
	fs_store_split(base, &no, &count);
	return no == 1;
}

void fs_store_gguf_tag(const char *file, char *out, size_t cap)
{
	const char *base = strrchr(file, '/'), *end, *p;
	unsigned no, count;
	size_t n;

	base = base ? base + 1 : file;
	end = store_split_suffix(base, &no, &count);
	if (!end)
		end = base + strlen(base) - 5; /* ".gguf" */
	/* the longest run of [A-Za-z0-9_] after the last '-' or '.' */
	for (p = end;
	     p > base &&
	     (p[-1] == '_' || (p[-1] >= '0' && p[-1] <= '9') ||
	      (p[-1] >= 'A' && p[-1] <= 'Z') || (p[-1] >= 'a' && p[-1] <= 'z'));
	     p--)
		;
	if (p > base && p < end && (p[-1] == '-' || p[-1] == '.')) {
		n = end - p < (ptrdiff_t)cap ? (size_t)(end - p) : cap - 1;
		for (size_t i = 0; i < n; i++)
			out[i] = (p[i] >= 'a' && p[i] <= 'z') ? p[i] - 32 :
								p[i];
		out[n] = '\0';
		return;
	}
	n = end - base < (ptrdiff_t)cap ? (size_t)(end - base) : cap - 1;
	memcpy(out, base, n);
	out[n] = '\0';
}

int fs_store_error(struct fs_store_item *it, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	free(it->error);
	it->error = s;
	return -ENOENT;
}

/* Why the file at path (part no of count) cannot be opened. */
static int store_part_error(struct fs_store_item *it, const char *path,
			    unsigned no, unsigned count)
{
	char target[PATH_MAX];
	struct stat st;
	int e = errno;
	ssize_t n;

	if (!lstat(path, &st) && S_ISLNK(st.st_mode)) {
		n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		return fs_store_error(it, "%s: dangling symlink to %s", path,
				      target);
	}
	if (count > 1)
		return fs_store_error(it, "%s: part %u of %u: %s", path, no,
				      count, strerror(e));
	return fs_store_error(it, "%s: %s", path, strerror(e));
}

int fs_store_check_parts(struct fs_store_item *it, const char *path)
{
	char part[PATH_MAX];
	unsigned no, count;
	const char *suffix;
	struct stat st;
	size_t prefix;
	int rc;

	suffix = store_split_suffix(path, &no, &count);
	if (!suffix || count <= 1)
		count = 1;
	prefix = suffix ? (size_t)(suffix - path) : 0;
	rc = fs_store_set(&it->ident, "%s", it->ident ? it->ident : "");
	for (unsigned k = 1; k <= count && !rc; k++) {
		if (count > 1)
			snprintf(part, sizeof(part), "%.*s-%05u-of-%05u.gguf",
				 (int)prefix, path, k, count);
		else
			snprintf(part, sizeof(part), "%s", path);
		if (stat(part, &st))
			return store_part_error(it, part, k, count);
		if (!S_ISREG(st.st_mode))
			return fs_store_error(it, "%s: not a file", part);
		/* the same name on other bytes is another model */
		rc = fs_store_set(&it->ident, "%s %llu:%llu:%lld:%lld",
				  it->ident, (unsigned long long)st.st_dev,
				  (unsigned long long)st.st_ino,
				  (long long)st.st_size,
				  (long long)st.st_mtime);
	}
	return rc;
}

/* ---- kinds --------------------------------------------------------------- */

int fs_store_parse(const char *arg, enum fs_store_kind *kind, char *root,
		   size_t cap, struct err *err)
{
	const char *colon = strchr(arg, ':');
	size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
	char *abs;
	int k;

	for (k = 0; k < FS_STORE_KINDS; k++)
		if (strlen(store_kinds[k]->name) == n &&
		    !strncmp(arg, store_kinds[k]->name, n))
			break;
	if (k == FS_STORE_KINDS)
		return err_set(err, EINVAL,
			       "unknown kind (ollama, hf, lmstudio, llamacpp)");
	*kind = k;
	if (!colon || !colon[1]) {
		if (store_kinds[k]->default_root(root, cap))
			return err_set(err, ENOENT,
				       "no %s store found where it is kept "
				       "(give one: --store %s:PATH)",
				       store_kinds[k]->name,
				       store_kinds[k]->name);
		return 0;
	}
	abs = realpath(colon + 1, NULL);
	if (!abs || !fs_store_is_dir(abs)) {
		free(abs);
		return err_set(err, ENOTDIR, "%s: not a directory", colon + 1);
	}
	snprintf(root, cap, "%s", abs);
	free(abs);
	return 0;
}

int fs_store_detect(const char *dir)
{
	/* the Hugging Face layout before llama.cpp's (it uses it too) */
	static const enum fs_store_kind order[] = { FS_STORE_OLLAMA,
						    FS_STORE_HF,
						    FS_STORE_LLAMACPP,
						    FS_STORE_LMSTUDIO };

	for (size_t i = 0; i < sizeof(order) / sizeof(*order); i++)
		if (store_kinds[order[i]]->detect(dir))
			return order[i];
	return -1;
}

/* ---- models -------------------------------------------------------------- */

/* A model directory for it (taking it), published in fs.models. */
static int store_model_make(struct fs *fs, struct fs_store_item *it,
			    struct fs_model **out, struct err *err)
{
	char name[256], *save, *line, *lines;
	struct fs_model *fm;
	struct err e = { 0 };
	int rc, k = 2;

	*out = NULL;
	snprintf(name, sizeof(name), "%.200s", it->name);
	pthread_mutex_lock(&fs->models_lock);
	while (!fs_model_name_ok(fs, name) && k < 1000)
		snprintf(name, sizeof(name), "%.200s-%d", it->name, k++);
	pthread_mutex_unlock(&fs->models_lock);
	rc = fs_model_new(fs, &fm, name, it->path ? it->path : "", err);
	if (rc) {
		fs_store_item_free(it);
		return rc;
	}
	fm->item = it;
	fm->n_ctx = it->n_ctx;
	/* each of the store's settings alone: a bad one is one line */
	lines = it->config ? strdup(it->config) : NULL;
	for (line = lines ? strtok_r(lines, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save))
		if (fs_config_write(&fm->config, line, strlen(line), &e))
			fs_errors_add(&fm->errors, "store: %s", e.msg);
	free(lines);
	rc = fs_model_add(fs, fm);
	if (rc) {
		fs_model_free(fm);
		return err_set(err, -rc, "%s: more than %u models", name,
			       FS_MODELS_MAX);
	}
	*out = fm;
	return 0;
}

/* Waits for the last user of a model that went, then frees its engine. */
static void *store_retire_main(void *arg)
{
	struct store_retire *r = arg;
	struct fs_model *fm = r->fm;
	struct fs *fs = fm->fs;
	bool give_up;

	pthread_mutex_lock(&fs->models_lock);
	while (fm->users && !r->ss->stop)
		pthread_cond_wait(&fs->models_cond, &fs->models_lock);
	give_up = fm->users > 0; /* unmounting: freed with the rest */
	fm->retired = !give_up;
	pthread_mutex_unlock(&fs->models_lock);
	if (!give_up) {
		/* nobody can reach it: end its thread, answers, sessions */
		fs_model_stop(fm);
		fs_session_free_all(fm);
		fm->provider->free(fm);
	}
	pthread_mutex_lock(&r->ss->lock);
	r->done = true;
	pthread_mutex_unlock(&r->ss->lock);
	return NULL;
}

/* Join the retirements that ended; all of them with all. ss->lock held. */
static void store_reap_retired(struct fs_stores *ss, bool all)
{
	struct store_retire **pp = &ss->retiring, *r;

	while ((r = *pp)) {
		if (!r->done && !all) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		pthread_mutex_unlock(&ss->lock);
		pthread_join(r->thread, NULL);
		pthread_mutex_lock(&ss->lock);
		free(r);
	}
}

/*
 * The kernel forgets the root's listing, and the name of a model that
 * went (its cached subtree with it); nothing to do before the mount.
 */
static void store_notify(struct fs *fs, struct fs_model *fm, bool removed)
{
	if (!fs->se)
		return;
	if (removed)
		fuse_lowlevel_notify_inval_entry(fs->se, FUSE_ROOT_ID, fm->name,
						 strlen(fm->name));
	fuse_lowlevel_notify_inval_inode(fs->se, FUSE_ROOT_ID, 0, 0);
}

/* Hide fm now; free it once unused. ss->lock held. */
static void store_remove(struct fs_stores *ss, struct fs_model *fm)
{
	struct store_retire *r = calloc(1, sizeof(*r));

	pthread_mutex_lock(&ss->fs->models_lock);
	fm->gone = true;
	pthread_mutex_unlock(&ss->fs->models_lock);
	store_notify(ss->fs, fm, true);
	if (!r)
		return; /* freed at unmount */
	r->ss = ss;
	r->fm = fm;
	if (pthread_create(&r->thread, NULL, store_retire_main, r)) {
		free(r);
		return;
	}
	r->next = ss->retiring;
	ss->retiring = r;
}

/*
 * Make st's models match found (taken): a model whose key and ident are
 * still there stays; one that went (or changed) is removed; the new ones
 * are added, started when live (the mount is up). ss->lock held.
 */
static int store_apply(struct fs_stores *ss, struct fs_store *st,
		       struct fs_store_list *found, bool live, struct err *err)
{
	struct fs *fs = ss->fs;
	bool *kept = calloc(found->n + 1, sizeof(*kept));
	struct fs_model *fm;
	int rc = 0;

	if (!kept)
		return err_set(err, ENOMEM, "out of memory");
	for (unsigned i = 0; i < fs->n_models; i++) {
		size_t j;

		fm = fs->models[i];
		if (!fm->item || fm->item->store != st || fs_model_gone(fm))
			continue;
		for (j = 0; j < found->n; j++)
			if (!kept[j] &&
			    !strcmp(found->v[j]->key, fm->item->key))
				break;
		if (j < found->n &&
		    !strcmp(found->v[j]->ident ? found->v[j]->ident : "",
			    fm->item->ident ? fm->item->ident : "") &&
		    !strcmp(found->v[j]->error ? found->v[j]->error : "",
			    fm->item->error ? fm->item->error : ""))
			kept[j] = true;
		else
			store_remove(ss, fm);
	}
	for (size_t j = 0; j < found->n && !rc; j++) {
		if (kept[j])
			continue;
		rc = store_model_make(fs, found->v[j], &fm, err);
		found->v[j] = NULL;
		if (!rc && live) {
			rc = fs_model_start(fm, err);
			store_notify(fs, fm, false);
		}
	}
	free(kept);
	return rc;
}

static int store_scan(struct fs_store *st, struct fs_store_list *found)
{
	return st->ops->scan(st, st->root, found);
}

int fs_store_open(struct fs *fs, enum fs_store_kind kind, const char *root,
		  struct err *err)
{
	struct fs_stores *ss = fs->stores;
	struct fs_store_list found = { 0 };
	struct fs_store *st, **v;
	int rc;

	if (!ss) {
		ss = calloc(1, sizeof(*ss));
		if (!ss)
			return err_set(err, ENOMEM, "out of memory");
		ss->fs = fs;
		pthread_mutex_init(&ss->lock, NULL);
		fs->stores = ss;
	}
	st = calloc(1, sizeof(*st));
	v = realloc(ss->v, (ss->n + 1) * sizeof(*v));
	if (v)
		ss->v = v;
	if (!st || !v || !(st->root = strdup(root))) {
		free(st);
		return err_set(err, ENOMEM, "out of memory");
	}
	st->ops = store_kinds[kind];
	st->kind = kind;
	ss->v[ss->n++] = st;
	rc = store_scan(st, &found);
	pthread_mutex_lock(&ss->lock);
	if (!rc)
		rc = store_apply(ss, st, &found, false, err);
	else
		err_set(err, -rc, "%s: %s", root, strerror(-rc));
	pthread_mutex_unlock(&ss->lock);
	fs_store_list_free(&found);
	return rc;
}

/* Mark the store holding path changed; the watch thread calls this. */
void fs_store_mark(struct fs *fs, size_t store)
{
	struct fs_stores *ss = fs->stores;

	pthread_mutex_lock(&ss->lock);
	if (store < ss->n)
		ss->v[store]->dirty = true;
	pthread_mutex_unlock(&ss->lock);
}

void fs_store_rescan(struct fs *fs, bool all)
{
	struct fs_stores *ss = fs->stores;
	struct err err = { 0 };

	pthread_mutex_lock(&ss->lock);
	for (size_t i = 0; i < ss->n && !ss->stopped; i++) {
		struct fs_store_list found = { 0 };
		struct fs_store *st = ss->v[i];

		if (!st->dirty && !all)
			continue;
		st->dirty = false;
		/* a scan only reads small files: under the lock is fine */
		if (!store_scan(st, &found) &&
		    store_apply(ss, st, &found, true, &err))
			fs_progress_print(fs, "llmfs: store %s: %s", st->root,
					  err.msg);
		fs_store_list_free(&found);
	}
	store_reap_retired(ss, false);
	pthread_mutex_unlock(&ss->lock);
}

struct store_watch **fs_store_watch_state(struct fs *fs)
{
	return &fs->stores->watch;
}

size_t fs_store_count(struct fs *fs)
{
	return fs->stores ? fs->stores->n : 0;
}

const char *fs_store_root(struct fs *fs, size_t store)
{
	return fs->stores->v[store]->root;
}

void fs_store_stop(struct fs *fs)
{
	struct fs_stores *ss = fs->stores;

	if (!ss)
		return;
	fs_store_watch_stop(fs);
	pthread_mutex_lock(&fs->models_lock);
	ss->stop = true;
	pthread_cond_broadcast(&fs->models_cond);
	pthread_mutex_unlock(&fs->models_lock);
	pthread_mutex_lock(&ss->lock);
	ss->stopped = true;
	store_reap_retired(ss, true);
	pthread_mutex_unlock(&ss->lock);
}

void fs_store_free(struct fs *fs)
{
	struct fs_stores *ss = fs->stores;

	if (!ss)
		return;
	fs_store_stop(fs);
	for (size_t i = 0; i < ss->n; i++) {
		free(ss->v[i]->root);
		free(ss->v[i]);
	}
	free(ss->v);
	pthread_mutex_destroy(&ss->lock);
	free(ss);
	fs->stores = NULL;
}

/* ---- what models and info say ------------------------------------------- */

/* A path in one field: blanks, control bytes and '\\' as \xHH. */
static int store_escape_path(struct fs_buf *b, const char *s)
{
	int rc = 0;

	for (; *s && !rc; s++) {
		unsigned char c = *s;

		if (c <= ' ' || c == 0x7f || c == '\\')
			rc = fs_buf_printf(b, "\\x%02x", c);
		else
			rc = fs_buf_add(b, s, 1);
	}
	return rc;
}

int fs_store_source(struct fs_model *fm, struct fs_buf *b)
{
	const struct fs_store *st = fm->item ? fm->item->store : NULL;
	int rc = fs_buf_printf(b, "%s:", st ? st->ops->name : "file");

	return rc ? rc : store_escape_path(b, st ? st->root : fm->path);
}

static const char *store_family(enum engine_chat_format f)
{
	switch (f) {
	case ENGINE_CHAT_CHATML: return "chatml";
	case ENGINE_CHAT_LLAMA2: return "llama2";
	case ENGINE_CHAT_LLAMA3: return "llama3";
	default: return "none";
	}
}

/* The store's template against the GGUF's, which chat uses. */
static int store_info_template(struct fs_model *fm, struct fs_buf *b)
{
	const struct fs_store_item *it = fm->item;
	const struct engine_model *m = NULL;
	enum engine_chat_format mine, used;
	int rc;

	rc = fs_buf_add(b, "source_template ", 16);
	if (!rc)
		rc = fs_config_escape(b, it->tmpl);
	if (!rc && fs_model_state(fm) == FS_MODEL_READY)
		m = fs_model_engine(fm);
	if (rc || !m)
		return rc ? rc : fs_buf_add(b, "\n", 1);
	mine = engine_chat_template_format(it->tmpl);
	/* the family of the GGUF's template, which chat uses */
	used = engine_chat_template_format(engine_model_info(m)->chat_template);
	rc = fs_buf_printf(b, "\nsource_template_family %s\n",
			   store_family(mine));
	if (!rc && mine != used)
		rc = fs_buf_printf(b,
				   "source_template_differs chat uses the "
				   "GGUF's template (%s), not the store's "
				   "(%s)\n",
				   store_family(used), store_family(mine));
	return rc;
}

int fs_store_info(struct fs_model *fm, struct fs_buf *b)
{
	const struct fs_store_item *it = fm->item;
	int rc;

	rc = fs_buf_printf(b, "source %s ", it ? it->store->ops->name : "file");
	if (!rc)
		rc = store_escape_path(b, it ? it->store->root : fm->path);
	if (rc || !it)
		return rc ? rc : fs_buf_add(b, "\n", 1);
	rc = fs_buf_printf(b, "\nsource_name %s\n", it->key);
	if (!rc && it->params)
		rc = fs_buf_printf(b, "source_params %s\n", it->params);
	if (!rc && it->ignored)
		rc = fs_buf_printf(b, "source_params_ignored %s\n",
				   it->ignored);
	if (!rc && it->tmpl)
		rc = store_info_template(fm, b);
	return rc;
}
