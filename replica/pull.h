/* SPDX-License-Identifier: MIT */
/*
 * pull.h - copy a model a replica sees into a local directory, no FUSE
 * in the data path.
 *
 * The bytes come through the replica's chunk cache (so they are
 * verified against the seed's checksums, retried, and every wait is
 * bounded) with a deep read-ahead window: the transport keeps pulling
 * while this thread writes what has arrived with pwrite.  Pulling
 * straight into a shared mapping of the new file instead was 2-3x
 * slower on tmpfs (measured: the pages must be allocated, zeroed and
 * faulted in, while pwrite of whole pages skips the zeroing), and RDMA
 * cannot pin shared file mappings on 6.1 anyway.
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
