// SPDX-License-Identifier: MIT
/*
 * Tests of engine/quant/quant.h against the real ggml.
 *
 * Every expected value below was computed by tests/engine/quant_fixtures_gen.c
 * (see its header for the command line) with the prebuilt ggml libraries of
 * node-llama-cpp, the build that wrote ../shared/golden:
 *   - libggml-base.so: dequantize_row_*, quantize_row_*_ref,
 *     ggml_fp32_to_bf16;
 *   - libggml-cpu-zen4.so (AVX-512, the golden path): quantize_row_q8_0,
 *     quantize_row_q8_1, quantize_row_q8_K, ggml_cpu_fp32_to_fp16 (F16C),
 *     ggml_cpu_fp16_to_fp32, ggml_cpu_fp32_to_bf16 and its vec_dot kernels;
 *   - libggml-cpu-x64.so (baseline x86-64, no FMA, GGML_SIMD off): the same
 *     vec_dot functions compiled from ggml's scalar (*_generic) code.
 * Inputs are the deterministic vectors of quant_inputs.h and real rows of
 * the models in $SHARED/models, found with io_gguf_open. Hashes are FNV-1a
 * 64 of the output bytes (floats as their bits), so a match is bit-exact.
 *
 * What must hold: dequantization, activation quantization, the reference
 * weight quantizers and the half/bfloat16 conversions are bit-exact; the
 * dot products equal the scalar build's bit for bit and stay within
 * DOT_REL_ZEN4 of the AVX-512 kernels, whose summation order differs;
 * quant_vec_dot_x86 equals the zen4 kernels bit for bit.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/quant/quant.h"
#include "quant_inputs.h"
#include "../common/check_main.h"

#define NACT 1024

/*
 * The AVX-512 kernels sum in another order: the largest relative
 * difference measured over these fixtures is 4.1e-6 (Q5_K), most are
 * below 1e-6 and some are equal.
 */
#define DOT_REL_ZEN4 1e-5

static const uint64_t hash_halves_f16c = 0x5d79f1b086f30345ull;
static const uint64_t hash_sweep_fp16 = 0x9b69691329feba06ull;
static const uint64_t hash_sweep_bf16 = 0x2f11fc999a9bcf4full;

/* type, hash of zen4 from_float(act_input), of from_float(ties) */
static const struct {
	uint32_t type;
	uint64_t input, ties;
} act_fixtures[] = {
	{ IO_TYPE_Q8_0, 0xd8536cbdbc03b30dull, 0x805a320e6c03756dull },
	{ IO_TYPE_Q8_1, 0xec03e4414bbe5534ull, 0x9f169aab02da6ce1ull },
	{ IO_TYPE_Q8_K, 0x34839ccb39c660efull, 0xc4e213a3b0d8e1f3ull },
	{ IO_TYPE_F16, 0xec0259d4a4404e0bull, 0xe8de1f6e4400664dull },
	{ IO_TYPE_BF16, 0x966f2d53e4d0c253ull, 0x5c7f9602c99944e9ull },
};

/* type, hash of libggml-base quantize_row_*_ref(act_input) */
static const struct {
	uint32_t type;
	uint64_t hash;
} ref_fixtures[] = {
	{ IO_TYPE_Q4_0, 0x40c8b557e267efdbull },
	{ IO_TYPE_Q4_1, 0x683d6a710310d868ull },
	{ IO_TYPE_Q5_0, 0xe32095bd6671147eull },
	{ IO_TYPE_Q5_1, 0x37616e015cc23f82ull },
	{ IO_TYPE_Q8_0, 0xd8536cbdbc03b30dull },
	{ IO_TYPE_Q8_1, 0xec03e4414bbe5534ull },
	{ IO_TYPE_Q2_K, 0x2cd9218bb35363acull },
	{ IO_TYPE_Q3_K, 0xa151936ff00e101cull },
	{ IO_TYPE_Q4_K, 0x61901f3ea5c83294ull },
	{ IO_TYPE_Q5_K, 0x4520586e67f6885eull },
	{ IO_TYPE_Q6_K, 0x594ba3537774dda2ull },
	{ IO_TYPE_Q8_K, 0x34839ccb39c660efull },
};

/*
 * A real tensor: its first rows dequantized by libggml-base (hash and the
 * first four floats), then the dots of its first 8 rows with
 * quant_inputs_fill(ne0, seed) quantized by zen4's from_float (hash of
 * those activation bytes), by the scalar build and by zen4.
 */
static const struct tensor_fixture {
	const char *model, *tensor;
	uint32_t type;
	int rows;
	uint64_t deq_hash;
	uint32_t first[4];
	uint32_t seed;
	uint64_t act_hash;
	uint32_t dot_scalar[8];
	uint32_t dot_zen4[8];
} tensor_fixtures[] = {
	{ "tiny-qwen2-bpe152k-legacyq.gguf",
	  "token_embd.weight",
	  IO_TYPE_Q4_0,
	  64,
	  0x2fc144037aa45d60ull,
	  { 0x402b6000, 0xc0808800, 0xbf2b6000, 0xc095f400 },
	  1,
	  0xc10eb9e5286df217ull,
	  {
		  0x3da72223,
		  0xbd8519ad,
		  0xbccf34a7,
		  0xbd9a700e,
		  0x3caaea5b,
		  0x3d0f06b5,
		  0x3d0e01e1,
		  0x3dbcd1fb,
	  },
	  {
		  0x3da72222,
		  0xbd8519ad,
		  0xbccf34a0,
		  0xbd9a700e,
		  0x3caaea5c,
		  0x3d0f06b3,
		  0x3d0e01e1,
		  0x3dbcd1fa,
	  } },
	{ "tiny-qwen2-bpe152k-legacyq.gguf",
	  "blk.0.attn_q.weight",
	  IO_TYPE_Q4_1,
	  32,
	  0x768f2a473a7e7aa4ull,
	  { 0xbda7e000, 0x3e91c400, 0x3e501800, 0xbda7e000 },
	  2,
	  0x50262659ccbd75b0ull,
	  {
		  0xb6610000,
		  0x3c1b4130,
		  0xbd196a0c,
		  0x3cb493c4,
		  0xbbde2e60,
		  0x3c0e6e80,
		  0xbca869f0,
		  0xbcf62748,
	  },
	  {
		  0xb6610000,
		  0x3c1b4130,
		  0xbd196a0a,
		  0x3cb493c4,
		  0xbbde2e60,
		  0x3c0e6e88,
		  0xbca869f0,
		  0xbcf62740,
	  } },
	{ "tiny-qwen2-bpe152k-legacyq.gguf",
	  "blk.0.attn_k.weight",
	  IO_TYPE_Q5_0,
	  16,
	  0x67d5ad22958dd5f6ull,
	  { 0xbe965000, 0xbcf08000, 0xbe874800, 0x3d708000 },
	  3,
	  0x9292efaaac424540ull,
	  {
		  0x3bcb8033,
		  0x3cdb38fd,
		  0x3d17314e,
		  0xbd85e963,
		  0x3da34fb6,
		  0x3a98ae4f,
		  0xbc29a4d1,
		  0x3d0ff8bd,
	  },
	  {
		  0x3bcb8028,
		  0x3cdb38fc,
		  0x3d17314e,
		  0xbd85e962,
		  0x3da34fb7,
		  0x3a98ae50,
		  0xbc29a4d2,
		  0x3d0ff8bd,
	  } },
	{ "tiny-qwen2-bpe152k-legacyq.gguf",
	  "blk.0.attn_v.weight",
	  IO_TYPE_Q5_1,
	  16,
	  0x6b9a515d4e2b3244ull,
	  { 0xbd3fa000, 0xbcb40000, 0x3e34c000, 0x3ce28000 },
	  4,
	  0x94a21f72d9fd1d58ull,
	  {
		  0xbd95a3a0,
		  0x3ccc7600,
		  0xbd932acc,
		  0xbd94dbae,
		  0x3cecd558,
		  0xbd1ae7b4,
		  0xbc609700,
		  0xbda2a5d0,
	  },
	  {
		  0xbd95a3a0,
		  0x3ccc75f8,
		  0xbd932acc,
		  0xbd94dbac,
		  0x3cecd558,
		  0xbd1ae7b0,
		  0xbc609700,
		  0xbda2a5d0,
	  } },
	{ "tiny-qwen2-bpe152k-legacyq.gguf",
	  "blk.0.attn_output.weight",
	  IO_TYPE_Q8_0,
	  32,
	  0x421c2aaaece08649ull,
	  { 0xbe834000, 0x3fc8fa00, 0x40823980, 0x3e241000 },
	  5,
	  0xf9e19c0a7523a2c1ull,
	  {
		  0xbf45657d,
		  0x3f318509,
		  0x3c6dd77d,
		  0x3f11ed3e,
		  0x3fa41f4d,
		  0xbcc5d3b1,
		  0xbf47c5ae,
		  0x3fe4ed52,
	  },
	  {
		  0xbf45657d,
		  0x3f318509,
		  0x3c6dd740,
		  0x3f11ed3d,
		  0x3fa41f4d,
		  0xbcc5d3c0,
		  0xbf47c5ad,
		  0x3fe4ed52,
	  } },
	{ "tiny-qwen2-bpe152k-legacyq.gguf",
	  "blk.0.ffn_gate.weight",
	  IO_TYPE_F16,
	  64,
	  0x31711b5e95c9acbeull,
	  { 0x3d9e8000, 0x3d660000, 0xbe376000, 0x3e784000 },
	  6,
	  0x57ad448e5d39e357ull,
	  {
		  0xbec9d132,
		  0x3dc64a1a,
		  0xbe2edf15,
		  0xbd32dd37,
		  0x3eb4de32,
		  0x3ef3e2fa,
		  0xbf07d815,
		  0xbea220b6,
	  },
	  {
		  0xbec9d132,
		  0x3dc64a1a,
		  0xbe2edf15,
		  0xbd32dd37,
		  0x3eb4de32,
		  0x3ef3e2fa,
		  0xbf07d815,
		  0xbea220b6,
	  } },
	{ "tiny-qwen2-bpe152k-legacyq.gguf",
	  "blk.0.ffn_up.weight",
	  IO_TYPE_BF16,
	  64,
	  0x088b82466cbd819aull,
	  { 0xbe890000, 0xbd1e0000, 0xbe560000, 0xbce40000 },
	  7,
	  0xad56cb2f33465206ull,
	  {
		  0x3ec8d40a,
		  0xbeeee778,
		  0x3f60e2c6,
		  0xbea31a7c,
		  0x3e2b8ebc,
		  0xbec0a7b2,
		  0xbe1547fe,
		  0x3e9de3f4,
	  },
	  {
		  0x3ec8d40a,
		  0xbeeee778,
		  0x3f60e2c6,
		  0xbea31a7c,
		  0x3e2b8ebc,
		  0xbec0a7b2,
		  0xbe1547fe,
		  0x3e9de3f4,
	  } },
	{ "tiny-qwen2-bpe152k-legacyq.gguf",
	  "blk.1.ffn_down.weight",
	  IO_TYPE_Q4_1,
	  32,
	  0x00799dd2a8a8fed0ull,
	  { 0xbec34000, 0x3f7e8000, 0x3f092000, 0xbec34000 },
	  8,
	  0xd371772652c7095bull,
	  {
		  0xbe0adb30,
		  0xc1946cee,
		  0xbfc434a8,
		  0xc12cbd7c,
		  0xbf191452,
		  0xbf16fe58,
		  0x40cb008d,
		  0x406f08a5,
	  },
	  {
		  0xbe0adb40,
		  0xc1946cef,
		  0xbfc434a8,
		  0xc12cbd7c,
		  0xbf19144a,
		  0xbf16fe4c,
		  0x40cb008d,
		  0x406f08a8,
	  } },
	{ "tiny-llama-spm32k-kquant.gguf",
	  "blk.1.attn_q.weight",
	  IO_TYPE_Q2_K,
	  16,
	  0x750592c1ea78b2d2ull,
	  { 0x3d805800, 0x3d805800, 0x3d805800, 0xbb640000 },
	  9,
	  0xbc1e674abd373184ull,
	  {
		  0x4215502f,
		  0xc0c3bb74,
		  0x3fc4ffe0,
		  0x422a07c8,
		  0xc2010798,
		  0x420ee9d7,
		  0xc1934000,
		  0xc1931678,
	  },
	  {
		  0x42155030,
		  0xc0c3bb78,
		  0x3fc50000,
		  0x422a07c7,
		  0xc2010798,
		  0x420ee9d7,
		  0xc1934002,
		  0xc1931679,
	  } },
	{ "tiny-llama-spm32k-kquant.gguf",
	  "blk.1.attn_k.weight",
	  IO_TYPE_Q3_K,
	  16,
	  0x481829b86a7fd558ull,
	  { 0xbddc2600, 0xbddc2600, 0x00000000, 0x3ddc2600 },
	  10,
	  0x92f6e6f621db07b2ull,
	  {
		  0xc116b855,
		  0xc15069ad,
		  0xc21bde42,
		  0xc1b4e2a2,
		  0x4082a120,
		  0x4120300e,
		  0x41166a86,
		  0xc078c494,
	  },
	  {
		  0xc116b854,
		  0xc15069ae,
		  0xc21bde42,
		  0xc1b4e2a2,
		  0x4082a121,
		  0x4120300f,
		  0x41166a88,
		  0xc078c490,
	  } },
	{ "tiny-llama-spm32k-kquant.gguf",
	  "blk.0.attn_k.weight",
	  IO_TYPE_Q4_K,
	  16,
	  0xbf557563e4864677ull,
	  { 0x3daaeb80, 0x3c799a00, 0x3c799a00, 0x3e329b40 },
	  11,
	  0xe7b2c3d7182d7716ull,
	  {
		  0x3fbc5e2f,
		  0x4000adea,
		  0x409a43b2,
		  0x3fbc6272,
		  0x3fd05900,
		  0xbfa5ca0a,
		  0x40227153,
		  0xc050e390,
	  },
	  {
		  0x3fbc5e38,
		  0x4000adf0,
		  0x409a43b3,
		  0x3fbc6270,
		  0x3fd05900,
		  0xbfa5ca12,
		  0x40227156,
		  0xc050e38e,
	  } },
	{ "tiny-llama-spm32k-kquant.gguf",
	  "blk.1.attn_v.weight",
	  IO_TYPE_Q5_K,
	  16,
	  0xc49fd36a9acb07dbull,
	  { 0x3c79f100, 0x3d383c00, 0x3d60d140, 0x3d98fde0 },
	  12,
	  0xfe7fd1cee255fe50ull,
	  {
		  0xc0b704a0,
		  0xc061f479,
		  0x40d1c1c5,
		  0xc0a53382,
		  0x409d0ff3,
		  0xc0dc389c,
		  0xc135ad3d,
		  0x40da56d0,
	  },
	  {
		  0xc0b704a0,
		  0xc061f47e,
		  0x40d1c1c4,
		  0xc0a5337e,
		  0x409d0ff4,
		  0xc0dc389a,
		  0xc135ad3e,
		  0x40da56d1,
	  } },
	{ "tiny-llama-spm32k-kquant.gguf",
	  "blk.0.attn_v.weight",
	  IO_TYPE_Q6_K,
	  16,
	  0xc60d04e04c508527ull,
	  { 0xbd657700, 0x3d657700, 0x3d98fa00, 0xbc98fa00 },
	  13,
	  0x377a4afc618107f3ull,
	  {
		  0x41846a06,
		  0x40df7ea9,
		  0x411c8e25,
		  0x41a01aa4,
		  0xc13bafdd,
		  0xc12e5214,
		  0xc0eb952c,
		  0xc1821cc3,
	  },
	  {
		  0x41846a06,
		  0x40df7ea8,
		  0x411c8e24,
		  0x41a01aa6,
		  0xc13bafdc,
		  0xc12e5217,
		  0xc0eb9528,
		  0xc1821cc3,
	  } },
	{ "tiny-llama-spm32k-kquant.gguf",
	  "blk.0.ffn_down.weight",
	  IO_TYPE_Q6_K,
	  16,
	  0x54a19a1b780c3992ull,
	  { 0xbda38e78, 0xbd5029b0, 0xbd14b010, 0x3e1c1f44 },
	  14,
	  0x3e296c3c58c90926ull,
	  {
		  0x41960e14,
		  0xc1ebe653,
		  0x4297eb3c,
		  0xbfc7b618,
		  0xc28bda8f,
		  0xc263ec21,
		  0x429399b6,
		  0xc26f4968,
	  },
	  {
		  0x41960e18,
		  0xc1ebe650,
		  0x4297eb3b,
		  0xbfc7b640,
		  0xc28bda8e,
		  0xc263ec20,
		  0x429399b7,
		  0xc26f496c,
	  } },
	{ "tiny-llama-spm32k-kquant.gguf",
	  "blk.1.ffn_down.weight",
	  IO_TYPE_Q3_K,
	  16,
	  0xb442afcfeeb2e805ull,
	  { 0xbd881800, 0x3d881800, 0xbe4c2400, 0xbe081800 },
	  15,
	  0x9601b89b5e2a1565ull,
	  {
		  0xc245abb0,
		  0xc2ae425e,
		  0xc1601bad,
		  0x4036ec10,
		  0x42d7a34e,
		  0x4284d97a,
		  0xc1aee1ac,
		  0x429cbf73,
	  },
	  {
		  0xc245abb0,
		  0xc2ae425f,
		  0xc1601bae,
		  0x4036ec10,
		  0x42d7a34c,
		  0x4284d97a,
		  0xc1aee1af,
		  0x429cbf72,
	  } },
	{ "tiny-qwen3-bpe16k-mixq.gguf",
	  "blk.0.attn_k.weight",
	  IO_TYPE_Q8_0,
	  16,
	  0xc485c9135fc86e5dull,
	  { 0x3d2f7d00, 0x3d32ff80, 0x3c6eaa00, 0xbddedec0 },
	  16,
	  0x70461db30a70188full,
	  {
		  0x412d250f,
		  0x3eda0bab,
		  0x413a500c,
		  0xc26eb11e,
		  0xbfe26552,
		  0x41aa99db,
		  0x41b703fb,
		  0xc0b89985,
	  },
	  {
		  0x412d250f,
		  0x3eda0b80,
		  0x413a500e,
		  0xc26eb11f,
		  0xbfe26540,
		  0x41aa99db,
		  0x41b703fd,
		  0xc0b89980,
	  } },
	{ "tiny-qwen3-bpe16k-mixq.gguf",
	  "blk.1.attn_k.weight",
	  IO_TYPE_F16,
	  16,
	  0x5de3e1c9f3b5c8bdull,
	  { 0x3c712000, 0x3d20e000, 0xbb1ae000, 0xbc684000 },
	  17,
	  0xf80c9deef6d51d5cull,
	  {
		  0xc2362b94,
		  0xc1e93089,
		  0xc0b49421,
		  0xc1da5979,
		  0xbffe48e8,
		  0x41753dbc,
		  0xc0a2d417,
		  0x41dccdbb,
	  },
	  {
		  0xc2362b94,
		  0xc1e93089,
		  0xc0b49422,
		  0xc1da5978,
		  0xbffe48e6,
		  0x41753dbd,
		  0xc0a2d418,
		  0x41dccdbb,
	  } },
	{ "tiny-qwen3-bpe16k-mixq.gguf",
	  "blk.1.attn_q.weight",
	  IO_TYPE_BF16,
	  16,
	  0x151111a4d01c38edull,
	  { 0x3d550000, 0xbd300000, 0x3c800000, 0x3e050000 },
	  18,
	  0xaef73e5a4d435fbaull,
	  {
		  0x3f2f3029,
		  0xbf8f382e,
		  0xbf98bcb8,
		  0xbfe49953,
		  0x3d18540e,
		  0xbf11ec03,
		  0x4017edc9,
		  0xbf97e95b,
	  },
	  {
		  0x3f2f3028,
		  0xbf8f382f,
		  0xbf98bcb9,
		  0xbfe49955,
		  0x3d18542a,
		  0xbf11ec04,
		  0x4017edc9,
		  0xbf97e95b,
	  } },
	{ "tiny-qwen3-bpe16k-mixq.gguf",
	  "blk.0.attn_output.weight",
	  IO_TYPE_Q5_K,
	  16,
	  0x1bd1bb23ebf6985aull,
	  { 0xbce5ce00, 0xbe075ee0, 0xbe075ee0, 0xbdeb3160 },
	  19,
	  0xecae391226b53cf0ull,
	  {
		  0x4229a351,
		  0xc28fc22a,
		  0xc2b9503c,
		  0xc28e674b,
		  0xc2e7fcba,
		  0x40227f1c,
		  0x42394e3a,
		  0xc2eee74a,
	  },
	  {
		  0x4229a34e,
		  0xc28fc228,
		  0xc2b9503b,
		  0xc28e674a,
		  0xc2e7fcba,
		  0x40227ef0,
		  0x42394e3c,
		  0xc2eee749,
	  } },
	{ "tiny-qwen3-bpe16k-mixq.gguf",
	  "blk.1.attn_output.weight",
	  IO_TYPE_Q3_K,
	  16,
	  0xc5299ce57b87b716ull,
	  { 0x3de22000, 0x3de22000, 0x3de22000, 0x3de22000 },
	  20,
	  0x35c61fbded1ba4f4ull,
	  {
		  0xc202634b,
		  0xbf038160,
		  0xc11864b8,
		  0x42157684,
		  0xc1e30883,
		  0xc27e84a0,
		  0x42823361,
		  0xc216005e,
	  },
	  {
		  0xc202634a,
		  0xbf038140,
		  0xc11864ba,
		  0x42157686,
		  0xc1e30884,
		  0xc27e849e,
		  0x42823362,
		  0xc216005e,
	  } },
	{ "tiny-qwen3-bpe16k-mixq.gguf",
	  "blk.1.ffn_up.weight",
	  IO_TYPE_Q2_K,
	  16,
	  0x9380bd8ff8c20588ull,
	  { 0xbd8bce00, 0xbd8bce00, 0xbd8bce00, 0xbd8bce00 },
	  21,
	  0xecd7b176f7b209beull,
	  {
		  0x40a84198,
		  0xc1062cd6,
		  0x41c0daaf,
		  0xc1935466,
		  0x411456a6,
		  0xc1858e38,
		  0x40a69f5e,
		  0xc173a7e4,
	  },
	  {
		  0x40a8419e,
		  0xc1062cd8,
		  0x41c0daae,
		  0xc1935468,
		  0x411456a4,
		  0xc1858e38,
		  0x40a69f5e,
		  0xc173a7eb,
	  } },
	{ "stories260K.gguf",
	  "blk.0.attn_q.weight",
	  IO_TYPE_F32,
	  16,
	  0xb6d1e1caf8962d70ull,
	  { 0x3d380233, 0x3da4a3a7, 0xbc1af461, 0x3c9af461 },
	  22,
	  0x14518c93bfddb453ull,
	  {
		  0x422fca99,
		  0x41f3d699,
		  0x4197f00a,
		  0xc18b29ec,
		  0x42882014,
		  0x425ddf3c,
		  0x422166c6,
		  0x42fc546f,
	  },
	  {
		  0x422fca98,
		  0x41f3d699,
		  0x4197f007,
		  0xc18b29ec,
		  0x42882014,
		  0x425ddf3d,
		  0x422166c6,
		  0x42fc5470,
	  } },
};

/*
 * 4096-wide synthetic rows, where summation order shows: weights
 * quantize_row_*_ref(quant_inputs_fill(4096, 500 + type)), activations
 * zen4 from_float(quant_inputs_fill(4096, 600 + type)); their dot by zen4
 * and by the scalar build.
 */
static const struct {
	uint32_t type;
	uint32_t zen4, scalar;
} long_fixtures[] = {
	{ IO_TYPE_Q4_0, 0x45281a8c, 0x45281a89 },
	{ IO_TYPE_Q4_1, 0xc493f2e8, 0xc493f2f2 },
	{ IO_TYPE_Q5_0, 0x44ade61b, 0x44ade617 },
	{ IO_TYPE_Q5_1, 0x4456c290, 0x4456c265 },
	{ IO_TYPE_Q8_0, 0xc4cdd042, 0xc4cdd043 },
	{ IO_TYPE_Q2_K, 0xc476e3a0, 0xc476e3a3 },
	{ IO_TYPE_Q3_K, 0xc513d966, 0xc513d965 },
	{ IO_TYPE_Q4_K, 0xc4c0d1c4, 0xc4c0d1c8 },
	{ IO_TYPE_Q5_K, 0xc46ad528, 0xc46ad50c },
	{ IO_TYPE_Q6_K, 0xc4b099a4, 0xc4b0999b },
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static float from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint32_t to_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static uint16_t u16_at(const void *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t row_bytes(uint32_t type, int64_t n)
{
	uint64_t b = 0;

	ck_assert_int_eq(io_type_row_bytes(type, n, &b), 0);
	return b;
}

/* act_input of the generator: seed 7, with a zero super-block at 512 */
static void act_input(float *x)
{
	quant_inputs_fill(x, NACT, 7);
	memset(x + 512, 0, 256 * sizeof(float));
}

/* ---- half and bfloat16 ---------------------------------------------------- */

START_TEST(test_quant_fp16_to_fp32_all_halves)
{
	static float f[65536];

	for (int i = 0; i < 65536; i++)
		f[i] = quant_fp16_to_fp32((uint16_t)i);
	ck_assert_uint_eq(quant_inputs_hash(f, sizeof(f)), hash_halves_f16c);
}
END_TEST

/* The generator's sweep: 2^20 bit patterns over every exponent, NaNs too. */
START_TEST(test_quant_fp32_to_half_sweep)
{
	uint64_t hh = 0xcbf29ce484222325ull, hb = hh;

	for (uint32_t i = 0; i < (1u << 20); i++) {
		float f = from_bits(i * 0x9E3779B1u);
		uint16_t h = quant_fp32_to_fp16(f), b = quant_fp32_to_bf16(f);

		hh = (hh ^ (h & 0xff)) * 0x100000001b3ull;
		hh = (hh ^ (h >> 8)) * 0x100000001b3ull;
		hb = (hb ^ (b & 0xff)) * 0x100000001b3ull;
		hb = (hb ^ (b >> 8)) * 0x100000001b3ull;
	}
	ck_assert_uint_eq(hh, hash_sweep_fp16);
	ck_assert_uint_eq(hb, hash_sweep_bf16);
}
END_TEST

/* Edge cases worked out by hand from IEEE 754 binary16 and bfloat16. */
START_TEST(test_quant_half_edges)
{
	static const struct {
		float f;
		uint16_t h;
	} fp16[] = {
		{ 0.0f, 0x0000 },
		{ -0.0f, 0x8000 },
		{ 1.0f, 0x3c00 },
		{ -2.0f, 0xc000 },
		{ 65504.f, 0x7bff },
		{ 65519.99f, 0x7bff }, /* just below the tie */
		{ 65520.f, 0x7c00 },   /* tie to even: inf */
		{ 1e10f, 0x7c00 },
		{ -INFINITY, 0xfc00 },
		{ 0x1p-24f, 0x0001 },	/* smallest subnormal */
		{ 0x1p-25f, 0x0000 },	/* tie to even: 0 */
		{ 0x1.8p-24f, 0x0002 }, /* 1.5 ulp: tie up to 2 */
		{ 0x1.4p-24f, 0x0001 },
		{ 0x1p-14f, 0x0400 },	       /* smallest normal */
		{ 0x1.ffcp-15f, 0x0400 },      /* 1023.5 units: to normal */
		{ 0x1p-149f, 0x0000 },	       /* float subnormal */
		{ 1.0f + 0x1p-11f, 0x3c00 },   /* tie, even is down */
		{ 1.0f + 0x1.8p-10f, 0x3c02 }, /* tie, even is up */
		{ 0.1f, 0x2e66 },
		{ 3.14159265f, 0x4248 },
	};
	static const struct {
		float f;
		uint16_t b;
	} bf16[] = {
		{ 1.0f, 0x3f80 },
		{ -0.0f, 0x8000 },
		{ 1.0f + 0x1p-8f, 0x3f80 },   /* tie, even is down */
		{ 1.0f + 0x1.8p-7f, 0x3f82 }, /* tie, even is up */
		{ 0x1.fffffep127f, 0x7f80 },  /* rounds to inf */
		{ INFINITY, 0x7f80 },
		{ 0x1p-149f, 0x0000 },
		{ 0x1p-133f, 0x0001 }, /* bf16 subnormal kept */
	};

	for (size_t i = 0; i < ARRAY_SIZE(fp16); i++) {
		ck_assert_msg(quant_fp32_to_fp16(fp16[i].f) == fp16[i].h,
			      "fp16(%a) = 0x%04x, want 0x%04x", fp16[i].f,
			      quant_fp32_to_fp16(fp16[i].f), fp16[i].h);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bf16); i++)
		ck_assert_msg(quant_fp32_to_bf16(bf16[i].f) == bf16[i].b,
			      "bf16(%a) = 0x%04x, want 0x%04x", bf16[i].f,
			      quant_fp32_to_bf16(bf16[i].f), bf16[i].b);

	/* NaN stays NaN, quiet, sign kept; payload top bits kept by F16C */
	ck_assert_uint_eq(quant_fp32_to_fp16(from_bits(0x7fc00000)), 0x7e00);
	ck_assert_uint_eq(quant_fp32_to_fp16(from_bits(0xff800001)), 0xfe00);
	ck_assert_uint_eq(quant_fp32_to_fp16(from_bits(0x7fa12345)), 0x7f09);
	ck_assert_uint_eq(quant_fp32_to_bf16(from_bits(0x7f800001)), 0x7fc0);
	ck_assert_uint_eq(quant_fp32_to_bf16(from_bits(0xffc00000)), 0xffc0);
	ck_assert(isnan(quant_fp16_to_fp32(0x7c01)));
	ck_assert(isinf(quant_fp16_to_fp32(0xfc00)));
	ck_assert(quant_fp16_to_fp32(0x0001) == 0x1p-24f);
	ck_assert(quant_fp16_to_fp32(0x7bff) == 65504.f);
	ck_assert(quant_bf16_to_fp32(0x3f80) == 1.0f);
	ck_assert(quant_bf16_to_fp32(0x0001) == 0x1p-133f);
}
END_TEST

/* ---- activations ---------------------------------------------------------- */

START_TEST(test_quant_activations_match_zen4)
{
	static unsigned char y[NACT * 4];
	float x[NACT], t[256];

	act_input(x);
	quant_inputs_ties(t, 256);
	for (size_t i = 0; i < ARRAY_SIZE(act_fixtures); i++) {
		uint32_t type = act_fixtures[i].type;

		memset(y, 0xa5, sizeof(y));
		quant_from_float(type, x, y, NACT);
		ck_assert_msg(quant_inputs_hash(y, row_bytes(type, NACT)) ==
				      act_fixtures[i].input,
			      "type %u: input", type);
		quant_from_float(type, t, y, 256);
		ck_assert_msg(quant_inputs_hash(y, row_bytes(type, 256)) ==
				      act_fixtures[i].ties,
			      "type %u: ties", type);
	}
}
END_TEST

/*
 * The tie vector by hand: scale exactly 1 (Q8_0/Q8_1) or -1 (Q8_K), so the
 * quants are the inputs rounded half to even, where ggml's reference
 * quantizer (roundf) rounds half away from zero instead.
 */
START_TEST(test_quant_activation_ties_round_to_even)
{
	int8_t q0[8 * 34], q1[8 * 36], qk[292];
	float t[256], d;
	int differs = 0;

	quant_inputs_ties(t, 256);
	quant_from_float(IO_TYPE_Q8_0, t, q0, 256);
	quant_from_float(IO_TYPE_Q8_1, t, q1, 256);
	quant_from_float(IO_TYPE_Q8_K, t, qk, 256);
	for (int b = 0; b < 8; b++) {
		int sum = 0;

		ck_assert_uint_eq(u16_at(&q0[b * 34]), 0x3c00);
		ck_assert_uint_eq(u16_at(&q1[b * 36]), 0x3c00);
		for (int j = 0; j < 32; j++) {
			int want = (int)rintf(t[b * 32 + j]);

			ck_assert_int_eq(q0[b * 34 + 2 + j], want);
			ck_assert_int_eq(q1[b * 36 + 4 + j], want);
			sum += want;
			differs += want != (int)roundf(t[b * 32 + j]);
		}
		/* s = d * sum, d exactly 1 */
		ck_assert_uint_eq(u16_at(&q1[b * 36 + 2]),
				  quant_fp32_to_fp16((float)sum));
	}
	ck_assert_int_gt(differs, 50);
	memcpy(&d, qk, sizeof(d));
	ck_assert(d == -1.0f);
	for (int j = 0; j < 256; j++)
		ck_assert_int_eq(qk[4 + j], (int)rintf(-t[j]));
	for (int g = 0; g < 16; g++) {
		int sum = 0;

		for (int j = 0; j < 16; j++)
			sum += qk[4 + 16 * g + j];
		ck_assert_int_eq((int16_t)u16_at(qk + 4 + 256 + 2 * g), sum);
	}
}
END_TEST

/* ---- reference weight quantizers ------------------------------------------ */

START_TEST(test_quant_ref_quantizers_match_ggml)
{
	static unsigned char y[NACT * 4];
	float x[NACT];

	act_input(x);
	for (size_t i = 0; i < ARRAY_SIZE(ref_fixtures); i++) {
		uint32_t type = ref_fixtures[i].type;

		memset(y, 0xa5, sizeof(y));
		quant_from_float_ref(type, x, y, NACT);
		ck_assert_msg(quant_inputs_hash(y, row_bytes(type, NACT)) ==
				      ref_fixtures[i].hash,
			      "type %u", type);
	}
}
END_TEST

/* ---- real tensors ---------------------------------------------------------- */

/* The first rows of a tensor of a shared model, or NULL (test skipped). */
static void *tensor_rows(const struct tensor_fixture *f, int64_t *ne0,
			 uint64_t *rb)
{
	char path[1024];
	struct io_gguf *g = NULL;
	struct err err = { 0 };
	const struct io_gguf_tensor *t;
	void *buf;
	int fd;

	snprintf(path, sizeof(path), "%s/models/%s", check_shared_dir(),
		 f->model);
	ck_assert_msg(io_gguf_open(&g, path, &err) == 0, "%s", err.msg);
	t = io_gguf_find_tensor(g, f->tensor);
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(t->type, f->type);
	ck_assert_int_ge(t->ne[1], f->rows);
	*ne0 = t->ne[0];
	*rb = row_bytes(t->type, t->ne[0]);
	buf = malloc(*rb * f->rows);
	ck_assert_ptr_nonnull(buf);
	fd = open(g->files[t->file].path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, *rb * f->rows, (off_t)t->offset),
			 (ssize_t)(*rb * f->rows));
	close(fd);
	io_gguf_close(g);
	return buf;
}

START_TEST(test_quant_dequantize_real_tensors)
{
	const struct tensor_fixture *f = &tensor_fixtures[_i];
	int64_t ne0;
	uint64_t rb;
	void *w = tensor_rows(f, &ne0, &rb);
	float *y = malloc(sizeof(float) * ne0 * f->rows);

	ck_assert_ptr_nonnull(y);
	quant_to_float(f->type, w, y, ne0 * f->rows);
	for (int j = 0; j < 4; j++)
		ck_assert_msg(to_bits(y[j]) == f->first[j],
			      "%s %s [%d]: %a, ggml %a", f->model, f->tensor, j,
			      y[j], from_bits(f->first[j]));
	ck_assert_msg(quant_inputs_hash(y, sizeof(float) * ne0 * f->rows) ==
			      f->deq_hash,
		      "%s %s: rows differ", f->model, f->tensor);
	free(y);
	free(w);
}
END_TEST

static double dot_rel_zen4_max;

START_TEST(test_quant_vec_dot_real_tensors)
{
	const struct tensor_fixture *f = &tensor_fixtures[_i];
	uint32_t at = quant_vec_dot_type(f->type);
	int64_t ne0;
	uint64_t rb;
	void *w = tensor_rows(f, &ne0, &rb);
	float *x = malloc(sizeof(float) * ne0);
	void *a = malloc(row_bytes(at, ne0));

	ck_assert_ptr_nonnull(x);
	ck_assert_ptr_nonnull(a);
	quant_inputs_fill(x, ne0, f->seed);
	quant_from_float(at, x, a, ne0);
	ck_assert_msg(quant_inputs_hash(a, row_bytes(at, ne0)) == f->act_hash,
		      "%s %s: activations differ", f->model, f->tensor);
	for (int r = 0; r < 8; r++) {
		float s = quant_vec_dot(f->type, ne0, (char *)w + r * rb, a);
		float z = from_bits(f->dot_zen4[r]);
		double rel = fabs((double)s - z) / fmax(fabs(z), 1e-30);

		ck_assert_msg(to_bits(s) == f->dot_scalar[r],
			      "%s %s row %d: %a, ggml scalar %a", f->model,
			      f->tensor, r, s, from_bits(f->dot_scalar[r]));
		ck_assert_msg(rel <= DOT_REL_ZEN4,
			      "%s %s row %d: %a, zen4 %a (rel %.3g)", f->model,
			      f->tensor, r, s, z, rel);
		if (rel > dot_rel_zen4_max)
			dot_rel_zen4_max = rel;
		if (f->type == IO_TYPE_F32 || f->type == IO_TYPE_F16 ||
		    f->type == IO_TYPE_BF16)
			continue;
		s = quant_vec_dot_x86(f->type, ne0, (char *)w + r * rb, a);
		ck_assert_msg(to_bits(s) == f->dot_zen4[r],
			      "%s %s row %d: x86 order %a, zen4 %a", f->model,
			      f->tensor, r, s, z);
	}
	free(a);
	free(x);
	free(w);
}
END_TEST

/* ---- properties ------------------------------------------------------------ */

static const uint32_t weight_types[] = {
	IO_TYPE_F32,  IO_TYPE_F16,  IO_TYPE_BF16, IO_TYPE_Q4_0, IO_TYPE_Q4_1,
	IO_TYPE_Q5_0, IO_TYPE_Q5_1, IO_TYPE_Q8_0, IO_TYPE_Q2_K, IO_TYPE_Q3_K,
	IO_TYPE_Q4_K, IO_TYPE_Q5_K, IO_TYPE_Q6_K,
};

/*
 * Quantize, dequantize: the largest error of each block, relative to the
 * block's largest magnitude, stays below what the format can promise
 * (half a step, a full step where ggml clamps the extreme level), and the
 * error over all elements is small relative to their RMS. The bounds come
 * from the step sizes (Q4_0: max/8 at the clamped end, Q8: max/254 plus
 * the half rounding of d) and, for the K-quants, from measurement with a
 * margin of about 1.5.
 */
START_TEST(test_quant_round_trip_error)
{
	static const struct {
		uint32_t type;
		double block, rms;
	} b[] = {
		{ IO_TYPE_F32, 0, 0 },
		{ IO_TYPE_F16, 0x1p-11, 0x1p-11 },
		{ IO_TYPE_BF16, 0x1p-8, 0x1p-8 },
		{ IO_TYPE_Q8_0, 0.5 / 127 + 0x1p-11, 0.0046 },
		{ IO_TYPE_Q8_1, 0.5 / 127 + 0x1p-11, 0.0046 },
		{ IO_TYPE_Q8_K, 0.5 / 127 + 1e-6, 0.0046 },
		{ IO_TYPE_Q4_0, 1.0 / 8 + 0x1p-10, 0.08 },
		{ IO_TYPE_Q4_1, 1.0 / 15 + 0x1p-10, 0.075 },
		{ IO_TYPE_Q5_0, 1.0 / 16 + 0x1p-10, 0.04 },
		{ IO_TYPE_Q5_1, 1.0 / 31 + 0x1p-10, 0.036 },
		{ IO_TYPE_Q2_K, 0.52, 0.35 },
		{ IO_TYPE_Q3_K, 0.33, 0.19 },
		{ IO_TYPE_Q4_K, 0.12, 0.083 },
		{ IO_TYPE_Q5_K, 0.071, 0.042 },
		{ IO_TYPE_Q6_K, 0.025, 0.02 },
	};
	static float x[4096], y[4096];
	static unsigned char q[4096 * 4];

	for (size_t i = 0; i < ARRAY_SIZE(b); i++) {
		const int64_t n = 4096;
		double se = 0, sx = 0, worst = 0;
		int bs = b[i].type == IO_TYPE_Q8_0 ||
					 b[i].type == IO_TYPE_Q8_1 ||
					 (b[i].type >= IO_TYPE_Q4_0 &&
					  b[i].type <= IO_TYPE_Q5_1) ?
				 32 :
				 256;

		/* one scale for all: K-quant blocks hold 8 sub-blocks */
		quant_inputs_fill(x, n, 1000);
		for (int64_t j = 0; j < n; j++)
			x[j] = ldexpf(x[j],
				      -(int)((j / 32 * 7 + 1000) % 15) + 7);
		quant_from_float_ref(b[i].type, x, q, n);
		quant_to_float(b[i].type, q, y, n);
		for (int64_t k = 0; k < n; k += bs) {
			double amax = 0, emax = 0;

			for (int j = 0; j < bs; j++) {
				double e = fabs((double)y[k + j] - x[k + j]);

				amax = fmax(amax, fabs(x[k + j]));
				emax = fmax(emax, e);
				se += e * e;
				sx += (double)x[k + j] * x[k + j];
			}
			worst = fmax(worst, emax / amax);
		}
		if (getenv("QUANT_VERBOSE"))
			printf("round trip %-5s block %.4g rms %.4g\n",
			       io_type_info(b[i].type)->name, worst,
			       sqrt(se / sx));
		ck_assert_msg(worst <= b[i].block, "type %u: block error %g",
			      b[i].type, worst);
		ck_assert_msg(sqrt(se / sx) <= b[i].rms, "type %u: rms %g",
			      b[i].type, sqrt(se / sx));
	}
}
END_TEST

/*
 * The dot product is the product of what the two rows dequantize to:
 * compared with a double sum over quant_to_float of both (Q8_1's s field is
 * a half-rounded d * sum, hence the tolerance).
 */
START_TEST(test_quant_vec_dot_is_dequantized_dot)
{
	static float x[512], w[512], y[512], z[512];
	static unsigned char qw[512 * 4], qa[512 * 4];

	for (size_t i = 0; i < ARRAY_SIZE(weight_types); i++) {
		uint32_t t = weight_types[i], at = quant_vec_dot_type(t);
		double want = 0, mag = 0;
		float got;

		quant_inputs_fill(x, 512, 300 + t);
		quant_inputs_fill(w, 512, 400 + t);
		quant_from_float_ref(t, w, qw, 512);
		quant_from_float(at, x, qa, 512);
		quant_to_float(t, qw, y, 512);
		quant_to_float(at, qa, z, 512);
		for (int j = 0; j < 512; j++) {
			want += (double)y[j] * z[j];
			mag += fabs((double)y[j] * z[j]);
		}
		got = quant_vec_dot(t, 512, qw, qa);
		ck_assert_msg(fabs(got - want) <=
				      (at == IO_TYPE_Q8_1 ? 1e-3 : 1e-5) * mag,
			      "type %u: %g, dequantized %g", t, got, want);
	}
}
END_TEST

START_TEST(test_quant_vec_dot_long_rows)
{
	enum { N = 4096 };
	static float x[N], v[N];
	static unsigned char w[N * 2], a[N * 2];

	for (size_t i = 0; i < ARRAY_SIZE(long_fixtures); i++) {
		uint32_t t = long_fixtures[i].type;
		float s;

		quant_inputs_fill(x, N, 500 + t);
		quant_inputs_fill(v, N, 600 + t);
		quant_from_float_ref(t, x, w, N);
		quant_from_float(quant_vec_dot_type(t), v, a, N);
		s = quant_vec_dot(t, N, w, a);
		ck_assert_msg(to_bits(s) == long_fixtures[i].scalar,
			      "type %u: %a, ggml scalar %a", t, s,
			      from_bits(long_fixtures[i].scalar));
		s = quant_vec_dot_x86(t, N, w, a);
		ck_assert_msg(to_bits(s) == long_fixtures[i].zen4,
			      "type %u: x86 order %a, zen4 %a", t, s,
			      from_bits(long_fixtures[i].zen4));
	}
}
END_TEST

START_TEST(test_quant_vec_dot_types)
{
	/* ggml-cpu.c type_traits_cpu[].vec_dot_type */
	static const uint32_t want[][2] = {
		{ IO_TYPE_F32, IO_TYPE_F32 },	{ IO_TYPE_F16, IO_TYPE_F16 },
		{ IO_TYPE_BF16, IO_TYPE_BF16 }, { IO_TYPE_Q4_0, IO_TYPE_Q8_0 },
		{ IO_TYPE_Q4_1, IO_TYPE_Q8_1 }, { IO_TYPE_Q5_0, IO_TYPE_Q8_0 },
		{ IO_TYPE_Q5_1, IO_TYPE_Q8_1 }, { IO_TYPE_Q8_0, IO_TYPE_Q8_0 },
		{ IO_TYPE_Q2_K, IO_TYPE_Q8_K }, { IO_TYPE_Q3_K, IO_TYPE_Q8_K },
		{ IO_TYPE_Q4_K, IO_TYPE_Q8_K }, { IO_TYPE_Q5_K, IO_TYPE_Q8_K },
		{ IO_TYPE_Q6_K, IO_TYPE_Q8_K },
	};

	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		ck_assert(quant_type_supported(want[i][0]));
		ck_assert_uint_eq(quant_vec_dot_type(want[i][0]), want[i][1]);
	}
}
END_TEST

/*
 * The traits table beside io's type table: every type it fills has its
 * layout there, a kernel for each conversion and each weight type's dot;
 * the types the engine does not know have nothing.
 */
START_TEST(test_quant_traits_table)
{
	for (uint32_t type = 0; type < IO_TYPE_COUNT + 2; type++) {
		const struct quant_type_traits *t = quant_traits(type);
		const struct io_type_info *ti = io_type_info(type);

		ck_assert_ptr_nonnull(t);
		if (!t->to_float) {
			ck_assert(!t->weight && !t->kv && !t->vec_dot &&
				  !t->from_float);
			continue;
		}
		/* the layout of every type the engine converts is io/'s */
		ck_assert_ptr_nonnull(ti);
		ck_assert_uint_eq(quant_blck_size(type), ti->block_elems);
		ck_assert_uint_eq(quant_type_size(type), ti->block_bytes);
		ck_assert(t->to_float && t->from_float && t->from_float_ref);
		if (t->weight)
			ck_assert(t->vec_dot_ref && t->vec_dot &&
				  quant_traits(t->vec_dot_type)->from_float);
		ck_assert(!t->kv || t->weight);
	}
}
END_TEST

START_TEST(test_quant_rejects_other_types)
{
	static const uint32_t no[] = { IO_TYPE_Q8_1,
				       IO_TYPE_Q8_K,
				       IO_TYPE_I8,
				       IO_TYPE_I32,
				       IO_TYPE_F64,
				       4,
				       5,
				       29,
				       31,
				       1000,
				       UINT32_MAX };
	unsigned char buf[64];
	float f[32] = { 0 };

	for (size_t i = 0; i < ARRAY_SIZE(no); i++) {
		ck_assert(!quant_type_supported(no[i]));
		if (no[i] == IO_TYPE_Q8_1 || no[i] == IO_TYPE_Q8_K)
			continue;
		ck_assert(isnan(quant_vec_dot(no[i], 32, buf, buf)));
		/* nothing written for a type it does not know */
		memset(buf, 0x5a, sizeof(buf));
		quant_from_float(no[i], f, buf, 32);
		ck_assert_uint_eq(buf[0], 0x5a);
		ck_assert_uint_eq(buf[63], 0x5a);
	}
}
END_TEST

static int models_present(void)
{
	char path[1024];

	for (size_t i = 0; i < ARRAY_SIZE(tensor_fixtures); i++) {
		snprintf(path, sizeof(path), "%s/models/%s", check_shared_dir(),
			 tensor_fixtures[i].model);
		if (access(path, R_OK))
			return 0;
	}
	return 1;
}

static void quant_tests(TCase *tc)
{
	int n = (int)ARRAY_SIZE(tensor_fixtures);

	tcase_add_test(tc, test_quant_fp16_to_fp32_all_halves);
	tcase_add_test(tc, test_quant_fp32_to_half_sweep);
	tcase_add_test(tc, test_quant_half_edges);
	tcase_add_test(tc, test_quant_activations_match_zen4);
	tcase_add_test(tc, test_quant_activation_ties_round_to_even);
	tcase_add_test(tc, test_quant_ref_quantizers_match_ggml);
	tcase_add_test(tc, test_quant_round_trip_error);
	tcase_add_test(tc, test_quant_vec_dot_is_dequantized_dot);
	tcase_add_test(tc, test_quant_vec_dot_long_rows);
	tcase_add_test(tc, test_quant_vec_dot_types);
	tcase_add_test(tc, test_quant_traits_table);
	tcase_add_test(tc, test_quant_rejects_other_types);
	if (models_present()) {
		tcase_add_loop_test(tc, test_quant_dequantize_real_tensors, 0,
				    n);
		tcase_add_loop_test(tc, test_quant_vec_dot_real_tensors, 0, n);
	}
}

static int quant_left_out(void)
{
	if (models_present())
		return 0;
	printf("real-tensor tests skipped: models missing under %s/models\n",
	       check_shared_dir());
	return CHECK_SKIP;
}

const struct check_main check_main = {
	.name = "quant",
	.timeout = 60,
	.add_tests = quant_tests,
	.left_out = quant_left_out,
};
