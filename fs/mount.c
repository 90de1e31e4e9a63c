// SPDX-License-Identifier: MIT
/*
 * fs_main(): the `llmfs` command, the daemon. Takes the parsed command
 * line (mount_args.c, mount.h), makes one directory per model, mounts, starts the model threads (after daemonizing: fork keeps
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
 * Under systemd (Type=notify) it reports READY=1 once mounted and
 * STOPPING=1 when it begins to stop.
 */
#include <errno.h>
#include <fcntl.h>
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

#include "mount.h"
#include "store.h"

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
	rc = mount_args_parse(&a, argc, argv);
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
