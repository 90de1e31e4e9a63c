// SPDX-License-Identifier: MIT
/*
 * One int8 tensor-core instruction, the warp-wide
 *
 *   mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32  D = A B + C
 *
 * (sm_80 and later; A 16 x 32, B 32 x 8, C and D 16 x 8), and where each
 * lane's registers sit in those matrices. The layout is the PTX ISA's,
 * section 9.7.14.5 "Matrix Fragments for mma.m16n8k32" (figures
 * mma-16832-A-i8, mma-16832-B-i8, mma-16832-C-i32), with
 * groupID = lane >> 2, threadID_in_group = lane % 4:
 *
 *   A: 4 registers of 4 int8 each (a0..a15, low byte first);
 *      row = groupID (+8 for a4..a7, a12..a15),
 *      col = threadID_in_group * 4 + (i & 3) (+16 for a8..a15)
 *   B: 2 registers of 4 int8 (b0..b7); row (k) = threadID_in_group * 4
 *      + (i & 3) (+16 for b4..b7), col = groupID
 *   C, D: 4 int32 (c0..c3); row = groupID (+8 for c2, c3),
 *      col = threadID_in_group * 2 + (i & 1)
 *
 * The mma_* functions below are the only copy of it: mmq.cu loads its
 * fragments through them, and the simulator's emulation of the
 * instruction (a warp barrier at which each lane hands in its A and B
 * registers and takes its D) gathers the matrices through them too. So
 * that a wrong layout cannot pass the simulator by agreeing with itself,
 * tests/engine/test_cuda.c's test_mma_fragments builds every lane's
 * registers from its own transcription of the ISA's tables and checks
 * the D each lane gets (on the simulator, and on a card through
 * tools/gpu-check.sh's test run).
 */
#ifndef LLMFS_ENGINE_CUDA_MMA_CUH
#define LLMFS_ENGINE_CUDA_MMA_CUH

#include "common.cuh"

struct mma_s8_frag {
	int a[4]; /* A's 16 int8 */
	int b[2]; /* B's 8 int8 */
};

/* A's row and column of byte j of register r of lane */
__device__ __forceinline__ int mma_a_row(int lane, int r)
{
	return (lane >> 2) + (r & 1) * 8;
}

__device__ __forceinline__ int mma_a_col(int lane, int r, int j)
{
	return (lane & 3) * 4 + j + (r >> 1) * 16;
}

/* B's row (k) of byte j of register r of lane; its column is lane >> 2 */
__device__ __forceinline__ int mma_b_row(int lane, int r, int j)
{
	return (lane & 3) * 4 + j + r * 16;
}

__device__ __forceinline__ int mma_b_col(int lane)
{
	return lane >> 2;
}

/* C's and D's row and column of register r of lane */
__device__ __forceinline__ int mma_c_row(int lane, int r)
{
	return (lane >> 2) + (r >> 1) * 8;
}

__device__ __forceinline__ int mma_c_col(int lane, int r)
{
	return (lane & 3) * 2 + (r & 1);
}

#ifdef LLMFS_CUDA_SIM
/*
 * The instruction on the simulator: every lane of the warp hands in its
 * registers at a warp barrier (as .sync.aligned: all 32 lanes, the same
 * instruction), each gathers A and B whole through the layout above and
 * computes its own four elements of D.
 */
inline void mma_s8_16832(int d[4], const mma_s8_frag &f, const int c[4])
{
	int8_t A[16][32], B[32][8];

	sim_warp_put(f.a, sizeof(f.a));
	sim_sync_warp();
	for (int l = 0; l < 32; l++) {
		int a[4];

		sim_warp_get(l, a, sizeof(a));
		for (int r = 0; r < 4; r++)
			for (int j = 0; j < 4; j++)
				A[mma_a_row(l, r)][mma_a_col(l, r, j)] =
					(int8_t)(a[r] >> (8 * j));
	}
	sim_sync_warp();
	sim_warp_put(f.b, sizeof(f.b));
	sim_sync_warp();
	for (int l = 0; l < 32; l++) {
		int b[2];

		sim_warp_get(l, b, sizeof(b));
		for (int r = 0; r < 2; r++)
			for (int j = 0; j < 4; j++)
				B[mma_b_row(l, r, j)][mma_b_col(l)] =
					(int8_t)(b[r] >> (8 * j));
	}
	sim_sync_warp();
	const int lane = (int)sim_ids->lane;

	for (int r = 0; r < 4; r++) {
		const int row = mma_c_row(lane, r), col = mma_c_col(lane, r);
		int s = c[r];

		for (int k = 0; k < 32; k++)
			s += (int)A[row][k] * (int)B[k][col];
		d[r] = s;
	}
}
#else
__device__ __forceinline__ void mma_s8_16832(int d[4], const mma_s8_frag &f,
					     const int c[4])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
	    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
	    "{%10, %11, %12, %13};"
	    : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
	    : "r"(f.a[0]), "r"(f.a[1]), "r"(f.a[2]), "r"(f.a[3]), "r"(f.b[0]),
	      "r"(f.b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
#else
	/* no int8 tensor cores before sm_80: never launched there */
	(void)f;
	d[0] = c[0];
	d[1] = c[1];
	d[2] = c[2];
	d[3] = c[3];
	__trap();
#endif
}
#endif

#endif
