// SPDX-License-Identifier: MIT
/*
 * The neon level's GEMM kernels: neon_gemm.h built without the dot
 * product instructions (see neon.h); gemm_neon_dotprod.c builds them with.
 */
#if defined(__aarch64__)
#define NEON_DOTPROD 0
#include "neon_gemm.h"
#endif /* __aarch64__ */
