/* SPDX-License-Identifier: MIT */
/*
 * What the GEMM kernels of every level share (gemm_*_avx512.c,
 * gemm_*_packed.c, gemm_avx2.c, gemm_scalar.c): the blocks' sizes, the
 * packed panels' layouts (gemm.h) and the packed activations' layouts
 * that act_pack writes, with the plain C that makes them
 * (gemm_layout.c): a layout is data, the same at every level.
 *
 * Activations (cpu_gemm_q4_K.act_pack, cpu_gemm_q6_K.act_pack), per
 * superblock ib at ib * Q4K_ACT (Q6K_ACT): the 256 int8 quants as Q8_K
 * holds them, then for Q4_K the four bsum pair sums as int16 pairs
 * (bsum[4k] + bsum[4k + 1], bsum[4k + 2] + bsum[4k + 3]), for Q6_K the
 * sixteen -32 * bsum[g] as int32; after all nb superblocks, the float d
 * of each (at nb * Q4K_ACT + 4 ib).
 */
#ifndef LLMFS_ENGINE_CPU_GEMM_K_H
#define LLMFS_ENGINE_CPU_GEMM_K_H

#include <stddef.h>
#include <stdint.h>

#define GEMM_QK 256
#define GEMM_Q4K_BLOCK 144
#define GEMM_Q6K_BLOCK 210
#define GEMM_Q8K_BLOCK 292
#define GEMM_UNIT 64

/* bytes of one superblock of a packed activation row (d at the end) */
#define Q4K_ACT 272 /* qs[256], uint32 bsum pairs[4] */
#define Q6K_ACT 320 /* qs[256], int32 -32 bsum[16] */

/* the packed panels' units of a superblock (gemm.h) */
#define Q4K_PACKED_UNITS 36
#define Q6K_PACKED_UNITS 52

/* Q4_K packed: bytes of a superblock of 16 rows; its units */
#define Q4KP_SB (Q4K_PACKED_UNITS * GEMM_UNIT)
#define Q4KP_QS_UNITS 32 /* the qs dwords */
#define Q4KP_D 32	 /* d | dmin << 16 */
#define Q4KP_SC 33	 /* the 12 scale bytes, three units */

/* Q6_K packed: a superblock's units; the d's (32 bytes) follow all */
#define Q6KP_SB (Q6K_PACKED_UNITS * GEMM_UNIT)
#define Q6KP_D_BYTES (16 * 2)
#define Q6KP_QH 32 /* ql dwords from 0, qh from 32, scales from 48 */
#define Q6KP_SC 48
#define Q6KP_D_OFF (Q6K_PACKED_UNITS * 4) /* d's byte in a block_q6_K */

/*
 * Q8_0 packed: per 32-element block of the 16 rows, 8 units (unit j:
 * qs dword j of each row, as the file has it, signed); after all nb
 * blocks' units, the d's, 32 bytes a block (row r's fp16 at 2r). Exactly
 * the 16 rows' 34 * nb bytes each.
 */
#define GEMM_Q80_BLOCK 34
#define Q80P_SB (8 * GEMM_UNIT)
#define Q80P_D_BYTES (16 * 2)

/* the layouts move dwords (and the d's) only: as large as the rows */
_Static_assert(Q4KP_SB == 16 * GEMM_Q4K_BLOCK,
	       "a packed Q4_K superblock is its 16 blocks' bytes");
_Static_assert(Q6KP_SB + Q6KP_D_BYTES == 16 * GEMM_Q6K_BLOCK,
	       "a packed Q6_K superblock is its 16 blocks' bytes");
_Static_assert(Q80P_SB + Q80P_D_BYTES == 16 * GEMM_Q80_BLOCK,
	       "a packed Q8_0 block is its 16 blocks' bytes");

/*
 * The packed layouts (struct cpu_gemm_packed's pack and unpack_row):
 * rows and panel must not overlap (a packed superblock takes a block of
 * every row); packing in place goes through a copy of the 16 rows.
 */
void cpu_q4k_pack(int64_t n, const void *rows, size_t row_bytes, void *panel);
void cpu_q4k_unpack_row(int64_t n, const void *panel, int r, void *row);
void cpu_q6k_pack(int64_t n, const void *rows, size_t row_bytes, void *panel);
void cpu_q6k_unpack_row(int64_t n, const void *panel, int r, void *row);
void cpu_q80_pack(int64_t n, const void *rows, size_t row_bytes, void *panel);
void cpu_q80_unpack_row(int64_t n, const void *panel, int r, void *row);

/*
 * The K-quants' packed activations (the AVX-512 and AVX2 levels' act
 * form, see the top): bytes of one token, and one Q8_K row into it.
 */
size_t cpu_q4k_act_bytes(int64_t n);
void cpu_q4k_act_pack(int64_t n, const void *a, void *dst);
size_t cpu_q6k_act_bytes(int64_t n);
void cpu_q6k_act_pack(int64_t n, const void *a, void *dst);

/*
 * Q8_0's packed activations, per token: the n signed quants as they are,
 * then the nb block scales as floats, then each block's -128 * sum(a)
 * (int32), then each four quants' -128 * sum (int32, n / 4 of them: the
 * one-token order's lanes). 64-aligned.
 */
size_t cpu_q80_act_bytes(int64_t n);
void cpu_q80_act_pack(int64_t n, const void *a, void *dst);

#endif
