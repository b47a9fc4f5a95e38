/* SPDX-License-Identifier: MIT */
/*
 * flood - many TCP connections to one port, for tests of a fabric
 * listener's limits.
 *
 *   flood HOST PORT N SRC[,SRC...] [idle|header] [SECONDS]
 *
 * Opens N connections to HOST:PORT, from the source addresses SRC in
 * turn (127.0.0.x on loopback: other hosts; ADDR+K is K addresses from
 * ADDR up), at most 20 s for all of them.  "idle" (the default) sends nothing; "header" sends a libfabric
 * tcp connection request header that announces 64 bytes of data and
 * never sends them.  Then it holds them for SECONDS (default 600) or
 * until SIGTERM, and prints a line every second and one at the end:
 *
 *   connected C failed F open O closed K
 *
 * C: connects that completed; F: those that failed (refused, timed
 * out); O: connections still open; K: connected ones the other side has
 * closed or reset since.  At the end every connection is closed with a
 * reset (SO_LINGER 0), so none is left in TIME_WAIT on either side.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

#define MAX_SRC 4096

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* States of a slot (S_NONE: not opened yet). */
enum { S_NONE, S_CONNECTING, S_OPEN, S_FAILED, S_CLOSED };

struct flood {
	int n;
	int *fd;
	unsigned char *st;
	struct pollfd *pfd;
	int connected, failed, closed;
};

/* The libfabric tcp provider's connection request header (struct
 * ofi_ctrl_hdr of 1.17, 32 bytes): version 3, type 0 (connreq), 64
 * bytes of data announced. */
static void header(unsigned char *h)
{
	memset(h, 0, 32);
	h[0] = 3;
	h[1] = 0;
	uint16_t seg = htons(64);
	memcpy(h + 2, &seg, 2);
}

static void rst_close(int fd)
{
	struct linger l = {.l_onoff = 1, .l_linger = 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

/* One round of poll over every live slot, @ms at most. */
static void step(struct flood *f, int send_header, int ms)
{
	int k = 0;
	for (int i = 0; i < f->n; i++) {
		if (f->st[i] != S_CONNECTING && f->st[i] != S_OPEN)
			continue;
		f->pfd[k].fd = f->fd[i];
		f->pfd[k].events = f->st[i] == S_CONNECTING ? POLLOUT : POLLIN;
		f->pfd[k].revents = 0;
		k++;
	}
	if (k == 0 || poll(f->pfd, (nfds_t)k, ms) <= 0)
		return;
	k = 0;
	for (int i = 0; i < f->n; i++) {
		if (f->st[i] != S_CONNECTING && f->st[i] != S_OPEN)
			continue;
		short re = f->pfd[k++].revents;
		if (!re)
			continue;
		if (f->st[i] == S_CONNECTING) {
			int err = 0;
			socklen_t len = sizeof(err);
			getsockopt(f->fd[i], SOL_SOCKET, SO_ERROR, &err, &len);
			if (err) {
				f->st[i] = S_FAILED;
				f->failed++;
				close(f->fd[i]);
				continue;
			}
			f->st[i] = S_OPEN;
			f->connected++;
			if (send_header) {
				unsigned char h[32];
				header(h);
				(void)!send(f->fd[i], h, sizeof(h),
					    MSG_NOSIGNAL);
			}
			continue;
		}
		char b[64];
		ssize_t r = recv(f->fd[i], b, sizeof(b), MSG_DONTWAIT);
		if (r > 0 || (r < 0 && errno == EAGAIN))
			continue; /* data from the other side: still open */
		f->st[i] = S_CLOSED;
		f->closed++;
		close(f->fd[i]);
	}
}

static void report(const struct flood *f)
{
	printf("connected %d failed %d open %d closed %d\n", f->connected,
	       f->failed, f->connected - f->closed, f->closed);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct sockaddr_in dst = {.sin_family = AF_INET};
	static struct sockaddr_in src[MAX_SRC];
	int nsrc = 0;

	if (argc < 5) {
		fprintf(stderr, "usage: flood HOST PORT N SRC[,SRC...] "
				"[idle|header] [SECONDS]\n");
		return 2;
	}
	if (inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1) {
		fprintf(stderr, "flood: HOST: not an IPv4 address: %s\n",
			argv[1]);
		return 2;
	}
	dst.sin_port = htons((uint16_t)atoi(argv[2]));
	struct flood f = {.n = atoi(argv[3])};
	if (f.n <= 0 || f.n > 1000000) {
		fprintf(stderr, "flood: N: 1 to 1000000\n");
		return 2;
	}
	for (char *save = NULL, *t = strtok_r(argv[4], ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		char *plus = strchr(t, '+');
		long k = plus ? strtol(plus + 1, NULL, 10) : 1;
		struct in_addr a;
		if (plus)
			*plus = '\0';
		if (inet_pton(AF_INET, t, &a) != 1 || k < 1) {
			fprintf(stderr, "flood: SRC: not ADDR or ADDR+K: %s\n",
				t);
			return 2;
		}
		for (long j = 0; j < k; j++) {
			if (nsrc == MAX_SRC) {
				fprintf(stderr, "flood: at most %d sources\n",
					MAX_SRC);
				return 2;
			}
			src[nsrc] = (struct sockaddr_in){.sin_family = AF_INET};
			src[nsrc].sin_addr.s_addr =
				htonl(ntohl(a.s_addr) + (uint32_t)j);
			nsrc++;
		}
	}
	int send_header = argc > 5 && !strcmp(argv[5], "header");
	double hold = argc > 6 ? atof(argv[6]) : 600;

	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < (rlim_t)f.n + 16) {
		/* Up to the hard limit: raising that needs CAP_SYS_RESOURCE
		 * (run several floods instead). */
		rl.rlim_cur = rl.rlim_max;
		if (rl.rlim_cur < (rlim_t)f.n + 16 ||
		    setrlimit(RLIMIT_NOFILE, &rl)) {
			fprintf(stderr,
				"flood: %d connections need %d files, the "
				"limit is %llu: run several floods\n",
				f.n, f.n + 16, (unsigned long long)rl.rlim_max);
			return 1;
		}
	}
	f.fd = calloc((size_t)f.n, sizeof(*f.fd));
	f.st = calloc((size_t)f.n, 1);
	f.pfd = calloc((size_t)f.n, sizeof(*f.pfd));
	if (!f.fd || !f.st || !f.pfd)
		return 1;
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	signal(SIGPIPE, SIG_IGN);

	for (int i = 0; i < f.n; i++) {
		int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		int one = 1;
		if (s < 0) {
			fprintf(stderr, "flood: socket: %s\n", strerror(errno));
			return 1;
		}
		setsockopt(s, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one,
			   sizeof(one));
		if (bind(s, (struct sockaddr *)&src[i % nsrc],
			 sizeof(src[0]))) {
			fprintf(stderr, "flood: bind: %s\n", strerror(errno));
			return 1;
		}
		f.fd[i] = s;
		f.st[i] = S_CONNECTING;
		if (connect(s, (struct sockaddr *)&dst, sizeof(dst)) &&
		    errno != EINPROGRESS) {
			f.st[i] = S_FAILED;
			f.failed++;
			close(s);
		}
		/* Take the answers as they come: the listener's backlog is
		 * finite. */
		if (i % 512 == 511)
			step(&f, send_header, 0);
	}
	double t0 = now(), last = t0;
	while (!stop && f.connected + f.failed < f.n && now() - t0 < 20)
		step(&f, send_header, 100);
	for (int i = 0; i < f.n; i++) /* never completed: failed */
		if (f.st[i] == S_CONNECTING) {
			f.st[i] = S_FAILED;
			f.failed++;
			close(f.fd[i]);
		}
	report(&f);
	while (!stop && now() - t0 < hold) {
		step(&f, send_header, 200);
		if (now() - last >= 1) {
			last = now();
			report(&f);
		}
	}
	for (int i = 0; i < f.n; i++)
		if (f.st[i] == S_OPEN)
			rst_close(f.fd[i]);
	report(&f);
	free(f.fd);
	free(f.st);
	free(f.pfd);
	return 0;
}
