// SPDX-License-Identifier: MIT
/*
 * Finding and loading the CUDA module (engine/cuda/module.h) at run time,
 * so that one build of llmfs runs everywhere: where the module, the
 * driver or a GPU is missing, engine_cuda_api() says why and everything
 * stays on the CPU.
 *
 * Where the module is looked for, first found wins:
 *   $LLMFS_CUDA_MODULE           a path; "none" (or empty) loads nothing
 *   <exe>/../lib/llmfs-cuda.so   the build tree (build/bin -> build/lib)
 *   <exe>/../lib/llmfs/llmfs-cuda.so   an installed tree (make install)
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_backend.h"
#include "loader.h"

static pthread_once_t loader_once = PTHREAD_ONCE_INIT;
static const struct cuda_api *loader_api;
static struct err loader_err;
static char loader_path[PATH_MAX];

/* Try one path: 1 loaded, 0 absent (keep looking), -1 present but bad. */
static int loader_try(const char *path)
{
	const struct cuda_api *(*get)(void);
	const struct cuda_api *api;
	void *h;

	if (access(path, F_OK))
		return 0;
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		err_set(&loader_err, ENOENT, "%s", dlerror());
		return -1;
	}
	*(void **)&get = dlsym(h, "llmfs_cuda_api");
	api = get ? get() : NULL;
	if (!api || api->abi != LLMFS_CUDA_ABI ||
	    api->size != sizeof(struct cuda_api)) {
		err_set(&loader_err, ENOENT,
			"%s: not a CUDA module of this build (interface %u of %u bytes, want %u of %zu)",
			path, api ? api->abi : 0, api ? api->size : 0,
			LLMFS_CUDA_ABI, sizeof(struct cuda_api));
		dlclose(h);
		return -1;
	}
	snprintf(loader_path, sizeof(loader_path), "%s", path);
	loader_api = api;
	return 1;
}

static void loader_load(void)
{
	static const char *const rel[] = { "../lib/llmfs-cuda.so",
					   "../lib/llmfs/llmfs-cuda.so" };
	const char *env = getenv("LLMFS_CUDA_MODULE");
	char exe[PATH_MAX], path[PATH_MAX + 64], *slash;
	ssize_t n;
	size_t i;

	if (env) {
		if (!*env || !strcmp(env, "none")) {
			err_set(&loader_err, ENOENT,
				"CUDA module disabled (LLMFS_CUDA_MODULE=%s)",
				env);
			return;
		}
		if (loader_try(env) == 0)
			err_set(&loader_err, ENOENT,
				"no CUDA module at %s (LLMFS_CUDA_MODULE)",
				env);
		return;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		err_set(&loader_err, ENOENT,
			"no CUDA module: cannot read /proc/self/exe");
		return;
	}
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (slash)
		slash[1] = '\0';
	for (i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", exe, rel[i]);
		if (loader_try(path))
			return;
	}
	err_set(&loader_err, ENOENT,
		"no CUDA module beside %s (a build without nvcc, or CUDA=0)",
		exe);
}

const struct cuda_api *engine_cuda_api(struct err *err)
{
	pthread_once(&loader_once, loader_load);
	if (!loader_api && err)
		*err = loader_err;
	return loader_api;
}

const char *engine_cuda_module_path(void)
{
	pthread_once(&loader_once, loader_load);
	return loader_api ? loader_path : NULL;
}

/* What the probe's process sends back (plain data, through a pipe). */
struct loader_answer {
	int rc;
	struct err err;
	struct io_device_set found;
};

/*
 * api->probe run in a child process. CUDA cannot be used in a child
 * forked by a process that has initialised it, and the callers fork
 * after probing: the mount's daemon (fuse_daemonize), Check's tests (one
 * child per test). So the probe touches CUDA in a process of its own,
 * and the first process to initialise it is the one that computes.
 */
static int loader_probe_child(const struct cuda_api *api,
			      struct io_device_set *found, struct err *err)
{
	struct loader_answer a = { 0 };
	size_t got = 0;
	int fd[2], status = 0;
	ssize_t n;
	pid_t pid;

	if (pipe2(fd, O_CLOEXEC))
		return err_set(err, errno, "GPU probe: pipe: %s",
			       strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return err_set(err, errno, "GPU probe: fork: %s",
			       strerror(errno));
	}
	if (pid == 0) {
		close(fd[0]);
		a.rc = api->probe(&a.found, &a.err);
		while (got < sizeof(a)) {
			n = write(fd[1], (const char *)&a + got,
				  sizeof(a) - got);
			if (n > 0)
				got += (size_t)n;
			else if (errno != EINTR)
				_exit(1);
		}
		_exit(0);
	}
	close(fd[1]);
	while (got < sizeof(a)) {
		n = read(fd[0], (char *)&a + got, sizeof(a) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (got != sizeof(a)) {
		if (WIFSIGNALED(status))
			return err_set(
				err, EIO,
				"GPU probe: its process died of signal %d (%s)",
				WTERMSIG(status), strsignal(WTERMSIG(status)));
		return err_set(
			err, EIO,
			"GPU probe: its process ended without an answer");
	}
	*found = a.found;
	if (a.rc < 0 && err)
		*err = a.err;
	return a.rc;
}

/*
 * A capped GPU takes what the probe found of its card, its memory at most
 * the cap, and the CUDA backend enforces the cap on what is placed there;
 * the costs given with the cap (step=, cross=, product=, product.TYPE=)
 * stay.
 */
static void loader_cap(struct io_device *d, const struct io_device *card)
{
	const struct io_device given = *d;
	uint64_t cap = d->total_bytes;

	*d = *card;
	d->capped = true;
	d->compute = true;
	d->step_s = given.step_s;
	d->cross_s = given.cross_s;
	io_device_product_give(d, &given);
	if (d->total_bytes > cap)
		d->total_bytes = cap;
	if (d->free_bytes > cap)
		d->free_bytes = cap;
	cuda_backend_cap_set(d->name, cap);
}

int engine_gpu_probe(struct io_device_set *set, struct err *err)
{
	const struct cuda_api *api = engine_cuda_api(err);
	struct io_device_set found = { 0 };
	const struct io_device *had;
	uint32_t i;
	int n;

	if (!api)
		return -ENOENT;
	n = loader_probe_child(api, &found, err);
	if (n < 0)
		return n;
	for (i = 0, n = 0; i < found.n; i++) {
		struct io_device *known = (struct io_device *)io_device_find(
			set, found.dev[i].name);

		/* capped (--devices gpu0:vram=8G): the card, at most the cap */
		if (known && known->capped && known->mem_bw <= 0) {
			loader_cap(known, &found.dev[i]);
			n++;
			continue;
		}
		/* a GPU described by --devices keeps its description */
		if (known)
			continue;
		if (set->n == IO_DEVICE_MAX)
			return err_set(err, ENOSPC, "more than %d devices",
				       IO_DEVICE_MAX);
		/* the CUDA backend (backend.c) computes on what the probe found */
		found.dev[i].compute = true;
		set->dev[set->n++] = found.dev[i];
		n++;
	}
	had = io_device_set_unprobed(set);
	if (had)
		return err_set(
			err, ENODEV,
			"the CUDA module found no %s (a simulated %s needs bw= and pcie= too)",
			had->name, had->name);
	return n;
}
