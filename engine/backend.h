/* SPDX-License-Identifier: MIT */
/*
 * A compute backend: one table of function pointers per kind of device,
 * as ggml's ggml_backend_i and ggml_backend_buffer_i
 * (ggml/src/ggml-backend-impl.h). engine/forward.c runs the graph of a
 * model through this table only; which device computes, where its
 * buffers live and which kernels run are the backend's business.
 *
 * The CPU backend is the first instance: host memory, SIMD kernels split
 * over its thread pool. A device backend (CUDA) fills the same table with
 * device memory and kernels. Backends are made by device through the
 * registry (engine/backend.c).
 *
 * Memory. A backend owns its buffers (alloc/free); what the ops read and
 * write lives there: the forward pass's scratch, the KV cache's blocks,
 * the weights placed on its device. Bytes cross between the host and a
 * backend only through copy_in/copy_out; a pass copies the logits out
 * once. is_host says a backend's memory is the host's (the CPU's): then
 * the forward pass may give it host pointers to write into directly.
 *
 * Batches. Every op runs over a whole batch of rows in one call, never
 * per row nor per block: what a kernel does inside is its own loop, so
 * that a device backend can run each op as one kernel launch. A batch of
 * rows is an index list: row j of the op is idx[j] for j < n (idx NULL:
 * row j is j), and row r of an operand x with leading dimension x_ld
 * starts at x + r * x_ld (floats, or bytes for converted activations).
 * Index lists, positions, K/V slots and sequences are host memory (a
 * device backend copies what its kernels need with the launch); every
 * float or byte operand is in the backend's memory.
 *
 * Ops may run asynchronously: synchronize waits for all of them. Ops
 * return nothing: a backend whose op fails (a device's launch error, a
 * lost GPU, no room for an op's parameters) keeps the first failure,
 * skips the ops after it, and synchronize returns it. The forward pass
 * synchronizes before it reads anything back on the host and leaving
 * each stage, and fails the pass with that error (nothing is appended
 * to any sequence), instead of going on with garbage.
 *
 * Bits. Each op computes every row as llama.cpp's one-token path does
 * (or within ../shared/README.md section 4's tolerance of it, where
 * batch_exact is off), whatever the rows' number, order or company: so
 * the same tokens give the same logits on every backend that runs the
 * reference order (Documentation/engine.md, "How to add a backend").
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
 * One matmul of a batch: row y_idx[j] of y (y_ld floats apart) = w (of
 * expert `expert`) . row act_idx[j] of act (act_ld bytes apart, in w's
 * vec_dot type), for j < n: ggml_mul_mat. y_idx or act_idx NULL: j.
 */
struct engine_matmul {
	const struct engine_tensor *w;
	int64_t expert;
	float *y;
	size_t y_ld;
	const uint32_t *y_idx;
	/*
	 * Only where the backend is_host: row j's output at ys[j] instead,
	 * host memory of the caller's (the logits, written in place).
	 */
	float *const *ys;
	const void *act;
	size_t act_ld;
	const uint32_t *act_idx;
	uint32_t n;
};

/*
 * Matmul with an expert per row (ggml_mul_mat_id): for b = idx[j], j < n,
 * and i < k, row b * k + i of y = w (of expert sel[b * k + i]) . row b of
 * act (act_per_slot: row b * k + i). The routing stays where it was
 * computed (moe_route_rows): the host never reads sel.
 */
struct engine_matmul_id {
	const struct engine_tensor *w;
	const uint32_t *sel; /* [row][k] the experts, in the backend's memory */
	uint32_t k;
	float *y;
	size_t y_ld;
	const void *act;
	size_t act_ld;
	bool act_per_slot;
	const uint32_t *idx;
	uint32_t n;
};

/*
 * Where one position of one layer of a sequence keeps its K and V rows
 * (the KV cache's blocks, in the backend's memory) and in which types.
 */
struct engine_kv_slot {
	uint8_t *k, *v;
	uint32_t type_k, type_v;
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
};

/*
 * The inputs of attention for rows 0..n-1 of a pass (qk_rope_store): K
 * heads RMS-normed with k_norm (head_dim floats; NULL: no norm) and
 * roped, K and V stored at slots[j] (kv_store_rows), Q heads normed with
 * q_norm and roped; rope_rows with the pass's rope cache (rope_ld apart).
 */
struct engine_qk_batch {
	const struct engine_hparams *hp;
	uint32_t il; /* the layer */
	uint32_t n;
	struct engine_seq *const *seq; /* [j] the row's sequence */
	const uint32_t *pos;	       /* [j] its position */
	const struct engine_kv_slot *slots;
	float *q, *k;
	const float *v;
	size_t q_ld, k_ld, v_ld;
	const float *q_norm, *k_norm;
	const float *rope;
	size_t rope_ld;
};

struct engine_backend_i {
	const char *name;
	/* free the backend and everything it owns (engine_backend_free) */
	void (*destroy)(struct engine_backend *be);

	/* ---- memory (ggml_backend_buffer_i) ---- */
	/* bytes in the backend's memory, 64-aligned; NULL when out of it */
	void *(*alloc)(struct engine_backend *be, size_t bytes);
	void (*free)(struct engine_backend *be, void *p);
	/* host -> backend, backend -> host, backend -> backend: bytes */
	void (*copy_in)(struct engine_backend *be, void *dst, const void *src,
			size_t bytes);
	void (*copy_out)(struct engine_backend *be, void *dst, const void *src,
			 size_t bytes);
	void (*copy)(struct engine_backend *be, void *dst, const void *src,
		     size_t bytes);
	/*
	 * Optional (NULL: malloc and free serve): host memory that
	 * copy_out writes into fastest (a GPU's page-locked memory: one
	 * DMA, where the driver stages a copy into pageable memory through
	 * its own buffer, a piece at a time); NULL when out of it.
	 */
	void *(*host_alloc)(struct engine_backend *be, size_t bytes);
	void (*host_free)(struct engine_backend *be, void *p);
	/*
	 * Wait until every op called so far is done. 0, or the first
	 * failure of an op or copy since the last synchronize: a negative
	 * errno (-EIO for a device's error) and one message naming the
	 * device ("gpu0: ...") in err; the failure is then forgotten (a
	 * device whose failures persist fails the next pass again).
	 */
	int (*synchronize)(struct engine_backend *be, struct err *err);
	/*
	 * Get ready for batches of up to cap rows of a model of shape hp
	 * (the work memory of its ops: attention's partials, the CPU's
	 * pointer arrays), before the first such batch; 0 or -ENOMEM with
	 * a message. The ops then fail only where a device does
	 * (synchronize says so).
	 */
	int (*reserve)(struct engine_backend *be,
		       const struct engine_hparams *hp, uint32_t cap,
		       struct err *err);

	/* ---- what it runs (ggml_backend_device_i.supports_op) ---- */
	bool (*supports)(const struct engine_backend *be, enum engine_op op,
			 uint32_t type);
	/* the type activations are converted to before a matmul with w */
	uint32_t (*vec_dot_type)(const struct engine_backend *be,
				 uint32_t type);

	/* ---- ops over a batch of rows (see the top of this file) ---- */
	/* row j of y = row tokens[j] of w as floats: ggml_get_rows */
	void (*get_rows)(struct engine_backend *be, float *y, size_t y_ld,
			 const struct engine_tensor *w, const int32_t *tokens,
			 uint32_t n);
	/*
	 * Row j of cache (cache_ld floats): cos/sin of each rotated pair at
	 * position pos[j] (ggml_rope_cache_init), freq_factors (n_rot / 2
	 * floats, or NULL) dividing the frequencies.
	 */
	void (*rope_cache)(struct engine_backend *be, float *cache,
			   size_t cache_ld, const uint32_t *pos, uint32_t n,
			   const struct engine_hparams *hp,
			   const float *freq_factors);
	/*
	 * y = x / rms(x) * w (w NULL: no scale) for each of per_row
	 * sub-rows of width floats of each row (per_row > 1: the heads of a
	 * row, qwen3's Q/K norms); y and x share ld (y may be x).
	 */
	void (*rms_norm_rows)(struct engine_backend *be, float *y,
			      const float *x, size_t ld, uint32_t width,
			      uint32_t per_row, const float *w, float eps,
			      const uint32_t *idx, uint32_t n);
	/* y += x on width floats of each row; x_ld 0: one x for all (a bias) */
	void (*add_rows)(struct engine_backend *be, float *y, size_t y_ld,
			 const float *x, size_t x_ld, uint32_t width,
			 const uint32_t *idx, uint32_t n);
	/* width floats of each row to type (a vec_dot type), as kernels want */
	void (*convert_rows)(struct engine_backend *be, uint32_t type,
			     const float *x, size_t x_ld, uint32_t width,
			     void *y, size_t y_ld, const uint32_t *idx,
			     uint32_t n);
	/*
	 * Rotate the n_head heads (head_dim floats apart) of each row with
	 * its row of cache (rope_cache's, cache_ld apart): ggml_rope.
	 */
	void (*rope_rows)(struct engine_backend *be, float *x, size_t ld,
			  uint32_t n_head, const struct engine_hparams *hp,
			  const float *cache, size_t cache_ld,
			  const uint32_t *idx, uint32_t n);
	/* g = silu(g) * u on width floats of each row (ggml_swiglu) */
	void (*swiglu_rows)(struct engine_backend *be, float *g, const float *u,
			    size_t ld, uint32_t width, const uint32_t *idx,
			    uint32_t n);
	/*
	 * Row j (j < n, every row) of k (k_width floats) and of v into
	 * slots[j], converted to the slot's types (ggml_set_rows).
	 */
	void (*kv_store_rows)(struct engine_backend *be, const float *k,
			      size_t k_ld, uint32_t k_width, const float *v,
			      size_t v_ld, uint32_t v_width,
			      const struct engine_kv_slot *slots, uint32_t n);
	/*
	 * The matmuls of mm[0..count), which read the same batch (Q, K and
	 * V of a layer; its up and gate): one op, which the backend may run
	 * as one (the CPU: one pool run for one token). Each row's dot is
	 * the one-token path's, whatever the grouping.
	 */
	void (*matmul)(struct engine_backend *be,
		       const struct engine_matmul *mm, uint32_t count);
	void (*matmul_id)(struct engine_backend *be,
			  const struct engine_matmul_id *m);
	/*
	 * MoE routing of each row (build_moe_ffn, softmax gating): the
	 * router's n_expert logits (ld floats apart) made probabilities in
	 * place, the top n_expert_used experts into sel[b * k ..] and
	 * their weights into weights[b * k ..], b the row.
	 */
	void (*moe_route_rows)(struct engine_backend *be,
			       const struct engine_hparams *hp, float *router,
			       size_t ld, uint32_t *sel, float *weights,
			       const uint32_t *idx, uint32_t n);
	/*
	 * Row b of out (out_ld floats) = sum over i < k of weights[b k + i]
	 * * row b k + i of eo (width floats each), in order of i.
	 */
	void (*moe_combine_rows)(struct engine_backend *be, float *out,
				 size_t out_ld, const float *eo,
				 const float *weights, uint32_t k,
				 uint32_t width, const uint32_t *idx,
				 uint32_t n);
	void (*attention)(struct engine_backend *be,
			  const struct engine_att_batch *b);

	/*
	 * ---- fused ops: optional (NULL: the forward pass runs the parts) ----
	 * Each does what the ops it names do in sequence, in fewer launches
	 * (a GPU's decode step is bound by them); the bits may differ from
	 * the sequence's only within the backend's own tolerance.
	 */
	/*
	 * rms_norm_rows (per_row 1, y and x ld apart) and then y converted
	 * to type into act (act_ld bytes apart): convert_rows of the result.
	 */
	void (*rms_norm_convert_rows)(struct engine_backend *be, float *y,
				      const float *x, size_t ld, uint32_t width,
				      const float *w, float eps, uint32_t type,
				      void *act, size_t act_ld,
				      const uint32_t *idx, uint32_t n);
	/* matmul of mm with y += the product: add_rows of it after */
	void (*matmul_add)(struct engine_backend *be,
			   const struct engine_matmul *mm);
	/*
	 * The matmuls gate and up (one batch, same rows) and swiglu_rows of
	 * their results into gate->y; up->y may be left unwritten.
	 */
	void (*matmul_swiglu)(struct engine_backend *be,
			      const struct engine_matmul *gate,
			      const struct engine_matmul *up);
	/*
	 * rms_norm_rows of K's heads, rope_rows of K, kv_store_rows, then
	 * rms_norm_rows and rope_rows of Q's heads (struct engine_qk_batch)
	 */
	void (*qk_rope_store)(struct engine_backend *be,
			      const struct engine_qk_batch *b);
	/*
	 * attention of b, then its rows (b->out) converted to type into
	 * act (act_ld bytes apart): convert_rows of the result, for wo
	 */
	void (*attention_convert)(struct engine_backend *be,
				  const struct engine_att_batch *b,
				  uint32_t type, void *act, size_t act_ld);
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
	/* its threads: llama.cpp's count, which splits long attention rows */
	uint32_t threads;
	/* the backend's memory is the host's: host pointers may be given */
	bool is_host;
	/* engine_ctx_options.batch_exact: batches in the one-token order */
	bool batch_exact;
	/*
	 * Token rows a pass should give its ops at once, at most (0: the
	 * pass's own chunk): a GPU's fixed costs per op (a product's
	 * weights converted for cuBLAS, the launches) are paid once per
	 * chunk, so it asks for llama.cpp's n_ubatch.
	 */
	uint32_t batch_rows;
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
/* Whether a backend of this build computes on device. */
bool engine_backend_device_known(const char *device);
/*
 * Whether device's memory is the host's (cpu, numaN: io/ holds the
 * weights placed there), or a backend's own (ref0, a GPU): weights placed
 * there are copied into engine_backend_weights_alloc'ed memory.
 */
bool engine_backend_device_is_host(const char *device);
/* Whether one backend computes on both devices (cpu and numa0: yes). */
bool engine_backend_same_kind(const char *a, const char *b);
/*
 * Whether device has a cap on the memory placed there (a GPU's VRAM cap,
 * --devices gpu0:vram=8G), with the cap and the bytes counted against it.
 */
bool engine_backend_device_cap(const char *device, uint64_t *cap,
			       uint64_t *used);
/*
 * The weights' memory of a device that is not the host's: bytes, NULL
 * when out of it (or for a host device); free; and a copy to, from or
 * within it (the device's own copy: memcpy for the host's).
 */
void *engine_backend_weights_alloc(const char *device, size_t bytes);
void engine_backend_weights_free(const char *device, void *p);
void engine_backend_weights_copy(const char *device, void *dst, const void *src,
				 size_t bytes);
/*
 * io_weights_start's sink_of (arg unused): how a deferred load reads a
 * tensor placed on device straight into its memory. A GPU: the CUDA
 * module's page-locked buffers and asynchronous copies; another device
 * of memory of its own (ref0): plain host buffers and its copy. -ENODEV
 * for a device no backend has memory on.
 */
int engine_backend_stage_sink(void *arg, const char *device,
			      struct io_stage_sink *sink, struct err *err);
/*
 * size bytes from off of tensor t's file bytes into buf, from data in
 * layout (io_placement.layout, not 0): engine_tensor_read.
 */
void engine_backend_packed_read(uint32_t layout, const struct io_gguf_tensor *t,
				const void *data, uint64_t off, size_t size,
				void *buf);

#endif
