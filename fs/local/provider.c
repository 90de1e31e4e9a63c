// SPDX-License-Identifier: MIT
/*
 * The local provider: a GGUF model run by the engine in this process,
 * stepped by the scheduler of sched.c, described by info.c. Every
 * optional operation is there, so a local model's directory has every
 * file. Its state (struct fs_local, local.h) hangs off fm->provider_data;
 * the engine's model, context and chat template are fm->m, fm->ctx and
 * fm->chat, set once the load succeeds (internal.h).
 */
#include <stdlib.h>

#include "local.h"

static int provider_local_placement(struct fs_model *fm, struct fs_buf *b,
				    struct err *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc = engine_placement_format(fm->ctx, &text, &len, err);

	if (!rc)
		rc = fs_buf_add(b, text, len);
	free(text);
	return rc;
}

/* After the model's thread ended and its sessions went. */
static void provider_local_free(struct fs_model *fm)
{
	free(fm->provider_data);
	fm->provider_data = NULL;
	engine_chat_free(fm->chat);
	fm->chat = NULL;
	engine_ctx_free(fm->ctx);
	fm->ctx = NULL;
	engine_model_free(fm->m);
	fm->m = NULL;
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
	.info = fs_text_info,
	.models_line = fs_text_models_line,
	.kv = fs_text_kv,
	.placement_format = provider_local_placement,
	.weights_index = fs_text_weights_index,
	.session_logprobs = true,
	.reasoning = true,
	.embed = true,
};
