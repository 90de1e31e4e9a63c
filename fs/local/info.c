// SPDX-License-Identifier: MIT
/*
 * A local model described: its info file, its line of /models and
 * weights/index (Documentation/ABI.md has the formats), from the engine's
 * description of the model (engine_model_info, engine_model_tensor).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../store.h"
#include "local.h"

/* 260K, 1.5M, 0.6B: parameters as model cards write them. */
static void info_count(uint64_t n, char *out, size_t cap)
{
	if (n >= 1000000000ull)
		snprintf(out, cap, "%.1fB", n / 1e9);
	else if (n >= 1000000ull)
		snprintf(out, cap, "%.1fM", n / 1e6);
	else if (n >= 1000ull)
		snprintf(out, cap, "%.0fK", n / 1e3);
	else
		snprintf(out, cap, "%llu", (unsigned long long)n);
}

/*
 * A local model's line of /models (its provider's models_line): the file
 * type as llama.cpp and Ollama name it, then where the model came from.
 */
int fs_text_models_line(struct fs_model *fm, struct fs_buf *b)
{
	enum fs_model_state st = fs_model_state(fm);
	const struct fs_local *l = fs_local(fm);
	char params[32];
	int rc;

	if (st != FS_MODEL_READY) {
		rc = fs_buf_printf(b, "%s - - - %s ", fm->name,
				   fs_model_state_name(st));
	} else {
		info_count(l->info->n_params, params, sizeof(params));
		rc = fs_buf_printf(b, "%s %s %s %s ready ", fm->name,
				   l->info->arch_name, params, l->quant);
	}
	if (!rc)
		rc = fs_store_source(fm, b);
	return rc ? rc : fs_buf_add(b, "\n", 1);
}

/* The shape as ggml prints it: 64x512. */
static void info_shape(const struct engine_tensor_info *t, char *out,
		       size_t cap)
{
	size_t n = 0;

	out[0] = '\0';
	for (uint32_t d = 0; d < t->n_dims && d < 4 && n < cap; d++)
		n += snprintf(out + n, cap - n, "%s%lld", d ? "x" : "",
			      (long long)t->ne[d]);
}

/* The "quant mix": bytes and tensors per type. */
static int info_quant_mix(const struct engine_model *m, struct fs_buf *b)
{
	struct engine_type_total *t = NULL;
	size_t n = 0;
	int rc = engine_model_type_totals(m, &t, &n);

	if (!rc)
		rc = fs_buf_add(b, "quant_mix", 9);
	for (size_t i = 0; i < n && !rc; i++)
		rc = fs_buf_printf(b, " %s:%llu:%llu", t[i].type,
				   (unsigned long long)t[i].tensors,
				   (unsigned long long)t[i].bytes);
	free(t);
	return rc ? rc : fs_buf_add(b, "\n", 1);
}

int fs_text_info(struct fs_model *fm, struct fs_buf *b)
{
	enum fs_model_state st = fs_model_state(fm);
	const struct engine_model_info *in;
	const struct fs_local *l;
	struct engine_kv_stats kv = { .type_k = UINT32_MAX };
	char sha[sizeof(l->sha256)];
	int rc;

	if (st != FS_MODEL_READY) {
		pthread_mutex_lock(&fm->lock);
		rc = fs_buf_printf(b, "name %s\nstate %s\nfile %s\n%s%s%s",
				   fm->name, fs_model_state_name(st), fm->path,
				   st == FS_MODEL_FAILED ? "error " : "",
				   st == FS_MODEL_FAILED ? fm->load_error : "",
				   st == FS_MODEL_FAILED ? "\n" : "");
		pthread_mutex_unlock(&fm->lock);
		return rc ? rc : fs_store_info(fm, b);
	}
	/* READY: the load's handles are set (fs_local, local.h) */
	l = fs_local(fm);
	in = l->info;
	pthread_mutex_lock(&fm->lock);
	memcpy(sha, l->sha256, sizeof(sha));
	pthread_mutex_unlock(&fm->lock);
	if (l->ctx)
		engine_kv_stats(l->ctx, &kv);
	rc = fs_buf_printf(
		b,
		"name %s\nstate ready\narchitecture %s\nmodel_name %s\n"
		"parameters %llu\nlayers %u\nembedding %u\nheads %u\n"
		"heads_kv %u\nhead_dim %u\nfeed_forward %u\nexperts %u\n"
		"experts_used %u\ncontext %u\ncontext_train %u\nvocab %u\n"
		"tokenizer %s\ntokenizer_pre %s\nchat_template %s\n"
		"rope_freq_base %g\nrms_norm_eps %g\nkv_type %s\n"
		"tensor_bytes %llu\ntensors %llu\n",
		fm->name, in->arch_name, in->name ? in->name : "-",
		(unsigned long long)in->n_params, in->n_layer, in->n_embd,
		in->n_head, in->n_head_kv, in->head_dim, in->n_ff, in->n_expert,
		in->n_expert_used, in->n_ctx, in->n_ctx_train, in->n_vocab,
		in->tokenizer_model ? in->tokenizer_model : "-",
		in->tokenizer_pre ? in->tokenizer_pre : "-",
		l->chat ? engine_chat_kind(l->chat) : "-", in->rope_freq_base,
		in->rms_norm_eps,
		engine_kv_type_name(kv.type_k) ?
			engine_kv_type_name(kv.type_k) :
			"?",
		(unsigned long long)in->tensor_bytes,
		(unsigned long long)engine_model_n_tensors(l->m));
	if (!rc)
		rc = info_quant_mix(l->m, b);
	for (uint32_t i = 0; i < engine_model_n_files(l->m) && !rc; i++)
		rc = fs_buf_printf(b, "file %s\n",
				   engine_model_file_path(l->m, i));
	if (!rc)
		rc = fs_buf_printf(b, "sha256 %s\n", *sha ? sha : "computing");
	if (!rc)
		rc = fs_buf_printf(b, "file_type %s%s\n", l->quant,
				   l->quant_guessed ? " guessed" : "");
	return rc ? rc : fs_store_info(fm, b);
}

int fs_text_weights_index(struct fs_model *fm, struct fs_buf *b)
{
	const struct engine_model *m;
	struct engine_tensor_info t;
	char shape[96];
	int rc = 0;

	if (fs_model_state(fm) != FS_MODEL_READY)
		return 0;
	m = fs_local(fm)->m;
	pthread_rwlock_rdlock(&fm->weights_lock);
	for (uint64_t i = 0; !rc && !engine_model_tensor(m, i, &t); i++) {
		info_shape(&t, shape, sizeof(shape));
		rc = fs_buf_printf(b, "%s %s %s %llu %llu %s\n", t.name, t.type,
				   shape, (unsigned long long)t.bytes,
				   (unsigned long long)t.offset, t.device);
	}
	pthread_rwlock_unlock(&fm->weights_lock);
	return rc;
}
