/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the chunk cache over a real transport: a "seed" endpoint
 * and a "replica" endpoint of libfabric tcp on loopback in one process.
 * Single flight (one pull per chunk whatever the readers), byte-exact
 * data, eviction within the bound.
 */
#include "check_run.h"

#include "cache/cache.h"
#include "common/util.h"
#include "transports/transport.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#define CHUNK (64u << 10)
#define NCHUNKS 48

static struct sfs_xport *seed, *replica;
static struct sfs_xport_mr *seed_mr;
static uint8_t *data;
static size_t data_len = (size_t)CHUNK * NCHUNKS - 1234; /* odd tail */
static uint64_t peer;
static struct sfs_cache_region region;

static void setup(void)
{
	char err[SFS_XPORT_ERR_MAX];
	struct sfs_xport_cfg sc = {.protocol = "tcp",
				   .role = SFS_XPORT_SEED,
				   .node = "127.0.0.1",
				   .timeout_ms = 5000};
	struct sfs_xport_cfg rc = {.protocol = "tcp",
				   .role = SFS_XPORT_REPLICA,
				   .timeout_ms = 5000};
	struct sfs_xport_info in;
	uint8_t raw[SFS_XPORT_RAWKEY_MAX];
	size_t rl;

	ck_assert_msg(sfs_xport_open(&sc, &seed, err, sizeof(err)) == 0, "%s",
		      err);
	ck_assert_msg(sfs_xport_open(&rc, &replica, err, sizeof(err)) == 0,
		      "%s", err);
	data = mmap(NULL, data_len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (size_t i = 0; i < data_len; i++)
		data[i] = (uint8_t)(i * 131 + (i >> 16));
	ck_assert_int_eq(sfs_xport_mr_reg(seed, data, data_len,
					  SFS_XPORT_REMOTE_READ, &seed_mr),
			 0);
	sfs_xport_mr_export(seed_mr, &region.raddr, &region.key, raw, &rl);
	region.len = data_len;
	sfs_xport_info(seed, &in);
	ck_assert_int_eq(
		sfs_xport_peer_add(replica, in.addr, in.addr_len, &peer), 0);
}

static void teardown(void)
{
	sfs_xport_close(replica);
	sfs_xport_mr_dereg(seed_mr);
	sfs_xport_close(seed);
	munmap(data, data_len);
}

static struct sfs_cache *new_cache(size_t nchunks, uint32_t *src)
{
	char err[256];
	struct sfs_cache *c;
	struct sfs_cache_cfg cfg = {.xport = replica,
				    .size = (uint64_t)CHUNK * nchunks,
				    .chunk_size = CHUNK,
				    .timeout_ms = 5000};
	ck_assert_msg(sfs_cache_new(&cfg, &c, err, sizeof(err)) == 0, "%s",
		      err);
	ck_assert_int_eq(
		sfs_cache_add_source(c, peer, "test seed", &region, 1, src), 0);
	return c;
}

/* Read [off, off+len) through the cache and compare. */
static int read_check(struct sfs_cache *c, uint32_t src, uint64_t off,
		      uint64_t len)
{
	while (len) {
		struct sfs_chunk *ch;
		const uint8_t *p;
		size_t avail;
		int rc = sfs_cache_get(c, src, 0, off, &ch, &p, &avail);
		if (rc)
			return rc;
		size_t n = avail < len ? avail : (size_t)len;
		int bad = memcmp(p, data + off, n) != 0;
		sfs_cache_put(c, ch);
		if (bad)
			return -EBADMSG;
		off += n;
		len -= n;
	}
	return 0;
}

struct reader {
	struct sfs_cache *c;
	uint32_t src;
	unsigned seed;
	int rc;
};

static void *reader(void *arg)
{
	struct reader *r = arg;
	/* Every chunk, in an order of this reader's own. */
	for (unsigned k = 0; k < NCHUNKS && !r->rc; k++) {
		unsigned i = (k * 7 + r->seed * 13) % NCHUNKS;
		uint64_t off = (uint64_t)i * CHUNK + (r->seed % 5) * 17;
		uint64_t len = SFS_MIN(3000u, data_len - off);
		r->rc = read_check(r->c, r->src, off, len);
	}
	return NULL;
}

START_TEST(single_flight)
{
	uint32_t src;
	struct sfs_cache *c = new_cache(NCHUNKS + 8, &src);
	pthread_t th[8];
	struct reader rd[8];
	for (int i = 0; i < 8; i++) {
		rd[i] = (struct reader){
			.c = c, .src = src, .seed = (unsigned)i};
		pthread_create(&th[i], NULL, reader, &rd[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(rd[i].rc, 0);
	}
	struct sfs_cache_stats st;
	sfs_cache_stats(c, &st);
	/* 8 readers of 48 chunks: 48 pulls, every byte exactly once. */
	ck_assert_uint_eq(st.pulls, NCHUNKS);
	ck_assert_uint_eq(st.bytes_pulled, data_len);
	ck_assert_uint_eq(st.hits + st.misses, 8 * NCHUNKS);
	ck_assert_uint_eq(st.errors_transport, 0);
	sfs_cache_free(c);
}
END_TEST

START_TEST(eviction_within_bound)
{
	uint32_t src;
	struct sfs_cache *c = new_cache(16, &src); /* a third of the data */
	for (int pass = 0; pass < 2; pass++)
		ck_assert_int_eq(read_check(c, src, 0, data_len), 0);
	struct sfs_cache_stats st;
	sfs_cache_stats(c, &st);
	ck_assert_uint_le(st.used, st.size);
	ck_assert_uint_eq(st.size, 16ull * CHUNK);
	/* Nothing survives a pass over three times the cache: 2 x 48. */
	ck_assert_uint_eq(st.pulls, 2 * NCHUNKS);
	/* Ranges outside the region are refused. */
	struct sfs_chunk *ch;
	const uint8_t *p;
	size_t avail;
	ck_assert_int_eq(sfs_cache_get(c, src, 0, data_len, &ch, &p, &avail),
			 -EINVAL);
	ck_assert_int_eq(sfs_cache_get(c, src, 1, 0, &ch, &p, &avail), -EINVAL);
	sfs_cache_free(c);
}
END_TEST

START_TEST(checksums_verified_and_mismatch_refused)
{
	uint32_t shift = 14; /* 16 KiB checksum chunks in 64 KiB chunks */
	size_t n = (size_t)((data_len + (1u << shift) - 1) >> shift);
	uint64_t *sums = malloc(n * sizeof(*sums));
	for (size_t k = 0; k < n; k++) {
		size_t len =
			SFS_MIN((size_t)1 << shift, data_len - (k << shift));
		sums[k] = XXH3_64bits(data + (k << shift), len);
	}
	sums[9] ^= 1; /* the seed "published" a wrong one: chunk 2's */
	char err[256];
	struct sfs_cache *c;
	struct sfs_cache_cfg cfg = {.xport = replica,
				    .size = (uint64_t)CHUNK * 16,
				    .chunk_size = CHUNK,
				    .timeout_ms = 5000};
	struct sfs_cache_region reg = region;
	uint32_t src;
	reg.csum_shift = shift;
	reg.xxh3 = sums;
	ck_assert_int_eq(sfs_cache_new(&cfg, &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_cache_add_source(c, peer, "test", &reg, 1, &src),
			 0);
	/* Chunks 0, 1 and 3 verify and read right. */
	ck_assert_int_eq(read_check(c, src, 0, 2 * CHUNK), 0);
	ck_assert_int_eq(read_check(c, src, 3 * CHUNK, CHUNK), 0);
	/* Chunk 2 never: pulled, pulled once more, refused. */
	ck_assert_int_eq(read_check(c, src, 2 * CHUNK + 100, 10), -EBADMSG);
	struct sfs_cache_stats st;
	sfs_cache_stats(c, &st);
	ck_assert_uint_eq(st.checksum_errors, 2);
	/* Wrong bytes from a live seed: the seed is not down, the others
	 * read at once (a retry once kept the first pull's deadline and
	 * could mark a healthy seed down). */
	struct sfs_cache_peer_info pi;
	ck_assert_int_eq(sfs_cache_peer(c, src, &pi), 0);
	ck_assert_int_eq(pi.state, SFS_PEER_UP);
	ck_assert_uint_eq(st.timeouts, 0);
	ck_assert_uint_eq(st.unavailable, 0);
	ck_assert_int_eq(read_check(c, src, 4 * CHUNK, CHUNK), 0);
	/* Checksum chunks larger than cache chunks cannot be verified. */
	reg.csum_shift = 20;
	ck_assert_int_eq(sfs_cache_add_source(c, peer, "t", &reg, 1, &src),
			 -EINVAL);
	sfs_cache_free(c);
	free(sums);
}
END_TEST

/* Once the transport is quiesced (an unmount), a read is refused, never
 * posted on an endpoint that is gone (that crashed a mount whose disk
 * tier still had misses to pull), and the cache stops cleanly. */
START_TEST(read_after_quiesce_refused)
{
	uint32_t src;
	struct sfs_cache *c = new_cache(16, &src);
	ck_assert_int_eq(read_check(c, src, 0, CHUNK), 0);
	/* What an unmount does: queued pulls fail, nothing posts. */
	ck_assert_int_eq(sfs_cache_prefetch(c, src, 0, CHUNK, 8 * CHUNK, 0), 0);
	sfs_cache_stop(c);
	/* Pulls still in flight may be left to the transport (it says how
	 * many): the cache then keeps its memory. */
	size_t left = sfs_xport_quiesce(replica);
	static uint8_t buf[CHUNK];
	struct sfs_xport_rd rd = {.local = buf,
				  .raddr = region.raddr,
				  .rkey = region.key,
				  .len = CHUNK};
	ck_assert_int_eq(sfs_xport_read(replica, peer, &rd, 1, NULL, NULL),
			 -ESHUTDOWN);
	struct sfs_chunk *ch;
	const uint8_t *p;
	size_t avail;
	ck_assert_int_eq(sfs_cache_get(c, src, 0, 0, &ch, &p, &avail),
			 -ESHUTDOWN);
	sfs_cache_free_quiesced(c, left);
}
END_TEST

/*
 * A pull the transport loses (shm reports a failed copy without saying
 * which request it was, so that request never completes) does not wedge
 * its chunk: its reader gives up once later pulls overtook it for the
 * timeout, the transport is reset, and the next read of the chunk pulls
 * it again.  The seed's memory is a file truncated under it.
 */
START_TEST(lost_pull_recovered)
{
	char err[SFS_XPORT_ERR_MAX], path[] = "/tmp/seedfs-lost.XXXXXX";
	struct sfs_xport_cfg sc = {
		.protocol = "shm", .role = SFS_XPORT_SEED, .timeout_ms = 1000};
	struct sfs_xport_cfg rc = {.protocol = "shm",
				   .role = SFS_XPORT_REPLICA,
				   .timeout_ms = 1000};
	struct sfs_xport *s, *r;
	ck_assert_msg(sfs_xport_open(&sc, &s, err, sizeof(err)) == 0, "%s",
		      err);
	ck_assert_msg(sfs_xport_open(&rc, &r, err, sizeof(err)) == 0, "%s",
		      err);
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	size_t len = 4 * CHUNK;
	uint8_t *content = malloc(len);
	for (size_t i = 0; i < len; i++)
		content[i] = (uint8_t)(i * 29);
	ck_assert_int_eq(pwrite(fd, content, len, 0), (ssize_t)len);
	uint8_t *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	struct sfs_xport_mr *mr, *mr2;
	ck_assert_int_eq(
		sfs_xport_mr_reg(s, map, len, SFS_XPORT_REMOTE_READ, &mr), 0);
	ck_assert_int_eq(sfs_xport_mr_reg(s, data, data_len,
					  SFS_XPORT_REMOTE_READ, &mr2),
			 0);
	struct sfs_cache_region regs[2] = {{.len = len}, {.len = data_len}};
	uint8_t raw[SFS_XPORT_RAWKEY_MAX];
	size_t rl;
	sfs_xport_mr_export(mr, &regs[0].raddr, &regs[0].key, raw, &rl);
	sfs_xport_mr_export(mr2, &regs[1].raddr, &regs[1].key, raw, &rl);
	struct sfs_xport_info in;
	uint64_t p2;
	sfs_xport_info(s, &in);
	ck_assert_int_eq(sfs_xport_peer_add(r, in.addr, in.addr_len, &p2), 0);
	struct sfs_cache *c;
	struct sfs_cache_cfg cfg = {.xport = r,
				    .size = (uint64_t)CHUNK * 32,
				    .chunk_size = CHUNK,
				    .timeout_ms = 1000};
	uint32_t src;
	ck_assert_int_eq(sfs_cache_new(&cfg, &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_cache_add_source(c, p2, "lossy", regs, 2, &src),
			 0);

	ck_assert_int_eq(ftruncate(fd, 0), 0);
	/* The lost one, then reads that complete after it. */
	ck_assert_int_eq(sfs_cache_prefetch(c, src, 0, 0, CHUNK, 1), 0);
	usleep(100000);
	uint64_t t0 = sfs_now_ms();
	struct sfs_chunk *ch;
	const uint8_t *p;
	size_t avail;
	for (uint64_t off = 0; off < data_len; off += CHUNK) {
		ck_assert_int_eq(sfs_cache_get(c, src, 1, off, &ch, &p, &avail),
				 0);
		sfs_cache_put(c, ch);
	}
	int got = sfs_cache_get(c, src, 0, 0, &ch, &p, &avail);
	uint64_t el = sfs_now_ms() - t0;
	ck_assert_msg(got == -ETIMEDOUT || got == -EIO, "got %d", got);
	ck_assert_uint_le(el, 3000);
	/* The file whole again: the chunk is pulled anew, byte-exact. */
	ck_assert_int_eq(pwrite(fd, content, len, 0), (ssize_t)len);
	int ok = -1;
	for (int i = 0; i < 50 && ok; i++) {
		ok = sfs_cache_get(c, src, 0, 100, &ch, &p, &avail);
		if (!ok) {
			ck_assert_mem_eq(p, content + 100, 1000);
			sfs_cache_put(c, ch);
		} else {
			usleep(100000);
		}
	}
	ck_assert_int_eq(ok, 0);
	struct sfs_cache_stats st;
	sfs_cache_stats(c, &st);
	ck_assert_uint_ge(st.reconnects, 1);
	sfs_cache_stop(c);
	sfs_cache_free_quiesced(c, sfs_xport_quiesce(r));
	sfs_xport_close(r);
	sfs_xport_mr_dereg(mr);
	sfs_xport_mr_dereg(mr2);
	sfs_xport_close(s);
	munmap(map, len);
	close(fd);
	free(content);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cache");
	TCase *t = tcase_create("tcp");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, single_flight);
	tcase_add_test(t, eviction_within_bound);
	tcase_add_test(t, checksums_verified_and_mismatch_refused);
	tcase_add_test(t, read_after_quiesce_refused);
	tcase_add_test(t, lost_pull_recovered);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
