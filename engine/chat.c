// SPDX-License-Identifier: MIT
/*
 * chat: a conversation (system, user, assistant... messages) as the text
 * the model was trained on.
 *
 * The model's own template first: tokenizer.chat_template is Jinja, run
 * by engine/template/ as llama.cpp's common_chat_templates_apply does
 * with --jinja: messages, add_generation_prompt (only when true),
 * bos_token and eos_token (the tokens' text), enable_thinking; a BOS the
 * tokenizer adds anyway is cut from the front of the text, an EOS it
 * adds from the end.
 *
 * Three built-in formats remain for files whose template is missing or
 * does not parse, recognised like llama.cpp's llama_chat_apply_template
 * (llm_chat_detect_template in src/llama-chat.cpp: same checks, same
 * order) and written as its llm_chat_apply_template writes them:
 *
 *   ChatML  <|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n
 *   llama2  [INST] hi [/INST]   (and its <<SYS>>, BOS and strip variants)
 *   llama3  <|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>
 *           <|start_header_id|>assistant<|end_header_id|>\n\n
 *
 * A model without a template gets ChatML, as in llama.cpp (a NULL
 * template is "chatml" there). Any other template that does not parse is
 * RAW: the messages' text as it is, and the caller warns.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"

/* How a detected template wants the messages. */
struct chat_style {
	enum engine_chat_format format;
	bool strip;	     /* llama2: trim each message */
	bool system;	     /* llama2: <<SYS>> for a system message */
	bool bos_in_history; /* llama2: <s> before each later [INST] */
};

struct engine_chat {
	struct engine_template *jinja; /* NULL: the built-in style */
	struct chat_style style;
	char *bos, *eos; /* the tokens' text, "" if none */
	bool add_bos, add_eos;
	/* the template shows a system message (else it joins the next one) */
	bool system;
	char notice[400]; /* why the model's template is not used, or "" */
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
		struct chat_style style;
	} names[] = {
		{ "chatml", { ENGINE_CHAT_CHATML, false, false, false } },
		{ "llama2", { ENGINE_CHAT_LLAMA2, false, false, false } },
		{ "llama2-sys", { ENGINE_CHAT_LLAMA2, false, true, false } },
		{ "llama2-sys-bos", { ENGINE_CHAT_LLAMA2, false, true, true } },
		{ "llama2-sys-strip",
		  { ENGINE_CHAT_LLAMA2, true, true, false } },
		{ "llama3", { ENGINE_CHAT_LLAMA3, false, false, false } },
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
			*st = names[i].style;
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
	struct chat_style st = { ENGINE_CHAT_RAW, false, false, false };

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
		st.format = ENGINE_CHAT_LLAMA2;
		st.strip = chat_has(t, "content.strip()");
		st.bos_in_history = !st.strip &&
				    chat_has(t, "bos_token + '[INST]");
		st.system = st.strip || st.bos_in_history ||
			    chat_has(t, "<<SYS>>");
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

/* ---- the object -------------------------------------------------------- */

static bool chat_is_name(const char *t)
{
	struct chat_style st;

	return chat_style_by_name(t, &st);
}

static int chat_render_jinja(const struct engine_chat *c,
			     const struct engine_chat_message *msg, size_t n,
			     const struct engine_chat_render *o, char **out,
			     size_t *out_len, struct err *err);

/*
 * Does the template write a system message? As llama.cpp's capability
 * probe (common/jinja/caps.cpp): render one and look for its text. One
 * that refuses it (Gemma's "System role not supported") gets its system
 * message joined to the next one, as llama.cpp's workaround does.
 */
static bool chat_probe_system(const struct engine_chat *c)
{
	static const char mark[] = "llmfs-system-probe-7e1f";
	const struct engine_chat_message msg[] = {
		{ "system", mark, NULL },
		{ "user", "User message", NULL },
	};
	struct engine_chat_render o = { true, ENGINE_THINK_ON };
	struct err err = { 0 };
	bool used = false;
	char *s = NULL;

	if (!chat_render_jinja(c, msg, 2, &o, &s, NULL, &err))
		used = strstr(s, mark) != NULL;
	free(s);
	return used;
}

int engine_chat_new(struct engine_chat **out, const char *tmpl,
		    const struct engine_chat_tokens *tokens, struct err *err)
{
	struct engine_chat *c;
	struct err perr = { 0 };
	int rc;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(err, ENOMEM, "chat: out of memory");
	c->bos = strdup(tokens && tokens->bos ? tokens->bos : "");
	c->eos = strdup(tokens && tokens->eos ? tokens->eos : "");
	if (!c->bos || !c->eos) {
		engine_chat_free(c);
		return err_set(err, ENOMEM, "chat: out of memory");
	}
	c->add_bos = tokens && tokens->add_bos;
	c->add_eos = tokens && tokens->add_eos;
	c->style = chat_style_detect(tmpl);
	if (tmpl && !chat_is_name(tmpl)) {
		rc = engine_template_parse(&c->jinja, tmpl, strlen(tmpl),
					   &perr);
		if (rc == -ENOMEM) {
			engine_chat_free(c);
			return err_set(err, ENOMEM, "chat: out of memory");
		}
		if (rc)
			snprintf(c->notice, sizeof(c->notice),
				 "the model's chat template does not parse "
				 "(%.300s); using %s",
				 perr.msg,
				 engine_chat_format_name(c->style.format));
		else
			c->system = chat_probe_system(c);
	}
	*out = c;
	return 0;
}

/* The text of token id with its special text, "" for none (-1). */
static char *chat_token_text(const struct engine_vocab *v, int32_t id)
{
	size_t n;
	char *s;

	if (id < 0)
		return strdup("");
	n = engine_vocab_piece(v, id, false, true, NULL, 0);
	s = malloc(n + 1);
	if (!s)
		return NULL;
	engine_vocab_piece(v, id, false, true, s, n);
	s[n] = '\0';
	return s;
}

int engine_chat_for_model(struct engine_chat **out,
			  const struct engine_model *m, struct err *err)
{
	const struct engine_vocab *v = engine_model_vocab(m);
	struct engine_chat_tokens tok = {
		.add_bos = engine_vocab_add_bos(v),
		.add_eos = engine_vocab_add_eos(v),
	};
	char *bos = chat_token_text(v, engine_vocab_bos(v));
	char *eos = chat_token_text(v, engine_vocab_eos(v));
	int rc;

	*out = NULL;
	if (!bos || !eos) {
		free(bos);
		free(eos);
		return err_set(err, ENOMEM, "chat: out of memory");
	}
	tok.bos = bos;
	tok.eos = eos;
	rc = engine_chat_new(out, engine_model_info(m)->chat_template, &tok,
			     err);
	free(bos);
	free(eos);
	return rc;
}

void engine_chat_free(struct engine_chat *c)
{
	if (!c)
		return;
	engine_template_free(c->jinja);
	free(c->bos);
	free(c->eos);
	free(c);
}

const char *engine_chat_format_name(enum engine_chat_format f)
{
	switch (f) {
	case ENGINE_CHAT_CHATML: return "chatml";
	case ENGINE_CHAT_LLAMA2: return "llama2";
	case ENGINE_CHAT_LLAMA3: return "llama3";
	default: return "raw";
	}
}

const char *engine_chat_kind(const struct engine_chat *c)
{
	return c->jinja ? "jinja" : engine_chat_format_name(c->style.format);
}

bool engine_chat_is_raw(const struct engine_chat *c)
{
	return !c->jinja && c->style.format == ENGINE_CHAT_RAW;
}

const char *engine_chat_notice(const struct engine_chat *c)
{
	return c->notice[0] ? c->notice : NULL;
}

/* ---- rendering --------------------------------------------------------- */

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

struct chat_buf {
	char *p;
	size_t len, cap;
	int rc;
};

static void chat_add(struct chat_buf *b, const char *s, size_t n)
{
	char *p;
	size_t cap;

	if (b->rc)
		return;
	if (n >= b->cap - b->len) {
		cap = b->cap ? b->cap : 256;
		while (cap - b->len <= n) {
			if (cap > SIZE_MAX / 2) {
				b->rc = -EOVERFLOW;
				return;
			}
			cap *= 2;
		}
		p = realloc(b->p, cap);
		if (!p) {
			b->rc = -ENOMEM;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void chat_adds(struct chat_buf *b, const char *s)
{
	chat_add(b, s, strlen(s));
}

static void chat_add_content(struct chat_buf *b,
			     const struct engine_chat_message *m, bool trim)
{
	const char *s = m->content ? m->content : "";
	size_t n = strlen(s);

	if (trim)
		chat_trim(&s, &n);
	chat_add(b, s, n);
}

/* llama.cpp's Llama 2 writer, its variants by the style's flags */
static void chat_builtin_llama2(const struct chat_style *st,
				const struct engine_chat_message *msg, size_t n,
				struct chat_buf *b)
{
	bool inside = true; /* no BOS at the very start */

	chat_adds(b, "[INST] ");
	for (size_t i = 0; i < n; i++) {
		if (!inside) {
			inside = true;
			chat_adds(b, st->bos_in_history ? "<s>[INST] " :
							  "[INST] ");
		}
		if (!strcmp(msg[i].role, "system")) {
			chat_adds(b, st->system ? "<<SYS>>\n" : "");
			chat_add_content(b, &msg[i], st->strip);
			chat_adds(b, st->system ? "\n<</SYS>>\n\n" : "\n");
		} else if (!strcmp(msg[i].role, "user")) {
			chat_add_content(b, &msg[i], st->strip);
			chat_adds(b, " [/INST]");
		} else {
			chat_add_content(b, &msg[i], st->strip);
			chat_adds(b, "</s>");
			inside = false;
		}
	}
}

static int chat_builtin(const struct engine_chat *c,
			const struct engine_chat_message *msg, size_t n,
			bool add_generation_prompt, char **out, size_t *out_len,
			struct err *err)
{
	struct chat_buf b = { 0 };
	size_t i;

	chat_add(&b, "", 0);
	switch (c->style.format) {
	case ENGINE_CHAT_CHATML:
		for (i = 0; i < n; i++) {
			chat_adds(&b, "<|im_start|>");
			chat_adds(&b, msg[i].role);
			chat_adds(&b, "\n");
			chat_add_content(&b, &msg[i], false);
			chat_adds(&b, "<|im_end|>\n");
		}
		if (add_generation_prompt)
			chat_adds(&b, "<|im_start|>assistant\n");
		break;
	case ENGINE_CHAT_LLAMA2:
		chat_builtin_llama2(&c->style, msg, n, &b);
		break;
	case ENGINE_CHAT_LLAMA3:
		for (i = 0; i < n; i++) {
			chat_adds(&b, "<|start_header_id|>");
			chat_adds(&b, msg[i].role);
			chat_adds(&b, "<|end_header_id|>\n\n");
			chat_add_content(&b, &msg[i], true);
			chat_adds(&b, "<|eot_id|>");
		}
		if (add_generation_prompt)
			chat_adds(&b, "<|start_header_id|>assistant"
				      "<|end_header_id|>\n\n");
		break;
	case ENGINE_CHAT_RAW:
		for (i = 0; i < n; i++)
			chat_add_content(&b, &msg[i], false);
		break;
	}
	if (b.rc) {
		free(b.p);
		return err_set(err, -b.rc, "chat: out of memory");
	}
	*out = b.p;
	if (out_len)
		*out_len = b.len;
	return 0;
}

/* The template's variables, as llama.cpp's common_chat_templates_apply. */
static json_t *chat_context(const struct engine_chat *c,
			    const struct engine_chat_message *msg, size_t n,
			    const struct engine_chat_render *o)
{
	json_t *ctx = json_object(), *list = json_array(), *m;
	bool ok = ctx && list;

	for (size_t i = 0; i < n && ok; i++) {
		m = json_object();
		ok = m && !json_array_append_new(list, m) &&
		     !json_object_set_new(m, "role",
					  json_string(msg[i].role)) &&
		     !json_object_set_new(
			     m, "content",
			     json_string(msg[i].content ? msg[i].content : ""));
		if (ok && msg[i].reasoning)
			ok = !json_object_set_new(
				m, "reasoning_content",
				json_string(msg[i].reasoning));
	}
	ok = ok && !json_object_set_new(ctx, "messages", list);
	list = NULL;
	ok = ok &&
	     !json_object_set_new(ctx, "bos_token", json_string(c->bos)) &&
	     !json_object_set_new(ctx, "eos_token", json_string(c->eos));
	if (ok && o->think != ENGINE_THINK_DEFAULT)
		ok = !json_object_set_new(
			ctx, "enable_thinking",
			json_boolean(o->think != ENGINE_THINK_OFF));
	if (ok && o->add_generation_prompt)
		ok = !json_object_set_new(ctx, "add_generation_prompt",
					  json_true());
	if (!ok) {
		json_decref(list);
		json_decref(ctx);
		return NULL;
	}
	return ctx;
}

static int chat_render_jinja(const struct engine_chat *c,
			     const struct engine_chat_message *msg, size_t n,
			     const struct engine_chat_render *o, char **out,
			     size_t *out_len, struct err *err)
{
	struct engine_template_options topt = { .now = -1 };
	size_t len, nb = strlen(c->bos), ne = strlen(c->eos);
	json_t *ctx = chat_context(c, msg, n, o);
	char *s;
	int rc;

	if (!ctx)
		return err_set(err, ENOMEM, "chat: out of memory");
	rc = engine_template_render(c->jinja, ctx, &topt, &s, &len, err);
	json_decref(ctx);
	if (rc)
		return rc;
	/* the tokenizer adds these itself */
	if (c->add_bos && nb && len >= nb && !memcmp(s, c->bos, nb)) {
		memmove(s, s + nb, len - nb + 1);
		len -= nb;
	}
	if (c->add_eos && ne && len >= ne &&
	    !memcmp(s + len - ne, c->eos, ne)) {
		len -= ne;
		s[len] = '\0';
	}
	*out = s;
	if (out_len)
		*out_len = len;
	return 0;
}

/* llama.cpp's system_message_not_supported: "system\nuser" as the user's */
static int chat_render_merged(const struct engine_chat *c,
			      const struct engine_chat_message *msg, size_t n,
			      const struct engine_chat_render *o, char **out,
			      size_t *out_len, struct err *err)
{
	struct engine_chat_message *m;
	const char *sys = msg[0].content ? msg[0].content : "";
	const char *next = n > 1 && msg[1].content ? msg[1].content : "";
	char *joined = NULL;
	int rc;

	if (n < 2)
		return chat_render_jinja(c, msg + 1, 0, o, out, out_len, err);
	m = malloc((n - 1) * sizeof(*m));
	joined = malloc(strlen(sys) + strlen(next) + 2);
	if (!m || !joined) {
		free(m);
		free(joined);
		return err_set(err, ENOMEM, "chat: out of memory");
	}
	sprintf(joined, "%s\n%s", sys, next);
	memcpy(m, msg + 1, (n - 1) * sizeof(*m));
	m[0].content = joined;
	rc = chat_render_jinja(c, m, n - 1, o, out, out_len, err);
	free(joined);
	free(m);
	return rc;
}

int engine_chat_render(const struct engine_chat *c,
		       const struct engine_chat_message *msg, size_t n,
		       const struct engine_chat_render *o, char **out,
		       size_t *out_len, struct err *err)
{
	struct engine_chat_render def = { .add_generation_prompt = true };

	*out = NULL;
	if (!o)
		o = &def;
	for (size_t i = 0; i < n; i++)
		if (!msg[i].role)
			return err_set(err, EINVAL,
				       "chat: a message without a "
				       "role");
	if (!c->jinja)
		return chat_builtin(c, msg, n, o->add_generation_prompt, out,
				    out_len, err);
	if (!c->system && n && !strcmp(msg[0].role, "system"))
		return chat_render_merged(c, msg, n, o, out, out_len, err);
	return chat_render_jinja(c, msg, n, o, out, out_len, err);
}

/*
 * Does the prompt leave the model inside a reasoning block? Templates of
 * thinking models (DeepSeek-R1, QwQ, Qwen3 thinking-2507) end their
 * generation prompt with "<think>\n": the answer then starts with the
 * reasoning and has only the closing tag.
 */
bool engine_chat_opens_thinking(const char *prompt, size_t len)
{
	static const char open[] = ENGINE_THINK_OPEN;
	const char *end = prompt + len;

	while (end > prompt && strchr(" \t\r\n", end[-1]))
		end--;
	return (size_t)(end - prompt) >= sizeof(open) - 1 &&
	       !memcmp(end - (sizeof(open) - 1), open, sizeof(open) - 1);
}
