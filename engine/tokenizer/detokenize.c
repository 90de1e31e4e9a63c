// SPDX-License-Identifier: MIT
/*
 * Token ids back to text, as llama.cpp's token_to_piece and detokenize,
 * and engine.h's streaming detokenizer, which hands out whole UTF-8
 * characters only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine.h"
#include "internal.h"

/* Append n bytes at *k of out[cap], counting what does not fit too. */
static void put(char *out, size_t cap, size_t *k, const char *s, size_t n)
{
	if (*k < cap)
		memcpy(out + *k, s, n <= cap - *k ? n : cap - *k);
	*k += n;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* GPT-2 code points back to bytes; strangers as llama.cpp marks them. */
static size_t piece_bpe(const char *t, size_t n, char *out, size_t cap)
{
	size_t k = 0, i = 0;

	while (i < n) {
		size_t l;
		uint32_t cp = uni_decode((const uint8_t *)t + i, n - i, &l);
		int b = uni_gpt2_cp_byte(cp);
		char u[4], hex[4];

		i += l;
		if (b >= 0) {
			char c = (char)b;

			put(out, cap, &k, &c, 1);
			continue;
		}
		put(out, cap, &k, "[UNK_BYTE_0x", 12);
		l = uni_encode(cp, u);
		for (size_t j = 0; j < l; j++) {
			snprintf(hex, sizeof(hex), "%02x", (uint8_t)u[j]);
			put(out, cap, &k, hex, 2);
		}
		put(out, cap, &k, t, n);
		put(out, cap, &k, "]", 1);
	}
	return k;
}

size_t engine_vocab_piece(const struct engine_vocab *v, int32_t id, bool lstrip,
			  bool special, char *out, size_t cap)
{
	const struct vocab_token *tk;
	const char *t;
	size_t n, k = 0;
	uint32_t attr;

	if (id < 0 || (uint32_t)id >= v->n_tokens)
		return 0;
	tk = &v->tokens[id];
	attr = tk->attr;
	t = v->arena + tk->off;
	n = tk->len;
	if (!special && (attr & (ENGINE_TOKEN_UNKNOWN | ENGINE_TOKEN_CONTROL)))
		return 0;
	if (attr & (ENGINE_TOKEN_UNKNOWN | ENGINE_TOKEN_CONTROL |
		    ENGINE_TOKEN_USER_DEFINED)) {
		if (lstrip && n && t[0] == ' ') {
			t++;
			n--;
		}
		put(out, cap, &k, t, n);
		return k;
	}
	if (attr & ENGINE_TOKEN_NORMAL) {
		char tmp[1024];
		char *buf = tmp;
		size_t m;

		if (v->type == ENGINE_VOCAB_SPM) {
			/* U+2581 -> ' ' */
			m = 0;
			buf = n <= sizeof(tmp) ? tmp : malloc(n);
			if (!buf)
				return 0;
			for (size_t i = 0; i < n; i++) {
				if (i + 2 < n &&
				    !memcmp(t + i, "\xe2\x96\x81", 3)) {
					buf[m++] = ' ';
					i += 2;
				} else {
					buf[m++] = t[i];
				}
			}
		} else {
			m = piece_bpe(t, n, NULL, 0);
			buf = m <= sizeof(tmp) ? tmp : malloc(m);
			if (!buf)
				return 0;
			piece_bpe(t, n, buf, m);
		}
		{
			const char *p = buf;
			size_t pn = m;

			if (lstrip && pn && p[0] == ' ') {
				p++;
				pn--;
			}
			put(out, cap, &k, p, pn);
		}
		if (buf != tmp)
			free(buf);
		return k;
	}
	if ((attr & ENGINE_TOKEN_BYTE) && n >= 5) {
		int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
		char c;

		/* strtol of the two digits, as llama.cpp reads <0xXX> */
		if (hi < 0)
			c = 0;
		else if (lo < 0)
			c = (char)hi;
		else
			c = (char)(hi * 16 + lo);
		if (!(lstrip && c == ' '))
			put(out, cap, &k, &c, 1);
		return k;
	}
	return 0;
}

/*
 * llama.cpp's clean_up_tokenization_spaces, in place: " ?" " !" " ." " ,"
 * lose the space, " ' " loses both, " 's" " 'm" " 're" " 've" lose it.
 */
static size_t clean_spaces(char *text, size_t total)
{
	size_t t1 = total, t2, t3;

	total = total ? 1 : 0;
	for (size_t i = 1; i < t1; i++) {
		char x = text[i];

		if (text[i - 1] == ' ' &&
		    (x == '?' || x == '!' || x == '.' || x == ','))
			total--;
		text[total++] = x;
	}
	t2 = total;
	total = total ? 1 : 0;
	for (size_t i = 1; i < t2; i++) {
		char x = text[i];

		if (x == '\'' && i + 1 < t2 && text[i - 1] == ' ' &&
		    text[i + 1] == ' ') {
			total--;
			text[++i] = '\0';
		}
		text[total++] = x;
	}
	t3 = total;
	total = total ? 1 : 0;
	for (size_t i = 1; i < t3; i++) {
		char x = text[i];

		if (text[i - 1] == ' ' && x == '\'' && i + 1 < t3) {
			char x1 = text[i + 1];

			if (x1 == 's' || x1 == 'm')
				total--;
			else if (i + 2 < t3 &&
				 ((x1 == 'r' && text[i + 2] == 'e') ||
				  (x1 == 'v' && text[i + 2] == 'e')))
				total--;
		}
		text[total++] = x;
	}
	return total;
}

int engine_vocab_detokenize(const struct engine_vocab *v, const int32_t *tokens,
			    size_t n, bool special, char **text, size_t *len,
			    struct err *err)
{
	size_t total = 0, k = 0;
	char *s;

	*text = NULL;
	*len = 0;
	for (size_t i = 0; i < n; i++)
		total += engine_vocab_piece(v, tokens[i],
					    i == 0 && v->add_space_prefix,
					    special, NULL, 0);
	s = malloc(total + 1);
	if (!s)
		return err_set(err, ENOMEM, "detokenize: out of memory");
	for (size_t i = 0; i < n; i++)
		k += engine_vocab_piece(v, tokens[i],
					i == 0 && v->add_space_prefix, special,
					s + k, total - k);
	if (v->clean_spaces)
		k = clean_spaces(s, k);
	s[k] = '\0';
	*text = s;
	*len = k;
	return 0;
}

/* ---- streaming --------------------------------------------------------- */

/*
 * Length of the valid UTF-8 character at s[0..n): > 0 if whole, 0 if s is
 * a valid but unfinished prefix, -m if the first m bytes are a maximal
 * invalid subpart (each becomes one U+FFFD, as a UTF-8 decoder does).
 */
static long utf8_check(const uint8_t *s, size_t n)
{
	uint8_t c = s[0], lo = 0x80, hi = 0xbf;
	size_t need;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		need = 1;
	} else if (c >= 0xe0 && c <= 0xef) {
		need = 2;
		if (c == 0xe0)
			lo = 0xa0;
		if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 3;
		if (c == 0xf0)
			lo = 0x90;
		if (c == 0xf4)
			hi = 0x8f;
	} else {
		return -1;
	}
	for (size_t i = 1; i <= need; i++) {
		if (i >= n)
			return 0;
		if (s[i] < lo || s[i] > hi)
			return -(long)i;
		lo = 0x80;
		hi = 0xbf;
	}
	return (long)need + 1;
}

/* Emit the whole characters of buf[0..n); returns how many bytes stay. */
static size_t emit_utf8(const uint8_t *buf, size_t n, bool final, char *out,
			size_t cap, size_t *k)
{
	size_t i = 0;

	while (i < n) {
		long l = utf8_check(buf + i, n - i);

		if (l == 0 && !final)
			break;
		if (l <= 0) {
			if (*k + 3 <= cap) {
				memcpy(out + *k, "\xef\xbf\xbd", 3);
				*k += 3;
			}
			i += l == 0 ? n - i : (size_t)-l;
			continue;
		}
		if (*k + (size_t)l <= cap) {
			memcpy(out + *k, buf + i, (size_t)l);
			*k += (size_t)l;
		}
		i += (size_t)l;
	}
	return n - i;
}

size_t engine_vocab_detok_push(const struct engine_vocab *v,
			       struct engine_detokenizer *d, int32_t token,
			       char *out, size_t cap)
{
	uint8_t stack[512];
	uint8_t *buf = stack;
	size_t piece, n, k = 0, left;
	bool lstrip = d->first && v->add_space_prefix;

	d->first = false;
	piece = engine_vocab_piece(v, token, lstrip, false, NULL, 0);
	n = d->n_pending + piece;
	if (n > sizeof(stack)) {
		buf = malloc(n);
		if (!buf)
			return 0;
	}
	memcpy(buf, d->pending, d->n_pending);
	engine_vocab_piece(v, token, lstrip, false, (char *)buf + d->n_pending,
			   piece);
	left = emit_utf8(buf, n, false, out, cap, &k);
	/* at most 3 bytes of an unfinished character stay behind */
	memcpy(d->pending, buf + n - left, left);
	d->n_pending = left;
	if (buf != stack)
		free(buf);
	return k;
}

size_t engine_vocab_detok_flush(struct engine_detokenizer *d, char *out,
				size_t cap)
{
	size_t k = 0;

	emit_utf8(d->pending, d->n_pending, true, out, cap, &k);
	d->n_pending = 0;
	return k;
}

void engine_vocab_detok_context(const struct engine_vocab *v,
				struct engine_detokenizer *d,
				const int32_t *tokens, size_t n)
{
	size_t from = n > 3 ? n - 3 : 0, len = 0;

	/*
	 * llama.cpp's completion output (node-llama-cpp's detokenize with
	 * lastTokens) renders the last three prompt tokens with the new
	 * ones and cuts their text off; if they render as nothing the new
	 * tokens are rendered alone, and SentencePiece drops the first
	 * one's leading space.
	 */
	for (size_t i = from; i < n; i++)
		len += engine_vocab_piece(v, tokens[i],
					  i == from && v->add_space_prefix,
					  false, NULL, 0);
	d->first = len == 0;
	d->n_pending = 0;
}
