// SPDX-License-Identifier: MIT
/*
 * The attention kernels only a switch launches (attention.cu): the fold
 * (rows past the default LLMFS_CUDA_ATT_EXACT kept in the CPU's order,
 * and LLMFS_CUDA_ATT_WALK=row) and the staged walk
 * (LLMFS_CUDA_ATT_WALK=staged). They are two thirds of the attention
 * kernels, so a file of their own that the module links only with
 * `make CUDA_VARIANTS=1` (tools/gpu-carry.sh sets it), built for sm_90,
 * the card they are measured on: left out, make check's build of the
 * module is shorter (Documentation/testing.md). The simulator always has
 * them, and make check's tests run them there. Without them k_attention
 * runs the default walk and says so once.
 */
#include "attention_split.cuh"

#define ATT_VARIANT(K, V, FOLD, STAGED) \
	{ att_split<K, V, 1, FOLD, STAGED>, att_split<K, V, 2, FOLD, STAGED>, \
	  att_split<K, V, 4, FOLD, STAGED>, att_split<K, V, 8, FOLD, STAGED> }

static const att_variant_kernels att_variant_table[] = {
#define ATT_ENTRY(K, V) \
	{ K, V, ATT_VARIANT(K, V, true, false), ATT_VARIANT(K, V, false, true) },
	KV_TYPES(ATT_ENTRY)
#undef ATT_ENTRY
};

/* handed over when the module is loaded */
[[maybe_unused]] static const bool att_variants_registered =
	(att_variants_register(att_variant_table, sizeof att_variant_table /
							  sizeof att_variant_table[0]),
	 true);
