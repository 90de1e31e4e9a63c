// SPDX-License-Identifier: MIT
/*
 * Matrix times a few activation rows, the decode step's product (ggml's
 * mul_mat_vec_q, written again): 1, 2 or 4 warps per output row (as
 * many as the row has steps, mmv_warps_per_row), their lanes walking
 * the row's blocks LPB lanes to a block (blocks.cuh), every weight word
 * read and unpacked once for up to MMV_COLS activation rows (MMV_WIDE
 * with LLMFS_CUDA_MMV_COLS=16: mmv_x's 9 to 16; a column adds its
 * activations' loads, the dp4a and the scales' products: the same for
 * mmv_x and mmv_xw), the lanes' partial sums
 * added by shuffles, the warps' in shared memory. Memory-bound: a warp
 * reads 32 / LPB blocks per step; a 4096-wide Q4_K row is 4 warps' one
 * step, so a matrix is one round of loads in flight, not four in series.
 * Float matrices (mmv_f) are summed in the CPU's order instead: 16 lanes
 * to a row, each row walked by its lanes alone.
 *
 * The same kernel runs MoE experts: a block then serves one work item
 * (expert, run of up to MMV_COLS (token, slot) pairs that chose it),
 * read from device memory, so that the routing never comes back to the
 * host and the step can be one CUDA graph.
 */
#include <cstdlib>
#include <cstring>

#include "blocks.cuh"
#include "blocks_x86.cuh"
#include "kernels.h"

#define MMV_WARPS 4
#define MMV_COLS 8
#define MMV_FLANES 16 /* lanes of a float row (mmv_f) */
#define MMV_FROWS (MMV_WARPS * 32 / MMV_FLANES)
#define MMV_XLANES 8 /* lanes of a quantized row in the CPU's order (mmv_x) */
#define MMV_XROWS (MMV_WARPS * 32 / MMV_XLANES)
/*
 * Columns of mmv_x's wide launch (LLMFS_CUDA_MMV_COLS=16): 9 to 16
 * activation rows a weight read instead of two reads of 8.
 */
#define MMV_WIDE 16

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

/* y[i] = s, or the residual y + s (the CPU's separate add, its bits) */
__device__ __forceinline__ void mmv_store(const mmv_args &a, float *y,
					  uint64_t i, float s)
{
	y[i] = a.accumulate ? y[i] + s : s;
}

/*
 * Where row `row` of the launch lives: a.w's, or with segments (several
 * matrices of one type and width after each other, a.n_seg > 1) the row
 * row - seg_end[s - 1] of matrix s, its output seg_y[s].
 */
struct mmv_target {
	const uint8_t *w; /* the matrix */
	float *y;
	uint64_t y_ld;
	int64_t row; /* in that matrix */
};

template <bool MOE>
__device__ __forceinline__ mmv_target mmv_locate(const mmv_args &a,
						 const uint8_t *w, int64_t row)
{
	mmv_target t = { w, a.y, a.y_ld, row };

	if (!MOE && a.n_seg > 1) {
		uint32_t s = 0;

		while (s + 1 < a.n_seg && row >= a.seg_end[s])
			s++;
		t.w = a.seg_w[s];
		t.y = a.seg_y[s];
		t.y_ld = a.seg_ld[s];
		t.row = s ? row - a.seg_end[s - 1] : row;
	}
	return t;
}

/*
 * The warps of a block share rows: a.wpr warps to a row (1, 2 or 4, so
 * that a short row is not left to one warp walking it while the others
 * idle, and a long one is walked by 4 at once: fewer steps in series,
 * more loads in flight), 4 / a.wpr rows a block. Their partial sums meet
 * in shared memory, added in warp order by the row's first warp.
 */
/*
 * The CPU's SwiGLU of element i of n (elem.cu swiglu_k): ggml_v_expf on
 * whole vectors of 16, libm on the rest, two roundings.
 */
__device__ __forceinline__ float mmv_swiglu(float g, float u, int64_t i,
					    int64_t n)
{
	const float e = i < n - n % CUDA_CPU_LANES ? cuda_v_expf(0.0f - g) :
						     cuda_libm_expf(-g);

	return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, e)), u);
}

/* the warps' sums of a row added, in warp order */
template <int NC>
__device__ __forceinline__ void mmv_reduce(float *sum, float (*part)[NC],
					   int wpr)
{
	const int lane = threadIdx.x, warp = threadIdx.y;
	const int first = warp - warp % wpr;

#pragma unroll
	for (int j = 0; j < NC; j++)
		sum[j] = cuda_warp_sum(sum[j]);
	if (wpr == 1)
		return;
	if (lane == 0)
#pragma unroll
		for (int j = 0; j < NC; j++)
			part[warp][j] = sum[j];
	__syncthreads();
#pragma unroll
	for (int j = 0; j < NC; j++) {
		sum[j] = part[first][j];
		for (int k = 1; k < wpr; k++)
			sum[j] += part[first + k][j];
	}
}

/* the row's sums (and its second matrix's, a.w2) out */
template <int NC>
__device__ __forceinline__ void
mmv_finish(const mmv_args &a, float *sum, float *sum2, const int32_t *yr,
	   int cnt, int64_t row, const mmv_target &t)
{
	__shared__ float part[2][MMV_WARPS][NC];
	const int wpr = (int)a.wpr;

	mmv_reduce<NC>(sum, part[0], wpr);
	if (a.w2)
		mmv_reduce<NC>(sum2, part[1], wpr);
	if (threadIdx.y % wpr || threadIdx.x || row >= a.n_out)
		return;
#pragma unroll
	for (int j = 0; j < NC; j++)
		if (j < cnt)
			mmv_store(a, t.y, yr[j] * t.y_ld + t.row,
				  a.w2 ? mmv_swiglu(sum[j], sum2[j], row,
						    a.n_out) :
					 sum[j]);
}

template <int T, int NC, bool MOE>
__global__ void __launch_bounds__(32 * MMV_WARPS) mmv_q(mmv_args a)
{
	cuda_pdl_start();
	typedef wq<T> W;
	typedef typename W::block block;
	typedef typename W::act act;
	typedef typename W::bits bits;
	const int wpr = (int)a.wpr, warp = threadIdx.y;
	const int64_t row = (int64_t)blockIdx.x * (MMV_WARPS / wpr) +
			    warp / wpr;
	const int lane = threadIdx.x, l = lane % W::LPB;
	const bool glu = !MOE && a.w2;
	const uint8_t *w;
	int32_t xr[NC], yr[NC];
	float sum[NC], sum2[NC];
	const int cnt = mmv_columns<NC, MOE>(a, xr, yr, &w);
	const mmv_target t = mmv_locate<MOE>(a, w, row);

	/* whole blocks leave together: mmv_finish waits for every warp */
	if (cnt <= 0)
		return;
#pragma unroll
	for (int j = 0; j < NC; j++)
		sum[j] = sum2[j] = 0.0f;
	if (row < a.n_out) {
		const block *wb = (const block *)(t.w + t.row * a.row_bytes);
		const block *wb2 = (const block *)(a.w2 + row * a.row_bytes);
		const int64_t nb = a.n_in / W::QK;
		const int step = wpr * (32 / W::LPB);

		for (int64_t ib = (warp % wpr) * (32 / W::LPB) + lane / W::LPB;
		     ib < nb; ib += step) {
			/* the block's weights unpacked once for the columns */
			const bits u = W::unpack(wb + ib, l);
			const bits u2 = glu ? W::unpack(wb2 + ib, l) : u;

#pragma unroll
			for (int j = 0; j < NC; j++) {
				if (j >= cnt)
					continue;
				const act *ab = (const act *)(a.x +
							      xr[j] * a.x_ld) +
						ib;

				sum[j] += W::dot(u, ab, l);
				if (glu)
					sum2[j] += W::dot(u2, ab, l);
			}
		}
	}
	mmv_finish<NC>(a, sum, sum2, yr, cnt, row, t);
}

/*
 * A float row's steps of 64 (mmv_f), ALIGNED: 16-byte activation and
 * ALIGN-byte weight loads (one test a row, outside the loop).
 */
template <int T, int NC, bool ALIGNED>
__device__ __forceinline__ void
mmv_f_steps(const mmv_args &a, const typename wf<T>::elem *wr,
	    const typename wf<T>::elem *wr2, bool glu, const int32_t *xr,
	    int cnt, int g, int64_t np, float (*acc)[wf<T>::ACC],
	    float (*acc2)[wf<T>::ACC])
{
	typedef wf<T> F;

	for (int64_t i = 4 * g; i < np; i += 64) {
		float wv[4], wv2[4];

		F::get4(wr, i, ALIGNED, wv);
		if (glu)
			F::get4(wr2, i, ALIGNED, wv2);
#pragma unroll
		for (int j = 0; j < NC; j++) {
			if (j >= cnt)
				continue;
			const float *xp = (const float *)(a.x +
							  xr[j] * a.x_ld) +
					  i;
			float xv[4];

			wf_load4(xp, ALIGNED, xv);
#pragma unroll
			for (int k = 0; k < 4; k++)
				xv[k] = F::round_act(xv[k]);
			F::step(acc[j], wv, xv);
			if (glu)
				F::step(acc2[j], wv2, xv);
		}
	}
}

/*
 * F32, F16, BF16 weights against F32 activations (rounded to the
 * weight's vec_dot type as they are read), in the CPU's order
 * (blocks.cuh wf): MMV_FLANES lanes to a row, walking it alone in steps
 * of 64 elements, so that every accumulator sees its elements in the
 * CPU's sequence; MMV_FROWS rows a block. Lane 0 of a row adds the tail
 * (n_in mod 64 elements; none in the usual shapes) in order.
 */
template <int T, int NC, bool MOE>
__global__ void __launch_bounds__(32 * MMV_WARPS) mmv_f(mmv_args a)
{
	cuda_pdl_start();
	typedef wf<T> F;
	typedef typename F::elem elem;
	const int lane = threadIdx.x, g = lane % MMV_FLANES;
	const int64_t row = (int64_t)blockIdx.x * MMV_FROWS +
			    threadIdx.y * (32 / MMV_FLANES) + lane / MMV_FLANES;
	const bool glu = !MOE && a.w2;
	const uint8_t *w;
	int32_t xr[NC], yr[NC];
	float acc[NC][F::ACC], acc2[NC][F::ACC];
	const int cnt = mmv_columns<NC, MOE>(a, xr, yr, &w);
	const mmv_target t = mmv_locate<MOE>(a, w, row);
	const bool in = row < a.n_out;
	const int64_t n = a.n_in, np = n & ~(int64_t)63;

	if (cnt <= 0)
		return;
#pragma unroll
	for (int j = 0; j < NC; j++)
#pragma unroll
		for (int k = 0; k < F::ACC; k++)
			acc[j][k] = acc2[j][k] = 0.0f;
	const elem *wr = (const elem *)(t.w + (in ? t.row : 0) * a.row_bytes);
	const elem *wr2 = glu ? (const elem *)(a.w2 +
					       (in ? row : 0) * a.row_bytes) :
				wr;
	/* one test a row: 16-byte activation loads, ALIGN-byte weights */
	const bool aligned = !(((uintptr_t)wr | (uintptr_t)wr2) % F::ALIGN) &&
			     !(((uintptr_t)a.x | a.x_ld) % 16);

	if (in && aligned)
		mmv_f_steps<T, NC, true>(a, wr, wr2, glu, xr, cnt, g, np, acc,
					 acc2);
	else if (in)
		mmv_f_steps<T, NC, false>(a, wr, wr2, glu, xr, cnt, g, np, acc,
					  acc2);
		/* every lane folds (the shuffles want them all), lane 0 of a row ends */
#pragma unroll
	for (int j = 0; j < NC; j++) {
		typename F::sum_t s = F::fold(acc[j]), s2 = 0;

		if (glu)
			s2 = F::fold(acc2[j]);
		if (g || !in || j >= cnt)
			continue;
		const float *x = (const float *)(a.x + xr[j] * a.x_ld);

		for (int64_t i = np; i < n; i++) {
			const float xi = F::round_act(x[i]);

			s = F::tail_add(s, F::get(wr, i), xi, i, np, n);
			if (glu)
				s2 = F::tail_add(s2, F::get(wr2, i), xi, i, np,
						 n);
		}
		mmv_store(
			a, t.y, yr[j] * t.y_ld + t.row,
			glu ? mmv_swiglu(F::end(s), F::end(s2), row, a.n_out) :
			      F::end(s));
	}
}

/*
 * The rows' floats folded (wx_end, every thread) and stored by the
 * threads not told to skip (thread 0 of a row's 8).
 */
template <int T, int NC, bool REPACKED>
__device__ __forceinline__ void
mmv_x_store(const mmv_args &a, const mmv_target &t, const float *acc,
	    const float *accm, const float *acc2, const float *accm2, bool glu,
	    const int32_t *yr, int cnt, bool skip, int64_t row)
{
#pragma unroll
	for (int j = 0; j < NC; j++) {
		if (j >= cnt)
			continue;
		const float s = wx_end<T, REPACKED>(acc[j], accm[j]);
		const float s2 = glu ? wx_end<T, REPACKED>(acc2[j], accm2[j]) :
				       0.0f;

		if (skip)
			continue;
		mmv_store(a, t.y, yr[j] * t.y_ld + t.row,
			  glu ? mmv_swiglu(s, s2, row, a.n_out) : s);
	}
}

/*
 * A quantized matrix in the CPU's order, bit for bit (blocks_x86.cuh):
 * MMV_XLANES lanes to a row, lane l the CPU's float lane l, each walking
 * the row's blocks in order; MMV_XROWS rows a block. REPACKED: the
 * order of llama.cpp's repacked gemv (mmv_args.repacked). The default
 * before mmv_xw, kept to compare (LLMFS_CUDA_MMV=walk): a row's blocks
 * are walked by its 8 lanes one block at a time, 4 rows a warp, so a
 * warp has about one block of each of its rows in flight.
 */
template <int T, int NC, bool MOE, bool REPACKED>
__global__ void __launch_bounds__(32 * MMV_WARPS) mmv_x(mmv_args a)
{
	cuda_pdl_start();
	typedef wx<T> X;
	typedef typename X::block block;
	typedef typename X::act act;
	typedef typename X::bits bits;
	const int lane = threadIdx.x, l = lane % MMV_XLANES;
	const int64_t row = (int64_t)blockIdx.x * MMV_XROWS +
			    threadIdx.y * (32 / MMV_XLANES) + lane / MMV_XLANES;
	const bool glu = !MOE && a.w2;
	const uint8_t *w;
	int32_t xr[NC], yr[NC];
	float acc[NC], accm[NC], acc2[NC], accm2[NC];
	const int cnt = mmv_columns<NC, MOE>(a, xr, yr, &w);
	const mmv_target t = mmv_locate<MOE>(a, w, row);
	const bool in = row < a.n_out;
	const int64_t nb = a.n_in / X::QK;

	if (cnt <= 0)
		return;
#pragma unroll
	for (int j = 0; j < NC; j++)
		acc[j] = accm[j] = acc2[j] = accm2[j] = 0.0f;
	/* a lane without a row walks row 0: the shuffles want every lane */
	const block *wb = (const block *)(t.w + (in ? t.row : 0) * a.row_bytes);
	const block *wb2 = glu ? (const block *)(a.w2 +
						 (in ? row : 0) * a.row_bytes) :
				 wb;

	/* each block's weights loaded and unpacked once for the NC columns */
	for (int64_t ib = 0; ib < nb; ib++) {
		const bits u = X::unpack(wb + ib, l);
		const bits u2 = glu ? X::unpack(wb2 + ib, l) : u;

#pragma unroll
		for (int j = 0; j < NC; j++) {
			if (j >= cnt)
				continue;
			const act *ab = (const act *)(a.x + xr[j] * a.x_ld) +
					ib;

			wx_step<T, REPACKED>(u, ab, l, acc[j], accm[j]);
			if (glu)
				wx_step<T, REPACKED>(u2, ab, l, acc2[j],
						     accm2[j]);
		}
	}
	mmv_x_store<T, NC, REPACKED>(a, t, acc, accm, acc2, accm2, glu, yr, cnt,
				     l || !in, row);
}

/* the parts p of blocks b..b+3 (threads 8k + l: block b + k) applied */
template <int T, int NC, bool GLU, bool REPACKED, bool TAIL>
__device__ __forceinline__ void
mmv_xw_apply(const typename wx<T>::part *p, const typename wx<T>::part *p2,
	     int64_t b, int64_t nb, int lim, float *acc, float *accm,
	     float *acc2, float *accm2)
{
	const int l = threadIdx.x % 8;

#pragma unroll
	for (int kk = 0; kk < 4; kk++) {
		if (TAIL && b + kk >= nb)
			return;
#pragma unroll
		for (int j = 0; j < NC; j++) {
			if (j >= lim)
				break;
			wx<T>::template apply<REPACKED>(
				wx_shfl(p[j], 8 * kk + l), l, acc[j], accm[j]);
			if (GLU)
				wx<T>::template apply<REPACKED>(
					wx_shfl(p2[j], 8 * kk + l), l, acc2[j],
					accm2[j]);
		}
	}
}

/*
 * One round of mmv_xw: the 4U blocks from ib, U a thread, gathered for
 * the first lim columns (and the second matrix, GLU) before any is
 * applied, so that all their loads are in flight at once (no branch
 * between them where lim is NC), then applied in block order. TAIL: the round that ends the row, its
 * blocks past nb not applied.
 */
template <int T, int NC, bool GLU, bool REPACKED, int U, bool EAGER,
	  bool TAIL>
__device__ __forceinline__ void
mmv_xw_round(const mmv_args &a, const typename wx<T>::block *wb,
	     const typename wx<T>::block *wb2, const int32_t *xr, int lim,
	     int64_t ib, int64_t nb, float *acc, float *accm, float *acc2,
	     float *accm2)
{
	typedef wx<T> X;
	typedef typename X::act act;
	typedef typename X::part part;
	typedef typename X::bits bits;
	const int lane = threadIdx.x, l = lane % 8, k = lane / 8;
	part p[U][NC], p2[GLU ? U : 1][NC];

#pragma unroll
	for (int u = 0; u < U; u++) {
		/* past the row's end: the last block, not applied */
		const int64_t b = !TAIL || ib + 4 * u + k < nb ?
					  ib + 4 * u + k :
					  nb - 1;
		/* the block's weights loaded and unpacked once for its columns */
		const bits wu = X::unpack(wb + b, l);
		const bits wu2 = GLU ? X::unpack(wb2 + b, l) : wu;

#pragma unroll
		for (int j = 0; j < NC; j++) {
			if (j >= lim)
				break;
			const act *ab = (const act *)(a.x + xr[j] * a.x_ld) + b;

			p[u][j] = X::template dot<REPACKED>(wu, ab, l);
			if (GLU)
				p2[u][j] = X::template dot<REPACKED>(wu2, ab,
								     l);
			if (EAGER)
				mmv_xw_apply<T, 1, GLU, REPACKED, TAIL>(
					&p[u][j], &p2[u][j], ib + 4 * u, nb, 1,
					acc + j, accm + j, acc2 + j, accm2 + j);
		}
	}
	if (!EAGER)
#pragma unroll
		for (int u = 0; u < U; u++)
			mmv_xw_apply<T, NC, GLU, REPACKED, TAIL>(
				p[u], p2[GLU ? u : 0], ib + 4 * u, nb, lim, acc,
				accm, acc2, accm2);
}

/* a row's rounds (GLU: both matrices', wb and wb2, at once) */
template <int T, int NC, bool GLU, bool REPACKED, int U, bool EAGER>
__device__ __forceinline__ void
mmv_xw_row(const mmv_args &a, const typename wx<T>::block *wb,
	   const typename wx<T>::block *wb2, const int32_t *xr, int lim,
	   int64_t nb, float *acc, float *accm, float *acc2, float *accm2)
{
	int64_t ib;

	for (ib = 0; ib + 4 * U <= nb; ib += 4 * U)
		mmv_xw_round<T, NC, GLU, REPACKED, U, EAGER, false>(
			a, wb, wb2, xr, lim, ib, nb, acc, accm, acc2, accm2);
	if (ib < nb)
		mmv_xw_round<T, NC, GLU, REPACKED, U, EAGER, true>(
			a, wb, wb2, xr, lim, ib, nb, acc, accm, acc2, accm2);
}

/*
 * The CPU's order with a warp to a row (the default): thread 8k + l
 * gathers CPU lane l's part of blocks k, k + 4, ... k + 4 (U - 1) of
 * each round of 4U (wx<T>::unpack, once, then wx<T>::dot for each
 * column: the integer sums, scales, their loads, all exact, all in
 * flight at once), then every thread takes
 * its lane's parts of the round's blocks in order by shuffles and
 * applies them (the FMAs, the only work in series), so all 32 threads
 * end with the 8 lanes' floats, which threads 0-7 fold. Against mmv_x,
 * 4 times the warps (one row each instead of 4), each thread's U
 * blocks requested before any is used: about 4U times the bytes of a
 * matrix in flight (Documentation/gpu.md); the price, every thread
 * applying every block (4 times the FMAs) and 2-4 shuffles a block and
 * column. GLU: a.w2 read beside a.w (gate and up, SwiGLU on the way
 * out).
 */
template <int T, int NC, bool MOE, bool GLU, bool REPACKED>
__global__ void __launch_bounds__(32 * MMV_WARPS) mmv_xw(mmv_args a)
{
	cuda_pdl_start();
	typedef wx<T> X;
	typedef typename X::block block;
	/*
	 * Blocks a thread gathers at once: fewer with more columns (more
	 * work a block, the parts of every column held) or a second matrix
	 * (twice the bytes); from 4 columns on, the second matrix's rounds
	 * come after the first's (half the parts held).
	 */
	constexpr bool BOTH = GLU && NC <= 2;
	constexpr int U0 = X::U * 2 / ((NC > 2 ? NC : 2) * (BOTH ? 2 : 1));
	constexpr int U = U0 ? U0 : 1;
	/*
	 * each column applied as soon as it is gathered, not all gathered
	 * first (fewer registers: no parts of 8 columns held; the loads are
	 * the blocks' unpack and each column's activations, which the
	 * compiler still issues early): 8 columns a block a thread, and an
	 * expert's (lim = cnt, most often 1)
	 */
	constexpr bool EAGER = NC >= 8 && (U == 1 || MOE);
	const int64_t row = (int64_t)blockIdx.x * MMV_WARPS + threadIdx.y;
	const uint8_t *w;
	int32_t xr[NC], yr[NC];
	float acc[NC], accm[NC], acc2[NC], accm2[NC];
	const int cnt = mmv_columns<NC, MOE>(a, xr, yr, &w);
	const mmv_target t = mmv_locate<MOE>(a, w, row);
	const int64_t nb = a.n_in / X::QK;
	/*
	 * the columns gathered: all NC in a dense launch (no branch; past
	 * cnt, column 0 again, not stored), an expert's cnt (often 1 of 8)
	 */
	const int lim = MOE ? cnt : NC;

	/* a warp is a row: no other warp waits for this one */
	if (cnt <= 0 || row >= a.n_out)
		return;
#pragma unroll
	for (int j = 0; j < NC; j++) {
		acc[j] = accm[j] = acc2[j] = accm2[j] = 0.0f;
		if (j >= cnt)
			xr[j] = xr[0];
	}
	const block *wb = (const block *)(t.w + t.row * a.row_bytes);
	const block *wb2 = (const block *)(a.w2 +
					   (GLU ? row : 0) * a.row_bytes);

	mmv_xw_row<T, NC, BOTH, REPACKED, U, EAGER>(a, wb, wb2, xr, lim, nb, acc, accm,
					     acc2, accm2);
	/* the second matrix after the first: one's parts held at a time */
	if (GLU && !BOTH)
		mmv_xw_row<T, NC, false, REPACKED, U, EAGER>(a, wb2, wb2, xr, lim, nb,
						      acc2, accm2, acc2, accm2);
	mmv_x_store<T, NC, REPACKED>(a, t, acc, accm, acc2, accm2, GLU, yr, cnt,
				     threadIdx.x != 0, row);
}

typedef void (*mmv_kernel)(mmv_args);

/*
 * one weight type's kernels: k, [column count 1, 2, 4, 8][dense, MoE];
 * x, the CPU's order: [mmv_xw, mmv_x][its own, repacked (the same
 * kernels where the type has no repacked order)][column count 1, 2, 4,
 * 8, then MoE (8 columns: k_mmv launches no other), then 1, 2, 4, 8
 * with a second matrix (a.w2)]; none for the float types
 */
struct mmv_entry {
	mmv_kernel k[4][2];
	mmv_kernel x[2][2][9];
	mmv_kernel wide[2]; /* mmv_x of MMV_WIDE columns: own, repacked */
};

template <int T, bool R> static constexpr void mmv_make_x(mmv_kernel (*x)[9])
{
	x[0][0] = mmv_xw<T, 1, false, false, R>;
	x[0][1] = mmv_xw<T, 2, false, false, R>;
	x[0][2] = mmv_xw<T, 4, false, false, R>;
	x[0][3] = mmv_xw<T, 8, false, false, R>;
	x[0][4] = mmv_xw<T, 8, true, false, R>;
	x[0][5] = mmv_xw<T, 1, false, true, R>;
	x[0][6] = mmv_xw<T, 2, false, true, R>;
	x[0][7] = mmv_xw<T, 4, false, true, R>;
	x[0][8] = mmv_xw<T, 8, false, true, R>;
	x[1][0] = mmv_x<T, 1, false, R>;
	x[1][1] = mmv_x<T, 2, false, R>;
	x[1][2] = mmv_x<T, 4, false, R>;
	x[1][3] = mmv_x<T, 8, false, R>;
	x[1][4] = mmv_x<T, 8, true, R>;
	for (int n = 5; n < 9; n++)
		x[1][n] = x[1][n - 5]; /* mmv_x reads a.w2 where it is set */
}

/* the types with a repacked order (engine/quant/traits.c vec_dot_repacked) */
static constexpr bool mmv_repacks(int t)
{
	return t == T_Q4_0 || t == T_Q4_K || t == T_Q2_K;
}

template <int T, bool Q> static constexpr mmv_entry mmv_make()
{
	mmv_entry e = {};

	if constexpr (Q) {
		e = { { { mmv_q<T, 1, false>, mmv_q<T, 1, true> },
			{ mmv_q<T, 2, false>, mmv_q<T, 2, true> },
			{ mmv_q<T, 4, false>, mmv_q<T, 4, true> },
			{ mmv_q<T, 8, false>, mmv_q<T, 8, true> } },
		      {},
		      { mmv_x<T, MMV_WIDE, false, false>,
			mmv_x<T, MMV_WIDE, false, mmv_repacks(T)> } };
		mmv_kernel own[2][9], rep[2][9];

		mmv_make_x<T, false>(own);
		mmv_make_x<T, mmv_repacks(T)>(rep);
		for (int v = 0; v < 2; v++)
			for (int n = 0; n < 9; n++) {
				e.x[v][0][n] = own[v][n];
				e.x[v][1][n] = rep[v][n];
			}
	} else {
		e = { { { mmv_f<T, 1, false>, mmv_f<T, 1, true> },
			{ mmv_f<T, 2, false>, mmv_f<T, 2, true> },
			{ mmv_f<T, 4, false>, mmv_f<T, 4, true> },
			{ mmv_f<T, 8, false>, mmv_f<T, 8, true> } },
		      {},
		      {} };
	}
	return e;
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

/*
 * Which kernel a quantized matrix gets, by $LLMFS_CUDA_MMV: unset or
 * "cpu", the CPU's order, its bits: mmv_xw (a warp a row), but mmv_x
 * for a dense launch of more than 4 columns (there both are bound by
 * instruction issue, not by loads in flight, and mmv_x issues fewer:
 * expected, Documentation/gpu.md); "warp", mmv_xw always; "walk", mmv_x
 * always (8 threads a row walking its blocks); "lanes", mmv_q (a
 * block's sum split over LPB lanes, the lanes' and warps' sums added in
 * another order: within 2e-5 of the CPU's, not its bits); "old", mmv_q
 * with one warp a row (to compare them on a card).
 */
enum mmv_choice {
	MMV_CPU_ORDER,
	MMV_CPU_WARP,
	MMV_CPU_WALK,
	MMV_LANES,
	MMV_OLD
};

static enum mmv_choice mmv_choice(void)
{
	/* read at each launch (test_cuda switches it; a graph's once) */
	const char *e = getenv("LLMFS_CUDA_MMV");

	return !e || !strcmp(e, "cpu") ? MMV_CPU_ORDER :
	       !strcmp(e, "warp")      ? MMV_CPU_WARP :
	       !strcmp(e, "walk")      ? MMV_CPU_WALK :
	       !strcmp(e, "old")       ? MMV_OLD :
					 MMV_LANES;
}

/*
 * Whether a dense launch of more than MMV_COLS columns in the CPU's
 * order takes mmv_x of MMV_WIDE columns, each weight block read and
 * unpacked once for 16 rows ($LLMFS_CUDA_MMV_COLS=16), rather than a
 * read of 8 (unset or 8, the default): no card has timed it yet
 * (Documentation/gpu.md, "Many sequences a step"). The same bits.
 */
static bool mmv_wide(void)
{
	const char *e = getenv("LLMFS_CUDA_MMV_COLS");

	return e && !strcmp(e, "16");
}

/*
 * Warps to a row of a quantized matrix for mmv_q: as many as the row has
 * steps of a warp (32 / LPB blocks), at most MMV_WARPS, a power of two;
 * one with LLMFS_CUDA_MMV=old. 0 for the float types (mmv_f gives a row
 * MMV_FLANES lanes) and for the CPU's order (mmv_xw, mmv_x).
 */
static uint32_t mmv_warps_per_row(uint32_t w_type, int64_t n_in,
				  enum mmv_choice c)
{
	int64_t steps;
	uint32_t wpr = 1;

	if (w_type == T_F32 || w_type == T_F16 || w_type == T_BF16 ||
	    c == MMV_CPU_ORDER || c == MMV_CPU_WARP || c == MMV_CPU_WALK)
		return 0;
	if (c == MMV_OLD)
		return 1;
	switch (w_type) {
	case T_Q2_K:
	case T_Q3_K: steps = n_in / QK_K * 16 / 32; break;
	case T_Q4_K:
	case T_Q5_K:
	case T_Q6_K: steps = n_in / QK_K * 8 / 32; break;
	default: steps = n_in / 32 * 4 / 32; break;
	}
	while (wpr < MMV_WARPS && (int64_t)wpr * 2 <= steps)
		wpr *= 2;
	return wpr;
}

/*
 * One launch: the MoE kernel over the work items, or the dense kernel of
 * the fewest columns that cover n_cols (up to 8 a block), gx blocks of
 * rows.
 */
static void mmv_launch(mmv_kernel const *dense, mmv_kernel moe, unsigned gx,
		       const mmv_args &a, cudaStream_t s)
{
	int nc, k;

	if (a.items) {
		if (a.max_items)
			cuda_launch_pdl(moe, dim3(gx, a.max_items),
					dim3(32, MMV_WARPS), 0, s, a);
		return;
	}
	if (!a.n_cols)
		return;
	for (k = 0, nc = 1; nc < (int)a.n_cols && k < 3; k++)
		nc *= 2;
	cuda_launch_pdl(dense[k], dim3(gx, cuda_div_up(a.n_cols, nc)),
			dim3(32, MMV_WARPS), 0, s, a);
}

bool k_mmv(uint32_t w_type, const mmv_args &args, cudaStream_t s)
{
	const enum mmv_choice c = mmv_choice();
	mmv_args a = args;

	a.wpr = mmv_warps_per_row(w_type, a.n_in, c);
	for (const auto &t : mmv_table) {
		if (t.type != w_type)
			continue;
		if (t.e.x[0][0][0] &&
		    (c == MMV_CPU_ORDER || c == MMV_CPU_WARP ||
		     c == MMV_CPU_WALK)) {
			/* the CPU's order: a warp a row, or MMV_XROWS a block */
			const bool walk = c == MMV_CPU_WALK ||
					  (c == MMV_CPU_ORDER && !a.items &&
					   a.n_cols > 4);
			mmv_kernel const *ks = t.e.x[walk][a.repacked ? 1 : 0];

			if (walk && !a.items && a.n_cols > MMV_COLS &&
			    mmv_wide()) {
				cuda_launch_pdl(
					t.e.wide[a.repacked ? 1 : 0],
					dim3(cuda_div_up((uint64_t)a.n_out,
							 MMV_XROWS),
					     cuda_div_up(a.n_cols, MMV_WIDE)),
					dim3(32, MMV_WARPS), 0, s, a);
				return true;
			}
			mmv_launch(a.w2 ? ks + 5 : ks, ks[4],
				   cuda_div_up((uint64_t)a.n_out,
					       walk ? MMV_XROWS : MMV_WARPS),
				   a, s);
			return true;
		}
		const mmv_kernel ks[4] = { t.e.k[0][0], t.e.k[1][0],
					   t.e.k[2][0], t.e.k[3][0] };

		mmv_launch(ks, t.e.k[3][1],
			   cuda_div_up((uint64_t)a.n_out,
				       a.wpr ? MMV_WARPS / a.wpr : MMV_FROWS),
			   a, s);
		return true;
	}
	return false;
}
