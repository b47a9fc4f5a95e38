/* SPDX-License-Identifier: MIT */
/*
 * model.c - models and their views (model.h): a source's content offered
 * to a model becomes a holder of the view of that content, or the new
 * current view (from the model's leader), or is refused with the field
 * that differs; holders go when their source stops serving them, and a
 * superseded view no seed serves any more expires (the sweeper).
 */
#include "replica/replica_impl.h"

#include "cache/cache.h"
#include "common/log.h"
#include "common/util.h"
#include "control/control.h"
#include "control/sign.h"
#include "control/signstate.h"
#include "metadata/holdruns.h"
#include "metadata/jsonlim.h"
#include "replica/readahead.h"
#include "replica/tree.h"
#include "transports/transport.h"
#include "common/xxh.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t model_chunk_size(const struct sfs_manifest *m, uint32_t want)
{
	uint32_t chunk = want;
	for (size_t i = 0; i < m->nfiles; i++)
		if (m->files[i].csum_shift &&
		    (1u << m->files[i].csum_shift) > chunk)
			chunk = 1u << m->files[i].csum_shift;
	return chunk;
}

/* The model named @name (r->lock held), or NULL. */
static struct sfs_model *find(struct sfs_replica *r, const char *name)
{
	for (size_t i = 0; i < r->nmodels; i++)
		if (!strcmp(r->models[i]->name, name))
			return r->models[i];
	return NULL;
}

struct sfs_model *model_get(struct sfs_replica *r, const char *name)
{
	pthread_mutex_lock(&r->lock);
	struct sfs_model *mo = find(r, name);
	if (mo)
		mo->refs++;
	pthread_mutex_unlock(&r->lock);
	return mo;
}

/* @h's imported raw keys go back to the transport (before it closes:
 * models are freed first). */
static void holder_keys_release(struct sfs_vholder *h)
{
	struct sfs_xport *x = h->src ? h->src->r->x : NULL;
	for (size_t i = 0; i < h->nrawkeys; i++)
		sfs_xport_key_release(x, h->rawkeys[i]);
	if (h->slab_raw)
		sfs_xport_key_release(x, h->slab_key);
	free(h->rawkeys);
	h->rawkeys = NULL;
	h->nrawkeys = 0;
	h->slab_raw = 0;
}

size_t model_share(const struct sfs_replica *r)
{
	return SFS_MAX(1, SFS_MIN(r->max_models / 4, (size_t)RMODEL_MAX));
}

/* Room for one more model from @src (r->lock held): 0, or -ENOSPC with
 * @why. */
static int room(struct sfs_replica *r, struct rsrc *src, char *why,
		size_t whylen)
{
	if (r->nmodels >= r->max_models) {
		snprintf(why, whylen,
			 "the mount holds %zu models, the most it takes "
			 "(--max-models)",
			 r->nmodels);
		return -ENOSPC;
	}
	if (src->nmodels >= model_share(r)) {
		snprintf(why, whylen,
			 "it brought in %zu models, the most one source may "
			 "(a quarter of --max-models %zu, at most %d)",
			 src->nmodels, r->max_models, RMODEL_MAX);
		return -ENOSPC;
	}
	return 0;
}

/* @name from @src refused at the caps (r->lock held): counted; 1 when
 * it is to be said (once a minute per source: a source that lists new
 * names at every answer would fill the log otherwise). */
static int refused(struct sfs_replica *r, struct rsrc *src)
{
	uint64_t now = sfs_now_ms();
	int say = !src->cap_said_ms || now >= src->cap_said_ms + 60000;
	if (say)
		src->cap_said_ms = now;
	src->models_refused++;
	r->models_refused++;
	return say;
}

static void say_refused(const char *name, struct rsrc *src, const char *why)
{
	SFS_LOG(SFS_WARN, "model",
		"not adding model %s from %s: %s; more from it are refused "
		"until there is room (counted in status)",
		name, src->addr, why);
}

int model_room(struct sfs_replica *r, const char *name, struct rsrc *src,
	       char *why, size_t whylen)
{
	int say = 0;
	pthread_mutex_lock(&r->lock);
	int rc = find(r, name) ? 0 : room(r, src, why, whylen);
	if (rc)
		say = refused(r, src);
	pthread_mutex_unlock(&r->lock);
	if (say)
		say_refused(name, src, why);
	return rc;
}

int model_make(struct sfs_replica *r, const char *name, struct rsrc *src,
	       struct sfs_model **out, char *why, size_t whylen)
{
	struct sfs_model *mo = NULL;
	int rc = 0, say = 0;

	pthread_mutex_lock(&r->lock);
	if ((mo = find(r, name))) {
		mo->refs++;
		goto out;
	}
	if (src->retired) { /* leaving: what it offers meanwhile is not taken */
		snprintf(why, whylen, "the source is no longer one");
		rc = -ESHUTDOWN;
		goto out;
	}
	if ((rc = room(r, src, why, whylen))) {
		say = refused(r, src);
		goto out;
	}
	rc = -ENOMEM;
	snprintf(why, whylen, "out of memory");
	if (sfs_grow((void **)&r->models, &r->cap_models, r->nmodels + 1,
		     sizeof(r->models[0])) ||
	    !(mo = calloc(1, sizeof(*mo))))
		goto out;
	if (!(mo->name = strdup(name))) {
		free(mo);
		mo = NULL;
		goto out;
	}
	mo->r = r;
	mo->origin = src;
	mo->refs = 1;
	pthread_mutex_init(&mo->lock, NULL);
	pthread_mutex_init(&mo->adopt_lock, NULL);
	r->models[r->nmodels++] = mo;
	src->nmodels++;
	rc = 0;
out:
	pthread_mutex_unlock(&r->lock);
	if (say)
		say_refused(name, src, why);
	*out = rc ? NULL : mo;
	return rc;
}

size_t model_all(struct sfs_replica *r, struct sfs_model ***out)
{
	pthread_mutex_lock(&r->lock);
	size_t n = r->nmodels;
	struct sfs_model **all = malloc((n ? n : 1) * sizeof(*all));
	for (size_t i = 0; all && i < n; i++) {
		all[i] = r->models[i];
		all[i]->refs++;
	}
	pthread_mutex_unlock(&r->lock);
	*out = all;
	return all ? n : 0;
}

void model_put(struct sfs_model *mo)
{
	if (!mo)
		return;
	struct sfs_replica *r = mo->r;
	pthread_mutex_lock(&r->lock);
	mo->refs--;
	pthread_mutex_unlock(&r->lock);
}

void model_put_all(struct sfs_model **all, size_t n)
{
	for (size_t i = 0; i < n; i++)
		model_put(all[i]);
	free(all);
}

static void holder_free(struct sfs_vholder *h)
{
	if (!h)
		return;
	holder_keys_release(h);
	if (!h->view_m)
		sfs_manifest_free(h->m);
	free(h->hobjs);
	free(h->pieces);
	model_slots_free(&h->slots);
	free(h);
}

/* Holders taken out of their views (a list through ->next): out of the
 * cache, freed.  Called without the model's lock. */
static void holders_drop(struct sfs_replica *r, struct sfs_vholder *gone)
{
	while (gone) {
		struct sfs_vholder *h = gone;
		gone = h->next;
		sfs_cache_remove_holder(r->cache, h->holder);
		holder_free(h);
	}
}

/* A seed's grace past its holder, from the manifest it gave (@h's
 * own: a view's may be a re-seeder's), at most a day. */
#define SEED_GRACE_MAX_MS (24ull * 3600 * 1000)
/* A seed that still serves a superseded generation as its current says
 * so within this (its next answer: every second, every 10 s for one a
 * registry listed), before the bound adopt puts on its holder ends. */
#define SEED_RELIST_MS 15000

static uint64_t holder_grace_ms(const struct sfs_vholder *h)
{
	return SFS_MIN(h->m->grace_seconds * 1000, SEED_GRACE_MAX_MS);
}

/* Seed holder @h of @v leaves it at @now (mo->lock held): the grace it
 * gave @v outlives it (a seed's current generation: the grace it
 * announced, from now).  Only for a run that went (a restart, a record
 * that lapsed, a source dropped): a run that stops listing @v has ended
 * it itself. */
static void note_seed_gone(struct sfs_view *v, const struct sfs_vholder *h,
			   uint64_t now)
{
	if (h->partial)
		return;
	uint64_t until =
		h->expires_ms ? h->expires_ms : now + holder_grace_ms(h);
	if (until > v->seed_until_ms)
		v->seed_until_ms = until;
}

/* Tell the kernel @n inodes changed (their page cache goes). */
static void inval_inos(struct sfs_replica *r, const uint64_t *inos, size_t n)
{
	pthread_mutex_lock(&r->lock);
	void (*inval)(void *, uint64_t) = r->inval;
	void *arg = r->inval_arg;
	if (inval)
		r->inval_busy++; /* sfs_replica_set_inval waits for us */
	pthread_mutex_unlock(&r->lock);
	if (!inval)
		return;
	for (size_t i = 0; i < n; i++)
		inval(arg, inos[i]);
	pthread_mutex_lock(&r->lock);
	if (--r->inval_busy == 0)
		pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* Free @v with its manifest (the cache is gone, or never had its set).
 * NULL is fine. */
static void view_free(struct sfs_view *v)
{
	if (!v)
		return;
	while (v->holders) {
		struct sfs_vholder *h = v->holders;
		v->holders = h->next;
		holder_free(h);
	}
	sfs_manifest_free(v->m);
	sfs_ra_tensors_free(v->tensors);
	free(v->json);
	free(v->objs);
	free(v);
}

/* The cache's release callback: its set no longer reads the checksums
 * in manifest @arg. */
static void manifest_release(void *arg)
{
	sfs_manifest_free(arg);
}

/*
 * Free @v while the cache runs: nothing of the replica uses it any more
 * (no reference, no tree node, no holder).  Its cache set is released
 * with its manifest: the set borrows the manifest's checksums, and a
 * chunk of it may still be checked against them on a transport or disk
 * thread, outside any lock of ours; the cache frees the manifest once
 * nothing of the set is left (sfs_cache_release_set).
 */
static void view_release(struct sfs_replica *r, struct sfs_view *v)
{
	sfs_cache_release_set(r->cache, v->set, manifest_release, v->m);
	v->m = NULL;
	view_free(v);
}

void model_free(struct sfs_model *mo)
{
	if (!mo)
		return;
	while (mo->views) {
		struct sfs_view *v = mo->views;
		mo->views = v->next;
		view_free(v);
	}
	pthread_mutex_destroy(&mo->lock);
	pthread_mutex_destroy(&mo->adopt_lock);
	free(mo->name);
	free(mo);
}

int model_hidden(struct sfs_model *mo, char *why, size_t len)
{
	pthread_mutex_lock(&mo->lock);
	int h = mo->hidden;
	if (h && why)
		snprintf(why, len, "%s", mo->why);
	pthread_mutex_unlock(&mo->lock);
	return h;
}

/* The first field in which @b (a source's) differs from @a (ours). */
static void differs(const struct sfs_manifest *a, const struct sfs_manifest *b,
		    char *why, size_t len)
{
	if (sfs_identity_differs(&a->id, &b->id, why, len))
		return;
	json_t *map = json_object();
	for (size_t i = 0; map && i < a->nfiles; i++)
		json_object_set_new_nocheck(map, a->files[i].path,
					    json_integer((json_int_t)i));
	for (size_t j = 0; map && j < b->nfiles; j++) {
		const struct sfs_mfile *fb = &b->files[j];
		json_t *v = json_object_get(map, fb->path);
		if (!v) {
			snprintf(why, len, "files: %s is there, not here",
				 fb->path);
			goto out;
		}
		const struct sfs_mfile *fa = &a->files[json_integer_value(v)];
		if (fa->size != fb->size) {
			snprintf(why, len,
				 "files: %s: size %" PRIu64 " here, %" PRIu64
				 " there",
				 fb->path, fa->size, fb->size);
			goto out;
		}
		if (fa->xxh3 != fb->xxh3) {
			snprintf(why, len,
				 "files: %s: xxh3 0x%016" PRIx64
				 " here, 0x%016" PRIx64 " there",
				 fb->path, fa->xxh3, fb->xxh3);
			goto out;
		}
		json_object_del(map, fb->path);
	}
	if (map && json_object_size(map)) {
		snprintf(why, len, "files: %s is here, not there",
			 json_object_iter_key(json_object_iter(map)));
		goto out;
	}
	snprintf(why, len, "dirs differ");
out:
	json_decref(map);
}

/*
 * The pieces of holder @h of @v: for every file of the view, the same
 * path's extents in the holder's manifest, at endpoint @ep's addresses
 * and keys.  Returns 0 or -errno with @why.
 */
static int holder_build(struct sfs_replica *r, const struct sfs_view *v,
			struct sfs_vholder *h, size_t ep, char *why,
			size_t whylen)
{
	const struct sfs_manifest *cm = v->m, *hm = h->m;
	size_t n = cm->nfiles, np = 0;
	uint64_t *keys = NULL;
	json_t *map = json_object();
	int rc = -ENOMEM;

	for (size_t i = 0; map && i < hm->nfiles; i++) {
		json_object_set_new_nocheck(map, hm->files[i].path,
					    json_integer((json_int_t)i));
		np += hm->files[i].next;
	}
	h->hobjs = calloc(n ? n : 1, sizeof(*h->hobjs));
	h->pieces = calloc(np ? np : 1, sizeof(*h->pieces));
	keys = calloc(hm->nregions ? hm->nregions : 1, sizeof(*keys));
	h->rawkeys = calloc(hm->nregions ? hm->nregions : 1, sizeof(*keys));
	if (!map || !h->hobjs || !h->pieces || !keys || !h->rawkeys) {
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < hm->nregions; i++) {
		const struct sfs_remote *rem = &hm->regions[i].rem[ep];
		if ((rc = sfs_control_remote_key(r->x, rem, &keys[i]))) {
			snprintf(why, whylen,
				 "protocol %s: cannot use its raw keys: %s",
				 r->proto, strerror(-rc));
			goto out;
		}
		if (sfs_control_remote_key_raw(rem)) /* given back later */
			h->rawkeys[h->nrawkeys++] = keys[i];
	}
	struct sfs_cache_piece *pc = h->pieces;
	for (size_t i = 0; i < n; i++) {
		json_t *jv = json_object_get(map, cm->files[i].path);
		if (!jv)
			continue; /* same content: cannot happen */
		const struct sfs_mfile *f = &hm->files[json_integer_value(jv)];
		h->hobjs[i].pieces = pc;
		h->hobjs[i].npieces = f->next;
		for (size_t j = 0; j < f->next; j++, pc++) {
			const struct sfs_extent *e = &f->ext[j];
			pc->off = e->off;
			pc->len = e->len;
			if (e->kind == SFS_EXT_INLINE) {
				pc->data = e->data;
				continue;
			}
			pc->raddr =
				hm->regions[e->region].rem[ep].raddr + e->roff;
			pc->key = keys[e->region];
		}
	}
	rc = 0;
out:
	json_decref(map);
	free(keys);
	return rc;
}

/* Make @h, built, a holder of @v in the cache through @cpeer and link
 * it (mo->lock held).  0 or -errno with @why. */
static int holder_attach(struct sfs_replica *r, struct sfs_view *v,
			 struct sfs_vholder *h, uint32_t cpeer, char *why,
			 size_t whylen)
{
	int rc = sfs_cache_add_holder(r->cache, v->set, cpeer, h->hobjs,
				      v->m->nfiles, h->partial, &h->holder);
	if (rc) {
		snprintf(why, whylen, "cache: %s", strerror(-rc));
		return rc;
	}
	h->next = v->holders;
	v->holders = h;
	return 0;
}

/* Keep the chunks of @v's content in the disk tier, if there is one:
 * keyed by the content digest, so a seed that restarts, or another
 * seed of the same content, finds them again.  Logs when it cannot. */
static void persist(struct sfs_replica *r, const struct sfs_view *v,
		    const char *seed)
{
	const struct sfs_manifest *m = v->m;
	char key[512], about[1024];
	snprintf(key, sizeof(key), "content %016" PRIx64 " model %s",
		 m->content, m->model);
	snprintf(about, sizeof(about),
		 "model: %s\ncontent: %016" PRIx64 "\ngeneration: %" PRIu64
		 "\nseed: %s\ninstance: %016" PRIx64,
		 m->model, m->content, m->generation, seed, m->instance);
	int rc = sfs_cache_persist_set(r->cache, v->set, key, about);
	if (rc)
		SFS_LOG(SFS_WARN, "model",
			"generation %" PRIu64 " of %s stays in memory only: "
			"disk tier: %s",
			m->generation, m->model, strerror(-rc));
}

/* View @v, about to be adopted, takes the cached chunks of @mo's current
 * view whose bytes it names too (a generation that changed a few chunks
 * pulls those only; one shown again takes back what its successor
 * took).  Called once @v will be adopted (its holder attached): a view
 * that fails is retired, and what it took would go with it.
 * mo->adopt_lock held: the current view stays. */
static void inherit(struct sfs_replica *r, struct sfs_model *mo,
		    const struct sfs_view *v)
{
	uint64_t chunks, bytes;
	char b[32];
	pthread_mutex_lock(&mo->lock);
	const struct sfs_view *cur = mo->current;
	pthread_mutex_unlock(&mo->lock);
	if (!cur || cur->content == v->content)
		return;
	int rc = sfs_cache_inherit(r->cache, v->set, cur->set, &chunks, &bytes);
	if (rc)
		SFS_LOG(SFS_WARN, "model",
			"%s: generation %" PRIu64 " pulls every chunk again: "
			"%s",
			mo->name, v->generation, strerror(-rc));
	else if (chunks)
		SFS_LOG(SFS_INFO, "model",
			"%s: generation %" PRIu64 " takes %" PRIu64
			" cached chunks (%s) of generation %" PRIu64
			": the same bytes, not pulled again",
			mo->name, v->generation, chunks,
			sfs_fmt_bytes(bytes, b, sizeof(b)), cur->generation);
}

/* A new view of @m (owned from here on success; freed by the caller on
 * failure) with @h (built from @m) as its first holder; not linked.
 * NULL with @why on failure.  Its .seedfs/manifest.json is @m without
 * addresses and keys (SFS_MF_ENC_PUBLIC): whoever reads the mount
 * must not get what reads the seed without the token. */
static struct sfs_view *view_new(struct sfs_replica *r, struct sfs_model *mo,
				 struct rsrc *src, struct sfs_manifest *m,
				 char *why, size_t whylen)
{
	struct sfs_view *v = calloc(1, sizeof(*v));
	size_t n = m->nfiles;
	if (!v || !(v->objs = calloc(n ? n : 1, sizeof(*v->objs))) ||
	    sfs_manifest_encode_with(m, SFS_MF_ENC_PUBLIC, &v->json,
				     &v->json_len)) {
		if (v)
			free(v->objs);
		free(v);
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	v->model = mo;
	v->generation = m->generation;
	v->content = m->content;
	v->m = m;
	if (m->ntensors && sfs_ra_tensors_new(m, &v->tensors))
		SFS_LOG(SFS_WARN, "model",
			"%s: out of memory for its tensors' places: reads "
			"in a tensor pull ahead only when sequential",
			m->model);
	for (size_t i = 0; i < n; i++) {
		const struct sfs_mfile *f = &m->files[i];
		v->objs[i] = (struct sfs_cache_obj){
			.len = f->size,
			.csum_shift = f->csum_shift,
			.xxh3 = f->csum_shift ? f->sums : NULL,
			.sha256 = f->csum_shift ? f->sha256 : NULL};
	}
	char label[300];
	snprintf(label, sizeof(label), "%s generation %" PRIu64, m->model,
		 m->generation);
	int rc = sfs_cache_add_set(r->cache, label, v->objs, n, &v->set);
	if (rc) {
		snprintf(why, whylen, "cache: %s", strerror(-rc));
		sfs_ra_tensors_free(v->tensors);
		free(v->json);
		free(v->objs);
		free(v);
		return NULL;
	}
	persist(r, v, src->addr);
	return v;
}

/* The endpoint of the replica's protocol in @m, or -1 with @why. */
static ssize_t our_endpoint(struct sfs_replica *r, const struct sfs_manifest *m,
			    char *why, size_t whylen)
{
	ssize_t ep = sfs_manifest_endpoint(m, r->proto);
	if (ep < 0) {
		char served[SFS_MF_MAX_ENDPOINTS * 32];
		snprintf(why, whylen,
			 "endpoints: it serves %s, not protocol %s",
			 sfs_manifest_protocols(m, served, sizeof(served)),
			 r->proto);
	}
	return ep;
}

/* Adopt @v as @mo's current view: the tree shows it (or hides the
 * model when it does not meet --require).  mo->adopt_lock held, not
 * mo->lock: the tree lock is taken before a model's (a reader holds
 * the tree's while it takes a view's reference). */
static void adopt(struct sfs_replica *r, struct sfs_model *mo,
		  struct sfs_view *v)
{
	uint64_t *sup = NULL;
	size_t nsup = 0;
	char why[256];
	int show =
		sfs_require_match(r->cfg.require, &v->m->id, why, sizeof(why));
	pthread_rwlock_wrlock(&r->tree_lock);
	int rc = show ? sfs_tree_replace_model(r->tree, v->m, v->set, v->json,
					       v->json_len, v, &sup, &nsup)
		      : sfs_tree_hide_model(r->tree, v->m->model, &sup, &nsup);
	pthread_rwlock_unlock(&r->tree_lock);
	free(sup);
	if (rc)
		SFS_LOG(SFS_ERR, "model",
			"generation %" PRIu64 " of %s only partly shown: %s",
			v->generation, mo->name, strerror(-rc));
	pthread_mutex_lock(&mo->lock);
	struct sfs_view *old = mo->current;
	int was_hidden = mo->hidden;
	/* Newest first: a view shown again (the leader went back to a
	 * content it had) moves to the front. */
	for (struct sfs_view **pv = &mo->views; *pv; pv = &(*pv)->next)
		if (*pv == v) {
			*pv = v->next;
			break;
		}
	v->next = mo->views;
	mo->views = v;
	mo->current = v;
	/* The old generation's seed holders with no end (it was their
	 * current) end after its grace unless they say otherwise: a seed
	 * still up lists it again (its current: no end, or the grace it has
	 * left), one that died or went silent does not, and must not keep
	 * it for good. */
	if (old && old != v) {
		uint64_t now = sfs_now_ms();
		for (struct sfs_vholder *h = old->holders; h; h = h->next)
			if (!h->partial && !h->expires_ms)
				h->expires_ms =
					now + SFS_MAX(holder_grace_ms(h),
						      (uint64_t)SEED_RELIST_MS);
	}
	mo->hidden = !show;
	snprintf(mo->why, sizeof(mo->why), "%s", show ? "" : why);
	mo->adopt_failures = 0;
	uint64_t oldgen = old ? old->generation : 0;
	pthread_mutex_unlock(&mo->lock);
	if (!show && (!old || !was_hidden))
		SFS_LOG(SFS_WARN, "model",
			"generation %" PRIu64 " of %s is hidden: %s",
			v->generation, mo->name, why);
	if (old)
		SFS_LOG(SFS_INFO, "model",
			"adopted generation %" PRIu64 " of %s (%zu files or "
			"entries changed); generation %" PRIu64 " stays "
			"readable for open files while a source serves it",
			v->generation, mo->name, nsup, oldgen);
	else
		SFS_LOG(SFS_INFO, "model",
			"model %s generation %" PRIu64 ": %zu files, %zu "
			"tensors",
			mo->name, v->generation, v->m->nfiles, v->m->ntensors);
	/* The sweeper gives the new generation its lanes now, not up to a
	 * second later: replicas that update together split its changed
	 * chunks from their first pulls (docs/updates.md). */
	pthread_mutex_lock(&r->lock);
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static int offer_locked(struct sfs_model *mo, struct rsrc *src,
			struct sfs_vholder *h, int leader, size_t ep,
			uint32_t cpeer, char *why, size_t whylen);

int model_has_content(struct sfs_replica *r, const char *name, uint64_t content)
{
	struct sfs_model *mo = model_get(r, name);
	int yes = 0;
	if (!mo)
		return 0;
	pthread_mutex_lock(&mo->lock);
	for (struct sfs_view *v = mo->views; v && !yes; v = v->next)
		yes = !v->expired && v->content == content;
	pthread_mutex_unlock(&mo->lock);
	model_put(mo);
	return yes;
}

/* The signed generations taken, written to their file when they
 * changed (control/signstate.h); a failure is said once until it
 * changes, and the next save tries again. */
static void save_signed(struct sfs_replica *r)
{
	static _Thread_local char said[300];
	char err[sizeof(said)];
	if (!r->signstate)
		return;
	if (!sfs_signstate_save(r->signstate, err, sizeof(err)))
		said[0] = '\0';
	else if (strcmp(err, said)) {
		SFS_LOG(SFS_WARN, "trust",
			"the signed generations taken are not remembered "
			"across a restart: %s",
			err);
		snprintf(said, sizeof(said), "%s", err);
	}
}

/* With --trust-key, under mo->lock: @n, taken from a source of @v's
 * content, is @v's manifest signed again (the same signer's run and
 * generation, by the same key, valid longer): @v takes its signature,
 * which a re-seeder passes on (reseed.c reads v->m under mo->lock).
 * 1 when it did. */
static int resigned(struct sfs_view *v, const struct sfs_manifest *n)
{
	struct sfs_manifest *m = v->m;
	if (!m->has_sig || !n->has_sig || !m->signer_run ||
	    m->signer_run != n->signer_run || m->generation != n->generation ||
	    n->valid_until <= m->valid_until ||
	    strcmp(m->sig_key, n->sig_key) || strcmp(m->signer, n->signer))
		return 0;
	m->signed_at = n->signed_at;
	m->valid_until = n->valid_until;
	memcpy(m->sig, n->sig, sizeof(m->sig));
	return 1;
}

int model_offer(struct sfs_model *mo, struct rsrc *src, struct sfs_manifest *m,
		int leader, char *why, size_t whylen)
{
	struct sfs_replica *r = mo->r;
	struct sfs_vholder *h = NULL;
	int rc = 0;

	why[0] = '\0';
	ssize_t ep = our_endpoint(r, m, why, whylen);
	if (ep < 0)
		goto refuse;
	uint32_t need = model_chunk_size(m, 0);
	if (need > r->chunk_size) {
		snprintf(why, whylen,
			 "files: checksum chunks of %u bytes, larger than this "
			 "mount's chunks (%u): remount with --chunk-size %u",
			 need, r->chunk_size, need);
		goto refuse;
	}
	pthread_mutex_lock(&src->lock);
	uint64_t instance = src->instance;
	uint32_t cpeer = src->cpeer;
	pthread_mutex_unlock(&src->lock);
	if (cpeer == SFS_CACHE_NONE || instance != m->instance) {
		snprintf(why, whylen, "not connected to that run");
		rc = -ENOTCONN;
		goto fail;
	}
	if (!(h = calloc(1, sizeof(*h)))) {
		rc = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto fail;
	}
	h->src = src;
	h->instance = m->instance;
	h->generation = m->generation;
	h->key_epoch = m->key_epoch;
	h->m = m;
	m = NULL; /* the holder's now */

	/* One offer of a model at a time: an adoption drops mo->lock to
	 * rewrite the tree. */
	pthread_mutex_lock(&mo->adopt_lock);
	rc = offer_locked(mo, src, h, leader, (size_t)ep, cpeer, why, whylen);
	save_signed(r);
	pthread_mutex_unlock(&mo->adopt_lock);
	if (rc <= 0)
		holder_free(h);
	return rc;

refuse:
	holder_free(h);
	sfs_manifest_free(m);
	return 0;
fail:
	holder_free(h);
	sfs_manifest_free(m);
	return rc;
}

/* @h's pieces: from its manifest's extents, or (a re-seeder's) none
 * until its holdings are fetched.  0 or -errno with @why. */
static int holder_pieces(struct sfs_replica *r, const struct sfs_view *v,
			 struct sfs_vholder *h, size_t ep, char *why,
			 size_t whylen)
{
	h->partial = h->m->holdings;
	h->ep = ep;
	if (!h->partial)
		return holder_build(r, v, h, ep, why, whylen);
	h->hobjs = calloc(v->m->nfiles ? v->m->nfiles : 1, sizeof(*h->hobjs));
	if (!h->hobjs) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* The rest of model_offer, mo->adopt_lock held: 1 (@h is used: the
 * model's now), 0 (refused: @why), -errno.  @h stays the caller's
 * unless used. */
static int offer_locked(struct sfs_model *mo, struct rsrc *src,
			struct sfs_vholder *h, int leader, size_t ep,
			uint32_t cpeer, char *why, size_t whylen)
{
	struct sfs_replica *r = mo->r;
	int rc;

	pthread_mutex_lock(&mo->lock);
	struct sfs_view *v = NULL;
	for (struct sfs_view *o = mo->views; o && !v; o = o->next)
		if (!o->expired && o->content == h->m->content)
			v = o;
	/* What a source is, this mount knows (it found it as a re-seeder),
	 * not the source's own word: one that leaves out "holdings" would
	 * otherwise be taken for a seed. */
	if (src->reseeder && !h->m->holdings) {
		snprintf(why, whylen,
			 "found as a re-seeder, but its manifest does not say "
			 "holdings");
		pthread_mutex_unlock(&mo->lock);
		return 0;
	}
	if (h->m->thin && !v) {
		/* Thin: it says how this source serves a content, not what
		 * the content is (no checksums): only for one held here. */
		snprintf(why, whylen,
			 "a thin manifest of content %016" PRIx64
			 ", which this mount no longer has: asked whole next",
			 h->m->content);
		pthread_mutex_unlock(&mo->lock);
		return -EAGAIN;
	}
	if ((h->m->holdings || src->reseeder) && r->cfg.no_verify) {
		/* Anyone with the token can be a re-seeder: its bytes are
		 * read only when they are checked. */
		snprintf(why, whylen,
			 "a re-seeder, and this mount does not check what it "
			 "pulls (--no-verify)");
		pthread_mutex_unlock(&mo->lock);
		return 0;
	}
	if (!v && h->m->holdings &&
	    (!leader || (mo->current &&
			 model_view_seeded(mo->current, sfs_now_ms(), NULL)))) {
		/* A re-seeder serves a content the replica has, never a new
		 * one, unless it leads: no seed lists the model (it is all
		 * the replica was given: rsrc_leader), nor serves (or gave
		 * its grace to) the generation shown, so that a seed's
		 * record lapsing a moment does not hand the model over. */
		snprintf(why, whylen,
			 "a re-seeder of content %016" PRIx64
			 ", not a generation this mount follows",
			 h->m->content);
		pthread_mutex_unlock(&mo->lock);
		return 0;
	}
	if (v) {
		/* The same content: one more holder, if it says the same of
		 * what it is. */
		if (sfs_identity_differs(&v->m->id, &h->m->id, why, whylen)) {
			pthread_mutex_unlock(&mo->lock);
			return 0;
		}
		/* Signed again by its seed: taken (and remembered). */
		char swhy[300];
		if (r->signstate && resigned(v, h->m) &&
		    !sfs_signstate_take(r->signstate, h->m, swhy, sizeof(swhy)))
			SFS_LOG(SFS_INFO, "model",
				"%s: generation %" PRIu64
				" signed again (from %s), valid %.0f s more",
				mo->name, h->m->generation, src->addr,
				(double)(h->m->valid_until - sfs_sign_now()) /
					1e9);
		/* The same run and generation again: nothing new, unless
		 * its keys are (a token rotation): the holder of the old
		 * keys gives way (the seed still honours them for its grace
		 * period, so reads in flight complete). */
		struct sfs_vholder *stale = NULL;
		for (struct sfs_vholder *o = v->holders; o && !stale;
		     o = o->next) {
			if (o->src != src || o->instance != h->instance ||
			    o->generation != h->generation)
				continue;
			if (o->key_epoch >= h->key_epoch) {
				pthread_mutex_unlock(&mo->lock);
				holder_free(h);
				return 1; /* already */
			}
			stale = o;
		}
		if ((rc = holder_pieces(r, v, h, ep, why, whylen)) ||
		    (rc = holder_attach(r, v, h, cpeer, why, whylen))) {
			pthread_mutex_unlock(&mo->lock);
			return rc;
		}
		/* The old keys' holder out of the list (the new one went
		 * in front of it). */
		for (struct sfs_vholder **po = &v->holders; stale && *po;
		     po = &(*po)->next)
			if (*po == stale) {
				*po = stale->next;
				stale->next = NULL;
				if (stale->expires_ms)
					h->expires_ms = stale->expires_ms;
				break;
			}
		struct sfs_vholder *gone = stale;
		uint64_t epoch = h->key_epoch; /* @h is the view's now */
		/* The leader's current content is an older view's again:
		 * that one is shown (a signed one only when signed after
		 * what this mount took: not an old manifest played back). */
		int again = leader && !h->partial && v != mo->current;
		if (again && r->signstate &&
		    sfs_signstate_take(r->signstate, h->m, swhy, sizeof(swhy)))
			again = 0;
		if (again)
			v->generation = h->generation;
		pthread_mutex_unlock(&mo->lock);
		if (gone) {
			holders_drop(r, gone);
			SFS_LOG(SFS_INFO, "model",
				"%s: %s's keys of epoch %" PRIu64
				" in use from now on",
				mo->name, src->addr, epoch);
			return 1;
		}
		if (again) {
			inherit(r, mo, v);
			adopt(r, mo, v);
		}
		SFS_LOG(SFS_INFO, "model",
			"%s: %s serves generation %" PRIu64 " (its %" PRIu64
			")",
			mo->name, src->addr, v->generation, h->generation);
		return 1;
	}
	if (mo->current && !leader) {
		differs(mo->current->m, h->m, why, whylen);
		pthread_mutex_unlock(&mo->lock);
		return 0;
	}
	/* Signed manifests: never one older than what this replica took,
	 * now or before a restart (an older generation played back to it,
	 * on a control channel without TLS). */
	if (r->signstate &&
	    sfs_signstate_take(r->signstate, h->m, why, whylen)) {
		pthread_mutex_unlock(&mo->lock);
		return 0;
	}
	uint64_t content = h->m->content;
	if (mo->failed_content == content &&
	    sfs_now_ms() < mo->adopt_retry_ms) {
		pthread_mutex_unlock(&mo->lock);
		snprintf(why, whylen, "its adoption failed a moment ago");
		return -EAGAIN;
	}
	pthread_mutex_unlock(&mo->lock);

	/* A new content from the leader: the new current view.  The view
	 * owns the manifest; its first holder reads it. */
	v = view_new(r, mo, src, h->m, why, whylen);
	rc = v ? 0 : -ENOMEM;
	if (v) {
		h->view_m = 1;
		if ((rc = holder_pieces(r, v, h, ep, why, whylen)) ||
		    (rc = holder_attach(r, v, h, cpeer, why, whylen))) {
			/* The manifest goes with the view (its set), not the
			 * holder. */
			h->m = NULL;
			h->view_m = 0;
			view_release(r, v);
			v = NULL;
		}
	}
	if (!v) {
		pthread_mutex_lock(&mo->lock);
		uint64_t wait = SFS_MIN((uint64_t)ADOPT_BACKOFF_MS << SFS_MIN(
						mo->adopt_failures, 16u),
					(uint64_t)ADOPT_BACKOFF_MAX_MS);
		mo->adopt_failures++;
		mo->failed_content = content;
		mo->adopt_retry_ms = sfs_now_ms() + wait;
		pthread_mutex_unlock(&mo->lock);
		SFS_LOG(SFS_WARN, "model",
			"cannot adopt %s's generation of %s: %s (next try in "
			"%" PRIu64 " ms)",
			src->addr, mo->name, why, wait);
		return rc;
	}
	inherit(r, mo, v);
	adopt(r, mo, v);
	return 1;
}

/* A "0x..." string into *out: 0 or -1. */
static int hex64(json_t *v, uint64_t *out)
{
	if (!json_is_string(v) || json_string_length(v) > 18)
		return -1;
	return sfs_parse_u64(json_string_value(v), out) ? -1 : 0;
}

void model_slots_free(struct model_slots *ms)
{
	for (size_t i = 0; ms->s && i < ms->nfiles; i++)
		free(ms->s[i]);
	free(ms->s);
	*ms = (struct model_slots){0};
}

/* The chunks of file @j of @hm at @chunk bytes each. */
static uint64_t chunks_of(const struct sfs_manifest *hm, size_t j,
			  uint64_t chunk)
{
	return (hm->files[j].size + chunk - 1) / chunk;
}

/* Fresh slot arrays for @hm's files, nothing held: 0 or -ENOMEM. */
static int slots_new(const struct sfs_manifest *hm, uint64_t chunk,
		     struct model_slots *ms)
{
	ms->s = calloc(hm->nfiles ? hm->nfiles : 1, sizeof(*ms->s));
	if (!ms->s)
		return -ENOMEM;
	ms->nfiles = hm->nfiles;
	for (size_t j = 0; j < hm->nfiles; j++) {
		uint64_t n = chunks_of(hm, j, chunk);
		if (!(ms->s[j] = malloc((n ? n : 1) * sizeof(uint32_t)))) {
			model_slots_free(ms);
			return -ENOMEM;
		}
		for (uint64_t k = 0; k < n; k++)
			ms->s[j][k] = SFS_RUNS_NONE;
	}
	return 0;
}

/* Every chunk's slot from @o into @ms: "runs" (form 2; onto @ms when @o
 * says "since" and @ms are of the same chunk size, slab and key, else
 * from nothing) or "files" (a slot per chunk).  A slot must be below
 * @fit. */
static int holdings_slots(json_t *o, const struct sfs_manifest *hm,
			  uint64_t chunk, uint64_t addr, uint64_t keyhash,
			  uint64_t fit, struct model_slots *ms, char *why,
			  size_t whylen)
{
	json_t *runs = json_object_get(o, "runs");
	json_t *files = json_object_get(o, "files");
	json_t *lists = runs ? runs : files;
	int delta = runs && json_object_get(o, "since");
	uint64_t total = 0;

	if (!json_is_array(lists) || json_array_size(lists) != hm->nfiles) {
		snprintf(why, whylen,
			 "holdings: %s: not one list per file (%zu)",
			 runs ? "runs" : "files", hm->nfiles);
		return -EPROTO;
	}
	for (size_t j = 0; j < hm->nfiles; j++)
		total += chunks_of(hm, j, chunk);
	if (total > HOLDINGS_CHUNKS_MAX) {
		snprintf(why, whylen,
			 "holdings: chunk_size: %" PRIu64 " makes %" PRIu64
			 " chunks of this model, more than %u",
			 chunk, total, HOLDINGS_CHUNKS_MAX);
		return -EPROTO;
	}
	if (delta &&
	    (!ms->s || ms->nfiles != hm->nfiles || ms->chunk != chunk ||
	     ms->addr != addr || ms->keyhash != keyhash)) {
		snprintf(why, whylen,
			 "holdings: since: a delta onto a list this replica "
			 "does not have (%s)",
			 !ms->s ? "none" : "another chunk size, slab or key");
		return -EPROTO;
	}
	if (!delta) {
		model_slots_free(ms);
		if (slots_new(hm, chunk, ms)) {
			snprintf(why, whylen, "out of memory");
			return -ENOMEM;
		}
		ms->chunk = chunk;
		ms->addr = addr;
		ms->keyhash = keyhash;
	}
	size_t j;
	json_t *fa;
	json_array_foreach (lists, j, fa) {
		uint64_t n = chunks_of(hm, j, chunk);
		uint32_t *sl = ms->s[j];
		if (runs) {
			char w[160];
			if (!json_is_string(fa)) {
				snprintf(why, whylen,
					 "holdings: runs[%zu]: not a string",
					 j);
				return -EPROTO;
			}
			int rc = sfs_runs_apply(json_string_value(fa),
						json_string_length(fa), sl, n,
						fit, w, sizeof(w));
			if (rc) {
				snprintf(why, whylen, "holdings: runs[%zu]: %s",
					 j, w);
				return rc;
			}
			continue;
		}
		if (!json_is_array(fa) || json_array_size(fa) != n) {
			snprintf(why, whylen,
				 "holdings: files[%zu]: not %" PRIu64 " slots",
				 j, n);
			return -EPROTO;
		}
		size_t k;
		json_t *sv;
		json_array_foreach (fa, k, sv) {
			json_int_t slot = json_integer_value(sv);
			if (json_is_integer(sv) && slot == -2)
				sl[k] = SFS_RUNS_COMING;
			else if (json_is_integer(sv) && slot >= 0 &&
				 (uint64_t)slot < fit &&
				 (uint64_t)slot < SFS_RUNS_SAME)
				sl[k] = (uint32_t)slot;
			/* else not held (or nonsense) */
		}
	}
	return 0;
}

int model_holdings_pieces(json_t *o, const struct sfs_manifest *hm,
			  const struct sfs_manifest *cm, struct model_slots *ms,
			  struct sfs_remote *slab,
			  uint8_t raw[SFS_MF_RAWKEY_MAX],
			  struct sfs_cache_hobj **hobjs,
			  struct sfs_cache_piece **pieces, char *why,
			  size_t whylen)
{
	json_t *js = json_object_get(o, "slab");
	json_t *cs = json_object_get(o, "chunk_size");
	uint64_t chunk, addr;
	size_t np = 0;
	int rc;

	*hobjs = NULL;
	*pieces = NULL;
	memset(slab, 0, sizeof(*slab));
	if (!json_is_integer(cs) || json_integer_value(cs) < 4096 ||
	    json_integer_value(cs) > (1ll << 30) ||
	    (json_integer_value(cs) & (json_integer_value(cs) - 1))) {
		snprintf(why, whylen,
			 "holdings: chunk_size: not a power of "
			 "two in 4 KiB..1 GiB");
		rc = -EPROTO;
		goto err;
	}
	chunk = (uint64_t)json_integer_value(cs);
	if (hex64(json_object_get(js, "address"), &addr)) {
		snprintf(why, whylen,
			 "holdings: slab.address: not a 64-bit "
			 "hex string");
		rc = -EPROTO;
		goto err;
	}
	slab->raddr = addr;
	const char *rk = json_string_value(json_object_get(js, "raw_key"));
	const char *kt =
		rk ? rk : json_string_value(json_object_get(js, "key"));
	size_t rl;
	if (rk) {
		if (sfs_hex_decode(rk, raw, SFS_MF_RAWKEY_MAX, &rl) || !rl) {
			snprintf(why, whylen,
				 "holdings: slab.raw_key: not hex");
			rc = -EPROTO;
			goto err;
		}
		slab->raw = raw;
		slab->raw_len = (uint32_t)rl;
	} else if (hex64(json_object_get(js, "key"), &slab->key)) {
		snprintf(why, whylen,
			 "holdings: slab.key: not a 64-bit hex "
			 "string");
		rc = -EPROTO;
		goto err;
	}
	/* Slots whose chunk ends past the end of the address space are
	 * nonsense: at most @fit of them fit. */
	uint64_t fit = (UINT64_MAX - addr) / chunk;
	if ((rc = holdings_slots(o, hm, chunk, addr,
				 XXH3_64bits(kt, strlen(kt)), fit, ms, why,
				 whylen)))
		goto err;
	for (size_t j = 0; j < hm->nfiles; j++) {
		uint64_t n = chunks_of(hm, j, chunk);
		for (uint64_t k = 0; k < n; k++)
			np += ms->s[j][k] != SFS_RUNS_NONE;
	}
	json_t *map = json_object();
	*hobjs = calloc(cm->nfiles ? cm->nfiles : 1, sizeof(**hobjs));
	*pieces = calloc(np ? np : 1, sizeof(**pieces));
	if (!map || !*hobjs || !*pieces) {
		json_decref(map);
		free(*hobjs);
		free(*pieces);
		*hobjs = NULL;
		*pieces = NULL;
		snprintf(why, whylen, "out of memory");
		rc = -ENOMEM;
		goto err;
	}
	for (size_t i = 0; i < cm->nfiles; i++)
		json_object_set_new_nocheck(map, cm->files[i].path,
					    json_integer((json_int_t)i));
	struct sfs_cache_piece *pc = *pieces;
	for (size_t j = 0; j < hm->nfiles; j++) {
		json_t *iv = json_object_get(map, hm->files[j].path);
		if (!iv)
			continue; /* same content: cannot happen */
		size_t i = (size_t)json_integer_value(iv);
		uint64_t size = hm->files[j].size, n = chunks_of(hm, j, chunk);
		(*hobjs)[i].pieces = pc;
		/* A file without SHA-256 comes from seeds alone: nothing
		 * would tell a re-seeder's forged bytes from right ones
		 * (XXH3 has a closed-form second preimage). */
		if (!cm->files[i].csum_shift || !cm->files[i].sha256)
			continue;
		for (uint64_t k = 0; k < n; k++) {
			uint32_t slot = ms->s[j][k];
			if (slot == SFS_RUNS_NONE)
				continue;
			int coming = slot == SFS_RUNS_COMING;
			pc->off = k * chunk;
			pc->len = SFS_MIN(chunk, size - pc->off);
			pc->coming = coming; /* no bytes to read yet */
			pc->raddr = coming ? 0 : addr + (uint64_t)slot * chunk;
			pc++;
			(*hobjs)[i].npieces++;
		}
	}
	json_decref(map);
	return 0;
err:
	model_slots_free(ms);
	return rc;
}

/* The pieces of re-seeder holder @h of @v from its holdings answer @o
 * (model_holdings_pieces), with the slab's key as this replica's
 * transport uses it: *slab_key, and *slab_raw 1 when it was imported
 * (the caller's to give back, sfs_xport_key_release).  0 or -errno
 * with @why. */
static int holdings_pieces(struct sfs_replica *r, const struct sfs_view *v,
			   struct sfs_vholder *h, json_t *o,
			   struct sfs_cache_hobj **hobjs,
			   struct sfs_cache_piece **pieces, uint64_t *slab_key,
			   int *slab_raw, char *why, size_t whylen)
{
	struct sfs_remote slab;
	uint8_t raw[SFS_MF_RAWKEY_MAX];
	uint64_t key;
	int rc = model_holdings_pieces(o, h->m, v->m, &h->slots, &slab, raw,
				       hobjs, pieces, why, whylen);
	if (rc)
		return rc; /* the slots freed */
	/* Imported last: nothing fails after it. */
	if ((rc = sfs_control_remote_key(r->x, &slab, &key))) {
		snprintf(why, whylen, "holdings: the slab's key: %s",
			 strerror(-rc));
		free(*hobjs);
		free(*pieces);
		model_slots_free(&h->slots);
		return rc;
	}
	*slab_key = key;
	*slab_raw = sfs_control_remote_key_raw(&slab);
	/* The pieces are one array, file after file. */
	size_t np = 0;
	for (size_t i = 0; i < v->m->nfiles; i++)
		np += (*hobjs)[i].npieces;
	for (size_t k = 0; k < np; k++)
		(*pieces)[k].key = key;
	return 0;
}

/* Values and bytes a holdings answer may spend on one chunk (its slot
 * and separator, or its share of a run and its base64), and on the
 * rest: its fields, one list per file. */
#define HOLD_VALUES_CHUNK 2
#define HOLD_BYTES_CHUNK 16
#define HOLD_VALUES_FILE 4
#define HOLD_BYTES_FILE 64
#define HOLD_VALUES_BASE 64
#define HOLD_BYTES_BASE (64u << 10)

void model_holdings_caps(const struct sfs_manifest *cm, uint32_t chunk,
			 struct model_hold_caps *caps)
{
	const struct sfs_json_limit *g = sfs_json_limit(SFS_JSON_HOLDINGS);
	uint64_t unit = SFS_MAX((uint64_t)chunk / 4, (uint64_t)4096);
	uint64_t n = 0;
	for (size_t i = 0; i < cm->nfiles; i++)
		n += (cm->files[i].size + unit - 1) / unit;
	uint64_t values = HOLD_VALUES_BASE + HOLD_VALUES_CHUNK * n +
			  HOLD_VALUES_FILE * (uint64_t)cm->nfiles;
	uint64_t bytes = HOLD_BYTES_BASE + HOLD_BYTES_CHUNK * n +
			 HOLD_BYTES_FILE * (uint64_t)cm->nfiles;
	caps->chunks = n;
	caps->lim = *g;
	caps->lim.values = (size_t)SFS_MIN(values, (uint64_t)g->values);
	caps->lim.containers = (size_t)SFS_MIN((uint64_t)cm->nfiles + 16,
					       (uint64_t)g->containers);
	caps->bytes = (size_t)SFS_MIN(bytes, (uint64_t)HOLDINGS_BYTES_MAX);
}

int model_holdings_load(const char *json, size_t len, json_t **o,
			uint64_t *version, char *why, size_t whylen)
{
	return model_holdings_load_lim(json, len,
				       sfs_json_limit(SFS_JSON_HOLDINGS), o,
				       version, why, whylen);
}

int model_holdings_load_lim(const char *json, size_t len,
			    const struct sfs_json_limit *lim, json_t **o,
			    uint64_t *version, char *why, size_t whylen)
{
	int rc = sfs_json_load_lim(lim, json, len, JSON_REJECT_DUPLICATES, o,
				   why, whylen);
	if (rc == -E2BIG)
		return -EPROTO;
	if (!json_is_object(*o) ||
	    !json_is_integer(json_object_get(*o, "version"))) {
		snprintf(why, whylen, "holdings: not an object with a version");
		json_decref(*o);
		*o = NULL;
		return -EPROTO;
	}
	*version = (uint64_t)json_integer_value(json_object_get(*o, "version"));
	return 0;
}

/*
 * Until when the pieces a holdings answer @o names (or, "unchanged",
 * the ones from before) are read, asked at @asked_ms: the re-seeder
 * keeps them keep_ms from when it answered, and each read posted has
 * this mount's read timeout to land, so keep_ms less that (a quarter of
 * keep_ms at least, for a mount whose timeout is longer than the
 * re-seeder's).  *until 0: the answer renews nothing (an "unchanged"
 * one without keep_ms: a re-seeder from before renewals).  0, or
 * -EPROTO with @why naming the field.
 */
static int holdings_until(const struct sfs_replica *r, json_t *o,
			  uint64_t asked_ms, uint64_t *until, char *why,
			  size_t whylen)
{
	json_t *k = json_object_get(o, "keep_ms");
	*until = 0;
	if (!k && json_is_true(json_object_get(o, "unchanged")))
		return 0;
	if (!json_is_integer(k) || json_integer_value(k) < 1 ||
	    json_integer_value(k) > HOLDINGS_KEEP_MAX_MS) {
		snprintf(why, whylen,
			 "holdings: keep_ms: not an integer in 1..%d",
			 HOLDINGS_KEEP_MAX_MS);
		return -EPROTO;
	}
	uint64_t keep = (uint64_t)json_integer_value(k);
	uint64_t tmo = r->cfg.timeout_ms;
	uint64_t use =
		keep > tmo && keep - tmo >= keep / 4 ? keep - tmo : keep / 4;
	*until = asked_ms + SFS_MAX(use, (uint64_t)1);
	return 0;
}

int model_holdings_limits(struct sfs_model *mo, uint64_t content,
			  struct model_hold_caps *caps)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&mo->lock);
	for (struct sfs_view *v = mo->views; v && rc; v = v->next)
		if (v->content == content && !v->expired) {
			model_holdings_caps(v->m, mo->r->cfg.chunk_size, caps);
			rc = 0;
		}
	pthread_mutex_unlock(&mo->lock);
	return rc;
}

int model_holdings(struct sfs_model *mo, struct rsrc *src, uint64_t content,
		   const char *json, size_t len, uint64_t asked_ms,
		   const struct sfs_json_limit *lim, char *why, size_t whylen)
{
	struct sfs_replica *r = mo->r;
	json_t *o;
	uint64_t version = 0, until;
	int rc = model_holdings_load_lim(json, len, lim, &o, &version, why,
					 whylen);
	if (rc)
		return rc;
	if ((rc = holdings_until(r, o, asked_ms, &until, why, whylen))) {
		json_decref(o);
		return rc;
	}
	int lanes_moved = 0;
	pthread_mutex_lock(&mo->lock);
	for (struct sfs_view *v = mo->views; v && !rc; v = v->next) {
		if (v->content != content || v->expired)
			continue;
		for (struct sfs_vholder *h = v->holders; h && !rc;
		     h = h->next) {
			if (h->src != src || !h->partial)
				continue;
			/* An answer of another run of the re-seeder (one
			 * started again on the same port) is not this
			 * holder's: its /v1/models replaces the holder. */
			json_t *inst = json_object_get(o, "instance");
			uint64_t iv;
			if (inst && (hex64(inst, &iv) || iv != h->instance)) {
				snprintf(why, whylen,
					 "holdings: instance: not the run "
					 "this replica reads (0x%" PRIx64 ")",
					 h->instance);
				rc = -EPROTO;
				break;
			}
			int pf =
				json_is_true(json_object_get(o, "prefetching"));
			lanes_moved |= pf != h->prefetching;
			h->prefetching = pf;
			if (json_is_true(json_object_get(o, "unchanged")) ||
			    (h->have_version && h->version == version)) {
				/* The same list, kept again; a re-seeder that
				 * does not say so keeps it only with a new
				 * list: asked for one next time. */
				if (until)
					sfs_cache_holder_expire(
						r->cache, h->holder, until);
				else
					h->have_version = 0;
				continue;
			}
			/* A delta is onto the list of the version and set
			 * this holder asked from, or it is refused. */
			json_t *since = json_object_get(o, "since");
			json_t *base = json_object_get(o, "base");
			if (since &&
			    (!h->have_version || !json_is_integer(since) ||
			     (uint64_t)json_integer_value(since) !=
				     h->version ||
			     !json_is_integer(base) ||
			     (uint64_t)json_integer_value(base) != h->base)) {
				snprintf(why, whylen,
					 "holdings: since: a delta from a list "
					 "this replica does not have (it has "
					 "version %" PRIu64 ")",
					 h->version);
				h->have_version = 0;
				rc = -EPROTO;
				break;
			}
			struct sfs_cache_hobj *ho;
			struct sfs_cache_piece *pc;
			uint64_t sk;
			int sraw;
			if ((rc = holdings_pieces(r, v, h, o, &ho, &pc, &sk,
						  &sraw, why, whylen))) {
				h->have_version = 0; /* in full next time */
				break;
			}
			if ((rc = sfs_cache_holder_update(r->cache, h->holder,
							  ho, v->m->nfiles))) {
				snprintf(why, whylen, "cache: %s",
					 strerror(-rc));
				h->have_version = 0; /* in full next time */
				if (sraw)
					sfs_xport_key_release(r->x, sk);
				free(ho);
				free(pc);
				break;
			}
			/* The old pieces are no longer used: their key goes
			 * back (the same slab's: a shared mapping, counted). */
			sfs_cache_holder_expire(r->cache, h->holder, until);
			if (h->slab_raw)
				sfs_xport_key_release(r->x, h->slab_key);
			h->slab_key = sk;
			h->slab_raw = sraw;
			free(h->hobjs);
			free(h->pieces);
			h->hobjs = ho;
			h->pieces = pc;
			h->version = version;
			h->base = json_is_integer(base)
					  ? (uint64_t)json_integer_value(base)
					  : 0;
			h->have_version = 1;
		}
	}
	pthread_mutex_unlock(&mo->lock);
	json_decref(o);
	if (lanes_moved) { /* the sweeper sets the lanes anew */
		pthread_mutex_lock(&r->lock);
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
	}
	return rc;
}

int model_holdings_version(struct sfs_model *mo, struct rsrc *src,
			   uint64_t content, uint64_t *version, uint64_t *base)
{
	/* Every holder of @src for @content takes the same answer: "since"
	 * only when all of them have the list of that version and set. */
	int found = 0;
	pthread_mutex_lock(&mo->lock);
	for (struct sfs_view *v = mo->views; v; v = v->next)
		for (struct sfs_vholder *h = v->holders; h; h = h->next) {
			if (v->expired || v->content != content ||
			    h->src != src || !h->partial)
				continue;
			uint64_t b = h->slots.s ? h->base : 0;
			if (!found) {
				found = 1 + h->have_version;
				*version = h->version;
				*base = b;
			} else if (!h->have_version || h->version != *version ||
				   b != *base) {
				found = 1;
			}
		}
	pthread_mutex_unlock(&mo->lock);
	return found;
}

size_t model_prune(struct sfs_model *mo, struct rsrc *src, uint64_t instance,
		   const uint64_t *served, const int64_t *expires_in, size_t n)
{
	struct sfs_replica *r = mo->r;
	struct sfs_vholder *gone = NULL;
	uint64_t now = sfs_now_ms();
	size_t left = 0;

	pthread_mutex_lock(&mo->lock);
	for (struct sfs_view *v = mo->views; v; v = v->next) {
		for (struct sfs_vholder **ph = &v->holders; *ph;) {
			struct sfs_vholder *h = *ph;
			size_t k = n;
			if (h->src == src && h->instance == instance)
				for (k = 0; k < n; k++)
					if (served[k] == h->generation)
						break;
			if (h->src != src) {
				ph = &h->next;
				continue;
			}
			if (k == n) { /* no longer served: it goes */
				if (h->instance != instance)
					note_seed_gone(v, h, now);
				*ph = h->next;
				h->next = gone;
				gone = h;
				continue;
			}
			h->expires_ms = expires_in[k] < 0
						? 0
						: now + (uint64_t)expires_in[k];
			left++;
			ph = &h->next;
		}
	}
	pthread_mutex_unlock(&mo->lock);
	holders_drop(r, gone);
	pthread_mutex_lock(&r->lock);
	pthread_cond_broadcast(&r->cond); /* views may be due */
	pthread_mutex_unlock(&r->lock);
	return left;
}

/* The inodes whose bytes come from @v, into *inos [new]. */
static size_t view_inodes(struct sfs_replica *r, struct sfs_view *v,
			  uint64_t **inos)
{
	pthread_rwlock_rdlock(&r->tree_lock);
	size_t n = sfs_tree_owned(r->tree, v, inos);
	pthread_rwlock_unlock(&r->tree_lock);
	return n;
}

/* @v goes: its superseded nodes are freed, any other is cut loose. */
static void view_disown(struct sfs_replica *r, struct sfs_view *v)
{
	pthread_rwlock_wrlock(&r->tree_lock);
	size_t n = sfs_tree_disown(r->tree, v);
	pthread_rwlock_unlock(&r->tree_lock);
	SFS_LOG(SFS_DEBUG, "model",
		"generation %" PRIu64 " of %s: %zu inodes freed", v->generation,
		v->model->name, n);
}

/* The lanes of @mo's view of @content could not be given to the cache:
 * given again at the next look (the signature forgotten). */
static void lanes_retry(struct sfs_model *mo, uint64_t content)
{
	pthread_mutex_lock(&mo->lock);
	if (mo->current && mo->current->content == content)
		mo->current->lanes_sig = 0;
	pthread_mutex_unlock(&mo->lock);
}

/* This re-seeder's place in the fleet's lanes, from the first seed
 * (not a re-seeder) among @all that serves model @name and gave one,
 * into *@f: 1, or 0 when none did.  (A seed's fleet is its re-seeders,
 * whatever models they load: one ring for all of them; see
 * fleet_lanes for when it is used.) */
static int fleet_of(struct rsrc **all, size_t ns, const char *name,
		    struct rsrc_fleet *f)
{
	for (size_t i = 0; i < ns; i++) {
		struct rsrc *s = all[i];
		if (s->reseeder || !rsrc_serves(s, name))
			continue;
		pthread_mutex_lock(&s->lock);
		int have = s->fleet.size >= 2 &&
			   sfs_now_ms() < s->fleet.at_ms + RSRC_FLEET_KEEP_MS;
		if (have)
			*f = s->fleet;
		pthread_mutex_unlock(&s->lock);
		if (have)
			return 1;
	}
	return 0;
}

/* The fleet's member at @addr among @cand, the sources that publish the
 * content, or NULL (not connected yet, or it does not load it). */
static struct rsrc *fleet_source(struct rsrc **cand, size_t nc,
				 const char *addr)
{
	for (size_t i = 0; i < nc; i++)
		if (!strcmp(cand[i]->addr, addr))
			return cand[i];
	return NULL;
}

/* The lane of member @src (fleet_source's) of @v (mo->lock held): its
 * holder of @v's content; SFS_CACHE_LANE_UNKNOWN when it is not
 * connected yet, or does not load the content (no source of it, or one
 * that said it does not prefetch it).  Its place stays its own: the
 * ring is the same in every member (a replica that left it alone would
 * hold back its share), and the chunks it would pass on come from the
 * seeds after the wait for a parent not connected. */
static uint32_t fleet_holder(struct sfs_view *v, struct rsrc *src)
{
	for (struct sfs_vholder *h = v->holders; src && h; h = h->next)
		if (h->src == src && h->partial && !h->expires_ms)
			return h->prefetching || !h->have_version
				       ? h->holder
				       : SFS_CACHE_LANE_UNKNOWN;
	return SFS_CACHE_LANE_UNKNOWN;
}

/*
 * The fleet's lanes of @mo's view @content, when a seed that serves the
 * model gave this re-seeder its place in them (in the last
 * RSRC_FLEET_KEEP_MS): 1.  0: it did not, the lanes are lanes()'s.  The
 * members by the holders it has of them; given to the cache when they
 * changed.
 */
static int fleet_lanes(struct sfs_replica *r, struct sfs_model *mo,
		       uint64_t content, struct rsrc **all, size_t ns,
		       struct rsrc **cand, size_t nc)
{
	struct rsrc_fleet *f = malloc(sizeof(*f));
	uint32_t hold[RSRC_FLEET_MEMBERS];
	struct rsrc *msrc[RSRC_FLEET_MEMBERS];
	if (!f || !fleet_of(all, ns, mo->name, f)) {
		free(f);
		return 0;
	}
	for (size_t k = 0; k < f->nmembers; k++)
		msrc[k] = fleet_source(cand, nc, f->members[k]);
	pthread_mutex_lock(&mo->lock);
	struct sfs_view *v = mo->current;
	if (!v || v->expired || v->content != content) {
		pthread_mutex_unlock(&mo->lock);
		free(f);
		return 1;
	}
	uint64_t sig = XXH3_64bits(f, offsetof(struct rsrc_fleet, members));
	for (size_t k = 0; k < f->nmembers; k++) {
		hold[k] = fleet_holder(v, msrc[k]);
		sig += XXH3_64bits_withSeed(&hold[k], sizeof(hold[k]), k + 1);
	}
	int changed = sig != v->lanes_sig;
	int moved = v->fleet_n != f->size || v->fleet_me != f->index;
	v->lanes_sig = sig;
	v->fleet_n = f->size;
	v->fleet_me = f->index;
	uint32_t set = v->set;
	pthread_mutex_unlock(&mo->lock);
	int rc = changed ? sfs_cache_set_fleet(r->cache, set, f->size, f->index,
					       hold, f->nmembers)
			 : 0;
	if (rc) {
		SFS_LOG(SFS_WARN, "model", "%s: fleet lanes: %s", mo->name,
			strerror(-rc));
		lanes_retry(mo, content);
	} else if (changed) {
		SFS_LOG(moved ? SFS_INFO : SFS_DEBUG, "model",
			"%s: fleet lanes: %zu replicas, this one the %zu-th: "
			"it pulls about 1/%zu of it from the seeds, the rest "
			"from %zu peers",
			mo->name, f->size, f->index, f->size, f->nmembers);
	}
	free(f);
	return 1;
}

struct lane {
	const char *addr;
	uint32_t holder;
};
/*
 * The lanes of @mo's current view: the re-seeders a seed listed that
 * publish its content and prefetch all of it (or have not said yet:
 * replicas started together then agree from the start), and this
 * replica if it does and a seed lists it; each keyed by its address
 * as the seed lists it, the same key in every member.  Given to the
 * cache when they changed.
 */
static void lanes(struct sfs_replica *r, struct sfs_model *mo)
{
	struct lane l[RSRC_MAX + 1];
	struct rsrc *cand[RSRC_MAX], **all;
	char self[300];
	size_t n = 0, nc = 0, me = SIZE_MAX;
	int listed = r->reseed && !rsrc_self_addr(r, self, sizeof(self));

	pthread_mutex_lock(&mo->lock);
	uint64_t content =
		mo->current && !mo->current->expired ? mo->current->content : 0;
	pthread_mutex_unlock(&mo->lock);
	if (!content)
		return;
	size_t ns = rsrc_all(r, &all);
	for (size_t i = 0; i < ns; i++)
		if (rsrc_publishes(all[i], mo->name, content))
			cand[nc++] = all[i];
	if (r->reseed && fleet_lanes(r, mo, content, all, ns, cand, nc)) {
		rsrc_put_all(all, ns);
		return;
	}

	pthread_mutex_lock(&mo->lock);
	struct sfs_view *v = mo->current;
	if (!v || v->expired || v->content != content) {
		pthread_mutex_unlock(&mo->lock);
		rsrc_put_all(all, ns);
		return;
	}
	for (size_t i = 0; i < nc; i++) {
		struct sfs_vholder *h = v->holders;
		while (h && (h->src != cand[i] || !h->partial || h->expires_ms))
			h = h->next;
		if (!h) /* not connected yet */
			l[n++] = (struct lane){cand[i]->addr,
					       SFS_CACHE_LANE_UNKNOWN};
		else if (h->prefetching || !h->have_version)
			l[n++] = (struct lane){cand[i]->addr, h->holder};
	}
	if (listed && v->warming)
		l[n++] = (struct lane){self, SFS_CACHE_NONE};
	/* Nobody else: no lanes. */
	if (n == 1 && l[0].holder == SFS_CACHE_NONE)
		n = 0;
	struct sfs_cache_lane cl[RSRC_MAX + 1];
	uint64_t sig = XXH3_64bits(&n, sizeof(n));
	for (size_t i = 0; i < n; i++) {
		cl[i].key = XXH3_64bits(l[i].addr, strlen(l[i].addr));
		cl[i].holder = l[i].holder;
		if (l[i].holder == SFS_CACHE_NONE)
			me = i;
		sig += XXH3_64bits_withSeed(&cl[i], sizeof(cl[i]), 7);
	}
	int changed = sig != v->lanes_sig;
	v->lanes_sig = sig;
	v->fleet_n = v->fleet_me = 0;
	uint32_t set = v->set;
	pthread_mutex_unlock(&mo->lock);
	rsrc_put_all(all, ns); /* l[].addr is not used past here */
	if (!changed)
		return;
	int rc = sfs_cache_set_lanes(r->cache, set, cl, n);
	if (rc) {
		SFS_LOG(SFS_WARN, "model", "%s: lanes: %s", mo->name,
			strerror(-rc));
		lanes_retry(mo, content);
	} else if (n && me != SIZE_MAX)
		SFS_LOG(SFS_INFO, "model",
			"%s: %zu replicas load it together: this one pulls "
			"about 1/%zu of it from the seeds, the rest from the "
			"others",
			mo->name, n, n);
	else if (n)
		SFS_LOG(SFS_INFO, "model",
			"%s: %zu re-seeders load it: their chunks are read "
			"from them, not from the seeds",
			mo->name, n);
	else
		SFS_LOG(SFS_INFO, "model",
			"%s: no replica loads it with this "
			"one any more",
			mo->name);
}

void model_retire(struct sfs_model *mo, const char *why)
{
	struct sfs_replica *r = mo->r;
	uint64_t *sup = NULL;
	size_t nsup = 0;

	pthread_mutex_lock(&mo->adopt_lock);
	pthread_mutex_lock(&mo->lock);
	int had = mo->current != NULL;
	mo->current = NULL;
	/* No source lists it: no seed's grace keeps a view of it. */
	for (struct sfs_view *v = mo->views; v; v = v->next)
		v->seed_until_ms = 0;
	snprintf(mo->why, sizeof(mo->why), "gone: %s", why);
	pthread_mutex_unlock(&mo->lock);
	if (had) {
		pthread_rwlock_wrlock(&r->tree_lock);
		sfs_tree_hide_model(r->tree, mo->name, &sup, &nsup);
		pthread_rwlock_unlock(&r->tree_lock);
	}
	pthread_mutex_unlock(&mo->adopt_lock);
	if (!had)
		return;
	uint64_t root = SFS_ROOT_INO;
	inval_inos(r, sup, nsup);
	inval_inos(r, &root, 1);
	free(sup);
	SFS_LOG(SFS_INFO, "model", "%s leaves the mount: %s", mo->name, why);
	pthread_mutex_lock(&r->lock);
	pthread_cond_broadcast(&r->cond); /* the sweeper expires its views */
	pthread_mutex_unlock(&r->lock);
}

int model_view_seeded(const struct sfs_view *v, uint64_t now, int64_t *left_ms)
{
	int64_t left = -2; /* none */
	for (const struct sfs_vholder *h = v->holders; h; h = h->next) {
		if (h->partial)
			continue; /* a re-seeder's: what it holds, not serves */
		if (!h->expires_ms)
			left = -1;
		else if (left != -1)
			left = SFS_MAX(left,
				       h->expires_ms > now
					       ? (int64_t)(h->expires_ms - now)
					       : 0);
	}
	/* No seed holder left: the grace the last of them gave. */
	if (left == -2 && v->seed_until_ms > now)
		left = (int64_t)(v->seed_until_ms - now);
	if (left_ms)
		*left_ms = left;
	return left != -2;
}

/*
 * One pass over @mo: holders whose grace ended go; a superseded view
 * no seed serves expires, whoever else holds it (model_view_seeded):
 * reads through it get ESTALE, its pages leave the page cache, its
 * cache set is retired; an expired view nobody holds is freed.
 * Returns when to look again (monotonic ms, 0: no need).
 */
static uint64_t sweep(struct sfs_replica *r, struct sfs_model *mo)
{
	struct sfs_vholder *gone = NULL;
	struct sfs_view *due = NULL, *dead = NULL;
	uint64_t now = sfs_now_ms(), next = 0;

	pthread_mutex_lock(&mo->lock);
	for (struct sfs_view **pv = &mo->views; *pv;) {
		struct sfs_view *v = *pv;
		for (struct sfs_vholder **ph = &v->holders; *ph;) {
			struct sfs_vholder *h = *ph;
			if (h->expires_ms && h->expires_ms <= now) {
				note_seed_gone(v, h, now);
				*ph = h->next;
				h->next = gone;
				gone = h;
				continue;
			}
			if (h->expires_ms && (!next || h->expires_ms < next))
				next = h->expires_ms;
			ph = &h->next;
		}
		if (v != mo->current && !v->expired && v->seed_until_ms > now &&
		    (!next || v->seed_until_ms < next))
			next = v->seed_until_ms;
		if (v != mo->current && !v->expired &&
		    !model_view_seeded(v, now, NULL) && !due) {
			v->expired = 1;
			due = v;
		}
		if (v != mo->current && v->expired && !v->refs && v != due &&
		    !dead) {
			*pv = v->next; /* unlink: freed below */
			dead = v;
			continue;
		}
		pv = &v->next;
	}
	pthread_mutex_unlock(&mo->lock);
	holders_drop(r, gone);
	lanes(r, mo);
	uint64_t *inos;
	if (due) {
		/* Reads through it fail with ESTALE from now on; its pages
		 * leave the page cache. */
		sfs_cache_retire_set(r->cache, due->set);
		size_t n = view_inodes(r, due, &inos);
		inval_inos(r, inos, n);
		free(inos);
		SFS_LOG(SFS_INFO, "model",
			"generation %" PRIu64 " of %s is no longer served: its "
			"open files get ESTALE",
			due->generation, mo->name);
		next = now; /* at once again: more may be due */
	}
	if (dead) {
		/* Nothing refers to it: no reference (refs 0, and none is
		 * taken of an expired view), no holder; its nodes go now. */
		view_disown(r, dead);
		view_release(r, dead);
#ifdef __GLIBC__
		/* A generation's memory is many small blocks (nodes, names,
		 * the manifest) among those of the next: give the pages it
		 * freed back, so the mount's RSS follows what it holds. */
		malloc_trim(0);
#endif
		next = now;
	}
	return next;
}

/*
 * Free @mo if it is gone: no source lists it, no view of it is left (a
 * view is what tree nodes, open files, prefetches and the cache set
 * point at), and the caller's is the only reference (status, metrics
 * and offers hold theirs while they use it).  Called by the sweeper
 * holding one reference, without locks.  Returns 1 when freed (the
 * reference went with it).
 */
static int reap(struct sfs_replica *r, struct sfs_model *mo)
{
	if (rsrc_lists(r, mo->name))
		return 0;
	pthread_mutex_lock(&r->lock);
	int gone = mo->refs == 1;
	/* Nobody else can reach it now but through a view: its lock is
	 * tried, never waited for, under r->lock. */
	if (gone && !pthread_mutex_trylock(&mo->lock)) {
		gone = !mo->views && !mo->current;
		pthread_mutex_unlock(&mo->lock);
	} else {
		gone = 0;
	}
	if (gone) {
		for (size_t i = 0; i < r->nmodels; i++)
			if (r->models[i] == mo) {
				memmove(&r->models[i], &r->models[i + 1],
					(r->nmodels - i - 1) *
						sizeof(r->models[0]));
				r->nmodels--;
				break;
			}
		if (mo->origin) /* NULL: its source was retired */
			mo->origin->nmodels--;
	}
	pthread_mutex_unlock(&r->lock);
	if (!gone)
		return 0;
	SFS_LOG(SFS_DEBUG, "model", "%s: freed (no source lists it)", mo->name);
	model_free(mo);
	return 1;
}

void *model_sweeper(void *arg)
{
	struct sfs_replica *r = arg;

	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		uint64_t next = 0;
		struct sfs_model **all;
		pthread_mutex_unlock(&r->lock);
		rsrc_bury(r); /* sources retired: what they served goes */
		size_t n = model_all(r, &all);
		for (size_t i = 0; i < n; i++) {
			uint64_t t = sweep(r, all[i]);
			if (t && (!next || t < next))
				next = t;
			if (reap(r, all[i]))
				all[i] = NULL;
		}
		model_put_all(all, n);
		pthread_mutex_lock(&r->lock);
		if (r->stop)
			break;
		uint64_t now = sfs_now_ms();
		if (next && next <= now)
			continue;
		struct timespec ts =
			sfs_abstime(next ? SFS_MIN(next - now, 1000) : 1000);
		pthread_cond_timedwait(&r->cond, &r->lock, &ts);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
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
