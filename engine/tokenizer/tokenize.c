// SPDX-License-Identifier: MIT
/*
 * Text to token ids as llama_tokenize: the text of special tokens is cut
 * out first, then SentencePiece or BPE runs on each piece in between.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- tokenize ---------------------------------------------------------- */

int tok_buf_push(struct tok_buf *b, int32_t id)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		int32_t *ids = realloc(b->ids, cap * sizeof(*ids));

		if (!ids)
			return -ENOMEM;
		b->ids = ids;
		b->cap = cap;
	}
	b->ids[b->n++] = id;
	return 0;
}

/*
 * Cut the text of special tokens out of the text, longest token first,
 * as llama.cpp's tokenizer_st_partition: each token splits every text
 * fragment left by the longer ones, at each of its occurrences. LSTRIP /
 * RSTRIP tokens take the white space beside them. One pass over the list
 * per token keeps this linear in the number of fragments.
 */
static int partition(const struct engine_vocab *v, const char *text, size_t len,
		     bool parse_special, struct frag_list *fl)
{
	struct frag_list next = { 0 };

	if (frag_push(fl, -1, 0, len))
		return -ENOMEM;
	for (size_t s = 0; s < v->n_special; s++) {
		int32_t id = v->special[s];
		const struct vocab_token *t = &v->tokens[id];
		const char *tt = v->arena + t->off;
		bool found = false;

		if (!parse_special &&
		    (t->attr & (ENGINE_TOKEN_CONTROL | ENGINE_TOKEN_UNKNOWN)))
			continue;
		for (size_t f = 0; f < fl->n && !found; f++)
			found = fl->f[f].token < 0 && fl->f[f].len >= t->len &&
				memmem(text + fl->f[f].off, fl->f[f].len, tt,
				       t->len);
		if (!found)
			continue;
		next.n = 0;
		for (size_t f = 0; f < fl->n; f++) {
			struct frag fr = fl->f[f];
			const char *m;

			while (fr.token < 0 && fr.len >= t->len &&
			       (m = memmem(text + fr.off, fr.len, tt,
					   t->len))) {
				size_t left = (size_t)(m - (text + fr.off));
				size_t r_off = fr.off + left + t->len;
				size_t r_len = fr.len - left - t->len;

				if (t->attr & ENGINE_TOKEN_LSTRIP)
					while (left &&
					       isspace((unsigned char)
							       text[fr.off +
								    left - 1]))
						left--;
				if (t->attr & ENGINE_TOKEN_RSTRIP)
					while (r_len &&
					       isspace((unsigned char)
							       text[r_off])) {
						r_off++;
						r_len--;
					}
				if (left && frag_push(&next, -1, fr.off, left))
					goto oom;
				if (frag_push(&next, id, 0, 0))
					goto oom;
				fr.off = r_off;
				fr.len = r_len;
			}
			if ((fr.token >= 0 || fr.len) &&
			    frag_push(&next, fr.token, fr.off, fr.len))
				goto oom;
		}
		{
			struct frag_list tmp = *fl;

			*fl = next;
			next = tmp;
		}
	}
	free(next.f);
	return 0;
oom:
	free(next.f);
	return -ENOMEM;
}

/* SPM's escape: spaces become U+2581, after an optional leading space. */
static int spm_fragment(const struct engine_vocab *v, const char *text,
			size_t len, bool prefix, struct tok_buf *out)
{
	size_t spaces = prefix, n;
	char *buf, *p;
	int rc;

	for (size_t i = 0; i < len; i++)
		spaces += text[i] == ' ';
	n = len + (prefix ? 1 : 0) + spaces * 2;
	buf = malloc(n + 1);
	if (!buf)
		return -ENOMEM;
	p = buf;
	if (prefix) {
		memcpy(p, "\xe2\x96\x81", 3);
		p += 3;
	}
	for (size_t i = 0; i < len; i++) {
		if (text[i] == ' ') {
			memcpy(p, "\xe2\x96\x81", 3);
			p += 3;
		} else {
			*p++ = text[i];
		}
	}
	rc = spm_tokenize(v, buf, (size_t)(p - buf), out);
	free(buf);
	return rc;
}

int engine_vocab_tokenize(const struct engine_vocab *v, const char *text,
			  size_t len, bool add_special, bool parse_special,
			  int32_t **tokens, size_t *n, struct err *err)
{
	struct frag_list fl = { 0 };
	struct tok_buf out = { 0 };
	bool prev_special = true, reported = false;
	int rc = 0;

	*tokens = NULL;
	*n = 0;
	if (len)
		rc = partition(v, text, len, parse_special, &fl);
	if (!rc && add_special && v->add_bos && v->bos >= 0)
		rc = tok_buf_push(&out, v->bos);
	for (size_t f = 0; f < fl.n && !rc; f++) {
		const struct frag *fr = &fl.f[f];

		if (fr->token >= 0) {
			rc = tok_buf_push(&out, fr->token);
			prev_special = true;
		} else if (v->type == ENGINE_VOCAB_SPM) {
			/* a space before the text that follows a special token */
			rc = spm_fragment(v, text + fr->off, fr->len,
					  v->add_space_prefix && prev_special,
					  &out);
			prev_special = false;
		} else {
			rc = bpe_tokenize(v, text + fr->off, fr->len, &out,
					  err);
			reported = rc != 0;
		}
	}
	if (!rc && add_special && v->add_eos && v->eos >= 0)
		rc = tok_buf_push(&out, v->eos);
	/* zero tokens still get an array the caller can free */
	if (!rc && !out.ids) {
		rc = tok_buf_push(&out, 0);
		out.n = 0;
	}
	free(fl.f);
	if (rc) {
		free(out.ids);
		if (!reported)
			err_set(err, -rc, "tokenize: out of memory");
		return rc;
	}
	*tokens = out.ids;
	*n = out.n;
	return 0;
}
