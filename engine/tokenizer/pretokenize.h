/* SPDX-License-Identifier: MIT */
/*
 * The pre-tokenizer table (pretokenize_defs.c) for pretokenize.c: for each
 * tokenizer.ggml.pre name, llama.cpp's regexes and settings.
 */
#ifndef LLMFS_ENGINE_PRETOKENIZE_H
#define LLMFS_ENGINE_PRETOKENIZE_H

#include <stdbool.h>
#include <stddef.h>

#define PRETOK_MAX_STEPS 6

/*
 * The patterns as llama.cpp's llm_tokenizer_bpe lists them. clang-format 14
 * does not settle on these lines (each run moves the backslash again).
 */
// clang-format off
#define RE_GPT2 \
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS \
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3 \
	RE_CONTRACTIONS \
	"|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35 \
	RE_CONTRACTIONS \
	"|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 \
	RE_CONTRACTIONS \
	"|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
// clang-format on

struct pretok_def {
	const char *const *names; /* NULL-terminated */
	const char *regex[PRETOK_MAX_STEPS];
	bool clean_spaces, ignore_merges, add_bos, no_bos;
};

extern const struct pretok_def pretok_defs[];
extern const size_t pretok_n_defs;

#endif
