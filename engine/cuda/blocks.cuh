// SPDX-License-Identifier: MIT
/*
 * ggml's quantized blocks on the device (byte for byte the layouts of
 * engine/quant/quant_internal.h), and per weight type the two things the
 * kernels need of it, as one table of templates (struct wq<TYPE>):
 *
 *   unpack(w, lane)   lane `lane`'s part of the block (of its LPB
 *                     lanes): its words of quants unpacked to bytes,
 *                     its scales and halves (wq<T>::bits), once for all
 *                     the columns a kernel has.
 *   dot(u, a, lane)   that lane's part of the block's dot product with
 *                     an activation block, every scale applied: Q8_1
 *                     activations for the 32-element types, Q8_K for
 *                     the K-quants. The integer sums are exact, so a
 *                     block's dot is the CPU's up to the order in which
 *                     floats are added (engine/quant/dot.c).
 *   dequant(w, g, y)  16 elements (group g of the block) as floats, as
 *                     ggml's dequantize_row_* gives them.
 *
 * Lanes read whole 32-bit words: 4-aligned where the block size is a
 * multiple of 4, else as two 16-bit halves (cuda_load_int_b2).
 */
#ifndef LLMFS_ENGINE_CUDA_BLOCKS_CUH
#define LLMFS_ENGINE_CUDA_BLOCKS_CUH

#include <type_traits>

#include "common.cuh"

#define QK_K 256

struct blk_q4_0 {
	uint16_t d;
	uint8_t qs[16]; /* element j low nibble, j + 16 high */
};
struct blk_q4_1 {
	uint16_t d, m;
	uint8_t qs[16];
};
struct blk_q5_0 {
	uint16_t d;
	uint8_t qh[4]; /* fifth bits, element j at bit j */
	uint8_t qs[16];
};
struct blk_q5_1 {
	uint16_t d, m;
	uint8_t qh[4];
	uint8_t qs[16];
};
struct blk_q8_0 {
	uint16_t d;
	int8_t qs[32];
};
struct blk_q8_1 {
	uint16_t d, s; /* s = d * sum(qs) */
	int8_t qs[32];
};
struct blk_q2_K {
	uint8_t scales[16]; /* low nibble scale, high nibble min */
	uint8_t qs[64];
	uint16_t d, dmin;
};
struct blk_q3_K {
	uint8_t hmask[32];
	uint8_t qs[64];
	uint8_t scales[12];
	uint16_t d;
};
struct blk_q4_K {
	uint16_t d, dmin;
	uint8_t scales[12];
	uint8_t qs[128];
};
struct blk_q5_K {
	uint16_t d, dmin;
	uint8_t scales[12];
	uint8_t qh[32];
	uint8_t qs[128];
};
struct blk_q6_K {
	uint8_t ql[128];
	uint8_t qh[64];
	int8_t scales[16];
	uint16_t d;
};
struct blk_q8_K {
	float d;
	int8_t qs[QK_K];
	int16_t bsums[QK_K / 16]; /* sums of qs, 16 at a time */
};

static_assert(sizeof(blk_q4_0) == 18, "q4_0");
static_assert(sizeof(blk_q4_1) == 20, "q4_1");
static_assert(sizeof(blk_q5_0) == 22, "q5_0");
static_assert(sizeof(blk_q5_1) == 24, "q5_1");
static_assert(sizeof(blk_q8_0) == 34, "q8_0");
static_assert(sizeof(blk_q8_1) == 36, "q8_1");
static_assert(sizeof(blk_q2_K) == 84, "q2_K");
static_assert(sizeof(blk_q3_K) == 110, "q3_K");
static_assert(sizeof(blk_q4_K) == 144, "q4_K");
static_assert(sizeof(blk_q5_K) == 176, "q5_K");
static_assert(sizeof(blk_q6_K) == 210, "q6_K");
static_assert(sizeof(blk_q8_K) == 292, "q8_K");

/* the io_type numbers (io/io.h), usable as template arguments */
enum {
	T_F32 = 0,
	T_F16 = 1,
	T_Q4_0 = 2,
	T_Q4_1 = 3,
	T_Q5_0 = 6,
	T_Q5_1 = 7,
	T_Q8_0 = 8,
	T_Q8_1 = 9,
	T_Q2_K = 10,
	T_Q3_K = 11,
	T_Q4_K = 12,
	T_Q5_K = 13,
	T_Q6_K = 14,
	T_Q8_K = 15,
	T_BF16 = 30,
};

/* sum of the 4 signed bytes of a */
__device__ __forceinline__ int byte_sum(int a)
{
	return cuda_dp4a(a, 0x01010101, 0);
}

/* ggml's get_scale_min_k4: 6-bit scale and min j of a Q4_K/Q5_K block */
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t *q, int *d,
					     int *m)
{
	if (j < 4) {
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* The scale of group g (16 elements) of a Q3_K block, -32..31. */
__device__ __forceinline__ int scale_q3_K(const uint8_t *s, int g)
{
	int low = g < 8 ? s[g] & 0xF : s[g - 8] >> 4;
	int high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;

	return (low | high << 4) - 32;
}

template <int T> struct wq;

/* ---- 32-element blocks, Q8_1 activations, 4 lanes a block ---------------- */

template <> struct wq<T_Q4_0> {
	typedef blk_q4_0 block;
	typedef blk_q8_1 act;
	enum { QK = 32, LPB = 4 };
	struct bits {
		int lo, hi; /* elements 4l.. and 16 + 4l.. */
		float d;
	};
	static __device__ __forceinline__ bits unpack(const block *w, int l)
	{
		const int v = cuda_load_int_b2(w->qs + 4 * l);

		return { v & 0x0f0f0f0f, (v >> 4) & 0x0f0f0f0f, cuda_h2f(w->d) };
	}
	static __device__ __forceinline__ float dot(const bits &u,
						    const act *a, int l)
	{
		int a0 = cuda_load_int_b4(a->qs + 4 * l);
		int a1 = cuda_load_int_b4(a->qs + 16 + 4 * l);
		int s = cuda_dp4a(u.lo, a0, 0);

		s = cuda_dp4a(u.hi, a1, s);
		s -= 8 * (byte_sum(a0) + byte_sum(a1));
		return u.d * cuda_h2f(a->d) * (float)s;
	}
	static __device__ __forceinline__ void dequant(const block *w, int g,
						       float *y)
	{
		const float d = cuda_h2f(w->d);

		for (int j = 0; j < 16; j++)
			y[j] = d *
			       (float)((g ? w->qs[j] >> 4 : w->qs[j] & 0xF) -
				       8);
	}
};

template <> struct wq<T_Q4_1> {
	typedef blk_q4_1 block;
	typedef blk_q8_1 act;
	enum { QK = 32, LPB = 4 };
	struct bits {
		int lo, hi;
		float d, m;
	};
	static __device__ __forceinline__ bits unpack(const block *w, int l)
	{
		const int v = cuda_load_int_b4(w->qs + 4 * l);

		return { v & 0x0f0f0f0f, (v >> 4) & 0x0f0f0f0f, cuda_h2f(w->d),
			 cuda_h2f(w->m) };
	}
	static __device__ __forceinline__ float dot(const bits &u,
						    const act *a, int l)
	{
		int a0 = cuda_load_int_b4(a->qs + 4 * l);
		int a1 = cuda_load_int_b4(a->qs + 16 + 4 * l);
		int s = cuda_dp4a(u.lo, a0, 0);
		float r;

		s = cuda_dp4a(u.hi, a1, s);
		r = u.d * cuda_h2f(a->d) * (float)s;
		/* the minimum times the block's sum, once a block */
		if (l == 0)
			r += u.m * cuda_h2f(a->s);
		return r;
	}
	static __device__ __forceinline__ void dequant(const block *w, int g,
						       float *y)
	{
		const float d = cuda_h2f(w->d), m = cuda_h2f(w->m);

		for (int j = 0; j < 16; j++)
			y[j] = d * (float)(g ? w->qs[j] >> 4 : w->qs[j] & 0xF) +
			       m;
	}
};

/* the fifth bits of 4 elements (bits b..b+3 of qh) as bit 4 of 4 bytes */
__device__ __forceinline__ int q5_high(uint32_t qh, int b)
{
	uint32_t h = qh >> b;

	return (int)(((h & 1) << 4) | ((h & 2) << 11) | ((h & 4) << 18) |
		     ((h & 8) << 25));
}

template <> struct wq<T_Q5_0> {
	typedef blk_q5_0 block;
	typedef blk_q8_1 act;
	enum { QK = 32, LPB = 4 };
	struct bits {
		int lo, hi;
		float d;
	};
	static __device__ __forceinline__ bits unpack(const block *w, int l)
	{
		uint32_t qh = (uint32_t)cuda_load_int_b2(w->qh);
		int v = cuda_load_int_b2(w->qs + 4 * l);

		return { (v & 0x0f0f0f0f) | q5_high(qh, 4 * l),
			 ((v >> 4) & 0x0f0f0f0f) | q5_high(qh, 16 + 4 * l),
			 cuda_h2f(w->d) };
	}
	static __device__ __forceinline__ float dot(const bits &u,
						    const act *a, int l)
	{
		int a0 = cuda_load_int_b4(a->qs + 4 * l);
		int a1 = cuda_load_int_b4(a->qs + 16 + 4 * l);
		int s = cuda_dp4a(u.lo, a0, cuda_dp4a(u.hi, a1, 0));

		s -= 16 * (byte_sum(a0) + byte_sum(a1));
		return u.d * cuda_h2f(a->d) * (float)s;
	}
	static __device__ __forceinline__ void dequant(const block *w, int g,
						       float *y)
	{
		const float d = cuda_h2f(w->d);
		uint32_t qh = (uint32_t)cuda_load_int_b2(w->qh);

		for (int j = 0; j < 16; j++) {
			int q = (g ? w->qs[j] >> 4 : w->qs[j] & 0xF) |
				(int)(((qh >> (j + 16 * g)) & 1) << 4);

			y[j] = d * (float)(q - 16);
		}
	}
};

template <> struct wq<T_Q5_1> {
	typedef blk_q5_1 block;
	typedef blk_q8_1 act;
	enum { QK = 32, LPB = 4 };
	struct bits {
		int lo, hi;
		float d, m;
	};
	static __device__ __forceinline__ bits unpack(const block *w, int l)
	{
		uint32_t qh = (uint32_t)cuda_load_int_b4(w->qh);
		int v = cuda_load_int_b4(w->qs + 4 * l);

		return { (v & 0x0f0f0f0f) | q5_high(qh, 4 * l),
			 ((v >> 4) & 0x0f0f0f0f) | q5_high(qh, 16 + 4 * l),
			 cuda_h2f(w->d), cuda_h2f(w->m) };
	}
	static __device__ __forceinline__ float dot(const bits &u,
						    const act *a, int l)
	{
		int a0 = cuda_load_int_b4(a->qs + 4 * l);
		int a1 = cuda_load_int_b4(a->qs + 16 + 4 * l);
		int s = cuda_dp4a(u.lo, a0, cuda_dp4a(u.hi, a1, 0));
		float r = u.d * cuda_h2f(a->d) * (float)s;

		if (l == 0)
			r += u.m * cuda_h2f(a->s);
		return r;
	}
	static __device__ __forceinline__ void dequant(const block *w, int g,
						       float *y)
	{
		const float d = cuda_h2f(w->d), m = cuda_h2f(w->m);
		uint32_t qh = (uint32_t)cuda_load_int_b4(w->qh);

		for (int j = 0; j < 16; j++) {
			int q = (g ? w->qs[j] >> 4 : w->qs[j] & 0xF) |
				(int)(((qh >> (j + 16 * g)) & 1) << 4);

			y[j] = d * (float)q + m;
		}
	}
};

template <> struct wq<T_Q8_0> {
	typedef blk_q8_0 block;
	typedef blk_q8_1 act;
	enum { QK = 32, LPB = 4 };
	struct bits {
		int q0, q1; /* elements 8l.., 8l + 4.. */
		float d;
	};
	static __device__ __forceinline__ bits unpack(const block *w, int l)
	{
		return { cuda_load_int_b2(w->qs + 8 * l),
			 cuda_load_int_b2(w->qs + 8 * l + 4), cuda_h2f(w->d) };
	}
	static __device__ __forceinline__ float dot(const bits &u,
						    const act *a, int l)
	{
		int s = cuda_dp4a(u.q0, cuda_load_int_b4(a->qs + 8 * l), 0);

		s = cuda_dp4a(u.q1, cuda_load_int_b4(a->qs + 8 * l + 4), s);
		return u.d * cuda_h2f(a->d) * (float)s;
	}
	static __device__ __forceinline__ void dequant(const block *w, int g,
						       float *y)
	{
		const float d = cuda_h2f(w->d);

		for (int j = 0; j < 16; j++)
			y[j] = d * (float)w->qs[16 * g + j];
	}
};

/* ---- K-quants, Q8_K activations ------------------------------------------ */

/*
 * Q2_K and Q3_K: a lane per group g of 16 elements (16 lanes a block):
 * bytes qs[32 (g / 8) + 16 (g % 2) ..] shifted by 2 ((g % 8) / 2).
 */
template <> struct wq<T_Q2_K> {
	typedef blk_q2_K block;
	typedef blk_q8_K act;
	enum { QK = QK_K, LPB = 16 };
	struct bits {
		int q[4], sc, m;
		float d, dmin;
	};
	static __device__ __forceinline__ bits unpack(const block *w, int g)
	{
		const uint8_t *q = w->qs + 32 * (g / 8) + 16 * (g % 2);
		const int shift = 2 * ((g % 8) / 2);
		bits u;

		for (int i = 0; i < 4; i++)
			u.q[i] = (cuda_load_int_b4(q + 4 * i) >> shift) &
				 0x03030303;
		u.sc = w->scales[g] & 0xF;
		u.m = w->scales[g] >> 4;
		u.d = cuda_h2f(w->d);
		u.dmin = cuda_h2f(w->dmin);
		return u;
	}
	static __device__ __forceinline__ float dot(const bits &u,
						    const act *a, int g)
	{
		int s = 0;

		for (int i = 0; i < 4; i++)
			s = cuda_dp4a(u.q[i],
				      cuda_load_int_b4(a->qs + 16 * g + 4 * i),
				      s);
		return a->d * (u.d * (float)(u.sc * s) -
			       u.dmin * (float)(u.m * a->bsums[g]));
	}
	static __device__ __forceinline__ void dequant(const block *w, int g,
						       float *y)
	{
		const uint8_t *q = w->qs + 32 * (g / 8) + 16 * (g % 2);
		const int shift = 2 * ((g % 8) / 2);
		const float dl = cuda_h2f(w->d) * (float)(w->scales[g] & 0xF);
		const float ml = cuda_h2f(w->dmin) * (float)(w->scales[g] >> 4);

		for (int j = 0; j < 16; j++)
			y[j] = dl * (float)((q[j] >> shift) & 3) - ml;
	}
};

template <> struct wq<T_Q3_K> {
	typedef blk_q3_K block;
	typedef blk_q8_K act;
	enum { QK = QK_K, LPB = 16 };
	/* q: the low 2 bits; nh: 1 where the high bit is clear */
	struct bits {
		int q[4], nh[4], sc;
		float d;
	};
	static __device__ __forceinline__ bits unpack(const block *w, int g)
	{
		const uint8_t *q = w->qs + 32 * (g / 8) + 16 * (g % 2);
		const uint8_t *hm = w->hmask + 16 * (g % 2);
		const int shift = 2 * ((g % 8) / 2), bit = g / 2;
		bits u;

		for (int i = 0; i < 4; i++) {
			u.nh[i] = ((cuda_load_int_b2(hm + 4 * i) >> bit) &
				   0x01010101) ^
				  0x01010101;
			u.q[i] = (cuda_load_int_b2(q + 4 * i) >> shift) &
				 0x03030303;
		}
		u.sc = scale_q3_K(w->scales, g);
		u.d = cuda_h2f(w->d);
		return u;
	}
	static __device__ __forceinline__ float dot(const bits &u,
						    const act *a, int g)
	{
		int s = 0, low = 0;

		for (int i = 0; i < 4; i++) {
			int av = cuda_load_int_b4(a->qs + 16 * g + 4 * i);

			s = cuda_dp4a(u.q[i], av, s);
			low = cuda_dp4a(u.nh[i], av, low);
		}
		/* a quant without its high bit is 4 less */
		s -= 4 * low;
		return a->d * u.d * (float)(u.sc * s);
	}
	static __device__ __forceinline__ void dequant(const block *w, int g,
						       float *y)
	{
		const uint8_t *q = w->qs + 32 * (g / 8) + 16 * (g % 2);
		const uint8_t *hm = w->hmask + 16 * (g % 2);
		const int shift = 2 * ((g % 8) / 2), bit = g / 2;
		const float dl = cuda_h2f(w->d) *
				 (float)scale_q3_K(w->scales, g);

		for (int j = 0; j < 16; j++)
			y[j] = dl * (float)(((q[j] >> shift) & 3) -
					    ((hm[j] >> bit) & 1 ? 0 : 4));
	}
};

/*
 * Q4_K and Q5_K: 8 lanes a block; lane l reads 16 bytes of qs at
 * 32 (l / 2) + 16 (l % 2): its low nibbles are 16 elements of sub-block
 * 2 (l / 2), its high nibbles 16 of sub-block 2 (l / 2) + 1. Q5_K's
 * fifth bits, bit s of qh[16 (l % 2) ..] for sub-block s, join them as
 * bit 4: the rest is the same.
 */
template <bool FIVE> struct wq_q45_K {
	typedef typename std::conditional<FIVE, blk_q5_K, blk_q4_K>::type block;
	typedef blk_q8_K act;
	enum { QK = QK_K, LPB = 8 };
	/* lo, hi: sub-blocks 2 (l / 2) and 2 (l / 2) + 1, their scales, mins */
	struct bits {
		int lo[4], hi[4], sc0, m0, sc1, m1;
		float d, dmin;
	};
	static __device__ __forceinline__ bits unpack(const block *w, int l)
	{
		const int j = l / 2, h = l % 2;
		bits u;

		for (int i = 0; i < 4; i++) {
			int v = cuda_load_int_b4(w->qs + 32 * j + 16 * h +
						 4 * i);

			u.lo[i] = v & 0x0f0f0f0f;
			u.hi[i] = (v >> 4) & 0x0f0f0f0f;
			if constexpr (FIVE) {
				int qh = cuda_load_int_b4(w->qh + 16 * h +
							  4 * i);

				u.lo[i] |= ((qh >> (2 * j)) & 0x01010101) << 4;
				u.hi[i] |= ((qh >> (2 * j + 1)) & 0x01010101)
					   << 4;
			}
		}
		scale_min_k4(2 * j, w->scales, &u.sc0, &u.m0);
		scale_min_k4(2 * j + 1, w->scales, &u.sc1, &u.m1);
		u.d = cuda_h2f(w->d);
		u.dmin = cuda_h2f(w->dmin);
		return u;
	}
	static __device__ __forceinline__ float dot(const bits &u,
						    const act *a, int l)
	{
		const int e = 64 * (l / 2) + 16 * (l % 2); /* first low element */
		int s0 = 0, s1 = 0;

		for (int i = 0; i < 4; i++) {
			s0 = cuda_dp4a(u.lo[i],
				       cuda_load_int_b4(a->qs + e + 4 * i), s0);
			s1 = cuda_dp4a(u.hi[i],
				       cuda_load_int_b4(a->qs + e + 32 + 4 * i),
				       s1);
		}
		return a->d *
		       (u.d * (float)(u.sc0 * s0 + u.sc1 * s1) -
			u.dmin * (float)(u.m0 * a->bsums[e / 16] +
					 u.m1 * a->bsums[e / 16 + 2]));
	}
	static __device__ __forceinline__ void dequant(const block *w, int g,
						       float *y)
	{
		/* group g: sub-block g / 2, its half g % 2 */
		const int sub = g / 2, j = sub / 2;
		const uint8_t *q = w->qs + 32 * j + 16 * (g % 2);
		int sc, m;

		scale_min_k4(sub, w->scales, &sc, &m);
		const float d = cuda_h2f(w->d) * (float)sc;
		const float mn = cuda_h2f(w->dmin) * (float)m;
		for (int i = 0; i < 16; i++) {
			int v = sub % 2 ? q[i] >> 4 : q[i] & 0xF;

			if constexpr (FIVE)
				v |= ((w->qh[16 * (g % 2) + i] >> sub) & 1)
				     << 4;
			y[i] = d * (float)v - mn;
		}
	}
};

template <> struct wq<T_Q4_K> : wq_q45_K<false> {
};
template <> struct wq<T_Q5_K> : wq_q45_K<true> {
};

/*
 * Q6_K: 8 lanes a block; lane l works in the 128-element half n = l / 4
 * on ql bytes 64 n + 32 p + L (p = l % 4 / 2, L = 16 (l % 2)): their low
 * nibbles are elements 128 n + 32 p + L .. +15, the high ones 64 further;
 * each run of 16 has its scale and its bsum at the same index.
 */
template <> struct wq<T_Q6_K> {
	typedef blk_q6_K block;
	typedef blk_q8_K act;
	enum { QK = QK_K, LPB = 8 };
	struct bits {
		int lo[4], hi[4], sc0, sc1;
		float d;
	};
	static __device__ __forceinline__ bits unpack(const block *w, int l)
	{
		const int n = l / 4, p = (l % 4) / 2, L = 16 * (l % 2);
		const int g0 = (128 * n + 32 * p + L) / 16;
		bits u;

		for (int i = 0; i < 4; i++) {
			int ql = cuda_load_int_b2(w->ql + 64 * n + 32 * p + L +
						  4 * i);
			int qh = cuda_load_int_b2(w->qh + 32 * n + L + 4 * i);

			u.lo[i] = (ql & 0x0f0f0f0f) |
				  (((qh >> (2 * p)) & 0x03030303) << 4);
			u.hi[i] = ((ql >> 4) & 0x0f0f0f0f) |
				  (((qh >> (4 + 2 * p)) & 0x03030303) << 4);
		}
		u.sc0 = w->scales[g0];
		u.sc1 = w->scales[g0 + 4];
		u.d = cuda_h2f(w->d);
		return u;
	}
	static __device__ __forceinline__ float dot(const bits &u,
						    const act *a, int l)
	{
		const int n = l / 4, p = (l % 4) / 2, L = 16 * (l % 2);
		const int e = 128 * n + 32 * p + L;
		const int g0 = e / 16, g1 = g0 + 4;
		int s0 = 0, s1 = 0;

		for (int i = 0; i < 4; i++) {
			s0 = cuda_dp4a(u.lo[i],
				       cuda_load_int_b4(a->qs + e + 4 * i), s0);
			s1 = cuda_dp4a(u.hi[i],
				       cuda_load_int_b4(a->qs + e + 64 + 4 * i),
				       s1);
		}
		s0 -= 32 * a->bsums[g0];
		s1 -= 32 * a->bsums[g1];
		return a->d * u.d * (float)(u.sc0 * s0 + u.sc1 * s1);
	}
	static __device__ __forceinline__ void dequant(const block *w, int g,
						       float *y)
	{
		/* group g = elements 16 g ..: half n, run r of 8 in it */
		const int n = g / 8, r = g % 8;
		const int p = r % 4 / 2, L = 16 * (r % 2), upper = r / 4;
		const uint8_t *ql = w->ql + 64 * n + 32 * p + L;
		const uint8_t *qh = w->qh + 32 * n + L;
		const float d = cuda_h2f(w->d) * (float)w->scales[g];

		for (int i = 0; i < 16; i++) {
			int v = (upper ? ql[i] >> 4 : ql[i] & 0xF) |
				(((qh[i] >> (2 * p + 4 * upper)) & 3) << 4);

			y[i] = d * (float)(v - 32);
		}
	}
};

/* ---- activations: quantizing a block (quantize.cu's rounding) --------------- */

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

/* ---- float types: F32 activations, rounded as the CPU's vec_dot type ----- */

/*
 * The float products in the CPU's order (engine/quant/dot.c, the AVX-512
 * build): the row walked in steps of 64 elements by MMV_FLANES lanes, 4
 * elements a lane, each of a lane's accumulators taking its element of
 * every step in turn, as the CPU's lane of a vector register does; then
 * the CPU's reduction tree (fold, its sum in the tail's type sum_t) and
 * its tail (tail_add, in order, by one lane). ACC: accumulators a lane;
 * step: one step's 4 elements into them; ALIGN: the bytes a lane's load
 * of 4 weights wants.
 *
 * F32 and F16 (ggml_vec_dot_f32/f16): element e of a step into
 * accumulator e mod 64 with an FMA (lane g holds 4g..4g+3); the 64
 * folded at distances 32, 16 (GGML_F32_VEC_REDUCE), 8, 4, 2, 1
 * (_mm512_reduce_add_ps). The F32 tail: products rounded and added in
 * float, the last (n mod 8) contracted; the F16 tail: the float
 * products added in double.
 */
template <int T> struct wf;

/* 4 floats at p: one 16-byte load where p is 16-aligned */
__device__ __forceinline__ void wf_load4(const float *p, bool aligned, float *v)
{
	if (aligned) {
		const float4 u = *(const float4 *)p;

		v[0] = u.x;
		v[1] = u.y;
		v[2] = u.z;
		v[3] = u.w;
	} else {
#pragma unroll
		for (int k = 0; k < 4; k++)
			v[k] = p[k];
	}
}

/*
 * A lane's ACC accumulators folded with those of the lanes `from`,
 * from / 2, ... 1 above it (of 16), element by element: the CPU's
 * reduction of its vector registers, lane 0 of the 16 ends with it.
 */
template <int ACC>
__device__ __forceinline__ void wf_fold_lanes(float *acc, int from)
{
#pragma unroll
	for (int d = from; d > 0; d >>= 1)
#pragma unroll
		for (int k = 0; k < ACC; k++)
			acc[k] = __fadd_rn(
				acc[k],
				__shfl_down_sync(0xffffffffu, acc[k], d, 16));
}

template <> struct wf<T_F32> {
	typedef float elem;
	typedef float sum_t;
	enum { ALIGN = 16, ACC = 4 };
	static __device__ __forceinline__ float get(const elem *w, int64_t i)
	{
		return w[i];
	}
	static __device__ __forceinline__ void get4(const elem *w, int64_t i,
						    bool aligned, float *v)
	{
		wf_load4(w + i, aligned, v);
	}
	static __device__ __forceinline__ float round_act(float x)
	{
		return x;
	}
	static __device__ __forceinline__ void step(float *acc, const float *w,
						    const float *x)
	{
#pragma unroll
		for (int k = 0; k < 4; k++)
			acc[k] = fmaf(w[k], x[k], acc[k]);
	}
	/* lane 0 of the 16 gets the 64 accumulators' sum */
	static __device__ __forceinline__ float fold(float *acc)
	{
		wf_fold_lanes<4>(acc, 8);
		return __fadd_rn(__fadd_rn(acc[0], acc[2]),
				 __fadd_rn(acc[1], acc[3]));
	}
	/* element i of the tail [np, n) */
	static __device__ __forceinline__ sum_t tail_add(sum_t s, float w,
							 float x, int64_t i,
							 int64_t np, int64_t n)
	{
		return i < np + ((n - np) & ~(int64_t)7) ?
			       __fadd_rn(s, __fmul_rn(w, x)) :
			       fmaf(w, x, s);
	}
	static __device__ __forceinline__ float end(sum_t s)
	{
		return s;
	}
};

/*
 * F16 and BF16: 16-bit elements; the tail's float products added in
 * double to the folded sum
 */
struct wf_half {
	typedef uint16_t elem;
	typedef double sum_t;
	static __device__ __forceinline__ sum_t tail_add(sum_t s, float w,
							 float x, int64_t i,
							 int64_t np, int64_t n)
	{
		return s + (double)__fmul_rn(w, x);
	}
	static __device__ __forceinline__ float end(sum_t s)
	{
		return (float)s;
	}
};

template <> struct wf<T_F16> : wf_half {
	enum { ALIGN = 8, ACC = 4 };
	static __device__ __forceinline__ float get(const elem *w, int64_t i)
	{
		return cuda_h2f(w[i]);
	}
	static __device__ __forceinline__ void get4(const elem *w, int64_t i,
						    bool aligned, float *v)
	{
		if (aligned) {
			const uint2 u = *(const uint2 *)(w + i);

			v[0] = cuda_h2f((uint16_t)(u.x & 0xffffu));
			v[1] = cuda_h2f((uint16_t)(u.x >> 16));
			v[2] = cuda_h2f((uint16_t)(u.y & 0xffffu));
			v[3] = cuda_h2f((uint16_t)(u.y >> 16));
		} else {
#pragma unroll
			for (int k = 0; k < 4; k++)
				v[k] = cuda_h2f(w[i + k]);
		}
	}
	static __device__ __forceinline__ float round_act(float x)
	{
		return cuda_h2f(cuda_f2h(x));
	}
	static __device__ __forceinline__ void step(float *acc, const float *w,
						    const float *x)
	{
		wf<T_F32>::step(acc, w, x);
	}
	static __device__ __forceinline__ sum_t fold(float *acc)
	{
		return (double)wf<T_F32>::fold(acc);
	}
};

/*
 * BF16 (ggml_vec_dot_bf16, vdpbf16ps): a step's 32 pairs into 2 x 16
 * accumulators, pair p into accumulator p (lane g holds pairs 2g and
 * 2g + 1), the odd element first, each product exact; each 16 folded at
 * distances 8, 4, 2, 1 and added in double with the tail.
 */
template <> struct wf<T_BF16> : wf_half {
	enum { ALIGN = 8, ACC = 2 };
	static __device__ __forceinline__ float get(const elem *w, int64_t i)
	{
		return cuda_bf2f(w[i]);
	}
	static __device__ __forceinline__ void get4(const elem *w, int64_t i,
						    bool aligned, float *v)
	{
		if (aligned) {
			const uint2 u = *(const uint2 *)(w + i);

			v[0] = __uint_as_float(u.x << 16);
			v[1] = __uint_as_float(u.x & 0xffff0000u);
			v[2] = __uint_as_float(u.y << 16);
			v[3] = __uint_as_float(u.y & 0xffff0000u);
		} else {
#pragma unroll
			for (int k = 0; k < 4; k++)
				v[k] = cuda_bf2f(w[i + k]);
		}
	}
	static __device__ __forceinline__ float round_act(float x)
	{
		return cuda_bf2f(cuda_f2bf(x));
	}
	static __device__ __forceinline__ void step(float *acc, const float *w,
						    const float *x)
	{
#pragma unroll
		for (int q = 0; q < 2; q++) {
			acc[q] = fmaf(w[2 * q + 1], x[2 * q + 1], acc[q]);
			acc[q] = fmaf(w[2 * q], x[2 * q], acc[q]);
		}
	}
	/* lane 0 of the 16: the two halves' sums added in double */
	static __device__ __forceinline__ sum_t fold(float *acc)
	{
		wf_fold_lanes<2>(acc, 4);
		const float f0 = __fadd_rn(acc[0], acc[1]);
		const float f1 = __shfl_down_sync(0xffffffffu, f0, 8, 16);
		double s = 0.0;

		s += (double)f0;
		s += (double)f1;
		return s;
	}
};

#endif
