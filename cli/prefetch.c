/* SPDX-License-Identifier: MIT */
/*
 * prefetch_main.c - `seedfs prefetch MOUNTPOINT/NAME [FILE...]`.
 *
 * Finds the mount root (the directory above whose .seedfs/status names
 * a control socket), asks the mount daemon to warm the files, and shows
 * its progress.  The bytes never pass through this process.
 */
#include "cli/cli.h"

#include "common/progress.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define REPLY_TIMEOUT_S 60 /* silence from the daemon that means trouble */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: seedfs prefetch MOUNTPOINT/NAME [FILE...]\n"
		"\n"
		"Warm the cache of a seedfs mount with the model NAME's files\n"
		"(or only FILEs, relative to MOUNTPOINT/NAME) at transport\n"
		"speed; the mount daemon pulls them, nothing passes through\n"
		"this command.  Without --cache-dir on the mount only what fits\n"
		"in three quarters of the memory cache is warmed.  Shows a\n"
		"progress bar on a terminal, progress lines otherwise.\n"
		"\n"
		"  -h, --help   this text\n");
}

/* The control socket named in @dir/.seedfs/status, into @sock; 0 or -1. */
static int control_of(const char *dir, char *sock, size_t len)
{
	char path[PATH_MAX + 32], buf[8192];
	snprintf(path, sizeof(path), "%s/.seedfs/status", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *p = strstr(buf, "\ncontrol: ");
	if (!p)
		return -1;
	p += strlen("\ncontrol: ");
	size_t l = strcspn(p, "\n");
	if (l == 0 || l >= len)
		return -1;
	memcpy(sock, p, l);
	sock[l] = '\0';
	return 0;
}

/* The mount root at or above @real, into @root; 0 or -1. */
static int find_root(const char *real, char *root, size_t rlen, char *sock,
		     size_t slen)
{
	char d[PATH_MAX];
	snprintf(d, sizeof(d), "%s", real);
	for (;;) {
		if (!control_of(d, sock, slen)) {
			snprintf(root, rlen, "%s", d);
			return 0;
		}
		if (!strcmp(d, "/"))
			return -1;
		char tmp[PATH_MAX];
		snprintf(tmp, sizeof(tmp), "%s", d);
		snprintf(d, sizeof(d), "%s", dirname(tmp));
	}
}

/* @real relative to @root ("" for the root itself), or NULL if not in. */
static const char *under(const char *real, const char *root)
{
	size_t n = strlen(root);
	if (strncmp(real, root, n))
		return NULL;
	if (real[n] == '\0')
		return "";
	if (!strcmp(root, "/"))
		return real + 1;
	return real[n] == '/' ? real + n + 1 : NULL;
}

/* Send @s whole (SO_SNDTIMEO bounds it); 0, or -1 with one line why. */
static int send_all(int fd, const char *s)
{
	for (size_t off = 0, len = strlen(s); off < len;) {
		ssize_t w = send(fd, s + off, len - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			fprintf(stderr,
				"seedfs prefetch: cannot send the request to "
				"the mount daemon: %s\n",
				w ? strerror(errno) : "closed");
			return -1;
		}
		off += (size_t)w;
	}
	return 0;
}

/* Send the request: one "path" line each, then "prefetch". */
static int request(int fd, const char *rel, int nfiles, char **files,
		   const char *root)
{
	char line[PATH_MAX * 2 + 16];
	if (nfiles == 0) {
		snprintf(line, sizeof(line), "path %s\n", rel);
		return send_all(fd, line);
	}
	for (int i = 0; i < nfiles; i++) {
		const char *f = files[i];
		char real[PATH_MAX];
		if (f[0] == '/') { /* an absolute path inside the mount */
			const char *r =
				realpath(f, real) ? under(real, root) : NULL;
			if (!r) {
				fprintf(stderr,
					"seedfs prefetch: %s is not in the "
					"mount %s\n",
					f, root);
				return -1;
			}
			snprintf(line, sizeof(line), "path %s\n", r);
		} else {
			snprintf(line, sizeof(line), "path %s%s%s\n", rel,
				 *rel ? "/" : "", f);
		}
		if (strchr(line, '\n') != line + strlen(line) - 1) {
			fprintf(stderr, "seedfs prefetch: a newline in %s\n",
				f);
			return -1;
		}
		if (send_all(fd, line))
			return -1;
	}
	return 0;
}

/* Follow the daemon's replies to the end; the exit status. */
static int follow(int fd, const char *what)
{
	FILE *in = fdopen(fd, "r");
	struct sfs_progress prog;
	int started = 0;
	uint64_t shown = 0;
	char line[1024];

	if (!in)
		return 1;
	while (fgets(line, sizeof(line), in)) {
		uint64_t done, total;
		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "progress %" SCNu64 " %" SCNu64, &done,
			   &total) == 2) {
			if (!started) {
				sfs_progress_start(&prog, what, total);
				started = 1;
			}
			if (done > shown)
				sfs_progress_add(&prog, done - shown);
			shown = SFS_MAX(shown, done);
		} else if (!strncmp(line, "note ", 5)) {
			fprintf(stderr, "seedfs prefetch: %s\n", line + 5);
		} else if (!strncmp(line, "done", 4)) {
			if (started)
				sfs_progress_end(&prog, 1);
			fclose(in);
			return 0;
		} else if (!strncmp(line, "error ", 6)) {
			if (started)
				sfs_progress_end(&prog, 0);
			fprintf(stderr, "seedfs prefetch: %s\n", line + 6);
			fclose(in);
			return 1;
		}
	}
	if (started)
		sfs_progress_end(&prog, 0);
	/* The daemon drops a client that takes no reply for 5 s, or
	 * none within 1 s of an unmount (replica/mctl.c): a stopped one. */
	fprintf(stderr, "seedfs prefetch: %s\n",
		errno == EAGAIN || errno == EWOULDBLOCK
			? "no word from the mount daemon for 60 s"
			: "the mount daemon closed the connection (see its "
			  "log: a client that stops reading its replies is "
			  "dropped)");
	fclose(in);
	return 1;
}

int sfs_cli_prefetch(int argc, char **argv)
{
	char real[PATH_MAX], root[PATH_MAX], what[PATH_MAX + 16];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	if (argc > 1 &&
	    (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc < 2 || argv[1][0] == '-') {
		usage(stderr);
		return 2;
	}
	if (!realpath(argv[1], real)) {
		fprintf(stderr, "seedfs prefetch: %s: %s\n", argv[1],
			strerror(errno));
		return 1;
	}
	if (find_root(real, root, sizeof(root), sa.sun_path,
		      sizeof(sa.sun_path))) {
		fprintf(stderr,
			"seedfs prefetch: %s is not in a seedfs mount (no "
			".seedfs/status naming a control socket above it)\n",
			argv[1]);
		return 1;
	}
	const char *rel = under(real, root);
	snprintf(what, sizeof(what), "prefetch %s", *rel ? rel : root);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr,
			"seedfs prefetch: cannot reach the mount daemon of %s "
			"at %s: %s\n",
			root, sa.sun_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	/* Neither way waits without bound (the daemon reads a request
	 * within 5 s and closes the connection then). */
	struct timeval tv = {.tv_sec = REPLY_TIMEOUT_S};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (request(fd, rel, argc - 2, argv + 2, root) ||
	    send_all(fd, "prefetch\n")) {
		close(fd);
		return 1;
	}
	return follow(fd, what);
}
