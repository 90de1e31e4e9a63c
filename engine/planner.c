/* SPDX-License-Identifier: MIT */
/*
 * The placement planner: where a model should live, given its byte counts
 * and the devices, with an estimated decode speed for every alternative.
 * A pure function, so that tests/engine/test_planner.c can plan for GPUs
 * and machines we do not have (8 GB and 24 GB cards, two NUMA nodes).
 *
 * The estimate is a bandwidth model of one decode step (batch 1): every
 * byte read for a token is read once from the memory it lives in,
 *
 *   t = sum over memories (bytes read there / its bandwidth)
 *     + crossings x (hidden state bytes / PCIe bandwidth + crossing_s)
 *     + overhead_s
 *
 * and tok/s = 1 / t, a GPU's weights read at the rate its decode product
 * reads each weight type at where that is known (io_device_product_rate),
 * its memory's otherwise; its KV cache at its memory's rate. Bytes read
 * per token: every non-expert weight, the
 * n_expert_used / n_expert share of the experts, the output matrix, one
 * row of token_embd, and the KV cache of est_tokens positions. Compute is
 * assumed to keep up with memory (true of decode on a GPU and on a CPU with
 * enough cores; with few cores the CPU figures are optimistic).
 * Documentation/placement.md has the rules, the constants and worked
 * examples.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"

/* Tokens of one prompt batch: what the GPU's scratch is sized for. */
#define PLAN_UBATCH 512
/* A shrunk context is never smaller than this, nor off this step. */
#define PLAN_MIN_CTX 2048
#define PLAN_CTX_STEP 256

/*
 * Assumed where not measured: a decode step's fixed cost (kernel
 * launches, the CPU pool's wake-ups), one host<->GPU hand-over besides
 * its bytes (a small cudaMemcpyAsync and an event), and the VRAM a CUDA
 * context and cuBLAS workspace take. A GPU's measured step and crossing
 * (--devices gpu0:step=...,cross=..., from tools/bench-placement.sh)
 * replace the first two for the plans that compute on it.
 */
static const double plan_overhead_s = 0.5e-3;
static const double plan_crossing_s = 20e-6;
static const uint64_t plan_gpu_reserve = 512ull << 20;
/*
 * Beside a measured reserve (a GPU's backend open: its context, the
 * module's code and buffers; io_device.reserve_bytes), what comes later
 * and is not counted against a cap: cuBLAS's handle and workspace, made
 * with the first prompt (32 MiB of workspace on Hopper), and kernels
 * loaded lazily.
 */
static const uint64_t plan_after_open = 64ull << 20;
/* A host step derived from a measurement is never taken below this. */
static const double plan_min_step_s = 1e-6;

static const char *const plan_kind_names[] = {
	[ENGINE_PLAN_ALL_GPU] = "all-gpu",
	[ENGINE_PLAN_ALL_GPU_CTX] = "all-gpu-ctx",
	[ENGINE_PLAN_KV_IN_RAM] = "kv-in-ram",
	[ENGINE_PLAN_EXPERTS_IN_RAM] = "experts-in-ram",
	[ENGINE_PLAN_ALL_CPU] = "all-cpu",
	[ENGINE_PLAN_SPLIT] = "split",
};

const char *engine_plan_kind_name(enum engine_plan_kind kind)
{
	return kind < ENGINE_PLAN_N ? plan_kind_names[kind] : "?";
}

/* What every alternative is computed from. */
struct plan_env {
	const struct engine_plan_input *in;
	const struct io_device *gpu;  /* NULL: no GPU */
	const struct io_device *host; /* host memory next to the GPU */
	const struct io_device *home; /* where all-cpu puts everything */
	uint64_t weights;	      /* every tensor */
	uint64_t scratch;	      /* GPU compute buffers + reserve */
	uint64_t reserve;	      /* the runtime's VRAM (context, ...) */
	uint64_t n_seq;
	double active; /* share of the experts read per token */
	double r_exp;  /* expert bytes read per token */
	double r_out;  /* output matrix (+ norms) per token */
	double r_in;   /* token_embd row per token (untied) */
	/*
	 * Seconds a GPU step takes to read weights (each type at its
	 * product's rate): all layer weights, the experts read per token,
	 * the output (r_out), the token_embd row (r_in); and the bytes/s it
	 * reads the KV cache at.
	 */
	double g_layer, g_exp, g_out, g_in;
	double gpu_kv_bw;
	double cross;	     /* seconds per crossing */
	double overhead;     /* per token, all on the host */
	double gpu_overhead; /* per token, plans that compute on the GPU */
};

static double gib(double bytes)
{
	return bytes / (double)(1ull << 30);
}

static void why(struct engine_plan_alt *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void why(struct engine_plan_alt *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(a->why, sizeof(a->why), fmt, ap);
	va_end(ap);
}

static uint64_t plan_kv_cap(const struct plan_env *e, uint64_t ctx)
{
	return e->in->kv_bytes_per_token * ctx * e->n_seq;
}

/* KV bytes one decode step reads with a context of ctx. */
static double plan_kv_read(const struct plan_env *e, uint32_t ctx)
{
	uint32_t t = e->in->est_tokens ? e->in->est_tokens : ctx / 2;

	return (double)e->in->kv_bytes_per_token * (t < ctx ? t : ctx);
}

/*
 * The host's fixed cost of a decode step: given, or what all-cpu's
 * measured speed leaves after its bytes at the home's bandwidth (the
 * estimate is then the measurement; on few cores the residue is the
 * cores' compute, Documentation/placement.md), or the home device's measured
 * one (cpu:step=, tools/bench-placement.sh), or assumed.
 */
static double plan_host_step(const struct plan_env *e)
{
	const struct engine_plan_input *in = e->in;
	double t;

	if (in->overhead_s > 0)
		return in->overhead_s;
	if (!(in->host_tok_s > 0))
		return e->home->step_s > 0 ? e->home->step_s : plan_overhead_s;
	t = 1 / in->host_tok_s - (in->layer_bytes + e->r_exp + e->r_out +
				  e->r_in + plan_kv_read(e, in->n_ctx)) /
					 e->home->mem_bw;
	return t > plan_min_step_s ? t : plan_min_step_s;
}

/*
 * Seconds the GPU's decode products take to read `share` of group's
 * bytes (total of them): each type broken down in the input at its own
 * rate, the rest at the rate of a type without one.
 */
static double plan_gpu_read(const struct plan_env *e,
			    enum engine_plan_group group, uint64_t total,
			    double share)
{
	const uint64_t *by_type = e->in->type_bytes[group];
	uint64_t typed = 0;
	double s = 0;
	uint32_t t;

	for (t = 0; t < IO_TYPE_COUNT; t++) {
		if (!by_type[t])
			continue;
		s += by_type[t] / io_device_product_rate(e->gpu, t, NULL);
		typed += by_type[t];
	}
	if (total > typed)
		s += (total - typed) /
		     io_device_product_rate(e->gpu, IO_TYPE_COUNT, NULL);
	return s * share;
}

/* The GPU's seconds to read a token's weights, all of them there. */
static double plan_gpu_weights(const struct plan_env *e)
{
	return e->g_layer + e->g_exp + e->g_out + e->g_in;
}

static uint64_t plan_host_free(const struct plan_env *e,
			       const struct io_device *d)
{
	return d->free_bytes + e->in->host_own_bytes;
}

static int plan_env_make(struct plan_env *e, const struct engine_plan_input *in,
			 const struct io_device_set *devs, struct err *err)
{
	const struct io_device *d, *near = NULL;
	uint32_t k, n_numa = 0;
	char name[16];

	memset(e, 0, sizeof(*e));
	e->in = in;
	for (k = 0; k < devs->n; k++) {
		d = &devs->dev[k];
		n_numa += d->kind == IO_DEVICE_NUMA;
		/* a cap no probe resolved has no bandwidth: not planned for */
		if (d->kind == IO_DEVICE_GPU && d->mem_bw > 0 &&
		    d->link_bw > 0 &&
		    (!e->gpu || d->free_bytes > e->gpu->free_bytes))
			e->gpu = d;
	}
	e->home = io_device_find(devs, in->home ? in->home : "cpu");
	if (!e->home)
		e->home = io_device_find(devs, "cpu");
	if (!e->home || e->home->kind == IO_DEVICE_GPU)
		return err_set(err, EINVAL, "no host device to plan for");
	/* A GPU's host buffers and the CPUs computing for it: its node. */
	if (e->gpu && e->gpu->node >= 0 && n_numa >= 2) {
		snprintf(name, sizeof(name), "numa%d", e->gpu->node);
		near = io_device_find(devs, name);
	}
	e->host = near ? near : e->home;
	if (e->home->mem_bw <= 0 || e->host->mem_bw <= 0)
		return err_set(
			err, EINVAL,
			"the memory bandwidth of %s is unknown (give it: --devices %s:bw=60G)",
			e->home->mem_bw <= 0 ? e->home->name : e->host->name,
			e->home->mem_bw <= 0 ? e->home->name : e->host->name);
	if (!in->n_layer || !in->n_vocab || !in->n_embd)
		return err_set(err, EINVAL,
			       "a model without layers, vocabulary or width");
	e->n_seq = in->n_seq ? in->n_seq : 1;
	e->weights = in->layer_bytes + in->expert_bytes + in->input_bytes +
		     in->output_bytes;
	e->active = in->n_expert ? (double)in->n_expert_used / in->n_expert :
				   1.0;
	e->r_exp = e->active * in->expert_bytes;
	e->r_out = in->output_bytes + (in->has_output ? 0 : in->input_bytes);
	e->r_in = in->has_output ? (double)in->input_bytes / in->n_vocab : 0;
	/*
	 * Weights at what each type's decode product reads at where the
	 * probe measured it or it was given (on an H100 well below the
	 * memory's rate: a kernel that computes), else the memory's rate
	 * (a described GPU); the KV cache at the memory's (attention is
	 * not a product, and its rate is not measured).
	 */
	if (e->gpu) {
		e->g_layer = plan_gpu_read(e, ENGINE_PLAN_LAYERS,
					   in->layer_bytes, 1);
		e->g_exp = plan_gpu_read(e, ENGINE_PLAN_EXPERTS,
					 in->expert_bytes, e->active);
		e->g_out = plan_gpu_read(e, ENGINE_PLAN_OUTPUT,
					 in->output_bytes, 1) +
			   (in->has_output ? 0 :
					     plan_gpu_read(e, ENGINE_PLAN_INPUT,
							   in->input_bytes, 1));
		e->g_in = in->has_output ? plan_gpu_read(e, ENGINE_PLAN_INPUT,
							 in->input_bytes,
							 1.0 / in->n_vocab) :
					   0;
		e->gpu_kv_bw = e->gpu->mem_bw;
	}
	e->overhead = plan_host_step(e);
	e->gpu_overhead = in->overhead_s > 0	       ? in->overhead_s :
			  e->gpu && e->gpu->step_s > 0 ? e->gpu->step_s :
							 plan_overhead_s;
	e->cross = (in->crossing_s > 0		  ? in->crossing_s :
		    e->gpu && e->gpu->cross_s > 0 ? e->gpu->cross_s :
						    plan_crossing_s) +
		   (e->gpu ? in->n_embd * 4.0 / e->gpu->link_bw : 0);
	/*
	 * ggml's compute buffer for a prompt batch: hidden states, the FFN's
	 * (the used experts') intermediates, the logits, in F32.
	 */
	e->reserve = in->gpu_reserve ? in->gpu_reserve :
		     e->gpu && e->gpu->reserve_measured ?
				       e->gpu->reserve_bytes + plan_after_open :
				       plan_gpu_reserve;
	e->scratch = e->reserve +
		     (uint64_t)PLAN_UBATCH * 4 *
			     (4ull * in->n_embd +
			      2ull * in->n_ff *
				      (in->n_expert_used ? in->n_expert_used :
							   1) +
			      in->n_vocab);
	return 0;
}

static void plan_all_gpu(const struct plan_env *e, struct engine_plan_alt *a)
{
	const struct engine_plan_input *in = e->in;
	uint64_t kv = plan_kv_cap(e, in->n_ctx);

	a->considered = true;
	a->n_ctx = in->n_ctx;
	a->gpu_bytes = e->weights + kv + e->scratch;
	a->fits = a->gpu_bytes <= e->gpu->free_bytes;
	a->tok_s = 1 / (plan_gpu_weights(e) +
			plan_kv_read(e, in->n_ctx) / e->gpu_kv_bw +
			e->gpu_overhead);
	if (!a->fits)
		why(a,
		    "does not fit: %.1f GiB (weights %.1f + KV %.1f + scratch %.1f) > %.1f GiB free on %s",
		    gib(a->gpu_bytes), gib(e->weights), gib(kv),
		    gib(e->scratch), gib(e->gpu->free_bytes), e->gpu->name);
}

static void plan_all_gpu_ctx(const struct plan_env *e,
			     struct engine_plan_alt *a)
{
	const struct engine_plan_input *in = e->in;
	uint64_t room, ctx = 0;

	a->considered = true;
	if (e->gpu->free_bytes > e->weights + e->scratch &&
	    in->kv_bytes_per_token) {
		room = e->gpu->free_bytes - e->weights - e->scratch;
		ctx = room / (in->kv_bytes_per_token * e->n_seq);
		ctx -= ctx % PLAN_CTX_STEP;
	}
	if (ctx >= in->n_ctx)
		ctx = in->n_ctx - 1;
	a->n_ctx = (uint32_t)ctx;
	a->fits = ctx >= PLAN_MIN_CTX;
	a->gpu_bytes = e->weights + plan_kv_cap(e, ctx) + e->scratch;
	if (!a->fits) {
		why(a,
		    "does not fit: weights %.1f + scratch %.1f GiB leave room for %llu tokens of KV on %s (< %d)",
		    gib(e->weights), gib(e->scratch), (unsigned long long)ctx,
		    e->gpu->name, PLAN_MIN_CTX);
		return;
	}
	a->tok_s = 1 /
		   (plan_gpu_weights(e) +
		    plan_kv_read(e, a->n_ctx) / e->gpu_kv_bw + e->gpu_overhead);
	if (in->ctx_given)
		why(a,
		    "not chosen: the context %u was asked for; --ctx %u would keep everything on %s",
		    in->n_ctx, a->n_ctx, e->gpu->name);
}

/*
 * The weights on the GPU and, layer by layer, as much of the KV cache as
 * fits beside them; the cache of the other layers in RAM, their attention
 * computed by the CPU (llama.cpp's --no-kv-offload, for those layers).
 */
static void plan_kv_in_ram(const struct plan_env *e, struct engine_plan_alt *a)
{
	const struct engine_plan_input *in = e->in;
	uint32_t L = in->n_layer, g = 0;
	uint64_t kv = plan_kv_cap(e, in->n_ctx), room;
	double read = plan_kv_read(e, in->n_ctx), t;

	a->considered = true;
	a->n_ctx = in->n_ctx;
	if (e->gpu->free_bytes > e->weights + e->scratch && kv) {
		room = e->gpu->free_bytes - e->weights - e->scratch;
		g = (uint32_t)(room / (kv / L + 1));
		if (g > L)
			g = L;
	}
	a->gpu_layers = g;
	a->gpu_bytes = e->weights + e->scratch + kv / L * g;
	a->host_bytes = kv - kv / L * g;
	a->fits = e->weights + e->scratch <= e->gpu->free_bytes &&
		  a->host_bytes <= plan_host_free(e, e->host);
	/* Each layer whose cache is in RAM: q, k, v go down, the output up. */
	t = plan_gpu_weights(e) + read * g / L / e->gpu_kv_bw +
	    read * (L - g) / L / e->host->mem_bw + 2.0 * (L - g) * e->cross +
	    e->gpu_overhead;
	a->tok_s = 1 / t;
	if (e->weights + e->scratch > e->gpu->free_bytes)
		why(a,
		    "does not fit: weights %.1f + scratch %.1f GiB > %.1f GiB free on %s",
		    gib(e->weights), gib(e->scratch), gib(e->gpu->free_bytes),
		    e->gpu->name);
	else if (!a->fits)
		why(a, "does not fit: KV %.1f GiB > %.1f GiB free on %s",
		    gib(a->host_bytes), gib(plan_host_free(e, e->host)),
		    e->host->name);
}

static void plan_experts_in_ram(const struct plan_env *e,
				struct engine_plan_alt *a, bool *shipped)
{
	const struct engine_plan_input *in = e->in;
	uint64_t kv = plan_kv_cap(e, in->n_ctx);
	double base, t_cpu, t_ship;

	a->considered = true;
	a->n_ctx = in->n_ctx;
	/* token_embd stays in RAM (one row a token) unless it is the output. */
	a->gpu_bytes = in->layer_bytes + in->output_bytes +
		       (in->has_output ? 0 : in->input_bytes) + kv + e->scratch;
	a->host_bytes = in->expert_bytes +
			(in->has_output ? in->input_bytes : 0);
	a->fits = a->gpu_bytes <= e->gpu->free_bytes &&
		  a->host_bytes <= plan_host_free(e, e->host);
	base = e->g_layer + e->g_out +
	       plan_kv_read(e, in->n_ctx) / e->gpu_kv_bw +
	       e->r_in / e->host->mem_bw + e->gpu_overhead;
	/* As llama.cpp's --cpu-moe: the CPUs of the GPU's node compute them. */
	t_cpu = base + e->r_exp / e->host->mem_bw +
		2.0 * in->n_layer * e->cross;
	/* Or the routed experts cross PCIe each token (ids come up first). */
	t_ship = base + e->r_exp / e->gpu->link_bw + e->g_exp +
		 1.0 * in->n_layer * e->cross;
	*shipped = t_ship < t_cpu;
	a->tok_s = 1 / (*shipped ? t_ship : t_cpu);
	if (a->gpu_bytes > e->gpu->free_bytes)
		why(a,
		    "does not fit: %.1f GiB of attention, shared weights, KV and scratch > %.1f GiB free on %s",
		    gib(a->gpu_bytes), gib(e->gpu->free_bytes), e->gpu->name);
	else if (!a->fits)
		why(a, "does not fit: experts %.1f GiB > %.1f GiB free on %s",
		    gib(a->host_bytes), gib(plan_host_free(e, e->host)),
		    e->host->name);
}

static void plan_split(const struct plan_env *e, bool all_fit,
		       struct engine_plan_alt *a)
{
	const struct engine_plan_input *in = e->in;
	uint32_t L = in->n_layer, g;
	double layer, read, g_read, t;
	char range[32];

	a->considered = true;
	a->n_ctx = in->n_ctx;
	layer = (double)(in->layer_bytes + in->expert_bytes +
			 plan_kv_cap(e, in->n_ctx)) /
		L;
	if (all_fit)
		g = L / 2; /* the reference split: half the layers */
	else if (e->gpu->free_bytes > e->scratch)
		g = (uint32_t)((e->gpu->free_bytes - e->scratch) / layer);
	else
		g = 0;
	if (g >= L)
		g = L - 1;
	a->gpu_layers = g;
	a->gpu_bytes = (uint64_t)(g * layer) + e->scratch;
	a->host_bytes = (uint64_t)((L - g) * layer) + in->input_bytes +
			in->output_bytes;
	a->fits = g > 0 && a->host_bytes <= plan_host_free(e, e->home);
	if (!g) {
		why(a, "does not fit: not one layer (%.2f GiB) fits on %s",
		    gib(layer), e->gpu->name);
		return;
	}
	/* Layers run where they live; the hidden state goes down and up once. */
	read = in->layer_bytes + e->r_exp + plan_kv_read(e, in->n_ctx);
	g_read = e->g_layer + e->g_exp +
		 plan_kv_read(e, in->n_ctx) / e->gpu_kv_bw;
	t = g_read * g / L + read * (L - g) / L / e->home->mem_bw +
	    (e->r_out + e->r_in) / e->home->mem_bw + 2 * e->cross +
	    e->gpu_overhead;
	a->tok_s = 1 / t;
	snprintf(range, sizeof(range), g > 1 ? "blk.0-%u" : "blk.0", g - 1);
	why(a,
	    "never automatic: %u of %u layers on %s, the rest and the output on %s; write '%s %s' to force it",
	    g, L, e->gpu->name, e->home->name, range, e->gpu->name);
}

static void plan_all_cpu(const struct plan_env *e, struct engine_plan_alt *a)
{
	const struct engine_plan_input *in = e->in;

	a->considered = true;
	a->n_ctx = in->n_ctx;
	a->host_bytes = e->weights + plan_kv_cap(e, in->n_ctx);
	a->fits = a->host_bytes <= plan_host_free(e, e->home);
	a->tok_s = 1 / ((in->layer_bytes + e->r_exp + e->r_out + e->r_in +
			 plan_kv_read(e, in->n_ctx)) /
				e->home->mem_bw +
			e->overhead);
	if (!a->fits)
		why(a, "does not fit: %.1f GiB > %.1f GiB free on %s",
		    gib(a->host_bytes), gib(plan_host_free(e, e->home)),
		    e->home->name);
}

/* The reason of the chosen alternative. */
static void plan_why_chosen(const struct plan_env *e, struct engine_plan *p,
			    bool shipped)
{
	struct engine_plan_alt *a = &p->alt[p->chosen];
	const struct engine_plan_input *in = e->in;

	switch (p->chosen) {
	case ENGINE_PLAN_ALL_GPU:
		why(a,
		    "chosen: weights %.1f + KV %.1f + scratch %.1f GiB fit in %.1f GiB free on %s",
		    gib(e->weights), gib(plan_kv_cap(e, in->n_ctx)),
		    gib(e->scratch), gib(e->gpu->free_bytes), e->gpu->name);
		break;
	case ENGINE_PLAN_ALL_GPU_CTX:
		why(a,
		    "chosen: the default context %u shrunk to %u so that everything stays on %s (--ctx %u keeps it, KV in RAM)",
		    in->n_ctx, a->n_ctx, e->gpu->name, in->n_ctx);
		break;
	case ENGINE_PLAN_KV_IN_RAM:
		why(a,
		    "chosen: weights and the KV of %u of %u layers on %s, the KV of the others (%.1f GiB of the asked-for %u tokens) in RAM on %s, their attention by its CPUs",
		    a->gpu_layers, in->n_layer, e->gpu->name,
		    gib(a->host_bytes), in->n_ctx, e->host->name);
		if (p->alt[ENGINE_PLAN_ALL_GPU_CTX].fits)
			snprintf(a->why + strlen(a->why),
				 sizeof(a->why) - strlen(a->why),
				 "; --ctx %u fits on %s",
				 p->alt[ENGINE_PLAN_ALL_GPU_CTX].n_ctx,
				 e->gpu->name);
		break;
	case ENGINE_PLAN_EXPERTS_IN_RAM:
		why(a,
		    "chosen: %.1f GiB on %s, experts %.1f GiB in RAM on %s, %.2f GiB of them a token %s",
		    gib(a->gpu_bytes), e->gpu->name, gib(a->host_bytes),
		    e->host->name, gib(e->r_exp),
		    shipped ? "shipped over PCIe" : "computed by its CPUs");
		break;
	case ENGINE_PLAN_ALL_CPU:
		if (!e->gpu)
			why(a, "chosen: no GPU");
		else if (a->fits && p->alt[ENGINE_PLAN_EXPERTS_IN_RAM].fits)
			why(a,
			    "chosen: faster than experts-in-ram, whose experts only %s's CPUs would read",
			    e->host->name);
		else
			why(a,
			    "chosen: a %s model that does not fit on %s runs all on %s",
			    in->n_expert ? "MoE" : "dense", e->gpu->name,
			    e->home->name);
		if (!a->fits)
			snprintf(
				a->why + strlen(a->why),
				sizeof(a->why) - strlen(a->why),
				" (it does not fit there either: %.1f GiB > %.1f GiB free)",
				gib(a->host_bytes),
				gib(plan_host_free(e, e->home)));
		break;
	default: break;
	}
}

/*
 * Everything on the GPU if it fits; else a context shrunk to fit, unless
 * one was asked for; else the fastest of the partial plans that fit (the
 * KV cache or the experts in RAM, or all on the CPU). Never a split.
 */
static enum engine_plan_kind plan_choose(const struct engine_plan_input *in,
					 const struct engine_plan_alt *alt)
{
	static const enum engine_plan_kind partial[] = {
		ENGINE_PLAN_KV_IN_RAM,
		ENGINE_PLAN_EXPERTS_IN_RAM,
	};
	enum engine_plan_kind best = ENGINE_PLAN_ALL_CPU;
	size_t i;

	if (alt[ENGINE_PLAN_ALL_GPU].fits)
		return ENGINE_PLAN_ALL_GPU;
	if (!in->ctx_given && alt[ENGINE_PLAN_ALL_GPU_CTX].fits)
		return ENGINE_PLAN_ALL_GPU_CTX;
	for (i = 0; i < sizeof(partial) / sizeof(partial[0]); i++)
		if (alt[partial[i]].fits &&
		    (!alt[best].fits ||
		     alt[partial[i]].tok_s > alt[best].tok_s))
			best = partial[i];
	return best;
}

int engine_plan_make(struct engine_plan *plan,
		     const struct engine_plan_input *in,
		     const struct io_device_set *devs, struct err *err)
{
	struct engine_plan_alt *alt = plan->alt;
	const struct engine_plan_alt *c;
	struct plan_env e;
	bool shipped = false;
	int rc, k;

	memset(plan, 0, sizeof(*plan));
	rc = plan_env_make(&e, in, devs, err);
	if (rc < 0)
		return rc;
	plan_all_cpu(&e, &alt[ENGINE_PLAN_ALL_CPU]);
	plan->chosen = ENGINE_PLAN_ALL_CPU;
	if (e.gpu) {
		plan_all_gpu(&e, &alt[ENGINE_PLAN_ALL_GPU]);
		if (!alt[ENGINE_PLAN_ALL_GPU].fits) {
			plan_all_gpu_ctx(&e, &alt[ENGINE_PLAN_ALL_GPU_CTX]);
			plan_kv_in_ram(&e, &alt[ENGINE_PLAN_KV_IN_RAM]);
		}
		if (in->n_expert)
			plan_experts_in_ram(
				&e, &alt[ENGINE_PLAN_EXPERTS_IN_RAM], &shipped);
		if (in->n_layer >= 2)
			plan_split(&e, alt[ENGINE_PLAN_ALL_GPU].fits,
				   &alt[ENGINE_PLAN_SPLIT]);
		plan->chosen = plan_choose(in, alt);
		snprintf(plan->gpu, sizeof(plan->gpu), "%s", e.gpu->name);
	}
	/* What cannot run has no speed. */
	for (k = 0; k < ENGINE_PLAN_N; k++)
		if (!alt[k].fits)
			alt[k].tok_s = 0;
	c = &alt[plan->chosen];
	plan->n_ctx = c->n_ctx;
	snprintf(plan->home, sizeof(plan->home), "%s", e.home->name);
	snprintf(plan->near, sizeof(plan->near), "%s", e.host->name);
	snprintf(plan->host, sizeof(plan->host), "%s",
		 plan->chosen == ENGINE_PLAN_ALL_CPU ? e.home->name :
						       e.host->name);
	if (plan->chosen == ENGINE_PLAN_ALL_GPU ||
	    plan->chosen == ENGINE_PLAN_ALL_GPU_CTX)
		plan->host[0] = '\0';
	plan_why_chosen(&e, plan, shipped);
	plan->step_s = e.gpu_overhead;
	plan->cross_s = e.cross -
			(e.gpu ? in->n_embd * 4.0 / e.gpu->link_bw : 0);
	plan->step_measured = in->overhead_s > 0 ||
			      (e.gpu && e.gpu->step_s > 0);
	plan->cross_measured = in->crossing_s > 0 ||
			       (e.gpu && e.gpu->cross_s > 0);
	plan->reserve = e.reserve;
	plan->reserve_measured = in->gpu_reserve ||
				 (e.gpu && e.gpu->reserve_measured);
	plan->host_step_s = e.overhead;
	plan->host_step_measured = in->overhead_s > 0 || in->host_tok_s > 0 ||
				   e.home->step_s > 0;
	for (k = 0; k < ENGINE_PLAN_N; k++) {
		if (!alt[k].considered || k == (int)plan->chosen ||
		    alt[k].why[0])
			continue;
		if (alt[k].tok_s < c->tok_s)
			why(&alt[k], "fits; %.1fx slower than %s",
			    c->tok_s / alt[k].tok_s,
			    engine_plan_kind_name(plan->chosen));
		else
			why(&alt[k],
			    "fits; not chosen: %s comes first (Documentation/placement.md)",
			    engine_plan_kind_name(plan->chosen));
	}
	return 0;
}

void engine_plan_input_add_tensors(struct engine_plan_input *in,
				   const struct io_gguf_tensor *t, uint64_t n)
{
	uint64_t *const total[ENGINE_PLAN_GROUPS] = {
		[ENGINE_PLAN_LAYERS] = &in->layer_bytes,
		[ENGINE_PLAN_EXPERTS] = &in->expert_bytes,
		[ENGINE_PLAN_INPUT] = &in->input_bytes,
		[ENGINE_PLAN_OUTPUT] = &in->output_bytes,
	};
	enum engine_plan_group g;
	uint64_t i;

	for (i = 0; i < n; i++) {
		const char *name = t[i].name;

		if (strncmp(name, "blk.", 4) == 0)
			g = strstr(name, "_exps.") ? ENGINE_PLAN_EXPERTS :
						     ENGINE_PLAN_LAYERS;
		else if (strcmp(name, "token_embd.weight") == 0)
			g = ENGINE_PLAN_INPUT;
		else
			g = ENGINE_PLAN_OUTPUT;
		*total[g] += t[i].bytes;
		if (t[i].type < IO_TYPE_COUNT)
			in->type_bytes[g][t[i].type] += t[i].bytes;
		if (strcmp(name, "output.weight") == 0)
			in->has_output = true;
	}
}

void engine_plan_input_of_ctx(struct engine_ctx *ctx,
			      struct engine_plan_input *in)
{
	struct engine_model *m = engine_ctx_model(ctx);
	const struct engine_model_info *info = engine_model_info(m);
	struct engine_kv_stats kv;
	const struct io_gguf *g = engine_model_gguf(m);
	struct io_weights *w = engine_model_weights(m);

	memset(in, 0, sizeof(*in));
	in->n_layer = info->n_layer;
	in->n_embd = info->n_embd;
	in->n_ff = info->n_ff;
	in->n_vocab = info->n_vocab;
	in->n_expert = info->n_expert;
	in->n_expert_used = info->n_expert_used;
	engine_kv_stats(ctx, &kv);
	in->kv_bytes_per_token = kv.k_bytes_per_token + kv.v_bytes_per_token;
	in->n_ctx = info->n_ctx;
	in->ctx_given = info->n_ctx_given;
	in->home = io_weights_home(w);
	/* Loaded, the weights sit in host RAM: free to their own plan. */
	in->host_own_bytes = g->tensor_bytes;
	engine_plan_input_add_tensors(in, g->tensors, g->n_tensors);
}

size_t engine_plan_describe(const struct engine_plan *plan, char *buf,
			    size_t cap)
{
	static const enum engine_plan_kind order[] = {
		ENGINE_PLAN_ALL_GPU,   ENGINE_PLAN_ALL_GPU_CTX,
		ENGINE_PLAN_KV_IN_RAM, ENGINE_PLAN_EXPERTS_IN_RAM,
		ENGINE_PLAN_SPLIT,     ENGINE_PLAN_ALL_CPU,
	};
	size_t len = 0;
	char tok[48];
	int n;

	n = snprintf(buf, cap, "plan %s gpu %s host %s ctx %u\n",
		     engine_plan_kind_name(plan->chosen),
		     plan->gpu[0] ? plan->gpu : "-",
		     plan->host[0] ? plan->host : "-", plan->n_ctx);
	len += n > 0 ? (size_t)n : 0;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		const struct engine_plan_alt *a = &plan->alt[order[i]];

		if (!a->considered)
			continue;
		if (a->tok_s > 0)
			snprintf(tok, sizeof(tok), "%.1f", a->tok_s);
		else
			snprintf(tok, sizeof(tok), "-");
		n = snprintf(len < cap ? buf + len : NULL,
			     len < cap ? cap - len : 0, "estimate %s %s %s\n",
			     engine_plan_kind_name(order[i]), tok, a->why);
		len += n > 0 ? (size_t)n : 0;
	}
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		const struct engine_plan_alt *a = &plan->alt[order[i]];

		if (a->measured_tok_s <= 0)
			continue;
		if (a->tok_s > 0)
			snprintf(tok, sizeof(tok), "%.1f ratio %.2f", a->tok_s,
				 a->measured_tok_s / a->tok_s);
		else
			snprintf(tok, sizeof(tok), "- ratio -");
		n = snprintf(len < cap ? buf + len : NULL,
			     len < cap ? cap - len : 0,
			     "measured %s %.1f estimate %s\n",
			     engine_plan_kind_name(order[i]), a->measured_tok_s,
			     tok);
		len += n > 0 ? (size_t)n : 0;
	}
	if (plan->gpu[0]) {
		n = snprintf(
			len < cap ? buf + len : NULL, len < cap ? cap - len : 0,
			"costs %s step %.3fms %s cross %.1fus %s reserve %lluMiB %s\n",
			plan->gpu, plan->step_s * 1e3,
			plan->step_measured ? "measured" : "assumed",
			plan->cross_s * 1e6,
			plan->cross_measured ? "measured" : "assumed",
			(unsigned long long)(plan->reserve >> 20),
			plan->reserve_measured ? "measured" : "assumed");
		len += n > 0 ? (size_t)n : 0;
	}
	n = snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0,
		     "costs %s step %.3fms %s\n", plan->home,
		     plan->host_step_s * 1e3,
		     plan->host_step_measured ? "measured" : "assumed");
	len += n > 0 ? (size_t)n : 0;
	return len;
}
