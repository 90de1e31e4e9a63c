// SPDX-License-Identifier: MIT
/*
 * engine/cpu/gemm_k_avx512.c, the rows-in-lanes K-quant kernels (gemm.h),
 * against the orders they promise: Q4_K bit for bit the one-token path of
 * a repacked tensor (dot_row(..., true)); Q6_K bit for bit a scalar model
 * of its own order (one float chain per row over the superblocks) and
 * within 1e-5 of the one-token dot_row(..., false), relative to the sum
 * of the superblocks' magnitudes. Rows from the real quantizers (and, for
 * the weights, raw random bytes with finite scales), 1..16 rows in a
 * panel, 1..17 and 512 tokens, rows of 256 and 3072 elements; nothing
 * outside the nr rows and nt tokens is written.
 *
 * Exits 77 on a CPU without AVX-512 F/BW/VL/VNNI.
 *
 *   make build/tests/engine/test_gemm_k && build/tests/engine/test_gemm_k
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
#include "../common/check_main.h"

#define QK 256
#define Q8K_BYTES 292
#define MAX_TOKENS 512
#define ROW0 3 /* y's rows start here: the lanes before must stay */
#define Y_LEN (ROW0 + CPU_GEMM_ROWS + 3)
#define SENTINEL -12345.5f

struct gemm_case {
	uint32_t type;
	int64_t n;
	bool raw; /* weights of raw random bytes (finite scales) */
};

static const struct gemm_case gemm_cases[] = {
	{ IO_TYPE_Q4_K, 256, false },  { IO_TYPE_Q4_K, 3072, false },
	{ IO_TYPE_Q4_K, 3072, true },  { IO_TYPE_Q6_K, 256, false },
	{ IO_TYPE_Q6_K, 3072, false }, { IO_TYPE_Q6_K, 3072, true },
};
#define N_CASES (int)(sizeof(gemm_cases) / sizeof(gemm_cases[0]))

static uint64_t gemm_seed = 0x9e3779b97f4a7c15ull;

static uint32_t gemm_rand(void)
{
	gemm_seed ^= gemm_seed << 13;
	gemm_seed ^= gemm_seed >> 7;
	gemm_seed ^= gemm_seed << 17;
	return (uint32_t)(gemm_seed >> 16);
}

/* roughly normal, with an outlier now and then (as activations have) */
static float gemm_randf(void)
{
	float s = 0.0f;

	for (int i = 0; i < 4; i++)
		s += (float)(gemm_rand() % 20001) / 10000.0f - 1.0f;
	if (gemm_rand() % 97 == 0)
		s *= 12.0f;
	return s;
}

static size_t row_size(uint32_t type, int64_t n)
{
	const struct quant_type_traits *t = quant_traits(type);

	return (size_t)(n / t->blck_size) * t->type_size;
}

static void put_half(uint8_t *p, float f)
{
	uint16_t h = quant_fp32_to_fp16(f);

	memcpy(p, &h, sizeof(h));
}

/* Random bytes, the block's halves replaced by small finite ones. */
static void fill_raw(uint32_t type, uint8_t *w, int64_t n)
{
	size_t bytes = row_size(type, n), bs = quant_traits(type)->type_size;

	for (size_t i = 0; i < bytes; i++)
		w[i] = (uint8_t)gemm_rand();
	for (size_t b = 0; b < bytes; b += bs) {
		float d = (float)(gemm_rand() % 1000 + 1) * 1e-5f;

		if (type == IO_TYPE_Q4_K) {
			put_half(w + b, d);
			put_half(w + b + 2, d * 0.5f);
		} else {
			put_half(w + b + 208, d);
		}
	}
}

static float half_at(const uint8_t *p)
{
	uint16_t h;

	memcpy(&h, p, sizeof(h));
	return quant_fp16_to_fp32(h);
}

/* Element e of a Q6_K block as 0..63 (ggml's dequantize_row_q6_K). */
static int q6k_quant(const uint8_t *b, int e)
{
	int h = e / 128, k = (e % 128) / 32, i = e % 32;
	int ql = b[64 * h + 32 * (k % 2) + i];
	int lo = k < 2 ? ql & 0x0f : ql >> 4;

	return lo | ((b[128 + 32 * h + i] >> (2 * k)) & 3) << 4;
}

/*
 * The Q6_K kernel's order in scalar C: per superblock the exact integer
 * s = sum over groups of sc * sum((q - 32) a), then one float chain per
 * row. *mag gets the scale of the rounding of either order: per
 * superblock |dw da| sum over groups |sc| (sum q |a| + 32 |bsum|), the
 * size of the one-token kernel's lanes (unsigned quants, the -32 of two
 * groups taken off each lane), which cancel.
 */
static float q6k_model(int64_t n, const uint8_t *w, const uint8_t *a,
		       float *mag)
{
	float acc = 0.0f, m = 0.0f;

	for (int64_t ib = 0; ib < n / QK; ib++, w += 210, a += Q8K_BYTES) {
		const int8_t *qa = (const int8_t *)(a + 4);
		float da, f;
		int s = 0, size = 0;

		for (int g = 0; g < 16; g++) {
			int p = 0, pa = 0, b = 0;

			for (int e = 16 * g; e < 16 * g + 16; e++) {
				p += (q6k_quant(w, e) - 32) * qa[e];
				pa += q6k_quant(w, e) * abs(qa[e]);
				b += qa[e];
			}
			s += (int8_t)w[192 + g] * p;
			size += abs((int8_t)w[192 + g]) * (pa + 32 * abs(b));
		}
		memcpy(&da, a, sizeof(da));
		f = half_at(w + 208) * da;
		acc = fmaf((float)s, f, acc);
		m += fabsf((float)size * f);
	}
	*mag = m;
	return acc;
}

static uint32_t bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/*
 * k->run of nt tokens against a panel of nr rows, into y (every lane
 * preset to SENTINEL, one token more than nt): each result the bits of
 * want, every other lane untouched. Returns the results compared.
 */
static long run_and_compare(const struct gemm_case *gc,
			    const struct cpu_gemm_kernels *k, const void *panel,
			    int nr, int nt, const void *acts, float *const *y,
			    const float *want)
{
	long compared = 0;

	for (int t = 0; t <= nt; t++)
		for (int i = 0; i < Y_LEN; i++)
			y[t][i] = SENTINEL;
	k->run(gc->n, panel, nr, acts, nt, y, ROW0);
	for (int t = 0; t <= nt; t++)
		for (int i = 0; i < Y_LEN; i++) {
			int r = i - ROW0;
			float got = y[t][i], w;

			if (t == nt || r < 0 || r >= nr) {
				ck_assert_msg(
					bits(got) == bits(SENTINEL),
					"nr %d nt %d: token %d lane %d written",
					nr, nt, t, i);
				continue;
			}
			w = want[CPU_GEMM_ROWS * t + r];
			ck_assert_msg(
				bits(got) == bits(w),
				"%s n %lld nr %d nt %d: row %d token %d: %.9g, want %.9g",
				quant_traits(gc->type)->name, (long long)gc->n,
				nr, nt, r, t, got, w);
			compared++;
		}
	return compared;
}

START_TEST(test_gemm_k_against_one_token)
{
	const struct gemm_case *gc = &gemm_cases[_i];
	const struct cpu_gemm_kernels *k = gc->type == IO_TYPE_Q4_K ?
						   &cpu_gemm_q4_K :
						   &cpu_gemm_q6_K;
	const int64_t n = gc->n;
	const size_t rb = row_size(gc->type, n), ab = k->act_bytes(n);
	float *x = malloc(sizeof(float) * n);
	uint8_t *w = malloc(rb * CPU_GEMM_ROWS);
	uint8_t *a = malloc(Q8K_BYTES * (n / QK) * MAX_TOKENS);
	uint8_t *acts = aligned_alloc(64, ab * MAX_TOKENS);
	void *panel = aligned_alloc(64, k->panel_bytes(n));
	/* one more token than any run: it must stay untouched */
	float *ybuf = malloc(sizeof(float) * Y_LEN * (MAX_TOKENS + 1));
	float *want = malloc(sizeof(float) * CPU_GEMM_ROWS * MAX_TOKENS);
	float *y[MAX_TOKENS + 1];
	static const int token_counts[] = { 1,	2,  3,	4,  5,	6,
					    7,	8,  9,	10, 11, 12,
					    13, 14, 15, 16, 17, MAX_TOKENS };
	long compared = 0;

	ck_assert(x && w && a && acts && panel && ybuf && want);
	ck_assert_uint_eq(k->panel_bytes(n) % 64, 0);
	ck_assert_uint_eq(ab % 64, 0);
	ck_assert(k->exact == (gc->type == IO_TYPE_Q4_K));
	for (int r = 0; r < CPU_GEMM_ROWS; r++) {
		if (gc->raw) {
			fill_raw(gc->type, w + rb * r, n);
			continue;
		}
		/* rows of different magnitudes */
		for (int64_t j = 0; j < n; j++)
			x[j] = gemm_randf() * (float)(1 + r % 5);
		quant_from_float_ref(gc->type, x, w + rb * r, n);
	}
	for (int t = 0; t < MAX_TOKENS; t++) {
		uint8_t *at = a + Q8K_BYTES * (n / QK) * t;

		for (int64_t j = 0; j < n; j++)
			x[j] = gemm_randf() * (float)(1 + t % 3);
		quant_from_float(IO_TYPE_Q8_K, x, at, n);
		k->act_pack(n, at, acts + ab * t);
	}
	for (int t = 0; t < MAX_TOKENS; t++) {
		const uint8_t *at = a + Q8K_BYTES * (n / QK) * t;

		for (int r = 0; r < CPU_GEMM_ROWS; r++) {
			float *o = &want[CPU_GEMM_ROWS * t + r];

			if (gc->type == IO_TYPE_Q4_K) {
				*o = dot_row(IO_TYPE_Q4_K, n, w + rb * r, at,
					     true);
			} else {
				float mag, one = dot_row(IO_TYPE_Q6_K, n,
							 w + rb * r, at, false);

				*o = q6k_model(n, w + rb * r, at, &mag);
				ck_assert_msg(
					fabsf(*o - one) <= 1e-5f * mag,
					"row %d token %d: %.9g, one-token %.9g (scale %g)",
					r, t, *o, one, mag);
			}
		}
	}
	for (int t = 0; t <= MAX_TOKENS; t++)
		y[t] = ybuf + Y_LEN * t;
	for (int nr = 1; nr <= CPU_GEMM_ROWS; nr++) {
		/* exactly nr rows: reading past them is a sanitizer error */
		uint8_t *wr = malloc(rb * nr);

		ck_assert_ptr_nonnull(wr);
		memcpy(wr, w, rb * nr);
		k->panel(n, wr, rb, nr, panel);
		free(wr);
		for (size_t c = 0; c < sizeof(token_counts) / sizeof(int); c++)
			compared += run_and_compare(gc, k, panel, nr,
						    token_counts[c], acts, y,
						    want);
	}
	printf("%s n %lld%s: %ld results equal\n", quant_traits(gc->type)->name,
	       (long long)n, gc->raw ? " (raw bytes)" : "", compared);
	free(x);
	free(w);
	free(a);
	free(acts);
	free(panel);
	free(ybuf);
	free(want);
}
END_TEST

static int gemm_k_setup(void)
{
	if (!cpu_avx512_usable()) {
		printf("test_gemm_k: this CPU lacks AVX-512 F/BW/VL/VNNI, the kernels cannot run\n");
		return CHECK_SKIP;
	}
	return 0;
}

static void gemm_k_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_gemm_k_against_one_token, 0, N_CASES);
}

const struct check_main check_main = {
	.name = "gemm_k",
	.timeout = 300,
	.setup = gemm_k_setup,
	.add_tests = gemm_k_tests,
};
