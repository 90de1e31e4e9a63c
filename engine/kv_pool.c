// SPDX-License-Identifier: MIT
/*
 * The KV cache's pool of blocks (kv_pool.h): per K/V type pair a shape,
 * its chunks (a few blocks of every layer, each layer one allocation of
 * the backend computing it), a reference count per block and a stack of
 * the free blocks of the chunks there are. The types' facts (which
 * types a cache may have, their row sizes, engine.h's parsers) are here
 * too: they are what a block's size is made of.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "kv_pool.h"
#include "model.h"
#include "quant/quant.h"

/* blocks per chunk at most (log2), and at most a quarter of the cap */
#define KV_CHUNK_SHIFT_MAX 4

/* A few blocks of one shape, each layer's in its backend's memory. */
struct kv_chunk {
	uint8_t **layer; /* [n_layer] the blocks' bytes of each layer */
	uint32_t *refs;	 /* [1 << chunk_shift] per block; 0: free */
	uint32_t held;	 /* blocks with references */
};

struct kv_shape {
	struct engine_kv_shape pub;
	uint32_t chunk_shift;	  /* blocks per chunk: 1 << chunk_shift */
	uint32_t n_chunks;	  /* room in chunks[]: the cap's worth */
	struct kv_chunk **chunks; /* [n_chunks], NULL where none is */
	uint32_t *free;		  /* ids of free blocks of live chunks */
	uint32_t n_free;	  /* a stack; room for every block */
	struct kv_shape *next;
};

struct engine_kv_pool {
	pthread_mutex_t lock; /* protects everything below */
	const struct engine_model *model;
	uint32_t n_layer;
	/* [n_layer] the backend of each layer now (the context's) */
	struct engine_backend *const *layer_be;
	/* [n_layer] the backend whose memory holds each layer's blocks */
	struct engine_backend **layer_at;
	/* [n_layer] the NUMA node wanted (the context's; NULL: none), had */
	const int *layer_node;
	int *node_at;
	uint64_t cap;		      /* bytes it may commit (--kv-mem) */
	struct engine_budget *budget; /* shared, also charged; borrowed */
	uint64_t used;		      /* bytes of blocks held */
	uint64_t promised;	      /* bytes promised and not taken yet */
	uint64_t blocks;	      /* blocks held */
	uint64_t shared;	 /* blocks held by more than one sequence */
	uint64_t memory;	 /* bytes of the chunks there are */
	uint32_t type_k, type_v; /* for sequences started from now on */
	struct kv_shape *shapes;
};

/* ---- types ------------------------------------------------------------- */

static bool kv_type_ok(uint32_t type)
{
	return io_type_info(type) && quant_traits(type)->kv;
}

int engine_kv_type_parse(const char *name, uint32_t *type)
{
	uint32_t t;

	for (t = 0; t < IO_TYPE_COUNT; t++) {
		if (kv_type_ok(t) && !strcmp(io_type_info(t)->name, name)) {
			*type = t;
			return 0;
		}
	}
	return -EINVAL;
}

const char *engine_kv_type_name(uint32_t type)
{
	return kv_type_ok(type) ? io_type_info(type)->name : NULL;
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

/* Bytes of a row of n elements of type, 0 if n is not whole blocks. */
static uint64_t kv_row_bytes(uint32_t type, uint64_t n)
{
	const struct io_type_info *ti = io_type_info(type);

	if (!kv_type_ok(type) || n % ti->block_elems)
		return 0;
	return n / ti->block_elems * ti->block_bytes;
}

static int kv_check_types(const struct engine_model *m, uint32_t type_k,
			  uint32_t type_v, struct err *err)
{
	const struct engine_hparams *hp = &m->hp;

	if (!kv_type_ok(type_k) || !kv_type_ok(type_v))
		return err_set(
			err, EINVAL,
			"KV cache types: one of f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1");
	if (hp->head_dim % io_type_info(type_k)->block_elems)
		return err_set(
			err, EINVAL,
			"K type %s: head_dim %u is not a multiple of its block of %u",
			io_type_info(type_k)->name, hp->head_dim,
			io_type_info(type_k)->block_elems);
	if (hp->head_dim_v % io_type_info(type_v)->block_elems)
		return err_set(
			err, EINVAL,
			"V type %s: head_dim %u is not a multiple of its block of %u",
			io_type_info(type_v)->name, hp->head_dim_v,
			io_type_info(type_v)->block_elems);
	return 0;
}

uint64_t engine_kv_bytes_per_token(const struct engine_model *m,
				   uint32_t type_k, uint32_t type_v)
{
	const struct engine_hparams *hp = &m->hp;

	if (kv_check_types(m, type_k, type_v, NULL))
		return 0;
	return (kv_row_bytes(type_k, (uint64_t)hp->n_head_kv * hp->head_dim) +
		kv_row_bytes(type_v,
			     (uint64_t)hp->n_head_kv * hp->head_dim_v)) *
	       hp->n_layer;
}

/* The node layer il's blocks are to be on: a host backend's only. */
static int kv_node_wanted(const struct engine_kv_pool *p, uint32_t il)
{
	return p->layer_node && p->layer_be[il]->is_host ? p->layer_node[il] :
							   -1;
}

/*
 * A layer's memory of bytes from be, bound to node where node >= 0 (be
 * is then the host's, whose copies are memcpy's: any host memory is
 * its); NULL on failure. Given back by kv_mem_free with the same.
 */
static void *kv_mem_alloc(struct engine_backend *be, int node, size_t bytes)
{
	void *mem = NULL;

	if (node < 0)
		return be->iface->alloc(be, bytes);
	return io_node_alloc(&mem, bytes, node, NULL) == 0 ? mem : NULL;
}

static void kv_mem_free(struct engine_backend *be, int node, void *mem,
			size_t bytes)
{
	if (node < 0)
		be->iface->free(be, mem);
	else
		io_node_free(mem, bytes);
}

/* ---- the pool ---------------------------------------------------------- */

int engine_kv_pool_new(struct engine_kv_pool **out,
		       const struct engine_model *m,
		       struct engine_backend *const *layer_be,
		       const int *layer_node, uint64_t cap,
		       struct engine_budget *shared, struct err *err)
{
	struct engine_kv_pool *p;
	uint32_t il;
	int ret;

	*out = NULL;
	if (!cap && shared)
		cap = engine_budget_limit(shared, ENGINE_BUDGET_KV);
	else if (!cap) /* the weights are in memory already, or will be */
		cap = engine_budget_default(engine_mem_available(),
					    m->info.tensor_bytes);
	p = calloc(1, sizeof(*p));
	if (!p)
		return err_set(err, ENOMEM, "out of memory");
	p->layer_at = calloc(m->hp.n_layer, sizeof(*p->layer_at));
	p->node_at = calloc(m->hp.n_layer, sizeof(*p->node_at));
	if (!p->layer_at || !p->node_at) {
		free(p->layer_at);
		free(p->node_at);
		free(p);
		return err_set(err, ENOMEM, "out of memory");
	}
	if ((ret = pthread_mutex_init(&p->lock, NULL))) {
		free(p->layer_at);
		free(p->node_at);
		free(p);
		return err_set(err, ret, "KV pool: %s", strerror(ret));
	}
	p->model = m;
	p->n_layer = m->hp.n_layer;
	p->layer_be = layer_be;
	p->layer_node = layer_node;
	for (il = 0; il < p->n_layer; il++) {
		p->layer_at[il] = layer_be[il];
		p->node_at[il] = kv_node_wanted(p, il);
	}
	p->cap = cap;
	p->budget = shared;
	p->type_k = p->type_v = IO_TYPE_F16;
	*out = p;
	return 0;
}

/* Give chunk c of shape s back to the backends (no block of it is held). */
static void kv_chunk_release(struct engine_kv_pool *p, struct kv_shape *s,
			     uint32_t c)
{
	struct kv_chunk *ch = s->chunks[c];
	uint32_t il, i, n = 0;

	for (il = 0; il < p->n_layer; il++)
		if (ch->layer[il])
			kv_mem_free(p->layer_at[il], p->node_at[il],
				    ch->layer[il],
				    s->pub.layer_bytes << s->chunk_shift);
	/* its blocks leave the free stack */
	for (i = 0; i < s->n_free; i++)
		if (s->free[i] >> s->chunk_shift != c)
			s->free[n++] = s->free[i];
	s->n_free = n;
	free(ch->layer);
	free(ch->refs);
	free(ch);
	s->chunks[c] = NULL;
	p->memory -= s->pub.block_bytes << s->chunk_shift;
}

void engine_kv_pool_free(struct engine_kv_pool *p)
{
	struct kv_shape *s, *next;
	uint32_t c;

	if (!p)
		return;
	for (s = p->shapes; s; s = next) {
		next = s->next;
		for (c = 0; c < s->n_chunks; c++)
			if (s->chunks[c])
				kv_chunk_release(p, s, c);
		free(s->chunks);
		free(s->free);
		free(s);
	}
	pthread_mutex_destroy(&p->lock);
	free(p->layer_at);
	free(p->node_at);
	free(p);
}

const struct engine_model *engine_kv_pool_model(const struct engine_kv_pool *p)
{
	return p->model;
}

uint64_t engine_kv_pool_limit(const struct engine_kv_pool *p)
{
	uint64_t shared;

	if (!p->budget)
		return p->cap; /* set once */
	shared = engine_budget_limit(p->budget, ENGINE_BUDGET_KV);
	return shared < p->cap ? shared : p->cap;
}

/*
 * Commit bytes more (p->lock held): within the cap and the shared budget
 * (charged then), or false with nothing changed. The caller counts them
 * as held or promised.
 */
static bool kv_commit(struct engine_kv_pool *p, uint64_t bytes)
{
	if (!bytes)
		return true;
	if (p->used + p->promised + bytes > p->cap)
		return false;
	return !p->budget ||
	       !engine_budget_charge(p->budget, ENGINE_BUDGET_KV, bytes);
}

/* After the pool's lock: the shared budget gets back what it gave. */
static void kv_uncommitted(struct engine_kv_pool *p, uint64_t bytes)
{
	if (p->budget && bytes)
		engine_budget_release(p->budget, ENGINE_BUDGET_KV, bytes);
}

int engine_kv_pool_set_types(struct engine_kv_pool *p, uint32_t type_k,
			     uint32_t type_v, struct err *err)
{
	int ret = kv_check_types(p->model, type_k, type_v, err);

	if (ret)
		return ret;
	pthread_mutex_lock(&p->lock);
	p->type_k = type_k;
	p->type_v = type_v;
	pthread_mutex_unlock(&p->lock);
	return 0;
}

void engine_kv_pool_types(struct engine_kv_pool *p, uint32_t *type_k,
			  uint32_t *type_v)
{
	pthread_mutex_lock(&p->lock);
	*type_k = p->type_k;
	*type_v = p->type_v;
	pthread_mutex_unlock(&p->lock);
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
	st->budget = engine_kv_pool_limit(p);
	st->committed = p->used + p->promised;
	st->used = p->used;
	st->free = st->budget > st->committed ? st->budget - st->committed : 0;
	if (p->budget) {
		struct engine_budget_stats bs;
		uint64_t all = 0, room;

		engine_budget_stats(p->budget, &bs);
		for (int u = 0; u < ENGINE_BUDGET_USES; u++)
			all += bs.used[u];
		room = bs.total - bs.reserve > all ?
			       bs.total - bs.reserve - all :
			       0;
		if (room < st->free)
			st->free = room;
	}
	st->blocks = p->blocks;
	st->shared = p->shared;
	st->memory = p->memory;
	st->block_tokens = ENGINE_KV_BLOCK;
	st->block_bytes = (st->k_bytes_per_token + st->v_bytes_per_token) *
			  ENGINE_KV_BLOCK;
	pthread_mutex_unlock(&p->lock);
}

/* ---- shapes and chunks ------------------------------------------------- */

/* A new shape for type_k/type_v, its chunks' room sized by the cap. */
static struct kv_shape *kv_shape_new(const struct engine_kv_pool *p,
				     uint32_t type_k, uint32_t type_v)
{
	const struct engine_hparams *hp = &p->model->hp;
	struct kv_shape *s = calloc(1, sizeof(*s));
	uint64_t budget_blocks;

	if (!s)
		return NULL;
	s->pub.type_k = type_k;
	s->pub.type_v = type_v;
	s->pub.k_row = kv_row_bytes(type_k,
				    (uint64_t)hp->n_head_kv * hp->head_dim);
	s->pub.v_row = kv_row_bytes(type_v,
				    (uint64_t)hp->n_head_kv * hp->head_dim_v);
	s->pub.layer_bytes = (s->pub.k_row + s->pub.v_row) * ENGINE_KV_BLOCK;
	s->pub.block_bytes = s->pub.layer_bytes * hp->n_layer;
	budget_blocks = p->cap / s->pub.block_bytes;
	/* chunks of a quarter of the cap at most: little held unused */
	while (s->chunk_shift < KV_CHUNK_SHIFT_MAX &&
	       (2ull << s->chunk_shift) <= budget_blocks / 4)
		s->chunk_shift++;
	s->n_chunks = (uint32_t)((budget_blocks + (1u << s->chunk_shift) - 1) >>
				 s->chunk_shift);
	if (!s->n_chunks)
		s->n_chunks = 1;
	s->chunks = calloc(s->n_chunks, sizeof(*s->chunks));
	s->free = malloc(((size_t)s->n_chunks << s->chunk_shift) *
			 sizeof(*s->free));
	if (!s->chunks || !s->free) {
		free(s->chunks);
		free(s->free);
		free(s);
		return NULL;
	}
	return s;
}

int engine_kv_pool_shape(struct engine_kv_pool *p, uint32_t type_k,
			 uint32_t type_v, const struct engine_kv_shape **out,
			 struct err *err)
{
	struct kv_shape *s;
	int ret = kv_check_types(p->model, type_k, type_v, err);

	if (ret)
		return ret;
	pthread_mutex_lock(&p->lock);
	for (s = p->shapes; s; s = s->next)
		if (s->pub.type_k == type_k && s->pub.type_v == type_v)
			break;
	if (!s && (s = kv_shape_new(p, type_k, type_v))) {
		s->next = p->shapes;
		p->shapes = s;
	}
	pthread_mutex_unlock(&p->lock);
	if (!s)
		return err_set(err, ENOMEM, "out of memory");
	*out = &s->pub;
	return 0;
}

static struct kv_shape *kv_shape_of(const struct engine_kv_shape *sh)
{
	return (struct kv_shape *)sh; /* pub is the first member */
}

/*
 * A chunk in an empty slot of s, its blocks on the free stack. False
 * when there is no slot or no memory: *full is then the layer's backend
 * when a device with memory of its own had no room (a GPU's VRAM, or
 * its --devices cap), else left alone (the host's memory).
 */
static bool kv_chunk_add(struct engine_kv_pool *p, struct kv_shape *s,
			 const struct engine_backend **full)
{
	const uint32_t n = 1u << s->chunk_shift;
	struct kv_chunk *ch;
	uint32_t c, il, i;

	for (c = 0; c < s->n_chunks && s->chunks[c]; c++)
		;
	if (c == s->n_chunks)
		return false;
	ch = calloc(1, sizeof(*ch));
	if (ch) {
		ch->layer = calloc(p->n_layer, sizeof(*ch->layer));
		ch->refs = calloc(n, sizeof(*ch->refs));
	}
	if (!ch || !ch->layer || !ch->refs) {
		if (ch) {
			free(ch->layer);
			free(ch->refs);
		}
		free(ch);
		return false;
	}
	s->chunks[c] = ch;
	p->memory += s->pub.block_bytes << s->chunk_shift;
	for (il = 0; il < p->n_layer; il++) {
		struct engine_backend *be = p->layer_at[il];

		ch->layer[il] = kv_mem_alloc(be, p->node_at[il],
					     s->pub.layer_bytes * n);
		if (!ch->layer[il]) {
			if (!be->is_host)
				*full = be;
			kv_chunk_release(p, s, c);
			return false;
		}
	}
	/* the lowest id on top */
	for (i = n; i-- > 0;)
		s->free[s->n_free++] = (c << s->chunk_shift) + i;
	return true;
}

/* The reference count of block id. */
static uint32_t *kv_refs(struct kv_shape *s, uint32_t id)
{
	return &s->chunks[id >> s->chunk_shift]
			->refs[id & ((1u << s->chunk_shift) - 1)];
}

/* Drop one reference to block id; true when that freed it. */
static bool kv_block_unref(struct engine_kv_pool *p, struct kv_shape *s,
			   uint32_t id)
{
	const uint32_t c = id >> s->chunk_shift;
	uint32_t *refs = kv_refs(s, id);

	if (--*refs == 1)
		p->shared--;
	if (*refs)
		return false;
	s->free[s->n_free++] = id;
	if (!--s->chunks[c]->held)
		kv_chunk_release(p, s, c);
	return true;
}

int engine_kv_pool_take(struct engine_kv_pool *p,
			const struct engine_kv_shape *sh, uint32_t n,
			uint32_t promised, uint32_t *ids, struct err *err)
{
	struct kv_shape *s = kv_shape_of(sh);
	const uint64_t bb = sh->block_bytes;
	uint32_t i;
	int ret = 0;

	pthread_mutex_lock(&p->lock);
	if (!kv_commit(p, (uint64_t)(n - promised) * bb)) {
		ret = err_set(
			err, ENOSPC,
			"KV cache budget full: %llu of %llu bytes in use (--kv-mem, --mem-budget)",
			(unsigned long long)(p->used + p->promised),
			(unsigned long long)engine_kv_pool_limit(p));
		pthread_mutex_unlock(&p->lock);
		return ret;
	}
	for (i = 0; i < n; i++) {
		const struct engine_backend *full = NULL;

		if (!s->n_free && !kv_chunk_add(p, s, &full)) {
			ret = full ? err_set(err, ENOSPC,
					     "no room on %s for KV blocks of %zu bytes",
					     full->dev.name, sh->block_bytes) :
				     err_set(err, ENOMEM,
					     "out of memory for KV blocks of %zu bytes",
					     sh->block_bytes);
			break;
		}
		ids[i] = s->free[--s->n_free];
		*kv_refs(s, ids[i]) = 1;
		s->chunks[ids[i] >> s->chunk_shift]->held++;
	}
	if (ret) {
		while (i-- > 0)
			kv_block_unref(p, s, ids[i]);
		pthread_mutex_unlock(&p->lock);
		kv_uncommitted(p, (uint64_t)(n - promised) * bb);
		return ret;
	}
	p->used += (uint64_t)n * bb;
	p->blocks += n;
	p->promised -= (uint64_t)promised * bb;
	pthread_mutex_unlock(&p->lock);
	return 0;
}

void engine_kv_pool_ref(struct engine_kv_pool *p,
			const struct engine_kv_shape *sh, const uint32_t *ids,
			uint32_t n)
{
	struct kv_shape *s = kv_shape_of(sh);
	uint32_t i;

	pthread_mutex_lock(&p->lock);
	for (i = 0; i < n; i++)
		if (++*kv_refs(s, ids[i]) == 2)
			p->shared++;
	pthread_mutex_unlock(&p->lock);
}

uint32_t engine_kv_pool_put(struct engine_kv_pool *p,
			    const struct engine_kv_shape *sh,
			    const uint32_t *ids, uint32_t n, uint32_t repromise)
{
	struct kv_shape *s = kv_shape_of(sh);
	uint32_t i, freed = 0;

	pthread_mutex_lock(&p->lock);
	for (i = 0; i < n; i++)
		freed += kv_block_unref(p, s, ids[i]);
	if (repromise > freed)
		repromise = freed;
	p->used -= (uint64_t)freed * sh->block_bytes;
	p->blocks -= freed;
	p->promised += (uint64_t)repromise * sh->block_bytes;
	pthread_mutex_unlock(&p->lock);
	kv_uncommitted(p, (uint64_t)(freed - repromise) * sh->block_bytes);
	return repromise;
}

bool engine_kv_pool_shared(struct engine_kv_pool *p,
			   const struct engine_kv_shape *sh, uint32_t id)
{
	bool shared;

	pthread_mutex_lock(&p->lock);
	shared = *kv_refs(kv_shape_of(sh), id) > 1;
	pthread_mutex_unlock(&p->lock);
	return shared;
}

int engine_kv_pool_promise(struct engine_kv_pool *p,
			   const struct engine_kv_shape *sh, int64_t delta,
			   struct err *err)
{
	const uint64_t bytes = (uint64_t)(delta < 0 ? -delta : delta) *
			       sh->block_bytes;
	int ret = 0;

	pthread_mutex_lock(&p->lock);
	if (delta < 0)
		p->promised -= bytes;
	else if (!kv_commit(p, bytes))
		ret = err_set(
			err, EAGAIN,
			"KV cache budget busy: %llu of %llu bytes promised",
			(unsigned long long)(p->used + p->promised),
			(unsigned long long)engine_kv_pool_limit(p));
	else
		p->promised += bytes;
	pthread_mutex_unlock(&p->lock);
	if (delta < 0)
		kv_uncommitted(p, bytes);
	return ret;
}

uint8_t *engine_kv_pool_layer(const struct engine_kv_pool *p,
			      const struct engine_kv_shape *sh, uint32_t id,
			      uint32_t il)
{
	const struct kv_shape *s = (const struct kv_shape *)sh;

	(void)p;
	return s->chunks[id >> s->chunk_shift]->layer[il] +
	       (size_t)(id & ((1u << s->chunk_shift) - 1)) * sh->layer_bytes;
}

struct engine_backend *
engine_kv_pool_layer_backend(const struct engine_kv_pool *p, uint32_t il)
{
	return p->layer_at[il];
}

void engine_kv_pool_copy_layer(struct engine_kv_pool *p,
			       const struct engine_kv_shape *sh, uint32_t to,
			       uint32_t from, uint32_t il)
{
	struct engine_backend *be = p->layer_at[il];

	be->iface->copy(be, engine_kv_pool_layer(p, sh, to, il),
			engine_kv_pool_layer(p, sh, from, il), sh->layer_bytes);
}

/* ---- following the layers to their backends --------------------------- */

/* Chunks of every shape there are now, and the largest one's layer. */
static uint32_t kv_chunks_live(const struct engine_kv_pool *p, size_t *largest)
{
	const struct kv_shape *s;
	uint32_t c, n = 0;

	*largest = 0;
	for (s = p->shapes; s; s = s->next) {
		for (c = 0; c < s->n_chunks; c++) {
			if (!s->chunks[c])
				continue;
			n++;
			if (s->pub.layer_bytes << s->chunk_shift > *largest)
				*largest = s->pub.layer_bytes << s->chunk_shift;
		}
	}
	return n;
}

/* Give back the first n of a move's new memory, taken in chunk order. */
static void kv_move_undo(struct engine_kv_pool *p, struct engine_backend *to,
			 int node, uint8_t **mem, uint32_t n)
{
	struct kv_shape *s;
	uint32_t k = 0, c;

	for (s = p->shapes; mem && s; s = s->next)
		for (c = 0; c < s->n_chunks; c++)
			if (s->chunks[c] && k < n && mem[k])
				kv_mem_free(to, node, mem[k++],
					    s->pub.layer_bytes
						    << s->chunk_shift);
}

/*
 * Layer il of every chunk into to's memory on node (another backend's
 * than the layer's now, or another node): first all the new memory and
 * a bounce buffer (or nothing moves), then each chunk through the host,
 * its old memory given back.
 * A device's failure in the copies is the move's error (the layer is on
 * to then, and what did not copy is garbage: a device that fails a copy
 * is broken, and fails every pass after).
 */
static int kv_layer_move(struct engine_kv_pool *p, uint32_t il,
			 struct engine_backend *to, int node, struct err *err)
{
	struct engine_backend *from = p->layer_at[il];
	const int from_node = p->node_at[il];
	size_t largest;
	const uint32_t n = kv_chunks_live(p, &largest);
	uint8_t **mem = calloc(n + 1, sizeof(*mem));
	void *host = malloc(largest + 1);
	struct kv_shape *s;
	uint32_t k = 0, c;
	bool ok = mem && host;
	int ret;

	for (s = p->shapes; ok && s; s = s->next)
		for (c = 0; ok && c < s->n_chunks; c++)
			if (s->chunks[c])
				ok = (mem[k++] = kv_mem_alloc(
					      to, node,
					      s->pub.layer_bytes
						      << s->chunk_shift));
	if (!ok) {
		kv_move_undo(p, to, node, mem, k);
		free(mem);
		free(host);
		return err_set(
			err, ENOMEM,
			"out of memory moving the KV cache of layer %u to %s",
			il, to->dev.name);
	}
	k = 0;
	for (s = p->shapes; s; s = s->next) {
		const size_t bytes = s->pub.layer_bytes << s->chunk_shift;

		for (c = 0; c < s->n_chunks; c++) {
			uint8_t **l;

			if (!s->chunks[c])
				continue;
			l = &s->chunks[c]->layer[il];
			from->iface->copy_out(from, host, *l, bytes);
			to->iface->copy_in(to, mem[k], host, bytes);
			kv_mem_free(from, from_node, *l, bytes);
			*l = mem[k++];
		}
	}
	p->layer_at[il] = to;
	p->node_at[il] = node;
	free(mem);
	free(host);
	ret = from->iface->synchronize(from, err);
	return ret ? ret : to->iface->synchronize(to, err);
}

int engine_kv_pool_layer_node(const struct engine_kv_pool *p, uint32_t il)
{
	return p->node_at[il];
}

int engine_kv_pool_follow(struct engine_kv_pool *p, struct err *err)
{
	uint32_t il;
	int ret = 0;

	pthread_mutex_lock(&p->lock);
	for (il = 0; il < p->n_layer && !ret; il++)
		if (p->layer_at[il] != p->layer_be[il] ||
		    p->node_at[il] != kv_node_wanted(p, il))
			ret = kv_layer_move(p, il, p->layer_be[il],
					    kv_node_wanted(p, il), err);
	pthread_mutex_unlock(&p->lock);
	return ret;
}
