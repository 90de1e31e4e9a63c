// SPDX-License-Identifier: MIT
/*
 * The order in which llama.cpp visits its token_to_id map.
 *
 * llama.cpp finds EOT, EOM and the FIM tokens by text when the file does
 * not name them, and takes the first match while walking a
 * std::unordered_map<std::string, llama_token>. Qwen's vocabulary has two
 * EOT texts (<|endoftext|>, <|im_end|>), and which one wins depends on that
 * walk: <|im_end|> in the 152k vocabulary, <|endoftext|> in the 16k one.
 * So we replay what libstdc++ does (the reference build is GCC's): insert
 * the texts in id order into a table of singly linked nodes with
 * std::hash<std::string> (MurmurHash2-64 with libstdc++'s seed) and the
 * bucket counts its prime rehash policy picks, then read the list.
 * The result was checked against a real std::unordered_map for every
 * vocabulary in the shared data.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* std::_Hash_bytes(p, n, 0xc70f6907) on a 64-bit target */
static uint64_t shift_mix(uint64_t v)
{
	return v ^ (v >> 47);
}

static uint64_t std_hash(const char *p, size_t len)
{
	const uint64_t mul = 0xc6a4a7935bd1e995ull;
	uint64_t h = 0xc70f6907ull ^ (len * mul);
	size_t aligned = len & ~(size_t)7;

	for (size_t i = 0; i < aligned; i += 8) {
		uint64_t d;

		memcpy(&d, p + i, 8); /* little-endian, as on x86 */
		h ^= shift_mix(d * mul) * mul;
		h *= mul;
	}
	if (len & 7) {
		uint64_t d = 0;

		for (size_t n = len & 7; n-- > 0;)
			d = (d << 8) + (uint8_t)p[aligned + n];
		h ^= d;
		h *= mul;
	}
	h = shift_mix(h) * mul;
	return shift_mix(h);
}

/*
 * Bucket counts of a growing unordered_map (max load factor 1): 13 at the
 * first insert, then the next of these when the element count would pass
 * the bucket count. Measured from libstdc++ (GCC 12).
 */
static const uint64_t bucket_counts[] = {
	13,	29,	59,	 127,	  257,	   541,	  1109,
	2357,	5087,	10273,	 20753,	  42043,   85229, 172933,
	351061, 712697, 1447153, 2938679, 5967347,
};

#define NONE (-1)
#define BEFORE_BEGIN (-2)

struct umap {
	uint64_t *hash;
	int32_t *next;
	int32_t *bkt; /* the node before the bucket's first, or NONE */
	uint64_t n_bkt;
	int32_t head; /* _M_before_begin._M_nxt */
};

static int32_t *next_of(struct umap *m, int32_t node)
{
	return node == BEFORE_BEGIN ? &m->head : &m->next[node];
}

static int umap_rehash(struct umap *m, uint64_t n_bkt)
{
	int32_t *nb = malloc(n_bkt * sizeof(*nb));
	int32_t p = m->head;
	uint64_t bbegin = 0;

	if (!nb)
		return -ENOMEM;
	for (uint64_t i = 0; i < n_bkt; i++)
		nb[i] = NONE;
	m->head = NONE;
	while (p != NONE) {
		int32_t next = m->next[p];
		uint64_t b = m->hash[p] % n_bkt;

		if (nb[b] == NONE) {
			m->next[p] = m->head;
			m->head = p;
			nb[b] = BEFORE_BEGIN;
			if (m->next[p] != NONE)
				nb[bbegin] = p;
			bbegin = b;
		} else {
			int32_t *prev = next_of(m, nb[b]);

			m->next[p] = *prev;
			*prev = p;
		}
		p = next;
	}
	free(m->bkt);
	m->bkt = nb;
	m->n_bkt = n_bkt;
	return 0;
}

static void umap_insert(struct umap *m, int32_t node)
{
	uint64_t b = m->hash[node] % m->n_bkt;

	if (m->bkt[b] != NONE) {
		int32_t *prev = next_of(m, m->bkt[b]);

		m->next[node] = *prev;
		*prev = node;
		return;
	}
	m->next[node] = m->head;
	m->head = node;
	if (m->next[node] != NONE)
		m->bkt[m->hash[m->next[node]] % m->n_bkt] = node;
	m->bkt[b] = BEFORE_BEGIN;
}

int vocab_map_order(const struct engine_vocab *v, int32_t **order)
{
	struct umap m = { 0 };
	size_t n_unique = 0, k = 0, step = 0;
	int32_t *ids = NULL, *out = NULL;
	uint8_t *seen = NULL;
	int rc = -ENOMEM;

	*order = NULL;
	m.head = NONE;
	m.hash = malloc(v->n_tokens * sizeof(*m.hash));
	m.next = malloc(v->n_tokens * sizeof(*m.next));
	ids = malloc(v->n_tokens * sizeof(*ids));
	out = malloc(v->n_tokens * sizeof(*out));
	seen = calloc(v->n_tokens, 1);
	if (!m.hash || !m.next || !ids || !out || !seen)
		goto out;
	for (uint32_t i = 0; i < v->n_tokens; i++) {
		const char *t = v->arena + v->tokens[i].off;
		size_t len = v->tokens[i].len;
		int32_t id = engine_vocab_find(v, t, len);

		/* a repeated text only updates the value: no new node */
		if (seen[id])
			continue;
		seen[id] = 1;
		if (n_unique == (size_t)(step ? m.n_bkt : 0)) {
			if (step ==
			    sizeof(bucket_counts) / sizeof(bucket_counts[0])) {
				rc = -E2BIG;
				goto out;
			}
			if (umap_rehash(&m, bucket_counts[step++]))
				goto out;
		}
		m.hash[n_unique] = std_hash(t, len);
		ids[n_unique] = id;
		umap_insert(&m, (int32_t)n_unique);
		n_unique++;
	}
	for (int32_t p = m.head; p != NONE; p = m.next[p])
		out[k++] = ids[p];
	*order = out;
	out = NULL;
	rc = (int)k;
out:
	free(out);
	free(seen);
	free(ids);
	free(m.hash);
	free(m.next);
	free(m.bkt);
	return rc;
}
