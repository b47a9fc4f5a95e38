/* SPDX-License-Identifier: MIT */
#include "hmem.h"

#include <errno.h>
#include <stdio.h>

#ifndef SEEDFS_WITH_CUDA

int sfs_hmem_cuda_device(const void *ptr, int *dev, char *err, size_t errlen)
{
	(void)ptr;
	(void)dev;
	snprintf(err, errlen,
		 "this seedfs was built without CUDA support; build it with "
		 "cmake -DSEEDFS_CUDA=ON (needs cuda.h)");
	return -EOPNOTSUPP;
}

#else

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>

/* The driver API, looked up at run time: the binary runs without it. */
static struct {
	CUresult (*init)(unsigned int);
	CUresult (*attr)(void *, CUpointer_attribute, CUdeviceptr);
	char why[200];
} cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void cu_load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(cu.why, sizeof(cu.why), "dlopen libcuda.so.1: %s",
			 dlerror());
		return;
	}
	*(void **)&cu.init = dlsym(h, "cuInit");
	*(void **)&cu.attr = dlsym(h, "cuPointerGetAttribute");
	if (!cu.init || !cu.attr) {
		snprintf(cu.why, sizeof(cu.why),
			 "libcuda.so.1 lacks cuInit "
			 "or cuPointerGetAttribute");
		cu.attr = NULL;
	} else if (cu.init(0) != CUDA_SUCCESS) {
		snprintf(cu.why, sizeof(cu.why),
			 "cuInit failed: no usable "
			 "GPU");
		cu.attr = NULL;
	}
}

int sfs_hmem_cuda_device(const void *ptr, int *dev, char *err, size_t errlen)
{
	unsigned int type = 0;
	int ordinal = -1;

	pthread_once(&cu_once, cu_load);
	if (!cu.attr) {
		snprintf(err, errlen, "no CUDA driver (%s)", cu.why);
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
	*dev = ordinal;
	return 0;
}

#endif
