/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of sfs_cache_inherit over a real transport (libfabric tcp
 * on loopback, a seed endpoint and a replica endpoint in one process):
 * generation 2 of an object, one chunk changed, two swapped and a
 * pair of equal chunks, takes every cached chunk of generation 1 whose
 * checksums it names, pulls the changed one only, and serves the exact
 * bytes of generation 2; what checksums disagree on, or what SHA-256
 * cannot vouch for when the cache checks everything against it, is
 * pulled.
 */
#include "check_run.h"
#include "bound.h"

#include "cache/cache.h"
#include "common/util.h"
#include "transports/transport.h"

#include <check.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define CHUNK (64u << 10)
#define SHIFT 14 /* four checksum blocks per chunk */
#define NCHUNKS 16
#define LEN ((size_t)CHUNK * NCHUNKS - 777) /* an odd tail */
#define CHANGED 3 /* one byte of chunk 3 differs in generation 2 */
#define SWAP_A 5  /* chunks 5 and 6 swap places */
#define SWAP_B 6
#define TWIN 9 /* chunk 9 is chunk 8's bytes, in both generations */

static struct sfs_xport *seed, *replica;
static struct sfs_xport_mr *mr1, *mr2;
static uint8_t *gen1, *gen2;
static uint64_t peer_id;
static struct sfs_cache_piece piece1, piece2;

struct sums {
	uint64_t *xxh3;
	uint8_t *sha;
};

static struct sums sums_of(const uint8_t *d)
{
	size_t n = (LEN + (1u << SHIFT) - 1) >> SHIFT;
	struct sums s = {malloc(n * 8), malloc(n * 32)};
	ck_assert(s.xxh3 && s.sha);
	for (size_t k = 0; k < n; k++) {
		size_t len = SFS_MIN((size_t)1 << SHIFT, LEN - (k << SHIFT));
		s.xxh3[k] = XXH3_64bits(d + (k << SHIFT), len);
		ck_assert_int_eq(gnutls_hash_fast(GNUTLS_DIG_SHA256,
						  d + (k << SHIFT), len,
						  s.sha + 32 * k),
				 0);
	}
	return s;
}

static void sums_free(struct sums *s)
{
	free(s->xxh3);
	free(s->sha);
}

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
	gen1 = malloc(LEN);
	gen2 = malloc(LEN);
	ck_assert(gen1 && gen2);
	for (size_t i = 0; i < LEN; i++)
		gen1[i] = (uint8_t)(i * 131 + (i >> 16) + (i >> 9));
	memcpy(gen1 + (size_t)TWIN * CHUNK, gen1 + (size_t)(TWIN - 1) * CHUNK,
	       CHUNK);
	memcpy(gen2, gen1, LEN);
	gen2[(size_t)CHANGED * CHUNK + 3 * (1u << SHIFT) + 5] ^= 1;
	memcpy(gen2 + (size_t)SWAP_A * CHUNK, gen1 + (size_t)SWAP_B * CHUNK,
	       CHUNK);
	memcpy(gen2 + (size_t)SWAP_B * CHUNK, gen1 + (size_t)SWAP_A * CHUNK,
	       CHUNK);
	ck_assert_int_eq(
		sfs_xport_mr_reg(seed, gen1, LEN, SFS_XPORT_REMOTE_READ, &mr1),
		0);
	ck_assert_int_eq(
		sfs_xport_mr_reg(seed, gen2, LEN, SFS_XPORT_REMOTE_READ, &mr2),
		0);
	sfs_xport_mr_export(mr1, &piece1.raddr, &piece1.key, raw, &rl);
	sfs_xport_mr_export(mr2, &piece2.raddr, &piece2.key, raw, &rl);
	piece1.len = piece2.len = LEN;
	sfs_xport_info(seed, &in);
	ck_assert_int_eq(
		sfs_xport_peer_add(replica, in.addr, in.addr_len, &peer_id), 0);
}

static void teardown(void)
{
	sfs_xport_close(replica);
	sfs_xport_mr_dereg(mr1);
	sfs_xport_mr_dereg(mr2);
	sfs_xport_close(seed);
	free(gen1);
	free(gen2);
}

/* A cache of room for both generations; *p the seed, trusted. */
static struct sfs_cache *new_cache(int sha256_all, uint32_t *p)
{
	char err[256];
	struct sfs_cache *c;
	struct sfs_cache_cfg cfg = {.xport = replica,
				    .size = 4ull * CHUNK * NCHUNKS,
				    .chunk_size = CHUNK,
				    .timeout_ms = 5000,
				    .sha256_all = sha256_all};
	ck_assert_msg(sfs_cache_new(&cfg, &c, err, sizeof(err)) == 0, "%s",
		      err);
	ck_assert_int_eq(sfs_cache_add_peer(c, peer_id, "seed", p), 0);
	sfs_cache_peer_trusted(c, *p, 1);
	return c;
}

/* A set of one object with @s's checksums (SHA-256 if @sha). */
static uint32_t add_set(struct sfs_cache *c, const struct sums *s, int sha)
{
	struct sfs_cache_obj o = {.len = LEN,
				  .csum_shift = SHIFT,
				  .xxh3 = s->xxh3,
				  .sha256 = sha ? s->sha : NULL};
	uint32_t set;
	ck_assert_int_eq(sfs_cache_add_set(c, "gen", &o, 1, &set), 0);
	return set;
}

static void add_holder(struct sfs_cache *c, uint32_t set, uint32_t p,
		       const struct sfs_cache_piece *pc)
{
	struct sfs_cache_hobj ho = {.pieces = pc, .npieces = 1};
	uint32_t h;
	ck_assert_int_eq(sfs_cache_add_holder(c, set, p, &ho, 1, 0, &h), 0);
}

/* Every byte of @set through the cache equals @want. */
static void read_all(struct sfs_cache *c, uint32_t set, const uint8_t *want)
{
	for (uint64_t off = 0; off < LEN;) {
		struct sfs_chunk *ch;
		const uint8_t *p;
		size_t avail;
		ck_assert_int_eq(sfs_cache_get(c, set, 0, off, &ch, &p, &avail),
				 0);
		size_t n = SFS_MIN(avail, LEN - off);
		ck_assert_msg(!memcmp(p, want + off, n),
			      "wrong bytes at %" PRIu64, off);
		sfs_cache_put(c, ch);
		off += n;
	}
}

static uint64_t pulls(struct sfs_cache *c)
{
	struct sfs_cache_stats st;
	sfs_cache_stats(c, &st);
	return st.pulls;
}

/* Generation 1 read whole; generation 2's set made, inheriting it;
 * returns what it took.  *s1, *s2 the sets. */
static uint64_t two_gens(struct sfs_cache *c, uint32_t p, struct sums *a,
			 struct sums *b, int sha, uint32_t *s1, uint32_t *s2)
{
	uint64_t chunks, bytes;
	*s1 = add_set(c, a, sha);
	add_holder(c, *s1, p, &piece1);
	read_all(c, *s1, gen1);
	ck_assert_uint_eq(pulls(c), NCHUNKS);
	*s2 = add_set(c, b, sha);
	ck_assert_int_eq(sfs_cache_inherit(c, *s2, *s1, &chunks, &bytes), 0);
	add_holder(c, *s2, p, &piece2);
	return chunks;
}

START_TEST(unchanged_chunks_taken)
{
	uint32_t p, s1, s2;
	struct sfs_cache *c = new_cache(0, &p);
	struct sums a = sums_of(gen1), b = sums_of(gen2);
	uint64_t took = two_gens(c, p, &a, &b, 1, &s1, &s2);
	/* Every chunk but the changed one: the swapped pair where they
	 * went, each of the twins in its own place. */
	SFS_TEST_BOUND_EQ("inherit_taken", NCHUNKS - 1, took);
	read_all(c, s2, gen2);
	SFS_TEST_BOUND_EQ("inherit_pulls_after", NCHUNKS + 1, pulls(c));
	struct sfs_cache_stats st;
	sfs_cache_stats(c, &st);
	ck_assert_uint_eq(st.inherited, NCHUNKS - 1);
	ck_assert_uint_eq(st.inherited_bytes, LEN - CHUNK);
	/* Generation 1 lost them: its reader pulls them again, exactly. */
	read_all(c, s1, gen1);
	ck_assert_uint_eq(pulls(c), NCHUNKS + 1 + NCHUNKS - 1);
	sfs_cache_free(c);
	sums_free(&a);
	sums_free(&b);
}
END_TEST

/* A chunk whose XXH3-64s agree but whose SHA-256 does not is pulled. */
START_TEST(sha256_disagrees_pulled)
{
	uint32_t p, s1, s2;
	struct sfs_cache *c = new_cache(0, &p);
	struct sums a = sums_of(gen1), b = sums_of(gen2);
	b.sha[32 * (((size_t)CHUNK * 2) >> SHIFT) + 7] ^= 1; /* chunk 2 */
	uint64_t took = two_gens(c, p, &a, &b, 1, &s1, &s2);
	SFS_TEST_BOUND_EQ("inherit_sha_taken", NCHUNKS - 2, took);
	sfs_cache_free(c);
	sums_free(&a);
	sums_free(&b);
}
END_TEST

/* Under sha256_all, only SHA-256 vouches: generation 2 without it
 * takes nothing; with it, what it names. */
START_TEST(strong_needs_sha256)
{
	uint32_t p, s1, s2, s3;
	uint64_t chunks, bytes;
	struct sfs_cache *c = new_cache(1, &p);
	struct sums a = sums_of(gen1), b = sums_of(gen2);
	s1 = add_set(c, &a, 1);
	add_holder(c, s1, p, &piece1);
	read_all(c, s1, gen1);
	s2 = add_set(c, &b, 0);
	ck_assert_int_eq(sfs_cache_inherit(c, s2, s1, &chunks, &bytes), 0);
	SFS_TEST_BOUND_EQ("inherit_strong_no_sha_taken", 0, chunks);
	s3 = add_set(c, &b, 1);
	ck_assert_int_eq(sfs_cache_inherit(c, s3, s1, &chunks, &bytes), 0);
	SFS_TEST_BOUND_EQ("inherit_strong_taken", NCHUNKS - 1, chunks);
	add_holder(c, s3, p, &piece2);
	read_all(c, s3, gen2);
	ck_assert_uint_eq(pulls(c), NCHUNKS + 1);
	sfs_cache_free(c);
	sums_free(&a);
	sums_free(&b);
}
END_TEST

/* A set already in use takes what it does not have: not a chunk it
 * holds already, nor one a reader of the old set pins; never from
 * itself. */
START_TEST(held_set_takes_what_it_lacks)
{
	uint32_t p, s1, s2;
	uint64_t chunks, bytes;
	struct sfs_cache *c = new_cache(0, &p);
	struct sums a = sums_of(gen1), b = sums_of(gen2);
	s1 = add_set(c, &a, 1);
	add_holder(c, s1, p, &piece1);
	read_all(c, s1, gen1);
	s2 = add_set(c, &b, 1);
	add_holder(c, s2, p, &piece2);
	struct sfs_chunk *ch, *pin;
	const uint8_t *d;
	size_t avail;
	/* Chunk 0 of s2 pulled; chunk 1 of s1 pinned by a reader. */
	ck_assert_int_eq(sfs_cache_get(c, s2, 0, 0, &ch, &d, &avail), 0);
	sfs_cache_put(c, ch);
	ck_assert_int_eq(sfs_cache_get(c, s1, 0, CHUNK, &pin, &d, &avail), 0);
	ck_assert_int_eq(sfs_cache_inherit(c, s2, s1, &chunks, &bytes), 0);
	SFS_TEST_BOUND_EQ("inherit_held_taken", NCHUNKS - 3, chunks);
	ck_assert(!memcmp(d, gen1 + CHUNK, avail)); /* the pinned one */
	sfs_cache_put(c, pin);
	read_all(c, s2, gen2);
	/* 16 + chunk 0 + the changed one + the pinned one. */
	ck_assert_uint_eq(pulls(c), NCHUNKS + 3);
	ck_assert_int_eq(sfs_cache_inherit(c, s1, s1, &chunks, &bytes),
			 -EINVAL);
	ck_assert_uint_eq(chunks, 0);
	sfs_cache_free(c);
	sums_free(&a);
	sums_free(&b);
}
END_TEST

static Suite *inherit_suite(void)
{
	Suite *s = suite_create("inherit");
	TCase *t = tcase_create("tcp");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, unchanged_chunks_taken);
	tcase_add_test(t, sha256_disagrees_pulled);
	tcase_add_test(t, strong_needs_sha256);
	tcase_add_test(t, held_set_takes_what_it_lacks);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return sfs_check_run(inherit_suite());
}
