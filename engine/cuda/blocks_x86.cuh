// SPDX-License-Identifier: MIT
/*
 * The quantized dot products in the CPU's order, bit for bit: the order
 * of engine/quant/quant_x86.c (ggml's AVX2 kernels, which the AVX-512
 * build shares) and, for a matrix llama.cpp would repack
 * (engine_tensor.llama_repacked), of engine/quant/dot.c's repacked gemv
 * (ggml_gemv_*_8x8). mmv.cu's mmv_xw (and mmv_x, to compare) run them.
 *
 * The CPU holds eight float lanes a row. Lane l of a block's 32-element
 * load collects the integer products of elements 4l..4l+3 (of each 32
 * of a K-quant's 256, times their scale): exact integers, so only which
 * elements share a lane matters. Each block then adds d * lane into its
 * lane's accumulator with an FMA, block after block; the eight are
 * folded at the end by hsum_float_8's tree. So here 8 threads hold a
 * row, thread l the CPU's lane l, each walking the row's blocks in order
 * (wx_step), and the row's fold is the same tree over shuffles
 * (wx_hsum8). The mins of Q4_1/Q5_1/Q5_K go into one float of their own
 * (summs, every thread the same), Q4_K's into four (acc_m, threads 0-3),
 * Q2_K's into the lanes before the scales, as the CPU adds them.
 *
 * The repacked gemv keeps one float a row: each block's whole integer
 * sum (the eight lanes added, exactly, by shuffles) scaled with one FMA,
 * the mins likewise in a second float subtracted at the end.
 *
 * A block's work is split in three (wx<T>): unpack, the weight's part
 * alone (the lane's words of quants loaded and unpacked to bytes, its
 * scales and halves as integers and floats: wx<T>::bits), done once for
 * all the columns of a launch; gather (dot), the exact part for one
 * column (the integer sums against its activations, the products of the
 * weight's and the activation's halves, __fmul_rn: the same bits
 * whoever computes them) into a few words (wx<T>::part); apply, the
 * lane's FMAs with them, which alone must run in block order. mmv_x
 * gathers and applies on the same thread (wx_step); mmv_xw gathers a
 * row's blocks on 32 threads at once and hands the parts by shuffles
 * (wx_shfl) to the thread of their CPU lane, which applies them in order.
 *
 * Every thread of a warp calls dot and end the same number of times
 * (the shuffles want them all): a thread without a row walks row 0.
 */
#ifndef LLMFS_ENGINE_CUDA_BLOCKS_X86_CUH
#define LLMFS_ENGINE_CUDA_BLOCKS_X86_CUH

#include <type_traits>

#include "blocks.cuh"

/* How a row's floats end (wx<T>::END). */
enum {
	WX_PLAIN, /* hsum8(acc) */
	WX_SUMMS, /* hsum8(acc) + summs */
	WX_FOLD4, /* hsum8(acc) + ((m0 + m2) + (m1 + m3)) */
};

/* the sum of v over the 8 threads of a row (integers: any order) */
__device__ __forceinline__ int wx_sum8_int(int v)
{
	v += __shfl_xor_sync(0xffffffffu, v, 4);
	v += __shfl_xor_sync(0xffffffffu, v, 2);
	return v + __shfl_xor_sync(0xffffffffu, v, 1);
}

/*
 * hsum_float_8 over the row's threads, thread 0 of the 8 gets it:
 * r_i = v[i] + v[i + 4], then (r0 + r2) + (r1 + r3).
 */
__device__ __forceinline__ float wx_hsum8(float v)
{
	v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 4));
	v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 2));
	return __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 1));
}

/* Q4_K's four min floats (threads 0-3): (m0 + m2) + (m1 + m3) */
__device__ __forceinline__ float wx_fold4(float v)
{
	v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 2));
	return __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 1));
}

/* the 4 bytes of elements 4l.. of a legacy block (nibbles at qs) */
__device__ __forceinline__ int wx_nibbles(const uint8_t *qs, int l, bool b4)
{
	const int v = b4 ? cuda_load_int_b4(qs + 4 * (l % 4)) :
			   cuda_load_int_b2(qs + 4 * (l % 4));

	return (v >> (4 * (l / 4))) & 0x0f0f0f0f;
}

/*
 * What gather hands to apply: NI integers (exact sums) and NF floats
 * (products of scales), 32-bit words that a shuffle moves whole.
 */
template <int NI, int NF> struct wx_part {
	int i[NI];
	float f[NF];
};

/* p as thread src of the warp has it */
template <int NI, int NF>
__device__ __forceinline__ wx_part<NI, NF> wx_shfl(const wx_part<NI, NF> &p,
						   int src)
{
	wx_part<NI, NF> r;

#pragma unroll
	for (int n = 0; n < NI; n++)
		r.i[n] = __shfl_sync(0xffffffffu, p.i[n], src);
#pragma unroll
	for (int n = 0; n < NF; n++)
		r.f[n] = __shfl_sync(0xffffffffu, p.f[n], src);
	return r;
}

/* two halves in one word: lo | hi << 16, and back (cuda_h2f) */
__device__ __forceinline__ int wx_pack2(uint16_t lo, uint16_t hi)
{
	return (int)((uint32_t)lo | (uint32_t)hi << 16);
}

/*
 * blocks.cuh scale_q3_K without its branch on g (here a thread's, not a
 * constant): scale bytes g % 8, nibble g / 8, and 8 + g % 4's bits
 */
__device__ __forceinline__ int wx_scale_q3_K(const uint8_t *s, int g)
{
	const int low = (s[g & 7] >> (4 * (g >> 3))) & 0xF;
	const int high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;

	return (low | high << 4) - 32;
}

template <int T> struct wx;

/* ---- 32-element blocks ---------------------------------------------------- */

/*
 * The legacy types: lane l = the block's elements 4l..4l+3 against the
 * activation's; acc = fma(dw * da, lane, acc); Q4_1/Q5_1 also summs =
 * fma(m, s, summs) (quant_x86.c x86_dot_legacy). Repacked (Q4_0 only):
 * acc = fma(block sum, dw * da, acc) (dot.c dot_q4_0_repacked).
 * bits: the lane's 4 quants as bytes (Q4_0/Q5_0 unsigned, their offset
 * subtracted as OFFSET times the activation's byte sum), dw, the min.
 * part: i[0] the lane (repacked: the block's sum), f[0] dw * da, i[1]
 * the halves m and s (Q4_1, Q5_1).
 */
template <int T> struct wx_legacy {
	typedef typename wq<T>::block block;
	typedef blk_q8_1 act;
	/* blocks a thread gathers at once in mmv_xw: 18-34 bytes of weights */
	enum { QK = 32, U = T == T_Q8_0 ? 4 : 8 };
	typedef wx_part<T == T_Q4_1 || T == T_Q5_1 ? 2 : 1, 1> part;
	struct bits {
		int q;
		float d;
		uint16_t m;
	};
	static __device__ __forceinline__ bits unpack(const block *w, int l)
	{
		return { wx<T>::quants(w, l), cuda_h2f(w->d), wx<T>::min(w) };
	}
	template <bool REPACKED>
	static __device__ __forceinline__ part dot(const bits &u, const act *a,
						   int l)
	{
		const int av = cuda_load_int_b4(a->qs + 4 * l);
		int v = cuda_dp4a(u.q, av, 0);
		part p;

		if (wx<T>::OFFSET)
			v -= wx<T>::OFFSET * byte_sum(av);
		p.f[0] = __fmul_rn(u.d, cuda_h2f(a->d));
		p.i[0] = REPACKED ? wx_sum8_int(v) : v;
		if constexpr (wx<T>::END == WX_SUMMS)
			p.i[1] = wx_pack2(u.m, a->s);
		return p;
	}
	template <bool REPACKED>
	static __device__ __forceinline__ void apply(const part &p, int,
						     float &acc, float &summs)
	{
		if (REPACKED) {
			acc = fmaf((float)p.i[0], p.f[0], acc);
			return;
		}
		acc = fmaf(p.f[0], (float)p.i[0], acc);
		if constexpr (wx<T>::END == WX_SUMMS)
			summs = fmaf(
				cuda_h2f((uint16_t)p.i[1]),
				cuda_h2f((uint16_t)((uint32_t)p.i[1] >> 16)),
				summs);
	}
};

template <> struct wx<T_Q4_0> : wx_legacy<T_Q4_0> {
	static constexpr int END = WX_PLAIN, OFFSET = 8;
	static __device__ __forceinline__ int quants(const block *w, int l)
	{
		return wx_nibbles(w->qs, l, false);
	}
	static __device__ __forceinline__ uint16_t min(const block *)
	{
		return 0;
	}
};

template <> struct wx<T_Q4_1> : wx_legacy<T_Q4_1> {
	static constexpr int END = WX_SUMMS, OFFSET = 0;
	static __device__ __forceinline__ int quants(const block *w, int l)
	{
		return wx_nibbles(w->qs, l, true);
	}
	static __device__ __forceinline__ uint16_t min(const block *w)
	{
		return w->m;
	}
};

template <> struct wx<T_Q5_0> : wx_legacy<T_Q5_0> {
	static constexpr int END = WX_PLAIN, OFFSET = 16;
	static __device__ __forceinline__ int quants(const block *w, int l)
	{
		const uint32_t qh = (uint32_t)cuda_load_int_b2(w->qh);

		return wx_nibbles(w->qs, l, false) | q5_high(qh, 4 * l);
	}
	static __device__ __forceinline__ uint16_t min(const block *)
	{
		return 0;
	}
};

template <> struct wx<T_Q5_1> : wx_legacy<T_Q5_1> {
	static constexpr int END = WX_SUMMS, OFFSET = 0;
	static __device__ __forceinline__ int quants(const block *w, int l)
	{
		const uint32_t qh = (uint32_t)cuda_load_int_b4(w->qh);

		return wx_nibbles(w->qs, l, true) | q5_high(qh, 4 * l);
	}
	static __device__ __forceinline__ uint16_t min(const block *w)
	{
		return w->m;
	}
};

template <> struct wx<T_Q8_0> : wx_legacy<T_Q8_0> {
	static constexpr int END = WX_PLAIN, OFFSET = 0;
	static __device__ __forceinline__ int quants(const block *w, int l)
	{
		return cuda_load_int_b2(w->qs + 4 * l);
	}
	static __device__ __forceinline__ uint16_t min(const block *)
	{
		return 0;
	}
};

/* ---- K-quants: 256 elements, Q8_K activations ----------------------------- */

/*
 * Lane l of a super-block: over its 8 chunks of 32, the chunk's
 * elements 4l..4l+3 (word 4l of the chunk) times the scale of their 16
 * (quant_x86.c x86_lanes_k). bits: those 8 words of quants, unpacked to
 * bytes, and their 8 scales; what a column adds is its activations'
 * words, the dp4a and the scale's multiply.
 */

/* the lane's sum over its 8 chunks: scale times quants . activations */
__device__ __forceinline__ int wx_chunks_dot(const int *q, const int *sc,
					     const blk_q8_K *a, int l)
{
	int s = 0;

	for (int c = 0; c < 8; c++)
		s += sc[c] *
		     cuda_dp4a(q[c], cuda_load_int_b4(a->qs + 32 * c + 4 * l),
			       0);
	return s;
}

/*
 * The K-quants with mins (Q2_K, Q4_K, Q5_K): part i[0] the lane's sum,
 * i[1] its mins, f[0] da * d, f[1] -da * dmin; repacked, i[0] and i[1]
 * the block's (the 8 lanes' added), f[0] d * da, f[1] dmin * da (the
 * mins' float subtracted at the end). APART: the mins into accm (Q4_K,
 * Q5_K), else into acc before the sum (Q2_K, as the CPU adds them).
 */
template <bool APART> struct wx_mins {
	typedef wx_part<2, 2> part;
	template <bool REPACKED>
	static __device__ __forceinline__ part gather(int s, int mins, float d,
						      float dmin, float da)
	{
		part p;

		if (REPACKED) {
			p.i[0] = wx_sum8_int(s);
			p.i[1] = wx_sum8_int(mins);
			p.f[0] = __fmul_rn(d, da);
			p.f[1] = __fmul_rn(dmin, da);
			return p;
		}
		p.i[0] = s;
		p.i[1] = mins;
		p.f[0] = __fmul_rn(da, d);
		p.f[1] = __fmul_rn(-da, dmin);
		return p;
	}
	template <bool REPACKED>
	static __device__ __forceinline__ void apply(const part &p, int,
						     float &acc, float &accm)
	{
		if (REPACKED) {
			acc = fmaf((float)p.i[0], p.f[0], acc);
			accm = fmaf((float)p.i[1], p.f[1], accm);
			return;
		}
		if (APART)
			accm = fmaf(p.f[1], (float)p.i[1], accm);
		else
			acc = fmaf(p.f[1], (float)p.i[1], acc);
		acc = fmaf(p.f[0], (float)p.i[0], acc);
	}
};

/*
 * The K-quants without mins (Q3_K, Q6_K): part i[0] the lane's sum, f[0]
 * da * d; no repacked order.
 */
struct wx_plain {
	static constexpr int END = WX_PLAIN;
	typedef wx_part<1, 1> part;
	static __device__ __forceinline__ part gather(int s, float d, float da)
	{
		part p;

		p.i[0] = s;
		p.f[0] = __fmul_rn(da, d);
		return p;
	}
	template <bool REPACKED>
	static __device__ __forceinline__ void apply(const part &p, int,
						     float &acc, float &)
	{
		acc = fmaf(p.f[0], (float)p.i[0], acc);
	}
};

/* Q2_K: quants (qs[32 (c / 4) + t] >> 2 (c % 4)) & 3; mins first */
template <> struct wx<T_Q2_K> : wx_mins<false> {
	typedef blk_q2_K block;
	typedef blk_q8_K act;
	enum { QK = QK_K, U = 2 };
	static constexpr int END = WX_PLAIN;
	struct bits {
		int q[8], sc[8], m[2]; /* m: the mins of sub-blocks 2l, 2l + 1 */
		float d, dmin;
	};
	static __device__ __forceinline__ bits unpack(const block *w, int l)
	{
		bits u;

		for (int c = 0; c < 8; c++) {
			u.q[c] = (cuda_load_int_b4(w->qs + 32 * (c / 4) +
						   4 * l) >>
				  (2 * (c % 4))) &
				 0x03030303;
			u.sc[c] = w->scales[2 * c + l / 4] & 0xF;
		}
		u.m[0] = w->scales[2 * l] >> 4;
		u.m[1] = w->scales[2 * l + 1] >> 4;
		u.d = cuda_h2f(w->d);
		u.dmin = cuda_h2f(w->dmin);
		return u;
	}
	template <bool REPACKED>
	static __device__ __forceinline__ part dot(const bits &u, const act *a,
						   int l)
	{
		const int mins = u.m[0] * a->bsums[2 * l] +
				 u.m[1] * a->bsums[2 * l + 1];

		return gather<REPACKED>(wx_chunks_dot(u.q, u.sc, a, l), mins,
					u.d, u.dmin, a->d);
	}
};

/*
 * Q3_K: low 2 bits from qs, 4 less where the hmask bit (c) is clear
 * (bits: the quants with the hmask bit as bit 2, unsigned; the 4 taken
 * off as 4 times the activation's byte sum).
 */
template <> struct wx<T_Q3_K> : wx_plain {
	typedef blk_q3_K block;
	typedef blk_q8_K act;
	enum { QK = QK_K, U = 2 };
	struct bits {
		int q[8], sc[8];
		float d;
	};
	static __device__ __forceinline__ bits unpack(const block *w, int l)
	{
		const int hm = cuda_load_int_b2(w->hmask + 4 * l);
		bits u;

		for (int c = 0; c < 8; c++) {
			u.q[c] = ((cuda_load_int_b2(w->qs + 32 * (c / 4) +
						    4 * l) >>
				   (2 * (c % 4))) &
				  0x03030303) |
				 (((hm >> c) & 0x01010101) << 2);
			u.sc[c] = wx_scale_q3_K(w->scales, 2 * c + l / 4);
		}
		u.d = cuda_h2f(w->d);
		return u;
	}
	template <bool REPACKED>
	static __device__ __forceinline__ part dot(const bits &u, const act *a,
						   int l)
	{
		int s = 0;

		for (int c = 0; c < 8; c++) {
			const int av = cuda_load_int_b4(a->qs + 32 * c + 4 * l);

			s += u.sc[c] *
			     (cuda_dp4a(u.q[c], av, 0) - 4 * byte_sum(av));
		}
		return gather(s, u.d, a->d);
	}
};

/*
 * Q4_K and Q5_K: chunk c is the low (c even) or high nibbles of qs[32
 * (c / 2) ..], Q5_K's fifth bit qh bit c; scale and min of chunk c.
 * prod[k] = m[2k] (b[4k] + b[4k+1]) + m[2k+1] (b[4k+2] + b[4k+3]).
 * part (wx_mins): the mins i[1] are Q4_K's prod[l] (lanes 0-3, 0 on
 * 4-7; repacked: their sum), Q5_K's four summed (no repacked order).
 */
template <bool FIVE> struct wx_q45_K : wx_mins<true> {
	typedef typename std::conditional<FIVE, blk_q5_K, blk_q4_K>::type block;
	typedef blk_q8_K act;
	enum { QK = QK_K, U = 2 };
	static constexpr int END = FIVE ? WX_SUMMS : WX_FOLD4;
	/*
	 * q, sc: chunk c's quants and scale; mn: the mins of prod (Q5_K:
	 * all 8; Q4_K: those of prod[l & 3], zero on threads 4-7)
	 */
	struct bits {
		int q[8], sc[8], mn[FIVE ? 8 : 2];
		float d, dmin;
	};
	/*
	 * byte i of the 12 scale bytes held as 3 words (read whole: 3 loads
	 * and registers instead of 12; the block and its scales at offset 4
	 * are 4-aligned, as its qs); selects, not an index into the words
	 * (that would put them in local memory where i is not constant)
	 */
	static __device__ __forceinline__ int sbyte(const uint32_t *sc, int i)
	{
		const uint32_t v = i < 4 ? sc[0] : i < 8 ? sc[1] : sc[2];

		return (int)(v >> (8 * (i % 4))) & 0xff;
	}
	/* ggml's get_scale_min_k4's scale over those words */
	static __device__ __forceinline__ int scale_k4(int j, const uint32_t *sc)
	{
		if (j < 4)
			return sbyte(sc, j) & 63;
		return (sbyte(sc, j + 4) & 0xF) | ((sbyte(sc, j - 4) >> 6) << 4);
	}
	/*
	 * min j (0-7) alone, shifts and a select, for a j not known at
	 * compile time (Q4_K's prod[l]) without a branch: bytes j + 4 (word
	 * 1) and, from j = 4 on, j + 4 and j (words 2 and 1, byte j - 4)
	 */
	static __device__ __forceinline__ int min_k4(const uint32_t *sc, int j)
	{
		const int sh = 8 * (j & 3);
		const int lo = (int)(sc[1] >> sh) & 63;
		const int hi = ((int)(sc[2] >> (sh + 4)) & 0xf) |
			       (((int)(sc[1] >> (sh + 6)) & 3) << 4);

		return j < 4 ? lo : hi;
	}
	static __device__ __forceinline__ int prod(const int *mn, const act *a,
						   int k)
	{
		return mn[0] * (a->bsums[4 * k] + a->bsums[4 * k + 1]) +
		       mn[1] * (a->bsums[4 * k + 2] + a->bsums[4 * k + 3]);
	}
	static __device__ __forceinline__ bits unpack(const block *w, int l)
	{
		const uint32_t dm = (uint32_t)cuda_load_int_b4(&w->d);
		uint32_t sc[3];
		bits u;

		for (int n = 0; n < 3; n++)
			sc[n] = (uint32_t)cuda_load_int_b4(w->scales + 4 * n);
		for (int c = 0; c < 8; c++) {
			u.q[c] = (cuda_load_int_b4(w->qs + 32 * (c / 2) +
						   4 * l) >>
				  (4 * (c % 2))) &
				 0x0f0f0f0f;
			if (FIVE)
				u.q[c] |= ((cuda_load_int_b4(
						    ((const blk_q5_K *)w)->qh +
						    4 * l) >>
					    c) &
					   0x01010101)
					  << 4;
			u.sc[c] = scale_k4(c, sc);
		}
		/*
		 * Q4_K: every thread takes the mins of a prod (l & 3: no
		 * branch around loads), threads 0-3 keep them
		 */
		for (int j = 0; j < (FIVE ? 8 : 2); j++)
			u.mn[j] = FIVE ? min_k4(sc, j) :
					 min_k4(sc, 2 * (l & 3) + j) * (l < 4);
		u.d = cuda_h2f((uint16_t)dm);
		u.dmin = cuda_h2f((uint16_t)(dm >> 16));
		return u;
	}
	/*
	 * Q4_K's threads 4-7 add f[1] * 0 to an accm that no fold reads
	 * (wx_fold4 takes threads 0-3): no branch
	 */
	template <bool REPACKED>
	static __device__ __forceinline__ part dot(const bits &u, const act *a,
						   int l)
	{
		static_assert(!FIVE || !REPACKED, "Q5_K has no repacked order");
		const int s = wx_chunks_dot(u.q, u.sc, a, l);
		const int mins = FIVE ? prod(u.mn, a, 0) +
						prod(u.mn + 2, a, 1) +
						prod(u.mn + 4, a, 2) +
						prod(u.mn + 6, a, 3) :
					prod(u.mn, a, l & 3);

		return gather<REPACKED>(s, mins, u.d, u.dmin, a->d);
	}
};

template <> struct wx<T_Q4_K> : wx_q45_K<false> {
};
template <> struct wx<T_Q5_K> : wx_q45_K<true> {
};

/*
 * Q6_K: chunk c in half h = c / 4, r = c % 4: low (r < 2) or high
 * nibbles of ql[64 h + 32 (r % 2) ..], bits 2r of qh[32 h ..] above
 * them; unsigned, lane l then loses 32 (b[2l] sc[2l] + b[2l+1] sc[2l+1])
 * (sub-blocks 2l and 2l + 1, as the CPU does it).
 */
template <> struct wx<T_Q6_K> : wx_plain {
	typedef blk_q6_K block;
	typedef blk_q8_K act;
	enum { QK = QK_K, U = 2 };
	struct bits {
		int q[8], sc[8], off[2]; /* off: scales 2l, 2l + 1 */
		float d;
	};
	static __device__ __forceinline__ bits unpack(const block *w, int l)
	{
		bits u;

		for (int c = 0; c < 8; c++) {
			const int h = c / 4, r = c % 4;
			const int ql = cuda_load_int_b2(w->ql + 64 * h +
							32 * (r % 2) + 4 * l);
			const int qh = cuda_load_int_b2(w->qh + 32 * h + 4 * l);

			u.q[c] = ((ql >> (4 * (r / 2))) & 0x0f0f0f0f) |
				 (((qh >> (2 * r)) & 0x03030303) << 4);
			u.sc[c] = w->scales[2 * c + l / 4];
		}
		u.off[0] = w->scales[2 * l];
		u.off[1] = w->scales[2 * l + 1];
		u.d = cuda_h2f(w->d);
		return u;
	}
	template <bool REPACKED>
	static __device__ __forceinline__ part dot(const bits &u, const act *a,
						   int l)
	{
		const int s = wx_chunks_dot(u.q, u.sc, a, l);

		return gather(s - 32 * (a->bsums[2 * l] * u.off[0] +
					a->bsums[2 * l + 1] * u.off[1]),
			      u.d, a->d);
	}
};

/* one block's FMAs on the thread that unpacked them (mmv_x) */
template <int T, bool REPACKED>
__device__ __forceinline__ void wx_step(const typename wx<T>::bits &u,
					const typename wx<T>::act *a, int l,
					float &acc, float &accm)
{
	wx<T>::template apply<REPACKED>(
		wx<T>::template dot<REPACKED>(u, a, l), l, acc, accm);
}

/*
 * The row's float from its 8 threads' acc and accm, at thread 0 of the
 * 8 (every thread calls it).
 */
template <int T, bool REPACKED>
__device__ __forceinline__ float wx_end(float acc, float accm)
{
	float s;

	if (REPACKED)
		return __fsub_rn(acc, accm);
	s = wx_hsum8(acc);
	if (wx<T>::END == WX_SUMMS)
		s = __fadd_rn(s, accm);
	else if (wx<T>::END == WX_FOLD4)
		s = __fadd_rn(s, wx_fold4(accm));
	return s;
}

#endif
