/* SPDX-License-Identifier: MIT */
/*
 * The order of a head's attention that every backend shares, so that
 * they give one another's bits: a head over more than ENGINE_ATT_CHUNK
 * positions is walked in chunks of that many, each from a fresh state,
 * and the chunks' partials (max M, sum S, unnormalized VKQ) are merged
 * in position order, as ggml_flash_attn_ext_reduce_partials merges
 * llama.cpp's split-KV partials: a fixed order, whatever the thread
 * count, that a GPU can compute a chunk a block. The CPU backend, the
 * reference backend and the CUDA kernels' CPU-order path use it
 * (Documentation/engine.md, One-token attention).
 */
#ifndef LLMFS_ENGINE_ATTENTION_ORDER_H
#define LLMFS_ENGINE_ATTENTION_ORDER_H

#include <math.h>
#include <stdint.h>

/*
 * Positions of one chunk of a head's walk. 256: every row below 256
 * positions (all the golden prompts') is one chunk, walked as ggml's
 * one_chunk loop walks it; a merge per 256 positions costs about 1% of
 * the walk (two expf and head_dim_v FMAs against 256 x (head_dim +
 * head_dim_v) FMAs).
 */
#define ENGINE_ATT_CHUNK 256

/*
 * One chunk's partial (mc, sc, vkq[head_dim_v]) merged into the running
 * out, *M, *S (out zeroed, *M -INFINITY and *S 0 before the first), so
 * that a head's chunks can be merged as they come. The reduction is C++
 * built with contraction: GCC fuses the first product of a*b + c*d and
 * rounds the second; the fmaf calls say so whatever this file's
 * contraction.
 */
static inline void engine_att_merge_step(float *out, float *M, float *S,
					 float mc, float sc, const float *vkq,
					 uint32_t head_dim_v)
{
	float mn, so, sn;
	uint32_t d;

	if (sc == 0.0f)
		return;
	mn = fmaxf(*M, mc);
	so = expf(*M - mn);
	sn = expf(mc - mn);
	for (d = 0; d < head_dim_v; d++)
		out[d] = fmaf(out[d], so, vkq[d] * sn);
	*S = fmaf(*S, so, sc * sn);
	*M = mn;
}

#endif
