// SPDX-License-Identifier: MIT
/*
 * The module's table (module.h): devices, memory, copies, and the ops
 * over device pointers that the engine's CUDA backend and the tests call.
 * Each op checks its arguments, enqueues its kernels on the device's
 * stream and reports a launch error as -EIO.
 */
#include <cstdlib>
#include <cstring>
#include <vector>

#include "blocks.cuh"
#include "internal.h"

int cuda_err(struct err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return -code;
}

int cuda_check(cudaError_t e, const char *what, struct err *err)
{
	if (e == cudaSuccess)
		return 0;
	if (e == cudaErrorMemoryAllocation)
		return cuda_err(err, ENOSPC, "%s: out of GPU memory", what);
	return cuda_err(err, EIO, "%s: %s", what, cudaGetErrorString(e));
}

/* ---- devices ------------------------------------------------------------- */

static int mod_open(struct cuda_dev **out, int index, struct err *err)
{
	cuda_dev *d;
	int ret, n = 0;

	*out = nullptr;
	if (cudaGetDeviceCount(&n) != cudaSuccess || index < 0 || index >= n)
		return cuda_err(err, ENODEV, "no CUDA device %d (%d found)",
				index, n);
	d = new cuda_dev();
	d->index = index;
	if ((ret = cuda_check(cudaSetDevice(index), "cudaSetDevice", err)) ||
	    (ret = cuda_check(cudaGetDeviceProperties(&d->prop, index),
			      "cudaGetDeviceProperties", err)) ||
	    (ret = cuda_check(cudaStreamCreateWithFlags(&d->stream,
							cudaStreamNonBlocking),
			      "cudaStreamCreate", err))) {
		delete d;
		return ret;
	}
	for (int i = 0; i < CUDA_SLOTS; i++) {
		ret = cuda_check(
			cudaEventCreateWithFlags(&d->slot_done[i],
						 cudaEventDisableTiming),
			"cudaEventCreate", err);
		if (ret) {
			while (i--)
				cudaEventDestroy(d->slot_done[i]);
			cudaStreamDestroy(d->stream);
			delete d;
			return ret;
		}
	}
	*out = d;
	return 0;
}

static void mod_close(struct cuda_dev *d)
{
	if (!d)
		return;
	cudaSetDevice(d->index);
	cudaStreamSynchronize(d->stream);
	blas_close(d->blas);
	cudaFree(d->scratch);
	for (int i = 0; i < CUDA_SLOTS; i++)
		cudaEventDestroy(d->slot_done[i]);
	cudaStreamDestroy(d->stream);
	delete d;
}

static int mod_mem_info(struct cuda_dev *d, uint64_t *free_b, uint64_t *total,
			struct err *err)
{
	size_t f = 0, t = 0;
	int ret;

	cudaSetDevice(d->index);
	if ((ret = cuda_check(cudaMemGetInfo(&f, &t), "cudaMemGetInfo", err)))
		return ret;
	*free_b = f;
	*total = t;
	return 0;
}

void *cuda_dev_scratch(struct cuda_dev *d, size_t n, struct err *err)
{
	void *p = nullptr;

	if (n <= d->scratch_bytes)
		return d->scratch;
	/* kernels still queued may read the old buffer */
	if (cuda_check(cudaStreamSynchronize(d->stream), "scratch", err))
		return nullptr;
	cudaFree(d->scratch);
	d->scratch = nullptr;
	d->scratch_bytes = 0;
	n = (n + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);
	if (cuda_check(cudaMalloc(&p, n), "scratch", err))
		return nullptr;
	d->scratch = p;
	d->scratch_bytes = n;
	return p;
}

/* ---- memory -------------------------------------------------------------- */

static int mod_alloc(struct cuda_dev *d, void **p, size_t n, struct err *err)
{
	cudaError_t e;

	cudaSetDevice(d->index);
	e = cudaMalloc(p, n ? n : 1);
	if (e == cudaErrorMemoryAllocation) {
		cudaGetLastError(); /* not sticky: the caller may try less */
		*p = nullptr;
		return cuda_err(err, ENOSPC,
				"gpu%d: no room for %zu bytes of GPU memory",
				d->index, n);
	}
	return cuda_check(e, "cudaMalloc", err);
}

static void mod_free(struct cuda_dev *d, void *p)
{
	if (!p)
		return;
	cudaSetDevice(d->index);
	/* cudaFree waits for the device; queued kernels may still read p */
	cudaFree(p);
}

static int mod_copy_in(struct cuda_dev *d, void *dst, const void *src, size_t n,
		       struct err *err)
{
	int ret;

	if ((ret = cuda_check(cudaMemcpyAsync(dst, src, n,
					      cudaMemcpyHostToDevice,
					      d->stream),
			      "copy to the GPU", err)))
		return ret;
	return cuda_check(cudaStreamSynchronize(d->stream), "copy to the GPU",
			  err);
}

static int mod_copy_out(struct cuda_dev *d, void *dst, const void *src,
			size_t n, struct err *err)
{
	int ret;

	if ((ret = cuda_check(cudaMemcpyAsync(dst, src, n,
					      cudaMemcpyDeviceToHost,
					      d->stream),
			      "copy from the GPU", err)))
		return ret;
	return cuda_check(cudaStreamSynchronize(d->stream), "copy from the GPU",
			  err);
}

static int mod_copy(struct cuda_dev *d, void *dst, const void *src, size_t n,
		    struct err *err)
{
	return cuda_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice,
					  d->stream),
			  "copy on the GPU", err);
}

static int mod_copy_any(struct cuda_dev *d, void *dst, const void *src,
			size_t n, struct err *err)
{
	int ret;

	cudaSetDevice(d->index);
	if ((ret = cuda_check(
		     cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, d->stream),
		     "copy", err)))
		return ret;
	return cuda_check(cudaStreamSynchronize(d->stream), "copy", err);
}

static int mod_memset(struct cuda_dev *d, void *p, int byte, size_t n,
		      struct err *err)
{
	return cuda_check(cudaMemsetAsync(p, byte, n, d->stream), "memset",
			  err);
}

static int mod_synchronize(struct cuda_dev *d, struct err *err)
{
	return cuda_check(cudaStreamSynchronize(d->stream), "the GPU's work",
			  err);
}

static int mod_host_alloc(void **p, size_t n, struct err *err)
{
	cudaError_t e = cudaHostAlloc(p, n, cudaHostAllocPortable);

	if (e != cudaSuccess) {
		cudaGetLastError();
		*p = nullptr;
		return cuda_err(err, ENOMEM, "cudaHostAlloc of %zu bytes: %s",
				n, cudaGetErrorString(e));
	}
	return 0;
}

static void mod_host_free(void *p)
{
	if (p)
		cudaFreeHost(p);
}

static int mod_host_register(void *p, size_t n, struct err *err)
{
	cudaError_t e = cudaHostRegister(p, n, cudaHostRegisterPortable);

	if (e != cudaSuccess) {
		cudaGetLastError();
		return cuda_err(err, ENOMEM,
				"cudaHostRegister of %zu bytes: %s", n,
				cudaGetErrorString(e));
	}
	return 0;
}

static void mod_host_unregister(void *p)
{
	if (p)
		cudaHostUnregister(p);
}

static int mod_copy_in_async(struct cuda_dev *d, void *dst, const void *src,
			     size_t n, unsigned slot, struct err *err)
{
	int ret;

	if (slot >= CUDA_SLOTS)
		return cuda_err(err, EINVAL, "copy slot %u of %d", slot,
				CUDA_SLOTS);
	if ((ret = cuda_check(cudaMemcpyAsync(dst, src, n,
					      cudaMemcpyHostToDevice,
					      d->stream),
			      "copy to the GPU", err)) ||
	    (ret = cuda_check(cudaEventRecord(d->slot_done[slot], d->stream),
			      "cudaEventRecord", err)))
		return ret;
	d->slot_used[slot] = true;
	return 0;
}

static int mod_slot_wait(struct cuda_dev *d, unsigned slot, struct err *err)
{
	if (slot >= CUDA_SLOTS)
		return cuda_err(err, EINVAL, "copy slot %u of %d", slot,
				CUDA_SLOTS);
	if (!d->slot_used[slot])
		return 0;
	return cuda_check(cudaEventSynchronize(d->slot_done[slot]),
			  "copy to the GPU", err);
}

/* ---- ops ----------------------------------------------------------------- */

static uint32_t mod_act_type(uint32_t w_type)
{
	return k_act_type(w_type);
}

static uint64_t mod_act_row_bytes(uint32_t act, int64_t n)
{
	return k_act_row_bytes(act, n);
}

/* n a multiple of act's block */
static bool mod_act_fits(uint32_t act, int64_t n)
{
	return n > 0 && (act == T_F32 || (act == T_Q8_1 && n % 32 == 0) ||
			 (act == T_Q8_K && n % QK_K == 0));
}

static int mod_quantize(struct cuda_dev *d, uint32_t act, const float *x,
			size_t x_ld, void *y, size_t y_ld, int64_t n,
			uint32_t rows, struct err *err)
{
	if (!mod_act_fits(act, n))
		return cuda_err(err, EINVAL,
				"cannot quantize rows of %lld to type %u",
				(long long)n, act);
	k_quantize(act, x, x_ld, y, y_ld, n, rows, d->stream);
	return cuda_check_launch("quantize", err);
}

/* the kernels to run a product with, for its mode and batch */
static enum cuda_matmul_mode mod_matmul_mode(const struct cuda_matmul *mm)
{
	static int forced = -1;
	static uint32_t mmv_rows;

	if (forced < 0) {
		const char *s = getenv("LLMFS_CUDA_MATMUL");

		forced = !s		      ? CUDA_MATMUL_AUTO :
			 !strcmp(s, "mmv")    ? CUDA_MATMUL_MMV :
			 !strcmp(s, "cublas") ? CUDA_MATMUL_CUBLAS :
			 !strcmp(s, "mma")    ? CUDA_MATMUL_MMA :
						CUDA_MATMUL_AUTO;
	}
	if (!mmv_rows)
		mmv_rows = cuda_mmv_rows();
	enum cuda_matmul_mode m = mm->mode != CUDA_MATMUL_AUTO ?
					  mm->mode :
					  (enum cuda_matmul_mode)forced;
	/*
	 * int8 tensor cores (mmq.cu) where they take the type, on the
	 * caller's quantized rows too (the same vec_dot rows) where they
	 * lie 16-aligned; else as AUTO
	 */
	if (m == CUDA_MATMUL_MMA && mm->rows > mmv_rows && !mm->ids &&
	    k_mmq_takes(mm->w_type, mm->n_in) &&
	    (!mm->x_act || !(((uintptr_t)mm->x | mm->x_ld) & 15)))
		return CUDA_MATMUL_MMA;
	/*
	 * experts, quantized rows and small batches: the mat-vec kernel;
	 * F32 weights too (the MoE router, small matrices): halves would
	 * round them, and the mat-vec kernel gives the CPU's bits
	 */
	if (mm->ids || mm->x_act)
		return CUDA_MATMUL_MMV;
	/*
	 * AUTO: cuBLAS for the F16 and BF16 weights only, whose vec_dot
	 * type its halves are (activations rounded to F16 or BF16, F32
	 * sums). A quantized weight's activations must be ggml's int8 rows
	 * (../shared/README.md section 4: halves miss by 1e-2 and flip MoE
	 * routing; an H100 failed the golden rule so): the mat-vec kernel
	 * takes any batch. LLMFS_CUDA_MATMUL=cublas: halves for every type.
	 */
	if (m == CUDA_MATMUL_AUTO || m == CUDA_MATMUL_MMA)
		return mm->rows > mmv_rows && (mm->w_type == T_F16 ||
					       mm->w_type == T_BF16) ?
			       CUDA_MATMUL_CUBLAS :
			       CUDA_MATMUL_MMV;
	return m;
}

/* y (y_ld) = w . the halves of x at s + wbytes, w dequantized at s */
static int mod_gemm(struct cuda_dev *d, const struct cuda_matmul *mm,
		    const void *w, uint8_t *s, size_t wbytes, float *y,
		    size_t y_ld, struct err *err)
{
	const bool bf16 = mm->w_type == T_BF16;
	int ret;

	if (!k_dequant_half(mm->w_type, w, mm->row_bytes, mm->n_in, mm->n_out,
			    bf16, (uint16_t *)s, d->stream))
		return cuda_err(err, EINVAL, "no F16 conversion for type %u",
				mm->w_type);
	if ((ret = cuda_check_launch("dequantize", err)))
		return ret;
	return blas_gemm_half(d->blas, d->stream, (int)mm->n_out, (int)mm->rows,
			      (int)mm->n_in, (const uint16_t *)s, (int)mm->n_in,
			      (const uint16_t *)(s + wbytes), (int)mm->n_in,
			      bf16, y, (int)y_ld, err);
}

/*
 * The weights dequantized to halves and cuBLAS; a fused add or SwiGLU
 * through products in the scratch (its rows n_out floats apart).
 */
static int mod_matmul_cublas(struct cuda_dev *d, const struct cuda_matmul *mm,
			     struct err *err)
{
	const size_t wbytes = (size_t)mm->n_out * mm->n_in * 2;
	const size_t xbytes = ((size_t)mm->rows * mm->n_in * 2 + 255) &
			      ~(size_t)255;
	const size_t ybytes = (size_t)mm->rows * mm->n_out * 4;
	const int n_tmp = mm->w2 ? 2 : mm->accumulate ? 1 : 0;
	uint8_t *s;
	float *t;
	int ret;

	if (!d->blas && (ret = blas_open(&d->blas, d->stream, err)))
		return ret;
	s = (uint8_t *)cuda_dev_scratch(
		d, wbytes + xbytes + 256 + n_tmp * ybytes, err);
	if (!s)
		return -err->code;
	t = (float *)(s + ((wbytes + 255) & ~(size_t)255) + xbytes);
	k_f32_to_half(mm->x, mm->x_ld, mm->w_type == T_BF16,
		      (uint16_t *)(s + wbytes), mm->n_in, mm->rows, d->stream);
	if (!n_tmp)
		return mod_gemm(d, mm, mm->w, s, wbytes, mm->y, mm->y_ld, err);
	if ((ret = mod_gemm(d, mm, mm->w, s, wbytes, t, mm->n_out, err)))
		return ret;
	if (mm->accumulate) {
		k_add(mm->y, mm->y_ld, t, mm->n_out, mm->n_out, mm->rows,
		      d->stream);
		return cuda_check_launch("add", err);
	}
	if ((ret = mod_gemm(d, mm, mm->w2, s, wbytes, t + mm->rows * mm->n_out,
			    mm->n_out, err)))
		return ret;
	k_swiglu(mm->y, mm->y_ld, t, mm->n_out, t + mm->rows * mm->n_out,
		 mm->n_out, mm->n_out, mm->rows, d->stream);
	return cuda_check_launch("swiglu", err);
}

static int mod_matmul_mmv(struct cuda_dev *d, const struct cuda_matmul *mm,
			  struct err *err)
{
	const uint32_t act = k_act_type(mm->w_type);
	const uint32_t pairs = mm->ids ? mm->rows * mm->n_slots : 0;
	const uint32_t xrows = mm->ids && mm->x_per_slot ? pairs : mm->rows;
	const uint32_t max_items = mm->ids ? k_moe_max_items(pairs,
							     mm->n_experts) :
					     0;
	const uint64_t xq_ld = (k_act_row_bytes(act, mm->n_in) + 15) &
			       ~(uint64_t)15;
	const size_t xbytes = (xq_ld * xrows + 255) & ~(size_t)255;
	const size_t lbytes = ((size_t)3 * max_items + 2 * pairs + 1) * 4;
	uint8_t *xq;
	mmv_args a = {};

	xq = (uint8_t *)cuda_dev_scratch(d, xbytes + lbytes, err);
	if (!xq)
		return -err->code;
	if (mm->x_act) {
		/* the caller's rows are the kernel's already */
		a.x = (const uint8_t *)mm->x;
		a.x_ld = mm->x_ld;
	} else {
		k_quantize(act, mm->x, mm->x_ld, xq, xq_ld, mm->n_in, xrows,
			   d->stream);
		a.x = xq;
		a.x_ld = xq_ld;
	}
	a.w = (const uint8_t *)mm->w;
	a.w2 = (const uint8_t *)mm->w2;
	a.repacked = mm->repacked;
	a.accumulate = mm->accumulate;
	a.row_bytes = mm->row_bytes;
	a.expert_bytes = mm->expert_bytes;
	a.n_in = mm->n_in;
	a.n_out = mm->n_out;
	a.y = mm->y;
	a.y_ld = mm->y_ld;
	a.n_cols = mm->rows;
	if (mm->ids) {
		int32_t *items = (int32_t *)(xq + xbytes);
		int32_t *px = items + 3 * max_items, *py = px + pairs;

		/* the pairs listed by expert on the device: no round trip */
		k_moe_group(mm->ids, mm->ids_ld, mm->rows, mm->n_slots,
			    mm->n_experts, mm->x_per_slot, items, px, py,
			    py + pairs, d->stream);
		a.items = items;
		a.pair_x = px;
		a.pair_y = py;
		a.n_items = py + pairs;
		a.max_items = max_items;
	}
	k_mmv(mm->w_type, a, d->stream);
	return cuda_check_launch("matrix product", err);
}

/* y (y_ld) = w . xq's rows (w's vec_dot type), or y += it */
static int mod_mmq(struct cuda_dev *d, const struct cuda_matmul *mm,
		   const void *w, const uint8_t *xq, uint64_t xq_ld, float *y,
		   size_t y_ld, bool accumulate, struct err *err)
{
	mmq_args a = {};

	a.w = (const uint8_t *)w;
	a.row_bytes = mm->row_bytes;
	a.n_in = mm->n_in;
	a.n_out = mm->n_out;
	a.x = xq;
	a.x_ld = xq_ld;
	a.y = y;
	a.y_ld = y_ld;
	a.rows = mm->rows;
	a.accumulate = accumulate;
	if (!k_mmq(mm->w_type, a, d->stream))
		return cuda_err(err, EINVAL,
				"no int8 tensor-core product of type %u",
				mm->w_type);
	return cuda_check_launch("matrix product (mma)", err);
}

/*
 * The int8 tensor-core kernel on the rows quantized to the weight's
 * vec_dot type (Q8_1, Q8_K: the mat-vec kernel's, ggml's), or on the
 * caller's rows of it; SwiGLU through the two products in the scratch
 * (rows n_out floats apart).
 */
static int mod_matmul_mma(struct cuda_dev *d, const struct cuda_matmul *mm,
			  struct err *err)
{
	const uint32_t act = k_act_type(mm->w_type);
	const uint64_t xq_ld = mm->x_act ? mm->x_ld :
					   (k_act_row_bytes(act, mm->n_in) +
					    15) & ~(uint64_t)15;
	const size_t xbytes = mm->x_act ? 0 :
					  (xq_ld * mm->rows + 255) &
						  ~(size_t)255;
	const size_t ybytes = (size_t)mm->rows * mm->n_out * 4;
	const uint8_t *xq;
	uint8_t *s;
	float *t;
	int ret;

	if (mm->x_act && !mm->w2) {
		xq = (const uint8_t *)mm->x;
		return mod_mmq(d, mm, mm->w, xq, xq_ld, mm->y, mm->y_ld,
			       mm->accumulate, err);
	}
	s = (uint8_t *)cuda_dev_scratch(d, xbytes + (mm->w2 ? 2 * ybytes : 0),
					err);
	if (!s)
		return -err->code;
	xq = s;
	if (mm->x_act)
		xq = (const uint8_t *)mm->x;
	else
		k_quantize(act, mm->x, mm->x_ld, s, xq_ld, mm->n_in, mm->rows,
			   d->stream);
	if (!mm->w2)
		return mod_mmq(d, mm, mm->w, xq, xq_ld, mm->y, mm->y_ld,
			       mm->accumulate, err);
	t = (float *)(s + xbytes);
	if ((ret = mod_mmq(d, mm, mm->w, xq, xq_ld, t, mm->n_out, false,
			   err)) ||
	    (ret = mod_mmq(d, mm, mm->w2, xq, xq_ld, t + mm->rows * mm->n_out,
			   mm->n_out, false, err)))
		return ret;
	k_swiglu(mm->y, mm->y_ld, t, mm->n_out, t + mm->rows * mm->n_out,
		 mm->n_out, mm->n_out, mm->rows, d->stream);
	return cuda_check_launch("swiglu", err);
}

static int mod_matmul_check(const struct cuda_matmul *mm, struct err *err)
{
	const uint32_t act = k_act_type(mm->w_type);

	if (act == IO_TYPE_COUNT || !mod_act_fits(act, mm->n_in) ||
	    mm->n_out <= 0 || mm->n_out > INT32_MAX ||
	    (mm->ids && (!mm->n_slots || mm->ids_ld < mm->n_slots ||
			 !mm->n_experts || mm->n_experts > 4096 || mm->w2)))
		return cuda_err(err, EINVAL,
				"no product of type %u with rows of %lld",
				mm->w_type, (long long)mm->n_in);
	return 0;
}

static int mod_matmul(struct cuda_dev *d, const struct cuda_matmul *mm,
		      struct err *err)
{
	int ret;

	if ((ret = mod_matmul_check(mm, err)))
		return ret;
	if (!mm->rows)
		return 0;
	switch (mod_matmul_mode(mm)) {
	case CUDA_MATMUL_CUBLAS: return mod_matmul_cublas(d, mm, err);
	case CUDA_MATMUL_MMA: return mod_matmul_mma(d, mm, err);
	default: return mod_matmul_mmv(d, mm, err);
	}
}

/* whether b can run in a's launch (matmul_group) */
static bool mod_matmul_joins(const struct cuda_matmul *a,
			     const struct cuda_matmul *b)
{
	return b->x_act && b->w_type == a->w_type &&
	       b->repacked == a->repacked && b->n_in == a->n_in &&
	       b->row_bytes == a->row_bytes && b->x == a->x &&
	       b->x_ld == a->x_ld && b->rows == a->rows && !b->ids && !b->w2 &&
	       !b->accumulate;
}

static int mod_matmul_group(struct cuda_dev *d, const struct cuda_matmul *mm,
			    uint32_t count, struct err *err)
{
	uint32_t i, j, k;
	int ret;

	for (i = 0; i < count; i = j) {
		mmv_args a = {};

		if ((ret = mod_matmul_check(&mm[i], err)))
			return ret;
		for (j = i + 1; j < count && j - i < 3 && mm[i].rows &&
				mod_matmul_joins(&mm[i], &mm[j]);
		     j++)
			if ((ret = mod_matmul_check(&mm[j], err)))
				return ret;
		if (j - i < 2 || !mod_matmul_joins(&mm[i], &mm[i]) ||
		    mod_matmul_mode(&mm[i]) == CUDA_MATMUL_MMA) {
			j = i + 1;
			if ((ret = mod_matmul(d, &mm[i], err)))
				return ret;
			continue;
		}
		a.row_bytes = mm[i].row_bytes;
		a.repacked = mm[i].repacked;
		a.n_in = mm[i].n_in;
		a.x = (const uint8_t *)mm[i].x;
		a.x_ld = mm[i].x_ld;
		a.n_cols = mm[i].rows;
		a.n_seg = j - i;
		for (k = 0; k < a.n_seg; k++) {
			a.seg_w[k] = (const uint8_t *)mm[i + k].w;
			a.seg_end[k] = (k ? a.seg_end[k - 1] : 0) +
				       mm[i + k].n_out;
			a.seg_y[k] = mm[i + k].y;
			a.seg_ld[k] = mm[i + k].y_ld;
		}
		a.w = a.seg_w[0];
		a.y = a.seg_y[0];
		a.y_ld = a.seg_ld[0];
		a.n_out = a.seg_end[a.n_seg - 1];
		k_mmv(mm[i].w_type, a, d->stream);
		if ((ret = cuda_check_launch("matrix products", err)))
			return ret;
	}
	return 0;
}

static int mod_rms_norm_quantize(struct cuda_dev *d, uint32_t act,
				 const float *x, size_t x_ld, const float *w,
				 float *y, size_t y_ld, void *q, size_t q_ld,
				 int64_t n, uint32_t rows, float eps,
				 struct err *err)
{
	if (!mod_act_fits(act, n))
		return cuda_err(err, EINVAL,
				"cannot quantize rows of %lld to type %u",
				(long long)n, act);
	if (!k_rms_norm_quantize(act, x, x_ld, w, y, y_ld, q, q_ld, n, rows,
				 eps, d->stream)) {
		k_rms_norm(x, x_ld, w, y, y_ld, n, rows, eps, d->stream);
		k_quantize(act, y, y_ld, q, q_ld, n, rows, d->stream);
	}
	return cuda_check_launch("rms_norm", err);
}

static int mod_get_rows(struct cuda_dev *d, uint32_t w_type, const void *w,
			uint64_t row_bytes, int64_t n, const int32_t *ids,
			float *y, size_t y_ld, uint32_t rows, struct err *err)
{
	if (!k_get_rows(w_type, w, row_bytes, n, ids, y, y_ld, rows, d->stream))
		return cuda_err(err, EINVAL, "no get_rows for type %u", w_type);
	return cuda_check_launch("get_rows", err);
}

static int mod_rms_norm(struct cuda_dev *d, const float *x, size_t x_ld,
			const float *w, float *y, size_t y_ld, int64_t n,
			uint32_t rows, float eps, struct err *err)
{
	k_rms_norm(x, x_ld, w, y, y_ld, n, rows, eps, d->stream);
	return cuda_check_launch("rms_norm", err);
}

static int mod_rope(struct cuda_dev *d, float *x, size_t x_ld, uint32_t n_head,
		    uint32_t head_dim, uint32_t n_rot, enum cuda_rope_mode mode,
		    const int32_t *pos, float freq_base, float freq_scale,
		    const float *freq_factors, uint32_t rows, struct err *err)
{
	if (n_rot > head_dim || n_rot % 2 || n_rot > 2048)
		return cuda_err(err, EINVAL, "rope of %u dimensions of %u",
				n_rot, head_dim);
	k_rope(x, x_ld, n_head, head_dim, n_rot, mode == CUDA_ROPE_NEOX, pos,
	       freq_base, freq_scale, freq_factors, rows, d->stream);
	return cuda_check_launch("rope", err);
}

static int mod_swiglu(struct cuda_dev *d, float *y, size_t y_ld, const float *g,
		      size_t g_ld, const float *u, size_t u_ld, int64_t n,
		      uint32_t rows, struct err *err)
{
	k_swiglu(y, y_ld, g, g_ld, u, u_ld, n, rows, d->stream);
	return cuda_check_launch("swiglu", err);
}

static int mod_add(struct cuda_dev *d, float *y, size_t y_ld, const float *x,
		   size_t x_ld, int64_t n, uint32_t rows, struct err *err)
{
	k_add(y, y_ld, x, x_ld, n, rows, d->stream);
	return cuda_check_launch("add", err);
}

/* a layer's view of the cache, or false for types the kernels lack */
static bool mod_kv_args(const struct cuda_kv *kv, uint32_t il, cuda_kv_args *a)
{
	a->pool = kv->pool;
	a->block_bytes = kv->block_bytes;
	a->layer_off = (uint64_t)il * CUDA_KV_BLOCK * (kv->k_row + kv->v_row);
	a->k_row = kv->k_row;
	a->v_row = kv->v_row;
	a->tables = kv->tables;
	a->max_blocks = kv->max_blocks;
	a->k_blocks = kv->k_blocks;
	a->v_blocks = kv->v_blocks;
	a->type_k = kv->type_k;
	a->type_v = kv->type_v;
	a->n_head_kv = kv->n_head_kv;
	a->head_dim = kv->head_dim;
	a->head_dim_v = kv->head_dim_v;
	if (kv->k_blocks || kv->v_blocks) {
		a->layer_off = 0; /* the tables point into the layer */
		return kv->k_blocks && kv->v_blocks && kv->max_blocks &&
		       k_kv_types_ok(kv->type_k, kv->type_v, kv->head_dim,
				     kv->head_dim_v);
	}
	return k_kv_types_ok(kv->type_k, kv->type_v, kv->head_dim,
			     kv->head_dim_v) &&
	       a->layer_off + CUDA_KV_BLOCK * (kv->k_row + kv->v_row) <=
		       kv->block_bytes;
}

static int mod_kv_store(struct cuda_dev *d, const struct cuda_kv *kv,
			uint32_t il, const float *k, size_t k_ld,
			const float *v, size_t v_ld, const int32_t *seq_of,
			const int32_t *pos, uint32_t rows, struct err *err)
{
	cuda_kv_args a;

	if (!mod_kv_args(kv, il, &a))
		return cuda_err(
			err, EINVAL,
			"no KV cache of types %u/%u, head sizes %u/%u, layer %u",
			kv->type_k, kv->type_v, kv->head_dim, kv->head_dim_v,
			il);
	k_kv_store(a, k, k_ld, v, v_ld, seq_of, pos, rows, d->stream);
	return cuda_check_launch("kv_store", err);
}

static int mod_qk_rope_store(struct cuda_dev *d, const struct cuda_kv *kv,
			     uint32_t il, const struct cuda_qk_rope *q,
			     const int32_t *seq_of, const int32_t *pos,
			     uint32_t rows, struct err *err)
{
	qk_rope_args a = {};

	if (!mod_kv_args(kv, il, &a.kv) || !q->n_rot)
		return cuda_err(err, ENOTSUP,
				"no fused rope and KV store of types %u/%u",
				kv->type_k, kv->type_v);
	a.q = q->q;
	a.k = q->k;
	a.v = q->v;
	a.q_ld = q->q_ld;
	a.k_ld = q->k_ld;
	a.v_ld = q->v_ld;
	a.q_norm = q->q_norm;
	a.k_norm = q->k_norm;
	a.eps = q->eps;
	a.n_head = q->n_head;
	a.n_rot = q->n_rot;
	a.neox = q->mode == CUDA_ROPE_NEOX;
	a.theta_scale = powf(q->freq_base, -2.0f / (float)q->n_rot);
	a.freq_scale = q->freq_scale;
	a.freq_factors = q->freq_factors;
	a.seq_of = seq_of;
	a.pos = pos;
	if (!k_qk_rope_store(a, rows, d->stream))
		return cuda_err(err, ENOTSUP,
				"no fused rope and KV store of heads of %u",
				kv->head_dim);
	return cuda_check_launch("qk_rope_store", err);
}

static int mod_attention_quantize(struct cuda_dev *d, const struct cuda_kv *kv,
				  uint32_t il, const float *q, size_t q_ld,
				  uint32_t n_head, float scale,
				  const int32_t *seq_of, const int32_t *pos,
				  uint32_t n_ctx, float *out, size_t out_ld,
				  uint32_t act, void *xq, size_t xq_ld,
				  uint32_t rows, struct err *err)
{
	att_args a = {};

	if (!mod_kv_args(kv, il, &a.kv) || !n_head || !kv->n_head_kv ||
	    n_head % kv->n_head_kv || !n_ctx)
		return cuda_err(
			err, EINVAL,
			"no attention of %u heads over %u KV heads, types %u/%u",
			n_head, kv->n_head_kv, kv->type_k, kv->type_v);
	if (xq && !k_att_quantizes(act, n_head, kv->head_dim_v))
		return cuda_err(err, ENOTSUP,
				"no quantizing merge to type %u of %u heads",
				act, n_head);
	a.xq = (uint8_t *)xq;
	a.xq_ld = xq_ld;
	a.act = act;
	a.q = q;
	a.q_ld = q_ld;
	a.seq_of = seq_of;
	a.pos = pos;
	a.scale = scale;
	a.group = n_head / kv->n_head_kv;
	a.n_head = n_head;
	a.out = out;
	a.out_ld = out_ld;
	a.chunk = k_att_chunk(n_ctx, rows);
	a.n_chunks = cuda_div_up(n_ctx, a.chunk);
	a.exact_below = k_att_exact_below();
	a.fast_exp = k_att_fast_exp();
	a.part = (float *)cuda_dev_scratch(d, k_att_part_floats(a, rows) * 4,
					   err);
	if (!a.part)
		return -err->code;
	if (!k_attention(a, rows, d->stream))
		return cuda_err(err, EINVAL,
				"no attention for %u query heads a KV head",
				a.group);
	return cuda_check_launch("attention", err);
}

static int mod_attention(struct cuda_dev *d, const struct cuda_kv *kv,
			 uint32_t il, const float *q, size_t q_ld,
			 uint32_t n_head, float scale, const int32_t *seq_of,
			 const int32_t *pos, uint32_t n_ctx, float *out,
			 size_t out_ld, uint32_t rows, struct err *err)
{
	return mod_attention_quantize(d, kv, il, q, q_ld, n_head, scale, seq_of,
				      pos, n_ctx, out, out_ld, IO_TYPE_COUNT,
				      nullptr, 0, rows, err);
}

static int mod_moe_route(struct cuda_dev *d, const float *logits, size_t ld,
			 uint32_t n_exp, uint32_t k, bool norm, int32_t *sel,
			 float *w, uint32_t rows, struct err *err)
{
	if (!k_moe_route(logits, ld, n_exp, k, norm, sel, w, rows, d->stream))
		return cuda_err(err, EINVAL,
				"no routing of top %u of %u experts", k, n_exp);
	return cuda_check_launch("moe_route", err);
}

static int mod_moe_combine(struct cuda_dev *d, float *out, size_t out_ld,
			   const float *eo, size_t eo_ld, const float *w,
			   uint32_t k, int64_t n, uint32_t rows,
			   struct err *err)
{
	k_moe_combine(out, out_ld, eo, eo_ld, w, k, n, rows, d->stream);
	return cuda_check_launch("moe_combine", err);
}

#ifdef LLMFS_CUDA_SIM
#define MOD_HOW "simulator (CPU)"
#else
#define MOD_HOW "cuda " LLMFS_CUDA_ARCHS
#endif

static const struct cuda_api mod_api = {
	.abi = LLMFS_CUDA_ABI,
	.size = sizeof(struct cuda_api),
	.how = MOD_HOW,
	.probe = cuda_probe,
	.open = mod_open,
	.close = mod_close,
	.mem_info = mod_mem_info,
	.alloc = mod_alloc,
	.free = mod_free,
	.copy_in = mod_copy_in,
	.copy_out = mod_copy_out,
	.copy = mod_copy,
	.copy_any = mod_copy_any,
	.memset = mod_memset,
	.synchronize = mod_synchronize,
	.host_alloc = mod_host_alloc,
	.host_free = mod_host_free,
	.host_register = mod_host_register,
	.host_unregister = mod_host_unregister,
	.copy_in_async = mod_copy_in_async,
	.slot_wait = mod_slot_wait,
	.act_type = mod_act_type,
	.act_row_bytes = mod_act_row_bytes,
	.quantize = mod_quantize,
	.matmul = mod_matmul,
	.get_rows = mod_get_rows,
	.rms_norm = mod_rms_norm,
	.rope = mod_rope,
	.swiglu = mod_swiglu,
	.add = mod_add,
	.kv_store = mod_kv_store,
	.attention = mod_attention,
	.moe_route = mod_moe_route,
	.moe_combine = mod_moe_combine,
	.ctx_new = cuda_ctx_new,
	.ctx_free = cuda_ctx_free,
	.ctx_forward = cuda_ctx_forward,
	.ctx_seq_truncate = cuda_ctx_seq_truncate,
	.ctx_seq_length = cuda_ctx_seq_length,
	.ctx_stats = cuda_ctx_stats_get,
	.matmul_group = mod_matmul_group,
	.rms_norm_quantize = mod_rms_norm_quantize,
	.qk_rope_store = mod_qk_rope_store,
	.attention_quantize = mod_attention_quantize,
	.graph_begin = cuda_graph_begin,
	.graph_end = cuda_graph_end,
	.graph_launch = cuda_graph_launch,
	.graph_free = cuda_graph_free,
};

extern "C" __attribute__((visibility("default"))) const struct cuda_api *
llmfs_cuda_api(void)
{
	return &mod_api;
}
