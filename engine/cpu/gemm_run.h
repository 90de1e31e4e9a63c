/* SPDX-License-Identifier: MIT */
/*
 * The CPU backend's batched matmul through the rows-in-lanes GEMM
 * (gemm.h): the driver that packs the tokens once, splits the rows over
 * the pool in panels of CPU_GEMM_ROWS and runs each panel, made once,
 * over every token. engine/cpu/backend.c calls it before the tile and
 * row paths of ops_matmul.
 */
#ifndef LLMFS_ENGINE_CPU_GEMM_RUN_H
#define LLMFS_ENGINE_CPU_GEMM_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "../model.h"
#include "../pool.h"

/*
 * Whether cpu_gemm_matmul runs w for a batch of n_tok tokens: n_tok >= 2
 * and >= the kernels' min_tokens (below it the tile kernels measure
 * faster), w's type has GEMM kernels (quant_traits()->gemm_avx512), AVX-512 VNNI
 * is there, and either batch_exact is off or the kernels give the
 * one-token bits of w (exact kernels on a repacked tensor).
 */
bool cpu_gemm_able(const struct engine_tensor *w, uint32_t n_tok,
		   bool batch_exact);
/*
 * ys[t] = w (of expert e) . acts[t] for t < n_tok, as ops_matmul, with
 * the type's GEMM kernels (where cpu_gemm_able). The scratch is the
 * pool's. 0, or -ENOTSUP (not able) or -ENOMEM (no scratch), computing
 * nothing: the caller then takes ops_matmul.
 */
int cpu_gemm_matmul(struct engine_pool *pool, float *const *ys,
		    const struct engine_tensor *w, int64_t e, uint32_t n_tok,
		    const void *const *acts, bool batch_exact);

#endif
