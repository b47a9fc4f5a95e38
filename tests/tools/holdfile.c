/* SPDX-License-Identifier: MIT */
/*
 * holdfile - keep one file open and use it on command, so a test can
 * follow a handle across a change of generation.
 *
 *   holdfile [--path] PATH   then, one per line on stdin:
 *     R OFF LEN          pread; prints "OK <hash>" or "ERR <errno name>"
 *     X                  listxattr; prints "OK <names, comma separated>"
 *     G NAME             getxattr; prints "OK <value>"
 *     Q                  exit
 * The hash is FNV-1a 64 of the bytes read, in hex.  --path opens with
 * O_PATH: the inode is held, no file is opened (no FUSE open); the
 * xattr calls then go through /proc/self/fd/N, as they must.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

static void reply_err(void)
{
	printf("ERR %s\n", strerrorname_np(errno));
}

static void do_read(int fd, const char *line)
{
	unsigned long long off, len;
	if (sscanf(line, "R %llu %llu", &off, &len) != 2 || len > (64u << 20)) {
		printf("ERR EINVAL\n");
		return;
	}
	unsigned char *buf = malloc(len ? len : 1);
	ssize_t n = buf ? pread(fd, buf, len, (off_t)off) : -1;
	if (n < 0) {
		reply_err();
	} else {
		uint64_t h = 0xcbf29ce484222325ull;
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ buf[i]) * 0x100000001b3ull;
		printf("OK %016" PRIx64 "\n", h);
	}
	free(buf);
}

static void do_xattr(const char *proc, const char *line)
{
	char buf[4096];
	ssize_t n;
	if (line[0] == 'X') {
		n = listxattr(proc, buf, sizeof(buf));
		for (ssize_t i = 0; i + 1 < n; i++)
			if (!buf[i])
				buf[i] = ',';
	} else {
		char name[256];
		if (sscanf(line, "G %255s", name) != 1) {
			printf("ERR EINVAL\n");
			return;
		}
		n = getxattr(proc, name, buf, sizeof(buf) - 1);
	}
	if (n < 0) {
		reply_err();
		return;
	}
	buf[n > 0 && line[0] == 'X' ? n - 1 : n] = '\0';
	printf("OK %s\n", buf);
}

int main(int argc, char **argv)
{
	char line[384], proc[64];
	int opath = argc == 3 && !strcmp(argv[1], "--path");
	if (argc != 2 && !opath) {
		fprintf(stderr, "usage: holdfile [--path] PATH\n");
		return 2;
	}
	int fd = open(argv[argc - 1], opath ? O_PATH : O_RDONLY);
	if (fd < 0) {
		reply_err();
		return 1;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	printf("OPEN\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (line[0] == 'Q')
			break;
		if (line[0] == 'R')
			do_read(fd, line);
		else if (line[0] == 'X' || line[0] == 'G')
			do_xattr(proc, line);
		else
			printf("ERR EINVAL\n");
		fflush(stdout);
	}
	close(fd);
	return 0;
}
