// SPDX-License-Identifier: MIT
/*
 * The embed files: write text, read its embedding.
 *
 *   $ echo 'The quick brown fox' > /mnt/llm/qwen/embed; cat /mnt/llm/qwen/embed
 *   -0.985773981
 *   0.391478062
 *   ...
 *
 * An embed stream is a generation in the engine's embed mode
 * (engine_generate_options.embed): the scheduler batches its prompt with
 * everyone else's, in chunks like any prompt, and when the pass over it is
 * done the generation ends with the vector, which this file writes as the
 * answer: `embed` one float per line (9 significant digits, so that the
 * float32 reads back the same), `embed.f32` its n_embd little-endian
 * float32 bytes for programs.
 */
#include <stdio.h>
#include <string.h>

#include "local.h"

void fs_embed_output(struct fs_model *fm, struct fs_stream *s)
{
	struct engine_generation *gen = fs_local_stream(s)->gen;
	const float *v;
	struct fs_buf b = { 0 };
	size_t n = 0;
	int rc = 0;

	if (!fs_gen_is_embed(s->kind) || !gen)
		return;
	v = engine_generation_embedding(gen, &n);
	if (!v)
		return;
	for (size_t i = 0; i < n && !rc; i++) {
		if (s->kind == FS_GEN_EMBED) {
			rc = fs_buf_printf(&b, "%.9g\n", (double)v[i]);
		} else {
			uint32_t bits;
			unsigned char le[4];

			memcpy(&bits, &v[i], sizeof(bits));
			for (int k = 0; k < 4; k++)
				le[k] = (unsigned char)(bits >> (8 * k));
			rc = fs_buf_add(&b, le, sizeof(le));
		}
	}
	if (rc) {
		fs_errors_add(&fm->errors, "embed: out of memory");
		fs_stream_cancel(s);
	} else {
		fs_stream_append(s, b.p, b.len);
	}
	fs_buf_free(&b);
}
