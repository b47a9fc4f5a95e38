/* SPDX-License-Identifier: MIT */
/*
 * ctl.c - the seed's control port routes, on the control port server
 * (metadata/ctlsrv.h).  curl can debug it:
 *   curl http://seedhost:7070/v1/models         every model: generations
 *   curl http://seedhost:7070/v1/manifest       the current generation's
 *                                               (?model=NAME with several)
 *   curl http://seedhost:7070/v1/manifest?model=m&generation=3
 *   curl http://seedhost:7070/v1/generation     current and served ones
 *   curl http://seedhost:7070/v1/sources        re-seeders that announced
 *   POST /v1/connect?protocol=rdma              a replica's connection
 *   POST /v1/announce                           a re-seeder: here I am
 */
#include "seed.h"

#include "common/log.h"
#include "common/util.h"
#include "metadata/ctlsrv.h"
#include "transports/transport.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTL_BODY_MAX 4096 /* hellos and announcements */

struct sfs_ctl {
	struct sfs_ctlsrv *srv;
	struct sfs_seed *seed;
};

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

/* GET /v1/manifest[?model=NAME][&generation=N]: a copy, the seed may
 * republish. */
static int manifest_reply(struct sfs_ctl *c, const struct sfs_ctl_req *req,
			  struct sfs_ctl_resp *resp)
{
	const char *g = sfs_ctl_arg(req, "generation");
	uint64_t gen = 0;
	char *json;
	size_t len;

	if (g && (sfs_parse_u64(g, &gen) || gen == 0))
		return sfs_ctl_text(resp, MHD_HTTP_BAD_REQUEST,
				    "generation must be a positive integer\n");
	int rc = sfs_seed_manifest_copy(c->seed, sfs_ctl_arg(req, "model"), gen,
					&json, &len);
	if (rc == -ENOENT)
		return sfs_ctl_text(resp, MHD_HTTP_NOT_FOUND,
				    "that generation is no longer served\n");
	if (rc == -ESRCH || rc == -EISDIR)
		return no_model(resp, rc);
	if (rc)
		return rc;
	sfs_ctl_json(resp, json, len);
	return 0;
}

/* POST /v1/announce {"address": "HOST:PORT"}: a re-seeding mount says
 * where its control port is; "0.0.0.0" or no host: the address it
 * called from. */
static int announce_reply(struct sfs_ctl *c, const struct sfs_ctl_req *req,
			  struct sfs_ctl_resp *resp)
{
	json_error_t je;
	char host[256], port[16], addr[300];
	json_t *o = req->body_too_big ? NULL
				      : json_loadb((const char *)req->body,
						   req->body_len, 0, &je);
	const char *a = json_string_value(json_object_get(o, "address"));
	if (!a ||
	    sfs_parse_hostport(a, host, sizeof(host), port, sizeof(port)) ||
	    !*port) {
		json_decref(o);
		return sfs_ctl_text(resp, MHD_HTTP_BAD_REQUEST,
				    "announce: {\"address\": \"HOST:PORT\"} "
				    "expected\n");
	}
	int any = !*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
	int v6 = strchr(any ? req->client : host, ':') != NULL;
	snprintf(addr, sizeof(addr), "%s%s%s:%s", v6 ? "[" : "",
		 any ? req->client : host, v6 ? "]" : "", port);
	json_decref(o);
	int rc = sfs_seed_announce(c->seed, addr);
	if (rc == -ENOSPC)
		return sfs_ctl_text(resp, MHD_HTTP_SERVICE_UNAVAILABLE,
				    "too many re-seeders announced\n");
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
		if ((rc = sfs_seed_models(c->seed, &json, &len)))
			return rc;
		sfs_ctl_json(resp, json, len);
		return 0;
	}
	if (!strcmp(req->url, "/v1/sources")) {
		if ((rc = sfs_seed_sources(c->seed, &json, &len)))
			return rc;
		sfs_ctl_json(resp, json, len);
		return 0;
	}
	if (!strcmp(req->url, "/v1/health"))
		return sfs_ctl_text(resp, MHD_HTTP_OK, "ok\n");
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
