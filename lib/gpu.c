/* SPDX-License-Identifier: MIT */
/*
 * gpu.c - reads into CUDA device memory through a page-locked stage
 * (gpu.h).  A read is cut into pieces that fill one part of the stage;
 * the pieces of a part are pulled at once and verified on the host, the
 * verified ones copied to the device, and the next part pulled while
 * those copies run.  A part is written again only after its copies
 * have ended.
 *
 * A stage is set aside (retired), never used again, when a read into it
 * timed out (the transport may still write into it) or when the driver
 * failed a copy, a mark or a wait (its copies are in an unknown state);
 * every read of that call not known to be on the device then fails.  It
 * is taken off its device (a new one takes its place) before its lock
 * is let go, so a read that waited on that lock finds it set aside and
 * takes the new stage; such a read never fails because of another's
 * setting aside, only when its own wait for a stage outlasts the
 * timeout.  A stage set aside is freed once the transport has let go
 * of it and no read holds it, at the latest when the client closes; at
 * most GPU_RETIRED_MAX wait for the transport so.
 *
 * Lock order: a stage's lock, then g->lock.
 */
#include "lib/gpu.h"

#include "cache/cache.h"
#include "common/log.h"
#include "transports/hmem.h"
#include "transports/transport.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GPU_DEVICES_MAX 64
#define GPU_PART (16u << 20)
#define GPU_PARTS 2
#define GPU_PIECES 256	  /* pieces in one part at most */
#define GPU_RETIRED_MAX 4 /* stages set aside the transport still holds */

struct gpu_stage {
	int dev;
	pthread_mutex_t lock; /* one read at a time */
	int retired;	      /* protected by s->lock */
	struct sfs_hmem_stage *hs;
	uint8_t *base;
	struct sfs_xport_mr *mr;
	struct sfs_cache_dst *dst;
	int users;		/* reads holding it; protected by g->lock */
	int listed;		/* on g->retired; protected by g->lock */
	struct gpu_stage *next; /* on g->retired; protected by g->lock */
};

struct sfs_gpu {
	struct sfs_cache *cache;
	struct sfs_xport *x;
	uint64_t align;
	unsigned int timeout_ms;
	pthread_mutex_t lock;
	struct gpu_stage *st[GPU_DEVICES_MAX]; /* protected by g->lock */
	/* Stages set aside: freed when no read holds them and the
	 * transport has let go.  protected by g->lock */
	struct gpu_stage *retired;
	int stopped; /* protected by g->lock */
};

int sfs_gpu_new(struct sfs_cache *cache, struct sfs_xport *x, uint64_t align,
		unsigned int timeout_ms, struct sfs_gpu **out)
{
	struct sfs_gpu *g = calloc(1, sizeof(*g));

	*out = NULL;
	if (!g)
		return -ENOMEM;
	g->cache = cache;
	g->x = x;
	g->align = align ? align : 1;
	g->timeout_ms = timeout_ms ? timeout_ms : 10000;
	pthread_mutex_init(&g->lock, NULL);
	*out = g;
	return 0;
}

static void stage_free(struct gpu_stage *s)
{
	if (!s)
		return;
	sfs_hmem_stage_free(s->hs);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Deregister and free @s: 0, or -EBUSY when a timed-out read may still
 * write into it: then nothing is done. */
static int stage_stop(struct gpu_stage *s)
{
	if (s->dst && sfs_cache_dst_busy(s->dst))
		return -EBUSY;
	if (s->dst && sfs_cache_dst_free(s->dst))
		return -EBUSY; /* cannot happen: busy only goes to 0 */
	sfs_xport_mr_dereg(s->mr);
	stage_free(s);
	return 0;
}

static int stage_new(struct sfs_gpu *g, int dev, struct gpu_stage **out,
		     char *err, size_t errlen)
{
	struct gpu_stage *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->dev = dev;
	pthread_mutex_init(&s->lock, NULL);
	if ((rc = sfs_hmem_stage_new(dev, GPU_PART, GPU_PARTS, g->timeout_ms,
				     &s->hs, err, errlen)))
		goto err_free;
	s->base = sfs_hmem_stage_base(s->hs);
	if ((rc = sfs_xport_mr_reg(g->x, s->base, (size_t)GPU_PART * GPU_PARTS,
				   SFS_XPORT_LOCAL_DST, &s->mr))) {
		snprintf(err, errlen,
			 "cannot register the stage of CUDA device %d: %s", dev,
			 strerror(-rc));
		goto err_free;
	}
	if ((rc = sfs_cache_dst_new(g->cache, s->base,
				    (size_t)GPU_PART * GPU_PARTS, s->mr,
				    &s->dst))) {
		snprintf(err, errlen, "out of memory");
		goto err_mr;
	}
	SFS_LOG(SFS_INFO, "gpu", "CUDA device %d: a stage of %u x %u MiB", dev,
		GPU_PARTS, GPU_PART >> 20);
	*out = s;
	return 0;

err_mr:
	sfs_xport_mr_dereg(s->mr);
err_free:
	stage_free(s);
	return rc;
}

/* Unlink the set-aside stages that can go now into *@out (g->lock
 * held): freed by the caller, outside the lock. */
static void reclaim(struct sfs_gpu *g, struct gpu_stage **out)
{
	struct gpu_stage **pp = &g->retired;
	while (*pp) {
		struct gpu_stage *s = *pp;
		if (s->dst && !s->users && !sfs_cache_dst_busy(s->dst)) {
			*pp = s->next;
			s->listed = 0;
			s->next = *out;
			*out = s;
		} else {
			pp = &s->next;
		}
	}
}

static void free_list(struct gpu_stage *s)
{
	while (s) {
		struct gpu_stage *next = s->next;
		if (stage_stop(s))
			SFS_LOG(SFS_WARN, "gpu", "a stage still busy: kept");
		s = next;
	}
}

/* Set-aside stages the transport still writes into (g->lock held). */
static int held_by_transport(struct sfs_gpu *g)
{
	int n = 0;
	for (struct gpu_stage *s = g->retired; s; s = s->next)
		n += s->dst && sfs_cache_dst_busy(s->dst);
	return n;
}

/* Device @dev's stage, made if needed, held (users) until stage_put;
 * NULL and a line in @err. */
static struct gpu_stage *stage_of(struct sfs_gpu *g, int dev, int *rc,
				  char *err, size_t errlen)
{
	struct gpu_stage *s = NULL, *gone = NULL;
	int held;

	if (dev < 0 || dev >= GPU_DEVICES_MAX) {
		snprintf(err, errlen, "CUDA device %d: at most %d devices", dev,
			 GPU_DEVICES_MAX);
		*rc = -EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&g->lock);
	reclaim(g, &gone);
	if (g->stopped) {
		snprintf(err, errlen, "the client is closing");
		*rc = -ESHUTDOWN;
	} else if (!(s = g->st[dev]) &&
		   (held = held_by_transport(g)) >= GPU_RETIRED_MAX) {
		snprintf(err, errlen,
			 "CUDA device %d: %d stages set aside after timed-out "
			 "reads are still held by the transport",
			 dev, held);
		*rc = -EBUSY;
	} else if (!s && !(*rc = stage_new(g, dev, &s, err, errlen))) {
		g->st[dev] = s;
	}
	if (s)
		s->users++;
	pthread_mutex_unlock(&g->lock);
	free_list(gone);
	return s;
}

static void stage_put(struct sfs_gpu *g, struct gpu_stage *s)
{
	pthread_mutex_lock(&g->lock);
	s->users--;
	pthread_mutex_unlock(&g->lock);
}

int sfs_gpu_prepare(struct sfs_gpu *g, int dev, char *err, size_t errlen)
{
	int rc = 0;
	struct gpu_stage *s = stage_of(g, dev, &rc, err, errlen);
	if (s)
		stage_put(g, s);
	return s ? 0 : rc;
}

/* @s is used no more: taken off its device and listed once.  Called
 * with s->lock held, so that a read waiting on that lock finds another
 * stage in its place. */
static void stage_retire(struct sfs_gpu *g, struct gpu_stage *s, int rc)
{
	int first = 0;
	pthread_mutex_lock(&g->lock);
	if (g->st[s->dev] == s)
		g->st[s->dev] = NULL;
	if (!s->listed) {
		s->listed = first = 1;
		s->next = g->retired;
		g->retired = s;
	}
	pthread_mutex_unlock(&g->lock);
	if (first)
		SFS_LOG(SFS_WARN, "gpu",
			"CUDA device %d: its stage is set aside (%s): a new one "
			"takes its place",
			s->dev,
			rc == -ETIMEDOUT ? "a read timed out"
					 : "a driver error");
}

struct gpu_batch {
	struct sfs_cache_rd pc[GPU_PIECES];
	size_t owner[GPU_PIECES]; /* the read a piece is of */
	uint64_t at[GPU_PIECES];  /* its offset in that read */
	size_t n;
};

/* Pieces of the reads of device @dev from (*i, *o) on into part @part:
 * whole reads where they fit, else cut on an @align boundary of the
 * file where one falls inside. */
static void fill(struct sfs_gpu *g, struct gpu_stage *s, unsigned int part,
		 struct sfs_cache_rd *rds, const int *devs, size_t n, size_t *i,
		 uint64_t *o, struct gpu_batch *b)
{
	uint8_t *p = s->base + (size_t)part * GPU_PART;
	uint64_t used = 0;

	b->n = 0;
	while (*i < n && b->n < GPU_PIECES && used < GPU_PART) {
		struct sfs_cache_rd *r = &rds[*i];
		if (devs[*i] != s->dev || r->status || r->len == *o) {
			(*i)++;
			*o = 0;
			continue;
		}
		uint64_t left = r->len - *o, take = left;
		if (take > GPU_PART - used) {
			uint64_t end = r->off + *o + (GPU_PART - used);
			uint64_t cut = end - end % g->align;
			take = cut > r->off + *o ? cut - (r->off + *o)
						 : GPU_PART - used;
		}
		b->pc[b->n] = (struct sfs_cache_rd){.set = r->set,
						    .obj = r->obj,
						    .off = r->off + *o,
						    .len = take,
						    .to = p + used,
						    .dst = s->dst};
		b->owner[b->n] = *i;
		b->at[b->n] = *o;
		b->n++;
		used += take;
		*o += take;
	}
}

/* Pull one part's pieces; copy the verified ones; mark the part.
 * -ETIMEDOUT when a piece timed out, -EIO (a line in @e) when the
 * part's copies cannot be known to end. */
static int pull_part(struct sfs_gpu *g, struct gpu_stage *s, unsigned int part,
		     struct gpu_batch *b, struct sfs_cache_rd *rds, char *err,
		     size_t errlen, char *e, size_t elen)
{
	int timed_out = 0;

	sfs_cache_read_into(g->cache, b->pc, b->n, 0);
	for (size_t j = 0; j < b->n; j++) {
		struct sfs_cache_rd *pc = &b->pc[j], *r = &rds[b->owner[j]];
		if (pc->status == -ETIMEDOUT)
			timed_out = 1;
		if (r->status)
			continue;
		if (pc->status) {
			r->status = pc->status;
			continue;
		}
		char ce[256];
		int rc = sfs_hmem_stage_copy(s->hs, r->to + b->at[j], pc->to,
					     pc->len, ce, sizeof(ce));
		if (rc) {
			r->status = rc;
			if (err[0] == '\0')
				snprintf(err, errlen, "%s", ce);
		}
	}
	if (sfs_hmem_stage_mark(s->hs, part, e, elen)) {
		/* Nothing would tell when this part's copies end: wait for
		 * every copy now. */
		SFS_LOG(SFS_WARN, "gpu", "%s", e);
		int rc = sfs_hmem_stage_sync(s->hs, e, elen);
		if (rc)
			return rc;
	}
	return timed_out ? -ETIMEDOUT : 0;
}

/* Wait for part @part's copies; when the driver cannot tell (not a
 * timeout), for every copy of the stream instead.  0, or the error:
 * then the copies are in an unknown state. */
static int wait_part(struct gpu_stage *s, unsigned int part, char *e,
		     size_t elen)
{
	int rc = sfs_hmem_stage_wait(s->hs, part, e, elen);
	if (rc && rc != -ETIMEDOUT) {
		SFS_LOG(SFS_WARN, "gpu", "%s", e);
		rc = sfs_hmem_stage_sync(s->hs, e, elen);
	}
	return rc;
}

/* The timeout from now, on CLOCK_REALTIME (pthread_mutex_timedlock's). */
static struct timespec deadline_of(struct sfs_gpu *g)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += g->timeout_ms / 1000;
	ts.tv_nsec += (long)(g->timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

/* Device @dev's stage, locked, within the timeout from now: one that is
 * set aside while this read waits for it is let go and its successor
 * taken, as often as that happens within the timeout.  NULL, @rc and a
 * line in @e when there is none (stage_of's errors) or the wait
 * outlasted the timeout (-ETIMEDOUT). */
static struct gpu_stage *stage_lock(struct sfs_gpu *g, int dev, int *rc,
				    char *e, size_t elen)
{
	struct timespec deadline = deadline_of(g);
	struct gpu_stage *s;

	for (;;) {
		if (!(s = stage_of(g, dev, rc, e, elen)))
			return NULL;
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		int late = now.tv_sec > deadline.tv_sec ||
			   (now.tv_sec == deadline.tv_sec &&
			    now.tv_nsec >= deadline.tv_nsec);
		/* (A free mutex is taken past the deadline too.) */
		if (late ||
		    (*rc = -pthread_mutex_timedlock(&s->lock, &deadline))) {
			*rc = -ETIMEDOUT;
			snprintf(e, elen,
				 "CUDA device %d: other reads held its stage "
				 "for the timeout (%u ms)",
				 dev, g->timeout_ms);
			stage_put(g, s);
			return NULL;
		}
		if (!s->retired)
			return s;
		/* Set aside while this read waited: it is off the device
		 * already, so stage_of gives its successor. */
		pthread_mutex_unlock(&s->lock);
		stage_put(g, s);
	}
}

/* Every read of device @dev, through its stage. */
static void read_dev(struct sfs_gpu *g, int dev, struct sfs_cache_rd *rds,
		     const int *devs, size_t n, char *err, size_t errlen)
{
	struct gpu_batch *b = malloc(sizeof(*b));
	struct gpu_stage *s = NULL;
	size_t i = 0;
	uint64_t o = 0;
	unsigned int part = 0;
	int rc = 0, lost = 0; /* lost: copies in an unknown state */
	char e[256] = "";

	if (b)
		s = stage_lock(g, dev, &rc, e, sizeof(e));
	if (!s) {
		if (!b) {
			rc = -ENOMEM;
			snprintf(e, sizeof(e), "out of memory");
		}
		for (size_t k = 0; k < n; k++)
			if (devs[k] == dev && !rds[k].status)
				rds[k].status = rc;
		if (err[0] == '\0')
			snprintf(err, errlen, "%s", e);
		free(b);
		return;
	}
	for (;;) {
		/* The part's earlier copies must have ended. */
		if ((rc = wait_part(s, part, e, sizeof(e)))) {
			lost = 1;
			break;
		}
		fill(g, s, part, rds, devs, n, &i, &o, b);
		if (!b->n)
			break;
		rc = pull_part(g, s, part, b, rds, err, errlen, e, sizeof(e));
		if (rc) {
			lost = rc != -ETIMEDOUT;
			break;
		}
		part = (part + 1) % GPU_PARTS;
	}
	/* The bytes are on the device when this returns. */
	for (unsigned int k = 0; k < GPU_PARTS && !lost; k++) {
		int wrc = wait_part(s, k, e, sizeof(e));
		if (wrc) {
			lost = 1;
			rc = wrc;
		}
	}
	if (rc == -ETIMEDOUT || lost) {
		s->retired = 1;
		stage_retire(g, s, rc);
	}
	pthread_mutex_unlock(&s->lock);
	if (rc) {
		if (err[0] == '\0' && e[0])
			snprintf(err, errlen, "%s", e);
		/* Lost: no read of this call is known to be on the device.
		 * Else those not wholly read fail with the cause. */
		for (size_t k = 0; k < n; k++)
			if (devs[k] == dev && !rds[k].status &&
			    (lost || k > i || (k == i && o < rds[k].len)))
				rds[k].status = rc;
	}
	stage_put(g, s);
	free(b);
}

int sfs_gpu_read(struct sfs_gpu *g, struct sfs_cache_rd *rds, const int *devs,
		 size_t n, char *err, size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		int seen = 0;
		for (size_t k = 0; k < i && !seen; k++)
			seen = devs[k] == devs[i];
		if (!seen)
			read_dev(g, devs[i], rds, devs, n, err, errlen);
	}
	for (size_t i = 0; i < n; i++)
		if (rds[i].status)
			return rds[i].status;
	return 0;
}

/* Hand @s's dst to the cache (g->lock held): the cache frees it once
 * the transport's late read ends; the registration goes with the
 * transport, the host memory at sfs_gpu_free. */
static void hand_over(struct gpu_stage *s)
{
	if (!s->dst)
		return;
	if (!sfs_cache_dst_free(s->dst))
		sfs_xport_mr_dereg(s->mr); /* idle after all */
	s->dst = NULL;
	s->mr = NULL;
}

void sfs_gpu_stop(struct sfs_gpu *g)
{
	struct gpu_stage *gone = NULL;

	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	g->stopped = 1;
	for (int d = 0; d < GPU_DEVICES_MAX; d++) {
		struct gpu_stage *s = g->st[d];
		g->st[d] = NULL;
		if (s && !s->listed) {
			s->listed = 1;
			s->next = g->retired;
			g->retired = s;
		}
	}
	reclaim(g, &gone);
	/* What cannot go yet (a timed-out read still held by the
	 * transport) waits for sfs_gpu_free, after the transport. */
	for (struct gpu_stage *s = g->retired; s; s = s->next)
		hand_over(s);
	pthread_mutex_unlock(&g->lock);
	free_list(gone);
}

void sfs_gpu_free(struct sfs_gpu *g)
{
	if (!g)
		return;
	sfs_gpu_stop(g);
	/* The transport has closed: its late reads are gone, and with
	 * them its registrations; sfs_gpu_stop handed every dst left to
	 * the cache. */
	while (g->retired) {
		struct gpu_stage *s = g->retired;
		g->retired = s->next;
		stage_free(s);
	}
	pthread_mutex_destroy(&g->lock);
	free(g);
}
