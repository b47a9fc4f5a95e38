/* SPDX-License-Identifier: MIT */
/*
 * slab.c - the cache's memory: one mapping of --cache-size bytes,
 * aligned to 2 MiB and in transparent huge pages where the kernel
 * allows, registered with the transport in segments.
 *
 * Pulling into memory touched for the first time was measured here at
 * 1/2 (tcp) to 1/10 (shm) of the throughput into faulted memory, so a
 * segment is faulted in before its chunks are used; providers that pin
 * memory (verbs) do it when registering anyway.
 *
 * The cache grows as it needs: only its first 32 MiB are made ready
 * before the cache is returned, and a background thread (the grower)
 * faults in and registers segments of 8 MiB while another one still
 * fits under SFS_SLAB_AHEAD (64 MiB) of free ready slots, so that the
 * memory committed is what is held plus at most 64 MiB; and, unless
 * the cache holds all it pulls (a re-seeder's, or room a prefetch asked
 * for), only while free slots and chunks a pull may reuse (the LRU)
 * stay under SFS_SLAB_SPARE (128 MiB): a model read once commits about
 * that, not its size (core.c's sfs_slab_short).  (Faulting a
 * whole 1.5 GiB cache at mount took 4-6 s of CPU here, for memory that
 * a small model never used.)  A reader does not wait for it: with no
 * free slot it takes the least recently used chunk, as in a full
 * cache, but not one listed to other replicas (cache.c's take_slot):
 * for those it waits for the grower, whose slots come within tens of
 * milliseconds.
 *
 * It also shrinks: when chunks are freed (a generation replaced, a
 * model gone) and more than SFS_SLAB_AHEAD plus a segment is free, the
 * grower gives the slots past SFS_SLAB_AHEAD back to the kernel
 * (MADV_DONTNEED) and keeps them, still registered, on the bare list;
 * they are faulted in again before use, ahead of new segments.  Only
 * with a transport that does not pin what it registers (tcp, shm):
 * verbs and efa pin the pages, and a page given back under a
 * registration would leave the NIC writing where the process no longer
 * reads.  There the cache keeps what it has grown to (docs/limits.md).
 * And once no slot was taken for cfg.idle_ms (30 s in a mount, its
 * --cache-idle) and no prefetch asks, an idle mount gives back its
 * free slots past SFS_CACHE_IDLE_KEEP (32 MiB, what a new cache has when
 * ready) the same way; the next
 * pull makes it keep SFS_SLAB_AHEAD free again.
 */
#include "cache/core.h"

#include "common/log.h"
#include "common/util.h"
#include "transports/transport.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HUGE_PAGE (2u << 20)
#define FIRST_BYTES (32ull << 20) /* ready when the cache is returned */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/*
 * Fault in and register segment @k (no lock: nobody uses it yet).  One
 * huge page per madvise: the call holds the process's mmap lock, and
 * every mmap, munmap and mprotect of the other threads (a thread's
 * stack, malloc, dlopen) waits behind it.  A whole segment at once made
 * them wait about 100 ms each here, and an unmount right after the
 * mount (libfuse ending its threads) took 2-4 s instead of 0.1.
 */
static void populate(uint8_t *base, size_t len)
{
	for (size_t o = 0; o < len; o += HUGE_PAGE) {
		size_t n = SFS_MIN((size_t)HUGE_PAGE, len - o);
		/* Linux 5.14+; else touch each page. */
		if (madvise(base + o, n, MADV_POPULATE_WRITE))
			for (size_t p = 0; p < n; p += 4096)
				base[o + p] = 0;
	}
}

static int seg_prepare(struct sfs_cache *c, size_t k)
{
	struct cache_seg *s = &c->segs[k];
	populate(s->base, s->len);
	return sfs_xport_mr_reg(c->x, s->base, s->len, SFS_XPORT_LOCAL_DST,
				&s->mr);
}

/* Its chunks join the free list (c->lock held). */
static void seg_publish(struct sfs_cache *c, size_t k)
{
	struct cache_seg *s = &c->segs[k];
	size_t first = (size_t)(s->base - c->slab) / c->chunk_size;
	size_t n = s->len / c->chunk_size;

	for (size_t i = first; i < first + n; i++) {
		struct sfs_chunk *ch = &c->slots[i];
		ch->mr = s->mr;
		sfs_list_add_tail(&c->free, ch);
		c->nfree++;
	}
	c->ready_bytes += s->len;
	sfs_cache_wake(c);
}

int sfs_slab_new(struct sfs_cache *c, char *err, size_t errlen)
{
	size_t len = c->slab_len + HUGE_PAGE;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		int rc = -errno;
		snprintf(err, errlen, "cache: cannot map %zu bytes: %s",
			 c->slab_len, strerror(errno));
		return rc;
	}
	uintptr_t a =
		((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
	size_t head = a - (uintptr_t)p;
	if (head)
		munmap(p, head);
	if (len - head > c->slab_len)
		munmap((uint8_t *)a + c->slab_len, len - head - c->slab_len);
	c->slab = (uint8_t *)a;
	/* Best effort: THP may be off ("never"), then 4 KiB pages. */
	madvise(c->slab, c->slab_len, MADV_HUGEPAGE);

	size_t seg = SFS_MAX((size_t)SFS_SLAB_SEG / c->chunk_size, (size_t)1) *
		     c->chunk_size;
	size_t nsegs = (c->slab_len + seg - 1) / seg;
	/* nsegs only with its array: sfs_slab_free walks what it counts. */
	if (!(c->segs = calloc(nsegs, sizeof(*c->segs)))) {
		snprintf(err, errlen, "cache: out of memory for %zu segments",
			 nsegs);
		return -ENOMEM;
	}
	c->nsegs = nsegs;
	for (size_t k = 0; k < c->nsegs; k++) {
		c->segs[k].base = c->slab + k * seg;
		c->segs[k].len = SFS_MIN(seg, c->slab_len - k * seg);
	}
	for (size_t i = 0; i < c->nslots; i++) {
		c->slots[i].c = c;
		c->slots[i].data = c->slab + i * (size_t)c->chunk_size;
	}
	struct sfs_xport_info info;
	sfs_xport_info(c->x, &info);
	c->give_back = !info.pins;
	size_t first = 0;
	int rc = 0;
	while (!rc && first < c->nsegs &&
	       (first == 0 || (uint64_t)first * seg < FIRST_BYTES))
		if ((rc = seg_prepare(c, first)) == 0)
			first++;
	if (rc) {
		snprintf(err, errlen, "cache: cannot register %zu bytes: %s",
			 c->segs[first].len, strerror(-rc));
		for (size_t k = 0; k < first; k++) {
			sfs_xport_mr_dereg(c->segs[k].mr);
			c->segs[k].mr = NULL;
		}
		return rc;
	}
	pthread_mutex_lock(&c->lock);
	for (size_t k = 0; k < first; k++)
		seg_publish(c, k);
	c->next_seg = first;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

void sfs_cache_want_begin(struct sfs_cache *c)
{
	pthread_mutex_lock(&c->lock);
	c->wanting++;
	pthread_mutex_unlock(&c->lock);
}

void sfs_cache_want_ready(struct sfs_cache *c, uint64_t bytes)
{
	pthread_mutex_lock(&c->lock);
	if (bytes > c->grow_target)
		c->grow_target = bytes;
	sfs_slab_want(c);
	pthread_mutex_unlock(&c->lock);
}

void sfs_cache_want_end(struct sfs_cache *c)
{
	pthread_mutex_lock(&c->lock);
	if (c->wanting && --c->wanting == 0) {
		c->grow_target = 0; /* the last one: nothing asks any more */
		sfs_slab_want(c);
	}
	pthread_mutex_unlock(&c->lock);
}

/* Commit a segment's worth of given-back slots again, and put them on
 * the free list.  Called with c->lock held; drops it meanwhile (the
 * slots are on no list: nobody else sees them; c->committing says
 * they are coming). */
static void recommit(struct sfs_cache *c)
{
	struct list got = {0};
	size_t n = 0;
	struct sfs_chunk *ch;
	size_t most =
		SFS_MAX((size_t)1, (size_t)(SFS_SLAB_SEG >> c->chunk_shift));
	while (n < most && (ch = c->bare.head)) {
		sfs_list_del(&c->bare, ch);
		c->nbare--;
		sfs_list_add_tail(&got, ch);
		n++;
	}
	c->committing += n;
	pthread_mutex_unlock(&c->lock);
	for (ch = got.head; ch; ch = ch->next)
		populate(ch->data, c->chunk_size);
	pthread_mutex_lock(&c->lock);
	while ((ch = got.head)) {
		sfs_list_del(&got, ch);
		ch->bare = 0;
		sfs_list_add_tail(&c->free, ch);
		c->nfree++;
	}
	c->committing -= n;
	c->ready_bytes += (uint64_t)n << c->chunk_shift;
	sfs_cache_wake(c);
}

/* Are the @k slots from @g all free, committed, and past any keep (a
 * replica that was told of one may no longer read it)?  c->lock held. */
static int group_free(const struct sfs_cache *c, size_t g, size_t k,
		      uint64_t now)
{
	if (g + k > c->nslots)
		return 0;
	for (size_t i = g; i < g + k; i++) {
		const struct sfs_chunk *m = &c->slots[i];
		/* FREE, registered and not bare: on the free list (a slot
		 * taken leaves FREE before the lock is dropped). */
		if (m->state != CH_FREE || m->bare || !m->mr ||
		    m->freed_keep_ms > now)
			return 0;
	}
	return 1;
}

/*
 * Give about @bytes of free slots back to the kernel (MADV_DONTNEED:
 * their pages go; the registration stays, the transport does not pin
 * them) and keep them on the bare list.  Only whole huge pages
 * (SFS_SLAB_GROUP; a chunk when chunks are larger) whose slots are all
 * free go: half of one given back would split it and free nothing
 * until the kernel's deferred split.  Returns the bytes given back (0:
 * none could go now).  c->lock held; dropped meanwhile.
 */
static uint64_t give_back(struct sfs_cache *c, uint64_t bytes)
{
	size_t k =
		SFS_MAX((size_t)1, (size_t)(SFS_SLAB_GROUP >> c->chunk_shift));
	uint64_t now = sfs_now_ms(), took = 0;
	struct list got = {0};
	struct sfs_chunk *ch;
	int more = 1;
	while (more && took < bytes) {
		more = 0;
		for (ch = c->free.head; ch; ch = ch->next) {
			size_t g = (size_t)(ch - c->slots) & ~(k - 1);
			if (!group_free(c, g, k, now))
				continue;
			for (size_t i = g; i < g + k; i++) {
				struct sfs_chunk *m = &c->slots[i];
				sfs_list_del(&c->free, m);
				c->nfree--;
				m->bare = 1;
				sfs_list_add_tail(&got, m);
			}
			c->ready_bytes -= (uint64_t)k << c->chunk_shift;
			took += (uint64_t)k << c->chunk_shift;
			more = 1; /* the list changed: from its head again */
			break;
		}
	}
	if (!took)
		return 0;
	pthread_mutex_unlock(&c->lock);
	/* The group's slots are in order on @got, k at a time. */
	for (ch = got.head; ch; ch = ch->next)
		if ((size_t)(ch - c->slots) % k == 0 &&
		    madvise(ch->data, k << c->chunk_shift, MADV_DONTNEED))
			SFS_LOG(SFS_DEBUG, "cache", "madvise(DONTNEED): %s",
				strerror(errno));
	pthread_mutex_lock(&c->lock);
	while ((ch = got.head)) {
		sfs_list_del(&got, ch);
		sfs_list_add_tail(&c->bare, ch);
		c->nbare++;
	}
	return took;
}

/* When the grower looks again by itself: when the cache turns idle
 * (sfs_slab_ahead), if it is not yet, whatever is free now (slots freed
 * while it sleeps do not wake it when they are few), or when a put-off
 * give-back is due; 0: no such time (c->lock held). */
static uint64_t idle_at(const struct sfs_cache *c, uint64_t now)
{
	uint64_t at = 0;
	if (c->idle_ms && c->give_back && now - c->used_ms < c->idle_ms)
		at = c->used_ms + c->idle_ms;
	/* And a give-back put off (sfs_slab_long) is tried then. */
	if (c->shrinking && c->give_after_ms > now &&
	    (!at || c->give_after_ms < at))
		at = c->give_after_ms;
	return at;
}

static void *grower(void *arg)
{
	struct sfs_cache *c = arg;
	uint64_t want;

	/* Behind the readers: zeroing pages is not urgent. */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);

	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->stopping && !sfs_slab_short(c) &&
		       !sfs_slab_long(c)) {
			uint64_t now = sfs_now_ms(), at = idle_at(c, now);
			if (at) {
				struct timespec ts = sfs_abstime(at - now + 1);
				pthread_cond_timedwait(&c->grow_cond, &c->lock,
						       &ts);
			} else {
				pthread_cond_wait(&c->grow_cond, &c->lock);
			}
		}
		if (c->stopping)
			break;
		if ((want = sfs_slab_long(c))) {
			/* None could go (a keep lasts, or chunks in use share
			 * the huge pages): again in a second, then less often,
			 * every 30 s at most (each try scans the free list). */
			if (!give_back(c, want)) {
				c->give_retry_ms =
					c->give_retry_ms
						? SFS_MIN(2 * c->give_retry_ms,
							  30000u)
						: 1000u;
				c->give_after_ms =
					sfs_now_ms() + c->give_retry_ms;
			} else {
				c->give_retry_ms = 0;
			}
			continue;
		}
		if (c->nbare) {
			recommit(c);
			continue;
		}
		size_t k = c->next_seg++;
		c->committing++;
		pthread_mutex_unlock(&c->lock);
		uint64_t t0 = sfs_now_ms();
		int rc = seg_prepare(c, k);
		if (rc) /* its pages are of no use: none of its slots is */
			madvise(c->segs[k].base, c->segs[k].len, MADV_DONTNEED);
		pthread_mutex_lock(&c->lock);
		c->committing--;
		if (rc) {
			SFS_LOG(SFS_WARN, "cache",
				"cannot register more of the cache (%s): it "
				"stays at %zu of %zu bytes",
				strerror(-rc),
				(size_t)(c->segs[k].base - c->slab),
				c->slab_len);
			/* A reader waiting for it goes on. */
			c->grow_failed = 1;
			sfs_cache_wake(c);
			continue;
		}
		seg_publish(c, k);
		SFS_LOG(SFS_DEBUG, "cache",
			"grown to %zu of %zu bytes (a segment faulted in and "
			"registered in %" PRIu64 " ms)",
			(size_t)(c->segs[k].base - c->slab) + c->segs[k].len,
			c->slab_len, sfs_now_ms() - t0);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

int sfs_slab_start(struct sfs_cache *c)
{
	if (c->nsegs < 2)
		return 0;
	int rc = -pthread_create(&c->grower, NULL, grower, c);
	pthread_mutex_lock(&c->lock);
	c->grower_started = !rc;
	sfs_slab_want(c); /* SFS_SLAB_AHEAD from the start */
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void sfs_slab_join(struct sfs_cache *c)
{
	pthread_mutex_lock(&c->lock);
	int started = c->grower_started;
	c->grower_started = 0;
	pthread_mutex_unlock(&c->lock);
	if (started)
		pthread_join(c->grower, NULL);
}

void sfs_slab_free(struct sfs_cache *c)
{
	for (size_t k = 0; k < c->nsegs; k++)
		sfs_xport_mr_dereg(c->segs[k].mr);
	free(c->segs);
	if (c->slab)
		munmap(c->slab, c->slab_len);
}
