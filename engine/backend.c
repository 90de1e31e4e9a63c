// SPDX-License-Identifier: MIT
/*
 * The registry of backends (backend.h): which backend computes on which
 * device, and whose layout a packed tensor is in. The host's devices
 * ("cpu" and each "numaN") are the CPU backend's; a device kind without a
 * backend in this build is refused by name.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/cpu_backend.h"

static const struct backend_kind {
	const char *prefix; /* "numa" matches numa0, numa1, ... */
	int (*create)(struct engine_backend **out, uint32_t threads,
		      struct err *err);
	/* the backend's own layout of weights, made at load; or NULL */
	int (*pack)(struct engine_backend *be, const struct engine_tensor *w);
	uint32_t layout; /* the io_placement.layout pack writes */
	void (*packed_read)(const struct io_gguf_tensor *t, const void *data,
			    uint64_t off, size_t size, void *buf);
} backend_kinds[] = {
	{ "cpu", cpu_backend_new, cpu_backend_pack, CPU_BACKEND_LAYOUT,
	  cpu_backend_packed_read },
	{ "numa", cpu_backend_new, cpu_backend_pack, CPU_BACKEND_LAYOUT,
	  cpu_backend_packed_read },
};

#define BACKEND_KINDS (sizeof(backend_kinds) / sizeof(backend_kinds[0]))

static const struct backend_kind *backend_kind_of(const char *device)
{
	size_t i;

	for (i = 0; i < BACKEND_KINDS; i++)
		if (!strncmp(device, backend_kinds[i].prefix,
			     strlen(backend_kinds[i].prefix)))
			return &backend_kinds[i];
	return NULL;
}

int engine_backend_new(struct engine_backend **out, const char *device,
		       uint32_t threads, struct err *err)
{
	const struct backend_kind *k = backend_kind_of(device);

	*out = NULL;
	if (!k)
		return err_set(err, ENODEV,
			       "no backend computes on device '%.32s'", device);
	return k->create(out, threads, err);
}

void engine_backend_free(struct engine_backend *be)
{
	if (be)
		be->iface->destroy(be);
}

int engine_backend_pack(struct engine_backend *be,
			const struct engine_tensor *w)
{
	const struct backend_kind *k = backend_kind_of(be->dev.name);

	return k && k->pack ? k->pack(be, w) : 0;
}

void engine_backend_packed_read(uint32_t layout, const struct io_gguf_tensor *t,
				const void *data, uint64_t off, size_t size,
				void *buf)
{
	size_t i;

	for (i = 0; i < BACKEND_KINDS; i++) {
		if (backend_kinds[i].pack &&
		    backend_kinds[i].layout == layout) {
			backend_kinds[i].packed_read(t, data, off, size, buf);
			return;
		}
	}
	memset(buf, 0, size); /* no backend of this build wrote it */
}
