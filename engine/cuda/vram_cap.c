// SPDX-License-Identifier: MIT
/*
 * A VRAM cap per GPU (`--devices gpu0:vram=8G` on a real card): what the
 * CUDA backend places on gpuN, the weights (cuda_backend_weights_alloc),
 * the passes' buffers and the KV pool's blocks (the table's alloc), counts
 * against it, so that a large card stands in for the 6-16 GB cards users
 * have. An allocation past the cap is refused before the module is asked
 * (NULL, as a full card: the weights' move says ENOSPC and moves nothing).
 * Not counted: the CUDA context, the module's work memory of each handle
 * and the backend's parameter area (small): the planner's VRAM reserve
 * (engine/planner.c) stands for them inside the cap.
 *
 * The bytes of each allocation are kept by address, for its free: an open
 * addressing table per process, under one lock (weights move on the
 * FUSE threads, KV blocks come and go on the model's).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"
#include "cuda_backend.h"

struct cap_slot {
	const void *p; /* NULL: empty; cap_gone: deleted */
	size_t bytes;
	int device;
};

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t cap_limit[CB_DEVICES]; /* 0: no cap */
static uint64_t cap_used[CB_DEVICES];
static struct cap_slot *cap_table; /* cap_size slots, a power of 2 */
static size_t cap_size;
static size_t cap_live, cap_filled; /* entries; entries and deleted ones */
static const char cap_gone_mark;
#define cap_gone ((const void *)&cap_gone_mark)

static size_t cap_hash(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (size_t)x;
}

/* The slot of p, or of where p would go; cap_lock held, table not full. */
static struct cap_slot *cap_find(const void *p, bool insert)
{
	size_t i = cap_hash(p) & (cap_size - 1);
	struct cap_slot *gone = NULL;

	for (;; i = (i + 1) & (cap_size - 1)) {
		struct cap_slot *s = &cap_table[i];

		if (s->p == p)
			return s;
		if (s->p == cap_gone && !gone)
			gone = s;
		if (!s->p)
			return insert ? (gone ? gone : s) : NULL;
	}
}

/*
 * Room for one more entry: the table at most half filled (deleted slots
 * count, as a lookup walks over them), rebuilt without them when not.
 */
static int cap_grow(void)
{
	struct cap_slot *old = cap_table;
	size_t n = cap_size, i;

	if (cap_size && (cap_filled + 1) * 2 <= cap_size)
		return 0;
	cap_size = n && (cap_live + 1) * 4 <= n ? n : n ? n * 2 : 1024;
	cap_table = calloc(cap_size, sizeof(*cap_table));
	if (!cap_table) {
		cap_table = old;
		cap_size = n;
		return -ENOMEM;
	}
	for (i = 0; i < n; i++)
		if (old[i].p && old[i].p != cap_gone)
			*cap_find(old[i].p, true) = old[i];
	cap_filled = cap_live;
	free(old);
	return 0;
}

void cuda_backend_cap_set(const char *device, uint64_t cap)
{
	int i = cb_index(device);

	if (i < 0)
		return;
	pthread_mutex_lock(&cap_lock);
	cap_limit[i] = cap;
	pthread_mutex_unlock(&cap_lock);
}

bool cuda_backend_capped(const char *device, uint64_t *cap, uint64_t *used)
{
	int i = cb_index(device);
	bool capped;

	if (i < 0)
		return false;
	pthread_mutex_lock(&cap_lock);
	capped = cap_limit[i] > 0;
	*cap = cap_limit[i];
	*used = cap_used[i];
	pthread_mutex_unlock(&cap_lock);
	return capped;
}

int cuda_cap_alloc(const char *device, const struct cuda_api *api,
		   struct cuda_dev *d, void **p, size_t bytes)
{
	int i = cb_index(device), rc;
	struct cap_slot *s;

	*p = NULL;
	if (i < 0)
		return api->alloc(d, p, bytes, NULL);
	pthread_mutex_lock(&cap_lock);
	if (!cap_limit[i]) {
		pthread_mutex_unlock(&cap_lock);
		return api->alloc(d, p, bytes, NULL);
	}
	if (cap_used[i] + bytes > cap_limit[i]) {
		pthread_mutex_unlock(&cap_lock);
		return -ENOSPC;
	}
	/* counted first: two threads cannot both take the last bytes */
	cap_used[i] += bytes;
	pthread_mutex_unlock(&cap_lock);
	rc = api->alloc(d, p, bytes, NULL);
	pthread_mutex_lock(&cap_lock);
	if (!rc && cap_grow() < 0) {
		pthread_mutex_unlock(&cap_lock);
		api->free(d, *p);
		*p = NULL;
		pthread_mutex_lock(&cap_lock);
		rc = -ENOMEM;
	}
	if (rc) {
		cap_used[i] -= bytes;
	} else {
		s = cap_find(*p, true);
		cap_filled += !s->p;
		cap_live++;
		*s = (struct cap_slot){ *p, bytes, i };
	}
	pthread_mutex_unlock(&cap_lock);
	return rc;
}

void cuda_cap_free(const struct cuda_api *api, struct cuda_dev *d, void *p)
{
	struct cap_slot *s;

	if (!p)
		return;
	pthread_mutex_lock(&cap_lock);
	s = cap_size ? cap_find(p, false) : NULL;
	if (s) {
		cap_used[s->device] -= s->bytes;
		s->p = cap_gone;
		cap_live--;
	}
	pthread_mutex_unlock(&cap_lock);
	api->free(d, p);
}
