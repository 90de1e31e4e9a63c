// SPDX-License-Identifier: MIT
/*
 * The local provider: the GGUF engine run by the scheduler of sched.c, and
 * the text files of text.c. Every optional operation is there, so a local
 * model's directory has every file.
 */
#include <stdlib.h>

#include "internal.h"

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

const struct fs_provider fs_provider_local = {
	.name = "local",
	.serve = fs_sched_main,
	.info = fs_text_info,
	.models_line = fs_text_models_line,
	.kv = fs_text_kv,
	.placement_format = provider_local_placement,
	.weights_index = fs_text_weights_index,
	.session_logprobs = true,
	.reasoning = true,
	.embed = true,
};
