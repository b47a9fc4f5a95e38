/* SPDX-License-Identifier: MIT */
#include "replica/gens.h"

#include "cache/cache.h"
#include "common/log.h"
#include "common/util.h"
#include "replica/tree.h"
#include "metadata/control.h"
#include "metadata/manifest.h"
#include "transports/transport.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GENS_ASK_MS 3000     /* the longest an open waits for the seed */
#define GENS_LOOKUP_MS 1000  /* the longest a lookup of a missing name waits */
#define GENS_FRESH_MS 200    /* a missing name asks at most this often */
#define GENS_BACKOFF_MS 1000 /* a failed adoption is retried after this, */
#define GENS_BACKOFF_MAX_MS 60000 /* doubling up to this */

struct sfs_gens {
	struct sfs_gens_cfg cfg;
	pthread_mutex_t lock;
	pthread_cond_t cond;	  /* sweeper wake-up; a check finished */
	struct sfs_view *views;	  /* protected by lock; newest first */
	struct sfs_view *current; /* protected by lock */
	char proto[32];		  /* the protocol read through */
	uint64_t instance;	  /* protected by lock: the current seed run */
	uint64_t peer;		  /* protected by lock: the transport's */
	uint32_t cpeer;		  /* protected by lock: the cache's */
	int checking;	 /* protected by lock: a revalidation is running */
	uint64_t checks; /* protected by lock: revalidations finished */
	int hidden;	 /* protected by lock: current fails cfg.require */
	char why[256];	 /* protected by lock: how, when hidden */
	int unreachable; /* protected by lock: the outage was logged */
	/* protected by lock: while unreachable, opens do not ask again
	 * before this (each would wait the whole timeout) */
	uint64_t retry_ms;
	uint64_t checked_ms;   /* protected by lock: the last check ended */
	int bg_wanted;	       /* protected by lock: the sweeper asks */
	uint64_t silent_since; /* protected by lock: no answer since */
	char ctl_err[SFS_XPORT_ERR_MAX]; /* protected by lock: why */
	/* A generation whose adoption failed is not tried again before
	 * adopt_retry_ms (doubling back-off), unless the seed moves on;
	 * all protected by lock. */
	uint64_t failed_gen, failed_instance, adopt_retry_ms;
	unsigned int adopt_failures;
	/* Connecting to the seed (a new instance) and reconnecting (the
	 * cache's worker) do not run at once on the transport. */
	pthread_mutex_t connect_lock;
	int stop; /* protected by lock */
	pthread_t sweeper;
	int sweeper_started;
};

static void view_free(struct sfs_view *v)
{
	if (!v)
		return;
	sfs_manifest_free(v->m);
	free(v->json);
	free(v->objs);
	free(v->hobjs);
	free(v->pieces);
	free(v);
}

uint32_t sfs_gens_chunk_size(const struct sfs_manifest *m, uint32_t want)
{
	uint32_t chunk = want;
	for (size_t i = 0; i < m->nfiles; i++)
		if (m->files[i].csum_shift &&
		    (1u << m->files[i].csum_shift) > chunk)
			chunk = 1u << m->files[i].csum_shift;
	return chunk;
}

/* Keep the chunks of @v's content in the disk tier, if there is one:
 * keyed by the content digest, so a seed that restarts, or another
 * seed of the same content, finds them again.  Logs when it cannot. */
static void persist(struct sfs_gens *g, const struct sfs_view *v)
{
	const struct sfs_manifest *m = v->m;
	char key[512], about[1024];
	snprintf(key, sizeof(key), "content %016" PRIx64 " model %s",
		 m->content, m->model);
	snprintf(about, sizeof(about),
		 "model: %s\ncontent: %016" PRIx64 "\ngeneration: %" PRIu64
		 "\nseed: %s\ninstance: %016" PRIx64,
		 m->model, m->content, m->generation, g->cfg.seed, m->instance);
	int rc = sfs_cache_persist_set(g->cfg.cache, v->set, key, about);
	if (rc)
		SFS_LOG(SFS_WARN, "gens",
			"generation %" PRIu64 " of %s stays in memory only: "
			"disk tier: %s",
			m->generation, m->model, strerror(-rc));
}

/*
 * The cache set of @v's content (object i: file i, its checksums) and
 * the seed as its holder through cache peer @cpeer: every file's
 * extents as pieces, region ones at endpoint @ep's addresses and keys.
 * Returns 0 or -errno with one line in @err.
 */
static int view_attach(struct sfs_gens *g, struct sfs_view *v, size_t ep,
		       uint32_t cpeer, char *err, size_t errlen)
{
	const struct sfs_manifest *m = v->m;
	struct sfs_cache *c = g->cfg.cache;
	uint64_t *keys = NULL;
	size_t n = m->nfiles, np = 0;
	int rc = -ENOMEM;

	for (size_t i = 0; i < n; i++)
		np += m->files[i].next;
	v->objs = calloc(n ? n : 1, sizeof(*v->objs));
	v->hobjs = calloc(n ? n : 1, sizeof(*v->hobjs));
	v->pieces = calloc(np ? np : 1, sizeof(*v->pieces));
	keys = calloc(m->nregions ? m->nregions : 1, sizeof(*keys));
	if (!v->objs || !v->hobjs || !v->pieces || !keys)
		goto out_msg;
	for (size_t i = 0; i < m->nregions; i++)
		if ((rc = sfs_control_remote_key(
			     g->cfg.x, &m->regions[i].rem[ep], &keys[i]))) {
			snprintf(err, errlen,
				 "protocol %s: cannot use the seed's raw "
				 "keys: %s",
				 m->eps[ep].protocol, strerror(-rc));
			goto out;
		}
	struct sfs_cache_piece *pc = v->pieces;
	for (size_t i = 0; i < n; i++) {
		const struct sfs_mfile *f = &m->files[i];
		v->objs[i] = (struct sfs_cache_obj){
			.len = f->size,
			.csum_shift = f->csum_shift,
			.xxh3 = f->csum_shift ? f->sums : NULL};
		v->hobjs[i].pieces = pc;
		v->hobjs[i].npieces = f->next;
		for (size_t j = 0; j < f->next; j++, pc++) {
			const struct sfs_extent *e = &f->ext[j];
			pc->off = e->off;
			pc->len = e->len;
			if (e->kind == SFS_EXT_INLINE) {
				pc->data = e->data;
				continue;
			}
			pc->raddr =
				m->regions[e->region].rem[ep].raddr + e->roff;
			pc->key = keys[e->region];
		}
	}
	char label[300];
	snprintf(label, sizeof(label), "%s generation %" PRIu64, m->model,
		 m->generation);
	if ((rc = sfs_cache_add_set(c, label, v->objs, n, &v->set))) {
		snprintf(err, errlen, "cache: %s", strerror(-rc));
		goto out;
	}
	if ((rc = sfs_cache_add_holder(c, v->set, cpeer, v->hobjs, n, 0,
				       &v->holder))) {
		snprintf(err, errlen, "cache: %s", strerror(-rc));
		sfs_cache_retire_set(c, v->set);
		goto out;
	}
	v->cpeer = cpeer;
	persist(g, v);
	rc = 0;
	goto out;
out_msg:
	snprintf(err, errlen, "out of memory");
out:
	free(keys);
	return rc;
}

uint64_t sfs_gens_generation(struct sfs_gens *g)
{
	pthread_mutex_lock(&g->lock);
	uint64_t n = g->current->generation;
	pthread_mutex_unlock(&g->lock);
	return n;
}

void sfs_gens_summary(struct sfs_gens *g, char *buf, size_t len, size_t *older)
{
	pthread_mutex_lock(&g->lock);
	const struct sfs_manifest *m = g->current->m;
	uint64_t bytes = 0;
	for (size_t i = 0; i < m->nfiles; i++)
		bytes += m->files[i].size;
	snprintf(buf, len,
		 "%s generation %" PRIu64 " files %zu bytes %" PRIu64
		 " tensors %zu identity %s%s",
		 m->model, m->generation, m->nfiles, bytes, m->ntensors,
		 m->id_short, g->hidden ? " (hidden)" : "");
	*older = 0;
	for (struct sfs_view *v = g->views; v; v = v->next)
		*older += v != g->current && !v->expired;
	pthread_mutex_unlock(&g->lock);
}

void sfs_gens_identity(struct sfs_gens *g, char *buf, size_t len)
{
	pthread_mutex_lock(&g->lock);
	const struct sfs_identity *id = &g->current->m->id;
	snprintf(buf, len,
		 "model=%s revision=%s dtype=%s quant=%s layout=%s "
		 "layout_version=%" PRIu64 " tp=%" PRIu64 "/%" PRIu64
		 " pp=%" PRIu64 "/%" PRIu64 " ep=%" PRIu64 "/%" PRIu64
		 " framework=%s",
		 id->model, id->revision[0] ? id->revision : "-",
		 id->dtype[0] ? id->dtype : "-", id->quant, id->layout,
		 id->layout_version, id->tp_rank, id->tp_size, id->pp_rank,
		 id->pp_size, id->ep_rank, id->ep_size, id->framework);
	pthread_mutex_unlock(&g->lock);
}

int sfs_gens_hidden(struct sfs_gens *g, char *why, size_t len)
{
	pthread_mutex_lock(&g->lock);
	int hidden = g->hidden;
	if (hidden && why)
		snprintf(why, len, "%s", g->why);
	pthread_mutex_unlock(&g->lock);
	return hidden;
}

int sfs_gens_ref(struct sfs_gens *g, struct sfs_view *v)
{
	if (!v)
		return -ESTALE; /* its generation is gone */
	pthread_mutex_lock(&g->lock);
	/* An expired view gets no new reference: the sweeper may be about
	 * to free it (it decided under this lock that nobody holds it). */
	int rc = v->expired ? -ESTALE : 0;
	if (!rc)
		v->refs++;
	pthread_mutex_unlock(&g->lock);
	return rc;
}

void sfs_gens_unref(struct sfs_gens *g, struct sfs_view *v)
{
	pthread_mutex_lock(&g->lock);
	v->refs--;
	if (v->expired && !v->refs)
		pthread_cond_broadcast(&g->cond); /* the sweeper frees it */
	pthread_mutex_unlock(&g->lock);
}

int sfs_gens_alive(struct sfs_gens *g, struct sfs_view *v)
{
	pthread_mutex_lock(&g->lock);
	int alive = !v->expired;
	pthread_mutex_unlock(&g->lock);
	return alive;
}

/* The inodes whose bytes come from @v; @clear also cuts them loose. */
static size_t view_inodes(struct sfs_gens *g, struct sfs_view *v, int clear,
			  uint64_t **inos)
{
	size_t n = 0, cap = 0;
	struct sfs_tree *t = g->cfg.tree;

	*inos = NULL;
	if (clear)
		pthread_rwlock_wrlock(g->cfg.tree_lock);
	else
		pthread_rwlock_rdlock(g->cfg.tree_lock);
	for (size_t i = 0; i < t->n; i++) {
		struct sfs_node *nd = &t->nodes[i];
		if (nd->owner != v)
			continue;
		if (clear) {
			nd->owner = NULL;
			nd->file = NULL;
			nd->tensor = NULL;
			nd->blob = NULL;
		} else if (!sfs_grow((void **)inos, &cap, n + 1,
				     sizeof(**inos))) {
			(*inos)[n++] = i + 1;
		}
	}
	pthread_rwlock_unlock(g->cfg.tree_lock);
	return n;
}

static int check(struct sfs_gens *g, unsigned int ask_ms);

/* Run one check (g->lock held, g->checking just set; dropped meanwhile),
 * and tell those who wait for it. */
static int run_check(struct sfs_gens *g, unsigned int ask_ms)
{
	pthread_mutex_unlock(&g->lock);
	int rc = check(g, ask_ms);
	pthread_mutex_lock(&g->lock);
	g->checking = 0;
	g->checks++;
	g->checked_ms = sfs_now_ms();
	pthread_cond_broadcast(&g->cond);
	return rc;
}

/* @v is retired: if it was the last view read through its cache peer,
 * of a seed run that is gone, the peer goes too (a raw verbs queue
 * pair is released). */
static void retire_peer(struct sfs_gens *g, const struct sfs_view *v)
{
	int used = 0;
	pthread_mutex_lock(&g->lock);
	used = v->cpeer == g->cpeer;
	for (const struct sfs_view *o = g->views; o && !used; o = o->next)
		used = o != v && !o->expired && o->cpeer == v->cpeer;
	pthread_mutex_unlock(&g->lock);
	if (!used)
		sfs_cache_remove_peer(g->cfg.cache, v->cpeer);
}

/* Expire what is due, free what nobody holds, ask the seed when an open
 * wanted it asked behind its back; sleep until the next. */
static void *sweeper(void *arg)
{
	struct sfs_gens *g = arg;

	pthread_mutex_lock(&g->lock);
	while (!g->stop) {
		if (g->bg_wanted && !g->checking) {
			g->bg_wanted = 0;
			g->checking = 1;
			run_check(g, GENS_ASK_MS);
			continue;
		}
		uint64_t now = sfs_now_ms(), next = 0;
		struct sfs_view *due = NULL, *dead = NULL;
		for (struct sfs_view **pv = &g->views; *pv;) {
			struct sfs_view *v = *pv;
			if (v != g->current && !v->expired && v->expires_ms) {
				if (v->expires_ms <= now && !due)
					due = v;
				else if (!next || v->expires_ms < next)
					next = v->expires_ms;
			}
			if (v != g->current && v->expired && !v->refs &&
			    !dead) {
				*pv = v->next; /* unlink: freed below */
				dead = v;
				continue;
			}
			pv = &v->next;
		}
		if (due)
			due->expired = 1;
		void (*inval)(void *, uint64_t) = g->cfg.inval_inode;
		void *inval_arg = g->cfg.inval_arg;
		if (due || dead) {
			pthread_mutex_unlock(&g->lock);
			uint64_t *inos;
			if (due) {
				/* Reads through it fail with ESTALE from now
				 * on; its pages leave the page cache. */
				sfs_cache_retire_set(g->cfg.cache, due->set);
				retire_peer(g, due);
				size_t n = view_inodes(g, due, 0, &inos);
				for (size_t i = 0; inval && i < n; i++)
					inval(inval_arg, inos[i]);
				free(inos);
				SFS_LOG(SFS_INFO, "gens",
					"generation %" PRIu64 " is no longer "
					"served: its open files get ESTALE",
					due->generation);
			}
			if (dead) {
				view_inodes(g, dead, 1, &inos);
				free(inos);
				view_free(dead);
			}
			pthread_mutex_lock(&g->lock);
			continue;
		}
		struct timespec ts = sfs_abstime(
			next ? (next > now ? next - now : 0) : 1000);
		pthread_cond_timedwait(&g->cond, &g->lock, &ts);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

int sfs_gens_new(const struct sfs_gens_cfg *cfg, char *json, size_t json_len,
		 struct sfs_manifest *m, struct sfs_gens **out,
		 struct sfs_view **first)
{
	struct sfs_gens *g = calloc(1, sizeof(*g));
	struct sfs_view *v = calloc(1, sizeof(*v));
	char err[SFS_XPORT_ERR_MAX];
	int rc;

	if (!g || !v) {
		free(g);
		free(v);
		sfs_manifest_free(m);
		free(json);
		return -ENOMEM;
	}
	g->cfg = *cfg;
	pthread_mutex_init(&g->lock, NULL);
	pthread_mutex_init(&g->connect_lock, NULL);
	v->generation = m->generation;
	v->json = json;
	v->json_len = json_len;
	v->m = m;
	if ((rc = sfs_cond_init(&g->cond))) {
		free(g);
		view_free(v);
		return rc;
	}
	snprintf(g->proto, sizeof(g->proto), "%s", m->eps[cfg->ep].protocol);
	g->views = g->current = v;
	g->instance = m->instance;
	g->peer = cfg->peer;
	g->cpeer = cfg->cpeer;
	g->hidden = !sfs_require_match(cfg->require, &m->id, g->why,
				       sizeof(g->why));
	if ((rc = view_attach(g, v, cfg->ep, cfg->cpeer, err, sizeof(err)))) {
		SFS_LOG(SFS_ERR, "gens", "%s", err);
		sfs_gens_free(g);
		return rc;
	}
	if ((rc = -pthread_create(&g->sweeper, NULL, sweeper, g))) {
		sfs_gens_free(g);
		return rc;
	}
	g->sweeper_started = 1;
	*first = v;
	*out = g;
	return 0;
}

void sfs_gens_set_inval(struct sfs_gens *g, void (*fn)(void *, uint64_t),
			void *arg)
{
	pthread_mutex_lock(&g->lock);
	g->cfg.inval_inode = fn;
	g->cfg.inval_arg = arg;
	pthread_mutex_unlock(&g->lock);
}

void sfs_gens_stop(struct sfs_gens *g)
{
	if (!g || !g->sweeper_started)
		return;
	pthread_mutex_lock(&g->lock);
	g->stop = 1;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	pthread_join(g->sweeper, NULL);
	g->sweeper_started = 0;
}

void sfs_gens_free(struct sfs_gens *g)
{
	if (!g)
		return;
	sfs_gens_stop(g);
	while (g->views) {
		struct sfs_view *v = g->views;
		g->views = v->next;
		view_free(v);
	}
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
	pthread_mutex_destroy(&g->connect_lock);
	free(g);
}

/* GET /v1/generation: the seed's current generation, its instance, and
 * how long each superseded generation is still served. */
struct seed_gens {
	uint64_t generation, instance;
	size_t n;
	struct {
		uint64_t generation;
		int64_t expires_in_ms; /* -1: current, no expiry */
	} served[16];
};

static int ask(struct sfs_gens *g, unsigned int ask_ms, struct seed_gens *sg,
	       char *err, size_t errlen)
{
	char *body;
	size_t len;
	json_error_t je;
	int rc = sfs_control_get(g->cfg.seed, "/v1/generation",
				 SFS_MIN(g->cfg.timeout_ms, ask_ms), 65536,
				 &body, &len, err, errlen);
	if (rc)
		return rc;
	json_t *r = json_loadb(body, len, 0, &je), *a, *e;
	free(body);
	const char *inst = json_string_value(json_object_get(r, "instance"));
	a = json_object_get(r, "served");
	if (!json_is_integer(json_object_get(r, "generation")) || !inst ||
	    sfs_parse_u64(inst, &sg->instance) || !json_is_array(a)) {
		json_decref(r);
		snprintf(err, errlen,
			 "the seed's /v1/generation answer is "
			 "malformed");
		return -EPROTO;
	}
	sg->generation =
		(uint64_t)json_integer_value(json_object_get(r, "generation"));
	sg->n = 0;
	size_t i;
	json_array_foreach (a, i, e) {
		if (sg->n == SFS_ARRAY_SIZE(sg->served))
			break;
		json_t *x = json_object_get(e, "expires_in_ms");
		sg->served[sg->n].generation = (uint64_t)json_integer_value(
			json_object_get(e, "generation"));
		sg->served[sg->n].expires_in_ms =
			json_is_integer(x) ? json_integer_value(x) : -1;
		sg->n++;
	}
	json_decref(r);
	return 0;
}

/* What the seed says of the views we hold (same seed run only). */
static void update_expiry(struct sfs_gens *g, const struct seed_gens *sg)
{
	uint64_t now = sfs_now_ms();
	int changed = 0;

	for (struct sfs_view *v = g->views; v; v = v->next) {
		if (v == g->current || v->expired ||
		    sg->instance != g->instance)
			continue;
		uint64_t exp = now; /* not listed: no longer served */
		for (size_t i = 0; i < sg->n; i++)
			if (sg->served[i].generation == v->generation)
				exp = sg->served[i].expires_in_ms < 0
					      ? 0
					      : now + (uint64_t)sg->served[i]
								.expires_in_ms;
		if (exp && (!v->expires_ms || exp < v->expires_ms)) {
			v->expires_ms = exp;
			changed = 1;
		}
	}
	if (changed)
		pthread_cond_broadcast(&g->cond);
}

/* Fetch, check and install the seed's current generation. */
static int adopt(struct sfs_gens *g, const struct seed_gens *sg)
{
	char err[SFS_XPORT_ERR_MAX], *json = NULL;
	size_t len, nsup = 0;
	struct sfs_manifest *m = NULL;
	struct sfs_view *v = NULL, *old;
	uint64_t *sup = NULL, peer;
	uint32_t cpeer, fresh_cpeer = SFS_CACHE_NONE;
	int rc;

	pthread_mutex_lock(&g->lock);
	old = g->current;
	peer = g->peer;
	cpeer = g->cpeer;
	uint64_t instance = g->instance;
	pthread_mutex_unlock(&g->lock);

	if ((rc = sfs_control_get(g->cfg.seed, "/v1/manifest",
				  g->cfg.timeout_ms, SFS_MANIFEST_MAX, &json,
				  &len, err, sizeof(err))) ||
	    (rc = sfs_manifest_decode(json, len, &m, err, sizeof(err))))
		goto fail;
	if (strcmp(m->model, old->m->model)) {
		snprintf(err, sizeof(err), "the seed now publishes %s, not %s",
			 m->model, old->m->model);
		rc = -EINVAL;
		goto fail;
	}
	/* The endpoint we use, in the new manifest. */
	ssize_t ep = sfs_manifest_endpoint(m, g->proto);
	if (ep < 0) {
		snprintf(err, sizeof(err), "the seed no longer serves %s",
			 g->proto);
		rc = -EPROTONOSUPPORT;
		goto fail;
	}
	if (sfs_gens_chunk_size(m, 0) > g->cfg.chunk_size) {
		snprintf(err, sizeof(err),
			 "its checksum chunks (%u bytes) are larger than this "
			 "mount's chunks (%u): remount",
			 sfs_gens_chunk_size(m, 0), g->cfg.chunk_size);
		rc = -EINVAL;
		goto fail;
	}
	if (m->instance != instance) {
		/* A new seed run: a new connection, a new cache peer. */
		pthread_mutex_lock(&g->connect_lock);
		rc = sfs_control_connect_peer(g->cfg.seed, g->cfg.x,
					      &m->eps[ep], g->cfg.timeout_ms,
					      &peer, err, sizeof(err));
		pthread_mutex_unlock(&g->connect_lock);
		if (rc)
			goto fail;
		char label[300];
		snprintf(label, sizeof(label), "seed %s", g->cfg.seed);
		if ((rc = sfs_cache_add_peer(g->cfg.cache, peer, label,
					     &fresh_cpeer)))
			goto fail_msg;
		cpeer = fresh_cpeer;
	}
	rc = -ENOMEM;
	if (!(v = calloc(1, sizeof(*v))))
		goto fail_msg;
	v->generation = m->generation;
	v->json = json;
	v->json_len = len;
	v->m = m;
	if ((rc = view_attach(g, v, (size_t)ep, cpeer, err, sizeof(err)))) {
		v->json = NULL;
		v->m = NULL;
		goto fail;
	}
	/* A generation that does not meet --require is not shown: the
	 * model leaves the tree until one that does comes. */
	char why[256];
	int show = sfs_require_match(g->cfg.require, &m->id, why, sizeof(why));
	pthread_rwlock_wrlock(g->cfg.tree_lock);
	rc = show ? sfs_tree_replace_model(g->cfg.tree, m, v->set, json, len, v,
					   &sup, &nsup)
		  : sfs_tree_hide_model(g->cfg.tree, m->model, &sup, &nsup);
	pthread_rwlock_unlock(g->cfg.tree_lock);
	if (!show)
		SFS_LOG(SFS_WARN, "gens",
			"generation %" PRIu64 " of %s is hidden: %s",
			m->generation, m->model, why);
	free(sup);
	/* From here on the tree may point at @v: it is installed. */
	if (rc)
		SFS_LOG(SFS_ERR, "gens",
			"generation %" PRIu64 " only partly shown: %s",
			m->generation, strerror(-rc));

	pthread_mutex_lock(&g->lock);
	v->next = g->views;
	g->views = v;
	g->current = v;
	g->instance = m->instance;
	g->peer = peer;
	g->cpeer = cpeer;
	g->adopt_failures = 0;
	g->hidden = !show;
	snprintf(g->why, sizeof(g->why), "%s", show ? "" : why);
	/* The one it replaces stays readable for the grace period. */
	if (!old->expires_ms)
		old->expires_ms = sfs_now_ms() + old->m->grace_seconds * 1000;
	update_expiry(g, sg);
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	SFS_LOG(SFS_INFO, "gens",
		"adopted generation %" PRIu64 " of %s (%zu files or entries "
		"changed); generation %" PRIu64 " stays readable for open "
		"files while the seed serves it",
		m->generation, m->model, nsup, old->generation);
	return 0;

fail_msg:
	snprintf(err, sizeof(err), "%s", strerror(-rc));
fail:
	pthread_mutex_lock(&g->lock);
	/* Not again at every open: after a back-off, or when the seed
	 * publishes something else. */
	if (g->failed_gen != sg->generation ||
	    g->failed_instance != sg->instance)
		g->adopt_failures = 0;
	g->failed_gen = sg->generation;
	g->failed_instance = sg->instance;
	uint64_t wait = SFS_MIN((uint64_t)GENS_BACKOFF_MS
					<< SFS_MIN(g->adopt_failures, 16u),
				(uint64_t)GENS_BACKOFF_MAX_MS);
	g->adopt_failures++;
	g->adopt_retry_ms = sfs_now_ms() + wait;
	pthread_mutex_unlock(&g->lock);
	SFS_LOG(SFS_WARN, "gens",
		"cannot adopt the seed's generation %" PRIu64 ": %s; still "
		"serving generation %" PRIu64 " (next try in %" PRIu64 " ms)",
		sg->generation, err, old->generation, wait);
	view_free(v); /* never installed */
	sfs_manifest_free(m);
	free(json);
	if (fresh_cpeer != SFS_CACHE_NONE)
		sfs_cache_remove_peer(g->cfg.cache, fresh_cpeer);
	return rc;
}

static int check(struct sfs_gens *g, unsigned int ask_ms)
{
	struct seed_gens sg;
	char err[SFS_XPORT_ERR_MAX];
	uint64_t t0 = sfs_now_ms();
	int rc = ask(g, ask_ms, &sg, err, sizeof(err));

	pthread_mutex_lock(&g->lock);
	uint32_t cpeer = g->cpeer;
	if (rc) {
		if (!g->unreachable)
			SFS_LOG(SFS_WARN, "gens",
				"cannot ask the seed for its generation "
				"(%s): opens go on with generation %" PRIu64,
				err, g->current->generation);
		if (!g->unreachable || !g->silent_since)
			g->silent_since = t0;
		snprintf(g->ctl_err, sizeof(g->ctl_err), "%s", err);
		g->unreachable = 1;
		g->retry_ms = sfs_now_ms() + g->cfg.timeout_ms;
		uint64_t since = g->silent_since;
		pthread_mutex_unlock(&g->lock);
		/* A read that follows and sees no progress counts from
		 * here: the open and the read fail within one timeout. */
		sfs_cache_note_silence(g->cfg.cache, cpeer, since);
		return 0;
	}
	if (g->unreachable) {
		SFS_LOG(SFS_INFO, "gens", "the seed answers again");
		sfs_cache_note_silence(g->cfg.cache, cpeer, 0);
	}
	g->unreachable = 0;
	g->silent_since = 0;
	update_expiry(g, &sg);
	int newer = sg.instance != g->instance ||
		    sg.generation != g->current->generation;
	if (newer && sg.generation == g->failed_gen &&
	    sg.instance == g->failed_instance &&
	    sfs_now_ms() < g->adopt_retry_ms)
		newer = 0; /* failed a moment ago: not at every open */
	pthread_mutex_unlock(&g->lock);
	return newer ? adopt(g, &sg) : 0;
}

/*
 * Ask the seed unless a check ended less than @fresh_ms ago; a caller
 * that finds one running shares its answer.  @ask_ms bounds the
 * question.
 */
static int revalidate(struct sfs_gens *g, unsigned int ask_ms,
		      uint64_t fresh_ms)
{
	pthread_mutex_lock(&g->lock);
	if (fresh_ms && g->checked_ms &&
	    sfs_now_ms() < g->checked_ms + fresh_ms) {
		pthread_mutex_unlock(&g->lock);
		return 0;
	}
	if (g->checking) {
		/* Another open is asking: its answer is ours too. */
		uint64_t seen = g->checks;
		struct timespec ts = sfs_abstime(ask_ms);
		while (g->checking && g->checks == seen &&
		       !pthread_cond_timedwait(&g->cond, &g->lock, &ts))
			;
		pthread_mutex_unlock(&g->lock);
		return 0;
	}
	if (g->unreachable) {
		/* It did not answer last time: do not make this open wait
		 * for it again (with a read after it, that would be two
		 * timeouts).  It is asked again behind, a timeout after the
		 * last question; the open goes on with what is current. */
		if (sfs_now_ms() >= g->retry_ms) {
			g->bg_wanted = 1;
			pthread_cond_broadcast(&g->cond);
		}
		pthread_mutex_unlock(&g->lock);
		return 0;
	}
	g->checking = 1;
	int rc = run_check(g, ask_ms);
	pthread_mutex_unlock(&g->lock);
	return rc;
}

int sfs_gens_revalidate(struct sfs_gens *g)
{
	return revalidate(g, GENS_ASK_MS, 0);
}

int sfs_gens_revalidate_missing(struct sfs_gens *g)
{
	return revalidate(g, GENS_LOOKUP_MS, GENS_FRESH_MS);
}

int sfs_gens_current(struct sfs_gens *g, const char *name, struct sfs_view **v,
		     const struct sfs_manifest **m)
{
	pthread_mutex_lock(&g->lock);
	struct sfs_view *c = g->current;
	int rc = strcmp(c->m->model, name) || g->hidden ? -ENOENT : 0;
	if (!rc) {
		c->refs++;
		*v = c;
		*m = c->m;
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

uint32_t sfs_gens_current_peer(struct sfs_gens *g)
{
	pthread_mutex_lock(&g->lock);
	uint32_t p = g->cpeer;
	pthread_mutex_unlock(&g->lock);
	return p;
}

int sfs_gens_control(struct sfs_gens *g, uint64_t *silent_ms, char *err,
		     size_t len)
{
	pthread_mutex_lock(&g->lock);
	int silent = g->unreachable;
	if (silent) {
		*silent_ms = sfs_now_ms() - g->silent_since;
		snprintf(err, len, "%s", g->ctl_err);
	}
	pthread_mutex_unlock(&g->lock);
	return silent;
}

int sfs_gens_reconnect(struct sfs_gens *g, uint32_t cpeer, uint64_t old_peer,
		       uint64_t *new_peer)
{
	char err[SFS_XPORT_ERR_MAX];
	pthread_mutex_lock(&g->lock);
	const struct sfs_manifest *m = g->current->m;
	/* Adoption refuses a manifest without it: always there. */
	ssize_t i = sfs_manifest_endpoint(m, g->proto);
	struct sfs_endpoint ep;
	if (i >= 0)
		ep = m->eps[i];
	uint32_t cur = g->cpeer;
	pthread_mutex_unlock(&g->lock);
	*new_peer = old_peer;
	if (i < 0)
		return -EPROTONOSUPPORT;
	/* A peer of a seed run that is gone is not made anew: the current
	 * one's is (the reset drops every connection anyway). */
	if (cpeer != cur && sfs_xport_needs_hello(g->cfg.x))
		return -ESTALE;
	pthread_mutex_lock(&g->connect_lock);
	int rc = sfs_control_reconnect(g->cfg.seed, g->cfg.x, &ep,
				       g->cfg.timeout_ms, new_peer, err,
				       sizeof(err));
	pthread_mutex_unlock(&g->connect_lock);
	if (rc) {
		SFS_LOG(SFS_WARN, "gens", "reconnecting to %s: %s", g->cfg.seed,
			err);
		return rc;
	}
	pthread_mutex_lock(&g->lock);
	if (g->cpeer == cpeer)
		g->peer = *new_peer;
	pthread_mutex_unlock(&g->lock);
	return 0;
}
