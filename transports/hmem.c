/* SPDX-License-Identifier: MIT */
#include "hmem.h"

#include <errno.h>
#include <stdio.h>

#ifndef SEEDFS_WITH_CUDA

#define NO_CUDA                                                                \
	"this seedfs was built without CUDA support; build it with "           \
	"cmake -DSEEDFS_CUDA=ON (needs cuda.h)"

int sfs_hmem_cuda_devices(char *err, size_t errlen)
{
	snprintf(err, errlen, NO_CUDA);
	return -EOPNOTSUPP;
}

int sfs_hmem_cuda_device(const void *ptr, size_t len, int *dev, char *err,
			 size_t errlen)
{
	snprintf(err, errlen, NO_CUDA);
	return -EOPNOTSUPP;
}

int sfs_hmem_stage_new(int dev, size_t part_len, unsigned int nparts,
		       unsigned int timeout_ms, struct sfs_hmem_stage **out,
		       char *err, size_t errlen)
{
	*out = NULL;
	snprintf(err, errlen, NO_CUDA);
	return -EOPNOTSUPP;
}

void *sfs_hmem_stage_base(struct sfs_hmem_stage *s)
{
	return NULL;
}

int sfs_hmem_stage_copy(struct sfs_hmem_stage *s, void *dst, const void *src,
			size_t len, char *err, size_t errlen)
{
	snprintf(err, errlen, NO_CUDA);
	return -EOPNOTSUPP;
}

int sfs_hmem_stage_mark(struct sfs_hmem_stage *s, unsigned int part, char *err,
			size_t errlen)
{
	snprintf(err, errlen, NO_CUDA);
	return -EOPNOTSUPP;
}

int sfs_hmem_stage_wait(struct sfs_hmem_stage *s, unsigned int part, char *err,
			size_t errlen)
{
	snprintf(err, errlen, NO_CUDA);
	return -EOPNOTSUPP;
}

int sfs_hmem_stage_sync(struct sfs_hmem_stage *s, char *err, size_t errlen)
{
	snprintf(err, errlen, NO_CUDA);
	return -EOPNOTSUPP;
}

void sfs_hmem_stage_free(struct sfs_hmem_stage *s)
{
}

#else

#include "common/log.h"
#include "common/util.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* The driver API, looked up at run time: the binary runs without it.
 * The names are the driver's exported ones (cuda.h maps the plain names
 * to these _v2 symbols). */
static struct cu_api {
	int ok; /* loaded and cuInit done */
	CUresult (*init)(unsigned int);
	CUresult (*count)(int *);
	CUresult (*errstr)(CUresult, const char **);
	CUresult (*attr)(void *, CUpointer_attribute, CUdeviceptr);
	CUresult (*dev_get)(CUdevice *, int);
	CUresult (*ctx_retain)(CUcontext *, CUdevice);
	CUresult (*ctx_release)(CUdevice);
	CUresult (*ctx_push)(CUcontext);
	CUresult (*ctx_pop)(CUcontext *);
	CUresult (*stream_new)(CUstream *, unsigned int);
	CUresult (*stream_free)(CUstream);
	CUresult (*event_new)(CUevent *, unsigned int);
	CUresult (*event_free)(CUevent);
	CUresult (*event_record)(CUevent, CUstream);
	CUresult (*event_query)(CUevent);
	CUresult (*stream_query)(CUstream);
	CUresult (*addr_range)(CUdeviceptr *, size_t *, CUdeviceptr);
	CUresult (*host_reg)(void *, size_t, unsigned int);
	CUresult (*host_unreg)(void *);
	CUresult (*htod)(CUdeviceptr, const void *, size_t, CUstream);
	char why[256];
} cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static const char *cu_str(CUresult r)
{
	const char *s = NULL;
	if (!cu.errstr || cu.errstr(r, &s) != CUDA_SUCCESS || !s)
		return "unknown CUDA error";
	return s;
}

static void cu_load(void)
{
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
#define SYM(f, n)                                                              \
	{                                                                      \
		n, offsetof(struct cu_api, f)                                  \
	}
		SYM(init, "cuInit"),
		SYM(count, "cuDeviceGetCount"),
		SYM(errstr, "cuGetErrorString"),
		SYM(attr, "cuPointerGetAttribute"),
		SYM(dev_get, "cuDeviceGet"),
		SYM(ctx_retain, "cuDevicePrimaryCtxRetain"),
		SYM(ctx_release, "cuDevicePrimaryCtxRelease_v2"),
		SYM(ctx_push, "cuCtxPushCurrent_v2"),
		SYM(ctx_pop, "cuCtxPopCurrent_v2"),
		SYM(stream_new, "cuStreamCreate"),
		SYM(stream_free, "cuStreamDestroy_v2"),
		SYM(event_new, "cuEventCreate"),
		SYM(event_free, "cuEventDestroy_v2"),
		SYM(event_record, "cuEventRecord"),
		SYM(event_query, "cuEventQuery"),
		SYM(stream_query, "cuStreamQuery"),
		SYM(addr_range, "cuMemGetAddressRange_v2"),
		SYM(host_reg, "cuMemHostRegister_v2"),
		SYM(host_unreg, "cuMemHostUnregister"),
		SYM(htod, "cuMemcpyHtoDAsync_v2"),
#undef SYM
	};
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(cu.why, sizeof(cu.why),
			 "no CUDA driver (dlopen libcuda.so.1: %s)", dlerror());
		return;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(h, syms[i].name);
		if (!f) {
			snprintf(cu.why, sizeof(cu.why),
				 "no CUDA driver (libcuda.so.1 lacks %s)",
				 syms[i].name);
			return;
		}
		*(void **)((char *)&cu + syms[i].off) = f;
	}
	CUresult r = cu.init(0);
	if (r != CUDA_SUCCESS) {
		snprintf(cu.why, sizeof(cu.why),
			 "no usable GPU (cuInit: %s, CUDA error %d)", cu_str(r),
			 (int)r);
		return;
	}
	cu.ok = 1;
}

int sfs_hmem_cuda_devices(char *err, size_t errlen)
{
	int n = 0;
	CUresult r;

	pthread_once(&cu_once, cu_load);
	if (!cu.ok) {
		snprintf(err, errlen, "%s", cu.why);
		return -ENODEV;
	}
	if ((r = cu.count(&n)) != CUDA_SUCCESS || n <= 0) {
		snprintf(err, errlen, "no usable GPU (cuDeviceGetCount: %s)",
			 r != CUDA_SUCCESS ? cu_str(r) : "0 devices");
		return -ENODEV;
	}
	return n;
}

int sfs_hmem_cuda_device(const void *ptr, size_t len, int *dev, char *err,
			 size_t errlen)
{
	unsigned int type = 0;
	int ordinal = -1;
	CUdeviceptr base = 0;
	size_t size = 0;

	/* Device memory exists only where the driver is loaded already:
	 * a program of host memory alone never loads (nor initializes) it,
	 * and its children can still use CUDA. */
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!h) {
		snprintf(err, errlen, "no CUDA driver loaded in this process");
		return -ENODEV;
	}
	dlclose(h);
	pthread_once(&cu_once, cu_load);
	if (!cu.ok) {
		snprintf(err, errlen, "%s", cu.why);
		return -ENODEV;
	}
	if (cu.attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		    (CUdeviceptr)ptr) != CUDA_SUCCESS ||
	    type != CU_MEMORYTYPE_DEVICE ||
	    cu.attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		    (CUdeviceptr)ptr) != CUDA_SUCCESS) {
		snprintf(err, errlen, "%p is not CUDA device memory", ptr);
		return -EINVAL;
	}
	CUresult r = cu.addr_range(&base, &size, (CUdeviceptr)ptr);
	if (r != CUDA_SUCCESS || (CUdeviceptr)ptr - base > size ||
	    len > size - ((CUdeviceptr)ptr - base)) {
		snprintf(err, errlen,
			 "%zu bytes at %p run past their CUDA allocation (%zu "
			 "bytes at 0x%llx)%s%s",
			 len, ptr, size, (unsigned long long)base,
			 r != CUDA_SUCCESS ? ": " : "",
			 r != CUDA_SUCCESS ? cu_str(r) : "");
		return -ERANGE;
	}
	*dev = ordinal;
	return 0;
}

#define STAGE_PARTS_MAX 8

struct sfs_hmem_stage {
	CUdevice dev;
	CUcontext ctx; /* the device's primary context, retained */
	CUstream stream;
	CUevent ev[STAGE_PARTS_MAX];
	int marked[STAGE_PARTS_MAX];
	unsigned int nparts;
	void *base;
	size_t len;
	unsigned int timeout_ms; /* every wait's bound */
	int registered;		 /* base is page-locked (cuMemHostRegister) */
};

/* rc = 0 after @call ran in the stage's context; -EIO and a line
 * naming @what when the driver refuses. */
#define CU_IN(rc, s, what, call, err, errlen)                                  \
	do {                                                                   \
		CUcontext old_;                                                \
		CUresult r_ = cu.ctx_push((s)->ctx);                           \
		if (r_ == CUDA_SUCCESS) {                                      \
			r_ = (call);                                           \
			cu.ctx_pop(&old_);                                     \
		}                                                              \
		if (r_ != CUDA_SUCCESS)                                        \
			snprintf(err, errlen, "CUDA device %d: %s: %s",        \
				 (int)(s)->dev, what, cu_str(r_));             \
		rc = r_ == CUDA_SUCCESS ? 0 : -EIO;                            \
	} while (0)

static int stage_release(struct sfs_hmem_stage *s);

int sfs_hmem_stage_new(int dev, size_t part_len, unsigned int nparts,
		       unsigned int timeout_ms, struct sfs_hmem_stage **out,
		       char *err, size_t errlen)
{
	struct sfs_hmem_stage *s;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	int rc = -EIO;

	*out = NULL;
	pthread_once(&cu_once, cu_load);
	if (!cu.ok) {
		snprintf(err, errlen, "%s", cu.why);
		return -ENODEV;
	}
	if (!nparts || nparts > STAGE_PARTS_MAX || !part_len ||
	    part_len % page) {
		snprintf(err, errlen, "stage: 1 to %d parts of whole pages",
			 STAGE_PARTS_MAX);
		return -EINVAL;
	}
	if (!(s = calloc(1, sizeof(*s)))) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->nparts = nparts;
	s->len = part_len * nparts;
	s->timeout_ms = timeout_ms ? timeout_ms : 10000;
	CUresult r = cu.dev_get(&s->dev, dev);
	if (r == CUDA_SUCCESS)
		r = cu.ctx_retain(&s->ctx, s->dev);
	if (r != CUDA_SUCCESS) {
		snprintf(err, errlen, "CUDA device %d: its primary context: %s",
			 dev, cu_str(r));
		free(s);
		return -EIO;
	}
	if (posix_memalign(&s->base, page, s->len)) {
		snprintf(err, errlen, "out of memory (a stage of %zu bytes)",
			 s->len);
		rc = -ENOMEM;
		goto err_ctx;
	}
	CU_IN(rc, s, "cuStreamCreate",
	      cu.stream_new(&s->stream, CU_STREAM_NON_BLOCKING), err, errlen);
	if (rc)
		goto err_mem;
	for (unsigned int k = 0; k < nparts && !rc; k++)
		CU_IN(rc, s, "cuEventCreate",
		      cu.event_new(&s->ev[k], CU_EVENT_DISABLE_TIMING), err,
		      errlen);
	if (rc)
		goto err_events;
	/* Page-locked: the copies are asynchronous and at the bus's rate.
	 * Portable: usable from any context.  Without it (a locked-memory
	 * limit) copies still work, the driver staging them itself. */
	CU_IN(rc, s, "cuMemHostRegister",
	      cu.host_reg(s->base, s->len, CU_MEMHOSTREGISTER_PORTABLE), err,
	      errlen);
	if (rc)
		SFS_LOG(SFS_WARN, "hmem",
			"%s: copies from pageable memory, slower", err);
	s->registered = !rc;
	*out = s;
	return 0;

err_events:
	stage_release(s);
err_mem:
	free(s->base);
err_ctx:
	cu.ctx_release(s->dev);
	free(s);
	return rc;
}

/* Poll @ev (or, when NULL, the whole stream) until its work has ended:
 * 0, -ETIMEDOUT after the stage's timeout, or -EIO with the driver's
 * error.  Polled with sleeps growing to 1 ms, so no core spins. */
static int poll_done(struct sfs_hmem_stage *s, CUevent ev, char *err,
		     size_t errlen)
{
	const char *what = ev ? "cuEventQuery" : "cuStreamQuery";
	uint64_t deadline = sfs_now_ms() + s->timeout_ms;
	unsigned int nap_us = 20;
	CUresult r;
	CUcontext old;

	for (;;) {
		r = cu.ctx_push(s->ctx);
		if (r == CUDA_SUCCESS) {
			r = ev ? cu.event_query(ev)
			       : cu.stream_query(s->stream);
			cu.ctx_pop(&old);
		}
		if (r == CUDA_SUCCESS)
			return 0;
		if (r != CUDA_ERROR_NOT_READY) {
			snprintf(err, errlen, "CUDA device %d: %s: %s",
				 (int)s->dev, what, cu_str(r));
			return -EIO;
		}
		if (sfs_now_ms() >= deadline) {
			snprintf(err, errlen,
				 "CUDA device %d: copies to it not done after "
				 "%u ms",
				 (int)s->dev, s->timeout_ms);
			return -ETIMEDOUT;
		}
		usleep(nap_us);
		if (nap_us < 1000)
			nap_us *= 2;
	}
}

/* The stream and events (after their copies, waited for within the
 * timeout), and the page lock; logs what the driver refuses and goes
 * on.  0, or -EBUSY when copies did not end: the host memory must then
 * stay. */
static int stage_release(struct sfs_hmem_stage *s)
{
	char e[256];
	int rc, busy = 0;

	if (s->stream && (rc = poll_done(s, NULL, e, sizeof(e)))) {
		SFS_LOG(SFS_WARN, "hmem", "%s", e);
		busy = rc == -ETIMEDOUT;
	}
	for (unsigned int k = 0; k < s->nparts; k++) {
		if (!s->ev[k])
			continue;
		CU_IN(rc, s, "cuEventDestroy", cu.event_free(s->ev[k]), e,
		      sizeof(e));
		if (rc)
			SFS_LOG(SFS_WARN, "hmem", "%s", e);
		s->ev[k] = NULL;
	}
	/* The driver releases a stream once its work has ended. */
	if (s->stream) {
		CU_IN(rc, s, "cuStreamDestroy", cu.stream_free(s->stream), e,
		      sizeof(e));
		if (rc)
			SFS_LOG(SFS_WARN, "hmem", "%s", e);
		s->stream = NULL;
	}
	if (s->registered && !busy) {
		CU_IN(rc, s, "cuMemHostUnregister", cu.host_unreg(s->base), e,
		      sizeof(e));
		if (rc)
			SFS_LOG(SFS_WARN, "hmem", "%s", e);
		s->registered = 0;
	}
	return busy ? -EBUSY : 0;
}

void *sfs_hmem_stage_base(struct sfs_hmem_stage *s)
{
	return s->base;
}

int sfs_hmem_stage_copy(struct sfs_hmem_stage *s, void *dst, const void *src,
			size_t len, char *err, size_t errlen)
{
	const char *b = s->base;
	if ((const char *)src < b || len > s->len ||
	    (size_t)((const char *)src - b) > s->len - len) {
		snprintf(err, errlen, "stage copy: source outside the stage");
		return -EINVAL;
	}
	int rc;
	CU_IN(rc, s, "cuMemcpyHtoDAsync",
	      cu.htod((CUdeviceptr)dst, src, len, s->stream), err, errlen);
	return rc;
}

int sfs_hmem_stage_mark(struct sfs_hmem_stage *s, unsigned int part, char *err,
			size_t errlen)
{
	if (part >= s->nparts) {
		snprintf(err, errlen, "stage: no part %u", part);
		return -EINVAL;
	}
	int rc;
	CU_IN(rc, s, "cuEventRecord", cu.event_record(s->ev[part], s->stream),
	      err, errlen);
	s->marked[part] = !rc;
	return rc;
}

int sfs_hmem_stage_wait(struct sfs_hmem_stage *s, unsigned int part, char *err,
			size_t errlen)
{
	if (part >= s->nparts) {
		snprintf(err, errlen, "stage: no part %u", part);
		return -EINVAL;
	}
	if (!s->marked[part])
		return 0;
	int rc = poll_done(s, s->ev[part], err, errlen);
	if (!rc)
		s->marked[part] = 0;
	return rc;
}

int sfs_hmem_stage_sync(struct sfs_hmem_stage *s, char *err, size_t errlen)
{
	int rc = poll_done(s, NULL, err, errlen);
	if (!rc)
		for (unsigned int k = 0; k < s->nparts; k++)
			s->marked[k] = 0;
	return rc;
}

void sfs_hmem_stage_free(struct sfs_hmem_stage *s)
{
	if (!s)
		return;
	if (stage_release(s)) {
		/* The device may still read it: left, not reused. */
		SFS_LOG(SFS_WARN, "hmem",
			"CUDA device %d: a stage of %zu bytes is left allocated: "
			"its copies did not end",
			(int)s->dev, s->len);
	} else {
		free(s->base);
	}
	cu.ctx_release(s->dev);
	free(s);
}

#endif
