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
 * Files. This one holds the devices, the memory and the table;
 * backend_ops.c the ops on rows, products and experts; backend_kv.c the
 * ops on the KV cache; backend_lists.c the ring, the parameter area and
 * the runs of rows.
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
struct cuda_dev *cb_shared(const char *device, const struct cuda_api **api)
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
	struct err err = { 0 };

	cb_graph_flush(be);
	cb->api->synchronize(cb->dev, &err);
	cb_graphs_free(be);
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

	cb_graph_flush(be);
	/* the passes' buffers and the KV blocks count against a cap */
	if (cuda_cap_alloc(be->dev.name, cb->api, cb->dev, &p, bytes))
		return NULL;
	return p;
}

static void cb_free(struct engine_backend *be, void *p)
{
	struct cuda_backend *cb = be->ctx;

	cb_graph_flush(be);
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

	cb_graph_flush(be);
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

/* page-locked, so that the logits' copy is one DMA (backend.h) */
static void *cb_host_alloc(struct engine_backend *be, size_t bytes)
{
	struct cuda_backend *cb = be->ctx;
	struct err err = { 0 };
	void *p = NULL;

	return cb->api->host_alloc(&p, bytes, &err) ? NULL : p;
}

static void cb_host_free(struct engine_backend *be, void *p)
{
	struct cuda_backend *cb = be->ctx;

	cb_graph_flush(be);
	cb->api->host_free(p);
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

	cb_graph_flush(be);
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

	cb_graph_flush(be);
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

static const struct engine_backend_i cuda_backend_i = {
	.name = "cuda",
	.destroy = cb_destroy,
	.alloc = cb_alloc,
	.free = cb_free,
	.copy_in = cb_copy_in,
	.copy_out = cb_copy_out,
	.copy = cb_copy,
	.host_alloc = cb_host_alloc,
	.host_free = cb_host_free,
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
	cb->mmv_rows = cb_mmv_rows();
	cb->float_products = getenv("LLMFS_CUDA_MATMUL") &&
			     !strcmp(getenv("LLMFS_CUDA_MATMUL"), "cublas");
	be->ctx = cb;
	if ((ret = cb_graphs_new(be))) {
		api->close(cb->dev);
		ret = err_set(err, ENOMEM, "out of memory");
		goto out_free;
	}
	pthread_once(&cb_plain_once, cb_plain_init);
	be->iface = cb->plain ? &cuda_backend_plain_i : &cuda_backend_i;
	be->ctx = cb;
	be->threads = threads ? threads : 1;
	be->is_host = false;
	/*
	 * a prompt's products read each weight once a chunk (for cuBLAS,
	 * an F16 or BF16 weight converted once)
	 */
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
