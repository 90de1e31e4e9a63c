// SPDX-License-Identifier: MIT
/*
 * The VRAM cap's accounting (engine/cuda/vram_cap.c) over a module whose
 * alloc is malloc: what is placed counts against the cap, frees give it
 * back, an allocation past it is -ENOSPC without asking the module, and
 * the table of sizes keeps up with thousands of allocations freed in
 * another order (its growth and its deleted slots).
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "../../engine/cuda/backend_internal.h"
#include "../../engine/cuda/cuda_backend.h"
#include "../common/check_main.h"

static unsigned fake_allocs;

static int fake_alloc(struct cuda_dev *d, void **p, size_t n, struct err *err)
{
	(void)d;
	(void)err;
	fake_allocs++;
	*p = malloc(n ? n : 1);
	return *p ? 0 : -ENOSPC;
}

static void fake_free(struct cuda_dev *d, void *p)
{
	(void)d;
	free(p);
}

static const struct cuda_api fake = { .alloc = fake_alloc, .free = fake_free };

#define N_PTR 5000

START_TEST(test_vram_cap_counts_and_refuses)
{
	static void *p[N_PTR];
	uint64_t cap, used;
	void *q;
	int i;

	ck_assert(!cuda_backend_capped("gpu3", &cap, &used));
	/* no cap: straight to the module */
	ck_assert_int_eq(cuda_cap_alloc("gpu3", &fake, NULL, &q, 100), 0);
	cuda_cap_free(&fake, NULL, q);
	cuda_backend_cap_set("gpu3", 100000);
	ck_assert(cuda_backend_capped("gpu3", &cap, &used));
	ck_assert_uint_eq(cap, 100000);
	ck_assert_uint_eq(used, 0);
	for (i = 0; i < N_PTR; i++)
		ck_assert_int_eq(cuda_cap_alloc("gpu3", &fake, NULL, &p[i], 20),
				 0);
	cuda_backend_capped("gpu3", &cap, &used);
	ck_assert_uint_eq(used, 100000);
	/* full: refused before the module is asked */
	i = (int)fake_allocs;
	ck_assert_int_eq(cuda_cap_alloc("gpu3", &fake, NULL, &q, 1), -ENOSPC);
	ck_assert_ptr_null(q);
	ck_assert_uint_eq(fake_allocs, (unsigned)i);
	/* another GPU has no cap */
	ck_assert_int_eq(cuda_cap_alloc("gpu4", &fake, NULL, &q, 1000000), 0);
	cuda_cap_free(&fake, NULL, q);
	/* freed every other one, then the rest backwards */
	for (i = 0; i < N_PTR; i += 2)
		cuda_cap_free(&fake, NULL, p[i]);
	cuda_backend_capped("gpu3", &cap, &used);
	ck_assert_uint_eq(used, 50000);
	for (i = 0; i < N_PTR / 2; i++)
		ck_assert_int_eq(
			cuda_cap_alloc("gpu3", &fake, NULL, &p[2 * i], 20), 0);
	for (i = N_PTR - 1; i >= 0; i--)
		cuda_cap_free(&fake, NULL, p[i]);
	cuda_backend_capped("gpu3", &cap, &used);
	ck_assert_uint_eq(used, 0);
	cuda_cap_free(&fake, NULL, NULL);
	cuda_backend_cap_set("gpu3", 0);
	ck_assert(!cuda_backend_capped("gpu3", &cap, &used));
}
END_TEST

static Suite *vram_cap_suite(void)
{
	Suite *s = suite_create("vram_cap");
	TCase *tc = tcase_create("vram_cap");

	tcase_add_test(tc, test_vram_cap_counts_and_refuses);
	suite_add_tcase(s, tc);
	return s;
}

const struct check_main check_main = { .suite = vram_cap_suite };
