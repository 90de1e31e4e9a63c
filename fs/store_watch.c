// SPDX-License-Identifier: MIT
/*
 * The watch of the stores: one thread, one inotify descriptor, a watch on
 * every directory under each store's root (symbolic links not followed:
 * a hub cache's snapshots point into its own blobs/). Any change marks
 * its store; 100 ms after the last one, the marked stores are scanned
 * again (fs_store_rescan), so that a pull that writes a dozen files is one
 * scan, and a pulled model shows up well within a second.
 *
 * A regular file that was just created is not looked at until it is
 * closed (IN_CLOSE_WRITE) or renamed into place: Ollama writes a manifest
 * in place, and a scan in between would see half of it. A store's own
 * temporary files (a partial download) change nothing a scan reports.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "store.h"

/* seconds after the last change before the scan; a created file longer */
#define WATCH_SETTLE 0.1
#define WATCH_CREATED 1.0
/* directories below a root that are watched: enough for every layout */
#define WATCH_DEPTH 8

struct watch_dir {
	int wd;
	size_t store;
	char *path;
};

struct store_watch {
	struct fs *fs;
	int fd;	     /* inotify */
	int stop[2]; /* a byte here ends the thread */
	pthread_t thread;
	struct watch_dir *dirs;
	size_t n_dirs, cap_dirs;
	double due; /* when to scan, 0 for nothing marked */
};

static struct watch_dir *watch_find(struct store_watch *w, int wd)
{
	for (size_t i = 0; i < w->n_dirs; i++)
		if (w->dirs[i].wd == wd)
			return &w->dirs[i];
	return NULL;
}

/* Watch dir and the directories below it (not through symlinks). */
static void watch_add(struct store_watch *w, size_t store, const char *dir,
		      int depth)
{
	const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM |
			      IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE_SELF |
			      IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW;
	char path[PATH_MAX];
	struct watch_dir *d;
	struct dirent *e;
	DIR *dp;
	int wd;

	wd = inotify_add_watch(w->fd, dir, mask);
	if (wd < 0)
		return;
	if (!watch_find(w, wd)) {
		if (w->n_dirs == w->cap_dirs) {
			size_t cap = w->cap_dirs ? 2 * w->cap_dirs : 64;

			d = realloc(w->dirs, cap * sizeof(*d));
			if (!d)
				return;
			w->dirs = d;
			w->cap_dirs = cap;
		}
		d = &w->dirs[w->n_dirs];
		d->path = strdup(dir);
		if (!d->path)
			return;
		d->wd = wd;
		d->store = store;
		w->n_dirs++;
	}
	if (depth >= WATCH_DEPTH || !(dp = opendir(dir)))
		return;
	while ((e = readdir(dp))) {
		if (e->d_name[0] == '.' &&
		    (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (e->d_type == DT_UNKNOWN) {
			struct stat st;

			if (lstat(path, &st) || !S_ISDIR(st.st_mode))
				continue;
		}
		watch_add(w, store, path, depth + 1);
	}
	closedir(dp);
}

static int watch_depth(const char *root, const char *path)
{
	int depth = 0;

	for (const char *p = path + strlen(root); *p; p++)
		depth += *p == '/';
	return depth;
}

static void watch_due(struct store_watch *w, double delay)
{
	double when = fs_now() + delay;

	if (!w->due || when < w->due)
		w->due = when;
}

/* One event: mark its store, watch a new directory. */
static void watch_event(struct store_watch *w, const struct inotify_event *ev)
{
	struct watch_dir *d = watch_find(w, ev->wd);
	char path[PATH_MAX];
	struct stat st;

	if (ev->mask & IN_Q_OVERFLOW) {
		/* events were lost: watch everything again, scan all */
		for (size_t i = 0; i < fs_store_count(w->fs); i++) {
			watch_add(w, i, fs_store_root(w->fs, i), 0);
			fs_store_mark(w->fs, i);
		}
		watch_due(w, WATCH_SETTLE);
		return;
	}
	if (!d)
		return;
	if (ev->mask & IN_IGNORED) {
		/* the directory went: its slot is free */
		free(d->path);
		*d = w->dirs[--w->n_dirs];
		return;
	}
	snprintf(path, sizeof(path), "%s/%s", d->path, ev->len ? ev->name : "");
	if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && (ev->mask & IN_ISDIR))
		watch_add(w, d->store, path,
			  watch_depth(fs_store_root(w->fs, d->store), path));
	fs_store_mark(w->fs, d->store);
	/* a file just made: wait for its close, unless it is a link */
	if ((ev->mask & IN_CREATE) && !(ev->mask & IN_ISDIR) &&
	    !lstat(path, &st) && S_ISREG(st.st_mode))
		watch_due(w, WATCH_CREATED);
	else
		watch_due(w, WATCH_SETTLE);
}

static void watch_read(struct store_watch *w)
{
	char buf[16384] __attribute__((aligned(8)));
	ssize_t n = read(w->fd, buf, sizeof(buf));

	for (ssize_t off = 0; n > 0 && off < n;) {
		const struct inotify_event *ev = (void *)(buf + off);

		watch_event(w, ev);
		off += sizeof(*ev) + ev->len;
	}
}

static void *watch_main(void *arg)
{
	struct store_watch *w = arg;
	struct pollfd p[2] = { { .fd = w->fd, .events = POLLIN },
			       { .fd = w->stop[0], .events = POLLIN } };
	int timeout;

	fs_errors_uid = FS_UID_DAEMON;
	for (;;) {
		timeout = w->due ? (int)((w->due - fs_now()) * 1000) + 1 : -1;
		if (w->due && timeout <= 0) {
			w->due = 0;
			fs_store_rescan(w->fs, false);
			continue;
		}
		if (poll(p, 2, timeout) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (p[0].revents & POLLIN)
			watch_read(w);
	}
	return NULL;
}

static void watch_free(struct store_watch *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n_dirs; i++)
		free(w->dirs[i].path);
	free(w->dirs);
	if (w->fd >= 0)
		close(w->fd);
	if (w->stop[0] >= 0) {
		close(w->stop[0]);
		close(w->stop[1]);
	}
	free(w);
}

int fs_store_watch_start(struct fs *fs)
{
	struct store_watch *w;
	int rc;

	if (!fs_store_count(fs))
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fs = fs;
	w->stop[0] = w->stop[1] = -1;
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0 || pipe2(w->stop, O_CLOEXEC)) {
		rc = -errno;
		watch_free(w);
		return rc;
	}
	for (size_t i = 0; i < fs_store_count(fs); i++)
		watch_add(w, i, fs_store_root(fs, i), 0);
	/* a change between the mount's scan and the watches: scan again */
	for (size_t i = 0; i < fs_store_count(fs); i++)
		fs_store_mark(fs, i);
	w->due = fs_now();
	rc = pthread_create(&w->thread, NULL, watch_main, w);
	if (rc) {
		watch_free(w);
		return -rc;
	}
	*fs_store_watch_state(fs) = w;
	return 0;
}

void fs_store_watch_stop(struct fs *fs)
{
	struct store_watch **slot = fs_store_watch_state(fs), *w = *slot;
	char c = 'q';

	if (!w)
		return;
	*slot = NULL;
	if (write(w->stop[1], &c, 1) != 1)
		return; /* cannot happen with an empty pipe; leak over hang */
	pthread_join(w->thread, NULL);
	watch_free(w);
}
