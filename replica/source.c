/* SPDX-License-Identifier: MIT */
/*
 * source.c - a replica's sources: each seed given with --seed (and each
 * re-seeder a seed lists) is asked what it publishes (GET /v1/models:
 * every model, its generation, content and the generations still
 * served), on every open of one of its models' files when it leads that
 * model, and behind, every second.  What is new is fetched (GET
 * /v1/manifest?model=NAME), checked, and offered to the model
 * (model.c): a holder of the same content, a new generation from the
 * leader, or refused with the field that differs.  A source that
 * restarted (a new instance) is connected to again; its old run's
 * holders go.
 *
 * Everything a source answers is untrusted: bounded, validated, and a
 * bad answer is one line naming the field.
 */
#include "replica/replica_impl.h"
#include "replica/parse.h"

#include "cache/cache.h"
#include "common/log.h"
#include "common/util.h"
#include "control/control.h"
#include "control/sign.h"
#include "metadata/jsonlim.h"
#include "replica/tree.h"
#include "transports/transport.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODELS_MAX_BYTES (4u << 20) /* a /v1/models answer */

int rsrc_new(struct sfs_replica *r, const char *addr, int reseeder,
	     struct rsrc **out)
{
	struct rsrc *s = calloc(1, sizeof(*s));
	if (!s || !(s->addr = strdup(addr))) {
		free(s);
		return -ENOMEM;
	}
	s->r = r;
	s->reseeder = reseeder;
	s->cpeer = SFS_CACHE_NONE;
	pthread_mutex_init(&s->lock, NULL);
	int rc = sfs_cond_init(&s->cond);
	if (rc) {
		free(s->addr);
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void rsrc_free(struct rsrc *s)
{
	if (!s)
		return;
	rsrc_stop(s);
	if (s->found || s->registered)
		SFS_LOG(SFS_DEBUG, "source", "%s: freed", s->addr);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	sfs_manifest_free(s->primed);
	free(s->known);
	free(s->addr);
	free(s);
}

static const char *valid_name(json_t *v)
{
	const char *why, *s = json_string_value(v);
	if (!s || json_string_length(v) > SFS_MF_NAME_MAX ||
	    strlen(s) != json_string_length(v) || sfs_path_check(s, &why) ||
	    strchr(s, '/'))
		return NULL;
	return s;
}

/* A "0x..." string holding a 64-bit value, into *out; 0 or -1. */
static int hex64(json_t *v, uint64_t *out)
{
	if (!json_is_string(v) || json_string_length(v) > 18)
		return -1;
	return sfs_parse_u64(json_string_value(v), out) ? -1 : 0;
}

int rsrc_parse_models(const char *body, size_t len, struct rsrc_answer *a,
		      char *err, size_t errlen)
{
	json_t *o, *ms, *e;
	char why[200];
	size_t i;
	int rc = -EPROTO;

	memset(a, 0, sizeof(*a));
	int lrc = sfs_json_load(SFS_JSON_MODELS, body, len,
				JSON_REJECT_DUPLICATES, &o, why, sizeof(why));
	if (lrc == -E2BIG) {
		snprintf(err, errlen, "%s", why);
		goto out;
	}
	if (!json_is_object(o)) {
		snprintf(err, errlen, "/v1/models: not a JSON object%s%s",
			 o ? "" : ": ", o ? "" : why);
		goto out;
	}
	if (hex64(json_object_get(o, "instance"), &a->instance)) {
		snprintf(err, errlen,
			 "/v1/models: instance: not a 64-bit hex "
			 "string");
		goto out;
	}
	ms = json_object_get(o, "models");
	if (!json_is_array(ms) || json_array_size(ms) > RMODEL_MAX) {
		snprintf(err, errlen,
			 "/v1/models: models: not an array of at most %d",
			 RMODEL_MAX);
		goto out;
	}
	if (!(a->models =
		      calloc(json_array_size(ms) + 1, sizeof(*a->models)))) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	json_array_foreach (ms, i, e) {
		struct rsrc_ans_model *m = &a->models[a->n];
		const char *name = valid_name(json_object_get(e, "model"));
		json_t *g = json_object_get(e, "generation");
		json_t *sv = json_object_get(e, "served"), *x;
		if (!name) {
			snprintf(err, errlen,
				 "/v1/models: models[%zu].model: not a valid "
				 "model name",
				 i);
			goto out;
		}
		for (size_t k = 0; k < a->n; k++)
			if (!strcmp(a->models[k].name, name)) {
				snprintf(err, errlen,
					 "/v1/models: models[%zu].model: %s "
					 "listed twice",
					 i, name);
				goto out;
			}
		snprintf(m->name, sizeof(m->name), "%s", name);
		if (!json_is_integer(g) || json_integer_value(g) < 0 ||
		    hex64(json_object_get(e, "content"), &m->content) ||
		    !json_is_array(sv) || json_array_size(sv) > RSERVED_MAX) {
			snprintf(err, errlen,
				 "/v1/models: models[%zu] (%s): generation, "
				 "content or served missing or malformed",
				 i, name);
			goto out;
		}
		m->generation = (uint64_t)json_integer_value(g);
		json_t *ke = json_object_get(e, "key_epoch");
		if (ke &&
		    (!json_is_integer(ke) || json_integer_value(ke) < 0)) {
			snprintf(err, errlen,
				 "/v1/models: models[%zu] (%s): key_epoch: not "
				 "an integer",
				 i, name);
			goto out;
		}
		m->key_epoch = ke ? (uint64_t)json_integer_value(ke) : 0;
		json_t *sa = json_object_get(e, "signed_at");
		if (sa &&
		    (!json_is_integer(sa) || json_integer_value(sa) <= 0)) {
			snprintf(err, errlen,
				 "/v1/models: models[%zu] (%s): signed_at: not "
				 "a positive integer",
				 i, name);
			goto out;
		}
		m->signed_at = sa ? (int64_t)json_integer_value(sa) : 0;
		size_t k;
		json_array_foreach (sv, k, x) {
			json_t *sg = json_object_get(x, "generation");
			json_t *ex = json_object_get(x, "expires_in_ms");
			if (!json_is_integer(sg) ||
			    json_integer_value(sg) < 0 ||
			    (ex && (!json_is_integer(ex) ||
				    json_integer_value(ex) < 0))) {
				snprintf(err, errlen,
					 "/v1/models: models[%zu].served[%zu]: "
					 "malformed",
					 i, k);
				goto out;
			}
			m->served[m->nserved] =
				(uint64_t)json_integer_value(sg);
			m->expires_in[m->nserved++] =
				ex ? (int64_t)json_integer_value(ex) : -1;
		}
		a->n++;
	}
	rc = 0;
out:
	json_decref(o);
	if (rc) {
		free(a->models);
		a->models = NULL;
		a->n = 0;
	}
	return rc;
}

int rsrc_list(struct rsrc *s, unsigned int timeout_ms, struct rsrc_answer *a,
	      char *err, size_t errlen)
{
	struct sfs_replica *r = s->r;
	struct sfs_cache_peer_info pi;
	char path[160] = "/v1/models";
	char *body;
	size_t len;
	memset(a, 0, sizeof(*a));
	/* What this replica read from @s so far, for the seed's metrics
	 * (seed/ctl.c): r->proto is set once, before any peer exists. */
	pthread_mutex_lock(&s->lock);
	uint32_t cpeer = s->cpeer;
	pthread_mutex_unlock(&s->lock);
	if (cpeer != SFS_CACHE_NONE && r->cache &&
	    !sfs_cache_peer(r->cache, cpeer, &pi))
		snprintf(path, sizeof(path),
			 "/v1/models?replica=%016" PRIx64
			 "&protocol=%s&read_bytes=%" PRIu64,
			 r->instance, r->proto, pi.bytes);
	int rc = sfs_control_get(r->cfg.cred, s->addr, path, timeout_ms,
				 MODELS_MAX_BYTES, &body, &len, err, errlen);
	if (rc)
		return rc;
	rc = rsrc_parse_models(body, len, a, err, errlen);
	free(body);
	return rc;
}

/* What @s knows of @name (s->lock held), or NULL. */
static struct rsrc_known *find_known(struct rsrc *s, const char *name)
{
	for (size_t i = 0; i < s->nknown; i++)
		if (!strcmp(s->known[i].name, name))
			return &s->known[i];
	return NULL;
}

/* What @s knew of @name (s->lock held); made if missing.  NULL: out of
 * memory. */
static struct rsrc_known *known(struct rsrc *s, const char *name)
{
	struct rsrc_known *k = find_known(s, name);
	if (k)
		return k;
	if (sfs_grow((void **)&s->known, &s->cap_known, s->nknown + 1,
		     sizeof(s->known[0])))
		return NULL;
	k = &s->known[s->nknown++];
	memset(k, 0, sizeof(*k));
	snprintf(k->name, sizeof(k->name), "%s", name);
	return k;
}

/* Forget the names @s no longer lists and no registry record of it
 * names (s->lock held): a source that lists new names at every answer
 * costs no more than one answer's worth.  No pointer into s->known is
 * kept across an unlock, so they may move. */
static void forget_unlisted(struct rsrc *s)
{
	size_t n = 0;
	for (size_t k = 0; k < s->nknown; k++)
		if (s->known[k].listed || s->known[k].reg_known)
			s->known[n++] = s->known[k];
	s->nknown = n;
	if (!n) {
		free(s->known);
		s->known = NULL;
		s->cap_known = 0;
	}
}

struct rsrc *rsrc_get(struct sfs_replica *r, size_t i)
{
	pthread_mutex_lock(&r->lock);
	struct rsrc *s = i < r->nsrcs ? r->srcs[i] : NULL;
	if (s)
		s->refs++;
	pthread_mutex_unlock(&r->lock);
	return s;
}

size_t rsrc_all(struct sfs_replica *r, struct rsrc ***out)
{
	size_t n = 0;
	pthread_mutex_lock(&r->lock);
	struct rsrc **all = malloc((r->nsrcs ? r->nsrcs : 1) * sizeof(*all));
	for (size_t i = 0; all && i < r->nsrcs; i++)
		if (r->srcs[i]) {
			all[n++] = r->srcs[i];
			r->srcs[i]->refs++;
		}
	pthread_mutex_unlock(&r->lock);
	*out = all;
	return n;
}

void rsrc_put(struct rsrc *s)
{
	if (!s)
		return;
	struct sfs_replica *r = s->r;
	pthread_mutex_lock(&r->lock);
	int last = --s->refs == 0;
	pthread_mutex_unlock(&r->lock);
	if (last) /* retired and buried: its poller was joined */
		rsrc_free(s);
}

void rsrc_put_all(struct rsrc **all, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rsrc_put(all[i]);
	free(all);
}

int rsrc_lists(struct sfs_replica *r, const char *name)
{
	struct rsrc **all;
	size_t n = rsrc_all(r, &all);
	int yes = 0;
	for (size_t i = 0; i < n && !yes; i++) {
		struct rsrc *s = all[i];
		pthread_mutex_lock(&s->lock);
		struct rsrc_known *k = s->self ? NULL : find_known(s, name);
		yes = k && k->listed;
		pthread_mutex_unlock(&s->lock);
	}
	rsrc_put_all(all, n);
	return yes;
}

/* Among @all, the first source that lists @model and is reachable
 * (*@best), else the first that lists it (*@first); re-seeders given as
 * a --seed (their manifest says holdings) only if @holdings_too. */
static void leader_among(struct rsrc **all, size_t n, const char *model,
			 int holdings_too, struct rsrc **first,
			 struct rsrc **best)
{
	for (size_t i = 0; i < n && !*best; i++) {
		struct rsrc *s = all[i];
		if (s->reseeder)
			continue;
		pthread_mutex_lock(&s->lock);
		int lists = 0;
		if (s->dropped || (s->holdings && !holdings_too)) {
			pthread_mutex_unlock(&s->lock);
			continue;
		}
		for (size_t k = 0; k < s->nknown && !lists; k++)
			lists = s->known[k].listed &&
				!strcmp(s->known[k].name, model);
		if (lists && !*first)
			*first = s;
		if (lists && !s->unreachable)
			*best = s;
		pthread_mutex_unlock(&s->lock);
	}
}

struct rsrc *rsrc_leader(struct sfs_replica *r, const char *model)
{
	struct rsrc *first = NULL, *best = NULL, **all;
	size_t n = rsrc_all(r, &all);
	/* Seeds first; a re-seeder given as a --seed only when no seed
	 * lists the model: it is then all the replica was given. */
	leader_among(all, n, model, 0, &first, &best);
	if (!first)
		leader_among(all, n, model, 1, &first, &best);
	struct rsrc *lead = best ? best : first;
	if (lead) {
		pthread_mutex_lock(&r->lock);
		lead->refs++;
		pthread_mutex_unlock(&r->lock);
	}
	rsrc_put_all(all, n);
	return lead;
}

/* Connect to the run of @s that published @m: a transport peer and a
 * cache peer.  0 or -errno with @why. */
static int connect_run(struct rsrc *s, const struct sfs_manifest *m, char *why,
		       size_t whylen)
{
	struct sfs_replica *r = s->r;
	ssize_t ep = sfs_manifest_endpoint(m, r->proto);
	uint64_t xpeer;

	if (ep < 0) {
		char served[SFS_MF_MAX_ENDPOINTS * 32];
		snprintf(why, whylen, "it serves %s, not protocol %s",
			 sfs_manifest_protocols(m, served, sizeof(served)),
			 r->proto);
		return -EPROTONOSUPPORT;
	}
	pthread_mutex_lock(&r->xlock);
	int rc = sfs_control_connect_peer(s->r->cfg.cred, s->addr, r->x,
					  &m->eps[ep], r->cfg.timeout_ms,
					  &xpeer, why, whylen);
	pthread_mutex_unlock(&r->xlock);
	if (rc)
		return rc;
	if ((rc = rsrc_adopt_peer(s, m, (size_t)ep, xpeer, why, whylen)))
		sfs_xport_peer_remove(r->x, xpeer);
	return rc;
}

int rsrc_adopt_peer(struct rsrc *s, const struct sfs_manifest *m, size_t ep,
		    uint64_t xpeer, char *err, size_t errlen)
{
	char label[300];
	uint32_t cpeer;
	snprintf(label, sizeof(label), "%s %s",
		 s->reseeder || m->holdings ? "re-seeder" : "seed", s->addr);
	int rc = sfs_cache_add_peer(s->r->cache, xpeer, label, &cpeer);
	if (rc) {
		snprintf(err, errlen, "cache: %s", strerror(-rc));
		return rc;
	}
	/* A re-seeder: found as one, or whose manifest says so (one given
	 * as a --seed is one all the same). */
	int reseeder = s->reseeder || m->holdings;
	/* A seed serves what no re-seeder has: it sends each byte about
	 * once, the replicas the rest. */
	sfs_cache_peer_last_resort(s->r->cache, cpeer, !reseeder);
	/* A seed, reached over its authenticated control channel: what it
	 * serves is checked against XXH3.  A re-seeder (any token holder
	 * can be one) against the seed's SHA-256. */
	sfs_cache_peer_trusted(s->r->cache, cpeer, !reseeder);
	pthread_mutex_lock(&s->lock);
	s->holdings = m->holdings;
	s->instance = m->instance;
	s->xpeer = xpeer;
	s->cpeer = cpeer;
	s->ep = m->eps[ep];
	s->has_ep = 1;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* @s's run changed from @old (its cache peer @cpeer): its holders go,
 * and so does the connection. */
static void forget_run(struct rsrc *s, uint64_t fresh)
{
	struct sfs_replica *r = s->r;
	struct sfs_model **all;
	size_t n = model_all(r, &all);
	for (size_t i = 0; i < n; i++)
		model_prune(all[i], s, fresh, NULL, NULL, 0);
	model_put_all(all, n);
	pthread_mutex_lock(&s->lock);
	uint32_t cpeer = s->cpeer;
	s->cpeer = SFS_CACHE_NONE;
	s->instance = 0;
	for (size_t k = 0; k < s->nknown; k++)
		s->known[k].offered = 0;
	pthread_mutex_unlock(&s->lock);
	if (cpeer != SFS_CACHE_NONE)
		sfs_cache_remove_peer(r->cache, cpeer);
}

/* With --trust-key: @m is signed by a trusted key, and every file with
 * bytes has SHA-256 digests, so no source but the key's holder can
 * change a byte of it.  0, or -EPERM with @why. */
static int trusted(const struct sfs_trust *t, const struct sfs_manifest *m,
		   char *why, size_t len)
{
	uint8_t d[32];
	if (!m->has_sig) {
		snprintf(why, len,
			 "manifest not signed, and --trust-key %s asks for a "
			 "signature (the seed's --sign-key)",
			 sfs_trust_path(t));
		return -EPERM;
	}
	if (sfs_manifest_signed_digest(m, d)) {
		snprintf(why, len, "out of memory");
		return -ENOMEM;
	}
	int rc = sfs_trust_verify(t, m->sig_key, d, sizeof(d), m->sig);
	if (rc == -ENOKEY) {
		snprintf(why, len,
			 "manifest signed by key %s, which --trust-key %s does "
			 "not hold",
			 m->sig_key, sfs_trust_path(t));
		return -EPERM;
	}
	if (rc) {
		snprintf(why, len,
			 "manifest signature (key %s) does not verify: it was "
			 "changed after it was signed",
			 m->sig_key);
		return -EPERM;
	}
	for (size_t i = 0; i < m->nfiles; i++)
		if (m->files[i].size && !m->files[i].sha256) {
			snprintf(why, len,
				 "files[%zu] (%.200s): no SHA-256 digests, and "
				 "--trust-key checks every chunk with one (the "
				 "seed's --digest sha256)",
				 i, m->files[i].path);
			return -EPERM;
		}
	/* Signed, but long ago: a signature lapses (valid_until). */
	if (sfs_sign_current(m, sfs_sign_now(), why, len))
		return -EPERM;
	return 0;
}

/* Fetch @name's manifest from @s and offer it to the model.  Updates
 * what @s knows of it. */
static void offer(struct rsrc *s, const struct rsrc_ans_model *am,
		  uint64_t instance)
{
	struct sfs_replica *r = s->r;
	char path[SFS_MF_NAME_MAX * 3 + 64], err[SFS_XPORT_ERR_MAX] = "";
	char *json = NULL, *esc = NULL;
	size_t len;
	struct sfs_manifest *m = NULL;
	int rc = -ENOMEM, used = 0;

	/* A model it would bring in past the caps: not even fetched. */
	if ((rc = model_room(r, am->name, s, err, sizeof(err))))
		goto done;
	/* Model names are path components: escape what a URL needs. */
	if (!(esc = sfs_url_escape(am->name))) {
		snprintf(err, sizeof(err), "out of memory");
		goto done;
	}
	/* The manifest the mount opened with, when this is its model and
	 * run still: not fetched twice (at small chunks it is mostly
	 * checksums, a large part of what control costs). */
	pthread_mutex_lock(&s->lock);
	struct sfs_manifest *primed = s->primed;
	s->primed = NULL;
	pthread_mutex_unlock(&s->lock);
	if (primed && !strcmp(primed->model, am->name) &&
	    primed->generation == am->generation &&
	    primed->content == am->content && primed->instance == instance &&
	    primed->key_epoch >= am->key_epoch &&
	    primed->signed_at >= am->signed_at)
		m = primed;
	else
		sfs_manifest_free(primed);
	/* Of a content this mount has, all it needs is how this source
	 * serves it: thin (no checksums or tensors, most of a manifest at
	 * small chunks; one that checks signatures asks whole). */
	int thin = !sfs_control_cred_trust(r->cfg.cred) &&
		   model_has_content(r, am->name, am->content);
	snprintf(path, sizeof(path), "/v1/manifest?model=%s%s", esc,
		 thin ? "&thin=2" : "");
	free(esc);
	if (!m && (rc = sfs_control_get(s->r->cfg.cred, s->addr, path,
					r->cfg.timeout_ms, SFS_MANIFEST_MAX,
					&json, &len, err, sizeof(err))))
		goto done;
	char why[400];
	if (!m && (rc = sfs_manifest_decode(json, len, &m, why, sizeof(why)))) {
		snprintf(err, sizeof(err), "bad manifest: %s", why);
		goto done;
	}
	/* What it says it is counts for who leads from now on, connected
	 * or not (rsrc_leader: a re-seeder leads only where no seed does). */
	pthread_mutex_lock(&s->lock);
	s->holdings = m->holdings;
	pthread_mutex_unlock(&s->lock);
	const struct sfs_trust *trust = sfs_control_cred_trust(r->cfg.cred);
	if (trust && (rc = trusted(trust, m, why, sizeof(why)))) {
		snprintf(err, sizeof(err), "%s", why);
		goto done;
	}
	if (strcmp(m->model, am->name) || m->instance != instance) {
		/* It moved on meanwhile (restarted): the next check. */
		snprintf(err, sizeof(err), "its manifest changed meanwhile");
		rc = -EAGAIN;
		goto done;
	}
	pthread_mutex_lock(&s->lock);
	int connected = s->cpeer != SFS_CACHE_NONE && s->instance == instance;
	pthread_mutex_unlock(&s->lock);
	if (!connected && (rc = connect_run(s, m, err, sizeof(err))))
		goto done;
	struct sfs_model *mo;
	if ((rc = model_make(r, am->name, s, &mo, err, sizeof(err))))
		goto done;
	struct rsrc *lead = rsrc_leader(r, am->name);
	int leader = lead == s;
	rsrc_put(lead);
	uint64_t gen = m->generation, content = m->content;
	uint64_t epoch = m->key_epoch;
	int64_t signed_at = m->signed_at;
	free(json); /* what a mount shows is encoded again, without keys */
	json = NULL;
	rc = model_offer(mo, s, m, leader, err, sizeof(err));
	model_put(mo);
#ifdef __GLIBC__
	/* Decoding a manifest makes several small objects per file (50 MB
	 * at its peak for 20,000 files), freed by now but kept by this
	 * thread's malloc arena: given back, a generation costs a third of
	 * the memory (docs/limits.md). */
	malloc_trim(0);
#endif
	m = NULL;
	used = rc == 1;
	pthread_mutex_lock(&s->lock);
	struct rsrc_known *k = known(s, am->name);
	if (k && rc >= 0) {
		k->offered = gen;
		k->offered_content = content;
		k->offered_epoch = epoch;
		k->offered_signed = signed_at;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc >= 0)
		rc = 0;
done:
	sfs_manifest_free(m);
	free(json);
	pthread_mutex_lock(&s->lock);
	struct rsrc_known *kk = known(s, am->name);
	uint64_t wait = 0;
	if (kk && rc < 0) {
		/* Not at every open: after a back-off, or when it moves on. */
		if (kk->failed_gen != am->generation)
			kk->failures = 0;
		kk->failed_gen = am->generation;
		wait = SFS_MIN((uint64_t)ADOPT_BACKOFF_MS
				       << SFS_MIN(kk->failures, 16u),
			       (uint64_t)ADOPT_BACKOFF_MAX_MS);
		kk->failures++;
		kk->retry_ms = sfs_now_ms() + wait;
	} else if (kk) {
		kk->failures = 0;
	}
	if (kk) {
		int news = strncmp(kk->why, err, sizeof(kk->why) - 1) != 0;
		kk->used = used;
		snprintf(kk->why, sizeof(kk->why), "%.*s",
			 (int)sizeof(kk->why) - 1, used ? "" : err);
		pthread_mutex_unlock(&s->lock);
		/* At the caps: said in model.c, once a minute; a source
		 * leaving (retired while it answered): said when retired. */
		if (rc == -ESHUTDOWN)
			SFS_LOG(SFS_DEBUG, "source",
				"not adopting %s from %s: %s", am->name,
				s->addr, err);
		/* While the replica opens, its error line names the
		 * first refusal (a command's one line): info alone. */
		else if (rc < 0 && rc != -ENOSPC)
			SFS_LOG(atomic_load(&r->opened) ? SFS_WARN : SFS_INFO,
				"source",
				"cannot adopt %s's generation %" PRIu64
				" of %s: %s (next try in %" PRIu64 " ms)",
				s->addr, am->generation, am->name, err, wait);
		else if (rc >= 0 && !used && news && *err)
			SFS_LOG(atomic_load(&r->opened) ? SFS_WARN : SFS_INFO,
				"source", "not reading %s from %s: %s",
				am->name, s->addr, err);
	} else {
		pthread_mutex_unlock(&s->lock);
	}
}

#define HOLD_POLL_MS 250	  /* holdings asked this often */
#define HOLD_BACKOFF_MAX_MS 30000 /* after refusals, at most this */
#define HOLD_REFUSED_MAX 5	  /* refusals in a row: no more asks */

/* A re-seeder's holdings of @am, fetched when they changed, become the
 * pieces of its holder. */
static void refresh_holdings(struct rsrc *s, const struct rsrc_ans_model *am)
{
	struct sfs_replica *r = s->r;
	uint64_t now = sfs_now_ms();
	/* A re-seeder whose answers were refused: asked later, or not at
	 * all (what parsing them would cost is its to choose). */
	pthread_mutex_lock(&s->lock);
	struct rsrc_known *k0 = known(s, am->name);
	int skip =
		k0 && ((k0->hold_off && k0->hold_off_instance == s->instance) ||
		       now < k0->hold_next_ms);
	if (k0 && k0->hold_off && k0->hold_off_instance != s->instance) {
		k0->hold_off = 0; /* another run: asked afresh */
		k0->hold_refused = 0;
	}
	pthread_mutex_unlock(&s->lock);
	if (skip)
		return;
	struct sfs_model *mo = model_get(r, am->name);
	uint64_t version = 0, base = 0;
	struct model_hold_caps caps;
	int has =
		mo ? model_holdings_version(mo, s, am->content, &version, &base)
		   : 0;
	if (has && model_holdings_limits(mo, am->content, &caps))
		has = 0;
	char path[SFS_MF_NAME_MAX * 3 + 128], err[SFS_XPORT_ERR_MAX], *body;
	char *esc = has ? sfs_url_escape(am->name) : NULL;
	size_t len;
	if (!esc) {
		model_put(mo);
		return;
	}
	/* Form 2: runs, and only what changed since the list it has. */
	int n = snprintf(path, sizeof(path),
			 "/v1/holdings?model=%s&content=0x%" PRIx64 "&form=2",
			 esc, am->content);
	if (has == 2 && n > 0 && (size_t)n < sizeof(path))
		n += snprintf(path + n, sizeof(path) - (size_t)n,
			      "&since=%" PRIu64, version);
	if (has == 2 && base && n > 0 && (size_t)n < sizeof(path))
		snprintf(path + n, sizeof(path) - (size_t)n, "&base=%" PRIu64,
			 base);
	free(esc);
	/* The keep an answer gives counts from before it was asked. */
	uint64_t asked = sfs_now_ms();
	/* Its byte cap and JSON limits are the model's: an answer costs
	 * what the model is, never what a peer chooses. */
	int rc = sfs_control_get(s->r->cfg.cred, s->addr, path,
				 r->cfg.timeout_ms, caps.bytes, &body, &len,
				 err, sizeof(err));
	if (!rc) {
		rc = model_holdings(mo, s, am->content, body, len, asked,
				    &caps.lim, err, sizeof(err));
		free(body);
		if (rc && len > (1u << 20))
			malloc_trim(0); /* a large refused answer's heap back */
	}
	if (!rc &&
	    model_holdings_version(mo, s, am->content, &version, &base) != 2)
		version = 0;
	model_put(mo);
	/* Asked every 250 ms: a bad answer is said once, until it
	 * changes or a good one comes. */
	pthread_mutex_lock(&s->lock);
	struct rsrc_known *k = known(s, am->name);
	int news = rc &&
		   (!k || strncmp(k->hold_why, err, sizeof(k->hold_why) - 1));
	if (k)
		snprintf(k->hold_why, sizeof(k->hold_why), "%.*s",
			 (int)sizeof(k->hold_why) - 1, rc ? err : "");
	if (k && !rc) {
		k->hold_answers++;
		k->hold_version = version;
		k->hold_refused = 0;
		k->hold_next_ms = 0;
	}
	int off = 0;
	if (k && (rc == -EPROTO || rc == -E2BIG)) {
		/* Refused, not lost: 250 ms doubling, then never again. */
		k->hold_refused++;
		k->hold_next_ms = sfs_now_ms() +
				  SFS_MIN((uint64_t)HOLD_POLL_MS << SFS_MIN(
						  k->hold_refused, 8u),
					  (uint64_t)HOLD_BACKOFF_MAX_MS);
		if (k->hold_refused >= HOLD_REFUSED_MAX && !k->hold_off) {
			k->hold_off = off = 1;
			k->hold_off_instance = s->instance;
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (news)
		SFS_LOG(SFS_WARN, "source", "holdings of %s from %s: %s",
			am->name, s->addr, err);
	if (off)
		SFS_LOG(SFS_WARN, "source",
			"holdings of %s from %s: %d answers in a row refused: "
			"not asked again while it runs (its last: %s)",
			am->name, s->addr, HOLD_REFUSED_MAX, err);
}

/* A valid HOST:PORT, both parts there. */
static int hostport_ok(const char *a)
{
	char h[256], p[16];
	return a && !sfs_parse_hostport(a, h, sizeof(h), p, sizeof(p)) && *h &&
	       *p;
}

/* Answer @o's "fleet" into *@f (size 0 when there is none). */
static int parse_fleet(json_t *o, struct rsrc_fleet *f, char *err,
		       size_t errlen)
{
	json_t *fl = json_object_get(o, "fleet"), *e;
	memset(f, 0, sizeof(*f));
	if (!fl)
		return 0;
	json_t *sz = json_object_get(fl, "size");
	json_t *ix = json_object_get(fl, "index");
	json_t *mem = json_object_get(fl, "members");
	const char *bad = NULL;
	size_t want = 0, i;
	if (!json_is_integer(sz) || json_integer_value(sz) < 2 ||
	    json_integer_value(sz) > RSRC_FLEET_MAX)
		bad = "fleet.size: 2 to 4096 expected";
	else if (!json_is_integer(ix) || json_integer_value(ix) < 0 ||
		 json_integer_value(ix) >= json_integer_value(sz))
		bad = "fleet.index: below fleet.size expected";
	else
		for (json_int_t d = 1; d < json_integer_value(sz); d <<= 1)
			want++;
	if (!bad && (!json_is_array(mem) || json_array_size(mem) != want))
		bad = "fleet.members: one address per power of two below "
		      "fleet.size expected";
	json_array_foreach (bad ? NULL : mem, i, e)
		if (!hostport_ok(json_string_value(e)) ||
		    strlen(json_string_value(e)) >= sizeof(f->members[0]))
			bad = "fleet.members: HOST:PORT expected";
	if (bad) {
		snprintf(err, errlen, "/v1/sources: %s", bad);
		return -EBADMSG;
	}
	json_array_foreach (mem, i, e)
		snprintf(f->members[i], sizeof(f->members[i]), "%s",
			 json_string_value(e));
	f->nmembers = want;
	f->index = (size_t)json_integer_value(ix);
	f->size = (size_t)json_integer_value(sz);
	return 0;
}

int rsrc_parse_sources(const char *body, size_t len,
		       void (*fn)(void *arg, const char *addr), void *arg,
		       struct rsrc_fleet *fleet, char *err, size_t errlen)
{
	json_t *o, *e;
	size_t i;
	struct rsrc_fleet none;
	int rc = sfs_json_load(SFS_JSON_SOURCES, body, len, 0, &o, err, errlen);
	if (!rc)
		rc = parse_fleet(o, fleet ? fleet : &none, err, errlen);
	if (rc && fleet)
		memset(fleet, 0, sizeof(*fleet));
	/* The list is used whatever its fleet (one from a newer seed). */
	json_array_foreach (json_object_get(o, "reseeders"), i, e) {
		const char *a =
			json_string_value(json_object_get(e, "address"));
		if (hostport_ok(a))
			fn(arg, a);
	}
	json_decref(o);
	return rc;
}

static int add_source(struct sfs_replica *r, const char *addr, int reseeder,
		      int start, const struct rsrc_fleet *ring,
		      struct rsrc **out);

/* What a seed's /v1/sources answer is walked with. */
struct listing {
	struct rsrc *lister;		/* the seed that answered */
	const struct rsrc_fleet *fleet; /* its "fleet", parsed first */
};

/* A re-seeder seed @arg lists: a source from now on.  It is found
 * (it may leave, see unlisted) unless --seed or the registry gave it,
 * or it is a seed.  A member of this one's place in the fleet is a
 * peer up to RSRC_FLEET_MEMBERS (a ring of n has log2 n members), and
 * takes the place of a peer that is none when they are full. */
static void add_reseeder(void *arg, const char *addr)
{
	struct listing *l = arg;
	struct rsrc *lister = l->lister, *s = NULL;
	int member = 0;
	for (size_t k = 0; k < l->fleet->nmembers && !member; k++)
		member = !strcmp(l->fleet->members[k], addr);
	int rc =
		add_source(lister->r, addr, 1, 1, member ? l->fleet : NULL, &s);
	if (rc) {
		rsrc_put(s); /* NULL, or one whose poller did not start */
		return;
	}
	pthread_mutex_lock(&s->lock);
	if (s->reseeder && !s->registered && s->idx >= s->r->cfg.nseeds) {
		s->found = 1;
		s->listed_ms = sfs_now_ms();
		snprintf(s->listed_by, sizeof(s->listed_by), "%s",
			 lister->addr);
	}
	pthread_mutex_unlock(&s->lock);
	rsrc_put(s);
}

/* The re-seeders seed @s lists: each one not known yet becomes a
 * source (asked behind, used where its content matches). */
static void discover(struct rsrc *s)
{
	struct sfs_replica *r = s->r;
	char err[SFS_XPORT_ERR_MAX], *body;
	size_t len;
	char path[80];
	struct rsrc_fleet *f = malloc(sizeof(*f));
	if (!f)
		return;
	/* Its own subset of the fleet's re-seeders (the seed ranks them
	 * for this run): replicas spread over them.  A re-seeder says
	 * which run it is: the seed may give it its place in the fleet's
	 * lanes instead, and exactly the peers that go with it. */
	uint64_t me = atomic_load(&r->reseed_instance);
	int n = snprintf(path, sizeof(path), "/v1/sources?for=%016" PRIx64,
			 r->instance);
	if (me)
		snprintf(path + n, sizeof(path) - (size_t)n,
			 "&me=0x%016" PRIx64, me);
	if (sfs_control_get(s->r->cfg.cred, s->addr, path, r->cfg.timeout_ms,
			    1u << 20, &body, &len, err, sizeof(err))) {
		free(f);
		/* An older seed, or none listed, or a moment's failure: a
		 * place it gave stays until RSRC_FLEET_KEEP_MS after it
		 * said it (fleet_of), not past. */
		return;
	}
	struct listing l = {s, f};
	int rc = rsrc_parse_sources(body, len, add_reseeder, &l, f, err,
				    sizeof(err));
	f->at_ms = sfs_now_ms();
	if (!rc && f->size)
		SFS_LOG(SFS_DEBUG, "source",
			"%s: this re-seeder is the %zu-th of %zu in the "
			"fleet's lanes",
			s->addr, f->index, f->size);
	free(body);
	if (!rc || rc == -EBADMSG) /* after the listed ones' listed_ms */
		atomic_store(&s->sources_ms, sfs_now_ms());
	/* Asked every second: said once, until it changes. */
	pthread_mutex_lock(&s->lock);
	int news = rc && strncmp(s->src_why, err, sizeof(s->src_why) - 1);
	snprintf(s->src_why, sizeof(s->src_why), "%.*s",
		 (int)sizeof(s->src_why) - 1, rc ? err : "");
	s->fleet = *f; /* none, when the answer or its fleet was not one */
	pthread_mutex_unlock(&s->lock);
	free(f);
	if (news)
		SFS_LOG(SFS_WARN, "source", "%s: %s", s->addr, err);
}

/* The re-seeder to retire for a seed when the table is full: one that
 * does not answer, else the last found (r->lock held).  NULL: none. */
static struct rsrc *evictable(struct sfs_replica *r)
{
	struct rsrc *pick = NULL;
	for (size_t i = r->cfg.nseeds; i < r->nsrcs; i++) {
		struct rsrc *s = r->srcs[i];
		if (!s || !s->reseeder || s->retired)
			continue;
		int quiet = atomic_load(&s->quiet);
		if (!pick || quiet)
			pick = s;
		if (quiet)
			break;
	}
	return pick;
}

/* Refused at a cap (r->lock held): counted, and 1 when it is to be said
 * (once a minute). */
static int cap_refused(struct sfs_replica *r, int peer, const char *addr)
{
	uint64_t now = sfs_now_ms();
	if (peer)
		r->peers_refused++;
	else
		r->srcs_refused++;
	snprintf(r->src_cap_why, sizeof(r->src_cap_why), "%.100s not used: %s",
		 addr,
		 peer ? "RSRC_PEERS_MAX re-seeders (RSRC_FLEET_MEMBERS in "
			"the fleet's ring) are its peers already"
		      : "RSRC_MAX sources are live");
	if (r->src_cap_said_ms && now < r->src_cap_said_ms + 60000)
		return 0;
	r->src_cap_said_ms = now;
	return 1;
}

/* A re-seeder to retire for a member of this one's place in @ring when
 * its peers are full (r->lock held): no member of it, no --seed, one
 * that does not answer first; referenced.  NULL: none. */
static struct rsrc *nonmember(struct sfs_replica *r,
			      const struct rsrc_fleet *ring)
{
	struct rsrc *pick = NULL;
	for (size_t i = r->cfg.nseeds; i < r->nsrcs; i++) {
		struct rsrc *s = r->srcs[i];
		int member = 0;
		if (!s || !s->reseeder || s->self || s->retired)
			continue;
		for (size_t k = 0; k < ring->nmembers && !member; k++)
			member = !strcmp(ring->members[k], s->addr);
		if (member)
			continue;
		int quiet = atomic_load(&s->quiet);
		if (!pick || quiet)
			pick = s;
		if (quiet)
			break;
	}
	if (pick)
		pick->refs++;
	return pick;
}

/* rsrc_add; @ring: when not NULL, @addr is a member of this re-seeder's
 * place in it (a seed named it): then up to RSRC_FLEET_MEMBERS
 * re-seeders are its peers, and a peer that is no member leaves for it
 * when they are full. */
static int add_source(struct sfs_replica *r, const char *addr, int reseeder,
		      int start, const struct rsrc_fleet *ring,
		      struct rsrc **out)
{
	struct rsrc *s = NULL, *evict = NULL;
	size_t live = 0, peers = 0, slot = SIZE_MAX;
	size_t peers_max = ring ? RSRC_FLEET_MEMBERS : RSRC_PEERS_MAX;
	int say = 0, rc = 0;

	if (out)
		*out = NULL;
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->nsrcs; i++) {
		struct rsrc *o = r->srcs[i];
		if (!o) {
			slot = SFS_MIN(slot, i);
			continue;
		}
		if (!strcmp(o->addr, addr)) {
			if (out) {
				o->refs++;
				*out = o;
			}
			pthread_mutex_unlock(&r->lock);
			return 0;
		}
		live++;
		peers += o->reseeder && !o->self;
	}
	if (slot == SIZE_MAX && r->nsrcs < RSRC_MAX)
		slot = r->nsrcs;
	uint64_t now = sfs_now_ms();
	int buried = 0;
	for (size_t i = 0; reseeder && i < RSRC_MAX && !buried; i++)
		buried = r->gone[i].until_ms > now &&
			 !strcmp(r->gone[i].addr, addr);
	if (r->stop) {
		rc = -ESHUTDOWN;
	} else if (buried) {
		rc = -EHOSTDOWN; /* silent a moment ago: not again yet */
	} else if (reseeder && ring && peers >= peers_max &&
		   (evict = nonmember(r, ring))) {
		/* A member before a peer that is none: that one leaves. */
		slot = slot == SIZE_MAX ? evict->idx : slot;
	} else if (reseeder && peers >= peers_max) {
		rc = -ENOSPC;
		say = cap_refused(r, 1, addr);
	} else if (slot == SIZE_MAX && !reseeder && (evict = evictable(r))) {
		/* A seed before an extra peer: that one leaves, and its
		 * slot is this one's. */
		evict->refs++;
		slot = evict->idx;
	} else if (slot == SIZE_MAX) {
		rc = -ENOSPC;
		say = cap_refused(r, 0, addr);
	}
	pthread_mutex_unlock(&r->lock);
	if (say)
		SFS_LOG(SFS_WARN, "source",
			"%s %s not used: %s (%zu live, %zu of them re-seeders; "
			"said once a minute, counted in status)",
			reseeder ? "re-seeder" : "seed", addr,
			rc == -ENOSPC && reseeder && peers >= peers_max
				? "this replica works with at most "
				  "RSRC_PEERS_MAX re-seeders at a time "
				  "(RSRC_FLEET_MEMBERS in the fleet's ring)"
				: "the table of sources is full",
			live, peers);
	if (rc)
		return rc;
	if (evict) {
		rsrc_retire(evict,
			    reseeder ? "a member of this re-seeder's place in "
				       "the fleet's ring comes"
				     : "the table is full and a seed comes");
		rsrc_put(evict);
	}
	if ((rc = rsrc_new(r, addr, reseeder, &s)))
		return rc;
	pthread_mutex_lock(&r->lock);
	if (r->stop || slot >= RSRC_MAX || r->srcs[slot]) {
		/* Taken meanwhile (another add): try again later. */
		pthread_mutex_unlock(&r->lock);
		rsrc_free(s);
		return r->stop ? -ESHUTDOWN : -EAGAIN;
	}
	s->idx = slot;
	/* The table's reference, and ours until it is started (it may be
	 * retired and buried meanwhile), then the caller's. */
	s->refs = 2;
	r->srcs[slot] = s;
	if (slot >= r->nsrcs)
		r->nsrcs = slot + 1;
	pthread_mutex_unlock(&r->lock);
	SFS_LOG(SFS_INFO, "source", "%s %s is a source from now on",
		reseeder ? "re-seeder" : "seed", addr);
	rc = start ? rsrc_start(s) : 0;
	if (rc) /* without a poller it would never leave */
		rsrc_retire(s, "its poller did not start");
	if (out)
		*out = s;
	else
		rsrc_put(s);
	return rc;
}

int rsrc_add(struct sfs_replica *r, const char *addr, int reseeder, int start,
	     struct rsrc **out)
{
	return add_source(r, addr, reseeder, start, NULL, out);
}

void rsrc_retire(struct rsrc *s, const char *why)
{
	struct sfs_replica *r = s->r;
	pthread_mutex_lock(&r->lock);
	if (s->retired || s->idx < r->cfg.nseeds || r->stop) {
		pthread_mutex_unlock(&r->lock);
		return;
	}
	s->retired = 1;
	/* Told to stop before the sweeper can see it (r->lock, then
	 * s->lock: the order everywhere). */
	pthread_mutex_lock(&s->lock);
	s->dropped = 1;
	s->stop = 1;
	snprintf(s->retire_why, sizeof(s->retire_why), "%s", why);
	pthread_cond_broadcast(&s->cond);
	int found = s->found;
	pthread_mutex_unlock(&s->lock);
	if (found && atomic_load(&s->quiet) &&
	    strlen(s->addr) < sizeof(r->gone[0].addr)) {
		size_t g = r->gone_next++ % RSRC_MAX;
		snprintf(r->gone[g].addr, sizeof(r->gone[g].addr), "%s",
			 s->addr);
		r->gone[g].until_ms = sfs_now_ms() + 3 * RSRC_GONE_MS;
	}
	r->srcs[s->idx] = NULL;
	while (r->nsrcs > r->cfg.nseeds && !r->srcs[r->nsrcs - 1])
		r->nsrcs--;
	s->next = r->retired;
	r->retired = s;
	r->srcs_freed++;
	/* Models it brought in count against nobody now. */
	for (size_t i = 0; i < r->nmodels; i++)
		if (r->models[i]->origin == s)
			r->models[i]->origin = NULL;
	pthread_cond_broadcast(&r->cond); /* the sweeper buries it */
	pthread_mutex_unlock(&r->lock);
	SFS_LOG(SFS_INFO, "source", "%s %s is no longer a source: %s",
		s->reseeder ? "re-seeder" : "seed", s->addr, why);
}

size_t rsrc_bury(struct sfs_replica *r)
{
	size_t buried = 0;
	pthread_mutex_lock(&r->lock);
	struct rsrc *list = r->retired;
	r->retired = NULL;
	pthread_mutex_unlock(&r->lock);
	while (list) {
		struct rsrc *s = list;
		list = s->next;
		/* Its poller (told to stop before it was listed here, so
		 * none starts now) ends after the question it may be
		 * asking: not waited for here. */
		pthread_mutex_lock(&s->lock);
		int started = s->thread_started;
		pthread_mutex_unlock(&s->lock);
		int joined = started && !pthread_tryjoin_np(s->thread, NULL);
		pthread_mutex_lock(&s->lock);
		if (joined)
			s->thread_started = 0;
		int ready = (!started || joined) && !s->checking;
		pthread_mutex_unlock(&s->lock);
		if (!ready) {
			pthread_mutex_lock(&r->lock);
			s->next = r->retired;
			r->retired = s;
			pthread_mutex_unlock(&r->lock);
			continue;
		}
		/* No question runs and none starts (dropped): what it
		 * served goes, then the table's reference. */
		forget_run(s, 0);
		rsrc_put(s);
		buried++;
	}
	return buried;
}

void rsrc_caps(struct sfs_replica *r, struct rsrc_caps *c)
{
	*c = (struct rsrc_caps){0};
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->nsrcs; i++) {
		const struct rsrc *o = r->srcs[i];
		c->live += o != NULL;
		c->peers += o && o->reseeder && !o->self;
	}
	c->freed = r->srcs_freed;
	c->refused = r->srcs_refused;
	c->peers_refused = r->peers_refused;
	pthread_mutex_unlock(&r->lock);
}

void rsrc_cap_status(struct sfs_replica *r, char *buf, size_t len)
{
	struct rsrc_caps c;
	rsrc_caps(r, &c);
	int n = snprintf(
		buf, len,
		"sources_live: %zu of %d (%zu re-seeders: at most %d, %d in "
		"the fleet's ring); "
		"freed %" PRIu64 ", refused %" PRIu64
		" (re-seeders past the peers' cap %" PRIu64 ")\n",
		c.live, RSRC_MAX, c.peers, RSRC_PEERS_MAX, RSRC_FLEET_MEMBERS,
		c.freed, c.refused + c.peers_refused, c.peers_refused);
	pthread_mutex_lock(&r->lock);
	if (*r->src_cap_why && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "sources_refused_last: %s\n",
			 r->src_cap_why);
	pthread_mutex_unlock(&r->lock);
}

/* Ask @s what it publishes now and act on it. */
static void check(struct rsrc *s, unsigned int ask_ms)
{
	struct sfs_replica *r = s->r;
	char err[SFS_XPORT_ERR_MAX];
	struct rsrc_answer a = {0};
	uint64_t t0 = sfs_now_ms();

	int rc = rsrc_list(s, SFS_MIN(r->cfg.timeout_ms, ask_ms), &a, err,
			   sizeof(err));
	pthread_mutex_lock(&s->lock);
	uint32_t cpeer = s->cpeer;
	if (rc) {
		if (!s->unreachable)
			SFS_LOG(SFS_WARN, "source",
				"cannot ask %s what it publishes (%s): opens go "
				"on with what the mount has",
				s->addr, err);
		if (!s->unreachable || !s->silent_since)
			s->silent_since = t0;
		snprintf(s->ctl_err, sizeof(s->ctl_err), "%s", err);
		s->unreachable = 1;
		atomic_store(&s->quiet, 1);
		s->retry_ms = sfs_now_ms() + r->cfg.timeout_ms;
		uint64_t since = s->silent_since;
		pthread_mutex_unlock(&s->lock);
		/* A read that follows and sees no progress counts from
		 * here: the open and the read fail within one timeout.  A
		 * port that answered and refused us (a 401 after the token
		 * was rotated, a certificate we do not trust) is not
		 * silent: its memory still serves what the mount has. */
		if (cpeer != SFS_CACHE_NONE && rc != -EACCES)
			sfs_cache_note_silence(r->cache, cpeer, since);
		return;
	}
	int was = s->unreachable;
	s->unreachable = 0;
	atomic_store(&s->quiet, 0);
	s->silent_since = 0;
	uint64_t old = s->instance;
	uint64_t own = atomic_load(&r->reseed_instance);
	if (s->reseeder && own && a.instance == own) {
		/* This replica itself, as a seed listed it: not a source. */
		s->self = 1;
		pthread_mutex_unlock(&s->lock);
		free(a.models);
		return;
	}
	pthread_mutex_unlock(&s->lock);
	if (was) {
		SFS_LOG(SFS_INFO, "source", "%s answers again", s->addr);
		if (cpeer != SFS_CACHE_NONE)
			sfs_cache_note_silence(r->cache, cpeer, 0);
	}
	if (old && old != a.instance) {
		SFS_LOG(SFS_INFO, "source",
			"%s restarted (instance %016" PRIx64
			"): its last run's "
			"bytes are no longer read from it",
			s->addr, a.instance);
		forget_run(s, a.instance);
	} else if (old && cpeer != SFS_CACHE_NONE) {
		/* The same run answered: its peer, if it was taken out and
		 * connected again since, is up (status, metrics) though no
		 * pull from it completed (nothing may need one). */
		sfs_cache_peer_answers(r->cache, cpeer);
	}
	for (size_t i = 0; i < a.n; i++) {
		const struct rsrc_ans_model *am = &a.models[i];
		if (r->cfg.only && strcmp(r->cfg.only, am->name))
			continue;
		pthread_mutex_lock(&s->lock);
		struct rsrc_known *k = known(s, am->name);
		int fresh = 1;
		if (k) {
			k->generation = am->generation;
			k->content = am->content;
			k->nserved = am->nserved;
			memcpy(k->served, am->served, sizeof(k->served));
			memcpy(k->expires_in, am->expires_in,
			       sizeof(k->expires_in));
			k->listed = 1;
			/* A new generation, or its keys (a token rotation):
			 * the manifest again. */
			fresh = k->offered != am->generation ||
				k->offered_content != am->content ||
				k->offered_epoch < am->key_epoch ||
				s->instance != a.instance ||
				(sfs_control_cred_trust(r->cfg.cred) &&
				 k->offered_signed < am->signed_at);
			/* Failed a moment ago: not at every open. */
			if (fresh && k->failed_gen == am->generation &&
			    sfs_now_ms() < k->retry_ms)
				fresh = 0;
		}
		pthread_mutex_unlock(&s->lock);
		struct sfs_model *mo = model_get(r, am->name);
		if (mo)
			model_prune(mo, s, a.instance, am->served,
				    am->expires_in, am->nserved);
		model_put(mo);
		if (k && fresh) {
			offer(s, am, a.instance);
			/* A new source of a model: its lanes change. */
			pthread_mutex_lock(&r->lock);
			pthread_cond_broadcast(&r->cond);
			pthread_mutex_unlock(&r->lock);
		}
		/* A re-seeder (found, or given): its holdings. */
		refresh_holdings(s, am);
	}
	if (!s->reseeder)
		discover(s);
	/* Models it no longer lists: it serves none of their bytes, and
	 * one that no source lists any more (nor the registry) leaves the
	 * mount. */
	pthread_mutex_lock(&s->lock);
	for (size_t k = 0; k < s->nknown; k++) {
		struct rsrc_known *kn = &s->known[k];
		int listed = 0;
		for (size_t i = 0; i < a.n && !listed; i++)
			listed = !strcmp(a.models[i].name, kn->name);
		if (listed || !kn->listed)
			continue;
		kn->listed = 0;
		kn->offered = 0;
		char name[sizeof(kn->name)];
		snprintf(name, sizeof(name), "%s", kn->name);
		pthread_mutex_unlock(&s->lock);
		struct sfs_model *mo = model_get(r, name);
		if (mo)
			model_prune(mo, s, a.instance, NULL, NULL, 0);
		if (mo && !rsrc_lists(r, name) && !fleet_lists(r, name))
			model_retire(mo, "no source lists it any more");
		model_put(mo);
		pthread_mutex_lock(&s->lock);
	}
	forget_unlisted(s);
	pthread_mutex_unlock(&s->lock);
	free(a.models);
}

/* Run one check (s->lock held, s->checking just set; dropped
 * meanwhile), and tell those who wait for it. */
static void run_check(struct rsrc *s, unsigned int ask_ms)
{
	uint64_t mine = ++s->check_starts;
	pthread_mutex_unlock(&s->lock);
	check(s, ask_ms);
	pthread_mutex_lock(&s->lock);
	/* The open's manifest serves the first check (offer) or none: not
	 * kept, keys and all, while the source is silent or past a cap. */
	struct sfs_manifest *primed = s->primed;
	s->primed = NULL;
	s->checking = 0;
	s->checks++;
	s->check_ended = mine;
	s->checked_ms = sfs_now_ms();
	pthread_cond_broadcast(&s->cond);
	if (primed) { /* once in a run at most */
		pthread_mutex_unlock(&s->lock);
		sfs_manifest_free(primed);
		pthread_mutex_lock(&s->lock);
	}
}

void rsrc_revalidate(struct rsrc *s, unsigned int ask_ms, uint64_t fresh_ms)
{
	pthread_mutex_lock(&s->lock);
	if (fresh_ms && s->checked_ms &&
	    sfs_now_ms() < s->checked_ms + fresh_ms) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	if (s->unreachable) {
		/* It did not answer last time: do not make this open wait
		 * for it again (with a read after it, that would be two
		 * timeouts).  It is asked again behind, a timeout after the
		 * last question; the open goes on with what is current,
		 * and does not wait for that question either (it waited
		 * up to the timeout, every timeout). */
		if (sfs_now_ms() >= s->retry_ms) {
			s->bg_wanted = 1;
			pthread_cond_broadcast(&s->cond);
		}
		pthread_mutex_unlock(&s->lock);
		return;
	}
	/* Close-to-open: the answer must come from a question asked after
	 * this open came.  One running now (another open's, the poller's)
	 * may have been asked before the source published what this open
	 * must see: it is waited for, and then its answer does only if it
	 * began after we came; else we ask (opens that came meanwhile
	 * share that one).  At most ask_ms in all. */
	uint64_t want = s->check_starts + 1;
	struct timespec ts = sfs_abstime(ask_ms);
	while (s->checking && s->check_ended < want &&
	       !pthread_cond_timedwait(&s->cond, &s->lock, &ts))
		;
	if (s->check_ended >= want || s->checking || s->dropped ||
	    s->unreachable) {
		pthread_mutex_unlock(&s->lock); /* answered, or out of time */
		return;
	}
	s->checking = 1;
	run_check(s, ask_ms);
	pthread_mutex_unlock(&s->lock);
}

/* Behind the opens: every source is asked every RSRC_POLL_MS (a
 * re-seeder every RSRC_RESEEDER_POLL_MS: what it holds grows fast; a source
 * that does not answer, a timeout apart), so holders stay true and a
 * source that comes back is used again. */
/* Has the seed that last listed found re-seeder @s answered its
 * /v1/sources without it for RSRC_GONE_MS, or left?  (An answer that
 * did not come, or another seed's, says nothing of @s.)  Called with
 * s->lock held, let go meanwhile (r->lock comes first). */
static int unlisted(struct rsrc *s)
{
	struct sfs_replica *r = s->r;
	char by[sizeof(s->listed_by)];
	uint64_t listed = s->listed_ms;
	memcpy(by, s->listed_by, sizeof(by));
	pthread_mutex_unlock(&s->lock);
	uint64_t answered = sfs_now_ms(); /* its lister left */
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->nsrcs; i++)
		if (r->srcs[i] && !strcmp(r->srcs[i]->addr, by)) {
			answered = atomic_load(&r->srcs[i]->sources_ms);
			break;
		}
	pthread_mutex_unlock(&r->lock);
	pthread_mutex_lock(&s->lock);
	return s->listed_ms == listed && answered >= listed + RSRC_GONE_MS;
}

static void *poller(void *arg)
{
	struct rsrc *s = arg;

	sfs_control_keep(); /* one connection to its source, kept */
	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		/* Opens do not wait for a source that did not answer (see
		 * rsrc_revalidate); this thread asks it every second all
		 * the same, so it is used again soon after it answers. */
		uint64_t now = sfs_now_ms();
		uint64_t next =
			s->checked_ms +
			(s->reseeder ? RSRC_RESEEDER_POLL_MS : RSRC_POLL_MS);
		if (s->self)
			break; /* itself: nothing to ask */
		if (s->dropped) {
			/* Gone from the registry (a --seed source, or the
			 * mount stops): not asked again. */
			s->bg_wanted = 0;
			struct timespec ts = sfs_abstime(1000);
			pthread_cond_timedwait(&s->cond, &s->lock, &ts);
			continue;
		}
		/* Followed by the registry's watch: asked behind only as a
		 * check (a re-seeder's holdings still grow fast). */
		if (!s->reseeder && s->registered && fleet_healthy(s->r))
			next = s->checked_ms + RSRC_REG_POLL_MS;
		/* A re-seeder warming a whole model learns soon who warms
		 * it with it (the seed lists them): until it does, it pulls
		 * their shares from the seed too, and uploads them alone. */
		if (!s->reseeder && s->r->reseed &&
		    atomic_load(&s->r->warming) > 0)
			next = SFS_MIN(next,
				       s->checked_ms + RSRC_RESEEDER_POLL_MS);
		/* A re-seeder that went away is asked less often, and one
		 * this replica found is freed once it stayed away (its
		 * restart comes on another port, or not at all), or once
		 * no seed lists it any more: the slot is another's. */
		if (s->reseeder && s->unreachable)
			next = s->checked_ms + 5 * RSRC_POLL_MS;
		const char *leave = NULL;
		if (s->found && s->unreachable && s->silent_since &&
		    now >= s->silent_since + RSRC_GONE_MS)
			leave = "it has not answered for RSRC_GONE_MS";
		else if (s->found && s->listed_ms &&
			 now >= s->listed_ms + RSRC_GONE_MS && unlisted(s))
			leave = "the seed that listed it has left it out for "
				"RSRC_GONE_MS";
		if (leave) {
			pthread_mutex_unlock(&s->lock);
			rsrc_retire(s, leave);
			pthread_mutex_lock(&s->lock);
			/* stop is set, unless the mount stops (then it is
			 * set soon): not asked again meanwhile. */
			if (!s->stop) {
				struct timespec ts = sfs_abstime(1000);
				pthread_cond_timedwait(&s->cond, &s->lock, &ts);
			}
			continue;
		}
		if ((s->bg_wanted || now >= next) && !s->checking) {
			s->bg_wanted = 0;
			s->checking = 1;
			run_check(s, RSRC_ASK_MS);
			continue;
		}
		struct timespec ts = sfs_abstime(
			next > now ? SFS_MIN(next - now, 1000) : 100);
		pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	}
	pthread_mutex_unlock(&s->lock);
	sfs_control_keep_end();
	return NULL;
}

int rsrc_start(struct rsrc *s)
{
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	/* Retired before its poller started, or started: none starts. */
	if (!s->stop && !s->thread_started &&
	    !(rc = -pthread_create(&s->thread, NULL, poller, s)))
		s->thread_started = 1;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void rsrc_stop(struct rsrc *s)
{
	pthread_mutex_lock(&s->lock);
	int started = s->thread_started;
	s->stop = 1;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (!started)
		return;
	pthread_join(s->thread, NULL);
	pthread_mutex_lock(&s->lock);
	s->thread_started = 0;
	pthread_mutex_unlock(&s->lock);
}

int rsrc_serves(struct rsrc *s, const char *name)
{
	pthread_mutex_lock(&s->lock);
	struct rsrc_known *k = !s->unreachable ? find_known(s, name) : NULL;
	int yes = k && k->listed;
	pthread_mutex_unlock(&s->lock);
	return yes;
}

int rsrc_publishes(struct rsrc *s, const char *name, uint64_t content)
{
	pthread_mutex_lock(&s->lock);
	struct rsrc_known *k = s->reseeder && !s->self && !s->unreachable
				       ? find_known(s, name)
				       : NULL;
	/* Not one this replica refused (--no-verify, --trust-key, another
	 * identity): a lane nobody here reads from would hold its chunks
	 * back for nothing. */
	int yes = k && k->listed && k->content == content &&
		  !(k->why[0] && !k->used);
	pthread_mutex_unlock(&s->lock);
	return yes;
}

int rsrc_self_addr(struct sfs_replica *r, char *buf, size_t len)
{
	int rc = -ENOENT;
	struct rsrc **all;
	size_t n = rsrc_all(r, &all);
	for (size_t i = 0; i < n && rc; i++) {
		struct rsrc *s = all[i];
		pthread_mutex_lock(&s->lock);
		if (s->self) {
			snprintf(buf, len, "%s", s->addr);
			rc = 0;
		}
		pthread_mutex_unlock(&s->lock);
	}
	rsrc_put_all(all, n);
	return rc;
}

/* rsrc_reconnect's work, for @s (referenced). */
static int reconnect(struct rsrc *s, uint32_t cpeer,
		     const struct sfs_endpoint *epp, uint64_t *new_id,
		     char *err, size_t errlen)
{
	struct sfs_replica *r = s->r;
	struct sfs_endpoint ep = *epp;
	/* A source whose control port does not answer is down, not
	 * wedged: no new connection to nothing (its chunks go to the
	 * others meanwhile, and it is tried again after its hold). */
	char *body;
	size_t len;
	int rc = sfs_control_get(s->r->cfg.cred, s->addr, "/v1/health",
				 SFS_MIN(r->cfg.timeout_ms, 2000u), 4096, &body,
				 &len, err, errlen);
	if (rc) {
		SFS_LOG(SFS_WARN, "source", "reconnecting to %s: %s", s->addr,
			err);
		return rc;
	}
	free(body);
	pthread_mutex_lock(&r->xlock);
	rc = sfs_control_reconnect(s->r->cfg.cred, s->addr, r->x, &ep,
				   r->cfg.timeout_ms, new_id, err, errlen);
	pthread_mutex_unlock(&r->xlock);
	if (rc) {
		SFS_LOG(SFS_WARN, "source", "reconnecting to %s: %s", s->addr,
			err);
		return rc;
	}
	pthread_mutex_lock(&s->lock);
	if (s->cpeer == cpeer)
		s->xpeer = *new_id;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int rsrc_reconnect(void *arg, uint32_t cpeer, uint64_t id, uint64_t *new_id)
{
	struct sfs_replica *r = arg;
	struct rsrc *s = NULL;
	struct sfs_endpoint ep;
	char err[SFS_XPORT_ERR_MAX];

	*new_id = id;
	struct rsrc **all;
	size_t n = rsrc_all(r, &all);
	for (size_t i = 0; i < n && !s; i++) {
		pthread_mutex_lock(&all[i]->lock);
		if (all[i]->cpeer == cpeer && all[i]->has_ep) {
			s = all[i];
			ep = s->ep;
		}
		pthread_mutex_unlock(&all[i]->lock);
	}
	/* A peer of a source's run that is gone is not made anew. */
	if (!s) {
		rsrc_put_all(all, n);
		return -ESTALE;
	}
	int rc = reconnect(s, cpeer, &ep, new_id, err, sizeof(err));
	rsrc_put_all(all, n);
	return rc;
}

struct rsrc *rsrc_find(struct sfs_replica *r, const char *addr)
{
	struct rsrc *s = NULL;
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->nsrcs && !s; i++)
		if (r->srcs[i] && !strcmp(r->srcs[i]->addr, addr))
			s = r->srcs[i];
	if (s)
		s->refs++;
	pthread_mutex_unlock(&r->lock);
	return s;
}

void rsrc_drop(struct rsrc *s)
{
	pthread_mutex_lock(&s->lock);
	int was = s->dropped;
	s->dropped = 1;
	for (size_t k = 0; k < s->nknown; k++) {
		s->known[k].listed = 0;
		s->known[k].reg_known = 0;
	}
	pthread_mutex_unlock(&s->lock);
	if (was)
		return;
	/* No longer read from now; freed once buried (a record that
	 * comes back makes a new source).  Its models' lanes change. */
	forget_run(s, 0);
	rsrc_retire(s, "it is gone from the registry");
}

void rsrc_registered(struct rsrc *s, const char *name, uint64_t generation,
		     uint64_t content)
{
	pthread_mutex_lock(&s->lock);
	if (s->dropped) { /* gone: a record of it makes a new source */
		pthread_mutex_unlock(&s->lock);
		return;
	}
	s->registered = 1;
	struct rsrc_known *k = known(s, name);
	int news = !k || !k->listed || k->generation != generation ||
		   k->content != content;
	if (k) {
		k->reg_known = 1;
		k->reg_generation = generation;
		k->reg_content = content;
	}
	if (news) {
		s->bg_wanted = 1;
		s->retry_ms = 0;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
}

int rsrc_reg_fresh(struct rsrc *s, const char *name)
{
	pthread_mutex_lock(&s->lock);
	struct rsrc_known *k = NULL;
	for (size_t i = 0; i < s->nknown && !k; i++)
		if (!strcmp(s->known[i].name, name))
			k = &s->known[i];
	int fresh = s->registered && !s->dropped && !s->unreachable && k &&
		    k->reg_known && k->listed &&
		    k->generation == k->reg_generation &&
		    k->content == k->reg_content && k->offered == k->generation;
	pthread_mutex_unlock(&s->lock);
	return fresh;
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

int sfs_replica_wait_listed(struct sfs_replica *r, unsigned int ms)
{
	char addr[300];
	uint64_t until = sfs_now_ms() + ms;
	if (!atomic_load(&r->reseed_instance))
		return -ENOENT;
	while (rsrc_self_addr(r, addr, sizeof(addr))) {
		if (sfs_now_ms() >= until)
			return -ETIMEDOUT;
		usleep(20000);
	}
	return 0;
}
