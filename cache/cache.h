/* SPDX-License-Identifier: MIT */
/*
 * cache.h - a chunk cache in registered memory.
 *
 * Remote regions are cut into fixed-size chunks; a chunk is keyed by
 * (source, region, chunk index) and pulled with one transport read (split
 * by the transport as the provider needs).  Concurrent readers of a
 * missing chunk wait for one pull (single flight).  Memory is one
 * registered slab of --cache-size bytes, never exceeded; unpinned
 * chunks are evicted least recently used first.  Every wait is bounded
 * by the configured timeout.  With a disk tier, chunks also persist on
 * disk (cache/disk.h): two threads load them before pulling and store
 * them after, behind the readers.
 *
 * The cache knows regions and bytes, never files.  All functions are
 * thread safe.
 */
#ifndef SFS_CACHE_H
#define SFS_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct sfs_cache;
struct sfs_chunk;
struct sfs_disk;
struct sfs_xport;

struct sfs_cache_cfg {
	struct sfs_xport *xport; /* borrowed; outlives the cache */
	uint64_t size;		 /* bytes of chunk memory */
	uint32_t chunk_size;	 /* power of two, >= 4 KiB */
	unsigned int timeout_ms; /* bound on every wait */
	int no_verify; /* serve pulled chunks without checking checksums */
	/* The disk tier [borrowed, outlives the cache] or NULL: chunks of
	 * persisted sources are looked for there before they are pulled,
	 * and stored there after. */
	struct sfs_disk *disk;
};

/* One remote region as the seed published it. */
struct sfs_cache_region {
	uint64_t len;
	uint64_t raddr;
	uint64_t key;
	/* The seed's XXH3-64 of every 1 << csum_shift bytes [borrowed, must
	 * outlive the cache], or NULL: chunks are verified before they are
	 * served.  The cache's chunk size must be a multiple. */
	uint32_t csum_shift;
	const uint64_t *xxh3;
};

struct sfs_cache_stats {
	uint64_t size, used, chunk_size;
	uint64_t hits, misses, pulls, bytes_pulled;
	uint64_t errors, timeouts;
	uint64_t checksum_errors; /* pulled chunks that did not match */
	uint64_t sources_down;	  /* sources failing fast right now */
	/* The disk tier: chunks loaded from it (verified), stored in it,
	 * not stored (full, or writes behind), failed I/O, and chunks
	 * waiting to be written. */
	int disk_tier; /* the cache has one */
	uint64_t disk_hits, disk_bytes_read;
	uint64_t disk_stores, disk_bytes_written;
	uint64_t disk_skipped, disk_errors, disk_queue;
};

/*
 * sfs_cache_new - allocate and register the slab.  *out [new] is freed
 * with sfs_cache_free.  Returns 0 or -errno with one line in @err.
 */
int sfs_cache_new(const struct sfs_cache_cfg *cfg, struct sfs_cache **out,
		  char *err, size_t errlen);

/*
 * sfs_cache_free - wait (bounded) for pulls in flight, then free.
 * Pinned chunks must have been put.  NULL is fine.
 */
void sfs_cache_free(struct sfs_cache *c);

/*
  * sfs_cache_add_source - a peer and its regions (copied); @label
 * (copied) names it in logs, e.g. "seed 10.0.0.1:7070".  *src is used in
 * later calls.  Returns 0, -ENOMEM, or -EINVAL when a region's checksum
 * chunks are larger than the cache's chunks.
 */
int sfs_cache_add_source(struct sfs_cache *c, uint64_t peer, const char *label,
			 const struct sfs_cache_region *r, size_t n,
			 uint32_t *src);

/*
 * sfs_cache_persist_source - keep the chunks of @src in the disk tier
 * under @key, a string that names exactly these bytes (the seed's
 * instance, the model, the generation), and reuse those stored before
 * under the same key once they match the seed's checksums.  @about
 * describes the source for humans.  Regions without checksums are not
 * persisted.  Without a disk tier this does nothing.  Returns 0 or
 * -errno (the source then simply stays in memory).
 */
int sfs_cache_persist_source(struct sfs_cache *c, uint32_t src, const char *key,
			     const char *about);

/*
 * sfs_cache_prefetch - start pulls for the missing chunks covering
 * [off, off+len) of a region and return without waiting for them.  Best
 * effort: returns 0, or -errno when nothing could be started.
 */
int sfs_cache_prefetch(struct sfs_cache *c, uint32_t src, uint32_t region,
		       uint64_t off, uint64_t len);

/*
 * sfs_cache_get - pin the chunk holding byte @off of @region, pulling
  * it if needed, and point *data at that byte; *avail is the number of
 * valid bytes from there to the end of the chunk.  *ch [borrowed, pinned]
 * must be released with sfs_cache_put.  Returns 0, -EINVAL for a range
 * outside the region, -ETIMEDOUT when the pull did not finish within the
 * timeout, -EBADMSG when the bytes did not match the seed's checksum
 * twice (pulled, retried once), or the pull's error (-EIO, ...).
 */
int sfs_cache_get(struct sfs_cache *c, uint32_t src, uint32_t region,
		  uint64_t off, struct sfs_chunk **ch, const uint8_t **data,
		  size_t *avail);

void sfs_cache_put(struct sfs_cache *c, struct sfs_chunk *ch);

/*
 * sfs_cache_retire_source - the seed no longer serves @src: later gets
 * and prefetches of it fail with -ESTALE, its unpinned chunks are freed
 * and its disk tier copy removed.  Thread safe.
 */
void sfs_cache_retire_source(struct sfs_cache *c, uint32_t src);

void sfs_cache_stats(struct sfs_cache *c, struct sfs_cache_stats *st);

/*
 * sfs_cache_resident - how many bytes of [off, off+len) of @region are
 * in memory now (chunks ready, not being pulled).  A snapshot for
 * display; it may be stale at once.  Thread safe.
 */
uint64_t sfs_cache_resident(struct sfs_cache *c, uint32_t src, uint32_t region,
			    uint64_t off, uint64_t len);

#endif /* SFS_CACHE_H */
