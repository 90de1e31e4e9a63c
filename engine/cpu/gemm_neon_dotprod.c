// SPDX-License-Identifier: MIT
/*
 * The neon-dotprod level's GEMM kernels: neon_gemm.h built with SDOT
 * (ARMv8.2 dotprod), the same bits as the neon level's (see neon.h).
 * Call them only where cpu_neon_dotprod_usable().
 */
#if defined(__aarch64__)
/* arm_neon.h defines vdotq_s32 for armv8.2-a+dotprod: every function here */
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("dotprod"))), \
			     apply_to = function)
#else
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif

#define NEON_DOTPROD 1
#include "neon_gemm.h"

#ifdef __clang__
#pragma clang attribute pop
#endif
#endif /* __aarch64__ */
