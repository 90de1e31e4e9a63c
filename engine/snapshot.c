// SPDX-License-Identifier: MIT
/*
 * Snapshots of a sequence's KV cache (engine.h, "snapshots"): the format
 * and its checks, so that a restored sequence goes on exactly as the
 * saved one would have. The file, little endian:
 *
 *   header      128 bytes: magic "LLMFSKV\0", version, header size, the
 *               model's digest (the caller's: fs/ gives its file's
 *               SHA-256), K and V types, n_layer, n_head_kv, head_dim,
 *               head_dim_v, tokens, positions per block, extra bytes, K
 *               and V row bytes; the rest zero
 *   tokens      int32 each
 *   extra       the caller's bytes (fs/: the session's conversation)
 *   SHA-256 of all the above
 *   per block   its K/V bytes (engine_seq_block_read: each layer's K
 *               rows, then its V rows), then their SHA-256
 *
 * Saving writes it piece by piece to the caller's put; loading takes it
 * piece by piece as the caller gathers them (engine_snapshot_load_need
 * says how many bytes the next piece has), so that neither holds more
 * than one block besides the sequence.
 */
#include <errno.h>
#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "kv.h"
#include "model.h"

#define SNAP_MAGIC "LLMFSKV" /* and its NUL: 8 bytes */
#define SNAP_VERSION 1

_Static_assert(ENGINE_SNAPSHOT_SUM == SHA256_DIGEST_SIZE,
	       "a checksum is a SHA-256");

struct snap_header {
	char magic[8];
	uint32_t version;
	uint32_t header_bytes;
	uint8_t model[ENGINE_SNAPSHOT_MODEL];
	uint32_t type_k, type_v;
	uint32_t n_layer, n_head_kv, head_dim, head_dim_v;
	uint32_t n_tokens;
	uint32_t block_tokens;
	uint64_t extra_bytes;
	uint64_t k_row, v_row;
	uint8_t pad[ENGINE_SNAPSHOT_HEADER - 8 - 8 - ENGINE_SNAPSHOT_MODEL -
		    4 * 8 - 8 * 3];
};

_Static_assert(sizeof(struct snap_header) == ENGINE_SNAPSHOT_HEADER,
	       "the header is 128 bytes");

enum snap_phase {
	SNAP_PHASE_PREFIX, /* tokens, extra, their checksum */
	SNAP_PHASE_BLOCKS,
	SNAP_PHASE_DONE,
};

struct engine_snapshot_load {
	struct engine_ctx *ctx;
	struct snap_header h;
	enum snap_phase phase;
	struct sha256_ctx sum; /* of the header, tokens and extra */
	struct engine_seq *seq;
	uint32_t block; /* the next one */
	uint8_t *extra;
	size_t extra_len;
};

static void snap_sha(const void *p, size_t n, uint8_t out[ENGINE_SNAPSHOT_SUM])
{
	struct sha256_ctx c;

	sha256_init(&c);
	sha256_update(&c, n, p);
	sha256_digest(&c, ENGINE_SNAPSHOT_SUM, out);
}

static uint32_t snap_blocks(const struct snap_header *h)
{
	return (h->n_tokens + ENGINE_KV_BLOCK - 1) / ENGINE_KV_BLOCK;
}

/* Block b's bytes, its checksum left out. */
static size_t snap_block_bytes(const struct snap_header *h, uint32_t b)
{
	uint32_t left = h->n_tokens - b * ENGINE_KV_BLOCK;
	uint32_t fill = left < ENGINE_KV_BLOCK ? left : ENGINE_KV_BLOCK;

	return (size_t)fill * h->n_layer * (h->k_row + h->v_row);
}

/* ---- save --------------------------------------------------------------- */

int engine_snapshot_save(const struct engine_seq *s,
			 const uint8_t model[ENGINE_SNAPSHOT_MODEL],
			 const void *extra, size_t extra_bytes,
			 int (*put)(void *arg, const void *p, size_t n),
			 void *arg)
{
	const struct engine_model *m = engine_ctx_model(engine_seq_ctx(s));
	const struct engine_model_info *in = engine_model_info(m);
	struct snap_header h = { .version = SNAP_VERSION,
				 .header_bytes = ENGINE_SNAPSHOT_HEADER };
	struct sha256_ctx c;
	uint8_t sum[ENGINE_SNAPSHOT_SUM], *blk;
	uint32_t b;
	int ret;

	memcpy(h.magic, SNAP_MAGIC, 8);
	memcpy(h.model, model, ENGINE_SNAPSHOT_MODEL);
	engine_seq_types(s, &h.type_k, &h.type_v);
	h.n_layer = in->n_layer;
	h.n_head_kv = in->n_head_kv;
	h.head_dim = in->head_dim;
	h.head_dim_v = in->head_dim_v;
	h.n_tokens = engine_seq_length(s);
	h.block_tokens = ENGINE_KV_BLOCK;
	h.extra_bytes = extra_bytes;
	engine_seq_row_bytes(s, &h.k_row, &h.v_row);
	sha256_init(&c);
	sha256_update(&c, sizeof(h), (const uint8_t *)&h);
	if (h.n_tokens)
		sha256_update(&c, (size_t)h.n_tokens * 4,
			      (const uint8_t *)engine_seq_tokens(s));
	if (extra_bytes)
		sha256_update(&c, extra_bytes, extra);
	sha256_digest(&c, sizeof(sum), sum);
	if ((ret = put(arg, &h, sizeof(h))) ||
	    (h.n_tokens &&
	     (ret = put(arg, engine_seq_tokens(s), (size_t)h.n_tokens * 4))) ||
	    (extra_bytes && (ret = put(arg, extra, extra_bytes))) ||
	    (ret = put(arg, sum, sizeof(sum))))
		return ret;
	blk = malloc(snap_block_bytes(&h, 0) + 1);
	if (!blk)
		return -ENOMEM;
	for (b = 0; b < snap_blocks(&h) && !ret; b++) {
		size_t n = snap_block_bytes(&h, b);

		engine_seq_block_read(s, b, blk);
		snap_sha(blk, n, sum);
		if (!(ret = put(arg, blk, n)))
			ret = put(arg, sum, sizeof(sum));
	}
	free(blk);
	return ret;
}

/* ---- load --------------------------------------------------------------- */

/* The header's own checks, and against ctx's model; a reason or NULL. */
static const char *snap_header_why(struct engine_ctx *ctx,
				   const struct snap_header *h)
{
	const struct engine_model *m = engine_ctx_model(ctx);
	const struct engine_model_info *in = engine_model_info(m);

	if (memcmp(h->magic, SNAP_MAGIC, 8))
		return "not a KV snapshot (bad magic)";
	if (h->version != SNAP_VERSION)
		return "unknown snapshot version";
	if (h->header_bytes != ENGINE_SNAPSHOT_HEADER)
		return "bad header size";
	for (size_t i = 0; i < sizeof(h->pad); i++)
		if (h->pad[i])
			return "reserved header bytes are not zero";
	if (h->n_layer != in->n_layer || h->n_head_kv != in->n_head_kv ||
	    h->head_dim != in->head_dim || h->head_dim_v != in->head_dim_v)
		return "the shape is another model's";
	if (!engine_kv_type_name(h->type_k) ||
	    !engine_kv_type_name(h->type_v) ||
	    !engine_kv_bytes_per_token(m, h->type_k, h->type_v))
		return "K/V types this model cannot use";
	if (h->block_tokens != ENGINE_KV_BLOCK || h->n_tokens > in->n_ctx ||
	    h->extra_bytes > ENGINE_SNAPSHOT_EXTRA_MAX)
		return "bad sizes";
	return NULL;
}

int engine_snapshot_check(struct engine_ctx *ctx, const void *header,
			  const uint8_t model[ENGINE_SNAPSHOT_MODEL],
			  struct err *err)
{
	struct snap_header h;
	const char *why;

	memcpy(&h, header, sizeof(h));
	if ((why = snap_header_why(ctx, &h)))
		return err_set(err, EINVAL, "%s", why);
	if (model && memcmp(model, h.model, ENGINE_SNAPSHOT_MODEL))
		return err_set(err, EINVAL,
			       "made from another model (its SHA-256 differs)");
	return 0;
}

int engine_snapshot_load_new(struct engine_snapshot_load **out,
			     struct engine_ctx *ctx, const void *header,
			     struct err *err)
{
	struct engine_snapshot_load *l;
	uint64_t k_row, v_row;
	int ret;

	*out = NULL;
	if ((ret = engine_snapshot_check(ctx, header, NULL, err)))
		return ret;
	l = calloc(1, sizeof(*l));
	if (!l)
		return err_set(err, ENOMEM, "out of memory");
	l->ctx = ctx;
	memcpy(&l->h, header, sizeof(l->h));
	if ((ret = engine_seq_new_typed(ctx, l->h.type_k, l->h.type_v, &l->seq,
					err)))
		goto out_free;
	engine_seq_row_bytes(l->seq, &k_row, &v_row);
	if (l->h.k_row != k_row || l->h.v_row != v_row) {
		ret = err_set(err, EINVAL, "K/V row sizes are not the types'");
		goto out_free;
	}
	sha256_init(&l->sum);
	sha256_update(&l->sum, sizeof(l->h), header);
	*out = l;
	return 0;

out_free:
	engine_snapshot_load_free(l);
	return ret;
}

uint64_t engine_snapshot_load_total(const struct engine_snapshot_load *l)
{
	uint64_t n = ENGINE_SNAPSHOT_HEADER + (uint64_t)l->h.n_tokens * 4 +
		     l->h.extra_bytes + ENGINE_SNAPSHOT_SUM;
	uint32_t b;

	for (b = 0; b < snap_blocks(&l->h); b++)
		n += snap_block_bytes(&l->h, b) + ENGINE_SNAPSHOT_SUM;
	return n;
}

size_t engine_snapshot_load_need(const struct engine_snapshot_load *l)
{
	switch (l->phase) {
	case SNAP_PHASE_PREFIX:
		return (size_t)l->h.n_tokens * 4 + l->h.extra_bytes +
		       ENGINE_SNAPSHOT_SUM;
	case SNAP_PHASE_BLOCKS:
		return snap_block_bytes(&l->h, l->block) + ENGINE_SNAPSHOT_SUM;
	default: return 0;
	}
}

/* Tokens, extra and their checksum: the sequence takes its blocks. */
static int snap_take_prefix(struct engine_snapshot_load *l, const uint8_t *p,
			    struct err *err)
{
	const uint32_t n_vocab =
		engine_model_info(engine_ctx_model(l->ctx))->n_vocab;
	const size_t nt = (size_t)l->h.n_tokens * 4;
	uint8_t sum[ENGINE_SNAPSHOT_SUM];
	uint32_t i;
	int ret;

	sha256_update(&l->sum, nt + l->h.extra_bytes, p);
	sha256_digest(&l->sum, sizeof(sum), sum);
	if (memcmp(sum, p + nt + l->h.extra_bytes, sizeof(sum)))
		return err_set(err, EINVAL,
			       "a checksum does not match (corrupted)");
	/* extra written before the tokens would pass the checksum */
	for (i = 0; i < l->h.n_tokens; i++) {
		int32_t t;

		memcpy(&t, p + 4 * (size_t)i, sizeof(t));
		if (t < 0 || (uint32_t)t >= n_vocab)
			return err_set(
				err, EINVAL,
				"token %u is %d, not one of the model's %u", i,
				t, n_vocab);
	}
	ret = engine_seq_set_tokens(l->seq, (const int32_t *)p, l->h.n_tokens,
				    err);
	if (ret)
		return ret == -ENOSPC ? -ENOSPC : -EINVAL;
	l->extra = malloc(l->h.extra_bytes + 1);
	if (!l->extra)
		return err_set(err, ENOMEM, "out of memory");
	memcpy(l->extra, p + nt, l->h.extra_bytes);
	l->extra_len = l->h.extra_bytes;
	l->phase = l->h.n_tokens ? SNAP_PHASE_BLOCKS : SNAP_PHASE_DONE;
	return 0;
}

/* One block and its checksum: into the sequence. */
static int snap_take_block(struct engine_snapshot_load *l, const uint8_t *p,
			   struct err *err)
{
	const size_t n = snap_block_bytes(&l->h, l->block);
	uint8_t sum[ENGINE_SNAPSHOT_SUM];

	snap_sha(p, n, sum);
	if (memcmp(sum, p + n, sizeof(sum)))
		return err_set(err, EINVAL,
			       "a checksum does not match (corrupted)");
	engine_seq_block_write(l->seq, l->block, p);
	if (++l->block == snap_blocks(&l->h))
		l->phase = SNAP_PHASE_DONE;
	return 0;
}

int engine_snapshot_load_take(struct engine_snapshot_load *l, const void *piece,
			      struct err *err)
{
	switch (l->phase) {
	case SNAP_PHASE_PREFIX: return snap_take_prefix(l, piece, err);
	case SNAP_PHASE_BLOCKS: return snap_take_block(l, piece, err);
	default:
		return err_set(err, EFBIG,
			       "bytes past the end of the snapshot");
	}
}

const void *engine_snapshot_load_extra(const struct engine_snapshot_load *l,
				       size_t *len)
{
	*len = l->extra_len;
	return l->extra;
}

const uint8_t *engine_snapshot_load_model(const struct engine_snapshot_load *l)
{
	return l->h.model;
}

struct engine_seq *engine_snapshot_load_seq(struct engine_snapshot_load *l)
{
	struct engine_seq *s = l->phase == SNAP_PHASE_DONE ? l->seq : NULL;

	if (s)
		l->seq = NULL;
	return s;
}

void engine_snapshot_load_free(struct engine_snapshot_load *l)
{
	if (!l)
		return;
	engine_seq_free(l->seq);
	free(l->extra);
	free(l);
}
