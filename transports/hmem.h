/* SPDX-License-Identifier: MIT */
/*
 * hmem.h - GPU memory: which CUDA device a pointer belongs to.  Built
 * for real with -DSEEDFS_CUDA=ON (needs cuda.h at build time; the driver,
 * libcuda.so.1, is opened at run time).  Only transports/ includes this.
 */
#ifndef SFS_HMEM_H
#define SFS_HMEM_H

#include <stddef.h>

/*
 * sfs_hmem_cuda_device - *dev = the CUDA device ordinal of device memory
 * @ptr.  Returns 0; -EOPNOTSUPP in a build without CUDA; -ENODEV when
 * no CUDA driver can be loaded; -EINVAL when @ptr is not CUDA device
 * memory.  One line in @err on failure.  Thread safe.
 */
int sfs_hmem_cuda_device(const void *ptr, int *dev, char *err, size_t errlen);

#endif /* SFS_HMEM_H */
