/* SPDX-License-Identifier: MIT */
/*
 * A Jinja interpreter for chat templates: the text a GGUF file keeps in
 * tokenizer.chat_template, run as @huggingface/jinja (the interpreter the
 * reference, node-llama-cpp, uses) runs it, so that a conversation becomes
 * the same bytes here and there (tests/engine/template.sh checks the 70
 * templates of llama.cpp's source). engine/chat.c puts it behind the chat
 * API of engine.h; Documentation/generation.md describes the language.
 *
 *   t = engine_template_parse(text)       once per model
 *   engine_template_render(t, context)    per conversation
 *
 * A parsed template is immutable: several threads may render it at once.
 * The template is input (a GGUF is any file): bad syntax, a runaway loop,
 * a deep recursion or a huge string end in -EINVAL (or -ENOMEM past
 * max_bytes) with a message, never a crash.
 */
#ifndef LLMFS_ENGINE_TEMPLATE_H
#define LLMFS_ENGINE_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "../../io/io.h"

struct engine_template;

/*
 * Parse len bytes of template source. -EINVAL with "line N: what" for a
 * syntax error, -ENOMEM. Free with engine_template_free().
 */
int engine_template_parse(struct engine_template **out, const char *src,
			  size_t len, struct err *err);
void engine_template_free(struct engine_template *t);

struct engine_template_options {
	/* strftime_now()'s clock, Unix seconds; < 0: the current time */
	int64_t now;
	/* live bytes a render may hold; 0: 256 MiB */
	size_t max_bytes;
	/* steps (expressions, loop iterations) a render may take; 0: 10 million */
	uint64_t max_steps;
};

/* The prefix of the message when the template called raise_exception(). */
#define ENGINE_TEMPLATE_RAISED "raise_exception: "

/*
 * Render with the variables of context, a jansson json_t object (passed as
 * void * so that this header does not need jansson.h): messages,
 * add_generation_prompt, bos_token... as the template expects them. *out is
 * malloc'ed (NUL-terminated, *out_len bytes), the caller frees it. -EINVAL
 * with a message when the template fails; when it called
 * raise_exception(msg), the message is ENGINE_TEMPLATE_RAISED msg. opt may
 * be NULL.
 */
int engine_template_render(const struct engine_template *t, const void *context,
			   const struct engine_template_options *opt,
			   char **out, size_t *out_len, struct err *err);

#endif
