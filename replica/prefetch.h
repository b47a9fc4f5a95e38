/* SPDX-License-Identifier: MIT */
/*
 * prefetch.h - warm the mount's cache with whole files at transport
 * speed, no FUSE in the path: each file's chunks are pulled in order
 * with a window in flight, as a sequential reader's read-ahead would,
 * and stay in the cache (and in the disk tier, which keeps them all).
 * Without a disk tier only what fits in three quarters of the cache is
 * warmed: more would evict the first files before anyone reads them.
 */
#ifndef SFS_PREFETCH_H
#define SFS_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

struct sfs_replica;

struct sfs_prefetch_cb {
	/* Told the total once, then after every chunk; a nonzero return
	 * stops the prefetch (-ECANCELED). */
	int (*progress)(void *arg, uint64_t done, uint64_t total);
	/* One line for the user (e.g. only part fits in the cache). */
	void (*note)(void *arg, const char *line);
	void *arg;
};

/*
 * sfs_prefetch - warm the files at @paths (relative to the mount root,
 * '/'-separated; a directory means every file under it, "" the whole
 * mount) in the seed's current generation.  Runs in the caller's thread;
 * thread safe against reads and generation changes.  Returns 0, or
 * -errno with one line in @err: -ENOENT (a path is not in the mount),
 * -ESTALE (the generation was replaced meanwhile), -ECANCELED, or the
 * cache's error for a chunk (-EIO, -ETIMEDOUT, -EBADMSG).
 */
int sfs_prefetch(struct sfs_replica *r, const char *const *paths, size_t npaths,
		 const struct sfs_prefetch_cb *cb, char *err, size_t errlen);

#endif /* SFS_PREFETCH_H */
