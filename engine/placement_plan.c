// SPDX-License-Identifier: MIT
/*
 * The planner's alternatives beside what was measured: which alternative
 * the model's placement is now (all-cpu, all-gpu, experts-in-ram, a
 * split), the decode speeds noted while it ran (the mount notes each
 * generation's, engine_placement_note_decode), and the plan's text with
 * both, for the `placement` file and `status`:
 *
 *   estimate all-gpu 54.2 chosen: ...
 *   estimate all-cpu 12.2 fits; 4.4x slower than all-gpu
 *   measured all-cpu 9.8 estimate 12.2 ratio 0.80
 *   costs gpu0 step 0.500ms assumed cross 20.0us assumed
 *   placed all-cpu ctx 4096 kv-in-ram 0/24
 *
 * The last line is what is applied now: the alternative the tensors'
 * devices, the KV cache's place and the context's ceiling make.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "context.h"
#include "model.h"

/* ctx->plan_measured of every context */
static pthread_mutex_t plan_measured_lock = PTHREAD_MUTEX_INITIALIZER;

/* v: 2 nothing seen yet, 1 all on a GPU, 0 all on the host, -1 mixed */
static void plan_where_add(signed char *v, bool gpu)
{
	if (*v == 2)
		*v = gpu;
	else if (*v != gpu)
		*v = -1;
}

static enum engine_plan_kind plan_kind_of(const struct engine_model *m,
					  signed char *layer)
{
	const struct io_gguf *g = m->gguf;
	const uint32_t L = m->hp.n_layer;
	signed char experts = 2, output = 2, dense = 2;
	uint32_t l, n_gpu = 0;
	uint64_t i;

	memset(layer, 2, L);
	for (i = 0; i < g->n_tensors; i++) {
		const char *name = g->tensors[i].name;
		bool gpu = !engine_backend_device_is_host(
			io_weights_placement(m->weights, i)->device);
		long li = engine_tensor_layer(name);

		if (li >= 0 && (uint32_t)li < L) {
			plan_where_add(&layer[li], gpu);
			plan_where_add(strstr(name, "_exps.") ? &experts :
								&dense,
				       gpu);
		} else if (!strncmp(name, "output", 6)) {
			plan_where_add(&output, gpu);
		}
	}
	for (l = 0; l < L && layer[l] == 1; l++)
		n_gpu++;
	if (dense == 0 && experts != 1 && output != 1)
		return ENGINE_PLAN_ALL_CPU;
	if (dense == 1 && experts != 0 && output != 0)
		return ENGINE_PLAN_ALL_GPU;
	if (dense == 1 && experts == 0 && output != 0)
		return ENGINE_PLAN_EXPERTS_IN_RAM;
	if (n_gpu == 0 || output == 1)
		return ENGINE_PLAN_N;
	for (l = n_gpu; l < L; l++)
		if (layer[l] != 0)
			return ENGINE_PLAN_N;
	return ENGINE_PLAN_SPLIT;
}

/* Layers whose KV cache is in RAM (placement 'kv ... cpu'). */
static uint32_t plan_kv_in_ram(const struct engine_ctx *ctx)
{
	uint32_t l, n = 0;

	for (l = 0; l < ctx->model->hp.n_layer; l++)
		n += ctx->kv_in_ram[l];
	return n;
}

enum engine_plan_kind engine_placement_plan_kind(struct engine_ctx *ctx)
{
	const struct engine_model *m = ctx->model;
	signed char *layer = malloc(m->hp.n_layer + 1);
	enum engine_plan_kind k;

	if (!layer)
		return ENGINE_PLAN_N;
	k = plan_kind_of(m, layer);
	free(layer);
	/* everything on a GPU: where its cache is, how long a context */
	if (k == ENGINE_PLAN_ALL_GPU && plan_kv_in_ram(ctx))
		return ENGINE_PLAN_KV_IN_RAM;
	if (k == ENGINE_PLAN_ALL_GPU && engine_ctx_n_ctx(ctx) < m->info.n_ctx)
		return ENGINE_PLAN_ALL_GPU_CTX;
	return k;
}

void engine_placement_note_decode(struct engine_ctx *ctx, double tok_s)
{
	enum engine_plan_kind k = engine_placement_plan_kind(ctx);

	if (k == ENGINE_PLAN_N || !(tok_s > 0))
		return;
	pthread_mutex_lock(&plan_measured_lock);
	ctx->plan_measured[k] = tok_s;
	pthread_mutex_unlock(&plan_measured_lock);
}

/*
 * The reserve of each GPU a backend of ctx has opened, into set: what
 * the card's free memory lost to the open beyond what set's free already
 * left out, from where it started: the probe's free (its process had a
 * context too), or for a capped card, whose cap stands for a whole card
 * with its context, the card's total.
 */
static void plan_reserve_note(struct engine_ctx *ctx, struct io_device_set *set)
{
	uint32_t b, k;

	for (b = 1; b < ctx->n_backends; b++) {
		const struct engine_device *opened = &ctx->backends[b]->dev;

		for (k = 0; k < set->n; k++) {
			struct io_device *d = &set->dev[k];
			uint64_t from = d->capped ? opened->total_bytes :
						    d->free_bytes;

			if (opened->kind != IO_DEVICE_GPU ||
			    strcmp(d->name, opened->name) || d->simulated ||
			    !opened->total_bytes)
				continue;
			d->reserve_bytes = from > opened->free_bytes ?
						   from - opened->free_bytes :
						   0;
			d->reserve_measured = true;
		}
	}
}

void engine_placement_plan_input(struct engine_ctx *ctx,
				 struct engine_plan_input *in)
{
	plan_reserve_note(ctx, io_weights_devices(ctx->model->weights));
	engine_plan_input_of_ctx(ctx, in);
	pthread_mutex_lock(&plan_measured_lock);
	in->host_tok_s = ctx->plan_measured[ENGINE_PLAN_ALL_CPU];
	pthread_mutex_unlock(&plan_measured_lock);
}

int engine_placement_plan_text(struct engine_ctx *ctx, char *buf, size_t cap,
			       bool measure, struct err *err)
{
	struct io_weights *w = engine_model_weights(ctx->model);
	struct io_device_set *set = io_weights_devices(w);
	struct engine_plan_input in;
	struct engine_plan plan;
	enum engine_plan_kind k;
	size_t n;
	int rc;

	if (measure)
		io_device_set_measure(set);
	engine_placement_plan_input(ctx, &in);
	rc = engine_plan_make(&plan, &in, set, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&plan_measured_lock);
	for (k = 0; k < ENGINE_PLAN_N; k++)
		plan.alt[k].measured_tok_s = ctx->plan_measured[k];
	pthread_mutex_unlock(&plan_measured_lock);
	n = engine_plan_describe(&plan, buf, cap);
	/* what is applied now, whichever plan made it */
	k = engine_placement_plan_kind(ctx);
	snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0,
		 "placed %s ctx %u kv-in-ram %u/%u\n",
		 k == ENGINE_PLAN_N ? "other" : engine_plan_kind_name(k),
		 engine_ctx_n_ctx(ctx), plan_kv_in_ram(ctx),
		 ctx->model->hp.n_layer);
	return 0;
}
