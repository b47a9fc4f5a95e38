/* SPDX-License-Identifier: MIT */
/*
 * announce.c - the re-seeders that announced themselves to a seed.  A
 * fleet of a thousand asks its /v1/sources about once a second each,
 * so an ask is one pass over the table: the fleet's ring is sorted when
 * its membership changes (an announcement that joins, leaves or changes
 * its run, or one that lapses), and the rendezvous subset is picked
 * without sorting.  What an announcement may list is checked here, the
 * one place every route into the table passes (announce.h).
 */
#include "announce.h"

#include "common/util.h"
#include "common/xxh.h"
#include "control/run.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

struct ann_entry {
	char addr[SFS_ANNOUNCED_ADDR_MAX];
	uint8_t from[16];  /* the caller's address (IPv4 as mapped) */
	uint64_t until_ms; /* when its announcement lapses */
	uint64_t instance; /* its run, proven (0: not said) */
	uint64_t hash;	   /* keyed hash of addr: its place in the ring */
};

/* One re-seeder's rank: by score, then by place in the table. */
struct ranked {
	uint64_t score;
	size_t i;
};

struct sfs_announced {
	pthread_mutex_t lock;
	uint8_t key[SFS_ANNOUNCED_KEY_LEN]; /* set once, at new */
	uint32_t per_caller;		    /* set once, at new */
	size_t n, cap;			    /* protected by lock */
	struct ann_entry *e;		    /* protected by lock */
	/* The ring: the live ones that proved their run, by hash (then
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

int sfs_announced_new(const struct sfs_announced_cfg *cfg,
		      struct sfs_announced **out)
{
	struct sfs_announced *a = calloc(1, sizeof(*a));
	*out = NULL;
	if (!a)
		return -ENOMEM;
	if (cfg && cfg->key) {
		memcpy(a->key, cfg->key, sizeof(a->key));
	} else if (getrandom(a->key, sizeof(a->key), 0) !=
		   (ssize_t)sizeof(a->key)) {
		free(a);
		return -EIO;
	}
	a->per_caller = cfg && cfg->per_caller ? cfg->per_caller
					       : SFS_ANNOUNCED_PER_CALLER;
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
	explicit_bzero(a->key, sizeof(a->key));
	free(a->e);
	free(a->ring);
	free(a);
}

uint64_t sfs_announced_place(const struct sfs_announced *a, const char *addr)
{
	uint8_t d[32];
	uint64_t v = 0;
	/* HMAC-SHA-256 under the seed's secret, its first 8 bytes: without
	 * the secret no one can tell where an address will sit.  (It fails
	 * only in a broken library: then every place is 0, ordered by when
	 * each came.) */
	if (gnutls_hmac_fast(GNUTLS_MAC_SHA256, a->key, sizeof(a->key), addr,
			     strlen(addr), d))
		return 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | d[i];
	return v;
}

/* Numeric address @s into @ip, IPv4 (and IPv4-mapped IPv6) as
 * ::ffff:a.b.c.d.  0 or -EINVAL. */
static int ip16(const char *s, uint8_t ip[16])
{
	struct in_addr a4;
	if (inet_pton(AF_INET, s, &a4) == 1) {
		static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
		memcpy(ip, mapped, sizeof(mapped));
		memcpy(ip + 12, &a4, 4);
		return 0;
	}
	return inet_pton(AF_INET6, s, ip) == 1 ? 0 : -EINVAL;
}

/* @ip:@port as listed: dotted IPv4, else [IPv6] (inet_ntop's form). */
static void listed_form(const uint8_t ip[16], unsigned long port, char *out,
			size_t len)
{
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
	char h[INET6_ADDRSTRLEN] = "?";
	int v4 = !memcmp(ip, mapped, sizeof(mapped));
	inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? ip + 12 : ip, h, sizeof(h));
	snprintf(out, len, "%s%s%s:%lu", v4 ? "" : "[", h, v4 ? "" : "]", port);
}

/* @an parsed and checked (no lock): the address to list into
 * res->listed, the caller into @from.  0 or sfs_announced_add's
 * -EINVAL, -EPERM, -EACCES. */
static int check(const struct sfs_announce *an, uint8_t from[16],
		 struct sfs_announced_res *res)
{
	char host[256], port[16];
	uint8_t h[16];
	if (!an->addr || !an->caller ||
	    sfs_parse_hostport(an->addr, host, sizeof(host), port,
			       sizeof(port)) ||
	    ip16(an->caller, from))
		return -EINVAL;
	unsigned long p = strtoul(port, NULL, 10);
	if (!p)
		return -EINVAL;
	listed_form(from, p, res->listed, sizeof(res->listed));
	/* Its own address only: a token holder lists nobody else's host
	 * (its mounts would send the token there). */
	int any = !*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
	if (!any && (ip16(host, h) || memcmp(h, from, sizeof(h))))
		return -EPERM;
	/* A run only with its secret: no one takes another's place. */
	if (an->instance &&
	    (!an->proof || sfs_run_instance(an->proof) != an->instance))
		return -EACCES;
	return 0;
}

int sfs_announced_add(struct sfs_announced *a, const struct sfs_announce *an,
		      uint64_t now_ms, struct sfs_announced_res *res)
{
	uint8_t from[16];
	memset(res, 0, sizeof(*res));
	int rc = check(an, from, res);
	if (rc)
		return rc;
	const char *addr = res->listed;
	uint64_t instance = an->instance;
	size_t keep = 0, known = SIZE_MAX, prev = SIZE_MAX, mine = 0;
	pthread_mutex_lock(&a->lock);
	now_ms = forward(a, now_ms);
	for (size_t i = 0; i < a->n; i++) {
		struct ann_entry *e = &a->e[i];
		if (e->until_ms <= now_ms) {
			a->ring_stale = 1; /* lapsed: it unmounted or died */
			continue;
		}
		if (keep != i)
			a->e[keep] = *e;
		e = &a->e[keep];
		if (!strcmp(e->addr, addr))
			known = keep;
		else if (instance && e->instance == instance)
			prev = keep; /* its run, elsewhere until now */
		mine += !memcmp(e->from, from, sizeof(from));
		keep++;
	}
	a->n = keep;
	if (known == SIZE_MAX) {
		/* A run that moves leaves its old place first. */
		int gone = prev != SIZE_MAX;
		int mine_gone =
			gone && !memcmp(a->e[prev].from, from, sizeof(from));
		if (mine - (size_t)mine_gone >= a->per_caller)
			rc = -EDQUOT;
		else if (a->n - (size_t)gone >= SFS_ANNOUNCED_MAX)
			rc = -ENOSPC;
		else if (sfs_grow((void **)&a->e, &a->cap, a->n + 1,
				  sizeof(*a->e)))
			rc = -ENOMEM;
	}
	if (!rc && prev != SIZE_MAX) {
		/* The same run at a new address: the newest wins (only the
		 * run itself holds its proof). */
		memcpy(res->moved_from, a->e[prev].addr,
		       sizeof(res->moved_from));
		memmove(&a->e[prev], &a->e[prev + 1],
			(a->n - prev - 1) * sizeof(*a->e));
		a->n--;
		if (known != SIZE_MAX && known > prev)
			known--;
		a->ring_stale = 1;
	}
	if (!rc && known != SIZE_MAX) {
		struct ann_entry *e = &a->e[known];
		e->until_ms = now_ms + SFS_ANNOUNCED_TTL_MS;
		a->ring_stale |= e->instance != instance;
		e->instance = instance;
	} else if (!rc) {
		struct ann_entry *e = &a->e[a->n++];
		memcpy(e->addr, addr, sizeof(e->addr));
		memcpy(e->from, from, sizeof(e->from));
		e->instance = instance;
		e->until_ms = now_ms + SFS_ANNOUNCED_TTL_MS;
		e->hash = sfs_announced_place(a, addr);
		a->ring_stale = 1;
		res->fresh = 1;
	}
	pthread_mutex_unlock(&a->lock);
	return rc;
}

/* The ring's order: by the keyed hash of the address, then by place in
 * the table (the same for every asker). */
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
	 * go.  Ranked by the keyed hash of each address, which no one
	 * without the seed's secret knows: no one picks addresses that
	 * rank first for a chosen asker. */
	for (size_t i = 0; list && !fl && i < a->n; i++) {
		const struct ann_entry *e = &a->e[i];
		if (e->until_ms > now_ms)
			keep_top(top, &ntop,
				 (struct ranked){XXH3_64bits_withSeed(
							 &e->hash,
							 sizeof(e->hash), seed),
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
