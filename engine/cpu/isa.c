// SPDX-License-Identifier: MIT
/*
 * The tables of isa.h, one per instruction-set level, and the choice of
 * one (LLMFS_CPU, else the best the CPU has). A level's rows name only
 * what it accelerates; the scalar level names nothing, so every lookup
 * falls back to the scalar code of the traits table (engine/quant/).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../io/io.h"
#include "../quant/quant_internal.h"
#include "avx2.h"
#if defined(__aarch64__)
#include "neon.h"
#endif
#include "cpu.h"
#include "gemm.h"
#include "isa.h"

static bool isa_scalar_usable(void)
{
	return true;
}

static const struct cpu_isa isa_scalar = {
	.name = "scalar",
	.features = "nothing",
	.usable = isa_scalar_usable,
	/* the GEMM's order, so that a batch takes the same path everywhere */
	.type = {
		[IO_TYPE_Q8_0] = { .gemm = &cpu_gemm_q8_0_scalar },
		[IO_TYPE_Q4_K] = { .gemm = &cpu_gemm_q4_K_scalar },
		[IO_TYPE_Q6_K] = { .gemm = &cpu_gemm_q6_K_scalar },
	},
};

#if defined(__x86_64__)
extern const struct cpu_isa_att cpu_att_avx512; /* attention_avx512.c */
extern const struct cpu_isa_att cpu_att_avx2;	/* attention_avx2.c */

/* the float dots with each level's vector part (dot.c adds the tails) */
static float isa_f32_avx512(int64_t n, const void *w, const void *a)
{
	return dot_f32_with(n, w, a, cpu_f32_main_avx512);
}

static float isa_f16_avx512(int64_t n, const void *w, const void *a)
{
	return dot_f16_with(n, w, a, cpu_f16_main_avx512);
}

static float isa_bf16_avx512(int64_t n, const void *w, const void *a)
{
	return dot_bf16_with(n, w, a, cpu_bf16_main_avx512);
}

static float isa_f32_avx2(int64_t n, const void *w, const void *a)
{
	return dot_f32_with(n, w, a, cpu_f32_main_avx2);
}

static float isa_f16_avx2(int64_t n, const void *w, const void *a)
{
	return dot_f16_with(n, w, a, cpu_f16_main_avx2);
}

static float isa_bf16_avx2(int64_t n, const void *w, const void *a)
{
	return dot_bf16_with(n, w, a, cpu_bf16_main_avx2);
}

static const struct cpu_isa isa_avx512 = {
	.name = "avx512",
	.features = "AVX-512 F, BW, VL and VNNI",
	.usable = cpu_avx512_usable,
	.type = {
		[IO_TYPE_F32] = { .dot = isa_f32_avx512 },
		[IO_TYPE_F16] = { .dot = isa_f16_avx512,
				  .from_float = cpu_f16_from_float_avx512 },
		[IO_TYPE_BF16] = { .dot = isa_bf16_avx512 },
		[IO_TYPE_Q4_0] = { .dot = cpu_q4_0_avx512,
				   .dot_repacked = cpu_q4_0_repacked_avx512 },
		[IO_TYPE_Q4_1] = { .dot = cpu_q4_1_avx512 },
		[IO_TYPE_Q5_0] = { .dot = cpu_q5_0_avx512 },
		[IO_TYPE_Q5_1] = { .dot = cpu_q5_1_avx512 },
		[IO_TYPE_Q8_0] = { .dot = cpu_q8_0_avx512,
				   .from_float = cpu_q8_0_from_float_avx512,
				   .tile = { cpu_q8_0_tile_avx512, NULL },
				   .gemm = &cpu_gemm_q8_0 },
		[IO_TYPE_Q2_K] = { .dot = cpu_q2_K_avx512,
				   .dot_repacked = cpu_q2_K_repacked_avx512 },
		[IO_TYPE_Q3_K] = { .dot = cpu_q3_K_avx512 },
		[IO_TYPE_Q4_K] = { .dot = cpu_q4_K_avx512,
				   .dot_repacked = cpu_q4_K_repacked_avx512,
				   .tile = { NULL, cpu_q4_K_repacked_tile_avx512 },
				   .gemm = &cpu_gemm_q4_K },
		[IO_TYPE_Q5_K] = { .dot = cpu_q5_K_avx512 },
		[IO_TYPE_Q6_K] = { .dot = cpu_q6_K_avx512,
				   .tile = { cpu_q6_K_tile_avx512, NULL },
				   .gemm = &cpu_gemm_q6_K },
		[IO_TYPE_Q8_K] = { .from_float = cpu_q8_K_from_float_avx512 },
	},
	.swiglu = cpu_swiglu_avx512,
	.expf_sub = cpu_expf_sub_avx512,
	.scale = cpu_scale_avx512,
	.rope = cpu_rope_avx512,
	.att = &cpu_att_avx512,
};

static const struct cpu_isa isa_avx2 = {
	.name = "avx2",
	.features = "AVX2, FMA and F16C (x86-64-v3)",
	.usable = cpu_avx2_usable,
	.act_127 = true, /* Q8_0's sign trick (avx2.h) */
	.type = {
		[IO_TYPE_F32] = { .dot = isa_f32_avx2 },
		[IO_TYPE_F16] = { .dot = isa_f16_avx2,
				  .from_float = cpu_f16_from_float_avx2 },
		[IO_TYPE_BF16] = { .dot = isa_bf16_avx2 },
		[IO_TYPE_Q4_0] = { .dot = cpu_q4_0_avx2,
				   .dot_repacked = cpu_q4_0_repacked_avx2 },
		[IO_TYPE_Q4_1] = { .dot = cpu_q4_1_avx2 },
		[IO_TYPE_Q5_0] = { .dot = cpu_q5_0_avx2 },
		[IO_TYPE_Q5_1] = { .dot = cpu_q5_1_avx2 },
		[IO_TYPE_Q8_0] = { .dot = cpu_q8_0_avx2,
				   .from_float = cpu_q8_0_from_float_avx2,
				   .gemm = &cpu_gemm_q8_0_avx2 },
		[IO_TYPE_Q2_K] = { .dot = cpu_q2_K_avx2,
				   .dot_repacked = cpu_q2_K_repacked_avx2 },
		[IO_TYPE_Q3_K] = { .dot = cpu_q3_K_avx2 },
		[IO_TYPE_Q4_K] = { .dot = cpu_q4_K_avx2,
				   .dot_repacked = cpu_q4_K_repacked_avx2,
				   .gemm = &cpu_gemm_q4_K_avx2 },
		[IO_TYPE_Q5_K] = { .dot = cpu_q5_K_avx2 },
		[IO_TYPE_Q6_K] = { .dot = cpu_q6_K_avx2,
				   .gemm = &cpu_gemm_q6_K_avx2 },
		[IO_TYPE_Q8_K] = { .from_float = cpu_q8_K_from_float_avx2 },
	},
	.swiglu = cpu_swiglu_avx2,
	.expf_sub = cpu_expf_sub_avx2,
	.scale = cpu_scale_avx2,
	.rope = cpu_rope_avx2,
	.att = &cpu_att_avx2,
};
#endif

#if defined(__aarch64__)
extern const struct cpu_isa_att cpu_att_neon; /* attention_neon.c */

static float isa_f32_neon(int64_t n, const void *w, const void *a)
{
	return dot_f32_with(n, w, a, cpu_f32_main_neon);
}

static float isa_f16_neon(int64_t n, const void *w, const void *a)
{
	return dot_f16_with(n, w, a, cpu_f16_main_neon);
}

static float isa_bf16_neon(int64_t n, const void *w, const void *a)
{
	return dot_bf16_with(n, w, a, cpu_bf16_main_neon);
}

/*
 * The two ARM levels' tables: the same float and element-wise kernels,
 * the integer dots and GEMMs of their own level (neon.h).
 */
#define ISA_NEON_TYPES(level) \
	{ \
		[IO_TYPE_F32] = { .dot = isa_f32_neon }, \
		[IO_TYPE_F16] = { .dot = isa_f16_neon, \
				  .from_float = cpu_f16_from_float_neon }, \
		[IO_TYPE_BF16] = { .dot = isa_bf16_neon }, \
		[IO_TYPE_Q4_0] = { .dot = cpu_q4_0_##level, \
				   .dot_repacked = \
					   cpu_q4_0_repacked_##level }, \
		[IO_TYPE_Q4_1] = { .dot = cpu_q4_1_##level }, \
		[IO_TYPE_Q5_0] = { .dot = cpu_q5_0_##level }, \
		[IO_TYPE_Q5_1] = { .dot = cpu_q5_1_##level }, \
		[IO_TYPE_Q8_0] = { .dot = cpu_q8_0_##level, \
				   .from_float = cpu_q8_0_from_float_neon, \
				   .gemm = &cpu_gemm_q8_0_##level }, \
		[IO_TYPE_Q2_K] = { .dot = cpu_q2_K_##level, \
				   .dot_repacked = \
					   cpu_q2_K_repacked_##level }, \
		[IO_TYPE_Q3_K] = { .dot = cpu_q3_K_##level }, \
		[IO_TYPE_Q4_K] = { .dot = cpu_q4_K_##level, \
				   .dot_repacked = cpu_q4_K_repacked_##level, \
				   .gemm = &cpu_gemm_q4_K_##level }, \
		[IO_TYPE_Q5_K] = { .dot = cpu_q5_K_##level }, \
		[IO_TYPE_Q6_K] = { .dot = cpu_q6_K_##level, \
				   .gemm = &cpu_gemm_q6_K_##level }, \
		[IO_TYPE_Q8_K] = { .from_float = cpu_q8_K_from_float_neon }, \
	}

static const struct cpu_isa isa_neon_dotprod = {
	.name = "neon-dotprod",
	.features =
		"Advanced SIMD with the dot product instructions (ARMv8.2 dotprod)",
	.usable = cpu_neon_dotprod_usable,
	.type = ISA_NEON_TYPES(neon_dotprod),
	.swiglu = cpu_swiglu_neon,
	.expf_sub = cpu_expf_sub_neon,
	.scale = cpu_scale_neon,
	.rope = cpu_rope_neon,
	.att = &cpu_att_neon,
};

static const struct cpu_isa isa_neon = {
	.name = "neon",
	.features = "Advanced SIMD",
	.usable = cpu_neon_usable,
	.type = ISA_NEON_TYPES(neon),
	.swiglu = cpu_swiglu_neon,
	.expf_sub = cpu_expf_sub_neon,
	.scale = cpu_scale_neon,
	.rope = cpu_rope_neon,
	.att = &cpu_att_neon,
};
#undef ISA_NEON_TYPES
#endif

const struct cpu_isa *const cpu_isa_levels[] = {
#if defined(__x86_64__)
	&isa_avx512,	   &isa_avx2,
#endif
#if defined(__aarch64__)
	&isa_neon_dotprod, &isa_neon,
#endif
	&isa_scalar,
};

const unsigned cpu_isa_count = sizeof(cpu_isa_levels) /
			       sizeof(cpu_isa_levels[0]);

static _Atomic(const struct cpu_isa *) isa_current;
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
/* LLMFS_CPU's refusal, kept for cpu_isa_check */
static struct err isa_refusal;

const struct cpu_isa *cpu_isa_named(const char *name)
{
	unsigned i;

	for (i = 0; i < cpu_isa_count; i++)
		if (!strcmp(cpu_isa_levels[i]->name, name))
			return cpu_isa_levels[i];
	return NULL;
}

/* this build's level names into names, for messages: "avx512, avx2, scalar" */
static const char *isa_names(char *names, size_t size)
{
	size_t at = 0;
	unsigned i;

	names[0] = 0;
	for (i = 0; i < cpu_isa_count && at < size; i++)
		at += (size_t)snprintf(names + at, size - at, "%s%s",
				       i ? ", " : "", cpu_isa_levels[i]->name);
	return names;
}

static const struct cpu_isa *isa_best(void)
{
	unsigned i;

	for (i = 0; i < cpu_isa_count; i++)
		if (cpu_isa_levels[i]->usable())
			return cpu_isa_levels[i];
	return &isa_scalar;
}

int cpu_isa_choose(const char *want, const struct cpu_isa **out,
		   struct err *err)
{
	const struct cpu_isa *isa;
	char names[80];

	*out = NULL;
	if (!want || !*want) {
		*out = isa_best();
		return 0;
	}
	isa = cpu_isa_named(want);
	if (!isa)
		return err_set(err, EINVAL,
			       "LLMFS_CPU=%s: no such CPU level (%s)", want,
			       isa_names(names, sizeof(names)));
	if (!isa->usable())
		return err_set(err, ENOTSUP, "LLMFS_CPU=%s: this CPU lacks %s",
			       want, isa->features);
	*out = isa;
	return 0;
}

/* LLMFS_CPU's level; a refused one is kept for cpu_isa_check */
static void isa_init(void)
{
	const struct cpu_isa *isa;

	if (cpu_isa_choose(getenv("LLMFS_CPU"), &isa, &isa_refusal))
		isa = isa_best();
	atomic_store(&isa_current, isa);
}

const struct cpu_isa *cpu_isa(void)
{
	pthread_once(&isa_once, isa_init);
	return atomic_load_explicit(&isa_current, memory_order_relaxed);
}

int cpu_isa_check(struct err *err)
{
	pthread_once(&isa_once, isa_init);
	if (!isa_refusal.code)
		return 0;
	return err_set(err, isa_refusal.code, "%s", isa_refusal.msg);
}

void cpu_isa_use(const struct cpu_isa *isa)
{
	pthread_once(&isa_once, isa_init);
	atomic_store(&isa_current, isa);
}

quant_dot_fn cpu_isa_dot(const struct cpu_isa *isa, uint32_t type,
			 bool repacked)
{
	const struct quant_type_traits *t = quant_traits(type);

	if (type >= IO_TYPE_COUNT)
		return NULL;
	if (repacked && t->vec_dot_repacked)
		return isa->type[type].dot_repacked ?
			       isa->type[type].dot_repacked :
			       t->vec_dot_repacked;
	return isa->type[type].dot ? isa->type[type].dot : t->vec_dot;
}

quant_from_float_fn cpu_isa_from_float(const struct cpu_isa *isa, uint32_t type)
{
	if (type >= IO_TYPE_COUNT)
		return NULL;
	return isa->type[type].from_float ? isa->type[type].from_float :
					    quant_traits(type)->from_float;
}
