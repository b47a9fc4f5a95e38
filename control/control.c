/* SPDX-License-Identifier: MIT */
#include "control.h"

#include "common/log.h"
#include "common/util.h"
#include "control/auth.h"
#include "metadata/manifest.h"
#include "control/sign.h"
#include "control/tls.h"
#include "transports/transport.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

struct sfs_control_cred {
	struct sfs_auth *auth; /* NULL: no token */
	int tls;
	char *ca;		   /* NULL: the system's store */
	char pin[SFS_TLS_PIN_MAX]; /* "": none */
	struct sfs_trust *trust;   /* NULL: manifests need no signature */
};

int sfs_control_cred_new(const struct sfs_control_cred_cfg *cfg,
			 struct sfs_control_cred **out, char *err,
			 size_t errlen)
{
	struct sfs_control_cred *c = calloc(1, sizeof(*c));
	int rc = -ENOMEM;

	if (!c)
		goto err_free;
	c->tls = cfg->https || cfg->tls_ca || cfg->tls_pin;
	/* libcurl reads the CA file at each connection: who may change it
	 * decides which seeds are trusted. */
	if (cfg->tls_ca) {
		struct stat st;
		int fd = sfs_auth_open_anchor(cfg->tls_ca, "--tls-ca", &st, err,
					      errlen);
		if (fd < 0) {
			rc = fd;
			goto err_free;
		}
		close(fd);
		if (!(c->ca = strdup(cfg->tls_ca))) {
			rc = -ENOMEM;
			goto err_free;
		}
	}
	if (cfg->tls_pin &&
	    (rc = sfs_tls_parse_pin(cfg->tls_pin, c->pin, sizeof(c->pin), err,
				    errlen)))
		goto err_free;
	if (cfg->token_file &&
	    (rc = sfs_auth_load(cfg->token_file, "--token-file", &c->auth, err,
				errlen)))
		goto err_free;
	if (cfg->trust_key &&
	    (rc = sfs_trust_load(cfg->trust_key, &c->trust, err, errlen)))
		goto err_free;
	*out = c;
	return 0;

err_free:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	sfs_control_cred_free(c);
	return rc;
}

void sfs_control_cred_free(struct sfs_control_cred *c)
{
	if (!c)
		return;
	sfs_auth_free(c->auth);
	sfs_trust_free(c->trust);
	free(c->ca);
	free(c);
}

const struct sfs_trust *sfs_control_cred_trust(const struct sfs_control_cred *c)
{
	return c ? c->trust : NULL;
}

struct sfs_auth *sfs_control_cred_auth(const struct sfs_control_cred *c)
{
	return c ? c->auth : NULL;
}

int sfs_control_cred_tls(const struct sfs_control_cred *c)
{
	return c && c->tls;
}

void sfs_control_cred_describe(const struct sfs_control_cred *c, char *buf,
			       size_t len)
{
	int tls = sfs_control_cred_tls(c);
	snprintf(buf, len, "%s%s; %s%s%s%s%s",
		 c && c->auth ? "token " : "no token",
		 c && c->auth ? sfs_auth_path(c->auth) : "",
		 !tls	    ? "no tls"
		 : c->ca    ? "tls, ca "
		 : !*c->pin ? "tls, the system's CAs"
			    : "tls",
		 tls && c->ca ? c->ca : "", tls && *c->pin ? ", pin " : "",
		 tls && *c->pin ? c->pin : "", "");
}

int sfs_control_parse_seeds(const char *list, const char *what, char **out,
			    size_t max, size_t *n, int *https, char *err,
			    size_t errlen)
{
	char *dup = strdup(list), *save = NULL;
	int rc = 0;

	if (!dup)
		return -ENOMEM;
	for (char *t = strtok_r(dup, ",", &save); t && !rc;
	     t = strtok_r(NULL, ",", &save)) {
		char h[256], p[16];
		int tls = -1;
		if (!strncmp(t, "https://", 8))
			tls = 1, t += 8;
		else if (!strncmp(t, "http://", 7))
			tls = 0, t += 7;
		size_t l = strlen(t);
		if (l && t[l - 1] == '/')
			t[l - 1] = '\0';
		if (sfs_parse_hostport(t, h, sizeof(h), p, sizeof(p)) || !*h ||
		    !*p) {
			snprintf(err, errlen,
				 "%s '%.300s' is not [https://]HOST:PORT", what,
				 t);
			rc = -EINVAL;
		} else if (tls >= 0 && *https >= 0 && tls != *https) {
			snprintf(err, errlen,
				 "%s: every seed is http:// or every one "
				 "https://, not some of each",
				 what);
			rc = -EINVAL;
		} else if (*n == max) {
			snprintf(err, errlen, "%s: at most %zu seeds", what,
				 max);
			rc = -E2BIG;
		} else if (!(out[*n] = strdup(t))) {
			rc = -ENOMEM;
		} else {
			(*n)++;
			if (tls >= 0)
				*https = tls;
		}
	}
	free(dup);
	return rc;
}

int sfs_http_body_add(struct sfs_http_body *b, const char *p, size_t n)
{
	if (b->len + n > b->limit) {
		b->too_big = 1;
		return -E2BIG;
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *q = realloc(b->buf, cap);
		if (!q)
			return -ENOMEM;
		b->buf = q;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, p, n);
	b->len += n;
	b->buf[b->len] = '\0';
	return 0;
}

/* A gzipped answer may unpack to up to the cap, but not to more than
 * this many times what crossed once it is past the floor: a 300 KB
 * "bomb" is refused at tens of MB, not kept up to a 256 MiB cap.  Real
 * answers unpack to 1-3 x (a manifest's hex checksums about 2 x); a
 * manifest of a model of zeros at small checksum chunks could go past
 * it, past the floor only (2 million checksums): refused, it is asked
 * again without gzip (request()).  CURLOPT_MAXFILESIZE weighs only
 * what crosses (Content-Length is the gzipped one). */
#define UNPACK_FLOOR (32u << 20)
#define UNPACK_RATIO 256

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct sfs_http_body *b = arg;
	size_t k = size * n;
	curl_off_t dl = 0;
	if (b->curl && b->len + k > UNPACK_FLOOR &&
	    curl_easy_getinfo(b->curl, CURLINFO_SIZE_DOWNLOAD_T, &dl) ==
		    CURLE_OK &&
	    (uint64_t)(b->len + k) / UNPACK_RATIO >
		    (uint64_t)(dl > 0 ? dl : 0)) {
		b->bomb = 1;
		return 0;
	}
	return sfs_http_body_add(b, p, k) ? 0 : k;
}

/* Answers come as they are or gzipped, once: libcurl would decode any
 * Content-Encoding it knows (br, zstd, stacked ones) whatever was
 * asked, with buffers of its own outside the caps. */
static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct sfs_http_body *b = arg;
	size_t k = size * n;
	static const char name[] = "content-encoding:";
	if (k > sizeof(name) - 1 && !strncasecmp(p, name, sizeof(name) - 1)) {
		const char *v = p + sizeof(name) - 1, *end = p + k;
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		while (end > v && (end[-1] == '\r' || end[-1] == '\n' ||
				   end[-1] == ' ' || end[-1] == '\t'))
			end--;
		size_t vn = (size_t)(end - v);
		if (!(vn == 4 && !strncasecmp(v, "gzip", 4)) &&
		    !(vn == 8 && !strncasecmp(v, "identity", 8)) && vn) {
			b->bad_encoding = 1;
			return 0;
		}
	}
	return k;
}

int sfs_control_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) ? -EIO : 0;
}

/* curl's word on a TLS failure, as ours. */
static int tls_failure(CURLcode cc)
{
	switch (cc) {
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_CACERT_BADFILE:
		return -EACCES;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
		return -EPROTO;
	default:
		return 0;
	}
}

/* The calling thread's kept handle (sfs_control_keep), or NULL. */
static __thread CURL *kept;
static __thread int keeping;

void sfs_control_keep(void)
{
	keeping = 1;
}

void sfs_control_keep_end(void)
{
	if (kept)
		curl_easy_cleanup(kept);
	kept = NULL;
	keeping = 0;
}

/* HTTP bytes this process sent and received as a client: what the
 * control plane costs (sfs_control_traffic), by route. */
static _Atomic uint64_t traffic_rx[SFS_CTL_ROUTES], traffic_tx[SFS_CTL_ROUTES];

static const char *const route_names[SFS_CTL_ROUTES] = {
	[SFS_CTL_ROUTE_HOLDINGS] = "holdings",
	[SFS_CTL_ROUTE_MANIFEST] = "manifest",
	[SFS_CTL_ROUTE_MODELS] = "models",
	[SFS_CTL_ROUTE_SOURCES] = "sources",
	[SFS_CTL_ROUTE_OTHER] = "other",
};

/* @url's route: the word after its first "/v1/". */
static enum sfs_ctl_route route_of(const char *url)
{
	const char *p = strstr(url, "/v1/");
	if (p) {
		p += 4;
		for (int i = 0; i < SFS_CTL_ROUTE_OTHER; i++) {
			size_t n = strlen(route_names[i]);
			if (!strncmp(p, route_names[i], n) &&
			    (p[n] == '?' || p[n] == '/' || !p[n]))
				return (enum sfs_ctl_route)i;
		}
	}
	return SFS_CTL_ROUTE_OTHER;
}

static void count_traffic(CURL *h, const char *url)
{
	curl_off_t dl = 0, ul = 0;
	long hs = 0, rs = 0;
	enum sfs_ctl_route r = route_of(url);
	curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &dl);
	curl_easy_getinfo(h, CURLINFO_HEADER_SIZE, &hs);
	curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &ul);
	curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &rs);
	atomic_fetch_add(&traffic_rx[r], (uint64_t)(dl > 0 ? dl : 0) +
						 (uint64_t)(hs > 0 ? hs : 0));
	atomic_fetch_add(&traffic_tx[r], (uint64_t)(ul > 0 ? ul : 0) +
						 (uint64_t)(rs > 0 ? rs : 0));
}

void sfs_control_traffic(uint64_t *rx, uint64_t *tx)
{
	*rx = *tx = 0;
	for (int i = 0; i < SFS_CTL_ROUTES; i++) {
		*rx += atomic_load(&traffic_rx[i]);
		*tx += atomic_load(&traffic_tx[i]);
	}
}

void sfs_control_traffic_route(enum sfs_ctl_route route, uint64_t *rx,
			       uint64_t *tx)
{
	int ok = (unsigned int)route < SFS_CTL_ROUTES;
	*rx = ok ? atomic_load(&traffic_rx[route]) : 0;
	*tx = ok ? atomic_load(&traffic_tx[route]) : 0;
}

const char *sfs_control_route_name(enum sfs_ctl_route route)
{
	return (unsigned int)route < SFS_CTL_ROUTES ? route_names[route] : "?";
}

/* sfs_control_abort: every exchange of this process ends (libcurl asks
 * on_abort about once a second while a peer is silent, and at once
 * while bytes move). */
static atomic_int aborting;

void sfs_control_abort(void)
{
	atomic_store(&aborting, 1);
}

static int on_abort(void *arg, curl_off_t a, curl_off_t b, curl_off_t c,
		    curl_off_t d)
{
	(void)arg, (void)a, (void)b, (void)c, (void)d;
	return atomic_load(&aborting) ? 1 : 0;
}

/* One HTTP exchange; @body NULL for GET; from local address @from
 * (numeric; NULL: the kernel's choice).  *code: the HTTP status. */
static int exchange(struct sfs_control_cred *cred, const char *url,
		    const char *from, const void *body, size_t blen,
		    unsigned int timeout_ms, struct sfs_http_body *b,
		    long *code, char *err, size_t errlen)
{
	char cerr[CURL_ERROR_SIZE] = "", auth[SFS_AUTH_TOKEN_MAX + 64];
	char iface[INET6_ADDRSTRLEN + 8];
	struct curl_slist *hdr = NULL, *h2;
	int tls = sfs_control_cred_tls(cred), rc = 0;
	CURLcode cc = CURLE_OK;
	CURL *h;

	if (keeping && kept) {
		h = kept;
		curl_easy_reset(h); /* options go; its connections stay */
	} else if (!(h = curl_easy_init())) {
		return -ENOMEM;
	}
	if (keeping)
		kept = h;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
	if (atomic_load(&aborting)) {
		snprintf(err, errlen, "%s: not asked (the process is stopping)",
			 url);
		rc = -ECANCELED;
		goto out;
	}
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_abort);
	/* Answers may come gzipped (ctlsrv.c): what is counted
	 * (count_traffic) is the bytes that crossed, the cap below and in
	 * on_data holds for what they unpack to. */
	if (!b->plain)
		curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip");
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, b);
	b->curl = h;
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	/* An answer that says it is larger than the cap is refused before
	 * a byte of it is kept (one that does not say stops at the cap). */
	if (b->limit && b->limit < (size_t)INT64_MAX)
		curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE,
				 (curl_off_t)b->limit);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, tls ? "https" : "http");
	curl_easy_setopt(h, CURLOPT_PROXY, ""); /* never via a proxy */
	if (from) {
		/* "host!": an address to bind, never an interface's name. */
		snprintf(iface, sizeof(iface), "host!%s", from);
		curl_easy_setopt(h, CURLOPT_INTERFACE, iface);
	}
	if (tls) {
		if (sfs_tls_curl_limit(h)) {
			snprintf(err, errlen,
				 "%s: this libcurl cannot be held to TLS 1.2 "
				 "or newer",
				 url);
			rc = -EPROTONOSUPPORT;
			goto out;
		}
		if (cred->ca)
			curl_easy_setopt(h, CURLOPT_CAINFO, cred->ca);
		if (*cred->pin) {
			curl_easy_setopt(h, CURLOPT_PINNEDPUBLICKEY, cred->pin);
			if (!cred->ca) { /* the pin is the trust */
				curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
				curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
			}
		}
	}
	if (cred && cred->auth) {
		if (sfs_auth_header(cred->auth, auth, sizeof(auth)) ||
		    !(h2 = curl_slist_append(hdr, auth))) {
			rc = -ENOMEM;
			goto out;
		}
		hdr = h2;
	}
	if (body) {
		if (!(h2 = curl_slist_append(
			      hdr, "Content-Type: application/octet-stream"))) {
			rc = -ENOMEM;
			goto out;
		}
		hdr = h2;
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)blen);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code);
	count_traffic(h, url);
	if (b->bad_encoding) {
		snprintf(err, errlen,
			 "%s: an answer in a Content-Encoding other than gzip",
			 url);
		rc = -EPROTO;
	} else if (b->bomb) {
		curl_off_t dl = 0;
		curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &dl);
		snprintf(err, errlen,
			 "%s: response unpacks to more than %d times the "
			 "%" PRId64 " bytes that came",
			 url, UNPACK_RATIO, (int64_t)dl);
		rc = -E2BIG;
	} else if (b->too_big || cc == CURLE_FILESIZE_EXCEEDED) {
		snprintf(err, errlen, "%s: response larger than %zu bytes", url,
			 b->limit);
		rc = -E2BIG;
	} else if (cc != CURLE_OK) {
		int t = tls_failure(cc);
		snprintf(err, errlen, "%s: %s%s%s", url, t ? "TLS: " : "",
			 *cerr ? cerr : curl_easy_strerror(cc),
			 !tls && cc == CURLE_GOT_NOTHING
				 ? " (a TLS control port? give https:// or "
				   "--tls-ca)"
				 : "");
		rc = t				       ? t
		     : cc == CURLE_OPERATION_TIMEDOUT  ? -ETIMEDOUT
		     : cc == CURLE_COULDNT_CONNECT     ? -ECONNREFUSED
		     : cc == CURLE_INTERFACE_FAILED    ? -EADDRNOTAVAIL
		     : cc == CURLE_ABORTED_BY_CALLBACK ? -ECANCELED
						       : -EIO;
	}
out:
	b->curl = NULL;
	if (h != kept) {
		curl_easy_cleanup(h);
	} else if (cc != CURLE_OK || rc) {
		/* A connection in doubt is not asked again. */
		curl_easy_cleanup(h);
		kept = NULL;
	} else {
		/* Nothing of this request stays set on the kept handle: its
		 * headers and buffers are gone when this returns. */
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
		curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, NULL);
	}
	/* The header copies are libcurl's: wipe ours and theirs. */
	for (h2 = hdr; h2; h2 = h2->next)
		explicit_bzero(h2->data, strlen(h2->data));
	curl_slist_free_all(hdr);
	explicit_bzero(auth, sizeof(auth));
	return rc;
}

static int request(struct sfs_control_cred *cred, const char *from,
		   const char *hostport, const char *path, const void *body,
		   size_t blen, unsigned int timeout_ms, size_t cap, char **out,
		   size_t *len, char *err, size_t errlen)
{
	struct sfs_http_body b = {.limit = cap};
	/* A model name escapes to 3 x 255 bytes: room for that, a host
	 * name and the query; a longer one is refused, never cut. */
	char url[2048];
	long code = 0;
	int rc, again = 1;

	int ulen = snprintf(url, sizeof(url), "%s://%s%s",
			    sfs_control_cred_tls(cred) ? "https" : "http",
			    hostport, path);
	if (ulen < 0 || (size_t)ulen >= sizeof(url)) {
		snprintf(err, errlen, "%s: a URL of %d bytes (at most %zu)",
			 hostport, ulen, sizeof(url) - 1);
		return -ENAMETOOLONG;
	}
retry:
	rc = exchange(cred, url, from, body, blen, timeout_ms, &b, &code, err,
		      errlen);
	if (rc == -E2BIG && b.bomb && !b.plain) {
		/* Past the unpack ratio: once more as it is (a manifest of
		 * zeros compresses that well; a bomb meets the caps). */
		SFS_LOG(SFS_INFO, "control", "%s; asking it again ungzipped",
			err);
		free(b.buf);
		b = (struct sfs_http_body){.limit = cap, .plain = 1};
		goto retry;
	}
	if (!rc && code == 401 && cred && cred->auth && again) {
		/* A rotated token: the file may hold the new one. */
		int changed = 0;
		char why[512];
		again = 0;
		if (!sfs_auth_reload(cred->auth, &changed, why, sizeof(why)) &&
		    changed) {
			SFS_LOG(SFS_INFO, "control",
				"%s refused the token; %s holds a new one: "
				"trying it",
				hostport, sfs_auth_path(cred->auth));
			free(b.buf);
			b = (struct sfs_http_body){.limit = cap,
						   .plain = b.plain};
			goto retry;
		}
	}
	if (!rc && code == 401) {
		if (cred && cred->auth)
			snprintf(err, errlen,
				 "%s: HTTP status 401: the seed refused the "
				 "token in %s",
				 url, sfs_auth_path(cred->auth));
		else
			snprintf(
				err, errlen,
				"%s: HTTP status 401: the seed needs a token; "
				"give --token-file FILE (or SEEDFS_TOKEN_FILE)",
				url);
		rc = -EACCES;
	} else if (!rc && code != 200) {
		/* The seed explains itself in a short text body. */
		size_t n = b.len;
		while (n && (b.buf[n - 1] == '\n' || b.buf[n - 1] == '\r'))
			n--;
		snprintf(err, errlen, "%s: HTTP status %ld%s%.*s", url, code,
			 n ? ": " : "", (int)SFS_MIN(n, 200), n ? b.buf : "");
		rc = -EPROTO;
	} else if (!rc && !b.buf) {
		snprintf(err, errlen, "%s: empty response", url);
		rc = -EPROTO;
	}
	if (rc) {
		free(b.buf);
		return rc;
	}
	*out = b.buf;
	*len = b.len;
	return 0;
}

int sfs_control_get(struct sfs_control_cred *cred, const char *hostport,
		    const char *path, unsigned int timeout_ms, size_t cap,
		    char **body, size_t *len, char *err, size_t errlen)
{
	return request(cred, NULL, hostport, path, NULL, 0, timeout_ms, cap,
		       body, len, err, errlen);
}

int sfs_control_post(struct sfs_control_cred *cred, const char *hostport,
		     const char *path, const void *body, size_t len,
		     unsigned int timeout_ms, size_t cap, char **resp,
		     size_t *rlen, char *err, size_t errlen)
{
	return request(cred, NULL, hostport, path, body, len, timeout_ms, cap,
		       resp, rlen, err, errlen);
}

int sfs_control_post_from(struct sfs_control_cred *cred, const char *from,
			  const char *hostport, const char *path,
			  const void *body, size_t len, unsigned int timeout_ms,
			  size_t cap, char **resp, size_t *rlen, char *err,
			  size_t errlen)
{
	return request(cred, from, hostport, path, body, len, timeout_ms, cap,
		       resp, rlen, err, errlen);
}

/* Make the seed readable through @x: its address, or the exchange. */
int sfs_control_connect_peer(struct sfs_control_cred *cred,
			     const char *hostport, struct sfs_xport *x,
			     const struct sfs_endpoint *ep,
			     unsigned int timeout_ms, uint64_t *peer, char *err,
			     size_t errlen)
{
	uint8_t hello[SFS_XPORT_HELLO_MAX];
	size_t hl = sizeof(hello), rl;
	char path[128], *reply;
	int rc;

	/* A peer that publishes what it needs and differs: the provider
	 * would refuse the connection with no word of why. */
	struct sfs_xport_info in;
	sfs_xport_info(x, &in);
	if (ep->compat[0] && strcmp(ep->compat, in.compat)) {
		snprintf(err, errlen,
			 "its %s endpoint runs with %s, this host with %s: "
			 "libfabric does not connect the two (set the same "
			 "on both)",
			 ep->protocol, ep->compat,
			 in.compat[0] ? in.compat : "no such settings");
		return -EPROTO;
	}
	if (!sfs_xport_needs_hello(x)) {
		rc = sfs_xport_peer_add(x, ep->addr, ep->addr_len, peer);
		if (rc)
			snprintf(err, errlen,
				 "the seed's fabric address cannot be used "
				 "with protocol %s: %s",
				 ep->protocol, strerror(-rc));
		return rc;
	}
	rc = sfs_xport_hello(x, hello, &hl);
	if (rc) {
		snprintf(err, errlen,
			 "protocol %s: cannot start a connection: "
			 "%s",
			 ep->protocol, strerror(-rc));
		return rc;
	}
	snprintf(path, sizeof(path), "/v1/connect?protocol=%s", ep->protocol);
	rc = sfs_control_post(cred, hostport, path, hello, hl, timeout_ms,
			      SFS_XPORT_HELLO_MAX, &reply, &rl, err, errlen);
	if (rc) {
		/* No answer: what the hello set up goes, or every retry
		 * would leave a queue pair behind. */
		sfs_xport_hello_abort(x, hello, hl);
		return rc;
	}
	rc = sfs_xport_peer_add(x, reply, rl, peer);
	free(reply);
	if (rc) {
		sfs_xport_hello_abort(x, hello, hl);
		snprintf(err, errlen,
			 "protocol %s: the seed at %s answered, but its "
			 "connection data is unusable: %s",
			 ep->protocol, hostport, strerror(-rc));
	}
	return rc;
}

int sfs_control_reconnect(struct sfs_control_cred *cred, const char *hostport,
			  struct sfs_xport *x, const struct sfs_endpoint *ep,
			  unsigned int timeout_ms, uint64_t *peer, char *err,
			  size_t errlen)
{
	if (!sfs_xport_needs_hello(x)) {
		/* The peer stays; its next read connects again. */
		int rc = sfs_xport_peer_reset(x, *peer);
		if (rc)
			snprintf(err, errlen, "protocol %s: cannot reset: %s",
				 ep->protocol, strerror(-rc));
		return rc;
	}
	/* A queue pair of its own: torn down, and made again through the
	 * control port. */
	sfs_xport_peer_remove(x, *peer);
	uint64_t fresh;
	int rc = sfs_control_connect_peer(cred, hostport, x, ep, timeout_ms,
					  &fresh, err, errlen);
	if (!rc)
		*peer = fresh;
	return rc;
}

static int open_one(struct sfs_control_cred *cred, const char *hostport,
		    const struct sfs_manifest *m, size_t i,
		    unsigned int timeout_ms, struct sfs_xport **x,
		    uint64_t *peer, char *err, size_t errlen)
{
	/* Bound to the interface that reaches the seed: the listener an
	 * rxm endpoint opens for connections back is there alone. */
	char node[64];
	int routed =
		!sfs_xport_route_node(m->eps[i].protocol, m->eps[i].addr,
				      m->eps[i].addr_len, node, sizeof(node));
	struct sfs_xport_cfg xc = {.protocol = m->eps[i].protocol,
				   .role = SFS_XPORT_REPLICA,
				   .node = routed ? node : NULL,
				   .timeout_ms = timeout_ms};
	int rc = sfs_xport_open(&xc, x, err, errlen);
	if (rc)
		return rc;
	rc = sfs_control_connect_peer(cred, hostport, *x, &m->eps[i],
				      timeout_ms, peer, err, errlen);
	if (rc) {
		sfs_xport_close(*x);
		*x = NULL;
	}
	return rc;
}

int sfs_control_open(struct sfs_control_cred *cred, const char *hostport,
		     const struct sfs_manifest *m, const char *protocol,
		     unsigned int timeout_ms, struct sfs_xport **x, size_t *ep,
		     uint64_t *peer, char *err, size_t errlen)
{
	char served[SFS_MF_MAX_ENDPOINTS * 32];
	int rc = -ENODEV;

	sfs_manifest_protocols(m, served, sizeof(served));
	if (protocol && strcmp(protocol, SFS_XPORT_AUTO)) {
		ssize_t i = sfs_manifest_endpoint(m, protocol);
		if (i < 0) {
			snprintf(err, errlen,
				 "this replica asks for protocol %s, but the "
				 "seed at %s serves %s; use --protocol %s or "
				 "start the seed with --protocol %s",
				 protocol, hostport, served, m->eps[0].protocol,
				 protocol);
			return -EPROTONOSUPPORT;
		}
		*ep = (size_t)i;
		return open_one(cred, hostport, m, *ep, timeout_ms, x, peer,
				err, errlen);
	}
	/* The seed's order is its preference: the first that works here. */
	char why[1024] = "";
	size_t o = 0;
	for (size_t i = 0; i < m->neps; i++) {
		char e[512];
		rc = open_one(cred, hostport, m, i, timeout_ms, x, peer, e,
			      sizeof(e));
		if (!rc) {
			*ep = i;
			if (o)
				SFS_LOG(SFS_INFO, "mount",
					"using protocol %s; %s",
					m->eps[i].protocol, why);
			return 0;
		}
		SFS_LOG(SFS_INFO, "mount", "not using protocol %s: %s",
			m->eps[i].protocol, e);
		int k = snprintf(why + o, sizeof(why) - o, "%s%s",
				 o ? "; " : "", e);
		if (k > 0 && (size_t)k < sizeof(why) - o)
			o += (size_t)k;
	}
	if (m->neps == 1)
		snprintf(err, errlen, "%s", why);
	else
		snprintf(err, errlen,
			 "none of the protocols the seed at %s serves (%s) "
			 "works here: %s",
			 hostport, served, why);
	return rc;
}

int sfs_control_remote_key(struct sfs_xport *x, const struct sfs_remote *r,
			   uint64_t *key)
{
	if (!r->raw_len) {
		*key = r->key;
		return 0;
	}
	return sfs_xport_key_import(x, r->raddr, r->raw, r->raw_len, key);
}

int sfs_control_remote_key_raw(const struct sfs_remote *r)
{
	return r->raw_len != 0;
}
