/* SPDX-License-Identifier: MIT */
/*
 * The heap of candidate merges that SentencePiece and byte-level BPE share
 * (see struct merge_heap in internal.h).
 */
#include "internal.h"

/* a pops before b: higher priority, then the leftmost */
static bool merge_before(const struct merge_bigram *a,
			 const struct merge_bigram *b)
{
	if (a->priority != b->priority)
		return a->priority > b->priority;
	return a->left < b->left;
}

int merge_heap_push(struct merge_heap *h, struct merge_bigram x)
{
	size_t i;

	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 64;
		struct merge_bigram *b = realloc(h->b, cap * sizeof(*b));

		if (!b)
			return -ENOMEM;
		h->b = b;
		h->cap = cap;
	}
	i = h->n++;
	while (i && merge_before(&x, &h->b[(i - 1) / 2])) {
		h->b[i] = h->b[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->b[i] = x;
	return 0;
}

struct merge_bigram merge_heap_pop(struct merge_heap *h)
{
	struct merge_bigram top = h->b[0], x = h->b[--h->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && merge_before(&h->b[c + 1], &h->b[c]))
			c++;
		if (!merge_before(&h->b[c], &x))
			break;
		h->b[i] = h->b[c];
		i = c;
	}
	if (h->n)
		h->b[i] = x;
	return top;
}

size_t merge_utf8_len(uint8_t lead)
{
	static const uint8_t len[16] = { 1, 1, 1, 1, 1, 1, 1, 1,
					 1, 1, 1, 1, 2, 2, 3, 4 };
	return len[lead >> 4];
}
