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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define REQ_MAX (64u << 10) /* bytes of one request */
#define PATHS_MAX 4096
#define PROGRESS_EVERY_NS 100000000ull

struct sfs_mctl {
	struct sfs_replica *r;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lfd;
	int wake[2]; /* a byte here stops the accept loop */
	pthread_t acceptor;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a job ended */
	int stopping;	     /* protected by lock */
	size_t active;	     /* jobs running; protected by lock */
};

struct job {
	struct sfs_mctl *ctl;
	int fd; /* the client; -1 for --prefetch */
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

/* One line to the client (@fmt ends in a newline); -1 when it is
 * gone.  The line is escaped (sfs_escape): a note or an error may carry
 * a name or a message from the network, and a newline in it would be a
 * line of the protocol ("done"). */
static int say(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int say(int fd, const char *fmt, ...)
{
	char line[512], buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (k < 0)
		return -1;
	size_t len = SFS_MIN((size_t)k, sizeof(line) - 1);
	if (len && line[len - 1] == '\n')
		len--;
	sfs_escape(line, len, buf, sizeof(buf) - 1);
	int n = (int)strlen(buf);
	buf[n++] = '\n';
	for (int off = 0; off < n;) {
		ssize_t w =
			send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		off += (int)w;
	}
	return 0;
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
	return say(j->fd, "progress %" PRIu64 " %" PRIu64 "\n", done, total)
		       ? 1
		       : 0;
}

static void client_note(void *arg, const char *line)
{
	struct job *j = arg;
	say(j->fd, "note %s\n", line);
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

/* Read "path REL" lines up to "prefetch"; 0, or -1 with the reason
 * told to the client. */
static int read_request(struct job *j)
{
	char *buf = malloc(REQ_MAX + 1), *line, *save = NULL;
	size_t len = 0;
	int rc = -1;

	if (!buf)
		return -1;
	while (len < REQ_MAX) {
		ssize_t n = recv(j->fd, buf + len, REQ_MAX - len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "prefetch\n"))
			break;
	}
	buf[len] = '\0';
	if (!strstr(buf, "prefetch\n")) {
		say(j->fd,
		    "error incomplete request (at most %u bytes, "
		    "ending with \"prefetch\")\n",
		    REQ_MAX);
		goto out;
	}
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!strcmp(line, "prefetch")) {
			rc = 0;
			break;
		}
		if (strncmp(line, "path ", 5) || j->npaths == PATHS_MAX) {
			say(j->fd, "error bad request line: %.80s\n", line);
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

static void *job_thread(void *arg)
{
	struct job *j = arg;
	char err[512];
	int rc;

	if (j->fd >= 0) {
		if (read_request(j))
			goto out;
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
			say(j->fd, "error %s\n", err);
		else
			say(j->fd, "done %" PRIu64 "\n", sfs_now_ms() - t0);
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

/* Only our own user and root may ask. */
static int allowed(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return 0;
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
		if (fd < 0)
			continue;
		if (!allowed(fd)) {
			say(fd, "error not allowed: only uid %u and root\n",
			    (unsigned int)geteuid());
			close(fd);
			continue;
		}
		/* A client that sends nothing does not hold a thread. */
		struct timeval tv = {.tv_sec = 5};
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		struct job *j = calloc(1, sizeof(*j));
		if (!j) {
			close(fd);
			continue;
		}
		j->ctl = c;
		j->fd = fd;
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
	/* Each job sees stopping after its current chunk, and every chunk
	 * is bounded by the cache's timeout. */
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
