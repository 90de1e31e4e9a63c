// SPDX-License-Identifier: MIT
/*
 * The vocabulary: loading tokenizer.ggml.* with llama.cpp's defaults and
 * fix-ups, and the hash tables text -> id and merge -> rank. Text to ids
 * (special tokens first, then SPM or BPE between them) is tokenize.c's
 * engine_vocab_tokenize.
 */
#include <ctype.h>
#include <stdatomic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "internal.h"

/* ---- hashing ----------------------------------------------------------- */

static uint64_t hash_bytes(uint64_t h, const char *s, size_t n)
{
	/* FNV-1a: short keys, no attacker; good enough and simple */
	for (size_t i = 0; i < n; i++) {
		h ^= (uint8_t)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#define HASH_SEED 0xcbf29ce484222325ull

static size_t table_size_for(size_t n)
{
	size_t cap = 16;

	while (cap < n * 2)
		cap *= 2;
	return cap;
}

int32_t engine_vocab_find(const struct engine_vocab *v, const char *text,
			  size_t len)
{
	size_t mask = v->tok_cap - 1;
	size_t i = hash_bytes(HASH_SEED, text, len) & mask;

	for (;; i = (i + 1) & mask) {
		uint32_t slot = v->tok_table[i];
		const struct vocab_token *t;

		if (!slot)
			return -1;
		t = &v->tokens[slot - 1];
		if (t->len == len && !memcmp(v->arena + t->off, text, len))
			return (int32_t)(slot - 1);
	}
}

/* Later duplicates replace earlier ones, as llama.cpp's map assignment. */
static void token_index(struct engine_vocab *v, uint32_t id)
{
	const struct vocab_token *t = &v->tokens[id];
	size_t mask = v->tok_cap - 1;
	size_t i = hash_bytes(HASH_SEED, v->arena + t->off, t->len) & mask;

	for (;; i = (i + 1) & mask) {
		uint32_t slot = v->tok_table[i];
		const struct vocab_token *o;

		if (!slot) {
			v->tok_table[i] = id + 1;
			return;
		}
		o = &v->tokens[slot - 1];
		if (o->len == t->len &&
		    !memcmp(v->arena + o->off, v->arena + t->off, t->len)) {
			v->tok_table[i] = id + 1;
			return;
		}
	}
}

static uint64_t merge_hash(const char *l, size_t ll, const char *r, size_t rl)
{
	uint64_t h = hash_bytes(HASH_SEED, l, ll);

	h = hash_bytes(h ^ 0xff, "\xff", 1);
	return hash_bytes(h, r, rl);
}

int32_t vocab_merge_rank(const struct engine_vocab *v, const char *left,
			 size_t left_len, const char *right, size_t right_len)
{
	size_t mask = v->merge_cap - 1, i;

	if (!v->merge_cap)
		return -1;
	i = merge_hash(left, left_len, right, right_len) & mask;
	for (;; i = (i + 1) & mask) {
		uint32_t slot = v->merge_table[i];
		const struct vocab_merge *m;

		if (!slot)
			return -1;
		m = &v->merges[slot - 1];
		if (m->left_len == left_len && m->right_len == right_len &&
		    !memcmp(v->merge_arena + m->off, left, left_len) &&
		    !memcmp(v->merge_arena + m->off + left_len, right,
			    right_len))
			return (int32_t)(slot - 1);
	}
}

/* The first rank of a pair wins, as llama.cpp's emplace keeps it. */
static void merge_index(struct engine_vocab *v, uint32_t rank)
{
	const struct vocab_merge *m = &v->merges[rank];
	const char *l = v->merge_arena + m->off, *r = l + m->left_len;

	if (vocab_merge_rank(v, l, m->left_len, r, m->right_len) >= 0)
		return;
	size_t mask = v->merge_cap - 1;
	size_t i = merge_hash(l, m->left_len, r, m->right_len) & mask;

	while (v->merge_table[i])
		i = (i + 1) & mask;
	v->merge_table[i] = rank + 1;
}

/* ---- loading ----------------------------------------------------------- */

void engine_vocab_free(struct engine_vocab *v)
{
	if (!v)
		return;
	if (v->cache_free)
		v->cache_free(atomic_load(&v->cache));
	pretok_free(v->pretok);
	free(v->tokens);
	free(v->arena);
	free(v->tok_table);
	free(v->merges);
	free(v->merge_arena);
	free(v->merge_table);
	free(v->special);
	free(v->eog);
	free(v->model_name);
	free(v->pre_name);
	free(v);
}

static int load_tokens(struct engine_vocab *v, const struct io_gguf *g,
		       struct err *err)
{
	const struct io_gguf_array *toks, *types, *scores;
	const struct io_gguf_string *s;
	size_t arena = 0, k = 0;
	char empty[32];

	toks = io_gguf_get_array(g, "tokenizer.ggml.tokens", IO_GGUF_STRING);
	if (!toks || toks->n == 0 || toks->n > INT32_MAX)
		return err_set(
			err, EINVAL,
			"tokenizer.ggml.tokens missing or not a string array");
	v->n_tokens = (uint32_t)toks->n;
	s = toks->data;
	for (size_t i = 0; i < toks->n; i++)
		arena += s[i].len ? s[i].len : sizeof(empty);
	if (arena > UINT32_MAX)
		return err_set(err, EINVAL, "tokenizer.ggml.tokens too large");

	scores = io_gguf_get_array(g, "tokenizer.ggml.scores", IO_GGUF_FLOAT32);
	if (!scores)
		scores = io_gguf_get_array(g, "tokenizer.ggml.scores",
					   IO_GGUF_INT32);
	if (!scores && io_gguf_find(g, "tokenizer.ggml.scores"))
		return err_set(err, EINVAL,
			       "tokenizer.ggml.scores has a bad type");
	if (scores && scores->n < toks->n)
		return err_set(err, EINVAL, "tokenizer.ggml.scores: %llu < %u",
			       (unsigned long long)scores->n, v->n_tokens);
	types = io_gguf_get_array(g, "tokenizer.ggml.token_type",
				  IO_GGUF_INT32);
	if (!types && io_gguf_find(g, "tokenizer.ggml.token_type"))
		return err_set(err, EINVAL,
			       "tokenizer.ggml.token_type has a bad type");
	if (types && types->n < toks->n)
		return err_set(err, EINVAL,
			       "tokenizer.ggml.token_type: %llu < %u",
			       (unsigned long long)types->n, v->n_tokens);

	v->tokens = calloc(toks->n, sizeof(*v->tokens));
	v->arena = malloc(arena ? arena : 1);
	v->tok_cap = table_size_for(toks->n);
	v->tok_table = calloc(v->tok_cap, sizeof(*v->tok_table));
	if (!v->tokens || !v->arena || !v->tok_table)
		return err_set(err, ENOMEM, "vocabulary: out of memory");

	for (uint32_t i = 0; i < v->n_tokens; i++) {
		struct vocab_token *t = &v->tokens[i];
		const char *text = s[i].data;
		size_t len = s[i].len;
		int32_t type = 1;

		if (!len) { /* llama.cpp names empty tokens so they stay distinct */
			len = (size_t)snprintf(empty, sizeof(empty),
					       "[EMPTY_%u]", i);
			text = empty;
		}
		memcpy(v->arena + k, text, len);
		t->off = (uint32_t)k;
		t->len = (uint32_t)len;
		k += len;
		if (scores && scores->type == IO_GGUF_FLOAT32) {
			memcpy(&t->score, (const char *)scores->data + 4 * i,
			       4);
		} else if (scores) {
			int32_t si;

			memcpy(&si, (const char *)scores->data + 4 * i, 4);
			t->score = (float)si;
		}
		if (types)
			memcpy(&type, (const char *)types->data + 4 * i, 4);
		switch (type) {
		case 1: t->attr = ENGINE_TOKEN_NORMAL; break;
		case 2: t->attr = ENGINE_TOKEN_UNKNOWN; break;
		case 3: t->attr = ENGINE_TOKEN_CONTROL; break;
		case 4: t->attr = ENGINE_TOKEN_USER_DEFINED; break;
		case 5: t->attr = ENGINE_TOKEN_UNUSED; break;
		case 6: t->attr = ENGINE_TOKEN_BYTE; break;
		default: t->attr = 0; break; /* undefined */
		}
		token_index(v, i);
	}
	return 0;
}

static int load_merges(struct engine_vocab *v, const struct io_gguf *g,
		       struct err *err)
{
	const struct io_gguf_array *a;
	const struct io_gguf_string *s;
	size_t arena = 0, k = 0;

	a = io_gguf_get_array(g, "tokenizer.ggml.merges", IO_GGUF_STRING);
	if (!a)
		return err_set(
			err, EINVAL,
			"tokenizer.ggml.merges missing or not a string array");
	if (a->n > INT32_MAX)
		return err_set(err, EINVAL, "tokenizer.ggml.merges too large");
	s = a->data;
	for (size_t i = 0; i < a->n; i++)
		arena += s[i].len;
	if (arena > UINT32_MAX)
		return err_set(err, EINVAL, "tokenizer.ggml.merges too large");
	v->n_merges = (uint32_t)a->n;
	v->merges = calloc(a->n ? a->n : 1, sizeof(*v->merges));
	v->merge_arena = malloc(arena ? arena : 1);
	v->merge_cap = table_size_for(a->n);
	v->merge_table = calloc(v->merge_cap, sizeof(*v->merge_table));
	if (!v->merges || !v->merge_arena || !v->merge_table)
		return err_set(err, ENOMEM, "vocabulary: out of memory");
	for (uint32_t i = 0; i < v->n_merges; i++) {
		struct vocab_merge *m = &v->merges[i];
		const char *sp = s[i].len > 1 ? memchr(s[i].data + 1, ' ',
						       s[i].len - 1) :
						NULL;

		m->off = (uint32_t)k;
		if (sp) { /* "a b": the first space after the first byte */
			size_t l = (size_t)(sp - s[i].data);

			memcpy(v->merge_arena + k, s[i].data, l);
			memcpy(v->merge_arena + k + l, sp + 1,
			       s[i].len - l - 1);
			m->left_len = (uint32_t)l;
			m->right_len = (uint32_t)(s[i].len - l - 1);
			k += s[i].len - 1;
		}
		/* no space: llama.cpp records the pair ("", "") */
		merge_index(v, i);
	}
	return 0;
}

/* A special id from the file, if it is in range (llama.cpp keeps the
 * default otherwise). */
static void load_id(const struct engine_vocab *v, const struct io_gguf *g,
		    const char *key, int32_t *id)
{
	uint32_t u;

	if (*id >= 0 && (uint32_t)*id >= v->n_tokens)
		*id = -1;
	if (io_gguf_get_u32(g, key, &u) == 0 && u < v->n_tokens)
		*id = (int32_t)u;
}

#define LIST(...) ((const char *const[]){ __VA_ARGS__, NULL })

static const char *const eot_texts[] = {
	"<|eot_id|>",
	"<|im_end|>",
	"<|end|>",
	"<end_of_turn>",
	"<|endoftext|>",
	"<|end_of_text|>",
	"<EOT>",
	"_<EOT>",
	"[EOT]",
	"<\xef\xbd\x9c"
	"end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
	"<end_of_utterance>",
	NULL,
};

static const char *const eog_texts[] = {
	"<|eot_id|>",
	"<|im_end|>",
	"<|end|>",
	"<|return|>",
	"<|call|>",
	"<|flush|>",
	"<|calls|>",
	"<end_of_turn>",
	"<|endoftext|>",
	"</s>",
	"<|eom_id|>",
	"<EOT>",
	"_<EOT>",
	"[EOT]",
	"[EOS]",
	"<|end_of_text|>",
	"<end_of_utterance>",
	"<eos>",
	"<turn|>",
	"<|tool_response>",
	"<\xef\xbd\x9c"
	"end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
	"[e~[",
	NULL,
};

/* The id of a token text as llama.cpp's map gives it (the last one). */
static int32_t find_str(const struct engine_vocab *v, const char *s)
{
	return engine_vocab_find(v, s, strlen(s));
}

/*
 * llama.cpp finds EOT, EOM and the FIM tokens by their text when the file
 * does not name them, takes the first match in its map's order (pos[id],
 * see vocab_order.c) and makes it a control token.
 */
static void detect_by_text(struct engine_vocab *v, const int32_t *pos,
			   int32_t *id, const char *const *texts)
{
	int32_t best = -1;

	if (*id >= 0)
		return;
	for (; *texts; texts++) {
		int32_t t = find_str(v, *texts);

		if (t >= 0 && (best < 0 || pos[t] < pos[best]))
			best = t;
	}
	if (best >= 0) {
		*id = best;
		v->tokens[best].attr |= ENGINE_TOKEN_CONTROL;
	}
}

static int eog_add(struct engine_vocab *v, int32_t id)
{
	if (id < 0)
		return 0;
	for (size_t i = 0; i < v->n_eog; i++)
		if (v->eog[i] == id)
			return 0;
	int32_t *e = realloc(v->eog, (v->n_eog + 1) * sizeof(*e));

	if (!e)
		return -ENOMEM;
	v->eog = e;
	v->eog[v->n_eog++] = id;
	return 0;
}

/* The special ids of the metadata the vocabulary does not keep itself. */
struct vocab_specials {
	int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
	int32_t eom, sep, mask;
};

/* The ids and flags the metadata gives (llama.cpp's keys). */
static void load_special_ids(struct engine_vocab *v, const struct io_gguf *g,
			     struct vocab_specials *sp)
{
	bool b;

	load_id(v, g, "tokenizer.ggml.bos_token_id", &v->bos);
	load_id(v, g, "tokenizer.ggml.eos_token_id", &v->eos);
	load_id(v, g, "tokenizer.ggml.eot_token_id", &v->eot);
	load_id(v, g, "tokenizer.ggml.eom_token_id", &sp->eom);
	load_id(v, g, "tokenizer.ggml.unknown_token_id", &v->unk);
	load_id(v, g, "tokenizer.ggml.seperator_token_id", &sp->sep);
	load_id(v, g, "tokenizer.ggml.padding_token_id", &v->pad);
	load_id(v, g, "tokenizer.ggml.mask_token_id", &sp->mask);
	load_id(v, g, "tokenizer.ggml.fim_pre_token_id", &sp->fim_pre);
	load_id(v, g, "tokenizer.ggml.fim_suf_token_id", &sp->fim_suf);
	load_id(v, g, "tokenizer.ggml.fim_mid_token_id", &sp->fim_mid);
	load_id(v, g, "tokenizer.ggml.fim_pad_token_id", &sp->fim_pad);
	load_id(v, g, "tokenizer.ggml.fim_rep_token_id", &sp->fim_rep);
	load_id(v, g, "tokenizer.ggml.fim_sep_token_id", &sp->fim_sep);
	load_id(v, g, "tokenizer.ggml.prefix_token_id", &sp->fim_pre);
	load_id(v, g, "tokenizer.ggml.suffix_token_id", &sp->fim_suf);
	load_id(v, g, "tokenizer.ggml.middle_token_id", &sp->fim_mid);
	if (io_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b) == 0)
		v->add_bos = b;
	if (io_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b) == 0)
		v->add_eos = b;
}

/*
 * The ids the metadata left unset, found by their text in the order
 * llama.cpp's map iterates the tokens (vocab_map_order): EOT, EOM and
 * the fill-in-the-middle tokens.
 */
static int detect_specials(struct engine_vocab *v, struct vocab_specials *sp,
			   struct err *err)
{
	int32_t *order, *pos;
	int rc;

	rc = vocab_map_order(v, &order);
	if (rc == -ENOMEM)
		return err_set(err, ENOMEM, "vocabulary: out of memory");
	pos = malloc(v->n_tokens * sizeof(*pos));
	if (!pos) {
		free(order);
		return err_set(err, ENOMEM, "vocabulary: out of memory");
	}
	if (rc < 0) { /* too large to replay: highest id first */
		for (uint32_t i = 0; i < v->n_tokens; i++)
			pos[i] = (int32_t)(v->n_tokens - 1 - i);
	} else {
		for (int i = 0; i < rc; i++)
			pos[order[i]] = i;
		free(order);
	}
	detect_by_text(v, pos, &v->eot, eot_texts);
	detect_by_text(v, pos, &sp->eom, LIST("<|eom_id|>"));
	detect_by_text(v, pos, &sp->fim_pre,
		       LIST("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
			    "<\xef\xbd\x9c"
			    "fim\xe2\x96\x81"
			    "begin\xef\xbd\x9c>",
			    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>",
			    "<|prefix|>"));
	detect_by_text(v, pos, &sp->fim_suf,
		       LIST("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
			    "<\xef\xbd\x9c"
			    "fim\xe2\x96\x81hole\xef\xbd\x9c>",
			    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>",
			    "<|suffix|>"));
	detect_by_text(v, pos, &sp->fim_mid,
		       LIST("<|fim_middle|>", "<fim-middle>", "<fim_middle>",
			    "<\xef\xbd\x9c"
			    "fim\xe2\x96\x81"
			    "end\xef\xbd\x9c>",
			    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>",
			    "<|middle|>"));
	detect_by_text(v, pos, &sp->fim_pad,
		       LIST("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
			    "[PAD]"));
	detect_by_text(v, pos, &sp->fim_rep,
		       LIST("<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
			    "<REPO>", "<reponame>"));
	detect_by_text(v, pos, &sp->fim_sep, LIST("<|file_sep|>"));
	free(pos);
	return 0;
}

/*
 * The end-of-generation set (llama.cpp's special_eog_ids) and the
 * attributes it changes: "unused" control tokens, gpt-oss's tokens that
 * always render.
 */
static int collect_eog(struct engine_vocab *v, const struct vocab_specials *sp,
		       struct err *err)
{
	int rc = 0;

	/* control tokens named "unused" are unused */
	for (uint32_t i = 0; i < v->n_tokens; i++) {
		struct vocab_token *t = &v->tokens[i];

		if ((t->attr & ENGINE_TOKEN_CONTROL) &&
		    memmem(v->arena + t->off, t->len, "unused", 6))
			t->attr |= ENGINE_TOKEN_UNUSED;
	}

	rc |= eog_add(v, sp->fim_pad);
	rc |= eog_add(v, sp->fim_rep);
	rc |= eog_add(v, sp->fim_sep);
	for (const char *const *t = eog_texts; *t; t++) {
		int32_t id = find_str(v, *t);

		if (id >= 0) {
			rc |= eog_add(v, id);
			v->tokens[id].attr |= ENGINE_TOKEN_CONTROL;
		}
	}
	/* gpt-oss: these always render */
	for (const char *const *t = LIST("<|channel|>", "<|message|>",
					 "<|start|>", "<|constrain|>");
	     *t; t++) {
		int32_t id = find_str(v, *t);

		if (id >= 0)
			v->tokens[id].attr = ENGINE_TOKEN_USER_DEFINED;
	}
	rc |= eog_add(v, v->eos);
	rc |= eog_add(v, v->eot);
	rc |= eog_add(v, sp->eom);
	if (rc)
		return err_set(err, ENOMEM, "vocabulary: out of memory");
	return 0;
}

static int load_specials(struct engine_vocab *v, const struct io_gguf *g,
			 struct err *err)
{
	struct vocab_specials sp = { -1, -1, -1, -1, -1, -1, -1, -1, -1 };
	int rc;

	load_special_ids(v, g, &sp);
	if ((rc = detect_specials(v, &sp, err)))
		return rc;
	return collect_eog(v, &sp, err);
}

static int special_cmp_len(const void *a, const void *b, void *arg)
{
	const struct engine_vocab *v = arg;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	uint32_t lx = v->tokens[x].len, ly = v->tokens[y].len;

	if (lx != ly)
		return lx > ly ? -1 : 1;
	return x < y ? -1 : x > y;
}

static int build_special_cache(struct engine_vocab *v, const struct io_gguf *g,
			       struct err *err)
{
	const char *name = io_gguf_get_str(g, "general.name");
	char lower[256];
	size_t n = 0;

	v->special = malloc(v->n_tokens * sizeof(*v->special));
	if (!v->special)
		return err_set(err, ENOMEM, "vocabulary: out of memory");
	for (uint32_t i = 0; i < v->n_tokens; i++)
		if (v->tokens[i].attr &
		    (ENGINE_TOKEN_CONTROL | ENGINE_TOKEN_USER_DEFINED |
		     ENGINE_TOKEN_UNKNOWN))
			v->special[n++] = (int32_t)i;
	v->n_special = n;
	/* longest first; equal lengths by id (llama.cpp's sort is unstable) */
	qsort_r(v->special, n, sizeof(*v->special), special_cmp_len, v);

	/* Phi-3: special tokens eat the white space after them */
	snprintf(lower, sizeof(lower), "%s", name ? name : "");
	for (char *p = lower; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (strstr(lower, "phi-3") || strstr(lower, "phi3")) {
		int32_t id;

		for (size_t i = 0; i < n; i++)
			v->tokens[v->special[i]].attr |= ENGINE_TOKEN_RSTRIP;
		if ((id = engine_vocab_find(v, "</s>", 4)) >= 0)
			v->tokens[id].attr |= ENGINE_TOKEN_RSTRIP;
		for (const char *const *t =
			     LIST("<unk>", "<s>", "<|endoftext|>");
		     *t; t++)
			if ((id = engine_vocab_find(v, *t, strlen(*t))) >= 0)
				v->tokens[id].attr &= ~(
					uint32_t)ENGINE_TOKEN_RSTRIP;
	}
	return 0;
}

int engine_vocab_load(struct engine_vocab **out, const struct io_gguf *g,
		      struct err *err)
{
	struct engine_vocab *v;
	const char *model, *pre;
	bool b;
	int rc;

	*out = NULL;
	model = io_gguf_get_str(g, "tokenizer.ggml.model");
	if (!model)
		return err_set(err, EINVAL, "tokenizer.ggml.model missing");
	v = calloc(1, sizeof(*v));
	if (!v)
		return err_set(err, ENOMEM, "vocabulary: out of memory");
	v->bos = v->eos = v->eot = v->unk = v->pad = -1;
	if (!strcmp(model, "llama")) {
		v->type = ENGINE_VOCAB_SPM;
		v->bos = 1;
		v->eos = 2;
		v->unk = 0;
		v->add_space_prefix = true;
		v->add_bos = true;
		pre = "default";
	} else if (!strcmp(model, "gpt2")) {
		v->type = ENGINE_VOCAB_BPE;
		v->bos = 11;
		v->eos = 11;
		pre = io_gguf_get_str(g, "tokenizer.ggml.pre");
		if (!pre)
			pre = "default";
		rc = pretok_new(&v->pretok, pre, err);
		if (rc)
			goto fail;
		v->clean_spaces = pretok_clean_spaces(v->pretok);
		v->ignore_merges = pretok_ignore_merges(v->pretok);
		v->add_bos = pretok_forces_bos(v->pretok);
		if (pretok_no_bos(v->pretok))
			v->bos = -1;
	} else {
		rc = err_set(
			err, ENOTSUP,
			"unsupported tokenizer model '%s' (supported: llama "
			"(SentencePiece), gpt2 (byte-level BPE))",
			model);
		goto fail;
	}
	v->model_name = strdup(model);
	v->pre_name = strdup(pre);
	if (!v->model_name || !v->pre_name) {
		rc = err_set(err, ENOMEM, "vocabulary: out of memory");
		goto fail;
	}
	if (io_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b) == 0)
		v->add_space_prefix = b;

	rc = load_tokens(v, g, err);
	if (!rc && v->type == ENGINE_VOCAB_BPE)
		rc = load_merges(v, g, err);
	if (!rc)
		rc = load_specials(v, g, err);
	if (!rc)
		rc = build_special_cache(v, g, err);
	if (rc)
		goto fail;
	*out = v;
	return 0;
fail:
	engine_vocab_free(v);
	return rc;
}

/* ---- accessors --------------------------------------------------------- */

void *engine_vocab_cache_get(const struct engine_vocab *v)
{
	return atomic_load(&((struct engine_vocab *)v)->cache);
}

void *engine_vocab_cache_set(const struct engine_vocab *v, void *p,
			     void (*free_fn)(void *))
{
	struct engine_vocab *w = (struct engine_vocab *)v;
	void *none = NULL;

	/* the first one wins; a later one is the caller's to free */
	if (!atomic_compare_exchange_strong(&w->cache, &none, p))
		return none;
	w->cache_free = free_fn;
	return p;
}

enum engine_vocab_type engine_vocab_type(const struct engine_vocab *v)
{
	return v->type;
}

uint32_t engine_vocab_size(const struct engine_vocab *v)
{
	return v->n_tokens;
}

const char *engine_vocab_model_name(const struct engine_vocab *v)
{
	return v->model_name;
}

const char *engine_vocab_pre_name(const struct engine_vocab *v)
{
	return v->pre_name;
}

int32_t engine_vocab_bos(const struct engine_vocab *v)
{
	return v->bos;
}

int32_t engine_vocab_eos(const struct engine_vocab *v)
{
	return v->eos;
}

int32_t engine_vocab_eot(const struct engine_vocab *v)
{
	return v->eot;
}

bool engine_vocab_add_bos(const struct engine_vocab *v)
{
	return v->add_bos;
}

bool engine_vocab_add_eos(const struct engine_vocab *v)
{
	return v->add_eos;
}

const char *engine_vocab_text(const struct engine_vocab *v, int32_t id,
			      size_t *len)
{
	if (id < 0 || (uint32_t)id >= v->n_tokens)
		return NULL;
	if (len)
		*len = v->tokens[id].len;
	return v->arena + v->tokens[id].off;
}

uint32_t engine_vocab_attr(const struct engine_vocab *v, int32_t id)
{
	if (id < 0 || (uint32_t)id >= v->n_tokens)
		return 0;
	return v->tokens[id].attr;
}

bool engine_vocab_is_eog(const struct engine_vocab *v, int32_t id)
{
	for (size_t i = 0; i < v->n_eog; i++)
		if (v->eog[i] == id)
			return true;
	return false;
}

bool engine_vocab_is_control(const struct engine_vocab *v, int32_t id)
{
	return engine_vocab_attr(v, id) & ENGINE_TOKEN_CONTROL;
}

float vocab_score(const struct engine_vocab *v, int32_t id)
{
	return v->tokens[id].score;
}

const struct pretok *vocab_pretok(const struct engine_vocab *v)
{
	return v->pretok;
}

int32_t vocab_byte_token(const struct engine_vocab *v, uint8_t byte)
{
	static const char hex[] = "0123456789ABCDEF";
	char buf[8];
	int32_t id;

	if (v->type == ENGINE_VOCAB_SPM) {
		buf[0] = '<';
		buf[1] = '0';
		buf[2] = 'x';
		buf[3] = hex[byte >> 4];
		buf[4] = hex[byte & 15];
		buf[5] = '>';
		id = engine_vocab_find(v, buf, 6);
		if (id >= 0)
			return id;
		buf[0] = (char)byte;
		id = engine_vocab_find(v, buf, 1);
	} else {
		id = engine_vocab_find(v, buf,
				       uni_encode(uni_gpt2_byte_cp(byte), buf));
	}
	/* llama.cpp throws here; an unknown token is the kinder answer */
	return id >= 0 ? id : v->unk;
}
