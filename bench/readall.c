/* SPDX-License-Identifier: MIT */
/*
 * sfs-readall - read every regular file under DIR (or the files given)
 * sequentially with BLOCK-sized read(2) calls, as a loader does; print
 * "bytes B seconds S GB/s G".
 *
 *   sfs-readall [--block SIZE] PATH...
 */
#include "common/util.h"

#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *buf;
static size_t block = 1 << 20;
static uint64_t total;
static int failed;

static int read_one(const char *path, const struct stat *st, int type,
		    struct FTW *ftw)
{
	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		failed = 1;
		return 0;
	}
	ssize_t n;
	while ((n = read(fd, buf, block)) > 0)
		total += (uint64_t)n;
	if (n < 0) {
		perror(path);
		failed = 1;
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	int i = 1;
	uint64_t b;
	if (argc > 2 && !strcmp(argv[1], "--block")) {
		if (sfs_parse_size(argv[2], &b) || !b)
			return 2;
		block = (size_t)b;
		i = 3;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: sfs-readall [--block SIZE] PATH...\n");
		return 2;
	}
	buf = malloc(block);
	uint64_t t0 = sfs_now_ns();
	for (; i < argc; i++)
		nftw(argv[i], read_one, 16, FTW_PHYS);
	double s = (double)(sfs_now_ns() - t0) / 1e9;
	printf("bytes %" PRIu64 " seconds %.3f GB/s %.2f\n", total, s,
	       (double)total / s / 1e9);
	return failed;
}
