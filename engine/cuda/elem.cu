// SPDX-License-Identifier: MIT
/*
 * The per-row operations of a forward pass, each as the CPU backend
 * computes it (engine/ops.c): RMS norm, RoPE (the CPU's angle recurrence
 * and fused multiply-adds), SwiGLU, additions. A block per row (per head
 * for RoPE); they are a small part of a step's time, so they are
 * written to be clear and coalesced, not tuned.
 */
#include "blocks.cuh"
#include "kernels.h"

__global__ void rms_norm_k(const float *x, uint64_t x_ld, const float *w,
			   float *y, uint64_t y_ld, int64_t n, float eps)
{
	cuda_pdl_start();
	const float *xr = x + blockIdx.x * x_ld;
	float *yr = y + blockIdx.x * y_ld;
	__shared__ double part[32];
	double s = 0.0;

	for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
		s += (double)__fmul_rn(xr[i], xr[i]);
	const float scale = cuda_rms_scale(s, n, eps, part);
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
		float v = xr[i] * scale;

		yr[i] = w ? v * w[i] : v;
	}
}

void k_rms_norm(const float *x, uint64_t x_ld, const float *w, float *y,
		uint64_t y_ld, int64_t n, uint32_t rows, float eps,
		cudaStream_t s)
{
	unsigned threads = n >= 1024 ? 1024 : cuda_div_up((uint64_t)n, 32) * 32;

	if (rows)
		cuda_launch_pdl(rms_norm_k, dim3(rows), dim3(threads), 0, s, x,
				x_ld, w, y, y_ld, n, eps);
}

/*
 * Row blockIdx.x, head blockIdx.y, pair threadIdx.x: the angle as
 * ops_rope_cache makes it (theta multiplied up pair by pair), the
 * rotation as ops_rope (one fused multiply-add, one rounded product).
 */
__global__ void rope_k(float *x, uint64_t x_ld, uint32_t head_dim,
		       uint32_t n_rot, int neox, const int32_t *pos,
		       float theta_scale, float freq_scale,
		       const float *freq_factors)
{
	cuda_pdl_start();
	const uint32_t i = threadIdx.x; /* pair */
	float *r = x + blockIdx.x * x_ld + (uint64_t)blockIdx.y * head_dim;

	if (2 * i < n_rot)
		cuda_rope_pair(r, i, n_rot, neox, pos[blockIdx.x], theta_scale,
			       freq_scale, freq_factors);
}

void k_rope(float *x, uint64_t x_ld, uint32_t n_head, uint32_t head_dim,
	    uint32_t n_rot, int neox, const int32_t *pos, float freq_base,
	    float freq_scale, const float *freq_factors, uint32_t rows,
	    cudaStream_t s)
{
	const float theta_scale = powf(freq_base, -2.0f / (float)n_rot);

	if (rows && n_head && n_rot)
		cuda_launch_pdl(rope_k, dim3(rows, n_head),
				dim3(cuda_div_up(n_rot / 2, 32) * 32), 0, s, x,
				x_ld, head_dim, n_rot, neox, pos, theta_scale,
				freq_scale, freq_factors);
}

__global__ void swiglu_k(float *y, uint64_t y_ld, const float *g, uint64_t g_ld,
			 const float *u, uint64_t u_ld, int64_t n)
{
	cuda_pdl_start();
	const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	const float gv = g[blockIdx.y * g_ld + i];
	/* the CPU's SiLU: ggml_v_expf on whole vectors, libm on the rest */
	const float e = i < n - n % CUDA_CPU_LANES ? cuda_v_expf(0.0f - gv) :
						     cuda_libm_expf(-gv);

	y[blockIdx.y * y_ld + i] = __fmul_rn(__fdiv_rn(gv, __fadd_rn(1.0f, e)),
					     u[blockIdx.y * u_ld + i]);
}

void k_swiglu(float *y, uint64_t y_ld, const float *g, uint64_t g_ld,
	      const float *u, uint64_t u_ld, int64_t n, uint32_t rows,
	      cudaStream_t s)
{
	if (rows && n)
		cuda_launch_pdl(swiglu_k,
				dim3(cuda_div_up((uint64_t)n, 256), rows),
				dim3(256), 0, s, y, y_ld, g, g_ld, u, u_ld, n);
}

__global__ void add_k(float *y, uint64_t y_ld, const float *x, uint64_t x_ld,
		      int64_t n)
{
	cuda_pdl_start();
	const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[blockIdx.y * y_ld + i] += x[blockIdx.y * x_ld + i];
}

void k_add(float *y, uint64_t y_ld, const float *x, uint64_t x_ld, int64_t n,
	   uint32_t rows, cudaStream_t s)
{
	if (rows && n)
		cuda_launch_pdl(add_k,
				dim3(cuda_div_up((uint64_t)n, 256), rows),
				dim3(256), 0, s, y, y_ld, x, x_ld, n);
}
