// SPDX-License-Identifier: MIT
/*
 * Flash attention of one head over typed K/V rows (see attention.h).
 * The order is ggml's one_chunk loop, here in scalar C; the CPU level
 * (engine/cpu/isa.h's struct cpu_isa_att: engine/cpu/attention_avx2.c,
 * attention_avx512.c) has vector versions of the per-element steps (F16C
 * conversions with round-to-nearest-even, one FMA per element) and of the
 * fused F16 loop, which give the scalar code's bits.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "../quant/quant.h"
#include "attention.h"
#include "cpu.h"
#include "dot.h"
#include "isa.h"

/* ggml's C is compiled without contraction; so is this (see quant). */
#ifdef __clang__
#pragma clang fp contract(off)
#endif

/* ---- the vector steps -------------------------------------------------- */

/* the CPU level's attention steps, or NULL: the scalar code below */
static const struct cpu_isa_att *att_level(void)
{
	return cpu_isa()->att;
}

/*
 * Whether a level's expf16 gives this libm's bits: 65,536 spread inputs,
 * checked once per level (another libm may round otherwise).
 */
static bool att_expf_check(const struct cpu_isa_att *att)
{
	float x[16], y[16];
	uint32_t i, j, bits;

	for (i = 0; i < 65536; i += 16) {
		for (j = 0; j < 16; j++) {
			bits = (i + j) << 16 | (((i + j) * 0x9e37u) & 0xffff);
			memcpy(&x[j], &bits, sizeof(bits));
		}
		att->expf16(y, x);
		for (j = 0; j < 16; j++)
			if (memcmp(&y[j], &(float){ expf(x[j]) }, 4) &&
			    !(isnan(y[j]) && isnan(expf(x[j]))))
				return false;
	}
	return true;
}

/* per level: 0 not asked yet, 1 exact, 2 not */
static _Atomic int att_expf_state[8];

bool att_expf_exact(void)
{
	const struct cpu_isa *isa = cpu_isa();
	unsigned l;
	int s;

	if (!isa->att || !isa->att->expf16)
		return false;
	for (l = 0; l < cpu_isa_count && cpu_isa_levels[l] != isa; l++)
		;
	s = atomic_load_explicit(&att_expf_state[l], memory_order_relaxed);
	if (!s) {
		/* racing threads compute the same answer */
		s = att_expf_check(isa->att) ? 1 : 2;
		atomic_store_explicit(&att_expf_state[l], s,
				      memory_order_relaxed);
	}
	return s == 1;
}

bool att_simd_usable(void)
{
	return att_level() != NULL;
}

bool att_expf_batch(float *y, const float *x, size_t n)
{
	const bool vector = att_expf_exact();
	size_t i = 0;

	if (vector)
		for (; i + 16 <= n; i += 16)
			att_level()->expf16(y + i, x + i);
	for (; i < n; i++)
		y[i] = expf(x[i]);
	return vector;
}

/*
 * ggml_vec_mad_f16: a vector FMA over whole steps and a scalar tail that
 * GCC contracts to the same FMA, so one fmaf per element.
 */
void att_mad_f16(uint16_t *y, const uint16_t *x, float v, uint32_t n, bool simd)
{
	uint32_t i;

	if (simd && att_level()) {
		att_level()->mad_f16(y, x, v, n);
		return;
	}
	for (i = 0; i < n; i++)
		y[i] = quant_fp32_to_fp16(fmaf(quant_fp16_to_fp32(x[i]), v,
					       quant_fp16_to_fp32(y[i])));
}

/* ggml_vec_scale_f16: y = y * v, rounded to F16 */
void att_scale_f16(uint16_t *y, float v, uint32_t n, bool simd)
{
	uint32_t i;

	if (simd && att_level()) {
		att_level()->scale_f16(y, v, n);
		return;
	}
	for (i = 0; i < n; i++)
		y[i] = quant_fp32_to_fp16(quant_fp16_to_fp32(y[i]) * v);
}

void att_f16_to_f32(float *y, const uint16_t *x, uint32_t n, bool simd)
{
	uint32_t i;

	if (simd && att_level()) {
		att_level()->f16_to_f32(y, x, n);
		return;
	}
	for (i = 0; i < n; i++)
		y[i] = quant_fp16_to_fp32(x[i]);
}

/* ggml_vec_mad_f32: one FMA per element, vector part and tail alike */
static void att_mad_f32(float *y, const float *x, float v, uint32_t n)
{
	uint32_t i;

	if (att_level()) {
		att_level()->mad_f32(y, x, v, n);
		return;
	}
	for (i = 0; i < n; i++)
		y[i] = fmaf(x[i], v, y[i]);
}

static void att_scale_f32(float *y, float v, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		y[i] = y[i] * v;
}

/* ---- one head ---------------------------------------------------------- */

size_t att_scratch_bytes(const struct att_shape *sh)
{
	/* Q as F32 is the widest vec_dot row */
	return cpu_align64((size_t)sh->head_dim * 4 + 64) +
	       cpu_align64((size_t)sh->head_dim_v * 2) +
	       2 * cpu_align64((size_t)sh->head_dim_v * 4);
}

void att_begin(struct att_state *st, const struct att_shape *sh, const float *q,
	       void *scratch)
{
	uint8_t *p = scratch;

	st->sh = sh;
	st->M = -INFINITY;
	st->S = 0.0f;
	st->q = p;
	p += cpu_align64((size_t)sh->head_dim * 4 + 64);
	st->acc16 = (uint16_t *)p;
	p += cpu_align64((size_t)sh->head_dim_v * 2);
	st->acc32 = (float *)p;
	p += cpu_align64((size_t)sh->head_dim_v * 4);
	st->v32 = (float *)p;
	st->v_elem = quant_traits(sh->type_v)->kv_elem;
	if (st->v_elem == QUANT_KV_F16)
		memset(st->acc16, 0, sh->head_dim_v * sizeof(*st->acc16));
	else
		memset(st->acc32, 0, sh->head_dim_v * sizeof(*st->acc32));
	cpu_from_float(quant_vec_dot_type(sh->type_k), q, st->q, sh->head_dim);
}

/* One position: s = K.Q scaled, then the online softmax step. */
static void att_step(struct att_state *st, const uint8_t *k, const uint8_t *v)
{
	const struct att_shape *sh = st->sh;
	const uint32_t dv = sh->head_dim_v;
	float s, ms = 1.0f, vs = 1.0f;

	s = dot_row(sh->type_k, sh->head_dim, k, st->q, false);
	s = s * sh->scale;
	s += 0.0f; /* the mask of a visible position */
	if (s > st->M) {
		float mold = st->M;

		st->M = s;
		ms = expf(mold - st->M);
		if (st->v_elem == QUANT_KV_F16)
			att_scale_f16(st->acc16, ms, dv, true);
		else
			att_scale_f32(st->acc32, ms, dv);
	} else {
		vs = expf(s - st->M);
	}
	if (st->v_elem == QUANT_KV_F16) {
		att_mad_f16(st->acc16, (const uint16_t *)v, vs, dv, true);
	} else if (st->v_elem == QUANT_KV_F32) {
		att_mad_f32(st->acc32, (const float *)v, vs, dv);
	} else {
		quant_to_float(sh->type_v, v, st->v32, dv);
		att_mad_f32(st->acc32, st->v32, vs, dv);
	}
	st->S = st->S * ms + vs;
}

void att_run_steps(struct att_state *st, const uint8_t *k, size_t k_stride,
		   const uint8_t *v, size_t v_stride, uint32_t n)
{
	uint32_t c;

	for (c = 0; c < n; c++)
		att_step(st, k + c * k_stride, v + c * v_stride);
}

void att_run(struct att_state *st, const uint8_t *k, size_t k_stride,
	     const uint8_t *v, size_t v_stride, uint32_t n)
{
	const struct att_shape *sh = st->sh;
	const struct cpu_isa_att *att = att_level();

	if (quant_traits(sh->type_k)->kv_elem == QUANT_KV_F16 &&
	    quant_traits(sh->type_v)->kv_elem == QUANT_KV_F16 &&
	    sh->head_dim % 64 == 0 && sh->head_dim <= ATT_FAST_MAX &&
	    sh->head_dim_v % 16 == 0 && sh->head_dim_v <= ATT_FAST_MAX && att &&
	    att->run_f16) {
		att->run_f16(st, k, k_stride, v, v_stride, n);
		return;
	}
	att_run_steps(st, k, k_stride, v, v_stride, n);
}

void att_vkq(struct att_state *st, float *vkq)
{
	const uint32_t dv = st->sh->head_dim_v;

	if (st->v_elem == QUANT_KV_F16)
		att_f16_to_f32(vkq, st->acc16, dv, true);
	else if (vkq != st->acc32)
		memcpy(vkq, st->acc32, dv * sizeof(*vkq));
}

void att_end(struct att_state *st, float *out)
{
	float s_inv = st->S == 0.0f ? 0.0f : 1.0f / st->S;

	att_vkq(st, out);
	att_scale_f32(out, s_inv, st->sh->head_dim_v);
}

void att_merge_end(float *out, float S, uint32_t head_dim_v)
{
	if (S != 0.0f)
		att_scale_f32(out, 1.0f / S, head_dim_v);
}

void att_merge(float *out, const float *partials, size_t stride, uint32_t n,
	       uint32_t head_dim_v)
{
	float M = -INFINITY, S = 0.0f;
	uint32_t c;

	memset(out, 0, head_dim_v * sizeof(*out));
	for (c = 0; c < n; c++) {
		const float *p = partials + c * stride;

		engine_att_merge_step(out, &M, &S, p[0], p[1], p + 2,
				      head_dim_v);
	}
	att_merge_end(out, S, head_dim_v);
}
