/* SPDX-License-Identifier: MIT */
/*
 * Inside the CUDA backend (backend.c, backend_lists.c): its state, and
 * the helpers its ops share. One backend is one context's: its ops run
 * on one thread at a time, so nothing here locks.
 */
#ifndef LLMFS_ENGINE_CUDA_BACKEND_INTERNAL_H
#define LLMFS_ENGINE_CUDA_BACKEND_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../backend.h"
#include "../kv.h"
#include "module.h"

/* segments of the host ring, each a copy slot of the module's (of 16) */
#define CB_SLOTS 4
/* bytes of a segment at least: a decode step's lists, many times over */
#define CB_SEGMENT (64u << 10)
/* of each op's lists in the ring (the parameter area's alignment too) */
#define CB_ALIGN 256
/*
 * Batches of up to this many rows are converted to the mat-vec kernel's
 * activations (the module's AUTO takes them there); larger ones stay
 * floats, which cuBLAS takes.
 */
#define CB_QUANT_ROWS 32
/* activation buffers whose format the backend remembers */
#define CB_ACTS 8

/* what convert_rows wrote into an activation buffer (cb_act_*) */
struct cb_act {
	const void *buf;
	bool act; /* rows of the module's act type, else floats (x_act) */
};

struct cuda_backend {
	const struct cuda_api *api;
	struct cuda_dev *dev;	  /* this backend's own handle */
	struct engine_hparams hp; /* of the model, from reserve */
	uint8_t *param;		  /* VRAM: the lists an op takes */
	size_t param_cap;
	uint8_t *ring; /* pinned: CB_SLOTS segments the lists are built in */
	size_t seg;    /* bytes a segment */
	unsigned cur;  /* the segment being filled, and its copy slot */
	size_t used;   /* bytes of it used */
	struct engine_kv_view *views; /* attention's, host only */
	uint32_t views_cap;
	float *rope_ff; /* VRAM: rope's frequency factors */
	uint32_t rope_ff_cap;
	const float *rope_ff_src; /* where they were copied from */
	bool rope_ff_set;	  /* the model has them */
	struct err err;		  /* the first failure since synchronize */
	struct cb_act acts[CB_ACTS];
	unsigned acts_next; /* the entry a new buffer takes */
	bool plain;	    /* LLMFS_CUDA_FUSE=0: no fusions (backend.c) */
};

/* GPUs a process addresses: gpu0 .. gpu15 */
#define CB_DEVICES 16
/* N of "gpuN" (N < CB_DEVICES), or -1 */
int cb_index(const char *device);

/*
 * Keep a failed call's error (ret < 0, e its message): the first one
 * only, for synchronize to return; the ops after it are skipped.
 */
void cb_check(struct engine_backend *be, int ret, const struct err *e);

/*
 * The host ring: CB_SLOTS segments of pinned memory, each with a copy
 * slot of the module's (copy_in_async, slot_wait). An op's lists are
 * built in the segment being filled (cb_stage) and copied into VRAM on
 * the stream behind the ops already queued (cb_send); a segment is
 * filled again only once its last copy is done, which the stream
 * reached long before, so a pass does not wait for the device per op.
 *
 * cb_ring_grow: a ring of segments of at least seg bytes (waits for the
 * device). cb_stage: bytes of the ring, valid until the next cb_stage.
 * cb_send: bytes at host (cb_stage's) into dst (VRAM), enqueued. Errors
 * are kept (cb_check): cb_stage says NULL, the others the code.
 */
int cb_ring_grow(struct engine_backend *be, size_t seg);
void *cb_stage(struct engine_backend *be, size_t bytes);
int cb_send(struct engine_backend *be, void *dst, const void *host,
	    size_t bytes);
/*
 * The VRAM parameter area (cb->param), of at least bytes. One area
 * serves every op: an op's lists are copied there behind the ops before
 * it on the one stream, so none of them still reads it.
 */
int cb_param(struct engine_backend *be, size_t bytes);
/*
 * Where an op's lists of bytes are built (cb_stage), with room for them
 * in the parameter area; NULL after a failure (this one's or an earlier
 * op's).
 */
void *cb_lists(struct engine_backend *be, size_t bytes);

/*
 * Runs of rows. A batch's rows are an index list (backend.h), and the
 * module's ops take rows that follow each other: so each op makes one
 * module call per run of consecutive rows, usually the whole batch (a
 * pass's rows are 0..n-1 but for the last layer's, which only the rows
 * that want logits compute):
 *
 *	struct cb_runs it = { .idx = idx, .n = n };
 *
 *	while (cb_runs_next(be, &it))
 *		(the module's op on rows it.r .. it.r + it.len - 1)
 */
struct cb_runs {
	const uint32_t *idx, *idx2; /* the op's rows; a second list (NULL: j) */
	uint32_t n;
	/* whether row j may join a run that starts at row i (NULL: yes) */
	bool (*joins)(const void *arg, uint32_t i, uint32_t j);
	const void *arg;
	/* the run: positions j..j+len of the lists, rows r.. and r2.. */
	uint32_t j, len, r, r2;
};

/* Row j of an index list (NULL: j). */
uint32_t cb_row(const uint32_t *idx, uint32_t j);
/*
 * The next run of it (zeroed but for its lists at first): false at the
 * end, or once the backend failed (nothing after is worth running).
 */
bool cb_runs_next(struct engine_backend *be, struct cb_runs *it);

/*
 * VRAM through the cap of device (vram_cap.c): the module's alloc, or
 * -ENOSPC past the cap without asking it; the free of such memory.
 */
int cuda_cap_alloc(const char *device, const struct cuda_api *api,
		   struct cuda_dev *d, void **p, size_t bytes);
void cuda_cap_free(const struct cuda_api *api, struct cuda_dev *d, void *p);

#endif
