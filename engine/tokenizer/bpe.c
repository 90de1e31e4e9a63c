// SPDX-License-Identifier: MIT
/*
 * Byte-level BPE as llama.cpp's llm_tokenizer_bpe_session: the fragment is
 * decoded into code points (bad UTF-8 becomes U+FFFD), split into words by
 * the pre-tokenizer, each word re-encoded as UTF-8 and every byte replaced
 * by GPT-2's printable code point for it; then, inside each word, the
 * adjacent pair with the lowest merge rank is merged (the leftmost on
 * ties) until no pair has a rank. A final symbol that is not a token is
 * emitted byte by byte, dropping bytes that are no token either.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Working memory reused across the words of one fragment. */
struct bpe_work {
	struct merge_sym *sym;
	size_t sym_cap;
	struct merge_heap heap;
	char *word;
	size_t word_cap;
};

static int bpe_try(const struct engine_vocab *v, const char *w,
		   const struct merge_sym *sym, int32_t left, int32_t right,
		   struct merge_heap *h)
{
	int32_t rank;

	if (left < 0 || right < 0)
		return 0;
	rank = vocab_merge_rank(v, w + sym[left].off, sym[left].n,
				w + sym[right].off, sym[right].n);
	if (rank < 0)
		return 0;
	return merge_heap_push(
		h, (struct merge_bigram){ .left = left,
					  .right = right,
					  .priority = -(float)rank,
					  .size = sym[left].n + sym[right].n });
}

static int bpe_emit(const struct engine_vocab *v, const char *s, size_t n,
		    struct tok_buf *out)
{
	int32_t id = engine_vocab_find(v, s, n);

	if (id >= 0)
		return tok_buf_push(out, id);
	for (size_t j = 0; j < n; j++) {
		id = engine_vocab_find(v, s + j, 1);
		if (id >= 0 && tok_buf_push(out, id))
			return -ENOMEM;
	}
	return 0;
}

static int bpe_word(const struct engine_vocab *v, struct bpe_work *wk,
		    const char *w, size_t len, struct tok_buf *out)
{
	size_t n = 0;
	int rc = 0;

	if (v->ignore_merges && engine_vocab_find(v, w, len) >= 0)
		return bpe_emit(v, w, len, out);
	if (len > wk->sym_cap) {
		struct merge_sym *s = realloc(wk->sym, len * sizeof(*s));

		if (!s)
			return -ENOMEM;
		wk->sym = s;
		wk->sym_cap = len;
	}
	for (size_t off = 0; off < len; n++) {
		size_t l = merge_utf8_len((uint8_t)w[off]);

		if (l > len - off)
			l = len - off;
		wk->sym[n].off = off;
		wk->sym[n].n = l;
		wk->sym[n].prev = (int32_t)n - 1;
		off += l;
		wk->sym[n].next = off == len ? -1 : (int32_t)n + 1;
	}
	wk->heap.n = 0;
	for (size_t i = 1; i < n && !rc; i++)
		rc = bpe_try(v, w, wk->sym, (int32_t)i - 1, (int32_t)i,
			     &wk->heap);
	while (wk->heap.n && !rc) {
		struct merge_bigram b = merge_heap_pop(&wk->heap);
		struct merge_sym *l = &wk->sym[b.left], *r = &wk->sym[b.right];

		/* stale: one side changed since the pair was queued */
		if (!l->n || !r->n || l->n + r->n != b.size)
			continue;
		l->n += r->n;
		r->n = 0;
		l->next = r->next;
		if (r->next >= 0)
			wk->sym[r->next].prev = b.left;
		rc = bpe_try(v, w, wk->sym, l->prev, b.left, &wk->heap);
		if (!rc)
			rc = bpe_try(v, w, wk->sym, b.left, l->next, &wk->heap);
	}
	for (size_t i = 0; i < n && !rc; i++)
		if (wk->sym[i].n)
			rc = bpe_emit(v, w + wk->sym[i].off, wk->sym[i].n, out);
	return rc;
}

/*
 * The word's bytes as GPT-2 code points in UTF-8: each code point is
 * re-encoded first (so U+FFFD stands for a bad byte, as in llama.cpp).
 */
static int bpe_encode_word(struct bpe_work *wk, const uint32_t *cps, size_t n,
			   size_t *len)
{
	size_t k = 0;

	if (n * 8 > wk->word_cap) {
		char *w = realloc(wk->word, n * 8);

		if (!w)
			return -ENOMEM;
		wk->word = w;
		wk->word_cap = n * 8;
	}
	for (size_t i = 0; i < n; i++) {
		char u[4];
		size_t l = uni_encode(cps[i], u);

		for (size_t j = 0; j < l; j++)
			k += uni_encode(uni_gpt2_byte_cp((uint8_t)u[j]),
					wk->word + k);
	}
	*len = k;
	return 0;
}

int bpe_tokenize(const struct engine_vocab *v, const char *text, size_t len,
		 struct tok_buf *out, struct err *err)
{
	struct bpe_work wk = { 0 };
	uint32_t *cps = NULL;
	size_t n_cps, *lens = NULL, n_words = 0, start = 0;
	int rc;

	if (!len)
		return 0;
	rc = uni_decode_all(text, len, &cps, &n_cps);
	if (rc)
		return err_set(err, ENOMEM, "tokenize: out of memory");
	rc = pretok_split(v->pretok, cps, n_cps, &lens, &n_words, err);
	if (rc) {
		free(cps);
		return rc;
	}
	for (size_t w = 0; w < n_words && !rc; w++) {
		size_t wl;

		rc = bpe_encode_word(&wk, cps + start, lens[w], &wl);
		if (!rc)
			rc = bpe_word(v, &wk, wk.word, wl, out);
		start += lens[w];
	}
	free(wk.sym);
	free(wk.heap.b);
	free(wk.word);
	free(lens);
	free(cps);
	if (rc)
		return err_set(err, -rc, "tokenize: out of memory");
	return 0;
}
