// SPDX-License-Identifier: MIT
/*
 * sessions/N/kv: a session's KV cache as a self-describing file
 * (Documentation/ABI.md, "KV snapshots"). Reading it gives a snapshot;
 * writing one to a session with nothing in it restores it, so that
 *
 *   cp sessions/3/kv saved.kv ... n=$(cat sessions/new)
 *   cp saved.kv sessions/$n/kv; echo more > sessions/$n/generate
 *
 * continues exactly as session 3 would have. The format and its checks
 * are the engine's (engine/snapshot.c); the snapshot's extra bytes are
 * the session's conversation so far, its model digest the SHA-256 of the
 * model's (first) file.
 *
 * A write is taken piece by piece as its bytes arrive, each piece handed
 * to the engine's loader: the header (checked against the model at the
 * write that completes it: EINVAL there), the tokens and text with their
 * checksum (the sequence's blocks are taken from the KV budget then:
 * ENOSPC), then each block, checked and copied into the sequence. Only the piece being gathered is held, charged to
 * the writer's prompt-byte allowance and the daemon's memory budget; a
 * byte past the size the header announces fails its write with EFBIG. A
 * refused snapshot fails every later write and the close. At the close
 * after its last byte the session takes it (a job on the scheduler
 * thread) or stays as it was: EINVAL for a truncated snapshot or a
 * session that is no longer empty, EBUSY while a turn of it runs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "local.h"

/* The model's identity: the SHA-256 of its (first) file, made if need be. */
static int snap_model_digest(struct fs_model *fm,
			     uint8_t out[ENGINE_SNAPSHOT_MODEL])
{
	char hex[65];
	unsigned i, v;
	int rc = 0;

	pthread_mutex_lock(&fm->lock);
	memcpy(hex, fs_local(fm)->sha256, 64);
	pthread_mutex_unlock(&fm->lock);
	hex[64] = '\0';
	if (strlen(hex) < 64) {
		rc = fs_sha256_file(engine_model_file_path(fs_local(fm)->m, 0),
				    hex, &fm->stop);
		if (rc)
			return rc;
	}
	for (i = 0; i < ENGINE_SNAPSHOT_MODEL; i++) {
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -EIO;
		out[i] = (uint8_t)v;
	}
	return 0;
}

/* ---- read -------------------------------------------------------------- */

static int snap_put(void *arg, const void *p, size_t n)
{
	return fs_buf_add(arg, p, n);
}

static int snap_build(struct fs_model *fm, struct fs_session *ss,
		      struct fs_buf *b, struct err *err)
{
	struct fs_local_session *lss = fs_local_session(ss);
	uint8_t model[ENGINE_SNAPSHOT_MODEL];
	struct fs_buf text = { 0 };
	struct engine_seq *s;
	int rc;

	pthread_mutex_lock(&fm->lock);
	s = lss->seq;
	lss->seq = NULL; /* ours while we read it */
	rc = fs_buf_add(&text, lss->convo.p ? lss->convo.p : "",
			lss->convo.len);
	pthread_mutex_unlock(&fm->lock);
	if (rc)
		goto out;
	if (!s && (rc = engine_seq_new(fs_local(fm)->ctx, &s, err)))
		goto out;
	if ((rc = snap_model_digest(fm, model))) {
		err_set(err, -rc, "cannot digest the model file");
		goto out;
	}
	rc = engine_snapshot_save(s, model, text.p, text.len, snap_put, b);
	if (rc && !err->msg[0])
		err_set(err, -rc, "out of memory for a snapshot");
out:
	pthread_mutex_lock(&fm->lock);
	if (s && !lss->seq && !ss->removed) {
		lss->seq = s;
		s = NULL;
	}
	pthread_mutex_unlock(&fm->lock);
	engine_seq_free(s);
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

/* A snapshot being written to sessions/N/kv: the handle's (h->lock). */
struct fs_snap_write {
	/* the engine's, from the header on; NULL while the header comes */
	struct engine_snapshot_load *load;
	uint64_t total, got; /* bytes the header announces, taken so far */
	struct fs_buf part;  /* the piece being gathered */
	size_t part_need;    /* its size; 0 once the snapshot is whole */
	uint64_t charged;    /* of part and text, to the writer */
	size_t text_len;     /* the conversation the loader keeps */
	bool digest_checked;
	int error;   /* negative errno once refused */
	bool queued; /* whole, and its restore job queued */
};

/* Is the model's digest known and other than the snapshot's? */
static const char *snap_digest_why(struct fs_model *fm,
				   const struct engine_snapshot_load *l,
				   bool compute, bool *checked)
{
	uint8_t model[ENGINE_SNAPSHOT_MODEL];
	char hex[2];

	pthread_mutex_lock(&fm->lock);
	hex[0] = fs_local(fm)->sha256[0];
	pthread_mutex_unlock(&fm->lock);
	*checked = false;
	if (!hex[0] && !compute)
		return NULL; /* the hash thread is at it: checked at close */
	*checked = true;
	if (snap_model_digest(fm, model) ||
	    memcmp(model, engine_snapshot_load_model(l), sizeof(model)))
		return "made from another model (its SHA-256 differs)";
	return NULL;
}

/* Is the session one a snapshot may go to? 0, -EINVAL or -EBUSY. */
static int snap_session_check(struct fs_model *fm, struct fs_session *ss)
{
	const struct fs_local_session *lss = fs_local_session(ss);
	int rc = 0;

	pthread_mutex_lock(&fm->lock);
	if (ss->turns)
		rc = -EBUSY;
	else if (lss->convo.len || ss->history.len ||
		 (lss->seq && engine_seq_length(lss->seq)))
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

/* The header is here: the engine checks it and sizes the rest. */
static int snap_take_header(struct fs_handle *h, struct fs_snap_write *w)
{
	struct fs_model *fm = h->fm;
	struct err err = { 0 };
	const char *why;
	int rc;

	if ((rc = engine_snapshot_load_new(&w->load, fs_local(fm)->ctx,
					   w->part.p, &err))) {
		fs_errors_add(&fm->errors, "kv snapshot: %s", err.msg);
		return rc;
	}
	if ((why = snap_digest_why(fm, w->load, false, &w->digest_checked)))
		return snap_refuse(fm, why);
	if ((rc = snap_session_check(fm, h->session)))
		return rc;
	w->total = engine_snapshot_load_total(w->load);
	w->part_need = engine_snapshot_load_need(w->load);
	return 0;
}

/* A piece after the header: tokens and text, then each block. */
static int snap_take_piece(struct fs_handle *h, struct fs_snap_write *w)
{
	struct err err = { 0 };
	int rc;

	rc = engine_snapshot_load_take(w->load, w->part.p, &err);
	if (rc) {
		fs_errors_add(&h->fm->errors, "kv snapshot: %s", err.msg);
		return rc;
	}
	if (!w->text_len)
		engine_snapshot_load_extra(w->load, &w->text_len);
	w->part_need = engine_snapshot_load_need(w->load);
	return 0;
}

/*
 * part is whole: take it, and give back what it held (but the text,
 * which the session takes at the close).
 */
static int snap_take_part(struct fs_handle *h, struct fs_snap_write *w)
{
	size_t had = w->part.len, text = w->text_len;
	int rc;

	rc = w->load ? snap_take_piece(h, w) : snap_take_header(h, w);
	/* the text stays charged: the loader keeps it for the session */
	text = rc ? 0 : w->text_len - text;
	fs_input_release(h->fm->fs, h->uid, had - text);
	w->charged -= had - text;
	w->part.len = 0;
	return rc;
}

static void snap_write_free(struct fs_handle *h, struct fs_snap_write *w)
{
	if (!w)
		return;
	fs_input_release(h->fm->fs, h->uid, w->charged);
	fs_buf_free(&w->part);
	engine_snapshot_load_free(w->load);
	free(w);
}

/* Refused: nothing of it is kept, every later write fails the same. */
static int snap_fail(struct fs_handle *h, struct fs_snap_write *w, int rc)
{
	engine_snapshot_load_free(w->load);
	w->load = NULL;
	w->text_len = 0;
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
	if ((w->load && !w->part_need) ||
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
		if (w->load && !w->part_need && size) /* past a 0-token end */
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
			h->snap->part_need = ENGINE_SNAPSHOT_HEADER;
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
	if (!w || (!w->load && !w->part.len && !w->error))
		rc = 0; /* nothing written */
	else if (w->error)
		rc = w->error;
	else if (!w->load || w->part_need) {
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
	struct fs_local_session *lss = fs_local_session(ss);
	struct fs_snap_write *w;
	const char *why = NULL;
	bool checked;
	size_t len;
	int rc = cancelled ? -EIO : 0;

	/* held throughout: a late write of another descriptor waits */
	pthread_mutex_lock(&h->lock);
	w = h->snap;
	if (!rc && !w->digest_checked &&
	    (why = snap_digest_why(fm, w->load, true, &checked)))
		rc = snap_refuse(fm, why);
	if (!rc)
		rc = snap_session_check(fm, ss);
	if (!rc) {
		const char *text = engine_snapshot_load_extra(w->load, &len);

		pthread_mutex_lock(&fm->lock);
		engine_seq_free(lss->seq);
		lss->seq = engine_snapshot_load_seq(w->load);
		rc = fs_buf_add(&lss->convo, text, len);
		if (!rc)
			rc = fs_buf_printf(
				&ss->history, "--- restored %u tokens\n%.*s\n",
				engine_seq_length(lss->seq), (int)len, text);
		ss->kv_used = engine_seq_length(lss->seq);
		lss->kv_atime = fs_now();
		pthread_mutex_unlock(&fm->lock);
	}
	/* taken or refused, it is done: a second close changes nothing */
	snap_write_free(h, w);
	h->snap = NULL;
	pthread_mutex_unlock(&h->lock);
	fuse_reply_err(job->req, -rc);
	free(job);
}
