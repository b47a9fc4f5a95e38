/* SPDX-License-Identifier: MIT */
/*
 * inherit.c - a new set takes the chunks of an older one whose bytes it
 * names too (sfs_cache_inherit): a generation of a model that changed a
 * few chunks pulls those, not the rest again.
 *
 * A chunk is named by its checksums: the XXH3-64 (and SHA-256, where
 * the object has it) of each checksum block it covers, and its length.
 * Three steps, the middle one outside the cache's lock:
 *   1. under the lock, the old set's chunks that may be taken (READY,
 *      nobody pinning them) are listed: at most one per slot;
 *   2. outside it, those are sorted by a key made of their blocks'
 *      XXH3-64s, and every chunk of the new set looks for one of equal
 *      checksums it has not given to another (a cursor per key: many
 *      equal chunks, zero-filled ones, cost one step each);
 *   3. under the lock again, each pair is taken if its chunk is still
 *      what step 1 saw: re-keyed in the hash, its bytes where they are
 *      (a replica reading the slot because the old set's export listed
 *      it reads the same bytes; its keep moves with it).
 * Memory and time follow the slots and the new set's chunk count, never
 * a product of them.
 */
#include "cache/core.h"

#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A chunk of the old set that may be taken (step 1). */
struct inh_old {
	uint64_t key;
	uint32_t slot, obj;
	uint64_t idx;
};

/* A chunk taken: slot @slot becomes chunk @idx of @obj (steps 2-3). */
struct inh_pair {
	uint32_t slot, obj;
	uint64_t idx, old_idx;
	uint32_t old_obj;
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

/* A chunk's key: its blocks' XXH3-64s (never 0). */
static uint64_t chunk_key(const struct sfs_cache *c,
			  const struct sfs_cache_obj *o, uint64_t idx)
{
	uint64_t first, n, h = 0x9e3779b97f4a7c15ull;
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
 * it (@strong).  A chunk pulled from a seed was checked against XXH3-64,
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

static int old_cmp(const void *a, const void *b)
{
	const struct inh_old *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* The first of @old (sorted, @n) with @key, or @n. */
static size_t first_of(const struct inh_old *old, size_t n, uint64_t key)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (old[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Step 2: pair each chunk of @ts's objects with one of @old; the pairs
 * in *out [new], their number in *np. */
static int match(const struct sfs_cache *c, const struct cache_set *ts,
		 const struct cache_set *fs, struct inh_old *old, size_t nold,
		 int strong, struct inh_pair **out, size_t *np)
{
	/* Per old chunk: taken by a pair already.  Per run of equal keys,
	 * the cursor is the first not taken (equal keys are equal bytes
	 * but for a collision, which only skips). */
	uint8_t *taken = calloc(nold ? nold : 1, 1);
	size_t *cursor = malloc((nold ? nold : 1) * sizeof(*cursor));
	struct inh_pair *pairs = malloc((nold ? nold : 1) * sizeof(*pairs));
	size_t n = 0;
	if (!taken || !cursor || !pairs) {
		free(taken);
		free(cursor);
		free(pairs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nold; i++)
		cursor[i] = i;
	for (uint32_t oi = 0; oi < ts->nobjs && n < nold; oi++) {
		const struct sfs_cache_obj *no = &ts->objs[oi];
		uint64_t k = no->xxh3 ? (no->len + c->chunk_size - 1) >>
						c->chunk_shift
				      : 0;
		for (uint64_t idx = 0; idx < k && n < nold; idx++) {
			uint64_t key = chunk_key(c, no, idx);
			size_t f = first_of(old, nold, key);
			if (f == nold || old[f].key != key)
				continue;
			/* cursor[f]: the run's first not taken */
			while (cursor[f] < nold && old[cursor[f]].key == key &&
			       taken[cursor[f]])
				cursor[f]++;
			size_t j = cursor[f];
			while (j < nold && old[j].key == key &&
			       (taken[j] ||
				!same_bytes(c, &fs->objs[old[j].obj],
					    old[j].idx, no, idx, strong)))
				j++;
			if (j == nold || old[j].key != key)
				continue;
			taken[j] = 1;
			pairs[n++] = (struct inh_pair){.slot = old[j].slot,
						       .obj = oi,
						       .idx = idx,
						       .old_obj = old[j].obj,
						       .old_idx = old[j].idx};
		}
	}
	free(taken);
	free(cursor);
	*out = pairs;
	*np = n;
	return 0;
}

/* May @ch (c->lock held) be given to another set? */
static int takeable(const struct sfs_chunk *ch)
{
	return ch->state == CH_READY && !ch->refs && !ch->dst && !ch->orphan;
}

/* Give @ch (takeable, @from's) to set @to as chunk @idx of @obj, and to
 * @to's disk tier while its queue has room (c->lock held). */
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
	ch->avoid = SFS_NONE;
	ch->seed_next = 0;
	size_t b = sfs_cache_bucket(c, to, obj, idx);
	ch->hnext = c->buckets[b];
	c->buckets[b] = ch;
	sfs_cache_touch(c, ch);
	sfs_cache_set_drop(c, from); /* @from is not released: it stays */
	if (st->disk && c->dq_stores < c->nslots / 4 && !c->stopping) {
		sfs_list_del(sfs_cache_lru_of(c, ch), ch);
		sfs_cache_store_later(c, ch); /* pinned until written */
	}
}

int sfs_cache_inherit(struct sfs_cache *c, uint32_t to, uint32_t from,
		      uint64_t *chunks, uint64_t *bytes)
{
	struct inh_old *old = NULL;
	struct inh_pair *pairs = NULL;
	size_t nold = 0, npairs = 0;
	uint64_t nk = 0, nb = 0;
	char tl[64], fl[64];
	int rc = 0;

	*chunks = *bytes = 0;
	/* Step 1. */
	pthread_mutex_lock(&c->lock);
	struct cache_set *st = to < c->nsets ? c->sets[to] : NULL;
	struct cache_set *sf = from < c->nsets ? c->sets[from] : NULL;
	if (!st || !sf || to == from || st->released || sf->released)
		rc = -EINVAL;
	else if (!st->retired && !sf->retired &&
		 !(old = malloc((c->nslots ? c->nslots : 1) * sizeof(*old))))
		rc = -ENOMEM;
	for (size_t i = 0; old && i < c->nslots; i++) {
		const struct sfs_chunk *ch = &c->slots[i];
		if (ch->set == from && takeable(ch) && sf->objs[ch->obj].xxh3)
			old[nold++] = (struct inh_old){.slot = (uint32_t)i,
						       .obj = ch->obj,
						       .idx = ch->idx};
	}
	uint64_t born_t = st ? st->born : 0, born_f = sf ? sf->born : 0;
	int strong = c->sha256_all;
	if (!rc) {
		snprintf(tl, sizeof(tl), "%s", st->label);
		snprintf(fl, sizeof(fl), "%s", sf->label);
	}
	pthread_mutex_unlock(&c->lock);
	if (rc || !nold)
		goto out;
	/* Step 2: the sets' objects never change while the caller keeps
	 * them (not released). */
	for (size_t i = 0; i < nold; i++)
		old[i].key = chunk_key(c, &sf->objs[old[i].obj], old[i].idx);
	qsort(old, nold, sizeof(*old), old_cmp);
	if ((rc = match(c, st, sf, old, nold, strong, &pairs, &npairs)))
		goto out;
	/* Step 3. */
	pthread_mutex_lock(&c->lock);
	if (c->sets[to] == st && c->sets[from] == sf && st->born == born_t &&
	    sf->born == born_f && !st->retired && !sf->retired) {
		for (size_t i = 0; i < npairs; i++) {
			const struct inh_pair *pr = &pairs[i];
			struct sfs_chunk *ch = &c->slots[pr->slot];
			if (ch->set != from || ch->obj != pr->old_obj ||
			    ch->idx != pr->old_idx || !takeable(ch) ||
			    sfs_cache_lookup(c, to, pr->obj, pr->idx))
				continue;
			nb += ch->len;
			nk++;
			rekey(c, ch, to, pr->obj, pr->idx);
		}
		c->st.inherited += nk;
		c->st.inherited_bytes += nb;
	}
	pthread_mutex_unlock(&c->lock);
	SFS_LOG(SFS_DEBUG, "cache",
		"%s: %" PRIu64 " chunks (%" PRIu64 " bytes) taken from %s", tl,
		nk, nb, fl);
out:
	free(old);
	free(pairs);
	*chunks = nk;
	*bytes = nb;
	return rc;
}
