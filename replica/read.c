/* SPDX-License-Identifier: MIT */
/*
 * read.c - reading files through the cache (read-ahead, pins handed
 * back as iovecs, what is resident), and the replica's parts as the
 * files above it see them: its tree, lock, cache, transport, views.
 * It calls nothing of the models' or sources' side (model.c,
 * source.c): those, and what serves the mount (prefetch, pull,
 * reseed, status), build on it.
 */
#include "replica/replica_impl.h"

#include "cache/cache.h"
#include "common/log.h"
#include "common/util.h"
#include "control/control.h"
#include "replica/readahead.h"
#include "replica/tree.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sfs_tree *sfs_replica_tree(struct sfs_replica *r)
{
	return r->tree;
}

pthread_rwlock_t *sfs_replica_lock(struct sfs_replica *r)
{
	return &r->tree_lock;
}

struct sfs_cache *sfs_replica_cache(struct sfs_replica *r)
{
	return r->cache;
}

struct sfs_xport *sfs_replica_xport(struct sfs_replica *r)
{
	return r->x;
}

void sfs_replica_keep_mr(struct sfs_replica *r, struct sfs_xport_mr *mr)
{
	if (!mr)
		return;
	pthread_mutex_lock(&r->lock);
	int rc = sfs_grow((void **)&r->kept_mrs, &r->cap_kept_mrs,
			  r->nkept_mrs + 1, sizeof(*r->kept_mrs));
	if (!rc)
		r->kept_mrs[r->nkept_mrs++] = mr;
	pthread_mutex_unlock(&r->lock);
	if (rc)
		SFS_LOG(SFS_WARN, "replica",
			"out of memory: a registration stays until the "
			"process ends");
}

const char *sfs_replica_protocol(struct sfs_replica *r)
{
	return r->proto;
}

char *sfs_replica_seeds(struct sfs_replica *r, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < r->cfg.nseeds && o < len; i++) {
		int n = snprintf(buf + o, len - o, "%s%s", i ? "," : "",
				 r->cfg.seeds[i]);
		o += n > 0 ? (size_t)n : 0;
	}
	return buf;
}

int sfs_replica_ref(struct sfs_replica *r, struct sfs_view *v)
{
	if (!v)
		return -ESTALE; /* its generation is gone */
	pthread_mutex_lock(&v->model->lock);
	/* An expired view gets no new reference: the sweeper may be about
	 * to free it (it decided under this lock that nobody holds it). */
	int rc = v->expired ? -ESTALE : 0;
	if (!rc)
		v->refs++;
	pthread_mutex_unlock(&v->model->lock);
	return rc;
}

void sfs_replica_unref(struct sfs_replica *r, struct sfs_view *v)
{
	pthread_mutex_lock(&v->model->lock);
	v->refs--;
	int wake = v->expired && !v->refs;
	pthread_mutex_unlock(&v->model->lock);
	if (wake) { /* the sweeper frees it */
		pthread_mutex_lock(&r->lock);
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
	}
}

void sfs_replica_warming(struct sfs_replica *r, struct sfs_view *v, int delta)
{
	pthread_mutex_lock(&v->model->lock);
	v->warming += delta;
	pthread_mutex_unlock(&v->model->lock);
	atomic_fetch_add(&r->warming, delta);
	/* The sweeper sets the lanes anew. */
	pthread_mutex_lock(&r->lock);
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

int sfs_replica_alive(struct sfs_replica *r, struct sfs_view *v)
{
	pthread_mutex_lock(&v->model->lock);
	int alive = !v->expired;
	pthread_mutex_unlock(&v->model->lock);
	return alive;
}

void sfs_replica_set_ahead(struct sfs_replica *r, uint64_t min, uint64_t max,
			   int tensors)
{
	r->ra_min = min;
	r->ra_max = max;
	r->ra_tensors = tensors;
}

int sfs_replica_reseeding(struct sfs_replica *r)
{
	return r->reseed != NULL;
}

uint64_t sfs_replica_total_bytes(struct sfs_replica *r)
{
	uint64_t total = 0;
	pthread_rwlock_rdlock(&r->tree_lock);
	for (size_t i = 0; i < r->tree->n; i++)
		if (r->tree->nodes[i]->kind == SFS_NODE_FILE &&
		    !r->tree->nodes[i]->superseded)
			total += r->tree->nodes[i]->size;
	pthread_rwlock_unlock(&r->tree_lock);
	return total;
}

/* ---- reading ---- */

void sfs_rvec_init(struct sfs_rvec *v)
{
	v->iov = v->iov_stack;
	v->pins = v->pins_stack;
	v->n = 0;
	v->cap = SFS_RVEC_STACK;
}

static int rvec_push(struct sfs_rvec *v, const void *p, size_t len,
		     struct sfs_chunk *pin)
{
	if (v->n == v->cap) {
		size_t cap = v->cap * 2;
		struct iovec *iov = malloc(cap * sizeof(*iov));
		struct sfs_chunk **pins = malloc(cap * sizeof(*pins));
		if (!iov || !pins) {
			free(iov);
			free(pins);
			return -ENOMEM;
		}
		memcpy(iov, v->iov, v->n * sizeof(*iov));
		memcpy(pins, v->pins, v->n * sizeof(*pins));
		if (v->iov != v->iov_stack) {
			free(v->iov);
			free(v->pins);
		}
		v->iov = iov;
		v->pins = pins;
		v->cap = cap;
	}
	v->iov[v->n].iov_base = (void *)p;
	v->iov[v->n].iov_len = len;
	v->pins[v->n] = pin;
	v->n++;
	return 0;
}

void sfs_rvec_release(struct sfs_replica *r, struct sfs_rvec *v)
{
	for (size_t i = 0; i < v->n; i++)
		sfs_cache_put(r->cache, v->pins[i]);
	if (v->iov != v->iov_stack) {
		free(v->iov);
		free(v->pins);
	}
	sfs_rvec_init(v);
}

/* Queue the pulls of the file bytes [off, end) of @f, for a reader about
 * to wait (@demand) or ahead of one; wait for none. */
static void pull_range(struct sfs_replica *r, const struct sfs_rfile *f,
		       uint64_t off, uint64_t end, int demand)
{
	const struct sfs_mfile *mf = f->file;
	ssize_t first = sfs_mfile_find_extent(mf, off);

	for (size_t i = (size_t)first;
	     first >= 0 && i < mf->next && mf->ext[i].off < end; i++) {
		const struct sfs_extent *e = &mf->ext[i];
		if (e->kind != SFS_EXT_REGION)
			continue;
		uint64_t a = SFS_MAX(off, e->off);
		uint64_t b = SFS_MIN(end, e->off + e->len);
		sfs_cache_prefetch(r->cache, f->set, f->obj, a, b - a, demand);
	}
}

/* Pin the file bytes [off, end) of @f, extent by extent, into @v. */
static int gather(struct sfs_replica *r, const struct sfs_rfile *f,
		  uint64_t off, uint64_t end, struct sfs_rvec *v)
{
	const struct sfs_mfile *mf = f->file;
	ssize_t first = sfs_mfile_find_extent(mf, off);
	int rc = 0;

	for (size_t i = (size_t)first;
	     first >= 0 && i < mf->next && mf->ext[i].off < end && !rc; i++) {
		const struct sfs_extent *e = &mf->ext[i];
		uint64_t a = SFS_MAX(off, e->off);
		uint64_t b = SFS_MIN(end, e->off + e->len);
		if (e->kind == SFS_EXT_INLINE) {
			rc = rvec_push(v, e->data + (a - e->off), b - a, NULL);
			continue;
		}
		while (a < b && !rc) {
			struct sfs_chunk *ch;
			const uint8_t *p;
			size_t avail;
			rc = sfs_cache_get(r->cache, f->set, f->obj, a, &ch, &p,
					   &avail);
			if (rc)
				break;
			size_t take = (size_t)SFS_MIN((uint64_t)avail, b - a);
			rc = rvec_push(v, p, take, ch);
			if (rc)
				sfs_cache_put(r->cache, ch);
			a += take;
		}
	}
	return rc;
}

int sfs_replica_read(struct sfs_replica *r, struct sfs_rfile *f, uint64_t off,
		     uint64_t len, struct sfs_rvec *out)
{
	uint64_t end = SFS_MIN(f->size, off + len);
	if (off >= end)
		return 0;
	if (!sfs_replica_alive(r, f->view))
		return -ESTALE;
	/* Queue every pull this read needs, then those of the read-ahead
	 * window (behind them, and as deep as the link's throughput makes
	 * worthwhile), before waiting for any. */
	pull_range(r, f, f->base + off, f->base + end, 1);
	if (r->ra_max && f->ra) {
		uint64_t a, b;
		uint64_t max =
			sfs_cache_ahead(r->cache, f->set, r->ra_min, r->ra_max);
		/* And the rest of the tensor that holds the read's middle
		 * byte (an mmap fault's read-around is centred on the
		 * fault; a read() starts where it asked), unless the read
		 * starts in the header (a scan of headers pulls no tensor),
		 * up to the --ahead cap (not the window's depth: a loader
		 * that takes tensors out of file order, or faults in a page
		 * of each, reads each tensor through, but may read it in
		 * one go). */
		const struct sfs_ra_tensors *ts =
			r->ra_tensors ? f->view->tensors : NULL;
		uint64_t tend =
			f->base + off >= sfs_ra_tensors_start(ts, f->obj)
				? sfs_ra_tensor_end(ts, f->obj,
						    f->base + off +
							    (end - off) / 2)
				: 0;
		uint64_t ta, tb;
		tend = tend > f->base ? SFS_MIN(tend - f->base, f->size) : 0;
		pthread_mutex_lock(f->ra_lock);
		sfs_ra_step(f->ra, off, end, f->size, r->ra_min, max, &a, &b);
		/* Only where the window does not: a sequential reader's
		 * window follows it (pulling the tensor's rest on top of it
		 * cost an in-order read 15-25 % in make bench). */
		if (!f->ra->window)
			sfs_ra_tensor_step(f->ra, end, tend, r->ra_max, &ta,
					   &tb);
		else
			ta = tb = 0;
		pthread_mutex_unlock(f->ra_lock);
		if (a < b)
			pull_range(r, f, f->base + a, f->base + b, 0);
		if (ta < tb)
			pull_range(r, f, f->base + ta, f->base + tb, 0);
	}
	int rc = gather(r, f, f->base + off, f->base + end, out);
	if (rc && rc != -ESTALE && !sfs_replica_alive(r, f->view))
		rc = -ESTALE; /* the seed stopped serving it meanwhile */
	return rc;
}

void sfs_replica_end_waits(struct sfs_replica *r)
{
	sfs_cache_end_waits(r->cache);
	sfs_control_abort();
}

void sfs_replica_fetch(struct sfs_replica *r, const struct sfs_rfile *f,
		       uint64_t off, uint64_t len)
{
	uint64_t end = SFS_MIN(f->size, off + len);
	if (off < end)
		pull_range(r, f, f->base + off, f->base + end, 0);
}

void sfs_replica_rfile(struct sfs_view *v, size_t idx, struct sfs_rfile *f)
{
	memset(f, 0, sizeof(*f));
	f->view = v;
	f->file = &v->m->files[idx];
	f->set = v->set;
	f->obj = (uint32_t)idx;
	f->size = f->file->size;
}

uint64_t sfs_replica_resident(struct sfs_replica *r, const struct sfs_rfile *f,
			      uint64_t off, uint64_t len)
{
	const struct sfs_mfile *mf = f->file;
	uint64_t a0 = f->base + off, end = a0 + len, got = 0;
	ssize_t first = sfs_mfile_find_extent(mf, a0);

	for (size_t i = (size_t)first;
	     first >= 0 && i < mf->next && mf->ext[i].off < end; i++) {
		const struct sfs_extent *e = &mf->ext[i];
		uint64_t a = SFS_MAX(a0, e->off);
		uint64_t b = SFS_MIN(end, e->off + e->len);
		got += e->kind == SFS_EXT_INLINE
			       ? b - a
			       : sfs_cache_resident(r->cache, f->set, f->obj, a,
						    b - a);
	}
	return got;
}
