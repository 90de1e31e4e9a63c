/* SPDX-License-Identifier: MIT */
/*
 * Computes the expected values of test_quant.c with the real ggml: the
 * prebuilt libraries node-llama-cpp ships (release in
 * bins/linux-x64/_nlcBuildMetadata.json), the same ones that wrote the
 * golden files. Not part of the build; prints C initializers to paste into
 * test_quant.c:
 *
 *   L=../ref/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
 *   make build/libllmfs-io.a
 *   cc -O1 -std=gnu11 -o /tmp/qgen tests/engine/quant_fixtures_gen.c \
 *      build/libllmfs-io.a -L$L -l:libggml-base.so -Wl,-rpath,$L -ldl -lm \
 *      $(pkg-config --libs liburing numa)
 *   /tmp/qgen $L ../shared/models > /tmp/fixtures.c
 *
 * libggml-base.so gives dequantize_row_* and quantize_row_*_ref;
 * libggml-cpu-zen4.so (AVX-512, the golden path) the activation quantizers
 * and its vec_dot kernels; libggml-cpu-x64.so (baseline x86-64: no AVX, no
 * FMA, GGML_SIMD off) the scalar vec_dot code, which is ggml's *_generic
 * and scalar vec.cpp paths compiled without fused multiply-adds.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../io/io.h"
#include "quant_inputs.h"

typedef void (*to_float_fn)(const void *, float *, int64_t);
typedef void (*from_float_fn)(const float *, void *, int64_t);
typedef void (*vec_dot_fn)(int, float *, size_t, const void *, size_t,
			   const void *, size_t, int);

static void *base, *zen4, *x64;
static const char *models;

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		fprintf(stderr, "missing %s\n", name);
		exit(1);
	}
	return p;
}

static uint32_t fbits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static const char *tname(uint32_t t)
{
	return io_type_info(t)->name;
}

/* "q4_K" -> "Q4_K", for the IO_TYPE_ names */
static const char *uname(uint32_t t)
{
	static char buf[4][16];
	static int i;
	char *b = buf[i++ % 4];

	snprintf(b, 16, "%s", tname(t));
	for (char *c = b; *c; c++)
		if (*c >= 'a' && *c <= 'z')
			*c = (char)(*c - 32);
	return b;
}

static const char *dot_name(uint32_t t)
{
	switch (t) {
	case IO_TYPE_F32: return "ggml_vec_dot_f32";
	case IO_TYPE_F16: return "ggml_vec_dot_f16";
	case IO_TYPE_BF16: return "ggml_vec_dot_bf16";
	case IO_TYPE_Q4_0: return "ggml_vec_dot_q4_0_q8_0";
	case IO_TYPE_Q4_1: return "ggml_vec_dot_q4_1_q8_1";
	case IO_TYPE_Q5_0: return "ggml_vec_dot_q5_0_q8_0";
	case IO_TYPE_Q5_1: return "ggml_vec_dot_q5_1_q8_1";
	case IO_TYPE_Q8_0: return "ggml_vec_dot_q8_0_q8_0";
	case IO_TYPE_Q2_K: return "ggml_vec_dot_q2_K_q8_K";
	case IO_TYPE_Q3_K: return "ggml_vec_dot_q3_K_q8_K";
	case IO_TYPE_Q4_K: return "ggml_vec_dot_q4_K_q8_K";
	case IO_TYPE_Q5_K: return "ggml_vec_dot_q5_K_q8_K";
	case IO_TYPE_Q6_K: return "ggml_vec_dot_q6_K_q8_K";
	}
	return NULL;
}

static uint32_t act_type(uint32_t t)
{
	switch (t) {
	case IO_TYPE_Q4_0:
	case IO_TYPE_Q5_0:
	case IO_TYPE_Q8_0: return IO_TYPE_Q8_0;
	case IO_TYPE_Q4_1:
	case IO_TYPE_Q5_1: return IO_TYPE_Q8_1;
	case IO_TYPE_F32:
	case IO_TYPE_F16:
	case IO_TYPE_BF16: return t;
	default: return IO_TYPE_Q8_K;
	}
}

/* The x86 CPU backend's from_float (ggml-cpu.c type_traits_cpu). */
static void act_quantize(void *lib, uint32_t t, const float *x, void *y,
			 int64_t n)
{
	switch (t) {
	case IO_TYPE_F32: memcpy(y, x, n * 4); break;
	case IO_TYPE_F16:
		((from_float_fn)sym(lib, "ggml_cpu_fp32_to_fp16"))(x, y, n);
		break;
	case IO_TYPE_BF16:
		((from_float_fn)sym(lib, "ggml_cpu_fp32_to_bf16"))(x, y, n);
		break;
	case IO_TYPE_Q8_0:
		((from_float_fn)sym(lib, "quantize_row_q8_0"))(x, y, n);
		break;
	case IO_TYPE_Q8_1:
		((from_float_fn)sym(lib, "quantize_row_q8_1"))(x, y, n);
		break;
	case IO_TYPE_Q8_K:
		((from_float_fn)sym(lib, "quantize_row_q8_K"))(x, y, n);
		break;
	}
}

static void dequant(uint32_t t, const void *x, float *y, int64_t n)
{
	char name[64];

	if (t == IO_TYPE_F32) {
		memcpy(y, x, n * 4);
		return;
	}
	if (t == IO_TYPE_F16)
		snprintf(name, sizeof(name), "ggml_fp16_to_fp32_row");
	else if (t == IO_TYPE_BF16)
		snprintf(name, sizeof(name), "ggml_bf16_to_fp32_row");
	else
		snprintf(name, sizeof(name), "dequantize_row_%s", tname(t));
	((to_float_fn)sym(base, name))(x, y, n);
}

static void *read_rows(const char *model, const char *tensor, int rows,
		       uint32_t *type, int64_t *ne0, uint64_t *row_bytes)
{
	char path[512];
	struct io_gguf *g;
	struct err err = { 0 };
	const struct io_gguf_tensor *t;
	void *buf;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", models, model);
	if (io_gguf_open(&g, path, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	t = io_gguf_find_tensor(g, tensor);
	if (!t || t->ne[1] < rows) {
		fprintf(stderr, "%s: no %s\n", model, tensor);
		exit(1);
	}
	*type = t->type;
	*ne0 = t->ne[0];
	io_type_row_bytes(t->type, t->ne[0], row_bytes);
	buf = malloc(*row_bytes * rows);
	f = fopen(g->files[t->file].path, "rb");
	fseek(f, (long)t->offset, SEEK_SET);
	if (fread(buf, *row_bytes, rows, f) != (size_t)rows)
		exit(1);
	fclose(f);
	io_gguf_close(g);
	return buf;
}

struct pick {
	const char *model, *tensor;
	int deq_rows, dot_rows;
	uint32_t seed;
};

static const struct pick picks[] = {
	{ "tiny-qwen2-bpe152k-legacyq.gguf", "token_embd.weight", 64, 8, 1 },
	{ "tiny-qwen2-bpe152k-legacyq.gguf", "blk.0.attn_q.weight", 32, 8, 2 },
	{ "tiny-qwen2-bpe152k-legacyq.gguf", "blk.0.attn_k.weight", 16, 8, 3 },
	{ "tiny-qwen2-bpe152k-legacyq.gguf", "blk.0.attn_v.weight", 16, 8, 4 },
	{ "tiny-qwen2-bpe152k-legacyq.gguf", "blk.0.attn_output.weight", 32, 8,
	  5 },
	{ "tiny-qwen2-bpe152k-legacyq.gguf", "blk.0.ffn_gate.weight", 64, 8,
	  6 },
	{ "tiny-qwen2-bpe152k-legacyq.gguf", "blk.0.ffn_up.weight", 64, 8, 7 },
	{ "tiny-qwen2-bpe152k-legacyq.gguf", "blk.1.ffn_down.weight", 32, 8,
	  8 },
	{ "tiny-llama-spm32k-kquant.gguf", "blk.1.attn_q.weight", 16, 8, 9 },
	{ "tiny-llama-spm32k-kquant.gguf", "blk.1.attn_k.weight", 16, 8, 10 },
	{ "tiny-llama-spm32k-kquant.gguf", "blk.0.attn_k.weight", 16, 8, 11 },
	{ "tiny-llama-spm32k-kquant.gguf", "blk.1.attn_v.weight", 16, 8, 12 },
	{ "tiny-llama-spm32k-kquant.gguf", "blk.0.attn_v.weight", 16, 8, 13 },
	{ "tiny-llama-spm32k-kquant.gguf", "blk.0.ffn_down.weight", 16, 8, 14 },
	{ "tiny-llama-spm32k-kquant.gguf", "blk.1.ffn_down.weight", 16, 8, 15 },
	{ "tiny-qwen3-bpe16k-mixq.gguf", "blk.0.attn_k.weight", 16, 8, 16 },
	{ "tiny-qwen3-bpe16k-mixq.gguf", "blk.1.attn_k.weight", 16, 8, 17 },
	{ "tiny-qwen3-bpe16k-mixq.gguf", "blk.1.attn_q.weight", 16, 8, 18 },
	{ "tiny-qwen3-bpe16k-mixq.gguf", "blk.0.attn_output.weight", 16, 8,
	  19 },
	{ "tiny-qwen3-bpe16k-mixq.gguf", "blk.1.attn_output.weight", 16, 8,
	  20 },
	{ "tiny-qwen3-bpe16k-mixq.gguf", "blk.1.ffn_up.weight", 16, 8, 21 },
	{ "stories260K.gguf", "blk.0.attn_q.weight", 16, 8, 22 },
};

static void gen_tensors(void)
{
	printf("/* model, tensor, type, rows, hash of dequantized floats, "
	       "first 4 floats; dot: seed, act hash, x64 dots, zen4 dots */\n");
	for (size_t p = 0; p < sizeof(picks) / sizeof(picks[0]); p++) {
		const struct pick *k = &picks[p];
		uint32_t type;
		int64_t ne0;
		uint64_t rb, ab;
		void *w = read_rows(k->model, k->tensor, k->deq_rows, &type,
				    &ne0, &rb);
		float *y = malloc(sizeof(float) * ne0 * k->deq_rows);
		float *x = malloc(sizeof(float) * ne0);
		void *a = calloc(1, ne0 * 4 + 1024);
		float s64[8], sz4[8];

		dequant(type, w, y, ne0 * k->deq_rows);
		quant_inputs_fill(x, ne0, k->seed);
		act_quantize(zen4, act_type(type), x, a, ne0);
		io_type_row_bytes(act_type(type), ne0, &ab);
		for (int r = 0; r < k->dot_rows; r++) {
			((vec_dot_fn)sym(x64, dot_name(type)))(
				ne0, &s64[r], 0, (char *)w + r * rb, 0, a, 0,
				1);
			((vec_dot_fn)sym(zen4, dot_name(type)))(
				ne0, &sz4[r], 0, (char *)w + r * rb, 0, a, 0,
				1);
		}
		printf("\t{ \"%s\", \"%s\", IO_TYPE_%s, %d,\n"
		       "\t  0x%016llxull, { 0x%08x, 0x%08x, 0x%08x, 0x%08x },\n"
		       "\t  %u, 0x%016llxull,\n\t  {",
		       k->model, k->tensor, uname(type), k->deq_rows,
		       (unsigned long long)quant_inputs_hash(
			       y, sizeof(float) * ne0 * k->deq_rows),
		       fbits(y[0]), fbits(y[1]), fbits(y[2]), fbits(y[3]),
		       k->seed, (unsigned long long)quant_inputs_hash(a, ab));
		for (int r = 0; r < 8; r++)
			printf(" 0x%08x,", fbits(s64[r]));
		printf(" },\n\t  {");
		for (int r = 0; r < 8; r++)
			printf(" 0x%08x,", fbits(sz4[r]));
		printf(" } },\n");
		free(w);
		free(y);
		free(x);
		free(a);
	}
}

#define NACT 1024

static void act_input(float *x)
{
	quant_inputs_fill(x, NACT, 7);
	memset(x + 512, 0, 256 * sizeof(float)); /* a zero super-block */
}

static void gen_activations(void)
{
	static const uint32_t types[] = { IO_TYPE_Q8_0, IO_TYPE_Q8_1,
					  IO_TYPE_Q8_K, IO_TYPE_F16,
					  IO_TYPE_BF16 };
	float x[NACT], t[256];
	static unsigned char y[NACT * 4];
	uint64_t b;

	act_input(x);
	quant_inputs_ties(t, 256);
	printf("/* type, hash of zen4 from_float(act_input), of "
	       "from_float(ties) */\n");
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		uint64_t h1, h2;

		/* ggml leaves bsums of a zero Q8_K block unwritten */
		memset(y, 0, sizeof(y));
		io_type_row_bytes(types[i], NACT, &b);
		act_quantize(zen4, types[i], x, y, NACT);
		h1 = quant_inputs_hash(y, b);
		io_type_row_bytes(types[i], 256, &b);
		act_quantize(zen4, types[i], t, y, 256);
		h2 = quant_inputs_hash(y, b);
		printf("\t{ IO_TYPE_%s, 0x%016llxull, 0x%016llxull },\n",
		       uname(types[i]), (unsigned long long)h1,
		       (unsigned long long)h2);
	}
}

static void gen_ref_quants(void)
{
	static const uint32_t types[] = {
		IO_TYPE_Q4_0, IO_TYPE_Q4_1, IO_TYPE_Q5_0, IO_TYPE_Q5_1,
		IO_TYPE_Q8_0, IO_TYPE_Q8_1, IO_TYPE_Q2_K, IO_TYPE_Q3_K,
		IO_TYPE_Q4_K, IO_TYPE_Q5_K, IO_TYPE_Q6_K, IO_TYPE_Q8_K,
	};
	float x[NACT];
	static unsigned char y[NACT * 4];
	char name[64];
	uint64_t b;

	act_input(x);
	printf("/* type, hash of quantize_row_*_ref(act_input) */\n");
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		snprintf(name, sizeof(name), "quantize_row_%s_ref",
			 tname(types[i]));
		memset(y, 0, sizeof(y));
		((from_float_fn)sym(base, name))(x, y, NACT);
		io_type_row_bytes(types[i], NACT, &b);
		printf("\t{ IO_TYPE_%s, 0x%016llxull },\n", uname(types[i]),
		       (unsigned long long)quant_inputs_hash(y, b));
	}
}

static void gen_halves(void)
{
	static uint16_t h[65536];
	static float f[65536];
	uint16_t (*f2bf)(float) = sym(base, "ggml_fp32_to_bf16");
	uint64_t hh = 0xcbf29ce484222325ull, hb = hh;

	for (int i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	((to_float_fn)sym(zen4, "ggml_cpu_fp16_to_fp32"))(h, f, 65536);
	printf("/* all 65536 halves through F16C (zen4 ggml_cpu_fp16_to_fp32): "
	       "0x%016llxull */\n",
	       (unsigned long long)quant_inputs_hash(f, sizeof(f)));
	/* 2^20 float bit patterns spread over every exponent, NaNs too */
	for (uint32_t i = 0; i < (1u << 20); i += 16384) {
		float in[16384];
		uint16_t out[16384], outb[16384];

		for (uint32_t j = 0; j < 16384; j++) {
			uint32_t u = (i + j) * 0x9E3779B1u;

			memcpy(&in[j], &u, 4);
			outb[j] = f2bf(in[j]);
		}
		((from_float_fn)sym(zen4, "ggml_cpu_fp32_to_fp16"))(in, out,
								    16384);
		for (uint32_t j = 0; j < 16384; j++) {
			hh = (hh ^ (out[j] & 0xff)) * 0x100000001b3ull;
			hh = (hh ^ (out[j] >> 8)) * 0x100000001b3ull;
			hb = (hb ^ (outb[j] & 0xff)) * 0x100000001b3ull;
			hb = (hb ^ (outb[j] >> 8)) * 0x100000001b3ull;
		}
	}
	printf("/* sweep fp32->fp16 (zen4 F16C): 0x%016llxull, "
	       "fp32->bf16 (ggml_fp32_to_bf16): 0x%016llxull */\n",
	       (unsigned long long)hh, (unsigned long long)hb);
}

/*
 * Long synthetic rows (4096 wide: 128 blocks, 16 super-blocks), where the
 * summation order shows: weights from quantize_row_*_ref, activations from
 * zen4's from_float, dots from both builds.
 */
static void gen_long_dots(void)
{
	static const uint32_t types[] = {
		IO_TYPE_Q4_0, IO_TYPE_Q4_1, IO_TYPE_Q5_0, IO_TYPE_Q5_1,
		IO_TYPE_Q8_0, IO_TYPE_Q2_K, IO_TYPE_Q3_K, IO_TYPE_Q4_K,
		IO_TYPE_Q5_K, IO_TYPE_Q6_K,
	};
	enum { N = 4096 };
	static float x[N], v[N];
	static unsigned char w[N * 2], a[N * 2];
	char name[64];

	printf("/* type, zen4 / x64 dot of ref(fill(4096, 500 + type)) and "
	       "from_float(fill(4096, 600 + type)) */\n");
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		uint32_t t = types[i];
		float s64, sz4;

		quant_inputs_fill(x, N, 500 + t);
		quant_inputs_fill(v, N, 600 + t);
		snprintf(name, sizeof(name), "quantize_row_%s_ref", tname(t));
		((from_float_fn)sym(base, name))(x, w, N);
		act_quantize(zen4, act_type(t), v, a, N);
		((vec_dot_fn)sym(x64, dot_name(t)))(N, &s64, 0, w, 0, a, 0, 1);
		((vec_dot_fn)sym(zen4, dot_name(t)))(N, &sz4, 0, w, 0, a, 0, 1);
		printf("\t{ IO_TYPE_%s, 0x%08x, 0x%08x },\n", uname(t),
		       fbits(sz4), fbits(s64));
	}
}

int main(int argc, char **argv)
{
	char path[512];

	if (argc != 3) {
		fprintf(stderr, "usage: qgen LIBDIR MODELDIR\n");
		return 2;
	}
	models = argv[2];
	base = dlopen("libggml-base.so", RTLD_NOW | RTLD_GLOBAL);
	snprintf(path, sizeof(path), "%s/libggml-cpu-zen4.so", argv[1]);
	zen4 = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	snprintf(path, sizeof(path), "%s/libggml-cpu-x64.so", argv[1]);
	x64 = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!base || !zen4 || !x64) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	((void (*)(void))sym(zen4, "ggml_cpu_init"))();
	((void (*)(void))sym(x64, "ggml_cpu_init"))();
	gen_halves();
	gen_activations();
	gen_ref_quants();
	gen_tensors();
	gen_long_dots();
	return 0;
}
