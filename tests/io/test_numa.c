/* SPDX-License-Identifier: MIT */
/*
 * The NUMA planner on made-up topologies of 1, 2 and 4 nodes (the machine
 * running the tests has one), the real topology, thread pinning, and loads
 * with each policy on this machine.
 */
#include <check.h>
#include <errno.h>
#include <sched.h>
#include <sys/sysinfo.h>

#include "weights_fake.h"
#include "../../io/weights_internal.h"
#include "../common/check_main.h"

static const uint64_t sizes[] = { 4096, 1 << 20, 3 << 20, 123, 0, 77777 };
#define N_SIZES (sizeof(sizes) / sizeof(sizes[0]))

static uint64_t sizes_total(void)
{
	uint64_t t = 0;
	size_t i;

	for (i = 0; i < N_SIZES; i++)
		t += sizes[i];
	return t;
}

/* n nodes with ids from ids[], each with free bytes and 4 CPUs. */
static void topo_make(struct io_numa_topology *t, uint32_t n, const int *ids,
		      uint64_t free_b)
{
	uint32_t k;

	memset(t, 0, sizeof(*t));
	t->n_nodes = n;
	for (k = 0; k < n; k++) {
		t->nodes[k].id = ids[k];
		t->nodes[k].free_bytes = free_b;
		t->nodes[k].n_cpus = 4;
	}
}

static void plan_all_on(const struct io_numa_plan *p, uint32_t c, int node)
{
	uint64_t i;

	for (i = 0; i < p->n_tensors; i++)
		ck_assert_int_eq(p->node[c * p->n_tensors + i], node);
}

static const int ids_1[] = { 0 };
static const int ids_2[] = { 0, 1 };
static const int ids_4[] = { 0, 1, 4, 5 }; /* holes happen (offline nodes) */

START_TEST(test_numa_plan_one_node)
{
	struct io_numa_topology t;
	struct io_numa_plan p;
	struct err err = { 0 };

	topo_make(&t, 1, ids_1, 1ull << 30);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_DEFAULT, 0, sizes,
					   N_SIZES, &err),
			 0);
	ck_assert_uint_eq(p.n_copies, 1);
	plan_all_on(&p, 0, -1);
	ck_assert_uint_eq(p.node_bytes[0], sizes_total());
	io_numa_plan_free(&p);
	/* Interleaving over one node is no interleaving at all. */
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_INTERLEAVE, 0, sizes,
					   N_SIZES, &err),
			 0);
	plan_all_on(&p, 0, -1);
	io_numa_plan_free(&p);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_NODE, 0, sizes,
					   N_SIZES, &err),
			 0);
	plan_all_on(&p, 0, 0);
	io_numa_plan_free(&p);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_REPLICATE, 0, sizes,
					   N_SIZES, &err),
			 0);
	ck_assert_uint_eq(p.n_copies, 1);
	plan_all_on(&p, 0, 0);
	io_numa_plan_free(&p);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_NODE, 1, sizes,
					   N_SIZES, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "no NUMA node 1"));
}
END_TEST

START_TEST(test_numa_plan_two_nodes)
{
	struct io_numa_topology t;
	struct io_numa_plan p;
	struct err err = { 0 };
	uint64_t total = sizes_total();

	topo_make(&t, 2, ids_2, 1ull << 30);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_INTERLEAVE, 0, sizes,
					   N_SIZES, &err),
			 0);
	plan_all_on(&p, 0, IO_MEM_INTERLEAVE);
	ck_assert_uint_eq(p.node_bytes[0], (total + 1) / 2);
	ck_assert_uint_eq(p.node_bytes[1], (total + 1) / 2);
	io_numa_plan_free(&p);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_NODE, 1, sizes,
					   N_SIZES, &err),
			 0);
	plan_all_on(&p, 0, 1);
	ck_assert_uint_eq(p.node_bytes[0], 0);
	ck_assert_uint_eq(p.node_bytes[1], total);
	io_numa_plan_free(&p);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_REPLICATE, 0, sizes,
					   N_SIZES, &err),
			 0);
	ck_assert_uint_eq(p.n_copies, 2);
	plan_all_on(&p, 0, 0);
	plan_all_on(&p, 1, 1);
	ck_assert_int_eq(p.copy_node[1], 1);
	ck_assert_uint_eq(p.node_bytes[0], total);
	ck_assert_uint_eq(p.node_bytes[1], total);
	io_numa_plan_free(&p);
}
END_TEST

START_TEST(test_numa_plan_four_nodes_with_holes)
{
	struct io_numa_topology t;
	struct io_numa_plan p;
	struct err err = { 0 };
	uint32_t c;

	topo_make(&t, 4, ids_4, 1ull << 30);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_REPLICATE, 0, sizes,
					   N_SIZES, &err),
			 0);
	ck_assert_uint_eq(p.n_copies, 4);
	for (c = 0; c < 4; c++) {
		plan_all_on(&p, c, ids_4[c]);
		ck_assert_int_eq(p.copy_node[c], ids_4[c]);
	}
	io_numa_plan_free(&p);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_NODE, 4, sizes,
					   N_SIZES, &err),
			 0);
	plan_all_on(&p, 0, 4);
	ck_assert_uint_eq(p.node_bytes[2], sizes_total());
	io_numa_plan_free(&p);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_NODE, 2, sizes,
					   N_SIZES, &err),
			 -EINVAL);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_NODE, -1, sizes,
					   N_SIZES, &err),
			 -EINVAL);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_INTERLEAVE, 0, sizes,
					   N_SIZES, &err),
			 0);
	ck_assert_uint_eq(p.node_bytes[3], (sizes_total() + 3) / 4);
	io_numa_plan_free(&p);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, (enum io_numa_policy)42, 0,
					   sizes, N_SIZES, &err),
			 -EINVAL);
}
END_TEST

/* A node without room for what the policy puts there refuses the plan. */
START_TEST(test_numa_plan_no_room)
{
	struct io_numa_topology t;
	struct io_numa_plan p;
	struct err err = { 0 };
	uint64_t total = sizes_total();

	topo_make(&t, 4, ids_4, total);
	t.nodes[3].free_bytes = total - 1;
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_REPLICATE, 0, sizes,
					   N_SIZES, &err),
			 -ENOSPC);
	ck_assert_ptr_nonnull(strstr(err.msg, "NUMA node 5"));
	ck_assert_ptr_null(p.node);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_NODE, 5, sizes,
					   N_SIZES, &err),
			 -ENOSPC);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_NODE, 4, sizes,
					   N_SIZES, &err),
			 0);
	io_numa_plan_free(&p);
	/* A quarter each fits, the whole does not. */
	t.nodes[3].free_bytes = (total + 3) / 4;
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_INTERLEAVE, 0, sizes,
					   N_SIZES, &err),
			 0);
	io_numa_plan_free(&p);
	t.nodes[3].free_bytes = (total + 3) / 4 - 1;
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_INTERLEAVE, 0, sizes,
					   N_SIZES, &err),
			 -ENOSPC);
}
END_TEST

/* First touch spills to the next node; a bound policy does not. */
START_TEST(test_numa_plan_default_spills)
{
	struct io_numa_topology t;
	struct io_numa_plan p;
	struct err err = { 0 };
	uint64_t total = sizes_total();

	topo_make(&t, 2, ids_2, total * 6 / 10);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_DEFAULT, 0, sizes,
					   N_SIZES, &err),
			 0);
	ck_assert_uint_eq(p.node_bytes[0], total * 6 / 10);
	ck_assert_uint_eq(p.node_bytes[1], total - total * 6 / 10);
	io_numa_plan_free(&p);
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_NODE, 1, sizes,
					   N_SIZES, &err),
			 -ENOSPC);
	ck_assert_ptr_nonnull(strstr(err.msg, "NUMA node 1"));
	t.nodes[1].free_bytes = total / 10;
	ck_assert_int_eq(io_numa_plan_make(&p, &t, IO_NUMA_DEFAULT, 0, sizes,
					   N_SIZES, &err),
			 -ENOSPC);
}
END_TEST

START_TEST(test_numa_policy_parse)
{
	enum io_numa_policy pol;
	struct err err = { 0 };
	int node;

	ck_assert_int_eq(io_numa_policy_parse("interleave", &pol, &node, &err),
			 0);
	ck_assert_int_eq(pol, IO_NUMA_INTERLEAVE);
	ck_assert_int_eq(io_numa_policy_parse("replicate", &pol, &node, &err),
			 0);
	ck_assert_int_eq(pol, IO_NUMA_REPLICATE);
	ck_assert_int_eq(io_numa_policy_parse("node:3", &pol, &node, &err), 0);
	ck_assert_int_eq(pol, IO_NUMA_NODE);
	ck_assert_int_eq(node, 3);
	ck_assert_int_eq(io_numa_policy_parse("default", &pol, &node, &err), 0);
	ck_assert_int_eq(pol, IO_NUMA_DEFAULT);
	ck_assert_int_eq(io_numa_policy_parse("node:", &pol, &node, &err),
			 -EINVAL);
	ck_assert_int_eq(io_numa_policy_parse("node:1x", &pol, &node, &err),
			 -EINVAL);
	ck_assert_int_eq(io_numa_policy_parse("node:-1", &pol, &node, &err),
			 -EINVAL);
	ck_assert_int_eq(
		io_numa_policy_parse("node:99999999999", &pol, &node, &err),
		-EINVAL);
	ck_assert_int_eq(io_numa_policy_parse("spread", &pol, &node, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "'spread'"));
}
END_TEST

START_TEST(test_numa_topology_real)
{
	struct io_numa_topology t;
	struct err err = { 0 };
	uint32_t k, cpus = 0;

	ck_assert_int_eq(io_numa_topology_read(&t, &err), 0);
	ck_assert_uint_ge(t.n_nodes, 1);
	ck_assert_uint_eq(t.n_nodes, io_numa_node_count());
	for (k = 0; k < t.n_nodes; k++) {
		ck_assert_uint_gt(t.nodes[k].free_bytes, 0);
		cpus += t.nodes[k].n_cpus;
	}
	ck_assert_uint_eq(cpus, (uint32_t)get_nprocs_conf());
}
END_TEST

START_TEST(test_numa_thread_pin)
{
	struct err err = { 0 };
	cpu_set_t set;
	int c, node = io_numa_node_of_cpu(0);

	ck_assert_int_eq(io_numa_thread_pin(node, &err), 0);
	ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	for (c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			ck_assert_int_eq(io_numa_node_of_cpu(c), node);
	ck_assert(CPU_ISSET(0, &set));
	ck_assert_int_eq(io_numa_thread_pin(4096, &err), -EINVAL);
}
END_TEST

/* Each policy on this machine loads every byte; the devices say where. */
START_TEST(test_numa_load_policies)
{
	struct io_load_options opt = { 0 };
	struct io_weights *w = NULL;
	struct err err = { 0 };
	struct fake f;
	uint64_t i;
	char dev[16];

	fake_make(&f, "/tmp", 4096 + 32, (2u << 20) + 5);
	opt.numa = IO_NUMA_NODE;
	opt.numa_node = 0;
	ck_assert_msg(io_weights_load(&w, &f.g, &opt, &err) == 0, "%s",
		      err.msg);
	check_bytes(&f.g, w);
	ck_assert_str_eq(io_weights_placement(w, 1)->device, "numa0");
	io_weights_free(w);

	opt.numa = IO_NUMA_INTERLEAVE;
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	check_bytes(&f.g, w);
	ck_assert_str_eq(io_weights_placement(w, 1)->device, "cpu");
	io_weights_free(w);

	opt.numa = IO_NUMA_REPLICATE;
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	check_bytes(&f.g, w);
	ck_assert_uint_eq(io_weights_stats(w)->n_copies, io_numa_node_count());
	for (i = 0; i < f.g.n_tensors; i++) {
		struct io_placement *p = io_weights_placement_node(w, i, 0);

		snprintf(dev, sizeof(dev), "numa%d", 0);
		ck_assert_str_eq(p->device, dev);
		ck_assert_mem_eq(p->data, io_weights_placement(w, i)->data,
				 p->bytes);
	}
	io_weights_free(w);

	opt.numa = IO_NUMA_NODE;
	opt.numa_node = 4095;
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), -EINVAL);
	ck_assert_ptr_null(w);
	unlink(f.path);
}
END_TEST

/* Two nodes, and too little room on node 1 for the first tensor. */
static void fake_two_nodes(struct io_numa_topology *t)
{
	topo_make(t, 2, ids_2, 1ull << 30);
	t->nodes[1].free_bytes = 1000;
}

START_TEST(test_numa_move_checks_devices)
{
	struct io_load_options opt = { .no_uring = true };
	struct io_weights *w = NULL;
	struct err err = { 0 };
	char list[128];
	struct fake f;
	void *before;

	fake_make(&f, "/tmp", 4096 + 32, (1u << 20) + 5);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	before = io_weights_placement(w, 0)->data;
	io_devices_list(list, sizeof(list));
	ck_assert_int_eq(io_weights_move(w, 0, "gpu0", &err), -EINVAL);
	ck_assert_int_eq(
		strncmp(err.msg, "no such device gpu0 (devices: cpu", 33), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, list));
	ck_assert_int_eq(io_weights_move(w, 0, "numa", &err), -EINVAL);
	ck_assert_int_eq(io_weights_move(w, 0, "numa0x", &err), -EINVAL);
	ck_assert_int_eq(io_weights_move(w, 0, "numa4095", &err), -EINVAL);
	io_numa_topology_fake = fake_two_nodes;
	ck_assert_int_eq(io_weights_move(w, 0, "numa1", &err), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(err.msg, "no room on numa1"));
	io_numa_topology_fake = NULL;
	ck_assert_ptr_eq(io_weights_placement(w, 0)->data, before);
	ck_assert_str_eq(io_weights_placement(w, 0)->device, "cpu");
	check_bytes(&f.g, w);
	io_weights_free(w);
	unlink(f.path);
}
END_TEST

static Suite *numa_suite(void)
{
	Suite *s = suite_create("io_numa");
	TCase *tc = tcase_create("numa");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_numa_plan_one_node);
	tcase_add_test(tc, test_numa_plan_two_nodes);
	tcase_add_test(tc, test_numa_plan_four_nodes_with_holes);
	tcase_add_test(tc, test_numa_plan_no_room);
	tcase_add_test(tc, test_numa_plan_default_spills);
	tcase_add_test(tc, test_numa_policy_parse);
	tcase_add_test(tc, test_numa_topology_real);
	tcase_add_test(tc, test_numa_thread_pin);
	tcase_add_test(tc, test_numa_load_policies);
	tcase_add_test(tc, test_numa_move_checks_devices);
	suite_add_tcase(s, tc);
	return s;
}

const struct check_main check_main = { .suite = numa_suite };
