// SPDX-License-Identifier: MIT
/*
 * engine/cpu's vector kernels, every level of engine/cpu/isa.h this CPU
 * has (avx2, avx512), against the scalar emulations they replace: the
 * same float, bit for bit, for random rows of many lengths (valid blocks
 * from the quantizers and raw random bytes, -128 included where the
 * level takes it) and for every tensor of a kernel's type in the shared
 * models. The scalar side (the traits table's vec_dot and
 * vec_dot_repacked) is itself checked against the live reference library
 * by test_quant and test_quant_ggml, so equality here carries that over.
 *
 * Each test runs one level (cpu_isa_use), so dot_row, dot_tile and the
 * quantizers are that level's; a level this CPU lacks is left out (and
 * the run says so: exit 77 when nothing vector could be compared).
 */
#include <check.h>
#include <stdbool.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/cpu/dot.h"
#include "../../engine/cpu/isa.h"
#include "../../engine/quant/quant.h"
#include "../common/check_main.h"

/* The vector levels, best first (every level but the scalar one). */
static const struct cpu_isa *simd_level(int i)
{
	return cpu_isa_levels[i];
}

static int simd_level_count(void)
{
	return (int)cpu_isa_count - 1;
}

/* Run level l; false (the test returns) where this CPU lacks it. */
static bool simd_use(int l)
{
	const struct cpu_isa *isa = simd_level(l);

	if (!isa->usable()) {
		printf("%s: not on this CPU, left out\n", isa->name);
		return false;
	}
	cpu_isa_use(isa);
	return true;
}

/*
 * What dot_row computes without engine/cpu: the type's scalar emulation
 * from the traits table (the repacked gemv where asked and there is one).
 */
static float dot_row_scalar(uint32_t type, int64_t n, const void *w,
			    const void *a, bool repacked)
{
	const struct quant_type_traits *t = quant_traits(type);

	if (repacked && t->vec_dot_repacked)
		return t->vec_dot_repacked(n, w, a);
	return t->vec_dot(n, w, a);
}

static float dot_f16_scalar(int64_t n, const uint16_t *x, const uint16_t *y)
{
	return quant_traits(IO_TYPE_F16)->vec_dot(n, x, y);
}

/* One kernel of a level: (type, repacked), named for the messages. */
struct simd_kernel {
	uint32_t type;
	bool repacked; /* dot.c's gemv order, not quant_vec_dot_x86's */
	char name[48];
};

/*
 * Kernel k (0 .. 2 IO_TYPE_COUNT - 1) of the running level: false where
 * it has none of its own (the scalar code would run: nothing to compare).
 */
static bool simd_kernel_at(int k, struct simd_kernel *out)
{
	const struct cpu_isa *isa = cpu_isa();
	uint32_t type = (uint32_t)(k / 2);
	bool repacked = k % 2;

	if (!quant_traits(type)->weight ||
	    !(repacked ? isa->type[type].dot_repacked : isa->type[type].dot))
		return false;
	out->type = type;
	out->repacked = repacked;
	snprintf(out->name, sizeof(out->name), "%s %s%s", isa->name,
		 quant_type_name(type), repacked ? " repacked" : "");
	return true;
}

#define SIMD_KERNELS (2 * IO_TYPE_COUNT)

static uint64_t simd_rng = 0x9e3779b97f4a7c15ull;

static uint32_t simd_rand(void)
{
	simd_rng ^= simd_rng << 13;
	simd_rng ^= simd_rng >> 7;
	simd_rng ^= simd_rng << 17;
	return (uint32_t)(simd_rng >> 16);
}

/* roughly normal, with the odd outlier a real activation has */
static float simd_randf(void)
{
	float s = 0.0f;

	for (int i = 0; i < 4; i++)
		s += (float)(simd_rand() % 20001) / 10000.0f - 1.0f;
	if (simd_rand() % 97 == 0)
		s *= 40.0f;
	return s;
}

/* a finite half of moderate size, either sign */
static uint16_t simd_randh(void)
{
	return quant_fp32_to_fp16(simd_randf() * 0.01f + 1e-4f);
}

static uint64_t simd_row_bytes(uint32_t type, int64_t n)
{
	uint64_t b = 0;

	ck_assert_int_eq(io_type_row_bytes(type, n, &b), 0);
	return b;
}

static uint32_t simd_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* dot_row (the running level's kernel) against the scalar emulation */
static void simd_check(const struct simd_kernel *k, int64_t n, const void *w,
		       const void *a, const char *what)
{
	float v = dot_row(k->type, n, w, a, k->repacked);
	float s = dot_row_scalar(k->type, n, w, a, k->repacked);

	ck_assert_msg(simd_bits(v) == simd_bits(s),
		      "%s %s n=%lld: simd %a, scalar %a", k->name, what,
		      (long long)n, v, s);
}

/*
 * Raw random bytes, with each half scale replaced by a finite one, and
 * Q8_K activations whose bsums are their sums (as the kernels assume).
 */
static void simd_fill_raw(uint32_t type, uint8_t *w, uint8_t *a, int64_t n)
{
	uint64_t wb = simd_row_bytes(type, n);
	uint64_t ab = simd_row_bytes(quant_vec_dot_type(type), n);
	uint64_t i;
	int64_t b, j;

	for (i = 0; i < wb; i++)
		w[i] = (uint8_t)simd_rand();
	for (i = 0; i < ab; i++) {
		a[i] = (uint8_t)simd_rand();
		/* -127 for -128 where the level's kernels want it (isa.h) */
		if (cpu_isa()->act_127 && a[i] == 0x80)
			a[i] = 0x81;
	}
	if (io_type_info(type)->block_elems == 32) {
		/* d (and m) of the weights, d (and s) of Q8_0/Q8_1 */
		size_t bw = io_type_info(type)->block_bytes;
		size_t ba = io_type_info(quant_vec_dot_type(type))->block_bytes;
		int halves = type == IO_TYPE_Q4_1 || type == IO_TYPE_Q5_1 ? 2 :
									    1;

		for (b = 0; b < n / 32; b++)
			for (int h = 0; h < halves; h++) {
				uint16_t v = simd_randh();

				memcpy(w + bw * b + 2 * h, &v, 2);
				v = simd_randh();
				memcpy(a + ba * b + 2 * h, &v, 2);
			}
		return;
	}
	for (b = 0; b < n / 256; b++) {
		size_t bw = io_type_info(type)->block_bytes;
		/* where the block's halves are: d, dmin first or d last */
		size_t at = type == IO_TYPE_Q4_K || type == IO_TYPE_Q5_K ? 0 :
			    type == IO_TYPE_Q2_K			 ? 80 :
									   bw - 2;
		int halves = type == IO_TYPE_Q4_K || type == IO_TYPE_Q5_K ||
					     type == IO_TYPE_Q2_K ?
				     2 :
				     1;

		for (int h = 0; h < halves; h++) {
			uint16_t v = simd_randh();

			memcpy(w + bw * b + at + 2 * h, &v, 2);
		}
	}
	for (b = 0; b < n / 256; b++) {
		uint8_t *q = a + 292 * b;
		float d = simd_randf() * 1e-3f;

		memcpy(q, &d, 4);
		for (j = 0; j < 16; j++) {
			int16_t s = 0;

			for (int e = 0; e < 16; e++)
				s = (int16_t)(s + (int8_t)q[4 + 16 * j + e]);
			memcpy(q + 4 + 256 + 2 * j, &s, 2);
		}
	}
}

/* Lengths: every block count up to 40, then a few long ones. */
static int64_t simd_length(uint32_t type, int i)
{
	static const int64_t blocks_long[] = { 64, 100, 127, 128, 344, 512 };
	int64_t bs = io_type_info(type)->block_elems;

	if (bs == 1) /* float rows: every length to 300, then long ones */
		return i < 300 ? i + 1 : 4096 + 37 * (i - 300);
	if (i < 40)
		return bs * (i + 1);
	return bs * blocks_long[(i - 40) % 6];
}

#define SIMD_CASES 46
#define SIMD_MAX (256 * 512)

START_TEST(test_simd_random_rows)
{
	struct simd_kernel kernel, *k = &kernel;
	uint32_t at;
	int cases;
	float *x, *y;
	uint8_t *w, *a;
	bool block;

	if (!simd_use(_i / SIMD_KERNELS) ||
	    !simd_kernel_at(_i % SIMD_KERNELS, k))
		return;
	at = quant_vec_dot_type(k->type);
	block = io_type_info(k->type)->block_elems > 1;
	cases = block ? SIMD_CASES : 306;
	x = malloc(sizeof(float) * SIMD_MAX);
	y = malloc(sizeof(float) * SIMD_MAX);
	w = malloc(simd_row_bytes(k->type, SIMD_MAX) + 64);
	a = malloc(simd_row_bytes(IO_TYPE_F32, SIMD_MAX) + 64);
	ck_assert(x && y && w && a);
	for (int i = 0; i < cases; i++) {
		int64_t n = simd_length(k->type, i);

		ck_assert_int_le(n, SIMD_MAX);
		for (int64_t j = 0; j < n; j++) {
			x[j] = simd_randf();
			y[j] = simd_randf();
		}
		/* valid rows, as models and activations hold them */
		quant_from_float_ref(k->type, x, w, n);
		quant_from_float(at, y, a, n);
		simd_check(k, n, w, a, "quantized");
		/* offset by 4 bytes: nothing may assume alignment */
		memmove(w + 4, w, simd_row_bytes(k->type, n));
		memmove(a + 4, a, simd_row_bytes(at, n));
		simd_check(k, n, w + 4, a + 4, "unaligned");
		if (block) {
			simd_fill_raw(k->type, w, a, n);
			simd_check(k, n, w, a, "raw bytes");
		}
	}
	free(x);
	free(y);
	free(w);
	free(a);
}
END_TEST

/* flash attention's K . Q: dot_f16 against its scalar twin */
START_TEST(test_simd_f16_attention_dot)
{
	uint16_t x[1100], y[1100];

	if (!simd_use(_i))
		return;
	for (int n = 1; n <= 1100; n += (n < 300 ? 1 : 53)) {
		for (int j = 0; j < n; j++) {
			x[j] = quant_fp32_to_fp16(simd_randf());
			y[j] = quant_fp32_to_fp16(simd_randf());
		}
		float v = dot_f16(n, x, y), s = dot_f16_scalar(n, x, y);

		ck_assert_msg(simd_bits(v) == simd_bits(s),
			      "%s dot_f16 n=%d: %a, scalar %a", cpu_isa()->name,
			      n, v, s);
	}
}
END_TEST

static const char *const simd_models[] = {
	"tiny-llama-spm32k-kquant.gguf",  "tiny-qwen3-bpe16k-mixq.gguf",
	"tiny-qwen3moe-bpe16k-q4km.gguf", "tiny-qwen2-bpe152k-legacyq.gguf",
	"tiny-qwen3-bpe16k-f16.gguf",	  "stories260K.gguf",
	"llama-2-tiny-random.gguf",
};

/*
 * dot_tile against dot_row_scalar for 1..DOT_TILE_ROWS rows and
 * 1..DOT_TILE_TOKENS tokens: every (row, token) float bit for bit, for
 * valid rows and for raw bytes (-128 in the activations), lengths of 1..24
 * blocks and a few long ones.
 */
START_TEST(test_simd_tile)
{
	const int64_t most = 256 * 64;
	struct simd_kernel kernel, *k = &kernel;
	const void *acts[DOT_TILE_TOKENS];
	float out[DOT_TILE_ROWS * DOT_TILE_TOKENS];
	uint8_t *w, *a, *raw_w, *packed;
	uint64_t ab, wb;
	uint32_t at;
	float *x;

	if (!simd_use(_i / SIMD_KERNELS))
		return;
	k->type = (uint32_t)(_i % SIMD_KERNELS / 2);
	k->repacked = _i % 2;
	if (!dot_tile_able(k->type, k->repacked))
		return;
	snprintf(k->name, sizeof(k->name), "%s %s%s tile", cpu_isa()->name,
		 quant_type_name(k->type), k->repacked ? " repacked" : "");
	at = quant_vec_dot_type(k->type);
	ab = simd_row_bytes(at, most);
	wb = simd_row_bytes(k->type, most);
	x = malloc(sizeof(float) * most);
	w = malloc(wb * DOT_TILE_ROWS);
	a = malloc(ab * DOT_TILE_TOKENS);
	raw_w = malloc(wb);
	packed = malloc(dot_tile_pack_bytes(k->type, most, DOT_TILE_TOKENS));
	ck_assert(x && w && a && raw_w && packed);
	for (int i = 0; i < 30; i++) {
		int64_t n = simd_length(k->type, i < 24 ? i : 40 + i - 24);
		uint64_t rb = simd_row_bytes(k->type, n);

		if (n > most)
			continue;
		for (int raw = 0; raw < 2; raw++) {
			for (int t = 0; t < DOT_TILE_TOKENS; t++) {
				acts[t] = a + ab * t;
				if (raw) {
					simd_fill_raw(k->type, raw_w,
						      a + ab * t, n);
					if (t < DOT_TILE_ROWS)
						memcpy(w + rb * t, raw_w, rb);
					continue;
				}
				for (int64_t j = 0; j < n; j++)
					x[j] = simd_randf();
				if (t < DOT_TILE_ROWS)
					quant_from_float_ref(k->type, x,
							     w + rb * t, n);
				for (int64_t j = 0; j < n; j++)
					x[j] = simd_randf();
				quant_from_float(at, x, a + ab * t, n);
			}
			for (int nt = 1; nt <= DOT_TILE_TOKENS; nt++) {
				dot_tile_pack(k->type, n, acts, (uint32_t)nt,
					      packed);
				for (int nr = 1; nr <= DOT_TILE_ROWS; nr++) {
					ck_assert_msg(dot_tile(k->type, n, w,
							       rb, nr, acts,
							       packed, nt, out,
							       k->repacked),
						      "%s: no kernel", k->name);
					for (int r = 0; r < nr; r++)
						for (int t = 0; t < nt; t++) {
							float s = dot_row_scalar(
								k->type, n,
								w + rb * r,
								acts[t],
								k->repacked);
							float o = out
								[DOT_TILE_TOKENS *
									 r +
								 t];

							ck_assert_msg(
								simd_bits(o) ==
									simd_bits(
										s),
								"%s%s n=%lld row %d of %d token %d of %d: tile %a, scalar %a",
								k->name,
								raw ? " raw" :
								      "",
								(long long)n, r,
								nr, t, nt, o,
								s);
						}
				}
			}
		}
	}
	free(x);
	free(w);
	free(a);
	free(raw_w);
	free(packed);
}
END_TEST

#define SIMD_REAL_ROWS 24

/*
 * Every tensor of a kernel's type in every shared model: its first rows
 * (rows of the 3-d expert tensors included) against one activation row.
 */
#define SIMD_MODELS ((int)(sizeof(simd_models) / sizeof(simd_models[0])))

START_TEST(test_simd_real_tensors)
{
	const char *model = simd_models[_i % SIMD_MODELS];
	struct io_gguf *g = NULL;
	struct err err = { 0 };
	char path[1024];
	int tested = 0;

	if (!simd_use(_i / SIMD_MODELS))
		return;
	check_shared_path(path, sizeof(path), "models/%s", model);
	if (access(path, R_OK) != 0) {
		printf("%s: missing, skipped\n", path);
		return;
	}
	ck_assert_msg(io_gguf_open(&g, path, &err) == 0, "%s", err.msg);
	for (uint64_t t = 0; t < g->n_tensors; t++) {
		const struct io_gguf_tensor *ti = &g->tensors[t];
		struct simd_kernel k[2];
		int nk = 0, ki;
		int64_t n = ti->ne[0],
			rows = ti->bytes / simd_row_bytes(ti->type, ti->ne[0]);
		uint64_t rb;
		uint8_t *w, *a;
		float *y;
		int fd;

		/* the level's kernels of this type, plain and repacked */
		if (ti->type >= IO_TYPE_COUNT)
			continue;
		for (ki = 0; ki < 2; ki++)
			nk += simd_kernel_at(2 * (int)ti->type + ki, &k[nk]);
		if (!nk)
			continue;
		rows = rows < SIMD_REAL_ROWS ? rows : SIMD_REAL_ROWS;
		rb = simd_row_bytes(ti->type, n);
		w = malloc(rb * rows);
		a = malloc(simd_row_bytes(quant_vec_dot_type(ti->type), n));
		y = malloc(sizeof(float) * n);
		ck_assert(w && a && y);
		fd = open(g->files[ti->file].path, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, w, rb * rows, (off_t)ti->offset),
				 (ssize_t)(rb * rows));
		close(fd);
		for (int64_t j = 0; j < n; j++)
			y[j] = simd_randf();
		quant_from_float(quant_vec_dot_type(ti->type), y, a, n);
		for (ki = 0; ki < nk; ki++)
			for (int64_t r = 0; r < rows; r++)
				simd_check(&k[ki], n, w + r * rb, a, ti->name);
		tested++;
		free(w);
		free(a);
		free(y);
	}
	io_gguf_close(g);
	printf("%s %s: %d tensors compared\n", cpu_isa()->name, model, tested);
}
END_TEST

static void simd_tests(TCase *tc)
{
	const int nl = simd_level_count();

	tcase_add_loop_test(tc, test_simd_random_rows, 0, nl * SIMD_KERNELS);
	tcase_add_loop_test(tc, test_simd_f16_attention_dot, 0, nl);
	tcase_add_loop_test(tc, test_simd_tile, 0, nl * SIMD_KERNELS);
	tcase_add_loop_test(tc, test_simd_real_tensors, 0, nl * SIMD_MODELS);
}

/* A level this CPU lacks was not compared: not a whole pass. */
static int simd_left_out(void)
{
	int i, missing = 0;

	for (i = 0; i < simd_level_count(); i++)
		if (!simd_level(i)->usable()) {
			printf("test_simd: this CPU lacks %s: the %s kernels were not compared\n",
			       simd_level(i)->features, simd_level(i)->name);
			missing++;
		}
	return missing ? CHECK_SKIP : 0;
}

const struct check_main check_main = {
	.name = "simd",
	.timeout = 120,
	.add_tests = simd_tests,
	.left_out = simd_left_out,
};
