// SPDX-License-Identifier: MIT
/*
 * Loading straight into a device's memory: a model opened with
 * load.defer, placed on a device with memory of its own, then loaded
 * (engine_model_load), reads those tensors from the file into the
 * device through the staging ring, never into host memory. Against the
 * same model loaded on the host and then moved (engine_weights_move):
 *   - the same logits, bit for bit, on the same device;
 *   - the weights read back (engine_tensor_read: the mount's weights/
 *     files) are the file's bytes;
 *   - moves back to the CPU and again to the device between the steps
 *     of a generation change no token;
 *   - a file that ends early fails the load with a message naming it,
 *     and everything is freed (make SANITIZE=1 runs this);
 *   - a device without room (a VRAM cap) refuses the placement with
 *     ENOSPC before anything is read, and the model loads on the host.
 *
 * The device is ref0 (the reference backend, LLMFS_REF_DEVICE=1) unless
 * LD_DEVICE names a GPU of the CUDA module (tests/engine/gpu0.sh: the
 * simulator's gpu0).
 *
 *   make build/tests/engine/test_load_device && \
 *       build/tests/engine/test_load_device
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/cuda/cuda_backend.h"
#include "../../engine/engine.h"
#include "../common/check_main.h"

static const char *const ld_models[] = {
	"stories260K",
	"tiny-qwen3-bpe16k-mixq",
};

#define LD_MODELS (sizeof(ld_models) / sizeof(ld_models[0]))
#define LD_STEPS 12

static const char *ld_dev = "ref0";

/* The model at path, on the host or (deferred) placed first; a context. */
static struct engine_ctx *ld_open(const char *path, bool deferred,
				  const char *placement, struct err *err,
				  int *rc)
{
	struct engine_model_options opt = { .n_ctx = 128,
					    .load = { .defer = deferred } };
	struct engine_ctx_options copt = { .threads = 2, .batch_exact = true };
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;

	*rc = engine_model_open(&m, path, &opt, err);
	ck_assert_msg(*rc == 0, "%s: %s", path, err->msg);
	*rc = engine_ctx_new(&ctx, m, &copt, err);
	ck_assert_msg(*rc == 0, "%s: %s", path, err->msg);
	if (placement)
		*rc = engine_placement_apply(ctx, placement, err);
	if (!*rc && deferred)
		*rc = engine_model_load(m, err);
	return ctx;
}

static void ld_close(struct engine_ctx *ctx)
{
	struct engine_model *m = engine_ctx_model(ctx);

	engine_ctx_free(ctx);
	engine_model_free(m);
}

static const char *ld_all(void)
{
	static char cmd[32];

	snprintf(cmd, sizeof(cmd), "all %s", ld_dev);
	return cmd;
}

/*
 * LD_STEPS greedy steps from a fixed prompt into out/lg, with the
 * placement commands moves[s] (NULL: none) applied before step s.
 */
static void ld_generate(struct engine_ctx *ctx, int32_t *out, float *lg,
			const char *const *moves)
{
	const uint32_t nv = engine_model_info(engine_ctx_model(ctx))->n_vocab;
	int32_t tok[8] = { 1, 15, 27, 99, 130, 7, 211, 3 };
	struct engine_seq *seq = NULL;
	struct err err = { 0 };
	int s;
	uint32_t j, best;

	for (s = 0; s < 8; s++)
		tok[s] %= (int32_t)nv;
	ck_assert_int_eq(engine_seq_new(ctx, &seq, &err), 0);
	for (s = 0; s < LD_STEPS; s++) {
		struct engine_batch_item it = { seq, tok, s ? 1 : 8,
						lg + (size_t)s * nv };

		if (moves && moves[s])
			ck_assert_msg(engine_placement_apply(ctx, moves[s],
							     &err) == 0,
				      "'%s': %s", moves[s], err.msg);
		ck_assert_msg(engine_forward(ctx, &it, 1, &err) == 0, "%s",
			      err.msg);
		for (j = 1, best = 0; j < nv; j++)
			if (lg[(size_t)s * nv + j] > lg[(size_t)s * nv + best])
				best = j;
		out[s] = (int32_t)best;
		tok[0] = out[s];
	}
	engine_seq_free(seq);
}

/* Every tensor as engine_tensor_read gives it: the file's bytes. */
static void ld_check_readback(struct engine_model *m, const char *path)
{
	const struct io_gguf *g = engine_model_gguf(m);
	int fd = open(path, O_RDONLY);
	uint64_t i;

	ck_assert_int_ge(fd, 0);
	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];
		uint8_t *want = malloc(t->bytes + 1),
			*got = malloc(t->bytes + 1);

		ck_assert(want && got);
		ck_assert_int_eq(pread(fd, want, t->bytes, (off_t)t->offset),
				 (ssize_t)t->bytes);
		engine_tensor_read(m, i, 0, t->bytes, got);
		ck_assert_msg(!memcmp(want, got, t->bytes),
			      "%s (%s): weights read back differ from the file",
			      t->name,
			      io_weights_placement(engine_model_weights(m), i)
				      ->device);
		free(want);
		free(got);
	}
	close(fd);
}

/*
 * Straight into the device and host-then-move: the same bits; the
 * tensors on the device, not in host memory; read back as the file.
 */
START_TEST(test_load_straight_same_bits)
{
	const char *stem = ld_models[_i];
	struct err err = { 0 };
	char path[1200];
	struct engine_ctx *moved, *straight;
	const struct io_load_stats *st;
	const struct io_gguf *g;
	struct io_weights *w;
	size_t bytes;
	float *lm, *ls;
	int32_t tm[LD_STEPS], ts[LD_STEPS];
	int rc;

	check_shared_model(path, sizeof(path), stem);
	moved = ld_open(path, false, ld_all(), &err, &rc);
	ck_assert_msg(rc == 0, "%s", err.msg);
	straight = ld_open(path, true, ld_all(), &err, &rc);
	ck_assert_msg(rc == 0, "%s", err.msg);
	w = engine_model_weights(engine_ctx_model(straight));
	g = engine_model_gguf(engine_ctx_model(straight));
	st = io_weights_stats(w);
	/* all but a tensor of no stage (rope_freqs), which stays */
	ck_assert_uint_gt(st->staged_bytes, g->tensor_bytes * 9 / 10);
	ck_assert_uint_lt(st->host_region_bytes, g->tensor_bytes / 10 + 1);
	ck_assert_str_eq(io_weights_placement(w, 0)->device, ld_dev);
	bytes = (size_t)LD_STEPS *
		engine_model_info(engine_ctx_model(moved))->n_vocab *
		sizeof(float);
	lm = malloc(bytes);
	ls = malloc(bytes);
	ck_assert(lm && ls);
	ld_generate(moved, tm, lm, NULL);
	ld_generate(straight, ts, ls, NULL);
	ck_assert_msg(!memcmp(lm, ls, bytes),
		      "%s: logits differ between host-then-move and straight",
		      stem);
	ck_assert(!memcmp(tm, ts, sizeof(tm)));
	ld_check_readback(engine_ctx_model(straight), path);
	free(lm);
	free(ls);
	ld_close(moved);
	ld_close(straight);
}
END_TEST

/*
 * Loaded straight onto the device, then moved to the CPU and back
 * between steps: the tokens of the model left on the device, and the
 * bytes read back are still the file's.
 */
START_TEST(test_load_straight_moves_back)
{
	const char *stem = ld_models[_i];
	struct err err = { 0 };
	char path[1200];
	const char *moves[LD_STEPS] = { 0 };
	struct engine_ctx *still, *moving;
	size_t bytes;
	float *l1, *l2;
	int32_t t1[LD_STEPS], t2[LD_STEPS];
	int rc;

	check_shared_model(path, sizeof(path), stem);
	moves[3] = "blk.0 cpu";
	moves[5] = "all cpu";
	moves[8] = ld_all();
	moves[10] = "output cpu";
	still = ld_open(path, true, ld_all(), &err, &rc);
	ck_assert_msg(rc == 0, "%s", err.msg);
	moving = ld_open(path, true, ld_all(), &err, &rc);
	ck_assert_msg(rc == 0, "%s", err.msg);
	bytes = (size_t)LD_STEPS *
		engine_model_info(engine_ctx_model(still))->n_vocab *
		sizeof(float);
	l1 = malloc(bytes);
	l2 = malloc(bytes);
	ck_assert(l1 && l2);
	ld_generate(still, t1, l1, NULL);
	ld_generate(moving, t2, l2, moves);
	ck_assert_msg(!memcmp(t1, t2, sizeof(t1)),
		      "%s: moves to the CPU and back changed a token", stem);
	ld_check_readback(engine_ctx_model(moving), path);
	ck_assert_int_eq(engine_placement_apply(moving, "all cpu", &err), 0);
	ld_check_readback(engine_ctx_model(moving), path);
	free(l1);
	free(l2);
	ld_close(still);
	ld_close(moving);
}
END_TEST

/* A copy of the model at a temporary path (the caller unlinks it). */
static void ld_copy(const char *from, char *to, size_t cap)
{
	char buf[1 << 16];
	int in = open(from, O_RDONLY), out;
	ssize_t n;

	snprintf(to, cap, "/tmp/llmfs-ld-XXXXXX");
	out = mkstemp(to);
	ck_assert(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		ck_assert_int_eq(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
}

/*
 * The file cut short between the open and the load (a disk error's
 * short read): the load fails naming the file, the device's memory is
 * given back with the model.
 */
START_TEST(test_load_straight_short_read)
{
	struct engine_model_options opt = { .n_ctx = 128,
					    .load = { .defer = true } };
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;
	struct err err = { 0 };
	const bool gpu = !strncmp(ld_dev, "gpu", 3);
	char src[1200], path[64];
	const struct io_gguf *g;
	uint64_t cap, used;
	off_t cut;

	check_shared_model(src, sizeof(src), "stories260K");
	ld_copy(src, path, sizeof(path));
	/* a cap no model reaches, to count what is placed on the GPU */
	if (gpu)
		cuda_backend_cap_set(ld_dev, 1ull << 40);
	ck_assert_int_eq(engine_model_open(&m, path, &opt, &err), 0);
	ck_assert_int_eq(engine_ctx_new(&ctx, m, NULL, &err), 0);
	ck_assert_msg(engine_placement_apply(ctx, ld_all(), &err) == 0, "%s",
		      err.msg);
	g = engine_model_gguf(m);
	cut = (off_t)g->tensors[g->n_tensors / 2].offset + 1000;
	ck_assert_int_eq(truncate(path, cut), 0);
	ck_assert_int_eq(engine_model_load(m, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, path) != NULL, "%s", err.msg);
	printf("# a short read: %s\n", err.msg);
	engine_ctx_free(ctx);
	engine_model_free(m);
	if (gpu) {
		ck_assert(cuda_backend_capped(ld_dev, &cap, &used));
		ck_assert_uint_eq(used, 0);
		cuda_backend_cap_set(ld_dev, 0);
	}
	unlink(path);
}
END_TEST

/*
 * A GPU capped below the model: the placement is ENOSPC naming the
 * device, nothing is allocated there, and the model loads on the host.
 */
START_TEST(test_load_straight_no_room)
{
	struct err err = { 0 };
	char path[1200];
	struct engine_ctx *ctx;
	uint64_t cap, used;
	int32_t t[LD_STEPS];
	float *lg;
	int rc;

	if (strncmp(ld_dev, "gpu", 3))
		return; /* ref0 has no cap */
	check_shared_model(path, sizeof(path), "stories260K");
	cuda_backend_cap_set(ld_dev, 64 << 10);
	ctx = ld_open(path, true, ld_all(), &err, &rc);
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_msg(strstr(err.msg, "no room on gpu") != NULL, "%s", err.msg);
	printf("# no room: %s\n", err.msg);
	ck_assert(cuda_backend_capped(ld_dev, &cap, &used));
	ck_assert_uint_eq(used, 0);
	ck_assert_int_eq(engine_model_load(engine_ctx_model(ctx), &err), 0);
	lg = malloc((size_t)LD_STEPS *
		    engine_model_info(engine_ctx_model(ctx))->n_vocab *
		    sizeof(float));
	ck_assert_ptr_nonnull(lg);
	ld_generate(ctx, t, lg, NULL);
	free(lg);
	ld_close(ctx);
	cuda_backend_cap_set(ld_dev, 0);
}
END_TEST

static int ld_setup(void)
{
	const char *dev = getenv("LD_DEVICE");
	size_t i;

	for (i = 0; i < LD_MODELS; i++)
		if (check_need_model(ld_models[i]))
			return CHECK_SKIP;
	setenv("LLMFS_REF_DEVICE", "1", 1);
	if (dev && strcmp(dev, "ref0")) {
		struct io_device_set set = { 0 };
		struct err err = { 0 };

		/* in a process of its own: this one forks the tests */
		if (engine_gpu_probe(&set, &err) <= 0) {
			printf("LD_DEVICE=%s: no GPU: %s\n", dev, err.msg);
			return CHECK_SKIP;
		}
		ld_dev = dev;
	}
	return 0;
}

/*
 * Before the load, a host device other than the load's own (numa0):
 * the load starts then, the tensors move there afterwards.
 */
START_TEST(test_load_straight_numa)
{
	struct err err = { 0 };
	struct engine_ctx *ctx;
	char path[1200];
	int rc;

	check_shared_model(path, sizeof(path), "stories260K");
	ctx = ld_open(path, true, "all numa0", &err, &rc);
	ck_assert_msg(rc == 0, "%s", err.msg);
	ck_assert_str_eq(io_weights_placement(
				 engine_model_weights(engine_ctx_model(ctx)), 1)
				 ->device,
			 "numa0");
	ld_check_readback(engine_ctx_model(ctx), path);
	ld_close(ctx);
}
END_TEST

static void ld_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_load_straight_same_bits, 0, LD_MODELS);
	tcase_add_loop_test(tc, test_load_straight_moves_back, 0, 1);
	tcase_add_test(tc, test_load_straight_short_read);
	tcase_add_test(tc, test_load_straight_no_room);
	/* numa0 exists where libnuma sees a node (io_device_set_read) */
	tcase_add_test(tc, test_load_straight_numa);
}

const struct check_main check_main = {
	.name = "load_device",
	.timeout = 300,
	.setup = ld_setup,
	.add_tests = ld_tests,
};
