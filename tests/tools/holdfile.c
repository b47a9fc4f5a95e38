/* SPDX-License-Identifier: MIT */
/*
 * holdfile - keep one file open and read it on command, so a test can
 * follow a handle across a change of generation.
 *
 *   holdfile PATH        then, one per line on stdin:
 *     R OFF LEN          pread; prints "OK <hash>" or "ERR <errno name>"
 *     Q                  exit
 * The hash is FNV-1a 64 of the bytes read, in hex.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char line[128];
	if (argc != 2) {
		fprintf(stderr, "usage: holdfile PATH\n");
		return 2;
	}
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		printf("ERR %s\n", strerrorname_np(errno));
		return 1;
	}
	printf("OPEN\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		unsigned long long off, len;
		if (line[0] == 'Q')
			break;
		if (sscanf(line, "R %llu %llu", &off, &len) != 2 ||
		    len > (64u << 20)) {
			printf("ERR EINVAL\n");
			fflush(stdout);
			continue;
		}
		unsigned char *buf = malloc(len ? len : 1);
		ssize_t n = pread(fd, buf, len, (off_t)off);
		if (n < 0) {
			printf("ERR %s\n", strerrorname_np(errno));
		} else {
			uint64_t h = 0xcbf29ce484222325ull;
			for (ssize_t i = 0; i < n; i++)
				h = (h ^ buf[i]) * 0x100000001b3ull;
			printf("OK %016" PRIx64 "\n", h);
		}
		free(buf);
		fflush(stdout);
	}
	close(fd);
	return 0;
}
