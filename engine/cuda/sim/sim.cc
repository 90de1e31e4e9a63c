// SPDX-License-Identifier: MIT
/*
 * The simulator's runtime (sim.h says what it is for): blocks of fibers,
 * their barriers, and the CUDA runtime API functions the module calls,
 * defined over host memory. Everything runs on the calling thread.
 */
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include <cxxabi.h>
#include <dlfcn.h>
#include <ucontext.h>
#include <unistd.h>

#include "sim.h"

#if defined(__SANITIZE_ADDRESS__)
#define SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_ASAN 1
#endif
#endif

#ifdef SIM_ASAN
extern "C" void __sanitizer_start_switch_fiber(void **fake_stack_save,
					       const void *bottom, size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void *fake_stack_save,
						const void **bottom_old,
						size_t *size_old);
#define SIM_STACK (256u << 10)
#else
#define SIM_STACK (64u << 10)
#endif

/*
 * Switching fibers: on x86-64 a few instructions saving the callee-saved
 * registers (swapcontext also saves the signal mask, a system call per
 * switch, which made the simulator ten times slower); ucontext elsewhere.
 */
#if defined(__x86_64__)
extern "C" void sim_switch(void **from_sp, void *to_sp);
asm(".text\n"
    ".globl sim_switch\n"
    ".type sim_switch,@function\n"
    "sim_switch:\n"
    "	pushq %rbp\n"
    "	pushq %rbx\n"
    "	pushq %r12\n"
    "	pushq %r13\n"
    "	pushq %r14\n"
    "	pushq %r15\n"
    "	movq %rsp, (%rdi)\n"
    "	movq %rsi, %rsp\n"
    "	popq %r15\n"
    "	popq %r14\n"
    "	popq %r13\n"
    "	popq %r12\n"
    "	popq %rbx\n"
    "	popq %rbp\n"
    "	ret\n"
    ".size sim_switch, .-sim_switch\n");
#define SIM_FAST_SWITCH 1
#endif

thread_local const sim_thread_ids *sim_ids;
thread_local uint3 sim_block_idx;
thread_local dim3 sim_block_dim, sim_grid_dim;

/* ---- blocks of fibers ---------------------------------------------------- */

enum sim_state { SIM_RUN, SIM_WAIT_BLOCK, SIM_WAIT_WARP, SIM_DONE };

struct sim_context {
#ifdef SIM_FAST_SWITCH
	void *sp;
#else
	ucontext_t uc;
#endif
};

/* a cp.async not landed yet, of the thread's group `group` */
struct sim_copy {
	void *dst;
	const void *src;
	size_t n, src_n;
	unsigned group;
};

struct sim_fiber {
	sim_context ctx;
	std::vector<sim_copy> copies; /* cp.async in flight, oldest first */
	unsigned groups;	      /* committed cp.async groups */
	sim_thread_ids ids;
	sim_state state;
	unsigned exchanges; /* warp exchanges passed: the parity picks a page */
	void *fake_stack; /* ASan's, across a switch */
	void *stack;
};

struct sim_warp {
	unsigned live, arrived;
	unsigned char slot[32][16];
	/*
	 * A shuffle's or vote's values, on two pages used in turn: a lane
	 * reads page p after the barrier, and no lane writes p again
	 * before the next exchange's barrier, which waits for every lane
	 * to have read it. One barrier an exchange, not two.
	 */
	unsigned char page[2][32][16];
};

struct sim_block {
	std::vector<sim_fiber> f;
	std::vector<sim_warp> warps;
	std::vector<unsigned> ready; /* runnable fibers, in no order */
	unsigned live, arrived, done;
	sim_context sched;
	sim_fiber *cur;
	const std::function<void()> *body;
	void *dynamic;
	uint64_t rng;
	const void *sched_bottom; /* the scheduler's stack, for ASan */
	size_t sched_size;
	const void *from_bottom; /* where a fiber started from, for ASan */
	size_t from_size;
	void *sched_fake;
};

static thread_local sim_block *sim_b;
static thread_local std::vector<void *> sim_stacks; /* reused */
/*
 * Every stack ever made, freed when the module is unloaded or the
 * program ends: a thread's pool is lost with the thread (a stream's
 * worker), and freeing it in a thread_local destructor crashed
 * LeakSanitizer's own scan.
 */
static std::mutex sim_all_stacks_lock;
static struct sim_stack_list : std::vector<void *> {
	~sim_stack_list()
	{
		for (void *p : *this)
			free(p);
	}
} sim_all_stacks;

static void *sim_stack_new(void)
{
	void *p = malloc(SIM_STACK);
	std::lock_guard<std::mutex> g(sim_all_stacks_lock);

	sim_all_stacks.push_back(p);
	return p;
}

static uint64_t sim_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void sim_swap(sim_context *from, sim_context *to)
{
#ifdef SIM_FAST_SWITCH
	sim_switch(&from->sp, to->sp);
#else
	swapcontext(&from->uc, &to->uc);
#endif
}

/* A random runnable fiber, taken off the ready list: no order may be
 * relied on. */
static sim_fiber *sim_pick(sim_block *b)
{
	/* (the high half of a 64x64-bit product: no division) */
	unsigned k = (unsigned)(((unsigned __int128)sim_next(&b->rng) *
				 b->ready.size()) >> 64);
	unsigned i = b->ready[k];

	b->ready[k] = b->ready.back();
	b->ready.pop_back();
	b->cur = &b->f[i];
	sim_ids = &b->f[i].ids;
	return b->cur;
}

/*
 * From a fiber that waits or has finished to a runnable one, directly (a
 * switch through the scheduler would be two), or to the scheduler when
 * none is (the block is done, or deadlocked); returns when the fiber
 * runs again.
 */
static void sim_yield(sim_block *b, bool exiting)
{
	sim_fiber *f = b->cur;
	sim_context *to = &b->sched;
	const void *bottom = b->sched_bottom;
	size_t size = b->sched_size;

#ifndef SIM_ASAN
	/* (under ASan through the scheduler, as before: switched fiber to
	 * fiber, test_cuda's dequant kernels drew stack-buffer-overflow
	 * reports on their own arrays) */
	if (!b->ready.empty()) {
#else
	if (false) {
#endif
		sim_fiber *next = sim_pick(b);

		to = &next->ctx;
		bottom = next->stack;
		size = SIM_STACK;
	}
#ifdef SIM_ASAN
	__sanitizer_start_switch_fiber(exiting ? nullptr : &f->fake_stack,
				       bottom, size);
#else
	(void)bottom;
	(void)size;
#endif
	sim_swap(&f->ctx, to);
	if (exiting)
		abort(); /* a finished fiber is never resumed */
#ifdef SIM_ASAN
	__sanitizer_finish_switch_fiber(f->fake_stack, nullptr, nullptr);
#endif
}

static void sim_release(sim_block *b, sim_state waiting, unsigned warp)
{
	const unsigned size = (unsigned)b->f.size();
	const unsigned i0 = waiting == SIM_WAIT_BLOCK ? 0 : warp * 32;
	const unsigned i1 = waiting == SIM_WAIT_BLOCK ? size :
							std::min(i0 + 32, size);

	for (unsigned i = i0; i < i1; i++) {
		sim_fiber &f = b->f[i];

		if (f.state != waiting)
			continue;
		f.state = SIM_RUN;
		/* the running fiber is not in the ready list */
		if (&f != b->cur)
			b->ready.push_back(i);
	}
	if (waiting == SIM_WAIT_BLOCK)
		b->arrived = 0;
	else
		b->warps[warp].arrived = 0;
}

void sim_sync_block()
{
	sim_block *b = sim_b;

	b->cur->state = SIM_WAIT_BLOCK;
	if (++b->arrived == b->live)
		sim_release(b, SIM_WAIT_BLOCK, 0);
	else
		sim_yield(b, false);
}

void sim_sync_warp()
{
	sim_block *b = sim_b;
	unsigned w = b->cur->ids.warp;

	b->cur->state = SIM_WAIT_WARP;
	if (++b->warps[w].arrived == b->warps[w].live)
		sim_release(b, SIM_WAIT_WARP, w);
	else
		sim_yield(b, false);
}

void sim_warp_put(const void *v, size_t n)
{
	sim_block *b = sim_b;

	memcpy(b->warps[b->cur->ids.warp].slot[b->cur->ids.lane], v, n);
}

void sim_warp_get(unsigned lane, void *v, size_t n)
{
	sim_block *b = sim_b;

	memcpy(v, b->warps[b->cur->ids.warp].slot[lane & 31], n);
}

const unsigned char (*sim_warp_exchange(const void *v, size_t n,
					unsigned *lane))[16]
{
	sim_block *b = sim_b;
	sim_fiber *f = b->cur;
	sim_warp *w = &b->warps[f->ids.warp];
	unsigned p = f->exchanges++ & 1;

	memcpy(w->page[p][f->ids.lane], v, n);
	*lane = f->ids.lane;
	sim_sync_warp();
	return w->page[p];
}

unsigned sim_ballot(int pred)
{
	unsigned r = 0, v = pred != 0, lane;
	const unsigned char(*page)[16] = sim_warp_exchange(&v, sizeof(v), &lane);
	sim_block *b = sim_b;

	for (unsigned l = 0; l < 32; l++) {
		unsigned x;

		memcpy(&x, page[l], sizeof(x));
		/* lanes past the block's end never wrote: count them out */
		if (l + b->cur->ids.warp * 32 < b->f.size() && x == 1)
			r |= 1u << l;
	}
	return r;
}

void *sim_dynamic_shared()
{
	return sim_b->dynamic;
}

static void sim_copy_land(const sim_copy &c)
{
	memcpy(c.dst, c.src, c.src_n);
	memset((char *)c.dst + c.src_n, 0, c.n - c.src_n);
}

void sim_cp_async(void *dst, const void *src, size_t n, size_t src_n)
{
	sim_block *b = sim_b;
	const sim_copy c = { dst, src, n, src_n < n ? src_n : n,
			     b->cur->groups };

	if (sim_next(&b->rng) & 1)
		sim_copy_land(c);
	else
		b->cur->copies.push_back(c);
}

void sim_cp_async_commit()
{
	sim_b->cur->groups++;
}

void sim_cp_async_wait(unsigned pending)
{
	sim_fiber *f = sim_b->cur;
	size_t kept = 0;

	for (const sim_copy &c : f->copies) {
		if (c.group + pending < f->groups)
			sim_copy_land(c);
		else
			f->copies[kept++] = c;
	}
	f->copies.resize(kept);
}

static void sim_fiber_main()
{
	sim_block *b = sim_b;
	sim_fiber *f = b->cur;

#ifdef SIM_ASAN
	/* the block's first fiber starts from the scheduler, others may
	 * start from a fiber (no locals here: this frame never returns,
	 * and ASan's marks on the stack would outlive it) */
	__sanitizer_finish_switch_fiber(nullptr, &b->from_bottom,
					&b->from_size);
	if (!b->sched_size) {
		b->sched_bottom = b->from_bottom;
		b->sched_size = b->from_size;
	}
#endif
	(*b->body)();
	f->state = SIM_DONE;
	b->done++;
	b->live--;
	b->warps[f->ids.warp].live--;
	/* a barrier the others wait at counts this thread out */
	if (b->arrived && b->arrived == b->live)
		sim_release(b, SIM_WAIT_BLOCK, 0);
	if (b->warps[f->ids.warp].arrived &&
	    b->warps[f->ids.warp].arrived == b->warps[f->ids.warp].live)
		sim_release(b, SIM_WAIT_WARP, f->ids.warp);
	sim_yield(b, true);
}

/* a fresh fiber's context: it starts in sim_fiber_main */
static void sim_context_init(sim_context *c, void *stack)
{
#ifdef SIM_FAST_SWITCH
	uintptr_t top = ((uintptr_t)stack + SIM_STACK) & ~(uintptr_t)15;
	void **sp = (void **)top;

	*--sp = nullptr;		/* sim_fiber_main's return address */
	*--sp = (void *)sim_fiber_main; /* where sim_switch's ret goes */
	for (int i = 0; i < 6; i++)	/* rbp rbx r12 r13 r14 r15 */
		*--sp = nullptr;
	c->sp = sp;
#else
	getcontext(&c->uc);
	c->uc.uc_stack.ss_sp = stack;
	c->uc.uc_stack.ss_size = SIM_STACK;
	c->uc.uc_link = nullptr;
	makecontext(&c->uc, sim_fiber_main, 0);
#endif
}

static void sim_run_block(sim_block *b, unsigned n)
{
	const unsigned bx = sim_block_dim.x, by = sim_block_dim.y;

	while (sim_stacks.size() < n)
		sim_stacks.push_back(sim_stack_new());
	b->f.resize(n);
	b->warps.assign((n + 31) / 32, sim_warp());
	b->ready.clear();
	b->live = n;
	b->arrived = b->done = 0;
	b->cur = nullptr;
	b->sched_size = 0;
	for (unsigned i = 0; i < n; i++) {
		sim_fiber *f = &b->f[i];

		f->ids.thread = make_uint3(i % bx, i / bx % by, i / (bx * by));
		f->ids.lane = i % 32;
		f->ids.warp = i / 32;
		f->state = SIM_RUN;
		f->copies.clear();
		f->groups = 0;
		f->exchanges = 0;
		f->fake_stack = nullptr;
		f->stack = sim_stacks[i];
		b->warps[i / 32].live++;
		sim_context_init(&f->ctx, f->stack);
		b->ready.push_back(i);
	}
	while (b->done < n) {
		sim_fiber *f;

		if (b->ready.empty()) {
			fprintf(stderr,
				"cuda sim: deadlock in block (%u,%u,%u): %u of %u threads wait at a barrier none of the others reaches\n",
				sim_block_idx.x, sim_block_idx.y,
				sim_block_idx.z, n - b->done, n);
			for (unsigned j = 0; j < n; j++)
				fprintf(stderr, "%u:%d ", j, b->f[j].state);
			fprintf(stderr, "arrived %u live %u warp0 %u/%u\n",
				b->arrived, b->live, b->warps[0].arrived,
				b->warps[0].live);
			abort();
		}
		/* the fibers switch among themselves (sim_yield) and come
		 * back here when none can run */
		f = sim_pick(b);
#ifdef SIM_ASAN
		__sanitizer_start_switch_fiber(&b->sched_fake, f->stack,
					       SIM_STACK);
#endif
		sim_swap(&b->sched, &f->ctx);
#ifdef SIM_ASAN
		__sanitizer_finish_switch_fiber(b->sched_fake, nullptr,
						nullptr);
#endif
	}
	b->cur = nullptr;
}

/* ---- errors, devices ----------------------------------------------------- */

static thread_local cudaError_t sim_last = cudaSuccess;
static std::mutex sim_mu; /* the allocation maps */

static cudaError_t sim_fail(cudaError_t e)
{
	if (e != cudaSuccess)
		sim_last = e;
	return e;
}

/*
 * Two rules of the real runtime that tests must meet here too, checked
 * at the top of each call that would reach the device (sim_gate):
 *
 * - fork: a child of a process that initialised CUDA cannot use it
 *   (cudaErrorInitializationError). The first such call notes its
 *   process; the calls of any other are refused.
 * - a kernel that faults leaves the context broken: the launch returns
 *   at once, the fault shows at the next call, and every call from then
 *   on returns it (a "sticky" error). LLMFS_SIM_FAIL_LAUNCH=N makes the
 *   Nth kernel to run since the variable was set (from 1; in the
 *   environment at start: of the process; a graph's kernels count as
 *   they run, each launch of it) such a kernel: it does not run, and
 *   every later call returns cudaErrorLaunchFailure. How the engine reports a
 *   device's failure is tested so (test_multidevice, tests/fs/gpu0.sh).
 */
/*
 * What the host asked of the "device", counted for LLMFS_SIM_STATS=1,
 * which prints them to stderr when the process exits: calls that start
 * work (kernel launches, copies and memsets, event records, graph
 * launches; those made while capturing a graph are the graph's), waits
 * (stream, event and device synchronizations), and the kernels that ran
 * (a graph's included); and the calls a capture recorded, and the
 * captures. Launches and waits per decode step are what decides a small
 * model's speed on a card, and they are the same here; a capture costs
 * the host about a launch call a call it records.
 */
static struct {
	std::atomic<unsigned long> launches, copies, records, graphs, waits,
		kernels, captured, captures;
} sim_counts;

__attribute__((destructor)) static void sim_counts_print()
{
	const char *e = getenv("LLMFS_SIM_STATS");

	if (!e || !atoi(e))
		return;
	fprintf(stderr,
		"llmfs-cuda-sim: %lu kernel launches, %lu copies, %lu event records, %lu graph launches, %lu waits; %lu kernels ran; %lu calls captured, %lu captures\n",
		sim_counts.launches.load(), sim_counts.copies.load(),
		sim_counts.records.load(), sim_counts.graphs.load(),
		sim_counts.waits.load(), sim_counts.kernels.load(),
		sim_counts.captured.load(), sim_counts.captures.load());
}

static pid_t sim_owner;
static cudaError_t sim_sticky = cudaSuccess;
static unsigned long sim_launches;

static cudaError_t sim_gate()
{
	pid_t me = getpid();

	{
		std::lock_guard<std::mutex> g(sim_mu);

		if (!sim_owner)
			sim_owner = me;
		if (sim_owner != me)
			return sim_fail(cudaErrorInitializationError);
	}
	return sim_fail(sim_sticky);
}

static int sim_device_count()
{
	const char *s = getenv("LLMFS_SIM_DEVICES");

	return s ? atoi(s) : 1;
}

static size_t sim_vram()
{
	const char *s = getenv("LLMFS_SIM_VRAM");

	return s ? strtoull(s, nullptr, 0) : (size_t)2 << 30;
}

cudaError_t cudaGetDeviceCount(int *n)
{
	*n = 0;
	if (sim_gate())
		return sim_last;
	*n = sim_device_count();
	return *n > 0 ? cudaSuccess : sim_fail(cudaErrorNoDevice);
}

static thread_local int sim_device;

cudaError_t cudaSetDevice(int d)
{
	if (sim_gate())
		return sim_last;
	if (d < 0 || d >= sim_device_count())
		return sim_fail(cudaErrorInvalidDevice);
	sim_device = d;
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
	*d = sim_device;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d)
{
	if (d < 0 || d >= sim_device_count())
		return sim_fail(cudaErrorInvalidDevice);
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "llmfs CUDA simulator");
	p->totalGlobalMem = sim_vram();
	p->sharedMemPerBlock = 48 << 10;
	p->sharedMemPerBlockOptin = 227 << 10;
	p->regsPerBlock = 65536;
	p->warpSize = 32;
	p->maxThreadsPerBlock = 1024;
	p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
	p->maxThreadsDim[2] = 64;
	p->maxGridSize[0] = 0x7fffffff;
	p->maxGridSize[1] = p->maxGridSize[2] = 65535;
	p->major = 9;
	p->minor = 0;
	p->multiProcessorCount = 4;
	p->l2CacheSize = 4 << 20;
	p->maxThreadsPerMultiProcessor = 2048;
	return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr attr, int d)
{
	cudaDeviceProp p;

	if (cudaGetDeviceProperties(&p, d) != cudaSuccess)
		return sim_last;
	switch (attr) {
	case cudaDevAttrMultiProcessorCount: *v = p.multiProcessorCount; break;
	case cudaDevAttrComputeCapabilityMajor: *v = p.major; break;
	case cudaDevAttrComputeCapabilityMinor: *v = p.minor; break;
	case cudaDevAttrMaxSharedMemoryPerBlockOptin:
		*v = (int)p.sharedMemPerBlockOptin;
		break;
	case cudaDevAttrL2CacheSize: *v = p.l2CacheSize; break;
	default: *v = 0; break;
	}
	return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int d)
{
	snprintf(bus, (size_t)len, "0000:00:%02x.0", d);
	return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
	*v = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
	*v = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize()
{
	sim_counts.waits++;
	return sim_gate();
}

cudaError_t cudaGetLastError()
{
	cudaError_t e = sim_last;

	sim_last = cudaSuccess;
	return e;
}

cudaError_t cudaPeekAtLastError()
{
	return sim_last;
}

const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidConfiguration:
		return "invalid configuration argument";
	case cudaErrorNoDevice: return "no CUDA-capable device is detected";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorStreamCaptureUnsupported:
		return "operation not permitted when stream is capturing";
	case cudaErrorIllegalState:
		return "the operation is not permitted in the current state";
	case cudaErrorInitializationError: return "initialization error";
	case cudaErrorLaunchFailure: return "unspecified launch failure";
	default: return "simulated CUDA error";
	}
}

const char *cudaGetErrorName(cudaError_t e)
{
	return cudaGetErrorString(e);
}

/* ---- memory -------------------------------------------------------------- */

static std::map<uintptr_t, size_t> sim_device_mem, sim_host_mem;
static size_t sim_used;

/* Where p points: 2 device, 1 pinned host, 0 neither. */
static int sim_where(const void *p)
{
	std::lock_guard<std::mutex> g(sim_mu);
	uintptr_t a = (uintptr_t)p;

	for (auto *m : { &sim_device_mem, &sim_host_mem }) {
		auto it = m->upper_bound(a);

		if (it != m->begin() && a < (--it)->first + it->second)
			return m == &sim_device_mem ? 2 : 1;
	}
	return 0;
}

/*
 * What a process's CUDA context takes of the card once it has one
 * (LLMFS_SIM_CONTEXT bytes, 128 MiB by default; a card's is 300-600
 * MiB): cudaMemGetInfo's free leaves it out, as a card's does, so that
 * the planner's measured reserve (engine/placement_plan.c) has a figure.
 */
static size_t sim_context_bytes()
{
	const char *s = getenv("LLMFS_SIM_CONTEXT");
	size_t n = s ? strtoull(s, nullptr, 0) : (size_t)128 << 20;

	return n < sim_vram() / 2 ? n : sim_vram() / 2;
}

cudaError_t cudaMalloc(void **p, size_t n)
{
	size_t r = (n + 255) & ~(size_t)255;

	*p = nullptr;
	if (sim_gate())
		return sim_last;
	std::lock_guard<std::mutex> g(sim_mu);
	if (r == 0)
		r = 256;
	if (sim_used + r > sim_vram() - sim_context_bytes())
		return sim_fail(cudaErrorMemoryAllocation);
	*p = aligned_alloc(256, r);
	if (!*p)
		return sim_fail(cudaErrorMemoryAllocation);
	memset(*p, 0xff, r);
	sim_device_mem[(uintptr_t)*p] = r;
	sim_used += r;
	return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
	std::lock_guard<std::mutex> g(sim_mu);

	if (!p)
		return cudaSuccess;
	auto it = sim_device_mem.find((uintptr_t)p);
	if (it == sim_device_mem.end())
		return sim_fail(cudaErrorInvalidValue);
	sim_used -= it->second;
	sim_device_mem.erase(it);
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
	std::lock_guard<std::mutex> g(sim_mu);
	size_t taken = sim_used + sim_context_bytes();

	*total = sim_vram();
	*free_b = taken < *total ? *total - taken : 0;
	return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags)
{
	size_t r = (n + 4095) & ~(size_t)4095;

	(void)flags;
	*p = nullptr;
	if (sim_gate())
		return sim_last;
	std::lock_guard<std::mutex> g(sim_mu);
	*p = aligned_alloc(4096, r ? r : 4096);
	if (!*p)
		return sim_fail(cudaErrorMemoryAllocation);
	sim_host_mem[(uintptr_t)*p] = r;
	return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t n)
{
	return cudaHostAlloc(p, n, 0);
}

cudaError_t cudaFreeHost(void *p)
{
	std::lock_guard<std::mutex> g(sim_mu);

	if (!p)
		return cudaSuccess;
	if (!sim_host_mem.erase((uintptr_t)p))
		return sim_fail(cudaErrorInvalidValue);
	free(p);
	return cudaSuccess;
}

cudaError_t cudaHostRegister(void *p, size_t n, unsigned flags)
{
	std::lock_guard<std::mutex> g(sim_mu);

	(void)flags;
	if (!p || !n)
		return sim_fail(cudaErrorInvalidValue);
	if (!sim_host_mem.emplace((uintptr_t)p, n).second)
		return sim_fail(cudaErrorHostMemoryAlreadyRegistered);
	return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *p)
{
	std::lock_guard<std::mutex> g(sim_mu);

	if (!sim_host_mem.erase((uintptr_t)p))
		return sim_fail(cudaErrorHostMemoryNotRegistered);
	return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p)
{
	int w = sim_where(p);

	memset(a, 0, sizeof(*a));
	a->type = w == 2 ? cudaMemoryTypeDevice :
		  w == 1 ? cudaMemoryTypeHost :
			   cudaMemoryTypeUnregistered;
	a->devicePointer = w ? (void *)p : nullptr;
	a->hostPointer = w == 1 ? (void *)p : nullptr;
	return cudaSuccess;
}

/* ---- streams, events, graphs --------------------------------------------- */

struct CUgraph_st {
	std::vector<std::function<void()>> ops;
};

struct CUgraphExec_st {
	std::vector<std::function<void()>> ops;
};

struct CUstream_st {
	CUgraph_st *capture; /* non-null while capturing */
};

struct CUevent_st {
	double t;
};

static double sim_now()
{
	return std::chrono::duration<double>(
		       std::chrono::steady_clock::now().time_since_epoch())
		.count();
}

/* Run op now, or append it to the stream's capture. */
static cudaError_t sim_enqueue(cudaStream_t s, std::function<void()> op)
{
	if (s && s != cudaStreamLegacy && s != cudaStreamPerThread &&
	    s->capture) {
		s->capture->ops.push_back(std::move(op));
		return cudaSuccess;
	}
	op();
	return cudaSuccess;
}

static bool sim_capturing(cudaStream_t s)
{
	return s && s != cudaStreamLegacy && s != cudaStreamPerThread &&
	       s->capture;
}

/* count a call that starts work, or one a capture records */
static void sim_count(std::atomic<unsigned long> *c, cudaStream_t s)
{
	if (!sim_capturing(s))
		(*c)++;
	else
		sim_counts.captured++;
}

cudaError_t cudaStreamCreate(cudaStream_t *s)
{
	*s = nullptr;
	if (sim_gate())
		return sim_last;
	*s = new CUstream_st();
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
	(void)flags;
	return cudaStreamCreate(s);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	if (s)
		delete s->capture;
	delete s;
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	sim_counts.waits++;
	if (sim_gate())
		return sim_last;
	return sim_capturing(s) ? sim_fail(cudaErrorStreamCaptureUnsupported) :
				  cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
	return cudaStreamSynchronize(s);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f)
{
	(void)s;
	(void)e;
	(void)f;
	return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode)
{
	(void)mode;
	if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread)
		return sim_fail(cudaErrorStreamCaptureUnsupported);
	if (s->capture)
		return sim_fail(cudaErrorIllegalState);
	s->capture = new CUgraph_st();
	sim_counts.captures++;
	return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
	if (!sim_capturing(s))
		return sim_fail(cudaErrorIllegalState);
	*g = s->capture;
	s->capture = nullptr;
	return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *st)
{
	*st = sim_capturing(s) ? cudaStreamCaptureStatusActive :
				 cudaStreamCaptureStatusNone;
	return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g,
				 unsigned long long flags)
{
	(void)flags;
	*e = new CUgraphExec_st();
	(*e)->ops = g->ops;
	return cudaSuccess;
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t e, cudaGraph_t g,
				cudaGraphExecUpdateResultInfo *info)
{
	if (info)
		memset(info, 0, sizeof(*info));
	if (e->ops.size() != g->ops.size()) {
		if (info)
			info->result = cudaGraphExecUpdateErrorTopologyChanged;
		return sim_fail(cudaErrorGraphExecUpdateFailure);
	}
	e->ops = g->ops;
	return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s)
{
	(void)s;
	if (sim_gate())
		return sim_last;
	sim_counts.graphs++;
	/* a kernel that faults stops the rest, as the context breaks */
	for (auto &op : e->ops)
		if (sim_sticky == cudaSuccess)
			op();
	return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	delete g;
	return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e)
{
	delete e;
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	*e = new CUevent_st();
	return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
	(void)flags;
	return cudaEventCreate(e);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	delete e;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	sim_count(&sim_counts.records, s);
	return sim_enqueue(s, [e] { e->t = sim_now(); });
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	(void)e;
	sim_counts.waits++;
	return sim_gate();
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
	(void)e;
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	*ms = (float)((b->t - a->t) * 1e3);
	return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *arg)
{
	return sim_enqueue(s, [fn, arg] { fn(arg); });
}

/* ---- copies -------------------------------------------------------------- */

static FILE *sim_trace_file();

static cudaError_t sim_copy(void *dst, const void *src, size_t n,
			    cudaStream_t s)
{
	if (sim_gate())
		return sim_last;
	if (n == 0)
		return cudaSuccess;
	if (!dst || !src)
		return sim_fail(cudaErrorInvalidValue);
	sim_count(&sim_counts.copies, s);
	/* a capture records where to copy from, not what is there now */
	return sim_enqueue(s, [=] {
		FILE *f = sim_trace_file();

		if (f)
			fprintf(f, "copy %zu\n", n);
		memmove(dst, src, n);
	});
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind k)
{
	(void)k;
	return sim_copy(dst, src, n, nullptr);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
			    cudaMemcpyKind k, cudaStream_t s)
{
	(void)k;
	/* the real runtime refuses pageable host memory in a capture */
	if (sim_capturing(s) && (!sim_where(dst) || !sim_where(src)))
		return sim_fail(cudaErrorStreamCaptureUnsupported);
	return sim_copy(dst, src, n, s);
}

cudaError_t cudaMemset(void *p, int v, size_t n)
{
	memset(p, v, n);
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
	if (sim_gate())
		return sim_last;
	sim_count(&sim_counts.copies, s);
	return sim_enqueue(s, [=] { memset(p, v, n); });
}

/* ---- kernels ------------------------------------------------------------- */

static std::map<const void *, int> sim_max_dynamic; /* per kernel */

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr,
				 int value)
{
	std::lock_guard<std::mutex> g(sim_mu);

	if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
		if (value < 0 || value > (227 << 10))
			return sim_fail(cudaErrorInvalidValue);
		sim_max_dynamic[func] = value;
	}
	return cudaSuccess;
}

static bool sim_config_ok(dim3 grid, dim3 block, size_t shmem,
			  const void *kernel)
{
	size_t threads = (size_t)block.x * block.y * block.z, limit = 48 << 10;

	if (!threads || threads > 1024 || block.z > 64 || !grid.x || !grid.y ||
	    !grid.z || grid.y > 65535 || grid.z > 65535 || grid.x > 0x7fffffffu)
		return false;
	{
		std::lock_guard<std::mutex> g(sim_mu);
		auto it = sim_max_dynamic.find(kernel);

		if (it != sim_max_dynamic.end())
			limit = (size_t)it->second;
	}
	return shmem <= limit;
}

static void sim_run_grid(dim3 grid, dim3 block, size_t shmem,
			 const std::function<void()> &body)
{
	const uint64_t nb = (uint64_t)grid.x * grid.y * grid.z;
	const unsigned n = block.x * block.y * block.z;
	std::vector<uint64_t> order(nb);
	sim_block b;
	std::vector<unsigned char> dyn(shmem ? shmem : 1);
	static thread_local uint64_t seed;

	sim_counts.kernels++;
	if (!seed) {
		const char *s = getenv("LLMFS_SIM_SEED");

		seed = s ? strtoull(s, nullptr, 0) | 1 : 0x9e3779b97f4a7c15ull;
	}
	for (uint64_t i = 0; i < nb; i++)
		order[i] = i;
	/* blocks in a shuffled order: nothing may depend on theirs */
	for (uint64_t i = nb; i > 1; i--)
		std::swap(order[i - 1], order[sim_next(&seed) % i]);
	b.body = &body;
	b.dynamic = dyn.data();
	sim_b = &b;
	b.rng = sim_next(&seed);
	sim_grid_dim = grid;
	sim_block_dim = block;
	for (uint64_t k = 0; k < nb; k++) {
		uint64_t i = order[k];

		sim_block_idx = make_uint3((unsigned)(i % grid.x),
					   (unsigned)(i / grid.x % grid.y),
					   (unsigned)(i / grid.x / grid.y));
		memset(dyn.data(), 0xff, dyn.size());
		sim_run_block(&b, n);
	}
	sim_b = nullptr;
	sim_ids = nullptr;
}

/* Whether this kernel is LLMFS_SIM_FAIL_LAUNCH's (then the context breaks). */
static bool sim_launch_faults()
{
	const char *s = getenv("LLMFS_SIM_FAIL_LAUNCH");
	std::lock_guard<std::mutex> g(sim_mu);

	if (!s) {
		sim_launches = 0; /* counted from when it is set */
		return false;
	}
	if (++sim_launches != strtoul(s, nullptr, 10))
		return false;
	sim_sticky = cudaErrorLaunchFailure;
	return true;
}

/*
 * LLMFS_SIM_TRACE=FILE (read at the first kernel or copy): a line for
 * every kernel that runs (a graph's too: its grid, block, dynamic shared
 * memory and name) and every copy (its bytes), appended to FILE ("-":
 * stderr) as they run: which kernels a step launches and how wide, the
 * same on a card (tools/step-trace.sh cuts a decode step out of it).
 */
static FILE *sim_trace_file()
{
	static FILE *f = [] {
		const char *path = getenv("LLMFS_SIM_TRACE");

		if (!path || !*path)
			return (FILE *)nullptr;
		return strcmp(path, "-") ? fopen(path, "a") : stderr;
	}();

	return f;
}

static void sim_trace(const void *kernel, dim3 grid, dim3 block, size_t shmem)
{
	FILE *f = sim_trace_file();
	const char *name = "?";
	char *demangled = nullptr;
	Dl_info info;
	int st = 0;

	if (!f)
		return;
	if (dladdr(kernel, &info) && info.dli_sname) {
		name = info.dli_sname;
		demangled = abi::__cxa_demangle(name, nullptr, nullptr, &st);
		if (demangled && !st)
			name = demangled;
	}
	fprintf(f, "kernel %u %u %u  %u %u %u  %zu  %s\n", grid.x, grid.y,
		grid.z, block.x, block.y, block.z, shmem, name);
	fflush(f);
	free(demangled);
}

void sim_launch(dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
		const void *kernel, std::function<void()> body)
{
	if (sim_gate())
		return;
	if (!sim_config_ok(grid, block, shmem, kernel)) {
		sim_fail(cudaErrorInvalidConfiguration);
		return;
	}
	sim_count(&sim_counts.launches, stream);
	sim_enqueue(stream, [=] {
		sim_block *outer = sim_b;

		/* where it runs: a kept graph's kernels fault too */
		if (sim_launch_faults())
			return;
		sim_trace(kernel, grid, block, shmem);
		sim_run_grid(grid, block, shmem, body);
		sim_b = outer;
	});
}
