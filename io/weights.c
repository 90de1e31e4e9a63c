/* SPDX-License-Identifier: MIT */
/*
 * Tensor bytes from GGUF files into compute memory.
 *
 * Each file's tensor data section is read whole into one region whose first
 * byte holds the file offset align_down(data_offset, 4096): file offsets and
 * addresses are then congruent modulo the page size, so the same layout
 * serves O_DIRECT (which reads the aligned superset of the section) and
 * buffered pread (which reads the exact bytes). A tensor's placement points
 * at base + (offset - region start), i.e. at the very bytes of the file: the
 * weights/ files of the mount are byte-identical to the GGUF's ranges.
 *
 *   io_weights_load   regions, reads (uring.c, or pread here), placements
 *   io_weights_move   one tensor into its own region on another device
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "weights_internal.h"

static double weights_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int io_weights_region_add(struct io_weights *w, uint32_t *idx, struct err *err)
{
	struct io_region *r;
	uint32_t cap;

	if (w->n_regions == w->cap_regions) {
		cap = w->cap_regions ? w->cap_regions * 2 : 8;
		r = realloc(w->regions, cap * sizeof(*r));
		if (!r)
			return err_set(err, ENOMEM,
				       "out of memory for regions");
		w->regions = r;
		w->cap_regions = cap;
	}
	*idx = w->n_regions++;
	memset(&w->regions[*idx], 0, sizeof(w->regions[*idx]));
	return 0;
}

void io_weights_region_put(struct io_weights *w, uint32_t idx)
{
	struct io_region *r;

	if (idx == IO_REGION_NONE)
		return;
	r = &w->regions[idx];
	if (r->refs && --r->refs == 0)
		io_mem_free(&r->mem);
}

/* The file range [start, end) that the tensors of file f occupy. */
static int weights_file_span(const struct io_gguf *g, uint32_t f,
			     uint64_t *start, uint64_t *end, uint64_t *n,
			     struct err *err)
{
	const struct io_gguf_file *file = &g->files[f];
	const struct io_gguf_tensor *t;
	uint64_t i, e = file->data_offset;

	*n = 0;
	*start = *end = file->data_offset;
	for (i = 0; i < g->n_tensors; i++) {
		t = &g->tensors[i];
		if (t->file != f)
			continue;
		if (t->offset < file->data_offset || t->bytes > file->size ||
		    t->offset > file->size - t->bytes)
			return err_set(
				err, EINVAL,
				"%s: tensor %s lies outside the data section",
				file->path, t->name);
		if (t->offset + t->bytes > e)
			e = t->offset + t->bytes;
		(*n)++;
	}
	*start = file->data_offset;
	*end = e;
	return 0;
}

/* Reads of the aligned superset pass the total a little: clamp. */
static void weights_progress(struct io_weights *w, uint64_t done)
{
	uint64_t total = w->stats.tensor_bytes;

	if (w->opt.progress)
		w->opt.progress(w->opt.progress_arg,
				done < total ? done : total, total);
}

static void weights_notice_cb(void *arg, const char *msg)
{
	struct io_weights *w = arg;

	if (w->opt.notice)
		w->opt.notice(w->opt.notice_arg, msg);
}

void io_weights_notice(struct io_weights *w, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	weights_notice_cb(w, msg);
}

/* Bytes per read: large enough for the disk, small enough to keep many in flight. */
static uint64_t weights_chunk(const struct io_weights *w)
{
	const char *v = getenv("LLMFS_IO_CHUNK_KB");
	unsigned long kb = v ? strtoul(v, NULL, 10) : w->opt.read_kib;

	if (kb < 4 || kb > 65536 || (kb & 3))
		kb = 8192;
	return (uint64_t)kb << 10;
}

static bool weights_env(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0") != 0;
}

/* The spans of the files, once, before any region is made. */
static int weights_spans(struct io_weights *w, struct load_file *lf,
			 struct err *err)
{
	uint32_t f;
	int rc;

	for (f = 0; f < w->g->n_files; f++) {
		rc = weights_file_span(w->g, f, &lf[f].start, &lf[f].end,
				       &lf[f].n, err);
		if (rc < 0)
			return rc;
		lf[f].base_off = lf[f].start & ~(uint64_t)(IO_PAGE - 1);
	}
	return 0;
}

static void weights_device_name(char *out, size_t cap, int node)
{
	if (node >= 0)
		snprintf(out, cap, "numa%d", node);
	else
		snprintf(out, cap, "cpu");
}

/*
 * Copy c: one region per file holding tensors (the aligned superset of its
 * span) on node, and the placements of copy c pointing into them.
 */
static int weights_regions_make(struct io_weights *w, struct load_file *lf,
				uint32_t c, int node, struct err *err)
{
	const struct io_gguf *g = w->g;
	uint64_t i, size, n = g->n_tensors;
	uint32_t f, idx = 0;
	int rc;

	for (f = 0; f < g->n_files; f++) {
		if (!lf[f].n)
			continue;
		rc = io_weights_region_add(w, &idx, err);
		if (rc < 0)
			return rc;
		lf[f].region[c] = idx;
		w->regions[idx].file_start = lf[f].base_off;
		size = (lf[f].end - lf[f].base_off + IO_PAGE - 1) &
		       ~(uint64_t)(IO_PAGE - 1);
		rc = io_mem_alloc(&w->regions[idx].mem, (size_t)size, node,
				  err);
		if (rc < 0)
			return rc;
	}
	for (i = 0; i < n; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];
		struct load_file *l = &lf[t->file];
		struct io_region *r = &w->regions[l->region[c]];
		struct io_placement *p = &w->pl[c * n + i];

		p->data = (uint8_t *)r->mem.base + (t->offset - l->base_off);
		p->bytes = t->bytes;
		weights_device_name(p->device, sizeof(p->device), node);
		w->region_of[c * n + i] = l->region[c];
		r->refs++;
	}
	return 0;
}

/* Copy 0 is what the disk fills: it alone is registered with the ring. */
static void weights_ring_start(struct io_weights *w, const struct load_file *lf,
			       struct io_ring **ring)
{
	struct io_mem **mem;
	struct err e = { 0 };
	uint32_t f, n = 0;

	*ring = NULL;
	if (w->opt.no_uring || weights_env("LLMFS_NO_URING"))
		return;
	if (io_ring_open(ring, w->stats.queue_depth, weights_chunk(w), &e) <
	    0) {
		io_weights_notice(
			w, "io_uring unavailable (%s): reading with pread",
			e.msg);
		return;
	}
	w->stats.uring = true;
	mem = calloc(w->g->n_files + 1, sizeof(*mem));
	if (!mem) {
		io_weights_notice(
			w,
			"io_uring buffers not registered (out of memory): plain reads");
		return;
	}
	for (f = 0; f < w->g->n_files; f++)
		if (lf[f].n)
			mem[n++] = &w->regions[lf[f].region[0]].mem;
	if (weights_env("LLMFS_IO_NO_FIXED"))
		;
	else if (io_ring_register(*ring, mem, n, &e) == 0)
		w->stats.fixed = true;
	else
		io_weights_notice(
			w, "io_uring buffers not registered (%s): plain reads",
			e.msg);
	free(mem);
}

/*
 * Is [start, end) of fd (nearly) all in the page cache? Then copying from
 * it beats reading the disk again (O_DIRECT would bypass the cached pages):
 * a model loaded a minute ago, or just written, loads at memory speed.
 * mincore() of a throwaway mapping answers without reading anything.
 */
static bool weights_cached(int fd, uint64_t start, uint64_t end)
{
	uint64_t off = start & ~(uint64_t)(IO_PAGE - 1), pages, i, hit = 0;
	unsigned char *vec;
	void *p;

	if (end <= off)
		return false;
	pages = (end - off + IO_PAGE - 1) / IO_PAGE;
	p = mmap(NULL, end - off, PROT_READ, MAP_SHARED, fd, (off_t)off);
	if (p == MAP_FAILED)
		return false;
	vec = malloc(pages);
	if (vec && mincore(p, end - off, vec) == 0)
		for (i = 0; i < pages; i++)
			hit += vec[i] & 1;
	free(vec);
	munmap(p, end - off);
	return hit * 10 >= pages * 9;
}

/* Threads of the pread path: a few requests in flight, as the ring has. */
static unsigned weights_pread_threads(const struct io_weights *w)
{
	return w->stats.queue_depth < 4 ? w->stats.queue_depth : 4;
}

/* The ring, or pread from a few threads, over [off, off + len) into dst. */
static int weights_read_range(struct io_weights *w, struct io_ring *ring,
			      int fd, const struct io_gguf_file *file,
			      uint64_t off, uint64_t len, uint8_t *dst,
			      uint64_t need_end, struct err *err)
{
	if (ring)
		return io_ring_read(ring, fd, file->path, off, len, dst,
				    file->size, need_end, io_arrival_done, w,
				    err);
	return io_pread_range(fd, file->path, off, len, dst, file->size,
			      need_end, weights_chunk(w),
			      weights_pread_threads(w), io_arrival_done, w,
			      err);
}

static int weights_open(const char *path, bool direct, struct err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));

	if (fd < 0)
		return err_set(err, errno, "%s: %s", path, strerror(errno));
	return fd;
}

/*
 * Read file f into its region: O_DIRECT when the filesystem allows it and
 * the file is not already cached, else through the page cache; with the
 * ring, or pread. Returns 0 or the negative errno.
 */
static int weights_read_file(struct io_weights *w, struct io_ring *ring,
			     const struct load_file *l, uint32_t f,
			     struct err *err)
{
	const struct io_gguf_file *file = &w->g->files[f];
	uint8_t *base = w->regions[l->region[0]].mem.base;
	bool direct = !w->opt.no_direct && !weights_env("LLMFS_NO_DIRECT");
	uint64_t done0 = w->stats.bytes, end;
	struct err e = { 0 };
	int fd, rc;

	if (direct && !w->opt.always_direct) {
		fd = weights_open(file->path, false, err);
		if (fd < 0)
			return fd;
		if (weights_cached(fd, l->start, l->end)) {
			direct = false;
			w->stats.cached = true;
		}
		close(fd);
	}
	if (direct) {
		fd = weights_open(file->path, true, &e);
		if (fd == -EINVAL) {
			io_weights_notice(
				w,
				"O_DIRECT refused for %s: reading through the page cache",
				file->path);
			direct = false;
		} else if (fd < 0) {
			*err = e;
			return fd;
		} else {
			end = (l->end + IO_PAGE - 1) & ~(uint64_t)(IO_PAGE - 1);
			io_arrival_file_begin(w, f, l->base_off);
			rc = weights_read_range(w, ring, fd, file, l->base_off,
						end - l->base_off, base, l->end,
						err);
			close(fd);
			if (rc != -EINVAL) {
				w->stats.direct |= rc == 0;
				return rc == -ENODATA ? -EINVAL : rc;
			}
			/* Some filesystems accept the open and refuse the read. */
			io_weights_notice(
				w,
				"O_DIRECT read refused for %s (%s): reading through the page cache",
				file->path, err->msg);
			pthread_mutex_lock(&w->mu);
			w->stats.bytes = done0;
			pthread_mutex_unlock(&w->mu);
		}
	}
	fd = weights_open(file->path, false, err);
	if (fd < 0)
		return fd;
	posix_fadvise(fd, (off_t)l->start, (off_t)(l->end - l->start),
		      POSIX_FADV_SEQUENTIAL);
	io_arrival_file_begin(w, f, l->start);
	rc = weights_read_range(w, ring, fd, file, l->start, l->end - l->start,
				base + (l->start - l->base_off), l->end, err);
	close(fd);
	return rc == -ENODATA ? -EINVAL : rc;
}

/* Lock every region (as its pages arrive); one notice if refused. */
static void weights_lock(struct io_weights *w)
{
	uint32_t r;

	w->locked = !w->opt.no_lock;
	w->stats.locked = w->locked;
	for (r = 0; r < w->n_regions && w->locked; r++) {
		io_mem_lock(&w->regions[r].mem,
			    w->stats.locked ? weights_notice_cb : NULL, w);
		if (!w->regions[r].mem.locked)
			w->stats.locked = false;
	}
}

/* Fill copies 1.. from copy 0: the disk is read once, memory is faster. */
static void weights_replicate(struct io_weights *w, const struct load_file *lf)
{
	const struct io_gguf *g = w->g;
	uint32_t c, f;

	for (c = 1; c < w->n_copies; c++) {
		for (f = 0; f < g->n_files; f++) {
			const struct io_region *src, *dst;

			if (!lf[f].n)
				continue;
			src = &w->regions[lf[f].region[0]];
			dst = &w->regions[lf[f].region[c]];
			memcpy((uint8_t *)dst->mem.base +
				       (lf[f].start - lf[f].base_off),
			       (uint8_t *)src->mem.base +
				       (lf[f].start - lf[f].base_off),
			       lf[f].end - lf[f].start);
		}
	}
}

static int weights_plan(struct io_weights *w, struct io_numa_plan *plan,
			struct err *err)
{
	struct io_numa_topology topo;
	uint64_t *bytes, i;
	int rc;

	rc = io_numa_topology_read(&topo, err);
	if (rc < 0)
		return rc;
	bytes = calloc(w->g->n_tensors + 1, sizeof(*bytes));
	if (!bytes)
		return err_set(err, ENOMEM, "out of memory for a NUMA plan");
	for (i = 0; i < w->g->n_tensors; i++)
		bytes[i] = w->g->tensors[i].bytes;
	rc = io_numa_plan_make(plan, &topo, w->opt.numa, w->opt.numa_node,
			       bytes, w->g->n_tensors, err);
	free(bytes);
	return rc;
}

/*
 * The node a copy's regions are bound to. The planner decides per tensor,
 * but the loader reads whole files into one region, so the plan's first
 * tensor of the copy speaks for all (every policy so far places a copy
 * whole).
 */
static int weights_copy_node(const struct io_numa_plan *plan, uint32_t c)
{
	if (plan->n_tensors == 0)
		return -1;
	return plan->node[(uint64_t)c * plan->n_tensors];
}

/*
 * The reading and what follows it, on the caller's thread or the loader
 * thread (async): everything after the regions exist.
 */
static int weights_run(struct io_weights *w, struct err *err)
{
	const struct io_gguf *g = w->g;
	struct io_ring *ring = NULL;
	uint32_t f;
	int rc = 0;

	weights_ring_start(w, w->lf, &ring);
	w->stats.register_seconds = weights_now() - w->t0 -
				    w->stats.alloc_seconds;
	for (f = 0; f < g->n_files && rc == 0; f++)
		if (w->lf[f].n)
			rc = weights_read_file(w, ring, &w->lf[f], f, err);
	/* The ring goes first: nothing may still write into the regions. */
	io_ring_close(ring);
	w->stats.read_seconds = weights_now() - w->t0 - w->stats.alloc_seconds -
				w->stats.register_seconds;
	if (rc == 0) {
		weights_replicate(w, w->lf);
		if (!w->stats.uring)
			w->stats.queue_depth = weights_pread_threads(w);
		w->stats.cuda_pinned = w->n_regions > 0;
		for (f = 0; f < w->n_regions; f++) {
			io_mem_huge(&w->regions[f].mem);
			io_mem_cuda_pin(&w->regions[f].mem,
					f ? NULL : weights_notice_cb, w);
			if (w->regions[f].mem.kind != IO_MEM_CUDA_HOST)
				w->stats.cuda_pinned = false;
		}
		w->stats.seconds = weights_now() - w->t0;
		if (w->opt.progress)
			w->opt.progress(w->opt.progress_arg,
					w->stats.tensor_bytes,
					w->stats.tensor_bytes);
	}
	io_arrival_finish(w, rc, err);
	return rc;
}

static void *weights_loader_main(void *arg)
{
	struct io_weights *w = arg;
	struct err err = { 0 };

	weights_run(w, &err);
	return NULL;
}

/* Everything before the reading: checks, plan, regions, placements. */
static int weights_prepare(struct io_weights *w, struct err *err)
{
	const struct io_gguf *g = w->g;
	uint64_t i, n = g->n_tensors;
	uint32_t c;
	int rc;

	for (i = 0; i < n; i++) {
		if (g->tensors[i].file >= g->n_files)
			return err_set(err, EINVAL, "tensor %s: no file %u",
				       g->tensors[i].name, g->tensors[i].file);
		w->stats.tensor_bytes += g->tensors[i].bytes;
	}
	w->plan = calloc(1, sizeof(*w->plan));
	if (!w->plan)
		return err_set(err, ENOMEM, "out of memory for a NUMA plan");
	rc = weights_plan(w, w->plan, err);
	if (rc < 0)
		return rc;
	w->n_copies = w->plan->n_copies;
	w->pl = calloc(n * w->n_copies + 1, sizeof(*w->pl));
	w->region_of = calloc(n * w->n_copies + 1, sizeof(*w->region_of));
	w->lf = calloc(g->n_files + 1, sizeof(*w->lf));
	if (!w->pl || !w->region_of || !w->lf)
		return err_set(err, ENOMEM, "out of memory for %llu placements",
			       (unsigned long long)n);
	rc = io_arrival_init(w, err);
	if (rc < 0)
		return rc;
	for (i = n; i-- > 0;)
		w->lf[g->tensors[w->by_offset[i]].file].first = i;
	rc = weights_spans(w, w->lf, err);
	for (c = 0; c < w->n_copies && rc == 0; c++)
		rc = weights_regions_make(w, w->lf, c,
					  weights_copy_node(w->plan, c), err);
	if (rc < 0)
		return rc;
	for (i = 0; i < n * w->n_copies; i++)
		w->pl[i].owner = w;
	weights_lock(w);
	w->stats.n_copies = w->n_copies;
	snprintf(w->home, sizeof(w->home), "%s", n ? w->pl[0].device : "cpu");
	weights_progress(w, 0);
	return 0;
}

int io_weights_load(struct io_weights **out, const struct io_gguf *g,
		    const struct io_load_options *opt, struct err *err)
{
	struct io_weights *w;
	int rc = 0;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return err_set(err, ENOMEM, "out of memory for weights");
	w->g = g;
	w->t0 = weights_now();
	if (opt)
		w->opt = *opt;
	w->stats.queue_depth = w->opt.queue_depth ? w->opt.queue_depth : 16;
	if (w->stats.queue_depth > 4096)
		w->stats.queue_depth = 4096;
	if (w->opt.devices)
		w->devices = *w->opt.devices;
	else
		rc = io_device_set_read(&w->devices, NULL, err);
	w->opt.devices = NULL;
	if (rc < 0)
		goto out_free;
	rc = weights_prepare(w, err);
	if (rc < 0)
		goto out_free;
	w->stats.alloc_seconds = weights_now() - w->t0;
	if (w->opt.async) {
		rc = pthread_create(&w->loader, NULL, weights_loader_main, w);
		if (rc) {
			rc = err_set(err, rc,
				     "cannot start the loader thread: %s",
				     strerror(rc));
			goto out_free;
		}
		w->async = true;
	} else {
		rc = weights_run(w, err);
		if (rc < 0)
			goto out_free;
	}
	*out = w;
	return 0;

out_free:
	io_weights_free(w);
	return rc;
}

void io_weights_free(struct io_weights *w)
{
	uint32_t i;

	if (!w)
		return;
	/* The loader writes into the regions until it ends. */
	if (w->async)
		pthread_join(w->loader, NULL);
	for (i = 0; i < w->n_regions; i++)
		io_mem_free(&w->regions[i].mem);
	io_arrival_destroy(w);
	if (w->plan)
		io_numa_plan_free(w->plan);
	free(w->plan);
	free(w->lf);
	free(w->regions);
	free(w->region_of);
	free(w->pl);
	free(w);
}

/* Bytes of whole IO_HUGE pages within [off, off + len) of m. */
static size_t weights_huge_within(const struct io_mem *m, size_t off,
				  size_t len)
{
	const uintptr_t a = (uintptr_t)m->base + off;
	const uintptr_t b = a + (len < m->size - off ? len : m->size - off);
	const uintptr_t first = (a + IO_HUGE - 1) & ~(uintptr_t)(IO_HUGE - 1);
	const uintptr_t end = b & ~(uintptr_t)(IO_HUGE - 1);

	return end > first ? end - first : 0;
}

int io_weights_collapse_step(struct io_weights *w, size_t max_bytes,
			     size_t *merged)
{
	struct io_mem *m;
	int rc;

	*merged = 0;
	if (!w || w->collapse_done)
		return 0;
	if (max_bytes < IO_HUGE)
		max_bytes = IO_HUGE;
	/* a move may have freed regions since the last step */
	if (w->collapse_region >= w->n_regions) {
		w->collapse_done = true;
		return 0;
	}
	m = &w->regions[w->collapse_region].mem;
	rc = io_mem_collapse(m, w->collapse_off, max_bytes);
	if (rc == -EINVAL) {
		/* this kernel cannot: khugepaged will */
		w->collapse_done = true;
		return -EOPNOTSUPP;
	}
	/* other errors (pages pinned for CUDA, no free huge page): skip */
	if (!rc && w->collapse_off < m->size)
		*merged = weights_huge_within(m, w->collapse_off, max_bytes);
	w->collapse_off += max_bytes;
	if (w->collapse_off >= m->size) {
		w->collapse_off = 0;
		if (++w->collapse_region >= w->n_regions)
			w->collapse_done = true;
	}
	return !w->collapse_done;
}

struct io_placement *io_weights_placement(struct io_weights *w, uint64_t i)
{
	if (!w || i >= w->g->n_tensors)
		return NULL;
	return &w->pl[i];
}

struct io_placement *io_weights_placement_node(struct io_weights *w, uint64_t i,
					       int node)
{
	uint32_t c;

	if (!w || i >= w->g->n_tensors)
		return NULL;
	for (c = 1; c < w->n_copies && node >= 0; c++)
		if (weights_copy_node(w->plan, c) == node)
			return &w->pl[c * w->g->n_tensors + i];
	return &w->pl[i];
}

const char *io_weights_home(const struct io_weights *w)
{
	return w->home;
}

struct io_device_set *io_weights_devices(struct io_weights *w)
{
	return &w->devices;
}

const struct io_load_stats *io_weights_stats(const struct io_weights *w)
{
	return &w->stats;
}
