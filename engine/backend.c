// SPDX-License-Identifier: MIT
/*
 * The registry of backends (backend.h): which backend computes on which
 * device, whose layout a packed tensor is in, and where a device keeps
 * the weights placed on it. The host's devices ("cpu" and each "numaN")
 * are the CPU backend's, their memory io/'s; "ref0", the scalar
 * reference backend with memory of its own, exists where
 * LLMFS_REF_DEVICE=1 (tests); "gpuN", the CUDA backend with VRAM, where
 * the CUDA module loads and opens GPU N (cuda/cuda_backend.h). A device
 * kind without a backend in this build is refused by name.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/cpu_backend.h"
#include "cuda/cuda_backend.h"
#include "ref/ref_backend.h"

/* ---- the table's shape for the backends whose calls name no device ---- */

static bool backend_ref_enabled(const char *device)
{
	const char *e = getenv("LLMFS_REF_DEVICE");

	return e && !strcmp(e, "1") && !strcmp(device, "ref0");
}

static int backend_cpu_new(struct engine_backend **out, const char *device,
			   uint32_t threads, struct err *err)
{
	return cpu_backend_new(out, threads, err);
}

static int backend_ref_new(struct engine_backend **out, const char *device,
			   uint32_t threads, struct err *err)
{
	return ref_backend_new(out, threads, err);
}

static void *backend_ref_alloc(const char *device, size_t bytes)
{
	return ref_backend_alloc(bytes);
}

static void backend_ref_free(const char *device, void *p)
{
	ref_backend_free(p);
}

static void backend_ref_copy(const char *device, void *dst, const void *src,
			     size_t bytes)
{
	ref_backend_copy(dst, src, bytes);
}

static const struct backend_kind {
	const char *prefix; /* "numa" matches numa0, numa1, ... */
	bool host;	    /* its memory is the host's: io/ holds weights */
	/* whether this device (of the prefix) is there; NULL: always */
	bool (*enabled)(const char *device);
	int (*create)(struct engine_backend **out, const char *device,
		      uint32_t threads, struct err *err);
	/* the backend's own layout of weights, made at load; or NULL */
	int (*pack)(struct engine_backend *be, const struct engine_tensor *w);
	uint32_t layout; /* the io_placement.layout pack writes */
	void (*packed_read)(const struct io_gguf_tensor *t, const void *data,
			    uint64_t off, size_t size, void *buf);
	/* a device's own memory for the weights placed on it (not host) */
	void *(*alloc)(const char *device, size_t bytes);
	void (*free)(const char *device, void *p);
	void (*copy)(const char *device, void *dst, const void *src,
		     size_t bytes);
	/* its cap on what is placed there, if any; NULL: none */
	bool (*capped)(const char *device, uint64_t *cap, uint64_t *used);
	/* a deferred load's way into its memory; NULL: host buffers, copy */
	int (*stage_sink)(const char *device, struct io_stage_sink *sink,
			  struct err *err);
} backend_kinds[] = {
	{ .prefix = "cpu",
	  .host = true,
	  .create = backend_cpu_new,
	  .pack = cpu_backend_pack,
	  .layout = CPU_BACKEND_LAYOUT,
	  .packed_read = cpu_backend_packed_read },
	{ .prefix = "numa",
	  .host = true,
	  .create = backend_cpu_new,
	  .pack = cpu_backend_pack,
	  .layout = CPU_BACKEND_LAYOUT,
	  .packed_read = cpu_backend_packed_read },
	{ .prefix = "ref",
	  .enabled = backend_ref_enabled,
	  .create = backend_ref_new,
	  .alloc = backend_ref_alloc,
	  .free = backend_ref_free,
	  .copy = backend_ref_copy },
	{ .prefix = "gpu",
	  .enabled = cuda_backend_present,
	  .create = cuda_backend_new,
	  .alloc = cuda_backend_weights_alloc,
	  .free = cuda_backend_weights_free,
	  .copy = cuda_backend_weights_copy,
	  .capped = cuda_backend_capped,
	  .stage_sink = cuda_backend_stage_sink },
};

#define BACKEND_KINDS (sizeof(backend_kinds) / sizeof(backend_kinds[0]))

static const struct backend_kind *backend_kind_of(const char *device)
{
	size_t i;

	for (i = 0; i < BACKEND_KINDS; i++) {
		const struct backend_kind *k = &backend_kinds[i];

		if (!strncmp(device, k->prefix, strlen(k->prefix)))
			return !k->enabled || k->enabled(device) ? k : NULL;
	}
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
	return k->create(out, device, threads, err);
}

void engine_backend_free(struct engine_backend *be)
{
	if (be)
		be->iface->destroy(be);
}

bool engine_backend_device_known(const char *device)
{
	return backend_kind_of(device) != NULL;
}

bool engine_backend_device_is_host(const char *device)
{
	const struct backend_kind *k = backend_kind_of(device);

	return !k || k->host;
}

bool engine_backend_same_kind(const char *a, const char *b)
{
	/* every host device is the CPU backend's; a device is its own */
	if (engine_backend_device_is_host(a))
		return engine_backend_device_is_host(b);
	return !strcmp(a, b);
}

int engine_backend_pack(struct engine_backend *be,
			const struct engine_tensor *w)
{
	const struct backend_kind *k = backend_kind_of(be->dev.name);

	/* a tensor placed at open on another device is not this one's */
	if (w->place &&
	    !engine_backend_same_kind(be->dev.name, w->place->device))
		return 0;
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

bool engine_backend_device_cap(const char *device, uint64_t *cap,
			       uint64_t *used)
{
	const struct backend_kind *k = backend_kind_of(device);

	return k && k->capped && k->capped(device, cap, used);
}

void *engine_backend_weights_alloc(const char *device, size_t bytes)
{
	const struct backend_kind *k = backend_kind_of(device);

	return k && !k->host ? k->alloc(device, bytes) : NULL;
}

void engine_backend_weights_free(const char *device, void *p)
{
	const struct backend_kind *k = backend_kind_of(device);

	if (k && !k->host && p)
		k->free(device, p);
}

void engine_backend_weights_copy(const char *device, void *dst, const void *src,
				 size_t bytes)
{
	const struct backend_kind *k = backend_kind_of(device);

	if (k && !k->host)
		k->copy(device, dst, src, bytes);
	else
		memcpy(dst, src, bytes);
}

/* ---- a deferred load's sink for a device without one of its own -------- */

static int backend_sink_host_alloc(void *arg, void **p, size_t n,
				   struct err *err)
{
	if (posix_memalign(p, 4096, n))
		return err_set(err, ENOMEM,
			       "%s: no memory for a %zu-byte buffer",
			       (const char *)arg, n);
	return 0;
}

static void backend_sink_host_free(void *arg, void *p)
{
	free(p);
}

/* the device's copy returns when it is done: nothing to wait for after */
static int backend_sink_copy(void *arg, void *dst, const void *src, size_t n,
			     unsigned slot, struct err *err)
{
	engine_backend_weights_copy(arg, dst, src, n);
	return 0;
}

static int backend_sink_wait(void *arg, unsigned slot, struct err *err)
{
	return 0;
}

int engine_backend_stage_sink(void *arg, const char *device,
			      struct io_stage_sink *sink, struct err *err)
{
	const struct backend_kind *k = backend_kind_of(device);

	if (!k || k->host)
		return err_set(err, ENODEV,
			       "%s: no backend has memory of its own there",
			       device);
	if (k->stage_sink)
		return k->stage_sink(device, sink, err);
	*sink = (struct io_stage_sink){ (void *)device, backend_sink_host_alloc,
					backend_sink_host_free,
					backend_sink_copy, backend_sink_wait };
	return 0;
}
