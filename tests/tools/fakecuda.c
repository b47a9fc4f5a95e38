/* SPDX-License-Identifier: MIT */
/*
 * fakecuda.c - a MOCK CUDA driver (libcuda.so.1) for the GPU tests: this
 * machine has no GPU, so the driver API calls seedfs makes are answered
 * here, strictly enough to catch what a real device would punish.
 *
 * - "Device memory" (cuMemAlloc) is mapped PROT_NONE: a host load or
 *   store into it (a memcpy, a checksum, a transport's write) faults.
 *   Only this driver's copies open it, for the copy's length.
 * - cuMemcpyHtoDAsync from page-locked memory (cuMemHostRegister) is
 *   only queued: the bytes are taken at cuEventSynchronize or
 *   cuStreamSynchronize, so a stage written again before its copies
 *   were waited for puts wrong bytes on the device.  From pageable
 *   memory it copies at once, as the real driver does.
 * - Calls that need a context fail (CUDA_ERROR_INVALID_CONTEXT) unless
 *   one is current (cuCtxPushCurrent).
 * - $FAKECUDA_DEVICES devices (default 1; 0: cuInit answers
 *   CUDA_ERROR_NO_DEVICE, as a host with a driver and no GPU).
 * - $FAKECUDA_FAIL=NAME:N[:M][,...]: the Nth call of driver function
 *   NAME (cuEventQuery, cuEventRecord, cuMemcpyHtoDAsync_v2,
 *   cuStreamQuery, cuMemHostRegister_v2) and the M-1 after it (M 0: every
 *   one after it) fail with CUDA_ERROR_UNKNOWN, doing nothing.
 * - $FAKECUDA_HANG set: copies never end (queries answer
 *   CUDA_ERROR_NOT_READY), as a hung device.
 * fakecuda_stats gives the counts a test checks.
 */
#include <cuda.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_ALLOCS 1024
#define MAX_PINS 64

struct op {
	uintptr_t dst;
	const void *src;
	size_t len;
};

struct CUstream_st {
	struct op *ops;
	size_t n, cap, done; /* ops [done, n) are pending */
};

struct CUevent_st {
	struct CUstream_st *s;
	size_t pos;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int ndev = -1; /* after cuInit; atomic (devices()) */
static struct {
	uintptr_t base;
	size_t len, maplen;
} allocs[MAX_ALLOCS];
static struct {
	uintptr_t base;
	size_t len;
} pins[MAX_PINS];
static uint64_t st_bytes, st_copies, st_pageable, st_pending_max;
static int st_retained;
static __thread int depth; /* contexts pushed on this thread */
static int ctx_tag;
static struct CUstream_st *streams[64]; /* live ones; protected by mu */

/* fakecuda_stats - bytes and copies host to device, copies from
 * pageable memory, the most copies ever pending, primary contexts
 * retained now, ranges page-locked now. */
void fakecuda_stats(uint64_t *bytes, uint64_t *copies, uint64_t *pageable,
		    uint64_t *pending_max, int *retained, int *pinned);
void fakecuda_stats(uint64_t *bytes, uint64_t *copies, uint64_t *pageable,
		    uint64_t *pending_max, int *retained, int *pinned)
{
	pthread_mutex_lock(&mu);
	*bytes = st_bytes;
	*copies = st_copies;
	*pageable = st_pageable;
	*pending_max = st_pending_max;
	*retained = st_retained;
	*pinned = 0;
	for (int i = 0; i < MAX_PINS; i++)
		*pinned += pins[i].len != 0;
	pthread_mutex_unlock(&mu);
}

/* Should this call of @name fail ($FAKECUDA_FAIL)?  mu held. */
static int inject(const char *name)
{
	static struct {
		char name[40];
		unsigned long calls;
	} seen[16];
	const char *spec = getenv("FAKECUDA_FAIL");
	unsigned long n = 0;
	int i;

	if (!spec)
		return 0;
	for (i = 0; i < 16 && seen[i].name[0]; i++)
		if (!strcmp(seen[i].name, name))
			break;
	if (i == 16)
		return 0;
	if (!seen[i].name[0])
		snprintf(seen[i].name, sizeof(seen[i].name), "%s", name);
	n = ++seen[i].calls;
	size_t len = strlen(name);
	for (const char *p = spec; p && *p;
	     p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
		if (strncmp(p, name, len) || p[len] != ':')
			continue;
		char *end;
		unsigned long first = strtoul(p + len + 1, &end, 10), many = 1;
		if (*end == ':')
			many = strtoul(end + 1, NULL, 10);
		if (n >= first && (many == 0 || n < first + many))
			return 1;
	}
	return 0;
}

static int hung(void)
{
	return getenv("FAKECUDA_HANG") != NULL;
}

static int alloc_of(uintptr_t p, size_t len)
{
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].len && p >= allocs[i].base &&
		    p - allocs[i].base <= allocs[i].len &&
		    len <= allocs[i].len - (p - allocs[i].base))
			return i;
	return -1;
}

static int pin_of(const void *q, size_t len)
{
	uintptr_t p = (uintptr_t)q;
	for (int i = 0; i < MAX_PINS; i++)
		if (pins[i].len && p >= pins[i].base &&
		    p - pins[i].base <= pins[i].len &&
		    len <= pins[i].len - (p - pins[i].base))
			return i;
	return -1;
}

/* Open device memory [p, p+len) of allocation @a for @prot, or close it
 * again (PROT_NONE).  Whole pages. */
static void open_dev(int a, uintptr_t p, size_t len, int prot)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = p & ~(pg - 1), hi = (p + len + pg - 1) & ~(pg - 1);
	(void)a;
	if (hi > lo && mprotect((void *)lo, hi - lo, prot)) {
		perror("fakecuda: mprotect");
		abort();
	}
}

static void run(struct op *o)
{
	int a = alloc_of(o->dst, o->len);
	if (a < 0) {
		fprintf(stderr, "fakecuda: a queued copy's device memory was "
				"freed before the copy ran\n");
		abort();
	}
	open_dev(a, o->dst, o->len, PROT_READ | PROT_WRITE);
	memcpy((void *)o->dst, o->src, o->len);
	open_dev(a, o->dst, o->len, PROT_NONE);
	st_bytes += o->len;
	st_copies++;
}

static void run_until(struct CUstream_st *s, size_t pos)
{
	while (s->done < pos && s->done < s->n)
		run(&s->ops[s->done++]);
}

/* The devices cuInit found, -1 before it: read on any thread. */
static int devices(void)
{
	return __atomic_load_n(&ndev, __ATOMIC_ACQUIRE);
}

static CUresult need_ctx(void)
{
	if (devices() < 0)
		return CUDA_ERROR_NOT_INITIALIZED;
	return depth > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuInit(unsigned int flags)
{
	const char *e = getenv("FAKECUDA_DEVICES");
	int n = e ? atoi(e) : 1;
	__atomic_store_n(&ndev, n, __ATOMIC_RELEASE);
	(void)flags;
	return n > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

CUresult cuDeviceGetCount(int *n)
{
	if (devices() < 0)
		return CUDA_ERROR_NOT_INITIALIZED;
	*n = devices();
	return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult r, const char **s)
{
	switch (r) {
	case CUDA_SUCCESS:
		*s = "no error";
		break;
	case CUDA_ERROR_INVALID_VALUE:
		*s = "invalid argument";
		break;
	case CUDA_ERROR_NOT_INITIALIZED:
		*s = "initialization error";
		break;
	case CUDA_ERROR_NO_DEVICE:
		*s = "no CUDA-capable device is detected (mock driver)";
		break;
	case CUDA_ERROR_INVALID_DEVICE:
		*s = "invalid device ordinal";
		break;
	case CUDA_ERROR_INVALID_CONTEXT:
		*s = "invalid device context";
		break;
	case CUDA_ERROR_UNKNOWN:
		*s = "unknown error (mock driver: injected)";
		break;
	default:
		*s = "mock CUDA error";
	}
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (devices() < 0)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (ordinal < 0 || ordinal >= devices())
		return CUDA_ERROR_INVALID_DEVICE;
	*d = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	if (devices() < 0)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (d < 0 || d >= devices())
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	st_retained++;
	pthread_mutex_unlock(&mu);
	*c = (CUcontext)&ctx_tag;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice d)
{
	(void)d;
	pthread_mutex_lock(&mu);
	st_retained--;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext c)
{
	if (c != (CUcontext)&ctx_tag)
		return CUDA_ERROR_INVALID_CONTEXT;
	depth++;
	return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *c)
{
	if (depth <= 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	depth--;
	if (c)
		*c = (CUcontext)&ctx_tag;
	return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
	CUresult r = need_ctx();
	(void)flags;
	if (r)
		return r;
	*s = calloc(1, sizeof(**s));
	if (!*s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&mu);
	r = CUDA_ERROR_OUT_OF_MEMORY;
	for (int i = 0; i < 64; i++)
		if (!streams[i]) {
			streams[i] = *s;
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&mu);
	if (r)
		free(*s);
	return r;
}

CUresult cuStreamSynchronize(CUstream s)
{
	CUresult r = need_ctx();
	if (r)
		return r;
	pthread_mutex_lock(&mu);
	run_until(s, s->n);
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream s)
{
	CUresult r = need_ctx();
	if (r)
		return r;
	pthread_mutex_lock(&mu);
	if (!hung()) /* a hung device never does them */
		run_until(s, s->n);
	for (int i = 0; i < 64; i++)
		if (streams[i] == s)
			streams[i] = NULL;
	pthread_mutex_unlock(&mu);
	free(s->ops);
	free(s);
	return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
	CUresult r = need_ctx();
	(void)flags;
	if (r)
		return r;
	*e = calloc(1, sizeof(**e));
	return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuEventDestroy(CUevent e)
{
	CUresult r = need_ctx();
	if (r)
		return r;
	free(e);
	return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream s)
{
	CUresult r = need_ctx();
	if (r)
		return r;
	pthread_mutex_lock(&mu);
	if (inject("cuEventRecord")) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_UNKNOWN;
	}
	e->s = s;
	e->pos = s->n;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent e)
{
	CUresult r = need_ctx();
	if (r)
		return r;
	pthread_mutex_lock(&mu);
	if (e->s)
		run_until(e->s, e->pos);
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent e)
{
	CUresult r = need_ctx();
	if (r)
		return r;
	pthread_mutex_lock(&mu);
	if (inject("cuEventQuery"))
		r = CUDA_ERROR_UNKNOWN;
	else if (hung() && e->s && e->s->done < e->pos)
		r = CUDA_ERROR_NOT_READY;
	else if (e->s)
		run_until(e->s, e->pos);
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuStreamQuery(CUstream s)
{
	CUresult r = need_ctx();
	if (r)
		return r;
	pthread_mutex_lock(&mu);
	if (inject("cuStreamQuery"))
		r = CUDA_ERROR_UNKNOWN;
	else if (hung() && s->done < s->n)
		r = CUDA_ERROR_NOT_READY;
	else
		run_until(s, s->n);
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	CUresult r = CUDA_ERROR_NOT_FOUND;
	if (devices() < 0)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&mu);
	int a = alloc_of((uintptr_t)p, 0);
	if (a >= 0) {
		*base = (CUdeviceptr)allocs[a].base;
		*size = allocs[a].len;
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemHostRegister(void *p, size_t len, unsigned int flags)
{
	CUresult r = need_ctx();
	(void)flags;
	if (r)
		return r;
	pthread_mutex_lock(&mu);
	if (inject("cuMemHostRegister_v2")) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_UNKNOWN;
	}
	r = CUDA_ERROR_OUT_OF_MEMORY;
	for (int i = 0; i < MAX_PINS; i++)
		if (!pins[i].len) {
			pins[i].base = (uintptr_t)p;
			pins[i].len = len;
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemHostUnregister(void *p)
{
	CUresult r = need_ctx();
	if (r)
		return r;
	pthread_mutex_lock(&mu);
	r = CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < MAX_PINS; i++)
		if (pins[i].len && pins[i].base == (uintptr_t)p) {
			pins[i].len = 0;
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t len,
			   CUstream s)
{
	CUresult r = need_ctx();
	if (r)
		return r;
	pthread_mutex_lock(&mu);
	struct op o = {.dst = (uintptr_t)dst, .src = src, .len = len};
	if (inject("cuMemcpyHtoDAsync_v2")) {
		r = CUDA_ERROR_UNKNOWN;
	} else if (alloc_of(o.dst, len) < 0) {
		r = CUDA_ERROR_INVALID_VALUE;
	} else if (pin_of(src, len) < 0) {
		st_pageable++;
		run_until(s, s->n); /* pageable: in order, at once */
		run(&o);
	} else {
		if (s->n == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 64;
			struct op *ops = realloc(s->ops, cap * sizeof(*ops));
			if (!ops) {
				pthread_mutex_unlock(&mu);
				return CUDA_ERROR_OUT_OF_MEMORY;
			}
			s->ops = ops;
			s->cap = cap;
		}
		s->ops[s->n++] = o;
		if (s->n - s->done > st_pending_max)
			st_pending_max = s->n - s->done;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t len)
{
	CUresult r = need_ctx();
	if (r)
		return r;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t maplen = (len + pg - 1) / pg * pg;
	void *p = mmap(NULL, maplen ? maplen : pg, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&mu);
	r = CUDA_ERROR_OUT_OF_MEMORY;
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (!allocs[i].len) {
			allocs[i].base = (uintptr_t)p;
			allocs[i].len = len ? len : 1;
			allocs[i].maplen = maplen ? maplen : pg;
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&mu);
	if (r)
		munmap(p, maplen ? maplen : pg);
	else
		*dptr = (CUdeviceptr)(uintptr_t)p;
	return r;
}

/* As cudaFree, it waits for the device's work first (unless hung). */
CUresult cuMemFree(CUdeviceptr dptr)
{
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < 64 && !hung(); i++)
		if (streams[i])
			run_until(streams[i], streams[i]->n);
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].len && allocs[i].base == (uintptr_t)dptr) {
			munmap((void *)allocs[i].base, allocs[i].maplen);
			allocs[i].len = 0;
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&mu);
	return r;
}

/* Synchronous, and (as with a stream made CU_STREAM_NON_BLOCKING) not
 * waiting for copies queued on other streams. */
CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t len)
{
	CUresult r = need_ctx();
	if (r)
		return r;
	pthread_mutex_lock(&mu);
	int a = alloc_of((uintptr_t)src, len);
	if (a < 0) {
		r = CUDA_ERROR_INVALID_VALUE;
	} else {
		open_dev(a, (uintptr_t)src, len, PROT_READ);
		memcpy(dst, (const void *)(uintptr_t)src, len);
		open_dev(a, (uintptr_t)src, len, PROT_NONE);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemsetD8(CUdeviceptr dptr, unsigned char uc, size_t n)
{
	CUresult r = need_ctx();
	if (r)
		return r;
	pthread_mutex_lock(&mu);
	int a = alloc_of((uintptr_t)dptr, n);
	if (a < 0) {
		r = CUDA_ERROR_INVALID_VALUE;
	} else {
		open_dev(a, (uintptr_t)dptr, n, PROT_READ | PROT_WRITE);
		memset((void *)(uintptr_t)dptr, uc, n);
		open_dev(a, (uintptr_t)dptr, n, PROT_NONE);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr,
			       CUdeviceptr ptr)
{
	if (devices() < 0)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&mu);
	int dev = alloc_of((uintptr_t)ptr, 0) >= 0;
	int pinned = pin_of((const void *)(uintptr_t)ptr, 0) >= 0;
	pthread_mutex_unlock(&mu);
	if (!dev && !pinned)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data =
			dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = 0;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = (CUcontext)&ctx_tag;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}
