/* SPDX-License-Identifier: MIT */
/*
 * test_fabpeers.c - the libfabric backend's peer operations under churn:
 * peer_add, peer_reset and peer_remove from several threads at once
 * while reads go on (a source's poller removes a peer while the cache's
 * worker resets another; a source restart does both within a second),
 * and a read that waits for room in the provider's queue while a peer
 * operation wants the endpoints.
 *
 * Real parts: two tcp seeds on loopback, one replica transport.  The
 * provider's queue is made small (FI_OFI_RXM_TX_SIZE, set before
 * libfabric starts) so that a read of many pieces must wait for room.
 */
#include "common/util.h"
#include "transports/transport.h"

#include "bound.h"
#include "check_run.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LEN (4u << 20)
#define PIECE 4096u
#define NPIECES 256 /* one read: many more operations than the queue */
#define TIMEOUT_MS 3000u

static struct sfs_xport *seed1, *seed2, *replica;
static struct sfs_xport_mr *mr1, *mr2;
static struct sfs_xport_mr *lmr; /* tcp: local buffers need none */
static uint8_t *data1, *data2;
static uint64_t raddr1, key1, raddr2, key2;
static struct sfs_xport_info in1, in2;
static uint64_t peer1, peer2;

static struct sfs_xport *open_one(enum sfs_xport_role role)
{
	char err[SFS_XPORT_ERR_MAX];
	struct sfs_xport_cfg cfg = {.protocol = "tcp",
				    .role = role,
				    .node = "127.0.0.1",
				    .timeout_ms = TIMEOUT_MS};
	struct sfs_xport *x;
	ck_assert_msg(sfs_xport_open(&cfg, &x, err, sizeof(err)) == 0, "%s",
		      err);
	return x;
}

static uint8_t *seed_bytes(struct sfs_xport *s, uint8_t salt,
			   struct sfs_xport_mr **mr, uint64_t *raddr,
			   uint64_t *key)
{
	uint8_t raw[SFS_XPORT_RAWKEY_MAX];
	size_t rl;
	uint8_t *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	for (size_t i = 0; i < LEN; i++)
		p[i] = (uint8_t)(i * 131 + (i >> 12) + salt);
	ck_assert_int_eq(sfs_xport_mr_reg(s, p, LEN, SFS_XPORT_REMOTE_READ, mr),
			 0);
	sfs_xport_mr_export(*mr, raddr, key, raw, &rl);
	return p;
}

static void setup(void)
{
	seed1 = open_one(SFS_XPORT_SEED);
	seed2 = open_one(SFS_XPORT_SEED);
	replica = open_one(SFS_XPORT_REPLICA);
	data1 = seed_bytes(seed1, 0, &mr1, &raddr1, &key1);
	data2 = seed_bytes(seed2, 7, &mr2, &raddr2, &key2);
	sfs_xport_info(seed1, &in1);
	sfs_xport_info(seed2, &in2);
	ck_assert_int_eq(
		sfs_xport_peer_add(replica, in1.addr, in1.addr_len, &peer1), 0);
	ck_assert_int_eq(
		sfs_xport_peer_add(replica, in2.addr, in2.addr_len, &peer2), 0);
}

static void teardown(void)
{
	sfs_xport_close(replica);
	sfs_xport_mr_dereg(mr1);
	sfs_xport_mr_dereg(mr2);
	sfs_xport_close(seed1);
	sfs_xport_close(seed2);
	munmap(data1, LEN);
	munmap(data2, LEN);
}

/* Entries of directory @path now (not . and ..): -1 if unreadable. */
static int dir_entries(const char *path)
{
	DIR *d = opendir(path);
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Threads of this process now. */
static int nthreads(void)
{
	return dir_entries("/proc/self/task");
}

struct rdone {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done, status;
};

static void on_done(void *arg, int status)
{
	struct rdone *d = arg;
	pthread_mutex_lock(&d->lock);
	d->done = 1;
	d->status = status;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

/* One read of NPIECES pieces from @peer at @off into @buf: 0, or the
 * error; *post_ms how long posting took.  Waits for the completion at
 * most twice the timeout. */
static int read_many(uint64_t peer, uint64_t raddr, uint64_t key, size_t off,
		     uint8_t *buf, uint64_t *post_ms)
{
	struct sfs_xport_rd rds[NPIECES];
	/* Not completed in time, its buffer stays the transport's: kept
	 * (the test fails on the error). */
	struct rdone *d = calloc(1, sizeof(*d));
	if (!d || sfs_cond_init(&d->cond))
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	for (size_t i = 0; i < NPIECES; i++)
		rds[i] = (struct sfs_xport_rd){
			.local = buf + i * PIECE,
			.lmr = lmr,
			.raddr = raddr + off + i * PIECE,
			.rkey = key,
			.len = PIECE,
		};
	uint64_t t0 = sfs_now_ms();
	int rc;
	do {
		rc = sfs_xport_read(replica, peer, rds, NPIECES, on_done, d);
	} while (rc == -EAGAIN && sfs_now_ms() - t0 < TIMEOUT_MS);
	*post_ms = sfs_now_ms() - t0;
	if (!rc) {
		struct timespec ts = sfs_abstime(2 * TIMEOUT_MS);
		pthread_mutex_lock(&d->lock);
		while (!d->done &&
		       !pthread_cond_timedwait(&d->cond, &d->lock, &ts))
			;
		int done = d->done;
		rc = done ? d->status : -ENOLINK; /* never completed */
		pthread_mutex_unlock(&d->lock);
		if (!done)
			return rc; /* d and the buffer: the transport's */
	}
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
	return rc;
}

struct reader {
	uint64_t peer, raddr, key;
	const uint8_t *want;
	atomic_int *stop;
	int reads, bad, errors, last_err;
	uint64_t max_post_ms;
};

static void *reader_fn(void *arg)
{
	struct reader *rd = arg;
	uint8_t *buf = malloc((size_t)NPIECES * PIECE);
	for (size_t k = 0; !atomic_load(rd->stop); k++) {
		size_t off = (k * 37 % (LEN / PIECE - NPIECES)) * PIECE;
		uint64_t post_ms;
		memset(buf, 0, (size_t)NPIECES * PIECE);
		int rc = read_many(rd->peer, rd->raddr, rd->key, off, buf,
				   &post_ms);
		rd->reads++;
		if (post_ms > rd->max_post_ms)
			rd->max_post_ms = post_ms;
		if (rc == -ENOLINK) {
			/* Its buffer may still be written: a new one. */
			rd->errors++;
			rd->last_err = rc;
			buf = malloc((size_t)NPIECES * PIECE);
		} else if (rc) {
			rd->errors++;
			rd->last_err = rc;
		} else if (memcmp(buf, rd->want + off,
				  (size_t)NPIECES * PIECE)) {
			rd->bad++;
		}
	}
	free(buf);
	return NULL;
}

struct churn {
	int kind; /* 0: reset peer2; 1: add and remove a third peer */
	int rounds;
	uint64_t max_ms;
	int failures;
};

static void *churn_fn(void *arg)
{
	struct churn *ch = arg;
	for (int i = 0; i < ch->rounds; i++) {
		uint64_t t0 = sfs_now_ms(), p;
		if (ch->kind == 0) {
			ch->failures +=
				sfs_xport_peer_reset(replica, peer2) != 0;
		} else if (!sfs_xport_peer_add(replica, in2.addr, in2.addr_len,
					       &p)) {
			sfs_xport_peer_remove(replica, p);
		} else {
			ch->failures++;
		}
		uint64_t el = sfs_now_ms() - t0;
		if (el > ch->max_ms)
			ch->max_ms = el;
		usleep(1000);
	}
	return NULL;
}

/*
 * Resets of one peer and adds and removes of others, from two threads
 * at once, while a third reads another peer: every read byte-exact, no
 * operation failing, and one progress thread at the end (not two, none
 * joined twice).
 */
START_TEST(peer_ops_from_threads)
{
	atomic_int stop = 0;
	int before = nthreads();
	struct reader rd = {.peer = peer1,
			    .raddr = raddr1,
			    .key = key1,
			    .want = data1,
			    .stop = &stop};
	struct churn a = {.kind = 0, .rounds = 60},
		     b = {.kind = 1, .rounds = 60};
	pthread_t tr, ta, tb, tc;
	struct churn c = {.kind = 0, .rounds = 60};
	ck_assert_int_eq(pthread_create(&tr, NULL, reader_fn, &rd), 0);
	ck_assert_int_eq(pthread_create(&ta, NULL, churn_fn, &a), 0);
	ck_assert_int_eq(pthread_create(&tb, NULL, churn_fn, &b), 0);
	ck_assert_int_eq(pthread_create(&tc, NULL, churn_fn, &c), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	pthread_join(tc, NULL);
	atomic_store(&stop, 1);
	pthread_join(tr, NULL);
	ck_assert_int_eq(a.failures + b.failures + c.failures, 0);
	ck_assert_int_gt(rd.reads, 0);
	ck_assert_msg(rd.errors == 0, "%d of %d reads failed, the last: %s",
		      rd.errors, rd.reads, strerror(-rd.last_err));
	ck_assert_int_eq(rd.bad, 0);
	/* The threads of this test are gone: what is left is what was
	 * (one progress thread per transport, the provider's own). */
	int after = nthreads();
	ck_assert_msg(after == before, "%d threads before, %d after", before,
		      after);
	/* And the transport still works. */
	uint8_t *buf = malloc((size_t)NPIECES * PIECE);
	uint64_t post_ms;
	ck_assert_int_eq(read_many(peer2, raddr2, key2, 0, buf, &post_ms), 0);
	ck_assert_mem_eq(buf, data2, (size_t)NPIECES * PIECE);
	free(buf);
}
END_TEST

/*
 * A read whose pieces do not all fit the provider's queue waits for
 * room; a peer operation meanwhile stops the progress that would make
 * room.  The read must not hold the endpoints while it waits: peer
 * operations end within a second, and the reads complete byte-exact
 * (before: a reset waited out the read's timeout, and the read failed
 * with ETIMEDOUT).
 */
START_TEST(read_waiting_for_room_lets_peer_ops_in)
{
	atomic_int stop = 0;
	struct reader rd = {.peer = peer1,
			    .raddr = raddr1,
			    .key = key1,
			    .want = data1,
			    .stop = &stop};
	struct churn a = {.kind = 0, .rounds = 40};
	pthread_t tr, ta;
	ck_assert_int_eq(pthread_create(&tr, NULL, reader_fn, &rd), 0);
	usleep(20000);
	ck_assert_int_eq(pthread_create(&ta, NULL, churn_fn, &a), 0);
	pthread_join(ta, NULL);
	atomic_store(&stop, 1);
	pthread_join(tr, NULL);
	ck_assert_int_eq(a.failures, 0);
	ck_assert_msg(rd.errors == 0, "%d of %d reads failed, the last: %s",
		      rd.errors, rd.reads, strerror(-rd.last_err));
	ck_assert_int_eq(rd.bad, 0);
	ck_assert_msg(a.max_ms < 1000,
		      "a peer reset took %" PRIu64 " ms (reads: %d)", a.max_ms,
		      rd.reads);
}
END_TEST

/* Open fds of this process now (the directory's own among them). */
static int nfds(void)
{
	return dir_entries("/proc/self/fd");
}

/*
 * A source that restarts on every run: its peer added, read, removed,
 * 100 times.  A removed peer's index is reused under a new id, so the
 * transport keeps no more peers than live ones; the ids of removed
 * peers name nothing (reads -ENOTCONN with nothing posted, resets
 * -EINVAL), not the peer that has the index now; the retired
 * connections close (fds back to where they were).
 */
START_TEST(removed_peer_slots_reused)
{
	uint8_t *buf = malloc((size_t)NPIECES * PIECE);
	uint64_t post_ms, prev = UINT64_MAX, first = 0;
	ck_assert_ptr_nonnull(buf);
	/* One run first: the provider's own fds (listening, its
	 * progress) are then open. */
	uint64_t p;
	ck_assert_int_eq(
		sfs_xport_peer_add(replica, in2.addr, in2.addr_len, &p), 0);
	ck_assert_int_eq(read_many(p, raddr2, key2, 0, buf, &post_ms), 0);
	sfs_xport_peer_remove(replica, p);
	usleep(200 * 1000);
	int fds0 = nfds();
	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(
			sfs_xport_peer_add(replica, in2.addr, in2.addr_len, &p),
			0);
		if (!i)
			first = p;
		/* The index of the first removed peer, over and over. */
		ck_assert_uint_eq((uint32_t)p, (uint32_t)first);
		ck_assert_uint_ne(p, prev);
		ck_assert_int_eq(read_many(p, raddr2, key2, (size_t)i * PIECE,
					   buf, &post_ms),
				 0);
		ck_assert_mem_eq(buf, data2 + (size_t)i * PIECE,
				 (size_t)NPIECES * PIECE);
		if (prev != UINT64_MAX) {
			struct sfs_xport_rd rd = {.local = buf,
						  .lmr = lmr,
						  .raddr = raddr2,
						  .rkey = key2,
						  .len = PIECE};
			ck_assert_int_eq(sfs_xport_read(replica, prev, &rd, 1,
							on_done, NULL),
					 -ENOTCONN);
			ck_assert_int_eq(sfs_xport_peer_reset(replica, prev),
					 -EINVAL);
			sfs_xport_peer_remove(replica, prev); /* a no-op */
		}
		sfs_xport_peer_remove(replica, p);
		prev = p;
	}
	/* Retired connections close once their reads are over. */
	int fds = nfds();
	for (int i = 0; i < 100 && fds > fds0; i++) {
		usleep(10 * 1000);
		fds = nfds();
	}
	printf("%d fds before the runs, %d after\n", fds0, fds);
	SFS_TEST_BOUND_LE("fds_over_start", 0, fds - fds0);
	/* The peers set up before are untouched. */
	ck_assert_int_eq(read_many(peer1, raddr1, key1, 0, buf, &post_ms), 0);
	ck_assert_mem_eq(buf, data1, (size_t)NPIECES * PIECE);
	free(buf);
}
END_TEST

int main(void)
{
	/* Before libfabric starts: a queue of 8 operations, so a read of
	 * 256 pieces waits for room. */
	setenv("FI_OFI_RXM_TX_SIZE", "8", 1);
	Suite *s = suite_create("fabpeers");
	TCase *t = tcase_create("tcp");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, peer_ops_from_threads);
	tcase_add_test(t, read_waiting_for_room_lets_peer_ops_in);
	tcase_add_test(t, removed_peer_slots_reused);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
