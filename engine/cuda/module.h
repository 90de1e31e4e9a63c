/* SPDX-License-Identifier: MIT */
/*
 * The CUDA module's interface: what build/lib/llmfs-cuda.so exports, as
 * one table of C functions, to the engine that dlopen()s it
 * (engine/cuda/loader.c). The engine itself never links the CUDA runtime,
 * so one build runs on machines without CUDA libraries or a GPU: there
 * the module is absent or finds no device, and everything computes on
 * the CPU.
 *
 * The module links the CUDA runtime statically (it needs only the
 * driver's libcuda.so.1 at run time) and loads cuBLAS itself when a
 * product asks for it. The same sources, compiled by a host compiler
 * with the simulator (engine/cuda/sim/sim.h), give
 * build/lib/llmfs-cuda-sim.so, which `make check` runs on the CPU.
 *
 * Conventions. Every pointer an op takes is device memory unless named
 * host_; every op is enqueued on its device's one stream, in call order,
 * and returns at once: 0, or a negative errno with one line in err (a
 * bad argument: -EINVAL; a CUDA failure: -EIO with the runtime's words).
 * Results are there after synchronize() (or a copy_out, which waits).
 * Shapes are ggml's: a matrix of n_out rows of n_in elements, rows
 * row_bytes apart; activations and outputs are rows of a batch, ld
 * (floats, or bytes for quantized rows) apart. Types are enum io_type.
 *
 * `make check` runs it on the simulator; tools/gpu-check.sh on a card
 * (Documentation/gpu.md: what it checks, what was measured where).
 */
#ifndef LLMFS_ENGINE_CUDA_MODULE_H
#define LLMFS_ENGINE_CUDA_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../io/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Bumped whenever the table below or a struct it passes (io.h's
 * io_device: the probe fills it) changes: the loader refuses others.
 */
#define LLMFS_CUDA_ABI 6

/* Positions per block of the paged KV cache (engine/kv.h's, too). */
#define CUDA_KV_BLOCK 64

/* One GPU in use: its stream, events, cuBLAS handle and scratch. */
struct cuda_dev;
/* An executable CUDA graph of a device's ops (graph_begin .. graph_end). */
struct cuda_graph;

enum cuda_rope_mode {
	CUDA_ROPE_NORM, /* pairs (2i, 2i+1): llama */
	CUDA_ROPE_NEOX, /* pairs (i, i + n_rot/2): qwen2, qwen3 */
};

/*
 * How a batch of activation rows meets a weight matrix (cuda_api.matmul):
 * the int8 mat-vec kernel, 8 rows a weight read (exact: the CPU's integer
 * sums on the weight type's vec_dot rows), the weights dequantized to
 * F16 and multiplied by cuBLAS (tensor cores, F32 accumulation), or int8
 * tensor-core tiles (engine/cuda/mmq.cu: quantized weights (Q4_0..Q8_0,
 * Q2_K..Q6_K), past 32 rows; other types as AUTO). AUTO: the mat-vec
 * kernel for every quantized or F32 weight at any batch, cuBLAS for F16
 * and BF16 weights past 32 rows (halves are their vec_dot type; for a
 * quantized weight they are not: Documentation/gpu.md). LLMFS_CUDA_MATMUL=
 * mmv|cublas|mma forces one; cublas is faster, not llama.cpp's logits.
 */
enum cuda_matmul_mode {
	CUDA_MATMUL_AUTO,
	CUDA_MATMUL_MMV,
	CUDA_MATMUL_CUBLAS,
	CUDA_MATMUL_MMA,
};

/*
 * The ops of one matrix product y = w . x for rows of x:
 * w: n_out rows of n_in elements of w_type, row_bytes apart (experts:
 * expert_bytes apart); x: rows of floats, x_ld apart; y: rows of n_out
 * floats, y_ld apart.
 */
struct cuda_matmul {
	uint32_t w_type;
	const void *w;
	uint64_t row_bytes;
	/*
	 * the order of llama.cpp's repacked gemv, as the CPU adds up this
	 * matrix (engine_tensor.llama_repacked), else its vec_dot's
	 */
	bool repacked;
	int64_t n_in, n_out;
	const float *x;
	size_t x_ld;
	float *y;
	size_t y_ld;
	uint32_t rows;
	/*
	 * MoE: when ids is set, row r of x is multiplied with expert
	 * ids[r * ids_ld + slot] (w + expert * expert_bytes) for each slot <
	 * n_slots, into y + (r * n_slots + slot) * y_ld; x_per_slot: x has
	 * one row per (r, slot) too (the down projection), else one per r.
	 */
	const int32_t *ids;
	uint32_t ids_ld, n_slots;
	bool x_per_slot;
	uint64_t expert_bytes;
	uint32_t n_experts; /* ids are below it */
	enum cuda_matmul_mode mode;
	/*
	 * Fusions. x_act: x holds rows already of act_type(w_type)
	 * (quantize's), x_ld bytes apart, which the mat-vec kernel reads
	 * as they are, and the int8 tensor cores under MMA where x and x_ld
	 * are 16-aligned (cuBLAS takes floats: the mat-vec kernel then).
	 * accumulate: y += the product (the bits of a separate add). w2 (not
	 * with ids): a second matrix of w's type and shape, and y =
	 * silu(w . x) * (w2 . x) (gate w, up w2; the CPU's SiLU).
	 */
	bool x_act, accumulate;
	const void *w2;
};

/*
 * A paged KV cache in VRAM, laid out as the CPU's (engine/kv.h): blocks
 * of CUDA_KV_BLOCK positions, each holding layer after layer the K rows
 * of its positions (k_row bytes each, every KV head) then their V rows;
 * block b at pool + b * block_bytes. Sequence s's position p is in block
 * tables[s * max_blocks + p / CUDA_KV_BLOCK]. Types: F16, BF16, F32,
 * Q8_0, K and V apart.
 *
 * Or, where k_blocks is set (the engine's KV pool, whose blocks are
 * allocations of their own, engine/kv_pool.h): the K rows of block
 * (s, b) of the layer asked for start at k_blocks[s * max_blocks + b],
 * its V rows at v_blocks[s * max_blocks + b] (both tables in device
 * memory); pool, block_bytes and tables are then unused.
 */
struct cuda_kv {
	uint8_t *pool;
	uint64_t block_bytes; /* n_layer * CUDA_KV_BLOCK * (k_row + v_row) */
	uint64_t k_row, v_row;
	uint32_t type_k, type_v;
	uint32_t n_head_kv, head_dim, head_dim_v;
	const int32_t *tables;
	uint32_t max_blocks;
	const uint8_t *const *k_blocks, *const *v_blocks;
};

/* The inputs of attention of a batch, for cuda_api.qk_rope_store. */
struct cuda_qk_rope {
	float *q, *k; /* rows of n_head, n_head_kv heads of head_dim */
	const float *v;
	size_t q_ld, k_ld, v_ld;
	const float *q_norm, *k_norm; /* head_dim weights, or NULL: none */
	float eps;
	uint32_t n_head, n_rot;
	enum cuda_rope_mode mode;
	float freq_base, freq_scale;
	const float *freq_factors; /* or NULL */
};

/* ---- a model on the device (step.cu) ---- */

/* One tensor in VRAM as the file has it; data NULL: absent. */
struct cuda_tensor {
	const void *data;
	uint32_t type;
	int64_t ne[3];	    /* ne[0] the row, ne[1] rows, ne[2] experts */
	uint64_t row_bytes; /* of ne[0] elements */
	bool repacked;	    /* engine_tensor.llama_repacked */
};

struct cuda_layer {
	struct cuda_tensor attn_norm, wq, wk, wv, wo, bq, bk, bv, bo;
	struct cuda_tensor q_norm, k_norm, ffn_norm;
	struct cuda_tensor ffn_gate, ffn_up, ffn_down; /* dense */
	struct cuda_tensor ffn_gate_inp;	       /* router, F32 */
	struct cuda_tensor ffn_gate_exps, ffn_up_exps, ffn_down_exps;
};

/*
 * The forward pass of llama, qwen2, qwen3 and qwen3moe as the engine
 * computes it (engine/forward.c): the hyper-parameters and where each
 * tensor is. The caller keeps the tensors' memory.
 */
struct cuda_model_desc {
	uint32_t n_vocab, n_embd, n_layer, n_head, n_head_kv;
	uint32_t head_dim, head_dim_v, n_rot, n_ff;
	uint32_t n_expert, n_expert_used;
	enum cuda_rope_mode rope_mode;
	float rope_freq_base, rope_freq_scale, rms_norm_eps, kq_scale;
	bool qk_norm, expert_weights_norm;
	struct cuda_tensor tok_embd, output_norm, output, rope_freqs;
	const struct cuda_layer *layers; /* n_layer, copied by ctx_new */
};

struct cuda_ctx_params {
	uint32_t n_ctx;	   /* positions a sequence may reach */
	uint32_t max_seqs; /* sequence slots 0 .. max_seqs - 1 */
	uint32_t max_rows; /* token rows a pass computes at once */
	uint32_t type_k, type_v;
	uint64_t kv_blocks; /* blocks of the KV pool; 0: every slot full */
	bool no_graphs;	    /* run decode steps launch by launch */
	enum cuda_matmul_mode matmul; /* products of more than 8 rows */
};

/* One item of a pass: tokens appended to a sequence, as engine_forward. */
struct cuda_item {
	uint32_t seq;
	const int32_t *tokens; /* host */
	uint32_t n_tokens;
	float *logits; /* host, n_vocab floats of the last token; or NULL */
};

/* A model's state on one device: buffers, KV cache, sequences, graphs. */
struct cuda_ctx;

struct cuda_ctx_stats {
	uint64_t device_bytes; /* buffers and KV pool */
	uint64_t kv_blocks, kv_blocks_free;
	uint64_t graphs_captured, graph_launches, passes;
};

struct cuda_api {
	uint32_t abi;  /* LLMFS_CUDA_ABI */
	uint32_t size; /* sizeof(struct cuda_api) */
	const char
		*how; /* "cuda 13.0 sm_80 sm_86 sm_89 sm_90" or "simulator" */

	/* ---- devices ---- */
	/*
	 * Append one IO_DEVICE_GPU per usable device to set (probe.cu):
	 * memory, NUMA node, measured VRAM and host->device bandwidth,
	 * compute true. The count added, or -ENODEV with the runtime's
	 * reason (no driver, no device), -ENOSPC when set is full.
	 */
	int (*probe)(struct io_device_set *set, struct err *err);
	/* Start using device index; close frees everything it holds. */
	int (*open)(struct cuda_dev **out, int index, struct err *err);
	void (*close)(struct cuda_dev *d);
	/* free and total bytes of the device now */
	int (*mem_info)(struct cuda_dev *d, uint64_t *free_b, uint64_t *total,
			struct err *err);

	/* ---- memory ---- */
	/* 256-aligned device bytes; -ENOSPC when the device has no room */
	int (*alloc)(struct cuda_dev *d, void **p, size_t n, struct err *err);
	void (*free)(struct cuda_dev *d, void *p);
	/* host -> device and back, waiting for the stream first (blocking) */
	int (*copy_in)(struct cuda_dev *d, void *dst, const void *host_src,
		       size_t n, struct err *err);
	int (*copy_out)(struct cuda_dev *d, void *host_dst, const void *src,
			size_t n, struct err *err);
	/* device -> device, enqueued */
	int (*copy)(struct cuda_dev *d, void *dst, const void *src, size_t n,
		    struct err *err);
	/*
	 * n bytes between any two places, host or device (the runtime tells
	 * them apart: cudaMemcpyDefault), blocking: the engine's weights
	 * copy, which does not say the direction.
	 */
	int (*copy_any)(struct cuda_dev *d, void *dst, const void *src,
			size_t n, struct err *err);
	int (*memset)(struct cuda_dev *d, void *p, int byte, size_t n,
		      struct err *err);
	int (*synchronize)(struct cuda_dev *d, struct err *err);

	/*
	 * Page-locked host memory, for the staging ring (io/stage.h):
	 * host_alloc's own (cudaHostAlloc), or the caller's pinned in place
	 * (cudaHostRegister). Copies from either are DMA.
	 */
	int (*host_alloc)(void **p, size_t n, struct err *err);
	void (*host_free)(void *p);
	int (*host_register)(void *p, size_t n, struct err *err);
	void (*host_unregister)(void *p);
	/*
	 * Enqueue host_src -> dst (n bytes) and mark it as slot's copy;
	 * slot_wait blocks until slot's last copy is done (its host bytes
	 * may be reused). slot < CUDA_SLOTS.
	 */
	int (*copy_in_async)(struct cuda_dev *d, void *dst,
			     const void *host_src, size_t n, unsigned slot,
			     struct err *err);
	int (*slot_wait)(struct cuda_dev *d, unsigned slot, struct err *err);

	/* ---- ops (module.cu) ---- */
	/*
	 * The activation type the kernels want for a weight type: Q8_1 for
	 * the 32-element legacy blocks (the same int8 quants as the CPU's
	 * Q8_0 and Q8_1), Q8_K for the K-quants (as the CPU's), F32 for the
	 * float types (the kernel rounds to F16/BF16 as the CPU does).
	 * IO_TYPE_COUNT for a type the module cannot multiply.
	 */
	uint32_t (*act_type)(uint32_t w_type);
	/* bytes of one activation row of n elements of act_type */
	uint64_t (*act_row_bytes)(uint32_t act_type, int64_t n);
	/* rows of n floats (x_ld apart) into act_type rows (y_ld bytes) */
	int (*quantize)(struct cuda_dev *d, uint32_t act_type, const float *x,
			size_t x_ld, void *y, size_t y_ld, int64_t n,
			uint32_t rows, struct err *err);
	/* y = w . x, the kernel by mode (see struct cuda_matmul) */
	int (*matmul)(struct cuda_dev *d, const struct cuda_matmul *mm,
		      struct err *err);
	/* y[r] = row ids[r] of w as floats: ggml_get_rows */
	int (*get_rows)(struct cuda_dev *d, uint32_t w_type, const void *w,
			uint64_t row_bytes, int64_t n, const int32_t *ids,
			float *y, size_t y_ld, uint32_t rows, struct err *err);
	/* y = x / rms(x) * w (w may be NULL), rows of n */
	int (*rms_norm)(struct cuda_dev *d, const float *x, size_t x_ld,
			const float *w, float *y, size_t y_ld, int64_t n,
			uint32_t rows, float eps, struct err *err);
	/*
	 * Rotate rows of n_head heads of head_dim floats (x_ld apart) in
	 * place, row r at position pos[r]; freq_factors may be NULL.
	 */
	int (*rope)(struct cuda_dev *d, float *x, size_t x_ld, uint32_t n_head,
		    uint32_t head_dim, uint32_t n_rot, enum cuda_rope_mode mode,
		    const int32_t *pos, float freq_base, float freq_scale,
		    const float *freq_factors, uint32_t rows, struct err *err);
	/* y = silu(g) * u, rows of n */
	int (*swiglu)(struct cuda_dev *d, float *y, size_t y_ld, const float *g,
		      size_t g_ld, const float *u, size_t u_ld, int64_t n,
		      uint32_t rows, struct err *err);
	/* y += x, rows of n; x_ld 0 adds one row to all (a bias) */
	int (*add)(struct cuda_dev *d, float *y, size_t y_ld, const float *x,
		   size_t x_ld, int64_t n, uint32_t rows, struct err *err);
	/*
	 * Row r's K and V (n_head_kv heads of head_dim, head_dim_v floats)
	 * into layer il of the cache at sequence seq_of[r], position pos[r]
	 * (whose block must be in the table), converted to the cache types.
	 */
	int (*kv_store)(struct cuda_dev *d, const struct cuda_kv *kv,
			uint32_t il, const float *k, size_t k_ld,
			const float *v, size_t v_ld, const int32_t *seq_of,
			const int32_t *pos, uint32_t rows, struct err *err);
	/*
	 * Row r's n_head query heads (q, roped) attend to positions
	 * 0..pos[r] of sequence seq_of[r] in layer il, scaled by scale, as
	 * ggml_flash_attn_ext (GQA: n_head a multiple of n_head_kv, at most
	 * 8 query heads a KV head); out rows n_head * head_dim_v. n_ctx:
	 * the largest position + 1 any row may have (sizes the split).
	 */
	int (*attention)(struct cuda_dev *d, const struct cuda_kv *kv,
			 uint32_t il, const float *q, size_t q_ld,
			 uint32_t n_head, float scale, const int32_t *seq_of,
			 const int32_t *pos, uint32_t n_ctx, float *out,
			 size_t out_ld, uint32_t rows, struct err *err);
	/*
	 * MoE routing of rows of n_exp logits (ld apart): softmax, the top
	 * k experts into sel (rows x k) and their weights into w, divided
	 * by their sum when norm.
	 */
	int (*moe_route)(struct cuda_dev *d, const float *logits, size_t ld,
			 uint32_t n_exp, uint32_t k, bool norm, int32_t *sel,
			 float *w, uint32_t rows, struct err *err);
	/* out[r] = sum over i < k of w[r k + i] * eo[r k + i], in order */
	int (*moe_combine)(struct cuda_dev *d, float *out, size_t out_ld,
			   const float *eo, size_t eo_ld, const float *w,
			   uint32_t k, int64_t n, uint32_t rows,
			   struct err *err);

	/* ---- the forward pass (step.cu) ---- */
	/*
	 * A context for model m on d: its buffers and KV pool allocated
	 * now (-ENOSPC when they do not fit), -EINVAL for a model or cache
	 * types the kernels lack (the message says which). Free with
	 * ctx_free, before the tensors.
	 */
	int (*ctx_new)(struct cuda_dev *d, const struct cuda_model_desc *m,
		       const struct cuda_ctx_params *p, struct cuda_ctx **out,
		       struct err *err);
	void (*ctx_free)(struct cuda_ctx *c);
	/*
	 * One pass over n items (at most max_seqs), all or nothing: -EINVAL
	 * for a bad slot or token, -ENOSPC when a sequence would pass n_ctx
	 * or the pool has no free block; nothing is appended then. Decode
	 * steps (one token an item, logits for each) replay a CUDA graph
	 * per batch size, captured at its first use.
	 */
	int (*ctx_forward)(struct cuda_ctx *c, const struct cuda_item *items,
			   uint32_t n, struct err *err);
	/* Keep the first n positions of sequence seq (0: empty it). */
	int (*ctx_seq_truncate)(struct cuda_ctx *c, uint32_t seq, uint32_t n,
				struct err *err);
	uint32_t (*ctx_seq_length)(const struct cuda_ctx *c, uint32_t seq);
	void (*ctx_stats)(const struct cuda_ctx *c, struct cuda_ctx_stats *st);

	/* ---- fused ops (the step's kernels, for the engine's backend) ---- */
	/*
	 * count products of the same rows of x (Q, K and V of a layer):
	 * those next to each other of one weight type and width, taking
	 * x_act rows without fusions of their own, in one launch of the
	 * mat-vec kernel (up to 3); the same sums as one call each.
	 */
	int (*matmul_group)(struct cuda_dev *d, const struct cuda_matmul *mm,
			    uint32_t count, struct err *err);
	/*
	 * y = x / rms(x) * w (rows of n) and y quantized to act_type into
	 * q (q_ld bytes apart), in one launch where act_type's blocks
	 * divide n (two otherwise): a product's activations with the norm.
	 */
	int (*rms_norm_quantize)(struct cuda_dev *d, uint32_t act_type,
				 const float *x, size_t x_ld, const float *w,
				 float *y, size_t y_ld, void *q, size_t q_ld,
				 int64_t n, uint32_t rows, float eps,
				 struct err *err);
	/*
	 * Row r's Q and K heads RMS-normed (where the weights are given)
	 * and roped at pos[r], its K and V stored into layer il of the
	 * cache at sequence seq_of[r], position pos[r]: rms_norm, rope and
	 * kv_store in one launch, their bits (the norm's sum of squares in
	 * another order). -ENOTSUP with nothing enqueued where the kernel
	 * does not take the cache types or heads: the caller runs the three.
	 */
	int (*qk_rope_store)(struct cuda_dev *d, const struct cuda_kv *kv,
			     uint32_t il, const struct cuda_qk_rope *a,
			     const int32_t *seq_of, const int32_t *pos,
			     uint32_t rows, struct err *err);
	/*
	 * attention, with its rows also quantized to act_type (the
	 * activations of the product after it, wo) into xq, xq_ld bytes
	 * apart, in the launch that merges them; -ENOTSUP with nothing
	 * enqueued where the merge cannot (the caller quantizes after).
	 */
	int (*attention_quantize)(struct cuda_dev *d, const struct cuda_kv *kv,
				  uint32_t il, const float *q, size_t q_ld,
				  uint32_t n_head, float scale,
				  const int32_t *seq_of, const int32_t *pos,
				  uint32_t n_ctx, float *out, size_t out_ld,
				  uint32_t act_type, void *xq, size_t xq_ld,
				  uint32_t rows, struct err *err);

	/* ---- graphs (graph.cu) ---- */
	/*
	 * Record the ops enqueued on d from now on instead of running them,
	 * until graph_end (stream capture, this thread's: calls that wait
	 * for the device or allocate fail meanwhile, and so do copies from
	 * host memory that is not pinned).
	 */
	int (*graph_begin)(struct cuda_dev *d, struct err *err);
	/*
	 * End the recording into *g: a new executable graph where *g is
	 * NULL, else *g updated in place (the same ops with other
	 * arguments: *updated true) or, where that cannot be, made again.
	 * g NULL: the ops recorded are dropped. *g is NULL on failure.
	 */
	int (*graph_end)(struct cuda_dev *d, struct cuda_graph **g,
			 bool *updated, struct err *err);
	/* Enqueue g's ops on d's stream, as one launch. */
	int (*graph_launch)(struct cuda_dev *d, struct cuda_graph *g,
			    struct err *err);
	void (*graph_free)(struct cuda_graph *g); /* NULL: nothing */
};

/* The module's export (dlsym name "llmfs_cuda_api"). */
const struct cuda_api *llmfs_cuda_api(void);

/*
 * For tests only (dlsym name "llmfs_cuda_mma_fragments"): one warp runs
 * mma.sync.m16n8k32.s32.s8.s8.s32 (engine/cuda/mma.cuh) on device,
 * lane l's registers taken from regs[10 l ..]: A's 4, B's 2, C's 4; C's
 * are replaced by the D the lane gets. 0, or -EIO.
 */
int llmfs_cuda_mma_fragments(int device, int32_t regs[32 * 10]);

#ifdef __cplusplus
}
#endif

#endif
