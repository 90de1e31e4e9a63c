// SPDX-License-Identifier: MIT
/*
 * Rows into the KV cache (kv_cache.cuh: its layout).
 *
 * kv_store: rows of K and V (floats) into the cache at their sequence's
 * position, converted to the cache's types (F16, BF16, F32, or Q8_0
 * rounded as the CPU rounds it). qk_rope_store: the step between the
 * products and attention in one launch (norms, RoPE, the K and V store).
 */
#include "kv_cache.cuh"

/* ---- storing ------------------------------------------------------------ */

/* n floats into a row of type T: a warp per 32 elements for Q8_0 */
template <int T>
__device__ void kv_put(uint8_t *row, const float *x, int n, int tid, int nt)
{
	if constexpr (T == T_Q8_0) {
		const int lane = tid % 32;

		for (int b = tid / 32; b < n / 32; b += nt / 32) {
			const float v = x[32 * b + lane];
			const float amax = cuda_warp_max(fabsf(v));
			const float id = amax != 0.0f ? 127.f / amax : 0.0f;
			blk_q8_0 *blk = (blk_q8_0 *)row + b;

			blk->qs[lane] = (int8_t)__float2int_rn(v * id);
			if (lane == 0)
				blk->d = cuda_f2h(amax / 127.f);
		}
	} else {
		for (int d = tid; d < n; d += nt) {
			if (T == T_F16)
				((uint16_t *)row)[d] = cuda_f2h(x[d]);
			else if (T == T_BF16)
				((uint16_t *)row)[d] = cuda_f2bf(x[d]);
			else
				((float *)row)[d] = x[d];
		}
	}
}

/* row blockIdx.x, KV head blockIdx.y; 128 threads */
template <int KT, int VT>
__global__ void __launch_bounds__(128)
	kv_store_k(cuda_kv_args kv, const float *k, uint64_t k_ld,
		   const float *v, uint64_t v_ld, const int32_t *seq_of,
		   const int32_t *pos)
{
	cuda_pdl_start();
	const int r = blockIdx.x, h = blockIdx.y;
	const int32_t seq = seq_of[r], p = pos[r];
	uint8_t *kr = (uint8_t *)kv_k_row(kv, seq, p) +
		      h * kv_head_bytes<KT>(kv.head_dim);
	uint8_t *vr = (uint8_t *)kv_v_row(kv, seq, p) +
		      h * kv_head_bytes<VT>(kv.head_dim_v);

	kv_put<KT>(kr, k + r * k_ld + (uint64_t)h * kv.head_dim, kv.head_dim,
		   threadIdx.x, blockDim.x);
	kv_put<VT>(vr, v + r * v_ld + (uint64_t)h * kv.head_dim_v,
		   kv.head_dim_v, threadIdx.x, blockDim.x);
}

/* ---- the step between the products and attention ------------------------- */

/*
 * Row blockIdx.x, head blockIdx.y: a query head (below n_head) RMS-normed
 * (with q_norm) and roped in place; a KV head K normed (k_norm), roped
 * and stored into the cache with its V. One launch for what rms_norm,
 * rope and kv_store did in five, each step as they compute it (a thread
 * per dimension, blockDim.x = head_dim rounded up to 32): their bits.
 */
template <int KT, int VT>
__global__ void __launch_bounds__(1024) qk_rope_store_k(qk_rope_args a)
{
	cuda_pdl_start();
	__shared__ double part_d[32];
	__shared__ float h_s[1024];
	const int r = blockIdx.x, h = blockIdx.y, t = threadIdx.x;
	const int hd = a.kv.head_dim, nt = blockDim.x;
	const bool is_q = h < (int)a.n_head;
	const int kvh = h - (int)a.n_head;
	const float *nw = is_q ? a.q_norm : a.k_norm;
	float *xr = is_q ? a.q + r * a.q_ld + (uint64_t)h * hd :
			   a.k + r * a.k_ld + (uint64_t)kvh * hd;
	const float x = t < hd ? xr[t] : 0.0f;

	if (nw) {
		const float scale = cuda_rms_scale(
			t < hd ? (double)__fmul_rn(x, x) : 0.0, hd, a.eps,
			part_d);

		if (t < hd)
			h_s[t] = (x * scale) * nw[t];
	} else if (t < hd) {
		h_s[t] = x;
	}
	__syncthreads();
	if (2 * t < (int)a.n_rot)
		cuda_rope_pair(h_s, t, a.n_rot, a.neox, a.pos[r], a.theta_scale,
			       a.freq_scale, a.freq_factors);
	__syncthreads();
	if (is_q) {
		if (t < hd)
			xr[t] = h_s[t];
		return;
	}
	const int32_t seq = a.seq_of[r], p = a.pos[r];
	uint8_t *kr = (uint8_t *)kv_k_row(a.kv, seq, p) +
		      kvh * kv_head_bytes<KT>(hd);
	uint8_t *vr = (uint8_t *)kv_v_row(a.kv, seq, p) +
		      kvh * kv_head_bytes<VT>(a.kv.head_dim_v);

	kv_put<KT>(kr, h_s, hd, t, nt);
	kv_put<VT>(vr, a.v + r * a.v_ld + (uint64_t)kvh * a.kv.head_dim_v,
		   a.kv.head_dim_v, t, nt);
}

/* ---- dispatch ------------------------------------------------------------ */

typedef void (*kv_store_kernel)(cuda_kv_args, const float *, uint64_t,
				const float *, uint64_t, const int32_t *,
				const int32_t *);
typedef void (*qkr_kernel)(qk_rope_args);

static const struct {
	uint32_t k, v;
	kv_store_kernel store;
	qkr_kernel qk_rope_store;
} store_table[] = {
#define STORE_ENTRY(K, V) { K, V, kv_store_k<K, V>, qk_rope_store_k<K, V> },
	KV_TYPES(STORE_ENTRY)
#undef STORE_ENTRY
};

bool k_kv_store(const cuda_kv_args &kv, const float *k, uint64_t k_ld,
		const float *v, uint64_t v_ld, const int32_t *seq_of,
		const int32_t *pos, uint32_t rows, cudaStream_t s)
{
	for (const auto &e : store_table) {
		if (e.k != kv.type_k || e.v != kv.type_v)
			continue;
		if (rows)
			cuda_launch_pdl(e.store, dim3(rows, kv.n_head_kv),
					dim3(128), 0, s, kv, k, k_ld, v, v_ld,
					seq_of, pos);
		return true;
	}
	return false;
}

bool k_qk_rope_store(const qk_rope_args &a, uint32_t rows, cudaStream_t s)
{
	const uint32_t hd = a.kv.head_dim;

	if (hd > 1024 || a.n_rot > hd)
		return false;
	for (const auto &e : store_table) {
		if (e.k != a.kv.type_k || e.v != a.kv.type_v)
			continue;
		if (rows)
			cuda_launch_pdl(e.qk_rope_store,
					dim3(rows, a.n_head + a.kv.n_head_kv),
					dim3(cuda_div_up(hd, 32) * 32), 0, s,
					a);
		return true;
	}
	return false;
}
