// SPDX-License-Identifier: MIT
/*
 * Prompt products on int8 tensor cores (MMQ): y = w . x for many rows of
 * x, the weights read in their GGUF blocks, the activations quantized to
 * Q8_1 (32 int8 with a scale d; quantize.cu).
 *
 * A block of 4 warps takes a tile of MMQ_ROWS weight rows by MMQ_COLS
 * activation rows and walks K 256 elements (a stage) at a time, in
 * three steps a stage:
 *
 *   copy    cp.async (cp_async.cuh) brings the next stage's weight
 *           blocks and Q8_1 blocks as they are into shared memory
 *           (wraw, xraw), while the warps multiply this one;
 *   unpack  the stage's weights become int8 (w) with a float scale (and
 *           min) per 32 elements, per 16 for the types with 16-element
 *           scales (HALVES), and the activations' d (and d sum(q))
 *           are read out beside them;
 *   mma     each warp multiplies its 16 weight rows with all MMQ_COLS
 *           columns, one m16n8k32 mma (mma.cuh) per 32 elements and 8
 *           columns, B read from xraw as it came.
 *
 * The weights' raw stage has one buffer (free once unpacked), the
 * activations' two (the mma reads one while the next lands). Each mma's
 * int32 sums are one block's dot products, scaled into float
 * accumulators: += dot * d_w * d_x, -= m_w * d_x sum(q_x) for the types
 * with mins (the sum counted from the int8, not the block's half s,
 * which is 2^-11 off it). A type with a scale per 16 elements takes two
 * mmas a block, each with the other half of A zeroed.
 *
 * Not the CPU's order (nor its activations' type for the K-quants: the
 * CPU takes Q8_K): tests/engine/test_cuda.c checks it against the float
 * product within MMQ_REL. Opt-in (LLMFS_CUDA_MATMUL=mma) until a card
 * measures it (tools/gpu-check.sh, part mmq); Documentation/gpu.md.
 */
#include "blocks.cuh"
#include "cp_async.cuh"
#include "kernels.h"
#include "mma.cuh"

#define MMQ_WARPS 4
#define MMQ_THREADS (32 * MMQ_WARPS)
#define MMQ_ROWS (16 * MMQ_WARPS) /* weight rows a block */
#define MMQ_COLS 64		  /* activation rows a block */
#define MMQ_K 256		  /* elements a stage */
#define MMQ_KB (MMQ_K / 32)	  /* 32-element blocks a stage */
/* an unpacked row's bytes: 16 more than MMQ_K, so that the 8 rows and 4
 * words a fragment load touches fall in 32 different banks */
#define MMQ_KP (MMQ_K + 16)
/* a column of a stage's Q8_1 blocks as they came (8 x 36 bytes), padded
 * to 76 words for the same reason (B's 8 columns, 4 words) */
#define MMQ_XP 304
/*
 * blocks an SM by shared memory (73-78 KB a block of the 227 KB): told
 * to ptxas, which otherwise spills a register of Q6_K's to keep to 72
 */
#define MMQ_BLOCKS_SM 2

/*
 * a tile's 32 weights as int8, 4 to an int, with their scales;
 * mmq_type<T>: HALVES, a scale (and min) per 16 elements; MINS, a
 * d_min * min subtracted per element
 */
struct mmq_unpacked {
	int q[8];
	float d[2]; /* the scale of elements 0-15 and 16-31 */
	float m[2]; /* subtracted per element, the same halves */
};

/* 4 bytes b - o each (b + 128 - o < 256): the offset of unsigned quants */
__device__ __forceinline__ int mmq_bias(int v, int o)
{
	const unsigned k = 0x01010101u * (unsigned)(128 - o);

	return (int)(((unsigned)v + k) ^ 0x80808080u);
}

/*
 * Per weight type: unpack(stage, ib, u), the 32-element block ib (0-7)
 * of a row's stage (8 blocks of 32, or one super-block of 256) as int8
 * and scales. The stage lies in shared memory 2-aligned: words are read
 * as two halves (cuda_load_int_b2).
 */
template <int T> struct mmq_type;

template <> struct mmq_type<T_Q8_0> {
	enum { HALVES = 0, MINS = 0 };
	static __device__ __forceinline__ void
	unpack(const uint8_t *st, int ib, mmq_unpacked &u)
	{
		const blk_q8_0 *b = (const blk_q8_0 *)st + ib;

		for (int k = 0; k < 8; k++)
			u.q[k] = cuda_load_int_b2(b->qs + 4 * k);
		u.d[0] = u.d[1] = cuda_h2f(b->d);
	}
};

template <> struct mmq_type<T_Q4_0> {
	enum { HALVES = 0, MINS = 0 };
	static __device__ __forceinline__ void
	unpack(const uint8_t *st, int ib, mmq_unpacked &u)
	{
		const blk_q4_0 *b = (const blk_q4_0 *)st + ib;

		for (int k = 0; k < 4; k++) {
			const int v = cuda_load_int_b2(b->qs + 4 * k);

			u.q[k] = mmq_bias(v & 0x0f0f0f0f, 8);
			u.q[k + 4] = mmq_bias((v >> 4) & 0x0f0f0f0f, 8);
		}
		u.d[0] = u.d[1] = cuda_h2f(b->d);
	}
};

/* y = d q + m: the min subtracted is -m */
template <> struct mmq_type<T_Q4_1> {
	enum { HALVES = 0, MINS = 1 };
	static __device__ __forceinline__ void
	unpack(const uint8_t *st, int ib, mmq_unpacked &u)
	{
		const blk_q4_1 *b = (const blk_q4_1 *)st + ib;

		for (int k = 0; k < 4; k++) {
			const int v = cuda_load_int_b2(b->qs + 4 * k);

			u.q[k] = v & 0x0f0f0f0f;
			u.q[k + 4] = (v >> 4) & 0x0f0f0f0f;
		}
		u.d[0] = u.d[1] = cuda_h2f(b->d);
		u.m[0] = u.m[1] = -cuda_h2f(b->m);
	}
};

/* element j: nibble j % 16 (high for j >= 16) with qh's bit j as bit 4 */
template <> struct mmq_type<T_Q5_0> {
	enum { HALVES = 0, MINS = 0 };
	static __device__ __forceinline__ void
	unpack(const uint8_t *st, int ib, mmq_unpacked &u)
	{
		const blk_q5_0 *b = (const blk_q5_0 *)st + ib;
		const uint32_t qh = (uint32_t)cuda_load_int_b2(b->qh);

		for (int k = 0; k < 4; k++) {
			const int v = cuda_load_int_b2(b->qs + 4 * k);

			u.q[k] = mmq_bias((v & 0x0f0f0f0f) | q5_high(qh, 4 * k),
					  16);
			u.q[k + 4] = mmq_bias(((v >> 4) & 0x0f0f0f0f) |
						      q5_high(qh, 16 + 4 * k),
					      16);
		}
		u.d[0] = u.d[1] = cuda_h2f(b->d);
	}
};

template <> struct mmq_type<T_Q5_1> {
	enum { HALVES = 0, MINS = 1 };
	static __device__ __forceinline__ void
	unpack(const uint8_t *st, int ib, mmq_unpacked &u)
	{
		const blk_q5_1 *b = (const blk_q5_1 *)st + ib;
		const uint32_t qh = (uint32_t)cuda_load_int_b2(b->qh);

		for (int k = 0; k < 4; k++) {
			const int v = cuda_load_int_b2(b->qs + 4 * k);

			u.q[k] = (v & 0x0f0f0f0f) | q5_high(qh, 4 * k);
			u.q[k + 4] = ((v >> 4) & 0x0f0f0f0f) |
				     q5_high(qh, 16 + 4 * k);
		}
		u.d[0] = u.d[1] = cuda_h2f(b->d);
		u.m[0] = u.m[1] = -cuda_h2f(b->m);
	}
};

/*
 * Q2_K and Q3_K: block ib's 32 elements are bits 2 (ib % 4) of qs bytes
 * 32 (ib / 4) .. +31, scale (and min) 2 ib and 2 ib + 1; Q3_K's are 4
 * less where hmask's bit ib of the same byte index is clear.
 */
template <> struct mmq_type<T_Q2_K> {
	enum { HALVES = 1, MINS = 1 };
	static __device__ __forceinline__ void
	unpack(const uint8_t *st, int ib, mmq_unpacked &u)
	{
		const blk_q2_K *b = (const blk_q2_K *)st;
		const uint8_t *qs = b->qs + 32 * (ib / 4);
		const int shift = 2 * (ib % 4);
		const float d = cuda_h2f(b->d), dmin = cuda_h2f(b->dmin);

		for (int k = 0; k < 8; k++)
			u.q[k] = (cuda_load_int_b2(qs + 4 * k) >> shift) &
				 0x03030303;
		for (int h = 0; h < 2; h++) {
			const int sc = b->scales[2 * ib + h];

			u.d[h] = d * (float)(sc & 0xF);
			u.m[h] = dmin * (float)(sc >> 4);
		}
	}
};

template <> struct mmq_type<T_Q3_K> {
	enum { HALVES = 1, MINS = 0 };
	static __device__ __forceinline__ void
	unpack(const uint8_t *st, int ib, mmq_unpacked &u)
	{
		const blk_q3_K *b = (const blk_q3_K *)st;
		const uint8_t *qs = b->qs + 32 * (ib / 4);
		const int shift = 2 * (ib % 4);
		const float d = cuda_h2f(b->d);

		for (int k = 0; k < 8; k++) {
			const unsigned lo =
				((unsigned)cuda_load_int_b2(qs + 4 * k) >>
				 shift) &
				0x03030303u;
			const unsigned nh =
				(((unsigned)cuda_load_int_b2(b->hmask + 4 * k) >>
				  ib) &
				 0x01010101u) ^
				0x01010101u;

			/* q - 4 is q | 0xfc for q < 4 */
			u.q[k] = (int)(lo | nh * 0xfcu);
		}
		u.d[0] = d * (float)scale_q3_K(b->scales, 2 * ib);
		u.d[1] = d * (float)scale_q3_K(b->scales, 2 * ib + 1);
	}
};

/* Q4_K, Q5_K: block ib is sub-block ib of the super-block */
template <> struct mmq_type<T_Q4_K> {
	enum { HALVES = 0, MINS = 1 };
	static __device__ __forceinline__ void
	unpack(const uint8_t *st, int ib, mmq_unpacked &u)
	{
		const blk_q4_K *b = (const blk_q4_K *)st;
		const int shift = 4 * (ib & 1);
		const uint8_t *qs = b->qs + 32 * (ib / 2);
		int sc, mn;

		for (int k = 0; k < 8; k++)
			u.q[k] = (cuda_load_int_b2(qs + 4 * k) >> shift) &
				 0x0f0f0f0f;
		scale_min_k4(ib, b->scales, &sc, &mn);
		u.d[0] = u.d[1] = cuda_h2f(b->d) * (float)sc;
		u.m[0] = u.m[1] = cuda_h2f(b->dmin) * (float)mn;
	}
};

/* the fifth bit of element i of sub-block ib: bit ib of qh[i] */
template <> struct mmq_type<T_Q5_K> {
	enum { HALVES = 0, MINS = 1 };
	static __device__ __forceinline__ void
	unpack(const uint8_t *st, int ib, mmq_unpacked &u)
	{
		const blk_q5_K *b = (const blk_q5_K *)st;
		const int shift = 4 * (ib & 1);
		const uint8_t *qs = b->qs + 32 * (ib / 2);
		int sc, mn;

		for (int k = 0; k < 8; k++) {
			const int lo = (cuda_load_int_b2(qs + 4 * k) >> shift) &
				       0x0f0f0f0f;
			const int hi = ((cuda_load_int_b2(b->qh + 4 * k) >> ib) &
					0x01010101)
				       << 4;

			u.q[k] = lo | hi;
		}
		scale_min_k4(ib, b->scales, &sc, &mn);
		u.d[0] = u.d[1] = cuda_h2f(b->d) * (float)sc;
		u.m[0] = u.m[1] = cuda_h2f(b->dmin) * (float)mn;
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
	unpack(const uint8_t *st, int ib, mmq_unpacked &u)
	{
		const blk_q6_K *b = (const blk_q6_K *)st;
		const int h = ib / 4, qd = ib % 4;
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
		u.d[0] = d * (float)b->scales[2 * ib];
		u.d[1] = d * (float)b->scales[2 * ib + 1];
	}
};

/* a row's bytes a stage: 8 blocks of 32 elements, or one super-block */
template <int T> struct mmq_geom {
	static constexpr int BS = (int)sizeof(typename wq<T>::block);
	static constexpr int SB = wq<T>::QK == 32 ? MMQ_KB * BS : BS;
	/* a raw row in shared memory: room for the 4-byte copies' skew */
	static constexpr int RW = (SB + 6 + 15) / 16 * 16;
	/* scales (and mins) a row a stage */
	static constexpr int NS = mmq_type<T>::HALVES ? 2 * MMQ_KB : MMQ_KB;
	static constexpr int NM = mmq_type<T>::MINS ? NS : 1;
};

template <int T> struct mmq_shared {
	__align__(16) uint8_t xraw[2][MMQ_COLS][MMQ_XP];
	__align__(16) uint8_t wraw[MMQ_ROWS][mmq_geom<T>::RW];
	__align__(16) int8_t w[MMQ_ROWS][MMQ_KP];
	float wd[MMQ_ROWS][mmq_geom<T>::NS];
	float wm[MMQ_ROWS][mmq_geom<T>::NM];
	float xd[MMQ_COLS][MMQ_KB];
	float xs[MMQ_COLS][mmq_geom<T>::NM]; /* d sum(q), as wm */
};

/*
 * Start copying n bytes of NR rows, src + r ld, into dst + r dld; rows
 * from `valid` on get zeros. a16: src and ld 16-aligned, 16-byte copies
 * (the last one cut at n); else 4-byte words from the word below each
 * row's start, which then lies (src + r ld) % 4 bytes into dst's row.
 * end: the first byte past src's buffer.
 */
template <int NR>
__device__ __forceinline__ void mmq_copy(uint8_t *dst, int dld,
					 const uint8_t *src, uint64_t ld,
					 int64_t valid, int n,
					 const uint8_t *end, bool a16)
{
	const uint8_t *src4 = (const uint8_t *)((uintptr_t)src & ~(uintptr_t)3);

	if (a16) {
		const int per = (n + 15) / 16;

		for (int i = threadIdx.x; i < NR * per; i += MMQ_THREADS) {
			const int r = i / per, c = i % per;
			const int left = n - 16 * c;

			if (r < valid)
				cuda_cp_async16(dst + r * dld + 16 * c,
						src + r * ld + 16 * c,
						left < 16 ? left : 16);
			else
				cuda_cp_async16(dst + r * dld + 16 * c, src, 0);
		}
		return;
	}
	const int per = (n + 6) / 4;

	for (int i = threadIdx.x; i < NR * per; i += MMQ_THREADS) {
		const int r = i / per, c = i % per;
		const uint8_t *s = src + r * ld;
		const uint8_t *p = (const uint8_t *)((uintptr_t)s &
						     ~(uintptr_t)3) +
				   4 * c;

		if (r >= valid)
			cuda_cp_async4(dst + r * dld + 4 * c, src4, 0);
		else if (p < s + n)
			cuda_cp_async4(dst + r * dld + 4 * c, p,
				       end - p < 4 ? (int)(end - p) : 4);
	}
}

/* where stage k0 (in 32-blocks) of a row begins, from the row's start */
template <int T> __device__ __forceinline__ uint64_t mmq_stage_off(int64_t k0)
{
	typedef mmq_geom<T> G;

	return wq<T>::QK == 32 ? (uint64_t)k0 * G::BS :
				 (uint64_t)(k0 / MMQ_KB) * G::BS;
}

/* start stage k0's weights into wraw and activations into xraw[buf] */
template <int T>
__device__ __forceinline__ void
mmq_issue(mmq_shared<T> &sh, const mmq_args &a, int64_t row0, int64_t col0,
	  int64_t k0, int buf, bool w16)
{
	typedef mmq_geom<T> G;
	const int64_t left = a.n_in / 32 - k0;
	const int kbs = left < MMQ_KB ? (int)left : MMQ_KB;
	const int wn = wq<T>::QK == 32 ? kbs * G::BS : G::BS;

	mmq_copy<MMQ_ROWS>(&sh.wraw[0][0], G::RW,
			   a.w + row0 * a.row_bytes + mmq_stage_off<T>(k0),
			   a.row_bytes, a.n_out - row0, wn,
			   a.w + a.n_out * a.row_bytes, w16);
	mmq_copy<MMQ_COLS>(&sh.xraw[buf][0][0], MMQ_XP,
			   a.x + col0 * a.x_ld + k0 * sizeof(blk_q8_1),
			   a.x_ld, (int64_t)a.rows - col0,
			   kbs * (int)sizeof(blk_q8_1),
			   a.x + a.rows * a.x_ld, true);
	cuda_cp_async_commit();
}

/*
 * The landed stage k0: the weights unpacked (wraw -> w, wd, wm), the
 * activations' d and d sum(q) read out of xraw[buf]. Blocks past n_in
 * (a short last stage) and rows past the matrix are zeros.
 */
template <int T>
__device__ __forceinline__ void mmq_unpack(mmq_shared<T> &sh,
					   const mmq_args &a, int64_t row0,
					   int64_t k0, int buf, bool w16)
{
	typedef mmq_type<T> Y;
	const int64_t nb = a.n_in / 32;

	for (int i = threadIdx.x; i < MMQ_ROWS * MMQ_KB; i += MMQ_THREADS) {
		const int r = i / MMQ_KB, kb = i % MMQ_KB;
		const uint8_t *row = a.w + (row0 + r) * a.row_bytes +
				     mmq_stage_off<T>(k0);
		mmq_unpacked u = {};

		if (row0 + r < a.n_out && k0 + kb < nb)
			Y::unpack(sh.wraw[r] + (w16 ? 0 : (uintptr_t)row & 3),
				  kb, u);
		for (int k = 0; k < 8; k++)
			*(int *)&sh.w[r][32 * kb + 4 * k] = u.q[k];
		if (Y::HALVES) {
			sh.wd[r][2 * kb] = u.d[0];
			sh.wd[r][2 * kb + 1] = u.d[1];
		} else {
			sh.wd[r][kb] = u.d[0];
		}
		if (Y::MINS && Y::HALVES) {
			sh.wm[r][2 * kb] = u.m[0];
			sh.wm[r][2 * kb + 1] = u.m[1];
		} else if (Y::MINS) {
			sh.wm[r][kb] = u.m[0];
		}
	}
	for (int i = threadIdx.x; i < MMQ_COLS * MMQ_KB; i += MMQ_THREADS) {
		const int c = i / MMQ_KB, kb = i % MMQ_KB;
		const uint8_t *b = sh.xraw[buf][c] + sizeof(blk_q8_1) * kb;
		/* columns past the rows came as zeros: d = 0 */
		const float d = k0 + kb < nb ? cuda_h2f(*(const uint16_t *)b) :
					       0.0f;
		int s[2] = { 0, 0 };

		sh.xd[c][kb] = d;
		for (int k = 0; Y::MINS && k < 8; k++)
			s[k / 4] += byte_sum(cuda_load_int_b4(b + 4 + 4 * k));
		/* d * sum(q) in float: the block's half s is 2^-11 off it */
		if (Y::MINS && Y::HALVES) {
			sh.xs[c][2 * kb] = d * (float)s[0];
			sh.xs[c][2 * kb + 1] = d * (float)s[1];
		} else if (Y::MINS) {
			sh.xs[c][kb] = d * (float)(s[0] + s[1]);
		}
	}
}

/* the 4 int8 of an unpacked tile at (row, col), col a multiple of 4 */
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
__device__ __forceinline__ void mmq_stage(const mmq_shared<T> &sh, int buf,
					  int w, int lane,
					  float acc[MMQ_COLS / 8][4])
{
	typedef mmq_type<T> Y;
	const int zero[4] = { 0, 0, 0, 0 };
	/* a scale's index: per 32 elements, or the first of two per 16 */
	const int hs = Y::HALVES ? 2 : 1;

	for (int kb = 0; kb < MMQ_KB; kb++) {
		mma_s8_frag f;
		/* C's registers 0, 1 are in one row, 2, 3 in another */
		float wd[2], wd2[2], wm[2], wm2[2];

		for (int r = 0; r < 4; r++)
			f.a[r] = mmq_word(sh.w, 16 * w + mma_a_row(lane, r),
					  32 * kb + mma_a_col(lane, r, 0));
		for (int h = 0; h < 2; h++) {
			const int row = 16 * w + mma_c_row(lane, 2 * h);

			wd[h] = sh.wd[row][hs * kb];
			wd2[h] = Y::HALVES ? sh.wd[row][hs * kb + 1] : 0.0f;
			wm[h] = Y::MINS ? sh.wm[row][hs * kb] : 0.0f;
			wm2[h] = Y::MINS && Y::HALVES ?
					 sh.wm[row][hs * kb + 1] :
					 0.0f;
		}
		for (int t = 0; t < MMQ_COLS / 8; t++) {
			const uint8_t *xb = sh.xraw[buf][8 * t + mma_b_col(lane)] +
					    sizeof(blk_q8_1) * kb + 4;
			int d[4], d2[4];

			for (int r = 0; r < 2; r++)
				f.b[r] = *(const int *)(xb +
							mma_b_row(lane, r, 0));
			if (Y::HALVES) {
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
				float v = (float)d[r] * wd[r / 2];

				if (Y::HALVES)
					v += (float)d2[r] * wd2[r / 2];
				acc[t][r] += v * xd;
				if (Y::MINS)
					acc[t][r] -= wm[r / 2] *
						     sh.xs[col][hs * kb];
				if (Y::MINS && Y::HALVES)
					acc[t][r] -= wm2[r / 2] *
						     sh.xs[col][hs * kb + 1];
			}
		}
	}
}

/*
 * A stage in flight while the one before it is multiplied: the copies
 * of stage s + 1 start once stage s is unpacked (its raw weights no
 * longer read) and land during stage s's mmas; the barrier after the
 * wait orders both the landing and the last stage's reads of xraw.
 */
template <int T>
__global__ void __launch_bounds__(MMQ_THREADS, MMQ_BLOCKS_SM)
	mmq_kernel(mmq_args a)
{
	cuda_pdl_start();
	CUDA_DYNAMIC_SHARED(mmq_shared<T>, sh);
	const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
	const int64_t row0 = (int64_t)blockIdx.x * MMQ_ROWS;
	const int64_t col0 = (int64_t)blockIdx.y * MMQ_COLS;
	const int64_t nb = a.n_in / 32;
	const bool w16 =
		(((uintptr_t)a.w | a.row_bytes | (uint64_t)mmq_geom<T>::SB) &
		 15) == 0;
	float acc[MMQ_COLS / 8][4] = {};
	int buf = 0;

	mmq_issue<T>(*sh, a, row0, col0, 0, buf, w16);
	for (int64_t k0 = 0; k0 < nb; k0 += MMQ_KB, buf ^= 1) {
		cuda_cp_async_wait<0>();
		__syncthreads();
		mmq_unpack<T>(*sh, a, row0, k0, buf, w16);
		__syncthreads();
		if (k0 + MMQ_KB < nb)
			mmq_issue<T>(*sh, a, row0, col0, k0 + MMQ_KB, buf ^ 1,
				     w16);
		mmq_stage<T>(*sh, buf, w, lane, acc);
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

template <int T> static void mmq_launch(const mmq_args &a, cudaStream_t s)
{
	const size_t shmem = sizeof(mmq_shared<T>);
	const dim3 grid(cuda_div_up((uint64_t)a.n_out, MMQ_ROWS),
			cuda_div_up(a.rows, MMQ_COLS));

	if (shmem > (48u << 10))
		cudaFuncSetAttribute(
			mmq_kernel<T>,
			cudaFuncAttributeMaxDynamicSharedMemorySize,
			(int)shmem);
	cuda_launch_pdl(mmq_kernel<T>, grid, dim3(MMQ_THREADS), shmem, s, a);
}

/* the weight types the kernel takes, and the K their rows must divide */
static const struct {
	uint32_t type;
	int64_t qk;
	void (*launch)(const mmq_args &a, cudaStream_t s);
} mmq_table[] = {
	{ T_Q4_0, 32, mmq_launch<T_Q4_0> },   { T_Q4_1, 32, mmq_launch<T_Q4_1> },
	{ T_Q5_0, 32, mmq_launch<T_Q5_0> },   { T_Q5_1, 32, mmq_launch<T_Q5_1> },
	{ T_Q8_0, 32, mmq_launch<T_Q8_0> },   { T_Q2_K, QK_K, mmq_launch<T_Q2_K> },
	{ T_Q3_K, QK_K, mmq_launch<T_Q3_K> }, { T_Q4_K, QK_K, mmq_launch<T_Q4_K> },
	{ T_Q5_K, QK_K, mmq_launch<T_Q5_K> }, { T_Q6_K, QK_K, mmq_launch<T_Q6_K> },
};

bool k_mmq_takes(uint32_t w_type, int64_t n_in)
{
	for (const auto &e : mmq_table)
		if (e.type == w_type)
			return n_in > 0 && n_in % e.qk == 0;
	return false;
}

bool k_mmq(uint32_t w_type, const mmq_args &a, cudaStream_t s)
{
	/* Q8_1 rows 16-aligned, as the module lays them out */
	if (!k_mmq_takes(w_type, a.n_in) || !a.rows ||
	    (((uintptr_t)a.x | a.x_ld) & 15))
		return false;
	for (const auto &e : mmq_table)
		if (e.type == w_type)
			e.launch(a, s);
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
