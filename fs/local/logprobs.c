// SPDX-License-Identifier: MIT
/*
 * sessions/N/logprobs: the last answer's tokens with their
 * log-probabilities, one JSON object a line, in OpenAI's field names:
 *
 *   {"id":1782,"token":" there","bytes":[32,116,104,101,114,101],
 *    "logprob":-0.0312,"top_logprobs":[{"id":1782,"token":" there",
 *    "bytes":[...],"logprob":-0.0312},...]}
 *
 * "token" is the piece as text (bytes that are not UTF-8 become U+FFFD),
 * "bytes" the piece itself; top_logprobs has `logprobs=N` entries
 * (config), best first. The numbers are the log-softmax of the model's
 * raw logits (engine_generation_logprobs).
 */
#include <errno.h>
#include <stdio.h>

#include "local.h"

/* A UTF-8 character's length at s (n bytes left), 0 if not one. */
static size_t logprobs_utf8(const unsigned char *s, size_t n)
{
	size_t len = s[0] < 0x80 ? 1 :
		     s[0] < 0xc2 ? 0 :
		     s[0] < 0xe0 ? 2 :
		     s[0] < 0xf0 ? 3 :
		     s[0] < 0xf5 ? 4 :
				   0;

	if (!len || len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((len == 3 && s[0] == 0xe0 && s[1] < 0xa0) ||
	    (len == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
	    (len == 4 && s[0] == 0xf0 && s[1] < 0x90) ||
	    (len == 4 && s[0] == 0xf4 && s[1] >= 0x90))
		return 0;
	return len;
}

/* "id":N,"token":"...","bytes":[...],"logprob":X */
static int logprobs_entry(struct fs_buf *b, const struct engine_model *m,
			  const struct engine_logprob *e)
{
	unsigned char piece[1024];
	size_t n = engine_token_piece(m, e->token, (char *)piece,
				      sizeof(piece));
	int rc = fs_buf_printf(b, "\"id\":%d,\"token\":\"", e->token);

	if (n > sizeof(piece))
		n = sizeof(piece);
	for (size_t i = 0; i < n && !rc;) {
		size_t len = logprobs_utf8(piece + i, n - i);
		unsigned char c = piece[i];

		if (!len) {
			rc = fs_buf_add(b, "\\ufffd", 6);
			i++;
		} else if (c == '"' || c == '\\') {
			rc = fs_buf_printf(b, "\\%c", c);
			i++;
		} else if (c < 0x20) {
			rc = fs_buf_printf(b, "\\u%04x", c);
			i++;
		} else {
			rc = fs_buf_add(b, piece + i, len);
			i += len;
		}
	}
	if (!rc)
		rc = fs_buf_add(b, "\",\"bytes\":[", 11);
	for (size_t i = 0; i < n && !rc; i++)
		rc = fs_buf_printf(b, "%s%u", i ? "," : "", piece[i]);
	if (!rc)
		rc = fs_buf_printf(b, "],\"logprob\":%.9g", e->logprob);
	return rc;
}

int fs_logprobs_format(const struct engine_model *m,
		       const struct engine_token_logprobs *lp, size_t n,
		       struct fs_buf *b)
{
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		rc = fs_buf_add(b, "{", 1);
		if (!rc)
			rc = logprobs_entry(b, m, &lp[i].chosen);
		if (!rc)
			rc = fs_buf_add(b, ",\"top_logprobs\":[", 17);
		for (uint32_t k = 0; k < lp[i].n_top && !rc; k++) {
			rc = fs_buf_add(b, k ? ",{" : "{", k ? 2 : 1);
			if (!rc)
				rc = logprobs_entry(b, m, &lp[i].top[k]);
			if (!rc)
				rc = fs_buf_add(b, "}", 1);
		}
		if (!rc)
			rc = fs_buf_add(b, "]}\n", 3);
	}
	return rc;
}
