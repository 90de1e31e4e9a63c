/* SPDX-License-Identifier: MIT */
/*
 * Code points as llama.cpp's tokenizers see them: its UTF-8 decoder (which
 * turns each undecodable byte into U+FFFD and moves on by one byte), its
 * character classes (Unicode 15.1 general categories plus a fixed set of
 * white space), and GPT-2's byte <-> printable code point table.
 * Internal to engine/tokenizer*.c and engine/tokenizer/pretokenize.c.
 */
#ifndef LLMFS_ENGINE_UNICODE_H
#define LLMFS_ENGINE_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum uni_class {
	UNI_UNDEFINED = 0x01, /* Cn: unassigned */
	UNI_NUMBER = 0x02,    /* \p{N} */
	UNI_LETTER = 0x04,    /* \p{L} */
	UNI_SEPARATOR = 0x08, /* \p{Z} */
	UNI_MARK = 0x10,      /* \p{M} */
	UNI_PUNCT = 0x20,     /* \p{P} */
	UNI_SYMBOL = 0x40,    /* \p{S} */
	UNI_CONTROL = 0x80,   /* \p{C} without Cn */
	UNI_CLASS_MASK = 0xff,
	UNI_SPACE = 0x100, /* llama.cpp's \s set */
};

struct uni_range {
	uint32_t first; /* the class holds up to the next range's first */
	uint8_t cls;
};

extern const struct uni_range uni_ranges[];
extern const unsigned uni_n_ranges;

#define UNI_REPLACEMENT 0xFFFDu

/*
 * Decode one code point at s[0..n) (n >= 1) as llama.cpp does: lead byte
 * length, continuation bytes checked, no overlong or surrogate check.
 * A byte that starts nothing valid gives U+FFFD and *len = 1.
 */
uint32_t uni_decode(const uint8_t *s, size_t n, size_t *len);

/* UTF-8 of cp into out[4]; returns the length (U+FFFD above U+10FFFF). */
size_t uni_encode(uint32_t cp, char *out);

/* Class bits of cp (enum uni_class); 0 is never returned. */
uint16_t uni_flags(uint32_t cp);

/*
 * Decode a whole string into *cps (malloc'ed, n code points); -ENOMEM.
 */
int uni_decode_all(const char *s, size_t n, uint32_t **cps, size_t *n_cps);

/* GPT-2's bytes_to_unicode: the code point that stands for byte b. */
uint32_t uni_gpt2_byte_cp(uint8_t b);
/* The byte that code point cp stands for, or -1 if it stands for none. */
int uni_gpt2_cp_byte(uint32_t cp);

#endif
