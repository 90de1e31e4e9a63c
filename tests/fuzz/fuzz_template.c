/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the chat template interpreter (engine/template/):
 * a GGUF's tokenizer.chat_template is any text its author wrote. Each
 * input is a template, parsed, then rendered with a small conversation
 * (two messages, a tool, thinking on). Any result but a crash, a leak or
 * a hang is fine: a syntax error, a runtime error and a rendering must
 * each come back with a message or text. The render is bounded (steps,
 * bytes) as the daemon's is, tighter, so that the fuzzer runs fast.
 * tests/fuzz/run builds it; its seeds are llama.cpp's templates.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/template/template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char fuzz_context[] =
	"{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
	" {\"role\": \"user\", \"content\": \"Hi <think> \\u00e9\"},"
	" {\"role\": \"assistant\", \"content\": \"Hello.\","
	"  \"reasoning_content\": \"greet\", \"tool_calls\": [{\"type\":"
	"  \"function\", \"function\": {\"name\": \"f\", \"arguments\":"
	"  {\"a\": 1.5, \"b\": [true, null]}}}]}],"
	" \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\","
	"  \"parameters\": {\"type\": \"object\"}}}],"
	" \"add_generation_prompt\": true, \"enable_thinking\": true,"
	" \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static json_t *ctx;
	struct engine_template_options opt = {
		.now = 0,
		.max_bytes = 16u << 20,
		.max_steps = 200000,
	};
	struct engine_template *t = NULL;
	struct err err = { 0 };
	char *out = NULL;
	size_t len = 0;
	int rc;

	if (!ctx && !(ctx = json_loads(fuzz_context, 0, NULL)))
		__builtin_trap();
	rc = engine_template_parse(&t, (const char *)data, size, &err);
	if (rc) {
		if (!err.msg[0] || t)
			__builtin_trap();
		return 0;
	}
	rc = engine_template_render(t, ctx, &opt, &out, &len, &err);
	if (rc ? !err.msg[0] || out : !out || strlen(out) > len)
		__builtin_trap();
	free(out);
	engine_template_free(t);
	return 0;
}
