// SPDX-License-Identifier: MIT
/*
 * SHA-256 of a model file, for the `info` file: enough to check a download
 * against its published digest. The digest itself is nettle's. It runs on
 * a thread of its own after the load, so that a big model is ready before
 * its digest is.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "internal.h"

int fs_sha256_file(const char *path, char hex[65], const _Atomic bool *stop)
{
	enum { CHUNK = 1 << 20 };
	struct sha256_ctx c;
	uint8_t digest[SHA256_DIGEST_SIZE];
	uint8_t *buf;
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(CHUNK);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	sha256_init(&c);
	while ((n = read(fd, buf, CHUNK)) > 0) {
		if (*stop) {
			rc = -ECANCELED;
			break;
		}
		sha256_update(&c, (size_t)n, buf);
	}
	if (n < 0)
		rc = -errno;
	if (!rc) {
		sha256_digest(&c, sizeof(digest), digest);
		for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
			snprintf(hex + 2 * i, 3, "%02x", digest[i]);
	}
	free(buf);
	close(fd);
	return rc;
}
