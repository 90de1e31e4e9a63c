// SPDX-License-Identifier: MIT
/*
 * Prompt products on int8 tensor cores (MMQ): y = w . x for many rows of
 * x, the weights read in their GGUF blocks, the activations the weight
 * type's vec_dot rows as ggml (and the mat-vec kernel) takes them
 * (quantize.cu): Q8_1 for the 32-element types (32 int8 with a scale d
 * and the half s = d sum(q): Q8_0's quants and d), Q8_K for the
 * K-quants (256 int8 with a float d and the sums of 16).
 *
 * A block of 4 warps takes a tile of MMQ_ROWS weight rows by MMQ_COLS
 * activation rows and walks K 256 elements (a stage) at a time, in
 * three steps a stage:
 *
 *   copy    cp.async (cp_async.cuh) brings the next stage's weight
 *           blocks and activation blocks as they are into shared
 *           memory (wraw, xraw), while the warps multiply this one;
 *   unpack  the stage's weights become int8 (w) with a scale (and min)
 *           per 32 elements, per 16 for the types with 16-element
 *           scales (HALVES): floats for the 32-element types, the
 *           K-quants' integers beside the super-block's d and dmin;
 *           the activations' d (and s, or the sums of 16) are read out
 *           beside them;
 *   mma     each warp multiplies its 16 weight rows with all MMQ_COLS
 *           columns, one m16n8k32 mma (mma.cuh) per 32 elements and 8
 *           columns, B read from xraw as it came.
 *
 * The weights' raw stage has one buffer (free once unpacked), the
 * activations' two (the mma reads one while the next lands). Each mma's
 * int32 sums are one block's dot products, scaled into float
 * accumulators as the CPU's vec_dot scales them: the 32-element types
 * += dot * d_w * d_x (-= m_w * s_x with mins, s the block's half, as
 * ggml's Q4_1 and Q5_1 take it); the K-quants += (d_x d_w) (dot * sc_w)
 * -= (d_x dmin_w) (m_w * bsum_x), the integer products the CPU's. A
 * type with a scale per 16 elements takes two mmas a block, each with
 * the other half of A zeroed.
 *
 * So every integer is the CPU's; the floats are added in another order
 * (per 32 elements, where the CPU sums a super-block's integers first):
 * tests/engine/test_cuda.c checks it against the CPU's vec_dot on the
 * same rows within MMQ_REL. Opt-in (LLMFS_CUDA_MATMUL=mma) until a card
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
/* a column of a stage's Q8_1 blocks as they came (8 x 36 bytes), or its
 * Q8_K block (292 bytes) from the 16-byte word it starts in, padded to
 * 76 words for the same reason (B's 8 columns, 4 words) */
#define MMQ_XP 304
/*
 * blocks an SM by shared memory (73-78 KB a block of the 227 KB): told
 * to ptxas, which otherwise spills a register of Q6_K's to keep to 72
 */
#define MMQ_BLOCKS_SM 2

/*
 * a tile's 32 weights as int8, 4 to an int, with their scales;
 * mmq_type<T>: HALVES, a scale (and min) per 16 elements; MINS, a
 * d_min * min subtracted per element; a K-quant's super(), its
 * super-block's d and dmin
 */
struct mmq_unpacked {
	int q[8];
	float d[2]; /* 32-element types: the scale of elements 0-15, 16-31 */
	float m[2]; /* subtracted per element, the same halves */
	int sc[2];  /* K-quants: the integer scales, the same halves */
	int mn[2];  /* and mins (times dmin) */
};

/* a scale in shared memory: a float (32-element types) or an integer */
union mmq_num {
	float f;
	int i;
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

		for (int k = 0; k < 8; k++)
			u.q[k] = (cuda_load_int_b2(qs + 4 * k) >> shift) &
				 0x03030303;
		for (int h = 0; h < 2; h++) {
			const int sc = b->scales[2 * ib + h];

			u.sc[h] = sc & 0xF;
			u.mn[h] = sc >> 4;
		}
	}
	static __device__ __forceinline__ void super(const uint8_t *st,
						     float *d, float *dmin)
	{
		const blk_q2_K *b = (const blk_q2_K *)st;

		*d = cuda_h2f(b->d);
		*dmin = cuda_h2f(b->dmin);
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
		u.sc[0] = scale_q3_K(b->scales, 2 * ib);
		u.sc[1] = scale_q3_K(b->scales, 2 * ib + 1);
	}
	static __device__ __forceinline__ void super(const uint8_t *st,
						     float *d, float *dmin)
	{
		*d = cuda_h2f(((const blk_q3_K *)st)->d);
		*dmin = 0.0f;
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
		u.sc[0] = u.sc[1] = sc;
		u.mn[0] = u.mn[1] = mn;
	}
	static __device__ __forceinline__ void super(const uint8_t *st,
						     float *d, float *dmin)
	{
		const blk_q4_K *b = (const blk_q4_K *)st;

		*d = cuda_h2f(b->d);
		*dmin = cuda_h2f(b->dmin);
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
		u.sc[0] = u.sc[1] = sc;
		u.mn[0] = u.mn[1] = mn;
	}
	static __device__ __forceinline__ void super(const uint8_t *st,
						     float *d, float *dmin)
	{
		const blk_q5_K *b = (const blk_q5_K *)st;

		*d = cuda_h2f(b->d);
		*dmin = cuda_h2f(b->dmin);
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
		u.sc[0] = b->scales[2 * ib];
		u.sc[1] = b->scales[2 * ib + 1];
	}
	static __device__ __forceinline__ void super(const uint8_t *st,
						     float *d, float *dmin)
	{
		*d = cuda_h2f(((const blk_q6_K *)st)->d);
		*dmin = 0.0f;
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
	/* a K-quant: Q8_K activations, integer scales */
	static constexpr bool KQ = wq<T>::QK == QK_K;
};

static_assert(sizeof(blk_q8_K) + 12 <= MMQ_XP, "a Q8_K block and its skew");

/*
 * The K-quants' scales (wd, wm) and the activations' sums (xs) are
 * integers, the 32-element types' floats; xd, a K-quant's Q8_K d in
 * xd[c][0].
 */
template <int T> struct mmq_shared {
	__align__(16) uint8_t xraw[2][MMQ_COLS][MMQ_XP];
	__align__(16) uint8_t wraw[MMQ_ROWS][mmq_geom<T>::RW];
	__align__(16) int8_t w[MMQ_ROWS][MMQ_KP];
	mmq_num wd[MMQ_ROWS][mmq_geom<T>::NS];
	mmq_num wm[MMQ_ROWS][mmq_geom<T>::NM];
	float wsup[MMQ_ROWS][2]; /* a K-quant's d and dmin */
	float xd[MMQ_COLS][MMQ_KB];
	mmq_num xs[MMQ_COLS][mmq_geom<T>::NM]; /* s, or bsums, as wm */
};

/* where stage k0's Q8_K block lies past the 16-byte word it starts in */
__device__ __forceinline__ int mmq_xskew(int64_t k0)
{
	return (int)((uint64_t)(k0 / MMQ_KB) * sizeof(blk_q8_K) & 15);
}

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
	if constexpr (G::KQ) {
		/* from the 16-byte word it starts in (rows 16-aligned) */
		const int skew = mmq_xskew(k0);

		mmq_copy<MMQ_COLS>(&sh.xraw[buf][0][0], MMQ_XP,
				   a.x + col0 * a.x_ld +
					   (uint64_t)(k0 / MMQ_KB) *
						   sizeof(blk_q8_K) -
					   skew,
				   a.x_ld, (int64_t)a.rows - col0,
				   skew + (int)sizeof(blk_q8_K),
				   a.x + a.rows * a.x_ld, true);
	} else {
		mmq_copy<MMQ_COLS>(&sh.xraw[buf][0][0], MMQ_XP,
				   a.x + col0 * a.x_ld + k0 * sizeof(blk_q8_1),
				   a.x_ld, (int64_t)a.rows - col0,
				   kbs * (int)sizeof(blk_q8_1),
				   a.x + a.rows * a.x_ld, true);
	}
	cuda_cp_async_commit();
}

/*
 * The landed stage k0: the weights unpacked (wraw -> w, wd, wm, wsup),
 * the activations' d and s (Q8_1) or d and sums of 16 (Q8_K) read out
 * of xraw[buf]. Blocks past n_in (a short last stage) and rows past the
 * matrix are zeros.
 */
template <int T>
__device__ __forceinline__ void mmq_unpack(mmq_shared<T> &sh,
					   const mmq_args &a, int64_t row0,
					   int64_t k0, int buf, bool w16)
{
	typedef mmq_type<T> Y;
	typedef mmq_geom<T> G;
	const int64_t nb = a.n_in / 32;

	for (int i = threadIdx.x; i < MMQ_ROWS * MMQ_KB; i += MMQ_THREADS) {
		const int r = i / MMQ_KB, kb = i % MMQ_KB;
		const uint8_t *row = a.w + (row0 + r) * a.row_bytes +
				     mmq_stage_off<T>(k0);
		const uint8_t *st = sh.wraw[r] +
				    (w16 ? 0 : (uintptr_t)row & 3);
		const bool in = row0 + r < a.n_out && k0 + kb < nb;
		mmq_unpacked u = {};

		if (in)
			Y::unpack(st, kb, u);
		for (int k = 0; k < 8; k++)
			*(int *)&sh.w[r][32 * kb + 4 * k] = u.q[k];
		if constexpr (G::KQ) {
			float d = 0.0f, dmin = 0.0f;

			for (int h = 0; h < (Y::HALVES ? 2 : 1); h++) {
				sh.wd[r][(Y::HALVES ? 2 : 1) * kb + h].i =
					u.sc[h];
				if (Y::MINS)
					sh.wm[r][(Y::HALVES ? 2 : 1) * kb + h]
						.i = u.mn[h];
			}
			if (in && kb == 0)
				Y::super(st, &d, &dmin);
			if (kb == 0) {
				sh.wsup[r][0] = d;
				sh.wsup[r][1] = dmin;
			}
			continue;
		}
		sh.wd[r][kb].f = u.d[0];
		if (Y::MINS)
			sh.wm[r][kb].f = u.m[0];
	}
	for (int i = threadIdx.x; i < MMQ_COLS * MMQ_KB; i += MMQ_THREADS) {
		const int c = i / MMQ_KB, kb = i % MMQ_KB;

		if constexpr (G::KQ) {
			/* columns past the rows came as zeros: d = 0 */
			const uint8_t *b = sh.xraw[buf][c] + mmq_xskew(k0);
			const blk_q8_K *q = (const blk_q8_K *)b;

			if (kb == 0)
				sh.xd[c][0] = q->d;
			if (Y::MINS && Y::HALVES) {
				sh.xs[c][2 * kb].i = q->bsums[2 * kb];
				sh.xs[c][2 * kb + 1].i = q->bsums[2 * kb + 1];
			} else if (Y::MINS) {
				sh.xs[c][kb].i = q->bsums[2 * kb] +
						 q->bsums[2 * kb + 1];
			}
			continue;
		}
		const blk_q8_1 *b = (const blk_q8_1 *)sh.xraw[buf][c] + kb;
		const bool in = k0 + kb < nb;

		sh.xd[c][kb] = in ? cuda_h2f(b->d) : 0.0f;
		/* the half s, as the CPU's vec_dot reads it */
		if (Y::MINS)
			sh.xs[c][kb].f = in ? cuda_h2f(b->s) : 0.0f;
	}
}

/* the 4 int8 of an unpacked tile at (row, col), col a multiple of 4 */
__device__ __forceinline__ int mmq_word(const int8_t (*m)[MMQ_KP], int row,
					int col)
{
	return *(const int *)&m[row][col];
}

/*
 * The mma of 32 elements: d the dot products (or, HALVES, d those of
 * elements 0-15 and d2 those of 16-31: A's registers 0, 1 are 0-15).
 */
template <int T>
__device__ __forceinline__ void mmq_mma(const mma_s8_frag &f, int d[4],
					int d2[4])
{
	const int zero[4] = { 0, 0, 0, 0 };

	if (mmq_type<T>::HALVES) {
		mma_s8_frag lo = f, hi = f;

		lo.a[2] = lo.a[3] = 0;
		hi.a[0] = hi.a[1] = 0;
		mma_s8_16832(d, lo, zero);
		mma_s8_16832(d2, hi, zero);
	} else {
		mma_s8_16832(d, f, zero);
	}
}

/*
 * Warp w's 16 weight rows times the MMQ_COLS columns over one stage of
 * a 32-element type, into acc[column tile][register] (mma.cuh's C
 * layout): += dot d_w d_x, -= m_w s_x.
 */
template <int T>
__device__ __forceinline__ void mmq_stage_32(const mmq_shared<T> &sh, int buf,
					     int w, int lane,
					     float acc[MMQ_COLS / 8][4])
{
	typedef mmq_type<T> Y;

	for (int kb = 0; kb < MMQ_KB; kb++) {
		mma_s8_frag f;
		/* C's registers 0, 1 are in one row, 2, 3 in another */
		float wd[2], wm[2];

		for (int r = 0; r < 4; r++)
			f.a[r] = mmq_word(sh.w, 16 * w + mma_a_row(lane, r),
					  32 * kb + mma_a_col(lane, r, 0));
		for (int h = 0; h < 2; h++) {
			const int row = 16 * w + mma_c_row(lane, 2 * h);

			wd[h] = sh.wd[row][kb].f;
			wm[h] = Y::MINS ? sh.wm[row][kb].f : 0.0f;
		}
		for (int t = 0; t < MMQ_COLS / 8; t++) {
			const uint8_t *xb = sh.xraw[buf][8 * t + mma_b_col(lane)] +
					    sizeof(blk_q8_1) * kb + 4;
			int d[4], d2[4];

			for (int r = 0; r < 2; r++)
				f.b[r] = *(const int *)(xb +
							mma_b_row(lane, r, 0));
			mmq_mma<T>(f, d, d2);
			for (int r = 0; r < 4; r++) {
				const int col = 8 * t + mma_c_col(lane, r);

				acc[t][r] += wd[r / 2] * sh.xd[col][kb] *
					     (float)d[r];
				if (Y::MINS)
					acc[t][r] -= wm[r / 2] *
						     sh.xs[col][kb].f;
			}
		}
	}
}

/*
 * The same over a K-quant's stage (one super-block, Q8_K columns from
 * xraw[buf] + skew): the super-block's integer sums of dot * sc and
 * m * bsum, exact as the CPU's, then scaled once by d_x d_w and
 * d_x dmin_w (the CPU's floats, added in another order).
 */
template <int T>
__device__ __forceinline__ void mmq_stage_k(const mmq_shared<T> &sh, int buf,
					    int skew, int w, int lane,
					    float acc[MMQ_COLS / 8][4])
{
	typedef mmq_type<T> Y;
	const int hs = Y::HALVES ? 2 : 1;
	int is[MMQ_COLS / 8][4] = {}, ms[MMQ_COLS / 8][4] = {};

	for (int kb = 0; kb < MMQ_KB; kb++) {
		mma_s8_frag f;
		int sc[2], sc2[2], mn[2], mn2[2];

		for (int r = 0; r < 4; r++)
			f.a[r] = mmq_word(sh.w, 16 * w + mma_a_row(lane, r),
					  32 * kb + mma_a_col(lane, r, 0));
		for (int h = 0; h < 2; h++) {
			const int row = 16 * w + mma_c_row(lane, 2 * h);

			sc[h] = sh.wd[row][hs * kb].i;
			sc2[h] = Y::HALVES ? sh.wd[row][hs * kb + 1].i : 0;
			mn[h] = Y::MINS ? sh.wm[row][hs * kb].i : 0;
			mn2[h] = Y::MINS && Y::HALVES ?
					 sh.wm[row][hs * kb + 1].i :
					 0;
		}
		for (int t = 0; t < MMQ_COLS / 8; t++) {
			const uint8_t *xb = sh.xraw[buf][8 * t + mma_b_col(lane)] +
					    skew + 4 + 32 * kb;
			int d[4], d2[4];

			for (int r = 0; r < 2; r++)
				f.b[r] = *(const int *)(xb +
							mma_b_row(lane, r, 0));
			mmq_mma<T>(f, d, d2);
			for (int r = 0; r < 4; r++) {
				const int col = 8 * t + mma_c_col(lane, r);

				is[t][r] += d[r] * sc[r / 2];
				if (Y::HALVES)
					is[t][r] += d2[r] * sc2[r / 2];
				if (Y::MINS)
					ms[t][r] += mn[r / 2] *
						    sh.xs[col][hs * kb].i;
				if (Y::MINS && Y::HALVES)
					ms[t][r] += mn2[r / 2] *
						    sh.xs[col][hs * kb + 1].i;
			}
		}
	}
	for (int t = 0; t < MMQ_COLS / 8; t++)
		for (int r = 0; r < 4; r++) {
			const int row = 16 * w + mma_c_row(lane, r);
			const float xd = sh.xd[8 * t + mma_c_col(lane, r)][0];

			acc[t][r] += xd * sh.wsup[row][0] * (float)is[t][r];
			if (Y::MINS)
				acc[t][r] -= xd * sh.wsup[row][1] *
					     (float)ms[t][r];
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
		if constexpr (mmq_geom<T>::KQ)
			mmq_stage_k<T>(*sh, buf, mmq_xskew(k0), w, lane, acc);
		else
			mmq_stage_32<T>(*sh, buf, w, lane, acc);
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
	/* the activation rows 16-aligned, as the module lays them out */
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
