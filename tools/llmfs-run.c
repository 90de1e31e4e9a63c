/* SPDX-License-Identifier: MIT */
/*
 * llmfs-run: generate text from a GGUF model on the command line.
 *
 *   $ build/bin/llmfs-run -m ../shared/models/stories260K.gguf \
 *   	-p "Once upon a time" -n 16 --temp 0
 *   , there was a little girl named Lily. She loved to play outside
 *   prompt_tokens=5 gen_tokens=16 ttft_ms=0.41 prefill_tps=12690.36 ...
 *
 * stdout gets the generated text alone, flushed piece by piece; the last
 * line on stderr is always the figures of the run. The prompt is used as
 * it is (special tokens parsed, BOS as the vocabulary says) unless --chat.
 * Exit status: 0, 1 on an error (one line "llmfs-run: ..."), 2 on a bad
 * command line. See Documentation/llmfs-run.1.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/engine.h"

/* A prompt file larger than this is refused, not read. */
#define RUN_PROMPT_MAX (64u << 20)

struct run_args {
	const char *model;
	const char *prompt;
	const char *file;
	long n_predict; /* -1: until EOG or a full context */
	uint32_t n_ctx, threads;
	const char *kv_type_k, *kv_type_v;
	uint64_t kv_mem;
	bool chat, verbose, batch_exact, no_pack;
	enum engine_think think; /* --think on|off, with --chat */
	struct engine_sampling sampling;
	const char **stop;
	size_t n_stop;
	const char *grammar, *json_schema; /* files */
	bool json, print_tokens;
	long logprobs;	       /* -1: none */
	const char *placement; /* a `placement` line, e.g. "all gpu0" */
	bool cpu_moe;	       /* then 'experts cpu' */
	bool move_after_load;  /* --move-after-load: the host first */
};

static void run_usage(FILE *f)
{
	fputs("usage: llmfs-run -m MODEL.gguf (-p TEXT | -f FILE) [options]\n"
	      "  -m, --model FILE        GGUF model\n"
	      "  -p, --prompt TEXT       prompt, used as it is\n"
	      "  -f, --file FILE         read the prompt from FILE (- for stdin)\n"
	      "  -n, --n-predict N       tokens to generate (-1: until the end;"
	      " default -1)\n"
	      "      --temp T            temperature; <= 0 is greedy (0.8)\n"
	      "      --top-k K           (40; <= 0 off)\n"
	      "      --top-p P           (0.95; 1 off)\n"
	      "      --min-p P           (0.05; 0 off)\n"
	      "      --repeat-penalty R  (1.0 off)\n"
	      "      --repeat-last-n N   tokens the penalty sees (64; -1 all)\n"
	      "      --seed S            random seed (4294967295)\n"
	      "      --stop STR          stop before STR (repeatable)\n"
	      "      --chat              wrap the prompt in the chat template\n"
	      "      --think on|off      the template's enable_thinking (on)\n"
	      "      --grammar FILE      answer in the GBNF grammar of FILE\n"
	      "      --json              answer a JSON object\n"
	      "      --json-schema FILE  answer JSON that the schema in FILE"
	      " allows\n"
	      "      --print-tokens      the answer's token ids on stderr\n"
	      "      --logprobs N        each answer token's log-probability and N"
	      " alternatives on stderr\n"
	      "  -c, --ctx N             context length (0: the model's, at most"
	      " 4096)\n"
	      "  -t, --threads N         threads (0: one per physical core)\n"
	      "      --kv-type-k T       K cache type: f32 f16 bf16 q8_0 q4_0"
	      " q4_1 q5_0 q5_1 (f16)\n"
	      "      --kv-type-v T       V cache type (f16)\n"
	      "      --kv-mem BYTES      KV cache budget, k/M/G suffixes (0: what"
	      " fits)\n"
	      "      --batch-exact       the prompt in the one-token order (bits"
	      " as if fed one by one)\n"
	      "      --no-pack           weights as the file has them (no"
	      " panels)\n"
	      "      --placement LINE    move tensors as a line of the mount's"
	      " placement file does\n"
	      "                          ('all gpu0', 'blk.0-13 gpu0')\n"
	      "      --cpu-moe           a MoE's experts stay on the CPU"
	      " ('all-but-experts gpu0')\n"
	      "      --move-after-load   read all weights into host memory,"
	      " then move the placed\n"
	      "                          ones (not straight to the GPU; to"
	      " compare)\n"
	      "  -v, --verbose           model and load figures on stderr\n"
	      "  -h, --help\n",
	      f);
}

static void run_bad_option(const char *opt, const char *val)
{
	fprintf(stderr, "llmfs-run: bad value for %s: '%s'\n", opt, val);
	run_usage(stderr);
	exit(2);
}

static long run_long(const char *opt, const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		run_bad_option(opt, s);
	return v;
}

static float run_float(const char *opt, const char *s)
{
	char *end;
	float v;

	errno = 0;
	v = strtof(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		run_bad_option(opt, s);
	return v;
}

static uint64_t run_u64(const char *opt, const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (*s == '-')
		run_bad_option(opt, s);
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		run_bad_option(opt, s);
	return v;
}

/* BYTES with an optional k, M or G (powers of 1024) */
static uint64_t run_bytes(const char *opt, const char *s)
{
	uint64_t bytes;

	if (engine_kv_bytes_parse(s, &bytes))
		run_bad_option(opt, s);
	return bytes;
}

/* one of the KV cache types, checked here so that a typo exits 2 */
static const char *run_kv_type(const char *opt, const char *s)
{
	uint32_t t;

	if (engine_kv_type_parse(s, &t))
		run_bad_option(opt, s);
	return s;
}

enum {
	OPT_TEMP = 256,
	OPT_TOP_K,
	OPT_TOP_P,
	OPT_MIN_P,
	OPT_REPEAT_PENALTY,
	OPT_REPEAT_LAST_N,
	OPT_SEED,
	OPT_STOP,
	OPT_CHAT,
	OPT_THINK,
	OPT_KV_TYPE_K,
	OPT_KV_TYPE_V,
	OPT_KV_MEM,
	OPT_BATCH_EXACT,
	OPT_NO_PACK,
	OPT_GRAMMAR,
	OPT_JSON,
	OPT_JSON_SCHEMA,
	OPT_PRINT_TOKENS,
	OPT_LOGPROBS,
	OPT_PLACEMENT,
	OPT_CPU_MOE,
	OPT_MOVE_AFTER_LOAD,
};

static const struct option run_options[] = {
	{ "model", required_argument, NULL, 'm' },
	{ "prompt", required_argument, NULL, 'p' },
	{ "file", required_argument, NULL, 'f' },
	{ "n-predict", required_argument, NULL, 'n' },
	{ "ctx", required_argument, NULL, 'c' },
	{ "threads", required_argument, NULL, 't' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "temp", required_argument, NULL, OPT_TEMP },
	{ "top-k", required_argument, NULL, OPT_TOP_K },
	{ "top-p", required_argument, NULL, OPT_TOP_P },
	{ "min-p", required_argument, NULL, OPT_MIN_P },
	{ "repeat-penalty", required_argument, NULL, OPT_REPEAT_PENALTY },
	{ "repeat-last-n", required_argument, NULL, OPT_REPEAT_LAST_N },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "stop", required_argument, NULL, OPT_STOP },
	{ "chat", no_argument, NULL, OPT_CHAT },
	{ "think", required_argument, NULL, OPT_THINK },
	{ "kv-type-k", required_argument, NULL, OPT_KV_TYPE_K },
	{ "kv-type-v", required_argument, NULL, OPT_KV_TYPE_V },
	{ "kv-mem", required_argument, NULL, OPT_KV_MEM },
	{ "batch-exact", no_argument, NULL, OPT_BATCH_EXACT },
	{ "no-pack", no_argument, NULL, OPT_NO_PACK },
	{ "grammar", required_argument, NULL, OPT_GRAMMAR },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "json-schema", required_argument, NULL, OPT_JSON_SCHEMA },
	{ "print-tokens", no_argument, NULL, OPT_PRINT_TOKENS },
	{ "logprobs", required_argument, NULL, OPT_LOGPROBS },
	{ "placement", required_argument, NULL, OPT_PLACEMENT },
	{ "cpu-moe", no_argument, NULL, OPT_CPU_MOE },
	{ "move-after-load", no_argument, NULL, OPT_MOVE_AFTER_LOAD },
	{ 0 },
};

/* A sampling option into s; false: c is not one. */
static bool run_parse_sampling(int c, const char *arg,
			       struct engine_sampling *s)
{
	switch (c) {
	case OPT_TEMP: s->temperature = run_float("--temp", arg); break;
	case OPT_TOP_K:
		s->top_k = run_long("--top-k", arg, INT32_MIN, INT32_MAX);
		break;
	case OPT_TOP_P: s->top_p = run_float("--top-p", arg); break;
	case OPT_MIN_P: s->min_p = run_float("--min-p", arg); break;
	case OPT_REPEAT_PENALTY:
		s->repeat_penalty = run_float("--repeat-penalty", arg);
		if (s->repeat_penalty <= 0.0f)
			run_bad_option("--repeat-penalty", arg);
		break;
	case OPT_REPEAT_LAST_N:
		s->repeat_last_n = run_long("--repeat-last-n", arg, -1,
					    INT32_MAX);
		break;
	case OPT_SEED: s->seed = run_u64("--seed", arg); break;
	default: return false;
	}
	return true;
}

/* What the options say together: exits 2 where they do not fit. */
static void run_parse_check(int argc, char **argv, const struct run_args *a)
{
	if (optind < argc) {
		fprintf(stderr, "llmfs-run: unexpected argument '%s'\n",
			argv[optind]);
		run_usage(stderr);
		exit(2);
	}
	if (!!a->grammar + !!a->json_schema + a->json > 1) {
		fputs("llmfs-run: one of --grammar, --json, --json-schema\n",
		      stderr);
		exit(2);
	}
	if (!a->model || !a->prompt == !a->file) {
		fputs("llmfs-run: need -m and one of -p or -f\n", stderr);
		run_usage(stderr);
		exit(2);
	}
}

static void run_parse(int argc, char **argv, struct run_args *a)
{
	int c;

	memset(a, 0, sizeof(*a));
	a->n_predict = -1;
	a->logprobs = -1;
	engine_sampling_defaults(&a->sampling);
	a->stop = calloc((size_t)argc, sizeof(*a->stop));
	if (!a->stop) {
		fputs("llmfs-run: out of memory\n", stderr);
		exit(1);
	}
	while ((c = getopt_long(argc, argv, "m:p:f:n:c:t:vh", run_options,
				NULL)) != -1) {
		if (run_parse_sampling(c, optarg, &a->sampling))
			continue;
		switch (c) {
		case 'm': a->model = optarg; break;
		case 'p': a->prompt = optarg; break;
		case 'f': a->file = optarg; break;
		case 'n':
			a->n_predict = run_long("-n", optarg, -1, UINT32_MAX);
			break;
		case 'c':
			a->n_ctx = run_long("--ctx", optarg, 0, UINT32_MAX);
			break;
		case 't': a->threads = run_long("-t", optarg, 0, 4096); break;
		case 'v': a->verbose = true; break;
		case 'h': run_usage(stdout); exit(0);
		case OPT_STOP:
			if (!*optarg)
				run_bad_option("--stop", optarg);
			a->stop[a->n_stop++] = optarg;
			break;
		case OPT_CHAT: a->chat = true; break;
		case OPT_THINK:
			if (strcmp(optarg, "on") && strcmp(optarg, "off"))
				run_bad_option("--think", optarg);
			a->think = optarg[1] == 'n' ? ENGINE_THINK_ON :
						      ENGINE_THINK_OFF;
			break;
		case OPT_BATCH_EXACT: a->batch_exact = true; break;
		case OPT_NO_PACK: a->no_pack = true; break;
		case OPT_GRAMMAR: a->grammar = optarg; break;
		case OPT_JSON: a->json = true; break;
		case OPT_JSON_SCHEMA: a->json_schema = optarg; break;
		case OPT_PRINT_TOKENS: a->print_tokens = true; break;
		case OPT_PLACEMENT: a->placement = optarg; break;
		case OPT_CPU_MOE: a->cpu_moe = true; break;
		case OPT_MOVE_AFTER_LOAD: a->move_after_load = true; break;
		case OPT_LOGPROBS:
			a->logprobs = run_long("--logprobs", optarg, 0,
					       ENGINE_LOGPROBS_MAX);
			break;
		case OPT_KV_TYPE_K:
			a->kv_type_k = run_kv_type("--kv-type-k", optarg);
			break;
		case OPT_KV_TYPE_V:
			a->kv_type_v = run_kv_type("--kv-type-v", optarg);
			break;
		case OPT_KV_MEM:
			a->kv_mem = run_bytes("--kv-mem", optarg);
			break;
		default: run_usage(stderr); exit(2);
		}
	}
	run_parse_check(argc, argv, a);
}

/* The whole of path ("-": stdin) into *text. */
static int run_read_prompt(const char *path, char **text, size_t *len,
			   struct err *err)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	size_t n = 0, cap = 0;
	char *buf = NULL;
	int rc = 0;

	if (!f)
		return err_set(err, errno, "%s: %s", path, strerror(errno));
	for (;;) {
		size_t got;

		if (n == cap) {
			char *p;

			if (cap >= RUN_PROMPT_MAX) {
				rc = err_set(err, EFBIG,
					     "%s: prompt over %u MiB", path,
					     RUN_PROMPT_MAX >> 20);
				break;
			}
			cap = cap ? cap * 2 : 4096;
			p = realloc(buf, cap + 1);
			if (!p) {
				rc = err_set(err, ENOMEM, "out of memory");
				break;
			}
			buf = p;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0) {
			if (ferror(f))
				rc = err_set(err, EIO, "%s: read error", path);
			break;
		}
	}
	if (f != stdin)
		fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}

static void run_notice(void *arg, const char *msg)
{
	fprintf(stderr, "llmfs-run: %s\n", msg);
}

static double run_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void run_print_model(struct engine_ctx *ctx)
{
	const struct engine_model_info *info = engine_model_info(
		engine_ctx_model(ctx));
	struct engine_kv_stats kv;
	uint64_t bpt;

	engine_kv_stats(ctx, &kv);
	bpt = kv.k_bytes_per_token + kv.v_bytes_per_token;
	fprintf(stderr,
		"llmfs-run: model %s arch %s n_ctx %" PRIu32
		" tensor_bytes %" PRIu64 " kv_bytes_per_token %" PRIu64
		" kv_bytes %" PRIu64 "\n",
		info->name, info->arch_name, info->n_ctx, info->tensor_bytes,
		bpt, bpt * info->n_ctx);
}

/*
 * -v: how the weights came in (once the load is over): into host memory
 * (io/'s regions) and straight to other devices through the staging
 * ring, and the time from the open to the first token.
 */
static void run_print_load(struct engine_model *m, double open_ms,
			   const struct engine_generation_stats *gs)
{
	const struct io_load_stats *st = io_weights_stats(
		engine_model_weights(m));

	if (io_weights_wait(engine_model_weights(m), NULL))
		return;
	fprintf(stderr,
		"llmfs-run: load tensor_bytes %" PRIu64
		" host_region_bytes %" PRIu64 " staged_bytes %" PRIu64
		" stage_s %.3f stage_gbs %.2f"
		" stage_ring_bytes %" PRIu64 " host_read_s %.3f"
		" open_ms %.1f open_to_first_token_ms %.1f\n",
		st->tensor_bytes, st->host_region_bytes, st->staged_bytes,
		st->stage_seconds,
		st->stage_seconds > 0 ?
			st->staged_bytes / st->stage_seconds / 1e9 :
			0.0,
		st->stage_ring_bytes, st->seconds, open_ms,
		open_ms + gs->ttft_ms);
}

/* prepare/forward/accept until the end, streaming to stdout. */
static int run_generate(struct engine_generation *g, struct err *err)
{
	char buf[4096];
	size_t n;
	int rc;

	do {
		rc = engine_generation_step(g, buf, sizeof(buf), &n, err);
		if (rc < 0)
			return rc;
		if (n && (fwrite(buf, 1, n, stdout) != n || fflush(stdout)))
			return err_set(err, EIO, "writing stdout: %s",
				       strerror(errno));
	} while (rc > 0);
	return 0;
}

/* --grammar, --json, --json-schema: the grammar, or NULL for none */
static int run_grammar(const struct run_args *a, const struct engine_model *m,
		       struct engine_grammar **g, struct err *err)
{
	const char *path = a->grammar ? a->grammar : a->json_schema;
	char *text = NULL;
	size_t len = 0;
	int rc;

	*g = NULL;
	if (a->json)
		return engine_grammar_new(g, m, engine_grammar_json,
					  strlen(engine_grammar_json), err);
	if (!path)
		return 0;
	if ((rc = run_read_prompt(path, &text, &len, err)))
		return rc;
	if (a->grammar)
		rc = engine_grammar_new(g, m, text, len, err);
	else
		rc = engine_grammar_from_json_schema(g, m, text, len, err);
	if (rc) {
		char msg[sizeof(err->msg)];

		snprintf(msg, sizeof(msg), "%s", err->msg);
		err_set(err, -rc, "%s: %s", path, msg);
	}
	free(text);
	return rc;
}

static void run_print_tokens(const struct engine_generation *g)
{
	size_t n_prompt, n_total;
	const int32_t *t = engine_generation_tokens(g, &n_prompt, &n_total);

	fputs("tokens=", stderr);
	for (size_t i = n_prompt; i < n_total; i++)
		fprintf(stderr, "%s%d", i > n_prompt ? " " : "", t[i]);
	fputc('\n', stderr);
}

/* logprobs=ID:LOGPROB [ID:LOGPROB...] per answer token */
static void run_print_logprobs(const struct engine_generation *g)
{
	size_t n;
	const struct engine_token_logprobs *lp = engine_generation_logprobs(g,
									    &n);

	for (size_t i = 0; i < n; i++) {
		fprintf(stderr, "logprobs=%d:%.9g", lp[i].chosen.token,
			lp[i].chosen.logprob);
		for (uint32_t k = 0; k < lp[i].n_top; k++)
			fprintf(stderr, " %d:%.9g", lp[i].top[k].token,
				lp[i].top[k].logprob);
		fputc('\n', stderr);
	}
}

static void run_print_stats(const struct engine_generation_stats *st)
{
	double pre = st->prefill_ms > 0 ?
			     st->prompt_tokens / st->prefill_ms * 1e3 :
			     0.0;
	double dec = st->decode_ms > 0 && st->gen_tokens > 1 ?
			     (st->gen_tokens - 1) / st->decode_ms * 1e3 :
			     0.0;

	fprintf(stderr,
		"prompt_tokens=%" PRIu32 " gen_tokens=%" PRIu32
		" ttft_ms=%.2f prefill_tps=%.2f decode_tps=%.2f",
		st->prompt_tokens, st->gen_tokens, st->ttft_ms, pre, dec);
	/* under a grammar: the time its masks and steps took */
	if (st->grammar_ms > 0)
		fprintf(stderr, " grammar_ms=%.2f decode_ms=%.2f",
			st->grammar_ms, st->decode_ms);
	fputc('\n', stderr);
}

/* The model, loading behind the first pass, and a context on it. */
static int run_open(const struct run_args *a, struct engine_model **m,
		    struct engine_ctx **ctx, struct err *err)
{
	struct engine_model_options mopt = {
		.n_ctx = a->n_ctx,
		.threads = a->threads,
		.no_pack = a->no_pack,
		/*
		 * Compute behind the disk: the first pass waits for each
		 * tensor as it needs it, and a failed read is that pass's
		 * error (exit 1).
		 */
		/*
		 * A placement naming a device with memory of its own (a
		 * GPU) is applied before the weights are read, so that its
		 * tensors go from the file straight there
		 */
		.load = { .notice = run_notice,
			  .async = true,
			  .defer = (a->placement || a->cpu_moe) &&
				   !a->move_after_load },
	};
	struct engine_ctx_options copt = {
		.threads = a->threads,
		.kv_type_k = a->kv_type_k,
		.kv_type_v = a->kv_type_v,
		.kv_mem = a->kv_mem,
		.batch_exact = a->batch_exact,
	};
	int rc = engine_model_open(m, a->model, &mopt, err);

	if (!rc)
		rc = engine_ctx_new(ctx, *m, &copt, err);
	/* where the weights compute: the mount's placement file's words */
	if (!rc)
		rc = engine_placement_apply_cpu_moe(*ctx, a->placement,
						    a->cpu_moe, err);
	if (!rc && mopt.load.defer)
		rc = engine_model_load(*m, err);
	return rc;
}

/* --chat: the model's template, and what is worth a warning about it. */
static int run_chat(const struct engine_model *m, struct engine_chat **chat,
		    struct err *err)
{
	int rc = engine_chat_for_model(chat, m, err);

	if (rc)
		return rc;
	if (engine_chat_notice(*chat))
		fprintf(stderr, "llmfs-run: warning: %s\n",
			engine_chat_notice(*chat));
	if (engine_chat_is_raw(*chat))
		fputs("llmfs-run: warning: the model's chat template is not "
		      "one we know; the prompt is used as it is\n",
		      stderr);
	return 0;
}

int main(int argc, char **argv)
{
	struct engine_generate_options gopt = { 0 };
	struct engine_generation *g = NULL;
	struct engine_grammar *grammar = NULL;
	struct engine_model *m = NULL;
	struct engine_ctx *ctx = NULL;
	struct engine_seq *seq = NULL;
	struct engine_chat *chat = NULL;
	struct err err = { 0 };
	struct run_args a;
	char *file_text = NULL;
	const char *prompt;
	size_t len = 0;
	double t0, open_ms;
	int rc;

	run_parse(argc, argv, &a);
	if (a.file) {
		rc = run_read_prompt(a.file, &file_text, &len, &err);
		if (rc)
			goto out;
		prompt = file_text;
	} else {
		prompt = a.prompt;
		len = strlen(prompt);
	}

	t0 = run_now_ms();
	rc = run_open(&a, &m, &ctx, &err);
	open_ms = run_now_ms() - t0;
	if (!rc && a.verbose)
		run_print_model(ctx);
	if (!rc && a.chat)
		rc = run_chat(m, &chat, &err);
	if (rc)
		goto out;
	rc = engine_seq_new(ctx, &seq, &err);
	if (rc)
		goto out;

	gopt.sampling = a.sampling;
	gopt.max_tokens = a.n_predict > 0 ? (uint32_t)a.n_predict : 0;
	gopt.stop = a.stop;
	gopt.n_stop = a.n_stop;
	gopt.chat = chat;
	gopt.think = a.think;
	rc = run_grammar(&a, m, &grammar, &err);
	if (rc)
		goto out;
	gopt.grammar = grammar;
	gopt.logprobs = a.logprobs >= 0;
	gopt.top_logprobs = a.logprobs > 0 ? (uint32_t)a.logprobs : 0;
	rc = engine_generation_new(&g, m, seq, prompt, len, &gopt, &err);
	if (rc)
		goto out;
	/* -n 0: the prompt is tokenized and counted, nothing evaluated */
	if (a.n_predict != 0)
		rc = run_generate(g, &err);
	if (!rc && a.print_tokens)
		run_print_tokens(g);
	if (!rc && a.logprobs >= 0)
		run_print_logprobs(g);
	if (!rc)
		run_print_stats(engine_generation_stats(g));
	if (!rc && a.verbose && a.n_predict != 0)
		run_print_load(m, open_ms, engine_generation_stats(g));
out:
	if (rc)
		fprintf(stderr, "llmfs-run: %s\n", err.msg);
	engine_generation_free(g);
	engine_grammar_unref(grammar);
	engine_seq_free(seq);
	engine_chat_free(chat);
	engine_ctx_free(ctx);
	engine_model_free(m);
	free(file_text);
	free(a.stop);
	return rc ? 1 : 0;
}
