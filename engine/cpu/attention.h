/* SPDX-License-Identifier: MIT */
/*
 * Attention of one query head over cached positions, computed as
 * ggml_compute_forward_flash_attn_ext_f16_one_chunk (ggml-cpu/ops.cpp)
 * does for every K and V cache type llama.cpp offers (-ctk/-ctv: f32 f16
 * bf16 q8_0 q4_0 q4_1 q5_0 q5_1):
 *
 *   Q is converted to K's vec_dot type (F16 for F16 K, Q8_0 for Q4_0 K,
 *   Q8_1 for Q4_1 K, ...), each cached K row dotted with it by K's dot
 *   kernel (dot.h), scaled; an online softmax with expf; V
 *   accumulated in an F16 vector for F16 V (ggml_vec_mad_f16 and
 *   ggml_vec_scale_f16, rounding to F16 after every step), otherwise each
 *   V row converted to floats and accumulated in F32 (ggml_vec_mad_f32).
 *
 * The positions come in runs of constant stride (att_run), so that a
 * paged cache passes one run per block; how the positions are cut into
 * runs does not change a bit. A head over more than ENGINE_ATT_CHUNK
 * positions is walked in chunks, their partials merged in order: the
 * order every backend shares (engine/attention_order.h).
 *
 * The F16 steps use F16C/AVX2/AVX-512 conversions where the CPU has them: every
 * element goes through the same operation as in the scalar code (one FMA,
 * one rounding to nearest even), so the bits are the same either way.
 */
#ifndef LLMFS_ENGINE_CPU_ATTENTION_H
#define LLMFS_ENGINE_CPU_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../attention_order.h"

/* Shape and types of one layer's attention. */
struct att_shape {
	uint32_t type_k, type_v; /* enum io_type */
	uint32_t head_dim, head_dim_v;
	float scale;
};

/* Bytes of per-thread scratch att_begin needs (see struct att_state). */
size_t att_scratch_bytes(const struct att_shape *sh);

/* The running state of one head over one range of positions. */
struct att_state {
	const struct att_shape *sh;
	float M, S;	 /* the maximum K.Q so far, the sum of exp(s - M) */
	uint8_t *q;	 /* Q in K's vec_dot type */
	uint16_t *acc16; /* F16 V: the accumulator */
	float *acc32;	 /* other V types: the accumulator, then VKQ32 */
	float *v32;	 /* one V row as floats */
	int v_elem;	 /* how V is read: quant.h's enum quant_kv_elem */
};

/*
 * Start a head: Q (head_dim floats) converted for K's dot, the
 * accumulator zeroed. scratch: att_scratch_bytes, 64-aligned, borrowed.
 */
void att_begin(struct att_state *st, const struct att_shape *sh, const float *q,
	       void *scratch);

/* n positions: K rows at k + i * k_stride, V rows at v + i * v_stride. */
void att_run(struct att_state *st, const uint8_t *k, size_t k_stride,
	     const uint8_t *v, size_t v_stride, uint32_t n);

/*
 * The unnormalized result in floats (head_dim_v), what a chunk's partial
 * holds: the F16 accumulator converted, or the F32 one copied.
 */
void att_vkq(struct att_state *st, float *vkq);

/* out = vkq / S, as ggml_vec_scale_f32 by 1/S (0 for S == 0). */
void att_end(struct att_state *st, float *out);

/* The chunks of a head over n positions (1 for n <= ENGINE_ATT_CHUNK). */
static inline uint32_t att_chunks(uint32_t n)
{
	return n <= ENGINE_ATT_CHUNK ?
		       1 :
		       (n + ENGINE_ATT_CHUNK - 1) / ENGINE_ATT_CHUNK;
}

/* out = out / S after the last engine_att_merge_step (0 for S == 0: out stays). */
void att_merge_end(float *out, float S, uint32_t head_dim_v);

/*
 * ggml_flash_attn_ext_reduce_partials for one head: merge n partials
 * (M, S, vkq[head_dim_v] each, stride floats apart, in position order)
 * into out, normalized.
 */
void att_merge(float *out, const float *partials, size_t stride, uint32_t n,
	       uint32_t head_dim_v);

/*
 * att_run one position at a time through the general step (dot_row, the
 * vector steps), whatever the types: what the fused F16 loop att_run
 * takes for F16 K and V must match bit for bit (test_attention).
 */
void att_run_steps(struct att_state *st, const uint8_t *k, size_t k_stride,
		   const uint8_t *v, size_t v_stride, uint32_t n);

/* The F16 vector steps, exposed for tests/engine/test_attention.c. */
void att_mad_f16(uint16_t *y, const uint16_t *x, float v, uint32_t n,
		 bool simd);
void att_scale_f16(uint16_t *y, float v, uint32_t n, bool simd);
void att_f16_to_f32(float *y, const uint16_t *x, uint32_t n, bool simd);
/* Whether the CPU's level (engine/cpu/isa.h) has vector versions. */
bool att_simd_usable(void);
/*
 * Whether the level's vector expf gives this libm's bits (checked once
 * per level): the fused loops use it only then.
 */
bool att_expf_exact(void);
/* The longest head the fused F16 loops of the levels take. */
#define ATT_FAST_MAX 256
/*
 * The fused F16 loops' online softmax over a run of m (<= 16) scores
 * sc: the running maximum *M, and each position's one expf argument in
 * e[16]: mold - M where the maximum moves (its bit set in the result),
 * s - M where it does not, 0 from m on (the 16 lanes of one expf16).
 */
static inline uint32_t att_run_max16(const float *sc, uint32_t m, float *M,
				     float *e)
{
	uint32_t c, up = 0;

	for (c = 0; c < 16; c++) {
		if (c >= m) {
			e[c] = 0.0f;
		} else if (sc[c] > *M) {
			e[c] = *M - sc[c];
			*M = sc[c];
			up |= 1u << c;
		} else {
			e[c] = sc[c] - *M;
		}
	}
	return up;
}
/*
 * y[i] = expf(x[i]) with libm's bits; 16 at a time in the level's vectors
 * where that reproduces this machine's libm (att_expf_exact), libm's expf
 * otherwise.
 * Returns whether the vector path is in use (tests/engine/test_attention.c
 * compares it with expf).
 */
bool att_expf_batch(float *y, const float *x, size_t n);

#endif
