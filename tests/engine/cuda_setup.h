/* SPDX-License-Identifier: MIT */
/*
 * The setup of the Check programs that drive the CUDA module (test_cuda,
 * test_cuda_model): the module loaded, then device 0 opened once in a
 * child process, so that a machine without a device skips them.
 */
#ifndef LLMFS_TESTS_CUDA_SETUP_H
#define LLMFS_TESTS_CUDA_SETUP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../engine/cuda/loader.h"
#include "../common/check_main.h"

/*
 * Whether device 0 of api opens, asked in a child process: a process
 * that touched CUDA cannot fork children that use it, and Check forks
 * every test, so the parent only loads the module. 0 it opens; 1 it
 * does not, why says why; -1 the check itself failed.
 */
static inline int cuda_setup_device_opens(const struct cuda_api *api, char *why,
					  size_t cap)
{
	int fd[2], status = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(fd))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct err err = { 0 };
		struct cuda_dev *d = NULL;
		int rc = api->open(&d, 0, &err);

		if (rc == 0)
			api->close(d);
		else if (write(fd[1], err.msg, strlen(err.msg)) < 0)
			_exit(2);
		_exit(rc == 0 ? 0 : 1);
	}
	close(fd[1]);
	n = read(fd[0], why, cap - 1);
	why[n > 0 ? n : 0] = '\0';
	close(fd[0]);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/*
 * *api: the module of $LLMFS_CUDA_MODULE, else $BUILD's simulator (set
 * into LLMFS_CUDA_MODULE for the tests' children), with a device 0 that
 * opens. Returns 0; CHECK_SKIP after printing why (no module, no
 * device); 1 after printing why (the check failed), for a setup hook.
 */
static inline int cuda_setup_module(const struct cuda_api **api)
{
	struct err err = { 0 };
	char path[4096], why[512];
	int rc;

	if (!getenv("LLMFS_CUDA_MODULE")) {
		snprintf(path, sizeof(path), "%s/lib/llmfs-cuda-sim.so",
			 getenv("BUILD") ? getenv("BUILD") : "build");
		setenv("LLMFS_CUDA_MODULE", path, 1);
	}
	*api = engine_cuda_api(&err);
	if (!*api) {
		printf("skip: %s\n", err.msg);
		return CHECK_SKIP;
	}
	rc = cuda_setup_device_opens(*api, why, sizeof(why));
	if (rc == 1) {
		printf("skip: %s (module %s)\n", why, (*api)->how);
		return CHECK_SKIP;
	}
	if (rc) {
		printf("the device check failed (%d): %s\n", rc, why);
		return 1;
	}
	return 0;
}

#endif
