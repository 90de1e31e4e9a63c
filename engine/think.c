// SPDX-License-Identifier: MIT
/*
 * The reasoning of a thinking model apart from its answer, as the text
 * streams: "<think>\nreasoning\n</think>\n\nanswer" (Qwen3, DeepSeek-R1,
 * QwQ, GLM...) gives reasoning "\nreasoning\n" and answer "answer".
 *
 *   before   whitespace, then either "<think>" (-> inside) or anything
 *            else (-> answer, the whitespace included)
 *   inside   reasoning up to "</think>" (-> after)
 *   after    the whitespace after the closing tag is dropped, the rest
 *            is the answer
 *
 * A prompt that ends inside an open block (engine_chat_opens_thinking)
 * starts "inside". Bytes that may be the start of a tag are held back
 * until the next piece decides; engine_think_split_flush() gives them out at
 * the end (an unclosed block is all reasoning, as llama.cpp's parser
 * takes it).
 */
#include <string.h>

#include "engine.h"

enum { THINK_BEFORE, THINK_INSIDE, THINK_AFTER, THINK_ANSWER };

/* more space than this before any text: no block is coming */
#define THINK_SPACE_MAX 16

void engine_think_split_init(struct engine_think_split *t, bool open)
{
	memset(t, 0, sizeof(*t));
	t->state = open ? THINK_INSIDE : THINK_BEFORE;
}

static void think_out(char *buf, size_t *n, const char *p, size_t len)
{
	memcpy(buf + *n, p, len);
	*n += len;
}

/* The longest suffix of p[0, len) that is a proper prefix of tag. */
static size_t think_partial(const char *p, size_t len, const char *tag)
{
	size_t t = strlen(tag), k = len < t - 1 ? len : t - 1;

	for (; k > 0; k--)
		if (!memcmp(p + len - k, tag, k))
			return k;
	return 0;
}

static bool think_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Hold work[from, w) for the next piece. */
static size_t think_hold(struct engine_think_split *t, const char *work,
			 size_t from, size_t w)
{
	memcpy(t->held, work + from, w - from);
	t->n_held = w - from;
	return w;
}

/* Before anything: "<think>" after some space opens a block. */
static size_t think_before(struct engine_think_split *t, const char *work,
			   size_t w)
{
	static const char open[] = ENGINE_THINK_OPEN;
	size_t j = 0, k;

	while (j < w && think_space(work[j]))
		j++;
	if (j == w && j <= THINK_SPACE_MAX)
		return think_hold(t, work, 0, w);
	k = w - j < sizeof(open) - 1 ? w - j : sizeof(open) - 1;
	if (j > THINK_SPACE_MAX || memcmp(work + j, open, k)) {
		t->state = THINK_ANSWER; /* the space is answer too */
		return 0;
	}
	if (k < sizeof(open) - 1)
		return think_hold(t, work, 0, w);
	t->state = THINK_INSIDE;
	return j + k;
}

/* Inside: reasoning up to "</think>"; a partial tag at the end waits. */
static size_t think_inside(struct engine_think_split *t, const char *work,
			   size_t i, size_t w, char *reasoning,
			   size_t *n_reasoning)
{
	static const char close[] = ENGINE_THINK_CLOSE;
	const char *hit = memmem(work + i, w - i, close, sizeof(close) - 1);
	size_t k;

	if (hit) {
		think_out(reasoning, n_reasoning, work + i,
			  (size_t)(hit - (work + i)));
		t->state = THINK_AFTER;
		return (size_t)(hit - work) + sizeof(close) - 1;
	}
	k = think_partial(work + i, w - i, close);
	think_out(reasoning, n_reasoning, work + i, w - i - k);
	return think_hold(t, work, w - k, w);
}

void engine_think_split_push(struct engine_think_split *t, const char *in,
			     size_t len, char *reasoning, size_t *n_reasoning,
			     char *answer, size_t *n_answer)
{
	char work[2 * ENGINE_THINK_HOLD];
	size_t i, k, w;

	*n_reasoning = *n_answer = 0;
	while (len) {
		/* the held bytes, then as much input as fits */
		w = t->n_held;
		memcpy(work, t->held, w);
		k = sizeof(work) - w < len ? sizeof(work) - w : len;
		memcpy(work + w, in, k);
		w += k;
		in += k;
		len -= k;
		t->n_held = 0;
		for (i = 0; i < w;) {
			switch (t->state) {
			case THINK_BEFORE: i = think_before(t, work, w); break;
			case THINK_INSIDE:
				i = think_inside(t, work, i, w, reasoning,
						 n_reasoning);
				break;
			case THINK_AFTER:
				while (i < w && think_space(work[i]))
					i++;
				if (i < w)
					t->state = THINK_ANSWER;
				break;
			default:
				think_out(answer, n_answer, work + i, w - i);
				i = w;
				break;
			}
		}
	}
}

void engine_think_split_flush(struct engine_think_split *t, char *reasoning,
			      size_t *n_reasoning, char *answer,
			      size_t *n_answer)
{
	*n_reasoning = *n_answer = 0;
	if (t->state == THINK_INSIDE)
		think_out(reasoning, n_reasoning, t->held, t->n_held);
	else if (t->state != THINK_AFTER)
		think_out(answer, n_answer, t->held, t->n_held);
	t->n_held = 0;
}
