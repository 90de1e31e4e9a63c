// SPDX-License-Identifier: MIT
/*
 * Per-uid limits: what one user of an allow_other mount may hold in the
 * daemon, so that no user can exhaust it for the others (and no sequence
 * of actions can take the daemon to the OOM killer): sessions/N
 * directories, answers (queued, running, or finished and unread), and
 * prompt bytes written and not yet submitted. A charge past the limit
 * fails with an errno the user sees (EMFILE, EAGAIN, ENOMEM) and the
 * caller writes an errors line. The table is small: one entry per uid
 * that ever held something, freed at unmount.
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

/* Defaults for the options left at 0. */
#define LIMITS_SESSIONS 1024
#define LIMITS_GENERATIONS 256
#define LIMITS_PROMPT_BYTES (64ull << 20)
#define LIMITS_STREAM_BUFFER (1ull << 20)
#define LIMITS_PREFILL_CHUNK 64

static const struct {
	const char *what;
	int error;
} limits_info[FS_USE_COUNT] = {
	[FS_USE_SESSIONS] = { "sessions", -EMFILE },
	[FS_USE_GENERATIONS] = { "answers queued, running or unread", -EAGAIN },
	[FS_USE_PROMPT_BYTES] = { "prompt bytes not yet submitted", -ENOMEM },
};

const char *fs_use_what(enum fs_use u)
{
	return limits_info[u].what;
}

uint64_t fs_use_limit(const struct fs *fs, enum fs_use u)
{
	switch (u) {
	case FS_USE_SESSIONS:
		return fs->opt.max_sessions ? fs->opt.max_sessions :
					      LIMITS_SESSIONS;
	case FS_USE_GENERATIONS:
		return fs->opt.max_generations ? fs->opt.max_generations :
						 LIMITS_GENERATIONS;
	case FS_USE_PROMPT_BYTES:
		return fs->opt.max_prompt_bytes ? fs->opt.max_prompt_bytes :
						  LIMITS_PROMPT_BYTES;
	default: return 0;
	}
}

uint64_t fs_stream_buffer(const struct fs *fs)
{
	return fs->opt.stream_buffer ? fs->opt.stream_buffer :
				       LIMITS_STREAM_BUFFER;
}

unsigned fs_prefill_chunk(const struct fs *fs)
{
	return fs->opt.prefill_chunk ? fs->opt.prefill_chunk :
				       LIMITS_PREFILL_CHUNK;
}

bool fs_may_write_model(const struct fs *fs, uid_t uid)
{
	return uid == 0 || uid == fs->uid || fs->opt.shared_config;
}

/* uid's entry, made if need be; use_lock held. */
static struct fs_uid_use *limits_find(struct fs *fs, uid_t uid, bool make)
{
	struct fs_uid_use *e;

	for (e = fs->use; e; e = e->next)
		if (e->uid == uid)
			return e;
	if (!make || !(e = calloc(1, sizeof(*e))))
		return NULL;
	e->uid = uid;
	e->next = fs->use;
	fs->use = e;
	return e;
}

int fs_use_charge(struct fs *fs, uid_t uid, enum fs_use u, uint64_t n)
{
	uint64_t limit = fs_use_limit(fs, u);
	struct fs_uid_use *e;
	int rc = 0;

	pthread_mutex_lock(&fs->use_lock);
	e = limits_find(fs, uid, true);
	if (!e)
		rc = -ENOMEM;
	else if (e->n[u] + n > limit)
		rc = limits_info[u].error;
	else
		e->n[u] += n;
	pthread_mutex_unlock(&fs->use_lock);
	return rc;
}

void fs_use_release(struct fs *fs, uid_t uid, enum fs_use u, uint64_t n)
{
	struct fs_uid_use *e;

	pthread_mutex_lock(&fs->use_lock);
	e = limits_find(fs, uid, false);
	if (e)
		e->n[u] = e->n[u] > n ? e->n[u] - n : 0;
	pthread_mutex_unlock(&fs->use_lock);
}

int fs_input_charge(struct fs_model *fm, uid_t uid, uint64_t n,
		    const char *what)
{
	struct fs *fs = fm->fs;
	int rc = fs_use_charge(fs, uid, FS_USE_PROMPT_BYTES, n);

	if (rc) {
		fs_errors_add(&fm->errors,
			      "%s: uid %u holds %llu %s, the limit "
			      "(--max-prompt-bytes); nothing of this input "
			      "is taken",
			      what, (unsigned)uid,
			      (unsigned long long)fs_use_limit(
				      fs, FS_USE_PROMPT_BYTES),
			      fs_use_what(FS_USE_PROMPT_BYTES));
		return rc;
	}
	rc = fs_budget_charge(fs, n);
	if (rc) {
		fs_use_release(fs, uid, FS_USE_PROMPT_BYTES, n);
		fs_errors_add(&fm->errors,
			      "%s: the daemon's memory budget is full "
			      "(--mem-budget, status); nothing of this input "
			      "is taken",
			      what);
	}
	return rc;
}

void fs_input_release(struct fs *fs, uid_t uid, uint64_t n)
{
	if (!n)
		return;
	fs_use_release(fs, uid, FS_USE_PROMPT_BYTES, n);
	fs_budget_release(fs, n);
}

void fs_use_free_all(struct fs *fs)
{
	while (fs->use) {
		struct fs_uid_use *e = fs->use;

		fs->use = e->next;
		free(e);
	}
}
