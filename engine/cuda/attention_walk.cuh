// SPDX-License-Identifier: MIT
/*
 * The CPU-order walk with its rows staged in shared memory
 * (LLMFS_CUDA_ATT_WALK=staged, opt-in until a card times it against
 * att_walk_cpu): the same positions, the same arithmetic in the same
 * order per (head, dimension), so the same bits; what changes is where
 * the time goes. att_walk_cpu reads each K element with a 2-byte load,
 * a lane a position, so a warp's load touches 32 rows (32 cache lines)
 * and the K row is read again for each of the G heads; it walks the
 * sweep's 4 groups of 32 positions one after the other for the running
 * maximum (each behind 6 shuffles and a libm exp in double); and its V
 * steps wait on global loads 4 or 8 positions at a time. Here a sweep
 * starts by copying its K and V rows into shared memory (16 bytes a
 * copy, all of them in flight at once: one round trip), the dots read
 * the K rows 16 bytes at a time, the running maximum before each
 * position is worked out for the 4 groups at once (each warp its own
 * prefix maximum, then the warps' maxima from shared memory: a maximum
 * is exact in any order), the exps of all heads at once, and the V
 * steps read shared memory. Included by attention.cu.
 */
#ifndef LLMFS_ENGINE_CUDA_ATTENTION_WALK_CUH
#define LLMFS_ENGINE_CUDA_ATTENTION_WALK_CUH

#include "attention_scores.cuh"
#include "cp_async.cuh"

/* positions a sweep: a lane a position */
#define ATT_STAGE_ROWS (32 * ATT_WARPS)
static_assert(ATT_MAX_G % 4 == 0, "the walk's weights: heads 4 at a time");
/*
 * The most dynamic shared memory the staged kernel may ask for: the
 * smallest opt-in limit of the cards built for (sm_86 and sm_89: 99 KB).
 * The 8B's F16 cache at head size 128 needs 93 KB; a larger shape
 * walks as att_walk_cpu does.
 */
#define ATT_STAGE_MAX_SHARED (99u << 10)

/* bytes of a KV head's part of a row of type t (kv_head_bytes) */
__host__ __device__ __forceinline__ uint32_t att_head_bytes(uint32_t t,
							    uint32_t hd)
{
	return t == T_F32 ? 4 * hd : t == T_Q8_0 ? hd / 32 * 34 : 2 * hd;
}

/*
 * A staged K row's stride: whole 16-byte pieces, an odd number of them,
 * so that the 8 lanes of a 16-byte shared load's phase read 8 rows in
 * different banks (272 bytes for 128 F16 dimensions)
 */
__host__ __device__ __forceinline__ uint32_t att_stage_k_stride(uint32_t b)
{
	const uint32_t r = (b + 15) & ~15u;

	return r / 16 % 2 ? r : r + 16;
}

/* a staged V row's: a thread reads its own dimension, no conflicts */
__host__ __device__ __forceinline__ uint32_t att_stage_v_stride(uint32_t b)
{
	return (b + 15) & ~15u;
}

/* the stage's bytes: K rows, then V rows, of a sweep's positions */
__host__ __device__ __forceinline__ uint32_t att_stage_bytes(uint32_t tk,
							     uint32_t tv,
							     uint32_t hd,
							     uint32_t hdv)
{
	return ATT_STAGE_ROWS * (att_stage_k_stride(att_head_bytes(tk, hd)) +
				 att_stage_v_stride(att_head_bytes(tv, hdv)));
}

/*
 * Head kvh's bytes (hb) of the K (IS_K) or V rows of positions t0 ..
 * t0 + n - 1 into dst at stride ds: 16 bytes a copy, all of the block's
 * copies in flight together (cp.async, one group); a piece whose source
 * is not 16-aligned (Q8_0 heads of 136 bytes) is copied 2 bytes at a
 * time. Bytes past hb in a row's last piece are zeros, never read.
 */
template <bool IS_K>
__device__ __forceinline__ void att_stage(const cuda_kv_args &kv, int32_t seq,
					  int32_t t0, int n, uint64_t head_off,
					  int hb, uint8_t *dst, int ds)
{
	const int per = (hb + 15) / 16;

	for (int i = threadIdx.x; i < n * per; i += blockDim.x) {
		const int j = i / per, o = 16 * (i % per);
		const int b = hb - o < 16 ? hb - o : 16;
		const uint8_t *src = (IS_K ? kv_k_row(kv, seq, t0 + j) :
					     kv_v_row(kv, seq, t0 + j)) +
				     head_off + o;
		uint8_t *d = dst + (uint64_t)j * ds + o;

		if (((uintptr_t)src & 15) == 0) {
			cuda_cp_async16(d, src, b);
			continue;
		}
		for (int e = 0; e < 16; e += 2)
			*(uint16_t *)(d + e) =
				e < b ? *(const uint16_t *)(src + e) : 0;
	}
}

/*
 * att_dot_cpu on a staged K row (kr, 16-aligned in shared memory): the
 * same 64 lanes, each adding its products in the same order, read 16
 * bytes at a time; rows whose size is not whole steps of 64 take
 * att_dot_cpu itself (its tails).
 */
template <int KT>
__device__ __forceinline__ float att_dot_cpu_staged(const float *q,
						    const uint8_t *kr, int n)
{
	constexpr int PER = KT == T_F32 ? 4 : 8; /* elements in 16 bytes */
	float acc[64];

	if (n % 64)
		return att_dot_cpu<KT>(q, kr, n);
#pragma unroll
	for (int l = 0; l < 64; l++)
		acc[l] = 0.0f;
	for (int b = 0; b < n; b += 64) {
#pragma unroll
		for (int u = 0; u < 64 / PER; u++) {
			const uint8_t *k16 =
				kr + (b + u * PER) * (KT == T_F32 ? 4 : 2);
			float kf[8];

			att_k16_floats<KT>(*(const uint4 *)k16, kf);
#pragma unroll
			for (int e = 0; e < PER; e++)
				acc[u * PER + e] =
					fmaf(kf[e], q[b + u * PER + e],
					     acc[u * PER + e]);
		}
	}
	return att_dot_fold64(acc);
}

/*
 * The score of head g's position 32 * warp + lane of the sweep, from
 * the staged row kr, as att_scores adds it up in order
 */
template <int KT>
__device__ __forceinline__ float att_score_staged(const att_args &a,
						  const float *q_s,
						  const int8_t *qq,
						  const float *qd,
						  const uint8_t *kr, int g)
{
	const int hd = a.kv.head_dim;
	float x;

	if constexpr (KT == T_Q8_0) {
		x = att_dot_q8_0_cpu(qq + g * hd, qd + g * hd / 32, kr, hd);
	} else if constexpr (KT == T_BF16) {
		/* no CPU order: att_scores' sum for head g alone */
		x = 0.0f;
		att_dot_fast<KT>(q_s + g * hd, qq, qd, kr, hd, 1, &x);
	} else {
		x = att_dot_cpu_staged<KT>(q_s + g * hd, kr, hd);
	}
	return x * a.scale;
}

/*
 * att_walk_cpu's walk (its comment says what the CPU does and why each
 * step is what it is) over positions c0..c1 of row r, a sweep of 128
 * positions at a time, its rows staged (stage: ATT_STAGE_ROWS K rows,
 * then as many V rows); wm_s: [ATT_MAX_G][ATT_WARPS] the warps' maxima.
 * Writes the chunk's partial (M, S, sums) to slot, as att_walk_cpu.
 */
template <int KT, int VT, int DPL>
__device__ void att_walk_staged(const att_args &a, const float *q_s,
				const int8_t *qq, const float *qd, float *p_s,
				float *ms_s, float *m_s, float *wm_s,
				uint8_t *stage, int r, int32_t seq, int kvh,
				int32_t c0, int32_t c1, int slot)
{
	constexpr int SWEEP = ATT_STAGE_ROWS;
	constexpr int CPT = ATT_MAX_G * 32 * DPL / SWEEP;
	const cuda_kv_args &kv = a.kv;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int hd = kv.head_dim, hdv = kv.head_dim_v, G = a.group;
	const int kb = (int)att_head_bytes(KT, hd);
	const int vb = (int)att_head_bytes(VT, hdv);
	const int ks = (int)att_stage_k_stride(kb);
	const int vs = (int)att_stage_v_stride(vb);
	const uint8_t *k_st = stage, *v_st = stage + SWEEP * ks;
	const uint64_t h_stride = (uint64_t)a.n_chunks * (2 + hdv);
	float *part = a.part + ((uint64_t)r * a.n_head + kvh * G) * h_stride +
		      (uint64_t)slot * (2 + hdv);
	/* one dimension for all of a thread's heads where hdv divides 128 */
	const bool same_d = SWEEP % hdv == 0;
	float acc[CPT], s = 0.0f;
	int g_of[CPT], d_of[CPT];

#pragma unroll
	for (int c = 0; c < CPT; c++) {
		const int i = threadIdx.x + SWEEP * c;

		g_of[c] = i / hdv;
		d_of[c] = i % hdv;
		acc[c] = 0.0f;
	}
	/* m_s[g]: head g's maximum so far (the stage's barrier orders it) */
	if ((int)threadIdx.x < G)
		m_s[threadIdx.x] = -INFINITY;
	for (int32_t t0 = c0; t0 < c1; t0 += SWEEP) {
		const int n = c1 - t0 < SWEEP ? c1 - t0 : SWEEP;
		const int at = 32 * warp + lane; /* the lane's position */

		att_stage<true>(kv, seq, t0, n, (uint64_t)kvh * kb, kb,
				(uint8_t *)k_st, ks);
		att_stage<false>(kv, seq, t0, n, (uint64_t)kvh * vb, vb,
				 (uint8_t *)v_st, vs);
		cuda_cp_async_commit();
		cuda_cp_async_wait<0>();
		__syncthreads();
		/*
		 * scores into p_s, the warp's prefix maxima into ms_s: loops
		 * over the heads, not unrolled, so that a launch fetches one
		 * dot's code, not ATT_MAX_G
		 */
#pragma unroll 1
		for (int g = 0; g < G; g++) {
			const int i = g * SWEEP + at;
			const float x =
				at < n ? att_score_staged<KT>(a, q_s, qq, qd,
							      k_st + at * ks, g) :
					 -INFINITY;
			float px = x;

			for (int o = 1; o < 32; o *= 2) {
				const float t = __shfl_up_sync(0xffffffffu, px, o);

				if (lane >= o)
					px = fmaxf(px, t);
			}
			p_s[i] = x;
			ms_s[i] = px;
			if (lane == 31)
				wm_s[g * ATT_WARPS + warp] = px;
		}
		__syncthreads();
		/*
		 * the maximum before each position: the sweep's before it,
		 * the warps' before this one, the lanes' before this one (a
		 * maximum is exact in any order); then the one exp the CPU
		 * takes there, as att_walk_weights
		 */
#pragma unroll 1
		for (int g0 = 0; g0 < G; g0 += 4) {
			/*
			 * 4 heads at once, their exps in flight together; past
			 * G they fill spare slots (ATT_MAX_G of each), unread
			 */
#pragma unroll
			for (int k = 0; k < 4; k++) {
				const int g = g0 + k, i = g * SWEEP + at;
				const float x = p_s[i];
				float mw = m_s[g], mb, e;

				for (int w = 0; w < warp; w++)
					mw = fmaxf(mw, wm_s[g * ATT_WARPS + w]);
				mb = __shfl_up_sync(0xffffffffu,
						    fmaxf(ms_s[i], mw), 1);
				if (lane == 0)
					mb = mw;
				e = x > mb ? mb - x : x - mb;
				e = a.fast_exp ? expf(e) : cuda_libm_expf(e);
				ms_s[i] = x > mb ? e : 1.0f;
				p_s[i] = x > mb ? 1.0f : e;
			}
		}
		__syncthreads();
		/* the sweep's maxima (read above by all: written after) */
		if ((int)threadIdx.x < G)
			for (int w = 0; w < ATT_WARPS; w++)
				m_s[threadIdx.x] =
					fmaxf(m_s[threadIdx.x],
					      wm_s[threadIdx.x * ATT_WARPS + w]);
		/*
		 * the sums, position after position (att_walk_cpu's), 4 at a
		 * time: their weights read 16 bytes at once, and the rescale
		 * tested once where the maximum rose at none of the 4
		 */
		for (int j0 = 0; j0 < n; j0 += 4) {
			const int nj = n - j0 < 4 ? n - j0 : 4;
			float v0[4];

#pragma unroll
			for (int j = 0; j < 4; j++)
				v0[j] = kv_get<VT>(v_st + (j0 + j) * vs, d_of[0]);
			/* two roundings, as the CPU (no contraction) */
			if ((int)threadIdx.x < G) {
				const float4 m4 = *(const float4 *)(ms_s +
								    threadIdx.x *
									    SWEEP +
								    j0);
				const float4 p4 = *(const float4 *)(p_s +
								    threadIdx.x *
									    SWEEP +
								    j0);
				const float ms[4] = { m4.x, m4.y, m4.z, m4.w };
				const float w[4] = { p4.x, p4.y, p4.z, p4.w };

#pragma unroll
				for (int j = 0; j < 4; j++)
					if (j < nj)
						s = __fadd_rn(__fmul_rn(s, ms[j]),
							      w[j]);
			}
#pragma unroll
			for (int c = 0; c < CPT; c++) {
				const int g = g_of[c];

				if (g >= G)
					break;
				const float4 m4 =
					*(const float4 *)(ms_s + g * SWEEP + j0);
				const float4 p4 =
					*(const float4 *)(p_s + g * SWEEP + j0);
				const float ms[4] = { m4.x, m4.y, m4.z, m4.w };
				const float w[4] = { p4.x, p4.y, p4.z, p4.w };
				float v[4];

#pragma unroll
				for (int j = 0; j < 4; j++)
					v[j] = same_d || c == 0 ?
						       v0[j] :
						       kv_get<VT>(v_st + (j0 + j) * vs,
								  d_of[c]);
				if (ms[0] == 1.0f && ms[1] == 1.0f &&
				    ms[2] == 1.0f && ms[3] == 1.0f) {
#pragma unroll
					for (int j = 0; j < 4; j++)
						if (j < nj)
							acc[c] = v_round<VT>(fmaf(
								v[j], w[j], acc[c]));
					continue;
				}
#pragma unroll
				for (int j = 0; j < 4; j++) {
					if (j >= nj)
						break;
					if (ms[j] != 1.0f)
						acc[c] = v_round<VT>(
							__fmul_rn(acc[c], ms[j]));
					acc[c] = v_round<VT>(
						fmaf(v[j], w[j], acc[c]));
				}
			}
		}
		/* the stage, the weights and wm_s are the next sweep's */
		__syncthreads();
	}
	att_part_store<CPT, true>(part, h_stride, g_of, d_of, G, m_s, acc, s);
}

#endif
