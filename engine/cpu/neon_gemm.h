/* SPDX-License-Identifier: MIT */
/*
 * The GEMM kernels of the two NEON levels (gemm.h; neon.h) on the packed
 * layouts of Q8_0, Q4_K and Q6_K (gemm_layout.c), bit for bit the floats
 * of the scalar level's (gemm_scalar.c) and the x86 ones. Written once,
 * included once per level: by gemm_neon.c with NEON_DOTPROD 0 and by
 * gemm_neon_dotprod.c with NEON_DOTPROD 1 (and the dotprod target).
 *
 * A 64-byte unit holds one dword of each of 16 rows; here its four q
 * registers are rows 0..3, 4..7, 8..11 and 12..15, and a kernel makes
 * four passes over a panel, one per quarter, with four rows in the
 * lanes (the panel is 2-50 KB: the later passes read it from L1 or L2).
 * Per unit and token, SDOT (or cpu_qdot16 without it) adds each row's
 * four products of the unit's dword and the token's four bytes into the
 * row's lane; the token's bytes come as one 16-byte load whose dwords
 * are taken by lane (vdotq_laneq_s32), so four units share a load.
 * Every integer sum is exact whatever its order (the scalar level's
 * int32 sums, never in int16), so any weight and activation bytes are
 * taken; only the float steps' order matters, and it is gemm.h's.
 *
 * A per-step panel (a matrix not packed at load) is packed into the
 * same layout first, so one set of kernels serves both.
 */
#include <arm_neon.h>
#include <string.h>

#include "cpu.h"
#include "gemm.h"
#include "gemm_k.h"
#include "neon.h"
#include "reduce_neon.h"

#if NEON_DOTPROD
#define GEMM_NEON(name) name##_neon_dotprod
#else
#define GEMM_NEON(name) name##_neon
#endif

#define GEMM_INLINE inline __attribute__((always_inline))
#define GEMM_UNROLL _Pragma("GCC unroll 16")
/* tokens a register tile holds (each kernel's arrays are sized by it) */
#define GEMM_TILE 4

/*
 * acc lane r += w[4r..4r+3] . dword k of a (k a constant 0..3: the
 * lane-indexed SDOT, or the dword broadcast for cpu_qdot16)
 */
#if NEON_DOTPROD
#define GEMM_DOT(acc, w, a, k) vdotq_laneq_s32(acc, w, a, k)
#else
#define GEMM_DOT(acc, w, a, k) \
	cpu_qdot16(acc, w, \
		   vreinterpretq_s8_s32( \
			   vdupq_laneq_s32(vreinterpretq_s32_s8(a), k)))
#endif
/* acc += w[j + k] . dword k of a for k = 0..3 */
#define GEMM_DOT4(acc, w, j, a) \
	GEMM_DOT(GEMM_DOT(GEMM_DOT(GEMM_DOT(acc, (w)[(j)], a, 0), \
				   (w)[(j) + 1], a, 1), \
			  (w)[(j) + 2], a, 2), \
		 (w)[(j) + 3], a, 3)

/* fn(T, ...) for the tile of c (1..4) tokens: T a constant in each */
#define GEMM_TILES(fn, c, ...) \
	do { \
		switch (c) { \
		case 4: fn(4, __VA_ARGS__); break; \
		case 3: fn(3, __VA_ARGS__); break; \
		case 2: fn(2, __VA_ARGS__); break; \
		default: fn(1, __VA_ARGS__); break; \
		} \
	} while (0)

/*
 * What every type's rows function does around its tile: the panel's
 * quarters of four rows, each against the tokens in tiles of up to
 * GEMM_TILE, tile(T, len, panel, q, acts of the tile, ab, y, row0, nr,
 * ahead) with T constant; the prefetch of what comes next, `steps` steps
 * a pass, is spread over the quarters' passes, each run by its first
 * tile (pf.bytes = 0 after it): the memory stays busy while the later
 * quarters compute from cache.
 */
#define GEMM_ROWS(tile, len, panel, nr, a, ab, nt, y, row0, ahead, \
		  ahead_bytes, steps) \
	do { \
		const int n_q_ = ((nr) + 3) / 4; /* nr <= 16 */ \
		int q_, t_, c_; \
		for (q_ = 0; q_ < n_q_; q_++) { \
			struct cpu_gemm_ahead pf_ = cpu_gemm_ahead_part( \
				ahead, ahead_bytes, steps, q_, n_q_); \
			for (t_ = 0; t_ < nt; t_ += c_, pf_.bytes = 0) { \
				c_ = nt - t_ < GEMM_TILE ? nt - t_ : \
							   GEMM_TILE; \
				GEMM_TILES(tile, c_, len, panel, q_, \
					   (a) + ab * t_, ab, (y) + t_, row0, \
					   nr, &pf_); \
			} \
		} \
	} while (0)

/* Quarter q (rows 4q..4q + 3) of unit u at p. */
static GEMM_INLINE int8x16_t gemm_quarter(const uint8_t *p, int u, int q)
{
	return vld1q_s8((const int8_t *)(p + GEMM_UNIT * u + 16 * q));
}

static GEMM_INLINE uint32x4_t gemm_quarter32(const uint8_t *p, int u, int q)
{
	return vreinterpretq_u32_s8(gemm_quarter(p, u, q));
}

/* 4 IEEE halves at p as floats (the d's of a quarter's rows). */
static GEMM_INLINE float32x4_t gemm_d4(const uint8_t *p)
{
	uint16_t h[4];

	memcpy(h, p, sizeof(h));
	return cpu_ld_f16_neon(h);
}

/* 16 activation bytes at p (any alignment) */
static GEMM_INLINE int8x16_t gemm_act16(const uint8_t *p)
{
	return vld1q_s8((const int8_t *)p);
}

/* the float at index i of the floats at p (an act form's d's) */
static GEMM_INLINE float gemm_float(const uint8_t *p, int64_t i)
{
	float f;

	memcpy(&f, p + sizeof(float) * (size_t)i, sizeof(f));
	return f;
}

/* Rows 4q.. of a token's result into y + 4q: only rows below nr. */
static GEMM_INLINE void gemm_store(float *y, int q, int nr, float32x4_t v)
{
	const int m = nr - 4 * q;
	float tmp[4];

	if (m >= 4) {
		vst1q_f32(y + 4 * q, v);
		return;
	}
	vst1q_f32(tmp, v);
	memcpy(y + 4 * q, tmp, sizeof(float) * (size_t)(m > 0 ? m : 0));
}

/* Byte k of each lane of v, as int32 lanes (unsigned). */
static GEMM_INLINE int32x4_t gemm_byte(uint32x4_t v, int k)
{
	return vreinterpretq_s32_u32(vandq_u32(
		vshlq_u32(v, vdupq_n_s32(-8 * k)), vdupq_n_u32(0xff)));
}

/* Byte k of each lane of v, as int32 lanes (signed). */
static GEMM_INLINE int32x4_t gemm_sbyte(uint32x4_t v, int k)
{
	return vshrq_n_s32(
		vshlq_s32(vreinterpretq_s32_u32(v), vdupq_n_s32(24 - 8 * k)),
		24);
}

/*
 * hsum8's tree over eight accumulators, lane by lane (rows in lanes):
 * (acc[l] + acc[l + 4]) for l < 4, then (0 + 2) + (1 + 3)
 */
static GEMM_INLINE float32x4_t gemm_hsum8_lanes(const float32x4_t acc[8])
{
	const float32x4_t r0 = vaddq_f32(acc[4], acc[0]);
	const float32x4_t r1 = vaddq_f32(acc[5], acc[1]);
	const float32x4_t r2 = vaddq_f32(acc[6], acc[2]);
	const float32x4_t r3 = vaddq_f32(acc[7], acc[3]);

	return vaddq_f32(vaddq_f32(r0, r2), vaddq_f32(r1, r3));
}

/* ---- Q8_0 -------------------------------------------------------------- */

/*
 * T tokens against quarter q of the panel: acc = fma((float)s, dw * da,
 * acc) per block, s over its eight units.
 */
static GEMM_INLINE void q80_tile(const int T, int64_t n, const uint8_t *p,
				 int q, const uint8_t *a, size_t ab,
				 float *const *y, int64_t row0, int nr,
				 const struct cpu_gemm_ahead *ahead)
{
	const int64_t nb = n / 32;
	const uint8_t *dd = p + Q80P_SB * nb;
	float32x4_t acc[GEMM_TILE];
	int64_t ib;
	int t, j;

	GEMM_UNROLL
	for (t = 0; t < T; t++)
		acc[t] = vdupq_n_f32(0.0f);
	for (ib = 0; ib < nb; ib++) {
		const uint8_t *pb = p + Q80P_SB * ib;
		const float32x4_t dw = gemm_d4(dd + Q80P_D_BYTES * ib + 8 * q);
		int8x16_t w[8];

		cpu_gemm_ahead_step(ahead, ib);
		GEMM_UNROLL
		for (j = 0; j < 8; j++)
			w[j] = gemm_quarter(pb, j, q);
		GEMM_UNROLL
		for (t = 0; t < T; t++) {
			const uint8_t *at = a + ab * t;
			int32x4_t s = vdupq_n_s32(0);

			s = GEMM_DOT4(s, w, 0, gemm_act16(at + 32 * ib));
			s = GEMM_DOT4(s, w, 4, gemm_act16(at + 32 * ib + 16));
			acc[t] = vfmaq_f32(
				acc[t], vcvtq_f32_s32(s),
				vmulq_n_f32(dw, gemm_float(at + n, ib)));
		}
	}
	GEMM_UNROLL
	for (t = 0; t < T; t++)
		gemm_store(y[t] + row0, q, nr, acc[t]);
}

static void q80_rows(int64_t n, const void *panel, int nr, const void *acts,
		     int nt, float *const *y, int64_t row0, const void *ahead,
		     size_t ahead_bytes)
{
	const size_t ab = cpu_q80_act_bytes(n);
	const uint8_t *a = acts;

	GEMM_ROWS(q80_tile, n, panel, nr, a, ab, nt, y, row0, ahead,
		  ahead_bytes, n / 32);
}

/* acc[j] = fma(d, (float)(unit j's lane), acc[j]) for units j.. j + 3 */
#define Q80_EXACT4(acc, d, w, j, a) \
	do { \
		const int32x4_t z = vdupq_n_s32(0); \
		acc[(j)] = vfmaq_f32( \
			acc[(j)], d, \
			vcvtq_f32_s32(GEMM_DOT(z, w[(j)], a, 0))); \
		acc[(j) + 1] = vfmaq_f32( \
			acc[(j) + 1], d, \
			vcvtq_f32_s32(GEMM_DOT(z, w[(j) + 1], a, 1))); \
		acc[(j) + 2] = vfmaq_f32( \
			acc[(j) + 2], d, \
			vcvtq_f32_s32(GEMM_DOT(z, w[(j) + 2], a, 2))); \
		acc[(j) + 3] = vfmaq_f32( \
			acc[(j) + 3], d, \
			vcvtq_f32_s32(GEMM_DOT(z, w[(j) + 3], a, 3))); \
	} while (0)

/*
 * One token in quant_q8_0_dot_x86's order: lane j of a row is unit j's
 * four products, acc[j] = fma(dw * da, lane, acc[j]), then hsum8.
 */
static void q80_exact1(int64_t n, const uint8_t *p, const uint8_t *a, float *y,
		       const void *ahead, size_t ahead_bytes)
{
	const int64_t nb = n / 32;
	/* a step per (quarter, block) */
	const struct cpu_gemm_ahead pf = cpu_gemm_ahead(ahead, ahead_bytes,
							4 * nb);
	const uint8_t *dd = p + Q80P_SB * nb;
	int64_t ib;
	int q, j;

	for (q = 0; q < 4; q++) {
		float32x4_t acc[8];

		GEMM_UNROLL
		for (j = 0; j < 8; j++)
			acc[j] = vdupq_n_f32(0.0f);
		for (ib = 0; ib < nb; ib++) {
			const uint8_t *pb = p + Q80P_SB * ib;
			const float32x4_t d = vmulq_n_f32(
				gemm_d4(dd + Q80P_D_BYTES * ib + 8 * q),
				gemm_float(a + n, ib));
			int8x16_t w[8];

			cpu_gemm_ahead_step(&pf, nb * q + ib);
			GEMM_UNROLL
			for (j = 0; j < 8; j++)
				w[j] = gemm_quarter(pb, j, q);
			Q80_EXACT4(acc, d, w, 0, gemm_act16(a + 32 * ib));
			Q80_EXACT4(acc, d, w, 4, gemm_act16(a + 32 * ib + 16));
		}
		vst1q_f32(y + 4 * q, gemm_hsum8_lanes(acc));
	}
}

/* ---- Q4_K -------------------------------------------------------------- */

/* the nibbles of unit u, quarter q: low (lo) and high (hi) */
static GEMM_INLINE void q4k_unit(const uint8_t *p, int u, int q, int8x16_t *lo,
				 int8x16_t *hi)
{
	const uint8x16_t w = vreinterpretq_u8_s8(gemm_quarter(p, u, q));

	*lo = vreinterpretq_s8_u8(vandq_u8(w, vdupq_n_u8(0x0f)));
	*hi = vreinterpretq_s8_u8(vshrq_n_u8(w, 4));
}

/*
 * Units 8c + 4k.. 8c + 4k + 3 (k 0, 1; the constant g0 = 4k) against
 * each token's four dwords of the chunk: the low nibbles against the
 * quants 64c + 16k.., the high ones against 64c + 32 + 16k..
 */
#define Q4K_QUAD(T, p, c, g0, q, at, ab, lo, hi) \
	do { \
		int8x16_t al[GEMM_TILE], ah[GEMM_TILE], wl, wh; \
		int t_; \
		GEMM_UNROLL \
		for (t_ = 0; t_ < T; t_++) { \
			al[t_] = gemm_act16(at + ab * t_ + 64 * (c) + \
					    4 * (g0)); \
			ah[t_] = gemm_act16(at + ab * t_ + 64 * (c) + 32 + \
					    4 * (g0)); \
		} \
		Q4K_UNIT(T, p, 8 * (c) + (g0), q, al, ah, lo, hi, 0); \
		Q4K_UNIT(T, p, 8 * (c) + (g0) + 1, q, al, ah, lo, hi, 1); \
		Q4K_UNIT(T, p, 8 * (c) + (g0) + 2, q, al, ah, lo, hi, 2); \
		Q4K_UNIT(T, p, 8 * (c) + (g0) + 3, q, al, ah, lo, hi, 3); \
	} while (0)
#define Q4K_UNIT(T, p, u, q, al, ah, lo, hi, k) \
	do { \
		int t2_; \
		q4k_unit(p, u, q, &wl, &wh); \
		GEMM_UNROLL \
		for (t2_ = 0; t2_ < T; t2_++) { \
			lo[t2_] = GEMM_DOT(lo[t2_], wl, al[t2_], k); \
			hi[t2_] = GEMM_DOT(hi[t2_], wh, ah[t2_], k); \
		} \
	} while (0)

/*
 * T tokens against quarter q of a packed Q4_K panel: dot_q4_k_repacked
 * per (row, token). Per pair of sub-blocks (2c, 2c + 1) each of its
 * eight units is unpacked once, its nibbles against each token's bytes,
 * then the two sums times the rows' scales; the mins against the bsum
 * pairs; acc and accm each one FMA a superblock.
 */
static GEMM_INLINE void q4k_tile(const int T, int64_t nb, const uint8_t *p,
				 int q, const uint8_t *a, size_t ab,
				 float *const *y, int64_t row0, int nr,
				 const struct cpu_gemm_ahead *ahead)
{
	const uint32x4_t k1 = vdupq_n_u32(0x3f3f3f3f);
	const uint32x4_t k2 = vdupq_n_u32(0x0f0f0f0f);
	const uint32x4_t k3 = vdupq_n_u32(0x03030303);
	float32x4_t acc[GEMM_TILE], accm[GEMM_TILE];
	int64_t ib;
	int t, c, j;

	GEMM_UNROLL
	for (t = 0; t < T; t++) {
		acc[t] = vdupq_n_f32(0.0f);
		accm[t] = vdupq_n_f32(0.0f);
	}
	for (ib = 0; ib < nb; ib++, p += Q4KP_SB) {
		const uint8_t *at = a + Q4K_ACT * ib;
		const uint32x4_t u1 = gemm_quarter32(p, Q4KP_SC, q);
		const uint32x4_t u2 = gemm_quarter32(p, Q4KP_SC + 1, q);
		const uint32x4_t u3 = gemm_quarter32(p, Q4KP_SC + 2, q);
		const uint32x4_t dd = gemm_quarter32(p, Q4KP_D, q);
		/* ggml's utmp unpacking: sc[j / 4] byte j % 4 = scale j */
		const uint32x4_t sc[2] = {
			vandq_u32(u1, k1),
			vorrq_u32(vandq_u32(u3, k2),
				  vshlq_n_u32(vandq_u32(vshrq_n_u32(u1, 6), k3),
					      4)),
		};
		const uint32x4_t mn[2] = {
			vandq_u32(u2, k1),
			vorrq_u32(vandq_u32(vshrq_n_u32(u3, 4), k2),
				  vshlq_n_u32(vandq_u32(vshrq_n_u32(u2, 6), k3),
					      4)),
		};
		/* d in each dword's low half, dmin in its high one */
		const float32x4_t dw = vcvt_f32_f16(
			vreinterpret_f16_u16(vmovn_u32(dd)));
		const float32x4_t dm = vcvt_f32_f16(
			vreinterpret_f16_u16(vshrn_n_u32(dd, 16)));
		int32x4_t s[GEMM_TILE];

		GEMM_UNROLL
		for (t = 0; t < T; t++)
			s[t] = vdupq_n_s32(0);
		for (c = 0; c < 4; c++) {
			const int32x4_t s0 = gemm_byte(sc[c / 2], 2 * (c % 2));
			const int32x4_t s1 = gemm_byte(sc[c / 2],
						       2 * (c % 2) + 1);
			int32x4_t lo[GEMM_TILE], hi[GEMM_TILE];

			cpu_gemm_ahead_step(ahead, 4 * ib + c);
			GEMM_UNROLL
			for (t = 0; t < T; t++) {
				lo[t] = vdupq_n_s32(0);
				hi[t] = vdupq_n_s32(0);
			}
			Q4K_QUAD(T, p, c, 0, q, at, ab, lo, hi);
			Q4K_QUAD(T, p, c, 4, q, at, ab, lo, hi);
			GEMM_UNROLL
			for (t = 0; t < T; t++)
				s[t] = vmlaq_s32(vmlaq_s32(s[t], lo[t], s0),
						 hi[t], s1);
		}
		GEMM_UNROLL
		for (t = 0; t < T; t++) {
			const uint8_t *att = at + ab * t;
			const float d = gemm_float(a + ab * t + Q4K_ACT * nb,
						   ib);
			int16_t bp[8];
			int32x4_t smin = vdupq_n_s32(0);

			/* sub-block j's bsum pair sum (gemm_k.h) */
			memcpy(bp, att + GEMM_QK, sizeof(bp));
			GEMM_UNROLL
			for (j = 0; j < 8; j++)
				smin = vmlaq_n_s32(smin,
						   gemm_byte(mn[j / 4], j % 4),
						   bp[j]);
			acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(s[t]),
					   vmulq_n_f32(dw, d));
			accm[t] = vfmaq_f32(accm[t], vcvtq_f32_s32(smin),
					    vmulq_n_f32(dm, d));
		}
	}
	GEMM_UNROLL
	for (t = 0; t < T; t++)
		gemm_store(y[t] + row0, q, nr, vsubq_f32(acc[t], accm[t]));
}

static void q4k_rows(int64_t n, const void *panel, int nr, const void *acts,
		     int nt, float *const *y, int64_t row0, const void *ahead,
		     size_t ahead_bytes)
{
	const size_t ab = cpu_q4k_act_bytes(n);
	const int64_t nb = n / GEMM_QK;
	const uint8_t *a = acts;

	GEMM_ROWS(q4k_tile, nb, panel, nr, a, ab, nt, y, row0, ahead,
		  ahead_bytes, 4 * nb);
}

/* ---- Q6_K -------------------------------------------------------------- */

/*
 * Unit i of group 8hs + 2k + h (elements 128 hs + 32k + 16h + 4i..) of
 * quarter q as bytes 0..63: ql's low nibbles (k < 2) or high ones, below
 * qh's bits 2k, 2k + 1 (dequantize_row_q6_K).
 */
static GEMM_INLINE int8x16_t q6k_unit(const uint8_t *p, int q, int hs, int h,
				      int k, int i)
{
	uint8x16_t ql = vreinterpretq_u8_s8(
		gemm_quarter(p, 16 * hs + 8 * (k % 2) + 4 * h + i, q));
	uint8x16_t qh = vreinterpretq_u8_s8(
		gemm_quarter(p, Q6KP_QH + 8 * hs + 4 * h + i, q));

	if (k >= 2)
		ql = vshrq_n_u8(ql, 4);
	qh = vshlq_u8(qh, vdupq_n_s8((int8_t)(-2 * k)));
	return vreinterpretq_s8_u8(
		vorrq_u8(vandq_u8(ql, vdupq_n_u8(0x0f)),
			 vshlq_n_u8(vandq_u8(qh, vdupq_n_u8(3)), 4)));
}

/* group g's scale of quarter q's rows (signed) */
static GEMM_INLINE int32x4_t q6k_scale(const uint8_t *p, int q, int g)
{
	return gemm_sbyte(gemm_quarter32(p, Q6KP_SC + g / 4, q), g % 4);
}

/* the act form's -32 bsum[g] (gemm_k.h) */
static GEMM_INLINE int32_t q6k_start(const uint8_t *at, int g)
{
	int32_t v;

	memcpy(&v, at + GEMM_QK + 4 * g, sizeof(v));
	return v;
}

/*
 * T tokens against quarter q of a packed Q6_K panel, gemm.h's order: per
 * group its four units made once; per token the group's sum starts at
 * -32 bsum, takes the four units' products, and goes into s times the
 * group's scale; acc = fma(s, dw * da, acc).
 */
static GEMM_INLINE void q6k_tile(const int T, int64_t nb, const uint8_t *p,
				 int q, const uint8_t *a, size_t ab,
				 float *const *y, int64_t row0, int nr,
				 const struct cpu_gemm_ahead *ahead)
{
	const uint8_t *dd = p + Q6KP_SB * nb;
	float32x4_t acc[GEMM_TILE];
	int64_t ib;
	int t, j, k, i;

	GEMM_UNROLL
	for (t = 0; t < T; t++)
		acc[t] = vdupq_n_f32(0.0f);
	for (ib = 0; ib < nb; ib++, p += Q6KP_SB) {
		const uint8_t *at = a + Q6K_ACT * ib;
		const float32x4_t dw = gemm_d4(dd + Q6KP_D_BYTES * ib + 8 * q);
		int32x4_t s[GEMM_TILE];

		GEMM_UNROLL
		for (t = 0; t < T; t++)
			s[t] = vdupq_n_s32(0);
		for (j = 0; j < 4; j++) {
			const int hs = j / 2, h = j % 2;

			cpu_gemm_ahead_step(ahead, 4 * ib + j);
			GEMM_UNROLL
			for (k = 0; k < 4; k++) {
				const int g = 8 * hs + 2 * k + h;
				const int32x4_t sc = q6k_scale(p, q, g);
				int8x16_t w[4];

				GEMM_UNROLL
				for (i = 0; i < 4; i++)
					w[i] = q6k_unit(p, q, hs, h, k, i);
				GEMM_UNROLL
				for (t = 0; t < T; t++) {
					const uint8_t *att = at + ab * t;
					int32x4_t g4 = vdupq_n_s32(
						q6k_start(att, g));

					g4 = GEMM_DOT4(
						g4, w, 0,
						gemm_act16(att + 16 * g));
					s[t] = vmlaq_s32(s[t], g4, sc);
				}
			}
		}
		GEMM_UNROLL
		for (t = 0; t < T; t++)
			acc[t] = vfmaq_f32(
				acc[t], vcvtq_f32_s32(s[t]),
				vmulq_n_f32(dw, gemm_float(a + ab * t +
								   Q6K_ACT * nb,
							   ib)));
	}
	GEMM_UNROLL
	for (t = 0; t < T; t++)
		gemm_store(y[t] + row0, q, nr, acc[t]);
}

static void q6k_rows(int64_t n, const void *panel, int nr, const void *acts,
		     int nt, float *const *y, int64_t row0, const void *ahead,
		     size_t ahead_bytes)
{
	const size_t ab = cpu_q6k_act_bytes(n);
	const int64_t nb = n / GEMM_QK;
	const uint8_t *a = acts;

	GEMM_ROWS(q6k_tile, nb, panel, nr, a, ab, nt, y, row0, ahead,
		  ahead_bytes, 4 * nb);
}

/* L[4h + i] += sc * (unit i's products with dword i of a), i = 0..3 */
#define Q6K_EXACT4(L, h, sc, w, a) \
	do { \
		const int32x4_t z = vdupq_n_s32(0); \
		L[4 * (h)] = vmlaq_s32(L[4 * (h)], GEMM_DOT(z, w[0], a, 0), \
				       sc); \
		L[4 * (h) + 1] = vmlaq_s32(L[4 * (h) + 1], \
					   GEMM_DOT(z, w[1], a, 1), sc); \
		L[4 * (h) + 2] = vmlaq_s32(L[4 * (h) + 2], \
					   GEMM_DOT(z, w[2], a, 2), sc); \
		L[4 * (h) + 3] = vmlaq_s32(L[4 * (h) + 3], \
					   GEMM_DOT(z, w[3], a, 3), sc); \
	} while (0)

/*
 * One token in cpu_q6_K_neon's order, quarter by quarter: lane l of a row
 * takes elements 4l..4l + 3 of every 32 (unit i of group g goes to lane
 * 4 (g % 2) + i), each times its group's scale, from sc[2l] (-32
 * bsum[2l]) + sc[2l + 1] (-32 bsum[2l + 1]); then acc[l] = fma(d, lane,
 * acc[l]) and hsum8.
 */
static void q6k_exact1(int64_t nb, const uint8_t *p, const uint8_t *a, float *y,
		       const void *ahead, size_t ahead_bytes)
{
	/* a step per (quarter, superblock) */
	const struct cpu_gemm_ahead pf = cpu_gemm_ahead(ahead, ahead_bytes,
							4 * nb);
	const uint8_t *dd = p + Q6KP_SB * nb;
	int64_t ib;
	int q, l, j, k, i;

	for (q = 0; q < 4; q++) {
		const uint8_t *pb = p;
		float32x4_t acc[8];

		GEMM_UNROLL
		for (l = 0; l < 8; l++)
			acc[l] = vdupq_n_f32(0.0f);
		for (ib = 0; ib < nb; ib++, pb += Q6KP_SB) {
			const uint8_t *at = a + Q6K_ACT * ib;
			const float32x4_t d = vmulq_n_f32(
				gemm_d4(dd + Q6KP_D_BYTES * ib + 8 * q),
				gemm_float(a + Q6K_ACT * nb, ib));
			int32x4_t L[8];

			cpu_gemm_ahead_step(&pf, nb * q + ib);
			GEMM_UNROLL
			for (l = 0; l < 8; l++)
				L[l] = vaddq_s32(
					vmulq_n_s32(q6k_scale(pb, q, 2 * l),
						    q6k_start(at, 2 * l)),
					vmulq_n_s32(q6k_scale(pb, q, 2 * l + 1),
						    q6k_start(at, 2 * l + 1)));
			GEMM_UNROLL
			for (j = 0; j < 4; j++) {
				const int hs = j / 2, h = j % 2;

				GEMM_UNROLL
				for (k = 0; k < 4; k++) {
					const int g = 8 * hs + 2 * k + h;
					const int32x4_t sc = q6k_scale(pb, q,
								       g);
					int8x16_t w[4];

					GEMM_UNROLL
					for (i = 0; i < 4; i++)
						w[i] = q6k_unit(pb, q, hs, h, k,
								i);
					Q6K_EXACT4(L, h, sc, w,
						   gemm_act16(at + 16 * g));
				}
			}
			GEMM_UNROLL
			for (l = 0; l < 8; l++)
				acc[l] = vfmaq_f32(acc[l], d,
						   vcvtq_f32_s32(L[l]));
		}
		vst1q_f32(y + 4 * q, gemm_hsum8_lanes(acc));
	}
}

#define GEMM_LEVEL GEMM_NEON
#include "gemm_tables.h"
#undef GEMM_LEVEL

#undef GEMM_NEON
