/* SPDX-License-Identifier: MIT */
#include "fs/mntcheck.h"

#include "common/log.h"
#include "replica/mctl.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

/* @path as /proc/self/mountinfo writes it: space, tab, newline and
 * backslash as \ooo. */
static void escape(const char *path, char *out, size_t len)
{
	size_t o = 0;
	for (const char *s = path; *s && o + 5 < len; s++) {
		if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\\')
			o += (size_t)snprintf(out + o, len - o, "\\%03o",
					      (unsigned char)*s);
		else
			out[o++] = *s;
	}
	out[o] = '\0';
}

/* The newest mount on @canon: its type and source.  1 found, 0 not. */
static int mounted_on(const char *canon, char *type, size_t tlen, char *src,
		      size_t slen)
{
	char want[PATH_MAX * 4], line[PATH_MAX * 4 + 512], mp[PATH_MAX * 4];
	int found = 0;
	FILE *f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return 0;
	escape(canon, want, sizeof(want));
	while (fgets(line, sizeof(line), f)) {
		/* id parent maj:min root mountpoint opts... - type source */
		if (sscanf(line, "%*u %*u %*s %*s %4095s", mp) != 1 ||
		    strcmp(mp, want))
			continue;
		const char *dash = strstr(line, " - ");
		char t[128] = "", s[512] = "";
		if (dash)
			sscanf(dash + 3, "%127s %511s", t, s);
		snprintf(type, tlen, "%s", t);
		snprintf(src, slen, "%s", s);
		found = 1; /* the last one is on top */
	}
	fclose(f);
	return found;
}

/* Detach the mount on @canon: umount2 as root, else fusermount3. */
static int detach(const char *canon)
{
	if (!umount2(canon, MNT_DETACH))
		return 0;
	if (errno != EPERM)
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		if (fd >= 0)
			dup2(fd, STDERR_FILENO);
		execlp("fusermount3", "fusermount3", "-u", "-z", canon,
		       (char *)NULL);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return -EPERM;
	return 0;
}

/* The canonical path of @mnt, even when it is a dead FUSE mount (which
 * realpath cannot stat): its parent's, plus its name. */
static int canonical(const char *mnt, char *out, size_t len)
{
	if (realpath(mnt, out))
		return 0;
	int e = errno;
	if (e != ENOTCONN)
		return -e;
	char *a = strdup(mnt), *b = strdup(mnt), dir[PATH_MAX];
	int rc = -ENOMEM;
	if (a && b && realpath(dirname(a), dir)) {
		const char *base = basename(b);
		rc = strlen(dir) + strlen(base) + 2 > len ? -ENAMETOOLONG : 0;
		if (!rc) {
			size_t n = strcmp(dir, "/") ? strlen(dir) : 0;
			memcpy(out, dir, n);
			out[n] = '/';
			memcpy(out + n + 1, base, strlen(base) + 1);
		}
	} else if (a && b) {
		rc = -errno;
	}
	free(a);
	free(b);
	return rc;
}

int sfs_mnt_preflight(const char *mnt, int nonempty, char *err, size_t errlen,
		      char *note, size_t notelen)
{
	char canon[PATH_MAX], type[128], src[512];
	struct stat st;
	int rc;

	note[0] = '\0';
	if ((rc = canonical(mnt, canon, sizeof(canon)))) {
		snprintf(err, errlen, "%s: %s", mnt, strerror(-rc));
		return rc;
	}
	if (mounted_on(canon, type, sizeof(type), src, sizeof(src))) {
		/* statfs, not stat: the kernel answers stat from the
		 * attributes it cached (for a second) even once the daemon
		 * is gone, statfs always asks the daemon. */
		struct statfs sf;
		int alive = statfs(canon, &sf) == 0 || errno != ENOTCONN;
		int ours = !strcmp(type, "fuse.seedfs");
		if (alive && ours) {
			snprintf(err, errlen,
				 "%s: a seedfs mount (%s) is already up "
				 "there; unmount it first (fusermount3 -u %s)",
				 mnt, src, mnt);
			return -EBUSY;
		}
		if (!alive && !ours) {
			snprintf(err, errlen,
				 "%s: %s (a %s mount whose daemon is gone); "
				 "unmount it first (fusermount3 -u -z %s)",
				 mnt, strerror(ENOTCONN), type, mnt);
			return -ENOTCONN;
		}
		if (!alive) {
			if ((rc = detach(canon))) {
				snprintf(err, errlen,
					 "%s: a seedfs mount whose daemon is "
					 "gone is there and cannot be "
					 "detached: %s",
					 mnt, strerror(-rc));
				return rc;
			}
			int n = sfs_mctl_remove_stale();
			snprintf(note, notelen,
				 "%s: detached a seedfs mount (%s) whose "
				 "daemon was gone%s",
				 mnt, src,
				 n ? "; removed its control socket" : "");
		}
	}
	if (stat(canon, &st)) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", mnt, strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: %s", mnt, strerror(ENOTDIR));
		return -ENOTDIR;
	}
	if (nonempty)
		return 0;
	DIR *d = opendir(canon);
	if (!d) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", mnt, strerror(-rc));
		return rc;
	}
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	if (n) {
		snprintf(err, errlen,
			 "%s is not empty (%zu entr%s); mount on an empty "
			 "directory, or use -o nonempty to hide them",
			 mnt, n, n == 1 ? "y" : "ies");
		return -ENOTEMPTY;
	}
	return 0;
}
