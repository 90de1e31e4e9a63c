// SPDX-License-Identifier: MIT
/*
 * The KV cache in VRAM: where a position's K and V rows are.
 *
 * The cache is paged as the CPU's (engine/kv.h): blocks of
 * CUDA_KV_BLOCK positions from one pool, each holding, layer after
 * layer, the K rows of its positions and then their V rows; a sequence
 * is a row of block ids (struct cuda_kv's tables), so sequences grow,
 * share nothing and are freed block by block, and a block's bytes are
 * the CPU's for the same types. The engine's backend (cuda/backend.c)
 * gives each block's rows by address instead (k_blocks, v_blocks).
 *
 * Included by kv_store.cu (writing rows) and attention.cu (reading them).
 */
#ifndef LLMFS_ENGINE_CUDA_KV_CACHE_CUH
#define LLMFS_ENGINE_CUDA_KV_CACHE_CUH

#include "blocks.cuh"
#include "kernels.h"

/* the (K type, V type) pairs a cache may have: kv_store.cu and attention.cu */
#define KV_TYPES(X) \
	X(T_F16, T_F16) \
	X(T_F16, T_Q8_0) \
	X(T_Q8_0, T_F16) \
	X(T_Q8_0, T_Q8_0) \
	X(T_F32, T_F32) \
	X(T_BF16, T_BF16)

/* element d of a cache row of type T */
template <int T>
__device__ __forceinline__ float kv_get(const uint8_t *row, int d)
{
	if (T == T_F16)
		return cuda_h2f(((const uint16_t *)row)[d]);
	if (T == T_BF16)
		return cuda_bf2f(((const uint16_t *)row)[d]);
	if (T == T_F32)
		return ((const float *)row)[d];
	/* Q8_0 */
	const blk_q8_0 *b = (const blk_q8_0 *)row + d / 32;

	return cuda_h2f(b->d) * (float)b->qs[d % 32];
}

/* bytes of head h's part of a row (the heads of a row are contiguous) */
template <int T> __device__ __forceinline__ uint64_t kv_head_bytes(int hd)
{
	return T == T_F32  ? 4u * hd :
	       T == T_Q8_0 ? (uint64_t)hd / 32 * 34 :
			     2u * hd;
}

__device__ __forceinline__ const uint8_t *kv_block(const cuda_kv_args &kv,
						   int32_t seq, int32_t p)
{
	const int32_t b =
		kv.tables[(uint64_t)seq * kv.max_blocks + p / CUDA_KV_BLOCK];

	return kv.pool + (uint64_t)b * kv.block_bytes + kv.layer_off;
}

__device__ __forceinline__ const uint8_t *kv_k_row(const cuda_kv_args &kv,
						   int32_t seq, int32_t p)
{
	if (kv.k_blocks)
		return kv.k_blocks[(uint64_t)seq * kv.max_blocks +
				   p / CUDA_KV_BLOCK] +
		       (uint64_t)(p % CUDA_KV_BLOCK) * kv.k_row;
	return kv_block(kv, seq, p) + (uint64_t)(p % CUDA_KV_BLOCK) * kv.k_row;
}

__device__ __forceinline__ const uint8_t *kv_v_row(const cuda_kv_args &kv,
						   int32_t seq, int32_t p)
{
	if (kv.v_blocks)
		return kv.v_blocks[(uint64_t)seq * kv.max_blocks +
				   p / CUDA_KV_BLOCK] +
		       (uint64_t)(p % CUDA_KV_BLOCK) * kv.v_row;
	return kv_block(kv, seq, p) + (uint64_t)CUDA_KV_BLOCK * kv.k_row +
	       (uint64_t)(p % CUDA_KV_BLOCK) * kv.v_row;
}

#endif
