// SPDX-License-Identifier: MIT
/*
 * The tree under the mount point (Documentation/ABI.md):
 *
 *   /models /status /metrics
 *   /<model>/{generate,chat,config,info,stats,tokenize,embed,embed.f32,
 *             errors,placement,kv}
 *   /<model>/weights/{index,<tensor>...}
 *   /<model>/sessions/{new,<N>/{generate,chat,config,history,kv,logprobs,
 *                              reasoning}}
 *
 * An inode number encodes its node (kind, model, session or tensor), so
 * lookup allocates nothing and forget has nothing to do; a node that went
 * away (a removed session) answers ENOENT.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

_Static_assert(FS_K_COUNT < 256, "the kind must fit in 8 bits of the inode");

struct tree_entry {
	const char *name;
	enum fs_kind kind;
};

static const struct tree_entry tree_root[] = {
	{ "models", FS_K_MODELS },
	{ "status", FS_K_STATUS },
	{ "metrics", FS_K_METRICS },
};

static const struct tree_entry tree_model[] = {
	{ "generate", FS_K_GENERATE },
	{ "chat", FS_K_CHAT },
	{ "config", FS_K_CONFIG },
	{ "info", FS_K_INFO },
	{ "stats", FS_K_STATS },
	{ "tokenize", FS_K_TOKENIZE },
	{ "embed", FS_K_EMBED },
	{ "embed.f32", FS_K_EMBED_F32 },
	{ "errors", FS_K_ERRORS },
	{ "placement", FS_K_PLACEMENT },
	{ "kv", FS_K_KV },
	{ "weights", FS_K_WEIGHTS },
	{ "sessions", FS_K_SESSIONS },
};

static const struct tree_entry tree_session[] = {
	{ "generate", FS_K_SGENERATE },
	{ "chat", FS_K_SCHAT },
	{ "config", FS_K_SCONFIG },
	{ "history", FS_K_SHISTORY },
	{ "kv", FS_K_SKV },
	{ "logprobs", FS_K_SLOGPROBS },
	{ "reasoning", FS_K_SREASONING },
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Permission bits per kind; -o ro takes the write bits away. */
static const mode_t tree_modes[FS_K_COUNT] = {
	[FS_K_ROOT] = S_IFDIR | 0555,
	[FS_K_MODELS] = S_IFREG | 0444,
	[FS_K_STATUS] = S_IFREG | 0444,
	[FS_K_METRICS] = S_IFREG | 0444,
	[FS_K_MDIR] = S_IFDIR | 0555,
	[FS_K_GENERATE] = S_IFREG | 0666,
	[FS_K_CHAT] = S_IFREG | 0666,
	[FS_K_CONFIG] = S_IFREG | 0644,
	[FS_K_INFO] = S_IFREG | 0444,
	[FS_K_STATS] = S_IFREG | 0444,
	[FS_K_TOKENIZE] = S_IFREG | 0666,
	[FS_K_EMBED] = S_IFREG | 0666,
	[FS_K_EMBED_F32] = S_IFREG | 0666,
	[FS_K_ERRORS] = S_IFREG | 0444,
	[FS_K_PLACEMENT] = S_IFREG | 0644,
	[FS_K_KV] = S_IFREG | 0644,
	[FS_K_WEIGHTS] = S_IFDIR | 0555,
	[FS_K_WINDEX] = S_IFREG | 0444,
	[FS_K_WTENSOR] = S_IFREG | 0444,
	/* Sticky, as /tmp: anyone may rmdir a session of their own. */
	[FS_K_SESSIONS] = S_IFDIR | S_ISVTX | 0777,
	[FS_K_SNEW] = S_IFREG | 0444,
	/* A session is its creator's alone (fs_file_open checks too). */
	[FS_K_SDIR] = S_IFDIR | 0700,
	[FS_K_SGENERATE] = S_IFREG | 0600,
	[FS_K_SCHAT] = S_IFREG | 0600,
	[FS_K_SCONFIG] = S_IFREG | 0600,
	[FS_K_SHISTORY] = S_IFREG | 0400,
	[FS_K_SKV] = S_IFREG | 0600,
	[FS_K_SLOGPROBS] = S_IFREG | 0400,
	[FS_K_SREASONING] = S_IFREG | 0400,
};

fuse_ino_t fs_node_ino(const struct fs_node *n)
{
	uint64_t model = n->kind == FS_K_ROOT || n->kind == FS_K_MODELS ||
					 n->kind == FS_K_STATUS ||
					 n->kind == FS_K_METRICS ?
				 0 :
				 n->model + 1;

	return (uint64_t)n->kind | model << 8 | n->aux << 24;
}

void fs_node_of(fuse_ino_t ino, struct fs_node *n)
{
	uint64_t model = (ino >> 8) & 0xffff;

	n->kind = ino & 0xff;
	n->model = model ? model - 1 : 0;
	n->aux = ino >> 24;
	if (n->kind >= FS_K_COUNT)
		n->kind = FS_K_NONE;
}

bool fs_kind_is_dir(enum fs_kind k)
{
	return S_ISDIR(tree_modes[k]);
}

bool fs_kind_takes_prompt(enum fs_kind k)
{
	return k == FS_K_GENERATE || k == FS_K_CHAT || k == FS_K_SGENERATE ||
	       k == FS_K_SCHAT || k == FS_K_TOKENIZE || k == FS_K_EMBED ||
	       k == FS_K_EMBED_F32;
}

struct fs_model *fs_tree_model_get(struct fs *fs, const struct fs_node *n,
				   bool gone_too)
{
	if (n->kind <= FS_K_METRICS)
		return NULL;
	return fs_model_get(fs, n->model, gone_too);
}

static bool tree_in_session(enum fs_kind k)
{
	return k == FS_K_SDIR || k == FS_K_SGENERATE || k == FS_K_SCHAT ||
	       k == FS_K_SCONFIG || k == FS_K_SHISTORY || k == FS_K_SKV ||
	       k == FS_K_SLOGPROBS || k == FS_K_SREASONING;
}

static int tree_stat(struct fs *fs, struct fs_model *fm,
		     const struct fs_node *n, struct stat *st)
{
	if (n->kind == FS_K_NONE || (n->kind > FS_K_METRICS && !fm) ||
	    !fs_provider_has(fm, n->kind))
		return -ENOENT;
	memset(st, 0, sizeof(*st));
	st->st_ino = fs_node_ino(n);
	st->st_mode = tree_modes[n->kind];
	if (fs->opt.ro)
		st->st_mode &= ~0222;
	else if (fs->opt.shared_config &&
		 (n->kind == FS_K_CONFIG || n->kind == FS_K_PLACEMENT ||
		  n->kind == FS_K_KV))
		st->st_mode |= 0222;
	st->st_nlink = S_ISDIR(st->st_mode) ? 2 : 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_blksize = 4096;
	st->st_atime = st->st_mtime = st->st_ctime = (time_t)fs->start_wall;
	if (tree_in_session(n->kind)) {
		struct fs_session *ss;

		pthread_mutex_lock(&fm->lock);
		ss = fs_session_find(fm, n->aux);
		if (ss) {
			st->st_uid = ss->uid;
			st->st_gid = ss->gid;
			st->st_ctime = st->st_mtime = (time_t)ss->ctime;
			st->st_atime = (time_t)ss->atime;
		}
		pthread_mutex_unlock(&fm->lock);
		if (!ss)
			return -ENOENT;
	} else if (n->kind == FS_K_WTENSOR) {
		struct engine_tensor_info t;

		if (fs_model_state(fm) != FS_MODEL_READY ||
		    engine_model_tensor(fm->m, n->aux, &t))
			return -ENOENT;
		st->st_size = t.bytes;
		st->st_blocks = (st->st_size + 511) / 512;
	}
	return 0;
}

/*
 * A model removed from its store still has attributes while a file of
 * it is open (fstat of an unlinked file works); lookups no longer find it.
 */
int fs_tree_stat(struct fs *fs, const struct fs_node *n, struct stat *st,
		 fuse_req_t req)
{
	struct fs_model *fm = fs_tree_model_get(fs, n, true);
	int rc = tree_stat(fs, fm, n, st);

	fs_model_put(fm);
	return rc;
}

/* Can the tensor's own name be a file name in weights/? */
static bool tree_tensor_name_ok(const char *name)
{
	return *name && !strchr(name, '/') && strcmp(name, "index") &&
	       strcmp(name, ".") && strcmp(name, "..");
}

/* "tensor.N" names tensor N when its own name cannot be used. */
static int tree_tensor_alias(const struct engine_model *m, const char *name,
			     uint64_t *index)
{
	struct engine_tensor_info t;
	char *end;

	if (strncmp(name, "tensor.", 7) || name[7] < '0' || name[7] > '9')
		return -ENOENT;
	*index = strtoull(name + 7, &end, 10);
	if (*end || engine_model_tensor(m, *index, &t) ||
	    tree_tensor_name_ok(t.name))
		return -ENOENT;
	return 0;
}

static int tree_table_lookup(const struct tree_entry *t, size_t n,
			     const char *name, enum fs_kind *kind)
{
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(t[i].name, name)) {
			*kind = t[i].kind;
			return 0;
		}
	}
	return -ENOENT;
}

static int tree_session_id(const char *name, uint64_t *id)
{
	char *end;

	if (*name < '1' || *name > '9')
		return -ENOENT;
	*id = strtoull(name, &end, 10);
	if (*end || *id >= (1ull << 40))
		return -ENOENT;
	return 0;
}

static int tree_lookup(struct fs *fs, struct fs_model *fm,
		       const struct fs_node *parent, const char *name,
		       struct fs_node *out)
{
	struct stat st;

	switch (parent->kind) {
	case FS_K_MDIR:
		if (tree_table_lookup(tree_model, N(tree_model), name,
				      &out->kind) ||
		    !fs_provider_has(fm, out->kind))
			return -ENOENT;
		return 0;
	case FS_K_SDIR:
		if (tree_table_lookup(tree_session, N(tree_session), name,
				      &out->kind) ||
		    !fs_provider_has(fm, out->kind))
			return -ENOENT;
		return tree_stat(fs, fm, out, &st);
	case FS_K_SESSIONS:
		if (!strcmp(name, "new")) {
			out->kind = FS_K_SNEW;
			return 0;
		}
		out->kind = FS_K_SDIR;
		if (tree_session_id(name, &out->aux))
			return -ENOENT;
		return tree_stat(fs, fm, out, &st);
	case FS_K_WEIGHTS:
		if (!strcmp(name, "index")) {
			out->kind = FS_K_WINDEX;
			return 0;
		}
		if (fs_model_state(fm) != FS_MODEL_READY)
			return -ENOENT;
		out->kind = FS_K_WTENSOR;
		if (tree_tensor_name_ok(name) &&
		    !engine_model_tensor_find(fm->m, name, &out->aux))
			return 0;
		return tree_tensor_alias(fm->m, name, &out->aux);
	default: return -ENOTDIR;
	}
}

static int tree_lookup_root(struct fs *fs, const char *name,
			    struct fs_node *out)
{
	if (!tree_table_lookup(tree_root, N(tree_root), name, &out->kind))
		return 0;
	for (unsigned i = 0; i < fs->n_models; i++) {
		if (!strcmp(fs->models[i]->name, name) &&
		    !fs_model_gone(fs->models[i])) {
			out->kind = FS_K_MDIR;
			out->model = i;
			return 0;
		}
	}
	return -ENOENT;
}

int fs_tree_lookup(struct fs *fs, const struct fs_node *parent,
		   const char *name, struct fs_node *out)
{
	struct fs_model *fm;
	int rc;

	*out = *parent;
	if (parent->kind == FS_K_ROOT)
		return tree_lookup_root(fs, name, out);
	fm = fs_tree_model_get(fs, parent, false);
	if (!fm)
		return fs_kind_is_dir(parent->kind) ? -ENOENT : -ENOTDIR;
	rc = tree_lookup(fs, fm, parent, name, out);
	fs_model_put(fm);
	return rc;
}

static int tree_table_entry(const struct tree_entry *t, size_t n, uint64_t i,
			    struct fs_node *child, const char **name)
{
	if (i >= n)
		return 0;
	child->kind = t[i].kind;
	*name = t[i].name;
	return 1;
}

/* The i-th file of table t (n entries) that fm's provider gives. */
static int tree_provided_entry(struct fs_model *fm, const struct tree_entry *t,
			       size_t n, uint64_t i, struct fs_node *child,
			       const char **name)
{
	for (size_t k = 0; k < n; k++) {
		if (!fs_provider_has(fm, t[k].kind))
			continue;
		if (i-- == 0)
			return tree_table_entry(t, n, k, child, name);
	}
	return 0;
}

/*
 * The live sessions of fm, oldest first, copied under fm->lock in one walk
 * (the list is newest first, ids grow): a listing of n sessions costs O(n)
 * and holds the lock for that copy only, not while the kernel reads.
 */
int fs_tree_sessions(struct fs *fs, const struct fs_node *dir,
		     struct fs_dir_snap **out)
{
	struct fs_model *fm = fs_tree_model_get(fs, dir, false);
	struct fs_dir_snap *snap;
	struct fs_session *ss;
	size_t n = 0, cap = 0;

	*out = NULL;
	if (!fm)
		return -ENOENT;
	pthread_mutex_lock(&fm->lock);
	for (ss = fm->sessions; ss; ss = ss->next)
		cap += !ss->removed;
	snap = malloc(sizeof(*snap) + cap * sizeof(snap->ids[0]));
	if (snap) {
		for (ss = fm->sessions; ss; ss = ss->next)
			if (!ss->removed)
				snap->ids[cap - 1 - n++] = ss->id;
		snap->n = n;
	}
	pthread_mutex_unlock(&fm->lock);
	fs_model_put(fm);
	if (!snap)
		return -ENOMEM;
	*out = snap;
	return 0;
}

static int tree_session_entry(const struct fs_dir_snap *snap, uint64_t i,
			      struct fs_node *child, const char **name,
			      char *tmp, size_t cap)
{
	if (!snap || i >= snap->n)
		return 0;
	child->kind = FS_K_SDIR;
	child->aux = snap->ids[i];
	snprintf(tmp, cap, "%llu", (unsigned long long)snap->ids[i]);
	*name = tmp;
	return 1;
}

static int tree_model_entry(struct fs_model *fm, const struct fs_node *dir,
			    uint64_t i, const struct fs_dir_snap *snap,
			    struct fs_node *child, const char **name, char *tmp,
			    size_t tmp_cap)
{
	struct engine_tensor_info t;

	switch (dir->kind) {
	case FS_K_MDIR:
		return tree_provided_entry(fm, tree_model, N(tree_model), i,
					   child, name);
	case FS_K_SDIR:
		return tree_provided_entry(fm, tree_session, N(tree_session), i,
					   child, name);
	case FS_K_SESSIONS:
		if (i == 0) {
			child->kind = FS_K_SNEW;
			*name = "new";
			return 1;
		}
		return tree_session_entry(snap, i - 1, child, name, tmp,
					  tmp_cap);
	case FS_K_WEIGHTS:
		if (i == 0) {
			child->kind = FS_K_WINDEX;
			*name = "index";
			return 1;
		}
		if (fs_model_state(fm) != FS_MODEL_READY ||
		    engine_model_tensor(fm->m, i - 1, &t))
			return 0;
		child->kind = FS_K_WTENSOR;
		child->aux = i - 1;
		*name = t.name;
		/* A name no path can reach is listed under its index. */
		if (!tree_tensor_name_ok(*name)) {
			snprintf(tmp, tmp_cap, "tensor.%llu",
				 (unsigned long long)(i - 1));
			*name = tmp;
		}
		return 1;
	default: return -ENOTDIR;
	}
}

/* The root's entry i: its files, then a slot per model (gone: skipped). */
static int tree_root_entry(struct fs *fs, uint64_t i, struct fs_node *child,
			   const char **name)
{
	if (i < N(tree_root))
		return tree_table_entry(tree_root, N(tree_root), i, child,
					name);
	i -= N(tree_root);
	if (i >= fs->n_models)
		return 0;
	if (fs_model_gone(fs->models[i]))
		return FS_TREE_SKIP;
	child->kind = FS_K_MDIR;
	child->model = i;
	*name = fs->models[i]->name; /* lives as long as the mount */
	return 1;
}

int fs_tree_entry(struct fs *fs, const struct fs_node *dir, uint64_t i,
		  const struct fs_dir_snap *snap, struct fs_node *child,
		  const char **name, char *tmp, size_t tmp_cap)
{
	struct fs_model *fm;
	int rc;

	*child = *dir;
	if (dir->kind == FS_K_ROOT)
		return tree_root_entry(fs, i, child, name);
	fm = fs_tree_model_get(fs, dir, false);
	if (!fm)
		return fs_kind_is_dir(dir->kind) ? 0 : -ENOTDIR;
	rc = tree_model_entry(fm, dir, i, snap, child, name, tmp, tmp_cap);
	fs_model_put(fm);
	return rc;
}
