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
	const int64_t ib = (int64_t)blockIdx.x * Q8_1_WARPS + threadIdx.y;
	const int lane = threadIdx.x;

	if (ib * 32 >= n)
		return;
	const float v = x[blockIdx.y * x_ld + ib * 32 + lane];
	const float amax = cuda_warp_max(fabsf(v));
	const float d = amax / 127.f;
	const float id = amax != 0.0f ? 127.f / amax : 0.0f;
	const int q = __float2int_rn(v * id);
	const int sum = cuda_warp_sum_int(q);
	blk_q8_1 *b = (blk_q8_1 *)(y + blockIdx.y * y_ld) + ib;

	b->qs[lane] = (int8_t)q;
	if (lane == 0) {
		b->d = cuda_f2h(d);
		b->s = cuda_f2h(d * (float)sum);
	}
}

/* 256 threads a block of 256: grid (blocks, rows) */
__global__ void __launch_bounds__(QK_K)
	quant_q8_K(const float *x, uint64_t x_ld, uint8_t *y, uint64_t y_ld)
{
	__shared__ float best_abs[QK_K / 32];
	__shared__ int best_idx[QK_K / 32];
	__shared__ float max_v;
	const int t = threadIdx.x, lane = t % 32;
	const float *xb = x + blockIdx.y * x_ld + (uint64_t)blockIdx.x * QK_K;
	const float v = xb[t];
	blk_q8_K *b = (blk_q8_K *)(y + blockIdx.y * y_ld) + blockIdx.x;
	float a = fabsf(v);
	int idx = t;

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
		max_v = a != 0.0f ? xb[idx] : 0.0f;
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
