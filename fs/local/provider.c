// SPDX-License-Identifier: MIT
/*
 * The local provider: a GGUF model run by the engine in this process,
 * stepped by the scheduler of sched.c, described by info.c. Every
 * optional operation is there, so a local model's directory has every
 * file. Its state hangs off fm->provider_data (struct fs_local, local.h):
 * the engine's model, context and chat template, set once the load
 * succeeds, and the scheduler's queues; what it keeps per stream and per
 * session (a generation, a kept sequence, a conversation) sits in their
 * provider_state (struct fs_local_stream, struct fs_local_session). The
 * core reaches what it needs of it through the table: the engine model
 * (fs_model_engine), the KV figures for the budget, the merge's lines of
 * stats, the frees of a stream's and a session's state.
 */
#include <stdlib.h>

#include "local.h"

static int provider_local_placement(struct fs_model *fm, struct fs_buf *b,
				    struct err *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc = engine_placement_format(fs_local(fm)->ctx, &text, &len, err);

	if (!rc)
		rc = fs_buf_add(b, text, len);
	free(text);
	return rc;
}

static int provider_local_plan(struct fs_model *fm, char *buf, size_t cap,
			       struct err *err)
{
	/* not measured here: status must not read 128 MiB (see engine.h) */
	return engine_placement_plan_text(fs_local(fm)->ctx, buf, cap, false,
					  err);
}

/* fm->lock held: the idle merge's progress, once the load succeeded. */
static int provider_local_stats(struct fs_model *fm, struct fs_buf *b)
{
	const struct fs_local *l = fs_local(fm);

	if (fm->state != FS_MODEL_READY || !l || !l->merge_state)
		return 0;
	return fs_buf_printf(b, "weights_merge %s\nweights_merged_bytes %llu\n",
			     l->merge_state,
			     (unsigned long long)l->merged_bytes);
}

static struct engine_model *provider_local_engine_model(struct fs_model *fm)
{
	const struct fs_local *l = fs_local(fm);

	return l ? l->m : NULL;
}

static bool provider_local_kv_stats(struct fs_model *fm,
				    struct engine_kv_stats *out)
{
	const struct fs_local *l = fs_local(fm);

	if (!l || !l->ctx)
		return false;
	engine_kv_stats(l->ctx, out);
	return true;
}

/* After the model's thread ended (its cancel joined the hash thread). */
static void provider_local_free(struct fs_model *fm)
{
	struct fs_local *l = fs_local(fm);

	if (!l)
		return;
	engine_chat_free(l->chat);
	engine_ctx_free(l->ctx);
	engine_model_free(l->m);
	free(l);
	fm->provider_data = NULL;
}

static void provider_local_stream_free(struct fs_stream *s)
{
	fs_chat_turn_free(s);
}

static void provider_local_session_free(struct fs_model *fm,
					struct fs_session *ss)
{
	struct fs_local_session *lss = fs_local_session(ss);

	(void)fm;
	fs_buf_free(&lss->convo);
	fs_chat_session_free(ss);
	engine_seq_free(lss->seq);
}

const struct fs_provider fs_provider_local = {
	.name = "local",
	.load = fs_local_load,
	.start = fs_local_start,
	.step = fs_local_step,
	.idle = fs_local_idle,
	.background = fs_local_merge_step,
	.cancel = fs_local_cancel,
	.free = provider_local_free,
	.stream_size = sizeof(struct fs_local_stream),
	.session_size = sizeof(struct fs_local_session),
	.stream_free = provider_local_stream_free,
	.session_free = provider_local_session_free,
	.stats = provider_local_stats,
	.engine_model = provider_local_engine_model,
	.kv_stats = provider_local_kv_stats,
	.plan = provider_local_plan,
	.info = fs_text_info,
	.models_line = fs_text_models_line,
	.kv = fs_text_kv,
	.placement_format = provider_local_placement,
	.weights_index = fs_text_weights_index,
	.session_logprobs = true,
	.reasoning = true,
	.embed = true,
};
