// SPDX-License-Identifier: MIT
/*
 * Q6_K held packed (engine/cpu/gemm_q6k_packed.c, gemm.h's struct
 * cpu_gemm_packed): pack then unpack_row gives every row's bytes back,
 * and the packed bytes are where gemm.h's layout says; run equals
 * cpu_gemm_q6_K's panel and run on the same rows, and run_exact equals
 * dot_row (the one-token path), each bit for bit, for rows from the real
 * quantizer and of raw random bytes, 1 to 12 superblocks (3 for an odd
 * count), 1..17 tokens, a panel only 32-byte aligned, and nothing of y
 * written outside the panel's 16 rows.
 *
 * Exits 77 on a CPU without AVX-512 F/BW/VL/VNNI.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/cpu/cpu.h"
#include "../../engine/cpu/gemm.h"
#include "../../engine/quant/dot.h"
#include "../../engine/quant/quant.h"
#include "../../engine/quant/quant_internal.h"
#include "../common/check_main.h"

#define PQ_ROWS CPU_GEMM_ROWS
#define PQ_MAX_TOK 17
#define PQ_ROW0 5 /* the panel's rows land at y[t][5..] */
#define PQ_NY (PQ_ROW0 + PQ_ROWS + 3)
#define PQ_SENTINEL 12345.5f

static const int64_t pq_ns[] = { 256, 768, 1024, 3072 };
static const int pq_nts[] = { 1, 2, 3, 4, 5, 8, 9, 17 };

static size_t pq_row_bytes(int64_t n)
{
	return (size_t)(n / QK_K) * sizeof(struct block_q6_K);
}

static float pq_rand(unsigned *seed)
{
	return (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f;
}

/* rows rows of n elements of type from random floats (every third large) */
static uint8_t *pq_quantized(uint32_t type, int64_t n, int rows, unsigned *seed)
{
	const struct quant_type_traits *t = quant_traits(type);
	const size_t rb = (size_t)(n / t->blck_size) * t->type_size;
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
		quant_from_float(type, x, out + rb * r, n);
	}
	free(x);
	return out;
}

/*
 * nb Q6_K blocks of raw random bytes (any quants and int8 scales), each d
 * drawn again until it is a finite half
 */
static uint8_t *pq_raw(int64_t nb, unsigned *seed)
{
	struct block_q6_K *b = malloc(sizeof(*b) * (size_t)nb);
	int64_t i;
	size_t k;

	ck_assert_ptr_nonnull(b);
	for (i = 0; i < nb; i++) {
		for (k = 0; k < sizeof(b[i]); k++)
			((uint8_t *)&b[i])[k] = (uint8_t)rand_r(seed);
		while (!isfinite(quant_fp16_to_fp32(b[i].d)))
			b[i].d = (uint16_t)rand_r(seed);
	}
	return (uint8_t *)b;
}

/*
 * A panel for n, only 32-byte aligned as a GGUF tensor's rows may be
 * (for an odd count of superblocks it ends where the allocation does,
 * so ASan sees a read past it).
 */
static uint8_t *pq_panel(int64_t n, void **base)
{
	*base = aligned_alloc(64, cpu_align64(pq_row_bytes(n) * PQ_ROWS + 32));
	ck_assert_ptr_nonnull(*base);
	return (uint8_t *)*base + 32;
}

START_TEST(test_pack_round_trip)
{
	unsigned seed = 20261207;
	size_t ni;

	for (ni = 0; ni < sizeof(pq_ns) / sizeof(pq_ns[0]); ni++) {
		const int64_t n = pq_ns[ni], nb = n / QK_K;
		const size_t rb = pq_row_bytes(n);
		/* rows further apart than one row: row_bytes is honoured */
		const size_t stride = rb + 3 * sizeof(struct block_q6_K);
		uint8_t *w = pq_raw((nb + 3) * PQ_ROWS, &seed),
			*row = malloc(rb);
		void *base;
		uint8_t *panel = pq_panel(n, &base);
		int64_t ib;
		int r, u;

		ck_assert_ptr_nonnull(row);
		cpu_gemm_q6_K_packed.pack(n, w, stride, panel);
		/* gemm.h's layout, byte for byte */
		for (ib = 0; ib < nb; ib++)
			for (r = 0; r < PQ_ROWS; r++) {
				const uint8_t *b = w + stride * r +
						   sizeof(struct block_q6_K) *
							   ib;

				for (u = 0; u < 52; u++)
					ck_assert(!memcmp(panel + 3328 * ib +
								  64 * u +
								  4 * r,
							  b + 4 * u, 4));
				ck_assert(!memcmp(panel + 3328 * nb + 32 * ib +
							  2 * r,
						  b + 208, 2));
			}
		for (r = 0; r < PQ_ROWS; r++) {
			memset(row, 0xa5, rb);
			cpu_gemm_q6_K_packed.unpack_row(n, panel, r, row);
			ck_assert_msg(!memcmp(row, w + stride * r, rb),
				      "n %lld: row %d not given back",
				      (long long)n, r);
		}
		free(w);
		free(row);
		free(base);
	}
}
END_TEST

/* y's cells other than y[t][PQ_ROW0..PQ_ROW0 + 15] still hold the sentinel */
static void pq_check_untouched(float **y, int nt, const char *what)
{
	int t, r;

	for (t = 0; t < nt; t++)
		for (r = 0; r < PQ_NY; r++)
			if (r < PQ_ROW0 || r >= PQ_ROW0 + PQ_ROWS)
				ck_assert_msg(y[t][r] == PQ_SENTINEL,
					      "%s nt %d: y[%d][%d] written",
					      what, nt, t, r);
}

static void pq_fill(float **y, int nt)
{
	int t, r;

	for (t = 0; t < nt; t++)
		for (r = 0; r < PQ_NY; r++)
			y[t][r] = PQ_SENTINEL;
}

/*
 * One matrix of 16 rows w against PQ_MAX_TOK tokens a (Q8_K), packed as
 * acts: every nt of pq_nts through run (against the panel's run) and
 * run_exact (against dot_row).
 */
static void pq_check(int64_t n, const uint8_t *w, const uint8_t *a,
		     const uint8_t *acts, const char *what)
{
	const struct cpu_gemm_kernels *k = &cpu_gemm_q6_K;
	const size_t rb = pq_row_bytes(n), arb = (size_t)(n / QK_K) * 292;
	void *base, *ref_panel = aligned_alloc(64, k->panel_bytes(n));
	uint8_t *panel = pq_panel(n, &base);
	float *y[PQ_MAX_TOK], *want[PQ_MAX_TOK];
	size_t i;
	int t, r;

	ck_assert_ptr_nonnull(ref_panel);
	for (t = 0; t < PQ_MAX_TOK; t++) {
		y[t] = malloc(sizeof(float) * PQ_NY);
		want[t] = malloc(sizeof(float) * PQ_NY);
		ck_assert_ptr_nonnull(y[t]);
		ck_assert_ptr_nonnull(want[t]);
	}
	cpu_gemm_q6_K_packed.pack(n, w, rb, panel);
	k->panel(n, w, rb, PQ_ROWS, ref_panel);
	for (i = 0; i < sizeof(pq_nts) / sizeof(pq_nts[0]); i++) {
		const int nt = pq_nts[i];

		pq_fill(y, nt);
		k->run(n, ref_panel, PQ_ROWS, acts, nt, want, PQ_ROW0, NULL, 0);
		/* the prefetch of what comes next (here the panel) changes nothing */
		cpu_gemm_q6_K_packed.run(n, panel, acts, nt, y, PQ_ROW0, panel,
					 rb * PQ_ROWS);
		pq_check_untouched(y, nt, what);
		for (t = 0; t < nt; t++)
			for (r = PQ_ROW0; r < PQ_ROW0 + PQ_ROWS; r++)
				ck_assert_msg(
					!memcmp(&y[t][r], &want[t][r], 4),
					"%s n %lld nt %d: run row %d token %d: %.9g, panel %.9g",
					what, (long long)n, nt, r - PQ_ROW0, t,
					y[t][r], want[t][r]);

		pq_fill(y, nt);
		cpu_gemm_q6_K_packed.run_exact(n, panel, acts, nt, y, PQ_ROW0,
					       nt % 2 ? NULL : panel,
					       nt % 2 ? 0 : rb * PQ_ROWS);
		pq_check_untouched(y, nt, what);
		for (t = 0; t < nt; t++)
			for (r = 0; r < PQ_ROWS; r++) {
				float d = dot_row(IO_TYPE_Q6_K, n, w + rb * r,
						  a + arb * t, false);

				ck_assert_msg(
					!memcmp(&y[t][PQ_ROW0 + r], &d, 4),
					"%s n %lld nt %d: run_exact row %d token %d: %.9g, dot_row %.9g",
					what, (long long)n, nt, r, t,
					y[t][PQ_ROW0 + r], d);
			}
	}
	for (t = 0; t < PQ_MAX_TOK; t++) {
		free(y[t]);
		free(want[t]);
	}
	free(ref_panel);
	free(base);
}

/* Random Q8_K tokens a and their packed form (*acts). */
static uint8_t *pq_tokens(int64_t n, unsigned *seed, uint8_t **acts)
{
	const struct cpu_gemm_kernels *k = &cpu_gemm_q6_K;
	const size_t arb = (size_t)(n / QK_K) * 292;
	uint8_t *a = pq_quantized(IO_TYPE_Q8_K, n, PQ_MAX_TOK, seed);
	int t;

	*acts = aligned_alloc(64, k->act_bytes(n) * PQ_MAX_TOK);
	ck_assert_ptr_nonnull(*acts);
	for (t = 0; t < PQ_MAX_TOK; t++)
		k->act_pack(n, a + arb * t, *acts + k->act_bytes(n) * t);
	return a;
}

START_TEST(test_run_quantized_and_raw)
{
	unsigned seed = 20261208;
	size_t ni;
	int raw;

	ck_assert_uint_eq(quant_vec_dot_type(IO_TYPE_Q6_K), IO_TYPE_Q8_K);
	for (ni = 0; ni < sizeof(pq_ns) / sizeof(pq_ns[0]); ni++)
		for (raw = 0; raw < 2; raw++) {
			const int64_t n = pq_ns[ni];
			uint8_t *acts, *a = pq_tokens(n, &seed, &acts);
			uint8_t *w = raw ? pq_raw(n / QK_K * PQ_ROWS, &seed) :
					   pq_quantized(IO_TYPE_Q6_K, n,
							PQ_ROWS, &seed);

			pq_check(n, w, a, acts, raw ? "raw" : "quantized");
			free(w);
			free(a);
			free(acts);
		}
}
END_TEST

/* a scale of test_run_extremes: -128, 127 or between */
static int8_t pq_edge_scale(int r, int j, int i)
{
	if ((r + j + i) % 3 == 0)
		return -128;
	return (int8_t)((r + j) % 3 == 1 ? 127 : (r * 13 + j) % 256 - 128);
}

/* a quant of test_run_extremes' token t: all -128, all 127, or mixed */
static int8_t pq_edge_quant(int t, int j)
{
	if (t % 3 == 0)
		return -128;
	return (int8_t)(t % 3 == 1 ? 127 : (j * 7 + t) % 255 - 127);
}

/*
 * The ends of every range: quants 63 (odd rows), 0 (r % 4 == 0) and
 * mixed, scales -128 and 127, tokens all -128 or 127 (vpmaddubsw's
 * pairs at their largest) and mixed.
 */
START_TEST(test_run_extremes)
{
	const int64_t n = 512, nb = n / QK_K;
	const size_t ab = cpu_gemm_q6_K.act_bytes(n);
	struct block_q6_K w[PQ_ROWS][2];
	struct block_q8_K a[PQ_MAX_TOK][2];
	uint8_t *acts = aligned_alloc(64, ab * PQ_MAX_TOK);
	int r, t, i, j;

	ck_assert_ptr_nonnull(acts);
	for (r = 0; r < PQ_ROWS; r++)
		for (i = 0; i < nb; i++) {
			const int ql = r & 1 ? 0xff : r & 2 ? 0x5a : 0;
			const int qh = r & 1 ? 0xff : r & 2 ? 0x93 : 0;

			memset(w[r][i].ql, ql, sizeof(w[r][i].ql));
			memset(w[r][i].qh, qh, sizeof(w[r][i].qh));
			for (j = 0; j < 16; j++)
				w[r][i].scales[j] = pq_edge_scale(r, j, i);
			w[r][i].d = quant_fp32_to_fp16(0.5f + r);
		}
	for (t = 0; t < PQ_MAX_TOK; t++) {
		for (i = 0; i < nb; i++) {
			a[t][i].d = 0.25f * (t + 1);
			memset(a[t][i].bsums, 0, sizeof(a[t][i].bsums));
			for (j = 0; j < QK_K; j++) {
				a[t][i].qs[j] = pq_edge_quant(t, j);
				a[t][i].bsums[j / 16] += a[t][i].qs[j];
			}
		}
		cpu_gemm_q6_K.act_pack(n, a[t], acts + ab * t);
	}
	pq_check(n, (const uint8_t *)w, (const uint8_t *)a, acts, "extremes");
	free(acts);
}
END_TEST

static int pq_setup(void)
{
	if (!cpu_avx512_usable()) {
		puts("no AVX-512 F/BW/VL/VNNI: the packed kernels cannot run here");
		return CHECK_SKIP;
	}
	return 0;
}

static void pq_tests(TCase *tc)
{
	tcase_add_test(tc, test_pack_round_trip);
	tcase_add_test(tc, test_run_quantized_and_raw);
	tcase_add_test(tc, test_run_extremes);
}

const struct check_main check_main = {
	.name = "gemm_packed_q6k",
	.timeout = 120,
	.setup = pq_setup,
	.add_tests = pq_tests,
};
