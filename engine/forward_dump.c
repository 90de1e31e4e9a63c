// SPDX-License-Identifier: MIT
/*
 * A trace of the forward pass, to find where two backends part.
 * LLMFS_FORWARD_DUMP=FILE appends every op's output rows to FILE, one
 * line a row:
 *
 *   PASS OP POS v0 v1 ...
 *
 * PASS counts the process's chunks from 0, OP is the weight whose op
 * wrote the rows (blk.0.attn_q.weight) or the layer and buffer
 * (blk.0.q_rope), POS the row's position (a MoE's expert slot: POS.i),
 * the values in C's %a (exact). Run the same prompt once on the CPU and
 * once on a GPU, then `tools/forward-diff.py cpu.txt gpu.txt` names the
 * first row whose bits differ, op by op:
 *
 *   LLMFS_FORWARD_DUMP=cpu.txt GOLDEN_MODELS=M GOLDEN_PROMPTS=1 test_golden
 *   LLMFS_FORWARD_DUMP=gpu.txt GOLDEN_PLACEMENT='all gpu0' ... test_golden
 *
 * LLMFS_FORWARD_DUMP_PASSES=N: the first N chunks only. Each dump
 * synchronizes its backend and copies the rows out: a debugging aid,
 * off (one getenv a process) unless asked for.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "forward.h"

static FILE *forward_dump_file;
static unsigned long forward_dump_passes = (unsigned long)-1;
static unsigned long forward_dump_pass = (unsigned long)-1;
static pthread_once_t forward_dump_once = PTHREAD_ONCE_INIT;

static void forward_dump_open(void)
{
	const char *path = getenv("LLMFS_FORWARD_DUMP");
	const char *passes = getenv("LLMFS_FORWARD_DUMP_PASSES");

	if (!path || !*path)
		return;
	forward_dump_file = fopen(path, "a");
	if (!forward_dump_file)
		fprintf(stderr, "LLMFS_FORWARD_DUMP=%s: cannot open it\n",
			path);
	if (passes)
		forward_dump_passes = strtoul(passes, NULL, 10);
}

void forward_dump_next(void)
{
	pthread_once(&forward_dump_once, forward_dump_open);
	if (forward_dump_file)
		forward_dump_pass++;
}

static bool forward_dump_on(void)
{
	return forward_dump_file && forward_dump_pass < forward_dump_passes;
}

static void forward_dump_row(const char *op, uint32_t pos, int slot,
			     const float *v, uint32_t width)
{
	uint32_t i;

	fprintf(forward_dump_file, "%lu %s %u", forward_dump_pass, op, pos);
	if (slot >= 0)
		fprintf(forward_dump_file, ".%d", slot);
	for (i = 0; i < width; i++)
		fprintf(forward_dump_file, " %a", v[i]);
	fputc('\n', forward_dump_file);
}

void forward_dump(struct forward_pass *p, const char *op, const float *buf,
		  size_t ld, uint32_t width, const uint32_t *idx, uint32_t n,
		  uint32_t k)
{
	float *row;
	uint32_t j, r;

	if (!forward_dump_on() || forward_sync(p))
		return;
	row = malloc(width * sizeof(*row));
	if (!row)
		return;
	for (j = 0; j < n; j++) {
		r = idx ? idx[j] : j;
		p->be->iface->copy_out(p->be, row, buf + (size_t)r * ld,
				       width * sizeof(*row));
		if (forward_sync(p))
			break;
		forward_dump_row(op, p->h->rows[r / k].pos,
				 k > 1 ? (int)(r % k) : -1, row, width);
	}
	free(row);
	fflush(forward_dump_file);
}

void forward_dump_layer(struct forward_pass *p, uint32_t il, const char *what,
			const float *buf, size_t ld, uint32_t width,
			const uint32_t *idx, uint32_t n, uint32_t k)
{
	char op[64];

	if (!forward_dump_on())
		return;
	snprintf(op, sizeof(op), "blk.%u.%s", il, what);
	forward_dump(p, op, buf, ld, width, idx, n, k);
}

void forward_dump_logits(struct forward_pass *p, uint32_t width,
			 const uint32_t *idx, uint32_t n)
{
	uint32_t j;

	if (!forward_dump_on())
		return;
	for (j = 0; j < n; j++)
		forward_dump_row("logits", p->h->rows[idx[j]].pos, -1,
				 p->h->rows[idx[j]].logits, width);
	fflush(forward_dump_file);
}
