// SPDX-License-Identifier: MIT
/*
 * engine/cpu/attention.h: the F16 vector steps give the scalar code's bits
 * (every element, tails included); every K/V type pair computes softmax
 * attention (against a plain double-precision one over the dequantized
 * rows); how the positions are cut into runs changes no bit; merging the
 * partials of KV chunks gives the one-chunk result within float error,
 * and one chunk alone exactly. The tiled prefill path
 * (engine/cpu/attention_tiled.h) against a double-precision softmax, and
 * at every vector level bit for bit the scalar level's tiles. Each test
 * runs every level of engine/cpu/isa.h this CPU has (cpu_isa_use); the
 * expf and tiled ones run steps that two levels share (aarch64's NEON
 * levels) once.
 *
 *   make build/tests/engine/test_attention && build/tests/engine/test_attention
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/cpu/attention.h"
#include "../../engine/cpu/attention_tiled.h"
#include "../../engine/cpu/isa.h"
#include "../../engine/quant/quant.h"
#include "../common/check_main.h"

static uint32_t rng_state = 12345;

static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state;
}

/* uniform in [-a, a) */
static float rngf(float a)
{
	return ((float)(rng() >> 8) / (float)(1 << 24) * 2.0f - 1.0f) * a;
}

/* a finite half of any magnitude, subnormals included */
static uint16_t rng_half(void)
{
	uint16_t h;

	do
		h = (uint16_t)rng();
	while ((h & 0x7c00) == 0x7c00);
	return h;
}

/* Run level l; false where this CPU lacks it. */
static bool att_use(unsigned l)
{
	const struct cpu_isa *isa = cpu_isa_levels[l];

	if (!isa->usable()) {
		printf("%s: not on this CPU, left out\n", isa->name);
		return false;
	}
	cpu_isa_use(isa);
	return true;
}

#define N_LEVELS ((int)cpu_isa_count)

/*
 * Whether a level this CPU has, before l, runs the same attention steps
 * as l (aarch64's two NEON levels share theirs): the same code, compared
 * there, so l's pass would repeat it.
 */
static bool att_compared_before(unsigned l)
{
	const struct cpu_isa *isa = cpu_isa_levels[l];
	unsigned i;

	for (i = 0; isa->att && i < l; i++)
		if (cpu_isa_levels[i]->att == isa->att &&
		    cpu_isa_levels[i]->usable()) {
			printf("%s: the attention steps of %s, compared there\n",
			       isa->name, cpu_isa_levels[i]->name);
			return true;
		}
	return false;
}

START_TEST(test_att_f16_steps_match_scalar)
{
	static const float vs[] = { 0.0f,  1.0f,    -1.0f,  0.5f,    0.123456f,
				    1e-3f, 3.9e-8f, 700.0f, 0.99999f };
	uint16_t x[200], y0[200], y1[200];
	float f0[200], f1[200];
	uint32_t n, i, k, round;

	if (!att_use(_i) || !att_simd_usable())
		return; /* nothing to compare with: the scalar code runs */
	for (round = 0; round < 40; round++) {
		for (n = 1; n <= 200; n += (n < 40 ? 1 : 37)) {
			for (k = 0; k < sizeof(vs) / sizeof(vs[0]); k++) {
				float v = round ? rngf(2.0f) : vs[k];

				for (i = 0; i < n; i++) {
					x[i] = rng_half();
					y0[i] = y1[i] = rng_half();
				}
				att_mad_f16(y0, x, v, n, false);
				att_mad_f16(y1, x, v, n, true);
				ck_assert_msg(!memcmp(y0, y1, n * 2),
					      "%s mad n %u v %a",
					      cpu_isa()->name, n, v);
				att_scale_f16(y0, v, n, false);
				att_scale_f16(y1, v, n, true);
				ck_assert_msg(!memcmp(y0, y1, n * 2),
					      "scale n %u v %a", n, v);
				att_f16_to_f32(f0, y0, n, false);
				att_f16_to_f32(f1, y1, n, true);
				ck_assert(!memcmp(f0, f1, n * 4));
			}
		}
	}
}
END_TEST

static const uint32_t att_types[] = {
	IO_TYPE_F32,  IO_TYPE_F16,  IO_TYPE_BF16, IO_TYPE_Q8_0,
	IO_TYPE_Q4_0, IO_TYPE_Q4_1, IO_TYPE_Q5_0, IO_TYPE_Q5_1,
};
#define N_TYPES (sizeof(att_types) / sizeof(att_types[0]))
#define D 64
#define NKV 150

struct att_case {
	struct att_shape sh;
	size_t k_row, v_row;
	uint8_t *k, *v;
	float q[D];
	void *scratch;
};

static size_t row_bytes(uint32_t type)
{
	const struct io_type_info *ti = io_type_info(type);

	return D / ti->block_elems * ti->block_bytes;
}

static void case_make(struct att_case *c, uint32_t tk, uint32_t tv)
{
	float row[D];
	uint32_t i, d;

	c->sh = (struct att_shape){ tk, tv, D, D, 0.125f };
	c->k_row = row_bytes(tk);
	c->v_row = row_bytes(tv);
	c->k = malloc(c->k_row * NKV);
	c->v = malloc(c->v_row * NKV);
	c->scratch = aligned_alloc(64, (att_scratch_bytes(&c->sh) + 63) &
					       ~(size_t)63);
	ck_assert(c->k && c->v && c->scratch);
	for (i = 0; i < NKV; i++) {
		for (d = 0; d < D; d++)
			row[d] = rngf(3.0f);
		quant_from_float(tk, row, c->k + i * c->k_row, D);
		for (d = 0; d < D; d++)
			row[d] = rngf(1.0f);
		quant_from_float(tv, row, c->v + i * c->v_row, D);
	}
	for (d = 0; d < D; d++)
		c->q[d] = rngf(3.0f);
}

static void case_free(struct att_case *c)
{
	free(c->k);
	free(c->v);
	free(c->scratch);
}

/* softmax(K.Q * scale) . V in double over the stored (rounded) rows */
static void case_naive(const struct att_case *c, uint32_t n, double *out)
{
	uint32_t vdt = quant_vec_dot_type(c->sh.type_k);
	uint8_t qa[D * 4 + 64];
	float qf[D], kf[D], vf[D];
	double s[NKV], max = -INFINITY, sum = 0;
	uint32_t i, d;

	/* Q as K's dot sees it: converted to the vec_dot type */
	quant_from_float(vdt, c->q, qa, D);
	if (vdt == IO_TYPE_Q8_0 || vdt == IO_TYPE_Q8_1) {
		/* d (F16), [s (F16),] 32 int8: dequantized here by hand */
		size_t bb = vdt == IO_TYPE_Q8_0 ? 34 : 36, off = bb - 32;

		for (d = 0; d < D; d++) {
			const uint8_t *b = qa + d / 32 * bb;
			uint16_t h = (uint16_t)(b[0] | b[1] << 8);

			qf[d] = quant_fp16_to_fp32(h) *
				(float)(int8_t)b[off + d % 32];
		}
	} else {
		quant_to_float(vdt, qa, qf, D);
	}
	for (i = 0; i < n; i++) {
		quant_to_float(c->sh.type_k, c->k + i * c->k_row, kf, D);
		s[i] = 0;
		for (d = 0; d < D; d++)
			s[i] += (double)kf[d] * qf[d];
		s[i] *= c->sh.scale;
		max = s[i] > max ? s[i] : max;
	}
	memset(out, 0, D * sizeof(*out));
	for (i = 0; i < n; i++) {
		double e = exp(s[i] - max);

		sum += e;
		quant_to_float(c->sh.type_v, c->v + i * c->v_row, vf, D);
		for (d = 0; d < D; d++)
			out[d] += e * vf[d];
	}
	for (d = 0; d < D; d++)
		out[d] /= sum;
}

static void case_run(struct att_case *c, uint32_t n, uint32_t piece, float *out)
{
	struct att_state st;
	uint32_t i, m;

	att_begin(&st, &c->sh, c->q, c->scratch);
	for (i = 0; i < n; i += m) {
		m = n - i < piece ? n - i : piece;
		att_run(&st, c->k + i * c->k_row, c->k_row, c->v + i * c->v_row,
			c->v_row, m);
	}
	att_end(&st, out);
}

START_TEST(test_att_every_type_pair)
{
	const int k = _i % (N_TYPES * N_TYPES);
	uint32_t tk = att_types[k / N_TYPES], tv = att_types[k % N_TYPES];
	struct att_case c;
	double ref[D];
	float out[D], out2[D];
	uint32_t d;

	if (!att_use(_i / (N_TYPES * N_TYPES)))
		return;
	case_make(&c, tk, tv);
	case_naive(&c, NKV, ref);
	case_run(&c, NKV, NKV, out);
	for (d = 0; d < D; d++) {
		/* F16 V accumulates in halves: 2^-11 per step */
		double tol = tv == IO_TYPE_F16 ? 2e-2 : 1e-4;

		ck_assert_msg(fabs(out[d] - ref[d]) <= tol,
			      "%s K %s V %s d %u: %g vs %g", cpu_isa()->name,
			      io_type_info(tk)->name, io_type_info(tv)->name, d,
			      out[d], ref[d]);
	}
	/* runs of any length: the same bits (a paged cache's blocks) */
	case_run(&c, NKV, 7, out2);
	ck_assert(!memcmp(out, out2, sizeof(out)));
	case_run(&c, NKV, 64, out2);
	ck_assert(!memcmp(out, out2, sizeof(out)));
	case_free(&c);
}
END_TEST

START_TEST(test_att_merge_of_chunks)
{
	struct att_case c;
	float one[D], merged[D], part[3][2 + D];
	struct att_state st;
	uint32_t k, d, cuts[4] = { 0, 50, 100, NKV };

	case_make(&c, IO_TYPE_F16, IO_TYPE_F16);
	case_run(&c, NKV, NKV, one);
	/* one chunk: merging changes nothing */
	att_begin(&st, &c.sh, c.q, c.scratch);
	att_run(&st, c.k, c.k_row, c.v, c.v_row, NKV);
	part[0][0] = st.M;
	part[0][1] = st.S;
	att_vkq(&st, part[0] + 2);
	att_merge(merged, part[0], 2 + D, 1, D);
	ck_assert(!memcmp(one, merged, sizeof(one)));
	/* three chunks, the last one empty-sum-free */
	for (k = 0; k < 3; k++) {
		att_begin(&st, &c.sh, c.q, c.scratch);
		att_run(&st, c.k + cuts[k] * c.k_row, c.k_row,
			c.v + cuts[k] * c.v_row, c.v_row,
			cuts[k + 1] - cuts[k]);
		part[k][0] = st.M;
		part[k][1] = st.S;
		att_vkq(&st, part[k] + 2);
	}
	att_merge(merged, part[0], 2 + D, 3, D);
	for (d = 0; d < D; d++)
		ck_assert_msg(fabsf(merged[d] - one[d]) <= 2e-3f,
			      "d %u: %g vs %g", d, merged[d], one[d]);
	/* an empty chunk (all masked: S == 0) is skipped */
	part[1][0] = -INFINITY;
	part[1][1] = 0.0f;
	att_merge(one, part[0], 2 + D, 2, D);
	att_merge(merged, part[0], 2 + D, 1, D);
	ck_assert(!memcmp(one, merged, sizeof(one)));
	case_free(&c);
}
END_TEST

/*
 * The fused F16 loop att_run takes for F16 K and V (head sizes multiples
 * of 64, the 128 one unrolled) against the general step, bit for bit:
 * M, S and the F16 accumulator after every run, with runs cut anywhere,
 * and K scaled so that the maximum moves often (the rescaling branch).
 */
START_TEST(test_att_f16_fused_matches_steps)
{
	static const uint32_t dims[] = { 64, 128, 192, 256, 96, 48 };
	static const uint32_t pieces[] = { 1, 3, 64, 300 };
	const uint32_t dim = dims[_i % 6], nkv = 300;
	const struct att_shape sh = { IO_TYPE_F16, IO_TYPE_F16, dim, dim,
				      1.0f / 11.3f };
	uint16_t *k = malloc((size_t)nkv * dim * 2);
	uint16_t *v = malloc((size_t)nkv * dim * 2);
	void *s0 = aligned_alloc(64, (att_scratch_bytes(&sh) + 63) & ~63ul);
	void *s1 = aligned_alloc(64, (att_scratch_bytes(&sh) + 63) & ~63ul);
	float q[256];
	uint32_t i, p, n, m;

	ck_assert(k && v && s0 && s1);
	if (!att_use(_i / 6)) {
		free(k);
		free(v);
		free(s0);
		free(s1);
		return;
	}
	for (i = 0; i < nkv * dim; i++) {
		/* the magnitude grows with the position: new maxima */
		k[i] = quant_fp32_to_fp16(rngf(0.5f + (float)(i / dim) / 40));
		v[i] = quant_fp32_to_fp16(rngf(2.0f));
	}
	for (i = 0; i < dim; i++)
		q[i] = rngf(3.0f);
	for (p = 0; p < sizeof(pieces) / sizeof(pieces[0]); p++) {
		struct att_state a, b;

		att_begin(&a, &sh, q, s0);
		att_begin(&b, &sh, q, s1);
		for (n = 0; n < nkv; n += m) {
			m = nkv - n < pieces[p] ? nkv - n : pieces[p];
			att_run(&a, (const uint8_t *)(k + n * dim), dim * 2,
				(const uint8_t *)(v + n * dim), dim * 2, m);
			att_run_steps(&b, (const uint8_t *)(k + n * dim),
				      dim * 2, (const uint8_t *)(v + n * dim),
				      dim * 2, m);
			ck_assert_msg(
				!memcmp(&a.M, &b.M, 4) &&
					!memcmp(&a.S, &b.S, 4) &&
					!memcmp(a.acc16, b.acc16, dim * 2),
				"%s dim %u piece %u at %u", cpu_isa()->name,
				dim, pieces[p], n);
		}
	}
	free(k);
	free(v);
	free(s0);
	free(s1);
}
END_TEST

/*
 * The fused loop's vector expf against libm's expf, bit for bit, at each
 * level with a vector expf of its own (the scalar level calls libm): every
 * 4099th float of all 2^32 (sign, every exponent, NaN and infinities
 * included), and every float in [-1, 0), the scores' usual range, by a
 * stride of 7. (All 2^32 were compared once by hand: 0 mismatches.)
 */
START_TEST(test_att_expf_matches_libm)
{
	enum { B = 4096 };
	static float x[B], y[B];
	uint64_t bits, bad = 0, n = 0;
	uint32_t j, b;
	bool vector = false;

	if (!cpu_isa_levels[_i]->att || !cpu_isa_levels[_i]->att->expf16) {
		printf("%s: no vector expf: libm's own, nothing to compare\n",
		       cpu_isa_levels[_i]->name);
		return;
	}
	if (att_compared_before(_i) || !att_use(_i))
		return;
	for (bits = 0; bits < (1ull << 32);) {
		for (j = 0; j < B && bits < (1ull << 32); j++) {
			b = (uint32_t)bits;
			memcpy(&x[j], &b, 4);
			bits += 4099;
		}
		vector = att_expf_batch(y, x, j);
		for (b = 0; b < j; b++, n++) {
			float r = expf(x[b]);

			if (memcmp(&r, &y[b], 4) && !(isnan(r) && isnan(y[b])))
				bad++;
		}
	}
	for (bits = 0xbf800000u; bits >= 0x80000000u;) {
		for (j = 0; j < B && bits >= 0x80000000u; j++) {
			b = (uint32_t)bits;
			memcpy(&x[j], &b, 4);
			bits -= 7;
		}
		att_expf_batch(y, x, j);
		for (b = 0; b < j; b++, n++) {
			float r = expf(x[b]);

			bad += memcmp(&r, &y[b], 4) != 0;
		}
	}
	ck_assert_msg(bad == 0, "%s: %llu of %llu differ from libm",
		      cpu_isa()->name, (unsigned long long)bad,
		      (unsigned long long)n);
#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__GLIBC__) && \
	(__GLIBC__ > 2 || __GLIBC_MINOR__ >= 28)
	/* glibc's expf has been this algorithm since 2.28 (aarch64's with
	 * its rounding instructions, attention_neon.c): the vector path must
	 * have passed its own check at start-up */
	if (att_simd_usable())
		ck_assert_msg(vector, "the vector expf is off: it did not give "
				      "this libm's bits");
#else
	(void)vector;
#endif
}
END_TEST

/*
 * The tiled path (a prompt's rows of one sequence, the fast order)
 * against softmax(Q.K^T * scale) V in double over the stored rows, Q
 * rounded to F16 for F16 K as the tile (and ggml) does. The tile is F32
 * throughout; the largest error is the scores' rounding: K.Q sums of
 * 64..128 products up to 9 (partial sums of some 30, an ulp of 2e-6,
 * about sqrt(128) of them), times the scale 0.09..0.125, moves a weight
 * by about 2e-6 relative; expf (an ulp) and sums of <= 420 weights are
 * smaller. So 1e-5 on results of magnitude <= 1 (V in [-1, 1]) holds
 * with room (2.1e-6 at most measured over these cases) and still fails
 * an F16-rounded accumulation (about 1e-3) or a lost or extra position
 * (a weight of about 1e-3 or more). Cases: head_dim 64 and 128,
 * 1, 2 and 4 heads per KV head, F16 and F32 caches, 1..128 queries (cut
 * into tiles as the backend does) at consecutive positions from anywhere,
 * or scattered; the positions fed in runs cut at the cache's blocks or
 * anywhere, always up to the cache's end (the tail past every query's
 * own position must be masked out).
 */
#define TILE_NKV 420

struct tile_case {
	struct att_shape sh;
	uint32_t group;
	size_t k_row, v_row;
	uint8_t *k, *v;
	float *q;      /* [query][group][dim] */
	uint32_t *pos; /* [query] */
	float *out;    /* [query][group][dim] */
	void *scratch;
};

static void tile_ref(const struct tile_case *c, uint32_t i, uint32_t g,
		     double *ref)
{
	const uint32_t dk = c->sh.head_dim, dv = c->sh.head_dim_v;
	const float *q = c->q + ((size_t)i * c->group + g) * dk;
	double s[TILE_NKV], max = -INFINITY, sum = 0;
	float kf[128], vf[128], qf[128];
	uint32_t p, d;

	for (d = 0; d < dk; d++)
		qf[d] = c->sh.type_k == IO_TYPE_F16 ?
				quant_fp16_to_fp32(quant_fp32_to_fp16(q[d])) :
				q[d];
	for (p = 0; p <= c->pos[i]; p++) {
		quant_to_float(c->sh.type_k, c->k + p * c->k_row, kf, dk);
		s[p] = 0;
		for (d = 0; d < dk; d++)
			s[p] += (double)kf[d] * qf[d];
		s[p] *= c->sh.scale;
		max = s[p] > max ? s[p] : max;
	}
	for (d = 0; d < dv; d++)
		ref[d] = 0;
	for (p = 0; p <= c->pos[i]; p++) {
		double e = exp(s[p] - max);

		sum += e;
		quant_to_float(c->sh.type_v, c->v + p * c->v_row, vf, dv);
		for (d = 0; d < dv; d++)
			ref[d] += e * vf[d];
	}
	for (d = 0; d < dv; d++)
		ref[d] /= sum;
}

/* n_q queries from q0 in tiles of ATT_TILE_ROWS rows, runs of piece */
static void tile_run(struct tile_case *c, uint32_t q0, uint32_t n_q,
		     uint32_t piece)
{
	const uint32_t dk = c->sh.head_dim, dv = c->sh.head_dim_v;
	const uint32_t per = ATT_TILE_ROWS / c->group;
	const float *qs[ATT_TILE_ROWS];
	float *outs[ATT_TILE_ROWS];
	uint32_t i, t, n, m;

	for (t = q0; t < q0 + n_q; t += per) {
		uint32_t nt = q0 + n_q - t < per ? q0 + n_q - t : per;
		struct att_tile tile;

		for (i = 0; i < nt; i++) {
			qs[i] = c->q + (size_t)(t + i) * c->group * dk;
			outs[i] = c->out + (size_t)(t + i) * c->group * dv;
		}
		att_tile_begin(&tile, &c->sh, nt, c->group, qs, c->pos + t,
			       c->scratch);
		for (n = 0; n < TILE_NKV; n += m) {
			/* piece 64: the cache's blocks, else anywhere */
			m = piece == 64 ? 64 - n % 64 : piece;
			m = TILE_NKV - n < m ? TILE_NKV - n : m;
			att_tile_run(&tile, n, c->k + n * c->k_row, c->k_row,
				     c->v + n * c->v_row, c->v_row, m);
		}
		att_tile_end(&tile, outs, c->group);
	}
}

/* Every row of n_q queries within 1e-5 of the double reference. */
static void tile_check(const struct tile_case *c, uint32_t n_q)
{
	const uint32_t dim = c->sh.head_dim_v;
	const char *type = io_type_info(c->sh.type_k)->name;
	double ref[128];
	uint32_t i, g, d;

	for (i = 0; i < n_q; i++) {
		for (g = 0; g < c->group; g++) {
			const float *o = c->out +
					 ((size_t)i * c->group + g) * dim;

			tile_ref(c, i, g, ref);
			for (d = 0; d < dim; d++)
				ck_assert_msg(
					fabs(o[d] - ref[d]) <= 1e-5,
					"dim %u group %u type %s n_q %u "
					"pos %u head %u d %u: %.9g vs %.9g",
					dim, c->group, type, n_q, c->pos[i], g,
					d, o[d], ref[d]);
		}
	}
}

/*
 * Every case run at the scalar level first; a vector level then checks
 * its outputs against those bit for bit (the tiles' order is the scalar
 * code's), after the double reference.
 */
START_TEST(test_att_tiled_vs_double)
{
	static const uint32_t dims[] = { 64, 128 }, groups[] = { 1, 2, 4 };
	static const uint32_t types[] = { IO_TYPE_F16, IO_TYPE_F32 };
	static const uint32_t n_qs[] = { 1, 2, 5, 16, 31, 64, 70, 128 };
	const int cs = _i % 12;
	const uint32_t dim = dims[cs % 2], group = groups[cs / 2 % 3];
	const uint32_t type = types[cs / 6];
	const struct cpu_isa *level = cpu_isa_levels[_i / 12];
	struct tile_case c = { .sh = { type, type, dim, dim,
				       1.0f / sqrtf((float)dim) },
			       .group = group };
	const size_t nq_max = 128 * group;
	float row[128];
	uint32_t i, d, k, start, piece;

	ck_assert(att_tile_usable(&c.sh));
	if (att_compared_before(_i / 12) || !att_use(_i / 12))
		return;
	c.k_row = (size_t)dim * io_type_info(type)->block_bytes;
	c.v_row = c.k_row;
	c.k = malloc(c.k_row * TILE_NKV);
	c.v = malloc(c.v_row * TILE_NKV);
	c.q = malloc(nq_max * dim * sizeof(float));
	c.out = malloc(nq_max * dim * sizeof(float));
	c.pos = malloc(128 * sizeof(uint32_t));
	c.scratch = aligned_alloc(64, (att_tile_scratch_bytes(&c.sh) + 63) &
					      ~(size_t)63);
	ck_assert(c.k && c.v && c.q && c.out && c.pos && c.scratch);
	for (i = 0; i < TILE_NKV; i++) {
		for (d = 0; d < dim; d++)
			row[d] = rngf(3.0f);
		quant_from_float(type, row, c.k + i * c.k_row, dim);
		for (d = 0; d < dim; d++)
			row[d] = rngf(1.0f);
		quant_from_float(type, row, c.v + i * c.v_row, dim);
	}
	for (i = 0; i < nq_max * dim; i++)
		c.q[i] = rngf(3.0f);
	for (k = 0; k < sizeof(n_qs) / sizeof(n_qs[0]); k++) {
		const uint32_t n_q = n_qs[k];

		for (piece = 0; piece < 3; piece++) {
			/* consecutive from 0, across block edges, or scattered */
			start = piece == 0 ? 0 : rng() % (TILE_NKV - 128);
			for (i = 0; i < n_q; i++)
				c.pos[i] = piece == 2 ? rng() % TILE_NKV :
							start + i;
			for (i = 0; i < nq_max * dim; i++)
				c.out[i] = NAN;
			tile_run(&c, 0, n_q, piece == 1 ? 64 : 37 + piece);
			tile_check(&c, n_q);
			if (level != cpu_isa_named("scalar")) {
				float *vec = malloc(nq_max * dim * 4);

				ck_assert_ptr_nonnull(vec);
				memcpy(vec, c.out, nq_max * dim * 4);
				cpu_isa_use(cpu_isa_named("scalar"));
				tile_run(&c, 0, n_q,
					 piece == 1 ? 64 : 37 + piece);
				cpu_isa_use(level);
				ck_assert_msg(
					!memcmp(vec, c.out,
						(size_t)n_q * group * dim * 4),
					"%s tiles differ from the scalar "
					"level's: dim %u group %u n_q %u",
					level->name, dim, group, n_q);
				free(vec);
			}
			/* rows past n_q were not written */
			ck_assert(n_q == 128 ||
				  isnan(c.out[(size_t)n_q * group * dim]));
		}
	}
	free(c.k);
	free(c.v);
	free(c.q);
	free(c.out);
	free(c.pos);
	free(c.scratch);
}
END_TEST

static void attention_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_att_f16_steps_match_scalar, 0, N_LEVELS);
	tcase_add_loop_test(tc, test_att_every_type_pair, 0,
			    N_TYPES * N_TYPES * N_LEVELS);
	tcase_add_test(tc, test_att_merge_of_chunks);
	tcase_add_loop_test(tc, test_att_f16_fused_matches_steps, 0,
			    6 * N_LEVELS);
	tcase_add_loop_test(tc, test_att_expf_matches_libm, 0, N_LEVELS);
	tcase_add_loop_test(tc, test_att_tiled_vs_double, 0, 12 * N_LEVELS);
}

/* A level this CPU lacks was not compared: not a whole pass. */
static int attention_left_out(void)
{
	unsigned i;
	int missing = 0;

	for (i = 0; i < cpu_isa_count; i++)
		if (!cpu_isa_levels[i]->usable()) {
			printf("test_attention: this CPU lacks %s: the %s steps were not compared\n",
			       cpu_isa_levels[i]->features,
			       cpu_isa_levels[i]->name);
			missing++;
		}
	return missing ? CHECK_SKIP : 0;
}

/* test_att_tiled_vs_double alone makes ~150M expf calls: not 4 s. */
const struct check_main check_main = {
	.name = "attention",
	.timeout = 120,
	.add_tests = attention_tests,
	.left_out = attention_left_out,
};
