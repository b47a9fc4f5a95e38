/* SPDX-License-Identifier: MIT */
/*
 * readcheck - compare files read through a mount with the originals.
 *
 *   readcheck pread  ORIG COPY [ITERS] [SEED]  random preads at odd
 *                                               offsets and lengths
 *   readcheck mmap   ORIG COPY                  mmap both, compare
 *   readcheck stream ORIG COPY [BLOCK]          sequential read, compare
 *   readcheck threads N ORIG COPY [ORIG COPY]...
 *                     N threads, each streaming every pair with its own
 *                     block size, starting at a different pair
 *
 * Exits 0 when every byte matched, 1 on a mismatch or an I/O error
 * (printed with offset and errno), 2 on usage errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t rng = 1;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int open_pair(const char *a, const char *b, int *fa, int *fb,
		     off_t *size)
{
	struct stat sa, sb;
	*fa = open(a, O_RDONLY);
	*fb = open(b, O_RDONLY);
	if (*fa < 0 || *fb < 0) {
		fprintf(stderr, "readcheck: open %s: %s\n", *fa < 0 ? a : b,
			strerror(errno));
		return -1;
	}
	fstat(*fa, &sa);
	fstat(*fb, &sb);
	if (sa.st_size != sb.st_size) {
		fprintf(stderr, "readcheck: %s is %jd bytes, %s is %jd\n", a,
			(intmax_t)sa.st_size, b, (intmax_t)sb.st_size);
		return -1;
	}
	*size = sa.st_size;
	return 0;
}

/* pread exactly n bytes unless EOF; -1 on error. */
static ssize_t full_pread(int fd, char *p, size_t n, off_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, p + got, n - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static int compare_at(const char *name, const char *a, const char *b, size_t n,
		      off_t off)
{
	if (memcmp(a, b, n) == 0)
		return 0;
	size_t i = 0;
	while (a[i] == b[i])
		i++;
	fprintf(stderr, "readcheck: %s differs at byte %jd\n", name,
		(intmax_t)(off + (off_t)i));
	return -1;
}

static int cmd_pread(const char *a, const char *b, long iters)
{
	int fa, fb;
	off_t size;
	if (open_pair(a, b, &fa, &fb, &size))
		return 1;
	char *x = malloc(4 << 20), *y = malloc(4 << 20);
	for (long i = 0; i < iters; i++) {
		off_t off = size ? (off_t)(next() % (uint64_t)size) : 0;
		size_t len;
		switch (next() % 4) {
		case 0:
			len = 1 + next() % 16;
			break;
		case 1:
			len = 1 + next() % 8191;
			break;
		case 2:
			len = 1 + next() % (1 << 20);
			break;
		default:
			len = 1 + next() % (4 << 20);
			break;
		}
		if (i % 16 == 15) /* read across the end of the file */
			off = size > 7 ? size - 7 : 0;
		ssize_t ra = full_pread(fa, x, len, off);
		ssize_t rb = full_pread(fb, y, len, off);
		if (rb < 0) {
			fprintf(stderr, "readcheck: pread %s at %jd +%zu: %s\n",
				b, (intmax_t)off, len, strerror(errno));
			return 1;
		}
		if (ra != rb) {
			fprintf(stderr,
				"readcheck: %s at %jd: got %zd bytes, "
				"want %zd\n",
				b, (intmax_t)off, rb, ra);
			return 1;
		}
		if (compare_at(b, x, y, (size_t)ra, off))
			return 1;
	}
	free(x);
	free(y);
	close(fa);
	close(fb);
	return 0;
}

static int cmd_mmap(const char *a, const char *b)
{
	int fa, fb;
	off_t size;
	if (open_pair(a, b, &fa, &fb, &size))
		return 1;
	if (size == 0)
		return 0;
	char *x = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fa, 0);
	char *y = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fb, 0);
	if (x == MAP_FAILED || y == MAP_FAILED) {
		fprintf(stderr, "readcheck: mmap %s: %s\n",
			x == MAP_FAILED ? a : b, strerror(errno));
		return 1;
	}
	int rc = compare_at(b, x, y, (size_t)size, 0) ? 1 : 0;
	munmap(x, (size_t)size);
	munmap(y, (size_t)size);
	close(fa);
	close(fb);
	return rc;
}

static int stream(const char *a, const char *b, size_t block)
{
	int fa, fb;
	off_t size, off = 0;
	if (open_pair(a, b, &fa, &fb, &size))
		return 1;
	char *x = malloc(block), *y = malloc(block);
	int rc = 0;
	while (off < size) {
		ssize_t rb = read(fb, y, block);
		if (rb < 0) {
			fprintf(stderr, "readcheck: read %s at %jd: %s\n", b,
				(intmax_t)off, strerror(errno));
			rc = 1;
			break;
		}
		if (rb == 0) {
			fprintf(stderr, "readcheck: %s: early EOF at %jd\n", b,
				(intmax_t)off);
			rc = 1;
			break;
		}
		if (full_pread(fa, x, (size_t)rb, off) != rb ||
		    compare_at(b, x, y, (size_t)rb, off)) {
			rc = 1;
			break;
		}
		off += rb;
	}
	free(x);
	free(y);
	close(fa);
	close(fb);
	return rc;
}

struct job {
	int id, npairs;
	char **pairs;
	int rc;
};

static void *run_job(void *arg)
{
	static const size_t blocks[] = {4096, 65536 + 13, 1 << 20, 333333};
	struct job *j = arg;
	for (int k = 0; k < j->npairs && !j->rc; k++) {
		int p = (j->id + k) % j->npairs;
		j->rc = stream(j->pairs[2 * p], j->pairs[2 * p + 1],
			       blocks[j->id % 4]);
	}
	return NULL;
}

static int cmd_threads(int n, int npairs, char **pairs)
{
	pthread_t th[64];
	struct job jobs[64];
	int rc = 0;
	if (n < 1 || n > 64)
		return 2;
	for (int i = 0; i < n; i++) {
		jobs[i] =
			(struct job){.id = i, .npairs = npairs, .pairs = pairs};
		pthread_create(&th[i], NULL, run_job, &jobs[i]);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		rc |= jobs[i].rc;
	}
	return rc;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "pread")) {
		long iters = argc > 4 ? atol(argv[4]) : 200;
		rng = argc > 5 ? strtoull(argv[5], NULL, 10) | 1 : 1;
		return cmd_pread(argv[2], argv[3], iters);
	}
	if (argc == 4 && !strcmp(argv[1], "mmap"))
		return cmd_mmap(argv[2], argv[3]);
	if (argc >= 4 && !strcmp(argv[1], "stream"))
		return stream(argv[2], argv[3],
			      argc > 4 ? (size_t)atol(argv[4]) : 1 << 20);
	if (argc >= 5 && !strcmp(argv[1], "threads") && (argc - 3) % 2 == 0)
		return cmd_threads(atoi(argv[2]), (argc - 3) / 2, argv + 3);
	fprintf(stderr, "usage: readcheck pread|mmap|stream|threads ...\n");
	return 2;
}
