/*
 * read_interrupted FILE PROMPT: write PROMPT to FILE on one read-write
 * descriptor, then read the answer to EOF while an interval timer keeps
 * interrupting the blocked reads. The SIGALRM handler installed without
 * SA_RESTART only counts, so an interrupted read() returns -1 with EINTR
 * and a completed one keeps its bytes: whatever the daemon sent arrives
 * once. (A Python client cannot promise that: a handler that raises throws
 * away the result of an os.read that had already completed.)
 *
 * Prints the answer on stdout, and on stderr "interrupted N" with the
 * number of reads that failed with EINTR. Exit 0 on EOF, 1 on any other
 * error.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t alarms;

static void count_alarm(int signo)
{
	(void)signo;
	alarms++;
}

static int write_all(int fd, const char *data, size_t size)
{
	while (size > 0) {
		ssize_t n = write(fd, data, size);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		data += n;
		size -= (size_t)n;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: read_interrupted FILE PROMPT\n");
		return 2;
	}
	int fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		fprintf(stderr, "open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (write_all(fd, argv[2], strlen(argv[2])) < 0) {
		fprintf(stderr, "write: %s\n", strerror(errno));
		return 1;
	}

	struct sigaction action;
	memset(&action, 0, sizeof(action));
	action.sa_handler = count_alarm;
	sigemptyset(&action.sa_mask);
	action.sa_flags = 0; /* no SA_RESTART: reads must see EINTR */
	sigaction(SIGALRM, &action, NULL);
	/* A first ring soon after the write, while the answer is still being
	 * computed, then every 3 ms until EOF. */
	struct itimerval timer = { { 0, 3000 }, { 0, 1000 } };
	setitimer(ITIMER_REAL, &timer, NULL);

	char buffer[65536];
	long interrupted = 0;
	int status = 0;
	for (;;) {
		ssize_t n = read(fd, buffer, sizeof(buffer));
		if (n < 0 && errno == EINTR) {
			interrupted++;
			continue;
		}
		if (n < 0) {
			fprintf(stderr, "read: %s\n", strerror(errno));
			status = 1;
			break;
		}
		if (n == 0)
			break;
		if (write_all(STDOUT_FILENO, buffer, (size_t)n) < 0) {
			status = 1;
			break;
		}
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	close(fd);
	fprintf(stderr, "interrupted %ld\n", interrupted);
	return status;
}
