/* SPDX-License-Identifier: MIT */
/*
 * llmfs-bench: the engine's speed measured the way llama.cpp's llama-bench
 * measures it, so that tools/bench-cpu.sh can put the two side by side.
 *
 *   $ build/bin/llmfs-bench -m model.gguf -p 512 -n 128 -d 1024 -t 2 -r 3
 *   pp512 d0 t/s 171.20 (3 reps, 2 threads)
 *
 * As llama-bench does (tools/llama-bench/llama-bench.cpp, test_prompt and
 * test_gen): each repetition starts from an empty sequence, fills the
 * depth (-d, untimed) with a prompt, then times either a prompt of -p
 * random tokens in batches of 512 (BOS first where the vocabulary adds
 * one) or -n random tokens decoded one at a time; logits of the last
 * token of each batch, as llama_batch_get_one asks. One untimed warm-up
 * run first. Prints the mean tokens/s over the repetitions, as
 * llama-bench's avg_ts (and their standard deviation).
 *
 * --membw N: instead, the machine's memory read bandwidth: N MiB read by
 * each of -t threads, summed with 32-byte loads, best of -r passes (the
 * roofline tools/bench-cpu.sh compares decode with).
 *
 * -p and -n together: the prompt's test, then the decode's, one load.
 *
 * -s N with -n: N sequences decode together, one token each per forward
 * pass (what N sessions through the mount make of a step, without the
 * sampling and the file system); t/s is then their aggregate.
 *
 * --placement LINE: before the runs, move tensors as a line written to
 * the mount's placement file does ("all gpu0": the CUDA backend, the
 * path the mount computes on; tools/gpu-check.sh's gpu0bench; "auto
 * split": the planner's split, tools/bench-placement.sh); --cpu-moe
 * keeps a MoE's experts on the CPU ('all-but-experts gpu0': attention on
 * the GPU, the experts in host RAM).
 *
 * -c N: the model's context (0: its default, as the mount's: the
 * training context, 4096 at most, which the planner may shrink to fit a
 * GPU, 'auto all-gpu-ctx'); without it the tests' own, depth + the
 * longer test, as llama-bench's.
 *
 * --devices SPEC: the devices the planner plans for, as llmfs's option
 * ("auto": the CUDA module's GPUs; "gpu0:vram=8G": the card capped).
 * --plan: print the planner's alternatives (the end of `placement`)
 * after the placement, and after a -n run once more with the measured
 * decode speed beside the estimate of the placement it ran; without -p
 * and -n only the first.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/engine.h"

#define BENCH_BATCH 512 /* llama-bench's default n_batch / n_ubatch */
#define BENCH_SEQS 64	/* -s at most */

struct bench_args {
	const char *model;
	const char *placement; /* a `placement` line, or NULL */
	const char *devices;   /* --devices, or NULL */
	bool plan;
	long n_prompt, n_gen, depth, reps, threads, membw_mib, seqs;
	long ctx; /* -c; -1: depth + the longer test */
	bool batch_exact;
	bool no_pack;
	bool cpu_moe; /* after placement: 'experts cpu' */
};

static void bench_usage(FILE *f)
{
	fputs("usage: llmfs-bench -m MODEL.gguf (-p N | -n N) [options]\n"
	      "       llmfs-bench --membw MIB [-t N] [-r N]\n"
	      "  -m, --model FILE   GGUF model\n"
	      "  -p, --n-prompt N   time a prompt of N tokens (pp)\n"
	      "  -n, --n-gen N      time N decoded tokens (tg)\n"
	      "  -d, --depth N      tokens in the context before (untimed)\n"
	      "  -c, --ctx N        the model's context (0: its default)\n"
	      "  -r, --reps N       repetitions (5)\n"
	      "  -s, --seqs N       with -n: N sequences decoding together\n"
	      "  -t, --threads N    threads (0: the engine's default)\n"
	      "      --batch-exact  batches in the one-token path's order\n"
	      "      --no-pack      weights as the file has them (no panels)\n"
	      "      --placement LINE  move tensors first, as a line of the\n"
	      "                     mount's placement file does ('all gpu0')\n"
	      "      --devices SPEC  devices as llmfs --devices ('auto',\n"
	      "                     'gpu0:vram=8G': a capped card)\n"
	      "      --plan         print the planner's alternatives\n"
	      "      --cpu-moe      a MoE's experts stay on the CPU\n"
	      "      --membw MIB    memory read bandwidth, MIB per thread\n",
	      f);
}

static long bench_long(const char *opt, const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "llmfs-bench: bad value for %s: '%s'\n", opt,
			s);
		bench_usage(stderr);
		exit(2);
	}
	return v;
}

static void bench_parse(int argc, char **argv, struct bench_args *a)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "n-prompt", required_argument, NULL, 'p' },
		{ "n-gen", required_argument, NULL, 'n' },
		{ "depth", required_argument, NULL, 'd' },
		{ "ctx", required_argument, NULL, 'c' },
		{ "reps", required_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 't' },
		{ "seqs", required_argument, NULL, 's' },
		{ "membw", required_argument, NULL, 'M' },
		{ "batch-exact", no_argument, NULL, 'E' },
		{ "no-pack", no_argument, NULL, 'P' },
		{ "placement", required_argument, NULL, 'L' },
		{ "devices", required_argument, NULL, 'D' },
		{ "plan", no_argument, NULL, 'A' },
		{ "cpu-moe", no_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	memset(a, 0, sizeof(*a));
	a->reps = 5;
	a->seqs = 1;
	a->ctx = -1;
	while ((c = getopt_long(argc, argv, "m:p:n:d:c:r:t:s:h", opts, NULL)) !=
	       -1) {
		switch (c) {
		case 'm': a->model = optarg; break;
		case 'p':
			a->n_prompt = bench_long("-p", optarg, 1, 1 << 20);
			break;
		case 'n':
			a->n_gen = bench_long("-n", optarg, 1, 1 << 20);
			break;
		case 'd':
			a->depth = bench_long("-d", optarg, 0, 1 << 20);
			break;
		case 'c': a->ctx = bench_long("-c", optarg, 0, 1 << 24); break;
		case 'r': a->reps = bench_long("-r", optarg, 1, 1000); break;
		case 't': a->threads = bench_long("-t", optarg, 0, 4096); break;
		case 's':
			a->seqs = bench_long("-s", optarg, 1, BENCH_SEQS);
			break;
		case 'M':
			a->membw_mib = bench_long("--membw", optarg, 1,
						  1 << 16);
			break;
		case 'E': a->batch_exact = true; break;
		case 'P': a->no_pack = true; break;
		case 'L': a->placement = optarg; break;
		case 'D': a->devices = optarg; break;
		case 'A': a->plan = true; break;
		case 'C': a->cpu_moe = true; break;
		case 'h': bench_usage(stdout); exit(0);
		default: bench_usage(stderr); exit(2);
		}
	}
	if (optind < argc ||
	    (!a->membw_mib && (!a->model || (a->n_prompt && a->seqs > 1) ||
			       (!a->n_prompt && !a->n_gen && !a->plan) ||
			       (a->seqs > 1 && !a->n_gen)))) {
		fputs("llmfs-bench: need -m and -p or -n or both (-s only with "
		      "-n alone), or --plan, or --membw\n",
		      stderr);
		bench_usage(stderr);
		exit(2);
	}
}

static double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- memory bandwidth -------------------------------------------------- */

struct membw_job {
	const uint64_t *buf;
	size_t n; /* uint64_t words */
	uint64_t sum;
	pthread_barrier_t *bar;
	double t0, t1;
};

/* 32 bytes, as one AVX2 load (GCC's vector extension, any target) */
typedef uint64_t membw_vec __attribute__((vector_size(32), aligned(32)));

/*
 * Read the buffer once: 32-byte loads into four independent sums, so
 * that loads, not adds, bind (as a matmul streams its weights).
 */
static void *membw_read(void *arg)
{
	struct membw_job *j = arg;
	const membw_vec *v = (const membw_vec *)j->buf;
	membw_vec s0 = { 0 }, s1 = { 0 }, s2 = { 0 }, s3 = { 0 }, s;
	size_t i, nv = j->n / 4;

	pthread_barrier_wait(j->bar);
	j->t0 = bench_now();
	for (i = 0; i + 4 <= nv; i += 4) {
		s0 += v[i];
		s1 += v[i + 1];
		s2 += v[i + 2];
		s3 += v[i + 3];
	}
	j->t1 = bench_now();
	s = s0 ^ s1 ^ s2 ^ s3;
	j->sum = s[0] ^ s[1] ^ s[2] ^ s[3];
	return NULL;
}

static int bench_membw(const struct bench_args *a)
{
	const long nt = a->threads > 0 ? a->threads : 1;
	const size_t words = ((size_t)a->membw_mib << 20) / 8;
	struct membw_job *jobs = calloc((size_t)nt, sizeof(*jobs));
	pthread_t *th = calloc((size_t)nt, sizeof(*th));
	uint64_t *buf = aligned_alloc(64, words * 8 * (size_t)nt);
	pthread_barrier_t bar;
	double best = 0.0;
	long r, t;

	if (!jobs || !th || !buf) {
		fputs("llmfs-bench: out of memory\n", stderr);
		return 1;
	}
	for (size_t i = 0; i < words * (size_t)nt; i++)
		buf[i] = i;
	pthread_barrier_init(&bar, NULL, (unsigned)nt);
	for (r = 0; r < a->reps + 1; r++) {
		double t0 = 1e300, t1 = 0.0, gbs;

		for (t = 0; t < nt; t++) {
			jobs[t] = (struct membw_job){
				buf + words * t, words, 0, &bar, 0, 0
			};
			pthread_create(&th[t], NULL, membw_read, &jobs[t]);
		}
		for (t = 0; t < nt; t++) {
			pthread_join(th[t], NULL);
			t0 = fmin(t0, jobs[t].t0);
			t1 = fmax(t1, jobs[t].t1);
		}
		gbs = words * 8.0 * nt / (t1 - t0) / 1e9;
		/* the first pass is a warm-up (page faults, frequency) */
		if (r > 0 && gbs > best)
			best = gbs;
	}
	printf("membw GB/s %.2f (%ld threads, %ld MiB each, best of %ld)\n",
	       best, nt, a->membw_mib, a->reps);
	pthread_barrier_destroy(&bar);
	free(buf);
	free(th);
	free(jobs);
	return 0;
}

/* ---- the model --------------------------------------------------------- */

struct bench {
	struct engine_model *m;
	struct engine_ctx *ctx;
	struct engine_seq *seq[BENCH_SEQS]; /* seq[0] for -p */
	long n_seqs;
	const struct engine_model_info *info;
	int32_t *tokens;
	float *logits; /* n_seqs rows of n_vocab */
	uint64_t rng;
};

static int32_t bench_token(struct bench *b)
{
	/* xorshift64*: any token id will do, as llama-bench's rand() */
	b->rng ^= b->rng >> 12;
	b->rng ^= b->rng << 25;
	b->rng ^= b->rng >> 27;
	return (int32_t)((b->rng * 2685821657736338717ull >> 33) %
			 b->info->n_vocab);
}

/* n tokens in batches of BENCH_BATCH, as test_prompt. */
static int bench_prompt(struct bench *b, struct engine_seq *seq, long n,
			struct err *err)
{
	long done = 0;

	while (done < n) {
		long k = n - done < BENCH_BATCH ? n - done : BENCH_BATCH, i;
		struct engine_batch_item it = { seq, b->tokens, (size_t)k,
						b->logits };
		int ret;

		for (i = 0; i < k; i++)
			b->tokens[i] = bench_token(b);
		if (done == 0 && b->info->add_bos && b->info->bos >= 0)
			b->tokens[0] = b->info->bos;
		if ((ret = engine_forward(b->ctx, &it, 1, err)))
			return ret;
		done += k;
	}
	return 0;
}

/* n tokens one at a time in each sequence, as test_gen. */
static int bench_gen(struct bench *b, long n, struct err *err)
{
	struct engine_batch_item it[BENCH_SEQS];
	long i, s;
	int ret;

	for (i = 0; i < n; i++) {
		for (s = 0; s < b->n_seqs; s++) {
			b->tokens[s] = bench_token(b);
			it[s] = (struct engine_batch_item){
				b->seq[s], b->tokens + s, 1,
				b->logits + (size_t)s * b->info->n_vocab
			};
		}
		if ((ret = engine_forward(b->ctx, it, (size_t)b->n_seqs, err)))
			return ret;
	}
	return 0;
}

/* One repetition: empty the sequence, fill the depth, time the test. */
static int bench_once(struct bench *b, const struct bench_args *a, double *secs,
		      struct err *err)
{
	double t0;
	long s;
	int ret;

	for (s = 0; s < b->n_seqs; s++)
		engine_seq_truncate(b->seq[s], 0);
	for (s = 0; a->depth && s < b->n_seqs; s++)
		if ((ret = bench_prompt(b, b->seq[s], a->depth, err)))
			return ret;
	t0 = bench_now();
	ret = a->n_prompt ? bench_prompt(b, b->seq[0], a->n_prompt, err) :
			    bench_gen(b, a->n_gen, err);
	*secs = bench_now() - t0;
	return ret;
}

/*
 * --devices: the host's devices and the spec's, with the CUDA module's
 * GPUs for "auto" and for a cap (gpu0:vram=8G), as the mount reads them.
 */
static int bench_devices(struct io_device_set *set, const char *spec,
			 struct err *err)
{
	bool auto_gpus = !strcmp(spec, "auto");
	int rc;

	rc = io_device_set_read(set, auto_gpus ? "" : spec, err);
	if (rc < 0)
		return rc;
	if (auto_gpus || io_device_set_unprobed(set)) {
		rc = engine_gpu_probe(set, err);
		if (rc < 0 && io_device_set_unprobed(set))
			return rc;
	}
	/* none found is normal for "auto": the CPU plans alone */
	return 0;
}

static void bench_plan(struct engine_ctx *ctx)
{
	struct err err = { 0 };
	char text[3072];

	if (engine_placement_plan_text(ctx, text, sizeof(text), true, &err) < 0)
		printf("plan - %s\n", err.msg);
	else
		fputs(text, stdout);
	fflush(stdout);
}

/* One test of t (-p or -n): a warm-up, then t->reps timed; prints it. */
static int bench_test(struct bench *b, const struct bench_args *t, double *mean,
		      struct err *err)
{
	long n = t->n_prompt ? t->n_prompt : t->n_gen, r;
	double sum = 0.0, sq = 0.0, sd, secs;
	struct engine_kv_stats kv;
	int ret;

	/* the warm-up: pages in, caches and the pool awake */
	if ((ret = bench_once(b, t, &secs, err)))
		return ret;
	for (r = 0; r < t->reps; r++) {
		if ((ret = bench_once(b, t, &secs, err)))
			return ret;
		sum += n * b->n_seqs / secs;
		sq += (n * b->n_seqs / secs) * (n * b->n_seqs / secs);
	}
	*mean = sum / t->reps;
	engine_kv_stats(b->ctx, &kv);
	sd = t->reps > 1 ? sqrt(fmax(0.0, (sq - sum * *mean) / (t->reps - 1))) :
			   0.0;
	printf("%s%ld d%ld%s t/s %.2f sd %.2f (%ld reps, %s, tensor_bytes %" PRIu64
	       ", kv_bytes_per_token %" PRIu64 ")\n",
	       t->n_prompt ? "pp" : "tg", n, t->depth,
	       b->n_seqs > 1 ? " x seqs" : "", *mean, sd, t->reps,
	       b->info->name, b->info->tensor_bytes,
	       kv.k_bytes_per_token + kv.v_bytes_per_token);
	fflush(stdout);
	return 0;
}

static int bench_model(const struct bench_args *a)
{
	struct engine_model_options mopt = { 0 };
	struct engine_ctx_options copt = { 0 };
	struct io_device_set devs;
	struct bench b = { .rng = 0x9e3779b97f4a7c15ull };
	struct bench_args t = *a;
	struct err err = { 0 };
	long n = a->n_prompt > a->n_gen ? a->n_prompt : a->n_gen, s;
	double mean;
	size_t merged;
	int ret;

	copt.threads = (uint32_t)a->threads;
	copt.batch_exact = a->batch_exact;
	mopt.threads = copt.threads;
	mopt.no_pack = a->no_pack;
	mopt.n_ctx = (uint32_t)(a->ctx >= 0 ? a->ctx : a->depth + n);
	mopt.load.defer = a->placement || a->cpu_moe;
	b.n_seqs = a->seqs;
	ret = a->devices ? bench_devices(&devs, a->devices, &err) : 0;
	if (a->devices)
		mopt.load.devices = &devs;
	if (!ret)
		ret = engine_model_open(&b.m, a->model, &mopt, &err);
	if (!ret)
		ret = engine_ctx_new(&b.ctx, b.m, &copt, &err);
	if (!ret)
		ret = engine_placement_apply_cpu_moe(b.ctx, a->placement,
						     a->cpu_moe, &err);
	/* the placement's GPU tensors read from the file straight there */
	if (!ret && mopt.load.defer)
		ret = engine_model_load(b.m, &err);
	/*
	 * the weights as huge pages, as the daemon has them once idle and as
	 * llama-bench's mapping of the page cache has them (loading.md);
	 * untimed
	 */
	while (!ret && io_weights_collapse_step(engine_model_weights(b.m),
						32u << 20, &merged) > 0)
		;
	if (!ret && a->plan)
		bench_plan(b.ctx);
	if (!ret && !n)
		goto out;
	for (s = 0; !ret && s < b.n_seqs; s++)
		ret = engine_seq_new(b.ctx, &b.seq[s], &err);
	if (ret)
		goto out;
	b.info = engine_model_info(b.m);
	b.tokens = malloc(BENCH_BATCH * sizeof(*b.tokens));
	b.logits = malloc((size_t)b.n_seqs * b.info->n_vocab *
			  sizeof(*b.logits));
	if (!b.tokens || !b.logits) {
		ret = err_set(&err, ENOMEM, "out of memory");
		goto out;
	}
	/* -p and -n both: the prompt's test, then the decode's */
	t.n_gen = 0;
	if (a->n_prompt && (ret = bench_test(&b, &t, &mean, &err)))
		goto out;
	t.n_prompt = 0;
	t.n_gen = a->n_gen;
	if (a->n_gen && (ret = bench_test(&b, &t, &mean, &err)))
		goto out;
	/* one sequence's decode: what the planner estimates */
	if (a->n_gen && b.n_seqs == 1) {
		engine_placement_note_decode(b.ctx, mean);
		if (a->plan)
			bench_plan(b.ctx);
	}
out:
	if (ret)
		fprintf(stderr, "llmfs-bench: %s\n", err.msg);
	free(b.tokens);
	free(b.logits);
	for (s = 0; s < b.n_seqs; s++)
		engine_seq_free(b.seq[s]);
	engine_ctx_free(b.ctx);
	engine_model_free(b.m);
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct bench_args a;

	bench_parse(argc, argv, &a);
	return a.membw_mib ? bench_membw(&a) : bench_model(&a);
}
