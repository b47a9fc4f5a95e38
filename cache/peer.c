/* SPDX-License-Identifier: MIT */
/*
 * peer.c - the cache's connections to its sources: the pull queues,
 * choosing a holder, posting, completions, deadlines, throughput,
 * failover and reconnects.
 *
 * Striping.  Chunks wait in one demand queue and one read-ahead queue,
 * not bound to any source.  Each peer takes the first chunk it can
 * serve whenever it has room in its window, and the window follows its
 * measured throughput (a quarter second of it, 2 to 32 chunks).  So the
 * work goes where it is done fastest: a source twice as fast completes
 * twice the chunks, a slow one holds only what its window allows, and
 * nothing waits for a source that another could replace.  (Hashing
 * chunks to sources would pile a fixed share onto the slowest one.)
 *
 * Lanes and relay trees: which source a chunk waits for, and when a
 * seed takes it, are the swarm's policy (swarm.c), which this file asks
 * with what the cache knows.
 *
 * Failover.  A pull that fails goes back to the queue when another
 * holder can serve it; a peer that stalls (no completion for a short
 * while when others could serve its chunks, for the timeout when none
 * can) is taken out: its posted pulls are orphaned and pulled again
 * elsewhere.  A peer taken out is reconnected in the background and
 * tried again when its hold ends (1 s, doubling up to 5 s).
 *
 * One broken file fails no other.  A connection breaks under every pull
 * on it when the source refuses one read (a key it took away): a pull
 * that fails in the transport beside others, with no other holder, is
 * pulled again alone (nothing else on that peer meanwhile) once the
 * connection is made anew; only a pull that fails alone fails its
 * readers, and its object's reads then fail unpulled for a while
 * (refuse), each pull of it would break the connection again.
 *
 * A timeout means "no progress", not "took long": a reader waiting on a
 * queued or posted chunk gives up when nothing that could serve it
 * completed anything for the timeout since the reader came (or since
 * the source's control port went silent, if that is what it noted just
 * before); a posted chunk that later posts overtook counts only from
 * then, so a pull the transport lost is found while others flow.
 */
#include "cache/core.h"
#include "cache/swarm.h"

#include "common/log.h"
#include "common/util.h"
#include "transports/transport.h"
#include "common/xxh.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW_MIN 2
#define WINDOW_MAX 32
#define WINDOW_MEMBER_MAX 8
#define WINDOW_SECONDS 0.25 /* bytes in flight: this much of the rate */
#define AHEAD_SECONDS 1.0   /* read-ahead: this much of the rate */
#define RATE_SAMPLE_NS 200000000ull
#define REPAIR_SPACING_MS 250 /* one peer is reconnected at most this often */
#define POST_RETRY_MS 5	      /* a busy provider is tried again after this */
#define FAILOVER_MS                                                            \
	2000		   /* no progress this long, with another
				 holder there: taken out */
#define STALL_CHUNKS 4	   /* ... or this many chunks' time at its rate */
#define STALL_LATENCIES 3  /* ... or this many times a pull's usual time */
#define FIRST_PULL_MS 4000 /* ... or, before its first pull, this */
#define MISMATCH_MAX 3	   /* pulls of one chunk that may not match */
/* A member (not a seed) whose chunks failed their checksums this often
 * takes only what nobody else can serve, and keeps no seed off a chunk:
 * a re-seeder that lies costs a few pulls, never a read. */
#define DISTRUST_MISMATCHES 4
#define PIECES_MAX 64 /* transport reads for one chunk */
/* A pull from a peer that is no seed taking HEDGE_LATENCIES times a
 * seed's usual pull, or HEDGE_OWN times its own (a member on a slow link
 * is not a stalled one), at least HEDGE_MIN_MS, at most the timeout, is
 * moved to a seed that has the chunk. */
#define HEDGE_LATENCIES 8
#define HEDGE_OWN 4
#define HEDGE_MIN_MS 1000
#define PROBE_MAX_MS 30000  /* an unproven peer's next try, at most */
#define XFAILS_MAX 3	    /* failures beside others before a pull fails */
#define REFUSE_MS 1000	    /* an object whose pull failed alone: its reads */
#define REFUSE_MAX_MS 30000 /* fail unpulled this long, doubling, at most */

static int seed_next_of(struct sfs_cache *c, const struct sfs_chunk *ch);
static uint64_t hedge_ms(const struct sfs_cache *c, const struct cache_peer *p);

/* Time with pulls in flight, and what completed in it: the rate. */
static void busy_account(struct sfs_cache *c, struct cache_peer *p)
{
	uint64_t now = sfs_now_ns();
	if (p->inflight)
		p->busy_ns += now - p->busy_mark_ns;
	p->busy_mark_ns = now;
	if (p->busy_ns < RATE_SAMPLE_NS)
		return;
	double sample = (double)p->busy_bytes * 1e9 / (double)p->busy_ns;
	p->rate = p->rate > 0 ? 0.5 * p->rate + 0.5 * sample : sample;
	p->busy_ns = p->busy_bytes = 0;
	double w = p->rate * WINDOW_SECONDS / c->chunk_size;
	/* A peer that is no seed holds at most WINDOW_MEMBER_MAX of this
	 * cache's slots at once (a pull moved off it keeps its slot until
	 * the transport gives it back). */
	unsigned int max = p->trusted ? WINDOW_MAX : WINDOW_MEMBER_MAX;
	p->window = w < WINDOW_MIN    ? WINDOW_MIN
		    : w > (double)max ? max
				      : (unsigned int)w;
}

void sfs_peer_wake_worker(struct sfs_cache *c)
{
	c->pick_epoch++; /* what a peer may take changed */
	c->work = 1;
	pthread_cond_signal(&c->work_cond);
}

/* A pull completed: the worker posts into the window it freed.  What
 * the other peers may take did not change (a pick's decisions stand on
 * members' holdings, peers' states and the time, not on this cache's
 * own chunks): their picks that found nothing still hold. */
static void wake_for_slot(struct sfs_cache *c)
{
	c->work = 1;
	pthread_cond_signal(&c->work_cond);
}

void sfs_peer_enqueue(struct sfs_cache *c, struct sfs_chunk *ch, int demand)
{
	if (c->stopping) {
		ch->state = CH_FAILED;
		ch->err = -ESHUTDOWN;
		sfs_cache_settle(c, ch);
		sfs_cache_wake(c);
		return;
	}
	ch->peer = SFS_NONE;
	ch->holder = SFS_NONE;
	ch->state = CH_QUEUED;
	ch->demand = demand;
	ch->seed_next |= seed_next_of(c, ch);
	ch->queued_ms = sfs_now_ms();
	ch->held_ms = 0;
	ch->coming_ms = 0;
	ch->lost_ms = 0;
	sfs_list_add_tail(demand ? &c->demand : &c->ahead, ch);
	c->queued++;
	c->pick_epoch++;
}

/* Back at the head of its queue: it was posted first. */
static void requeue_head(struct sfs_cache *c, struct sfs_chunk *ch)
{
	ch->peer = SFS_NONE;
	ch->holder = SFS_NONE;
	ch->state = CH_QUEUED;
	sfs_list_add_head(ch->demand ? &c->demand : &c->ahead, ch);
	c->queued++;
	c->pick_epoch++;
}

static void dequeue(struct sfs_cache *c, struct sfs_chunk *ch)
{
	sfs_list_del(ch->demand ? &c->demand : &c->ahead, ch);
	c->queued--;
}

void sfs_peer_promote(struct sfs_cache *c, struct sfs_chunk *ch)
{
	if (ch->state == CH_DISK) {
		ch->demand = 1;
		return;
	}
	if (ch->state != CH_QUEUED || ch->demand)
		return;
	sfs_list_del(&c->ahead, ch);
	sfs_list_add_tail(&c->demand, ch);
	ch->demand = 1;
	c->pick_epoch++;
}

void sfs_peer_fail_queued(struct sfs_cache *c, int err, uint32_t set)
{
	struct list *lists[2] = {&c->demand, &c->ahead};
	for (int k = 0; k < 2; k++) {
		for (struct sfs_chunk *ch = lists[k]->head, *next; ch;
		     ch = next) {
			next = ch->next;
			if (set != SFS_NONE && ch->set != set)
				continue;
			sfs_list_del(lists[k], ch);
			c->queued--;
			ch->state = CH_FAILED;
			ch->err = err;
			sfs_cache_settle(c, ch);
		}
	}
	sfs_cache_wake(c);
}

/* A peer a read may use now: up, or down with its hold over (then it is
 * tried again).  0, or its error. */
static int peer_usable(struct sfs_cache *c, struct cache_peer *p)
{
	if (p->removed)
		return -ENOTCONN;
	if (p->state != SFS_PEER_DOWN)
		return 0;
	if (sfs_now_ms() < p->down_until_ms || p->repairing)
		return p->err ? p->err : -EIO;
	if (p->unconnected) {
		/* Connecting again failed: the worker tries that once more
		 * (REPAIR_SPACING_MS apart) before anything is posted. */
		if (!p->repair) {
			p->repair = 1;
			p->why = "its hold ended";
			sfs_peer_wake_worker(c);
		}
		return p->err ? p->err : -EIO;
	}
	/* The hold is over: the next pull probes. */
	p->state = SFS_PEER_UP;
	p->since_ms = sfs_now_ms();
	SFS_LOG(SFS_INFO, "cache", "%s: trying again", p->label);
	return 0;
}

/*
 * Can some holder other than @not_peer serve chunk @ch now?  0 if so,
 * else the error of the holders that have it (or -EIO: nobody has it).
 */
static int servable(struct sfs_cache *c, const struct sfs_chunk *ch,
		    uint32_t not_peer)
{
	const struct cache_set *s = c->sets[ch->set];
	int err = -EIO;
	for (size_t i = 0; i < s->nholders; i++) {
		const struct cache_holder *h = c->holders[s->holders[i]];
		if (h->peer == not_peer || !sfs_holder_has(h, ch->obj, ch->idx))
			continue;
		/* No member takes a direct read (holder_for). */
		if (ch->dst && !c->peers[h->peer]->trusted)
			continue;
		int rc = peer_usable(c, c->peers[h->peer]);
		if (!rc)
			return 0;
		err = rc == -ENOTCONN ? err : rc;
	}
	return err;
}

/* Is peer @p there to serve: up, and its source's control port not
 * silent? */
static int answers(const struct cache_peer *p)
{
	return !p->removed && p->state == SFS_PEER_UP && !p->silent_since;
}

static int distrusted(const struct cache_peer *p)
{
	return !p->last_resort && p->checksum_errors >= DISTRUST_MISMATCHES;
}

/* Has @p proved itself (a seed always has)? */
static int proven(const struct cache_peer *p)
{
	return p->trusted || p->proven;
}

/* The slot of seed_next's table for (@born, @obj, @idx). */
static struct sfs_seed_next *seed_next_slot(struct sfs_cache *c, uint64_t born,
					    uint32_t obj, uint64_t idx)
{
	uint64_t h = (idx * 0x9e3779b97f4a7c15ull) ^
		     ((born << 20 ^ obj) * 0xc2b2ae3d27d4eb4full);
	h ^= h >> 31;
	return &c->seed_next[h % SFS_SEED_NEXT_SLOTS];
}

/* Was a try of @ch on a peer that is no seed failed lately?  (c->lock) */
static int seed_next_of(struct sfs_cache *c, const struct sfs_chunk *ch)
{
	uint64_t born = c->sets[ch->set]->born;
	const struct sfs_seed_next *e =
		seed_next_slot(c, born, ch->obj, ch->idx);
	return e->until_ms > sfs_now_ms() && e->born == born &&
	       e->obj == ch->obj && e->idx == ch->idx;
}

/* A try of @ch on a peer that is no seed failed: its next goes to a
 * seed, and so does the next of a reader that starts it anew (a moved
 * pull's slot is the transport's).  (c->lock) */
static void seed_next_mark(struct sfs_cache *c, struct sfs_chunk *ch)
{
	uint64_t born = c->sets[ch->set]->born;
	struct sfs_seed_next *e = seed_next_slot(c, born, ch->obj, ch->idx);
	*e = (struct sfs_seed_next){.born = born,
				    .obj = ch->obj,
				    .idx = ch->idx,
				    .until_ms =
					    sfs_now_ms() + SFS_SEED_NEXT_MS};
	ch->seed_next = 1;
	c->pick_epoch++; /* a seed may take it now */
}

/*
 * A pull from @p, a peer that is no seed, failed (stalled, hedged, did
 * not match, failed in the transport): it is unproven again, and tried
 * again only after a while; @ch (NULL: none) goes to a seed next.
 * (c->lock held)
 */
static void member_failed(struct sfs_cache *c, struct cache_peer *p,
			  struct sfs_chunk *ch)
{
	if (ch)
		seed_next_mark(c, ch);
	if (!p || p->trusted)
		return;
	c->st.member_failures++;
	p->proven = 0;
	p->busy_since_ms = 0;
	p->fails = SFS_MIN(p->fails + 1, 16u);
	uint64_t wait = SFS_MIN((uint64_t)1000 << (p->fails - 1),
				(uint64_t)PROBE_MAX_MS);
	p->probe_after_ms = sfs_now_ms() + wait;
	p->window = WINDOW_MIN; /* its rate is what it proves again */
	c->pick_epoch++;
}

int sfs_peer_seed_has(struct sfs_cache *c, const struct sfs_chunk *ch)
{
	const struct cache_set *s = c->sets[ch->set];
	uint64_t now = sfs_now_ms();
	/* A seed that would take it now: usable, its control port not
	 * silent, not avoided as stuck (such a seed is shy: it leaves to
	 * the others what they hold, and a member waiting for it would
	 * wait for nobody). */
	for (size_t i = 0; i < s->nholders; i++) {
		const struct cache_holder *h = c->holders[s->holders[i]];
		struct cache_peer *p = c->peers[h->peer];
		if (p->trusted && sfs_holder_has(h, ch->obj, ch->idx) &&
		    !peer_usable(c, p) && !p->silent_since &&
		    now >= p->avoid_until_ms)
			return 1;
	}
	return 0;
}

/* The swarm's policy (swarm.h) sees holders and peers through these. */
static int swarm_has(void *arg, uint32_t h, uint32_t obj, uint64_t idx,
		     int coming)
{
	const struct cache_holder *ho = ((struct sfs_cache *)arg)->holders[h];
	return coming ? sfs_holder_coming(ho, obj, idx)
		      : sfs_holder_has(ho, obj, idx);
}

static void swarm_peer(const struct sfs_cache *c, uint32_t pi,
		       struct sfs_swarm_member *m)
{
	const struct cache_peer *p = c->peers[pi];
	m->peer = pi;
	m->avoid_until_ms = p->avoid_until_ms;
	m->lat_ms = p->lat_ms;
	m->last_resort = !!p->last_resort;
	m->answers = !!answers(p);
	m->distrusted = !!distrusted(p);
	m->proven = !!proven(p);
	m->failed = !p->trusted && p->fails;
}

static int swarm_member(void *arg, uint32_t h, struct sfs_swarm_member *m)
{
	const struct sfs_cache *c = arg;
	const struct cache_holder *ho = h < c->nholders ? c->holders[h] : NULL;
	if (!ho)
		return -ENOENT;
	swarm_peer(c, ho->peer, m);
	m->lane = ho->lane;
	m->grew_ms = ho->grew_ms;
	m->removed = !!ho->removed;
	return 0;
}

static const struct sfs_swarm_ops swarm_ops = {
	.has = swarm_has,
	.member = swarm_member,
};

/* Set @set as the swarm's policy sees it at @now (c->lock held). */
static void swarm_of(struct sfs_cache *c, uint32_t set, uint64_t now,
		     struct sfs_swarm *sw)
{
	const struct cache_set *s = c->sets[set];
	*sw = (struct sfs_swarm){.ops = &swarm_ops,
				 .arg = c,
				 .holders = s->holders,
				 .nholders = s->nholders,
				 .base = s->base,
				 .nobjs = s->nobjs,
				 .lanes = s->lanes,
				 .nlanes = s->nlanes,
				 .lane_me = s->lane_me,
				 .fleet = s->fleet,
				 .nchunks = s->nchunks,
				 .seed_lat_ms = c->seed_lat_ms,
				 .now = now};
}

/* Queued chunk @ch as the policy sees it. */
static struct sfs_swarm_chunk swarm_chunk(const struct sfs_chunk *ch)
{
	return (struct sfs_swarm_chunk){.obj = ch->obj,
					.idx = ch->idx,
					.avoid = ch->avoid,
					.mismatches = ch->mismatches,
					.seed_next = !!ch->seed_next,
					.direct = ch->dst != NULL,
					.demand = !!ch->demand,
					.queued_ms = ch->queued_ms,
					.held_ms = ch->held_ms,
					.coming_ms = ch->coming_ms,
					.lost_ms = ch->lost_ms};
}

/* Is @ch another lane member's to pull from the seeds, and is that
 * member worth waiting for (sfs_swarm_lane_wait)? */
static int lane_wait(struct sfs_cache *c, const struct sfs_chunk *ch)
{
	struct sfs_swarm sw;
	struct sfs_swarm_chunk q = swarm_chunk(ch);
	swarm_of(c, ch->set, sfs_now_ms(), &sw);
	return sfs_swarm_lane_wait(&sw, &q);
}

/* Does a member on a peer other than @not_peer that can serve now hold
 * @ch (sfs_swarm_member_has)? */
static int member_has(struct sfs_cache *c, const struct sfs_chunk *ch,
		      uint32_t not_peer, uint64_t now)
{
	struct sfs_swarm sw;
	struct sfs_swarm_chunk q = swarm_chunk(ch);
	swarm_of(c, ch->set, now, &sw);
	return sfs_swarm_member_has(&sw, &q, not_peer, 0);
}

int sfs_peer_set_usable(struct sfs_cache *c, uint32_t set)
{
	const struct cache_set *s = c->sets[set];
	int err = -EIO;
	for (size_t i = 0; i < s->nholders; i++) {
		int rc = peer_usable(c,
				     c->peers[c->holders[s->holders[i]]->peer]);
		if (!rc)
			return 0;
		err = rc == -ENOTCONN ? err : rc;
	}
	return err;
}

/* The one peer that holds @set, or NULL when several (or none) do. */
static struct cache_peer *only_peer(struct sfs_cache *c, uint32_t set)
{
	const struct cache_set *s = c->sets[set];
	uint32_t p = SFS_NONE;
	for (size_t i = 0; i < s->nholders; i++) {
		uint32_t q = c->holders[s->holders[i]]->peer;
		if (p != SFS_NONE && q != p)
			return NULL;
		p = q;
	}
	return p == SFS_NONE ? NULL : c->peers[p];
}

/* Take @ch, posted on @p, out of its peer and the hash: its slot waits
 * for the transport's callback, its readers start it again.  A pull of a
 * peer that is no seed goes to a seed next.  (c->lock held) */
static void orphan(struct sfs_cache *c, struct cache_peer *p,
		   struct sfs_chunk *ch)
{
	busy_account(c, p);
	sfs_list_del(&p->loading, ch);
	p->inflight--;
	p->orphans++;
	if (!p->trusted)
		seed_next_mark(c, ch);
	sfs_cache_unhash(c, ch);
	ch->orphan = 1;
	sfs_cache_touch(c, ch); /* no longer coming from there */
}

size_t sfs_peer_orphan(struct sfs_cache *c, struct cache_peer *p,
		       uint32_t holder)
{
	uint32_t pi = SFS_NONE;
	size_t elsewhere = 0;

	for (size_t i = 0; i < c->npeers; i++)
		if (c->peers[i] == p)
			pi = (uint32_t)i;
	for (struct sfs_chunk *ch = p->loading.head, *next; ch; ch = next) {
		next = ch->next;
		if (holder != SFS_NONE && ch->holder != holder)
			continue;
		elsewhere += !servable(c, ch, pi);
		orphan(c, p, ch);
	}
	sfs_cache_wake(c);
	return elsewhere;
}

/* Queued chunks nobody can serve any more fail with @err (their readers
 * would wait for nothing). */
static void fail_unservable(struct sfs_cache *c, int err)
{
	struct list *lists[2] = {&c->demand, &c->ahead};
	for (int k = 0; k < 2; k++) {
		for (struct sfs_chunk *ch = lists[k]->head, *next; ch;
		     ch = next) {
			next = ch->next;
			if (!servable(c, ch, SFS_NONE) || lane_wait(c, ch))
				continue; /* served, or coming from a member */
			sfs_list_del(lists[k], ch);
			c->queued--;
			ch->state = CH_FAILED;
			ch->err = err;
			sfs_cache_settle(c, ch);
		}
	}
	sfs_cache_wake(c);
}

/*
 * A pull of (@set, @obj) failed on @p and no other holder serves it: the
 * read-ahead queued behind it would most likely fail the same way, and
 * each failure would make the connection anew.  It is given up; readers
 * that come for those bytes pull them anew.
 */
static void drop_ahead(struct sfs_cache *c, uint32_t pi, uint32_t set,
		       uint32_t obj)
{
	for (struct sfs_chunk *ch = c->ahead.head, *next; ch; ch = next) {
		next = ch->next;
		if (ch->set != set || ch->obj != obj || !servable(c, ch, pi))
			continue;
		sfs_list_del(&c->ahead, ch);
		c->queued--;
		ch->state = CH_FAILED;
		ch->err = -ECANCELED;
		sfs_cache_settle(c, ch);
	}
}

/* How long a peer stays down after its @failures-th stall in a row: 1 s,
 * doubling, at most the timeout or 5 s, so reads work again soon after
 * a link comes back. */
static uint64_t hold_ms(struct sfs_cache *c, unsigned int failures)
{
	unsigned int k = failures > 1 ? SFS_MIN(failures - 1, 10u) : 0;
	uint64_t cap = SFS_MIN((uint64_t)c->timeout_ms, 5000);
	return SFS_MIN((uint64_t)1000 << k, cap);
}

static void go_down(struct sfs_cache *c, struct cache_peer *p, int err,
		    const char *why)
{
	uint64_t now = sfs_now_ms(), hold = hold_ms(c, p->failures);
	p->state = SFS_PEER_DOWN;
	p->err = err;
	p->since_ms = now;
	p->down_until_ms = now + hold;
	if (!p->down_ms)
		p->down_ms = now; /* (a probe that fails keeps the first) */
	p->stalls++;
	p->solo_left = 0; /* what waited to be tried alone fails below */
	member_failed(c, p, NULL);
	SFS_LOG(SFS_WARN, "cache",
		"%s is unreachable: %s (%s); not used for %" PRIu64
		" ms, then tried again",
		p->label, why, strerror(-err), hold);
	/* Its posted pulls start again elsewhere (or fail, for readers of
	 * chunks only it holds); what only it could serve fails now. */
	c->st.failovers += sfs_peer_orphan(c, p, SFS_NONE);
	fail_unservable(c, err);
}

/*
 * Something went wrong with @p: @why, @err.  It is reconnected in the
 * background.  A stall (no progress) or a pull that could not even be
 * posted (@stalled) means the source may be gone: it is down for a
 * while, its pulls go to the other holders, then it is tried again.  A
 * failed pull only reconnects: the source answered, and it must not be
 * taken away from the others.  (A file the seed withdrew is no failed
 * pull: its keys stay and read zeros, refused by checksum, so one
 * broken file never breaks the connection.)  Called with c->lock held.
 */
static void trouble(struct sfs_cache *c, struct cache_peer *p, const char *why,
		    int err, int stalled)
{
	if (c->stopping || p->removed)
		return;
	if (stalled) {
		p->failures++;
		if (p->state != SFS_PEER_DOWN)
			go_down(c, p, err, why);
	} else if (p->state == SFS_PEER_UP) {
		p->state = SFS_PEER_RECONNECTING;
		p->err = err;
		p->since_ms = sfs_now_ms();
		SFS_LOG(SFS_WARN, "cache", "%s: %s (%s): connecting again",
			p->label, why, strerror(-err));
	}
	if (!p->repair && !p->repairing) {
		p->repair = 1;
		p->why = why;
	}
	sfs_peer_wake_worker(c);
	sfs_cache_wake(c);
}

/* Partial holder @h's keep ended: it holds nothing until its source
 * renews it (c->lock held). */
static void keep_ended(struct sfs_cache *c, struct cache_holder *h)
{
	h->expired = 1;
	c->pick_epoch++; /* a member's holdings went: seeds may take */
	SFS_LOG(SFS_WARN, "cache",
		"%s: holdings of %s not renewed within their keep: not read "
		"from until they are (their slots may hold other chunks)",
		c->peers[h->peer]->label, c->sets[h->set]->label);
	sfs_cache_wake(c);
}

/* Has holder @hi's keep ended by @now (then marked so)? */
static int keep_over(struct sfs_cache *c, uint32_t hi, uint64_t now)
{
	struct cache_holder *h = c->holders[hi];
	if (!h->expires_ms || h->expired || now < h->expires_ms)
		return h->expired;
	keep_ended(c, h);
	return 1;
}

/* Partial holders whose keep ended by @now hold nothing from now on.
 * Returns when the next keep ends (0: none; c->lock held). */
static uint64_t expire_holders(struct sfs_cache *c, uint64_t now)
{
	uint64_t next = 0;
	for (size_t i = 0; i < c->nholders; i++) {
		struct cache_holder *h = c->holders[i];
		if (!h || h->removed || !h->partial || !h->expires_ms ||
		    h->expired)
			continue;
		if (now >= h->expires_ms)
			keep_ended(c, h);
		else
			next = next ? SFS_MIN(next, h->expires_ms)
				    : h->expires_ms;
	}
	return next;
}

/* The holder on peer @pi that can serve @ch, or SFS_NONE.  One whose
 * bytes did not match is taken only when no other holder could. */
static uint32_t holder_for(struct sfs_cache *c, const struct sfs_chunk *ch,
			   uint32_t pi)
{
	const struct cache_set *s = c->sets[ch->set];
	uint32_t found = SFS_NONE;
	/* A peer that is no seed never serves what SHA-256 cannot check,
	 * nor a direct read: its late bytes could land in the caller's
	 * memory after the read moved on (sfs_cache_read_into pulls such
	 * reads through slots). */
	if (!c->peers[pi]->trusted &&
	    (ch->dst || (c->verify && !s->objs[ch->obj].sha256)))
		return SFS_NONE;
	for (size_t i = 0; i < s->nholders; i++) {
		uint32_t hi = s->holders[i];
		const struct cache_holder *h = c->holders[hi];
		if (h->peer == pi && sfs_holder_has(h, ch->obj, ch->idx))
			found = hi;
	}
	if (found == SFS_NONE || found != ch->avoid)
		return found;
	return servable(c, ch, pi) ? found : SFS_NONE;
}

/* Complete @ch now: its bytes were all inline (c->lock held). */
static void done_inline(struct sfs_cache *c, struct sfs_chunk *ch,
			struct cache_peer *p)
{
	const struct sfs_cache_obj *o = &c->sets[ch->set]->objs[ch->obj];
	int strong = !p->trusted || c->sha256_all;
	int rc = c->verify ? sfs_cache_verify(c, ch, o, strong,
					      c->sets[ch->set]->label, p->label)
			   : 0;
	ch->state = rc ? CH_FAILED : CH_READY;
	ch->err = rc;
	if (!rc) {
		sfs_cache_touch(c, ch);
		c->st.pulls++;
		c->st.bytes_pulled += ch->len;
	} else {
		c->st.checksum_errors++;
		p->checksum_errors++;
		if (!p->trusted)
			member_failed(c, p, ch);
		c->pick_epoch++; /* it may be distrusted from now on */
	}
	sfs_cache_settle(c, ch);
	if (rc)
		sfs_cache_wake(c);
	else
		sfs_cache_wake_chunk(c, ch);
}

/* A pull about to be posted on last-resort peer @p: whose lane is it?
 * Said before the post: the pull may complete, and its callback run on
 * the posting thread, before the transport's read returns. */
static void lane_log(const struct cache_peer *p, uint32_t obj, uint64_t idx,
		     int any, uint32_t lane)
{
	SFS_LOG(SFS_DEBUG, "cache",
		"%s: pulls object %u chunk %" PRIu64 " (%s)", p->label, obj,
		idx,
		!any		   ? "no lanes"
		: lane == SFS_NONE ? "its lane"
				   : "another's lane");
}

/* The refusal of object @obj of the set born @born, or NULL (c->lock). */
static struct sfs_refused *refused_of(struct sfs_cache *c, uint64_t born,
				      uint32_t obj)
{
	for (size_t i = 0; i < SFS_REFUSED_MAX; i++)
		if (c->refused[i].born == born && c->refused[i].obj == obj)
			return &c->refused[i];
	return NULL;
}

/*
 * A pull of @ch failed alone on its connection with @err: its object's
 * reads fail unpulled for a while (1 s, doubling while it fails again,
 * at most 30 s: a file withdrawn on a seed stays so for its generation),
 * each pull of it would break the connection again under
 * the others' (c->lock held).
 */
static void refuse(struct sfs_cache *c, const struct sfs_chunk *ch, int err)
{
	uint64_t born = c->sets[ch->set]->born, now = sfs_now_ms();
	struct sfs_refused *r = refused_of(c, born, ch->obj);
	if (!r) {
		r = &c->refused[0]; /* else the one whose hold ended first */
		for (size_t i = 1; i < SFS_REFUSED_MAX; i++)
			if (c->refused[i].until_ms < r->until_ms)
				r = &c->refused[i];
		*r = (struct sfs_refused){.born = born, .obj = ch->obj};
	}
	r->times = SFS_MIN(r->times + 1, 16u);
	r->err = err;
	r->until_ms = now + SFS_MIN((uint64_t)REFUSE_MS << (r->times - 1),
				    (uint64_t)REFUSE_MAX_MS);
	SFS_LOG(SFS_WARN, "cache",
		"%s object %u: a pull of it failed alone on its connection "
		"(%s): its reads fail without a pull for %" PRIu64 " ms",
		c->sets[ch->set]->label, ch->obj, strerror(-err),
		r->until_ms - now);
}

/* Post @ch, taken off its queue, to peer @pi reading holder @hi's pieces
 * (c->lock held; dropped meanwhile).  1 when it was done with (posted,
 * completed inline, or failed); 0 when the provider was busy and @ch is
 * queued again. */
static int post(struct sfs_cache *c, uint32_t pi, struct sfs_chunk *ch,
		uint32_t hi)
{
	struct cache_peer *p = c->peers[pi];
	const struct sfs_cache_hobj *ho = &c->holders[hi]->objs[ch->obj];
	uint64_t off = sfs_chunk_off(c, ch), end = off + ch->len;
	struct sfs_xport_rd rds[PIECES_MAX];
	size_t n = 0;
	int prc = 0;

	/* Its object's pull failed alone a moment ago: not pulled. */
	const struct sfs_refused *rf =
		refused_of(c, c->sets[ch->set]->born, ch->obj);
	if (rf && sfs_now_ms() < rf->until_ms) {
		ch->state = CH_FAILED;
		ch->err = rf->err;
		sfs_cache_settle(c, ch);
		sfs_cache_wake(c);
		return 1;
	}

	/* The pieces of [off, end): inline ones copied now, remote ones
	 * read into place. */
	size_t lo = 0, hi2 = ho->npieces;
	while (lo + 1 < hi2) {
		size_t mid = lo + (hi2 - lo) / 2;
		if (ho->pieces[mid].off <= off)
			lo = mid;
		else
			hi2 = mid;
	}
	for (size_t k = lo; k < ho->npieces && ho->pieces[k].off < end; k++) {
		const struct sfs_cache_piece *pc = &ho->pieces[k];
		uint64_t a = SFS_MAX(off, pc->off);
		uint64_t b = SFS_MIN(end, pc->off + pc->len);
		if (a >= b)
			continue;
		if (pc->data) {
			memcpy(ch->data + (a - off), pc->data + (a - pc->off),
			       (size_t)(b - a));
			continue;
		}
		if (n == PIECES_MAX) {
			prc = -E2BIG; /* a manifest cut into crumbs */
			break;
		}
		rds[n++] = (struct sfs_xport_rd){.local = ch->data + (a - off),
						 .lmr = ch->mr,
						 .raddr = pc->raddr +
							  (a - pc->off),
						 .rkey = pc->key,
						 .len = (size_t)(b - a)};
	}
	if (!prc && n == 0) {
		done_inline(c, ch, p);
		return 1;
	}
	uint64_t id = p->id;
	if (!prc) {
		busy_account(c, p);
		ch->state = CH_LOADING;
		ch->err = 0;
		ch->peer = pi;
		ch->peer_gen = p->gen;
		ch->holder = hi;
		ch->seq = ++p->post_seq;
		/* Alone on its connection (the pump posts nothing beside
		 * it, nor it beside others). */
		ch->solo = p->solo_left > 0;
		p->solo_left -= (unsigned int)ch->solo;
		ch->member = !p->trusted;
		ch->strong = ch->member || c->sha256_all;
		ch->posted_ns = sfs_now_ns();
		ch->posted_ms = ch->posted_ns / 1000000u;
		ch->overtaken_ms = 0;
		sfs_list_add_tail(&p->loading, ch);
		p->inflight++;
		c->loading++;
		/* One pin for @ch (until its callback), one for this call
		 * (the callback may come before the lock is back). */
		p->pins += 2; /* (a callback that never comes keeps its
				 peer's memory, as it keeps @ch's slot) */
		sfs_cache_touch(c, ch); /* coming: an export is old */
		/* Once posted, @ch may complete (and a direct one be freed by
		 * its reader) before the lock is back: what is logged of it
		 * is taken now. */
		int any = 0, last = p->last_resort;
		uint32_t lane = SFS_NONE;
		if (last) {
			struct sfs_swarm sw;
			struct sfs_swarm_chunk q = swarm_chunk(ch);
			swarm_of(c, ch->set, 0, &sw);
			lane = sfs_swarm_lane(&sw, &q, &any);
		}
		if (last)
			lane_log(p, ch->obj, ch->idx, any, lane);
		/* Counted before it may land (a reader it wakes sees it
		 * counted), taken back if it was not posted (a busy
		 * provider's -EAGAIN posts it again later). */
		int own = last && any && lane == SFS_NONE,
		    others = last && any && lane != SFS_NONE;
		c->st.lane_own += own;
		c->st.lane_others += others;
		pthread_mutex_unlock(&c->lock);
		prc = sfs_xport_read(c->x, id, rds, n, sfs_peer_on_pulled, ch);
		pthread_mutex_lock(&c->lock);
		if (!prc) {
			p->busy_since_ms = 0;
			sfs_peer_unpin(c, pi);
			return 1;
		}
		c->st.lane_own -= own;
		c->st.lane_others -= others;
		/* Nothing was posted: it is ours again (an orphan too: the
		 * transport never had it). */
		p->solo_left += (unsigned int)ch->solo;
		ch->solo = 0;
		if (!ch->orphan) {
			busy_account(c, p);
			sfs_list_del(&p->loading, ch);
			p->inflight--;
			sfs_cache_touch(c, ch);
		}
		c->loading--;
		if (ch->orphan)
			p->orphans--; /* the transport never had it */
		/* Both pins: a removed @p is not used below (@ch, its
		 * pull, was orphaned then). */
		p->pins--;
		sfs_peer_unpin(c, pi);
		if (ch->dst && ch->abandoned) {
			/* A direct chunk whose reader gave up while it was
			 * being posted: no callback will free it, nor may it
			 * be posted again (the memory is the caller's). */
			sfs_cache_dst_release(c, ch);
			pthread_cond_broadcast(&c->cond); /* c->loading */
			return 1;
		}
		if (ch->orphan) {
			ch->orphan = 0;
			ch->state = CH_FAILED;
			ch->err = -EAGAIN; /* its readers start it again */
			sfs_cache_settle(c, ch);
			sfs_cache_wake(c);
			return 1;
		}
	}
	if (prc == -EAGAIN && !c->stopping) {
		/* The provider is busy (connecting): back at the head of the
		 * queue; the worker posts again shortly.  The readers'
		 * deadlines decide when busy means stalled; a peer that is
		 * no seed, busy for as long as a pull of it may take, has
		 * failed (a member that never completes its connection costs
		 * every try a wait in the transport). */
		SFS_LOG(SFS_DEBUG, "cache",
			"%s: busy: object %u chunk %" PRIu64 " queued again",
			p->label, ch->obj, ch->idx);
		requeue_head(c, ch);
		uint64_t now = sfs_now_ms();
		p->busy_until_ms = now + POST_RETRY_MS;
		if (!p->trusted && !p->busy_since_ms)
			p->busy_since_ms = now;
		if (!p->trusted && now - p->busy_since_ms >= hedge_ms(c, p)) {
			member_failed(c, p, ch);
			SFS_LOG(SFS_WARN, "cache",
				"%s: connecting for %" PRIu64 " ms: not tried "
				"again for %" PRIu64 " ms",
				p->label, hedge_ms(c, p),
				p->probe_after_ms - now);
		}
		sfs_peer_wake_worker(c);
		return 0;
	}
	if (!c->stopping) {
		SFS_LOG(SFS_WARN, "cache",
			"cannot pull %s object %u bytes [%" PRIu64 ", +%u) "
			"from %s: %s",
			c->sets[ch->set]->label, ch->obj, off, ch->len,
			p->label, strerror(-prc));
		c->st.errors_transport++;
		p->errors++;
	}
	if (!c->stopping && prc != -E2BIG && !servable(c, ch, pi)) {
		requeue_head(c, ch);
		c->st.failovers++;
	} else {
		ch->state = CH_FAILED;
		ch->err = prc;
		sfs_cache_settle(c, ch);
	}
	if (!c->stopping && prc != -E2BIG)
		trouble(c, p, "a pull could not be posted", prc, 1);
	sfs_cache_wake(c);
	return 1;
}

/* A holder's facts as one pick took them: valid while .stamp is the
 * pick's (c->picks). */
struct sfs_pick_fact {
	uint64_t stamp;
	struct sfs_swarm_member m;
};

/* One pick's view: the policy's view of the set of the chunks it looks
 * at (built once a set, not once a chunk), the picking peer's facts,
 * and its holders' facts, each taken once when first asked (c->lock
 * held throughout: nothing they say changes meanwhile). */
struct pick_view {
	struct sfs_cache *c;
	uint64_t stamp;
	uint64_t wake_ms; /* the earliest a wait said "not yet" ends */
	uint32_t set;	  /* of sw; SFS_NONE: none yet */
	struct sfs_swarm sw;
	struct sfs_swarm_member pm;
};

static int view_has(void *arg, uint32_t h, uint32_t obj, uint64_t idx,
		    int coming)
{
	return swarm_has(((struct pick_view *)arg)->c, h, obj, idx, coming);
}

static int view_member(void *arg, uint32_t h, struct sfs_swarm_member *m)
{
	struct pick_view *v = arg;
	struct sfs_cache *c = v->c;
	if (h >= c->cap_pick_facts) /* grown at each pick's start */
		return swarm_member(c, h, m);
	struct sfs_pick_fact *f = &c->pick_facts[h];
	if (f->stamp != v->stamp) {
		int rc = swarm_member(c, h, &f->m);
		if (rc)
			return rc;
		f->stamp = v->stamp;
	}
	*m = f->m;
	return 0;
}

static const struct sfs_swarm_ops view_ops = {
	.has = view_has,
	.member = view_member,
};

/* @ch was said to be coming by members and did not come within the
 * wait (swarm.c's coming_wait): each of them that still says so failed
 * (member_failed: unproven, its word keeps nothing off from now on).
 * (c->lock held) */
static void coming_late(struct sfs_cache *c, const struct sfs_chunk *ch)
{
	const struct cache_set *s = c->sets[ch->set];
	for (size_t i = 0; i < s->nholders; i++) {
		const struct cache_holder *h = c->holders[s->holders[i]];
		struct cache_peer *p = c->peers[h->peer];
		if (!p->trusted && !p->fails &&
		    sfs_holder_coming(h, ch->obj, ch->idx)) {
			SFS_LOG(SFS_INFO, "cache",
				"%s: said %s object %u chunk %" PRIu64
				" was coming, and it did not come",
				p->label, s->label, ch->obj, ch->idx);
			member_failed(c, p, NULL);
		}
	}
}

/* Does peer @pi take @ch now, through holder *hi?  @help: a
 * last-resort peer also takes a lagging member's (swarm.c). */
static int takes(struct pick_view *v, uint32_t pi, struct sfs_chunk *ch,
		 int shy, int help, uint64_t now, uint32_t *hi)
{
	struct sfs_cache *c = v->c;
	if ((*hi = holder_for(c, ch, pi)) == SFS_NONE ||
	    (shy && !servable(c, ch, pi)))
		return 0;
	/* A peer that has not proved itself probes with what no reader
	 * waits for, unless only it can serve. */
	if (!proven(c->peers[pi]) && ch->demand && sfs_peer_seed_has(c, ch))
		return 0;
	/* Its pieces past the keep they were given: never posted (the
	 * worker marks that too, but may look a moment late). */
	if (keep_over(c, *hi, now))
		return 0;
	if (v->set != ch->set) {
		swarm_of(c, ch->set, now, &v->sw);
		v->sw.ops = &view_ops;
		v->sw.arg = v;
		v->set = ch->set;
	}
	struct sfs_swarm_chunk q = swarm_chunk(ch);
	v->sw.wake_ms = 0;
	int yes = sfs_swarm_takes(&v->sw, &q, &v->pm, *hi, help);
	if (yes && q.coming_late)
		coming_late(c, ch);
	ch->held_ms = q.held_ms;
	ch->coming_ms = q.coming_ms;
	ch->lost_ms = q.lost_ms;
	uint64_t w = v->sw.wake_ms;
	if (w && (!v->wake_ms || w < v->wake_ms))
		v->wake_ms = w;
	return yes;
}

/* The first queued chunk peer @pi can serve, and through which holder;
 * for a last-resort peer with none, the first of a lagging member's.
 * A peer whose source's control port is silent, or that stalled a
 * moment ago, takes only what no other holder can serve. */
static struct sfs_chunk *pick(struct sfs_cache *c, uint32_t pi, uint32_t *hi,
			      uint64_t *wake)
{
	struct list *lists[2] = {&c->demand, &c->ahead};
	const struct cache_peer *p = c->peers[pi];
	uint64_t now = sfs_now_ms();
	int shy = p->silent_since != 0 || now < p->avoid_until_ms ||
		  distrusted(p);
	/* Facts for every holder number (a failure to grow: asked
	 * afresh, as before). */
	if (c->cap_pick_facts < c->nholders) {
		size_t cap = c->cap_pick_facts;
		if (!sfs_grow((void **)&c->pick_facts, &cap, c->nholders,
			      sizeof(c->pick_facts[0]))) {
			memset(c->pick_facts + c->cap_pick_facts, 0,
			       (cap - c->cap_pick_facts) *
				       sizeof(c->pick_facts[0]));
			c->cap_pick_facts = cap;
		}
	}
	struct pick_view v = {.c = c, .stamp = ++c->picks, .set = SFS_NONE};
	struct sfs_chunk *found = NULL;
	swarm_peer(c, pi, &v.pm);
	for (int help = 0; help <= p->last_resort && !found; help++)
		for (int k = 0; k < 2 && !found; k++)
			for (struct sfs_chunk *ch = lists[k]->head; ch;
			     ch = ch->next)
				if (takes(&v, pi, ch, shy, help, now, hi)) {
					found = ch;
					break;
				}
	/* A peer shy until a moment: it takes more then. */
	if (shy && p->avoid_until_ms > now &&
	    (!v.wake_ms || p->avoid_until_ms < v.wake_ms))
		v.wake_ms = p->avoid_until_ms;
	*wake = v.wake_ms;
	return found;
}

/* The worker's look at the time: a wait's end a pick missed is seen
 * within this long. */
#define PICK_EPOCH_MS 250

/* Look again at @when (c->lock held; 0: no need): the worker is woken
 * to sleep less when it sleeps past that (a reader's pump found it). */
static void wake_at(struct sfs_cache *c, uint64_t when)
{
	if (when && (!c->wake_ms || when < c->wake_ms))
		c->wake_ms = when;
	if (when && when < c->worker_until_ms)
		pthread_cond_signal(&c->work_cond);
}

void sfs_peer_pump(struct sfs_cache *c)
{
	static __thread size_t start;
	int posted = 1;

	while (!c->stopping && c->queued && posted) {
		posted = 0;
		uint64_t now = sfs_now_ms();
		size_t np = c->npeers;
		/* Round robin over the peers: each takes one chunk a turn,
		 * so no peer's window fills before another gets work. */
		for (size_t k = 0; k < np && c->queued && !c->stopping; k++) {
			uint32_t pi = (uint32_t)((start + k) % np);
			struct cache_peer *p = c->peers[pi];
			uint32_t hi;
			if (p->removed || p->state != SFS_PEER_UP ||
			    p->inflight >= p->window ||
			    now < p->busy_until_ms || !p->nholders)
				continue;
			/* One at a time while pulls wait to be tried alone,
			 * and nothing beside one posted so (pull_failed). */
			if (p->inflight &&
			    (p->solo_left || p->loading.head->solo))
				continue;
			/* Unproven: one pull at a time, none while one moved
			 * off it is still out, none before its next try. */
			if (!proven(p) && (p->inflight || p->orphans ||
					   now < p->probe_after_ms)) {
				if (now < p->probe_after_ms)
					wake_at(c, p->probe_after_ms);
				continue;
			}
			/* A peer whose pick found nothing is not asked
			 * again while what that stood on stays (a scan of
			 * the whole queue per peer per completed pull was
			 * most of a mount daemon's time at 4 KiB chunks). */
			if (p->none_epoch == c->pick_epoch &&
			    now < p->none_until) {
				if (p->none_until != UINT64_MAX)
					wake_at(c, p->none_until);
				continue;
			}
			uint64_t wake, epoch = c->pick_epoch;
			struct sfs_chunk *ch = pick(c, pi, &hi, &wake);
			wake_at(c, wake);
			if (!ch) {
				/* As of before the pick: a change it made
				 * itself (a repair asked) counts. */
				p->none_epoch = epoch;
				p->none_until = wake ? wake : UINT64_MAX;
				continue;
			}
			dequeue(c, ch);
			/* Again only while something goes out: a provider
			 * busy for longer than POST_RETRY_MS on every peer
			 * (connecting to a process that is stopped) would
			 * keep a reader here for ever, and the worker, which
			 * finds stalls, off the lock.  The worker posts
			 * again after POST_RETRY_MS. */
			posted |= post(c, pi, ch, hi);
			if (np != c->npeers)
				break; /* peers changed while unlocked */
		}
		start++;
	}
}

int sfs_cache_verify(struct sfs_cache *c, struct sfs_chunk *ch,
		     const struct sfs_cache_obj *o, int strong, const char *set,
		     const char *label)
{
	if (!o->xxh3 && !strong)
		return 0; /* a seed's object without checksums */
	if (strong && !o->sha256) {
		if (label)
			SFS_LOG(SFS_WARN, "cache",
				"%s object %u: no SHA-256 published, and %s is "
				"no seed: its bytes cannot be checked",
				set, ch->obj, label);
		return -EBADMSG;
	}
	uint64_t cs = 1ull << o->csum_shift;
	uint64_t base = sfs_chunk_off(c, ch);
	for (uint64_t off = 0; off < ch->len; off += cs) {
		size_t n = (size_t)SFS_MIN(cs, ch->len - off);
		uint64_t k = (base + off) >> o->csum_shift;
		const char *what = NULL;
		uint8_t d[32];
		if (!strong) {
			if (XXH3_64bits(ch->data + off, n) != o->xxh3[k])
				what = "checksum";
		} else if (gnutls_hash_fast(GNUTLS_DIG_SHA256, ch->data + off,
					    n, d) ||
			   memcmp(d, o->sha256 + 32 * k, 32)) {
			what = "SHA-256";
		}
		if (what) {
			if (label)
				SFS_LOG(SFS_WARN, "cache",
					"%s mismatch: %s object %u bytes "
					"[%" PRIu64 ", +%zu) from %s",
					what, set, ch->obj, base + off, n,
					label);
			return -EBADMSG;
		}
	}
	return 0;
}

/* A completed pull of @ch from @p failed with @status (not cancelled):
 * pulled again from another holder, or failed (c->lock held). */
static void pull_failed(struct sfs_cache *c, struct sfs_chunk *ch,
			struct cache_peer *p, uint32_t pi, int status)
{
	const char *set = c->sets[ch->set]->label;
	if (status == -EBADMSG) {
		/* Wrong bytes from a live source: not the connection's
		 * fault.  Pulled again, from another holder if there is
		 * one, a few times at most. */
		c->st.checksum_errors++;
		if (p) /* NULL: its index was reused meanwhile */
			p->checksum_errors++;
		if (p && !p->trusted)
			member_failed(c, p, ch);
		c->pick_epoch++; /* it may be distrusted from now on */
		/* One holder: pulled once more; several: a few times,
		 * preferring another holder each time. */
		unsigned int lim =
			c->sets[ch->set]->nholders > 1 ? MISMATCH_MAX : 2;
		if (++ch->mismatches < lim && !c->stopping &&
		    !c->sets[ch->set]->retired) {
			ch->avoid = ch->holder;
			SFS_LOG(SFS_INFO, "cache",
				"pulling %s object %u chunk %" PRIu64
				" again after a checksum mismatch",
				set, ch->obj, ch->idx);
			sfs_peer_enqueue(c, ch, ch->demand || ch->refs > 0);
			return;
		}
		ch->state = CH_FAILED;
		ch->err = status;
		/* Its object's read-ahead is not pulled: the bytes past a
		 * bad chunk are likely bad too (a file withdrawn on the seed
		 * reads zeros), and a reader that reads it again and again
		 * would pull them at full speed for nothing. */
		if (p)
			drop_ahead(c, pi, ch->set, ch->obj);
		return;
	}
	SFS_LOG(SFS_WARN, "cache",
		"pull of %s object %u bytes [%" PRIu64 ", +%u) from %s "
		"failed: %s",
		set, ch->obj, sfs_chunk_off(c, ch), ch->len, p->label,
		strerror(-status));
	c->st.errors_transport++;
	p->errors++;
	if (!p->trusted)
		member_failed(c, p, ch);
	if (!c->stopping && !c->sets[ch->set]->retired &&
	    !servable(c, ch, pi)) {
		/* Another holder has it: no reader sees this one. */
		c->st.failovers++;
		sfs_peer_enqueue(c, ch, ch->demand || ch->refs > 0);
	} else if (!ch->solo && ch->refs > 0 && ch->xfails < XFAILS_MAX &&
		   !c->stopping && !c->sets[ch->set]->retired) {
		/* It failed beside other pulls on its connection, and a
		 * connection breaks under all of them for one read the
		 * source refused (a key it took away): the failure may be
		 * another's.  Pulled again alone, ahead of the rest, once
		 * connected again: a read fails its readers only when it
		 * fails alone, so one broken file fails no other. */
		ch->xfails++;
		p->solo_left++;
		c->st.solo_retries++;
		ch->demand = 1;
		requeue_head(c, ch);
	} else {
		ch->state = CH_FAILED;
		ch->err = status;
		drop_ahead(c, pi, ch->set, ch->obj);
		if (ch->solo && !c->stopping)
			refuse(c, ch, status);
	}
	trouble(c, p, "a pull failed", status, 0);
}

void sfs_peer_mismatch(struct sfs_cache *c, struct sfs_chunk *ch)
{
	/* Its pull is over: its peer may be gone, its index another's. */
	struct cache_peer *p = sfs_peer_of(c, ch);
	/* Counted as a good pull when it landed: it was not. */
	c->st.pulls--;
	c->st.bytes_pulled -= ch->len;
	if (p) {
		p->pulls--;
		p->bytes -= ch->len;
	}
	ch->unverified = 0;
	pull_failed(c, ch, p, ch->peer, -EBADMSG);
	sfs_cache_wake(c);
}

/* Check pulled chunk @ch against its checksums (c->lock held; dropped
 * meanwhile): 0 or -EBADMSG. */
static int check_pulled(struct sfs_cache *c, struct sfs_chunk *ch)
{
	const struct cache_set *s = c->sets[ch->set];
	const struct sfs_cache_obj o = s->objs[ch->obj];
	/* Stays: the peer is pinned. */
	const char *label = c->peers[ch->peer]->label;
	int strong = ch->strong;
	c->st.strong_checks += strong;
	pthread_mutex_unlock(&c->lock);
	sfs_cache_test_delay(c);
	int rc = sfs_cache_verify(c, ch, &o, strong, s->label, label);
	pthread_mutex_lock(&c->lock);
	return rc;
}

/* The rest of a completed pull of @ch, verified (@status its outcome):
 * its peer's accounting, then ready, pulled again or failed, and its
 * pin on its peer dropped (c->lock held throughout). */
static void pulled(struct sfs_cache *c, struct sfs_chunk *ch, int status)
{
	/* @ch pins its peer until the end of this call. */
	uint32_t pin = ch->peer;
	/* (Checked after the verification: the lock was dropped.) */
	if (ch->dst && ch->abandoned) {
		/* Its reader gave up: the memory is the caller's again. */
		if (!ch->orphan) {
			struct cache_peer *p = c->peers[ch->peer];
			busy_account(c, p);
			sfs_list_del(&p->loading, ch);
			p->inflight--;
		} else {
			c->peers[pin]->orphans--;
		}
		c->loading--;
		sfs_cache_dst_release(c, ch);
		sfs_peer_unpin(c, pin);
		pthread_cond_broadcast(&c->cond); /* c->loading: quiescing */
		wake_for_slot(c);
		return;
	}
	uint64_t now = sfs_now_ms();
	c->loading--;
	if (ch->orphan) {
		/* Its connection was taken out: the bytes are not used (a
		 * new pull serves its readers), only the slot comes back.  A
		 * reader that looks only now (it was waiting on another) is
		 * told to start it again, as one that saw it orphaned. */
		c->peers[pin]->orphans--;
		ch->orphan = 0;
		ch->state = CH_FAILED;
		ch->err = -EAGAIN;
		sfs_cache_settle(c, ch);
		sfs_peer_unpin(c, pin);
		sfs_cache_wake(c);
		wake_for_slot(c); /* an unproven peer may probe again */
		return;
	}
	uint32_t pi = ch->peer;
	struct cache_peer *p = c->peers[pi];
	struct cache_set *s = c->sets[ch->set];
	int all = status != 0; /* wake every reader, not only @ch's */
	busy_account(c, p);
	sfs_list_del(&p->loading, ch);
	p->inflight--;
	sfs_cache_touch(c, ch); /* no longer coming: ready, or not */
	if (status == -ECANCELED) {
		/* A reconnect (or the end) cancelled it: pulled again for
		 * whoever waits. */
		if (!c->stopping && ch->refs > 0 && !s->retired) {
			sfs_peer_enqueue(c, ch, 1);
		} else {
			ch->state = CH_FAILED;
			ch->err = -ECANCELED;
		}
	} else {
		p->last_done_ms = now;
		s->last_done_ms = now;
		/* Earlier posts still out were overtaken: if they never
		 * come, only the time from now counts for them. */
		for (struct sfs_chunk *q = p->loading.head; q; q = q->next)
			if (q->seq < ch->seq && !q->overtaken_ms)
				q->overtaken_ms = now;
		if (!status) {
			double lat = (double)(now - ch->posted_ms);
			p->lat_ms = p->lat_ms > 0 ? 0.8 * p->lat_ms + 0.2 * lat
						  : lat;
			if (p->last_resort)
				c->seed_lat_ms = p->lat_ms;
			ch->state = CH_READY;
			ch->seed_next = 0;
			ch->unverified =
				ch->dst && c->verify && s->objs[ch->obj].xxh3;
			p->last_ok_ms = now;
			p->busy_bytes += ch->len;
			p->failures = 0;
			p->pulls++;
			p->bytes += ch->len;
			if (!p->trusted && !ch->unverified && c->verify) {
				/* Verified against SHA-256: it served. */
				all |= !p->proven;
				p->proven = 1;
				p->fails /= 2;
			}
			if (p->state == SFS_PEER_DOWN) {
				p->state = SFS_PEER_UP;
				p->since_ms = now;
				all = 1;
			}
			p->down_ms = 0; /* it answers again */
			c->st.pulls++;
			c->st.bytes_pulled += ch->len;
			SFS_LOG(SFS_DEBUG, "cache",
				"%s: object %u chunk %" PRIu64 " in %" PRIu64
				" ms (queued %" PRIu64 " ms before)",
				p->label, ch->obj, ch->idx, now - ch->posted_ms,
				ch->posted_ms -
					SFS_MIN(ch->posted_ms, ch->queued_ms));
			sfs_hist_observe(&c->st.pull_latency,
					 (sfs_now_ns() - ch->posted_ns) /
						 1000u);
			if (s->disk && s->objs[ch->obj].xxh3 && !ch->dst)
				sfs_cache_store_later(c, ch);
		} else {
			pull_failed(c, ch, p, pi, status);
		}
	}
	sfs_cache_settle(c, ch);
	sfs_peer_unpin(c, pin);
	/* A chunk that landed from a peer that was up concerns only its
	 * own readers (and cond's waiters); anything else, everyone. */
	if (all) {
		sfs_cache_wake(c);
		c->pick_epoch++; /* a member proved itself: seeds may wait */
	} else {
		sfs_cache_wake_chunk(c, ch);
	}
	wake_for_slot(c); /* a slot in the window is free */
}

void sfs_peer_on_pulled(void *arg, int status)
{
	struct sfs_chunk *ch = arg;
	struct sfs_cache *c = ch->c;

	pthread_mutex_lock(&c->lock);
	/* A direct chunk is checked by its reader, beside this thread. */
	if (!status && c->verify && !ch->orphan && !ch->dst) {
		if (ch->strong && c->nverifiers && !c->stopping) {
			/* SHA-256 on a verifier, not on the transport's
			 * thread, which goes on landing the next ones.  Its
			 * peer made progress now (a backlog of checks must not
			 * make it look stalled, or slow enough to hedge). */
			ch->landed = 1;
			c->peers[ch->peer]->last_done_ms = sfs_now_ms();
			ch->vnext = NULL;
			if (c->vq_tail)
				c->vq_tail->vnext = ch;
			else
				c->vq_head = ch;
			c->vq_tail = ch;
			c->vq_n++;
			pthread_cond_signal(&c->vq_cond);
			pthread_mutex_unlock(&c->lock);
			return;
		}
		status = check_pulled(c, ch);
	}
	pulled(c, ch, status);
	pthread_mutex_unlock(&c->lock);
}

void *sfs_peer_verifier(void *arg)
{
	struct sfs_cache *c = arg;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct sfs_chunk *ch = c->vq_head;
		if (!ch) {
			if (c->stopping)
				break;
			pthread_cond_wait(&c->vq_cond, &c->lock);
			continue;
		}
		if (!(c->vq_head = ch->vnext))
			c->vq_tail = NULL;
		c->vq_n--;
		ch->vnext = NULL;
		ch->landed = 0;
		/* Moved off its peer meanwhile: its bytes go unused. */
		int status = ch->orphan ? 0 : check_pulled(c, ch);
		pulled(c, ch, status);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* The deadline of a reader of queued @ch that came at @start: the
 * timeout from the last progress of what could serve it. */
static uint64_t queued_deadline(struct sfs_cache *c, const struct sfs_chunk *ch,
				uint64_t start, struct cache_peer **only)
{
	struct cache_peer *p = only_peer(c, ch->set);
	uint64_t base = start;
	*only = p;
	if (!p)
		return SFS_MAX(base, c->sets[ch->set]->last_done_ms) +
		       c->timeout_ms;
	/* One source: its control port went silent just before: count
	 * from then, if nothing completed since. */
	if (p->silent_since && p->silent_since < base &&
	    p->silent_since >= p->last_done_ms &&
	    base - p->silent_since <= 2 * (uint64_t)c->timeout_ms)
		base = p->silent_since;
	return SFS_MAX(base, p->last_done_ms) + c->timeout_ms;
}

int sfs_peer_wait(struct sfs_cache *c, struct sfs_chunk *ch, uint64_t start)
{
	enum chunk_state last = ch->state;
	int told = 0; /* the worker knows a reader waits */

	for (;;) {
		if (ch->orphan)
			return -EAGAIN; /* the caller starts it again */
		if (ch->state == CH_READY)
			return 0;
		if (c->sets[ch->set]->retired)
			return -ESTALE; /* its generation is gone */
		if (ch->state == CH_FAILED)
			return ch->err ? ch->err : -EIO;
		if (c->waits_ended)
			return -ESHUTDOWN; /* the mount is going */
		uint64_t now = sfs_now_ms(), deadline;
		if (ch->state != last) {
			/* Waiting for the disk does not count against the
			 * network: the clock starts again. */
			if (last == CH_DISK)
				start = now;
			last = ch->state;
		}
		if (ch->state == CH_DISK) {
			deadline = start + c->timeout_ms;
			if (now >= deadline) {
				c->st.disk_timeouts++;
				SFS_LOG(SFS_WARN, "cache",
					"disk tier: object %u chunk %" PRIu64
					" not read within %u ms",
					ch->obj, ch->idx, c->timeout_ms);
				return -ETIMEDOUT;
			}
		} else if (ch->state == CH_QUEUED) {
			int rc = servable(c, ch, SFS_NONE);
			if (rc && !lane_wait(c, ch)) {
				c->st.unavailable++;
				return rc;
			}
			struct cache_peer *p;
			deadline = queued_deadline(c, ch, start, &p);
			if (now >= deadline) {
				c->st.timeouts++;
				SFS_LOG(SFS_WARN, "cache",
					"%s object %u chunk %" PRIu64 ": no "
					"progress for %u ms",
					c->sets[ch->set]->label, ch->obj,
					ch->idx, c->timeout_ms);
				if (p)
					trouble(c, p, "no progress", -ETIMEDOUT,
						1);
				return -ETIMEDOUT;
			}
		} else {
			struct cache_peer *p = c->peers[ch->peer];
			uint64_t base = start;
			/* Posted on a peer avoided as stuck: with a reader
			 * now, the pull may go elsewhere (find_stalls). */
			if (!told && now < p->avoid_until_ms) {
				told = 1;
				sfs_peer_wake_worker(c);
			}
			if (p->silent_since && p->silent_since < base &&
			    p->silent_since >= p->last_done_ms &&
			    base - p->silent_since <=
				    2 * (uint64_t)c->timeout_ms)
				base = p->silent_since;
			int lost = ch->overtaken_ms != 0;
			base = SFS_MAX(base, lost ? ch->overtaken_ms
						  : p->last_done_ms);
			deadline = base + c->timeout_ms;
			if (now >= deadline) {
				SFS_LOG(SFS_WARN, "cache",
					"%s object %u chunk %" PRIu64 " from "
					"%s: %s for %u ms",
					c->sets[ch->set]->label, ch->obj,
					ch->idx, p->label,
					lost ? "no answer while later pulls "
					       "completed"
					     : "no progress",
					c->timeout_ms);
				trouble(c, p,
					lost ? "a pull got no answer"
					     : "no progress",
					-ETIMEDOUT, 1);
				/* Taken out, its pulls orphaned: one that
				 * another holder has is pulled again there
				 * (counted in failovers), no error. */
				if (ch->orphan && !servable(c, ch, SFS_NONE))
					return -EAGAIN;
				c->st.timeouts++;
				return -ETIMEDOUT;
			}
		}
		struct timespec ts = sfs_abstime(SFS_MIN(deadline - now, 1000));
		c->chq_waiters++;
		pthread_cond_timedwait(sfs_cache_chq(c, ch), &c->lock, &ts);
		c->chq_waiters--;
	}
}

void sfs_cache_set_reconnect(struct sfs_cache *c,
			     int (*fn)(void *, uint32_t, uint64_t, uint64_t *),
			     void *arg)
{
	pthread_mutex_lock(&c->lock);
	c->reconnect = fn;
	c->reconnect_arg = arg;
	pthread_mutex_unlock(&c->lock);
}

/* Reconnect @p (c->lock held; dropped meanwhile). */
static void repair(struct sfs_cache *c, uint32_t pi)
{
	struct cache_peer *p = c->peers[pi];
	uint64_t old = p->id, fresh = p->id, t0 = sfs_now_ms();
	const char *why = p->why ? p->why : "asked";
	int (*fn)(void *, uint32_t, uint64_t, uint64_t *) = c->reconnect;
	void *arg = c->reconnect_arg;

	uint32_t id = SFS_PEER_ID(pi, p->gen);

	p->repair = 0;
	p->repairing = 1; /* its struct stays meanwhile */
	pthread_mutex_unlock(&c->lock);
	int rc =
		fn ? fn(arg, id, old, &fresh) : sfs_xport_peer_reset(c->x, old);
	pthread_mutex_lock(&c->lock);
	p->repairing = 0;
	p->repair_after_ms = sfs_now_ms() + REPAIR_SPACING_MS;
	if (p->removed) {
		/* Removed meanwhile (its old transport peer with it): a new
		 * one made for it goes too. */
		if (!rc && fresh != old) {
			pthread_mutex_unlock(&c->lock);
			sfs_xport_peer_remove(c->x, fresh);
			pthread_mutex_lock(&c->lock);
		}
		sfs_peer_reclaim(c, pi);
		sfs_cache_wake(c);
		return;
	}
	if (!rc) {
		p->id = fresh;
		p->unconnected = 0;
		c->st.reconnects++;
		/* Pulls posted on the old connection may complete much
		 * later or never: their readers start them again. */
		sfs_peer_orphan(c, p, SFS_NONE);
		SFS_LOG(SFS_INFO, "cache",
			"%s: connected again (%s) in %" PRIu64 " ms", p->label,
			why, sfs_now_ms() - t0);
		/* Down after a stall: its hold runs out first (a source
		 * that stalls may well take a connection), then the next
		 * pull probes (peer_usable). */
		if (p->state == SFS_PEER_RECONNECTING ||
		    (p->state == SFS_PEER_DOWN &&
		     sfs_now_ms() >= p->down_until_ms)) {
			p->state = SFS_PEER_UP;
			p->since_ms = sfs_now_ms();
		}
	} else if (!c->stopping) {
		c->st.reconnect_failures++;
		p->failures++;
		SFS_LOG(SFS_WARN, "cache", "%s: cannot connect again: %s",
			p->label, strerror(-rc));
		if (p->state != SFS_PEER_DOWN)
			go_down(c, p, rc, "connecting again failed");
		else
			p->down_until_ms =
				sfs_now_ms() + hold_ms(c, p->failures);
		/* Its old connection is known broken: the next probe is
		 * connecting again, not a pull posted on it. */
		p->unconnected = 1;
	}
	sfs_cache_wake(c);
}

/*
 * Could the pull of @ch posted on peer @pi go elsewhere?  A re-seeder's
 * pulls move to another re-seeder; to any holder (a seed too) once its
 * control port is silent, or for a pull a reader waits for: a member
 * that stalls must not hold a reader until --timeout when a seed has
 * the chunk.  Its read-ahead stays (moving that to a seed would only
 * load the one source every replica shares).  A seed's move to any
 * other holder.
 */
static int movable(struct sfs_cache *c, const struct sfs_chunk *ch, uint32_t pi,
		   uint64_t now)
{
	const struct cache_peer *p = c->peers[pi];
	if (p->last_resort || p->silent_since || ch->refs > 0)
		return !servable(c, ch, pi);
	return member_has(c, ch, pi, now);
}

/* Orphan the pulls posted on @pi that may go elsewhere (movable): their
 * readers start them again there.  Returns how many (c->lock held). */
static size_t move_off(struct sfs_cache *c, uint32_t pi)
{
	struct cache_peer *p = c->peers[pi];
	uint64_t now = sfs_now_ms();
	size_t moved = 0;
	for (struct sfs_chunk *ch = p->loading.head, *next; ch; ch = next) {
		next = ch->next;
		if (ch->landed || !movable(c, ch, pi, now))
			continue; /* here already, or no better source */
		orphan(c, p, ch);
		moved++;
	}
	c->st.failovers += moved;
	if (moved)
		sfs_cache_wake(c);
	return moved;
}

/*
 * Peer @pi made no progress for @ms while other holders could serve
 * its pulls.  Nothing says its connection is broken: a source shared by
 * many replicas looks just the same, and reconnecting it would throw
 * away what it is sending.  So its pulls that may go elsewhere
 * (movable) move there at once, and for a while (1 s, doubling while it
 * stays stuck) it takes only what nobody else can serve, and keeps no
 * seed off a chunk (member_has).  The pulls it keeps are its readers'
 * to time out; a broken connection shows as failed pulls, and those
 * reconnect.
 */
static void avoid(struct sfs_cache *c, uint32_t pi, uint64_t ms)
{
	struct cache_peer *p = c->peers[pi];
	uint64_t hold = hold_ms(c, ++p->failures);

	p->avoided_ms = sfs_now_ms();
	p->avoid_until_ms = p->avoided_ms + hold;
	p->stalls++;
	member_failed(c, p, NULL);
	size_t moved = move_off(c, pi);
	SFS_LOG(SFS_WARN, "cache",
		"%s: no progress for %" PRIu64 " ms while other sources "
		"have its chunks: %zu pulls moved to them; for %" PRIu64
		" ms it serves only what they do not hold",
		p->label, ms, moved, hold);
	sfs_peer_wake_worker(c);
	sfs_cache_wake(c);
}

/* How long a pull from @p, a peer that is no seed, may take before it
 * is hedged (see HEDGE_LATENCIES). */
static uint64_t hedge_ms(const struct sfs_cache *c, const struct cache_peer *p)
{
	double t = SFS_MAX(HEDGE_LATENCIES * c->seed_lat_ms,
			   HEDGE_OWN * p->lat_ms);
	uint64_t h = SFS_MAX((uint64_t)HEDGE_MIN_MS, (uint64_t)t);
	return SFS_MIN(h, (uint64_t)c->timeout_ms);
}

/*
 * Hedge @p, a peer that is no seed: its pulls out for longer than
 * hedge_ms that a seed has move to that seed (their next try is the
 * seed's), and it is unproven again (member_failed): a member that
 * stalls or trickles costs a chunk that long once, never a read.  Its
 * slots stay the transport's until its reads end; it takes nothing
 * more until they did.  Returns when to look again (c->lock held).
 */
static uint64_t hedge(struct sfs_cache *c, struct cache_peer *p, uint64_t now)
{
	uint64_t limit = hedge_ms(c, p), next = now + 1000;
	size_t moved = 0;
	for (struct sfs_chunk *ch = p->loading.head, *nx; ch; ch = nx) {
		nx = ch->next;
		if (ch->landed)
			continue; /* its bytes came: only its check waits */
		if (now < ch->posted_ms + limit) {
			next = SFS_MIN(next, ch->posted_ms + limit);
			continue;
		}
		if (!sfs_peer_seed_has(c, ch))
			continue; /* the readers' deadlines decide */
		orphan(c, p, ch);
		moved++;
	}
	if (!moved)
		return next;
	c->st.hedges += moved;
	c->st.failovers += moved;
	member_failed(c, p, NULL);
	SFS_LOG(SFS_WARN, "cache",
		"%s: %zu pulls took over %" PRIu64 " ms (a seed's take %.0f "
		"ms, its own %.0f): moved to a seed; not tried again for "
		"%" PRIu64 " ms",
		p->label, moved, limit, c->seed_lat_ms, p->lat_ms,
		p->probe_after_ms - now);
	sfs_peer_wake_worker(c);
	sfs_cache_wake(c);
	return next;
}

/*
 * A peer with pulls out and no completion for a while, while another
 * holder could serve them, is avoided now rather than after the
 * timeout: "a while" is FAILOVER_MS, or STALL_CHUNKS chunks' time at its
 * measured rate, or STALL_LATENCIES times its pulls' usual time, if
 * longer (a slow or shared link is not a stalled one).  One avoided
 * that completed nothing since, with a pull out from before, is still
 * stuck: avoided again when its hold ends, without that wait (its rate,
 * measured over the stall, would make the wait longer each time), and
 * meanwhile a pull a reader comes for moves at once.  Returns when to
 * look again (c->lock held).
 */
static uint64_t find_stalls(struct sfs_cache *c, uint64_t now)
{
	uint64_t next = now + 1000;
	for (size_t i = 0; i < c->npeers; i++) {
		struct cache_peer *p = c->peers[i];
		if (p->removed || p->state != SFS_PEER_UP || !p->inflight)
			continue;
		if (!p->trusted)
			next = SFS_MIN(next, hedge(c, p, now));
		if (!p->inflight)
			continue;
		/* No completion since the oldest pull out was posted, or
		 * one overtaken and still out: stalled. */
		uint64_t oldest = UINT64_MAX, lost = UINT64_MAX;
		for (struct sfs_chunk *ch = p->loading.head; ch;
		     ch = ch->next) {
			oldest = SFS_MIN(oldest, ch->posted_ms);
			if (ch->overtaken_ms)
				lost = SFS_MIN(lost, ch->overtaken_ms);
		}
		uint64_t since =
			SFS_MIN(SFS_MAX(oldest, p->last_done_ms), lost);
		int stuck = p->avoided_ms && p->last_done_ms < p->avoided_ms &&
			    oldest < p->avoided_ms;
		uint64_t limit = FAILOVER_MS;
		if (p->rate > 0) {
			double t = STALL_CHUNKS * 1e3 * c->chunk_size / p->rate;
			limit = SFS_MAX(limit, (uint64_t)t);
		}
		/* A source shared by many answers each of them slowly: a
		 * stall is much longer than its pulls take. */
		limit = SFS_MAX(limit, (uint64_t)(STALL_LATENCIES * p->lat_ms));
		/* Nothing from it yet: its first pulls queue behind everyone
		 * else's at a busy source. */
		if (!p->lat_ms)
			limit = SFS_MAX(limit, (uint64_t)FIRST_PULL_MS);
		if (!stuck && limit >= c->timeout_ms)
			continue; /* the readers' deadlines decide */
		/* Another holder could serve one of its pulls (a seed too: a
		 * member that stalls keeps no seed off a chunk). */
		int alt = 0;
		for (struct sfs_chunk *ch = p->loading.head; ch && !alt;
		     ch = ch->next)
			alt = !servable(c, ch, (uint32_t)i);
		if (!alt)
			continue;
		/* Its control port is silent too: gone, most likely. */
		if (p->silent_since)
			since = 0;
		if (!stuck && now < since + limit) {
			next = SFS_MIN(next, since + limit);
		} else if (now >= p->avoid_until_ms) {
			avoid(c, (uint32_t)i, since ? now - since : limit);
			next = SFS_MIN(next, p->avoid_until_ms);
		} else {
			/* Avoided, and still stuck: a pull a reader came for
			 * since moves now. */
			move_off(c, (uint32_t)i);
			next = SFS_MIN(next, p->avoid_until_ms);
		}
	}
	return next;
}

void *sfs_peer_worker(void *arg)
{
	struct sfs_cache *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->stopping) {
		uint64_t now = sfs_now_ms();
		uint32_t todo = SFS_NONE;
		c->work = 0;
		uint64_t next = find_stalls(c, now);
		uint64_t ends = expire_holders(c, now);
		if (ends)
			next = SFS_MIN(next, ends);
		for (size_t i = 0; i < c->npeers && todo == SFS_NONE; i++) {
			struct cache_peer *p = c->peers[i];
			if (c->queued && p->busy_until_ms > now)
				next = SFS_MIN(next, p->busy_until_ms);
			if (p->state == SFS_PEER_DOWN && !p->removed)
				next = SFS_MIN(next, SFS_MAX(p->down_until_ms,
							     now + 1));
			if (!p->repair || p->repairing || p->removed)
				continue;
			if (now >= p->repair_after_ms)
				todo = (uint32_t)i;
			else
				next = SFS_MIN(next, p->repair_after_ms);
		}
		if (todo != SFS_NONE) {
			repair(c, todo);
			continue;
		}
		/* A peer whose hold is over takes work again (it probes). */
		for (size_t i = 0; i < c->npeers && c->queued; i++) {
			struct cache_peer *p = c->peers[i];
			if (p->state == SFS_PEER_DOWN && p->nholders &&
			    now >= p->down_until_ms)
				peer_usable(c, p);
		}
		/* Picks that found nothing look again now and then: what
		 * they stood on may have moved without a wake (a peer's
		 * facts, the time). */
		if (now >= c->pick_epoch_ms + PICK_EPOCH_MS) {
			c->pick_epoch++;
			c->pick_epoch_ms = now;
		}
		c->wake_ms = 0;
		sfs_peer_pump(c);
		if (c->work || c->stopping)
			continue;
		if (c->wake_ms)
			next = SFS_MIN(next, SFS_MAX(c->wake_ms, now + 1));
		if (c->queued)
			next = SFS_MIN(next, c->pick_epoch_ms + PICK_EPOCH_MS);
		struct timespec ts = sfs_abstime(next > now ? next - now : 1);
		c->worker_until_ms = next > now ? next : now + 1;
		pthread_cond_timedwait(&c->work_cond, &c->lock, &ts);
		c->worker_until_ms = 0;
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

uint64_t sfs_cache_ahead(struct sfs_cache *c, uint32_t set, uint64_t min,
			 uint64_t max)
{
	double rate = 0;
	pthread_mutex_lock(&c->lock);
	if (set < c->nsets) {
		const struct cache_set *s = c->sets[set];
		for (size_t i = 0; i < s->nholders; i++) {
			const struct cache_peer *p =
				c->peers[c->holders[s->holders[i]]->peer];
			if (p->state == SFS_PEER_UP)
				rate += p->rate;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (rate <= 0)
		return min;
	double v = rate * AHEAD_SECONDS;
	uint64_t w = v >= (double)max ? max : (uint64_t)v;
	w &= ~((uint64_t)c->chunk_size - 1);
	return SFS_MAX(w, min);
}

void sfs_cache_peer_answers(struct sfs_cache *c, uint32_t peer)
{
	pthread_mutex_lock(&c->lock);
	struct cache_peer *p = sfs_peer_at(c, peer);
	if (p && p->state == SFS_PEER_UP)
		p->down_ms = 0;
	pthread_mutex_unlock(&c->lock);
}

void sfs_cache_note_silence(struct sfs_cache *c, uint32_t peer,
			    uint64_t since_ms)
{
	pthread_mutex_lock(&c->lock);
	struct cache_peer *p = sfs_peer_at(c, peer);
	if (p) {
		if (!since_ms)
			p->silent_since = 0;
		else if (!p->silent_since ||
			 p->last_done_ms >= p->silent_since ||
			 since_ms < p->silent_since)
			p->silent_since = since_ms;
		sfs_cache_wake(c);
		sfs_peer_wake_worker(c); /* who may serve what moved */
	}
	pthread_mutex_unlock(&c->lock);
}

int sfs_cache_peer(struct sfs_cache *c, uint32_t peer,
		   struct sfs_cache_peer_info *pi)
{
	memset(pi, 0, sizeof(*pi));
	pthread_mutex_lock(&c->lock);
	/* A removed peer's last state too, while its index is not
	 * reused. */
	uint32_t pix = SFS_PEER_IDX(peer);
	struct cache_peer *p = pix < c->npeers ? c->peers[pix] : NULL;
	if (!p || p->vacant || p->gen != SFS_PEER_GEN(peer)) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	uint64_t now = sfs_now_ms();
	/* Down is down until a pull got through: a peer whose hold is
	 * over, or that connected again (to a dead process, that can
	 * succeed), is not said to be up (a dead run's peer was, until
	 * its next pull failed). */
	if (p->down_ms && p->state != SFS_PEER_RECONNECTING) {
		pi->state = SFS_PEER_DOWN;
		pi->since_ms = now - p->down_ms;
		pi->retry = p->state == SFS_PEER_UP ||
			    (now >= p->down_until_ms && !p->repairing);
	} else {
		pi->state = p->state;
		pi->since_ms = now - p->since_ms;
		pi->retry = 0;
	}
	pi->err = p->err;
	pi->any_ok = p->last_ok_ms != 0;
	pi->last_ok_ms = p->last_ok_ms ? now - p->last_ok_ms : 0;
	pi->rate = p->rate;
	pi->inflight = p->inflight;
	pi->window = p->window;
	pi->pulls = p->pulls;
	pi->bytes = p->bytes;
	pi->errors = p->errors;
	pi->checksum_errors = p->checksum_errors;
	pi->stalls = p->stalls;
	pi->avoided_ms = now < p->avoid_until_ms ? p->avoid_until_ms - now : 0;
	pi->removed = p->removed;
	pi->trusted = p->trusted;
	pi->proven = proven(p);
	pi->probe_ms = now < p->probe_after_ms ? p->probe_after_ms - now : 0;
	pthread_mutex_unlock(&c->lock);
	return 0;
}
