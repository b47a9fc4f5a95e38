/* SPDX-License-Identifier: MIT */
/*
 * ctl.c - the seed's control port routes, on the control port server
 * (control/ctlsrv.h).  curl can debug it:
 *   curl http://seedhost:7070/v1/models         every model: generations
 *   curl http://seedhost:7070/v1/manifest       the current generation's
 *                                               (?model=NAME with several)
 *   curl http://seedhost:7070/v1/manifest?model=m&generation=3
 *   curl http://seedhost:7070/v1/generation     current and served ones
 *   curl http://seedhost:7070/v1/sources        re-seeders that announced
 *   POST /v1/connect?protocol=rdma              a replica's connection
 *   POST /v1/announce                           a re-seeder: here I am
 *   curl http://seedhost:7070/metrics           Prometheus text
 *
 * A replica's GET /v1/models may carry ?replica=ID&protocol=P&read_bytes=N:
 * what it has read from this seed so far.  One-sided reads do not pass
 * through the seed's CPU, so the metrics' bytes served are what replicas
 * report (as a BitTorrent tracker counts uploads).
 */
#include "seed.h"
#include "seed/ctl_impl.h"

#include "common/blob.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "control/ctlsrv.h"
#include "metadata/jsonlim.h"
#include "transports/transport.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTL_BODY_MAX 4096 /* hellos and announcements */

static const char *const ctl_routes[] = {
	"/v1/models",	"/v1/manifest", "/v1/generation",
	"/v1/sources",	"/v1/health",	"/v1/connect",
	"/v1/announce", "/metrics",	NULL,
};

struct sfs_ctl {
	struct sfs_ctlsrv *srv;
	struct sfs_seed *seed;
	/* The control thread's alone (handlers run on it): */
	struct ctl_reports rep;
	uint64_t connects_ok, connects_failed;
};

/* The protocol @p (a registry name) as an index into rp->protos, or
 * -1. */
static int proto_index(struct ctl_reports *rp, const char *p)
{
	for (size_t i = 0; i < rp->nprotos; i++)
		if (!strcmp(rp->protos[i], p))
			return (int)i;
	if (!sfs_xport_known(p, NULL, 0) || rp->nprotos == CTL_PROTOS_MAX ||
	    strlen(p) >= sizeof(rp->protos[0]))
		return -1;
	snprintf(rp->protos[rp->nprotos], sizeof(rp->protos[0]), "%s", p);
	return (int)rp->nprotos++;
}

int ctl_note_report(struct ctl_reports *rp, const char *id_s, const char *p,
		    const char *b, uint64_t now)
{
	uint64_t id, bytes;
	int pi;
	/* Up to 16 hex digits, nothing else (strtoull would take blanks,
	 * a sign and a 0x). */
	if (!id_s || !p || !b || sfs_parse_u64(b, &bytes) || !*id_s ||
	    strlen(id_s) > 16 ||
	    strspn(id_s, "0123456789abcdefABCDEF") != strlen(id_s))
		return -EINVAL;
	id = strtoull(id_s, NULL, 16);
	if (!id || (pi = proto_index(rp, p)) < 0)
		return -EINVAL;
	struct ctl_replica *r = NULL, *oldest = NULL;
	for (size_t i = 0; i < rp->nreplicas && !r; i++) {
		if (rp->replicas[i].id == id)
			r = &rp->replicas[i];
		else if (!oldest || rp->replicas[i].last_ms < oldest->last_ms)
			oldest = &rp->replicas[i];
	}
	if (!r && rp->nreplicas < CTL_REPLICAS_MAX) {
		r = &rp->replicas[rp->nreplicas++];
		memset(r, 0, sizeof(*r));
	} else if (!r && now - oldest->last_ms > CTL_REPLICA_TTL_MS) {
		r = oldest; /* its bytes stay counted */
		memset(r, 0, sizeof(*r));
	}
	if (!r)
		return -ENOSPC; /* CTL_REPLICAS_MAX reporting at once */
	if (r->id != id || r->proto != (size_t)pi)
		r->read_bytes = 0;
	/* A count that went back (a restart with the same id) starts
	 * afresh.  A counter never goes back: at its top it stays. */
	uint64_t more = bytes >= r->read_bytes ? bytes - r->read_bytes : bytes;
	rp->read_bytes[pi] = more > UINT64_MAX - rp->read_bytes[pi]
				     ? UINT64_MAX
				     : rp->read_bytes[pi] + more;
	r->id = id;
	r->proto = (size_t)pi;
	r->read_bytes = bytes;
	r->last_ms = now;
	return 0;
}

/* ?replica=ID&protocol=P&read_bytes=N on GET /v1/models. */
static void note_report(struct sfs_ctl *c, const struct sfs_ctl_req *req)
{
	ctl_note_report(&c->rep, sfs_ctl_arg(req, "replica"),
			sfs_ctl_arg(req, "protocol"),
			sfs_ctl_arg(req, "read_bytes"), sfs_now_ms());
}

static int metrics_reply(struct sfs_ctl *c, struct sfs_ctl_resp *resp)
{
	struct sfs_metrics *m = sfs_metrics_new();
	uint64_t now = sfs_now_ms();
	int rc;

	sfs_metrics_family(m, "seedfs_seed_info", "gauge",
			   "This seed: version, protocols served.");
	sfs_metrics_u64(m, "seedfs_seed_info", 1, "version", SEEDFS_VERSION,
			"protocols", sfs_seed_protocol(c->seed), NULL);
	sfs_metrics_family(m, "seedfs_seed_read_bytes_total", "counter",
			   "Bytes replicas report having read from this "
			   "seed, by protocol (one-sided reads bypass the "
			   "seed's CPU).");
	for (size_t p = 0; p < c->rep.nprotos; p++)
		sfs_metrics_u64(m, "seedfs_seed_read_bytes_total",
				c->rep.read_bytes[p], "protocol",
				c->rep.protos[p], NULL);
	sfs_metrics_family(m, "seedfs_seed_replicas", "gauge",
			   "Replicas that reported in the last 15 s, by "
			   "protocol.");
	for (size_t p = 0; p < c->rep.nprotos; p++) {
		uint64_t live = 0;
		for (size_t i = 0; i < c->rep.nreplicas; i++)
			live += c->rep.replicas[i].proto == p &&
				now - c->rep.replicas[i].last_ms <=
					CTL_REPLICA_TTL_MS;
		sfs_metrics_u64(m, "seedfs_seed_replicas", live, "protocol",
				c->rep.protos[p], NULL);
	}
	sfs_metrics_family(m, "seedfs_seed_connections_total", "counter",
			   "Connection exchanges (raw verbs queue pairs) by "
			   "result.");
	sfs_metrics_u64(m, "seedfs_seed_connections_total", c->connects_ok,
			"result", "accepted", NULL);
	sfs_metrics_u64(m, "seedfs_seed_connections_total", c->connects_failed,
			"result", "refused", NULL);
	sfs_seed_metrics(c->seed, m);
	sfs_ctlsrv_metrics(c->srv, m, "seedfs_seed_control_requests_total");
	uint64_t publish, withdrawn;
	sfs_seed_errors(c->seed, &publish, &withdrawn);
	sfs_metrics_family(m, "seedfs_seed_errors_total", "counter",
			   "Errors by kind: requests without the right token, "
			   "refused connection exchanges, failed republishes, "
			   "files withdrawn.");
	sfs_metrics_u64(m, "seedfs_seed_errors_total",
			sfs_ctlsrv_refused(c->srv), "kind", "unauthorized",
			NULL);
	sfs_metrics_u64(m, "seedfs_seed_errors_total", c->connects_failed,
			"kind", "connect", NULL);
	sfs_metrics_u64(m, "seedfs_seed_errors_total", publish, "kind",
			"publish", NULL);
	sfs_metrics_u64(m, "seedfs_seed_errors_total", withdrawn, "kind",
			"withdrawn", NULL);
	if ((rc = sfs_metrics_finish(m, &resp->body, &resp->body_len)))
		return rc;
	resp->status = MHD_HTTP_OK;
	resp->type = SFS_METRICS_TYPE;
	return 0;
}

static int connect_reply(struct sfs_ctl *c, const struct sfs_ctl_req *req,
			 struct sfs_ctl_resp *resp)
{
	uint8_t reply[SFS_XPORT_HELLO_MAX];
	size_t rlen = sizeof(reply);

	if (req->body_too_big || req->body_len > SFS_XPORT_HELLO_MAX)
		return sfs_ctl_text(resp, MHD_HTTP_CONTENT_TOO_LARGE,
				    "hello too large\n");
	int rc = sfs_seed_accept(c->seed, sfs_ctl_arg(req, "protocol"),
				 req->body, req->body_len, req->client, reply,
				 &rlen);
	if (rc)
		c->connects_failed++;
	else
		c->connects_ok++;
	if (rc == -EPROTONOSUPPORT)
		return sfs_ctl_text(resp, MHD_HTTP_NOT_FOUND,
				    "this seed takes no connection for that "
				    "protocol\n");
	if (rc == -EINVAL)
		return sfs_ctl_text(resp, MHD_HTTP_BAD_REQUEST,
				    "malformed connection hello\n");
	if (rc == -EMFILE)
		return sfs_ctl_text(resp, MHD_HTTP_SERVICE_UNAVAILABLE,
				    "too many replicas connected\n");
	if (rc == -EUSERS)
		return sfs_ctl_text(resp, MHD_HTTP_SERVICE_UNAVAILABLE,
				    "too many connections from this client\n");
	if (rc)
		return sfs_ctl_text(resp, MHD_HTTP_INTERNAL_SERVER_ERROR,
				    "cannot create a connection (see the "
				    "seed's log)\n");
	if (!(resp->body = malloc(rlen ? rlen : 1)))
		return -ENOMEM;
	memcpy(resp->body, reply, rlen);
	resp->body_len = rlen;
	resp->status = MHD_HTTP_OK;
	resp->type = "application/octet-stream";
	return 0;
}

/* What a model argument that names nothing gets. */
static int no_model(struct sfs_ctl_resp *resp, int rc)
{
	if (rc == -EISDIR)
		return sfs_ctl_text(
			resp, MHD_HTTP_BAD_REQUEST,
			"this seed publishes several models: add "
			"?model=NAME (GET /v1/models lists them)\n");
	return sfs_ctl_text(resp, MHD_HTTP_NOT_FOUND,
			    "no such model here (GET /v1/models lists them)\n");
}

/* GET /v1/manifest[?model=NAME][&generation=N]: the generation's one
 * encoded copy, shared by every answer going out (sfs_seed_manifest_get),
 * gzipped when asked and smaller. */
static int manifest_reply(struct sfs_ctl *c, const struct sfs_ctl_req *req,
			  struct sfs_ctl_resp *resp)
{
	const char *g = sfs_ctl_arg(req, "generation");
	uint64_t gen = 0;
	struct sfs_blob *b;

	if (g && (sfs_parse_u64(g, &gen) || gen == 0))
		return sfs_ctl_text(resp, MHD_HTTP_BAD_REQUEST,
				    "generation must be a positive integer\n");
	int gz = 0;
	int rc = sfs_seed_manifest_get(c->seed, sfs_ctl_arg(req, "model"), gen,
				       sfs_ctl_takes_gzip(req), &b, &gz);
	if (rc == -ENOENT)
		return sfs_ctl_text(resp, MHD_HTTP_NOT_FOUND,
				    "that generation is no longer served\n");
	if (rc == -ESRCH || rc == -EISDIR)
		return no_model(resp, rc);
	if (rc)
		return rc;
	sfs_ctl_json(resp, (char *)sfs_blob_data(b), sfs_blob_len(b));
	resp->release = sfs_blob_put;
	resp->release_arg = b;
	resp->gzipped = gz;
	return 0;
}

int ctl_parse_announce(const char *body, size_t len, const char *client,
		       char *addr, size_t addrlen, uint64_t *instance,
		       char *err, size_t errlen)
{
	char host[256], port[16];
	json_t *o;
	*instance = 0;
	if (sfs_json_load(SFS_JSON_ANNOUNCE, body, len, 0, &o, err, errlen))
		return -EINVAL;
	const char *a = json_string_value(json_object_get(o, "address"));
	const char *in = json_string_value(json_object_get(o, "instance"));
	if (!a ||
	    sfs_parse_hostport(a, host, sizeof(host), port, sizeof(port)) ||
	    !*port) {
		json_decref(o);
		snprintf(err, errlen,
			 "announce: {\"address\": \"HOST:PORT\"} expected");
		return -EINVAL;
	}
	if (json_object_get(o, "instance") &&
	    (!in || sfs_parse_u64(in, instance) || !*instance)) {
		json_decref(o);
		snprintf(err, errlen,
			 "announce: instance: a number (0x...) expected");
		return -EINVAL;
	}
	json_decref(o);
	int any = !*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
	const char *h = any ? client : host;
	int v6 = strchr(h, ':') != NULL;
	int n = snprintf(addr, addrlen, "%s%s%s:%s", v6 ? "[" : "", h,
			 v6 ? "]" : "", port);
	if (n < 0 || (size_t)n >= addrlen) {
		snprintf(err, errlen, "announce: address too long");
		return -EINVAL;
	}
	return 0;
}

/* POST /v1/announce {"address": "HOST:PORT", "instance": "HEX"}: a
 * re-seeding mount says where its control port is ("0.0.0.0" or no
 * host: the address it called from) and which run it is (optional: its
 * place in the fleet's lanes is found by it). */
static int announce_reply(struct sfs_ctl *c, const struct sfs_ctl_req *req,
			  struct sfs_ctl_resp *resp)
{
	char addr[300], why[300], text[320];
	uint64_t inst;
	if (req->body_too_big ||
	    ctl_parse_announce((const char *)req->body, req->body_len,
			       req->client, addr, sizeof(addr), &inst, why,
			       sizeof(why))) {
		snprintf(text, sizeof(text), "%s\n",
			 req->body_too_big ? "announce: body too large" : why);
		return sfs_ctl_text(resp, MHD_HTTP_BAD_REQUEST, text);
	}
	int rc = sfs_seed_announce(c->seed, addr, inst);
	if (rc == -ENOSPC)
		return sfs_ctl_text(resp, MHD_HTTP_SERVICE_UNAVAILABLE,
				    "too many re-seeders announced\n");
	if (rc == -EEXIST)
		return sfs_ctl_text(resp, MHD_HTTP_CONFLICT,
				    "announce: instance: announced by another "
				    "address\n");
	if (rc)
		return rc;
	return sfs_ctl_text(resp, MHD_HTTP_OK, "ok\n");
}

static int handle(void *arg, const struct sfs_ctl_req *req,
		  struct sfs_ctl_resp *resp)
{
	struct sfs_ctl *c = arg;
	char *json;
	size_t len;
	int rc;

	if (!strcmp(req->method, "POST")) {
		if (!strcmp(req->url, "/v1/connect"))
			return connect_reply(c, req, resp);
		if (!strcmp(req->url, "/v1/announce"))
			return announce_reply(c, req, resp);
		return sfs_ctl_text(resp, MHD_HTTP_NOT_FOUND,
				    "POST /v1/connect or /v1/announce\n");
	}
	if (strcmp(req->method, "GET") && strcmp(req->method, "HEAD"))
		return sfs_ctl_text(resp, MHD_HTTP_METHOD_NOT_ALLOWED,
				    "GET /v1/models, /v1/manifest, or POST "
				    "/v1/connect\n");
	if (!strcmp(req->url, "/v1/manifest"))
		return manifest_reply(c, req, resp);
	if (!strcmp(req->url, "/v1/generation")) {
		rc = sfs_seed_generations(c->seed, sfs_ctl_arg(req, "model"),
					  &json, &len);
		if (rc == -ESRCH || rc == -EISDIR)
			return no_model(resp, rc);
		if (rc)
			return rc;
		sfs_ctl_json(resp, json, len);
		return 0;
	}
	if (!strcmp(req->url, "/v1/models")) {
		note_report(c, req);
		if ((rc = sfs_seed_models(c->seed, &json, &len)))
			return rc;
		sfs_ctl_json(resp, json, len);
		return 0;
	}
	if (!strcmp(req->url, "/v1/sources")) {
		/* ?for=: the asker's own subset (a replica's instance);
		 * else its address.  ?me=: the run of a re-seeder that
		 * asks, for its place in the fleet. */
		const char *asker = sfs_ctl_arg(req, "for");
		const char *mearg = sfs_ctl_arg(req, "me");
		uint64_t me = 0;
		if (mearg && sfs_parse_u64(mearg, &me))
			return sfs_ctl_text(resp, MHD_HTTP_BAD_REQUEST,
					    "sources: me: a number (0x...) "
					    "expected\n");
		if ((rc = sfs_seed_sources(c->seed, asker ? asker : req->client,
					   me, &json, &len)))
			return rc;
		sfs_ctl_json(resp, json, len);
		return 0;
	}
	if (!strcmp(req->url, "/v1/health"))
		return sfs_ctl_text(resp, MHD_HTTP_OK, "ok\n");
	if (!strcmp(req->url, "/metrics"))
		return metrics_reply(c, resp);
	return sfs_ctl_text(resp, MHD_HTTP_NOT_FOUND,
			    "not found; try /v1/models or /v1/manifest\n");
}

int sfs_ctl_start(struct sfs_seed *s, const struct sfs_ctlsrv_cfg *cfg,
		  struct sfs_ctl **out, unsigned int *bound_port, char *err,
		  size_t errlen)
{
	struct sfs_ctl *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->seed = s;
	struct sfs_ctlsrv_cfg sc = *cfg;
	sc.body_max = CTL_BODY_MAX;
	sc.routes = ctl_routes;
	sc.host_check = 1; /* without a token: DNS rebinding */
	int rc = sfs_ctlsrv_start(&sc, handle, c, &c->srv, bound_port, err,
				  errlen);
	if (rc) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void sfs_ctl_stop(struct sfs_ctl *c)
{
	if (!c)
		return;
	sfs_ctlsrv_stop(c->srv);
	free(c);
}
