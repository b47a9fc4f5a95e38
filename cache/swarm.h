/* SPDX-License-Identifier: MIT */
/*
 * swarm.h - the swarm's policy: from whom a queued chunk is pulled, the
 * lanes that share a seed's chunks among replicas, the relay trees that
 * pass them on.  No threads, no I/O, no clock and no allocation: the
 * caller says what it knows (struct sfs_swarm, its callbacks) and what
 * time it is.  The cache calls it under its lock (cache/peer.c), the
 * fleet simulator with its own model of the holders (sim/); both run
 * the same decisions.
 *
 * Holders are numbers the caller gives: each holds some chunks of one
 * content (one set) on one peer.  A chunk is (object, index); its number
 * in the content is base[object] + index.
 */
#ifndef SFS_SWARM_H
#define SFS_SWARM_H

#include "cache/cache.h"

#include <stddef.h>
#include <stdint.h>

/* What the policy knows of one holder and its peer. */
struct sfs_swarm_member {
	uint32_t peer;		 /* its peer's number (compared, not used) */
	size_t lane;		 /* its index in the lanes, or SIZE_MAX */
	uint64_t grew_ms;	 /* its holdings last grew (partial holders) */
	uint64_t avoid_until_ms; /* its peer stalled: shy until then */
	double lat_ms;		 /* its peer's usual pull time (0: unknown) */
	unsigned int last_resort : 1; /* a seed: kept off what members hold */
	unsigned int answers : 1;     /* up, its control port not silent */
	unsigned int distrusted : 1;  /* served wrong bytes too often */
	unsigned int removed : 1;     /* no longer serves its content */
	/* A seed, or a member that served (a pull from it verified) since
	 * its last failure: only such a member keeps a seed off a chunk it
	 * holds, and only it is waited for longer than a lane's idle time
	 * for chunks it claims to be growing towards. */
	unsigned int proven : 1;
	unsigned int failed : 1; /* a member whose last try failed, stalled
				    or was hedged: not waited for */
};

struct sfs_swarm_ops {
	/* Does holder @h hold chunk (@obj, @idx) (@coming 0), or is it
	 * being pulled there (@coming 1)? */
	int (*has)(void *arg, uint32_t h, uint32_t obj, uint64_t idx,
		   int coming);
	/* Holder @h's facts into *@m: 0, or -ENOENT when @h names no
	 * holder. */
	int (*member)(void *arg, uint32_t h, struct sfs_swarm_member *m);
};

/* One content as this replica sees it now; everything borrowed. */
struct sfs_swarm {
	const struct sfs_swarm_ops *ops;
	void *arg;
	const uint32_t *holders; /* its live holders */
	size_t nholders;
	const uint64_t *base; /* per object: the number of its first chunk */
	size_t nobjs;
	uint64_t nchunks; /* in all (0: not said; only fleet lanes ask, and
			     each object's chunks must reach the next's
			     base: has() is asked of g + n below it) */
	/* Lanes, in key order: chunk g is lanes[g mod nlanes]'s to pull
	 * from a seed; .holder SFS_CACHE_NONE for this replica (lane_me;
	 * SIZE_MAX: no member), SFS_CACHE_LANE_UNKNOWN for one not
	 * connected yet. */
	const struct sfs_cache_lane *lanes;
	size_t nlanes, lane_me;
	double seed_lat_ms; /* a pull from a seed takes this long (0: ?) */
	/* The lanes are the fleet's (every replica, in the seed's order; the
	 * members this replica works with are those at offsets -1, -2,
	 * -4, ... from it): chunk g goes down a binomial tree rooted at
	 * its owner, offset d taking it from offset d minus its highest
	 * bit (members at offsets up to 2^15: at most 65,536 replicas).
	 * 0: the lanes are this replica and its members, a binary relay
	 * tree among them.  (A cache sets 1 with sfs_cache_set_fleet.) */
	int fleet;
	uint64_t now;
	/* [out] the earliest time a wait said "not yet" ends: look again
	 * then (0: none).  Only lowered. */
	uint64_t wake_ms;
};

/* A queued chunk as the policy sees it. */
struct sfs_swarm_chunk {
	uint32_t obj;
	uint64_t idx;
	uint32_t avoid;		 /* the holder that served it wrong, or
				    SFS_CACHE_NONE */
	unsigned int mismatches; /* its pulls that did not match */
	/* A try of it on a member failed (stalled, was hedged, did not
	 * match): a seed that has it takes it at once, no member does */
	unsigned int seed_next : 1;
	/* A read straight into a caller's memory: only a seed serves it
	 * (a member's late bytes could land there after the read moved
	 * on), at once */
	unsigned int direct : 1;
	unsigned int demand : 1; /* a reader waits for it (not read-ahead) */
	/* [out] a member said it was coming and it did not come within
	 * the wait: a seed takes it, and that member failed */
	unsigned int coming_late : 1;
	uint64_t queued_ms; /* when it was queued */
	uint64_t held_ms;   /* [in/out] a lane member held it since, or 0 */
	uint64_t coming_ms; /* [in/out] a member had it coming since, or 0 */
	uint64_t lost_ms;   /* [in/out] fleet lanes: its parent seemed to
			       have lost it since, or 0 */
};

/*
 * sfs_swarm_takes - may the peer of holder @hi (@p its facts) take chunk
 * @ch now?  @help: a seed also takes a lagging member's chunk.  The
 * caller checked already that @hi holds @ch and may be read.  1 or 0;
 * may note a time in sw->wake_ms and first-seen times in @ch.
 */
int sfs_swarm_takes(struct sfs_swarm *sw, struct sfs_swarm_chunk *ch,
		    const struct sfs_swarm_member *p, uint32_t hi, int help);

/*
 * sfs_swarm_lane - whose lane @ch is in: the holder (SFS_CACHE_NONE:
 * this replica's, or no lanes: *any 0; SFS_CACHE_LANE_UNKNOWN: a member
 * not connected yet).
 */
uint32_t sfs_swarm_lane(const struct sfs_swarm *sw,
			const struct sfs_swarm_chunk *ch, int *any);

/*
 * sfs_swarm_lane_wait - is @ch another member's to pull from the seeds,
 * and is that member worth waiting for?  1 or 0.
 */
int sfs_swarm_lane_wait(const struct sfs_swarm *sw,
			const struct sfs_swarm_chunk *ch);

/*
 * sfs_swarm_member_has - does a holder that is no seed, not on peer
 * @not_peer, and can serve now hold @ch (@coming 0) or have it coming
 * (1)?  1 or 0.
 */
int sfs_swarm_member_has(const struct sfs_swarm *sw,
			 const struct sfs_swarm_chunk *ch, uint32_t not_peer,
			 int coming);

/* The relay tree of chunk g among n lane members: the rank of member
 * @me when @owner pulls it from the seeds, its parent's rank, and its
 * depth (floor(log2(rank + 1))). */
size_t sfs_swarm_rank(size_t me, size_t owner, size_t n);
size_t sfs_swarm_parent(size_t rank);
unsigned int sfs_swarm_depth(size_t rank);

#endif
