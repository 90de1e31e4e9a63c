// SPDX-License-Identifier: MIT
/*
 * The `errors` file of a model: its last FS_ERRORS_MAX failures, one line
 * each, "2026-11-22T19:30:05Z config: unknown key 'temp'". Plan 9 servers
 * answer with strings; a FUSE reply carries only an errno, so the string
 * is kept here for the user to cat.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

void fs_errors_init(struct fs_errors *e)
{
	memset(e, 0, sizeof(*e));
	pthread_mutex_init(&e->lock, NULL);
}

void fs_errors_destroy(struct fs_errors *e)
{
	for (unsigned i = 0; i < FS_ERRORS_MAX; i++)
		free(e->lines[i]);
	pthread_mutex_destroy(&e->lock);
}

void fs_errors_add(struct fs_errors *e, const char *fmt, ...)
{
	char msg[600], stamp[32], *line;
	time_t t = time(NULL);
	struct tm tm;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One line per error, whatever the message held. */
	for (char *p = msg; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (asprintf(&line, "%s %s", stamp, msg) < 0)
		return;
	pthread_mutex_lock(&e->lock);
	free(e->lines[e->head]);
	e->lines[e->head] = line;
	e->head = (e->head + 1) % FS_ERRORS_MAX;
	if (e->n < FS_ERRORS_MAX)
		e->n++;
	e->total++;
	pthread_mutex_unlock(&e->lock);
}

int fs_errors_format(struct fs_errors *e, struct fs_buf *b)
{
	int rc = 0;

	pthread_mutex_lock(&e->lock);
	for (unsigned i = 0; i < e->n && !rc; i++) {
		unsigned k = (e->head + FS_ERRORS_MAX - e->n + i) % FS_ERRORS_MAX;

		rc = fs_buf_printf(b, "%s\n", e->lines[k]);
	}
	pthread_mutex_unlock(&e->lock);
	return rc;
}
