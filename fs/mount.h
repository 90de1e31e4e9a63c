/* SPDX-License-Identifier: MIT */
/*
 * The `llmfs` command line, parsed (mount_args.c) for the daemon
 * (mount.c): the models to make, the mount point, the options for the
 * kernel and libfuse, and fs_options for the rest of fs/.
 */
#ifndef LLMFS_FS_MOUNT_H
#define LLMFS_FS_MOUNT_H

#include "internal.h"

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

/*
 * Parse argv into a (zeroed by the caller): 0, 1 when it only printed
 * (--help, --version), or a negative errno after a line on stderr (a
 * usage error). Free a with mount_args_free() whatever it returned.
 */
int mount_args_parse(struct mount_args *a, int argc, char **argv);
void mount_args_free(struct mount_args *a);

#endif
