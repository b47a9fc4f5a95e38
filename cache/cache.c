/* SPDX-License-Identifier: MIT */
/*
 * cache.c - the chunk cache's API: sources, get, put, prefetch, retire,
 * stats; and the disk tier's threads.  core.h tells how the files
 * of the cache share the work.
 */
#include "cache/core.h"
#include "cache/disk.h"

#include "common/log.h"
#include "common/util.h"
#include "transports/transport.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void holder_free(struct cache_holder *h);

/* The live set numbered @set, or NULL (c->lock held). */
static struct cache_set *set_of(struct sfs_cache *c, uint32_t set)
{
	return set < c->nsets ? c->sets[set] : NULL;
}

/* The oldest chunk of @l that no other replica may be reading now: not
 * one listed in an export (sfs_cache_export, sfs_cache_keep) while its
 * keep lasts, or at all while the slab can still grow (@grows: the
 * caller waits for the grower's slots instead).  c->lock held. */
static struct sfs_chunk *oldest(struct sfs_cache *c, struct list *l, int grows,
				uint64_t now)
{
	struct sfs_chunk *ch = l->head;
	while (ch && ch->listed &&
	       (grows || c->sets[ch->set]->keep_until_ms > now))
		ch = ch->next;
	return ch;
}

/*
 * A free slot, else the least recently used chunk that a reader has
 * read (c->lru), else, for a reader (@pinned), one nobody has read yet
 * (c->unread: a read-ahead); a read-ahead does not evict another.
 * Listed chunks as oldest() says; a full slab takes one whose keep
 * lasts if nothing else is left (the peer's checksum refuses what it
 * then reads).  NULL: none now.  Called with c->lock held.
 */
static struct sfs_chunk *take_slot(struct sfs_cache *c, int pinned)
{
	struct sfs_chunk *ch = c->free.head;
	c->used_ms = sfs_now_ms(); /* not idle: sfs_slab_ahead */
	if (ch) {
		sfs_list_del(&c->free, ch);
		c->nfree--;
		sfs_slab_want(c); /* the cache grows as it needs */
		return ch;
	}
	sfs_slab_want(c);
	uint64_t now = sfs_now_ms();
	int grows = sfs_slab_can_grow(c);
	struct list *l = &c->lru;
	if (!(ch = oldest(c, l, grows, now)) && pinned)
		ch = oldest(c, l = &c->unread, grows, now);
	if (!ch && !grows && pinned) {
		l = c->lru.head ? &c->lru : &c->unread;
		if ((ch = l->head))
			c->st.export_evictions++;
	}
	if (ch) {
		sfs_list_del(l, ch);
		sfs_cache_unhash(c, ch);
		sfs_cache_touch(c, ch);
		ch->state = CH_FREE;
		ch->listed = 0;
		sfs_cache_set_drop(c, ch->set);
	}
	return ch;
}

int sfs_cache_new(const struct sfs_cache_cfg *cfg, struct sfs_cache **out,
		  char *err, size_t errlen)
{
	struct sfs_cache *c;
	int rc;

	if (cfg->chunk_size < 4096 ||
	    (cfg->chunk_size & (cfg->chunk_size - 1))) {
		snprintf(err, errlen,
			 "chunk size %u is not a power of two "
			 ">= 4096",
			 cfg->chunk_size);
		return -EINVAL;
	}
	if (cfg->size / cfg->chunk_size < 16) {
		snprintf(err, errlen,
			 "cache size %" PRIu64 " holds fewer than 16 chunks of "
			 "%u bytes",
			 cfg->size, cfg->chunk_size);
		return -EINVAL;
	}
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	c->x = cfg->xport;
	c->chunk_size = cfg->chunk_size;
	c->chunk_shift = (unsigned int)__builtin_ctz(cfg->chunk_size);
	c->hold_all = cfg->hold_all;
	c->idle_ms = cfg->idle_ms;
	c->used_ms = sfs_now_ms();
	c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 10000;
	c->verify = !cfg->no_verify;
	c->sha256_all = cfg->sha256_all;
	c->test_verify_delay_ms = cfg->test_verify_delay_ms;
	c->reconnect = cfg->reconnect;
	c->reconnect_arg = cfg->reconnect_arg;
	c->nslots = cfg->size / cfg->chunk_size;
	c->slab_len = c->nslots * (size_t)cfg->chunk_size;
	pthread_mutex_init(&c->lock, NULL);
	if ((rc = sfs_cond_init(&c->cond)) ||
	    (rc = sfs_cond_init(&c->vq_cond)) ||
	    (rc = sfs_cond_init(&c->disk_cond)) ||
	    (rc = sfs_cond_init(&c->work_cond)) ||
	    (rc = sfs_cond_init(&c->grow_cond)))
		goto err_free;
	for (size_t i = 0; i < SFS_CACHE_CHQ; i++)
		if ((rc = sfs_cond_init(&c->chq[i])))
			goto err_free;
	c->nbuckets = 1;
	while (c->nbuckets < 2 * c->nslots)
		c->nbuckets <<= 1;
	c->slots = calloc(c->nslots, sizeof(c->slots[0]));
	c->buckets = calloc(c->nbuckets, sizeof(c->buckets[0]));
	rc = -ENOMEM;
	if (!c->slots || !c->buckets)
		goto err_free;
	if ((rc = sfs_slab_new(c, err, errlen)))
		goto err_free;
	c->st.size = c->slab_len;
	c->st.chunk_size = c->chunk_size;
	c->disk = cfg->disk;
	for (size_t i = 0; c->disk && i < DISK_THREADS; i++) {
		if ((rc = -pthread_create(&c->threads[i], NULL, sfs_dq_thread,
					  c))) {
			snprintf(err, errlen, "cache: disk thread: %s",
				 strerror(-rc));
			goto err_free;
		}
		c->nthreads++;
	}
	if ((rc = -pthread_create(&c->worker, NULL, sfs_peer_worker, c))) {
		snprintf(err, errlen, "cache: worker thread: %s",
			 strerror(-rc));
		goto err_free;
	}
	c->worker_started = 1;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nv = cfg->verifiers ? cfg->verifiers
		    : cpus > 0	   ? (size_t)cpus
				   : 1;
	nv = SFS_MIN(nv, (size_t)SFS_CACHE_VERIFIERS_MAX);
	for (size_t i = 0; c->verify && i < nv; i++) {
		if ((rc = -pthread_create(&c->verifiers[i], NULL,
					  sfs_peer_verifier, c))) {
			snprintf(err, errlen, "cache: verifier thread: %s",
				 strerror(-rc));
			goto err_free;
		}
		c->nverifiers++;
	}
	*out = c;
	return 0;

err_free:
	sfs_cache_free(c); /* no chunk is in use yet */
	return rc;
}

int sfs_cache_grow(struct sfs_cache *c)
{
	int rc = sfs_slab_start(c);
	if (rc)
		SFS_LOG(SFS_WARN, "cache",
			"cannot start the background thread (%s): the cache "
			"stays at its first segment",
			strerror(-rc));
	return rc;
}

void sfs_cache_stop(struct sfs_cache *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stopping = 1;
	sfs_peer_fail_queued(c, -ESHUTDOWN, SFS_NONE);
	sfs_dq_drop(c);
	sfs_cache_wake(c);
	pthread_cond_broadcast(&c->disk_cond);
	pthread_cond_broadcast(&c->work_cond);
	pthread_cond_broadcast(&c->grow_cond);
	pthread_cond_broadcast(&c->vq_cond);
	pthread_mutex_unlock(&c->lock);
	/* After these joins nothing of the cache posts a pull, and no pull
	 * waits for a verifier (they finish what was queued; later ones
	 * are checked on the transport's thread). */
	for (size_t i = 0; i < c->nthreads; i++)
		pthread_join(c->threads[i], NULL);
	c->nthreads = 0;
	pthread_mutex_lock(&c->lock);
	size_t nv = c->nverifiers;
	c->nverifiers = 0; /* (read by completions, under the lock) */
	pthread_mutex_unlock(&c->lock);
	for (size_t i = 0; i < nv; i++)
		pthread_join(c->verifiers[i], NULL);
	if (c->worker_started) {
		pthread_join(c->worker, NULL);
		c->worker_started = 0;
	}
	sfs_slab_join(c);
	/* What the disk threads queued while stopping. */
	pthread_mutex_lock(&c->lock);
	sfs_dq_drop(c);
	pthread_mutex_unlock(&c->lock);
}

void sfs_cache_end_waits(struct sfs_cache *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->waits_ended = 1;
	sfs_cache_wake(c);
	pthread_mutex_unlock(&c->lock);
}

void sfs_cache_free(struct sfs_cache *c)
{
	sfs_cache_free_quiesced(c, 0);
}

void sfs_cache_free_quiesced(struct sfs_cache *c, size_t abandoned)
{
	if (!c)
		return;
	sfs_cache_stop(c);
	/* Pulls in flight write into the slab: let them finish first
	 * (quiesced: they were cancelled, but for @abandoned). */
	pthread_mutex_lock(&c->lock);
	struct timespec until = sfs_abstime(abandoned ? 0 : c->timeout_ms);
	while (c->loading &&
	       pthread_cond_timedwait(&c->cond, &c->lock, &until) == 0)
		;
	size_t left = c->loading;
	pthread_mutex_unlock(&c->lock);
	if (left) {
		/* The transport still owns that memory: keep it rather than
		 * free what may be written. */
		SFS_LOG(SFS_WARN, "cache",
			"%zu pulls still in flight at shutdown: their memory "
			"is kept",
			left);
		sfs_keep_forever(c);
		return;
	}
	sfs_slab_free(c);
	for (size_t i = 0; i < c->nsets; i++) {
		struct cache_set *s = c->sets[i];
		/* Released: what it borrowed is its owner's to free. */
		if (s && s->released && s->release)
			s->release(s->release_arg);
		sfs_cache_set_struct_free(s);
	}
	free(c->sets);
	free(c->free_sets);
	for (size_t i = 0; i < c->nholders; i++)
		holder_free(c->holders[i]);
	free(c->holders);
	free(c->pick_facts);
	free(c->free_holders);
	for (size_t i = 0; i < c->npeers; i++)
		free(c->peers[i]);
	free(c->peers);
	free(c->free_peers);
	free(c->slots);
	free(c->buckets);
	pthread_cond_destroy(&c->grow_cond);
	pthread_cond_destroy(&c->work_cond);
	pthread_cond_destroy(&c->disk_cond);
	pthread_cond_destroy(&c->cond);
	pthread_cond_destroy(&c->vq_cond);
	for (size_t i = 0; i < SFS_CACHE_CHQ; i++)
		pthread_cond_destroy(&c->chq[i]);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int sfs_cache_add_set(struct sfs_cache *c, const char *label,
		      const struct sfs_cache_obj *objs, size_t n, uint32_t *set)
{
	struct cache_set *s = calloc(1, sizeof(*s));
	int rc = -ENOMEM;

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (objs[i].xxh3 && (objs[i].csum_shift > c->chunk_shift ||
				     objs[i].csum_shift < 12)) {
			free(s);
			return -EINVAL;
		}
	s->nobjs = n;
	s->label = strdup(label);
	s->objs = calloc(n ? n : 1, sizeof(*objs));
	s->base = calloc(n ? n : 1, sizeof(*s->base));
	if (!s->label || !s->objs || !s->base)
		goto err;
	memcpy(s->objs, objs, n * sizeof(*objs));
	for (size_t i = 0; i < n; i++) {
		uint64_t k =
			(objs[i].len + c->chunk_size - 1) >> c->chunk_shift;
		if (i + 1 < n)
			s->base[i + 1] = s->base[i] + k;
		else
			s->nchunks = s->base[i] + k;
	}
	pthread_mutex_lock(&c->lock);
	s->version = s->born = ++c->clock;
	if (c->nfree_sets) {
		*set = c->free_sets[--c->nfree_sets];
		c->sets[*set] = s;
		c->live_sets++;
		rc = 0;
	} else {
		/* Room on the free list for every number, made now: freeing a
		 * set never fails. */
		rc = sfs_grow((void **)&c->sets, &c->cap_sets, c->nsets + 1,
			      sizeof(c->sets[0]));
		if (!rc)
			rc = sfs_grow((void **)&c->free_sets, &c->cap_free_sets,
				      c->nsets + 1, sizeof(c->free_sets[0]));
		if (!rc) {
			*set = (uint32_t)c->nsets;
			c->sets[c->nsets++] = s;
			c->live_sets++;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (!rc)
		return 0;
err:
	sfs_cache_set_struct_free(s);
	return rc;
}

static int lane_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct sfs_cache_lane *)a)->key;
	uint64_t y = ((const struct sfs_cache_lane *)b)->key;
	return x < y ? -1 : x > y;
}

/* Set @set's lanes to @copy (its @n, [new]: taken, or freed), in the
 * order every member agrees on; @fleet: the fleet's (sfs_swarm). */
static int install_lanes(struct sfs_cache *c, uint32_t set,
			 struct sfs_cache_lane *copy, size_t n, int fleet)
{
	pthread_mutex_lock(&c->lock);
	int rc = set_of(c, set) ? 0 : -EINVAL;
	for (size_t i = 0; !rc && i < n; i++)
		if (copy[i].holder != SFS_NONE &&
		    copy[i].holder != SFS_CACHE_LANE_UNKNOWN &&
		    (copy[i].holder >= c->nholders ||
		     !c->holders[copy[i].holder] ||
		     c->holders[copy[i].holder]->set != set))
			rc = -EINVAL;
	if (!rc) {
		struct cache_set *s = c->sets[set];
		struct sfs_cache_lane *old = s->lanes;
		s->lanes = copy;
		s->nlanes = n;
		s->fleet = fleet;
		s->lane_me = SIZE_MAX;
		for (size_t i = 0; i < s->nholders; i++)
			c->holders[s->holders[i]]->lane = SIZE_MAX;
		for (size_t i = 0; i < n; i++) {
			uint32_t hi = copy[i].holder;
			if (hi == SFS_NONE)
				s->lane_me = i;
			else if (hi != SFS_CACHE_LANE_UNKNOWN)
				c->holders[hi]->lane = i;
		}
		copy = old;
		/* Chunks that waited for a lane may be anyone's now. */
		sfs_peer_wake_worker(c);
		sfs_cache_wake(c);
	}
	pthread_mutex_unlock(&c->lock);
	free(copy);
	return rc;
}

int sfs_cache_set_lanes(struct sfs_cache *c, uint32_t set,
			const struct sfs_cache_lane *lanes, size_t n)
{
	struct sfs_cache_lane *copy = NULL;
	if (n && !(copy = malloc(n * sizeof(*copy))))
		return -ENOMEM;
	if (n) {
		memcpy(copy, lanes, n * sizeof(*copy));
		/* In key order: the same order in every member. */
		qsort(copy, n, sizeof(*copy), lane_cmp);
	}
	return install_lanes(c, set, copy, n, 0);
}

int sfs_cache_set_fleet(struct sfs_cache *c, uint32_t set, size_t n, size_t me,
			const uint32_t *members, size_t nmembers)
{
	if (n < 2 || n > SFS_CACHE_FLEET_MAX || me >= n ||
	    nmembers > SFS_CACHE_FLEET_MEMBERS)
		return -EINVAL;
	struct sfs_cache_lane *l = malloc(n * sizeof(*l));
	if (!l)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		l[i] = (struct sfs_cache_lane){i, SFS_CACHE_LANE_UNKNOWN};
	l[me].holder = SFS_NONE;
	for (size_t k = 0; k < nmembers && ((size_t)1 << k) < n; k++) {
		size_t at = (me + n - ((size_t)1 << k)) % n;
		if (members[k] == SFS_NONE) {
			free(l);
			return -EINVAL;
		}
		l[at].holder = members[k];
	}
	return install_lanes(c, set, l, n, 1);
}

int sfs_cache_persist_set(struct sfs_cache *c, uint32_t set, const char *key,
			  const char *about)
{
	struct sfs_disk_src *d;

	if (!c->disk)
		return 0;
	pthread_mutex_lock(&c->lock);
	size_t n = set_of(c, set) ? c->sets[set]->nobjs : 0;
	int known = set_of(c, set) && !c->sets[set]->released;
	pthread_mutex_unlock(&c->lock);
	if (!known)
		return -EINVAL;
	int rc = sfs_disk_attach(c->disk, key, about, n, &d);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	struct cache_set *s = set_of(c, set);
	if (s && !s->disk && !s->released)
		s->disk = d;
	else
		rc = -EINVAL; /* released meanwhile: the caller's bug */
	pthread_mutex_unlock(&c->lock);
	if (rc)
		sfs_disk_release(d);
	return rc;
}

int sfs_cache_add_peer(struct sfs_cache *c, uint64_t id, const char *label,
		       uint32_t *peer)
{
	struct cache_peer *p = calloc(1, sizeof(*p)), *old = NULL;
	uint32_t pi = 0;
	int rc = 0;

	if (!p)
		return -ENOMEM;
	p->id = id;
	snprintf(p->label, sizeof(p->label), "%s", label);
	p->state = SFS_PEER_UP;
	p->since_ms = sfs_now_ms();
	p->window = 4;
	pthread_mutex_lock(&c->lock);
	if (c->nfree_peers) {
		/* A vacant index: nothing names its old peer any more. */
		pi = c->free_peers[--c->nfree_peers];
		old = c->peers[pi];
		p->gen = old->gen;
		c->peers[pi] = p;
	} else if (c->npeers >= SFS_PEERS_MAX) {
		rc = -ENOSPC;
	} else if (!(rc = sfs_grow((void **)&c->peers, &c->cap_peers,
				   c->npeers + 1, sizeof(c->peers[0]))) &&
		   /* room for it on the free list: reclaiming never
		    * fails */
		   !(rc = sfs_grow((void **)&c->free_peers, &c->cap_free_peers,
				   c->npeers + 1, sizeof(c->free_peers[0])))) {
		pi = (uint32_t)c->npeers;
		c->peers[c->npeers++] = p;
	}
	if (!rc)
		*peer = SFS_PEER_ID(pi, p->gen);
	pthread_mutex_unlock(&c->lock);
	free(old);
	if (rc)
		free(p);
	return rc;
}

/* Free what @h says of its objects: its pieces' list and bitmaps. */
static void holder_objs_free(struct cache_holder *h)
{
	for (size_t i = 0; h->has && i < h->nobjs; i++)
		free(h->has[i]);
	for (size_t i = 0; h->coming && i < h->nobjs; i++)
		free(h->coming[i]);
	free(h->has);
	free(h->coming);
	free(h->objs);
	h->has = h->coming = NULL;
	h->objs = NULL;
	h->nobjs = 0;
}

static void holder_free(struct cache_holder *h)
{
	if (!h)
		return;
	holder_objs_free(h);
	free(h);
}

/* Take @hi out of its set and peer (c->lock held).  What it said of its
 * objects goes now (a removed holder serves nothing: sfs_holder_has);
 * the struct stays until its owner removes it (lanes may name it). */
static void holder_drop(struct sfs_cache *c, uint32_t hi)
{
	struct cache_holder *h = c->holders[hi];
	if (h->removed)
		return;
	h->removed = 1;
	struct cache_set *s = c->sets[h->set];
	for (size_t i = 0; i < s->nholders; i++)
		if (s->holders[i] == hi) {
			s->holders[i] = s->holders[--s->nholders];
			break;
		}
	c->peers[h->peer]->nholders--;
	/* Its pulls under way start again on the others: failovers. */
	c->st.failovers += sfs_peer_orphan(c, c->peers[h->peer], hi);
	holder_objs_free(h);
	sfs_cache_wake(c);
	sfs_peer_wake_worker(c);
}

/* Its owner is done with holder @hi (dropped): freed, and nothing of
 * the cache names its number any more, which a later holder may get
 * (c->lock held).  Its set's lanes that named it wait for a member not
 * connected yet (SFS_CACHE_LANE_UNKNOWN) until the lanes are set anew;
 * a chunk that avoided it (its bytes did not match) avoids nobody. */
static void holder_release(struct sfs_cache *c, uint32_t hi)
{
	struct cache_holder *h = c->holders[hi];
	uint32_t set = h->set;
	struct cache_set *s = c->sets[set]; /* stays while @h does */
	for (size_t i = 0; i < s->nlanes; i++)
		if (s->lanes[i].holder == hi)
			s->lanes[i].holder = SFS_CACHE_LANE_UNKNOWN;
	for (size_t i = 0; i < c->nslots; i++)
		if (c->slots[i].avoid == hi)
			c->slots[i].avoid = SFS_NONE;
	c->holders[hi] = NULL;
	c->free_holders[c->nfree_holders++] = hi; /* room made when added */
	c->live_holders--;
	holder_free(h);
	sfs_cache_set_drop(c, set);
}

void sfs_cache_remove_peer(struct sfs_cache *c, uint32_t peer)
{
	uint64_t id = 0;
	int remove = 0;

	pthread_mutex_lock(&c->lock);
	struct cache_peer *p = sfs_peer_at(c, peer);
	if (p) {
		uint32_t pi = SFS_PEER_IDX(peer);
		for (size_t i = 0; i < c->nholders; i++)
			if (c->holders[i] && c->holders[i]->peer == pi)
				holder_drop(c, (uint32_t)i);
		c->st.failovers += sfs_peer_orphan(c, p, SFS_NONE);
		p->removed = 1;
		p->repair = 0;
		id = p->id;
		remove = 1;
		/* Now, or once its last pull's callback came. */
		sfs_peer_reclaim(c, pi);
	}
	pthread_mutex_unlock(&c->lock);
	/* Nobody reads through that connection any more. */
	if (remove)
		sfs_xport_peer_remove(c->x, id);
}

/* Pieces must tile [0, len) in order; a partial holder's may leave
 * gaps (chunks it does not hold). */
static int pieces_ok(const struct sfs_cache_hobj *o, uint64_t len, int partial)
{
	uint64_t at = 0;
	for (size_t k = 0; k < o->npieces; k++) {
		const struct sfs_cache_piece *p = &o->pieces[k];
		if ((partial ? p->off < at : p->off != at || p->coming) ||
		    p->len == 0 || p->off > len || p->len > len - p->off)
			return 0;
		at = p->off + p->len;
	}
	return partial || o->npieces == 0 || at == len;
}

/* Do pieces @k.. of @o cover [a, b) without a gap, counting those
 * coming only when @coming? */
static int covers(const struct sfs_cache_hobj *o, size_t k, uint64_t a,
		  uint64_t b, int coming)
{
	uint64_t at = a;
	for (size_t j = k; j < o->npieces && at < b; j++) {
		const struct sfs_cache_piece *pc = &o->pieces[j];
		if (pc->off > at || (pc->coming && !coming))
			break;
		at = SFS_MAX(at, pc->off + pc->len);
	}
	return at >= b;
}

/* A partial holder holds the chunks its pieces that are not coming
 * cover whole, and has coming those the others complete (c->lock
 * held). */
static void has_from_pieces(struct sfs_cache *c, struct cache_holder *h)
{
	uint64_t held = 0, coming = 0;
	for (size_t i = 0; i < h->nobjs; i++) {
		const struct sfs_cache_hobj *o = &h->objs[i];
		uint64_t len = c->sets[h->set]->objs[i].len;
		uint64_t n = (len + c->chunk_size - 1) >> c->chunk_shift;
		free(h->has[i]);
		free(h->coming[i]);
		h->has[i] = h->coming[i] = NULL;
		if (!o->npieces || !n)
			continue;
		size_t words = (size_t)(n + 63) / 64;
		h->has[i] = calloc(words, 8);
		h->coming[i] = calloc(words, 8);
		if (!h->has[i] || !h->coming[i])
			continue; /* none held: best effort */
		size_t k = 0;
		for (uint64_t idx = 0; idx < n; idx++) {
			uint64_t a = idx << c->chunk_shift;
			uint64_t b = SFS_MIN(a + c->chunk_size, len);
			while (k < o->npieces &&
			       o->pieces[k].off + o->pieces[k].len <= a)
				k++;
			uint64_t bit = 1ull << (idx % 64);
			if (covers(o, k, a, b, 0)) {
				h->has[i][idx / 64] |= bit;
				held++;
			} else if (covers(o, k, a, b, 1)) {
				h->coming[i][idx / 64] |= bit;
				coming++;
			}
		}
	}
	if (held > h->nheld || held + coming > h->nheld + h->ncoming)
		h->grew_ms = sfs_now_ms();
	h->nheld = held;
	h->ncoming = coming;
}

int sfs_cache_add_holder(struct sfs_cache *c, uint32_t set, uint32_t peer,
			 const struct sfs_cache_hobj *objs, size_t n,
			 int partial, uint32_t *holder)
{
	struct cache_holder *h = calloc(1, sizeof(*h));
	int rc = -ENOMEM;

	if (!h)
		return -ENOMEM;
	h->set = set;
	h->peer = SFS_PEER_IDX(peer); /* checked below */
	h->lane = SIZE_MAX;	      /* until sfs_cache_set_lanes names it */
	h->nobjs = n;
	h->partial = partial;
	if (!(h->objs = calloc(n ? n : 1, sizeof(*objs))) ||
	    (partial &&
	     (!(h->has = calloc(n ? n : 1, sizeof(*h->has))) ||
	      !(h->coming = calloc(n ? n : 1, sizeof(*h->coming)))))) {
		holder_free(h);
		return -ENOMEM;
	}
	memcpy(h->objs, objs, n * sizeof(*objs));
	pthread_mutex_lock(&c->lock);
	struct cache_set *s = set_of(c, set);
	rc = s && sfs_peer_at(c, peer) && n == s->nobjs && !s->retired
		     ? 0
		     : -EINVAL;
	for (size_t i = 0; !rc && i < n; i++)
		if (!pieces_ok(&objs[i], s->objs[i].len, partial))
			rc = -EINVAL;
	/* A free number, else a new one (with room on the free list for
	 * it: releasing a holder never fails). */
	if (!rc && !c->nfree_holders &&
	    !(rc = sfs_grow((void **)&c->holders, &c->cap_holders,
			    c->nholders + 1, sizeof(c->holders[0]))))
		rc = sfs_grow((void **)&c->free_holders, &c->cap_free_holders,
			      c->nholders + 1, sizeof(c->free_holders[0]));
	if (!rc)
		rc = sfs_grow((void **)&s->holders, &s->cap_holders,
			      s->nholders + 1, sizeof(s->holders[0]));
	if (!rc) {
		*holder = c->nfree_holders ? c->free_holders[--c->nfree_holders]
					   : (uint32_t)c->nholders++;
		c->holders[*holder] = h;
		c->live_holders++;
		s->refs++; /* the set stays while the holder does */
		s->holders[s->nholders++] = *holder;
		c->peers[h->peer]->nholders++;
		if (partial)
			has_from_pieces(c, h);
		sfs_cache_wake(c);
		sfs_peer_wake_worker(c);
	}
	pthread_mutex_unlock(&c->lock);
	if (rc)
		holder_free(h);
	return rc;
}

int sfs_cache_holder_update(struct sfs_cache *c, uint32_t holder,
			    const struct sfs_cache_hobj *objs, size_t n)
{
	struct sfs_cache_hobj *copy = calloc(n ? n : 1, sizeof(*copy));
	int rc = 0;
	if (!copy)
		return -ENOMEM;
	memcpy(copy, objs, n * sizeof(*objs));
	pthread_mutex_lock(&c->lock);
	struct cache_holder *h =
		holder < c->nholders ? c->holders[holder] : NULL;
	if (!h || h->removed || !h->partial || n != h->nobjs)
		rc = -EINVAL;
	for (size_t i = 0; !rc && i < n; i++)
		if (!pieces_ok(&objs[i], c->sets[h->set]->objs[i].len, 1))
			rc = -EINVAL;
	if (!rc) {
		/* Chunks posted with the old pieces still read the
		 * addresses they were given; new ones use these. */
		struct sfs_cache_hobj *old = h->objs;
		h->objs = copy;
		copy = old;
		has_from_pieces(c, h);
		sfs_peer_wake_worker(c);
	}
	pthread_mutex_unlock(&c->lock);
	free(copy);
	return rc;
}

int sfs_cache_holder_expire(struct sfs_cache *c, uint32_t holder,
			    uint64_t at_ms)
{
	int rc = 0;
	pthread_mutex_lock(&c->lock);
	struct cache_holder *h =
		holder < c->nholders ? c->holders[holder] : NULL;
	if (!h || h->removed || !h->partial) {
		rc = -EINVAL;
	} else {
		int was = h->expired;
		uint64_t old = h->expires_ms;
		h->expires_ms = at_ms;
		h->expired = at_ms && sfs_now_ms() >= at_ms;
		if (was && !h->expired)
			SFS_LOG(SFS_INFO, "cache",
				"%s: holdings of %s renewed: read again",
				c->peers[h->peer]->label,
				c->sets[h->set]->label);
		/* Held again, or no longer: the queues look again; the
		 * worker, when the end came nearer (it looks then). */
		if (was != h->expired)
			sfs_cache_wake(c);
		if (was != h->expired || !old || (at_ms && at_ms < old))
			sfs_peer_wake_worker(c);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Stamps for every chunk of @s, at its version now (c->lock held): from
 * now on, what changed since a version at least this one is known.  A
 * set whose stamps cannot be had answers every export in full. */
static void stamps_start(struct sfs_cache *c, struct cache_set *s)
{
	if (s->stamps)
		return;
	s->stamps = calloc(s->nobjs ? s->nobjs : 1, sizeof(*s->stamps));
	for (size_t i = 0; s->stamps && i < s->nobjs; i++) {
		uint64_t n =
			(s->objs[i].len + c->chunk_size - 1) >> c->chunk_shift;
		if (!(s->stamps[i] = malloc((n ? n : 1) * sizeof(uint64_t)))) {
			sfs_cache_stamps_free(s);
			return;
		}
		for (uint64_t k = 0; k < n; k++)
			s->stamps[i][k] = s->version;
	}
	s->stamped_at = s->version;
}

static int export(struct sfs_cache *c, uint32_t set, uint32_t obj,
		  const struct sfs_cache_xver *since, uint32_t *slots,
		  uint64_t n, uint64_t keep_ms, struct sfs_cache_xver *now)
{
	pthread_mutex_lock(&c->lock);
	if (!set_of(c, set) || obj >= c->sets[set]->nobjs ||
	    c->sets[set]->retired) {
		pthread_mutex_unlock(&c->lock);
		return -ENOENT;
	}
	struct cache_set *s = c->sets[set];
	stamps_start(c, s);
	if (since &&
	    (!s->stamps || since->born != s->born ||
	     since->version < s->stamped_at || since->version > s->version)) {
		pthread_mutex_unlock(&c->lock);
		return -ERANGE;
	}
	uint64_t len = s->objs[obj].len;
	uint64_t nchunks = (len + c->chunk_size - 1) >> c->chunk_shift;
	const uint64_t *stamp = s->stamps ? s->stamps[obj] : NULL;
	int held = 0;
	s->keep_until_ms = SFS_MAX(s->keep_until_ms, sfs_now_ms() + keep_ms);
	for (uint64_t i = 0; i < n; i++) {
		struct sfs_chunk *ch =
			i < nchunks ? sfs_cache_lookup(c, set, obj, i) : NULL;
		int ready = ch && ch->state == CH_READY;
		if (ready) { /* listed: in the asker's list from now */
			ch->listed = 1;
			held++;
		}
		if (since && (i >= nchunks || stamp[i] <= since->version))
			slots[i] = SFS_CACHE_SLOT_SAME;
		else if (ready)
			slots[i] = (uint32_t)(ch - c->slots);
		else
			slots[i] = ch && ch->state == CH_LOADING
					   ? SFS_CACHE_SLOT_COMING
					   : UINT32_MAX;
	}
	now->version = s->version;
	now->born = s->born;
	pthread_mutex_unlock(&c->lock);
	return held;
}

int sfs_cache_export(struct sfs_cache *c, uint32_t set, uint32_t obj,
		     uint32_t *slots, uint64_t n, uint64_t keep_ms,
		     uint64_t *version)
{
	struct sfs_cache_xver now;
	int rc = export(c, set, obj, NULL, slots, n, keep_ms, &now);
	if (rc >= 0)
		*version = now.version;
	return rc;
}

int sfs_cache_export_since(struct sfs_cache *c, uint32_t set, uint32_t obj,
			   const struct sfs_cache_xver *since, uint32_t *slots,
			   uint64_t n, uint64_t keep_ms,
			   struct sfs_cache_xver *now)
{
	return export(c, set, obj, since, slots, n, keep_ms, now);
}

int sfs_cache_keep(struct sfs_cache *c, uint32_t set, uint64_t version,
		   uint64_t keep_ms)
{
	int rc = 0;
	pthread_mutex_lock(&c->lock);
	if (set >= c->nsets || c->sets[set]->retired) {
		rc = -ENOENT;
	} else if (c->sets[set]->version != version) {
		rc = -ESTALE;
	} else {
		/* The same version: what is READY now is what that list
		 * named (every change of it moves the version), and each
		 * of those chunks is marked listed. */
		struct cache_set *s = c->sets[set];
		s->keep_until_ms =
			SFS_MAX(s->keep_until_ms, sfs_now_ms() + keep_ms);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

uint64_t sfs_cache_set_version(struct sfs_cache *c, uint32_t set)
{
	pthread_mutex_lock(&c->lock);
	uint64_t v = set_of(c, set) ? c->sets[set]->version : 0;
	pthread_mutex_unlock(&c->lock);
	return v;
}

void sfs_cache_peer_last_resort(struct sfs_cache *c, uint32_t peer, int on)
{
	pthread_mutex_lock(&c->lock);
	struct cache_peer *p = sfs_peer_at(c, peer);
	if (p) {
		p->last_resort = on;
		sfs_peer_wake_worker(c); /* who may serve what moved */
	}
	pthread_mutex_unlock(&c->lock);
}

void sfs_cache_peer_trusted(struct sfs_cache *c, uint32_t peer, int on)
{
	pthread_mutex_lock(&c->lock);
	struct cache_peer *p = sfs_peer_at(c, peer);
	if (p) {
		p->trusted = on;
		sfs_peer_wake_worker(c); /* who may serve what moved */
	}
	pthread_mutex_unlock(&c->lock);
}

void sfs_cache_remove_holder(struct sfs_cache *c, uint32_t holder)
{
	pthread_mutex_lock(&c->lock);
	if (holder < c->nholders && c->holders[holder]) {
		holder_drop(c, holder);
		holder_release(c, holder);
	}
	pthread_mutex_unlock(&c->lock);
}

/* A reader pins @ch (found in the hash). */
static void pin(struct sfs_cache *c, struct sfs_chunk *ch)
{
	if (ch->refs == 0 && ch->state == CH_READY)
		sfs_list_del(sfs_cache_lru_of(c, ch), ch);
	ch->refs++;
	ch->consumed = 1;
	sfs_peer_promote(c, ch);
}

/*
 * Find or start the chunk @idx of (set, obj).  With @pinned the caller
 * gets a reference (and may wait for a slot).  Called with c->lock
 * held.  Returns the chunk or NULL (*rc set).
 */
struct sfs_chunk *sfs_cache_find_or_start(struct sfs_cache *c, uint32_t set,
					  uint32_t obj, uint64_t idx,
					  int pinned, int demand, int *rc)
{
	struct cache_set *s = c->sets[set];
	const struct sfs_cache_obj *o = &s->objs[obj];
	uint64_t deadline = sfs_now_ms() + c->timeout_ms;
	struct sfs_chunk *ch = sfs_cache_lookup(c, set, obj, idx);

	if (ch) {
		if (pinned)
			pin(c, ch);
		return ch;
	}
	/* Not on disk and no holder can serve it now: fail at once. */
	if (!(s->disk && o->xxh3) && (*rc = sfs_peer_set_usable(c, set))) {
		c->st.unavailable += pinned;
		return NULL;
	}
	/* Waiting for a slot drops the lock: look the chunk up again
	 * after every wait, someone may have started it meanwhile. */
	while (!(ch = sfs_cache_lookup(c, set, obj, idx)) &&
	       !(ch = take_slot(c, pinned))) {
		uint64_t now = sfs_now_ms();
		if (now >= deadline || !pinned || c->stopping ||
		    c->waits_ended || s->retired) {
			if (pinned && !c->stopping && !c->waits_ended &&
			    !s->retired) {
				SFS_LOG(SFS_WARN, "cache",
					"no free chunk within %u ms: every "
					"chunk is pinned or being pulled",
					c->timeout_ms);
				c->st.no_slot++;
			}
			*rc = c->stopping || c->waits_ended ? -ESHUTDOWN
			      : s->retired		    ? -ESTALE
							    : -ETIMEDOUT;
			return NULL;
		}
		struct timespec ts = sfs_abstime(deadline - now);
		pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	}
	if (ch->state != CH_FREE) { /* found in the hash */
		if (pinned)
			pin(c, ch);
		return ch;
	}
	uint64_t off = idx << c->chunk_shift;
	ch->set = set;
	sfs_cache_set_hold(c, set);
	ch->obj = obj;
	ch->idx = idx;
	ch->len = (uint32_t)SFS_MIN((uint64_t)c->chunk_size, o->len - off);
	ch->mismatches = 0;
	ch->xfails = 0;
	ch->seed_next = 0;
	ch->strong = ch->member = 0;
	ch->avoid = SFS_NONE;
	ch->listed = 0;
	ch->consumed = pinned;
	ch->err = 0;
	ch->refs = pinned ? 1 : 0;
	ch->demand = demand;
	size_t b = sfs_cache_bucket(c, set, obj, idx);
	ch->hnext = c->buckets[b];
	c->buckets[b] = ch;
	if (s->disk && o->xxh3) /* it may be on disk already */
		sfs_cache_load_later(c, ch);
	else
		sfs_peer_enqueue(c, ch, demand);
	return ch;
}

int sfs_cache_check_range(struct sfs_cache *c, uint32_t set, uint32_t obj,
			  uint64_t off)
{
	if (!set_of(c, set) || obj >= c->sets[set]->nobjs ||
	    off >= c->sets[set]->objs[obj].len)
		return -EINVAL;
	if (c->stopping)
		return -ESHUTDOWN;
	return c->sets[set]->retired ? -ESTALE : 0;
}

void sfs_cache_retire_set(struct sfs_cache *c, uint32_t set)
{
	struct sfs_disk_src *d = NULL;

	pthread_mutex_lock(&c->lock);
	if (set_of(c, set) && !c->sets[set]->retired) {
		struct cache_set *s = c->sets[set];
		s->retired = 1;
		s->version = ++c->clock;
		d = s->disk;
		/* Its unpinned chunks are of no use to anyone now. */
		struct list *lists[] = {&c->lru, &c->unread};
		for (size_t k = 0; k < SFS_ARRAY_SIZE(lists); k++) {
			struct sfs_chunk *ch, *next;
			for (ch = lists[k]->head; ch; ch = next) {
				next = ch->next;
				if (ch->set == set) {
					sfs_list_del(lists[k], ch);
					ch->state = CH_FAILED;
					sfs_cache_settle(c, ch);
				}
			}
		}
		sfs_peer_fail_queued(c, -ESTALE, set);
		while (s->nholders)
			holder_drop(c, s->holders[0]);
		sfs_cache_wake(c);
	}
	pthread_mutex_unlock(&c->lock);
	/* Nobody will read these bytes again: not from disk either. */
	sfs_disk_drop(d);
}

void sfs_cache_release_set(struct sfs_cache *c, uint32_t set,
			   void (*release)(void *arg), void *arg)
{
	sfs_cache_retire_set(c, set);
	pthread_mutex_lock(&c->lock);
	struct cache_set *s = set_of(c, set);
	int now = !s || s->released; /* no such set: nothing to wait for */
	if (!now) {
		s->released = 1;
		s->release = release;
		s->release_arg = arg;
		if (!s->refs)
			sfs_cache_set_free(c, set);
	} else if (release) {
		release(arg);
	}
	pthread_mutex_unlock(&c->lock);
}

int sfs_cache_prefetch(struct sfs_cache *c, uint32_t set, uint32_t obj,
		       uint64_t off, uint64_t len, int demand)
{
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	if (sfs_cache_check_range(c, set, obj, off) || len == 0) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	uint64_t olen = c->sets[set]->objs[obj].len;
	uint64_t last = (SFS_MIN(off + len, olen) - 1) >> c->chunk_shift;
	for (uint64_t i = off >> c->chunk_shift; i <= last; i++) {
		struct sfs_chunk *ch =
			sfs_cache_find_or_start(c, set, obj, i, 0, demand, &rc);
		if (!ch)
			break;
		if (demand)
			sfs_peer_promote(c, ch);
	}
	sfs_peer_pump(c);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int sfs_cache_moved(struct sfs_cache *c, uint64_t first, uint64_t *start)
{
	uint64_t now = sfs_now_ms();

	if (now - first >= (uint64_t)SFS_CACHE_MOVE_BUDGET * c->timeout_ms) {
		c->st.timeouts++;
		SFS_LOG(SFS_WARN, "cache",
			"a read moved between sources that stall for %" PRIu64
			" ms (%u x --timeout): given up",
			now - first, SFS_CACHE_MOVE_BUDGET);
		return -ETIMEDOUT;
	}
	*start = now;
	return 0;
}

int sfs_cache_moved_off(struct sfs_cache *c, const struct sfs_chunk *ch,
			uint64_t first, uint64_t *start)
{
	if (ch->member && sfs_peer_seed_has(c, ch)) {
		*start = sfs_now_ms();
		return 0;
	}
	return sfs_cache_moved(c, first, start);
}

int sfs_cache_get(struct sfs_cache *c, uint32_t set, uint32_t obj, uint64_t off,
		  struct sfs_chunk **out, const uint8_t **data, size_t *avail)
{
	uint64_t start = sfs_now_ms(), first = start;
	struct sfs_chunk *ch;
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	if ((rc = sfs_cache_check_range(c, set, obj, off))) {
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
again:
	ch = sfs_cache_find_or_start(c, set, obj, off >> c->chunk_shift, 1, 1,
				     &rc);
	if (!ch) {
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	/* A hit: the bytes were there.  A miss: this reader waits for a
	 * pull (its own, a read-ahead's or another reader's). */
	if (ch->state == CH_READY)
		c->st.hits++;
	else
		c->st.misses++;
	sfs_peer_pump(c);
	rc = sfs_peer_wait(c, ch, start);
	if (rc == -EAGAIN) {
		/* Its pull was on a connection taken out: start it again
		 * from the holders still there.  Their clock starts now: one
		 * that was idle has made no progress because it had nothing
		 * to do, and its old last completion would time the read
		 * out at once (within a budget: sfs_cache_moved). */
		int moved = sfs_cache_moved_off(c, ch, first, &start);
		ch->refs--;
		sfs_cache_settle(c, ch);
		if ((rc = moved) ||
		    (rc = sfs_cache_check_range(c, set, obj, off))) {
			pthread_mutex_unlock(&c->lock);
			return rc;
		}
		goto again;
	}
	if (!rc) {
		uint64_t in = off - (ch->idx << c->chunk_shift);
		*out = ch;
		*data = ch->data + in;
		*avail = ch->len - in;
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	ch->refs--;
	sfs_cache_settle(c, ch);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void sfs_cache_put(struct sfs_cache *c, struct sfs_chunk *ch)
{
	if (!ch)
		return;
	pthread_mutex_lock(&c->lock);
	ch->refs--;
	sfs_cache_settle(c, ch);
	pthread_mutex_unlock(&c->lock);
}

void sfs_cache_stats(struct sfs_cache *c, struct sfs_cache_stats *st)
{
	pthread_mutex_lock(&c->lock);
	*st = c->st;
	size_t ready_slots = (size_t)(c->ready_bytes / c->chunk_size);
	st->ready = c->ready_bytes;
	st->used = (ready_slots - c->nfree) * (uint64_t)c->chunk_size;
	st->disk_queue = c->dq_stores;
	st->queued = c->queued;
	st->disk_tier = c->disk != NULL;
	st->live_sets = c->live_sets;
	st->live_holders = c->live_holders;
	st->peer_slots = c->npeers;
	st->live_peers = 0;
	for (size_t i = 0; i < c->npeers; i++)
		st->live_peers += !c->peers[i]->removed;
	pthread_mutex_unlock(&c->lock);
}

uint64_t sfs_cache_resident(struct sfs_cache *c, uint32_t set, uint32_t obj,
			    uint64_t off, uint64_t len)
{
	uint64_t got = 0;
	if (!len)
		return 0;
	uint64_t end = off + len;
	pthread_mutex_lock(&c->lock);
	for (uint64_t i = off >> c->chunk_shift;
	     i <= (end - 1) >> c->chunk_shift; i++) {
		const struct sfs_chunk *ch = sfs_cache_lookup(c, set, obj, i);
		if (!ch || ch->state != CH_READY)
			continue;
		uint64_t a = SFS_MAX(off, i << c->chunk_shift);
		uint64_t b = SFS_MIN(end, (i << c->chunk_shift) + ch->len);
		if (b > a)
			got += b - a;
	}
	pthread_mutex_unlock(&c->lock);
	return got;
}

void sfs_cache_slab(struct sfs_cache *c, uint8_t **base, size_t *len)
{
	*base = c->slab;
	*len = c->slab_len;
}
