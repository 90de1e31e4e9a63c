// SPDX-License-Identifier: MIT
/*
 * The CUDA backend's lists and runs (backend_internal.h): where the host
 * memory an op of the table takes (tokens, positions, K/V slots, block
 * tables) is built and how it reaches VRAM without the host waiting for
 * the device; how an op's rows are cut into runs the module's calls
 * take; and how a failed call is kept for synchronize.
 */
#include "backend_internal.h"

/* ---- errors ------------------------------------------------------------ */

void cb_check(struct engine_backend *be, int ret, const struct err *e)
{
	struct cuda_backend *cb = be->ctx;

	if (!ret || cb->err.code)
		return;
	cb->err = *e;
	cb->err.code = -ret;
}

/* ---- the ring and the parameter area ------------------------------------- */

int cb_ring_grow(struct engine_backend *be, size_t seg)
{
	struct cuda_backend *cb = be->ctx;
	struct err err = { 0 };
	void *p = NULL;
	int ret;

	seg = (seg + CB_ALIGN - 1) & ~(size_t)(CB_ALIGN - 1);
	/* every copy out of the old ring done */
	if ((ret = cb->api->synchronize(cb->dev, &err))) {
		cb_check(be, ret, &err);
		return ret;
	}
	cb->api->host_free(cb->ring);
	cb->ring = NULL;
	cb->seg = 0;
	if ((ret = cb->api->host_alloc(&p, seg * CB_SLOTS, &err))) {
		cb_check(be, ret, &err);
		return ret;
	}
	cb->ring = p;
	cb->seg = seg;
	cb->cur = 0;
	cb->used = 0;
	return 0;
}

void *cb_stage(struct engine_backend *be, size_t bytes)
{
	struct cuda_backend *cb = be->ctx;
	struct err err = { 0 };
	int ret;

	bytes = (bytes + CB_ALIGN - 1) & ~(size_t)(CB_ALIGN - 1);
	if (bytes > cb->seg &&
	    cb_ring_grow(be, bytes > 2 * cb->seg ? bytes : 2 * cb->seg))
		return NULL;
	if (cb->used + bytes > cb->seg) {
		cb->cur = (cb->cur + 1) % CB_SLOTS;
		cb->used = 0;
		if ((ret = cb->api->slot_wait(cb->dev, cb->cur, &err))) {
			cb_check(be, ret, &err);
			return NULL;
		}
	}
	cb->used += bytes;
	return cb->ring + cb->cur * cb->seg + cb->used - bytes;
}

int cb_send(struct engine_backend *be, void *dst, const void *host,
	    size_t bytes)
{
	struct cuda_backend *cb = be->ctx;
	struct err err = { 0 };
	int ret;

	if (cb_graph_recording(be))
		return cb_graph_send(be, dst, host, bytes);
	ret = cb->api->copy_in_async(cb->dev, dst, host, bytes, cb->cur, &err);
	cb_check(be, ret, &err);
	return ret;
}

int cb_param(struct engine_backend *be, size_t bytes)
{
	struct cuda_backend *cb = be->ctx;
	struct err err = { 0 };
	void *p = NULL;
	int ret;

	if (bytes <= cb->param_cap)
		return 0;
	bytes = (bytes + 4095) & ~(size_t)4095;
	/* no queued op still reads the old area */
	if ((ret = cb->api->synchronize(cb->dev, &err))) {
		cb_check(be, ret, &err);
		return ret;
	}
	cb->api->free(cb->dev, cb->param);
	cb->param = NULL;
	cb->param_cap = 0;
	if ((ret = cb->api->alloc(cb->dev, &p, bytes, &err))) {
		cb_check(be, ret, &err);
		return ret;
	}
	cb->param = p;
	cb->param_cap = bytes;
	return 0;
}

void *cb_lists(struct engine_backend *be, size_t bytes, void **dev)
{
	struct cuda_backend *cb = be->ctx;

	if (cb->err.code)
		return NULL;
	cb->lists_no++;
	if (cb_graph_recording(be))
		return cb_graph_lists(be, bytes, dev);
	if (cb_param(be, bytes))
		return NULL;
	*dev = cb->param;
	return cb_stage(be, bytes);
}

/* ---- runs of rows ---------------------------------------------------------- */

uint32_t cb_row(const uint32_t *idx, uint32_t j)
{
	return idx ? idx[j] : j;
}

bool cb_runs_next(struct engine_backend *be, struct cb_runs *it)
{
	const struct cuda_backend *cb = be->ctx;
	uint32_t j = it->j + it->len, len = 1;

	if (j >= it->n || cb->err.code)
		return false;
	it->r = cb_row(it->idx, j);
	it->r2 = cb_row(it->idx2, j);
	while (j + len < it->n && cb_row(it->idx, j + len) == it->r + len &&
	       cb_row(it->idx2, j + len) == it->r2 + len &&
	       (!it->joins || it->joins(it->arg, j, j + len)))
		len++;
	it->j = j;
	it->len = len;
	return true;
}
