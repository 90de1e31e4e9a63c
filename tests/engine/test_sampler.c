// SPDX-License-Identifier: MIT
/*
 * Sampler tests: no model needed. The distributions are checked by drawing
 * many times with fixed seeds, so every run draws the same numbers and the
 * bounds (several standard deviations wide) cannot flake.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/engine.h"
#include "../common/check_main.h"

static struct engine_sampling sampling_plain(float temp, uint64_t seed)
{
	struct engine_sampling p;

	engine_sampling_defaults(&p);
	p.temperature = temp;
	p.top_k = 0;
	p.top_p = 1.0f;
	p.min_p = 0.0f;
	p.repeat_penalty = 1.0f;
	p.seed = seed;
	return p;
}

static struct engine_sampler *sampler_make(const struct engine_sampling *p,
					   uint32_t n_vocab)
{
	struct engine_sampler *s = NULL;
	struct err err = { 0 };

	ck_assert_int_eq(engine_sampler_new(&s, p, n_vocab, &err), 0);
	ck_assert_ptr_nonnull(s);
	return s;
}

static int32_t sample_copy(struct engine_sampler *s, const float *logits,
			   uint32_t n)
{
	float buf[64];

	/* plain checks in hot loops: each ck_assert writes to Check's pipe */
	if (n > 64)
		ck_abort_msg("%u logits", n);
	memcpy(buf, logits, n * sizeof(*buf));
	return engine_sampler_sample(s, buf, NULL, 0);
}

/* Count draws per id over n_draws calls on copies of logits. */
static void sample_hist(struct engine_sampler *s, const float *logits,
			uint32_t n, int n_draws, int *hist)
{
	int i;

	memset(hist, 0, n * sizeof(*hist));
	for (i = 0; i < n_draws; i++) {
		int32_t t = sample_copy(s, logits, n);

		if (t < 0 || t >= (int32_t)n)
			ck_abort_msg("token %d of %u", t, n);
		hist[t]++;
	}
}

START_TEST(test_sampler_defaults_are_llama_cpp)
{
	struct engine_sampling p;

	engine_sampling_defaults(&p);
	ck_assert_float_eq(p.temperature, 0.8f);
	ck_assert_int_eq(p.top_k, 40);
	ck_assert_float_eq(p.top_p, 0.95f);
	ck_assert_float_eq(p.min_p, 0.05f);
	ck_assert_float_eq(p.repeat_penalty, 1.0f);
	ck_assert_int_eq(p.repeat_last_n, 64);
}
END_TEST

START_TEST(test_sampler_greedy_lowest_id_on_ties)
{
	struct engine_sampling p = sampling_plain(0.0f, 1);
	struct engine_sampler *s = sampler_make(&p, 6);
	const float a[6] = { 1, 5, -2, 5, 4.999f, 0 };
	const float b[6] = { -3, -1, -1, -7, -2, -1 };
	int i;

	for (i = 0; i < 10; i++) {
		ck_assert_int_eq(sample_copy(s, a, 6), 1);
		ck_assert_int_eq(sample_copy(s, b, 6), 1);
	}
	engine_sampler_free(s);
	/* negative temperatures are greedy too */
	p.temperature = -1.0f;
	s = sampler_make(&p, 6);
	ck_assert_int_eq(sample_copy(s, a, 6), 1);
	engine_sampler_free(s);
}
END_TEST

/*
 * Greedy over vocabularies of real size, in lengths that are and are not
 * whole vectors: the first index of the largest logit, as the plain loop
 * finds it, with ties, signed zeros, infinities and NaNs (which never
 * win, unless logit 0 is one) where the vector lanes meet.
 */
START_TEST(test_sampler_greedy_matches_plain_loop)
{
	static const uint32_t sizes[] = { 1, 15, 16, 17, 100, 1003, 151936 };
	const float special[] = { NAN, 0.0f, -0.0f, INFINITY, -INFINITY, 3.0f };
	uint64_t x = 99;
	float *logits = malloc(151936 * sizeof(*logits)), *copy;
	size_t z;
	int round;

	copy = malloc(151936 * sizeof(*copy));
	ck_assert_ptr_nonnull(logits);
	ck_assert_ptr_nonnull(copy);
	for (z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		struct engine_sampling p = sampling_plain(0.0f, 1);
		struct engine_sampler *s = sampler_make(&p, sizes[z]);
		const uint32_t n = sizes[z];

		for (round = 0; round < 40; round++) {
			uint32_t i, want = 0;
			int32_t got;

			for (i = 0; i < n; i++) {
				x = x * 6364136223846793005ull +
				    1442695040888963407ull;
				logits[i] = (x >> 60) < 6 ?
						    special[(x >> 60)] :
						    (float)((x >> 33) % 4) -
							    1.0f;
			}
			if (round % 4 == 0)
				logits[0] = 1.0f; /* round 1, 2, 3: maybe NaN */
			for (i = 1; i < n; i++)
				if (logits[i] > logits[want])
					want = i;
			memcpy(copy, logits, n * sizeof(*copy));
			got = engine_sampler_sample(s, copy, NULL, 0);
			if (got != (int32_t)want)
				ck_abort_msg("n %u round %d: %d, want %u", n,
					     round, got, want);
		}
		engine_sampler_free(s);
	}
	free(copy);
	free(logits);
}
END_TEST

START_TEST(test_sampler_tiny_temperature_is_greedy)
{
	/* logits / 1e-38 overflow to inf; the limit is the argmax */
	struct engine_sampling p = sampling_plain(1e-38f, 5);
	struct engine_sampler *s = sampler_make(&p, 4);
	const float l[4] = { 1.0f, 3.0f, -2.0f, 2.0f };
	int i;

	for (i = 0; i < 20; i++)
		ck_assert_int_eq(sample_copy(s, l, 4), 1);
	engine_sampler_free(s);
}
END_TEST

START_TEST(test_sampler_top_k_1_is_greedy)
{
	struct engine_sampling p = sampling_plain(1.5f, 7);
	struct engine_sampler *s;
	float logits[64];
	uint64_t x = 12345;
	int round, i;

	p.top_k = 1;
	s = sampler_make(&p, 64);
	for (round = 0; round < 500; round++) {
		int best = 0;

		for (i = 0; i < 64; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			/* coarse values so that ties happen */
			logits[i] = (float)((x >> 33) % 16) - 8.0f;
			if (logits[i] > logits[best])
				best = i;
		}
		ck_assert_int_eq(sample_copy(s, logits, 64), best);
	}
	engine_sampler_free(s);
}
END_TEST

/* softmax(l) = 0.5, 0.3, 0.15, 0.05 */
static void logits_4(float *l)
{
	l[0] = logf(0.5f);
	l[1] = logf(0.3f);
	l[2] = logf(0.15f);
	l[3] = logf(0.05f);
}

START_TEST(test_sampler_top_p_cuts)
{
	struct engine_sampling p = sampling_plain(1.0f, 99);
	struct engine_sampler *s;
	float l[4];
	int hist[4];

	logits_4(l);
	p.top_p = 0.7f; /* 0.5 < 0.7 <= 0.5 + 0.3: keeps ids 0 and 1 */
	s = sampler_make(&p, 4);
	sample_hist(s, l, 4, 20000, hist);
	ck_assert_int_eq(hist[2], 0);
	ck_assert_int_eq(hist[3], 0);
	/* renormalised 0.625 / 0.375: 20000 draws, sd ~68 */
	ck_assert_int_lt(abs(hist[0] - 12500), 400);
	ck_assert_int_lt(abs(hist[1] - 7500), 400);
	engine_sampler_free(s);

	p.top_p = 0.9f; /* 0.8 < 0.9 <= 0.95: keeps 0, 1, 2 */
	s = sampler_make(&p, 4);
	sample_hist(s, l, 4, 20000, hist);
	ck_assert_int_gt(hist[2], 0);
	ck_assert_int_eq(hist[3], 0);
	engine_sampler_free(s);
}
END_TEST

START_TEST(test_sampler_top_p_large_vocab)
{
	/* More than 1024 candidates and no top_k: top_p sorts on its own. */
	struct engine_sampling p = sampling_plain(1.0f, 5);
	struct engine_sampler *s;
	const uint32_t n = 5000;
	float *l = malloc(n * sizeof(*l)), *buf = malloc(n * sizeof(*buf));
	int i, max_id = 0;

	ck_assert_ptr_nonnull(l);
	ck_assert_ptr_nonnull(buf);
	/* uniform: the first half by id is needed, past the first 256 */
	for (i = 0; i < (int)n; i++)
		l[i] = 0.0f;
	p.top_p = 0.5f;
	s = sampler_make(&p, n);
	for (i = 0; i < 1000; i++) {
		int32_t t;

		memcpy(buf, l, n * sizeof(*l));
		t = engine_sampler_sample(s, buf, NULL, 0);
		ck_assert_int_ge(t, 0);
		ck_assert_int_lt(t, 2510);
		if (t > max_id)
			max_id = t;
	}
	ck_assert_int_gt(max_id, 2000);
	engine_sampler_free(s);

	/* three tokens hold the mass; the 256-guess suffices */
	for (i = 0; i < (int)n; i++)
		l[i] = 0.0f;
	l[4000] = 20.0f;
	l[17] = 19.5f;
	l[3333] = 10.0f;
	p.top_p = 0.9f;
	s = sampler_make(&p, n);
	for (i = 0; i < 2000; i++) {
		int32_t t;

		memcpy(buf, l, n * sizeof(*l));
		t = engine_sampler_sample(s, buf, NULL, 0);
		ck_assert(t == 4000 || t == 17);
	}
	engine_sampler_free(s);
	free(l);
	free(buf);
}
END_TEST

START_TEST(test_sampler_min_p_cuts)
{
	struct engine_sampling p = sampling_plain(1.0f, 3);
	struct engine_sampler *s;
	float l[4];
	int hist[4];

	logits_4(l);
	p.min_p = 0.2f; /* keeps p >= 0.1: ids 0, 1, 2 */
	s = sampler_make(&p, 4);
	sample_hist(s, l, 4, 20000, hist);
	ck_assert_int_eq(hist[3], 0);
	ck_assert_int_gt(hist[2], 0);
	engine_sampler_free(s);

	p.min_p = 0.7f; /* keeps p >= 0.35: id 0 alone */
	s = sampler_make(&p, 4);
	sample_hist(s, l, 4, 2000, hist);
	ck_assert_int_eq(hist[0], 2000);
	engine_sampler_free(s);

	p.min_p = 5.0f; /* more than the best has: the best stays */
	s = sampler_make(&p, 4);
	sample_hist(s, l, 4, 100, hist);
	ck_assert_int_eq(hist[0], 100);
	engine_sampler_free(s);
}
END_TEST

START_TEST(test_sampler_top_k_large_vocab)
{
	struct engine_sampling p = sampling_plain(1e6f, 11);
	struct engine_sampler *s;
	const uint32_t n = 151936;
	float *l = malloc(n * sizeof(*l)), *buf = malloc(n * sizeof(*buf));
	char seen[40] = { 0 };
	uint64_t x = 1;
	uint32_t i;
	int k, n_seen = 0;

	ck_assert_ptr_nonnull(l);
	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		l[i] = (float)((x >> 40) % 1000) / 100.0f; /* 0 .. 9.99 */
	}
	/* the top 40: ids 1000, 1100, ... at 20 + j */
	for (k = 0; k < 40; k++)
		l[1000 + 100 * k] = 20.0f + (float)k;
	p.top_k = 40; /* a huge temperature makes the 40 near uniform */
	s = sampler_make(&p, n);
	for (k = 0; k < 800; k++) {
		int32_t t;

		memcpy(buf, l, n * sizeof(*l));
		t = engine_sampler_sample(s, buf, NULL, 0);
		ck_assert_int_ge(t, 1000);
		ck_assert_int_eq((t - 1000) % 100, 0);
		ck_assert_int_lt((t - 1000) / 100, 40);
		if (!seen[(t - 1000) / 100]++)
			n_seen++;
	}
	ck_assert_int_eq(n_seen, 40);
	engine_sampler_free(s);
	free(l);
	free(buf);
}
END_TEST

/*
 * top_k keeps the k best by (logit, then the lower id), whatever the
 * groups of 16 it passes over at once hold: coarse logits (many ties at
 * the cut), a vocabulary that is no multiple of 16, several k; each draw
 * (a huge temperature: near uniform over the kept) is one of the k a
 * sort keeps, and all k come out.
 */
static int cand_cmp(const void *pa, const void *pb)
{
	const float *a = pa, *b = pb; /* { logit, id } */

	if (a[0] != b[0])
		return a[0] > b[0] ? -1 : 1;
	return a[1] < b[1] ? -1 : a[1] > b[1];
}

START_TEST(test_sampler_top_k_matches_sort)
{
	static const int ks[] = { 1, 7, 40, 100 };
	const uint32_t n = 4093;
	float *l = malloc(n * sizeof(*l)), *buf = malloc(n * sizeof(*buf));
	float(*sorted)[2] = malloc(n * sizeof(*sorted));
	char *kept = malloc(n), *seen = malloc(n);
	uint64_t x = 99;
	uint32_t i;

	ck_assert(l && buf && sorted && kept && seen);
	for (size_t c = 0; c < sizeof(ks) / sizeof(ks[0]); c++) {
		struct engine_sampling p = sampling_plain(1e6f, 3 + c);
		struct engine_sampler *s;
		int k = ks[c], n_seen = 0, bad = -1;

		for (i = 0; i < n; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			/* 8 values, rising through the vocabulary (the cut
			 * moves up as the pass goes), ties at the cut */
			l[i] = 0.25f * (float)((x >> 33) % 8) +
			       0.5f * (float)(i / 512);
			/* half of them off the grid, a little */
			if ((x >> 40) & 1)
				l[i] += 1e-4f * (float)((x >> 44) % 1000);
			sorted[i][0] = l[i];
			sorted[i][1] = (float)i;
		}
		qsort(sorted, n, sizeof(*sorted), cand_cmp);
		memset(kept, 0, n);
		memset(seen, 0, n);
		for (i = 0; i < (uint32_t)k; i++)
			kept[(uint32_t)sorted[i][1]] = 1;
		p.top_k = k;
		s = sampler_make(&p, n);
		for (i = 0; i < 60u * (uint32_t)k; i++) {
			int32_t t;

			memcpy(buf, l, n * sizeof(*l));
			t = engine_sampler_sample(s, buf, NULL, 0);
			if (t < 0 || (uint32_t)t >= n || !kept[t]) {
				bad = t;
				break;
			}
			if (!seen[t]++)
				n_seen++;
		}
		ck_assert_msg(bad < 0,
			      "top_k %d drew %d, not among the %d best", k, bad,
			      k);
		ck_assert_int_eq(n_seen, k);
		engine_sampler_free(s);
	}
	free(l);
	free(buf);
	free(sorted);
	free(kept);
	free(seen);
}
END_TEST

START_TEST(test_sampler_penalty)
{
	struct engine_sampling p = sampling_plain(0.0f, 1);
	struct engine_sampler *s;
	float l[6];
	const int32_t hist1[] = {
		0, 0, 0, 2, 99, -5
	}; /* out of range ignored */
	const int32_t hist2[] = { 0, 5, 5, 5 };

	p.repeat_penalty = 1.25f;
	p.repeat_last_n = 64;
	s = sampler_make(&p, 6);
	l[0] = 2.0f;
	l[1] = 1.9f;
	l[2] = -1.0f;
	l[3] = -1.1f;
	l[4] = 0;
	l[5] = 0;
	/* 2.0 / 1.25 = 1.6 < 1.9: the repeated token loses */
	ck_assert_int_eq(engine_sampler_sample(s, l, hist1, 6), 1);
	ck_assert_float_eq(l[0], 1.6f); /* once, though seen 3 times */
	ck_assert_float_eq(l[1], 1.9f);
	ck_assert_float_eq(l[2], -1.25f); /* negative: multiplied */
	ck_assert_float_eq(l[3], -1.1f);
	engine_sampler_free(s);

	/* the window: token 0 is older than the last 3 */
	p.repeat_last_n = 3;
	s = sampler_make(&p, 6);
	l[0] = 2.0f;
	l[1] = 1.9f;
	l[5] = 0.5f;
	ck_assert_int_eq(engine_sampler_sample(s, l, hist2, 4), 0);
	ck_assert_float_eq(l[0], 2.0f);
	ck_assert_float_eq(l[5], 0.4f);
	engine_sampler_free(s);

	/* -1: the whole history */
	p.repeat_last_n = -1;
	s = sampler_make(&p, 6);
	l[0] = 2.0f;
	l[1] = 1.9f;
	ck_assert_int_eq(engine_sampler_sample(s, l, hist2, 4), 1);
	engine_sampler_free(s);

	/* 0: off */
	p.repeat_last_n = 0;
	s = sampler_make(&p, 6);
	l[0] = 2.0f;
	l[1] = 1.9f;
	ck_assert_int_eq(engine_sampler_sample(s, l, hist2, 4), 0);
	ck_assert_float_eq(l[0], 2.0f);
	engine_sampler_free(s);
}
END_TEST

START_TEST(test_sampler_same_seed_same_tokens)
{
	struct engine_sampling p;
	struct engine_sampler *a, *b, *c;
	float l[32];
	int i, differ = 0;

	engine_sampling_defaults(&p); /* the full chain */
	p.seed = 42;
	for (i = 0; i < 32; i++)
		l[i] = sinf((float)i) * 3.0f;
	a = sampler_make(&p, 32);
	b = sampler_make(&p, 32);
	p.seed = 43;
	c = sampler_make(&p, 32);
	for (i = 0; i < 1000; i++) {
		int32_t ta = sample_copy(a, l, 32);
		int32_t tc = sample_copy(c, l, 32);

		ck_assert_int_eq(ta, sample_copy(b, l, 32));
		differ += ta != tc;
	}
	/* the draw is far from deterministic here (several tokens kept) */
	ck_assert_int_gt(differ, 100);
	engine_sampler_free(a);
	engine_sampler_free(b);
	engine_sampler_free(c);
}
END_TEST

START_TEST(test_sampler_temperature_matches_softmax)
{
	const float l[8] = { 1.0f, 0.5f, -0.3f, 2.0f, 0.0f, 1.7f, -2.0f, 0.9f };
	const float temps[3] = { 0.5f, 1.0f, 2.0f };
	const int n_draws = 200000;
	int hist[8], t, i;

	for (t = 0; t < 3; t++) {
		struct engine_sampling p = sampling_plain(temps[t], 1000 + t);
		struct engine_sampler *s = sampler_make(&p, 8);
		double prob[8], sum = 0.0;

		for (i = 0; i < 8; i++) {
			prob[i] = exp((double)l[i] / temps[t]);
			sum += prob[i];
		}
		sample_hist(s, l, 8, n_draws, hist);
		for (i = 0; i < 8; i++) {
			double pr = prob[i] / sum;
			double sd = sqrt(pr * (1.0 - pr) / n_draws);
			double f = (double)hist[i] / n_draws;

			/* 5 standard deviations (fixed seed: no flake) */
			ck_assert_msg(fabs(f - pr) <= 5.0 * sd + 1e-9,
				      "temp %g id %d: freq %g, softmax %g",
				      temps[t], i, f, pr);
		}
		engine_sampler_free(s);
	}
}
END_TEST

START_TEST(test_sampler_rejects_bad_params)
{
	struct engine_sampling p = sampling_plain(1.0f, 1);
	struct engine_sampler *s = (void *)1;
	struct err err = { 0 };

	ck_assert_int_eq(engine_sampler_new(&s, &p, 0, &err), -EINVAL);
	ck_assert_ptr_null(s);
	p.temperature = NAN;
	ck_assert_int_eq(engine_sampler_new(&s, &p, 8, &err), -EINVAL);
	p.temperature = 1.0f;
	p.repeat_penalty = 0.0f;
	ck_assert_int_eq(engine_sampler_new(&s, &p, 8, &err), -EINVAL);
	ck_assert_int_eq(err.code, EINVAL);
	ck_assert(strlen(err.msg) > 0);
	p.repeat_penalty = 1.0f;
	p.repeat_last_n = -2;
	ck_assert_int_eq(engine_sampler_new(&s, &p, 8, &err), -EINVAL);
	engine_sampler_free(NULL);
}
END_TEST

static void sampler_tests(TCase *tc)
{
	tcase_add_test(tc, test_sampler_defaults_are_llama_cpp);
	tcase_add_test(tc, test_sampler_greedy_lowest_id_on_ties);
	tcase_add_test(tc, test_sampler_greedy_matches_plain_loop);
	tcase_add_test(tc, test_sampler_tiny_temperature_is_greedy);
	tcase_add_test(tc, test_sampler_top_k_1_is_greedy);
	tcase_add_test(tc, test_sampler_top_p_cuts);
	tcase_add_test(tc, test_sampler_top_p_large_vocab);
	tcase_add_test(tc, test_sampler_min_p_cuts);
	tcase_add_test(tc, test_sampler_top_k_large_vocab);
	tcase_add_test(tc, test_sampler_top_k_matches_sort);
	tcase_add_test(tc, test_sampler_penalty);
	tcase_add_test(tc, test_sampler_same_seed_same_tokens);
	tcase_add_test(tc, test_sampler_temperature_matches_softmax);
	tcase_add_test(tc, test_sampler_rejects_bad_params);
}

const struct check_main check_main = {
	.name = "sampler",
	.timeout = 60,
	.add_tests = sampler_tests,
};
