// SPDX-License-Identifier: MIT
/*
 * NEON dot products (see neon.h): the float dots' vector parts, in
 * dot_avx2.c's lanes, and the neon level's integer dots (neon_qdot.h,
 * built here without dotprod; dot_neon_dotprod.c builds them with it).
 * Each returns the scalar emulation's float bit for bit.
 *
 * Which level a CPU has comes from the kernel's hardware capabilities
 * (getauxval(AT_HWCAP)), as ggml and the kernel's own documentation
 * (Documentation/arch/arm64/elf_hwcaps.rst) ask: the ID registers are not
 * read from user space.
 */
#if defined(__aarch64__)
/* the integer dots of the neon level, at the end: no SDOT */
#define NEON_DOTPROD 0
#include <arm_neon.h>
#include <sys/auxv.h>

#include "neon.h"
#include "reduce_neon.h"

#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif

bool cpu_neon_usable(void)
{
	return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
}

bool cpu_neon_dotprod_usable(void)
{
	const unsigned long want = HWCAP_ASIMD | HWCAP_ASIMDDP;

	return (getauxval(AT_HWCAP) & want) == want;
}

/*
 * ggml_vec_dot_f32's four 16-lane accumulators as sixteen 4-lane ones:
 * a[4j + q] holds lanes 4q..4q + 3 of accumulator j.
 */
float cpu_f32_main_neon(int64_t np, const float *x, const float *y)
{
	float32x4_t a[16];
	int64_t i;
	int k;

	for (k = 0; k < 16; k++)
		a[k] = vdupq_n_f32(0.0f);
	for (i = 0; i < np; i += 64)
		for (k = 0; k < 16; k++)
			a[k] = vfmaq_f32(a[k], vld1q_f32(x + i + 4 * k),
					 vld1q_f32(y + i + 4 * k));
	return cpu_reduce64_neon(a);
}

float cpu_f16_main_neon(int64_t np, const uint16_t *x, const uint16_t *y)
{
	float32x4_t a[16];
	int64_t i;
	int k;

	for (k = 0; k < 16; k++)
		a[k] = vdupq_n_f32(0.0f);
	for (i = 0; i < np; i += 64)
		for (k = 0; k < 16; k++)
			a[k] = vfmaq_f32(a[k], cpu_ld_f16_neon(x + i + 4 * k),
					 cpu_ld_f16_neon(y + i + 4 * k));
	return cpu_reduce64_neon(a);
}

/*
 * dot_bf16's loop: lane l of accumulator h takes the pair 2l, 2l + 1 of
 * each 32 elements, the odd product fused in first; acc[4h + q] holds
 * lanes 4q..4q + 3 (elements 8q.. of the 32).
 */
void cpu_bf16_main_neon(int64_t np, const uint16_t *x, const uint16_t *y,
			float c[2])
{
	const uint32x4_t hi = vdupq_n_u32(0xffff0000u);
	float32x4_t acc[8];
	int64_t i;
	int k;

	for (k = 0; k < 8; k++)
		acc[k] = vdupq_n_f32(0.0f);
	for (i = 0; i < np; i += 64)
		for (k = 0; k < 8; k++) {
			uint32x4_t vx = vreinterpretq_u32_u16(
				vld1q_u16(x + i + 8 * k));
			uint32x4_t vy = vreinterpretq_u32_u16(
				vld1q_u16(y + i + 8 * k));

			acc[k] = vfmaq_f32(
				acc[k],
				vreinterpretq_f32_u32(vandq_u32(vx, hi)),
				vreinterpretq_f32_u32(vandq_u32(vy, hi)));
			acc[k] = vfmaq_f32(
				acc[k],
				vreinterpretq_f32_u32(vshlq_n_u32(vx, 16)),
				vreinterpretq_f32_u32(vshlq_n_u32(vy, 16)));
		}
	c[0] = cpu_hsum16_neon(acc);
	c[1] = cpu_hsum16_neon(acc + 4);
}

#include "neon_qdot.h"
#endif /* __aarch64__ */
