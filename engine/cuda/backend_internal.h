/* SPDX-License-Identifier: MIT */
/*
 * Inside the CUDA backend: its state, the helpers its ops share, and the
 * ops each file implements for backend.c's table (backend_ops.c: rows,
 * products and experts; backend_kv.c: the KV cache and attention;
 * backend_lists.c: the lists, runs and errors). One backend is one context's: its ops run
 * on one thread at a time, so nothing here locks.
 */
#ifndef LLMFS_ENGINE_CUDA_BACKEND_INTERNAL_H
#define LLMFS_ENGINE_CUDA_BACKEND_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../backend.h"
#include "../kv.h"
#include "module.h"

/* segments of the host ring, each a copy slot of the module's (of 16) */
#define CB_SLOTS 4
/* bytes of a segment at least: a decode step's lists, many times over */
#define CB_SEGMENT (64u << 10)
/* of each op's lists in the ring (the parameter area's alignment too) */
#define CB_ALIGN 256
/*
 * Batches of up to this many rows are converted to the mat-vec kernel's
 * activations whatever the weight; larger ones too for a quantized
 * weight (its vec_dot rows: the mat-vec kernel, or mmq.cu under
 * LLMFS_CUDA_MATMUL=mma, takes any batch), and stay floats for the F16
 * and BF16 weights, which cuBLAS takes (for every weight with
 * LLMFS_CUDA_MATMUL=cublas). $LLMFS_CUDA_MMV_ROWS moves the line
 * (cb_mmv_rows), as it does the module's.
 */
#define CB_QUANT_ROWS 32
/* activation buffers whose format the backend remembers */
#define CB_ACTS 8
/* segments of up to this many rows are recorded as graphs (decode) */
#define CB_GRAPH_ROWS CB_QUANT_ROWS

/* what convert_rows wrote into an activation buffer (cb_act_*) */
struct cb_act {
	const void *buf;
	bool act; /* rows of the module's act type, else floats (x_act) */
};

/*
 * The KV lists qk_rope_store sent last (backend_kv.c): attention of the
 * same layer and rows reads them again instead of sending its own, so a
 * layer's lists are sent once.
 */
struct cb_kv_last {
	bool valid;
	bool recorded; /* into a graph's arena (cb_graph_lists) */
	uint32_t il, n, mb;
	const void *seq, *pos;	/* the batch's arrays */
	unsigned long lists_no; /* cb_lists calls then: none since */
	const uint8_t *const *k_blocks, *const *v_blocks; /* VRAM */
	const int32_t *dev_seq, *dev_pos;
	struct engine_kv_view view; /* every row's types and strides */
};

struct cb_graphs;

struct cuda_backend {
	const struct cuda_api *api;
	struct cuda_dev *dev;	  /* this backend's own handle */
	struct engine_hparams hp; /* of the model, from reserve */
	uint8_t *param;		  /* VRAM: the lists an op takes */
	size_t param_cap;
	uint8_t *ring; /* pinned: CB_SLOTS segments the lists are built in */
	size_t seg;    /* bytes a segment */
	unsigned cur;  /* the segment being filled, and its copy slot */
	size_t used;   /* bytes of it used */
	struct engine_kv_view *views; /* attention's, host only */
	uint32_t views_cap;
	float *rope_ff; /* VRAM: rope's frequency factors */
	uint32_t rope_ff_cap;
	const float *rope_ff_src; /* where they were copied from */
	bool rope_ff_set;	  /* the model has them */
	struct err err;		  /* the first failure since synchronize */
	struct cb_act acts[CB_ACTS];
	unsigned acts_next;	/* the entry a new buffer takes */
	bool plain;		/* LLMFS_CUDA_FUSE=0: no fusions (backend.c) */
	unsigned long lists_no; /* cb_lists calls so far */
	struct cb_kv_last kv_last;
	struct cb_graphs *graphs; /* NULL: LLMFS_CUDA_GRAPH=0 */
	uint32_t mmv_rows; /* rows a product keeps the mat-vec kernel for */
	/* LLMFS_CUDA_MATMUL=cublas: batches past mmv_rows stay floats */
	bool float_products;
};

/* GPUs a process addresses: gpu0 .. gpu15 */
#define CB_DEVICES 16
/* N of "gpuN" (N < CB_DEVICES), or -1 */
int cb_index(const char *device);
/*
 * device's shared handle, the one its weights' memory goes through
 * (opened on first use), with the module's table; NULL if none.
 */
struct cuda_dev *cb_shared(const char *device, const struct cuda_api **api);

/*
 * Keep a failed call's error (ret < 0, e its message): the first one
 * only, for synchronize to return; the ops after it are skipped.
 */
void cb_check(struct engine_backend *be, int ret, const struct err *e);

/*
 * The host ring: CB_SLOTS segments of pinned memory, each with a copy
 * slot of the module's (copy_in_async, slot_wait). An op's lists are
 * built in the segment being filled (cb_stage) and copied into VRAM on
 * the stream behind the ops already queued (cb_send); a segment is
 * filled again only once its last copy is done, which the stream
 * reached long before, so a pass does not wait for the device per op.
 *
 * cb_ring_grow: a ring of segments of at least seg bytes (waits for the
 * device). cb_stage: bytes of the ring, valid until the next cb_stage.
 * cb_send: bytes at host (cb_stage's) into dst (VRAM), enqueued. Errors
 * are kept (cb_check): cb_stage says NULL, the others the code.
 */
int cb_ring_grow(struct engine_backend *be, size_t seg);
void *cb_stage(struct engine_backend *be, size_t bytes);
int cb_send(struct engine_backend *be, void *dst, const void *host,
	    size_t bytes);
/*
 * The VRAM parameter area (cb->param), of at least bytes. One area
 * serves every op: an op's lists are copied there behind the ops before
 * it on the one stream, so none of them still reads it.
 */
int cb_param(struct engine_backend *be, size_t bytes);
/*
 * Where an op's lists of bytes are built (host), and *dev where its
 * kernels read them once cb_send copied them: the ring and the
 * parameter area, or while a graph records, its arena (cb_graph_lists).
 * NULL after a failure (this one's or an earlier op's).
 */
void *cb_lists(struct engine_backend *be, size_t bytes, void **dev);

/*
 * Runs of rows. A batch's rows are an index list (backend.h), and the
 * module's ops take rows that follow each other: so each op makes one
 * module call per run of consecutive rows, usually the whole batch (a
 * pass's rows are 0..n-1 but for the last layer's, which only the rows
 * that want logits compute):
 *
 *	struct cb_runs it = { .idx = idx, .n = n };
 *
 *	while (cb_runs_next(be, &it))
 *		(the module's op on rows it.r .. it.r + it.len - 1)
 */
struct cb_runs {
	const uint32_t *idx, *idx2; /* the op's rows; a second list (NULL: j) */
	uint32_t n;
	/* whether row j may join a run that starts at row i (NULL: yes) */
	bool (*joins)(const void *arg, uint32_t i, uint32_t j);
	const void *arg;
	/* the run: positions j..j+len of the lists, rows r.. and r2.. */
	uint32_t j, len, r, r2;
};

/* Row j of an index list (NULL: j). */
uint32_t cb_row(const uint32_t *idx, uint32_t j);
/*
 * The next run of it (zeroed but for its lists at first): false at the
 * end, or once the backend failed (nothing after is worth running).
 */
bool cb_runs_next(struct engine_backend *be, struct cb_runs *it);

/*
 * VRAM through the cap of device (vram_cap.c): the module's alloc, or
 * -ENOSPC past the cap without asking it; the free of such memory.
 */
int cuda_cap_alloc(const char *device, const struct cuda_api *api,
		   struct cuda_dev *d, void **p, size_t bytes);
void cuda_cap_free(const struct cuda_api *api, struct cuda_dev *d, void *p);

/*
 * Graphs (backend_graph.c: what is recorded, replayed and captured, and
 * when). cb_graphs_new: the backend's graphs, unless LLMFS_CUDA_GRAPH=0
 * (-ENOMEM);
 * cb_graphs_free: them and what they hold (the device idle).
 * cb_graph_op: an op named op (its __func__) of rows rows over tag (its
 * weights or output) is about to enqueue: it is recorded, or what was
 * recorded runs first and it runs plainly. cb_graph_flush: what was
 * recorded runs (every call that waits for the device, copies, or
 * allocates calls it first). cb_graph_lists and cb_graph_send: cb_lists
 * and cb_send while recording.
 */
int cb_graphs_new(struct engine_backend *be);
void cb_graphs_free(struct engine_backend *be);
void cb_graph_op(struct engine_backend *be, const char *op, uint32_t rows,
		 const void *tag);
void cb_graph_flush(struct engine_backend *be);
bool cb_graph_recording(const struct engine_backend *be);
void *cb_graph_lists(struct engine_backend *be, size_t bytes, void **dev);
int cb_graph_send(struct engine_backend *be, void *dst, const void *host,
		  size_t bytes);
/*
 * The log of a recording segment's module calls (backend_calls.c writes
 * it, backend_graph.c compares and issues it). cb_graph_live: whether
 * the segment's capture runs (calls are made, into it) rather than
 * logged only. cb_graph_log: call p (fn's arguments, bytes; answer what
 * it returned) appended; ret, or the log's failure. cb_graph_go_live:
 * the capture begun, the calls logged so far made into it. cb_graph_memo
 * and _set: the answer the same call gave before (calls that answer
 * -ENOTSUP). cb_graph_plain_call: a module call ran outside a graph
 * (kept graphs may bake in what it changed). cb_calls_issue: the
 * module's op of a logged call, made now; one whose answer is not
 * expect fails the backend.
 */
bool cb_graph_live(const struct engine_backend *be);
int cb_graph_log(struct engine_backend *be, uint32_t fn, const void *p,
		 size_t bytes, int answer, int ret);
int cb_graph_go_live(struct engine_backend *be);
bool cb_graph_memo(struct engine_backend *be, uint32_t fn, const void *p,
		   size_t bytes, int *answer);
void cb_graph_memo_set(struct engine_backend *be, uint32_t fn, const void *p,
		       size_t bytes, int answer);
void cb_graph_plain_call(struct engine_backend *be);
int cb_calls_issue(struct engine_backend *be, uint32_t fn, const void *p,
		   int expect);
/*
 * rope_cache's positions (n int32 at host, read at dev once sent: the
 * arena while recording) for cache: sent into cache now outside a
 * graph; while recording, only where rope_rows reads them in a later
 * segment, as the fused step reads its positions from its KV lists
 * instead. cb_rope_positions: where the rows of cache are read (cache,
 * or the arena's copy in the segment that built it).
 */
void cb_rope_send(struct engine_backend *be, float *cache, const void *host,
		  void *dev, uint32_t n);
const int32_t *cb_rope_positions(struct engine_backend *be, const float *cache);

/*
 * The module's ops as the backend's ops call them (backend_calls.c): the
 * module's arguments without the device. Outside a recording segment,
 * the module's op now; inside one, logged (0), or made into the live
 * capture. qk_rope_store and attention_quantize may answer -ENOTSUP
 * (nothing enqueued) as the module's do.
 */
int cb_call_quantize(struct engine_backend *be, uint32_t act, const float *x,
		     size_t x_ld, void *y, size_t y_ld, int64_t n,
		     uint32_t rows, struct err *err);
int cb_call_matmul(struct engine_backend *be, const struct cuda_matmul *mm,
		   struct err *err);
int cb_call_matmul_group(struct engine_backend *be,
			 const struct cuda_matmul *mm, uint32_t count,
			 struct err *err);
int cb_call_get_rows(struct engine_backend *be, uint32_t w_type, const void *w,
		     uint64_t row_bytes, int64_t n, const int32_t *ids,
		     float *y, size_t y_ld, uint32_t rows, struct err *err);
int cb_call_rms_norm(struct engine_backend *be, const float *x, size_t x_ld,
		     const float *w, float *y, size_t y_ld, int64_t n,
		     uint32_t rows, float eps, struct err *err);
int cb_call_rope(struct engine_backend *be, float *x, size_t x_ld,
		 uint32_t n_head, uint32_t head_dim, uint32_t n_rot,
		 enum cuda_rope_mode mode, const int32_t *pos, float freq_base,
		 float freq_scale, const float *freq_factors, uint32_t rows,
		 struct err *err);
int cb_call_swiglu(struct engine_backend *be, float *y, size_t y_ld,
		   const float *g, size_t g_ld, const float *u, size_t u_ld,
		   int64_t n, uint32_t rows, struct err *err);
int cb_call_add(struct engine_backend *be, float *y, size_t y_ld,
		const float *x, size_t x_ld, int64_t n, uint32_t rows,
		struct err *err);
int cb_call_kv_store(struct engine_backend *be, const struct cuda_kv *kv,
		     uint32_t il, const float *k, size_t k_ld, const float *v,
		     size_t v_ld, const int32_t *seq_of, const int32_t *pos,
		     uint32_t rows, struct err *err);
int cb_call_attention(struct engine_backend *be, const struct cuda_kv *kv,
		      uint32_t il, const float *q, size_t q_ld, uint32_t n_head,
		      float scale, const int32_t *seq_of, const int32_t *pos,
		      uint32_t n_ctx, float *out, size_t out_ld, uint32_t rows,
		      struct err *err);
int cb_call_attention_quantize(struct engine_backend *be,
			       const struct cuda_kv *kv, uint32_t il,
			       const float *q, size_t q_ld, uint32_t n_head,
			       float scale, const int32_t *seq_of,
			       const int32_t *pos, uint32_t n_ctx, float *out,
			       size_t out_ld, uint32_t act, void *xq,
			       size_t xq_ld, uint32_t rows, struct err *err);
int cb_call_moe_route(struct engine_backend *be, const float *logits, size_t ld,
		      uint32_t n_exp, uint32_t k, bool norm, int32_t *sel,
		      float *w, uint32_t rows, struct err *err);
int cb_call_moe_combine(struct engine_backend *be, float *out, size_t out_ld,
			const float *eo, size_t eo_ld, const float *w,
			uint32_t k, int64_t n, uint32_t rows, struct err *err);
int cb_call_rms_norm_quantize(struct engine_backend *be, uint32_t act,
			      const float *x, size_t x_ld, const float *w,
			      float *y, size_t y_ld, void *q, size_t q_ld,
			      int64_t n, uint32_t rows, float eps,
			      struct err *err);
int cb_call_qk_rope_store(struct engine_backend *be, const struct cuda_kv *kv,
			  uint32_t il, const struct cuda_qk_rope *q,
			  const int32_t *seq_of, const int32_t *pos,
			  uint32_t rows, struct err *err);

/*
 * Activations (backend_ops.c). cb_quantizes: whether n rows converted
 * to type (the module's activation type of the product's weight) become
 * the kernel's rows (else floats, which cuBLAS takes). cb_act_set: buf now holds the kernel's rows (act) or
 * floats; the products read it by what it holds.
 */
bool cb_quantizes(const struct engine_backend *be, uint32_t type, uint32_t n);
/*
 * CB_QUANT_ROWS, or $LLMFS_CUDA_MMV_ROWS (1 to 512, the module's rule:
 * step.cu cuda_mmv_rows): the rows a product may have on the mat-vec
 * kernel; a segment past it (or past CB_GRAPH_ROWS) is not recorded.
 */
uint32_t cb_mmv_rows(void);
void cb_act_set(struct cuda_backend *cb, const void *buf, bool act);

/* The table's ops on rows (backend_ops.c); engine/backend.h says each. */
void cb_get_rows(struct engine_backend *be, float *y, size_t y_ld,
		 const struct engine_tensor *w, const int32_t *tokens,
		 uint32_t n);
void cb_rope_cache(struct engine_backend *be, float *cache, size_t cache_ld,
		   const uint32_t *pos, uint32_t n,
		   const struct engine_hparams *hp, const float *freq_factors);
void cb_rope_rows(struct engine_backend *be, float *x, size_t ld,
		  uint32_t n_head, const struct engine_hparams *hp,
		  const float *cache, size_t cache_ld, const uint32_t *idx,
		  uint32_t n);
void cb_rms_norm_rows(struct engine_backend *be, float *y, const float *x,
		      size_t ld, uint32_t width, uint32_t per_row,
		      const float *w, float eps, const uint32_t *idx,
		      uint32_t n);
void cb_add_rows(struct engine_backend *be, float *y, size_t y_ld,
		 const float *x, size_t x_ld, uint32_t width,
		 const uint32_t *idx, uint32_t n);
void cb_convert_rows(struct engine_backend *be, uint32_t type, const float *x,
		     size_t x_ld, uint32_t width, void *y, size_t y_ld,
		     const uint32_t *idx, uint32_t n);
void cb_rms_norm_convert_rows(struct engine_backend *be, float *y,
			      const float *x, size_t ld, uint32_t width,
			      const float *w, float eps, uint32_t type,
			      void *act, size_t act_ld, const uint32_t *idx,
			      uint32_t n);
void cb_swiglu_rows(struct engine_backend *be, float *g, const float *u,
		    size_t ld, uint32_t width, const uint32_t *idx, uint32_t n);
void cb_matmul(struct engine_backend *be, const struct engine_matmul *mm,
	       uint32_t count);
void cb_matmul_add(struct engine_backend *be, const struct engine_matmul *mm);
void cb_matmul_swiglu(struct engine_backend *be,
		      const struct engine_matmul *gate,
		      const struct engine_matmul *up);
void cb_matmul_id(struct engine_backend *be, const struct engine_matmul_id *m);
void cb_moe_route_rows(struct engine_backend *be,
		       const struct engine_hparams *hp, float *router,
		       size_t ld, uint32_t *sel, float *weights,
		       const uint32_t *idx, uint32_t n);
void cb_moe_combine_rows(struct engine_backend *be, float *out, size_t out_ld,
			 const float *eo, const float *weights, uint32_t k,
			 uint32_t width, const uint32_t *idx, uint32_t n);

/* The table's ops on the KV cache (backend_kv.c). */
void cb_kv_store_rows(struct engine_backend *be, const float *k, size_t k_ld,
		      uint32_t k_width, const float *v, size_t v_ld,
		      uint32_t v_width, const struct engine_kv_slot *slots,
		      uint32_t n);
void cb_attention(struct engine_backend *be, const struct engine_att_batch *b);
void cb_attention_convert(struct engine_backend *be,
			  const struct engine_att_batch *b, uint32_t type,
			  void *act, size_t act_ld);
void cb_qk_rope_store(struct engine_backend *be,
		      const struct engine_qk_batch *b);

#endif
