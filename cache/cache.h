/* SPDX-License-Identifier: MIT */
/*
 * cache.h - a chunk cache in registered memory.
 *
 * Remote regions are cut into fixed-size chunks; a chunk is keyed by
 * (source, region, chunk index) and pulled with one transport read (split
 * by the transport as the provider needs).  Concurrent readers of a
 * missing chunk wait for one pull (single flight).  Memory is one slab
 * of --cache-size bytes, never exceeded, registered in segments: the
 * first before the cache is returned, the rest faulted in and
 * registered in the background, so a large cache is ready at once.
 * Unpinned chunks are evicted least recently used first.
 *
 * Pulls wait in two queues per peer (the connection to one seed):
 * chunks a reader waits for go before read-ahead, and only a window of
 * them is posted at once, sized to the peer's measured throughput, so
 * a slow link is slow, not broken.  A wait fails only when the peer has
 * made no progress for the timeout: a reader behind a long queue on a
 * slow but moving link waits; a reader on a stalled link gets
 * -ETIMEDOUT within the timeout of its request.  A peer that stalls,
 * loses a pull (later ones complete, this one never does) or fails a
 * pull is reconnected on a thread of the cache (cfg.reconnect); pulls
 * in flight are cancelled by that and pulled again for their readers.
 * A peer that keeps failing is down for a while (doubling up to the
 * timeout): reads that need it fail at once, then one probes again.
 *
 * With a disk tier, chunks also persist on disk (cache/disk.h): two
 * threads load them before pulling and store them after, behind the
 * readers; a reader waiting on the disk does not count against the
 * network.
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
	unsigned int timeout_ms; /* no progress for this long: give up */
	int no_verify; /* serve pulled chunks without checking checksums */
	/* The disk tier [borrowed, outlives the cache] or NULL: chunks of
	 * persisted sources are looked for there before they are pulled,
	 * and stored there after. */
	struct sfs_disk *disk;
	/*
	 * Make the connection to @peer anew (it stalled or failed): reset
	 * the transport and connect again, *new_peer the id to use from
	 * now on.  Called on a thread of the cache, without its lock,
	 * never twice at once; bounded by the caller's own timeout.
	 * Returns 0 or -errno.  NULL: sfs_xport_reset alone.
	 */
	int (*reconnect)(void *arg, uint64_t peer, uint64_t *new_peer);
	void *reconnect_arg;
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

/* Counters: every kind of failure under its own name. */
struct sfs_cache_stats {
	uint64_t size, used, chunk_size;
	uint64_t ready; /* bytes of the slab faulted in and registered */
	uint64_t hits, misses, pulls, bytes_pulled;
	uint64_t errors_transport; /* pulls the transport failed */
	uint64_t timeouts;	   /* reads given up: no progress */
	uint64_t checksum_errors;  /* pulled chunks that did not match */
	uint64_t unavailable;	   /* reads refused at once: peer down */
	uint64_t no_slot;	   /* reads that found every chunk busy */
	uint64_t reconnects, reconnect_failures;
	/* The disk tier: chunks loaded from it (verified), stored in it,
	 * not stored (full, or writes behind), failed I/O, reads given up
	 * waiting for it, and chunks waiting to be written. */
	int disk_tier; /* the cache has one */
	uint64_t disk_hits, disk_bytes_read;
	uint64_t disk_stores, disk_bytes_written;
	uint64_t disk_skipped, disk_errors, disk_timeouts, disk_queue;
};

enum sfs_peer_state {
	SFS_PEER_UP,
	SFS_PEER_RECONNECTING, /* a new connection is being made */
	SFS_PEER_DOWN,	       /* reads that need it fail at once */
};

/* What the cache knows of the connection serving a source, now. */
struct sfs_cache_peer_info {
	enum sfs_peer_state state;
	int err;	     /* not UP: the error that made it so */
	uint64_t since_ms;   /* in this state for this long */
	uint64_t last_ok_ms; /* ms since the last pull completed; 0: none */
	int any_ok;	     /* a pull ever completed */
	double rate;	     /* bytes/s while busy (0: not measured yet) */
	unsigned int inflight, window;
	size_t queued;
};

/*
 * sfs_cache_new - map the slab, register its first segment, start the
 * cache's threads.  *out [new] is freed with sfs_cache_free.  Returns 0
 * or -errno with one line in @err.
 */
int sfs_cache_new(const struct sfs_cache_cfg *cfg, struct sfs_cache **out,
		  char *err, size_t errlen);

/*
 * sfs_cache_grow - fault in and register the rest of the slab in the
 * background; until then the cache holds its first segment (32 MiB)
 * only.  Call once what must be quick is done (a mount being ready).
 * Returns 0 or -errno (logged; the cache stays small).
 */
int sfs_cache_grow(struct sfs_cache *c);

/*
 * sfs_cache_stop - stop posting: queued pulls fail with -ESHUTDOWN, the
 * cache's threads (disk tier, poster, background registration) end.
 * Pulls already posted still complete or are cancelled by the
 * transport: quiesce it after this, then sfs_cache_free.  Idempotent.
 */
void sfs_cache_stop(struct sfs_cache *c);

/*
 * sfs_cache_free - stop, wait (bounded) for pulls in flight, then free.
 * Pinned chunks must have been put.  NULL is fine.
 * sfs_cache_free_quiesced - the same once the transport is quiesced:
 * @abandoned pulls will never complete (sfs_xport_quiesce said so), and
 * then the memory is kept, not freed, and nothing is waited for.
 */
void sfs_cache_free(struct sfs_cache *c);
void sfs_cache_free_quiesced(struct sfs_cache *c, size_t abandoned);

/* sfs_cache_set_reconnect - set (or change) cfg.reconnect, for owners
 * made after the cache. */
void sfs_cache_set_reconnect(struct sfs_cache *c,
			     int (*fn)(void *, uint64_t, uint64_t *),
			     void *arg);

/*
 * sfs_cache_add_source - a peer and its regions (copied); @label
 * (copied) names it in logs, e.g. "seed 10.0.0.1:7070".  Sources with
 * the same @peer share its connection state.  *src is used in later
 * calls.  Returns 0, -ENOMEM, or -EINVAL when a region's checksum
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
 * sfs_cache_prefetch - queue pulls for the missing chunks covering
 * [off, off+len) of a region and return without waiting for them.
 * @demand: a reader is about to wait for them (they go before
 * read-ahead); else read-ahead.  Best effort: returns 0, or -errno when
 * nothing could be started.
 */
int sfs_cache_prefetch(struct sfs_cache *c, uint32_t src, uint32_t region,
		       uint64_t off, uint64_t len, int demand);

/*
 * sfs_cache_get - pin the chunk holding byte @off of @region, pulling
 * it if needed, and point *data at that byte; *avail is the number of
 * valid bytes from there to the end of the chunk.  *ch [borrowed,
 * pinned] must be released with sfs_cache_put.  Returns 0, -EINVAL for
 * a range outside the region, -ESTALE for a retired source, -ETIMEDOUT
 * when the peer made no progress for the timeout (or no chunk came
 * free), -EBADMSG when the bytes did not match the seed's checksum
 * twice (pulled, retried once), the error of a peer that is down, or
 * the pull's error (-EIO, ...).
 */
int sfs_cache_get(struct sfs_cache *c, uint32_t src, uint32_t region,
		  uint64_t off, struct sfs_chunk **ch, const uint8_t **data,
		  size_t *avail);

void sfs_cache_put(struct sfs_cache *c, struct sfs_chunk *ch);

/*
 * sfs_cache_retire_source - the seed no longer serves @src: later gets
 * and prefetches of it fail with -ESTALE, its unpinned chunks are freed
 * and its disk tier copy removed.  When no source uses its peer any
 * more, the peer is removed from the transport.  Thread safe.
 */
void sfs_cache_retire_source(struct sfs_cache *c, uint32_t src);

/*
 * sfs_cache_ahead - how far to read ahead of a sequential reader of
 * @src: about a second of the throughput measured from its peer,
 * within [@min, @max] (@min until something is measured).
 */
uint64_t sfs_cache_ahead(struct sfs_cache *c, uint32_t src, uint64_t min,
			 uint64_t max);

/*
 * sfs_cache_note_silence - the seed of @src has not answered its control
 * port since @since_ms (monotonic): a read that waits on its peer and
 * sees no progress either counts its wait from then, so an open and its
 * read together fail within one timeout.  0 clears it (the seed answers
 * again).
 */
void sfs_cache_note_silence(struct sfs_cache *c, uint32_t src,
			    uint64_t since_ms);

/* sfs_cache_peer - the state of the connection serving @src, now.
 * Returns 0 or -EINVAL (no such source). */
int sfs_cache_peer(struct sfs_cache *c, uint32_t src,
		   struct sfs_cache_peer_info *pi);

void sfs_cache_stats(struct sfs_cache *c, struct sfs_cache_stats *st);

/*
 * sfs_cache_resident - how many bytes of [off, off+len) of @region are
 * in memory now (chunks ready, not being pulled).  A snapshot for
 * display; it may be stale at once.  Thread safe.
 */
uint64_t sfs_cache_resident(struct sfs_cache *c, uint32_t src, uint32_t region,
			    uint64_t off, uint64_t len);

#endif /* SFS_CACHE_H */
