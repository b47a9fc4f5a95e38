/* SPDX-License-Identifier: MIT */
/*
 * gpu.c - reads into CUDA device memory through a page-locked stage
 * (gpu.h).  A read is cut into pieces that fill one part of the stage;
 * the pieces of a part are pulled at once and verified on the host, the
 * verified ones copied to the device, and the next part pulled while
 * those copies run.  A part is written again only after its copies
 * have ended.
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

#define GPU_DEVICES_MAX 64
#define GPU_PART (16u << 20)
#define GPU_PARTS 2
#define GPU_PIECES 256 /* pieces in one part at most */

struct gpu_stage {
	int dev;
	pthread_mutex_t lock; /* one read at a time */
	struct sfs_hmem_stage *hs;
	uint8_t *base;
	struct sfs_xport_mr *mr;
	struct sfs_cache_dst *dst;
	struct gpu_stage *next; /* on g->retired; protected by g->lock */
};

struct sfs_gpu {
	struct sfs_cache *cache;
	struct sfs_xport *x;
	uint64_t align;
	pthread_mutex_t lock;
	struct gpu_stage *st[GPU_DEVICES_MAX]; /* protected by g->lock */
	/* Stages a timed-out read may still write into: their memory
	 * stays until sfs_gpu_free.  protected by g->lock */
	struct gpu_stage *retired;
	int stopped; /* protected by g->lock */
};

int sfs_gpu_new(struct sfs_cache *cache, struct sfs_xport *x, uint64_t align,
		struct sfs_gpu **out)
{
	struct sfs_gpu *g = calloc(1, sizeof(*g));

	*out = NULL;
	if (!g)
		return -ENOMEM;
	g->cache = cache;
	g->x = x;
	g->align = align ? align : 1;
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

/* Deregister @s: 0 and @s freed, or -EBUSY: a timed-out read may
 * still write into it, so its memory stays (and its registration, which
 * goes when the transport closes) until sfs_gpu_free. */
static int stage_stop(struct gpu_stage *s)
{
	if (s->dst && sfs_cache_dst_free(s->dst)) {
		s->dst = NULL; /* the cache frees it when that read ends */
		s->mr = NULL;
		return -EBUSY;
	}
	if (!s->dst && !s->mr && s->base)
		return -EBUSY; /* set aside before */
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
	if ((rc = sfs_hmem_stage_new(dev, GPU_PART, GPU_PARTS, &s->hs, err,
				     errlen)))
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

/* Device @dev's stage, made if needed; NULL and a line in @err. */
static struct gpu_stage *stage_of(struct sfs_gpu *g, int dev, int *rc,
				  char *err, size_t errlen)
{
	struct gpu_stage *s = NULL;

	if (dev < 0 || dev >= GPU_DEVICES_MAX) {
		snprintf(err, errlen, "CUDA device %d: at most %d devices", dev,
			 GPU_DEVICES_MAX);
		*rc = -EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&g->lock);
	if (g->stopped) {
		snprintf(err, errlen, "the client is closing");
		*rc = -ESHUTDOWN;
	} else if (!(s = g->st[dev]) &&
		   !(*rc = stage_new(g, dev, &s, err, errlen))) {
		g->st[dev] = s;
	}
	pthread_mutex_unlock(&g->lock);
	return s;
}

int sfs_gpu_prepare(struct sfs_gpu *g, int dev, char *err, size_t errlen)
{
	int rc = 0;
	return stage_of(g, dev, &rc, err, errlen) ? 0 : rc;
}

/* A timed-out read may still write into @s: no read uses it again. */
static void stage_retire(struct sfs_gpu *g, struct gpu_stage *s)
{
	pthread_mutex_lock(&g->lock);
	if (g->st[s->dev] == s)
		g->st[s->dev] = NULL;
	s->next = g->retired;
	g->retired = s;
	pthread_mutex_unlock(&g->lock);
	SFS_LOG(SFS_WARN, "gpu",
		"CUDA device %d: a read timed out; its stage is set aside "
		"until the client closes",
		s->dev);
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

/* Pull one part's pieces; copy the verified ones.  -ETIMEDOUT when a
 * piece timed out (the stage must not be used again). */
static int pull_part(struct sfs_gpu *g, struct gpu_stage *s, unsigned int part,
		     struct gpu_batch *b, struct sfs_cache_rd *rds, char *err,
		     size_t errlen)
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
		char e[256];
		int rc = sfs_hmem_stage_copy(s->hs, r->to + b->at[j], pc->to,
					     pc->len, e, sizeof(e));
		if (rc) {
			r->status = rc;
			if (err[0] == '\0')
				snprintf(err, errlen, "%s", e);
		}
	}
	char e[256];
	if (sfs_hmem_stage_mark(s->hs, part, e, sizeof(e))) {
		SFS_LOG(SFS_WARN, "gpu", "%s", e);
		/* Nothing tells when that part's copies end: wait them all. */
		for (unsigned int k = 0; k < GPU_PARTS; k++)
			sfs_hmem_stage_wait(s->hs, k, e, sizeof(e));
	}
	return timed_out ? -ETIMEDOUT : 0;
}

/* Every read of device @dev, through its stage. */
static void read_dev(struct sfs_gpu *g, int dev, struct sfs_cache_rd *rds,
		     const int *devs, size_t n, char *err, size_t errlen)
{
	struct gpu_batch *b = malloc(sizeof(*b));
	struct gpu_stage *s;
	size_t i = 0;
	uint64_t o = 0;
	unsigned int part = 0;
	int rc = 0;
	char e[256];

	if (!b || !(s = stage_of(g, dev, &rc, e, sizeof(e)))) {
		if (!b)
			snprintf(e, sizeof(e), "out of memory");
		for (size_t k = 0; k < n; k++)
			if (devs[k] == dev && !rds[k].status)
				rds[k].status = b ? rc : -ENOMEM;
		if (err[0] == '\0')
			snprintf(err, errlen, "%s", e);
		free(b);
		return;
	}
	pthread_mutex_lock(&s->lock);
	for (;;) {
		/* The part's earlier copies must have ended. */
		if ((rc = sfs_hmem_stage_wait(s->hs, part, e, sizeof(e))))
			break;
		fill(g, s, part, rds, devs, n, &i, &o, b);
		if (!b->n)
			break;
		if ((rc = pull_part(g, s, part, b, rds, err, errlen)))
			break;
		part = (part + 1) % GPU_PARTS;
	}
	/* The bytes are on the device when this returns. */
	for (unsigned int k = 0; k < GPU_PARTS; k++) {
		int wrc = sfs_hmem_stage_wait(s->hs, k, e, sizeof(e));
		if (wrc && !rc)
			rc = wrc;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc) {
		/* What was not read is failed with the cause. */
		if (rc != -ETIMEDOUT && err[0] == '\0')
			snprintf(err, errlen, "%s", e);
		for (size_t k = 0; k < n; k++)
			if (devs[k] == dev && !rds[k].status &&
			    (k > i || (k == i && o < rds[k].len)))
				rds[k].status = rc;
		if (rc == -ETIMEDOUT)
			stage_retire(g, s);
	}
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

void sfs_gpu_stop(struct sfs_gpu *g)
{
	struct gpu_stage *busy = NULL;

	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	g->stopped = 1;
	for (int d = 0; d < GPU_DEVICES_MAX; d++) {
		struct gpu_stage *s = g->st[d];
		g->st[d] = NULL;
		if (s && stage_stop(s)) {
			s->next = busy;
			busy = s;
		}
	}
	while (g->retired) {
		struct gpu_stage *s = g->retired;
		g->retired = s->next;
		if (stage_stop(s)) {
			s->next = busy;
			busy = s;
		}
	}
	g->retired = busy;
	pthread_mutex_unlock(&g->lock);
}

void sfs_gpu_free(struct sfs_gpu *g)
{
	if (!g)
		return;
	sfs_gpu_stop(g);
	while (g->retired) {
		struct gpu_stage *s = g->retired;
		g->retired = s->next;
		stage_free(s);
	}
	pthread_mutex_destroy(&g->lock);
	free(g);
}
