/* SPDX-License-Identifier: MIT */
/*
 * The placement file: its text adds up to the model's tensors, commands
 * move tensors between devices, refusals move nothing, and a model whose
 * tensors went cpu -> numa0 -> cpu computes the very same logits.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/context.h"
#include "../../engine/engine.h"
#include "../../engine/kv.h"
#include "../common/check_main.h"

/* A one-thread context on a shared model loaded with these devices. */
static struct engine_ctx *open_model_on(const char *file,
					const struct io_device_set *devices)
{
	struct engine_model_options opt = { .n_ctx = 64 };
	struct engine_ctx_options copt = { .threads = 1 };
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;
	struct err err = { 0 };
	char path[4096];

	check_shared_path(path, sizeof(path), "models/%s", file);
	opt.load.devices = devices;
	ck_assert_msg(engine_model_open(&m, path, &opt, &err) == 0, "%s",
		      err.msg);
	ck_assert_msg(engine_ctx_new(&ctx, m, &copt, &err) == 0, "%s", err.msg);
	return ctx;
}

/* Free a context of open_model_on and its model. */
static void place_close(struct engine_ctx *ctx)
{
	struct engine_model *m = engine_ctx_model(ctx);

	engine_ctx_free(ctx);
	engine_model_free(m);
}

static struct engine_ctx *open_model(const char *file)
{
	return open_model_on(file, NULL);
}

/* The placement text, malloc'ed. */
static char *text_of(struct engine_ctx *m)
{
	struct err err = { 0 };
	char *text = NULL;
	size_t len = 0;

	ck_assert_int_eq(engine_placement_format(m, &text, &len, &err), 0);
	return text;
}

/* The logits after a short prompt, from a fresh sequence. */
static float *logits_of(struct engine_ctx *m)
{
	uint32_t n_vocab = engine_model_info(engine_ctx_model(m))->n_vocab;
	float *logits = malloc(n_vocab * sizeof(*logits));
	struct engine_batch_item item = { 0 };
	struct engine_seq *s = NULL;
	struct err err = { 0 };
	int32_t *tok = NULL;
	size_t n_tok = 0;

	ck_assert_ptr_nonnull(logits);
	ck_assert_int_eq(engine_tokenize(engine_ctx_model(m),
					 "Once upon a time", 16, true, false,
					 &tok, &n_tok, &err),
			 0);
	ck_assert_int_eq(engine_seq_new(m, &s, &err), 0);
	item.seq = s;
	item.tokens = tok;
	item.n_tokens = n_tok;
	item.logits = logits;
	ck_assert_msg(engine_forward(m, &item, 1, &err) == 0, "%s", err.msg);
	engine_seq_free(s);
	free(tok);
	return logits;
}

/* Count tensors on device and check the text against the file's tensors. */
static uint64_t check_text(struct engine_ctx *m, const char *device)
{
	const struct io_gguf *g = engine_model_gguf(engine_ctx_model(m));
	uint64_t i, sum = 0, on = 0, tensors, bytes;
	char *text = NULL, *line, *save = NULL;
	struct err err = { 0 };
	uint32_t layers = 0, plans = 0;
	size_t len = 0;
	bool total = false;

	ck_assert_int_eq(engine_placement_format(m, &text, &len, &err), 0);
	ck_assert_uint_eq(strlen(text), len);
	line = strtok_r(text, "\n", &save);
	for (i = 0; i < g->n_tensors; i++, line = strtok_r(NULL, "\n", &save)) {
		char name[200], type[16], shape[64], dev[16];
		uint64_t b;

		ck_assert_ptr_nonnull(line);
		ck_assert_int_eq(sscanf(line,
					"%199s %15s %63s %" SCNu64 " %15s",
					name, type, shape, &b, dev),
				 5);
		ck_assert_str_eq(name, g->tensors[i].name);
		ck_assert_str_eq(type, io_type_info(g->tensors[i].type)->name);
		ck_assert_uint_eq(b, g->tensors[i].bytes);
		sum += b;
		on += strcmp(dev, device) == 0;
	}
	for (; line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "plan ", 5) == 0)
			plans++;
		if (strncmp(line, "layer blk.", 10) == 0)
			layers++;
		if (sscanf(line, "total %" SCNu64 " tensors %" SCNu64 " bytes",
			   &tensors, &bytes) == 2) {
			ck_assert_uint_eq(tensors, g->n_tensors);
			ck_assert_uint_eq(bytes, sum);
			total = true;
		}
	}
	ck_assert_uint_eq(sum, g->tensor_bytes);
	ck_assert_uint_eq(layers,
			  engine_model_info(engine_ctx_model(m))->n_layer);
	ck_assert(total);
	ck_assert_uint_eq(plans, 1);
	free(text);
	return on;
}

static const char *device_of(struct engine_ctx *m, const char *name)
{
	const struct io_gguf *g = engine_model_gguf(engine_ctx_model(m));
	uint64_t i;

	for (i = 0; i < g->n_tensors; i++)
		if (strcmp(g->tensors[i].name, name) == 0)
			return io_weights_placement(
				       engine_model_weights(
					       engine_ctx_model(m)),
				       i)
				->device;
	ck_abort_msg("no tensor %s", name);
	return NULL;
}

START_TEST(test_placement_text_adds_up)
{
	struct engine_ctx *m = open_model("stories260K.gguf");
	uint64_t n = engine_model_gguf(engine_ctx_model(m))->n_tensors;

	ck_assert_uint_eq(check_text(m, "cpu"), n);
	place_close(m);
}
END_TEST

START_TEST(test_placement_refusals_move_nothing)
{
	static const char *const bad[] = {
		"",
		"auto now",
		"blk.0",
		"blk.0 cpu extra",
		"blk.3-1 cpu",
		"blk.0-99 cpu",
		"blk.x cpu",
		"nosuchtensor cpu",
		"experts cpu",
		"blk.*.ffn_*_exps cpu",
	};
	struct engine_ctx *m = open_model("stories260K.gguf");
	uint64_t n = engine_model_gguf(engine_ctx_model(m))->n_tensors;
	struct err err = { 0 };
	char list[128], want[200];
	size_t i;

	io_devices_list(list, sizeof(list));
	snprintf(want, sizeof(want), "no such device gpu0 (devices: %s)", list);
	ck_assert_int_eq(engine_placement_apply(m, "blk.0-1 gpu0", &err),
			 -EINVAL);
	ck_assert_str_eq(err.msg, want);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err.msg[0] = '\0';
		ck_assert_msg(engine_placement_apply(m, bad[i], &err) ==
				      -EINVAL,
			      "'%s' accepted", bad[i]);
		ck_assert_msg(err.msg[0] && !strchr(err.msg, '\n'), "'%s': %s",
			      bad[i], err.msg);
	}
	ck_assert_uint_eq(check_text(m, "cpu"), n);
	place_close(m);
}
END_TEST

/* cpu -> numa0 -> cpu, logits bit-identical at each step. */
START_TEST(test_placement_round_trip_same_logits)
{
	struct engine_ctx *m = open_model("tiny-qwen3moe-bpe16k-q4km.gguf");
	uint32_t n_vocab = engine_model_info(engine_ctx_model(m))->n_vocab;
	uint64_t n = engine_model_gguf(engine_ctx_model(m))->n_tensors, moved;
	float *before = logits_of(m), *after;
	struct err err = { 0 };

	ck_assert_msg(engine_placement_apply(m, "blk.0-1 numa0", &err) == 0,
		      "%s", err.msg);
	ck_assert_str_eq(device_of(m, "blk.0.attn_q.weight"), "numa0");
	ck_assert_str_eq(device_of(m, "blk.1.ffn_down_exps.weight"), "numa0");
	ck_assert_str_eq(device_of(m, "token_embd.weight"), "cpu");
	moved = check_text(m, "numa0");
	ck_assert_uint_gt(moved, 0);
	ck_assert_int_eq(engine_placement_apply(m, "experts numa0", &err), 0);
	ck_assert_int_eq(engine_placement_apply(m, "output numa0", &err), 0);
	ck_assert_str_eq(device_of(m, "output_norm.weight"), "numa0");
	ck_assert_uint_gt(check_text(m, "numa0"), moved);
	after = logits_of(m);
	ck_assert_mem_eq(before, after, n_vocab * sizeof(float));
	free(after);
	ck_assert_int_eq(engine_placement_apply(m, "all numa0", &err), 0);
	ck_assert_uint_eq(check_text(m, "numa0"), n);
	/* a shell pattern: the experts alone; then all but them */
	ck_assert_int_eq(
		engine_placement_apply(m, "blk.*.ffn_*_exps cpu", &err), 0);
	ck_assert_str_eq(device_of(m, "blk.1.ffn_gate_exps.weight"), "cpu");
	ck_assert_str_eq(device_of(m, "blk.1.ffn_gate_inp.weight"), "numa0");
	ck_assert_int_eq(engine_placement_apply(m, "all-but-experts cpu", &err),
			 0);
	ck_assert_uint_eq(check_text(m, "cpu"), n);
	ck_assert_int_eq(engine_placement_apply(m, "auto", &err), 0);
	ck_assert_uint_eq(check_text(m, "cpu"), n);
	after = logits_of(m);
	ck_assert_mem_eq(before, after, n_vocab * sizeof(float));
	free(after);
	free(before);
	place_close(m);
}
END_TEST

/* Devices, the plan and an estimate for each alternative it considered. */
START_TEST(test_placement_shows_devices_and_plan)
{
	struct engine_ctx *m = open_model("stories260K.gguf");
	char *text = text_of(m), *p;
	double toks;

	ck_assert_ptr_nonnull(strstr(text, "\nmemory cpu total "));
	ck_assert_ptr_nonnull(strstr(text, " bw "));
	ck_assert_ptr_nonnull(strstr(text, "GB/s measured\n"));
	ck_assert_ptr_null(strstr(text, "memory gpu"));
	p = strstr(text, "\nplan all-cpu gpu - host cpu ctx 64\n");
	ck_assert_msg(p != NULL, "%s", text);
	p = strstr(p, "\nestimate all-cpu ");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(
		sscanf(p, "\nestimate all-cpu %lf chosen: no GPU", &toks), 1);
	ck_assert(toks > 0);
	free(text);
	place_close(m);
}
END_TEST

/*
 * Which of the planner's alternatives the placement is (a device with
 * memory of its own, ref0, stands for the GPU), and a decode speed noted
 * with it shown beside that alternative's estimate.
 */
START_TEST(test_placement_plan_kind_and_measured)
{
	struct engine_ctx *m;
	struct err err = { 0 };
	char text[4096], want[96];
	double est = 0;
	char *p;

	setenv("LLMFS_REF_DEVICE", "1", 1);
	m = open_model("stories260K.gguf");
	ck_assert_int_eq(engine_placement_plan_kind(m), ENGINE_PLAN_ALL_CPU);
	ck_assert_int_eq(engine_placement_apply(m, "blk.0-1 ref0", &err), 0);
	ck_assert_int_eq(engine_placement_plan_kind(m), ENGINE_PLAN_SPLIT);
	ck_assert_int_eq(engine_placement_apply(m, "blk.3 ref0", &err), 0);
	ck_assert_int_eq(engine_placement_plan_kind(m), ENGINE_PLAN_N);
	ck_assert_int_eq(engine_placement_apply(m, "all ref0", &err), 0);
	ck_assert_int_eq(engine_placement_plan_kind(m), ENGINE_PLAN_ALL_GPU);
	ck_assert_int_eq(engine_placement_apply(m, "output cpu", &err), 0);
	ck_assert_int_eq(engine_placement_plan_kind(m), ENGINE_PLAN_SPLIT);
	ck_assert_int_eq(engine_placement_apply(m, "all cpu", &err), 0);
	ck_assert_int_eq(engine_placement_plan_kind(m), ENGINE_PLAN_ALL_CPU);
	ck_assert_int_eq(
		engine_placement_plan_text(m, text, sizeof(text), true, &err),
		0);
	ck_assert_ptr_null(strstr(text, "\nmeasured "));
	engine_placement_note_decode(m, 123.4);
	ck_assert_int_eq(
		engine_placement_plan_text(m, text, sizeof(text), true, &err),
		0);
	p = strstr(text, "\nestimate all-cpu ");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sscanf(p, "\nestimate all-cpu %lf", &est), 1);
	snprintf(want, sizeof(want),
		 "\nmeasured all-cpu 123.4 estimate %.1f ratio %.2f\n", est,
		 123.4 / est);
	ck_assert_msg(strstr(text, want), "%s", text);
	/*
	 * the host's step from the speed noted: all-cpu's estimate is it;
	 * no GPU in the plan: no GPU costs line, and no alternative to pick
	 */
	ck_assert_msg(est > 123.3 && est < 123.5, "%s", text);
	ck_assert_ptr_nonnull(strstr(text, "\ncosts cpu step "));
	ck_assert_ptr_nonnull(strstr(text, "ms measured\n"));
	ck_assert_ptr_null(strstr(text, "\ncosts gpu"));
	ck_assert_int_eq(engine_placement_apply(m, "auto split", &err),
			 -EINVAL);
	ck_assert_str_eq(
		err.msg,
		"no alternative 'split' in this model's plan (see the estimate lines of placement)");
	ck_assert_int_eq(engine_placement_apply(m, "auto all-cpu", &err), 0);
	unsetenv("LLMFS_REF_DEVICE");
	place_close(m);
}
END_TEST

/*
 * Simulated GPUs are listed and planned for; every command that would put
 * weights on one is refused with ENODEV, and nothing moves.
 */
START_TEST(test_placement_simulated_gpu_refused)
{
	static const char *const to_gpu[] = {
		"blk.0-1 gpu0",
		"output gpu0",
		"all gpu0",
		"experts gpu0",
		"token_embd.weight gpu0",
	};
	struct engine_ctx *m;
	struct io_device_set set;
	struct err err = { 0 };
	uint64_t n;
	char *text;

	ck_assert_int_eq(
		io_device_set_read(
			&set,
			"gpu0:vram=8G,bw=272G,pcie=25G,cc=8.9,model=RTX-4060,cpu:bw=60G",
			&err),
		0);
	m = open_model_on("tiny-qwen3moe-bpe16k-q4km.gguf", &set);
	n = engine_model_gguf(engine_ctx_model(m))->n_tensors;
	text = text_of(m);
	ck_assert_ptr_nonnull(strstr(
		text,
		"\nmemory gpu0 total 8589934592 free 8589934592 node - bw 272.0GB/s given pcie 25.0GB/s simulated\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nmemory cpu total "));
	ck_assert_ptr_nonnull(strstr(text, "bw 60.0GB/s given\n"));
	ck_assert_msg(strstr(text, "\nplan all-gpu gpu gpu0 host - ctx 64\n"),
		      "%s", text);
	ck_assert_ptr_nonnull(strstr(text, "\nestimate all-gpu "));
	ck_assert_ptr_nonnull(strstr(text, "\nestimate experts-in-ram "));
	ck_assert_ptr_nonnull(strstr(text, "\nestimate split "));
	ck_assert_ptr_nonnull(strstr(text, "\nestimate all-cpu "));
	free(text);
	for (size_t i = 0; i < sizeof(to_gpu) / sizeof(to_gpu[0]); i++) {
		err.msg[0] = '\0';
		ck_assert_msg(engine_placement_apply(m, to_gpu[i], &err) ==
				      -ENODEV,
			      "'%s' not refused", to_gpu[i]);
		ck_assert_str_eq(
			err.msg,
			"gpu0 is a simulated GPU (--devices): this build has no CUDA backend to compute on it");
	}
	ck_assert_int_eq(engine_placement_apply(m, "auto", &err), -ENODEV);
	ck_assert_str_eq(
		err.msg,
		"the plan (all-gpu) puts weights on gpu0, and gpu0 is a simulated GPU (--devices): this build has no CUDA backend to compute on it");
	ck_assert_uint_eq(check_text(m, "cpu"), n);
	/* Host devices still work beside it. */
	ck_assert_int_eq(engine_placement_apply(m, "experts numa0", &err), 0);
	ck_assert_int_eq(engine_placement_apply(m, "all cpu", &err), 0);
	ck_assert_uint_eq(check_text(m, "cpu"), n);
	place_close(m);
}
END_TEST

/*
 * The memory policy of the page at p: MPOL_BIND to node 0 (and no other)
 * returns 0, the default policy 1, anything else 2.
 */
static int policy_of(const void *p)
{
	unsigned long mask[16] = { 0 };
	int mode = -1;

	ck_assert_int_eq(get_mempolicy(&mode, mask, sizeof(mask) * 8, (void *)p,
				       MPOL_F_ADDR),
			 0);
	if (mode == MPOL_BIND && mask[0] == 1)
		return 0;
	return mode == MPOL_DEFAULT ? 1 : 2;
}

/*
 * `kv blk.1 numa0`: layer 1's KV cache in RAM on node 0, its blocks bound
 * there (MPOL_BIND, as get_mempolicy reads the pages back), the other
 * layers' in the home backend's memory (the default policy); `kv blk.1
 * layer` gives it back. The logits stay the CPU's bits.
 */
START_TEST(test_placement_kv_on_a_node)
{
	struct engine_ctx *m = open_model("stories260K.gguf");
	float *before = logits_of(m), *after;
	uint32_t n_vocab = engine_model_info(engine_ctx_model(m))->n_vocab;
	struct engine_seq *s = NULL;
	struct engine_kv_slot slot;
	struct err err = { 0 };
	char *text;

	ck_assert_int_eq(engine_placement_apply(m, "kv blk.1 numa0", &err), 0);
	text = text_of(m);
	ck_assert_msg(strstr(text, "\nkv blk.1 numa0\n"), "%s", text);
	free(text);
	after = logits_of(m);
	ck_assert_mem_eq(before, after, n_vocab * sizeof(float));
	free(after);
	ck_assert_int_eq(engine_kv_pool_layer_node(m->kv, 1), 0);
	ck_assert_int_eq(engine_kv_pool_layer_node(m->kv, 0), -1);
	ck_assert_int_eq(engine_seq_new(m, &s, &err), 0);
	ck_assert_int_eq(engine_seq_grow(s, 1, &err), 0);
	engine_kv_slot(s, 1, 0, &slot);
	ck_assert_int_eq(policy_of(slot.k), 0);
	engine_kv_slot(s, 0, 0, &slot);
	ck_assert_int_eq(policy_of(slot.k), 1);
	engine_seq_free(s);
	/* back with its layer: unbound memory again */
	ck_assert_int_eq(engine_placement_apply(m, "kv blk.1 layer", &err), 0);
	text = text_of(m);
	ck_assert_ptr_null(strstr(text, "\nkv blk."));
	free(text);
	after = logits_of(m);
	ck_assert_mem_eq(before, after, n_vocab * sizeof(float));
	free(after);
	ck_assert_int_eq(engine_kv_pool_layer_node(m->kv, 1), -1);
	ck_assert_int_eq(engine_seq_new(m, &s, &err), 0);
	ck_assert_int_eq(engine_seq_grow(s, 1, &err), 0);
	engine_kv_slot(s, 1, 0, &slot);
	ck_assert_int_eq(policy_of(slot.k), 1);
	engine_seq_free(s);
	free(before);
	place_close(m);
}
END_TEST

static Suite *placement_suite(void)
{
	Suite *s = suite_create("engine_placement");
	TCase *tc = tcase_create("placement");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_placement_text_adds_up);
	tcase_add_test(tc, test_placement_refusals_move_nothing);
	tcase_add_test(tc, test_placement_round_trip_same_logits);
	tcase_add_test(tc, test_placement_shows_devices_and_plan);
	tcase_add_test(tc, test_placement_simulated_gpu_refused);
	tcase_add_test(tc, test_placement_plan_kind_and_measured);
	tcase_add_test(tc, test_placement_kv_on_a_node);
	suite_add_tcase(s, tc);
	return s;
}

const struct check_main check_main = { .suite = placement_suite };
