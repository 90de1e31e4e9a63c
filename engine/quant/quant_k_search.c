/* SPDX-License-Identifier: MIT */
/*
 * The K-quant weight quantizers: ggml-quants.c quantize_row_q{2..6}_K_ref,
 * the deterministic quantization llama-quantize runs when it has no
 * importance matrix. Each searches a few candidate scales per sub-block
 * for the least weighted error, then quantizes the scales themselves.
 *
 * Only tests and tools that write synthetic models use these; the float
 * operations keep ggml's order so that the bytes match libggml's.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "quant_internal.h"

#define GROUP_MAX_EPS 1e-15f

static inline int quant_clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/*
 * The element of largest magnitude, with its sign (the first of equals);
 * its magnitude goes to *amax.
 */
static float quant_signed_absmax(int n, const float *x, float *amax)
{
	float max = 0;

	*amax = 0;
	for (int i = 0; i < n; i++) {
		float ax = fabsf(x[i]);

		if (ax > *amax) {
			*amax = ax;
			max = x[i];
		}
	}
	return max;
}

/* make_qx_quants with rmse_type 1 and no importance weights (Q6_K). */
static float quant_make_qx(int n, int nmax, const float *x, int8_t *L)
{
	float amax, max = quant_signed_absmax(n, x, &amax);

	if (amax < GROUP_MAX_EPS) {
		memset(L, 0, (size_t)n);
		return 0.f;
	}
	float iscale = -nmax / max;
	float sumlx = 0, suml2 = 0;

	for (int i = 0; i < n; i++) {
		int l = quant_clampi(quant_nearest_int(iscale * x[i]), -nmax,
				     nmax - 1);
		float w = x[i] * x[i];

		L[i] = (int8_t)(l + nmax);
		sumlx += w * x[i] * l;
		suml2 += w * l * l;
	}
	float scale = suml2 ? sumlx / suml2 : 0.0f;
	float best = scale * sumlx;

	for (int is = -9; is <= 9; is++) {
		if (is == 0)
			continue;
		iscale = -(nmax + 0.1f * is) / max;
		sumlx = suml2 = 0;
		for (int i = 0; i < n; i++) {
			int l = quant_clampi(quant_nearest_int(iscale * x[i]),
					     -nmax, nmax - 1);
			float w = x[i] * x[i];

			sumlx += w * x[i] * l;
			suml2 += w * l * l;
		}
		if (suml2 > 0 && sumlx * sumlx > best * suml2) {
			for (int i = 0; i < n; i++) {
				int l = quant_nearest_int(iscale * x[i]);

				L[i] = (int8_t)(nmax + quant_clampi(l, -nmax,
								    nmax - 1));
			}
			scale = sumlx / suml2;
			best = scale * sumlx;
		}
	}
	return scale;
}

/* make_q3_quants with do_rmse (Q3_K): a few passes of coordinate descent. */
static float quant_make_q3(int n, int nmax, const float *x, int8_t *L)
{
	float amax, max = quant_signed_absmax(n, x, &amax);

	if (amax < GROUP_MAX_EPS) {
		memset(L, 0, (size_t)n);
		return 0.f;
	}
	float iscale = -nmax / max;
	float sumlx = 0, suml2 = 0;

	for (int i = 0; i < n; i++) {
		int l = quant_clampi(quant_nearest_int(iscale * x[i]), -nmax,
				     nmax - 1);
		float w = x[i] * x[i];

		L[i] = (int8_t)l;
		sumlx += w * x[i] * l;
		suml2 += w * l * l;
	}
	for (int itry = 0; itry < 5; itry++) {
		int n_changed = 0;

		for (int i = 0; i < n; i++) {
			float w = x[i] * x[i];
			float slx = sumlx - w * x[i] * L[i];

			if (slx <= 0)
				continue;
			float sl2 = suml2 - w * L[i] * L[i];
			int new_l = quant_clampi(
				quant_nearest_int(x[i] * sl2 / slx), -nmax,
				nmax - 1);

			if (new_l == L[i])
				continue;
			slx += w * x[i] * new_l;
			sl2 += w * new_l * new_l;
			if (sl2 > 0 &&
			    slx * slx * suml2 > sumlx * sumlx * sl2) {
				L[i] = (int8_t)new_l;
				sumlx = slx;
				suml2 = sl2;
				n_changed++;
			}
		}
		if (!n_changed)
			break;
	}
	for (int i = 0; i < n; i++)
		L[i] += nmax;
	return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/*
 * make_qkx2_quants (Q2_K, Q4_K, Q5_K): scale and min for x ~ scale * L + min
 * with L in [0, nmax], trying nstep + 1 stretched grids. *the_min gets
 * -min (a non-negative offset).
 */
static float quant_make_qkx2(int n, int nmax, const float *x,
			     const float *weights, uint8_t *L, float *the_min,
			     uint8_t *Laux, float rmin, float rdelta, int nstep,
			     bool use_mad)
{
	float min = x[0], max = x[0];
	float sum_w = weights[0];
	float sum_x = sum_w * x[0];

	for (int i = 1; i < n; i++) {
		if (x[i] < min)
			min = x[i];
		if (x[i] > max)
			max = x[i];
		float w = weights[i];

		sum_w += w;
		sum_x += w * x[i];
	}
	if (min > 0)
		min = 0;
	if (max == min) {
		memset(L, 0, (size_t)n);
		*the_min = -min;
		return 0.f;
	}
	float iscale = nmax / (max - min);
	float scale = 1 / iscale;
	float best_error = 0;

	for (int i = 0; i < n; i++) {
		int l = quant_nearest_int(iscale * (x[i] - min));

		L[i] = (uint8_t)quant_clampi(l, 0, nmax);
		float diff = scale * L[i] + min - x[i];

		diff = use_mad ? fabsf(diff) : diff * diff;
		best_error += weights[i] * diff;
	}
	for (int is = 0; is <= nstep; is++) {
		float sum_l = 0, sum_l2 = 0, sum_xl = 0;

		iscale = (rmin + rdelta * is + nmax) / (max - min);
		for (int i = 0; i < n; i++) {
			int l = quant_clampi(
				quant_nearest_int(iscale * (x[i] - min)), 0,
				nmax);
			float w = weights[i];

			Laux[i] = (uint8_t)l;
			sum_l += w * l;
			sum_l2 += w * l * l;
			sum_xl += w * l * x[i];
		}
		float D = sum_w * sum_l2 - sum_l * sum_l;

		if (D <= 0)
			continue;
		float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
		float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;

		if (this_min > 0) {
			this_min = 0;
			this_scale = sum_xl / sum_l2;
		}
		float cur_error = 0;

		for (int i = 0; i < n; i++) {
			float diff = this_scale * Laux[i] + this_min - x[i];

			diff = use_mad ? fabsf(diff) : diff * diff;
			cur_error += weights[i] * diff;
		}
		if (cur_error < best_error) {
			memcpy(L, Laux, (size_t)n);
			best_error = cur_error;
			scale = this_scale;
			min = this_min;
		}
	}
	*the_min = -min;
	return scale;
}

/* Four 2-bit values per byte, 32 bytes apart in the element order. */
static void quant_pack2(const uint8_t *L, uint8_t *qs)
{
	for (int j = 0; j < QK_K; j += 128)
		for (int l = 0; l < 32; l++)
			qs[j / 4 + l] = L[j + l] | (L[j + l + 32] << 2) |
					(L[j + l + 64] << 4) |
					(L[j + l + 96] << 6);
}

void quant_q2_K_from_float(const float *x, void *vy, int64_t nb)
{
	struct block_q2_K *y = vy;
	uint8_t L[QK_K], Laux[16];
	float weights[16], mins[QK_K / 16], scales[QK_K / 16];
	const float q4scale = 15.f;

	for (int64_t i = 0; i < nb; i++, x += QK_K) {
		float max_scale = 0, max_min = 0;

		for (int j = 0; j < QK_K / 16; j++) {
			for (int l = 0; l < 16; l++)
				weights[l] = fabsf(x[16 * j + l]);
			scales[j] = quant_make_qkx2(16, 3, x + 16 * j, weights,
						    L + 16 * j, &mins[j], Laux,
						    -0.5f, 0.1f, 15, true);
			if (scales[j] > max_scale)
				max_scale = scales[j];
			if (mins[j] > max_min)
				max_min = mins[j];
		}
		if (max_scale > 0) {
			float iscale = q4scale / max_scale;

			for (int j = 0; j < QK_K / 16; j++)
				y[i].scales[j] = (uint8_t)quant_nearest_int(
					iscale * scales[j]);
			y[i].d = quant_fp32_to_fp16(max_scale / q4scale);
		} else {
			memset(y[i].scales, 0, sizeof(y[i].scales));
			y[i].d = quant_fp32_to_fp16(0.f);
		}
		if (max_min > 0) {
			float iscale = q4scale / max_min;

			for (int j = 0; j < QK_K / 16; j++)
				y[i].scales[j] |= (uint8_t)(quant_nearest_int(
								    iscale *
								    mins[j])
							    << 4);
			y[i].dmin = quant_fp32_to_fp16(max_min / q4scale);
		} else {
			y[i].dmin = quant_fp32_to_fp16(0.f);
		}
		for (int j = 0; j < QK_K / 16; j++) {
			const float d = quant_h2f(y[i].d) *
					(y[i].scales[j] & 0xf);

			if (!d)
				continue;
			const float dm = quant_h2f(y[i].dmin) *
					 (y[i].scales[j] >> 4);

			for (int ii = 0; ii < 16; ii++) {
				int l = quant_nearest_int(
					(x[16 * j + ii] + dm) / d);

				L[16 * j + ii] = (uint8_t)quant_clampi(l, 0, 3);
			}
		}
		quant_pack2(L, y[i].qs);
	}
}

void quant_q3_K_from_float(const float *x, void *vy, int64_t nb)
{
	struct block_q3_K *y = vy;
	int8_t L[QK_K], sc[16];
	float scales[QK_K / 16];

	for (int64_t i = 0; i < nb; i++, x += QK_K) {
		float max_scale = 0, amax = 0;

		for (int j = 0; j < QK_K / 16; j++) {
			scales[j] = quant_make_q3(16, 4, x + 16 * j,
						  L + 16 * j);
			if (fabsf(scales[j]) > amax) {
				amax = fabsf(scales[j]);
				max_scale = scales[j];
			}
		}
		memset(y[i].scales, 0, 12);
		if (max_scale) {
			float iscale = -32.f / max_scale;

			for (int j = 0; j < QK_K / 16; j++) {
				int l = (int8_t)quant_nearest_int(iscale *
								  scales[j]);

				l = quant_clampi(l, -32, 31) + 32;
				if (j < 8)
					y[i].scales[j] = l & 0xf;
				else
					y[i].scales[j - 8] |= (l & 0xf) << 4;
				l >>= 4;
				y[i].scales[j % 4 + 8] |= l << (2 * (j / 4));
			}
			y[i].d = quant_fp32_to_fp16(1 / iscale);
		} else {
			y[i].d = quant_fp32_to_fp16(0.f);
		}
		for (int j = 0; j < QK_K / 16; j++) {
			int lo = j < 8 ? y[i].scales[j] & 0xf :
					 y[i].scales[j - 8] >> 4;
			int hi = (y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3;

			sc[j] = (int8_t)((lo | (hi << 4)) - 32);
			float d = quant_h2f(y[i].d) * sc[j];

			if (!d)
				continue;
			for (int ii = 0; ii < 16; ii++) {
				int l = quant_nearest_int(x[16 * j + ii] / d);

				L[16 * j + ii] =
					(int8_t)(quant_clampi(l, -4, 3) + 4);
			}
		}
		memset(y[i].hmask, 0, QK_K / 8);
		/* high bit of element j: byte j % 32, bit j / 32 */
		for (int j = 0; j < QK_K; j++) {
			if (L[j] > 3) {
				y[i].hmask[j % 32] |= (uint8_t)(1 << (j / 32));
				L[j] -= 4;
			}
		}
		quant_pack2((const uint8_t *)L, y[i].qs);
	}
}

/* The 8 scales and 8 mins of 6 bits into Q4_K/Q5_K's 12 bytes. */
static void quant_k_pack_scales(const float *scales, const float *mins,
				float max_scale, float max_min, uint8_t out[12])
{
	float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
	float inv_min = max_min > 0 ? 63.f / max_min : 0.f;

	for (int j = 0; j < QK_K / 32; j++) {
		uint8_t ls = (uint8_t)quant_nearest_int(inv_scale * scales[j]);
		uint8_t lm = (uint8_t)quant_nearest_int(inv_min * mins[j]);

		ls = ls < 63 ? ls : 63;
		lm = lm < 63 ? lm : 63;
		if (j < 4) {
			out[j] = ls;
			out[j + 4] = lm;
		} else {
			out[j + 4] = (ls & 0xf) | ((lm & 0xf) << 4);
			out[j - 4] |= (ls >> 4) << 6;
			out[j] |= (lm >> 4) << 6;
		}
	}
}

/*
 * Q4_K and Q5_K share everything but nmax and the search grid: the
 * quantized levels L[256] are left for the caller to pack.
 */
static void quant_q45_K_levels(const float *x, uint16_t *d, uint16_t *dmin,
			       uint8_t scales12[12], uint8_t *L, int nmax,
			       float rmin, int nstep)
{
	float weights[32], mins[QK_K / 32], scales[QK_K / 32];
	float max_scale = 0, max_min = 0;
	uint8_t Laux[32], sc, m;

	for (int j = 0; j < QK_K / 32; j++) {
		float sum_x2 = 0;

		for (int l = 0; l < 32; l++)
			sum_x2 += x[32 * j + l] * x[32 * j + l];
		float av_x = sqrtf(sum_x2 / 32);

		for (int l = 0; l < 32; l++)
			weights[l] = av_x + fabsf(x[32 * j + l]);
		scales[j] = quant_make_qkx2(32, nmax, x + 32 * j, weights,
					    L + 32 * j, &mins[j], Laux, rmin,
					    0.1f, nstep, false);
		if (scales[j] > max_scale)
			max_scale = scales[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}
	quant_k_pack_scales(scales, mins, max_scale, max_min, scales12);
	*d = quant_fp32_to_fp16(max_scale / 63.f);
	*dmin = quant_fp32_to_fp16(max_min / 63.f);
	for (int j = 0; j < QK_K / 32; j++) {
		quant_k_scale_min(j, scales12, &sc, &m);
		const float dd = quant_h2f(*d) * sc;

		if (!dd)
			continue;
		const float dm = quant_h2f(*dmin) * m;

		for (int ii = 0; ii < 32; ii++) {
			int l = quant_nearest_int((x[32 * j + ii] + dm) / dd);

			L[32 * j + ii] = (uint8_t)quant_clampi(l, 0, nmax);
		}
	}
}

void quant_q4_K_from_float(const float *x, void *vy, int64_t nb)
{
	struct block_q4_K *y = vy;
	uint8_t L[QK_K];

	for (int64_t i = 0; i < nb; i++, x += QK_K) {
		memset(y[i].scales, 0, sizeof(y[i].scales));
		quant_q45_K_levels(x, &y[i].d, &y[i].dmin, y[i].scales, L, 15,
				   -1.f, 20);
		for (int j = 0; j < QK_K; j += 64)
			for (int l = 0; l < 32; l++)
				y[i].qs[j / 2 + l] = L[j + l] |
						     (L[j + l + 32] << 4);
	}
}

void quant_q5_K_from_float(const float *x, void *vy, int64_t nb)
{
	struct block_q5_K *y = vy;
	uint8_t L[QK_K];

	for (int64_t i = 0; i < nb; i++, x += QK_K) {
		uint8_t m1 = 1, m2 = 2;

		memset(y[i].scales, 0, sizeof(y[i].scales));
		quant_q45_K_levels(x, &y[i].d, &y[i].dmin, y[i].scales, L, 31,
				   -0.5f, 15);
		memset(y[i].qh, 0, sizeof(y[i].qh));
		for (int n = 0; n < QK_K; n += 64, m1 <<= 2, m2 <<= 2) {
			for (int j = 0; j < 32; j++) {
				int l1 = L[n + j], l2 = L[n + j + 32];

				if (l1 > 15) {
					l1 -= 16;
					y[i].qh[j] |= m1;
				}
				if (l2 > 15) {
					l2 -= 16;
					y[i].qh[j] |= m2;
				}
				y[i].qs[n / 2 + j] = (uint8_t)(l1 | (l2 << 4));
			}
		}
	}
}

void quant_q6_K_from_float(const float *x, void *vy, int64_t nb)
{
	struct block_q6_K *y = vy;
	int8_t L[QK_K];
	float scales[QK_K / 16];

	for (int64_t i = 0; i < nb; i++, x += QK_K) {
		float max_scale = 0, max_abs_scale = 0;

		for (int ib = 0; ib < QK_K / 16; ib++) {
			scales[ib] = quant_make_qx(16, 32, x + 16 * ib,
						   L + 16 * ib);
			if (fabsf(scales[ib]) > max_abs_scale) {
				max_abs_scale = fabsf(scales[ib]);
				max_scale = scales[ib];
			}
		}
		if (max_abs_scale < GROUP_MAX_EPS) {
			memset(&y[i], 0, sizeof(y[i]));
			continue;
		}
		float iscale = -128.f / max_scale;

		y[i].d = quant_fp32_to_fp16(1 / iscale);
		for (int ib = 0; ib < QK_K / 16; ib++) {
			int v = quant_nearest_int(iscale * scales[ib]);

			y[i].scales[ib] = (int8_t)(v < 127 ? v : 127);
		}
		for (int j = 0; j < QK_K / 16; j++) {
			float d = quant_h2f(y[i].d) * y[i].scales[j];

			if (!d)
				continue;
			for (int ii = 0; ii < 16; ii++) {
				int l = quant_nearest_int(x[16 * j + ii] / d);

				L[16 * j + ii] =
					(int8_t)(quant_clampi(l, -32, 31) + 32);
			}
		}
		uint8_t *ql = y[i].ql, *qh = y[i].qh;

		for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
			for (int l = 0; l < 32; l++) {
				const uint8_t *q = (const uint8_t *)L + j + l;

				ql[l] = (q[0] & 0xf) | ((q[64] & 0xf) << 4);
				ql[l + 32] = (q[32] & 0xf) |
					     ((q[96] & 0xf) << 4);
				qh[l] = (q[0] >> 4) | ((q[32] >> 4) << 2) |
					((q[64] >> 4) << 4) |
					((q[96] >> 4) << 6);
			}
		}
	}
}
