// SPDX-License-Identifier: MIT
/*
 * Opening a model: the GGUF metadata becomes struct engine_hparams, each
 * tensor the graph needs becomes a checked view, io/ loads the bytes and
 * the tokenizer its vocabulary.
 *
 * Key names and defaults are llama.cpp's (src/llama-model.cpp,
 * load_hparams and the per-arch loaders), so that a file llama.cpp runs
 * is read the same way here. What the engine cannot compute is refused at
 * open, with the name of the key or tensor, never met in the middle of a
 * forward pass.
 *
 *   build/bin/llmfs-inspect ../shared/models/stories260K.gguf
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "model.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"

#define MODEL_MAX_LAYERS 512
#define MODEL_MAX_EXPERTS 512
#define MODEL_MAX_DIM (1u << 20)

static const struct {
	const char *name;
	enum engine_arch arch;
} model_archs[] = {
	{ "llama", ENGINE_ARCH_LLAMA },
	{ "qwen2", ENGINE_ARCH_QWEN2 },
	{ "qwen3", ENGINE_ARCH_QWEN3 },
	{ "qwen3moe", ENGINE_ARCH_QWEN3MOE },
};

/* ---- metadata ---------------------------------------------------------- */

/*
 * A u32 hyper-parameter "<arch>.<key>". llama.cpp also accepts a per-layer
 * array (get_key_or_arr); one whose entries all agree is read as that
 * value, a varying one is refused (no per-layer shapes here).
 */
static int model_get_u32(const struct engine_model *m, const char *key,
			 uint32_t *out, bool required, struct err *err)
{
	const struct io_gguf_array *arr;
	char full[160];
	uint64_t i;
	int ret;

	snprintf(full, sizeof(full), "%s.%s", m->info.arch_name, key);
	ret = io_gguf_get_u32(m->gguf, full, out);
	if (ret == 0)
		return 0;
	if (ret == -ENOENT) {
		if (!required)
			return 0;
		return err_set(err, EINVAL, "%s: missing key '%s'", m->path,
			       full);
	}
	arr = io_gguf_get_array(m->gguf, full, IO_GGUF_UINT32);
	if (!arr)
		arr = io_gguf_get_array(m->gguf, full, IO_GGUF_INT32);
	if (arr && arr->n > 0) {
		const uint32_t *v = arr->data;

		for (i = 1; i < arr->n; i++)
			if (v[i] != v[0])
				return err_set(
					err, ENOTSUP,
					"%s: key '%s' varies per layer (not supported)",
					m->path, full);
		*out = v[0];
		return 0;
	}
	return err_set(err, EINVAL, "%s: key '%s' is not an unsigned integer",
		       m->path, full);
}

static int model_get_f32(const struct engine_model *m, const char *key,
			 float *out, bool required, struct err *err)
{
	char full[160];
	int ret;

	snprintf(full, sizeof(full), "%s.%s", m->info.arch_name, key);
	ret = io_gguf_get_f32(m->gguf, full, out);
	if (ret == 0)
		return 0;
	if (ret == -ENOENT && !required)
		return 0;
	if (ret == -ENOENT)
		return err_set(err, EINVAL, "%s: missing key '%s'", m->path,
			       full);
	return err_set(err, EINVAL, "%s: key '%s' is not a number", m->path,
		       full);
}

static int model_check_dim(const struct engine_model *m, const char *what,
			   uint32_t v, struct err *err)
{
	if (v == 0 || v > MODEL_MAX_DIM)
		return err_set(err, EINVAL, "%s: %s = %u is out of range",
			       m->path, what, v);
	return 0;
}

/* A hyper-parameter "<arch>.<key>" and where it goes. */
struct model_key {
	const char *key;
	size_t off; /* in struct engine_hparams */
	bool is_float;
};

#define MODEL_U32(k, f) \
	{ \
		k, offsetof(struct engine_hparams, f), false \
	}
#define MODEL_F32(k, f) \
	{ \
		k, offsetof(struct engine_hparams, f), true \
	}

/* Required by llama.cpp for every one of our archs. */
static const struct model_key model_required[] = {
	MODEL_U32("context_length", n_ctx_train),
	MODEL_U32("embedding_length", n_embd),
	MODEL_U32("block_count", n_layer),
	MODEL_U32("attention.head_count", n_head),
	MODEL_F32("attention.layer_norm_rms_epsilon", rms_norm_eps),
};

/* Optional; the defaults are set before these are read. */
static const struct model_key model_optional[] = {
	MODEL_U32("attention.head_count_kv", n_head_kv),
	MODEL_U32("attention.key_length", head_dim),
	MODEL_U32("attention.value_length", head_dim_v),
	MODEL_U32("feed_forward_length", n_ff),
	MODEL_U32("expert_count", n_expert),
	MODEL_U32("expert_used_count", n_expert_used),
	MODEL_U32("expert_feed_forward_length", n_ff_exp),
	MODEL_F32("rope.freq_base", rope_freq_base),
};

static int model_get_keys(struct engine_model *m, const struct model_key *keys,
			  size_t n, bool required, struct err *err)
{
	size_t i;
	int ret;

	for (i = 0; i < n; i++) {
		void *dst = (char *)&m->hp + keys[i].off;

		ret = keys[i].is_float ?
			      model_get_f32(m, keys[i].key, dst, required,
					    err) :
			      model_get_u32(m, keys[i].key, dst, required, err);
		if (ret)
			return ret;
	}
	return 0;
}

/* The sizes every arch has: embedding, layers, heads, context. */
static int model_read_sizes(struct engine_model *m, struct err *err)
{
	struct engine_hparams *hp = &m->hp;
	int ret;

	ret = model_get_keys(m, model_required,
			     sizeof(model_required) / sizeof(model_required[0]),
			     true, err);
	if (ret)
		return ret;
	if ((ret = model_check_dim(m, "embedding_length", hp->n_embd, err)) ||
	    (ret = model_check_dim(m, "attention.head_count", hp->n_head, err)))
		return ret;
	if (hp->n_ctx_train == 0)
		return err_set(err, EINVAL, "%s: %s.context_length is 0",
			       m->path, m->info.arch_name);
	if (hp->n_layer == 0 || hp->n_layer > MODEL_MAX_LAYERS)
		return err_set(err, EINVAL,
			       "%s: block_count = %u is out of range", m->path,
			       hp->n_layer);
	return 0;
}

/* The heads' shapes (llama.cpp's defaults for the optional keys). */
static int model_read_heads(struct engine_model *m, struct err *err)
{
	struct engine_hparams *hp = &m->hp;
	int ret;

	hp->n_head_kv = hp->n_head;
	hp->head_dim = hp->n_embd / hp->n_head;
	hp->head_dim_v = hp->n_embd / hp->n_head;
	hp->rope_freq_base = 10000.0f;
	ret = model_get_keys(m, model_optional,
			     sizeof(model_optional) / sizeof(model_optional[0]),
			     false, err);
	if (ret)
		return ret;
	hp->n_rot = hp->head_dim;
	ret = model_get_u32(m, "rope.dimension_count", &hp->n_rot, false, err);
	if (ret)
		return ret;

	if ((ret = model_check_dim(m, "attention.head_count_kv", hp->n_head_kv,
				   err)) ||
	    (ret = model_check_dim(m, "attention.key_length", hp->head_dim,
				   err)) ||
	    (ret = model_check_dim(m, "attention.value_length", hp->head_dim_v,
				   err)))
		return ret;
	if (hp->n_head % hp->n_head_kv)
		return err_set(
			err, EINVAL,
			"%s: head_count %u is not a multiple of head_count_kv %u",
			m->path, hp->n_head, hp->n_head_kv);
	/* the graphs of all four archs assert this (models/llama.cpp) */
	if (hp->n_rot != hp->head_dim || hp->head_dim_v != hp->head_dim)
		return err_set(
			err, ENOTSUP,
			"%s: rope.dimension_count %u / value_length %u differ from key_length %u (not supported)",
			m->path, hp->n_rot, hp->head_dim_v, hp->head_dim);
	if (hp->n_rot % 2)
		return err_set(err, EINVAL, "%s: odd rope.dimension_count %u",
			       m->path, hp->n_rot);
	if (!(hp->rms_norm_eps >= 0.0f) || !isfinite(hp->rms_norm_eps))
		return err_set(err, EINVAL, "%s: bad layer_norm_rms_epsilon",
			       m->path);
	/* llama.cpp reads no attention.scale for these archs */
	hp->kq_scale = 1.0f / sqrtf((float)hp->head_dim);
	return 0;
}

/* RoPE's base and scaling: linear is a frequency scale; YaRN etc. not here. */
static int model_read_rope(struct engine_model *m, struct err *err)
{
	struct engine_hparams *hp = &m->hp;
	const char *scaling;
	float scale = 0.0f;
	char key[160];
	int ret;

	if (!(hp->rope_freq_base > 0.0f) || !isfinite(hp->rope_freq_base))
		return err_set(err, EINVAL, "%s: bad rope.freq_base", m->path);
	snprintf(key, sizeof(key), "%s.rope.scaling.type", m->info.arch_name);
	scaling = io_gguf_get_str(m->gguf, key);
	if (scaling && strcmp(scaling, "linear") && strcmp(scaling, "none"))
		return err_set(
			err, ENOTSUP,
			"%s: rope scaling '%s' is not supported (linear only)",
			m->path, scaling);
	if ((ret = model_get_f32(m, "rope.scaling.factor", &scale, false, err)))
		return ret;
	if (scale == 0.0f &&
	    (ret = model_get_f32(m, "rope.scale_linear", &scale, false, err)))
		return ret;
	if (scale < 0.0f || !isfinite(scale))
		return err_set(err, EINVAL, "%s: bad rope scaling factor",
			       m->path);
	hp->rope_freq_scale = scale == 0.0f ? 1.0f : 1.0f / scale;
	return 0;
}

/* The experts' counts, checked against each other and the engine. */
static int model_read_experts(struct engine_model *m, struct err *err)
{
	const struct engine_hparams *hp = &m->hp;

	if (hp->n_expert > MODEL_MAX_EXPERTS)
		return err_set(err, EINVAL,
			       "%s: expert_count %u is out of range", m->path,
			       hp->n_expert);
	if (hp->n_expert_used > hp->n_expert)
		return err_set(err, EINVAL,
			       "%s: expert_used_count %u > expert_count %u",
			       m->path, hp->n_expert_used, hp->n_expert);
	if (hp->n_expert > 0 && hp->n_expert_used == 0)
		return err_set(err, EINVAL, "%s: expert_used_count is 0",
			       m->path);
	if (hp->n_expert_used > ENGINE_MAX_EXPERTS_USED)
		return err_set(err, ENOTSUP,
			       "%s: expert_used_count %u > %u is not supported",
			       m->path, hp->n_expert_used,
			       ENGINE_MAX_EXPERTS_USED);
	return 0;
}

/* What each arch's graph does: rope pairs, Q/K norms, experts. */
static int model_arch_graph(struct engine_model *m, struct err *err)
{
	struct engine_hparams *hp = &m->hp;

	switch (m->info.arch) {
	case ENGINE_ARCH_LLAMA:
		hp->rope_mode = ENGINE_ROPE_NORM;
		if (hp->n_expert > 0)
			return err_set(
				err, ENOTSUP,
				"%s: llama with experts is not supported",
				m->path);
		break;
	case ENGINE_ARCH_QWEN2: hp->rope_mode = ENGINE_ROPE_NEOX; break;
	case ENGINE_ARCH_QWEN3:
		hp->rope_mode = ENGINE_ROPE_NEOX;
		hp->qk_norm = true;
		break;
	case ENGINE_ARCH_QWEN3MOE:
		hp->rope_mode = ENGINE_ROPE_NEOX;
		hp->qk_norm = true;
		hp->expert_weights_norm = true;
		if (hp->n_expert == 0)
			return err_set(err, EINVAL,
				       "%s: qwen3moe needs %s.expert_count > 0",
				       m->path, m->info.arch_name);
		/* llama.cpp's fallback when the per-expert size is absent */
		hp->n_ff = hp->n_ff_exp ? hp->n_ff_exp :
					  hp->n_ff / hp->n_expert_used;
		break;
	}
	if (m->info.arch != ENGINE_ARCH_QWEN3MOE && hp->n_expert > 0)
		return err_set(err, ENOTSUP,
			       "%s: experts in a '%s' model are not supported",
			       m->path, m->info.arch_name);
	return model_check_dim(m, "feed_forward_length", hp->n_ff, err);
}

/* n_vocab: the key if present, else the token list (as llama.cpp). */
static int model_read_vocab_size(struct engine_model *m, struct err *err)
{
	const struct io_gguf_array *toks;
	int ret;

	if ((ret = model_get_u32(m, "vocab_size", &m->hp.n_vocab, false, err)))
		return ret;
	if (m->hp.n_vocab == 0) {
		toks = io_gguf_get_array(m->gguf, "tokenizer.ggml.tokens",
					 IO_GGUF_STRING);
		if (toks && toks->n <= UINT32_MAX)
			m->hp.n_vocab = (uint32_t)toks->n;
	}
	return 0;
}

static int model_read_hparams(struct engine_model *m, struct err *err)
{
	int ret;

	if ((ret = model_read_sizes(m, err)) ||
	    (ret = model_read_heads(m, err)) ||
	    (ret = model_read_rope(m, err)) ||
	    (ret = model_read_experts(m, err)) ||
	    (ret = model_arch_graph(m, err)))
		return ret;
	return model_read_vocab_size(m, err);
}

/* ---- tensors ----------------------------------------------------------- */

/* Index of tensor name in the file, or -1. */
static int64_t model_tensor_index(const struct engine_model *m,
				  const char *name)
{
	const struct io_gguf_tensor *t = io_gguf_find_tensor(m->gguf, name);

	if (!t)
		return -1;
	return t - m->gguf->tensors;
}

enum model_tensor_kind {
	MT_NORM,   /* F32 vector (norm weight, bias) */
	MT_MATMUL, /* any type the dot kernels take */
};

/*
 * Bind tensor name to *t after checking that its shape is ne (n dims,
 * the rest 1) and its type suits kind. A missing optional tensor leaves
 * *t empty. The placement record comes after the load (model_place).
 */
static int model_bind(struct engine_model *m, struct engine_tensor *t,
		      const char *name, enum model_tensor_kind kind,
		      bool required, uint32_t n, const int64_t *ne,
		      struct err *err)
{
	const struct io_gguf_tensor *info;
	const struct io_type_info *ti;
	int64_t i;
	uint32_t d;

	memset(t, 0, sizeof(*t));
	i = model_tensor_index(m, name);
	if (i < 0) {
		if (!required)
			return 0;
		return err_set(err, EINVAL, "%s: missing tensor '%s'", m->path,
			       name);
	}
	info = &m->gguf->tensors[i];
	for (d = 0; d < IO_GGUF_MAX_DIMS; d++) {
		int64_t want = d < n ? ne[d] : 1;

		if (info->ne[d] != want)
			return err_set(
				err, EINVAL,
				"%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld]",
				m->path, name, (long long)info->ne[0],
				(long long)info->ne[1], (long long)info->ne[2],
				(long long)info->ne[3], (long long)ne[0],
				(long long)(n > 1 ? ne[1] : 1),
				(long long)(n > 2 ? ne[2] : 1));
	}
	ti = io_type_info(info->type);
	if (kind == MT_NORM && info->type != IO_TYPE_F32)
		return err_set(err, ENOTSUP,
			       "%s: tensor '%s' has type %s, expected f32",
			       m->path, name, ti ? ti->name : "?");
	if (kind == MT_MATMUL) {
		uint32_t vdt;
		const struct io_type_info *vi;

		if (!quant_type_supported(info->type))
			return err_set(
				err, ENOTSUP,
				"%s: tensor '%s' has type %s, which the engine does not compute with",
				m->path, name, ti ? ti->name : "?");
		vdt = quant_vec_dot_type(info->type);
		vi = io_type_info(vdt);
		if (!vi || ne[0] % ti->block_elems || ne[0] % vi->block_elems)
			return err_set(
				err, EINVAL,
				"%s: tensor '%s': row of %lld is not a whole number of %s blocks",
				m->path, name, (long long)ne[0], ti->name);
	}
	if (io_type_row_bytes(info->type, info->ne[0], &t->row_bytes))
		return err_set(err, EINVAL, "%s: tensor '%s': bad row size",
			       m->path, name);
	t->info = info;
	/*
	 * the types the reference's x86 CPU_REPACK interleaves (repack.cpp):
	 * those with a repacked gemv order in the type table
	 */
	t->llama_repacked = kind == MT_MATMUL && info->ne[1] % 8 == 0 &&
			    quant_traits(info->type)->vec_dot_repacked != NULL;
	return 0;
}

static int model_bind_layer(struct engine_model *m, uint32_t il,
			    struct err *err)
{
	const struct engine_hparams *hp = &m->hp;
	struct engine_layer *l = &m->layers[il];
	const int64_t E = hp->n_embd, F = hp->n_ff, X = hp->n_expert;
	const int64_t nq = (int64_t)hp->n_head * hp->head_dim;
	const int64_t nk = (int64_t)hp->n_head_kv * hp->head_dim;
	const int64_t nv = (int64_t)hp->n_head_kv * hp->head_dim_v;
	const int64_t nov = (int64_t)hp->n_head * hp->head_dim_v;
	const bool moe = hp->n_expert > 0;
	char name[96];
	int ret = 0;

#define BIND(field, suffix, kind, req, n, ...) \
	do { \
		const int64_t ne_[] = { __VA_ARGS__ }; \
		snprintf(name, sizeof(name), "blk.%u.%s", il, suffix); \
		ret = model_bind(m, &l->field, name, kind, req, n, ne_, err); \
		if (ret) \
			return ret; \
	} while (0)

	BIND(attn_norm, "attn_norm.weight", MT_NORM, true, 1, E);
	BIND(wq, "attn_q.weight", MT_MATMUL, true, 2, E, nq);
	BIND(wk, "attn_k.weight", MT_MATMUL, true, 2, E, nk);
	BIND(wv, "attn_v.weight", MT_MATMUL, true, 2, E, nv);
	BIND(wo, "attn_output.weight", MT_MATMUL, true, 2, nov, E);
	BIND(bq, "attn_q.bias", MT_NORM, false, 1, nq);
	BIND(bk, "attn_k.bias", MT_NORM, false, 1, nk);
	BIND(bv, "attn_v.bias", MT_NORM, false, 1, nv);
	BIND(bo, "attn_output.bias", MT_NORM, false, 1, E);
	BIND(q_norm, "attn_q_norm.weight", MT_NORM, hp->qk_norm, 1,
	     (int64_t)hp->head_dim);
	BIND(k_norm, "attn_k_norm.weight", MT_NORM, hp->qk_norm, 1,
	     (int64_t)hp->head_dim);
	BIND(ffn_norm, "ffn_norm.weight", MT_NORM, true, 1, E);
	if (!moe) {
		BIND(ffn_gate, "ffn_gate.weight", MT_MATMUL, true, 2, E, F);
		BIND(ffn_up, "ffn_up.weight", MT_MATMUL, true, 2, E, F);
		BIND(ffn_down, "ffn_down.weight", MT_MATMUL, true, 2, F, E);
	} else {
		BIND(ffn_gate_inp, "ffn_gate_inp.weight", MT_MATMUL, true, 2, E,
		     X);
		BIND(ffn_gate_exps, "ffn_gate_exps.weight", MT_MATMUL, true, 3,
		     E, F, X);
		BIND(ffn_up_exps, "ffn_up_exps.weight", MT_MATMUL, true, 3, E,
		     F, X);
		BIND(ffn_down_exps, "ffn_down_exps.weight", MT_MATMUL, true, 3,
		     F, E, X);
	}
#undef BIND
	/* these archs' graphs read q/k norms only when qk_norm; biases: all */
	if (!hp->qk_norm) {
		memset(&l->q_norm, 0, sizeof(l->q_norm));
		memset(&l->k_norm, 0, sizeof(l->k_norm));
	}
	return 0;
}

static int model_bind_tensors(struct engine_model *m, struct err *err)
{
	const struct engine_hparams *hp = &m->hp;
	const int64_t ne_embd[] = { hp->n_embd, hp->n_vocab };
	const int64_t ne_norm[] = { hp->n_embd };
	const int64_t ne_freqs[] = { hp->n_rot / 2 };
	const struct io_gguf_tensor *te;
	uint32_t il;
	int ret;

	/* n_vocab from the embedding when the metadata had no token list */
	te = io_gguf_find_tensor(m->gguf, "token_embd.weight");
	if (!te)
		return err_set(err, EINVAL,
			       "%s: missing tensor 'token_embd.weight'",
			       m->path);
	if (m->hp.n_vocab == 0 && te->ne[1] > 0 && te->ne[1] <= INT32_MAX)
		m->hp.n_vocab = (uint32_t)te->ne[1];
	{
		const int64_t ne_e[] = { hp->n_embd, m->hp.n_vocab };

		if ((ret = model_bind(m, &m->tok_embd, "token_embd.weight",
				      MT_MATMUL, true, 2, ne_e, err)))
			return ret;
		/* used by get_rows first, so llama.cpp never repacks it */
		m->tok_embd.llama_repacked = false;
	}
	if ((ret = model_bind(m, &m->output_norm, "output_norm.weight", MT_NORM,
			      true, 1, ne_norm, err)) ||
	    (ret = model_bind(m, &m->output, "output.weight", MT_MATMUL, false,
			      2, ne_embd, err)) ||
	    (ret = model_bind(m, &m->rope_freqs, "rope_freqs.weight", MT_NORM,
			      false, 1, ne_freqs, err)))
		return ret;
	/* tied output: llama.cpp reuses token_embd (TENSOR_DUPLICATED) */
	if (!engine_tensor_present(&m->output))
		m->output = m->tok_embd;

	m->layers = calloc(hp->n_layer, sizeof(*m->layers));
	if (!m->layers)
		return err_set(err, ENOMEM, "out of memory");
	for (il = 0; il < hp->n_layer; il++)
		if ((ret = model_bind_layer(m, il, err)))
			return ret;
	return 0;
}

static void model_place(void *arg, struct engine_tensor *t)
{
	struct engine_model *m = arg;

	if (t->info)
		t->place = io_weights_placement(
			m->weights, (uint64_t)(t->info - m->gguf->tensors));
}

/* struct engine_layer is nothing but tensor views, walked as an array. */
_Static_assert(sizeof(struct engine_layer) % sizeof(struct engine_tensor) == 0,
	       "struct engine_layer holds only struct engine_tensor");

long engine_tensor_layer(const char *name)
{
	char *end;
	long l;

	if (strncmp(name, "blk.", 4) != 0 || name[4] < '0' || name[4] > '9')
		return -1;
	l = strtol(name + 4, &end, 10);
	return *end == '.' ? l : -1;
}

void engine_model_each_view(struct engine_model *m,
			    void (*fn)(void *arg, struct engine_tensor *t),
			    void *arg)
{
	const size_t per_layer = sizeof(struct engine_layer) /
				 sizeof(struct engine_tensor);
	uint32_t il;
	size_t i;

	fn(arg, &m->tok_embd);
	fn(arg, &m->output_norm);
	fn(arg, &m->output);
	fn(arg, &m->rope_freqs);
	for (il = 0; il < m->hp.n_layer; il++) {
		struct engine_tensor *t =
			(struct engine_tensor *)&m->layers[il];

		for (i = 0; i < per_layer; i++)
			fn(arg, &t[i]);
	}
}

/* ---- info -------------------------------------------------------------- */

static void model_fill_info(struct engine_model *m, uint32_t n_ctx)
{
	const struct engine_hparams *hp = &m->hp;
	struct engine_model_info *in = &m->info;
	uint64_t i, j, n;

	in->path = m->path;
	in->name = m->name;
	in->n_vocab = hp->n_vocab;
	in->n_embd = hp->n_embd;
	in->n_layer = hp->n_layer;
	in->n_head = hp->n_head;
	in->n_head_kv = hp->n_head_kv;
	in->head_dim = hp->head_dim;
	in->head_dim_v = hp->head_dim_v;
	in->n_ff = hp->n_ff;
	in->n_expert = hp->n_expert;
	in->n_expert_used = hp->n_expert_used;
	in->n_ctx_train = hp->n_ctx_train;
	in->rope_freq_base = hp->rope_freq_base;
	in->rms_norm_eps = hp->rms_norm_eps;
	in->n_ctx_given = n_ctx != 0;
	if (n_ctx == 0)
		n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
	in->n_ctx = n_ctx;

	in->n_params = 0;
	for (i = 0; i < m->gguf->n_tensors; i++) {
		for (n = 1, j = 0; j < IO_GGUF_MAX_DIMS; j++)
			n *= (uint64_t)m->gguf->tensors[i].ne[j];
		in->n_params += n;
	}
	in->tensor_bytes = m->gguf->tensor_bytes;

	in->chat_template = io_gguf_get_str(m->gguf, "tokenizer.chat_template");
}

/* ---- open / free ------------------------------------------------------- */

static char *model_stem(const char *path)
{
	const char *base = strrchr(path, '/');
	const char *dot;
	size_t len;
	char *s;

	base = base ? base + 1 : path;
	dot = strrchr(base, '.');
	len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
	s = malloc(len + 1);
	if (s) {
		memcpy(s, base, len);
		s[len] = '\0';
	}
	return s;
}

static int model_find_arch(struct engine_model *m, struct err *err)
{
	const char *arch = io_gguf_get_str(m->gguf, "general.architecture");
	size_t i;

	if (!arch)
		return err_set(err, EINVAL,
			       "%s: missing key 'general.architecture'",
			       m->path);
	for (i = 0; i < sizeof(model_archs) / sizeof(model_archs[0]); i++) {
		if (!strcmp(arch, model_archs[i].name)) {
			m->info.arch = model_archs[i].arch;
			m->info.arch_name = model_archs[i].name;
			return 0;
		}
	}
	return err_set(
		err, ENOTSUP,
		"unsupported architecture '%.64s' (supported: llama, qwen2, qwen3, qwen3moe)",
		arch);
}

void engine_tensor_read(struct engine_model *m, uint64_t i, uint64_t off,
			size_t size, void *buf)
{
	const struct io_placement *p = io_weights_placement(m->weights, i);

	if (!engine_backend_device_is_host(p->device))
		engine_backend_weights_copy(
			p->device, buf, (const uint8_t *)p->data + off, size);
	else if (p->layout)
		engine_backend_packed_read(p->layout, &m->gguf->tensors[i],
					   p->data, off, size, buf);
	else
		memcpy(buf, (const uint8_t *)p->data + off, size);
}

/*
 * Packed now, or, loading in the background, as each tensor arrives
 * (model_pack.c).
 */
static int model_pack(struct engine_model *m, struct err *err)
{
	if (m->no_pack)
		return 0;
	if (!m->load_async)
		return engine_model_pack_all(m, m->pack_threads, err);
	return engine_model_packer_start(m, err);
}

int engine_model_load(struct engine_model *m, struct err *err)
{
	int ret;

	/* started by a move that needed the bytes (weights_move.c) */
	if (io_weights_started(m->weights))
		return 0;
	ret = io_weights_start(m->weights, engine_backend_stage_sink, NULL,
			       err);
	return ret ? ret : model_pack(m, err);
}

int engine_model_open(struct engine_model **out, const char *path,
		      const struct engine_model_options *opt, struct err *err)
{
	static const struct engine_model_options defaults;
	struct engine_model *m;
	const char *gname;
	int ret;

	*out = NULL;
	if (!opt)
		opt = &defaults;
	m = calloc(1, sizeof(*m));
	if (!m)
		return err_set(err, ENOMEM, "out of memory");
	pthread_mutex_init(&m->pack_lock, NULL);
	m->path = strdup(path);
	if (!m->path) {
		ret = err_set(err, ENOMEM, "out of memory");
		goto out_free;
	}
	ret = io_gguf_open(&m->gguf, path, err);
	if (ret)
		goto out_free;
	if ((ret = model_find_arch(m, err)) ||
	    (ret = model_read_hparams(m, err)))
		goto out_free;
	gname = io_gguf_get_str(m->gguf, "general.name");
	m->name = gname && *gname ? strdup(gname) : model_stem(path);
	if (!m->name) {
		ret = err_set(err, ENOMEM, "out of memory");
		goto out_free;
	}
	/*
	 * Shapes and the vocabulary are checked before a byte of the weights
	 * is read, so that a bad file fails fast; the views get their
	 * placement records after the load.
	 */
	if ((ret = model_bind_tensors(m, err)) ||
	    (ret = engine_vocab_load(&m->vocab, m->gguf, err)))
		goto out_free;
	if (m->hp.n_vocab != engine_vocab_size(m->vocab)) {
		ret = err_set(
			err, EINVAL,
			"%s: vocabulary has %u tokens, token_embd.weight %u",
			path, engine_vocab_size(m->vocab), m->hp.n_vocab);
		goto out_free;
	}
	ret = io_weights_load(&m->weights, m->gguf, &opt->load, err);
	if (ret)
		goto out_free;
	engine_model_each_view(m, model_place, m);
	model_fill_info(m, opt->n_ctx);
	/* the vocabulary knows llama.cpp's defaults for the special ids */
	m->info.bos = engine_vocab_bos(m->vocab);
	m->info.eos = engine_vocab_eos(m->vocab);
	m->info.eot = engine_vocab_eot(m->vocab);
	m->info.add_bos = engine_vocab_add_bos(m->vocab);
	m->info.tokenizer_model = engine_vocab_model_name(m->vocab);
	m->info.tokenizer_pre = engine_vocab_pre_name(m->vocab);
	m->pack_threads = opt->threads;
	m->no_pack = opt->no_pack;
	m->load_async = opt->load.async;
	if (!opt->load.defer && (ret = model_pack(m, err)))
		goto out_free;
	*out = m;
	return 0;

out_free:
	engine_model_free(m);
	return ret;
}

void engine_model_free(struct engine_model *m)
{
	if (!m)
		return;
	engine_model_packer_free(m);
	engine_vocab_free(m->vocab);
	free(m->layers);
	engine_weights_release(m);
	io_weights_free(m->weights);
	io_gguf_close(m->gguf);
	free(m->name);
	free(m->path);
	pthread_mutex_destroy(&m->pack_lock);
	free(m);
}

const struct engine_model_info *engine_model_info(const struct engine_model *m)
{
	return &m->info;
}

const struct io_gguf *engine_model_gguf(const struct engine_model *m)
{
	return m->gguf;
}

struct io_weights *engine_model_weights(struct engine_model *m)
{
	return m->weights;
}

const struct engine_vocab *engine_model_vocab(const struct engine_model *m)
{
	return m->vocab;
}

/* ---- tokenizer, delegated to engine/tokenizer*.c ----------------------- */

int engine_tokenize(const struct engine_model *m, const char *text, size_t len,
		    bool add_special, bool parse_special, int32_t **tokens,
		    size_t *n_tokens, struct err *err)
{
	return engine_vocab_tokenize(m->vocab, text, len, add_special,
				     parse_special, tokens, n_tokens, err);
}

bool engine_token_is_eog(const struct engine_model *m, int32_t token)
{
	return engine_vocab_is_eog(m->vocab, token);
}
