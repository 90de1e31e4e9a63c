/* SPDX-License-Identifier: MIT */
/*
 * llmfs-gpus: the machine's CUDA GPUs, measured, and the --devices text
 * that describes them to llmfs (whose planner then plans for them).
 *
 *   $ build/bin/llmfs-gpus
 *   gpu0 NVIDIA-H100-80GB-HBM3 cc 9.0 total 85029158912 free 84466466816 node 0 vram_read 2900.0GB/s pcie_h2d 52.0GB/s product 1500.0GB/s product.f16 2100.0GB/s product.q8_0 1700.0GB/s product.q4_K 1500.0GB/s product.q6_K 1300.0GB/s product.bf16 2100.0GB/s
 *   devices gpu0:vram=85029158912,free=84466466816,bw=2900000000000,pcie=52000000000,cc=9.0,model=NVIDIA-H100-80GB-HBM3,product=1500000000000,product.f16=2100000000000,...,node=0
 *
 * With LLMFS_DEVICES=gpu0:vram=8G (a cap on the card, as llmfs --devices
 * takes it) gpu0's total and free are the cap's and its line ends in
 * "capped".
 *
 * (Figures illustrative.) Exit 0, or 1 with the reason on stderr ("no CUDA
 * device: ...", "no CUDA module ..."). It links no CUDA library: the
 * engine loads the CUDA module (engine/cuda/loader.c), which measures.
 * Seen on an H100 (tools/gpu-check.sh): vram_read 2830-2860 GB/s,
 * pcie_h2d 55 GB/s. product.TYPE: the rate the decode product reads
 * weights of that type at (engine/cuda/probe.cu); product: the rate of
 * every other type (the probe's Q4_K one, or product= given), 0 where
 * not measured.
 */
#include <stdio.h>

#include "../engine/engine.h"

int main(void)
{
	struct io_device_set set = { 0 };
	struct err err = { 0 };
	uint32_t k;
	int n;

	/* LLMFS_DEVICES: the caps (and simulated GPUs) llmfs would see */
	if (io_device_set_read(&set, NULL, &err) < 0) {
		fprintf(stderr, "llmfs-gpus: %s\n", err.msg);
		return 1;
	}
	n = engine_gpu_probe(&set, &err);
	if (n < 0) {
		fprintf(stderr, "llmfs-gpus: %s\n", err.msg);
		return 1;
	}
	for (k = 0; k < set.n; k++) {
		const struct io_device *d = &set.dev[k];

		if (d->kind != IO_DEVICE_GPU)
			continue;
		printf("%s %s cc %d.%d total %llu free %llu node %d vram_read %.1fGB/s pcie_h2d %.1fGB/s product %.1fGB/s",
		       d->name, d->model, d->cc_major, d->cc_minor,
		       (unsigned long long)d->total_bytes,
		       (unsigned long long)d->free_bytes, d->node,
		       d->mem_bw / 1e9, d->link_bw / 1e9, d->product_bw / 1e9);
		for (uint32_t t = 0; t < IO_TYPE_COUNT; t++)
			if (d->product_type[t].bw > 0)
				printf(" product.%s %.1fGB/s",
				       io_type_info(t)->name,
				       d->product_type[t].bw / 1e9);
		printf("%s%s\n", d->capped ? " capped" : "",
		       d->simulated ? " simulated" : "");
	}
	printf("devices");
	for (k = 0, n = 0; k < set.n; k++) {
		const struct io_device *d = &set.dev[k];

		if (d->kind != IO_DEVICE_GPU)
			continue;
		printf("%s%s:vram=%llu,free=%llu,bw=%.0f,pcie=%.0f,cc=%d.%d,model=%s",
		       n++ ? "," : " ", d->name,
		       (unsigned long long)d->total_bytes,
		       (unsigned long long)d->free_bytes, d->mem_bw, d->link_bw,
		       d->cc_major, d->cc_minor, d->model);
		/* a simulator's kB/s: left out, as llmfs would refuse them */
		if (d->product_bw >= IO_DEVICE_RATE_MIN)
			printf(",product=%.0f", d->product_bw);
		for (uint32_t t = 0; t < IO_TYPE_COUNT; t++)
			if (d->product_type[t].bw >= IO_DEVICE_RATE_MIN)
				printf(",product.%s=%.0f",
				       io_type_info(t)->name,
				       d->product_type[t].bw);
		if (d->node >= 0)
			printf(",node=%d", d->node);
	}
	printf("\n");
	return 0;
}
