/* SPDX-License-Identifier: MIT */
/*
 * A tensor as the kernels see it: its shape and type (the file's record),
 * where its bytes are now (the placement record) and how a row is laid
 * out. No model, no hyper-parameters: a kernel of any backend takes this
 * view and nothing else of the model, as a ggml op takes a ggml_tensor.
 *
 * The bytes are reached through the io_placement record and its ->data
 * is read at each use, so that io_weights_move (or a backend that copies
 * the tensor into its own memory) can move them between forward passes.
 *
 * Shapes use ggml's order: ne[0] is the length of a row (the input
 * dimension of a matmul), ne[1] the number of rows (its outputs), ne[2]
 * the expert.
 */
#ifndef LLMFS_ENGINE_TENSOR_H
#define LLMFS_ENGINE_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "../io/io.h"

/* One tensor of the file; absent optional tensors have info == NULL. */
struct engine_tensor {
	const struct io_gguf_tensor *info; /* name, type, ne */
	struct io_placement *place;	   /* where the bytes are now */
	uint64_t row_bytes;		   /* bytes of ne[0] elements */
	/*
	 * llama.cpp's CPU backend would hold this matrix interleaved
	 * (CPU_REPACK: the types with a repacked gemv order in the type
	 * table, rows in multiples of 8, used by a matmul) and multiply it
	 * with its gemv kernels, which add up in another order: the
	 * one-token order to reproduce. Not our packed panels
	 * (io_placement.layout), which keep the order this flag picks.
	 */
	bool llama_repacked;
};

static inline const uint8_t *engine_tensor_data(const struct engine_tensor *t)
{
	return (const uint8_t *)t->place->data;
}

static inline bool engine_tensor_present(const struct engine_tensor *t)
{
	return t->info != NULL;
}

#endif
