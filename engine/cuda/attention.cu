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
 *
 * The kernel's device code is attention_split.cuh; this file builds the
 * kernels a default launch takes and launches them; attention_variants.cu
 * the ones only a switch asks for, where the module has them.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "attention_split.cuh"

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

/* the kernels a default launch takes, by DPL (1, 2, 4, 8) */
static const struct {
	uint32_t k, v;
	att_kernel att[4];
} att_table[] = {
#define ATT_ENTRY(K, V) \
	{ K, \
	  V, \
	  { att_split<K, V, 1, false, false>, \
	    att_split<K, V, 2, false, false>, \
	    att_split<K, V, 4, false, false>, \
	    att_split<K, V, 8, false, false> } },
	KV_TYPES(ATT_ENTRY)
#undef ATT_ENTRY
};

/* attention_variants.cu's, where the module links it */
static const att_variant_kernels *att_variants;
static size_t att_variants_n;

void att_variants_register(const att_variant_kernels *table, size_t n)
{
	att_variants = table;
	att_variants_n = n;
}

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
 * The switched kernels of a cache type pair, or nullptr where the module
 * lacks them: not linked (make without CUDA_VARIANTS=1), or built for
 * sm_90 only (attention_variants.cu) and this device older (the
 * simulator is 9.0).
 */
static const att_variant_kernels *att_variants_of(uint32_t k, uint32_t v)
{
	if (cuda_device_major() < 9)
		return nullptr;
	for (size_t i = 0; i < att_variants_n; i++)
		if (att_variants[i].k == k && att_variants[i].v == v)
			return &att_variants[i];
	return nullptr;
}

/*
 * Without those kernels the switches that need them fall back, said once
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
			"CPU's order past %d positions need the module built "
			"with CUDA_VARIANTS=1, for sm_90: the default walk\n",
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
	const att_variant_kernels *var = att_variants_of(a.kv.type_k,
							  a.kv.type_v);
	if (!var)
		att_without_variants(a);
	if (a.xq && !k_att_quantizes(a.act, a.n_head, hdv))
		return false;
	for (const auto &e : att_table) {
		if (e.k != a.kv.type_k || e.v != a.kv.type_v)
			continue;
		if (!rows)
			return true;
		const size_t staged = att_split_stages(a, shmem);
		const att_kernel kernel = staged ? var->staged[k] :
					  att_split_folds(a) ? var->fold[k] :
							       e.att[k];

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
