// SPDX-License-Identifier: MIT
/*
 * The `errors` file of a model: its last FS_ERRORS_MAX failures, one line
 * each, "2026-11-22T19:30:05Z config: unknown key 'temp'". Plan 9 servers
 * answer with strings; a FUSE reply carries only an errno, so the string
 * is kept here for the user to cat.
 *
 * A line often quotes what a user wrote, and every user of the mount may
 * read it: a newline becomes a space (it would forge a line of its own),
 * other control bytes (an escape sequence for the reader's terminal) and
 * bytes that are not UTF-8 are written as \xHH. Each line remembers whose request caused it;
 * when the ring is full, the oldest line of the uid holding the most lines
 * goes, so that a flood of bad writes pushes out only its author's lines.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

_Thread_local uid_t fs_errors_uid = FS_UID_DAEMON;

void fs_errors_init(struct fs_errors *e)
{
	memset(e, 0, sizeof(*e));
	pthread_mutex_init(&e->lock, NULL);
}

void fs_errors_destroy(struct fs_errors *e)
{
	for (unsigned i = 0; i < e->n; i++)
		free(e->lines[i]);
	pthread_mutex_destroy(&e->lock);
}

const char *fs_errors_bare(const char *msg)
{
	return strncmp(msg, "generate: ", 10) ? msg : msg + 10;
}

/* Bytes of the valid UTF-8 character at p (not C0/C1/DEL), or 0. */
static size_t errors_utf8_len(const unsigned char *p)
{
	size_t n, i;
	unsigned c = p[0];

	if (c >= 0x20 && c < 0x7f)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	for (i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	/* C1 controls (U+0080..U+009F), overlong and surrogate forms */
	if (c == 0xc2 && p[1] < 0xa0)
		return 0;
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) ||
	    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))
		return 0;
	return n;
}

/* msg with its unsafe bytes as \xHH; malloc'ed, or NULL. */
static char *errors_escape(const char *msg)
{
	const unsigned char *p = (const unsigned char *)msg;
	size_t len = strlen(msg), o = 0, n;
	char *out = malloc(4 * len + 1);

	if (!out)
		return NULL;
	while (*p) {
		n = errors_utf8_len(p);
		if (*p == '\n' || *p == '\r') {
			out[o++] = ' '; /* one line per error, readable */
			p++;
		} else if (n) {
			memcpy(out + o, p, n);
			o += n;
			p += n;
		} else {
			o += sprintf(out + o, "\\x%02x", *p++);
		}
	}
	out[o] = '\0';
	return out;
}

/* The slot to reuse in a full ring: the oldest line of the top uid. */
static unsigned errors_victim(const struct fs_errors *e)
{
	unsigned best = 0, best_n = 0;

	for (unsigned i = 0; i < e->n; i++) {
		unsigned k = 0;

		for (unsigned j = 0; j < e->n; j++)
			k += e->uids[j] == e->uids[i];
		if (k > best_n) {
			best_n = k;
			best = i;
		}
	}
	return best;
}

void fs_errors_add(struct fs_errors *e, const char *fmt, ...)
{
	char msg[600], stamp[32], *line, *safe;
	time_t t = time(NULL);
	struct tm tm;
	unsigned k;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	safe = errors_escape(msg);
	if (!safe)
		return;
	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (asprintf(&line, "%s %s", stamp, safe) < 0)
		line = NULL;
	free(safe);
	if (!line)
		return;
	pthread_mutex_lock(&e->lock);
	if (e->n == FS_ERRORS_MAX) {
		k = errors_victim(e);
		free(e->lines[k]);
		memmove(e->lines + k, e->lines + k + 1,
			(e->n - k - 1) * sizeof(*e->lines));
		memmove(e->uids + k, e->uids + k + 1,
			(e->n - k - 1) * sizeof(*e->uids));
		e->n--;
	}
	e->lines[e->n] = line;
	e->uids[e->n] = fs_errors_uid;
	e->n++;
	e->total++;
	pthread_mutex_unlock(&e->lock);
}

int fs_errors_format(struct fs_errors *e, struct fs_buf *b)
{
	int rc = 0;

	pthread_mutex_lock(&e->lock);
	for (unsigned i = 0; i < e->n && !rc; i++)
		rc = fs_buf_printf(b, "%s\n", e->lines[i]);
	pthread_mutex_unlock(&e->lock);
	return rc;
}
