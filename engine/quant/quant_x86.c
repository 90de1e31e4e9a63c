/* SPDX-License-Identifier: MIT */
/*
 * quant_q*_dot_x86, the traits table's vec_dot of the block types: the
 * quantized dot products summed in exactly the order of ggml's AVX2
 * kernels (ggml-cpu's arch/x86/quants.c), which is what libggml-cpu-zen4.so,
 * the build behind ../shared/golden, runs. Scalar C that emulates the
 * vector lanes, so the floats come out bit for bit.
 *
 * Every kernel there has the same shape. The integer products land in
 * eight int32 lanes. A 32-byte load covers 32 consecutive elements, and
 * vpdpbusd / pmaddubsw + pmaddwd put elements 4l..4l+3 of each load into
 * lane l. The lanes are exact integers, so only which elements share a lane
 * matters, not the order inside it. Each block or super-block then does
 * acc[l] = fma(scale, (float)lane[l], acc[l]), and a fixed tree (hsum8)
 * adds the lanes. Where ggml's C computes a scalar `summs += a * b`, the
 * zen4 build contracts it to one fma (seen in its disassembly), and so do we
 * (for Q4_1/Q5_1 m * s is a product of two halves, exact either way; for
 * Q5_K it is not, and test_quant tells the two apart).
 */
#include <math.h>
#include <string.h>

#include "quant_internal.h"

/* hsum_float_8: high half + low half, then (0 + 2) + (1 + 3). */
static float x86_hsum8(const float v[8])
{
	float r0 = v[4] + v[0], r1 = v[5] + v[1];
	float r2 = v[6] + v[2], r3 = v[7] + v[3];

	return (r0 + r2) + (r1 + r3);
}

/* lane[l] = sum of w[e] * a[e] over the e of one 32-element load in lane l */
static void x86_lanes32(const int8_t *w, const int8_t *a, int32_t lane[8])
{
	int16_t p[32];

	for (int k = 0; k < 32; k++)
		p[k] = (int16_t)(w[k] * a[k]);
	for (int l = 0; l < 8; l++)
		lane[l] = p[4 * l] + p[4 * l + 1] + p[4 * l + 2] + p[4 * l + 3];
}

static void x86_fma8(float acc[8], float d, const int32_t lane[8])
{
	for (int l = 0; l < 8; l++)
		acc[l] = fmaf(d, (float)lane[l], acc[l]);
}

/*
 * The weights of one legacy block as signed bytes, in element order:
 * nibbles (qs), fifth bits (qh, element j at bit j) and the offset.
 */
static void x86_unpack_nibbles(const uint8_t *qs, uint32_t qh, int off,
			       int8_t w[32])
{
	for (int j = 0; j < 16; j++) {
		w[j] = (int8_t)((qs[j] & 0x0f) + (((qh >> j) & 1) << 4) - off);
		w[j + 16] = (int8_t)((qs[j] >> 4) +
				     (((qh >> (j + 16)) & 1) << 4) - off);
	}
}

static void x86_unpack_q4_0(const void *blk, int8_t w[32])
{
	x86_unpack_nibbles(((const struct block_q4_0 *)blk)->qs, 0, 8, w);
}

static void x86_unpack_q4_1(const void *blk, int8_t w[32])
{
	x86_unpack_nibbles(((const struct block_q4_1 *)blk)->qs, 0, 0, w);
}

static void x86_unpack_q5_0(const void *blk, int8_t w[32])
{
	uint32_t qh;

	memcpy(&qh, ((const struct block_q5_0 *)blk)->qh, 4);
	x86_unpack_nibbles(((const struct block_q5_0 *)blk)->qs, qh, 16, w);
}

static void x86_unpack_q5_1(const void *blk, int8_t w[32])
{
	uint32_t qh;

	memcpy(&qh, ((const struct block_q5_1 *)blk)->qh, 4);
	x86_unpack_nibbles(((const struct block_q5_1 *)blk)->qs, qh, 0, w);
}

static void x86_unpack_q8_0(const void *blk, int8_t w[32])
{
	memcpy(w, ((const struct block_q8_0 *)blk)->qs, 32);
}

/*
 * Q4_0, Q5_0, Q8_0 against Q8_0: acc = fma(dx * dy, lanes, acc).
 * Q4_1, Q5_1 against Q8_1 (with_min): the same with summs = fma(m, s,
 * summs) beside. bw: bytes of one weight block.
 */
static float x86_dot_legacy(void (*unpack)(const void *, int8_t *), size_t bw,
			    int with_min, int64_t nb, const void *vw,
			    const void *va)
{
	const uint8_t *w = vw;
	float acc[8] = { 0 }, summs = 0.0f;
	int32_t lane[8];
	int8_t q[32];

	for (int64_t i = 0; i < nb; i++, w += bw) {
		uint16_t dw, mw;
		const int8_t *qa;
		float da;

		memcpy(&dw, w, 2);
		if (with_min) {
			const struct block_q8_1 *a =
				(const struct block_q8_1 *)va + i;

			memcpy(&mw, w + 2, 2);
			da = quant_h2f(a->d);
			qa = a->qs;
			summs = fmaf(quant_h2f(mw), quant_h2f(a->s), summs);
		} else {
			const struct block_q8_0 *a =
				(const struct block_q8_0 *)va + i;

			da = quant_h2f(a->d);
			qa = a->qs;
		}
		unpack(w, q);
		x86_lanes32(q, qa, lane);
		x86_fma8(acc, quant_h2f(dw) * da, lane);
	}
	return with_min ? x86_hsum8(acc) + summs : x86_hsum8(acc);
}

float quant_q4_0_dot_x86(int64_t n, const void *w, const void *a)
{
	return x86_dot_legacy(x86_unpack_q4_0, sizeof(struct block_q4_0), 0,
			      n / QK4_0, w, a);
}

float quant_q4_1_dot_x86(int64_t n, const void *w, const void *a)
{
	return x86_dot_legacy(x86_unpack_q4_1, sizeof(struct block_q4_1), 1,
			      n / QK4_1, w, a);
}

float quant_q5_0_dot_x86(int64_t n, const void *w, const void *a)
{
	return x86_dot_legacy(x86_unpack_q5_0, sizeof(struct block_q5_0), 0,
			      n / QK5_0, w, a);
}

float quant_q5_1_dot_x86(int64_t n, const void *w, const void *a)
{
	return x86_dot_legacy(x86_unpack_q5_1, sizeof(struct block_q5_1), 1,
			      n / QK5_1, w, a);
}

float quant_q8_0_dot_x86(int64_t n, const void *w, const void *a)
{
	return x86_dot_legacy(x86_unpack_q8_0, sizeof(struct block_q8_0), 0,
			      n / QK8_0, w, a);
}

/*
 * K-quants: lane l of a super-block collects the elements e with
 * (e % 32) / 4 == l, each times its sub-block scale.
 */
static void x86_lanes_k(const int8_t *w, const int8_t *a, const int sc16[16],
			int32_t lane[8])
{
	int32_t part[8];

	memset(lane, 0, 8 * sizeof(int32_t));
	for (int c = 0; c < QK_K / 32; c++) {
		x86_lanes32(w + 32 * c, a + 32 * c, part);
		for (int l = 0; l < 8; l++)
			lane[l] += sc16[2 * c + l / 4] * part[l];
	}
}

/* Q2_K: the mins go into the same eight lanes first, scaled by -dmin. */
static float x86_dot_q2_K(int64_t nb, const struct block_q2_K *x,
			  const struct block_q8_K *y)
{
	float acc[8] = { 0 };
	int32_t lane[8], prod[8];
	int8_t w[QK_K];
	int sc[16];

	for (int64_t i = 0; i < nb; i++) {
		const float d = y[i].d * quant_h2f(x[i].d);
		const float dmin = -y[i].d * quant_h2f(x[i].dmin);

		for (int l = 0; l < 8; l++)
			prod[l] = (x[i].scales[2 * l] >> 4) *
					  y[i].bsums[2 * l] +
				  (x[i].scales[2 * l + 1] >> 4) *
					  y[i].bsums[2 * l + 1];
		x86_fma8(acc, dmin, prod);
		for (int j = 0; j < 16; j++)
			sc[j] = x[i].scales[j] & 0xf;
		for (int h = 0; h < 2; h++)
			for (int c = 0; c < 4; c++)
				for (int l = 0; l < 32; l++)
					w[128 * h + 32 * c + l] =
						(int8_t)((x[i].qs[32 * h + l] >>
							  (2 * c)) &
							 3);
		x86_lanes_k(w, y[i].qs, sc, lane);
		x86_fma8(acc, d, lane);
	}
	return x86_hsum8(acc);
}

static float x86_dot_q3_K(int64_t nb, const struct block_q3_K *x,
			  const struct block_q8_K *y)
{
	float acc[8] = { 0 };
	int32_t lane[8];
	int8_t w[QK_K];
	int sc[16];

	for (int64_t i = 0; i < nb; i++) {
		const float d = y[i].d * quant_h2f(x[i].d);

		/* low 2 bits from qs, minus 4 where the hmask bit is clear */
		for (int h = 0; h < 2; h++) {
			for (int c = 0; c < 4; c++) {
				for (int l = 0; l < 32; l++) {
					int lo = (x[i].qs[32 * h + l] >>
						  (2 * c)) &
						 3;
					int hb = (x[i].hmask[l] >>
						  (4 * h + c)) &
						 1;

					w[128 * h + 32 * c + l] =
						(int8_t)(lo - 4 + 4 * hb);
				}
			}
		}
		for (int j = 0; j < 16; j++) {
			int lo = j < 8 ? x[i].scales[j] & 0xf :
					 x[i].scales[j - 8] >> 4;
			int hi = (x[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3;

			sc[j] = (lo | (hi << 4)) - 32;
		}
		x86_lanes_k(w, y[i].qs, sc, lane);
		x86_fma8(acc, d, lane);
	}
	return x86_hsum8(acc);
}

/* The 8 scales and 8 mins of Q4_K/Q5_K. */
static void x86_scales_k4(const uint8_t *s12, int sc16[16], int mins[8])
{
	uint8_t sc, m;

	for (int j = 0; j < 8; j++) {
		quant_k_scale_min(j, s12, &sc, &m);
		sc16[2 * j] = sc16[2 * j + 1] = sc;
		mins[j] = m;
	}
}

/*
 * Q4_K: mins in four float lanes of their own, acc_m[k] = fma(-dmin,
 * m[2k] (b[4k] + b[4k+1]) + m[2k+1] (b[4k+2] + b[4k+3]), acc_m[k]).
 * Q5_K: the same integers summed, summs = fma(-dmin, sum, summs).
 */
static float x86_dot_q45_K(int64_t nb, const void *vx,
			   const struct block_q8_K *y, int five)
{
	float acc[8] = { 0 }, acc_m[4] = { 0 }, summs = 0.0f;
	int32_t lane[8], prod[4];
	int8_t w[QK_K];
	int sc[16], mins[8];

	for (int64_t i = 0; i < nb; i++) {
		const struct block_q4_K *x4 = (const struct block_q4_K *)vx + i;
		const struct block_q5_K *x5 = (const struct block_q5_K *)vx + i;
		const uint16_t hd = five ? x5->d : x4->d;
		const uint16_t hm = five ? x5->dmin : x4->dmin;
		const uint8_t *qs = five ? x5->qs : x4->qs;
		const float d = y[i].d * quant_h2f(hd);
		const float dmin = -y[i].d * quant_h2f(hm);

		x86_scales_k4(five ? x5->scales : x4->scales, sc, mins);
		for (int k = 0; k < 4; k++) {
			const int16_t *b = y[i].bsums + 4 * k;

			prod[k] = mins[2 * k] * (b[0] + b[1]) +
				  mins[2 * k + 1] * (b[2] + b[3]);
		}
		if (five)
			summs = fmaf(
				dmin,
				(float)(prod[0] + prod[1] + prod[2] + prod[3]),
				summs);
		else
			for (int k = 0; k < 4; k++)
				acc_m[k] = fmaf(dmin, (float)prod[k], acc_m[k]);
		for (int g = 0; g < 4; g++) {
			for (int l = 0; l < 32; l++) {
				w[64 * g + l] = (int8_t)(qs[32 * g + l] & 0xf);
				w[64 * g + 32 + l] = (int8_t)(qs[32 * g + l] >>
							      4);
			}
			if (!five)
				continue;
			for (int l = 0; l < 32; l++) {
				w[64 * g + l] +=
					(int8_t)(((x5->qh[l] >> (2 * g)) & 1)
						 << 4);
				w[64 * g + 32 + l] += (int8_t)(((x5->qh[l] >>
								 (2 * g + 1)) &
								1)
							       << 4);
			}
		}
		x86_lanes_k(w, y[i].qs, sc, lane);
		x86_fma8(acc, d, lane);
	}
	if (five)
		return x86_hsum8(acc) + summs;
	return x86_hsum8(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

/*
 * Q6_K: the quants stay unsigned (0..63) in the lanes, and lane l loses
 * 32 * (b[2l] sc[2l] + b[2l+1] sc[2l+1]): the -32 of sub-blocks 2l and
 * 2l + 1, not of the lane's own elements.
 */
static float x86_dot_q6_K(int64_t nb, const struct block_q6_K *x,
			  const struct block_q8_K *y)
{
	float acc[8] = { 0 };
	int32_t lane[8];
	int8_t w[QK_K];
	int sc[16];

	for (int64_t i = 0; i < nb; i++) {
		const float d = y[i].d * quant_h2f(x[i].d);

		for (int j = 0; j < 16; j++)
			sc[j] = x[i].scales[j];
		for (int h = 0; h < 2; h++) {
			const uint8_t *ql = x[i].ql + 64 * h,
				      *qh = x[i].qh + 32 * h;
			int8_t *p = w + 128 * h;

			for (int l = 0; l < 32; l++) {
				p[l] = (int8_t)((ql[l] & 0xf) |
						((qh[l] & 3) << 4));
				p[l + 32] = (int8_t)((ql[l + 32] & 0xf) |
						     (((qh[l] >> 2) & 3) << 4));
				p[l + 64] = (int8_t)((ql[l] >> 4) |
						     (((qh[l] >> 4) & 3) << 4));
				p[l + 96] = (int8_t)((ql[l + 32] >> 4) |
						     (((qh[l] >> 6) & 3) << 4));
			}
		}
		x86_lanes_k(w, y[i].qs, sc, lane);
		for (int l = 0; l < 8; l++)
			lane[l] -= 32 * (y[i].bsums[2 * l] * sc[2 * l] +
					 y[i].bsums[2 * l + 1] * sc[2 * l + 1]);
		x86_fma8(acc, d, lane);
	}
	return x86_hsum8(acc);
}

float quant_q2_K_dot_x86(int64_t n, const void *w, const void *a)
{
	return x86_dot_q2_K(n / QK_K, w, a);
}

float quant_q3_K_dot_x86(int64_t n, const void *w, const void *a)
{
	return x86_dot_q3_K(n / QK_K, w, a);
}

float quant_q4_K_dot_x86(int64_t n, const void *w, const void *a)
{
	return x86_dot_q45_K(n / QK_K, w, a, 0);
}

float quant_q5_K_dot_x86(int64_t n, const void *w, const void *a)
{
	return x86_dot_q45_K(n / QK_K, w, a, 1);
}

float quant_q6_K_dot_x86(int64_t n, const void *w, const void *a)
{
	return x86_dot_q6_K(n / QK_K, w, a);
}
