// SPDX-License-Identifier: MIT
/*
 * BPE pre-tokenizers: split text into words before merges, as llama.cpp's
 * unicode_regex_split() does for each tokenizer.ggml.pre.
 *
 * Each pre-tokenizer is a list of regexes applied one after the other;
 * each refines the words of the previous one, and the text between two
 * matches stays a word of its own. llama.cpp runs four of the patterns
 * (GPT-2's, Llama 3's, Qwen2's, Qwen3.5's) through hand-written scanners,
 * and these differ from a real regex engine at the edges (the end of a
 * word, unassigned code points), so they are scanners here too. Every
 * other pattern goes through PCRE2 on the same input llama.cpp feeds
 * std::regex: patterns with \p{..} classes run on a "collapsed" string of
 * one byte per code point (ASCII kept, letters 0xD2, numbers 0xD1, ...,
 * other white space 0x0B), the rest on the code points in UTF-8 with
 * non-ASCII white space as 0x0B.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pretokenize.h"
#include "tokenizer.h"
#include "unicode.h"

enum step_kind {
	STEP_GPT2, /* 's|'t|...| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
	STEP_LLAMA3, /* (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|... */
	STEP_QWEN2,  /* the same with \p{N} one digit at a time */
	STEP_QWEN35, /* Qwen2 with [\p{L}\p{M}]+ for letters */
	STEP_REGEX,  /* PCRE2 */
};

struct pretok_step {
	enum step_kind kind;
	bool collapsed; /* run on the one-byte-per-code-point string */
	pcre2_code *code;
};

struct pretok {
	const char *name;
	bool clean_spaces, ignore_merges, add_bos, no_bos;
	size_t n_steps;
	struct pretok_step steps[PRETOK_MAX_STEPS];
};

static const char *pretok_supported =
	"qwen2, llama-bpe/llama3, gpt-2, deepseek-coder, deepseek-llm, "
	"deepseek-v3, falcon, starcoder, command-r, tekken, gpt-4o, default "
	"and others listed in Documentation/tokenizer.md";

/* The classes the collapsed string stands for, as llama.cpp maps them. */
static const struct {
	const char *prop;
	char byte;
	const char *ascii;
} collapse_props[] = {
	{ "\\p{N}", (char)0xd1, "0-9" },
	{ "\\p{L}", (char)0xd2, "A-Za-z" },
	{ "\\p{P}", (char)0xd3, "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}" },
	{ "\\p{M}", (char)0xd4, "" },
	{ "\\p{S}", (char)0xd5, "\\$\\+<-=>\\^`\\|~" },
	{ "\\p{Lu}", (char)0xd2, "A-Za-z" },
	{ "\\p{Ll}", (char)0xd2, "A-Za-z" },
	{ "\\p{Lt}", (char)0xd2, "A-Za-z" },
	{ "\\p{Lm}", (char)0xd2, "A-Za-z" },
	{ "\\p{Lo}", (char)0xd2, "A-Za-z" },
};

static bool uses_props(const char *re)
{
	for (size_t i = 0;
	     i < sizeof(collapse_props) / sizeof(collapse_props[0]); i++)
		if (strstr(re, collapse_props[i].prop))
			return true;
	return false;
}

/*
 * Rewrite \p{X} into the collapsed byte plus its ASCII members, inside a
 * bracket if not already in one. *out is malloc'ed.
 */
static int collapse_regex(const char *re, char **out)
{
	size_t n = strlen(re), k = 0;
	char *s = malloc(n * 24 + 1);
	bool inside = false;

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		bool done = false;

		if (re[i] == '[' && (i == 0 || re[i - 1] != '\\')) {
			s[k++] = '[';
			inside = true;
			continue;
		}
		if (inside && re[i] == ']' && re[i - 1] != '\\') {
			s[k++] = ']';
			inside = false;
			continue;
		}
		for (size_t p = 0;
		     p < sizeof(collapse_props) / sizeof(collapse_props[0]);
		     p++) {
			size_t pl = strlen(collapse_props[p].prop);

			if (strncmp(re + i, collapse_props[p].prop, pl))
				continue;
			if (!inside)
				s[k++] = '[';
			/* \xd1 as an escape: the byte itself is not valid UTF-8 */
			k += (size_t)sprintf(
				s + k, "\\x%02x",
				(unsigned char)collapse_props[p].byte);
			memcpy(s + k, collapse_props[p].ascii,
			       strlen(collapse_props[p].ascii));
			k += strlen(collapse_props[p].ascii);
			if (!inside)
				s[k++] = ']';
			i += pl - 1;
			done = true;
			break;
		}
		if (!done)
			s[k++] = re[i];
	}
	s[k] = '\0';
	*out = s;
	return 0;
}

void pretok_free(struct pretok *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_steps; i++)
		pcre2_code_free(p->steps[i].code);
	free(p);
}

static int pretok_compile(struct pretok_step *st, const char *re,
			  bool force_regex, struct err *err)
{
	char *pattern = NULL;
	/* ECMAScript's $ (std::regex) is the end of the text only */
	uint32_t opts = PCRE2_DOLLAR_ENDONLY;
	int errcode, rc;
	PCRE2_SIZE erroff;

	if (!force_regex && !strcmp(re, RE_GPT2)) {
		st->kind = STEP_GPT2;
		return 0;
	}
	if (!force_regex && !strcmp(re, RE_LLAMA3)) {
		st->kind = STEP_LLAMA3;
		return 0;
	}
	if (!force_regex && !strcmp(re, RE_QWEN2)) {
		st->kind = STEP_QWEN2;
		return 0;
	}
	if (!force_regex && !strcmp(re, RE_QWEN35)) {
		st->kind = STEP_QWEN35;
		return 0;
	}
	st->kind = STEP_REGEX;
	st->collapsed = uses_props(re);
	if (st->collapsed) {
		rc = collapse_regex(re, &pattern);
		if (rc)
			return err_set(err, ENOMEM,
				       "pre-tokenizer: out of memory");
	} else {
		opts |= PCRE2_UTF | PCRE2_NO_UTF_CHECK;
	}
	st->code = pcre2_compile((PCRE2_SPTR)(pattern ? pattern : re),
				 PCRE2_ZERO_TERMINATED, opts, &errcode, &erroff,
				 NULL);
	free(pattern);
	if (!st->code) {
		PCRE2_UCHAR msg[160];

		pcre2_get_error_message(errcode, msg, sizeof(msg));
		return err_set(err, EINVAL, "pre-tokenizer regex '%s': %s", re,
			       (const char *)msg);
	}
	/* JIT is only a speed-up; the interpreter gives the same matches */
	(void)pcre2_jit_compile(st->code, PCRE2_JIT_COMPLETE);
	return 0;
}

int pretok_new_regex(struct pretok **out, const char *name, bool force_regex,
		     struct err *err)
{
	const struct pretok_def *def = NULL;
	struct pretok *p;
	int rc;

	*out = NULL;
	for (size_t i = 0; !def && i < pretok_n_defs; i++)
		for (const char *const *n = pretok_defs[i].names; *n; n++)
			if (!strcmp(*n, name)) {
				def = &pretok_defs[i];
				name = *n;
				break;
			}
	if (!def)
		return err_set(err, ENOTSUP,
			       "unsupported pre-tokenizer '%s' (supported: %s)",
			       name, pretok_supported);
	p = calloc(1, sizeof(*p));
	if (!p)
		return err_set(err, ENOMEM, "pre-tokenizer: out of memory");
	p->name = name;
	p->clean_spaces = def->clean_spaces;
	p->ignore_merges = def->ignore_merges;
	p->add_bos = def->add_bos;
	p->no_bos = def->no_bos;
	for (size_t i = 0; i < PRETOK_MAX_STEPS && def->regex[i]; i++) {
		rc = pretok_compile(&p->steps[i], def->regex[i], force_regex,
				    err);
		p->n_steps = i + 1;
		if (rc) {
			pretok_free(p);
			return rc;
		}
	}
	*out = p;
	return 0;
}

int pretok_new(struct pretok **out, const char *name, struct err *err)
{
	return pretok_new_regex(out, name, false, err);
}

bool pretok_clean_spaces(const struct pretok *p)
{
	return p->clean_spaces;
}

bool pretok_ignore_merges(const struct pretok *p)
{
	return p->ignore_merges;
}

bool pretok_forces_bos(const struct pretok *p)
{
	return p->add_bos;
}

bool pretok_no_bos(const struct pretok *p)
{
	return p->no_bos;
}

/* ---- word lists ------------------------------------------------------- */

struct words {
	size_t *len;
	size_t n, cap;
};

static int words_push(struct words *w, size_t len)
{
	if (!len)
		return 0;
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		size_t *l = realloc(w->len, cap * sizeof(*l));

		if (!l)
			return -ENOMEM;
		w->len = l;
		w->cap = cap;
	}
	w->len[w->n++] = len;
	return 0;
}

/* ---- the scanners ------------------------------------------------------ */

/* What the scanners look at: code points and flags of one word. */
struct scan {
	const uint32_t *cps;
	const uint16_t *fl;
	size_t ini, end;
	size_t prev; /* end of the last emitted piece */
	struct words *out;
	int rc;
};

#define NO_CP 0xffffffffu

static uint32_t sc_cp(const struct scan *s, size_t pos)
{
	return pos >= s->ini && pos < s->end ? s->cps[pos] : NO_CP;
}

/* Flags, 0 outside the word (so no class test holds there). */
static uint16_t sc_fl(const struct scan *s, size_t pos)
{
	return pos >= s->ini && pos < s->end ? s->fl[pos] : 0;
}

static size_t sc_emit(struct scan *s, size_t end)
{
	size_t len = end - s->prev;

	if (len && !s->rc)
		s->rc = words_push(s->out, len);
	s->prev = end;
	return len;
}

static uint32_t ascii_lower(uint32_t c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* 's 't 're 've 'm 'll 'd (any case if fold): its length, or 0. */
static size_t sc_contraction(const struct scan *s, size_t pos, bool fold)
{
	uint32_t c1, c2;

	if (sc_cp(s, pos) != '\'' || pos + 1 >= s->end)
		return 0;
	c1 = sc_cp(s, pos + 1);
	if (fold)
		c1 = ascii_lower(c1);
	if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
		return 2;
	if (pos + 2 >= s->end)
		return 0;
	c2 = sc_cp(s, pos + 2);
	if (fold)
		c2 = ascii_lower(c2);
	if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') ||
	    (c1 == 'l' && c2 == 'l'))
		return 3;
	return 0;
}

#define IS_L(f) ((f)&UNI_LETTER)
#define IS_N(f) ((f)&UNI_NUMBER)
#define IS_S(f) ((f)&UNI_SPACE)

/* Trailing white space: the piece \s+(?!\S) or \s+ takes from pos. */
static size_t sc_spaces(struct scan *s, size_t pos, bool newlines)
{
	size_t n = 0, last_nl = 0;

	while (IS_S(sc_fl(s, pos + n))) {
		uint32_t c = sc_cp(s, pos + n);

		if (newlines && (c == '\r' || c == '\n'))
			last_nl = pos + n + 1;
		n++;
	}
	if (last_nl) /* \s*[\r\n]+ */
		return sc_emit(s, last_nl);
	if (n > 1 && sc_cp(s, pos + n) != NO_CP) /* \s+(?!\S) */
		return sc_emit(s, pos + n - 1);
	if (n) /* \s+ */
		return sc_emit(s, pos + n);
	return sc_emit(s, pos + 1); /* nothing matched */
}

static void scan_gpt2(struct scan *s)
{
	size_t pos = s->ini;

	while (pos < s->end) {
		uint32_t c = sc_cp(s, pos);
		uint16_t f = sc_fl(s, pos);
		uint16_t f2 = c == ' ' ? sc_fl(s, pos + 1) : f;
		size_t k = sc_contraction(s, pos, false);

		if (k) {
			pos += sc_emit(s, pos + k);
			continue;
		}
		if (IS_L(f2) || IS_N(f2)) { /* ' ?\p{L}+' | ' ?\p{N}+' */
			uint16_t want = IS_L(f2) ? UNI_LETTER : UNI_NUMBER;

			pos += c == ' ';
			while (sc_fl(s, pos) & want)
				pos++;
			sc_emit(s, pos);
			continue;
		}
		if (!(f2 & (UNI_SPACE | UNI_LETTER | UNI_NUMBER)) && f2) {
			pos += c == ' '; /* ' ?[^\s\p{L}\p{N}]+' */
			while (!(f2 & (UNI_SPACE | UNI_LETTER | UNI_NUMBER)) &&
			       f2)
				f2 = sc_fl(s, ++pos);
			sc_emit(s, pos);
			continue;
		}
		pos += sc_spaces(s, pos, false);
	}
}

/*
 * Llama 3, Qwen2 and Qwen3.5: digits in runs of up to max_digits, words
 * of the classes in word (letters; letters and marks for Qwen3.5).
 */
static void scan_llama3(struct scan *s, size_t max_digits, uint16_t word)
{
	const uint16_t other = UNI_SPACE | UNI_NUMBER | word;
	size_t pos = s->ini;

	while (pos < s->end) {
		uint32_t c = sc_cp(s, pos);
		uint16_t f = sc_fl(s, pos), f2;
		size_t k = sc_contraction(s, pos, true);

		if (k) {
			pos += sc_emit(s, pos + k);
			continue;
		}
		/* [^\r\n\p{L}\p{N}]?\p{L}+ */
		if (!(c == '\r' || c == '\n' || IS_N(f)) &&
		    ((f & word) || (sc_fl(s, pos + 1) & word))) {
			pos++;
			while (sc_fl(s, pos) & word)
				pos++;
			sc_emit(s, pos);
			continue;
		}
		if (IS_N(f)) { /* \p{N}{1,max} */
			size_t ini = pos;

			while (IS_N(sc_fl(s, pos))) {
				if (++pos - ini >= max_digits) {
					sc_emit(s, pos);
					ini = pos;
				}
			}
			sc_emit(s, pos);
			continue;
		}
		/* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
		f2 = c == ' ' ? sc_fl(s, pos + 1) : f;
		if (!(f2 & other) && f) {
			pos += c == ' ';
			while (!(f2 & other) && f2)
				f2 = sc_fl(s, ++pos);
			while (sc_cp(s, pos) == '\r' || sc_cp(s, pos) == '\n')
				pos++;
			sc_emit(s, pos);
			continue;
		}
		pos += sc_spaces(s, pos, true);
	}
}

/* ---- PCRE2 ------------------------------------------------------------- */

/*
 * Code point index of a byte offset in a UTF-8 subject, for offsets that
 * only grow: the cursor walks forward by lead bytes.
 */
struct cp_cursor {
	const char *s;
	bool utf;
	size_t byte, cp;
};

static size_t cp_at(struct cp_cursor *c, size_t byte)
{
	if (!c->utf)
		return byte;
	while (c->byte < byte) {
		c->byte++;
		while (c->byte < byte &&
		       ((uint8_t)c->s[c->byte] & 0xc0) == 0x80)
			c->byte++;
		c->cp++;
	}
	return c->cp;
}

/*
 * The matches of one regex inside [0, n) of subject become words, and so
 * does the text between them (std::regex_iterator's walk, empty matches
 * included).
 */
static int regex_segment(const struct pretok_step *st, const char *subject,
			 size_t n, bool utf, pcre2_match_data *md,
			 struct words *out)
{
	struct cp_cursor cur = { .s = subject, .utf = utf };
	size_t pos = 0, last = 0;
	uint32_t extra = 0;

	while (pos <= n) {
		/* the subject is ours and valid: no UTF check per call */
		int rc = pcre2_match(st->code, (PCRE2_SPTR)subject, n, pos,
				     extra | (utf ? PCRE2_NO_UTF_CHECK : 0), md,
				     NULL);
		PCRE2_SIZE *ov;
		size_t c_last, c0, c1;

		if (rc == PCRE2_ERROR_NOMATCH) {
			if (!extra)
				break;
			/* an empty match could not be extended: step over a char */
			extra = 0;
			if (pos >= n)
				break;
			pos++;
			while (utf && pos < n &&
			       ((uint8_t)subject[pos] & 0xc0) == 0x80)
				pos++;
			continue;
		}
		if (rc < 0)
			return -EINVAL;
		ov = pcre2_get_ovector_pointer(md);
		c_last = cp_at(&cur, last);
		c0 = cp_at(&cur, ov[0]);
		c1 = cp_at(&cur, ov[1]);
		if (words_push(out, c0 - c_last) || words_push(out, c1 - c0))
			return -ENOMEM;
		last = ov[1];
		pos = ov[1];
		extra = ov[1] == ov[0] ?
				PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED :
				0;
	}
	if (last < n) {
		size_t c_last = cp_at(&cur, last);

		if (words_push(out, cp_at(&cur, n) - c_last))
			return -ENOMEM;
	}
	return 0;
}

/* What a regex step matches on: see the comment at the top. */
struct subject {
	char *s;
	size_t len, cap;
};

/*
 * The subject for code points [0, n): collapsed bytes, or UTF-8 with
 * non-ASCII white space as \v.
 */
static int regex_subject(const uint32_t *cps, const uint16_t *fl, size_t n,
			 bool collapsed, struct subject *sub)
{
	size_t k = 0;

	if (n * 4 + 1 > sub->cap) {
		char *s = realloc(sub->s, n * 4 + 1);

		if (!s)
			return -ENOMEM;
		sub->s = s;
		sub->cap = n * 4 + 1;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t c = cps[i];
		uint16_t cls = fl[i] & UNI_CLASS_MASK;

		if (collapsed) {
			char b;

			if (c < 128)
				b = (char)c;
			else if (fl[i] & UNI_SPACE)
				b = 0x0b;
			else if (cls == UNI_NUMBER)
				b = (char)0xd1;
			else if (cls == UNI_LETTER)
				b = (char)0xd2;
			else if (cls == UNI_PUNCT)
				b = (char)0xd3;
			else if (cls == UNI_MARK)
				b = (char)0xd4;
			else if (cls == UNI_SYMBOL)
				b = (char)0xd5;
			else
				b = (char)0xd0;
			sub->s[k++] = b;
			continue;
		}
		if (c > 0x7f && (fl[i] & UNI_SPACE))
			c = 0x0b;
		/* PCRE2 refuses surrogates; no pattern here matches one */
		if ((c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
			c = UNI_REPLACEMENT;
		k += uni_encode(c, sub->s + k);
	}
	sub->s[k] = '\0';
	sub->len = k;
	return 0;
}

static int step_regex(const struct pretok_step *st, const uint32_t *cps,
		      const uint16_t *fl, const struct words *in,
		      struct words *out)
{
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(st->code,
								    NULL);
	struct subject sub = { 0 };
	size_t start = 0;
	int rc = 0;

	if (!md)
		return -ENOMEM;
	for (size_t w = 0; w < in->n && !rc; w++) {
		rc = regex_subject(cps + start, fl + start, in->len[w],
				   st->collapsed, &sub);
		if (!rc)
			rc = regex_segment(st, sub.s, sub.len, !st->collapsed,
					   md, out);
		start += in->len[w];
	}
	free(sub.s);
	pcre2_match_data_free(md);
	return rc;
}

int pretok_split(const struct pretok *p, const uint32_t *cps, size_t n,
		 size_t **lens, size_t *n_lens, struct err *err)
{
	struct words cur = { 0 }, next;
	uint16_t *fl;
	int rc = 0;

	*lens = NULL;
	*n_lens = 0;
	if (!n)
		return 0;
	fl = malloc(n * sizeof(*fl));
	if (!fl || words_push(&cur, n)) {
		free(fl);
		return err_set(err, ENOMEM, "pre-tokenizer: out of memory");
	}
	for (size_t i = 0; i < n; i++)
		fl[i] = uni_flags(cps[i]);

	for (size_t i = 0; i < p->n_steps && !rc; i++) {
		const struct pretok_step *st = &p->steps[i];
		size_t start = 0;

		memset(&next, 0, sizeof(next));
		if (st->kind == STEP_REGEX) {
			rc = step_regex(st, cps, fl, &cur, &next);
		} else {
			for (size_t w = 0; w < cur.n && !rc; w++) {
				struct scan s = {
					.cps = cps,
					.fl = fl,
					.ini = start,
					.end = start + cur.len[w],
					.prev = start,
					.out = &next,
				};

				if (st->kind == STEP_GPT2)
					scan_gpt2(&s);
				else if (st->kind == STEP_LLAMA3)
					scan_llama3(&s, 3, UNI_LETTER);
				else if (st->kind == STEP_QWEN2)
					scan_llama3(&s, 1, UNI_LETTER);
				else
					scan_llama3(&s, 1,
						    UNI_LETTER | UNI_MARK);
				rc = s.rc;
				start += cur.len[w];
			}
		}
		free(cur.len);
		cur = next;
	}
	free(fl);
	if (rc) {
		free(cur.len);
		return err_set(err, -rc, "pre-tokenizer %s: %s", p->name,
			       rc == -ENOMEM ? "out of memory" :
					       "regex failed");
	}
	*lens = cur.len;
	*n_lens = cur.n;
	return 0;
}
