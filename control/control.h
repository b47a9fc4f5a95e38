/* SPDX-License-Identifier: MIT */
/*
 * control.h - talk to a seed's control port (HTTP/1.1).
 */
#ifndef SFS_CONTROL_H
#define SFS_CONTROL_H

#include <stddef.h>
#include <stdint.h>

/*
 * What a client shows a control port (docs/security.md): the token, and
 * TLS.  One per replica, shared by its threads; NULL where a function
 * takes one means plain HTTP and no token.
 */
struct sfs_control_cred_cfg {
	const char *token_file; /* the shared secret's file, or NULL */
	const char *tls_ca;	/* verify seeds against this CA file */
	const char *tls_pin;	/* and/or hold them to this public key */
	int https;		/* TLS with the system's CAs (https://) */
	/* Manifests must be signed by a key in this file (--trust-key,
	 * control/sign.h), or NULL. */
	const char *trust_key;
};
struct sfs_control_cred;
struct sfs_auth;
struct sfs_trust;

/*
 * sfs_control_cred_new - read the token file, check the pin.  TLS is on
 * with https, tls_ca or tls_pin; a pin without a CA is the only trust
 * (a self-signed certificate passes when its key is the pinned one; no
 * host name is checked then).  *out [new].  0, or -errno with one line
 * in @err naming the option.
 */
int sfs_control_cred_new(const struct sfs_control_cred_cfg *cfg,
			 struct sfs_control_cred **out, char *err,
			 size_t errlen);
/* sfs_control_cred_free - the token is wiped.  NULL is fine. */
void sfs_control_cred_free(struct sfs_control_cred *c);
/* The token, or NULL (a re-seeder's port asks for the same) [borrowed]. */
struct sfs_auth *sfs_control_cred_auth(const struct sfs_control_cred *c);
/* The keys manifests must be signed by, or NULL [borrowed]. */
const struct sfs_trust *
sfs_control_cred_trust(const struct sfs_control_cred *c);
/* Whether control ports are spoken to over TLS (NULL: no). */
int sfs_control_cred_tls(const struct sfs_control_cred *c);
/* sfs_control_cred_describe - "token FILE; tls ca FILE" (no secret) for
 * status, into @buf.  NULL: "no token; no tls". */
void sfs_control_cred_describe(const struct sfs_control_cred *c, char *buf,
			       size_t len);

/*
 * sfs_control_parse_seeds - "[http[s]://]HOST:PORT[,...]" into @out
 * (@max entries [new strings], *n of them so far, appended to), the
 * scheme into *https (-1: none given yet; every seed must agree).
 * 0, or -EINVAL / -E2BIG / -ENOMEM with one line in @err, which
 * starts with @what ("--seed").
 */
int sfs_control_parse_seeds(const char *list, const char *what, char **out,
			    size_t max, size_t *n, int *https, char *err,
			    size_t errlen);

/*
 * sfs_control_get - GET http[s]://@hostport@path within @timeout_ms,
 * with @cred's token and TLS, refusing bodies over @cap bytes.  *body
 * [new, NUL-terminated, free()].  Returns 0, or -errno with one line in
 * @err (connection refused, timeout, TLS, HTTP status, size).  A 401 is
 * -EACCES, and the token file is read again once and the request
 * retried when it changed (a rotated token).  Thread safe once
 * sfs_control_init ran.
 */
int sfs_control_get(struct sfs_control_cred *cred, const char *hostport,
		    const char *path, unsigned int timeout_ms, size_t cap,
		    char **body, size_t *len, char *err, size_t errlen);

/*
 * sfs_control_abort - the process is stopping: every exchange under way
 * (sfs_control_get, _post, _post_from) ends within about a second,
 * later ones at once, with -ECANCELED or a transfer error and one line
 * in their @err.  For good: only for a process about to exit.  Thread
 * safe.
 */
void sfs_control_abort(void);

/*
 * sfs_control_post - POST @len bytes of @body (application/octet-stream)
 * to http://@hostport@path; same rules and results as sfs_control_get.
 * A non-200 answer puts its (short, text) body into @err.
 */
int sfs_control_post(struct sfs_control_cred *cred, const char *hostport,
		     const char *path, const void *body, size_t len,
		     unsigned int timeout_ms, size_t cap, char **resp,
		     size_t *rlen, char *err, size_t errlen);

/*
 * sfs_control_post_from - sfs_control_post from local address @from (a
 * numeric address of this host; NULL: the kernel's choice): a seed
 * lists a re-seeder's address only when the announcement comes from it
 * (docs/control.md).  -EADDRNOTAVAIL when @from cannot be bound.
 */
int sfs_control_post_from(struct sfs_control_cred *cred, const char *from,
			  const char *hostport, const char *path,
			  const void *body, size_t len, unsigned int timeout_ms,
			  size_t cap, char **resp, size_t *rlen, char *err,
			  size_t errlen);

/*
 * A bounded HTTP answer as libcurl hands it over (also the registry
 * client's).  sfs_http_body_add - append @n bytes, NUL kept after them:
 * 0, or -E2BIG past @limit (too_big set) / -ENOMEM.  The caller frees
 * buf.
 */
struct sfs_http_body {
	char *buf;
	size_t len, cap, limit;
	int too_big;
	/* A gzipped answer (control.c): its handle, to weigh what it
	 * unpacks to against what crossed; bomb set when past the ratio. */
	void *curl;
	int bomb;
	int bad_encoding; /* a Content-Encoding not asked for: refused */
	int plain;	  /* ask without gzip */
};
int sfs_http_body_add(struct sfs_http_body *b, const char *p, size_t n);

struct sfs_xport;
struct sfs_manifest;

/*
 * sfs_control_open - open a transport to the seed at @hostport that
 * published @m, and connect to it.  @protocol: one the seed serves (else
 * -EPROTONOSUPPORT, one line naming both sides), or NULL / "auto": the
 * seed's endpoints in its order, the first this host can open.  The
 * hello/accept exchange (POST /v1/connect) is done for backends that
 * need it.  On success *x [new], *ep (endpoint index) and *peer (for
 * sfs_xport_read).  Returns 0 or -errno with one line in @err.
 */
int sfs_control_open(struct sfs_control_cred *cred, const char *hostport,
		     const struct sfs_manifest *m, const char *protocol,
		     unsigned int timeout_ms, struct sfs_xport **x, size_t *ep,
		     uint64_t *peer, char *err, size_t errlen);

/*
 * sfs_control_connect_peer - connect the open transport @x to endpoint
 * @ep of the seed at @hostport (its published address, or the
 * hello/accept exchange), as sfs_control_open does; for a seed that
 * restarted.  *peer for sfs_xport_read.  0 or -errno, one line in @err;
 * -EPROTO when @ep publishes provider settings (compat) that differ from
 * @x's: the provider would refuse the connection.
 */
struct sfs_endpoint;
int sfs_control_connect_peer(struct sfs_control_cred *cred,
			     const char *hostport, struct sfs_xport *x,
			     const struct sfs_endpoint *ep,
			     unsigned int timeout_ms, uint64_t *peer, char *err,
			     size_t errlen);

/*
 * sfs_control_reconnect - the connection of @x to the seed at @hostport
 * (endpoint @ep, *peer) is wedged or broken: make that connection anew
 * (sfs_xport_peer_reset; the other peers are not touched where the
 * backend allows), or for raw verbs remove its queue pair and connect
 * again through the control port; *peer is updated (raw verbs makes a
 * new one).  Bounded by @timeout_ms.  0 or -errno with one line in
 * @err.  Not thread safe with itself on one transport.
 */
int sfs_control_reconnect(struct sfs_control_cred *cred, const char *hostport,
			  struct sfs_xport *x, const struct sfs_endpoint *ep,
			  unsigned int timeout_ms, uint64_t *peer, char *err,
			  size_t errlen);

/*
 * sfs_control_remote_key - the key to read a region through @x: the
 * published one, or a raw key imported with sfs_xport_key_import.
 * Returns 0 or -errno.  Thread safe.
 */
struct sfs_remote;
int sfs_control_remote_key(struct sfs_xport *x, const struct sfs_remote *r,
			   uint64_t *key);

/* sfs_control_remote_key_raw - whether sfs_control_remote_key imports
 * @r's key (a raw key): that key is then given back with
 * sfs_xport_key_release once no piece uses it. */
int sfs_control_remote_key_raw(const struct sfs_remote *r);

/* sfs_control_traffic - HTTP bytes (headers and bodies) this process
 * has received and sent as a control-port client since it started: what
 * the control plane costs it.  Thread safe. */
void sfs_control_traffic(uint64_t *rx, uint64_t *tx);

/* The routes sfs_control_traffic_route counts apart. */
enum sfs_ctl_route {
	SFS_CTL_ROUTE_HOLDINGS, /* /v1/holdings */
	SFS_CTL_ROUTE_MANIFEST, /* /v1/manifest */
	SFS_CTL_ROUTE_MODELS,	/* /v1/models */
	SFS_CTL_ROUTE_SOURCES,	/* /v1/sources */
	SFS_CTL_ROUTE_OTHER,	/* the rest (health, connect, announce) */
	SFS_CTL_ROUTES
};

/* sfs_control_traffic_route - sfs_control_traffic's bytes received and
 * sent for one route (@route below SFS_CTL_ROUTES, else 0s); the
 * routes' sums are sfs_control_traffic's.  Thread safe. */
void sfs_control_traffic_route(enum sfs_ctl_route route, uint64_t *rx,
			       uint64_t *tx);

/* sfs_control_route_name - @route's short name ("holdings", ...)
 * [static]. */
const char *sfs_control_route_name(enum sfs_ctl_route route);

/* sfs_control_init - process-wide setup; call once before threads. */
int sfs_control_init(void);

/*
 * sfs_control_keep - from now on the calling thread's requests reuse
 * one libcurl handle, so a connection to a host it asks again is kept
 * open between requests (HTTP keep-alive; for TLS, no handshake per
 * request).  For threads that ask the same host often (a source's
 * poller): others open a connection per request, so a burst of them
 * does not leave one open connection per thread at the server.
 * sfs_control_keep_end - close the thread's handle and connections
 * (call before the thread ends; no-op without sfs_control_keep).
 * Thread safe: each acts on its calling thread only.
 */
void sfs_control_keep(void);
void sfs_control_keep_end(void);

#endif /* SFS_CONTROL_H */
