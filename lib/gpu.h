/* SPDX-License-Identifier: MIT */
/*
 * gpu.h - the engine API's reads into CUDA device memory (libseedfs
 * inside; seedfs.h is the public side).  The bytes are pulled into a
 * page-locked stage on the host, verified there against the manifest's
 * checksums like any read (sfs_cache_read_into), and only then copied
 * to the device (transports/hmem.h), while the next part of the stage
 * is being pulled.  One stage per device: two parts of 16 MiB each.
 */
#ifndef SFS_LIB_GPU_H
#define SFS_LIB_GPU_H

#include <stddef.h>
#include <stdint.h>

struct sfs_cache;
struct sfs_cache_rd;
struct sfs_xport;
struct sfs_gpu;

/* sfs_gpu_new - reads through @cache, stages registered with @x (both
 * [borrowed], outliving the sfs_gpu); pieces end on multiples of
 * @align bytes of a file where they can (the checksum block, so that
 * blocks are verified in place); every wait for the driver or for
 * another read's stage bounded by @timeout_ms.  *out [new].  0 or
 * -ENOMEM. */
int sfs_gpu_new(struct sfs_cache *cache, struct sfs_xport *x, uint64_t align,
		unsigned int timeout_ms, struct sfs_gpu **out);

/* sfs_gpu_prepare - device @dev's stage, made now if it is not yet:
 * 0, or -errno with one line in @err (no driver, no memory, the driver
 * or the transport refusing).  Thread safe. */
int sfs_gpu_prepare(struct sfs_gpu *g, int dev, char *err, size_t errlen);

/*
 * sfs_gpu_read - every read of @rds into device memory: rds[i].to is
 * the device address of its first byte, on device devs[i] (rds[i].dst
 * is not used).  Returns when every byte is on its device, verified, or
 * its read has failed: 0, or the first error (each read's in ->status,
 * as sfs_cache_read_into's; -EIO when the driver refused a copy or a
 * wait, -ETIMEDOUT when copies or another read's stage took longer than
 * the timeout: one line in @err).  A read that fails may have put some
 * of its bytes in place, never bytes that failed their checksum; a read
 * that succeeds has all of them there.  Thread safe; reads into one
 * device are taken one call at a time.
 */
int sfs_gpu_read(struct sfs_gpu *g, struct sfs_cache_rd *rds, const int *devs,
		 size_t n, char *err, size_t errlen);

/*
 * sfs_gpu_stop - before the transport closes: deregister every stage.
 * A stage a timed-out read may still write into stays allocated (its
 * registration goes with the transport) until sfs_gpu_free, which comes
 * after the transport has closed.  Both accept NULL.
 */
void sfs_gpu_stop(struct sfs_gpu *g);
void sfs_gpu_free(struct sfs_gpu *g);

#endif /* SFS_LIB_GPU_H */
