// SPDX-License-Identifier: MIT
/*
 * Attention over the KV cache in VRAM (kv_cache.cuh: its layout).
 *
 * Split-K ("flash decoding"). A block takes one query row,
 * one KV head (the G query heads that share it) and one chunk of
 * positions; a warp scores 32 positions at once, a lane a position, Q
 * in shared memory, an online softmax per head (attention_scores.cuh);
 * the lanes then own
 * dimensions and add up V rows. The chunk's (max, sum, unnormalized
 * output) per head go to a buffer that att_reduce merges, as ggml's
 * flash_attn_ext_reduce_partials does. Every row attends to its own
 * sequence's positions 0..pos (causal), so one kernel serves decode
 * (a row per sequence, many chunks at depth) and prefill (many rows).
 * Grids depend on the context, not the positions, so a decode step's
 * graph replays at every depth: chunks past a row's position return.
 *
 * Numbers: Q rounded to F16 for an F16 cache (the CPU's vec_dot type),
 * to Q8_0 for a Q8_0 cache. Rows below LLMFS_CUDA_ATT_EXACT positions
 * (256 by default) take the CPU's order: its bits. The CPU walks a row
 * in fixed chunks of ATT_CPU_CHUNK positions and merges their partials
 * in order (engine/cpu/attention.h), so a block walks one chunk in its
 * order (att_walk_cpu) and att_reduce merges them as the CPU does. The
 * other rows sum scores and V in F32 in no CPU order, within the golden
 * tolerances.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

/*
 * The kernels of the walks a switch asks for (the fold past the default
 * LLMFS_CUDA_ATT_EXACT, LLMFS_CUDA_ATT_WALK=staged) carry code for the
 * card they are measured on only, sm_90 (and the simulator): they are two
 * thirds of attention.cu's kernels and of nvcc's time on it, which is
 * make check's longest build; on an older card they are empty and
 * k_attention never launches them (att_variants_built).
 */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900 || defined(LLMFS_CUDA_SIM)
#define ATT_VARIANTS_HERE 1
#else
#define ATT_VARIANTS_HERE 0
#endif

template <int KT, int VT, int DPL, bool FOLD, bool STAGED>
__global__ void __launch_bounds__(32 * ATT_WARPS) att_split(att_args a)
{
	if constexpr (ATT_VARIANTS_HERE || (!FOLD && !STAGED))
		att_split_body<KT, VT, DPL, FOLD, STAGED>(a);
}

/*
 * Row blockIdx.x, head blockIdx.y: the chunks merged in order and
 * normalized as att_merge and att_end do (a product by 1 / S). A chunk
 * merged alone comes out as it went in: expf(0) is 1.
 */
/* element d of head h of row r: its chunks merged and normalized */
__device__ __forceinline__ float att_merged(const att_args &a, int r, int h,
					    int d)
{
	const int hdv = a.kv.head_dim_v;
	const int32_t p = a.pos[r];
	const bool exact = p < (int32_t)a.exact_below;
	/* chunks used: an exact row's CPU chunks, or one folded */
	const int n = !exact ? (int)((p + a.chunk) / a.chunk) :
		      a.chunk > ATT_CPU_CHUNK || a.walk == ATT_WALK_ROW ?
			       1 :
			       (p + ATT_CPU_CHUNK) / ATT_CPU_CHUNK;
	const float *part = a.part + ((uint64_t)r * a.n_head + h) * a.n_chunks *
					     (2 + hdv);
	float M = -INFINITY, S = 0.0f, A = 0.0f;

	for (int c = 0; c < n; c++) {
		const float *pc = part + c * (2 + hdv);

		att_merge_step(M, S, A, pc[0], pc[1], pc[2 + d],
			       exact && !a.fast_exp);
	}
	return S != 0.0f ? __fmul_rn(A, 1.0f / S) : 0.0f;
}

__global__ void att_reduce(att_args a)
{
	cuda_pdl_start();
	const int r = blockIdx.x, h = blockIdx.y;
	const int hdv = a.kv.head_dim_v;

	for (int d = threadIdx.x; d < hdv; d += blockDim.x)
		a.out[r * a.out_ld + (uint64_t)h * hdv + d] = att_merged(a, r,
									 h, d);
}

/*
 * The same merge, 256 elements of a row a block (blockIdx.x of row
 * blockIdx.y), then those quantized as the product after attention
 * reads them (a.act: Q8_K, one block; Q8_1, a warp a block) into a.xq:
 * the merge and the quantize kernel in one launch.
 */
template <int ACT>
__global__ void __launch_bounds__(QK_K) att_reduce_quant(att_args a)
{
	cuda_pdl_start();
	__shared__ float vals[QK_K];
	const int hdv = a.kv.head_dim_v, t = threadIdx.x;
	const int r = blockIdx.y;
	const uint64_t i = (uint64_t)blockIdx.x * QK_K + t;
	const float v = att_merged(a, r, (int)(i / hdv), (int)(i % hdv));
	uint8_t *q = a.xq + r * a.xq_ld;

	a.out[r * a.out_ld + i] = v;
	if (ACT == T_Q8_K)
		q8_K_block(v, t, (blk_q8_K *)q + blockIdx.x, vals);
	else
		q8_1_block(v, t % 32, (blk_q8_1 *)q + i / 32);
}

/* ---- dispatch ------------------------------------------------------------ */

typedef void (*att_kernel)(att_args);

static const struct {
	uint32_t k, v;
	/*
	 * DPL 1, 2, 4, 8; [1]: with the fold (att_split_folds), [2]: the
	 * staged walk (att_split_stages)
	 */
	att_kernel att[3][4];
} att_table[] = {
#define ATT_ENTRY(K, V) \
	{ K, \
	  V, \
	  { { att_split<K, V, 1, false, false>, \
	      att_split<K, V, 2, false, false>, \
	      att_split<K, V, 4, false, false>, \
	      att_split<K, V, 8, false, false> }, \
	    { att_split<K, V, 1, true, false>, \
	      att_split<K, V, 2, true, false>, \
	      att_split<K, V, 4, true, false>, \
	      att_split<K, V, 8, true, false> }, \
	    { att_split<K, V, 1, false, true>, \
	      att_split<K, V, 2, false, true>, \
	      att_split<K, V, 4, false, true>, \
	      att_split<K, V, 8, false, true> } } },
	KV_TYPES(ATT_ENTRY)
#undef ATT_ENTRY
};

bool k_kv_types_ok(uint32_t type_k, uint32_t type_v, uint32_t head_dim,
		   uint32_t head_dim_v)
{
	if ((type_k == T_Q8_0 && head_dim % 32) ||
	    (type_v == T_Q8_0 && head_dim_v % 32) || head_dim_v > 256 ||
	    head_dim > 1024)
		return false;
	for (const auto &e : att_table)
		if (e.k == type_k && e.v == type_v)
			return true;
	return false;
}

bool k_att_quantizes(uint32_t act, uint32_t n_head, uint32_t head_dim_v)
{
	return (act == T_Q8_K || act == T_Q8_1) &&
	       ((uint64_t)n_head * head_dim_v) % QK_K == 0;
}

/*
 * Read at every enqueue (a graph keeps what it was captured with), so
 * that a test can switch it: 256 by default, the CPU's order where the
 * CPU's attention is one chunk (the walk the order cost before); a
 * larger number takes it deeper, a CPU chunk a block (its cost against
 * split-K is unmeasured); 0 the split path at every depth.
 */
uint32_t k_att_exact_below(void)
{
	const char *e = getenv("LLMFS_CUDA_ATT_EXACT");

	return e ? (uint32_t)atoi(e) : 256;
}

uint32_t k_att_fast_exp(void)
{
	static int fast = -1;

	if (fast < 0) {
		const char *e = getenv("LLMFS_CUDA_ATT_FAST_EXP");

		fast = e && atoi(e) ? 1 : 0;
	}
	return (uint32_t)fast;
}

/*
 * A chunk is what the block's warps take in one sweep (32 positions
 * each), so that a decode row at depth d keeps d / 128 blocks per KV head
 * busy; many rows (prefill) take longer chunks to bound the partials.
 */
uint32_t k_att_chunk(uint32_t n_ctx, uint32_t rows)
{
	uint32_t chunk = 32 * ATT_WARPS;

	while ((uint64_t)rows * cuda_div_up(n_ctx, chunk) > 2048 &&
	       chunk < n_ctx)
		chunk *= 2;
	return chunk;
}

uint64_t k_att_part_floats(const att_args &a, uint32_t rows)
{
	return (uint64_t)rows * a.n_head * a.n_chunks * (2 + a.kv.head_dim_v);
}

size_t k_att_shared_bytes(uint32_t group, uint32_t head_dim,
			  uint32_t head_dim_v)
{
	return sizeof(float) *
		       ((size_t)group * head_dim +
			2 * ATT_WARPS * ATT_MAX_G * 32 +
			(size_t)ATT_WARPS * ATT_MAX_G * (2 + head_dim_v) +
			2 * ATT_MAX_G + (size_t)group * head_dim / 32) +
	       (size_t)group * head_dim;
}

/* LLMFS_CUDA_ATT_WALK, read at every enqueue as LLMFS_CUDA_ATT_EXACT */
static uint32_t k_att_walk(void)
{
	const char *e = getenv("LLMFS_CUDA_ATT_WALK");

	return !e		     ? ATT_WALK_CHUNKS :
	       !strcmp(e, "warp0")  ? ATT_WALK_WARP0 :
	       !strcmp(e, "row")    ? ATT_WALK_ROW :
	       !strcmp(e, "staged") ? ATT_WALK_STAGED :
				      ATT_WALK_CHUNKS;
}

/*
 * Whether a launch may have a row that one block walks chunk by chunk
 * (att_split's fold): only past the default LLMFS_CUDA_ATT_EXACT, so the
 * kernel a default launch takes is built without the fold's registers
 * (with both in one kernel, 13 of its 24 instantiations spilled, up to
 * 384 bytes).
 */
static bool att_split_folds(const att_args &a)
{
	return a.exact_below > ATT_CPU_CHUNK &&
	       (a.chunk > ATT_CPU_CHUNK || a.walk == ATT_WALK_ROW);
}

/*
 * The staged walk's dynamic shared memory where LLMFS_CUDA_ATT_WALK=staged
 * asks for it and the stage fits under ATT_STAGE_MAX_SHARED, else 0 (the
 * walk of att_walk_cpu). Never with the fold: that kernel walks as before.
 */
static size_t att_split_stages(const att_args &a, size_t shmem)
{
	const size_t staged = ((shmem + 15) & ~(size_t)15) +
			      att_stage_bytes(a.kv.type_k, a.kv.type_v,
					      a.kv.head_dim, a.kv.head_dim_v);

	/* p_s and ms_s 16-aligned: read 4 weights at once */
	return a.walk == ATT_WALK_STAGED && !att_split_folds(a) &&
			       a.group * a.kv.head_dim % 4 == 0 &&
			       staged <= ATT_STAGE_MAX_SHARED ?
		       staged :
		       0;
}

/*
 * Whether this device's code holds the fold's and the staged walk's
 * kernels (ATT_VARIANTS_HERE): sm_90 and later, and the simulator (9.0).
 */
static bool att_variants_built(void)
{
	int dev = 0, major = 0;

	return cudaGetDevice(&dev) == cudaSuccess &&
	       cudaDeviceGetAttribute(&major,
				      cudaDevAttrComputeCapabilityMajor,
				      dev) == cudaSuccess &&
	       major >= 9;
}

/*
 * Before sm_90 the switches that need those kernels fall back, said once
 * on stderr: the staged walk to att_walk_cpu (the same bits), the row
 * walk to the chunks, and rows past 256 positions that only the fold
 * would keep in the CPU's order to split-K.
 */
static void att_without_variants(att_args &a)
{
	static bool said;

	if (a.walk != ATT_WALK_STAGED && !att_split_folds(a))
		return;
	if (!said)
		fprintf(stderr,
			"llmfs-cuda: LLMFS_CUDA_ATT_WALK=staged/row and the "
			"CPU's order past %d positions are built for sm_90 "
			"only: the default walk on this device\n",
			ATT_CPU_CHUNK);
	said = true;
	if (a.walk == ATT_WALK_STAGED || a.walk == ATT_WALK_ROW)
		a.walk = ATT_WALK_CHUNKS;
	if (att_split_folds(a))
		a.exact_below = ATT_CPU_CHUNK;
}

bool k_attention(const att_args &args, uint32_t rows, cudaStream_t s)
{
	att_args a = args;
	const uint32_t hdv = a.kv.head_dim_v;
	const int k = hdv <= 32 ? 0 : hdv <= 64 ? 1 : hdv <= 128 ? 2 : 3;
	size_t shmem = k_att_shared_bytes(a.group, a.kv.head_dim, hdv);

	if (a.group < 1 || a.group > ATT_MAX_G)
		return false;
	a.walk = k_att_walk();
	if (!att_variants_built())
		att_without_variants(a);
	if (a.xq && !k_att_quantizes(a.act, a.n_head, hdv))
		return false;
	for (const auto &e : att_table) {
		if (e.k != a.kv.type_k || e.v != a.kv.type_v)
			continue;
		if (!rows)
			return true;
		const size_t staged = att_split_stages(a, shmem);
		const att_kernel kernel =
			e.att[staged ? 2 : att_split_folds(a)][k];

		if (staged)
			shmem = staged;
		if (shmem > (48u << 10))
			cudaFuncSetAttribute(
				kernel,
				cudaFuncAttributeMaxDynamicSharedMemorySize,
				(int)shmem);
		cuda_launch_pdl(kernel,
				dim3(rows, a.kv.n_head_kv, a.n_chunks),
				dim3(32 * ATT_WARPS), shmem, s, a);
		if (a.xq && a.act == T_Q8_K)
			cuda_launch_pdl(att_reduce_quant<T_Q8_K>,
					dim3(a.n_head * hdv / QK_K, rows),
					dim3(QK_K), 0, s, a);
		else if (a.xq)
			cuda_launch_pdl(att_reduce_quant<T_Q8_1>,
					dim3(a.n_head * hdv / QK_K, rows),
					dim3(QK_K), 0, s, a);
		else
			cuda_launch_pdl(
				att_reduce, dim3(rows, a.n_head),
				dim3(hdv < 32 ? 32 : cuda_div_up(hdv, 32) * 32),
				0, s, a);
		return true;
	}
	return false;
}
