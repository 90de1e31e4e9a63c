/* SPDX-License-Identifier: MIT */
/*
 * The placement planner on machines we do not have: real model shapes
 * (Llama-3-8B, Gemma-2-27B, Qwen3-30B-A3B) at Q4_K_M, their tensor bytes
 * computed here from shape x type size with llama.cpp's Q4_K_M recipe,
 * against simulated 8 GB and 24 GB cards, a desktop host and a two-node
 * server. Each case checks the choice, the reasons and the estimates
 * against the bandwidth model written out in Documentation/placement.md.
 *
 *   $ build/tests/engine/test_planner    (CK_VERBOSE prints each plan)
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/engine.h"
#include "../common/check_main.h"

#define GIB (1ull << 30)

/* ggml's block layouts (ggml-common.h): elements and bytes per block. */
struct qtype {
	uint32_t type, elems, bytes;
};
static const struct qtype F32 = { IO_TYPE_F32, 1, 4 };
static const struct qtype Q4_K = { IO_TYPE_Q4_K, 256, 144 };
static const struct qtype Q6_K = { IO_TYPE_Q6_K, 256, 210 };

#define MAX_TENSORS 1024

struct shape_model {
	struct engine_plan_input in;
	struct io_gguf_tensor t[MAX_TENSORS];
	char names[MAX_TENSORS][48];
	uint64_t n, bytes;
};

static void add(struct shape_model *m, const char *name, struct qtype q,
		int64_t ne0, int64_t ne1, int64_t ne2)
{
	struct io_gguf_tensor *t = &m->t[m->n];

	ck_assert_uint_lt(m->n, MAX_TENSORS);
	ck_assert_int_eq(ne0 % q.elems, 0);
	snprintf(m->names[m->n], sizeof(m->names[0]), "%s", name);
	t->name = m->names[m->n];
	t->type = q.type;
	t->n_dims = ne2 > 1 ? 3 : ne1 > 1 ? 2 : 1;
	t->ne[0] = ne0;
	t->ne[1] = ne1;
	t->ne[2] = ne2;
	t->ne[3] = 1;
	t->bytes = (uint64_t)(ne0 / q.elems) * q.bytes * ne1 * ne2;
	m->bytes += t->bytes;
	m->n++;
}

static void addl(struct shape_model *m, uint32_t l, const char *what,
		 struct qtype q, int64_t ne0, int64_t ne1, int64_t ne2)
{
	char name[48];

	snprintf(name, sizeof(name), "blk.%u.%s", l, what);
	add(m, name, q, ne0, ne1, ne2);
}

/* llama.cpp's use_more_bits(): Q4_K_M gives these layers Q6_K. */
static struct qtype q4km_more(uint32_t i, uint32_t n)
{
	return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2 ? Q6_K :
								     Q4_K;
}

struct shape {
	uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
	uint32_t n_expert, n_expert_used;
	bool tied, post_norms, qk_norm;
};

/* A model of that shape at Q4_K_M, as llama-quantize lays it out. */
static void shape_make(struct shape_model *m, const struct shape *s)
{
	int64_t e = s->n_embd, q = (int64_t)s->n_head * s->head_dim,
		kv = (int64_t)s->n_head_kv * s->head_dim, ff = s->n_ff;
	uint32_t l;

	memset(m, 0, sizeof(*m));
	add(m, "token_embd.weight", s->tied ? Q6_K : Q4_K, e, s->n_vocab, 1);
	for (l = 0; l < s->n_layer; l++) {
		struct qtype more = q4km_more(l, s->n_layer);

		addl(m, l, "attn_norm.weight", F32, e, 1, 1);
		addl(m, l, "attn_q.weight", Q4_K, e, q, 1);
		addl(m, l, "attn_k.weight", Q4_K, e, kv, 1);
		addl(m, l, "attn_v.weight", more, e, kv, 1);
		addl(m, l, "attn_output.weight", Q4_K, q, e, 1);
		addl(m, l, "ffn_norm.weight", F32, e, 1, 1);
		if (s->post_norms) {
			addl(m, l, "post_attention_norm.weight", F32, e, 1, 1);
			addl(m, l, "post_ffw_norm.weight", F32, e, 1, 1);
		}
		if (s->qk_norm) {
			addl(m, l, "attn_q_norm.weight", F32, s->head_dim, 1,
			     1);
			addl(m, l, "attn_k_norm.weight", F32, s->head_dim, 1,
			     1);
		}
		if (s->n_expert) {
			addl(m, l, "ffn_gate_inp.weight", F32, e, s->n_expert,
			     1);
			addl(m, l, "ffn_gate_exps.weight", Q4_K, e, ff,
			     s->n_expert);
			addl(m, l, "ffn_up_exps.weight", Q4_K, e, ff,
			     s->n_expert);
			addl(m, l, "ffn_down_exps.weight", more, ff, e,
			     s->n_expert);
		} else {
			addl(m, l, "ffn_gate.weight", Q4_K, e, ff, 1);
			addl(m, l, "ffn_up.weight", Q4_K, e, ff, 1);
			addl(m, l, "ffn_down.weight", more, ff, e, 1);
		}
	}
	add(m, "output_norm.weight", F32, e, 1, 1);
	if (!s->tied)
		add(m, "output.weight", Q6_K, e, s->n_vocab, 1);
	m->in.n_layer = s->n_layer;
	m->in.n_embd = s->n_embd;
	m->in.n_ff = s->n_ff;
	m->in.n_vocab = s->n_vocab;
	m->in.n_expert = s->n_expert;
	m->in.n_expert_used = s->n_expert_used;
	/* F16 K and V: layers x kv heads x head dim x 2 x 2 bytes. */
	m->in.kv_bytes_per_token = (uint64_t)s->n_layer * kv * 2 * 2;
	m->in.n_ctx = 4096;
	engine_plan_input_add_tensors(&m->in, m->t, m->n);
}

/* meta-llama/Meta-Llama-3-8B: config.json */
static const struct shape llama3_8b = {
	.n_layer = 32,
	.n_embd = 4096,
	.n_head = 32,
	.n_head_kv = 8,
	.head_dim = 128,
	.n_ff = 14336,
	.n_vocab = 128256,
};
/* google/gemma-2-27b: tied embeddings, norms after attention and FFN */
static const struct shape gemma2_27b = {
	.n_layer = 46,
	.n_embd = 4608,
	.n_head = 32,
	.n_head_kv = 16,
	.head_dim = 128,
	.n_ff = 36864,
	.n_vocab = 256000,
	.tied = true,
	.post_norms = true,
};
/* Qwen/Qwen3-30B-A3B: 128 experts of 768, 8 used */
static const struct shape qwen3_30b_a3b = {
	.n_layer = 48,
	.n_embd = 2048,
	.n_head = 32,
	.n_head_kv = 4,
	.head_dim = 128,
	.n_ff = 768,
	.n_vocab = 151936,
	.n_expert = 128,
	.n_expert_used = 8,
	.qk_norm = true,
};
/* Qwen/Qwen3-32B: dense, 32K context */
static const struct shape qwen3_32b = {
	.n_layer = 64,
	.n_embd = 5120,
	.n_head = 64,
	.n_head_kv = 8,
	.head_dim = 128,
	.n_ff = 25600,
	.n_vocab = 151936,
	.qk_norm = true,
};

/*
 * A desktop: 32 GiB (28 free) of DDR5 read at 60 GB/s, one NUMA node, and
 * gpu0 as given (an 8 GB RTX 4060-class card by default).
 */
static void desktop(struct io_device_set *set, uint64_t vram, double bw)
{
	memset(set, 0, sizeof(*set));
	set->n = 3;
	set->dev[0] = (struct io_device){ .kind = IO_DEVICE_CPU,
					  .index = -1,
					  .name = "cpu",
					  .total_bytes = 32 * GIB,
					  .free_bytes = 28 * GIB,
					  .node = -1,
					  .n_cpus = 16,
					  .mem_bw = 60e9,
					  .bw_source = IO_BW_GIVEN,
					  .compute = true };
	set->dev[1] = set->dev[0];
	snprintf(set->dev[1].name, sizeof(set->dev[1].name), "numa0");
	set->dev[1].kind = IO_DEVICE_NUMA;
	set->dev[1].index = set->dev[1].node = 0;
	set->dev[2] = (struct io_device){ .kind = IO_DEVICE_GPU,
					  .index = 0,
					  .name = "gpu0",
					  .total_bytes = vram,
					  .free_bytes = vram,
					  .node = -1,
					  .mem_bw = bw,
					  .bw_source = IO_BW_GIVEN,
					  .link_bw = 25e9,
					  .simulated = true };
}

static void plan_of(struct engine_plan *p, const struct shape_model *m,
		    const struct io_device_set *set)
{
	struct err err = { 0 };
	char text[2048];

	ck_assert_msg(engine_plan_make(p, &m->in, set, &err) == 0, "%s",
		      err.msg);
	engine_plan_describe(p, text, sizeof(text));
	if (getenv("CK_VERBOSE"))
		printf("%s\n", text);
	/* Every alternative considered has a reason; the chosen one says so. */
	for (int k = 0; k < ENGINE_PLAN_N; k++)
		ck_assert(!p->alt[k].considered || p->alt[k].why[0]);
	ck_assert_msg(strncmp(p->alt[p->chosen].why, "chosen: ", 8) == 0, "%s",
		      p->alt[p->chosen].why);
}

static const struct engine_plan_alt *alt(const struct engine_plan *p,
					 enum engine_plan_kind k)
{
	ck_assert_msg(p->alt[k].considered, "%s not considered",
		      engine_plan_kind_name(k));
	return &p->alt[k];
}

/* The decode time placement.md's model gives: bytes / bandwidth + costs. */
static double toks(double seconds)
{
	return 1 / (seconds + 0.5e-3);
}

static void near(double got, double want)
{
	ck_assert_msg(fabs(got - want) <= 1e-9 * want + 1e-6,
		      "estimate %.6f, model says %.6f", got, want);
}

/* The byte counts against the published Q4_K_M files (data + metadata). */
START_TEST(test_planner_shapes_are_real)
{
	static struct shape_model m;

	shape_make(&m, &llama3_8b);
	/* Meta-Llama-3-8B-Instruct-Q4_K_M.gguf: 4.92 GB */
	ck_assert_msg(fabs(m.bytes / 4.92e9 - 1) < 0.02, "%llu",
		      (unsigned long long)m.bytes);
	ck_assert_uint_eq(m.in.layer_bytes + m.in.expert_bytes +
				  m.in.input_bytes + m.in.output_bytes,
			  m.bytes);
	ck_assert_uint_eq(m.in.expert_bytes, 0);
	ck_assert(m.in.has_output);
	shape_make(&m, &gemma2_27b);
	/* gemma-2-27b-it-Q4_K_M.gguf: 16.6 GB */
	ck_assert_msg(fabs(m.bytes / 16.6e9 - 1) < 0.03, "%llu",
		      (unsigned long long)m.bytes);
	ck_assert(!m.in.has_output);
	shape_make(&m, &qwen3_30b_a3b);
	/* Qwen3-30B-A3B-Q4_K_M.gguf: 18.6 GB */
	ck_assert_msg(fabs(m.bytes / 18.6e9 - 1) < 0.03, "%llu",
		      (unsigned long long)m.bytes);
	ck_assert_uint_gt(m.in.expert_bytes, 15 * m.in.layer_bytes);
	shape_make(&m, &qwen3_32b);
	/* Qwen3-32B-Q4_K_M.gguf: 19.8 GB */
	ck_assert_msg(fabs(m.bytes / 19.8e9 - 1) < 0.03, "%llu",
		      (unsigned long long)m.bytes);
}
END_TEST

START_TEST(test_planner_8gb_llama3_8b_all_gpu)
{
	static struct shape_model m;
	struct io_device_set set;
	struct engine_plan p;
	double r;

	shape_make(&m, &llama3_8b);
	desktop(&set, 8 * GIB, 272e9);
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_ALL_GPU);
	ck_assert_str_eq(p.gpu, "gpu0");
	ck_assert_uint_eq(p.n_ctx, 4096);
	ck_assert(alt(&p, ENGINE_PLAN_ALL_GPU)->fits);
	ck_assert(!p.alt[ENGINE_PLAN_EXPERTS_IN_RAM].considered);
	ck_assert(!p.alt[ENGINE_PLAN_KV_IN_RAM].considered);
	/* Read per token: all but token_embd, one row of it, KV of 2048. */
	r = m.bytes - m.in.input_bytes + (double)m.in.input_bytes / 128256 +
	    2048.0 * m.in.kv_bytes_per_token;
	near(p.alt[ENGINE_PLAN_ALL_GPU].tok_s, toks(r / 272e9));
	near(alt(&p, ENGINE_PLAN_ALL_CPU)->tok_s, toks(r / 60e9));
	/* The reference split: half the layers, between the two. */
	ck_assert_uint_eq(alt(&p, ENGINE_PLAN_SPLIT)->gpu_layers, 16);
	ck_assert(p.alt[ENGINE_PLAN_SPLIT].tok_s >
		  p.alt[ENGINE_PLAN_ALL_CPU].tok_s);
	ck_assert(p.alt[ENGINE_PLAN_SPLIT].tok_s <
		  p.alt[ENGINE_PLAN_ALL_GPU].tok_s);
	ck_assert(p.alt[ENGINE_PLAN_ALL_GPU].tok_s >
		  3 * p.alt[ENGINE_PLAN_ALL_CPU].tok_s);
}
END_TEST

/*
 * Several sequences share the card (n_seq): each needs its own cache. One
 * sequence of Llama-3-8B fits an 8 GB card whole; sixteen (8 GiB of KV at
 * 4096 tokens) do not, and the all-gpu alternative counts all sixteen.
 */
START_TEST(test_planner_8gb_llama3_8b_sequences)
{
	static struct shape_model m;
	struct io_device_set set;
	struct engine_plan one, many;
	uint64_t kv;

	shape_make(&m, &llama3_8b);
	kv = 4096ull * m.in.kv_bytes_per_token;
	desktop(&set, 8 * GIB, 272e9);
	plan_of(&one, &m, &set);
	m.in.n_seq = 16;
	plan_of(&many, &m, &set);
	m.in.n_seq = 0;
	ck_assert(alt(&one, ENGINE_PLAN_ALL_GPU)->fits);
	ck_assert(!alt(&many, ENGINE_PLAN_ALL_GPU)->fits);
	ck_assert_uint_eq(alt(&many, ENGINE_PLAN_ALL_GPU)->gpu_bytes -
				  alt(&one, ENGINE_PLAN_ALL_GPU)->gpu_bytes,
			  15 * kv);
	ck_assert_int_ne(many.chosen, ENGINE_PLAN_ALL_GPU);
}
END_TEST

START_TEST(test_planner_8gb_gemma2_27b_all_cpu)
{
	static struct shape_model m;
	const struct engine_plan_alt *split, *cpu;
	struct io_device_set set;
	struct engine_plan p;
	double layer, r_layers, r_out, kv;
	uint32_t g;

	shape_make(&m, &gemma2_27b);
	desktop(&set, 8 * GIB, 272e9);
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_ALL_CPU);
	ck_assert_str_eq(p.host, "cpu");
	ck_assert(!alt(&p, ENGINE_PLAN_ALL_GPU)->fits);
	ck_assert_ptr_nonnull(
		strstr(p.alt[ENGINE_PLAN_ALL_GPU].why, "does not fit"));
	ck_assert(!p.alt[ENGINE_PLAN_EXPERTS_IN_RAM].considered);
	/* The weights alone (16.5 GiB) do not fit: no smaller context helps. */
	ck_assert(!alt(&p, ENGINE_PLAN_ALL_GPU_CTX)->fits);
	ck_assert(!alt(&p, ENGINE_PLAN_KV_IN_RAM)->fits);
	ck_assert_ptr_nonnull(strstr(p.alt[ENGINE_PLAN_ALL_CPU].why, "dense"));
	/* The split: as many layers (weights + their KV) as fit beside scratch. */
	split = alt(&p, ENGINE_PLAN_SPLIT);
	cpu = alt(&p, ENGINE_PLAN_ALL_CPU);
	layer = (double)(m.in.layer_bytes + 4096 * m.in.kv_bytes_per_token) /
		46;
	g = (uint32_t)((8 * GIB - (512ull << 20) -
			512ull * 4 * (4 * 4608 + 2 * 36864 + 256000)) /
		       layer);
	ck_assert_uint_eq(split->gpu_layers, g);
	ck_assert_uint_ge(g, 13);
	ck_assert_uint_le(g, 20);
	ck_assert_ptr_nonnull(strstr(split->why, "never automatic"));
	ck_assert_ptr_nonnull(strstr(split->why, "write 'blk.0-"));
	/*
	 * Its estimate, term by term: the GPU's layers at 272 GB/s, the
	 * others and the (tied) output at 60 GB/s, two crossings.
	 */
	kv = 2048.0 * m.in.kv_bytes_per_token;
	r_layers = m.in.layer_bytes + kv;
	r_out = m.in.output_bytes + m.in.input_bytes;
	near(split->tok_s,
	     toks(r_layers * g / 46 / 272e9 + r_layers * (46 - g) / 46 / 60e9 +
		  r_out / 60e9 + 2 * (20e-6 + 4608 * 4 / 25e9)));
	near(cpu->tok_s, toks((r_layers + r_out) / 60e9));
	/*
	 * Decode is bound by the bytes left in RAM: a third of the layers on
	 * the GPU buys at most 1 / (1 - 1/3) = 1.5x.
	 */
	ck_assert(split->tok_s > cpu->tok_s);
	ck_assert(split->tok_s < 1.5 * cpu->tok_s);
	ck_assert(cpu->tok_s > 2.5 && cpu->tok_s < 5);
}
END_TEST

START_TEST(test_planner_8gb_qwen3_moe_experts_in_ram)
{
	static struct shape_model m;
	const struct engine_plan_alt *moe, *cpu;
	struct io_device_set set;
	struct engine_plan p;
	double on_gpu, active;

	shape_make(&m, &qwen3_30b_a3b);
	desktop(&set, 8 * GIB, 272e9);
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_EXPERTS_IN_RAM);
	ck_assert_str_eq(p.gpu, "gpu0");
	ck_assert_str_eq(p.host, "cpu");
	ck_assert(!alt(&p, ENGINE_PLAN_ALL_GPU)->fits);
	moe = alt(&p, ENGINE_PLAN_EXPERTS_IN_RAM);
	cpu = alt(&p, ENGINE_PLAN_ALL_CPU);
	/* token_embd stays in RAM too: one row of it a token. */
	ck_assert_uint_eq(moe->host_bytes,
			  m.in.expert_bytes + m.in.input_bytes);
	ck_assert_uint_lt(moe->gpu_bytes, 3 * GIB);
	ck_assert_ptr_nonnull(strstr(moe->why, "computed by its CPUs"));
	/* 8 of 128 experts a token: 1/16 of the expert bytes cross the bus. */
	active = m.in.expert_bytes / 16.0;
	on_gpu = m.in.layer_bytes + m.in.output_bytes +
		 2048.0 * m.in.kv_bytes_per_token;
	near(moe->tok_s, toks(on_gpu / 272e9 +
			      (active + m.in.input_bytes / 151936.0) / 60e9 +
			      2 * 48 * (20e-6 + 2048 * 4 / 25e9)));
	/* The 1 GiB of active experts from RAM bounds it: 1.4x all-cpu. */
	ck_assert(moe->tok_s > 1.3 * cpu->tok_s);
	ck_assert(moe->tok_s > alt(&p, ENGINE_PLAN_SPLIT)->tok_s);
	ck_assert(cpu->fits);
}
END_TEST

/*
 * A 24 GB card (RTX 4090-class, 1008 GB/s) and Qwen3-32B at its 32K
 * context: the 18.4 GiB of weights fit, the 8 GiB of KV do not. Asked for
 * (--ctx), the context stays and the cache goes to RAM, attention on the
 * CPU, as llama.cpp's --no-kv-offload; by default the context shrinks to
 * what fits, as Ollama sizes its default context by the VRAM.
 */
START_TEST(test_planner_24gb_long_context)
{
	static struct shape_model m;
	const struct engine_plan_alt *kv, *ctx;
	struct io_device_set set;
	struct engine_plan p;
	uint64_t room;
	double read;
	uint32_t g;

	shape_make(&m, &qwen3_32b);
	desktop(&set, 24 * GIB, 1008e9);
	m.in.n_ctx = 32768;
	m.in.ctx_given = true;
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_KV_IN_RAM);
	ck_assert_uint_eq(p.n_ctx, 32768);
	ck_assert_str_eq(p.host, "cpu");
	ck_assert(!alt(&p, ENGINE_PLAN_ALL_GPU)->fits);
	kv = alt(&p, ENGINE_PLAN_KV_IN_RAM);
	room = 24 * GIB - m.bytes - (512ull << 20) -
	       512ull * 4 * (4 * 5120 + 2 * 25600 + 151936);
	/* The cache of 37 of 64 layers fits beside the weights, by layer. */
	g = (uint32_t)(room / (8 * GIB / 64 + 1));
	ck_assert_uint_eq(kv->gpu_layers, g);
	ck_assert_uint_eq(g, 37);
	ck_assert_uint_eq(kv->host_bytes, 8 * GIB / 64 * (64 - g));
	ctx = alt(&p, ENGINE_PLAN_ALL_GPU_CTX);
	ck_assert(ctx->fits);
	ck_assert_uint_eq(ctx->n_ctx,
			  room / m.in.kv_bytes_per_token / 256 * 256);
	ck_assert_uint_ge(ctx->n_ctx, 16384);
	ck_assert_ptr_nonnull(strstr(ctx->why, "was asked for"));
	ck_assert_ptr_nonnull(strstr(kv->why, "fits on gpu0"));
	/* Attention over 16K cached tokens reads 4 GiB of KV a token. */
	read = 16384.0 * m.in.kv_bytes_per_token;
	near(kv->tok_s,
	     toks((m.bytes - m.in.input_bytes + m.in.input_bytes / 151936.0) /
			  1008e9 +
		  read * g / 64 / 1008e9 + read * (64 - g) / 64 / 60e9 +
		  2 * (64 - g) * (20e-6 + 5120 * 4 / 25e9)));
	ck_assert(kv->tok_s > alt(&p, ENGINE_PLAN_ALL_CPU)->tok_s);

	m.in.ctx_given = false;
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_ALL_GPU_CTX);
	ck_assert_uint_eq(p.n_ctx, ctx->n_ctx);
	ck_assert_str_eq(p.host, "");
	ck_assert_ptr_nonnull(strstr(p.alt[p.chosen].why, "shrunk to"));
	ck_assert(p.alt[ENGINE_PLAN_ALL_GPU_CTX].tok_s >
		  p.alt[ENGINE_PLAN_KV_IN_RAM].tok_s);
}
END_TEST

/*
 * The MoE at 128K tokens on the same card: 12 GiB of KV beside 17 GiB of
 * weights do not fit. Keeping the KV in VRAM and the experts in RAM reads
 * less from RAM a token than keeping the experts and moving the KV.
 */
START_TEST(test_planner_24gb_moe_long_context_keeps_kv)
{
	static struct shape_model m;
	struct io_device_set set;
	struct engine_plan p;

	shape_make(&m, &qwen3_30b_a3b);
	desktop(&set, 24 * GIB, 1008e9);
	m.in.n_ctx = 131072;
	m.in.ctx_given = true;
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_EXPERTS_IN_RAM);
	ck_assert(alt(&p, ENGINE_PLAN_KV_IN_RAM)->fits);
	ck_assert(p.alt[ENGINE_PLAN_KV_IN_RAM].tok_s < p.alt[p.chosen].tok_s);
	ck_assert_uint_ge(p.alt[p.chosen].gpu_bytes, 12 * GIB);
	ck_assert_ptr_nonnull(strstr(p.alt[ENGINE_PLAN_KV_IN_RAM].why,
				     "slower than experts-in-ram"));
}
END_TEST

/*
 * Two NUMA nodes of 16 CPUs and 64 GiB, 100 GB/s each (200 for the machine,
 * the load interleaving over both), the GPU in a PCIe slot of node 1.
 */
static void two_nodes(struct io_device_set *set, uint64_t vram, double bw)
{
	memset(set, 0, sizeof(*set));
	set->n = 4;
	set->dev[0] = (struct io_device){ .kind = IO_DEVICE_CPU,
					  .index = -1,
					  .name = "cpu",
					  .total_bytes = 128 * GIB,
					  .free_bytes = 120 * GIB,
					  .node = -1,
					  .n_cpus = 32,
					  .mem_bw = 200e9,
					  .bw_source = IO_BW_GIVEN,
					  .compute = true };
	for (int k = 0; k < 2; k++) {
		set->dev[1 + k] = (struct io_device){ .kind = IO_DEVICE_NUMA,
						      .index = k,
						      .total_bytes = 64 * GIB,
						      .free_bytes = 60 * GIB,
						      .node = k,
						      .n_cpus = 16,
						      .mem_bw = 100e9,
						      .bw_source = IO_BW_GIVEN,
						      .compute = true };
		snprintf(set->dev[1 + k].name, sizeof(set->dev[0].name),
			 "numa%d", k);
	}
	set->dev[3] = (struct io_device){ .kind = IO_DEVICE_GPU,
					  .index = 0,
					  .name = "gpu0",
					  .total_bytes = vram,
					  .free_bytes = vram,
					  .node = 1,
					  .mem_bw = bw,
					  .link_bw = 25e9,
					  .bw_source = IO_BW_GIVEN,
					  .simulated = true };
}

/* The GPU's host buffers (here the KV cache) on its node, read there. */
START_TEST(test_planner_two_numa_nodes_gpu_on_node1)
{
	static struct shape_model m;
	const struct engine_plan_alt *kv;
	struct io_device_set set;
	struct engine_plan p;
	double read;
	uint32_t g;

	two_nodes(&set, 24 * GIB, 1008e9);
	shape_make(&m, &qwen3_32b);
	m.in.n_ctx = 32768;
	m.in.ctx_given = true;
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_KV_IN_RAM);
	ck_assert_str_eq(p.host, "numa1");
	kv = &p.alt[p.chosen];
	ck_assert_ptr_nonnull(strstr(
		kv->why, "in RAM on numa1, their attention by its CPUs"));
	g = kv->gpu_layers;
	read = 16384.0 * m.in.kv_bytes_per_token;
	near(kv->tok_s,
	     toks((m.bytes - m.in.input_bytes + m.in.input_bytes / 151936.0) /
			  1008e9 +
		  read * g / 64 / 1008e9 + read * (64 - g) / 64 / 100e9 +
		  2 * (64 - g) * (20e-6 + 5120 * 4 / 25e9)));
	/* all-cpu stays where the load put it, at the machine's bandwidth. */
	near(alt(&p, ENGINE_PLAN_ALL_CPU)->tok_s,
	     toks((m.bytes - m.in.input_bytes + m.in.input_bytes / 151936.0 +
		   16384.0 * m.in.kv_bytes_per_token) /
		  200e9));

	/* A GPU with no node (one-node machine, unknown slot): the home. */
	set.dev[3].node = -1;
	plan_of(&p, &m, &set);
	ck_assert_str_eq(p.host, "cpu");
}
END_TEST

/*
 * The MoE with an 8 GB card on node 1: experts-in-ram would read the 1 GiB
 * of active experts with node 1's 100 GB/s; all on the CPUs reads it with
 * both nodes' 200 GB/s and needs no hand-overs, and the estimate says so.
 */
START_TEST(test_planner_two_numa_nodes_moe_stays_on_cpus)
{
	static struct shape_model m;
	struct io_device_set set;
	struct engine_plan p;
	double r;

	two_nodes(&set, 8 * GIB, 272e9);
	shape_make(&m, &qwen3_30b_a3b);
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_ALL_CPU);
	ck_assert_str_eq(p.host, "cpu");
	ck_assert_ptr_nonnull(
		strstr(p.alt[p.chosen].why, "faster than experts-in-ram"));
	ck_assert(alt(&p, ENGINE_PLAN_EXPERTS_IN_RAM)->fits);
	r = m.bytes - m.in.input_bytes - m.in.expert_bytes * 15 / 16.0 +
	    m.in.input_bytes / 151936.0 + 2048.0 * m.in.kv_bytes_per_token;
	near(p.alt[p.chosen].tok_s, toks(r / 200e9));
	near(p.alt[ENGINE_PLAN_EXPERTS_IN_RAM].tok_s,
	     toks((m.in.layer_bytes + m.in.output_bytes +
		   2048.0 * m.in.kv_bytes_per_token) /
			  272e9 +
		  (m.in.expert_bytes / 16.0 + m.in.input_bytes / 151936.0) /
			  100e9 +
		  2 * 48 * (20e-6 + 2048 * 4 / 25e9)));
	/*
	 * Loaded by first touch, the weights sit on one node: "cpu" reads
	 * at one node's speed, and then the GPU helps.
	 */
	set.dev[0].mem_bw = 100e9;
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_EXPERTS_IN_RAM);
	ck_assert_str_eq(p.host, "numa1");

	/* A dense model that does not fit: the load's home, numa0. */
	shape_make(&m, &gemma2_27b);
	m.in.home = "numa0";
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_ALL_CPU);
	ck_assert_str_eq(p.host, "numa0");
}
END_TEST

START_TEST(test_planner_no_gpu_and_bad_input)
{
	static struct shape_model m;
	struct io_device_set set;
	struct engine_plan p;
	struct err err = { 0 };
	char text[1024];

	shape_make(&m, &llama3_8b);
	desktop(&set, 8 * GIB, 272e9);
	set.n = 2; /* no gpu0 */
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_ALL_CPU);
	ck_assert_str_eq(p.alt[p.chosen].why, "chosen: no GPU");
	for (int k = 0; k < ENGINE_PLAN_N; k++)
		ck_assert(k == ENGINE_PLAN_ALL_CPU || !p.alt[k].considered);
	engine_plan_describe(&p, text, sizeof(text));
	ck_assert_str_eq(strtok(text, "\n"),
			 "plan all-cpu gpu - host cpu ctx 4096");
	ck_assert_int_eq(strncmp(strtok(NULL, "\n"), "estimate all-cpu ", 17),
			 0);
	/* the host's step: all-cpu's estimate has it with or without a GPU */
	ck_assert_str_eq(strtok(NULL, "\n"), "costs cpu step 0.500ms assumed");
	ck_assert_ptr_null(strtok(NULL, "\n"));
	/* A bandwidth nobody measured or gave cannot be estimated with. */
	set.dev[0].mem_bw = 0;
	ck_assert_int_eq(engine_plan_make(&p, &m.in, &set, &err), -EINVAL);
	ck_assert_str_eq(
		err.msg,
		"the memory bandwidth of cpu is unknown (give it: --devices cpu:bw=60G)");
	set.dev[0].mem_bw = 60e9;
	m.in.n_layer = 0;
	ck_assert_int_eq(engine_plan_make(&p, &m.in, &set, &err), -EINVAL);
	/* A model too big for RAM too: all-cpu, and it says so. */
	shape_make(&m, &gemma2_27b);
	set.dev[0].free_bytes = 8 * GIB;
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_ALL_CPU);
	ck_assert(!p.alt[p.chosen].fits);
	ck_assert_ptr_nonnull(
		strstr(p.alt[p.chosen].why, "does not fit there either"));
}
END_TEST

/*
 * A real 80 GB card capped at 4 GiB (--devices gpu0:vram=4G: the probe
 * gives total and free at most the cap) plans as a 4 GB card: the 8B
 * (4.9 GB) does not fit and the plan is all-cpu; capped at 16 GiB it is
 * all-gpu.
 * A cap no probe resolved (no bandwidths) is not planned for. Measured
 * costs of the card (step=, cross=, the reserve its backend's open took)
 * and of the host (all-cpu's measured speed) replace the assumed ones,
 * and the costs lines say which.
 */
START_TEST(test_planner_capped_card_and_measured_costs)
{
	static struct shape_model m;
	struct io_device_set set;
	struct engine_plan p;
	char text[4096], want[128];
	uint64_t gpu_bytes;
	double r;

	shape_make(&m, &llama3_8b);
	desktop(&set, 80 * GIB, 2850e9);
	set.dev[2].simulated = false;
	set.dev[2].capped = true;
	set.dev[2].total_bytes = set.dev[2].free_bytes = 4 * GIB;
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_ALL_CPU);
	ck_assert(!p.alt[ENGINE_PLAN_ALL_GPU].fits);
	set.dev[2].total_bytes = set.dev[2].free_bytes = 16 * GIB;
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_ALL_GPU);
	engine_plan_describe(&p, text, sizeof(text));
	ck_assert_ptr_nonnull(strstr(
		text,
		"\ncosts gpu0 step 0.500ms assumed cross 20.0us assumed reserve 512MiB assumed\n"));
	ck_assert_ptr_nonnull(
		strstr(text, "\ncosts cpu step 0.500ms assumed\n"));
	ck_assert_ptr_null(strstr(text, "\nmeasured "));
	/*
	 * the reserve measured at the backend's open (100 MiB), and what
	 * comes after it (64 MiB): 348 MiB less than assumed on the card
	 */
	gpu_bytes = p.alt[ENGINE_PLAN_ALL_GPU].gpu_bytes;
	set.dev[2].reserve_bytes = 100ull << 20;
	set.dev[2].reserve_measured = true;
	plan_of(&p, &m, &set);
	ck_assert_uint_eq(p.reserve, 164ull << 20);
	ck_assert_uint_eq(p.alt[ENGINE_PLAN_ALL_GPU].gpu_bytes,
			  gpu_bytes - (348ull << 20));
	engine_plan_describe(&p, text, sizeof(text));
	ck_assert_msg(strstr(text, " reserve 164MiB measured\n"), "%s", text);
	set.dev[2].reserve_measured = false;
	/* all-cpu measured at 4 t/s: the host's step is what it leaves */
	m.in.host_tok_s = 4.0;
	plan_of(&p, &m, &set);
	near(p.alt[ENGINE_PLAN_ALL_CPU].tok_s, 4.0);
	r = m.bytes - m.in.input_bytes + (double)m.in.input_bytes / 128256 +
	    2048.0 * m.in.kv_bytes_per_token;
	near(p.host_step_s, 0.25 - r / 60e9);
	engine_plan_describe(&p, text, sizeof(text));
	snprintf(want, sizeof(want), "\ncosts cpu step %.3fms measured\n",
		 (0.25 - r / 60e9) * 1e3);
	ck_assert_msg(strstr(text, want), "%s", text);
	m.in.host_tok_s = 0;
	/* measured: 0.3 ms a step, 45 us a crossing */
	set.dev[2].step_s = 0.3e-3;
	set.dev[2].cross_s = 45e-6;
	plan_of(&p, &m, &set);
	r = m.bytes - m.in.input_bytes + (double)m.in.input_bytes / 128256 +
	    2048.0 * m.in.kv_bytes_per_token;
	near(p.alt[ENGINE_PLAN_ALL_GPU].tok_s, 1 / (r / 2850e9 + 0.3e-3));
	/* all-cpu keeps the host's assumed step */
	near(p.alt[ENGINE_PLAN_ALL_CPU].tok_s, toks(r / 60e9));
	p.alt[ENGINE_PLAN_ALL_CPU].measured_tok_s = 10.0;
	engine_plan_describe(&p, text, sizeof(text));
	ck_assert_ptr_nonnull(strstr(
		text,
		"\ncosts gpu0 step 0.300ms measured cross 45.0us measured reserve 512MiB assumed\n"));
	snprintf(want, sizeof(want),
		 "\nmeasured all-cpu 10.0 estimate %.1f ratio %.2f\n",
		 p.alt[ENGINE_PLAN_ALL_CPU].tok_s,
		 10.0 / p.alt[ENGINE_PLAN_ALL_CPU].tok_s);
	ck_assert_msg(strstr(text, want), "%s", text);
	/*
	 * the probe's decode product reads at 1.2 TB/s, not the memory's
	 * 2.85: the GPU's bytes at that rate, the host's unchanged
	 */
	set.dev[2].product_bw = 1200e9;
	set.dev[2].product_source = IO_BW_MEASURED;
	plan_of(&p, &m, &set);
	/* the KV cache at the memory's rate: attention is not a product */
	near(p.alt[ENGINE_PLAN_ALL_GPU].tok_s,
	     1 / ((r - 2048.0 * m.in.kv_bytes_per_token) / 1200e9 +
		  2048.0 * m.in.kv_bytes_per_token / 2850e9 + 0.3e-3));
	near(p.alt[ENGINE_PLAN_ALL_CPU].tok_s, toks(r / 60e9));
	set.dev[2].product_bw = 0;
	/* a cap that no probe resolved: no GPU to plan for */
	set.dev[2].mem_bw = 0;
	set.dev[2].link_bw = 0;
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_ALL_CPU);
	ck_assert_str_eq(p.gpu, "");
	ck_assert(!p.alt[ENGINE_PLAN_ALL_GPU].considered);
}
END_TEST

/* A GPU's rate for a weight type, as the test gives them below. */
static double rate_of(uint32_t type)
{
	return type == IO_TYPE_Q4_K ? 1000e9 :
	       type == IO_TYPE_Q6_K ? 700e9 :
				      1200e9; /* product=: F32 */
}

/*
 * Seconds the GPU's products read what one token reads of m's tensors,
 * each at its type's rate: of a group (layers, experts, token_embd, the
 * rest) the share share[group] of its bytes; written out from the tensor
 * list, not from the planner's byte counts.
 */
static double gpu_seconds(const struct shape_model *m, const double share[4])
{
	double s = 0;
	int g;

	for (uint64_t i = 0; i < m->n; i++) {
		const struct io_gguf_tensor *t = &m->t[i];

		g = strncmp(t->name, "blk.", 4) != 0 ?
			    (strcmp(t->name, "token_embd.weight") == 0 ? 2 :
									 3) :
		    strstr(t->name, "_exps.") ? 1 :
						0;
		s += t->bytes * share[g] / rate_of(t->type);
	}
	return s;
}

/*
 * Each weight type at its own product's rate (the probe's per-type
 * measurement, or product.TYPE=): a Q4_K_M model's Q4_K and Q6_K bytes
 * at different rates, F32 at product='s, the KV cache at the memory's;
 * all-gpu, the split and experts-in-ram (the MoE's shared weights on
 * the GPU) written out term by term.
 */
START_TEST(test_planner_product_rate_per_type)
{
	static struct shape_model m;
	struct io_device_set set;
	struct engine_plan p;
	double kv, t, layer_share;
	uint32_t g, L;

	shape_make(&m, &llama3_8b);
	desktop(&set, 80 * GIB, 2850e9);
	set.dev[2].product_bw = 1200e9;
	set.dev[2].product_source = IO_BW_GIVEN;
	set.dev[2].product_type[IO_TYPE_Q4_K] = (struct io_device_rate){
		1000e9, IO_BW_MEASURED
	};
	set.dev[2].product_type[IO_TYPE_Q6_K] = (struct io_device_rate){
		700e9, IO_BW_MEASURED
	};
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_ALL_GPU);
	kv = 2048.0 * m.in.kv_bytes_per_token;
	t = gpu_seconds(&m, (const double[4]){ 1, 1, 1.0 / 128256, 1 });
	near(p.alt[ENGINE_PLAN_ALL_GPU].tok_s, 1 / (t + kv / 2850e9 + 0.5e-3));
	/* Q6_K slower than Q4_K: slower than all at Q4_K's rate */
	ck_assert(t > (m.bytes - m.in.input_bytes +
		       (double)m.in.input_bytes / 128256) /
			      1000e9);
	/* the split: its GPU layers' share of the layers and their KV */
	L = m.in.n_layer;
	g = p.alt[ENGINE_PLAN_SPLIT].gpu_layers;
	ck_assert_uint_eq(g, L / 2);
	layer_share = (double)g / L;
	t = gpu_seconds(&m, (const double[4]){ layer_share, 0, 0, 0 }) +
	    kv * layer_share / 2850e9 +
	    (m.in.layer_bytes + kv) * (1 - layer_share) / 60e9 +
	    (m.in.output_bytes + (double)m.in.input_bytes / 128256) / 60e9 +
	    2 * (20e-6 + 4096 * 4.0 / 25e9) + 0.5e-3;
	near(p.alt[ENGINE_PLAN_SPLIT].tok_s, 1 / t);

	/* the MoE's experts in RAM: the GPU reads its shared weights only */
	shape_make(&m, &qwen3_30b_a3b);
	set.dev[2].total_bytes = set.dev[2].free_bytes = 8 * GIB;
	plan_of(&p, &m, &set);
	ck_assert_int_eq(p.chosen, ENGINE_PLAN_EXPERTS_IN_RAM);
	kv = 2048.0 * m.in.kv_bytes_per_token;
	t = gpu_seconds(&m, (const double[4]){ 1, 0, 0, 1 }) + kv / 2850e9 +
	    (double)m.in.input_bytes / 151936 / 60e9 + 0.5e-3 +
	    8.0 / 128 * m.in.expert_bytes / 60e9 +
	    2.0 * 48 * (20e-6 + 2048 * 4.0 / 25e9);
	near(p.alt[ENGINE_PLAN_EXPERTS_IN_RAM].tok_s, 1 / t);
}
END_TEST

static Suite *planner_suite(void)
{
	Suite *s = suite_create("engine_planner");
	TCase *tc = tcase_create("planner");

	tcase_add_test(tc, test_planner_shapes_are_real);
	tcase_add_test(tc, test_planner_8gb_llama3_8b_all_gpu);
	tcase_add_test(tc, test_planner_8gb_llama3_8b_sequences);
	tcase_add_test(tc, test_planner_8gb_gemma2_27b_all_cpu);
	tcase_add_test(tc, test_planner_8gb_qwen3_moe_experts_in_ram);
	tcase_add_test(tc, test_planner_24gb_long_context);
	tcase_add_test(tc, test_planner_24gb_moe_long_context_keeps_kv);
	tcase_add_test(tc, test_planner_two_numa_nodes_gpu_on_node1);
	tcase_add_test(tc, test_planner_two_numa_nodes_moe_stays_on_cpus);
	tcase_add_test(tc, test_planner_no_gpu_and_bad_input);
	tcase_add_test(tc, test_planner_capped_card_and_measured_costs);
	tcase_add_test(tc, test_planner_product_rate_per_type);
	suite_add_tcase(s, tc);
	return s;
}

const struct check_main check_main = { .suite = planner_suite };
