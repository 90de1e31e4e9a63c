/* SPDX-License-Identifier: MIT */
/*
 * Inside a loaded model: hyper-parameters, tensor views, the vocabulary
 * and the weights, read-only once open (placement moves aside). What
 * computes with it is a context's (context.h). Only the engine's .c files
 * include this; the outside sees struct engine_model through engine.h.
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
struct engine_backend;
struct model_packer;

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

struct engine_model {
	struct engine_model_info info;
	struct engine_hparams hp;
	struct io_gguf *gguf;
	struct io_weights *weights;
	struct engine_vocab *vocab;
	char *path;
	char *name;
	/*
	 * an asynchronous load is packed tensor by tensor as it arrives
	 * (engine_model_options.no_pack not set): by the packer thread, or
	 * at a pass's first wait for a tensor the packer has not reached,
	 * by the waiting context's backend (engine_model_pack_one); one at
	 * a time (pack_lock): the only write to a model after its open
	 * (model_pack.c). NULL: packed at open, or not at all.
	 */
	struct model_packer *packer;
	pthread_mutex_t pack_lock;
	/* how the open asked for packing, for a deferred load's start */
	uint32_t pack_threads;
	bool no_pack, load_async;

	struct engine_tensor tok_embd;	  /* [n_embd, n_vocab] */
	struct engine_tensor output_norm; /* [n_embd] */
	struct engine_tensor output;	  /* [n_embd, n_vocab]; or tok_embd */
	struct engine_tensor rope_freqs;  /* optional [n_rot/2] F32 */
	struct engine_layer *layers;	  /* [n_layer] */
};

/*
 * Move tensors idx[0..n) of m to device, all or none (placement):
 * -EINVAL (a message) for a move that would split a stage of the forward
 * pass over two backends, -ENOSPC, -ENODEV and io/'s errors. No forward
 * pass of any context of m may run meanwhile.
 */
int engine_weights_move(struct engine_model *m, const uint64_t *idx, uint64_t n,
			const char *device, struct err *err);
/* Free the device memory of m's tensors placed on devices (model free). */
void engine_weights_release(struct engine_model *m);

/* The layer of a "blk.N." tensor name, or -1 (the model's own tensors). */
long engine_tensor_layer(const char *name);

/* fn(arg, t) on every tensor view of m, the model's own then each layer's. */
void engine_model_each_view(struct engine_model *m,
			    void (*fn)(void *arg, struct engine_tensor *t),
			    void *arg);

/*
 * Pack every matrix of m (loaded) for a backend of its weights' device,
 * threads threads splitting each matrix: 0, or a backend's error.
 */
int engine_model_pack_all(struct engine_model *m, uint32_t threads,
			  struct err *err);
/*
 * Start packing m's matrices as an asynchronous load brings them in
 * (m->packer): 0, -ENOMEM or pthread_create's error, with a message
 * (engine_model_packer_free frees what was made).
 */
int engine_model_packer_start(struct engine_model *m, struct err *err);
/*
 * t (arrived) packed for be's kernels, by be now unless the packer or
 * another pass did; m->packer must be set.
 */
void engine_model_pack_one(struct engine_model *m, struct engine_backend *be,
			   const struct engine_tensor *t);
/*
 * Wait until the packer has walked every matrix (the load's end at the
 * latest): nothing writes m's weights after (a move, engine_weights_move).
 */
void engine_model_packer_join(struct engine_model *m);
/* Stop the packer (at the latest when the load ends) and free it. */
void engine_model_packer_free(struct engine_model *m);

/* The tokenizer's vocabulary, for engine/tokenizer*.c. */
const struct engine_vocab *engine_model_vocab(const struct engine_model *m);

#endif
