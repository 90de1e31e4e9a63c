/* SPDX-License-Identifier: MIT */
/*
 * llmfs-load: load a model's weights as the daemon does and say how fast.
 *
 *   $ build/bin/llmfs-load --progress model.gguf
 *   loaded 1.07 GB (1073741824 bytes) in 0.61 s: 1.76 GB/s
 *   path io_uring+O_DIRECT read_fixed qd 32, locked, 1 copy
 *
 * Options: --no-uring, --no-direct, --qd=N, --numa=interleave|node:N|
 * replicate, --no-lock, --async (load behind, wait tensor by tensor, say
 * when the first was ready), --verify (compare every tensor with pread of
 * the file), --progress (a bar on stderr). Notices (fallbacks) go to stderr.
 * The last line is machine-readable for tools/bench-load.sh:
 *   result bytes=B seconds=S gbps=G uring=0|1 direct=0|1 fixed=0|1
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../io/io.h"

#ifdef LLMFS_CUDA
#include <cuda_runtime_api.h>

/* Every tensor to the GPU and back, from its pinned host pages. */
static int load_gpu_check(const struct io_gguf *g, struct io_weights *w)
{
	struct cudaPointerAttributes attr;
	uint64_t i, bad = 0, max = 0;
	uint8_t *host;
	void *dev;

	for (i = 0; i < g->n_tensors; i++)
		if (g->tensors[i].bytes > max)
			max = g->tensors[i].bytes;
	if (cudaMalloc(&dev, max ? max : 1) != cudaSuccess)
		return -1;
	host = malloc(max ? max : 1);
	for (i = 0; host && i < g->n_tensors; i++) {
		const struct io_placement *p = io_weights_placement(w, i);

		if (cudaPointerGetAttributes(&attr, p->data) != cudaSuccess ||
		    attr.type != cudaMemoryTypeHost ||
		    cudaMemcpy(dev, p->data, p->bytes,
			       cudaMemcpyHostToDevice) != cudaSuccess ||
		    cudaMemcpy(host, dev, p->bytes, cudaMemcpyDeviceToHost) !=
			    cudaSuccess ||
		    memcmp(host, p->data, p->bytes) != 0)
			bad++;
	}
	printf("gpu check: %llu tensors through the GPU from pinned memory: %s\n",
	       (unsigned long long)g->n_tensors,
	       bad || !host ? "MISMATCH" : "identical");
	free(host);
	cudaFree(dev);
	return bad || !host ? -1 : 0;
}
#endif

static double load_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void load_notice(void *arg, const char *msg)
{
	fprintf(stderr, "llmfs-load: %s\n", msg);
}

struct bar {
	double t0, last;
	bool ended;
};

static void load_progress(void *arg, uint64_t done, uint64_t total)
{
	struct bar *b = arg;
	double now = load_now(), secs = now - b->t0;
	int i, width = 40, fill = total ? (int)(done * width / total) : width;

	if (b->ended || (done < total && now - b->last < 0.1))
		return;
	b->ended = done == total;
	b->last = now;
	fputc('\r', stderr);
	fputc('[', stderr);
	for (i = 0; i < width; i++)
		fputc(i < fill ? '#' : ' ', stderr);
	fprintf(stderr, "] %6.2f / %.2f GB  %.2f GB/s", done / 1e9, total / 1e9,
		secs > 0 ? done / secs / 1e9 : 0.0);
	if (done == total)
		fputc('\n', stderr);
}

/* Every tensor equals its byte range of the file. */
static int load_verify(const struct io_gguf *g, struct io_weights *w)
{
	uint64_t i, bad = 0;

	for (i = 0; i < g->n_tensors; i++) {
		const struct io_gguf_tensor *t = &g->tensors[i];
		uint8_t *buf = malloc(t->bytes ? t->bytes : 1);
		int fd = open(g->files[t->file].path, O_RDONLY);

		if (!buf || fd < 0 ||
		    pread(fd, buf, t->bytes, (off_t)t->offset) !=
			    (ssize_t)t->bytes ||
		    memcmp(buf, io_weights_placement(w, i)->data, t->bytes) !=
			    0) {
			fprintf(stderr,
				"llmfs-load: tensor %s differs from the file\n",
				t->name);
			bad++;
		}
		if (fd >= 0)
			close(fd);
		free(buf);
	}
	printf("verified %llu tensors: %s\n", (unsigned long long)g->n_tensors,
	       bad ? "MISMATCH" : "identical to the file");
	return bad ? -1 : 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: llmfs-load [--no-uring] [--no-direct] [--qd=N] [--no-lock] [--async]\n"
		"                  [--numa=interleave|node:N|replicate] [--verify]\n"
		"                  [--progress] MODEL.gguf\n");
}

int main(int argc, char **argv)
{
	struct io_load_options opt = { .notice = load_notice };
	const struct io_load_stats *st;
	struct io_weights *w = NULL;
	struct io_gguf *g = NULL;
	struct err err = { 0 };
	bool verify = false;
	struct bar bar = { 0 };
	const char *path = NULL;
	int i, rc = 0;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--no-uring") == 0)
			opt.no_uring = true;
		else if (strcmp(argv[i], "--no-direct") == 0)
			opt.no_direct = true;
		else if (strcmp(argv[i], "--no-lock") == 0)
			opt.no_lock = true;
		else if (strncmp(argv[i], "--qd=", 5) == 0)
			opt.queue_depth = (uint32_t)strtoul(argv[i] + 5, NULL,
							    10);
		else if (strncmp(argv[i], "--numa=", 7) == 0) {
			if (io_numa_policy_parse(argv[i] + 7, &opt.numa,
						 &opt.numa_node, &err) < 0) {
				fprintf(stderr, "llmfs-load: %s\n", err.msg);
				return 2;
			}
		} else if (strcmp(argv[i], "--async") == 0)
			opt.async = true;
		else if (strcmp(argv[i], "--verify") == 0)
			verify = true;
		else if (strcmp(argv[i], "--progress") == 0)
			opt.progress = load_progress;
		else if (argv[i][0] != '-' && !path)
			path = argv[i];
		else {
			usage();
			return 2;
		}
	}
	if (!path) {
		usage();
		return 2;
	}
	if (io_gguf_open(&g, path, &err) < 0) {
		fprintf(stderr, "llmfs-load: %s\n", err.msg);
		return 1;
	}
	bar.t0 = load_now();
	opt.progress_arg = &bar;
	if (io_weights_load(&w, g, &opt, &err) < 0) {
		fprintf(stderr, "llmfs-load: %s\n", err.msg);
		io_gguf_close(g);
		return 1;
	}
	if (opt.async) {
		/* What a first forward pass would see: tensors in file order. */
		double t_first = 0;
		uint64_t k;

		for (k = 0; k < g->n_tensors; k++) {
			if (io_placement_wait(io_weights_placement(w, k)) < 0)
				break;
			if (k == 0)
				t_first = load_now() - bar.t0;
		}
		if (io_weights_wait(w, &err) < 0) {
			fprintf(stderr, "llmfs-load: %s\n", err.msg);
			io_weights_free(w);
			io_gguf_close(g);
			return 1;
		}
		printf("async: first tensor ready after %.3f s, all after %.3f s\n",
		       t_first, load_now() - bar.t0);
	}
	st = io_weights_stats(w);
	printf("loaded %.2f GB (%llu bytes) in %.3f s: %.2f GB/s\n",
	       st->tensor_bytes / 1e9, (unsigned long long)st->tensor_bytes,
	       st->seconds, st->tensor_bytes / st->seconds / 1e9);
	printf("path %s%s%s qd %u, %s, %u cop%s\n",
	       st->uring ? "io_uring" : "pread",
	       st->direct ? "+O_DIRECT" :
	       st->cached ? " (from the page cache: cached)" :
			    " (page cache)",
	       st->fixed ? " read_fixed" : "", st->queue_depth,
	       st->locked ? "locked" : "not locked", st->n_copies,
	       st->n_copies == 1 ? "y" : "ies");
	printf("phases: map %.3f s, ring + pin %.3f s, read %.3f s, rest %.3f s\n",
	       st->alloc_seconds, st->register_seconds, st->read_seconds,
	       st->seconds - st->alloc_seconds - st->register_seconds -
		       st->read_seconds);
	if (verify && load_verify(g, w) < 0)
		rc = 1;
#ifdef LLMFS_CUDA
	printf("cuda pinned: %s\n", st->cuda_pinned ? "yes" : "no");
	if (verify && load_gpu_check(g, w) < 0)
		rc = 1;
#endif
	printf("result bytes=%llu seconds=%.6f gbps=%.4f uring=%d direct=%d fixed=%d cached=%d\n",
	       (unsigned long long)st->tensor_bytes, st->seconds,
	       st->tensor_bytes / st->seconds / 1e9, st->uring, st->direct,
	       st->fixed, st->cached);
	io_weights_free(w);
	io_gguf_close(g);
	return rc;
}
