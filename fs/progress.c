// SPDX-License-Identifier: MIT
/*
 * The load bar of `llmfs -f` when stderr is a terminal: one line, redrawn
 * in place with \r ten times a second while some model loads, one field
 * per loading model, and erased once none does:
 *
 *   qwen3-8b [#######-------------] 36% 1.52 GB/s  stories [###...] 90% ...
 *
 * A thread of its own draws it from the figures the loaders leave in
 * fs_model (load_done, load_total), so that the loader threads never wait
 * on the terminal. The first frame is drawn before the models start: every
 * model is seen loading at least once, however fast it loads. Lines that
 * other code prints on stderr (loader notices) go through
 * fs_progress_print(), which erases the bar first; the next frame redraws
 * it under them.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define PROGRESS_PERIOD_NS 100000000L
#define PROGRESS_BAR 20

static unsigned progress_columns(void)
{
	struct winsize ws;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
		return ws.ws_col;
	return 80;
}

/* One model's field; fm->lock taken here. false if it is not loading. */
static bool progress_field(struct fs_model *fm, char *out, size_t cap)
{
	char bar[PROGRESS_BAR + 1];
	uint64_t done, total;
	double secs, pct;
	unsigned fill;

	pthread_mutex_lock(&fm->lock);
	if (fm->state != FS_MODEL_LOADING) {
		pthread_mutex_unlock(&fm->lock);
		return false;
	}
	done = fm->load_done;
	total = fm->load_total;
	secs = fm->load_start ? fs_now() - fm->load_start : 0;
	pthread_mutex_unlock(&fm->lock);
	pct = total ? 100.0 * done / total : 0;
	fill = (unsigned)(pct * PROGRESS_BAR / 100);
	if (fill > PROGRESS_BAR)
		fill = PROGRESS_BAR;
	memset(bar, '#', fill);
	memset(bar + fill, '-', PROGRESS_BAR - fill);
	bar[PROGRESS_BAR] = '\0';
	snprintf(out, cap, "%s [%s] %3.0f%% %.2f GB/s", fm->name, bar, pct,
		 secs > 0 ? done / secs / 1e9 : 0.0);
	return true;
}

/*
 * Draw the bar (or erase it when nothing loads); progress_lock held.
 * Returns how many models are loading.
 */
static unsigned progress_draw(struct fs *fs)
{
	char line[1024], field[320];
	size_t len = 0, width = progress_columns() - 1;
	unsigned loading = 0;

	line[0] = '\0';
	for (unsigned i = 0; i < fs->n_models; i++) {
		if (!progress_field(fs->models[i], field, sizeof(field)))
			continue;
		len += snprintf(line + len, sizeof(line) - len, "%s%s",
				loading ? "  " : "", field);
		if (len >= sizeof(line))
			len = sizeof(line) - 1;
		loading++;
	}
	if (len > width)
		line[width] = '\0'; /* a wrapped line could not be redrawn */
	if (loading) {
		fprintf(stderr, "\r%s\033[K", line);
		fs->progress_shown = true;
	} else if (fs->progress_shown) {
		fputs("\r\033[K", stderr);
		fs->progress_shown = false;
	}
	fflush(stderr);
	return loading;
}

static void *progress_main(void *arg)
{
	struct fs *fs = arg;
	struct timespec ts;

	pthread_mutex_lock(&fs->progress_lock);
	while (!fs->progress_stop) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += PROGRESS_PERIOD_NS;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&fs->progress_cond, &fs->progress_lock,
				       &ts);
		/* A load never starts again: once none loads, the bar is done. */
		if (!progress_draw(fs))
			break;
	}
	if (fs->progress_shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		fs->progress_shown = false;
	}
	pthread_mutex_unlock(&fs->progress_lock);
	return NULL;
}

int fs_progress_start(struct fs *fs)
{
	int rc;

	if (!fs->opt.progress || !fs->n_models)
		return 0;
	pthread_mutex_lock(&fs->progress_lock);
	progress_draw(fs);
	pthread_mutex_unlock(&fs->progress_lock);
	rc = pthread_create(&fs->progress, NULL, progress_main, fs);
	if (rc)
		return -rc;
	fs->progress_started = true;
	return 0;
}

void fs_progress_stop(struct fs *fs)
{
	if (!fs->progress_started)
		return;
	pthread_mutex_lock(&fs->progress_lock);
	fs->progress_stop = true;
	pthread_cond_signal(&fs->progress_cond);
	pthread_mutex_unlock(&fs->progress_lock);
	pthread_join(fs->progress, NULL);
	fs->progress_started = false;
}

void fs_progress_print(struct fs *fs, const char *fmt, ...)
{
	va_list ap;

	if (!fs->opt.foreground)
		return; /* a daemon's stderr is /dev/null */
	pthread_mutex_lock(&fs->progress_lock);
	if (fs->progress_shown) {
		fputs("\r\033[K", stderr);
		fs->progress_shown = false; /* the next frame redraws it */
	}
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	pthread_mutex_unlock(&fs->progress_lock);
}
