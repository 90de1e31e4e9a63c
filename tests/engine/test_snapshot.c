// SPDX-License-Identifier: MIT
/*
 * KV snapshots (engine/snapshot.c, engine.h "snapshots"): a sequence
 * saved and loaded piece by piece into another context of the model goes
 * on with the saved one's logits, bit for bit, and carries the caller's
 * extra bytes; the loader's sizes add up to the saved bytes; a snapshot
 * of no token is one too. Refused with EINVAL and a reason: a header that
 * is not one (magic, version, reserved bytes), another model's shape or
 * digest, a block or the prefix whose checksum does not match, a token
 * the model has not (with its checksum made right); bytes past the end
 * are EFBIG. tests/fs/kvsnap.sh does the same through sessions/N/kv.
 *
 *   make build/tests/engine/test_snapshot && build/tests/engine/test_snapshot
 */
#include <errno.h>
#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/engine.h"
#include "../common/check_main.h"

static const uint8_t snap_model[ENGINE_SNAPSHOT_MODEL] = { 1, 2, 3, 4 };

static struct engine_ctx *snap_open(const char *stem)
{
	struct engine_model_options opt = { .n_ctx = 512 };
	struct engine_ctx_options copt = { .threads = 2, .batch_exact = true };
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;
	struct err err = { 0 };
	char path[1200];

	check_shared_model(path, sizeof(path), stem);
	ck_assert_msg(engine_model_open(&m, path, &opt, &err) == 0, "%s: %s",
		      path, err.msg);
	ck_assert_msg(engine_ctx_new(&ctx, m, &copt, &err) == 0, "%s", err.msg);
	return ctx;
}

static void snap_close(struct engine_ctx *ctx)
{
	struct engine_model *m = engine_ctx_model(ctx);

	engine_ctx_free(ctx);
	engine_model_free(m);
}

struct snap_bytes {
	uint8_t *p;
	size_t len;
};

static int snap_put(void *arg, const void *p, size_t n)
{
	struct snap_bytes *b = arg;
	uint8_t *np = realloc(b->p, b->len + n);

	if (!np)
		return -ENOMEM;
	memcpy(np + b->len, p, n);
	b->p = np;
	b->len += n;
	return 0;
}

/* A sequence of ctx holding n pseudo-random tokens, saved into out. */
static struct engine_seq *snap_saved(struct engine_ctx *ctx, uint32_t n,
				     const char *extra, struct snap_bytes *out)
{
	const uint32_t nv = engine_model_info(engine_ctx_model(ctx))->n_vocab;
	struct engine_seq *s = NULL;
	struct err err = { 0 };
	int32_t tok[300];
	uint32_t i;

	ck_assert_uint_le(n, 300);
	for (i = 0; i < n; i++)
		tok[i] = (int32_t)((i * 7919u + 11u) % nv);
	ck_assert_int_eq(engine_seq_new(ctx, &s, &err), 0);
	if (n) {
		struct engine_batch_item it = { s, tok, n, NULL };

		ck_assert_msg(engine_forward(ctx, &it, 1, &err) == 0, "%s",
			      err.msg);
	}
	memset(out, 0, sizeof(*out));
	ck_assert_int_eq(engine_snapshot_save(s, snap_model, extra,
					      strlen(extra), snap_put, out),
			 0);
	return s;
}

/*
 * Load the bytes into a sequence of ctx piece by piece (the header, then
 * what the loader asks for); the first error is returned, with the
 * loader's message in err. *out: the sequence, when whole.
 */
static int snap_load(struct engine_ctx *ctx, const struct snap_bytes *b,
		     struct engine_seq **out, char *extra, size_t cap,
		     struct err *err)
{
	struct engine_snapshot_load *l = NULL;
	size_t off = ENGINE_SNAPSHOT_HEADER, need, len;
	const void *x;
	int ret;

	*out = NULL;
	if ((ret = engine_snapshot_load_new(&l, ctx, b->p, err)))
		return ret;
	ck_assert_uint_eq(engine_snapshot_load_total(l), b->len);
	ck_assert_mem_eq(engine_snapshot_load_model(l), snap_model,
			 sizeof(snap_model));
	while ((need = engine_snapshot_load_need(l))) {
		ck_assert_uint_le(off + need, b->len);
		if ((ret = engine_snapshot_load_take(l, b->p + off, err)))
			break;
		off += need;
	}
	if (!ret) {
		ck_assert_uint_eq(off, b->len);
		x = engine_snapshot_load_extra(l, &len);
		ck_assert_uint_lt(len, cap);
		memcpy(extra, x, len);
		extra[len] = '\0';
		*out = engine_snapshot_load_seq(l);
		ck_assert_ptr_nonnull(*out);
	}
	engine_snapshot_load_free(l);
	return ret;
}

/* One more token on both: the same logits, bit for bit. */
static void snap_same_next(struct engine_ctx *ca, struct engine_seq *a,
			   struct engine_ctx *cb, struct engine_seq *b)
{
	const uint32_t nv = engine_model_info(engine_ctx_model(ca))->n_vocab;
	float *la = malloc(nv * sizeof(float)),
	      *lb = malloc(nv * sizeof(float));
	int32_t t = 5;
	struct engine_batch_item ia = { a, &t, 1, la }, ib = { b, &t, 1, lb };
	struct err err = { 0 };

	ck_assert_int_eq(engine_seq_length(a), engine_seq_length(b));
	if (engine_seq_length(a))
		ck_assert_mem_eq(engine_seq_tokens(a), engine_seq_tokens(b),
				 engine_seq_length(a) * sizeof(int32_t));
	ck_assert_int_eq(engine_forward(ca, &ia, 1, &err), 0);
	ck_assert_int_eq(engine_forward(cb, &ib, 1, &err), 0);
	ck_assert_mem_eq(la, lb, nv * sizeof(float));
	free(la);
	free(lb);
}

START_TEST(test_snapshot_round_trip)
{
	/* 150 tokens: two whole blocks and one part of one; then none */
	static const uint32_t lens[] = { 150, 0 };
	struct engine_ctx *ca = snap_open("tiny-qwen3-bpe16k-mixq");
	struct engine_ctx *cb = snap_open("tiny-qwen3-bpe16k-mixq");
	struct engine_seq *a, *b;
	struct snap_bytes bytes;
	struct err err = { 0 };
	char extra[64];

	a = snap_saved(ca, lens[_i], "the conversation", &bytes);
	ck_assert_msg(snap_load(cb, &bytes, &b, extra, sizeof(extra), &err) ==
			      0,
		      "%s", err.msg);
	ck_assert_str_eq(extra, "the conversation");
	ck_assert_int_eq(engine_snapshot_check(cb, bytes.p, snap_model, &err),
			 0);
	snap_same_next(ca, a, cb, b);
	engine_seq_free(a);
	engine_seq_free(b);
	free(bytes.p);
	snap_close(ca);
	snap_close(cb);
}
END_TEST

/* A copy of b with byte at off xor'ed with x. */
static struct snap_bytes snap_flipped(const struct snap_bytes *b, size_t off,
				      uint8_t x)
{
	struct snap_bytes c = { malloc(b->len), b->len };

	memcpy(c.p, b->p, b->len);
	c.p[off] ^= x;
	return c;
}

static void snap_refused(struct engine_ctx *ctx, const struct snap_bytes *b,
			 int want, const char *why)
{
	struct engine_seq *s = NULL;
	struct err err = { 0 };
	char extra[64];

	ck_assert_int_eq(snap_load(ctx, b, &s, extra, sizeof(extra), &err),
			 want);
	ck_assert_ptr_null(s);
	ck_assert_msg(strstr(err.msg, why), "'%s' does not say '%s'", err.msg,
		      why);
}

START_TEST(test_snapshot_refused)
{
	struct engine_ctx *ca = snap_open("tiny-qwen3-bpe16k-mixq");
	struct engine_ctx *other = snap_open("stories260K");
	struct engine_seq *a;
	struct snap_bytes bytes, bad;
	struct engine_kv_stats st;
	struct err err = { 0 };
	const size_t prefix = ENGINE_SNAPSHOT_HEADER + 70 * 4 + 5;
	static const uint8_t other_model[ENGINE_SNAPSHOT_MODEL] = { 9 };
	struct sha256_ctx c;

	a = snap_saved(ca, 70, "hello", &bytes);
	bad = snap_flipped(&bytes, 0, 1);
	snap_refused(ca, &bad, -EINVAL, "bad magic");
	free(bad.p);
	bad = snap_flipped(&bytes, 8, 1); /* the version */
	snap_refused(ca, &bad, -EINVAL, "version");
	free(bad.p);
	bad = snap_flipped(&bytes, ENGINE_SNAPSHOT_HEADER - 1, 1);
	snap_refused(ca, &bad, -EINVAL, "reserved");
	free(bad.p);
	snap_refused(other, &bytes, -EINVAL, "the shape is another model's");
	ck_assert_int_eq(engine_snapshot_check(ca, bytes.p, other_model, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "another model"));
	/* the text, then a block: their checksums */
	bad = snap_flipped(&bytes, prefix - 1, 0x20);
	snap_refused(ca, &bad, -EINVAL, "checksum");
	free(bad.p);
	bad = snap_flipped(&bytes, bytes.len - 40, 0x01);
	snap_refused(ca, &bad, -EINVAL, "checksum");
	free(bad.p);
	/* a token the model has not, its checksum made right */
	bad = snap_flipped(&bytes, ENGINE_SNAPSHOT_HEADER + 3, 0x40);
	sha256_init(&c);
	sha256_update(&c, prefix, bad.p);
	sha256_digest(&c, ENGINE_SNAPSHOT_SUM, bad.p + prefix);
	snap_refused(ca, &bad, -EINVAL, "not one of the model's");
	free(bad.p);
	/* nothing of the refused ones is held */
	engine_seq_free(a);
	engine_kv_stats(ca, &st);
	ck_assert_uint_eq(st.blocks, 0);
	ck_assert_uint_eq(st.committed, 0);
	free(bytes.p);
	snap_close(ca);
	snap_close(other);
}
END_TEST

/* A whole snapshot takes no more. */
START_TEST(test_snapshot_past_the_end)
{
	struct engine_ctx *ca = snap_open("tiny-qwen3-bpe16k-mixq");
	struct engine_snapshot_load *l = NULL;
	struct engine_seq *a;
	struct snap_bytes bytes;
	struct err err = { 0 };
	size_t off = ENGINE_SNAPSHOT_HEADER, need;

	a = snap_saved(ca, 10, "", &bytes);
	ck_assert_int_eq(engine_snapshot_load_new(&l, ca, bytes.p, &err), 0);
	ck_assert_ptr_null(engine_snapshot_load_seq(l)); /* not whole yet */
	while ((need = engine_snapshot_load_need(l))) {
		ck_assert_int_eq(
			engine_snapshot_load_take(l, bytes.p + off, &err), 0);
		off += need;
	}
	ck_assert_int_eq(engine_snapshot_load_take(l, bytes.p, &err), -EFBIG);
	engine_snapshot_load_free(l); /* and the sequence it holds */
	engine_seq_free(a);
	free(bytes.p);
	snap_close(ca);
}
END_TEST

static int snap_setup(void)
{
	int rc = check_need_model("tiny-qwen3-bpe16k-mixq");

	return rc ? rc : check_need_model("stories260K");
}

static void snap_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_snapshot_round_trip, 0, 2);
	tcase_add_test(tc, test_snapshot_refused);
	tcase_add_test(tc, test_snapshot_past_the_end);
}

const struct check_main check_main = {
	.name = "snapshot",
	.timeout = 120,
	.setup = snap_setup,
	.add_tests = snap_tests,
};
