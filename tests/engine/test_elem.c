// SPDX-License-Identifier: MIT
/*
 * engine/cpu/elem_*.c, every vector level of engine/cpu/isa.h this CPU
 * has (avx2, avx512), against the scalar code it replaces, bit for bit: ops_swiglu, ops_softmax, ops_rms_norm and ops_rope against their
 * _scalar twins, and the activation quantizers (Q8_K, Q8_0, F16) through
 * quant_from_float against the traits table's scalar from_float. Inputs: every 16-bit top half of a float
 * (so every exponent: zeros, -0.0, subnormals, infinities, the |n| > 192
 * lanes of v_expf), random rows of several magnitudes and odd lengths,
 * and blocks built to tie for the largest |x| or to round at .5.
 *
 * Each test runs one level (cpu_isa_use); a level this CPU lacks is left
 * out, and the run says so (exit 77).
 */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/cpu/isa.h"
#include "../../engine/cpu/ops.h"
#include "../../engine/quant/quant.h"
#include "../../engine/quant/quant_internal.h"
#include "../common/check_main.h"

/* Whether levels a and b have the same element-wise steps and quantizers. */
static bool elem_same_steps(const struct cpu_isa *a, const struct cpu_isa *b)
{
	static const uint32_t types[] = { IO_TYPE_Q8_K, IO_TYPE_Q8_0,
					  IO_TYPE_F16 };
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (a->type[types[i]].from_float !=
		    b->type[types[i]].from_float)
			return false;
	return a->swiglu == b->swiglu && a->expf_sub == b->expf_sub &&
	       a->scale == b->scale && a->rope == b->rope;
}

/*
 * Run vector level l (every level but the last, scalar one); false where
 * this CPU lacks it, or where an earlier level this CPU has runs the same
 * steps (aarch64's two NEON levels share theirs: compared there).
 */
static bool elem_use(int l)
{
	const struct cpu_isa *isa = cpu_isa_levels[l];
	int i;

	if (!isa->usable()) {
		printf("%s: not on this CPU, left out\n", isa->name);
		return false;
	}
	for (i = 0; i < l; i++)
		if (cpu_isa_levels[i]->usable() &&
		    elem_same_steps(cpu_isa_levels[i], isa)) {
			printf("%s: the steps of %s, compared there\n",
			       isa->name, cpu_isa_levels[i]->name);
			return false;
		}
	cpu_isa_use(isa);
	return true;
}

static uint64_t elem_rng = 0x2545f4914f6cdd1dull;

static uint32_t elem_rand(void)
{
	elem_rng ^= elem_rng << 13;
	elem_rng ^= elem_rng >> 7;
	elem_rng ^= elem_rng << 17;
	return (uint32_t)(elem_rng >> 16);
}

/* uniform in [-1, 1) times 2^e for e in [lo, hi], now and then 0 or -0 */
static float elem_randf(int lo, int hi)
{
	uint32_t k = elem_rand() % 64;
	float v = (float)(elem_rand() % 2000001) / 1000000.0f - 1.0f;

	if (k == 0)
		return 0.0f;
	if (k == 1)
		return -0.0f;
	return ldexpf(v, lo + (int)(elem_rand() % (uint32_t)(hi - lo + 1)));
}

static float elem_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static bool elem_is_nan_bits(uint32_t u)
{
	return (u & 0x7f800000) == 0x7f800000 && (u & 0x007fffff);
}

/* a float from each 16-bit top half (NaNs left out), low bits mixed */
static int elem_sweep(float *x, int cap)
{
	int n = 0;

	for (uint32_t top = 0; top < 65536 && n < cap; top++) {
		uint32_t u = top << 16 | ((top * 0x9e37u) & 0xffff);

		if (elem_is_nan_bits(u))
			u = top << 16; /* the infinities */
		if (!elem_is_nan_bits(u))
			x[n++] = elem_bits(u);
	}
	return n;
}

static void elem_check_bits(const void *a, const void *b, size_t bytes,
			    const char *what, int64_t n)
{
	const uint8_t *p = a, *q = b;

	for (size_t i = 0; i < bytes; i++)
		ck_assert_msg(p[i] == q[i],
			      "%s, n %lld: byte %zu differs (%02x vs %02x)",
			      what, (long long)n, i, p[i], q[i]);
}

#define ELEM_SWEEP 65536

START_TEST(test_elem_swiglu)
{
	float *g, *u, *y0, *y1;
	int n, len;

	if (!elem_use(_i))
		return;
	g = malloc(ELEM_SWEEP * sizeof(*g));
	u = malloc(ELEM_SWEEP * sizeof(*u));
	y0 = malloc(ELEM_SWEEP * sizeof(*y0));
	y1 = malloc(ELEM_SWEEP * sizeof(*y1));
	n = elem_sweep(g, ELEM_SWEEP);

	for (int i = 0; i < n; i++)
		u[i] = elem_randf(-20, 20);
	ops_swiglu_scalar(y0, g, u, n);
	ops_swiglu(y1, g, u, n);
	elem_check_bits(y0, y1, (size_t)n * sizeof(float), "swiglu sweep", n);
	/* activations of several magnitudes, odd lengths (the scalar tail) */
	for (len = 1; len < 600; len += 1 + len / 8) {
		int e = (int)(elem_rand() % 16);

		for (int i = 0; i < len; i++) {
			g[i] = elem_randf(-e, e);
			u[i] = elem_randf(-e, e);
		}
		ops_swiglu_scalar(y0, g, u, len);
		ops_swiglu(y1, g, u, len);
		elem_check_bits(y0, y1, (size_t)len * sizeof(float), "swiglu",
				len);
	}
	free(g);
	free(u);
	free(y0);
	free(y1);
}
END_TEST

START_TEST(test_elem_softmax)
{
	float *x, *a, *b;
	int n, len, i;

	if (!elem_use(_i))
		return;
	x = malloc(ELEM_SWEEP * sizeof(*x));
	a = malloc(ELEM_SWEEP * sizeof(*a));
	b = malloc(ELEM_SWEEP * sizeof(*b));
	n = elem_sweep(x, ELEM_SWEEP);

	/* every exponent of x - max, in rows of 64 with a common max */
	for (i = 0; i + 64 <= n; i += 64) {
		memcpy(a, x + i, 64 * sizeof(float));
		a[0] = 0.0f;
		for (int k = 1; k < 64; k++)
			a[k] = -fabsf(a[k]);
		memcpy(b, a, 64 * sizeof(float));
		ops_softmax_scalar(a, 64);
		ops_softmax(b, 64);
		elem_check_bits(a, b, 64 * sizeof(float), "softmax sweep", i);
	}
	for (len = 1; len < 2000; len += 1 + len / 4) {
		int e = (int)(elem_rand() % 8);

		for (i = 0; i < len; i++)
			a[i] = elem_randf(-e, e);
		if (len > 3)
			a[len / 3] = -INFINITY; /* a masked position */
		memcpy(b, a, (size_t)len * sizeof(float));
		ops_softmax_scalar(a, len);
		ops_softmax(b, len);
		elem_check_bits(a, b, (size_t)len * sizeof(float), "softmax",
				len);
	}
	free(x);
	free(a);
	free(b);
}
END_TEST

START_TEST(test_elem_rms_norm)
{
	static float x[4100], w[4100], y0[4100], y1[4100];
	int len;

	if (!elem_use(_i))
		return;

	for (len = 1; len <= 4096; len += 1 + len / 3) {
		int e = (int)(elem_rand() % 40) - 20;

		for (int i = 0; i < len; i++) {
			x[i] = elem_randf(e - 3, e + 3);
			w[i] = elem_randf(-2, 2);
		}
		ops_rms_norm_scalar(y0, x, NULL, len, 1e-6f);
		ops_rms_norm(y1, x, NULL, len, 1e-6f);
		elem_check_bits(y0, y1, (size_t)len * sizeof(float), "rms",
				len);
		ops_rms_norm_scalar(y0, x, w, len, 1e-6f);
		ops_rms_norm(y1, x, w, len, 1e-6f);
		elem_check_bits(y0, y1, (size_t)len * sizeof(float), "rms w",
				len);
		/* in place, as the backend may call it */
		memcpy(y1, x, (size_t)len * sizeof(float));
		ops_rms_norm(y1, y1, w, len, 1e-6f);
		elem_check_bits(y0, y1, (size_t)len * sizeof(float),
				"rms in place", len);
	}
}
END_TEST

START_TEST(test_elem_rope)
{
	static const uint32_t n_rots[] = { 128, 64, 96, 32, 8, 24, 40, 2 };
	static float x[3 * 128], y0[3 * 128], y1[3 * 128], cache[128];

	if (!elem_use(_i))
		return;

	for (size_t k = 0; k < sizeof(n_rots) / sizeof(n_rots[0]); k++) {
		for (int mode = ENGINE_ROPE_NORM; mode <= ENGINE_ROPE_NEOX;
		     mode++) {
			for (int rep = 0; rep < 20; rep++) {
				int64_t pos = elem_rand() % 40000;

				ops_rope_cache(cache, pos, n_rots[k], 1e6f,
					       1.0f, NULL);
				for (int i = 0; i < 3 * 128; i++)
					x[i] = elem_randf(-8, 8);
				memcpy(y0, x, sizeof(x));
				memcpy(y1, x, sizeof(x));
				ops_rope_scalar(y0, 3, 128, n_rots[k], mode,
						cache);
				ops_rope(y1, 3, 128, n_rots[k], mode, cache);
				elem_check_bits(y0, y1, sizeof(x), "rope",
						n_rots[k]);
			}
		}
	}
}
END_TEST

/* Q8_K blocks: magnitudes, ties for max |x|, .5 products, zero blocks */
static void elem_q8_K_block(float *x, int kind)
{
	int e = (int)(elem_rand() % 60) - 30, a, b;

	for (int j = 0; j < QK_K; j++)
		x[j] = elem_randf(e - 4, e);
	a = (int)(elem_rand() % QK_K);
	b = (int)(elem_rand() % QK_K);
	switch (kind % 6) {
	case 1: /* a tie of opposite signs: the first one wins */
		x[a] = ldexpf(1.5f, e + 1);
		x[b] = -x[a];
		break;
	case 2: /* iscale -1 and products at k + .5, ties to even */
		for (int j = 0; j < QK_K; j++)
			x[j] = (float)((int)(elem_rand() % 254) - 127) + 0.5f;
		x[a] = 127.0f;
		break;
	case 3: /* zeros and negative zeros only */
		for (int j = 0; j < QK_K; j++)
			x[j] = (elem_rand() & 1) ? 0.0f : -0.0f;
		break;
	case 4: /* huge and tiny (subnormal) values */
		for (int j = 0; j < QK_K; j++)
			x[j] = elem_randf(elem_rand() % 2 ? 100 : -149,
					  elem_rand() % 2 ? 127 : -126);
		break;
	case 5: /* one value, the rest 0 or -0 */
		for (int j = 0; j < QK_K; j++)
			x[j] = (elem_rand() & 1) ? 0.0f : -0.0f;
		x[a] = -elem_randf(e, e);
		break;
	}
}

START_TEST(test_elem_q8_K)
{
	enum { NB = 8 };
	static float x[NB * QK_K];
	static struct block_q8_K y0[NB], y1[NB];

	if (!elem_use(_i))
		return;

	for (int rep = 0; rep < 600; rep++) {
		for (int i = 0; i < NB; i++)
			elem_q8_K_block(x + i * QK_K, rep + i);
		memset(y0, 0x55, sizeof(y0));
		memset(y1, 0xaa, sizeof(y1));
		quant_traits(IO_TYPE_Q8_K)->from_float(x, y0, NB);
		quant_from_float(IO_TYPE_Q8_K, x, y1, NB * QK_K);
		elem_check_bits(y0, y1, sizeof(y0), "q8_K", rep);
	}
}
END_TEST

START_TEST(test_elem_q8_0)
{
	enum { NB = 64 };
	static float x[NB * QK8_0];
	static struct block_q8_0 y0[NB], y1[NB];

	if (!elem_use(_i))
		return;

	for (int rep = 0; rep < 300; rep++) {
		for (int i = 0; i < NB * QK8_0; i += QK_K)
			elem_q8_K_block(x + i, rep + i / QK_K);
		memset(y0, 0x55, sizeof(y0));
		memset(y1, 0xaa, sizeof(y1));
		quant_traits(IO_TYPE_Q8_0)->from_float(x, y0, NB);
		quant_from_float(IO_TYPE_Q8_0, x, y1, NB * QK8_0);
		elem_check_bits(y0, y1, sizeof(y0), "q8_0", rep);
	}
}
END_TEST

START_TEST(test_elem_f16)
{
	float *x;
	uint16_t *y0, *y1;
	int n = 0, len;

	if (!elem_use(_i))
		return;
	x = malloc(ELEM_SWEEP * sizeof(*x));
	y0 = malloc(ELEM_SWEEP * sizeof(*y0));
	y1 = malloc(ELEM_SWEEP * sizeof(*y1));

	/* every top half, NaNs included: vcvtps2ph keeps their payload top */
	for (uint32_t top = 0; top < 65536; top++)
		x[n++] = elem_bits(top << 16 | ((top * 0x9e37u) & 0xffff));
	quant_traits(IO_TYPE_F16)->from_float(x, y0, n);
	quant_from_float(IO_TYPE_F16, x, y1, n);
	elem_check_bits(y0, y1, (size_t)n * sizeof(uint16_t), "f16 sweep", n);
	for (len = 1; len < 300; len += 1 + len / 5) {
		for (int i = 0; i < len; i++)
			x[i] = elem_randf(-30, 20);
		/* the word past the end must stay */
		y0[len] = y1[len] = 0x1234;
		quant_traits(IO_TYPE_F16)->from_float(x, y0, len);
		quant_from_float(IO_TYPE_F16, x, y1, len);
		elem_check_bits(y0, y1, (size_t)(len + 1) * sizeof(uint16_t),
				"f16", len);
	}
	free(x);
	free(y0);
	free(y1);
}
END_TEST

static void elem_tests(TCase *tc)
{
	const int nl = (int)cpu_isa_count - 1; /* the vector levels */

	tcase_add_loop_test(tc, test_elem_swiglu, 0, nl);
	tcase_add_loop_test(tc, test_elem_softmax, 0, nl);
	tcase_add_loop_test(tc, test_elem_rms_norm, 0, nl);
	tcase_add_loop_test(tc, test_elem_rope, 0, nl);
	tcase_add_loop_test(tc, test_elem_q8_K, 0, nl);
	tcase_add_loop_test(tc, test_elem_q8_0, 0, nl);
	tcase_add_loop_test(tc, test_elem_f16, 0, nl);
}

/* A level this CPU lacks was not compared: not a whole pass. */
static int elem_left_out(void)
{
	int i, missing = 0;

	for (i = 0; i + 1 < (int)cpu_isa_count; i++)
		if (!cpu_isa_levels[i]->usable()) {
			printf("test_elem: this CPU lacks %s: the %s steps were not compared\n",
			       cpu_isa_levels[i]->features,
			       cpu_isa_levels[i]->name);
			missing++;
		}
	return missing ? CHECK_SKIP : 0;
}

const struct check_main check_main = {
	.name = "elem",
	.timeout = 60,
	.add_tests = elem_tests,
	.left_out = elem_left_out,
};
