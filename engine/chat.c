// SPDX-License-Identifier: MIT
/*
 * chat: one user message wrapped in the model's chat template.
 *
 * We do not run the Jinja template stored in tokenizer.chat_template; like
 * llama.cpp's llama_chat_apply_template() we recognise the family from
 * marker strings (llm_chat_detect_template in src/llama-chat.cpp, same
 * checks in the same order) and write that family's format by hand
 * (llm_chat_apply_template). Families llama.cpp knows but we do not
 * implement come out as ENGINE_CHAT_RAW, as do unknown templates; the
 * caller then uses the text as it is and warns.
 *
 * A model without a template gets ChatML, as in llama.cpp (a NULL template
 * is read as "chatml" there, and common_chat_templates_init falls back to
 * ChatML too).
 *
 * For "hi" the formats give:
 *   ChatML  <|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n
 *   llama2  [INST] hi [/INST]
 *   llama3  <|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>
 *           <|start_header_id|>assistant<|end_header_id|>\n\n
 * BOS is not written: tokenization adds it when the vocabulary asks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* How a detected template wants the message. */
struct chat_style {
	enum engine_chat_format format;
	bool strip; /* llama2 variant that trims the message */
};

static bool chat_has(const char *t, const char *needle)
{
	return strstr(t, needle) != NULL;
}

static bool chat_has2(const char *t, const char *a, const char *b)
{
	return strstr(t, a) && strstr(t, b);
}

/* llama.cpp's template names (llm_chat_template_from_str, LLM_CHAT_TEMPLATES). */
static bool chat_style_by_name(const char *t, struct chat_style *st)
{
	static const struct {
		const char *name;
		enum engine_chat_format format;
		bool strip;
	} names[] = {
		{ "chatml", ENGINE_CHAT_CHATML, false },
		{ "llama2", ENGINE_CHAT_LLAMA2, false },
		{ "llama2-sys", ENGINE_CHAT_LLAMA2, false },
		{ "llama2-sys-bos", ENGINE_CHAT_LLAMA2, false },
		{ "llama2-sys-strip", ENGINE_CHAT_LLAMA2, true },
		{ "llama3", ENGINE_CHAT_LLAMA3, false },
	};
	/* the rest of llama.cpp's names: known there, RAW here */
	static const char *const others[] = {
		"mistral-v1",
		"mistral-v3",
		"mistral-v3-tekken",
		"mistral-v7",
		"mistral-v7-tekken",
		"phi3",
		"phi4",
		"falcon3",
		"zephyr",
		"monarch",
		"gemma",
		"orion",
		"openchat",
		"vicuna",
		"vicuna-orca",
		"deepseek",
		"deepseek2",
		"deepseek3",
		"deepseek-ocr",
		"command-r",
		"chatglm3",
		"chatglm4",
		"glmedge",
		"minicpm",
		"exaone3",
		"exaone4",
		"exaone-moe",
		"rwkv-world",
		"granite",
		"granite-4.0",
		"granite-4.1",
		"gigachat",
		"megrez",
		"yandex",
		"bailing",
		"bailing-think",
		"bailing2",
		"llama4",
		"smolvlm",
		"hunyuan-moe",
		"gpt-oss",
		"hunyuan-dense",
		"hunyuan-vl",
		"kimi-k2",
		"seed_oss",
		"grok-2",
		"pangu-embedded",
		"solar-open",
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(t, names[i].name) == 0) {
			st->format = names[i].format;
			st->strip = names[i].strip;
			return true;
		}
	}
	for (i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		if (strcmp(t, others[i]) == 0) {
			st->format = ENGINE_CHAT_RAW;
			return true;
		}
	}
	return false;
}

/*
 * The checks of llm_chat_detect_template up to its Llama 3 case, in its
 * order: a template another family claims first must not become ours.
 */
static struct chat_style chat_style_detect(const char *t)
{
	struct chat_style st = { ENGINE_CHAT_RAW, false };

	if (!t)
		t = "chatml";
	if (chat_style_by_name(t, &st))
		return st;
	if (chat_has(t, "<|im_start|>")) {
		/* Phi-4 and SmolVLM use <|im_start|> but are not ChatML */
		if (!chat_has(t, "<|im_sep|>") &&
		    !chat_has(t, "<end_of_utterance>"))
			st.format = ENGINE_CHAT_CHATML;
		return st;
	}
	if (strncmp(t, "mistral", 7) == 0 || chat_has(t, "[INST]")) {
		/* Mistral v1/v3/v7 put spaces and turns differently */
		if (chat_has(t, "[SYSTEM_PROMPT]") ||
		    chat_has(t, "' [INST] ' + system_message") ||
		    chat_has(t, "[AVAILABLE_TOOLS]"))
			return st;
		/*
		 * llama2, llama2-sys and llama2-sys-bos write one user message
		 * the same way; the strip variant trims it.
		 */
		st.format = ENGINE_CHAT_LLAMA2;
		st.strip = chat_has(t, "content.strip()");
		return st;
	}
	if (chat_has2(t, "<|assistant|>", "<|end|>") ||
	    chat_has(t, "[gMASK]<sop>") ||
	    chat_has2(t, "<|assistant|>", "<|user|>") ||
	    chat_has2(t, "<|{{ item['role'] }}|>", "<|begin_of_image|>") ||
	    chat_has2(t, "<|user|>", "<|endoftext|>") ||
	    chat_has(t, "bos_token + message['role']") ||
	    chat_has(t, "<start_of_turn>") ||
	    chat_has(t, "'\\n\\nAssistant: ' + eos_token") ||
	    chat_has(t, "GPT4 Correct ") ||
	    chat_has2(t, "USER: ", "ASSISTANT: ") ||
	    chat_has2(t, "### Instruction:", "<|EOT|>") ||
	    chat_has2(t, "<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"))
		return st;
	if (chat_has2(t, "<|start_header_id|>", "<|end_header_id|>"))
		st.format = ENGINE_CHAT_LLAMA3;
	return st;
}

enum engine_chat_format engine_chat_template_format(const char *tmpl)
{
	return chat_style_detect(tmpl).format;
}

enum engine_chat_format engine_chat_format(const struct engine_model *m)
{
	return engine_chat_template_format(engine_model_info(m)->chat_template);
}

/* llama.cpp's trim(): isspace() in the C locale, both ends. */
static void chat_trim(const char **s, size_t *len)
{
	static const char space[] = " \t\n\v\f\r";

	while (*len && memchr(space, (*s)[0], sizeof(space) - 1)) {
		(*s)++;
		(*len)--;
	}
	while (*len && memchr(space, (*s)[*len - 1], sizeof(space) - 1))
		(*len)--;
}

int engine_chat_template_apply(const char *tmpl, const char *user, size_t len,
			       char **out, size_t *out_len, struct err *err)
{
	struct chat_style st = chat_style_detect(tmpl);
	const char *pre = "", *post = "";
	size_t n_pre, n_post;
	char *s;

	*out = NULL;
	switch (st.format) {
	case ENGINE_CHAT_CHATML:
		pre = "<|im_start|>user\n";
		post = "<|im_end|>\n<|im_start|>assistant\n";
		break;
	case ENGINE_CHAT_LLAMA2:
		pre = "[INST] ";
		post = " [/INST]";
		if (st.strip)
			chat_trim(&user, &len);
		break;
	case ENGINE_CHAT_LLAMA3:
		pre = "<|start_header_id|>user<|end_header_id|>\n\n";
		post = "<|eot_id|><|start_header_id|>assistant"
		       "<|end_header_id|>\n\n";
		chat_trim(&user, &len);
		break;
	case ENGINE_CHAT_RAW: break;
	}
	n_pre = strlen(pre);
	n_post = strlen(post);
	if (len > SIZE_MAX - n_pre - n_post - 1)
		return err_set(err, EOVERFLOW, "chat: message too long");
	s = malloc(n_pre + len + n_post + 1);
	if (!s)
		return err_set(err, ENOMEM, "chat: out of memory for %zu bytes",
			       len);
	memcpy(s, pre, n_pre);
	if (len)
		memcpy(s + n_pre, user, len);
	memcpy(s + n_pre + len, post, n_post);
	s[n_pre + len + n_post] = '\0';
	*out = s;
	if (out_len)
		*out_len = n_pre + len + n_post;
	return 0;
}

/*
 * Does the template take a system message in <<SYS>> (llama.cpp's
 * llama2-sys variants), or only as the first line of the first turn?
 */
static bool chat_llama2_sys(const char *tmpl)
{
	return strcmp(tmpl, "llama2") &&
	       (!strncmp(tmpl, "llama2-sys", 10) || chat_has(tmpl, "<<SYS>>"));
}

/*
 * A system message, then one user message, as llm_chat_apply_template
 * writes the pair: ChatML and Llama 3 put a system turn first, Llama 2
 * puts it inside the first [INST]. RAW (no known template) leaves it out.
 */
int engine_chat_template_apply_system(const char *tmpl, const char *system,
				      const char *user, size_t len, char **out,
				      size_t *out_len, struct err *err)
{
	struct chat_style st = chat_style_detect(tmpl);
	size_t n_user, n_sys = system ? strlen(system) : 0, n_pre, n;
	const char *sys = system;
	char pre[64], *turn, *s;
	int rc;

	*out = NULL;
	rc = engine_chat_template_apply(tmpl, user, len, &turn, &n_user, err);
	if (rc || !n_sys || st.format == ENGINE_CHAT_RAW) {
		*out = turn;
		if (!rc && out_len)
			*out_len = n_user;
		return rc;
	}
	if (st.format == ENGINE_CHAT_LLAMA3 || st.strip)
		chat_trim(&sys, &n_sys);
	n_pre = 0;
	switch (st.format) {
	case ENGINE_CHAT_CHATML:
		n_pre = snprintf(pre, sizeof(pre), "<|im_start|>system\n");
		break;
	case ENGINE_CHAT_LLAMA3:
		n_pre = snprintf(
			pre, sizeof(pre),
			"<|start_header_id|>system<|end_header_id|>\n\n");
		break;
	default: /* LLAMA2: the turn's "[INST] " comes first */
		n_pre = snprintf(
			pre, sizeof(pre), "[INST] %s",
			chat_llama2_sys(tmpl ? tmpl : "") ? "<<SYS>>\n" : "");
		break;
	}
	if (n_sys > SIZE_MAX / 2 - n_user - 64) {
		free(turn);
		return err_set(err, EOVERFLOW, "chat: system message too long");
	}
	s = malloc(n_pre + n_sys + n_user + 64);
	if (!s) {
		free(turn);
		return err_set(err, ENOMEM, "chat: out of memory");
	}
	memcpy(s, pre, n_pre);
	memcpy(s + n_pre, sys, n_sys);
	n = n_pre + n_sys;
	if (st.format == ENGINE_CHAT_CHATML) {
		memcpy(s + n, "<|im_end|>\n", 11);
		memcpy(s + n + 11, turn, n_user);
		n += 11 + n_user;
	} else if (st.format == ENGINE_CHAT_LLAMA3) {
		memcpy(s + n, "<|eot_id|>", 10);
		memcpy(s + n + 10, turn, n_user);
		n += 10 + n_user;
	} else {
		const char *end = chat_llama2_sys(tmpl ? tmpl : "") ?
					  "\n<</SYS>>\n\n" :
					  "\n";

		memcpy(s + n, end, strlen(end));
		n += strlen(end);
		/* the user turn without its own "[INST] " */
		memcpy(s + n, turn + 7, n_user - 7);
		n += n_user - 7;
	}
	s[n] = '\0';
	free(turn);
	*out = s;
	if (out_len)
		*out_len = n;
	return 0;
}

int engine_chat_apply(const struct engine_model *m, const char *user,
		      size_t len, char **out, struct err *err)
{
	return engine_chat_template_apply(engine_model_info(m)->chat_template,
					  user, len, out, NULL, err);
}

const char *engine_chat_turn_end(const struct engine_model *m)
{
	switch (engine_chat_format(m)) {
	case ENGINE_CHAT_CHATML: return "<|im_end|>\n";
	case ENGINE_CHAT_LLAMA2: return "</s>";
	case ENGINE_CHAT_LLAMA3: return "<|eot_id|>";
	default: return "";
	}
}
