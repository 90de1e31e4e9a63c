// SPDX-License-Identifier: MIT
/*
 * The CPU backend's attention of a batch (backend.h's attention op),
 * planned as ggml plans flash_attn_ext for llama.cpp's one-token path:
 * every (row, head) is a task. A row over more than ENGINE_ATT_CHUNK positions
 * is walked in fixed chunks whose partials are merged in order
 * (attention.h): each chunk a task of its own while the partials' memory
 * lasts, else one task walks and merges a head's chunks in turn. Either
 * way, and over any number of threads, the same bits. Unless the context asks
 * for the one-token bits (batch_exact), the rows of a prompt (two or more
 * rows of one sequence) take the tiled path instead (attention_tiled.h):
 * tiles of (query, head) rows of one KV head, handed out to the threads
 * as they come free. One head's arithmetic is attention.c's.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../kv.h"
#include "../quant/quant.h"
#include "attention.h"
#include "attention_tiled.h"
#include "backend_internal.h"
#include "cpu.h"

/* (row, head, position, dim) products worth splitting attention for */
#define CPU_ATT_PARALLEL_MIN (1 << 16)
/*
 * (row, query head) pairs of one sequence in a batch from which its
 * attention is tiled: a tile computes 16 of them for the price of one
 * (the lanes), so 4 already win (Documentation/engine.md, Speed).
 */
#define CPU_ATT_TILE_MIN 4

/* A tile: n_q rows of one sequence from row j0 (of idx), KV head kvh. */
struct cpu_att_unit {
	uint32_t j0, n_q, kvh;
};

/*
 * The work memory: per thread, att_begin's and att_tile_begin's scratch
 * and one chunk's result; the partials of the split rows' chunks; the
 * task plan (first task, chunks, first partial) per row; the tiles.
 */
struct cpu_att_work {
	uint8_t *tmp; /* [threads][tmp_bytes] */
	size_t tmp_bytes;
	uint8_t *tile; /* [threads][tile_bytes] */
	size_t tile_bytes;
	/* [n_partials][2 + head_dim_v]: split row j's chunk c of head h at
	 * poff[j] + h * nc[j] + c */
	float *partials;
	size_t n_partials;
	uint32_t *off; /* [cap + 1] first task of row j */
	uint32_t *nc;  /* [cap] chunk tasks of row j's heads (1: not split) */
	size_t *poff;  /* [cap] row j's first partial */
	struct cpu_att_unit *units; /* [cap * n_head_kv] */
	uint32_t n_units;
};

static size_t cpu_att_tmp_bytes(const struct engine_hparams *hp)
{
	const struct att_shape sh = { IO_TYPE_F32, IO_TYPE_F32, hp->head_dim,
				      hp->head_dim_v, hp->kq_scale };

	return cpu_align64(att_scratch_bytes(&sh)) +
	       cpu_align64((size_t)hp->head_dim_v * sizeof(float));
}

/*
 * Carve the work memory for cap rows at base, the partials in what is
 * left of its bytes; or only count it (base NULL), with as many partials
 * as llama.cpp's split kept (a chunk per thread and head of each row):
 * a batch of fewer rows than reserved has room for deeper rows' chunks.
 */
static size_t cpu_att_layout(const struct engine_backend *be,
			     const struct engine_hparams *hp, uint32_t cap,
			     uint8_t *base, size_t bytes,
			     struct cpu_att_work *w)
{
	const size_t part_bytes = (2 + hp->head_dim_v) * sizeof(float);
	const size_t threads = cpu_threadpool_size(cpu_pool(be));
	const struct att_shape sh = { IO_TYPE_F32, IO_TYPE_F32, hp->head_dim,
				      hp->head_dim_v, hp->kq_scale };
	size_t at = 0;

	w->tmp_bytes = cpu_att_tmp_bytes(hp);
	w->tmp = base + at;
	at += cpu_align64(threads * w->tmp_bytes);
	w->tile_bytes = cpu_align64(att_tile_scratch_bytes(&sh));
	w->tile = base + at;
	at += cpu_align64(threads * w->tile_bytes);
	w->off = (uint32_t *)(base + at);
	at += cpu_align64(((size_t)cap + 1) * sizeof(uint32_t));
	w->nc = (uint32_t *)(base + at);
	at += cpu_align64((size_t)cap * sizeof(uint32_t));
	w->poff = (size_t *)(base + at);
	at += cpu_align64((size_t)cap * sizeof(size_t));
	w->units = (struct cpu_att_unit *)(base + at);
	at += cpu_align64((size_t)cap * hp->n_head_kv * sizeof(*w->units));
	w->n_units = 0;
	w->partials = (float *)(base + at);
	w->n_partials = base ? (bytes > at ? (bytes - at) / part_bytes : 0) :
			       (size_t)cap * hp->n_head * threads;
	return at + w->n_partials * part_bytes;
}

size_t cpu_attention_work_bytes(const struct engine_backend *be,
				const struct engine_hparams *hp, uint32_t cap)
{
	struct cpu_att_work w;

	return cpu_att_layout(be, hp, cap, NULL, 0, &w);
}

struct cpu_att_job {
	struct engine_backend *be;
	const struct engine_att_batch *b;
	struct cpu_att_work w;
	atomic_uint next_unit; /* the next tile a free thread takes */
};

/* Positions [c0, c1) of KV head kvh, one run of the cache at a time. */
static void cpu_att_range(struct att_state *st, const struct engine_seq *seq,
			  uint32_t il, uint32_t kvh, uint32_t c0, uint32_t c1)
{
	struct engine_kv_view v;
	uint32_t c;

	for (c = c0; c < c1; c += v.n) {
		engine_kv_view(seq, il, c, c1, &v);
		att_run(st, v.k + kvh * v.k_head, v.k_stride,
			v.v + kvh * v.v_head, v.v_stride, v.n);
	}
}

/*
 * One attention task: head h of row j, whole (nc 1: one chunk, or its
 * chunks in turn, each merged as it comes) or chunk c of nc into its
 * partial.
 */
static void cpu_att_task(const struct cpu_att_job *job, uint32_t thread_index,
			 uint32_t j, uint32_t h, uint32_t c, uint32_t nc)
{
	const struct engine_att_batch *ab = job->b;
	const struct engine_hparams *hp = ab->hp;
	const uint32_t b = ab->idx[j], pos = ab->pos[b];
	const struct engine_seq *seq = ab->seq[b];
	struct att_shape sh = { 0, 0, hp->head_dim, hp->head_dim_v,
				hp->kq_scale };
	const uint32_t kvh = h / (hp->n_head / hp->n_head_kv);
	const uint32_t chunks = att_chunks(pos + 1);
	const float *q = ab->q + (size_t)b * ab->q_ld +
			 (size_t)h * hp->head_dim;
	float *out = ab->out + (size_t)b * ab->out_ld +
		     (size_t)h * hp->head_dim_v;
	uint8_t *tmp = job->w.tmp + (size_t)thread_index * job->w.tmp_bytes;
	float *vkq = (float *)(tmp + job->w.tmp_bytes -
			       cpu_align64(hp->head_dim_v * sizeof(float)));
	float M = -INFINITY, S = 0.0f;
	struct att_state st;
	uint32_t k, c1;

	engine_seq_types(seq, &sh.type_k, &sh.type_v);
	if (chunks == 1) {
		att_begin(&st, &sh, q, tmp);
		cpu_att_range(&st, seq, ab->il, kvh, 0, pos + 1);
		att_end(&st, out);
	} else if (nc == 1) {
		memset(out, 0, hp->head_dim_v * sizeof(*out));
		for (k = 0; k < chunks; k++) {
			c1 = (k + 1) * ENGINE_ATT_CHUNK < pos + 1 ?
				     (k + 1) * ENGINE_ATT_CHUNK :
				     pos + 1;
			att_begin(&st, &sh, q, tmp);
			cpu_att_range(&st, seq, ab->il, kvh,
				      k * ENGINE_ATT_CHUNK, c1);
			att_vkq(&st, vkq);
			engine_att_merge_step(out, &M, &S, st.M, st.S, vkq,
					      hp->head_dim_v);
		}
		att_merge_end(out, S, hp->head_dim_v);
	} else {
		float *part = job->w.partials +
			      ((size_t)job->w.poff[j] + (size_t)h * nc + c) *
				      (2 + hp->head_dim_v);

		c1 = (c + 1) * ENGINE_ATT_CHUNK < pos + 1 ?
			     (c + 1) * ENGINE_ATT_CHUNK :
			     pos + 1;
		att_begin(&st, &sh, q, tmp);
		cpu_att_range(&st, seq, ab->il, kvh, c * ENGINE_ATT_CHUNK, c1);
		part[0] = st.M;
		part[1] = st.S;
		att_vkq(&st, part + 2);
	}
}

/*
 * A tile: the unit's rows, the KV head's query heads, every position up
 * to the last row's, one run of the cache at a time.
 */
static void cpu_att_tile(const struct cpu_att_job *job, uint32_t thread_index,
			 const struct cpu_att_unit *u)
{
	const struct engine_att_batch *ab = job->b;
	const struct engine_hparams *hp = ab->hp;
	const uint32_t group = hp->n_head / hp->n_head_kv;
	const struct engine_seq *seq = ab->seq[ab->idx[u->j0]];
	struct att_shape sh = { 0, 0, hp->head_dim, hp->head_dim_v,
				hp->kq_scale };
	const float *qs[ATT_TILE_ROWS];
	float *outs[ATT_TILE_ROWS];
	uint32_t pos[ATT_TILE_ROWS], end = 0, c, i;
	struct engine_kv_view v;
	struct att_tile t;

	engine_seq_types(seq, &sh.type_k, &sh.type_v);
	for (i = 0; i < u->n_q; i++) {
		const uint32_t b = ab->idx[u->j0 + i];

		qs[i] = ab->q + (size_t)b * ab->q_ld +
			(size_t)u->kvh * group * hp->head_dim;
		outs[i] = ab->out + (size_t)b * ab->out_ld +
			  (size_t)u->kvh * group * hp->head_dim_v;
		pos[i] = ab->pos[b];
		end = pos[i] + 1 > end ? pos[i] + 1 : end;
	}
	att_tile_begin(&t, &sh, u->n_q, group, qs, pos,
		       job->w.tile + (size_t)thread_index * job->w.tile_bytes);
	for (c = 0; c < end; c += v.n) {
		engine_kv_view(seq, ab->il, c, end, &v);
		att_tile_run(&t, c, v.k + u->kvh * v.k_head, v.k_stride,
			     v.v + u->kvh * v.v_head, v.v_stride, v.n);
	}
	att_tile_end(&t, outs, group);
}

/*
 * One thread's share of the tasks (row, head, KV chunk), then tiles as
 * long as some are left. A row's tasks run KV head by KV head, and within
 * one chunk by chunk, the query heads that share it one after the other:
 * the second reads the chunk's K and V rows (128 KiB at 256 positions of
 * a 128-wide head) from the cache the first brought them to, where head
 * by head it read the KV head's whole range again (512 KiB at depth 1024,
 * a core's L2 here). Each task computes the same bits in any order.
 */
static void cpu_att_part(void *arg, uint32_t thread_index,
			 uint32_t thread_count)
{
	struct cpu_att_job *job = arg;
	const struct cpu_att_work *w = &job->w;
	const struct engine_hparams *hp = job->b->hp;
	const uint32_t group = hp->n_head % hp->n_head_kv ?
				       1 :
				       hp->n_head / hp->n_head_kv;
	const uint32_t n = job->b->n;
	const uint64_t total = w->off[n];
	uint32_t t = (uint32_t)(total * thread_index / thread_count);
	uint32_t t1 = (uint32_t)(total * (thread_index + 1) / thread_count),
		 j = 0;

	while (j < n && w->off[j + 1] <= t)
		j++;
	for (; t < t1; t++) {
		uint32_t nc, k;

		while (w->off[j + 1] <= t)
			j++;
		nc = w->nc[j];
		k = t - w->off[j];
		/* k = (group of query heads, chunk, head in the group) */
		cpu_att_task(job, thread_index, j,
			     k / (nc * group) * group + k % group,
			     k / group % nc, nc);
	}
	for (;;) {
		uint32_t u = atomic_fetch_add(&job->next_unit, 1);

		if (u >= w->n_units)
			break;
		cpu_att_tile(job, thread_index, &w->units[u]);
	}
}

/*
 * Whether the rows j0..j1 of one sequence take the tiled path: a prompt
 * (two rows or more, and CPU_ATT_TILE_MIN (row, head) pairs per KV head
 * or more; one row, as in decoding, keeps the one-token path), the fast
 * order allowed, a dense model, a shape and cache types it computes.
 * Not a mixture of experts: there
 * the tile's F32 sums (more exact than the one-token path's F16 ones)
 * move router logits across near-ties and flip experts, as llama.cpp's
 * own multi-token path does (../shared/README.md section 4): on
 * tiny-qwen3moe-bpe16k-q4km one logit moved by 4.1e-2 relative, past the
 * model's tolerance of 3e-2.
 */
static bool cpu_att_tiled(const struct engine_backend *be,
			  const struct engine_att_batch *ab, uint32_t j0,
			  uint32_t j1)
{
	const struct engine_hparams *hp = ab->hp;
	struct att_shape sh = { 0, 0, hp->head_dim, hp->head_dim_v,
				hp->kq_scale };

	if (be->batch_exact || hp->n_expert || hp->n_head % hp->n_head_kv ||
	    hp->n_head / hp->n_head_kv > ATT_TILE_ROWS || j1 - j0 < 2 ||
	    (j1 - j0) * (hp->n_head / hp->n_head_kv) < CPU_ATT_TILE_MIN)
		return false;
	engine_seq_types(ab->seq[ab->idx[j0]], &sh.type_k, &sh.type_v);
	return att_tile_usable(&sh);
}

/*
 * The tiles of rows j0..j1 of one sequence: ATT_TILE_ROWS / group
 * queries each, per KV head; the last rows (the latest positions, the
 * longest) first, so that the short tiles fill in at the end.
 */
static void cpu_att_plan_tiles(struct cpu_att_work *w,
			       const struct engine_hparams *hp, uint32_t j0,
			       uint32_t j1)
{
	const uint32_t per = ATT_TILE_ROWS / (hp->n_head / hp->n_head_kv);
	uint32_t n_tiles = (j1 - j0 + per - 1) / per, t, kvh;

	for (t = n_tiles; t-- > 0;) {
		const uint32_t a = j0 + t * per;
		const uint32_t n_q = j1 - a < per ? j1 - a : per;

		for (kvh = 0; kvh < hp->n_head_kv; kvh++)
			w->units[w->n_units++] = (struct cpu_att_unit){ a, n_q,
									kvh };
	}
}

/* The split rows: their heads' partials merged into out. */
static void cpu_att_merge(const struct cpu_att_job *job)
{
	const struct engine_att_batch *ab = job->b;
	const struct engine_hparams *hp = ab->hp;
	const size_t stride = 2 + hp->head_dim_v;
	uint32_t j, h;

	for (j = 0; j < ab->n; j++) {
		uint32_t b = ab->idx[j], nc = job->w.nc[j];

		if (nc == 1)
			continue;
		for (h = 0; h < hp->n_head; h++)
			att_merge(ab->out + (size_t)b * ab->out_ld +
					  (size_t)h * hp->head_dim_v,
				  job->w.partials + ((size_t)job->w.poff[j] +
						     (size_t)h * nc) *
							    stride,
				  stride, nc, hp->head_dim_v);
	}
}

void cpu_attention(struct engine_backend *be, const struct engine_att_batch *ab)
{
	const struct engine_hparams *hp = ab->hp;
	struct cpu_att_job job = { be, ab, { 0 }, 0 };
	const bool split = cpu_threads(be) > 1;
	size_t partials = 0;
	uint64_t work = 0;
	uint32_t j, j1;

	cpu_att_layout(be, hp, ab->n, cpu_state(be)->att_work,
		       cpu_state(be)->att_work_cap, &job.w);
	job.w.off[0] = 0;
	for (j = 0; j < ab->n; j = j1) {
		/* the run of rows of one sequence from j */
		for (j1 = j + 1;
		     j1 < ab->n && ab->seq[ab->idx[j1]] == ab->seq[ab->idx[j]];
		     j1++)
			;
		if (cpu_att_tiled(be, ab, j, j1)) {
			cpu_att_plan_tiles(&job.w, hp, j, j1);
			for (; j < j1; j++) {
				job.w.nc[j] = 1;
				job.w.off[j + 1] = job.w.off[j];
			}
			work += CPU_ATT_PARALLEL_MIN;
			continue;
		}
		for (; j < j1; j++) {
			uint32_t b = ab->idx[j];

			work += (uint64_t)(ab->pos[b] + 1) * hp->n_head *
				(hp->head_dim + hp->head_dim_v);
			/*
			 * a chunk a task while their partials fit (their
			 * sizes even out the threads' shares), else a head
			 * a task: the same bits
			 */
			job.w.nc[j] = att_chunks(ab->pos[b] + 1);
			job.w.poff[j] = partials;
			if (job.w.nc[j] > 1 && split &&
			    partials + (size_t)hp->n_head * job.w.nc[j] <=
				    job.w.n_partials)
				partials += (size_t)hp->n_head * job.w.nc[j];
			else
				job.w.nc[j] = 1;
			job.w.off[j + 1] = job.w.off[j] +
					   hp->n_head * job.w.nc[j];
		}
	}
	/*
	 * Each task (row, head, chunk) computes the same whatever thread
	 * takes it: any split over our threads gives the same bits. A tile's rows too:
	 * each row's sums do not depend on the thread or on the other rows.
	 */
	if (work >= CPU_ATT_PARALLEL_MIN)
		cpu_threadpool_run(cpu_pool(be), cpu_att_part, &job);
	else
		cpu_att_part(&job, 0, 1);
	cpu_att_merge(&job);
}
