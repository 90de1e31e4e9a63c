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
 * A write is taken piece by piece as its bytes arrive: the header (checked
 * against the model at the write that completes it: EINVAL there), the
 * tokens and text with their checksum (the sequence's blocks are taken
 * from the KV budget then: ENOSPC), then each block, checked and copied
 * into the sequence. Only the piece being gathered is held, charged to
 * the writer's prompt-byte allowance and the daemon's memory budget; a
 * byte past the size the header announces fails its write with EFBIG. A
 * refused snapshot fails every later write and the close. At the close
 * after its last byte the session takes it (a job on the scheduler
 * thread) or stays as it was: EINVAL for a truncated snapshot or a
 * session that is no longer empty, EBUSY while a turn of it runs.
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
/* conversation text longer than this is not one of ours */
#define SNAP_TEXT_MAX (64ull << 20)

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
	if (!s && (rc = engine_seq_new(fm->ctx, &s, err)))
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

enum snap_phase {
	SNAP_PHASE_HEADER,
	SNAP_PHASE_PREFIX, /* tokens, text, their checksum */
	SNAP_PHASE_BLOCKS,
	SNAP_PHASE_DONE,
};

/* A snapshot being written to sessions/N/kv: the handle's (h->lock). */
struct fs_snap_write {
	enum snap_phase phase;
	struct snap_header h;
	uint64_t total, got;   /* bytes the header announces, taken so far */
	struct fs_buf part;    /* the piece being gathered */
	size_t part_need;      /* its size */
	uint64_t charged;      /* of part and text, to the writer */
	struct sha256_ctx sum; /* of the header, tokens and text */
	bool digest_checked;
	struct engine_seq *seq; /* filled block by block */
	uint32_t block;		/* the next one */
	char *text;		/* the conversation, for the session */
	size_t text_len;
	int error;   /* negative errno once refused */
	bool queued; /* whole, and its restore job queued */
};

/* The header's own checks, and against this model; a reason or NULL. */
static const char *snap_header_why(struct fs_model *fm,
				   const struct snap_header *h)
{
	const struct engine_model_info *in = fm->info;

	if (memcmp(h->magic, SNAP_MAGIC, 8))
		return "not a KV snapshot (bad magic)";
	if (h->version != SNAP_VERSION)
		return "unknown snapshot version";
	if (h->header_bytes != SNAP_HEADER)
		return "bad header size";
	for (size_t i = 0; i < sizeof(h->pad); i++)
		if (h->pad[i])
			return "reserved header bytes are not zero";
	if (h->n_layer != in->n_layer || h->n_head_kv != in->n_head_kv ||
	    h->head_dim != in->head_dim || h->head_dim_v != in->head_dim_v)
		return "the shape is another model's";
	if (!engine_kv_type_name(h->type_k) ||
	    !engine_kv_type_name(h->type_v) ||
	    !engine_kv_bytes_per_token(fm->m, h->type_k, h->type_v))
		return "K/V types this model cannot use";
	if (h->block_tokens != 64 || h->n_tokens > in->n_ctx ||
	    h->text_bytes > SNAP_TEXT_MAX)
		return "bad sizes";
	return NULL;
}

/* Is the model's digest known and other than the header's? */
static const char *snap_digest_why(struct fs_model *fm,
				   const struct snap_header *h, bool compute,
				   bool *checked)
{
	uint8_t model[32];
	char hex[2];

	pthread_mutex_lock(&fm->lock);
	hex[0] = fm->sha256[0];
	pthread_mutex_unlock(&fm->lock);
	*checked = false;
	if (!hex[0] && !compute)
		return NULL; /* the hash thread is at it: checked at close */
	*checked = true;
	if (snap_model_digest(fm, model) || memcmp(model, h->model, 32))
		return "made from another model (its SHA-256 differs)";
	return NULL;
}

/* Is the session one a snapshot may go to? 0, -EINVAL or -EBUSY. */
static int snap_session_check(struct fs_model *fm, struct fs_session *ss)
{
	int rc = 0;

	pthread_mutex_lock(&fm->lock);
	if (ss->turns)
		rc = -EBUSY;
	else if (ss->convo.len || ss->history.len ||
		 (ss->seq && engine_seq_length(ss->seq)))
		rc = -EINVAL;
	pthread_mutex_unlock(&fm->lock);
	if (rc == -EBUSY)
		fs_errors_add(&fm->errors,
			      "kv snapshot: a turn of session %llu runs; "
			      "restore it once the turn has ended",
			      (unsigned long long)ss->id);
	else if (rc)
		fs_errors_add(&fm->errors,
			      "kv snapshot: session %llu is not empty",
			      (unsigned long long)ss->id);
	return rc;
}

static int snap_refuse(struct fs_model *fm, const char *why)
{
	fs_errors_add(&fm->errors, "kv snapshot: %s", why);
	return -EINVAL;
}

/* Block b's bytes in the snapshot, its checksum left out. */
static size_t snap_block_bytes(const struct snap_header *h, uint32_t b)
{
	uint32_t fill = h->n_tokens - b * 64 < 64 ? h->n_tokens - b * 64 : 64;

	return (size_t)fill * h->n_layer * (h->k_row + h->v_row);
}

/* The header is here: check it, size the rest, make the sequence. */
static int snap_take_header(struct fs_handle *h, struct fs_snap_write *w)
{
	struct fs_model *fm = h->fm;
	struct err err = { 0 };
	const char *why;
	uint64_t k_row, v_row;
	uint32_t nb, b;
	int rc;

	memcpy(&w->h, w->part.p, SNAP_HEADER);
	if ((why = snap_header_why(fm, &w->h)) ||
	    (why = snap_digest_why(fm, &w->h, false, &w->digest_checked)))
		return snap_refuse(fm, why);
	if ((rc = snap_session_check(fm, h->session)))
		return rc;
	if ((rc = engine_seq_new_typed(fm->ctx, w->h.type_k, w->h.type_v,
				       &w->seq, &err)))
		return snap_refuse(fm, err.msg);
	engine_seq_row_bytes(w->seq, &k_row, &v_row);
	if (w->h.k_row != k_row || w->h.v_row != v_row)
		return snap_refuse(fm, "K/V row sizes are not the types'");
	sha256_init(&w->sum);
	sha256_update(&w->sum, SNAP_HEADER, (const uint8_t *)w->part.p);
	w->total = SNAP_HEADER + (uint64_t)w->h.n_tokens * 4 + w->h.text_bytes +
		   SNAP_SUM;
	nb = (w->h.n_tokens + 63) / 64;
	for (b = 0; b < nb; b++)
		w->total += snap_block_bytes(&w->h, b) + SNAP_SUM;
	w->phase = SNAP_PHASE_PREFIX;
	w->part_need = (size_t)w->h.n_tokens * 4 + w->h.text_bytes + SNAP_SUM;
	return 0;
}

/* Tokens, text and their checksum: the sequence takes its blocks. */
static int snap_take_prefix(struct fs_handle *h, struct fs_snap_write *w)
{
	struct fs_model *fm = h->fm;
	size_t nt = (size_t)w->h.n_tokens * 4;
	uint8_t sum[SNAP_SUM];
	struct err err = { 0 };
	int rc;

	sha256_update(&w->sum, nt + w->h.text_bytes, (uint8_t *)w->part.p);
	sha256_digest(&w->sum, SNAP_SUM, sum);
	if (memcmp(sum, w->part.p + nt + w->h.text_bytes, SNAP_SUM))
		return snap_refuse(fm, "a checksum does not match (corrupted)");
	/* text written before the tokens would pass the checksum */
	for (uint32_t i = 0; i < w->h.n_tokens; i++) {
		int32_t t;

		memcpy(&t, w->part.p + 4 * (size_t)i, sizeof(t));
		if (t < 0 || (uint32_t)t >= fm->info->n_vocab) {
			fs_errors_add(&fm->errors,
				      "kv snapshot: token %u is %d, not one "
				      "of the model's %u",
				      i, t, fm->info->n_vocab);
			return -EINVAL;
		}
	}
	rc = engine_seq_set_tokens(w->seq, (const int32_t *)w->part.p,
				   w->h.n_tokens, &err);
	if (rc) {
		fs_errors_add(&fm->errors, "kv snapshot: %s", err.msg);
		return rc == -ENOSPC ? -ENOSPC : -EINVAL;
	}
	w->text = malloc(w->h.text_bytes + 1);
	if (!w->text)
		return -ENOMEM;
	memcpy(w->text, w->part.p + nt, w->h.text_bytes);
	w->text_len = w->h.text_bytes;
	w->phase = w->h.n_tokens ? SNAP_PHASE_BLOCKS : SNAP_PHASE_DONE;
	w->part_need = w->h.n_tokens ? snap_block_bytes(&w->h, 0) + SNAP_SUM :
				       0;
	return 0;
}

/* One block and its checksum: into the sequence. */
static int snap_take_block(struct fs_handle *h, struct fs_snap_write *w)
{
	size_t n = w->part.len - SNAP_SUM;
	uint8_t sum[SNAP_SUM];

	snap_sha(w->part.p, n, sum);
	if (memcmp(sum, w->part.p + n, SNAP_SUM))
		return snap_refuse(h->fm,
				   "a checksum does not match (corrupted)");
	engine_seq_block_write(w->seq, w->block, w->part.p);
	if (++w->block == (w->h.n_tokens + 63) / 64) {
		w->phase = SNAP_PHASE_DONE;
		w->part_need = 0;
	} else {
		w->part_need = snap_block_bytes(&w->h, w->block) + SNAP_SUM;
	}
	return 0;
}

/*
 * part is whole: take it, and give back what it held (but the text,
 * which the session takes at the close).
 */
static int snap_take_part(struct fs_handle *h, struct fs_snap_write *w)
{
	size_t had = w->part.len, keep = 0;
	int rc;

	switch (w->phase) {
	case SNAP_PHASE_HEADER: rc = snap_take_header(h, w); break;
	case SNAP_PHASE_PREFIX:
		rc = snap_take_prefix(h, w);
		keep = rc ? 0 : w->text_len;
		break;
	default: rc = snap_take_block(h, w); break;
	}
	fs_input_release(h->fm->fs, h->uid, had - keep);
	w->charged -= had - keep;
	w->part.len = 0;
	return rc;
}

static void snap_write_free(struct fs_handle *h, struct fs_snap_write *w)
{
	if (!w)
		return;
	fs_input_release(h->fm->fs, h->uid, w->charged);
	fs_buf_free(&w->part);
	engine_seq_free(w->seq);
	free(w->text);
	free(w);
}

/* Refused: nothing of it is kept, every later write fails the same. */
static int snap_fail(struct fs_handle *h, struct fs_snap_write *w, int rc)
{
	engine_seq_free(w->seq);
	w->seq = NULL;
	free(w->text);
	w->text = NULL;
	fs_buf_free(&w->part);
	fs_input_release(h->fm->fs, h->uid, w->charged);
	w->charged = 0;
	w->error = rc;
	return rc;
}

static int snap_write(struct fs_handle *h, struct fs_snap_write *w,
		      const char *buf, size_t size)
{
	struct fs_model *fm = h->fm;
	size_t take;
	int rc;

	if (w->error)
		return w->error;
	if (w->phase == SNAP_PHASE_DONE ||
	    (w->total && size > w->total - w->got)) {
		fs_errors_add(&fm->errors,
			      "kv snapshot: bytes past the %llu its header "
			      "announces; nothing of it is taken",
			      (unsigned long long)w->total);
		return snap_fail(h, w, -EFBIG);
	}
	while (size) {
		take = w->part_need - w->part.len;
		take = take < size ? take : size;
		if ((rc = fs_input_charge(fm, h->uid, take, "kv snapshot")))
			return snap_fail(h, w, rc);
		w->charged += take;
		if ((rc = fs_buf_add(&w->part, buf, take)))
			return snap_fail(h, w, rc);
		buf += take;
		size -= take;
		w->got += take;
		if (w->part.len == w->part_need && (rc = snap_take_part(h, w)))
			return snap_fail(h, w, rc);
		if (w->phase == SNAP_PHASE_DONE &&
		    size) /* past a 0-token end */
			return snap_write(h, w, buf, size);
	}
	return 0;
}

int fs_kvsnap_write(struct fs_handle *h, const char *buf, size_t size)
{
	struct fs_model *fm = h->fm;
	int rc;

	if (fs_model_state(fm) != FS_MODEL_READY) {
		fs_errors_add(&fm->errors,
			      "kv snapshot: the model is not loaded");
		return -EIO;
	}
	pthread_mutex_lock(&h->lock);
	if (!h->snap) {
		h->snap = calloc(1, sizeof(*h->snap));
		if (h->snap)
			h->snap->part_need = SNAP_HEADER;
	}
	if (!h->snap)
		rc = -ENOMEM;
	else if (h->snap->queued)
		rc = -EFBIG; /* past its end, and the session has it */
	else
		rc = snap_write(h, h->snap, buf, size);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

int fs_kvsnap_close(struct fs_handle *h)
{
	struct fs_snap_write *w;
	int rc = 0;

	pthread_mutex_lock(&h->lock);
	w = h->snap;
	if (!w || (w->phase == SNAP_PHASE_HEADER && !w->part.len && !w->error))
		rc = 0; /* nothing written */
	else if (w->error)
		rc = w->error;
	else if (w->phase != SNAP_PHASE_DONE) {
		if (w->total)
			fs_errors_add(&h->fm->errors,
				      "kv snapshot: truncated (%llu of %llu "
				      "bytes)",
				      (unsigned long long)w->got,
				      (unsigned long long)w->total);
		else
			fs_errors_add(&h->fm->errors,
				      "kv snapshot: truncated (%llu bytes, "
				      "less than its header)",
				      (unsigned long long)w->got);
		rc = snap_fail(h, w, -EINVAL);
	} else if (!w->queued) {
		w->queued = true;
		rc = 1; /* whole: the session takes it */
	}
	pthread_mutex_unlock(&h->lock);
	return rc;
}

void fs_kvsnap_release(struct fs_handle *h)
{
	snap_write_free(h, h->snap);
	h->snap = NULL;
}

void fs_kvsnap_restore_job(struct fs_model *fm, struct fs_job *job,
			   bool cancelled)
{
	struct fs_handle *h = job->h;
	struct fs_session *ss = h->session;
	struct fs_snap_write *w;
	const char *why = NULL;
	bool checked;
	int rc = cancelled ? -EIO : 0;

	/* held throughout: a late write of another descriptor waits */
	pthread_mutex_lock(&h->lock);
	w = h->snap;
	if (!rc && !w->digest_checked &&
	    (why = snap_digest_why(fm, &w->h, true, &checked)))
		rc = snap_refuse(fm, why);
	if (!rc)
		rc = snap_session_check(fm, ss);
	if (!rc) {
		pthread_mutex_lock(&fm->lock);
		engine_seq_free(ss->seq);
		ss->seq = w->seq;
		w->seq = NULL;
		rc = fs_buf_add(&ss->convo, w->text, w->text_len);
		if (!rc)
			rc = fs_buf_printf(&ss->history,
					   "--- restored %u tokens\n%.*s\n",
					   engine_seq_length(ss->seq),
					   (int)w->text_len, w->text);
		ss->kv_used = engine_seq_length(ss->seq);
		ss->kv_atime = fs_now();
		pthread_mutex_unlock(&fm->lock);
	}
	/* taken or refused, it is done: a second close changes nothing */
	snap_write_free(h, w);
	h->snap = NULL;
	pthread_mutex_unlock(&h->lock);
	fuse_reply_err(job->req, -rc);
	free(job);
}
