/* SPDX-License-Identifier: MIT */
/*
 * pull.h - copy a model a replica sees into a local directory, no FUSE
 * in the data path.
 *
 * The bytes come through the replica's chunk cache (verified against
 * the seed's checksums, retried and failed over, every wait bounded)
 * with a deep read-ahead window, and are written with pwrite while the
 * transport goes on pulling.  In place (@place), they land instead in
 * the new file's shared mapping, one-sided reads straight into its
 * pages (registered where the provider needs that), verified there, no
 * copy and no second write (sfs_cache_read_into); where a file cannot
 * be mapped or registered the rest is copied.  Copying is the default
 * because it measured faster here: every page of a new shared mapping
 * is zeroed by the kernel when first touched, which pwrite of whole
 * pages skips, and on tmpfs that zeroing cost more than the copy saved
 * (1.3-1.7 GB/s copied against 0.7-1.0 in place, 1 GiB, tcp and shm,
 * docs/perf.md).  In place is for transports whose copy is the NIC's.
 */
#ifndef SFS_PULL_H
#define SFS_PULL_H

#include <stddef.h>
#include <stdint.h>

struct sfs_replica;

/* What an update did (sfs_pull_cfg.stats). */
struct sfs_pull_stats {
	uint64_t generation; /* what DEST is now */
	uint64_t kept_files, changed_files;
	uint64_t kept_bytes, pulled_bytes;
};

struct sfs_pull_cfg {
	uint64_t window; /* bytes kept in flight ahead of what is written */
	int place;	 /* into the new files' shared mappings */
	/* DEST may hold an earlier copy (of any generation, or anything):
	 * only the chunks whose bytes differ are pulled and written, and
	 * a crash leaves it the old generation, the new one, or visibly
	 * incomplete (replica/pull_update.c) */
	int update;
	int strong; /* update: a local chunk is kept on its SHA-256 only */
	struct sfs_pull_stats *stats; /* update: filled in, or NULL */
};

/*
 * sfs_pull - copy model @name into @dest (created; it must not exist or
 * be empty, unless @cfg->update), byte-identical, with the seed's times
 * and permission bits (set-id and sticky bits dropped, the process's
 * umask applied).  A progress display on stderr.  Returns 0 or -errno
 * with one line in @err (what failed, and that @dest is incomplete);
 * the file that failed is removed, so every file left in @dest is
 * complete and verified.  Runs in the caller's thread.
 */
int sfs_pull(struct sfs_replica *r, const char *name, const char *dest,
	     const struct sfs_pull_cfg *cfg, char *err, size_t errlen);

#endif /* SFS_PULL_H */
