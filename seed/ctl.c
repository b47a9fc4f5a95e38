/* SPDX-License-Identifier: MIT */
/*
 * ctl.c - the seed's control port: a small HTTP/1.1 server (libmicrohttpd)
 * that serves the manifest.  curl can debug it:
 *   curl http://seedhost:7070/v1/manifest
 */
#include "seed.h"

#include "common/log.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct sfs_ctl {
	struct MHD_Daemon *d;
	struct sfs_seed *seed;
	struct MHD_Response *manifest;
	int fd;
};

static enum MHD_Result reply_text(struct MHD_Connection *conn,
				  unsigned int code, const char *text)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain");
	enum MHD_Result ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn,
			      const char *url, const char *method,
			      const char *version, const char *upload_data,
			      size_t *upload_size, void **req_cls)
{
	struct sfs_ctl *c = cls;

	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
				  "only GET\n");
	if (strcmp(url, "/v1/manifest") == 0) {
		SFS_LOG(SFS_DEBUG, "ctl", "GET /v1/manifest");
		return MHD_queue_response(conn, MHD_HTTP_OK, c->manifest);
	}
	if (strcmp(url, "/v1/health") == 0)
		return reply_text(conn, MHD_HTTP_OK, "ok\n");
	return reply_text(conn, MHD_HTTP_NOT_FOUND,
			  "not found; try /v1/manifest\n");
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
		    listen(fd, 64) == 0) {
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
	const char *json;
	size_t len;
	int family = AF_INET;

	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	c->seed = s;
	sfs_seed_manifest(s, &json, &len);
	c->manifest = MHD_create_response_from_buffer(len, (void *)json,
						      MHD_RESPMEM_PERSISTENT);
	if (!c->manifest) {
		free(c);
		return -ENOMEM;
	}
	MHD_add_response_header(c->manifest, "Content-Type",
				"application/json");
	c->fd = listen_on(host, port, &family, bound_port, err, errlen);
	if (c->fd < 0) {
		int rc = c->fd;
		MHD_destroy_response(c->manifest);
		free(c);
		return rc;
	}
	unsigned int flags =
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION;
	if (family == AF_INET6)
		flags |= MHD_USE_IPv6;
	c->d = MHD_start_daemon(
		flags, 0, NULL, NULL, handle, c, MHD_OPTION_LISTEN_SOCKET,
		c->fd, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
		MHD_OPTION_CONNECTION_LIMIT, 256u, MHD_OPTION_END);
	if (!c->d) {
		snprintf(err, errlen,
			 "control port %s:%s: cannot start HTTP "
			 "server",
			 host, port);
		close(c->fd);
		MHD_destroy_response(c->manifest);
		free(c);
		return -EIO;
	}
	*out = c;
	return 0;
}

void sfs_ctl_stop(struct sfs_ctl *c)
{
	if (!c)
		return;
	/* Take the listen socket back so it is closed exactly once. */
	MHD_socket fd = MHD_quiesce_daemon(c->d);
	MHD_stop_daemon(c->d);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	MHD_destroy_response(c->manifest);
	free(c);
}
