// SPDX-License-Identifier: MIT
/*
 * SentencePiece (BPE flavour) as llama.cpp's llm_tokenizer_spm: start from
 * one symbol per UTF-8 character, repeatedly merge the adjacent pair whose
 * concatenation is the token with the highest score (the leftmost pair on
 * ties), and emit each final symbol as its token or, if it is none, as
 * byte tokens <0xXX>.
 *
 * Every merged symbol is a token by construction, so llama.cpp's
 * "resegment" step only ever falls back to bytes for single characters;
 * it needs no record of the merges here.
 */
#include <errno.h>
#include <stdlib.h>

#include "tokenizer_internal.h"

struct spm_sym {
	int32_t prev, next;
	size_t off, n;
};

struct spm_bigram {
	int32_t left, right;
	float score;
	size_t size;
};

struct spm_heap {
	struct spm_bigram *b;
	size_t n, cap;
};

/* a pops before b: higher score, then the leftmost */
static bool spm_before(const struct spm_bigram *a, const struct spm_bigram *b)
{
	if (a->score != b->score)
		return a->score > b->score;
	return a->left < b->left;
}

static int spm_heap_push(struct spm_heap *h, struct spm_bigram x)
{
	size_t i;

	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 64;
		struct spm_bigram *b = realloc(h->b, cap * sizeof(*b));

		if (!b)
			return -ENOMEM;
		h->b = b;
		h->cap = cap;
	}
	i = h->n++;
	while (i && spm_before(&x, &h->b[(i - 1) / 2])) {
		h->b[i] = h->b[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->b[i] = x;
	return 0;
}

static struct spm_bigram spm_heap_pop(struct spm_heap *h)
{
	struct spm_bigram top = h->b[0], x = h->b[--h->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && spm_before(&h->b[c + 1], &h->b[c]))
			c++;
		if (!spm_before(&h->b[c], &x))
			break;
		h->b[i] = h->b[c];
		i = c;
	}
	if (h->n)
		h->b[i] = x;
	return top;
}

static size_t utf8_len(uint8_t lead)
{
	static const uint8_t len[16] = { 1, 1, 1, 1, 1, 1, 1, 1,
					 1, 1, 1, 1, 2, 2, 3, 4 };
	return len[lead >> 4];
}

static int spm_try(const struct engine_vocab *v, const char *text,
		const struct spm_sym *sym, int32_t left, int32_t right,
		struct spm_heap *h)
{
	size_t size;
	int32_t id;

	if (left < 0 || right < 0)
		return 0;
	size = sym[left].n + sym[right].n;
	id = engine_vocab_find(v, text + sym[left].off, size);
	if (id < 0)
		return 0;
	return spm_heap_push(h, (struct spm_bigram){
		.left = left, .right = right, .score = vocab_score(v, id),
		.size = size });
}

int spm_tokenize(const struct engine_vocab *v, const char *text, size_t len,
		struct tok_buf *out)
{
	struct spm_heap h = { 0 };
	struct spm_sym *sym;
	size_t n = 0;
	int rc = 0;

	if (!len)
		return 0;
	if (len > INT32_MAX)
		return -EINVAL;
	sym = malloc(len * sizeof(*sym));
	if (!sym)
		return -ENOMEM;
	for (size_t off = 0; off < len; n++) {
		size_t l = utf8_len((uint8_t)text[off]);

		if (l > len - off)
			l = len - off;
		sym[n].off = off;
		sym[n].n = l;
		sym[n].prev = (int32_t)n - 1;
		off += l;
		sym[n].next = off == len ? -1 : (int32_t)n + 1;
	}
	for (size_t i = 1; i < n && !rc; i++)
		rc = spm_try(v, text, sym, (int32_t)i - 1, (int32_t)i, &h);

	while (h.n && !rc) {
		struct spm_bigram b = spm_heap_pop(&h);
		struct spm_sym *l = &sym[b.left], *r = &sym[b.right];

		/* stale: one side was merged away since the pair was queued */
		if (!l->n || !r->n || l->n + r->n != b.size)
			continue;
		l->n += r->n;
		r->n = 0;
		l->next = r->next;
		if (r->next >= 0)
			sym[r->next].prev = b.left;
		rc = spm_try(v, text, sym, l->prev, b.left, &h);
		if (!rc)
			rc = spm_try(v, text, sym, b.left, l->next, &h);
	}

	for (int32_t i = 0; i != -1 && !rc; i = sym[i].next) {
		int32_t id = engine_vocab_find(v, text + sym[i].off, sym[i].n);

		if (id >= 0) {
			rc = tok_buf_push(out, id);
			continue;
		}
		for (size_t j = 0; j < sym[i].n && !rc; j++) {
			id = vocab_byte_token(v, (uint8_t)text[sym[i].off + j]);
			if (id >= 0)
				rc = tok_buf_push(out, id);
		}
	}
	free(h.b);
	free(sym);
	return rc;
}
