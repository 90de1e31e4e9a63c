// SPDX-License-Identifier: MIT
/*
 * Which regexes split text into words for each tokenizer.ggml.pre, as
 * llama.cpp's llm_tokenizer_bpe lists them. Data only; pretokenize.c runs
 * them.
 */
#include "pretokenize.h"

#define NAMES(...) ((const char *const[]){ __VA_ARGS__, NULL })

/*
 * The regexes are llama.cpp's llm_tokenizer_bpe lists (they come from
 * each model's tokenizer.json), with the settings llama.cpp ties to the
 * name: clean_spaces, ignore_merges, add_bos, and no BOS id for ChatGLM.
 */
const struct pretok_def pretok_defs[] = {
	{ NAMES("default"),
	  {
		  "[\\p{P}\\$\\+<=>\\^~\\|]+",
		  RE_GPT2,
		  "\\p{N}+",
		  "[0-9][0-9][0-9]",
	  },
	  true,
	  false,
	  false,
	  false },
	{ NAMES("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1",
		"pixtral", "midm-2.0", "lfm2", "jina-v5-nano"),
	  {
		  RE_LLAMA3,
	  },
	  true,
	  true,
	  true,
	  false },
	{ NAMES("dbrx"),
	  {
		  RE_LLAMA3,
	  },
	  true,
	  false,
	  false,
	  false },
	{ NAMES("smaug-bpe"),
	  {
		  RE_LLAMA3,
	  },
	  true,
	  false,
	  false,
	  false },
	{ NAMES("deepseek-llm"),
	  {
		  "[\r\n]",
		  "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽ"
		  "ͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽ"
		  "Ა-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅ"
		  "Ὀ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-"
		  "ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-"
		  "ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-"
		  "ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎ"
		  "ꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-"
		  "𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
		  "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
		  "\\s+$",
		  "[一-龥ࠀ-一가-퟿]+",
		  "\\p{N}+",
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("deepseek-coder"),
	  {
		  "[\r\n]",
		  "\\s?\\p{L}+",
		  "\\s?\\p{P}+",
		  "[一-龥ࠀ-一가-퟿]+",
		  "\\p{N}",
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("deepseek-v3", "hunyuan-dense", "hy_v4", "joyai-llm"),
	  {
		  "\\p{N}{1,3}",
		  "[一-龥぀-ゟ゠-ヿ]+",
		  "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r"
		  "\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r"
		  "\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("spark2_5"),
	  {
		  "\\p{N}{1,3}",
		  "[一-龥぀-ゟ゠-ヿ]+",
		  "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r"
		  "\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|["
		  "\r\n]|\\s+(?!\\S)|\\s+",
		  "\\p{N}",
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("youtu"),
	  {
		  "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
		  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
		  "*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'["
		  "vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p"
		  "{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p"
		  "{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'["
		  "dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+"
		  "|\\s+(?!\\S)|\\s+",
	  },
	  false,
	  true,
	  false,
	  false },
	{ NAMES("falcon"),
	  {
		  "[\\p{P}\\$\\+<=>\\^~\\|`]+",
		  RE_GPT2,
		  "[0-9][0-9][0-9]",
	  },
	  true,
	  false,
	  false,
	  false },
	{ NAMES("mpt", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat",
		"jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert",
		"olmo", "jais", "exaone4"),
	  {
		  RE_GPT2,
	  },
	  true,
	  false,
	  false,
	  false },
	{ NAMES("trillion", "granite-docling"),
	  {
		  RE_GPT2,
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("jais-2"),
	  {
		  "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|"
		  "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p"
		  "{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\"
		  "S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?"
		  "!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
	  },
	  true,
	  false,
	  false,
	  false },
	{ NAMES("starcoder", "refact", "codeshell", "exaone", "minerva-7b",
		"mellum2"),
	  {
		  "\\p{N}",
		  RE_GPT2,
	  },
	  true,
	  false,
	  false,
	  false },
	{ NAMES("command-r", "smollm"),
	  {
		  "\\p{N}",
		  RE_GPT2,
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan",
		"solar-open"),
	  {
		  RE_QWEN2,
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("qwen35"),
	  {
		  RE_QWEN35,
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("stablelm2", "megrez"),
	  {
		  RE_QWEN2,
	  },
	  true,
	  false,
	  false,
	  false },
	{ NAMES("grok-2"),
	  {
		  RE_QWEN2,
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("poro-chat"),
	  {
		  " ?[^(\\s|.,!?…。，、।۔،)]+",
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("bloom", "gpt3-finnish"),
	  {
		  " ?[^(\\s|.,!?…。，、।۔،)]+",
	  },
	  true,
	  false,
	  false,
	  false },
	{ NAMES("glm4", "chatglm-bpe"),
	  {
		  RE_LLAMA3,
	  },
	  true,
	  false,
	  false,
	  true },
	{ NAMES("viking"),
	  {
		  " ?[^(\\s|.,!?…。，、।۔،)]+",
		  "\\p{N}",
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("tekken"),
	  {
		  "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])"
		  "([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+(("
		  "?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/"
		  "]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  },
	  false,
	  true,
	  true,
	  false },
	{ NAMES("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"),
	  {
		  "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])"
		  "([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][l"
		  "L]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+(("
		  "?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'["
		  "mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\"
		  "r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("bailingmoe", "bailingmoe2", "llada-moe"),
	  {
		  "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}"
		  "\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*"
		  "[\\r\\n]|\\s+(?!\\S)|\\s+",
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("seed-coder"),
	  {
		  "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|"
		  "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N"
		  "}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("ufakzeka"),
	  {
		  "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
		  "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  },
	  false,
	  false,
	  false,
	  false },
	{ NAMES("exaone-moe"),
	  {
		  "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|"
		  "[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)"
		  "+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+"
		  "(?!\\S)|\\s+",
	  },
	  true,
	  false,
	  false,
	  false },
	{ NAMES("minicpm5"),
	  {
		  "\\p{N}{1,3}",
		  "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|"
		  "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]"
		  "+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  },
	  true,
	  true,
	  false,
	  false },
};

const size_t pretok_n_defs = sizeof(pretok_defs) / sizeof(pretok_defs[0]);
