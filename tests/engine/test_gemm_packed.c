// SPDX-License-Identifier: MIT
/*
 * Matrices held packed (engine/cpu/gemm.h, struct cpu_gemm_packed): Q8_0,
 * Q4_K and Q6_K, at every level of engine/cpu/isa.h this CPU has.
 *
 *   layout: pack puts each dword (and each d) where gemm.h's layout says,
 *   with rows further apart than one row; unpack_row gives every row's
 *   bytes back.
 *   run: bit for bit the level's own per-step panel and run on the rows
 *   as the file holds them, and the scalar level's packed run (the
 *   order's definition).
 *   run_exact: bit for bit dot_row (the one-token path: the plain order,
 *   or the repacked gemv's for Q4_K).
 *
 * Weights from the real quantizers and of raw random bytes (any quants,
 * scales and signs), activations from the quantizers and at the int8
 * extremes, 1 to 12 blocks, 1 to 17 tokens (every tile and tail), a
 * panel only 32-byte aligned as GGUF places tensors (and ending where
 * its allocation does, for ASan), y written only at the panel's 16 rows.
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

#define PQ_ROWS CPU_GEMM_ROWS
#define PQ_MAX_TOK 17
#define PQ_ROW0 5 /* the panel's rows land at y[t][5..] */
#define PQ_NY (PQ_ROW0 + PQ_ROWS + 3)
#define PQ_SENTINEL 12345.5f

static const uint32_t pq_types[] = { IO_TYPE_Q8_0, IO_TYPE_Q4_K, IO_TYPE_Q6_K };
#define PQ_TYPES ((int)(sizeof(pq_types) / sizeof(pq_types[0])))
static const int pq_nts[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 17 };

/* the scalar level's kernels of type: what every level must equal */
static const struct cpu_gemm_kernels *pq_scalar(uint32_t type)
{
	return cpu_isa_named("scalar")->type[type].gemm;
}

static size_t pq_row_bytes(uint32_t type, int64_t n)
{
	const struct io_type_info *t = io_type_info(type);

	return (size_t)(n / t->block_elems) * t->block_bytes;
}

static float pq_rand(unsigned *seed)
{
	return (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f;
}

/* rows rows of n elements of type from random floats (every third large) */
static uint8_t *pq_quantized(uint32_t type, int64_t n, int rows, unsigned *seed)
{
	const size_t rb = pq_row_bytes(type, n);
	uint8_t *out = malloc(rb * (size_t)rows);
	float *x = malloc(sizeof(float) * (size_t)n);
	int64_t i;
	int r;

	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_nonnull(x);
	for (r = 0; r < rows; r++) {
		const float scale = r % 3 == 2 ? 40.0f : 1.0f;

		for (i = 0; i < n; i++)
			x[i] = pq_rand(seed) * scale;
		if (quant_traits(type)->weight)
			quant_from_float_ref(type, x, out + rb * r, n);
		else
			quant_from_float(type, x, out + rb * r, n);
	}
	free(x);
	return out;
}

/*
 * rows rows of raw random blocks of type, each block drawn again until
 * it dequantizes to finite floats (a random half is an infinity or a NaN
 * one time in 32)
 */
static uint8_t *pq_raw(uint32_t type, int64_t n, int rows, unsigned *seed)
{
	const struct io_type_info *t = io_type_info(type);
	const int64_t nb = n / t->block_elems * rows;
	uint8_t *out = malloc((size_t)nb * t->block_bytes);
	float *x = malloc(sizeof(float) * t->block_elems);
	int64_t b;
	uint32_t i;
	bool finite;

	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_nonnull(x);
	for (b = 0; b < nb; b++) {
		uint8_t *blk = out + (size_t)b * t->block_bytes;

		do {
			for (i = 0; i < t->block_bytes; i++)
				blk[i] = (uint8_t)rand_r(seed);
			quant_to_float(type, blk, x, t->block_elems);
			for (finite = true, i = 0; i < t->block_elems; i++)
				finite = finite && isfinite(x[i]);
		} while (!finite);
	}
	free(x);
	return out;
}

/* A panel for 16 rows, only 32-byte aligned, ending where its block does. */
static uint8_t *pq_panel(uint32_t type, int64_t n, void **base)
{
	const size_t bytes = pq_row_bytes(type, n) * PQ_ROWS;
	const size_t size = cpu_align64(bytes + 32);

	*base = aligned_alloc(64, size);
	ck_assert_ptr_nonnull(*base);
	return (uint8_t *)*base + size - bytes;
}

/* block byte of unit u's dword, and where a block's d is in the panel */
static size_t pq_unit_src(uint32_t type, int u)
{
	if (type == IO_TYPE_Q8_0)
		return 2 + 4 * (size_t)u;
	if (type == IO_TYPE_Q4_K)
		return u < 32 ? 16 + 4 * (size_t)u : 4 * (size_t)(u - 32);
	return 4 * (size_t)u;
}

START_TEST(test_packed_layout)
{
	const uint32_t type = pq_types[_i];
	const struct cpu_gemm_packed *k = pq_scalar(type)->packed;
	const struct io_type_info *t = io_type_info(type);
	const int units = type == IO_TYPE_Q8_0 ? 8 :
			  type == IO_TYPE_Q4_K ? 36 :
						 52;
	const bool d_after = type != IO_TYPE_Q4_K;
	unsigned seed = 20261207 + _i;
	int64_t blocks;

	for (blocks = 1; blocks <= 12; blocks += 5) {
		const int64_t n = blocks * t->block_elems;
		const size_t rb = pq_row_bytes(type, n);
		/* rows further apart than one row: row_bytes is honoured */
		const size_t stride = rb + 3 * t->block_bytes;
		uint8_t *w = pq_raw(type, n + 3 * t->block_elems, PQ_ROWS,
				    &seed);
		uint8_t *row = malloc(rb), *panel;
		const size_t sb = (size_t)units * 64;
		void *base;
		int64_t ib;
		int r, u;

		ck_assert_ptr_nonnull(row);
		panel = pq_panel(type, n, &base);
		k->pack(n, w, stride, panel);
		for (ib = 0; ib < blocks; ib++)
			for (r = 0; r < PQ_ROWS; r++) {
				const uint8_t *b = w + stride * r +
						   t->block_bytes * ib;

				for (u = 0; u < units; u++)
					ck_assert(!memcmp(
						panel + sb * ib + 64 * u +
							4 * r,
						b + pq_unit_src(type, u), 4));
				if (d_after)
					ck_assert(!memcmp(
						panel + sb * blocks + 32 * ib +
							2 * r,
						b + (type == IO_TYPE_Q8_0 ?
							     0 :
							     208),
						2));
			}
		for (r = 0; r < PQ_ROWS; r++) {
			memset(row, 0xa5, rb);
			k->unpack_row(n, panel, r, row);
			ck_assert_msg(!memcmp(row, w + stride * r, rb),
				      "%s n %lld: row %d not given back",
				      t->name, (long long)n, r);
		}
		free(w);
		free(row);
		free(base);
	}
}
END_TEST

static void pq_fill(float **y, int nt)
{
	int t, r;

	for (t = 0; t < nt; t++)
		for (r = 0; r < PQ_NY; r++)
			y[t][r] = PQ_SENTINEL;
}

/* y[t][PQ_ROW0 + r] for every t < nt, r < 16, equal to want's */
static void pq_same(float **y, float **want, int nt, const char *what,
		    const char *vs, int64_t n)
{
	int t, r;

	for (t = 0; t < nt; t++)
		for (r = 0; r < PQ_NY; r++) {
			if (r < PQ_ROW0 || r >= PQ_ROW0 + PQ_ROWS) {
				ck_assert_msg(y[t][r] == PQ_SENTINEL,
					      "%s nt %d: y[%d][%d] written",
					      what, nt, t, r);
				continue;
			}
			ck_assert_msg(
				!memcmp(&y[t][r], &want[t][r], 4),
				"%s n %lld nt %d: row %d token %d: %a, %s %a",
				what, (long long)n, nt, r - PQ_ROW0, t, y[t][r],
				vs, want[t][r]);
		}
}

/*
 * 16 rows w (the file's layout) against the tokens a (the vec_dot type's
 * rows): run against the level's per-step panel and run and against the
 * scalar level's packed run; run_exact against dot_row.
 */
static void pq_check(uint32_t type, int64_t n, const uint8_t *w,
		     const uint8_t *a, const char *what)
{
	const struct cpu_gemm_kernels *k = cpu_isa()->type[type].gemm;
	const struct cpu_gemm_kernels *ks = pq_scalar(type);
	const uint32_t at = quant_vec_dot_type(type);
	const size_t rb = pq_row_bytes(type, n), arb = pq_row_bytes(at, n);
	const size_t ab = k->act_bytes(n), abs_ = ks->act_bytes(n);
	uint8_t *acts = aligned_alloc(64, ab * PQ_MAX_TOK);
	uint8_t *acts_s = aligned_alloc(64, abs_ * PQ_MAX_TOK);
	void *ref_panel = aligned_alloc(64, cpu_align64(k->panel_bytes(n)));
	float *y[PQ_MAX_TOK], *want[PQ_MAX_TOK];
	char msg[96];
	void *base;
	uint8_t *panel = pq_panel(type, n, &base);
	size_t i;
	int t, r;

	ck_assert(acts && acts_s && ref_panel);
	snprintf(msg, sizeof(msg), "%s %s %s", cpu_isa()->name,
		 quant_type_name(type), what);
	for (t = 0; t < PQ_MAX_TOK; t++) {
		k->act_pack(n, a + arb * t, acts + ab * t);
		ks->act_pack(n, a + arb * t, acts_s + abs_ * t);
		y[t] = malloc(sizeof(float) * PQ_NY);
		want[t] = malloc(sizeof(float) * PQ_NY);
		ck_assert(y[t] && want[t]);
	}
	k->packed->pack(n, w, rb, panel);
	k->panel(n, w, rb, PQ_ROWS, ref_panel);
	for (i = 0; i < sizeof(pq_nts) / sizeof(pq_nts[0]); i++) {
		const int nt = pq_nts[i];

		pq_fill(want, nt);
		k->run(n, ref_panel, PQ_ROWS, acts, nt, want, PQ_ROW0, NULL, 0);
		pq_fill(y, nt);
		/* the prefetch of what comes next (here the panel) changes nothing */
		k->packed->run(n, panel, acts, nt, y, PQ_ROW0, panel,
			       rb * PQ_ROWS);
		pq_same(y, want, nt, msg, "panel", n);
		pq_fill(want, nt);
		ks->packed->run(n, panel, acts_s, nt, want, PQ_ROW0, NULL, 0);
		pq_same(y, want, nt, msg, "scalar", n);

		pq_fill(y, nt);
		k->packed->run_exact(n, panel, acts, nt, y, PQ_ROW0,
				     nt % 2 ? NULL : panel,
				     nt % 2 ? 0 : rb * PQ_ROWS);
		pq_fill(want, nt);
		for (t = 0; t < nt; t++)
			for (r = 0; r < PQ_ROWS; r++)
				want[t][PQ_ROW0 + r] = dot_row(
					type, n, w + rb * r, a + arb * t,
					k->packed->repacked_order);
		pq_same(y, want, nt, msg, "dot_row", n);
	}
	for (t = 0; t < PQ_MAX_TOK; t++) {
		free(y[t]);
		free(want[t]);
	}
	free(acts);
	free(acts_s);
	free(ref_panel);
	free(base);
}

/* Run level l; false where this CPU lacks it. */
static bool pq_use(int l)
{
	const struct cpu_isa *isa = cpu_isa_levels[l];

	if (!isa->usable()) {
		printf("%s: not on this CPU, left out\n", isa->name);
		return false;
	}
	cpu_isa_use(isa);
	return true;
}

START_TEST(test_packed_run)
{
	const uint32_t type = pq_types[_i % PQ_TYPES];
	const uint32_t at = quant_vec_dot_type(type);
	const int64_t blocks[] = { 1, 3, 4, 12 };
	unsigned seed = 20261208 + _i;
	size_t bi;
	int raw;

	if (!pq_use(_i / PQ_TYPES))
		return;
	for (bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++)
		for (raw = 0; raw < 2; raw++) {
			const int64_t n = blocks[bi] * quant_blck_size(type);
			uint8_t *a = pq_quantized(at, n, PQ_MAX_TOK, &seed);
			uint8_t *w = raw ? pq_raw(type, n, PQ_ROWS, &seed) :
					   pq_quantized(type, n, PQ_ROWS,
							&seed);

			pq_check(type, n, w, a, raw ? "raw" : "quantized");
			free(w);
			free(a);
		}
}
END_TEST

/* a quant of test_packed_extremes' token t: all lowest, all 127, mixed */
static int8_t pq_edge_quant(int t, int j, int lowest)
{
	if (t % 3 == 0)
		return (int8_t)lowest;
	return (int8_t)(t % 3 == 1 ? 127 : (j * 7 + t) % 255 - 127);
}

/*
 * The ends of every range: weights at their extremes (Q8_0 -128 and 127,
 * Q6_K quants 63 and 0 and scales -128 and 127, Q4_K nibbles 15, 6-bit
 * scales and mins 63), tokens all -128 (where the level takes it, else
 * -127) or 127 (vpmaddubsw's pairs at their largest) and mixed.
 */
START_TEST(test_packed_extremes)
{
	const uint32_t type = pq_types[_i % PQ_TYPES];
	const uint32_t at = quant_vec_dot_type(type);
	const struct io_type_info *t = io_type_info(type);
	const int64_t n = 2 * t->block_elems, nb = 2;
	const size_t rb = pq_row_bytes(type, n), arb = pq_row_bytes(at, n);
	uint8_t *w, *a;
	int r, k, i, j, lowest;

	if (!pq_use(_i / PQ_TYPES))
		return;
	lowest = cpu_isa()->act_127 ? -127 : -128;
	w = malloc(rb * PQ_ROWS);
	a = malloc(arb * PQ_MAX_TOK);
	ck_assert(w && a);
	for (r = 0; r < PQ_ROWS; r++)
		for (i = 0; i < nb; i++) {
			uint8_t *b = w + rb * r + t->block_bytes * i;
			const uint8_t fill = r & 1 ? 0xff : r & 2 ? 0x5a : 0x80;
			const uint16_t d = quant_fp32_to_fp16(0.5f + r);

			memset(b, fill, t->block_bytes);
			if (type == IO_TYPE_Q8_0) {
				memcpy(b, &d, 2);
				if (r % 4 == 3)
					memset(b + 2, 0x7f, 32);
			} else if (type == IO_TYPE_Q4_K) {
				memcpy(b, &d, 2);
				memcpy(b + 2, &d, 2);
			} else {
				struct block_q6_K *q = (void *)b;

				for (j = 0; j < 16; j++)
					q->scales[j] = (int8_t)((r + j +
								 i) % 3 ?
									127 :
									-128);
				q->d = d;
			}
		}
	for (k = 0; k < PQ_MAX_TOK; k++)
		for (i = 0; i < nb; i++) {
			uint8_t *b = a + arb * k;

			if (at == IO_TYPE_Q8_0) {
				struct block_q8_0 *q = (struct block_q8_0 *)b +
						       i;

				q->d = quant_fp32_to_fp16(0.25f * (k + 1));
				for (j = 0; j < 32; j++)
					q->qs[j] = pq_edge_quant(k, j, lowest);
			} else {
				struct block_q8_K *q = (struct block_q8_K *)b +
						       i;

				q->d = 0.25f * (k + 1);
				memset(q->bsums, 0, sizeof(q->bsums));
				for (j = 0; j < QK_K; j++) {
					q->qs[j] = pq_edge_quant(k, j, lowest);
					q->bsums[j / 16] += q->qs[j];
				}
			}
		}
	pq_check(type, n, w, a, "extremes");
	free(w);
	free(a);
}
END_TEST

static void pq_tests(TCase *tc)
{
	const int nl = (int)cpu_isa_count;

	tcase_add_loop_test(tc, test_packed_layout, 0, PQ_TYPES);
	tcase_add_loop_test(tc, test_packed_run, 0, nl * PQ_TYPES);
	tcase_add_loop_test(tc, test_packed_extremes, 0, nl * PQ_TYPES);
}

/* A level this CPU lacks was not compared: not a whole pass. */
static int pq_left_out(void)
{
	unsigned i;
	int missing = 0;

	for (i = 0; i < cpu_isa_count; i++)
		if (!cpu_isa_levels[i]->usable()) {
			printf("test_gemm_packed: this CPU lacks %s: the %s kernels were not compared\n",
			       cpu_isa_levels[i]->features,
			       cpu_isa_levels[i]->name);
			missing++;
		}
	return missing ? CHECK_SKIP : 0;
}

const struct check_main check_main = {
	.name = "gemm_packed",
	.timeout = 300,
	.add_tests = pq_tests,
	.left_out = pq_left_out,
};
