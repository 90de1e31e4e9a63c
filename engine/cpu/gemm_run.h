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

#include "../tensor.h"
#include "threadpool.h"

/*
 * Whether cpu_gemm_matmul runs w for a batch of n_tok tokens: n_tok >= 2
 * and >= the kernels' min_tokens (below it the tile kernels measure
 * faster), w's type has GEMM kernels at the CPU's level (engine/cpu/isa.h;
 * every level has them for the same types), and either batch_exact is off
 * or the kernels give the one-token bits of w (exact kernels on a
 * repacked tensor). Always, for
 * a packed w (any n_tok >= 1): nothing else reads its bytes as they are.
 */
bool cpu_gemm_able(const struct engine_tensor *w, uint32_t n_tok,
		   bool batch_exact);
/*
 * ys[t] = w (of expert e) . acts[t] for t < n_tok, as ops_matmul, with
 * the type's GEMM kernels (where cpu_gemm_able). The scratch is the
 * pool's. 0, or -ENOTSUP (not able) or -ENOMEM (no scratch), computing
 * nothing: the caller then takes ops_matmul.
 */
int cpu_gemm_matmul(struct cpu_threadpool *pool, float *const *ys,
		    const struct engine_tensor *w, int64_t e, uint32_t n_tok,
		    const void *const *acts, bool batch_exact);

/*
 * Packed matrices (gemm.h's cpu_gemm_packed): io_placement.layout of a
 * matrix the CPU backend packed in place.
 */
#define CPU_LAYOUT_PANELS 1
/* the longest row a packed matrix may have (get_rows unpacks one on the stack) */
#define CPU_PACKED_ROW_MAX (32 << 10)

/*
 * Whether w may be packed: its type has packed kernels whose one-token
 * order is w's (engine_tensor.llama_repacked) at the CPU's level (every level
 * packs the same matrices, so the bits do not depend on it), w's rows
 * per expert are a multiple of 16 and no longer than CPU_PACKED_ROW_MAX,
 * and it is in host memory, not packed yet.
 */
bool cpu_gemm_packable(const struct engine_tensor *w);
/*
 * Pack w's bytes in place (every expert), its panels split over the
 * pool's threads, then mark its placement CPU_LAYOUT_PANELS: from then
 * on every read of them must go through the functions below. 0 or
 * -ENOMEM (nothing changed).
 */
int cpu_gemm_pack(struct cpu_threadpool *pool, const struct engine_tensor *w);
/* Row r of expert e of a packed w in the file's bytes, into row. */
void cpu_gemm_unpack_row(const struct engine_tensor *w, int64_t e, int64_t r,
			 void *row);
/*
 * size bytes of t's file bytes from off (within t->bytes), of a matrix
 * packed at data, into buf.
 */
void cpu_gemm_packed_read(const struct io_gguf_tensor *t, const void *data,
			  uint64_t off, size_t size, void *buf);
/* bytes of one token's activations for w's packed kernels (64-aligned) */
size_t cpu_gemm_act_bytes(const struct engine_tensor *w);
/* One token's activation (w's vec_dot_type) into the kernels' form. */
void cpu_gemm_act_pack(const struct engine_tensor *w, const void *act,
		       void *dst);
/*
 * y[r] = row r of a packed w . the token at act (cpu_gemm_act_pack's) for
 * rows [r0, r1), both multiples of 16 (or r1 the last row): the one-token
 * path's bits (run_exact), on the calling thread.
 */
void cpu_gemm_packed_rows(const struct engine_tensor *w, const void *act,
			  int64_t r0, int64_t r1, float *y);

#endif
