/* SPDX-License-Identifier: MIT */
/*
 * A model's file type: llama.cpp's enum llama_ftype, which a converted or
 * quantized file records as general.file_type, named as llama-quantize
 * takes it and as Ollama prints it ("Q4_K_M"; tools/quantize/quantize.cpp,
 * fs/ggml/type.go). A file without the key gets llama.cpp's guess
 * (llama_model_loader): the type of the most tensors, a K-quant read as
 * its _M mix, marked guessed.
 */
#include <stdlib.h>
#include <string.h>

#include "io.h"

static const char *const ftype_names[] = {
	[0] = "F32",	    [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",
	[7] = "Q8_0",	    [8] = "Q5_0",    [9] = "Q5_1",    [10] = "Q2_K",
	[11] = "Q3_K_S",    [12] = "Q3_K_M", [13] = "Q3_K_L", [14] = "Q4_K_S",
	[15] = "Q4_K_M",    [16] = "Q5_K_S", [17] = "Q5_K_M", [18] = "Q6_K",
	[19] = "IQ2_XXS",   [20] = "IQ2_XS", [21] = "Q2_K_S", [22] = "IQ3_XS",
	[23] = "IQ3_XXS",   [24] = "IQ1_S",  [25] = "IQ4_NL", [26] = "IQ3_S",
	[27] = "IQ3_M",	    [28] = "IQ2_S",  [29] = "IQ2_M",  [30] = "IQ4_XS",
	[31] = "IQ1_M",	    [32] = "BF16",   [36] = "TQ1_0",  [37] = "TQ2_0",
	[38] = "MXFP4_MOE", [39] = "NVFP4",  [40] = "Q1_0",   [41] = "Q2_0",
};

/*
 * The file type llama.cpp guesses from a tensor type (no _S/_L mixes);
 * a type it has no case for is F32 (0), there as here.
 */
static const uint8_t ftype_of_type[IO_TYPE_COUNT] = {
	[IO_TYPE_F32] = 0,   [IO_TYPE_F16] = 1,	  [IO_TYPE_Q4_0] = 2,
	[IO_TYPE_Q4_1] = 3,  [IO_TYPE_Q5_0] = 8,  [IO_TYPE_Q5_1] = 9,
	[IO_TYPE_Q8_0] = 7,  [IO_TYPE_Q2_K] = 10, [IO_TYPE_Q3_K] = 12,
	[IO_TYPE_Q4_K] = 15, [IO_TYPE_Q5_K] = 17, [IO_TYPE_Q6_K] = 18,
	[IO_TYPE_BF16] = 32,
};

const char *io_ftype_name(uint32_t ftype)
{
	if (ftype < sizeof(ftype_names) / sizeof(ftype_names[0]) &&
	    ftype_names[ftype])
		return ftype_names[ftype];
	return "unknown";
}

static int ftype_by_name(const void *a, const void *b)
{
	return strcmp((*(const struct io_gguf_tensor *const *)a)->name,
		      (*(const struct io_gguf_tensor *const *)b)->name);
}

uint32_t io_gguf_ftype(const struct io_gguf *g, bool *guessed)
{
	uint64_t count[IO_TYPE_COUNT] = { 0 }, most = 0;
	const struct io_gguf_tensor **by_name;
	uint32_t ftype, best = IO_TYPE_F32;

	if (!io_gguf_get_u32(g, "general.file_type", &ftype)) {
		*guessed = false;
		return ftype;
	}
	*guessed = true;
	/*
	 * llama.cpp walks its tensors in name order (a std::map) and keeps
	 * the first type to reach the largest count: ties go the same way.
	 */
	by_name = malloc(g->n_tensors * sizeof(*by_name) + 1);
	if (!by_name)
		return 0;
	for (uint64_t i = 0; i < g->n_tensors; i++)
		by_name[i] = &g->tensors[i];
	qsort(by_name, g->n_tensors, sizeof(*by_name), ftype_by_name);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		uint32_t t = by_name[i]->type;

		if (t < IO_TYPE_COUNT && ++count[t] > most) {
			most = count[t];
			best = t;
		}
	}
	free(by_name);
	return ftype_of_type[best];
}
