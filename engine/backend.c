// SPDX-License-Identifier: MIT
/*
 * The registry of backends (backend.h): which backend computes on which
 * device. The host's devices ("cpu" and each "numaN") are the CPU
 * backend's; a device kind without a backend in this build is refused by
 * name.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/cpu_backend.h"

static const struct {
	const char *prefix; /* "numa" matches numa0, numa1, ... */
	int (*create)(struct engine_backend **out, uint32_t threads,
		      struct err *err);
} backend_registry[] = {
	{ "cpu", cpu_backend_new },
	{ "numa", cpu_backend_new },
};

int engine_backend_new(struct engine_backend **out, const char *device,
		       uint32_t threads, struct err *err)
{
	size_t i, n;

	*out = NULL;
	for (i = 0; i < sizeof(backend_registry) / sizeof(backend_registry[0]);
	     i++) {
		n = strlen(backend_registry[i].prefix);
		if (!strncmp(device, backend_registry[i].prefix, n))
			return backend_registry[i].create(out, threads, err);
	}
	return err_set(err, ENODEV, "no backend computes on device '%.32s'",
		       device);
}

void engine_backend_free(struct engine_backend *be)
{
	if (be)
		be->iface->destroy(be);
}
