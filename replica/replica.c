/* SPDX-License-Identifier: MIT */
/*
 * replica.c - open and close a replica (its seeds, the transport, the
 * cache, the tree, the models), and read files through the cache.
 * Everything that can fail at start happens in sfs_replica_open, so a
 * command that calls it fails in one line before anything is served.
 */
#include "replica/replica_impl.h"

#include "cache/cache.h"
#include "cache/disk.h"
#include "common/log.h"
#include "common/util.h"
#include "control/control.h"
#include "control/signstate.h"
#include "replica/mctl.h"
#include "replica/readahead.h"
#include "replica/reseed.h"
#include "replica/tree.h"
#include "transports/transport.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* The first model @s lists (or cfg.only, if it lists that), into
 * @name.  0, -ENOENT (none) or -errno with @err. */
static int first_model(struct sfs_replica *r, struct rsrc *s, char *name,
		       size_t len, char *err, size_t errlen)
{
	struct rsrc_answer a;
	int rc = rsrc_list(s, r->cfg.timeout_ms, &a, err, errlen);
	if (rc)
		return rc;
	rc = -ENOENT;
	for (size_t i = 0; i < a.n && rc; i++) {
		if (r->cfg.only && strcmp(a.models[i].name, r->cfg.only))
			continue;
		snprintf(name, len, "%s", a.models[i].name);
		rc = 0;
	}
	if (rc)
		snprintf(err, errlen, "the seed at %s publishes %s", s->addr,
			 r->cfg.only ? "no model of that name" : "no model");
	free(a.models);
	return rc;
}

/*
 * The transport, from the first seed that answers: its first model's
 * manifest says which protocols it serves; the first this host can open
 * (or --protocol) is the one every source is read through.  The cache,
 * sized for that manifest's checksum chunks.  One line in @err.
 */
static int open_transport(struct sfs_replica *r, char *err, size_t errlen)
{
	const struct sfs_replica_cfg *c = &r->cfg;
	char name[SFS_MF_NAME_MAX + 1], why[SFS_XPORT_ERR_MAX],
		path[SFS_MF_NAME_MAX * 3 + 64];
	char first_err[SFS_XPORT_ERR_MAX] = "";
	struct rsrc *s = NULL;
	int rc = -EHOSTUNREACH, first_rc = 0;
	const char *first_addr = NULL;

	/* Before any poller runs: no source leaves meanwhile. */
	for (size_t i = 0; i < r->nsrcs && !s; i++) {
		if (!r->srcs[i])
			continue;
		rc = first_model(r, r->srcs[i], name, sizeof(name), why,
				 sizeof(why));
		if (!rc) {
			s = r->srcs[i];
		} else if (!*first_err) {
			snprintf(first_err, sizeof(first_err), "%s", why);
			first_rc = rc;
			first_addr = r->srcs[i]->addr;
		}
	}
	if (!s) {
		const char *more = r->nsrcs > 1 ? " (and no other seed has "
						  "what this replica needs)"
						: "";
		if (first_rc == -ENOENT)
			snprintf(err, errlen, "%s%s", first_err, more);
		else if (first_rc == -EPROTO)
			snprintf(err, errlen, "bad answer from %s: %s%s",
				 first_addr, first_err, more);
		else
			snprintf(err, errlen,
				 "cannot ask the seed what it publishes: %s%s",
				 first_err, more);
		return first_rc;
	}
	char *json, *esc = sfs_url_escape(name);
	size_t len;
	struct sfs_manifest *m;
	if (!esc)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/v1/manifest?model=%s", esc);
	free(esc);
	uint64_t tm = sfs_now_ms();
	rc = sfs_control_get(s->r->cfg.cred, s->addr, path, c->timeout_ms,
			     SFS_MANIFEST_MAX, &json, &len, why, sizeof(why));
	SFS_LOG(SFS_DEBUG, "replica", "manifest fetched in %llu ms",
		(unsigned long long)(sfs_now_ms() - tm));
	if (rc) {
		snprintf(err, errlen, "cannot fetch the manifest: %s", why);
		return rc;
	}
	rc = sfs_manifest_decode(json, len, &m, why, sizeof(why));
	free(json);
	if (rc) {
		snprintf(err, errlen, "bad manifest from %s: %s", s->addr, why);
		return rc;
	}
	size_t ep;
	uint64_t xpeer, t0 = sfs_now_ms();
	rc = sfs_control_open(s->r->cfg.cred, s->addr, m, c->protocol,
			      c->timeout_ms, &r->x, &ep, &xpeer, err, errlen);
	if (rc) {
		sfs_manifest_free(m);
		return rc;
	}
	r->transport_ms = sfs_now_ms() - t0;
	snprintf(r->proto, sizeof(r->proto), "%s", m->eps[ep].protocol);
	struct sfs_xport_info info;
	sfs_xport_info(r->x, &info);
	snprintf(r->provider, sizeof(r->provider), "%s", info.provider);
	/* Chunks are verified whole: at least one checksum chunk each. */
	r->chunk_size = model_chunk_size(m, c->chunk_size);
	if (r->chunk_size != c->chunk_size)
		SFS_LOG(SFS_INFO, "replica",
			"chunk size %u: the seed's checksum chunks",
			r->chunk_size);
	struct sfs_cache_cfg cc = {
		.xport = r->x,
		.size = c->cache_size,
		.chunk_size = r->chunk_size,
		.timeout_ms = c->timeout_ms,
		.no_verify = c->no_verify,
		/* Signed manifests: the channel may be
				    * tampered with, a seed's chunks too are
				    * checked against SHA-256. */
		.sha256_all = sfs_control_cred_trust(c->cred) != NULL,
		.hold_all = c->reseed != NULL || c->hold_all,
		.idle_ms = c->cache_idle_ms,
		.disk = r->disk,
		.reconnect = rsrc_reconnect,
		.reconnect_arg = r,
		.test_verify_delay_ms = c->test_verify_delay_ms};
	uint64_t tc = sfs_now_ms();
	rc = sfs_cache_new(&cc, &r->cache, err, errlen);
	SFS_LOG(SFS_DEBUG, "replica", "cache ready in %llu ms",
		(unsigned long long)(sfs_now_ms() - tc));
	if (!rc)
		rc = rsrc_adopt_peer(s, m, ep, xpeer, err, errlen);
	else
		sfs_xport_peer_remove(r->x, xpeer);
	if (!rc) { /* its poller's first offer takes it (source.c) */
		pthread_mutex_lock(&s->lock);
		sfs_manifest_free(s->primed);
		s->primed = m;
		m = NULL;
		pthread_mutex_unlock(&s->lock);
	}
	sfs_manifest_free(m);
	return rc;
}

/* With a trust key: the signed generations taken before, before any
 * manifest is (control/signstate.h). */
static int open_signstate(struct sfs_replica *r, char *err, size_t errlen)
{
	const struct sfs_replica_cfg *c = &r->cfg;
	char dir[4096];
	int rc;
	if (!sfs_control_cred_trust(c->cred))
		return 0;
	if (c->state_dir || c->cache_dir)
		snprintf(dir, sizeof(dir), "%s",
			 c->state_dir ? c->state_dir : c->cache_dir);
	else if ((rc = sfs_signstate_default_dir(dir, sizeof(dir), err,
						 errlen)))
		return rc;
	if ((rc = sfs_signstate_open(dir, &r->signstate, err, errlen)))
		return rc;
	SFS_LOG(SFS_INFO, "trust", "%zu signed generations remembered in %s",
		sfs_signstate_count(r->signstate),
		sfs_signstate_path(r->signstate));
	return 0;
}

/* Everything, in order.  One line in @err on failure. */
static int open_parts(struct sfs_replica *r, char *err, size_t errlen)
{
	const struct sfs_replica_cfg *c = &r->cfg;
	char seeds[1024];
	int rc;

	/* Locked by one mount at a time: find out before anything else. */
	if (c->cache_dir && (rc = sfs_disk_open(c->cache_dir, c->cache_dir_size,
						&r->disk, err, errlen)))
		return rc;
	if ((rc = open_signstate(r, err, errlen)))
		return rc;
	if ((rc = open_transport(r, err, errlen)))
		return rc;
	if ((rc = sfs_tree_new(sfs_replica_seeds(r, seeds, sizeof(seeds)),
			       c->layout, &r->tree)) ||
	    (rc = sfs_tree_add_status(r->tree))) {
		snprintf(err, errlen, "cannot build the tree: %s",
			 strerror(-rc));
		return rc;
	}
	/* Ask every seed now (those that do not answer, behind). */
	for (size_t i = 0; i < r->nsrcs; i++)
		if (r->srcs[i])
			rsrc_revalidate(r->srcs[i], c->timeout_ms, 0);
	size_t shown = 0, hidden = 0;
	struct sfs_model **all;
	size_t nall = model_all(r, &all);
	for (size_t i = 0; i < nall; i++) {
		struct sfs_model *mo = all[i];
		char why[256];
		pthread_mutex_lock(&mo->lock);
		int has = mo->current != NULL;
		pthread_mutex_unlock(&mo->lock);
		if (!has)
			continue;
		if (model_hidden(mo, why, sizeof(why))) {
			/* Kept all the same: a later generation may match. */
			struct rsrc *lead = rsrc_leader(r, mo->name);
			fprintf(stderr,
				"%s: model %s from %s is hidden: %s (--require "
				"%s)\n",
				c->who, mo->name, lead ? lead->addr : "?", why,
				c->require_text);
			rsrc_put(lead);
			hidden++;
		} else {
			shown++;
		}
	}
	model_put_all(all, nall);
	if (!shown && !hidden) {
		/* Every model was refused: say why, for the first. */
		for (size_t i = 0; i < r->nsrcs && !*err; i++) {
			struct rsrc *s = r->srcs[i];
			if (!s)
				continue;
			pthread_mutex_lock(&s->lock);
			for (size_t k = 0; k < s->nknown && !*err; k++)
				if (*s->known[k].why)
					snprintf(err, errlen, "%s from %s: %s",
						 s->known[k].name, s->addr,
						 s->known[k].why);
			pthread_mutex_unlock(&s->lock);
		}
		if (!*err)
			snprintf(err, errlen, "no model to show");
		return -ENOENT;
	}
	pthread_rwlock_wrlock(&r->tree_lock);
	sfs_tree_finish(r->tree);
	pthread_rwlock_unlock(&r->tree_lock);
	/* r->reseed is set before the sweeper reads it (lanes). */
	if (c->reseed) {
		struct sfs_reseed *rs = NULL;
		if ((rc = sfs_reseed_start(r, c->reseed, &rs, err, errlen)))
			return rc;
		atomic_store(&r->reseed_instance, sfs_reseed_instance(rs));
		atomic_store(&r->reseed, rs);
	}
	if (c->metrics_listen &&
	    (rc = metrics_serve(r, c->metrics_listen, err, errlen)))
		return rc;
	if ((rc = -pthread_create(&r->sweeper, NULL, model_sweeper, r))) {
		snprintf(err, errlen, "thread: %s", strerror(-rc));
		return rc;
	}
	r->sweeper_started = 1;
	struct rsrc **srcs;
	size_t nsrcs = rsrc_all(r, &srcs);
	for (size_t i = 0; i < nsrcs && !rc; i++)
		if ((rc = rsrc_start(srcs[i]))) /* none started twice */
			snprintf(err, errlen, "thread: %s", strerror(-rc));
	rsrc_put_all(srcs, nsrcs);
	if (rc)
		return rc;
	SFS_LOG(SFS_INFO, "replica", "%zu model%s from %s, protocol %s",
		shown + hidden, shown + hidden == 1 ? "" : "s", seeds,
		r->proto);
	return 0;
}

int sfs_replica_open(const struct sfs_replica_cfg *cfg,
		     struct sfs_replica **out, char *err, size_t errlen)
{
	struct sfs_replica *r = calloc(1, sizeof(*r));
	int rc = -ENOMEM;

	if (errlen)
		err[0] = '\0';
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->cfg = *cfg;
	if (!r->cfg.who)
		r->cfg.who = "seedfs";
	r->max_models = cfg->max_models ? cfg->max_models : SFS_MODELS_MAX;
	if (getrandom(&r->instance, sizeof(r->instance), 0) !=
		    sizeof(r->instance) ||
	    !r->instance)
		r->instance = sfs_now_ns() | 1;
	pthread_rwlock_init(&r->tree_lock, NULL);
	pthread_mutex_init(&r->lock, NULL);
	pthread_mutex_init(&r->xlock, NULL);
	r->mounted = time(NULL);
	r->mounted_ns = r->last_ns = sfs_now_ns();
	if ((rc = sfs_cond_init(&r->cond)))
		goto fail;
	if ((!cfg->nseeds && !cfg->registry) || cfg->nseeds > RSRC_MAX) {
		snprintf(err, errlen, "1 to %d seeds, not %zu", RSRC_MAX,
			 cfg->nseeds);
		rc = -EINVAL;
		goto fail;
	}
	for (size_t i = 0; i < cfg->nseeds; i++) {
		for (size_t j = 0; j < i; j++)
			if (!strcmp(cfg->seeds[i], cfg->seeds[j])) {
				snprintf(err, errlen, "seed %s given twice",
					 cfg->seeds[i]);
				rc = -EINVAL;
				goto fail;
			}
		if ((rc = rsrc_new(r, cfg->seeds[i], 0, &r->srcs[i])))
			goto fail;
		r->srcs[i]->idx = i;
		r->srcs[i]->refs = 1; /* the table's, for ever */
		r->nsrcs++;
	}
	if (cfg->registry && (rc = fleet_open(r, err, errlen)))
		goto fail;
	if ((rc = open_parts(r, err, errlen)))
		goto fail;
	if (cfg->registry && (rc = fleet_start(r, err, errlen)))
		goto fail;
	atomic_store(&r->opened, 1);
	*out = r;
	return 0;
fail:
	if (!*err)
		snprintf(err, errlen, "%s", strerror(-rc));
	sfs_replica_close(r);
	return rc;
}

void sfs_replica_ready(struct sfs_replica *r)
{
	pthread_mutex_lock(&r->lock);
	r->ready_ms = sfs_now_ms() - r->cfg.start_ms;
	uint64_t ready = r->ready_ms, xport = r->transport_ms;
	pthread_mutex_unlock(&r->lock);
	SFS_LOG(SFS_INFO, "replica",
		"ready in %.2f s (transport start-up %.2f s, the rest %.2f s)",
		(double)ready / 1e3, (double)xport / 1e3,
		(double)(ready - SFS_MIN(ready, xport)) / 1e3);
	/* The rest of the cache is faulted in from now on, behind. */
	sfs_cache_grow(r->cache);
}

/* How long sfs_replica_set_inval waits for invalidations under way. */
#define SFS_INVAL_WAIT_MS 5000

void sfs_replica_set_inval(struct sfs_replica *r, void (*fn)(void *, uint64_t),
			   void *arg)
{
	pthread_mutex_lock(&r->lock);
	r->inval = fn;
	r->inval_arg = arg;
	/* The previous target may be about to go (the session's fd is
	 * closed at the unmount): wait out the calls under way, each one
	 * write to /dev/fuse per inode.  Bounded: a write can block in the
	 * kernel on a page whose READ the stopped loop will never answer;
	 * the unmount that follows aborts the connection and ends it, and
	 * no new call starts (inval is NULL now). */
	uint64_t until = sfs_now_ms() + SFS_INVAL_WAIT_MS;
	while (r->inval_busy && sfs_now_ms() < until) {
		struct timespec ts = sfs_abstime(until - sfs_now_ms());
		pthread_cond_timedwait(&r->cond, &r->lock, &ts);
	}
	if (r->inval_busy)
		SFS_LOG(SFS_WARN, "replica",
			"%u page cache invalidations still under way after "
			"%d ms: the unmount ends them",
			r->inval_busy, SFS_INVAL_WAIT_MS);
	pthread_mutex_unlock(&r->lock);
}

void sfs_replica_stop(struct sfs_replica *r)
{
	if (!r)
		return;
	sfs_mctl_stop(r->ctl); /* prefetches use the cache and the tree */
	r->ctl = NULL;
	r->control = NULL;
	fleet_stop(r); /* no more news of sources */
	pthread_mutex_lock(&r->lock);
	r->stop = 1; /* no more sources, none retired */
	pthread_mutex_unlock(&r->lock);
	for (size_t i = 0; i < r->nsrcs; i++)
		if (r->srcs[i])
			rsrc_stop(r->srcs[i]);
	pthread_mutex_lock(&r->lock);
	r->inval = NULL; /* no invalidation of a session gone */
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	if (r->sweeper_started) {
		pthread_join(r->sweeper, NULL);
		r->sweeper_started = 0;
	}
	/* Retired sources not buried yet (the sweeper is gone now). */
	for (struct rsrc *s = r->retired; s; s = s->next)
		rsrc_stop(s);
}

void sfs_replica_close(struct sfs_replica *r)
{
	if (!r)
		return;
	sfs_replica_stop(r);
	metrics_stop(r);
	/* Others read the slab through the re-seeding transport: it goes
	 * first (its routes read the models, too). */
	sfs_reseed_stop(r->reseed);
	r->reseed = NULL;
	/* Nothing may post a pull once the transport is quiesced: stop the
	 * cache's threads first (the disk tier's post what they do not
	 * find on disk).  Then cancel the pulls in flight, which write into
	 * the cache, then free the cache (and its registration), then what
	 * it borrowed (the models' manifests), then the transport. */
	sfs_cache_stop(r->cache);
	size_t left = r->x ? sfs_xport_quiesce(r->x) : 0;
	sfs_cache_free_quiesced(r->cache, left);
	/* The reads that gave up into them have ended now, unless some
	 * could not be (their memory is the transport's until it ends). */
	for (size_t i = 0; i < r->nkept_mrs && !left; i++)
		sfs_xport_mr_dereg(r->kept_mrs[i]);
	if (left && r->kept_mrs)
		sfs_keep_forever(r->kept_mrs); /* as the transport is */
	else
		free(r->kept_mrs);
	for (size_t i = 0; i < r->nmodels; i++)
		model_free(r->models[i]);
	free(r->models);
	/* Nothing else runs: every source goes, retired ones too. */
	for (size_t i = 0; i < r->nsrcs; i++)
		rsrc_free(r->srcs[i]);
	for (struct rsrc *s = r->retired, *next; s; s = next) {
		next = s->next;
		rsrc_free(s);
	}
	fleet_free(r);
	/* What a save that failed left in memory: a last try. */
	char err[300];
	if (r->signstate && sfs_signstate_save(r->signstate, err, sizeof(err)))
		SFS_LOG(SFS_WARN, "trust", "not remembered: %s", err);
	sfs_signstate_free(r->signstate);
	sfs_disk_close(r->disk);
	sfs_xport_close(r->x);
	sfs_tree_free(r->tree);
	pthread_cond_destroy(&r->cond);
	pthread_rwlock_destroy(&r->tree_lock);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->xlock);
	free(r);
}

void sfs_replica_mounted(struct sfs_replica *r, unsigned int major,
			 unsigned int minor)
{
	if (r->ctl)
		sfs_mctl_set_mount(r->ctl, major, minor);
}

void sfs_replica_serve_control(struct sfs_replica *r, int prefetch_all)
{
	char err[256];
	if (sfs_mctl_start(r, &r->ctl, err, sizeof(err))) {
		SFS_LOG(SFS_WARN, "replica",
			"seedfs prefetch will not work: %s", err);
		return;
	}
	r->control = sfs_mctl_path(r->ctl);
	if (prefetch_all && sfs_mctl_prefetch_all(r->ctl))
		SFS_LOG(SFS_WARN, "replica", "--prefetch: cannot start");
}
