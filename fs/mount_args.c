// SPDX-License-Identifier: MIT
/*
 * The `llmfs` command line: SOURCE... MOUNTPOINT and options, in the
 * form mount.fuse3 gives an fstab line (`llmfs SOURCE MOUNTPOINT -o
 * opt,opt`) as well as options anywhere; every long option is also an -o
 * item (mount_opts). What it makes is a struct mount_args (mount.h) for
 * the daemon, mount.c. Errors are a line on stderr and -EINVAL: exit 1,
 * as for every usage error (llmfs.1).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mount.h"
#include "store.h"

#ifndef LLMFS_VERSION
#define LLMFS_VERSION "unknown"
#endif

static void mount_usage(FILE *f)
{
	fprintf(f,
		"usage: llmfs [options] SOURCE... MOUNTPOINT [-o OPT,...]\n"
		"  SOURCE            a .gguf file, a directory of them, or a\n"
		"                    ':'-separated list of both\n"
		"  -o LONG_OPT=VALUE any --long-opt below, as fstab gives it\n"
		"  --name ALIAS=PATH mount the model at PATH as ALIAS\n"
		"  -f                stay in the foreground\n"
		"  -d                debug: foreground, log every request\n"
		"  -V, --version     print the version and exit\n"
		"  -o OPT[,OPT...]   allow_other, ro (inspection only), and\n"
		"                    other FUSE mount options\n"
		"  --threads N       engine threads per model (0 = physical cores)\n"
		"  --ctx N           context length of each sequence\n"
		"  --idle-timeout S  seconds before an unused sessions/N goes "
		"(600)\n"
		"  --numa POLICY     weights: interleave, node:N, replicate "
		"or default\n"
		"  --kv-type-k T     K cache type: f32 f16 bf16 q8_0 q4_0 q4_1 "
		"q5_0 q5_1 (f16)\n"
		"  --kv-type-v T     V cache type (f16)\n"
		"  --kv-mem BYTES    KV cache cap per model, k/M/G suffixes "
		"(0: none)\n"
		"  --mem-budget BYTES  memory for every model's KV cache and "
		"the\n"
		"                    prompts and answers held (0: 3/4 of what "
		"the\n"
		"                    weights leave available)\n"
		"  --devices SPEC    describe (simulated) GPUs and bandwidths:\n"
		"                    gpu0:vram=8G,bw=272G,pcie=25G,node=1 "
		"(or LLMFS_DEVICES);\n"
		"                    auto (the default): the GPUs the CUDA "
		"module finds\n"
		"  --store KIND[:PATH] the models of a store: ollama, hf, "
		"lmstudio, llamacpp\n"
		"                    (PATH: where it is; a directory SOURCE of "
		"one is found too)\n"
		"  --remote NAME=URL[,model=ID][,key_file=PATH][,ca_file=PATH]"
		"[,timeout=S]\n"
		"                    a model served by an OpenAI-compatible "
		"server\n"
		"  --max-sessions N  sessions/N per uid (1024)\n"
		"  --max-generations N  answers queued, running or unread, "
		"per uid (256)\n"
		"  --max-prompt-bytes N  prompt bytes written, not submitted, "
		"per uid (64 MiB)\n"
		"  --stream-buffer N unread bytes before a generation pauses "
		"(1 MiB)\n"
		"  --prefill-chunk N prompt tokens per scheduler step (64)\n"
		"  --shared-config   anyone may write config and placement\n"
		"  --batch-exact     a batch gives each session the bits it\n"
		"                    would get alone (slower prefill)\n"
		"  --placement LINE  where each model's weights go, as a line\n"
		"                    of its placement file ('all gpu0'), before\n"
		"                    they are read: a GPU's straight from disk\n"
		"See llmfs(1) and Documentation/ABI.md.\n");
}

static int mount_add_src(struct mount_args *a, const char *name,
			 const char *path)
{
	struct mount_src *s = realloc(a->src, (a->n_src + 1) * sizeof(*s));
	char *abs;

	if (!s)
		return -ENOMEM;
	a->src = s;
	s = &a->src[a->n_src];
	s->name = name ? strdup(name) : NULL;
	s->remote = NULL;
	s->store = -1;
	/* fuse_daemonize() changes to /: keep absolute paths. */
	abs = realpath(path, NULL);
	s->path = abs ? abs : strdup(path);
	if (!s->path || (name && !s->name)) {
		free(s->name);
		free(s->path);
		return -ENOMEM;
	}
	a->n_src++;
	return 0;
}

/* --remote NAME=URL[,...]: checked when its directory is made. */
static int mount_add_remote(struct mount_args *a, char *arg)
{
	struct mount_src *s = realloc(a->src, (a->n_src + 1) * sizeof(*s));
	char *eq = strchr(arg, '=');

	if (!s)
		return -ENOMEM;
	a->src = s;
	if (!eq || eq == arg || !eq[1]) {
		fprintf(stderr, "llmfs: --remote wants NAME=URL[,OPTION...]\n");
		return -EINVAL;
	}
	s = &a->src[a->n_src];
	s->name = strndup(arg, eq - arg);
	s->remote = strdup(eq + 1);
	s->path = NULL;
	s->store = -1;
	if (!s->name || !s->remote) {
		free(s->name);
		free(s->remote);
		return -ENOMEM;
	}
	a->n_src++;
	return 0;
}

/* A store: its models are found when the mount makes its directories. */
static int mount_add_store(struct mount_args *a, int kind, const char *root)
{
	int rc = mount_add_src(a, NULL, root);

	if (!rc)
		a->src[a->n_src - 1].store = kind;
	return rc;
}

/* --store KIND[:PATH] */
static int mount_store_option(struct mount_args *a, const char *arg)
{
	enum fs_store_kind kind;
	char root[PATH_MAX];
	struct err err = { 0 };

	if (fs_store_parse(arg, &kind, root, sizeof(root), &err)) {
		fprintf(stderr, "llmfs: --store %s: %s\n", arg, err.msg);
		return -EINVAL;
	}
	return mount_add_store(a, kind, root);
}

static int mount_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.gguf of dir, sorted; the later parts of a split model are not. */
static int mount_add_dir(struct mount_args *a, const char *dir)
{
	struct dirent *d;
	char **names = NULL, path[PATH_MAX];
	size_t n = 0;
	int rc = 0;
	DIR *dp = opendir(dir);

	if (!dp)
		return -errno;
	while ((d = readdir(dp)) && !rc) {
		size_t len = strlen(d->d_name);
		char **p;

		if (len < 6 || strcasecmp(d->d_name + len - 5, ".gguf"))
			continue;
		if (strstr(d->d_name, "-of-") &&
		    !strstr(d->d_name, "-00001-of-"))
			continue;
		p = realloc(names, (n + 1) * sizeof(*names));
		if (!p || !(p[n] = strdup(d->d_name)))
			rc = -ENOMEM;
		if (p)
			names = p;
		if (!rc)
			n++;
	}
	closedir(dp);
	if (names)
		qsort(names, n, sizeof(*names), mount_cmp);
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (!rc)
			rc = mount_add_src(a, NULL, path);
		free(names[i]);
	}
	free(names);
	if (!rc && !n)
		fprintf(stderr, "llmfs: %s: no .gguf files\n", dir);
	return rc;
}

/* A directory that is a store (Ollama's, the Hugging Face cache...) or not. */
static int mount_add_dir_or_store(struct mount_args *a, const char *dir)
{
	int kind = fs_store_detect(dir);

	return kind < 0 ? mount_add_dir(a, dir) : mount_add_store(a, kind, dir);
}

/* sep (unless b is empty), then s with ',' and '\\' escaped as libfuse reads them. */
static int mount_buf_escaped(struct fs_buf *b, const char *sep, const char *s)
{
	if (b->len && fs_buf_add(b, sep, strlen(sep)))
		return -ENOMEM;
	for (; *s; s++)
		if (((*s == ',' || *s == '\\') && fs_buf_add(b, "\\", 1)) ||
		    fs_buf_add(b, s, 1))
			return -ENOMEM;
	return 0;
}

/*
 * The mount's source in /proc/mounts is what fstab names: mount -a tells
 * a mounted line from one to mount by it.
 */
static int mount_fsname_add(struct fs_buf *b, const char *src)
{
	return mount_buf_escaped(b, ":", src);
}

/*
 * A SOURCE: a file, a directory, or (as one fstab field names several) a
 * ':'-separated list of them; a path that exists is never split.
 */
static int mount_add_source(struct mount_args *a, char *arg)
{
	struct stat st;
	char *save, *part;
	int rc = 0;

	if (!stat(arg, &st))
		return S_ISDIR(st.st_mode) ? mount_add_dir_or_store(a, arg) :
					     mount_add_src(a, NULL, arg);
	rc = -errno;
	if ((rc != -ENOENT && rc != -ENOTDIR) || !strchr(arg, ':')) {
		fprintf(stderr, "llmfs: %s: %s\n", arg, strerror(-rc));
		return rc;
	}
	rc = 0;
	for (part = strtok_r(arg, ":", &save); part && !rc;
	     part = strtok_r(NULL, ":", &save)) {
		if (stat(part, &st)) {
			rc = -errno;
			fprintf(stderr, "llmfs: %s: %s\n", part, strerror(-rc));
			return rc;
		}
		rc = S_ISDIR(st.st_mode) ? mount_add_dir_or_store(a, part) :
					   mount_add_src(a, NULL, part);
	}
	return rc;
}

/*
 * mount(8) keeps these for itself; they reach us when an fstab line is
 * mounted through mount.fuse3 or given to llmfs by hand (fstab(5), mount(8)).
 */
static bool mount_opt_ignored(const char *o)
{
	static const char *const ignored[] = { "",	 "defaults", "auto",
					       "noauto", "user",     "nouser",
					       "users",	 "owner",    "group",
					       "nofail", "_netdev" };

	if (!strncasecmp(o, "x-", 2) || !strncmp(o, "comment=", 8))
		return true;
	for (size_t i = 0; i < sizeof(ignored) / sizeof(*ignored); i++)
		if (!strcmp(o, ignored[i]))
			return true;
	return false;
}

/* The long option that o's first len bytes name, '_' standing for '-'. */
static const struct option *mount_long_opt(const struct option *lo,
					   const char *o, size_t len)
{
	for (; lo->name; lo++) {
		size_t i;

		if (strlen(lo->name) != len)
			continue;
		for (i = 0; i < len; i++)
			if (lo->name[i] != (o[i] == '_' ? '-' : o[i]))
				break;
		if (i == len)
			return lo;
	}
	return NULL;
}

static int mount_queue(struct mount_args *a, int val, char *arg)
{
	struct mount_queued *q;

	q = realloc(a->queued, (a->n_queued + 1) * sizeof(*q));
	if (!q)
		return -ENOMEM;
	a->queued = q;
	a->queued[a->n_queued++] = (struct mount_queued){ val, arg };
	return 0;
}

/*
 * The next item of an -o list, cut in place at the first ',' that is not
 * escaped: a value with commas (--remote, --devices) is written with "\\,",
 * as libfuse reads -o lists too; "\\\\" is a backslash. NULL at the end.
 */
static char *mount_opt_next(char **list)
{
	char *item = *list, *r, *w;

	if (!item)
		return NULL;
	for (r = w = item; *r && *r != ','; r++, w++) {
		if (*r == '\\' && (r[1] == ',' || r[1] == '\\'))
			r++;
		*w = *r;
	}
	*list = *r ? r + 1 : NULL;
	*w = '\0';
	return item;
}

/*
 * -o, as mount.fuse3 passes an fstab line's options: an item that names a
 * long option (threads=4, idle_timeout=600) is queued for the getopt loop,
 * so each --option is a mount option with no code of its own; mount(8)'s
 * own items are dropped; the rest goes to libfuse and the kernel.
 */
static int mount_opts(struct mount_args *a, const struct option *lo, char *list)
{
	const struct option *l;
	char *o;
	size_t len;

	while ((o = mount_opt_next(&list))) {
		len = strcspn(o, "=");
		if (mount_opt_ignored(o))
			continue;
		l = mount_long_opt(lo, o, len);
		if (l && ((l->has_arg == required_argument && !o[len]) ||
			  (l->has_arg == no_argument && o[len]))) {
			fprintf(stderr, "llmfs: -o %s: %s\n", o,
				o[len] ? "takes no value" : "wants a value");
			return -EINVAL;
		}
		if (l && l->flag) {
			*l->flag = l->val;
		} else if (l) {
			if (mount_queue(a, l->val, o[len] ? o + len + 1 : NULL))
				return -ENOMEM;
		} else {
			if (!strcmp(o, "ro"))
				a->opt.ro = true;
			else if (!strcmp(o, "allow_other"))
				a->opt.allow_other = true;
			if (mount_buf_escaped(&a->fuse_opts, ",", o))
				return -ENOMEM;
		}
	}
	return 0;
}

/* The options an -o list named come first, in its order; then argv's. */
static int mount_getopt(struct mount_args *a, int argc, char **argv,
			const char *short_opts, const struct option *lo)
{
	if (a->next_queued < a->n_queued) {
		optarg = a->queued[a->next_queued].arg;
		return a->queued[a->next_queued++].val;
	}
	a->n_queued = a->next_queued = 0;
	return getopt_long(argc, argv, short_opts, lo, NULL);
}

static int mount_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 10);
	return errno || end == s || *end || *out > max || *s == '-' ? -EINVAL :
								      0;
}

/*
 * The limits of limits.c, in the order of their options: --max-sessions,
 * --max-generations, --max-prompt-bytes, --stream-buffer, --prefill-chunk.
 */
static int mount_limit(struct fs_options *o, int which, const char *arg)
{
	static const char *const names[] = { "max-sessions", "max-generations",
					     "max-prompt-bytes",
					     "stream-buffer", "prefill-chunk" };
	unsigned long u;

	if (mount_uint(arg, which == 2 || which == 3 ? 1ul << 40 : 1u << 20,
		       &u) ||
	    !u) {
		fprintf(stderr, "llmfs: --%s: bad number '%s'\n", names[which],
			arg);
		return -EINVAL;
	}
	switch (which) {
	case 0: o->max_sessions = u; break;
	case 1: o->max_generations = u; break;
	case 2: o->max_prompt_bytes = u; break;
	case 3: o->stream_buffer = u; break;
	default: o->prefill_chunk = u; break;
	}
	return 0;
}

enum {
	OPT_NAME = 256,
	OPT_THREADS,
	OPT_CTX,
	OPT_IDLE,
	OPT_NUMA,
	OPT_KV_TYPE_K,
	OPT_KV_TYPE_V,
	OPT_KV_MEM,
	OPT_MEM_BUDGET,
	OPT_DEVICES,
	OPT_REMOTE,
	OPT_MAX_SESSIONS,
	OPT_MAX_GENERATIONS,
	OPT_MAX_PROMPT_BYTES,
	OPT_STREAM_BUFFER,
	OPT_PREFILL_CHUNK,
	OPT_SHARED_CONFIG,
	OPT_BATCH_EXACT,
	OPT_PLACEMENT,
	OPT_STORE
};

static const struct option mount_long_opts[] = {
	{ "name", required_argument, NULL, OPT_NAME },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "ctx", required_argument, NULL, OPT_CTX },
	{ "idle-timeout", required_argument, NULL, OPT_IDLE },
	{ "numa", required_argument, NULL, OPT_NUMA },
	{ "kv-type-k", required_argument, NULL, OPT_KV_TYPE_K },
	{ "kv-type-v", required_argument, NULL, OPT_KV_TYPE_V },
	{ "kv-mem", required_argument, NULL, OPT_KV_MEM },
	{ "mem-budget", required_argument, NULL, OPT_MEM_BUDGET },
	{ "devices", required_argument, NULL, OPT_DEVICES },
	{ "remote", required_argument, NULL, OPT_REMOTE },
	{ "max-sessions", required_argument, NULL, OPT_MAX_SESSIONS },
	{ "max-generations", required_argument, NULL, OPT_MAX_GENERATIONS },
	{ "max-prompt-bytes", required_argument, NULL, OPT_MAX_PROMPT_BYTES },
	{ "stream-buffer", required_argument, NULL, OPT_STREAM_BUFFER },
	{ "prefill-chunk", required_argument, NULL, OPT_PREFILL_CHUNK },
	{ "shared-config", no_argument, NULL, OPT_SHARED_CONFIG },
	{ "batch-exact", no_argument, NULL, OPT_BATCH_EXACT },
	{ "placement", required_argument, NULL, OPT_PLACEMENT },
	{ "store", required_argument, NULL, OPT_STORE },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

/* --name ALIAS=PATH, or ALIAS:PATH for fstab (name=ALIAS:PATH). */
static int mount_name_option(struct mount_args *a, char *arg)
{
	char *eq = strpbrk(arg, "=:");

	if (!eq || eq == arg || !eq[1]) {
		fprintf(stderr, "llmfs: --name wants ALIAS=PATH\n");
		return -EINVAL;
	}
	*eq = '\0';
	return mount_add_src(a, arg, eq + 1);
}

/* --threads, --ctx, --idle-timeout. */
static int mount_count_option(struct mount_args *a, int c, const char *arg)
{
	unsigned long u;

	if (mount_uint(arg, 1u << 20, &u)) {
		fprintf(stderr, "llmfs: bad number '%s'\n", arg);
		return -EINVAL;
	}
	if (c == OPT_THREADS)
		a->opt.threads = u;
	else if (c == OPT_CTX)
		a->opt.n_ctx = u;
	else
		a->opt.idle_timeout = u ? u : 1;
	return 0;
}

static int mount_numa_option(struct mount_args *a, const char *arg)
{
	struct err err = { 0 };

	if (io_numa_policy_parse(arg, &a->opt.numa, &a->opt.numa_node, &err)) {
		fprintf(stderr, "llmfs: --numa: %s\n", err.msg);
		return -EINVAL;
	}
	return 0;
}

/*
 * One option getopt returned (c, its argument arg): 0, 1 when it printed
 * what was asked (--help, --version), or -EINVAL after a line. --devices
 * is kept in *devices for the end (mount_devices).
 */
static int mount_option(struct mount_args *a, int c, char *arg,
			const char **devices)
{
	switch (c) {
	case 'f': a->opt.foreground = true; return 0;
	case 'd': a->opt.foreground = a->opt.debug = true; return 0;
	case 'o': return mount_opts(a, mount_long_opts, arg);
	case OPT_NAME: return mount_name_option(a, arg);
	case OPT_THREADS:
	case OPT_CTX:
	case OPT_IDLE: return mount_count_option(a, c, arg);
	case OPT_REMOTE: return mount_add_remote(a, arg);
	case OPT_STORE: return mount_store_option(a, arg);
	case OPT_MAX_SESSIONS:
	case OPT_MAX_GENERATIONS:
	case OPT_MAX_PROMPT_BYTES:
	case OPT_STREAM_BUFFER:
	case OPT_PREFILL_CHUNK:
		return mount_limit(&a->opt, c - OPT_MAX_SESSIONS, arg);
	case OPT_SHARED_CONFIG: a->opt.shared_config = true; return 0;
	case OPT_BATCH_EXACT: a->opt.batch_exact = true; return 0;
	case OPT_PLACEMENT: a->opt.placement = arg; return 0;
	case OPT_NUMA: return mount_numa_option(a, arg);
	case OPT_KV_TYPE_K:
	case OPT_KV_TYPE_V:
		return fs_kv_type_option(arg, c == OPT_KV_TYPE_K ?
						      &a->opt.kv_type_k :
						      &a->opt.kv_type_v);
	case OPT_KV_MEM: return fs_kv_bytes_option(arg, &a->opt.kv_mem);
	case OPT_MEM_BUDGET: return fs_kv_bytes_option(arg, &a->opt.mem_budget);
	case OPT_DEVICES: *devices = arg; return 0;
	case 'h': mount_usage(stdout); return 1;
	case 'V': printf("llmfs %s\n", LLMFS_VERSION); return 1;
	default: mount_usage(stderr); return -EINVAL;
	}
}

/* The machine's devices, with --devices (NULL: LLMFS_DEVICES). */
static int mount_devices(struct mount_args *a, const char *devices)
{
	const struct io_device *capped;
	struct err err = { 0 };
	bool auto_gpus;
	char name[16];
	int found;

	/* --devices auto, or nothing said: the GPUs the CUDA module finds */
	/*
	 * Nothing said: the GPUs the module finds, if an NVIDIA driver is
	 * there (or a module is named); without one the CUDA runtime is not
	 * even loaded (a failed dlopen inside it leaks 40 bytes: valgrind in
	 * tests/fs/lifecycle.sh).
	 */
	auto_gpus = devices ? !strcmp(devices, "auto") :
			      !getenv("LLMFS_DEVICES") &&
				      (!access("/dev/nvidiactl", F_OK) ||
				       getenv("LLMFS_CUDA_MODULE"));
	if (io_device_set_read(&a->opt.devices,
			       devices && auto_gpus ? "" : devices, &err)) {
		fprintf(stderr, "llmfs: %s\n", err.msg);
		return -EINVAL;
	}
	/* a cap (gpu0:vram=8G) is on a card the probe must find */
	capped = io_device_set_unprobed(&a->opt.devices);
	if (capped) {
		snprintf(name, sizeof(name), "%s", capped->name);
		if (engine_gpu_probe(&a->opt.devices, &err) < 0) {
			fprintf(stderr,
				"llmfs: --devices: %s:vram= without bw= and pcie= caps a real GPU: %s\n",
				name, err.msg);
			return -ENODEV;
		}
		return 0;
	}
	/* none found is normal (no GPU, no CUDA): asked for, it is said */
	if (!auto_gpus)
		return 0;
	found = engine_gpu_probe(&a->opt.devices, &err);
	if (found < 0 && devices)
		fprintf(stderr, "llmfs: --devices auto: %s\n", err.msg);
	/* asked for by name: the models go where the planner says */
	a->opt.place_auto = devices && found > 0;
	return 0;
}

/* SOURCE... MOUNTPOINT: argv[first..argc). */
static int mount_operands(struct mount_args *a, int first, int argc,
			  char **argv)
{
	int rc = 0;

	if (first >= argc || (first == argc - 1 && !a->n_src)) {
		mount_usage(stderr);
		return -EINVAL;
	}
	/* Absolute: the shutdown thread unmounts it after chdir("/"). */
	a->mountpoint = realpath(argv[argc - 1], NULL);
	if (!a->mountpoint) {
		fprintf(stderr, "llmfs: %s: %s\n", argv[argc - 1],
			strerror(errno));
		return -errno;
	}
	for (int i = first; i < argc - 1 && !rc; i++) {
		rc = mount_fsname_add(&a->fsname, argv[i]);
		if (!rc)
			rc = mount_add_source(a, argv[i]);
	}
	return rc;
}

int mount_args_parse(struct mount_args *a, int argc, char **argv)
{
	const char *devices = NULL; /* NULL: LLMFS_DEVICES */
	int c, rc;

	a->opt.idle_timeout = 600;
	while ((c = mount_getopt(a, argc, argv, "fdhVo:", mount_long_opts)) !=
	       -1)
		if ((rc = mount_option(a, c, optarg, &devices)))
			return rc;
	rc = mount_devices(a, devices);
	if (rc)
		return rc;
	/* -d writes every request on stderr: no bar between them. */
	a->opt.progress = a->opt.foreground && !a->opt.debug &&
			  isatty(STDERR_FILENO);
	return mount_operands(a, optind, argc, argv);
}

void mount_args_free(struct mount_args *a)
{
	for (size_t i = 0; i < a->n_src; i++) {
		free(a->src[i].name);
		free(a->src[i].path);
		free(a->src[i].remote);
	}
	free(a->src);
	free(a->mountpoint);
	free(a->queued);
	fs_buf_free(&a->fuse_opts);
	fs_buf_free(&a->fsname);
}
