// SPDX-License-Identifier: MIT
/*
 * Mixture of experts on the device, so that routing never waits for the
 * host (llama.cpp's build_moe_ffn with softmax gating):
 *
 *   moe_route    a warp per row: softmax of the router's logits, the top
 *                k experts (highest first, the lower id on ties), their
 *                weights, divided by their sum where the model says so
 *   moe_group    the (row, slot) pairs listed by expert, 8 to a work
 *                item, for mmv.cu's expert products: a thread per expert
 *                walking the pairs in order, so lists are deterministic
 *   moe_combine  each row's expert outputs times their weights, added in
 *                slot order (as the CPU adds them)
 */
#include "blocks.cuh"
#include "kernels.h"

#define MOE_MAX_PER_LANE 8 /* experts per lane: at most 256 experts */

__global__ void moe_route_k(const float *logits, uint64_t ld, uint32_t n_exp,
			    uint32_t k, int norm, int32_t *sel, float *w)
{
	const int lane = threadIdx.x % 32;
	const uint64_t r = (uint64_t)blockIdx.x * (blockDim.x / 32) +
			   threadIdx.x / 32;
	const float *x = logits + r * ld;
	const uint32_t n_vec = n_exp - n_exp % CUDA_CPU_LANES;
	float v[MOE_MAX_PER_LANE], mx = -INFINITY;
	double sum = 0.0, wsum = 0.0;

#pragma unroll
	for (int i = 0; i < MOE_MAX_PER_LANE; i++) {
		const uint32_t j = lane + 32 * i;

		v[i] = j < n_exp ? x[j] : -INFINITY;
		mx = fmaxf(mx, v[i]);
	}
	mx = cuda_warp_max(mx);
	/*
	 * The CPU's softmax (ops_softmax): ggml_v_expf on whole vectors of
	 * 16, each vector summed in float as _mm512_reduce_add_ps folds it
	 * and added in double, in order; libm on the rest, added in double
	 * one by one. Every lane keeps the same sum.
	 */
#pragma unroll
	for (int i = 0; i < MOE_MAX_PER_LANE; i++) {
		const uint32_t j = lane + 32 * i;
		float h;

		v[i] = j >= n_exp ? 0.0f :
		       j < n_vec  ? cuda_v_expf(v[i] - mx) :
				    cuda_libm_expf(v[i] - mx);
		h = j < n_vec ? v[i] : 0.0f;
		for (int o = 8; o > 0; o >>= 1)
			h = __fadd_rn(h,
				      __shfl_down_sync(0xffffffffu, h, o, 16));
		for (int half = 0; half < 2; half++) {
			const float hs = __shfl_sync(0xffffffffu, h, 16 * half);

			if (32 * (uint32_t)i + 16 * half + 16 <= n_vec)
				sum += (double)hs;
		}
	}
	for (uint32_t j = n_vec; j < n_exp; j++) {
		float t = 0.0f;

#pragma unroll
		for (int i = 0; i < MOE_MAX_PER_LANE; i++)
			if ((uint32_t)i == j / 32)
				t = __shfl_sync(0xffffffffu, v[i], j % 32);
		sum += (double)t;
	}
	const float scale = (float)(1.0 / sum);
#pragma unroll
	for (int i = 0; i < MOE_MAX_PER_LANE; i++)
		v[i] = (uint32_t)(lane + 32 * i) < n_exp ? v[i] * scale :
							   -INFINITY;
	for (uint32_t t = 0; t < k; t++) {
		float best = -INFINITY;
		int bi = 0x7fffffff;

#pragma unroll
		for (int i = 0; i < MOE_MAX_PER_LANE; i++) {
			if (v[i] > best) { /* the first (lowest id) of equals */
				best = v[i];
				bi = lane + 32 * i;
			}
		}
		for (int o = 16; o > 0; o >>= 1) {
			const float ob = __shfl_xor_sync(0xffffffffu, best, o);
			const int oi = __shfl_xor_sync(0xffffffffu, bi, o);

			if (ob > best || (ob == best && oi < bi)) {
				best = ob;
				bi = oi;
			}
		}
		if (bi % 32 == lane)
#pragma unroll
			for (int i = 0; i < MOE_MAX_PER_LANE; i++)
				if (i == bi / 32)
					v[i] = -INFINITY;
		if (lane == 0) {
			sel[r * k + t] = bi;
			w[r * k + t] = best;
		}
		wsum += (double)best; /* the CPU's sum: in double, in order */
	}
	if (norm) {
		__syncwarp();
		float f = (float)wsum;

		f = f < 6.103515625e-5f ? 6.103515625e-5f : f;

		if (lane < (int)k)
			w[r * k + lane] = w[r * k + lane] / f;
	}
}

/* one block; thread e lists expert e's pairs (see kernels.h) */
__global__ void moe_group_k(const int32_t *ids, uint32_t ids_ld, uint32_t rows,
			    uint32_t n_slots, uint32_t n_exp, int x_per_slot,
			    int32_t *items, int32_t *pair_x, int32_t *pair_y,
			    int32_t *n_items)
{
	CUDA_DYNAMIC_SHARED(int32_t, count); /* [n_exp] */
	int32_t *first = count + n_exp;	     /* its first pair */
	int32_t *item0 = first + n_exp;	     /* its first item */
	const uint32_t pairs = rows * n_slots;

	for (uint32_t e = threadIdx.x; e < n_exp; e += blockDim.x)
		count[e] = 0;
	__syncthreads();
	for (uint32_t e = threadIdx.x; e < n_exp; e += blockDim.x) {
		int32_t c = 0;

		for (uint32_t q = 0; q < pairs; q++)
			c += ids[(uint64_t)(q / n_slots) * ids_ld +
				 q % n_slots] == (int32_t)e;
		count[e] = c;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		int32_t f = 0, it = 0;

		for (uint32_t e = 0; e < n_exp; e++) {
			first[e] = f;
			item0[e] = it;
			f += count[e];
			it += (count[e] + 7) / 8;
		}
		*n_items = it;
	}
	__syncthreads();
	for (uint32_t e = threadIdx.x; e < n_exp; e += blockDim.x) {
		int32_t at = first[e];

		for (int32_t j = 0; j < count[e]; j += 8) {
			int32_t *item = items + 3 * (item0[e] + j / 8);

			item[0] = (int32_t)e;
			item[1] = at + j;
			item[2] = count[e] - j < 8 ? count[e] - j : 8;
		}
		for (uint32_t q = 0; q < pairs && count[e]; q++) {
			if (ids[(uint64_t)(q / n_slots) * ids_ld +
				q % n_slots] != (int32_t)e)
				continue;
			pair_x[at] = x_per_slot ? (int32_t)q :
						  (int32_t)(q / n_slots);
			pair_y[at] = (int32_t)q;
			at++;
		}
	}
}

__global__ void moe_combine_k(float *out, uint64_t out_ld, const float *eo,
			      uint64_t eo_ld, const float *w, uint32_t k,
			      int64_t n)
{
	const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	const uint64_t r = blockIdx.y;

	if (c >= n)
		return;
	float acc = 0.0f;

	for (uint32_t i = 0; i < k; i++) {
		const float v = eo[(r * k + i) * eo_ld + c] * w[r * k + i];

		acc = i == 0 ? v : acc + v;
	}
	out[r * out_ld + c] = acc;
}

bool k_moe_route(const float *logits, uint64_t ld, uint32_t n_exp, uint32_t k,
		 bool norm, int32_t *sel, float *w, uint32_t rows,
		 cudaStream_t s)
{
	if (n_exp > 32 * MOE_MAX_PER_LANE || !k || k > n_exp || k > 32)
		return false;
	/* a warp per row, 4 rows a block: rows rounded up must not run */
	for (uint32_t r = 0; r < rows;) {
		const uint32_t n = rows - r >= 4 ? (rows - r) / 4 * 4 :
						   rows - r;
		const uint32_t per = n >= 4 ? 4 : 1;

		cuda_launch(moe_route_k, dim3(n / per), dim3(32 * per), 0, s,
			    logits + r * ld, ld, n_exp, k, (int)norm,
			    sel + r * k, w + r * k);
		r += n;
	}
	return true;
}

uint32_t k_moe_max_items(uint32_t pairs, uint32_t n_exp)
{
	return pairs / 8 + (pairs < n_exp ? pairs : n_exp);
}

void k_moe_group(const int32_t *ids, uint32_t ids_ld, uint32_t rows,
		 uint32_t n_slots, uint32_t n_exp, bool x_per_slot,
		 int32_t *items, int32_t *pair_x, int32_t *pair_y,
		 int32_t *n_items, cudaStream_t s)
{
	cuda_launch(moe_group_k, dim3(1), dim3(256),
		    (size_t)3 * n_exp * sizeof(int32_t), s, ids, ids_ld, rows,
		    n_slots, n_exp, (int)x_per_slot, items, pair_x, pair_y,
		    n_items);
}

void k_moe_combine(float *out, uint64_t out_ld, const float *eo, uint64_t eo_ld,
		   const float *w, uint32_t k, int64_t n, uint32_t rows,
		   cudaStream_t s)
{
	if (rows && n)
		cuda_launch(moe_combine_k,
			    dim3(cuda_div_up((uint64_t)n, 256), rows),
			    dim3(256), 0, s, out, out_ld, eo, eo_ld, w, k, n);
}
