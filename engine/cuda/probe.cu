// SPDX-License-Identifier: MIT
/*
 * cuda_api.probe: find the CUDA devices and measure what the planner
 * needs of each. Bandwidths are measured, not taken from data sheets:
 * VRAM by a kernel that reads every byte once (16-byte loads,
 * grid-stride, one sum per block so that nothing is optimised away),
 * PCIe by cudaMemcpy from page-locked host memory, and the rate at which
 * the decode product reads weights of each type that matters
 * (probe_products) by that kernel itself.
 *
 * The simulator runs it in `make check`; tools/gpu-check.sh on a card
 * (an H100: 2.85 TB/s VRAM read, 55 GB/s host to device).
 */
#include <cstring>

#include "blocks.cuh"
#include "internal.h"

/*
 * Bytes read to measure VRAM, copied to measure PCIe; the product's
 * matrices: PROBE_MATRICES of each shape, the width and the two heights
 * of a Qwen3-8B layer's products (attention's 4096 x 4096, the FFN's
 * 12288 x 4096), 302 MB in all at Q4_K (1.07 GB at F16): well past the
 * L2 cache (50 MB on an H100), so that every round reads VRAM. All
 * small simulated.
 */
#ifdef LLMFS_CUDA_SIM
#define PROBE_VRAM (1ull << 20)
#define PROBE_PCIE (1u << 20)
#define PROBE_WIDTH 256
#define PROBE_ROWS_A 32
#define PROBE_ROWS_B 64
#define PROBE_MATRICES 1
#else
#define PROBE_VRAM (1ull << 30)
#define PROBE_PCIE (256u << 20)
#define PROBE_WIDTH 4096
#define PROBE_ROWS_A 4096
#define PROBE_ROWS_B 12288
#define PROBE_MATRICES 8
#endif

__global__ void probe_read(const uint4 *p, size_t n, unsigned long long *out)
{
	__shared__ unsigned int part[32];
	unsigned int s = 0;
	size_t i;

	for (i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		uint4 v = p[i];
		s ^= v.x ^ v.y ^ v.z ^ v.w;
	}
	for (int o = 16; o > 0; o /= 2)
		s ^= __shfl_xor_sync(0xffffffffu, s, o);
	if ((threadIdx.x & 31) == 0)
		part[threadIdx.x / 32] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		for (unsigned int w = 1; w < blockDim.x / 32; w++)
			s ^= part[w];
		atomicAdd(out, (unsigned long long)s);
	}
}

static double probe_elapsed(cudaEvent_t a, cudaEvent_t b)
{
	float ms = 0;

	if (cudaEventSynchronize(b) != cudaSuccess ||
	    cudaEventElapsedTime(&ms, a, b) != cudaSuccess)
		return 0;
	return ms / 1e3;
}

/* Bytes/s of a kernel reading bytes of VRAM; 0 on any failure. */
static double probe_vram(const cudaDeviceProp *prop, size_t bytes)
{
	unsigned long long *sum = NULL;
	cudaEvent_t a, b;
	double best = 0, t;
	uint4 *buf = NULL;

	if (cudaMalloc(&buf, bytes) != cudaSuccess ||
	    cudaMalloc(&sum, sizeof(*sum)) != cudaSuccess ||
	    cudaMemset(buf, 1, bytes) != cudaSuccess) {
		cudaFree(buf);
		cudaFree(sum);
		return 0;
	}
	cudaEventCreate(&a);
	cudaEventCreate(&b);
	for (int r = 0; r < 4; r++) { /* the first round warms up */
		cudaEventRecord(a);
		cuda_launch(probe_read,
			    dim3((unsigned)prop->multiProcessorCount * 4),
			    dim3(256), 0, (cudaStream_t)0, (const uint4 *)buf,
			    bytes / sizeof(uint4), sum);
		cudaEventRecord(b);
		t = probe_elapsed(a, b);
		if (r && t > 0 && bytes / t > best)
			best = bytes / t;
	}
	if (cudaGetLastError() != cudaSuccess)
		best = 0;
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	cudaFree(buf);
	cudaFree(sum);
	return best;
}

/*
 * The weight types whose decode product the probe times: a Q4_K_M
 * model's (Q4_K, Q6_K), Q8_0's and the float ones'. Q4_K in the repacked
 * order its matrices take (the other types have none, or keep their own:
 * engine/quant/traits.c). Every other type is planned at Q4_K's rate.
 */
static const struct probe_type {
	uint32_t type;
	uint32_t block_elems, block_bytes;
	uint32_t repacked;
} probe_types[] = {
	{ T_Q4_K, QK_K, sizeof(blk_q4_K), 1 },
	{ T_Q6_K, QK_K, sizeof(blk_q6_K), 0 },
	{ T_Q8_0, 32, sizeof(blk_q8_0), 0 },
	{ T_F16, 1, 2, 0 },
	{ T_BF16, 1, 2, 0 },
};

/* Bytes of a row of the probe's matrices of one type. */
static uint64_t probe_row_bytes(const struct probe_type *pt)
{
	return PROBE_WIDTH / pt->block_elems * (uint64_t)pt->block_bytes;
}

/*
 * Bytes/s of weights of one type the decode product reads: the mat-vec
 * kernel a decode step spends most of its time in (on an H100, 70% of a
 * 0.6B step), times one activation row of the type's kind, over `pairs`
 * pairs of matrices in w (zeros: the kernel's time does not depend on
 * the values), launched back to back as a step's products are: what a
 * weight's byte costs a step, launch gaps and partial waves included,
 * where probe_vram is the memory's rate. 0 on any failure.
 */
static double probe_product(const struct probe_type *pt, const uint8_t *w,
			    uint32_t pairs, const uint8_t *x, float *y)
{
	const uint64_t row = probe_row_bytes(pt);
	const uint64_t bytes =
		pairs * (uint64_t)(PROBE_ROWS_A + PROBE_ROWS_B) * row;
	const uint32_t act = k_act_type(pt->type);
	cudaEvent_t a, b;
	double best = 0, t;
	bool ok = true;

	cudaEventCreate(&a);
	cudaEventCreate(&b);
	for (int r = 0; r < 4 && ok; r++) { /* the first round warms up */
		const uint8_t *m = w;

		cudaEventRecord(a);
		for (uint32_t k = 0; k < 2 * pairs && ok; k++) {
			mmv_args p = {};

			p.w = m;
			p.row_bytes = row;
			p.n_in = PROBE_WIDTH;
			p.n_out = k % 2 ? PROBE_ROWS_B : PROBE_ROWS_A;
			p.x = x;
			p.x_ld = k_act_row_bytes(act, PROBE_WIDTH);
			p.y = y;
			p.y_ld = (uint64_t)p.n_out;
			p.n_cols = 1;
			p.repacked = pt->repacked;
			ok = k_mmv(pt->type, p, (cudaStream_t)0);
			m += (uint64_t)p.n_out * row;
		}
		cudaEventRecord(b);
		t = probe_elapsed(a, b);
		if (r && t > 0 && bytes / t > best)
			best = bytes / t;
	}
	if (!ok || cudaGetLastError() != cudaSuccess)
		best = 0;
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return best;
}

/*
 * Each type's product rate into io->product_type[], Q4_K's also into
 * io->product_bw (every other type's). One buffer of zeros, sized for
 * the widest type, serves all: PROBE_MATRICES pairs where a quarter of
 * the free memory holds them (the float types' 1.07 GB on an H100),
 * fewer otherwise. The time: each type's bytes read 4 times, 13.7 GB,
 * about 6-9 ms on an H100 at 1.5-2.5 TB/s (expected), plus the
 * buffer's memset.
 */
static void probe_products(struct io_device *io, size_t free_b)
{
	uint64_t widest = 0, pair, x_bytes = 0;
	uint8_t *w = NULL, *x = NULL;
	float *y = NULL;
	uint32_t pairs;

	for (const auto &pt : probe_types) {
		if (probe_row_bytes(&pt) > widest)
			widest = probe_row_bytes(&pt);
		if (k_act_row_bytes(k_act_type(pt.type), PROBE_WIDTH) > x_bytes)
			x_bytes = k_act_row_bytes(k_act_type(pt.type),
						  PROBE_WIDTH);
	}
	pair = (uint64_t)(PROBE_ROWS_A + PROBE_ROWS_B) * widest;
	pairs = free_b / 4 / pair < PROBE_MATRICES ?
			(uint32_t)(free_b / 4 / pair) :
			PROBE_MATRICES;
	if (!pairs || cudaMalloc(&w, pairs * pair) != cudaSuccess ||
	    cudaMalloc(&x, x_bytes) != cudaSuccess ||
	    cudaMalloc(&y, PROBE_ROWS_B * sizeof(float)) != cudaSuccess ||
	    cudaMemset(w, 0, pairs * pair) != cudaSuccess ||
	    cudaMemset(x, 0, x_bytes) != cudaSuccess)
		goto out;
	for (const auto &pt : probe_types) {
		struct io_device_rate *r = &io->product_type[pt.type];

		r->bw = probe_product(&pt, w, pairs, x, y);
		r->source = r->bw > 0 ? IO_BW_MEASURED : IO_BW_UNKNOWN;
		if (pt.type == T_Q4_K) {
			io->product_bw = r->bw;
			io->product_source = r->source;
		}
	}
out:
	cudaFree(w);
	cudaFree(x);
	cudaFree(y);
}

/* Bytes/s host -> device from page-locked memory; 0 on any failure. */
static double probe_pcie(size_t bytes)
{
	void *host = NULL, *dev = NULL;
	cudaEvent_t a, b;
	double best = 0, t;

	if (cudaMallocHost(&host, bytes) != cudaSuccess ||
	    cudaMalloc(&dev, bytes) != cudaSuccess) {
		cudaFreeHost(host);
		return 0;
	}
	memset(host, 1, bytes);
	cudaEventCreate(&a);
	cudaEventCreate(&b);
	for (int r = 0; r < 4; r++) {
		cudaEventRecord(a);
		cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice);
		cudaEventRecord(b);
		t = probe_elapsed(a, b);
		if (r && t > 0 && bytes / t > best)
			best = bytes / t;
	}
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	cudaFree(dev);
	cudaFreeHost(host);
	return best;
}

/* The NUMA node of the device's PCI slot, or -1 (sysfs says -1 too). */
static int probe_node(int dev)
{
	char bus[32], path[96];
	int node = -1;
	FILE *f;

	if (cudaDeviceGetPCIBusId(bus, sizeof(bus), dev) != cudaSuccess)
		return -1;
	for (char *p = bus; *p; p++) /* sysfs spells the hex digits small */
		if (*p >= 'A' && *p <= 'F')
			*p += 'a' - 'A';
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", bus);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%d", &node) != 1)
		node = -1;
	fclose(f);
	return node;
}

int cuda_probe(struct io_device_set *set, struct err *err)
{
	size_t free_b = 0, total_b = 0, bytes;
	cudaDeviceProp prop;
	int n = 0, added = 0;
	cudaError_t e;

	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0)
		return cuda_err(err, ENODEV, "no CUDA device: %s",
				e != cudaSuccess ? cudaGetErrorString(e) :
						   "none found");
	for (int d = 0; d < n; d++) {
		struct io_device *io;

		if (set->n == IO_DEVICE_MAX)
			return cuda_err(err, ENOSPC, "more than %d devices",
					IO_DEVICE_MAX);
		if (cudaSetDevice(d) != cudaSuccess ||
		    cudaGetDeviceProperties(&prop, d) != cudaSuccess ||
		    cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
			continue;
		io = &set->dev[set->n++];
		memset(io, 0, sizeof(*io));
		io->kind = IO_DEVICE_GPU;
		io->index = d;
		snprintf(io->name, sizeof(io->name), "gpu%d", d);
		snprintf(io->model, sizeof(io->model), "%.31s", prop.name);
		for (char *p = io->model; *p; p++) /* one word in --devices */
			if (*p == ' ' || *p == ',' || *p == ':' || *p == ';')
				*p = '-';
		io->cc_major = prop.major;
		io->cc_minor = prop.minor;
		io->total_bytes = total_b;
		io->free_bytes = free_b;
		io->node = probe_node(d);
		bytes = free_b / 4 < PROBE_VRAM ? free_b / 4 : PROBE_VRAM;
		bytes &= ~(size_t)15;
		io->mem_bw = probe_vram(&prop, bytes);
		io->bw_source = io->mem_bw > 0 ? IO_BW_MEASURED : IO_BW_UNKNOWN;
		io->link_bw = probe_pcie(PROBE_PCIE);
		probe_products(io, free_b);
		added++;
	}
	if (!added)
		return cuda_err(err, ENODEV, "no usable CUDA device of %d", n);
	return added;
}
