/* SPDX-License-Identifier: MIT */
/*
 * registry.c - etcd v3 through its JSON gateway: requests with a bound,
 * endpoints tried in turn, the auth token taken again when etcd says it
 * expired, and the watch stream split into its messages.
 */
#include "control/registry.h"
#include "control/tls.h"

#include "common/log.h"
#include "common/util.h"
#include "control/auth.h"
#include "control/control.h"
#include "control/ctlsrv.h"
#include "metadata/jsonlim.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ANSWER_MAX (64u << 20) /* a range answer */
#define MSG_MAX (16u << 20)    /* one watch message */
#define HOSTPORT_MAX 272

struct sfs_reg {
	char *url;
	char prefix[256];
	int tls;
	size_t nep;
	char eps[SFS_REG_ENDPOINTS_MAX][HOSTPORT_MAX];
	char *ca_file;
	char user[256];
	char *pass; /* NULL: no authentication */
	unsigned int timeout_ms;
	pthread_mutex_t lock;
	size_t cur;	   /* protected by lock: the endpoint to try first */
	char *token;	   /* protected by lock: etcd's auth token, or NULL */
	char local_ip[64]; /* protected by lock: ours, as etcd saw it */
};

/* ---- the answers' codec ---- */

/* An int64 as the gateway writes it: a decimal string (or a number). */
static int i64(json_t *v, int64_t *out)
{
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	const char *s = json_string_value(v);
	if (!s || !*s || json_string_length(v) > 20)
		return -1;
	char *end;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (errno || *end || end == s)
		return -1;
	*out = x;
	return 0;
}

/* A revision: an int64 of 0 or more that another can follow (the
 * caller watches from it + 1).  0; -1 when it is not an int64 or below 0
 * (@err: "WHERE: not an int64"), -2 at INT64_MAX (@err says so): etcd's
 * answers are not trusted to stop short of it. */
static int revision(json_t *v, int64_t *out, const char *where, char *err,
		    size_t errlen)
{
	if (!v || i64(v, out) || *out < 0) {
		snprintf(err, errlen, "%s: missing or not an int64", where);
		return -1;
	}
	if (*out == INT64_MAX) {
		snprintf(err, errlen,
			 "%s: %" PRId64 ", the last int64: no revision can "
			 "follow it",
			 where, *out);
		return -2;
	}
	return 0;
}

/* Base64 field @v decoded into [new] *out (NUL added); at most @cap
 * bytes.  A missing field is "" (etcd leaves out empty values). */
static int b64_field(json_t *v, size_t cap, char **out, size_t *len)
{
	const char *s = v ? json_string_value(v) : "";
	size_t n = s ? strlen(s) : 0;
	*out = NULL;
	if (!s || n > (cap + 2) / 3 * 4 || n % 4)
		return -1;
	char *b = malloc(n / 4 * 3 + 1);
	if (!b)
		return -1;
	if (sfs_b64_decode(s, n, b, len)) {
		free(b);
		return -1;
	}
	b[*len] = '\0';
	*out = b;
	return 0;
}

/* One kv object to @fn.  A key or value that cannot be taken (not
 * base64, over the caps) is delivered with @why set, so one hostile
 * record never stops a range or a watch. */
static int deliver(json_t *kv, enum sfs_reg_type type, sfs_reg_fn fn, void *arg,
		   const char *where, char *err, size_t errlen)
{
	struct sfs_reg_event e = {.type = type};
	char *key = NULL, *val = NULL, why[160] = "";
	int rc;

	if (!json_is_object(kv)) {
		snprintf(err, errlen, "%s: kv: not an object", where);
		return -EPROTO;
	}
	if (b64_field(json_object_get(kv, "key"), SFS_REG_KEY_MAX, &key,
		      &e.klen) ||
	    !e.klen || memchr(key, '\0', e.klen)) {
		free(key);
		key = NULL;
		snprintf(why, sizeof(why),
			 "key: missing, not base64, or over %u bytes",
			 SFS_REG_KEY_MAX);
	} else if (type == SFS_REG_PUT &&
		   b64_field(json_object_get(kv, "value"), SFS_REG_VALUE_MAX,
			     &val, &e.vlen)) {
		snprintf(why, sizeof(why), "value: not base64 or over %u bytes",
			 SFS_REG_VALUE_MAX);
	}
	json_t *mr = json_object_get(kv, "mod_revision");
	char what[64];
	snprintf(what, sizeof(what), "%s: mod_revision", where);
	if (mr && revision(mr, &e.mod_revision, what, err, errlen)) {
		free(key);
		free(val);
		return -EPROTO;
	}
	e.key = key ? key : "";
	e.value = val ? val : "";
	e.why = *why ? why : NULL;
	rc = fn(arg, &e);
	if (rc > 0)
		rc = 0;
	free(key);
	free(val);
	return rc;
}

/* @o's header.revision into *rev: 0, or -1 with @err ("@what:
 * header.revision: ..."). */
static int header_rev(json_t *o, int64_t *rev, const char *what, char *err,
		      size_t errlen)
{
	json_t *h = json_object_get(o, "header");
	char where[48];
	snprintf(where, sizeof(where), "%s: header.revision", what);
	if (!json_is_object(h)) {
		snprintf(err, errlen, "%s: missing or not an int64", where);
		return -1;
	}
	return revision(json_object_get(h, "revision"), rev, where, err, errlen)
		       ? -1
		       : 0;
}

int sfs_reg_parse_range(const char *body, size_t len, size_t max, sfs_reg_fn fn,
			void *arg, int64_t *rev, char *err, size_t errlen)
{
	json_t *o, *kvs, *kv;
	size_t i;
	int rc = -EPROTO;

	if (sfs_json_load(SFS_JSON_REG_ANSWER, body, len, 0, &o, err, errlen) ==
	    -E2BIG)
		goto out;
	if (!json_is_object(o)) {
		snprintf(err, errlen, "range: not a JSON object");
		goto out;
	}
	if (header_rev(o, rev, "range", err, errlen))
		goto out;
	kvs = json_object_get(o, "kvs");
	if (kvs && !json_is_array(kvs)) {
		snprintf(err, errlen, "range: kvs: not an array");
		goto out;
	}
	if (json_array_size(kvs) > max) {
		snprintf(err, errlen, "range: more than %zu keys", max);
		rc = -E2BIG;
		goto out;
	}
	rc = 0;
	json_array_foreach (kvs, i, kv) {
		char where[48];
		snprintf(where, sizeof(where), "range: kvs[%zu]", i);
		if ((rc = deliver(kv, SFS_REG_PUT, fn, arg, where, err,
				  errlen)))
			break;
	}
out:
	json_decref(o);
	return rc;
}

int sfs_reg_parse_watch(const char *msg, size_t len, sfs_reg_fn fn, void *arg,
			int64_t *next, int *created, int *canceled,
			int64_t *compact, char *err, size_t errlen)
{
	json_t *o, *res, *evs, *ev;
	size_t i;
	int rc = -EPROTO;
	int64_t rev;

	*created = *canceled = 0;
	*compact = 0;
	if (sfs_json_load(SFS_JSON_REG_WATCH, msg, len, 0, &o, err, errlen) ==
	    -E2BIG)
		goto out;
	if (!json_is_object(o)) {
		snprintf(err, errlen, "watch: not a JSON object");
		goto out;
	}
	res = json_object_get(o, "result");
	if (!json_is_object(res)) {
		json_t *e = json_object_get(o, "error");
		if (json_is_object(e))
			e = json_object_get(e, "message");
		if (!res && json_is_string(e)) {
			/* etcd's own error, in the stream */
			snprintf(err, errlen, "watch: %.300s",
				 json_string_value(e));
			rc = -EIO;
		} else {
			snprintf(err, errlen, "watch: result: not an object");
		}
		goto out;
	}
	/* A cancel may come without a revision in its header. */
	rev = 0;
	if (!json_is_true(json_object_get(res, "canceled")) &&
	    header_rev(res, &rev, "watch", err, errlen))
		goto out;
	*created = json_is_true(json_object_get(res, "created"));
	*canceled = json_is_true(json_object_get(res, "canceled"));
	json_t *cr = json_object_get(res, "compact_revision");
	if (cr && revision(cr, compact, "watch: compact_revision", err, errlen))
		goto out;
	if (*canceled) {
		const char *why = json_string_value(
			json_object_get(res, "cancel_reason"));
		snprintf(err, errlen, "watch canceled by etcd%s%.300s",
			 why ? ": " : "", why ? why : "");
		rc = 0;
		goto out;
	}
	evs = json_object_get(res, "events");
	if (evs && !json_is_array(evs)) {
		snprintf(err, errlen, "watch: events: not an array");
		goto out;
	}
	rc = 0;
	json_array_foreach (evs, i, ev) {
		const char *t = json_string_value(json_object_get(ev, "type"));
		char where[48];
		snprintf(where, sizeof(where), "watch: events[%zu]", i);
		/* The gateway leaves out the default: PUT. */
		if (t && strcmp(t, "PUT") && strcmp(t, "DELETE")) {
			snprintf(err, errlen, "%s: type: not PUT or DELETE",
				 where);
			rc = -EPROTO;
			break;
		}
		json_t *kv = json_object_get(ev, "kv");
		int64_t mr = 0;
		if ((rc = deliver(kv,
				  t && !strcmp(t, "DELETE") ? SFS_REG_DELETE
							    : SFS_REG_PUT,
				  fn, arg, where, err, errlen)))
			break;
		if (!i64(json_object_get(kv, "mod_revision"), &mr) &&
		    mr + 1 > *next)
			*next = mr + 1;
	}
	/* Nothing in it is older than its header: watch on after it. */
	if (!rc && rev + 1 > *next && json_array_size(evs))
		*next = rev + 1;
out:
	json_decref(o);
	return rc;
}

/* ---- opening ---- */

static int parse_url(struct sfs_reg *g, const char *url, char *err,
		     size_t errlen)
{
	const char *p;
	if (!strncmp(url, "etcd://", 7)) {
		p = url + 7;
	} else if (!strncmp(url, "etcds://", 8)) {
		p = url + 8;
		g->tls = 1;
	} else {
		snprintf(err, errlen,
			 "--registry %s: not etcd://HOST:PORT[,...][/PREFIX] "
			 "or etcds://...",
			 url);
		return -EINVAL;
	}
	const char *slash = strchr(p, '/');
	size_t hl = slash ? (size_t)(slash - p) : strlen(p);
	snprintf(g->prefix, sizeof(g->prefix), "%s", SFS_REG_PREFIX_DEFAULT);
	if (slash) {
		size_t n = strlen(slash);
		while (n > 1 && slash[n - 1] == '/')
			n--;
		if (n >= sizeof(g->prefix) || n < 2) {
			snprintf(err, errlen,
				 "--registry %s: the prefix is empty or over "
				 "%zu bytes",
				 url, sizeof(g->prefix) - 1);
			return -EINVAL;
		}
		memcpy(g->prefix, slash, n);
		g->prefix[n] = '\0';
	}
	char hosts[SFS_REG_ENDPOINTS_MAX * HOSTPORT_MAX];
	if (!hl || hl >= sizeof(hosts)) {
		snprintf(err, errlen, "--registry %s: no HOST:PORT", url);
		return -EINVAL;
	}
	memcpy(hosts, p, hl);
	hosts[hl] = '\0';
	char *save = NULL;
	for (char *t = strtok_r(hosts, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		char h[256], port[16];
		if (g->nep == SFS_REG_ENDPOINTS_MAX) {
			snprintf(err, errlen,
				 "--registry %s: more than %d endpoints", url,
				 SFS_REG_ENDPOINTS_MAX);
			return -EINVAL;
		}
		if (sfs_parse_hostport(t, h, sizeof(h), port, sizeof(port)) ||
		    !*h || !*port || strlen(t) >= HOSTPORT_MAX) {
			snprintf(
				err, errlen,
				"--registry %s: endpoint '%s' is not HOST:PORT",
				url, t);
			return -EINVAL;
		}
		snprintf(g->eps[g->nep++], HOSTPORT_MAX, "%s", t);
	}
	if (!g->nep) {
		snprintf(err, errlen, "--registry %s: no HOST:PORT", url);
		return -EINVAL;
	}
	return 0;
}

/* USER:PASSWORD on the first line of @path (a secret file:
 * sfs_auth_open_secret). */
static int read_auth(struct sfs_reg *g, const char *path, char *err,
		     size_t errlen)
{
	char buf[1024];
	struct stat st;
	int fd = sfs_auth_open_secret(path, "--registry-auth-file", &st, err,
				      errlen);
	if (fd < 0)
		return fd;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		n = 0;
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	char *colon = strchr(buf, ':');
	int rc = 0;
	if (!colon || colon == buf || !colon[1] ||
	    (size_t)(colon - buf) >= sizeof(g->user)) {
		snprintf(err, errlen,
			 "--registry-auth-file %s: its first line is not "
			 "USER:PASSWORD",
			 path);
		rc = -EINVAL;
	} else {
		memcpy(g->user, buf, (size_t)(colon - buf));
		g->user[colon - buf] = '\0';
		if (!(g->pass = strdup(colon + 1)))
			rc = -ENOMEM;
	}
	explicit_bzero(buf, sizeof(buf));
	return rc;
}

/* A password over etcd:// (no TLS) to another host crosses the network
 * in clear: said once, in one line. */
static void warn_plain(const struct sfs_reg *g)
{
	for (size_t i = 0; i < g->nep; i++) {
		char h[256], port[16];
		if (sfs_parse_hostport(g->eps[i], h, sizeof(h), port,
				       sizeof(port)) ||
		    sfs_ctlsrv_loopback(h))
			continue;
		SFS_LOG(SFS_WARN, "registry",
			"--registry-auth-file with %s: etcd's password crosses "
			"the network to %s in clear; use etcds:// (TLS)",
			g->url, g->eps[i]);
		return;
	}
}

int sfs_reg_open(const struct sfs_reg_cfg *cfg, struct sfs_reg **out, char *err,
		 size_t errlen)
{
	struct sfs_reg *g = calloc(1, sizeof(*g));
	int rc = -ENOMEM;

	*out = NULL;
	if (!g || !(g->url = strdup(cfg->url))) {
		snprintf(err, errlen, "out of memory");
		goto err_free;
	}
	pthread_mutex_init(&g->lock, NULL);
	g->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 5000;
	if ((rc = parse_url(g, cfg->url, err, errlen)))
		goto err_free;
	if (cfg->ca_file) {
		if (!g->tls) {
			snprintf(err, errlen,
				 "--registry-ca is for etcds:// (TLS); the "
				 "registry is %s",
				 cfg->url);
			rc = -EINVAL;
			goto err_free;
		}
		if (access(cfg->ca_file, R_OK)) {
			rc = -errno;
			snprintf(err, errlen, "--registry-ca %s: %s",
				 cfg->ca_file, strerror(errno));
			goto err_free;
		}
		if (!(g->ca_file = strdup(cfg->ca_file))) {
			rc = -ENOMEM;
			goto err_free;
		}
	}
	if (cfg->auth_file && (rc = read_auth(g, cfg->auth_file, err, errlen)))
		goto err_free;
	if (cfg->auth_file && !g->tls)
		warn_plain(g);
	*out = g;
	return 0;
err_free:
	sfs_reg_free(g);
	return rc;
}

void sfs_reg_free(struct sfs_reg *g)
{
	if (!g)
		return;
	if (g->pass) {
		explicit_bzero(g->pass, strlen(g->pass));
		free(g->pass);
	}
	if (g->token) {
		explicit_bzero(g->token, strlen(g->token));
		free(g->token);
	}
	pthread_mutex_destroy(&g->lock);
	free(g->ca_file);
	free(g->url);
	free(g);
}

const char *sfs_reg_prefix(const struct sfs_reg *g)
{
	return g->prefix;
}

const char *sfs_reg_url(const struct sfs_reg *g)
{
	return g->url;
}

int sfs_reg_local_ip(struct sfs_reg *g, char *buf, size_t len)
{
	pthread_mutex_lock(&g->lock);
	int rc = *g->local_ip ? 0 : -ENOENT;
	if (!rc) {
		int v6 = strchr(g->local_ip, ':') != NULL;
		snprintf(buf, len, "%s%s%s", v6 ? "[" : "", g->local_ip,
			 v6 ? "]" : "");
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

int sfs_reg_model_key(const struct sfs_reg *g, const char *name,
		      const char *kind, const char *control, char *buf,
		      size_t len)
{
	int n = snprintf(buf, len, "%s/models/%s/%s/%s", g->prefix, name, kind,
			 control);
	return n < 0 || (size_t)n >= len || (size_t)n > SFS_REG_KEY_MAX
		       ? -ENAMETOOLONG
		       : 0;
}

void sfs_reg_models_prefix(const struct sfs_reg *g, char *buf, size_t len)
{
	snprintf(buf, len, "%s/models/", g->prefix);
}

/* ---- requests ---- */

struct body {
	struct sfs_http_body h;
	/* A watch: each complete line to @line. */
	int (*line)(void *arg, const char *s, size_t n);
	void *line_arg;
	int line_rc;
	int (*stop)(void *);
	void *stop_arg;
	int stopped;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct body *bd = arg;
	struct sfs_http_body *b = &bd->h;
	size_t k = size * n;

	if (sfs_http_body_add(b, p, k))
		return 0;
	if (!bd->line)
		return k;
	/* The gateway ends each message of a stream with a newline. */
	char *nl;
	size_t off = 0;
	while ((nl = memchr(b->buf + off, '\n', b->len - off))) {
		size_t l = (size_t)(nl - (b->buf + off));
		if (l &&
		    (bd->line_rc = bd->line(bd->line_arg, b->buf + off, l)))
			return 0;
		off += l + 1;
	}
	memmove(b->buf, b->buf + off, b->len - off);
	b->len -= off;
	b->buf[b->len] = '\0';
	return k;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c,
		       curl_off_t d)
{
	struct body *bd = arg;
	(void)a, (void)b, (void)c, (void)d;
	if (bd->stop && bd->stop(bd->stop_arg)) {
		bd->stopped = 1;
		return 1;
	}
	return 0;
}

/* A silent peer of a watch is noticed by TCP keepalive: 2 s idle, then
 * 3 probes a second apart. */
static int on_socket(void *arg, curl_socket_t fd, curlsocktype purpose)
{
	int cnt = 3;
	(void)arg, (void)purpose;
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	return CURL_SOCKOPT_OK;
}

/*
 * One POST of @req to endpoint @ep.  0 with *code (HTTP) and the body
 * in @b, or -errno for what kept it from being answered.
 */
static int exchange(struct sfs_reg *g, size_t ep, const char *route,
		    const char *req, const char *token, unsigned int timeout_ms,
		    struct body *b, long *code, char *err, size_t errlen)
{
	char url[HOSTPORT_MAX + 64], cerr[CURL_ERROR_SIZE] = "", auth[4200];
	struct curl_slist *hdr = NULL;
	CURL *h = curl_easy_init();
	int rc = 0;

	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	snprintf(url, sizeof(url), "%s://%s%s", g->tls ? "https" : "http",
		 g->eps[ep], route);
	hdr = curl_slist_append(NULL, "Content-Type: application/json");
	if (token) {
		snprintf(auth, sizeof(auth), "Authorization: %s", token);
		hdr = curl_slist_append(hdr, auth);
		explicit_bzero(auth, sizeof(auth));
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)SFS_MIN(g->timeout_ms, 5000u));
	if (timeout_ms)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, g->tls ? "https" : "http");
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, req);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 2L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 1L);
	curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, on_socket);
	if (g->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, g->ca_file);
	/* etcds://: TLS 1.2 or 1.3 and strong suites, as to seeds (tls.h). */
	if (g->tls && sfs_tls_curl_limit(h)) {
		snprintf(err, errlen,
			 "etcds://%s: this libcurl cannot be held to TLS 1.2 "
			 "or newer",
			 g->eps[ep]);
		rc = -EPROTONOSUPPORT;
		goto out;
	}
	if (b->stop) {
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, b);
	}
	CURLcode cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code);
	char *ip = NULL;
	if (*code && !curl_easy_getinfo(h, CURLINFO_LOCAL_IP, &ip) && ip &&
	    *ip) {
		pthread_mutex_lock(&g->lock);
		snprintf(g->local_ip, sizeof(g->local_ip), "%s", ip);
		pthread_mutex_unlock(&g->lock);
	}
	if (cc == CURLE_OK)
		goto out;
	if (b->stopped) {
		rc = -ECANCELED;
		snprintf(err, errlen, "stopped");
	} else if (b->line_rc) {
		rc = b->line_rc;
		/* @err is the line's */
	} else if (b->h.too_big) {
		rc = -E2BIG;
		snprintf(err, errlen, "%s: answer over %zu bytes", g->eps[ep],
			 b->h.limit);
	} else {
		switch (cc) {
		case CURLE_OPERATION_TIMEDOUT:
			rc = -ETIMEDOUT;
			break;
		case CURLE_COULDNT_CONNECT:
			rc = -ECONNREFUSED;
			break;
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CONNECT_ERROR:
		case CURLE_SSL_CERTPROBLEM:
			rc = -EACCES;
			break;
		default:
			rc = -EIO;
		}
		snprintf(err, errlen, "%s%s: %s", g->tls ? "etcds://" : "",
			 g->eps[ep], *cerr ? cerr : curl_easy_strerror(cc));
	}
out:
	curl_slist_free_all(hdr);
	curl_easy_cleanup(h);
	return rc;
}

/* etcd's error answer: its gRPC code as an errno, its message in @err. */
static int grpc_error(const char *body, size_t len, long code, char *err,
		      size_t errlen)
{
	json_t *o;
	char why[160];
	sfs_json_load(SFS_JSON_REG_ANSWER, body, len, 0, &o, why, sizeof(why));
	json_int_t c = json_integer_value(json_object_get(o, "code"));
	const char *m = json_string_value(json_object_get(o, "message"));
	if (!m)
		m = json_string_value(json_object_get(o, "error"));
	snprintf(err, errlen, "etcd: %.300s (HTTP %ld)", m ? m : "no message",
		 code);
	json_decref(o);
	switch (c) {
	case 5: /* NOT_FOUND */
		return -ENOENT;
	case 7:	 /* PERMISSION_DENIED */
	case 16: /* UNAUTHENTICATED */
		return -EACCES;
	case 11: /* OUT_OF_RANGE: compacted */
		return -ESTALE;
	case 3: /* INVALID_ARGUMENT: also a failed login, an empty user */
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* Log in: a new token in g->token.  Called without g->lock (the
 * exchange takes it); two threads may log in at once, the last token
 * stays. */
static int authenticate(struct sfs_reg *g, size_t ep, char *err, size_t errlen)
{
	json_t *req =
		json_pack("{s:s,s:s}", "name", g->user, "password", g->pass);
	char *s = req ? json_dumps(req, JSON_COMPACT) : NULL;
	struct body b = {.h.limit = 65536};
	long code = 0;
	int rc = -ENOMEM;
	json_decref(req);
	if (!s)
		goto out;
	rc = exchange(g, ep, "/v3/auth/authenticate", s, NULL, g->timeout_ms,
		      &b, &code, err, errlen);
	explicit_bzero(s, strlen(s));
	free(s);
	if (rc)
		goto out;
	if (code != 200) {
		grpc_error(b.h.buf, b.h.len, code, err, errlen);
		char why[400];
		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen,
			 "etcd refused user %s of --registry-auth-file: %s",
			 g->user, why);
		rc = -EACCES;
		goto out;
	}
	json_t *o;
	char why[160];
	sfs_json_load(SFS_JSON_REG_ANSWER, b.h.buf ? b.h.buf : "", b.h.len, 0,
		      &o, why, sizeof(why));
	const char *t = json_string_value(json_object_get(o, "token"));
	if (!t || strlen(t) > 4096) {
		snprintf(err, errlen, "etcd: authenticate: token missing");
		rc = -EPROTO;
	} else {
		char *tok = strdup(t);
		pthread_mutex_lock(&g->lock);
		free(g->token);
		g->token = tok;
		pthread_mutex_unlock(&g->lock);
		rc = tok ? 0 : -ENOMEM;
	}
	json_decref(o);
out:
	free(b.h.buf);
	return rc;
}

/*
 * @req to @route on the endpoint that answers (from the one that did
 * last), logging in first when needed and again once when the token
 * expired.  @b holds the answer (HTTP 200), or -errno with @err.
 */
static int post(struct sfs_reg *g, const char *route, const char *req,
		unsigned int timeout_ms, struct body *b, char *err,
		size_t errlen)
{
	int rc = -EIO, relogged = 0;
	pthread_mutex_lock(&g->lock);
	size_t first = g->cur;
	pthread_mutex_unlock(&g->lock);

	for (size_t i = 0; i < g->nep; i++) {
		size_t ep = (first + i) % g->nep;
		char *token = NULL;
	again:
		if (g->pass) {
			pthread_mutex_lock(&g->lock);
			int have = g->token != NULL;
			pthread_mutex_unlock(&g->lock);
			rc = have ? 0 : authenticate(g, ep, err, errlen);
			pthread_mutex_lock(&g->lock);
			token = rc || !g->token ? NULL : strdup(g->token);
			pthread_mutex_unlock(&g->lock);
			if (rc == -EACCES || rc == -EPROTO)
				return rc;
			if (rc)
				continue; /* this endpoint did not answer */
			if (!token)
				return -ENOMEM;
		}
		long code = 0;
		b->h.len = 0;
		rc = exchange(g, ep, route, req, token, timeout_ms, b, &code,
			      err, errlen);
		if (token) {
			explicit_bzero(token, strlen(token));
			free(token);
			token = NULL;
		}
		if (rc == -ECANCELED || rc == -E2BIG || rc == -EPROTO ||
		    (rc && b->line_rc))
			return rc;
		if (rc)
			continue; /* the next endpoint */
		pthread_mutex_lock(&g->lock);
		g->cur = ep;
		pthread_mutex_unlock(&g->lock);
		if (code == 200)
			return 0;
		rc = grpc_error(b->h.buf, b->h.len, code, err, errlen);
		if (rc == -EACCES && g->pass && !relogged) {
			/* Its token expired (etcd restarted, or its TTL). */
			relogged = 1;
			pthread_mutex_lock(&g->lock);
			free(g->token);
			g->token = NULL;
			pthread_mutex_unlock(&g->lock);
			goto again;
		}
		if (rc == -EINVAL && !g->pass &&
		    strstr(err, "user name is empty")) {
			snprintf(err, errlen,
				 "etcd requires authentication: give "
				 "--registry-auth-file");
			rc = -EACCES;
		}
		return rc;
	}
	return rc;
}

/* @req (a JSON object, taken) to @route; the answer object in *ans
 * [new] when @ans. */
static int call(struct sfs_reg *g, const char *route, json_t *req, json_t **ans,
		char *err, size_t errlen)
{
	char *s = req ? json_dumps(req, JSON_COMPACT) : NULL;
	struct body b = {.h.limit = ANSWER_MAX};
	json_decref(req);
	if (ans)
		*ans = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = post(g, route, s, g->timeout_ms, &b, err, errlen);
	free(s);
	if (!rc && ans) {
		char why[160];
		int lrc = sfs_json_load(SFS_JSON_REG_ANSWER,
					b.h.buf ? b.h.buf : "", b.h.len, 0, ans,
					why, sizeof(why));
		if (!json_is_object(*ans)) {
			snprintf(err, errlen, "etcd: %s: %s", route,
				 lrc == -E2BIG ? why : "not a JSON object");
			json_decref(*ans);
			*ans = NULL;
			rc = -EPROTO;
		}
	}
	free(b.h.buf);
	return rc;
}

/* The base64 of @n bytes of @p as a JSON string [new]. */
static json_t *b64(const void *p, size_t n)
{
	char *s = malloc(sfs_b64_enc_len(n));
	if (!s)
		return NULL;
	sfs_b64_encode(p, n, s);
	json_t *v = json_string(s);
	free(s);
	return v;
}

/* The key after every key starting with @prefix. */
static json_t *range_end(const char *prefix)
{
	char end[SFS_REG_KEY_MAX + 1];
	size_t n = strlen(prefix);
	if (!n || n > SFS_REG_KEY_MAX)
		return NULL;
	memcpy(end, prefix, n);
	while (n && (unsigned char)end[n - 1] == 0xff)
		n--;
	if (!n)
		return b64("\0", 1); /* everything */
	end[n - 1]++;
	return b64(end, n);
}

int sfs_reg_check(struct sfs_reg *g, char *err, size_t errlen)
{
	return call(g, "/v3/maintenance/status", json_object(), NULL, err,
		    errlen);
}

int sfs_reg_grant(struct sfs_reg *g, unsigned int ttl_s, int64_t *lease,
		  char *err, size_t errlen)
{
	json_t *ans;
	int rc = call(g, "/v3/lease/grant",
		      json_pack("{s:I}", "TTL", (json_int_t)ttl_s), &ans, err,
		      errlen);
	if (rc)
		return rc;
	if (i64(json_object_get(ans, "ID"), lease) || *lease <= 0) {
		json_t *e = json_object_get(ans, "error");
		snprintf(err, errlen, "etcd: lease grant: %s",
			 json_is_string(e) ? json_string_value(e)
					   : "ID missing");
		rc = -EPROTO;
	}
	json_decref(ans);
	return rc;
}

int sfs_reg_keepalive(struct sfs_reg *g, int64_t lease, int64_t *ttl_s,
		      char *err, size_t errlen)
{
	json_t *ans;
	char id[32];
	snprintf(id, sizeof(id), "%" PRId64, lease);
	int rc = call(g, "/v3/lease/keepalive", json_pack("{s:s}", "ID", id),
		      &ans, err, errlen);
	if (rc)
		return rc;
	/* A stream of one message: {"result": {..., "TTL": "10"}}; no TTL
	 * (0) when the lease is gone. */
	json_t *res = json_object_get(ans, "result");
	json_t *t = json_object_get(res, "TTL");
	*ttl_s = 0;
	if (!json_is_object(res)) {
		snprintf(err, errlen, "etcd: keepalive: no result");
		rc = -EPROTO;
	} else if (t && i64(t, ttl_s)) {
		snprintf(err, errlen, "etcd: keepalive: TTL not an int64");
		rc = -EPROTO;
	} else if (*ttl_s <= 0) {
		snprintf(err, errlen, "lease %" PRIx64 " expired",
			 (uint64_t)lease);
		rc = -ENOENT;
	}
	json_decref(ans);
	return rc;
}

int sfs_reg_revoke(struct sfs_reg *g, int64_t lease, char *err, size_t errlen)
{
	char id[32];
	snprintf(id, sizeof(id), "%" PRId64, lease);
	return call(g, "/v3/lease/revoke", json_pack("{s:s}", "ID", id), NULL,
		    err, errlen);
}

int sfs_reg_put(struct sfs_reg *g, const char *key, const void *val, size_t len,
		int64_t lease, char *err, size_t errlen)
{
	char id[32];
	json_t *req = json_object();
	snprintf(id, sizeof(id), "%" PRId64, lease);
	if (req) {
		json_object_set_new(req, "key", b64(key, strlen(key)));
		json_object_set_new(req, "value", b64(val, len));
		if (lease)
			json_object_set_new(req, "lease", json_string(id));
	}
	return call(g, "/v3/kv/put", req, NULL, err, errlen);
}

int sfs_reg_delete(struct sfs_reg *g, const char *key, char *err, size_t errlen)
{
	json_t *req = json_object();
	if (req)
		json_object_set_new(req, "key", b64(key, strlen(key)));
	return call(g, "/v3/kv/deleterange", req, NULL, err, errlen);
}

int sfs_reg_range(struct sfs_reg *g, const char *prefix, size_t max,
		  sfs_reg_fn fn, void *arg, int64_t *rev, char *err,
		  size_t errlen)
{
	json_t *req = json_object();
	if (req) {
		json_object_set_new(req, "key", b64(prefix, strlen(prefix)));
		json_object_set_new(req, "range_end", range_end(prefix));
		json_object_set_new(req, "limit",
				    json_integer((json_int_t)max + 1));
	}
	char *s = req ? json_dumps(req, JSON_COMPACT) : NULL;
	struct body b = {.h.limit = ANSWER_MAX};
	json_decref(req);
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = post(g, "/v3/kv/range", s, g->timeout_ms, &b, err, errlen);
	free(s);
	if (!rc)
		rc = sfs_reg_parse_range(b.h.buf ? b.h.buf : "", b.h.len, max,
					 fn, arg, rev, err, errlen);
	free(b.h.buf);
	return rc;
}

struct watch {
	sfs_reg_fn fn;
	void *arg;
	void (*on_created)(void *);
	int64_t *next;
	int64_t compact;
	int canceled;
	char *err;
	size_t errlen;
};

static int watch_line(void *arg, const char *s, size_t n)
{
	struct watch *w = arg;
	int created, canceled;
	int64_t compact;
	int rc = sfs_reg_parse_watch(s, n, w->fn, w->arg, w->next, &created,
				     &canceled, &compact, w->err, w->errlen);
	if (rc)
		return rc;
	if (created && w->on_created)
		w->on_created(w->arg);
	if (canceled) {
		w->canceled = 1;
		w->compact = compact;
		return compact ? -ESTALE : -EIO;
	}
	return 0;
}

int sfs_reg_watch(struct sfs_reg *g, const char *prefix, int64_t start,
		  sfs_reg_fn fn, void *arg, int (*stop)(void *), void *stop_arg,
		  void (*on_created)(void *), int64_t *next, char *err,
		  size_t errlen)
{
	struct watch w = {.fn = fn,
			  .arg = arg,
			  .on_created = on_created,
			  .next = next,
			  .err = err,
			  .errlen = errlen};
	json_t *cr = json_object(), *req = json_object();
	char rev[32];
	snprintf(rev, sizeof(rev), "%" PRId64, start);
	*next = start;
	if (cr && req) {
		json_object_set_new(cr, "key", b64(prefix, strlen(prefix)));
		json_object_set_new(cr, "range_end", range_end(prefix));
		json_object_set_new(cr, "start_revision", json_string(rev));
		json_object_set(req, "create_request", cr);
	}
	json_decref(cr);
	char *s = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	struct body b = {.h.limit = MSG_MAX,
			 .line = watch_line,
			 .line_arg = &w,
			 .stop = stop,
			 .stop_arg = stop_arg};
	int rc = post(g, "/v3/watch", s, 0, &b, err, errlen);
	free(s);
	free(b.h.buf);
	if (w.canceled && w.compact) {
		*next = w.compact;
		return -ESTALE;
	}
	if (!rc) {
		/* etcd ended the stream: it is going away. */
		snprintf(err, errlen, "etcd ended the watch");
		rc = -EIO;
	}
	return rc;
}
