// SPDX-License-Identifier: MIT
/*
 * Growable byte buffers for the text of generated files and the answers of
 * generations, and the two clocks fs/ uses.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

static int buf_grow(struct fs_buf *b, size_t need)
{
	size_t cap = b->cap ? b->cap : 256;
	char *p;

	if (need < b->len)
		return -EOVERFLOW;
	if (need + 1 <= b->cap)
		return 0;
	while (cap < need + 1) {
		if (cap > SIZE_MAX / 2)
			return -ENOMEM;
		cap *= 2;
	}
	p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

int fs_buf_add(struct fs_buf *b, const void *data, size_t n)
{
	int rc = buf_grow(b, b->len + n);

	if (rc)
		return rc;
	if (n)
		memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

int fs_buf_printf(struct fs_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	rc = buf_grow(b, b->len + n);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, n + 1, fmt, ap);
	va_end(ap);
	b->len += n;
	return 0;
}

void fs_buf_free(struct fs_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

char *fs_buf_detach(struct fs_buf *b, size_t *len)
{
	char *p = b->p;

	if (len)
		*len = b->len;
	b->p = NULL;
	b->len = b->cap = 0;
	return p;
}

double fs_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double fs_wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}
