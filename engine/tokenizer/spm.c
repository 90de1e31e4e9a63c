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

#include "internal.h"

static int spm_try(const struct engine_vocab *v, const char *text,
		   const struct merge_sym *sym, int32_t left, int32_t right,
		   struct merge_heap *h)
{
	size_t size;
	int32_t id;

	if (left < 0 || right < 0)
		return 0;
	size = sym[left].n + sym[right].n;
	id = engine_vocab_find(v, text + sym[left].off, size);
	if (id < 0)
		return 0;
	return merge_heap_push(
		h, (struct merge_bigram){ .left = left,
					  .right = right,
					  .priority = vocab_score(v, id),
					  .size = size });
}

int spm_tokenize(const struct engine_vocab *v, const char *text, size_t len,
		 struct tok_buf *out)
{
	struct merge_heap h = { 0 };
	struct merge_sym *sym;
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
		size_t l = merge_utf8_len((uint8_t)text[off]);

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
		struct merge_bigram b = merge_heap_pop(&h);
		struct merge_sym *l = &sym[b.left], *r = &sym[b.right];

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
