// SPDX-License-Identifier: MIT
/*
 * The KV cache's life (engine/kv.c, kv_pool.c, engine.h "sequences"): a
 * second prompt on a sequence that holds the first one's tokens evaluates
 * only what is new and gives the tokens of a fresh evaluation; a prefix
 * taken from another sequence likewise, its blocks shared and copied on
 * the first write; the pool's cap (grow fails with ENOSPC and leaves
 * nothing behind, reservations say EAGAIN or ENOSPC, every block comes
 * back) and its chunks, and one budget shared by two models' pools; K/V
 * types per model, refused where head_dim is not whole blocks; the
 * store/view interface the forward pass and the
 * backends use.
 *
 *   make build/tests/engine/test_kv && build/tests/engine/test_kv
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/engine.h"
#include "../../engine/kv.h"
#include "../../engine/model.h"
#include "../../engine/quant/quant.h"
#include "../common/check_main.h"

/* A two-thread context on the shared model stem with these KV options. */
static struct engine_ctx *kv_open(const char *stem, uint64_t kv_mem,
				  const char *tk, const char *tv)
{
	struct engine_model_options opt = { .n_ctx = 512 };
	struct engine_ctx_options copt = {
		.threads = 2, .kv_mem = kv_mem, .kv_type_k = tk, .kv_type_v = tv
	};
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;
	struct err err = { 0 };
	char path[1200];

	check_shared_model(path, sizeof(path), stem);
	ck_assert_msg(engine_model_open(&m, path, &opt, &err) == 0, "%s: %s",
		      path, err.msg);
	ck_assert_msg(engine_ctx_new(&ctx, m, &copt, &err) == 0, "%s: %s", path,
		      err.msg);
	return ctx;
}

/* Free a context of kv_open and its model. */
static void kv_close(struct engine_ctx *ctx)
{
	struct engine_model *m = engine_ctx_model(ctx);

	engine_ctx_free(ctx);
	engine_model_free(m);
}

/* A context as kv_open's, its pool capped at cap and charged to b. */
static struct engine_ctx *kv_open_shared(const char *stem, uint64_t cap,
					 struct engine_budget *b)
{
	struct engine_model_options opt = { .n_ctx = 512 };
	struct engine_ctx_options copt = { .threads = 2,
					   .kv_mem = cap,
					   .budget = b };
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;
	struct err err = { 0 };
	char path[1200];

	check_shared_model(path, sizeof(path), stem);
	ck_assert_msg(engine_model_open(&m, path, &opt, &err) == 0, "%s: %s",
		      path, err.msg);
	ck_assert_msg(engine_ctx_new(&ctx, m, &copt, &err) == 0, "%s: %s", path,
		      err.msg);
	return ctx;
}

/* Greedy generation of n tokens from text on seq; the answer's ids. */
static size_t kv_generate(struct engine_ctx *m, struct engine_seq *seq,
			  const char *text, uint32_t n, int32_t *out,
			  struct engine_generation_stats *st)
{
	struct engine_generate_options opt = { .max_tokens = n };
	struct engine_generation *g = NULL;
	struct err err = { 0 };
	const int32_t *tok;
	size_t np, nt, len, i;
	char buf[2048];
	int rc;

	engine_sampling_defaults(&opt.sampling);
	opt.sampling.temperature = 0;
	ck_assert_int_eq(engine_generation_new(&g, engine_ctx_model(m), seq,
					       text, strlen(text), &opt, &err),
			 0);
	while ((rc = engine_generation_step(g, buf, sizeof(buf), &len, &err)) >
	       0)
		;
	ck_assert_msg(rc == 0, "%s", err.msg);
	tok = engine_generation_tokens(g, &np, &nt);
	for (i = np; i < nt; i++)
		out[i - np] = tok[i];
	*st = *engine_generation_stats(g);
	engine_generation_free(g);
	return nt - np;
}

static const char turn1[] = "Once upon a time, there was a little dog.";
static const char turn2[] = "Once upon a time, there was a little dog. "
			    "He liked to run in the park with his friends, and";

START_TEST(test_kv_second_turn_evaluates_only_new_tokens)
{
	struct engine_ctx *m = kv_open(
		_i ? "tiny-qwen3-bpe16k-mixq" : "stories260K", 0,
		_i ? "q8_0" : NULL, _i ? "q4_0" : NULL);
	struct engine_generation_stats st1, st2, fresh_st;
	struct engine_seq *seq, *fresh;
	struct err err = { 0 };
	int32_t a[32], b[32], c[32];
	size_t na, nb, nc;

	ck_assert_int_eq(engine_seq_new(m, &seq, &err), 0);
	ck_assert_int_eq(engine_seq_new(m, &fresh, &err), 0);
	na = kv_generate(m, seq, turn1, 8, a, &st1);
	ck_assert_uint_eq(st1.prompt_evaluated, st1.prompt_tokens);
	nb = kv_generate(m, seq, turn2, 24, b, &st2);
	nc = kv_generate(m, fresh, turn2, 24, c, &fresh_st);
	ck_assert_uint_eq(nb, nc);
	ck_assert(!memcmp(b, c, nb * sizeof(*b)));
	ck_assert_uint_eq(st2.prompt_tokens, fresh_st.prompt_tokens);
	/* the first turn's prompt is kept, at most its last token redone */
	ck_assert_uint_le(st2.prompt_evaluated,
			  st2.prompt_tokens - st1.prompt_tokens + 1);
	ck_assert_uint_gt(st2.prompt_evaluated, 0);
	(void)na;
	engine_seq_free(seq);
	engine_seq_free(fresh);
	kv_close(m);
}
END_TEST

START_TEST(test_kv_copied_prefix_same_tokens)
{
	struct engine_ctx *m = kv_open("tiny-qwen3-bpe16k-mixq", 0, NULL, NULL);
	struct engine_generation_stats st, fresh_st;
	struct engine_seq *donor, *seq, *fresh;
	struct err err = { 0 };
	int32_t a[32], b[32];
	size_t na, nb;

	ck_assert_int_eq(engine_seq_new(m, &donor, &err), 0);
	ck_assert_int_eq(engine_seq_new(m, &seq, &err), 0);
	ck_assert_int_eq(engine_seq_new(m, &fresh, &err), 0);
	kv_generate(m, donor, turn1, 4, a, &st);
	ck_assert_int_eq(engine_seq_copy_prefix(seq, donor,
						engine_seq_length(donor), &err),
			 0);
	na = kv_generate(m, seq, turn2, 24, a, &st);
	nb = kv_generate(m, fresh, turn2, 24, b, &fresh_st);
	ck_assert_uint_eq(na, nb);
	ck_assert(!memcmp(a, b, na * sizeof(*a)));
	ck_assert_uint_lt(st.prompt_evaluated, fresh_st.prompt_evaluated);
	engine_seq_free(donor);
	engine_seq_free(seq);
	engine_seq_free(fresh);
	kv_close(m);
}
END_TEST

START_TEST(test_kv_budget)
{
	/* stories260K, F16: 640 bytes a token, 40960 a block of 64 */
	struct engine_ctx *m = kv_open("stories260K", 4 * 40960, NULL, NULL);
	struct engine_seq *a, *b;
	struct engine_kv_stats st;
	struct engine_batch_item it;
	struct err err = { 0 };
	int32_t tok[300];
	size_t i;

	for (i = 0; i < 300; i++)
		tok[i] = 1 + (int32_t)(i % 300);
	ck_assert_int_eq(engine_seq_new(m, &a, &err), 0);
	ck_assert_int_eq(engine_seq_new(m, &b, &err), 0);
	ck_assert_uint_eq(engine_seq_budget_tokens(a), 256);
	/* 300 positions need 5 blocks: nothing evaluated, nothing held */
	it = (struct engine_batch_item){ a, tok, 300, NULL };
	ck_assert_int_eq(engine_forward(m, &it, 1, &err), -ENOSPC);
	ck_assert_uint_eq(engine_seq_length(a), 0);
	engine_kv_stats(m, &st);
	ck_assert_uint_eq(st.used, 0);
	ck_assert_uint_eq(st.committed, 0);
	/* reservations: never, then not now, then after the other ends */
	ck_assert_int_eq(engine_seq_reserve(a, 300, &err), -ENOSPC);
	ck_assert_int_eq(engine_seq_reserve(a, 130, &err), 0);
	ck_assert_uint_eq(engine_seq_capacity(a), 130);
	ck_assert_int_eq(engine_seq_reserve(b, 100, &err), -EAGAIN);
	ck_assert_int_eq(engine_seq_reserve(b, 64, &err), 0);
	it = (struct engine_batch_item){ a, tok, 130, NULL };
	ck_assert_int_eq(engine_forward(m, &it, 1, &err), 0);
	engine_kv_stats(m, &st);
	ck_assert_uint_eq(st.blocks, 3);
	ck_assert_uint_eq(st.committed, 4 * 40960);
	engine_seq_truncate(a, 10);
	engine_kv_stats(m, &st);
	ck_assert_uint_eq(st.blocks, 1);
	engine_seq_free(a);
	engine_seq_free(b);
	engine_kv_stats(m, &st);
	ck_assert_uint_eq(st.used, 0);
	ck_assert_uint_eq(st.committed, 0);
	ck_assert_uint_eq(st.blocks, 0);
	kv_close(m);
}
END_TEST

/*
 * Two models share one budget: what one holds or promised, the other
 * cannot have until it comes back; each pool keeps to its own cap too.
 */
START_TEST(test_kv_shared_budget)
{
	struct engine_budget *b = NULL;
	struct engine_ctx *m1, *m2;
	struct engine_seq *a, *c;
	struct engine_budget_stats bs;
	struct engine_kv_stats st;
	struct err err = { 0 };

	/* 5 blocks of 40960 for KV (a sixteenth more in reserve) */
	ck_assert_int_eq(engine_budget_new(&b, 5 * 40960 * 16 / 15, &err), 0);
	ck_assert_uint_eq(engine_budget_limit(b, ENGINE_BUDGET_KV), 5 * 40960);
	m1 = kv_open_shared("stories260K", 0, b);
	m2 = kv_open_shared("stories260K", 2 * 40960, b);
	engine_kv_stats(m1, &st);
	ck_assert_uint_eq(st.budget, 5 * 40960);
	engine_kv_stats(m2, &st);
	ck_assert_uint_eq(st.budget, 2 * 40960); /* its cap */
	ck_assert_int_eq(engine_seq_new(m1, &a, &err), 0);
	ck_assert_int_eq(engine_seq_new(m2, &c, &err), 0);
	ck_assert_int_eq(engine_seq_reserve(c, 3 * 64, &err), -ENOSPC);
	ck_assert_int_eq(engine_seq_reserve(a, 4 * 64, &err), 0);
	engine_kv_stats(m2, &st);
	ck_assert_uint_eq(st.free, 40960); /* the budget's, under its cap */
	ck_assert_int_eq(engine_seq_reserve(c, 2 * 64, &err), -EAGAIN);
	ck_assert_int_eq(engine_seq_reserve(c, 64, &err), 0);
	engine_budget_stats(b, &bs);
	ck_assert_uint_eq(bs.used[ENGINE_BUDGET_KV], 5 * 40960);
	/* a smaller promise gives back the difference */
	ck_assert_int_eq(engine_seq_reserve(a, 64, &err), 0);
	ck_assert_int_eq(engine_seq_reserve(c, 2 * 64, &err), 0);
	engine_seq_free(a);
	engine_seq_free(c);
	engine_budget_stats(b, &bs);
	ck_assert_uint_eq(bs.used[ENGINE_BUDGET_KV], 0);
	ck_assert_uint_eq(bs.peak[ENGINE_BUDGET_KV], 5 * 40960);
	kv_close(m1);
	kv_close(m2);
	engine_budget_free(b);
}
END_TEST

START_TEST(test_kv_types)
{
	struct engine_ctx *m = kv_open("stories260K", 0, NULL, NULL);
	struct engine_kv_stats st;
	struct err err = { 0 };
	uint32_t q8, f32;

	ck_assert_int_eq(engine_kv_type_parse("q8_0", &q8), 0);
	ck_assert_int_eq(engine_kv_type_parse("f32", &f32), 0);
	ck_assert_int_eq(engine_kv_type_parse("q4_K", &q8), -EINVAL);
	/* head_dim 8: no 32-element block fits */
	ck_assert_int_eq(engine_ctx_set_kv_types(m, q8, q8, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "head_dim 8"));
	ck_assert_int_eq(engine_ctx_set_kv_types(m, f32, f32, &err), 0);
	engine_kv_stats(m, &st);
	ck_assert_uint_eq(st.k_bytes_per_token, 5 * 4 * 8 * 4);
	ck_assert_uint_eq(
		engine_kv_bytes_per_token(engine_ctx_model(m), q8, q8), 0);
	kv_close(m);
}
END_TEST

/*
 * The cache's interface (kv.h): what is stored at engine_kv_slot's place
 * is what engine_kv_view shows there, converted to the sequence's types;
 * a view is one block's run (64 positions) or less, and its strides and
 * head offsets address every head of every position in it.
 */
START_TEST(test_kv_store_view)
{
	struct engine_ctx *m = kv_open("stories260K", 0, "f32", "f16");
	const struct engine_hparams *hp = &engine_ctx_model(m)->hp;
	const uint32_t nk = hp->n_head_kv * hp->head_dim;
	const uint32_t nv = hp->n_head_kv * hp->head_dim_v;
	const uint32_t il = hp->n_layer - 1, n = ENGINE_KV_BLOCK + 6;
	struct engine_kv_view view;
	struct engine_seq *seq;
	struct err err = { 0 };
	float k[64], v[64], got;
	uint16_t want16[64];
	struct engine_kv_slot slot;
	uint32_t pos, i;

	ck_assert_uint_le(nk, 64);
	ck_assert_uint_le(nv, 64);
	ck_assert_int_eq(engine_seq_new(m, &seq, &err), 0);
	ck_assert_int_eq(engine_seq_grow(seq, n, &err), 0);
	ck_assert_ptr_eq(engine_seq_ctx(seq), m);
	for (pos = 0; pos < n; pos++) {
		for (i = 0; i < nk; i++)
			k[i] = (float)pos + (float)i / 64;
		for (i = 0; i < nv; i++)
			v[i] = -(float)pos - (float)i / 128;
		engine_kv_slot(seq, il, pos, &slot);
		ck_assert_uint_eq(slot.type_k, IO_TYPE_F32);
		ck_assert_uint_eq(slot.type_v, IO_TYPE_F16);
		quant_from_float(slot.type_k, k, slot.k, nk);
		quant_from_float(slot.type_v, v, slot.v, nv);
	}
	/* the first block's run, then the rest; a run stops at end */
	engine_kv_view(seq, il, 0, n, &view);
	ck_assert_uint_eq(view.n, ENGINE_KV_BLOCK);
	ck_assert_uint_eq(view.type_k, IO_TYPE_F32);
	ck_assert_uint_eq(view.type_v, IO_TYPE_F16);
	ck_assert_uint_eq(view.k_stride, nk * sizeof(float));
	ck_assert_uint_eq(view.v_stride, nv * sizeof(uint16_t));
	ck_assert_uint_eq(view.k_head * hp->n_head_kv, view.k_stride);
	ck_assert_uint_eq(view.v_head * hp->n_head_kv, view.v_stride);
	engine_kv_view(seq, il, ENGINE_KV_BLOCK, n, &view);
	ck_assert_uint_eq(view.n, n - ENGINE_KV_BLOCK);
	engine_kv_view(seq, il, 10, 20, &view);
	ck_assert_uint_eq(view.n, 10);
	for (pos = 0; pos < n; pos += view.n) {
		engine_kv_view(seq, il, pos, n, &view);
		for (uint32_t r = 0; r < view.n; r++) {
			const uint32_t p = pos + r;
			const uint8_t *kr = view.k + r * view.k_stride;
			const uint8_t *vr = view.v + r * view.v_stride;

			for (i = 0; i < nk; i++) {
				memcpy(&got,
				       kr + (i / hp->head_dim) * view.k_head +
					       (i % hp->head_dim) *
						       sizeof(float),
				       sizeof(got));
				ck_assert_float_eq(got,
						   (float)p + (float)i / 64);
			}
			for (i = 0; i < nv; i++)
				v[i] = -(float)p - (float)i / 128;
			quant_from_float(IO_TYPE_F16, v, want16, nv);
			ck_assert_int_eq(
				memcmp(vr, want16, nv * sizeof(uint16_t)), 0);
		}
	}
	engine_seq_free(seq);
	kv_close(m);
}
END_TEST

/* Logits of tokens appended to seq (the last one's), in out. */
static void kv_forward(struct engine_ctx *m, struct engine_seq *seq,
		       const int32_t *tok, size_t n, float *out)
{
	struct engine_batch_item it = { seq, tok, n, out };
	struct err err = { 0 };

	ck_assert_msg(engine_forward(m, &it, 1, &err) == 0, "%s", err.msg);
}

static void kv_stats_are(struct engine_ctx *m, uint64_t blocks, uint64_t shared)
{
	struct engine_kv_stats st;

	engine_kv_stats(m, &st);
	ck_assert_uint_eq(st.blocks, blocks);
	ck_assert_uint_eq(st.shared, shared);
	ck_assert_uint_eq(st.used, blocks * st.block_bytes);
	ck_assert_uint_ge(st.memory, st.used);
}

/*
 * Prefix reuse holds the donor's blocks instead of copying them: no block
 * is taken, the blocks count as shared. The first write into a shared
 * block copies it for the writer alone (the prefix's last, partly filled
 * block; a donor truncated into a shared block): every sequence then
 * gives the logits of a fresh evaluation of its own tokens, bit for bit.
 */
START_TEST(test_kv_prefix_shares_blocks)
{
	struct engine_ctx *m = kv_open("tiny-qwen3-bpe16k-mixq", 0, NULL, NULL);
	const uint32_t nv = engine_model_info(engine_ctx_model(m))->n_vocab;
	struct engine_seq *donor, *dst, *late, *fresh;
	struct engine_kv_stats st;
	struct err err = { 0 };
	float *a = malloc(nv * sizeof(float)), *b = malloc(nv * sizeof(float));
	int32_t tok[200];
	size_t i;

	ck_assert(a && b);
	for (i = 0; i < 200; i++)
		tok[i] = (int32_t)((i * 7919 + 11) % nv);
	ck_assert_int_eq(engine_seq_new(m, &donor, &err), 0);
	ck_assert_int_eq(engine_seq_new(m, &dst, &err), 0);
	ck_assert_int_eq(engine_seq_new(m, &late, &err), 0);
	ck_assert_int_eq(engine_seq_new(m, &fresh, &err), 0);
	kv_forward(m, donor, tok, 150, a);
	kv_stats_are(m, 3, 0);
	ck_assert_int_eq(engine_seq_copy_prefix(dst, donor, 150, &err), 0);
	ck_assert_uint_eq(engine_seq_length(dst), 150);
	ck_assert_mem_eq(engine_seq_tokens(dst), tok, 150 * sizeof(int32_t));
	kv_stats_are(m, 3, 3);
	kv_forward(m, fresh, tok, 150, b);
	ck_assert_mem_eq(a, b, nv * sizeof(float));
	kv_stats_are(m, 6, 3);

	/* dst and the donor write position 150 of the block they share */
	kv_forward(m, dst, &tok[160], 1, a);
	kv_stats_are(m, 7, 2); /* block 2 copied for dst */
	kv_forward(m, donor, &tok[170], 1, a);
	kv_stats_are(m, 7, 2); /* the donor's block 2 is its own again */
	kv_forward(m, dst, &tok[161], 1, a);
	kv_forward(m, fresh, &tok[160], 1, b);
	kv_forward(m, fresh, &tok[161], 1, b);
	ck_assert_mem_eq(a, b, nv * sizeof(float));
	kv_forward(m, donor, &tok[171], 1, a);
	engine_seq_truncate(fresh, 150);
	kv_forward(m, fresh, &tok[170], 1, b);
	kv_forward(m, fresh, &tok[171], 1, b);
	ck_assert_mem_eq(a, b, nv * sizeof(float));

	/* a donor truncated into a block it shares rewrites a copy of it */
	ck_assert_int_eq(engine_seq_copy_prefix(late, donor, 152, &err), 0);
	kv_stats_are(m, 7, 3);
	engine_seq_truncate(donor, 100);
	kv_forward(m, donor, tok + 20, 30, a); /* other tokens at 100.. */
	engine_kv_stats(m, &st);
	ck_assert_uint_eq(st.shared, 2); /* blocks 0 and 1: late and dst */
	kv_forward(m, late, &tok[180], 1, a);
	kv_forward(m, fresh, &tok[180], 1, b);
	ck_assert_mem_eq(a, b, nv * sizeof(float));

	engine_seq_free(donor);
	engine_seq_free(dst);
	engine_seq_free(late);
	engine_seq_free(fresh);
	engine_kv_stats(m, &st);
	ck_assert_uint_eq(st.blocks, 0);
	ck_assert_uint_eq(st.shared, 0);
	ck_assert_uint_eq(st.committed, 0);
	ck_assert_uint_eq(st.memory, 0);
	free(a);
	free(b);
	kv_close(m);
}
END_TEST

/*
 * The pool's blocks come in chunks of the backend's memory and go back
 * to a free list: a budget of 64 blocks of stories260K (40960 bytes each)
 * is four chunks of 16. Sequences freed in any order leave free blocks
 * scattered over the chunks, which a new sequence takes (the budget fills
 * to its last block); the memory held never passes the budget, and a
 * chunk nobody holds a block of goes back at once.
 */
START_TEST(test_kv_pool_chunks)
{
	const uint64_t bb = 40960;
	struct engine_ctx *m = kv_open("stories260K", 64 * bb, NULL, NULL);
	struct engine_seq *s[8], *big;
	struct engine_kv_stats st;
	struct err err = { 0 };
	int i;

	for (i = 0; i < 8; i++) {
		ck_assert_int_eq(engine_seq_new(m, &s[i], &err), 0);
		ck_assert_int_eq(
			engine_seq_grow(s[i], 8 * ENGINE_KV_BLOCK, &err), 0);
	}
	engine_kv_stats(m, &st);
	ck_assert_uint_eq(st.blocks, 64);
	ck_assert_uint_eq(st.memory, 64 * bb);
	ck_assert_int_eq(engine_seq_new(m, &big, &err), 0);
	ck_assert_int_eq(engine_seq_grow(big, 1, &err), -ENOSPC);
	for (i = 1; i < 8; i += 2)
		engine_seq_free(s[i]);
	engine_kv_stats(m, &st);
	ck_assert_uint_eq(st.blocks, 32);
	ck_assert_uint_eq(st.memory, 64 * bb); /* every chunk half held */
	ck_assert_int_eq(engine_seq_grow(big, 32 * ENGINE_KV_BLOCK, &err), 0);
	ck_assert_int_eq(engine_seq_grow(big, 33 * ENGINE_KV_BLOCK, &err),
			 -ENOSPC);
	engine_kv_stats(m, &st);
	ck_assert_uint_eq(st.blocks, 64);
	ck_assert_uint_eq(st.memory, 64 * bb);
	engine_seq_free(big);
	for (i = 0; i < 8; i += 2) {
		engine_seq_free(s[i]);
		engine_kv_stats(m, &st);
		ck_assert_uint_le(st.memory, st.budget);
	}
	engine_kv_stats(m, &st);
	ck_assert_uint_eq(st.blocks, 0);
	ck_assert_uint_eq(st.used, 0);
	ck_assert_uint_eq(st.memory, 0);
	kv_close(m);
}
END_TEST

/* --kv-mem sizes: one parser for llmfs and llmfs-run. */
START_TEST(test_kv_bytes_parse)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} good[] = {
		{ "0", 0 },
		{ "4096", 4096 },
		{ "200k", 200ull << 10 },
		{ "200K", 200ull << 10 },
		{ "64M", 64ull << 20 },
		{ "3G", 3ull << 30 },
	};
	static const char *const bad[] = {
		"",  "-1", "1.5G", "1T",	   "1GB",
		"k", " 1", " -1",  "99999999999G", "99999999999999999999",
	};
	uint64_t bytes;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_int_eq(engine_kv_bytes_parse(good[i].text, &bytes),
				 0);
		ck_assert_uint_eq(bytes, good[i].bytes);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(engine_kv_bytes_parse(bad[i], &bytes) == -EINVAL,
			      "'%s' was accepted", bad[i]);
}
END_TEST

static int kv_setup(void)
{
	return check_need_model("stories260K");
}

static void kv_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_kv_second_turn_evaluates_only_new_tokens,
			    0, 2);
	tcase_add_test(tc, test_kv_copied_prefix_same_tokens);
	tcase_add_test(tc, test_kv_prefix_shares_blocks);
	tcase_add_test(tc, test_kv_pool_chunks);
	tcase_add_test(tc, test_kv_budget);
	tcase_add_test(tc, test_kv_shared_budget);
	tcase_add_test(tc, test_kv_types);
	tcase_add_test(tc, test_kv_store_view);
	tcase_add_test(tc, test_kv_bytes_parse);
}

const struct check_main check_main = {
	.name = "kv",
	.timeout = 120,
	.setup = kv_setup,
	.add_tests = kv_tests,
};
