/* SPDX-License-Identifier: MIT */
/*
 * The KV cache's memory: one pool per context, of fixed-size blocks
 * (ENGINE_KV_BLOCK positions of every layer) handed out from a free list
 * and held by reference count, so that sequences sharing a prefix share
 * its blocks (vLLM's paged attention, llama.cpp's unified cache cells).
 *
 * A block's bytes are one piece per layer, in the memory of the backend
 * that computes the layer: K rows of its positions, then their V rows
 *
 *   block = [n_layer] -> { K[ENGINE_KV_BLOCK][k_row], V[ENGINE_KV_BLOCK][v_row] }
 *
 * Blocks are allocated through the backends (their alloc) in chunks of a
 * few blocks per layer, a chunk given back as soon as none of its blocks
 * is held: the process holds at most the pool's cap, rounded up to a
 * chunk. Blocks of different K/V types have different sizes: each type
 * pair is a shape with its own chunks and free list, all under one cap.
 *
 * What the pool has committed is the blocks held (each once, however many
 * sequences hold it) plus blocks promised to sequences (engine_seq_reserve)
 * and not yet taken: a sequence admitted with a promise never finds the
 * pool full. It stays within the pool's cap (--kv-mem) and, where the pool
 * shares a budget with other contexts (engine/budget.c: the daemon's), is
 * charged to it too; what the pool gives back is released to that budget
 * after the pool's lock is dropped, so that its notification runs outside
 * that lock.
 *
 * Thread safety: every call takes the pool's lock, so sequences of one
 * pool may be freed from any thread. The addresses of blocks move only
 * in engine_kv_pool_follow and with a block's last reference, which the
 * forward pass's thread calls (or while no pass runs).
 */
#ifndef LLMFS_ENGINE_KV_POOL_H
#define LLMFS_ENGINE_KV_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

struct engine_budget;
struct engine_model;
struct engine_kv_stats;
struct engine_kv_pool;

/* positions per block */
#define ENGINE_KV_BLOCK 64

/* The bytes of a block of one K/V type pair (engine_kv_pool_shape). */
struct engine_kv_shape {
	uint32_t type_k, type_v;
	size_t k_row, v_row; /* one position's row of one layer */
	size_t layer_bytes;  /* one layer of a block: K rows, then V rows */
	size_t block_bytes;  /* n_layer of them: what the cap counts */
};

/*
 * A pool for model m in *out (engine_ctx_new), its blocks' layers in the
 * memory of layer_be[il] (borrowed, the context's: it may change between
 * passes, engine_kv_pool_follow moves the blocks after it), on NUMA node
 * layer_node[il] where that is >= 0 and the backend is the host's
 * (borrowed too, may be NULL: -1 for all; memory bound with
 * io_node_alloc: kv-in-ram's cache on the GPU's node), cap bytes at
 * most (0: the shared budget's KV limit, or without one the default
 * budget of the memory left after the weights), also charged to shared
 * (borrowed) if not NULL. Types of new sequences f16/f16. 0, -ENOMEM.
 * Free with engine_kv_pool_free once every sequence of it is freed.
 */
int engine_kv_pool_new(struct engine_kv_pool **out,
		       const struct engine_model *m,
		       struct engine_backend *const *layer_be,
		       const int *layer_node, uint64_t cap,
		       struct engine_budget *shared, struct err *err);
void engine_kv_pool_free(struct engine_kv_pool *p);

/*
 * The K/V types of sequences started from now on (engine_ctx_set_kv_types,
 * which asks the backends first). -EINVAL (a message) for types the
 * model's heads cannot hold.
 */
int engine_kv_pool_set_types(struct engine_kv_pool *p, uint32_t type_k,
			     uint32_t type_v, struct err *err);
void engine_kv_pool_types(struct engine_kv_pool *p, uint32_t *type_k,
			  uint32_t *type_v);
void engine_kv_pool_stats(struct engine_kv_pool *p, struct engine_kv_stats *st);
const struct engine_model *engine_kv_pool_model(const struct engine_kv_pool *p);
/* The most the pool may commit now: its cap, within the shared budget's. */
uint64_t engine_kv_pool_limit(const struct engine_kv_pool *p);

/*
 * The shape of blocks of type_k/type_v (made on first use, kept with the
 * pool). -EINVAL (a message) for types the model's heads cannot hold,
 * -ENOMEM.
 */
int engine_kv_pool_shape(struct engine_kv_pool *p, uint32_t type_k,
			 uint32_t type_v, const struct engine_kv_shape **out,
			 struct err *err);

/*
 * Take n fresh blocks of shape sh into ids (one reference each), all or
 * none; `promised` of them come out of the caller's promise
 * (engine_kv_pool_promise) and need no room of their own. -ENOSPC (the
 * cap or the shared budget has no room), -ENOMEM (the backend's memory
 * has none), with a message.
 */
int engine_kv_pool_take(struct engine_kv_pool *p,
			const struct engine_kv_shape *sh, uint32_t n,
			uint32_t promised, uint32_t *ids, struct err *err);
/* One more reference to each of n blocks (a sequence sharing them). */
void engine_kv_pool_ref(struct engine_kv_pool *p,
			const struct engine_kv_shape *sh, const uint32_t *ids,
			uint32_t n);
/*
 * Drop a reference to each of n blocks (a block with none left is free).
 * Up to `repromise` of the blocks that went free stay promised to the
 * caller instead of going back; returns how many did.
 */
uint32_t engine_kv_pool_put(struct engine_kv_pool *p,
			    const struct engine_kv_shape *sh,
			    const uint32_t *ids, uint32_t n,
			    uint32_t repromise);
/* Whether another sequence holds block id too (write: copy it first). */
bool engine_kv_pool_shared(struct engine_kv_pool *p,
			   const struct engine_kv_shape *sh, uint32_t id);
/*
 * Change what is promised to a caller by delta blocks of sh. -EAGAIN (a
 * message) when a growing promise does not fit beside what is committed
 * now (the cap, the shared budget); nothing changes then. A shrinking one
 * always succeeds.
 */
int engine_kv_pool_promise(struct engine_kv_pool *p,
			   const struct engine_kv_shape *sh, int64_t delta,
			   struct err *err);

/*
 * Where layer il of block id starts (K rows; V rows layer_bytes' second
 * part), in the memory of the backend engine_kv_pool_layer_backend says.
 */
uint8_t *engine_kv_pool_layer(const struct engine_kv_pool *p,
			      const struct engine_kv_shape *sh, uint32_t id,
			      uint32_t il);
struct engine_backend *
engine_kv_pool_layer_backend(const struct engine_kv_pool *p, uint32_t il);
/* The NUMA node layer il's blocks are bound to now; -1: none. */
int engine_kv_pool_layer_node(const struct engine_kv_pool *p, uint32_t il);
/* Copy layer il of block from into block to (both of sh). */
void engine_kv_pool_copy_layer(struct engine_kv_pool *p,
			       const struct engine_kv_shape *sh, uint32_t to,
			       uint32_t from, uint32_t il);

/*
 * Move every block's layer il to the memory of layer_be[il] (and node
 * layer_node[il]) where it changed (a placement write; before a pass).
 * Per layer all or nothing:
 * -ENOMEM (a message) leaves that layer where it was, the ones before it
 * moved.
 */
int engine_kv_pool_follow(struct engine_kv_pool *p, struct err *err);

#endif
