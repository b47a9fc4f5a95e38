/* SPDX-License-Identifier: MIT */
/*
 * fleet.c - the registry (--registry) as a source of sources.  Every
 * record under PREFIX/models/ names a model and a source serving it
 * (docs/registry.md); the mount reads them all at start, then follows
 * them by watch: a new record is a source within milliseconds, a record
 * that goes (its lease expired: the source died) takes the source out,
 * and a model no record names leaves the mount.  A new generation in a
 * record makes the mount ask that source at once; while the watch runs,
 * an open asks no seed whose record says nothing new.
 *
 * etcd down: reading goes on from the sources known; the watch is taken
 * again from the last revision seen when etcd answers, and the whole
 * range is read again when etcd compacted past it.
 *
 * Records are untrusted: bounded (control/registry.c), every field
 * checked, and one that fails is ignored with a line naming the key and
 * the field.
 */
#include "replica/replica_impl.h"

#include "common/log.h"
#include "common/util.h"
#include "metadata/jsonlim.h"
#include "control/registry.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FLEET_RECORDS_MAX 4096
#define FLEET_RETRY_MS 1000

struct sfs_fleet {
	struct sfs_replica *r;
	struct sfs_reg *g;
	char prefix[300];
	pthread_t thread;
	int started;
	pthread_mutex_t lock; /* after every source's and model's lock */
	/* All protected by lock: */
	int stop;
	int healthy;	  /* the watch runs */
	int64_t rev;	  /* the next revision to watch from */
	uint64_t events;  /* applied */
	uint64_t refused; /* records ignored */
	uint64_t ranges;  /* whole reads */
	uint64_t down_ms; /* since (monotonic); 0: up */
	char last_err[400];
	size_t n, cap;
	struct frec *recs;
	/* A range in progress collects here first (the watch thread). */
	size_t nnew, capnew;
	struct frec *fresh;
};

static const char *valid_model(const char *s, size_t n)
{
	const char *why;
	if (!n || n > SFS_MF_NAME_MAX || memchr(s, '/', n) ||
	    sfs_path_check(s, &why))
		return NULL;
	return s;
}

int fleet_parse_key(const char *prefix, const char *key, struct frec *f,
		    const char **why)
{
	size_t pl = strlen(prefix);
	const char *p = key + pl, *a, *b;
	char name[SFS_MF_NAME_MAX + 1], h[256], port[16];

	if (strncmp(key, prefix, pl)) {
		*why = "not under the prefix";
		return -1;
	}
	if (!(a = strchr(p, '/')) || !(b = strchr(a + 1, '/'))) {
		*why = "not NAME/KIND/CONTROL after the prefix";
		return -1;
	}
	size_t nl = (size_t)(a - p);
	if (nl > SFS_MF_NAME_MAX) {
		*why = "model name too long";
		return -1;
	}
	memcpy(name, p, nl);
	name[nl] = '\0';
	if (!valid_model(name, nl)) {
		*why = "not a valid model name";
		return -1;
	}
	size_t kl = (size_t)(b - a - 1);
	if (kl == 4 && !strncmp(a + 1, "seed", 4)) {
		f->reseeder = 0;
	} else if (kl == 8 && !strncmp(a + 1, "reseeder", 8)) {
		f->reseeder = 1;
	} else {
		*why = "kind is not seed or reseeder";
		return -1;
	}
	if (strlen(b + 1) >= sizeof(f->control) ||
	    sfs_parse_hostport(b + 1, h, sizeof(h), port, sizeof(port)) ||
	    !*h || !*port) {
		*why = "control is not HOST:PORT";
		return -1;
	}
	snprintf(f->name, sizeof(f->name), "%s", name);
	snprintf(f->control, sizeof(f->control), "%s", b + 1);
	return 0;
}

static int hex64(json_t *v, uint64_t *out)
{
	if (!json_is_string(v) || json_string_length(v) > 18 ||
	    strncmp(json_string_value(v), "0x", 2))
		return -1;
	return sfs_parse_u64(json_string_value(v), out) ? -1 : 0;
}

int fleet_parse_value(const struct sfs_reg_event *e, struct frec *f,
		      const char **field, char *buf, size_t buflen)
{
	json_t *o, *v, *ps;
	int rc = -1;

	*field = "not a JSON object";
	if (sfs_json_load(SFS_JSON_RECORD, e->value, e->vlen,
			  JSON_REJECT_DUPLICATES, &o, buf, buflen) == -E2BIG)
		*field = buf;
	if (!json_is_object(o))
		goto out;
	*field = "version: not 1";
	if (json_integer_value(json_object_get(o, "version")) != 1)
		goto out;
	*field = "model: not the key's";
	v = json_object_get(o, "model");
	if (!json_is_string(v) || strcmp(json_string_value(v), f->name))
		goto out;
	*field = "kind: not the key's";
	v = json_object_get(o, "kind");
	if (!json_is_string(v) ||
	    strcmp(json_string_value(v), f->reseeder ? "reseeder" : "seed"))
		goto out;
	*field = "control: not the key's";
	v = json_object_get(o, "control");
	if (!json_is_string(v) || strcmp(json_string_value(v), f->control))
		goto out;
	*field = "generation: not a whole number";
	v = json_object_get(o, "generation");
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		goto out;
	f->generation = (uint64_t)json_integer_value(v);
	*field = "content: not a 64-bit hex string";
	if (hex64(json_object_get(o, "content"), &f->content))
		goto out;
	*field = "protocols: not an array of at most 8 names";
	ps = json_object_get(o, "protocols");
	if (!json_is_array(ps) || json_array_size(ps) > 8)
		goto out;
	size_t i;
	json_array_foreach (ps, i, v)
		if (!json_is_string(v) || json_string_length(v) > 31)
			goto out;
	*field = "identity: not an object";
	v = json_object_get(o, "identity");
	if (v && !json_is_object(v))
		goto out;
	rc = 0;
out:
	json_decref(o);
	return rc;
}

static struct frec *find(struct frec *a, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(a[i].key, key))
			return &a[i];
	return NULL;
}

/* Put @f (its key taken) into the array. */
static int keep(struct frec **a, size_t *n, size_t *cap, struct frec *f)
{
	struct frec *o = find(*a, *n, f->key);
	if (o) {
		free(o->key);
		*o = *f;
		return 0;
	}
	if (*n >= FLEET_RECORDS_MAX ||
	    sfs_grow((void **)a, cap, *n + 1, sizeof(**a)))
		return -ENOSPC;
	(*a)[(*n)++] = *f;
	return 0;
}

/* The source of @f [referenced]: found, or made (started when
 * @start); NULL when it cannot be (the caps: rsrc_add says why). */
static struct rsrc *source_of(struct sfs_replica *r, const struct frec *f,
			      int start)
{
	struct rsrc *s = NULL;
	int rc = rsrc_add(r, f->control, f->reseeder, start, &s);
	if (rc && rc != -ENOSPC && rc != -ESHUTDOWN)
		SFS_LOG(SFS_WARN, "registry",
			"%s: cannot use it as a source: %s", f->control,
			strerror(-rc));
	return s;
}

/* @f is in the registry (put or seen by a range): its source knows. */
static void apply_put(struct sfs_fleet *fl, const struct frec *f, int start)
{
	struct rsrc *s = source_of(fl->r, f, start);
	if (s)
		rsrc_registered(s, f->name, f->generation, f->content);
	rsrc_put(s);
}

/* @f left the registry: its source goes when it has no record left, and
 * its model when no record names it. */
static void apply_gone(struct sfs_fleet *fl, const struct frec *f)
{
	struct sfs_replica *r = fl->r;
	int source_left = 0, model_left = 0;
	pthread_mutex_lock(&fl->lock);
	for (size_t i = 0; i < fl->n; i++) {
		source_left |= !strcmp(fl->recs[i].control, f->control);
		model_left |= !strcmp(fl->recs[i].name, f->name);
	}
	pthread_mutex_unlock(&fl->lock);
	struct rsrc *s = rsrc_find(r, f->control);
	if (s && !source_left && s->idx >= r->cfg.nseeds)
		rsrc_drop(s);
	rsrc_put(s);
	if (model_left)
		return;
	/* A seed given with --seed may still publish it (their slots
	 * stay theirs). */
	for (size_t i = 0; i < r->cfg.nseeds; i++) {
		struct rsrc *o = r->srcs[i];
		pthread_mutex_lock(&o->lock);
		for (size_t k = 0; k < o->nknown && !model_left; k++)
			model_left = o->known[k].listed &&
				     !strcmp(o->known[k].name, f->name);
		pthread_mutex_unlock(&o->lock);
	}
	struct sfs_model *mo = model_left ? NULL : model_get(r, f->name);
	if (mo)
		model_retire(mo, "no source is registered for it any more");
	model_put(mo);
}

/* A record refused: one line per key and revision. */
static void refuse(struct sfs_fleet *fl, const struct sfs_reg_event *e,
		   const char *why)
{
	pthread_mutex_lock(&fl->lock);
	fl->refused++;
	pthread_mutex_unlock(&fl->lock);
	SFS_LOG(SFS_WARN, "registry",
		"%.300s (revision %" PRId64 "): ignored: %s", e->key,
		e->mod_revision, why);
}

/* A watch event. */
static int on_event(void *arg, const struct sfs_reg_event *e)
{
	struct sfs_fleet *fl = arg;
	struct frec f = {0}, old = {0};
	const char *why;
	char buf[160];
	int had = 0;

	int bad = e->why != NULL;
	why = e->why;
	if (!bad)
		bad = fleet_parse_key(fl->prefix, e->key, &f, &why);
	if (!bad && e->type == SFS_REG_PUT &&
	    fleet_parse_value(e, &f, &why, buf, sizeof(buf)))
		bad = 1;
	if (bad && e->type == SFS_REG_PUT)
		refuse(fl, e, why);
	pthread_mutex_lock(&fl->lock);
	fl->events++;
	if (e->mod_revision + 1 > fl->rev)
		fl->rev = e->mod_revision + 1;
	struct frec *o = find(fl->recs, fl->n, e->key);
	if (o) {
		had = 1;
		old = *o;
		*o = fl->recs[--fl->n]; /* out; back in below if put */
	}
	int kept = 0;
	if (!bad && e->type == SFS_REG_PUT && (f.key = strdup(e->key)))
		kept = !keep(&fl->recs, &fl->n, &fl->cap, &f);
	if (f.key && !kept)
		free(f.key);
	pthread_mutex_unlock(&fl->lock);
	if (kept)
		apply_put(fl, &f, 1);
	if (had && (!kept || strcmp(old.control, f.control) ||
		    strcmp(old.name, f.name)))
		apply_gone(fl, &old);
	free(old.key);
	return 0;
}

/* A range's record: collected, applied once the range is whole. */
static int on_range(void *arg, const struct sfs_reg_event *e)
{
	struct sfs_fleet *fl = arg;
	struct frec f = {0};
	const char *why = e->why;
	char buf[160];
	if (why || fleet_parse_key(fl->prefix, e->key, &f, &why) ||
	    fleet_parse_value(e, &f, &why, buf, sizeof(buf))) {
		refuse(fl, e, why);
		return 0;
	}
	if (!(f.key = strdup(e->key)))
		return -ENOMEM;
	if (keep(&fl->fresh, &fl->nnew, &fl->capnew, &f))
		free(f.key);
	return 0;
}

/* Read every record; the table becomes what the range says (the
 * records it lacks are gone).  @start: sources not known yet start. */
static int range(struct sfs_fleet *fl, int start, char *err, size_t errlen)
{
	int64_t rev;
	fl->nnew = 0;
	int rc = sfs_reg_range(fl->g, fl->prefix, FLEET_RECORDS_MAX, on_range,
			       fl, &rev, err, errlen);
	if (rc) {
		for (size_t i = 0; i < fl->nnew; i++)
			free(fl->fresh[i].key);
		fl->nnew = 0;
		return rc;
	}
	pthread_mutex_lock(&fl->lock);
	struct frec *old = fl->recs;
	size_t nold = fl->n;
	fl->recs = fl->fresh;
	fl->n = fl->nnew;
	fl->cap = fl->capnew;
	fl->fresh = NULL;
	fl->nnew = fl->capnew = 0;
	fl->rev = rev + 1;
	fl->ranges++;
	pthread_mutex_unlock(&fl->lock);
	for (size_t i = 0; i < fl->n; i++)
		apply_put(fl, &fl->recs[i], start);
	for (size_t i = 0; i < nold; i++) {
		pthread_mutex_lock(&fl->lock);
		int still = find(fl->recs, fl->n, old[i].key) != NULL;
		pthread_mutex_unlock(&fl->lock);
		if (!still)
			apply_gone(fl, &old[i]);
		free(old[i].key);
	}
	free(old);
	return 0;
}

static int stopping(void *arg)
{
	struct sfs_fleet *fl = arg;
	pthread_mutex_lock(&fl->lock);
	int stop = fl->stop;
	pthread_mutex_unlock(&fl->lock);
	return stop;
}

static void on_created(void *arg)
{
	struct sfs_fleet *fl = arg;
	pthread_mutex_lock(&fl->lock);
	int was = fl->down_ms != 0;
	fl->healthy = 1;
	fl->down_ms = 0;
	fl->last_err[0] = '\0';
	int64_t rev = fl->rev;
	pthread_mutex_unlock(&fl->lock);
	if (was)
		SFS_LOG(SFS_INFO, "registry",
			"watching %s again from revision %" PRId64,
			sfs_reg_url(fl->g), rev);
}

static void went_down(struct sfs_fleet *fl, const char *err)
{
	pthread_mutex_lock(&fl->lock);
	int was = fl->down_ms != 0;
	fl->healthy = 0;
	if (!was)
		fl->down_ms = sfs_now_ms();
	snprintf(fl->last_err, sizeof(fl->last_err), "%s", err);
	pthread_mutex_unlock(&fl->lock);
	if (!was)
		SFS_LOG(SFS_WARN, "registry",
			"%s: %s; reading goes on from the sources known, the "
			"watch is taken again when it answers",
			sfs_reg_url(fl->g), err);
}

static void *watcher(void *arg)
{
	struct sfs_fleet *fl = arg;
	char err[600];
	int need_range = 0;

	while (!stopping(fl)) {
		if (need_range) {
			if (range(fl, 1, err, sizeof(err))) {
				went_down(fl, err);
				goto wait;
			}
			need_range = 0;
		}
		pthread_mutex_lock(&fl->lock);
		int64_t from = fl->rev, next = from;
		pthread_mutex_unlock(&fl->lock);
		int rc = sfs_reg_watch(fl->g, fl->prefix, from, on_event, fl,
				       stopping, fl, on_created, &next, err,
				       sizeof(err));
		pthread_mutex_lock(&fl->lock);
		fl->healthy = 0;
		if (next > fl->rev)
			fl->rev = next;
		pthread_mutex_unlock(&fl->lock);
		if (rc == -ECANCELED)
			break;
		if (rc == -ESTALE) {
			SFS_LOG(SFS_INFO, "registry",
				"%s was compacted past revision %" PRId64
				": reading every record again",
				sfs_reg_url(fl->g), from);
			need_range = 1;
			continue;
		}
		went_down(fl, err);
	wait:
		for (int i = 0; i < FLEET_RETRY_MS / 100 && !stopping(fl); i++)
			usleep(100000);
	}
	return NULL;
}

int fleet_open(struct sfs_replica *r, char *err, size_t errlen)
{
	struct sfs_fleet *fl = calloc(1, sizeof(*fl));
	char why[600];
	int rc;

	if (!fl) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	fl->r = r;
	fl->g = r->cfg.registry;
	pthread_mutex_init(&fl->lock, NULL);
	sfs_reg_models_prefix(fl->g, fl->prefix, sizeof(fl->prefix));
	r->fleet = fl;
	if ((rc = range(fl, 0, why, sizeof(why)))) {
		snprintf(err, errlen, "registry %s: %s", sfs_reg_url(fl->g),
			 why);
		return rc;
	}
	SFS_LOG(SFS_INFO, "registry",
		"%s: %zu record%s under %s (revision %" PRId64 ")",
		sfs_reg_url(fl->g), fl->n, fl->n == 1 ? "" : "s", fl->prefix,
		fl->rev - 1);
	if (!fl->n && !r->cfg.nseeds) {
		snprintf(err, errlen,
			 "registry %s: no model is registered under %s (and "
			 "no --seed)",
			 sfs_reg_url(fl->g), fl->prefix);
		return -ENOENT;
	}
	return 0;
}

int fleet_start(struct sfs_replica *r, char *err, size_t errlen)
{
	struct sfs_fleet *fl = r->fleet;
	int rc = -pthread_create(&fl->thread, NULL, watcher, fl);
	if (rc) {
		snprintf(err, errlen, "thread: %s", strerror(-rc));
		return rc;
	}
	fl->started = 1;
	return 0;
}

void fleet_stop(struct sfs_replica *r)
{
	struct sfs_fleet *fl = r ? r->fleet : NULL;
	if (!fl || !fl->started)
		return;
	pthread_mutex_lock(&fl->lock);
	fl->stop = 1;
	pthread_mutex_unlock(&fl->lock);
	pthread_join(fl->thread, NULL);
	fl->started = 0;
}

void fleet_free(struct sfs_replica *r)
{
	struct sfs_fleet *fl = r ? r->fleet : NULL;
	if (!fl)
		return;
	fleet_stop(r);
	for (size_t i = 0; i < fl->n; i++)
		free(fl->recs[i].key);
	for (size_t i = 0; i < fl->nnew; i++)
		free(fl->fresh[i].key);
	free(fl->recs);
	free(fl->fresh);
	pthread_mutex_destroy(&fl->lock);
	free(fl);
	r->fleet = NULL;
}

int fleet_healthy(struct sfs_replica *r)
{
	struct sfs_fleet *fl = r->fleet;
	if (!fl)
		return 0;
	pthread_mutex_lock(&fl->lock);
	int h = fl->healthy;
	pthread_mutex_unlock(&fl->lock);
	return h;
}

int fleet_lists(struct sfs_replica *r, const char *name)
{
	struct sfs_fleet *fl = r->fleet;
	int yes = 0;
	if (!fl)
		return 0;
	pthread_mutex_lock(&fl->lock);
	for (size_t i = 0; i < fl->n && !yes; i++)
		yes = !strcmp(fl->recs[i].name, name);
	pthread_mutex_unlock(&fl->lock);
	return yes;
}

void fleet_status(struct sfs_replica *r, char *buf, size_t len)
{
	struct sfs_fleet *fl = r->fleet;
	if (!fl) {
		snprintf(buf, len, "registry: none\n");
		return;
	}
	char why[2 * sizeof(fl->last_err)];
	pthread_mutex_lock(&fl->lock);
	uint64_t now = sfs_now_ms();
	/* etcd's own words: escaped, one line (status is grepped). */
	sfs_escape(fl->last_err, strlen(fl->last_err), why, sizeof(why));
	if (fl->healthy)
		snprintf(buf, len,
			 "registry: %s, watching %s from revision %" PRId64
			 "\nregistry_records: %zu (%" PRIu64 " events, %" PRIu64
			 " ignored, %" PRIu64 " whole reads)\n",
			 sfs_reg_url(fl->g), fl->prefix, fl->rev, fl->n,
			 fl->events, fl->refused, fl->ranges);
	else
		snprintf(buf, len,
			 "registry: %s, not watching (for %.1f s): %s\n"
			 "registry_records: %zu (%" PRIu64 " events, %" PRIu64
			 " ignored, %" PRIu64 " whole reads)\n",
			 sfs_reg_url(fl->g),
			 fl->down_ms ? (double)(now - fl->down_ms) / 1e3 : 0.0,
			 *why ? why : "starting", fl->n, fl->events,
			 fl->refused, fl->ranges);
	pthread_mutex_unlock(&fl->lock);
}
