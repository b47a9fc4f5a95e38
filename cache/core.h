/* SPDX-License-Identifier: MIT */
/*
 * core.h - what the files of the cache share: its structures and
 * the calls between them.  Only cache/ includes this; the layers above
 * include cache/cache.h (and cache/disk.h, cache/swarm.h).
 *
 * The files depend in one direction, each on those below it only:
 *
 *   direct.c  reads straight into a caller's registered memory
 *   cache.c   the API: sets, holders, get, put, prefetch, export, retire,
 *             stats
 *   peer.c    connections: the pull queues, choosing a holder (swarm.c's
 *             lanes), posting, completions, deadlines, failover,
 *             reconnects (the worker thread)
 *   dq.c      the disk tier's threads (disk.c's files)
 *   slab.c    the memory: mapped once, registered in segments, grown and
 *             given back by the grower thread
 *   core.c    what they all share: lists, hash, a chunk's settling, the
 *             lifetimes of sets and peers, holders' bitmaps, the disk
 *             queues, when the slab grows or shrinks
 *
 * (swarm.c and disk.c stand apart, below core.c: they know no chunk.)
 *
 * Life of a chunk:
 *
 *   FREE -> DISK (a disk thread looks for it) -> READY
 *             \-> QUEUED (not on disk)
 *   FREE -> QUEUED (on the demand or ahead queue, for any holder)
 *        -> LOADING (posted to one peer: the transport owns its memory
 *           until the callback) -> READY (verified) | QUEUED again (that
 *           peer failed, another holder serves it) | FAILED
 *
 * A LOADING chunk whose peer is taken out (stalled, removed, reset) is
 * orphaned: out of the hash and of its peer's list, its slot waits for
 * the transport's callback; its readers start it again.  READY chunks
 * nobody pins are on the LRU; FAILED ones are freed when the last pin
 * goes.  Every field marked so is protected by c->lock.
 */
#ifndef SFS_CACHE_CORE_H
#define SFS_CACHE_CORE_H

#include "cache/cache.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct sfs_disk_src;
struct sfs_xport_mr;

#define SFS_NONE SFS_CACHE_NONE

enum chunk_state {
	CH_FREE,
	CH_DISK,    /* queued for, or being read by, a disk thread */
	CH_QUEUED,  /* waiting for a peer that can serve it */
	CH_LOADING, /* posted: owned by the transport until its callback */
	CH_READY,
	CH_FAILED,
};

/* Every field is protected by c->lock, except data and mr (fixed when
 * its segment is ready). */
struct sfs_chunk {
	struct sfs_cache *c;
	uint8_t *data;		 /* this slot's memory */
	struct sfs_xport_mr *mr; /* its segment's registration */
	uint32_t set, obj;
	uint64_t idx;
	uint32_t len;
	unsigned int mismatches; /* pulls of it that did not match */
	/* Its pulls that failed in the transport beside others on their
	 * connection: the failure may have been another's (peer.c,
	 * pull_failed); pulled again alone. */
	unsigned int xfails;
	int solo;	/* LOADING: posted alone on its connection */
	uint32_t avoid; /* a holder whose bytes did not match */
	enum chunk_state state;
	int refs; /* readers pinning it */
	int err;
	int demand;	   /* QUEUED or DISK: a reader waits for it */
	uint32_t peer;	   /* LOADING: index into c->peers */
	uint16_t peer_gen; /* its gen when posted: a READY direct chunk
			      checked later names its peer only if the
			      slot was not reused meanwhile */
	uint32_t holder;   /* LOADING: whose pieces were read */
	uint64_t seq;	   /* LOADING: post order on its peer */
	uint64_t posted_ms;
	uint64_t posted_ns;    /* LOADING: for the latency histogram */
	uint64_t queued_ms;    /* QUEUED: since */
	uint64_t held_ms;      /* QUEUED: a holder had it since, or 0 */
	uint64_t coming_ms;    /* QUEUED: a holder had it coming since, or 0 */
	uint64_t lost_ms;      /* QUEUED, fleet lanes: its parent seemed to
				  have lost it since, or 0 */
	uint64_t overtaken_ms; /* LOADING: a later post completed first */
	int orphan; /* LOADING, but out of the hash: its slot waits for the
		       transport's callback */
	int listed; /* READY: named in an export of its set: not evicted
		       while the set's keep lasts (keep_until_ms) */
	uint64_t freed_keep_ms; /* FREE: freed while listed, another replica
				   may read it until then: not given back
				   before (slab.c) */
	int bare;     /* FREE, given back (on c->bare, or being given back or
		     committed again by the grower) */
	int consumed; /* READY: a reader took it since it was pulled (a
			 slot whose reuse loses nobody a read-ahead) */
	/* A direct read (direct.c): the bytes go to a caller's memory, not
	 * a slot; never hashed, on the LRU or stored.  @start is its first
	 * byte in the object (a slot's is idx << chunk_shift), @abandoned
	 * says its reader gave up while the transport still had it (the
	 * callback frees it). */
	struct sfs_cache_dst *dst;
	uint64_t start;
	int abandoned;
	int unverified; /* direct, READY: its reader checks the checksums
			   (on its own thread, beside the transport's) */
	/* LOADING (and after, until it is pulled again): to be checked
	 * against SHA-256 (sfs_cache_verify): posted on a peer that is no
	 * seed (@member), or cfg.sha256_all */
	int strong, member;
	/* A try of it on a peer that is no seed failed (stalled, hedged,
	 * did not match, failed): the next one goes to a seed that has it
	 * (swarm.h's seed_next) */
	int seed_next;
	struct sfs_chunk *vnext; /* on c->vq: waits for a verifier */
	int landed; /* LOADING: its bytes came, its check waits (c->vq): not
		       hedged, its peer made progress */
	struct sfs_chunk *hnext; /* hash chain */
	/* LRU (READY, unpinned), free list, a queue (QUEUED), its peer's
	 * list of posted chunks (LOADING), or a disk queue (DISK; READY and
	 * pinned by its store) */
	struct sfs_chunk *prev, *next;
};

struct list {
	struct sfs_chunk *head, *tail;
	size_t n; /* chunks on it */
};

/* One content.  Protected by c->lock but for what never changes.  It
 * lives until its owner released it (sfs_cache_release_set) and nothing
 * of the cache names it any more: then it is freed, its release
 * callback called, and its number given to a later set. */
struct cache_set {
	char *label;
	size_t nobjs;
	struct sfs_cache_obj *objs; /* their checksums borrowed: see release */
	int retired;
	/* What names the set: chunks (slots not FREE, direct chunks), and
	 * holders not yet removed by their owner.  A chunk's set, or a
	 * holder's, stays while it lives: a chunk verified outside the lock
	 * reads the set's checksums. */
	size_t refs;
	int released; /* its owner is done with it */
	/* Called (c->lock held: it must not call the cache) when the set
	 * is freed: what its objects borrowed may go. */
	void (*release)(void *arg);
	void *release_arg;
	struct sfs_disk_src *disk; /* NULL: memory only */
	size_t nholders, cap_holders;
	uint32_t *holders;     /* live holders of this set */
	uint64_t last_done_ms; /* a pull of this set completed */
	uint64_t version;      /* chunks were posted, became ready, failed or
			     left: an export is old (a number of c->clock:
			     no two sets share one) */
	uint64_t born;	       /* c->clock when it was added */
	/* Per object, per chunk: the version its exported state (slot,
	 * coming, not held) last changed at (sfs_cache_touch), so an
	 * export says only what changed since a version
	 * (sfs_cache_export_since).  NULL until the first export; then
	 * every chunk's is that export's version. */
	uint64_t **stamps;
	uint64_t stamped_at; /* its version when the stamps began */
	/* Its chunks an export listed are not evicted before then:
	 * sfs_cache_export, renewed by sfs_cache_keep while the set's
	 * version stays that of the list. */
	uint64_t keep_until_ms;
	uint64_t *base; /* per object: the set's chunk number of its first */
	/* Lanes (sfs_cache_set_lanes), in key order: chunk g is member
	 * g mod nlanes's to pull from a last-resort peer; lanes[i] its
	 * holder, SFS_NONE for this cache itself (lane_me; SIZE_MAX: not
	 * a member). */
	struct sfs_cache_lane *lanes;
	size_t nlanes, lane_me;
	int fleet;	  /* the lanes are the fleet's (sfs_cache_set_fleet) */
	uint64_t nchunks; /* chunks of all its objects */
};

/* One peer serving one set.  Protected by c->lock. */
struct cache_holder {
	uint32_t set, peer;
	size_t nobjs;
	struct sfs_cache_hobj *objs; /* owned array; pieces borrowed */
	int partial;
	uint64_t **has;	   /* partial: a bitmap of chunks per object */
	uint64_t **coming; /* partial: ... of chunks being pulled (not held) */
	uint64_t nheld;	   /* partial: chunks it holds */
	uint64_t ncoming;  /* partial: chunks it has coming */
	uint64_t grew_ms;  /* partial: when it last held or had coming more */
	size_t lane;	   /* its index in its set's lanes, or SIZE_MAX */
	int removed;	   /* no longer serves its set: @objs, @has and @coming
			freed; the struct stays until its owner removes it
			(sfs_cache_remove_holder), then its number is reused */
	/* partial: its pieces are not read from then on (0: no end; the
	 * keep its source gave them, sfs_cache_holder_expire), and
	 * @expired says that time has come (set by the worker, or by a
	 * pick that finds it so): it holds nothing meanwhile */
	uint64_t expires_ms;
	int expired;
};

/*
 * Peer numbers.  What callers hold is gen << 16 | index: an index is
 * reused once its peer is removed and nothing names it (no pull posted
 * on it, no holder, no reconnect under way), with gen one higher, so a
 * number kept past sfs_cache_remove_peer names nothing (-EINVAL)
 * rather than the source that got the index next.  Index 0xffff is
 * never given: no number is SFS_CACHE_NONE.  A gen wraps after 65,536
 * reuses of one index.
 */
#define SFS_PEER_ID(i, g) ((uint32_t)(g) << 16 | (uint32_t)(i))
#define SFS_PEER_IDX(id) ((uint32_t)(id)&0xffffu)
#define SFS_PEER_GEN(id) ((uint16_t)((uint32_t)(id) >> 16))
#define SFS_PEERS_MAX 0xffffu

/* The connection to one source.  Protected by c->lock. */
struct cache_peer {
	uint64_t id;	   /* the transport's */
	uint16_t gen;	   /* of its index (SFS_PEER_ID) */
	int vacant;	   /* removed, and its index free for the next */
	unsigned int pins; /* LOADING chunks posted on it, and a post()
			       between its unlock and relock: its struct
			       is not reused while any is */
	char label[160];
	enum sfs_peer_state state;
	int err;		/* not UP: why */
	uint64_t since_ms;	/* in this state since */
	uint64_t down_until_ms; /* DOWN: then it is tried again */
	uint64_t down_ms;	/* when it last went DOWN; 0 once a pull
				   completed since (reported as down until
				   then: reconnecting to a dead process can
				   succeed) */
	unsigned int failures;	/* stalls and failed reconnects since the
				   last pull that completed */
	int repair;		/* a reconnect is wanted */
	int repairing;		/* the worker is at it */
	int unconnected;	/* connecting again failed: no pull is posted
				   before a reconnect succeeds */
	uint64_t repair_after_ms;
	const char *why; /* what asked for the reconnect */
	struct list loading;
	unsigned int inflight, window;
	uint64_t busy_until_ms; /* the provider said "busy": not before */
	uint64_t post_seq;
	uint64_t last_done_ms; /* a pull completed (any outcome) */
	uint64_t last_ok_ms;   /* a pull completed with the bytes */
	uint64_t silent_since; /* the control port has been silent */
	uint64_t busy_ns, busy_mark_ns, busy_bytes;
	double rate;	 /* bytes/s while busy */
	double lat_ms;	 /* a pull's time from post to bytes, averaged */
	size_t nholders; /* live holders on it */
	int removed;	 /* gone for good */
	int last_resort; /* takes only what no other holder up has */
	/* A seed this replica reached over its authenticated control
	 * channel (sfs_cache_peer_trusted): its chunks are checked against
	 * XXH3-64.  Any other peer's against SHA-256, and it proves itself
	 * by serving: until a pull from it verified (and again after one of
	 * its pulls failed, stalled, was hedged or did not match: @fails in
	 * a row, halved by each one that verifies), it keeps no seed off a
	 * chunk, takes one pull at a time, none while the transport still
	 * has one moved off it (@orphans), no chunk a reader waits for that
	 * a seed has, and after a failure none before @probe_after_ms (1 s,
	 * doubling with @fails, at most 30 s). */
	int trusted;
	int proven;
	unsigned int fails;
	uint64_t probe_after_ms;
	unsigned int orphans; /* its orphaned pulls the transport still has */
	/* Its next this many pulls go alone, one at a time: pulls that
	 * failed beside others wait to be tried so (pull_failed). */
	unsigned int solo_left;
	uint64_t busy_since_ms; /* no seed: the provider said "busy" to every
				   post since (0: it took the last one) */
	/* Its pick found nothing at c->pick_epoch none_epoch; that holds
	 * until the epoch moves or none_until (a wait's end; UINT64_MAX:
	 * none).  Protected by c->lock. */
	uint64_t none_epoch, none_until;
	uint64_t avoid_until_ms; /* stalled while others could serve:
				    until then, only what they cannot */
	uint64_t avoided_ms;	 /* when that hold began (0: never) */
	uint64_t pulls, bytes, errors, checksum_errors, stalls;
};

#define DISK_THREADS 2
#define SFS_CACHE_VERIFIERS_MAX 8
#define SFS_SEED_NEXT_SLOTS 1024
#define SFS_SEED_NEXT_MS 60000 /* a chunk's seed_next is kept this long */
#define SFS_CACHE_CHQ 32       /* readers' wait queues (c->chq) */

#define SFS_REFUSED_MAX 8 /* objects refused at once (peer.c) */

/* An object whose pull failed alone on its connection (cache/peer.c,
 * pull_failed): its chunks fail with @err, unpulled, until @until_ms. */
struct sfs_refused {
	uint64_t born; /* its set's (cache_set.born); 0: unused */
	uint32_t obj;
	unsigned int times; /* refused in a row: the hold doubles */
	int err;
	uint64_t until_ms;
};

struct cache_seg {
	uint8_t *base;
	size_t len;
	struct sfs_xport_mr *mr;
};

struct sfs_cache {
	struct sfs_xport *x;
	uint8_t *slab;
	size_t slab_len;
	uint32_t chunk_size;
	unsigned int chunk_shift;
	unsigned int timeout_ms;
	int verify;	/* check pulled chunks against their checksums */
	int sha256_all; /* cfg's: a seed's chunks against SHA-256 too */
	unsigned int test_verify_delay_ms; /* cfg's: tests only */
	uint64_t wake_ms;   /* a chunk held back (a relay tree, a pull
				  coming elsewhere) may go then (0: none) */
	double seed_lat_ms; /* a last-resort peer's pull time, averaged;
			       protected by lock */
	int (*reconnect)(void *arg, uint32_t peer, uint64_t id,
			 uint64_t *new_id);
	void *reconnect_arg;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* any chunk changed state, was put, or a peer
				changed state */
	/* Readers waiting for one chunk (sfs_peer_wait) wait on its queue,
	 * not on cond: a chunk that lands wakes its own readers, not every
	 * reader of the mount (ten FUSE threads each woke for every chunk
	 * and fought for lock).  Anything else that may concern them wakes
	 * every queue (sfs_cache_wake).  With lock. */
	pthread_cond_t chq[SFS_CACHE_CHQ];
	unsigned chq_waiters; /* protected by lock */
	uint64_t clock;	      /* the last set version given; protected by
				lock */
	size_t nslots;
	struct sfs_chunk *slots;
	size_t nbuckets;	    /* power of two */
	struct sfs_chunk **buckets; /* protected by lock */
	struct list lru;    /* READY, unpinned, read: protected by lock */
	struct list unread; /* READY, unpinned, nobody has read it since it
			       was pulled (read-ahead): protected by lock */
	struct list free;   /* protected by lock */
	size_t nfree;	    /* protected by lock */
	size_t loading;	    /* protected by lock */
	/* Chunks waiting for a peer: demand before read-ahead.  Protected
	 * by lock. */
	struct list demand, ahead;
	size_t queued;
	/* Sets and holders by number; NULL: free, its number on the free
	 * list (reused before the arrays grow).  A set stays while
	 * anything names it (struct cache_set), a holder until its owner
	 * removes it.  Protected by lock. */
	size_t nsets, cap_sets;
	struct cache_set **sets;
	size_t nfree_sets, cap_free_sets, live_sets;
	uint32_t *free_sets;
	size_t nholders, cap_holders;
	struct cache_holder **holders;
	size_t nfree_holders, cap_free_holders, live_holders;
	uint32_t *free_holders;
	size_t npeers, cap_peers;	    /* protected by lock */
	struct cache_peer **peers;	    /* protected by lock; a removed one
				      stays until nothing names it, then
				      its index goes on the free list */
	size_t nfree_peers, cap_free_peers; /* protected by lock */
	uint32_t *free_peers;		    /* protected by lock */
	/* What a pick decided on: bumped by anything that may let a peer
	 * take a chunk it could not (sfs_peer_wake_worker: holdings,
	 * lanes, peers' states; a chunk queued), and every
	 * PICK_EPOCH_MS by the worker; and when it was last bumped so.
	 * Then the facts of the holders one pick looks at (cache/peer.c).
	 * Protected by lock. */
	uint64_t pick_epoch, pick_epoch_ms, picks;
	uint64_t worker_until_ms;	  /* the worker sleeps until then (0: it
				     does not sleep) */
	struct sfs_pick_fact *pick_facts; /* by holder number */
	size_t cap_pick_facts;
	struct sfs_refused refused[SFS_REFUSED_MAX]; /* protected by lock */
	struct sfs_cache_stats st;		     /* protected by lock */
	int stopping;				     /* protected by lock */
	/* sfs_cache_end_waits: waiting readers end with -ESHUTDOWN
	 * (protected by lock) */
	int waits_ended;

	/* The slab's segments; ready_bytes (the slots' memory committed:
	 * in use or on the free list) and next_seg (the first segment not
	 * yet faulted in and registered) protected by lock.  The grower
	 * commits more when fewer than SFS_SLAB_AHEAD bytes are free, and
	 * gives free slots back (to the bare list) past that (grow_cond,
	 * protected by lock; cache/slab.c). */
	size_t nsegs;
	struct cache_seg *segs;
	uint64_t ready_bytes;
	size_t next_seg;
	struct list bare; /* registered slots given back (MADV_DONTNEED):
			     committed again before use; protected by lock */
	size_t nbare;	  /* protected by lock */
	int give_back;	  /* the transport does not pin memory: free slots
			     past SFS_SLAB_AHEAD are given back */
	int hold_all;	  /* cfg.hold_all: grow rather than reuse a chunk */
	uint64_t
		grow_target; /* ready wanted by a prefetch; protected by lock */
	pthread_cond_t grow_cond;
	pthread_t grower;
	int grower_started;   /* protected by lock */
	int grow_failed;      /* protected by lock: no new segment comes */
	size_t committing;    /* protected by lock: slots the grower is
			       bringing, the lock dropped */
	size_t wanting;	      /* protected by lock: prefetches that asked */
	int shrinking;	      /* protected by lock: giving back down to
			       SFS_SLAB_AHEAD free (SFS_CACHE_IDLE_KEEP
			       when idle) */
	unsigned int idle_ms; /* cfg.idle_ms */
	/* give_back found nothing whole to give: not tried again before
	 * give_after_ms (then give_retry_ms later each time, up to 30 s;
	 * 1 s again once nothing is too much).  Protected by lock. */
	uint64_t give_after_ms;
	unsigned int give_retry_ms;
	uint64_t used_ms; /* protected by lock: a slot last taken */

	/* The worker: posts what completions made room for, finds stalled
	 * peers, reconnects. */
	pthread_cond_t work_cond; /* protected by lock */
	int work;		  /* protected by lock: something to do */
	pthread_t worker;
	int worker_started;

	/* Verifiers: pulls from peers that are no seed are checked against
	 * SHA-256 on these threads, off the transport's (whose thread only
	 * queues them), in parallel.  The queue (by vnext) and vq_n are
	 * protected by lock. */
	pthread_cond_t vq_cond;
	struct sfs_chunk *vq_head, *vq_tail;
	size_t vq_n;
	size_t nverifiers;
	pthread_t verifiers[SFS_CACHE_VERIFIERS_MAX];
	/* Chunks whose try on a peer that is no seed failed (seed_next),
	 * remembered past the chunk (a moved pull's readers start it anew
	 * in another slot): by hash, the newest kept.  Protected by lock. */
	struct sfs_seed_next {
		uint64_t born; /* its set's (a set number is reused) */
		uint64_t idx;
		uint32_t obj;
		uint64_t until_ms; /* 0: empty */
	} seed_next[SFS_SEED_NEXT_SLOTS];

	/* The disk tier: its queues are protected by lock. */
	struct sfs_disk *disk;
	pthread_cond_t disk_cond; /* a queue grew, or stop */
	struct list dloads;	  /* loads: before stores */
	struct list dstores;
	size_t dq_stores; /* STOREs queued or being written */
	size_t nthreads;
	pthread_t threads[DISK_THREADS];
};

/* A caller's registered memory that direct reads pull into (direct.c). */
struct sfs_cache_dst {
	struct sfs_cache *c;
	uint8_t *base;
	size_t len;
	struct sfs_xport_mr *mr;
	size_t held; /* abandoned pulls the transport still has; protected
			by c->lock */
	int freed;   /* protected by c->lock */
};

/* The list an unpinned READY chunk @ch is on (c->lock held). */
static inline struct list *sfs_cache_lru_of(struct sfs_cache *c,
					    const struct sfs_chunk *ch)
{
	return ch->consumed ? &c->lru : &c->unread;
}

/* The first byte of @ch in its object. */
static inline uint64_t sfs_chunk_off(const struct sfs_cache *c,
				     const struct sfs_chunk *ch)
{
	return ch->dst ? ch->start : ch->idx << c->chunk_shift;
}

/*
 * core.c (c->lock held unless said)
 */
/* Lists of chunks (a chunk is on one at a time). */
void sfs_list_del(struct list *l, struct sfs_chunk *ch);
void sfs_list_add_tail(struct list *l, struct sfs_chunk *ch);
void sfs_list_add_head(struct list *l, struct sfs_chunk *ch);
/* The hash: the bucket of (@set, @obj, @idx); the chunk there or NULL;
 * out of the hash (harmless if it is not). */
size_t sfs_cache_bucket(const struct sfs_cache *c, uint32_t set, uint32_t obj,
			uint64_t idx);
struct sfs_chunk *sfs_cache_lookup(struct sfs_cache *c, uint32_t set,
				   uint32_t obj, uint64_t idx);
void sfs_cache_unhash(struct sfs_cache *c, struct sfs_chunk *ch);
/* A chunk nobody pins any more goes to the LRU, or is freed if failed
 * or its set retired.  Wakes @ch's readers and cond's waiters. */
void sfs_cache_settle(struct sfs_cache *c, struct sfs_chunk *ch);
/* Wake every waiter: cond's, and readers waiting for any chunk (c->lock
 * held). */
void sfs_cache_wake(struct sfs_cache *c);
/* @ch changed state, nothing else did: wake its readers and cond's
 * waiters (those of slots and direct reads), not other chunks' readers
 * (c->lock held). */
void sfs_cache_wake_chunk(struct sfs_cache *c, const struct sfs_chunk *ch);
/* The queue @ch's readers wait on. */
static inline pthread_cond_t *sfs_cache_chq(struct sfs_cache *c,
					    const struct sfs_chunk *ch)
{
	return &c->chq[((uintptr_t)ch / sizeof(*ch)) % SFS_CACHE_CHQ];
}
/* Chunk @ch now names its set (a slot taken for it, a direct chunk
 * made), or no longer does (a slot freed, a direct chunk freed): the
 * set is freed when it was released and that was the last thing naming
 * it. */
void sfs_cache_set_hold(struct sfs_cache *c, uint32_t set);
void sfs_cache_set_drop(struct sfs_cache *c, uint32_t set);
/* Set @si was released and nothing names it: freed, its disk source
 * too, its owner told, its number free for a later set. */
void sfs_cache_set_free(struct sfs_cache *c, uint32_t si);
/* A set's stamps; a set's structure and all it owns (NULL is fine). */
void sfs_cache_stamps_free(struct cache_set *s);
void sfs_cache_set_struct_free(struct cache_set *s);
/* An abandoned direct chunk's callback frees it (direct.c made it). */
void sfs_cache_dst_release(struct sfs_cache *c, struct sfs_chunk *ch);
/* The disk tier's queues (dq.c's threads take from them): look for
 * @ch on disk first; store a freshly pulled @ch behind the readers. */
void sfs_cache_load_later(struct sfs_cache *c, struct sfs_chunk *ch);
void sfs_cache_store_later(struct sfs_cache *c, struct sfs_chunk *ch);
/* The test's wait before a pulled chunk is verified
 * (cfg.test_verify_delay_ms; c->lock not held). */
void sfs_cache_test_delay(struct sfs_cache *c);
/* The live peer numbered @id (SFS_PEER_ID), or NULL: out of
 * range, removed, or its index reused since. */
struct cache_peer *sfs_peer_at(struct sfs_cache *c, uint32_t id);
/* The peer @ch was posted on, if its index was not reused since (it
 * may be removed), else NULL. */
struct cache_peer *sfs_peer_of(struct sfs_cache *c, const struct sfs_chunk *ch);
/* Index @pi's peer, if removed and named by nothing (no pin, holder or
 * reconnect), becomes vacant: its index is free for the next peer. */
void sfs_peer_reclaim(struct sfs_cache *c, uint32_t pi);
/* One pin of @pi's less (then reclaimed if that was the last). */
void sfs_peer_unpin(struct sfs_cache *c, uint32_t pi);

/* Does holder @h hold chunk @idx of @obj?  Have it coming
 * (partial, being pulled there)?  (c->lock held) */
int sfs_holder_has(const struct cache_holder *h, uint32_t obj, uint64_t idx);
int sfs_holder_coming(const struct cache_holder *h, uint32_t obj, uint64_t idx);
/* @ch's exported state (slot, coming, not held) changes, or may have:
 * its set's version moves, and @ch's stamp with it (c->lock held). */
static inline void sfs_cache_touch(struct sfs_cache *c,
				   const struct sfs_chunk *ch)
{
	struct cache_set *s = c->sets[ch->set];
	s->version = ++c->clock;
	if (s->stamps && s->stamps[ch->obj])
		s->stamps[ch->obj][ch->idx] = s->version;
}
/* When the slab should grow (a step still fits under SFS_SLAB_AHEAD
 * free, or nothing is free, or a prefetch wants more ready), how many
 * bytes of free slots it should give back now, whether it can grow at all (more
 * slots may come: taking a chunk another replica may be reading can
 * wait for them), and the grower woken when one of those holds. */
#define SFS_SLAB_SEG (8u << 20)	      /* a segment: faulted in, registered */
#define SFS_SLAB_AHEAD (64ull << 20)  /* free ready bytes, at most */
#define SFS_SLAB_GROUP (2u << 20)     /* given back whole: one huge page */
#define SFS_SLAB_SPARE (128ull << 20) /* free + reusable, not holding all */
int sfs_slab_short(const struct sfs_cache *c);
/* Free bytes the slab keeps ready: SFS_SLAB_AHEAD, or SFS_CACHE_IDLE_KEEP
 * once no slot was taken for c->idle_ms and no prefetch asks (c->lock
 * held). */
uint64_t sfs_slab_ahead(const struct sfs_cache *c, uint64_t now);
uint64_t sfs_slab_long(struct sfs_cache *c); /* bytes */
int sfs_slab_can_grow(const struct sfs_cache *c);
void sfs_slab_want(struct sfs_cache *c);

/*
 * slab.c: the memory (the grower thread; no lock unless said)
 */
int sfs_slab_new(struct sfs_cache *c, char *err, size_t errlen);
int sfs_slab_start(struct sfs_cache *c);
void sfs_slab_join(struct sfs_cache *c);
void sfs_slab_free(struct sfs_cache *c);

/*
 * dq.c: the disk tier's threads
 */
void *sfs_dq_thread(void *arg);
/* Every chunk still waiting for a disk thread fails, every store is
 * given up (c->lock held, stopping). */
void sfs_dq_drop(struct sfs_cache *c);

/*
 * peer.c
 */
/* peer.c: 0 when every checksum chunk of @ch matches @o's, else
 * -EBADMSG (logged naming @set and @label, unless NULL).  @strong: its
 * bytes came from a peer that is no seed: checked against SHA-256, and
 * an object without SHA-256 never passes; else against XXH3-64 (a seed
 * reached over its authenticated control channel, the disk tier), and
 * an object without checksums always does.  Runs outside the lock: the
 * slot is owned by its pull or disk load, @o is a copy, the labels
 * stay. */
int sfs_cache_verify(struct sfs_cache *c, struct sfs_chunk *ch,
		     const struct sfs_cache_obj *o, int strong, const char *set,
		     const char *label);
/* Can a seed (a trusted peer) that is up serve @ch now?  (c->lock) */
int sfs_peer_seed_has(struct sfs_cache *c, const struct sfs_chunk *ch);
void *sfs_peer_verifier(void *arg); /* a verifier thread (no lock) */
/* (c->lock held unless said) */
/* Queue @ch (hashed, state FREE or DISK) for any holder. */
void sfs_peer_enqueue(struct sfs_cache *c, struct sfs_chunk *ch, int demand);
/* A reader now waits for @ch: move it before the read-ahead. */
void sfs_peer_promote(struct sfs_cache *c, struct sfs_chunk *ch);
/* Post what the windows allow; drops the lock while posting. */
void sfs_peer_pump(struct sfs_cache *c);
/* 0 when some holder of @set may serve a read now, else the error of
 * its holders (all down).  A peer whose hold is over is tried again. */
int sfs_peer_set_usable(struct sfs_cache *c, uint32_t set);
/* Wait for @ch (pinned) to leave DISK/QUEUED/LOADING; @start: when the
 * reader came.  0 (READY), -EAGAIN (orphaned: start it again) or
 * -errno; counts what it gives up. */
int sfs_peer_wait(struct sfs_cache *c, struct sfs_chunk *ch, uint64_t start);
/* Fail every queued chunk of @set (SFS_NONE: all) with @err. */
void sfs_peer_fail_queued(struct sfs_cache *c, int err, uint32_t set);
/* A read whose pull moved to other holders (sfs_peer_wait's -EAGAIN)
 * waits on them with its clock started again, within a budget: once
 * SFS_CACHE_MOVE_BUDGET x --timeout have passed since @first (the read's
 * start), it fails with -ETIMEDOUT, so sources that stall in turn
 * cannot keep a reader waiting forever (c->lock held).  Else *@start is
 * now and 0 is returned. */
int sfs_cache_moved(struct sfs_cache *c, uint64_t first, uint64_t *start);
/* The same for a reader whose chunk @ch (pinned) was moved: a try on a
 * peer that is no seed, of a chunk a seed has, uses none of the
 * budget (its next try is that seed's). */
int sfs_cache_moved_off(struct sfs_cache *c, const struct sfs_chunk *ch,
			uint64_t first, uint64_t *start);
/* Orphan the chunks posted to @p (of holder @holder only, unless
 * SFS_NONE): they are pulled again from the holders still there.
 * Returns how many of them another source can serve (failovers, for
 * the callers whose source left; a reconnect's retries are not). */
size_t sfs_peer_orphan(struct sfs_cache *c, struct cache_peer *p,
		       uint32_t holder);
void sfs_peer_wake_worker(struct sfs_cache *c);
void *sfs_peer_worker(void *arg); /* the thread (no lock) */
/* The transport's completion callback. */
void sfs_peer_on_pulled(void *arg, int status);
/* Direct chunk @ch (READY, unverified) did not match: counted as a
 * failed pull and pulled again (another holder preferred), or failed. */
void sfs_peer_mismatch(struct sfs_cache *c, struct sfs_chunk *ch);

/*
 * cache.c
 */
/* Find or start chunk @idx of (@set, @obj) (c->lock held; see
 * there). */
struct sfs_chunk *sfs_cache_find_or_start(struct sfs_cache *c, uint32_t set,
					  uint32_t obj, uint64_t idx,
					  int pinned, int demand, int *rc);
/* 0 when @off is inside (@set, @obj) and the set is live. */
int sfs_cache_check_range(struct sfs_cache *c, uint32_t set, uint32_t obj,
			  uint64_t off);

#endif /* SFS_CACHE_CORE_H */
