/* SPDX-License-Identifier: MIT */
/*
 * Inside a loaded model: hyper-parameters, tensor views and the per-model
 * scratch the forward pass computes in. Only the engine's .c files include
 * this; the outside sees struct engine_model through engine.h.
 */
#ifndef LLMFS_ENGINE_MODEL_H
#define LLMFS_ENGINE_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "hparams.h"
#include "tensor.h"

struct engine_vocab;

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

/*
 * Read the model at path (engine_model_open without what computes it:
 * the KV pool, the backend): hyper-parameters, checked tensor views with
 * their placements, the vocabulary, the loaded weights. Free with
 * engine_model_unload. -EINVAL/-ENOTSUP/-ENOMEM with a message.
 */
int engine_model_load(struct engine_model **out, const char *path,
		      const struct engine_model_options *opt, struct err *err);
void engine_model_unload(struct engine_model *m);

/* fn on every tensor view of m, the model's own then each layer's. */
void engine_model_each_view(struct engine_model *m,
			    void (*fn)(struct engine_model *m,
				       struct engine_tensor *t));

/* Free the forward pass's buffers (engine_model_free). */
void engine_forward_release(struct engine_model *m);

/* The tokenizer's vocabulary, for engine/tokenizer*.c. */
const struct engine_vocab *engine_model_vocab(const struct engine_model *m);

#endif
