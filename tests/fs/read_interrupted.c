/*
 * read_interrupted FILE PROMPT [FLAG N]: write PROMPT to FILE on one
 * read-write descriptor, then read the answer to EOF while an interval
 * timer keeps interrupting the blocked reads. With FLAG and N, FLAG is
 * created once N reads were interrupted (the test holds the model loading
 * until then, so that the reads are surely blocked). The SIGALRM handler installed without
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
#include <stdlib.h>
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
	if (argc != 3 && argc != 5) {
		fprintf(stderr,
			"usage: read_interrupted FILE PROMPT [FLAG N]\n");
		return 2;
	}
	const char *flag = argc == 5 ? argv[3] : NULL;
	long flag_after = argc == 5 ? atol(argv[4]) : 0;
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
			if (flag && interrupted == flag_after)
				close(open(flag, O_WRONLY | O_CREAT, 0644));
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
