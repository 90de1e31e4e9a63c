/* SPDX-License-Identifier: MIT */
/*
 * Inside the forward pass (forward.c, the graph; forward_buffers.c, its
 * buffers). A pass computes each stage (the embedding, each layer, a MoE
 * layer's experts, the output) on the backend of the device the stage's
 * weights are on: the host keeps the rows' bookkeeping, each backend
 * its own buffers, and the residual stream is copied from one backend's
 * buffers to the next's where a stage changes backend, as ggml's
 * scheduler copies a tensor between backends (experts elsewhere: their
 * input and routing there, their sum back; attention where the layer's
 * KV cache is in RAM: Q, K, V there, its output back).
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
	/* [logits_cap][n_vocab] host memory (be's host_alloc, or malloc) */
	float *logits_host;
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
	/* [n_layer] the backend of each layer's attention, where its KV is */
	uint32_t *att_be;
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
/*
 * The logits' buffers of the backend computing now (p->s; not one whose
 * memory is the host's) for n rows, on it and on the host; 0 or -ENOMEM
 * with a message in p->err.
 */
int forward_logits_reserve(struct forward_pass *p, uint32_t n);
/* p->be's synchronize: 0, or its error in p->err */
int forward_sync(struct forward_pass *p);

/*
 * The trace of LLMFS_FORWARD_DUMP (forward_dump.c): forward_dump_next
 * as each chunk starts, then the rows an op wrote:
 * rows idx[0..n) (NULL: 0..n) of buf, ld floats apart, width floats
 * each; k > 1: buf's rows are expert slots, row r the slot r % k of
 * token row r / k. forward_dump_layer names the op blk.IL.WHAT;
 * forward_dump_logits writes the host's logits of rows idx[0..n).
 * Nothing is written, nor synchronized, when the trace is off.
 */
void forward_dump_next(void);
void forward_dump(struct forward_pass *p, const char *op, const float *buf,
		  size_t ld, uint32_t width, const uint32_t *idx, uint32_t n,
		  uint32_t k);
void forward_dump_layer(struct forward_pass *p, uint32_t il, const char *what,
			const float *buf, size_t ld, uint32_t width,
			const uint32_t *idx, uint32_t n, uint32_t k);
void forward_dump_logits(struct forward_pass *p, uint32_t width,
			 const uint32_t *idx, uint32_t n);

/*
 * The steps of a pass (forward_ops.c) and a layer's feed-forward half
 * (forward_ffn.c), on the backend computing now (p->be, p->s). Each
 * returns 0 or the error of a weight's load (in p->err); the backends'
 * ops fail at their synchronize (forward_sync).
 */
/*
 * Wait until t's bytes are loaded (at once unless the model loads
 * asynchronously), and pack them then if the model packs as it loads; a
 * failed load gives its own message.
 */
int forward_wait(struct forward_pass *p, const struct engine_tensor *t);
/* A vector weight (norm, bias) as floats in the backend's memory. */
const float *forward_floats(const struct engine_tensor *t);
/* w's vec_dot type on the backend computing now */
uint32_t forward_vdt(struct forward_pass *p, const struct engine_tensor *w);
/*
 * y = rms_norm(x) * w for rows idx[0..n) of n_embd floats; where y is xn
 * and next (the product that reads it first, or NULL) is given, xn
 * converted for next too, in one op where the backend fuses the two.
 */
int forward_norm(struct forward_pass *p, float *y, const float *x,
		 const struct engine_tensor *w, const uint32_t *idx, uint32_t n,
		 const struct engine_tensor *next);
/* y += b, an optional F32 bias (ggml_add), for rows idx[0..n) */
int forward_bias(struct forward_pass *p, float *y, size_t ld,
		 const struct engine_tensor *b, const uint32_t *idx,
		 uint32_t n);
/*
 * The rows of xn in w's vec_dot type. The conversions since the last
 * norm are kept, as the one-token path converted once per run of
 * same-type matmuls (the result is the same either way).
 */
const uint8_t *forward_xn_act(struct forward_pass *p,
			      const struct engine_tensor *w);
/* y rows idx[] (ld floats) = w . rows idx[] of act: one matmul */
struct engine_matmul forward_mm(struct forward_pass *p, float *y, size_t ld,
				const struct engine_tensor *w,
				const uint8_t *act, const uint32_t *idx,
				uint32_t n);
/* x += tmp for the live rows */
void forward_residual(struct forward_pass *p);
/*
 * A block's output added to the residual stream of the live rows: x +=
 * w . act (+ b, NULL: none): in one op where the backend fuses the add (and no bias
 * comes between), else through tmp.
 */
int forward_out(struct forward_pass *p, const struct engine_tensor *w,
		const uint8_t *act, const struct engine_tensor *b);
/*
 * bytes at src, in the memory of backend from, to dst in to's: once
 * from's ops are done (its synchronize: 0 or its error), straight where
 * either memory is the host's, else through stage (host memory of bytes,
 * as forward_use moves x; NULL where to or from is the host's). A stage
 * that runs elsewhere (a MoE's experts, attention over a cache in RAM)
 * crosses so.
 */
int forward_cross(struct forward_pass *p, struct engine_backend *to, void *dst,
		  struct engine_backend *from, const void *src, size_t bytes,
		  void *stage);
/* One of forward_cross_all's copies: forward_cross's arguments. */
struct forward_copy {
	void *dst;
	const void *src;
	size_t bytes;
	void *stage; /* distinct for each copy of a call */
};
/*
 * The n copies as one crossing: from's ops waited for once, the copies
 * queued together, then waited for once. Each crossing from a GPU costs a
 * round trip (the planner's crossing_s), whatever its bytes.
 */
int forward_cross_all(struct forward_pass *p, struct engine_backend *to,
		      struct engine_backend *from,
		      const struct forward_copy *copies, int n);
/* The dense FFN of layer l: x += down . (silu(gate . xn) * (up . xn)) */
int forward_ffn_dense(struct forward_pass *p, const struct engine_layer *l);
/* The MoE FFN of layer il: routed where the layer is, experts where they are. */
int forward_ffn_moe(struct forward_pass *p, const struct engine_layer *l,
		    uint32_t il);

#endif
