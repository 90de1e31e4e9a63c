// SPDX-License-Identifier: MIT
/*
 * Matrix times a few activation rows, the decode step's product (ggml's
 * mul_mat_vec_q, written again): a warp per output row, its lanes
 * walking the row's blocks LPB lanes to a block (blocks.cuh), every
 * weight word read once for up to MMV_COLS activation rows, the lanes'
 * partial sums added by shuffles. Memory-bound: a warp reads
 * 32 / LPB blocks per step, consecutive warps consecutive rows.
 *
 * The same kernel runs MoE experts: a block then serves one work item
 * (expert, run of up to MMV_COLS (token, slot) pairs that chose it),
 * read from device memory, so that the routing never comes back to the
 * host and the step can be one CUDA graph.
 */
#include "blocks.cuh"
#include "kernels.h"

#define MMV_WARPS 4
#define MMV_COLS 8

/* The columns of this block: how many, and their x and y rows. */
template <int NC, bool MOE>
__device__ __forceinline__ int mmv_columns(const mmv_args &a, int32_t *xr,
					   int32_t *yr, const uint8_t **w)
{
	int cnt;

	if (MOE) {
		const int it = blockIdx.y;

		if (it >= *a.n_items)
			return 0;
		const int first = a.items[3 * it + 1];

		*w = a.w + (uint64_t)a.items[3 * it] * a.expert_bytes;
		cnt = a.items[3 * it + 2];
#pragma unroll
		for (int j = 0; j < NC; j++) {
			xr[j] = j < cnt ? a.pair_x[first + j] : 0;
			yr[j] = j < cnt ? a.pair_y[first + j] : 0;
		}
		return cnt;
	}
	const int c0 = blockIdx.y * NC;

	*w = a.w;
	cnt = (int)a.n_cols - c0 < NC ? (int)a.n_cols - c0 : NC;
#pragma unroll
	for (int j = 0; j < NC; j++)
		xr[j] = yr[j] = c0 + j;
	return cnt;
}

template <int T, int NC, bool MOE>
__global__ void __launch_bounds__(32 * MMV_WARPS) mmv_q(mmv_args a)
{
	typedef wq<T> W;
	typedef typename W::block block;
	typedef typename W::act act;
	const int64_t row = (int64_t)blockIdx.x * MMV_WARPS + threadIdx.y;
	const int lane = threadIdx.x, l = lane % W::LPB;
	const uint8_t *w;
	int32_t xr[NC], yr[NC];
	float sum[NC];
	const int cnt = mmv_columns<NC, MOE>(a, xr, yr, &w);

	if (cnt <= 0 || row >= a.n_out)
		return;
	const block *wb = (const block *)(w + row * a.row_bytes);
	const int64_t nb = a.n_in / W::QK;

#pragma unroll
	for (int j = 0; j < NC; j++)
		sum[j] = 0.0f;
	for (int64_t ib = lane / W::LPB; ib < nb; ib += 32 / W::LPB) {
#pragma unroll
		for (int j = 0; j < NC; j++) {
			if (j < cnt) {
				const act *ab = (const act *)(a.x +
							      xr[j] * a.x_ld) +
						ib;

				sum[j] += W::dot(wb + ib, ab, l);
			}
		}
	}
#pragma unroll
	for (int j = 0; j < NC; j++) {
		float s = cuda_warp_sum(sum[j]);

		if (lane == 0 && j < cnt)
			a.y[yr[j] * a.y_ld + row] = s;
	}
}

/* F32, F16, BF16 weights against F32 activations, two elements a lane */
template <int T, int NC, bool MOE>
__global__ void __launch_bounds__(32 * MMV_WARPS) mmv_f(mmv_args a)
{
	typedef wf<T> F;
	const int64_t row = (int64_t)blockIdx.x * MMV_WARPS + threadIdx.y;
	const int lane = threadIdx.x;
	const uint8_t *w;
	int32_t xr[NC], yr[NC];
	float sum[NC];
	const int cnt = mmv_columns<NC, MOE>(a, xr, yr, &w);

	if (cnt <= 0 || row >= a.n_out)
		return;
	const typename F::elem *wr =
		(const typename F::elem *)(w + row * a.row_bytes);

#pragma unroll
	for (int j = 0; j < NC; j++)
		sum[j] = 0.0f;
	for (int64_t i = lane; i < a.n_in; i += 32) {
		const float wv = F::get(wr, i);

#pragma unroll
		for (int j = 0; j < NC; j++) {
			if (j < cnt) {
				const float *x =
					(const float *)(a.x + xr[j] * a.x_ld);

				sum[j] += wv * F::round_act(x[i]);
			}
		}
	}
#pragma unroll
	for (int j = 0; j < NC; j++) {
		float s = cuda_warp_sum(sum[j]);

		if (lane == 0 && j < cnt)
			a.y[yr[j] * a.y_ld + row] = s;
	}
}

typedef void (*mmv_kernel)(mmv_args);

/* one weight type's kernels: [column count 1, 2, 4, 8][dense, MoE] */
struct mmv_entry {
	mmv_kernel k[4][2];
};

template <int T, bool Q> static constexpr mmv_entry mmv_make()
{
	if constexpr (Q)
		return { { { mmv_q<T, 1, false>, mmv_q<T, 1, true> },
			   { mmv_q<T, 2, false>, mmv_q<T, 2, true> },
			   { mmv_q<T, 4, false>, mmv_q<T, 4, true> },
			   { mmv_q<T, 8, false>, mmv_q<T, 8, true> } } };
	else
		return { { { mmv_f<T, 1, false>, mmv_f<T, 1, true> },
			   { mmv_f<T, 2, false>, mmv_f<T, 2, true> },
			   { mmv_f<T, 4, false>, mmv_f<T, 4, true> },
			   { mmv_f<T, 8, false>, mmv_f<T, 8, true> } } };
}

/* indexed by io_type; a type without kernels has none */
static const struct {
	uint32_t type;
	mmv_entry e;
} mmv_table[] = {
	{ T_F32, mmv_make<T_F32, false>() },
	{ T_F16, mmv_make<T_F16, false>() },
	{ T_BF16, mmv_make<T_BF16, false>() },
	{ T_Q4_0, mmv_make<T_Q4_0, true>() },
	{ T_Q4_1, mmv_make<T_Q4_1, true>() },
	{ T_Q5_0, mmv_make<T_Q5_0, true>() },
	{ T_Q5_1, mmv_make<T_Q5_1, true>() },
	{ T_Q8_0, mmv_make<T_Q8_0, true>() },
	{ T_Q2_K, mmv_make<T_Q2_K, true>() },
	{ T_Q3_K, mmv_make<T_Q3_K, true>() },
	{ T_Q4_K, mmv_make<T_Q4_K, true>() },
	{ T_Q5_K, mmv_make<T_Q5_K, true>() },
	{ T_Q6_K, mmv_make<T_Q6_K, true>() },
};

bool k_mmv(uint32_t w_type, const mmv_args &a, cudaStream_t s)
{
	const bool moe = a.items != nullptr;
	const unsigned gx = cuda_div_up((uint64_t)a.n_out, MMV_WARPS);
	int nc, k;

	for (const auto &t : mmv_table) {
		if (t.type != w_type)
			continue;
		if (moe) {
			if (a.max_items)
				cuda_launch(t.e.k[3][1], dim3(gx, a.max_items),
					    dim3(32, MMV_WARPS), 0, s, a);
			return true;
		}
		if (!a.n_cols)
			return true;
		/* the fewest columns that cover n_cols, up to 8 a block */
		for (k = 0, nc = 1; nc < (int)a.n_cols && k < 3; k++)
			nc *= 2;
		cuda_launch(t.e.k[k][0], dim3(gx, cuda_div_up(a.n_cols, nc)),
			    dim3(32, MMV_WARPS), 0, s, a);
		return true;
	}
	return false;
}
