/* SPDX-License-Identifier: MIT */
/*
 * The K-quants: Q2_K .. Q6_K weights in 256-element super-blocks and the
 * Q8_K activations they are multiplied with.
 *
 *   to_float       ggml-quants.c dequantize_row_q{2..6,8}_K
 *   from_float     quantize_row_q{2..6}_K_ref (the search for scales that
 *                  llama-quantize runs without an importance matrix, in
 *                  quant_k_search.c) and quantize_row_q8_K_ref, which is
 *                  also what the x86 CPU backend uses for activations
 *
 * Their dots in ggml's scalar order are dot_ref.c's (the reference, for
 * tests); the engine's are quant_x86.c's and engine/cpu's.
 */
#include <math.h>
#include <string.h>

#include "quant_internal.h"

/*
 * The 12 bytes of Q4_K/Q5_K scales hold 8 scales and 8 mins of 6 bits:
 * j < 4 in the low 6 bits of bytes j and j + 4, j >= 4 split between a
 * nibble of byte j + 4 and the top 2 bits of bytes j - 4 and j.
 */
void quant_k_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
	if (j < 4) {
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*d = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* The 16 signed 6-bit scales of Q3_K, each with its bias of 32 removed. */
void quant_q3_K_scales(const uint8_t in[12], int8_t out[16])
{
	for (int j = 0; j < 16; j++) {
		int lo = j < 8 ? in[j] & 0xf : in[j - 8] >> 4;
		int hi = (in[8 + j % 4] >> (2 * (j / 4))) & 3;

		out[j] = (int8_t)((lo | (hi << 4)) - 32);
	}
}

/* ---- to float ------------------------------------------------------------ */

void quant_q2_K_to_float(const void *vx, float *y, int64_t nb)
{
	const struct block_q2_K *x = vx;

	for (int64_t i = 0; i < nb; i++) {
		const float d = quant_h2f(x[i].d);
		const float min = quant_h2f(x[i].dmin);
		const uint8_t *q = x[i].qs;
		int is = 0;

		for (int n = 0; n < QK_K; n += 128, q += 32) {
			for (int shift = 0; shift < 8; shift += 2) {
				for (int h = 0; h < 2; h++) {
					uint8_t sc = x[i].scales[is++];
					float dl = d * (sc & 0xf);
					float ml = min * (sc >> 4);

					for (int l = 0; l < 16; l++)
						*y++ = dl * ((q[l + 16 * h] >>
							      shift) &
							     3) -
						       ml;
				}
			}
		}
	}
}

void quant_q3_K_to_float(const void *vx, float *y, int64_t nb)
{
	const struct block_q3_K *x = vx;
	int8_t sc[16];

	for (int64_t i = 0; i < nb; i++) {
		const float d_all = quant_h2f(x[i].d);
		const uint8_t *q = x[i].qs;
		const uint8_t *hm = x[i].hmask;
		uint8_t m = 1;
		int is = 0;

		quant_q3_K_scales(x[i].scales, sc);
		for (int n = 0; n < QK_K; n += 128, q += 32) {
			for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
				for (int h = 0; h < 32; h += 16) {
					float dl = d_all * sc[is++];

					for (int l = h; l < h + 16; l++)
						*y++ = dl *
						       (((q[l] >> shift) & 3) -
							((hm[l] & m) ? 0 : 4));
				}
			}
		}
	}
}

void quant_q4_K_to_float(const void *vx, float *y, int64_t nb)
{
	const struct block_q4_K *x = vx;

	for (int64_t i = 0; i < nb; i++) {
		const float d = quant_h2f(x[i].d);
		const float min = quant_h2f(x[i].dmin);
		const uint8_t *q = x[i].qs;
		uint8_t sc, m;

		for (int is = 0; is < QK_K / 32; is += 2, q += 32) {
			quant_k_scale_min(is, x[i].scales, &sc, &m);
			const float d1 = d * sc, m1 = min * m;
			quant_k_scale_min(is + 1, x[i].scales, &sc, &m);
			const float d2 = d * sc, m2 = min * m;

			for (int l = 0; l < 32; l++)
				*y++ = d1 * (q[l] & 0xf) - m1;
			for (int l = 0; l < 32; l++)
				*y++ = d2 * (q[l] >> 4) - m2;
		}
	}
}

void quant_q5_K_to_float(const void *vx, float *y, int64_t nb)
{
	const struct block_q5_K *x = vx;

	for (int64_t i = 0; i < nb; i++) {
		const float d = quant_h2f(x[i].d);
		const float min = quant_h2f(x[i].dmin);
		const uint8_t *ql = x[i].qs;
		const uint8_t *qh = x[i].qh;
		uint8_t u1 = 1, u2 = 2, sc, m;

		for (int is = 0; is < QK_K / 32; is += 2, ql += 32) {
			quant_k_scale_min(is, x[i].scales, &sc, &m);
			const float d1 = d * sc, m1 = min * m;
			quant_k_scale_min(is + 1, x[i].scales, &sc, &m);
			const float d2 = d * sc, m2 = min * m;

			for (int l = 0; l < 32; l++)
				*y++ = d1 * ((ql[l] & 0xf) +
					     (qh[l] & u1 ? 16 : 0)) -
				       m1;
			for (int l = 0; l < 32; l++)
				*y++ = d2 * ((ql[l] >> 4) +
					     (qh[l] & u2 ? 16 : 0)) -
				       m2;
			u1 <<= 2;
			u2 <<= 2;
		}
	}
}

void quant_q6_K_to_float(const void *vx, float *y, int64_t nb)
{
	const struct block_q6_K *x = vx;

	for (int64_t i = 0; i < nb; i++) {
		const float d = quant_h2f(x[i].d);
		const uint8_t *ql = x[i].ql;
		const uint8_t *qh = x[i].qh;
		const int8_t *sc = x[i].scales;

		for (int n = 0; n < QK_K; n += 128) {
			for (int l = 0; l < 32; l++) {
				int is = l / 16;
				int q1 = ((ql[l] & 0xf) | ((qh[l] & 3) << 4)) -
					 32;
				int q2 = ((ql[l + 32] & 0xf) |
					  (((qh[l] >> 2) & 3) << 4)) -
					 32;
				int q3 = ((ql[l] >> 4) |
					  (((qh[l] >> 4) & 3) << 4)) -
					 32;
				int q4 = ((ql[l + 32] >> 4) |
					  (((qh[l] >> 6) & 3) << 4)) -
					 32;

				y[l] = d * sc[is] * q1;
				y[l + 32] = d * sc[is + 2] * q2;
				y[l + 64] = d * sc[is + 4] * q3;
				y[l + 96] = d * sc[is + 6] * q4;
			}
			y += 128;
			ql += 64;
			qh += 32;
			sc += 8;
		}
	}
}

void quant_q8_K_to_float(const void *vx, float *y, int64_t nb)
{
	const struct block_q8_K *x = vx;

	for (int64_t i = 0; i < nb; i++)
		for (int j = 0; j < QK_K; j++)
			*y++ = x[i].d * x[i].qs[j];
}

/* ---- Q8_K activations (quantize_row_q8_K_ref) ------------------------------ */

void quant_q8_K_from_float(const float *x, void *vy, int64_t nb)
{
	struct block_q8_K *y = vy;

	for (int64_t i = 0; i < nb; i++, x += QK_K) {
		float max = 0.0f, amax = 0.0f;

		for (int j = 0; j < QK_K; j++) {
			if (fabsf(x[j]) > amax) {
				amax = fabsf(x[j]);
				max = x[j];
			}
		}
		if (!amax) {
			/* ggml leaves bsums as they were; d = 0 hides them */
			memset(&y[i], 0, sizeof(y[i]));
			continue;
		}
		/* -127, not -128: ggml changed it for IQ2_XXS's AVX code */
		const float iscale = -127.f / max;

		for (int j = 0; j < QK_K; j++) {
			int v = quant_nearest_int(iscale * x[j]);

			y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
		}
		for (int j = 0; j < QK_K / 16; j++) {
			int sum = 0;

			for (int l = 0; l < 16; l++)
				sum += y[i].qs[16 * j + l];
			y[i].bsums[j] = (int16_t)sum;
		}
		y[i].d = 1 / iscale;
	}
}
