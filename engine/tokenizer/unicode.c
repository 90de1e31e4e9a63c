// SPDX-License-Identifier: MIT
/*
 * Code point decoding and classes, faithful to llama.cpp's unicode.cpp so
 * that the pre-tokenizers split text where it does (see unicode.h).
 */
#include "unicode.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

uint32_t uni_decode(const uint8_t *s, size_t n, size_t *len)
{
	uint8_t c = s[0];

	*len = 1;
	if (c < 0x80)
		return c;
	if (!(c & 0x40)) /* a stray continuation byte */
		return UNI_REPLACEMENT;
	if (!(c & 0x20)) {
		if (n < 2 || (s[1] & 0xc0) != 0x80)
			return UNI_REPLACEMENT;
		*len = 2;
		return ((uint32_t)(c & 0x1f) << 6) | (s[1] & 0x3f);
	}
	if (!(c & 0x10)) {
		if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
			return UNI_REPLACEMENT;
		*len = 3;
		return ((uint32_t)(c & 0x0f) << 12) |
		       ((uint32_t)(s[1] & 0x3f) << 6) | (s[2] & 0x3f);
	}
	if (!(c & 0x08)) {
		if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 ||
		    (s[3] & 0xc0) != 0x80)
			return UNI_REPLACEMENT;
		*len = 4;
		return ((uint32_t)(c & 0x07) << 18) |
		       ((uint32_t)(s[1] & 0x3f) << 12) |
		       ((uint32_t)(s[2] & 0x3f) << 6) | (s[3] & 0x3f);
	}
	return UNI_REPLACEMENT;
}

size_t uni_encode(uint32_t cp, char *out)
{
	if (cp <= 0x7f) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp <= 0x7ff) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp > 0x10ffff)
		cp = UNI_REPLACEMENT; /* llama.cpp throws; we do not */
	if (cp <= 0xffff) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static bool uni_is_space(uint32_t cp)
{
	if ((cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 ||
	    cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
	    cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
	    cp == 0x3000)
		return true;
	return false;
}

static uint8_t uni_class_of(uint32_t cp)
{
	unsigned lo = 0, hi = uni_n_ranges;

	if (cp > 0x10ffff)
		return UNI_UNDEFINED;
	/* last range whose first <= cp */
	while (hi - lo > 1) {
		unsigned mid = lo + (hi - lo) / 2;

		if (uni_ranges[mid].first <= cp)
			lo = mid;
		else
			hi = mid;
	}
	return uni_ranges[lo].cls;
}

uint16_t uni_flags(uint32_t cp)
{
	uint16_t f = uni_class_of(cp);

	if (uni_is_space(cp))
		f |= UNI_SPACE;
	return f;
}

int uni_decode_all(const char *s, size_t n, uint32_t **cps, size_t *n_cps)
{
	const uint8_t *u = (const uint8_t *)s;
	uint32_t *out = malloc((n ? n : 1) * sizeof(*out));
	size_t i = 0, k = 0;

	if (!out)
		return -ENOMEM;
	while (i < n) {
		size_t len;

		out[k++] = uni_decode(u + i, n - i, &len);
		i += len;
	}
	*cps = out;
	*n_cps = k;
	return 0;
}

/*
 * GPT-2 maps the printable bytes ! .. ~, ¡ .. ¬ and ® .. ÿ to themselves
 * and the other 68 bytes, in order, to U+0100 onwards.
 */
static bool gpt2_printable(unsigned b)
{
	return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) ||
	       (b >= 0xae && b <= 0xff);
}

uint32_t uni_gpt2_byte_cp(uint8_t b)
{
	unsigned n = 0;

	if (gpt2_printable(b))
		return b;
	for (unsigned c = 0; c < b; c++)
		if (!gpt2_printable(c))
			n++;
	return 256 + n;
}

int uni_gpt2_cp_byte(uint32_t cp)
{
	unsigned n = 0;

	if (cp < 256)
		return gpt2_printable(cp) ? (int)cp : -1;
	if (cp >= 256 + 68)
		return -1;
	for (unsigned c = 0; c < 256; c++) {
		if (gpt2_printable(c))
			continue;
		if (n == cp - 256)
			return (int)c;
		n++;
	}
	return -1;
}
