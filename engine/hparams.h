/* SPDX-License-Identifier: MIT */
/*
 * A model's hyper-parameters as the forward pass and the backends' ops
 * need them: read once from the GGUF metadata (engine/model.c), then
 * constant.
 */
#ifndef LLMFS_ENGINE_HPARAMS_H
#define LLMFS_ENGINE_HPARAMS_H

#include <stdbool.h>
#include <stdint.h>

/* Experts one token may use (the forward pass keeps their ids on the stack). */
#define ENGINE_MAX_EXPERTS_USED 64

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

#endif
