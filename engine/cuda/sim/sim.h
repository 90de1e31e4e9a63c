// SPDX-License-Identifier: MIT
/*
 * CUDA on the CPU, for tests: the module's own .cu files compiled by a host
 * C++ compiler (-DLLMFS_CUDA_SIM) into build/lib/llmfs-cuda-sim.so, which
 * `make check` runs on machines without a GPU.
 *
 * What it is for: the kernels' arithmetic and indexing (which lane reads
 * which nibble of which block, how partial sums meet), the host code
 * around them (allocation, copies, streams, graph capture and replay),
 * and the launch configurations, checked against the CPU backend with
 * the same tests the GPU runs (tools/gpu-check.sh). What it is not: a
 * model of the hardware. It says nothing of speed, of the memory model
 * across blocks, of register or shared-memory limits, or of anything the
 * compiler does differently for the device; tools/gpu-check.sh and
 * compute-sanitizer on a real card are the checks for those.
 *
 * How it runs a kernel: one block after the other (in a shuffled order);
 * inside a block every thread is a fiber (ucontext) on the calling
 * thread. A fiber runs until it reaches a barrier (__syncthreads, a warp
 * shuffle or vote, __syncwarp), then switches straight to the next
 * runnable one; a barrier opens when every live thread of its block (or
 * warp) reached it. A shuffle or vote is one barrier of its warp (the
 * lanes' values on two pages used in turn): the switches are what the
 * simulator spends its time on. The order in which runnable threads run
 * is pseudo-random (seeded), so code that reads shared memory before the
 * barrier that orders it tends to see stale values and fail. A barrier
 * no thread can leave is reported as a deadlock. __shared__ variables
 * are static: they keep the previous block's values, as real shared
 * memory keeps garbage.
 *
 * The runtime API functions (cudaMalloc, cudaMemcpyAsync, streams,
 * events, graph capture) are defined by sim.cc with the real headers'
 * signatures: every operation runs at once on the calling thread, or is
 * recorded while its stream captures and run at each cudaGraphLaunch.
 * Device memory is malloc'ed and filled with 0xff bytes (NaN floats),
 * so an output a kernel forgot to write shows up; its total is
 * LLMFS_SIM_VRAM bytes (default 2 GiB) so that running out can be tested.
 */
#ifndef LLMFS_ENGINE_CUDA_SIM_H
#define LLMFS_ENGINE_CUDA_SIM_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>

#include <cuda_runtime_api.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <vector_types.h>
#include <vector_functions.h>

/* host_defines.h makes these empty for a host compiler; shared is static */
#undef __shared__
#define __shared__ static
#undef __constant__
#define __constant__ static
#undef __device__
#define __device__
#undef __global__
#define __global__
#undef __forceinline__
#define __forceinline__ inline
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __align__
#define __align__(n) alignas(n)

constexpr int warpSize = 32;

/* ---- the fibers' view: indices and barriers ---------------------------- */

struct sim_thread_ids {
	uint3 thread;
	unsigned lane, warp;
};

extern thread_local const sim_thread_ids *sim_ids;
extern thread_local uint3 sim_block_idx;
extern thread_local dim3 sim_block_dim, sim_grid_dim;

#define threadIdx (sim_ids->thread)
#define blockIdx (sim_block_idx)
#define blockDim (sim_block_dim)
#define gridDim (sim_grid_dim)

void sim_sync_block();
void sim_sync_warp();
/* put n bytes into this lane's slot of the warp's exchange */
void sim_warp_put(const void *v, size_t n);
/* n bytes of lane's slot (after a sim_sync_warp) */
void sim_warp_get(unsigned lane, void *v, size_t n);
/*
 * A shuffle's or vote's exchange: puts n bytes as this lane's, waits for
 * the warp, and returns every lane's 16-byte slot (valid until this
 * lane's next exchange); *lane is this lane.
 */
const unsigned char (*sim_warp_exchange(const void *v, size_t n,
					unsigned *lane))[16];
/* the block's dynamic shared memory (the launch's shmem bytes) */
void *sim_dynamic_shared();

/*
 * cp.async (cp_async.cuh): n bytes into dst, the first src_n of them
 * from src, the rest zeros. A copy lands at once or only when a
 * cp.async.wait_group of its thread waits for its group (a coin of the
 * block's seeded generator decides), so that code which reads it before
 * the wait and the barrier after it, or which starts it while another
 * thread still reads dst, tends to see the wrong bytes. commit closes
 * the thread's open group; wait(pending) lands all but the newest
 * `pending` committed groups (never the open one), as the PTX ISA says.
 */
void sim_cp_async(void *dst, const void *src, size_t n, size_t src_n);
void sim_cp_async_commit();
void sim_cp_async_wait(unsigned pending);

inline void __syncthreads()
{
	sim_sync_block();
}

inline void __syncwarp(unsigned mask = 0xffffffffu)
{
	(void)mask;
	sim_sync_warp();
}

inline void __threadfence()
{
}

inline void __threadfence_block()
{
}

/* the value of lane src(own lane) */
template <class T, class F> inline T sim_shfl(T v, F src)
{
	static_assert(sizeof(T) <= 16, "shuffle of more than 16 bytes");
	T r;
	unsigned lane;
	const unsigned char(*slot)[16] = sim_warp_exchange(&v, sizeof(T),
							   &lane);

	memcpy(&r, slot[src(lane) & 31], sizeof(T));
	return r;
}

template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
	(void)mask;
	return sim_shfl(v, [=](unsigned lane) {
		return (lane & ~(unsigned)(width - 1)) +
		       ((unsigned)src & (unsigned)(width - 1));
	});
}

template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
	(void)mask;
	return sim_shfl(v, [=](unsigned lane) {
		unsigned base = lane & ~(unsigned)(width - 1);

		return base +
		       ((lane ^ (unsigned)lane_mask) & (unsigned)(width - 1));
	});
}

template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	(void)mask;
	return sim_shfl(v, [=](unsigned lane) {
		unsigned in = lane & (unsigned)(width - 1);

		return in + delta < (unsigned)width ? lane + delta : lane;
	});
}

template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	(void)mask;
	return sim_shfl(v, [=](unsigned lane) {
		unsigned in = lane & (unsigned)(width - 1);

		return in >= delta ? lane - delta : lane;
	});
}

unsigned sim_ballot(int pred);

inline unsigned __ballot_sync(unsigned mask, int pred)
{
	return sim_ballot(pred) & mask;
}

inline int __any_sync(unsigned mask, int pred)
{
	return __ballot_sync(mask, pred) != 0;
}

inline int __all_sync(unsigned mask, int pred)
{
	return __ballot_sync(mask, !pred) == 0;
}

/* ---- intrinsics ---------------------------------------------------------- */

inline int __dp4a(int a, int b, int c)
{
	for (int i = 0; i < 4; i++)
		c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
	return c;
}

inline float rsqrtf(float x)
{
	return 1.0f / sqrtf(x);
}

inline float __expf(float x)
{
	return expf(x);
}

inline float __logf(float x)
{
	return logf(x);
}

inline float __fdividef(float a, float b)
{
	return a / b;
}

/* round to nearest, ties to even (the default rounding mode) */
inline int __float2int_rn(float x)
{
	return (int)nearbyintf(x);
}

inline float __fmul_rn(float a, float b)
{
	return a * b;
}

inline float __fadd_rn(float a, float b)
{
	return a + b;
}

inline double __dmul_rn(double a, double b)
{
	return a * b;
}

inline double __dsub_rn(double a, double b)
{
	return a - b;
}

inline long long __double_as_longlong(double d)
{
	long long i;

	memcpy(&i, &d, 8);
	return i;
}

inline double __longlong_as_double(long long i)
{
	double d;

	memcpy(&d, &i, 8);
	return d;
}

inline float __fsub_rn(float a, float b)
{
	return a - b;
}

inline float __fdiv_rn(float a, float b)
{
	return a / b;
}

inline float __frcp_rn(float x)
{
	return 1.0f / x;
}

inline float __saturatef(float x)
{
	return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x;
}

inline float __int_as_float(int i)
{
	float f;

	memcpy(&f, &i, 4);
	return f;
}

inline int __float_as_int(float f)
{
	int i;

	memcpy(&i, &f, 4);
	return i;
}

inline unsigned __float_as_uint(float f)
{
	unsigned i;

	memcpy(&i, &f, 4);
	return i;
}

inline float __uint_as_float(unsigned i)
{
	float f;

	memcpy(&f, &i, 4);
	return f;
}

inline int __popc(unsigned x)
{
	return __builtin_popcount(x);
}

inline int __clz(unsigned x)
{
	return x ? __builtin_clz(x) : 32;
}

inline int __ffs(unsigned x)
{
	return __builtin_ffs((int)x);
}

template <class T> inline T __ldg(const T *p)
{
	return *p;
}

/* blocks run one at a time and fibers never preempt: plain operations */
template <class T> inline T atomicAdd(T *p, T v)
{
	T old = *p;

	*p = old + v;
	return old;
}

template <class T> inline T atomicMax(T *p, T v)
{
	T old = *p;

	*p = old > v ? old : v;
	return old;
}

template <class T> inline T atomicExch(T *p, T v)
{
	T old = *p;

	*p = v;
	return old;
}

template <class T> inline T atomicCAS(T *p, T cmp, T v)
{
	T old = *p;

	if (old == cmp)
		*p = v;
	return old;
}

/* ---- cuda_runtime.h's typed conveniences --------------------------------- */

template <class T> inline cudaError_t cudaMalloc(T **p, size_t n)
{
	return cudaMalloc((void **)p, n);
}

template <class T> inline cudaError_t cudaMallocHost(T **p, size_t n)
{
	return cudaMallocHost((void **)p, n);
}

template <class T>
inline cudaError_t cudaHostAlloc(T **p, size_t n, unsigned flags)
{
	return cudaHostAlloc((void **)p, n, flags);
}

template <class T>
inline cudaError_t cudaFuncSetAttribute(T *kernel, cudaFuncAttribute attr,
					int value)
{
	return cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel),
				    attr, value);
}

/* ---- launching ----------------------------------------------------------- */

/*
 * Run body for every thread of grid x block (or record it while stream
 * captures). kernel identifies the function for cudaFuncSetAttribute.
 */
void sim_launch(dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
		const void *kernel, std::function<void()> body);

#endif
