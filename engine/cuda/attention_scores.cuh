// SPDX-License-Identifier: MIT
/*
 * Attention's scores: K rows against Q, in the CPU's order (att_dot_cpu,
 * att_dot_q8_0_cpu: its bits) or in a fast one (att_dot_fast), a warp
 * scoring 32 positions at once (att_scores). Included by attention.cu.
 */
#ifndef LLMFS_ENGINE_CUDA_ATTENTION_SCORES_CUH
#define LLMFS_ENGINE_CUDA_ATTENTION_SCORES_CUH

#include "kv_cache.cuh"

#define ATT_WARPS 4
#define ATT_MAX_G 8 /* query heads per KV head */
/* a warp's 32 positions lie in one block of the cache (att_v_sum) */
static_assert(CUDA_KV_BLOCK % 32 == 0, "KV blocks of whole warps");

/* the CPU's 64 lanes of a dot product reduced 4 x 16, then halves */
__device__ __forceinline__ float att_dot_fold64(const float *acc)
{
	float t[16];

#pragma unroll
	for (int l = 0; l < 16; l++)
		t[l] = (acc[l] + acc[32 + l]) + (acc[16 + l] + acc[48 + l]);
#pragma unroll
	for (int w = 8; w >= 1; w /= 2)
#pragma unroll
		for (int l = 0; l < w; l++)
			t[l] = t[l] + t[l + w];
	return t[0];
}

/*
 * A K row . Q as the CPU's ggml_vec_dot_f16 / ggml_vec_dot_f32 add it up
 * (engine/quant/dot.c): 64 FMA lanes over steps of 64, reduced 4 x 16
 * then halves, the tail of an F16 row in double, of an F32 row in
 * groups of 16 and 8 as GCC compiled it. One thread per row; registers
 * for the 64 lanes.
 */
template <int KT>
__device__ float att_dot_cpu(const float *q, const uint8_t *kr, int n)
{
	const int np = n & ~63;
	float acc[64];
	int i = np;

#pragma unroll
	for (int l = 0; l < 64; l++)
		acc[l] = 0.0f;
	for (int b = 0; b < np; b += 64)
#pragma unroll
		for (int l = 0; l < 64; l++)
			acc[l] = fmaf(kv_get<KT>(kr, b + l), q[b + l], acc[l]);
	const float t0 = att_dot_fold64(acc);

	if (KT == T_F16) {
		double sum = (double)t0;

		for (; i < n; i++)
			sum += (double)(__fmul_rn(kv_get<KT>(kr, i), q[i]));
		return (float)sum;
	}
	float sum = t0;

	for (; i < np + ((n - np) & ~15); i++)
		sum = __fadd_rn(sum, __fmul_rn(kv_get<KT>(kr, i), q[i]));
	if (n - i >= 8)
		for (int j = 0; j < 8; j++, i++)
			sum = __fadd_rn(sum,
					__fmul_rn(kv_get<KT>(kr, i), q[i]));
	for (; i < n; i++)
		sum = fmaf(kv_get<KT>(kr, i), q[i], sum);
	return sum;
}

/*
 * A Q8_0 K row . Q as the CPU adds it up (quant_q8_0_dot_x86): Q in Q8_0
 * (qq, qd: quants and block scales), per block 8 lanes of 4 products,
 * each lane's sum times dk * dq fused into its accumulator, then
 * hsum_float_8.
 */
static __device__ float att_dot_q8_0_cpu(const int8_t *qq,
					 const float *qd, const uint8_t *kr,
					 int n)
{
	float acc[8];

#pragma unroll
	for (int l = 0; l < 8; l++)
		acc[l] = 0.0f;
	for (int b = 0; b < n / 32; b++) {
		const blk_q8_0 *kb = (const blk_q8_0 *)kr + b;
		const float dd = __fmul_rn(cuda_h2f(kb->d), qd[b]);

#pragma unroll
		for (int l = 0; l < 8; l++) {
			int lane = 0;

			for (int t = 0; t < 4; t++)
				lane += (int)kb->qs[4 * l + t] *
					(int)qq[32 * b + 4 * l + t];
			acc[l] = fmaf(dd, (float)lane, acc[l]);
		}
	}
	return __fadd_rn(__fadd_rn(acc[4] + acc[0], acc[6] + acc[2]),
			 __fadd_rn(acc[5] + acc[1], acc[7] + acc[3]));
}

/*
 * 16 bytes of an F32, F16 or BF16 K row as floats: kf[0..3] (F32) or
 * kf[0..7].
 */
template <int KT>
__device__ __forceinline__ void att_k16_floats(uint4 u, float kf[8])
{
	const uint32_t w[4] = { u.x, u.y, u.z, u.w };

#pragma unroll
	for (int e = 0; e < 4; e++) {
		if (KT == T_F32) {
			kf[e] = __uint_as_float(w[e]);
		} else if (KT == T_F16) {
			kf[2 * e] = cuda_h2f((uint16_t)w[e]);
			kf[2 * e + 1] = cuda_h2f((uint16_t)(w[e] >> 16));
		} else {
			kf[2 * e] = cuda_bf2f((uint16_t)w[e]);
			kf[2 * e + 1] = cuda_bf2f((uint16_t)(w[e] >> 16));
		}
	}
}

/*
 * The G heads' dot products with one K row in any order, for the rows
 * past exact_below: 16-byte loads, 8 elements at a time (F16, BF16, F32
 * rows whose head starts 16-aligned); a Q8_0 row against Q in Q8_0, as
 * the CPU multiplies them (integer sums; only the float sum's order
 * differs). Q from shared memory (every lane reads the same word: a
 * broadcast).
 */
template <int KT>
__device__ __forceinline__ void att_dot_fast(const float *q_s, const int8_t *qq,
					     const float *qd, const uint8_t *kr,
					     int hd, int G, float *sc)
{
	if constexpr (KT == T_F16 || KT == T_BF16 || KT == T_F32) {
		const int per = KT == T_F32 ? 4 : 8; /* elements in 16 bytes */

		if (hd % 8 == 0 && ((uintptr_t)kr & 15) == 0) {
			const uint4 *k4 = (const uint4 *)kr;

#pragma unroll 4
			for (int i = 0; i < hd / per; i++) {
				float kf[8];

				att_k16_floats<KT>(k4[i], kf);
#pragma unroll
				for (int g = 0; g < ATT_MAX_G; g++) {
					if (g >= G)
						break;
					const float *qg = q_s + g * hd +
							  i * per;

#pragma unroll
					for (int e = 0; e < per; e++)
						sc[g] = fmaf(qg[e], kf[e],
							     sc[g]);
				}
			}
			return;
		}
	} else if constexpr (KT == T_Q8_0) {
		/* Q as Q8_0 (qq, qd), integer dots: the CPU's products */
		const blk_q8_0 *kb = (const blk_q8_0 *)kr;

		for (int b = 0; b < hd / 32; b++) {
			const float dk = cuda_h2f(kb[b].d);
			int dot[ATT_MAX_G];

#pragma unroll
			for (int g = 0; g < ATT_MAX_G; g++)
				dot[g] = 0;
#pragma unroll
			for (int i = 0; i < 8; i++) {
				const int kw = cuda_load_int_b2(kb[b].qs +
								4 * i);

#pragma unroll
				for (int g = 0; g < ATT_MAX_G; g++) {
					if (g >= G)
						break;
					dot[g] = __dp4a(kw,
							cuda_load_int_b4(
								qq + g * hd +
								32 * b + 4 * i),
							dot[g]);
				}
			}
#pragma unroll
			for (int g = 0; g < ATT_MAX_G; g++)
				if (g < G)
					sc[g] = fmaf(
						__fmul_rn(dk,
							  qd[g * hd / 32 + b]),
						(float)dot[g], sc[g]);
		}
		return;
	}
	if constexpr (KT != T_Q8_0) {
		for (int d = 0; d < hd; d++) {
			const float kd = kv_get<KT>(kr, d);

#pragma unroll
			for (int g = 0; g < ATT_MAX_G; g++)
				if (g < G)
					sc[g] = fmaf(q_s[g * hd + d], kd,
						     sc[g]);
		}
	}
}

/*
 * The scores of positions t0 + lane for the G heads, scaled; -inf past
 * c1. in_order: each the CPU's dot (F16, F32 and Q8_0 keys; qq/qd hold
 * Q as Q8_0 for the last), else a plain float sum over the dimensions.
 */
template <int KT>
__device__ __forceinline__ void att_scores(const att_args &a, const float *q_s,
					   const int8_t *qq, const float *qd,
					   int32_t seq, int kvh, int32_t t0,
					   int32_t c1, bool in_order, float *sc)
{
	const cuda_kv_args &kv = a.kv;
	const int hd = kv.head_dim, G = a.group;
	const int32_t p = t0 + (int32_t)(threadIdx.x % 32);

#pragma unroll
	for (int g = 0; g < ATT_MAX_G; g++)
		sc[g] = 0.0f;
	if (p >= c1) {
#pragma unroll
		for (int g = 0; g < ATT_MAX_G; g++)
			sc[g] = -INFINITY;
		return;
	}
	const uint8_t *kr = kv_k_row(kv, seq, p) + kvh * kv_head_bytes<KT>(hd);

	/* arrays indexed by constants only: registers, not local memory */
	if ((KT == T_F16 || KT == T_F32) && in_order) {
#pragma unroll
		for (int g = 0; g < ATT_MAX_G; g++)
			if (g < G)
				sc[g] = att_dot_cpu<KT>(q_s + g * hd, kr, hd);
	} else if (KT == T_Q8_0 && in_order) {
#pragma unroll
		for (int g = 0; g < ATT_MAX_G; g++)
			if (g < G)
				sc[g] = att_dot_q8_0_cpu(
					qq + g * hd, qd + g * hd / 32, kr, hd);
	} else {
		att_dot_fast<KT>(q_s, qq, qd, kr, hd, G, sc);
	}
#pragma unroll
	for (int g = 0; g < ATT_MAX_G; g++)
		sc[g] *= a.scale;
}

#endif
