// SPDX-License-Identifier: MIT
/*
 * The CPU levels of engine/cpu/isa.h give the same logits, bit for bit:
 * every shared model opened at each level this CPU has (its matrices
 * packed as that level packs them), then a prompt in one pass (the GEMM,
 * the tiled attention), three one-token steps, one pass of three
 * sequences with 4, 1 and 2 tokens, and one of six sequences of one token
 * (Q8_0's GEMM from five), on two threads; every float of every logits
 * row compared with the scalar level's. And LLMFS_CPU's choice:
 * cpu_isa_choose refuses a name no level has.
 *
 *   make build/tests/engine/test_isa && build/tests/engine/test_isa
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/cpu/isa.h"
#include "../../engine/engine.h"
#include "../common/check_main.h"

static const char *const isa_models[] = {
	"stories260K",
	"llama-2-tiny-random",
	"tiny-llama-spm32k-kquant",
	"tiny-qwen2-bpe152k-legacyq",
	"tiny-qwen3-bpe16k-f16",
	"tiny-qwen3-bpe16k-mixq",
	"tiny-qwen3moe-bpe16k-q4km",
};
#define ISA_MODELS ((int)(sizeof(isa_models) / sizeof(isa_models[0])))

/* logits rows one run records: 1 + 3 + 3 + 6 */
#define ISA_ROWS 13
#define ISA_SEQS 7

static const char isa_text[] =
	"Once upon a time, there was a little dog named Max. He liked to "
	"run in the park with his friends, and every evening he came home.";

/* The model's logits through the passes above, at the running level. */
static float *isa_run(const char *stem, uint32_t *n_vocab)
{
	struct engine_model_options opt = { .n_ctx = 256, .threads = 2 };
	struct engine_ctx_options copt = { .threads = 2 };
	struct engine_seq *s[ISA_SEQS] = { 0 };
	struct engine_batch_item it[6];
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;
	struct err err = { 0 };
	int32_t *tok = NULL;
	size_t n_tok = 0, nv;
	float *out;
	char path[1200];
	int i, row = 0;

	check_shared_model(path, sizeof(path), stem);
	ck_assert_msg(engine_model_open(&m, path, &opt, &err) == 0, "%s: %s",
		      stem, err.msg);
	ck_assert_msg(engine_ctx_new(&ctx, m, &copt, &err) == 0, "%s: %s", stem,
		      err.msg);
	nv = engine_model_info(m)->n_vocab;
	*n_vocab = (uint32_t)nv;
	out = malloc(sizeof(float) * nv * ISA_ROWS);
	ck_assert_ptr_nonnull(out);
	ck_assert_msg(engine_tokenize(m, isa_text, strlen(isa_text), true,
				      false, &tok, &n_tok, &err) == 0,
		      "%s", err.msg);
	ck_assert_uint_gt(n_tok, 12);
	for (i = 0; i < ISA_SEQS; i++)
		ck_assert_msg(engine_seq_new(ctx, &s[i], &err) == 0, "%s",
			      err.msg);
	/* a prompt in one pass */
	it[0] = (struct engine_batch_item){ s[0], tok, n_tok - 3,
					    out + nv * row++ };
	ck_assert_msg(engine_forward(ctx, it, 1, &err) == 0, "%s", err.msg);
	/* three one-token steps */
	for (i = 0; i < 3; i++) {
		it[0] = (struct engine_batch_item){ s[0], tok + n_tok - 3 + i,
						    1, out + nv * row++ };
		ck_assert_msg(engine_forward(ctx, it, 1, &err) == 0, "%s",
			      err.msg);
	}
	/* three sequences: 4, 1 and 2 tokens */
	for (i = 0; i < 3; i++)
		it[i] = (struct engine_batch_item){ s[1 + i], tok + i,
						    i == 0 ? 4 : (size_t)i,
						    out + nv * row++ };
	ck_assert_msg(engine_forward(ctx, it, 3, &err) == 0, "%s", err.msg);
	/* six sequences of one token */
	for (i = 0; i < 6; i++)
		it[i] = (struct engine_batch_item){ s[1 + i], tok + 5 + i, 1,
						    out + nv * row++ };
	ck_assert_msg(engine_forward(ctx, it, 6, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(row, ISA_ROWS);
	for (i = 0; i < ISA_SEQS; i++)
		engine_seq_free(s[i]);
	free(tok);
	engine_ctx_free(ctx);
	engine_model_free(m);
	return out;
}

START_TEST(test_isa_levels_same_logits)
{
	const char *stem = isa_models[_i];
	const struct cpu_isa *scalar = cpu_isa_named("scalar");
	uint32_t nv, nv2;
	float *want, *got;
	unsigned l;

	if (check_need_model(stem))
		return;
	cpu_isa_use(scalar);
	want = isa_run(stem, &nv);
	for (l = 0; l < cpu_isa_count; l++) {
		const struct cpu_isa *isa = cpu_isa_levels[l];
		size_t i;

		if (isa == scalar || !isa->usable())
			continue;
		cpu_isa_use(isa);
		got = isa_run(stem, &nv2);
		ck_assert_uint_eq(nv, nv2);
		for (i = 0; i < (size_t)nv * ISA_ROWS; i++)
			ck_assert_msg(!memcmp(&got[i], &want[i], 4),
				      "%s: %s row %zu logit %zu: %a, scalar %a",
				      stem, isa->name, i / nv, i % nv, got[i],
				      want[i]);
		printf("%s: %s = scalar, %u logits x %d rows\n", stem,
		       isa->name, nv, ISA_ROWS);
		free(got);
	}
	free(want);
}
END_TEST

START_TEST(test_isa_choose)
{
	const struct cpu_isa *isa = NULL;
	struct err err = { 0 };
	unsigned l;

	ck_assert_int_eq(cpu_isa_choose("sse9", &isa, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "LLMFS_CPU=sse9") &&
			      strstr(err.msg, "scalar"),
		      "%s", err.msg);
	ck_assert_ptr_null(isa);
	/* unset or empty: the best level this CPU has */
	ck_assert_int_eq(cpu_isa_choose(NULL, &isa, &err), 0);
	ck_assert(isa->usable());
	ck_assert_ptr_eq(isa,
			 cpu_isa_levels[0]->usable() ? cpu_isa_levels[0] : isa);
	ck_assert_int_eq(cpu_isa_choose("", &isa, &err), 0);
	for (l = 0; l < cpu_isa_count; l++) {
		const struct cpu_isa *want = cpu_isa_levels[l];
		int ret = cpu_isa_choose(want->name, &isa, &err);

		if (want->usable()) {
			ck_assert_int_eq(ret, 0);
			ck_assert_ptr_eq(isa, want);
		} else {
			ck_assert_int_eq(ret, -ENOTSUP);
			ck_assert_msg(strstr(err.msg, want->features), "%s",
				      err.msg);
		}
	}
}
END_TEST

static void isa_tests(TCase *tc)
{
	tcase_add_test(tc, test_isa_choose);
	tcase_add_loop_test(tc, test_isa_levels_same_logits, 0, ISA_MODELS);
}

/* A level this CPU lacks was not compared: not a whole pass. */
static int isa_left_out(void)
{
	unsigned i;
	int missing = 0;

	for (i = 0; i < cpu_isa_count; i++)
		if (!cpu_isa_levels[i]->usable()) {
			printf("test_isa: this CPU lacks %s: the %s level was not compared\n",
			       cpu_isa_levels[i]->features,
			       cpu_isa_levels[i]->name);
			missing++;
		}
	return missing ? CHECK_SKIP : 0;
}

const struct check_main check_main = {
	.name = "isa",
	.timeout = 600,
	.add_tests = isa_tests,
	.left_out = isa_left_out,
};
