// SPDX-License-Identifier: MIT
/*
 * The model's `kv` file and the KV cache options: what the cache holds,
 * its types and budget, the context each type pair would allow in that
 * budget (the table a user chooses from), and writes of `type_k=` and
 * `type_v=` lines that set the types of sequences started afterwards.
 * Reads and writes run on the scheduler thread (a job), like placement.
 * Formats are in Documentation/ABI.md.
 *
 *   $ echo type_k=q8_0 > /mnt/llm/qwen/kv; grep ^type /mnt/llm/qwen/kv
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "local.h"

/* ggml's order of the -ctk/-ctv types */
static const char *const kv_names[] = {
	"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
};
#define KV_N_NAMES (sizeof(kv_names) / sizeof(kv_names[0]))

int fs_kv_type_option(const char *s, const char **out)
{
	uint32_t t;

	if (engine_kv_type_parse(s, &t)) {
		fprintf(stderr,
			"llmfs: bad KV cache type '%s' (f32 f16 bf16 "
			"q8_0 q4_0 q4_1 q5_0 q5_1)\n",
			s);
		return -EINVAL;
	}
	*out = s;
	return 0;
}

int fs_kv_bytes_option(const char *s, uint64_t *out)
{
	if (engine_kv_bytes_parse(s, out)) {
		fprintf(stderr,
			"llmfs: bad size '%s' (bytes, or with k, M or G)\n", s);
		return -EINVAL;
	}
	return 0;
}

/* Tokens that budget holds at bpt bytes a token, in whole blocks. */
static uint64_t kv_ceiling(uint64_t budget, uint64_t bpt, uint32_t block)
{
	return bpt ? budget / (bpt * block) * block : 0;
}

static int kv_text_pairs(struct fs_model *fm, struct fs_buf *b,
			 const struct engine_kv_stats *st)
{
	uint32_t tk, tv;
	size_t i, j;
	int rc = 0;

	for (i = 0; i < KV_N_NAMES && !rc; i++) {
		for (j = 0; j < KV_N_NAMES && !rc; j++) {
			uint64_t bpt;

			engine_kv_type_parse(kv_names[i], &tk);
			engine_kv_type_parse(kv_names[j], &tv);
			bpt = engine_kv_bytes_per_token(fs_local(fm)->m, tk,
							tv);
			if (!bpt)
				continue;
			rc = fs_buf_printf(
				b, "ceiling %s/%s %llu %llu\n", kv_names[i],
				kv_names[j], (unsigned long long)bpt,
				(unsigned long long)kv_ceiling(
					st->budget, bpt, st->block_tokens));
		}
	}
	return rc;
}

int fs_text_kv(struct fs_model *fm, uid_t uid, struct fs_buf *b)
{
	struct fs_local *l = fs_local(fm);
	const struct engine_model_info *in = l->info;
	struct engine_kv_stats st;
	uint64_t bpt;
	uint32_t n_ctx;
	unsigned n = 0;
	int rc;

	engine_kv_stats(l->ctx, &st);
	bpt = st.k_bytes_per_token + st.v_bytes_per_token;
	/* the context new sequences get (a plan may have shrunk it) */
	n_ctx = engine_ctx_n_ctx(l->ctx);
	for (struct fs_stream *s = l->active; s; s = s->next)
		n++;
	rc = fs_buf_printf(
		b,
		"type %s\ntype_k %s\ntype_v %s\n"
		"bytes_per_token %llu\nk_bytes_per_token %llu\n"
		"v_bytes_per_token %llu\nn_ctx %u\nbytes_per_sequence %llu\n"
		"budget %llu\nused %llu\ncommitted %llu\nfree %llu\n"
		"blocks %llu\nblocks_shared %llu\nmemory %llu\n"
		"block_tokens %u\nblock_bytes %llu\n"
		"context_ceiling %llu\nsequences %u\n",
		engine_kv_type_name(st.type_k), engine_kv_type_name(st.type_k),
		engine_kv_type_name(st.type_v), (unsigned long long)bpt,
		(unsigned long long)st.k_bytes_per_token,
		(unsigned long long)st.v_bytes_per_token, n_ctx,
		(unsigned long long)bpt * n_ctx, (unsigned long long)st.budget,
		(unsigned long long)st.used, (unsigned long long)st.committed,
		(unsigned long long)st.free, (unsigned long long)st.blocks,
		(unsigned long long)st.shared, (unsigned long long)st.memory,
		st.block_tokens, (unsigned long long)st.block_bytes,
		(unsigned long long)kv_ceiling(st.budget, bpt, st.block_tokens),
		n);
	if (!rc)
		rc = kv_text_pairs(fm, b, &st);
	/*
	 * Whose a sequence is, only to its own uid (and root): a process
	 * session id of another user is a key to hunt for.
	 */
	for (struct fs_stream *s = l->active; s && !rc; s = s->next) {
		pthread_mutex_lock(&s->lock);
		if (uid && uid != s->uid)
			rc = fs_buf_printf(b, "sequence %llu other %u/%u\n",
					   (unsigned long long)s->id,
					   s->n_total, in->n_ctx);
		else
			rc = fs_buf_printf(
				b, "sequence %llu %s%llu %u/%u\n",
				(unsigned long long)s->id,
				s->session ? "session-" : "pid-session-",
				(unsigned long long)(s->session ?
							     s->session->id :
							     (uint64_t)s->sid),
				s->n_total, in->n_ctx);
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_lock(&fm->lock);
	for (struct fs_session *ss = fm->sessions; ss && !rc; ss = ss->next)
		if (!ss->removed)
			rc = fs_buf_printf(b, "session %llu %u\n",
					   (unsigned long long)ss->id,
					   ss->kv_used);
	pthread_mutex_unlock(&fm->lock);
	return rc;
}

/* One "key=value" line; the types apply together at the end. */
static int kv_write_line(struct fs_model *fm, char *line, uint32_t *tk,
			 uint32_t *tv)
{
	char *eq = strchr(line, '=');
	uint32_t *dst;

	if (!eq) {
		fs_errors_add(&fm->errors,
			      "kv: '%s': want type_k=TYPE or "
			      "type_v=TYPE",
			      line);
		return -EINVAL;
	}
	*eq = '\0';
	if (!strcmp(line, "type_k"))
		dst = tk;
	else if (!strcmp(line, "type_v"))
		dst = tv;
	else {
		fs_errors_add(&fm->errors,
			      "kv: unknown key '%s' (type_k, "
			      "type_v)",
			      line);
		return -EINVAL;
	}
	if (engine_kv_type_parse(eq + 1, dst)) {
		fs_errors_add(&fm->errors,
			      "kv: %s=%s: one of f32 f16 bf16 "
			      "q8_0 q4_0 q4_1 q5_0 q5_1",
			      line, eq + 1);
		return -EINVAL;
	}
	return 0;
}

void fs_kvfile_write_job(struct fs_model *fm, struct fs_job *job,
			 bool cancelled)
{
	struct fs_handle *h = job->h;
	struct engine_kv_stats st;
	struct err err = { 0 };
	char *copy = NULL, *line, *save;
	uint32_t tk, tv;
	int rc = cancelled ? -EIO : 0;

	if (!rc) {
		engine_kv_stats(fs_local(fm)->ctx, &st);
		tk = st.type_k;
		tv = st.type_v;
		copy = strndup(h->in.p ? h->in.p : "", h->in.len);
		if (!copy)
			rc = -ENOMEM;
	}
	for (line = copy ? strtok_r(copy, "\n", &save) : NULL; line && !rc;
	     line = strtok_r(NULL, "\n", &save)) {
		line[strcspn(line, " \t\r")] = '\0';
		if (*line && *line != '#')
			rc = kv_write_line(fm, line, &tk, &tv);
	}
	/* all lines or none: the types change together */
	if (!rc &&
	    (rc = engine_ctx_set_kv_types(fs_local(fm)->ctx, tk, tv, &err)))
		fs_errors_add(&fm->errors, "kv: %s", err.msg);
	free(copy);
	fs_buf_free(&h->in);
	if (rc)
		fuse_reply_err(job->req, -rc);
	else
		fuse_reply_write(job->req, job->size);
	free(job);
}
