// SPDX-License-Identifier: MIT
/*
 * Sequences and their paged KV cache (see kv.h for the block layout).
 *
 * Each context has one pool: a cap in bytes, what is held and what is
 * promised. A block is taken when a pass is about to write a position no
 * held block covers, and given back when the sequence is truncated below
 * it or freed. engine_seq_reserve promises blocks ahead (a scheduler that
 * admits a generation only when its whole run fits); a sequence that
 * grows past its promise takes from what nobody was promised, or fails
 * with -ENOSPC. Blocks are allocations of the context's backend (its
 * memory: the host's for the CPU): a freed one goes back to it, so the
 * process never holds more than the cap.
 *
 * Every change of what a pool has promised is also charged to (or
 * released from) the budget it shares with the other models, if any
 * (engine/budget.c): the pool keeps to its own cap, the budget to the
 * daemon's. Released bytes go back to the shared budget after the pool's
 * lock is dropped, so that its notification runs outside that lock.
 *
 * K and V types are per sequence, taken from the pool's types when it
 * starts (llmfs's `type_k=` applies to sequences started after it).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "kv.h"
#include "model.h"
#include "quant/quant.h"

static bool quant_traits_kv(uint32_t type)
{
	return quant_traits(type)->kv;
}

struct engine_seq {
	struct engine_kv_pool *pool;
	struct engine_ctx *ctx; /* the pool's owner, for engine_seq_ctx */
	uint32_t type_k, type_v;
	uint32_t n_ctx;	 /* positions it may reach (its ceiling) */
	uint32_t n_past; /* positions filled: the sequence's length */
	uint32_t n_head_kv;
	size_t k_row; /* bytes of one position's keys in one layer */
	size_t v_row;
	uint32_t n_layer;
	size_t layer_bytes;  /* of one layer of a block: K rows, then V rows */
	size_t block_bytes;  /* n_layer of them: what the budget counts */
	uint32_t n_blocks;   /* blocks held */
	uint32_t n_reserved; /* blocks promised by engine_seq_reserve */
	uint32_t cap;	     /* blocks blocks[] has room for */
	uint8_t **blocks;    /* [block * n_layer + layer] */
	/* [layer] the backend whose memory holds the layer's blocks */
	struct engine_backend **layer_be;
	int32_t *tokens; /* the token at each position [0, n_past) */
	uint32_t tokens_cap;
	float *embd; /* engine_seq_set_embedding: where passes write it */
	enum engine_pooling pooling;
};

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

static uint8_t *engine_seq_k(const struct engine_seq *s, uint32_t il,
			     uint32_t pos)
{
	return s->blocks[(size_t)(pos / ENGINE_KV_BLOCK) * s->n_layer + il] +
	       (pos % ENGINE_KV_BLOCK) * s->k_row;
}

static uint8_t *engine_seq_v(const struct engine_seq *s, uint32_t il,
			     uint32_t pos)
{
	return s->blocks[(size_t)(pos / ENGINE_KV_BLOCK) * s->n_layer + il] +
	       ENGINE_KV_BLOCK * s->k_row + (pos % ENGINE_KV_BLOCK) * s->v_row;
}

/*
 * Where layer il of a sequence's blocks lives: with the backend that
 * computes the layer now (the pool's layer_be); a sequence's blocks
 * follow it there (engine_seq_follow).
 */
static struct engine_backend *kv_layer_be(const struct engine_kv_pool *p,
					  uint32_t il)
{
	return p->layer_be ? p->layer_be[il] : p->backend;
}

/*
 * bytes from src (in from's memory) to dst (in to's): within one
 * backend its own copy, else through the host.
 */
static int kv_copy(struct engine_backend *to, uint8_t *dst,
		   struct engine_backend *from, const uint8_t *src,
		   size_t bytes)
{
	void *host;

	if (to == from) {
		to->iface->copy(to, dst, src, bytes);
		return 0;
	}
	host = malloc(bytes);
	if (!host)
		return -ENOMEM;
	from->iface->copy_out(from, host, src, bytes);
	to->iface->copy_in(to, dst, host, bytes);
	free(host);
	return 0;
}

/* Free block b's layers (their own backends' memory). */
static void kv_block_free(struct engine_seq *s, uint32_t b)
{
	uint32_t il;

	for (il = 0; il < s->n_layer; il++) {
		uint8_t **lb = &s->blocks[(size_t)b * s->n_layer + il];

		if (*lb)
			s->layer_be[il]->iface->free(s->layer_be[il], *lb);
		*lb = NULL;
	}
}

/* Block b's layers, each on the backend of its layer; false: out of memory. */
static bool kv_block_alloc(struct engine_seq *s, uint32_t b)
{
	uint32_t il;

	for (il = 0; il < s->n_layer; il++) {
		struct engine_backend *be = s->layer_be[il];

		s->blocks[(size_t)b * s->n_layer + il] = be->iface->alloc(
			be, s->layer_bytes);
		if (!s->blocks[(size_t)b * s->n_layer + il]) {
			kv_block_free(s, b);
			return false;
		}
	}
	return true;
}

int engine_seq_follow(struct engine_seq *s, struct err *err)
{
	struct engine_kv_pool *p = s->pool;
	uint32_t il, b;
	uint8_t *nb;

	for (il = 0; il < s->n_layer; il++) {
		struct engine_backend *from = s->layer_be[il];
		struct engine_backend *to = kv_layer_be(p, il);

		if (from == to)
			continue;
		for (b = 0; b < s->n_blocks; b++) {
			uint8_t **lb = &s->blocks[(size_t)b * s->n_layer + il];

			nb = to->iface->alloc(to, s->layer_bytes);
			if (!nb || kv_copy(to, nb, from, *lb, s->layer_bytes)) {
				if (nb)
					to->iface->free(to, nb);
				return err_set(
					err, ENOMEM,
					"out of memory moving the KV cache of layer %u to %s",
					il, to->dev.name);
			}
			from->iface->free(from, *lb);
			*lb = nb;
		}
		s->layer_be[il] = to;
	}
	return 0;
}

int engine_kv_bytes_parse(const char *text, uint64_t *bytes)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	errno = 0;
	/* strtoull would skip spaces and wrap a minus sign around */
	if (!isdigit((unsigned char)*text))
		return -EINVAL;
	v = strtoull(text, &end, 10);
	if (errno || end == text)
		return -EINVAL;
	if (*end == 'k' || *end == 'K')
		shift = 10;
	else if (*end == 'M')
		shift = 20;
	else if (*end == 'G')
		shift = 30;
	if (shift)
		end++;
	if (*end || v > (UINT64_MAX >> shift))
		return -EINVAL;
	*bytes = (uint64_t)v << shift;
	return 0;
}

int engine_kv_type_parse(const char *name, uint32_t *type)
{
	uint32_t t;

	for (t = 0; t < IO_TYPE_COUNT; t++) {
		const struct io_type_info *ti = io_type_info(t);

		if (ti && quant_traits_kv(t) && !strcmp(ti->name, name)) {
			*type = t;
			return 0;
		}
	}
	return -EINVAL;
}

const char *engine_kv_type_name(uint32_t type)
{
	const struct io_type_info *ti = io_type_info(type);

	return ti && quant_traits_kv(type) ? ti->name : NULL;
}

/* Bytes of a row of n elements of type, 0 if n is not whole blocks. */
static uint64_t kv_row_bytes(uint32_t type, uint64_t n)
{
	const struct io_type_info *ti = io_type_info(type);

	if (!ti || !quant_traits_kv(type) || n % ti->block_elems)
		return 0;
	return n / ti->block_elems * ti->block_bytes;
}

static int kv_check_types(const struct engine_model *m, uint32_t type_k,
			  uint32_t type_v, struct err *err)
{
	const struct engine_hparams *hp = &m->hp;
	const struct io_type_info *tk = io_type_info(type_k);
	const struct io_type_info *tv = io_type_info(type_v);

	if (!tk || !quant_traits_kv(type_k) || !tv || !quant_traits_kv(type_v))
		return err_set(
			err, EINVAL,
			"KV cache types: one of f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1");
	if (hp->head_dim % tk->block_elems)
		return err_set(
			err, EINVAL,
			"K type %s: head_dim %u is not a multiple of its block of %u",
			tk->name, hp->head_dim, tk->block_elems);
	if (hp->head_dim_v % tv->block_elems)
		return err_set(
			err, EINVAL,
			"V type %s: head_dim %u is not a multiple of its block of %u",
			tv->name, hp->head_dim_v, tv->block_elems);
	return 0;
}

uint64_t engine_kv_bytes_per_token(const struct engine_model *m,
				   uint32_t type_k, uint32_t type_v)
{
	const struct engine_hparams *hp = &m->hp;
	uint64_t k = kv_row_bytes(type_k,
				  (uint64_t)hp->n_head_kv * hp->head_dim);
	uint64_t v = kv_row_bytes(type_v,
				  (uint64_t)hp->n_head_kv * hp->head_dim_v);

	if (!k || !v || hp->head_dim % io_type_info(type_k)->block_elems ||
	    hp->head_dim_v % io_type_info(type_v)->block_elems)
		return 0;
	return (k + v) * hp->n_layer;
}

int engine_kv_pool_set_types(struct engine_kv_pool *p, uint32_t type_k,
			     uint32_t type_v, struct err *err)
{
	struct engine_backend *be = p->backend;
	int ret = kv_check_types(p->model, type_k, type_v, err);

	if (ret)
		return ret;
	if (!be->iface->supports(be, ENGINE_OP_ATTENTION, type_k) ||
	    !be->iface->supports(be, ENGINE_OP_ATTENTION, type_v))
		return err_set(
			err, EINVAL,
			"KV cache types %s/%s: the %s backend does not attend over them",
			engine_kv_type_name(type_k),
			engine_kv_type_name(type_v), be->iface->name);
	pthread_mutex_lock(&p->lock);
	p->type_k = type_k;
	p->type_v = type_v;
	pthread_mutex_unlock(&p->lock);
	return 0;
}

/* The most the pool may hold: its cap, within the shared budget. */
static uint64_t kv_pool_limit(const struct engine_kv_pool *p)
{
	uint64_t shared;

	if (!p->shared)
		return p->cap;
	shared = engine_budget_limit(p->shared, ENGINE_BUDGET_KV);
	return shared < p->cap ? shared : p->cap;
}

/*
 * Promise delta more bytes (p->lock held): within the cap and the shared
 * budget, or -EAGAIN with nothing changed.
 */
static int kv_commit(struct engine_kv_pool *p, uint64_t delta)
{
	if (!delta)
		return 0;
	if (p->committed + delta > p->cap)
		return -EAGAIN;
	if (p->shared &&
	    engine_budget_charge(p->shared, ENGINE_BUDGET_KV, delta))
		return -EAGAIN;
	p->committed += delta;
	return 0;
}

/* After the pool's lock: the shared budget gets back what it gave. */
static void kv_uncommitted(struct engine_kv_pool *p, uint64_t delta)
{
	if (p->shared)
		engine_budget_release(p->shared, ENGINE_BUDGET_KV, delta);
}

int engine_kv_pool_init(struct engine_kv_pool *p, const struct engine_model *m,
			struct engine_backend *be, uint64_t cap,
			struct engine_budget *shared, struct err *err)
{
	int ret;

	memset(p, 0, sizeof(*p));
	if ((ret = pthread_mutex_init(&p->lock, NULL)))
		return err_set(err, ret, "KV pool: %s", strerror(ret));
	p->shared = shared;
	if (!cap && shared)
		cap = engine_budget_limit(shared, ENGINE_BUDGET_KV);
	else if (!cap) /* the weights are in memory already, or will be */
		cap = engine_budget_default(engine_mem_available(),
					    m->info.tensor_bytes);
	p->ready = true;
	p->model = m;
	p->backend = be;
	p->cap = cap;
	p->type_k = p->type_v = IO_TYPE_F16;
	return 0;
}

void engine_kv_pool_destroy(struct engine_kv_pool *p)
{
	if (p->ready)
		pthread_mutex_destroy(&p->lock);
	p->ready = false;
}

void engine_kv_pool_stats(struct engine_kv_pool *p, struct engine_kv_stats *st)
{
	const struct engine_hparams *hp = &p->model->hp;

	pthread_mutex_lock(&p->lock);
	st->type_k = p->type_k;
	st->type_v = p->type_v;
	st->k_bytes_per_token = kv_row_bytes(p->type_k,
					     (uint64_t)hp->n_head_kv *
						     hp->head_dim) *
				hp->n_layer;
	st->v_bytes_per_token = kv_row_bytes(p->type_v,
					     (uint64_t)hp->n_head_kv *
						     hp->head_dim_v) *
				hp->n_layer;
	st->budget = kv_pool_limit(p);
	st->committed = p->committed;
	st->used = p->used;
	st->free = st->budget > p->committed ? st->budget - p->committed : 0;
	if (p->shared) {
		struct engine_budget_stats bs;
		uint64_t all = 0, room;

		engine_budget_stats(p->shared, &bs);
		for (int u = 0; u < ENGINE_BUDGET_USES; u++)
			all += bs.used[u];
		room = bs.total - bs.reserve > all ?
			       bs.total - bs.reserve - all :
			       0;
		if (room < st->free)
			st->free = room;
	}
	st->blocks = p->blocks;
	st->block_tokens = ENGINE_KV_BLOCK;
	st->block_bytes = (st->k_bytes_per_token + st->v_bytes_per_token) *
			  ENGINE_KV_BLOCK;
	pthread_mutex_unlock(&p->lock);
}

/* ---- sequences --------------------------------------------------------- */

void engine_kv_pool_types(struct engine_kv_pool *p, uint32_t *type_k,
			  uint32_t *type_v)
{
	pthread_mutex_lock(&p->lock);
	*type_k = p->type_k;
	*type_v = p->type_v;
	pthread_mutex_unlock(&p->lock);
}

int engine_kv_seq_new(struct engine_kv_pool *p, struct engine_ctx *ctx,
		      uint32_t type_k, uint32_t type_v, struct engine_seq **out,
		      struct err *err)
{
	const struct engine_model *m = p->model;
	const struct engine_hparams *hp = &m->hp;
	struct engine_seq *s;
	uint32_t il;
	int ret;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(err, ENOMEM, "out of memory");
	s->type_k = type_k;
	s->type_v = type_v;
	if ((ret = kv_check_types(m, s->type_k, s->type_v, err))) {
		free(s);
		return ret;
	}
	s->pool = p;
	s->ctx = ctx;
	s->n_ctx = m->info.n_ctx;
	s->n_head_kv = hp->n_head_kv;
	s->k_row = kv_row_bytes(s->type_k,
				(uint64_t)hp->n_head_kv * hp->head_dim);
	s->v_row = kv_row_bytes(s->type_v,
				(uint64_t)hp->n_head_kv * hp->head_dim_v);
	s->n_layer = hp->n_layer;
	s->layer_bytes = (s->k_row + s->v_row) * ENGINE_KV_BLOCK;
	s->block_bytes = s->layer_bytes * hp->n_layer;
	s->layer_be = calloc(hp->n_layer, sizeof(*s->layer_be));
	if (!s->layer_be) {
		free(s);
		return err_set(err, ENOMEM, "out of memory");
	}
	for (il = 0; il < hp->n_layer; il++)
		s->layer_be[il] = kv_layer_be(p, il);
	*out = s;
	return 0;
}

/* Blocks held or promised, whichever is more: what s counts for. */
static uint64_t kv_seq_commit(const struct engine_seq *s)
{
	uint32_t n = s->n_blocks > s->n_reserved ? s->n_blocks : s->n_reserved;

	return (uint64_t)n * s->block_bytes;
}

/* Give back held blocks down to keep. */
static void kv_seq_release(struct engine_seq *s, uint32_t keep)
{
	struct engine_kv_pool *p = s->pool;
	uint64_t before, after;
	uint32_t n = 0;

	if (s->n_blocks <= keep)
		return;
	pthread_mutex_lock(&p->lock);
	before = kv_seq_commit(s);
	while (s->n_blocks > keep) {
		kv_block_free(s, --s->n_blocks);
		n++;
	}
	after = kv_seq_commit(s);
	p->committed -= before - after;
	p->used -= (uint64_t)n * s->block_bytes;
	p->blocks -= n;
	pthread_mutex_unlock(&p->lock);
	kv_uncommitted(p, before - after);
}

void engine_seq_free(struct engine_seq *s)
{
	struct engine_kv_pool *p;
	uint64_t promised;

	if (!s)
		return;
	kv_seq_release(s, 0);
	p = s->pool;
	pthread_mutex_lock(&p->lock);
	promised = kv_seq_commit(s);
	p->committed -= promised;
	pthread_mutex_unlock(&p->lock);
	kv_uncommitted(p, promised);
	free(s->blocks);
	free(s->layer_be);
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
	kv_seq_release(s, (s->n_past + ENGINE_KV_BLOCK - 1) / ENGINE_KV_BLOCK);
}

void engine_seq_truncate(struct engine_seq *s, uint32_t n)
{
	if (n < s->n_past)
		s->n_past = n;
	engine_seq_shrink(s);
}

static uint32_t kv_blocks_for(uint32_t n)
{
	return (uint32_t)(((uint64_t)n + ENGINE_KV_BLOCK - 1) /
			  ENGINE_KV_BLOCK);
}

int engine_seq_reserve(struct engine_seq *s, uint32_t n_tokens, struct err *err)
{
	struct engine_kv_pool *p = s->pool;
	uint32_t want = kv_blocks_for(n_tokens), had;
	uint64_t before, after, limit = kv_pool_limit(p), freed = 0;
	int ret = 0;

	pthread_mutex_lock(&p->lock);
	before = kv_seq_commit(s);
	had = s->n_reserved;
	if ((uint64_t)want * s->block_bytes > limit) {
		ret = err_set(
			err, ENOSPC,
			"%u tokens of KV cache need %llu bytes, over the budget of %llu (--kv-mem, --mem-budget)",
			n_tokens, (unsigned long long)want * s->block_bytes,
			(unsigned long long)limit);
		goto out_unlock;
	}
	s->n_reserved = want;
	after = kv_seq_commit(s);
	if (after > before && kv_commit(p, after - before)) {
		s->n_reserved = had;
		ret = err_set(
			err, EAGAIN,
			"KV cache budget busy: %llu of %llu bytes promised",
			(unsigned long long)p->committed,
			(unsigned long long)limit);
		goto out_unlock;
	}
	if (after < before) {
		p->committed -= before - after;
		freed = before - after;
	}
	s->n_ctx = n_tokens < s->pool->model->info.n_ctx ?
			   n_tokens :
			   s->pool->model->info.n_ctx;
out_unlock:
	pthread_mutex_unlock(&p->lock);
	kv_uncommitted(p, freed);
	return ret;
}

uint32_t engine_seq_budget_tokens(const struct engine_seq *s)
{
	struct engine_kv_pool *p = s->pool;
	uint64_t n;

	pthread_mutex_lock(&p->lock);
	n = kv_pool_limit(p) / s->block_bytes * ENGINE_KV_BLOCK;
	pthread_mutex_unlock(&p->lock);
	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

int engine_seq_grow(struct engine_seq *s, uint32_t n, struct err *err)
{
	struct engine_kv_pool *p = s->pool;
	uint32_t want = kv_blocks_for(n);
	int ret = 0;

	if (want <= s->n_blocks)
		return 0;
	if (want > s->cap) {
		uint32_t cap = s->cap ? s->cap : 4;
		void *nb;

		while (cap < want)
			cap *= 2;
		nb = realloc(s->blocks,
			     (size_t)cap * s->n_layer * sizeof(*s->blocks));
		if (!nb)
			return err_set(err, ENOMEM, "out of memory");
		s->blocks = nb;
		s->cap = cap;
	}
	pthread_mutex_lock(&p->lock);
	while (s->n_blocks < want) {
		uint64_t before = kv_seq_commit(s), after;

		s->n_blocks++;
		after = kv_seq_commit(s);
		s->n_blocks--;
		if (after > before && kv_commit(p, after - before)) {
			ret = err_set(
				err, ENOSPC,
				"KV cache budget full: %llu of %llu bytes in use (--kv-mem, --mem-budget)",
				(unsigned long long)p->committed,
				(unsigned long long)kv_pool_limit(p));
			break;
		}
		if (!kv_block_alloc(s, s->n_blocks)) {
			p->committed -= after - before;
			pthread_mutex_unlock(&p->lock);
			kv_uncommitted(p, after - before);
			return err_set(
				err, ENOMEM,
				"out of memory for a KV block of %zu bytes",
				s->block_bytes);
		}
		s->n_blocks++;
		p->used += s->block_bytes;
		p->blocks++;
	}
	pthread_mutex_unlock(&p->lock);
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
	const uint32_t n_layer = dst->pool->model->hp.n_layer;
	uint32_t pos, il, run;
	int ret;

	if (dst->pool != src->pool || dst->type_k != src->type_k ||
	    dst->type_v != src->type_v)
		return err_set(
			err, EINVAL,
			"prefix of a sequence of another context or type");
	if (n > src->n_past)
		n = src->n_past;
	if (n > dst->n_ctx)
		n = dst->n_ctx;
	engine_seq_truncate(dst, 0);
	if ((ret = engine_seq_grow(dst, n, err)) ||
	    (ret = engine_seq_tokens_reserve(dst, n, err)))
		return ret;
	for (pos = 0; pos < n; pos += run) {
		run = ENGINE_KV_BLOCK - pos % ENGINE_KV_BLOCK;
		if (run > n - pos)
			run = n - pos;
		for (il = 0; il < n_layer; il++) {
			if (kv_copy(dst->layer_be[il],
				    engine_seq_k(dst, il, pos),
				    src->layer_be[il],
				    engine_seq_k(src, il, pos),
				    run * dst->k_row) ||
			    kv_copy(dst->layer_be[il],
				    engine_seq_v(dst, il, pos),
				    src->layer_be[il],
				    engine_seq_v(src, il, pos),
				    run * dst->v_row)) {
				engine_seq_truncate(dst, 0);
				return err_set(err, ENOMEM, "out of memory");
			}
		}
	}
	memcpy(dst->tokens, src->tokens, (size_t)n * sizeof(*dst->tokens));
	dst->n_past = n;
	return 0;
}

void engine_seq_types(const struct engine_seq *s, uint32_t *type_k,
		      uint32_t *type_v)
{
	*type_k = s->type_k;
	*type_v = s->type_v;
}

void engine_seq_row_bytes(const struct engine_seq *s, uint64_t *k_row,
			  uint64_t *v_row)
{
	*k_row = s->k_row;
	*v_row = s->v_row;
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
	return (size_t)kv_block_fill(s, b) * s->pool->model->hp.n_layer *
	       (s->k_row + s->v_row);
}

/* Copy block b's filled rows out (dir 0) or in (dir 1), layer by layer. */
static void kv_block_copy(const struct engine_seq *s, uint32_t b, uint8_t *buf,
			  int dir)
{
	uint32_t n = kv_block_fill(s, b), il;
	uint32_t pos = b * ENGINE_KV_BLOCK;

	for (il = 0; il < s->n_layer; il++) {
		struct engine_backend *be = s->layer_be[il];
		uint8_t *k = engine_seq_k(s, il, pos);
		uint8_t *v = engine_seq_v(s, il, pos);

		if (dir)
			be->iface->copy_in(be, k, buf, n * s->k_row);
		else
			be->iface->copy_out(be, buf, k, n * s->k_row);
		buf += n * s->k_row;
		if (dir)
			be->iface->copy_in(be, v, buf, n * s->v_row);
		else
			be->iface->copy_out(be, buf, v, n * s->v_row);
		buf += n * s->v_row;
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
	int ret;

	if (n > s->pool->model->info.n_ctx)
		return err_set(err, EINVAL, "%u tokens, the context holds %u",
			       n, s->pool->model->info.n_ctx);
	engine_seq_truncate(s, 0);
	if ((ret = engine_seq_grow(s, n, err)) ||
	    (ret = engine_seq_tokens_reserve(s, n, err)))
		return ret;
	memcpy(s->tokens, tokens, (size_t)n * sizeof(*tokens));
	s->n_past = n;
	return 0;
}

void engine_kv_slot(struct engine_seq *s, uint32_t il, uint32_t pos,
		    struct engine_kv_slot *slot)
{
	slot->k = engine_seq_k(s, il, pos);
	slot->v = engine_seq_v(s, il, pos);
	slot->type_k = s->type_k;
	slot->type_v = s->type_v;
}

void engine_kv_view(const struct engine_seq *s, uint32_t il, uint32_t pos,
		    uint32_t end, struct engine_kv_view *view)
{
	const uint32_t n_head_kv = s->n_head_kv;
	uint32_t n = ENGINE_KV_BLOCK - pos % ENGINE_KV_BLOCK;

	view->type_k = s->type_k;
	view->type_v = s->type_v;
	view->k = engine_seq_k(s, il, pos);
	view->v = engine_seq_v(s, il, pos);
	view->k_stride = s->k_row;
	view->v_stride = s->v_row;
	view->k_head = s->k_row / n_head_kv;
	view->v_head = s->v_row / n_head_kv;
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
