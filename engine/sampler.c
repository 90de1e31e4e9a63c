// SPDX-License-Identifier: MIT
/*
 * sampler: n_vocab logits -> one token id.
 *
 * The chain is llama.cpp's common sampler chain with its default order
 * (common/common.h, common_params_sampling::samplers), restricted to the
 * stages we offer:
 *
 *   penalties -> top_k -> top_p -> min_p -> temperature -> dist
 *
 * Every stage works on the candidates the previous one left, exactly as
 * llama.cpp's does (src/llama-sampler.cpp): top_p's softmax is over the
 * top_k survivors, min_p compares raw (not yet tempered) logits, and the
 * draw is a softmax over what is left. A temperature <= 0 is greedy: the
 * argmax of the penalised logits, the lowest id on exact ties (the rule the
 * golden files were made with).
 *
 * The random draw uses our own generator (xoshiro256** seeded through
 * splitmix64), not std::mt19937, so the same seed gives the same tokens
 * here on every run but not the tokens llama.cpp would draw.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* Above this many candidates top_p first tries the best 256 (llama.cpp). */
#define SAMPLER_TOP_P_GUESS 256

struct sampler_cand {
	int32_t id;
	float logit;
	float p;
};

struct engine_sampler {
	struct engine_sampling params;
	uint32_t n_vocab;
	uint64_t rng[4];
	struct sampler_cand *cand; /* n_vocab */
	struct sampler_cand *heap; /* n_vocab, scratch for the top-n select */
	uint32_t *mark;		   /* n_vocab stamps: penalised this call? */
	uint32_t stamp;
};

void engine_sampling_defaults(struct engine_sampling *s)
{
	/*
	 * llama.cpp's common_params_sampling, except the seed: llama.cpp's
	 * default LLAMA_DEFAULT_SEED (0xFFFFFFFF) means "pick a random seed";
	 * here it is an ordinary, fixed seed so that a generation can be
	 * repeated. A caller wanting randomness passes its own seed.
	 */
	s->temperature = 0.8f;
	s->top_k = 40;
	s->top_p = 0.95f;
	s->min_p = 0.05f;
	s->repeat_penalty = 1.0f;
	s->repeat_last_n = 64;
	s->seed = 0xFFFFFFFFu;
}

/* ---- random numbers ---------------------------------------------------- */

static uint64_t sampler_splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t sampler_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t sampler_next(struct engine_sampler *s)
{
	uint64_t *r = s->rng;
	uint64_t out = sampler_rotl(r[1] * 5, 7) * 9;
	uint64_t t = r[1] << 17;

	r[2] ^= r[0];
	r[3] ^= r[1];
	r[1] ^= r[2];
	r[0] ^= r[3];
	r[2] ^= t;
	r[3] = sampler_rotl(r[3], 45);
	return out;
}

/* Uniform in [0, 1) with 53 random bits. */
static double sampler_uniform(struct engine_sampler *s)
{
	return (double)(sampler_next(s) >> 11) * 0x1.0p-53;
}

/* ---- candidates -------------------------------------------------------- */

/* The order every sort here uses: higher logit first, then lower id. */
static inline int sampler_better(const struct sampler_cand *a,
				 const struct sampler_cand *b)
{
	if (a->logit != b->logit)
		return a->logit > b->logit;
	return a->id < b->id;
}

static int sampler_cmp(const void *pa, const void *pb)
{
	const struct sampler_cand *a = pa, *b = pb;

	if (sampler_better(a, b))
		return -1;
	return sampler_better(b, a);
}

/* Min-heap on sampler_better: heap[0] is the worst of the kept ones. */
static void sampler_heap_down(struct sampler_cand *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, w = i;
		struct sampler_cand t;

		if (l < n && sampler_better(&h[w], &h[l]))
			w = l;
		if (r < n && sampler_better(&h[w], &h[r]))
			w = r;
		if (w == i)
			return;
		t = h[i];
		h[i] = h[w];
		h[w] = t;
		i = w;
	}
}

/*
 * Move the best k of c[0..n) to the front, sorted. O(n log k): a heap of
 * the k best, so that a 152k vocabulary with top_k 40 costs one compare
 * for most tokens.
 */
static void sampler_select(struct engine_sampler *s, struct sampler_cand *c,
			   size_t n, size_t k)
{
	struct sampler_cand *h = s->heap;
	size_t i;

	if (k >= n) {
		qsort(c, n, sizeof(*c), sampler_cmp);
		return;
	}
	memcpy(h, c, k * sizeof(*c));
	for (i = k / 2; i-- > 0;)
		sampler_heap_down(h, k, i);
	for (i = k; i < n; i++) {
		if (sampler_better(&c[i], &h[0])) {
			h[0] = c[i];
			sampler_heap_down(h, k, 0);
		}
	}
	qsort(h, k, sizeof(*h), sampler_cmp);
	memcpy(c, h, k * sizeof(*c));
}

/* logits top_k passes over a group at a time (sampler_top_k) */
#define SAMPLER_GROUP 16

/* whether any of x[0..SAMPLER_GROUP) is at least t (NaN is not) */
static inline bool sampler_any_at_least(const float *x, float t)
{
	int any = 0;

	for (int j = 0; j < SAMPLER_GROUP; j++)
		any |= x[j] >= t;
	return any;
}

/*
 * top_k straight from the logits: the k best into c[0..k), sorted, with c
 * as the heap, so that a 152k vocabulary costs no pass over an n_vocab
 * candidate array. Most logits are below the worst one kept (c[0]): a
 * group of SAMPLER_GROUP without one at least as high is passed in one
 * vector compare (none of them is sampler_better than c[0]), the others
 * are taken one by one. The mount samples each session after every step
 * on one thread (gpu.md, "Many sequences a step"): this was 16
 * instructions a logit, 2.4 M a sample.
 */
static void sampler_top_k(struct sampler_cand *c, const float *logits, size_t n,
			  size_t k)
{
	struct sampler_cand x;
	size_t i, end;

	for (i = 0; i < k; i++) {
		c[i].id = (int32_t)i;
		c[i].logit = logits[i];
	}
	for (i = k / 2; i-- > 0;)
		sampler_heap_down(c, k, i);
	for (i = k; i < n; i = end) {
		end = n - i < SAMPLER_GROUP ? n : i + SAMPLER_GROUP;
		if (end - i == SAMPLER_GROUP &&
		    !sampler_any_at_least(logits + i, c[0].logit))
			continue;
		for (; i < end; i++) {
			x.id = (int32_t)i;
			x.logit = logits[i];
			if (sampler_better(&x, &c[0])) {
				c[0] = x;
				sampler_heap_down(c, k, 0);
			}
		}
	}
	qsort(c, k, sizeof(*c), sampler_cmp);
}

/* c[i].p = softmax of the logits over c[0..n). */
static void sampler_softmax(struct sampler_cand *c, size_t n)
{
	float max = c[0].logit;
	double sum = 0.0;
	size_t i;

	for (i = 1; i < n; i++)
		if (c[i].logit > max)
			max = c[i].logit;
	for (i = 0; i < n; i++) {
		c[i].p = expf(c[i].logit - max);
		sum += c[i].p;
	}
	for (i = 0; i < n; i++)
		c[i].p = (float)(c[i].p / sum);
}

/* ---- the stages -------------------------------------------------------- */

/*
 * llama.cpp's repetition penalty: each distinct token of the last
 * repeat_last_n has its logit divided by the penalty when positive and
 * multiplied when not, so that it always becomes less likely.
 */
static void sampler_penalize(struct engine_sampler *s, float *logits,
			     const int32_t *history, size_t n_history)
{
	const struct engine_sampling *p = &s->params;
	size_t i, start = 0;

	if (p->repeat_penalty == 1.0f || p->repeat_last_n == 0 || !history)
		return;
	if (p->repeat_last_n > 0 && n_history > (size_t)p->repeat_last_n)
		start = n_history - (size_t)p->repeat_last_n;
	if (++s->stamp == 0) {
		memset(s->mark, 0, s->n_vocab * sizeof(*s->mark));
		s->stamp = 1;
	}
	for (i = start; i < n_history; i++) {
		int32_t t = history[i];

		if (t < 0 || (uint32_t)t >= s->n_vocab ||
		    s->mark[t] == s->stamp)
			continue;
		s->mark[t] = s->stamp;
		if (logits[t] <= 0.0f)
			logits[t] *= p->repeat_penalty;
		else
			logits[t] /= p->repeat_penalty;
	}
}

#define SAMPLER_LANES 16

/*
 * The first index of the largest logit, as the plain loop `if (x[i] >
 * x[best]) best = i` finds it: a NaN is never larger, so the maximum is
 * over the others, unless x[0] is NaN, which nothing beats. Written as 16
 * independent lanes, each keeping its first maximum, then the lanes
 * combined (the largest value, the smallest index on ties), so that the
 * compiler makes the loop a vector one: greedy decoding takes this over
 * the whole vocabulary (151,936 logits) for every token of every session,
 * on the one thread the others wait for (the scalar loop was 3-4% of a
 * 4-session decode through the mount).
 */
static int32_t sampler_argmax(const float *x, uint32_t n)
{
	float lane[SAMPLER_LANES];
	uint32_t at[SAMPLER_LANES], i, k, best = 0;
	const uint32_t end = n - n % SAMPLER_LANES;

	if (n == 0 || isnan(x[0]))
		return 0;
	for (k = 0; k < SAMPLER_LANES; k++) {
		lane[k] = x[0];
		at[k] = 0;
	}
	for (i = 0; i < end; i += SAMPLER_LANES)
		for (k = 0; k < SAMPLER_LANES; k++) {
			const bool more = x[i + k] > lane[k];

			lane[k] = more ? x[i + k] : lane[k];
			at[k] = more ? i + k : at[k];
		}
	for (k = 0; k < SAMPLER_LANES; k++)
		if (lane[k] > x[best] || (lane[k] == x[best] && at[k] < best))
			best = at[k];
	for (i = end; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return (int32_t)best;
}

/* Keep the smallest sorted prefix whose probability reaches top_p. */
static size_t sampler_top_p(struct engine_sampler *s, struct sampler_cand *c,
			    size_t n, bool *sorted)
{
	float cum = 0.0f;
	size_t i, k = n;

	sampler_softmax(c, n);
	if (!*sorted) {
		k = n > 1024 ? SAMPLER_TOP_P_GUESS : n;
		sampler_select(s, c, n, k);
	}
	for (i = 0; i < n; i++) {
		cum += c[i].p;
		if (cum >= s->params.top_p)
			break;
		if (i + 1 == k && k < n) {
			/* the best 256 were not enough: sort them all */
			k = n;
			sampler_select(s, c, n, n);
		}
	}
	*sorted = true;
	return i < n ? i + 1 : n;
}

/* Keep the tokens whose probability is at least min_p times the best's. */
static size_t sampler_min_p(struct sampler_cand *c, size_t n, bool sorted,
			    float min_p)
{
	float max = c[0].logit, min_logit;
	size_t i, kept = 0;

	for (i = 1; i < n && !sorted; i++)
		if (c[i].logit > max)
			max = c[i].logit;
	min_logit = max + logf(min_p);
	for (i = 0; i < n; i++)
		if (c[i].logit >= min_logit)
			c[kept++] = c[i];
	if (kept == 0) {
		/* min_p > 1 asks for more than the best has: keep the best */
		for (i = 0; i < n; i++)
			if (c[i].logit == max)
				break;
		c[0] = c[i < n ? i : 0];
		kept = 1;
	}
	return kept;
}

/* Draw from softmax(c[0..n)) as llama.cpp's dist sampler does. */
static int32_t sampler_draw(struct engine_sampler *s, struct sampler_cand *c,
			    size_t n)
{
	double sum = 0.0, run = 0.0, target;
	size_t i, best = 0;
	float max;

	for (i = 1; i < n; i++)
		if (sampler_better(&c[i], &c[best]))
			best = i;
	max = c[best].logit;
	/* a tiny temperature overflows: its limit is greedy */
	if (!isfinite(max))
		return c[best].id;
	for (i = 0; i < n; i++) {
		c[i].p = expf(c[i].logit - max);
		sum += c[i].p;
	}
	target = sum * sampler_uniform(s);
	for (i = 0; i < n; i++) {
		run += c[i].p;
		if (run >= target && c[i].p > 0.0f)
			return c[i].id;
	}
	return c[best].id;
}

int32_t engine_sampler_sample(struct engine_sampler *s, float *logits,
			      const int32_t *history, size_t n_history)
{
	const struct engine_sampling *p = &s->params;
	struct sampler_cand *c = s->cand;
	size_t i, n = s->n_vocab;
	bool sorted = false;

	sampler_penalize(s, logits, history, n_history);
	if (p->temperature <= 0.0f)
		return sampler_argmax(logits, s->n_vocab);

	if (p->top_k > 0 && (size_t)p->top_k < n) {
		n = (size_t)p->top_k;
		sampler_top_k(c, logits, s->n_vocab, n);
		sorted = true;
	} else {
		for (i = 0; i < n; i++) {
			c[i].id = (int32_t)i;
			c[i].logit = logits[i];
		}
		if (p->top_k > 0) {
			qsort(c, n, sizeof(*c), sampler_cmp);
			sorted = true;
		}
	}
	if (p->top_p < 1.0f && n > 1)
		n = sampler_top_p(s, c, n, &sorted);
	if (p->min_p > 0.0f && n > 1)
		n = sampler_min_p(c, n, sorted, p->min_p);
	for (i = 0; i < n; i++)
		c[i].logit /= p->temperature;
	return sampler_draw(s, c, n);
}

/* ---- life cycle -------------------------------------------------------- */

int engine_sampler_new(struct engine_sampler **out,
		       const struct engine_sampling *params, uint32_t n_vocab,
		       struct err *err)
{
	struct engine_sampler *s;
	uint64_t x;
	int i;

	*out = NULL;
	if (n_vocab == 0 || n_vocab > INT32_MAX)
		return err_set(err, EINVAL, "sampler: vocabulary of %u tokens",
			       n_vocab);
	if (isnan(params->temperature) || isinf(params->temperature))
		return err_set(err, EINVAL,
			       "sampler: temperature must be finite");
	if (isnan(params->top_p) || isnan(params->min_p))
		return err_set(err, EINVAL,
			       "sampler: top_p and min_p must be numbers");
	if (!(params->repeat_penalty > 0.0f) || isinf(params->repeat_penalty) ||
	    isinf(1.0f / params->repeat_penalty))
		return err_set(
			err, EINVAL,
			"sampler: repeat_penalty must be finite and > 0");
	if (params->repeat_last_n < -1)
		return err_set(
			err, EINVAL,
			"sampler: repeat_last_n must be >= -1 (-1: all)");

	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(err, ENOMEM, "sampler: out of memory");
	s->cand = malloc(n_vocab * sizeof(*s->cand));
	s->heap = malloc(n_vocab * sizeof(*s->heap));
	s->mark = calloc(n_vocab, sizeof(*s->mark));
	if (!s->cand || !s->heap || !s->mark) {
		engine_sampler_free(s);
		return err_set(err, ENOMEM,
			       "sampler: out of memory for %u tokens", n_vocab);
	}
	s->params = *params;
	s->n_vocab = n_vocab;
	x = params->seed;
	for (i = 0; i < 4; i++)
		s->rng[i] = sampler_splitmix64(&x);
	*out = s;
	return 0;
}

void engine_sampler_free(struct engine_sampler *s)
{
	if (!s)
		return;
	free(s->cand);
	free(s->heap);
	free(s->mark);
	free(s);
}
