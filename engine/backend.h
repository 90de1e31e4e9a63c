/* SPDX-License-Identifier: MIT */
/*
 * A compute backend: one table of function pointers per kind of device,
 * as ggml's ggml_backend_i and ggml_backend_device_i
 * (ggml/src/ggml-backend-impl.h). engine/forward.c runs the graph of a
 * model through this table only; which device computes, where its
 * buffers live and which kernels run are the backend's business.
 *
 * The CPU backend is the first instance: host memory, SIMD kernels split
 * over its thread pool. A CUDA backend fills the same table with device
 * memory and kernels (engine/cuda/ has the probe only so far). Backends
 * are made by device through the registry (engine/backend.c).
 *
 * Rows are float vectors in the backend's memory (is_host: plain host
 * pointers). The ops are called once per op and per batch of rows, never
 * per block: what a kernel does inside is its own loop.
 */
#ifndef LLMFS_ENGINE_BACKEND_H
#define LLMFS_ENGINE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../io/io.h"
#include "hparams.h"
#include "tensor.h"

struct engine_seq;
struct engine_backend;

/* The ops a backend may be asked whether it supports, per tensor type. */
enum engine_op {
	ENGINE_OP_GET_ROWS,  /* type: the embedding's */
	ENGINE_OP_MATMUL,    /* type: the weight's */
	ENGINE_OP_CONVERT,   /* type: what floats become (a vec_dot type) */
	ENGINE_OP_ATTENTION, /* type: the K (and V) cache's */
	ENGINE_OP_COUNT,
};

/*
 * Attention of a batch of rows, each over its own sequence's cache of
 * one layer (positions 0..pos[b], this pass's included), as
 * ggml_flash_attn_ext computes it for llama.cpp's one-token path. Row b
 * is idx[j] for j < n: its Q at q + b * q_ld (n_head * head_dim floats,
 * roped), its result at out + b * out_ld (n_head * head_dim_v floats).
 */
struct engine_att_batch {
	const struct engine_hparams *hp;
	uint32_t il;	/* the layer */
	uint32_t n_ctx; /* the model's context (padding) */
	const uint32_t *idx;
	uint32_t n;
	struct engine_seq *const *seq; /* [b] the row's sequence */
	const uint32_t *pos;	       /* [b] the row's position */
	const float *q;
	size_t q_ld;
	float *out;
	size_t out_ld;
	void *work; /* attention_work_bytes, 64-aligned */
};

/* One product of matvec_multi: y = w . act (act in w's vec_dot type). */
struct engine_mv {
	float *y;
	const struct engine_tensor *w;
	const void *act;
};

struct engine_backend_i {
	const char *name;
	/* free the backend and everything it owns (engine_backend_free) */
	void (*destroy)(struct engine_backend *be);

	/* ---- memory (ggml_backend_buffer_type_i) ---- */
	/* bytes on the device, 64-aligned; NULL when out of memory */
	void *(*alloc)(struct engine_backend *be, size_t bytes);
	void (*free)(struct engine_backend *be, void *p);
	/* host -> device and device -> host, bytes */
	void (*copy_in)(struct engine_backend *be, void *dst, const void *src,
			size_t bytes);
	void (*copy_out)(struct engine_backend *be, void *dst, const void *src,
			 size_t bytes);
	/* whether the backend's memory is the host's (the CPU: yes) */
	bool (*is_host)(const struct engine_backend *be);

	/* ---- what it runs (ggml_backend_device_i.supports_op) ---- */
	bool (*supports)(const struct engine_backend *be, enum engine_op op,
			 uint32_t type);
	/* the type activations are converted to before a matmul with w */
	uint32_t (*vec_dot_type)(const struct engine_backend *be,
				 uint32_t type);

	/* ---- ops ---- */
	/*
	 * fn(arg, j) for every j < n, the rows split over the backend's
	 * threads in one run: a batch's per-row work (norms, conversions,
	 * rope, cache stores), which rows do independently of each other,
	 * so the split changes no bit. Few rows run on the caller alone.
	 */
	void (*for_rows)(struct engine_backend *be,
			 void (*fn)(void *arg, uint32_t j), void *arg,
			 uint32_t n);
	/* y = row `row` of w as floats: ggml_get_rows */
	void (*get_rows)(struct engine_backend *be, float *y,
			 const struct engine_tensor *w, int64_t row);
	/* y = x / rms(x) * w (w may be NULL) */
	void (*rms_norm)(struct engine_backend *be, float *y, const float *x,
			 const float *w, int64_t n, float eps);
	/* n floats to type (a vec_dot type), as the kernels expect them */
	void (*convert)(struct engine_backend *be, uint32_t type,
			const float *x, void *y, int64_t n);
	/*
	 * ys[t] = w (of expert e) . acts[t] for n_tok rows converted to
	 * vec_dot_type(w's type): ggml_mul_mat over a batch.
	 */
	void (*matmul)(struct engine_backend *be, float *const *ys,
		       const struct engine_tensor *w, int64_t e, uint32_t n_tok,
		       const void *const *acts);
	/*
	 * One row against several weights in one parallel run (Q, K and V;
	 * up and gate of one token): mv[k].y = mv[k].w . mv[k].act for
	 * k < n, each row's dot the one matmul gives it (expert 0), so the
	 * bits are those of n matmuls; one barrier instead of n.
	 */
	void (*matvec_multi)(struct engine_backend *be,
			     const struct engine_mv *mv, uint32_t n);
	/* cos/sin per rotated pair at pos; then rotate n_head heads */
	void (*rope_cache)(struct engine_backend *be, float *cache, int64_t pos,
			   uint32_t n_rot, float freq_base, float freq_scale,
			   const float *freq_factors);
	void (*rope)(struct engine_backend *be, float *x, uint32_t n_head,
		     uint32_t head_dim, uint32_t n_rot,
		     enum engine_rope_mode mode, const float *cache);
	/* y = silu(g) * u */
	void (*swiglu)(struct engine_backend *be, float *y, const float *g,
		       const float *u, int64_t n);
	/* y[i] = y[i] + x[i]: biases and the residual (ggml_add) */
	void (*add)(struct engine_backend *be, float *y, const float *x,
		    int64_t n);
	/* in-place softmax of n floats */
	void (*softmax)(struct engine_backend *be, float *x, int64_t n);
	/*
	 * MoE routing of one row (build_moe_ffn, softmax gating): router's
	 * n_expert logits made probabilities in place, the top
	 * n_expert_used experts into sel and their weights into w.
	 */
	void (*moe_route)(struct engine_backend *be,
			  const struct engine_hparams *hp, float *router,
			  uint32_t *sel, float *w);
	/* out = sum over i < k of w[i] * eo[i * n .. ], in order of i */
	void (*moe_combine)(struct engine_backend *be, float *out,
			    const float *eo, const float *w, uint32_t k,
			    size_t n);
	/* bytes of work memory attention needs for up to cap rows */
	size_t (*attention_work_bytes)(const struct engine_backend *be,
				       const struct engine_hparams *hp,
				       uint32_t cap);
	void (*attention)(struct engine_backend *be,
			  const struct engine_att_batch *b);
};

/* A device a backend computes on (ggml_backend_dev_props). */
struct engine_device {
	enum io_device_kind kind;
	int index;	     /* gpuN: N; numaN: the node; cpu: -1 */
	char name[16];	     /* "cpu", "numa0", "gpu0" */
	uint64_t free_bytes; /* memory, when the backend started */
	uint64_t total_bytes;
};

struct engine_backend {
	const struct engine_backend_i *iface;
	struct engine_device dev;
	void *ctx; /* the backend's own (the CPU's: its thread pool) */
	/* engine_model_options.batch_exact: batches in the one-token order */
	bool batch_exact;
};

/* ---- the registry (engine/backend.c) ---- */

/*
 * The backend that computes on device ("cpu", "numa0": the CPU backend),
 * with threads threads where it uses them (0: one per physical core), in
 * *out; the caller frees it with engine_backend_free. -ENODEV (with the
 * device's name) for a device no backend of this build computes on,
 * -ENOMEM.
 */
int engine_backend_new(struct engine_backend **out, const char *device,
		       uint32_t threads, struct err *err);
/* Destroy be (NULL: nothing). */
void engine_backend_free(struct engine_backend *be);
/*
 * Rearrange w's bytes (host memory, as loaded) in place for be's kernels
 * (be computes on w's device), and mark its placement
 * (io_placement.layout, a number of be's kind); once per view, before
 * any use: by the model at open after a synchronous load, by the first
 * pass that waits for it after an asynchronous one. 0, or a negative
 * errno with the bytes left as they were; 0 and nothing done where w is
 * packed already or be reads the file's layout only.
 */
int engine_backend_pack(struct engine_backend *be,
			const struct engine_tensor *w);
/*
 * size bytes from off of tensor t's file bytes into buf, from data in
 * layout (io_placement.layout, not 0): engine_tensor_read.
 */
void engine_backend_packed_read(uint32_t layout, const struct io_gguf_tensor *t,
				const void *data, uint64_t off, size_t size,
				void *buf);

#endif
