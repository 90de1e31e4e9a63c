/* SPDX-License-Identifier: MIT */
/*
 * Inside a loaded model: hyper-parameters, tensor views and the per-model
 * scratch the forward pass computes in. Only the engine's .c files include
 * this; the outside sees struct engine_model through engine.h.
 *
 * Every tensor is reached through its io_placement record: a view keeps
 * the record and reads ->data at each use, so that io_weights_move can
 * move the bytes between forward passes while the model stays loaded.
 *
 * Shapes use ggml's order: ne[0] is the length of a row (the input
 * dimension of a matmul), ne[1] the number of rows (its outputs), ne[2]
 * the expert.
 */
#ifndef LLMFS_ENGINE_MODEL_H
#define LLMFS_ENGINE_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

struct engine_vocab;

/* Experts one token may use (the forward pass keeps their ids on the stack). */
#define ENGINE_MAX_EXPERTS_USED 64

/* One tensor of the file; absent optional tensors have info == NULL. */
struct engine_tensor {
	const struct io_gguf_tensor *info; /* name, type, ne */
	struct io_placement *place;	   /* where the bytes are now */
	uint64_t row_bytes;		   /* bytes of ne[0] elements */
	/*
	 * llama.cpp's CPU backend would hold this matrix interleaved
	 * (CPU_REPACK: q4_0, q4_K with AVX2, q2_K with AVX-512, rows in
	 * multiples of 8, used by a matmul) and multiply it with its gemv
	 * kernels, which add up in another order.
	 */
	bool repacked;
};

static inline const uint8_t *engine_tensor_data(const struct engine_tensor *t)
{
	return (const uint8_t *)t->place->data;
}

static inline bool engine_tensor_present(const struct engine_tensor *t)
{
	return t->info != NULL;
}

enum engine_rope_mode {
	ENGINE_ROPE_NORM, /* rotate pairs (2i, 2i+1): llama */
	ENGINE_ROPE_NEOX, /* rotate pairs (i, i + n_rot/2): qwen2, qwen3 */
};

struct engine_hparams {
	uint32_t n_vocab;
	uint32_t n_embd;
	uint32_t n_layer;
	uint32_t n_head;
	uint32_t n_head_kv;
	uint32_t head_dim;   /* of K and Q (key_length) */
	uint32_t head_dim_v; /* of V (value_length) */
	uint32_t n_rot;	     /* rotated dimensions per head */
	uint32_t n_ff;	     /* per expert for MoE */
	uint32_t n_ff_exp;   /* expert_feed_forward_length as read */
	uint32_t n_expert;
	uint32_t n_expert_used;
	uint32_t n_ctx_train;
	enum engine_rope_mode rope_mode;
	float rope_freq_base;
	float rope_freq_scale; /* 1 / rope.scaling.factor */
	float rms_norm_eps;
	float kq_scale;		  /* 1/sqrt(head_dim) */
	bool qk_norm;		  /* per-head RMS norms of Q and K (qwen3) */
	bool expert_weights_norm; /* divide the top-k weights by their sum */
};

struct engine_layer {
	struct engine_tensor attn_norm;	     /* [n_embd] F32 */
	struct engine_tensor wq, wk, wv, wo; /* [in, out] */
	struct engine_tensor bq, bk, bv, bo; /* optional biases, F32 */
	struct engine_tensor q_norm, k_norm; /* [head_dim], qwen3 */
	struct engine_tensor ffn_norm;	     /* [n_embd] */
	struct engine_tensor ffn_gate, ffn_up, ffn_down; /* dense FFN */
	struct engine_tensor ffn_gate_inp;  /* router [n_embd, n_expert] */
	struct engine_tensor ffn_gate_exps; /* [n_embd, n_ff, E] */
	struct engine_tensor ffn_up_exps;   /* [n_embd, n_ff, E] */
	struct engine_tensor ffn_down_exps; /* [n_ff, n_embd, E] */
};

/* The KV cache's blocks of one model (engine/kv.c). */
struct engine_kv_pool {
	pthread_mutex_t lock;	      /* protects what follows */
	uint64_t cap;		      /* bytes the blocks may take (--kv-mem) */
	struct engine_budget *shared; /* also charged, if any; borrowed */
	uint64_t committed;	      /* bytes promised: held or reserved */
	uint64_t used;		      /* bytes of blocks held */
	uint64_t blocks;	      /* blocks held */
	uint32_t type_k, type_v;      /* for sequences started from now on */
	bool ready;		      /* the lock was made */
};

/* The forward pass's buffers, sized for its batch (engine/forward.c). */
struct forward_scratch;

struct engine_model {
	struct engine_model_info info;
	struct engine_hparams hp;
	struct io_gguf *gguf;
	struct io_weights *weights;
	struct engine_vocab *vocab;
	char *path;
	char *name;
	uint32_t threads;		/* the pool's size */
	struct engine_pool *pool;	/* splits big matmuls; may be NULL */
	struct engine_backend *backend; /* computes the forward pass */
	/*
	 * an asynchronous load is packed tensor by tensor, at a pass's first
	 * wait for each (engine_model_options.no_pack not set)
	 */
	bool pack_on_wait;

	struct engine_tensor tok_embd;	  /* [n_embd, n_vocab] */
	struct engine_tensor output_norm; /* [n_embd] */
	struct engine_tensor output;	  /* [n_embd, n_vocab]; or tok_embd */
	struct engine_tensor rope_freqs;  /* optional [n_rot/2] F32 */
	struct engine_layer *layers;	  /* [n_layer] */

	struct forward_scratch *fwd; /* grown by engine_forward */
	struct engine_kv_pool kv;
};

/* Free the forward pass's buffers (engine_model_free). */
void engine_forward_release(struct engine_model *m);

/* The tokenizer's vocabulary, for engine/tokenizer*.c. */
const struct engine_vocab *engine_model_vocab(const struct engine_model *m);

#endif
