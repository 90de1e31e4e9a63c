/* SPDX-License-Identifier: MIT */
/*
 * What the K-quant GEMM kernels share (gemm_k_avx512.c and the packed
 * kernels gemm_q4k_packed.c, gemm_q6k_packed.c): the superblock's sizes
 * and the packed activations' layout that act_pack writes.
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

#endif
