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
#include "seed/announce.h"
#include "seed/ctl_impl.h"

#include "common/blob.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "control/ctlsrv.h"
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
	struct ctl_refusals refusals;
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
	sfs_metrics_family(m, "seedfs_seed_announce_refused_total", "counter",
			   "Announcements of re-seeders refused, by reason: "
			   "malformed, address (not the caller's), proof (a "
			   "run claimed without its secret), cap (the "
			   "caller's --announce-per-host), full (1,024 "
			   "listed).");
	for (size_t k = 0; k < CTL_REFUSED_KINDS; k++)
		sfs_metrics_u64(m, "seedfs_seed_announce_refused_total",
				c->refusals.total[k], "reason",
				ctl_refusal_names[k], NULL);
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

/* A refused announcement: counted, told at most once per
 * CTL_REFUSAL_SAY_MS per caller (ctl_note_refusal), and answered with
 * @status and @why (one line, no newline). */
static int refused(struct sfs_ctl *c, const struct sfs_ctl_req *req,
		   enum ctl_refusal kind, unsigned int status, const char *why,
		   struct sfs_ctl_resp *resp)
{
	char text[700];
	uint64_t n = 0;
	int say = ctl_note_refusal(&c->refusals, kind, req->client,
				   sfs_now_ms(), &n);
	if (say == 1)
		SFS_LOG(SFS_WARN, "seed",
			"refused an announcement from %s: %s (%" PRIu64
			" refused from it so far)",
			req->client, why, n);
	else if (say == 2)
		SFS_LOG(SFS_WARN, "seed",
			"refused %" PRIu64 " announcements from callers past "
			"the %d told apart, this one from %s: %s",
			n, CTL_REFUSERS_MAX, req->client, why);
	snprintf(text, sizeof(text), "%s\n", why);
	return sfs_ctl_text(resp, status, text);
}

/* POST /v1/announce {"address": "HOST:PORT", "instance": "0xRUN",
 * "proof": "SECRET"}: a re-seeding mount says where its control port
 * is (its own address, or "0.0.0.0"/no host: the address it called
 * from) and, optionally, which run it is with that run's secret (its
 * place in the fleet's lanes is found by it). */
static int announce_reply(struct sfs_ctl *c, const struct sfs_ctl_req *req,
			  struct sfs_ctl_resp *resp)
{
	struct sfs_announced_res res;
	struct ctl_announce an;
	char why[600], esc[320];
	if (req->body_too_big)
		return refused(c, req, CTL_REFUSED_MALFORMED,
			       MHD_HTTP_BAD_REQUEST, "announce: body too large",
			       resp);
	if (ctl_parse_announce((const char *)req->body, req->body_len, &an, why,
			       sizeof(why)))
		return refused(c, req, CTL_REFUSED_MALFORMED,
			       MHD_HTTP_BAD_REQUEST, why, resp);
	struct sfs_announce in = {.addr = an.addr,
				  .caller = req->client,
				  .instance = an.instance,
				  .proof = an.has_proof ? an.proof : NULL};
	int rc = sfs_seed_announce(c->seed, &in, &res);
	explicit_bzero(&an.proof, sizeof(an.proof));
	sfs_escape(an.addr, strlen(an.addr), esc, sizeof(esc));
	switch (rc) {
	case 0:
		return sfs_ctl_text(resp, MHD_HTTP_OK, "ok\n");
	case -EINVAL:
		snprintf(why, sizeof(why),
			 "announce: address %s: HOST:PORT with a port of "
			 "1-65535 expected (from a numeric caller address; "
			 "this one: %s)",
			 esc, req->client);
		return refused(c, req, CTL_REFUSED_MALFORMED,
			       MHD_HTTP_BAD_REQUEST, why, resp);
	case -EPERM:
		snprintf(why, sizeof(why),
			 "announce: address %s is not the caller's (%s): a "
			 "re-seeder announces its own address (or "
			 "0.0.0.0:PORT for the one it calls from)",
			 esc, req->client);
		return refused(c, req, CTL_REFUSED_ADDRESS, MHD_HTTP_FORBIDDEN,
			       why, resp);
	case -EACCES:
		snprintf(why, sizeof(why),
			 "announce: instance 0x%016" PRIx64 ": %s (a run is "
			 "claimed with its secret, whose SHA-256 begins with "
			 "it)",
			 in.instance,
			 in.proof ? "the proof is not that run's"
				  : "no proof of that run");
		return refused(c, req, CTL_REFUSED_PROOF, MHD_HTTP_FORBIDDEN,
			       why, resp);
	case -EDQUOT:
		snprintf(why, sizeof(why),
			 "announce: %s: %s has as many re-seeders listed as "
			 "one address may (the seed's --announce-per-host)",
			 res.listed, req->client);
		return refused(c, req, CTL_REFUSED_CAP,
			       MHD_HTTP_TOO_MANY_REQUESTS, why, resp);
	case -ENOSPC:
		snprintf(why, sizeof(why),
			 "too many re-seeders announced (%d listed)",
			 SFS_ANNOUNCED_MAX);
		return refused(c, req, CTL_REFUSED_FULL,
			       MHD_HTTP_SERVICE_UNAVAILABLE, why, resp);
	default:
		return rc;
	}
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
