// SPDX-License-Identifier: MIT
/*
 * Chat tests, from template strings (no model needed): the detection of
 * the built-in formats, their rendering, the model's own (Jinja) template
 * through the chat API, and the reasoning split. The templates and the
 * expected strings are those of llama.cpp's tests/test-chat-template.cpp
 * (some templates shortened to the parts detection reads).
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

static const char tmpl_hermes[] =
	"{% for message in messages %}{{'<|im_start|>' + message['role'] + "
	"'\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
	"{% endif %}";

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

/* llama.cpp's tests/test-chat-template.cpp conversation */
static const struct engine_chat_message conversation[] = {
	{ "system", "You are a helpful assistant", NULL },
	{ "user", "Hello", NULL },
	{ "assistant", "Hi there", NULL },
	{ "user", "Who are you", NULL },
	{ "assistant", "   I am an assistant   ", NULL },
	{ "user", "Another question", NULL },
};

/* Render msg with tmpl (tokens as given) and compare. */
static void check_render(const char *tmpl, const struct engine_chat_tokens *tok,
			 const struct engine_chat_message *msg, size_t n,
			 bool add_prompt, const char *want)
{
	struct engine_chat_render o = { add_prompt, ENGINE_THINK_ON };
	struct engine_chat *c = NULL;
	struct err err = { 0 };
	char *out = (char *)1;
	size_t len = 0;

	ck_assert_int_eq(engine_chat_new(&c, tmpl, tok, &err), 0);
	ck_assert_msg(engine_chat_render(c, msg, n, &o, &out, &len, &err) == 0,
		      "%s", err.msg);
	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(len, strlen(out));
	ck_assert_msg(strcmp(out, want) == 0, "got \"%s\", want \"%s\"", out,
		      want);
	free(out);
	engine_chat_free(c);
}

static void check_apply(const char *tmpl, const char *msg, const char *want)
{
	const struct engine_chat_message m = { "user", msg, NULL };

	check_render(tmpl, NULL, &m, 1, true, want);
}

#define CHECK_APPLY(tmpl, msg, want) check_apply(tmpl, msg, want)

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
	/* Qwen2's own template adds its default system message */
	CHECK_APPLY(tmpl_qwen2, "Hello",
		    "<|im_start|>system\nYou are a helpful assistant."
		    "<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
		    "<|im_start|>assistant\n");
	/* ChatML keeps the message's spaces */
	CHECK_APPLY("chatml", "  Who are you \n",
		    "<|im_start|>user\n  Who are you \n<|im_end|>\n"
		    "<|im_start|>assistant\n");
}
END_TEST

START_TEST(test_chat_apply_llama2)
{
	CHECK_APPLY(tmpl_llama2, "Who are you", "[INST] Who are you [/INST]");
	CHECK_APPLY("llama2", " spaced ", "[INST]  spaced  [/INST]");
	CHECK_APPLY("llama2-sys-strip", " \t spaced \n",
		    "[INST] spaced [/INST]");
}
END_TEST

START_TEST(test_chat_apply_llama3)
{
	CHECK_APPLY("llama3", "  Who are you\n",
		    "<|start_header_id|>user<|end_header_id|>\n\nWho are you"
		    "<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
		    "\n\n");
	CHECK_APPLY(tmpl_llama3, "  Who are you\n",
		    "<|start_header_id|>user<|end_header_id|>\n\nWho are you"
		    "<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
		    "\n\n");
}
END_TEST

START_TEST(test_chat_apply_raw)
{
	/* a template that does not parse and that no family claims */
	CHECK_APPLY("{% if %}<|im_sep|>", "as it is", "as it is");
	CHECK_APPLY("{% if %}<|im_sep|>", "", "");
}
END_TEST

/*
 * The built-in formats by llama.cpp's names, for the conversation of its
 * test-chat-template.cpp, with its expected strings.
 */
START_TEST(test_chat_builtin_conversations)
{
	size_t n = sizeof(conversation) / sizeof(conversation[0]);

	check_render(
		"chatml", NULL, conversation, n, true,
		"<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
		"<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
		"Hi there<|im_end|>\n<|im_start|>user\nWho are you"
		"<|im_end|>\n<|im_start|>assistant\n   I am an assistant   "
		"<|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n"
		"<|im_start|>assistant\n");
	check_render("llama2", NULL, conversation, n, true,
		     "[INST] You are a helpful assistant\nHello [/INST]Hi there"
		     "</s>[INST] Who are you [/INST]   I am an assistant   </s>"
		     "[INST] Another question [/INST]");
	check_render("llama2-sys-bos", NULL, conversation, n, true,
		     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\n"
		     "Hello [/INST]Hi there</s><s>[INST] Who are you [/INST]   "
		     "I am an assistant   </s><s>[INST] Another question "
		     "[/INST]");
	check_render("llama2-sys-strip", NULL, conversation, n, true,
		     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\n"
		     "Hello [/INST]Hi there</s>[INST] Who are you [/INST]I am "
		     "an assistant</s>[INST] Another question [/INST]");
	check_render("llama3", NULL, conversation, n, true,
		     "<|start_header_id|>system<|end_header_id|>\n\nYou are a "
		     "helpful assistant<|eot_id|><|start_header_id|>user"
		     "<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>"
		     "assistant<|end_header_id|>\n\nHi there<|eot_id|>"
		     "<|start_header_id|>user<|end_header_id|>\n\nWho are you"
		     "<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
		     "\n\nI am an assistant<|eot_id|><|start_header_id|>user"
		     "<|end_header_id|>\n\nAnother question<|eot_id|>"
		     "<|start_header_id|>assistant<|end_header_id|>\n\n");
}
END_TEST

/*
 * The model's own template, through the interpreter: the same strings
 * (llama.cpp's test expects them of its Jinja path too). Mistral v0.2
 * raises on a system message: it joins the user's, as llama.cpp's
 * workaround does.
 */
START_TEST(test_chat_jinja_conversations)
{
	struct engine_chat_tokens mistral = { "<s>", "</s>", true, false };
	size_t n = sizeof(conversation) / sizeof(conversation[0]);

	check_render(
		tmpl_hermes, NULL, conversation, n, true,
		"<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
		"<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
		"Hi there<|im_end|>\n<|im_start|>user\nWho are you"
		"<|im_end|>\n<|im_start|>assistant\n   I am an assistant   "
		"<|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n"
		"<|im_start|>assistant\n");
	/* the BOS the template writes is the tokenizer's to add */
	check_render(tmpl_llama2, &mistral, conversation, n, true,
		     "[INST] You are a helpful assistant\nHello [/INST]Hi there"
		     "</s>[INST] Who are you [/INST]   I am an assistant   </s>"
		     "[INST] Another question [/INST]");
	check_render(tmpl_llama3, NULL, conversation, n, true,
		     "<|start_header_id|>system<|end_header_id|>\n\nYou are a "
		     "helpful assistant<|eot_id|><|start_header_id|>user"
		     "<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>"
		     "assistant<|end_header_id|>\n\nHi there<|eot_id|>"
		     "<|start_header_id|>user<|end_header_id|>\n\nWho are you"
		     "<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
		     "\n\nI am an assistant<|eot_id|><|start_header_id|>user"
		     "<|end_header_id|>\n\nAnother question<|eot_id|>"
		     "<|start_header_id|>assistant<|end_header_id|>\n\n");
}
END_TEST

START_TEST(test_chat_jinja_variables)
{
	static const char tmpl[] =
		"[{{ enable_thinking }}|{{ add_generation_prompt }}|"
		"{{ bos_token }}|{{ eos_token }}|{% for m in messages %}"
		"{{ m.role }}:{{ m.content }}:{{ m.reasoning_content }};"
		"{% endfor %}]";
	struct engine_chat_tokens tok = { "<B>", "<E>", false, false };
	const struct engine_chat_message msg[] = {
		{ "user", "q", NULL },
		{ "assistant", "a", "r" },
	};
	struct engine_chat_render o = { false, ENGINE_THINK_OFF };
	struct engine_chat *c;
	struct err err = { 0 };
	char *out;

	ck_assert_int_eq(engine_chat_new(&c, tmpl, &tok, &err), 0);
	ck_assert_str_eq(engine_chat_kind(c), "jinja");
	ck_assert_ptr_null(engine_chat_notice(c));
	ck_assert_int_eq(engine_chat_render(c, msg, 2, &o, &out, NULL, &err),
			 0);
	/* add_generation_prompt false is left undefined, as llama.cpp */
	ck_assert_str_eq(out, "[false||<B>|<E>|user:q:;assistant:a:r;]");
	free(out);
	o = (struct engine_chat_render){ true, ENGINE_THINK_HIDE };
	ck_assert_int_eq(engine_chat_render(c, msg, 1, &o, &out, NULL, &err),
			 0);
	ck_assert_str_eq(out, "[true|true|<B>|<E>|user:q:;]");
	free(out);
	o.think = ENGINE_THINK_DEFAULT;
	ck_assert_int_eq(engine_chat_render(c, msg, 1, &o, &out, NULL, &err),
			 0);
	ck_assert_str_eq(out, "[|true|<B>|<E>|user:q:;]");
	free(out);
	engine_chat_free(c);
}
END_TEST

START_TEST(test_chat_bad_templates)
{
	struct engine_chat *c;
	struct err err = { 0 };
	const struct engine_chat_message msg = { "user", "x", NULL };
	char *out = NULL;

	/* does not parse, ChatML markers: ChatML, with a notice */
	ck_assert_int_eq(
		engine_chat_new(&c, "{% for %}<|im_start|>", NULL, &err), 0);
	ck_assert_str_eq(engine_chat_kind(c), "chatml");
	ck_assert_ptr_nonnull(engine_chat_notice(c));
	ck_assert(strstr(engine_chat_notice(c), "does not parse"));
	engine_chat_free(c);
	/* parses, refuses the conversation: its message */
	ck_assert_int_eq(
		engine_chat_new(&c, "{{ raise_exception('no users here') }}",
				NULL, &err),
		0);
	ck_assert_int_eq(engine_chat_render(c, &msg, 1, NULL, &out, NULL, &err),
			 -EINVAL);
	ck_assert_ptr_null(out);
	ck_assert_str_eq(err.msg, "raise_exception: no users here");
	engine_chat_free(c);
}
END_TEST

/* A system message first (config's system=), as the template writes it. */
static void check_system(const char *tmpl, const char *system, const char *user,
			 const char *want)
{
	const struct engine_chat_message msg[] = {
		{ "system", system, NULL },
		{ "user", user, NULL },
	};

	check_render(tmpl, NULL, msg, 2, true, want);
}

START_TEST(test_chat_system)
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
	/* refuses a system message: it opens the user's, as llama.cpp */
	check_system(tmpl_llama2, "Be brief.", "Who are you",
		     "[INST] Be brief.\nWho are you [/INST]");
	check_system("llama2", "Be brief.", "Who are you",
		     "[INST] Be brief.\nWho are you [/INST]");
	check_system("llama2-sys", "Be brief.", "Who are you",
		     "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n"
		     "Who are you [/INST]");
	check_system(tmpl_phi4, "Be brief.", "Hello",
		     "<|im_start|>system<|im_sep|>Be brief.<|im_end|>"
		     "<|im_start|>user<|im_sep|>Hello<|im_end|>");
}
END_TEST

START_TEST(test_chat_think_split)
{
	static const struct {
		bool open;
		const char *text, *reasoning, *answer;
	} cases[] = {
		{ false, "<think>\nhm\n</think>\n\nYes.", "\nhm\n", "Yes." },
		{ false, "\n <think>a</think>b", "a", "b" },
		{ false, "No block.", "", "No block." },
		{ false, "  spaced", "", "  spaced" },
		{ false, "<thin", "", "<thin" },
		{ false, "<think>never closed", "never closed", "" },
		{ false, "<think>a</thi", "a</thi", "" },
		{ false, "x <think>in the answer</think>", "",
		  "x <think>in the answer</think>" },
		{ true, "reasoning\n</think>\n\nanswer", "reasoning\n",
		  "answer" },
		{ false, "<think></think>\n\n", "", "" },
	};
	char r[256], a[256], buf[64];
	size_t nr, na, lr, la;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* whole, and a byte at a time: the same split */
		for (size_t step = 1; step <= 64; step += 63) {
			struct engine_think_split t;
			const char *p = cases[i].text;
			size_t left = strlen(p);

			engine_think_split_init(&t, cases[i].open);
			lr = la = 0;
			while (left) {
				size_t k = left < step ? left : step;

				engine_think_split_push(&t, p, k, buf, &nr,
							a + la, &na);
				memcpy(r + lr, buf, nr);
				lr += nr;
				la += na;
				p += k;
				left -= k;
			}
			engine_think_split_flush(&t, r + lr, &nr, a + la, &na);
			lr += nr;
			la += na;
			r[lr] = a[la] = '\0';
			ck_assert_msg(!strcmp(r, cases[i].reasoning) &&
					      !strcmp(a, cases[i].answer),
				      "%zu (step %zu): \"%s\" -> \"%s\" + "
				      "\"%s\"",
				      i, step, cases[i].text, r, a);
		}
	}
	ck_assert(engine_chat_opens_thinking("x<think>\n", 9));
	ck_assert(!engine_chat_opens_thinking("<think>\n\n</think>\n\n", 20));
	ck_assert(!engine_chat_opens_thinking("", 0));
}
END_TEST

static void chat_tests(TCase *tc)
{
	tcase_add_test(tc, test_chat_detects_families);
	tcase_add_test(tc, test_chat_names_and_none);
	tcase_add_test(tc, test_chat_apply_chatml);
	tcase_add_test(tc, test_chat_apply_llama2);
	tcase_add_test(tc, test_chat_apply_llama3);
	tcase_add_test(tc, test_chat_apply_raw);
	tcase_add_test(tc, test_chat_builtin_conversations);
	tcase_add_test(tc, test_chat_jinja_conversations);
	tcase_add_test(tc, test_chat_jinja_variables);
	tcase_add_test(tc, test_chat_bad_templates);
	tcase_add_test(tc, test_chat_system);
	tcase_add_test(tc, test_chat_think_split);
}

const struct check_main check_main = {
	.name = "chat",
	.add_tests = chat_tests,
};
