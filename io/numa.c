/* SPDX-License-Identifier: MIT */
/*
 * NUMA: reading the machine's topology, planning where the weights go, and
 * pinning threads to a node.
 *
 * The planner is a pure function of (topology, policy, tensor sizes) so that
 * it can be tested on machines we do not have: 2 and 4 node topologies are
 * made up in tests/io/test_numa.c. On a one-node machine every policy is
 * the trivial plan (everything on node 0).
 *
 *   interleave   the kernel spreads the pages of each region over all
 *                nodes: bandwidth of every memory controller, no locality
 *   node:N       everything on node N (run the threads there too)
 *   replicate    one full copy per node; threads of node k read copy k
 */
#include <errno.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "weights_internal.h"

/*
 * libnuma fills its per-node CPU mask cache on first use without a lock:
 * two models loading at once raced on it and leaked a mask (LSan saw it).
 */
static pthread_mutex_t numa_cpus_lock = PTHREAD_MUTEX_INITIALIZER;

static int numa_cpus_of(int node, struct bitmask *cpus)
{
	int rc;

	pthread_mutex_lock(&numa_cpus_lock);
	rc = numa_node_to_cpus(node, cpus);
	pthread_mutex_unlock(&numa_cpus_lock);
	return rc;
}

static uint64_t numa_mem_available(void)
{
	unsigned long long kb = 0;
	char line[256];
	FILE *f = fopen("/proc/meminfo", "r");
	struct sysinfo si;

	if (f) {
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
				break;
		fclose(f);
	}
	if (kb)
		return (uint64_t)kb * 1024;
	if (sysinfo(&si) == 0)
		return (uint64_t)si.freeram * si.mem_unit;
	return 0;
}

void (*io_numa_topology_fake)(struct io_numa_topology *topo);

int io_numa_topology_read(struct io_numa_topology *topo, struct err *err)
{
	struct bitmask *cpus;
	long long free_b, total_b;
	int n, max;

	memset(topo, 0, sizeof(*topo));
	if (io_numa_topology_fake) {
		io_numa_topology_fake(topo);
		return 0;
	}
	if (numa_available() < 0) {
		topo->n_nodes = 1;
		topo->nodes[0].free_bytes = numa_mem_available();
		topo->nodes[0].n_cpus = (uint32_t)get_nprocs();
		return 0;
	}
	cpus = numa_allocate_cpumask();
	if (!cpus)
		return err_set(err, ENOMEM, "out of memory for a CPU mask");
	max = numa_max_node();
	for (n = 0; n <= max && topo->n_nodes < IO_NUMA_MAX_NODES; n++) {
		struct io_numa_node *node = &topo->nodes[topo->n_nodes];

		if (!numa_bitmask_isbitset(numa_nodes_ptr, (unsigned)n))
			continue;
		node->id = n;
		total_b = numa_node_size64(n, &free_b);
		if (total_b < 0)
			total_b = free_b = 0;
		node->free_bytes = (uint64_t)free_b;
		node->total_bytes = (uint64_t)total_b;
		if (numa_cpus_of(n, cpus) == 0)
			node->n_cpus = numa_bitmask_weight(cpus);
		topo->n_nodes++;
	}
	numa_free_cpumask(cpus);
	/* Page cache counts as used to the node's free figure; not to us. */
	if (topo->n_nodes == 1)
		topo->nodes[0].free_bytes = numa_mem_available();
	return 0;
}

static int plan_index(const struct io_numa_topology *topo, int id)
{
	uint32_t k;

	for (k = 0; k < topo->n_nodes; k++)
		if (topo->nodes[k].id == id)
			return (int)k;
	return -1;
}

static int plan_room(const struct io_numa_plan *plan,
		     const struct io_numa_topology *topo, struct err *err)
{
	uint32_t k;

	for (k = 0; k < topo->n_nodes; k++)
		if (plan->node_bytes[k] > topo->nodes[k].free_bytes)
			return err_set(
				err, ENOSPC,
				"NUMA node %d has %llu MiB free, the weights need %llu MiB there",
				topo->nodes[k].id,
				(unsigned long long)(topo->nodes[k]
							     .free_bytes >>
						     20),
				(unsigned long long)((plan->node_bytes[k] +
						      (1 << 20) - 1) >>
						     20));
	return 0;
}

int io_numa_plan_make(struct io_numa_plan *plan,
		      const struct io_numa_topology *topo,
		      enum io_numa_policy policy, int node,
		      const uint64_t *tensor_bytes, uint64_t n_tensors,
		      struct err *err)
{
	uint64_t i, total = 0, rest;
	uint32_t c, k, n_nodes = topo->n_nodes ? topo->n_nodes : 1;
	int where = -1, rc, idx;

	memset(plan, 0, sizeof(*plan));
	if (topo->n_nodes > IO_NUMA_MAX_NODES)
		return err_set(err, EINVAL, "topology of %u nodes (at most %d)",
			       topo->n_nodes, IO_NUMA_MAX_NODES);
	for (i = 0; i < n_tensors; i++)
		total += tensor_bytes[i];
	plan->n_copies = 1;
	plan->copy_node[0] = topo->n_nodes ? topo->nodes[0].id : 0;
	switch (policy) {
	case IO_NUMA_DEFAULT:
		/*
		 * First touch by the loading thread: charged to its node as far
		 * as it has room, the rest spills over (as the kernel does).
		 */
		for (k = 0, rest = total; k < n_nodes && rest; k++) {
			uint64_t here = topo->n_nodes ?
						topo->nodes[k].free_bytes :
						rest;

			plan->node_bytes[k] = here < rest ? here : rest;
			rest -= plan->node_bytes[k];
		}
		plan->node_bytes[0] += rest; /* no room anywhere: refused */
		break;
	case IO_NUMA_INTERLEAVE:
		where = n_nodes > 1 ? IO_MEM_INTERLEAVE : -1;
		for (k = 0; k < n_nodes; k++)
			plan->node_bytes[k] = (total + n_nodes - 1) / n_nodes;
		break;
	case IO_NUMA_NODE:
		idx = plan_index(topo, node);
		if (idx < 0)
			return err_set(err, EINVAL,
				       "no NUMA node %d (this machine has %u)",
				       node, n_nodes);
		where = node;
		plan->copy_node[0] = node;
		plan->node_bytes[idx] = total;
		break;
	case IO_NUMA_REPLICATE:
		plan->n_copies = n_nodes;
		for (k = 0; k < n_nodes; k++) {
			plan->copy_node[k] = topo->n_nodes ? topo->nodes[k].id :
							     0;
			plan->node_bytes[k] = total;
		}
		break;
	default:
		return err_set(err, EINVAL, "unknown NUMA policy %d",
			       (int)policy);
	}
	rc = plan_room(plan, topo, err);
	if (rc < 0)
		return rc;
	plan->n_tensors = n_tensors;
	plan->node = calloc(n_tensors * plan->n_copies + 1,
			    sizeof(*plan->node));
	if (!plan->node)
		return err_set(err, ENOMEM, "out of memory for a NUMA plan");
	for (c = 0; c < plan->n_copies; c++)
		for (i = 0; i < n_tensors; i++)
			plan->node[c * n_tensors + i] =
				policy == IO_NUMA_REPLICATE ?
					plan->copy_node[c] :
					where;
	return 0;
}

void io_numa_plan_free(struct io_numa_plan *plan)
{
	if (!plan)
		return;
	free(plan->node);
	plan->node = NULL;
}

int io_numa_thread_pin(int node, struct err *err)
{
	struct bitmask *cpus;
	cpu_set_t set;
	unsigned c;
	int rc;

	if (numa_available() < 0 || node < 0)
		return 0;
	cpus = numa_allocate_cpumask();
	if (!cpus)
		return err_set(err, ENOMEM, "out of memory for a CPU mask");
	if (numa_cpus_of(node, cpus) < 0) {
		numa_free_cpumask(cpus);
		return err_set(err, EINVAL, "no NUMA node %d", node);
	}
	CPU_ZERO(&set);
	for (c = 0; c < cpus->size && c < CPU_SETSIZE; c++)
		if (numa_bitmask_isbitset(cpus, c))
			CPU_SET(c, &set);
	numa_free_cpumask(cpus);
	rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (rc)
		return err_set(err, rc, "pin to NUMA node %d: %s", node,
			       strerror(rc));
	return 0;
}

int io_numa_node_of_cpu(int cpu)
{
	int n;

	if (numa_available() < 0)
		return 0;
	n = numa_node_of_cpu(cpu);
	return n < 0 ? 0 : n;
}

uint32_t io_numa_node_count(void)
{
	int n, count = 0;

	if (numa_available() < 0)
		return 1;
	for (n = 0; n <= numa_max_node(); n++)
		count += numa_bitmask_isbitset(numa_nodes_ptr, (unsigned)n);
	return count ? (uint32_t)count : 1;
}

int io_numa_policy_parse(const char *s, enum io_numa_policy *policy, int *node,
			 struct err *err)
{
	char *end;
	long n;

	*node = 0;
	if (strcmp(s, "default") == 0 || strcmp(s, "") == 0) {
		*policy = IO_NUMA_DEFAULT;
	} else if (strcmp(s, "interleave") == 0) {
		*policy = IO_NUMA_INTERLEAVE;
	} else if (strcmp(s, "replicate") == 0) {
		*policy = IO_NUMA_REPLICATE;
	} else if (strncmp(s, "node:", 5) == 0 && s[5] >= '0' && s[5] <= '9') {
		n = strtol(s + 5, &end, 10);
		if (*end || n > 4095)
			return err_set(err, EINVAL, "bad NUMA node in '%.40s'",
				       s);
		*policy = IO_NUMA_NODE;
		*node = (int)n;
	} else {
		return err_set(
			err, EINVAL,
			"bad NUMA policy '%.40s' (interleave, node:N, replicate or default)",
			s);
	}
	return 0;
}
