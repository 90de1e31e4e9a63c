// SPDX-License-Identifier: MIT
/*
 * A loaded model's tensors copied into one GPU's memory, described as the
 * CUDA module's forward pass wants them (struct cuda_model_desc): every
 * tensor its own allocation, its bytes the file's (engine_tensor_read
 * undoes the CPU's packing). A tied output shares token_embd's copy.
 *
 * engine_cuda_model_upload reads the weights from host memory where the
 * loader put them; engine_cuda_model_stream reads them from the file
 * through the staging ring (io_stage_file: io_uring O_DIRECT reads into
 * pinned buffers, cudaMemcpyAsync into VRAM behind them), so that they
 * never need host memory of their own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../model.h"
#include "backend_internal.h"
#include "cuda_backend.h"
#include "loader.h"

struct engine_cuda_model {
	const struct cuda_api *api;
	struct cuda_dev *dev;
	void **bufs;
	uint32_t n_bufs, cap_bufs;
	uint64_t bytes;
	struct cuda_layer *layers;
	struct cuda_model_desc desc;
	/* from the file: each tensor's bytes, and in which file */
	struct io_stage_range *ranges;
	uint32_t *range_file;
	struct io_stage_stats stage;
};

/* ---- the staging ring's sink: the module's pinned memory and copies ---- */

struct upload_sink {
	const struct cuda_api *api;
	struct cuda_dev *dev;
};

static int sink_host_alloc(void *arg, void **p, size_t n, struct err *err)
{
	const struct upload_sink *s = arg;

	return s->api->host_alloc(p, n, err);
}

static void sink_host_free(void *arg, void *p)
{
	const struct upload_sink *s = arg;

	s->api->host_free(p);
}

static int sink_copy(void *arg, void *dst, const void *src, size_t n,
		     unsigned slot, struct err *err)
{
	const struct upload_sink *s = arg;

	return s->api->copy_in_async(s->dev, dst, src, n, slot, err);
}

static int sink_wait(void *arg, unsigned slot, struct err *err)
{
	const struct upload_sink *s = arg;

	return s->api->slot_wait(s->dev, slot, err);
}

/*
 * The engine's deferred loads (cuda_backend_stage_sink): the same ring on
 * the device's shared handle, the one its weights are allocated through.
 * The arg is the handle; the module's table is the process's.
 */
static int stage_host_alloc(void *arg, void **p, size_t n, struct err *err)
{
	return engine_cuda_api(NULL)->host_alloc(p, n, err);
}

static void stage_host_free(void *arg, void *p)
{
	engine_cuda_api(NULL)->host_free(p);
}

static int stage_copy(void *arg, void *dst, const void *src, size_t n,
		      unsigned slot, struct err *err)
{
	return engine_cuda_api(NULL)->copy_in_async(arg, dst, src, n, slot,
						    err);
}

static int stage_wait(void *arg, unsigned slot, struct err *err)
{
	return engine_cuda_api(NULL)->slot_wait(arg, slot, err);
}

int cuda_backend_stage_sink(const char *device, struct io_stage_sink *sink,
			    struct err *err)
{
	const struct cuda_api *api;
	struct cuda_dev *dev = cb_shared(device, &api);

	if (!dev)
		return err_set(err, ENODEV, "%s: no such GPU", device);
	*sink = (struct io_stage_sink){ dev, stage_host_alloc, stage_host_free,
					stage_copy, stage_wait };
	return 0;
}

int engine_cuda_stage(const struct cuda_api *api, struct cuda_dev *dev,
		      const char *path, const struct io_stage_range *ranges,
		      size_t n, const struct io_stage_options *opt,
		      struct io_stage_stats *st, struct err *err)
{
	struct upload_sink us = { api, dev };
	const struct io_stage_sink sink = { &us, sink_host_alloc,
					    sink_host_free, sink_copy,
					    sink_wait };

	return io_stage_file(path, ranges, n, &sink, opt, st, err);
}

/* one tensor into VRAM; absent tensors stay zero */
static int upload_tensor(struct engine_cuda_model *cm, struct engine_model *m,
			 const struct engine_tensor *t, struct cuda_tensor *out,
			 bool from_file, struct err *err)
{
	const struct io_gguf_tensor *info = t->info;
	void *host, *dev = NULL;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!info)
		return 0;
	if (cm->n_bufs == cm->cap_bufs) {
		uint32_t cap = cm->cap_bufs ? 2 * cm->cap_bufs : 64;
		void **b = realloc(cm->bufs, cap * sizeof(*b));
		struct io_stage_range *r = realloc(cm->ranges,
						   cap * sizeof(*r));
		uint32_t *f = realloc(cm->range_file, cap * sizeof(*f));

		if (b)
			cm->bufs = b;
		if (r)
			cm->ranges = r;
		if (f)
			cm->range_file = f;
		if (!b || !r || !f)
			return err_set(err, ENOMEM, "out of memory");
		cm->cap_bufs = cap;
	}
	ret = cm->api->alloc(cm->dev, &dev, info->bytes, err);
	if (ret)
		return ret;
	if (!from_file) {
		host = malloc(info->bytes ? info->bytes : 1);
		if (!host) {
			cm->api->free(cm->dev, dev);
			return err_set(err, ENOMEM, "out of memory for %s",
				       info->name);
		}
		engine_tensor_read(m, (uint64_t)(info - m->gguf->tensors), 0,
				   info->bytes, host);
		ret = cm->api->copy_in(cm->dev, dev, host, info->bytes, err);
		free(host);
		if (ret) {
			cm->api->free(cm->dev, dev);
			return ret;
		}
	}
	cm->ranges[cm->n_bufs] = (struct io_stage_range){ info->offset,
							  info->bytes, dev };
	cm->range_file[cm->n_bufs] = info->file;
	cm->bufs[cm->n_bufs++] = dev;
	cm->bytes += info->bytes;
	out->data = dev;
	out->type = info->type;
	out->ne[0] = info->ne[0];
	out->ne[1] = info->ne[1];
	out->ne[2] = info->ne[2];
	out->row_bytes = t->row_bytes;
	out->repacked = t->llama_repacked;
	return 0;
}

static int upload_layer(struct engine_cuda_model *cm, struct engine_model *m,
			const struct engine_layer *l, struct cuda_layer *d,
			bool from_file, struct err *err)
{
	const struct {
		const struct engine_tensor *src;
		struct cuda_tensor *dst;
	} map[] = {
		{ &l->attn_norm, &d->attn_norm },
		{ &l->wq, &d->wq },
		{ &l->wk, &d->wk },
		{ &l->wv, &d->wv },
		{ &l->wo, &d->wo },
		{ &l->bq, &d->bq },
		{ &l->bk, &d->bk },
		{ &l->bv, &d->bv },
		{ &l->bo, &d->bo },
		{ &l->q_norm, &d->q_norm },
		{ &l->k_norm, &d->k_norm },
		{ &l->ffn_norm, &d->ffn_norm },
		{ &l->ffn_gate, &d->ffn_gate },
		{ &l->ffn_up, &d->ffn_up },
		{ &l->ffn_down, &d->ffn_down },
		{ &l->ffn_gate_inp, &d->ffn_gate_inp },
		{ &l->ffn_gate_exps, &d->ffn_gate_exps },
		{ &l->ffn_up_exps, &d->ffn_up_exps },
		{ &l->ffn_down_exps, &d->ffn_down_exps },
	};
	size_t i;
	int ret;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if ((ret = upload_tensor(cm, m, map[i].src, map[i].dst,
					 from_file, err)))
			return ret;
	return 0;
}

static void upload_hparams(struct cuda_model_desc *d,
			   const struct engine_hparams *hp)
{
	d->n_vocab = hp->n_vocab;
	d->n_embd = hp->n_embd;
	d->n_layer = hp->n_layer;
	d->n_head = hp->n_head;
	d->n_head_kv = hp->n_head_kv;
	d->head_dim = hp->head_dim;
	d->head_dim_v = hp->head_dim_v;
	d->n_rot = hp->n_rot;
	d->n_ff = hp->n_ff;
	d->n_expert = hp->n_expert;
	d->n_expert_used = hp->n_expert_used;
	d->rope_mode = hp->rope_mode == ENGINE_ROPE_NEOX ? CUDA_ROPE_NEOX :
							   CUDA_ROPE_NORM;
	d->rope_freq_base = hp->rope_freq_base;
	d->rope_freq_scale = hp->rope_freq_scale;
	d->rms_norm_eps = hp->rms_norm_eps;
	d->kq_scale = hp->kq_scale;
	d->qk_norm = hp->qk_norm;
	d->expert_weights_norm = hp->expert_weights_norm;
}

/* every tensor's file bytes through the ring, one file at a time */
static int upload_stream(struct engine_cuda_model *cm, struct engine_model *m,
			 struct err *err)
{
	struct io_stage_range *r = malloc((cm->n_bufs + 1) * sizeof(*r));
	uint32_t f, i, n;
	int ret = 0;

	if (!r)
		return err_set(err, ENOMEM, "out of memory");
	for (f = 0; f < m->gguf->n_files && !ret; f++) {
		struct io_stage_stats st;

		for (i = 0, n = 0; i < cm->n_bufs; i++)
			if (cm->range_file[i] == f)
				r[n++] = cm->ranges[i];
		ret = engine_cuda_stage(cm->api, cm->dev,
					m->gguf->files[f].path, r, n, NULL, &st,
					err);
		cm->stage.bytes_read += st.bytes_read;
		cm->stage.bytes_copied += st.bytes_copied;
		cm->stage.seconds += st.seconds;
		cm->stage.read_seconds += st.read_seconds;
		cm->stage.wait_seconds += st.wait_seconds;
		cm->stage.uring = st.uring;
		cm->stage.direct = st.direct;
	}
	free(r);
	return ret;
}

int engine_cuda_model_upload(struct engine_model *m, const struct cuda_api *api,
			     struct cuda_dev *dev, bool from_file,
			     struct engine_cuda_model **out, struct err *err)
{
	struct engine_cuda_model *cm = calloc(1, sizeof(*cm));
	uint32_t il;
	int ret;

	*out = NULL;
	if (!cm)
		return err_set(err, ENOMEM, "out of memory");
	cm->api = api;
	cm->dev = dev;
	cm->layers = calloc(m->hp.n_layer ? m->hp.n_layer : 1,
			    sizeof(*cm->layers));
	if (!cm->layers) {
		free(cm);
		return err_set(err, ENOMEM, "out of memory");
	}
	upload_hparams(&cm->desc, &m->hp);
	if ((ret = upload_tensor(cm, m, &m->tok_embd, &cm->desc.tok_embd,
				 from_file, err)) ||
	    (ret = upload_tensor(cm, m, &m->output_norm, &cm->desc.output_norm,
				 from_file, err)) ||
	    (ret = upload_tensor(cm, m, &m->rope_freqs, &cm->desc.rope_freqs,
				 from_file, err)))
		goto out_free;
	if (m->output.place == m->tok_embd.place)
		cm->desc.output = cm->desc.tok_embd; /* tied */
	else if ((ret = upload_tensor(cm, m, &m->output, &cm->desc.output,
				      from_file, err)))
		goto out_free;
	for (il = 0; il < m->hp.n_layer; il++)
		if ((ret = upload_layer(cm, m, &m->layers[il], &cm->layers[il],
					from_file, err)))
			goto out_free;
	if (from_file && (ret = upload_stream(cm, m, err)))
		goto out_free;
	cm->desc.layers = cm->layers;
	*out = cm;
	return 0;

out_free:
	engine_cuda_model_free(cm);
	return ret;
}

const struct io_stage_stats *
engine_cuda_model_stage_stats(const struct engine_cuda_model *cm)
{
	return &cm->stage;
}

const struct cuda_model_desc *
engine_cuda_model_desc(const struct engine_cuda_model *cm)
{
	return &cm->desc;
}

uint64_t engine_cuda_model_bytes(const struct engine_cuda_model *cm)
{
	return cm->bytes;
}

void engine_cuda_model_free(struct engine_cuda_model *cm)
{
	uint32_t i;

	if (!cm)
		return;
	for (i = 0; i < cm->n_bufs; i++)
		cm->api->free(cm->dev, cm->bufs[i]);
	free(cm->bufs);
	free(cm->ranges);
	free(cm->range_file);
	free(cm->layers);
	free(cm);
}
