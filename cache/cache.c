/* SPDX-License-Identifier: MIT */
#include "cache.h"
#include "disk.h"

#include "common/log.h"
#include "common/util.h"
#include "transports/transport.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <xxhash.h>

enum chunk_state {
	CH_FREE,
	CH_LOADING, /* owned by the transport until its callback */
	CH_READY,
	CH_FAILED,
};

/* Every field is protected by c->lock, except data (fixed at init). */
struct sfs_chunk {
	struct sfs_cache *c;
	uint8_t *data; /* this slot's memory */
	uint32_t src, region;
	uint64_t idx;
	uint32_t len;
	int retried; /* a checksum mismatch was pulled again once */
	enum chunk_state state;
	int refs; /* readers pinning it */
	int err;
	uint64_t started_ms;
	int disk_op;		 /* DISK_LOAD or DISK_STORE while queued */
	struct sfs_chunk *dnext; /* disk queue */
	struct sfs_chunk *hnext; /* hash chain */
	struct sfs_chunk *prev, *next; /* LRU (READY, unpinned) or free */
};

struct cache_source {
	uint64_t peer;
	char *label;
	size_t nregions;
	struct sfs_cache_region *regions;
	/* After a failed pull the source counts as down for one timeout:
	 * pulls fail at once instead of each waiting the full bound, so a
	 * reader whose read turns into several requests still gets its
	 * error within the timeout.  Then one pull probes again. */
	uint64_t down_until_ms;	   /* protected by c->lock */
	int down_err;		   /* protected by c->lock */
	int retired;		   /* protected by c->lock: no longer served */
	struct sfs_disk_src *disk; /* protected by c->lock; NULL: memory only */
};

enum { DISK_LOAD = 1, DISK_STORE };
#define DISK_THREADS 2

struct list {
	struct sfs_chunk *head, *tail;
};

struct sfs_cache {
	struct sfs_xport *x;
	struct sfs_xport_mr *mr;
	uint8_t *slab;
	size_t slab_len;
	uint32_t chunk_size;
	unsigned int chunk_shift;
	unsigned int timeout_ms;
	int verify; /* check pulled chunks against the seed's checksums */
	int local_mr;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* any chunk changed state or was put */
	size_t nslots;
	struct sfs_chunk *slots;
	size_t nbuckets;	      /* power of two */
	struct sfs_chunk **buckets;   /* protected by lock */
	struct list lru;	      /* protected by lock */
	struct list free;	      /* protected by lock */
	size_t loading;		      /* protected by lock */
	size_t nsources, cap_sources; /* protected by lock */
	struct cache_source *sources; /* protected by lock */
	struct sfs_cache_stats st;    /* protected by lock */

	/* The disk tier: its queue is protected by lock. */
	struct sfs_disk *disk;
	pthread_cond_t disk_cond; /* the queue grew, or stop */
	struct sfs_chunk *dq_head, *dq_tail;
	size_t dq_stores; /* STOREs queued or being written */
	int stopping;	  /* protected by lock: the cache is being freed */
	size_t nthreads;
	pthread_t threads[DISK_THREADS];
};

static void *disk_thread(void *arg);

static void list_del(struct list *l, struct sfs_chunk *ch)
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
}

static void list_add_tail(struct list *l, struct sfs_chunk *ch)
{
	ch->next = NULL;
	ch->prev = l->tail;
	if (l->tail)
		l->tail->next = ch;
	else
		l->head = ch;
	l->tail = ch;
}

static size_t bucket_of(const struct sfs_cache *c, uint32_t src,
			uint32_t region, uint64_t idx)
{
	uint64_t h = idx * 0x9e3779b97f4a7c15ull;
	h ^= ((uint64_t)src << 32 | region) * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 29;
	return (size_t)(h & (c->nbuckets - 1));
}

static struct sfs_chunk *lookup(struct sfs_cache *c, uint32_t src,
				uint32_t region, uint64_t idx)
{
	struct sfs_chunk *ch = c->buckets[bucket_of(c, src, region, idx)];
	while (ch &&
	       !(ch->idx == idx && ch->region == region && ch->src == src))
		ch = ch->hnext;
	return ch;
}

static void unhash(struct sfs_cache *c, struct sfs_chunk *ch)
{
	struct sfs_chunk **pp =
		&c->buckets[bucket_of(c, ch->src, ch->region, ch->idx)];
	while (*pp != ch)
		pp = &(*pp)->hnext;
	*pp = ch->hnext;
	ch->hnext = NULL;
}

/* A chunk nobody pins any more goes to the LRU, or is freed if failed. */
static void settle(struct sfs_cache *c, struct sfs_chunk *ch)
{
	if (ch->refs || ch->state == CH_LOADING)
		return;
	if (ch->state == CH_READY) {
		list_add_tail(&c->lru, ch);
	} else {
		unhash(c, ch);
		ch->state = CH_FREE;
		list_add_tail(&c->free, ch);
	}
	pthread_cond_broadcast(&c->cond);
}

#define HUGE_PAGE (2u << 20)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/*
 * The slab: aligned to 2 MiB, in transparent huge pages where the
 * kernel allows, and faulted in before the mount is ready.  Pulling into
 * memory touched for the first time was measured here at 1/2 (tcp) to
 * 1/10 (shm) of the throughput into faulted memory, and huge pages fault
 * in faster; the mount pays for it instead (a 2 GiB cache: mount
 * in 0.65-2.5 s, against 0.4 s with 64 MiB).
 */
static int map_slab(struct sfs_cache *c)
{
	size_t len = c->slab_len + HUGE_PAGE;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
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
	/* Fault it all in now rather than on the pull path (Linux 5.14+;
	 * else touch each page). */
	if (madvise(c->slab, c->slab_len, MADV_POPULATE_WRITE))
		for (size_t o = 0; o < c->slab_len; o += 4096)
			c->slab[o] = 0;
	return 0;
}

int sfs_cache_new(const struct sfs_cache_cfg *cfg, struct sfs_cache **out,
		  char *err, size_t errlen)
{
	struct sfs_xport_info info;
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
	c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 10000;
	c->verify = !cfg->no_verify;
	c->nslots = cfg->size / cfg->chunk_size;
	c->slab_len = c->nslots * (size_t)cfg->chunk_size;
	pthread_mutex_init(&c->lock, NULL);
	if ((rc = sfs_cond_init(&c->cond)))
		goto err_free;
	if ((rc = sfs_cond_init(&c->disk_cond)))
		goto err_free;
	c->nbuckets = 1;
	while (c->nbuckets < 2 * c->nslots)
		c->nbuckets <<= 1;
	c->slots = calloc(c->nslots, sizeof(c->slots[0]));
	c->buckets = calloc(c->nbuckets, sizeof(c->buckets[0]));
	rc = -ENOMEM;
	if (!c->slots || !c->buckets)
		goto err_free;
	if ((rc = map_slab(c))) {
		snprintf(err, errlen, "cache: cannot map %zu bytes: %s",
			 c->slab_len, strerror(-rc));
		goto err_free;
	}
	sfs_xport_info(c->x, &info);
	c->local_mr = info.local_mr;
	rc = sfs_xport_mr_reg(c->x, c->slab, c->slab_len, SFS_XPORT_LOCAL_DST,
			      &c->mr);
	if (rc) {
		snprintf(err, errlen, "cache: cannot register %zu bytes: %s",
			 c->slab_len, strerror(-rc));
		goto err_unmap;
	}
	for (size_t i = 0; i < c->nslots; i++) {
		struct sfs_chunk *ch = &c->slots[i];
		ch->c = c;
		ch->data = c->slab + i * (size_t)c->chunk_size;
		list_add_tail(&c->free, ch);
	}
	c->st.size = c->slab_len;
	c->st.chunk_size = c->chunk_size;
	c->disk = cfg->disk;
	for (size_t i = 0; c->disk && i < DISK_THREADS; i++) {
		if ((rc = -pthread_create(&c->threads[i], NULL, disk_thread,
					  c))) {
			snprintf(err, errlen, "cache: disk thread: %s",
				 strerror(-rc));
			goto err_free; /* no chunk is in use yet */
		}
		c->nthreads++;
	}
	*out = c;
	return 0;

err_unmap:
	munmap(c->slab, c->slab_len);
	c->slab = NULL;
err_free:
	sfs_cache_free(c);
	return rc;
}

void sfs_cache_free(struct sfs_cache *c)
{
	if (!c)
		return;
	/* The disk threads first: they may start pulls. */
	pthread_mutex_lock(&c->lock);
	c->stopping = 1;
	pthread_cond_broadcast(&c->disk_cond);
	pthread_mutex_unlock(&c->lock);
	for (size_t i = 0; i < c->nthreads; i++)
		pthread_join(c->threads[i], NULL);
	/* Pulls in flight write into the slab: let them finish first. */
	pthread_mutex_lock(&c->lock);
	struct timespec until = sfs_abstime(c->timeout_ms);
	while (c->loading &&
	       pthread_cond_timedwait(&c->cond, &c->lock, &until) == 0)
		;
	size_t left = c->loading;
	pthread_mutex_unlock(&c->lock);
	if (left) {
		/* The transport still owns that memory: leak it rather than
		 * free what may be written.  sfs_xport_close cancels them. */
		SFS_LOG(SFS_WARN, "cache",
			"%zu pulls still in flight at shutdown", left);
		return;
	}
	sfs_xport_mr_dereg(c->mr);
	if (c->slab)
		munmap(c->slab, c->slab_len);
	for (size_t i = 0; i < c->nsources; i++) {
		free(c->sources[i].label);
		free(c->sources[i].regions);
	}
	free(c->sources);
	free(c->slots);
	free(c->buckets);
	pthread_cond_destroy(&c->disk_cond);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int sfs_cache_add_source(struct sfs_cache *c, uint64_t peer, const char *label,
			 const struct sfs_cache_region *r, size_t n,
			 uint32_t *src)
{
	struct cache_source s = {.peer = peer, .nregions = n};
	int rc = -ENOMEM;

	for (size_t i = 0; i < n; i++)
		if (r[i].xxh3 && r[i].csum_shift > c->chunk_shift)
			return -EINVAL;

	s.label = strdup(label);
	s.regions = malloc((n ? n : 1) * sizeof(*r));
	if (!s.label || !s.regions)
		goto err;
	memcpy(s.regions, r, n * sizeof(*r));
	pthread_mutex_lock(&c->lock);
	rc = sfs_grow((void **)&c->sources, &c->cap_sources, c->nsources + 1,
		      sizeof(c->sources[0]));
	if (!rc) {
		*src = (uint32_t)c->nsources;
		c->sources[c->nsources++] = s;
	}
	pthread_mutex_unlock(&c->lock);
	if (!rc)
		return 0;
err:
	free(s.label);
	free(s.regions);
	return rc;
}

/* Record a failed pull of @s (c->lock held); logs once per outage. */
static void source_failed(struct sfs_cache *c, struct cache_source *s, int err)
{
	if (err == -ECANCELED)
		return;
	if (!s->down_until_ms)
		SFS_LOG(SFS_WARN, "cache",
			"%s is unreachable (%s): reads that need it fail "
			"until a pull succeeds; retrying every %u ms",
			s->label, strerror(-err), c->timeout_ms);
	s->down_until_ms = sfs_now_ms() + c->timeout_ms;
	s->down_err = err;
}

static void source_ok(struct sfs_cache *c, struct cache_source *s)
{
	if (s->down_until_ms)
		SFS_LOG(SFS_INFO, "cache", "%s is reachable again", s->label);
	s->down_until_ms = 0;
}

/* 0 when every checksum chunk of @ch matches the seed's, else -EBADMSG
 * (logged unless @quiet).  Runs outside the lock: the slot is owned by
 * the pull until READY. */
static int verify(struct sfs_cache *c, struct sfs_chunk *ch,
		  const struct sfs_cache_region *r, int quiet)
{
	if (!r->xxh3)
		return 0;
	uint64_t cs = 1ull << r->csum_shift;
	uint64_t base = ch->idx << c->chunk_shift;
	for (uint64_t o = 0; o < ch->len; o += cs) {
		size_t n = (size_t)SFS_MIN(cs, ch->len - o);
		if (XXH3_64bits(ch->data + o, n) !=
		    r->xxh3[(base + o) >> r->csum_shift]) {
			if (quiet)
				return -EBADMSG;
			SFS_LOG(SFS_WARN, "cache",
				"checksum mismatch: region %u bytes [%" PRIu64
				", +%zu) from %s",
				ch->region, base + o, n,
				c->sources[ch->src].label);
			return -EBADMSG;
		}
	}
	return 0;
}

/* Hand @ch to a disk thread (c->lock held). */
static void disk_queue(struct sfs_cache *c, struct sfs_chunk *ch, int op)
{
	ch->disk_op = op;
	ch->dnext = NULL;
	if (c->dq_tail)
		c->dq_tail->dnext = ch;
	else
		c->dq_head = ch;
	c->dq_tail = ch;
	pthread_cond_signal(&c->disk_cond);
}

/*
 * Write a freshly pulled @ch to the disk tier behind the readers: it
 * stays pinned until written.  When the disk falls behind by a quarter
 * of the cache, chunks are not stored rather than pin the cache full.
 * Called with c->lock held.
 */
static void store_later(struct sfs_cache *c, struct sfs_chunk *ch)
{
	if (c->dq_stores >= c->nslots / 4 || c->stopping) {
		c->st.disk_skipped++;
		return;
	}
	ch->refs++;
	c->dq_stores++;
	disk_queue(c, ch, DISK_STORE);
}

static void on_pulled(void *arg, int status)
{
	struct sfs_chunk *ch = arg;
	struct sfs_cache *c = ch->c;

	if (!status) {
		pthread_mutex_lock(&c->lock);
		const struct sfs_cache_region r =
			c->sources[ch->src].regions[ch->region];
		pthread_mutex_unlock(&c->lock);
		if (c->verify && (status = verify(c, ch, &r, 0))) {
			pthread_mutex_lock(&c->lock);
			c->st.checksum_errors++;
			pthread_mutex_unlock(&c->lock);
		}
	}
	pthread_mutex_lock(&c->lock);
	c->loading--;
	if (status) {
		const struct cache_source *s = &c->sources[ch->src];
		SFS_LOG(SFS_WARN, "cache",
			"pull of region %u bytes [%" PRIu64 ", +%u) from %s "
			"failed: %s",
			ch->region, ch->idx << c->chunk_shift, ch->len,
			s->label, strerror(-status));
		ch->state = CH_FAILED;
		ch->err = status;
		c->st.errors++;
		/* Wrong bytes came from a live seed: not an outage. */
		if (status != -EBADMSG)
			source_failed(c, &c->sources[ch->src], status);
	} else {
		source_ok(c, &c->sources[ch->src]);
		ch->state = CH_READY;
		c->st.pulls++;
		c->st.bytes_pulled += ch->len;
		const struct cache_source *s = &c->sources[ch->src];
		if (s->disk && s->regions[ch->region].xxh3)
			store_later(c, ch);
	}
	settle(c, ch);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* A free slot, else the least recently used unpinned chunk, or NULL.
 * Called with c->lock held. */
static struct sfs_chunk *take_slot(struct sfs_cache *c)
{
	struct sfs_chunk *ch = c->free.head;
	if (ch) {
		list_del(&c->free, ch);
		return ch;
	}
	ch = c->lru.head;
	if (ch) {
		list_del(&c->lru, ch);
		unhash(c, ch);
		ch->state = CH_FREE;
	}
	return ch;
}

/*
 * Start the pull of @ch (hashed, not yet LOADING).  Called with c->lock
 * held; drops it to post.  Returns 0, or the post's error with @ch
 * FAILED.
 */
static int post_pull(struct sfs_cache *c, struct sfs_chunk *ch)
{
	const struct cache_source *s = &c->sources[ch->src];
	const struct sfs_cache_region *r = &s->regions[ch->region];
	uint64_t off = ch->idx << c->chunk_shift;
	struct sfs_xport_rd rd = {.local = ch->data,
				  .lmr = c->mr,
				  .raddr = r->raddr + off,
				  .rkey = r->key,
				  .len = ch->len};
	uint64_t peer = s->peer;

	ch->state = CH_LOADING;
	ch->err = 0;
	ch->started_ms = sfs_now_ms();
	c->loading++;
	pthread_mutex_unlock(&c->lock);
	int prc = sfs_xport_read(c->x, peer, &rd, 1, on_pulled, ch);
	pthread_mutex_lock(&c->lock);
	if (prc) {
		SFS_LOG(SFS_WARN, "cache",
			"cannot pull region %u bytes [%" PRIu64 ", +%u) from "
			"%s: %s",
			ch->region, off, ch->len, c->sources[ch->src].label,
			strerror(-prc));
		c->loading--;
		ch->state = CH_FAILED;
		ch->err = prc;
		c->st.errors++;
		source_failed(c, &c->sources[ch->src], prc);
		pthread_cond_broadcast(&c->cond);
	}
	return prc;
}

/* A disk thread looks for @ch on disk; if it is not there (or not
 * these bytes), it is pulled.  Called with c->lock held; drops it. */
static void disk_load(struct sfs_cache *c, struct sfs_chunk *ch)
{
	const struct cache_source *s = &c->sources[ch->src];
	const struct sfs_cache_region r = s->regions[ch->region];
	struct sfs_disk_src *d = s->disk;
	uint64_t off = ch->idx << c->chunk_shift;

	pthread_mutex_unlock(&c->lock);
	int rc = sfs_disk_read(d, ch->region, off, ch->data, ch->len);
	if (!rc)
		rc = verify(c, ch, &r, 1);
	pthread_mutex_lock(&c->lock);
	if (!rc) {
		ch->state = CH_READY;
		c->st.disk_hits++;
		c->st.disk_bytes_read += ch->len;
		settle(c, ch);
		pthread_cond_broadcast(&c->cond);
		return;
	}
	if (rc != -ENOENT && rc != -ENODATA && rc != -EBADMSG) {
		c->st.disk_errors++;
		SFS_LOG(SFS_WARN, "cache",
			"disk tier: reading region %u bytes [%" PRIu64
			", +%u): %s; pulling them",
			ch->region, off, ch->len, strerror(-rc));
	}
	if (post_pull(c, ch))
		settle(c, ch);
}

static void disk_store(struct sfs_cache *c, struct sfs_chunk *ch)
{
	struct sfs_disk_src *d = c->sources[ch->src].disk;

	pthread_mutex_unlock(&c->lock);
	int rc = sfs_disk_write(d, ch->region, ch->idx << c->chunk_shift,
				ch->data, ch->len);
	pthread_mutex_lock(&c->lock);
	c->dq_stores--;
	if (!rc) {
		c->st.disk_stores++;
		c->st.disk_bytes_written += ch->len;
	} else if (rc == -ENOSPC || rc == -ESTALE) {
		c->st.disk_skipped++; /* full (logged once), or retired */
	} else {
		c->st.disk_errors++;
		SFS_LOG(SFS_WARN, "cache",
			"disk tier: writing region %u chunk %" PRIu64 ": %s",
			ch->region, ch->idx, strerror(-rc));
	}
	ch->refs--;
	settle(c, ch);
}

static void *disk_thread(void *arg)
{
	struct sfs_cache *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->stopping) {
		struct sfs_chunk *ch = c->dq_head;
		if (!ch) {
			/* Idle until there is work: no reader waits here. */
			pthread_cond_wait(&c->disk_cond, &c->lock);
			continue;
		}
		c->dq_head = ch->dnext;
		if (!c->dq_head)
			c->dq_tail = NULL;
		if (ch->disk_op == DISK_LOAD)
			disk_load(c, ch);
		else
			disk_store(c, ch);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/*
 * Find or start the chunk @idx of (src, region).  With @pin the caller
 * gets a reference.  Called with c->lock held; may drop it to post the
 * read.  Returns the chunk or NULL (*rc set).
 */
static struct sfs_chunk *find_or_pull(struct sfs_cache *c, uint32_t src,
				      uint32_t region, uint64_t idx, int pin,
				      int *rc)
{
	struct cache_source *s = &c->sources[src];
	/* regions[] is its own allocation: stable while the cache lives. */
	const struct sfs_cache_region *r = &s->regions[region];
	uint64_t deadline = sfs_now_ms() + c->timeout_ms;
	struct sfs_chunk *ch;

	ch = lookup(c, src, region, idx);
	if (!ch && s->down_until_ms) {
		if (sfs_now_ms() < s->down_until_ms) {
			c->st.errors += pin;
			*rc = s->down_err;
			return NULL;
		}
		/* This pull is the probe; others keep failing fast. */
		s->down_until_ms = sfs_now_ms() + c->timeout_ms;
	}

	/* Waiting for a slot drops the lock: look the chunk up again
	 * after every wait, someone may have started it meanwhile. */
	while (!(ch = lookup(c, src, region, idx)) && !(ch = take_slot(c))) {
		uint64_t now = sfs_now_ms();
		if (now >= deadline || !pin) {
			if (pin)
				SFS_LOG(SFS_WARN, "cache",
					"no free chunk within %u ms: every "
					"chunk is pinned or loading",
					c->timeout_ms);
			c->st.timeouts += pin;
			*rc = -ETIMEDOUT;
			return NULL;
		}
		struct timespec ts = sfs_abstime(deadline - now);
		pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	}
	/* The wait dropped the lock: sources may have been reallocated. */
	s = &c->sources[src];
	if (ch->state != CH_FREE) { /* found in the hash */
		if (pin) {
			if (ch->refs == 0 && ch->state == CH_READY)
				list_del(&c->lru, ch);
			ch->refs++;
		}
		return ch;
	}
	uint64_t off = idx << c->chunk_shift;
	ch->src = src;
	ch->region = region;
	ch->idx = idx;
	ch->len = (uint32_t)SFS_MIN((uint64_t)c->chunk_size, r->len - off);
	ch->retried = 0;
	ch->refs = pin ? 1 : 0;
	size_t b = bucket_of(c, src, region, idx);
	ch->hnext = c->buckets[b];
	c->buckets[b] = ch;
	if (s->disk && r->xxh3) { /* it may be on disk already */
		ch->state = CH_LOADING;
		ch->err = 0;
		ch->started_ms = sfs_now_ms();
		disk_queue(c, ch, DISK_LOAD);
		return ch;
	}
	int prc = post_pull(c, ch);
	if (prc) {
		if (!pin)
			settle(c, ch);
		*rc = prc;
		return pin ? ch : NULL;
	}
	return ch;
}

static int check_range(struct sfs_cache *c, uint32_t src, uint32_t region,
		       uint64_t off)
{
	if (src >= c->nsources || region >= c->sources[src].nregions ||
	    off >= c->sources[src].regions[region].len)
		return -EINVAL;
	return c->sources[src].retired ? -ESTALE : 0;
}

int sfs_cache_persist_source(struct sfs_cache *c, uint32_t src, const char *key,
			     const char *about)
{
	struct sfs_disk_src *d;

	if (!c->disk)
		return 0;
	pthread_mutex_lock(&c->lock);
	size_t n = src < c->nsources ? c->sources[src].nregions : 0;
	int known = src < c->nsources;
	pthread_mutex_unlock(&c->lock);
	if (!known)
		return -EINVAL;
	int rc = sfs_disk_attach(c->disk, key, about, n, &d);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	c->sources[src].disk = d;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

void sfs_cache_retire_source(struct sfs_cache *c, uint32_t src)
{
	struct sfs_disk_src *d = NULL;

	pthread_mutex_lock(&c->lock);
	if (src < c->nsources) {
		c->sources[src].retired = 1;
		d = c->sources[src].disk;
		/* Its unpinned chunks are of no use to anyone now. */
		for (struct sfs_chunk *ch = c->lru.head, *next; ch; ch = next) {
			next = ch->next;
			if (ch->src == src) {
				list_del(&c->lru, ch);
				unhash(c, ch);
				ch->state = CH_FREE;
				list_add_tail(&c->free, ch);
			}
		}
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
	/* Nobody will read these bytes again: not from disk either. */
	sfs_disk_drop(d);
}

int sfs_cache_prefetch(struct sfs_cache *c, uint32_t src, uint32_t region,
		       uint64_t off, uint64_t len)
{
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	if (check_range(c, src, region, off) || len == 0) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	uint64_t rlen = c->sources[src].regions[region].len;
	uint64_t last = (SFS_MIN(off + len, rlen) - 1) >> c->chunk_shift;
	for (uint64_t i = off >> c->chunk_shift; i <= last && !rc; i++)
		if (!find_or_pull(c, src, region, i, 0, &rc) && rc)
			break;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int sfs_cache_get(struct sfs_cache *c, uint32_t src, uint32_t region,
		  uint64_t off, struct sfs_chunk **out, const uint8_t **data,
		  size_t *avail)
{
	struct sfs_chunk *ch;
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	if ((rc = check_range(c, src, region, off))) {
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	ch = find_or_pull(c, src, region, off >> c->chunk_shift, 1, &rc);
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
	for (;;) {
		/* Bounded from when the pull started, not from when we
		 * came. */
		uint64_t deadline = ch->started_ms + c->timeout_ms;
		while (ch->state == CH_LOADING) {
			uint64_t now = sfs_now_ms();
			if (now >= deadline)
				break;
			struct timespec ts = sfs_abstime(deadline - now);
			pthread_cond_timedwait(&c->cond, &c->lock, &ts);
		}
		/* Bytes that did not match: pull them once more. */
		if (ch->state != CH_FAILED || ch->err != -EBADMSG ||
		    ch->retried)
			break;
		ch->retried = 1;
		SFS_LOG(SFS_INFO, "cache",
			"pulling region %u chunk %" PRIu64 " again after a "
			"checksum mismatch",
			region, ch->idx);
		post_pull(c, ch);
	}
	if (ch->state == CH_READY) {
		uint64_t in = off - (ch->idx << c->chunk_shift);
		*out = ch;
		*data = ch->data + in;
		*avail = ch->len - in;
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	if (ch->state == CH_LOADING) {
		SFS_LOG(SFS_WARN, "cache",
			"pull of region %u chunk %" PRIu64 " from %s did not "
			"finish within %u ms",
			region, ch->idx, c->sources[src].label, c->timeout_ms);
		c->st.timeouts++;
		rc = -ETIMEDOUT;
		source_failed(c, &c->sources[src], rc);
	} else {
		rc = ch->err ? ch->err : -EIO;
	}
	ch->refs--;
	settle(c, ch);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void sfs_cache_put(struct sfs_cache *c, struct sfs_chunk *ch)
{
	if (!ch)
		return;
	pthread_mutex_lock(&c->lock);
	ch->refs--;
	settle(c, ch);
	pthread_mutex_unlock(&c->lock);
}

void sfs_cache_stats(struct sfs_cache *c, struct sfs_cache_stats *st)
{
	pthread_mutex_lock(&c->lock);
	*st = c->st;
	size_t nfree = 0;
	for (struct sfs_chunk *ch = c->free.head; ch; ch = ch->next)
		nfree++;
	st->used = (c->nslots - nfree) * (uint64_t)c->chunk_size;
	st->disk_queue = c->dq_stores;
	st->disk_tier = c->disk != NULL;
	st->sources_down = 0;
	for (size_t i = 0; i < c->nsources; i++)
		st->sources_down += c->sources[i].down_until_ms != 0;
	pthread_mutex_unlock(&c->lock);
}

uint64_t sfs_cache_resident(struct sfs_cache *c, uint32_t src, uint32_t region,
			    uint64_t off, uint64_t len)
{
	uint64_t got = 0;
	if (!len)
		return 0;
	uint64_t end = off + len;
	pthread_mutex_lock(&c->lock);
	for (uint64_t i = off >> c->chunk_shift;
	     i <= (end - 1) >> c->chunk_shift; i++) {
		const struct sfs_chunk *ch = lookup(c, src, region, i);
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
