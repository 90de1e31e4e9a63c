// SPDX-License-Identifier: MIT
/*
 * The CUDA backend's decode steps as CUDA graphs (backend_internal.h).
 *
 * A GPU's decode step of a small model is bound by its launches (some 11
 * a layer): each costs the host a call and the device a gap. So the ops
 * of a segment (what the backend computes between two points where the
 * host waits for it or moves memory: a synchronize, a copy in or out, an
 * allocation) run as one graph launched at the segment's end. A step
 * with layers on the CPU is several segments, each a graph of its own;
 * a prompt's segments (over CB_GRAPH_ROWS rows) run launch by launch.
 *
 * Replayed, not captured again. While a segment records, the module's
 * calls its ops make are not made: each is written, with its arguments
 * by value, into the segment's log (backend_calls.c). At the segment's
 * end the log is compared with the one the kept graph of its signature
 * was captured from: equal (the same calls with the same arguments, so
 * the same graph), the kept graph is launched as it is; else the log is
 * issued into a capture (the module's graph_begin .. graph_end) that
 * updates the kept graph in place (cudaGraphExecUpdate) or makes a new
 * one. What changes from step to step lives in memory the graph reads
 * (the lists below), so a decode step's log is the last one's: the
 * positions, tokens and block addresses are the lists' contents; what
 * a kernel takes by value (a buffer's or weight's address, the block
 * tables' width, the rows, the arena's address) is in the log, and a
 * change there is a capture. The module's own state a graph bakes in
 * (its scratch's address, grown by a call that runs outside a graph) is
 * covered by an epoch: a kept graph replays only if no module call ran
 * outside a graph since its capture. LLMFS_CUDA_GRAPH=capture captures
 * each segment as it records (the calls made at once, into the capture)
 * and never replays: the behaviour before, to compare on a card.
 *
 * The lists an op takes (block tables, positions, tokens) are built,
 * while recording, in a pinned arena at the offsets where the kernels
 * read them in a VRAM arena of the same size, and copied there once, with
 * one copy, before the graph runs: one copy a segment instead of one per
 * op. Lists bound elsewhere (rope_cache's positions) are copied then
 * too, from the arena.
 *
 * Graphs are kept by the segment's signature (its ops, their rows, their
 * weights and buffers), 256 of them, least recently used out. A
 * placement move gives the ops other weights and buffers, so other
 * signatures, and new graphs.
 *
 * What is not recorded: a segment whose first op never ran launch by
 * launch with its signature (the module grows its scratch, and loads
 * cuBLAS, at an op's first calls, which a recording cannot do: so the
 * first pass of each shape runs plainly, and the next is recorded); the
 * ops of more than CB_GRAPH_ROWS rows, or than LLMFS_CUDA_MMV_ROWS
 * (cb_graph_rows: the products of F16 and BF16 weights, of every weight
 * with LLMFS_CUDA_MATMUL=cublas, then go to cuBLAS).
 * Where such an op comes while recording, the ops recorded so far are
 * launched first, so the stream keeps its order, and the rest of the
 * segment runs plainly. LLMFS_CUDA_GRAPH=0 records nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"
#include "cuda_backend.h"

/*
 * segments' graphs kept, by signature: a step with the experts or the KV
 * cache of every layer in RAM is a segment or two a layer
 */
#define CB_GRAPHS 256
/* op signatures that ran plainly (a set, emptied when it fills up) */
#define CB_WARM 4096
/* the arena's bytes at first (it grows when a segment needs more) */
#define CB_ARENA (256u << 10)
/* the module's copy slot of the arena's copies (the ring's are below) */
#define CB_ARENA_SLOT CB_SLOTS
/* answers of calls that answer (cb_graph_memo), by their hash */
#define CB_MEMO 4096

enum cb_graph_mode {
	CB_GRAPH_REPLAY,  /* a segment's kept graph launched as it is */
	CB_GRAPH_CAPTURE, /* each segment captured (and the graph updated) */
};

/* a call in a log, its arguments after it (8-byte words) */
struct cb_log_head {
	uint32_t fn, bytes;
	int32_t answer; /* what it returned (0, or -ENOTSUP) */
	uint32_t zero;
};

struct cb_log {
	uint8_t *p;
	size_t len, cap;
};

struct cb_graph_entry {
	uint64_t key;
	struct cuda_graph *g; /* NULL: free */
	uint64_t used;	      /* when it last ran (cb_graphs.tick) */
	uint64_t epoch;	      /* cb_graphs.epoch at its capture */
	struct cb_log log;    /* the calls it was captured from */
};

/* a list copied at the launch to a place of its own (not the arena's) */
struct cb_graph_send {
	void *dst;
	size_t off, bytes; /* in the arena */
};

struct cb_graphs {
	enum cb_graph_mode mode;
	bool recording;
	bool live;    /* the capture runs: calls go to the module */
	bool plain;   /* an op of this segment ran plainly: the rest does too */
	uint64_t key; /* the recorded ops' signature, so far */
	/* module calls made outside a graph so far (the scratch may move) */
	uint64_t epoch;
	struct cb_log log;   /* the segment's calls */
	uint8_t *host, *dev; /* the arena: pinned and VRAM, cap bytes */
	size_t cap, used;
	struct cb_graph_send *sends;
	uint32_t n_sends, sends_cap;
	struct cb_graph_entry cache[CB_GRAPHS];
	uint64_t tick;
	uint64_t warm[CB_WARM]; /* 0: empty */
	uint32_t n_warm;
	struct {
		uint64_t hash; /* 0: empty */
		int answer;
	} memo[CB_MEMO]; /* a set, emptied when it fills up */
	uint32_t n_memo;
	uint64_t segments; /* segments recorded so far */
	/* rope_cache's positions not sent yet (cb_rope_send) */
	struct {
		const float *cache; /* NULL: none */
		const int32_t *dev; /* in the arena of segment */
		uint64_t segment;
		int32_t *host; /* a copy, n of cap */
		uint32_t n, cap;
	} rope;
};

/* segments replayed and captured, by every backend of the process */
static uint64_t cb_replays, cb_captures;

void cuda_backend_graph_counts(uint64_t *replays, uint64_t *captures)
{
	*replays = __atomic_load_n(&cb_replays, __ATOMIC_RELAXED);
	*captures = __atomic_load_n(&cb_captures, __ATOMIC_RELAXED);
}

/* FNV-1a over the 8 bytes of v */
static uint64_t cb_mix(uint64_t h, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++, v >>= 8)
		h = (h ^ (v & 0xff)) * 0x100000001b3ull;
	return h;
}

/* LLMFS_CUDA_GRAPH: 0 (off), capture, or (unset, 1) replay; -1: off */
static int cb_graph_env(void)
{
	const char *e = getenv("LLMFS_CUDA_GRAPH");

	if (!e)
		return CB_GRAPH_REPLAY;
	if (!strcmp(e, "capture"))
		return CB_GRAPH_CAPTURE;
	return atoi(e) != 0 ? CB_GRAPH_REPLAY : -1;
}

int cb_graphs_new(struct engine_backend *be)
{
	struct cuda_backend *cb = be->ctx;
	const int mode = cb_graph_env();

	if (mode < 0 || !cb->api->graph_begin)
		return 0;
	cb->graphs = calloc(1, sizeof(*cb->graphs));
	if (!cb->graphs)
		return -ENOMEM;
	cb->graphs->mode = (enum cb_graph_mode)mode;
	return 0;
}

static void cb_arena_free(struct cuda_backend *cb)
{
	struct cb_graphs *g = cb->graphs;

	cb->api->free(cb->dev, g->dev);
	cb->api->host_free(g->host);
	g->dev = g->host = NULL;
	g->cap = 0;
}

void cb_graphs_free(struct engine_backend *be)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	unsigned i;

	if (!g)
		return;
	if (g->live)
		cb->api->graph_end(cb->dev, NULL, NULL, &(struct err){ 0 });
	for (i = 0; i < CB_GRAPHS; i++) {
		cb->api->graph_free(g->cache[i].g);
		free(g->cache[i].log.p);
	}
	/* the device is idle: cb_destroy synchronized */
	cb_arena_free(cb);
	free(g->log.p);
	free(g->rope.host);
	free(g->sends);
	free(g);
	cb->graphs = NULL;
}

bool cb_graph_recording(const struct engine_backend *be)
{
	const struct cuda_backend *cb = be->ctx;

	return cb->graphs && cb->graphs->recording;
}

bool cb_graph_live(const struct engine_backend *be)
{
	const struct cuda_backend *cb = be->ctx;

	return cb->graphs && cb->graphs->live;
}

void cb_graph_plain_call(struct engine_backend *be)
{
	struct cuda_backend *cb = be->ctx;

	if (cb->graphs)
		cb->graphs->epoch++;
}

/* ---- the log of a segment's calls ------------------------------------------ */

/* a hash of call p (fn's arguments, bytes), never 0 */
static uint64_t cb_call_hash(uint32_t fn, const void *p, size_t bytes)
{
	const uint8_t *b = p;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ fn, w;
	size_t i;

	for (i = 0; i < bytes; i += 8) {
		w = 0;
		memcpy(&w, b + i, bytes - i < 8 ? bytes - i : 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	return h | 1;
}

/* the memo's slot of hash h: its own, or the empty one where it goes */
static uint32_t cb_memo_slot(const struct cb_graphs *g, uint64_t h)
{
	uint32_t i = (uint32_t)(h % CB_MEMO);

	while (g->memo[i].hash && g->memo[i].hash != h)
		i = (i + 1) % CB_MEMO;
	return i;
}

bool cb_graph_memo(struct engine_backend *be, uint32_t fn, const void *p,
		   size_t bytes, int *answer)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	const uint64_t h = cb_call_hash(fn, p, bytes);
	const uint32_t i = cb_memo_slot(g, h);

	if (g->memo[i].hash != h)
		return false;
	*answer = g->memo[i].answer;
	return true;
}

void cb_graph_memo_set(struct engine_backend *be, uint32_t fn, const void *p,
		       size_t bytes, int answer)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	const uint64_t h = cb_call_hash(fn, p, bytes);
	uint32_t i = cb_memo_slot(g, h);

	if (g->memo[i].hash != h && g->n_memo >= CB_MEMO * 3 / 4) {
		/* the calls of steps long gone: all answer again */
		memset(g->memo, 0, sizeof(g->memo));
		g->n_memo = 0;
		i = cb_memo_slot(g, h);
	}
	if (g->memo[i].hash != h)
		g->n_memo++;
	g->memo[i].hash = h;
	g->memo[i].answer = answer;
}

int cb_graph_log(struct engine_backend *be, uint32_t fn, const void *p,
		 size_t bytes, int answer, int ret)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_log *l = &cb->graphs->log;
	const size_t padded = (bytes + 7) & ~(size_t)7;
	const struct cb_log_head h = { .fn = fn,
				       .bytes = (uint32_t)bytes,
				       .answer = answer };
	struct err err = { 0 };
	size_t cap;
	uint8_t *n;

	if (cb->graphs->mode == CB_GRAPH_CAPTURE)
		return ret; /* never compared */
	if (l->len + sizeof(h) + padded > l->cap) {
		cap = l->cap ? 2 * l->cap : 16384;
		while (cap < l->len + sizeof(h) + padded)
			cap *= 2;
		if (!(n = realloc(l->p, cap))) {
			err_set(&err, ENOMEM, "out of memory");
			cb_check(be, -ENOMEM, &err);
			return -ENOMEM;
		}
		l->p = n;
		l->cap = cap;
	}
	memcpy(l->p + l->len, &h, sizeof(h));
	memcpy(l->p + l->len + sizeof(h), p, bytes);
	memset(l->p + l->len + sizeof(h) + bytes, 0, padded - bytes);
	l->len += sizeof(h) + padded;
	return ret;
}

/* the calls of log, each the module's now (into the capture): 0 or why not */
static int cb_log_issue(struct engine_backend *be, const struct cb_log *l)
{
	struct cb_log_head h;
	size_t off;
	int ret;

	for (off = 0; off < l->len;
	     off += sizeof(h) + (((size_t)h.bytes + 7) & ~(size_t)7)) {
		memcpy(&h, l->p + off, sizeof(h));
		if ((ret = cb_calls_issue(be, h.fn, l->p + off + sizeof(h),
					  h.answer)))
			return ret;
	}
	return 0;
}

int cb_graph_go_live(struct engine_backend *be)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	struct err err = { 0 };
	int ret;

	if ((ret = cb->api->graph_begin(cb->dev, &err))) {
		cb_check(be, ret, &err);
		return ret;
	}
	g->live = true;
	return cb_log_issue(be, &g->log);
}

/* ---- segments ---------------------------------------------------------------- */

/* whether sig ran plainly; with add, it now has */
static bool cb_warm(struct cb_graphs *g, uint64_t sig, bool add)
{
	uint32_t i = (uint32_t)(sig % CB_WARM);

	sig |= 1; /* never 0, the empty slot */
	for (; g->warm[i]; i = (i + 1) % CB_WARM)
		if (g->warm[i] == sig)
			return true;
	if (!add)
		return false;
	if (g->n_warm >= CB_WARM * 3 / 4) {
		/* the signatures of steps long gone: all run plainly again */
		memset(g->warm, 0, sizeof(g->warm));
		g->n_warm = 0;
		i = (uint32_t)(sig % CB_WARM);
	}
	g->warm[i] = sig;
	g->n_warm++;
	return false;
}

/* an arena of at least bytes, nothing recorded (waits for the device) */
static int cb_arena_grow(struct engine_backend *be, size_t bytes)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	struct err err = { 0 };
	size_t cap = g->cap ? 2 * g->cap : CB_ARENA;
	void *h = NULL, *d = NULL;
	int ret;

	while (cap < bytes)
		cap *= 2;
	if ((ret = cb->api->synchronize(cb->dev, &err)))
		goto out_err;
	cb_arena_free(cb);
	if ((ret = cb->api->host_alloc(&h, cap, &err)))
		goto out_err;
	if ((ret = cb->api->alloc(cb->dev, &d, cap, &err))) {
		cb->api->host_free(h);
		goto out_err;
	}
	g->host = h;
	g->dev = d;
	g->cap = cap;
	return 0;

out_err:
	cb_check(be, ret, &err);
	return ret;
}

/* start recording a segment: the arena's last copy is done */
static void cb_graph_begin(struct engine_backend *be)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	struct err err = { 0 };
	int ret;

	if (!g->cap && cb_arena_grow(be, CB_ARENA))
		return;
	if ((ret = cb->api->slot_wait(cb->dev, CB_ARENA_SLOT, &err))) {
		cb_check(be, ret, &err);
		return;
	}
	g->log.len = 0;
	if (g->mode == CB_GRAPH_CAPTURE && cb_graph_go_live(be))
		return;
	g->recording = true;
	g->segments++;
	g->key = 0xcbf29ce484222325ull;
	g->used = 0;
	g->n_sends = 0;
}

/* the graph kept for key, or the slot least recently used, emptied */
static struct cb_graph_entry *cb_graph_slot(struct cuda_backend *cb,
					    uint64_t key)
{
	struct cb_graphs *g = cb->graphs;
	struct cb_graph_entry *e = &g->cache[0];
	unsigned i;

	for (i = 0; i < CB_GRAPHS; i++) {
		if (g->cache[i].g && g->cache[i].key == key)
			return &g->cache[i];
		if (g->cache[i].used < e->used)
			e = &g->cache[i];
	}
	cb->api->graph_free(e->g);
	e->g = NULL;
	e->key = key;
	e->log.len = 0;
	return e;
}

/* whether e's graph is the one the segment's log would capture */
static bool cb_graph_same(const struct cb_graphs *g,
			  const struct cb_graph_entry *e)
{
	return g->mode == CB_GRAPH_REPLAY && e->g && e->epoch == g->epoch &&
	       e->log.len == g->log.len &&
	       !memcmp(e->log.p, g->log.p, g->log.len);
}

/* e's graph made from the segment's calls (captured now, or live) */
static int cb_graph_capture(struct engine_backend *be, struct cb_graph_entry *e)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	struct cb_log swap;
	struct err err = { 0 };
	int ret;

	if (!g->live && (ret = cb_graph_go_live(be))) {
		if (g->live)
			cb->api->graph_end(cb->dev, NULL, NULL, &err);
		g->live = false;
		return ret;
	}
	g->live = false;
	if ((ret = cb->api->graph_end(cb->dev, &e->g, NULL, &err))) {
		cb_check(be, ret, &err);
		return ret;
	}
	/* the log it was captured from, kept with it (the buffers swapped) */
	swap = e->log;
	e->log = g->log;
	g->log = swap;
	e->epoch = g->epoch;
	__atomic_fetch_add(&cb_captures, 1, __ATOMIC_RELAXED);
	return 0;
}

void cb_graph_flush(struct engine_backend *be)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	struct cb_graph_entry *e;
	struct err err = { 0 };
	uint32_t i;
	int ret = 0;

	if (!g)
		return;
	g->plain = false;
	if (!g->recording)
		return;
	g->recording = false;
	cb->kv_last.valid = false;
	if (cb->err.code) {
		/* the pass fails: what was recorded is dropped */
		if (g->live)
			cb->api->graph_end(cb->dev, NULL, NULL, &err);
		g->live = false;
		return;
	}
	e = cb_graph_slot(cb, g->key);
	e->used = ++g->tick;
	if (!g->live && cb_graph_same(g, e))
		__atomic_fetch_add(&cb_replays, 1, __ATOMIC_RELAXED);
	else if (cb_graph_capture(be, e))
		return;
	/* the segment's lists, then the graph, behind the ops before it */
	if (g->used)
		ret = cb->api->copy_in_async(cb->dev, g->dev, g->host, g->used,
					     CB_ARENA_SLOT, &err);
	for (i = 0; !ret && i < g->n_sends; i++)
		ret = cb->api->copy_in_async(
			cb->dev, g->sends[i].dst, g->host + g->sends[i].off,
			g->sends[i].bytes, CB_ARENA_SLOT, &err);
	if (!ret)
		ret = cb->api->graph_launch(cb->dev, e->g, &err);
	cb_check(be, ret, &err);
}

/*
 * Rows a recorded op may have: CB_GRAPH_ROWS, fewer where
 * LLMFS_CUDA_MMV_ROWS sends smaller batches off the mat-vec kernel (the
 * F16 and BF16 weights', or with LLMFS_CUDA_MATMUL=cublas every
 * weight's, to cuBLAS, which a recording does not take; batch_exact
 * keeps them on it)
 */
static uint32_t cb_graph_rows(const struct engine_backend *be)
{
	const struct cuda_backend *cb = be->ctx;

	return !be->batch_exact && cb->mmv_rows < CB_GRAPH_ROWS ? cb->mmv_rows :
								  CB_GRAPH_ROWS;
}

void cb_graph_op(struct engine_backend *be, const char *op, uint32_t rows,
		 const void *tag)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	uint64_t sig;

	if (!g || cb->err.code || !rows)
		return;
	sig = cb_mix(cb_mix(cb_mix(0xcbf29ce484222325ull, (uintptr_t)op), rows),
		     (uintptr_t)tag);
	if (!g->recording) {
		/* a graph starts at a segment's first op, one that ran before */
		if (!cb_warm(g, sig, true) || g->plain ||
		    rows > cb_graph_rows(be)) {
			g->plain = true;
			return;
		}
		cb_graph_begin(be);
	} else if (rows > cb_graph_rows(be) || !cb_warm(g, sig, false)) {
		/* it runs plainly, after what was recorded; the rest too */
		cb_graph_flush(be);
		cb_warm(g, sig, true);
		g->plain = true;
		return;
	}
	g->key = cb_mix(g->key, sig);
}

void *cb_graph_lists(struct engine_backend *be, size_t bytes, void **dev)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	const uint64_t key = g->key;
	void *host;

	bytes = (bytes + CB_ALIGN - 1) & ~(size_t)(CB_ALIGN - 1);
	if (g->used + bytes > g->cap) {
		/* what was recorded runs; the rest records again */
		cb_graph_flush(be);
		if (cb_arena_grow(be, bytes))
			return NULL;
		cb_graph_begin(be);
		if (!g->recording)
			return NULL;
		g->key = key;
	}
	host = g->host + g->used;
	*dev = g->dev + g->used;
	g->used += bytes;
	return host;
}

int cb_graph_send(struct engine_backend *be, void *dst, const void *host,
		  size_t bytes)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	const size_t off = (size_t)((const uint8_t *)host - g->host);
	struct cb_graph_send *s;
	struct err err = { 0 };

	if ((uint8_t *)dst == g->dev + off)
		return 0; /* the arena's copy takes it */
	if (g->n_sends == g->sends_cap) {
		s = realloc(g->sends, (g->sends_cap + 8) * sizeof(*s));
		if (!s) {
			err_set(&err, ENOMEM, "out of memory");
			cb_check(be, -ENOMEM, &err);
			return -ENOMEM;
		}
		g->sends = s;
		g->sends_cap += 8;
	}
	g->sends[g->n_sends++] = (struct cb_graph_send){ .dst = dst,
							 .off = off,
							 .bytes = bytes };
	return 0;
}

void cb_rope_send(struct engine_backend *be, float *cache, const void *host,
		  void *dev, uint32_t n)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	struct err err = { 0 };
	int32_t *p;

	if (g)
		g->rope.cache = NULL;
	if (!cb_graph_recording(be)) {
		cb_send(be, cache, host, (size_t)n * sizeof(int32_t));
		return;
	}
	if (n > g->rope.cap) {
		if (!(p = realloc(g->rope.host, (size_t)n * sizeof(*p)))) {
			err_set(&err, ENOMEM, "out of memory");
			cb_check(be, -ENOMEM, &err);
			return;
		}
		g->rope.host = p;
		g->rope.cap = n;
	}
	memcpy(g->rope.host, host, (size_t)n * sizeof(int32_t));
	g->rope.cache = cache;
	g->rope.dev = dev;
	g->rope.segment = g->segments;
	g->rope.n = n;
}

const int32_t *cb_rope_positions(struct engine_backend *be, const float *cache)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	const size_t bytes = g ? (size_t)g->rope.n * sizeof(int32_t) : 0;
	void *host, *dev;

	if (!g || !g->rope.cache || g->rope.cache != cache)
		return (const int32_t *)cache;
	if (g->recording && g->rope.segment == g->segments)
		return g->rope.dev;
	/* a later segment, or launch by launch: into cache at last */
	if ((host = cb_lists(be, bytes, &dev))) {
		memcpy(host, g->rope.host, bytes);
		cb_send(be, (float *)cache, host, bytes);
	}
	g->rope.cache = NULL;
	return (const int32_t *)cache;
}
