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

/*
 * The file range [start, end) that the tensors of file f read into io/'s
 * memory occupy (those staged to another device are left out), how many
 * tensors the file has (*n) and how many of them are read here (*n_read).
 */
static int weights_file_span(const struct io_weights *w, uint32_t f,
			     struct load_file *l, struct err *err)
{
	const struct io_gguf *g = w->g;
	const struct io_gguf_file *file = &g->files[f];
	const struct io_gguf_tensor *t;
	uint64_t i, s = UINT64_MAX, e = file->data_offset;
	bool staged = false;

	l->n = l->n_read = 0;
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
		l->n++;
		if (w->staged && w->staged[i]) {
			staged = true;
			continue;
		}
		if (t->offset < s)
			s = t->offset;
		if (t->offset + t->bytes > e)
			e = t->offset + t->bytes;
		l->n_read++;
	}
	/* a file all of whose tensors are staged maps nothing */
	l->start = staged && l->n_read ? s : file->data_offset;
	l->end = l->n_read ? e : l->start;
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
		rc = weights_file_span(w, f, &lf[f], err);
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
		if (!lf[f].n_read)
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
		w->stats.host_region_bytes += w->regions[idx].mem.size;
	}
	for (i = 0; i < n; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];
		struct load_file *l = &lf[t->file];
		struct io_region *r = &w->regions[l->region[c]];
		struct io_placement *p = &w->pl[c * n + i];

		if (w->staged && w->staged[i])
			continue;

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
		if (lf[f].n_read)
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
 * Tensors read into io/'s memory closer than this are read as one run,
 * the bytes between them too: staged tensors (another device's) further
 * apart are stepped over, so that their bytes take no host memory.
 */
#define WEIGHTS_RUN_GAP (1u << 20)

/*
 * The next run of file l's tensors to read, from position *at of
 * by_offset on: [*start, *end). false when none is left.
 */
static bool weights_next_run(const struct io_weights *w,
			     const struct load_file *l, uint64_t *at,
			     uint64_t *start, uint64_t *end)
{
	const uint64_t last = l->first + l->n;
	bool any = false;

	for (; *at < last; (*at)++) {
		const uint64_t i = w->by_offset[*at];
		const struct io_gguf_tensor *t = &w->g->tensors[i];

		if (w->staged && w->staged[i])
			continue;
		if (any && t->offset > *end + WEIGHTS_RUN_GAP)
			break;
		if (!any)
			*start = t->offset, *end = t->offset;
		any = true;
		if (t->offset + t->bytes > *end)
			*end = t->offset + t->bytes;
	}
	return any;
}

/*
 * Read file f's runs into its region through fd: with O_DIRECT the
 * aligned superset of each (the region's layout allows it), else the
 * exact bytes. Returns 0 or the negative errno (-ENODATA: the file ends
 * early).
 */
static int weights_read_runs(struct io_weights *w, struct io_ring *ring, int fd,
			     const struct load_file *l, uint32_t f, bool direct,
			     struct err *err)
{
	const struct io_gguf_file *file = &w->g->files[f];
	uint8_t *base = w->regions[l->region[0]].mem.base;
	uint64_t at = l->first, start, end, s, e;
	int rc = 0;

	io_arrival_file_begin(w, f, direct ? l->base_off : l->start);
	while (rc == 0 && weights_next_run(w, l, &at, &start, &end)) {
		s = direct ? start & ~(uint64_t)(IO_PAGE - 1) : start;
		e = direct ? (end + IO_PAGE - 1) & ~(uint64_t)(IO_PAGE - 1) :
			     end;
		io_arrival_skip(w, s);
		rc = weights_read_range(w, ring, fd, file, s, e - s,
					base + (s - l->base_off), end, err);
	}
	return rc;
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
	bool direct = !w->opt.no_direct && !weights_env("LLMFS_NO_DIRECT");
	uint64_t done0 = w->stats.bytes;
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
			rc = weights_read_runs(w, ring, fd, l, f, true, err);
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
	rc = weights_read_runs(w, ring, fd, l, f, false, err);
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

			if (!lf[f].n_read)
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
	uint32_t f, n_read = 0;
	int rc = 0;

	for (f = 0; f < g->n_files; f++)
		n_read += w->lf[f].n_read > 0;
	/* all staged to other devices: nothing for a ring to read here */
	if (n_read)
		weights_ring_start(w, w->lf, &ring);
	w->stats.register_seconds = weights_now() - w->t0 -
				    w->stats.alloc_seconds;
	for (f = 0; f < g->n_files && rc == 0; f++)
		if (w->lf[f].n_read)
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

/* Everything before the regions: checks, plan, placement records. */
static int weights_records(struct io_weights *w, struct err *err)
{
	const struct io_gguf *g = w->g;
	uint64_t i, n = g->n_tensors;
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
	weights_device_name(w->home, sizeof(w->home),
			    weights_copy_node(w->plan, 0));
	for (i = 0; i < n * w->n_copies; i++) {
		w->pl[i].owner = w;
		w->pl[i].bytes = g->tensors[i % (n ? n : 1)].bytes;
		snprintf(w->pl[i].device, sizeof(w->pl[i].device), "%s",
			 w->home);
		w->region_of[i] = IO_REGION_NONE;
	}
	w->stats.n_copies = w->n_copies;
	return 0;
}

/*
 * The regions of what io/ reads, and the placements into them (the
 * spans known: weights_spans, which checked every tensor's range).
 */
static int weights_regions(struct io_weights *w, struct err *err)
{
	uint32_t c;
	int rc = 0;

	for (c = 0; c < w->n_copies && rc == 0; c++)
		rc = weights_regions_make(w, w->lf, c,
					  weights_copy_node(w->plan, c), err);
	if (rc < 0)
		return rc;
	weights_lock(w);
	weights_progress(w, w->stats.bytes);
	return 0;
}

/* Read (on a loader thread with async) what the regions hold. */
static int weights_begin(struct io_weights *w, struct err *err)
{
	int rc;

	w->stats.alloc_seconds = weights_now() - w->t0;
	if (!w->opt.async)
		return weights_run(w, err);
	rc = pthread_create(&w->loader, NULL, weights_loader_main, w);
	if (rc)
		return err_set(err, rc, "cannot start the loader thread: %s",
			       strerror(rc));
	w->async = true;
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
	rc = weights_records(w, err);
	if (rc < 0)
		goto out_free;
	if (w->opt.defer) {
		w->deferred = true;
		w->staged = calloc(g->n_tensors + 1, sizeof(*w->staged));
		if (!w->staged) {
			rc = err_set(err, ENOMEM, "out of memory");
			goto out_free;
		}
		*out = w;
		return 0;
	}
	w->started = true;
	rc = weights_spans(w, w->lf, err);
	if (rc == 0)
		rc = weights_regions(w, err);
	if (rc == 0)
		rc = weights_begin(w, err);
	if (rc < 0)
		goto out_free;
	*out = w;
	return 0;

out_free:
	io_weights_free(w);
	return rc;
}

/* ---- a deferred load's start: staged tensors first ---------------------- */

struct weights_stage_at {
	struct io_weights *w;
	uint64_t base; /* bytes in before this file's staging */
};

static void weights_stage_progress(void *arg, uint64_t done, uint64_t total)
{
	struct weights_stage_at *at = arg;

	pthread_mutex_lock(&at->w->mu);
	at->w->stats.bytes = at->base + done;
	pthread_mutex_unlock(&at->w->mu);
	weights_progress(at->w, at->base + done);
}

/*
 * The ring's buffers for total bytes: four of a quarter each, 1 to 64
 * MiB (io/stage.c's default), so that a small model pins little.
 */
static size_t weights_stage_buf(uint64_t total)
{
	uint64_t b = ((total / 4) + (1u << 20) - 1) &
		     ~(uint64_t)((1u << 20) - 1);

	return b < (1u << 20) ? 1u << 20 : b > (64u << 20) ? 64u << 20 : b;
}

/* The staged tensors of file f on device into r[]; how many, their bytes. */
static size_t weights_stage_ranges(const struct io_weights *w, uint32_t f,
				   const char *device, struct io_stage_range *r,
				   uint64_t *total)
{
	size_t nr = 0;
	uint64_t i;

	*total = 0;
	for (i = 0; i < w->g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &w->g->tensors[i];

		if (!w->staged[i] || t->file != f || !t->bytes ||
		    strcmp(w->pl[i].device, device))
			continue;
		r[nr++] = (struct io_stage_range){ t->offset, t->bytes,
						   w->pl[i].data };
		*total += t->bytes;
	}
	return nr;
}

/* Every file's staged tensors of one device through its ring. */
static int weights_stage_device(struct io_weights *w, const char *device,
				const struct io_stage_sink *sink,
				struct io_stage_range *r, struct err *err)
{
	struct io_stage_options opt = { .n_bufs = 4,
					.no_uring = w->opt.no_uring,
					.no_direct = w->opt.no_direct,
					.progress = weights_stage_progress };
	struct weights_stage_at at = { w, 0 };
	struct io_stage_stats st;
	uint64_t total;
	uint32_t f;
	size_t nr;
	int rc = 0;

	opt.progress_arg = &at;
	for (f = 0; f < w->g->n_files && rc == 0; f++) {
		nr = weights_stage_ranges(w, f, device, r, &total);
		if (!nr)
			continue;
		opt.buf_bytes = weights_stage_buf(total);
		if (opt.n_bufs * opt.buf_bytes > w->stats.stage_ring_bytes)
			w->stats.stage_ring_bytes = opt.n_bufs * opt.buf_bytes;
		at.base = w->stats.bytes;
		rc = io_stage_file(w->g->files[f].path, r, nr, sink, &opt, &st,
				   err);
		w->stats.staged_bytes += st.bytes_copied;
		w->stats.stage_read_seconds += st.read_seconds;
		w->stats.stage_wait_seconds += st.wait_seconds;
		w->stats.uring |= st.uring;
		w->stats.direct |= st.direct;
		pthread_mutex_lock(&w->mu);
		w->stats.bytes = at.base + st.bytes_copied;
		pthread_mutex_unlock(&w->mu);
	}
	return rc;
}

/* The tensors detached before the start, into their devices' memory. */
static int weights_stage(struct io_weights *w, io_weights_sink_fn sink_of,
			 void *arg, struct err *err)
{
	const uint64_t n = w->g->n_tensors;
	struct io_stage_range *r = malloc((n + 1) * sizeof(*r));
	bool *done = calloc(n + 1, sizeof(*done));
	double t0 = weights_now();
	struct io_stage_sink sink;
	uint64_t i, k;
	int rc = 0;

	if (!r || !done) {
		rc = err_set(err, ENOMEM, "out of memory");
		goto out_free;
	}
	for (i = 0; i < n && rc == 0; i++) {
		const char *device = w->pl[i].device;

		if (!w->staged[i] || done[i])
			continue;
		rc = sink_of ? sink_of(arg, device, &sink, err) :
			       err_set(err, EINVAL, "%s: no way to reach %s",
				       w->g->tensors[i].name, device);
		if (rc == 0)
			rc = weights_stage_device(w, device, &sink, r, err);
		for (k = i; k < n; k++) {
			if (!w->staged[k] || strcmp(w->pl[k].device, device))
				continue;
			done[k] = true;
			if (rc == 0)
				__atomic_store_n(&w->pl[k].ready, 1,
						 __ATOMIC_RELEASE);
		}
	}
out_free:
	free(r);
	free(done);
	w->stats.stage_seconds = weights_now() - t0;
	return rc;
}

int io_weights_start(struct io_weights *w, io_weights_sink_fn sink_of,
		     void *arg, struct err *err)
{
	int rc;

	if (!w->deferred || w->started)
		return err_set(
			err, EINVAL,
			"the weights' load was not deferred or has begun");
	w->started = true;
	/* every tensor's range in its file, the staged ones too, first */
	rc = weights_spans(w, w->lf, err);
	if (rc == 0)
		rc = weights_stage(w, sink_of, arg, err);
	w->t0 = weights_now();
	if (rc == 0)
		rc = weights_regions(w, err);
	if (rc == 0) {
		rc = weights_begin(w, err);
		/* a read's failure ended the load; a thread's did not */
		if (rc < 0 && w->opt.async)
			io_arrival_finish(w, rc, err);
	} else {
		io_arrival_finish(w, rc, err);
	}
	return rc;
}

bool io_weights_started(const struct io_weights *w)
{
	return w->started;
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
	free(w->staged);
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
