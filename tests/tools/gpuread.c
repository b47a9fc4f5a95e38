/* SPDX-License-Identifier: MIT */
/*
 * gpuread.c - read a published model through the engine API into CUDA
 * device memory and compare every byte, copied back, with the local
 * files.  Runs with a real driver and GPU (tests/gpu/run.sh) and, in
 * make test, with the MOCK driver tests/tools/fakecuda.c.
 *
 *   gpuread devices
 *   gpuread SEEDS MODEL LOCALDIR files|tensors|errors
 *   gpuread SEEDS MODEL LOCALDIR corrupt FILE OFFSET
 *
 * devices: print what sfs_client_cuda_devices says; exit 0 with a
 *          device, 3 without (the line on stderr).
 * files:   every file whole into its own device allocation, and the
 *          first file also into host memory, all in one batch.
 * tensors: every tensor into one device allocation, one batch.
 * errors:  reads outside the registration or past the file refused
 *          (-EINVAL) without touching device memory; a good read beside
 *          them served.
 * corrupt: the seed flips byte OFFSET of file FILE: reading that file
 *          answers -EBADMSG, and no byte that is not the file's reaches
 *          the device (byte OFFSET keeps what was there before).
 * check N: N threads at once, each every file into device memory of its
 *          own, one batch each: prints each thread's result (0 or the
 *          error and its line) and fails only if a read that answered 0
 *          holds a byte that is not the file's (for fault injection with
 *          the MOCK driver, and stalls).
 * protnone: registering memory no host access may touch (a device's
 *          address range as a build without CUDA sees it: PROT_NONE) is
 *          refused (-EFAULT, one line), not taken for host memory.
 * $GPUREAD_TIMEOUT_MS: the client's timeout; $GPUREAD_GO: a file whose
 * existence starts the reads (after "gpuread: opened" is printed).
 * Prints "gpuread: MODE ok BYTES bytes in S s (R GB/s)[, mock: ...]"
 * and exits 0, or names the first difference and exits 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <seedfs.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The driver API's few calls this test makes itself (no cuda.h needed:
 * the types are the driver ABI's). */
typedef int cu_result;
typedef unsigned long long cu_ptr;
static struct {
	cu_result (*init)(unsigned int);
	cu_result (*dev_get)(int *, int);
	cu_result (*retain)(void **, int);
	cu_result (*push)(void *);
	cu_result (*alloc)(cu_ptr *, size_t);
	cu_result (*free)(cu_ptr);
	cu_result (*dtoh)(void *, cu_ptr, size_t);
	cu_result (*memset8)(cu_ptr, unsigned char, size_t);
	void (*stats)(uint64_t *, uint64_t *, uint64_t *, uint64_t *, int *,
		      int *);
} cu;

static struct sfs_client *cl;
static const char *local;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "gpuread: %s (%d)\n", what, rc);
	exit(1);
}

static void *ctx; /* device 0's primary context */

static void cuda_setup(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	int dev;
	if (!h) {
		fprintf(stderr, "gpuread: %s\n", dlerror());
		exit(1);
	}
	*(void **)&cu.init = dlsym(h, "cuInit");
	*(void **)&cu.dev_get = dlsym(h, "cuDeviceGet");
	*(void **)&cu.retain = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&cu.push = dlsym(h, "cuCtxPushCurrent_v2");
	*(void **)&cu.alloc = dlsym(h, "cuMemAlloc_v2");
	*(void **)&cu.free = dlsym(h, "cuMemFree_v2");
	*(void **)&cu.dtoh = dlsym(h, "cuMemcpyDtoH_v2");
	*(void **)&cu.memset8 = dlsym(h, "cuMemsetD8_v2");
	*(void **)&cu.stats = dlsym(h, "fakecuda_stats"); /* the mock's */
	if (!cu.init || !cu.dev_get || !cu.retain || !cu.push || !cu.alloc ||
	    !cu.free || !cu.dtoh || !cu.memset8)
		die("libcuda.so.1 lacks a driver call", 0);
	int rc;
	if ((rc = cu.init(0)) || (rc = cu.dev_get(&dev, 0)) ||
	    (rc = cu.retain(&ctx, dev)) || (rc = cu.push(ctx)))
		die("CUDA device 0: cannot make its context current", rc);
}

static cu_ptr dev_alloc(size_t len, unsigned char fill)
{
	cu_ptr p;
	int rc;
	if ((rc = cu.alloc(&p, len ? len : 1)))
		die("cuMemAlloc", rc);
	if ((rc = cu.memset8(p, fill, len ? len : 1)))
		die("cuMemsetD8", rc);
	return p;
}

static uint8_t *dev_copy_back(cu_ptr p, size_t len)
{
	uint8_t *h = malloc(len ? len : 1);
	int rc;
	if (!h)
		die("out of memory", 0);
	if (len && (rc = cu.dtoh(h, p, len)))
		die("cuMemcpyDtoH", rc);
	return h;
}

static uint8_t *local_bytes(size_t file, uint64_t off, uint64_t len)
{
	struct sfs_client_file f;
	char path[4096];
	sfs_client_file(cl, file, &f);
	snprintf(path, sizeof(path), "%s/%s", local, f.path);
	int fd = open(path, O_RDONLY);
	uint8_t *want = malloc(len ? len : 1);
	if (fd < 0 || !want ||
	    pread(fd, want, len, (off_t)off) != (ssize_t)len) {
		fprintf(stderr, "gpuread: %s: cannot read %" PRIu64 " bytes\n",
			path, len);
		exit(1);
	}
	close(fd);
	return want;
}

/* Device bytes at @p equal the file's [off, off+len)? */
static int same(size_t file, uint64_t off, cu_ptr p, uint64_t len)
{
	uint8_t *got = dev_copy_back(p, len),
		*want = local_bytes(file, off, len);
	uint64_t i = 0;
	while (i < len && want[i] == got[i])
		i++;
	if (i < len) {
		struct sfs_client_file f;
		sfs_client_file(cl, file, &f);
		fprintf(stderr,
			"gpuread: %s bytes [%" PRIu64 ", +%" PRIu64
			"): on the device, differ at byte %" PRIu64 "\n",
			f.path, off, len, off + i);
	}
	free(got);
	free(want);
	return i == len;
}

static void mock_line(char *out, size_t len)
{
	uint64_t bytes, copies, pageable, pending;
	int retained, pinned;
	out[0] = '\0';
	if (!cu.stats)
		return;
	cu.stats(&bytes, &copies, &pageable, &pending, &retained, &pinned);
	snprintf(out, len,
		 ", mock: %" PRIu64 " bytes in %" PRIu64
		 " copies host to device, %" PRIu64
		 " from pageable memory, at most %" PRIu64 " pending, %d "
		 "contexts retained, %d ranges page-locked",
		 bytes, copies, pageable, pending, retained, pinned);
}

static uint64_t read_files(void)
{
	struct sfs_client_info info;
	char err[512];
	uint64_t total = 0;
	sfs_client_info(cl, &info);
	struct sfs_client_rd *rds = calloc(info.nfiles + 1, sizeof(*rds));
	struct sfs_client_mr **mrs = calloc(info.nfiles + 1, sizeof(*mrs));
	cu_ptr *ptrs = calloc(info.nfiles + 1, sizeof(*ptrs));
	uint8_t *host = NULL;
	size_t n = 0;
	for (size_t i = 0; i < info.nfiles; i++) {
		struct sfs_client_file f;
		sfs_client_file(cl, i, &f);
		if (!f.size)
			continue;
		ptrs[n] = dev_alloc(f.size, 0);
		if (sfs_client_reg(cl, (void *)(uintptr_t)ptrs[n], f.size,
				   &mrs[n], err, sizeof(err))) {
			fprintf(stderr, "gpuread: register: %s\n", err);
			exit(1);
		}
		rds[n] = (struct sfs_client_rd){
			.file = i,
			.len = f.size,
			.dst = (void *)(uintptr_t)ptrs[n],
			.mr = mrs[n]};
		total += f.size;
		n++;
	}
	/* The first file again, into host memory, in the same batch. */
	host = malloc(rds[0].len);
	if (!host ||
	    sfs_client_reg(cl, host, rds[0].len, &mrs[n], err, sizeof(err))) {
		fprintf(stderr, "gpuread: register host memory: %s\n", err);
		exit(1);
	}
	rds[n] = (struct sfs_client_rd){.file = rds[0].file,
					.len = rds[0].len,
					.dst = host,
					.mr = mrs[n]};
	if (sfs_client_read(cl, rds, n + 1, err, sizeof(err))) {
		fprintf(stderr, "gpuread: %s\n", err);
		exit(1);
	}
	for (size_t i = 0; i < n; i++) {
		if (!same(rds[i].file, 0, ptrs[i], rds[i].len))
			exit(1);
		sfs_client_dereg(mrs[i]);
		cu.free(ptrs[i]);
	}
	uint8_t *want = local_bytes(rds[n].file, 0, rds[n].len);
	if (memcmp(want, host, rds[n].len)) {
		fprintf(stderr, "gpuread: host copy of file %zu differs\n",
			rds[n].file);
		exit(1);
	}
	sfs_client_dereg(mrs[n]);
	free(want);
	free(host);
	free(rds);
	free(mrs);
	free(ptrs);
	return total;
}

static uint64_t read_tensors(void)
{
	struct sfs_client_info info;
	struct sfs_client_tensor t;
	struct sfs_client_mr *mr;
	char err[512];
	uint64_t total = 0, at = 0;
	sfs_client_info(cl, &info);
	for (size_t i = 0; i < info.ntensors; i++) {
		sfs_client_tensor(cl, i, &t);
		total += t.len;
	}
	cu_ptr p = dev_alloc(total, 0);
	if (sfs_client_reg(cl, (void *)(uintptr_t)p, total ? total : 1, &mr,
			   err, sizeof(err))) {
		fprintf(stderr, "gpuread: register: %s\n", err);
		exit(1);
	}
	struct sfs_client_rd *rds = calloc(info.ntensors + 1, sizeof(*rds));
	for (size_t i = 0; i < info.ntensors; i++) {
		sfs_client_tensor(cl, i, &t);
		rds[i] = (struct sfs_client_rd){
			.file = t.file,
			.off = t.off,
			.len = t.len,
			.dst = (void *)(uintptr_t)(p + at),
			.mr = mr};
		at += t.len;
	}
	if (sfs_client_read(cl, rds, info.ntensors, err, sizeof(err))) {
		fprintf(stderr, "gpuread: %s\n", err);
		exit(1);
	}
	for (size_t i = 0; i < info.ntensors; i++)
		if (!same(rds[i].file, rds[i].off,
			  (cu_ptr)(uintptr_t)rds[i].dst, rds[i].len))
			exit(1);
	sfs_client_dereg(mr);
	cu.free(p);
	free(rds);
	return total;
}

static int wrong; /* a read answered 0 with wrong bytes (atomic) */

/* Every file into device memory of this thread's own, one batch: the
 * bytes of every read that answered 0 must be the file's. */
static void *check_thread(void *arg)
{
	struct sfs_client_info info;
	char err[512];
	long id = (long)arg;
	int rc0 = cu.push(ctx); /* current on this thread too */
	if (rc0)
		die("cuCtxPushCurrent", rc0);
	sfs_client_info(cl, &info);
	struct sfs_client_rd *rds = calloc(info.nfiles + 1, sizeof(*rds));
	struct sfs_client_mr **mrs = calloc(info.nfiles + 1, sizeof(*mrs));
	cu_ptr *ptrs = calloc(info.nfiles + 1, sizeof(*ptrs));
	size_t n = 0;
	for (size_t i = 0; i < info.nfiles; i++) {
		struct sfs_client_file f;
		sfs_client_file(cl, i, &f);
		if (!f.size)
			continue;
		ptrs[n] = dev_alloc(f.size, 0);
		if (sfs_client_reg(cl, (void *)(uintptr_t)ptrs[n], f.size,
				   &mrs[n], err, sizeof(err))) {
			printf("gpuread: thread %ld: register: %s\n", id, err);
			cu.free(ptrs[n]);
			continue;
		}
		rds[n] = (struct sfs_client_rd){
			.file = i,
			.len = f.size,
			.dst = (void *)(uintptr_t)ptrs[n],
			.mr = mrs[n]};
		n++;
	}
	err[0] = '\0';
	int rc = sfs_client_read(cl, rds, n, err, sizeof(err));
	size_t good = 0;
	for (size_t i = 0; i < n; i++) {
		if (!rds[i].status) {
			if (same(rds[i].file, 0, ptrs[i], rds[i].len))
				good++;
			else
				__atomic_store_n(&wrong, 1, __ATOMIC_SEQ_CST);
		}
		sfs_client_dereg(mrs[i]);
		cu.free(ptrs[i]);
	}
	printf("gpuread: thread %ld: rc %d, %zu of %zu reads exact%s%s\n", id,
	       rc, good, n, rc ? ", the rest failed: " : "", rc ? err : "");
	free(rds);
	free(mrs);
	free(ptrs);
	return NULL;
}

static void read_check(int threads)
{
	pthread_t t[16];
	if (threads < 1 || threads > 16)
		die("check: 1 to 16 threads", threads);
	for (long i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, check_thread, (void *)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	if (wrong)
		die("check: a read that answered 0 holds wrong bytes", 0);
}

static int all_are(cu_ptr p, size_t len, unsigned char v)
{
	uint8_t *h = dev_copy_back(p, len);
	size_t i = 0;
	while (i < len && h[i] == v)
		i++;
	free(h);
	return i == len;
}

static uint64_t read_errors(void)
{
	struct sfs_client_file f;
	struct sfs_client_mr *mr;
	char err[512];
	size_t file = 0;
	for (;; file++) {
		if (sfs_client_file(cl, file, &f))
			die("no file of 4 KiB or more", 0);
		if (f.size >= 4096)
			break;
	}
	size_t len = 4096;
	cu_ptr p = dev_alloc(2 * len, 0x5a);
	/* A registration past its allocation's end is refused. */
	int rrc = sfs_client_reg(cl, (void *)(uintptr_t)p, 2 * len + 1, &mr,
				 err, sizeof(err));
	if (rrc != -EINVAL || !strstr(err, "run past their CUDA allocation")) {
		fprintf(stderr,
			"gpuread: errors: register past the end: %d: %s\n", rrc,
			err);
		exit(1);
	}
	printf("gpuread: refused: %s\n", err);
	if (sfs_client_reg(cl, (void *)(uintptr_t)p, len, &mr, err,
			   sizeof(err)))
		die(err, 0);
	struct sfs_client_rd rds[3] = {
		/* one byte past the registration */
		{.file = file,
		 .off = 0,
		 .len = len,
		 .dst = (void *)(uintptr_t)(p + 1),
		 .mr = mr},
		/* past the file's end */
		{.file = file,
		 .off = f.size - 100,
		 .len = 200,
		 .dst = (void *)(uintptr_t)p,
		 .mr = mr},
		/* good */
		{.file = file,
		 .off = 0,
		 .len = 1000,
		 .dst = (void *)(uintptr_t)(p + 2000),
		 .mr = mr},
	};
	int rc = sfs_client_read(cl, rds, 3, err, sizeof(err));
	if (rc != -EINVAL || rds[0].status != -EINVAL ||
	    rds[1].status != -EINVAL || rds[2].status != 0 ||
	    !strstr(err, "read 0: ") ||
	    !strstr(err, "outside the file or the registration")) {
		fprintf(stderr,
			"gpuread: errors: rc %d, statuses %d %d %d: %s\n", rc,
			rds[0].status, rds[1].status, rds[2].status, err);
		exit(1);
	}
	printf("gpuread: refused: %s\n", err);
	if (!all_are(p, 2000, 0x5a) || !all_are(p + 3000, 2 * len - 3000, 0x5a))
		die("a refused read wrote into device memory", 0);
	if (!same(file, 0, p + 2000, 1000))
		exit(1);
	sfs_client_dereg(mr);
	cu.free(p);
	return 1000;
}

static uint64_t read_corrupt(const char *path, uint64_t off)
{
	struct sfs_client_file f;
	struct sfs_client_mr *mr;
	char err[512];
	size_t file = 0;
	while (!sfs_client_file(cl, file, &f) && strcmp(f.path, path))
		file++;
	if (sfs_client_file(cl, file, &f) || off >= f.size)
		die("corrupt: no such file or offset", 0);
	uint8_t *want = local_bytes(file, 0, f.size);
	/* What was there before the read: neither the file's byte at
	 * OFFSET nor the seed's corruption of it (the seed flips every bit:
	 * ^ 0xff), so that either reaching the device shows. */
	unsigned char fill = (unsigned char)(want[off] ^ 0x5a),
		      flipped = (unsigned char)(want[off] ^ 0xff);
	/* The whole file (refused), and beside it, its bytes before the
	 * flipped block's megabyte (served). */
	uint64_t good = off & ~((1ull << 20) - 1);
	cu_ptr p = dev_alloc(f.size + good, fill);
	if (sfs_client_reg(cl, (void *)(uintptr_t)p, f.size + good, &mr, err,
			   sizeof(err)))
		die(err, 0);
	struct sfs_client_rd rds[2] = {{.file = file,
					.len = f.size,
					.dst = (void *)(uintptr_t)p,
					.mr = mr},
				       {.file = file,
					.len = good,
					.dst = (void *)(uintptr_t)(p + f.size),
					.mr = mr}};
	int rc = sfs_client_read(cl, rds, good ? 2 : 1, err, sizeof(err));
	if (rc != -EBADMSG || rds[1].status ||
	    !strstr(err, "do not match the seed's checksum")) {
		fprintf(stderr, "gpuread: corrupt: rc %d, %d: %s\n", rc,
			rds[1].status, err);
		exit(1);
	}
	if (good && !same(file, 0, p + f.size, good))
		die("corrupt: the good read beside it differs", 0);
	printf("gpuread: refused: %s\n", err);
	uint8_t *got = dev_copy_back(p, f.size);
	uint64_t placed = 0;
	for (uint64_t i = 0; i < f.size; i++) {
		if (got[i] != want[i] && got[i] != fill) {
			fprintf(stderr,
				"gpuread: corrupt: device byte %" PRIu64
				" is neither the file's nor what was there\n",
				i);
			exit(1);
		}
		placed += got[i] == want[i] && want[i] != fill;
	}
	if (got[off] == flipped)
		die("corrupt: the flipped byte reached the device", 0);
	if (got[off] != fill)
		die("corrupt: byte OFFSET is not what was there before", 0);
	printf("gpuread: corrupt: %" PRIu64 " of %" PRIu64
	       " bytes of the refused read placed, none of the flipped "
	       "block; the %" PRIu64 " bytes before it, read beside it, "
	       "exact\n",
	       placed, (uint64_t)f.size, good);
	sfs_client_dereg(mr);
	cu.free(p);
	free(got);
	free(want);
	return f.size + good;
}

int main(int argc, char **argv)
{
	char err[512], mock[512];
	if (argc == 2 && !strcmp(argv[1], "devices")) {
		int n = sfs_client_cuda_devices(err, sizeof(err));
		if (n > 0) {
			printf("gpuread: %d CUDA devices\n", n);
			return 0;
		}
		fprintf(stderr, "gpuread: no device (%s): %s\n", strerror(-n),
			err);
		return 3;
	}
	if (argc < 5) {
		fprintf(stderr, "usage: gpuread devices | SEEDS MODEL LOCALDIR "
				"files|tensors|errors|corrupt FILE OFFSET\n");
		return 2;
	}
	local = argv[3];
	if (strcmp(argv[4], "protnone"))
		cuda_setup();
	struct sfs_client_cfg cfg = {.seeds = argv[1]};
	const char *tmo = getenv("GPUREAD_TIMEOUT_MS"),
		   *go = getenv("GPUREAD_GO");
	if (tmo)
		cfg.timeout_ms = (unsigned int)strtoul(tmo, NULL, 10);
	int rc = sfs_client_open(&cfg, argv[2], &cl, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "gpuread: %s\n", err);
		return 1;
	}
	const char *mode = argv[4];
	if (go) {
		struct stat st;
		printf("gpuread: opened\n");
		fflush(stdout);
		for (int i = 0; i < 3000 && stat(go, &st); i++)
			usleep(10000);
	}
	if (!strcmp(mode, "protnone")) {
		struct sfs_client_mr *mr = NULL;
		size_t len = 1 << 20;
		void *p = mmap(NULL, len, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
			       0);
		if (p == MAP_FAILED)
			die("mmap", -errno);
		rc = sfs_client_reg(cl, p, len, &mr, err, sizeof(err));
		if (rc != -EFAULT || mr || !strstr(err, "not host memory")) {
			fprintf(stderr, "gpuread: protnone: rc %d: %s\n", rc,
				err);
			return 1;
		}
		printf("gpuread: protnone refused: %s\n", err);
		sfs_client_close(cl);
		return 0;
	}
	if (!strcmp(mode, "check")) {
		read_check(argc > 5 ? atoi(argv[5]) : 1);
		sfs_client_close(cl);
		printf("gpuread: check done\n");
		return 0;
	}
	double t0 = now();
	uint64_t bytes;
	if (!strcmp(mode, "files"))
		bytes = read_files();
	else if (!strcmp(mode, "tensors"))
		bytes = read_tensors();
	else if (!strcmp(mode, "errors"))
		bytes = read_errors();
	else if (!strcmp(mode, "corrupt") && argc == 7)
		bytes = read_corrupt(argv[5], strtoull(argv[6], NULL, 0));
	else
		die("unknown mode", 0);
	double s = now() - t0;
	mock_line(mock, sizeof(mock));
	printf("gpuread: %s ok %" PRIu64 " bytes in %.2f s (%.2f GB/s)%s\n",
	       mode, bytes, s, s > 0 ? (double)bytes / s / 1e9 : 0.0, mock);
	sfs_client_close(cl);
	/* Everything the client made with the driver is given back (the
	 * context this program retained is its own). */
	mock_line(mock, sizeof(mock));
	if (cu.stats && !strstr(mock, " 1 contexts retained, 0 ranges")) {
		fprintf(stderr, "gpuread: after close%s\n", mock);
		return 1;
	}
	return 0;
}
