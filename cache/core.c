/* SPDX-License-Identifier: MIT */
/*
 * core.c - what every part of the cache shares, at the bottom of the
 * folder: the lists, the hash, a chunk's settling (LRU or free list),
 * the sets' and peers' lifetimes, the holders' bitmaps, the disk
 * tier's queues, and when the slab should grow or shrink.  It calls
 * nothing else of the cache; slab.c, dq.c, peer.c, cache.c and
 * direct.c build on it (core.h draws the floors).
 */
#include "cache/core.h"
#include "cache/disk.h"

#include "common/log.h"
#include "common/util.h"

#include <stdlib.h>
#include <unistd.h>

/* Free @s and what it owns (not what it borrows).  NULL is fine. */
void sfs_cache_stamps_free(struct cache_set *s)
{
	for (size_t i = 0; s->stamps && i < s->nobjs; i++)
		free(s->stamps[i]);
	free(s->stamps);
	s->stamps = NULL;
}

void sfs_cache_set_struct_free(struct cache_set *s)
{
	if (!s)
		return;
	sfs_cache_stamps_free(s);
	free(s->label);
	free(s->objs);
	free(s->holders);
	free(s->base);
	free(s->lanes);
	free(s);
}

/* Set @si was released and nothing names it: freed, its disk source
 * too, its owner told, its number free for a later set (c->lock
 * held). */
void sfs_cache_set_free(struct sfs_cache *c, uint32_t si)
{
	struct cache_set *s = c->sets[si];
	c->sets[si] = NULL;
	c->free_sets[c->nfree_sets++] = si; /* room made by add_set */
	c->live_sets--;
	/* Dropped at its retirement; nothing reads or writes it now. */
	sfs_disk_release(s->disk);
	if (s->release)
		s->release(s->release_arg);
	SFS_LOG(SFS_DEBUG, "cache", "%s: freed", s->label);
	sfs_cache_set_struct_free(s);
}

void sfs_cache_set_hold(struct sfs_cache *c, uint32_t set)
{
	c->sets[set]->refs++;
}

void sfs_cache_set_drop(struct sfs_cache *c, uint32_t set)
{
	struct cache_set *s = c->sets[set];
	if (--s->refs == 0 && s->released)
		sfs_cache_set_free(c, set);
}

void sfs_list_del(struct list *l, struct sfs_chunk *ch)
{
	if (ch->prev)
		ch->prev->next = ch->next;
	else
		l->head = ch->next;
	if (ch->next)
		ch->next->prev = ch->prev;
	else
		l->tail = ch->prev;
	ch->prev = ch->next = NULL;
	l->n--;
}

void sfs_list_add_tail(struct list *l, struct sfs_chunk *ch)
{
	ch->next = NULL;
	ch->prev = l->tail;
	if (l->tail)
		l->tail->next = ch;
	else
		l->head = ch;
	l->tail = ch;
	l->n++;
}

void sfs_list_add_head(struct list *l, struct sfs_chunk *ch)
{
	ch->prev = NULL;
	ch->next = l->head;
	if (l->head)
		l->head->prev = ch;
	else
		l->tail = ch;
	l->head = ch;
	l->n++;
}

size_t sfs_cache_bucket(const struct sfs_cache *c, uint32_t set, uint32_t obj,
			uint64_t idx)
{
	uint64_t h = idx * 0x9e3779b97f4a7c15ull;
	h ^= ((uint64_t)set << 32 | obj) * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 29;
	return (size_t)(h & (c->nbuckets - 1));
}

struct sfs_chunk *sfs_cache_lookup(struct sfs_cache *c, uint32_t set,
				   uint32_t obj, uint64_t idx)
{
	struct sfs_chunk *ch = c->buckets[sfs_cache_bucket(c, set, obj, idx)];
	while (ch && !(ch->idx == idx && ch->obj == obj && ch->set == set))
		ch = ch->hnext;
	return ch;
}

void sfs_cache_unhash(struct sfs_cache *c, struct sfs_chunk *ch)
{
	struct sfs_chunk **pp =
		&c->buckets[sfs_cache_bucket(c, ch->set, ch->obj, ch->idx)];
	while (*pp && *pp != ch)
		pp = &(*pp)->hnext;
	if (*pp) /* an orphan is no longer there */
		*pp = ch->hnext;
	ch->hnext = NULL;
}

void sfs_cache_wake(struct sfs_cache *c)
{
	pthread_cond_broadcast(&c->cond);
	if (c->chq_waiters)
		for (size_t i = 0; i < SFS_CACHE_CHQ; i++)
			pthread_cond_broadcast(&c->chq[i]);
}

void sfs_cache_wake_chunk(struct sfs_cache *c, const struct sfs_chunk *ch)
{
	pthread_cond_broadcast(&c->cond);
	if (c->chq_waiters)
		pthread_cond_broadcast(sfs_cache_chq(c, ch));
}

void sfs_cache_settle(struct sfs_cache *c, struct sfs_chunk *ch)
{
	if (ch->dst) { /* its reader's: it looks at the state itself */
		sfs_cache_wake_chunk(c, ch);
		return;
	}
	if (ch->refs || (ch->state != CH_READY && ch->state != CH_FAILED))
		return;
	/* A retired set's bytes are of no use to anyone: the slot comes
	 * back at once (and the set may go). */
	if (ch->state == CH_READY && !c->sets[ch->set]->retired) {
		sfs_list_add_tail(sfs_cache_lru_of(c, ch), ch);
	} else {
		sfs_cache_unhash(c, ch);
		/* Listed: a replica may still read it while the keep
		 * lasts; its bytes stay until the slot is reused. */
		ch->freed_keep_ms = ch->listed && ch->state == CH_READY
					    ? c->sets[ch->set]->keep_until_ms
					    : 0;
		ch->state = CH_FREE;
		ch->orphan = 0;
		ch->listed = 0;
		sfs_list_add_tail(&c->free, ch);
		c->nfree++;
		sfs_cache_set_drop(c, ch->set);
		sfs_slab_want(c); /* too much free: some goes back */
	}
	sfs_cache_wake_chunk(c, ch);
}

void sfs_cache_test_delay(struct sfs_cache *c)
{
	if (c->test_verify_delay_ms)
		usleep((useconds_t)c->test_verify_delay_ms * 1000u);
}

struct cache_peer *sfs_peer_at(struct sfs_cache *c, uint32_t id)
{
	uint32_t pi = SFS_PEER_IDX(id);
	if (pi >= c->npeers)
		return NULL;
	struct cache_peer *p = c->peers[pi];
	return p->removed || p->gen != SFS_PEER_GEN(id) ? NULL : p;
}

struct cache_peer *sfs_peer_of(struct sfs_cache *c, const struct sfs_chunk *ch)
{
	if (ch->peer >= c->npeers)
		return NULL;
	struct cache_peer *p = c->peers[ch->peer];
	return p->vacant || p->gen != ch->peer_gen ? NULL : p;
}

void sfs_peer_reclaim(struct sfs_cache *c, uint32_t pi)
{
	struct cache_peer *p = c->peers[pi];
	if (!p->removed || p->vacant || p->pins || p->repairing || p->nholders)
		return;
	p->vacant = 1;
	p->gen++;
	c->free_peers[c->nfree_peers++] = pi; /* room made when added */
}

void sfs_peer_unpin(struct sfs_cache *c, uint32_t pi)
{
	c->peers[pi]->pins--;
	sfs_peer_reclaim(c, pi);
}

int sfs_holder_has(const struct cache_holder *h, uint32_t obj, uint64_t idx)
{
	if (h->removed || obj >= h->nobjs || !h->objs[obj].npieces)
		return 0;
	if (!h->partial)
		return 1;
	const uint64_t *bits = h->has[obj];
	return !h->expired && bits && (bits[idx / 64] >> (idx % 64) & 1);
}

int sfs_holder_coming(const struct cache_holder *h, uint32_t obj, uint64_t idx)
{
	if (h->removed || !h->partial || obj >= h->nobjs || h->expired)
		return 0;
	const uint64_t *bits = h->coming[obj];
	return bits && (bits[idx / 64] >> (idx % 64) & 1);
}

/* Hand @ch to a disk thread to look for it (c->lock held). */
void sfs_cache_load_later(struct sfs_cache *c, struct sfs_chunk *ch)
{
	ch->state = CH_DISK;
	sfs_list_add_tail(&c->dloads, ch);
	pthread_cond_signal(&c->disk_cond);
}

/*
 * Write a freshly pulled @ch to the disk tier behind the readers: it
 * stays pinned until written.  When the disk falls behind by a quarter
 * of the cache, chunks are not stored rather than pin the cache full.
 * Called with c->lock held.
 */
void sfs_cache_store_later(struct sfs_cache *c, struct sfs_chunk *ch)
{
	if (c->dq_stores >= c->nslots / 4 || c->stopping) {
		c->st.disk_skipped++;
		return;
	}
	ch->refs++;
	c->dq_stores++;
	sfs_list_add_tail(&c->dstores, ch);
	pthread_cond_signal(&c->disk_cond);
}

void sfs_cache_dst_release(struct sfs_cache *c, struct sfs_chunk *ch)
{
	struct sfs_cache_dst *d = ch->dst;
	sfs_cache_set_drop(c, ch->set);
	free(ch);
	if (--d->held == 0 && d->freed)
		free(d);
}

int sfs_slab_can_grow(const struct sfs_cache *c)
{
	return c->grower_started &&
	       (c->nbare || c->committing ||
		(!c->grow_failed && c->next_seg < c->nsegs));
}

uint64_t sfs_slab_ahead(const struct sfs_cache *c, uint64_t now)
{
	if (c->idle_ms && !c->wanting && !c->grow_target &&
	    now - c->used_ms >= c->idle_ms)
		return SFS_CACHE_IDLE_KEEP;
	return SFS_SLAB_AHEAD;
}

/* Should the grower commit more?  When a prefetch wants more ready, or
 * nothing is spare, or another step still fits under SFS_SLAB_AHEAD free
 * slots, and, in a cache that does not hold all it pulls (hold_all: a
 * re-seeder's; or while a prefetch warms), also under SFS_SLAB_SPARE of
 * free slots and chunks read already (c->lru), which a pull may reuse
 * (cache.c's take_slot): a model read once then commits about that
 * much, not its size, and the page cache holds what the readers read.
 * c->lock held. */
int sfs_slab_short(const struct sfs_cache *c)
{
	if (!c->grower_started ||
	    !(c->nbare || (!c->grow_failed && c->next_seg < c->nsegs)))
		return 0;
	uint64_t free_bytes = (uint64_t)c->nfree * c->chunk_size;
	/* Read chunks a pull may reuse; none while a prefetch warms (it
	 * holds what it pulls) or in a cache that holds all. */
	uint64_t lru = c->hold_all || c->wanting
			       ? 0
			       : (uint64_t)c->lru.n * c->chunk_size;
	uint64_t step = c->nbare ? SFS_SLAB_SEG : c->segs[c->next_seg].len;
	if (c->ready_bytes < c->grow_target || !(free_bytes + lru))
		return 1;
	return free_bytes + step <= sfs_slab_ahead(c, sfs_now_ms()) &&
	       free_bytes + lru + step <= SFS_SLAB_SPARE;
}

/* How many bytes of free slots to give back now (a step at most): once
 * more than a step is free past SFS_SLAB_AHEAD, those past it, down to
 * SFS_SLAB_AHEAD (c->shrinking meanwhile), and not below what a
 * prefetch wants ready.  A step is a segment, or a chunk when chunks
 * are larger.  c->lock held. */
uint64_t sfs_slab_long(struct sfs_cache *c)
{
	uint64_t step =
		SFS_MAX((uint64_t)SFS_SLAB_SEG, (uint64_t)c->chunk_size);
	uint64_t free_bytes = (uint64_t)c->nfree * c->chunk_size;
	uint64_t now = sfs_now_ms(), ahead = sfs_slab_ahead(c, now);
	if (free_bytes > ahead + step) {
		c->shrinking = 1;
	} else if (free_bytes <= ahead) {
		c->shrinking = 0;
		c->give_retry_ms = 0; /* the next time starts at 1 s */
	}
	/* Not before give_after_ms: every slot taken or freed asks, and
	 * each try scans the free list under the lock. */
	if (!c->give_back || !c->grower_started || !c->shrinking ||
	    c->ready_bytes <= c->grow_target || now < c->give_after_ms)
		return 0;
	/* Whole units only (give_back's: a huge page, or a chunk when
	 * chunks are larger), so that free stays at or above @ahead: below
	 * it the slab would grow again, and give back again (a 64 MiB
	 * chunk against 32 MiB kept idle). */
	uint64_t unit =
		SFS_MAX((uint64_t)SFS_SLAB_GROUP, (uint64_t)c->chunk_size);
	uint64_t n =
		SFS_MIN(free_bytes - ahead, c->ready_bytes - c->grow_target);
	n = SFS_MIN(n, step); /* step >= unit */
	return n / unit * unit;
}

void sfs_slab_want(struct sfs_cache *c)
{
	if (c->grower_started && (sfs_slab_short(c) || sfs_slab_long(c)))
		pthread_cond_signal(&c->grow_cond);
}
