// SPDX-License-Identifier: MIT
/*
 * Sequences over the KV pool's blocks (kv.h; the blocks: kv_pool.h).
 *
 * A sequence is a list of block ids, one per ENGINE_KV_BLOCK positions,
 * and the token of each position. It takes blocks when a pass is about
 * to write a position no held block covers, and gives them back when it
 * is truncated below them or freed. engine_seq_reserve promises blocks
 * ahead (a scheduler that admits a generation only when its whole run
 * fits); a sequence that grows past its promise takes from what nobody
 * was promised, or fails with -ENOSPC.
 *
 * Prefix reuse holds the donor's blocks (one more reference each); a
 * block is written by one sequence only: the first pass writing into a
 * block that another sequence holds too copies it first (copy on write,
 * at most the one block a prefix ends in, per sequence that goes on).
 *
 * K and V types are per sequence, taken from the pool's types when it
 * starts (llmfs's `type_k=` applies to sequences started after it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "kv.h"
#include "kv_pool.h"
#include "model.h"

struct engine_seq {
	struct engine_kv_pool *pool;
	struct engine_ctx *ctx; /* the pool's owner, for engine_seq_ctx */
	const struct engine_kv_shape *sh; /* its types' blocks */
	uint32_t n_ctx;	  /* positions it may reach (its ceiling) */
	uint32_t ceiling; /* its context's when it started (engine_ctx_n_ctx) */
	uint32_t n_past;  /* positions filled: the sequence's length */
	uint32_t n_head_kv;
	uint32_t n_layer;
	uint32_t n_blocks;   /* blocks held */
	uint32_t n_reserved; /* blocks engine_seq_reserve asked for */
	uint32_t promised;   /* of those, promised by the pool, not taken */
	uint32_t cap;	     /* ids[] has room for */
	uint32_t *ids;	     /* [n_blocks] the pool's block of each run */
	int32_t *tokens;     /* the token at each position [0, n_past) */
	uint32_t tokens_cap;
	float *embd; /* engine_seq_set_embedding: where passes write it */
	enum engine_pooling pooling;
};

/* The most a sequence may hold: its context's ceiling when it started. */
static uint32_t kv_seq_ceiling(const struct engine_seq *s)
{
	const uint32_t n_ctx = engine_kv_pool_model(s->pool)->info.n_ctx;

	return s->ceiling && s->ceiling < n_ctx ? s->ceiling : n_ctx;
}

void engine_seq_set_embedding(struct engine_seq *s, float *embd,
			      enum engine_pooling pooling)
{
	s->embd = embd;
	s->pooling = pooling;
}

float *engine_seq_embedding(const struct engine_seq *s,
			    enum engine_pooling *pooling)
{
	*pooling = s->pooling;
	return s->embd;
}

static uint32_t kv_blocks_for(uint32_t n)
{
	return (uint32_t)(((uint64_t)n + ENGINE_KV_BLOCK - 1) /
			  ENGINE_KV_BLOCK);
}

/* Layer il of the block holding position pos. */
static uint8_t *kv_layer(const struct engine_seq *s, uint32_t il, uint32_t pos)
{
	return engine_kv_pool_layer(s->pool, s->sh,
				    s->ids[pos / ENGINE_KV_BLOCK], il);
}

static uint8_t *engine_seq_k(const struct engine_seq *s, uint32_t il,
			     uint32_t pos)
{
	return kv_layer(s, il, pos) + (pos % ENGINE_KV_BLOCK) * s->sh->k_row;
}

static uint8_t *engine_seq_v(const struct engine_seq *s, uint32_t il,
			     uint32_t pos)
{
	return kv_layer(s, il, pos) + ENGINE_KV_BLOCK * s->sh->k_row +
	       (pos % ENGINE_KV_BLOCK) * s->sh->v_row;
}

/* Blocks s's reservation still wants promised beyond what it holds. */
static uint32_t kv_seq_wants(const struct engine_seq *s)
{
	return s->n_reserved > s->n_blocks ? s->n_reserved - s->n_blocks : 0;
}

int engine_kv_seq_new(struct engine_kv_pool *p, struct engine_ctx *ctx,
		      uint32_t type_k, uint32_t type_v, struct engine_seq **out,
		      struct err *err)
{
	const struct engine_model *m = engine_kv_pool_model(p);
	struct engine_seq *s;
	int ret;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(err, ENOMEM, "out of memory");
	if ((ret = engine_kv_pool_shape(p, type_k, type_v, &s->sh, err))) {
		free(s);
		return ret;
	}
	s->pool = p;
	s->ctx = ctx;
	s->n_ctx = ctx ? engine_ctx_n_ctx(ctx) : m->info.n_ctx;
	s->ceiling = s->n_ctx;
	s->n_head_kv = m->hp.n_head_kv;
	s->n_layer = m->hp.n_layer;
	*out = s;
	return 0;
}

/*
 * Give back held blocks down to keep; those that go free stay promised to
 * s as far as its reservation wants them (a block it shared and another
 * sequence still holds was never its own to give back).
 */
static void kv_seq_release(struct engine_seq *s, uint32_t keep)
{
	uint32_t n, want;

	if (s->n_blocks <= keep)
		return;
	n = s->n_blocks - keep;
	s->n_blocks = keep;
	want = kv_seq_wants(s) > s->promised ? kv_seq_wants(s) - s->promised :
					       0;
	s->promised += engine_kv_pool_put(s->pool, s->sh, s->ids + keep, n,
					  want);
}

void engine_seq_free(struct engine_seq *s)
{
	if (!s)
		return;
	kv_seq_release(s, 0);
	engine_kv_pool_promise(s->pool, s->sh, -(int64_t)s->promised, NULL);
	free(s->ids);
	free(s->tokens);
	free(s);
}

uint32_t engine_seq_length(const struct engine_seq *s)
{
	return s->n_past;
}

uint32_t engine_seq_capacity(const struct engine_seq *s)
{
	return s->n_ctx;
}

void engine_seq_shrink(struct engine_seq *s)
{
	kv_seq_release(s, kv_blocks_for(s->n_past));
}

void engine_seq_truncate(struct engine_seq *s, uint32_t n)
{
	if (n < s->n_past)
		s->n_past = n;
	engine_seq_shrink(s);
}

int engine_seq_reserve(struct engine_seq *s, uint32_t n_tokens, struct err *err)
{
	const uint64_t limit = engine_kv_pool_limit(s->pool);
	const uint32_t n_ctx = kv_seq_ceiling(s);
	uint32_t want = kv_blocks_for(n_tokens), had = s->n_reserved;
	int ret;

	if ((uint64_t)want * s->sh->block_bytes > limit)
		return err_set(
			err, ENOSPC,
			"%u tokens of KV cache need %llu bytes, over the budget of %llu (--kv-mem, --mem-budget)",
			n_tokens, (unsigned long long)want * s->sh->block_bytes,
			(unsigned long long)limit);
	s->n_reserved = want;
	ret = engine_kv_pool_promise(
		s->pool, s->sh, (int64_t)kv_seq_wants(s) - s->promised, err);
	if (ret) {
		s->n_reserved = had;
		return ret;
	}
	s->promised = kv_seq_wants(s);
	s->n_ctx = n_tokens < n_ctx ? n_tokens : n_ctx;
	return 0;
}

uint32_t engine_seq_budget_tokens(const struct engine_seq *s)
{
	uint64_t n = engine_kv_pool_limit(s->pool) / s->sh->block_bytes *
		     ENGINE_KV_BLOCK;

	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* Room for want block ids. */
static int kv_seq_room(struct engine_seq *s, uint32_t want, struct err *err)
{
	uint32_t cap = s->cap ? s->cap : 4;
	uint32_t *ids;

	if (want <= s->cap)
		return 0;
	while (cap < want)
		cap *= 2;
	ids = realloc(s->ids, (size_t)cap * sizeof(*ids));
	if (!ids)
		return err_set(err, ENOMEM, "out of memory");
	s->ids = ids;
	s->cap = cap;
	return 0;
}

/* Make block b the sequence's own: a copy where another holds it too. */
static int kv_seq_own(struct engine_seq *s, uint32_t b, struct err *err)
{
	uint32_t id, il;
	int ret;

	if (!engine_kv_pool_shared(s->pool, s->sh, s->ids[b]))
		return 0;
	if ((ret = engine_kv_pool_take(s->pool, s->sh, 1, 0, &id, err)))
		return ret;
	for (il = 0; il < s->n_layer; il++)
		engine_kv_pool_copy_layer(s->pool, s->sh, id, s->ids[b], il);
	engine_kv_pool_put(s->pool, s->sh, &s->ids[b], 1, 0);
	s->ids[b] = id;
	return 0;
}

int engine_seq_grow(struct engine_seq *s, uint32_t n, struct err *err)
{
	uint32_t want = kv_blocks_for(n), b, fresh, promised;
	int ret;

	/* the held blocks this pass writes into */
	for (b = s->n_past / ENGINE_KV_BLOCK;
	     n > s->n_past && b < s->n_blocks && b <= (n - 1) / ENGINE_KV_BLOCK;
	     b++)
		if ((ret = kv_seq_own(s, b, err)))
			return ret;
	if (want <= s->n_blocks)
		return 0;
	if ((ret = kv_seq_room(s, want, err)))
		return ret;
	fresh = want - s->n_blocks;
	promised = s->promised < fresh ? s->promised : fresh;
	ret = engine_kv_pool_take(s->pool, s->sh, fresh, promised,
				  s->ids + s->n_blocks, err);
	if (!ret) {
		s->n_blocks = want;
		s->promised -= promised;
	}
	return ret;
}

int engine_seq_tokens_reserve(struct engine_seq *s, uint32_t n, struct err *err)
{
	uint32_t cap = s->tokens_cap ? s->tokens_cap : 64;
	int32_t *t;

	if (n <= s->tokens_cap)
		return 0;
	while (cap < n)
		cap *= 2;
	t = realloc(s->tokens, (size_t)cap * sizeof(*t));
	if (!t)
		return err_set(err, ENOMEM, "out of memory");
	s->tokens = t;
	s->tokens_cap = cap;
	return 0;
}

const int32_t *engine_seq_tokens(const struct engine_seq *s)
{
	return s->tokens;
}

int engine_seq_copy_prefix(struct engine_seq *dst, const struct engine_seq *src,
			   uint32_t n, struct err *err)
{
	uint32_t nb;
	int ret;

	if (dst->pool != src->pool || dst->sh != src->sh)
		return err_set(
			err, EINVAL,
			"prefix of a sequence of another context or type");
	if (n > src->n_past)
		n = src->n_past;
	if (n > dst->n_ctx)
		n = dst->n_ctx;
	engine_seq_truncate(dst, 0);
	nb = kv_blocks_for(n);
	if ((ret = kv_seq_room(dst, nb, err)) ||
	    (ret = engine_seq_tokens_reserve(dst, n, err)))
		return ret;
	/* the same blocks, one more reference each: nothing copied */
	engine_kv_pool_ref(dst->pool, dst->sh, src->ids, nb);
	memcpy(dst->ids, src->ids, (size_t)nb * sizeof(*dst->ids));
	dst->n_blocks = nb;
	/* held blocks its reservation no longer needs promised */
	if (dst->promised > kv_seq_wants(dst)) {
		engine_kv_pool_promise(
			dst->pool, dst->sh,
			-(int64_t)(dst->promised - kv_seq_wants(dst)), NULL);
		dst->promised = kv_seq_wants(dst);
	}
	memcpy(dst->tokens, src->tokens, (size_t)n * sizeof(*dst->tokens));
	dst->n_past = n;
	return 0;
}

void engine_seq_types(const struct engine_seq *s, uint32_t *type_k,
		      uint32_t *type_v)
{
	*type_k = s->sh->type_k;
	*type_v = s->sh->type_v;
}

void engine_seq_row_bytes(const struct engine_seq *s, uint64_t *k_row,
			  uint64_t *v_row)
{
	*k_row = s->sh->k_row;
	*v_row = s->sh->v_row;
}

/* Positions of block b that the sequence fills. */
static uint32_t kv_block_fill(const struct engine_seq *s, uint32_t b)
{
	uint32_t p0 = b * ENGINE_KV_BLOCK;

	if (p0 >= s->n_past)
		return 0;
	return s->n_past - p0 < ENGINE_KV_BLOCK ? s->n_past - p0 :
						  ENGINE_KV_BLOCK;
}

size_t engine_seq_block_size(const struct engine_seq *s, uint32_t b)
{
	return (size_t)kv_block_fill(s, b) * s->n_layer *
	       (s->sh->k_row + s->sh->v_row);
}

/* Copy block b's filled rows out (dir 0) or in (dir 1), layer by layer. */
static void kv_block_copy(const struct engine_seq *s, uint32_t b, uint8_t *buf,
			  int dir)
{
	const size_t kn = kv_block_fill(s, b) * s->sh->k_row;
	const size_t vn = kv_block_fill(s, b) * s->sh->v_row;
	uint32_t pos = b * ENGINE_KV_BLOCK, il;

	for (il = 0; il < s->n_layer; il++) {
		struct engine_backend *be = engine_kv_pool_layer_backend(
			s->pool, il);
		uint8_t *k = engine_seq_k(s, il, pos);
		uint8_t *v = engine_seq_v(s, il, pos);

		if (dir) {
			be->iface->copy_in(be, k, buf, kn);
			be->iface->copy_in(be, v, buf + kn, vn);
		} else {
			be->iface->copy_out(be, buf, k, kn);
			be->iface->copy_out(be, buf + kn, v, vn);
		}
		buf += kn + vn;
	}
}

void engine_seq_block_read(const struct engine_seq *s, uint32_t b, void *out)
{
	kv_block_copy(s, b, out, 0);
}

void engine_seq_block_write(struct engine_seq *s, uint32_t b, const void *in)
{
	kv_block_copy(s, b, (uint8_t *)in, 1);
}

int engine_seq_set_tokens(struct engine_seq *s, const int32_t *tokens,
			  uint32_t n, struct err *err)
{
	const uint32_t n_ctx = kv_seq_ceiling(s);
	int ret;

	if (n > n_ctx)
		return err_set(err, EINVAL, "%u tokens, the context holds %u",
			       n, n_ctx);
	engine_seq_truncate(s, 0);
	if ((ret = engine_seq_grow(s, n, err)) ||
	    (ret = engine_seq_tokens_reserve(s, n, err)))
		return ret;
	if (n)
		memcpy(s->tokens, tokens, (size_t)n * sizeof(*tokens));
	s->n_past = n;
	return 0;
}

void engine_kv_slot(struct engine_seq *s, uint32_t il, uint32_t pos,
		    struct engine_kv_slot *slot)
{
	slot->k = engine_seq_k(s, il, pos);
	slot->v = engine_seq_v(s, il, pos);
	slot->type_k = s->sh->type_k;
	slot->type_v = s->sh->type_v;
}

void engine_kv_view(const struct engine_seq *s, uint32_t il, uint32_t pos,
		    uint32_t end, struct engine_kv_view *view)
{
	const uint32_t n_head_kv = s->n_head_kv;
	uint32_t n = ENGINE_KV_BLOCK - pos % ENGINE_KV_BLOCK;

	view->type_k = s->sh->type_k;
	view->type_v = s->sh->type_v;
	view->k = engine_seq_k(s, il, pos);
	view->v = engine_seq_v(s, il, pos);
	view->k_stride = s->sh->k_row;
	view->v_stride = s->sh->v_row;
	view->k_head = s->sh->k_row / n_head_kv;
	view->v_head = s->sh->v_row / n_head_kv;
	view->n = n < end - pos ? n : end - pos;
}

struct engine_ctx *engine_seq_ctx(const struct engine_seq *s)
{
	return s->ctx;
}

void engine_seq_append(struct engine_seq *s, const int32_t *tokens, size_t n)
{
	memcpy(s->tokens + s->n_past, tokens, n * sizeof(*s->tokens));
	s->n_past += (uint32_t)n;
}
