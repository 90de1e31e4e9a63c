// SPDX-License-Identifier: MIT
/*
 * The pooling of a model's embeddings: {arch}.pooling_type of the GGUF,
 * llama.cpp's llama_pooling_type numbers. Causal language models (the
 * llama, qwen2, qwen3 files we run) have none: node-llama-cpp's embedding
 * context then takes the last token's state (llama_get_embeddings_ith(-1)),
 * and so does engine_generation's embed mode. Embedding models made from
 * them (Qwen3-Embedding: last) say theirs. Rank pooling (rerankers) and
 * unknown values are read as none.
 */
#include <stdio.h>

#include "engine.h"

enum engine_pooling engine_model_pooling(const struct engine_model *m)
{
	const struct engine_model_info *in = engine_model_info(m);
	char key[160];
	uint32_t v;

	snprintf(key, sizeof(key), "%s.pooling_type", in->arch_name);
	if (io_gguf_get_u32(engine_model_gguf(m), key, &v) ||
	    v > ENGINE_POOLING_LAST)
		return ENGINE_POOLING_NONE;
	return (enum engine_pooling)v;
}

const char *engine_pooling_name(enum engine_pooling p)
{
	switch (p) {
	case ENGINE_POOLING_MEAN: return "mean";
	case ENGINE_POOLING_CLS: return "cls";
	case ENGINE_POOLING_LAST: return "last";
	default: return "none";
	}
}
