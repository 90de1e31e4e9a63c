/* SPDX-License-Identifier: MIT */
/*
 * Inside the forward pass (forward.c, the graph; forward_buffers.c, its
 * buffers). A pass computes each stage (the embedding, each layer, a MoE
 * layer's experts, the output) on the backend of the device the stage's
 * weights are on: the host keeps the rows' bookkeeping, each backend
 * its own buffers, and the residual stream is copied from one backend's
 * buffers to the next's where a stage changes backend, as ggml's
 * scheduler copies a tensor between backends (experts elsewhere: their
 * input and routing there, their sum back).
 */
#ifndef LLMFS_ENGINE_FORWARD_H
#define LLMFS_ENGINE_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "context.h"

/*
 * Token rows of one chunk of a pass; longer batches are split (bounded
 * memory). A backend may ask for more (engine_backend.batch_rows).
 */
#define FORWARD_CHUNK 128
/* xn converted to this many vec_dot types at once (Q, K and V may differ) */
#define FORWARD_XN_SLOTS 3

/* One token of the pass. */
struct forward_row {
	struct engine_seq *seq;
	uint32_t pos;
	int32_t token;
	float *logits; /* NULL unless its item's last token wants them */
	float *embd;   /* its final-normed state goes here (or is added) */
	bool embd_add; /* mean pooling: summed over the item's rows */
};

/*
 * One backend's buffers for cap rows, in its memory: token row r's
 * floats at x + r * n_embd and so on, its converted activations at act +
 * r * act_row, and a MoE's per expert slot (row r's i-th expert: slot
 * r * k + i) at up + (r * k + i) * n_ff and so on.
 */
struct forward_buffers {
	struct engine_backend *be;
	float *x;	      /* [n_embd] residual streams */
	float *xn;	      /* [n_embd] normed input of a block */
	float *q, *k, *v;     /* [n_head * head_dim], [n_head_kv * ...] */
	float *att;	      /* [n_head * head_dim_v] */
	float *tmp;	      /* [n_embd] a block's output */
	float *gate, *up;     /* [k][n_ff] */
	float *router;	      /* [n_expert] */
	float *rope;	      /* [n_rot] cos/sin at the row's position */
	float *expert_out;    /* [k][n_embd] each expert's output */
	float *expert_w;      /* [k] the experts' weights */
	uint32_t *expert_sel; /* [k] the experts */
	uint8_t *xn_act[FORWARD_XN_SLOTS];  /* xn in vec_dot types */
	uint32_t xn_type[FORWARD_XN_SLOTS]; /* UINT32_MAX: stale */
	const uint32_t *xn_idx;		    /* the rows xn holds */
	uint32_t xn_n;
	uint8_t *act; /* [k] other converted inputs (att, swiglu) */
	void *mem;
	float *logits; /* [logits_cap][n_vocab], where not is_host */
	uint32_t logits_cap;
	bool rope_ready; /* this chunk's rope cache is in */
};

/*
 * The pass's buffers for cap rows, grown up to a chunk's: the host's
 * bookkeeping and each backend's buffers (by the context's index).
 */
struct forward_scratch {
	uint32_t cap;
	uint32_t slots_per_row; /* n_expert_used, or 1 */
	size_t act_row;		/* bytes of the widest converted row */
	struct forward_row *rows;
	uint32_t *all;		   /* 0 .. n-1 */
	uint32_t *live;		   /* rows computed past attention this layer */
	uint32_t *slots;	   /* [cap * k] the live rows' expert slots */
	uint32_t *pos;		   /* [cap] each row's position */
	int32_t *tokens;	   /* [cap] each row's token */
	struct engine_seq **seqs;  /* [cap] each row's sequence */
	struct engine_kv_slot *kv; /* [cap] where each row's K/V go */
	float **ys;		   /* [cap] the logits, for a host backend */
	float *x_host;		   /* [cap][n_embd] x between backends */
	void *route_host; /* [cap][k] sel, then [cap][k] weights, likewise */
	void *host;
	uint32_t n_buf;
	struct forward_buffers buf[ENGINE_CTX_BACKENDS];
};

/* One pass over n rows. */
struct forward_pass {
	struct engine_ctx *ctx;
	const struct engine_model *m; /* the context's */
	struct forward_scratch *h;    /* the host's part */
	struct forward_buffers *s;    /* the backend computing now */
	struct engine_backend *be;    /* s->be */
	uint32_t embed_be, output_be; /* the stages' backends (indices) */
	uint32_t *layer_be;	      /* [n_layer] */
	/* [n_layer] the backend of each layer's experts (its own, dense) */
	uint32_t *experts_be;
	uint32_t n;
	uint32_t n_live;
	struct err *err;
};

/*
 * Buffers for cap rows on every backend of the context; the old ones are
 * kept if they do. 0 or -ENOMEM with a message.
 */
int forward_reserve(struct engine_ctx *ctx, uint32_t cap, struct err *err);
/*
 * Compute on backend b (the context's index) from now on: the residual
 * streams of the pass's rows move to its buffers if the last stage ran
 * elsewhere (copy, the first stage: none), and its rope cache is made
 * for this chunk. copy_x false: the stage makes x itself. 0, or the
 * error of the stage left (its backend's synchronize) in p->err.
 */
int forward_use(struct forward_pass *p, uint32_t b, bool copy_x);
/* p->be's synchronize: 0, or its error in p->err */
int forward_sync(struct forward_pass *p);

#endif
