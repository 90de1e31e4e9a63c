// SPDX-License-Identifier: MIT
/*
 * The GEMM's data layouts (gemm_k.h): the packed panels of Q8_0, Q4_K and
 * Q6_K (gemm.h) and the packed activations. Plain C, the same at every
 * level: a panel packed at load is read by whichever level's kernels
 * run. These run at load, on reads of a packed matrix's bytes and once
 * per token of a matmul, not per block.
 */
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#include "cpu.h"
#include "gemm.h"
#include "gemm_k.h"
#include "../quant/quant_internal.h"

#if defined(__AVX2__)
/*
 * Units [0, count) rounded down to 8 of gemm_pack_units, in 8 x 8 dword
 * tiles (unpack 32, unpack 64, permute 128); returns how many it did.
 */
static int gemm_pack_tiles(const uint8_t *src, size_t row_bytes, int u0,
			   int count, uint8_t *out)
{
	int k;

	for (k = 0; k + 8 <= count; k += 8) {
		int g;

		for (g = 0; g < 2; g++) {
			const uint8_t *b = src + row_bytes * (size_t)(8 * g) +
					   4 * (size_t)k;
			__m256i x[8], t[8], q[8];
			int i;

			for (i = 0; i < 8; i++)
				x[i] = _mm256_loadu_si256(
					(const __m256i *)(b +
							  row_bytes *
								  (size_t)i));
			for (i = 0; i < 8; i += 2) {
				t[i] = _mm256_unpacklo_epi32(x[i], x[i + 1]);
				t[i + 1] = _mm256_unpackhi_epi32(x[i],
								 x[i + 1]);
			}
			for (i = 0; i < 8; i += 4) {
				q[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
				q[i + 1] = _mm256_unpackhi_epi64(t[i],
								 t[i + 2]);
				q[i + 2] = _mm256_unpacklo_epi64(t[i + 1],
								 t[i + 3]);
				q[i + 3] = _mm256_unpackhi_epi64(t[i + 1],
								 t[i + 3]);
			}
			for (i = 0; i < 4; i++) {
				uint8_t *o = out +
					     GEMM_UNIT * (size_t)(u0 + k + i) +
					     32 * g;

				_mm256_storeu_si256(
					(__m256i *)o,
					_mm256_permute2x128_si256(
						q[i], q[i + 4], 0x20));
				_mm256_storeu_si256(
					(__m256i *)(o + GEMM_UNIT * 4),
					_mm256_permute2x128_si256(
						q[i], q[i + 4], 0x31));
			}
		}
	}
	return k;
}
#elif defined(__aarch64__)
/*
 * Units [0, count) rounded down to 4 of gemm_pack_units, in 4 x 4 dword
 * tiles (TRN1/TRN2 of 32 then 64 bits); returns how many it did.
 */
static int gemm_pack_tiles(const uint8_t *src, size_t row_bytes, int u0,
			   int count, uint8_t *out)
{
	int k;

	for (k = 0; k + 4 <= count; k += 4) {
		int g;

		for (g = 0; g < CPU_GEMM_ROWS / 4; g++) {
			const uint8_t *b = src + row_bytes * (size_t)(4 * g) +
					   4 * (size_t)k;
			uint8_t *o = out + GEMM_UNIT * (size_t)(u0 + k) +
				     16 * g;
			uint32x4_t x[4], t[4];
			int i;

			/* x[i]: units k..k + 3 of row 4g + i */
			for (i = 0; i < 4; i++)
				x[i] = vreinterpretq_u32_u8(
					vld1q_u8(b + row_bytes * (size_t)i));
			t[0] = vtrn1q_u32(x[0], x[1]);
			t[1] = vtrn2q_u32(x[0], x[1]);
			t[2] = vtrn1q_u32(x[2], x[3]);
			t[3] = vtrn2q_u32(x[2], x[3]);
			x[0] = vreinterpretq_u32_u64(
				vtrn1q_u64(vreinterpretq_u64_u32(t[0]),
					   vreinterpretq_u64_u32(t[2])));
			x[1] = vreinterpretq_u32_u64(
				vtrn1q_u64(vreinterpretq_u64_u32(t[1]),
					   vreinterpretq_u64_u32(t[3])));
			x[2] = vreinterpretq_u32_u64(
				vtrn2q_u64(vreinterpretq_u64_u32(t[0]),
					   vreinterpretq_u64_u32(t[2])));
			x[3] = vreinterpretq_u32_u64(
				vtrn2q_u64(vreinterpretq_u64_u32(t[1]),
					   vreinterpretq_u64_u32(t[3])));
			/* x[i]: unit k + i of rows 4g..4g + 3 */
			for (i = 0; i < 4; i++)
				vst1q_u8(o + GEMM_UNIT * i,
					 vreinterpretq_u8_u32(x[i]));
		}
	}
	return k;
}
#else
static int gemm_pack_tiles(const uint8_t *src, size_t row_bytes, int u0,
			   int count, uint8_t *out)
{
	return 0;
}
#endif

/*
 * Units [u0, u0 + count) of one block of the 16 rows into out (the
 * block's first unit at out), unit u0 + k from block bytes src_off + 4k
 * of each row: the 16 x count dword transpose every pack is. In 8 x 8
 * tiles where the build has AVX2 (x86-64-v3: every x86 build of llmfs),
 * in 4 x 4 ones on aarch64 (NEON is its baseline), a dword at a time
 * otherwise; the same bytes either way. Packing runs at load, over every
 * weight byte: at 2.7 GB/s a core a dword at a time, it would add
 * seconds to an 8B model's open (engine.md).
 */
static void gemm_pack_units(const uint8_t *src, size_t row_bytes, size_t at,
			    int u0, int count, size_t src_off, uint8_t *out)
{
	int r, k;

	src += at + src_off;
	for (k = gemm_pack_tiles(src, row_bytes, u0, count, out); k < count;
	     k++)
		for (r = 0; r < CPU_GEMM_ROWS; r++)
			memcpy(out + GEMM_UNIT * (size_t)(u0 + k) + 4 * r,
			       src + row_bytes * (size_t)r + 4 * (size_t)k, 4);
}

/* The byte of a block_q4_K whose dword packed unit u holds (gemm.h). */
static size_t q4kp_block_off(int u)
{
	return u < Q4KP_QS_UNITS ? 16 + 4 * (size_t)u :
				   4 * (size_t)(u - Q4KP_D);
}

void cpu_q4k_pack(int64_t n, const void *rows, size_t row_bytes, void *panel)
{
	const uint8_t *src = rows;
	uint8_t *out = panel;
	const int64_t nb = n / GEMM_QK;
	int64_t ib;

	/* the qs dwords (block bytes 16..), then d, dmin and the scales */
	for (ib = 0; ib < nb; ib++, out += Q4KP_SB) {
		const size_t at = GEMM_Q4K_BLOCK * (size_t)ib;

		gemm_pack_units(src, row_bytes, at, 0, Q4KP_QS_UNITS, 16, out);
		gemm_pack_units(src, row_bytes, at, Q4KP_D,
				Q4K_PACKED_UNITS - Q4KP_D, 0, out);
	}
}

void cpu_q4k_unpack_row(int64_t n, const void *panel, int r, void *row)
{
	const uint8_t *p = panel;
	uint8_t *b = row;
	const int64_t nb = n / GEMM_QK;
	int64_t ib;
	int u;

	for (ib = 0; ib < nb; ib++, p += Q4KP_SB, b += GEMM_Q4K_BLOCK)
		for (u = 0; u < Q4K_PACKED_UNITS; u++)
			memcpy(b + q4kp_block_off(u), p + GEMM_UNIT * u + 4 * r,
			       4);
}

void cpu_q6k_pack(int64_t n, const void *rows, size_t row_bytes, void *panel)
{
	const int64_t nb = n / GEMM_QK;
	const uint8_t *src = rows;
	uint8_t *out = panel, *dd = out + Q6KP_SB * nb;
	int64_t ib;
	int r;

	for (ib = 0; ib < nb; ib++, out += Q6KP_SB, dd += Q6KP_D_BYTES) {
		const size_t at = GEMM_Q6K_BLOCK * (size_t)ib;

		gemm_pack_units(src, row_bytes, at, 0, Q6K_PACKED_UNITS, 0,
				out);
		for (r = 0; r < CPU_GEMM_ROWS; r++)
			memcpy(dd + 2 * r,
			       src + row_bytes * r + at + Q6KP_D_OFF, 2);
	}
}

void cpu_q6k_unpack_row(int64_t n, const void *panel, int r, void *row)
{
	const int64_t nb = n / GEMM_QK;
	const uint8_t *p = panel, *dd = p + Q6KP_SB * nb;
	uint8_t *b = row;
	int64_t ib;
	int u;

	for (ib = 0; ib < nb; ib++, p += Q6KP_SB, b += GEMM_Q6K_BLOCK) {
		for (u = 0; u < Q6K_PACKED_UNITS; u++)
			memcpy(b + 4 * u, p + GEMM_UNIT * u + 4 * r, 4);
		memcpy(b + Q6KP_D_OFF, dd + Q6KP_D_BYTES * ib + 2 * r, 2);
	}
}

void cpu_q80_pack(int64_t n, const void *rows, size_t row_bytes, void *panel)
{
	const int64_t nb = n / 32;
	const uint8_t *src = rows;
	uint8_t *out = panel, *dd = out + Q80P_SB * nb;
	int64_t ib;
	int r;

	for (ib = 0; ib < nb; ib++, out += Q80P_SB, dd += Q80P_D_BYTES) {
		const size_t at = GEMM_Q80_BLOCK * (size_t)ib;

		gemm_pack_units(src, row_bytes, at, 0, 8, 2, out);
		for (r = 0; r < CPU_GEMM_ROWS; r++)
			memcpy(dd + 2 * r, src + row_bytes * r + at, 2);
	}
}

void cpu_q80_unpack_row(int64_t n, const void *panel, int r, void *row)
{
	const int64_t nb = n / 32;
	const uint8_t *p = panel, *dd = p + Q80P_SB * nb;
	uint8_t *b = row;
	int64_t ib;
	int u;

	for (ib = 0; ib < nb; ib++, p += Q80P_SB, b += GEMM_Q80_BLOCK) {
		for (u = 0; u < 8; u++)
			memcpy(b + 2 + 4 * u, p + GEMM_UNIT * u + 4 * r, 4);
		memcpy(b, dd + Q80P_D_BYTES * ib + 2 * r, 2);
	}
}

/* ---- activations ------------------------------------------------------- */

size_t cpu_q4k_act_bytes(int64_t n)
{
	return cpu_align64((size_t)(n / GEMM_QK) * (Q4K_ACT + sizeof(float)));
}

size_t cpu_q6k_act_bytes(int64_t n)
{
	return cpu_align64((size_t)(n / GEMM_QK) * (Q6K_ACT + sizeof(float)));
}

/* bsums[i] of a Q8_K block */
static int gemm_q8k_bsum(const uint8_t *blk, int i)
{
	int16_t v;

	memcpy(&v, blk + 4 + GEMM_QK + 2 * i, sizeof(v));
	return v;
}

void cpu_q4k_act_pack(int64_t n, const void *a, void *dst)
{
	const uint8_t *src = a;
	uint8_t *out = dst;
	int64_t ib, nb = n / GEMM_QK;
	int k;

	for (ib = 0; ib < nb; ib++, src += GEMM_Q8K_BLOCK) {
		uint8_t *o = out + Q4K_ACT * ib;
		uint32_t pair[4];

		/* |bsum| <= 16 * 127 (Q8_K's quants), so a pair fits int16 */
		for (k = 0; k < 4; k++) {
			int lo = gemm_q8k_bsum(src, 4 * k) +
				 gemm_q8k_bsum(src, 4 * k + 1);
			int hi = gemm_q8k_bsum(src, 4 * k + 2) +
				 gemm_q8k_bsum(src, 4 * k + 3);

			pair[k] = (uint32_t)(uint16_t)lo |
				  (uint32_t)(uint16_t)hi << 16;
		}
		memcpy(o, src + 4, GEMM_QK);
		memcpy(o + GEMM_QK, pair, sizeof(pair));
		memcpy(out + Q4K_ACT * nb + sizeof(float) * ib, src,
		       sizeof(float));
	}
}

void cpu_q6k_act_pack(int64_t n, const void *a, void *dst)
{
	const uint8_t *src = a;
	uint8_t *out = dst;
	int64_t ib, nb = n / GEMM_QK;
	int g;

	for (ib = 0; ib < nb; ib++, src += GEMM_Q8K_BLOCK) {
		uint8_t *o = out + Q6K_ACT * ib;
		int32_t start[16];

		for (g = 0; g < 16; g++)
			start[g] = -32 * gemm_q8k_bsum(src, g);
		memcpy(o, src + 4, GEMM_QK);
		memcpy(o + GEMM_QK, start, sizeof(start));
		memcpy(out + Q6K_ACT * nb + sizeof(float) * ib, src,
		       sizeof(float));
	}
}

size_t cpu_q80_act_bytes(int64_t n)
{
	return cpu_align64((size_t)n * 2 + (size_t)(n / 32) * 8);
}

void cpu_q80_act_pack(int64_t n, const void *a, void *dst)
{
	const uint8_t *b = a;
	const int64_t nb = n / 32;
	int8_t *qs = dst;
	float *da = (float *)(qs + n);
	int32_t *corr = (int32_t *)(da + nb), *unit = corr + nb;
	int64_t i;
	int k, j;

	for (i = 0; i < nb; i++, b += GEMM_Q80_BLOCK) {
		const int8_t *q = (const int8_t *)(b + 2);
		uint16_t h;
		int32_t sum = 0;

		memcpy(qs + 32 * i, q, 32);
		for (k = 0; k < 8; k++) {
			int32_t s4 = 0;

			for (j = 0; j < 4; j++)
				s4 += q[4 * k + j];
			unit[8 * i + k] = -128 * s4;
			sum += s4;
		}
		memcpy(&h, b, 2);
		da[i] = quant_h2f(h);
		corr[i] = -128 * sum;
	}
}
