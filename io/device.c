/* SPDX-License-Identifier: MIT */
/*
 * Devices as objects: what the machine has to hold and compute weights
 * (cpu, one numaN per NUMA node, gpuN), with their memory and bandwidths.
 * The placement commands, the planner and the status file read this one
 * description instead of parsing device strings each on their own.
 *
 * Host devices come from the machine: libnuma for the nodes, sysinfo and
 * /proc/meminfo for the memory. GPUs come from a description, because this
 * build has no CUDA backend: `--devices` or $LLMFS_DEVICES, e.g.
 *
 *   gpu0:vram=8G,bw=272G,pcie=25G,node=1,cc=8.9,model=RTX-4060
 *   cpu:bw=60G                  (a given host bandwidth instead of measured)
 *
 * A device name starts a description, KEY=VALUE words after it (separated
 * by ',', ':', ';' or blanks) describe it. Memory sizes take K, M, G, T as
 * powers of 1024 (vram=8G is 8 GiB, as cards are sold); bandwidths take
 * them as powers of 1000 (bw=272G is 272 GB/s, as data sheets write it).
 * A described GPU is "simulated": it is listed and planned for, and every
 * attempt to move weights onto it fails with ENODEV.
 *
 * A GPU given only vram= (gpu0:vram=8G) is a cap on a real card: the
 * probe (engine_gpu_probe) fills in what it measures, with total and free
 * memory at most the cap, and the CUDA backend refuses to place more
 * there (ENOSPC). Until a probe finds it, it has no bandwidth. A real
 * card's measured costs can be given too: step=0.4ms (a decode step's
 * fixed cost), cross=30us (one host <-> GPU hand-over), and the host's
 * step (cpu:step=2ms, all-cpu's); the planner takes them over its
 * defaults (tools/bench-placement.sh measures them). product=1.2T is the
 * rate at which a GPU's decode product reads weights of every type,
 * product.q8_0=900G one type's (the probe measures Q4_K, Q6_K, Q8_0, F16
 * and BF16 on a card; a simulated GPU without them is planned at bw=).
 * Given ones win over measured ones, a type's own over product=.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "weights_internal.h"

static const char *const device_kind_names[] = {
	[IO_DEVICE_CPU] = "cpu",
	[IO_DEVICE_NUMA] = "numa",
	[IO_DEVICE_GPU] = "gpu",
};

static const char *const device_bw_sources[] = {
	[IO_BW_UNKNOWN] = "unknown",
	[IO_BW_GIVEN] = "given",
	[IO_BW_MEASURED] = "measured",
	[IO_BW_DERIVED] = "derived",
};

const char *io_device_kind_name(enum io_device_kind kind)
{
	return kind <= IO_DEVICE_GPU ? device_kind_names[kind] : "?";
}

const char *io_device_bw_source_name(enum io_bw_source s)
{
	return s <= IO_BW_DERIVED ? device_bw_sources[s] : "?";
}

static struct io_device *device_add(struct io_device_set *set,
				    enum io_device_kind kind, int index,
				    struct err *err)
{
	struct io_device *d;

	if (set->n == IO_DEVICE_MAX) {
		err_set(err, EINVAL, "more than %d devices", IO_DEVICE_MAX);
		return NULL;
	}
	d = &set->dev[set->n++];
	memset(d, 0, sizeof(*d));
	d->kind = kind;
	d->index = index;
	d->node = kind == IO_DEVICE_NUMA ? index : -1;
	d->compute = kind != IO_DEVICE_GPU;
	if (kind == IO_DEVICE_CPU)
		snprintf(d->name, sizeof(d->name), "cpu");
	else
		snprintf(d->name, sizeof(d->name), "%s%d",
			 device_kind_names[kind], index);
	return d;
}

/* cpu and one numaN per node of the machine (or of the fake topology). */
static int device_read_host(struct io_device_set *set, struct err *err)
{
	struct io_numa_topology topo;
	struct io_device *cpu, *d;
	struct sysinfo si;
	uint32_t k;
	int rc;

	rc = io_numa_topology_read(&topo, err);
	if (rc < 0)
		return rc;
	cpu = device_add(set, IO_DEVICE_CPU, -1, err);
	if (!cpu)
		return -EINVAL;
	if (sysinfo(&si) == 0)
		cpu->total_bytes = (uint64_t)si.totalram * si.mem_unit;
	cpu->n_cpus = 0;
	for (k = 0; k < topo.n_nodes; k++) {
		d = device_add(set, IO_DEVICE_NUMA, topo.nodes[k].id, err);
		if (!d)
			return -EINVAL;
		d->free_bytes = topo.nodes[k].free_bytes;
		d->total_bytes = topo.nodes[k].total_bytes;
		d->n_cpus = topo.nodes[k].n_cpus;
		cpu->free_bytes += d->free_bytes;
		cpu->n_cpus += d->n_cpus;
	}
	/*
	 * One node is the machine: the kernel's node figure can miss memory
	 * (hot-plugged into a VM, as on our CI), sysinfo does not.
	 */
	if (topo.n_nodes == 1 && cpu->total_bytes)
		set->dev[1].total_bytes = cpu->total_bytes;
	if (cpu->total_bytes == 0)
		for (k = 1; k < set->n; k++)
			cpu->total_bytes += set->dev[k].total_bytes;
	return 0;
}

/* "8G" -> 8 * unit^3 with unit 1024 (sizes) or 1000 (bandwidths). */
static int device_number(const char *s, double unit, double *out)
{
	static const char suffixes[] = "KMGT";
	const char *p;
	char *end;
	double v;

	v = strtod(s, &end);
	if (end == s || !(v >= 0) || v > 1e18)
		return -EINVAL;
	if (*end && (p = strchr(suffixes, toupper((unsigned char)*end)))) {
		for (int i = 0; i <= p - suffixes; i++)
			v *= unit;
		end++;
	}
	*out = v;
	return *end ? -EINVAL : 0;
}

/* "30us", "0.4ms", "0.0004" (seconds): a time under a second. */
static int device_seconds(const char *s, double *out)
{
	static const struct {
		const char *suffix;
		double unit;
	} units[] = { { "", 1 },
		      { "s", 1 },
		      { "ms", 1e-3 },
		      { "us", 1e-6 },
		      { "ns", 1e-9 } };
	char *end;
	double v;

	v = strtod(s, &end);
	if (end == s || !(v > 0))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0 &&
		    v * units[i].unit < 1) {
			*out = v * units[i].unit;
			return 0;
		}
	}
	return -EINVAL;
}

/* product.q8_0=900G: the rate of one weight type's decode product */
static int device_product_type(struct io_device *d, const char *type,
			       const char *val, struct err *err)
{
	const struct io_type_info *ti;
	double v;
	uint32_t t;

	for (t = 0; t < IO_TYPE_COUNT; t++) {
		ti = io_type_info(t);
		if (ti && strcasecmp(ti->name, type) == 0)
			break;
	}
	if (t == IO_TYPE_COUNT)
		return err_set(
			err, EINVAL,
			"--devices: %s: no weight type '%.20s' (product.q4_K=, product.q8_0=, product.f16=, ...)",
			d->name, type);
	if (device_number(val, 1000, &v) < 0 || v < IO_DEVICE_RATE_MIN)
		return err_set(err, EINVAL,
			       "--devices: bad product.%s value '%.30s' for %s",
			       type, val, d->name);
	d->product_type[t].bw = v;
	d->product_type[t].source = IO_BW_GIVEN;
	return 0;
}

static int device_key(struct io_device *d, const char *key, const char *val,
		      struct err *err)
{
	bool gpu = d->kind == IO_DEVICE_GPU;
	double v;
	char *end;
	long l;

	if (strcmp(key, "model") == 0 && gpu) {
		snprintf(d->model, sizeof(d->model), "%s", val);
		return 0;
	}
	if (strcmp(key, "node") == 0 && gpu) {
		l = strtol(val, &end, 10);
		if (end == val || *end || l < 0 || l >= IO_NUMA_MAX_NODES)
			goto bad;
		d->node = (int)l;
		return 0;
	}
	if (strcmp(key, "cc") == 0 && gpu) {
		if (sscanf(val, "%d.%d", &d->cc_major, &d->cc_minor) != 2 ||
		    d->cc_major < 1 || d->cc_minor < 0)
			goto bad;
		return 0;
	}
	if (strcmp(key, "step") == 0 || (strcmp(key, "cross") == 0 && gpu)) {
		if (device_seconds(val, &v) < 0)
			goto bad;
		*(key[0] == 's' ? &d->step_s : &d->cross_s) = v;
		return 0;
	}
	if (strncmp(key, "product.", 8) == 0 && gpu)
		return device_product_type(d, key + 8, val, err);
	if (strcmp(key, "bw") == 0 ||
	    ((strcmp(key, "pcie") == 0 || strcmp(key, "product") == 0) &&
	     gpu)) {
		if (device_number(val, 1000, &v) < 0 || v < IO_DEVICE_RATE_MIN)
			goto bad;
		if (key[0] == 'b') {
			d->mem_bw = v;
			d->bw_source = IO_BW_GIVEN;
		} else if (key[1] == 'r') {
			d->product_bw = v;
			d->product_source = IO_BW_GIVEN;
		} else {
			d->link_bw = v;
		}
		return 0;
	}
	if ((strcmp(key, "vram") == 0 && gpu) || strcmp(key, "free") == 0 ||
	    (strcmp(key, "ram") == 0 && !gpu)) {
		if (device_number(val, 1024, &v) < 0 || v < 1 << 20)
			goto bad;
		if (strcmp(key, "free") != 0)
			d->total_bytes = (uint64_t)v;
		if (strcmp(key, "vram") != 0 || d->free_bytes == 0 ||
		    d->free_bytes > d->total_bytes)
			d->free_bytes = (uint64_t)v;
		return 0;
	}
	return err_set(
		err, EINVAL, "--devices: %s has no key '%.20s' (%s)", d->name,
		key,
		gpu ? "gpuN takes vram, free, bw, pcie, node, cc, model, step, cross, product, product.TYPE" :
		      "cpu and numaN take bw, ram, free");
bad:
	return err_set(err, EINVAL, "--devices: bad %s value '%.30s' for %s",
		       key, val, d->name);
}

/* A word naming a device: an existing host device, or a new gpuN. */
static int device_word(struct io_device_set *set, const char *w,
		       struct io_device **cur, struct err *err)
{
	char *end;
	long l;

	*cur = (struct io_device *)io_device_find(set, w);
	if (*cur && (*cur)->kind != IO_DEVICE_GPU)
		return 0;
	if (*cur)
		return err_set(err, EINVAL, "--devices: %s described twice", w);
	if (strncmp(w, "gpu", 3) == 0 && isdigit((unsigned char)w[3])) {
		l = strtol(w + 3, &end, 10);
		if (*end || l > 99)
			goto bad;
		*cur = device_add(set, IO_DEVICE_GPU, (int)l, err);
		if (!*cur)
			return -EINVAL;
		(*cur)->simulated = true;
		return 0;
	}
bad:
	return err_set(
		err, EINVAL,
		"--devices: no device '%.20s' (name cpu, numaN of this machine, or a simulated gpuN)",
		w);
}

static int device_check(struct io_device *d, struct err *err)
{
	if (d->kind != IO_DEVICE_GPU)
		return 0;
	/* vram= alone: a cap on the real card of that name */
	if (d->total_bytes && d->mem_bw <= 0 && d->link_bw <= 0 &&
	    !d->cc_major && !d->model[0] && d->node < 0) {
		d->capped = true;
		d->simulated = false;
		return 0;
	}
	if (!d->total_bytes || d->mem_bw <= 0 || d->link_bw <= 0)
		return err_set(
			err, EINVAL,
			"--devices: %s needs vram=, bw= and pcie= (e.g. %s:vram=8G,bw=272G,pcie=25G)",
			d->name, d->name);
	return 0;
}

static int device_parse(struct io_device_set *set, const char *spec,
			struct err *err)
{
	struct io_device *cur = NULL;
	char *copy, *w, *save, *eq;
	int rc = 0;
	uint32_t k;

	copy = strdup(spec);
	if (!copy)
		return err_set(err, ENOMEM, "out of memory");
	for (w = strtok_r(copy, ",:; \t\n", &save); w && !rc;
	     w = strtok_r(NULL, ",:; \t\n", &save)) {
		eq = strchr(w, '=');
		if (!eq) {
			if (cur)
				rc = device_check(cur, err);
			if (!rc)
				rc = device_word(set, w, &cur, err);
		} else if (!cur) {
			rc = err_set(
				err, EINVAL,
				"--devices: '%.30s' before any device name", w);
		} else {
			*eq = '\0';
			rc = device_key(cur, w, eq + 1, err);
		}
	}
	free(copy);
	for (k = 0; k < set->n && !rc; k++)
		rc = device_check(&set->dev[k], err);
	return rc;
}

int io_device_set_read(struct io_device_set *set, const char *spec,
		       struct err *err)
{
	int rc;

	memset(set, 0, sizeof(*set));
	rc = device_read_host(set, err);
	if (rc < 0)
		return rc;
	if (!spec)
		spec = getenv("LLMFS_DEVICES");
	if (spec && *spec) {
		rc = device_parse(set, spec, err);
		if (rc < 0)
			return rc;
		snprintf(set->spec, sizeof(set->spec), "%s", spec);
	}
	return 0;
}

const struct io_device *io_device_find(const struct io_device_set *set,
				       const char *name)
{
	uint32_t k;

	for (k = 0; k < set->n; k++)
		if (strcmp(set->dev[k].name, name) == 0)
			return &set->dev[k];
	return NULL;
}

size_t io_device_set_names(const struct io_device_set *set, char *buf,
			   size_t cap)
{
	size_t len = 0;
	uint32_t k;
	int n;

	if (cap)
		buf[0] = '\0';
	for (k = 0; k < set->n && cap; k++) {
		n = snprintf(buf + len, cap - len, "%s%s", k ? " " : "",
			     set->dev[k].name);
		if (n < 0 || (size_t)n >= cap - len)
			break;
		len += (size_t)n;
	}
	return len;
}

int io_device_lookup(const struct io_device_set *set, const char *name,
		     const struct io_device **out, struct err *err)
{
	char list[256];

	*out = io_device_find(set, name);
	if (*out)
		return 0;
	io_device_set_names(set, list, sizeof(list));
	return err_set(err, EINVAL, "no such device %.32s (devices: %s)", name,
		       list);
}

const struct io_device *io_device_set_unprobed(const struct io_device_set *set)
{
	uint32_t k;

	for (k = 0; k < set->n; k++)
		if (set->dev[k].capped && set->dev[k].mem_bw <= 0)
			return &set->dev[k];
	return NULL;
}

double io_device_product_rate(const struct io_device *d, uint32_t type,
			      enum io_bw_source *source)
{
	const struct io_device_rate *r = type < IO_TYPE_COUNT ?
						 &d->product_type[type] :
						 NULL;
	enum io_bw_source unused;

	if (!source)
		source = &unused;
	if (r && r->bw > 0) {
		*source = r->source;
		return r->bw;
	}
	if (d->product_bw > 0) {
		*source = d->product_source;
		return d->product_bw;
	}
	*source = d->bw_source;
	return d->mem_bw;
}

void io_device_product_give(struct io_device *d, const struct io_device *given)
{
	uint32_t t;

	if (given->product_source == IO_BW_GIVEN) {
		d->product_bw = given->product_bw;
		d->product_source = IO_BW_GIVEN;
	}
	for (t = 0; t < IO_TYPE_COUNT; t++) {
		if (given->product_type[t].source == IO_BW_GIVEN)
			d->product_type[t] = given->product_type[t];
		else if (given->product_source == IO_BW_GIVEN)
			d->product_type[t] = (struct io_device_rate){ 0 };
	}
}

int io_device_usable(const struct io_device *d, struct err *err)
{
	if (d->compute)
		return 0;
	return err_set(
		err, ENODEV,
		"%s is %s: this build has no CUDA backend to compute on it",
		d->name,
		d->simulated ? "a simulated GPU (--devices)" : "a GPU");
}

/* ---- host bandwidth, measured ------------------------------------------ */

struct bw_slice {
	const uint64_t *p;
	size_t n;
	uint64_t sum;
};

static void *bw_read(void *arg)
{
	struct bw_slice *s = arg;
	uint64_t a = 0, b = 0, c = 0, d = 0;
	size_t i;

	for (i = 0; i + 4 <= s->n; i += 4) {
		a += s->p[i];
		b += s->p[i + 1];
		c += s->p[i + 2];
		d += s->p[i + 3];
	}
	s->sum = a + b + c + d;
	return NULL;
}

static double bw_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * Read 128 MiB (far past any cache) with one thread per online CPU, best
 * of 3 rounds: the bandwidth a decode step reading the weights sees.
 */
static double bw_measure(void)
{
	enum { MAX_THREADS = 64 };
	const size_t bytes = 128u << 20;
	struct bw_slice sl[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	size_t n = bytes / sizeof(uint64_t), per;
	uint64_t *buf, sink = 0;
	double best = 0, t;
	int nt, i, r;

	nt = ncpu < 1 ? 1 : ncpu > MAX_THREADS ? MAX_THREADS : (int)ncpu;
	buf = malloc(bytes);
	if (!buf)
		return 0;
	for (size_t j = 0; j < n; j++)
		buf[j] = j;
	per = n / (size_t)nt;
	for (r = 0; r < 3; r++) {
		t = bw_now();
		for (i = 0; i < nt; i++) {
			sl[i] = (struct bw_slice){ buf + (size_t)i * per, per,
						   0 };
			if (i && pthread_create(&th[i], NULL, bw_read, &sl[i]))
				bw_read(&sl[i]), th[i] = 0;
		}
		bw_read(&sl[0]);
		for (i = 1; i < nt; i++)
			if (th[i])
				pthread_join(th[i], NULL);
		t = bw_now() - t;
		for (i = 0; i < nt; i++)
			sink += sl[i].sum;
		if (t > 0 && per * nt * sizeof(uint64_t) / t > best)
			best = per * nt * sizeof(uint64_t) / t;
	}
	free(buf);
	/* The sum is checked so that the reads cannot be optimised away. */
	return sink ? best : 0;
}

void io_device_set_measure(struct io_device_set *set)
{
	struct io_device *cpu = NULL;
	uint32_t k;

	for (k = 0; k < set->n; k++)
		if (set->dev[k].kind == IO_DEVICE_CPU)
			cpu = &set->dev[k];
	if (!cpu)
		return;
	if (cpu->bw_source == IO_BW_UNKNOWN) {
		cpu->mem_bw = bw_measure();
		cpu->bw_source = cpu->mem_bw > 0 ? IO_BW_MEASURED :
						   IO_BW_UNKNOWN;
	}
	/* A node's share of the machine's bandwidth, by its CPUs. */
	for (k = 0; k < set->n; k++) {
		struct io_device *d = &set->dev[k];

		if (d->kind != IO_DEVICE_NUMA ||
		    d->bw_source != IO_BW_UNKNOWN || cpu->mem_bw <= 0)
			continue;
		d->mem_bw = cpu->n_cpus && d->n_cpus ?
				    cpu->mem_bw * d->n_cpus / cpu->n_cpus :
				    cpu->mem_bw;
		d->bw_source = IO_BW_DERIVED;
	}
}

/* ---- the old string API, on the machine's set -------------------------- */

size_t io_devices_list(char *buf, size_t cap)
{
	struct io_device_set set;

	if (io_device_set_read(&set, NULL, NULL) < 0 &&
	    io_device_set_read(&set, "", NULL) < 0) {
		if (cap)
			snprintf(buf, cap, "cpu");
		return cap ? strlen(buf) : 0;
	}
	return io_device_set_names(&set, buf, cap);
}

int io_device_free(const char *device, uint64_t *bytes, struct err *err)
{
	struct io_device_set set;
	const struct io_device *d;
	int rc;

	rc = io_device_set_read(&set, NULL, err);
	if (rc < 0)
		return rc;
	rc = io_device_lookup(&set, device, &d, err);
	if (rc < 0)
		return rc;
	*bytes = d->free_bytes;
	return 0;
}
