// SPDX-License-Identifier: MIT
/*
 * The scalar reference dots: every weight type's dot product in ggml's
 * portable order (ggml-cpu's quants.c ggml_vec_dot_*_generic, vec.cpp
 * without GGML_SIMD), the traits table's vec_dot_ref. Only quant_vec_dot
 * reaches them, for tests (test_quant, test_quant_ggml hold them to
 * libggml's generic kernels); the forward pass runs the reference
 * build's order instead (vec_dot: quant_x86.c, dot.c, and a backend's
 * vector kernels of the same bits).
 *
 *   legacy         exact integer sums per block, then one float
 *                  multiply-add per block
 *   K-quants       eight int32 lanes per super-block, scaled into eight
 *                  float lanes, summed at the end
 *   F32/F16/BF16   each product rounded to float, summed in double
 */
#include <math.h>
#include <string.h>

#include "quant_internal.h"

/*
 * The float dots follow ggml's scalar path (vec.cpp without GGML_SIMD):
 * each product rounded to float, then summed in double (ggml_float).
 */
float quant_f32_dot_ref(int64_t n, const void *vx, const void *vy)
{
	const float *x = vx, *y = vy;
	double sum = 0.0;

	for (int64_t i = 0; i < n; i++)
		sum += (double)(x[i] * y[i]);
	return (float)sum;
}

float quant_f16_dot_ref(int64_t n, const void *vx, const void *vy)
{
	const uint16_t *x = vx, *y = vy;
	double sum = 0.0;

	for (int64_t i = 0; i < n; i++)
		sum += (double)(quant_h2f(x[i]) * quant_h2f(y[i]));
	return (float)sum;
}

float quant_bf16_dot_ref(int64_t n, const void *vx, const void *vy)
{
	const uint16_t *x = vx, *y = vy;
	double sum = 0.0;

	for (int64_t i = 0; i < n; i++)
		sum += (double)(quant_bf16_to_fp32(x[i]) *
				quant_bf16_to_fp32(y[i]));
	return (float)sum;
}

/* ---- dot products (ggml_vec_dot_*_generic) -------------------------------- */

float quant_q4_0_dot_ref(int64_t nb, const void *vw, const void *va)
{
	const struct block_q4_0 *w = vw;
	const struct block_q8_0 *a = va;
	float sum = 0.0f;

	for (int64_t i = 0; i < nb; i++) {
		int sq = 0, sa = 0;

		/*
		 * sum((q - 8) * a) as sum(q * a) - 8 * sum(a): the same
		 * integer. GCC 12 with AVX-VNNI (-march=native on Zen 4)
		 * turns the first form into vpdpbusd with the wrong
		 * signedness; test_quant catches it.
		 */
		for (int j = 0; j < QK4_0 / 2; j++) {
			sq += (w[i].qs[j] & 0x0f) * a[i].qs[j] +
			      (w[i].qs[j] >> 4) * a[i].qs[j + 16];
			sa += a[i].qs[j] + a[i].qs[j + 16];
		}
		sum += (sq - 8 * sa) * quant_h2f(w[i].d) * quant_h2f(a[i].d);
	}
	return sum;
}

float quant_q4_1_dot_ref(int64_t nb, const void *vw, const void *va)
{
	const struct block_q4_1 *w = vw;
	const struct block_q8_1 *a = va;
	float sum = 0.0f;

	for (int64_t i = 0; i < nb; i++) {
		int s0 = 0, s1 = 0;

		for (int j = 0; j < QK4_1 / 2; j++) {
			s0 += (w[i].qs[j] & 0x0f) * a[i].qs[j];
			s1 += (w[i].qs[j] >> 4) * a[i].qs[j + 16];
		}
		sum += (quant_h2f(w[i].d) * quant_h2f(a[i].d)) * (s0 + s1) +
		       quant_h2f(w[i].m) * quant_h2f(a[i].s);
	}
	return sum;
}

float quant_q5_0_dot_ref(int64_t nb, const void *vw, const void *va)
{
	const struct block_q5_0 *w = vw;
	const struct block_q8_0 *a = va;
	float sum = 0.0f;

	for (int64_t i = 0; i < nb; i++) {
		const uint32_t qh = quant_qh(w[i].qh);
		int s0 = 0, s1 = 0;

		for (int j = 0; j < QK5_0 / 2; j++) {
			int x0 = (w[i].qs[j] & 0x0f) |
				 (((qh >> j) << 4) & 0x10);
			int x1 = (w[i].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);

			s0 += (x0 - 16) * a[i].qs[j];
			s1 += (x1 - 16) * a[i].qs[j + 16];
		}
		sum += (quant_h2f(w[i].d) * quant_h2f(a[i].d)) * (s0 + s1);
	}
	return sum;
}

float quant_q5_1_dot_ref(int64_t nb, const void *vw, const void *va)
{
	const struct block_q5_1 *w = vw;
	const struct block_q8_1 *a = va;
	float sum = 0.0f;

	for (int64_t i = 0; i < nb; i++) {
		const uint32_t qh = quant_qh(w[i].qh);
		int s0 = 0, s1 = 0;

		for (int j = 0; j < QK5_1 / 2; j++) {
			int x0 = (w[i].qs[j] & 0x0f) |
				 (((qh >> j) << 4) & 0x10);
			int x1 = (w[i].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);

			s0 += x0 * a[i].qs[j];
			s1 += x1 * a[i].qs[j + 16];
		}
		sum += (quant_h2f(w[i].d) * quant_h2f(a[i].d)) * (s0 + s1) +
		       quant_h2f(w[i].m) * quant_h2f(a[i].s);
	}
	return sum;
}

float quant_q8_0_dot_ref(int64_t nb, const void *vw, const void *va)
{
	const struct block_q8_0 *w = vw;
	const struct block_q8_0 *a = va;
	float sum = 0.0f;

	for (int64_t i = 0; i < nb; i++) {
		int s = 0;

		for (int j = 0; j < QK8_0; j++)
			s += w[i].qs[j] * a[i].qs[j];
		sum += s * (quant_h2f(w[i].d) * quant_h2f(a[i].d));
	}
	return sum;
}
/* ---- dot products (ggml_vec_dot_q*_K_q8_K_generic) ------------------------ */

float quant_q2_K_dot_ref(int64_t nb, const void *vw, const void *va)
{
	const struct block_q2_K *w = vw;
	const struct block_q8_K *a = va;
	float sum = 0.0f;

	for (int64_t i = 0; i < nb; i++) {
		const uint8_t *q2 = w[i].qs;
		const int8_t *q8 = a[i].qs;
		const uint8_t *sc = w[i].scales;
		int summs = 0, isum = 0, is = 0;

		for (int j = 0; j < 16; j++)
			summs += a[i].bsums[j] * (sc[j] >> 4);

		const float dall = a[i].d * quant_h2f(w[i].d);
		const float dmin = a[i].d * quant_h2f(w[i].dmin);

		for (int k = 0; k < QK_K / 128; k++, q2 += 32) {
			for (int shift = 0; shift < 8; shift += 2, q8 += 32) {
				for (int h = 0; h < 32; h += 16) {
					int isuml = 0;

					for (int l = h; l < h + 16; l++)
						isuml += q8[l] *
							 ((q2[l] >> shift) & 3);
					isum += (sc[is++] & 0xf) * isuml;
				}
			}
		}
		sum += dall * isum - dmin * summs;
	}
	return sum;
}

/*
 * Q3_K..Q6_K: the weights unpacked to int8 values aux8[256], multiplied
 * with the activations and accumulated per lane l = element % 8 into
 * aux32[8] (exact integers), then each lane scaled by d in float and kept in
 * sums[8] across super-blocks: the generic code's order, which the
 * compiler vectorizes.
 */
static void quant_k_lanes(const int8_t *aux8, const int8_t *q8,
			  const int scales[16], int32_t aux32[8])
{
	for (int l = 0; l < 8; l++)
		aux32[l] = 0;
	for (int g = 0; g < 16; g++) {
		const int8_t *p = aux8 + 16 * g, *q = q8 + 16 * g;

		for (int l = 0; l < 8; l++)
			aux32[l] += scales[g] *
				    (p[l] * q[l] + p[l + 8] * q[l + 8]);
	}
}

static float quant_k_finish(const float sums[8], float sum)
{
	for (int l = 0; l < 8; l++)
		sum += sums[l];
	return sum;
}

float quant_q3_K_dot_ref(int64_t nb, const void *vw, const void *va)
{
	const struct block_q3_K *w = vw;
	const struct block_q8_K *a = va;
	float sums[8] = { 0 };
	int8_t aux8[QK_K], sc8[16];
	int32_t aux32[8];
	int scales[16];

	for (int64_t i = 0; i < nb; i++) {
		const uint8_t *q3 = w[i].qs;
		int8_t *p = aux8;
		uint8_t m = 1;

		for (int j = 0; j < QK_K; j += 128, q3 += 32) {
			for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
				for (int l = 0; l < 32; l++)
					p[l] = (int8_t)(((q3[l] >> shift) & 3) -
							(w[i].hmask[l] & m ?
								 0 :
								 4));
				p += 32;
			}
		}
		quant_q3_K_scales(w[i].scales, sc8);
		for (int j = 0; j < 16; j++)
			scales[j] = sc8[j];
		quant_k_lanes(aux8, a[i].qs, scales, aux32);

		const float d = quant_h2f(w[i].d) * a[i].d;

		for (int l = 0; l < 8; l++)
			sums[l] += d * aux32[l];
	}
	return quant_k_finish(sums, 0.0f);
}

/* Q4_K and Q5_K: 8 scales and 8 mins, and the mins against bsums. */
static void quant_q45_K_tail(const uint8_t *scales12,
			     const struct block_q8_K *a, const int8_t *aux8,
			     int32_t aux32[8], int *sumi)
{
	int scales[16];
	uint8_t sc, m;

	*sumi = 0;
	for (int j = 0; j < 8; j++) {
		quant_k_scale_min(j, scales12, &sc, &m);
		scales[2 * j] = scales[2 * j + 1] = sc;
		*sumi += (a->bsums[2 * j] + a->bsums[2 * j + 1]) * m;
	}
	quant_k_lanes(aux8, a->qs, scales, aux32);
}

float quant_q4_K_dot_ref(int64_t nb, const void *vw, const void *va)
{
	const struct block_q4_K *w = vw;
	const struct block_q8_K *a = va;
	float sums[8] = { 0 }, sum = 0.0f;
	int8_t aux8[QK_K];
	int32_t aux32[8];
	int sumi;

	for (int64_t i = 0; i < nb; i++) {
		const uint8_t *q4 = w[i].qs;

		for (int j = 0; j < QK_K; j += 64, q4 += 32) {
			for (int l = 0; l < 32; l++) {
				aux8[j + l] = (int8_t)(q4[l] & 0xf);
				aux8[j + l + 32] = (int8_t)(q4[l] >> 4);
			}
		}
		quant_q45_K_tail(w[i].scales, &a[i], aux8, aux32, &sumi);

		const float d = quant_h2f(w[i].d) * a[i].d;

		for (int l = 0; l < 8; l++)
			sums[l] += d * aux32[l];

		const float dmin = quant_h2f(w[i].dmin) * a[i].d;

		sum -= dmin * sumi;
	}
	return quant_k_finish(sums, sum);
}

float quant_q5_K_dot_ref(int64_t nb, const void *vw, const void *va)
{
	const struct block_q5_K *w = vw;
	const struct block_q8_K *a = va;
	float sums[8] = { 0 }, sum = 0.0f;
	int8_t aux8[QK_K];
	int32_t aux32[8];
	int sumi;

	for (int64_t i = 0; i < nb; i++) {
		const uint8_t *q4 = w[i].qs;
		const uint8_t *hm = w[i].qh;
		uint8_t m = 1;

		for (int j = 0; j < QK_K; j += 64, q4 += 32, m <<= 2) {
			for (int l = 0; l < 32; l++) {
				aux8[j + l] = (int8_t)((q4[l] & 0xf) +
						       (hm[l] & m ? 16 : 0));
				aux8[j + l + 32] =
					(int8_t)((q4[l] >> 4) +
						 (hm[l] & (m << 1) ? 16 : 0));
			}
		}
		quant_q45_K_tail(w[i].scales, &a[i], aux8, aux32, &sumi);

		const float d = quant_h2f(w[i].d) * a[i].d;

		for (int l = 0; l < 8; l++)
			sums[l] += d * aux32[l];

		const float dmin = quant_h2f(w[i].dmin) * a[i].d;

		sum -= dmin * sumi;
	}
	return quant_k_finish(sums, sum);
}

float quant_q6_K_dot_ref(int64_t nb, const void *vw, const void *va)
{
	const struct block_q6_K *w = vw;
	const struct block_q8_K *a = va;
	float sums[8] = { 0 };
	int8_t aux8[QK_K];
	int32_t aux32[8];
	int scales[16];

	for (int64_t i = 0; i < nb; i++) {
		const uint8_t *ql = w[i].ql;
		const uint8_t *qh = w[i].qh;

		for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
			for (int l = 0; l < 32; l++) {
				aux8[j + l] = (int8_t)(((ql[l] & 0xf) |
							((qh[l] & 3) << 4)) -
						       32);
				aux8[j + l + 32] =
					(int8_t)(((ql[l + 32] & 0xf) |
						  (((qh[l] >> 2) & 3) << 4)) -
						 32);
				aux8[j + l + 64] = (int8_t)(((ql[l] >> 4) |
							     (((qh[l] >> 4) & 3)
							      << 4)) -
							    32);
				aux8[j + l + 96] = (int8_t)(((ql[l + 32] >> 4) |
							     (((qh[l] >> 6) & 3)
							      << 4)) -
							    32);
			}
		}
		for (int j = 0; j < 16; j++)
			scales[j] = w[i].scales[j];
		quant_k_lanes(aux8, a[i].qs, scales, aux32);

		const float d = quant_h2f(w[i].d) * a[i].d;

		for (int l = 0; l < 8; l++)
			sums[l] += d * aux32[l];
	}
	return quant_k_finish(sums, 0.0f);
}
