/* SPDX-License-Identifier: MIT */
/*
 * inherit.c - a new set takes the chunks of an older one whose bytes it
 * names too (sfs_cache_inherit): a generation of a model that changed a
 * few chunks pulls those, not the rest again.
 *
 * A chunk is named by its checksums: the XXH3-64 (and SHA-256, where
 * the object has it) of each checksum block it covers, and its length.
 * The new set's chunks go into a table keyed by a digest of those,
 * built outside the cache's lock (the sets' checksums never change);
 * then one walk of the slots under the lock re-keys every READY chunk
 * of the old set, nobody pinning it, whose checksums equal one of the
 * new set's not yet cached.  Its bytes stay where they are: a replica
 * reading the slot because the old set's export listed it reads the
 * same bytes (its keep moves with it).
 */
#include "cache/core.h"

#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* One chunk of the new set in the table (key 0: empty entry). */
struct inh_ent {
	uint64_t key;
	uint32_t obj;
	uint64_t idx;
};

struct inh_table {
	struct inh_ent *e;
	size_t mask;
};

/* Checksum blocks of chunk @idx of @o: the first, and how many. */
static void blocks_of(const struct sfs_cache *c, const struct sfs_cache_obj *o,
		      uint64_t idx, uint64_t *first, uint64_t *n)
{
	uint64_t off = idx << c->chunk_shift;
	uint64_t end = SFS_MIN(o->len, off + c->chunk_size);
	*first = off >> o->csum_shift;
	*n = ((end - off) + ((1ull << o->csum_shift) - 1)) >> o->csum_shift;
}

/* A chunk's key: its length, its checksum blocks' size and XXH3-64s
 * (never 0: 0 marks an empty entry). */
static uint64_t chunk_key(const struct sfs_cache *c,
			  const struct sfs_cache_obj *o, uint64_t idx)
{
	uint64_t first, n;
	uint64_t len = SFS_MIN((uint64_t)c->chunk_size,
			       o->len - (idx << c->chunk_shift));
	uint64_t h = (len * 0x9e3779b97f4a7c15ull) ^ o->csum_shift;
	blocks_of(c, o, idx, &first, &n);
	for (uint64_t k = 0; k < n; k++) {
		h ^= o->xxh3[first + k];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 33;
	}
	return h ? h : 1;
}

/* May @o's chunk @oi hold the bytes of @n's chunk @ni?  Equal length
 * and block size, equal XXH3-64 of every block, and equal SHA-256 where
 * both have it; only SHA-256 when the cache checks everything against
 * it (@strong): a chunk pulled from a seed was checked against XXH3-64,
 * a trusted seed's, and the new set's checksums are as trusted. */
static int same_bytes(const struct sfs_cache *c, const struct sfs_cache_obj *o,
		      uint64_t oi, const struct sfs_cache_obj *n, uint64_t ni,
		      int strong)
{
	uint64_t of, on, nf, nn;
	if (o->csum_shift != n->csum_shift)
		return 0;
	uint64_t olen = SFS_MIN((uint64_t)c->chunk_size,
				o->len - (oi << c->chunk_shift));
	uint64_t nlen = SFS_MIN((uint64_t)c->chunk_size,
				n->len - (ni << c->chunk_shift));
	if (olen != nlen)
		return 0;
	blocks_of(c, o, oi, &of, &on);
	blocks_of(c, n, ni, &nf, &nn);
	if (memcmp(o->xxh3 + of, n->xxh3 + nf, on * sizeof(*o->xxh3)))
		return 0;
	if (o->sha256 && n->sha256)
		return !memcmp(o->sha256 + 32 * of, n->sha256 + 32 * nf,
			       32 * on);
	return !strong;
}

/* The table of @s's chunks with checksums: 0 or -ENOMEM. */
static int table_new(const struct sfs_cache *c, const struct cache_set *s,
		     struct inh_table *t)
{
	size_t n = 0, cap = 1;
	for (size_t i = 0; i < s->nobjs; i++)
		if (s->objs[i].xxh3)
			n += (size_t)((s->objs[i].len + c->chunk_size - 1) >>
				      c->chunk_shift);
	while (cap < 2 * n)
		cap <<= 1;
	if (!(t->e = calloc(cap, sizeof(*t->e))))
		return -ENOMEM;
	t->mask = cap - 1;
	for (uint32_t i = 0; i < s->nobjs; i++) {
		const struct sfs_cache_obj *o = &s->objs[i];
		uint64_t k =
			o->xxh3 ? (o->len + c->chunk_size - 1) >> c->chunk_shift
				: 0;
		for (uint64_t idx = 0; idx < k; idx++) {
			uint64_t key = chunk_key(c, o, idx);
			size_t at = (size_t)key & t->mask;
			while (t->e[at].key)
				at = (at + 1) & t->mask;
			t->e[at] = (struct inh_ent){key, i, idx};
		}
	}
	return 0;
}

/* Give @ch (READY, unpinned, @from's) to set @to as chunk @idx of
 * @obj (c->lock held). */
static void rekey(struct sfs_cache *c, struct sfs_chunk *ch, uint32_t to,
		  uint32_t obj, uint64_t idx)
{
	uint32_t from = ch->set;
	struct cache_set *sf = c->sets[from], *st = c->sets[to];
	sfs_cache_unhash(c, ch);
	sfs_cache_touch(c, ch); /* gone from @from's exports */
	if (ch->listed && st->keep_until_ms < sf->keep_until_ms)
		st->keep_until_ms = sf->keep_until_ms;
	sfs_cache_set_hold(c, to);
	ch->set = to;
	ch->obj = obj;
	ch->idx = idx;
	ch->mismatches = 0;
	ch->avoid = 0;
	ch->seed_next = 0;
	size_t b = sfs_cache_bucket(c, to, obj, idx);
	ch->hnext = c->buckets[b];
	c->buckets[b] = ch;
	sfs_cache_touch(c, ch);
	sfs_cache_set_drop(c, from); /* @from is not released: it stays */
}

int sfs_cache_inherit(struct sfs_cache *c, uint32_t to, uint32_t from,
		      uint64_t *chunks, uint64_t *bytes)
{
	struct inh_table t = {0};
	uint64_t nk = 0, nb = 0;
	int rc = 0;

	*chunks = *bytes = 0;
	pthread_mutex_lock(&c->lock);
	struct cache_set *st = to < c->nsets ? c->sets[to] : NULL;
	struct cache_set *sf = from < c->nsets ? c->sets[from] : NULL;
	if (!st || !sf || to == from || st->released || sf->released ||
	    st->refs || st->stamps)
		rc = -EINVAL; /* unknown, or @to already in use */
	pthread_mutex_unlock(&c->lock);
	if (rc)
		return rc;
	/* The sets are the caller's (not released): their objects stay. */
	if ((rc = table_new(c, st, &t)))
		return rc;
	pthread_mutex_lock(&c->lock);
	int strong = c->sha256_all;
	for (size_t i = 0; !st->retired && !sf->retired && i < c->nslots; i++) {
		struct sfs_chunk *ch = &c->slots[i];
		if (ch->set != from || ch->state != CH_READY || ch->refs ||
		    ch->dst || ch->orphan)
			continue;
		const struct sfs_cache_obj *o = &sf->objs[ch->obj];
		if (!o->xxh3)
			continue;
		uint64_t key = chunk_key(c, o, ch->idx);
		for (size_t at = (size_t)key & t.mask; t.e[at].key;
		     at = (at + 1) & t.mask) {
			const struct inh_ent *e = &t.e[at];
			if (e->key != key ||
			    !same_bytes(c, o, ch->idx, &st->objs[e->obj],
					e->idx, strong) ||
			    sfs_cache_lookup(c, to, e->obj, e->idx))
				continue;
			nb += ch->len;
			nk++;
			rekey(c, ch, to, e->obj, e->idx);
			break;
		}
	}
	c->st.inherited += nk;
	c->st.inherited_bytes += nb;
	pthread_mutex_unlock(&c->lock);
	free(t.e);
	SFS_LOG(SFS_DEBUG, "cache",
		"%s: %" PRIu64 " chunks (%" PRIu64 " bytes) taken from %s",
		st->label, nk, nb, sf->label);
	*chunks = nk;
	*bytes = nb;
	return 0;
}
