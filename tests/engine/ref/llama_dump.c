// SPDX-License-Identifier: MIT
/*
 * Print llama.cpp's intermediate tensors, token by token, from the
 * reference build itself: the tool that found every difference between
 * engine/forward.c and llama.cpp (Documentation/engine.md, "How this was
 * checked"). It evaluates the given token ids one at a time, as the golden
 * data does (n_ubatch 1, F16 cache, flash attention as llama.cpp resolves
 * it, one thread), and prints each F32 node through the cb_eval callback:
 *
 *   S<step> <name> [ne0,ne1,ne2] v0 v1 ... (DUMPN values, default 6)
 *
 * Not built by make: it links the reference's libllama (make ref).
 *
 *   R=ref/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
 *   cc -O1 -Iref/llama.cpp/include -Iref/llama.cpp/ggml/include \
 *      tests/engine/ref/llama_dump.c -o /tmp/llama_dump \
 *      $R/libllama.v0.5.0.so $R/libggml.v0.5.0.so $R/libggml-base.so \
 *      -Wl,-rpath,$PWD/$R
 *   WANT=attn_norm DUMPN=64 /tmp/llama_dump $R model.gguf 1 403 407
 *
 * (the llama.cpp headers: git clone ref/node_modules/node-llama-cpp/llama/
 * gitRelease.bundle ref/llama.cpp, as ../shared/README.md, section 6)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

static int dump_step;
static const char *dump_want;
static long dump_n = 6;

static bool dump_cb(struct ggml_tensor *t, bool ask, void *user)
{
	const float *d = t->data;
	long n, i;

	(void)user;
	if (ask)
		return true;
	if (t->type != GGML_TYPE_F32 ||
	    (dump_want && !strstr(t->name, dump_want)))
		return true;
	n = (long)ggml_nelements(t);
	printf("S%d %-24s [%ld,%ld,%ld]", dump_step, t->name, (long)t->ne[0],
	       (long)t->ne[1], (long)t->ne[2]);
	for (i = 0; i < n && i < dump_n; i++)
		printf(" %.9g", d[i]);
	printf("\n");
	return true;
}

int main(int argc, char **argv)
{
	struct llama_model_params mp = llama_model_default_params();
	struct llama_context_params cp = llama_context_default_params();
	struct llama_context *ctx;
	struct llama_model *model;
	int i;

	if (argc < 4) {
		fprintf(stderr, "usage: %s LIBDIR MODEL.gguf TOKEN...\n",
			argv[0]);
		return 2;
	}
	dump_want = getenv("WANT");
	if (getenv("DUMPN"))
		dump_n = atol(getenv("DUMPN"));
	ggml_backend_load_all_from_path(argv[1]);
	llama_backend_init();
	mp.n_gpu_layers = 0;
	model = llama_model_load_from_file(argv[2], mp);
	if (!model)
		return 1;
	cp.n_ctx = 1024;
	cp.n_batch = 1;
	cp.n_ubatch = 1;
	cp.n_threads = 1;
	cp.n_threads_batch = 1;
	cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
	cp.cb_eval = dump_cb;
	ctx = llama_init_from_model(model, cp);
	if (!ctx)
		return 1;
	for (i = 3; i < argc; i++) {
		llama_token t = atoi(argv[i]);
		const float *lg;

		dump_step = i - 3;
		if (llama_decode(ctx, llama_batch_get_one(&t, 1))) {
			fprintf(stderr, "decode failed at token %d\n", t);
			return 1;
		}
		lg = llama_get_logits_ith(ctx, -1);
		printf("S%d logits %.9g %.9g %.9g\n", dump_step, lg[0], lg[1],
		       lg[2]);
	}
	llama_free(ctx);
	llama_model_free(model);
	llama_backend_free();
	return 0;
}
