/* SPDX-License-Identifier: MIT */
/*
 * pull.h - copy a model a replica sees into a local directory, no FUSE
 * in the data path.
 *
 * The bytes land in the new file's shared mapping: one-sided reads
 * straight into its pages (registered where the provider needs that),
 * verified there against the seed's checksums, retried and failed over
 * like any pull, every wait bounded (sfs_cache_read_into); nothing is
 * copied or written a second time.  Where a file cannot be mapped or
 * its mapping registered (RDMA cannot pin shared file mappings on every
 * kernel), the rest is copied through the chunk cache with pwrite.
 */
#ifndef SFS_PULL_H
#define SFS_PULL_H

#include <stddef.h>
#include <stdint.h>

struct sfs_replica;

/*
 * sfs_pull - copy model @name into @dest (created; it must not exist or
 * be empty), byte-identical, with the seed's times and permission bits;
 * @window bytes are kept in flight ahead of what is written.  A
 * progress display on stderr.  Returns 0 or -errno with one line in
 * @err (what failed, and that @dest is incomplete).  Runs in the
 * caller's thread.
 */
int sfs_pull(struct sfs_replica *r, const char *name, const char *dest,
	     uint64_t window, char *err, size_t errlen);

#endif /* SFS_PULL_H */
