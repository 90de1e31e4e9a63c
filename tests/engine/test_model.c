// SPDX-License-Identifier: MIT
/*
 * Model loading and the sequence API: the info a real model reports, the
 * files the engine must refuse (written at test time by copying a shared
 * model through io/'s GGUF writer with one thing changed), and forward()'s
 * errors and KV-cache bookkeeping.
 *
 *   make build/tests/engine/test_model && build/tests/engine/test_model
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/engine.h"
#include "../common/check_main.h"

static char tmp_dir[] = "/tmp/llmfs-test-model-XXXXXX";

static void model_path(char *buf, size_t cap, const char *stem)
{
	check_shared_model(buf, cap, stem);
}

/* How to change a model while copying it. */
struct mutation {
	const char *drop_key;	 /* leave this key out */
	const char *arch;	 /* new general.architecture */
	const char *drop_tensor; /* leave this tensor out */
	const char *swap_tensor; /* swap ne[0] and ne[1] of this tensor */
};

/* Copy ../shared/models/<stem>.gguf to dst with mutation mu applied. */
static void model_copy(const char *stem, const char *dst,
		       const struct mutation *mu)
{
	struct io_gguf_writer *w = NULL;
	struct io_gguf *g = NULL;
	struct err err = { 0 };
	char src[1200];
	uint64_t i;
	int fd;

	model_path(src, sizeof(src), stem);
	ck_assert_msg(io_gguf_open(&g, src, &err) == 0, "%s", err.msg);
	ck_assert_msg(io_gguf_writer_new(&w,
					 g->alignment == 32 ? 0 : g->alignment,
					 &err) == 0,
		      "%s", err.msg);
	for (i = 0; i < g->n_kv; i++) {
		const struct io_gguf_kv *kv = &g->kv[i];

		if (!strcmp(kv->key, "general.alignment"))
			continue;
		if (mu->drop_key && !strcmp(kv->key, mu->drop_key))
			continue;
		if (mu->arch && !strcmp(kv->key, "general.architecture")) {
			ck_assert_int_eq(io_gguf_writer_add_str(w, kv->key,
								mu->arch, &err),
					 0);
			continue;
		}
		ck_assert_msg(
			io_gguf_writer_add(w, kv->key, &kv->value, &err) == 0,
			"%s", err.msg);
	}
	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];
		int64_t ne[IO_GGUF_MAX_DIMS];

		if (mu->drop_tensor && !strcmp(t->name, mu->drop_tensor))
			continue;
		memcpy(ne, t->ne, sizeof(ne));
		if (mu->swap_tensor && !strcmp(t->name, mu->swap_tensor)) {
			ne[0] = t->ne[1];
			ne[1] = t->ne[0];
		}
		ck_assert_msg(io_gguf_writer_add_tensor(w, t->name, t->type,
							t->n_dims, ne,
							&err) == 0,
			      "%s", err.msg);
	}
	ck_assert_msg(io_gguf_writer_begin(w, dst, &err) == 0, "%s", err.msg);
	fd = open(g->files[0].path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];
		char *buf;

		if (mu->drop_tensor && !strcmp(t->name, mu->drop_tensor))
			continue;
		buf = malloc(t->bytes);
		ck_assert_ptr_nonnull(buf);
		ck_assert_int_eq(pread(fd, buf, t->bytes, (off_t)t->offset),
				 (ssize_t)t->bytes);
		ck_assert_msg(io_gguf_writer_write(w, buf, t->bytes, &err) == 0,
			      "%s", err.msg);
		free(buf);
	}
	close(fd);
	ck_assert_msg(io_gguf_writer_finish(w, &err) == 0, "%s", err.msg);
	io_gguf_writer_free(w);
	io_gguf_close(g);
}

/* Open a mutated copy of stories260K; the return and the message. */
static int model_open_mutated(const struct mutation *mu, struct err *err)
{
	struct engine_model *m = NULL;
	char dst[1200];
	int ret;

	snprintf(dst, sizeof(dst), "%s/bad.gguf", tmp_dir);
	model_copy("stories260K", dst, mu);
	ret = engine_model_open(&m, dst, NULL, err);
	if (ret == 0)
		engine_model_free(m);
	else
		ck_assert_ptr_null(m);
	unlink(dst);
	return ret;
}

/* A context of copt on the shared model stem, opened with opt. */
static struct engine_ctx *model_open_opt(const char *stem,
					 const struct engine_model_options *opt,
					 const struct engine_ctx_options *copt)
{
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;
	struct err err = { 0 };
	char path[1200];

	model_path(path, sizeof(path), stem);
	ck_assert_msg(engine_model_open(&m, path, opt, &err) == 0, "%s: %s",
		      path, err.msg);
	ck_assert_msg(engine_ctx_new(&ctx, m, copt, &err) == 0, "%s: %s", path,
		      err.msg);
	return ctx;
}

/* Free a context of model_open_opt and its model. */
static void model_close(struct engine_ctx *ctx)
{
	struct engine_model *m = engine_ctx_model(ctx);

	engine_ctx_free(ctx);
	engine_model_free(m);
}

static struct engine_ctx *model_open_threads(const char *stem, uint32_t n_ctx,
					     uint32_t threads)
{
	struct engine_model_options opt = { .n_ctx = n_ctx };
	struct engine_ctx_options copt = { .threads = threads };

	return model_open_opt(stem, &opt, &copt);
}

static struct engine_ctx *model_open_packed(const char *stem, bool no_pack)
{
	struct engine_model_options opt = { .n_ctx = 64, .no_pack = no_pack };
	struct engine_ctx_options copt = { .threads = 2 };

	return model_open_opt(stem, &opt, &copt);
}

static struct engine_ctx *model_open(const char *stem, uint32_t n_ctx)
{
	return model_open_threads(stem, n_ctx, 1);
}

START_TEST(test_model_info_stories)
{
	struct engine_ctx *m = model_open("stories260K", 0);
	const struct engine_model_info *in = engine_model_info(
		engine_ctx_model(m));
	const struct io_gguf *g = engine_model_gguf(engine_ctx_model(m));
	struct engine_kv_stats kv;
	uint64_t params = 0, i;

	ck_assert_int_eq(in->arch, ENGINE_ARCH_LLAMA);
	ck_assert_str_eq(in->arch_name, "llama");
	/* README section 2: E/L/H/KV/F = 64/5/8/4/172, 512 tokens */
	ck_assert_uint_eq(in->n_vocab, 512);
	ck_assert_uint_eq(in->n_embd, 64);
	ck_assert_uint_eq(in->n_layer, 5);
	ck_assert_uint_eq(in->n_head, 8);
	ck_assert_uint_eq(in->n_head_kv, 4);
	ck_assert_uint_eq(in->head_dim, 8);
	ck_assert_uint_eq(in->n_ff, 172);
	ck_assert_uint_eq(in->n_expert, 0);
	ck_assert_uint_eq(in->n_ctx,
			  in->n_ctx_train < 4096 ? in->n_ctx_train : 4096);
	engine_kv_stats(m, &kv);
	ck_assert_uint_eq(kv.type_k, IO_TYPE_F16);
	ck_assert_uint_eq(kv.type_v, IO_TYPE_F16);
	ck_assert_uint_eq(kv.k_bytes_per_token + kv.v_bytes_per_token,
			  5 * 4 * 8 * 2 * 2);
	ck_assert_int_eq(in->bos, 1);
	ck_assert_int_eq(in->eos, 2);
	ck_assert(in->add_bos);
	ck_assert_str_eq(in->tokenizer_model, "llama");
	for (i = 0; i < g->n_tensors; i++)
		params += (uint64_t)g->tensors[i].ne[0] * g->tensors[i].ne[1] *
			  g->tensors[i].ne[2] * g->tensors[i].ne[3];
	ck_assert_uint_eq(in->n_params, params);
	/* all F32: 4 bytes a parameter, about 260K of them */
	ck_assert_uint_eq(in->tensor_bytes, 4 * params);
	ck_assert_uint_gt(params, 250000);
	ck_assert_uint_lt(params, 300000);
	ck_assert_ptr_nonnull(engine_model_weights(engine_ctx_model(m)));
	model_close(m);
}
END_TEST

START_TEST(test_model_info_moe)
{
	struct engine_ctx *m = model_open("tiny-qwen3moe-bpe16k-q4km", 64);
	const struct engine_model_info *in = engine_model_info(
		engine_ctx_model(m));
	struct engine_kv_stats kv;

	/* 256 / 2 / 8 / 2 / 64 / 256 x 8 experts, top-2 */
	ck_assert_int_eq(in->arch, ENGINE_ARCH_QWEN3MOE);
	ck_assert_uint_eq(in->n_embd, 256);
	ck_assert_uint_eq(in->n_head, 8);
	ck_assert_uint_eq(in->n_head_kv, 2);
	ck_assert_uint_eq(in->head_dim, 64);
	ck_assert_uint_eq(in->n_ff, 256);
	ck_assert_uint_eq(in->n_expert, 8);
	ck_assert_uint_eq(in->n_expert_used, 2);
	ck_assert_uint_eq(in->n_vocab, 16387);
	ck_assert_uint_eq(in->n_ctx, 64);
	ck_assert(!in->add_bos);
	engine_kv_stats(m, &kv);
	ck_assert_uint_eq(kv.k_bytes_per_token + kv.v_bytes_per_token,
			  2 * 2 * 64 * 2 * 2);
	model_close(m);
}
END_TEST

START_TEST(test_model_rejects_unsupported_arch)
{
	struct mutation mu = { .arch = "gpt2" };
	struct err err = { 0 };

	ck_assert_int_eq(model_open_mutated(&mu, &err), -ENOTSUP);
	ck_assert_str_eq(
		err.msg,
		"unsupported architecture 'gpt2' (supported: llama, qwen2, qwen3, qwen3moe)");
}
END_TEST

START_TEST(test_model_rejects_missing_tensor)
{
	struct mutation mu = { .drop_tensor = "blk.3.ffn_down.weight" };
	struct err err = { 0 };

	ck_assert_int_eq(model_open_mutated(&mu, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "missing tensor 'blk.3.ffn_down.weight'"),
		      "%s", err.msg);
}
END_TEST

START_TEST(test_model_rejects_wrong_shape)
{
	struct mutation mu = { .swap_tensor = "blk.0.ffn_gate.weight" };
	struct err err = { 0 };

	ck_assert_int_eq(model_open_mutated(&mu, &err), -EINVAL);
	ck_assert_msg(
		strstr(err.msg,
		       "'blk.0.ffn_gate.weight' has shape [172, 64, 1, 1], expected [64, 172, 1]"),
		"%s", err.msg);
}
END_TEST

START_TEST(test_model_rejects_missing_key)
{
	struct mutation mu = { .drop_key = "llama.embedding_length" };
	struct err err = { 0 };

	ck_assert_int_eq(model_open_mutated(&mu, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "missing key 'llama.embedding_length'"),
		      "%s", err.msg);
}
END_TEST

START_TEST(test_model_unchanged_copy_opens)
{
	struct mutation mu = { 0 };
	struct err err = { 0 };

	/* the copier itself must not be what the tests above detect */
	ck_assert_msg(model_open_mutated(&mu, &err) == 0, "%s", err.msg);
}
END_TEST

static void forward1(struct engine_ctx *m, struct engine_seq *s,
		     const int32_t *tok, size_t n, float *logits)
{
	struct engine_batch_item it = { s, tok, n, logits };
	struct err err = { 0 };

	ck_assert_msg(engine_forward(m, &it, 1, &err) == 0, "%s", err.msg);
}

START_TEST(test_forward_errors_leave_sequences_alone)
{
	struct engine_ctx *m = model_open("stories260K", 4);
	const int32_t ok[] = { 1, 403, 407 }, bad[] = { 1, 512 };
	const int32_t five[] = { 1, 403, 407, 261, 378 };
	struct engine_seq *s = NULL, *t = NULL;
	struct engine_batch_item items[2];
	struct err err = { 0 };

	ck_assert_int_eq(engine_seq_new(m, &s, &err), 0);
	ck_assert_int_eq(engine_seq_new(m, &t, &err), 0);
	/* a token out of range in the second item: neither sequence moves */
	items[0] = (struct engine_batch_item){ s, ok, 3, NULL };
	items[1] = (struct engine_batch_item){ t, bad, 2, NULL };
	ck_assert_int_eq(engine_forward(m, items, 2, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "512"), "%s", err.msg);
	ck_assert_uint_eq(engine_seq_length(s), 0);
	ck_assert_uint_eq(engine_seq_length(t), 0);
	/* past n_ctx = 4 */
	items[0] = (struct engine_batch_item){ s, five, 5, NULL };
	ck_assert_int_eq(engine_forward(m, items, 1, &err), -ENOSPC);
	ck_assert_uint_eq(engine_seq_length(s), 0);
	forward1(m, s, ok, 3, NULL);
	ck_assert_uint_eq(engine_seq_length(s), 3);
	items[0] = (struct engine_batch_item){ s, ok, 2, NULL };
	ck_assert_int_eq(engine_forward(m, items, 1, &err), -ENOSPC);
	ck_assert_uint_eq(engine_seq_length(s), 3);
	engine_seq_free(s);
	engine_seq_free(t);
	model_close(m);
}
END_TEST

START_TEST(test_forward_truncate_and_batch_agree)
{
	struct engine_ctx *m = model_open("tiny-qwen3-bpe16k-f16", 64);
	uint32_t nv = engine_model_info(engine_ctx_model(m))->n_vocab;
	const int32_t a[] = { 9707, 11, 1879, 0, 358 }, b[] = { 40, 1079 };
	float *la = malloc(nv * sizeof(float)),
	      *lb = malloc(nv * sizeof(float));
	float *l2 = malloc(nv * sizeof(float)),
	      *l3 = malloc(nv * sizeof(float));
	struct engine_seq *s = NULL, *t = NULL;
	struct engine_batch_item items[2];
	struct err err = { 0 };

	ck_assert_int_eq(engine_seq_new(m, &s, &err), 0);
	ck_assert_int_eq(engine_seq_new(m, &t, &err), 0);
	forward1(m, s, a, 5, la);
	forward1(m, t, b, 2, lb);
	/* forget the last two positions and evaluate them again */
	engine_seq_truncate(s, 3);
	ck_assert_uint_eq(engine_seq_length(s), 3);
	forward1(m, s, a + 3, 2, l2);
	ck_assert_mem_eq(la, l2, nv * sizeof(float));
	/* both sequences in one call, from empty */
	engine_seq_truncate(s, 0);
	engine_seq_truncate(t, 0);
	items[0] = (struct engine_batch_item){ s, a, 5, l2 };
	items[1] = (struct engine_batch_item){ t, b, 2, l3 };
	ck_assert_int_eq(engine_forward(m, items, 2, &err), 0);
	ck_assert_mem_eq(la, l2, nv * sizeof(float));
	ck_assert_mem_eq(lb, l3, nv * sizeof(float));
	ck_assert_uint_eq(engine_seq_length(s), 5);
	ck_assert_uint_eq(engine_seq_length(t), 2);
	engine_seq_free(s);
	engine_seq_free(t);
	model_close(m);
	free(la);
	free(lb);
	free(l2);
	free(l3);
}
END_TEST

/* Splitting the matmuls over threads must not change a bit. */
START_TEST(test_forward_threads_agree)
{
	struct engine_ctx *m1 = model_open_threads("tiny-qwen3-bpe16k-mixq", 32,
						   1);
	struct engine_ctx *m3 = model_open_threads("tiny-qwen3-bpe16k-mixq", 32,
						   3);
	uint32_t nv = engine_model_info(engine_ctx_model(m1))->n_vocab;
	const int32_t a[] = { 9707, 11, 1879, 0, 358, 16385 };
	float *l1 = malloc(nv * sizeof(float)),
	      *l3 = malloc(nv * sizeof(float));
	struct engine_seq *s1 = NULL, *s3 = NULL;
	struct err err = { 0 };

	ck_assert_int_eq(engine_seq_new(m1, &s1, &err), 0);
	ck_assert_int_eq(engine_seq_new(m3, &s3, &err), 0);
	forward1(m1, s1, a, 6, l1);
	forward1(m3, s3, a, 6, l3);
	ck_assert_mem_eq(l1, l3, nv * sizeof(float));
	engine_seq_free(s1);
	engine_seq_free(s3);
	model_close(m1);
	model_close(m3);
	free(l1);
	free(l3);
}
END_TEST

/*
 * Attention past 256 positions is cut into fixed chunks of 256
 * (engine/cpu/attention.h): one thread walks a head's chunks in turn,
 * more take a chunk a task. A token at position 600 (3 chunks), after a
 * prompt, gives the same bits with 1, 2 and 3 threads; llama.cpp's
 * split by the thread count did not.
 */
START_TEST(test_forward_attention_threads)
{
	const uint32_t threads[] = { 1, 2, 3 }, n = 601;
	int32_t *tok = malloc(n * sizeof(*tok));
	float *l[3];
	uint32_t nv = 0, i, t;

	for (i = 0; i < n; i++)
		tok[i] = (int32_t)(i * 2654435761u % 15000);
	for (t = 0; t < 3; t++) {
		struct engine_ctx *m = model_open_threads(
			"tiny-qwen3-bpe16k-mixq", 640, threads[t]);
		struct engine_seq *s = NULL;
		struct err err = { 0 };

		nv = engine_model_info(engine_ctx_model(m))->n_vocab;
		l[t] = malloc(nv * sizeof(float));
		ck_assert_int_eq(engine_seq_new(m, &s, &err), 0);
		forward1(m, s, tok, n - 1, NULL);
		forward1(m, s, tok + n - 1, 1, l[t]);
		engine_seq_free(s);
		model_close(m);
	}
	for (t = 1; t < 3; t++)
		ck_assert_msg(!memcmp(l[0], l[t], nv * sizeof(float)),
			      "%u threads: other logits than 1 thread's",
			      threads[t]);
	for (t = 0; t < 3; t++)
		free(l[t]);
	free(tok);
}
END_TEST

/*
 * The CPU backend packs mixq's Q8_0, Q4_K and Q6_K matrices into panels at load
 * (engine/cpu/gemm.h): every tensor still reads back as the file's bytes,
 * and the logits of a prompt, then of one token at a time, are the bits
 * of the same model left as the file has it.
 */
START_TEST(test_model_packed_weights)
{
	struct engine_ctx *m = model_open_packed("tiny-qwen3-bpe16k-mixq",
						 false);
	struct engine_ctx *f = model_open_packed("tiny-qwen3-bpe16k-mixq",
						 true);
	const struct io_gguf *g = engine_model_gguf(engine_ctx_model(m));
	uint32_t nv = engine_model_info(engine_ctx_model(m))->n_vocab,
		 packed = 0;
	const int32_t prompt[] = { 9707, 11, 1879, 0, 358, 16385 };
	float *lm = malloc(nv * sizeof(float)),
	      *lf = malloc(nv * sizeof(float));
	struct engine_seq *sm = NULL, *sf = NULL;
	struct err err = { 0 };
	char path[1200];
	uint64_t i;
	int fd, k;

	model_path(path, sizeof(path), "tiny-qwen3-bpe16k-mixq");
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];
		uint8_t *want = malloc(t->bytes), *got = malloc(t->bytes);

		ck_assert_int_eq(pread(fd, want, t->bytes, (off_t)t->offset),
				 (ssize_t)t->bytes);
		engine_tensor_read(engine_ctx_model(m), i, 0, t->bytes, got);
		ck_assert_msg(memcmp(want, got, t->bytes) == 0, "%s", t->name);
		/* from inside a row, across rows */
		if (t->bytes > 1000 + 333) {
			engine_tensor_read(engine_ctx_model(m), i, 1000, 333,
					   got);
			ck_assert(memcmp(want + 1000, got, 333) == 0);
		}
		packed += io_weights_placement(
				  engine_model_weights(engine_ctx_model(m)), i)
				  ->layout != 0;
		ck_assert_uint_eq(
			io_weights_placement(
				engine_model_weights(engine_ctx_model(f)), i)
				->layout,
			0);
		free(want);
		free(got);
	}
	close(fd);
	/*
	 * blk.0's ffn_gate and ffn_up (Q4_K), attn_v and ffn_down (Q6_K),
	 * blk.0's attn_k and blk.1's attn_v (Q8_0), at every level; not
	 * output (16,387 rows) nor token_embd (Q4_K read by get_rows, whose
	 * one-token order is the plain one)
	 */
	ck_assert_uint_eq(packed, 6);
	ck_assert_int_eq(engine_seq_new(m, &sm, &err), 0);
	ck_assert_int_eq(engine_seq_new(f, &sf, &err), 0);
	forward1(m, sm, prompt, 6, lm);
	forward1(f, sf, prompt, 6, lf);
	ck_assert_mem_eq(lm, lf, nv * sizeof(float));
	for (k = 0; k < 4; k++) {
		forward1(m, sm, &prompt[k], 1, lm);
		forward1(f, sf, &prompt[k], 1, lf);
		ck_assert_mem_eq(lm, lf, nv * sizeof(float));
	}
	engine_seq_free(sm);
	engine_seq_free(sf);
	model_close(m);
	model_close(f);
	free(lm);
	free(lf);
}
END_TEST

/*
 * Several contexts on one model (llama.cpp's llama_model shared by
 * llama_contexts): each with its own threads, K/V types and sequences,
 * their passes interleaved, each gives the logits of a model of its own;
 * a sequence of one context is refused by another.
 */
START_TEST(test_model_contexts_share_model)
{
	struct engine_model_options opt = { .n_ctx = 64 };
	struct engine_ctx_options c1 = { .threads = 1 };
	struct engine_ctx_options c2 = { .threads = 2,
					 .kv_type_k = "q8_0",
					 .kv_type_v = "q8_0" };
	struct engine_ctx *alone1 = model_open_opt("tiny-qwen3-bpe16k-mixq",
						   &opt, &c1);
	struct engine_ctx *alone2 = model_open_opt("tiny-qwen3-bpe16k-mixq",
						   &opt, &c2);
	struct engine_model *m = engine_ctx_model(alone1);
	const uint32_t nv = engine_model_info(m)->n_vocab;
	const int32_t prompt[] = { 9707, 11, 1879, 0, 358, 16385 };
	struct engine_ctx *a = NULL, *b = NULL;
	struct engine_seq *sa, *sb, *s1, *s2;
	struct engine_kv_stats st;
	float *la = malloc(nv * sizeof(float)),
	      *lb = malloc(nv * sizeof(float));
	float *l1 = malloc(nv * sizeof(float)),
	      *l2 = malloc(nv * sizeof(float));
	struct err err = { 0 };
	int k;

	ck_assert_int_eq(engine_ctx_new(&a, m, &c1, &err), 0);
	ck_assert_int_eq(engine_ctx_new(&b, m, &c2, &err), 0);
	ck_assert_ptr_eq(engine_ctx_model(a), engine_ctx_model(b));
	engine_kv_stats(b, &st);
	ck_assert_uint_eq(st.type_k, IO_TYPE_Q8_0);
	engine_kv_stats(a, &st);
	ck_assert_uint_eq(st.type_k, IO_TYPE_F16);
	ck_assert_int_eq(engine_seq_new(a, &sa, &err), 0);
	ck_assert_int_eq(engine_seq_new(b, &sb, &err), 0);
	ck_assert_int_eq(engine_seq_new(alone1, &s1, &err), 0);
	ck_assert_int_eq(engine_seq_new(alone2, &s2, &err), 0);
	ck_assert_ptr_eq(engine_seq_ctx(sa), a);
	{
		struct engine_batch_item it = { sb, prompt, 6, lb };

		ck_assert_int_eq(engine_forward(a, &it, 1, &err), -EINVAL);
		ck_assert_uint_eq(engine_seq_length(sb), 0);
	}
	forward1(a, sa, prompt, 6, la);
	forward1(b, sb, prompt, 6, lb);
	forward1(alone1, s1, prompt, 6, l1);
	forward1(alone2, s2, prompt, 6, l2);
	ck_assert_mem_eq(la, l1, nv * sizeof(float));
	ck_assert_mem_eq(lb, l2, nv * sizeof(float));
	for (k = 0; k < 3; k++) {
		forward1(b, sb, &prompt[k], 1, lb);
		forward1(a, sa, &prompt[k], 1, la);
		forward1(alone1, s1, &prompt[k], 1, l1);
		forward1(alone2, s2, &prompt[k], 1, l2);
		ck_assert_mem_eq(la, l1, nv * sizeof(float));
		ck_assert_mem_eq(lb, l2, nv * sizeof(float));
	}
	engine_seq_free(sa);
	engine_seq_free(sb);
	engine_seq_free(s1);
	engine_seq_free(s2);
	engine_ctx_free(a);
	engine_ctx_free(b);
	model_close(alone1);
	model_close(alone2);
	free(la);
	free(lb);
	free(l1);
	free(l2);
}
END_TEST

static int model_setup(void)
{
	if (check_need_model("stories260K"))
		return CHECK_SKIP;
	if (!mkdtemp(tmp_dir)) {
		perror("mkdtemp");
		return 1;
	}
	return 0;
}

static void model_tests(TCase *tc)
{
	tcase_add_test(tc, test_model_info_stories);
	tcase_add_test(tc, test_model_info_moe);
	tcase_add_test(tc, test_model_rejects_unsupported_arch);
	tcase_add_test(tc, test_model_rejects_missing_tensor);
	tcase_add_test(tc, test_model_rejects_wrong_shape);
	tcase_add_test(tc, test_model_rejects_missing_key);
	tcase_add_test(tc, test_model_unchanged_copy_opens);
	tcase_add_test(tc, test_forward_errors_leave_sequences_alone);
	tcase_add_test(tc, test_forward_truncate_and_batch_agree);
	tcase_add_test(tc, test_forward_threads_agree);
	tcase_add_test(tc, test_forward_attention_threads);
	tcase_add_test(tc, test_model_packed_weights);
	tcase_add_test(tc, test_model_contexts_share_model);
}

static void model_teardown(void)
{
	rmdir(tmp_dir);
}

const struct check_main check_main = {
	.name = "model",
	.timeout = 120,
	.setup = model_setup,
	.add_tests = model_tests,
	.teardown = model_teardown,
};
