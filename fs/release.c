// SPDX-License-Identifier: MIT
/*
 * When a prompt of the shell idiom is submitted, and how its reader finds
 * it (Documentation/ABI.md, "generate").
 *
 * A prompt is everything written through one open file description:
 * `{ cat a; cat b; } > generate` writes through one description from two
 * children, and each child's close(2) is a FUSE flush. Only the last close
 * of the description is a release, so that is when the prompt is
 * submitted (files.c). But the kernel sends a release without waiting for
 * our answer, and any of the FUSE threads may take it: in
 *
 *   echo x > generate; cat generate
 *
 * the release of echo's description reaches /dev/fuse before cat's open,
 * yet another thread may serve cat's read before the release is done.
 * So the daemon reads /dev/fuse itself (fuse_session_custom_io), one
 * request at a time, and notes each release of a write-only file a
 * prompt is written to (generate, chat, tokenize, embed) as it comes out
 * of the kernel's queue, in its order; a reader of the shell idiom first
 * waits until every release noted before its own request was handled
 * (fs_release_wait). The wait is for requests already read: it is as
 * long as one release handler.
 * The kernel queues a release as a background request, behind at most
 * max_background others (ops.c raises it) before anything later.
 */
#include <errno.h>
#include <linux/fuse.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

#include "internal.h"

/* A release read from /dev/fuse and not yet handled. */
struct fs_release {
	uint64_t ticket; /* in the order the kernel handed them out */
	uint64_t fh;
	struct fs_release *next;
};

static bool release_tracked(uint64_t fh)
{
	const struct fs_handle *h = (const struct fs_handle *)(uintptr_t)fh;

	/* h stays until its release is handled; kind and mode never change */
	return h && !h->readable && fs_kind_takes_prompt(h->node.kind);
}

/* A request as read from the kernel: note it if it is such a release. */
static void release_note(struct fs *fs, const void *buf, size_t n)
{
	const struct fuse_in_header *in = buf;
	const struct fuse_release_in *arg;
	struct fs_release *r;

	if (n < sizeof(*in) + sizeof(*arg) || in->opcode != FUSE_RELEASE)
		return;
	arg = (const struct fuse_release_in *)(in + 1);
	if (!release_tracked(arg->fh))
		return;
	r = malloc(sizeof(*r));
	pthread_mutex_lock(&fs->release_lock);
	if (r) {
		r->ticket = ++fs->release_tickets;
		r->fh = arg->fh;
		r->next = fs->releases;
		fs->releases = r;
	}
	pthread_mutex_unlock(&fs->release_lock);
}

static void release_unlock(void *lock)
{
	pthread_mutex_unlock(lock);
}

/*
 * One reader of /dev/fuse at a time, so that what release_note sees is
 * the kernel's order. libfuse cancels its workers at the end, maybe
 * blocked in read(2): the cleanup handler unlocks.
 */
static ssize_t release_io_read(int fd, void *buf, size_t len, void *userdata)
{
	struct fs *fs = userdata;
	ssize_t n;
	int saved;

	pthread_mutex_lock(&fs->read_lock);
	pthread_cleanup_push(release_unlock, &fs->read_lock);
	n = read(fd, buf, len);
	saved = errno;
	if (n > 0)
		release_note(fs, buf, (size_t)n);
	else if (n < 0 && saved == ENODEV)
		fs_release_stop(fs); /* unmounted: nothing is coming */
	pthread_cleanup_pop(1);
	errno = saved;
	return n;
}

static ssize_t release_io_writev(int fd, struct iovec *iov, int count,
				 void *userdata)
{
	(void)userdata;
	return writev(fd, iov, count);
}

static const struct fuse_custom_io release_io = {
	.read = release_io_read,
	.writev = release_io_writev,
};

int fs_release_start(struct fs *fs)
{
	return fuse_session_custom_io(fs->se, &release_io,
				      fuse_session_fd(fs->se));
}

void fs_release_done(struct fs *fs, const struct fs_handle *h)
{
	struct fs_release **pp, *r = NULL;

	pthread_mutex_lock(&fs->release_lock);
	for (pp = &fs->releases; *pp; pp = &(*pp)->next) {
		if ((*pp)->fh == (uintptr_t)h) {
			r = *pp;
			*pp = r->next;
			pthread_cond_broadcast(&fs->release_cond);
			break;
		}
	}
	pthread_mutex_unlock(&fs->release_lock);
	free(r);
}

/* Is a release noted up to ticket still unhandled? release_lock held. */
static bool release_pending(const struct fs *fs, uint64_t ticket)
{
	for (const struct fs_release *r = fs->releases; r; r = r->next)
		if (r->ticket <= ticket)
			return true;
	return false;
}

void fs_release_wait(struct fs *fs)
{
	uint64_t ticket;

	pthread_mutex_lock(&fs->release_lock);
	ticket = fs->release_tickets;
	while (!fs->release_stop && release_pending(fs, ticket))
		pthread_cond_wait(&fs->release_cond, &fs->release_lock);
	pthread_mutex_unlock(&fs->release_lock);
}

void fs_release_stop(struct fs *fs)
{
	pthread_mutex_lock(&fs->release_lock);
	fs->release_stop = true;
	pthread_cond_broadcast(&fs->release_cond);
	pthread_mutex_unlock(&fs->release_lock);
}

void fs_release_free_all(struct fs *fs)
{
	while (fs->releases) {
		struct fs_release *r = fs->releases;

		fs->releases = r->next;
		free(r);
	}
}
