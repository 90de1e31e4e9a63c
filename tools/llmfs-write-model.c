/* SPDX-License-Identifier: MIT */
/*
 * llmfs-write-model: write a synthetic GGUF model with seeded random
 * weights and the tensor names, shapes and metadata llama.cpp's llama,
 * qwen2, qwen3 and qwen3moe loaders expect. For tests and benchmarks at
 * sizes the shared models do not reach:
 *
 *   $ build/bin/llmfs-write-model -o /tmp/big.gguf --arch qwen3 --embd 2048 \
 *         --layers 16 --heads 16 --kv-heads 4 --head-dim 128 --ff 6144 \
 *         --type q8_0 --vocab-from ../shared/vocab/ggml-vocab-gpt-2.gguf
 *   wrote /tmp/big.gguf: 179 tensors, 1038991616 bytes of weights ...
 *
 * Without --vocab-from the model carries a minimal byte-level SentencePiece
 * vocabulary (<unk>, <s>, </s>, 256 byte tokens, printable ASCII). Weights
 * are N(0, 0.02)-like (Irwin-Hall) from a xoshiro256** stream seeded per
 * tensor by --seed and the tensor's name; norm weights are F32 near 1. Q8_0
 * is ggml's reference quantizer (quantize_row_q8_0_ref). --type q4_k_m is
 * a Q4_K_M-style mix: Q4_K for most matrices, Q6_K for attn_v, ffn_down
 * and token_embd (the engine's quantize_row_*_ref, bit-exact with
 * ggml's, as llama-quantize writes without an importance matrix); its
 * widths must be multiples of 256. Tensors are
 * streamed to the file, so memory stays small whatever the model size.
 * --tied leaves out output.weight (llama.cpp then uses token_embd).
 * --chat-template FILE writes the file's text as tokenizer.chat_template
 * (instead of the vocabulary's).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/quant/quant.h"
#include "../io/io.h"

/*
 * The --type choices: the matrices' type, the type of the tensors a
 * Q4_K_M mix keeps at six bits (attn_v, ffn_down, token_embd, output),
 * and general.file_type (llama.cpp's llama_ftype).
 */
static const struct write_type {
	const char *name;
	uint32_t type, type6;
	uint32_t ftype;
} write_types[] = {
	{ "f32", IO_TYPE_F32, IO_TYPE_F32, 0 },
	{ "f16", IO_TYPE_F16, IO_TYPE_F16, 1 },
	{ "q8_0", IO_TYPE_Q8_0, IO_TYPE_Q8_0, 7 },
	{ "q4_k_m", IO_TYPE_Q4_K, IO_TYPE_Q6_K, 15 },
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct opts {
	const char *out, *arch, *vocab_from;
	const char *chat_template; /* a file: tokenizer.chat_template */
	int64_t embd, layers, heads, kv_heads, head_dim, ff, experts, used;
	int64_t ctx;
	uint64_t seed;
	const struct write_type *wt;
	bool tied;
};

enum arch { ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3, ARCH_QWEN3MOE };

/* ---- random numbers ---------------------------------------------------- */

struct rng {
	uint64_t s[4]; /* xoshiro256** state */
};

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct rng *r)
{
	uint64_t out = rotl(r->s[1] * 5, 7) * 9, t = r->s[1] << 17;

	r->s[2] ^= r->s[0];
	r->s[3] ^= r->s[1];
	r->s[1] ^= r->s[2];
	r->s[0] ^= r->s[3];
	r->s[2] ^= t;
	r->s[3] = rotl(r->s[3], 45);
	return out;
}

/* One stream per tensor: the same name and seed give the same weights. */
static void rng_seed(struct rng *r, uint64_t seed, const char *name)
{
	uint64_t x = seed;
	int i;

	while (*name)
		x = (x ^ (unsigned char)*name++) * 0x100000001b3ull;
	for (i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

/*
 * Approximately standard normal: the sum of four 16-bit uniforms of one
 * draw (Irwin-Hall, bounded at +-3.46), ten times cheaper than Box-Muller,
 * which matters at a billion weights.
 */
static float rng_normal(struct rng *r)
{
	uint64_t v = rng_next(r);
	uint32_t sum = (uint32_t)(v & 0xffff) + (uint32_t)((v >> 16) & 0xffff) +
		       (uint32_t)((v >> 32) & 0xffff) + (uint32_t)(v >> 48);

	/* mean 4 * 32767.5, variance 4 * (65536^2 - 1) / 12 */
	return ((float)sum - 131070.0f) * (1.7320508f / 65536.0f);
}

/* ---- encodings --------------------------------------------------------- */

/* ---- the model's tensors ----------------------------------------------- */

struct tensor {
	char name[64];
	uint32_t type;
	uint32_t n_dims;
	int64_t ne[4];
	bool norm; /* F32 near 1 */
};

struct plan {
	struct tensor *t;
	int n, cap;
};

static void plan_add(struct plan *p, uint32_t type, bool norm, int n_dims,
		     int64_t ne0, int64_t ne1, int64_t ne2, const char *fmt,
		     int blk)
{
	struct tensor *t;

	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 64;
		p->t = realloc(p->t, (size_t)p->cap * sizeof(*p->t));
		if (!p->t) {
			fprintf(stderr, "llmfs-write-model: out of memory\n");
			exit(1);
		}
	}
	t = &p->t[p->n++];
	snprintf(t->name, sizeof(t->name), fmt, blk);
	t->type = type;
	t->norm = norm;
	t->n_dims = (uint32_t)n_dims;
	t->ne[0] = ne0;
	t->ne[1] = ne1;
	t->ne[2] = ne2;
	t->ne[3] = 1;
}

/* Names and shapes as llama.cpp's src/models/{llama,qwen2,qwen3,qwen3moe}.cpp
 * create them (ne[0] is the input dimension of a matmul weight). */
static void plan_model(struct plan *p, const struct opts *o, enum arch a,
		       int64_t n_vocab)
{
	int64_t e = o->embd, q = o->heads * o->head_dim;
	int64_t kv = o->kv_heads * o->head_dim, f = o->ff, x = o->experts;
	uint32_t w = o->wt->type, w6 = o->wt->type6, f32 = IO_TYPE_F32;
	int i;

	plan_add(p, w6, false, 2, e, n_vocab, 1, "token_embd.weight", 0);
	for (i = 0; i < o->layers; i++) {
		plan_add(p, f32, true, 1, e, 1, 1, "blk.%d.attn_norm.weight",
			 i);
		plan_add(p, w, false, 2, e, q, 1, "blk.%d.attn_q.weight", i);
		plan_add(p, w, false, 2, e, kv, 1, "blk.%d.attn_k.weight", i);
		plan_add(p, w6, false, 2, e, kv, 1, "blk.%d.attn_v.weight", i);
		if (a == ARCH_QWEN2) {
			plan_add(p, f32, false, 1, q, 1, 1,
				 "blk.%d.attn_q.bias", i);
			plan_add(p, f32, false, 1, kv, 1, 1,
				 "blk.%d.attn_k.bias", i);
			plan_add(p, f32, false, 1, kv, 1, 1,
				 "blk.%d.attn_v.bias", i);
		}
		if (a == ARCH_QWEN3 || a == ARCH_QWEN3MOE) {
			plan_add(p, f32, true, 1, o->head_dim, 1, 1,
				 "blk.%d.attn_q_norm.weight", i);
			plan_add(p, f32, true, 1, o->head_dim, 1, 1,
				 "blk.%d.attn_k_norm.weight", i);
		}
		plan_add(p, w, false, 2, q, e, 1, "blk.%d.attn_output.weight",
			 i);
		plan_add(p, f32, true, 1, e, 1, 1, "blk.%d.ffn_norm.weight", i);
		if (a == ARCH_QWEN3MOE) {
			plan_add(p, f32, false, 2, e, x, 1,
				 "blk.%d.ffn_gate_inp.weight", i);
			plan_add(p, w, false, 3, e, f, x,
				 "blk.%d.ffn_gate_exps.weight", i);
			plan_add(p, w, false, 3, e, f, x,
				 "blk.%d.ffn_up_exps.weight", i);
			plan_add(p, w6, false, 3, f, e, x,
				 "blk.%d.ffn_down_exps.weight", i);
		} else {
			plan_add(p, w, false, 2, e, f, 1,
				 "blk.%d.ffn_gate.weight", i);
			plan_add(p, w, false, 2, e, f, 1,
				 "blk.%d.ffn_up.weight", i);
			plan_add(p, w6, false, 2, f, e, 1,
				 "blk.%d.ffn_down.weight", i);
		}
	}
	plan_add(p, f32, true, 1, e, 1, 1, "output_norm.weight", 0);
	if (!o->tied)
		plan_add(p, w6, false, 2, e, n_vocab, 1, "output.weight", 0);
}

/* Generate and stream one tensor, a few rows at a time. */
static int tensor_write(struct io_gguf_writer *w, const struct tensor *t,
			uint64_t seed, float *x, unsigned char *out,
			int64_t chunk, struct err *err)
{
	int64_t rows = t->ne[1] * t->ne[2] * t->ne[3], per, r, i, n;
	uint64_t bytes;
	struct rng rng;
	int ret;

	rng_seed(&rng, seed, t->name);
	per = chunk / t->ne[0] ? chunk / t->ne[0] : 1;
	for (r = 0; r < rows; r += per) {
		n = (rows - r < per ? rows - r : per) * t->ne[0];
		for (i = 0; i < n; i++)
			x[i] = t->norm ? 1.0f + 0.02f * rng_normal(&rng) :
					 0.02f * rng_normal(&rng);
		/* ggml's reference quantizers, as llama-quantize writes */
		quant_from_float_ref(t->type, x, out, n);
		io_type_row_bytes(t->type, n, &bytes);
		ret = io_gguf_writer_write(w, out, (size_t)bytes, err);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- metadata ---------------------------------------------------------- */

/* Every tokenizer.* key of another GGUF; *n_vocab from its token list. */
static int vocab_copy(struct io_gguf_writer *w, const char *path,
		      bool skip_template, int64_t *n_vocab, struct err *err)
{
	const struct io_gguf_array *tokens;
	struct io_gguf *g;
	uint64_t i;
	int ret;

	ret = io_gguf_open(&g, path, err);
	if (ret)
		return ret;
	tokens = io_gguf_get_array(g, "tokenizer.ggml.tokens", IO_GGUF_STRING);
	if (!tokens || !tokens->n) {
		io_gguf_close(g);
		return err_set(err, EINVAL, "%s: no tokenizer.ggml.tokens",
			       path);
	}
	*n_vocab = (int64_t)tokens->n;
	for (i = 0; !ret && i < g->n_kv; i++)
		if (!strncmp(g->kv[i].key, "tokenizer.", 10) &&
		    !(skip_template &&
		      !strcmp(g->kv[i].key, "tokenizer.chat_template")))
			ret = io_gguf_writer_add(w, g->kv[i].key,
						 &g->kv[i].value, err);
	io_gguf_close(g);
	return ret;
}

/*
 * The smallest SentencePiece vocabulary llama.cpp's "llama" tokenizer runs
 * with: specials, byte fallback for every byte, and printable ASCII as
 * single pieces (space as U+2581, as SentencePiece writes it).
 */
#define SPM_N (3 + 256 + 95)

static int vocab_minimal(struct io_gguf_writer *w, int64_t *n_vocab,
			 struct err *err)
{
	static char bytes[256][8], chars[95][4];
	const char *tok[SPM_N];
	float score[SPM_N];
	int32_t type[SPM_N];
	int i, n = 0, ret;

	tok[n] = "<unk>", score[n] = 0, type[n++] = 2; /* UNKNOWN */
	tok[n] = "<s>", score[n] = 0, type[n++] = 3;   /* CONTROL */
	tok[n] = "</s>", score[n] = 0, type[n++] = 3;
	for (i = 0; i < 256; i++) {
		snprintf(bytes[i], sizeof(bytes[i]), "<0x%02X>", i);
		tok[n] = bytes[i], score[n] = 0, type[n++] = 6; /* BYTE */
	}
	for (i = 0; i < 95; i++) {
		if (i == 0)
			strcpy(chars[i], "\xe2\x96\x81"); /* U+2581 */
		else
			chars[i][0] = (char)(0x20 + i), chars[i][1] = '\0';
		tok[n] = chars[i], score[n] = (float)-i, type[n++] = 1;
	}
	*n_vocab = n;
	ret = io_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", err);
	if (!ret)
		ret = io_gguf_writer_add_str(w, "tokenizer.ggml.pre", "default",
					     err);
	if (!ret)
		ret = io_gguf_writer_add_array(w, "tokenizer.ggml.tokens",
					       IO_GGUF_STRING, tok, n, err);
	if (!ret)
		ret = io_gguf_writer_add_array(w, "tokenizer.ggml.scores",
					       IO_GGUF_FLOAT32, score, n, err);
	if (!ret)
		ret = io_gguf_writer_add_array(w, "tokenizer.ggml.token_type",
					       IO_GGUF_INT32, type, n, err);
	if (!ret)
		ret = io_gguf_writer_add_u32(
			w, "tokenizer.ggml.unknown_token_id", 0, err);
	if (!ret)
		ret = io_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id",
					     1, err);
	if (!ret)
		ret = io_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id",
					     2, err);
	if (!ret)
		ret = io_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token",
					      true, err);
	if (!ret)
		ret = io_gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token",
					      false, err);
	return ret;
}

/* tokenizer.chat_template from a file */
static int chat_template_add(struct io_gguf_writer *w, const char *path,
			     struct err *err)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	size_t n = 0, cap = 0, k;
	int ret = 0;

	if (!f)
		return err_set(err, errno, "%s: %s", path, strerror(errno));
	do {
		if (n + 4096 + 1 > cap) {
			char *p = realloc(text, cap = 2 * cap + 4096 + 1);

			if (!p) {
				ret = err_set(err, ENOMEM, "out of memory");
				break;
			}
			text = p;
		}
		k = fread(text + n, 1, 4096, f);
		n += k;
	} while (k == 4096);
	if (!ret && ferror(f))
		ret = err_set(err, EIO, "%s: read error", path);
	fclose(f);
	if (!ret) {
		text[n] = '\0';
		ret = io_gguf_writer_add_str(w, "tokenizer.chat_template", text,
					     err);
	}
	free(text);
	return ret;
}

/* {arch}.* hyperparameters as llama.cpp's LLM_KV names spell them. */
static int hparams_add(struct io_gguf_writer *w, const struct opts *o,
		       enum arch a, int64_t n_vocab, struct err *err)
{
	static const struct {
		const char *key;
		int field;
	} u32s[] = {
		{ "context_length", 0 },       { "embedding_length", 1 },
		{ "block_count", 2 },	       { "feed_forward_length", 3 },
		{ "attention.head_count", 4 }, { "attention.head_count_kv", 5 },
		{ "attention.key_length", 6 }, { "attention.value_length", 6 },
		{ "rope.dimension_count", 6 }, { "vocab_size", 7 },
	};
	int64_t v[8] = { o->ctx,   o->embd,	o->layers,   o->ff,
			 o->heads, o->kv_heads, o->head_dim, n_vocab };
	char key[128], name[128];
	size_t i;
	int ret = 0;

	snprintf(name, sizeof(name), "random %s %" PRId64 "x%" PRId64 " %s",
		 o->arch, o->embd, o->layers, quant_type_name(o->wt->type));
	ret = io_gguf_writer_add_str(w, "general.architecture", o->arch, err);
	if (!ret)
		ret = io_gguf_writer_add_str(w, "general.name", name, err);
	if (!ret)
		ret = io_gguf_writer_add_u32(w, "general.file_type",
					     o->wt->ftype, err);
	for (i = 0; !ret && i < sizeof(u32s) / sizeof(u32s[0]); i++) {
		snprintf(key, sizeof(key), "%s.%s", o->arch, u32s[i].key);
		ret = io_gguf_writer_add_u32(w, key, (uint32_t)v[u32s[i].field],
					     err);
	}
	snprintf(key, sizeof(key), "%s.attention.layer_norm_rms_epsilon",
		 o->arch);
	if (!ret)
		ret = io_gguf_writer_add_f32(
			w, key, a == ARCH_LLAMA ? 1e-5f : 1e-6f, err);
	snprintf(key, sizeof(key), "%s.rope.freq_base", o->arch);
	if (!ret)
		ret = io_gguf_writer_add_f32(
			w, key, a == ARCH_LLAMA ? 10000.0f : 1000000.0f, err);
	if (a != ARCH_QWEN3MOE || ret)
		return ret;
	snprintf(key, sizeof(key), "%s.expert_feed_forward_length", o->arch);
	ret = io_gguf_writer_add_u32(w, key, (uint32_t)o->ff, err);
	snprintf(key, sizeof(key), "%s.expert_count", o->arch);
	if (!ret)
		ret = io_gguf_writer_add_u32(w, key, (uint32_t)o->experts, err);
	snprintf(key, sizeof(key), "%s.expert_used_count", o->arch);
	if (!ret)
		ret = io_gguf_writer_add_u32(w, key, (uint32_t)o->used, err);
	return ret;
}

/* ---- command line ------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr,
		"usage: llmfs-write-model -o OUT.gguf --arch llama|qwen2|qwen3|qwen3moe\n"
		"         --embd N --layers N --heads N --kv-heads N --head-dim N --ff N\n"
		"         [--experts N --experts-used K] --type f32|f16|q8_0|q4_k_m\n"
		"         [--vocab-from FILE.gguf] [--seed S] [--ctx N] [--tied]\n"
		"         [--chat-template FILE]\n");
	exit(2);
}

static int64_t num(const char *s, const char *what)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < 0 || v > (1ll << 40)) {
		fprintf(stderr, "llmfs-write-model: bad %s '%s'\n", what, s);
		exit(2);
	}
	return v;
}

static void die(const char *msg)
{
	fprintf(stderr, "llmfs-write-model: %s\n", msg);
	exit(2);
}

static enum arch opts_parse(struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "arch", 1, 0, 'a' },
		{ "embd", 1, 0, 'e' },
		{ "layers", 1, 0, 'l' },
		{ "heads", 1, 0, 'h' },
		{ "kv-heads", 1, 0, 'k' },
		{ "head-dim", 1, 0, 'd' },
		{ "ff", 1, 0, 'f' },
		{ "experts", 1, 0, 'x' },
		{ "experts-used", 1, 0, 'u' },
		{ "type", 1, 0, 't' },
		{ "vocab-from", 1, 0, 'v' },
		{ "seed", 1, 0, 's' },
		{ "ctx", 1, 0, 'c' },
		{ "tied", 0, 0, 'T' },
		{ "chat-template", 1, 0, 'C' },
		{ 0, 0, 0, 0 },
	};
	static const char *const archs[] = { "llama", "qwen2", "qwen3",
					     "qwen3moe" };
	const char *type = NULL;
	enum arch a = ARCH_LLAMA;
	uint32_t blk;
	int c, i;

	memset(o, 0, sizeof(*o));
	o->ctx = 4096;
	o->seed = 1;
	while ((c = getopt_long(argc, argv, "o:", lo, NULL)) != -1) {
		switch (c) {
		case 'o': o->out = optarg; break;
		case 'a': o->arch = optarg; break;
		case 'e': o->embd = num(optarg, "--embd"); break;
		case 'l': o->layers = num(optarg, "--layers"); break;
		case 'h': o->heads = num(optarg, "--heads"); break;
		case 'k': o->kv_heads = num(optarg, "--kv-heads"); break;
		case 'd': o->head_dim = num(optarg, "--head-dim"); break;
		case 'f': o->ff = num(optarg, "--ff"); break;
		case 'x': o->experts = num(optarg, "--experts"); break;
		case 'u': o->used = num(optarg, "--experts-used"); break;
		case 't': type = optarg; break;
		case 'v': o->vocab_from = optarg; break;
		case 's': o->seed = (uint64_t)num(optarg, "--seed"); break;
		case 'c': o->ctx = num(optarg, "--ctx"); break;
		case 'T': o->tied = true; break;
		case 'C': o->chat_template = optarg; break;
		default: usage();
		}
	}
	if (optind != argc || !o->out || !o->arch || !type)
		usage();
	for (i = 0; i < 4 && strcmp(o->arch, archs[i]); i++)
		;
	if (i == 4)
		die("--arch must be llama, qwen2, qwen3 or qwen3moe");
	a = (enum arch)i;
	for (i = 0; i < (int)ARRAY_LEN(write_types) &&
		    strcmp(type, write_types[i].name);
	     i++)
		;
	if (i == (int)ARRAY_LEN(write_types))
		die("--type must be f32, f16, q8_0 or q4_k_m");
	o->wt = &write_types[i];
	blk = quant_blck_size(o->wt->type6) > quant_blck_size(o->wt->type) ?
		      quant_blck_size(o->wt->type6) :
		      quant_blck_size(o->wt->type);
	if (!o->embd || !o->layers || !o->heads || !o->kv_heads ||
	    !o->head_dim || !o->ff || !o->ctx)
		die("--embd, --layers, --heads, --kv-heads, --head-dim, --ff "
		    "and --ctx must be > 0");
	if (o->heads % o->kv_heads)
		die("--heads must be a multiple of --kv-heads");
	if (a == ARCH_QWEN2 && o->heads * o->head_dim != o->embd)
		die("qwen2 needs --heads x --head-dim = --embd");
	if (a == ARCH_QWEN3MOE &&
	    (!o->experts || !o->used || o->used > o->experts))
		die("qwen3moe needs --experts N and 1 <= --experts-used <= N");
	if (a != ARCH_QWEN3MOE && (o->experts || o->used))
		die("--experts is for qwen3moe only");
	if (o->embd % blk || o->ff % blk || (o->heads * o->head_dim) % blk) {
		fprintf(stderr,
			"llmfs-write-model: %s needs --embd, --ff and --heads x --head-dim to be multiples of %u\n",
			o->wt->name, blk);
		exit(2);
	}
	return a;
}

int main(int argc, char **argv)
{
	struct io_gguf_writer *w = NULL;
	struct err err = { 0 };
	struct plan p = { 0 };
	struct timespec t0, t1;
	int64_t n_vocab = 0, chunk = 1 << 18;
	unsigned char *out;
	struct opts o;
	enum arch a;
	float *x;
	int i, ret;

	a = opts_parse(&o, argc, argv);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = io_gguf_writer_new(&w, 0, &err);
	if (!ret)
		ret = o.vocab_from ?
			      vocab_copy(w, o.vocab_from, !!o.chat_template,
					 &n_vocab, &err) :
			      vocab_minimal(w, &n_vocab, &err);
	if (!ret && o.chat_template)
		ret = chat_template_add(w, o.chat_template, &err);
	if (!ret)
		ret = hparams_add(w, &o, a, n_vocab, &err);
	if (ret)
		goto out;
	plan_model(&p, &o, a, n_vocab);
	for (i = 0; !ret && i < p.n; i++) {
		ret = io_gguf_writer_add_tensor(w, p.t[i].name, p.t[i].type,
						p.t[i].n_dims, p.t[i].ne, &err);
		if (p.t[i].ne[0] > chunk)
			chunk = p.t[i].ne[0];
	}
	if (!ret)
		ret = io_gguf_writer_begin(w, o.out, &err);
	if (ret)
		goto out;
	x = malloc((size_t)chunk * sizeof(*x));
	out = malloc((size_t)chunk * sizeof(*x));
	if (!x || !out)
		ret = err_set(&err, ENOMEM, "out of memory");
	for (i = 0; !ret && i < p.n; i++)
		ret = tensor_write(w, &p.t[i], o.seed, x, out, chunk, &err);
	free(x);
	free(out);
	if (!ret)
		ret = io_gguf_writer_finish(w, &err);
out:
	io_gguf_writer_free(w);
	if (ret) {
		fprintf(stderr, "llmfs-write-model: %s\n", err.msg);
		free(p.t);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	{
		struct io_gguf *g;

		/* read it back: what we wrote must be what io/ accepts */
		if (io_gguf_open(&g, o.out, &err)) {
			fprintf(stderr, "llmfs-write-model: %s\n", err.msg);
			free(p.t);
			return 1;
		}
		printf("wrote %s: %d tensors, %" PRIu64 " bytes of weights "
		       "(%.2f GiB file) in %.1f s\n",
		       o.out, p.n, g->tensor_bytes,
		       g->files[0].size / 1073741824.0,
		       (double)(t1.tv_sec - t0.tv_sec) +
			       (t1.tv_nsec - t0.tv_nsec) / 1e9);
		io_gguf_close(g);
	}
	free(p.t);
	return 0;
}
