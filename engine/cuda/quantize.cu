// SPDX-License-Identifier: MIT
/*
 * Activations into the int8 blocks the mat-vec kernels multiply with,
 * rounded exactly as the CPU backend rounds them (engine/quant/
 * quant_legacy.c, quant_k.c), so that every block's integer dot product
 * is the CPU's:
 *
 *   Q8_1 (32 elements): d = amax / 127, q = rint(x * (127 / amax)), the
 *        CPU's Q8_0 and Q8_1 quants alike; s = d * sum(q) as a half.
 *   Q8_K (256): the element of largest magnitude (the first of equals)
 *        sets iscale = -127 / max, q = min(rint(iscale * x), 127),
 *        d = 1 / iscale, bsums of 16.
 */
#include "blocks.cuh"
#include "kernels.h"

#define Q8_1_WARPS 4

/* one warp a block of 32: grid (blocks / Q8_1_WARPS, rows) */
__global__ void __launch_bounds__(32 * Q8_1_WARPS)
	quant_q8_1(const float *x, uint64_t x_ld, uint8_t *y, uint64_t y_ld,
		   int64_t n)
{
	cuda_pdl_start();
	const int64_t ib = (int64_t)blockIdx.x * Q8_1_WARPS + threadIdx.y;

	if (ib * 32 >= n)
		return;
	q8_1_block(x[blockIdx.y * x_ld + ib * 32 + threadIdx.x], threadIdx.x,
		   (blk_q8_1 *)(y + blockIdx.y * y_ld) + ib);
}

/* 256 threads a block of 256: grid (blocks, rows) */
__global__ void __launch_bounds__(QK_K)
	quant_q8_K(const float *x, uint64_t x_ld, uint8_t *y, uint64_t y_ld)
{
	cuda_pdl_start();
	__shared__ float vals[QK_K];
	const int t = threadIdx.x;

	q8_K_block(x[blockIdx.y * x_ld + (uint64_t)blockIdx.x * QK_K + t], t,
		   (blk_q8_K *)(y + blockIdx.y * y_ld) + blockIdx.x, vals);
}

/*
 * RMS norm and the quantization of its result in one launch, for the
 * products that read it: block (blockIdx.x, row blockIdx.y) takes
 * elements 256 blockIdx.x .. +255 of the row. Every block sums the
 * whole row's squares in the same order (the same scale everywhere,
 * the row is in L2), writes its part of y (the floats, for whoever
 * else reads them) and quantizes it as act: Q8_K (one block), Q8_1
 * (8 blocks, a warp each) or F32.
 */
template <int ACT>
__global__ void __launch_bounds__(QK_K)
	norm_quant_k(const float *x, uint64_t x_ld, const float *w, float *y,
		     uint64_t y_ld, uint8_t *q, uint64_t q_ld, int64_t n,
		     float eps)
{
	cuda_pdl_start();
	__shared__ double part[32];
	__shared__ float vals[QK_K];
	const int t = threadIdx.x, lane = t % 32;
	const float *xr = x + blockIdx.y * x_ld;
	const int64_t i = (int64_t)blockIdx.x * QK_K + t;
	uint8_t *qr = q + blockIdx.y * q_ld;
	double s = 0.0;

	for (int64_t k = t; k < n; k += QK_K)
		s += (double)__fmul_rn(xr[k], xr[k]);
	const float scale = cuda_rms_scale(s, n, eps, part);
	float v = i < n ? xr[i] * scale : 0.0f;

	if (w && i < n)
		v = v * w[i];
	if (i < n)
		y[blockIdx.y * y_ld + i] = v;
	if (ACT == T_Q8_K)
		q8_K_block(v, t, (blk_q8_K *)qr + blockIdx.x, vals);
	else if (ACT == T_Q8_1 && i < n)
		q8_1_block(v, lane, (blk_q8_1 *)qr + i / 32);
	else if (ACT == T_F32 && i < n)
		((float *)qr)[i] = v;
}

__global__ void copy_f32(const float *x, uint64_t x_ld, uint8_t *y,
			 uint64_t y_ld, int64_t n)
{
	cuda_pdl_start();
	const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		((float *)(y +
			   blockIdx.y * y_ld))[i] = x[blockIdx.y * x_ld + i];
}

uint64_t k_act_row_bytes(uint32_t act, int64_t n)
{
	switch (act) {
	case T_Q8_1: return (uint64_t)(n / 32) * sizeof(blk_q8_1);
	case T_Q8_K: return (uint64_t)(n / QK_K) * sizeof(blk_q8_K);
	case T_F32: return (uint64_t)n * 4;
	default: return 0;
	}
}

uint32_t k_act_type(uint32_t w_type)
{
	switch (w_type) {
	case T_Q4_0:
	case T_Q4_1:
	case T_Q5_0:
	case T_Q5_1:
	case T_Q8_0: return T_Q8_1;
	case T_Q2_K:
	case T_Q3_K:
	case T_Q4_K:
	case T_Q5_K:
	case T_Q6_K: return T_Q8_K;
	case T_F32:
	case T_F16:
	case T_BF16: return T_F32;
	default: return IO_TYPE_COUNT;
	}
}

bool k_quantize(uint32_t act, const float *x, uint64_t x_ld, void *y,
		uint64_t y_ld, int64_t n, uint32_t rows, cudaStream_t s)
{
	if (!rows || !n)
		return true;
	switch (act) {
	case T_Q8_1:
		cuda_launch_pdl(
			quant_q8_1,
			dim3(cuda_div_up((uint64_t)n / 32, Q8_1_WARPS), rows),
			dim3(32, Q8_1_WARPS), 0, s, x, x_ld, (uint8_t *)y, y_ld,
			n);
		return true;
	case T_Q8_K:
		cuda_launch_pdl(quant_q8_K, dim3((unsigned)(n / QK_K), rows),
				dim3(QK_K), 0, s, x, x_ld, (uint8_t *)y, y_ld);
		return true;
	case T_F32:
		cuda_launch_pdl(
			copy_f32, dim3(cuda_div_up((uint64_t)n, 256), rows),
			dim3(256), 0, s, x, x_ld, (uint8_t *)y, y_ld, n);
		return true;
	default: return false;
	}
}

bool k_rms_norm_quantize(uint32_t act, const float *x, uint64_t x_ld,
			 const float *w, float *y, uint64_t y_ld, void *q,
			 uint64_t q_ld, int64_t n, uint32_t rows, float eps,
			 cudaStream_t s)
{
	const dim3 grid(cuda_div_up((uint64_t)n, QK_K), rows);
	uint8_t *qb = (uint8_t *)q;

	if (!rows || !n)
		return true;
	switch (act) {
	case T_Q8_K:
		if (n % QK_K)
			return false;
		cuda_launch_pdl(norm_quant_k<T_Q8_K>, grid, dim3(QK_K), 0, s, x,
				x_ld, w, y, y_ld, qb, q_ld, n, eps);
		return true;
	case T_Q8_1:
		if (n % 32)
			return false;
		cuda_launch_pdl(norm_quant_k<T_Q8_1>, grid, dim3(QK_K), 0, s, x,
				x_ld, w, y, y_ld, qb, q_ld, n, eps);
		return true;
	case T_F32:
		cuda_launch_pdl(norm_quant_k<T_F32>, grid, dim3(QK_K), 0, s, x,
				x_ld, w, y, y_ld, qb, q_ld, n, eps);
		return true;
	default: return false;
	}
}
