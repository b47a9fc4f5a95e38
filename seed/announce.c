/* SPDX-License-Identifier: MIT */
/*
 * announce.c - the re-seeders that announced themselves to a seed.  A
 * fleet of a thousand asks its /v1/sources about once a second each,
 * so an ask is one pass over the table: the fleet's ring is sorted when
 * its membership changes (an announcement that joins, leaves or changes
 * its run, or one that lapses), and the rendezvous subset is picked
 * without sorting.
 */
#include "announce.h"

#include "common/util.h"
#include "common/xxh.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct ann_entry {
	char addr[300];
	uint64_t until_ms; /* when its announcement lapses */
	uint64_t instance; /* its run, as it said (0: not said) */
	uint64_t hash;	   /* of addr: its place in the ring */
};

/* One re-seeder's rank: by score, then by place in the table. */
struct ranked {
	uint64_t score;
	size_t i;
};

struct sfs_announced {
	pthread_mutex_t lock;
	size_t n, cap;	     /* protected by lock */
	struct ann_entry *e; /* protected by lock */
	/* The ring: the live ones that said their run, by hash (then
	 * place), as of ring_built; rebuilt when ring_stale or once the
	 * first of them lapses (ring_lapse_ms).  All protected by lock. */
	struct ranked *ring;
	size_t nring, ring_cap;
	int ring_stale;
	uint64_t ring_lapse_ms;
	/* The latest time a caller passed: time never goes back in here
	 * (callers read their clocks before they take the lock, so two
	 * may come in out of order). */
	uint64_t now_ms;
};

/* @now, or the latest time already seen (a->lock held). */
static uint64_t forward(struct sfs_announced *a, uint64_t now)
{
	if (now < a->now_ms)
		return a->now_ms;
	a->now_ms = now;
	return now;
}

int sfs_announced_new(struct sfs_announced **out)
{
	struct sfs_announced *a = calloc(1, sizeof(*a));
	*out = NULL;
	if (!a)
		return -ENOMEM;
	pthread_mutex_init(&a->lock, NULL);
	a->ring_stale = 1;
	*out = a;
	return 0;
}

void sfs_announced_free(struct sfs_announced *a)
{
	if (!a)
		return;
	pthread_mutex_destroy(&a->lock);
	free(a->e);
	free(a->ring);
	free(a);
}

int sfs_announced_add(struct sfs_announced *a, const char *addr,
		      uint64_t instance, uint64_t now_ms, int *fresh)
{
	size_t alen = strlen(addr), keep = 0;
	int rc = 0, known = 0;
	if (fresh)
		*fresh = 0;
	if (alen >= sizeof(a->e[0].addr))
		return -ENAMETOOLONG;
	pthread_mutex_lock(&a->lock);
	now_ms = forward(a, now_ms);
	for (size_t i = 0; i < a->n; i++) {
		struct ann_entry *e = &a->e[i];
		if (e->until_ms <= now_ms) {
			a->ring_stale = 1; /* lapsed: it unmounted or died */
			continue;
		}
		/* A run is at one address: another that says it is the
		 * same run is not in the ring (it would take its place). */
		if (instance && e->instance == instance &&
		    strcmp(e->addr, addr))
			rc = -EEXIST;
		if (!strcmp(e->addr, addr)) {
			e->until_ms = now_ms + SFS_ANNOUNCED_TTL_MS;
			a->ring_stale |= e->instance != instance;
			e->instance = instance;
			known = 1;
		}
		if (keep != i)
			a->e[keep] = *e;
		keep++;
	}
	a->n = keep;
	if (rc) {
		/* Refused: out of the fleet's ring (no run). */
		for (size_t i = 0; known && i < a->n; i++)
			if (!strcmp(a->e[i].addr, addr))
				a->e[i].instance = 0;
		a->ring_stale = 1;
	} else if (!known && a->n >= SFS_ANNOUNCED_MAX) {
		rc = -ENOSPC;
	} else if (!known &&
		   sfs_grow((void **)&a->e, &a->cap, a->n + 1, sizeof(*a->e))) {
		rc = -ENOMEM;
	} else if (!known) {
		struct ann_entry *e = &a->e[a->n++];
		memcpy(e->addr, addr, alen + 1);
		e->instance = instance;
		e->until_ms = now_ms + SFS_ANNOUNCED_TTL_MS;
		e->hash = XXH3_64bits(addr, alen);
		a->ring_stale = 1;
		if (fresh)
			*fresh = 1;
	}
	pthread_mutex_unlock(&a->lock);
	return rc;
}

/* The ring's order: by the hash of the address, then by place in the
 * table (the same for every asker). */
static int by_ring(const void *x_, const void *y_)
{
	const struct ranked *x = x_, *y = y_;
	if (x->score != y->score)
		return x->score < y->score ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* The ring as of @now (a->lock held): built again when its membership
 * changed or one of it lapsed.  0 or -ENOMEM. */
static int ring_now(struct sfs_announced *a, uint64_t now)
{
	if (!a->ring_stale && now < a->ring_lapse_ms)
		return 0;
	if (sfs_grow((void **)&a->ring, &a->ring_cap, a->n ? a->n : 1,
		     sizeof(*a->ring)))
		return -ENOMEM;
	a->nring = 0;
	a->ring_lapse_ms = UINT64_MAX;
	for (size_t i = 0; i < a->n; i++) {
		const struct ann_entry *e = &a->e[i];
		if (e->until_ms <= now || !e->instance)
			continue;
		a->ring[a->nring++] = (struct ranked){e->hash, i};
		a->ring_lapse_ms = SFS_MIN(a->ring_lapse_ms, e->until_ms);
	}
	qsort(a->ring, a->nring, sizeof(*a->ring), by_ring);
	a->ring_stale = 0;
	return 0;
}

static json_t *listed(const struct ann_entry *e, uint64_t now)
{
	return json_pack("{s:s,s:I}", "address", e->addr, "expires_in_ms",
			 (json_int_t)(e->until_ms - now));
}

/*
 * The fleet's lanes for run @me (a->lock held): NULL when @me is in no
 * ring of @from or more (or on -ENOMEM).  Its members (places -1, -2,
 * -4, ...) go into @list.
 */
static json_t *fleet(struct sfs_announced *a, uint64_t me, uint32_t from,
		     uint64_t now, json_t *list)
{
	size_t n, at = SIZE_MAX;
	if (!me || ring_now(a, now))
		return NULL;
	n = a->nring;
	if (n < from || n < 2)
		return NULL;
	for (size_t k = 0; k < n && at == SIZE_MAX; k++)
		if (a->e[a->ring[k].i].instance == me)
			at = k;
	if (at == SIZE_MAX)
		return NULL;
	json_t *mem = json_array();
	for (size_t d = 1; mem && d < n; d <<= 1) {
		const struct ann_entry *e = &a->e[a->ring[(at + n - d) % n].i];
		if (json_array_append_new(mem, json_string(e->addr)) ||
		    json_array_append_new(list, listed(e, now))) {
			json_decref(mem);
			mem = NULL;
		}
	}
	return json_pack("{s:I,s:I,s:o*}", "size", (json_int_t)n, "index",
			 (json_int_t)at, "members", mem);
}

/* Into @top (sorted, best first, *@ntop of SFS_ANNOUNCED_LISTED): @r,
 * if it ranks among them (a higher score, then a lower place). */
static void keep_top(struct ranked *top, size_t *ntop, struct ranked r)
{
	size_t k = *ntop;
	while (k > 0 && (top[k - 1].score < r.score ||
			 (top[k - 1].score == r.score && top[k - 1].i > r.i)))
		k--;
	if (k >= SFS_ANNOUNCED_LISTED)
		return;
	size_t last = SFS_MIN(*ntop, (size_t)SFS_ANNOUNCED_LISTED - 1);
	memmove(&top[k + 1], &top[k], (last - k) * sizeof(*top));
	top[k] = r;
	*ntop = SFS_MIN(*ntop + 1, (size_t)SFS_ANNOUNCED_LISTED);
}

int sfs_announced_sources(struct sfs_announced *a, const char *asker,
			  uint64_t me, uint32_t fleet_from, uint64_t now_ms,
			  char **buf, size_t *len)
{
	uint64_t seed =
		XXH3_64bits(asker ? asker : "", asker ? strlen(asker) : 0);
	struct ranked top[SFS_ANNOUNCED_LISTED];
	size_t ntop = 0, live = 0;
	json_t *list = json_array(), *fl = NULL;
	*buf = NULL;
	*len = 0;
	pthread_mutex_lock(&a->lock);
	now_ms = forward(a, now_ms);
	for (size_t i = 0; i < a->n; i++)
		live += a->e[i].until_ms > now_ms;
	if (list)
		fl = fleet(a, me, fleet_from, now_ms, list);
	/* Else each asker gets its own SFS_ANNOUNCED_LISTED of the live
	 * ones (rendezvous hashing on the asker): a fleet's replicas
	 * spread over all re-seeders instead of all asking the same first
	 * ones, and one asker's list changes little as others come and
	 * go. */
	for (size_t i = 0; list && !fl && i < a->n; i++) {
		const struct ann_entry *e = &a->e[i];
		if (e->until_ms > now_ms)
			keep_top(top, &ntop,
				 (struct ranked){XXH3_64bits_withSeed(
							 e->addr,
							 strlen(e->addr), seed),
						 i});
	}
	for (size_t k = 0; k < ntop; k++)
		json_array_append_new(list, listed(&a->e[top[k].i], now_ms));
	pthread_mutex_unlock(&a->lock);
	json_t *o = json_pack("{s:o*,s:I,s:o*}", "reseeders", list, "live",
			      (json_int_t)live, "fleet", fl);
	*buf = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!*buf)
		return -ENOMEM;
	*len = strlen(*buf);
	return 0;
}

size_t sfs_announced_live(struct sfs_announced *a, uint64_t now_ms)
{
	size_t live = 0;
	pthread_mutex_lock(&a->lock);
	now_ms = forward(a, now_ms);
	for (size_t i = 0; i < a->n; i++)
		live += a->e[i].until_ms > now_ms;
	pthread_mutex_unlock(&a->lock);
	return live;
}
