/* SPDX-License-Identifier: MIT */
/*
 * hmem.h - GPU memory: which CUDA device a pointer belongs to, and a
 * copy path into a device's memory through page-locked host buffers
 * (what the engine API's reads into device memory land in first, to be
 * verified on the host).  Built for real with -DSEEDFS_CUDA=ON (needs
 * cuda.h at build time); the driver, libcuda.so.1, is opened at run
 * time, so such a build runs on hosts without a GPU.  Included by
 * transports/ and lib/ only.
 */
#ifndef SFS_HMEM_H
#define SFS_HMEM_H

#include <stddef.h>

/*
 * sfs_hmem_cuda_devices - how many CUDA devices this process can use
 * (> 0).  Else -EOPNOTSUPP in a build without CUDA, -ENODEV when no
 * CUDA driver can be loaded or it finds no device, with one line in
 * @err saying which.  Thread safe.
 */
int sfs_hmem_cuda_devices(char *err, size_t errlen);

/*
 * sfs_hmem_cuda_device - *dev = the CUDA device ordinal of device memory
 * [@ptr, @ptr+@len).  Returns 0; -EOPNOTSUPP in a build without CUDA;
 * -ENODEV when no CUDA driver is loaded in this process (then no
 * memory of it is device memory: this never loads the driver itself);
 * -EINVAL when @ptr is not CUDA device memory (host memory, page-locked
 * or not); -ERANGE when it is, but the range runs past its allocation.
 * One line in @err on failure.  Thread safe.
 */
int sfs_hmem_cuda_device(const void *ptr, size_t len, int *dev, char *err,
			 size_t errlen);

/*
 * A stage: @nparts page-locked host buffers of @part_len bytes, one
 * after the other from sfs_hmem_stage_base, and a stream in device
 * @dev's primary context (the one cudaMalloc's memory belongs to) that
 * copies from them into that device's memory.  A part is written on the
 * host, its copies queued (sfs_hmem_stage_copy), marked
 * (sfs_hmem_stage_mark), and waited for (sfs_hmem_stage_wait) before
 * the host writes into it again.  One thread at a time uses a stage.
 *
 * Every wait is bounded by @timeout_ms (polling the driver, which then
 * spins no core): past it, -ETIMEDOUT, and the stage's copies are in an
 * unknown state (free it; it is freed only once they have ended).
 *
 * sfs_hmem_stage_new - *out [new].  Returns 0, -EOPNOTSUPP / -ENODEV
 * as above, -ENOMEM, or -EIO when the driver refuses (its error named
 * in @err).
 */
struct sfs_hmem_stage;
int sfs_hmem_stage_new(int dev, size_t part_len, unsigned int nparts,
		       unsigned int timeout_ms, struct sfs_hmem_stage **out,
		       char *err, size_t errlen);

/* sfs_hmem_stage_base - the first part's first byte [borrowed]. */
void *sfs_hmem_stage_base(struct sfs_hmem_stage *s);

/*
 * sfs_hmem_stage_copy - queue a copy of @len bytes at @src (inside the
 * stage's parts) to device memory @dst.  Returns 0 or -EIO with the
 * driver's error in @err.
 */
int sfs_hmem_stage_copy(struct sfs_hmem_stage *s, void *dst, const void *src,
			size_t len, char *err, size_t errlen);

/* sfs_hmem_stage_mark - part @part's copies are all queued: 0, or -EIO
 * (then sfs_hmem_stage_sync, or the part cannot be written again).
 * sfs_hmem_stage_wait - wait until they have ended (at once if part
 * @part was never marked).
 * sfs_hmem_stage_sync - wait until every copy queued has ended.
 * Both 0, -ETIMEDOUT or -EIO with a line in @err. */
int sfs_hmem_stage_mark(struct sfs_hmem_stage *s, unsigned int part, char *err,
			size_t errlen);
int sfs_hmem_stage_wait(struct sfs_hmem_stage *s, unsigned int part, char *err,
			size_t errlen);
int sfs_hmem_stage_sync(struct sfs_hmem_stage *s, char *err, size_t errlen);

/* sfs_hmem_stage_free - wait for every copy (bounded), free; when they
 * do not end, its host memory is left, logged.  NULL is fine. */
void sfs_hmem_stage_free(struct sfs_hmem_stage *s);

#endif /* SFS_HMEM_H */
