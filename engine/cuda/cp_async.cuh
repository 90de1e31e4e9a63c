// SPDX-License-Identifier: MIT
/*
 * Copies from global into shared memory that run while the thread goes
 * on (cp.async, sm_80 and later; PTX ISA section 9.7.9.25): a thread
 * starts copies, closes them into a group (cuda_cp_async_commit), and
 * later waits until all but its newest N groups have landed
 * (cuda_cp_async_wait<N>); then a __syncthreads() makes them visible to
 * the other threads of the block. A copy of src_bytes < its size reads
 * only those bytes and fills the rest with zeros (rows past a matrix's
 * end read nothing).
 *
 * The simulator lands each copy at once or only at the wait that covers
 * it (sim/sim.h), so a read that the wait and barrier do not order, or a
 * copy started into a buffer another thread still reads, shows up there.
 * Before sm_80 the copies are plain loads and stores (no kernel that
 * needs them runs there).
 */
#ifndef LLMFS_ENGINE_CUDA_CP_ASYNC_CUH
#define LLMFS_ENGINE_CUDA_CP_ASYNC_CUH

#include "common.cuh"

#ifdef LLMFS_CUDA_SIM
inline void cuda_cp_async16(void *dst, const void *src, int src_bytes)
{
	sim_cp_async(dst, src, 16, (size_t)src_bytes);
}

inline void cuda_cp_async4(void *dst, const void *src, int src_bytes)
{
	sim_cp_async(dst, src, 4, (size_t)src_bytes);
}

inline void cuda_cp_async_commit()
{
	sim_cp_async_commit();
}

template <int N> inline void cuda_cp_async_wait()
{
	sim_cp_async_wait(N);
}
#else
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define CUDA_CP_ASYNC 1
#endif

/* 16 bytes, dst and src 16-aligned; through L2 only (.cg) */
__device__ __forceinline__ void cuda_cp_async16(void *dst, const void *src,
						int src_bytes)
{
#ifdef CUDA_CP_ASYNC
	const unsigned d = (unsigned)__cvta_generic_to_shared(dst);

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d),
		     "l"(src), "r"(src_bytes)
		     : "memory");
#else
	for (int i = 0; i < 16; i++)
		((uint8_t *)dst)[i] =
			i < src_bytes ? ((const uint8_t *)src)[i] : 0;
#endif
}

/* 4 bytes, dst and src 4-aligned (.ca: the only kind of that size) */
__device__ __forceinline__ void cuda_cp_async4(void *dst, const void *src,
					       int src_bytes)
{
#ifdef CUDA_CP_ASYNC
	const unsigned d = (unsigned)__cvta_generic_to_shared(dst);

	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d),
		     "l"(src), "r"(src_bytes)
		     : "memory");
#else
	for (int i = 0; i < 4; i++)
		((uint8_t *)dst)[i] =
			i < src_bytes ? ((const uint8_t *)src)[i] : 0;
#endif
}

__device__ __forceinline__ void cuda_cp_async_commit()
{
#ifdef CUDA_CP_ASYNC
	asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

template <int N> __device__ __forceinline__ void cuda_cp_async_wait()
{
#ifdef CUDA_CP_ASYNC
	asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}
#endif

#endif
