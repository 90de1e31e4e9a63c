/* SPDX-License-Identifier: MIT */
/*
 * One weight row . one activation row on the CPU, added up in the order
 * of the reference build's kernels (libggml-cpu-zen4.so: AVX-512 float
 * dots, the AVX2 legacy-quant dots), so that the sums round as
 * llama.cpp's do: the scalar kernel of the type table (engine/quant) or
 * its AVX-512 version (traits.h), picked at run time, and the tiles of
 * the batched matmul.
 *
 * engine/quant's quant_vec_dot computes the same dot products in ggml's
 * scalar order (the portable reference); the two differ in the last bits
 * of a float, which is enough to flip a token on a near tie.
 */
#ifndef LLMFS_ENGINE_CPU_DOT_H
#define LLMFS_ENGINE_CPU_DOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../quant/quant.h"

/*
 * a is w's row of quant_vec_dot_type(type), as quant_from_float makes it.
 * repacked: llama.cpp would hold this matrix interleaved in its CPU_REPACK
 * buffer (see engine_tensor.llama_repacked) and run the gemv kernel instead.
 */
float dot_row(uint32_t type, int64_t n, const void *w, const void *a,
	      bool repacked);
/*
 * The kernel dot_row runs for (type, repacked), the CPU's level's
 * (isa.h): fetch it once per matmul and call it per row. For a type
 * without a dot it returns NAN.
 */
quant_dot_fn dot_row_fn(uint32_t type, bool repacked);

/*
 * out[DOT_TILE_TOKENS r + t] = dot_row(type, n, w + row_bytes r, a[t],
 * repacked) for r < nr (at most DOT_TILE_ROWS) and t < nt (at most
 * DOT_TILE_TOKENS), bit for bit, with w's blocks read and unpacked once
 * for all nt tokens. packed: the same nt rows as dot_tile_pack made them.
 * Returns false, computing nothing, where the type has no such kernel on
 * this CPU (the caller then calls dot_row per token): dot_tile_able.
 */
#define DOT_TILE_TOKENS 8
#define DOT_TILE_ROWS 4
bool dot_tile_able(uint32_t type, bool repacked);
bool dot_tile(uint32_t type, int64_t n, const void *w, size_t row_bytes, int nr,
	      const void *const *a, const void *packed, int nt, float *out,
	      bool repacked);
/*
 * The int8 quants of the nt activation rows a[t] (w's vec_dot type) in
 * the kernels' order, pair by pair (2 n bytes, for Q8_0 stored + 128 and
 * followed by the pair's block scales as floats, 16 a block): dot_tile_pack_bytes(type,
 * n, nt) bytes at dst (64-aligned). Once per matmul, not per row; the
 * tile of tokens t.. (t even) is at dot_tile_packed_at(type, n, dst, t).
 */
size_t dot_tile_pack_bytes(uint32_t type, int64_t n, uint32_t nt);
const void *dot_tile_packed_at(uint32_t type, int64_t n, const void *packed,
			       uint32_t t);
void dot_tile_pack(uint32_t type, int64_t n, const void *const *a, uint32_t nt,
		   void *dst);

/* ggml_vec_dot_f16 on two F16 vectors (flash attention's K . Q). */
float dot_f16(int64_t n, const uint16_t *x, const uint16_t *y);

/*
 * Convert n floats to type (quant_from_float's bits) with the quantizer
 * of the CPU's level (isa.h).
 */
void cpu_from_float(uint32_t type, const float *x, void *y, int64_t n);

#endif
