// SPDX-License-Identifier: MIT
/*
 * Prompt products on int8 tensor cores (MMQ): y = w . x for many rows of
 * x, the weights read in their GGUF blocks, the activations quantized to
 * Q8_1 (32 int8 with a scale d; quantize.cu).
 *
 * A block of 4 warps takes a tile of MMQ_ROWS weight rows by MMQ_COLS
 * activation rows and walks K 256 elements at a time: it unpacks the
 * tile's weights to int8 in shared memory with a float scale (and min)
 * per 32 elements (per 16 for Q6_K), copies the activations' int8 and
 * d, s beside them, then each warp multiplies its 16 weight rows with
 * all MMQ_COLS columns, one m16n8k32 mma (mma.cuh) per 32 elements and
 * 8 columns. Each mma's int32 sums are one block's dot products, scaled
 * into float accumulators: += dot * d_w * d_x, -= m_w * d_x sum(q_x)
 * for the types with mins (Q4_K; the sum counted from the int8, not
 * the block's half s, which is 2^-11 off). Q6_K's scales change every 16 elements: two
 * mmas a block, each with the other half of A zeroed.
 *
 * Not the CPU's order (nor its activations' type for the K-quants: the
 * CPU takes Q8_K): tests/engine/test_cuda.c checks it against the float
 * product within MMQ_REL. Opt-in (LLMFS_CUDA_MATMUL=mma) until a card
 * measures it (tools/gpu-check.sh, part mmq); Documentation/gpu.md.
 */
#include "blocks.cuh"
#include "kernels.h"
#include "mma.cuh"

#define MMQ_WARPS 4
#define MMQ_ROWS (16 * MMQ_WARPS) /* weight rows a block */
#define MMQ_COLS 64		  /* activation rows a block */
#define MMQ_K 256		  /* elements a stage */
#define MMQ_KB (MMQ_K / 32)	  /* 32-element blocks a stage */
/* a shared row's bytes: 16 more than MMQ_K, so that the 8 rows and 4
 * words a fragment load touches fall in 32 different banks */
#define MMQ_KP (MMQ_K + 16)

/*
 * a tile's 32 weights as int8, 4 to an int, with their scales;
 * mmq_type<T>: HALVES, a scale per 16 elements; MINS, d_min * min
 */
struct mmq_unpacked {
	int q[8];
	float d[2]; /* the scale of elements 0-15 and 16-31 */
	float m;    /* subtracted per element (d_min * min) */
};

/* 4 bytes b - o each (b + 128 - o < 256): the offset of unsigned quants */
__device__ __forceinline__ int mmq_bias(int v, int o)
{
	const unsigned k = 0x01010101u * (unsigned)(128 - o);

	return (int)(((unsigned)v + k) ^ 0x80808080u);
}

template <int T> struct mmq_type;

template <> struct mmq_type<T_Q8_0> {
	enum { HALVES = 0, MINS = 0 };
	static __device__ __forceinline__ void
	unpack(const uint8_t *row, int64_t ib, mmq_unpacked &u)
	{
		const blk_q8_0 *b = (const blk_q8_0 *)row + ib;

		for (int k = 0; k < 8; k++)
			u.q[k] = cuda_load_int_b2(b->qs + 4 * k);
		u.d[0] = u.d[1] = cuda_h2f(b->d);
		u.m = 0.0f;
	}
};

template <> struct mmq_type<T_Q4_0> {
	enum { HALVES = 0, MINS = 0 };
	static __device__ __forceinline__ void
	unpack(const uint8_t *row, int64_t ib, mmq_unpacked &u)
	{
		const blk_q4_0 *b = (const blk_q4_0 *)row + ib;

		for (int k = 0; k < 4; k++) {
			const int v = cuda_load_int_b2(b->qs + 4 * k);

			u.q[k] = mmq_bias(v & 0x0f0f0f0f, 8);
			u.q[k + 4] = mmq_bias((v >> 4) & 0x0f0f0f0f, 8);
		}
		u.d[0] = u.d[1] = cuda_h2f(b->d);
		u.m = 0.0f;
	}
};

/* 32-block ib of a row: sub-block ib % 8 of super-block ib / 8 */
template <> struct mmq_type<T_Q4_K> {
	enum { HALVES = 0, MINS = 1 };
	static __device__ __forceinline__ void
	unpack(const uint8_t *row, int64_t ib, mmq_unpacked &u)
	{
		const blk_q4_K *b = (const blk_q4_K *)row + ib / 8;
		const int j = (int)(ib % 8), shift = 4 * (j & 1);
		const uint8_t *qs = b->qs + 32 * (j / 2);
		int sc, mn;

		for (int k = 0; k < 8; k++)
			u.q[k] = (cuda_load_int_b2(qs + 4 * k) >> shift) &
				 0x0f0f0f0f;
		scale_min_k4(j, b->scales, &sc, &mn);
		u.d[0] = u.d[1] = cuda_h2f(b->d) * (float)sc;
		u.m = cuda_h2f(b->dmin) * (float)mn;
	}
};

/*
 * Q6_K: element e of a super-block is ql's nibble (byte 64 (e / 128) +
 * e % 32 + 32 (e / 32 % 2), high for e / 32 % 4 >= 2) with qh's two bits
 * (byte 32 (e / 128) + e % 32, bits 2 (e / 32 % 4)), minus 32; scale
 * e / 16.
 */
template <> struct mmq_type<T_Q6_K> {
	enum { HALVES = 1, MINS = 0 };
	static __device__ __forceinline__ void
	unpack(const uint8_t *row, int64_t ib, mmq_unpacked &u)
	{
		const blk_q6_K *b = (const blk_q6_K *)row + ib / 8;
		const int j = (int)(ib % 8), h = j / 4, qd = j % 4;
		const uint8_t *ql = b->ql + 64 * h + 32 * (qd & 1);
		const uint8_t *qh = b->qh + 32 * h;
		const float d = cuda_h2f(b->d);

		for (int k = 0; k < 8; k++) {
			const int lo = (cuda_load_int_b2(ql + 4 * k) >>
					(qd >= 2 ? 4 : 0)) &
				       0x0f0f0f0f;
			const int hi = ((cuda_load_int_b2(qh + 4 * k) >>
					 (2 * qd)) &
					0x03030303)
				       << 4;

			u.q[k] = mmq_bias(lo | hi, 32);
		}
		u.d[0] = d * (float)b->scales[2 * j];
		u.d[1] = d * (float)b->scales[2 * j + 1];
		u.m = 0.0f;
	}
};

struct mmq_shared {
	__align__(16) int8_t w[MMQ_ROWS][MMQ_KP];
	int8_t x[MMQ_COLS][MMQ_KP];
	float wd[MMQ_ROWS][2 * MMQ_KB]; /* per 16 elements */
	float wm[MMQ_ROWS][MMQ_KB];
	float xd[MMQ_COLS][MMQ_KB], xs[MMQ_COLS][MMQ_KB];
};

/* stage k0 (in 32-blocks) of the tile's weights into shared memory */
template <int T>
__device__ __forceinline__ void mmq_load_w(mmq_shared &sh, const mmq_args &a,
					   int64_t row0, int64_t k0)
{
	const int64_t nb = a.n_in / 32;

	for (int i = threadIdx.x; i < MMQ_ROWS * MMQ_KB; i += 32 * MMQ_WARPS) {
		const int r = i / MMQ_KB, kb = i % MMQ_KB;
		mmq_unpacked u = {};

		if (row0 + r < a.n_out && k0 + kb < nb)
			mmq_type<T>::unpack(a.w + (row0 + r) * a.row_bytes,
					    k0 + kb, u);
		for (int k = 0; k < 8; k++)
			*(int *)&sh.w[r][32 * kb + 4 * k] = u.q[k];
		sh.wd[r][2 * kb] = u.d[0];
		sh.wd[r][2 * kb + 1] = u.d[1];
		sh.wm[r][kb] = u.m;
	}
}

/* the same for the activations: Q8_1 blocks, copied, d and d sum(q) */
template <int T>
__device__ __forceinline__ void mmq_load_x(mmq_shared &sh, const mmq_args &a,
					   int64_t col0, int64_t k0)
{
	const int64_t nb = a.n_in / 32;

	for (int i = threadIdx.x; i < MMQ_COLS * MMQ_KB; i += 32 * MMQ_WARPS) {
		const int c = i / MMQ_KB, kb = i % MMQ_KB;
		const blk_q8_1 *b = nullptr;
		int sum = 0;

		if (col0 + c < a.rows && k0 + kb < nb)
			b = (const blk_q8_1 *)(a.x + (col0 + c) * a.x_ld) + k0 +
			    kb;
		for (int k = 0; k < 8; k++) {
			const int q = b ? cuda_load_int_b4(b->qs + 4 * k) : 0;

			*(int *)&sh.x[c][32 * kb + 4 * k] = q;
			if (mmq_type<T>::MINS)
				sum += byte_sum(q);
		}
		/* d * sum(q) in float: the block's half s is 2^-11 off it */
		sh.xd[c][kb] = b ? cuda_h2f(b->d) : 0.0f;
		sh.xs[c][kb] = sh.xd[c][kb] * (float)sum;
	}
}

/* the 4 int8 of a shared tile at (row, col), col a multiple of 4 */
__device__ __forceinline__ int mmq_word(const int8_t (*m)[MMQ_KP], int row,
					int col)
{
	return *(const int *)&m[row][col];
}

/*
 * Warp w's 16 weight rows times the MMQ_COLS columns over one stage,
 * into acc[column tile][register] (mma.cuh's C layout).
 */
template <int T>
__device__ __forceinline__ void mmq_stage(const mmq_shared &sh, int w, int lane,
					  float acc[MMQ_COLS / 8][4])
{
	const int zero[4] = { 0, 0, 0, 0 };

	for (int kb = 0; kb < MMQ_KB; kb++) {
		mma_s8_frag f;
		float wd[4], wd2[4], wm[4];

		for (int r = 0; r < 4; r++)
			f.a[r] = mmq_word(sh.w, 16 * w + mma_a_row(lane, r),
					  32 * kb + mma_a_col(lane, r, 0));
		for (int r = 0; r < 4; r++) {
			const int row = 16 * w + mma_c_row(lane, r);

			wd[r] = sh.wd[row][2 * kb];
			wd2[r] = sh.wd[row][2 * kb + 1];
			wm[r] = sh.wm[row][kb];
		}
		for (int t = 0; t < MMQ_COLS / 8; t++) {
			int d[4], d2[4];

			for (int r = 0; r < 2; r++)
				f.b[r] = mmq_word(
					sh.x, 8 * t + mma_b_col(lane),
					32 * kb + mma_b_row(lane, r, 0));
			if (mmq_type<T>::HALVES) {
				/* elements 0-15 are A's registers 0, 1 */
				mma_s8_frag lo = f, hi = f;

				lo.a[2] = lo.a[3] = 0;
				hi.a[0] = hi.a[1] = 0;
				mma_s8_16832(d, lo, zero);
				mma_s8_16832(d2, hi, zero);
			} else {
				mma_s8_16832(d, f, zero);
			}
			for (int r = 0; r < 4; r++) {
				const int col = 8 * t + mma_c_col(lane, r);
				const float xd = sh.xd[col][kb];
				float v = (float)d[r] * wd[r];

				if (mmq_type<T>::HALVES)
					v += (float)d2[r] * wd2[r];
				acc[t][r] += v * xd;
				if (mmq_type<T>::MINS)
					acc[t][r] -= wm[r] * sh.xs[col][kb];
			}
		}
	}
}

template <int T>
__global__ void __launch_bounds__(32 * MMQ_WARPS) mmq_kernel(mmq_args a)
{
	cuda_pdl_start();
	__shared__ mmq_shared sh;
	const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
	const int64_t row0 = (int64_t)blockIdx.x * MMQ_ROWS;
	const int64_t col0 = (int64_t)blockIdx.y * MMQ_COLS;
	float acc[MMQ_COLS / 8][4] = {};

	for (int64_t k0 = 0; k0 < a.n_in / 32; k0 += MMQ_KB) {
		__syncthreads(); /* the last stage's reads are done */
		mmq_load_w<T>(sh, a, row0, k0);
		mmq_load_x<T>(sh, a, col0, k0);
		__syncthreads();
		mmq_stage<T>(sh, w, lane, acc);
	}
	for (int t = 0; t < MMQ_COLS / 8; t++)
		for (int r = 0; r < 4; r++) {
			const int64_t row = row0 + 16 * w + mma_c_row(lane, r);
			const int64_t col = col0 + 8 * t + mma_c_col(lane, r);
			float *y = a.y + col * a.y_ld + row;

			if (row >= a.n_out || col >= a.rows)
				continue;
			*y = a.accumulate ? *y + acc[t][r] : acc[t][r];
		}
}

bool k_mmq_takes(uint32_t w_type, int64_t n_in)
{
	switch (w_type) {
	case T_Q8_0:
	case T_Q4_0: return n_in > 0 && n_in % 32 == 0;
	case T_Q4_K:
	case T_Q6_K: return n_in > 0 && n_in % QK_K == 0;
	default: return false;
	}
}

bool k_mmq(uint32_t w_type, const mmq_args &a, cudaStream_t s)
{
	const dim3 grid(cuda_div_up((uint64_t)a.n_out, MMQ_ROWS),
			cuda_div_up(a.rows, MMQ_COLS));
	const dim3 block(32 * MMQ_WARPS);

	if (!k_mmq_takes(w_type, a.n_in) || !a.rows)
		return false;
	switch (w_type) {
	case T_Q8_0:
		cuda_launch_pdl(mmq_kernel<T_Q8_0>, grid, block, 0, s, a);
		break;
	case T_Q4_0:
		cuda_launch_pdl(mmq_kernel<T_Q4_0>, grid, block, 0, s, a);
		break;
	case T_Q4_K:
		cuda_launch_pdl(mmq_kernel<T_Q4_K>, grid, block, 0, s, a);
		break;
	case T_Q6_K:
		cuda_launch_pdl(mmq_kernel<T_Q6_K>, grid, block, 0, s, a);
		break;
	}
	return true;
}

/* ---- the fragment check (module.h: llmfs_cuda_mma_fragments) -------------- */

/* one warp: lane l's registers in, its D out (regs: 32 x 10 ints) */
__global__ void mmq_fragments_kernel(int *regs)
{
	int *r = regs + 10 * threadIdx.x;
	mma_s8_frag f;
	int d[4];

	for (int i = 0; i < 4; i++)
		f.a[i] = r[i];
	f.b[0] = r[4];
	f.b[1] = r[5];
	mma_s8_16832(d, f, r + 6);
	for (int i = 0; i < 4; i++)
		r[6 + i] = d[i];
}

extern "C" __attribute__((visibility("default"))) int
llmfs_cuda_mma_fragments(int device, int32_t regs[32 * 10])
{
	int *p = nullptr;
	cudaError_t e;

	if ((e = cudaSetDevice(device)) != cudaSuccess ||
	    (e = cudaMalloc(&p, 32 * 10 * sizeof(int))) != cudaSuccess)
		return -EIO;
	e = cudaMemcpy(p, regs, 32 * 10 * sizeof(int), cudaMemcpyHostToDevice);
	if (e == cudaSuccess) {
		cuda_launch(mmq_fragments_kernel, dim3(1), dim3(32), 0,
			    (cudaStream_t)0, p);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
		e = cudaMemcpy(regs, p, 32 * 10 * sizeof(int),
			       cudaMemcpyDeviceToHost);
	cudaFree(p);
	return e == cudaSuccess ? 0 : -EIO;
}
