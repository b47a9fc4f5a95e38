/* SPDX-License-Identifier: MIT */
/*
 * ctlsrv.h - a control port: a small HTTP/1.1 server (libmicrohttpd)
 * that a seed and a re-seeding mount answer their routes on.
 *
 * One event-driven thread (epoll): a connection costs a socket, not a
 * thread.  At most CTLSRV_PER_CLIENT connections per client address,
 * and a deadline for every request to arrive whole, so a crowd of slow
 * or idle clients cannot keep the port from answering others.  Request
 * bodies (POST) are capped by the caller.  Handlers run on that thread
 * and must answer quickly.
 */
#ifndef SFS_CTLSRV_H
#define SFS_CTLSRV_H

#include <stddef.h>
#include <stdint.h>

#define CTLSRV_DEADLINE_MS 5000 /* a request arrives whole within this */
#define CTLSRV_PER_CLIENT 32	/* connections from one address */

struct sfs_ctlsrv;

/* One request, as the handler sees it. [borrowed: valid during the
 * call] */
struct sfs_ctl_req {
	const char *method; /* "GET", "HEAD", "POST" */
	const char *url;    /* the path, without the query */
	const char *client; /* the peer's numeric address */
	const uint8_t *body;
	size_t body_len;
	int body_too_big; /* more than the cap came: body is cut */
	void *conn;	  /* for sfs_ctl_arg */
};

/* The answer: status, type, and a body [new: malloc'd, freed by the
 * server] of body_len bytes; or, with @release set, a body shared with
 * other answers [borrowed]: the server calls release(release_arg) once
 * it is done with it (sent, or the connection gone), whatever the
 * handler returns, and never gzips or frees it. */
struct sfs_ctl_resp {
	unsigned int status;
	const char *type; /* "application/json", "text/plain", ... */
	char *body;
	size_t body_len;
	int gzipped; /* body is gzip already (sfs_gzip): said so, as is */
	void (*release)(void *arg);
	void *release_arg;
};

/* sfs_ctl_takes_gzip - does @req take a gzipped answer (a GET whose
 * Accept-Encoding names gzip, not at q=0)?  1 or 0.  The server gzips
 * answers of 512 bytes or more for such requests itself; a handler that
 * keeps a gzipped copy of a large answer gives it with resp->gzipped. */
int sfs_ctl_takes_gzip(const struct sfs_ctl_req *req);

/* sfs_gzip - @len bytes at @in, gzipped (level 1) into *out [new] of
 * *outlen bytes: 0; -EAGAIN when that is not smaller (or @len is below
 * 512 or past 2 GiB); -ENOMEM.  Thread safe. */
int sfs_gzip(const void *in, size_t len, char **out, size_t *outlen);

/* sfs_ctl_arg - the value of query argument @name of @req, or NULL
 * [borrowed]. */
const char *sfs_ctl_arg(const struct sfs_ctl_req *req, const char *name);

/* sfs_ctl_text - fill @resp with @status and a copy of @text (plain
 * text).  Returns 0 or -ENOMEM. */
int sfs_ctl_text(struct sfs_ctl_resp *resp, unsigned int status,
		 const char *text);

/* sfs_ctl_json - fill @resp with 200 and @json [owned from now on] of
 * @len bytes. */
void sfs_ctl_json(struct sfs_ctl_resp *resp, char *json, size_t len);

/*
 * Answer @req in @resp.  Returns 0, or -errno to drop the connection
 * (out of memory).  Called on the server's thread.
 */
typedef int (*sfs_ctl_handler)(void *arg, const struct sfs_ctl_req *req,
			       struct sfs_ctl_resp *resp);

struct sfs_auth;
struct sfs_tls_pair;

struct sfs_ctlsrv_cfg {
	const char *host; /* "": all addresses */
	const char *port; /* "0": any */
	size_t body_max;  /* POST bodies over this are cut */
	/* Every route but /v1/health needs "Authorization: Bearer" with
	 * this token (401 otherwise, checked before a body is read), or
	 * NULL: none.  [borrowed, outlives the server] */
	struct sfs_auth *auth;
	/* A read-only scrape token (--metrics-token-file): it opens GET
	 * /metrics and nothing else (401 on every other route); @auth's
	 * token still opens /metrics.  With @scrape and no @auth, /metrics
	 * needs @scrape's token and the other routes need none.  NULL:
	 * none.  [borrowed, outlives the server] */
	struct sfs_auth *scrape;
	/* Serve HTTPS with this certificate and key, or NULL: plain HTTP.
	 * [borrowed, outlives the server] */
	const struct sfs_tls_pair *tls;
	/* The routes counted by name in sfs_ctlsrv_metrics (at most
	 * CTLSRV_ROUTES_MAX, NULL-terminated; the others count as
	 * "other"), or NULL. [borrowed, outlives the server] */
	const char *const *routes;
	/* Without a token, answer only requests whose Host header names
	 * this port's own host (DNS rebinding: a web page whose name
	 * resolves to 127.0.0.1 must not read a tokenless port through a
	 * browser).  Allowed, with any port or none: loopback addresses
	 * and "localhost"; @host itself; with a wildcard @host (""
	 * "0.0.0.0" "::"), any IP address and this machine's host name;
	 * and @names.  Others get 421 (/v1/health excepted).  Requests
	 * without a Host header (HTTP/1.0) are not browsers': answered. */
	int host_check;
	/* Other names the port is reached by (--advertise), NULL-ended,
	 * or NULL. [borrowed, outlives the server] */
	const char *const *names;
};

#define CTLSRV_ROUTES_MAX 16

/*
 * sfs_ctlsrv_start - bind @cfg->host:@cfg->port, fill *bound_port, and
 * answer every request with @fn(@arg, ...) (req->body_too_big past the
 * cap).  *out [new].  Returns 0 or -errno with a line in @err.
 */
int sfs_ctlsrv_start(const struct sfs_ctlsrv_cfg *cfg, sfs_ctl_handler fn,
		     void *arg, struct sfs_ctlsrv **out,
		     unsigned int *bound_port, char *err, size_t errlen);

/* sfs_ctlsrv_refused - requests refused for want of the token so far.
 * Thread safe. */
uint64_t sfs_ctlsrv_refused(const struct sfs_ctlsrv *s);

struct sfs_metrics;

/*
 * sfs_ctlsrv_metrics - the requests answered so far, by route and
 * status code, as counter @name (labels route, code) into @m.  Thread
 * safe.
 */
void sfs_ctlsrv_metrics(const struct sfs_ctlsrv *s, struct sfs_metrics *m,
			const char *name);

/* sfs_ctlsrv_loopback - whether --listen host @host reaches this host
 * only (127.0.0.0/8, ::1, "localhost"); "" and wildcards do not. */
int sfs_ctlsrv_loopback(const char *host);

/*
 * sfs_ctlsrv_host_ok - whether a Host header @value ("name", "name:port",
 * "[v6]:port") names a port listening on @listen ("" or a wildcard: every
 * address) under the rules of sfs_ctlsrv_cfg.host_check; @names are
 * extra names (NULL-ended, or NULL), @self this machine's host name (or
 * NULL).  Pure; thread safe.
 */
int sfs_ctlsrv_host_ok(const char *value, const char *listen,
		       const char *const *names, const char *self);

/* sfs_ctlsrv_stop - stop answering, close the port, free.  NULL is
 * fine. */
void sfs_ctlsrv_stop(struct sfs_ctlsrv *s);

#endif /* SFS_CTLSRV_H */
