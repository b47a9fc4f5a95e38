/* SPDX-License-Identifier: MIT */
/*
 * peer.c - the cache's connections to seeds: pull queues, posting,
 * completions, deadlines, throughput and reconnects.
 *
 * A timeout means "no progress", not "took long".  A reader waiting on
 * a queued or posted chunk gives up when its peer completed nothing for
 * the timeout since the reader came (or since the seed's control port
 * went silent, if that is what it noted just before); a posted chunk
 * that later posts overtook counts only from then, so a pull the
 * transport lost is found while others flow.  The window of pulls in
 * flight follows the measured throughput (a quarter second of it, 2 to
 * 32 chunks), so on a slow link each posted pull completes soon and
 * the rest wait in the queue, demand before read-ahead.
 */
#include "cache/cache_impl.h"

#include "common/log.h"
#include "common/util.h"
#include "transports/transport.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define WINDOW_MIN 2
#define WINDOW_START 4
#define WINDOW_MAX 32
#define WINDOW_SECONDS 0.25 /* bytes in flight: this much of the rate */
#define AHEAD_SECONDS 1.0   /* read-ahead: this much of the rate */
#define RATE_SAMPLE_NS 200000000ull
#define REPAIR_SPACING_MS 250 /* one peer is reconnected at most this often */
#define POST_RETRY_MS 5	      /* a busy provider is tried again after this */

int sfs_peer_find_or_add(struct sfs_cache *c, uint64_t id, const char *label,
			 uint32_t *idx)
{
	for (size_t i = 0; i < c->npeers; i++) {
		struct cache_peer *p = c->peers[i];
		if (p->id == id && !p->removed) {
			p->sources++;
			*idx = (uint32_t)i;
			return 0;
		}
	}
	struct cache_peer *p = calloc(1, sizeof(*p));
	if (!p || sfs_grow((void **)&c->peers, &c->cap_peers, c->npeers + 1,
			   sizeof(c->peers[0]))) {
		free(p);
		return -ENOMEM;
	}
	p->id = id;
	/* "seed HOST:PORT (model generation N)": the connection is the
	 * part before the parenthesis. */
	size_t n = strcspn(label, "(");
	while (n && label[n - 1] == ' ')
		n--;
	snprintf(p->label, sizeof(p->label), "%.*s", (int)n, label);
	p->state = SFS_PEER_UP;
	p->since_ms = sfs_now_ms();
	p->window = WINDOW_START;
	p->sources = 1;
	*idx = (uint32_t)c->npeers;
	c->peers[c->npeers++] = p;
	return 0;
}

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
	p->window = w < WINDOW_MIN   ? WINDOW_MIN
		    : w > WINDOW_MAX ? WINDOW_MAX
				     : (unsigned int)w;
}

void sfs_peer_wake_worker(struct sfs_cache *c)
{
	c->work = 1;
	pthread_cond_signal(&c->work_cond);
}

void sfs_peer_enqueue(struct sfs_cache *c, struct sfs_chunk *ch, int demand)
{
	uint32_t pi = c->sources[ch->src]->peer;
	struct cache_peer *p = c->peers[pi];
	if (c->stopping) {
		ch->state = CH_FAILED;
		ch->err = -ESHUTDOWN;
		sfs_cache_settle(c, ch);
		pthread_cond_broadcast(&c->cond);
		return;
	}
	ch->peer = pi;
	ch->state = CH_QUEUED;
	ch->demand = demand;
	sfs_list_add_tail(demand ? &p->demand : &p->ahead, ch);
	p->queued++;
}

void sfs_peer_promote(struct sfs_cache *c, struct sfs_chunk *ch)
{
	if (ch->state == CH_DISK) {
		ch->demand = 1;
		return;
	}
	if (ch->state != CH_QUEUED || ch->demand)
		return;
	struct cache_peer *p = c->peers[ch->peer];
	sfs_list_del(&p->ahead, ch);
	sfs_list_add_tail(&p->demand, ch);
	ch->demand = 1;
}

void sfs_peer_fail_queued(struct sfs_cache *c, struct cache_peer *p, int err,
			  uint32_t src_only)
{
	struct list *lists[2] = {&p->demand, &p->ahead};
	for (int k = 0; k < 2; k++) {
		for (struct sfs_chunk *ch = lists[k]->head, *next; ch;
		     ch = next) {
			next = ch->next;
			if (src_only != UINT32_MAX && ch->src != src_only)
				continue;
			sfs_list_del(lists[k], ch);
			p->queued--;
			ch->state = CH_FAILED;
			ch->err = err;
			sfs_cache_settle(c, ch);
		}
	}
	pthread_cond_broadcast(&c->cond);
}

/*
 * A pull of (@src, @region) failed: the read-ahead queued behind it on
 * @p would most likely fail the same way (a withdrawn file), and each
 * failure would drop the connection again.  It is given up; readers
 * that come for those bytes pull them anew.  (A queued chunk a reader
 * waits for is on the demand list: kept.)
 */
static void drop_ahead(struct sfs_cache *c, struct cache_peer *p, uint32_t src,
		       uint32_t region)
{
	for (struct sfs_chunk *ch = p->ahead.head, *next; ch; ch = next) {
		next = ch->next;
		if (ch->src != src || ch->region != region)
			continue;
		sfs_list_del(&p->ahead, ch);
		p->queued--;
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
	SFS_LOG(SFS_WARN, "cache",
		"%s is unreachable: %s (%s); reads that need it fail at once "
		"for %" PRIu64 " ms, then one tries again",
		p->label, why, strerror(-err), hold);
	sfs_peer_fail_queued(c, p, err, UINT32_MAX);
}

/*
 * Something went wrong with @p: @why, @err.  It is reconnected in the
 * background.  A stall (no progress for the timeout) or a pull that
 * could not even be posted (@stalled) means the seed may be gone: it is
 * down for a while (reads fail at once: the reader that found the
 * stall has waited the timeout, the next ones need not), then one read
 * tries again.  A failed pull only reconnects: the seed answered
 * (libfabric tcp, for one, answers a withdrawn key by dropping the
 * connection), and one broken file must not take the seed away from the
 * others.  Called with c->lock held.
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
	pthread_cond_broadcast(&c->cond);
}

int sfs_peer_usable(struct sfs_cache *c, struct cache_peer *p)
{
	if (p->state != SFS_PEER_DOWN)
		return 0;
	if (sfs_now_ms() < p->down_until_ms || p->repairing)
		return p->err ? p->err : -EIO;
	/* The hold is over: this read probes. */
	p->state = SFS_PEER_UP;
	p->since_ms = sfs_now_ms();
	SFS_LOG(SFS_INFO, "cache", "%s: trying again", p->label);
	return 0;
}

/* Post @ch, taken off its queue (c->lock held; dropped meanwhile). */
static void post(struct sfs_cache *c, struct cache_peer *p,
		 struct sfs_chunk *ch)
{
	const struct cache_source *s = c->sources[ch->src];
	const struct sfs_cache_region *r = &s->regions[ch->region];
	uint64_t off = ch->idx << c->chunk_shift;
	struct sfs_xport_rd rd = {.local = ch->data,
				  .lmr = ch->mr,
				  .raddr = r->raddr + off,
				  .rkey = r->key,
				  .len = ch->len};

	busy_account(c, p);
	ch->state = CH_LOADING;
	ch->err = 0;
	ch->seq = ++p->post_seq;
	ch->posted_ms = sfs_now_ms();
	ch->overtaken_ms = 0;
	ch->epoch = c->epoch;
	sfs_list_add_tail(&p->loading, ch);
	p->inflight++;
	c->loading++;
	uint64_t id = p->id;
	pthread_mutex_unlock(&c->lock);
	int prc = sfs_xport_read(c->x, id, &rd, 1, sfs_peer_on_pulled, ch);
	pthread_mutex_lock(&c->lock);
	if (!prc)
		return;
	busy_account(c, p);
	sfs_list_del(&p->loading, ch);
	p->inflight--;
	c->loading--;
	if (prc == -EAGAIN && !c->stopping) {
		/* The provider is busy (connecting): back at the head of its
		 * queue; the worker posts again shortly.  The readers'
		 * deadlines decide when busy means stalled. */
		ch->state = CH_QUEUED;
		sfs_list_add_head(ch->demand ? &p->demand : &p->ahead, ch);
		p->queued++;
		p->busy_until_ms = sfs_now_ms() + POST_RETRY_MS;
		sfs_peer_wake_worker(c);
		return;
	}
	ch->state = CH_FAILED;
	ch->err = prc;
	if (!c->stopping) {
		SFS_LOG(SFS_WARN, "cache",
			"cannot pull region %u bytes [%" PRIu64 ", +%u) from "
			"%s: %s",
			ch->region, off, ch->len, s->label, strerror(-prc));
		c->st.errors_transport++;
		trouble(c, p, "a pull could not be posted", prc, 1);
	}
	pthread_cond_broadcast(&c->cond);
	sfs_cache_settle(c, ch);
}

void sfs_peer_pump(struct sfs_cache *c)
{
	while (!c->stopping) {
		struct sfs_chunk *ch = NULL;
		struct cache_peer *p = NULL;
		uint64_t now = sfs_now_ms();
		for (size_t i = 0; i < c->npeers && !ch; i++) {
			p = c->peers[i];
			if (!p->queued || p->state != SFS_PEER_UP ||
			    p->inflight >= p->window || now < p->busy_until_ms)
				continue;
			ch = p->demand.head ? p->demand.head : p->ahead.head;
		}
		if (!ch)
			return;
		sfs_list_del(ch->demand ? &p->demand : &p->ahead, ch);
		p->queued--;
		post(c, p, ch);
	}
}

int sfs_cache_verify(struct sfs_cache *c, struct sfs_chunk *ch,
		     const struct sfs_cache_region *r, const char *label)
{
	if (!r->xxh3)
		return 0;
	uint64_t cs = 1ull << r->csum_shift;
	uint64_t base = ch->idx << c->chunk_shift;
	for (uint64_t o = 0; o < ch->len; o += cs) {
		size_t n = (size_t)SFS_MIN(cs, ch->len - o);
		if (XXH3_64bits(ch->data + o, n) !=
		    r->xxh3[(base + o) >> r->csum_shift]) {
			if (label)
				SFS_LOG(SFS_WARN, "cache",
					"checksum mismatch: region %u bytes "
					"[%" PRIu64 ", +%zu) from %s",
					ch->region, base + o, n, label);
			return -EBADMSG;
		}
	}
	return 0;
}

void sfs_peer_on_pulled(void *arg, int status)
{
	struct sfs_chunk *ch = arg;
	struct sfs_cache *c = ch->c;

	pthread_mutex_lock(&c->lock);
	if (!status && c->verify && !ch->orphan) {
		const struct cache_source *s = c->sources[ch->src];
		const struct sfs_cache_region r = s->regions[ch->region];
		const char *label = s->label; /* freed with the cache only */
		pthread_mutex_unlock(&c->lock);
		status = sfs_cache_verify(c, ch, &r, label);
		pthread_mutex_lock(&c->lock);
	}
	struct cache_peer *p = c->peers[ch->peer];
	const struct cache_source *s = c->sources[ch->src];
	uint64_t now = sfs_now_ms();
	c->loading--;
	if (ch->orphan) {
		/* Its connection was replaced: the bytes are not used (a new
		 * pull serves its readers), only the slot comes back. */
		ch->state = CH_FAILED;
		ch->err = -ECANCELED;
		sfs_cache_settle(c, ch);
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	busy_account(c, p);
	sfs_list_del(&p->loading, ch);
	p->inflight--;
	if (status == -ECANCELED) {
		/* A reconnect (or the end) cancelled it: pulled again for
		 * whoever waits, once the peer is back. */
		if (!c->stopping && ch->refs > 0 && !s->retired &&
		    p->state != SFS_PEER_DOWN) {
			sfs_peer_enqueue(c, ch, 1);
		} else {
			ch->state = CH_FAILED;
			ch->err = -ECANCELED;
		}
	} else {
		p->last_done_ms = now;
		/* Earlier posts still out were overtaken: if they never
		 * come, only the time from now counts for them. */
		for (struct sfs_chunk *q = p->loading.head; q; q = q->next)
			if (q->seq < ch->seq && !q->overtaken_ms)
				q->overtaken_ms = now;
		if (!status) {
			ch->state = CH_READY;
			p->last_ok_ms = now;
			p->busy_bytes += ch->len;
			p->failures = 0;
			if (p->state == SFS_PEER_DOWN) {
				p->state = SFS_PEER_UP;
				p->since_ms = now;
			}
			c->st.pulls++;
			c->st.bytes_pulled += ch->len;
			if (s->disk && s->regions[ch->region].xxh3)
				sfs_cache_store_later(c, ch);
		} else {
			ch->state = CH_FAILED;
			ch->err = status;
			if (status == -EBADMSG) {
				/* Wrong bytes from a live seed: not the
				 * connection's fault. */
				c->st.checksum_errors++;
			} else {
				SFS_LOG(SFS_WARN, "cache",
					"pull of region %u bytes [%" PRIu64
					", +%u) from %s failed: %s",
					ch->region, ch->idx << c->chunk_shift,
					ch->len, s->label, strerror(-status));
				c->st.errors_transport++;
				drop_ahead(c, p, ch->src, ch->region);
				trouble(c, p, "a pull failed", status, 0);
			}
		}
	}
	sfs_cache_settle(c, ch);
	pthread_cond_broadcast(&c->cond);
	sfs_peer_wake_worker(c); /* a slot in the window is free */
	pthread_mutex_unlock(&c->lock);
}

int sfs_peer_wait(struct sfs_cache *c, struct sfs_chunk *ch, uint64_t start)
{
	enum chunk_state last = ch->state;

	for (;;) {
		if (ch->orphan)
			return -EAGAIN; /* the caller starts it again */
		if (ch->state == CH_READY)
			return 0;
		if (ch->state == CH_FAILED) {
			/* Bytes that did not match: pulled once more. */
			if (ch->err != -EBADMSG || ch->retried || c->stopping)
				return ch->err ? ch->err : -EIO;
			ch->retried = 1;
			SFS_LOG(SFS_INFO, "cache",
				"pulling region %u chunk %" PRIu64 " again "
				"after a checksum mismatch",
				ch->region, ch->idx);
			sfs_peer_enqueue(c, ch, 1);
			sfs_peer_pump(c);
			start = sfs_now_ms();
			last = ch->state;
			continue;
		}
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
					"disk tier: region %u chunk %" PRIu64
					" not read within %u ms",
					ch->region, ch->idx, c->timeout_ms);
				return -ETIMEDOUT;
			}
		} else {
			struct cache_peer *p = c->peers[ch->peer];
			if (p->state == SFS_PEER_DOWN) {
				c->st.unavailable++;
				return p->err ? p->err : -EIO;
			}
			uint64_t base = start;
			/* The seed's control port went silent just before:
			 * count from then, if nothing completed since. */
			if (p->silent_since && p->silent_since < base &&
			    p->silent_since >= p->last_done_ms &&
			    base - p->silent_since <=
				    2 * (uint64_t)c->timeout_ms)
				base = p->silent_since;
			int lost = ch->state == CH_LOADING && ch->overtaken_ms;
			base = SFS_MAX(base, lost ? ch->overtaken_ms
						  : p->last_done_ms);
			deadline = base + c->timeout_ms;
			if (now >= deadline) {
				c->st.timeouts++;
				SFS_LOG(SFS_WARN, "cache",
					"region %u chunk %" PRIu64 " from %s: "
					"%s for %u ms",
					ch->region, ch->idx,
					c->sources[ch->src]->label,
					lost ? "no answer while later pulls "
					       "completed"
					     : "no progress",
					c->timeout_ms);
				trouble(c, p,
					lost ? "a pull got no answer"
					     : "no progress",
					-ETIMEDOUT, 1);
				return -ETIMEDOUT;
			}
		}
		struct timespec ts = sfs_abstime(SFS_MIN(deadline - now, 1000));
		pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	}
}

void sfs_cache_set_reconnect(struct sfs_cache *c,
			     int (*fn)(void *, uint64_t, uint64_t *), void *arg)
{
	pthread_mutex_lock(&c->lock);
	c->reconnect = fn;
	c->reconnect_arg = arg;
	pthread_mutex_unlock(&c->lock);
}

/*
 * The transport was reset: pulls posted before are on a connection that
 * is gone (or going), and may complete much later or never.  They leave
 * the hash and their peers' windows, so their readers start them again
 * on the new connection; each slot comes back with its callback.
 */
static void orphan_posted(struct sfs_cache *c)
{
	uint64_t e = c->epoch++;
	for (size_t i = 0; i < c->npeers; i++) {
		struct cache_peer *p = c->peers[i];
		for (struct sfs_chunk *ch = p->loading.head, *next; ch;
		     ch = next) {
			next = ch->next;
			if (ch->epoch > e)
				continue;
			busy_account(c, p);
			sfs_list_del(&p->loading, ch);
			p->inflight--;
			sfs_cache_unhash(c, ch);
			ch->orphan = 1;
		}
	}
	pthread_cond_broadcast(&c->cond);
}

/* Reconnect @p (c->lock held; dropped meanwhile). */
static void repair(struct sfs_cache *c, struct cache_peer *p)
{
	uint64_t old = p->id, fresh = p->id, t0 = sfs_now_ms();
	const char *why = p->why ? p->why : "asked";
	int (*fn)(void *, uint64_t, uint64_t *) = c->reconnect;
	void *arg = c->reconnect_arg;

	p->repair = 0;
	p->repairing = 1;
	pthread_mutex_unlock(&c->lock);
	int rc = fn ? fn(arg, old, &fresh) : sfs_xport_reset(c->x);
	pthread_mutex_lock(&c->lock);
	p->repairing = 0;
	p->repair_after_ms = sfs_now_ms() + REPAIR_SPACING_MS;
	if (!rc) {
		p->id = fresh;
		c->st.reconnects++;
		orphan_posted(c);
		SFS_LOG(SFS_INFO, "cache",
			"%s: connected again (%s) in %" PRIu64 " ms", p->label,
			why, sfs_now_ms() - t0);
		if (p->state == SFS_PEER_RECONNECTING) {
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
	}
	pthread_cond_broadcast(&c->cond);
}

void *sfs_peer_worker(void *arg)
{
	struct sfs_cache *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->stopping) {
		uint64_t now = sfs_now_ms(), next = now + 1000;
		struct cache_peer *todo = NULL;
		c->work = 0;
		for (size_t i = 0; i < c->npeers && !todo; i++) {
			struct cache_peer *p = c->peers[i];
			if (p->queued && p->busy_until_ms > now)
				next = SFS_MIN(next, p->busy_until_ms);
			if (!p->repair || p->repairing || p->removed)
				continue;
			if (now >= p->repair_after_ms)
				todo = p;
			else
				next = SFS_MIN(next, p->repair_after_ms);
		}
		if (todo) {
			repair(c, todo);
			continue;
		}
		sfs_peer_pump(c);
		if (c->work || c->stopping)
			continue;
		struct timespec ts = sfs_abstime(next - now);
		pthread_cond_timedwait(&c->work_cond, &c->lock, &ts);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

uint64_t sfs_cache_ahead(struct sfs_cache *c, uint32_t src, uint64_t min,
			 uint64_t max)
{
	double rate = 0;
	pthread_mutex_lock(&c->lock);
	if (src < c->nsources)
		rate = c->peers[c->sources[src]->peer]->rate;
	pthread_mutex_unlock(&c->lock);
	if (rate <= 0)
		return min;
	double v = rate * AHEAD_SECONDS;
	uint64_t w = v >= (double)max ? max : (uint64_t)v;
	w &= ~((uint64_t)c->chunk_size - 1);
	return SFS_MAX(w, min);
}

void sfs_cache_note_silence(struct sfs_cache *c, uint32_t src,
			    uint64_t since_ms)
{
	pthread_mutex_lock(&c->lock);
	if (src < c->nsources) {
		struct cache_peer *p = c->peers[c->sources[src]->peer];
		if (!since_ms)
			p->silent_since = 0;
		else if (!p->silent_since ||
			 p->last_done_ms >= p->silent_since ||
			 since_ms < p->silent_since)
			p->silent_since = since_ms;
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
}

int sfs_cache_peer(struct sfs_cache *c, uint32_t src,
		   struct sfs_cache_peer_info *pi)
{
	memset(pi, 0, sizeof(*pi));
	pthread_mutex_lock(&c->lock);
	if (src >= c->nsources) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	struct cache_peer *p = c->peers[c->sources[src]->peer];
	uint64_t now = sfs_now_ms();
	if (p->state == SFS_PEER_DOWN && now >= p->down_until_ms)
		pi->state = SFS_PEER_UP; /* the next read probes */
	else
		pi->state = p->state;
	pi->err = p->err;
	pi->since_ms = now - p->since_ms;
	pi->any_ok = p->last_ok_ms != 0;
	pi->last_ok_ms = p->last_ok_ms ? now - p->last_ok_ms : 0;
	pi->rate = p->rate;
	pi->inflight = p->inflight;
	pi->window = p->window;
	pi->queued = p->queued;
	pthread_mutex_unlock(&c->lock);
	return 0;
}
