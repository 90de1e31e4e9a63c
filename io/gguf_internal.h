/* SPDX-License-Identifier: MIT */
/*
 * Inside io/: what the GGUF reader files (gguf.c, gguf_value.c,
 * gguf_names.c) share. Nothing outside io/ includes this.
 */
#ifndef LLMFS_IO_GGUF_INTERNAL_H
#define LLMFS_IO_GGUF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"

/*
 * A buffered reader over one file descriptor. Every read is checked
 * against size first, so nothing is allocated or believed from a count
 * that the remaining bytes cannot hold.
 */
struct gguf_reader {
	int fd;
	const char *path;
	uint64_t size;	    /* of the file, from fstat */
	uint64_t pos;	    /* next byte to read */
	unsigned char *buf; /* GGUF_READER_BUF bytes */
	uint64_t buf_off;   /* file offset of buf[0] */
	size_t buf_len;	    /* valid bytes in buf */
	char what[96];	    /* what is being read, for messages */
	struct err *err;
};

#define GGUF_READER_BUF (64 * 1024)

/* Nested arrays deeper than this are refused (recursion bound). */
#define GGUF_MAX_DEPTH 8

/* Longest string accepted (keys, values, tensor names): 1 GiB. */
#define GGUF_MAX_STRING (1ull << 30)

static inline uint64_t gguf_reader_left(const struct gguf_reader *r)
{
	return r->size - r->pos;
}

int gguf_reader_bytes(struct gguf_reader *r, void *dst, uint64_t n);
int gguf_reader_u32(struct gguf_reader *r, uint32_t *v);
int gguf_reader_u64(struct gguf_reader *r, uint64_t *v);
/* A length-prefixed string, NUL-terminated in s->data (malloc'd). */
int gguf_reader_string(struct gguf_reader *r, struct io_gguf_string *s);

/* One metadata value of the given type (already read from the file). */
int gguf_value_read(struct gguf_reader *r, struct io_gguf_value *v,
		    uint32_t type);
void gguf_value_free(struct io_gguf_value *v);
/* Bytes one element of a type takes in the file at least; 0 if invalid. */
uint64_t gguf_value_min_bytes(uint32_t type);

/*
 * Grow *p (an array of elem-sized items with room for *cap) so that it has
 * room for need items, doubling; -ENOMEM on failure or overflow.
 */
int gguf_grow(void **p, uint64_t *cap, uint64_t need, size_t elem);

/* An open-addressing set of names, each mapped to an index. */
struct gguf_names {
	struct gguf_name_slot *slot;
	uint64_t cap; /* power of two, or 0 */
	uint64_t n;
};

/* 0, -EEXIST if name is already there, or -ENOMEM. name is borrowed. */
int gguf_names_add(struct gguf_names *s, const char *name, uint64_t idx);
/* The index of name, or -1. */
int64_t gguf_names_find(const struct gguf_names *s, const char *name);
void gguf_names_free(struct gguf_names *s);

#endif
