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
 * away (a removed session) answers ENOENT. Each kind's name, directory
 * and mode are its row of kinds.c; lookups and listings walk the rows,
 * then ask the directory for the children it names itself (the models,
 * sessions/N, weights/<tensor>: struct fs_dir_ops, at the end here).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

fuse_ino_t fs_node_ino(const struct fs_node *n)
{
	uint64_t model = fs_kinds[n->kind].top ? 0 : n->model + 1;

	return (uint64_t)n->kind | model << 8 | n->aux << 24;
}

void fs_node_of(fuse_ino_t ino, struct fs_node *n)
{
	uint64_t model = (ino >> 8) & 0xffff;

	n->kind = ino & 0xff;
	n->model = model ? model - 1 : 0;
	n->aux = ino >> 24;
	if (n->kind >= FS_KIND_COUNT)
		n->kind = FS_KIND_NONE;
}

struct fs_model *fs_tree_model_get(struct fs *fs, const struct fs_node *n,
				   bool gone_too)
{
	if (fs_kinds[n->kind].top)
		return NULL;
	return fs_model_get(fs, n->model, gone_too);
}

static int tree_stat(struct fs *fs, struct fs_model *fm,
		     const struct fs_node *n, struct stat *st)
{
	const struct fs_kind_info *k = &fs_kinds[n->kind];

	if (n->kind == FS_KIND_NONE || (!k->top && !fm) ||
	    !fs_provider_has(fm, n->kind))
		return -ENOENT;
	memset(st, 0, sizeof(*st));
	st->st_ino = fs_node_ino(n);
	st->st_mode = k->mode;
	if (fs->opt.ro)
		st->st_mode &= ~0222;
	else if (fs->opt.shared_config && k->setting)
		st->st_mode |= 0222;
	st->st_nlink = S_ISDIR(st->st_mode) ? 2 : 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_blksize = 4096;
	st->st_atime = st->st_mtime = st->st_ctime = (time_t)fs->start_wall;
	if (k->session) {
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
	}
	return k->stat ? k->stat(fm, n, st) : 0;
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
/* ---- lookups: the table's rows, then the directory's own children ------ */

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

static int tree_weights_lookup(struct fs *fs, struct fs_model *fm,
			       const struct fs_node *dir, const char *name,
			       struct fs_node *out)
{
	if (fs_model_state(fm) != FS_MODEL_READY)
		return -ENOENT;
	out->kind = FS_KIND_WEIGHTS_TENSOR;
	if (tree_tensor_name_ok(name) &&
	    !engine_model_tensor_find(fs_model_engine(fm), name, &out->aux))
		return 0;
	return tree_tensor_alias(fs_model_engine(fm), name, &out->aux);
}

static int tree_sessions_lookup(struct fs *fs, struct fs_model *fm,
				const struct fs_node *dir, const char *name,
				struct fs_node *out)
{
	struct stat st;
	char *end;

	if (*name < '1' || *name > '9')
		return -ENOENT;
	out->kind = FS_KIND_SESSION_DIR;
	out->aux = strtoull(name, &end, 10);
	if (*end || out->aux >= (1ull << 40))
		return -ENOENT;
	return tree_stat(fs, fm, out, &st);
}

static int tree_root_lookup(struct fs *fs, struct fs_model *fm,
			    const struct fs_node *dir, const char *name,
			    struct fs_node *out)
{
	for (unsigned i = 0; i < fs->n_models; i++) {
		if (!strcmp(fs->models[i]->name, name) &&
		    !fs_model_gone(fs->models[i])) {
			out->kind = FS_KIND_MODEL_DIR;
			out->model = i;
			return 0;
		}
	}
	return -ENOENT;
}

/*
 * name in directory parent: a row of the table listed there that fm's
 * provider gives, else one of the directory's own children.
 */
static int tree_lookup(struct fs *fs, struct fs_model *fm,
		       const struct fs_node *parent, const char *name,
		       struct fs_node *out)
{
	const struct fs_kind_info *d = &fs_kinds[parent->kind];
	struct stat st;

	if (!S_ISDIR(d->mode))
		return -ENOTDIR;
	for (enum fs_kind k = 0; k < FS_KIND_COUNT; k++) {
		if (fs_kinds[k].parent != parent->kind || !fs_kinds[k].name ||
		    strcmp(fs_kinds[k].name, name))
			continue;
		out->kind = k;
		if (!fs_provider_has(fm, k))
			return -ENOENT;
		/* a session's file is there as long as its session is */
		return fs_kinds[k].session ? tree_stat(fs, fm, out, &st) : 0;
	}
	return d->dir ? d->dir->lookup(fs, fm, parent, name, out) : -ENOENT;
}

int fs_tree_lookup(struct fs *fs, const struct fs_node *parent,
		   const char *name, struct fs_node *out)
{
	struct fs_model *fm;
	int rc;

	*out = *parent;
	if (fs_kinds[parent->kind].top)
		return tree_lookup(fs, NULL, parent, name, out);
	fm = fs_tree_model_get(fs, parent, false);
	if (!fm)
		return fs_kind_is_dir(parent->kind) ? -ENOENT : -ENOTDIR;
	rc = tree_lookup(fs, fm, parent, name, out);
	fs_model_put(fm);
	return rc;
}

/* ---- listings: the same order --------------------------------------- */

static int tree_sessions_snapshot(struct fs *fs, const struct fs_node *dir,
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

static int tree_sessions_entry(struct fs *fs, struct fs_model *fm,
			       const struct fs_node *dir, uint64_t i,
			       const struct fs_dir_snap *snap,
			       struct fs_node *child, const char **name,
			       char *tmp, size_t tmp_cap)
{
	if (!snap || i >= snap->n)
		return 0;
	child->kind = FS_KIND_SESSION_DIR;
	child->aux = snap->ids[i];
	snprintf(tmp, tmp_cap, "%llu", (unsigned long long)snap->ids[i]);
	*name = tmp;
	return 1;
}

static int tree_weights_entry(struct fs *fs, struct fs_model *fm,
			      const struct fs_node *dir, uint64_t i,
			      const struct fs_dir_snap *snap,
			      struct fs_node *child, const char **name,
			      char *tmp, size_t tmp_cap)
{
	struct engine_tensor_info t;

	if (fs_model_state(fm) != FS_MODEL_READY ||
	    engine_model_tensor(fs_model_engine(fm), i, &t))
		return 0;
	child->kind = FS_KIND_WEIGHTS_TENSOR;
	child->aux = i;
	*name = t.name;
	/* A name no path can reach is listed under its index. */
	if (!tree_tensor_name_ok(*name)) {
		snprintf(tmp, tmp_cap, "tensor.%llu", (unsigned long long)i);
		*name = tmp;
	}
	return 1;
}

/* The root's models, a slot each (gone: skipped). */
static int tree_root_entry(struct fs *fs, struct fs_model *fm,
			   const struct fs_node *dir, uint64_t i,
			   const struct fs_dir_snap *snap,
			   struct fs_node *child, const char **name, char *tmp,
			   size_t tmp_cap)
{
	if (i >= fs->n_models)
		return 0;
	if (fs_model_gone(fs->models[i]))
		return FS_TREE_SKIP;
	child->kind = FS_KIND_MODEL_DIR;
	child->model = i;
	*name = fs->models[i]->name; /* lives as long as the mount */
	return 1;
}

/*
 * Entry i of dir: the rows of the table listed there that fm's provider
 * gives, in the table's order, then the directory's own children.
 */
static int tree_entry(struct fs *fs, struct fs_model *fm,
		      const struct fs_node *dir, uint64_t i,
		      const struct fs_dir_snap *snap, struct fs_node *child,
		      const char **name, char *tmp, size_t tmp_cap)
{
	const struct fs_kind_info *d = &fs_kinds[dir->kind];

	if (!S_ISDIR(d->mode))
		return -ENOTDIR;
	for (enum fs_kind k = 0; k < FS_KIND_COUNT; k++) {
		if (fs_kinds[k].parent != dir->kind || !fs_kinds[k].name ||
		    !fs_provider_has(fm, k))
			continue;
		if (i-- == 0) {
			child->kind = k;
			*name = fs_kinds[k].name;
			return 1;
		}
	}
	return d->dir ? d->dir->entry(fs, fm, dir, i, snap, child, name, tmp,
				      tmp_cap) :
			0;
}

int fs_tree_entry(struct fs *fs, const struct fs_node *dir, uint64_t i,
		  const struct fs_dir_snap *snap, struct fs_node *child,
		  const char **name, char *tmp, size_t tmp_cap)
{
	struct fs_model *fm;
	int rc;

	*child = *dir;
	if (fs_kinds[dir->kind].top)
		return tree_entry(fs, NULL, dir, i, snap, child, name, tmp,
				  tmp_cap);
	fm = fs_tree_model_get(fs, dir, false);
	if (!fm)
		return fs_kind_is_dir(dir->kind) ? 0 : -ENOTDIR;
	rc = tree_entry(fs, fm, dir, i, snap, child, name, tmp, tmp_cap);
	fs_model_put(fm);
	return rc;
}

const struct fs_dir_ops fs_dir_root = {
	.lookup = tree_root_lookup,
	.entry = tree_root_entry,
};

const struct fs_dir_ops fs_dir_sessions = {
	.lookup = tree_sessions_lookup,
	.entry = tree_sessions_entry,
	.snapshot = tree_sessions_snapshot,
};

const struct fs_dir_ops fs_dir_weights = {
	.lookup = tree_weights_lookup,
	.entry = tree_weights_entry,
};
