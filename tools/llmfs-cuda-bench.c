/* SPDX-License-Identifier: MIT */
/*
 * llmfs-cuda-bench: one GPU's figures for one model, measured in one run
 * the way llama-bench measures them (random tokens, an untimed warm-up,
 * the mean over -r repetitions), each beside the card's own limits
 * measured in the same run:
 *
 *   $ build/bin/llmfs-cuda-bench -m qwen3-8b-q4_k_m.gguf
 *   hbm      copy 3012.4 GB/s (read + written, device to device)
 *   load     5.37 GB in 2.41 s: 2.23 GB/s (disk alone 2.31 GB/s, pinned h2d 52.1 GB/s)
 *   pp512    8123.4 t/s
 *   tg128    151.2 t/s  roofline 641.0 t/s (4.70 GB a token): 23.6 %
 *   tg64@d4096 ...
 *   tg64x16  ... (16 sequences; -s 1,4,16: 1, 4 and 16 in turn)
 *
 * (Figures illustrative.) The weights come from the file through the
 * staging ring (io_stage_file: O_DIRECT reads into pinned buffers,
 * copies behind them); "disk alone" is the same ring with a sink that
 * copies nothing, "pinned h2d" a pinned buffer copied over and over.
 * The roofline of a decode step is every byte it must read (the weights
 * but the token embedding's, which one row is read of; the KV cache at
 * the depth) over the copy bandwidth. -j FILE also writes the figures as
 * JSON. tools/gpu-check.sh runs it on a lent GPU.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/cuda/loader.h"
#include "../engine/model.h"

/* -s takes up to this many sequence counts */
#define BENCH_SEQ_RUNS 8

struct args {
	const char *model, *json, *kv;
	long n_prompt, n_gen, depth, n_depth_gen, reps;
	long seqs[BENCH_SEQ_RUNS]; /* -s: the batches of sequences, in turn */
	int n_seq_runs;
	long max_seqs; /* the largest of them (1 if none) */
	enum cuda_matmul_mode matmul;
	bool no_graphs;
};

struct bench {
	const struct cuda_api *api;
	struct cuda_dev *dev;
	struct engine_model *m;
	struct engine_cuda_model *cm;
	struct cuda_ctx *ctx;
	uint32_t n_vocab;
	float *logits; /* [seqs][n_vocab] */
	double hbm;    /* bytes/s read plus written, device to device */
	uint64_t rng;
	FILE *json;
	bool json_first;
	uint32_t kv_type; /* K and V alike (--kv) */
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int32_t rand_token(struct bench *b)
{
	b->rng ^= b->rng << 13;
	b->rng ^= b->rng >> 7;
	b->rng ^= b->rng << 17;
	return (int32_t)(b->rng % b->n_vocab);
}

static void json_num(struct bench *b, const char *key, double v)
{
	if (!b->json)
		return;
	fprintf(b->json, "%s\"%s\": %.6g", b->json_first ? "" : ",\n  ", key,
		v);
	b->json_first = false;
}

static int fail(const char *what, const struct err *err)
{
	fprintf(stderr, "llmfs-cuda-bench: %s: %s\n", what, err->msg);
	return 1;
}

/* ---- the card's limits --------------------------------------------------- */

/* device to device: bytes read plus bytes written per second */
static double bench_hbm(struct bench *b)
{
	struct err err = { 0 };
	void *x = NULL, *y = NULL;
	uint64_t free_b = 0, total = 0;
	double best = 0;
	size_t n = 1u << 30;

	/* 1 GiB, or less on a small (or simulated) device */
	if (b->api->mem_info(b->dev, &free_b, &total, &err) == 0 &&
	    free_b / 16 < n)
		n = (size_t)(free_b / 16) & ~(size_t)4095;
	if (b->api->alloc(b->dev, &x, n, &err) ||
	    b->api->alloc(b->dev, &y, n, &err) ||
	    b->api->memset(b->dev, x, 1, n, &err)) {
		fprintf(stderr, "hbm: %s\n", err.msg);
		goto out;
	}
	for (int r = 0; r < 6; r++) {
		double t0 = now();

		for (int i = 0; i < 10; i++)
			b->api->copy(b->dev, y, x, n, &err);
		if (b->api->synchronize(b->dev, &err))
			break;
		/* the first round warms up */
		if (r && 20.0 * n / (now() - t0) > best)
			best = 20.0 * n / (now() - t0);
	}
out:
	b->api->free(b->dev, x);
	b->api->free(b->dev, y);
	return best;
}

static int null_alloc(void *arg, void **p, size_t n, struct err *err)
{
	const struct cuda_api *api = arg;

	return api->host_alloc(p, n, err);
}

static void null_free(void *arg, void *p)
{
	const struct cuda_api *api = arg;

	api->host_free(p);
}

static int null_copy(void *arg, void *dst, const void *src, size_t n,
		     unsigned slot, struct err *err)
{
	return 0;
}

static int null_wait(void *arg, unsigned slot, struct err *err)
{
	return 0;
}

/* the model file read by the ring with nothing copied: the disk's rate */
static double bench_disk(struct bench *b)
{
	const struct io_gguf *g = b->m->gguf;
	const struct io_stage_sink sink = { (void *)b->api, null_alloc,
					    null_free, null_copy, null_wait };
	struct io_stage_range r;
	struct io_stage_stats st;
	struct err err = { 0 };
	static uint8_t dummy;

	r.off = g->files[0].data_offset;
	r.len = g->files[0].size - r.off;
	r.dst = &dummy;
	if (io_stage_file(g->files[0].path, &r, 1, &sink, NULL, &st, &err)) {
		fprintf(stderr, "disk: %s\n", err.msg);
		return 0;
	}
	return st.seconds > 0 ? st.bytes_read / st.seconds : 0;
}

/* a pinned buffer copied to the device over and over */
static double bench_h2d(struct bench *b)
{
	const size_t n = 256u << 20;
	struct err err = { 0 };
	void *h = NULL, *d = NULL;
	double t0, t = 0;

	if (b->api->host_alloc(&h, n, &err) ||
	    b->api->alloc(b->dev, &d, n, &err)) {
		fprintf(stderr, "h2d: %s\n", err.msg);
		goto out;
	}
	memset(h, 1, n);
	b->api->copy_in(b->dev, d, h, n, &err); /* warm-up */
	t0 = now();
	for (int i = 0; i < 16; i++)
		b->api->copy_in_async(b->dev, d, h, n, 0, &err);
	b->api->slot_wait(b->dev, 0, &err);
	t = now() - t0;
out:
	b->api->free(b->dev, d);
	b->api->host_free(h);
	return t > 0 ? 16.0 * n / t : 0;
}

/* ---- the model ----------------------------------------------------------- */

/* bytes one decode step reads at depth positions */
static double step_bytes(struct bench *b, uint64_t depth)
{
	const struct engine_model_info *in = engine_model_info(b->m);
	const struct io_gguf *g = b->m->gguf;
	uint64_t bytes = 0, i;

	for (i = 0; i < g->n_tensors; i++)
		if (strcmp(g->tensors[i].name, "token_embd.weight") ||
		    b->m->output.place == b->m->tok_embd.place)
			bytes += g->tensors[i].bytes;
	/* MoE: only the experts used */
	if (in->n_expert) {
		uint64_t exp = 0;

		for (i = 0; i < g->n_tensors; i++)
			if (strstr(g->tensors[i].name, "_exps."))
				exp += g->tensors[i].bytes;
		bytes -= exp - exp * in->n_expert_used / in->n_expert;
	}
	return (double)bytes +
	       (double)depth *
		       engine_kv_bytes_per_token(b->m, b->kv_type, b->kv_type);
}

static int forward(struct bench *b, const struct cuda_item *items, uint32_t n)
{
	struct err err = { 0 };

	if (b->api->ctx_forward(b->ctx, items, n, &err))
		return fail("forward", &err);
	return 0;
}

/* n random tokens after the at already in seq, in batches of 512 */
static int fill_more(struct bench *b, uint32_t seq, long at, long n_more)
{
	const long depth = at + n_more;
	int32_t tok[512];
	long n;

	for (; at < depth; at += n) {
		struct cuda_item it = { seq, tok, 0, NULL };

		n = depth - at < 512 ? depth - at : 512;
		for (long i = 0; i < n; i++)
			tok[i] = rand_token(b);
		it.n_tokens = (uint32_t)n;
		it.logits = at + n == depth ? b->logits : NULL;
		if (forward(b, &it, 1))
			return 1;
	}
	return 0;
}

/* sequence seq (empty) filled with depth random tokens */
static int fill(struct bench *b, uint32_t seq, long depth)
{
	return fill_more(b, seq, 0, depth);
}

static void truncate_all(struct bench *b, uint32_t n_seqs)
{
	struct err err = { 0 };

	for (uint32_t s = 0; s < n_seqs; s++)
		b->api->ctx_seq_truncate(b->ctx, s, 0, &err);
}

/* one prompt of n tokens at depth: mean tokens/s over reps */
static double bench_pp(struct bench *b, const struct args *a, long n,
		       long depth)
{
	double sum = 0;

	for (long r = -1; r < a->reps; r++) { /* -1: the warm-up */
		double t0;

		truncate_all(b, 1);
		if (fill(b, 0, depth))
			return 0;
		t0 = now();
		if (fill_more(b, 0, depth, n))
			return 0;
		if (r >= 0)
			sum += n / (now() - t0);
	}
	return sum / a->reps;
}

/*
 * n tokens decoded one at a time by seqs sequences together, each at
 * depth: mean of the aggregate tokens/s over reps.
 */
static double bench_tg(struct bench *b, const struct args *a, long n,
		       long depth, uint32_t seqs)
{
	struct cuda_item it[64];
	int32_t tok[64];
	double sum = 0;

	for (long r = -1; r < a->reps; r++) {
		double t0;

		truncate_all(b, seqs);
		for (uint32_t s = 0; s < seqs; s++)
			if (depth && fill(b, s, depth))
				return 0;
		t0 = now();
		for (long k = 0; k < n; k++) {
			for (uint32_t s = 0; s < seqs; s++) {
				tok[s] = rand_token(b);
				it[s] = (struct cuda_item){
					s, &tok[s], 1,
					b->logits + (size_t)s * b->n_vocab
				};
			}
			if (forward(b, it, seqs))
				return 0;
		}
		if (r >= 0)
			sum += (double)n * seqs / (now() - t0);
	}
	return sum / a->reps;
}

static void usage(FILE *f)
{
	fputs("usage: llmfs-cuda-bench -m MODEL.gguf [options]\n"
	      "  -p N        prompt tokens (512)\n"
	      "  -n N        decoded tokens from an empty context (128)\n"
	      "  -d N        depth of the deep decode (4096; 0: none)\n"
	      "  -g N        decoded tokens at that depth (64)\n"
	      "  -s N[,N..]  sequences decoding together, each count in turn,\n"
	      "              32 deep each (16; 0: none)\n"
	      "  -r N        repetitions (3)\n"
	      "  --kv TYPE   K and V cache type (f16)\n"
	      "  --matmul auto|mmv|cublas|mma  prefill products (auto)\n"
	      "  --no-graphs decode launch by launch\n"
	      "  -j FILE     the figures as JSON\n",
	      f);
}

/* -s: "16", "1,4,16", or "0" (none); each 1..64 */
static int parse_seqs(const char *arg, struct args *a)
{
	char *end;

	a->n_seq_runs = 0;
	if (!strcmp(arg, "0"))
		return 0;
	for (;;) {
		long n = strtol(arg, &end, 10);

		if (end == arg || n < 1 || n > 64 ||
		    a->n_seq_runs == BENCH_SEQ_RUNS || (*end && *end != ',')) {
			fprintf(stderr,
				"llmfs-cuda-bench: -s wants up to %d counts of 1 to 64 sequences, comma-separated (or 0)\n",
				BENCH_SEQ_RUNS);
			return -1;
		}
		a->seqs[a->n_seq_runs++] = n;
		if (!*end)
			return 0;
		arg = end + 1;
	}
}

static int parse(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "kv", required_argument, NULL, 'K' },
		{ "matmul", required_argument, NULL, 'M' },
		{ "no-graphs", no_argument, NULL, 'G' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*a = (struct args){ .n_prompt = 512,
			    .n_gen = 128,
			    .depth = 4096,
			    .n_depth_gen = 64,
			    .seqs = { 16 },
			    .n_seq_runs = 1,
			    .reps = 3,
			    .kv = "f16" };
	while ((c = getopt_long(argc, argv, "m:p:n:d:g:s:r:j:h", opts, NULL)) !=
	       -1) {
		switch (c) {
		case 'm': a->model = optarg; break;
		case 'p': a->n_prompt = atol(optarg); break;
		case 'n': a->n_gen = atol(optarg); break;
		case 'd': a->depth = atol(optarg); break;
		case 'g': a->n_depth_gen = atol(optarg); break;
		case 's':
			if (parse_seqs(optarg, a))
				return -1;
			break;
		case 'r': a->reps = atol(optarg); break;
		case 'j': a->json = optarg; break;
		case 'K': a->kv = optarg; break;
		case 'G': a->no_graphs = true; break;
		case 'M':
			a->matmul = !strcmp(optarg, "mmv") ?
					    CUDA_MATMUL_MMV :
				    !strcmp(optarg, "cublas") ?
					    CUDA_MATMUL_CUBLAS :
				    !strcmp(optarg, "mma") ? CUDA_MATMUL_MMA :
							     CUDA_MATMUL_AUTO;
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	a->max_seqs = 1;
	for (int i = 0; i < a->n_seq_runs; i++)
		if (a->seqs[i] > a->max_seqs)
			a->max_seqs = a->seqs[i];
	if (!a->model || a->reps < 1 || a->n_prompt < 1 || a->n_gen < 1) {
		usage(stderr);
		return -1;
	}
	return 0;
}

static int open_all(struct bench *b, const struct args *a)
{
	struct engine_model_options mo = { .threads = 1, .no_pack = true };
	struct cuda_ctx_params p = { 0 };
	struct err err = { 0 };
	uint32_t type;
	double t0, hbm, disk, h2d;
	const struct io_stage_stats *st;

	b->api = engine_cuda_api(&err);
	if (!b->api)
		return fail("CUDA module", &err);
	if (b->api->open(&b->dev, 0, &err))
		return fail("GPU", &err);
	if (engine_kv_type_parse(a->kv, &type)) {
		fprintf(stderr, "llmfs-cuda-bench: no KV type %s\n", a->kv);
		return 1;
	}
	b->kv_type = type;
	mo.n_ctx = (uint32_t)(a->depth + a->n_depth_gen > a->n_prompt ?
				      a->depth + a->n_depth_gen :
				      a->n_prompt) +
		   a->n_gen + 64;
	if (engine_model_open(&b->m, a->model, &mo, &err))
		return fail(a->model, &err);
	b->n_vocab = engine_model_info(b->m)->n_vocab;
	hbm = bench_hbm(b);
	b->hbm = hbm;
	printf("hbm      copy %.1f GB/s (read + written, device to device)\n",
	       hbm / 1e9);
	json_num(b, "hbm_copy_gbs", hbm / 1e9);
	disk = bench_disk(b);
	h2d = bench_h2d(b);
	t0 = now();
	if (engine_cuda_model_upload(b->m, b->api, b->dev, true, &b->cm, &err))
		return fail("upload", &err);
	st = engine_cuda_model_stage_stats(b->cm);
	printf("load     %.2f GB in %.2f s: %.2f GB/s (disk alone %.2f GB/s, pinned h2d %.1f GB/s; %s%s)\n",
	       st->bytes_copied / 1e9, now() - t0,
	       st->bytes_copied / 1e9 / (now() - t0), disk / 1e9, h2d / 1e9,
	       st->uring ? "io_uring" : "pread",
	       st->direct ? " O_DIRECT" : " page cache");
	json_num(b, "load_gbs", st->bytes_copied / 1e9 / (now() - t0));
	json_num(b, "disk_gbs", disk / 1e9);
	json_num(b, "h2d_gbs", h2d / 1e9);
	p.n_ctx = mo.n_ctx;
	p.max_seqs = (uint32_t)a->max_seqs;
	p.max_rows = 512;
	p.type_k = p.type_v = type;
	p.matmul = a->matmul;
	p.no_graphs = a->no_graphs;
	if (b->api->ctx_new(b->dev, engine_cuda_model_desc(b->cm), &p, &b->ctx,
			    &err))
		return fail("context", &err);
	b->logits = malloc((size_t)p.max_seqs * b->n_vocab * sizeof(float));
	return b->logits ? 0 : 1;
}

static void report_tg(struct bench *b, const char *name, double ts,
		      double bytes, double hbm, uint32_t seqs)
{
	/* seqs decoding together read the weights once a step */
	const double roof = hbm / bytes;

	char key[80];

	printf("%-10s %8.1f t/s  %.2f ms a step  roofline %.1f steps/s (%.2f GB a step): %.1f %%%s\n",
	       name, ts, ts > 0 ? 1e3 * seqs / ts : 0.0, roof, bytes / 1e9,
	       100.0 * ts / seqs / roof, seqs > 1 ? " of the steps" : "");
	json_num(b, name, ts);
	snprintf(key, sizeof(key), "%s_roof_pct", name);
	json_num(b, key, 100.0 * ts / seqs / roof);
	/* what batching costs: a step's time against one sequence's */
	snprintf(key, sizeof(key), "%s_step_ms", name);
	json_num(b, key, ts > 0 ? 1e3 * seqs / ts : 0.0);
}

int main(int argc, char **argv)
{
	struct bench b = { .rng = 0x9e3779b97f4a7c15ull, .json_first = true };
	struct args a;
	double hbm = 0, ts;
	char name[64];
	int rc = 1;

	/* a line at a time: a run stopped by a time limit keeps its lines */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse(argc, argv, &a))
		return 2;
	if (a.json) {
		b.json = fopen(a.json, "w");
		if (!b.json) {
			perror(a.json);
			return 1;
		}
		fprintf(b.json, "{\n  ");
	}
	if (open_all(&b, &a))
		goto out;
	hbm = b.hbm;
	ts = bench_pp(&b, &a, a.n_prompt, 0);
	snprintf(name, sizeof(name), "pp%ld", a.n_prompt);
	printf("%-10s %8.1f t/s\n", name, ts);
	json_num(&b, name, ts);
	ts = bench_tg(&b, &a, a.n_gen, 0, 1);
	snprintf(name, sizeof(name), "tg%ld", a.n_gen);
	report_tg(&b, name, ts, step_bytes(&b, (uint64_t)a.n_gen / 2), hbm, 1);
	if (a.depth > 0) {
		ts = bench_tg(&b, &a, a.n_depth_gen, a.depth, 1);
		snprintf(name, sizeof(name), "tg%ld@d%ld", a.n_depth_gen,
			 a.depth);
		report_tg(&b, name, ts, step_bytes(&b, (uint64_t)a.depth), hbm,
			  1);
	}
	for (int i = 0; i < a.n_seq_runs; i++) {
		const long n_seqs = a.seqs[i];

		/* each sequence 32 deep: a short prompt, as a session's */
		ts = bench_tg(&b, &a, a.n_depth_gen, 32, (uint32_t)n_seqs);
		snprintf(name, sizeof(name), "tg%ldx%ld", a.n_depth_gen,
			 n_seqs);
		report_tg(&b, name, ts,
			  step_bytes(&b, 0) +
				  (step_bytes(&b, 64) - step_bytes(&b, 0)) *
					  n_seqs,
			  hbm, (uint32_t)n_seqs);
	}
	rc = 0;
out:
	if (b.json) {
		fprintf(b.json, "\n}\n");
		fclose(b.json);
	}
	if (b.ctx)
		b.api->ctx_free(b.ctx);
	engine_cuda_model_free(b.cm);
	if (b.api)
		b.api->close(b.dev);
	engine_model_free(b.m);
	free(b.logits);
	return rc;
}
