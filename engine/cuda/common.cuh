// SPDX-License-Identifier: MIT
/*
 * What every .cu file of the CUDA module includes first: the CUDA runtime
 * under nvcc, the CPU simulator (sim/sim.h) under a host compiler
 * (-DLLMFS_CUDA_SIM, `make check`'s build of the same sources), and the
 * few helpers all kernels share. Kernels are launched through
 * cuda_launch() only, so that the same line runs on either.
 */
#ifndef LLMFS_ENGINE_CUDA_COMMON_CUH
#define LLMFS_ENGINE_CUDA_COMMON_CUH

#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#ifdef LLMFS_CUDA_SIM
#include "sim/sim.h"
#else
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#endif

#include "module.h"

/*
 * kernel<<<grid, block, shmem, stream>>>(args...), or its simulation.
 * Launch errors are sticky: cuda_check_launch() (or the next
 * synchronizing call) reports them.
 */
template <class... P, class... A>
static inline void cuda_launch(void (*kernel)(P...), dim3 grid, dim3 block,
			       size_t shmem, cudaStream_t stream, A... args)
{
#ifdef LLMFS_CUDA_SIM
	sim_launch(grid, block, shmem, stream,
		   reinterpret_cast<const void *>(kernel),
		   [=]() { kernel(args...); });
#else
	kernel<<<grid, block, shmem, stream>>>(args...);
#endif
}

/*
 * Programmatic dependent launch (Hopper): a kernel launched by
 * cuda_launch_pdl may start while the kernel before it on the stream
 * finishes, so that the launch latency between the many small kernels
 * of a decode step (a graph of hundreds) overlaps the work. Every such
 * kernel calls cuda_pdl_start() first: it lets the next kernel launch,
 * then waits until the previous grid completed and its memory is
 * visible, before this one reads or writes anything. No-ops before
 * sm_90 and in the simulator. cuda_pdl_enable() says whether launches
 * may ask for it (set by a probe launch, step.cu; $LLMFS_CUDA_PDL=0
 * never).
 */
__device__ __forceinline__ void cuda_pdl_start()
{
#if !defined(LLMFS_CUDA_SIM) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;");
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* -1 not probed (off), 0 off, 1 on; written by cuda_pdl_probe() */
extern int cuda_pdl_state;

template <class... P, class... A>
static inline void cuda_launch_pdl(void (*kernel)(P...), dim3 grid, dim3 block,
				   size_t shmem, cudaStream_t stream, A... args)
{
#ifdef LLMFS_CUDA_SIM
	cuda_launch(kernel, grid, block, shmem, stream, args...);
#else
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute attr[1] = {};

	if (cuda_pdl_state != 1) {
		kernel<<<grid, block, shmem, stream>>>(args...);
		return;
	}
	attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	attr[0].val.programmaticStreamSerializationAllowed = 1;
	cfg.gridDim = grid;
	cfg.blockDim = block;
	cfg.dynamicSmemBytes = shmem;
	cfg.stream = stream;
	cfg.attrs = attr;
	cfg.numAttrs = 1;
	cudaLaunchKernelEx(&cfg, kernel, args...);
#endif
}

/*
 * Whether this device takes programmatic launches: one tiny launch with
 * the attribute on stream s (not capturing), checked; sets
 * cuda_pdl_state (step.cu, once a process, at its first context).
 */
int cuda_pdl_probe(cudaStream_t s);

/*
 * The current device's compute capability major (9 for sm_90; the
 * simulator's is 9), asked of the runtime once per device; 0 where it
 * cannot say.
 */
int cuda_device_major(void);

/*
 * The launch's dynamic shared memory as a T *name (16-aligned); the
 * simulator hands out a per-block buffer instead.
 */
#ifdef LLMFS_CUDA_SIM
#define CUDA_DYNAMIC_SHARED(T, name) T *name = (T *)sim_dynamic_shared()
#else
#define CUDA_DYNAMIC_SHARED(T, name) \
	extern __shared__ __align__(16) uint8_t name##_raw[]; \
	T *name = (T *)name##_raw
#endif

/* Write one line into err (may be NULL); returns -code. */
int cuda_err(struct err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* -EIO with "what: the CUDA error" for e != cudaSuccess, else 0. */
int cuda_check(cudaError_t e, const char *what, struct err *err);

/* The launch error of the kernels just enqueued, as cuda_check. */
static inline int cuda_check_launch(const char *what, struct err *err)
{
	return cuda_check(cudaGetLastError(), what, err);
}

static inline unsigned cuda_div_up(uint64_t a, unsigned b)
{
	return (unsigned)((a + b - 1) / b);
}

/* ---- device helpers ---------------------------------------------------- */

__device__ __forceinline__ float cuda_warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/*
 * The RMS norm's scale as the CPU's ops_rms_scale takes it: the squares
 * rounded in float, summed in double (here per thread, then over the
 * block: another order, but a double sum of floats of one row is exact
 * unless their magnitudes span some 2^29, so the same sum), the mean
 * rounded to float, 1 / sqrtf(mean + eps). part: 32 doubles of shared
 * memory; every thread of the block calls it once.
 */
__device__ __forceinline__ float cuda_rms_scale(double sq, int64_t n, float eps,
						double *part)
{
	const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
	const int nw = blockDim.x / 32;

	for (int o = 16; o > 0; o >>= 1)
		sq += __shfl_xor_sync(0xffffffffu, sq, o);
	if (lane == 0)
		part[w] = sq;
	__syncthreads();
	sq = lane < nw ? part[lane] : 0.0;
	for (int o = 16; o > 0; o >>= 1)
		sq += __shfl_xor_sync(0xffffffffu, sq, o);
	const float mean = (float)(sq / (double)n);

	return 1.0f / sqrtf(mean + eps);
}

__device__ __forceinline__ float cuda_warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

__device__ __forceinline__ int cuda_warp_sum_int(int v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/*
 * The CPU's transcendentals, bit for bit. Its expf, sinf and cosf are
 * glibc's; CUDA's are within 2 ulp, and one ulp is enough to flip an F16
 * or int8 rounding downstream (seen on an H100: attention rows 1e-4 off
 * the CPU's, logits 1.6e-3 off llama.cpp's). Used where the CPU calls
 * libm; the speed paths keep expf.
 *
 * expf is glibc's algorithm (sysdeps/ieee754/flt-32/e_expf.c) with the
 * four FMAs of __expf_fma, the variant libm picks on a CPU with FMA, as
 * engine/cpu/attention_avx512.c's att_expf8 does it: in double, x 32/ln2
 * = k + r, 2^(k/32) from a 32-entry table, a cubic in r. glibc's expf is
 * not correctly rounded: 97,052 of the floats in [-104, 0] come out one
 * ulp from the correctly rounded exp, the float of exp((double)x) this
 * was before, and one of them flipped an F16 rounding of the CPU-order
 * attention walk (seed 1795725396 of test_cuda, 1.4e-4 off the CPU).
 * tests/engine/test_cuda.c's test_libm_expf compares every float with
 * the host's expf where the host's libm is glibc's FMA variant.
 */
static __device__ const uint64_t cuda_exp2f_table[32] = {
	0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f,
	0x3fef9301d0125b51, 0x3fef72b83c7d517b, 0x3fef54873168b9aa,
	0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715,
	0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
	0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
	0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74,
	0x3feea11473eb0187, 0x3feea589994cce13, 0x3feeace5422aa0db,
	0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
	0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c,
	0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
	0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};

__device__ __forceinline__ float cuda_libm_expf(float x)
{
	const uint32_t top = __float_as_uint(x) >> 20 & 0x7ff;
	const double xd = (double)x, shift = 0x1.8p+52;
	const double inv_ln2_n = 0x1.71547652b82fep+5;
	double kd, r, z, y;
	uint64_t ki, t;

	if (top >= 0x42b) { /* |x| >= 88, infinities, NaN: libm's cases */
		if (__float_as_uint(x) == 0xff800000u)
			return 0.0f;
		if (top >= 0x7f8)
			return x + x;
		if (x > 0x1.62e42ep6f)
			return INFINITY;
		if (x < -0x1.9fe368p6f)
			return 0.0f;
		if (x < -0x1.9d1d9ep6f) /* __math_may_uflowf */
			return __fmul_rn(0x1.4p-75f, 0x1.4p-75f);
	}
	/* each step one rounding: no contraction beyond the four FMAs */
	kd = fma(inv_ln2_n, xd, shift);
	ki = (uint64_t)__double_as_longlong(kd);
	kd = __dsub_rn(kd, shift);
	r = fma(inv_ln2_n, xd, -kd);
	t = cuda_exp2f_table[ki % 32] + (ki << 47);
	z = fma(0x1.c6af84b912394p-20, r, 0x1.ebfce50fac4f3p-13);
	y = fma(r, 0x1.62e42ff0c52d6p-6, 1.0);
	y = fma(z, __dmul_rn(r, r), y);
	return (float)__dmul_rn(y, __longlong_as_double((long long)t));
}

/*
 * sinf and cosf as glibc computes them (sysdeps/ieee754/flt-32/s_sinf.c,
 * s_cosf.c, the variant libm picks on a CPU with FMA): in double, the
 * angle reduced by pi/2 (below 120 with 2/pi times 2^24, above through
 * 4/pi's 192 bits), a polynomial of x^2 with its FMAs, rounded once to
 * float. glibc's are not correctly rounded: 18,617 of 1,638,400 RoPE
 * angles (positions 0-4095, bases 1e4 and 1e6) are one ulp from the
 * float of sin/cos in double this was before, and those moved Q and K
 * one ulp off the CPU's rope cache. Checked on the host against glibc's
 * sinf/cosf on every 7th positive float: 0 differ.
 */
struct cuda_sincos_poly {
	double c0, c1, c2, c3, c4, s1, s2, s3;
};

/* [0]: sin and cos; [1]: the same with -cos (quadrants 2 and 3) */
static __device__ const cuda_sincos_poly cuda_sincos_table[2] = {
	{ 0x1p0, -0x1.ffffffd0c621cp-2, 0x1.55553e1068f19p-5,
	  -0x1.6c087e89a359dp-10, 0x1.99343027bf8c3p-16, -0x1.555545995a603p-3,
	  0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13 },
	{ -0x1p0, 0x1.ffffffd0c621cp-2, -0x1.55553e1068f19p-5,
	  0x1.6c087e89a359dp-10, -0x1.99343027bf8c3p-16, -0x1.555545995a603p-3,
	  0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13 },
};

/* 4/pi, 8 bits further at each entry */
static __device__ const uint32_t cuda_inv_pio4[24] = {
	0xa2,	    0xa2f9,	0xa2f983,   0xa2f9836e, 0xf9836e4e, 0x836e4e44,
	0x6e4e4415, 0x4e441529, 0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1,
	0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0, 0x34ddc0db, 0xddc0db62,
	0xc0db6295, 0xdb629599, 0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041,
};

/* n even: sin(x); odd: cos(x) (x2 = x * x) */
__device__ __forceinline__ float
cuda_sincos_poly_of(double x, double x2, const cuda_sincos_poly &p, int n)
{
	if ((n & 1) == 0) {
		const double x3 = __dmul_rn(x, x2);
		const double s1 = fma(x2, p.s3, p.s2);
		const double x7 = __dmul_rn(x3, x2);

		return (float)fma(x7, s1, fma(x3, p.s1, x));
	}
	const double x4 = __dmul_rn(x2, x2);
	const double c2 = fma(x2, p.c4, p.c3);
	const double c1 = fma(x2, p.c1, p.c0);
	const double x6 = __dmul_rn(x4, x2);

	return (float)fma(x6, c2, fma(x4, p.c2, c1));
}

/* sin(y) (cosine 0) or cos(y) (cosine 1), glibc's bits */
__device__ __forceinline__ float cuda_libm_sincosf(float y, int cosine)
{
	const uint32_t u = __float_as_uint(y), top = u >> 20 & 0x7ff;
	const cuda_sincos_poly *p = &cuda_sincos_table[0];
	const double x = (double)y;
	double r, s;
	int n, q;

	if (top < 0x3f4) {	 /* |y| < pi/4 */
		if (top < 0x398) /* |y| < 2^-12 */
			return cosine ? 1.0f : y;
		return cuda_sincos_poly_of(x, __dmul_rn(x, x), *p, cosine);
	}
	if (top < 0x42f) { /* |y| < 120: 2/pi 2^24, the quadrant by shifts */
		const double t = __dmul_rn(x, 0x1.45f306dc9c883p+23);

		n = ((int32_t)t + 0x800000) >> 24;
		q = n;
		r = fma(-(double)n, 0x1.921fb54442d18p0, x);
	} else if (top < 0x7f8) { /* 4/pi to 192 bits */
		const uint32_t *arr = &cuda_inv_pio4[(u >> 26) & 15];
		const uint32_t xi = ((u & 0xffffff) | 0x800000)
				    << ((u >> 23) & 7);
		uint64_t r0 = xi * arr[0], r1 = (uint64_t)xi * arr[4];
		const uint64_t r2 = (uint64_t)xi * arr[8];
		uint64_t k;

		r0 = ((r2 >> 32) | (r0 << 32)) + r1;
		k = (r0 + (1ull << 61)) >> 62;
		r0 -= k << 62;
		n = (int)k;
		q = n + (int)(u >> 31);
		r = __dmul_rn((double)(int64_t)r0, 0x1.921fb54442d18p-62);
	} else {
		return __fdiv_rn(__fsub_rn(y, y), __fsub_rn(y, y));
	}
	s = (q & 3) == 1 || (q & 3) == 2 ? -1.0 : 1.0;
	if (q & 2)
		p = &cuda_sincos_table[1];
	return cuda_sincos_poly_of(__dmul_rn(r, s), __dmul_rn(r, r), *p,
				   n ^ cosine);
}

__device__ __forceinline__ float cuda_libm_sinf(float x)
{
	return cuda_libm_sincosf(x, 0);
}

__device__ __forceinline__ float cuda_libm_cosf(float x)
{
	return cuda_libm_sincosf(x, 1);
}

/*
 * ggml_v_expf (AVX-512), one lane, as engine/ops.c's ops_v_expf: what
 * the CPU's SiLU and softmax use on whole vectors of 16.
 */
#define CUDA_CPU_LANES 16
__device__ __forceinline__ float cuda_v_expf(float x)
{
	const float r = 0x1.8p23f;
	const float z = fmaf(x, 0x1.715476p+0f, r);
	const float n = __fsub_rn(z, r);
	const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
	const float u = __fmul_rn(b, b);
	const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
				  fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
			     u, fmaf(0x1.ffffecp-1f, b, 1.0f));

	if (fabsf(n) > 192.0f)
		return n <= 0.0f ? 0.0f : INFINITY;
	return ldexpf(j, (int)n);
}

/*
 * RoPE of pair i of a head r (floats), as ops_rope_cache makes the angle
 * (theta multiplied up pair by pair) and ops_rope rotates (one fused
 * multiply-add, one rounded product); elem.cu's rope and attention.cu's
 * fused kernel share it.
 */
__device__ __forceinline__ void
cuda_rope_pair(float *r, uint32_t i, uint32_t n_rot, int neox, int32_t pos,
	       float theta_scale, float freq_scale, const float *freq_factors)
{
	float theta = (float)pos;

	for (uint32_t k = 0; k < i; k++)
		theta *= theta_scale;
	const float ff = freq_factors ? freq_factors[i] : 1.0f;
	const float t = freq_scale * (theta / ff);
	const float c = cuda_libm_cosf(t), sn = cuda_libm_sinf(t);
	const uint32_t a = neox ? i : 2 * i;
	const uint32_t b = neox ? i + n_rot / 2 : 2 * i + 1;
	const float x0 = r[a], x1 = r[b];

	r[a] = fmaf(x0, c, -__fmul_rn(x1, sn));
	r[b] = fmaf(x0, sn, __fmul_rn(x1, c));
}

__device__ __forceinline__ float cuda_h2f(uint16_t h)
{
	__half_raw r;

	r.x = h;
	return __half2float(__half(r));
}

__device__ __forceinline__ uint16_t cuda_f2h(float f)
{
	__half_raw r = __half_raw(__float2half_rn(f));

	return r.x;
}

__device__ __forceinline__ float cuda_bf2f(uint16_t h)
{
	return __uint_as_float((unsigned)h << 16);
}

/* round to nearest even, NaN kept quiet: ggml's fp32 -> bf16 */
__device__ __forceinline__ uint16_t cuda_f2bf(float f)
{
	unsigned u = __float_as_uint(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 64);
	return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

/*
 * c plus the dot product of a's and b's 4 signed bytes: __dp4a's
 * instruction without its `asm volatile` (sm_61_intrinsics.hpp), across
 * which NVVM neither merges nor moves loads (a weight word loaded again
 * for each column, and within one column for each nibble); as a pure
 * function of its operands the compiler shares and schedules around it.
 */
__device__ __forceinline__ int cuda_dp4a(int a, int b, int c)
{
#ifdef LLMFS_CUDA_SIM
	return __dp4a(a, b, c);
#else
	int r;

	asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
	return r;
#endif
}

/* 4 bytes at p (2-aligned): blocks whose size is 2 mod 4 */
__device__ __forceinline__ int cuda_load_int_b2(const void *p)
{
	const uint16_t *h = (const uint16_t *)p;

	return (int)((unsigned)h[0] | ((unsigned)h[1] << 16));
}

__device__ __forceinline__ int cuda_load_int_b4(const void *p)
{
	return *(const int *)p;
}

#endif
