// SPDX-License-Identifier: MIT
/*
 * The split-K attention kernel's device code (attention.cu describes the
 * kernel and its walks), shared by the two files that instantiate it:
 * attention.cu the kernels a default launch takes, attention_variants.cu
 * those only a switch asks for (the fold past the default
 * LLMFS_CUDA_ATT_EXACT, LLMFS_CUDA_ATT_WALK=staged or row), which the
 * module links only where make is given CUDA_VARIANTS=1 (Makefile).
 */
#pragma once
#include "../attention_order.h"
#include "attention_scores.cuh"

/*
 * The CPU's chunk of a row's positions (engine/attention_order.h): its
 * walk starts afresh every 256 positions.
 */
#define ATT_CPU_CHUNK ENGINE_ATT_CHUNK
/* a chunk is whole sweeps of att_walk_cpu */
static_assert(ATT_CPU_CHUNK % (32 * ATT_WARPS) == 0, "whole sweeps");

/*
 * How the CPU-order rows are walked (LLMFS_CUDA_ATT_WALK, to measure one
 * against another): a block a chunk (the default), warp 0 alone (warp0:
 * the walk before att_walk_cpu), a block a row (row: the chunks in
 * turn, the cost of one walk over the whole row), a block a chunk with
 * its rows staged in shared memory (staged: att_walk_staged). The same
 * bits.
 */
enum { ATT_WALK_CHUNKS, ATT_WALK_WARP0, ATT_WALK_ROW, ATT_WALK_STAGED };

/*
 * The V sum as the CPU keeps it: in F16 for an F16 cache, rounded after
 * every step (ggml_vec_mad_f16, ggml_vec_scale_f16), else in F32.
 */
template <int T> __device__ __forceinline__ float v_round(float x)
{
	return T == T_F16 ? cuda_h2f(cuda_f2h(x)) : x;
}

/*
 * The V rows of positions t0 + j, j < n (n <= 32): the 32 positions lie
 * in one block of the cache (t0 is a multiple of 32), so one table
 * lookup; 8 rows' loads in flight before their use. use(j, v) for every
 * j below n rounded up to 8, in order, v[i] the row's element lane +
 * 32 i (0 past n and past the head).
 */
template <int VT, int DPL, class U>
__device__ __forceinline__ void att_v_sum(const cuda_kv_args &kv, int32_t seq,
					  int kvh, int32_t t0, int n, U use)
{
	const int lane = threadIdx.x % 32, hdv = kv.head_dim_v;
	const uint8_t *v0 = kv_v_row(kv, seq, t0) +
			    kvh * kv_head_bytes<VT>(hdv);

	for (int j0 = 0; j0 < n; j0 += 8) {
		float vd[8][DPL];

#pragma unroll
		for (int j = 0; j < 8; j++)
#pragma unroll
			for (int i = 0; i < DPL; i++)
				vd[j][i] =
					j0 + j < n && lane + 32 * i < hdv ?
						kv_get<VT>(
							v0 + (uint64_t)(j0 +
									j) *
									kv.v_row,
							lane + 32 * i) :
						0.0f;
#pragma unroll
		for (int j = 0; j < 8; j++)
			use(j0 + j, vd[j]);
	}
}

/*
 * The arithmetic of a merge step: sums under the maximum mo and a
 * partial's under mc, both brought to their maximum mn; add(x, xc) is
 * the merged sum of x and the partial's xc.
 */
struct att_rescale {
	float mn, so, sn;

	__device__ __forceinline__ att_rescale(float mo, float mc, bool libm)
		: mn(fmaxf(mo, mc)),
		  so(libm ? cuda_libm_expf(mo - mn) : expf(mo - mn)),
		  sn(libm ? cuda_libm_expf(mc - mn) : expf(mc - mn))
	{
	}
	__device__ __forceinline__ float add(float x, float xc) const
	{
		return fmaf(x, so, __fmul_rn(xc, sn));
	}
};

/*
 * One step of the merge of partials (M, S, unnormalized sums) in order,
 * as att_merge takes them: a partial with S 0 (no positions) is left
 * out; M = -inf at first, so the first partial comes in as it is.
 * libm's bits (cuda_libm_expf) where the partials are the CPU's chunks,
 * CUDA's expf for split-K's: libm's would cost the deep rows' merge
 * double precision (1/64 of the float rate on sm_86 and sm_89) for
 * nothing there.
 */
__device__ __forceinline__ void att_merge_step(float &M, float &S, float &A,
					       float mc, float sc, float ac,
					       bool libm = false)
{
	if (sc == 0.0f)
		return;
	const att_rescale k(M, mc, libm);

	A = k.add(A, ac);
	S = k.add(S, sc);
	M = k.mn;
}

/*
 * The CPU's walk decided a lane a position (att_walk_cpu): x the lane's
 * score, m the running maximum before the warp's 32 positions (theirs
 * after). Where x raises the maximum, *ms gets the old sums' scale exp(mb
 * - x) and *p 1; elsewhere *ms 1 and *p the position's weight exp(x -
 * mb): the one exp the CPU takes there. Past the row's end, x is -inf:
 * never a raise, weight 0.
 */
__device__ __forceinline__ void att_walk_weights(float x, float &m, int lane,
						 bool fast_exp, float *ms,
						 float *p)
{
	float mx = x, mb, e;

	/* the maximum before each position: a prefix maximum, exact */
	for (int o = 1; o < 32; o *= 2) {
		const float t = __shfl_up_sync(0xffffffffu, mx, o);

		if (lane >= o)
			mx = fmaxf(mx, t);
	}
	mx = fmaxf(mx, m);
	mb = __shfl_up_sync(0xffffffffu, mx, 1);
	if (lane == 0)
		mb = m;
	e = x > mb ? mb - x : x - mb;
	e = fast_exp ? expf(e) : cuda_libm_expf(e);
	*ms = x > mb ? e : 1.0f;
	*p = x > mb ? 1.0f : e;
	m = __shfl_sync(0xffffffffu, mx, 31);
}

/*
 * att_walk_cpu's partial slot: head g's maximum m[g] by the thread of
 * its dimension 0, S (s) by thread g, with SUMS the thread's sums (acc)
 */
template <int CPT, bool SUMS>
__device__ __forceinline__ void att_part_store(float *part, uint64_t h_stride,
					       const int *g_of, const int *d_of,
					       int G, const float *m,
					       const float *acc, float s)
{
#pragma unroll
	for (int c = 0; c < CPT; c++) {
		const int g = g_of[c], d = d_of[c];

		if (g >= G)
			break;
		if (d == 0)
			part[g * h_stride] = m[g];
		if (SUMS)
			part[g * h_stride + 2 + d] = acc[c];
	}
	if ((int)threadIdx.x < G)
		part[threadIdx.x * h_stride + 1] = s;
}

/*
 * The CPU's walk over positions c0..c1 of row r, one of its chunks
 * (ggml_compute_forward_flash_attn_ext_f16_one_chunk, engine/cpu/
 * attention.c's att_step), the block's 128 threads at once, 128
 * positions a sweep:
 *
 * - each warp scores 32 of them, a lane a position, each dot product
 *   added up as the CPU's kernel adds it (att_dot_cpu, att_dot_q8_0_cpu);
 * - warp g % 4 takes head g through the sweep's 4 groups of 32: what the
 *   walk decides position after position does not depend on the V sums,
 *   so it is worked out a lane a position: the running maximum before
 *   each (a prefix maximum, exact), whether the position raises it, and
 *   the one exp the CPU takes there (into ms_s where it raises: the old
 *   sums' scale; else into p_s: the position's weight);
 * - then the sums themselves, the only part in series: the CPU's vector
 *   lanes are independent until its horizontal reduction, so each thread
 *   owns (head, dimension) pairs i = t + 128 c and steps its own sums
 *   through the positions: rescaled where the maximum rose (a no-op
 *   elsewhere, skipped), the V element times the weight fused in, both
 *   rounded to F16 for an F16 cache as ggml_vec_scale_f16 and
 *   ggml_vec_mad_f16 store them; thread g keeps head g's S.
 *
 * The result goes to the row's partial slot (M, S, sums), which
 * att_merged merges with the row's other chunks' as the CPU's att_merge
 * does. With fold, the block walks every chunk of c0..c1 in turn and
 * merges each into the slot as it comes (att_merge_step's order, libm's
 * expf): the same bits where there are fewer slots than chunks (many
 * rows). m_s: [ATT_MAX_G] the chunk's maxima, [ATT_MAX_G] the merged.
 * Before, warp 0 alone walked with the other 3 idle: on an H100 it cost
 * the 0.6B's tg128 505 -> 299 t/s (gpu.md).
 */
template <int KT, int VT, int DPL, bool FOLD>
__device__ void att_walk_cpu(const att_args &a, const float *q_s,
			     const int8_t *qq, const float *qd, float *p_s,
			     float *ms_s, float *m_s, int r, int32_t seq,
			     int kvh, int32_t c0, int32_t c1, int slot,
			     bool fold_row)
{
	const bool fold = FOLD && fold_row;
	constexpr int SWEEP = 32 * ATT_WARPS;
	/* (head, dimension) pairs a thread: ATT_MAX_G * 32 DPL / SWEEP */
	constexpr int CPT = ATT_MAX_G * 32 * DPL / SWEEP;
	/* V elements loaded ahead of their use */
	constexpr int AHEAD = CPT <= 4 ? 8 : CPT <= 8 ? 4 : 2;
	const cuda_kv_args &kv = a.kv;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int hdv = kv.head_dim_v, G = a.group;
	const uint64_t v_head = kvh * kv_head_bytes<VT>(hdv);
	const uint64_t h_stride = (uint64_t)a.n_chunks * (2 + hdv);
	/* head g's partial: + g * h_stride */
	float *part = a.part + ((uint64_t)r * a.n_head + kvh * G) * h_stride +
		      (uint64_t)slot * (2 + hdv);
	/* s: thread g's, head g's S; s_all: the merged chunks' */
	float acc[CPT], s, s_all = 0.0f, m[ATT_MAX_G / ATT_WARPS];
	int g_of[CPT], d_of[CPT];
	int32_t k1;

#pragma unroll
	for (int c = 0; c < CPT; c++) {
		const int i = threadIdx.x + SWEEP * c;

		g_of[c] = i / hdv;
		d_of[c] = i % hdv;
	}
	for (int32_t k0 = c0; k0 < c1; k0 = k1) {
	k1 = fold && c1 - k0 > ATT_CPU_CHUNK ? k0 + ATT_CPU_CHUNK : c1;
	s = 0.0f;
#pragma unroll
	for (int c = 0; c < CPT; c++)
		acc[c] = 0.0f;
#pragma unroll
	for (int k = 0; k < ATT_MAX_G / ATT_WARPS; k++)
		m[k] = -INFINITY;
	for (int32_t t0 = k0; t0 < k1; t0 += SWEEP) {
		const int n = k1 - t0 < SWEEP ? k1 - t0 : SWEEP;
		float sc[ATT_MAX_G];

		att_scores<KT>(a, q_s, qq, qd, seq, kvh, t0 + 32 * warp, k1,
			       true, sc);
#pragma unroll
		for (int g = 0; g < ATT_MAX_G; g++)
			if (g < G)
				p_s[g * SWEEP + 32 * warp + lane] = sc[g];
		__syncthreads();
#pragma unroll
		for (int k = 0; k < ATT_MAX_G / ATT_WARPS; k++) {
			const int g = warp + ATT_WARPS * k;

			if (g >= G)
				break;
			for (int w = 0; w < ATT_WARPS; w++) {
				const int i = g * SWEEP + 32 * w + lane;

				att_walk_weights(p_s[i], m[k], lane, a.fast_exp,
						 ms_s + i, p_s + i);
			}
			if (lane == 0)
				m_s[g] = m[k];
		}
		__syncthreads();
		for (int j0 = 0; j0 < n; j0 += AHEAD) {
			float v[AHEAD][CPT];

#pragma unroll
			for (int j = 0; j < AHEAD; j++) {
				const uint8_t *vr =
					j0 + j < n ?
						kv_v_row(kv, seq, t0 + j0 + j) +
							v_head :
						nullptr;

#pragma unroll
				for (int c = 0; c < CPT; c++)
					v[j][c] = vr && g_of[c] < G ?
							  kv_get<VT>(vr,
								     d_of[c]) :
							  0.0f;
			}
#pragma unroll
			for (int j = 0; j < AHEAD; j++) {
				const int h = threadIdx.x * SWEEP + j0 + j;

				if (j0 + j >= n)
					break;
				/* two roundings, as the CPU (no contraction) */
				if ((int)threadIdx.x < G)
					s = __fadd_rn(__fmul_rn(s, ms_s[h]),
						      p_s[h]);
#pragma unroll
				for (int c = 0; c < CPT; c++) {
					const int g = g_of[c];

					if (g >= G)
						break;
					const float ms =
						ms_s[g * SWEEP + j0 + j];
					const float vs =
						p_s[g * SWEEP + j0 + j];

					if (ms != 1.0f)
						acc[c] = v_round<VT>(
							__fmul_rn(acc[c], ms));
					acc[c] = v_round<VT>(
						fmaf(v[j][c], vs, acc[c]));
				}
			}
		}
		__syncthreads();
	}
	if (!fold) {
		att_part_store<CPT, true>(part, h_stride, g_of, d_of, G, m_s,
					  acc, s);
		return;
	}
	/*
	 * the chunk merged into the slot (att_merge_step); each thread
	 * reads back only the sums it wrote
	 */
	const bool first = k0 == c0;
	float mn = 0.0f;
#pragma unroll
	for (int c = 0; c < CPT; c++) {
		const int g = g_of[c], d = d_of[c];

		if (g >= G)
			break;
		const att_rescale k(first ? -INFINITY : m_s[ATT_MAX_G + g],
				    m_s[g], true);
		float *pa = part + g * h_stride + 2 + d;

		*pa = k.add(first ? 0.0f : *pa, acc[c]);
	}
	if ((int)threadIdx.x < G) {
		const att_rescale k(first ? -INFINITY :
					    m_s[ATT_MAX_G + threadIdx.x],
				    m_s[threadIdx.x], true);

		s_all = k.add(s_all, s);
		mn = k.mn;
	}
	__syncthreads();
	if ((int)threadIdx.x < G)
		m_s[ATT_MAX_G + threadIdx.x] = mn;
	}
	if (!fold)
		return;
	__syncthreads();
	att_part_store<CPT, false>(part, h_stride, g_of, d_of, G,
				   m_s + ATT_MAX_G, acc, s_all);
}

/* att_walk_staged: it calls v_round and att_part_store above */
#include "attention_walk.cuh"

/*
 * Row blockIdx.x, KV head blockIdx.y, chunk blockIdx.z. Dynamic shared
 * memory: Q [G][hd], the warps' scores or probabilities
 * [ATT_WARPS][G][32] (the walk's weights [G][128]), the warps' states
 * for the merge [ATT_WARPS][G][2 + hd_v], the walk's old sums' scales
 * [G][128] and maxima [2][G], Q as Q8_0 (scales, quants); with STAGED
 * (att_walk_staged) then, 16-aligned, the stage of a sweep's K and V
 * rows (att_stage_bytes), the warps' maxima in the merge's place.
 *
 * Two ways through it. A row whose position is below a.exact_below
 * (256 by default: the contexts the golden tests reach) is cut as the
 * CPU cuts it, into chunks of ATT_CPU_CHUNK positions, block z walking
 * chunk z in the CPU's order (att_walk_cpu; one block walks them all in
 * turn where a.chunk is longer, i.e. there are fewer partials than
 * chunks): the CPU's bits for F16, F32 and Q8_0 caches at any depth.
 * Other rows are cut into chunks of a.chunk positions that the warps
 * take 32 at a time, with one rescale per 32 and the V sum in F32.
 */
template <int KT, int VT, int DPL, bool FOLD, bool STAGED>
__device__ __forceinline__ void att_split_body(att_args a)
{
	cuda_pdl_start();
	const cuda_kv_args &kv = a.kv;
	const int r = blockIdx.x, kvh = blockIdx.y;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int hd = kv.head_dim, hdv = kv.head_dim_v, G = a.group;
	const int32_t seq = a.seq_of[r], p_max = a.pos[r];
	const bool exact = p_max < (int32_t)a.exact_below;
	CUDA_DYNAMIC_SHARED(float, q_s);
	float *p_s = q_s + G * hd;
	float *st_s = p_s + ATT_WARPS * ATT_MAX_G * 32;
	/* the walk's: [ATT_MAX_G][128] old sums' scales, [ATT_MAX_G] maxima */
	float *ms_s = st_s + ATT_WARPS * ATT_MAX_G * (2 + hdv);
	float *m_s = ms_s + ATT_WARPS * ATT_MAX_G * 32;
	float *qd = m_s + 2 * ATT_MAX_G;	   /* [G][hd/32] */
	int8_t *qq = (int8_t *)(qd + G * hd / 32); /* [G][hd] */
	float *pw = p_s + warp * ATT_MAX_G * 32;   /* this warp's */
	float m[ATT_MAX_G], s[ATT_MAX_G], acc[ATT_MAX_G][DPL];

	/* an exact row: one CPU chunk a block, or all in block 0 */
	const bool fold = FOLD && exact && p_max >= ATT_CPU_CHUNK &&
			  (a.chunk > ATT_CPU_CHUNK || a.walk == ATT_WALK_ROW);
	const int32_t c0 = !exact ? (int32_t)(blockIdx.z * a.chunk) :
			   fold	  ? 0 :
				    (int32_t)(blockIdx.z * ATT_CPU_CHUNK);
	const int32_t len = !exact ? (int32_t)a.chunk :
			    fold   ? p_max + 1 :
				     ATT_CPU_CHUNK;

	if (c0 > p_max || (fold && blockIdx.z))
		return;
	const int32_t c1 = c0 + len > p_max + 1 ? p_max + 1 : c0 + len;

	for (int i = threadIdx.x; i < G * hd; i += blockDim.x) {
		float x = a.q[r * a.q_ld + (uint64_t)kvh * G * hd + i];

		/* Q in K's vec_dot type: halves for an F16 cache */
		q_s[i] = KT == T_F16 ? cuda_h2f(cuda_f2h(x)) : x;
	}
	/* ... Q8_0 for a Q8_0 cache, rounded as the CPU rounds it */
	for (int b = warp; KT == T_Q8_0 && b < G * hd / 32; b += ATT_WARPS) {
		const float x = a.q[r * a.q_ld + (uint64_t)kvh * G * hd +
				    32 * b + lane];
		const float amax = cuda_warp_max(fabsf(x));
		const float id = amax != 0.0f ? 127.f / amax : 0.0f;

		qq[32 * b + lane] = (int8_t)__float2int_rn(x * id);
		if (lane == 0)
			qd[b] = cuda_h2f(cuda_f2h(amax / 127.f));
	}
	__syncthreads();
#pragma unroll
	for (int g = 0; g < ATT_MAX_G; g++) {
		m[g] = -INFINITY;
		s[g] = 0.0f;
#pragma unroll
		for (int i = 0; i < DPL; i++)
			acc[g][i] = 0.0f;
	}
	if (STAGED && exact) {
		uint8_t *stage = (uint8_t *)q_s +
				 ((((uint8_t *)(qq + G * hd) - (uint8_t *)q_s) +
				   15) & ~(uintptr_t)15);

		att_walk_staged<KT, VT, DPL>(a, q_s, qq, qd, p_s, ms_s, m_s,
					     st_s, stage, r, seq, kvh, c0, c1,
					     blockIdx.z);
		return;
	}
	if (exact && (a.walk != ATT_WALK_WARP0 || fold)) {
		att_walk_cpu<KT, VT, DPL, FOLD>(a, q_s, qq, qd, p_s, ms_s, m_s, r,
					  seq, kvh, c0, c1, blockIdx.z, fold);
		return;
	}
	/*
	 * The walk before att_walk_cpu, kept to be measured against it
	 * (LLMFS_CUDA_ATT_WALK=warp0, tools/gpu-check.sh's attention part):
	 * warp 0 alone, 32 positions of the chunk at a time, the other warps
	 * idle; the same bits (its state merged alone below passes through).
	 * On an H100 it cost the 0.6B's tg128 505 -> 299 t/s.
	 */
	for (int32_t t0 = c0; exact && warp == 0 && t0 < c1; t0 += 32) {
		const int n = c1 - t0 < 32 ? c1 - t0 : 32;
		float *pms = p_s + ATT_MAX_G * 32; /* warp 1's: idle here */
		float sc[ATT_MAX_G];

		att_scores<KT>(a, q_s, qq, qd, seq, kvh, t0, c1, true, sc);
#pragma unroll
		for (int g = 0; g < ATT_MAX_G; g++) {
			if (g >= G)
				break;
			att_walk_weights(sc[g], m[g], lane, a.fast_exp,
					 pms + g * 32 + lane,
					 pw + g * 32 + lane);
		}
		__syncwarp();
		att_v_sum<VT, DPL>(
			kv, seq, kvh, t0, n, [&](int j, const float *v) {
				if (j >= n)
					return;
#pragma unroll
				for (int g = 0; g < ATT_MAX_G; g++) {
					if (g >= G)
						break;
					const float ms = pms[g * 32 + j];
					/* ms is 1 where the maximum held: a
					 * no-op on a sum already rounded */
					const float vs = pw[g * 32 + j];

#pragma unroll
					for (int i = 0; i < DPL; i++)
						acc[g][i] = v_round<VT>(fmaf(
							v[i], vs,
							v_round<VT>(__fmul_rn(
								acc[g][i],
								ms))));
					/* two roundings, as the CPU (no contraction) */
					s[g] = __fadd_rn(__fmul_rn(s[g], ms),
							 vs);
				}
			});
		__syncwarp();
	}
	/* deeper rows: the warps 32 positions at a time */
	for (int32_t t0 = c0 + 32 * warp; !exact && t0 < c1;
	     t0 += 32 * ATT_WARPS) {
		const bool valid = t0 + lane < c1;
		float sc[ATT_MAX_G];

		att_scores<KT>(a, q_s, qq, qd, seq, kvh, t0, c1, false, sc);
#pragma unroll
		for (int g = 0; g < ATT_MAX_G; g++) {
			if (g >= G)
				break;
			const float mn = fmaxf(m[g], cuda_warp_max(sc[g]));
			const float pj = valid ? expf(sc[g] - mn) : 0.0f;
			const float corr = expf(m[g] - mn);

			s[g] = s[g] * corr + cuda_warp_sum(pj);
#pragma unroll
			for (int i = 0; i < DPL; i++)
				acc[g][i] *= corr;
			m[g] = mn;
			pw[g * 32 + lane] = pj;
		}
		__syncwarp();
		/* acc[g][i] += p[g][j] V[t0 + j][i]; pw is 0 past c1, the
		 * rows read as 0 too */
		att_v_sum<VT, DPL>(
			kv, seq, kvh, t0, c1 - t0 < 32 ? c1 - t0 : 32,
			[&](int j, const float *v) {
#pragma unroll
				for (int g = 0; g < ATT_MAX_G; g++) {
					if (g >= G)
						break;
					const float p = pw[g * 32 + (j & 31)];

#pragma unroll
					for (int i = 0; i < DPL; i++)
						acc[g][i] = fmaf(p, v[i],
								 acc[g][i]);
				}
			});
		__syncwarp();
	}
	/* the warps' states into shared memory, then merged per (g, d) */
#pragma unroll
	for (int g = 0; g < ATT_MAX_G; g++) {
		float *st = st_s + (warp * ATT_MAX_G + g) * (2 + hdv);

		if (g >= G)
			break;
		if (lane == 0) {
			st[0] = m[g];
			st[1] = s[g];
		}
#pragma unroll
		for (int i = 0; i < DPL; i++)
			if (lane + 32 * i < hdv)
				st[2 + lane + 32 * i] = acc[g][i];
	}
	__syncthreads();
	for (int i = threadIdx.x; i < G * hdv; i += blockDim.x) {
		const int g = i / hdv, d = i % hdv;
		float M = -INFINITY, S = 0.0f, A = 0.0f;

		/* in warp order, as att_merge takes partials in order */
		for (int w = 0; w < ATT_WARPS; w++) {
			const float *st = st_s +
					  (w * ATT_MAX_G + g) * (2 + hdv);

			att_merge_step(M, S, A, st[0], st[1], st[2 + d]);
		}
		float *part = a.part + (((uint64_t)r * a.n_head + kvh * G + g) *
						a.n_chunks +
					blockIdx.z) *
					       (2 + hdv);
		if (d == 0) {
			part[0] = M;
			part[1] = S;
		}
		part[2 + d] = A;
	}
}

template <int KT, int VT, int DPL, bool FOLD, bool STAGED>
__global__ void __launch_bounds__(32 * ATT_WARPS) att_split(att_args a)
{
	att_split_body<KT, VT, DPL, FOLD, STAGED>(a);
}

typedef void (*att_kernel)(att_args);

/*
 * The switched kernels of one cache type pair, by DPL (1, 2, 4, 8):
 * fold, with the fold (rows past LLMFS_CUDA_ATT_EXACT's default, the row
 * walk); staged, the staged walk.
 */
struct att_variant_kernels {
	uint32_t k, v;
	att_kernel fold[4], staged[4];
};

/*
 * attention_variants.cu hands its table to attention.cu when the module
 * is loaded (a static initializer), where it is linked; the table is
 * static and never freed.
 */
void att_variants_register(const att_variant_kernels *table, size_t n);
