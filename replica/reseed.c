/* SPDX-License-Identifier: MIT */
/*
 * reseed.c - a replica that serves what it holds (mount --reseed): its
 * cache slab is registered, remote read only, with a seed transport of
 * its own (the replica's protocol), and a control port answers like a
 * seed's, with one difference: the bytes are where GET /v1/holdings
 * says (the slot of each chunk in memory), not in the manifest's
 * regions.
 *
 *   GET /v1/models                 what it holds views of
 *   GET /v1/manifest?model=NAME[&thin=1|2]
 *                                  the view's manifest ("holdings": true,
 *                                  this re-seeder's endpoint and run)
 *   GET /v1/holdings?model=NAME&content=0x..[&since=V]
 *                                  the slab's address and key, and for
 *                                  each file the slot of every chunk in
 *                                  memory (-1: not held, -2: being
 *                                  pulled, held soon)
 *   POST /v1/connect               raw verbs queue pairs, as a seed's
 *
 * A chunk listed in a holdings answer is not evicted for keep_ms
 * (sfs_cache_export), longer than a replica uses that answer plus its
 * longest wait, and an "unchanged" answer keeps what that list named
 * for keep_ms again (sfs_cache_keep): the replica goes on with it.  So
 * a slot is not reused under a read, and when memory runs so short that
 * one must go anyway, the reader's checksum finds it and pulls the
 * chunk elsewhere.
 *
 * It announces itself to every seed it reads from, every 5 s, so a
 * replica told only the seed's address finds it (GET /v1/sources on the
 * seed).
 */
#include "replica/reseed.h"

#include "cache/cache.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "control/auth.h"
#include "control/control.h"
#include "control/ctlsrv.h"
#include "control/run.h"
#include "metadata/holdruns.h"
#include "metadata/identity.h"
#include "control/registry.h"
#include "replica/replica_impl.h"
#include "transports/transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESEED_ANNOUNCE_MS 5000
#define RESEED_BODY_MAX 4096

_Static_assert(SFS_RUNS_NONE == UINT32_MAX &&
		       SFS_RUNS_COMING == SFS_CACHE_SLOT_COMING &&
		       SFS_RUNS_SAME == SFS_CACHE_SLOT_SAME,
	       "holdruns codes are the cache's");

struct sfs_reseed {
	struct sfs_replica *r;
	struct sfs_xport *x; /* seed role */
	/* The slab's registration, and what holdings answers publish of
	 * it; protected by lock (a rotation registers it again). */
	struct sfs_xport_mr *mr;
	uint64_t raddr, key;
	uint8_t raw[SFS_XPORT_RAWKEY_MAX];
	size_t raw_len;
	uint64_t slab_epoch; /* counts those registrations, from 1 */
	/* Its seeds refuse its token (and the file holds no new one): it
	 * serves nothing.  Protected by lock. */
	int refused;
	/* The registration before, reading until old_until_ms; the
	 * announcer's alone. */
	struct sfs_xport_mr *old_mr;
	uint64_t old_until_ms;
	uint64_t auth_seen; /* sfs_auth_changes when last registered */
	/* Its run: the instance, and the secret that proves it to seeds
	 * (control/run.h); set at start. */
	uint64_t instance;
	uint8_t secret[SFS_RUN_SECRET_LEN];
	uint64_t keep_ms; /* exported chunks stay this long */
	struct sfs_ctlsrv *srv;
	char announce[300]; /* the address told to seeds */
	/* The local address announcements are sent from: the --listen
	 * host when it is one address (a seed lists only the caller's
	 * own), "" for every address. */
	char from[INET6_ADDRSTRLEN];
	pthread_mutex_t lock;
	pthread_cond_t cond; /* stop */
	int stop;	     /* protected by lock */
	pthread_t announcer;
	int announcer_started;
	/* --registry: its records (announcer thread only). */
	struct sfs_reg_pub *pub;
	char reg_addr[300];
	size_t nkeys;
	char **keys;
};

/* The view of @name with @content (0: the current one), referenced;
 * NULL if none. */
static struct sfs_view *view_of(struct sfs_replica *r, const char *name,
				uint64_t content)
{
	struct sfs_model *mo = name ? model_get(r, name) : NULL;
	struct sfs_view *v = NULL;
	if (!mo)
		return NULL;
	pthread_mutex_lock(&mo->lock);
	for (struct sfs_view *o = mo->views; o && !v; o = o->next)
		if (!o->expired &&
		    (content ? o->content == content : o == mo->current))
			v = o;
	if (v)
		v->refs++;
	pthread_mutex_unlock(&mo->lock);
	model_put(mo); /* the view keeps it */
	return v;
}

static void view_put(struct sfs_replica *r, struct sfs_view *v)
{
	sfs_replica_unref(r, v);
}

/* GET /v1/models: every model it has a view of. */
static int models_reply(struct sfs_reseed *rs, struct sfs_ctl_resp *resp)
{
	struct sfs_replica *r = rs->r;
	char inst[24];
	snprintf(inst, sizeof(inst), "0x%" PRIx64, rs->instance);
	json_t *a = json_array();
	struct sfs_model **all;
	size_t n = model_all(r, &all);
	uint64_t now = sfs_now_ms();
	for (size_t i = 0; a && i < n; i++) {
		struct sfs_model *mo = all[i];
		pthread_mutex_lock(&mo->lock);
		const struct sfs_view *cur = mo->current;
		json_t *served = cur ? json_array() : NULL;
		/* The current generation, and those a seed still serves
		 * with the grace it has left: never one kept for another
		 * re-seeder's listing (it lists ours: neither would end). */
		for (const struct sfs_view *v = mo->views; served && v;
		     v = v->next) {
			int64_t left = -1;
			if (v->expired ||
			    (v != cur && !model_view_seeded(v, now, &left)))
				continue;
			json_t *g = json_pack("{s:I}", "generation",
					      (json_int_t)v->m->generation);
			if (g && left >= 0)
				json_object_set_new(g, "expires_in_ms",
						    json_integer(left));
			json_array_append_new(served, g);
		}
		if (cur) {
			char content[24];
			snprintf(content, sizeof(content), "0x%" PRIx64,
				 cur->content);
			json_t *e = json_pack(
				"{s:s,s:I,s:s,s:s,s:s,s:o*}", "model", mo->name,
				"generation", (json_int_t)cur->m->generation,
				"instance", inst, "content", content,
				"identity_id", cur->m->id_short, "served",
				served);
			/* Its seed signed it again: so do others fetch. */
			if (e && cur->m->signed_at)
				json_object_set_new(
					e, "signed_at",
					json_integer(
						(json_int_t)cur->m->signed_at));
			json_array_append_new(a, e);
		}
		pthread_mutex_unlock(&mo->lock);
	}
	model_put_all(all, n);
	json_t *o = json_pack("{s:s,s:o*}", "instance", inst, "models", a);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text)
		return -ENOMEM;
	sfs_ctl_json(resp, text, strlen(text));
	return 0;
}

/* GET /v1/manifest?model=NAME: the view's manifest as this re-seeder
 * serves it: its own endpoint and run, holdings. */
static int manifest_reply(struct sfs_reseed *rs, const struct sfs_ctl_req *req,
			  struct sfs_ctl_resp *resp)
{
	struct sfs_replica *r = rs->r;
	struct sfs_view *v = view_of(r, sfs_ctl_arg(req, "model"), 0);
	if (!v)
		return sfs_ctl_text(resp, MHD_HTTP_NOT_FOUND,
				    "no such model here (GET /v1/models lists "
				    "them)\n");
	/* The view's manifest with one endpoint, ours: a struct copy
	 * that shares (only reads) the view's files while it is held.
	 * The regions' addresses and keys mean nothing here; its
	 * generation and signature stay the seed's. */
	struct sfs_xport_info info;
	sfs_xport_info(rs->x, &info);
	/* Its signature may be replaced (model.c, a seed that signed it
	 * again): copied under the model's lock. */
	pthread_mutex_lock(&v->model->lock);
	struct sfs_manifest m = *v->m;
	pthread_mutex_unlock(&v->model->lock);
	memset(m.eps, 0, sizeof(m.eps));
	m.neps = 0;
	int rc = sfs_manifest_add_endpoint(&m, info.protocol, info.provider,
					   info.compat, info.addr,
					   info.addr_len);
	m.instance = rs->instance;
	m.holdings = 1;
	char *json = NULL;
	size_t len;
	/* ?thin=1: the asker has this content's manifest already; thin=2:
	 * and takes files without extents (what replicas of this build
	 * ask; thin=1 keeps them for older ones, which require them). */
	const char *thin = sfs_ctl_arg(req, "thin");
	unsigned flags = SFS_MF_ENC_NO_REMOTE;
	if (thin && !strcmp(thin, "1"))
		flags |= SFS_MF_ENC_THIN;
	if (thin && !strcmp(thin, "2"))
		flags |= SFS_MF_ENC_THIN | SFS_MF_ENC_BARE;
	if (!rc)
		rc = sfs_manifest_encode_with(&m, flags, &json, &len);
	view_put(r, v);
	if (rc)
		return rc;
	sfs_ctl_json(resp, json, len);
	return 0;
}

/* A chunk's entry in a holdings answer: its slot, -1 not held, -2
 * being pulled (held soon). */
static json_int_t slot_json(uint32_t slot)
{
	return slot == UINT32_MAX	       ? -1
	       : slot == SFS_CACHE_SLOT_COMING ? -2
					       : (json_int_t)slot;
}

/* What a holdings answer calls @version of the cache set under slab
 * registration @epoch: it moves with the slab's key too, so "since"
 * sees a new key. */
static uint64_t slab_version(uint64_t epoch, uint64_t version)
{
	return version + ((epoch - 1) << 40);
}

/* The lists of @v's files for a holdings answer, into *files [new]:
 * form 1, an array of slots per file (every chunk); form 2, runs per
 * file (holdruns.h), only what changed since @since when it is not NULL
 * (else -ERANGE: the set cannot answer from there).  *now: the version
 * the lists bring the asker to, read with the first file's: whatever
 * changes later is in the next answer again. */
static int lists(struct sfs_reseed *rs, struct sfs_view *v, int form,
		 const struct sfs_cache_xver *since, json_t **files,
		 struct sfs_cache_xver *now)
{
	struct sfs_replica *r = rs->r;
	uint32_t *slots = NULL;
	size_t cap = 0;
	int rc = 0;

	now->version = sfs_cache_set_version(r->cache, v->set);
	now->born = 0;
	if (!(*files = json_array()))
		return -ENOMEM;
	for (size_t i = 0; !rc && i < v->m->nfiles; i++) {
		uint64_t len = v->m->files[i].size;
		uint64_t n = (len + r->chunk_size - 1) / r->chunk_size;
		struct sfs_cache_xver at;
		if (n && sfs_grow((void **)&slots, &cap, (size_t)n,
				  sizeof(*slots))) {
			rc = -ENOMEM;
			break;
		}
		int held = n ? sfs_cache_export_since(r->cache, v->set,
						      (uint32_t)i, since, slots,
						      n, rs->keep_ms, &at)
			     : 0;
		if (held == -ERANGE) {
			rc = -ERANGE;
			break;
		}
		if (held < 0) /* a set retired meanwhile lists nothing */
			for (uint64_t k = 0; k < n; k++)
				slots[k] = UINT32_MAX;
		else if (n && !now->born)
			*now = at;
		json_t *fa = NULL;
		if (form == 2) {
			char *text;
			if (!sfs_runs_encode(slots, n, !since, &text)) {
				fa = json_string(text);
				free(text);
			}
		} else if ((fa = json_array())) {
			for (uint64_t k = 0; k < n; k++)
				json_array_append_new(
					fa, json_integer(slot_json(slots[k])));
		}
		if (!fa || json_array_append_new(*files, fa))
			rc = -ENOMEM;
	}
	free(slots);
	if (rc) {
		json_decref(*files);
		*files = NULL;
	}
	return rc;
}

/* GET /v1/holdings?model=NAME&content=0x..[&since=V[&base=B]][&form=2] */
static int holdings_reply(struct sfs_reseed *rs, const struct sfs_ctl_req *req,
			  struct sfs_ctl_resp *resp)
{
	struct sfs_replica *r = rs->r;
	const char *c = sfs_ctl_arg(req, "content"),
		   *since = sfs_ctl_arg(req, "since"),
		   *base = sfs_ctl_arg(req, "base"),
		   *form_s = sfs_ctl_arg(req, "form");
	uint64_t content, sv = 0, sb = 0;
	int form = form_s && !strcmp(form_s, "2") ? 2 : 1;
	if (!c || sfs_parse_u64(c, &content) ||
	    (since && sfs_parse_u64(since, &sv)) ||
	    (base && sfs_parse_u64(base, &sb)))
		return sfs_ctl_text(resp, MHD_HTTP_BAD_REQUEST,
				    "holdings: model=NAME&content=0x... "
				    "[&since=N[&base=N]][&form=2]\n");
	struct sfs_view *v = view_of(r, sfs_ctl_arg(req, "model"), content);
	if (!v)
		return sfs_ctl_text(resp, MHD_HTTP_NOT_FOUND,
				    "no such model or content here\n");
	uint64_t version = sfs_cache_set_version(r->cache, v->set);
	pthread_mutex_lock(&v->model->lock);
	int warming = v->warming > 0;
	pthread_mutex_unlock(&v->model->lock);
	/* The slab's key and the epoch the version carries, read at once:
	 * an answer never pairs a new version with an old key. */
	char addr[24], key[24], raw[2 * SFS_XPORT_RAWKEY_MAX + 1];
	pthread_mutex_lock(&rs->lock);
	snprintf(addr, sizeof(addr), "0x%" PRIx64,
		 rs->raddr + (r->cfg.reseed_test_corrupt ? 64 : 0));
	snprintf(key, sizeof(key), "0x%" PRIx64, rs->key);
	size_t raw_len = rs->raw_len;
	if (raw_len)
		sfs_hex_encode(rs->raw, raw_len, raw);
	uint64_t epoch = rs->slab_epoch;
	pthread_mutex_unlock(&rs->lock);
	char inst[24];
	snprintf(inst, sizeof(inst), "0x%" PRIx64, rs->instance);
	json_t *o = NULL;
	/* "Unchanged": the asker goes on with the list it has, so what it
	 * named is kept for keep_ms from now again (only while the version
	 * is still that list's; else a new list, below). */
	if (since && sv == slab_version(epoch, version) &&
	    !sfs_cache_keep(r->cache, v->set, version, rs->keep_ms)) {
		o = json_pack("{s:I,s:b,s:I,s:b}", "version",
			      (json_int_t)slab_version(epoch, version),
			      "unchanged", 1, "keep_ms",
			      (json_int_t)rs->keep_ms, "prefetching", warming);
		if (o && form == 2 &&
		    json_object_set_new(o, "instance", json_string(inst)))
			o = (json_decref(o), NULL);
	} else {
		/* Form 2 answers with what changed since the asker's list
		 * when it can: the same slab key (epoch) and the same set
		 * (base); else in full. */
		struct sfs_cache_xver from = {
			.born = sb, .version = sv - ((epoch - 1) << 40)};
		int delta = form == 2 && since && base && sv >> 40 == epoch - 1;
		struct sfs_cache_xver now;
		json_t *files;
		int rc = lists(rs, v, form, delta ? &from : NULL, &files, &now);
		if (rc == -ERANGE) {
			delta = 0;
			rc = lists(rs, v, form, NULL, &files, &now);
		}
		if (!now.born) /* retired meanwhile: nothing held, in full */
			delta = 0;
		json_t *slab = raw_len ? json_pack("{s:s,s:s}", "address", addr,
						   "raw_key", raw)
				       : json_pack("{s:s,s:s}", "address", addr,
						   "key", key);
		if (!rc)
			o = json_pack(
				"{s:I,s:I,s:I,s:b,s:o,s:o}", "version",
				(json_int_t)slab_version(epoch, now.version),
				"chunk_size", (json_int_t)r->chunk_size,
				"keep_ms", (json_int_t)rs->keep_ms,
				"prefetching", warming, "slab", slab,
				form == 2 ? "runs" : "files", files);
		else
			json_decref(slab);
		if (o && form == 2 &&
		    (json_object_set_new(o, "instance", json_string(inst)) ||
		     json_object_set_new(o, "base",
					 json_integer((json_int_t)now.born)) ||
		     (delta &&
		      json_object_set_new(o, "since",
					  json_integer((json_int_t)sv)))))
			o = (json_decref(o), NULL);
	}
	view_put(r, v);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text)
		return -ENOMEM;
	sfs_ctl_json(resp, text, strlen(text));
	return 0;
}

static int connect_reply(struct sfs_reseed *rs, const struct sfs_ctl_req *req,
			 struct sfs_ctl_resp *resp)
{
	uint8_t reply[SFS_XPORT_HELLO_MAX];
	size_t rlen = sizeof(reply);
	const char *proto = sfs_ctl_arg(req, "protocol");
	struct sfs_xport_info info;
	sfs_xport_info(rs->x, &info);
	if (!proto || strcmp(proto, info.protocol) ||
	    !sfs_xport_needs_hello(rs->x))
		return sfs_ctl_text(resp, MHD_HTTP_NOT_FOUND,
				    "this re-seeder takes no connection for "
				    "that protocol\n");
	if (req->body_too_big)
		return sfs_ctl_text(resp, MHD_HTTP_CONTENT_TOO_LARGE,
				    "hello too large\n");
	int rc = sfs_xport_accept(rs->x, req->body, req->body_len, req->client,
				  reply, &rlen);
	if (rc == -EINVAL)
		return sfs_ctl_text(resp, MHD_HTTP_BAD_REQUEST,
				    "malformed connection hello\n");
	if (rc)
		return sfs_ctl_text(resp, MHD_HTTP_SERVICE_UNAVAILABLE,
				    "cannot take a connection now\n");
	if (!(resp->body = malloc(rlen ? rlen : 1)))
		return -ENOMEM;
	memcpy(resp->body, reply, rlen);
	resp->body_len = rlen;
	resp->status = MHD_HTTP_OK;
	resp->type = "application/octet-stream";
	return 0;
}

static int handle(void *arg, const struct sfs_ctl_req *req,
		  struct sfs_ctl_resp *resp)
{
	struct sfs_reseed *rs = arg;
	pthread_mutex_lock(&rs->lock);
	int refused = rs->refused;
	pthread_mutex_unlock(&rs->lock);
	if (refused && strcmp(req->url, "/v1/health"))
		return sfs_ctl_text(resp, MHD_HTTP_SERVICE_UNAVAILABLE,
				    "this re-seeder's seeds refuse its token: "
				    "it serves nothing until its token file "
				    "holds one they accept\n");
	if (!strcmp(req->method, "POST")) {
		if (!strcmp(req->url, "/v1/connect"))
			return connect_reply(rs, req, resp);
		return sfs_ctl_text(resp, MHD_HTTP_NOT_FOUND,
				    "POST /v1/connect\n");
	}
	if (!strcmp(req->url, "/v1/models"))
		return models_reply(rs, resp);
	if (!strcmp(req->url, "/v1/manifest"))
		return manifest_reply(rs, req, resp);
	if (!strcmp(req->url, "/v1/holdings"))
		return holdings_reply(rs, req, resp);
	if (!strcmp(req->url, "/v1/health"))
		return sfs_ctl_text(resp, MHD_HTTP_OK, "ok\n");
	return sfs_ctl_text(resp, MHD_HTTP_NOT_FOUND,
			    "not found; try /v1/models or /v1/holdings\n");
}

/* With --registry: a record per model it has a view of, kind
 * "reseeder" (docs/registry.md); the records of models it no longer has
 * go. */
static void register_models(struct sfs_reseed *rs)
{
	struct sfs_replica *r = rs->r;
	struct sfs_reg *g = r->cfg.registry;
	char inst[24], key[SFS_REG_KEY_MAX + 1];
	char **keys = NULL;
	size_t nkeys = 0;

	if (!rs->pub)
		return;
	snprintf(inst, sizeof(inst), "0x%" PRIx64, rs->instance);
	struct sfs_model **all;
	size_t n = model_all(r, &all);
	keys = calloc(n + 1, sizeof(*keys));
	for (size_t i = 0; keys && i < n; i++) {
		struct sfs_model *mo = all[i];
		struct sfs_view *cur = view_of(r, mo->name, 0);
		json_t *o = NULL;
		if (!cur || sfs_reg_model_key(g, mo->name, "reseeder",
					      rs->reg_addr, key, sizeof(key))) {
			if (cur)
				view_put(r, cur);
			continue;
		}
		/* What it holds, as a summary: the chunks themselves are at
		 * its /v1/holdings. */
		uint64_t held = 0, total = 0;
		for (size_t f = 0; f < cur->m->nfiles; f++) {
			struct sfs_rfile rf;
			sfs_replica_rfile(cur, f, &rf);
			held += sfs_replica_resident(r, &rf, 0, rf.size);
			total += rf.size;
		}
		char content[24], *id = NULL;
		snprintf(content, sizeof(content), "0x%" PRIx64, cur->content);
		sfs_identity_canonical(&cur->m->id, &id);
		json_error_t je;
		json_t *ido = id ? json_loads(id, 0, &je) : NULL;
		free(id);
		pthread_mutex_lock(&mo->lock);
		int warming = cur->warming > 0;
		pthread_mutex_unlock(&mo->lock);
		o = json_pack("{s:i,s:s,s:s,s:s,s:I,s:s,s:s,s:s,s:o*,s:[s],s:b,"
			      "s:I,s:I}",
			      "version", 1, "kind", "reseeder", "model",
			      mo->name, "control", rs->reg_addr, "generation",
			      (json_int_t)cur->m->generation, "instance", inst,
			      "content", content, "identity_id",
			      cur->m->id_short, "identity", ido, "protocols",
			      r->proto, "prefetching", warming, "held_bytes",
			      (json_int_t)held, "bytes", (json_int_t)total);
		view_put(r, cur);
		char *val =
			o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(o);
		if (val && !sfs_reg_pub_set(rs->pub, key, val))
			keys[nkeys++] = strdup(key);
		free(val);
	}
	model_put_all(all, n);
	/* What it recorded last time and has no view of now: gone. */
	for (size_t i = 0; i < rs->nkeys; i++) {
		int still = 0;
		for (size_t k = 0; k < nkeys && !still; k++)
			still = keys[k] && !strcmp(keys[k], rs->keys[i]);
		if (!still)
			sfs_reg_pub_del(rs->pub, rs->keys[i]);
		free(rs->keys[i]);
	}
	free(rs->keys);
	rs->keys = keys;
	rs->nkeys = nkeys;
}

/* Register the slab again: a new key in holdings answers from now on;
 * the old registration reads @grace_ms more (0: released now).  The
 * announcer's.  0 or -errno (the old key stays). */
static int rekey_slab(struct sfs_reseed *rs, uint64_t grace_ms, const char *why)
{
	struct sfs_replica *r = rs->r;
	struct sfs_xport_mr *mr, *prev;
	uint8_t *base;
	size_t len;
	sfs_cache_slab(r->cache, &base, &len);
	int rc = sfs_xport_mr_reg(rs->x, base, len, SFS_XPORT_REMOTE_READ, &mr);
	if (rc) {
		SFS_LOG(SFS_ERR, "reseed",
			"%s, but the cache cannot be registered again (%s): "
			"its old key stays",
			why, strerror(-rc));
		return rc;
	}
	pthread_mutex_lock(&rs->lock);
	prev = rs->mr;
	rs->mr = mr;
	sfs_xport_mr_export(mr, &rs->raddr, &rs->key, rs->raw, &rs->raw_len);
	uint64_t epoch = ++rs->slab_epoch;
	pthread_mutex_unlock(&rs->lock);
	/* One old registration at a time: an older one goes now. */
	sfs_xport_mr_dereg(rs->old_mr);
	rs->old_mr = prev;
	rs->old_until_ms = sfs_now_ms() + grace_ms;
	if (!grace_ms) {
		sfs_xport_mr_dereg(rs->old_mr);
		rs->old_mr = NULL;
	}
	SFS_LOG(SFS_INFO, "reseed",
		"%s: the cache is registered again under a new key (epoch "
		"%" PRIu64 "); the old one %s",
		why, epoch,
		grace_ms ? "reads for the grace period (--grace)"
			 : "is revoked now");
	return 0;
}

/* The token file again (a rotation need not come with a refusal), and
 * a new token, whichever thread read it, is a new key. */
static void follow_token(struct sfs_reseed *rs)
{
	struct sfs_replica *r = rs->r;
	struct sfs_auth *a = sfs_control_cred_auth(r->cfg.cred);
	char err[512];
	if (!a)
		return;
	if (sfs_auth_reload(a, NULL, err, sizeof(err)))
		SFS_LOG(SFS_WARN, "reseed", "token file: %s", err);
	uint64_t changes = sfs_auth_changes(a);
	if (changes == rs->auth_seen)
		return;
	if (!rekey_slab(rs, (uint64_t)r->cfg.reseed_grace_s * 1000,
			"a new token")) {
		rs->auth_seen = changes;
		pthread_mutex_lock(&rs->lock);
		rs->refused = 0;
		pthread_mutex_unlock(&rs->lock);
	}
}

/* Tell every seed this replica reads from where it serves, every few
 * seconds: their lists lapse without it (an unmounted re-seeder simply
 * drops out); and the registry, when there is one.  It also follows
 * its token: a new one registers the slab again; one its seeds refuse
 * stops it serving (and revokes the slab's key) until the file holds
 * one they accept. */
static void *announcer(void *arg)
{
	struct sfs_reseed *rs = arg;
	struct sfs_replica *r = rs->r;
	char body[600], proof[2 * SFS_RUN_SECRET_LEN + 1];
	char said[SFS_XPORT_ERR_MAX] = "";
	uint64_t said_ms = 0;
	/* Its run too, with the secret that proves it: the seed finds its
	 * place in the fleet's lanes by it (discover, in source.c), and
	 * no one else can claim it. */
	sfs_hex_encode(rs->secret, sizeof(rs->secret), proof);
	snprintf(body, sizeof(body),
		 "{\"address\": \"%s\", \"instance\": \"0x%016" PRIx64
		 "\", \"proof\": \"%s\"}",
		 rs->announce, sfs_reseed_instance(rs), proof);
	explicit_bzero(proof, sizeof(proof));

	pthread_mutex_lock(&rs->lock);
	while (!rs->stop) {
		pthread_mutex_unlock(&rs->lock);
		follow_token(rs);
		register_models(rs);
		struct rsrc **all;
		size_t n = rsrc_all(r, &all);
		size_t told = 0, refused = 0;
		for (size_t i = 0; i < n; i++) {
			struct rsrc *s = all[i];
			char err[SFS_XPORT_ERR_MAX], *resp;
			size_t rlen;
			if (s->reseeder)
				continue;
			int rc = sfs_control_post_from(
				s->r->cfg.cred, *rs->from ? rs->from : NULL,
				s->addr, "/v1/announce", body, strlen(body),
				2000, 4096, &resp, &rlen, err, sizeof(err));
			if (!rc) {
				free(resp);
				told++;
				continue;
			}
			refused += rc == -EACCES;
			/* A seed that refuses it (its address, its cap) or
			 * an address it cannot send from: said, once a
			 * minute at most; a seed away: the sources say. */
			uint64_t now = sfs_now_ms();
			int loud =
				(rc == -EPROTO || rc == -EADDRNOTAVAIL) &&
				(strcmp(said, err) || now - said_ms >= 60000);
			SFS_LOG(loud ? SFS_WARN : SFS_DEBUG, "reseed",
				"announcing to %s: %s", s->addr, err);
			if (loud) {
				snprintf(said, sizeof(said), "%s", err);
				said_ms = now;
			}
		}
		rsrc_put_all(all, n);
		/* A token its seeds refuse (they rotated, its file did
		 * not follow): nothing for holders of the old one. */
		pthread_mutex_lock(&rs->lock);
		int was = rs->refused;
		rs->refused = refused && !told;
		int now_refused = rs->refused;
		pthread_mutex_unlock(&rs->lock);
		if (now_refused && !was) {
			SFS_LOG(SFS_WARN, "reseed",
				"its seeds refuse its token: it serves nothing "
				"until %s holds one they accept",
				sfs_auth_path(
					sfs_control_cred_auth(r->cfg.cred)));
			rekey_slab(rs, 0, "its seeds refuse its token");
		}
		if (rs->old_mr && sfs_now_ms() >= rs->old_until_ms) {
			sfs_xport_mr_dereg(rs->old_mr);
			rs->old_mr = NULL;
			SFS_LOG(SFS_INFO, "reseed",
				"the cache's key before the last rotation is "
				"revoked");
		}
		uint64_t wait = RESEED_ANNOUNCE_MS;
		if (rs->old_mr)
			wait = SFS_MIN(wait,
				       rs->old_until_ms > sfs_now_ms()
					       ? rs->old_until_ms - sfs_now_ms()
					       : 0);
		pthread_mutex_lock(&rs->lock);
		struct timespec ts = sfs_abstime((unsigned int)wait);
		if (!rs->stop)
			pthread_cond_timedwait(&rs->cond, &rs->lock, &ts);
	}
	pthread_mutex_unlock(&rs->lock);
	explicit_bzero(body, sizeof(body));
	return NULL;
}

/* The local address that reaches the seeds of the models shown (the
 * first one whose endpoint routes, not over loopback), into @node; 0 or
 * -ENOENT.  For a
 * --listen on every address: the slab's endpoint is bound where the
 * swarm is, not on whatever interface the provider lists first. */
static int seed_route(struct sfs_replica *r, char *node, size_t len)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&r->lock);
	size_t n = r->nmodels;
	pthread_mutex_unlock(&r->lock);
	for (size_t i = 0; i < n && rc; i++) {
		char name[SFS_MF_NAME_MAX + 1] = "";
		pthread_mutex_lock(&r->lock);
		if (i < r->nmodels)
			snprintf(name, sizeof(name), "%s", r->models[i]->name);
		pthread_mutex_unlock(&r->lock);
		struct sfs_view *v = view_of(r, name, 0);
		if (!v)
			continue;
		ssize_t ep = sfs_manifest_endpoint(v->m, r->proto);
		if (ep >= 0)
			rc = sfs_xport_route_node(r->proto, v->m->eps[ep].addr,
						  v->m->eps[ep].addr_len, node,
						  len);
		view_put(r, v);
	}
	/* A seed on this host: replicas elsewhere could not reach a
	 * loopback address; the provider's choice stands. */
	if (!rc && (!strncmp(node, "127.", 4) || !strcmp(node, "::1")))
		rc = -ENOENT;
	return rc ? -ENOENT : 0;
}

/* --listen host @host, not a wildcard, as the numeric address its port
 * is bound to (the first getaddrinfo gives, as ctlsrv binds) into @out.
 * 0, or -EINVAL with a line in @err. */
static int numeric_host(const char *host, char *out, size_t len, char *err,
			size_t errlen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE},
			*res;
	int rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "--listen %s: %s", host,
			 gai_strerror(rc));
		return -EINVAL;
	}
	rc = getnameinfo(res->ai_addr, res->ai_addrlen, out, (socklen_t)len,
			 NULL, 0, NI_NUMERICHOST);
	freeaddrinfo(res);
	if (rc) {
		snprintf(err, errlen, "--listen %s: %s", host,
			 gai_strerror(rc));
		return -EINVAL;
	}
	return 0;
}

uint64_t sfs_reseed_instance(const struct sfs_reseed *rs)
{
	return rs ? rs->instance : 0;
}

int sfs_reseed_start(struct sfs_replica *r, const char *listen,
		     struct sfs_reseed **out, char *err, size_t errlen)
{
	struct sfs_reseed *rs = calloc(1, sizeof(*rs));
	char host[256], port[16];
	int rc = -ENOMEM;

	if (!rs)
		goto fail;
	rs->r = r;
	pthread_mutex_init(&rs->lock, NULL);
	if ((rc = sfs_cond_init(&rs->cond)))
		goto fail;
	if (sfs_parse_hostport(listen, host, sizeof(host), port,
			       sizeof(port))) {
		snprintf(err, errlen, "--listen '%s' is not HOST:PORT", listen);
		rc = -EINVAL;
		goto fail;
	}
	if ((rc = sfs_run_new(rs->secret, &rs->instance))) {
		snprintf(err, errlen,
			 "--reseed: no randomness for its run's secret");
		goto fail;
	}
	/* A seed transport of the protocol the replica reads with, bound
	 * to the --listen host, or for every address to the one that
	 * reaches the seeds. */
	char node[64];
	int any = !*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
	struct sfs_xport_cfg xc = {.protocol = r->proto,
				   .role = SFS_XPORT_SEED,
				   .node = !any ? host
					   : !seed_route(r, node, sizeof(node))
						   ? node
						   : NULL,
				   .timeout_ms = r->cfg.timeout_ms};
	if ((rc = sfs_xport_open(&xc, &rs->x, err, errlen)))
		goto fail;
	uint8_t *base;
	size_t len;
	sfs_cache_slab(r->cache, &base, &len);
	if ((rc = sfs_xport_mr_reg(rs->x, base, len, SFS_XPORT_REMOTE_READ,
				   &rs->mr))) {
		snprintf(err, errlen,
			 "--reseed: cannot register the cache with protocol "
			 "%s: %s",
			 r->proto, strerror(-rc));
		goto fail;
	}
	sfs_xport_mr_export(rs->mr, &rs->raddr, &rs->key, rs->raw,
			    &rs->raw_len);
	rs->slab_epoch = 1;
	if (r->cfg.reseed_test_corrupt)
		SFS_LOG(SFS_WARN, "reseed",
			"test: every chunk it serves others is wrong");
	if (sfs_control_cred_auth(r->cfg.cred))
		rs->auth_seen =
			sfs_auth_changes(sfs_control_cred_auth(r->cfg.cred));
	rs->keep_ms = 3 * RSRC_POLL_MS + r->cfg.timeout_ms;
	unsigned int bound;
	static const char *const routes[] = {"/v1/models",   "/v1/manifest",
					     "/v1/holdings", "/v1/connect",
					     "/v1/health",   NULL};
	struct sfs_ctlsrv_cfg sc = {.host = host,
				    .port = port,
				    .routes = routes,
				    .body_max = RESEED_BODY_MAX,
				    .auth = sfs_control_cred_auth(r->cfg.cred),
				    .tls = r->cfg.reseed_tls,
				    .host_check = 1};
	if ((rc = sfs_ctlsrv_start(&sc, handle, rs, &rs->srv, &bound, err,
				   errlen)))
		goto fail;
	/* One address: announced as it is numerically, and sent from (a
	 * seed lists only the caller's own address). */
	if (!any &&
	    (rc = numeric_host(host, rs->from, sizeof(rs->from), err, errlen)))
		goto fail;
	int v6 = strchr(rs->from, ':') != NULL;
	snprintf(rs->announce, sizeof(rs->announce), "%s%s%s:%u", v6 ? "[" : "",
		 any ? "0.0.0.0" : rs->from, v6 ? "]" : "", bound);
	if (r->cfg.registry) {
		char ip[270];
		if (any) {
			if (sfs_reg_local_ip(r->cfg.registry, ip, sizeof(ip)))
				snprintf(ip, sizeof(ip), "127.0.0.1");
		} else {
			snprintf(ip, sizeof(ip), "%s%s%s", v6 ? "[" : "",
				 rs->from, v6 ? "]" : "");
		}
		snprintf(rs->reg_addr, sizeof(rs->reg_addr), "%s:%u", ip,
			 bound);
		if ((rc = sfs_reg_pub_start(r->cfg.registry, 10, "re-seeder",
					    &rs->pub, err, errlen)))
			goto fail;
	}
	if ((rc = -pthread_create(&rs->announcer, NULL, announcer, rs))) {
		snprintf(err, errlen, "thread: %s", strerror(-rc));
		goto fail;
	}
	rs->announcer_started = 1;
	SFS_LOG(SFS_INFO, "reseed",
		"serving what this mount holds on %s (protocol %s)",
		rs->announce, r->proto);
	*out = rs;
	return 0;
fail:
	if (rc == -ENOMEM && !*err)
		snprintf(err, errlen, "out of memory");
	sfs_reseed_stop(rs);
	return rc;
}

const char *sfs_reseed_address(const struct sfs_reseed *rs)
{
	return rs->announce;
}

void sfs_reseed_stop(struct sfs_reseed *rs)
{
	if (!rs)
		return;
	if (rs->announcer_started) {
		pthread_mutex_lock(&rs->lock);
		rs->stop = 1;
		pthread_cond_broadcast(&rs->cond);
		pthread_mutex_unlock(&rs->lock);
		pthread_join(rs->announcer, NULL);
	}
	/* Out of the registry before it stops serving. */
	sfs_reg_pub_stop(rs->pub);
	rs->pub = NULL;
	for (size_t i = 0; i < rs->nkeys; i++)
		free(rs->keys[i]);
	free(rs->keys);
	rs->keys = NULL;
	rs->nkeys = 0;
	sfs_ctlsrv_stop(rs->srv);
	/* Reads in flight from others are the transport's business: once
	 * quiesced, nothing reads the slab through it any more. */
	size_t left = rs->x ? sfs_xport_quiesce(rs->x) : 0;
	if (left) {
		sfs_keep_forever(rs);
		return;
	}
	sfs_xport_mr_dereg(rs->old_mr);
	sfs_xport_mr_dereg(rs->mr);
	sfs_xport_close(rs->x);
	explicit_bzero(rs->secret, sizeof(rs->secret));
	pthread_cond_destroy(&rs->cond);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

void sfs_reseed_metrics(const struct sfs_reseed *rs, struct sfs_metrics *m)
{
	if (rs)
		sfs_ctlsrv_metrics(rs->srv, m,
				   "seedfs_reseed_control_requests_total");
}
