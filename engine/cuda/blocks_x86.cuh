// SPDX-License-Identifier: MIT
/*
 * The quantized dot products in the CPU's order, bit for bit: the order
 * of engine/quant/quant_x86.c (ggml's AVX2 kernels, which the AVX-512
 * build shares) and, for a matrix llama.cpp would repack
 * (engine_tensor.llama_repacked), of engine/quant/dot.c's repacked gemv
 * (ggml_gemv_*_8x8). mmv.cu's mmv_x runs them.
 *
 * The CPU holds eight float lanes a row. Lane l of a block's 32-element
 * load collects the integer products of elements 4l..4l+3 (of each 32
 * of a K-quant's 256, times their scale): exact integers, so only which
 * elements share a lane matters. Each block then adds d * lane into its
 * lane's accumulator with an FMA, block after block; the eight are
 * folded at the end by hsum_float_8's tree. So here 8 threads hold a
 * row, thread l the CPU's lane l, each walking the row's blocks in order
 * (wx<T>::step), and the row's fold is the same tree over shuffles
 * (wx_hsum8). The mins of Q4_1/Q5_1/Q5_K go into one float of their own
 * (summs, every thread the same), Q4_K's into four (acc_m, threads 0-3),
 * Q2_K's into the lanes before the scales, as the CPU adds them.
 *
 * The repacked gemv keeps one float a row: each block's whole integer
 * sum (the eight lanes added, exactly, by shuffles) scaled with one FMA,
 * the mins likewise in a second float subtracted at the end.
 *
 * Every thread of a warp calls step and end the same number of times
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

template <int T> struct wx;

/* ---- 32-element blocks ---------------------------------------------------- */

/*
 * The legacy types: lane l = the block's elements 4l..4l+3 against the
 * activation's; acc = fma(dw * da, lane, acc); Q4_1/Q5_1 also summs =
 * fma(m, s, summs) (quant_x86.c x86_dot_legacy). Repacked (Q4_0 only):
 * acc = fma(block sum, dw * da, acc) (dot.c dot_q4_0_repacked).
 */
template <int T> struct wx_legacy {
	typedef typename wq<T>::block block;
	typedef blk_q8_1 act;
	enum { QK = 32 };
	template <bool REPACKED>
	static __device__ __forceinline__ void
	step(const block *w, const act *a, int l, float &acc, float &summs)
	{
		const float d = __fmul_rn(cuda_h2f(w->d), cuda_h2f(a->d));

		if (REPACKED) {
			const int s = wx_sum8_int(wx<T>::lane(w, a, l));

			acc = fmaf((float)s, d, acc);
			return;
		}
		acc = fmaf(d, (float)wx<T>::lane(w, a, l), acc);
		if (wx<T>::END == WX_SUMMS)
			summs = fmaf(cuda_h2f(wx<T>::min(w)), cuda_h2f(a->s),
				     summs);
	}
};

template <> struct wx<T_Q4_0> : wx_legacy<T_Q4_0> {
	static constexpr int END = WX_PLAIN;
	static __device__ __forceinline__ int lane(const block *w, const act *a,
						   int l)
	{
		const int av = cuda_load_int_b4(a->qs + 4 * l);

		return __dp4a(wx_nibbles(w->qs, l, false), av, 0) -
		       8 * byte_sum(av);
	}
	static __device__ __forceinline__ uint16_t min(const block *)
	{
		return 0;
	}
};

template <> struct wx<T_Q4_1> : wx_legacy<T_Q4_1> {
	static constexpr int END = WX_SUMMS;
	static __device__ __forceinline__ int lane(const block *w, const act *a,
						   int l)
	{
		return __dp4a(wx_nibbles(w->qs, l, true),
			      cuda_load_int_b4(a->qs + 4 * l), 0);
	}
	static __device__ __forceinline__ uint16_t min(const block *w)
	{
		return w->m;
	}
};

template <> struct wx<T_Q5_0> : wx_legacy<T_Q5_0> {
	static constexpr int END = WX_PLAIN;
	static __device__ __forceinline__ int lane(const block *w, const act *a,
						   int l)
	{
		const uint32_t qh = (uint32_t)cuda_load_int_b2(w->qh);
		const int av = cuda_load_int_b4(a->qs + 4 * l);

		return __dp4a(wx_nibbles(w->qs, l, false) | q5_high(qh, 4 * l),
			      av, 0) -
		       16 * byte_sum(av);
	}
	static __device__ __forceinline__ uint16_t min(const block *)
	{
		return 0;
	}
};

template <> struct wx<T_Q5_1> : wx_legacy<T_Q5_1> {
	static constexpr int END = WX_SUMMS;
	static __device__ __forceinline__ int lane(const block *w, const act *a,
						   int l)
	{
		const uint32_t qh = (uint32_t)cuda_load_int_b4(w->qh);

		return __dp4a(wx_nibbles(w->qs, l, true) | q5_high(qh, 4 * l),
			      cuda_load_int_b4(a->qs + 4 * l), 0);
	}
	static __device__ __forceinline__ uint16_t min(const block *w)
	{
		return w->m;
	}
};

template <> struct wx<T_Q8_0> : wx_legacy<T_Q8_0> {
	static constexpr int END = WX_PLAIN;
	static __device__ __forceinline__ int lane(const block *w, const act *a,
						   int l)
	{
		return __dp4a(cuda_load_int_b2(w->qs + 4 * l),
			      cuda_load_int_b4(a->qs + 4 * l), 0);
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
 * (quant_x86.c x86_lanes_k).
 */

/* Q2_K: quants (qs[32 (c / 4) + t] >> 2 (c % 4)) & 3; mins first */
template <> struct wx<T_Q2_K> {
	typedef blk_q2_K block;
	typedef blk_q8_K act;
	enum { QK = QK_K };
	static constexpr int END = WX_PLAIN;
	template <bool REPACKED>
	static __device__ __forceinline__ void
	step(const block *w, const act *a, int l, float &acc, float &accm)
	{
		const int mins = (w->scales[2 * l] >> 4) * a->bsums[2 * l] +
				 (w->scales[2 * l + 1] >> 4) *
					 a->bsums[2 * l + 1];
		int s = 0;

		for (int c = 0; c < 8; c++) {
			const int q = (cuda_load_int_b4(w->qs + 32 * (c / 4) +
							4 * l) >>
				       (2 * (c % 4))) &
				      0x03030303;

			s += (w->scales[2 * c + l / 4] & 0xF) *
			     __dp4a(q, cuda_load_int_b4(a->qs + 32 * c + 4 * l),
				    0);
		}
		if (REPACKED) {
			const int sum = wx_sum8_int(s),
				  smin = wx_sum8_int(mins);

			acc = fmaf((float)sum, __fmul_rn(cuda_h2f(w->d), a->d),
				   acc);
			accm = fmaf((float)smin,
				    __fmul_rn(cuda_h2f(w->dmin), a->d), accm);
			return;
		}
		acc = fmaf(__fmul_rn(-a->d, cuda_h2f(w->dmin)), (float)mins,
			   acc);
		acc = fmaf(__fmul_rn(a->d, cuda_h2f(w->d)), (float)s, acc);
	}
};

/* Q3_K: low 2 bits from qs, 4 less where the hmask bit (c) is clear */
template <> struct wx<T_Q3_K> {
	typedef blk_q3_K block;
	typedef blk_q8_K act;
	enum { QK = QK_K };
	static constexpr int END = WX_PLAIN;
	template <bool REPACKED>
	static __device__ __forceinline__ void
	step(const block *w, const act *a, int l, float &acc, float &)
	{
		const int hm = cuda_load_int_b2(w->hmask + 4 * l);
		int s = 0;

		for (int c = 0; c < 8; c++) {
			const int av = cuda_load_int_b4(a->qs + 32 * c + 4 * l);
			const int q = ((cuda_load_int_b2(w->qs + 32 * (c / 4) +
							 4 * l) >>
					(2 * (c % 4))) &
				       0x03030303) |
				      (((hm >> c) & 0x01010101) << 2);

			s += scale_q3_K(w->scales, 2 * c + l / 4) *
			     (__dp4a(q, av, 0) - 4 * byte_sum(av));
		}
		acc = fmaf(__fmul_rn(a->d, cuda_h2f(w->d)), (float)s, acc);
	}
};

/*
 * Q4_K and Q5_K: chunk c is the low (c even) or high nibbles of qs[32
 * (c / 2) ..], Q5_K's fifth bit qh bit c; scale and min of chunk c.
 * prod[k] = m[2k] (b[4k] + b[4k+1]) + m[2k+1] (b[4k+2] + b[4k+3]).
 */
template <bool FIVE> struct wx_q45_K {
	typedef typename std::conditional<FIVE, blk_q5_K, blk_q4_K>::type block;
	typedef blk_q8_K act;
	enum { QK = QK_K };
	static constexpr int END = FIVE ? WX_SUMMS : WX_FOLD4;
	static __device__ __forceinline__ int prod(const block *w, const act *a,
						   int k)
	{
		int sc0, m0, sc1, m1;

		scale_min_k4(2 * k, w->scales, &sc0, &m0);
		scale_min_k4(2 * k + 1, w->scales, &sc1, &m1);
		return m0 * (a->bsums[4 * k] + a->bsums[4 * k + 1]) +
		       m1 * (a->bsums[4 * k + 2] + a->bsums[4 * k + 3]);
	}
	template <bool REPACKED>
	static __device__ __forceinline__ void
	step(const block *w, const act *a, int l, float &acc, float &accm)
	{
		int s = 0;

		for (int c = 0; c < 8; c++) {
			int sc, m;
			int q = (cuda_load_int_b4(w->qs + 32 * (c / 2) +
						  4 * l) >>
				 (4 * (c % 2))) &
				0x0f0f0f0f;

			if (FIVE)
				q |= ((cuda_load_int_b4(
					       ((const blk_q5_K *)w)->qh +
					       4 * l) >>
				       c) &
				      0x01010101)
				     << 4;
			scale_min_k4(c, w->scales, &sc, &m);
			s += sc *
			     __dp4a(q, cuda_load_int_b4(a->qs + 32 * c + 4 * l),
				    0);
		}
		if (REPACKED) {
			/* Q4_K only: threads 0-3 bring prod[l] */
			const int sum = wx_sum8_int(s);
			const int smin = wx_sum8_int(l < 4 ? prod(w, a, l) : 0);

			acc = fmaf((float)sum, __fmul_rn(cuda_h2f(w->d), a->d),
				   acc);
			accm = fmaf((float)smin,
				    __fmul_rn(cuda_h2f(w->dmin), a->d), accm);
			return;
		}
		const float dmin = __fmul_rn(-a->d, cuda_h2f(w->dmin));

		if (FIVE)
			accm = fmaf(dmin,
				    (float)(prod(w, a, 0) + prod(w, a, 1) +
					    prod(w, a, 2) + prod(w, a, 3)),
				    accm);
		else if (l < 4)
			accm = fmaf(dmin, (float)prod(w, a, l), accm);
		acc = fmaf(__fmul_rn(a->d, cuda_h2f(w->d)), (float)s, acc);
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
template <> struct wx<T_Q6_K> {
	typedef blk_q6_K block;
	typedef blk_q8_K act;
	enum { QK = QK_K };
	static constexpr int END = WX_PLAIN;
	template <bool REPACKED>
	static __device__ __forceinline__ void
	step(const block *w, const act *a, int l, float &acc, float &)
	{
		int s = 0;

		for (int c = 0; c < 8; c++) {
			const int h = c / 4, r = c % 4;
			const int ql = cuda_load_int_b2(w->ql + 64 * h +
							32 * (r % 2) + 4 * l);
			const int qh = cuda_load_int_b2(w->qh + 32 * h + 4 * l);
			const int q = ((ql >> (4 * (r / 2))) & 0x0f0f0f0f) |
				      (((qh >> (2 * r)) & 0x03030303) << 4);

			s += w->scales[2 * c + l / 4] *
			     __dp4a(q, cuda_load_int_b4(a->qs + 32 * c + 4 * l),
				    0);
		}
		s -= 32 * (a->bsums[2 * l] * w->scales[2 * l] +
			   a->bsums[2 * l + 1] * w->scales[2 * l + 1]);
		acc = fmaf(__fmul_rn(a->d, cuda_h2f(w->d)), (float)s, acc);
	}
};

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
