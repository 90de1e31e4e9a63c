// SPDX-License-Identifier: MIT
/*
 * The packed Q4_K panel (engine/cpu/gemm.h, cpu_gemm_q4_K_packed): its
 * layout against the header's description of it, pack then unpack_row
 * giving back every row's exact bytes, and run and run_exact on a panel
 * placed only 32-byte aligned (as GGUF places tensors) bit for bit equal
 * to cpu_gemm_q4_K's panel and run on the rows as the file holds them and
 * to dot_row(..., repacked), the one-token path. Weights from the real
 * quantizer and of raw random bytes, 1 to 12 superblocks, 1 to 17 tokens
 * (every tile of 4 and the 3, 2, 1 after it), y written only at the 16
 * rows from row0.
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
#define PQ_BLOCK 144 /* block_q4_K: d, dmin, scales[12], qs[128] */
#define PQ_SB 2304   /* a packed superblock: 36 units of 64 bytes */

static size_t pq_row_bytes(uint32_t type, int64_t n)
{
	const struct quant_type_traits *t = quant_traits(type);

	return (size_t)(n / t->blck_size) * t->type_size;
}

static float pq_rand(unsigned *seed)
{
	return (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f;
}

/* rows rows of n elements of type, from random floats (some rows large) */
static uint8_t *pq_rows(uint32_t type, int64_t n, int rows, unsigned *seed)
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
		quant_from_float(type, x, out + rb * r, n);
	}
	free(x);
	return out;
}

/*
 * 16 Q4_K rows of raw random bytes, each block drawn again until it
 * dequantizes to finite floats (a random half is an infinity or a NaN
 * one time in 32), unless any: then any bytes at all
 */
static uint8_t *pq_rows_raw(int64_t n, unsigned *seed, bool any)
{
	const int64_t nb = n / QK_K * PQ_ROWS;
	uint8_t *out = malloc((size_t)nb * PQ_BLOCK);
	float x[QK_K];
	int64_t b;
	int i;

	ck_assert_ptr_nonnull(out);
	for (b = 0; b < nb; b++) {
		uint8_t *blk = out + (size_t)b * PQ_BLOCK;
		bool finite;

		do {
			for (i = 0; i < PQ_BLOCK; i++)
				blk[i] = (uint8_t)rand_r(seed);
			quant_to_float(IO_TYPE_Q4_K, blk, x, QK_K);
			for (finite = true, i = 0; i < QK_K; i++)
				finite = finite && isfinite(x[i]);
		} while (!any && !finite);
	}
	return out;
}

/*
 * A packed panel's home: 32 bytes past a 64-byte boundary, so that an
 * aligned load of it would fault
 */
static uint8_t *pq_panel_alloc(int64_t n, void **base)
{
	*base = aligned_alloc(
		64, cpu_align64(pq_row_bytes(IO_TYPE_Q4_K, n) * PQ_ROWS + 64));
	ck_assert_ptr_nonnull(*base);
	return (uint8_t *)*base + 32;
}

/*
 * Every dword where gemm.h puts it: unit u < 32 of superblock ib, bytes
 * 4r.., is block bytes 16 + 4u of row r; unit 32 bytes 0..3; unit
 * 33 + k bytes 4 + 4k. Then unpack_row gives each row back.
 */
START_TEST(test_packed_q4k_layout)
{
	const struct cpu_gemm_packed *k = &cpu_gemm_q4_K_packed;
	const int64_t blocks[] = { 1, 4, 12 };
	unsigned seed = 20261201;
	size_t bi;

	for (bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
		const int64_t n = blocks[bi] * QK_K;
		const size_t rb = pq_row_bytes(IO_TYPE_Q4_K, n);
		uint8_t *w = pq_rows_raw(n, &seed, true);
		uint8_t *row = malloc(rb);
		void *base;
		uint8_t *panel = pq_panel_alloc(n, &base);
		int64_t ib;
		int r, u;

		ck_assert_ptr_nonnull(row);
		k->pack(n, w, rb, panel);
		for (ib = 0; ib < blocks[bi]; ib++)
			for (r = 0; r < PQ_ROWS; r++)
				for (u = 0; u < 36; u++) {
					const size_t off = u < 32 ?
								   16 + 4 * u :
							   u == 32 ?
								   0 :
								   4 + 4 * (u -
									    33);

					ck_assert_msg(
						!memcmp(panel + PQ_SB * ib +
								64 * u + 4 * r,
							w + rb * r +
								PQ_BLOCK * ib +
								off,
							4),
						"n %lld: superblock %lld row %d unit %d",
						(long long)n, (long long)ib, r,
						u);
				}
		for (r = 0; r < PQ_ROWS; r++) {
			memset(row, 0xa5, rb);
			k->unpack_row(n, panel, r, row);
			ck_assert_msg(!memcmp(row, w + rb * r, rb),
				      "n %lld: row %d not given back",
				      (long long)n, r);
		}
		free(base);
		free(row);
		free(w);
	}
}
END_TEST

/*
 * nt tokens through the packed run (fn: run or run_exact) against want,
 * computed for all 17 tokens, and nothing of y outside the panel's rows
 * touched. ahead: the panel itself (its prefetch changes nothing), or none.
 */
static void pq_check(void (*fn)(int64_t, const void *, const void *, int,
				float *const *, int64_t, const void *, size_t),
		     const char *what, int64_t n, const uint8_t *panel,
		     const uint8_t *acts, int nt, float (*want)[PQ_ROWS],
		     float **y, bool ahead)
{
	const size_t bytes = pq_row_bytes(IO_TYPE_Q4_K, n) * PQ_ROWS;
	int r, t;

	for (t = 0; t < PQ_MAX_TOK; t++)
		for (r = 0; r < PQ_NY; r++)
			y[t][r] = PQ_SENTINEL;
	fn(n, panel, acts, nt, y, PQ_ROW0, ahead ? panel : NULL,
	   ahead ? bytes : 0);
	for (t = 0; t < PQ_MAX_TOK; t++)
		for (r = 0; r < PQ_NY; r++) {
			const bool in = t < nt && r >= PQ_ROW0 &&
					r < PQ_ROW0 + PQ_ROWS;

			if (!in) {
				ck_assert_msg(
					y[t][r] == PQ_SENTINEL,
					"%s n %lld nt %d: y[%d][%d] written",
					what, (long long)n, nt, t, r);
				continue;
			}
			ck_assert_msg(
				!memcmp(&want[t][r - PQ_ROW0], &y[t][r], 4),
				"%s n %lld nt %d: row %d token %d: %.9g, want %.9g",
				what, (long long)n, nt, r - PQ_ROW0, t, y[t][r],
				want[t][r - PQ_ROW0]);
		}
}

/*
 * The expected results: cpu_gemm_q4_K's panel and run over all the
 * tokens, each checked against dot_row first, so that the packed run is
 * held to both.
 */
static void pq_want(int64_t n, const uint8_t *w, const uint8_t *a,
		    const uint8_t *acts, float (*want)[PQ_ROWS], float **y)
{
	const struct cpu_gemm_kernels *g = &cpu_gemm_q4_K;
	const size_t rb = pq_row_bytes(IO_TYPE_Q4_K, n);
	const size_t arb = pq_row_bytes(IO_TYPE_Q8_K, n);
	void *panel = aligned_alloc(64, g->panel_bytes(n));
	int r, t;

	ck_assert_ptr_nonnull(panel);
	g->panel(n, w, rb, PQ_ROWS, panel);
	g->run(n, panel, PQ_ROWS, acts, PQ_MAX_TOK, y, 0, NULL, 0);
	for (t = 0; t < PQ_MAX_TOK; t++)
		for (r = 0; r < PQ_ROWS; r++) {
			const float d = dot_row(IO_TYPE_Q4_K, n, w + rb * r,
						a + arb * t, true);

			ck_assert_msg(!memcmp(&d, &y[t][r], 4),
				      "n %lld: panel run %.9g, dot_row %.9g",
				      (long long)n, y[t][r], d);
			want[t][r] = y[t][r];
		}
	free(panel);
}

/* One matrix of 16 rows (raw: random bytes) against 17 tokens. */
static void pq_matrix(int64_t n, bool raw, unsigned *seed)
{
	const struct cpu_gemm_packed *k = &cpu_gemm_q4_K_packed;
	const size_t ab = cpu_gemm_q4_K.act_bytes(n);
	const size_t arb = pq_row_bytes(IO_TYPE_Q8_K, n);
	const int nts[] = { 1, 2, 3, 4, 5, 8, 17 };
	uint8_t *w = raw ? pq_rows_raw(n, seed, false) :
			   pq_rows(IO_TYPE_Q4_K, n, PQ_ROWS, seed);
	uint8_t *a = pq_rows(IO_TYPE_Q8_K, n, PQ_MAX_TOK, seed);
	uint8_t *acts = aligned_alloc(64, ab * PQ_MAX_TOK);
	float want[PQ_MAX_TOK][PQ_ROWS], *y[PQ_MAX_TOK];
	void *base;
	uint8_t *panel = pq_panel_alloc(n, &base);
	size_t i;
	int t;

	ck_assert_ptr_nonnull(acts);
	for (t = 0; t < PQ_MAX_TOK; t++) {
		cpu_gemm_q4_K.act_pack(n, a + arb * t, acts + ab * t);
		y[t] = malloc(sizeof(float) * PQ_NY);
		ck_assert_ptr_nonnull(y[t]);
	}
	pq_want(n, w, a, acts, want, y);
	k->pack(n, w, pq_row_bytes(IO_TYPE_Q4_K, n), panel);
	for (i = 0; i < sizeof(nts) / sizeof(nts[0]); i++) {
		pq_check(k->run, "run", n, panel, acts, nts[i], want, y, i % 2);
		pq_check(k->run_exact, "run_exact", n, panel, acts, nts[i],
			 want, y, !(i % 2));
	}
	for (t = 0; t < PQ_MAX_TOK; t++)
		free(y[t]);
	free(base);
	free(acts);
	free(a);
	free(w);
}

START_TEST(test_packed_q4k_run)
{
	const int64_t blocks[] = { 1, 4, 12 };
	unsigned seed = 20261202;
	size_t bi;

	/* run_exact's bits are those of a repacked tensor's one-token dot */
	ck_assert(cpu_gemm_q4_K_packed.repacked_order);
	for (bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
		pq_matrix(blocks[bi] * QK_K, false, &seed);
		pq_matrix(blocks[bi] * QK_K, true, &seed);
	}
}
END_TEST

static int pq_setup(void)
{
	if (!cpu_avx512_usable()) {
		puts("no AVX-512 F/BW/VL/VNNI: the packed Q4_K run cannot run here");
		return CHECK_SKIP;
	}
	return 0;
}

static void pq_tests(TCase *tc)
{
	tcase_add_test(tc, test_packed_q4k_layout);
	tcase_add_test(tc, test_packed_q4k_run);
}

const struct check_main check_main = {
	.name = "gemm_packed_q4k",
	.timeout = 60,
	.setup = pq_setup,
	.add_tests = pq_tests,
};
