// SPDX-License-Identifier: MIT
/*
 * Packing a model's matrices into its backend's own layout (the CPU's
 * packed panels: the CPU backend's gemm_layout), in place, once per open.
 *
 * A plain load is packed after it, each matrix split over a pool of the
 * open's threads (engine_model_pack_all). An asynchronous load is packed
 * as it arrives: a packer thread follows the loader through the file in
 * its order, packing each matrix as soon as its bytes are in, while the
 * loader reads the next ones and the first forward pass computes behind
 * both. Packing after the load added its whole time to an open; here it
 * takes a core the loader (one thread, copying from the page cache or
 * waiting for the disk) leaves free. A pass that reaches a matrix the
 * packer has not packed yet packs it itself (forward.c), so neither waits
 * for the other's order. One matrix is packed at a time (pack_lock), and
 * a pass uses a matrix only after taking the lock once, so it never sees
 * half a pack.
 *
 *   build/bin/llmfs-run -m model.gguf -n 1 -p hello           # packer
 *   build/bin/llmfs-run -m model.gguf -n 1 -p hello --no-pack
 */
#include <errno.h>
#include <stdlib.h>

#include "backend.h"
#include "model.h"

/* The packer of an asynchronous load (engine_model.packer). */
struct model_packer {
	pthread_t thread;
	bool started;		      /* and not joined */
	_Atomic bool stop;	      /* set by engine_model_packer_stop */
	struct engine_backend *be;    /* one thread: the loader and a pass */
	struct engine_tensor **views; /* [n], in the file's order */
	size_t n;
	/*
	 * [gguf tensor] 1 once packed or found unpackable, set (release)
	 * under pack_lock: a pass reads it without the lock, so that it
	 * does not wait for the packer's work on a later matrix
	 */
	uint8_t *done;
};

/*
 * The backend's own layout of a matrix: a view it cannot pack, or memory
 * for the copy that is missing, leaves its matrix as the file has it,
 * which every kernel reads too. tok_embd and a tied output share one
 * placement: the first view packs it, the second finds it packed.
 */
static void pack_view(void *arg, struct engine_tensor *t)
{
	if (t->info)
		engine_backend_pack(arg, t);
}

int engine_model_pack_all(struct engine_model *m, uint32_t threads,
			  struct err *err)
{
	struct engine_backend *be;
	int ret;

	ret = engine_backend_new(&be, io_weights_home(m->weights), threads,
				 err);
	if (ret)
		return ret;
	engine_model_each_view(m, pack_view, be);
	engine_backend_free(be);
	return 0;
}

static void pack_collect(void *arg, struct engine_tensor *t)
{
	struct model_packer *pk = arg;

	if (t->info && pk->views)
		pk->views[pk->n++] = t;
	else if (t->info)
		pk->n++;
}

/* The order the loader makes tensors ready in: the files', by offset. */
static int pack_file_order(const void *a, const void *b)
{
	const struct io_gguf_tensor *x =
		(*(struct engine_tensor *const *)a)->info;
	const struct io_gguf_tensor *y =
		(*(struct engine_tensor *const *)b)->info;

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return 0;
}

void engine_model_pack_one(struct engine_model *m, struct engine_backend *be,
			   const struct engine_tensor *t)
{
	uint8_t *done = &m->packer->done[t->info - m->gguf->tensors];

	if (__atomic_load_n(done, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&m->pack_lock);
	if (!*done) {
		engine_backend_pack(be, t);
		__atomic_store_n(done, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&m->pack_lock);
}

/*
 * Each matrix once it has arrived, in the file's order; a failed load
 * ends the walk (the pass that waits for the tensor reports it).
 */
static void *pack_main(void *arg)
{
	struct engine_model *m = arg;
	struct model_packer *pk = m->packer;
	size_t i;

	for (i = 0; i < pk->n && !pk->stop; i++) {
		if (io_placement_wait(pk->views[i]->place))
			break;
		engine_model_pack_one(m, pk->be, pk->views[i]);
	}
	return NULL;
}

int engine_model_packer_start(struct engine_model *m, struct err *err)
{
	struct model_packer *pk = calloc(1, sizeof(*pk));
	int ret;

	if (!pk)
		return err_set(err, ENOMEM, "out of memory");
	engine_model_each_view(m, pack_collect, pk);
	pk->views = malloc((pk->n ? pk->n : 1) * sizeof(*pk->views));
	pk->done = calloc(m->gguf->n_tensors ? m->gguf->n_tensors : 1, 1);
	if (!pk->views || !pk->done) {
		ret = err_set(err, ENOMEM, "out of memory");
		goto out_free;
	}
	pk->n = 0;
	engine_model_each_view(m, pack_collect, pk);
	qsort(pk->views, pk->n, sizeof(*pk->views), pack_file_order);
	ret = engine_backend_new(&pk->be, io_weights_home(m->weights), 1, err);
	if (ret)
		goto out_free;
	m->packer = pk;
	ret = -pthread_create(&pk->thread, NULL, pack_main, m);
	if (ret)
		/* engine_model_packer_free frees it with the model */
		return err_set(err, -ret, "cannot start the packing thread");
	pk->started = true;
	return 0;

out_free:
	free(pk->done);
	free(pk->views);
	free(pk);
	return ret;
}

void engine_model_packer_join(struct engine_model *m)
{
	struct model_packer *pk = m->packer;

	if (pk && pk->started) {
		pthread_join(pk->thread, NULL);
		pk->started = false;
	}
}

void engine_model_packer_free(struct engine_model *m)
{
	struct model_packer *pk = m->packer;

	if (!pk)
		return;
	/* a wait in progress ends with the load at the latest */
	pk->stop = true;
	engine_model_packer_join(m);
	engine_backend_free(pk->be);
	free(pk->done);
	free(pk->views);
	free(pk);
	m->packer = NULL;
}
