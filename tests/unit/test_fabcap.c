/* SPDX-License-Identifier: MIT */
/*
 * test_fabcap.c - the tables behind the fabric listeners' caps
 * (transports/fabcap.c, included here: its tables are static): the
 * count of connections per host stays equal to a plain count through
 * any order of adds and removals (hosts leaving the table move others
 * back in their runs), and admit() and close() keep the caps with
 * descriptors dropped, given again and closed.
 *
 * This binary defines accept() and close() as seedfs does; nothing
 * here listens, so both are the C library's but for the close() of a
 * descriptor admit() kept.
 */
#include "check_run.h"

#include "../../transports/fabcap.c"

#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>

#define POOL 3000

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* Hosts as a flood picks them: most share their first 8 bytes (one
 * IPv6 /48's /64s, or IPv4 mapped), some not. */
static void pool_fill(uint8_t (*h)[16], size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t a = i % 3 ? 0x20010db800000000ull : rnd(), b = rnd();
		if (i % 5 == 0)
			b = i; /* neighbours */
		memcpy(h[i], &a, 8);
		memcpy(h[i] + 8, &b, 8);
	}
}

START_TEST(host_counts_match_a_plain_count)
{
	static uint8_t h[POOL][16];
	static uint32_t want[POOL];
	pthread_once(&cap_once, cap_init);
	pool_fill(h, POOL);
	size_t hosts = 0;
	for (int op = 0; op < 400000; op++) {
		size_t i = rnd() % (op < 200000 ? POOL : POOL / 10);
		/* Adds win early (the table grows), removals later (hosts
		 * leave it, and their runs move back). */
		int add = want[i] == 0 || rnd() % 100 < (op < 200000 ? 60 : 30);
		if (add) {
			ck_assert_int_eq(host_add(h[i]), 0);
			hosts += want[i]++ == 0;
		} else {
			host_sub(h[i]);
			hosts -= --want[i] == 0;
		}
		/* (Plain ifs: a ck_assert each time costs Check a write.) */
		if (host_count(h[i]) != want[i] || cap.nhs != hosts ||
		    cap.nhs * 2 > cap.hmask + 1)
			ck_abort_msg("op %d: host %zu counts %zu, want %u; %zu "
				     "hosts, want %zu, in %zu places",
				     op, i, host_count(h[i]), want[i], cap.nhs,
				     hosts, cap.hmask + 1);
		if (op % 20000 == 0)
			for (size_t k = 0; k < POOL; k++)
				ck_assert_uint_eq(host_count(h[k]), want[k]);
	}
	for (size_t i = 0; i < POOL; i++)
		while (want[i]--)
			host_sub(h[i]);
	ck_assert_uint_eq(cap.nhs, 0);
	for (size_t i = 0; i <= cap.hmask; i++)
		ck_assert_uint_eq(cap.hs[i].n, 0);
}
END_TEST

/* The longest way from a host's home to its place in cap.hs. */
static size_t longest_probe(void)
{
	size_t most = 0;
	for (size_t i = 0; i <= cap.hmask; i++)
		if (cap.hs[i].n) {
			size_t d = (i - host_home(cap.hs[i].h)) & cap.hmask;
			most = d > most ? d : most;
		}
	return most;
}

/* 4096 IPv4 hosts of one /16 (a cluster on 10.x, or a flood's), added
 * and removed in the order they came: they spread over the table
 * (the key mixes the half an IPv4 address is in), and each removal
 * looks at one run. */
START_TEST(ipv4_hosts_spread)
{
	enum { N = 4096 };
	static uint8_t h[N][16];
	pthread_once(&cap_once, cap_init);
	for (size_t i = 0; i < N; i++) {
		memset(h[i], 0, 10);
		h[i][10] = h[i][11] = 0xff;
		h[i][12] = 127;
		h[i][13] = 150;
		h[i][14] = (uint8_t)(i >> 8);
		h[i][15] = (uint8_t)i;
		ck_assert_int_eq(host_add(h[i]), 0);
	}
	size_t most = longest_probe();
	ck_assert_msg(most <= 64, "a host %zu places from its home", most);
	for (size_t i = 0; i < N; i++) {
		host_sub(h[i]);
		if (i == N / 2)
			ck_assert_uint_le(longest_probe(), 64);
	}
	ck_assert_uint_eq(cap.nhs, 0);
}
END_TEST

/* A tcp connection on loopback, accepted: its server end (non-blocking,
 * SO_REUSEADDR clear, as cap_accept leaves one), its host in @h; the
 * client end in *@cl. */
static int tcp_pair(int *cl, uint8_t h[16])
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), zero = 0;
	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, 4), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &al), 0);
	*cl = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(*cl, (struct sockaddr *)&a, sizeof(a)), 0);
	struct sockaddr_storage peer;
	socklen_t pl = sizeof(peer);
	int s = accept4(l, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
	ck_assert_int_ge(s, 0);
	real_close(l);
	fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &zero, sizeof(zero));
	host_of(&peer, h);
	return s;
}

/* One that sends no request in time is reset by the sweep (counted
 * once, as late); its close() later does not count it again. */
START_TEST(late_reset_counted_once)
{
	uint8_t h[16];
	int cl[3], s[3];
	pthread_once(&cap_once, cap_init);
	cap.max_per_host = 128;
	cap.max_conns = 4096;
	for (int i = 0; i < 3; i++)
		s[i] = tcp_pair(&cl[i], h);
	uint64_t t0 = sfs_now_ms();
	pthread_mutex_lock(&cap.lock);
	uint64_t late0 = cap.cut[CUT_LATE];
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(admit(s[i], h, 1, t0 - 100 * (i != 1)),
				 CAP_OK);
	ck_assert_uint_eq(host_count(h), 3);
	/* s[0] and s[2] came 100 ms earlier: they are late first. */
	sweep(t0 - 100 + cap.connreq_ms);
	ck_assert_uint_eq(cap.cut[CUT_LATE] - late0, 2);
	ck_assert_uint_eq(host_count(h), 1);
	ck_assert_uint_eq(cap.live, 1);
	ck_assert_uint_eq(cap.ncs, 3); /* the provider closes them next */
	pthread_mutex_unlock(&cap.lock);
	/* The peer sees the reset. */
	char b;
	ck_assert_int_eq(recv(cl[0], &b, 1, 0), -1);
	ck_assert_int_eq(errno, ECONNRESET);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(close(s[i]), 0);
		real_close(cl[i]);
	}
	ck_assert_uint_eq(host_count(h), 0);
	ck_assert_uint_eq(cap.live, 0);
	ck_assert_uint_eq(cap.ncs, 0);
}
END_TEST

/* Kept connections of host @k of @h, as admit() counts them. */
static size_t kept(const uint8_t h[16])
{
	pthread_mutex_lock(&cap.lock);
	size_t n = host_count(h);
	pthread_mutex_unlock(&cap.lock);
	return n;
}

static int admit_locked(int fd, const uint8_t h[16])
{
	pthread_mutex_lock(&cap.lock);
	int why = admit(fd, h, 0, sfs_now_ms());
	pthread_mutex_unlock(&cap.lock);
	return why;
}

START_TEST(admit_and_close_keep_the_caps)
{
	enum { HOSTS = 10, PER = 5, FDS = 80 };
	static uint8_t h[HOSTS][16];
	int fd[FDS], host[FDS];
	pthread_once(&cap_once, cap_init);
	cap.max_per_host = PER;
	pool_fill(h, HOSTS);
	/* Each host's sixth is refused, and any over 40 in all: as a
	 * plain count says. */
	size_t live = 0, per[HOSTS] = {0};
	cap.max_conns = 40;
	for (int i = 0; i < FDS; i++) {
		fd[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		ck_assert_int_ge(fd[i], 0);
		host[i] = i < 20 ? i % 2 : i % HOSTS;
		int k = host[i], why = admit_locked(fd[i], h[k]);
		int want = per[k] >= PER ? CAP_HOST
			   : live >= 40	 ? CAP_TOTAL
					 : CAP_OK;
		ck_assert_int_eq(why, want);
		if (why == CAP_OK) {
			live++;
			per[k]++;
		} else {
			real_close(fd[i]);
			fd[i] = -1;
		}
	}
	ck_assert_uint_eq(cap.live, 40);
	ck_assert_uint_eq(cap.ncs, 40);
	for (int k = 0; k < HOSTS; k++)
		ck_assert_uint_eq(kept(h[k]), per[k]);
	ck_assert_uint_eq(per[0], PER); /* the per-host cap was reached */
	/* close() forgets one (found by its number): its host has room
	 * again, and the others are found where they moved. */
	size_t closed = 0;
	for (int i = 0; i < FDS; i += 3)
		if (fd[i] >= 0) {
			ck_assert_int_eq(close(fd[i]), 0);
			per[host[i]]--;
			fd[i] = -1;
			closed++;
		}
	ck_assert_uint_eq(cap.live, 40 - closed);
	for (int k = 0; k < HOSTS; k++)
		ck_assert_uint_eq(kept(h[k]), per[k]);
	for (int i = 0; i < FDS; i++) {
		pthread_mutex_lock(&cap.lock);
		ssize_t at = find_fd(fd[i]);
		pthread_mutex_unlock(&cap.lock);
		if (fd[i] < 0)
			continue;
		ck_assert_int_ge(at, 0);
		ck_assert_int_lt(at, cap.ncs);
		ck_assert_int_eq(cap.cs[at].fd, fd[i]);
	}
	int k0 = host[0];
	size_t before = kept(h[k0]);
	int n = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_eq(admit_locked(n, h[k0]), CAP_OK);
	ck_assert_uint_eq(kept(h[k0]), before + 1);
	/* The same number admitted again (its holder closed behind our
	 * back): the old entry goes, counted once. */
	ck_assert_int_eq(admit_locked(n, h[k0]), CAP_OK);
	ck_assert_uint_eq(kept(h[k0]), before + 1);
	ck_assert_uint_eq(cap.live, 40 - closed + 1);
	ck_assert_int_eq(close(n), 0);
	ck_assert_uint_eq(kept(h[k0]), before);
	ck_assert_uint_eq(cap.live, 40 - closed);
	for (int i = 0; i < FDS; i++)
		if (fd[i] >= 0)
			ck_assert_int_eq(close(fd[i]), 0);
	ck_assert_uint_eq(cap.live, 0);
	ck_assert_uint_eq(cap.ncs, 0);
	ck_assert_uint_eq(cap.nhs, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fabcap");
	TCase *t = tcase_create("tables");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, host_counts_match_a_plain_count);
	tcase_add_test(t, ipv4_hosts_spread);
	tcase_add_test(t, late_reset_counted_once);
	tcase_add_test(t, admit_and_close_keep_the_caps);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
