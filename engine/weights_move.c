// SPDX-License-Identifier: MIT
/*
 * Moving a model's tensors between devices (the `placement` file's
 * writes): between host devices (cpu, numaN) io/ copies the bytes; to a
 * device with memory of its own (ref0, a GPU) they are read in the file's
 * layout (a packed tensor unpacked) and copied into that device's memory,
 * which the model then owns until the tensor moves on or the model is
 * freed; back to the host, io/ takes them in again. All or nothing.
 *
 * A stage of the forward pass (the embedding, each layer, each MoE
 * layer's experts, the output) computes on one backend, reading its
 * tensors where that backend can: a move that would leave a stage's
 * tensors with two backends is refused (a layer moves as a whole: 'blk.N
 * ref0'; its three expert matrices too: 'experts cpu', which keeps them
 * in host RAM while the rest of the layer is on a GPU).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"

/*
 * The stages of tensor i into st[] (at most two: a tied token_embd is
 * the embedding's and the output's); how many. Stage il is layer il but
 * its experts (*_exps), n_layer the embedding, n_layer + 1 the output,
 * n_layer + 2 + il layer il's experts.
 */
static int move_stages_of(const struct engine_model *m, uint64_t i,
			  uint32_t st[2])
{
	const struct io_gguf_tensor *t = &m->gguf->tensors[i];
	const uint32_t L = m->hp.n_layer;
	long l = engine_tensor_layer(t->name);
	int n = 0;

	if (l >= 0 && (uint32_t)l < L)
		st[n++] = (uint32_t)l + (strstr(t->name, "_exps.") ? L + 2 : 0);
	else if (t == m->tok_embd.info) {
		st[n++] = L;
		if (m->output.info == m->tok_embd.info)
			st[n++] = L + 1;
	} else if (t == m->output.info || t == m->output_norm.info) {
		st[n++] = L + 1;
	}
	return n;
}

/* -EINVAL unless, with idx[] on device, every stage keeps one backend. */
static int move_check_stages(const struct engine_model *m, const uint64_t *idx,
			     uint64_t n, const char *device, struct err *err)
{
	const uint32_t L = m->hp.n_layer;
	const char **dev = calloc(2 * L + 2, sizeof(*dev));
	bool *moved = calloc(m->gguf->n_tensors, sizeof(*moved));
	uint32_t st[2];
	uint64_t i, k;
	int c, ret = 0;

	if (!dev || !moved) {
		ret = err_set(err, ENOMEM, "out of memory");
		goto out_free;
	}
	for (k = 0; k < n; k++)
		moved[idx[k]] = true;
	for (i = 0; i < m->gguf->n_tensors && !ret; i++) {
		const char *d =
			moved[i] ? device :
				   io_weights_placement(m->weights, i)->device;
		int ns = move_stages_of(m, i, st);

		for (c = 0; c < ns && !ret; c++) {
			if (!dev[st[c]])
				dev[st[c]] = d;
			else if (!engine_backend_same_kind(dev[st[c]], d))
				ret = err_set(
					err, EINVAL,
					"%s would be on %s, the rest of its %s on %s: a stage computes on one device (move 'blk.N', 'experts', 'output' or 'all')",
					m->gguf->tensors[i].name, d,
					st[c] < L     ? "layer" :
					st[c] < L + 2 ? "stage" :
							"experts",
					dev[st[c]]);
		}
	}
out_free:
	free(dev);
	free(moved);
	return ret;
}

/* -ENOSPC, nothing moved, when the tensors would pass device's cap. */
static int move_check_cap(struct engine_model *m, const uint64_t *idx,
			  uint64_t n, const char *device, struct err *err)
{
	uint64_t cap, used, need = 0, k;

	if (!engine_backend_device_cap(device, &cap, &used))
		return 0;
	for (k = 0; k < n; k++) {
		const struct io_placement *p = io_weights_placement(m->weights,
								    idx[k]);

		if (strcmp(p->device, device) != 0)
			need += p->bytes;
	}
	if (used + need <= cap)
		return 0;
	return err_set(
		err, ENOSPC,
		"no room on %s: %llu MiB more would pass its cap of %llu MiB (--devices %s:vram=), %llu MiB placed there",
		device, (unsigned long long)((need + (1 << 20) - 1) >> 20),
		(unsigned long long)(cap >> 20), device,
		(unsigned long long)(used >> 20));
}

/*
 * Into a device's own memory: the file's bytes, then the records. Before
 * a deferred load starts, only the memory: the load reads the file into
 * it (engine_model_load).
 */
static int move_to_device(struct engine_model *m, const uint64_t *idx,
			  uint64_t n, const char *device, struct err *err)
{
	const bool unread = !io_weights_started(m->weights);
	void **bufs = NULL;
	uint8_t *host = NULL;
	uint64_t k;
	int ret;

	if ((ret = move_check_cap(m, idx, n, device, err)))
		return ret;
	bufs = calloc(n + 1, sizeof(*bufs));
	if (!bufs)
		return err_set(err, ENOMEM, "out of memory");
	for (k = 0; k < n && !ret; k++) {
		struct io_placement *p = io_weights_placement(m->weights,
							      idx[k]);
		uint32_t st[2];
		uint8_t *tmp;

		/*
		 * A tensor of no stage (rope_freqs) is read by every stage's
		 * backend: it stays in the host's memory, which all reach
		 */
		if (!strcmp(p->device, device) ||
		    !move_stages_of(m, idx[k], st))
			continue;
		bufs[k] = engine_backend_weights_alloc(device, p->bytes);
		tmp = unread ? host : realloc(host, p->bytes ? p->bytes : 1);
		if (!bufs[k] || (!tmp && !unread)) {
			ret = err_set(err, ENOSPC,
				      "no room on %s for %s (%llu bytes)",
				      device, m->gguf->tensors[idx[k]].name,
				      (unsigned long long)p->bytes);
			if (tmp)
				host = tmp;
			break;
		}
		host = tmp;
		if (unread)
			continue;
		engine_tensor_read(m, idx[k], 0, p->bytes, host);
		engine_backend_weights_copy(device, bufs[k], host, p->bytes);
	}
	for (k = 0; k < n; k++) {
		struct io_placement *p = io_weights_placement(m->weights,
							      idx[k]);
		char old_dev[sizeof(p->device)];
		void *old = p->data;

		if (!bufs[k])
			continue;
		if (ret) {
			engine_backend_weights_free(device, bufs[k]);
			continue;
		}
		snprintf(old_dev, sizeof(old_dev), "%s", p->device);
		/* cannot fail: the weights are loaded and not replicated */
		io_weights_detach(m->weights, idx[k], bufs[k], device, NULL);
		engine_backend_weights_free(old_dev, old);
	}
	free(host);
	free(bufs);
	return ret;
}

/*
 * Into io/'s memory on a host device, from wherever they are (before a
 * deferred load starts, from nowhere: io/ reads them with the rest).
 */
static int move_to_host(struct engine_model *m, const uint64_t *idx, uint64_t n,
			const char *device, struct err *err)
{
	const bool unread = !io_weights_started(m->weights);
	const void **src = calloc(n + 1, sizeof(*src));
	void **old = calloc(n + 1, sizeof(*old));
	char(*old_dev)[16] = calloc(n + 1, sizeof(*old_dev));
	uint64_t k;
	int ret = 0;

	if (!src || !old || !old_dev) {
		ret = err_set(err, ENOMEM, "out of memory");
		goto out_free;
	}
	for (k = 0; k < n && !ret; k++) {
		struct io_placement *p = io_weights_placement(m->weights,
							      idx[k]);
		void *copy;

		if (engine_backend_device_is_host(p->device))
			continue;
		old[k] = p->data;
		snprintf(old_dev[k], sizeof(old_dev[k]), "%s", p->device);
		if (unread)
			continue;
		copy = malloc(p->bytes ? p->bytes : 1);
		if (!copy) {
			ret = err_set(err, ENOMEM, "out of memory");
			break;
		}
		engine_backend_weights_copy(p->device, copy, p->data, p->bytes);
		src[k] = copy;
	}
	if (!ret)
		ret = io_weights_attach_many(m->weights, idx, n, device, src,
					     err);
	for (k = 0; k < n; k++) {
		if (!ret && old[k])
			engine_backend_weights_free(old_dev[k], old[k]);
		free((void *)src[k]);
	}
out_free:
	free(src);
	free(old);
	free(old_dev);
	return ret;
}

int engine_weights_move(struct engine_model *m, const uint64_t *idx, uint64_t n,
			const char *device, struct err *err)
{
	int ret;

	/*
	 * Before a deferred load, a host device other than the load's own
	 * takes copies of what is read: the load starts now (the tensors
	 * placed on devices so far go there straight), then they move.
	 */
	if (!io_weights_started(m->weights) &&
	    engine_backend_device_is_host(device) &&
	    strcmp(device, io_weights_home(m->weights)) &&
	    (ret = engine_model_load(m, err)))
		return ret;
	if ((ret = io_weights_wait(m->weights, err)) < 0)
		return ret;
	/* no packing in place while the bytes move */
	engine_model_packer_join(m);
	/* a device no backend computes on: io/ says why (gpu0 simulated) */
	if (!engine_backend_device_known(device))
		return io_weights_move_many(m->weights, idx, n, device, err);
	if ((ret = move_check_stages(m, idx, n, device, err)))
		return ret;
	if (engine_backend_device_is_host(device))
		return move_to_host(m, idx, n, device, err);
	return move_to_device(m, idx, n, device, err);
}

void engine_weights_release(struct engine_model *m)
{
	uint64_t i;

	for (i = 0; m->weights && i < m->gguf->n_tensors; i++) {
		struct io_placement *p = io_weights_placement(m->weights, i);

		if (!engine_backend_device_is_host(p->device))
			engine_backend_weights_free(p->device, p->data);
	}
}
