/* SPDX-License-Identifier: MIT */
/*
 * apiread.c - read a published model through the engine API
 * (seedfs.h, sfs_client_*) and compare every byte with the local files.
 *
 *   apiread SEEDS MODEL LOCALDIR [files|tensors|ranges] [THREADS] [SECS]
 *
 * files:   one registration per file, its whole bytes in one read, all
 *          files in one batch (only the reads are timed)
 * tensors: every tensor in one batch, into one registration
 * ranges:  THREADS threads, each batches of 32 random ranges (odd
 *          offsets and lengths, across tensor and chunk boundaries) for
 *          SECS seconds (default 1), or once through each file
 * errors:  bad reads (no such file, past the end, outside the
 *          registration, none) refused, a good one beside them served
 * stalled: the largest file whole into its registration once the file
 *          $APIREAD_GO exists (10 s at most; the test has stopped the
 *          seed): the read must fail, and sfs_client_dereg say -EBUSY
 *          (the transport still holds the read).  With $APIREAD_GO2
 *          set: prints "apiread: dereg done", waits for that file (the
 *          test has let the seed go on), then reads the file whole
 *          again into a new registration until it is served (10 s at
 *          most) and compares it.  Then sfs_client_close.  The first
 *          buffer is never unmapped: the transport may keep it (see
 *          sfs_client_dereg).  Prints "apiread: stalled ok read RC
 *          dereg RC" (and "again ok after N tries")
 * Prints "apiread: MODE ok BYTES bytes in S s (R GB/s), pulled P" and
 * exits 0, or names the first difference and exits 1.  Uses only the
 * public header: it is also an example of the API.  $APIREAD_STATUS
 * names a file to write the client's status into at the end (in ranges
 * mode also every 100 ms while the threads read, replaced whole: tests
 * wait on its counters); $APIREAD_STOP names a file whose existence
 * ends the ranges threads before SECS; $APIREAD_NO_VERIFY set takes
 * the bytes unchecked (measuring only); $APIREAD_TIMEOUT_MS is the
 * cfg's timeout_ms; $APIREAD_TRUST_KEY is the
 * cfg's trust_key, and $APIREAD_REQUIRE_SIGNED set its require_signed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* rand_r, MAP_POPULATE */
#endif
#include <seedfs.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static struct sfs_client *cl;
static const char *local;
static double secs = 1;
static volatile int failed;
static const char *stop_file; /* $APIREAD_STOP */
static int running;	      /* ranges threads not done (atomic) */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The local file's bytes [off, off+len) equal @got? */
static int same(size_t file, uint64_t off, const uint8_t *got, uint64_t len)
{
	struct sfs_client_file f;
	char path[4096];
	sfs_client_file(cl, file, &f);
	snprintf(path, sizeof(path), "%s/%s", local, f.path);
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "apiread: %s: %s\n", path, strerror(errno));
		return 0;
	}
	uint8_t *want = malloc(len ? len : 1);
	ssize_t n = pread(fd, want, len, (off_t)off);
	close(fd);
	int ok = n == (ssize_t)len && !memcmp(want, got, len);
	if (!ok) {
		uint64_t i = 0;
		while (n == (ssize_t)len && i < len && want[i] == got[i])
			i++;
		fprintf(stderr,
			"apiread: %s bytes [%" PRIu64 ", +%" PRIu64
			"): differ at byte %" PRIu64 "\n",
			f.path, off, len, off + i);
	}
	free(want);
	return ok;
}

static uint8_t *alloc(size_t len)
{
	/* Populated: an engine's destination is memory it already has;
	 * the first touch of fresh pages is not the transport's cost. */
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* Every file whole, in one batch: one registration per file, its bytes
 * in one read.  Only the reads are timed (*secs_out). */
static uint64_t read_files(double *secs_out)
{
	struct sfs_client_info info;
	uint64_t total = 0;
	char err[512];
	sfs_client_info(cl, &info);
	struct sfs_client_rd *rds = calloc(info.nfiles + 1, sizeof(*rds));
	struct sfs_client_mr **mrs = calloc(info.nfiles + 1, sizeof(*mrs));
	size_t n = 0;
	for (size_t i = 0; i < info.nfiles && !failed; i++) {
		struct sfs_client_file f;
		sfs_client_file(cl, i, &f);
		if (!f.size)
			continue;
		uint8_t *buf = alloc(f.size);
		if (!buf || sfs_client_reg(cl, buf, f.size, &mrs[n], err,
					   sizeof(err))) {
			fprintf(stderr, "apiread: register: %s\n", err);
			failed = 1;
			break;
		}
		rds[n] = (struct sfs_client_rd){.file = i,
						.off = 0,
						.len = f.size,
						.dst = buf,
						.mr = mrs[n]};
		n++;
		total += f.size;
	}
	double t0 = now();
	if (!failed && sfs_client_read(cl, rds, n, err, sizeof(err))) {
		fprintf(stderr, "apiread: %s\n", err);
		failed = 1;
	}
	*secs_out = now() - t0;
	for (size_t i = 0; i < n; i++) {
		if (!failed && !same(rds[i].file, 0, rds[i].dst, rds[i].len))
			failed = 1;
		sfs_client_dereg(mrs[i]);
		munmap(rds[i].dst, rds[i].len);
	}
	free(rds);
	free(mrs);
	return total;
}

static uint64_t read_tensors(double *secs_out)
{
	struct sfs_client_info info;
	uint64_t total = 0, at = 0;
	char err[512];
	sfs_client_info(cl, &info);
	struct sfs_client_rd *rds = calloc(info.ntensors + 1, sizeof(*rds));
	for (size_t i = 0; i < info.ntensors; i++) {
		struct sfs_client_tensor t;
		sfs_client_tensor(cl, i, &t);
		total += t.len;
	}
	uint8_t *buf = alloc(total);
	struct sfs_client_mr *mr;
	if (!buf ||
	    sfs_client_reg(cl, buf, total ? total : 1, &mr, err, sizeof(err))) {
		fprintf(stderr, "apiread: register: %s\n", err);
		failed = 1;
		return 0;
	}
	for (size_t i = 0; i < info.ntensors; i++) {
		struct sfs_client_tensor t;
		sfs_client_tensor(cl, i, &t);
		rds[i] = (struct sfs_client_rd){.file = t.file,
						.off = t.off,
						.len = t.len,
						.dst = buf + at,
						.mr = mr};
		at += t.len;
	}
	double t0 = now();
	if (sfs_client_read(cl, rds, info.ntensors, err, sizeof(err))) {
		fprintf(stderr, "apiread: %s\n", err);
		failed = 1;
	}
	*secs_out = now() - t0;
	for (size_t i = 0; i < info.ntensors && !failed; i++)
		if (!same(rds[i].file, rds[i].off, rds[i].dst, rds[i].len))
			failed = 1;
	sfs_client_dereg(mr);
	munmap(buf, total ? total : 1);
	free(rds);
	return total;
}

/* Bad reads: each refused with -EINVAL and a line naming it; a good
 * one in the same batch still lands; a zero-length read is fine. */
static uint64_t read_errors(void)
{
	struct sfs_client_file f;
	struct sfs_client_mr *mr;
	char err[512];
	size_t big = 0;
	struct sfs_client_info info;
	sfs_client_info(cl, &info);
	for (size_t i = 0; i < info.nfiles; i++) {
		sfs_client_file(cl, i, &f);
		if (f.size > 8192) {
			big = i;
			break;
		}
	}
	sfs_client_file(cl, big, &f);
	uint8_t *buf = alloc(8192);
	if (!buf || sfs_client_reg(cl, buf, 8192, &mr, err, sizeof(err))) {
		failed = 1;
		return 0;
	}
	struct sfs_client_rd rds[] = {
		{.file = info.nfiles, .off = 0, .len = 1, .dst = buf, .mr = mr},
		{.file = big,
		 .off = f.size - 10,
		 .len = 11,
		 .dst = buf,
		 .mr = mr},
		{.file = big,
		 .off = 0,
		 .len = 4096,
		 .dst = buf + 4097,
		 .mr = mr},
		{.file = big, .off = 0, .len = 16, .dst = buf, .mr = NULL},
		{.file = big, .off = 100, .len = 0, .dst = buf, .mr = mr},
		{.file = big,
		 .off = 1000,
		 .len = 4000,
		 .dst = buf + 4096,
		 .mr = mr},
	};
	int rc = sfs_client_read(cl, rds, 6, err, sizeof(err));
	printf("apiread: refused: %s\n", err);
	for (int i = 0; i < 4; i++)
		if (rds[i].status != -EINVAL) {
			fprintf(stderr, "apiread: bad read %d: status %d\n", i,
				rds[i].status);
			failed = 1;
		}
	if (rc != -EINVAL || rds[4].status || rds[5].status ||
	    !same(big, 1000, buf + 4096, 4000) || !strstr(err, "read 0: ")) {
		fprintf(stderr, "apiread: errors: rc %d, %d %d, %s\n", rc,
			rds[4].status, rds[5].status, err);
		failed = 1;
	}
	sfs_client_dereg(mr);
	munmap(buf, 8192);
	return 4000;
}

#define BATCH 32
#define RANGE_MAX (3u << 20)

static void *ranges(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg * 7919u + 1;
	struct sfs_client_info info;
	uint64_t *total = calloc(1, sizeof(*total));
	char err[512];
	sfs_client_info(cl, &info);
	uint8_t *buf = alloc((size_t)BATCH * RANGE_MAX);
	struct sfs_client_mr *mr;
	if (!buf || sfs_client_reg(cl, buf, (size_t)BATCH * RANGE_MAX, &mr, err,
				   sizeof(err))) {
		fprintf(stderr, "apiread: register: %s\n", err);
		failed = 1;
		return total;
	}
	double end = now() + secs;
	do {
		struct sfs_client_rd rds[BATCH];
		size_t n = 0;
		for (size_t k = 0; k < BATCH; k++) {
			struct sfs_client_file f;
			size_t file = (size_t)rand_r(&seed) % info.nfiles;
			sfs_client_file(cl, file, &f);
			if (!f.size)
				continue;
			uint64_t off = (uint64_t)rand_r(&seed) *
				       (uint64_t)rand_r(&seed) % f.size;
			uint64_t len = 1 + (uint64_t)rand_r(&seed) % RANGE_MAX;
			if (len > f.size - off)
				len = f.size - off;
			rds[n++] = (struct sfs_client_rd){.file = file,
							  .off = off,
							  .len = len,
							  .dst = buf +
								 k * RANGE_MAX,
							  .mr = mr};
		}
		if (sfs_client_read(cl, rds, n, err, sizeof(err))) {
			fprintf(stderr, "apiread: %s\n", err);
			failed = 1;
		}
		for (size_t k = 0; k < n && !failed; k++) {
			if (!same(rds[k].file, rds[k].off, rds[k].dst,
				  rds[k].len))
				failed = 1;
			*total += rds[k].len;
		}
	} while (!failed && now() < end &&
		 !(stop_file && !access(stop_file, F_OK)));
	sfs_client_dereg(mr);
	munmap(buf, (size_t)BATCH * RANGE_MAX);
	__atomic_sub_fetch(&running, 1, __ATOMIC_SEQ_CST);
	return total;
}

/* The client's status into @path, replaced whole (a reader never sees
 * half of it). */
static void write_status(const char *path)
{
	static char text[1 << 16];
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return;
	if (!sfs_client_status(cl, text, sizeof(text), NULL))
		fputs(text, f);
	if (!fclose(f))
		rename(tmp, path);
}

/* Wait until @path exists, 10 s at most (the test makes it). */
static void wait_file(const char *path)
{
	for (int i = 0; i < 1000 && access(path, F_OK); i++)
		usleep(10000);
}

/* Once @go2 exists, file @file (@size bytes) whole into a new
 * registration until it is served, 10 s at most, and compared. */
static void read_again(const char *go2, size_t file, uint64_t size)
{
	struct sfs_client_mr *mr;
	char err[512] = "";
	int rc = -1, tries = 0;

	printf("apiread: dereg done\n");
	fflush(stdout);
	wait_file(go2);
	uint8_t *buf = alloc(size);
	if (!buf || sfs_client_reg(cl, buf, size, &mr, err, sizeof(err))) {
		fprintf(stderr, "apiread: again: %s\n",
			buf ? err : "out of memory");
		failed = 1;
		return;
	}
	struct sfs_client_rd rd = {
		.file = file, .off = 0, .len = size, .dst = buf, .mr = mr};
	for (double t0 = now(); rc && now() < t0 + 10; tries++) {
		rc = sfs_client_read(cl, &rd, 1, err, sizeof(err));
		if (rc)
			usleep(100000); /* the stalled seed's hold */
	}
	if (rc || !same(file, 0, buf, size)) {
		fprintf(stderr, "apiread: again: %s\n",
			rc ? err : "bytes differ");
		failed = 1;
	} else {
		printf("apiread: again ok after %d tries\n", tries);
	}
	if (sfs_client_dereg(mr)) {
		fprintf(stderr, "apiread: again: dereg busy\n");
		failed = 1;
	}
	munmap(buf, size);
}

/* A read that the transport keeps past its timeout: the seed stopped
 * once $APIREAD_GO exists.  *read_rc and *dereg_rc: what the API said. */
static void read_stalled(int *read_rc, int *dereg_rc)
{
	struct sfs_client_info info;
	struct sfs_client_file f;
	struct sfs_client_mr *mr;
	size_t big = 0;
	uint64_t size = 0;
	char err[512];
	const char *go = getenv("APIREAD_GO");

	sfs_client_info(cl, &info);
	for (size_t i = 0; i < info.nfiles; i++) {
		sfs_client_file(cl, i, &f);
		if (f.size > size) {
			size = f.size;
			big = i;
		}
	}
	uint8_t *buf = alloc(size);
	if (!go || !buf ||
	    sfs_client_reg(cl, buf, size, &mr, err, sizeof(err))) {
		fprintf(stderr, "apiread: stalled: %s\n",
			!go    ? "no $APIREAD_GO"
			: !buf ? "out of memory"
			       : err);
		failed = 1;
		sfs_client_close(cl); /* nothing registered: all its own */
		cl = NULL;
		return;
	}
	printf("apiread: registered\n");
	fflush(stdout);
	wait_file(go);
	struct sfs_client_rd rd = {
		.file = big, .off = 0, .len = size, .dst = buf, .mr = mr};
	*read_rc = sfs_client_read(cl, &rd, 1, err, sizeof(err));
	if (*read_rc)
		fprintf(stderr, "apiread: stalled read: %s\n", err);
	*dereg_rc = sfs_client_dereg(mr);
	const char *go2 = getenv("APIREAD_GO2");
	if (go2)
		read_again(go2, big, size);
	sfs_client_close(cl); /* releases what dereg kept, or keeps it */
	cl = NULL;
	/* buf stays mapped: the transport may still own it. */
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr,
			"usage: apiread SEEDS MODEL LOCALDIR "
			"[files|tensors|errors|ranges|stalled] [THREADS] [SECS]\n");
		return 2;
	}
	const char *mode = argc > 4 ? argv[4] : "files";
	int threads = argc > 5 ? atoi(argv[5]) : 1;
	if (argc > 6)
		secs = atof(argv[6]);
	local = argv[3];
	char err[512];
	struct sfs_client_cfg cfg = {
		.seeds = argv[1],
		.no_verify = !!getenv("APIREAD_NO_VERIFY"),
		.trust_key = getenv("APIREAD_TRUST_KEY"),
		.require_signed = !!getenv("APIREAD_REQUIRE_SIGNED")};
	if (getenv("APIREAD_TIMEOUT_MS"))
		cfg.timeout_ms =
			(unsigned int)atoi(getenv("APIREAD_TIMEOUT_MS"));
	if (!strncmp(argv[1], "etcd://", 7)) {
		cfg.seeds = NULL;
		cfg.registry = argv[1];
	}
	double t0 = now();
	if (sfs_client_open(&cfg, argv[2], &cl, err, sizeof(err))) {
		fprintf(stderr, "apiread: %s\n", err);
		return 1;
	}
	double t1 = now();
	uint64_t total = 0;
	double took = -1;
	if (!strcmp(mode, "files")) {
		total = read_files(&took);
	} else if (!strcmp(mode, "tensors")) {
		total = read_tensors(&took);
	} else if (!strcmp(mode, "errors")) {
		total = read_errors();
	} else if (!strcmp(mode, "stalled")) {
		int read_rc = 0, dereg_rc = 0;
		read_stalled(&read_rc, &dereg_rc);
		if (failed)
			return 1;
		printf("apiread: stalled ok read %d dereg %d\n", read_rc,
		       dereg_rc);
		return read_rc && dereg_rc == -EBUSY ? 0 : 1;
	} else if (!strcmp(mode, "ranges")) {
		pthread_t th[64];
		threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
		stop_file = getenv("APIREAD_STOP");
		running = threads;
		for (int i = 0; i < threads; i++)
			pthread_create(&th[i], NULL, ranges,
				       (void *)(uintptr_t)i);
		const char *sf = getenv("APIREAD_STATUS");
		while (sf && __atomic_load_n(&running, __ATOMIC_SEQ_CST)) {
			write_status(sf);
			usleep(100000);
		}
		for (int i = 0; i < threads; i++) {
			void *r;
			pthread_join(th[i], &r);
			total += *(uint64_t *)r;
			free(r);
		}
	} else {
		fprintf(stderr, "apiread: unknown mode %s\n", mode);
		sfs_client_close(cl);
		return 2;
	}
	if (took < 0)
		took = now() - t1;
	struct sfs_client_info info;
	sfs_client_info(cl, &info);
	if (!failed)
		printf("apiread: %s ok %" PRIu64
		       " bytes in %.3f s (%.2f GB/s), "
		       "open %.3f s, pulled %" PRIu64 ", generation %" PRIu64
		       ", %s\n",
		       mode, total, took, (double)total / took / 1e9, t1 - t0,
		       info.bytes_pulled, info.generation, info.protocol);
	const char *sf = getenv("APIREAD_STATUS");
	if (sf)
		write_status(sf);
	sfs_client_close(cl);
	return failed ? 1 : 0;
}
