// SPDX-License-Identifier: MIT
/*
 * The CUDA backend's decode steps as CUDA graphs (backend_internal.h).
 *
 * A GPU's decode step of a small model is bound by its launches (some 11
 * a layer): each costs the host a call and the device a gap. So the ops
 * of a segment (what the backend computes between two points where the
 * host waits for it or moves memory: a synchronize, a copy in or out, an
 * allocation) are recorded as one graph (the module's graph_begin ..
 * graph_end, stream capture) and launched as one at the segment's end.
 * A step with layers on the CPU is several segments, each a graph of its
 * own; a prompt's segments (over CB_GRAPH_ROWS rows) run launch by
 * launch.
 *
 * The lists an op takes (block tables, positions, tokens) are built,
 * while recording, in a pinned arena at the offsets where the kernels
 * read them in a VRAM arena of the same size, and copied there once, with
 * one copy, before the graph runs: one copy a segment instead of one per
 * op. Lists bound elsewhere (rope_cache's positions) are copied then
 * too, from the arena.
 *
 * Graphs are kept by the segment's signature (its ops, their rows, their
 * weights and buffers): the next step's segment, the same ops at other
 * positions, updates its graph in place (cudaGraphExecUpdate) instead of
 * instantiating a new one. A placement move gives the ops other weights
 * and buffers, so other signatures, and new graphs.
 *
 * What is not recorded: a segment whose first op never ran launch by
 * launch with its signature (the module grows its scratch, and loads
 * cuBLAS, at an op's first calls, which a recording cannot do: so the
 * first pass of each shape runs plainly, and the next is recorded); the
 * ops of more than CB_GRAPH_ROWS rows (the products then go to cuBLAS).
 * Where such an op comes while recording, the ops recorded so far are
 * launched first, so the stream keeps its order, and the rest of the
 * segment runs plainly. LLMFS_CUDA_GRAPH=0 records nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"

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

struct cb_graph_entry {
	uint64_t key;
	struct cuda_graph *g; /* NULL: free */
	uint64_t used;	      /* when it last ran (cb_graphs.tick) */
};

/* a list copied at the launch to a place of its own (not the arena's) */
struct cb_graph_send {
	void *dst;
	size_t off, bytes; /* in the arena */
};

struct cb_graphs {
	bool recording;
	bool plain;   /* an op of this segment ran plainly: the rest does too */
	uint64_t key; /* the recorded ops' signature, so far */
	uint8_t *host, *dev; /* the arena: pinned and VRAM, cap bytes */
	size_t cap, used;
	struct cb_graph_send *sends;
	uint32_t n_sends, sends_cap;
	struct cb_graph_entry cache[CB_GRAPHS];
	uint64_t tick;
	uint64_t warm[CB_WARM]; /* 0: empty */
	uint32_t n_warm;
};

/* FNV-1a over the 8 bytes of v */
static uint64_t cb_mix(uint64_t h, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++, v >>= 8)
		h = (h ^ (v & 0xff)) * 0x100000001b3ull;
	return h;
}

static bool cb_graph_env(void)
{
	const char *e = getenv("LLMFS_CUDA_GRAPH");

	return !e || atoi(e) != 0;
}

int cb_graphs_new(struct engine_backend *be)
{
	struct cuda_backend *cb = be->ctx;

	if (!cb_graph_env() || !cb->api->graph_begin)
		return 0;
	cb->graphs = calloc(1, sizeof(*cb->graphs));
	return cb->graphs ? 0 : -ENOMEM;
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
	if (g->recording)
		cb->api->graph_end(cb->dev, NULL, NULL, &(struct err){ 0 });
	for (i = 0; i < CB_GRAPHS; i++)
		cb->api->graph_free(g->cache[i].g);
	/* the device is idle: cb_destroy synchronized */
	cb_arena_free(cb);
	free(g->sends);
	free(g);
	cb->graphs = NULL;
}

bool cb_graph_recording(const struct engine_backend *be)
{
	const struct cuda_backend *cb = be->ctx;

	return cb->graphs && cb->graphs->recording;
}

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
	if ((ret = cb->api->slot_wait(cb->dev, CB_ARENA_SLOT, &err)) ||
	    (ret = cb->api->graph_begin(cb->dev, &err))) {
		cb_check(be, ret, &err);
		return;
	}
	g->recording = true;
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
	return e;
}

void cb_graph_flush(struct engine_backend *be)
{
	struct cuda_backend *cb = be->ctx;
	struct cb_graphs *g = cb->graphs;
	struct cb_graph_entry *e;
	struct err err = { 0 };
	uint32_t i;
	int ret;

	if (!g)
		return;
	g->plain = false;
	if (!g->recording)
		return;
	g->recording = false;
	cb->kv_last.valid = false;
	if (cb->err.code) {
		/* the pass fails: what was recorded is dropped */
		cb->api->graph_end(cb->dev, NULL, NULL, &err);
		return;
	}
	e = cb_graph_slot(cb, g->key);
	e->used = ++g->tick;
	if ((ret = cb->api->graph_end(cb->dev, &e->g, NULL, &err))) {
		cb_check(be, ret, &err);
		return;
	}
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
		    rows > CB_GRAPH_ROWS) {
			g->plain = true;
			return;
		}
		cb_graph_begin(be);
	} else if (rows > CB_GRAPH_ROWS || !cb_warm(g, sig, false)) {
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
