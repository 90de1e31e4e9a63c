// SPDX-License-Identifier: MIT
/*
 * engine/quant/quant.h against the live ggml, on random rows: the prebuilt
 * libraries of node-llama-cpp (the build behind ../shared/golden) are
 * loaded with dlopen and run on the same inputs as our code.
 *
 *   libggml-base.so       dequantize_row_*, quantize_row_*_ref
 *   libggml-cpu-zen4.so   the activation quantizers and vec_dot kernels
 *                         of the golden path (AVX-512); on a CPU without
 *                         AVX-512, libggml-cpu-haswell.so, which runs
 *                         the same AVX2 kernels for these types (the same
 *                         bits: quant_vec_dot_x86's order)
 *   libggml-cpu-x64.so    the same compiled without SIMD or FMA: ggml's
 *                         scalar (*_generic) order
 *
 * test_quant.c holds fixed values computed once from the same libraries;
 * this test draws many more rows (widths 256 to 8192, seeds 0..N) and
 * needs the libraries at run time. It exits 77 when they are missing
 * (set LLMFS_GGML_LIBDIR, default $SHARED/../ref/node_modules/
 * @node-llama-cpp/linux-x64/bins/linux-x64).
 */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/quant/quant.h"
#include "quant_inputs.h"
#include "../common/check_main.h"

#define SEEDS 100
#define NMAX 8192

typedef void (*to_float_fn)(const void *, float *, int64_t);
typedef void (*from_float_fn)(const float *, void *, int64_t);
typedef void (*vec_dot_fn)(int, float *, size_t, const void *, size_t,
			   const void *, size_t, int);

static void *lib_base, *lib_simd, *lib_x64;

static const uint32_t block_types[] = {
	IO_TYPE_Q4_0, IO_TYPE_Q4_1, IO_TYPE_Q5_0, IO_TYPE_Q5_1, IO_TYPE_Q8_0,
	IO_TYPE_Q2_K, IO_TYPE_Q3_K, IO_TYPE_Q4_K, IO_TYPE_Q5_K, IO_TYPE_Q6_K,
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static void *sym(void *lib, const char *fmt, const char *arg)
{
	char name[96];
	void *p;

	snprintf(name, sizeof(name), fmt, arg);
	p = dlsym(lib, name);
	ck_assert_msg(p != NULL, "libggml has no %s", name);
	return p;
}

static const char *vec_dot_name(uint32_t t)
{
	switch (t) {
	case IO_TYPE_Q4_0: return "ggml_vec_dot_q4_0_q8_0";
	case IO_TYPE_Q4_1: return "ggml_vec_dot_q4_1_q8_1";
	case IO_TYPE_Q5_0: return "ggml_vec_dot_q5_0_q8_0";
	case IO_TYPE_Q5_1: return "ggml_vec_dot_q5_1_q8_1";
	case IO_TYPE_Q8_0: return "ggml_vec_dot_q8_0_q8_0";
	case IO_TYPE_Q2_K: return "ggml_vec_dot_q2_K_q8_K";
	case IO_TYPE_Q3_K: return "ggml_vec_dot_q3_K_q8_K";
	case IO_TYPE_Q4_K: return "ggml_vec_dot_q4_K_q8_K";
	case IO_TYPE_Q5_K: return "ggml_vec_dot_q5_K_q8_K";
	default: return "ggml_vec_dot_q6_K_q8_K";
	}
}

static uint64_t row_bytes(uint32_t type, int64_t n)
{
	uint64_t b = 0;

	ck_assert_int_eq(io_type_row_bytes(type, n, &b), 0);
	return b;
}

/* A width from 256 to 8192 for this seed, a multiple of 256. */
static int64_t width(uint32_t seed)
{
	return 256 * (1 + (int64_t)(seed * 2654435761u >> 27));
}

/*
 * One weight type over SEEDS random rows: the reference quantizer's bytes,
 * the dequantized floats, the activation bytes and both dot orders must
 * equal ggml's exactly.
 */
START_TEST(test_quant_ggml_random_rows)
{
	const uint32_t t = block_types[_i];
	const uint32_t at = quant_vec_dot_type(t);
	const char *tn = io_type_info(t)->name, *an = io_type_info(at)->name;
	from_float_fn ref = sym(lib_base, "quantize_row_%s_ref", tn);
	to_float_fn deq = sym(lib_base, "dequantize_row_%s", tn);
	from_float_fn act = sym(lib_simd, "quantize_row_%s", an);
	vec_dot_fn dz = sym(lib_simd, "%s", vec_dot_name(t));
	vec_dot_fn ds = sym(lib_x64, "%s", vec_dot_name(t));
	static float x[NMAX], v[NMAX], y0[NMAX], y1[NMAX];
	static unsigned char w0[NMAX * 2], w1[NMAX * 2], a0[NMAX * 2],
		a1[NMAX * 2];

	for (uint32_t seed = 0; seed < SEEDS; seed++) {
		int64_t n = width(seed);
		float s0, s1;

		quant_inputs_fill(x, n, 7000 + 31 * seed + t);
		quant_inputs_fill(v, n, 9000 + 37 * seed + t);
		memset(w0, 0, sizeof(w0));
		memset(w1, 0, sizeof(w1));
		ref(x, w0, n);
		quant_from_float_ref(t, x, w1, n);
		ck_assert_msg(!memcmp(w0, w1, row_bytes(t, n)),
			      "%s seed %u: quantized bytes differ", tn, seed);
		deq(w0, y0, n);
		quant_to_float(t, w0, y1, n);
		ck_assert_msg(!memcmp(y0, y1, sizeof(float) * n),
			      "%s seed %u: dequantized floats differ", tn,
			      seed);
		memset(a0, 0, sizeof(a0));
		memset(a1, 0, sizeof(a1));
		act(v, a0, n);
		quant_from_float(at, v, a1, n);
		ck_assert_msg(!memcmp(a0, a1, row_bytes(at, n)),
			      "%s seed %u: activations differ", an, seed);
		dz(n, &s0, 0, w0, 0, a0, 0, 1);
		s1 = quant_vec_dot_x86(t, n, w0, a0);
		ck_assert_msg(!memcmp(&s0, &s1, sizeof(s0)),
			      "%s seed %u n %lld: x86 order %a, ggml %a", tn,
			      seed, (long long)n, s1, s0);
		ds(n, &s0, 0, w0, 0, a0, 0, 1);
		s1 = quant_vec_dot(t, n, w0, a0);
		ck_assert_msg(!memcmp(&s0, &s1, sizeof(s0)),
			      "%s seed %u n %lld: %a, ggml scalar %a", tn, seed,
			      (long long)n, s1, s0);
	}
}
END_TEST

/* Half and bfloat16 conversions of random rows, through the CPU backend. */
START_TEST(test_quant_ggml_random_halves)
{
	from_float_fn f16 = sym(lib_simd, "%s", "ggml_cpu_fp32_to_fp16");
	from_float_fn bf16 = sym(lib_simd, "%s", "ggml_cpu_fp32_to_bf16");
	static float x[NMAX];
	static uint16_t h0[NMAX], h1[NMAX];

	for (uint32_t seed = 0; seed < SEEDS; seed++) {
		/* random bit patterns: every exponent, NaN and inf included */
		for (int i = 0; i < NMAX; i++) {
			uint32_t u = (seed * NMAX + (uint32_t)i) * 0x2545F491u;

			memcpy(&x[i], &u, sizeof(u));
		}
		f16(x, h0, NMAX);
		quant_from_float(IO_TYPE_F16, x, h1, NMAX);
		ck_assert_msg(!memcmp(h0, h1, sizeof(h0)), "fp16 seed %u",
			      seed);
		bf16(x, h0, NMAX);
		quant_from_float(IO_TYPE_BF16, x, h1, NMAX);
		ck_assert_msg(!memcmp(h0, h1, sizeof(h0)), "bf16 seed %u",
			      seed);
	}
}
END_TEST

static void *open_lib(const char *dir, const char *name)
{
	char path[1024];

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >=
	    (int)sizeof(path))
		return NULL;
	return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

/* ggml's own CPU builds from LLMFS_GGML_LIBDIR, or from node-llama-cpp
 * under LLAMA_REF_DIR (make ref). */
static int quant_ggml_setup(void)
{
	const char *dir = getenv("LLMFS_GGML_LIBDIR");
	const char *ref = getenv("LLAMA_REF_DIR");
	char def[1024], path[1024];

	if (!dir) {
		if (snprintf(def, sizeof(def),
			     "%s/node_modules/"
			     "@node-llama-cpp/linux-x64/bins/linux-x64",
			     ref ? ref : "ref") >= (int)sizeof(def))
			def[0] = 0;
		dir = def;
	}
	/* global: the CPU builds resolve their ggml_* symbols against it */
	if (snprintf(path, sizeof(path), "%s/libggml-base.so", dir) <
	    (int)sizeof(path))
		lib_base = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!lib_base) {
		printf("no libggml-base.so under %s (set LLMFS_GGML_LIBDIR)\n",
		       dir);
		return CHECK_SKIP;
	}
	/* what -march=znver4 lets that build use without asking */
	if (__builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512vnni") &&
	    __builtin_cpu_supports("avx512bf16"))
		lib_simd = open_lib(dir, "libggml-cpu-zen4.so");
	else
		lib_simd = open_lib(dir, "libggml-cpu-haswell.so");
	lib_x64 = open_lib(dir, "libggml-cpu-x64.so");
	if (!lib_simd || !lib_x64) {
		printf("cannot load the CPU builds under %s: %s\n", dir,
		       dlerror());
		return CHECK_SKIP;
	}
	((void (*)(void))dlsym(lib_simd, "ggml_cpu_init"))();
	((void (*)(void))dlsym(lib_x64, "ggml_cpu_init"))();
	return 0;
}

static void quant_ggml_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_quant_ggml_random_rows, 0,
			    (int)ARRAY_SIZE(block_types));
	tcase_add_test(tc, test_quant_ggml_random_halves);
}

const struct check_main check_main = {
	.name = "quant_ggml",
	.timeout = 120,
	.setup = quant_ggml_setup,
	.add_tests = quant_ggml_tests,
};
