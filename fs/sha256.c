// SPDX-License-Identifier: MIT
/*
 * SHA-256 (FIPS 180-4) of a model file, for the `info` file: enough to
 * check a download against its published digest without a crypto library.
 * It runs on a thread of its own after the load, so that a big model is
 * ready before its digest is.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct sha256 {
	uint32_t h[8];
	uint64_t n;          /* bytes hashed */
	uint8_t block[64];
	size_t used;
};

static const uint32_t sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(struct sha256 *c, const uint8_t *p)
{
	uint32_t w[64], a, b, d, e, f, g, h, cc, t1, t2;

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
			(uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^
			(w[i - 15] >> 3);
		uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^
			(w[i - 2] >> 10);

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = c->h[0]; b = c->h[1]; cc = c->h[2]; d = c->h[3];
	e = c->h[4]; f = c->h[5]; g = c->h[6]; h = c->h[7];
	for (int i = 0; i < 64; i++) {
		t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) +
			((e & f) ^ (~e & g)) + sha256_k[i] + w[i];
		t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) +
			((a & b) ^ (a & cc) ^ (b & cc));
		h = g; g = f; f = e; e = d + t1;
		d = cc; cc = b; b = a; a = t1 + t2;
	}
	c->h[0] += a; c->h[1] += b; c->h[2] += cc; c->h[3] += d;
	c->h[4] += e; c->h[5] += f; c->h[6] += g; c->h[7] += h;
}

static void sha256_init(struct sha256 *c)
{
	static const uint32_t h0[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};

	memset(c, 0, sizeof(*c));
	memcpy(c->h, h0, sizeof(h0));
}

static void sha256_add(struct sha256 *c, const uint8_t *p, size_t n)
{
	c->n += n;
	while (n) {
		size_t k = 64 - c->used;

		if (k > n)
			k = n;
		memcpy(c->block + c->used, p, k);
		c->used += k;
		p += k;
		n -= k;
		if (c->used == 64) {
			sha256_block(c, c->block);
			c->used = 0;
		}
	}
}

static void sha256_end(struct sha256 *c, char hex[65])
{
	uint64_t bits = c->n * 8;
	uint8_t pad = 0x80, zero = 0, len[8];

	sha256_add(c, &pad, 1);
	while (c->used != 56)
		sha256_add(c, &zero, 1);
	for (int i = 0; i < 8; i++)
		len[i] = bits >> (56 - 8 * i);
	sha256_add(c, len, 8);
	for (int i = 0; i < 8; i++)
		snprintf(hex + 8 * i, 9, "%08x", c->h[i]);
}

int fs_sha256_file(const char *path, char hex[65], volatile bool *stop)
{
	enum { CHUNK = 1 << 20 };
	struct sha256 c;
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
		sha256_add(&c, buf, n);
	}
	if (n < 0)
		rc = -errno;
	if (!rc)
		sha256_end(&c, hex);
	free(buf);
	close(fd);
	return rc;
}
