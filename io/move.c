/* SPDX-License-Identifier: MIT */
/*
 * Re-placing tensors while the model stays loaded: the `placement` file's
 * writes end here. Tensors leave the big per-file regions of the load for
 * one new region per move; a region is freed when its last resident tensor
 * has left (io_weights_region_put).
 *
 * Devices are "cpu" (no binding: the kernel's first touch) and "numaN"
 * (bound to node N with mbind). "gpuN" exists only in CUDA builds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights_internal.h"

/* Tensors inside a moved region start on 64-byte boundaries (SIMD loads). */
#define MOVE_ALIGN 64

size_t io_devices_list(char *buf, size_t cap)
{
	struct io_numa_topology topo;
	size_t len = 0;
	uint32_t k;
	int n;

	if (cap == 0)
		return 0;
	buf[0] = '\0';
	n = snprintf(buf, cap, "cpu");
	len = n > 0 && (size_t)n < cap ? (size_t)n : 0;
	if (io_numa_topology_read(&topo, NULL) < 0)
		return len;
	for (k = 0; k < topo.n_nodes; k++) {
		n = snprintf(buf + len, cap - len, " numa%d", topo.nodes[k].id);
		if (n < 0 || (size_t)n >= cap - len)
			break;
		len += (size_t)n;
	}
	return len;
}

/* "cpu" -> -1, "numaN" -> N if the node exists, else -EINVAL with message. */
static int move_device_node(const char *device, uint64_t *free_bytes,
			    struct err *err)
{
	struct io_numa_topology topo;
	char list[256], *end;
	uint32_t k;
	long id;
	int rc;

	rc = io_numa_topology_read(&topo, err);
	if (rc < 0)
		return rc;
	if (strcmp(device, "cpu") == 0) {
		*free_bytes = 0;
		for (k = 0; k < topo.n_nodes; k++)
			*free_bytes += topo.nodes[k].free_bytes;
		return -1;
	}
	if (strncmp(device, "numa", 4) == 0 && device[4] >= '0' && device[4] <= '9') {
		id = strtol(device + 4, &end, 10);
		for (k = 0; k < topo.n_nodes && *end == '\0'; k++) {
			if (topo.nodes[k].id == id) {
				*free_bytes = topo.nodes[k].free_bytes;
				return (int)id;
			}
		}
	}
	io_devices_list(list, sizeof(list));
	return err_set(err, EINVAL, "no such device %.32s (devices: %s)", device,
		       list);
}

int io_device_free(const char *device, uint64_t *bytes, struct err *err)
{
	int node = move_device_node(device, bytes, err);

	return node < -1 ? node : 0;
}

int io_weights_move_many(struct io_weights *w, const uint64_t *idx, uint64_t n,
			 const char *device, struct err *err)
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
	node = move_device_node(device, &room, err);
	if (node < -1)
		return node;
	if (w->n_copies > 1)
		return err_set(err, EINVAL,
			       "the weights are replicated on every NUMA node (--numa=replicate): nothing to move");
	snprintf(name, sizeof(name), "%s", device);
	for (k = 0; k < n; k++) {
		if (idx[k] >= w->g->n_tensors)
			return err_set(err, EINVAL, "no tensor %llu",
				       (unsigned long long)idx[k]);
		if (strcmp(w->pl[idx[k]].device, name) != 0)
			need += (w->pl[idx[k]].bytes + MOVE_ALIGN - 1) &
				~(uint64_t)(MOVE_ALIGN - 1);
	}
	if (need == 0)
		return 0;
	if (need > room)
		return err_set(err, ENOSPC,
			       "no room on %s: %llu MiB needed, %llu MiB free",
			       name, (unsigned long long)((need + (1 << 20) - 1) >> 20),
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

		if (strcmp(p->device, name) == 0)
			continue;
		memcpy(dst, p->data, p->bytes);
		p->data = dst;
		snprintf(p->device, sizeof(p->device), "%s", name);
		r->refs++;
		io_weights_region_put(w, w->region_of[idx[k]]);
		w->region_of[idx[k]] = ri;
		off += (p->bytes + MOVE_ALIGN - 1) & ~(uint64_t)(MOVE_ALIGN - 1);
	}
	io_mem_huge(&r->mem);
	io_mem_cuda_pin(&r->mem, NULL, NULL);
	if (w->locked)
		io_mem_lock(&r->mem, NULL, NULL);
	return 0;
}

int io_weights_move(struct io_weights *w, uint64_t i, const char *device,
		    struct err *err)
{
	return io_weights_move_many(w, &i, 1, device, err);
}
