/* SPDX-License-Identifier: MIT */
/*
 * Re-placing tensors while the model stays loaded: the `placement` file's
 * writes end here. Tensors leave the big per-file regions of the load for
 * one new region per move; a region is freed when its last resident tensor
 * has left (io_weights_region_put).
 *
 * Devices (io/device.c) are "cpu" (no binding: the kernel's first touch)
 * and "numaN" (bound to node N with mbind). A "gpuN" is refused with
 * ENODEV: there is no CUDA backend yet to compute on it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights_internal.h"

/* Tensors inside a moved region start on 64-byte boundaries (SIMD loads). */
#define MOVE_ALIGN 64

/*
 * The device a move goes to: its NUMA node (-1 for cpu) and the room it
 * has now. Host devices are read again (their free memory changes, and
 * tests change the topology); GPUs are those the weights were given.
 * -EINVAL for no such device, -ENODEV for one nothing can compute on.
 */
static int move_device(struct io_weights *w, const char *device, int *node,
		       uint64_t *room, struct err *err)
{
	struct io_device_set now;
	const struct io_device *d;
	uint32_t k;
	int rc;

	rc = io_device_set_read(&now, "", err);
	if (rc < 0)
		return rc;
	for (k = 0; k < w->devices.n && now.n < IO_DEVICE_MAX; k++)
		if (w->devices.dev[k].kind == IO_DEVICE_GPU)
			now.dev[now.n++] = w->devices.dev[k];
	rc = io_device_lookup(&now, device, &d, err);
	if (rc < 0)
		return rc;
	rc = io_device_usable(d, err);
	if (rc < 0)
		return rc;
	*node = d->kind == IO_DEVICE_NUMA ? d->index : -1;
	*room = d->free_bytes;
	return 0;
}

/*
 * Before a deferred load starts nothing is in memory: tensors detached
 * to another device come back to be read with the rest, into the
 * regions of the load's device (home), the only one they can go to then.
 */
static int move_unread(struct io_weights *w, const uint64_t *idx, uint64_t n,
		       const char *device, struct err *err)
{
	uint64_t k;

	if (strcmp(device, w->home))
		return err_set(
			err, EINVAL,
			"%s: before the load ends, tensors can go back to %s only",
			device, w->home);
	for (k = 0; k < n; k++)
		if (idx[k] >= w->g->n_tensors)
			return err_set(err, EINVAL, "no tensor %llu",
				       (unsigned long long)idx[k]);
	for (k = 0; k < n; k++) {
		struct io_placement *p = &w->pl[idx[k]];

		if (!w->staged[idx[k]])
			continue;
		w->staged[idx[k]] = false;
		p->data = NULL;
		snprintf(p->device, sizeof(p->device), "%s", w->home);
	}
	return 0;
}

/*
 * Move n tensors to device, each copied from src[k] (NULL: from where it
 * is): io_weights_move_many and io_weights_attach_many.
 */
static int move_many(struct io_weights *w, const uint64_t *idx, uint64_t n,
		     const char *device, const void *const *src,
		     struct err *err)
{
	uint64_t k, need = 0, room, off;
	struct io_region *r;
	uint32_t ri;
	int node, rc;
	char name[16];

	/* An async load must have ended: the bytes to copy must be there. */
	rc = io_weights_wait(w, err);
	if (rc < 0)
		return rc;
	rc = move_device(w, device, &node, &room, err);
	if (rc < 0)
		return rc;
	if (w->n_copies > 1)
		return err_set(
			err, EINVAL,
			"the weights are replicated on every NUMA node (--numa=replicate): nothing to move");
	snprintf(name, sizeof(name), "%s", device);
	if (!w->started)
		return move_unread(w, idx, n, name, err);
	for (k = 0; k < n; k++) {
		if (idx[k] >= w->g->n_tensors)
			return err_set(err, EINVAL, "no tensor %llu",
				       (unsigned long long)idx[k]);
		if (strcmp(w->pl[idx[k]].device, name) != 0 || (src && src[k]))
			need += (w->pl[idx[k]].bytes + MOVE_ALIGN - 1) &
				~(uint64_t)(MOVE_ALIGN - 1);
	}
	if (need == 0)
		return 0;
	if (need > room)
		return err_set(
			err, ENOSPC,
			"no room on %s: %llu MiB needed, %llu MiB free", name,
			(unsigned long long)((need + (1 << 20) - 1) >> 20),
			(unsigned long long)(room >> 20));
	rc = io_weights_region_add(w, &ri, err);
	if (rc < 0)
		return rc;
	r = &w->regions[ri];
	rc = io_mem_alloc(&r->mem, (size_t)need, node, err);
	if (rc < 0) {
		w->n_regions--;
		return rc;
	}
	off = 0;
	for (k = 0; k < n; k++) {
		struct io_placement *p = &w->pl[idx[k]];
		uint8_t *dst = (uint8_t *)r->mem.base + off;

		if (strcmp(p->device, name) == 0 && !(src && src[k]))
			continue;
		memcpy(dst, src && src[k] ? src[k] : p->data, p->bytes);
		p->data = dst;
		snprintf(p->device, sizeof(p->device), "%s", name);
		r->refs++;
		io_weights_region_put(w, w->region_of[idx[k]]);
		w->region_of[idx[k]] = ri;
		off += (p->bytes + MOVE_ALIGN - 1) &
		       ~(uint64_t)(MOVE_ALIGN - 1);
	}
	io_mem_huge(&r->mem);
	io_mem_cuda_pin(&r->mem, NULL, NULL);
	if (w->locked)
		io_mem_lock(&r->mem, NULL, NULL);
	return 0;
}

int io_weights_move_many(struct io_weights *w, const uint64_t *idx, uint64_t n,
			 const char *device, struct err *err)
{
	return move_many(w, idx, n, device, NULL, err);
}

int io_weights_attach_many(struct io_weights *w, const uint64_t *idx,
			   uint64_t n, const char *device,
			   const void *const *src, struct err *err)
{
	return move_many(w, idx, n, device, src, err);
}

int io_weights_move(struct io_weights *w, uint64_t i, const char *device,
		    struct err *err)
{
	return io_weights_move_many(w, &i, 1, device, err);
}

int io_weights_detach(struct io_weights *w, uint64_t i, void *data,
		      const char *device, struct err *err)
{
	struct io_placement *p;
	int rc;

	rc = io_weights_wait(w, err);
	if (rc < 0)
		return rc;
	if (i >= w->g->n_tensors)
		return err_set(err, EINVAL, "no tensor %llu",
			       (unsigned long long)i);
	if (w->n_copies > 1)
		return err_set(
			err, EINVAL,
			"the weights are replicated on every NUMA node (--numa=replicate): nothing to move");
	p = &w->pl[i];
	/* not read yet: io_weights_start reads the file's bytes into data */
	if (!w->started)
		w->staged[i] = true;
	io_weights_region_put(w, w->region_of[i]);
	w->region_of[i] = IO_REGION_NONE;
	p->data = data;
	p->layout = 0;
	snprintf(p->device, sizeof(p->device), "%s", device);
	return 0;
}
