/* SPDX-License-Identifier: MIT */
/*
 * The `placement` file of a model directory: where every tensor lives, and
 * commands that move tensors between devices while the model stays loaded.
 *
 *   $ cat /mnt/llm/qwen/placement
 *   token_embd.weight q4_K 896x151936 73859072 cpu
 *   blk.0.attn_q.weight q4_K 896x896 451584 cpu
 *   ...
 *   layer blk.0 12 tensors 9371904 bytes cpu
 *   ...
 *   device cpu 290 tensors 397811712 bytes
 *   total 290 tensors 397811712 bytes
 *   $ echo 'blk.0-13 numa0' > /mnt/llm/qwen/placement
 *
 *   memory cpu total 25207791616 free 20401094656 node - bw 38.2GB/s measured
 *   memory gpu0 total 8589934592 free 8589934592 node 1 bw 272.0GB/s given pcie 25.0GB/s simulated
 *   plan all-cpu gpu gpu0 host cpu ctx 4096
 *   estimate all-gpu - does not fit: ...
 *   estimate all-cpu 3.4 chosen: ...
 *
 * Commands: "blk.A-B DEVICE" (or "blk.A"), "experts DEVICE" (the MoE expert
 * tensors, *_exps), "output DEVICE" (output.weight, output_norm.weight),
 * "TENSOR DEVICE" (one tensor by name), "PATTERN DEVICE" (a shell pattern
 * over the names, with or without their ".weight": 'blk.*.ffn_*_exps
 * cpu' is 'experts cpu'), "all DEVICE", "all-but-experts DEVICE" (every
 * tensor but the *_exps), "kv [blk.A-B] cpu" (those layers' KV cache in
 * RAM, their attention on the CPU: --no-kv-offload; "kv ... layer" gives
 * it back to the layer's device), and "auto" or "auto PLAN" (what the
 * planner, engine/planner.c, chooses, or an alternative it lists, with
 * its context and KV placement). The bytes are moved by io/; engine views reach the new bytes
 * through their placement records. A MoE layer's experts may stay on the
 * CPU while the rest of the layer is on a GPU ('all-but-experts gpu0',
 * as llama.cpp's --cpu-moe; the planner's experts-in-ram).
 */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "model.h"
#include "quant/quant.h"

/* A growing text buffer; on allocation failure it stops growing. */
struct place_buf {
	char *s;
	size_t len, cap;
	bool oom;
};

static void place_printf(struct place_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void place_printf(struct place_buf *b, const char *fmt, ...)
{
	va_list ap;
	size_t cap;
	char *p;
	int n;

	for (;;) {
		if (b->oom)
			return;
		va_start(ap, fmt);
		n = vsnprintf(b->s ? b->s + b->len : NULL,
			      b->s ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (b->s && (size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		cap = b->cap ? b->cap * 2 : 4096;
		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		p = realloc(b->s, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->s = p;
		b->cap = cap;
	}
}

/* Up to 8 distinct devices, in order of appearance. */
struct place_devs {
	char name[8][16];
	uint64_t tensors[8], bytes[8];
	int n;
};

static void place_devs_add(struct place_devs *d, const char *dev,
			   uint64_t bytes)
{
	int i;

	for (i = 0; i < d->n; i++)
		if (strcmp(d->name[i], dev) == 0)
			break;
	if (i == d->n) {
		if (d->n == 8)
			return;
		snprintf(d->name[d->n++], sizeof(d->name[0]), "%s", dev);
	}
	d->tensors[i]++;
	d->bytes[i] += bytes;
}

static void place_layer_line(struct place_buf *b, const char *what,
			     const struct place_devs *d)
{
	uint64_t tensors = 0, bytes = 0;
	int i;

	for (i = 0; i < d->n; i++) {
		tensors += d->tensors[i];
		bytes += d->bytes[i];
	}
	if (!tensors)
		return;
	place_printf(b, "layer %s %" PRIu64 " tensors %" PRIu64 " bytes", what,
		     tensors, bytes);
	for (i = 0; i < d->n; i++)
		place_printf(b, "%s%s", i ? "," : " ", d->name[i]);
	place_printf(b, "\n");
}

/* One "memory" line per device: what the planner sees. */
static void place_devices(struct place_buf *b, struct io_device_set *set)
{
	uint32_t k;

	io_device_set_measure(set);
	for (k = 0; k < set->n; k++) {
		const struct io_device *d = &set->dev[k];

		place_printf(b, "memory %s total %" PRIu64 " free %" PRIu64,
			     d->name, d->total_bytes, d->free_bytes);
		if (d->node >= 0)
			place_printf(b, " node %d", d->node);
		else
			place_printf(b, " node -");
		place_printf(b, " bw %.1fGB/s %s", d->mem_bw / 1e9,
			     io_device_bw_source_name(d->bw_source));
		if (d->product_bw > 0)
			place_printf(
				b, " product %.1fGB/s %s", d->product_bw / 1e9,
				io_device_bw_source_name(d->product_source));
		for (uint32_t t = 0; t < IO_TYPE_COUNT; t++)
			if (d->product_type[t].bw > 0)
				place_printf(
					b, " product.%s %.1fGB/s %s",
					io_type_info(t)->name,
					d->product_type[t].bw / 1e9,
					io_device_bw_source_name(
						d->product_type[t].source));
		if (d->kind == IO_DEVICE_GPU)
			place_printf(b, " pcie %.1fGB/s%s%s", d->link_bw / 1e9,
				     d->simulated ? " simulated" : "",
				     d->capped ? " capped" : "");
		place_printf(b, "\n");
	}
}

/*
 * "kv blk.A-B DEVICE" per run of layers whose KV cache is in RAM on one
 * device: numaN where bound to node N, else the home backend's.
 */
static void place_kv_lines(struct place_buf *b, const struct engine_ctx *ctx)
{
	const uint32_t n_layer = engine_model_info(ctx->model)->n_layer;
	char dev[16];
	uint32_t l, a;

	for (l = 0; l < n_layer; l++) {
		if (!ctx->kv_in_ram[l])
			continue;
		for (a = l; l + 1 < n_layer && ctx->kv_in_ram[l + 1] &&
			    ctx->kv_node[l + 1] == ctx->kv_node[a];
		     l++)
			;
		if (ctx->kv_node[a] >= 0)
			snprintf(dev, sizeof(dev), "numa%d", ctx->kv_node[a]);
		else
			snprintf(dev, sizeof(dev), "%s",
				 ctx->backend->dev.name);
		if (a == l)
			place_printf(b, "kv blk.%u %s\n", a, dev);
		else
			place_printf(b, "kv blk.%u-%u %s\n", a, l, dev);
	}
}

static void place_plan(struct place_buf *b, struct engine_ctx *ctx)
{
	struct err err = { 0 };
	char text[3072];

	if (engine_placement_plan_text(ctx, text, sizeof(text), true, &err) <
	    0) {
		place_printf(b, "plan - %s\n", err.msg);
		return;
	}
	place_printf(b, "%s", text);
}

int engine_placement_format(struct engine_ctx *ctx, char **text, size_t *len,
			    struct err *err)
{
	struct engine_model *m = engine_ctx_model(ctx);
	const struct io_gguf *g = engine_model_gguf(m);
	struct io_weights *w = engine_model_weights(m);
	uint32_t n_layer = engine_model_info(m)->n_layer, l, k;
	struct place_devs all = { 0 }, layer, other = { 0 };
	struct place_buf b = { 0 };
	uint64_t i;
	int d;

	*text = NULL;
	*len = 0;
	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];
		const struct io_type_info *ti = io_type_info(t->type);
		const struct io_placement *p = io_weights_placement(w, i);

		place_printf(&b, "%s %s ", t->name, ti ? ti->name : "?");
		for (k = 0; k < t->n_dims || k == 0; k++)
			place_printf(&b, "%s%" PRId64, k ? "x" : "", t->ne[k]);
		place_printf(&b, " %" PRIu64 " %s\n", p->bytes, p->device);
		place_devs_add(&all, p->device, p->bytes);
		if (engine_tensor_layer(t->name) < 0)
			place_devs_add(&other, p->device, p->bytes);
	}
	for (l = 0; l < n_layer; l++) {
		char what[32];

		memset(&layer, 0, sizeof(layer));
		for (i = 0; i < g->n_tensors; i++)
			if (engine_tensor_layer(g->tensors[i].name) == (long)l)
				place_devs_add(
					&layer,
					io_weights_placement(w, i)->device,
					io_weights_placement(w, i)->bytes);
		snprintf(what, sizeof(what), "blk.%u", l);
		place_layer_line(&b, what, &layer);
	}
	place_layer_line(&b, "other", &other);
	place_kv_lines(&b, ctx);
	for (d = 0; d < all.n; d++)
		place_printf(
			&b, "device %s %" PRIu64 " tensors %" PRIu64 " bytes\n",
			all.name[d], all.tensors[d], all.bytes[d]);
	place_printf(&b, "total %" PRIu64 " tensors %" PRIu64 " bytes\n",
		     g->n_tensors, g->tensor_bytes);
	place_devices(&b, io_weights_devices(w));
	place_plan(&b, ctx);
	if (b.oom) {
		free(b.s);
		return err_set(err, ENOMEM,
			       "out of memory for the placement text");
	}
	*text = b.s;
	*len = b.len;
	return 0;
}

/* Does name, or name without its ".weight", match the shell pattern? */
static int place_glob(const char *pattern, const char *name)
{
	const size_t n = strlen(name), w = strlen(".weight");
	char base[256];

	if (fnmatch(pattern, name, 0) == 0)
		return 1;
	if (n <= w || n - w >= sizeof(base) || strcmp(name + n - w, ".weight"))
		return 0;
	memcpy(base, name, n - w);
	base[n - w] = '\0';
	return fnmatch(pattern, base, 0) == 0;
}

/* Does tensor name match the selector word? -EINVAL for a bad selector. */
static int place_match(const char *sel, const char *name, uint32_t n_layer,
		       struct err *err)
{
	long a, z, l;
	char *end;

	if (strcmp(sel, "all") == 0)
		return 1;
	if (strcmp(sel, "experts") == 0)
		return strstr(name, "_exps.") != NULL;
	if (strcmp(sel, "all-but-experts") == 0)
		return strstr(name, "_exps.") == NULL;
	if (strpbrk(sel, "*?["))
		return place_glob(sel, name);
	if (strcmp(sel, "output") == 0)
		return strcmp(name, "output.weight") == 0 ||
		       strncmp(name, "output_norm.", 12) == 0;
	if (strncmp(sel, "blk.", 4) == 0 && sel[4] >= '0' && sel[4] <= '9') {
		a = strtol(sel + 4, &end, 10);
		/* "blk.3.attn_q.weight": one tensor, by its name */
		if (*end == '.')
			return strcmp(sel, name) == 0;
		z = a;
		if (*end == '-' && end[1] >= '0' && end[1] <= '9')
			z = strtol(end + 1, &end, 10);
		if (*end || a > z || z >= (long)n_layer)
			return err_set(
				err, EINVAL,
				"bad layer range %.40s (the model has blk.0-%u)",
				sel, n_layer ? n_layer - 1 : 0);
		l = engine_tensor_layer(name);
		return l >= a && l <= z;
	}
	return strcmp(sel, name) == 0;
}

static int place_usage(struct err *err, const char *command)
{
	return err_set(
		err, EINVAL,
		"bad placement command '%.60s': use 'blk.A-B DEVICE', 'experts DEVICE', 'output DEVICE', 'all DEVICE', 'all-but-experts DEVICE', 'TENSOR DEVICE', 'PATTERN DEVICE', 'kv [blk.A-B] DEVICE', 'auto' or 'auto PLAN'",
		command);
}

/* The alternative named (NULL: the chosen one); -EINVAL, -ENOSPC. */
static int place_pick(struct engine_plan *plan, const char *name,
		      struct err *err)
{
	enum engine_plan_kind k;

	if (!name)
		return 0;
	for (k = 0; k < ENGINE_PLAN_N; k++)
		if (!strcmp(name, engine_plan_kind_name(k)))
			break;
	if (k == ENGINE_PLAN_N || !plan->alt[k].considered)
		return err_set(
			err, EINVAL,
			"no alternative '%.30s' in this model's plan (see the estimate lines of placement)",
			name);
	if (!plan->alt[k].fits)
		return err_set(err, ENOSPC, "%s %s", name, plan->alt[k].why);
	plan->chosen = k;
	snprintf(plan->host, sizeof(plan->host), "%s",
		 k == ENGINE_PLAN_ALL_CPU ? plan->home : plan->near);
	return 0;
}

/* The weights where the chosen alternative of plan puts them. */
static int place_auto_weights(struct engine_ctx *ctx,
			      const struct engine_plan *plan, struct err *err)
{
	char cmd[64];
	int rc;

	if (plan->chosen == ENGINE_PLAN_ALL_CPU) {
		snprintf(cmd, sizeof(cmd), "all %s", plan->host);
		return engine_placement_apply(ctx, cmd, err);
	}
	/* a split as the planner sized it: the rest on the host */
	if (plan->chosen == ENGINE_PLAN_SPLIT) {
		snprintf(cmd, sizeof(cmd), "all %s", plan->home);
		rc = engine_placement_apply(ctx, cmd, err);
		snprintf(cmd, sizeof(cmd), "blk.0-%u %s",
			 plan->alt[ENGINE_PLAN_SPLIT].gpu_layers - 1,
			 plan->gpu);
		return rc < 0 ? rc : engine_placement_apply(ctx, cmd, err);
	}
	if (plan->chosen == ENGINE_PLAN_EXPERTS_IN_RAM) {
		snprintf(cmd, sizeof(cmd), "experts %s", plan->host);
		rc = engine_placement_apply(ctx, cmd, err);
		if (rc < 0)
			return rc;
	}
	/* The rest on the GPU; tensors already there stay. */
	snprintf(cmd, sizeof(cmd), "%s %s",
		 plan->chosen == ENGINE_PLAN_EXPERTS_IN_RAM ?
			 "all-but-experts" :
			 "all",
		 plan->gpu);
	return engine_placement_apply(ctx, cmd, err);
}

/*
 * The cache where the chosen alternative puts it: all-gpu-ctx's context
 * for sequences started from now on (those already there keep theirs),
 * kv-in-ram's layers past the ones whose KV fits on the GPU with their
 * KV in RAM, on the plan's host memory (numaN of the GPU's node where
 * the machine has two nodes or more, bound there; else the home
 * backend's); every other plan gives the model's context back and the KV
 * to its layers.
 */
static void place_auto_cache(struct engine_ctx *ctx,
			     const struct engine_plan *plan,
			     const struct io_device_set *set)
{
	const struct engine_plan_alt *a = &plan->alt[plan->chosen];
	const uint32_t n_layer = engine_model_info(ctx->model)->n_layer;
	const struct io_device *host = io_device_find(set, plan->host);
	/* the plan's host memory beside the GPU, where it is a node */
	const int node = host && host->kind == IO_DEVICE_NUMA ? host->index :
								-1;
	uint32_t l;

	ctx->n_ctx_max = plan->chosen == ENGINE_PLAN_ALL_GPU_CTX ? a->n_ctx : 0;
	for (l = 0; l < n_layer; l++) {
		ctx->kv_in_ram[l] = plan->chosen == ENGINE_PLAN_KV_IN_RAM &&
				    l >= a->gpu_layers;
		ctx->kv_node[l] = ctx->kv_in_ram[l] ? node : -1;
	}
}

/*
 * "auto" (or "auto NAME", an alternative by name): apply the plan. Every
 * device it names must be able to compute before anything moves; a GPU
 * without a backend is ENODEV, said as such.
 */
static int place_auto(struct engine_ctx *ctx, const char *name, struct err *err)
{
	struct engine_model *m = engine_ctx_model(ctx);
	struct io_weights *w = engine_model_weights(m);
	struct io_device_set *set = io_weights_devices(w);
	struct engine_plan_input in;
	struct engine_plan plan;
	const struct io_device *d;
	int rc;

	io_device_set_measure(set);
	engine_placement_plan_input(ctx, &in);
	rc = engine_plan_make(&plan, &in, set, err);
	if (rc == 0)
		rc = place_pick(&plan, name, err);
	if (rc < 0)
		return rc;
	if (plan.chosen != ENGINE_PLAN_ALL_CPU) {
		rc = io_device_lookup(set, plan.gpu, &d, err);
		if (rc == 0)
			rc = io_device_usable(d, err);
		if (rc < 0) {
			char why[sizeof(err->msg)];

			snprintf(why, sizeof(why), "%s", err->msg);
			return err_set(
				err, -rc,
				"the plan (%s) puts weights on %s, and %s",
				engine_plan_kind_name(plan.chosen), plan.gpu,
				why);
		}
	}
	rc = place_auto_weights(ctx, &plan, err);
	if (rc == 0)
		place_auto_cache(ctx, &plan, set);
	return rc;
}

/*
 * "kv [blk.A-B] DEVICE": the KV cache of those layers (all without a
 * range) in host RAM with their attention on the CPU where DEVICE is a
 * host device (llama.cpp's --no-kv-offload, per layer), or with their
 * layer again where DEVICE is "layer" (the default). The blocks move
 * before the next pass (engine_kv_pool_follow). -EINVAL for a bad range
 * or device, -ENOTSUP where the context's home backend is not the host's.
 */
static int place_kv(struct engine_ctx *ctx, const char *command,
		    struct err *err)
{
	const uint32_t n_layer = engine_model_info(ctx->model)->n_layer;
	char a[32], b[32], extra[2], name[48];
	const char *range = "all", *dev = a;
	const struct io_device *d;
	bool ram;
	uint32_t l;
	int fields, rc;

	fields = sscanf(command, " kv %31s %31s %1s", a, b, extra);
	if (fields == 2) {
		range = a;
		dev = b;
	} else if (fields != 1) {
		return place_usage(err, command);
	}
	d = io_device_find(io_weights_devices(engine_model_weights(ctx->model)),
			   dev);
	ram = d && d->kind != IO_DEVICE_GPU;
	if (!ram && strcmp(dev, "layer"))
		return err_set(
			err, EINVAL,
			"kv %s %s: the KV cache is in RAM (a host device: cpu, numaN) or with its layer ('layer')",
			range, dev);
	if (ram && !ctx->backend->is_host)
		return err_set(err, ENOTSUP,
			       "kv: the home backend (%s) is not the host's",
			       ctx->backend->dev.name);
	for (l = 0; l < n_layer; l++) {
		snprintf(name, sizeof(name), "blk.%u.attn_norm.weight", l);
		if ((rc = place_match(range, name, n_layer, err)) < 0)
			return rc;
		if (rc) {
			ctx->kv_in_ram[l] = ram;
			ctx->kv_node[l] = ram && d->kind == IO_DEVICE_NUMA ?
						  d->index :
						  -1;
		}
	}
	return 0;
}

/*
 * -ENOTSUP (naming the tensor or the cache types) unless the backend of
 * device, where it has memory of its own (a GPU), computes with the
 * type of every matrix of idx and attends over the context's cache
 * types: the move would leave the pass with ops it cannot run.
 */
static int place_check_backend(struct engine_ctx *ctx, const uint64_t *idx,
			       uint64_t n, const char *device, struct err *err)
{
	struct engine_model *m = engine_ctx_model(ctx);
	const struct io_gguf *g = engine_model_gguf(m);
	const struct engine_backend *be;
	uint32_t b, tk, tv;
	uint64_t k;
	int rc;

	if (engine_backend_device_is_host(device) ||
	    !engine_backend_device_known(device))
		return 0;
	if ((rc = engine_ctx_backend(ctx, device, &b, err)))
		return rc;
	be = ctx->backends[b];
	for (k = 0; k < n; k++) {
		const struct io_gguf_tensor *t = &g->tensors[idx[k]];

		if ((t->ne[1] > 1 &&
		     !be->iface->supports(be, ENGINE_OP_MATMUL, t->type)) ||
		    (t == m->tok_embd.info &&
		     !be->iface->supports(be, ENGINE_OP_GET_ROWS, t->type)))
			return err_set(
				err, ENOTSUP,
				"%s (%s): the %s backend of %s does not compute with its type",
				t->name, quant_type_name(t->type),
				be->iface->name, device);
	}
	engine_kv_pool_types(ctx->kv, &tk, &tv);
	if (!be->iface->supports(be, ENGINE_OP_ATTENTION, tk) ||
	    !be->iface->supports(be, ENGINE_OP_ATTENTION, tv))
		return err_set(
			err, ENOTSUP,
			"KV cache types %s/%s: the %s backend of %s does not attend over them",
			engine_kv_type_name(tk), engine_kv_type_name(tv),
			be->iface->name, device);
	return 0;
}

int engine_placement_apply(struct engine_ctx *ctx, const char *command,
			   struct err *err)
{
	struct engine_model *m = engine_ctx_model(ctx);
	const struct io_gguf *g = engine_model_gguf(m);
	uint32_t n_layer = engine_model_info(m)->n_layer;
	char sel[128], dev[32], extra[2];
	uint64_t *idx, n = 0, i;
	int fields, rc;

	fields = sscanf(command, " %127s %31s %1s", sel, dev, extra);
	if (fields >= 1 && fields <= 2 && strcmp(sel, "auto") == 0)
		return place_auto(ctx, fields == 2 ? dev : NULL, err);
	if (fields >= 2 && strcmp(sel, "kv") == 0)
		return place_kv(ctx, command, err);
	if (fields != 2)
		return place_usage(err, command);
	idx = malloc((g->n_tensors + 1) * sizeof(*idx));
	if (!idx)
		return err_set(err, ENOMEM, "out of memory");
	for (i = 0; i < g->n_tensors; i++) {
		rc = place_match(sel, g->tensors[i].name, n_layer, err);
		if (rc < 0)
			goto out_free;
		if (rc)
			idx[n++] = i;
	}
	if (n == 0) {
		rc = err_set(err, EINVAL, "no tensor matches '%.60s'", sel);
		goto out_free;
	}
	rc = place_check_backend(ctx, idx, n, dev, err);
	if (!rc)
		rc = engine_weights_move(m, idx, n, dev, err);
out_free:
	free(idx);
	return rc < 0 ? rc : 0;
}

int engine_placement_apply_cpu_moe(struct engine_ctx *ctx, const char *line,
				   bool cpu_moe, struct err *err)
{
	char cmd[128];
	int rc = 0;

	if (line && cpu_moe && !strncmp(line, "all ", 4)) {
		snprintf(cmd, sizeof(cmd), "all-but-experts %s", line + 4);
		line = cmd;
	}
	if (line)
		rc = engine_placement_apply(ctx, line, err);
	if (!rc && cpu_moe)
		rc = engine_placement_apply(ctx, "experts cpu", err);
	return rc;
}
