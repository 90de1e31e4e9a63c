// SPDX-License-Identifier: MIT
/*
 * The driver of the rows-in-lanes GEMM (gemm_run.h). Every token is
 * packed once (act_pack) into the pool's scratch; the rows are split over
 * the threads in whole panels (each thread a run of them, then what is
 * left of the others': gemm_part); each thread makes a panel of 16 rows
 * in its own scratch and runs it over all the tokens, so each weight byte
 * is read from memory and rearranged once per matmul and each panel
 * register serves a tile of tokens.
 *
 * A decode batch (a few tokens) spends little time on a panel, so the
 * rows must still stream at memory speed, 16 streams at once, which the
 * hardware prefetchers alone do not keep busy (and the weights are 4 KiB
 * pages until khugepaged merges them, which they do not cross). So each
 * type's panel function asks for its rows ahead of itself and for the
 * next panel's, and its run for the panel after next (gemm.h): the driver
 * only walks the panels. Measured (one thread, 4 tokens, Q8_0, rows from
 * memory): no software prefetch 5.1 GB/s of weights; the whole next
 * panel at once 6.2 (a burst of 272 prefetches stalls like loads); the
 * next rows' heads plus each row's 256 bytes ahead 12.5-13.8, the tile
 * kernels' 10.1-10.5. The run's prefetch (cold 151,936 x 1024 matrix, 2
 * threads, 4 tokens): Q6_K 7.4 -> 5.6 ms, Q4_K 4.1-5.0 -> 3.8 ms.
 *
 * A matrix packed at load (gemm.h's cpu_gemm_packed; io_placement.layout)
 * has its panels already: each is its 16 rows' bytes, run where they lie,
 * for one token as for many (one token in the one-token path's bits), and
 * nothing but these functions reads its bytes (cpu_gemm_unpack_row and
 * cpu_gemm_packed_read give back the file's).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "gemm.h"
#include "gemm_run.h"
#include "isa.h"
#include "../quant/quant.h"

/* elements x tokens of a matmul worth splitting over the pool (ops.c's) */
#define GEMM_PARALLEL_MIN (1 << 16)
/* panels a thread takes of its own at a time (gemm_take) */
#define GEMM_TAKE 4

struct gemm_job {
	const struct cpu_gemm_kernels *k;
	/* a packed matrix's run (run or run_exact), or NULL: make panels */
	void (*packed_run)(int64_t n, const void *panel, const void *acts,
			   int nt, float *const *y, int64_t row0,
			   const void *ahead, size_t ahead_bytes);
	float *const *ys;
	const uint8_t *base; /* expert e's first row */
	size_t row_bytes;
	int64_t n, rows;
	uint32_t n_tok;
	const uint8_t *acts; /* n_tok packed tokens, act_bytes apart */
	uint8_t *panels;     /* one panel per thread, panel_size apart */
	size_t panel_size;
	struct gemm_part_left *left; /* one per thread */
};

static bool gemm_packed(const struct engine_tensor *w)
{
	return w->place && w->place->layout == CPU_LAYOUT_PANELS;
}

/* the GEMM kernels of type at the CPU's level, or NULL */
static const struct cpu_gemm_kernels *gemm_kernels(uint32_t type)
{
	return type < IO_TYPE_COUNT ? cpu_isa()->type[type].gemm : NULL;
}

/* the packed kernels of w's type (only asked of a packed w) */
static const struct cpu_gemm_packed *gemm_packed_kernels(uint32_t type)
{
	return gemm_kernels(type)->packed;
}

bool cpu_gemm_able(const struct engine_tensor *w, uint32_t n_tok,
		   bool batch_exact)
{
	const struct cpu_gemm_kernels *k = gemm_kernels(w->info->type);

	if (gemm_packed(w))
		return n_tok >= 1;
	return k && k->run && n_tok >= k->min_tokens && n_tok >= 2 &&
	       (!batch_exact || (k->exact && w->llama_repacked));
}

/* Rows of panel p (the last may be short). */
static int gemm_panel_rows(const struct gemm_job *j, int64_t p)
{
	const int64_t left = j->rows - p * CPU_GEMM_ROWS;

	return left < CPU_GEMM_ROWS ? (int)left : CPU_GEMM_ROWS;
}

/*
 * The panels of thread thread_index not yet taken, [front, back) in one
 * word: the thread takes its own from the front, in order, and once they
 * are done the others' from their backs. A static half each left one
 * thread waiting for the other at the end of every matmul, for its memory
 * stalls or a preemption (through the mount, by FUSE and the readers):
 * the threads' waits were about 9% of a 4-sequence decode. One line each.
 */
struct gemm_part_left {
	_Atomic uint64_t range;
	char pad[64 - sizeof(uint64_t)];
};

static uint64_t gemm_range(uint32_t front, uint32_t back)
{
	return (uint64_t)back << 32 | front;
}

/*
 * Panels of l, [*first, *first + *count): up to GEMM_TAKE from the front
 * (the owner's, in order) or one from the back; false when none is left. The
 * owner takes GEMM_TAKE at a time: a locked compare-exchange after a
 * panel's stores waits for them to drain, and one per panel was 5% of a
 * 4-token decode.
 */
static bool gemm_take(struct gemm_part_left *l, bool front, int64_t *first,
		      int64_t *count)
{
	uint64_t v = atomic_load_explicit(&l->range, memory_order_relaxed), n;
	uint32_t f, b, c;

	do {
		f = (uint32_t)v;
		b = (uint32_t)(v >> 32);
		if (f >= b)
			return false;
		c = front && b - f > GEMM_TAKE ? GEMM_TAKE : front ? b - f : 1;
		n = front ? gemm_range(f + c, b) : gemm_range(f, b - 1);
	} while (!atomic_compare_exchange_weak_explicit(
		&l->range, &v, n, memory_order_relaxed, memory_order_relaxed));
	*first = front ? f : b - 1;
	*count = c;
	return true;
}

/* Panel p, made and run over every token; next: the one to prefetch, or -1 */
static void gemm_panel_run(const struct gemm_job *j, uint8_t *panel, int64_t p,
			   int64_t next)
{
	const int64_t r = p * CPU_GEMM_ROWS;
	const int nr = gemm_panel_rows(j, p);
	/*
	 * the panel after next, for run to prefetch (the panel function
	 * asks for the next one itself)
	 */
	const uint8_t *ahead = next >= 0 ?
				       j->base + (size_t)next * CPU_GEMM_ROWS *
							 j->row_bytes :
				       NULL;

	if (j->packed_run) {
		/* the panel is the rows; next's rows, to prefetch, too */
		j->packed_run(j->n, j->base + (size_t)r * j->row_bytes, j->acts,
			      (int)j->n_tok, j->ys, r, ahead,
			      ahead ? CPU_GEMM_ROWS * j->row_bytes : 0);
		return;
	}
	j->k->panel(j->n, j->base + (size_t)r * j->row_bytes, j->row_bytes, nr,
		    panel);
	j->k->run(j->n, panel, nr, j->acts, (int)j->n_tok, j->ys, r, ahead,
		  ahead ? (size_t)gemm_panel_rows(j, next) * j->row_bytes : 0);
}

/* The panels of thread thread_index, then what is left of the others'. */
static void gemm_part(void *arg, uint32_t thread_index, uint32_t thread_count)
{
	const struct gemm_job *j = arg;
	const int64_t np = (j->rows + CPU_GEMM_ROWS - 1) / CPU_GEMM_ROWS;
	const int64_t p1 = np * (thread_index + 1) / thread_count;
	uint8_t *panel = j->panels + j->panel_size * thread_index;
	int64_t p, first, count;
	uint32_t k;

	/*
	 * the panel run prefetches: after next where a panel is made (its
	 * panel function asks for the next one), the next one of a packed
	 * matrix, which nothing else asks for (llmfs-bench -s 4, Q4_K_M 0.6B
	 * shape: next 267-286 t/s, after next 236-259, three ahead 257-274)
	 */
	const int64_t ahead = j->packed_run ? 1 : 2;

	while (gemm_take(&j->left[thread_index], true, &first, &count))
		for (p = first; p < first + count; p++)
			gemm_panel_run(j, panel, p,
				       p + ahead < p1 ? p + ahead : -1);
	for (k = 1; k < thread_count; k++)
		while (gemm_take(&j->left[(thread_index + k) % thread_count],
				 false, &first, &count))
			gemm_panel_run(j, panel, first, -1);
}

int cpu_gemm_matmul(struct cpu_threadpool *pool, float *const *ys,
		    const struct engine_tensor *w, int64_t e, uint32_t n_tok,
		    const void *const *acts, bool batch_exact)
{
	const struct cpu_gemm_kernels *k = gemm_kernels(w->info->type);
	const int64_t n = w->info->ne[0], rows = w->info->ne[1];
	const uint32_t thread_count = cpu_threadpool_size(pool);
	struct gemm_job job = { .k = k,
				.ys = ys,
				.row_bytes = w->row_bytes,
				.n = n,
				.rows = rows,
				.n_tok = n_tok };
	const int64_t np = (rows + CPU_GEMM_ROWS - 1) / CPU_GEMM_ROWS;
	size_t ab;
	uint8_t *scratch;
	uint32_t t, parts;

	if (!cpu_gemm_able(w, n_tok, batch_exact))
		return -ENOTSUP;
	ab = k->act_bytes(n); /* 64-aligned (gemm.h) */
	if (gemm_packed(w))
		/*
		 * fewer tokens than the GEMM takes (one, or Q8_0's few) run
		 * in the one-token path's bits (gemm.h), as they would
		 * unpacked: packing changes no bit
		 */
		job.packed_run = batch_exact || n_tok < k->min_tokens ?
					 k->packed->run_exact :
					 k->packed->run;
	else
		/* a panel each thread makes */
		job.panel_size = cpu_align64(k->panel_bytes(n));
	scratch = cpu_threadpool_scratch(
		pool, ab * n_tok + job.panel_size * thread_count +
			      sizeof(*job.left) * thread_count);
	if (!scratch)
		return -ENOMEM;
	job.panels = scratch;
	job.acts = scratch + job.panel_size * thread_count;
	job.left = (struct gemm_part_left *)(scratch +
					     job.panel_size * thread_count +
					     ab * n_tok);
	job.base = engine_tensor_data(w) + (uint64_t)e * rows * w->row_bytes;
	parts = thread_count > 1 && n * rows * n_tok >= GEMM_PARALLEL_MIN ?
			thread_count :
			1;
	for (t = 0; t < parts; t++)
		atomic_init(&job.left[t].range,
			    gemm_range((uint32_t)(np * t / parts),
				       (uint32_t)(np * (t + 1) / parts)));
	for (t = 0; t < n_tok; t++)
		k->act_pack(n, acts[t],
			    scratch + job.panel_size * thread_count + ab * t);
	if (parts > 1)
		cpu_threadpool_run(pool, gemm_part, &job);
	else
		gemm_part(&job, 0, 1);
	return 0;
}

/* ---- packed matrices ---------------------------------------------------- */

bool cpu_gemm_packable(const struct engine_tensor *w)
{
	const struct cpu_gemm_kernels *k = gemm_kernels(w->info->type);

	return k && k->packed && w->place && w->place->data &&
	       w->place->layout == 0 &&
	       strncmp(w->place->device, "gpu", 3) != 0 &&
	       w->info->ne[1] % CPU_GEMM_ROWS == 0 &&
	       w->row_bytes <= CPU_PACKED_ROW_MAX &&
	       w->llama_repacked == k->packed->repacked_order;
}

struct gemm_pack_job {
	const struct cpu_gemm_packed *kp;
	int64_t n;
	size_t row_bytes, panel;
	uint64_t panels;
	uint8_t *data, *copies; /* a panel's copy per thread */
};

/* The share of thread thread_index of the panels, each through its own copy. */
static void gemm_pack_part(void *arg, uint32_t thread_index,
			   uint32_t thread_count)
{
	const struct gemm_pack_job *j = arg;
	uint8_t *rows = j->copies + cpu_align64(j->panel) * thread_index;
	uint64_t p;

	for (p = j->panels * thread_index / thread_count;
	     p < j->panels * (thread_index + 1) / thread_count; p++) {
		memcpy(rows, j->data + p * j->panel, j->panel);
		j->kp->pack(j->n, rows, j->row_bytes, j->data + p * j->panel);
	}
}

int cpu_gemm_pack(struct cpu_threadpool *pool, const struct engine_tensor *w)
{
	struct gemm_pack_job j = {
		.kp = gemm_packed_kernels(w->info->type),
		.n = w->info->ne[0],
		.row_bytes = w->row_bytes,
		.panel = CPU_GEMM_ROWS * w->row_bytes,
		.data = w->place->data,
	};
	const uint32_t thread_count = cpu_threadpool_size(pool);

	/* one panel at a time through a copy: the panel replaces its rows */
	j.panels = w->place->bytes / j.panel;
	j.copies = cpu_threadpool_scratch(pool,
					  cpu_align64(j.panel) * thread_count);
	if (!j.copies)
		return -ENOMEM;
	if (thread_count > 1 && j.panels >= thread_count)
		cpu_threadpool_run(pool, gemm_pack_part, &j);
	else
		gemm_pack_part(&j, 0, 1);
	w->place->layout = CPU_LAYOUT_PANELS;
	return 0;
}

void cpu_gemm_unpack_row(const struct engine_tensor *w, int64_t e, int64_t r,
			 void *row)
{
	const int64_t rr = e * w->info->ne[1] + r; /* rows are whole panels */

	gemm_packed_kernels(w->info->type)
		->unpack_row(w->info->ne[0],
			     engine_tensor_data(w) +
				     (uint64_t)(rr / CPU_GEMM_ROWS) *
					     CPU_GEMM_ROWS * w->row_bytes,
			     (int)(rr % CPU_GEMM_ROWS), row);
}

void cpu_gemm_packed_read(const struct io_gguf_tensor *t, const void *data,
			  uint64_t off, size_t size, void *buf)
{
	const struct cpu_gemm_packed *kp = gemm_packed_kernels(t->type);
	uint8_t row[CPU_PACKED_ROW_MAX], *out = buf;
	uint64_t row_bytes, r, at;
	size_t k;

	if (io_type_row_bytes(t->type, t->ne[0], &row_bytes))
		return; /* packed only after the same call succeeded */
	while (size) {
		r = off / row_bytes;
		at = off % row_bytes;
		k = row_bytes - at < size ? (size_t)(row_bytes - at) : size;
		kp->unpack_row(t->ne[0],
			       (const uint8_t *)data + r / CPU_GEMM_ROWS *
							       CPU_GEMM_ROWS *
							       row_bytes,
			       (int)(r % CPU_GEMM_ROWS), row);
		memcpy(out, row + at, k);
		out += k;
		off += k;
		size -= k;
	}
}

size_t cpu_gemm_act_bytes(const struct engine_tensor *w)
{
	return gemm_kernels(w->info->type)->act_bytes(w->info->ne[0]);
}

void cpu_gemm_act_pack(const struct engine_tensor *w, const void *act,
		       void *dst)
{
	gemm_kernels(w->info->type)->act_pack(w->info->ne[0], act, dst);
}

void cpu_gemm_packed_rows(const struct engine_tensor *w, const void *act,
			  int64_t r0, int64_t r1, float *y)
{
	const struct cpu_gemm_packed *kp = gemm_packed_kernels(w->info->type);
	const size_t panel = CPU_GEMM_ROWS * w->row_bytes;
	const uint8_t *base = engine_tensor_data(w);
	float *const ys[1] = { y };
	int64_t r;

	for (r = r0; r < r1; r += CPU_GEMM_ROWS) {
		const uint8_t *p = base + (uint64_t)(r / CPU_GEMM_ROWS) * panel;
		/* the next panel, as gemm_part's packed runs (no prefetch: -35%) */
		const bool ahead = r + CPU_GEMM_ROWS < r1;

		kp->run_exact(w->info->ne[0], p, act, 1, ys, r,
			      ahead ? p + panel : NULL, ahead ? panel : 0);
	}
}
