/* SPDX-License-Identifier: MIT */
/*
 * The deterministic inputs of test_quant.c, shared with the program that
 * computed its expected values with libggml (quant_fixtures_gen.c), so
 * that both sides see the same floats bit for bit.
 */
#ifndef LLMFS_TESTS_QUANT_INPUTS_H
#define LLMFS_TESTS_QUANT_INPUTS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/*
 * n floats from seed: 24-bit uniform values in [-1, 1) (exact in float),
 * each block of 32 scaled by its own power of two from 2^-7 to 2^7, so that
 * blocks of very different magnitude sit side by side as in activations.
 */
static inline void quant_inputs_fill(float *x, int64_t n, uint32_t seed)
{
	uint32_t s = seed * 2654435761u + 12345u;

	for (int64_t i = 0; i < n; i++) {
		int e = (int)(((uint32_t)(i / 32) * 7u + seed) % 15u) - 7;

		s = s * 1664525u + 1013904223u;
		x[i] = ldexpf((float)((int32_t)(s >> 8) - 8388608) / 8388608.f,
			      e);
	}
}

/*
 * n floats (a multiple of 32) that put the activation quantizers on
 * rounding ties: every block of 32 starts with 127, so the scale is exactly
 * 1 (Q8_0, Q8_1) or -1 (Q8_K), and the rest are half-integers k + 0.5 of
 * both signs, where ties-to-even and ggml's roundf() part ways.
 */
static inline void quant_inputs_ties(float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		float v = (float)(i * 37 % 127) + 0.5f;

		x[i] = i % 32 == 0 ? 127.f : (i % 3 ? v : -v);
	}
}

/* FNV-1a, 64 bits, over n bytes. */
static inline uint64_t quant_inputs_hash(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#endif
