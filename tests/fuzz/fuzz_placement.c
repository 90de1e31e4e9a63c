/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the placement commands (engine_placement_apply, as
 * a write to the placement file applies them: one command per line, '#'
 * comments, a NUL byte refused). The model is a tiny one written by
 * llmfs-write-model (FUZZ_MODEL, set by tests/fuzz/run), opened once. A
 * refusal must be one line; after any command every tensor must still be
 * readable where the weights say it is, and the placement text must
 * format. tests/fuzz/run builds and runs it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct engine_model *fuzz_m;

static struct engine_model *fuzz_model(void)
{
	struct engine_model_options opt = { .n_ctx = 64, .threads = 1 };
	const char *path = getenv("FUZZ_MODEL");
	struct err err = { 0 };

	if (fuzz_m)
		return fuzz_m;
	if (!path || engine_model_open(&fuzz_m, path, &opt, &err)) {
		fprintf(stderr, "fuzz_placement: FUZZ_MODEL %s: %s\n",
			path ? path : "(unset)", err.msg);
		abort();
	}
	return fuzz_m;
}

static void fuzz_check(struct engine_model *m)
{
	const struct io_gguf *g = engine_model_gguf(m);
	struct io_weights *w = engine_model_weights(m);
	volatile uint8_t sum = 0;
	char *text = NULL;
	size_t len = 0;
	struct err err = { 0 };

	for (uint64_t i = 0; i < g->n_tensors; i++) {
		struct io_placement *p = io_weights_placement(w, i);

		if (!p || !p->data || p->bytes != g->tensors[i].bytes)
			__builtin_trap();
		sum ^= ((const uint8_t *)p->data)[0];
		sum ^= ((const uint8_t *)p->data)[p->bytes - 1];
	}
	if (engine_placement_format(m, &text, &len, &err) || !len)
		__builtin_trap();
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct engine_model *m = fuzz_model();
	char *copy, *line, *save;
	struct err err = { 0 };
	int rc = 0;

	if (size > 4096 || memchr(data, '\0', size))
		return 0; /* refused before parsing (EINVAL) */
	copy = strndup((const char *)data, size);
	if (!copy)
		return 0;
	for (line = strtok_r(copy, "\n", &save); line && !rc;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!*line || *line == '#')
			continue;
		err.msg[0] = '\0';
		rc = engine_placement_apply(m, line, &err);
		if (rc && (rc != -EINVAL && rc != -ENOSPC && rc != -ENOMEM &&
			   rc != -ENODEV))
			__builtin_trap();
		if (rc && (!err.msg[0] || strchr(err.msg, '\n')))
			__builtin_trap();
	}
	free(copy);
	fuzz_check(m);
	return 0;
}
