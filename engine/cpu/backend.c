// SPDX-License-Identifier: MIT
/*
 * The CPU backend (engine/backend.h): host memory, ops.c's ops and
 * attention.c's flash attention, big jobs split over the backend's
 * thread pool. Here: the table, memory, the matmuls; the row ops are
 * rows.c's, attention's planning attention_batch.c's.
 *
 * A matmul runs the GEMM of gemm_run.h where it may, else ops.c's exact
 * paths; several matmuls of one token (Q, K and V; up and gate) run as
 * one pool run (matvec_multi): a barrier per matmul is a good part of a
 * small model's token.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../quant/quant.h"
#include "backend_internal.h"
#include "cpu.h"
#include "cpu_backend.h"
#include "gemm.h"
#include "gemm_run.h"
#include "isa.h"
#include "ops.h"

/* weights of one matvec_multi */
#define CPU_MV_MAX 8

/* One product of matvec_multi: y = w . act (act in w's vec_dot type). */
struct cpu_mv {
	float *y;
	const struct engine_tensor *w;
	const void *act;
};

/* ---- memory ------------------------------------------------------------ */

static void cpu_destroy(struct engine_backend *be)
{
	struct cpu_backend *cb = cpu_state(be);

	cpu_threadpool_free(cb->pool);
	free(cb->ys);
	free(cb->acts);
	free(cb->att_work);
	free(cb);
	free(be);
}

static void *cpu_alloc(struct engine_backend *be, size_t bytes)
{
	void *p = NULL;

	if (posix_memalign(&p, 64, bytes ? bytes : 1))
		return NULL;
	return p;
}

static void cpu_free(struct engine_backend *be, void *p)
{
	free(p);
}

static void cpu_copy(struct engine_backend *be, void *dst, const void *src,
		     size_t bytes)
{
	memcpy(dst, src, bytes);
}

/* every op ran on the caller's thread, to its end, and cannot fail */
static int cpu_synchronize(struct engine_backend *be, struct err *err)
{
	return 0;
}

/*
 * The pointer arrays of a matmul (up to a MoE's rows times experts per
 * row) and attention's work memory, for batches of up to cap rows.
 */
static int cpu_reserve(struct engine_backend *be,
		       const struct engine_hparams *hp, uint32_t cap,
		       struct err *err)
{
	struct cpu_backend *cb = cpu_state(be);
	const size_t att = cpu_attention_work_bytes(be, hp, cap);
	const uint32_t ptrs = cap * (hp->n_expert_used ? hp->n_expert_used : 1);
	void *p;

	if (ptrs > cb->ptr_cap) {
		p = realloc(cb->ys, ptrs * sizeof(*cb->ys));
		if (!p)
			goto out_oom;
		cb->ys = p;
		p = realloc(cb->acts, ptrs * sizeof(*cb->acts));
		if (!p)
			goto out_oom;
		cb->acts = p;
		cb->ptr_cap = ptrs;
	}
	if (att > cb->att_work_cap) {
		if (posix_memalign(&p, 64, att))
			goto out_oom;
		free(cb->att_work);
		cb->att_work = p;
		cb->att_work_cap = att;
	}
	if (cap > cb->cap)
		cb->cap = cap;
	return 0;

out_oom:
	return err_set(err, ENOMEM,
		       "out of memory for the CPU backend's work memory");
}

/* ---- capabilities ------------------------------------------------------ */

static bool cpu_supports(const struct engine_backend *be, enum engine_op op,
			 uint32_t type)
{
	const struct quant_type_traits *t = quant_traits(type);

	switch (op) {
	case ENGINE_OP_GET_ROWS: return t->to_float != NULL;
	case ENGINE_OP_MATMUL: return t->weight;
	case ENGINE_OP_CONVERT: return t->from_float != NULL;
	case ENGINE_OP_ATTENTION: return t->kv;
	default: return false;
	}
}

static uint32_t cpu_vec_dot_type(const struct engine_backend *be, uint32_t type)
{
	return quant_vec_dot_type(type);
}

/* The panels of gemm.h, where the matrix allows them. */
int cpu_backend_pack(struct engine_backend *be, const struct engine_tensor *w)
{
	return cpu_gemm_packable(w) ? cpu_gemm_pack(cpu_pool(be), w) : 0;
}

_Static_assert(CPU_BACKEND_LAYOUT == CPU_LAYOUT_PANELS,
	       "the registry's number for the panels");

void cpu_backend_packed_read(const struct io_gguf_tensor *t, const void *data,
			     uint64_t off, size_t size, void *buf)
{
	cpu_gemm_packed_read(t, data, off, size, buf);
}

/* ---- matmuls ----------------------------------------------------------- */

/* ys[t] = w (of expert e) . acts[t] for t < n */
static void cpu_matmul_ptrs(struct engine_backend *be, float *const *ys,
			    const struct engine_tensor *w, int64_t e,
			    uint32_t n, const void *const *acts)
{
	/* the GEMM where it may run (gemm_run.h), else the exact paths */
	if (cpu_gemm_matmul(cpu_pool(be), ys, w, e, n, acts, be->batch_exact) ==
	    0)
		return;
	ops_matmul(cpu_pool(be), ys, w, e, n, acts);
}

/* One matmul of a batch, its rows as the kernels take them. */
static void cpu_matmul_one(struct engine_backend *be,
			   const struct engine_matmul *mm)
{
	struct cpu_backend *cb = cpu_state(be);
	const uint8_t *act = mm->act;
	uint32_t j;

	if (!mm->n)
		return;
	for (j = 0; j < mm->n; j++) {
		cb->acts[j] = act + (size_t)(mm->act_idx ? mm->act_idx[j] : j) *
					    mm->act_ld;
		cb->ys[j] = mm->ys ? mm->ys[j] :
				     mm->y + (size_t)(mm->y_idx ? mm->y_idx[j] :
								  j) *
						     mm->y_ld;
	}
	cpu_matmul_ptrs(be, cb->ys, mm->w, mm->expert, mm->n, cb->acts);
}

struct cpu_mv_job {
	const struct cpu_mv *mv;
	uint32_t n;
	uint64_t bytes; /* of all the rows */
	/* mv[k]'s activation packed for its packed matrix, or NULL */
	const uint8_t *const *packed_act;
};

/*
 * The first row of w whose bytes start at or after at (w's rows at base);
 * of a packed w, the first whole panel's.
 */
static int64_t cpu_mv_row(const struct engine_tensor *w, uint64_t base,
			  uint64_t at)
{
	const uint64_t unit = w->place->layout ? CPU_GEMM_ROWS * w->row_bytes :
						 w->row_bytes;
	int64_t r;

	if (at <= base)
		return 0;
	r = (int64_t)((at - base + unit - 1) / unit * (unit / w->row_bytes));
	return r < w->info->ne[1] ? r : w->info->ne[1];
}

/* The rows of all the weights, split over the threads by their bytes. */
static void cpu_mv_part(void *arg, uint32_t thread_index, uint32_t thread_count)
{
	const struct cpu_mv_job *j = arg;
	const uint64_t b0 = j->bytes * thread_index / thread_count;
	const uint64_t b1 = j->bytes * (thread_index + 1) / thread_count;
	uint64_t base = 0;
	uint32_t k;

	for (k = 0; k < j->n; k++) {
		const struct cpu_mv *mv = &j->mv[k];
		int64_t r0 = cpu_mv_row(mv->w, base, b0);
		int64_t r1 = cpu_mv_row(mv->w, base, b1);

		if (r0 < r1 && j->packed_act && j->packed_act[k])
			cpu_gemm_packed_rows(mv->w, j->packed_act[k], r0, r1,
					     mv->y);
		else if (r0 < r1)
			ops_matvec_rows(mv->y, mv->w, 0, mv->act, r0, r1);
		base += (uint64_t)mv->w->info->ne[1] * mv->w->row_bytes;
	}
}

static void cpu_matvec_multi(struct engine_backend *be, const struct cpu_mv *mv,
			     uint32_t n)
{
	const uint8_t *packed_act[CPU_MV_MAX] = { NULL };
	struct cpu_mv_job job = { mv, n, 0, NULL };
	size_t need = 0, at = 0;
	uint8_t *scratch;
	uint32_t k;

	for (k = 0; k < n; k++) {
		job.bytes += (uint64_t)mv[k].w->info->ne[1] *
			     mv[k].w->row_bytes;
		if (mv[k].w->place->layout)
			need += cpu_gemm_act_bytes(mv[k].w);
	}
	/*
	 * Packed matrices take their activation in the panel kernels' form,
	 * made once here; without the scratch, ops_matvec_rows unpacks.
	 */
	if (need && n <= CPU_MV_MAX &&
	    (scratch = cpu_threadpool_scratch(cpu_pool(be), need))) {
		for (k = 0; k < n; k++) {
			if (!mv[k].w->place->layout)
				continue;
			cpu_gemm_act_pack(mv[k].w, mv[k].act, scratch + at);
			packed_act[k] = scratch + at;
			at += cpu_gemm_act_bytes(mv[k].w);
		}
		job.packed_act = packed_act;
	}
	if (cpu_threadpool_size(cpu_pool(be)) > 1)
		cpu_threadpool_run(cpu_pool(be), cpu_mv_part, &job);
	else
		cpu_mv_part(&job, 0, 1);
}

/*
 * Several matmuls over one batch: of one token each, one pool run for
 * all their rows (every row's dot the one a matmul gives it, so the bits
 * are those of n matmuls); otherwise one after the other.
 */
static void cpu_matmul(struct engine_backend *be,
		       const struct engine_matmul *mm, uint32_t count)
{
	struct cpu_mv mv[CPU_MV_MAX];
	uint32_t k;

	for (k = 0; k < count && count <= CPU_MV_MAX; k++) {
		const struct engine_matmul *m = &mm[k];

		if (m->n != 1 || m->expert != 0 || m->w->info->ne[2] > 1)
			break;
		mv[k].w = m->w;
		mv[k].act = (const uint8_t *)m->act +
			    (size_t)(m->act_idx ? m->act_idx[0] : 0) *
				    m->act_ld;
		mv[k].y = m->ys ? m->ys[0] :
				  m->y + (size_t)(m->y_idx ? m->y_idx[0] : 0) *
						  m->y_ld;
	}
	if (count > 1 && k == count) {
		cpu_matvec_multi(be, mv, count);
		return;
	}
	for (k = 0; k < count; k++)
		cpu_matmul_one(be, &mm[k]);
}

/*
 * Each expert's rows in one matmul: for expert e, the (row, slot) pairs
 * that chose it in the order of the rows and then of their slots.
 */
static void cpu_matmul_id(struct engine_backend *be,
			  const struct engine_matmul_id *m)
{
	struct cpu_backend *cb = cpu_state(be);
	const uint8_t *act = m->act;
	const int64_t n_expert = m->w->info->ne[2];
	uint32_t j, i, cnt;
	int64_t e;

	for (e = 0; e < n_expert; e++) {
		for (cnt = 0, j = 0; j < m->n; j++) {
			const size_t b = m->idx ? m->idx[j] : j;

			for (i = 0; i < m->k; i++) {
				const size_t slot = b * m->k + i;

				if (m->sel[slot] != (uint32_t)e)
					continue;
				cb->acts[cnt] = act +
						(m->act_per_slot ? slot : b) *
							m->act_ld;
				cb->ys[cnt] = m->y + slot * m->y_ld;
				cnt++;
			}
		}
		if (cnt)
			cpu_matmul_ptrs(be, cb->ys, m->w, e, cnt, cb->acts);
	}
}

/* ---- the table ---------------------------------------------------------- */

static const struct engine_backend_i cpu_backend_i = {
	.name = "cpu",
	.destroy = cpu_destroy,
	.alloc = cpu_alloc,
	.free = cpu_free,
	.copy_in = cpu_copy,
	.copy_out = cpu_copy,
	.copy = cpu_copy,
	.synchronize = cpu_synchronize,
	.reserve = cpu_reserve,
	.supports = cpu_supports,
	.vec_dot_type = cpu_vec_dot_type,
	.get_rows = cpu_get_rows,
	.rope_cache = cpu_rope_cache,
	.rms_norm_rows = cpu_rms_norm_rows,
	.add_rows = cpu_add_rows,
	.convert_rows = cpu_convert_rows,
	.rope_rows = cpu_rope_rows,
	.swiglu_rows = cpu_swiglu_rows,
	.kv_store_rows = cpu_kv_store_rows,
	.matmul = cpu_matmul,
	.matmul_id = cpu_matmul_id,
	.moe_route_rows = cpu_moe_route_rows,
	.moe_combine_rows = cpu_moe_combine_rows,
	.attention = cpu_attention,
};

int cpu_backend_new(struct engine_backend **out, uint32_t threads,
		    struct err *err)
{
	struct engine_backend *be = calloc(1, sizeof(*be));
	struct cpu_backend *cb = calloc(1, sizeof(*cb));
	long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES);
	long page = sysconf(_SC_PAGESIZE);
	int ret;

	*out = NULL;
	if (!be || !cb) {
		ret = err_set(err, ENOMEM, "out of memory");
		goto out_free;
	}
	/* LLMFS_CPU naming a level this CPU lacks: refuse, run nothing */
	if ((ret = cpu_isa_check(err)))
		goto out_free;
	if (threads == 0)
		threads = cpu_threadpool_default_threads();
	if ((ret = cpu_threadpool_new(&cb->pool, threads, err)))
		goto out_free;
	be->iface = &cpu_backend_i;
	be->ctx = cb;
	be->threads = cpu_threadpool_size(cb->pool);
	be->is_host = true;
	be->dev.kind = IO_DEVICE_CPU;
	be->dev.index = -1;
	strcpy(be->dev.name, "cpu");
	if (pages > 0 && page > 0)
		be->dev.total_bytes = (uint64_t)pages * (uint64_t)page;
	if (avail > 0 && page > 0)
		be->dev.free_bytes = (uint64_t)avail * (uint64_t)page;
	*out = be;
	return 0;

out_free:
	free(cb);
	free(be);
	return ret;
}
