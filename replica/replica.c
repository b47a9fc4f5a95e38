/* SPDX-License-Identifier: MIT */
/*
 * replica.c - open and close a replica: the disk tier, the seed's
 * manifest, the transport, the cache, the tree and the generations.
 * Everything that can fail happens in sfs_replica_open, so a command
 * that calls it fails in one line before anything is served.
 */
#include "replica/replica.h"

#include "cache/cache.h"
#include "cache/disk.h"
#include "common/log.h"
#include "common/util.h"
#include "metadata/control.h"
#include "metadata/manifest.h"
#include "replica/gens.h"
#include "replica/mctl.h"
#include "replica/readahead.h"
#include "replica/status.h"
#include "replica/tree.h"
#include "transports/transport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sfs_replica {
	struct sfs_replica_cfg cfg; /* strings borrowed from the caller */
	char *seed;		    /* owned copy of cfg.seed */
	struct sfs_status status;
	int status_ready;
	char *json; /* the first generation's, until gens owns it */
	size_t json_len;
	struct sfs_manifest *m; /* likewise; then the first view's */
	struct sfs_xport *x;
	struct sfs_disk *disk;
	struct sfs_cache *cache;
	struct sfs_tree *tree;
	pthread_rwlock_t lock; /* guards tree: a generation rewrites it */
	struct sfs_gens *gens;
	struct sfs_mctl *ctl;
	uint64_t ra_min, ra_max; /* read-ahead window; ra_max 0: off */
};

static int reconnect_cb(void *arg, uint32_t cpeer, uint64_t peer,
			uint64_t *new_peer)
{
	return sfs_gens_reconnect(arg, cpeer, peer, new_peer);
}

/* Fetch, check, connect, build.  One line in @err on failure. */
static int open_parts(struct sfs_replica *r, char *err, size_t errlen)
{
	const struct sfs_replica_cfg *c = &r->cfg;
	char why[SFS_XPORT_ERR_MAX];
	int rc;

	/* Locked by one mount at a time: find out before anything else. */
	if (c->cache_dir && (rc = sfs_disk_open(c->cache_dir, c->cache_dir_size,
						&r->disk, err, errlen)))
		return rc;
	uint64_t tm = sfs_now_ms();
	rc = sfs_control_get(c->seed, "/v1/manifest", c->timeout_ms,
			     SFS_MANIFEST_MAX, &r->json, &r->json_len, why,
			     sizeof(why));
	SFS_LOG(SFS_DEBUG, "replica", "manifest fetched in %llu ms",
		(unsigned long long)(sfs_now_ms() - tm));
	if (rc) {
		snprintf(err, errlen, "cannot fetch the manifest: %s", why);
		return rc;
	}
	rc = sfs_manifest_decode(r->json, r->json_len, &r->m, why, sizeof(why));
	if (rc) {
		snprintf(err, errlen, "bad manifest from %s: %s", c->seed, why);
		return rc;
	}
	size_t ep;
	uint64_t peer, t0 = sfs_now_ms();
	rc = sfs_control_open(c->seed, r->m, c->protocol, c->timeout_ms, &r->x,
			      &ep, &peer, err, errlen);
	if (rc)
		return rc;
	r->status.transport_ms = sfs_now_ms() - t0;
	const char *proto = r->m->eps[ep].protocol;
	/* Chunks are verified whole: at least one checksum chunk each. */
	uint32_t chunk = sfs_gens_chunk_size(r->m, c->chunk_size);
	if (chunk != c->chunk_size)
		SFS_LOG(SFS_INFO, "replica",
			"chunk size %u: the seed's checksum chunks", chunk);

	struct sfs_cache_cfg cc = {.xport = r->x,
				   .size = c->cache_size,
				   .chunk_size = chunk,
				   .timeout_ms = c->timeout_ms,
				   .no_verify = c->no_verify,
				   .disk = r->disk};
	uint64_t tc = sfs_now_ms();
	rc = sfs_cache_new(&cc, &r->cache, err, errlen);
	SFS_LOG(SFS_DEBUG, "replica", "cache ready in %llu ms",
		(unsigned long long)(sfs_now_ms() - tc));
	if (rc)
		return rc;
	char label[300];
	uint32_t cpeer;
	snprintf(label, sizeof(label), "seed %s", c->seed);
	if ((rc = sfs_cache_add_peer(r->cache, peer, label, &cpeer)))
		return rc;
	if ((rc = sfs_tree_new(c->seed, c->layout, &r->tree)))
		return rc;
	/* The generations own the manifest from here on; the first one's
	 * view owns the tree's nodes. */
	struct sfs_gens_cfg gc = {.seed = c->seed,
				  .timeout_ms = c->timeout_ms,
				  .x = r->x,
				  .peer = peer,
				  .cpeer = cpeer,
				  .chunk_size = chunk,
				  .ep = ep,
				  .cache = r->cache,
				  .tree = r->tree,
				  .tree_lock = &r->lock,
				  .require = c->require};
	struct sfs_view *first = NULL;
	rc = sfs_gens_new(&gc, r->json, r->json_len, r->m, &r->gens, &first);
	r->json = NULL; /* the generations' now, even on failure */
	if (rc) {
		r->m = NULL;
		snprintf(err, errlen, "cannot use the seed's manifest: %s",
			 strerror(-rc));
		return rc;
	}
	r->m = first->m;
	sfs_cache_set_reconnect(r->cache, reconnect_cb, r->gens);
	if (sfs_gens_hidden(r->gens, why, sizeof(why))) {
		/* Kept all the same: a later generation may match. */
		fprintf(stderr,
			"%s: model %s from %s is hidden: %s (--require %s)\n",
			c->who, r->m->model, c->seed, why, c->require_text);
		SFS_LOG(SFS_WARN, "replica", "model %s is hidden: %s",
			r->m->model, why);
	} else {
		rc = sfs_tree_add_model(r->tree, r->m, first->set, first->json,
					first->json_len, first);
	}
	if (!rc)
		rc = sfs_tree_add_status(r->tree);
	if (rc) {
		snprintf(err, errlen, "cannot build the tree: %s",
			 strerror(-rc));
		return rc;
	}
	struct sfs_xport_info info;
	sfs_xport_info(r->x, &info);
	r->status.seed = r->seed;
	r->status.gens = r->gens;
	r->status.cache = r->cache;
	r->status.disk = r->disk;
	r->status.require = c->require_text;
	snprintf(r->status.protocol, sizeof(r->status.protocol), "%s",
		 info.protocol);
	snprintf(r->status.provider, sizeof(r->status.provider), "%s",
		 info.provider);
	sfs_status_init(&r->status);
	r->status_ready = 1;
	sfs_tree_finish(r->tree);
	SFS_LOG(SFS_INFO, "replica",
		"model %s generation %llu from %s: %zu files, %zu tensors, "
		"protocol %s",
		r->m->model, (unsigned long long)r->m->generation, c->seed,
		r->m->nfiles, r->m->ntensors, proto);
	return 0;
}

int sfs_replica_open(const struct sfs_replica_cfg *cfg,
		     struct sfs_replica **out, char *err, size_t errlen)
{
	struct sfs_replica *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->cfg = *cfg;
	if (!r->cfg.who)
		r->cfg.who = "seedfs";
	pthread_rwlock_init(&r->lock, NULL);
	if (!(r->seed = strdup(cfg->seed))) {
		free(r);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->cfg.seed = r->seed;
	int rc = open_parts(r, err, errlen);
	if (rc) {
		if (!*err)
			snprintf(err, errlen, "%s", strerror(-rc));
		sfs_replica_close(r);
		return rc;
	}
	*out = r;
	return 0;
}

void sfs_replica_ready(struct sfs_replica *r)
{
	pthread_mutex_lock(&r->status.lock);
	r->status.ready_ms = sfs_now_ms() - r->cfg.start_ms;
	uint64_t ready = r->status.ready_ms, xport = r->status.transport_ms;
	pthread_mutex_unlock(&r->status.lock);
	SFS_LOG(SFS_INFO, "replica",
		"ready in %.2f s (transport start-up %.2f s, the rest %.2f s)",
		(double)ready / 1e3, (double)xport / 1e3,
		(double)(ready - SFS_MIN(ready, xport)) / 1e3);
	/* The rest of the cache is faulted in from now on, behind. */
	sfs_cache_grow(r->cache);
}

void sfs_replica_set_inval(struct sfs_replica *r, void (*fn)(void *, uint64_t),
			   void *arg)
{
	sfs_gens_set_inval(r->gens, fn, arg);
}

void sfs_replica_stop(struct sfs_replica *r)
{
	if (!r)
		return;
	sfs_mctl_stop(r->ctl); /* prefetches use the cache and the tree */
	r->ctl = NULL;
	r->status.control = NULL;
	sfs_gens_stop(r->gens); /* no invalidation of a session gone */
}

void sfs_replica_close(struct sfs_replica *r)
{
	if (!r)
		return;
	sfs_replica_stop(r);
	/* Nothing may post a pull once the transport is quiesced: stop the
	 * cache's threads first (the disk tier's post what they do not
	 * find on disk).  Then cancel the pulls in flight, which write into
	 * the cache, then free the cache (and its registration), then the
	 * transport. */
	sfs_cache_stop(r->cache);
	size_t left = r->x ? sfs_xport_quiesce(r->x) : 0;
	sfs_gens_free(r->gens); /* its sweeper retires cache sources */
	sfs_cache_free_quiesced(r->cache, left);
	sfs_disk_close(r->disk);
	sfs_xport_close(r->x);
	sfs_tree_free(r->tree);
	if (r->status_ready)
		sfs_status_destroy(&r->status);
	if (!r->gens) {
		sfs_manifest_free(r->m);
		free(r->json);
	}
	r->m = NULL;
	pthread_rwlock_destroy(&r->lock);
	free(r->seed);
	free(r);
}

struct sfs_tree *sfs_replica_tree(struct sfs_replica *r)
{
	return r->tree;
}

pthread_rwlock_t *sfs_replica_lock(struct sfs_replica *r)
{
	return &r->lock;
}

struct sfs_cache *sfs_replica_cache(struct sfs_replica *r)
{
	return r->cache;
}

const char *sfs_replica_seed(const struct sfs_replica *r)
{
	return r->seed;
}

const char *sfs_replica_model(const struct sfs_replica *r)
{
	return r->m->model;
}

int sfs_replica_hidden(struct sfs_replica *r, char *why, size_t len)
{
	return sfs_gens_hidden(r->gens, why, len);
}

void sfs_replica_revalidate(struct sfs_replica *r)
{
	sfs_gens_revalidate(r->gens);
}

void sfs_replica_revalidate_missing(struct sfs_replica *r)
{
	sfs_gens_revalidate_missing(r->gens);
}

int sfs_replica_ref(struct sfs_replica *r, struct sfs_view *v)
{
	return sfs_gens_ref(r->gens, v);
}

void sfs_replica_unref(struct sfs_replica *r, struct sfs_view *v)
{
	sfs_gens_unref(r->gens, v);
}

int sfs_replica_alive(struct sfs_replica *r, struct sfs_view *v)
{
	return sfs_gens_alive(r->gens, v);
}

void sfs_replica_set_ahead(struct sfs_replica *r, uint64_t min, uint64_t max)
{
	r->ra_min = min;
	r->ra_max = max;
}

int sfs_replica_status(void *arg, char **text, size_t *len)
{
	struct sfs_replica *r = arg;
	return sfs_status_render(&r->status, text, len);
}

void sfs_replica_serve_control(struct sfs_replica *r, int prefetch_all)
{
	char err[256];
	if (sfs_mctl_start(r, &r->ctl, err, sizeof(err))) {
		SFS_LOG(SFS_WARN, "replica",
			"seedfs prefetch will not work: %s", err);
		return;
	}
	r->status.control = sfs_mctl_path(r->ctl);
	if (prefetch_all && sfs_mctl_prefetch_all(r->ctl))
		SFS_LOG(SFS_WARN, "replica", "--prefetch: cannot start");
}

uint64_t sfs_replica_total_bytes(struct sfs_replica *r)
{
	uint64_t total = 0;
	pthread_rwlock_rdlock(&r->lock);
	for (size_t i = 0; i < r->tree->n; i++)
		if (r->tree->nodes[i].kind == SFS_NODE_FILE &&
		    !r->tree->nodes[i].superseded)
			total += r->tree->nodes[i].size;
	pthread_rwlock_unlock(&r->lock);
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
	if (!sfs_gens_alive(r->gens, f->view))
		return -ESTALE;
	/* Queue every pull this read needs, then those of the read-ahead
	 * window (behind them, and as deep as the link's throughput makes
	 * worthwhile), before waiting for any. */
	pull_range(r, f, f->base + off, f->base + end, 1);
	if (r->ra_max && f->ra) {
		uint64_t a, b;
		uint64_t max =
			sfs_cache_ahead(r->cache, f->set, r->ra_min, r->ra_max);
		pthread_mutex_lock(f->ra_lock);
		sfs_ra_step(f->ra, off, end, f->size, r->ra_min, max, &a, &b);
		pthread_mutex_unlock(f->ra_lock);
		if (a < b)
			pull_range(r, f, f->base + a, f->base + b, 0);
	}
	int rc = gather(r, f, f->base + off, f->base + end, out);
	if (rc && rc != -ESTALE && !sfs_gens_alive(r->gens, f->view))
		rc = -ESTALE; /* the seed stopped serving it meanwhile */
	return rc;
}

void sfs_replica_fetch(struct sfs_replica *r, const struct sfs_rfile *f,
		       uint64_t off, uint64_t len)
{
	uint64_t end = SFS_MIN(f->size, off + len);
	if (off < end)
		pull_range(r, f, f->base + off, f->base + end, 0);
}

int sfs_replica_current(struct sfs_replica *r, const char *name,
			struct sfs_view **v, const struct sfs_manifest **m)
{
	return sfs_gens_current(r->gens, name, v, m);
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
