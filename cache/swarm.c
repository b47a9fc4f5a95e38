/* SPDX-License-Identifier: MIT */
/*
 * swarm.c - the swarm's policy (see swarm.h): pure decisions over what
 * the caller knows.
 *
 * Lanes.  Replicas that load one content together (re-seeders that
 * prefetch it) each pull a share from the seeds (chunk g is member g
 * mod n's, members in key order), and the rest from each other: a seed
 * then sends each chunk about once, not once per replica.  A chunk of
 * another member waits for it while it makes progress (its holdings
 * grow), then is pulled from a seed all the same.
 *
 * Relay trees.  A chunk that one lane member pulled from the seeds is
 * wanted by all the others at once; pulled by all of them from that
 * member, its one uplink would carry every copy, each arriving at
 * 1/(n-1) of its rate, all at the end, and none of them able to pass
 * it on meanwhile (this was the fan-out tail: a few members' uplinks
 * full while the rest idled).  So the members form a binary tree per
 * chunk, rooted at its owner: in key order, rank r = (member - owner)
 * mod n, and rank r takes it from rank (r - 1) / 2.  Each copy then
 * comes at half a link's rate, and a chunk reaches all n members in
 * log2(n) steps; the owners rotate, so each member relays about as
 * much as the others.
 */
#include "cache/swarm.h"

#include "common/util.h"

#define LANE_IDLE_MS                                                           \
	2000 /* a lane's member whose holdings did not grow this long
		is not waited for ... */
#define LANE_LATENCIES 3   /* ... or this many times a seed pull's time */
#define LANE_BEHIND 2	   /* a member this many chunks behind ... */
#define LANE_BEHIND_SCAN 8 /* ... among its last this many is helped */
#define TREE_SPREAD 3	   /* members holding a chunk: no more tree */
#define TREE_LEVEL_MS 250  /* a tree level waits at least this long */

static uint64_t chunk_no(const struct sfs_swarm *sw,
			 const struct sfs_swarm_chunk *ch)
{
	return sw->base[ch->obj] + ch->idx;
}

static void wake_at(struct sfs_swarm *sw, uint64_t at)
{
	if (!sw->wake_ms || at < sw->wake_ms)
		sw->wake_ms = at;
}

/* Holder @h's facts, or 0 when @h names none. */
static int member(const struct sfs_swarm *sw, uint32_t h,
		  struct sfs_swarm_member *m)
{
	return sw->ops->member(sw->arg, h, m) == 0;
}

/* Chunk g is member g mod n's, members in key order: each member pulls
 * an equal share, and consecutive chunks go to different members, so a
 * sequential load keeps them all busy.  (Rendezvous hashing moved less
 * when a member came or went, but with tens of chunks a member its
 * shares differed by half: the member with the largest one had to
 * upload that much more, and the swarm waited for its link.) */
uint32_t sfs_swarm_lane(const struct sfs_swarm *sw,
			const struct sfs_swarm_chunk *ch, int *any)
{
	*any = sw->nlanes != 0;
	if (!sw->nlanes)
		return SFS_CACHE_NONE;
	return sw->lanes[chunk_no(sw, ch) % sw->nlanes].holder;
}

static int fleet(const struct sfs_swarm *sw)
{
	return sw->fleet && sw->nlanes > 1 && sw->lane_me != SIZE_MAX;
}

static uint64_t high_bit(uint64_t d)
{
	while (d & (d - 1))
		d &= d - 1;
	return d;
}

/* Fleet lanes: @ch's owner's offset from this replica, and the lane of
 * the parent that passes it on (d minus d's highest bit: a member). */
static size_t fleet_offset(const struct sfs_swarm *sw,
			   const struct sfs_swarm_chunk *ch)
{
	size_t n = sw->nlanes;
	return sfs_swarm_rank(sw->lane_me, (size_t)(chunk_no(sw, ch) % n), n);
}

static size_t fleet_parent(const struct sfs_swarm *sw,
			   const struct sfs_swarm_chunk *ch)
{
	size_t n = sw->nlanes, d = fleet_offset(sw, ch);
	return (sw->lane_me + n - (size_t)high_bit(d)) % n;
}

/* How long a member is waited for: its pulls from the seeds take as
 * long as ours. */
static uint64_t lane_idle(const struct sfs_swarm *sw)
{
	return SFS_MAX((uint64_t)LANE_IDLE_MS,
		       (uint64_t)(LANE_LATENCIES * sw->seed_lat_ms));
}

/* Waited for: up, not stalled, its holdings growing or the chunk queued
 * only a moment ago.  Until when (0: not waited for). */
static uint64_t lane_wait_until(const struct sfs_swarm *sw,
				const struct sfs_swarm_chunk *ch)
{
	int any;
	uint32_t hi = sfs_swarm_lane(sw, ch, &any);
	if (hi == SFS_CACHE_NONE)
		return 0; /* ours, or no lanes */
	if (fleet(sw))	  /* what we wait for is the parent */
		hi = sw->lanes[fleet_parent(sw, ch)].holder;
	uint64_t now = sw->now, idle = lane_idle(sw);
	uint64_t until = ch->queued_ms + idle;
	struct sfs_swarm_member m;
	/* One that stalled for us still pulls its share from the seeds:
	 * waited for all the same.  One not connected yet: from the
	 * queueing. */
	if (hi != SFS_CACHE_LANE_UNKNOWN) {
		if (!member(sw, hi, &m) || m.removed || !m.answers || m.failed)
			return 0;
		/* Its holdings' growth is its word: it never counts for a
		 * chunk a reader waits for (a member that claims growth for
		 * ever would keep the seeds off that reader for ever; the
		 * idle time from its queueing bounds such a wait), only for
		 * read-ahead. */
		if (!ch->demand)
			until = SFS_MAX(until, m.grew_ms + idle);
	}
	return now < until ? until : 0;
}

int sfs_swarm_lane_wait(const struct sfs_swarm *sw,
			const struct sfs_swarm_chunk *ch)
{
	return lane_wait_until(sw, ch) != 0;
}

/*
 * The end of a lane: this replica has nothing of its own left to pull
 * from the seeds (asked only then), and @ch's owner is behind: of the
 * LANE_BEHIND_SCAN chunks of its lane before @ch, it lacks at least
 * LANE_BEHIND (neither held nor coming; the first of them are what it
 * posts next, so @ch is not).  Then @ch is pulled here instead; the
 * owner sees it coming in these holdings and does not pull it too
 * (unless it posts it in the moment before it sees that); each of its
 * chunks has one such helper, the other members in turn.  The shares
 * are equal but the rates are not: one member's connection to the seed
 * can get a fraction of the others' (fan-out bench: one member's first
 * two seed pulls took 4-5 s, the others' about 1 s), and every member
 * then waited for that lane at the end.
 */
static int lane_behind(const struct sfs_swarm *sw,
		       const struct sfs_swarm_chunk *ch)
{
	int any;
	struct sfs_swarm_member m;
	uint32_t hi = sfs_swarm_lane(sw, ch, &any);
	if (hi == SFS_CACHE_NONE || !member(sw, hi, &m))
		return 0; /* ours, no lanes, or a member not connected yet */
	uint64_t g = chunk_no(sw, ch);
	size_t n = sw->nlanes, obj = ch->obj, lacks = 0;
	/* Its chunks are dealt to the other members in turn: helpers do
	 * not pull the same ones. */
	if (n < 2 || sw->lane_me == SIZE_MAX ||
	    (g / n) % (n - 1) != (sw->lane_me + n - g % n - 1) % n)
		return 0;
	for (unsigned int k = 1; k <= LANE_BEHIND_SCAN && g >= n; k++) {
		g -= n;
		while (obj > 0 && sw->base[obj] > g)
			obj--;
		uint64_t idx = g - sw->base[obj];
		if (!sw->ops->has(sw->arg, hi, (uint32_t)obj, idx, 0) &&
		    !sw->ops->has(sw->arg, hi, (uint32_t)obj, idx, 1) &&
		    ++lacks >= LANE_BEHIND)
			return 1;
	}
	return 0;
}

/*
 * What keeps the seeds off a chunk is a member that will serve it, so
 * one that cannot now does not count: the holder whose bytes of @ch did
 * not match, a member distrusted, one down, reconnecting or whose
 * control port is silent, and one avoided (it stalled; a member whose
 * pulls get no answer is avoided even when only a seed has them).  A
 * member whose window is full but that completes its pulls still
 * counts: it serves the chunk once it has room, and the seed is spared.
 * Without this a single stuck or wrong member kept the seeds off every
 * chunk it listed, and their readers waited for --timeout.
 */
int sfs_swarm_member_has(const struct sfs_swarm *sw,
			 const struct sfs_swarm_chunk *ch, uint32_t not_peer,
			 int coming)
{
	for (size_t i = 0; i < sw->nholders; i++) {
		uint32_t h = sw->holders[i];
		struct sfs_swarm_member m;
		if (h == ch->avoid || !member(sw, h, &m))
			continue;
		if (m.peer != not_peer && !m.last_resort && m.answers &&
		    m.proven && !m.distrusted && sw->now >= m.avoid_until_ms &&
		    sw->ops->has(sw->arg, h, ch->obj, ch->idx, coming))
			return 1;
	}
	return 0;
}

/*
 * A member that has not served yet keeps no seed off a chunk a reader
 * waits for; but the read-ahead it holds is left to it until its first
 * pulls (one at a time) have proved it or it failed (a probe that
 * stalls is hedged, one that cannot even connect fails the same way,
 * cache/peer.c), so that the seed does not take all there is first (its
 * window is 32 pulls, and a fleet's replicas queue all of a model at
 * once).  1: wait.
 */
static int probe_wait(struct sfs_swarm *sw, const struct sfs_swarm_chunk *ch,
		      uint32_t not_peer)
{
	if (ch->demand)
		return 0;
	for (size_t i = 0; i < sw->nholders; i++) {
		uint32_t h = sw->holders[i];
		struct sfs_swarm_member m;
		if (h == ch->avoid || !member(sw, h, &m))
			continue;
		if (m.peer != not_peer && !m.last_resort && !m.proven &&
		    !m.failed && m.answers && !m.distrusted &&
		    sw->now >= m.avoid_until_ms &&
		    sw->ops->has(sw->arg, h, ch->obj, ch->idx, 0))
			return 1;
	}
	return 0;
}

/* Does a holder on a seed that answers hold @ch? */
static int seed_has(const struct sfs_swarm *sw,
		    const struct sfs_swarm_chunk *ch)
{
	for (size_t i = 0; i < sw->nholders; i++) {
		uint32_t h = sw->holders[i];
		struct sfs_swarm_member m;
		if (member(sw, h, &m) && m.last_resort && m.answers &&
		    sw->ops->has(sw->arg, h, ch->obj, ch->idx, 0))
			return 1;
	}
	return 0;
}

size_t sfs_swarm_rank(size_t me, size_t owner, size_t n)
{
	return (me + n - owner) % n;
}

size_t sfs_swarm_parent(size_t rank)
{
	return rank ? (rank - 1) / 2 : 0;
}

static unsigned int ilog2(size_t r)
{
	unsigned int d = 0;
	while (r >>= 1)
		d++;
	return d;
}

unsigned int sfs_swarm_depth(size_t rank)
{
	return ilog2(rank + 1);
}

/*
 * May holder @hi serve @ch to this replica now?  Yes when there are no
 * lanes or this replica is no member, when @hi is no member (a seed, a
 * re-seeder that holds it all), when @hi is the parent; otherwise once
 * TREE_SPREAD members hold it (the tree's first two levels: the rest
 * take it from any of them, spread over their uplinks, and none waits
 * for a parent that is slow), once the chunk has been held somewhere
 * for longer than its parent needs to pass it on (its depth times twice
 * a pull's usual time, at least TREE_LEVEL_MS a level) or when the
 * parent is not up.  (The wait is floor(log2(rank)) levels, one fewer
 * than its depth for ranks 1, 3, 7, ...: what the fan-out bench was
 * measured with.)
 */
static int tree_allows(struct sfs_swarm *sw, struct sfs_swarm_chunk *ch,
		       const struct sfs_swarm_member *hm)
{
	size_t n = sw->nlanes, me = sw->lane_me, q = hm->lane;
	if (n < 3 || me == SIZE_MAX || q == SIZE_MAX)
		return 1;
	size_t o = (size_t)(chunk_no(sw, ch) % n);
	size_t rme = sfs_swarm_rank(me, o, n), rq = sfs_swarm_rank(q, o, n);
	if (rme == 0 || rq == sfs_swarm_parent(rme))
		return 1; /* ours from the seeds (or back), or the parent */
	size_t held = 0;
	for (size_t i = 0; i < n && held < TREE_SPREAD; i++) {
		uint32_t lh = sw->lanes[i].holder;
		struct sfs_swarm_member lm;
		held += member(sw, lh, &lm) &&
			sw->ops->has(sw->arg, lh, ch->obj, ch->idx, 0);
	}
	if (held >= TREE_SPREAD)
		return 1;
	uint32_t ph = sw->lanes[(sfs_swarm_parent(rme) + o) % n].holder;
	struct sfs_swarm_member pm;
	if (!member(sw, ph, &pm) || pm.removed || !pm.answers)
		return 1;
	if (!ch->held_ms)
		ch->held_ms = sw->now;
	uint64_t level =
		SFS_MAX((uint64_t)TREE_LEVEL_MS, (uint64_t)(2 * pm.lat_ms));
	uint64_t at = ch->held_ms + ilog2(rme) * level;
	if (sw->now >= at)
		return 1;
	wake_at(sw, at); /* looked at again then */
	return 0;
}

/*
 * Does a member that can serve have @ch coming (being pulled there: its
 * holdings say so)?  Then @ch is not pulled from a seed here too, for as
 * long as a lane's member is waited for, from when this replica first
 * saw it coming; it comes from that member once held.  (Lanes change
 * as members join: a chunk one member posted under the old lanes is
 * another's under the new, and both pulled it from the seed.)
 */
/* Does a member that answers and has not failed have @ch coming?  (One
 * that has not served yet counts: what it says is waited for the idle
 * time at most, and if it does not come it has failed.) */
static int member_coming(const struct sfs_swarm *sw,
			 const struct sfs_swarm_chunk *ch)
{
	for (size_t i = 0; i < sw->nholders; i++) {
		uint32_t h = sw->holders[i];
		struct sfs_swarm_member m;
		if (h == ch->avoid || !member(sw, h, &m))
			continue;
		if (!m.last_resort && m.answers && !m.failed && !m.distrusted &&
		    sw->now >= m.avoid_until_ms &&
		    sw->ops->has(sw->arg, h, ch->obj, ch->idx, 1))
			return 1;
	}
	return 0;
}

static int coming_wait(struct sfs_swarm *sw, struct sfs_swarm_chunk *ch)
{
	if (!member_coming(sw, ch)) {
		ch->coming_ms = 0;
		return 0;
	}
	if (!ch->coming_ms)
		ch->coming_ms = sw->now;
	uint64_t at = ch->coming_ms + lane_idle(sw);
	if (sw->now >= at) {
		/* It did not come: who said so failed (the caller's to
		 * say: one that says so of everything and delivers nothing
		 * would cost every read the wait). */
		ch->coming_late = 1;
		return 0;
	}
	wake_at(sw, at);
	return 1;
}

/*
 * Fleet lanes (sw->fleet): chunk g is replica g mod n's to pull from a
 * seed, and reaches replica at offset d from that owner through its
 * parent at d minus d's highest bit (a member: offsets -1, -2, -4, ...
 * are what it works with), in popcount(d) steps.  A member takes it
 * from the parent at once, from another member once it has been held
 * for popcount(d) levels.  A seed takes it when it is this replica's
 * own, and otherwise only when the parent cannot bring it: the parent
 * does not answer, or it stopped growing (idle) without it, or it
 * holds a later chunk of the same owner while it lacks this one (lost
 * upstream), for the lane's idle time since that was first seen.
 */
static int fleet_takes(struct sfs_swarm *sw, struct sfs_swarm_chunk *ch,
		       const struct sfs_swarm_member *p, uint32_t hi)
{
	size_t n = sw->nlanes, d = fleet_offset(sw, ch);
	uint64_t g = chunk_no(sw, ch);
	if ((ch->mismatches || ch->seed_next) && p->last_resort)
		return 1; /* a member failed it: the seed's, at once */
	if (d == 0)	  /* ours from the seeds (a member's if it has it) */
		return !p->last_resort ||
		       (!sfs_swarm_member_has(sw, ch, p->peer, 0) &&
			!probe_wait(sw, ch, p->peer) && !coming_wait(sw, ch));
	uint32_t ph = sw->lanes[fleet_parent(sw, ch)].holder;
	struct sfs_swarm_member pm;
	int parent = member(sw, ph, &pm) && !pm.removed && pm.answers;
	uint64_t level = SFS_MAX((uint64_t)TREE_LEVEL_MS,
				 (uint64_t)(2 * (parent ? pm.lat_ms : 0)));
	if (!p->last_resort) {
		if (hi == ph || !parent)
			return 1;
		if (!ch->held_ms)
			ch->held_ms = sw->now;
		uint64_t at =
			ch->held_ms + (uint64_t)__builtin_popcountll(d) * level;
		if (sw->now >= at)
			return 1;
		wake_at(sw, at);
		return 0;
	}
	if (sfs_swarm_member_has(sw, ch, p->peer, 0) ||
	    probe_wait(sw, ch, p->peer))
		return 0; /* a member serves it */
	uint64_t idle = lane_idle(sw);
	if (ph == SFS_CACHE_LANE_UNKNOWN) {
		/* The parent not connected yet: waited for a moment. */
		if (sw->now >= ch->queued_ms + idle)
			return !coming_wait(sw, ch);
		wake_at(sw, ch->queued_ms + idle);
		return 0;
	}
	if (!parent || sw->ops->has(sw->arg, ph, ch->obj, ch->idx, 1)) {
		ch->lost_ms = 0;
		return !coming_wait(sw, ch);
	}
	/* The parent lacks it: lost upstream if the parent has the same
	 * owner's next chunk, or stopped growing. */
	uint64_t next = g + n;
	int later = 0;
	if (next < sw->nchunks) {
		size_t obj = ch->obj;
		while (obj + 1 < sw->nobjs && sw->base[obj + 1] <= next)
			obj++;
		uint64_t idx = next - sw->base[obj];
		later = sw->ops->has(sw->arg, ph, (uint32_t)obj, idx, 0);
	}
	/* The parent brings it in its time: while it grows (its word), for
	 * read-ahead only: never while a reader waits (a parent that grows
	 * for ever without it would keep the seeds off that reader for
	 * ever). */
	if (!later && !pm.failed && !ch->demand &&
	    sw->now < pm.grew_ms + idle) {
		ch->lost_ms = 0;
		wake_at(sw, pm.grew_ms + idle);
		return 0;
	}
	if (!ch->lost_ms)
		ch->lost_ms = sw->now;
	uint64_t at = ch->lost_ms + idle;
	if (sw->now >= at)
		return 1;
	wake_at(sw, at);
	return 0;
}

int sfs_swarm_takes(struct sfs_swarm *sw, struct sfs_swarm_chunk *ch,
		    const struct sfs_swarm_member *p, uint32_t hi, int help)
{
	/* Failed on a member once (wrong bytes, a stall, a hedge): the
	 * next pull is a seed's when a seed has it (lying or stalling
	 * members would otherwise take turns to the end). */
	if ((ch->mismatches || ch->seed_next || ch->direct) &&
	    !p->last_resort && seed_has(sw, ch))
		return 0;
	if (ch->direct && p->last_resort)
		return 1; /* only a seed may write into a caller's memory */
	if (fleet(sw))
		return fleet_takes(sw, ch, p, hi);
	if (!p->last_resort) {
		struct sfs_swarm_member hm;
		return !member(sw, hi, &hm) || tree_allows(sw, ch, &hm);
	}
	if (ch->mismatches || ch->seed_next)
		return 1; /* a member failed it: the seed's, at once */
	if (sfs_swarm_member_has(sw, ch, p->peer, 0) ||
	    probe_wait(sw, ch, p->peer))
		return 0;
	uint64_t lane = lane_wait_until(sw, ch);
	if (lane && !(help && lane_behind(sw, ch))) {
		wake_at(sw, lane); /* looked at again then */
		return 0;
	}
	return !coming_wait(sw, ch);
}
