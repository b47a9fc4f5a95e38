/* SPDX-License-Identifier: MIT */
/*
 * sfs-readall - read every regular file under DIR (or the files given)
 * sequentially with BLOCK-sized read(2) calls, as a loader does; print
  * "bytes B seconds S GB/s G".  With --mmap, map each file and touch
 * every page instead, as a loader that mmaps safetensors does.
 *
 *   sfs-readall [--mmap] [--block SIZE] PATH...
 */
#include "common/util.h"

#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char *buf;
static size_t block = 1 << 20;
static int use_mmap; /* touch every page of a mapping instead */
static volatile uint64_t sink;
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
	ssize_t n = 0;
	if (use_mmap && st->st_size > 0) {
		size_t len = (size_t)st->st_size;
		const volatile char *p =
			mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			perror(path);
			failed = 1;
		} else {
			uint64_t s = 0;
			for (size_t i = 0; i < len; i += 4096)
				s += (unsigned char)p[i];
			sink += s;
			total += len;
			munmap((void *)p, len);
		}
	}
	while (!use_mmap && (n = read(fd, buf, block)) > 0)
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
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--mmap")) {
			use_mmap = 1;
		} else if (!strcmp(argv[i], "--block") && i + 1 < argc) {
			if (sfs_parse_size(argv[++i], &b) || !b)
				return 2;
			block = (size_t)b;
		} else {
			break;
		}
	}
	if (i >= argc) {
		fprintf(stderr,
			"usage: sfs-readall [--mmap] [--block SIZE] PATH...\n");
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
