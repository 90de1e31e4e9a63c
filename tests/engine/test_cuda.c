// SPDX-License-Identifier: MIT
/*
 * The CUDA module's ops (engine/cuda/module.h) against the CPU backend's
 * own code, on fresh random inputs each run (the seed is printed; set
 * LLMFS_TEST_SEED to repeat one), every output buffer poisoned with NaN
 * bytes first so that an element a kernel forgot shows up.
 *
 * Which module: $LLMFS_CUDA_MODULE, else build/lib/llmfs-cuda-sim.so (the
 * same sources on the CPU: what `make check` runs); tools/gpu-check.sh
 * runs this program with the real module on a GPU. Exit 77 where the
 * module or a device is missing.
 *
 * What must hold: activation quantization byte for byte the CPU's; the
 * int8 mat-vec products the CPU's dot products up to the order floats
 * are added (MMV_REL); the F16 cuBLAS products within F16 rounding of
 * the float product (CUBLAS_REL); the int8 tensor-core products (mmq.cu)
 * the CPU's dot products on the same vec_dot rows up to the order floats
 * are added (MMQ_REL), the mma instruction's fragments as the PTX ISA
 * lays them out; the row operations the CPU's within float rounding.
 */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../engine/cuda/loader.h"
#include "../../engine/cpu/attention.h"
#include "../../engine/cpu/ops.h"
#include "../../engine/quant/quant.h"
#include "../common/check_main.h"
#include "cuda_setup.h"

/* relative to the largest |y|: integer sums exact, floats reordered */
#define MMV_REL 2e-5
/* activations rounded to F16 (2^-11), weights as dequantized */
#define CUBLAS_REL 4e-3
/*
 * the int8 tensor-core products (mmq.cu) against the CPU's vec_dot on
 * the same rows (Q8_1/Q8_0, Q8_K): integer sums exact, then float sums
 * in another order
 */
#define MMQ_REL 1e-5

static const struct cuda_api *api;
static struct cuda_dev *dev;
static uint64_t seed;

/* ---- helpers ------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

/* uniform in [-scale, scale) */
static void rand_floats(float *x, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = scale *
		       ((float)(rng_next() >> 40) / (float)(1 << 23) - 1.0f);
}

/*
 * Environment variable name set to value (NULL: unset) for a test that
 * asks the module for another path; returns what it was (a copy, or
 * NULL) for env_restore: with CK_FORK=no the tests share one process.
 */
static char *env_swap(const char *name, const char *value)
{
	const char *was = getenv(name);
	char *copy = was ? strdup(was) : NULL;

	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
	return copy;
}

/* name back to was (env_swap's answer), which it frees */
static void env_restore(const char *name, char *was)
{
	if (was)
		setenv(name, was, 1);
	else
		unsetenv(name);
	free(was);
}

static void *dev_alloc(size_t n)
{
	struct err err = { 0 };
	void *p = NULL;

	ck_assert_msg(api->alloc(dev, &p, n, &err) == 0, "%s", err.msg);
	/* poison: NaN floats, -1 ints */
	ck_assert(api->memset(dev, p, 0xff, n, &err) == 0);
	return p;
}

static void *dev_from(const void *host, size_t n)
{
	struct err err = { 0 };
	void *p = dev_alloc(n);

	ck_assert_msg(api->copy_in(dev, p, host, n, &err) == 0, "%s", err.msg);
	return p;
}

static void host_from(void *host, const void *p, size_t n)
{
	struct err err = { 0 };

	ck_assert_msg(api->synchronize(dev, &err) == 0, "%s", err.msg);
	ck_assert_msg(api->copy_out(dev, host, p, n, &err) == 0, "%s", err.msg);
}

/* max |a - b| / max |b|; every a finite (an unwritten NaN fails) */
static double rel_err(const float *a, const float *b, size_t n)
{
	double d = 0, m = 0;

	for (size_t i = 0; i < n; i++) {
		ck_assert_msg(isfinite(a[i]), "element %zu not written (%g)", i,
			      a[i]);
		d = fmax(d, fabs((double)a[i] - b[i]));
		m = fmax(m, fabs((double)b[i]));
	}
	return m > 0 ? d / m : d;
}

/* rows of n_in random floats as type (quantize_row_*_ref: valid blocks) */
static uint8_t *rand_matrix(uint32_t type, int64_t rows, int64_t n_in,
			    uint64_t *row_bytes)
{
	float *f = malloc(n_in * sizeof(float));
	uint8_t *w;

	ck_assert(io_type_row_bytes(type, n_in, row_bytes) == 0);
	w = malloc(*row_bytes * rows);
	ck_assert(f && w);
	for (int64_t r = 0; r < rows; r++) {
		rand_floats(f, n_in, 1.0f);
		quant_from_float_ref(type, f, w + r * *row_bytes, n_in);
	}
	free(f);
	return w;
}

/* ---- quantization -------------------------------------------------------- */

/* the module's Q8_1 and Q8_K rows are the CPU's quant_from_float bytes */
static void check_quantize(uint32_t act, uint32_t cpu_type, int64_t n,
			   uint32_t rows)
{
	const uint64_t rb = api->act_row_bytes(act, n);
	float *x = malloc(n * rows * sizeof(float));
	uint8_t *got = malloc(rb * rows), *want = malloc(rb * rows);
	struct err err = { 0 };
	float *dx;
	void *dy;

	rand_floats(x, n * rows, 3.0f);
	/* an all-zero block, and a block whose largest magnitude is negative */
	memset(x, 0, 256 * sizeof(float));
	x[300] = -7.0f;
	x[301] = 7.0f;
	dx = dev_from(x, n * rows * sizeof(float));
	dy = dev_alloc(rb * rows);
	ck_assert_msg(api->quantize(dev, act, dx, n, dy, rb, n, rows, &err) ==
			      0,
		      "%s", err.msg);
	host_from(got, dy, rb * rows);
	for (uint32_t r = 0; r < rows; r++)
		quant_from_float(cpu_type, x + r * n, want + r * rb, n);
	if (cpu_type == IO_TYPE_Q8_0) /* Q8_1's quants are Q8_0's: compare */
		for (uint32_t r = 0; r < rows; r++)
			quant_from_float(IO_TYPE_Q8_1, x + r * n, want + r * rb,
					 n);
	for (uint64_t i = 0; i < rb * rows; i++)
		ck_assert_msg(got[i] == want[i],
			      "act %u byte %llu: %02x, CPU %02x (seed %llu)",
			      act, (unsigned long long)i, got[i], want[i],
			      (unsigned long long)seed);
	api->free(dev, dx);
	api->free(dev, dy);
	free(x);
	free(got);
	free(want);
}

START_TEST(test_quantize_q8_1)
{
	check_quantize(IO_TYPE_Q8_1, IO_TYPE_Q8_1, 1024, 3);
}
END_TEST

START_TEST(test_quantize_q8_K)
{
	check_quantize(IO_TYPE_Q8_K, IO_TYPE_Q8_K, 1024, 3);
}
END_TEST

/* ---- products ------------------------------------------------------------ */

static const uint32_t weight_types[] = {
	IO_TYPE_F32,  IO_TYPE_F16,  IO_TYPE_BF16, IO_TYPE_Q4_0, IO_TYPE_Q4_1,
	IO_TYPE_Q5_0, IO_TYPE_Q5_1, IO_TYPE_Q8_0, IO_TYPE_Q2_K, IO_TYPE_Q3_K,
	IO_TYPE_Q4_K, IO_TYPE_Q5_K, IO_TYPE_Q6_K,
};
#define N_WEIGHT_TYPES (sizeof(weight_types) / sizeof(weight_types[0]))

/* y[c][r] = the CPU's dot of row r with x[c] quantized as the CPU does */
static void cpu_matmul(uint32_t type, const uint8_t *w, uint64_t row_bytes,
		       int64_t n_in, int64_t n_out, const float *x,
		       uint32_t cols, float *y)
{
	uint32_t vdt = quant_vec_dot_type(type);
	uint64_t ab;
	uint8_t *act;

	ck_assert(io_type_row_bytes(vdt, n_in, &ab) == 0);
	act = malloc(ab);
	for (uint32_t c = 0; c < cols; c++) {
		quant_from_float(vdt, x + c * n_in, act, n_in);
		for (int64_t r = 0; r < n_out; r++)
			y[c * n_out + r] = quant_vec_dot(
				type, n_in, w + r * row_bytes, act);
	}
	free(act);
}

/* y[c][r] = dequantized row r . x[c] in double */
static void float_matmul(uint32_t type, const uint8_t *w, uint64_t row_bytes,
			 int64_t n_in, int64_t n_out, const float *x,
			 uint32_t cols, float *y)
{
	float *row = malloc(n_in * sizeof(float));

	for (int64_t r = 0; r < n_out; r++) {
		quant_to_float(type, w + r * row_bytes, row, n_in);
		for (uint32_t c = 0; c < cols; c++) {
			double s = 0;

			for (int64_t i = 0; i < n_in; i++)
				s += (double)row[i] * x[c * n_in + i];
			y[c * n_out + r] = (float)s;
		}
	}
	free(row);
}

static void check_matmul(uint32_t type, uint32_t cols,
			 enum cuda_matmul_mode mode)
{
	const int64_t n_in = 512, n_out = 72;
	uint64_t rb;
	uint8_t *w = rand_matrix(type, n_out, n_in, &rb);
	float *x = malloc(n_in * cols * sizeof(float));
	float *got = malloc(n_out * cols * sizeof(float));
	float *want = malloc(n_out * cols * sizeof(float));
	struct err err = { 0 };
	struct cuda_matmul mm = { 0 };
	double e, tol;

	rand_floats(x, n_in * cols, 2.0f);
	mm.w_type = type;
	mm.w = dev_from(w, rb * n_out);
	mm.row_bytes = rb;
	mm.n_in = n_in;
	mm.n_out = n_out;
	mm.x = dev_from(x, n_in * cols * sizeof(float));
	mm.x_ld = n_in;
	/* y rows wider than n_out: the gaps must stay poisoned */
	mm.y = dev_alloc((n_out + 8) * cols * sizeof(float));
	mm.y_ld = n_out + 8;
	mm.rows = cols;
	mm.mode = mode;
	ck_assert_msg(api->matmul(dev, &mm, &err) == 0, "type %u: %s", type,
		      err.msg);
	for (uint32_t c = 0; c < cols; c++)
		host_from(got + c * n_out, mm.y + c * mm.y_ld,
			  n_out * sizeof(float));
	if (mode == CUDA_MATMUL_CUBLAS) {
		float_matmul(type, w, rb, n_in, n_out, x, cols, want);
		tol = CUBLAS_REL;
	} else {
		cpu_matmul(type, w, rb, n_in, n_out, x, cols, want);
		tol = MMV_REL;
	}
	e = rel_err(got, want, n_out * cols);
	ck_assert_msg(
		e <= tol,
		"%s x %u columns (mode %d): error %.3g > %.3g (seed %llu)",
		quant_type_name(type), cols, mode, e, tol,
		(unsigned long long)seed);
	api->free(dev, (void *)mm.w);
	api->free(dev, (void *)mm.x);
	api->free(dev, mm.y);
	free(w);
	free(x);
	free(got);
	free(want);
}

/* every type, 1 to 13 columns (a full chunk of 8, partial ones) */
START_TEST(test_matmul_mmv)
{
	static const uint32_t cols[] = { 1, 3, 8, 13 };

	for (size_t c = 0; c < sizeof(cols) / sizeof(cols[0]); c++)
		check_matmul(weight_types[_i], cols[c], CUDA_MATMUL_MMV);
}
END_TEST

START_TEST(test_matmul_cublas)
{
	check_matmul(weight_types[_i], 5, CUDA_MATMUL_CUBLAS);
}
END_TEST

/* ---- int8 tensor cores (mmq.cu, mma.cuh) ---------------------------------- */

enum mma_fusion { MMA_PLAIN, MMA_ACCUMULATE, MMA_SWIGLU };

/* y = silu(y) * up, the CPU's SwiGLU */
static void swiglu_host(float *y, const float *up, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = y[i] / (1.0f + expf(-y[i])) * up[i];
}

/*
 * y = w . x (or y += it, or SwiGLU of w . x and w2 . x) for cols rows of
 * x on the tensor-core kernel (mode MMA; more than 32 rows), from floats
 * or (x_act) from the module's quantized rows. The result must be the
 * CPU's vec_dot on the same rows (Q8_1, Q8_K) within MMQ_REL and far
 * from the float product (a fallback to cuBLAS fails it), and not the
 * mat-vec kernel's bits (its float order: a fallback to it fails that).
 */
static void check_mma(uint32_t type, int64_t n_in, int64_t n_out, uint32_t cols,
		      enum mma_fusion fusion, bool x_act)
{
	const size_t ld = n_out + 8, ny = n_out * cols;
	uint64_t rb;
	uint8_t *w = rand_matrix(type, n_out, n_in, &rb);
	uint8_t *w2 = fusion == MMA_SWIGLU ?
			      rand_matrix(type, n_out, n_in, &rb) :
			      NULL;
	float *x = malloc(n_in * cols * sizeof(float));
	float *y0 = malloc(ny * sizeof(float));
	float *got = malloc(ny * sizeof(float));
	float *mmv = malloc(ny * sizeof(float));
	float *want = malloc(ny * sizeof(float));
	float *want_f = malloc(ny * sizeof(float));
	float *up = malloc(ny * sizeof(float));
	struct err err = { 0 };
	struct cuda_matmul mm = { 0 };
	double e, e_f;

	rand_floats(x, n_in * cols, 2.0f);
	rand_floats(y0, ny, 4.0f);
	mm.w_type = type;
	mm.w = dev_from(w, rb * n_out);
	mm.w2 = w2 ? dev_from(w2, rb * n_out) : NULL;
	mm.row_bytes = rb;
	mm.n_in = n_in;
	mm.n_out = n_out;
	mm.x = dev_from(x, n_in * cols * sizeof(float));
	mm.x_ld = n_in;
	mm.y = dev_alloc(ld * cols * sizeof(float));
	mm.y_ld = ld;
	mm.rows = cols;
	mm.accumulate = fusion == MMA_ACCUMULATE;
	if (x_act) {
		/* the module's rows, 16-aligned as the backend lays them */
		const uint32_t act = api->act_type(type);
		const uint64_t ab = (api->act_row_bytes(act, n_in) + 15) & ~15u;
		void *xq = dev_alloc(ab * cols);

		ck_assert(api->quantize(dev, act, mm.x, n_in, xq, ab, n_in,
					cols, &err) == 0);
		api->free(dev, (void *)mm.x);
		mm.x = xq;
		mm.x_ld = ab;
		mm.x_act = true;
	}
	for (int pass = 0; pass < 2; pass++) {
		mm.mode = pass ? CUDA_MATMUL_MMA : CUDA_MATMUL_MMV;
		for (uint32_t c = 0; mm.accumulate && c < cols; c++)
			ck_assert(
				api->copy_in(dev, mm.y + c * ld, y0 + c * n_out,
					     n_out * sizeof(float), &err) == 0);
		ck_assert_msg(api->matmul(dev, &mm, &err) == 0, "%s", err.msg);
		for (uint32_t c = 0; c < cols; c++)
			host_from((pass ? got : mmv) + c * n_out, mm.y + c * ld,
				  n_out * sizeof(float));
	}
	cpu_matmul(type, w, rb, n_in, n_out, x, cols, want);
	float_matmul(type, w, rb, n_in, n_out, x, cols, want_f);
	for (size_t i = 0; fusion == MMA_ACCUMULATE && i < ny; i++) {
		want[i] += y0[i];
		want_f[i] += y0[i];
	}
	if (fusion == MMA_SWIGLU) {
		cpu_matmul(type, w2, rb, n_in, n_out, x, cols, up);
		swiglu_host(want, up, ny);
		float_matmul(type, w2, rb, n_in, n_out, x, cols, up);
		swiglu_host(want_f, up, ny);
	}
	e = rel_err(got, want, ny);
	e_f = rel_err(got, want_f, ny);
	ck_assert_msg(
		e <= MMQ_REL && e < e_f / 20,
		"%s %lld x %lld, %u rows, fusion %d%s: error %.3g (> %.3g) from the CPU's, %.3g from the float product (seed %llu)",
		quant_type_name(type), (long long)n_out, (long long)n_in, cols,
		fusion, x_act ? ", quantized rows" : "", e, MMQ_REL, e_f,
		(unsigned long long)seed);
	ck_assert_msg(memcmp(got, mmv, ny * sizeof(float)),
		      "%s: the mat-vec kernel's bits, not the tensor cores'",
		      quant_type_name(type));
	api->free(dev, (void *)mm.w);
	if (mm.w2)
		api->free(dev, (void *)mm.w2);
	api->free(dev, (void *)mm.x);
	api->free(dev, mm.y);
	free(w);
	free(w2);
	free(x);
	free(y0);
	free(got);
	free(mmv);
	free(want);
	free(want_f);
	free(up);
}

/* the first four on every size below, the others on two (seconds each) */
static const uint32_t mma_types[] = {
	IO_TYPE_Q8_0, IO_TYPE_Q4_0, IO_TYPE_Q4_K, IO_TYPE_Q6_K, IO_TYPE_Q5_K,
	IO_TYPE_Q4_1, IO_TYPE_Q5_0, IO_TYPE_Q5_1, IO_TYPE_Q2_K, IO_TYPE_Q3_K,
};
#define N_MMA_TYPES (sizeof(mma_types) / sizeof(mma_types[0]))

/*
 * each type: tiles cut at both edges (rows and columns not multiples of
 * 64), one stage and several, a stage cut short (the 32-element types'
 * K not a multiple of 256), the fusions
 */
START_TEST(test_matmul_mma)
{
	const uint32_t type = mma_types[_i];
	const bool k_quant = type >= IO_TYPE_Q2_K && type <= IO_TYPE_Q6_K;

	check_mma(type, k_quant ? 768 : 544, 130, 70, MMA_PLAIN, false);
	check_mma(type, k_quant ? 512 : 96, 64, 129, MMA_ACCUMULATE, true);
	if (_i >= 4)
		return;
	check_mma(type, 256, 72, 33, MMA_PLAIN, true);
	check_mma(type, 512, 40, 40, MMA_SWIGLU, false);
}
END_TEST

/*
 * The instruction's fragment layout, transcribed here from the PTX ISA
 * (section 9.7.14.5, "Matrix Fragments for mma.m16n8k32", .s8 A and B,
 * .s32 C and D) apart from engine/cuda/mma.cuh's: every lane's registers
 * built from known A, B, C by the ISA's element tables, the D each lane
 * gets checked element by element. On the simulator it checks the
 * emulation; on a card (tools/gpu-check.sh), the hardware against the
 * same tables.
 */
START_TEST(test_mma_fragments)
{
	int (*run)(int, int32_t *);
	int8_t a[16][32], b[32][8];
	int32_t c[16][8], regs[32 * 10] = { 0 };
	void *h = dlopen(engine_cuda_module_path(), RTLD_NOW | RTLD_NOLOAD);

	ck_assert_msg(h, "%s", dlerror());
	*(void **)&run = dlsym(h, "llmfs_cuda_mma_fragments");
	ck_assert_msg(run, "%s", dlerror());
	/* the extremes of int8 among random values */
	for (int i = 0; i < 16 * 32; i++)
		a[i / 32][i % 32] = i == 0 ? -128 :
				    i == 1 ? 127 :
					     (int8_t)(rng_next() >> 56);
	for (int i = 0; i < 32 * 8; i++)
		b[i / 8][i % 8] = i == 0 ? -128 : (int8_t)(rng_next() >> 56);
	for (int i = 0; i < 16 * 8; i++)
		c[i / 8][i % 8] = (int32_t)(rng_next() >> 44) - (1 << 19);
	for (int lane = 0; lane < 32; lane++) {
		const int group = lane >> 2, tig = lane % 4;
		uint32_t *r = (uint32_t *)regs + 10 * lane;

		for (int i = 0; i < 16; i++) { /* a0..a15, 4 to a register */
			const int row = i < 4 || (i >= 8 && i < 12) ? group :
								      group + 8;
			const int col = tig * 4 + (i & 3) + (i >= 8 ? 16 : 0);

			r[i / 4] |= (uint32_t)(uint8_t)a[row][col]
				    << (8 * (i % 4));
		}
		for (int i = 0; i < 8; i++) { /* b0..b7 */
			const int row = tig * 4 + (i & 3) + (i >= 4 ? 16 : 0);

			r[4 + i / 4] |= (uint32_t)(uint8_t)b[row][group]
					<< (8 * (i % 4));
		}
		for (int i = 0; i < 4; i++) /* c0..c3 */
			r[6 + i] = (uint32_t)
				c[i < 2 ? group : group + 8][tig * 2 + (i & 1)];
	}
	ck_assert_int_eq(run(0, regs), 0);
	for (int lane = 0; lane < 32; lane++)
		for (int i = 0; i < 4; i++) {
			const int row = i < 2 ? lane / 4 : lane / 4 + 8;
			const int col = lane % 4 * 2 + (i & 1);
			int32_t want = c[row][col];

			for (int k = 0; k < 32; k++)
				want += (int32_t)a[row][k] * b[k][col];
			ck_assert_msg(regs[10 * lane + 6 + i] == want,
				      "lane %d d%d (D[%d][%d]): %d, want %d",
				      lane, i, row, col,
				      regs[10 * lane + 6 + i], want);
		}
}
END_TEST

/*
 * The mat-vec products are the CPU's bits: for the float types the
 * AVX-512 order of engine/quant/dot.c (quant_traits' vec_dot, the scalar
 * emulation of the CPU backend's SIMD), on lengths with and without the
 * 64-element steps, with tails of every kind (F32: groups of 16 and 8,
 * the last contracted), rows that start unaligned (odd lengths), and
 * activations that round to F16/BF16; for the quantized types the AVX2
 * order of engine/quant/quant_x86.c, or with repacked the order of
 * llama.cpp's repacked gemv (vec_dot_repacked).
 */
static void check_matmul_bits(uint32_t type, int64_t n_in, uint32_t cols,
			      bool repacked)
{
	const int64_t n_out = 37;
	uint32_t vdt = quant_vec_dot_type(type);
	uint64_t rb, ab;
	uint8_t *w = rand_matrix(type, n_out, n_in, &rb), *act;
	float *x = malloc(n_in * cols * sizeof(float));
	float *got = malloc(n_out * cols * sizeof(float));
	float *want = malloc(n_out * cols * sizeof(float));
	struct err err = { 0 };
	struct cuda_matmul mm = { 0 };

	ck_assert(io_type_row_bytes(vdt, n_in, &ab) == 0);
	act = malloc(ab);
	rand_floats(x, n_in * cols, 2.0f);
	mm.w_type = type;
	mm.w = dev_from(w, rb * n_out);
	mm.row_bytes = rb;
	mm.n_in = n_in;
	mm.n_out = n_out;
	mm.x = dev_from(x, n_in * cols * sizeof(float));
	mm.x_ld = n_in;
	mm.y = dev_alloc(n_out * cols * sizeof(float));
	mm.y_ld = n_out;
	mm.rows = cols;
	mm.mode = CUDA_MATMUL_MMV;
	mm.repacked = repacked;
	ck_assert_msg(api->matmul(dev, &mm, &err) == 0, "type %u: %s", type,
		      err.msg);
	host_from(got, mm.y, n_out * cols * sizeof(float));
	for (uint32_t c = 0; c < cols; c++) {
		quant_from_float(vdt, x + c * n_in, act, n_in);
		for (int64_t r = 0; r < n_out; r++)
			want[c * n_out + r] =
				repacked ? quant_traits(type)->vec_dot_repacked(
						   n_in, w + r * rb, act) :
					   quant_traits(type)->vec_dot(
						   n_in, w + r * rb, act);
	}
	for (int64_t i = 0; i < n_out * (int64_t)cols; i++)
		ck_assert_msg(
			!memcmp(&got[i], &want[i], sizeof(float)),
			"%s%s (LLMFS_CUDA_MMV=%s, _COLS=%s) n %lld column %lld "
			"row %lld: %.9g, CPU %.9g (seed %llu)",
			quant_type_name(type), repacked ? " repacked" : "",
			getenv("LLMFS_CUDA_MMV") ? getenv("LLMFS_CUDA_MMV") :
						   "",
			getenv("LLMFS_CUDA_MMV_COLS") ?
				getenv("LLMFS_CUDA_MMV_COLS") :
				"",
			(long long)n_in, (long long)(i / n_out),
			(long long)(i % n_out), got[i], want[i],
			(unsigned long long)seed);
	api->free(dev, (void *)mm.w);
	api->free(dev, (void *)mm.x);
	api->free(dev, mm.y);
	free(w);
	free(act);
	free(x);
	free(got);
	free(want);
}

START_TEST(test_matmul_float_bits)
{
	/* tail only; steps only; steps and tails of 16 + 8 + 7, 9, 1 */
	static const int64_t lens[] = { 32, 33, 256, 64 + 31, 128 + 9, 513 };
	static const uint32_t cols[] = { 1, 3, 8 };

	for (size_t n = 0; n < sizeof(lens) / sizeof(lens[0]); n++)
		for (size_t c = 0; c < sizeof(cols) / sizeof(cols[0]); c++)
			check_matmul_bits(weight_types[_i], lens[n], cols[c],
					  false);
}
END_TEST

/*
 * The quantized types likewise (weight_types[3..]): one to 8 blocks
 * (one block: the CPU's lanes alone; more: their FMAs in block order),
 * in the CPU's own order and, for the types llama.cpp repacks, in its
 * repacked gemv's.
 */
/* every column count of cols, in both orders where the type has two */
static void check_quant_bits_cols(uint32_t type, const uint32_t *cols,
				  size_t n_cols)
{
	const int64_t block = io_type_info(type)->block_elems;
	static const int64_t blocks[] = { 1, 2, 3, 8, 37 };

	for (size_t n = 0; n < sizeof(blocks) / sizeof(blocks[0]); n++)
		for (size_t c = 0; c < n_cols; c++) {
			check_matmul_bits(type, blocks[n] * block, cols[c],
					  false);
			if (quant_traits(type)->vec_dot_repacked)
				check_matmul_bits(type, blocks[n] * block,
						  cols[c], true);
		}
}

/*
 * Both kernels of the CPU's order at every column count (mmv.cu:
 * mmv_xw, LLMFS_CUDA_MMV=warp, a warp a row; mmv_x, =walk; the default
 * takes one or the other by column count); 37 blocks: more than
 * mmv_xw's 32 blocks a round at most, and a partial round after whole
 * ones. Then the default's launches of more than 8 columns with
 * LLMFS_CUDA_MMV_COLS=16 (mmv_x of 16 columns a weight read): 9 to 16
 * columns in one launch, 23 in a full one and a partial one.
 */
START_TEST(test_matmul_quant_bits)
{
	const uint32_t type = weight_types[3 + _i];
	static const uint32_t cols[] = { 1, 2, 3, 8 };
	static const uint32_t wide[] = { 9, 12, 16, 23 };
	static const char *const kernels[] = { "warp", "walk" };
	char *was = env_swap("LLMFS_CUDA_MMV", NULL), *was_cols;

	for (size_t k = 0; k < sizeof(kernels) / sizeof(kernels[0]); k++) {
		setenv("LLMFS_CUDA_MMV", kernels[k], 1);
		check_quant_bits_cols(type, cols,
				      sizeof(cols) / sizeof(cols[0]));
	}
	unsetenv("LLMFS_CUDA_MMV");
	was_cols = env_swap("LLMFS_CUDA_MMV_COLS", "16");
	check_quant_bits_cols(type, wide, sizeof(wide) / sizeof(wide[0]));
	env_restore("LLMFS_CUDA_MMV_COLS", was_cols);
	env_restore("LLMFS_CUDA_MMV", was);
}
END_TEST

/*
 * Experts: rows pick n_slots distinct experts each; up/gate read one x
 * row per token, down one per (token, slot).
 */
static void check_moe(uint32_t type, bool x_per_slot)
{
	const int64_t n_in = 256, n_out = 40;
	const uint32_t n_exp = 6, slots = 2, rows = 11;
	uint64_t rb;
	uint8_t *w = rand_matrix(type, n_out * n_exp, n_in, &rb);
	const uint32_t xrows = x_per_slot ? rows * slots : rows;
	float *x = malloc(n_in * xrows * sizeof(float));
	float *got = malloc(n_out * rows * slots * sizeof(float));
	float *want = malloc(n_out * sizeof(float));
	int32_t ids[11 * 3];
	struct err err = { 0 };
	struct cuda_matmul mm = { 0 };

	rand_floats(x, n_in * xrows, 2.0f);
	for (uint32_t r = 0; r < rows; r++) {
		ids[3 * r] = (int32_t)(rng_next() % n_exp);
		ids[3 * r + 1] = (ids[3 * r] + 1 +
				  (int32_t)(rng_next() % (n_exp - 1))) %
				 (int32_t)n_exp;
		ids[3 * r + 2] = -1; /* ids_ld 3: a column never read */
	}
	mm.w_type = type;
	mm.w = dev_from(w, rb * n_out * n_exp);
	mm.row_bytes = rb;
	mm.expert_bytes = rb * n_out;
	mm.n_in = n_in;
	mm.n_out = n_out;
	mm.x = dev_from(x, n_in * xrows * sizeof(float));
	mm.x_ld = n_in;
	mm.y = dev_alloc(n_out * rows * slots * sizeof(float));
	mm.y_ld = n_out;
	mm.rows = rows;
	mm.ids = dev_from(ids, sizeof(ids));
	mm.ids_ld = 3;
	mm.n_slots = slots;
	mm.n_experts = n_exp;
	mm.x_per_slot = x_per_slot;
	ck_assert_msg(api->matmul(dev, &mm, &err) == 0, "%s", err.msg);
	host_from(got, mm.y, n_out * rows * slots * sizeof(float));
	for (uint32_t r = 0; r < rows; r++) {
		for (uint32_t k = 0; k < slots; k++) {
			const float *xr = x + (x_per_slot ? r * slots + k : r) *
						      n_in;
			double e;

			cpu_matmul(type, w + ids[3 * r + k] * mm.expert_bytes,
				   rb, n_in, n_out, xr, 1, want);
			e = rel_err(got + (r * slots + k) * n_out, want, n_out);
			ck_assert_msg(
				e <= MMV_REL,
				"%s row %u slot %u: error %.3g (seed %llu)",
				quant_type_name(type), r, k, e,
				(unsigned long long)seed);
		}
	}
	api->free(dev, (void *)mm.w);
	api->free(dev, (void *)mm.x);
	api->free(dev, mm.y);
	api->free(dev, (void *)mm.ids);
	free(w);
	free(x);
	free(got);
	free(want);
}

START_TEST(test_matmul_experts)
{
	check_moe(IO_TYPE_Q4_K, false);
	check_moe(IO_TYPE_Q6_K, true);
	check_moe(IO_TYPE_Q8_0, true);
	check_moe(IO_TYPE_F32, false);
}
END_TEST

/* ---- rows ---------------------------------------------------------------- */

START_TEST(test_get_rows)
{
	const uint32_t type = weight_types[_i];
	const int64_t n = 512, n_rows = 20;
	const int32_t ids[4] = { 7, 0, 19, 7 };
	uint64_t rb;
	uint8_t *w = rand_matrix(type, n_rows, n, &rb);
	float got[4 * 512], want[512];
	struct err err = { 0 };
	void *dw = dev_from(w, rb * n_rows), *di = dev_from(ids, sizeof(ids));
	float *dy = dev_alloc(sizeof(got));

	ck_assert_msg(api->get_rows(dev, type, dw, rb, n, di, dy, n, 4, &err) ==
			      0,
		      "%s", err.msg);
	host_from(got, dy, sizeof(got));
	for (int r = 0; r < 4; r++) {
		quant_to_float(type, w + ids[r] * rb, want, n);
		for (int64_t i = 0; i < n; i++)
			ck_assert_msg(got[r * n + i] == want[i],
				      "%s row %d element %lld: %g, CPU %g",
				      quant_type_name(type), r, (long long)i,
				      got[r * n + i], want[i]);
	}
	api->free(dev, dw);
	api->free(dev, di);
	api->free(dev, dy);
	free(w);
}
END_TEST

START_TEST(test_rms_norm)
{
	/* a row per token (n_embd), and per head (qwen3's Q/K norms) */
	static const int64_t widths[] = { 896, 128, 40 };
	const uint32_t rows = 5;

	for (size_t k = 0; k < 3; k++) {
		const int64_t n = widths[k];
		float *x = malloc(n * rows * 4), *w = malloc(n * 4);
		float *got = malloc(n * rows * 4), *want = malloc(n * rows * 4);
		struct err err = { 0 };
		float *dx, *dw, *dy;

		rand_floats(x, n * rows, 4.0f);
		rand_floats(w, n, 1.5f);
		dx = dev_from(x, n * rows * 4);
		dw = dev_from(w, n * 4);
		dy = dev_alloc(n * rows * 4);
		ck_assert(api->rms_norm(dev, dx, n, dw, dy, n, n, rows, 1e-6f,
					&err) == 0);
		host_from(got, dy, n * rows * 4);
		for (uint32_t r = 0; r < rows; r++)
			ops_rms_norm_scalar(want + r * n, x + r * n, w, n,
					    1e-6f);
		ck_assert_msg(rel_err(got, want, n * rows) < 1e-5,
			      "rms_norm of %lld: %g", (long long)n,
			      rel_err(got, want, n * rows));
		/* in place, no weight */
		ck_assert(api->rms_norm(dev, dx, n, NULL, dx, n, n, rows, 1e-5f,
					&err) == 0);
		host_from(got, dx, n * rows * 4);
		for (uint32_t r = 0; r < rows; r++)
			ops_rms_norm_scalar(want + r * n, x + r * n, NULL, n,
					    1e-5f);
		ck_assert(rel_err(got, want, n * rows) < 1e-5);
		api->free(dev, dx);
		api->free(dev, dw);
		api->free(dev, dy);
		free(x);
		free(w);
		free(got);
		free(want);
	}
}
END_TEST

static void check_rope(enum cuda_rope_mode mode, uint32_t head_dim,
		       uint32_t n_rot, bool factors)
{
	const uint32_t n_head = 3, rows = 8;
	/* 8, 15, 17: angles where glibc's sinf/cosf are not correctly rounded */
	const int32_t pos[8] = { 0, 1, 8, 15, 17, 37, 1000, 4095 };
	const size_t n = (size_t)n_head * head_dim;
	float *x = malloc(n * rows * 4), *got = malloc(n * rows * 4);
	float *ff = malloc(n_rot / 2 * 4), *cache = malloc(n_rot * 4);
	struct err err = { 0 };
	float *dx, *dff = NULL;
	int32_t *dp;

	rand_floats(x, n * rows, 2.0f);
	for (uint32_t i = 0; i < n_rot / 2; i++)
		ff[i] = 1.0f + (float)i / 7.0f;
	dx = dev_from(x, n * rows * 4);
	dp = dev_from(pos, sizeof(pos));
	if (factors)
		dff = dev_from(ff, n_rot / 2 * 4);
	ck_assert_msg(api->rope(dev, dx, n, n_head, head_dim, n_rot, mode, dp,
				1000000.0f, 0.5f, dff, rows, &err) == 0,
		      "%s", err.msg);
	host_from(got, dx, n * rows * 4);
	for (uint32_t r = 0; r < rows; r++) {
		ops_rope_cache(cache, pos[r], n_rot, 1000000.0f, 0.5f,
			       factors ? ff : NULL);
		ops_rope_scalar(x + r * n, n_head, head_dim, n_rot,
				mode == CUDA_ROPE_NEOX ? ENGINE_ROPE_NEOX :
							 ENGINE_ROPE_NORM,
				cache);
	}
	/* the CPU's bits: its rope cache's glibc sinf/cosf, its rotation */
	for (size_t i = 0; i < n * rows; i++)
		ck_assert_msg(!memcmp(&got[i], &x[i], sizeof(float)),
			      "rope mode %d row %zu element %zu: %a, CPU %a",
			      mode, i / n, i % n, got[i], x[i]);
	api->free(dev, dx);
	api->free(dev, dp);
	api->free(dev, dff);
	free(x);
	free(got);
	free(ff);
	free(cache);
}

START_TEST(test_rope)
{
	check_rope(CUDA_ROPE_NORM, 64, 64, false);
	check_rope(CUDA_ROPE_NEOX, 128, 128, false);
	/* partial rotation, frequency factors (llama 3's rope_freqs) */
	check_rope(CUDA_ROPE_NEOX, 96, 64, true);
	check_rope(CUDA_ROPE_NORM, 32, 16, true);
}
END_TEST

START_TEST(test_swiglu_add)
{
	const int64_t n = 1000;
	const uint32_t rows = 3;
	float *g = malloc(n * rows * 4), *u = malloc(n * rows * 4);
	float *got = malloc(n * rows * 4), *want = malloc(n * rows * 4);
	struct err err = { 0 };
	float *dg, *du, *dy;

	rand_floats(g, n * rows, 8.0f);
	rand_floats(u, n * rows, 3.0f);
	dg = dev_from(g, n * rows * 4);
	du = dev_from(u, n * rows * 4);
	dy = dev_alloc(n * rows * 4);
	ck_assert(api->swiglu(dev, dy, n, dg, n, du, n, n, rows, &err) == 0);
	host_from(got, dy, n * rows * 4);
	for (uint32_t r = 0; r < rows; r++)
		ops_swiglu_scalar(want + r * n, g + r * n, u + r * n, n);
	ck_assert_msg(rel_err(got, want, n * rows) < 1e-6, "swiglu %g",
		      rel_err(got, want, n * rows));
	/* y += x row by row, then a bias (x_ld 0) */
	ck_assert(api->add(dev, dg, n, du, n, n, rows, &err) == 0);
	ck_assert(api->add(dev, dg, n, du, 0, n, rows, &err) == 0);
	host_from(got, dg, n * rows * 4);
	for (int64_t i = 0; i < n * rows; i++)
		ck_assert_msg(got[i] == (g[i] + u[i]) + u[i % n],
			      "add element %lld", (long long)i);
	api->free(dev, dg);
	api->free(dev, du);
	api->free(dev, dy);
	free(g);
	free(u);
	free(got);
	free(want);
}
END_TEST

/* ---- the KV cache and attention ------------------------------------------ */

/*
 * Attention in double over the cache's rows as stored (dequantized),
 * the query rounded as the kernel rounds it (F16 for an F16 cache).
 */
#define EXACT_REL 2e-5
/* the CPU's order, its scores' sums apart */
#define ORDER_REL 1e-6
/* the CPU's products of a Q8_0 key and query, summed in another order */
#define FAST_Q8_REL 1e-4
static void exact_attention(const struct cuda_kv *kv, const uint8_t *pool,
			    const int32_t *tables, uint32_t max_blocks,
			    uint32_t il, int32_t seq, int32_t pos, uint32_t kvh,
			    const float *q, float scale, float *out)
{
	const uint32_t hd = kv->head_dim;
	double *acc = calloc(hd, sizeof(double)), m = -INFINITY, s = 0;
	float *row = malloc(kv->k_row > kv->v_row ? kv->k_row * 4 :
						    kv->v_row * 4);
	float *qr = malloc(hd * 4);
	uint64_t k_head, v_head;

	ck_assert(io_type_row_bytes(kv->type_k, hd, &k_head) == 0);
	ck_assert(io_type_row_bytes(kv->type_v, hd, &v_head) == 0);
	for (uint32_t d = 0; d < hd; d++)
		qr[d] = kv->type_k == IO_TYPE_F16 ?
				quant_fp16_to_fp32(quant_fp32_to_fp16(q[d])) :
				q[d];
	for (int pass = 0; pass < 2; pass++) {
		for (int32_t p = 0; p <= pos; p++) {
			const uint8_t *blk =
				pool +
				tables[seq * max_blocks + p / CUDA_KV_BLOCK] *
					kv->block_bytes +
				il * CUDA_KV_BLOCK * (kv->k_row + kv->v_row);
			double sc = 0;

			quant_to_float(kv->type_k,
				       blk + (p % CUDA_KV_BLOCK) * kv->k_row +
					       kvh * k_head,
				       row, hd);
			for (uint32_t d = 0; d < hd; d++)
				sc += (double)qr[d] * row[d];
			sc *= scale;
			if (pass == 0) {
				m = fmax(m, sc);
				continue;
			}
			sc = exp(sc - m);
			s += sc;
			quant_to_float(kv->type_v,
				       blk + CUDA_KV_BLOCK * kv->k_row +
					       (p % CUDA_KV_BLOCK) * kv->v_row +
					       kvh * v_head,
				       row, hd);
			for (uint32_t d = 0; d < hd; d++)
				acc[d] += sc * row[d];
		}
	}
	for (uint32_t d = 0; d < hd; d++)
		out[d] = (float)(acc[d] / s);
	free(acc);
	free(row);
	free(qr);
}

/*
 * The CPU's attention of head h (KV head kvh) of a row at position pos
 * over a host copy of the pool (sequence seq, layer il), in its order
 * (engine/cpu/attention.h): chunks of ENGINE_ATT_CHUNK positions walked by
 * att_run a cache block at a time, merged in order; a row of one chunk
 * ends as the CPU's one-chunk task ends it (att_end).
 */
static void cpu_order_head(const struct cuda_kv *kv, const uint8_t *pool,
			   const int32_t *tables, uint32_t max_blocks,
			   uint32_t il, int32_t seq, int32_t pos, uint32_t kvh,
			   const struct att_shape *sh, const float *q,
			   void *scratch, float *out)
{
	const uint32_t dv = kv->head_dim_v;
	float *vkq = malloc(dv * 4), M = -INFINITY, S = 0.0f;
	uint64_t k_head, v_head;
	struct att_state st;

	ck_assert(io_type_row_bytes(kv->type_k, kv->head_dim, &k_head) == 0);
	ck_assert(io_type_row_bytes(kv->type_v, dv, &v_head) == 0);
	memset(out, 0, dv * 4);
	for (int32_t c0 = 0; c0 <= pos; c0 += ENGINE_ATT_CHUNK) {
		const int32_t c1 = c0 + ENGINE_ATT_CHUNK < pos + 1 ?
					   c0 + ENGINE_ATT_CHUNK :
					   pos + 1;

		att_begin(&st, sh, q, scratch);
		for (int32_t p = c0; p < c1;) {
			const uint8_t *blk =
				pool +
				tables[seq * max_blocks + p / CUDA_KV_BLOCK] *
					kv->block_bytes +
				il * CUDA_KV_BLOCK * (kv->k_row + kv->v_row);
			uint32_t off = p % CUDA_KV_BLOCK;
			uint32_t n = CUDA_KV_BLOCK - off;

			if ((int32_t)n > c1 - p)
				n = c1 - p;
			att_run(&st, blk + off * kv->k_row + kvh * k_head,
				kv->k_row,
				blk + CUDA_KV_BLOCK * kv->k_row +
					off * kv->v_row + kvh * v_head,
				kv->v_row, n);
			p += n;
		}
		if (pos + 1 <= ENGINE_ATT_CHUNK) {
			att_end(&st, out);
			break;
		}
		att_vkq(&st, vkq);
		engine_att_merge_step(out, &M, &S, st.M, st.S, vkq, dv);
	}
	if (pos + 1 > ENGINE_ATT_CHUNK)
		att_merge_end(out, S, dv);
	free(vkq);
}

/*
 * Two sequences in a cache of 2 layers, their blocks scattered over the
 * pool; every position stored through kv_store, the bytes compared with
 * the CPU's conversion, then rows attend and are compared with the CPU's
 * attention (engine/attention.h) over the same rows.
 */
static void check_attention(uint32_t type_k, uint32_t type_v, uint32_t head_dim,
			    uint32_t n_head_kv, uint32_t group, double tol)
{
	const uint32_t n_layer = 2, il = 1, len[2] = { 70, 300 };
	const uint32_t n_head = n_head_kv * group, max_blocks = 8;
	const char *ex = getenv("LLMFS_CUDA_ATT_EXACT");
	const int32_t exact_below = ex ? atoi(ex) : 256; /* the module's */
	const uint32_t n_blocks = 2 * max_blocks;
	const size_t nk = (size_t)n_head_kv * head_dim;
	uint64_t k_head, v_head;
	struct cuda_kv kv = { 0 };
	struct err err = { 0 };
	int32_t tables[2 * 8];
	uint8_t *pool;
	float *k, *v;

	ck_assert(io_type_row_bytes(type_k, head_dim, &k_head) == 0);
	ck_assert(io_type_row_bytes(type_v, head_dim, &v_head) == 0);
	kv.k_row = k_head * n_head_kv;
	kv.v_row = v_head * n_head_kv;
	kv.block_bytes = n_layer * CUDA_KV_BLOCK * (kv.k_row + kv.v_row);
	kv.type_k = type_k;
	kv.type_v = type_v;
	kv.n_head_kv = n_head_kv;
	kv.head_dim = kv.head_dim_v = head_dim;
	kv.max_blocks = max_blocks;
	/* block ids in a scrambled order: 15, 8, 1, ... */
	for (uint32_t i = 0; i < 2 * max_blocks; i++)
		tables[i] = (int32_t)((i * 7 + 15) % n_blocks);
	kv.pool = dev_alloc(kv.block_bytes * n_blocks);
	kv.tables = dev_from(tables, sizeof(tables));
	pool = malloc(kv.block_bytes * n_blocks);
	k = malloc(nk * 300 * 4);
	v = malloc(nk * 300 * 4);

	/* store: sequence 0 in one call, sequence 1 in calls of 64 rows */
	for (int sq = 0; sq < 2; sq++) {
		for (uint32_t p0 = 0; p0 < len[sq]; p0 += sq ? 64 : 300) {
			uint32_t n = len[sq] - p0 < (sq ? 64u : 300u) ?
					     len[sq] - p0 :
					     (sq ? 64u : 300u);
			int32_t seq_of[300], pos[300];
			float *dk, *dv;
			int32_t *ds, *dp;

			rand_floats(k, nk * n, 2.0f);
			rand_floats(v, nk * n, 2.0f);
			for (uint32_t i = 0; i < n; i++) {
				seq_of[i] = sq;
				pos[i] = (int32_t)(p0 + i);
			}
			dk = dev_from(k, nk * n * 4);
			dv = dev_from(v, nk * n * 4);
			ds = dev_from(seq_of, n * 4);
			dp = dev_from(pos, n * 4);
			ck_assert_msg(api->kv_store(dev, &kv, il, dk, nk, dv,
						    nk, ds, dp, n, &err) == 0,
				      "%s", err.msg);
			host_from(pool, kv.pool, kv.block_bytes * n_blocks);
			/* each row's bytes are the CPU's conversion */
			for (uint32_t i = 0; i < n; i++) {
				uint32_t p = p0 + i;
				const uint8_t *blk = pool +
						     tables[sq * max_blocks +
							    p / CUDA_KV_BLOCK] *
							     kv.block_bytes +
						     il * CUDA_KV_BLOCK *
							     (kv.k_row +
							      kv.v_row);
				uint8_t want[4096];

				quant_from_float(type_k, k + i * nk, want, nk);
				ck_assert_msg(
					!memcmp(blk + (p % CUDA_KV_BLOCK) *
								kv.k_row,
						want, kv.k_row),
					"K of position %u", p);
				quant_from_float(type_v, v + i * nk, want, nk);
				ck_assert_msg(
					!memcmp(blk + CUDA_KV_BLOCK * kv.k_row +
							(p % CUDA_KV_BLOCK) *
								kv.v_row,
						want, kv.v_row),
					"V of position %u", p);
			}
			api->free(dev, dk);
			api->free(dev, dv);
			api->free(dev, ds);
			api->free(dev, dp);
		}
	}

	/* rows: first and last positions of both, a block's edges */
	const int32_t seq_of[5] = { 0, 1, 1, 1, 0 };
	const int32_t pos[5] = { 69, 0, 63, 299, 64 };
	const uint32_t rows = 5;
	const size_t nq = (size_t)n_head * head_dim;
	float *q = malloc(nq * rows * 4), *got = malloc(nq * rows * 4);
	float *want = malloc(head_dim * 4);
	struct att_shape sh = { type_k, type_v, head_dim, head_dim,
				1.0f / sqrtf((float)head_dim) };
	void *scratch = aligned_alloc(64, (att_scratch_bytes(&sh) + 63) & ~63);
	float *dq, *dout;
	int32_t *ds, *dp;

	rand_floats(q, nq * rows, 1.5f);
	dq = dev_from(q, nq * rows * 4);
	ds = dev_from(seq_of, sizeof(seq_of));
	dp = dev_from(pos, sizeof(pos));
	dout = dev_alloc(nq * rows * 4);
	ck_assert_msg(api->attention(dev, &kv, il, dq, nq, n_head, sh.scale, ds,
				     dp, 512, dout, nq, rows, &err) == 0,
		      "%s", err.msg);
	host_from(got, dout, nq * rows * 4);
	for (uint32_t r = 0; r < rows; r++) {
		for (uint32_t h = 0; h < n_head; h++) {
			const uint32_t kvh = h / group;
			double e;

			cpu_order_head(&kv, pool, tables, max_blocks, il,
				       seq_of[r], pos[r], kvh, &sh,
				       q + r * nq + h * head_dim, scratch,
				       want);
			/*
			 * A row below exact_below follows the CPU's order:
			 * it must be the CPU's (its scores' last bits
			 * apart, and Q8_0 keys meet a Q8_0 query there);
			 * a deeper one sums in F32: the exact sum's.
			 */
			const bool in_order = pos[r] < exact_below;
			/* Q8_0 keys meet a Q8_0 query on either path */
			const bool q8 = type_k == IO_TYPE_Q8_0;
			const double cpu_tol = in_order ? ORDER_REL :
					       q8	? FAST_Q8_REL :
							  tol;
			e = rel_err(got + r * nq + h * head_dim, want,
				    head_dim);
			ck_assert_msg(
				e <= cpu_tol,
				"%s/%s row %u (position %d) head %u: error %.3g > %.3g against the CPU (seed %llu)",
				quant_type_name(type_k),
				quant_type_name(type_v), r, pos[r], h, e,
				cpu_tol, (unsigned long long)seed);
			exact_attention(&kv, pool, tables, max_blocks, il,
					seq_of[r], pos[r], kvh,
					q + r * nq + h * head_dim, sh.scale,
					want);
			e = rel_err(got + r * nq + h * head_dim, want,
				    head_dim);
			ck_assert_msg(
				e <= (in_order || q8 ? tol : EXACT_REL),
				"%s/%s row %u (position %d) head %u: error %.3g against the exact sum (seed %llu)",
				quant_type_name(type_k),
				quant_type_name(type_v), r, pos[r], h, e,
				(unsigned long long)seed);
		}
	}
	api->free(dev, kv.pool);
	api->free(dev, (void *)kv.tables);
	api->free(dev, dq);
	api->free(dev, ds);
	api->free(dev, dp);
	api->free(dev, dout);
	free(pool);
	free(k);
	free(v);
	free(q);
	free(got);
	free(want);
	free(scratch);
}

/*
 * Rows below LLMFS_CUDA_ATT_EXACT (256 by default and in the _order
 * tests) take the CPU's order, V summed in F16 for an F16 cache, Q8_0
 * keys against a Q8_0 query: the CPU's within ORDER_REL, the exact
 * sum's within tol; the others sum in F32 with a float query: the exact
 * sum's within EXACT_REL, the CPU's within tol (its F16 sum drifts about
 * 1e-2 over 300 positions, measured here); except Q8_0 keys, which meet
 * a Q8_0 query there too: the CPU's within FAST_Q8_REL.
 */
static void attention_f16(void)
{
	check_attention(IO_TYPE_F16, IO_TYPE_F16, 128, 2, 4, 2e-2);
	check_attention(IO_TYPE_F16, IO_TYPE_F16, 64, 1, 8, 2e-2);
	check_attention(IO_TYPE_F16, IO_TYPE_F16, 8, 2, 1, 2e-2);
}

static void attention_q8_0(void)
{
	check_attention(IO_TYPE_Q8_0, IO_TYPE_Q8_0, 128, 2, 2, 2e-2);
	check_attention(IO_TYPE_F16, IO_TYPE_Q8_0, 64, 2, 4, 2e-2);
	check_attention(IO_TYPE_F32, IO_TYPE_F32, 32, 2, 2, 1e-5);
}

START_TEST(test_attention_f16)
{
	char *was;

	attention_f16();
	/* BF16 has no CPU-order path: its bits are not the CPU's */
	was = env_swap("LLMFS_CUDA_ATT_EXACT", "0");
	check_attention(IO_TYPE_BF16, IO_TYPE_BF16, 128, 2, 4, 2e-2);
	env_restore("LLMFS_CUDA_ATT_EXACT", was);
}
END_TEST

START_TEST(test_attention_q8_0)
{
	attention_q8_0();
}
END_TEST

/*
 * One sequence of n positions (K, V: n rows of n_head_kv heads of hd
 * floats) in a cache of one layer, its blocks in order; rows of Q
 * (n_head_kv * group heads) at positions pos attend, in a context of
 * n_ctx positions (0: n rounded up to blocks; more: fewer partials a
 * row). Each row's heads must be the CPU's attention over the same
 * positions (cpu_order_head), bit for bit.
 */
static void check_attention_bits(uint32_t type_k, uint32_t type_v, uint32_t hd,
				 uint32_t n_head_kv, uint32_t group, uint32_t n,
				 const float *k, const float *v, const float *q,
				 const int32_t *pos, uint32_t rows,
				 uint32_t n_ctx)
{
	const uint32_t n_head = n_head_kv * group;
	const uint32_t n_blocks = (n + CUDA_KV_BLOCK - 1) / CUDA_KV_BLOCK;
	const size_t nk = (size_t)n_head_kv * hd, nq = (size_t)n_head * hd;
	struct att_shape sh = { type_k, type_v, hd, hd, 1.0f / sqrtf(hd) };
	void *scratch = aligned_alloc(64, (att_scratch_bytes(&sh) + 63) & ~63);
	float *got = malloc(nq * rows * 4), *want = malloc(hd * 4);
	int32_t *tables = malloc(n_blocks * 4), *seq_of = calloc(rows, 4);
	int32_t *all = malloc(n * 4), *zeros = calloc(n, 4);
	uint64_t k_head, v_head;
	struct cuda_kv kv = { 0 };
	struct err err = { 0 };
	uint8_t *pool;
	float *dk, *dv, *dq, *dout;
	int32_t *ds, *dp;

	ck_assert(io_type_row_bytes(type_k, hd, &k_head) == 0);
	ck_assert(io_type_row_bytes(type_v, hd, &v_head) == 0);
	kv.k_row = k_head * n_head_kv;
	kv.v_row = v_head * n_head_kv;
	kv.block_bytes = CUDA_KV_BLOCK * (kv.k_row + kv.v_row);
	kv.type_k = type_k;
	kv.type_v = type_v;
	kv.n_head_kv = n_head_kv;
	kv.head_dim = kv.head_dim_v = hd;
	kv.max_blocks = n_blocks;
	for (uint32_t b = 0; b < n_blocks; b++)
		tables[b] = (int32_t)b;
	for (uint32_t p = 0; p < n; p++)
		all[p] = (int32_t)p;
	kv.pool = dev_alloc(kv.block_bytes * n_blocks);
	kv.tables = dev_from(tables, n_blocks * 4);
	dk = dev_from(k, nk * n * 4);
	dv = dev_from(v, nk * n * 4);
	ds = dev_from(zeros, n * 4);
	dp = dev_from(all, n * 4);
	ck_assert_msg(api->kv_store(dev, &kv, 0, dk, nk, dv, nk, ds, dp, n,
				    &err) == 0,
		      "%s", err.msg);
	api->free(dev, ds);
	api->free(dev, dp);
	pool = malloc(kv.block_bytes * n_blocks);
	host_from(pool, kv.pool, kv.block_bytes * n_blocks);
	dq = dev_from(q, nq * rows * 4);
	ds = dev_from(seq_of, rows * 4);
	dp = dev_from(pos, rows * 4);
	dout = dev_alloc(nq * rows * 4);
	ck_assert_msg(api->attention(dev, &kv, 0, dq, nq, n_head, sh.scale, ds,
				     dp,
				     n_ctx ? n_ctx : n_blocks * CUDA_KV_BLOCK,
				     dout, nq, rows, &err) == 0,
		      "%s", err.msg);
	host_from(got, dout, nq * rows * 4);
	for (uint32_t r = 0; r < rows; r++) {
		for (uint32_t h = 0; h < n_head; h++) {
			const float *g = got + r * nq + h * hd;
			uint32_t d;

			cpu_order_head(&kv, pool, tables, n_blocks, 0, 0,
				       pos[r], h / group, &sh,
				       q + r * nq + h * hd, scratch, want);
			for (d = 0; d < hd && !memcmp(&g[d], &want[d], 4); d++)
				;
			ck_assert_msg(
				d == hd,
				"%s/%s row %u (position %d) head %u element %u: %a, the CPU's %a",
				quant_type_name(type_k),
				quant_type_name(type_v), r, pos[r], h, d,
				d < hd ? g[d] : 0.0f, d < hd ? want[d] : 0.0f);
		}
	}
	api->free(dev, kv.pool);
	api->free(dev, (void *)kv.tables);
	api->free(dev, dk);
	api->free(dev, dv);
	api->free(dev, dq);
	api->free(dev, ds);
	api->free(dev, dp);
	api->free(dev, dout);
	free(pool);
	free(scratch);
	free(got);
	free(want);
	free(tables);
	free(seq_of);
	free(all);
	free(zeros);
}

/*
 * glibc's expf is not correctly rounded: expf(-0x1.9cp-4f) is
 * 0x1.cf0162p-1, one ulp above exp's value (0x1.cf016p-1). Position 0
 * scores 0, position 1 scores x = -0x1.9cp-4 (K 8x, Q a unit vector,
 * scale 1/8), so its weight is expf(x): V rows 0x1.eap-13 and 1 sum to
 * 0x1.cf4p-1 in F16 with libm's weight, 0x1.cfp-1 with the correctly
 * rounded one (a seed of test_attention_f16 met such a case by chance);
 * an F32 cache carries the ulp to the result.
 */
static void attention_expf_case(void)
{
	/* volatile: GCC would fold expf(x) correctly rounded */
	volatile float x = -0x1.9cp-4f;
	const uint32_t hd = 64;
	const int32_t pos = 1;
	float k[2 * 64] = { 0 }, v[2 * 64], q[64] = { 1.0f };
	char *was;

	/* this libm is glibc's, FMA variant: what the module's expf follows */
	ck_assert_msg(
		expf(x) == 0x1.cf0162p-1f,
		"expf(%a) is %a here, not glibc's 0x1.cf0162p-1: the module follows glibc",
		(double)x, expf(x));
	k[hd] = 8 * x;
	for (uint32_t d = 0; d < hd; d++) {
		v[d] = 0x1.eap-13f;
		v[hd + d] = 1.0f;
	}
	/* the CPU's order whatever the environment asks */
	was = env_swap("LLMFS_CUDA_ATT_EXACT", "256");
	check_attention_bits(IO_TYPE_F16, IO_TYPE_F16, hd, 1, 1, 2, k, v, q,
			     &pos, 1, 0);
	check_attention_bits(IO_TYPE_F32, IO_TYPE_F32, hd, 1, 1, 2, k, v, q,
			     &pos, 1, 0);
	env_restore("LLMFS_CUDA_ATT_EXACT", was);
}

START_TEST(test_attention_expf)
{
	attention_expf_case();
}
END_TEST

/*
 * The CPU's order at depth: rows past 256 positions take it too when
 * LLMFS_CUDA_ATT_EXACT asks, cut into the CPU's chunks of 256 (a block
 * a chunk, merged in att_reduce); below 256, the default. A sequence of
 * 4096 positions, 2 KV heads of 4 query heads (the 8B's group), 128
 * dimensions; F16 and Q8_0 caches, and K and V of different types.
 * Then 34 rows in a context of 16384: fewer partials a row than chunks,
 * so one block walks a row's chunks in turn and merges them as it goes.
 * The CPU's own attention is the same at any thread count
 * (test_model's test_forward_attention_threads).
 */
START_TEST(test_attention_depth_bits)
{
	const uint32_t n = 4096, hd = 128, n_head_kv = 2, group = 4;
	const size_t nk = (size_t)n_head_kv * hd, nq = nk * group;
	enum { ROWS = 10, MANY = 34 };
	const int32_t pos[ROWS] = { 0,	 1,   255,  256,  257,
				    511, 512, 1000, 2047, 4095 };
	static const uint32_t types[][2] = { { IO_TYPE_F16, IO_TYPE_F16 },
					     { IO_TYPE_Q8_0, IO_TYPE_Q8_0 },
					     { IO_TYPE_F16, IO_TYPE_Q8_0 } };
	float *k = malloc(nk * n * 4), *v = malloc(nk * n * 4);
	float *q = malloc(nq * MANY * 4);
	int32_t many[MANY];
	char *was;

	rand_floats(k, nk * n, 2.0f);
	rand_floats(v, nk * n, 2.0f);
	rand_floats(q, nq * MANY, 1.5f);
	for (uint32_t i = 0; i < MANY; i++)
		many[i] = i < 4 ? 255 + (int32_t)i :
				  256 + (int32_t)(i * 2654435761u % 800);
	/* the default: rows below 256 in the CPU's order */
	was = env_swap("LLMFS_CUDA_ATT_EXACT", NULL);
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		check_attention_bits(types[t][0], types[t][1], hd, n_head_kv,
				     group, 256, k, v, q, pos, 3, 0);
	setenv("LLMFS_CUDA_ATT_EXACT", "1000000", 1);
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		check_attention_bits(types[t][0], types[t][1], hd, n_head_kv,
				     group, n, k, v, q, pos, ROWS, 0);
	check_attention_bits(IO_TYPE_F16, IO_TYPE_F16, hd, n_head_kv, group, n,
			     k, v, q, many, MANY, 16384);
	check_attention_bits(IO_TYPE_Q8_0, IO_TYPE_F16, hd, n_head_kv, group, n,
			     k, v, q, many, MANY, 16384);
	env_restore("LLMFS_CUDA_ATT_EXACT", was);
	free(k);
	free(v);
	free(q);
}
END_TEST

/*
 * The walk with its rows staged in shared memory (LLMFS_CUDA_ATT_WALK=
 * staged, att_walk_staged) gives the default walk's bits, the CPU's: one
 * sweep of 128 positions and two (a chunk of 256), rows past 256 in
 * chunks (LLMFS_CUDA_ATT_EXACT=1000000); head sizes of whole steps of 64
 * (16-byte reads) and with tails (32, 8); groups of 1 to 8; F16, Q8_0
 * (its 136-byte heads copied 2 bytes at a time where not 16-aligned),
 * F32 and mixed caches; the expf case. Broken on purpose (the
 * maximum before a warp's positions left out, or CUDA's expf in the
 * walk), it fails here.
 */
START_TEST(test_attention_staged_bits)
{
	static const struct {
		uint32_t k, v, hd, n_head_kv, group;
	} shapes[] = {
		{ IO_TYPE_F16, IO_TYPE_F16, 128, 2, 4 },
		{ IO_TYPE_Q8_0, IO_TYPE_Q8_0, 128, 1, 2 },
		{ IO_TYPE_F16, IO_TYPE_Q8_0, 64, 1, 8 },
		{ IO_TYPE_Q8_0, IO_TYPE_F16, 128, 2, 4 },
		{ IO_TYPE_F32, IO_TYPE_F32, 32, 2, 1 },
		{ IO_TYPE_F16, IO_TYPE_F16, 8, 1, 2 },
	};
	enum { ROWS = 12 };
	const uint32_t n = 1024, most = 2 * 128 * n;
	const int32_t pos[ROWS] = { 0,	 1,   31,  32,	127, 128,
				    200, 255, 256, 257, 700, 1023 };
	float *k = malloc(most * 4), *v = malloc(most * 4);
	float *q = malloc(8 * 128 * ROWS * 4);
	char *was_walk = env_swap("LLMFS_CUDA_ATT_WALK", "staged");
	char *was = env_swap("LLMFS_CUDA_ATT_EXACT", "1000000");

	rand_floats(k, most, 2.0f);
	rand_floats(v, most, 2.0f);
	rand_floats(q, 8 * 128 * ROWS, 1.5f);
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		check_attention_bits(shapes[i].k, shapes[i].v, shapes[i].hd,
				     shapes[i].n_head_kv, shapes[i].group, n, k,
				     v, q, pos, ROWS, 0);
	env_restore("LLMFS_CUDA_ATT_EXACT", was);
	attention_expf_case();
	env_restore("LLMFS_CUDA_ATT_WALK", was_walk);
	free(k);
	free(v);
	free(q);
}
END_TEST

/* the module reads LLMFS_CUDA_ATT_EXACT at each call */
START_TEST(test_attention_f16_order)
{
	char *was = env_swap("LLMFS_CUDA_ATT_EXACT", "256");

	attention_f16();
	env_restore("LLMFS_CUDA_ATT_EXACT", was);
}
END_TEST

START_TEST(test_attention_q8_0_order)
{
	char *was = env_swap("LLMFS_CUDA_ATT_EXACT", "256");

	attention_q8_0();
	env_restore("LLMFS_CUDA_ATT_EXACT", was);
}
END_TEST

/* ---- experts ------------------------------------------------------------- */

/* cpu/rows.c's routing: softmax, selection sort, optional norm */
static void cpu_route(float *x, uint32_t n_exp, uint32_t k, bool norm,
		      int32_t *sel, float *w)
{
	double sum = 0.0;

	ops_softmax_scalar(x, n_exp);
	for (uint32_t i = 0; i < k; i++) {
		int32_t best = -1;

		for (uint32_t j = 0; j < n_exp; j++) {
			bool taken = false;

			for (uint32_t t = 0; t < i; t++)
				taken |= sel[t] == (int32_t)j;
			if (!taken && (best < 0 || x[j] > x[best]))
				best = (int32_t)j;
		}
		sel[i] = best;
		w[i] = x[best];
	}
	if (norm) {
		for (uint32_t i = 0; i < k; i++)
			sum += w[i];
		for (uint32_t i = 0; i < k; i++)
			w[i] /= fmaxf((float)sum, 6.103515625e-5f);
	}
}

START_TEST(test_moe_route)
{
	const uint32_t n_exp = 40, k = 4, rows = 7;
	float x[7 * 40], w[7 * 4], want_w[4];
	int32_t sel[7 * 4], want_sel[4];
	struct err err = { 0 };

	for (int norm = 0; norm < 2; norm++) {
		float *dx, *dw;
		int32_t *ds;

		rand_floats(x, rows * n_exp, 4.0f);
		/* exact ties: the lower id first */
		x[3] = x[17] = x[30] = 9.0f;
		dx = dev_from(x, sizeof(x));
		ds = dev_alloc(sizeof(sel));
		dw = dev_alloc(sizeof(w));
		ck_assert_msg(api->moe_route(dev, dx, n_exp, n_exp, k, norm, ds,
					     dw, rows, &err) == 0,
			      "%s", err.msg);
		host_from(sel, ds, sizeof(sel));
		host_from(w, dw, sizeof(w));
		for (uint32_t r = 0; r < rows; r++) {
			cpu_route(x + r * n_exp, n_exp, k, norm, want_sel,
				  want_w);
			for (uint32_t i = 0; i < k; i++) {
				ck_assert_msg(
					sel[r * k + i] == want_sel[i],
					"row %u slot %u: expert %d, CPU %d", r,
					i, sel[r * k + i], want_sel[i]);
				/* the CPU's sums in its order: its bits */
				ck_assert_msg(
					!memcmp(&w[r * k + i], &want_w[i],
						sizeof(float)),
					"row %u slot %u: weight %.9g, CPU %.9g",
					r, i, w[r * k + i], want_w[i]);
			}
		}
		api->free(dev, dx);
		api->free(dev, ds);
		api->free(dev, dw);
	}
}
END_TEST

START_TEST(test_moe_combine)
{
	const uint32_t k = 3, rows = 4;
	const int64_t n = 300;
	float *eo = malloc(n * k * rows * 4), w[12],
	      *got = malloc(n * rows * 4);
	struct err err = { 0 };
	float *deo, *dw, *dout;

	rand_floats(eo, n * k * rows, 3.0f);
	rand_floats(w, 12, 1.0f);
	deo = dev_from(eo, n * k * rows * 4);
	dw = dev_from(w, sizeof(w));
	dout = dev_alloc(n * rows * 4);
	ck_assert(api->moe_combine(dev, dout, n, deo, n, dw, k, n, rows,
				   &err) == 0);
	host_from(got, dout, n * rows * 4);
	for (uint32_t r = 0; r < rows; r++) {
		for (int64_t c = 0; c < n; c++) {
			float acc = 0.0f;

			for (uint32_t i = 0; i < k; i++) {
				float v = eo[(r * k + i) * n + c] *
					  w[r * k + i];

				acc = i == 0 ? v : acc + v;
			}
			ck_assert(got[r * n + c] == acc);
		}
	}
	api->free(dev, deo);
	api->free(dev, dw);
	api->free(dev, dout);
	free(eo);
	free(got);
}
END_TEST

/* ---- setup --------------------------------------------------------------- */

static int cuda_setup(void)
{
	const char *s = getenv("LLMFS_TEST_SEED");
	int rc = cuda_setup_module(&api);

	if (rc)
		return rc;
	seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
	printf("module %s (%s), seed %llu\n", engine_cuda_module_path(),
	       api->how, (unsigned long long)seed);
	return 0;
}

/* each test: the device opened in its own process, its own draws */
static void cuda_test_open(void)
{
	struct err err = { 0 };

	rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
	ck_assert_msg(api->open(&dev, 0, &err) == 0, "%s", err.msg);
}

static void cuda_test_close(void)
{
	api->close(dev);
	dev = NULL;
}

/*
 * LLMFS_CUDA_TESTS=WORD,WORD: only the tests whose names hold one of
 * them (tools/gpu-check.sh runs the slow sanitizers on a few).
 */
static bool cuda_wanted(const char *name)
{
	const char *want = getenv("LLMFS_CUDA_TESTS");
	char buf[256], *w, *save = NULL;

	if (!want || !*want)
		return true;
	snprintf(buf, sizeof(buf), "%s", want);
	for (w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save))
		if (strstr(name, w))
			return true;
	return false;
}

#define CUDA_ADD(tc, t) \
	do { \
		if (cuda_wanted(#t)) \
			tcase_add_test(tc, t); \
	} while (0)
#define CUDA_ADD_LOOP(tc, t, n) \
	do { \
		if (cuda_wanted(#t)) \
			tcase_add_loop_test(tc, t, 0, n); \
	} while (0)

static void cuda_add_tests(TCase *tc)
{
	tcase_add_checked_fixture(tc, cuda_test_open, cuda_test_close);
	CUDA_ADD(tc, test_quantize_q8_1);
	CUDA_ADD(tc, test_quantize_q8_K);
	CUDA_ADD_LOOP(tc, test_matmul_mmv, N_WEIGHT_TYPES);
	CUDA_ADD_LOOP(tc, test_matmul_cublas, N_WEIGHT_TYPES);
	CUDA_ADD_LOOP(tc, test_matmul_mma, N_MMA_TYPES);
	CUDA_ADD(tc, test_mma_fragments);
	/* F32, F16, BF16: the first three weight types */
	CUDA_ADD_LOOP(tc, test_matmul_float_bits, 3);
	CUDA_ADD_LOOP(tc, test_matmul_quant_bits, N_WEIGHT_TYPES - 3);
	CUDA_ADD(tc, test_matmul_experts);
	CUDA_ADD_LOOP(tc, test_get_rows, N_WEIGHT_TYPES);
	CUDA_ADD(tc, test_rms_norm);
	CUDA_ADD(tc, test_rope);
	CUDA_ADD(tc, test_swiglu_add);
	CUDA_ADD(tc, test_attention_f16);
	CUDA_ADD(tc, test_attention_q8_0);
	CUDA_ADD(tc, test_attention_f16_order);
	CUDA_ADD(tc, test_attention_q8_0_order);
	CUDA_ADD(tc, test_attention_expf);
	CUDA_ADD(tc, test_attention_depth_bits);
	CUDA_ADD(tc, test_attention_staged_bits);
	CUDA_ADD(tc, test_moe_route);
	CUDA_ADD(tc, test_moe_combine);
}

const struct check_main check_main = {
	.name = "cuda",
	.timeout = 300,
	.setup = cuda_setup,
	.add_tests = cuda_add_tests,
};
