/* SPDX-License-Identifier: MIT */
/*
 * cache.h - a chunk cache in registered memory, filled from many
 * sources at once.
 *
 * What the cache holds is named by content, never by a source's memory
 * layout: a *set* is the bytes of one content (a model generation), a
 * list of *objects* (its files), each cut into fixed-size chunks from
 * its first byte and checked against the object's own checksums.  A
 * chunk is keyed by (set, object, chunk index), so any source of the
 * same content can fill it.
 *
 * A *peer* is a connection to one source (a transport peer).  A
 * *holder* says how a peer serves a set: for every object, pieces that
 * tile it (bytes inline, or a remote address and key), and which chunks
 * it holds (a partial source serves only those).  A set may have many
 * holders.
 *
 * Pulls wait in two queues, demand (a reader waits) before read-ahead,
 * and every peer takes the next chunk it can serve whenever it has room
 * in its window (a quarter second of its measured throughput, 2 to 32
 * chunks).  So a sequential reader's chunks are spread over every
 * holder at once, each taking work as fast as it completes it: the
 * faster source serves more, a slow one is never waited for by chunks
 * another could serve.  A peer that fails a pull, or makes no progress
 * for a while (much shorter than the timeout when another holder can
 * serve its chunks), is taken out: its posted pulls are orphaned (their
 * slots wait for the transport, never reused under a read) and pulled
 * again from the other holders; it is reconnected in the background
 * (cfg.reconnect) and used again once it answers.  A reader gets an
 * error only when no holder can serve its chunk: the peer made no
 * progress for the timeout, or every holder is down.
 *
 * Memory is one slab of --cache-size bytes, never exceeded, registered
 * in segments: the first before the cache is returned, the rest faulted
 * in and registered in the background.  Unpinned chunks are evicted
 * least recently used first.  With a disk tier, chunks of persisted
 * sets also go to disk (cache/disk.h), loaded before they are pulled.
 *
 * The cache knows objects and bytes, never files.  All functions are
 * thread safe.
 */
#ifndef SFS_CACHE_H
#define SFS_CACHE_H

/* Free slots an idle cache keeps: what a new one has when it is ready
 * (the next read starts as a new mount's first one does). */
#define SFS_CACHE_IDLE_KEEP (32ull << 20)

#include "common/metrics.h"

#include <stddef.h>
#include <stdint.h>

#define SFS_CACHE_NONE UINT32_MAX /* no peer, set or holder */

struct sfs_cache;
struct sfs_chunk;
struct sfs_disk;
struct sfs_xport;
struct sfs_xport_mr;

#define SFS_CACHE_MOVE_BUDGET 2

struct sfs_cache_cfg {
	struct sfs_xport *xport; /* borrowed; outlives the cache */
	uint64_t size;		 /* bytes of chunk memory */
	uint32_t chunk_size;	 /* power of two, >= 4 KiB */
	/* No progress for this long: give up, or move to another source
	 * that has the chunk; a read that keeps moving (its sources
	 * stall in turn) gives up once SFS_CACHE_MOVE_BUDGET x timeout_ms
	 * have passed: (SFS_CACHE_MOVE_BUDGET + 1) x timeout_ms at most. */
	unsigned int timeout_ms;
	int no_verify; /* serve pulled chunks without checking checksums */
	/* Hold every chunk pulled until the cache is full (a re-seeder:
	 * others read what it holds; -o direct_io): the slab grows rather
	 * than a chunk be reused.  0: it grows only while fewer than
	 * 128 MiB of slots are free or hold chunks readers have read (a
	 * model read once then commits about that, not its size; a
	 * prefetch still gets room for all it warms). */
	int hold_all;
	/* After this many ms without a slot taken (no pull), free slots
	 * past SFS_CACHE_IDLE_KEEP go back to the kernel, where the
	 * transport does not pin memory.  0: never (a mount's default:
	 * SFS_REPLICA_CACHE_IDLE_MS). */
	unsigned int idle_ms;
	/* The disk tier [borrowed, outlives the cache] or NULL. */
	struct sfs_disk *disk;
	/*
	 * Make the connection of peer @peer (the cache's index) anew: it
	 * stalled or failed.  @id is its transport peer now; *new_id the
	 * one to use from now on.  Called on a thread of the cache,
	 * without its lock, never twice at once; bounded by the caller's
	 * own timeout.  Returns 0 or -errno.  NULL: sfs_xport_peer_reset.
	 */
	int (*reconnect)(void *arg, uint32_t peer, uint64_t id,
			 uint64_t *new_id);
	void *reconnect_arg;
	/* Tests only: a pulled chunk's verification waits this long (on the
	 * transport's thread, without the cache's lock) before it reads the
	 * checksums, so a test can change what happens meanwhile.  0: no
	 * wait. */
	unsigned int test_verify_delay_ms;
	/* Threads that check SHA-256 off the transport's thread (pulls from
	 * peers that are no seed: sfs_cache_peer_trusted): 0, the number of
	 * CPUs, at most SFS_CACHE_VERIFIERS_MAX (8). */
	unsigned int verifiers;
	/* Every pulled chunk is checked against SHA-256, a seed's too (the
	 * verified mode: the control channel itself may be tampered with,
	 * and what the signature leaves out, the endpoints, could point a
	 * "seed" at forged bytes that keep their XXH3). */
	int sha256_all;
};

/* One object of a set: its length and checksums. */
struct sfs_cache_obj {
	uint64_t len;
	/* XXH3-64 of every 1 << csum_shift bytes from byte 0 [borrowed
	 * until the set's release callback: sfs_cache_release_set], or
	 * NULL: served unverified.  The cache's chunk size must be a
	 * multiple. */
	uint32_t csum_shift;
	const uint64_t *xxh3;
	/* The SHA-256 of the same chunks, 32 bytes each [borrowed, the
	 * same way], or NULL.  What a peer that is no seed serves is
	 * checked against it (XXH3-64 has a closed-form second preimage:
	 * it catches corruption, not forgery), and an object without it
	 * is never pulled from such a peer. */
	const uint8_t *sha256;
};

/* A piece of an object as one holder serves it. */
struct sfs_cache_piece {
	uint64_t off, len;   /* bytes [off, off+len) of the object */
	const uint8_t *data; /* inline bytes [borrowed], or NULL: remote */
	uint64_t raddr;	     /* remote: address of byte @off */
	uint64_t key;
	int coming; /* partial holders: not held yet but being pulled (no
		       bytes to read; a chunk it covers is not pulled from
		       a last-resort peer for a while) */
};

/* How a holder serves one object. */
struct sfs_cache_hobj {
	/* Pieces tiling [0, len) in order [borrowed: valid until the
	 * holder is removed]; none for an object it does not serve. */
	const struct sfs_cache_piece *pieces;
	size_t npieces;
};

/* Counters: every kind of failure under its own name. */
struct sfs_cache_stats {
	uint64_t size, used, chunk_size;
	uint64_t ready; /* bytes of the slab faulted in and registered */
	uint64_t hits, misses, pulls, bytes_pulled;
	uint64_t errors_transport; /* pulls the transport failed */
	/* Of those, the ones pulled again alone: they failed beside
	 * others on their connection (the failure perhaps another's) */
	uint64_t solo_retries;
	uint64_t timeouts;	  /* reads given up: no progress */
	uint64_t checksum_errors; /* pulled chunks that did not match */
	uint64_t strong_checks;	  /* chunks checked against SHA-256 */
	uint64_t hedges; /* pulls moved off a slow peer that is no seed */
	/* Pulls of peers that are no seed that failed, stalled, did not
	 * match, were hedged, or could not even be posted for as long */
	uint64_t member_failures;
	uint64_t unavailable; /* reads refused at once: all down */
	uint64_t no_slot;     /* reads that found every chunk busy */
	uint64_t reconnects, reconnect_failures;
	uint64_t failovers;	   /* pulls moved to another holder */
	uint64_t export_evictions; /* exported chunks evicted early */
	uint64_t queued;	   /* chunks waiting for a peer, now */
	/* Sets and holders whose memory the cache holds now (a retired set
	 * stays until released and its last chunk is gone). */
	uint64_t live_sets, live_holders;
	/* Peers not removed, and the peers' memory (live ones, and removed
	 * ones whose last pull is still out, or whose index waits for
	 * the next peer): bounded by the most ever live at once. */
	uint64_t live_peers, peer_slots;
	/* Lanes: chunks pulled from a last-resort peer that were ours,
	 * and that were another member's (it was not waited for). */
	uint64_t lane_own, lane_others;
	/* The disk tier: chunks loaded from it (verified), stored in it,
	 * not stored (full, or writes behind), failed I/O, reads given up
	 * waiting for it, and chunks waiting to be written. */
	int disk_tier; /* the cache has one */
	uint64_t disk_hits, disk_bytes_read;
	uint64_t disk_stores, disk_bytes_written;
	uint64_t disk_skipped, disk_errors, disk_timeouts, disk_queue;
	/* Chunks (and their bytes) a new set took from an older one
	 * (sfs_cache_inherit): not pulled again. */
	uint64_t inherited, inherited_bytes;
	/* Pulls from post to verified bytes (not inline ones). */
	struct sfs_hist pull_latency;
};

enum sfs_peer_state {
	SFS_PEER_UP,
	SFS_PEER_RECONNECTING, /* a new connection is being made */
	SFS_PEER_DOWN,	       /* not used until its hold ends */
};

/* What the cache knows of one peer, now. */
struct sfs_cache_peer_info {
	enum sfs_peer_state state;
	int err;	     /* not UP: the error that made it so */
	uint64_t since_ms;   /* in this state for this long */
	uint64_t last_ok_ms; /* ms since the last pull completed; 0: none */
	int any_ok;	     /* a pull ever completed */
	double rate;	     /* bytes/s while busy (0: not measured yet) */
	unsigned int inflight, window;
	uint64_t pulls, bytes;		  /* completed, verified */
	uint64_t errors, checksum_errors; /* its pulls that failed */
	uint64_t stalls;		  /* times it was taken out */
	uint64_t avoided_ms; /* stalled: serves only what no other source
				holds for this much longer (0: not) */
	int removed;	     /* sfs_cache_remove_peer: its last state */
	int retry;   /* DOWN, its hold over (or connected again): the next pull
		      tries it; UP only once a pull completed */
	int trusted; /* a seed: checked against XXH3-64 */
	int proven;  /* no seed: a pull from it verified since its
			      last failure (sfs_cache_peer_trusted) */
	uint64_t probe_ms; /* unproven after a failure: its next try in */
};

/*
 * sfs_cache_new - map the slab, register its first segment, start the
 * cache's threads.  *out [new] is freed with sfs_cache_free.  Returns 0
 * or -errno with one line in @err.
 */
int sfs_cache_new(const struct sfs_cache_cfg *cfg, struct sfs_cache **out,
		  char *err, size_t errlen);

/*
 * sfs_cache_grow - start the background thread that grows the slab as
 * it fills (segments faulted in and registered while fewer than 64 MiB
 * of slots are free) and, with a transport that does not pin memory
 * (sfs_xport_info's pins), gives free slots past 64 MiB back to the
 * kernel; until then the cache holds its first 32 MiB only.  Call once
 * what must be quick is done (a mount being ready).  Returns 0 or
 * -errno (logged; the cache stays small).
 *
 * sfs_cache_want_begin, sfs_cache_want_ready, sfs_cache_want_end - a
 * prefetch about to fill the cache begins, asks for at least @bytes
 * ready (grown in the background, capped by the cache's size; it waits,
 * bounded, for sfs_cache_stats' ready), and ends.  What is asked holds
 * (the largest ask) until the last prefetch that began has ended; the
 * cache does not give back below it meanwhile.  Thread safe.
 */
int sfs_cache_grow(struct sfs_cache *c);
void sfs_cache_want_begin(struct sfs_cache *c);
void sfs_cache_want_ready(struct sfs_cache *c, uint64_t bytes);
void sfs_cache_want_end(struct sfs_cache *c);

/*
 * sfs_cache_stop - stop posting: queued pulls fail with -ESHUTDOWN, the
 * cache's threads (disk tier, worker, background registration) end.
 * Pulls already posted still complete or are cancelled by the
 * transport: quiesce it after this, then sfs_cache_free.  Idempotent.
 */
void sfs_cache_stop(struct sfs_cache *c);

/*
 * sfs_cache_end_waits - the mount is going: every reader waiting for a
 * chunk (sfs_cache_get), and every later one that would wait, ends at
 * once with -ESHUTDOWN; chunks already in the cache are still
 * answered.  Pulls go on (sfs_cache_stop ends them).  Idempotent;
 * thread safe.
 */
void sfs_cache_end_waits(struct sfs_cache *c);

/*
 * sfs_cache_free - stop, wait (bounded) for pulls in flight, then free.
 * Pinned chunks must have been put.  NULL is fine.
 * sfs_cache_free_quiesced - the same once the transport is quiesced:
 * @abandoned pulls will never complete (sfs_xport_quiesce said so), and
 * then the memory is kept, not freed, and nothing is waited for.
 */
void sfs_cache_free(struct sfs_cache *c);
void sfs_cache_free_quiesced(struct sfs_cache *c, size_t abandoned);

/* sfs_cache_set_reconnect - set (or change) cfg.reconnect. */
void sfs_cache_set_reconnect(struct sfs_cache *c,
			     int (*fn)(void *, uint32_t, uint64_t, uint64_t *),
			     void *arg);

/*
 * sfs_cache_slab - the slab (its slots in order), for a replica that
 * serves what it holds: it registers it with a transport of its own.
 */
void sfs_cache_slab(struct sfs_cache *c, uint8_t **base, size_t *len);

/*
 * Peers.  sfs_cache_add_peer - a connection to a source: @id is its
 * transport peer, @label (copied) names it in logs and status ("seed
 * 10.0.0.1:7070").  *peer is used in later calls.  0, -ENOMEM, or
 * -ENOSPC (65,535 peers live, or removed with pulls still out).
 * sfs_cache_remove_peer - the source is gone for good: its holders are
 * removed, its queued and posted pulls go to other holders, and it is
 * removed from the transport.  Its memory is reused by a later peer
 * once its last pull's callback came, under a new number: a number
 * kept past its removal names nothing (calls with it are no-ops or
 * -EINVAL), never the peer that came next.  Thread-safe.
 */
int sfs_cache_add_peer(struct sfs_cache *c, uint64_t id, const char *label,
		       uint32_t *peer);
void sfs_cache_remove_peer(struct sfs_cache *c, uint32_t peer);

/*
 * Sets.  sfs_cache_add_set - a content of @n objects (copied; their
 * checksums borrowed, see struct sfs_cache_obj); @label (copied) names
 * it in logs.  Returns 0, -ENOMEM, or -EINVAL when an object's checksum
 * chunks are larger than the cache's chunks.
 * sfs_cache_retire_set - nobody will read @set again: later gets fail
 * with -ESTALE, its unpinned chunks are freed (pinned ones when put),
 * its queued pulls fail, its holders go and its disk tier copy is
 * removed.
 * sfs_cache_release_set - the caller is done with @set (retired here if
 * it was not) and passes its number no more: once nothing of the cache
 * names it (no chunk of it pinned, queued, pulled, verified, loaded
 * from or written to disk, no holder of it not yet removed by
 * sfs_cache_remove_holder), it is freed, with its disk tier source,
 * and @release(@arg) is called, with the cache's lock held (it must
 * not call the cache): the checksums its objects borrowed may go then,
 * never before (a chunk pulled before the retirement is still checked
 * against them, on the transport's thread).  At once when nothing
 * names it now; else on whichever thread drops the last.  Its number
 * may then be given to a later set.  @release may be NULL.  A set never
 * released is freed with the cache (its callback not called).
 */
int sfs_cache_add_set(struct sfs_cache *c, const char *label,
		      const struct sfs_cache_obj *objs, size_t n,
		      uint32_t *set);
void sfs_cache_retire_set(struct sfs_cache *c, uint32_t set);
void sfs_cache_release_set(struct sfs_cache *c, uint32_t set,
			   void (*release)(void *arg), void *arg);

/*
 * sfs_cache_persist_set - keep the chunks of @set in the disk tier under
 * @key, a string naming exactly these bytes (the content digest), and
 * reuse those stored before under the same key once they match the
 * checksums.  @about describes it for humans.  Objects without
 * checksums are not persisted.  Without a disk tier this does nothing.
 * Returns 0 or -errno (the set then simply stays in memory).
 */
int sfs_cache_persist_set(struct sfs_cache *c, uint32_t set, const char *key,
			  const char *about);

/*
 * sfs_cache_inherit - set @to takes the chunks of set @from whose bytes
 * it names too, wherever they sit in it (the same object and offset, or
 * another): a READY chunk of @from that nobody pins, whose length and
 * checksums (every checksum block's XXH3-64, and SHA-256 where both
 * objects have it; SHA-256 only under cfg.sha256_all) equal those of a
 * chunk of @to not cached yet becomes that chunk, without a pull (and
 * is written to @to's disk tier while its queue has room); objects
 * without checksums give and take nothing.  @from no longer has those
 * chunks: its readers pull them again (or get -ESTALE once it is
 * retired).  *chunks and *bytes: what was taken (also counted in the
 * stats).  Returns 0, -EINVAL (a set unknown, released, or the same) or
 * -ENOMEM (nothing taken).  The caller keeps both sets (neither is
 * released meanwhile): their checksums are read outside the lock.
 * Thread-safe; the lock is taken twice, for a walk of the slots and for
 * the chunks taken, memory and time as the slots and @to's chunks.
 */
int sfs_cache_inherit(struct sfs_cache *c, uint32_t to, uint32_t from,
		      uint64_t *chunks, uint64_t *bytes);

/*
 * Holders.  sfs_cache_add_holder - peer @peer serves @set: @objs has one
 * entry per object of the set (its pieces borrowed until the holder is
 * removed); it holds every chunk unless @partial, then only the chunks
 * its pieces cover whole (pieces may leave gaps; sfs_cache_holder_update
 * changes them).  *holder for later calls.  Returns 0, -EINVAL (pieces
 * that do not tile an object, or overlap in a partial one), -ENOMEM.
 * sfs_cache_remove_holder - it no longer serves @set: its queued pulls
 * go to others, its posted ones are orphaned and pulled again
 * elsewhere.  After it returns, its pieces are no longer used, and it is
 * freed: call it once per holder (also when the cache already took the
 * holder out: its peer or set went), never again with that number,
 * which a later holder may get.
 */
int sfs_cache_add_holder(struct sfs_cache *c, uint32_t set, uint32_t peer,
			 const struct sfs_cache_hobj *objs, size_t n,
			 int partial, uint32_t *holder);
void sfs_cache_remove_holder(struct sfs_cache *c, uint32_t holder);

/* A replica loading a set together with this one (sfs_cache_set_lanes). */
struct sfs_cache_lane {
	uint64_t key;	 /* the same for it in every member's cache */
	uint32_t holder; /* its holder of the set here; SFS_CACHE_NONE:
			    this cache itself; SFS_CACHE_LANE_UNKNOWN: not
			    one yet (its chunks wait a moment, then are
			    pulled from the seeds) */
};

#define SFS_CACHE_LANE_UNKNOWN (SFS_CACHE_NONE - 1)

/*
 * sfs_cache_set_lanes - replicas that load @set together share what
 * they pull from last-resort peers (seeds): of the set's chunks,
 * counted over its objects in order, chunk g is the pull of member g
 * mod n, the members in key order (every member computes the same
 * owner, the shares are equal, and consecutive chunks are different
 * members').  A chunk of another member is not pulled from a
 * last-resort peer while that member's peer is up and its holdings grew
 * (it held more, or had more coming) in the last 2 s or three times a
 * pull from a last-resort peer takes (or the chunk has waited less than
 * that): it comes from that member once it holds it.  Nor, lanes or
 * not, is a chunk that a holder that is up has coming (a piece marked
 * so), for as long from when this cache first saw it coming.  Readers
 * of it wait meanwhile (their timeout still bounds the wait).  @lanes
 * is copied; @n 0: no lanes.  Returns 0, -EINVAL (a holder not of @set),
 * -ENOMEM.
 */
int sfs_cache_set_lanes(struct sfs_cache *c, uint32_t set,
			const struct sfs_cache_lane *lanes, size_t n);

/* The largest fleet sfs_cache_set_fleet takes, and its members. */
#define SFS_CACHE_FLEET_MAX 65536
#define SFS_CACHE_FLEET_MEMBERS 16

/*
 * sfs_cache_set_fleet - the lanes of @set are the fleet's: @n replicas
 * in an order every one of them was given (the seed's), this cache the
 * @me-th.  Chunk g is replica g mod n's to pull from last-resort peers
 * (seeds); the others pass it on down a binomial tree rooted at it, the
 * replica at offset d taking it from offset d minus d's highest bit.
 * @members[k] is the holder of the replica at offset -2^k (k below
 * @nmembers and 2^k below @n; SFS_CACHE_LANE_UNKNOWN: not connected
 * yet): the only ones this cache pulls from, besides seeds.  Replaces
 * sfs_cache_set_lanes' lanes.  Returns 0, -EINVAL (@n below 2 or above
 * SFS_CACHE_FLEET_MAX, @me not below @n, more than
 * SFS_CACHE_FLEET_MEMBERS members, a holder not of @set), -ENOMEM.
 * Thread-safe.
 */
int sfs_cache_set_fleet(struct sfs_cache *c, uint32_t set, size_t n, size_t me,
			const uint32_t *members, size_t nmembers);

/*
 * sfs_cache_holder_update - a partial holder's pieces now are @objs
 * (borrowed from now on; the old ones are no longer used once this
 * returns): it holds the chunks they cover whole.  0, -EINVAL (not a
 * partial holder, pieces that overlap or run past an object), -ENOMEM.
 */
int sfs_cache_holder_update(struct sfs_cache *c, uint32_t holder,
			    const struct sfs_cache_hobj *objs, size_t n);

/*
 * sfs_cache_holder_expire - a partial holder's pieces are not read from
 * @at_ms on (the sfs_now_ms clock; 0: no end): the keep its source gave
 * them (a re-seeder may reuse those slots after it).  Until renewed by
 * a later call (with its pieces, or alone when its source said nothing
 * changed), it then holds nothing: its chunks come from other holders,
 * and no pull is posted at those pieces, not even a moment late (a pull
 * posted before completes).  0, or -EINVAL (not a partial holder, or
 * removed).  Thread safe.
 */
int sfs_cache_holder_expire(struct sfs_cache *c, uint32_t holder,
			    uint64_t at_ms);

/*
 * sfs_cache_peer_last_resort - @peer (a seed, when re-seeders are
 * about) takes only chunks no other holder that is up has.
 */
void sfs_cache_peer_last_resort(struct sfs_cache *c, uint32_t peer, int on);

/*
 * sfs_cache_peer_trusted - @peer is a seed this replica reached over its
 * authenticated control channel (@on 1): what it serves is checked
 * against XXH3-64 (unless cfg.sha256_all), a direct read may land in the
 * caller's memory, and it is tried when another peer failed a chunk.  A peer not so marked
 * (the default: a re-seeder, any token holder can be one) is checked
 * against SHA-256 and never serves an object without it; it proves
 * itself by serving (struct cache_peer in cache/core.h says how), and
 * a pull from it that takes much longer than a seed's (HEDGE_LATENCIES
 * times a seed's usual pull, at least HEDGE_MIN_MS) is moved to a seed
 * that has the chunk.  Thread safe; a stale @peer is ignored.
 */
void sfs_cache_peer_trusted(struct sfs_cache *c, uint32_t peer, int on);

/*
 * Serving what this cache holds to other replicas (a re-seeding mount):
 * sfs_cache_export - for chunks 0..@n-1 of @obj of @set, the slab slot
 * holding each (slot i is at slab + i * chunk_size), or UINT32_MAX for
 * a chunk not in memory; each one exported is not evicted for @keep_ms
 * (unless nothing else can go), so a replica that reads it from the
 * list it was given reads these bytes; SFS_CACHE_SLOT_COMING for one
 * being pulled now (held soon: a member of its lanes need not pull it
 * from a seed too).  *version is the set's version (it grows when a
 * chunk of it is posted, becomes ready, fails or leaves).  Returns how
 * many are held, or -ENOENT (no such set, or retired).
 * sfs_cache_set_version - the same version, alone.
 * sfs_cache_keep - a replica goes on with the list it was given at
 * @version ("unchanged"): if the set's version is still @version, every
 * chunk that list named (all it holds now) is not evicted for @keep_ms
 * from now, and 0 is returned; -ESTALE when the version moved on (the
 * replica needs a new list: export again), -ENOENT as above.
 */
#define SFS_CACHE_SLOT_COMING (UINT32_MAX - 1)
#define SFS_CACHE_SLOT_SAME (UINT32_MAX - 2)
/* A version of a set, as exports give them: @born tells the set from a
 * later one of the same number (no two sets share a version). */
struct sfs_cache_xver {
	uint64_t born, version;
};
/* sfs_cache_export_since - as sfs_cache_export, but a chunk whose
 * exported state is what it was at version @since gets
 * SFS_CACHE_SLOT_SAME: an asker that has the list of @since learns only
 * what changed.  *now: the version this answer brings the asker to.
 * -ERANGE when @since is not one this set can answer from (another
 * set's, before its first export, or ahead of it): export in full. */
int sfs_cache_export_since(struct sfs_cache *c, uint32_t set, uint32_t obj,
			   const struct sfs_cache_xver *since, uint32_t *slots,
			   uint64_t n, uint64_t keep_ms,
			   struct sfs_cache_xver *now);
int sfs_cache_export(struct sfs_cache *c, uint32_t set, uint32_t obj,
		     uint32_t *slots, uint64_t n, uint64_t keep_ms,
		     uint64_t *version);
uint64_t sfs_cache_set_version(struct sfs_cache *c, uint32_t set);
int sfs_cache_keep(struct sfs_cache *c, uint32_t set, uint64_t version,
		   uint64_t keep_ms);

/*
 * sfs_cache_prefetch - queue pulls for the missing chunks covering
 * [off, off+len) of an object and return without waiting for them.
 * @demand: a reader is about to wait for them (they go before
 * read-ahead); else read-ahead.  Best effort: returns 0, or -errno when
 * nothing could be started.
 */
int sfs_cache_prefetch(struct sfs_cache *c, uint32_t set, uint32_t obj,
		       uint64_t off, uint64_t len, int demand);

/*
 * sfs_cache_get - pin the chunk holding byte @off of @obj, pulling it if
 * needed, and point *data at that byte; *avail is the number of valid
 * bytes from there to the end of the chunk.  *ch [borrowed, pinned]
 * must be released with sfs_cache_put.  Returns 0, -EINVAL for a range
 * outside the object, -ESTALE for a retired set, -ETIMEDOUT when no
 * holder made progress for the timeout (or no chunk came free),
 * -EBADMSG when the bytes did not match the checksum from every holder
 * tried, the error of peers that are all down, or the pull's error.
 */
int sfs_cache_get(struct sfs_cache *c, uint32_t set, uint32_t obj, uint64_t off,
		  struct sfs_chunk **ch, const uint8_t **data, size_t *avail);

void sfs_cache_put(struct sfs_cache *c, struct sfs_chunk *ch);

/*
 * sfs_cache_ahead - how far to read ahead of a sequential reader of
 * @set: about a second of the throughput of its holders together,
 * within [@min, @max] (@min until something is measured).
 */
uint64_t sfs_cache_ahead(struct sfs_cache *c, uint32_t set, uint64_t min,
			 uint64_t max);

/*
 * sfs_cache_note_silence - the source of @peer has not answered its
 * control port since @since_ms (monotonic): a read that waits on it and
 * sees no progress either counts its wait from then, so an open and its
 * read together fail within one timeout.  0 clears it.
 */
void sfs_cache_note_silence(struct sfs_cache *c, uint32_t peer,
			    uint64_t since_ms);

/* sfs_cache_peer - the state of @peer, now (a removed one's last, until
 * its memory is reused).  0 or -EINVAL. */
int sfs_cache_peer(struct sfs_cache *c, uint32_t peer,
		   struct sfs_cache_peer_info *pi);

/*
 * sfs_cache_peer_answers - @peer's source answered (its control port, as
 * the run @peer reads): a peer taken out and connected again since is
 * reported up (sfs_cache_peer) before a pull from it completes; one
 * still down or reconnecting is not.  Thread safe; a stale @peer is
 * ignored.
 */
void sfs_cache_peer_answers(struct sfs_cache *c, uint32_t peer);

void sfs_cache_stats(struct sfs_cache *c, struct sfs_cache_stats *st);

/*
 * Direct reads: bytes pulled straight into a caller's registered memory
 * (the engine API, cache/direct.c), striped and failed over like any
 * pull, never through a slot.
 *
 * sfs_cache_dst_new - [@base, @base+@len) may be read into; @mr
 * [borrowed] is its registration with the cache's transport
 * (SFS_XPORT_LOCAL_DST), NULL where the transport needs none.  *out
 * [new].  0 or -ENOMEM.
 * sfs_cache_dst_free - no more reads into it.  -EBUSY when a read that
 * gave up (timed out) is still held by the transport: the memory and
 * its registration must then stay valid until the cache is freed (the
 * transport quiesced); the dst itself is freed once that read ends.
 * NULL is fine (0).
 * sfs_cache_dst_busy - does the transport still hold a read into it
 * that gave up?  A snapshot (the answer can only go from 1 to 0).
 */
struct sfs_cache_dst;
int sfs_cache_dst_new(struct sfs_cache *c, void *base, size_t len,
		      struct sfs_xport_mr *mr, struct sfs_cache_dst **out);
int sfs_cache_dst_free(struct sfs_cache_dst *d);
int sfs_cache_dst_busy(struct sfs_cache_dst *d);

/* One read of sfs_cache_read_into. */
struct sfs_cache_rd {
	uint32_t set, obj;
	uint64_t off, len; /* bytes of the object */
	uint8_t *to;	   /* @len bytes inside @dst's range */
	struct sfs_cache_dst *dst;
	int status; /* out: 0 or -errno */
};

/*
 * sfs_cache_read_into - every read of @rds, at once.  Where checksums
 * are checked, the checksum blocks a read covers whole are pulled
 * straight into its memory and verified there; the parts of blocks at
 * its ends come through the cache's slots and are copied (a block is
 * verified whole or not at all).  Unverified sets go straight in
 * entirely.  Pulls are spread over every holder, and one whose source
 * fails or stalls is pulled again from the others (a pull moved off a
 * stalled source, whose old read may still land, is pulled into a slot
 * and copied once the old read has ended).  At most @ahead bytes are
 * in flight (0: 128 chunks).  Returns 0, or the first read's error
 * (each read's in ->status): -EINVAL (a range outside its object or
 * its dst), -ESTALE, -ETIMEDOUT, -EBADMSG, the holders' error.
 * Returns only when no pull of it still writes into the caller's
 * memory, except after -ETIMEDOUT (see sfs_cache_dst_free).  Thread
 * safe.
 */
int sfs_cache_read_into(struct sfs_cache *c, struct sfs_cache_rd *rds, size_t n,
			uint64_t ahead);

/*
 * sfs_cache_resident - how many bytes of [off, off+len) of @obj are in
 * memory now (chunks ready, not being pulled).  A snapshot for display.
 */
uint64_t sfs_cache_resident(struct sfs_cache *c, uint32_t set, uint32_t obj,
			    uint64_t off, uint64_t len);

#endif /* SFS_CACHE_H */
