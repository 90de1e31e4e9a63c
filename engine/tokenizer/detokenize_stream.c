// SPDX-License-Identifier: MIT
/*
 * engine.h's streaming detokenizer on a model: the work is in
 * detokenize.c on the model's vocabulary. Kept apart so that the
 * vocabulary code links without engine/model.c.
 */
#include "../engine.h"
#include "tokenizer.h"

void engine_detokenizer_init(struct engine_detokenizer *d,
			     const struct engine_model *m)
{
	d->model = m;
	d->first = true;
	d->n_pending = 0;
}

size_t engine_detokenizer_push(struct engine_detokenizer *d, int32_t token,
			       char *out, size_t cap)
{
	return engine_vocab_detok_push(engine_model_vocab(d->model), d, token,
				       out, cap);
}

size_t engine_detokenizer_flush(struct engine_detokenizer *d, char *out,
				size_t cap)
{
	return engine_vocab_detok_flush(d, out, cap);
}

void engine_detokenizer_context(struct engine_detokenizer *d,
				const int32_t *tokens, size_t n)
{
	engine_vocab_detok_context(engine_model_vocab(d->model), d, tokens, n);
}

size_t engine_token_piece(const struct engine_model *m, int32_t token,
			  char *out, size_t cap)
{
	return engine_vocab_piece(engine_model_vocab(m), token, false, true,
				  out, cap);
}
