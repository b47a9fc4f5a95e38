/* SPDX-License-Identifier: MIT */
#include "replica/mctl.h"

#include "common/log.h"
#include "common/util.h"
#include "replica/prefetch.h"
#include "replica/replica.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define REQ_MAX (64u << 10) /* bytes of one request */
#define PATHS_MAX 4096
#define PROGRESS_EVERY_NS 100000000ull
/*
 * The bounds of a client's socket (docs/cache.md, Prefetch; README).  No
 * call on it blocks: each waits in poll(2) for its own deadline and for
 * the wake pipe, which sfs_mctl_stop fills.
 *   REQ_TIMEOUT_MS  the whole request must arrive within this; a client
 *                   that sends less is told so and closed
 *   SEND_TIMEOUT_MS a client that leaves what it was sent unread this
 *                   long (SIOCOUTQ: its socket's unread bytes, not 0
 *                   and not shrinking), or that does not take one line
 *                   within this (its socket full), is dropped: one log
 *                   line names it, its socket is shut down and its
 *                   prefetch stops, as when it goes away.  A stopped
 *                   client goes this long after it stopped, plus a
 *                   line's interval, however many lines its socket
 *                   could hold (about 280 here: 28 s of progress)
 *   STOP_SEND_MS    once the mount is being unmounted, a line waits at
 *                   most this long more, then drops its client the same
 *                   way: a stopped client holds an unmount up for 1 s
 */
#define REQ_TIMEOUT_MS 5000
#define SEND_TIMEOUT_MS 5000
#define STOP_SEND_MS 1000

struct sfs_mctl {
	struct sfs_replica *r;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lfd;
	/* A byte here (written once, never read) stops the accept loop
	 * and ends every client's wait in poll(2); closed in
	 * sfs_mctl_stop once no job runs. */
	int wake[2];
	pthread_t acceptor;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a job ended */
	int stopping;	     /* protected by lock */
	size_t active;	     /* jobs running; protected by lock */
	/* The mount's device, once mounted (sfs_mctl_set_mount); protected
	 * by lock. */
	int mounted;
	unsigned int major, minor;
};

struct job {
	struct sfs_mctl *ctl;
	int fd;	     /* the client; -1 for --prefetch */
	pid_t pid;   /* the client's (SO_PEERCRED), for the log */
	int dropped; /* it took no line in time (say): no more lines;
		      * the job's thread only */
	/* Its socket's unread bytes after the last line, and when it was
	 * last seen to read (unread_too_long); the job's thread only. */
	int outq;
	uint64_t taken_ms;
	int identify; /* the request is "identify" */
	char *paths[PATHS_MAX];
	size_t npaths;
	uint64_t last_ns;
	int pct; /* --prefetch: last percentage logged */
};

static int stopping(struct sfs_mctl *c)
{
	pthread_mutex_lock(&c->lock);
	int s = c->stopping;
	pthread_mutex_unlock(&c->lock);
	return s;
}

/*
 * Send @n bytes of @buf to the client's @fd with a bound: the whole
 * within SEND_TIMEOUT_MS, and at most STOP_SEND_MS more from when it
 * sees the mount stopping.  Never blocks in send(2): MSG_DONTWAIT, then
 * poll(2) for room (and for c->wake, which stop fills).  Returns 0;
 * -ETIMEDOUT when the client did not take it in time; -EPIPE (or
 * another -errno) when it is gone.  The job's thread only (one sender
 * per fd).
 */
static int send_bounded(struct sfs_mctl *c, int fd, const char *buf, size_t n)
{
	uint64_t until = sfs_now_ms() + SEND_TIMEOUT_MS;
	int stop_seen = 0;

	for (size_t off = 0; off < n;) {
		ssize_t w = send(fd, buf + off, n - off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w == 0)
			return -EPIPE;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		if (!stop_seen && stopping(c)) {
			stop_seen = 1;
			until = SFS_MIN(until, sfs_now_ms() + STOP_SEND_MS);
		}
		uint64_t now = sfs_now_ms();
		if (now >= until)
			return -ETIMEDOUT;
		/* Once stopping is seen, the wake pipe (never emptied) is
		 * left out: it would end every poll at once. */
		struct pollfd p[2] = {{.fd = fd, .events = POLLOUT},
				      {.fd = c->wake[0], .events = POLLIN}};
		if (poll(p, stop_seen ? 1 : 2, (int)(until - now)) < 0 &&
		    errno != EINTR)
			return -errno;
	}
	return 0;
}

/* Format one line (@fmt ends in a newline) into @buf, escaped
 * (sfs_escape): a note or an error may carry a name or a message from
 * the network, and a newline in it would be a line of the protocol
 * ("done").  Returns its length, newline included, or -1. */
static int vline(char *buf, size_t len, const char *fmt, va_list ap)
{
	char line[512];
	int k = vsnprintf(line, sizeof(line), fmt, ap);
	if (k < 0 || len < 2)
		return -1;
	size_t l = SFS_MIN((size_t)k, sizeof(line) - 1);
	if (l && line[l - 1] == '\n')
		l--;
	sfs_escape(line, l, buf, len - 1);
	int n = (int)strlen(buf);
	buf[n++] = '\n';
	return n;
}

/* One line to a client that has no job (the acceptor's refusal), bounded
 * as every line is (send_bounded); 0 or -errno. */
static int say_fd(struct sfs_mctl *c, int fd, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int say_fd(struct sfs_mctl *c, int fd, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vline(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return n < 0 ? -EINVAL : send_bounded(c, fd, buf, (size_t)n);
}

/*
 * Whether @j's client has left what it was sent unread SEND_TIMEOUT_MS:
 * its socket's unread bytes (SIOCOUTQ) are not 0 and have not shrunk
 * since the last line, ever since it was last seen to read.  Checked
 * before each line.  The job's thread only.
 */
static int unread_too_long(struct job *j)
{
	uint64_t now = sfs_now_ms();
	int q;
	if (ioctl(j->fd, SIOCOUTQ, &q) || q <= 0 || q < j->outq ||
	    !j->taken_ms) {
		j->taken_ms = now;
		return 0;
	}
	return now - j->taken_ms >= SEND_TIMEOUT_MS;
}

/* Drop @j's client: it took no reply for @ms (said once, in the log),
 * its socket shut down both ways (it reads what was queued, then the
 * end), no more lines.  The job's thread only. */
static void drop(struct job *j, int ms, int stop)
{
	SFS_LOG(SFS_WARN, "mctl",
		"prefetch client pid %d: took no reply for %d ms%s (it does "
		"not read): dropped",
		(int)j->pid, ms, stop ? " of the unmount" : "");
	shutdown(j->fd, SHUT_RDWR);
	j->dropped = 1;
}

/*
 * One line to @j's client (@fmt ends in a newline); 0, or -1 when it is
 * gone or dropped.  A client that does not take the line within the
 * bound (send_bounded) is dropped: one log line names it, its socket is
 * shut down both ways (it reads what was queued, then the end), and
 * every later line is skipped.  The job's thread only.
 */
static int say(struct job *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int say(struct job *j, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	if (j->dropped)
		return -1;
	va_start(ap, fmt);
	int n = vline(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	if (unread_too_long(j)) {
		drop(j, SEND_TIMEOUT_MS, 0);
		return -1;
	}
	int rc = send_bounded(j->ctl, j->fd, buf, (size_t)n);
	if (rc == -ETIMEDOUT) {
		int stop = stopping(j->ctl);
		drop(j, stop ? STOP_SEND_MS : SEND_TIMEOUT_MS, stop);
	}
	if (!rc && ioctl(j->fd, SIOCOUTQ, &j->outq))
		j->outq = 0;
	return rc ? -1 : 0;
}

static int client_progress(void *arg, uint64_t done, uint64_t total)
{
	struct job *j = arg;
	uint64_t now = sfs_now_ns();
	if (stopping(j->ctl))
		return 1;
	if (done && done < total && now - j->last_ns < PROGRESS_EVERY_NS)
		return 0;
	j->last_ns = now;
	return say(j, "progress %" PRIu64 " %" PRIu64 "\n", done, total) ? 1
									 : 0;
}

static void client_note(void *arg, const char *line)
{
	struct job *j = arg;
	say(j, "note %s\n", line);
}

static int log_progress(void *arg, uint64_t done, uint64_t total)
{
	struct job *j = arg;
	int pct = total ? (int)(done * 100 / total) : 100;
	if (stopping(j->ctl))
		return 1;
	if (pct / 10 > j->pct / 10) {
		char b1[32], b2[32];
		SFS_LOG(SFS_INFO, "prefetch", "%d%%: %s of %s", pct,
			sfs_fmt_bytes(done, b1, sizeof(b1)),
			sfs_fmt_bytes(total, b2, sizeof(b2)));
	}
	j->pct = pct;
	return 0;
}

static void log_note(void *arg, const char *line)
{
	(void)arg;
	SFS_LOG(SFS_WARN, "prefetch", "%s", line);
}

/* Read "path REL" lines up to "prefetch", all of it within
 * REQ_TIMEOUT_MS (a client that sends nothing, or a byte now and then,
 * does not hold a thread), and no longer once the mount stops; 0, or -1
 * with the reason told to the client.  The job's thread only. */
static int read_request(struct job *j)
{
	char *buf = malloc(REQ_MAX + 1), *line, *save = NULL;
	uint64_t until = sfs_now_ms() + REQ_TIMEOUT_MS;
	size_t len = 0;
	int rc = -1, stop = 0;

	if (!buf)
		return -1;
	buf[0] = '\0';
	while (len < REQ_MAX && !strstr(buf, "prefetch\n") &&
	       strcmp(buf, "identify\n")) {
		uint64_t now = sfs_now_ms();
		if (now >= until)
			break;
		struct pollfd p[2] = {
			{.fd = j->fd, .events = POLLIN},
			{.fd = j->ctl->wake[0], .events = POLLIN}};
		if (poll(p, 2, (int)(until - now)) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents) {
			stop = 1;
			break;
		}
		if (!p[0].revents)
			continue;
		ssize_t n = recv(j->fd, buf + len, REQ_MAX - len, MSG_DONTWAIT);
		if (n < 0 &&
		    (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
	}
	if (stop) {
		say(j, "error stopped: the mount is being unmounted\n");
		goto out;
	}
	if (!strcmp(buf, "identify\n")) {
		j->identify = 1;
		rc = 0;
		goto out;
	}
	if (!strstr(buf, "prefetch\n")) {
		say(j,
		    "error incomplete request (at most %u bytes within %d s, "
		    "ending with \"prefetch\", or \"identify\" alone)\n",
		    REQ_MAX, REQ_TIMEOUT_MS / 1000);
		goto out;
	}
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!strcmp(line, "prefetch")) {
			rc = 0;
			break;
		}
		if (strncmp(line, "path ", 5) || j->npaths == PATHS_MAX) {
			say(j, "error bad request line: %.80s\n", line);
			goto out;
		}
		if (!(j->paths[j->npaths] = strdup(line + 5)))
			goto out;
		j->npaths++;
	}
	if (!rc && !j->npaths && !(j->paths[j->npaths++] = strdup("")))
		rc = -1;
out:
	free(buf);
	return rc;
}

static void job_free(struct job *j)
{
	if (j->fd >= 0)
		close(j->fd);
	for (size_t i = 0; i < j->npaths; i++)
		free(j->paths[i]);
	free(j);
}

static void job_end(struct job *j)
{
	struct sfs_mctl *c = j->ctl;
	job_free(j);
	pthread_mutex_lock(&c->lock);
	c->active--;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/*
 * "identify": the mount's device, then .seedfs/status a line at a time
 * (as it is: its lines are escaped already, and may be longer than
 * say's), then "done 0".  The job's thread only.
 */
static void identify(struct job *j)
{
	struct sfs_mctl *c = j->ctl;
	char *text = NULL;
	size_t n = 0;

	pthread_mutex_lock(&c->lock);
	int mounted = c->mounted;
	unsigned int major = c->major, minor = c->minor;
	pthread_mutex_unlock(&c->lock);
	if (!mounted) {
		say(j, "error not mounted yet\n");
		return;
	}
	if (say(j, "mount %u:%u\n", major, minor))
		return;
	if (sfs_replica_status(c->r, &text, &n)) {
		say(j, "error out of memory\n");
		return;
	}
	for (char *line = text, *end; line < text + n; line = end + 1) {
		if (!(end = memchr(line, '\n', (size_t)(text + n - line))))
			end = text + n;
		if (send_bounded(c, j->fd, "status ", 7) ||
		    send_bounded(c, j->fd, line, (size_t)(end - line)) ||
		    send_bounded(c, j->fd, "\n", 1)) {
			free(text);
			return;
		}
	}
	free(text);
	say(j, "done 0\n");
}

static void *job_thread(void *arg)
{
	struct job *j = arg;
	char err[512];
	int rc;

	if (j->fd >= 0) {
		if (read_request(j))
			goto out;
		if (j->identify) {
			identify(j);
			goto out;
		}
		struct sfs_prefetch_cb cb = {.progress = client_progress,
					     .note = client_note,
					     .arg = j};
		uint64_t t0 = sfs_now_ms();
		rc = sfs_prefetch(j->ctl->r, (const char *const *)j->paths,
				  j->npaths, &cb, err, sizeof(err));
		if (rc == -ECANCELED && stopping(j->ctl))
			snprintf(err, sizeof(err),
				 "stopped: the mount is being unmounted");
		if (rc)
			say(j, "error %s\n", err);
		else
			say(j, "done %" PRIu64 "\n", sfs_now_ms() - t0);
		SFS_LOG(rc ? SFS_WARN : SFS_INFO, "prefetch",
			"request for %zu path(s) (%s%s): %s", j->npaths,
			j->paths[0][0] ? j->paths[0] : "/",
			j->npaths > 1 ? ", ..." : "", rc ? err : "done");
	} else {
		struct sfs_prefetch_cb cb = {
			.progress = log_progress, .note = log_note, .arg = j};
		SFS_LOG(SFS_INFO, "prefetch", "--prefetch: warming every file");
		rc = sfs_prefetch(j->ctl->r, (const char *const *)j->paths,
				  j->npaths, &cb, err, sizeof(err));
		if (rc)
			SFS_LOG(SFS_WARN, "prefetch", "--prefetch: %s", err);
		else
			SFS_LOG(SFS_INFO, "prefetch", "--prefetch: done");
	}
out:
	job_end(j);
	return NULL;
}

/* Start @j on a thread of its own; frees it when that fails. */
static int job_start(struct sfs_mctl *c, struct job *j)
{
	pthread_t t;
	pthread_attr_t a;

	pthread_mutex_lock(&c->lock);
	if (c->stopping) {
		pthread_mutex_unlock(&c->lock);
		job_free(j);
		return -ESHUTDOWN;
	}
	c->active++;
	pthread_mutex_unlock(&c->lock);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	int rc = -pthread_create(&t, &a, job_thread, j);
	pthread_attr_destroy(&a);
	if (rc)
		job_end(j);
	return rc;
}

/* Only our own user and root may ask; the peer's pid into *@pid. */
static int allowed(int fd, pid_t *pid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return 0;
	*pid = cr.pid;
	return cr.uid == 0 || cr.uid == geteuid();
}

static void *acceptor(void *arg)
{
	struct sfs_mctl *c = arg;
	for (;;) {
		struct pollfd p[2] = {{.fd = c->lfd, .events = POLLIN},
				      {.fd = c->wake[0], .events = POLLIN}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		int fd = accept4(c->lfd, NULL, NULL, SOCK_CLOEXEC);
		pid_t pid = 0;
		if (fd < 0)
			continue;
		if (!allowed(fd, &pid)) {
			/* One line into an empty socket: it never waits. */
			say_fd(c, fd,
			       "error not allowed: only uid %u and root\n",
			       (unsigned int)geteuid());
			close(fd);
			continue;
		}
		struct job *j = calloc(1, sizeof(*j));
		if (!j) {
			close(fd);
			continue;
		}
		j->ctl = c;
		j->fd = fd;
		j->pid = pid;
		job_start(c, j);
	}
	return NULL;
}

/*
 * Where the socket goes: a directory only we can enter.  root:
 * /run/seedfs; others: $XDG_RUNTIME_DIR/seedfs, else /tmp/seedfs-UID.
 * Made here (0700); one that exists is used only when it is a directory
 * (not a symlink) of this user that nobody else may enter: anyone can
 * make /tmp/seedfs-UID first (a squat), and whoever can write the
 * directory can replace the socket.  0, or -errno with one line in @why.
 */
static int socket_dir(char *dir, size_t len, char *why, size_t whylen)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");
	uid_t me = geteuid();
	if (me == 0)
		snprintf(dir, len, "/run/seedfs");
	else if (rt && *rt)
		snprintf(dir, len, "%s/seedfs", rt);
	else
		snprintf(dir, len, "/tmp/seedfs-%u", (unsigned int)me);
	struct stat st;
	if ((mkdir(dir, 0700) && errno != EEXIST) || lstat(dir, &st)) {
		int rc = -errno;
		snprintf(why, whylen, "control socket directory %s: %s", dir,
			 strerror(-rc));
		return rc;
	}
	if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
		snprintf(why, whylen,
			 "control socket directory %s is %s, not a directory "
			 "of this user's: not used; remove it",
			 dir,
			 S_ISLNK(st.st_mode) ? "a symbolic link"
					     : "not a directory");
		return -ENOTDIR;
	}
	if (st.st_uid != me) {
		snprintf(why, whylen,
			 "control socket directory %s belongs to uid %u, not "
			 "to this user (uid %u): not used; remove it (or set "
			 "XDG_RUNTIME_DIR)",
			 dir, (unsigned int)st.st_uid, (unsigned int)me);
		return -EPERM;
	}
	if (st.st_mode & 077) {
		snprintf(why, whylen,
			 "control socket directory %s has mode %04o: others "
			 "may enter it; not used; chmod 700 it",
			 dir, (unsigned int)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* Nobody listens on the socket at @path: connect is refused.  (Not
 * kill(pid, 0): it succeeds on a daemon that exited but that init has
 * not reaped yet, and on an unrelated process that got its pid.) */
static int stale(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(a.sun_path))
		return 0;
	memcpy(a.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return 0;
	int refused = connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 &&
		      errno == ECONNREFUSED;
	close(fd);
	return refused;
}

int sfs_mctl_remove_stale(void)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)], path[512];
	char why[512];
	int n = 0;
	if (socket_dir(dir, sizeof(dir), why, sizeof(why)))
		return 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int pid, end = 0;
		if (sscanf(e->d_name, "mount-%d.sock%n", &pid, &end) != 1 ||
		    e->d_name[end] || pid <= 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (!stale(path))
			continue; /* alive (or not ours to judge) */
		if (!unlink(path)) {
			n++;
			SFS_LOG(SFS_INFO, "mctl",
				"removed %s: its mount daemon is gone", path);
		}
	}
	if (d)
		closedir(d);
	return n;
}

int sfs_mctl_start(struct sfs_replica *r, struct sfs_mctl **out, char *err,
		   size_t errlen)
{
	struct sfs_mctl *c;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char dir[sizeof(sa.sun_path)];
	int rc;

	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	c->r = r;
	c->lfd = c->wake[0] = c->wake[1] = -1;
	pthread_mutex_init(&c->lock, NULL);
	if ((rc = sfs_cond_init(&c->cond)))
		goto err_free;
	if ((rc = socket_dir(dir, sizeof(dir), err, errlen)))
		goto err_free;
	if ((size_t)snprintf(c->path, sizeof(c->path), "%s/mount-%d.sock", dir,
			     (int)getpid()) >= sizeof(c->path)) {
		snprintf(err, errlen, "control socket path too long in %s",
			 dir);
		rc = -ENAMETOOLONG;
		goto err_free;
	}
	memcpy(sa.sun_path, c->path, sizeof(sa.sun_path));
	unlink(c->path); /* left by a process of our pid that died */
	c->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->lfd < 0 || bind(c->lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    chmod(c->path, 0600) || listen(c->lfd, 16) ||
	    pipe2(c->wake, O_CLOEXEC)) {
		rc = -errno;
		snprintf(err, errlen, "control socket %s: %s", c->path,
			 strerror(errno));
		goto err_free;
	}
	if ((rc = -pthread_create(&c->acceptor, NULL, acceptor, c))) {
		snprintf(err, errlen, "control socket thread: %s",
			 strerror(-rc));
		goto err_free;
	}
	*out = c;
	return 0;

err_free:
	if (c->lfd >= 0) {
		close(c->lfd);
		unlink(c->path);
	}
	if (c->wake[0] >= 0) {
		close(c->wake[0]);
		close(c->wake[1]);
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
	return rc;
}

void sfs_mctl_set_mount(struct sfs_mctl *c, unsigned int major,
			unsigned int minor)
{
	pthread_mutex_lock(&c->lock);
	c->major = major;
	c->minor = minor;
	c->mounted = 1;
	pthread_mutex_unlock(&c->lock);
}

const char *sfs_mctl_path(const struct sfs_mctl *c)
{
	return c->path;
}

int sfs_mctl_prefetch_all(struct sfs_mctl *c)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->ctl = c;
	j->fd = -1;
	j->pct = -1;
	if (!(j->paths[0] = strdup(""))) {
		free(j);
		return -ENOMEM;
	}
	j->npaths = 1;
	return job_start(c, j);
}

void sfs_mctl_stop(struct sfs_mctl *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stopping = 1;
	pthread_mutex_unlock(&c->lock);
	if (write(c->wake[1], "x", 1) != 1)
		SFS_LOG(SFS_WARN, "mctl", "cannot wake the control thread");
	pthread_join(c->acceptor, NULL);
	close(c->lfd);
	unlink(c->path);
	/* Each job sees stopping after its current chunk (a wait bounded by
	 * the cache's timeout) and ends; a line to its client waits at
	 * most STOP_SEND_MS more (send_bounded), a request being read not
	 * at all (read_request): a client that stops reading holds this up
	 * for STOP_SEND_MS, and no job outlives c (they all end here). */
	pthread_mutex_lock(&c->lock);
	uint64_t t0 = sfs_now_ms();
	int told = 0;
	while (c->active) {
		struct timespec ts = sfs_abstime(1000);
		pthread_cond_timedwait(&c->cond, &c->lock, &ts);
		if (c->active && !told && sfs_now_ms() - t0 > 15000) {
			SFS_LOG(SFS_WARN, "mctl",
				"waiting for %zu prefetch(es) to stop",
				c->active);
			told = 1;
		}
	}
	pthread_mutex_unlock(&c->lock);
	close(c->wake[0]);
	close(c->wake[1]);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}
