// SPDX-License-Identifier: MIT
/*
 * sessions/N/kv: a session's KV cache as a self-describing file
 * (Documentation/ABI.md, "KV snapshots"). Reading it gives a snapshot;
 * writing one to a session with nothing in it restores it, so that
 *
 *   cp sessions/3/kv saved.kv ... n=$(cat sessions/new)
 *   cp saved.kv sessions/$n/kv; echo more > sessions/$n/generate
 *
 * continues exactly as session 3 would have. The file, little endian:
 *
 *   header      128 bytes: magic "LLMFSKV\0", version, header size, the
 *               model's SHA-256 (its first file's), K and V types,
 *               n_layer, n_head_kv, head_dim, head_dim_v, tokens,
 *               positions per block, conversation bytes, K and V row bytes
 *   tokens      int32 each
 *   text        the session's conversation so far
 *   SHA-256 of all the above
 *   per block   its K/V bytes (engine_seq_block_read), then their SHA-256
 *
 * A write is checked whole before anything changes: at close (flush) the
 * session gets it or stays as it was; EINVAL and an errors line for a
 * truncated, corrupted, foreign or unusable snapshot. The header is also
 * checked as soon as it has arrived, so that `cat bad > kv` fails on its
 * write too (cat does not look at close's result).
 */
#include <errno.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SNAP_MAGIC "LLMFSKV" /* and its NUL: 8 bytes */
#define SNAP_VERSION 1
#define SNAP_HEADER 128
#define SNAP_SUM SHA256_DIGEST_SIZE
/* a snapshot bigger than this is not one of ours */
#define SNAP_MAX (64ull << 30)

struct snap_header {
	char magic[8];
	uint32_t version;
	uint32_t header_bytes;
	uint8_t model[32];
	uint32_t type_k, type_v;
	uint32_t n_layer, n_head_kv, head_dim, head_dim_v;
	uint32_t n_tokens;
	uint32_t block_tokens;
	uint64_t text_bytes;
	uint64_t k_row, v_row;
	uint8_t pad[SNAP_HEADER - 8 - 8 - 32 - 4 * 8 - 8 * 3];
};

_Static_assert(sizeof(struct snap_header) == SNAP_HEADER,
	       "the header is 128 bytes");

static void snap_sha(const void *p, size_t n, uint8_t out[SNAP_SUM])
{
	struct sha256_ctx c;

	sha256_init(&c);
	sha256_update(&c, n, p);
	sha256_digest(&c, SNAP_SUM, out);
}

/* The model's identity: the SHA-256 of its (first) file, made if need be. */
static int snap_model_digest(struct fs_model *fm, uint8_t out[32])
{
	char hex[65];
	unsigned i, v;
	int rc = 0;

	pthread_mutex_lock(&fm->lock);
	memcpy(hex, fm->sha256, 64);
	pthread_mutex_unlock(&fm->lock);
	hex[64] = '\0';
	if (strlen(hex) < 64) {
		rc = fs_sha256_file(fm->gguf->files[0].path, hex, &fm->stop);
		if (rc)
			return rc;
	}
	for (i = 0; i < 32; i++) {
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -EIO;
		out[i] = (uint8_t)v;
	}
	return 0;
}

/* What this model's sequences of (type_k, type_v) look like. */
static int snap_header_for(struct fs_model *fm, struct engine_seq *s,
			   struct snap_header *h)
{
	const struct engine_model_info *in = fm->info;
	int rc;

	memset(h, 0, sizeof(*h));
	memcpy(h->magic, SNAP_MAGIC, 8);
	h->version = SNAP_VERSION;
	h->header_bytes = SNAP_HEADER;
	if ((rc = snap_model_digest(fm, h->model)))
		return rc;
	engine_seq_types(s, &h->type_k, &h->type_v);
	h->n_layer = in->n_layer;
	h->n_head_kv = in->n_head_kv;
	h->head_dim = in->head_dim;
	h->head_dim_v = in->head_dim_v;
	h->n_tokens = engine_seq_length(s);
	h->block_tokens = 64;
	engine_seq_row_bytes(s, &h->k_row, &h->v_row);
	return 0;
}

/* ---- read -------------------------------------------------------------- */

static int snap_build(struct fs_model *fm, struct fs_session *ss,
		      struct fs_buf *b, struct err *err)
{
	struct snap_header h;
	struct fs_buf text = { 0 };
	struct engine_seq *s;
	uint8_t sum[SNAP_SUM], *blk = NULL;
	uint32_t nb, i;
	size_t max = 0;
	int rc;

	pthread_mutex_lock(&fm->lock);
	s = ss->seq;
	ss->seq = NULL; /* ours while we read it */
	rc = fs_buf_add(&text, ss->convo.p ? ss->convo.p : "", ss->convo.len);
	pthread_mutex_unlock(&fm->lock);
	if (rc)
		goto out;
	if (!s && (rc = engine_seq_new(fm->m, &s, err)))
		goto out;
	if ((rc = snap_header_for(fm, s, &h))) {
		err_set(err, -rc, "cannot digest the model file");
		goto out;
	}
	h.text_bytes = text.len;
	rc = fs_buf_add(b, &h, sizeof(h));
	if (!rc && h.n_tokens)
		rc = fs_buf_add(b, engine_seq_tokens(s),
				(size_t)h.n_tokens * sizeof(int32_t));
	if (!rc && text.len)
		rc = fs_buf_add(b, text.p, text.len);
	snap_sha(b->p, b->len, sum);
	if (!rc)
		rc = fs_buf_add(b, sum, sizeof(sum));
	nb = (h.n_tokens + 63) / 64;
	for (i = 0; i < nb; i++)
		max = engine_seq_block_size(s, i) > max ?
			      engine_seq_block_size(s, i) :
			      max;
	blk = malloc(max ? max : 1);
	if (!blk && !rc)
		rc = -ENOMEM;
	for (i = 0; i < nb && !rc; i++) {
		size_t n = engine_seq_block_size(s, i);

		engine_seq_block_read(s, i, blk);
		snap_sha(blk, n, sum);
		rc = fs_buf_add(b, blk, n);
		if (!rc)
			rc = fs_buf_add(b, sum, sizeof(sum));
	}
	if (rc && !err->msg[0])
		err_set(err, -rc, "out of memory for a snapshot");
out:
	pthread_mutex_lock(&fm->lock);
	if (s && !ss->seq && !ss->removed) {
		ss->seq = s;
		s = NULL;
	}
	pthread_mutex_unlock(&fm->lock);
	engine_seq_free(s);
	free(blk);
	fs_buf_free(&text);
	return rc;
}

void fs_kvsnap_read_job(struct fs_model *fm, struct fs_job *job, bool cancelled)
{
	struct fs_handle *h = job->h;
	struct err err = { 0 };
	int rc = cancelled ? -EIO : snap_build(fm, h->session, &h->text, &err);

	if (rc && !cancelled)
		fs_errors_add(&fm->errors, "kv snapshot: %s", err.msg);
	if (rc) {
		fuse_reply_err(job->req, -rc);
	} else {
		h->have_text = true;
		fuse_reply_open(job->req, &job->fi);
	}
	free(job);
}

/* ---- write ------------------------------------------------------------- */

/* The header against this model; 0, or -EINVAL after an errors line. */
static int snap_check_header(struct fs_model *fm, const struct snap_header *h,
			     bool digest)
{
	const struct engine_model_info *in = fm->info;
	uint8_t model[32];
	const char *why = NULL;

	if (memcmp(h->magic, SNAP_MAGIC, 8))
		why = "not a KV snapshot (bad magic)";
	else if (h->version != SNAP_VERSION)
		why = "unknown snapshot version";
	else if (h->header_bytes != SNAP_HEADER)
		why = "bad header size";
	else if (h->n_layer != in->n_layer || h->n_head_kv != in->n_head_kv ||
		 h->head_dim != in->head_dim || h->head_dim_v != in->head_dim_v)
		why = "the shape is another model's";
	else if (!engine_kv_type_name(h->type_k) ||
		 !engine_kv_type_name(h->type_v) ||
		 !engine_kv_bytes_per_token(fm->m, h->type_k, h->type_v))
		why = "K/V types this model cannot use";
	else if (h->block_tokens != 64 || h->n_tokens > in->n_ctx ||
		 h->text_bytes > SNAP_MAX)
		why = "bad sizes";
	else if (digest &&
		 (snap_model_digest(fm, model) || memcmp(model, h->model, 32)))
		why = "made from another model (its SHA-256 differs)";
	if (!why)
		return 0;
	fs_errors_add(&fm->errors, "kv snapshot: %s", why);
	return -EINVAL;
}

int fs_kvsnap_write(struct fs_handle *h, const char *buf, size_t size)
{
	struct fs_model *fm = h->fm;
	size_t had = h->in.len;
	int rc;

	if (fs_model_state(fm) != FS_MODEL_READY) {
		fs_errors_add(&fm->errors,
			      "kv snapshot: the model is not loaded");
		return -EIO;
	}
	if (h->in.len + size > SNAP_MAX) {
		fs_errors_add(&fm->errors, "kv snapshot: over %llu bytes",
			      (unsigned long long)SNAP_MAX);
		return -EFBIG;
	}
	if ((rc = fs_buf_add(&h->in, buf, size)))
		return rc;
	/* the header as soon as it is here (the digest waits for close) */
	if (had < SNAP_HEADER && h->in.len >= SNAP_HEADER &&
	    snap_check_header(fm, (const struct snap_header *)h->in.p, false)) {
		fs_buf_free(&h->in);
		h->wrote = true; /* a failed snapshot: close fails too */
		return -EINVAL;
	}
	return 0;
}

/* Everything of the snapshot checked; fills a new sequence. */
static int snap_parse(struct fs_model *fm, const uint8_t *p, size_t len,
		      struct engine_seq **out, const char **text,
		      size_t *text_len)
{
	struct snap_header h;
	struct engine_seq *s = NULL;
	struct err err = { 0 };
	uint8_t sum[SNAP_SUM];
	size_t off, need, i, nb;
	int rc;

	*out = NULL;
	if (len < SNAP_HEADER + SNAP_SUM)
		goto out_truncated;
	memcpy(&h, p, sizeof(h));
	if ((rc = snap_check_header(fm, &h, true)))
		return rc;
	off = SNAP_HEADER + (size_t)h.n_tokens * 4 + h.text_bytes;
	if (len < off + SNAP_SUM)
		goto out_truncated;
	snap_sha(p, off, sum);
	if (memcmp(sum, p + off, SNAP_SUM))
		goto out_corrupt;
	if ((rc = engine_seq_new_typed(fm->m, h.type_k, h.type_v, &s, &err)) ||
	    (rc = engine_seq_set_tokens(s, (const int32_t *)(p + SNAP_HEADER),
					h.n_tokens, &err))) {
		engine_seq_free(s);
		fs_errors_add(&fm->errors, "kv snapshot: %s", err.msg);
		return rc == -ENOSPC ? -ENOSPC : -EINVAL;
	}
	*text = (const char *)p + SNAP_HEADER + (size_t)h.n_tokens * 4;
	*text_len = h.text_bytes;
	off += SNAP_SUM;
	nb = (h.n_tokens + 63) / 64;
	for (i = 0; i < nb; i++) {
		need = engine_seq_block_size(s, (uint32_t)i);
		if (len < off + need + SNAP_SUM)
			goto out_truncated;
		snap_sha(p + off, need, sum);
		if (memcmp(sum, p + off + need, SNAP_SUM))
			goto out_corrupt;
		engine_seq_block_write(s, (uint32_t)i, p + off);
		off += need + SNAP_SUM;
	}
	if (off != len) {
		fs_errors_add(&fm->errors,
			      "kv snapshot: %zu bytes after its last block",
			      len - off);
		engine_seq_free(s);
		return -EINVAL;
	}
	*out = s;
	return 0;

out_truncated:
	engine_seq_free(s);
	fs_errors_add(&fm->errors, "kv snapshot: truncated (%zu bytes)", len);
	return -EINVAL;
out_corrupt:
	engine_seq_free(s);
	fs_errors_add(&fm->errors, "kv snapshot: a checksum does not match "
				   "(corrupted)");
	return -EINVAL;
}

void fs_kvsnap_restore_job(struct fs_model *fm, struct fs_job *job,
			   bool cancelled)
{
	struct fs_handle *h = job->h;
	struct fs_session *ss = h->session;
	struct engine_seq *s = NULL;
	const char *text = NULL;
	size_t text_len = 0;
	bool empty;
	int rc = cancelled ? -EIO : 0;

	if (!rc) {
		pthread_mutex_lock(&fm->lock);
		empty = !ss->convo.len && !ss->history.len &&
			(!ss->seq || !engine_seq_length(ss->seq));
		pthread_mutex_unlock(&fm->lock);
		if (!empty) {
			fs_errors_add(&fm->errors,
				      "kv snapshot: session %llu "
				      "is not empty",
				      (unsigned long long)ss->id);
			rc = -EINVAL;
		}
	}
	if (!rc)
		rc = snap_parse(fm, (const uint8_t *)h->in.p, h->in.len, &s,
				&text, &text_len);
	if (!rc) {
		pthread_mutex_lock(&fm->lock);
		engine_seq_free(ss->seq);
		ss->seq = s;
		rc = fs_buf_add(&ss->convo, text, text_len);
		if (!rc)
			rc = fs_buf_printf(
				&ss->history, "--- restored %u tokens\n%.*s\n",
				engine_seq_length(s), (int)text_len, text);
		ss->kv_used = engine_seq_length(s);
		ss->kv_atime = fs_now();
		pthread_mutex_unlock(&fm->lock);
	}
	fs_buf_free(&h->in);
	fuse_reply_err(job->req, -rc);
	free(job);
}
