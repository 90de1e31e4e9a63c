// SPDX-License-Identifier: MIT
/*
 * The shared memory budget (engine/budget.c, engine.h "memory budget"):
 * charges within the total, -EAGAIN when the others hold too much now,
 * -ENOSPC when a charge could never fit; KV charges leave the reserve
 * free for buffers; forced charges go over; releases call the hook; the
 * peaks; the default of the memory left after the weights.
 *
 *   make build/tests/engine/test_budget && build/tests/engine/test_budget
 */
#include <check.h>
#include <errno.h>

#include "../../engine/engine.h"
#include "../common/check_main.h"

static unsigned budget_hooks;

static void budget_hook(void *arg)
{
	ck_assert_ptr_eq(arg, &budget_hooks);
	budget_hooks++;
}

START_TEST(test_budget_charges)
{
	struct engine_budget *b = NULL;
	struct engine_budget_stats st;
	struct err err = { 0 };

	/* 1600 bytes: a reserve of 100, KV may hold 1500 */
	ck_assert_int_eq(engine_budget_new(&b, 1600, &err), 0);
	engine_budget_notify(b, budget_hook, &budget_hooks);
	ck_assert_uint_eq(engine_budget_limit(b, ENGINE_BUDGET_KV), 1500);
	ck_assert_uint_eq(engine_budget_limit(b, ENGINE_BUDGET_BUFFERS), 1600);
	ck_assert_int_eq(engine_budget_charge(b, ENGINE_BUDGET_KV, 1501),
			 -ENOSPC);
	ck_assert_int_eq(engine_budget_charge(b, ENGINE_BUDGET_KV, 1000), 0);
	ck_assert_int_eq(engine_budget_charge(b, ENGINE_BUDGET_KV, 501),
			 -EAGAIN);
	ck_assert_int_eq(engine_budget_charge(b, ENGINE_BUDGET_KV, 500), 0);
	/* the KV limit is reached; buffers still have the reserve */
	ck_assert_int_eq(engine_budget_charge(b, ENGINE_BUDGET_KV, 1), -EAGAIN);
	ck_assert_int_eq(engine_budget_charge(b, ENGINE_BUDGET_BUFFERS, 100),
			 0);
	ck_assert_int_eq(engine_budget_charge(b, ENGINE_BUDGET_BUFFERS, 1),
			 -EAGAIN);
	/* text that exists already goes over */
	engine_budget_force(b, ENGINE_BUDGET_BUFFERS, 50);
	engine_budget_stats(b, &st);
	ck_assert_uint_eq(st.total, 1600);
	ck_assert_uint_eq(st.reserve, 100);
	ck_assert_uint_eq(st.used[ENGINE_BUDGET_KV], 1500);
	ck_assert_uint_eq(st.used[ENGINE_BUDGET_BUFFERS], 150);
	/* over the total: KV waits until the buffers are back under */
	engine_budget_release(b, ENGINE_BUDGET_KV, 100);
	ck_assert_uint_eq(budget_hooks, 1);
	ck_assert_int_eq(engine_budget_charge(b, ENGINE_BUDGET_KV, 1), -EAGAIN);
	engine_budget_release(b, ENGINE_BUDGET_BUFFERS, 150);
	ck_assert_int_eq(engine_budget_charge(b, ENGINE_BUDGET_KV, 100), 0);
	engine_budget_release(b, ENGINE_BUDGET_KV, 1500);
	engine_budget_stats(b, &st);
	ck_assert_uint_eq(st.used[ENGINE_BUDGET_KV], 0);
	ck_assert_uint_eq(st.used[ENGINE_BUDGET_BUFFERS], 0);
	ck_assert_uint_eq(st.peak[ENGINE_BUDGET_KV], 1500);
	ck_assert_uint_eq(st.peak[ENGINE_BUDGET_BUFFERS], 150);
	ck_assert_uint_eq(budget_hooks, 3);
	engine_budget_release(b, ENGINE_BUDGET_KV, 0); /* no hook: nothing */
	ck_assert_uint_eq(budget_hooks, 3);
	engine_budget_free(b);
	engine_budget_free(NULL);
}
END_TEST

START_TEST(test_budget_default)
{
	const uint64_t mib = 1ull << 20;

	/* three quarters of what the weights and 512 MiB leave */
	ck_assert_uint_eq(engine_budget_default(8192 * mib, 1024 * mib),
			  (8192 - 1024 - 512) * mib / 4 * 3);
	/* 64 MiB at least, whatever is left */
	ck_assert_uint_eq(engine_budget_default(600 * mib, 100 * mib),
			  64 * mib);
	ck_assert_uint_eq(engine_budget_default(0, 100 * mib), 64 * mib);
	ck_assert_uint_gt(engine_mem_available(), 0);
}
END_TEST

static void budget_tests(TCase *tc)
{
	tcase_add_test(tc, test_budget_charges);
	tcase_add_test(tc, test_budget_default);
}

const struct check_main check_main = {
	.name = "budget",
	.add_tests = budget_tests,
};
