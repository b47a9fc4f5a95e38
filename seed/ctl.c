/* SPDX-License-Identifier: MIT */
/*
 * ctl.c - the seed's control port: a small HTTP/1.1 server (libmicrohttpd)
 * that serves the manifest.  curl can debug it:
 *   curl http://seedhost:7070/v1/manifest       the current generation's
 *   curl http://seedhost:7070/v1/manifest?generation=3
 *   curl http://seedhost:7070/v1/generation     current and served ones
 *   POST /v1/connect?protocol=rdma              a replica's connection
 */
#include "seed.h"

#include "common/log.h"
#include "common/util.h"
#include "transports/transport.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define CTL_DEADLINE_MS 5000 /* a request arrives whole within this */
#define CTL_PER_CLIENT 32    /* connections from one address */
#define CTL_MAX_CONN 2048    /* in all */
#define CTL_IDLE_S 10	     /* a connection silent this long goes */
#define CTL_TICK_MS 200	     /* the loop looks at deadlines this often */

/* One TCP connection, from accept to close.  Only the loop thread
 * touches these (MHD calls back from it alone). */
struct ctl_conn {
	struct MHD_Connection *mc;
	uint64_t since_ms; /* waiting for a whole request since */
	int answering;	   /* a response is queued */
	struct ctl_conn *prev, *next;
};

struct sfs_ctl {
	struct MHD_Daemon *d;
	struct sfs_seed *seed;
	int fd;
	pthread_t thread;
	int thread_started;
	atomic_bool stop;
	struct ctl_conn *conns; /* the loop thread's */
	uint64_t cut, cut_logged_ms;
};

/* The request on @conn is answered: its deadline no longer runs. */
static void answering(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct ctl_conn *t = ci ? ci->socket_context : NULL;
	if (t)
		t->answering = 1;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn,
				  unsigned int code, const char *text)
{
	answering(conn);
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain");
	enum MHD_Result ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
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

/* A POST body being received (at most SFS_XPORT_HELLO_MAX bytes). */
struct post {
	size_t len;
	int too_big;
	uint8_t buf[SFS_XPORT_HELLO_MAX];
};

static enum MHD_Result
connect_reply(struct sfs_ctl *c, struct MHD_Connection *conn, struct post *p)
{
	const char *proto = MHD_lookup_connection_value(
		conn, MHD_GET_ARGUMENT_KIND, "protocol");
	uint8_t reply[SFS_XPORT_HELLO_MAX];
	size_t rlen = sizeof(reply);

	if (p->too_big)
		return reply_text(conn, MHD_HTTP_CONTENT_TOO_LARGE,
				  "hello too large\n");
	char client[64];
	client_name(conn, client, sizeof(client));
	int rc = sfs_seed_accept(c->seed, proto, p->buf, p->len, client, reply,
				 &rlen);
	if (rc == -EPROTONOSUPPORT)
		return reply_text(conn, MHD_HTTP_NOT_FOUND,
				  "this seed takes no connection for that "
				  "protocol\n");
	if (rc == -EINVAL)
		return reply_text(conn, MHD_HTTP_BAD_REQUEST,
				  "malformed connection hello\n");
	if (rc == -EMFILE)
		return reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
				  "too many replicas connected\n");
	if (rc == -EUSERS)
		return reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
				  "too many connections from this client\n");
	if (rc)
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
				  "cannot create a connection (see the seed's "
				  "log)\n");
	answering(conn);
	struct MHD_Response *r = MHD_create_response_from_buffer(
		rlen, reply, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/octet-stream");
	enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* GET /v1/manifest[?generation=N]: a copy, the seed may republish. */
static enum MHD_Result manifest_reply(struct sfs_ctl *c,
				      struct MHD_Connection *conn)
{
	const char *g = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND,
						    "generation");
	uint64_t gen = 0;
	char *json;
	size_t len;

	if (g && (sfs_parse_u64(g, &gen) || gen == 0))
		return reply_text(conn, MHD_HTTP_BAD_REQUEST,
				  "generation must be a positive integer\n");
	int rc = sfs_seed_manifest_copy(c->seed, gen, &json, &len);
	if (rc == -ENOENT)
		return reply_text(conn, MHD_HTTP_NOT_FOUND,
				  "that generation is no longer served\n");
	if (rc)
		return MHD_NO;
	answering(conn);
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, json, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(json);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/json");
	enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn,
			      const char *url, const char *method,
			      const char *version, const char *upload_data,
			      size_t *upload_size, void **req_cls)
{
	struct sfs_ctl *c = cls;

	if (strcmp(method, "POST") == 0 && strcmp(url, "/v1/connect") == 0) {
		struct post *p = *req_cls;
		if (!p) { /* first call: headers only */
			if (!(p = calloc(1, sizeof(*p))))
				return MHD_NO;
			*req_cls = p;
			return MHD_YES;
		}
		if (*upload_size) { /* a piece of the body */
			if (p->len + *upload_size > sizeof(p->buf))
				p->too_big = 1;
			else
				memcpy(p->buf + p->len, upload_data,
				       *upload_size);
			p->len += *upload_size;
			*upload_size = 0;
			return MHD_YES;
		}
		return connect_reply(c, conn, p);
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
				  "GET /v1/manifest, or POST /v1/connect\n");
	if (strcmp(url, "/v1/manifest") == 0)
		return manifest_reply(c, conn);
	if (strcmp(url, "/v1/generation") == 0) {
		char buf[1024];
		if (sfs_seed_generations(c->seed, buf, sizeof(buf)))
			return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
					  "too many generations\n");
		answering(conn);
		struct MHD_Response *r = MHD_create_response_from_buffer(
			strlen(buf), buf, MHD_RESPMEM_MUST_COPY);
		if (!r)
			return MHD_NO;
		MHD_add_response_header(r, "Content-Type", "application/json");
		enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
		MHD_destroy_response(r);
		return ret;
	}
	if (strcmp(url, "/v1/health") == 0)
		return reply_text(conn, MHD_HTTP_OK, "ok\n");
	return reply_text(conn, MHD_HTTP_NOT_FOUND,
			  "not found; try /v1/manifest\n");
}

static void completed(void *cls, struct MHD_Connection *conn, void **req_cls,
		      enum MHD_RequestTerminationCode why)
{
	free(*req_cls);
	*req_cls = NULL;
	/* Kept alive: the next request has the whole deadline again. */
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct ctl_conn *t = ci ? ci->socket_context : NULL;
	if (t) {
		t->answering = 0;
		t->since_ms = sfs_now_ms();
	}
}

static void connection(void *cls, struct MHD_Connection *conn, void **sc,
		       enum MHD_ConnectionNotificationCode toe)
{
	struct sfs_ctl *c = cls;
	struct ctl_conn *t = *sc;
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
 * A request must arrive whole within CTL_DEADLINE_MS: a client that
 * sends a byte a second (which resets an idle timeout) or nothing at all
 * holds a connection no longer than that.  Its socket is shut down, and
 * MHD closes it at its next turn.
 */
static void sweep(struct sfs_ctl *c)
{
	uint64_t now = sfs_now_ms(), cut = 0;
	for (struct ctl_conn *t = c->conns; t; t = t->next) {
		if (t->answering || t->since_ms == UINT64_MAX ||
		    now - t->since_ms < CTL_DEADLINE_MS)
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
			c->cut, CTL_DEADLINE_MS);
		c->cut = 0;
		c->cut_logged_ms = now;
	}
}

/* The control port's one thread: MHD's event loop (epoll) and the
 * deadlines.  Requests are answered here, each quickly. */
static void *loop(void *arg)
{
	struct sfs_ctl *c = arg;
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

int sfs_ctl_start(struct sfs_seed *s, const char *host, const char *port,
		  struct sfs_ctl **out, unsigned int *bound_port, char *err,
		  size_t errlen)
{
	struct sfs_ctl *c;
	int family = AF_INET;

	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	c->seed = s;
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
		(unsigned int)CTL_PER_CLIENT, MHD_OPTION_NOTIFY_COMPLETED,
		completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, connection, c,
		MHD_OPTION_END);
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
		sfs_ctl_stop(c);
		return rc;
	}
	c->thread_started = 1;
	*out = c;
	return 0;
}

void sfs_ctl_stop(struct sfs_ctl *c)
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
