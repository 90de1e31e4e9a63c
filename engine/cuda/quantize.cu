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

/* lane's value v into Q8_1 block b (a warp a block) */
__device__ __forceinline__ void q8_1_block(float v, int lane, blk_q8_1 *b)
{
	const float amax = cuda_warp_max(fabsf(v));
	const float d = amax / 127.f;
	const float id = amax != 0.0f ? 127.f / amax : 0.0f;
	const int q = __float2int_rn(v * id);
	const int sum = cuda_warp_sum_int(q);

	b->qs[lane] = (int8_t)q;
	if (lane == 0) {
		b->d = cuda_f2h(d);
		b->s = cuda_f2h(d * (float)sum);
	}
}

/* one warp a block of 32: grid (blocks / Q8_1_WARPS, rows) */
__global__ void __launch_bounds__(32 * Q8_1_WARPS)
	quant_q8_1(const float *x, uint64_t x_ld, uint8_t *y, uint64_t y_ld,
		   int64_t n)
{
	const int64_t ib = (int64_t)blockIdx.x * Q8_1_WARPS + threadIdx.y;

	if (ib * 32 >= n)
		return;
	q8_1_block(x[blockIdx.y * x_ld + ib * 32 + threadIdx.x], threadIdx.x,
		   (blk_q8_1 *)(y + blockIdx.y * y_ld) + ib);
}

/*
 * Thread t's value v (of 256, a whole block of threads) into Q8_K block
 * b. vals: 256 floats of shared memory.
 */
__device__ __forceinline__ void q8_K_block(float v, int t, blk_q8_K *b,
					   float *vals)
{
	__shared__ float best_abs[QK_K / 32];
	__shared__ int best_idx[QK_K / 32];
	__shared__ float max_v;
	const int lane = t % 32;
	float a = fabsf(v);
	int idx = t;

	vals[t] = v;
	/* the largest |x|, the lowest index among equals (the CPU's loop) */
	for (int o = 16; o > 0; o >>= 1) {
		float oa = __shfl_xor_sync(0xffffffffu, a, o);
		int oi = __shfl_xor_sync(0xffffffffu, idx, o);

		if (oa > a || (oa == a && oi < idx)) {
			a = oa;
			idx = oi;
		}
	}
	if (lane == 0) {
		best_abs[t / 32] = a;
		best_idx[t / 32] = idx;
	}
	__syncthreads();
	if (t == 0) {
		for (int w = 1; w < QK_K / 32; w++) {
			if (best_abs[w] > a ||
			    (best_abs[w] == a && best_idx[w] < idx)) {
				a = best_abs[w];
				idx = best_idx[w];
			}
		}
		max_v = a != 0.0f ? vals[idx] : 0.0f;
	}
	__syncthreads();
	const float max = max_v;
	if (max == 0.0f) {
		b->qs[t] = 0;
		if (t < QK_K / 16)
			b->bsums[t] = 0;
		if (t == 0)
			b->d = 0.0f;
		return;
	}
	const float iscale = -127.f / max;
	int q = __float2int_rn(iscale * v);

	q = q < 127 ? q : 127;
	b->qs[t] = (int8_t)q;
	for (int o = 8; o > 0; o >>= 1)
		q += __shfl_xor_sync(0xffffffffu, q, o, 16);
	if (t % 16 == 0)
		b->bsums[t / 16] = (int16_t)q;
	if (t == 0)
		b->d = 1 / iscale;
}

/* 256 threads a block of 256: grid (blocks, rows) */
__global__ void __launch_bounds__(QK_K)
	quant_q8_K(const float *x, uint64_t x_ld, uint8_t *y, uint64_t y_ld)
{
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
	__shared__ float part[QK_K / 32];
	__shared__ float vals[QK_K];
	const int t = threadIdx.x, lane = t % 32;
	const float *xr = x + blockIdx.y * x_ld;
	const int64_t i = (int64_t)blockIdx.x * QK_K + t;
	uint8_t *qr = q + blockIdx.y * q_ld;
	float s = 0.0f;

	for (int64_t k = t; k < n; k += QK_K)
		s = fmaf(xr[k], xr[k], s);
	s = cuda_warp_sum(s);
	if (lane == 0)
		part[t / 32] = s;
	__syncthreads();
	s = lane < QK_K / 32 ? part[lane] : 0.0f;
	s = cuda_warp_sum(s);
	const float scale = 1.0f / sqrtf(s / (float)n + eps);
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
		cuda_launch(
			quant_q8_1,
			dim3(cuda_div_up((uint64_t)n / 32, Q8_1_WARPS), rows),
			dim3(32, Q8_1_WARPS), 0, s, x, x_ld, (uint8_t *)y, y_ld,
			n);
		return true;
	case T_Q8_K:
		cuda_launch(quant_q8_K, dim3((unsigned)(n / QK_K), rows),
			    dim3(QK_K), 0, s, x, x_ld, (uint8_t *)y, y_ld);
		return true;
	case T_F32:
		cuda_launch(copy_f32, dim3(cuda_div_up((uint64_t)n, 256), rows),
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
		cuda_launch(norm_quant_k<T_Q8_K>, grid, dim3(QK_K), 0, s, x,
			    x_ld, w, y, y_ld, qb, q_ld, n, eps);
		return true;
	case T_Q8_1:
		if (n % 32)
			return false;
		cuda_launch(norm_quant_k<T_Q8_1>, grid, dim3(QK_K), 0, s, x,
			    x_ld, w, y, y_ld, qb, q_ld, n, eps);
		return true;
	case T_F32:
		cuda_launch(norm_quant_k<T_F32>, grid, dim3(QK_K), 0, s, x,
			    x_ld, w, y, y_ld, qb, q_ld, n, eps);
		return true;
	default: return false;
	}
}
