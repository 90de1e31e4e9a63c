/* SPDX-License-Identifier: MIT */
/*
 * The CUDA GPUs of the machine as io_device records, with their memory
 * and bandwidths measured: what `--devices` otherwise describes by hand.
 * Built only where nvcc is (engine/cuda/probe.cu); nothing else links
 * the CUDA runtime yet, as there is no CUDA backend to compute with.
 * UNTESTED ON HARDWARE: written and compiled on a machine without a GPU.
 */
#ifndef LLMFS_ENGINE_CUDA_PROBE_H
#define LLMFS_ENGINE_CUDA_PROBE_H

#ifdef __cplusplus
extern "C" {
#endif

#include "../../io/io.h"

/*
 * Append one IO_DEVICE_GPU per CUDA device to set: name, compute
 * capability, total and free memory, the NUMA node of its PCI slot (sysfs),
 * VRAM read bandwidth (a kernel reading 1 GiB, or a quarter of the free
 * memory if less, best of 3), host-to-device bandwidth from pinned memory
 * (256 MiB, best of 3). compute stays false: there is no backend. Returns
 * the number added, or -ENODEV (with the CUDA runtime's reason) when there
 * is no usable device; -ENOSPC when set is full.
 */
int engine_cuda_probe(struct io_device_set *set, struct err *err);

#ifdef __cplusplus
}
#endif

#endif
