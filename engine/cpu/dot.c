// SPDX-License-Identifier: MIT
/*
 * Which dot kernel the CPU runs for a weight type (dot.h): the kernel of
 * the CPU's level (isa.h) with the bits of the type table's scalar one
 * (engine/quant's quant_traits(): the reference build's order, the
 * repacked gemv where llama.cpp would run one). Also the tiles of the
 * batched matmul and the activations they take.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "../quant/quant_internal.h"
#include "cpu.h"
#include "dot.h"
#include "isa.h"

/* NAN, as ggml's missing kernel would be: for types with no dot */
static float dot_none(int64_t n, const void *w, const void *a)
{
	return NAN;
}

/*
 * The kernel of a weight type at the CPU's level: the repacked gemv where
 * llama.cpp would run one, else the plain dot. Once per matmul, not per
 * block.
 */
quant_dot_fn dot_row_fn(uint32_t type, bool repacked)
{
	quant_dot_fn f = cpu_isa_dot(cpu_isa(), type, repacked);

	return f ? f : dot_none;
}

float dot_row(uint32_t type, int64_t n, const void *w, const void *a,
	      bool repacked)
{
	return dot_row_fn(type, repacked)(n, w, a);
}

void cpu_from_float(uint32_t type, const float *x, void *y, int64_t n)
{
	quant_from_float_fn f = cpu_isa_from_float(cpu_isa(), type);

	if (f)
		f(x, y, n / quant_blck_size(type));
}

_Static_assert(DOT_TILE_TOKENS == CPU_TILE_TOKENS, "one tile width");
_Static_assert(DOT_TILE_ROWS == CPU_TILE_ROWS, "one tile height");

/* the tile of (type, repacked) at the CPU's level, or NULL */
static quant_tile_fn dot_tile_fn(uint32_t type, bool repacked)
{
	return type < IO_TYPE_COUNT ? cpu_isa()->type[type].tile[repacked] :
				      NULL;
}

bool dot_tile_able(uint32_t type, bool repacked)
{
	return dot_tile_fn(type, repacked) != NULL;
}

bool dot_tile(uint32_t type, int64_t n, const void *w, size_t row_bytes, int nr,
	      const void *const *a, const void *packed, int nt, float *out,
	      bool repacked)
{
	quant_tile_fn tile = dot_tile_fn(type, repacked);

	if (!tile || nt < 1 || nt > DOT_TILE_TOKENS || nr < 1 ||
	    nr > DOT_TILE_ROWS)
		return false;
	tile(n, w, row_bytes, nr, a, packed, nt, out);
	return true;
}

/*
 * The activation types the tiles take, by their layout: where a block's
 * int8 quants start, and whether its scale is packed beside them.
 */
static const struct {
	uint8_t qs_offset;
	bool packs_scales;
} dot_tile_act[IO_TYPE_COUNT] = {
	/* {half d, int8 qs[32]}: the scales packed as floats */
	[IO_TYPE_Q8_0] = { 2, true },
	/* {float d, int8 qs[256], int16 bsums[16]}: kernels read d */
	[IO_TYPE_Q8_K] = { 4, false },
};

static bool dot_tile_scales(uint32_t type)
{
	const uint32_t at = quant_vec_dot_type(type);

	return at < IO_TYPE_COUNT && dot_tile_act[at].packs_scales;
}

/* Bytes of one pair: Q8_0 adds its block scales as 16 floats a block. */
static size_t dot_tile_pair_bytes(uint32_t type, int64_t n)
{
	return (size_t)n * (dot_tile_scales(type) ? 4 : 2);
}

size_t dot_tile_pack_bytes(uint32_t type, int64_t n, uint32_t nt)
{
	return dot_tile_pair_bytes(type, n) * ((nt + 1) / 2);
}

const void *dot_tile_packed_at(uint32_t type, int64_t n, const void *packed,
			       uint32_t t)
{
	return (const uint8_t *)packed + dot_tile_pair_bytes(type, n) * (t / 2);
}

static float dot_h2f(const uint8_t *p)
{
	uint16_t h;

	memcpy(&h, p, sizeof(h));
	return quant_h2f(h);
}

void dot_tile_pack(uint32_t type, int64_t n, const void *const *a, uint32_t nt,
		   void *dst)
{
	const uint32_t at_type = quant_vec_dot_type(type);
	const bool scales = dot_tile_scales(type);
	const size_t per = quant_type_size(at_type);
	const size_t at = at_type < IO_TYPE_COUNT ?
				  dot_tile_act[at_type].qs_offset :
				  0;
	const int64_t elems = quant_blck_size(at_type);
	uint8_t *o = dst;
	float *f;
	uint32_t p;
	int64_t k;
	int l;

	for (p = 0; 2 * p < nt; p++) {
		const uint8_t *a0 = a[2 * p];
		const uint8_t *a1 = a[2 * p + 1 < nt ? 2 * p + 1 : 2 * p];

		f = (float *)(o + 2 * n);
		for (k = 0; k < n / 32; k++, o += 64) {
			size_t off = (size_t)(k * 32 / elems) * per + at +
				     (size_t)(k * 32 % elems);

			memcpy(o, a0 + off, 32);
			memcpy(o + 32, a1 + off, 32);
			if (!scales)
				continue;
			/* Q8_0: stored + 128, vpdpbusd's unsigned operand */
			for (l = 0; l < 64; l++)
				o[l] ^= 0x80;
			for (l = 0; l < 16; l++, f++)
				*f = dot_h2f((l < 8 ? a0 : a1) + k * per);
		}
		if (scales)
			o = (uint8_t *)f;
	}
}

float dot_f16(int64_t n, const uint16_t *x, const uint16_t *y)
{
	return cpu_isa_dot(cpu_isa(), IO_TYPE_F16, false)(n, x, y);
}
