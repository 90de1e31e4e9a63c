// SPDX-License-Identifier: MIT
/*
 * cuBLAS, loaded when a product first asks for it (dlopen), so that the
 * module itself needs nothing but the driver: a machine without cuBLAS
 * still runs every product through the module's own kernels. Under the
 * simulator the same call is a plain host loop (F16 inputs, F32 sums).
 */
#include <dlfcn.h>
#include <mutex>

#include "internal.h"

#ifdef LLMFS_CUDA_SIM

struct cuda_blas {
	int unused;
};

int blas_open(cuda_blas **out, cudaStream_t s, struct err *err)
{
	(void)s;
	(void)err;
	*out = new cuda_blas();
	return 0;
}

void blas_close(cuda_blas *b)
{
	delete b;
}

/* C (col-major m x n) = A^T B, a thread per element */
__global__ void blas_sim_gemm(int m, int n, int k, const uint16_t *A, int lda,
			      const uint16_t *B, int ldb, bool bf16, float *C,
			      int ldc)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y;
	float sum = 0.0f;

	if (i >= m)
		return;
	for (int l = 0; l < k; l++)
		sum += bf16 ? cuda_bf2f(A[(int64_t)i * lda + l]) *
				       cuda_bf2f(B[(int64_t)j * ldb + l]) :
			      cuda_h2f(A[(int64_t)i * lda + l]) *
				       cuda_h2f(B[(int64_t)j * ldb + l]);
	C[(int64_t)j * ldc + i] = sum;
}

int blas_gemm_half(cuda_blas *b, cudaStream_t s, int m, int n, int k,
		   const uint16_t *A, int lda, const uint16_t *B, int ldb,
		   bool bf16, float *C, int ldc, struct err *err)
{
	(void)b;
	cuda_launch(blas_sim_gemm, dim3(cuda_div_up((uint64_t)m, 64), n),
		    dim3(64), 0, s, m, n, k, A, lda, B, ldb, bf16, C, ldc);
	return cuda_check_launch("gemm", err);
}

#else

#include <cublas_v2.h>

/* the cuBLAS entry points used, from the library found at run time */
static struct {
	std::once_flag once;
	void *lib;
	char why[256];
	cublasStatus_t (*create)(cublasHandle_t *);
	cublasStatus_t (*destroy)(cublasHandle_t);
	cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
	cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t,
				  cublasOperation_t, int, int, int,
				  const void *, const void *, cudaDataType, int,
				  const void *, cudaDataType, int, const void *,
				  void *, cudaDataType, int,
				  cublasComputeType_t, cublasGemmAlgo_t);
} blas_lib;

static void blas_load()
{
	static const char *const names[] = { "libcublas.so.13",
					     "libcublas.so.12",
					     "libcublas.so" };

	for (const char *n : names) {
		blas_lib.lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
		if (blas_lib.lib)
			break;
	}
	if (!blas_lib.lib) {
		snprintf(blas_lib.why, sizeof(blas_lib.why),
			 "cuBLAS not found: %s", dlerror());
		return;
	}
	*(void **)&blas_lib.create = dlsym(blas_lib.lib, "cublasCreate_v2");
	*(void **)&blas_lib.destroy = dlsym(blas_lib.lib, "cublasDestroy_v2");
	*(void **)&blas_lib.set_stream = dlsym(blas_lib.lib,
					       "cublasSetStream_v2");
	*(void **)&blas_lib.gemm_ex = dlsym(blas_lib.lib, "cublasGemmEx");
	if (!blas_lib.create || !blas_lib.destroy || !blas_lib.set_stream ||
	    !blas_lib.gemm_ex) {
		snprintf(blas_lib.why, sizeof(blas_lib.why),
			 "cuBLAS lacks cublasGemmEx or its handle functions");
		dlclose(blas_lib.lib);
		blas_lib.lib = nullptr;
	}
}

struct cuda_blas {
	cublasHandle_t h;
};

int blas_open(cuda_blas **out, cudaStream_t s, struct err *err)
{
	cuda_blas *b;

	*out = nullptr;
	std::call_once(blas_lib.once, blas_load);
	if (!blas_lib.lib)
		return cuda_err(err, ENOSYS, "%s", blas_lib.why);
	b = new cuda_blas();
	if (blas_lib.create(&b->h) != CUBLAS_STATUS_SUCCESS) {
		delete b;
		return cuda_err(err, EIO, "cublasCreate failed");
	}
	blas_lib.set_stream(b->h, s);
	*out = b;
	return 0;
}

void blas_close(cuda_blas *b)
{
	if (!b)
		return;
	blas_lib.destroy(b->h);
	delete b;
}

int blas_gemm_half(cuda_blas *b, cudaStream_t s, int m, int n, int k,
		   const uint16_t *A, int lda, const uint16_t *B, int ldb,
		   bool bf16, float *C, int ldc, struct err *err)
{
	const float one = 1.0f, zero = 0.0f;
	const cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
	cublasStatus_t st;

	blas_lib.set_stream(b->h, s);
	st = blas_lib.gemm_ex(b->h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A,
			      t, lda, B, t, ldb, &zero, C, CUDA_R_32F, ldc,
			      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	if (st != CUBLAS_STATUS_SUCCESS)
		return cuda_err(err, EIO,
				"cublasGemmEx (%d x %d x %d): status %d", m, n,
				k, (int)st);
	return 0;
}

#endif
