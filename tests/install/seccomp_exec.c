/* SPDX-License-Identifier: MIT */
/*
 * seccomp_exec ERRNO COMMAND [ARG...]: run COMMAND with io_uring_setup,
 * io_uring_enter and io_uring_register failing with ERRNO, as container
 * engines' default seccomp profiles make them fail: Docker's with EPERM
 * (1), Podman's with ENOSYS (38, its default errno). Everything else is
 * allowed. The filter is inherited across fork and exec, so a daemon that
 * detaches stays under it.
 *
 *   $ seccomp_exec 1 llmfs -f models/ /mnt/llm
 *
 * Exit 126 when the filter cannot be installed, 127 when COMMAND cannot be
 * run; else COMMAND's status.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int deny_uring(unsigned err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_enter, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_register, 1,
			 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K,
			 SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA)),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]),
				   .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		return -errno;
	return 0;
}

int main(int argc, char **argv)
{
	char *end;
	long err;

	if (argc < 3) {
		fprintf(stderr, "usage: seccomp_exec ERRNO COMMAND [ARG...]\n");
		return 126;
	}
	err = strtol(argv[1], &end, 10);
	if (*end || err < 1 || err > 4095) {
		fprintf(stderr, "seccomp_exec: bad errno '%s'\n", argv[1]);
		return 126;
	}
	if (deny_uring((unsigned)err) < 0) {
		fprintf(stderr, "seccomp_exec: %s\n", strerror(errno));
		return 126;
	}
	execvp(argv[2], argv + 2);
	fprintf(stderr, "seccomp_exec: %s: %s\n", argv[2], strerror(errno));
	return 127;
}
