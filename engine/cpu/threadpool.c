// SPDX-License-Identifier: MIT
/*
 * The thread pool: one job at a time. A decode step of a small model is a few
 * hundred short jobs (one per matmul), so what a job costs to hand out
 * and to collect matters as much as the job: a mutex and a condition
 * variable cost a futex wake-up and a context switch each way, tens of
 * microseconds, per job. Here the caller bumps a generation counter and
 * the workers, spinning on it, start at once; the last worker to finish
 * brings a pending count to zero, on which the caller spins. Only a
 * worker (or caller) that spun for POOL_SPIN_NS without news goes to
 * sleep on a futex, and only then does the other side pay for a wake-up:
 * an idle model costs no CPU.
 *
 * A spinning thread yields after a short pure spin: on a machine with
 * more runnable threads than CPUs the thread it waits for may need its
 * very CPU (a pure spin measured 3-4x slower decode at load 9 on two
 * cores; with the yield, as fast as the mutex pool there).
 *
 * With LLMFS_PIN_THREADS=1 in the environment, workers are pinned, worker
 * i to the i-th CPU the process may run on (the caller, whoever's thread
 * it is, is left alone), where there are as many CPUs as threads. Not by
 * default: on a shared machine a pinned worker cannot leave a CPU that
 * another process keeps busy.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "threadpool.h"

/* how long a thread spins for the next job (or the end of one) */
#define POOL_SPIN_NS 200000

struct cpu_threadpool {
	_Atomic uint32_t generation; /* bumped for each job */
	_Atomic uint32_t pending;    /* workers still running the job */
	_Atomic uint32_t sleepers;   /* workers asleep on generation */
	_Atomic uint32_t waiting;    /* the caller asleep on pending */
	_Atomic bool stop;
	cpu_threadpool_fn fn; /* published by the generation bump */
	void *arg;
	uint32_t n_threads; /* the caller and the workers */
	uint32_t n_started;
	pthread_t *workers;
	void *scratch; /* cpu_threadpool_scratch */
	size_t scratch_bytes;
};

struct pool_worker {
	struct cpu_threadpool *p;
	uint32_t thread_index;
};

static void pool_futex_wait(_Atomic uint32_t *word, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, NULL,
		NULL, 0);
}

static void pool_futex_wake(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL,
		NULL, 0);
}

static uint64_t pool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void pool_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/*
 * Spin until *word != val (with ne) or == val (without), up to
 * POOL_SPIN_NS; true if it happened.
 */
static bool pool_spin(_Atomic uint32_t *word, uint32_t val, bool ne)
{
	uint64_t t0 = 0;
	uint32_t i;

	for (i = 0;; i++) {
		uint32_t v = atomic_load_explicit(word, memory_order_acquire);

		if ((v != val) == ne)
			return true;
		if ((i & 63) == 63) {
			uint64_t t = pool_now_ns();

			if (!t0)
				t0 = t;
			else if (t - t0 > POOL_SPIN_NS)
				return false;
		}
		/*
		 * After a short pure spin, yield: on a loaded machine the
		 * thread waited for may need this very CPU.
		 */
		if (i >= 256)
			sched_yield();
		else
			pool_relax();
	}
}

/*
 * The CPU of worker thread_index: the allowed CPU of that rank, when
 * enough are allowed for the pool.
 */
static void pool_pin(uint32_t thread_index, uint32_t n_threads)
{
	cpu_set_t allowed, one;
	uint32_t seen = 0;
	int c;

	const char *env = getenv("LLMFS_PIN_THREADS");

	if (!env || strcmp(env, "1") != 0 ||
	    sched_getaffinity(0, sizeof(allowed), &allowed) ||
	    (uint32_t)CPU_COUNT(&allowed) < n_threads)
		return;
	for (c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &allowed) || seen++ != thread_index)
			continue;
		CPU_ZERO(&one);
		CPU_SET(c, &one);
		/* a refusal (a cpuset that changed) leaves it floating */
		(void)pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
		return;
	}
}

static void *pool_main(void *varg)
{
	struct cpu_threadpool *p = ((struct pool_worker *)varg)->p;
	uint32_t thread_index = ((struct pool_worker *)varg)->thread_index;
	uint32_t seen = 0;

	free(varg);
	pool_pin(thread_index, p->n_threads);
	for (;;) {
		if (!pool_spin(&p->generation, seen, true)) {
			atomic_fetch_add(&p->sleepers, 1);
			while (atomic_load(&p->generation) == seen)
				pool_futex_wait(&p->generation, seen);
			atomic_fetch_sub(&p->sleepers, 1);
		}
		seen = atomic_load_explicit(&p->generation,
					    memory_order_acquire);
		if (atomic_load(&p->stop))
			break;
		p->fn(p->arg, thread_index, p->n_threads);
		if (atomic_fetch_sub(&p->pending, 1) == 1 &&
		    atomic_load(&p->waiting))
			pool_futex_wake(&p->pending);
	}
	return NULL;
}

int cpu_threadpool_new(struct cpu_threadpool **out, uint32_t threads,
		       struct err *err)
{
	struct cpu_threadpool *p;
	uint32_t i;

	*out = NULL;
	if (threads > 256)
		threads = 256;
	p = calloc(1, sizeof(*p));
	if (!p)
		return err_set(err, ENOMEM, "out of memory");
	p->n_threads = threads > 1 ? threads : 1;
	if (p->n_threads > 1) {
		p->workers = calloc(p->n_threads - 1, sizeof(*p->workers));
		if (!p->workers) {
			cpu_threadpool_free(p);
			return err_set(err, ENOMEM, "out of memory");
		}
	}
	for (i = 1; i < p->n_threads; i++) {
		struct pool_worker *w = malloc(sizeof(*w));
		int ret;

		if (!w) {
			cpu_threadpool_free(p);
			return err_set(err, ENOMEM, "out of memory");
		}
		w->p = p;
		w->thread_index = i;
		ret = pthread_create(&p->workers[i - 1], NULL, pool_main, w);
		if (ret) {
			free(w);
			cpu_threadpool_free(p);
			return err_set(err, ret,
				       "cannot start a worker thread: %s",
				       strerror(ret));
		}
		p->n_started++;
	}
	*out = p;
	return 0;
}

void cpu_threadpool_free(struct cpu_threadpool *p)
{
	uint32_t i;

	if (!p)
		return;
	atomic_store(&p->stop, true);
	atomic_fetch_add(&p->generation, 1);
	pool_futex_wake(&p->generation);
	for (i = 0; i < p->n_started; i++)
		pthread_join(p->workers[i], NULL);
	free(p->workers);
	free(p->scratch);
	free(p);
}

void *cpu_threadpool_scratch(struct cpu_threadpool *p, size_t bytes)
{
	void *n;

	if (!p)
		return NULL;
	if (bytes <= p->scratch_bytes)
		return p->scratch;
	n = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
	if (!n)
		return NULL;
	free(p->scratch);
	p->scratch = n;
	p->scratch_bytes = bytes;
	return n;
}

uint32_t cpu_threadpool_size(const struct cpu_threadpool *p)
{
	return p ? p->n_threads : 1;
}

void cpu_threadpool_run(struct cpu_threadpool *p, cpu_threadpool_fn fn,
			void *arg)
{
	uint32_t v;

	if (!p || p->n_threads == 1) {
		fn(arg, 0, 1);
		return;
	}
	p->fn = fn;
	p->arg = arg;
	atomic_store_explicit(&p->pending, p->n_threads - 1,
			      memory_order_relaxed);
	/* seq_cst: a worker that counts itself asleep after this sees it */
	atomic_fetch_add(&p->generation, 1);
	if (atomic_load(&p->sleepers))
		pool_futex_wake(&p->generation);
	fn(arg, 0, p->n_threads);
	if (pool_spin(&p->pending, 0, false))
		return;
	atomic_store(&p->waiting, 1);
	while ((v = atomic_load(&p->pending)) != 0)
		pool_futex_wait(&p->pending, v);
	atomic_store(&p->waiting, 0);
}

/*
 * Physical cores among the CPUs this process may use: a CPU counts when
 * it is the first of its core's siblings (topology/thread_siblings_list
 * starts with it). Hyperthreads share a core's vector units, which a
 * matmul keeps busy.
 */
uint32_t cpu_threadpool_default_threads(void)
{
	cpu_set_t allowed;
	uint32_t cores = 0;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	int c;

	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return n > 0 ? (uint32_t)n : 1;
	for (c = 0; c < CPU_SETSIZE; c++) {
		char path[96];
		FILE *f;
		int first = -1;

		if (!CPU_ISSET(c, &allowed))
			continue;
		snprintf(
			path, sizeof(path),
			"/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
			c);
		f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%d", &first) != 1)
				first = -1;
			fclose(f);
		}
		/* unknown topology: every CPU a core */
		if (first < 0 || first == c || !CPU_ISSET(first, &allowed))
			cores++;
	}
	return cores ? cores : 1;
}
