// SPDX-License-Identifier: MIT
/*
 * The rows-in-lanes GEMM kernels (engine/cpu/gemm.h) of every type that
 * has them, at every level of engine/cpu/isa.h this CPU has (the scalar
 * level's included: they define the order), against a scalar C model of the order
 * gemm.h fixes: per (row, token) each block's integer sum, exact, then
 * acc = fma((float)s, dw * da, acc) over the blocks. Bit for bit, for
 * weights from the real quantizers and of raw random bytes (any quants,
 * scales and mins a file may hold), random activations, every panel
 * height 1..16, tile of tokens 1..17 and 512, one block to twelve (3072
 * elements of a K-quant), a panel's rows written at an offset and
 * nothing else of y touched. Kernels that claim exact also equal
 * dot_row(..., repacked).
 *
 * A level this CPU lacks is left out, and the run says so (exit 77).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/cpu/cpu.h"
#include "../../engine/cpu/dot.h"
#include "../../engine/cpu/gemm.h"
#include "../../engine/cpu/isa.h"
#include "../../engine/quant/quant.h"
#include "../../engine/quant/quant_internal.h"
#include "../common/check_main.h"

/* the float rounding of the model must be the C source's, unfused */
#ifdef __clang__
#pragma clang fp contract(off)
#endif

#define GEMM_MAX_TOK 512
#define GEMM_ROW0 5 /* the panel's rows land at y[t][5..] */
#define GEMM_SENTINEL 12345.5f

/*
 * The model of one (row, token): blocks of the type, each block's exact
 * integer sum s and its scales dw (the weight's) and da (the token's).
 */
typedef void (*gemm_block_fn)(const void *w, const void *a, int64_t i,
			      int64_t *s, float *dw, float *da);

static void gemm_block_q8_0(const void *w, const void *a, int64_t i, int64_t *s,
			    float *dw, float *da)
{
	const struct block_q8_0 *bw = (const struct block_q8_0 *)w + i;
	const struct block_q8_0 *ba = (const struct block_q8_0 *)a + i;
	int k;

	*s = 0;
	for (k = 0; k < QK8_0; k++)
		*s += bw->qs[k] * ba->qs[k];
	*dw = quant_fp16_to_fp32(bw->d);
	*da = quant_fp16_to_fp32(ba->d);
}

/*
 * Q6_K: s = sum over the sixteen groups of scale * sum(q - 32) a. The
 * block dequantized with d = 1 gives scale * (q - 32) exactly (small
 * integers), so the model reads them from the type's own to_float.
 */
static void gemm_block_q6_K(const void *w, const void *a, int64_t i, int64_t *s,
			    float *dw, float *da)
{
	struct block_q6_K b = ((const struct block_q6_K *)w)[i];
	const struct block_q8_K *ba = (const struct block_q8_K *)a + i;
	float v[QK_K];
	int k;

	b.d = quant_fp32_to_fp16(1.0f);
	quant_to_float(IO_TYPE_Q6_K, &b, v, QK_K);
	*s = 0;
	for (k = 0; k < QK_K; k++)
		*s += (int64_t)v[k] * ba->qs[k];
	*dw = quant_fp16_to_fp32(((const struct block_q6_K *)w)[i].d);
	*da = ba->d;
}

/* The non-exact types' models; an exact type is held to dot_row too. */
static const struct {
	uint32_t type;
	gemm_block_fn block;
} gemm_models[] = {
	{ IO_TYPE_Q8_0, gemm_block_q8_0 },
	{ IO_TYPE_Q6_K, gemm_block_q6_K },
};

static gemm_block_fn gemm_model_of(uint32_t type)
{
	size_t i;

	for (i = 0; i < sizeof(gemm_models) / sizeof(gemm_models[0]); i++)
		if (gemm_models[i].type == type)
			return gemm_models[i].block;
	return NULL;
}

static float gemm_model(gemm_block_fn block, int64_t nb, const void *w,
			const void *a)
{
	float acc = 0.0f;
	int64_t i, s;
	float dw, da;

	for (i = 0; i < nb; i++) {
		block(w, a, i, &s, &dw, &da);
		acc = fmaf((float)s, dw * da, acc);
	}
	return acc;
}

static float gemm_rand(unsigned *seed)
{
	return (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f;
}

/* rows rows of n elements of type, from random floats (some rows large) */
static uint8_t *gemm_rows(uint32_t type, int64_t n, int rows, unsigned *seed,
			  bool ref)
{
	size_t rb = (size_t)(n / quant_blck_size(type)) * quant_type_size(type);
	uint8_t *out = malloc(rb * (size_t)rows);
	float *x = malloc(sizeof(float) * (size_t)n);
	int r;
	int64_t i;

	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_nonnull(x);
	for (r = 0; r < rows; r++) {
		float scale = r % 3 == 2 ? 40.0f : 1.0f;

		for (i = 0; i < n; i++)
			x[i] = gemm_rand(seed) * scale;
		if (ref)
			quant_from_float_ref(type, x, out + rb * r, n);
		else
			quant_from_float(type, x, out + rb * r, n);
	}
	free(x);
	return out;
}

/*
 * rows rows of n elements of type from raw random bytes, each block
 * drawn again until it dequantizes to finite floats (a random half is
 * an infinity or a NaN one time in 32)
 */
static uint8_t *gemm_rows_raw(uint32_t type, int64_t n, int rows,
			      unsigned *seed)
{
	const int64_t nb = n / quant_blck_size(type) * rows;
	uint8_t *out = malloc((size_t)nb * quant_type_size(type));
	float *x = malloc(sizeof(float) * quant_blck_size(type));
	int64_t b;
	uint32_t i;

	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_nonnull(x);
	for (b = 0; b < nb; b++) {
		uint8_t *blk = out + (size_t)b * quant_type_size(type);
		bool finite;

		do {
			for (i = 0; i < quant_type_size(type); i++)
				blk[i] = (uint8_t)rand_r(seed);
			quant_to_float(type, blk, x, quant_blck_size(type));
			for (finite = true, i = 0; i < quant_blck_size(type);
			     i++)
				finite = finite && isfinite(x[i]);
		} while (!finite);
	}
	free(x);
	return out;
}

static size_t gemm_row_bytes(uint32_t type, int64_t n)
{

	return (size_t)(n / quant_blck_size(type)) * quant_type_size(type);
}

/*
 * One shape: nr rows against nt tokens, every (row, token) compared, and
 * y's other cells (rows past the panel's, before row0) unchanged.
 */
static void gemm_check(uint32_t type, const struct cpu_gemm_kernels *k,
		       int64_t n, int nr, int nt, const uint8_t *w,
		       const uint8_t *a, const uint8_t *packed, void *panel,
		       float **y)
{
	const uint32_t at = quant_vec_dot_type(type);
	const size_t rb = gemm_row_bytes(type, n), arb = gemm_row_bytes(at, n);
	const int64_t nb = n / quant_blck_size(type);
	const gemm_block_fn model = gemm_model_of(type);
	const int ny = GEMM_ROW0 + CPU_GEMM_ROWS + 3;
	int r, t;

	for (t = 0; t < nt; t++)
		for (r = 0; r < ny; r++)
			y[t][r] = GEMM_SENTINEL;
	k->panel(n, w, rb, nr, panel);
	/* its prefetch of what comes next (here its own rows) changes nothing */
	k->run(n, panel, nr, packed, nt, y, GEMM_ROW0, w, rb * (size_t)nr);
	for (t = 0; t < nt; t++) {
		for (r = 0; r < ny; r++) {
			const bool in = r >= GEMM_ROW0 && r < GEMM_ROW0 + nr;
			const uint8_t *wr = w + rb * (r - GEMM_ROW0);
			const uint8_t *ar = a + arb * t;
			float want;

			if (!in) {
				ck_assert_msg(
					y[t][r] == GEMM_SENTINEL,
					"%s n %lld nr %d nt %d: y[%d][%d] written",
					quant_type_name(type), (long long)n, nr,
					nt, t, r);
				continue;
			}
			if (model) {
				want = gemm_model(model, nb, wr, ar);
				ck_assert_msg(
					!memcmp(&want, &y[t][r], 4),
					"%s n %lld nr %d nt %d: row %d token %d: %.9g, model %.9g",
					quant_type_name(type), (long long)n, nr,
					nt, r - GEMM_ROW0, t, y[t][r], want);
			}
			if (k->exact) {
				want = dot_row(type, n, wr, ar, true);
				ck_assert_msg(
					!memcmp(&want, &y[t][r], 4),
					"%s n %lld nr %d nt %d: row %d token %d: %.9g, dot_row %.9g",
					quant_type_name(type), (long long)n, nr,
					nt, r - GEMM_ROW0, t, y[t][r], want);
			}
		}
	}
}

/* Run level l; false where this CPU lacks it. */
static bool gemm_use(int l)
{
	const struct cpu_isa *isa = cpu_isa_levels[l];

	if (!isa->usable()) {
		printf("%s: not on this CPU, left out\n", isa->name);
		return false;
	}
	cpu_isa_use(isa);
	return true;
}

/* Every type with kernels: each must have a model, or be exact. */
START_TEST(test_gemm_types)
{
	unsigned seed = 20261124;
	uint32_t type, tested = 0;

	if (!gemm_use(_i))
		return;
	for (type = 0; type < IO_TYPE_COUNT; type++) {
		const struct quant_type_traits *tr = quant_traits(type);
		const struct cpu_gemm_kernels *k = cpu_isa()->type[type].gemm;
		const uint32_t at = tr->vec_dot_type;
		const int64_t blocks[] = { 1, 3, 8, 12, -12 }; /* < 0: raw */
		size_t bi;

		if (!k || !k->run)
			continue;
		ck_assert_msg(
			gemm_model_of(type) || k->exact,
			"%s has GEMM kernels but test_gemm no model of them",
			quant_type_name(type));
		for (bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
			const bool raw = blocks[bi] < 0;
			const int64_t n = (raw ? -blocks[bi] : blocks[bi]) *
					  quant_blck_size(type);
			uint8_t *w = raw ? gemm_rows_raw(type, n, CPU_GEMM_ROWS,
							 &seed) :
					   gemm_rows(type, n, CPU_GEMM_ROWS,
						     &seed, true);
			uint8_t *a = gemm_rows(at, n, GEMM_MAX_TOK, &seed,
					       false);
			uint8_t *packed = aligned_alloc(
				64, k->act_bytes(n) * GEMM_MAX_TOK);
			void *panel = aligned_alloc(64, k->panel_bytes(n));
			float *y[GEMM_MAX_TOK];
			int nr, nt;

			ck_assert_ptr_nonnull(packed);
			ck_assert_ptr_nonnull(panel);
			ck_assert_uint_eq(k->act_bytes(n) % 64, 0);
			for (nt = 0; nt < GEMM_MAX_TOK; nt++) {
				k->act_pack(n, a + gemm_row_bytes(at, n) * nt,
					    packed + k->act_bytes(n) * nt);
				y[nt] = malloc(sizeof(float) *
					       (GEMM_ROW0 + CPU_GEMM_ROWS + 3));
				ck_assert_ptr_nonnull(y[nt]);
			}
			for (nr = 1; nr <= CPU_GEMM_ROWS; nr++)
				for (nt = 1; nt <= 17; nt++)
					gemm_check(type, k, n, nr, nt, w, a,
						   packed, panel, y);
			gemm_check(type, k, n, CPU_GEMM_ROWS, GEMM_MAX_TOK, w,
				   a, packed, panel, y);
			gemm_check(type, k, n, 7, GEMM_MAX_TOK, w, a, packed,
				   panel, y);
			for (nt = 0; nt < GEMM_MAX_TOK; nt++)
				free(y[nt]);
			free(w);
			free(a);
			free(packed);
			free(panel);
		}
		tested++;
	}
	ck_assert_msg(tested > 0, "no type has GEMM kernels");
	printf("gemm %s: %u types' kernels equal their models\n",
	       cpu_isa()->name, tested);
}
END_TEST

/*
 * Activations at the int8 extremes (-128 included, where the level takes
 * it: isa.h) and weights at -128.
 */
START_TEST(test_gemm_extremes)
{
	const struct cpu_gemm_kernels *k;
	const int64_t n = 64;
	struct block_q8_0 w[CPU_GEMM_ROWS][2], a[3][2];
	uint8_t *packed;
	void *panel;
	float *y[3];
	int r, t, i, j, lowest;

	if (!gemm_use(_i))
		return;
	k = cpu_isa()->type[IO_TYPE_Q8_0].gemm;
	lowest = cpu_isa()->act_127 ? -127 : -128;
	packed = aligned_alloc(64, k->act_bytes(n) * 3);
	panel = aligned_alloc(64, k->panel_bytes(n));
	ck_assert_ptr_nonnull(packed);
	ck_assert_ptr_nonnull(panel);
	for (r = 0; r < CPU_GEMM_ROWS; r++)
		for (i = 0; i < 2; i++) {
			w[r][i].d = quant_fp32_to_fp16(0.5f + r);
			for (j = 0; j < QK8_0; j++)
				w[r][i].qs[j] = (int8_t)(r & 1 ? -128 :
								 127 - j - r);
		}
	for (t = 0; t < 3; t++) {
		for (i = 0; i < 2; i++) {
			a[t][i].d = quant_fp32_to_fp16(0.25f * (t + 1));
			for (j = 0; j < QK8_0; j++)
				a[t][i].qs[j] = (int8_t)(t == 0 ? lowest :
							 t == 1 ? 127 :
								  j * 7 - 100);
		}
		k->act_pack(n, a[t], packed + k->act_bytes(n) * t);
		y[t] = malloc(sizeof(float) * (GEMM_ROW0 + CPU_GEMM_ROWS + 3));
		ck_assert_ptr_nonnull(y[t]);
	}
	gemm_check(IO_TYPE_Q8_0, k, n, CPU_GEMM_ROWS, 3, (const uint8_t *)w,
		   (const uint8_t *)a, packed, panel, y);
	for (t = 0; t < 3; t++)
		free(y[t]);
	free(packed);
	free(panel);
}
END_TEST

static void gemm_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_gemm_types, 0, (int)cpu_isa_count);
	tcase_add_loop_test(tc, test_gemm_extremes, 0, (int)cpu_isa_count);
}

/* A level this CPU lacks was not compared: not a whole pass. */
static int gemm_left_out(void)
{
	unsigned i;
	int missing = 0;

	for (i = 0; i < cpu_isa_count; i++)
		if (!cpu_isa_levels[i]->usable()) {
			printf("test_gemm: this CPU lacks %s: the %s kernels were not compared\n",
			       cpu_isa_levels[i]->features,
			       cpu_isa_levels[i]->name);
			missing++;
		}
	return missing ? CHECK_SKIP : 0;
}

const struct check_main check_main = {
	.name = "gemm",
	.timeout = 300,
	.add_tests = gemm_tests,
	.left_out = gemm_left_out,
};
