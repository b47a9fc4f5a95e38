/* SPDX-License-Identifier: MIT */
/*
 * slowclient - hostile clients of a seed's control port, for tests.
 *
 *   slowclient HOST PORT SRCADDR N drip|idle|read SECONDS [PATH [HEADER]]
 *
 * Keeps N connections from SRCADDR open to HOST:PORT for SECONDS:
 * "drip" sends an HTTP request that never ends, one byte a second per
 * connection (which resets any idle timeout); "idle" sends nothing;
 * "read" asks GET PATH (default /v1/manifest; with HEADER, a line such
 * as "Accept-Encoding: gzip", too) whole, then reads the
 * answer slowly (a 4 KiB receive buffer, 1 KiB every 100 ms), so the
 * server holds it that long.  A connection the server closes is opened
 * again.  Prints, at the end, "opened N closed M held H cut A-B s read
 * R": M closed by the server; H the most connections open at once that
 * the server had kept for 2 s or more (the ones past a per-address cap
 * are closed at once); A-B the shortest and longest life, connect to
 * close, of those it closed after 2 s or more (0-0: none); R the bytes
 * read in all.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char req[] = "GET /v1/generation HTTP/1.1\r\nHost: seed\r\n"
			  "X-Slow: ";

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct slot {
	int fd;
	size_t sent;
	double next;
	double since; /* connect() */
};

static int open_one(const struct sockaddr_in *dst,
		    const struct sockaddr_in *src, int small)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), rb = 4096;
	if (fd < 0)
		return -1;
	/* Before connect: the window it opens is this small. */
	if (small)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb));
	if (bind(fd, (const struct sockaddr *)src, sizeof(*src)) ||
	    (connect(fd, (const struct sockaddr *)dst, sizeof(*dst)) &&
	     errno != EINPROGRESS)) {
		close(fd);
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	if (argc < 7 || argc > 9) {
		fprintf(stderr, "usage: slowclient HOST PORT SRCADDR N "
				"drip|idle|read SECONDS [PATH [HEADER]]\n");
		return 2;
	}
	char get[1024];
	snprintf(get, sizeof(get),
		 "GET %.300s HTTP/1.1\r\nHost: %.100s\r\n%.300s%s"
		 "Connection: close\r\n\r\n",
		 argc >= 8 ? argv[7] : "/v1/manifest", argv[1],
		 argc == 9 ? argv[8] : "", argc == 9 ? "\r\n" : "");
	long got = 0;
	struct sockaddr_in dst = {.sin_family = AF_INET,
				  .sin_port = htons((uint16_t)atoi(argv[2]))};
	struct sockaddr_in src = {.sin_family = AF_INET};
	if (inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1 ||
	    inet_pton(AF_INET, argv[3], &src.sin_addr) != 1) {
		fprintf(stderr, "slowclient: bad address\n");
		return 2;
	}
	int n = atoi(argv[4]), drip = !strcmp(argv[5], "drip");
	int rd = !strcmp(argv[5], "read");
	double end = now() + atof(argv[6]);
	struct slot *s = calloc((size_t)n, sizeof(*s));
	struct pollfd *p = calloc((size_t)n, sizeof(*p));
	long opened = 0, closed = 0, held_max = 0;
	double cut_min = 0, cut_max = 0;
	for (int i = 0; i < n; i++)
		s[i].fd = -1;
	while (now() < end) {
		double t = now();
		for (int i = 0; i < n; i++) {
			if (s[i].fd < 0 && t >= s[i].next) {
				s[i].fd = open_one(&dst, &src, rd);
				s[i].sent = 0;
				s[i].next = t + 1.0;
				s[i].since = t;
				opened += s[i].fd >= 0;
			} else if (s[i].fd >= 0 && drip && t >= s[i].next) {
				char c = s[i].sent < sizeof(req) - 1
						 ? req[s[i].sent]
						 : 'a';
				if (send(s[i].fd, &c, 1, MSG_NOSIGNAL) == 1)
					s[i].sent++;
				s[i].next = t + 1.0;
			} else if (s[i].fd >= 0 && rd &&
				   s[i].sent < strlen(get)) {
				/* Once connected: the request, whole. */
				ssize_t k = send(s[i].fd, get + s[i].sent,
						 strlen(get) - s[i].sent,
						 MSG_NOSIGNAL);
				if (k > 0)
					s[i].sent += (size_t)k;
			}
			p[i].fd = s[i].fd;
			/* A slow reader reads when its turn comes. */
			p[i].events = !rd || t >= s[i].next ? POLLIN : 0;
			p[i].revents = 0;
		}
		long held = 0;
		for (int i = 0; i < n; i++)
			held += s[i].fd >= 0 && t - s[i].since >= 2.0;
		if (held > held_max)
			held_max = held;
		if (poll(p, (nfds_t)n, 50) > 0)
			for (int i = 0; i < n; i++) {
				char buf[1024];
				if (s[i].fd < 0 || !p[i].revents)
					continue;
				ssize_t k = recv(s[i].fd, buf,
						 rd ? sizeof(buf) : 256, 0);
				if (k > 0) {
					got += k;
					if (rd)
						s[i].next = now() + 0.1;
					continue;
				}
				if (k < 0 && errno == EAGAIN)
					continue;
				close(s[i].fd); /* the server closed it */
				s[i].fd = -1;
				double life = now() - s[i].since;
				if (life >= 2.0) {
					if (!cut_max || life < cut_min)
						cut_min = life;
					if (life > cut_max)
						cut_max = life;
				}
				s[i].next = now() + 0.05;
				closed++;
			}
	}
	for (int i = 0; i < n; i++)
		if (s[i].fd >= 0)
			close(s[i].fd);
	free(s);
	free(p);
	printf("opened %ld closed %ld held %ld cut %.2f-%.2f s read %ld\n",
	       opened, closed, held_max, cut_min, cut_max, got);
	return 0;
}
