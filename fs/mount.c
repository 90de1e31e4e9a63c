// SPDX-License-Identifier: MIT
/*
 * fs_main(): the `llmfs` command. Parses argv, makes one directory per
 * model, mounts, starts the model threads (after daemonizing: fork keeps
 * no threads), serves until `fusermount3 -u` or SIGINT/SIGTERM, then stops
 * every generation, answers every parked read with EOF, unmounts and frees
 * everything (the tests run this under ASan and valgrind).
 *
 * A signal does not stop the FUSE loop at once (as fuse_set_signal_handlers
 * would): requests that arrive after the loop stopped would fail with
 * ECONNABORTED. The shutdown thread instead ends the generations, detaches
 * the mount (umount -l), and lets the loop serve EOF to the readers still
 * there until the kernel drops the connection, at most a few seconds.
 *
 * The command line takes the form mount.fuse3 gives an fstab line,
 * `llmfs SOURCE MOUNTPOINT -o opt,opt`, as well as options anywhere; every
 * long option is also an -o item (mount_opts). Under systemd (Type=notify)
 * it reports READY=1 once mounted and STOPPING=1 when it begins to stop.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "store.h"

#ifndef LLMFS_VERSION
#define LLMFS_VERSION "unknown"
#endif

struct mount_src {
	char *name; /* NULL: a slug of the file name */
	char *path;
	char *remote; /* --remote: "URL[,OPT...]" (path is NULL) */
	int store;    /* a store's kind (path its root), or -1 (store.h) */
};

/* A long option named in an -o list, waiting for the getopt loop. */
struct mount_queued {
	int val;   /* what getopt_long would return */
	char *arg; /* NULL or a pointer into argv */
};

struct mount_args {
	struct fs_options opt;
	struct mount_src *src;
	size_t n_src;
	char *mountpoint;
	struct fs_buf fuse_opts;     /* -o options for the kernel and libfuse */
	struct fs_buf fsname;	     /* the SOURCE arguments, ':'-joined */
	struct mount_queued *queued; /* from the last -o list */
	size_t n_queued, next_queued;
};

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

static int mount_parse(struct mount_args *a, int argc, char **argv)
{
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
		OPT_STORE
	};
	static const struct option lo[] = {
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
		{ "max-generations", required_argument, NULL,
		  OPT_MAX_GENERATIONS },
		{ "max-prompt-bytes", required_argument, NULL,
		  OPT_MAX_PROMPT_BYTES },
		{ "stream-buffer", required_argument, NULL, OPT_STREAM_BUFFER },
		{ "prefill-chunk", required_argument, NULL, OPT_PREFILL_CHUNK },
		{ "shared-config", no_argument, NULL, OPT_SHARED_CONFIG },
		{ "batch-exact", no_argument, NULL, OPT_BATCH_EXACT },
		{ "store", required_argument, NULL, OPT_STORE },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long u;
	struct err err = { 0 };
	const char *devices = NULL; /* NULL: LLMFS_DEVICES */
	bool auto_gpus;
	char *eq;
	int c, rc = 0;

	a->opt.idle_timeout = 600;
	while ((c = mount_getopt(a, argc, argv, "fdhVo:", lo)) != -1) {
		switch (c) {
		case 'f': a->opt.foreground = true; break;
		case 'd': a->opt.foreground = a->opt.debug = true; break;
		case 'o': rc = mount_opts(a, lo, optarg); break;
		case OPT_NAME:
			/* ALIAS:PATH too, for fstab (name=ALIAS:PATH) */
			eq = strpbrk(optarg, "=:");
			if (!eq || eq == optarg || !eq[1]) {
				fprintf(stderr,
					"llmfs: --name wants ALIAS=PATH\n");
				return -EINVAL;
			}
			*eq = '\0';
			rc = mount_add_src(a, optarg, eq + 1);
			break;
		case OPT_THREADS:
		case OPT_CTX:
		case OPT_IDLE:
			if (mount_uint(optarg, 1u << 20, &u)) {
				fprintf(stderr, "llmfs: bad number '%s'\n",
					optarg);
				return -EINVAL;
			}
			if (c == OPT_THREADS)
				a->opt.threads = u;
			else if (c == OPT_CTX)
				a->opt.n_ctx = u;
			else
				a->opt.idle_timeout = u ? u : 1;
			break;
		case OPT_REMOTE: rc = mount_add_remote(a, optarg); break;
		case OPT_STORE: rc = mount_store_option(a, optarg); break;
		case OPT_MAX_SESSIONS:
		case OPT_MAX_GENERATIONS:
		case OPT_MAX_PROMPT_BYTES:
		case OPT_STREAM_BUFFER:
		case OPT_PREFILL_CHUNK:
			rc = mount_limit(&a->opt, c - OPT_MAX_SESSIONS, optarg);
			break;
		case OPT_SHARED_CONFIG: a->opt.shared_config = true; break;
		case OPT_BATCH_EXACT: a->opt.batch_exact = true; break;
		case OPT_NUMA:
			if (io_numa_policy_parse(optarg, &a->opt.numa,
						 &a->opt.numa_node, &err)) {
				fprintf(stderr, "llmfs: --numa: %s\n", err.msg);
				return -EINVAL;
			}
			break;
		case OPT_KV_TYPE_K:
		case OPT_KV_TYPE_V:
			rc = fs_kv_type_option(
				optarg, c == OPT_KV_TYPE_K ? &a->opt.kv_type_k :
							     &a->opt.kv_type_v);
			break;
		case OPT_KV_MEM:
			rc = fs_kv_bytes_option(optarg, &a->opt.kv_mem);
			break;
		case OPT_MEM_BUDGET:
			rc = fs_kv_bytes_option(optarg, &a->opt.mem_budget);
			break;
		case OPT_DEVICES: devices = optarg; break;
		case 'h': mount_usage(stdout); return 1;
		case 'V': printf("llmfs %s\n", LLMFS_VERSION); return 1;
		default: mount_usage(stderr); return -EINVAL;
		}
		if (rc)
			return rc;
	}
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
	/* none found is normal (no GPU, no CUDA): asked for, it is said */
	if (auto_gpus && engine_gpu_probe(&a->opt.devices, &err) < 0 && devices)
		fprintf(stderr, "llmfs: --devices auto: %s\n", err.msg);
	/* -d writes every request on stderr: no bar between them. */
	a->opt.progress = a->opt.foreground && !a->opt.debug &&
			  isatty(STDERR_FILENO);
	if (optind >= argc || (optind == argc - 1 && !a->n_src)) {
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
	for (int i = optind; i < argc - 1 && !rc; i++) {
		rc = mount_fsname_add(&a->fsname, argv[i]);
		if (!rc)
			rc = mount_add_source(a, argv[i]);
	}
	return rc;
}

static int mount_models(struct fs *fs, struct mount_args *a)
{
	char name[256], slug[224];
	struct err err = { 0 };
	int rc;

	/* every slot at once: stores add models while readers walk them */
	fs->models = calloc(FS_MODELS_MAX, sizeof(*fs->models));
	if (!fs->models)
		return -ENOMEM;
	for (size_t i = 0; i < a->n_src; i++) {
		if (a->src[i].store >= 0) {
			rc = fs_store_open(fs, a->src[i].store, a->src[i].path,
					   &err);
			if (rc) {
				fprintf(stderr, "llmfs: %s\n", err.msg);
				return rc;
			}
			continue;
		}
		if (a->src[i].name) {
			if (!fs_model_name_ok(fs, a->src[i].name)) {
				fprintf(stderr,
					"llmfs: --name %s: reserved, "
					"taken or not a file name\n",
					a->src[i].name);
				return -EINVAL;
			}
			snprintf(name, sizeof(name), "%s", a->src[i].name);
		} else {
			fs_model_slug(a->src[i].path, slug, sizeof(slug));
			snprintf(name, sizeof(name), "%s", slug);
			for (int k = 2; !fs_model_name_ok(fs, name); k++)
				snprintf(name, sizeof(name), "%s-%d", slug, k);
		}
		rc = fs_model_new(fs, &fs->models[fs->n_models], name,
				  a->src[i].path ? a->src[i].path : "", &err);
		if (!rc && a->src[i].remote) {
			fs->models[fs->n_models]->idx = fs->n_models;
			fs->n_models++; /* freed with the others on failure */
			rc = fs_remote_attach(fs->models[fs->n_models - 1],
					      a->src[i].remote, &err);
			if (rc) {
				fprintf(stderr, "llmfs: --remote %s: %s\n",
					name, err.msg);
				return rc;
			}
			continue;
		}
		if (rc) {
			fprintf(stderr, "llmfs: %s\n", err.msg);
			return rc;
		}
		fs->models[fs->n_models]->idx = fs->n_models;
		fs->n_models++;
	}
	return 0;
}

static void *mount_reaper(void *arg)
{
	struct fs *fs = arg;
	double period = fs->opt.idle_timeout / 4;
	struct timespec ts;

	if (period > 5)
		period = 5;
	pthread_mutex_lock(&fs->reap_lock);
	while (!fs->reap_stop) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)period;
		ts.tv_nsec += (long)((period - (time_t)period) * 1e9);
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&fs->reap_cond, &fs->reap_lock, &ts);
		if (fs->reap_stop)
			break;
		pthread_mutex_unlock(&fs->reap_lock);
		for (unsigned i = 0; i < fs->n_models; i++) {
			struct fs_model *fm = fs_model_get(fs, i, false);

			if (!fm)
				continue;
			pthread_mutex_lock(&fm->lock);
			fs_session_reap(fm, fs_wall(), fs->opt.idle_timeout);
			pthread_mutex_unlock(&fm->lock);
			fs_model_put(fm);
		}
		pthread_mutex_lock(&fs->reap_lock);
	}
	pthread_mutex_unlock(&fs->reap_lock);
	return NULL;
}

/* Seconds the readers still open after a signal get before the loop ends. */
#define MOUNT_GRACE_MS 3000

static int mount_sig_fd = -1; /* write end of the shutdown pipe */

static void mount_on_signal(int sig)
{
	char c = 's';

	if (write(mount_sig_fd, &c, 1) < 0) {
		/* nothing to do in a signal handler */
	}
}

static void mount_on_wake(int sig)
{
	/* Only here to interrupt the FUSE loop's sem_wait(). */
}

static void mount_detach(const char *mountpoint)
{
	pid_t pid;

	if (geteuid() == 0) {
		umount2(mountpoint, MNT_DETACH);
		return;
	}
	pid = fork();
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-z", "--",
		       mountpoint, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

static void *mount_shutdown_main(void *arg)
{
	struct fs *fs = arg;
	struct pollfd pfd = { .fd = fs->sig_pipe[0], .events = POLLIN };
	char c = 0;

	while (read(fs->sig_pipe[0], &c, 1) < 0 && errno == EINTR)
		;
	if (c != 's')
		return NULL; /* the loop ended by itself */
	sd_notify(0, "STOPPING=1");
	fs->signalled = true;
	fs_store_stop(fs); /* no model comes or goes from here on */
	for (unsigned i = 0; i < fs->n_models; i++)
		fs_model_stop(fs->models[i]);
	fs_waiters_flush(fs);
	mount_detach(fs->mountpoint);
	if (poll(&pfd, 1, MOUNT_GRACE_MS) == 1)
		return NULL;
	fuse_session_exit(fs->se);
	pthread_kill(fs->main_thread, SIGUSR1);
	return NULL;
}

static int mount_signals(struct fs *fs)
{
	struct sigaction sa = { .sa_handler = mount_on_signal };
	struct sigaction wake = { .sa_handler = mount_on_wake };
	struct sigaction ign = { .sa_handler = SIG_IGN };

	if (pipe2(fs->sig_pipe, O_CLOEXEC))
		return -errno;
	mount_sig_fd = fs->sig_pipe[1];
	sigemptyset(&sa.sa_mask);
	sigemptyset(&wake.sa_mask);
	if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL) ||
	    sigaction(SIGHUP, &sa, NULL) || sigaction(SIGUSR1, &wake, NULL) ||
	    sigaction(SIGPIPE, &ign, NULL))
		return -errno;
	return 0;
}

static void mount_signals_restore(struct fs *fs)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };

	sigaction(SIGINT, &dfl, NULL);
	sigaction(SIGTERM, &dfl, NULL);
	sigaction(SIGHUP, &dfl, NULL);
	if (fs->sig_pipe[0] >= 0) {
		close(fs->sig_pipe[0]);
		close(fs->sig_pipe[1]);
	}
	fs->sig_pipe[0] = fs->sig_pipe[1] = -1;
	mount_sig_fd = -1;
}

static void mount_fs_init(struct fs *fs, const struct fs_options *opt)
{
	memset(fs, 0, sizeof(*fs));
	fs->opt = *opt;
	fs->start = fs_now();
	fs->start_wall = fs_wall();
	fs->uid = getuid();
	fs->gid = getgid();
	pthread_mutex_init(&fs->wait_lock, NULL);
	pthread_mutex_init(&fs->wake_lock, NULL);
	pthread_cond_init(&fs->wake_cond, NULL);
	pthread_mutex_init(&fs->handles_lock, NULL);
	pthread_mutex_init(&fs->reap_lock, NULL);
	pthread_mutex_init(&fs->use_lock, NULL);
	pthread_cond_init(&fs->reap_cond, NULL);
	pthread_mutex_init(&fs->progress_lock, NULL);
	pthread_cond_init(&fs->progress_cond, NULL);
	pthread_mutex_init(&fs->models_lock, NULL);
	pthread_cond_init(&fs->models_cond, NULL);
	pthread_mutex_init(&fs->read_lock, NULL);
	pthread_mutex_init(&fs->release_lock, NULL);
	pthread_cond_init(&fs->release_cond, NULL);
	fs->sig_pipe[0] = fs->sig_pipe[1] = -1;
}

/* Stop everything; every FUSE request still waiting gets its answer. */
static void mount_fs_stop(struct fs *fs)
{
	if (fs->reaper_started) {
		pthread_mutex_lock(&fs->reap_lock);
		fs->reap_stop = true;
		pthread_cond_signal(&fs->reap_cond);
		pthread_mutex_unlock(&fs->reap_lock);
		pthread_join(fs->reaper, NULL);
	}
	fs_store_stop(fs);
	fs_release_stop(fs);
	for (unsigned i = 0; i < fs->n_models; i++)
		fs_model_stop(fs->models[i]);
	fs_progress_stop(fs); /* erases the bar of loads cut short */
	fs_waker_stop(fs);    /* after it delivered the schedulers' ends */
	fs_waiters_flush(fs);
	/* Files still open when the loop ended are never released to us. */
	while (fs->handles)
		fs_file_release(fs, fs->handles);
}

static void mount_fs_free(struct fs *fs)
{
	fs_store_free(fs);
	for (unsigned i = 0; i < fs->n_models; i++)
		fs_model_free(fs->models[i]);
	free(fs->models);
	pthread_cond_destroy(&fs->models_cond);
	pthread_mutex_destroy(&fs->models_lock);
	fs_budget_stop(fs); /* after the pools that charged it */
	fs_release_free_all(fs);
	pthread_cond_destroy(&fs->release_cond);
	pthread_mutex_destroy(&fs->release_lock);
	pthread_mutex_destroy(&fs->read_lock);
	fs_use_free_all(fs);
	pthread_mutex_destroy(&fs->use_lock);
	pthread_cond_destroy(&fs->progress_cond);
	pthread_mutex_destroy(&fs->progress_lock);
	pthread_cond_destroy(&fs->reap_cond);
	pthread_mutex_destroy(&fs->reap_lock);
	pthread_mutex_destroy(&fs->handles_lock);
	pthread_mutex_destroy(&fs->wait_lock);
	pthread_cond_destroy(&fs->wake_cond);
	pthread_mutex_destroy(&fs->wake_lock);
}

static void mount_args_free(struct mount_args *a)
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

static int mount_serve(struct fs *fs, struct mount_args *a, const char *argv0)
{
	struct fs_buf opts = { 0 };
	char *fargv[4];
	struct fuse_args args;
	struct fuse_loop_config *cfg;
	struct err err = { 0 };
	char q = 'q';
	int rc = 1, loop;

	fs->mountpoint = a->mountpoint;
	/* The user's -o come after ours: a later fsname= wins. */
	if (fs_buf_printf(&opts,
			  "fsname=%s,subtype=llmfs,default_permissions%s%s",
			  a->fsname.len ? a->fsname.p : "llmfs",
			  a->fuse_opts.len ? "," : "",
			  a->fuse_opts.len ? a->fuse_opts.p : ""))
		return 1;
	fargv[0] = (char *)argv0;
	fargv[1] = "-o";
	fargv[2] = opts.p;
	fargv[3] = a->opt.debug ? "-d" : NULL;
	args = (struct fuse_args)FUSE_ARGS_INIT(a->opt.debug ? 4 : 3, fargv);
	fs->se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), fs);
	fuse_opt_free_args(&args); /* libfuse copied what it kept */
	fs_buf_free(&opts);
	if (!fs->se)
		return 1;
	if (fs_budget_start(fs, &err)) {
		fprintf(stderr, "llmfs: %s\n", err.msg);
		goto out_signals;
	}
	if (mount_signals(fs))
		goto out_signals;
	if (fuse_session_mount(fs->se, a->mountpoint))
		goto out_signals;
	if (fs_release_start(fs)) {
		fprintf(stderr, "llmfs: cannot read /dev/fuse itself\n");
		goto out_unmount;
	}
	fuse_daemonize(a->opt.foreground);
	fs->main_thread = pthread_self();
	if (pthread_create(&fs->shutdown, NULL, mount_shutdown_main, fs))
		goto out_unmount;
	fs->shutdown_started = true;
	if (fs_waker_start(fs)) {
		fprintf(stderr, "llmfs: cannot start a thread\n");
		goto out_stop;
	}
	if (fs_progress_start(fs))
		fprintf(stderr, "llmfs: no load bar: cannot start a thread\n");
	for (unsigned i = 0; i < fs->n_models; i++) {
		if (fs_model_start(fs->models[i], &err)) {
			fprintf(stderr, "llmfs: %s\n", err.msg);
			goto out_stop;
		}
	}
	if (!pthread_create(&fs->reaper, NULL, mount_reaper, fs))
		fs->reaper_started = true;
	if (fs_store_watch_start(fs))
		fprintf(stderr, "llmfs: stores not watched: cannot start a "
				"thread\n");
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		goto out_stop;
	fuse_loop_cfg_set_max_threads(cfg, 64);
	/* For a Type=notify unit (with -f: systemd listens to this pid). */
	sd_notifyf(0, "READY=1\nSTATUS=mounted at %s", a->mountpoint);
	loop = fuse_session_loop_mt(fs->se, cfg);
	sd_notify(0, "STOPPING=1");
	/* After a signal the detached mount goes away under the loop; the
	 * kernel may then fail the next read of /dev/fuse with ECONNABORTED
	 * instead of ENODEV. Either is the end we asked for. */
	rc = loop == 0 || (fs->signalled && loop == -ECONNABORTED) ? 0 : 1;
	fuse_loop_cfg_destroy(cfg);
out_stop:
	if (write(fs->sig_pipe[1], &q, 1) == 1 && fs->shutdown_started)
		pthread_join(fs->shutdown, NULL);
	mount_fs_stop(fs);
out_unmount:
	fuse_session_unmount(fs->se);
out_signals:
	mount_signals_restore(fs);
	fuse_session_destroy(fs->se);
	return rc;
}

int fs_main(int argc, char **argv)
{
	struct mount_args a = { 0 };
	struct fs fs;
	int rc;

	/* 0, a negative errno after one line on stderr, or 1: --help, -V */
	rc = mount_parse(&a, argc, argv);
	if (rc == 1) {
		mount_args_free(&a);
		return 0;
	}
	mount_fs_init(&fs, &a.opt);
	if (!rc)
		rc = mount_models(&fs, &a);
	if (!rc)
		rc = mount_serve(&fs, &a, argv[0]);
	else
		rc = 1;
	mount_fs_free(&fs);
	mount_args_free(&a);
	return rc;
}
