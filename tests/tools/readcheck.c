/* SPDX-License-Identifier: MIT */
/*
 * readcheck - compare files read through a mount with the originals.
 *
 *   readcheck pread  ORIG COPY [ITERS] [SEED]  random preads at odd
 *                                               offsets and lengths
 *   readcheck mmap   ORIG COPY                  mmap both, compare
 *   readcheck stream ORIG COPY [BLOCK]          sequential read, compare
 *   readcheck threads N [-u] [-r ROUNDS] ORIG COPY [ORIG COPY]...
 *                     N threads, each streaming every pair with its own
 *                     block size, starting at a different pair, ROUNDS
 *                     times (1); -u: each block read is dropped from the
 *                     page cache (POSIX_FADV_DONTNEED) at once, so that
 *                     every read of a buffered mount reaches it
 *   readcheck gens [-b B,...] STOPFILE N MNTDIR GENDIR... -- MARKER FILE...
 *                     files that change while they are read: GENDIR K
 *                     (from 1) holds generation K of every file.  N
 *                     threads until STOPFILE exists (2 minutes at most):
 *                     each opens MNTDIR/FILE, reads it to EOF (read() in
 *                     blocks of its own size, or mmap: thread i uses
 *                     B number i modulo their count, 0 is mmap; default
 *                     4096,65549,1048576,0,333333) and closes it, and
 *                     the bytes must be exactly one generation's (checked
 *                     by 1 MiB block hashes computed first); MARKER (a
 *                     small file that differs in every generation) is
 *                     read the same way before and after each, and the
 *                     file's generation must lie between the two
 *                     (close-to-open).  Prints "seen FILE K" when a
 *                     generation of a file is first read whole, and at
 *                     the end per file how many whole reads found each
 *                     generation, and how many saw the generation change
 *                     around them.
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
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
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

static int stream(const char *a, const char *b, size_t block, int uncached)
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
		if (uncached)
			posix_fadvise(fb, off, rb, POSIX_FADV_DONTNEED);
		off += rb;
	}
	free(x);
	free(y);
	close(fa);
	close(fb);
	return rc;
}

struct job {
	int id, npairs, rounds, uncached;
	char **pairs;
	int rc;
};

static void *run_job(void *arg)
{
	static const size_t blocks[] = {4096, 65536 + 13, 1 << 20, 333333};
	struct job *j = arg;
	for (int k = 0; k < j->npairs * j->rounds && !j->rc; k++) {
		int p = (j->id + k) % j->npairs;
		j->rc = stream(j->pairs[2 * p], j->pairs[2 * p + 1],
			       blocks[j->id % 4], j->uncached);
	}
	return NULL;
}

static int cmd_threads(int argc, char **argv)
{
	pthread_t th[64];
	struct job jobs[64];
	int rc = 0, n = atoi(argv[2]), rounds = 1, uncached = 0, a = 3;
	for (; a < argc && argv[a][0] == '-'; a++) {
		if (!strcmp(argv[a], "-u"))
			uncached = 1;
		else if (!strcmp(argv[a], "-r") && a + 1 < argc)
			rounds = atoi(argv[++a]);
		else
			return 2;
	}
	int npairs = (argc - a) / 2;
	char **pairs = argv + a;
	if (n < 1 || n > 64 || rounds < 1 || npairs < 1 || (argc - a) % 2)
		return 2;
	for (int i = 0; i < n; i++) {
		jobs[i] = (struct job){.id = i,
				       .npairs = npairs,
				       .rounds = rounds,
				       .uncached = uncached,
				       .pairs = pairs};
		pthread_create(&th[i], NULL, run_job, &jobs[i]);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		rc |= jobs[i].rc;
	}
	return rc;
}

/* gens: whole reads of changing files, each one generation's bytes. */
#define GBLK ((size_t)1 << 20)
#define GENS_MAX 32

struct gfile {
	const char *rel;
	char path[4096];
	int ngens;
	off_t size[GENS_MAX];
	size_t nblk[GENS_MAX];
	uint64_t *bh[GENS_MAX]; /* a hash per 1 MiB block */
	atomic_long seen[GENS_MAX];
	atomic_long reads;
};

struct gread {
	off_t size;
	size_t nblk, cap;
	uint64_t *bh;
};

static struct gfile *gfiles;
static int ngfiles;
static uint64_t gdeadline_ms;
static const char *gstop;
static size_t gblocks[16] = {4096, 65536 + 13, 1 << 20, 0, 333333};
static int ngblocks = 5;
static atomic_int gfailed;
static atomic_long gspans;

static uint64_t gnow_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t hash_block(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h ^ (uint64_t)n;
}

static int gread_push(struct gread *g, uint64_t h)
{
	if (g->nblk == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 64;
		uint64_t *p = realloc(g->bh, cap * sizeof(*p));
		if (!p)
			return -1;
		g->bh = p;
		g->cap = cap;
	}
	g->bh[g->nblk++] = h;
	return 0;
}

/* Open @path, read it to EOF (blocks of @bs, or mmap when @bs is 0),
 * close it; its block hashes in @g.  -1 with a message on error. */
static int whole_read(const char *path, size_t bs, unsigned char *buf,
		      struct gread *g)
{
	struct stat st;
	int fd = open(path, O_RDONLY);
	g->size = 0;
	g->nblk = 0;
	if (fd < 0) {
		fprintf(stderr, "readcheck: open %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	if (fstat(fd, &st)) {
		fprintf(stderr, "readcheck: fstat %s: %s\n", path,
			strerror(errno));
		close(fd);
		return -1;
	}
	if (bs == 0 && st.st_size > 0) {
		unsigned char *m = mmap(NULL, (size_t)st.st_size, PROT_READ,
					MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			fprintf(stderr, "readcheck: mmap %s: %s\n", path,
				strerror(errno));
			close(fd);
			return -1;
		}
		for (off_t o = 0; o < st.st_size; o += (off_t)GBLK) {
			size_t n = st.st_size - o < (off_t)GBLK
					   ? (size_t)(st.st_size - o)
					   : GBLK;
			if (gread_push(g, hash_block(m + o, n)))
				abort();
		}
		g->size = st.st_size;
		munmap(m, (size_t)st.st_size);
		close(fd);
		return 0;
	}
	size_t fill = 0;
	for (;;) {
		size_t want = GBLK - fill;
		if (bs && want > bs)
			want = bs;
		ssize_t r = read(fd, buf + fill, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "readcheck: read %s at %jd: %s\n", path,
				(intmax_t)(g->size), strerror(errno));
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		fill += (size_t)r;
		g->size += r;
		if (fill == GBLK) {
			if (gread_push(g, hash_block(buf, fill)))
				abort();
			fill = 0;
		}
	}
	if (fill && gread_push(g, hash_block(buf, fill)))
		abort();
	if (close(fd)) {
		fprintf(stderr, "readcheck: close %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	if (g->size != st.st_size) {
		fprintf(stderr,
			"readcheck: %s: fstat says %jd bytes, read %jd to EOF\n",
			path, (intmax_t)st.st_size, (intmax_t)g->size);
		return -1;
	}
	return 0;
}

/* The generation (1...) whose bytes @g holds; 0 (and a message saying
 * which generation each block came from) when none. */
static int gmatch(struct gfile *f, const struct gread *g)
{
	for (int k = 0; k < f->ngens; k++)
		if (f->size[k] == g->size && f->nblk[k] == g->nblk &&
		    !memcmp(f->bh[k], g->bh, g->nblk * sizeof(*g->bh)))
			return k + 1;
	char line[2048];
	size_t n = 0;
	for (size_t b = 0; b < g->nblk && n + 16 < sizeof(line); b++) {
		int from = 0;
		for (int k = 0; k < f->ngens && !from; k++)
			if (b < f->nblk[k] && f->bh[k][b] == g->bh[b])
				from = k + 1;
		n += from ? (size_t)snprintf(line + n, sizeof(line) - n,
					     " %zu:g%d", b, from)
			  : (size_t)snprintf(line + n, sizeof(line) - n,
					     " %zu:none", b);
	}
	line[n] = 0;
	fprintf(stderr,
		"readcheck: %s: a whole read of %jd bytes is no generation's "
		"content (a mix?); 1 MiB blocks from:%s\n",
		f->path, (intmax_t)g->size, line);
	return 0;
}

/* Read @f whole and match it; its generation, or 0 (failed). */
static int gread_one(struct gfile *f, size_t bs, unsigned char *buf,
		     struct gread *g)
{
	if (whole_read(f->path, bs, buf, g))
		return 0;
	int k = gmatch(f, g);
	if (k) {
		if (atomic_fetch_add(&f->seen[k - 1], 1) == 0) {
			printf("seen %s %d\n", f->rel, k);
			fflush(stdout);
		}
		atomic_fetch_add(&f->reads, 1);
	}
	return k;
}

static void *run_gens(void *arg)
{
	long id = (long)(intptr_t)arg;
	size_t bs = gblocks[id % ngblocks];
	unsigned char *buf = malloc(GBLK);
	struct gread g = {0};
	for (long it = 0; gnow_ms() < gdeadline_ms && !atomic_load(&gfailed) &&
			  access(gstop, F_OK);
	     it++) {
		struct gfile *f = &gfiles[1 + (id + it) % (ngfiles - 1)];
		int g0 = gread_one(&gfiles[0], 4096, buf, &g);
		int k = g0 ? gread_one(f, bs, buf, &g) : 0;
		int g1 = k ? gread_one(&gfiles[0], 4096, buf, &g) : 0;
		if (!g1) {
			atomic_store(&gfailed, 1);
			break;
		}
		if (k < g0 || k > g1) {
			fprintf(stderr,
				"readcheck: %s read generation %d between "
				"reads of %s in generations %d and %d\n",
				f->path, k, gfiles[0].path, g0, g1);
			atomic_store(&gfailed, 1);
			break;
		}
		if (g0 != g1)
			atomic_fetch_add(&gspans, 1);
	}
	free(g.bh);
	free(buf);
	return NULL;
}

static int cmd_gens(int argc, char **argv)
{
	if (argc > 3 && !strcmp(argv[2], "-b")) {
		char *save = NULL, *tok;
		ngblocks = 0;
		for (tok = strtok_r(argv[3], ",", &save); tok && ngblocks < 16;
		     tok = strtok_r(NULL, ",", &save))
			gblocks[ngblocks++] = (size_t)atol(tok);
		if (!ngblocks)
			return 2;
		argc -= 2;
		argv += 2;
	}
	if (argc < 7)
		return 2;
	gstop = argv[2];
	int n = atoi(argv[3]);
	const char *mnt = argv[4];
	int ngens = 0, i = 5;
	char **gendir = argv + 5;
	while (i < argc && strcmp(argv[i], "--"))
		i++, ngens++;
	if (i >= argc || ngens < 1 || ngens > GENS_MAX || n < 1 || n > 64 ||
	    argc - i - 1 < 2)
		return 2;
	ngfiles = argc - i - 1;
	gfiles = calloc((size_t)ngfiles, sizeof(*gfiles));
	unsigned char *buf = malloc(GBLK);
	for (int fi = 0; fi < ngfiles; fi++) {
		struct gfile *f = &gfiles[fi];
		struct gread g = {0};
		f->rel = argv[i + 1 + fi];
		f->ngens = ngens;
		snprintf(f->path, sizeof(f->path), "%s/%s", mnt, f->rel);
		for (int k = 0; k < ngens; k++) {
			char p[4096];
			snprintf(p, sizeof(p), "%s/%s", gendir[k], f->rel);
			if (whole_read(p, GBLK, buf, &g))
				return 1;
			f->size[k] = g.size;
			f->nblk[k] = g.nblk;
			f->bh[k] = g.bh;
			g = (struct gread){0};
		}
	}
	free(buf);
	gdeadline_ms = gnow_ms() + 120000;
	pthread_t th[64];
	for (long t = 0; t < n; t++)
		pthread_create(&th[t], NULL, run_gens, (void *)(intptr_t)t);
	for (int t = 0; t < n; t++)
		pthread_join(th[t], NULL);
	if (!atomic_load(&gfailed) && access(gstop, F_OK)) {
		fprintf(stderr, "readcheck: %s not there after 2 minutes\n",
			gstop);
		atomic_store(&gfailed, 1);
	}
	for (int fi = 0; fi < ngfiles; fi++) {
		struct gfile *f = &gfiles[fi];
		printf("%s: %ld whole reads, by generation:", f->rel,
		       atomic_load(&f->reads));
		for (int k = 0; k < ngens; k++)
			printf(" %ld", atomic_load(&f->seen[k]));
		printf("\n");
	}
	printf("generation changed around %ld reads\n", atomic_load(&gspans));
	return atomic_load(&gfailed) ? 1 : 0;
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
			      argc > 4 ? (size_t)atol(argv[4]) : 1 << 20, 0);
	if (argc >= 5 && !strcmp(argv[1], "threads")) {
		int rc = cmd_threads(argc, argv);
		if (rc != 2)
			return rc;
	}
	if (argc >= 2 && !strcmp(argv[1], "gens")) {
		int rc = cmd_gens(argc, argv);
		if (rc != 2)
			return rc;
	}
	fprintf(stderr,
		"usage: readcheck pread|mmap|stream|threads|gens ...\n");
	return 2;
}
