/* SPDX-License-Identifier: MIT */
/*
 * disk.h - the chunk cache's disk tier (--cache-dir).
 *
 * A cache directory holds one subdirectory per source (one seed
 * instance's generation of a model), named by a hash of the source's
 * key; in it, one sparse file per region with the region's bytes at
 * their own offsets, and an "about" file naming the source for humans.
 * Nothing here is trusted: the cache verifies every chunk it loads
 * against the seed's checksums, so a hole, a torn write or a file
 * edited by hand is a miss, never wrong bytes.  The names are public
 * (hashes of the content digest), so the directory must be the mount's
 * own and no name in it is ever followed through a link: every file and
 * subdirectory is reached relative to a checked directory descriptor
 * with O_NOFOLLOW, links and files where a subdirectory goes are
 * removed by name, other users' subdirectories left alone, and region
 * files that are not regular files of the mount's own with one name are
 * replaced.
 *
 * The directory is locked (flock) by one mount at a time.  Its size is
 * bounded: directories of other sources are removed oldest first to
 * make room; when nothing else can go, new chunks are not stored.  A
 * full filesystem stops writes only: attaching a source whose directory
 * exists takes no free space, so what it holds is still read.
 *
 * All functions are thread safe.
 */
#ifndef SFS_DISK_H
#define SFS_DISK_H

#include <stddef.h>
#include <stdint.h>

struct sfs_disk;
struct sfs_disk_src;

/*
 * sfs_disk_open - create (mode 0700) or open @dir and lock it; @max is
 * the bound in bytes (0: only the filesystem's free space).  An
 * existing @dir must be a directory, not a symbolic link, owned by the
 * effective uid, not writable by group or others, below parents owned
 * by root or that uid and not writable by others unless sticky.  *out
 * [new] is freed with sfs_disk_close.  Returns 0 or -errno with one
 * line in @err naming @dir, what is wrong and how to fix it (-EBUSY:
 * another mount uses it; -ELOOP: a link; -EPERM: owner or mode).
 */
int sfs_disk_open(const char *dir, uint64_t max, struct sfs_disk **out,
		  char *err, size_t errlen);

/* sfs_disk_close - close every source's files and the lock.  NULL is
 * fine.  No other call may run concurrently or after. */
void sfs_disk_close(struct sfs_disk *d);

/*
 * sfs_disk_attach - the directory of the source @key (any string; it is
 * hashed) with @nregions regions; @about (copied) is written beside the
 * data for whoever looks.  *out [owned by @d] stays valid until
 * sfs_disk_release or sfs_disk_close.  Returns 0 or -errno (-EPERM:
 * another user's directory has that name).
 */
int sfs_disk_attach(struct sfs_disk *d, const char *key, const char *about,
		    size_t nregions, struct sfs_disk_src **out);

/*
 * sfs_disk_read - @len bytes at @off of @region into @buf.  Returns 0,
 * -ENOENT when nothing was stored there, -ENODATA for a short file, or
 * -errno of the read.  The bytes are unverified.
 */
int sfs_disk_read(struct sfs_disk_src *s, uint32_t region, uint64_t off,
		  void *buf, size_t len);

/*
 * sfs_disk_write - store @len bytes at @off of @region.  Returns 0,
 * -ENOSPC when the bound (or the filesystem) leaves no room, -ESTALE
 * once the source was dropped, or -errno of the write.
 */
int sfs_disk_write(struct sfs_disk_src *s, uint32_t region, uint64_t off,
		   const void *buf, size_t len);

/* sfs_disk_drop - the source will never be read again: remove its
 * directory now (files open for reads or writes stay valid). */
void sfs_disk_drop(struct sfs_disk_src *s);

/*
 * sfs_disk_release - the caller will not use @s again: dropped (unless
 * it was) and freed, by the last read or write of it still under way if
 * there is one.  Its directory is gone then: a later source of the same
 * key starts afresh.  NULL is fine.
 */
void sfs_disk_release(struct sfs_disk_src *s);

/* sfs_disk_usage - bytes the directory holds (as allocated on disk) and
 * the bound (0: none). */
void sfs_disk_usage(struct sfs_disk *d, uint64_t *used, uint64_t *max);

/* sfs_disk_sources - how many sources @d holds now (attached, not yet
 * released). */
size_t sfs_disk_sources(struct sfs_disk *d);

/* sfs_disk_path - the cache directory, for messages [borrowed]. */
const char *sfs_disk_path(const struct sfs_disk *d);

#endif /* SFS_DISK_H */
