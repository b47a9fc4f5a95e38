/* SPDX-License-Identifier: MIT */
/*
 * serve.c - a replica served as a FUSE filesystem.  The session loop
 * runs in the caller's thread; a ready thread waits for the kernel's
 * INIT, raises the mount's read-ahead and tells the waiting parent.
 * Reads and opens that may wait for a source are answered by threads of
 * the mount's own (readq.h: the read threads, the open threads).
 */
#include "fs/serve.h"

#include "common/log.h"
#include "common/notify.h"
#include "common/util.h"
#include "fs/fsops.h"
#include "fs/readq.h"
#include "replica/replica.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/*
 * Raise the kernel read-ahead of our mount so buffered reads reach us as
 * 1 MiB requests instead of 128 KiB ones.  The device number comes from
 * mountinfo: stat() on the mount point would wait for our own INIT.
 */
static void set_read_ahead(const char *mnt, unsigned int kb)
{
	char line[4096], path[128], want[PATH_MAX * 4];
	unsigned int major = 0, minor = 0;
	int found = 0;
	FILE *f;

	/* mountinfo escapes space, tab, newline and backslash as \ooo */
	size_t o = 0;
	for (const char *s = mnt; *s && o + 5 < sizeof(want); s++) {
		if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\\')
			o += (size_t)sprintf(want + o, "\\%03o",
					     (unsigned char)*s);
		else
			want[o++] = *s;
	}
	want[o] = '\0';
	if (!(f = fopen("/proc/self/mountinfo", "r")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char mp[PATH_MAX * 4];
		unsigned int ma, mi;
		/* id parent major:minor root mountpoint ... - fstype ... */
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &ma, &mi, mp) ==
			    3 &&
		    strcmp(mp, want) == 0 && strstr(line, " - fuse")) {
			major = ma;
			minor = mi;
			found = 1; /* the last match is the newest mount */
		}
	}
	fclose(f);
	if (!found) {
		SFS_LOG(SFS_WARN, "fs", "read_ahead_kb: %s not in mountinfo",
			mnt);
		return;
	}
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb",
		 major, minor);
	if (!(f = fopen(path, "w"))) {
		SFS_LOG(SFS_WARN, "fs", "read_ahead_kb: %s: %s", path,
			strerror(errno));
		return;
	}
	fprintf(f, "%u\n", kb);
	if (fclose(f))
		SFS_LOG(SFS_WARN, "fs", "read_ahead_kb: writing %s: %s", path,
			strerror(errno));
	else
		SFS_LOG(SFS_DEBUG, "fs", "read_ahead_kb of %s set to %u", mnt,
			kb);
}

static void tell_parent(int *fd, char status)
{
	if (*fd < 0)
		return;
	if (write(*fd, &status, 1) != 1)
		SFS_LOG(SFS_WARN, "mount", "cannot signal the parent");
	close(*fd);
	*fd = -1;
}

static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
}

/*
 * Runs beside the session loop.  stat() on the mount point returns only
 * once the kernel has processed our INIT reply; read_ahead_kb must be
 * raised after that, because INIT lowers it to what it offered us.  Only
 * then is the mount ready and the waiting parent told so.
 */
struct ready_arg {
	struct fuse_session *se;
	const char *mountpoint;
	unsigned int read_ahead_kb;
	int ready_fd;
	struct sfs_replica *r;
};

static void *ready_thread(void *p)
{
	struct ready_arg *a = p;
	struct stat st;

	if (stat(a->mountpoint, &st)) {
		SFS_LOG(SFS_ERR, "mount", "mount point %s is not usable: %s",
			a->mountpoint, strerror(errno));
		tell_parent(&a->ready_fd, 'F');
		fuse_session_exit(a->se);
		return NULL;
	}
	if (a->read_ahead_kb)
		set_read_ahead(a->mountpoint, a->read_ahead_kb);
	/* Which mount this daemon serves: seedfs.safe_open asks (mctl.h). */
	sfs_replica_mounted(a->r, major(st.st_dev), minor(st.st_dev));
	sfs_replica_ready(a->r);
	char models[1024], line[1200];
	snprintf(line, sizeof(line), "mounted %s on %s",
		 sfs_replica_models(a->r, models, sizeof(models)),
		 a->mountpoint);
	sfs_notify_ready(line);
	if (a->ready_fd >= 0) {
		tell_parent(&a->ready_fd, 'R');
		detach_stdio();
	}
	return NULL;
}

/* The stop watch: once the session is told to end (a signal), the
 * waits of requests still on libfuse's workers end at once (reads
 * waiting on a source, opens asking one for its generation), not as
 * each times out: the loop joins those workers before it returns. */
#define STOP_WATCH_MS 100

struct stop_watch {
	struct fuse_session *se;
	struct sfs_fs *fs;
	int fd; /* readable: the loop has ended, stop watching */
};

static void *stop_watch(void *p)
{
	struct stop_watch *w = p;
	struct pollfd pf = {.fd = w->fd, .events = POLLIN};

	for (;;) {
		int n = poll(&pf, 1, STOP_WATCH_MS);
		if (n > 0 || (n < 0 && errno != EINTR))
			return NULL;
		if (fuse_session_exited(w->se)) {
			atomic_store(&w->fs->stopping, 1);
			sfs_replica_end_waits(w->fs->r);
			return NULL;
		}
	}
}

/* The sweeper's way to drop the page cache of a generation that is no
 * longer served (not from a request: no deadlock with the kernel). */
static void drop_page_cache(void *arg, uint64_t ino)
{
	int rc = fuse_lowlevel_notify_inval_inode(arg, ino, 0, 0);
	if (rc && rc != -ENOENT)
		SFS_LOG(SFS_WARN, "mount", "invalidating inode %llu: %s",
			(unsigned long long)ino, strerror(-rc));
}

int sfs_fs_serve(struct sfs_replica *r, struct fuse_args *args,
		 struct fuse_cmdline_opts *cmd, const struct sfs_serve_cfg *c)
{
	struct fuse_session *se;
	struct sfs_fs fs;
	int ready_fd = c->ready_fd;
	int rc = 1;

	memset(&fs, 0, sizeof(fs));
	pthread_mutex_init(&fs.handles_lock, NULL);
	fs.r = r;
	fs.tree = sfs_replica_tree(r);
	fs.lock = sfs_replica_lock(r);
	/* Names follow the seed's generations within a second; an inode's
	 * attributes never change. */
	fs.entry_timeout = 1.0;
	fs.negative_timeout = 0.2;
	fs.attr_timeout = 86400.0;
	fs.max_background = c->max_background;
	fs.direct_io = c->direct_io;
	fs.uid = getuid();
	fs.gid = getgid();
	fs.total_bytes = sfs_replica_total_bytes(r);
	clock_gettime(CLOCK_REALTIME, &fs.mtime);

	se = fuse_session_new(args, &sfs_fs_ops, sizeof(sfs_fs_ops), &fs);
	if (se)
		sfs_replica_set_inval(r, drop_page_cache, se);
	if (!se) {
		fprintf(stderr, "seedfs mount: cannot create the FUSE "
				"session (see the line above)\n");
		goto out;
	}
	/* libinfinipath (loaded with Debian's libfabric for psm) installs
	 * SIGINT/SIGTERM/SIGHUP handlers when it loads; libfuse installs
	 * its own only over SIG_DFL.  Take them back so a signal unmounts. */
	signal(SIGHUP, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	/* A seed that dies under the transport's socket must not take the
	 * mount with it (libfabric tcp writes without MSG_NOSIGNAL). */
	signal(SIGPIPE, SIG_IGN);
	if (fuse_set_signal_handlers(se)) {
		fprintf(stderr, "seedfs mount: cannot set signal handlers\n");
		goto out_destroy;
	}
	if (fuse_session_mount(se, cmd->mountpoint)) {
		fprintf(stderr, "seedfs mount: cannot mount on %s\n",
			cmd->mountpoint);
		goto out_signals;
	}
	char models[1024];
	SFS_LOG(SFS_INFO, "mount", "mounted %s on %s%s",
		sfs_replica_models(r, models, sizeof(models)), cmd->mountpoint,
		sfs_replica_hidden(r, NULL, 0)
			? " (hidden by --require: see .seedfs/status)"
			: "");
	/* `seedfs prefetch` finds this socket in .seedfs/status. */
	sfs_replica_serve_control(r, c->prefetch);
	if (ready_fd >= 0) {
		if (!c->log_file)
			sfs_log_to_syslog("seedfs");
		if (chdir("/"))
			SFS_LOG(SFS_WARN, "mount", "chdir /: %s",
				strerror(errno));
	}
	/* Read threads: as many as libfuse's workers may be, and no fewer
	 * than SFS_FS_READ_THREADS. */
	unsigned int nreaders = SFS_FS_READ_THREADS;
	if (cmd->max_threads && cmd->max_threads != UINT_MAX &&
	    cmd->max_threads > nreaders)
		nreaders = cmd->max_threads;
	if (sfs_readq_new(nreaders, SFS_FS_READ_QUEUE, &fs.readq) ||
	    sfs_readq_new(SFS_FS_OPEN_THREADS, SFS_FS_OPEN_QUEUE, &fs.openq)) {
		SFS_LOG(SFS_ERR, "mount", "cannot make the read queues");
		goto out_unmount;
	}
	struct ready_arg ra = {.se = se,
			       .mountpoint = cmd->mountpoint,
			       .read_ahead_kb = c->read_ahead_kb,
			       .ready_fd = ready_fd,
			       .r = r};
	pthread_t ready_tid;
	int ready_started =
		!pthread_create(&ready_tid, NULL, ready_thread, &ra);
	if (!ready_started) {
		SFS_LOG(SFS_ERR, "mount", "cannot start the ready thread");
		goto out_unmount;
	}
	ready_fd = -1; /* the ready thread owns it now */
	int stop_pipe[2] = {-1, -1};
	pthread_t stop_tid;
	struct stop_watch sw = {.se = se, .fs = &fs};
	int stop_started = !pipe2(stop_pipe, O_CLOEXEC);
	if (stop_started) {
		sw.fd = stop_pipe[0];
		stop_started =
			!pthread_create(&stop_tid, NULL, stop_watch, &sw);
	}
	if (!stop_started)
		SFS_LOG(SFS_WARN, "mount",
			"cannot start the stop watch: a stop waits for the "
			"requests under way (up to --timeout)");

	if (cmd->singlethread) {
		rc = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(lc, cmd->clone_fd);
		/* UINT_MAX: not given on the command line. */
		if (cmd->max_threads && cmd->max_threads != UINT_MAX)
			fuse_loop_cfg_set_max_threads(lc, cmd->max_threads);
		if (cmd->max_idle_threads != UINT_MAX)
			fuse_loop_cfg_set_idle_threads(lc,
						       cmd->max_idle_threads);
		rc = fuse_session_loop_mt(se, lc);
		fuse_loop_cfg_destroy(lc);
	}
	/* libfuse returns the signal number when a signal ended the loop:
	 * that is a clean stop, not an error. */
	if (rc > 0)
		SFS_LOG(SFS_INFO, "mount", "signal %d: unmounting %s", rc,
			cmd->mountpoint);
	else
		SFS_LOG(SFS_INFO, "mount", "unmounting %s", cmd->mountpoint);
	rc = rc < 0 ? 1 : 0;
	atomic_store(&fs.stopping, 1);
	if (stop_started) {
		if (write(stop_pipe[1], "x", 1) != 1)
			SFS_LOG(SFS_WARN, "mount",
				"cannot end the stop watch: %s",
				strerror(errno));
		pthread_join(stop_tid, NULL);
	}
	if (stop_pipe[0] >= 0) {
		close(stop_pipe[0]);
		close(stop_pipe[1]);
	}
	sfs_notify_stopping();
	/* Reads still waiting for a source end now, with EIO (never with
	 * bytes not verified), and so do those queued, and the opens
	 * queued: the read and open threads then end (an open's question
	 * under way ends with sfs_control_abort).  (libfuse's workers have
	 * returned: the loop joined them.) */
	sfs_replica_end_waits(r);
	sfs_readq_free(fs.readq);
	fs.readq = NULL;
	sfs_readq_free(fs.openq);
	fs.openq = NULL;
	/* No page cache invalidation writes to the session's fd once
	 * the unmount closes it (the sweeper sends them). */
	sfs_replica_set_inval(r, NULL, NULL);
	/* Unmounting aborts the connection, which also releases a ready
	 * thread still waiting in stat(); join it before the session goes. */
	fuse_session_unmount(se);
	pthread_join(ready_tid, NULL);
	goto out_signals;
out_unmount:
	sfs_replica_set_inval(r, NULL, NULL);
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	sfs_readq_free(fs.readq); /* (nothing queued before the loop) */
	fs.readq = NULL;
	sfs_readq_free(fs.openq);
	fs.openq = NULL;
	/* No prefetch, no invalidation of a session gone. */
	sfs_replica_stop(r);
	fuse_session_destroy(se);
	sfs_fs_release_all(&fs); /* files still open at the unmount */
out:
	pthread_mutex_destroy(&fs.handles_lock);
	tell_parent(&ready_fd, 'F');
	return rc;
}
