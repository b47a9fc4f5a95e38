/* SPDX-License-Identifier: MIT */
/*
 * fabcap.c - what libfabric's listeners may accept.
 *
 * Every rxm endpoint listens (a seed's for its readers, a mount's for
 * connections back), and libfabric 1.17 gives the application no say in
 * what they accept (docs/deploying.md, "Fabric listeners", has the
 * source references):
 *   - the tcp provider accepts every connection (tcpx_accept, one
 *     accept() each time the listener is readable) and keeps it, one
 *     file descriptor, until the peer sends a connection request or
 *     closes: an idle connection is kept forever;
 *   - when accept() fails (EMFILE) it returns and is called again at
 *     once (the listener stays readable): the process spins, with no
 *     file left for its control port or its disk tier;
 *   - it reads the connection request with blocking recv() calls on the
 *     thread that progresses the endpoint: a header that announces data
 *     and never sends it stops that thread, and every read the endpoint
 *     serves, for as long as the connection stays open;
 *   - rxm handles the requests itself (no FI_CONNREQ reaches the
 *     application) and no FI_TCP_* or FI_OFI_RXM_* setting limits them.
 *
 * So this file defines accept() itself: the seedfs executable exports
 * it, and libfabric's calls bind to it before libc's.  A call on any
 * socket but a listener of one of our endpoints goes straight to
 * accept4().  On ours:
 *   - a tcp listener gets TCP_DEFER_ACCEPT (1 s): a connection reaches
 *     accept() once its peer has sent something, and a peer sends its
 *     request right after its handshake; a bare handshake waits in the
 *     kernel first, holding no file;
 *   - a connection is kept only while its host (its IPv4 address, or
 *     the /64 of its IPv6 one) has fewer than SEEDFS_FABRIC_MAX_PER_HOST
 *     (128) kept, the process fewer than SEEDFS_FABRIC_MAX_CONNS (4096),
 *     and while a reserve of open files is left for everything else (a
 *     quarter of RLIMIT_NOFILE, at least 256 or half of it: the control
 *     port, the disk tier, outgoing connections).  At the cap in all or
 *     the reserve, a connection that has sent something makes room: the
 *     one kept longest that still waits for its request is reset;
 *   - one not kept is reset at once (SO_LINGER 0: nothing left in
 *     TIME_WAIT), counted, logged at most once per 10 s, and the next one
 *     in the backlog is taken in the same call, so a flood drains at once;
 *   - a tcp connection kept is made non-blocking (a request that never
 *     arrives whole cannot stop the progress thread) and its
 *     SO_REUSEADDR is cleared: the provider sets it again when the
 *     connection becomes an endpoint (tcpx_setup_socket).  One still
 *     without it SEEDFS_FABRIC_CONNREQ_MS (10 s) after it was accepted
 *     never sent its request: it is reset (connect(AF_UNSPEC)) through a
 *     duplicate of its descriptor, never closed, so the provider sees the
 *     error and closes it on its own path, and the number is never reused
 *     under the provider;
 *   - with no file left at all, a spare one is given up for a moment to
 *     take the waiting connection and reset it, so the provider does not
 *     spin.
 *
 * What admit() needs (connections kept and not reset, in all and per
 * host) is kept as the table changes, and a connection is found by its
 * number in an index: a flood's accept() and every close() cost the
 * same however many are kept (a scan of them in each accept() made a
 * 20,000-connection flood hold a mount's reads for seconds under ASan).
 *
 * It defines close() too: a connection kept is found again by its number
 * (checked by its inode), and the provider closes it on its own threads;
 * a close of a number in the table runs under cap.lock, so no sweep, cut
 * or peek of that number runs while it is closed (a number closed under
 * such a call could be the kernel's to give again), and its entry goes
 * at once.  A close of another number looks the table up under the lock
 * and closes without it; with an empty table (one atomic load) it goes
 * straight to the C library's.  Nothing here calls close() with
 * cap.lock held (real_close), and close() must not be called from a
 * signal handler (none of ours or our libraries' does).
 *
 * A library build (libseedfs) keeps its accept() and close() local: a
 * program that embeds the engine API keeps libc's, and these caps are
 * off there (said once in the log; sfs_xport_listen_stats says so too).
 */
#include "fabcap.h"
#include "transport.h"

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CAP_MAX_CONNS 4096   /* connections kept in all */
#define CAP_MAX_PER_HOST 128 /* of them from one host */
#define CAP_CONNREQ_MS 10000 /* for a connection request to come */
#define CAP_DRAIN 1024	     /* connections refused in one call at most */
#define CAP_LOG_MS 10000     /* one line per kind at most this often */
#define CAP_TICK_MS 1000
#define CAP_RECHECK_MS 100 /* a cap reached: closed ones looked for */

enum { CAP_FILES, CAP_TOTAL, CAP_HOST, CAP_NREASONS, CAP_OK = -1 };
enum { CUT_LATE, CUT_ROOM, CUT_NREASONS }; /* why one kept was reset */

/* A connection kept: found again by its descriptor and inode. */
struct cap_conn {
	int fd;
	int tcp; /* tcp, not yet an endpoint: waited for */
	int cut; /* reset: the provider closes it next */
	dev_t dev;
	ino_t ino;
	uint64_t at_ms;
	uint8_t host[16]; /* IPv4 mapped, or an IPv6 /64 */
};

/* Connections kept and not reset, per host (open addressing, linear
 * probing; a host whose count falls to 0 leaves the table). */
struct cap_host {
	uint8_t h[16];
	uint32_t n; /* 0: a free place */
};

struct cap_listener {
	struct sockaddr_storage a;
	socklen_t len;
	int tcp;
	int deferred; /* TCP_DEFER_ACCEPT set on it */
	unsigned int refs;
};

static struct {
	pthread_mutex_t lock;
	/* The rest is protected by lock. */
	struct cap_listener *ls;
	size_t nls, cap_ls;
	struct cap_conn *cs;
	size_t ncs, cap_cs;
	/* What admit() and close() look up once per call, kept as the
	 * table changes (no scan of cs: a flood of n connections costs
	 * O(n), not O(n^2)): */
	int32_t *slot;		/* index in cs of each descriptor, or -1 */
	size_t nslot, cap_slot; /* slot[0..nslot) set */
	struct cap_host *hs;	/* live connections of each host */
	size_t hmask, nhs;	/* hs has hmask + 1 places (or none) */
	uint64_t hkey[2];	/* the hash's key, random per process */
	size_t live;		/* kept and not reset */
	uint64_t swept_ms;
	/* Counted since the start, and since the last line. */
	uint64_t refused[CAP_NREASONS], cut[CUT_NREASONS];
	uint64_t unlogged[CAP_NREASONS], unl_cut[CUT_NREASONS];
	uint64_t logged_ms, cut_logged_ms;
	char last[CAP_NREASONS][INET6_ADDRSTRLEN + 4];
	char last_cut[INET6_ADDRSTRLEN + 4];
	int spare; /* kept to accept (and reset) when no file is left */
	unsigned int max_conns, max_per_host, connreq_ms;
	int said; /* the limits were logged */
} cap = {.lock = PTHREAD_MUTEX_INITIALIZER, .spare = -1};

static atomic_size_t cap_nls;	      /* listeners: 0 is the fast path */
static atomic_size_t cap_ncs;	      /* cap.ncs, for close()'s fast path */
static atomic_uint_fast64_t cap_tick; /* the last tick's time */
static pthread_once_t cap_once = PTHREAD_ONCE_INIT;

/* A limit from the environment: @def when unset, said when invalid. */
static unsigned int env_limit(const char *name, unsigned int def,
			      unsigned int lo, unsigned int hi)
{
	const char *s = getenv(name);
	uint64_t v;
	if (!s || !*s)
		return def;
	if (sfs_parse_u64(s, &v) || v < lo || v > hi) {
		SFS_LOG(SFS_WARN, "xport",
			"%s=%s: not a number from %u to %u; "
			"%u is used",
			name, s, lo, hi, def);
		return def;
	}
	return (unsigned int)v;
}

/* fork() waits for cap.lock: a child must not inherit it held by a
 * thread it does not have (its close() of a number in the table would
 * wait forever; libfuse's fusermount3 child closes descriptors). */
static void cap_fork_prepare(void)
{
	pthread_mutex_lock(&cap.lock);
}

static void cap_fork_parent(void)
{
	pthread_mutex_unlock(&cap.lock);
}

/* A child keeps none of the parent's connections: they are the
 * parent's to cap and reset (the child's sweep must not reset a socket
 * it shares with it). */
static void cap_fork_child(void)
{
	for (size_t i = 0; i < cap.ncs; i++)
		cap.slot[cap.cs[i].fd] = -1;
	if (cap.hs)
		memset(cap.hs, 0, (cap.hmask + 1) * sizeof(*cap.hs));
	cap.nhs = cap.live = 0;
	cap.ncs = 0;
	atomic_store(&cap_ncs, 0);
	pthread_mutex_unlock(&cap.lock);
}

/* splitmix64's finalizer: every bit of @x moves every bit out. */
static uint64_t mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void cap_init(void)
{
	pthread_atfork(cap_fork_prepare, cap_fork_parent, cap_fork_child);
	cap.max_conns =
		env_limit("SEEDFS_FABRIC_MAX_CONNS", CAP_MAX_CONNS, 1, 1000000);
	cap.max_per_host = env_limit("SEEDFS_FABRIC_MAX_PER_HOST",
				     CAP_MAX_PER_HOST, 1, 1000000);
	cap.connreq_ms = env_limit("SEEDFS_FABRIC_CONNREQ_MS", CAP_CONNREQ_MS,
				   100, 600000);
	/* Hosts are a peer's choice (any /64 of its own): a key it cannot
	 * know, so it cannot pick hosts that collide in cap.hs. */
	ssize_t got;
	do /* not blocking: a mount may start before the pool is ready */
		got = getrandom(cap.hkey, sizeof(cap.hkey), GRND_NONBLOCK);
	while (got < 0 && errno == EINTR);
	if (got != (ssize_t)sizeof(cap.hkey)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		cap.hkey[0] = mix64((uint64_t)ts.tv_nsec ^ (uint64_t)getpid());
		cap.hkey[1] = mix64(cap.hkey[0] ^ (uint64_t)(uintptr_t)&cap);
	}
}

/* The soft limit of open files, and the reserve kept of it. */
static uint64_t files_limit(uint64_t *reserve)
{
	struct rlimit rl;
	uint64_t lim = 1024;
	if (!getrlimit(RLIMIT_NOFILE, &rl))
		lim = rl.rlim_cur == RLIM_INFINITY ? 1u << 30 : rl.rlim_cur;
	uint64_t r = lim / 4, floor = lim / 2 < 256 ? lim / 2 : 256;
	*reserve = r > floor ? r : floor;
	return lim;
}

/* Is accept() in this process ours (the executable's), not libc's? */
static int cap_active(void)
{
	static atomic_int active = -1;
	int a = atomic_load(&active);
	if (a < 0) {
		a = dlsym(RTLD_DEFAULT, "accept") == (void *)&accept;
		atomic_store(&active, a);
	}
	return a;
}

static int same_addr(const struct sockaddr_storage *l, socklen_t llen,
		     const struct sockaddr_storage *a, socklen_t alen)
{
	if (l->ss_family != a->ss_family)
		return 0;
	if (l->ss_family == AF_INET && llen >= sizeof(struct sockaddr_in) &&
	    alen >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *x = (const void *)l,
					 *y = (const void *)a;
		return x->sin_port == y->sin_port &&
		       (x->sin_addr.s_addr == htonl(INADDR_ANY) ||
			x->sin_addr.s_addr == y->sin_addr.s_addr);
	}
	if (l->ss_family == AF_INET6 && llen >= sizeof(struct sockaddr_in6) &&
	    alen >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *x = (const void *)l,
					  *y = (const void *)a;
		return x->sin6_port == y->sin6_port &&
		       (IN6_IS_ADDR_UNSPECIFIED(&x->sin6_addr) ||
			!memcmp(&x->sin6_addr, &y->sin6_addr, 16));
	}
	return 0;
}

/* The listener at @a, or NULL (cap.lock held). */
static struct cap_listener *find_listener(const struct sockaddr_storage *a,
					  socklen_t len)
{
	for (size_t i = 0; i < cap.nls; i++)
		if (same_addr(&cap.ls[i].a, cap.ls[i].len, a, len))
			return &cap.ls[i];
	return NULL;
}

/*
 * A tcp listener hands a connection to accept() once its peer has sent
 * something (TCP_DEFER_ACCEPT, 1 s: a bare handshake waits that long in
 * the kernel, holding no file).  A peer sends its request right after
 * its handshake, so a peer's connection comes with its request; one
 * that comes without is a flood's (admit tells them apart).
 */
static void defer_fd(int lfd)
{
	int one = 1;
	setsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &one, sizeof(one));
}

/* Find the listening socket at @a among our descriptors: defer it. */
static void defer_scan(const struct sockaddr_storage *a, socklen_t len)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int fd = atoi(e->d_name), v = 0;
		struct sockaddr_storage me;
		socklen_t vl = sizeof(v), ml = sizeof(me);
		if (fd <= 2 || fd == dirfd(d) ||
		    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) || !v ||
		    getsockname(fd, (struct sockaddr *)&me, &ml) || ml != len ||
		    memcmp(&me, a, len))
			continue;
		defer_fd(fd);
	}
	if (d)
		closedir(d);
}

void fab_cap_listen(const void *addr, size_t len, int tcp)
{
	struct sockaddr_storage a = {0};
	const struct sockaddr *sa = addr;
	if (len < sizeof(sa_family_t) || len > sizeof(a) ||
	    (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
		return;
	memcpy(&a, addr, len);
	pthread_once(&cap_once, cap_init);
	if (!cap_active()) {
		static atomic_bool told;
		if (!atomic_exchange(&told, 1))
			SFS_LOG(SFS_INFO, "xport",
				"fabric listeners: accept() is libc's in this "
				"program: no caps on incoming fabric "
				"connections (firewall them: "
				"docs/deploying.md)");
		return;
	}
	pthread_mutex_lock(&cap.lock);
	struct cap_listener *l = find_listener(&a, (socklen_t)len);
	if (l && l->len == (socklen_t)len && !memcmp(&l->a, &a, len)) {
		l->refs++;
	} else if (!sfs_grow((void **)&cap.ls, &cap.cap_ls, cap.nls + 1,
			     sizeof(*cap.ls))) {
		cap.ls[cap.nls++] = (struct cap_listener){
			.a = a, .len = (socklen_t)len, .tcp = tcp, .refs = 1};
		atomic_store(&cap_nls, cap.nls);
	}
	if (cap.spare < 0)
		cap.spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int say = !cap.said;
	cap.said = 1;
	pthread_mutex_unlock(&cap.lock);
	if (tcp)
		defer_scan(&a, (socklen_t)len);
	if (say) {
		uint64_t reserve, lim = files_limit(&reserve);
		SFS_LOG(SFS_INFO, "xport",
			"fabric listeners: at most %u connections kept, %u "
			"per host, %llu of %llu open files kept for the rest; "
			"a connection request within %u ms",
			cap.max_conns, cap.max_per_host,
			(unsigned long long)reserve, (unsigned long long)lim,
			cap.connreq_ms);
	}
}

void fab_cap_unlisten(const void *addr, size_t len)
{
	struct sockaddr_storage a = {0};
	if (len < sizeof(sa_family_t) || len > sizeof(a) || !cap_active())
		return;
	memcpy(&a, addr, len);
	pthread_mutex_lock(&cap.lock);
	for (size_t i = 0; i < cap.nls; i++) {
		struct cap_listener *l = &cap.ls[i];
		if (l->len != (socklen_t)len || memcmp(&l->a, &a, len))
			continue;
		if (--l->refs == 0) {
			*l = cap.ls[--cap.nls];
			atomic_store(&cap_nls, cap.nls);
		}
		break;
	}
	pthread_mutex_unlock(&cap.lock);
}

/* @sa's host as 16 bytes: IPv4 mapped, IPv6 cut to its /64. */
static void host_of(const struct sockaddr_storage *sa, uint8_t h[16])
{
	memset(h, 0, 16);
	if (sa->ss_family == AF_INET) {
		h[10] = h[11] = 0xff;
		memcpy(h + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return;
	}
	const struct in6_addr *a =
		&((const struct sockaddr_in6 *)sa)->sin6_addr;
	memcpy(h, a, IN6_IS_ADDR_V4MAPPED(a) ? 16 : 8);
}

/* A host of host_of as text: "10.0.0.7", "2001:db8:1:2::/64". */
static void host_txt(const uint8_t h[16], char *txt, size_t len)
{
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
	char b[INET6_ADDRSTRLEN];
	if (!memcmp(h, mapped, 12)) {
		inet_ntop(AF_INET, h + 12, txt, (socklen_t)len);
		return;
	}
	inet_ntop(AF_INET6, h, b, sizeof(b));
	snprintf(txt, len, "%s/64", b);
}

/* Where @h's run starts in cap.hs: both halves mixed with the key (an
 * IPv4 host is all in its second half). */
static size_t host_home(const uint8_t h[16])
{
	uint64_t a, b;
	memcpy(&a, h, 8);
	memcpy(&b, h + 8, 8);
	return (size_t)mix64(mix64(a ^ cap.hkey[0]) ^ b ^ cap.hkey[1]) &
	       cap.hmask;
}

/* The place of @h in cap.hs: its own, or the free one it would take
 * (cap.lock held; cap.hs allocated). */
static size_t host_place(const uint8_t h[16])
{
	size_t i = host_home(h);
	while (cap.hs[i].n && memcmp(cap.hs[i].h, h, 16))
		i = (i + 1) & cap.hmask;
	return i;
}

/* Connections of @h kept and not reset (cap.lock held). */
static size_t host_count(const uint8_t h[16])
{
	return cap.hs ? cap.hs[host_place(h)].n : 0;
}

/* One more connection of @h (cap.lock held).  0 or -ENOMEM. */
static int host_add(const uint8_t h[16])
{
	size_t size = cap.hs ? cap.hmask + 1 : 0;
	if (cap.hs) {
		struct cap_host *e = &cap.hs[host_place(h)];
		if (e->n) {
			e->n++;
			return 0;
		}
	}
	if ((cap.nhs + 1) * 2 > size) { /* at most half full */
		size_t nsize = size ? size * 2 : 64;
		struct cap_host *old = cap.hs, *hs = calloc(nsize, sizeof(*hs));
		if (!hs)
			return -ENOMEM;
		cap.hs = hs;
		cap.hmask = nsize - 1;
		for (size_t i = 0; i < size; i++)
			if (old[i].n)
				cap.hs[host_place(old[i].h)] = old[i];
		free(old);
	}
	struct cap_host *e = &cap.hs[host_place(h)];
	memcpy(e->h, h, 16);
	e->n = 1;
	cap.nhs++;
	return 0;
}

/* One fewer connection of @h (cap.lock held; it has one): at 0 it
 * leaves the table, and each later one of the run whose home is not
 * between the hole and itself moves back into the hole (one pass over
 * the run). */
static void host_sub(const uint8_t h[16])
{
	size_t i = host_place(h);
	if (!cap.hs[i].n || --cap.hs[i].n)
		return;
	cap.nhs--;
	for (size_t j = (i + 1) & cap.hmask; cap.hs[j].n;
	     j = (j + 1) & cap.hmask) {
		size_t k = host_home(cap.hs[j].h);
		int stays = i <= j ? i < k && k <= j : i < k || k <= j;
		if (stays)
			continue;
		cap.hs[i] = cap.hs[j];
		cap.hs[j].n = 0;
		i = j;
	}
}

/* @c no longer counts against the caps: reset, or dropped (cap.lock
 * held). */
static void uncount(const struct cap_conn *c)
{
	cap.live--;
	host_sub(c->host);
}

/* The index in cap.cs of the connection kept as @fd, or -1 (cap.lock
 * held). */
static ssize_t find_fd(int fd)
{
	return fd >= 0 && (size_t)fd < cap.nslot ? cap.slot[fd] : -1;
}

/* Drop the connection at @i (cap.lock held). */
static void drop(size_t i)
{
	if (!cap.cs[i].cut)
		uncount(&cap.cs[i]);
	cap.slot[cap.cs[i].fd] = -1;
	cap.cs[i] = cap.cs[--cap.ncs];
	if (i < cap.ncs)
		cap.slot[cap.cs[i].fd] = (int32_t)i;
	atomic_store(&cap_ncs, cap.ncs);
}

/* The C library's close (the sanitizers' where they intercept it):
 * ours below would take cap.lock again. */
static int real_close(int fd)
{
	extern int __close(int);
	return __close(fd);
}

/*
 * Reset @c if it is still waiting for its connection request, for
 * @why (CUT_*; cap.lock held): through a duplicate of its descriptor,
 * checked to be the same socket, so a number the provider closed and
 * the kernel gave to something else meanwhile is never touched.
 * Returns 1 when it was reset.
 */
static int cut_if_waiting(struct cap_conn *c, int why)
{
	int v = 1;
	socklen_t l = sizeof(v);
	if (getsockopt(c->fd, SOL_SOCKET, SO_REUSEADDR, &v, &l) || v) {
		c->tcp = 0; /* an endpoint now (or gone: the next sweep) */
		return 0;
	}
	int d = fcntl(c->fd, F_DUPFD_CLOEXEC, 0), cut = 0;
	struct stat st;
	if (d < 0)
		return 0; /* no file left: the next sweep */
	l = sizeof(v);
	if (!fstat(d, &st) && st.st_dev == c->dev && st.st_ino == c->ino &&
	    !getsockopt(d, SOL_SOCKET, SO_REUSEADDR, &v, &l) && !v) {
		struct sockaddr un = {.sa_family = AF_UNSPEC};
		if (!connect(d, &un, sizeof(un))) {
			c->cut = cut = 1;
			uncount(c);
			cap.cut[why]++;
			cap.unl_cut[why]++;
			host_txt(c->host, cap.last_cut, sizeof(cap.last_cut));
		}
	}
	real_close(d);
	return cut;
}

/* Has the peer of @fd sent something already? */
static int talking(int fd)
{
	char b;
	return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
}

/*
 * Make room: reset the connection kept longest that still waits for its
 * request (cap.lock held).  A peer's own sends its request as soon as
 * it is connected, so the one waiting longest is the likeliest to be a
 * flood's.  Returns 1 when one was reset.
 */
static int make_room(void)
{
	for (int tries = 0; tries < 8; tries++) {
		struct cap_conn *old = NULL;
		for (size_t i = 0; i < cap.ncs; i++) {
			struct cap_conn *c = &cap.cs[i];
			if (c->tcp && !c->cut &&
			    (!old || c->at_ms < old->at_ms))
				old = c;
		}
		if (!old)
			return 0;
		if (cut_if_waiting(old, CUT_ROOM))
			return 1;
		if (old->tcp)
			return 0; /* no file to reset it with: not now */
	}
	return 0;
}

/* Forget the connections closed since, and reset those that sent no
 * request in time (cap.lock held). */
static void sweep(uint64_t now)
{
	cap.swept_ms = now;
	for (size_t i = 0; i < cap.ncs;) {
		struct cap_conn *c = &cap.cs[i];
		struct stat st;
		if (fstat(c->fd, &st) || st.st_dev != c->dev ||
		    st.st_ino != c->ino) {
			drop(i);
			continue;
		}
		if (c->tcp && !c->cut && now - c->at_ms >= cap.connreq_ms)
			cut_if_waiting(c, CUT_LATE);
		i++;
	}
}

/*
 * May the connection just accepted as @fd from @host be kept (cap.lock
 * held)?  CAP_OK (then it is counted), or the cap it is over.
 */
static int admit(int fd, const uint8_t host[16], int tcp, uint64_t now)
{
	uint64_t reserve, lim = files_limit(&reserve);
	size_t from = 0, live = 0;
	/* A number the kernel gave again: its last holder is closed. */
	ssize_t old = find_fd(fd);
	if (old >= 0)
		drop((size_t)old);
	/* Those reset are on their way out: not counted. */
	for (int pass = 0; pass < 2; pass++) {
		from = host_count(host);
		live = cap.live;
		if ((from < cap.max_per_host && live < cap.max_conns) || pass ||
		    now - cap.swept_ms < CAP_RECHECK_MS)
			break;
		sweep(now); /* some may be closed by now */
	}
	if (from >= cap.max_per_host)
		return CAP_HOST;
	/* Into the reserve: the connections kept would leave less than
	 * it, or the number given is in it (the kernel gives the lowest
	 * free: less than the reserve is left).  There, or at the cap in
	 * all, a connection that has sent something already (a peer sends
	 * its request as soon as it is connected) is kept by resetting one
	 * that waits for its request (the files in use stay as many); one
	 * that has sent nothing is not. */
	uint64_t room = lim > reserve ? lim - reserve : 0;
	int files = (uint64_t)fd >= room || live >= room;
	if ((files || live >= cap.max_conns) && (!talking(fd) || !make_room()))
		return files ? CAP_FILES : CAP_TOTAL;
	struct stat st;
	if (fstat(fd, &st) ||
	    sfs_grow((void **)&cap.cs, &cap.cap_cs, cap.ncs + 1,
		     sizeof(*cap.cs)) ||
	    sfs_grow((void **)&cap.slot, &cap.cap_slot, (size_t)fd + 1,
		     sizeof(*cap.slot)) ||
	    host_add(host))
		return CAP_FILES; /* cannot be tracked: not kept */
	while (cap.nslot <= (size_t)fd)
		cap.slot[cap.nslot++] = -1;
	cap.live++;
	cap.slot[fd] = (int32_t)cap.ncs;
	struct cap_conn *c = &cap.cs[cap.ncs++];
	atomic_store(&cap_ncs, cap.ncs);
	*c = (struct cap_conn){.fd = fd,
			       .tcp = tcp,
			       .dev = st.st_dev,
			       .ino = st.st_ino,
			       .at_ms = now};
	memcpy(c->host, host, 16);
	return CAP_OK;
}

/* Close @fd with a reset: nothing left in TIME_WAIT here or there. */
static void reset_close(int fd)
{
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	real_close(fd);
}

/* The lines owed: at most one of each kind every CAP_LOG_MS. */
static void report(uint64_t now)
{
	static const char *const why[] = {"into the reserve of open files",
					  "over the cap in all",
					  "over the cap per host"};
	char line[512] = "", last[INET6_ADDRSTRLEN + 4] = "";
	uint64_t n[CAP_NREASONS] = {0}, cut[CUT_NREASONS] = {0};
	uint64_t total = 0, tcut = 0;
	uint64_t reserve, lim = files_limit(&reserve);
	size_t o = 0;

	pthread_mutex_lock(&cap.lock);
	if (cap.unlogged[0] + cap.unlogged[1] + cap.unlogged[2] &&
	    now - cap.logged_ms >= CAP_LOG_MS) {
		memcpy(n, cap.unlogged, sizeof(n));
		memset(cap.unlogged, 0, sizeof(cap.unlogged));
		cap.logged_ms = now;
		for (int i = 0; i < CAP_NREASONS; i++)
			total += cap.refused[i];
	}
	for (int i = 0; i < CAP_NREASONS; i++) {
		if (!n[i] || o >= sizeof(line))
			continue;
		int k = snprintf(line + o, sizeof(line) - o,
				 "%s%llu %s (last from %s)", o ? ", " : "",
				 (unsigned long long)n[i], why[i], cap.last[i]);
		o += k > 0 ? (size_t)k : 0;
	}
	if (cap.unl_cut[CUT_LATE] + cap.unl_cut[CUT_ROOM] &&
	    now - cap.cut_logged_ms >= CAP_LOG_MS) {
		memcpy(cut, cap.unl_cut, sizeof(cut));
		memset(cap.unl_cut, 0, sizeof(cap.unl_cut));
		cap.cut_logged_ms = now;
		tcut = cap.cut[CUT_LATE] + cap.cut[CUT_ROOM];
		snprintf(last, sizeof(last), "%s", cap.last_cut);
	}
	pthread_mutex_unlock(&cap.lock);
	if (o)
		SFS_LOG(SFS_WARN, "xport",
			"fabric listeners refused connections: %s; %llu "
			"refused in all (caps: %u per host, %u in all, %llu "
			"of %llu open files kept; docs/deploying.md)",
			line, (unsigned long long)total, cap.max_per_host,
			cap.max_conns, (unsigned long long)reserve,
			(unsigned long long)lim);
	if (cut[CUT_LATE] + cut[CUT_ROOM])
		SFS_LOG(SFS_WARN, "xport",
			"fabric listeners reset connections that sent no "
			"connection request: %llu after %u ms, %llu to make "
			"room for newer ones (last from %s); %llu in all",
			(unsigned long long)cut[CUT_LATE], cap.connreq_ms,
			(unsigned long long)cut[CUT_ROOM], last,
			(unsigned long long)tcut);
}

/* A connection from @h refused for @why (cap.lock held): counted, its
 * host remembered for the log. */
static void refused(int why, const uint8_t h[16])
{
	cap.refused[why]++;
	cap.unlogged[why]++;
	host_txt(h, cap.last[why], sizeof(cap.last[why]));
}

/*
 * No file left to accept with: the spare one is given up for a moment,
 * so the connection waiting can be taken and reset (else the listener
 * stays readable and the provider calls again at once, forever).
 * cap.lock held.
 */
static void refuse_without_files(int lfd)
{
	struct sockaddr_storage peer;
	socklen_t pl = sizeof(peer);
	uint8_t h[16];
	if (cap.spare < 0)
		return;
	real_close(cap.spare);
	int s = accept4(lfd, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
	if (s >= 0) {
		host_of(&peer, h);
		reset_close(s);
		refused(CAP_FILES, h);
	}
	cap.spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* accept() on one of our listeners (@tcp: the tcp provider's). */
static int cap_accept(int lfd, struct sockaddr *addr, socklen_t *addrlen,
		      int tcp)
{
	int fl = fcntl(lfd, F_GETFL);
	int nonblock = fl >= 0 && (fl & O_NONBLOCK);
	int said = 0;
	for (int n = 0; n < CAP_DRAIN; n++) {
		struct sockaddr_storage peer;
		socklen_t pl = sizeof(peer);
		int s = accept4(lfd, (struct sockaddr *)&peer, &pl, 0);
		if (s < 0) {
			int e = errno;
			if (e == EMFILE || e == ENFILE) {
				pthread_mutex_lock(&cap.lock);
				refuse_without_files(lfd);
				pthread_mutex_unlock(&cap.lock);
				said = 1;
				e = nonblock ? EAGAIN : ECONNABORTED;
			}
			if (said)
				report(sfs_now_ms());
			errno = e;
			return -1;
		}
		uint8_t h[16];
		host_of(&peer, h);
		if (tcp) {
			/* Before it is counted: a sweep must find it
			 * waiting, not an endpoint. */
			int zero = 0;
			fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
			setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &zero,
				   sizeof(zero));
		}
		uint64_t now = sfs_now_ms();
		pthread_mutex_lock(&cap.lock);
		int why = admit(s, h, tcp, now);
		if (why != CAP_OK)
			refused(why, h);
		pthread_mutex_unlock(&cap.lock);
		if (why == CAP_OK) {
			if (addr && addrlen) {
				memcpy(addr, &peer,
				       pl < *addrlen ? pl : *addrlen);
				*addrlen = pl;
			}
			if (said)
				report(now);
			return s;
		}
		reset_close(s);
		said = 1;
		if (!nonblock) {
			/* Another accept() could wait: say it, return. */
			report(now);
			errno = ECONNABORTED;
			return -1;
		}
	}
	report(sfs_now_ms());
	errno = EAGAIN;
	return -1;
}

/*
 * The accept() that libfabric's calls bind to (see the top).  The
 * signature is glibc's (a transparent union under _GNU_SOURCE).
 */
int accept(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict addrlen)
{
	struct sockaddr *a = addr.__sockaddr__;
	if (atomic_load(&cap_nls)) {
		struct sockaddr_storage me;
		socklen_t ml = sizeof(me);
		if (!getsockname(fd, (struct sockaddr *)&me, &ml)) {
			pthread_mutex_lock(&cap.lock);
			struct cap_listener *l = find_listener(&me, ml);
			int tcp = l ? l->tcp : 0, defer = tcp && !l->deferred;
			if (defer)
				l->deferred = 1;
			pthread_mutex_unlock(&cap.lock);
			if (defer) /* if defer_scan missed it */
				defer_fd(fd);
			if (l)
				return cap_accept(fd, a, addrlen, tcp);
		}
	}
	return accept4(fd, a, addrlen, 0);
}

/*
 * The close() that the provider's calls (and every other library's)
 * bind to (see the top).  A number in the table is closed under
 * cap.lock, its entry dropped first.
 */
int close(int fd)
{
	if (!atomic_load(&cap_ncs))
		return real_close(fd);
	/* No cancellation inside (libfuse cancels its workers, and the
	 * close is a cancellation point): the lock is always given back. */
	int old, found = 0;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	pthread_mutex_lock(&cap.lock);
	ssize_t i = find_fd(fd);
	if (i >= 0) {
		drop((size_t)i);
		found = 1;
	}
	/* A number not kept is closed without the lock (a close that
	 * blocks, on a network file, holds up no one else): it cannot
	 * be one admit() adds meanwhile, which is fresh from accept4(). */
	if (!found)
		pthread_mutex_unlock(&cap.lock);
	int rc = real_close(fd), e = errno;
	if (found)
		pthread_mutex_unlock(&cap.lock);
	pthread_setcancelstate(old, NULL);
	errno = e;
	return rc;
}

void fab_cap_tick(void)
{
	if (!atomic_load(&cap_nls))
		return;
	uint64_t now = sfs_now_ms();
	if (now - atomic_load(&cap_tick) < CAP_TICK_MS)
		return;
	atomic_store(&cap_tick, now);
	if (pthread_mutex_trylock(&cap.lock))
		return;
	sweep(now);
	pthread_mutex_unlock(&cap.lock);
	report(now);
}

void sfs_xport_listen_stats(struct sfs_xport_listen_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->capped = cap_active();
	pthread_mutex_lock(&cap.lock);
	st->open = cap.live;
	st->refused_files = cap.refused[CAP_FILES];
	st->refused_total = cap.refused[CAP_TOTAL];
	st->refused_host = cap.refused[CAP_HOST];
	st->late_reset = cap.cut[CUT_LATE];
	st->room_reset = cap.cut[CUT_ROOM];
	pthread_mutex_unlock(&cap.lock);
}

void sfs_xport_listen_metrics(struct sfs_metrics *m)
{
	struct sfs_xport_listen_stats st;
	sfs_xport_listen_stats(&st);
	sfs_metrics_family(m, "seedfs_fabric_conn_caps", "gauge",
			   "1 when this process caps the connections its "
			   "fabric listeners accept (docs/deploying.md).");
	sfs_metrics_u64(m, "seedfs_fabric_conn_caps", (uint64_t)st.capped,
			NULL);
	sfs_metrics_family(m, "seedfs_fabric_conns_open", "gauge",
			   "Connections the fabric listeners accepted and "
			   "keep, now.");
	sfs_metrics_u64(m, "seedfs_fabric_conns_open", st.open, NULL);
	sfs_metrics_family(m, "seedfs_fabric_conns_refused_total", "counter",
			   "Connections to the fabric listeners reset as "
			   "soon as accepted, by the cap they were over.");
	sfs_metrics_u64(m, "seedfs_fabric_conns_refused_total", st.refused_host,
			"cap", "host", NULL);
	sfs_metrics_u64(m, "seedfs_fabric_conns_refused_total",
			st.refused_total, "cap", "total", NULL);
	sfs_metrics_u64(m, "seedfs_fabric_conns_refused_total",
			st.refused_files, "cap", "files", NULL);
	sfs_metrics_family(m, "seedfs_fabric_conns_dropped_total", "counter",
			   "Connections kept, then reset for sending no "
			   "connection request: in time (late), or to make "
			   "room for a newer one at a cap (room).");
	sfs_metrics_u64(m, "seedfs_fabric_conns_dropped_total", st.late_reset,
			"why", "late", NULL);
	sfs_metrics_u64(m, "seedfs_fabric_conns_dropped_total", st.room_reset,
			"why", "room", NULL);
}
