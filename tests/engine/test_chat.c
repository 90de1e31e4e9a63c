// SPDX-License-Identifier: MIT
/*
 * Chat template tests, from template strings (no model needed). The
 * templates are those of llama.cpp's tests/test-chat-template.cpp (some
 * shortened to the parts detection reads); the expected strings are what
 * llm_chat_apply_template writes for one user message with add_ass.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/engine.h"
#include "../common/check_main.h"

static const char tmpl_qwen2[] =
	"{% for message in messages %}{% if loop.first and messages[0]['role']"
	" != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant."
	"<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n'"
	" + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

static const char tmpl_llama2[] =
	"{{ bos_token }}{% for message in messages %}{% if (message['role'] =="
	" 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation"
	" roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
	"{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] +"
	" ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
	"{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only"
	" user and assistant roles are supported!') }}{% endif %}{% endfor %}";

/* the Vigogne one, cut: it strips the content */
static const char tmpl_llama2_strip[] =
	"{% if message['role'] == 'user' %}{{ '[INST] ' + content.strip() + "
	"' [/INST]' }}{% endif %}";

static const char tmpl_llama3[] =
	"{% set loop_messages = messages %}{% for message in loop_messages %}"
	"{% set content = '<|start_header_id|>' + message['role'] + "
	"'<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}"
	"{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
	"{% endif %}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant"
	"<|end_header_id|>\n\n' }}";

/* Mistral v7: [INST] with [SYSTEM_PROMPT], a format we do not write */
static const char tmpl_mistral_v7[] =
	"{{ bos_token }}{% for message in messages %}{% if message['role'] == "
	"'user' %}{{ '[INST] ' + message['content'] + '[/INST]' }}{% elif "
	"message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + "
	"message['content'] + '[/SYSTEM_PROMPT]' }}{% endif %}{% endfor %}";

/* Phi-4 uses <|im_start|> but is not ChatML */
static const char tmpl_phi4[] =
	"{% for message in messages %}{{'<|im_start|>' + message['role'] + "
	"'<|im_sep|>' + message['content'] + '<|im_end|>'}}{% endfor %}";

/* Zephyr */
static const char tmpl_zephyr[] =
	"{% for message in messages %}\n{% if message['role'] == 'user' %}\n"
	"{{ '<|user|>\n' + message['content'] + eos_token }}\n{% endif %}"
	"{% endfor %}<|endoftext|>";

static void check_apply(const char *tmpl, const char *msg, size_t len,
			const char *want, size_t want_len)
{
	struct err err = { 0 };
	char *out = (char *)1;
	size_t out_len = 0;

	ck_assert_int_eq(engine_chat_template_apply(tmpl, msg, len, &out,
						    &out_len, &err),
			 0);
	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(out_len, want_len);
	ck_assert_msg(memcmp(out, want, want_len) == 0 && out[want_len] == '\0',
		      "got \"%s\", want \"%s\"", out, want);
	free(out);
}

#define CHECK_APPLY(tmpl, msg, want) \
	check_apply(tmpl, msg, strlen(msg), want, strlen(want))

START_TEST(test_chat_detects_families)
{
	ck_assert_int_eq(engine_chat_template_format(tmpl_qwen2),
			 ENGINE_CHAT_CHATML);
	ck_assert_int_eq(engine_chat_template_format(tmpl_llama2),
			 ENGINE_CHAT_LLAMA2);
	ck_assert_int_eq(engine_chat_template_format(tmpl_llama2_strip),
			 ENGINE_CHAT_LLAMA2);
	ck_assert_int_eq(engine_chat_template_format(tmpl_llama3),
			 ENGINE_CHAT_LLAMA3);
	/* what llama.cpp knows as other families stays RAW here */
	ck_assert_int_eq(engine_chat_template_format(tmpl_mistral_v7),
			 ENGINE_CHAT_RAW);
	ck_assert_int_eq(engine_chat_template_format(tmpl_phi4),
			 ENGINE_CHAT_RAW);
	ck_assert_int_eq(engine_chat_template_format(tmpl_zephyr),
			 ENGINE_CHAT_RAW);
	ck_assert_int_eq(engine_chat_template_format("hello {{ messages }}"),
			 ENGINE_CHAT_RAW);
	ck_assert_int_eq(engine_chat_template_format(""), ENGINE_CHAT_RAW);
	/* Llama 3 markers under a family llama.cpp checks first */
	ck_assert_int_eq(
		engine_chat_template_format(
			"<|user|><|assistant|><|start_header_id|><|end_header_id|>"),
		ENGINE_CHAT_RAW);
	/* the header alone is not Llama 3 */
	ck_assert_int_eq(engine_chat_template_format("<|start_header_id|>"),
			 ENGINE_CHAT_RAW);
}
END_TEST

START_TEST(test_chat_names_and_none)
{
	/* no template: ChatML, as llama_chat_apply_template(NULL) */
	ck_assert_int_eq(engine_chat_template_format(NULL), ENGINE_CHAT_CHATML);
	ck_assert_int_eq(engine_chat_template_format("chatml"),
			 ENGINE_CHAT_CHATML);
	ck_assert_int_eq(engine_chat_template_format("llama2"),
			 ENGINE_CHAT_LLAMA2);
	ck_assert_int_eq(engine_chat_template_format("llama3"),
			 ENGINE_CHAT_LLAMA3);
	ck_assert_int_eq(engine_chat_template_format("mistral-v7"),
			 ENGINE_CHAT_RAW);
	CHECK_APPLY(
		NULL, "Hello",
		"<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
}
END_TEST

START_TEST(test_chat_apply_chatml)
{
	CHECK_APPLY(
		tmpl_qwen2, "Hello",
		"<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
	/* ChatML keeps the message's spaces */
	CHECK_APPLY(tmpl_qwen2, "  Who are you \n",
		    "<|im_start|>user\n  Who are you \n<|im_end|>\n"
		    "<|im_start|>assistant\n");
}
END_TEST

START_TEST(test_chat_apply_llama2)
{
	CHECK_APPLY(tmpl_llama2, "Who are you", "[INST] Who are you [/INST]");
	CHECK_APPLY(tmpl_llama2, " spaced ", "[INST]  spaced  [/INST]");
	CHECK_APPLY(tmpl_llama2_strip, " \t spaced \n",
		    "[INST] spaced [/INST]");
}
END_TEST

START_TEST(test_chat_apply_llama3)
{
	CHECK_APPLY(tmpl_llama3, "  Who are you\n",
		    "<|start_header_id|>user<|end_header_id|>\n\nWho are you"
		    "<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
		    "\n\n");
}
END_TEST

START_TEST(test_chat_apply_raw_and_bytes)
{
	static const char msg[] = "a\0b\xff";

	/* RAW copies the bytes unchanged, NUL included, and terminates */
	check_apply(tmpl_phi4, msg, 4, msg, 4);
	check_apply(tmpl_phi4, "", 0, "", 0);
	/* a message is taken by length, not up to a NUL */
	check_apply(tmpl_llama2, "abcdef", 3, "[INST] abc [/INST]", 18);
	check_apply(tmpl_qwen2, msg, 4,
		    "<|im_start|>user\na\0b\xff<|im_end|>\n"
		    "<|im_start|>assistant\n",
		    17 + 4 + 33);
}
END_TEST

static void check_system(const char *tmpl, const char *sys, const char *msg,
			 const char *want)
{
	struct err err = { 0 };
	char *out = NULL;
	size_t out_len = 0;

	ck_assert_int_eq(engine_chat_template_apply_system(tmpl, sys, msg,
							   strlen(msg), &out,
							   &out_len, &err),
			 0);
	ck_assert_msg(out && !strcmp(out, want), "got \"%s\", want \"%s\"", out,
		      want);
	ck_assert_uint_eq(out_len, strlen(want));
	free(out);
}

/*
 * A system message before the user's, as llm_chat_apply_template writes
 * a system + user pair (src/llama-chat.cpp): a turn of its own in ChatML
 * and Llama 3 (trimmed there), inside the first [INST] in Llama 2.
 */
START_TEST(test_chat_apply_system)
{
	check_system(tmpl_qwen2, "Be brief.", "Hello",
		     "<|im_start|>system\nBe brief.<|im_end|>\n"
		     "<|im_start|>user\nHello<|im_end|>\n"
		     "<|im_start|>assistant\n");
	check_system(tmpl_llama3, " Be brief.\n", "Hi",
		     "<|start_header_id|>system<|end_header_id|>\n\nBe brief."
		     "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
		     "Hi<|eot_id|><|start_header_id|>assistant"
		     "<|end_header_id|>\n\n");
	/* llama2 without <<SYS>>: the system line opens the first turn */
	check_system(tmpl_llama2, "Be brief.", "Who are you",
		     "[INST] Be brief.\nWho are you [/INST]");
	check_system("llama2-sys", "Be brief.", "Who are you",
		     "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n"
		     "Who are you [/INST]");
	/* none, or a template we do not write: the user turn alone */
	check_system(tmpl_qwen2, NULL, "Hello",
		     "<|im_start|>user\nHello<|im_end|>\n"
		     "<|im_start|>assistant\n");
	check_system(tmpl_qwen2, "", "Hello",
		     "<|im_start|>user\nHello<|im_end|>\n"
		     "<|im_start|>assistant\n");
	check_system(tmpl_phi4, "Be brief.", "Hello", "Hello");
}
END_TEST

static void chat_tests(TCase *tc)
{
	tcase_add_test(tc, test_chat_detects_families);
	tcase_add_test(tc, test_chat_names_and_none);
	tcase_add_test(tc, test_chat_apply_chatml);
	tcase_add_test(tc, test_chat_apply_llama2);
	tcase_add_test(tc, test_chat_apply_llama3);
	tcase_add_test(tc, test_chat_apply_raw_and_bytes);
	tcase_add_test(tc, test_chat_apply_system);
}

const struct check_main check_main = {
	.name = "chat",
	.add_tests = chat_tests,
};
