/* SPDX-License-Identifier: MIT */
/*
 * direct.c - reads straight into a caller's registered memory
 * (sfs_cache_read_into, cache.h).
 *
 * A read is cut into pieces, none crossing a chunk boundary, so each is
 * served by any holder of its chunk exactly as a slot's pull is.  A
 * piece whose checksum blocks it covers whole is a *direct* chunk: a
 * struct sfs_chunk of its own whose data is the caller's memory, queued,
 * posted, verified in place and failed over by peer.c like any other.
 * The ends of a read that cover a block only in part are *edges*: they
 * come through a slot (pulled whole, verified there) and are copied.
 *
 * The one hazard of pulling into someone else's memory is a read that
 * lands late.  A pull moved off a stalled source (orphaned) may still
 * be written by the transport: its bytes are pulled into a slot
 * meanwhile and copied only once the old read has ended, so they are
 * the last written.  A reader that gives up on a pull the transport
 * still has marks it abandoned: its dst counts it, and the transport's
 * callback frees it (sfs_cache_dst_release).
 */
#include "cache/core.h"

#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define AHEAD_CHUNKS 128 /* default bytes in flight: this many chunks */

/* A piece of one read: within one chunk of its object. */
struct piece {
	struct sfs_cache_rd *rd;
	uint64_t off; /* in the object */
	uint32_t len;
	uint8_t *to;
	int edge;	      /* through a slot */
	int started;	      /* its pull is under way */
	struct sfs_chunk *ch; /* direct: its chunk once started */
	uint64_t start_ms;
};

int sfs_cache_dst_new(struct sfs_cache *c, void *base, size_t len,
		      struct sfs_xport_mr *mr, struct sfs_cache_dst **out)
{
	struct sfs_cache_dst *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->c = c;
	d->base = base;
	d->len = len;
	d->mr = mr;
	*out = d;
	return 0;
}

int sfs_cache_dst_free(struct sfs_cache_dst *d)
{
	if (!d)
		return 0;
	struct sfs_cache *c = d->c;
	pthread_mutex_lock(&c->lock);
	int busy = d->held != 0;
	d->freed = 1;
	pthread_mutex_unlock(&c->lock);
	if (!busy)
		free(d);
	return busy ? -EBUSY : 0;
}

int sfs_cache_dst_busy(struct sfs_cache_dst *d)
{
	struct sfs_cache *c = d->c;
	pthread_mutex_lock(&c->lock);
	int busy = d->held != 0;
	pthread_mutex_unlock(&c->lock);
	return busy;
}

/* Done with direct chunk @ch (c->lock held): freed, or left to the
 * transport's callback when it still has it. */
static void direct_end(struct sfs_cache *c, struct sfs_chunk *ch)
{
	if (ch->state == CH_QUEUED) {
		sfs_list_del(ch->demand ? &c->demand : &c->ahead, ch);
		c->queued--;
	} else if (ch->state == CH_LOADING) {
		ch->abandoned = 1;
		ch->refs = 0;
		ch->dst->held++;
		return;
	}
	sfs_cache_set_drop(c, ch->set);
	free(ch);
}

/* Copy bytes [off, off+len) of (@set, @obj), within one chunk, into @to
 * through a slot (c->lock held; dropped while copying).  The read
 * started at @first; its clock at @start. */
static int slot_copy(struct sfs_cache *c, uint32_t set, uint32_t obj,
		     uint64_t off, uint32_t len, uint8_t *to, uint64_t first,
		     uint64_t start)
{
	for (;;) {
		int rc = sfs_cache_check_range(c, set, obj, off);
		if (rc)
			return rc;
		struct sfs_chunk *ch = sfs_cache_find_or_start(
			c, set, obj, off >> c->chunk_shift, 1, 1, &rc);
		if (!ch)
			return rc;
		sfs_peer_pump(c);
		rc = sfs_peer_wait(c, ch, start);
		if (!rc) {
			const uint8_t *from =
				ch->data + (off - (ch->idx << c->chunk_shift));
			pthread_mutex_unlock(&c->lock);
			memcpy(to, from, len);
			pthread_mutex_lock(&c->lock);
		}
		int moved = rc == -EAGAIN
				    ? sfs_cache_moved_off(c, ch, first, &start)
				    : 0;
		ch->refs--;
		sfs_cache_settle(c, ch);
		if (rc != -EAGAIN) /* orphaned: start it again */
			return rc;
		/* On other holders: their clock, within the budget. */
		if ((rc = moved))
			return rc;
	}
}

/* Does a peer that is no seed hold @set?  Its bytes must not land in a
 * caller's memory: a pull moved off it may still write there after the
 * read went on.  (c->lock held) */
static int members_hold(struct sfs_cache *c, uint32_t set)
{
	const struct cache_set *s = c->sets[set];
	for (size_t i = 0; i < s->nholders; i++)
		if (!c->peers[c->holders[s->holders[i]]->peer]->trusted)
			return 1;
	return 0;
}

/* Start piece @pc (c->lock held): a direct chunk queued, or an edge's
 * slot pull under way. */
static int start(struct sfs_cache *c, struct piece *pc)
{
	const struct sfs_cache_rd *rd = pc->rd;
	uint64_t idx = pc->off >> c->chunk_shift;
	int rc = 0;

	pc->start_ms = sfs_now_ms();
	/* A member came since the read was cut: through a slot too. */
	if (!pc->edge && members_hold(c, rd->set))
		pc->edge = 1;
	if (pc->edge) {
		/* Started now if a slot is free (as read-ahead: the reader
		 * is not at it yet, a member that has not served may probe
		 * with it; slot_copy's pin makes it demand); else its turn
		 * waits for one (slot_copy). */
		sfs_cache_find_or_start(c, rd->set, rd->obj, idx, 0, 0, &rc);
		return 0;
	}
	if ((rc = sfs_peer_set_usable(c, rd->set)))
		return rc;
	struct sfs_chunk *ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	ch->c = c;
	ch->data = pc->to;
	ch->mr = rd->dst->mr;
	ch->dst = rd->dst;
	ch->set = rd->set;
	sfs_cache_set_hold(c, ch->set); /* its checksums stay */
	ch->obj = rd->obj;
	ch->idx = idx;
	ch->start = pc->off;
	ch->len = pc->len;
	ch->avoid = SFS_NONE;
	ch->refs = 1;
	sfs_peer_enqueue(c, ch, 1);
	pc->ch = ch;
	return 0;
}

/* Wait for direct piece @pc (c->lock held). */
static int direct_wait(struct sfs_cache *c, struct piece *pc)
{
	struct sfs_chunk *ch = pc->ch;
	int rc;

	/* Checked here, on the reader's thread, while the transport's
	 * thread goes on landing the next ones. */
	while (!(rc = sfs_peer_wait(c, ch, pc->start_ms)) && ch->unverified) {
		const struct cache_set *s = c->sets[ch->set];
		const struct sfs_cache_obj o = s->objs[ch->obj];
		/* Its pull is over: its peer's index may be another's by
		 * now, so its label is copied. */
		const struct cache_peer *p = sfs_peer_of(c, ch);
		char label[sizeof(p->label)];
		snprintf(label, sizeof(label), "%s",
			 p ? p->label : "a source since removed");
		pthread_mutex_unlock(&c->lock);
		int v = sfs_cache_verify(c, ch, &o, ch->strong, s->label,
					 label);
		pthread_mutex_lock(&c->lock);
		ch->unverified = 0;
		if (!v)
			break;
		sfs_peer_mismatch(c, ch); /* pulled again, or failed */
		sfs_peer_pump(c);
	}
	pc->ch = NULL;
	if (rc && rc != -EAGAIN && ch->state == CH_QUEUED &&
	    members_hold(c, ch->set)) {
		/* Never handed to the transport, and no seed can serve it
		 * now (a member came, the seeds went): through a slot,
		 * which a member may fill. */
		uint32_t set = ch->set, obj = ch->obj;
		direct_end(c, ch);
		return slot_copy(c, set, obj, pc->off, pc->len, pc->to,
				 pc->start_ms, sfs_now_ms());
	}
	if (rc != -EAGAIN) {
		direct_end(c, ch);
		return rc;
	}
	/* Moved off a source that stalled: its read may still land here.
	 * The bytes come through a slot meanwhile, copied once it ended. */
	uint64_t deadline = sfs_now_ms() + c->timeout_ms;
	int rc2;
	if (sfs_cache_find_or_start(c, ch->set, ch->obj, ch->idx, 0, 1, &rc2))
		sfs_peer_pump(c);
	while (ch->orphan && sfs_now_ms() < deadline) {
		struct timespec ts =
			sfs_abstime(SFS_MIN(deadline - sfs_now_ms(), 1000));
		pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	}
	if (ch->orphan) {
		SFS_LOG(SFS_WARN, "cache",
			"%s object %u bytes [%" PRIu64 ", +%u): a read moved "
			"off a stalled source did not end within %u ms",
			c->sets[ch->set]->label, ch->obj, ch->start, ch->len,
			c->timeout_ms);
		direct_end(c, ch);
		return -ETIMEDOUT;
	}
	uint32_t set = ch->set, obj = ch->obj;
	direct_end(c, ch);
	uint64_t start;
	if ((rc = sfs_cache_moved(c, pc->start_ms, &start)))
		return rc;
	return slot_copy(c, set, obj, pc->off, pc->len, pc->to, pc->start_ms,
			 start);
}

/* Cut @rd into pieces at @out (room for them counted by count()). */
static size_t cut(struct sfs_cache *c, struct sfs_cache_rd *rd,
		  struct piece *out)
{
	const struct sfs_cache_obj *o = &c->sets[rd->set]->objs[rd->obj];
	uint64_t off = rd->off, end = rd->off + rd->len, a = off, b = end;
	size_t n = 0;

	if (members_hold(c, rd->set)) {
		/* All of it through slots, checked there, then copied. */
		a = b = end;
	} else if (c->verify && o->xxh3) {
		uint64_t cs = 1ull << o->csum_shift;
		a = (off + cs - 1) & ~(cs - 1);
		b = end == o->len ? end : end & ~(cs - 1);
		if (a >= b)
			a = b = end; /* no whole block: all of it an edge */
	}
	/* [off, a) edge, [a, b) direct, [b, end) edge; each split at the
	 * chunk boundaries. */
	const uint64_t from[3] = {off, a, b}, to[3] = {a, b, end};
	for (int k = 0; k < 3; k++) {
		for (uint64_t p = from[k]; p < to[k];) {
			uint64_t next = ((p >> c->chunk_shift) + 1)
					<< c->chunk_shift;
			uint64_t q = SFS_MIN(next, to[k]);
			out[n++] = (struct piece){.rd = rd,
						  .off = p,
						  .len = (uint32_t)(q - p),
						  .to = rd->to + (p - off),
						  .edge = k != 1};
			p = q;
		}
	}
	return n;
}

/* The most pieces @rd may be cut into. */
static size_t count(const struct sfs_cache *c, const struct sfs_cache_rd *rd)
{
	return (size_t)(rd->len >> c->chunk_shift) + 4;
}

static int check(struct sfs_cache *c, const struct sfs_cache_rd *rd)
{
	if (rd->set >= c->nsets || !c->sets[rd->set] ||
	    rd->obj >= c->sets[rd->set]->nobjs ||
	    rd->off > c->sets[rd->set]->objs[rd->obj].len ||
	    rd->len > c->sets[rd->set]->objs[rd->obj].len - rd->off ||
	    !rd->dst || rd->to < rd->dst->base || rd->len > rd->dst->len ||
	    (size_t)(rd->to - rd->dst->base) > rd->dst->len - rd->len)
		return -EINVAL;
	if (c->stopping)
		return -ESHUTDOWN;
	return c->sets[rd->set]->retired ? -ESTALE : 0;
}

int sfs_cache_read_into(struct sfs_cache *c, struct sfs_cache_rd *rds, size_t n,
			uint64_t ahead)
{
	size_t np = 0, cap = 0;
	int first = 0;

	if (!ahead)
		ahead = (uint64_t)AHEAD_CHUNKS * c->chunk_size;
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < n; i++) {
		rds[i].status = check(c, &rds[i]);
		if (!rds[i].status)
			cap += count(c, &rds[i]);
		else if (!first)
			first = rds[i].status;
	}
	struct piece *pcs = cap ? calloc(cap, sizeof(*pcs)) : NULL;
	if (cap && !pcs) {
		pthread_mutex_unlock(&c->lock);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		if (!rds[i].status)
			np += cut(c, &rds[i], pcs + np);

	/* A window of pieces in flight: started in order, waited for in
	 * order, the next started as each ends. */
	uint64_t inflight = 0;
	size_t next = 0;
	for (size_t done = 0; done < np; done++) {
		for (; next < np && (inflight < ahead || next == done);
		     next++) {
			struct piece *pc = &pcs[next];
			if (pc->rd->status)
				continue; /* that read failed already */
			int rc = start(c, pc);
			if (rc) {
				pc->rd->status = rc;
				continue;
			}
			pc->started = 1;
			inflight += pc->len;
		}
		sfs_peer_pump(c);
		struct piece *pc = &pcs[done];
		if (!pc->started)
			continue;
		inflight -= pc->len;
		/* A direct pull is waited for even when its read failed
		 * already: it writes into the caller's memory. */
		if (pc->edge && pc->rd->status)
			continue;
		int rc = pc->edge ? slot_copy(c, pc->rd->set, pc->rd->obj,
					      pc->off, pc->len, pc->to,
					      pc->start_ms, pc->start_ms)
				  : direct_wait(c, pc);
		if (rc && !pc->rd->status)
			pc->rd->status = rc;
	}
	for (size_t i = 0; i < n && !first; i++)
		first = rds[i].status;
	pthread_mutex_unlock(&c->lock);
	free(pcs);
	return first;
}
