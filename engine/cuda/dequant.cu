// SPDX-License-Identifier: MIT
/*
 * Weights back to numbers: embedding rows as floats (ggml_get_rows) and
 * whole matrices as halves for cuBLAS (the prefill product's
 * CUDA_MATMUL_CUBLAS path), a thread per 16 elements (blocks.cuh's
 * dequant), as ggml's dequantize_row_* gives them.
 */
#include "blocks.cuh"
#include "kernels.h"

/* row blockIdx.y: thread per group of 16 */
template <int T>
__global__ void get_rows_q(const uint8_t *w, uint64_t row_bytes, int64_t n,
			   const int32_t *ids, float *y, uint64_t y_ld)
{
	typedef wq<T> W;
	const int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	const int gpb = W::QK / 16; /* groups a block */

	if (g * 16 >= n)
		return;
	const typename W::block *b =
		(const typename W::block *)(w + (uint64_t)ids[blockIdx.y] *
							row_bytes) +
		g / gpb;
	float v[16];

	W::dequant(b, (int)(g % gpb), v);
	for (int j = 0; j < 16; j++)
		y[blockIdx.y * y_ld + g * 16 + j] = v[j];
}

template <int T>
__global__ void get_rows_f(const uint8_t *w, uint64_t row_bytes, int64_t n,
			   const int32_t *ids, float *y, uint64_t y_ld)
{
	typedef wf<T> F;
	const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	y[blockIdx.y * y_ld + i] = F::get(
		(const typename F::elem *)(w + (uint64_t)ids[blockIdx.y] *
						       row_bytes),
		i);
}

/* x as a half (F16), or a bfloat16 */
__device__ __forceinline__ uint16_t to_half(float x, bool bf16)
{
	return bf16 ? cuda_f2bf(x) : cuda_f2h(x);
}

/* matrix row blockIdx.y, as halves */
template <int T>
__global__ void dequant_q(const uint8_t *w, uint64_t row_bytes, int64_t n,
			  bool bf16, uint16_t *y)
{
	typedef wq<T> W;
	const int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	const int gpb = W::QK / 16;

	if (g * 16 >= n)
		return;
	const typename W::block *b =
		(const typename W::block *)(w + blockIdx.y * row_bytes) +
		g / gpb;
	float v[16];

	W::dequant(b, (int)(g % gpb), v);
	for (int j = 0; j < 16; j++)
		y[blockIdx.y * (uint64_t)n + g * 16 + j] = to_half(v[j], bf16);
}

template <int T>
__global__ void dequant_f(const uint8_t *w, uint64_t row_bytes, int64_t n,
			  bool bf16, uint16_t *y)
{
	typedef wf<T> F;
	const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[blockIdx.y * (uint64_t)n + i] = to_half(
			F::get((const typename F::elem *)(w +
							  blockIdx.y *
								  row_bytes),
			       i),
			bf16);
}

__global__ void f32_to_half_k(const float *x, uint64_t x_ld, bool bf16,
			      uint16_t *y, int64_t n)
{
	const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[blockIdx.y * (uint64_t)n + i] = to_half(
			x[blockIdx.y * x_ld + i], bf16);
}

typedef void (*dq_kernel)(const uint8_t *, uint64_t, int64_t, const int32_t *,
			  float *, uint64_t);
typedef void (*dh_kernel)(const uint8_t *, uint64_t, int64_t, bool, uint16_t *);

static const struct {
	uint32_t type;
	bool quantized;
	dq_kernel rows;
	dh_kernel half;
} dq_table[] = {
#define DQ_Q(T) \
	{ \
		T, true, get_rows_q<T>, dequant_q<T> \
	}
#define DQ_F(T) \
	{ \
		T, false, get_rows_f<T>, dequant_f<T> \
	}
	DQ_F(T_F32),  DQ_F(T_F16),  DQ_F(T_BF16), DQ_Q(T_Q4_0), DQ_Q(T_Q4_1),
	DQ_Q(T_Q5_0), DQ_Q(T_Q5_1), DQ_Q(T_Q8_0), DQ_Q(T_Q2_K), DQ_Q(T_Q3_K),
	DQ_Q(T_Q4_K), DQ_Q(T_Q5_K), DQ_Q(T_Q6_K),
#undef DQ_Q
#undef DQ_F
};

/* threads and blocks along a row of n elements */
static dim3 dq_grid(bool quantized, int64_t n, uint64_t rows)
{
	uint64_t units = quantized ? (uint64_t)n / 16 : (uint64_t)n;

	return dim3(cuda_div_up(units, 128), (unsigned)rows);
}

bool k_get_rows(uint32_t w_type, const void *w, uint64_t row_bytes, int64_t n,
		const int32_t *ids, float *y, uint64_t y_ld, uint32_t rows,
		cudaStream_t s)
{
	for (const auto &t : dq_table) {
		if (t.type != w_type)
			continue;
		if (rows)
			cuda_launch(t.rows, dq_grid(t.quantized, n, rows),
				    dim3(128), 0, s, (const uint8_t *)w,
				    row_bytes, n, ids, y, y_ld);
		return true;
	}
	return false;
}

bool k_dequant_half(uint32_t w_type, const void *w, uint64_t row_bytes,
		    int64_t n, int64_t n_rows, bool bf16, uint16_t *y,
		    cudaStream_t s)
{
	for (const auto &t : dq_table) {
		if (t.type != w_type)
			continue;
		/* grid.y is at most 65535 rows: larger matrices in pieces */
		for (int64_t r = 0; r < n_rows; r += 65535) {
			int64_t k = n_rows - r < 65535 ? n_rows - r : 65535;

			cuda_launch(t.half,
				    dq_grid(t.quantized, n, (uint64_t)k),
				    dim3(128), 0, s,
				    (const uint8_t *)w + r * row_bytes,
				    row_bytes, n, bf16, y + r * n);
		}
		return true;
	}
	return false;
}

void k_f32_to_half(const float *x, uint64_t x_ld, bool bf16, uint16_t *y,
		   int64_t n, uint32_t rows, cudaStream_t s)
{
	if (rows && n)
		cuda_launch(f32_to_half_k,
			    dim3(cuda_div_up((uint64_t)n, 256), rows),
			    dim3(256), 0, s, x, x_ld, bf16, y, n);
}
