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
	struct sfs_cache_cfg cc = {.xport = r->x,
				   .size = c->cache_size,
				   .chunk_size = r->chunk_size,
				   .timeout_ms = c->timeout_ms,
				   .no_verify = c->no_verify,
				   .disk = r->disk,
				   .reconnect = rsrc_reconnect,
				   .reconnect_arg = r,
				   .test_verify_delay_ms =
					   c->test_verify_delay_ms};
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
	sfs_disk_close(r->disk);
	sfs_xport_close(r->x);
	sfs_tree_free(r->tree);
	pthread_cond_destroy(&r->cond);
	pthread_rwlock_destroy(&r->tree_lock);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->xlock);
	free(r);
}

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

char *sfs_replica_models(struct sfs_replica *r, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = '\0';
	struct sfs_model **all;
	size_t n = model_all(r, &all);
	for (size_t i = 0; i < n && o < len; i++) {
		struct sfs_model *mo = all[i];
		int hidden = model_hidden(mo, NULL, 0);
		int k = snprintf(buf + o, len - o, "%s%s%s", o ? ", " : "",
				 mo->name, hidden ? " (hidden)" : "");
		o += k > 0 ? (size_t)k : 0;
	}
	model_put_all(all, n);
	return buf;
}

int sfs_replica_hidden(struct sfs_replica *r, char *why, size_t len)
{
	struct sfs_model **all;
	size_t n = model_all(r, &all);
	int hidden = 0;
	for (size_t i = 0; i < n && !hidden; i++) {
		char w[256];
		if ((hidden = model_hidden(all[i], w, sizeof(w))) && why)
			snprintf(why, len, "%s: %s", all[i]->name, w);
	}
	model_put_all(all, n);
	return hidden;
}

/* The name of the model @ino is in (a directory under the root), into
 * @name; 0 when @ino is the root or not in a model. */
static int model_of_ino(struct sfs_replica *r, uint64_t ino, char *name,
			size_t len)
{
	int found = 0;
	pthread_rwlock_rdlock(&r->tree_lock);
	for (int depth = 0; ino != SFS_ROOT_INO && depth < 4096; depth++) {
		const struct sfs_node *n = sfs_tree_get(r->tree, ino);
		if (!n)
			break;
		if (n->parent == SFS_ROOT_INO) {
			found = strcmp(n->name, SFS_MF_RESERVED) != 0;
			if (found)
				snprintf(name, len, "%s", n->name);
			break;
		}
		ino = n->parent;
	}
	pthread_rwlock_unlock(&r->tree_lock);
	return found;
}

static void revalidate(struct sfs_replica *r, uint64_t ino, unsigned int ask_ms,
		       uint64_t fresh_ms)
{
	char name[SFS_MF_NAME_MAX + 1];
	int watched = fleet_healthy(r);
	if (model_of_ino(r, ino, name, sizeof(name))) {
		struct rsrc *s = rsrc_leader(r, name);
		/* The registry's watch tells what is new: no question while
		 * the leader's record says what it last answered. */
		if (s && !(watched && rsrc_reg_fresh(s, name)))
			rsrc_revalidate(s, ask_ms, fresh_ms);
		rsrc_put(s);
		return;
	}
	/* The root: every seed (a model may come, or one hidden may match
	 * again); with the watch running, only those it does not follow. */
	struct rsrc **all;
	size_t n = rsrc_all(r, &all);
	for (size_t i = 0; i < n; i++)
		if (!all[i]->reseeder && !(watched && all[i]->registered))
			rsrc_revalidate(all[i], ask_ms, fresh_ms);
	rsrc_put_all(all, n);
}

void sfs_replica_revalidate(struct sfs_replica *r, uint64_t ino)
{
	revalidate(r, ino, RSRC_ASK_MS, 0);
}

void sfs_replica_revalidate_missing(struct sfs_replica *r, uint64_t ino)
{
	revalidate(r, ino, RSRC_LOOKUP_MS, RSRC_FRESH_MS);
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

int sfs_replica_wait_listed(struct sfs_replica *r, unsigned int ms)
{
	char addr[300];
	uint64_t until = sfs_now_ms() + ms;
	if (!r->reseed)
		return -ENOENT;
	while (rsrc_self_addr(r, addr, sizeof(addr))) {
		if (sfs_now_ms() >= until)
			return -ETIMEDOUT;
		usleep(20000);
	}
	return 0;
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
	struct sfs_model *mo = model_get(r, name);
	int rc = -ENOENT;
	if (!mo)
		return rc;
	pthread_mutex_lock(&mo->lock);
	if (mo->current && !mo->hidden) {
		*v = mo->current;
		*m = mo->current->m;
		mo->current->refs++;
		rc = 0;
	}
	pthread_mutex_unlock(&mo->lock);
	model_put(mo);
	return rc;
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
