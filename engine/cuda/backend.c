// SPDX-License-Identifier: MIT
/*
 * The CUDA backend (cuda_backend.h): engine/backend.h's table over the
 * CUDA module's ops (module.h), so that the forward pass, `placement`
 * and the KV pool reach a GPU as they reach the CPU or ref0.
 *
 * Memory. Everything a pass reads or writes on "gpuN" is VRAM: the
 * weights placed there (cuda_backend_weights_*, through a device handle
 * kept for the process), the pass's buffers and the KV pool's blocks
 * (alloc), the work memory of the ops (the module's scratch). Each
 * backend opens its own handle on the device (a stream and a scratch of
 * its own), so that contexts computing at once on one GPU do not share
 * work memory.
 *
 * Ops. Each op of the table is one call of the module per run of
 * consecutive rows (cb_runs_next). What the table gives as host memory
 * (tokens, positions, K/V slots, sequences) is built in a ring of pinned
 * host memory and copied, on the backend's stream behind the ops before
 * it, into a parameter area in VRAM (cb_lists, cb_send): nothing waits
 * for the device within a pass but the reads back. The lists are block
 * tables of device addresses, as the engine's KV pool keeps each block
 * of each layer apart (the module's k_blocks/v_blocks). Activations
 * stay floats (vec_dot_type is F32): the module quantizes them for its
 * kernels as the CPU does (Q8_1 for the legacy quants, Q8_K for the
 * K-quants).
 *
 * Errors. The table's ops return nothing: a failing call (a launch
 * error, a lost device, no room for the parameters) is kept as the
 * backend's first error, the ops after it are skipped, and synchronize
 * returns it as "gpuN: ...", which fails the forward pass.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"
#include "cuda_backend.h"
#include "loader.h"

/* rows of a pass's chunk: llama.cpp's n_ubatch (engine_backend.batch_rows) */
#define CB_BATCH_ROWS 512

/* ---- devices and the weights' memory ------------------------------------ */

/* The device handles the weights' memory goes through, per GPU index. */
static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cuda_dev *cb_devs[CB_DEVICES];
static signed char cb_state[CB_DEVICES]; /* 0: untried, 1: open, -1: none */

int cb_index(const char *device)
{
	char *end;
	long i;

	if (strncmp(device, "gpu", 3) || device[3] < '0' || device[3] > '9')
		return -1;
	i = strtol(device + 3, &end, 10);
	return *end || i >= CB_DEVICES ? -1 : (int)i;
}

/* device's shared handle (opened on first use), or NULL */
static struct cuda_dev *cb_shared(const char *device,
				  const struct cuda_api **api)
{
	const int i = cb_index(device);
	struct cuda_dev *d = NULL;

	*api = engine_cuda_api(NULL);
	if (i < 0 || !*api)
		return NULL;
	pthread_mutex_lock(&cb_lock);
	if (!cb_state[i])
		cb_state[i] = (*api)->open(&cb_devs[i], i, NULL) ? -1 : 1;
	if (cb_state[i] > 0)
		d = cb_devs[i];
	pthread_mutex_unlock(&cb_lock);
	return d;
}

bool cuda_backend_present(const char *device)
{
	const struct cuda_api *api;

	return cb_shared(device, &api) != NULL;
}

void *cuda_backend_weights_alloc(const char *device, size_t bytes)
{
	const struct cuda_api *api;
	struct cuda_dev *d = cb_shared(device, &api);
	void *p = NULL;

	if (!d || cuda_cap_alloc(device, api, d, &p, bytes))
		return NULL;
	return p;
}

void cuda_backend_weights_free(const char *device, void *p)
{
	const struct cuda_api *api;
	struct cuda_dev *d = cb_shared(device, &api);

	if (d)
		cuda_cap_free(api, d, p);
}

void cuda_backend_weights_copy(const char *device, void *dst, const void *src,
			       size_t bytes)
{
	const struct cuda_api *api;
	struct cuda_dev *d = cb_shared(device, &api);
	struct err err = { 0 };

	if (d && api->copy_any(d, dst, src, bytes, &err))
		fprintf(stderr, "llmfs: %s: %s\n", device, err.msg);
}

/* ---- memory --------------------------------------------------------------- */

static void cb_destroy(struct engine_backend *be)
{
	struct cuda_backend *cb = be->ctx;

	cb->api->free(cb->dev, cb->param);
	cb->api->free(cb->dev, cb->rope_ff);
	/* close waits for the stream: no copy still reads the ring */
	cb->api->close(cb->dev);
	cb->api->host_free(cb->ring);
	free(cb->views);
	free(cb);
	free(be);
}

static void *cb_alloc(struct engine_backend *be, size_t bytes)
{
	struct cuda_backend *cb = be->ctx;
	void *p = NULL;

	/* the passes' buffers and the KV blocks count against a cap */
	if (cuda_cap_alloc(be->dev.name, cb->api, cb->dev, &p, bytes))
		return NULL;
	return p;
}

static void cb_free(struct engine_backend *be, void *p)
{
	struct cuda_backend *cb = be->ctx;

	cuda_cap_free(cb->api, cb->dev, p);
}

/* one of the module's copies (copy_in, copy_out, copy), its failure kept */
typedef int (*cb_copy_fn)(struct cuda_dev *d, void *dst, const void *src,
			  size_t n, struct err *err);

static void cb_copy_with(struct engine_backend *be, cb_copy_fn copy, void *dst,
			 const void *src, size_t bytes)
{
	struct cuda_backend *cb = be->ctx;
	struct err err = { 0 };

	if (!cb->err.code)
		cb_check(be, copy(cb->dev, dst, src, bytes, &err), &err);
}

/* blocking: the caller may reuse src when it returns (backend.h) */
static void cb_copy_in(struct engine_backend *be, void *dst, const void *src,
		       size_t bytes)
{
	cb_copy_with(be, ((struct cuda_backend *)be->ctx)->api->copy_in, dst,
		     src, bytes);
}

static void cb_copy_out(struct engine_backend *be, void *dst, const void *src,
			size_t bytes)
{
	cb_copy_with(be, ((struct cuda_backend *)be->ctx)->api->copy_out, dst,
		     src, bytes);
}

static void cb_copy(struct engine_backend *be, void *dst, const void *src,
		    size_t bytes)
{
	cb_copy_with(be, ((struct cuda_backend *)be->ctx)->api->copy, dst, src,
		     bytes);
}

/*
 * The device's work done, and the first failure since the last call
 * said as the device's ("gpu0: ..."), then forgotten: a failure that
 * stays (a broken context) fails the next call again.
 */
static int cb_synchronize(struct engine_backend *be, struct err *err)
{
	struct cuda_backend *cb = be->ctx;
	struct err e = { 0 };
	int ret;

	cb_check(be, cb->api->synchronize(cb->dev, &e), &e);
	if (!cb->err.code)
		return 0;
	ret = err_set(err, cb->err.code, "%s: %s", be->dev.name, cb->err.msg);
	memset(&cb->err, 0, sizeof(cb->err));
	return ret;
}

/*
 * The model's shape (the KV stores need it), and the ring and the
 * parameter area sized for cap rows' lists (attention's grow with the
 * depth, on demand).
 */
static int cb_reserve(struct engine_backend *be,
		      const struct engine_hparams *hp, uint32_t cap,
		      struct err *err)
{
	struct cuda_backend *cb = be->ctx;
	size_t seg = (size_t)cap * 64 > CB_SEGMENT ? (size_t)cap * 64 :
						     CB_SEGMENT;

	cb->hp = *hp;
	if ((seg > cb->seg && cb_ring_grow(be, seg)) ||
	    cb_param(be, (size_t)cap * 64)) {
		err_set(err, cb->err.code, "%s: no room for %u rows' lists: %s",
			be->dev.name, cap, cb->err.msg);
		memset(&cb->err, 0, sizeof(cb->err));
		return -err->code;
	}
	return 0;
}

static bool cb_supports(const struct engine_backend *be, enum engine_op op,
			uint32_t type)
{
	const struct cuda_backend *cb = be->ctx;

	switch (op) {
	case ENGINE_OP_GET_ROWS:
	case ENGINE_OP_MATMUL: return cb->api->act_type(type) != IO_TYPE_COUNT;
	case ENGINE_OP_CONVERT:
		return type == IO_TYPE_F32 || type == IO_TYPE_Q8_1 ||
		       type == IO_TYPE_Q8_K;
	case ENGINE_OP_ATTENTION:
		return type == IO_TYPE_F16 || type == IO_TYPE_BF16 ||
		       type == IO_TYPE_F32 || type == IO_TYPE_Q8_0;
	default: return false;
	}
}

/*
 * The module's activation type for w's (Q8_1 for the legacy quants, Q8_K
 * for the K-quants, F32 for the float types): convert_rows quantizes a
 * batch once for every product of the type (Q, K and V share it), and
 * the products read the rows as they are.
 */
static uint32_t cb_vec_dot_type(const struct engine_backend *be, uint32_t type)
{
	const struct cuda_backend *cb = be->ctx;
	const uint32_t act = cb->api->act_type(type);

	return act == IO_TYPE_COUNT || cb->plain ? IO_TYPE_F32 : act;
}

/* ---- activations: quantized rows, or floats for cuBLAS --------------------- */

/*
 * Whether n rows converted to type become the mat-vec kernel's rows of
 * it (quantized; F32 for the float weights: then the kernel reads them
 * without a copy of its own): a batch that kernel takes (any, with
 * batch_exact). Larger ones stay floats for cuBLAS, whatever type the
 * pass asked for.
 */
static bool cb_quantizes(const struct engine_backend *be, uint32_t n)
{
	return be->batch_exact || n <= CB_QUANT_ROWS;
}

/* buf now holds the kernel's rows or floats (a few buffers remembered) */
static void cb_act_set(struct cuda_backend *cb, const void *buf, bool act)
{
	unsigned i;

	for (i = 0; i < CB_ACTS && cb->acts[i].buf != buf; i++)
		;
	if (i == CB_ACTS)
		i = cb->acts_next++ % CB_ACTS;
	cb->acts[i].buf = buf;
	cb->acts[i].act = act;
}

/* whether buf (a product's activations) holds the kernel's rows */
static bool cb_act_rows(const struct cuda_backend *cb, const void *buf)
{
	unsigned i;

	for (i = 0; i < CB_ACTS; i++)
		if (cb->acts[i].buf == buf)
			return cb->acts[i].act;
	return false;
}

/* ---- row ops ------------------------------------------------------------- */

static void cb_get_rows(struct engine_backend *be, float *y, size_t y_ld,
			const struct engine_tensor *w, const int32_t *tokens,
			uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	const size_t bytes = (size_t)n * sizeof(*tokens);
	struct err err = { 0 };
	void *host;

	if (!n || !(host = cb_lists(be, bytes)))
		return;
	memcpy(host, tokens, bytes);
	if (cb_send(be, cb->param, host, bytes))
		return;
	cb_check(be,
		 cb->api->get_rows(cb->dev, w->info->type,
				   engine_tensor_data(w), w->row_bytes,
				   w->info->ne[0], (const int32_t *)cb->param,
				   y, y_ld, n, &err),
		 &err);
}

/*
 * The positions of the pass's rows, as int32, where the CPU keeps its
 * cos/sin table (cache row j: position j's; rope_rows reads them), and
 * the frequency factors (wherever the model keeps them) in VRAM, copied
 * when they are first seen there.
 */
static void cb_rope_cache(struct engine_backend *be, float *cache,
			  size_t cache_ld, const uint32_t *pos, uint32_t n,
			  const struct engine_hparams *hp,
			  const float *freq_factors)
{
	struct cuda_backend *cb = be->ctx;
	const uint32_t nf = hp->n_rot / 2;
	struct err err = { 0 };
	void *p = NULL, *host;
	int ret;

	if (cb->err.code)
		return;
	if (freq_factors && nf > cb->rope_ff_cap) {
		cb->api->free(cb->dev, cb->rope_ff);
		cb->rope_ff = NULL;
		cb->rope_ff_cap = 0;
		cb->rope_ff_src = NULL;
		if ((ret = cb->api->alloc(cb->dev, &p, nf * sizeof(float),
					  &err))) {
			cb_check(be, ret, &err);
			return;
		}
		cb->rope_ff = p;
		cb->rope_ff_cap = nf;
	}
	/* the model's factors do not change: one copy (blocking) a place */
	if (freq_factors && freq_factors != cb->rope_ff_src) {
		if ((ret = cb->api->copy_any(cb->dev, cb->rope_ff, freq_factors,
					     nf * sizeof(float), &err))) {
			cb_check(be, ret, &err);
			return;
		}
		cb->rope_ff_src = freq_factors;
	}
	cb->rope_ff_set = freq_factors != NULL;
	if (!n || !(host = cb_stage(be, (size_t)n * sizeof(int32_t))))
		return;
	memcpy(host, pos, (size_t)n * sizeof(int32_t));
	cb_send(be, cache, host, (size_t)n * sizeof(int32_t));
}

static void cb_rope_rows(struct engine_backend *be, float *x, size_t ld,
			 uint32_t n_head, const struct engine_hparams *hp,
			 const float *cache, size_t cache_ld,
			 const uint32_t *idx, uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	const enum cuda_rope_mode mode = hp->rope_mode == ENGINE_ROPE_NEOX ?
						 CUDA_ROPE_NEOX :
						 CUDA_ROPE_NORM;
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };

	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb->api->rope(cb->dev, x + (size_t)it.r * ld, ld,
				       n_head, hp->head_dim, hp->n_rot, mode,
				       (const int32_t *)cache + it.r,
				       hp->rope_freq_base, hp->rope_freq_scale,
				       cb->rope_ff_set ? cb->rope_ff : NULL,
				       it.len, &err),
			 &err);
}

static void cb_rms_norm_rows(struct engine_backend *be, float *y,
			     const float *x, size_t ld, uint32_t width,
			     uint32_t per_row, const float *w, float eps,
			     const uint32_t *idx, uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };
	uint32_t i;

	while (cb_runs_next(be, &it)) {
		const size_t r = it.r;

		if (per_row == 1)
			cb_check(be,
				 cb->api->rms_norm(cb->dev, x + r * ld, ld, w,
						   y + r * ld, ld, width,
						   it.len, eps, &err),
				 &err);
		else if (ld == (size_t)per_row * width)
			/* the heads of a row, as rows of their own */
			cb_check(be,
				 cb->api->rms_norm(cb->dev, x + r * ld, width,
						   w, y + r * ld, width, width,
						   it.len * per_row, eps, &err),
				 &err);
		else
			for (i = 0; i < it.len; i++)
				cb_check(be,
					 cb->api->rms_norm(
						 cb->dev, x + (r + i) * ld,
						 width, w, y + (r + i) * ld,
						 width, width, per_row, eps,
						 &err),
					 &err);
	}
}

static void cb_add_rows(struct engine_backend *be, float *y, size_t y_ld,
			const float *x, size_t x_ld, uint32_t width,
			const uint32_t *idx, uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };

	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb->api->add(cb->dev, y + (size_t)it.r * y_ld, y_ld,
				      x + (size_t)it.r * x_ld, x_ld, width,
				      it.len, &err),
			 &err);
}

/*
 * Floats to the module's activation type (cb_vec_dot_type), or copied as
 * floats for a batch cuBLAS takes (cb_quantizes); the products read y
 * by what it holds (cb_act_rows).
 */
static void cb_convert_rows(struct engine_backend *be, uint32_t type,
			    const float *x, size_t x_ld, uint32_t width,
			    void *y, size_t y_ld, const uint32_t *idx,
			    uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	const bool act = !cb->plain && cb_quantizes(be, n);
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };

	cb_act_set(cb, y, act);
	if (!act)
		type = IO_TYPE_F32;
	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb->api->quantize(cb->dev, type,
					   x + (size_t)it.r * x_ld, x_ld,
					   (uint8_t *)y + (size_t)it.r * y_ld,
					   y_ld, width, it.len, &err),
			 &err);
}

/*
 * The norm and the conversion for the product after it: one launch a run
 * where the rows are quantized (the module's rms_norm_quantize), the two
 * ops where they stay floats.
 */
static void cb_rms_norm_convert_rows(struct engine_backend *be, float *y,
				     const float *x, size_t ld, uint32_t width,
				     const float *w, float eps, uint32_t type,
				     void *act, size_t act_ld,
				     const uint32_t *idx, uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };

	if (!cb_quantizes(be, n)) {
		cb_rms_norm_rows(be, y, x, ld, width, 1, w, eps, idx, n);
		cb_convert_rows(be, type, y, ld, width, act, act_ld, idx, n);
		return;
	}
	cb_act_set(cb, act, true);
	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb->api->rms_norm_quantize(
				 cb->dev, type, x + (size_t)it.r * ld, ld, w,
				 y + (size_t)it.r * ld, ld,
				 (uint8_t *)act + (size_t)it.r * act_ld, act_ld,
				 width, it.len, eps, &err),
			 &err);
}

static void cb_swiglu_rows(struct engine_backend *be, float *g, const float *u,
			   size_t ld, uint32_t width, const uint32_t *idx,
			   uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };

	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb->api->swiglu(cb->dev, g + (size_t)it.r * ld, ld,
					 g + (size_t)it.r * ld, ld,
					 u + (size_t)it.r * ld, ld, width,
					 it.len, &err),
			 &err);
}

/* ---- the KV cache ------------------------------------------------------ */

/*
 * The lists a KV op takes, for rows rows with mb blocks each: K and V
 * block addresses, then the rows' sequence slots (row j's own: j) and
 * positions, built in the ring (host) and read by the module from the
 * parameter area (dev), bytes of them.
 */
struct cb_kv_lists {
	const uint8_t **k_blocks, **v_blocks;
	int32_t *seq_of, *pos;
	size_t bytes;
	void *host;
	struct cuda_kv *kv; /* its k_blocks, v_blocks, max_blocks */
	const int32_t *dev_seq, *dev_pos; /* the parameter area's */
};

static int cb_kv_lists(struct engine_backend *be, uint32_t rows, uint32_t mb,
		       struct cb_kv_lists *l)
{
	struct cuda_backend *cb = be->ctx;
	const size_t nb = (size_t)rows * mb * sizeof(void *);
	uint8_t *h;
	uint32_t j;

	l->bytes = 2 * nb + 2 * (size_t)rows * sizeof(int32_t);
	if (!(l->host = h = cb_lists(be, l->bytes)))
		return -ENOMEM;
	l->k_blocks = (const uint8_t **)h;
	l->v_blocks = (const uint8_t **)(h + nb);
	l->seq_of = (int32_t *)(h + 2 * nb);
	l->pos = l->seq_of + rows;
	memset(h, 0, 2 * nb);
	for (j = 0; j < rows; j++)
		l->seq_of[j] = (int32_t)j;
	l->kv->k_blocks = (const uint8_t *const *)cb->param;
	l->kv->v_blocks = (const uint8_t *const *)(cb->param + nb);
	l->kv->max_blocks = mb;
	l->dev_seq = (const int32_t *)(cb->param + 2 * nb);
	l->dev_pos = l->dev_seq + rows;
	return 0;
}

/* whether slots i and j have the same cache types */
static bool cb_slots_join(const void *arg, uint32_t i, uint32_t j)
{
	const struct engine_kv_slot *s = arg;

	return s[j].type_k == s[i].type_k && s[j].type_v == s[i].type_v;
}

/*
 * Each row's K and V at its slot: row j a sequence of one block that
 * starts at the slot (position 0), in runs of the same cache types.
 */
static void cb_kv_store_rows(struct engine_backend *be, const float *k,
			     size_t k_ld, uint32_t k_width, const float *v,
			     size_t v_ld, uint32_t v_width,
			     const struct engine_kv_slot *slots, uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	struct cuda_kv kv = { .n_head_kv = cb->hp.n_head_kv,
			      .head_dim = cb->hp.head_dim,
			      .head_dim_v = cb->hp.head_dim_v };
	struct cb_kv_lists l = { .kv = &kv };
	struct cb_runs it = { .n = n, .joins = cb_slots_join, .arg = slots };
	struct err err = { 0 };
	uint32_t j;

	if (!n || cb_kv_lists(be, n, 1, &l))
		return;
	for (j = 0; j < n; j++) {
		l.k_blocks[j] = slots[j].k;
		l.v_blocks[j] = slots[j].v;
		l.pos[j] = 0;
	}
	if (cb_send(be, cb->param, l.host, l.bytes))
		return;
	while (cb_runs_next(be, &it)) {
		kv.type_k = slots[it.j].type_k;
		kv.type_v = slots[it.j].type_v;
		cb_check(be,
			 cb->api->kv_store(cb->dev, &kv, 0,
					   k + (size_t)it.j * k_ld, k_ld,
					   v + (size_t)it.j * v_ld, v_ld,
					   l.dev_seq + it.j, l.dev_pos + it.j,
					   it.len, &err),
			 &err);
	}
}

/* whether rows i and j see their caches in the same types and strides */
static bool cb_views_join(const void *arg, uint32_t i, uint32_t j)
{
	const struct engine_kv_view *v = arg;

	return v[j].type_k == v[i].type_k && v[j].type_v == v[i].type_v &&
	       v[j].k_stride == v[i].k_stride && v[j].v_stride == v[i].v_stride;
}

/*
 * Attention of each row over its sequence's blocks of layer il, by
 * address (engine_kv_view), in runs of consecutive rows of the same
 * cache types; with act, each run's rows quantized to type into act too
 * by the merge, where the module can: false where a run was not (the
 * caller converts them).
 */
static bool cb_attention_to(struct engine_backend *be,
			    const struct engine_att_batch *b, uint32_t type,
			    void *act, size_t act_ld)
{
	struct cuda_backend *cb = be->ctx;
	const struct engine_hparams *hp = b->hp;
	struct cuda_kv kv = { .n_head_kv = hp->n_head_kv,
			      .head_dim = hp->head_dim,
			      .head_dim_v = hp->head_dim_v };
	struct cb_kv_lists l = { .kv = &kv };
	struct engine_kv_view *views;
	struct cb_runs it = { .idx = b->idx,
			      .n = b->n,
			      .joins = cb_views_join };
	struct err err = { 0 };
	uint32_t j, r, mb = 1, blk;
	bool merged = act != NULL;
	int ret;

	if (!b->n || cb->err.code)
		return false;
	for (j = 0; j < b->n; j++) {
		r = cb_row(b->idx, j);
		if (b->pos[r] / CUDA_KV_BLOCK + 1 > mb)
			mb = b->pos[r] / CUDA_KV_BLOCK + 1;
	}
	/* each row's last view: its types and strides (host only) */
	if (b->n > cb->views_cap) {
		views = realloc(cb->views, (size_t)b->n * sizeof(*views));
		if (!views) {
			err_set(&err, ENOMEM, "out of memory");
			cb_check(be, -ENOMEM, &err);
			return false;
		}
		cb->views = views;
		cb->views_cap = b->n;
	}
	views = cb->views;
	if (cb_kv_lists(be, b->n, mb, &l))
		return false;
	for (j = 0; j < b->n; j++) {
		r = cb_row(b->idx, j);
		l.pos[j] = (int32_t)b->pos[r];
		for (blk = 0; blk <= b->pos[r] / CUDA_KV_BLOCK; blk++) {
			engine_kv_view(b->seq[r], b->il, blk * CUDA_KV_BLOCK,
				       blk * CUDA_KV_BLOCK + 1, &views[j]);
			l.k_blocks[(size_t)j * mb + blk] = views[j].k;
			l.v_blocks[(size_t)j * mb + blk] = views[j].v;
		}
	}
	if (cb_send(be, cb->param, l.host, l.bytes))
		return false;
	it.arg = views;
	while (cb_runs_next(be, &it)) {
		const float *q = b->q + (size_t)it.r * b->q_ld;
		float *out = b->out + (size_t)it.r * b->out_ld;

		kv.type_k = views[it.j].type_k;
		kv.type_v = views[it.j].type_v;
		kv.k_row = views[it.j].k_stride;
		kv.v_row = views[it.j].v_stride;
		if (merged) {
			ret = cb->api->attention_quantize(
				cb->dev, &kv, b->il, q, b->q_ld, hp->n_head,
				hp->kq_scale, l.dev_seq + it.j,
				l.dev_pos + it.j, b->n_ctx, out, b->out_ld,
				type, (uint8_t *)act + (size_t)it.r * act_ld,
				act_ld, it.len, &err);
			if (ret != -ENOTSUP) {
				cb_check(be, ret, &err);
				continue;
			}
			merged = false;
		}
		cb_check(be,
			 cb->api->attention(cb->dev, &kv, b->il, q, b->q_ld,
					    hp->n_head, hp->kq_scale,
					    l.dev_seq + it.j, l.dev_pos + it.j,
					    b->n_ctx, out, b->out_ld, it.len,
					    &err),
			 &err);
	}
	return merged;
}

static void cb_attention(struct engine_backend *be,
			 const struct engine_att_batch *b)
{
	cb_attention_to(be, b, IO_TYPE_F32, NULL, 0);
}

/*
 * Attention, its rows quantized for wo by the merge's launch where they
 * are quantized at all (cb_quantizes) and the module's merge can; else
 * attention and convert_rows.
 */
static void cb_attention_convert(struct engine_backend *be,
				 const struct engine_att_batch *b,
				 uint32_t type, void *act, size_t act_ld)
{
	struct cuda_backend *cb = be->ctx;
	const struct engine_hparams *hp = b->hp;
	const bool quantize = type != IO_TYPE_F32 && cb_quantizes(be, b->n);

	if (cb_attention_to(be, b, type, quantize ? act : NULL, act_ld)) {
		cb_act_set(cb, act, true);
		return;
	}
	cb_convert_rows(be, type, b->out, b->out_ld,
			hp->n_head * hp->head_dim_v, act, act_ld, b->idx, b->n);
}

/*
 * The heads normed and roped, K and V stored, in one launch: each row a
 * sequence of its own whose table has only the block of its position
 * (the kernel stores at the position in it and ropes with the position).
 * The separate ops where the rows' caches differ in types or strides,
 * or the module's kernel does not take them (-ENOTSUP).
 */
static void cb_qk_rope_store(struct engine_backend *be,
			     const struct engine_qk_batch *b)
{
	struct cuda_backend *cb = be->ctx;
	const struct engine_hparams *hp = b->hp;
	struct cuda_kv kv = { .n_head_kv = hp->n_head_kv,
			      .head_dim = hp->head_dim,
			      .head_dim_v = hp->head_dim_v };
	const struct cuda_qk_rope q = {
		.q = b->q,
		.k = b->k,
		.v = b->v,
		.q_ld = b->q_ld,
		.k_ld = b->k_ld,
		.v_ld = b->v_ld,
		.q_norm = b->q_norm,
		.k_norm = b->k_norm,
		.eps = hp->rms_norm_eps,
		.n_head = hp->n_head,
		.n_rot = hp->n_rot,
		.mode = hp->rope_mode == ENGINE_ROPE_NEOX ? CUDA_ROPE_NEOX :
							    CUDA_ROPE_NORM,
		.freq_base = hp->rope_freq_base,
		.freq_scale = hp->rope_freq_scale,
		.freq_factors = cb->rope_ff_set ? cb->rope_ff : NULL,
	};
	struct cb_kv_lists l = { .kv = &kv };
	struct engine_kv_view view, first = { 0 };
	struct err err = { 0 };
	uint32_t j, blk, mb = 1;
	int ret;

	if (!b->n || cb->err.code)
		return;
	for (j = 0; j < b->n; j++)
		if (b->pos[j] / CUDA_KV_BLOCK + 1 > mb)
			mb = b->pos[j] / CUDA_KV_BLOCK + 1;
	if (cb_kv_lists(be, b->n, mb, &l))
		return;
	for (j = 0; j < b->n; j++) {
		blk = b->pos[j] / CUDA_KV_BLOCK;
		engine_kv_view(b->seq[j], b->il, blk * CUDA_KV_BLOCK,
			       blk * CUDA_KV_BLOCK + 1, &view);
		if (!j)
			first = view;
		if (view.type_k != first.type_k ||
		    view.type_v != first.type_v ||
		    view.k_stride != first.k_stride ||
		    view.v_stride != first.v_stride)
			goto out_apart;
		l.k_blocks[(size_t)j * mb + blk] = view.k;
		l.v_blocks[(size_t)j * mb + blk] = view.v;
		l.pos[j] = (int32_t)b->pos[j];
	}
	kv.type_k = first.type_k;
	kv.type_v = first.type_v;
	kv.k_row = first.k_stride;
	kv.v_row = first.v_stride;
	if (cb_send(be, cb->param, l.host, l.bytes))
		return;
	ret = cb->api->qk_rope_store(cb->dev, &kv, b->il, &q, l.dev_seq,
				     l.dev_pos, b->n, &err);
	if (ret != -ENOTSUP) {
		cb_check(be, ret, &err);
		return;
	}
out_apart:
	if (b->k_norm)
		cb_rms_norm_rows(be, b->k, b->k, b->k_ld, hp->head_dim,
				 hp->n_head_kv, b->k_norm, hp->rms_norm_eps,
				 NULL, b->n);
	cb_rope_rows(be, b->k, b->k_ld, hp->n_head_kv, hp, b->rope, b->rope_ld,
		     NULL, b->n);
	cb_kv_store_rows(be, b->k, b->k_ld, (uint32_t)b->k_ld, b->v, b->v_ld,
			 (uint32_t)b->v_ld, b->slots, b->n);
	if (b->q_norm)
		cb_rms_norm_rows(be, b->q, b->q, b->q_ld, hp->head_dim,
				 hp->n_head, b->q_norm, hp->rms_norm_eps, NULL,
				 b->n);
	cb_rope_rows(be, b->q, b->q_ld, hp->n_head, hp, b->rope, b->rope_ld,
		     NULL, b->n);
}

/* ---- products and experts ------------------------------------------------ */

static enum cuda_matmul_mode cb_mode(const struct engine_backend *be)
{
	/* batch_exact: every row the one-token path's integer sums */
	return be->batch_exact ? CUDA_MATMUL_MMV : CUDA_MATMUL_AUTO;
}

/* the module's product for mm (its rows set per run by cb_matmul_run) */
static struct cuda_matmul cb_matmul_desc(struct engine_backend *be,
					 const struct engine_matmul *mm)
{
	const struct cuda_backend *cb = be->ctx;
	const struct engine_tensor *w = mm->w;
	const uint64_t expert_bytes = w->row_bytes * (uint64_t)w->info->ne[1];
	const bool act = cb_act_rows(cb, mm->act);

	return (struct cuda_matmul){
		.w_type = w->info->type,
		.w = engine_tensor_data(w) +
		     (uint64_t)mm->expert * expert_bytes,
		.row_bytes = w->row_bytes,
		.n_in = w->info->ne[0],
		.n_out = w->info->ne[1],
		.x_ld = act ? mm->act_ld : mm->act_ld / sizeof(float),
		.y_ld = mm->y_ld,
		.mode = cb_mode(be),
		.x_act = act,
	};
}

/* c's rows: the run of it */
static void cb_matmul_run(const struct engine_matmul *mm,
			  const struct cb_runs *it, struct cuda_matmul *c)
{
	c->x = (const float *)((const uint8_t *)mm->act +
			       (size_t)it->r * mm->act_ld);
	c->y = mm->y + (size_t)it->r2 * mm->y_ld;
	c->rows = it->len;
}

/* mm, as c (cb_matmul_desc, with any fusion set), run by run */
static void cb_matmul_with(struct engine_backend *be,
			   const struct engine_matmul *mm, struct cuda_matmul c)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_runs it = { .idx = mm->act_idx,
			      .idx2 = mm->y_idx,
			      .n = mm->n };
	struct err err = { 0 };

	while (cb_runs_next(be, &it)) {
		cb_matmul_run(mm, &it, &c);
		cb_check(be, cb->api->matmul(cb->dev, &c, &err), &err);
	}
}

/*
 * Products of one batch: where each is one run of rows (a pass's usual
 * case), one call of the module's matmul_group, which reads Q, K and V
 * of one type in one launch; else each alone.
 */
static void cb_matmul(struct engine_backend *be, const struct engine_matmul *mm,
		      uint32_t count)
{
	struct cuda_backend *cb = be->ctx;
	struct cuda_matmul c[3];
	struct err err = { 0 };
	uint32_t i;

	for (i = 0; count > 1 && count <= 3 && i < count; i++) {
		struct cb_runs it = { .idx = mm[i].act_idx,
				      .idx2 = mm[i].y_idx,
				      .n = mm[i].n };

		if (!cb_runs_next(be, &it) || it.len != mm[i].n)
			break;
		c[i] = cb_matmul_desc(be, &mm[i]);
		cb_matmul_run(&mm[i], &it, &c[i]);
	}
	if (count > 1 && i == count) {
		cb_check(be, cb->api->matmul_group(cb->dev, c, count, &err),
			 &err);
		return;
	}
	for (i = 0; i < count; i++)
		cb_matmul_with(be, &mm[i], cb_matmul_desc(be, &mm[i]));
}

/* y += the product, in the product's launch */
static void cb_matmul_add(struct engine_backend *be,
			  const struct engine_matmul *mm)
{
	struct cuda_matmul c = cb_matmul_desc(be, mm);

	c.accumulate = true;
	cb_matmul_with(be, mm, c);
}

/*
 * gate = silu(gate's product) * up's, the two matrices read in one pass
 * where they share a type, a shape and the activations.
 */
static void cb_matmul_swiglu(struct engine_backend *be,
			     const struct engine_matmul *gate,
			     const struct engine_matmul *up)
{
	const struct engine_tensor *g = gate->w, *u = up->w;
	struct cuda_matmul c;

	if (g->info->type == u->info->type &&
	    g->info->ne[0] == u->info->ne[0] &&
	    g->info->ne[1] == u->info->ne[1] && g->row_bytes == u->row_bytes &&
	    gate->act == up->act && gate->act_idx == up->act_idx &&
	    gate->n == up->n && !gate->expert && !up->expert) {
		c = cb_matmul_desc(be, gate);
		c.w2 = engine_tensor_data(u);
		cb_matmul_with(be, gate, c);
		return;
	}
	cb_matmul(be, gate, 1);
	cb_matmul(be, up, 1);
	be->iface->swiglu_rows(be, gate->y, up->y, gate->y_ld,
			       (uint32_t)g->info->ne[1], gate->y_idx, gate->n);
}

static void cb_matmul_id(struct engine_backend *be,
			 const struct engine_matmul_id *m)
{
	struct cuda_backend *cb = be->ctx;
	const struct engine_tensor *w = m->w;
	struct cuda_matmul c = {
		.w_type = w->info->type,
		.w = engine_tensor_data(w),
		.row_bytes = w->row_bytes,
		.n_in = w->info->ne[0],
		.n_out = w->info->ne[1],
		.x_ld = cb_act_rows(cb, m->act) ? m->act_ld :
						  m->act_ld / sizeof(float),
		.y_ld = m->y_ld,
		.ids_ld = m->k,
		.n_slots = m->k,
		.x_per_slot = m->act_per_slot,
		.expert_bytes = w->row_bytes * (uint64_t)w->info->ne[1],
		.n_experts = (uint32_t)w->info->ne[2],
		.mode = cb_mode(be),
		.x_act = cb_act_rows(cb, m->act),
	};
	struct cb_runs it = { .idx = m->idx, .n = m->n };
	struct err err = { 0 };

	while (cb_runs_next(be, &it)) {
		c.x = (const float *)((const uint8_t *)m->act +
				      (size_t)it.r *
					      (m->act_per_slot ? m->k : 1) *
					      m->act_ld);
		c.ids = (const int32_t *)m->sel + (size_t)it.r * m->k;
		c.y = m->y + (size_t)it.r * m->k * m->y_ld;
		c.rows = it.len;
		cb_check(be, cb->api->matmul(cb->dev, &c, &err), &err);
	}
}

static void cb_moe_route_rows(struct engine_backend *be,
			      const struct engine_hparams *hp, float *router,
			      size_t ld, uint32_t *sel, float *weights,
			      const uint32_t *idx, uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	const uint32_t k = hp->n_expert_used;
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };

	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb->api->moe_route(
				 cb->dev, router + (size_t)it.r * ld, ld,
				 hp->n_expert, k, hp->expert_weights_norm,
				 (int32_t *)sel + (size_t)it.r * k,
				 weights + (size_t)it.r * k, it.len, &err),
			 &err);
}

static void cb_moe_combine_rows(struct engine_backend *be, float *out,
				size_t out_ld, const float *eo,
				const float *weights, uint32_t k,
				uint32_t width, const uint32_t *idx, uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_runs it = { .idx = idx, .n = n };
	struct err err = { 0 };

	while (cb_runs_next(be, &it))
		cb_check(be,
			 cb->api->moe_combine(
				 cb->dev, out + (size_t)it.r * out_ld, out_ld,
				 eo + (size_t)it.r * k * width, width,
				 weights + (size_t)it.r * k, k, width, it.len,
				 &err),
			 &err);
}

static const struct engine_backend_i cuda_backend_i = {
	.name = "cuda",
	.destroy = cb_destroy,
	.alloc = cb_alloc,
	.free = cb_free,
	.copy_in = cb_copy_in,
	.copy_out = cb_copy_out,
	.copy = cb_copy,
	.synchronize = cb_synchronize,
	.reserve = cb_reserve,
	.supports = cb_supports,
	.vec_dot_type = cb_vec_dot_type,
	.get_rows = cb_get_rows,
	.rope_cache = cb_rope_cache,
	.rms_norm_rows = cb_rms_norm_rows,
	.add_rows = cb_add_rows,
	.convert_rows = cb_convert_rows,
	.rope_rows = cb_rope_rows,
	.swiglu_rows = cb_swiglu_rows,
	.kv_store_rows = cb_kv_store_rows,
	.matmul = cb_matmul,
	.matmul_id = cb_matmul_id,
	.moe_route_rows = cb_moe_route_rows,
	.moe_combine_rows = cb_moe_combine_rows,
	.attention = cb_attention,
	.rms_norm_convert_rows = cb_rms_norm_convert_rows,
	.matmul_add = cb_matmul_add,
	.matmul_swiglu = cb_matmul_swiglu,
	.qk_rope_store = cb_qk_rope_store,
	.attention_convert = cb_attention_convert,
};

/*
 * The backend without its fusions: each op its own module calls, floats
 * as activations, chunks of the pass's size. LLMFS_CUDA_FUSE=0 (as for
 * the module's own step) picks it, to compare on a card.
 */
static struct engine_backend_i cuda_backend_plain_i;
static pthread_once_t cb_plain_once = PTHREAD_ONCE_INIT;

static void cb_plain_init(void)
{
	cuda_backend_plain_i = cuda_backend_i;
	cuda_backend_plain_i.name = "cuda-unfused";
	cuda_backend_plain_i.rms_norm_convert_rows = NULL;
	cuda_backend_plain_i.matmul_add = NULL;
	cuda_backend_plain_i.matmul_swiglu = NULL;
	cuda_backend_plain_i.qk_rope_store = NULL;
	cuda_backend_plain_i.attention_convert = NULL;
}

static bool cb_fuse(void)
{
	const char *e = getenv("LLMFS_CUDA_FUSE");

	return !e || atoi(e) != 0;
}

int cuda_backend_new(struct engine_backend **out, const char *device,
		     uint32_t threads, struct err *err)
{
	const int index = cb_index(device);
	const struct cuda_api *api = engine_cuda_api(err);
	struct engine_backend *be;
	struct cuda_backend *cb;
	uint64_t free_b = 0, total = 0;
	int ret;

	*out = NULL;
	if (!api) {
		char why[sizeof(err->msg)];

		snprintf(why, sizeof(why), "%s", err->msg);
		return err_set(err, ENODEV, "%.32s: %s", device, why);
	}
	if (index < 0)
		return err_set(err, ENODEV, "no CUDA device '%.32s'", device);
	be = calloc(1, sizeof(*be));
	cb = calloc(1, sizeof(*cb));
	if (!be || !cb) {
		ret = err_set(err, ENOMEM, "out of memory");
		goto out_free;
	}
	cb->api = api;
	if ((ret = api->open(&cb->dev, index, err)))
		goto out_free;
	if ((ret = api->mem_info(cb->dev, &free_b, &total, err))) {
		api->close(cb->dev);
		goto out_free;
	}
	cb->plain = !cb_fuse();
	pthread_once(&cb_plain_once, cb_plain_init);
	be->iface = cb->plain ? &cuda_backend_plain_i : &cuda_backend_i;
	be->ctx = cb;
	be->threads = threads ? threads : 1;
	be->is_host = false;
	/* a prompt's products convert each weight for cuBLAS once a chunk */
	be->batch_rows = cb->plain ? 0 : CB_BATCH_ROWS;
	be->dev.kind = IO_DEVICE_GPU;
	be->dev.index = index;
	snprintf(be->dev.name, sizeof(be->dev.name), "gpu%d", index);
	be->dev.free_bytes = free_b;
	be->dev.total_bytes = total;
	*out = be;
	return 0;

out_free:
	free(cb);
	free(be);
	return ret;
}
