/* SPDX-License-Identifier: MIT */
/*
 * ctlsrv.c - the control port server (ctlsrv.h): libmicrohttpd in epoll
 * mode on one thread, limits per client address, a deadline per
 * request, the routes left to the caller.
 */
#include "control/ctlsrv.h"

#include "control/auth.h"
#include "control/tls.h"

#include "common/log.h"
#include "common/metrics.h"
#include "common/plant.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <zlib.h>
#include <unistd.h>

#define CTL_MAX_CONN 2048 /* in all */
#define CTL_IDLE_S 10	  /* a connection silent this long goes */
#define CTL_TICK_MS 200	  /* the loop looks at deadlines this often */
#define CTL_NCODES 11	  /* status codes counted by name */

/* One TCP connection, from accept to close.  Only the loop thread
 * touches these (MHD calls back from it alone). */
struct srv_conn {
	struct MHD_Connection *mc;
	uint64_t since_ms; /* waiting for a whole request since */
	int answering;	   /* a response is queued */
	struct srv_conn *prev, *next;
};

struct sfs_ctlsrv {
	struct MHD_Daemon *d;
	sfs_ctl_handler fn;
	void *arg;
	size_t body_max;
	struct sfs_auth *auth;	      /* NULL: no token needed */
	struct sfs_auth *scrape;      /* NULL: no scrape token */
	atomic_uint_fast64_t refused; /* requests without the token */
	uint64_t refused_logged, refused_logged_ms; /* the loop thread's */
	int fd;
	pthread_t thread;
	int thread_started;
	atomic_bool stop;
	struct srv_conn *conns; /* the loop thread's */
	/* Requests by route (c->routes' order, then "other") and code
	 * (ctl_codes' order, then any other): written by the loop thread,
	 * read by any. */
	const char *routes[CTLSRV_ROUTES_MAX];
	size_t nroutes;
	atomic_uint_fast64_t answered[CTLSRV_ROUTES_MAX + 1][CTL_NCODES + 1];
	uint64_t cut, cut_logged_ms;
	/* host_check: the listen host, names, this machine's name. */
	int host_check;
	char host[256];
	const char *const *names;
	char self[256];
	uint64_t misdirected, misdirected_logged_ms; /* the loop thread's */
};

static const unsigned int ctl_codes[CTL_NCODES] = {200, 400, 401, 403, 404, 405,
						   413, 421, 429, 500, 503};

/* One more request to @url answered with @code. */
static void count(struct sfs_ctlsrv *c, const char *url, unsigned int code)
{
	size_t r = 0, k = 0;
	while (r < c->nroutes && strcmp(c->routes[r], url))
		r++;
	while (k < CTL_NCODES && ctl_codes[k] != code)
		k++;
	atomic_fetch_add_explicit(&c->answered[r][k], 1, memory_order_relaxed);
}

void sfs_ctlsrv_metrics(const struct sfs_ctlsrv *c, struct sfs_metrics *m,
			const char *name)
{
	struct sfs_ctlsrv *s = (struct sfs_ctlsrv *)c;
	char code[16];
	sfs_metrics_family(m, name, "counter",
			   "Control port requests answered, by route and "
			   "status code.");
	for (size_t r = 0; r <= s->nroutes; r++) {
		for (size_t k = 0; k <= CTL_NCODES; k++) {
			uint64_t n = atomic_load_explicit(&s->answered[r][k],
							  memory_order_relaxed);
			if (!n && k)
				continue; /* 200 always, the others once seen */
			if (k < CTL_NCODES)
				snprintf(code, sizeof(code), "%u",
					 ctl_codes[k]);
			else
				snprintf(code, sizeof(code), "other");
			sfs_metrics_u64(m, name, n, "route",
					r < s->nroutes ? s->routes[r] : "other",
					"code", code, NULL);
		}
	}
}

/* The request on @conn is answered: its deadline no longer runs. */
static void answering(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct srv_conn *t = ci ? ci->socket_context : NULL;
	if (t)
		t->answering = 1;
}

/* The client's address, numeric, for limits and logs. */
static void client_name(struct MHD_Connection *conn, char *buf, size_t len)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	snprintf(buf, len, "?");
	if (ci && ci->client_addr)
		getnameinfo(ci->client_addr,
			    ci->client_addr->sa_family == AF_INET6
				    ? sizeof(struct sockaddr_in6)
				    : sizeof(struct sockaddr_in),
			    buf, (socklen_t)len, NULL, 0, NI_NUMERICHOST);
}

/* A request being received: its body, up to c->body_max bytes. */
struct pending {
	size_t len, cap;
	int too_big;
	uint8_t *buf;
};

const char *sfs_ctl_arg(const struct sfs_ctl_req *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND,
					   name);
}

int sfs_ctl_text(struct sfs_ctl_resp *resp, unsigned int status,
		 const char *text)
{
	resp->status = status;
	resp->type = "text/plain";
	resp->body = strdup(text);
	resp->body_len = resp->body ? strlen(text) : 0;
	return resp->body ? 0 : -ENOMEM;
}

void sfs_ctl_json(struct sfs_ctl_resp *resp, char *json, size_t len)
{
	resp->status = 200;
	resp->type = "application/json";
	resp->body = json;
	resp->body_len = len;
}

/* Answers shorter than this go as they are: gzip's frame costs 18 bytes
 * and a small JSON object gains little. */
#define GZIP_MIN 512

/* Is @tok (@n bytes, "gzip" or "gzip;q=...") gzip at a weight above 0? */
static int gzip_token(const char *tok, size_t n)
{
	while (n && (*tok == ' ' || *tok == '\t'))
		tok++, n--;
	if (n < 4 || strncasecmp(tok, "gzip", 4))
		return 0;
	const char *p = tok + 4, *end = tok + n;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p == end)
		return 1;
	if (*p != ';')
		return 0; /* "gzipx" and the like */
	for (p++; p < end && (*p == ' ' || *p == '\t'); p++)
		;
	if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
		double q = strtod(p + 2, NULL);
		return q > 0;
	}
	return 1;
}

int sfs_ctl_takes_gzip(const struct sfs_ctl_req *req)
{
	if (!req->conn || strcmp(req->method, "GET"))
		return 0; /* a HEAD is answered with what a GET would say */
	const char *ae = MHD_lookup_connection_value(
		req->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
	while (ae && *ae) {
		const char *comma = strchr(ae, ',');
		size_t n = comma ? (size_t)(comma - ae) : strlen(ae);
		if (gzip_token(ae, n))
			return 1;
		ae = comma ? comma + 1 : NULL;
	}
	return 0;
}

int sfs_gzip(const void *in, size_t len, char **out, size_t *outlen)
{
	z_stream z = {0};
	*out = NULL;
	if (len < GZIP_MIN || len > UINT_MAX / 2)
		return -EAGAIN;
	if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
	    Z_OK)
		return -ENOMEM;
	uLong bound = deflateBound(&z, (uLong)len);
	unsigned char *buf = malloc(bound);
	int rc = Z_STREAM_ERROR;
	if (buf) {
		z.next_in = (unsigned char *)in;
		z.avail_in = (uInt)len;
		z.next_out = buf;
		z.avail_out = (uInt)bound;
		rc = deflate(&z, Z_FINISH);
	}
	size_t n = z.total_out;
	deflateEnd(&z);
	if (!buf)
		return -ENOMEM;
	if (rc != Z_STREAM_END || n >= len) {
		free(buf);
		return -EAGAIN;
	}
	*out = (char *)buf;
	*outlen = n;
	return 0;
}

/* @resp's body gzipped when that is smaller: 1, the body replaced; else
 * 0, as it was.  A manifest at small chunks is mostly hex checksums:
 * about half its bytes.  (Nothing secret is worth a length oracle
 * here: what an asker sends that an answer carries beside a key is a
 * version number it chose, and an asker has the token, so the key.) */
static int gzip_body(struct sfs_ctl_resp *resp)
{
	char *out;
	size_t n;
	if (sfs_gzip(resp->body, resp->body_len, &out, &n))
		return 0;
	free(resp->body);
	resp->body = out;
	resp->body_len = n;
	return 1;
}

static enum MHD_Result answer(struct sfs_ctlsrv *c, struct MHD_Connection *conn,
			      const char *url, const char *method,
			      struct pending *p)
{
	char client[64];
	client_name(conn, client, sizeof(client));
	struct sfs_ctl_req req = {.method = method,
				  .url = url,
				  .client = client,
				  .body = p ? p->buf : NULL,
				  .body_len = p ? p->len : 0,
				  .body_too_big = p && p->too_big,
				  .conn = conn};
	struct sfs_ctl_resp resp = {0};
	if (c->fn(c->arg, &req, &resp) || !resp.body) {
		if (resp.release)
			resp.release(resp.release_arg);
		else
			free(resp.body);
		return MHD_NO;
	}
	answering(conn);
	int gz = resp.gzipped || (!resp.release && resp.status == 200 &&
				  sfs_ctl_takes_gzip(&req) && gzip_body(&resp));
	/* A shared body goes out as it is, let go of when sent: one copy
	 * however many readers it has at once. */
	struct MHD_Response *r =
		resp.release
			? MHD_create_response_from_buffer_with_free_callback_cls(
				  resp.body_len, resp.body, resp.release,
				  resp.release_arg)
			: MHD_create_response_from_buffer(
				  resp.body_len, resp.body,
				  MHD_RESPMEM_MUST_FREE);
	if (!r) {
		if (resp.release)
			resp.release(resp.release_arg);
		else
			free(resp.body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type",
				resp.type ? resp.type : "text/plain");
	if (gz)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING,
					"gzip");
	MHD_add_response_header(r, MHD_HTTP_HEADER_VARY,
				MHD_HTTP_HEADER_ACCEPT_ENCODING);
	count(c, url, resp.status);
	enum MHD_Result ret = MHD_queue_response(conn, resp.status, r);
	MHD_destroy_response(r);
	return ret;
}

/*
 * The token, where one is set: every route but /v1/health; /metrics
 * takes the scrape token too.  0 when the request may go on; else the
 * 401 is queued here (into *ret) and the caller returns it.  A refusal
 * is counted and logged at most every 10 s (a flood of bad requests
 * cannot flood the log).
 */
static int refuse(struct sfs_ctlsrv *c, struct MHD_Connection *conn,
		  const char *url, enum MHD_Result *ret)
{
	int metrics = !strcmp(url, "/metrics");
	if ((!c->auth && !(metrics && c->scrape)) || !strcmp(url, "/v1/health"))
		return 0;
	const char *v = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	int rc = c->auth ? sfs_auth_check(c->auth, v) : -EACCES;
	if (rc && metrics && c->scrape) {
		int rs = sfs_auth_check(c->scrape, v);
		if (!rs || !c->auth)
			rc = rs;
	}
	if (!rc)
		return 0;
	uint64_t n = atomic_fetch_add(&c->refused, 1) + 1, now = sfs_now_ms();
	if (!c->refused_logged || now - c->refused_logged_ms >= 10000) {
		char client[64];
		client_name(conn, client, sizeof(client));
		SFS_LOG(SFS_WARN, "ctl",
			"refused %s from %s: %s (%" PRIu64 " refused so far)",
			url, client,
			rc == -ENOKEY	 ? "no token"
			: rc == -EBADMSG ? "not \"Authorization: Bearer TOKEN\""
					 : "wrong token",
			n);
		c->refused_logged = n;
		c->refused_logged_ms = now;
	}
	static const char no[] = "this control port needs a token "
				 "(Authorization: Bearer TOKEN)\n",
			  bad[] = "the token is not this control port's\n";
	const char *text = rc == -EACCES ? bad : no;
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!r) {
		*ret = MHD_NO;
		return 1;
	}
	answering(conn);
	count(c, url, MHD_HTTP_UNAUTHORIZED);
	MHD_add_response_header(r, "Content-Type", "text/plain");
	MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
				rc == -EACCES ? "Bearer realm=\"seedfs\", "
						"error=\"invalid_token\""
					      : "Bearer realm=\"seedfs\"");
	*ret = MHD_queue_response(conn, MHD_HTTP_UNAUTHORIZED, r);
	MHD_destroy_response(r);
	return 1;
}

int sfs_ctlsrv_host_ok(const char *value, const char *listen,
		       const char *const *names, const char *self)
{
	char h[256];
	const char *end;
	struct in6_addr a6;
	struct in_addr a4;

	/* The name without its port: "[v6]:port", "name:port", "name". */
	if (*value == '[') {
		if (!(end = strchr(value, ']')) || (end[1] && end[1] != ':'))
			return 0;
		value++;
	} else if (!(end = strchr(value, ':'))) {
		end = value + strlen(value);
	}
	size_t n = (size_t)(end - value);
	if (!n || n >= sizeof(h))
		return 0;
	memcpy(h, value, n);
	h[n] = '\0';
	if (n > 1 && h[n - 1] == '.') /* "localhost." */
		h[n - 1] = '\0';
	int wild =
		!*listen || !strcmp(listen, "0.0.0.0") || !strcmp(listen, "::");
	int ip = inet_pton(AF_INET, h, &a4) == 1 ||
		 inet_pton(AF_INET6, h, &a6) == 1;
	if (sfs_ctlsrv_loopback(h) || !strcasecmp(h, "localhost") ||
	    !strcasecmp(h, listen) || (wild && ip) ||
	    (wild && self && *self && !strcasecmp(h, self)))
		return 1;
	if (ip && inet_pton(AF_INET6, listen, &a6) == 1) {
		struct in6_addr b6; /* another spelling of the same address */
		return inet_pton(AF_INET6, h, &b6) == 1 &&
		       !memcmp(&a6, &b6, sizeof(a6));
	}
	for (size_t i = 0; names && names[i]; i++)
		if (!strcasecmp(h, names[i]))
			return 1;
	return 0;
}

/*
 * A port without a token answers only requests for its own names
 * (sfs_ctlsrv_cfg.host_check).  0 when the request may go on; else the
 * 421 is queued here (into *ret).  Logged at most every 10 s.
 */
static int misdirected(struct sfs_ctlsrv *c, struct MHD_Connection *conn,
		       const char *url, enum MHD_Result *ret)
{
	if (!c->host_check || c->auth || !strcmp(url, "/v1/health") ||
	    (c->scrape && !strcmp(url, "/metrics")))
		return 0;
	const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_HOST);
	if (!v || sfs_ctlsrv_host_ok(v, c->host, c->names, c->self))
		return 0;
	uint64_t now = sfs_now_ms();
	c->misdirected++;
	if (c->misdirected == 1 || now - c->misdirected_logged_ms >= 10000) {
		char client[64], name[80];
		client_name(conn, client, sizeof(client));
		sfs_escape(v, strlen(v), name, sizeof(name));
		SFS_LOG(SFS_WARN, "ctl",
			"refused %s from %s: Host %s is not a name of this "
			"port (%" PRIu64 " so far)",
			url, client, name, c->misdirected);
		c->misdirected_logged_ms = now;
	}
	static const char text[] =
		"this control port has no token and answers only requests "
		"for its own host names (Host: localhost, its address, its "
		"--listen host); give it a --token-file to be reached by "
		"other names\n";
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!r) {
		*ret = MHD_NO;
		return 1;
	}
	answering(conn);
	count(c, url, MHD_HTTP_MISDIRECTED_REQUEST);
	MHD_add_response_header(r, "Content-Type", "text/plain");
	*ret = MHD_queue_response(conn, MHD_HTTP_MISDIRECTED_REQUEST, r);
	MHD_destroy_response(r);
	return 1;
}

int sfs_ctlsrv_loopback(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;
	if (!strcmp(host, "localhost"))
		return 1;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

uint64_t sfs_ctlsrv_refused(const struct sfs_ctlsrv *c)
{
	return atomic_load(&((struct sfs_ctlsrv *)c)->refused);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn,
			      const char *url, const char *method,
			      const char *version, const char *upload_data,
			      size_t *upload_size, void **req_cls)
{
	struct sfs_ctlsrv *c = cls;
	enum MHD_Result ret;

	SFS_TSAN_PLANT(); /* tsan_sees only: common/plant.h */
	if (strcmp(method, "POST") == 0) {
		struct pending *p = *req_cls;
		if (!p) { /* first call: headers only */
			if (misdirected(c, conn, url, &ret) ||
			    refuse(c, conn, url, &ret))
				return ret; /* the body is never read */
			if (!(p = calloc(1, sizeof(*p))))
				return MHD_NO;
			*req_cls = p;
			return MHD_YES;
		}
		if (*upload_size) { /* a piece of the body */
			size_t n = *upload_size;
			if (p->len + n > c->body_max) {
				p->too_big = 1;
			} else {
				if (p->len + n > p->cap) {
					size_t cap =
						SFS_MAX(p->cap * 2, p->len + n);
					uint8_t *b = realloc(p->buf, cap);
					if (!b)
						return MHD_NO;
					p->buf = b;
					p->cap = cap;
				}
				memcpy(p->buf + p->len, upload_data, n);
				p->len += n;
			}
			*upload_size = 0;
			return MHD_YES;
		}
		return answer(c, conn, url, method, p);
	}
	if (misdirected(c, conn, url, &ret) || refuse(c, conn, url, &ret))
		return ret;
	return answer(c, conn, url, method, NULL);
}

static void completed(void *cls, struct MHD_Connection *conn, void **req_cls,
		      enum MHD_RequestTerminationCode why)
{
	struct pending *p = *req_cls;
	if (p)
		free(p->buf);
	free(p);
	*req_cls = NULL;
	/* Kept alive: the next request has the whole deadline again. */
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct srv_conn *t = ci ? ci->socket_context : NULL;
	if (t) {
		t->answering = 0;
		t->since_ms = sfs_now_ms();
	}
}

static void connection(void *cls, struct MHD_Connection *conn, void **sc,
		       enum MHD_ConnectionNotificationCode toe)
{
	struct sfs_ctlsrv *c = cls;
	struct srv_conn *t = *sc;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		if (!(t = calloc(1, sizeof(*t))))
			return; /* untracked: MHD's idle timeout still holds */
		t->mc = conn;
		t->since_ms = sfs_now_ms();
		t->next = c->conns;
		if (t->next)
			t->next->prev = t;
		c->conns = t;
		*sc = t;
		return;
	}
	if (!t)
		return;
	if (t->prev)
		t->prev->next = t->next;
	else
		c->conns = t->next;
	if (t->next)
		t->next->prev = t->prev;
	free(t);
	*sc = NULL;
}

/*
 * A request must arrive whole within CTLSRV_DEADLINE_MS: a client that
 * sends a byte a second (which resets an idle timeout) or nothing at all
 * holds a connection no longer than that.  Its socket is shut down, and
 * MHD closes it at its next turn.
 */
static void sweep(struct sfs_ctlsrv *c)
{
	uint64_t now = sfs_now_ms(), cut = 0;
	for (struct srv_conn *t = c->conns; t; t = t->next) {
		if (t->answering || t->since_ms == UINT64_MAX ||
		    now - t->since_ms < CTLSRV_DEADLINE_MS)
			continue;
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			t->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (ci)
			shutdown(ci->connect_fd, SHUT_RDWR);
		t->since_ms = UINT64_MAX;
		cut++;
	}
	c->cut += cut;
	if (c->cut && now - c->cut_logged_ms >= 10000) {
		SFS_LOG(SFS_WARN, "ctl",
			"closed %" PRIu64 " connections that sent no whole "
			"request within %u ms",
			c->cut, CTLSRV_DEADLINE_MS);
		c->cut = 0;
		c->cut_logged_ms = now;
	}
}

/* The control port's one thread: MHD's event loop (epoll) and the
 * deadlines.  Requests are answered here, each quickly. */
static void *loop(void *arg)
{
	struct sfs_ctlsrv *c = arg;
	while (!atomic_load(&c->stop)) {
		MHD_run_wait(c->d, CTL_TICK_MS);
		sweep(c);
	}
	return NULL;
}

/* Bind and listen ourselves: port 0 works and the error is ours. */
static int listen_on(const char *host, const char *port, int *family,
		     unsigned int *bound, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE},
			*res, *ai;
	int fd = -1, rc, one = 1;

	rc = getaddrinfo(*host ? host : NULL, port, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "control port %s:%s: %s", host, port,
			 gai_strerror(rc));
		return -EINVAL;
	}
	rc = -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, SOMAXCONN) == 0) {
			*family = ai->ai_family;
			break;
		}
		rc = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		snprintf(err, errlen, "control port %s:%s: %s", host, port,
			 strerror(-rc));
		return rc;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	*bound = ntohs(ss.ss_family == AF_INET6
			       ? ((struct sockaddr_in6 *)&ss)->sin6_port
			       : ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

int sfs_ctlsrv_start(const struct sfs_ctlsrv_cfg *cfg, sfs_ctl_handler fn,
		     void *arg, struct sfs_ctlsrv **out,
		     unsigned int *bound_port, char *err, size_t errlen)
{
	const char *host = cfg->host, *port = cfg->port;
	struct sfs_ctlsrv *c;
	int family = AF_INET;

	if (cfg->tls && !MHD_is_feature_supported(MHD_FEATURE_TLS)) {
		snprintf(err, errlen,
			 "control port: this libmicrohttpd has no TLS");
		return -EPROTONOSUPPORT;
	}
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	c->fn = fn;
	c->arg = arg;
	c->body_max = cfg->body_max;
	c->auth = cfg->auth;
	c->scrape = cfg->scrape;
	c->host_check = cfg->host_check;
	c->names = cfg->names;
	snprintf(c->host, sizeof(c->host), "%s", host);
	if (gethostname(c->self, sizeof(c->self) - 1))
		c->self[0] = '\0';
	for (size_t i = 0;
	     cfg->routes && cfg->routes[i] && c->nroutes < CTLSRV_ROUTES_MAX;
	     i++)
		c->routes[c->nroutes++] = cfg->routes[i];
	c->fd = listen_on(host, port, &family, bound_port, err, errlen);
	if (c->fd < 0) {
		int rc = c->fd;
		free(c);
		return rc;
	}
	/* Event driven (epoll), one thread: a connection costs a socket,
	 * not a thread.  A few per client address, and a deadline for each
	 * request (sweep), so a crowd of slow or idle clients cannot keep
	 * the port from answering others. */
	unsigned int flags = MHD_USE_EPOLL;
	if (family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (cfg->tls)
		flags |= MHD_USE_TLS;
	struct rlimit rl;
	unsigned int limit = CTL_MAX_CONN;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < limit + 256)
		limit = rl.rlim_cur > 512 ? (unsigned int)rl.rlim_cur - 256
					  : 256;
	c->d = MHD_start_daemon(
		flags, 0, NULL, NULL, handle, c, MHD_OPTION_LISTEN_SOCKET,
		c->fd, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CTL_IDLE_S,
		MHD_OPTION_CONNECTION_LIMIT, limit,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT,
		(unsigned int)CTLSRV_PER_CLIENT, MHD_OPTION_NOTIFY_COMPLETED,
		completed, c, MHD_OPTION_NOTIFY_CONNECTION, connection, c,
		/* Without TLS the list ends here.  With it: TLS 1.2 and 1.3,
		 * forward-secret AEAD suites only (tls.h). */
		cfg->tls ? MHD_OPTION_HTTPS_PRIORITIES : MHD_OPTION_END,
		SFS_TLS_PRIORITIES, MHD_OPTION_HTTPS_MEM_KEY,
		cfg->tls ? sfs_tls_pair_key(cfg->tls) : NULL,
		MHD_OPTION_HTTPS_MEM_CERT,
		cfg->tls ? sfs_tls_pair_cert(cfg->tls) : NULL, MHD_OPTION_END);
	if (!c->d) {
		snprintf(err, errlen,
			 "control port %s:%s: cannot start HTTP "
			 "server",
			 host, port);
		close(c->fd);
		free(c);
		return -EIO;
	}
	int rc = -pthread_create(&c->thread, NULL, loop, c);
	if (rc) {
		snprintf(err, errlen, "control port: thread: %s",
			 strerror(-rc));
		sfs_ctlsrv_stop(c);
		return rc;
	}
	c->thread_started = 1;
	*out = c;
	return 0;
}

void sfs_ctlsrv_stop(struct sfs_ctlsrv *c)
{
	if (!c)
		return;
	if (c->thread_started) {
		atomic_store(&c->stop, 1);
		pthread_join(c->thread, NULL);
	}
	/* Take the listen socket back so it is closed exactly once. */
	MHD_socket fd = MHD_quiesce_daemon(c->d);
	MHD_stop_daemon(c->d);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	free(c);
}
