// SPDX-License-Identifier: MIT
/*
 * Inside the CUDA module: one device in use (struct cuda_dev) and the
 * helpers module.cu's ops share with the other files. C++ only.
 */
#ifndef LLMFS_ENGINE_CUDA_INTERNAL_H
#define LLMFS_ENGINE_CUDA_INTERNAL_H

#include "common.cuh"
#include "kernels.h"

/* copy slots of copy_in_async / slot_wait (the staging ring's buffers) */
#define CUDA_SLOTS 16

struct cuda_blas;

struct cuda_dev {
	int index;
	cudaStream_t stream;
	cudaEvent_t slot_done[CUDA_SLOTS];
	bool slot_used[CUDA_SLOTS];
	cudaDeviceProp prop;
	/* cuBLAS, opened at its first use; blas_failed: it could not be */
	struct cuda_blas *blas;
	bool blas_failed;
	/* the ops' scratch (quantized activations, halves), grown on demand */
	void *scratch;
	size_t scratch_bytes;
};

/*
 * At least n bytes of scratch, valid until the next call (the stream
 * is synchronized before it is replaced). NULL with err on failure.
 */
void *cuda_dev_scratch(struct cuda_dev *d, size_t n, struct err *err);

/* ---- blas.cu ------------------------------------------------------------- */

/* -ENOSYS when the library is absent */
int blas_open(cuda_blas **out, cudaStream_t s, struct err *err);
void blas_close(cuda_blas *b);
/*
 * C (m x n, column-major, ldc) = A^T B: A k x m (lda), B k x n (ldb),
 * halves (bfloat16 with bf16), sums in F32 (cublasGemmEx).
 */
int blas_gemm_half(cuda_blas *b, cudaStream_t s, int m, int n, int k,
		   const uint16_t *A, int lda, const uint16_t *B, int ldb,
		   bool bf16, float *C, int ldc, struct err *err);

/* ---- step.cu ------------------------------------------------------------- */

/* rows a product may have on the mat-vec kernel ($LLMFS_CUDA_MMV_ROWS, 32) */
uint32_t cuda_mmv_rows(void);

int cuda_ctx_new(struct cuda_dev *d, const struct cuda_model_desc *m,
		 const struct cuda_ctx_params *p, struct cuda_ctx **out,
		 struct err *err);
void cuda_ctx_free(struct cuda_ctx *c);
int cuda_ctx_forward(struct cuda_ctx *c, const struct cuda_item *items,
		     uint32_t n, struct err *err);
int cuda_ctx_seq_truncate(struct cuda_ctx *c, uint32_t seq, uint32_t n,
			  struct err *err);
uint32_t cuda_ctx_seq_length(const struct cuda_ctx *c, uint32_t seq);
void cuda_ctx_stats_get(const struct cuda_ctx *c, struct cuda_ctx_stats *st);

/* ---- graph.cu ------------------------------------------------------------ */

int cuda_graph_begin(struct cuda_dev *d, struct err *err);
int cuda_graph_end(struct cuda_dev *d, struct cuda_graph **g, bool *updated,
		   struct err *err);
int cuda_graph_launch(struct cuda_dev *d, struct cuda_graph *g,
		      struct err *err);
void cuda_graph_free(struct cuda_graph *g);

/* ---- probe.cu ------------------------------------------------------------ */

int cuda_probe(struct io_device_set *set, struct err *err);

#endif
