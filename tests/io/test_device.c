/* SPDX-License-Identifier: MIT */
/*
 * Devices as objects: the machine's host devices, described (simulated)
 * GPUs from --devices / LLMFS_DEVICES, every bad description refused with
 * one line, and a move onto a GPU without a backend refused with ENODEV,
 * nothing moved.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <sys/sysinfo.h>

#include "weights_fake.h"
#include "../../io/weights_internal.h"
#include "../common/check_main.h"

static const int two_ids[] = { 0, 1 };

static void fake_two_nodes(struct io_numa_topology *t)
{
	memset(t, 0, sizeof(*t));
	t->n_nodes = 2;
	for (int k = 0; k < 2; k++) {
		t->nodes[k].id = two_ids[k];
		t->nodes[k].free_bytes = 30ull << 30;
		t->nodes[k].total_bytes = 32ull << 30;
		t->nodes[k].n_cpus = 8;
	}
}

START_TEST(test_device_host_from_machine)
{
	struct io_device_set set;
	const struct io_device *cpu;
	struct err err = { 0 };
	struct sysinfo si;
	uint32_t k, n_numa = 0;

	ck_assert_int_eq(io_device_set_read(&set, "", &err), 0);
	cpu = io_device_find(&set, "cpu");
	ck_assert_ptr_eq(cpu, &set.dev[0]);
	ck_assert_int_eq(cpu->kind, IO_DEVICE_CPU);
	ck_assert_int_eq(sysinfo(&si), 0);
	ck_assert_uint_eq(cpu->total_bytes,
			  (uint64_t)si.totalram * si.mem_unit);
	ck_assert_uint_gt(cpu->free_bytes, 0);
	ck_assert_uint_le(cpu->free_bytes, cpu->total_bytes);
	ck_assert(cpu->compute);
	ck_assert_int_eq(cpu->bw_source, IO_BW_UNKNOWN);
	for (k = 1; k < set.n; k++) {
		ck_assert_int_eq(set.dev[k].kind, IO_DEVICE_NUMA);
		ck_assert_uint_gt(set.dev[k].total_bytes, 0);
		n_numa++;
	}
	ck_assert_uint_eq(n_numa, io_numa_node_count());
	io_device_set_measure(&set);
	ck_assert_int_eq(set.dev[0].bw_source, IO_BW_MEASURED);
	/* Any machine that runs this reads memory faster than 100 MB/s. */
	ck_assert(set.dev[0].mem_bw > 1e8);
	ck_assert(set.dev[1].mem_bw > 0 &&
		  set.dev[1].mem_bw <= set.dev[0].mem_bw);
}
END_TEST

START_TEST(test_device_gpu_described)
{
	struct io_device_set set;
	const struct io_device *g;
	struct err err = { 0 };
	char names[128];

	io_numa_topology_fake = fake_two_nodes;
	ck_assert_msg(
		io_device_set_read(
			&set,
			"gpu0:vram=8G,bw=272G,pcie=25G,node=1,cc=8.9,model=RTX-4060 "
			"gpu1:vram=24G:free=20G:bw=1008G:pcie=25G;cpu:bw=60G,numa1:bw=30G",
			&err) == 0,
		"%s", err.msg);
	io_numa_topology_fake = NULL;
	io_device_set_names(&set, names, sizeof(names));
	ck_assert_str_eq(names, "cpu numa0 numa1 gpu0 gpu1");
	g = io_device_find(&set, "gpu0");
	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(g->kind, IO_DEVICE_GPU);
	ck_assert_int_eq(g->index, 0);
	ck_assert_uint_eq(g->total_bytes, 8ull << 30);
	ck_assert_uint_eq(g->free_bytes, 8ull << 30);
	ck_assert(g->mem_bw == 272e9 && g->link_bw == 25e9);
	ck_assert_int_eq(g->node, 1);
	ck_assert_int_eq(g->cc_major, 8);
	ck_assert_int_eq(g->cc_minor, 9);
	ck_assert_str_eq(g->model, "RTX-4060");
	ck_assert(g->simulated && !g->compute);
	g = io_device_find(&set, "gpu1");
	ck_assert_uint_eq(g->total_bytes, 24ull << 30);
	ck_assert_uint_eq(g->free_bytes, 20ull << 30);
	ck_assert_int_eq(g->node, -1);
	ck_assert(io_device_find(&set, "cpu")->mem_bw == 60e9);
	ck_assert_int_eq(io_device_find(&set, "cpu")->bw_source, IO_BW_GIVEN);
	ck_assert(io_device_find(&set, "numa1")->mem_bw == 30e9);
	ck_assert_uint_eq(io_device_find(&set, "numa1")->total_bytes,
			  32ull << 30);
	ck_assert_int_eq(io_device_usable(g, &err), -ENODEV);
	ck_assert_str_eq(
		err.msg,
		"gpu1 is a simulated GPU (--devices): this build has no CUDA backend to compute on it");
	ck_assert_int_eq(io_device_usable(io_device_find(&set, "numa0"), &err),
			 0);
}
END_TEST

/*
 * vram= alone caps a real card: parsed as capped, without bandwidths and
 * without compute until a probe finds the card (engine_gpu_probe).
 * step=, cross= and product= are the card's measured costs, cpu:step=
 * the host's.
 */
START_TEST(test_device_cap_on_a_real_card)
{
	struct io_device_set set;
	const struct io_device *g;
	struct err err = { 0 };

	ck_assert_msg(io_device_set_read(
			      &set,
			      "gpu0:vram=8G,step=0.4ms,cross=30us,product=1.2T",
			      &err) == 0,
		      "%s", err.msg);
	g = io_device_find(&set, "gpu0");
	ck_assert_ptr_nonnull(g);
	ck_assert(g->capped && !g->simulated && !g->compute);
	ck_assert_uint_eq(g->total_bytes, 8ull << 30);
	ck_assert(g->mem_bw == 0 && g->link_bw == 0);
	ck_assert(fabs(g->step_s - 0.4e-3) < 1e-12);
	ck_assert(fabs(g->cross_s - 30e-6) < 1e-12);
	ck_assert(fabs(g->product_bw - 1.2e12) < 1 &&
		  g->product_source == IO_BW_GIVEN);
	ck_assert_ptr_eq(io_device_set_unprobed(&set), g);
	/* described in full, it is a simulated card, not a cap */
	ck_assert_int_eq(
		io_device_set_read(
			&set, "gpu0:vram=8G,bw=272G,pcie=25G,cross=25us", &err),
		0);
	g = io_device_find(&set, "gpu0");
	ck_assert(!g->capped && g->simulated);
	ck_assert(fabs(g->cross_s - 25e-6) < 1e-12);
	ck_assert_ptr_null(io_device_set_unprobed(&set));
	/* the host's measured step (all-cpu's) */
	ck_assert_int_eq(io_device_set_read(&set, "cpu:step=2.5ms", &err), 0);
	ck_assert(fabs(io_device_find(&set, "cpu")->step_s - 2.5e-3) < 1e-12);
}
END_TEST

/*
 * The decode product's rates: product.TYPE= one type's, product= every
 * other type's; io_device_product_rate picks a type's own, else
 * product=, else the memory's. Given over measured (a capped card's
 * probe): a type's own given rate stays, product= given replaces every
 * measured one it does not.
 */
START_TEST(test_device_product_rates)
{
	struct io_device_set set;
	struct io_device probed, given;
	const struct io_device *g;
	enum io_bw_source src;
	struct err err = { 0 };

	ck_assert_msg(
		io_device_set_read(
			&set,
			"gpu0:vram=8G,bw=272G,pcie=25G,product.q8_0=200G,product.F16=150G",
			&err) == 0,
		"%s", err.msg);
	g = io_device_find(&set, "gpu0");
	ck_assert(fabs(io_device_product_rate(g, IO_TYPE_Q8_0, &src) - 200e9) <
			  1 &&
		  src == IO_BW_GIVEN);
	ck_assert(fabs(io_device_product_rate(g, IO_TYPE_F16, NULL) - 150e9) <
		  1);
	/* no rate of its own, no product=: the memory's */
	ck_assert(fabs(io_device_product_rate(g, IO_TYPE_Q4_K, &src) - 272e9) <
			  1 &&
		  src == IO_BW_GIVEN);
	ck_assert(fabs(io_device_product_rate(g, IO_TYPE_COUNT, NULL) - 272e9) <
		  1);
	ck_assert_int_eq(
		io_device_set_read(
			&set,
			"gpu0:vram=8G,bw=272G,pcie=25G,product=100G,product.q6_K=90G",
			&err),
		0);
	g = io_device_find(&set, "gpu0");
	ck_assert(fabs(io_device_product_rate(g, IO_TYPE_Q4_K, NULL) - 100e9) <
		  1);
	ck_assert(fabs(io_device_product_rate(g, IO_TYPE_Q6_K, NULL) - 90e9) <
		  1);

	/* a probe's measurements under a cap's given rates */
	memset(&probed, 0, sizeof(probed));
	probed.mem_bw = 2850e9;
	probed.product_bw = 1500e9;
	probed.product_source = IO_BW_MEASURED;
	probed.product_type[IO_TYPE_Q4_K] = (struct io_device_rate){
		1500e9, IO_BW_MEASURED
	};
	probed.product_type[IO_TYPE_Q8_0] = (struct io_device_rate){
		1800e9, IO_BW_MEASURED
	};
	probed.product_type[IO_TYPE_F16] = (struct io_device_rate){
		2000e9, IO_BW_MEASURED
	};
	ck_assert_int_eq(
		io_device_set_read(&set, "gpu0:vram=8G,product.f16=2.2T", &err),
		0);
	given = *io_device_find(&set, "gpu0");
	io_device_product_give(&probed, &given);
	ck_assert(fabs(io_device_product_rate(&probed, IO_TYPE_F16, &src) -
		       2.2e12) < 1 &&
		  src == IO_BW_GIVEN);
	ck_assert(fabs(io_device_product_rate(&probed, IO_TYPE_Q8_0, &src) -
		       1800e9) < 1 &&
		  src == IO_BW_MEASURED);
	ck_assert(fabs(io_device_product_rate(&probed, IO_TYPE_Q5_K, NULL) -
		       1500e9) < 1);
	/* product= given: every type's but those given their own */
	ck_assert_int_eq(
		io_device_set_read(&set,
				   "gpu0:vram=8G,product=1.2T,product.q6_K=1T",
				   &err),
		0);
	given = *io_device_find(&set, "gpu0");
	io_device_product_give(&probed, &given);
	ck_assert(fabs(io_device_product_rate(&probed, IO_TYPE_Q8_0, &src) -
		       1.2e12) < 1 &&
		  src == IO_BW_GIVEN);
	ck_assert(fabs(io_device_product_rate(&probed, IO_TYPE_F16, NULL) -
		       1.2e12) < 1);
	ck_assert(fabs(io_device_product_rate(&probed, IO_TYPE_Q6_K, NULL) -
		       1e12) < 1);
}
END_TEST

START_TEST(test_device_bad_descriptions)
{
	static const char *const bad[] = {
		"gpu0",
		"gpu0:vram=8G,bw=272G",
		"gpu0:vram=8G,pcie=25G",
		"gpu0:bw=272G,pcie=25G",
		"gpu0:vram=8G,step=2s",
		"gpu0:vram=8G,cross=fast",
		"gpu0:vram=8G,step=-1ms",
		"cpu:cross=1ms",
		"cpu:product=10G",
		"gpu0:vram=8G,product=0",
		"gpu0:vram=8G,product.q9_K=1T",
		"gpu0:vram=8G,product.q8_0=fast",
		"gpu0:vram=8G,product.=1T",
		"cpu:product.q8_0=10G",
		"vram=8G",
		"gpu0:vram=8G,bw=272G,pcie=25G,gpu0:vram=8G,bw=1G,pcie=1G",
		"gpu0:vram=8X,bw=272G,pcie=25G",
		"gpu0:vram=-8G,bw=272G,pcie=25G",
		"gpu0:vram=8G,bw=272G,pcie=25G,node=x",
		"gpu0:vram=8G,bw=0,pcie=25G",
		"gpu0:vram=8G,bw=272G,pcie=25G,colour=red",
		"tpu0:vram=8G",
		"numa7:bw=10G",
		"gpu:vram=8G",
		"gpu0x",
		"cpu:vram=8G",
		"gpu0:vram=8G,bw=272G,pcie=25G,cc=fast",
		"gpu100:vram=1G,bw=1G,pcie=1G",
	};
	struct io_device_set set;
	struct err err;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		ck_assert_msg(io_device_set_read(&set, bad[i], &err) == -EINVAL,
			      "'%s' accepted", bad[i]);
		ck_assert_msg(strncmp(err.msg, "--devices: ", 11) == 0 &&
				      !strchr(err.msg, '\n'),
			      "'%s': %s", bad[i], err.msg);
	}
}
END_TEST

START_TEST(test_device_environment)
{
	struct io_device_set set;
	struct err err = { 0 };
	char list[128];

	setenv("LLMFS_DEVICES", "gpu3:vram=2G,bw=100G,pcie=8G", 1);
	ck_assert_int_eq(io_device_set_read(&set, NULL, &err), 0);
	ck_assert_ptr_nonnull(io_device_find(&set, "gpu3"));
	ck_assert_str_eq(set.spec, "gpu3:vram=2G,bw=100G,pcie=8G");
	io_devices_list(list, sizeof(list));
	ck_assert_ptr_nonnull(strstr(list, " gpu3"));
	/* An explicit description replaces the environment's. */
	ck_assert_int_eq(io_device_set_read(&set, "", &err), 0);
	ck_assert_ptr_null(io_device_find(&set, "gpu3"));
	setenv("LLMFS_DEVICES", "gpu0:bw=2G", 1);
	ck_assert_int_eq(io_device_set_read(&set, NULL, &err), -EINVAL);
	unsetenv("LLMFS_DEVICES");
}
END_TEST

/* The weights know their GPUs; a move there is ENODEV and moves nothing. */
START_TEST(test_device_move_to_simulated_gpu)
{
	struct io_load_options opt = { .no_uring = true };
	struct io_weights *w = NULL;
	struct io_device_set set;
	struct err err = { 0 };
	struct fake f;
	void *before;

	ck_assert_int_eq(
		io_device_set_read(&set, "gpu0:vram=8G,bw=272G,pcie=25G", &err),
		0);
	opt.devices = &set;
	fake_make(&f, "/tmp", 4096, (1u << 20) + 5);
	ck_assert_int_eq(io_weights_load(&w, &f.g, &opt, &err), 0);
	ck_assert_ptr_nonnull(io_device_find(io_weights_devices(w), "gpu0"));
	before = io_weights_placement(w, 1)->data;
	ck_assert_int_eq(io_weights_move(w, 1, "gpu0", &err), -ENODEV);
	ck_assert_ptr_nonnull(strstr(err.msg, "no CUDA backend"));
	ck_assert_int_eq(io_weights_move(w, 1, "gpu1", &err), -EINVAL);
	ck_assert_ptr_nonnull(
		strstr(err.msg, "no such device gpu1 (devices: cpu"));
	ck_assert_ptr_nonnull(strstr(err.msg, " gpu0)"));
	ck_assert_ptr_eq(io_weights_placement(w, 1)->data, before);
	ck_assert_str_eq(io_weights_placement(w, 1)->device, "cpu");
	ck_assert_int_eq(io_weights_move(w, 1, "numa0", &err), 0);
	ck_assert_str_eq(io_weights_placement(w, 1)->device, "numa0");
	check_bytes(&f.g, w);
	io_weights_free(w);
	unlink(f.path);
}
END_TEST

static Suite *device_suite(void)
{
	Suite *s = suite_create("io_device");
	TCase *tc = tcase_create("device");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_device_host_from_machine);
	tcase_add_test(tc, test_device_gpu_described);
	tcase_add_test(tc, test_device_bad_descriptions);
	tcase_add_test(tc, test_device_cap_on_a_real_card);
	tcase_add_test(tc, test_device_product_rates);
	tcase_add_test(tc, test_device_environment);
	tcase_add_test(tc, test_device_move_to_simulated_gpu);
	suite_add_tcase(s, tc);
	return s;
}

const struct check_main check_main = { .suite = device_suite };
