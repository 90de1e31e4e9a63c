/* SPDX-License-Identifier: MIT */
/*
 * The reference backend as the registry (engine/backend.c) sees it: the
 * one header of this folder that code outside it includes.
 *
 * Device "ref0": scalar C, llama.cpp's one-token path in every op, its
 * own buffers (weights placed on it are copied in, logits copied out, as
 * a device would). It proves that the backend table is complete and lets
 * the multi-device forward pass run where there is no GPU. A model split
 * between "cpu" and "ref0" gives the tokens (with batch_exact, the bits)
 * of the CPU alone. It exists where LLMFS_REF_DEVICE=1 (tests).
 */
#ifndef LLMFS_ENGINE_REF_BACKEND_H
#define LLMFS_ENGINE_REF_BACKEND_H

#include <stddef.h>
#include <stdint.h>

struct engine_backend;
struct err;

/*
 * A reference backend; threads is only the thread count it reports (it
 * computes on the caller's thread, and no result depends on a thread
 * count). -ENOMEM with a message.
 */
int ref_backend_new(struct engine_backend **out, uint32_t threads,
		    struct err *err);

/* Its memory, for the weights a model places on ref0. */
void *ref_backend_alloc(size_t bytes);
void ref_backend_free(void *p);
void ref_backend_copy(void *dst, const void *src, size_t bytes);

#endif
