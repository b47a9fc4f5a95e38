/* SPDX-License-Identifier: MIT */
/*
 * test_announce.c - the re-seeders a seed lists: a ring of 1,000 that
 * every member sees the same (each its own place, its members at -1,
 * -2, -4, ...), in the order of the keyed hashes of their addresses
 * (two secrets, two orders), the cap of 1,024 live ones and of a few
 * per caller address, addresses bound to the caller, runs claimed only
 * with their proof (a run that moves, a squatter of a live or lapsed
 * one refused), a ring that shrinks when announcements lapse with no
 * announcement after them, the rendezvous subsets (each asker the 16
 * that rank first for it, together covering the table), and the
 * announce route's parser and refusal log limiter.
 */
#include "bound.h"
#include "check_run.h"

#include "control/run.h"
#include "seed/announce.h"
#include "seed/ctl_impl.h"

#include <check.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define T0 1000000 /* the clock the tests start from, ms */

/* A key of the ring for the tests: every byte @b. */
static struct sfs_announced *table(uint8_t b, uint32_t per_caller)
{
	uint8_t key[SFS_ANNOUNCED_KEY_LEN];
	memset(key, b, sizeof(key));
	struct sfs_announced_cfg cfg = {.key = key, .per_caller = per_caller};
	struct sfs_announced *a;
	ck_assert_int_eq(sfs_announced_new(&cfg, &a), 0);
	return a;
}

/* Re-seeder @i's host (10.x.y.z) and address (port 7070). */
static void host_of(size_t i, char *buf, size_t len)
{
	snprintf(buf, len, "10.%zu.%zu.%zu", i >> 16 & 255, i >> 8 & 255,
		 i & 255);
}

static void addr_of(size_t i, char *buf, size_t len)
{
	char h[24];
	host_of(i, h, sizeof(h));
	snprintf(buf, len, "%.20s:7070", h);
}

/* Run @k's secret (its number in the first bytes) and instance. */
static void secret_of(uint64_t k, uint8_t s[SFS_RUN_SECRET_LEN])
{
	memset(s, 0x5e, SFS_RUN_SECRET_LEN);
	memcpy(s, &k, sizeof(k));
}

static uint64_t inst(uint64_t k)
{
	uint8_t s[SFS_RUN_SECRET_LEN];
	if (!k)
		return 0;
	secret_of(k, s);
	return sfs_run_instance(s);
}

/* @addr from @caller says run @k (0: none), with its proof: the rc. */
static int say(struct sfs_announced *a, const char *addr, const char *caller,
	       uint64_t k, uint64_t now, struct sfs_announced_res *res)
{
	uint8_t s[SFS_RUN_SECRET_LEN];
	struct sfs_announced_res r;
	secret_of(k, s);
	struct sfs_announce an = {.addr = addr,
				  .caller = caller,
				  .instance = inst(k),
				  .proof = k ? s : NULL};
	return sfs_announced_add(a, &an, now, res ? res : &r);
}

/* Re-seeder @i, from its own address, says run @k. */
static int add(struct sfs_announced *a, size_t i, uint64_t k, uint64_t now)
{
	char ad[32], h[32];
	addr_of(i, ad, sizeof(ad));
	host_of(i, h, sizeof(h));
	return say(a, ad, h, k, now, NULL);
}

/* The answer to @me (0: none) asking at @now, parsed [new]. */
static json_t *ask(struct sfs_announced *a, const char *asker, uint64_t me,
		   uint32_t from, uint64_t now)
{
	char *buf;
	size_t len;
	ck_assert_int_eq(
		sfs_announced_sources(a, asker, me, from, now, &buf, &len), 0);
	ck_assert_uint_eq(strlen(buf), len);
	json_t *o = json_loads(buf, 0, NULL);
	free(buf);
	ck_assert_ptr_nonnull(o);
	return o;
}

static const char *listed_addr(json_t *o, size_t k)
{
	return json_string_value(json_object_get(
		json_array_get(json_object_get(o, "reseeders"), k), "address"));
}

/* Whether @o's list names @addr. */
static int lists(json_t *o, const char *addr)
{
	json_t *l = json_object_get(o, "reseeders");
	for (size_t k = 0; k < json_array_size(l); k++)
		if (!strcmp(listed_addr(o, k), addr))
			return 1;
	return 0;
}

static size_t fleet_size(json_t *o)
{
	json_t *f = json_object_get(o, "fleet");
	return f ? (size_t)json_integer_value(json_object_get(f, "size")) : 0;
}

static size_t fleet_index(json_t *o)
{
	return (size_t)json_integer_value(
		json_object_get(json_object_get(o, "fleet"), "index"));
}

START_TEST(ring_of_1000)
{
	enum { N = 1000 };
	struct sfs_announced *a = table(1, 0);
	static char addr[N][32], at[N][32];
	static size_t idx[N];
	for (size_t i = 0; i < N; i++) {
		struct sfs_announced_res res;
		char h[32];
		addr_of(i, addr[i], sizeof(addr[i]));
		host_of(i, h, sizeof(h));
		ck_assert_int_eq(say(a, addr[i], h, i + 1, T0 + i, &res), 0);
		ck_assert_int_eq(res.fresh, 1);
		ck_assert_str_eq(res.listed, addr[i]);
	}
	memset(at, 0, sizeof(at));
	for (size_t i = 0; i < N; i++) {
		json_t *o = ask(a, addr[i], inst(i + 1), 9, T0 + N);
		ck_assert_ptr_nonnull(json_object_get(o, "fleet"));
		ck_assert_uint_eq(fleet_size(o), N);
		ck_assert_int_eq(json_integer_value(json_object_get(o, "live")),
				 N);
		idx[i] = fleet_index(o);
		ck_assert_uint_lt(idx[i], N);
		ck_assert_str_eq(at[idx[i]], ""); /* each place once */
		snprintf(at[idx[i]], sizeof(at[0]), "%.31s", addr[i]);
		json_decref(o);
	}
	/* The ring is in the order of the addresses' keyed hashes. */
	for (size_t k = 1; k < N; k++)
		ck_assert_uint_le(sfs_announced_place(a, at[k - 1]),
				  sfs_announced_place(a, at[k]));
	/* Each one's members are at places -1, -2, ..., -512 from it, and
	 * they are exactly what it is listed. */
	for (size_t i = 0; i < N; i++) {
		json_t *o = ask(a, "any", inst(i + 1), 9, T0 + N + 1);
		json_t *mem =
			json_object_get(json_object_get(o, "fleet"), "members");
		ck_assert_uint_eq(json_array_size(mem), 10);
		ck_assert_uint_eq(
			json_array_size(json_object_get(o, "reseeders")), 10);
		for (size_t k = 0; k < 10; k++) {
			size_t want = (idx[i] + N - ((size_t)1 << k)) % N;
			ck_assert_str_eq(
				json_string_value(json_array_get(mem, k)),
				at[want]);
			ck_assert_str_eq(listed_addr(o, k), at[want]);
		}
		json_decref(o);
	}
	/* One more joins: a ring of 1,001, the same for every member. */
	ck_assert_int_eq(add(a, 5000, 5000, T0 + N + 2), 0);
	json_t *o = ask(a, "any", inst(1), 9, T0 + N + 2);
	ck_assert_uint_eq(fleet_size(o), N + 1);
	json_decref(o);
	sfs_announced_free(a);
}
END_TEST

START_TEST(cap_1024)
{
	struct sfs_announced *a = table(1, 0);
	for (size_t i = 0; i < SFS_ANNOUNCED_MAX; i++)
		ck_assert_int_eq(add(a, i, 0, T0), 0);
	SFS_TEST_BOUND_EQ("cap_live", SFS_ANNOUNCED_MAX,
			  sfs_announced_live(a, T0));
	ck_assert_int_eq(add(a, SFS_ANNOUNCED_MAX, 0, T0 + 1), -ENOSPC);
	/* One already listed renews itself at the cap. */
	ck_assert_int_eq(add(a, 7, 0, T0 + 2), 0);
	/* Once the others lapse there is room again. */
	ck_assert_int_eq(
		add(a, SFS_ANNOUNCED_MAX, 0, T0 + SFS_ANNOUNCED_TTL_MS), 0);
	ck_assert_uint_eq(sfs_announced_live(a, T0 + SFS_ANNOUNCED_TTL_MS), 2);
	char longer[400];
	memset(longer, 'a', sizeof(longer));
	memcpy(longer + sizeof(longer) - 6, ":7070", 6);
	ck_assert_int_eq(say(a, longer, "10.0.0.7", 0, T0, NULL), -EINVAL);
	sfs_announced_free(a);
}
END_TEST

/* At most per_caller live ones from one address: its further ports are
 * refused, its own renew, other callers and (after a lapse) it again
 * have room; a run moving between two of its ports is no further
 * one. */
START_TEST(cap_per_caller)
{
	struct sfs_announced *a = table(1, 0);
	char ad[32];
	for (int p = 1; p <= SFS_ANNOUNCED_PER_CALLER; p++) {
		snprintf(ad, sizeof(ad), "10.0.0.1:%d", p);
		ck_assert_int_eq(say(a, ad, "10.0.0.1", 0, T0, NULL), 0);
	}
	snprintf(ad, sizeof(ad), "10.0.0.1:%d", SFS_ANNOUNCED_PER_CALLER + 1);
	ck_assert_int_eq(say(a, ad, "10.0.0.1", 0, T0 + 1, NULL), -EDQUOT);
	ck_assert_int_eq(say(a, "0.0.0.0:999", "10.0.0.1", 7, T0 + 1, NULL),
			 -EDQUOT);
	ck_assert_uint_eq(sfs_announced_live(a, T0 + 1),
			  SFS_ANNOUNCED_PER_CALLER);
	ck_assert_int_eq(say(a, "10.0.0.1:1", "10.0.0.1", 0, T0 + 2, NULL), 0);
	ck_assert_int_eq(say(a, "10.0.0.2:1", "10.0.0.2", 0, T0 + 2, NULL), 0);
	/* The same address spelled as an IPv4-mapped caller counts too. */
	ck_assert_int_eq(
		say(a, "0.0.0.0:998", "::ffff:10.0.0.1", 0, T0 + 2, NULL),
		-EDQUOT);
	/* Port 4 says run 9; run 9 moves to port 5: still four. */
	ck_assert_int_eq(say(a, "10.0.0.1:4", "10.0.0.1", 9, T0 + 3, NULL), 0);
	struct sfs_announced_res res;
	ck_assert_int_eq(say(a, ad, "10.0.0.1", 9, T0 + 4, &res), 0);
	ck_assert_str_eq(res.moved_from, "10.0.0.1:4");
	ck_assert_uint_eq(sfs_announced_live(a, T0 + 4),
			  SFS_ANNOUNCED_PER_CALLER + 1);
	/* Lapsed: room again. */
	ck_assert_int_eq(say(a, "10.0.0.1:77", "10.0.0.1", 0,
			     T0 + 4 + SFS_ANNOUNCED_TTL_MS, NULL),
			 0);
	sfs_announced_free(a);
	/* Set lower. */
	a = table(1, 2);
	ck_assert_int_eq(say(a, "10.0.0.1:1", "10.0.0.1", 0, T0, NULL), 0);
	ck_assert_int_eq(say(a, "10.0.0.1:2", "10.0.0.1", 0, T0, NULL), 0);
	ck_assert_int_eq(say(a, "10.0.0.1:3", "10.0.0.1", 0, T0, NULL),
			 -EDQUOT);
	sfs_announced_free(a);
}
END_TEST

/* Only the caller's own address is listed, in one spelling. */
START_TEST(bound_to_caller)
{
	struct sfs_announced *a = table(1, 16);
	struct sfs_announced_res res;
	static const struct {
		const char *addr, *caller;
		int rc;
		const char *listed;
	} c[] = {
		{"10.0.0.1:80", "10.0.0.1", 0, "10.0.0.1:80"},
		{"0.0.0.0:81", "10.0.0.1", 0, "10.0.0.1:81"},
		{":82", "10.0.0.1", 0, "10.0.0.1:82"},
		{"10.0.0.1:083", "10.0.0.1", 0, "10.0.0.1:83"},
		{"10.0.0.1:84", "::ffff:10.0.0.1", 0, "10.0.0.1:84"},
		{"[::]:85", "fe80::1", 0, "[fe80::1]:85"},
		{"[FE80:0::1]:86", "fe80::1", 0, "[fe80::1]:86"},
		{"10.0.0.2:80", "10.0.0.1", -EPERM, "10.0.0.1:80"},
		{"127.0.0.1:80", "10.0.0.1", -EPERM, "10.0.0.1:80"},
		{"localhost:80", "127.0.0.1", -EPERM, "127.0.0.1:80"},
		{"[::1]:80", "127.0.0.1", -EPERM, "127.0.0.1:80"},
		{"10.0.0.1:0", "10.0.0.1", -EINVAL, ""},
		{"10.0.0.1:80", "somehost", -EINVAL, ""},
		{"10.0.0.1", "10.0.0.1", -EINVAL, ""},
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int rc = say(a, c[i].addr, c[i].caller, 0, T0, &res);
		ck_assert_msg(rc == c[i].rc, "%s from %s: %d, not %d",
			      c[i].addr, c[i].caller, rc, c[i].rc);
		ck_assert_str_eq(res.listed, c[i].listed);
	}
	ck_assert_uint_eq(sfs_announced_live(a, T0), 7);
	json_t *o = ask(a, NULL, 0, 9, T0);
	ck_assert(lists(o, "10.0.0.1:83") && lists(o, "[fe80::1]:86"));
	ck_assert(!lists(o, "10.0.0.2:80") && !lists(o, "127.0.0.1:80"));
	json_decref(o);
	sfs_announced_free(a);
}
END_TEST

/* A run is claimed with its proof alone: a squatter of a live run, or
 * of one that lapsed, is refused; the run itself moves (the newest
 * address wins) and comes back after a lapse. */
START_TEST(run_needs_proof)
{
	struct sfs_announced *a = table(1, 0);
	struct sfs_announced_res res;
	uint8_t wrong[SFS_RUN_SECRET_LEN];
	for (size_t i = 0; i < 3; i++)
		ck_assert_int_eq(add(a, i, i + 1, T0), 0);
	ck_assert_uint_ne(inst(2), 0);
	/* Another address says run 2: without a proof, with another's. */
	struct sfs_announce sq = {.addr = "10.7.7.7:1",
				  .caller = "10.7.7.7",
				  .instance = inst(2)};
	ck_assert_int_eq(sfs_announced_add(a, &sq, T0, &res), -EACCES);
	secret_of(3, wrong);
	sq.proof = wrong;
	ck_assert_int_eq(sfs_announced_add(a, &sq, T0, &res), -EACCES);
	ck_assert_uint_eq(sfs_announced_live(a, T0), 3);
	json_t *o = ask(a, NULL, inst(2), 2, T0 + 1);
	ck_assert_uint_eq(fleet_size(o), 3);
	ck_assert(!lists(o, "10.7.7.7:1"));
	json_decref(o);
	/* Run 2 itself at a new address: it moves there. */
	ck_assert_int_eq(say(a, "10.7.7.7:1", "10.7.7.7", 2, T0 + 2, &res), 0);
	ck_assert_int_eq(res.fresh, 1);
	ck_assert_str_eq(res.moved_from, "10.0.0.1:7070");
	ck_assert_uint_eq(sfs_announced_live(a, T0 + 2), 3);
	o = ask(a, NULL, inst(2), 2, T0 + 3);
	ck_assert_uint_eq(fleet_size(o), 3);
	ck_assert(lists(o, "10.0.0.0:7070") && !lists(o, "10.0.0.1:7070"));
	json_decref(o);
	o = ask(a, NULL, inst(1), 2, T0 + 3);
	ck_assert(lists(o, "10.7.7.7:1"));
	json_decref(o);
	/* It lapses; a squatter is refused all the same, and the run
	 * comes back (no 409). */
	uint64_t later = T0 + 2 + SFS_ANNOUNCED_TTL_MS;
	ck_assert_uint_eq(sfs_announced_live(a, later), 0);
	sq.addr = "10.8.8.8:1";
	sq.caller = "10.8.8.8";
	ck_assert_int_eq(sfs_announced_add(a, &sq, later, &res), -EACCES);
	sq.proof = NULL;
	ck_assert_int_eq(sfs_announced_add(a, &sq, later, &res), -EACCES);
	ck_assert_uint_eq(sfs_announced_live(a, later), 0);
	ck_assert_int_eq(say(a, "10.7.7.7:1", "10.7.7.7", 2, later, &res), 0);
	ck_assert_int_eq(res.fresh, 1);
	ck_assert_str_eq(res.moved_from, "");
	/* A listed address that says another run (a restart) takes it. */
	ck_assert_int_eq(say(a, "10.7.7.7:1", "10.7.7.7", 42, later + 1, &res),
			 0);
	ck_assert_int_eq(res.fresh, 0);
	ck_assert_int_eq(add(a, 9, 9, later + 1), 0);
	o = ask(a, NULL, inst(42), 2, later + 2);
	ck_assert_uint_eq(fleet_size(o), 2);
	json_decref(o);
	o = ask(a, NULL, inst(2), 2, later + 2);
	ck_assert_uint_eq(fleet_size(o), 0);
	json_decref(o);
	sfs_announced_free(a);
}
END_TEST

/* The ring's order is the secret's: two tables with different keys
 * place the same 64 members differently (and the same key the same). */
START_TEST(keyed_order)
{
	enum { N = 64 };
	struct sfs_announced *t[3] = {table(1, 0), table(2, 0), table(1, 0)};
	size_t idx[3][N];
	for (size_t k = 0; k < 3; k++) {
		for (size_t i = 0; i < N; i++)
			ck_assert_int_eq(add(t[k], i, i + 1, T0), 0);
		for (size_t i = 0; i < N; i++) {
			json_t *o = ask(t[k], NULL, inst(i + 1), 2, T0 + 1);
			ck_assert_uint_eq(fleet_size(o), N);
			idx[k][i] = fleet_index(o);
			json_decref(o);
		}
	}
	size_t moved = 0, same = 0;
	for (size_t i = 0; i < N; i++) {
		moved += idx[0][i] != idx[1][i];
		same += idx[0][i] == idx[2][i];
	}
	/* Two random orders of 64 share about one place. */
	ck_assert_uint_ge(moved, N - 8);
	ck_assert_uint_eq(same, N);
	/* Neither is the order of the unkeyed hashes of the addresses. */
	size_t xxh_at = 0;
	for (size_t i = 0; i < N; i++) {
		char ad[32], bd[32];
		size_t below = 0;
		addr_of(i, ad, sizeof(ad));
		for (size_t j = 0; j < N; j++) {
			addr_of(j, bd, sizeof(bd));
			below += XXH3_64bits(bd, strlen(bd)) <
				 XXH3_64bits(ad, strlen(ad));
		}
		xxh_at += idx[0][i] == below;
	}
	ck_assert_uint_le(xxh_at, 8);
	for (size_t k = 0; k < 3; k++)
		sfs_announced_free(t[k]);
}
END_TEST

START_TEST(ring_shrinks_as_they_lapse)
{
	struct sfs_announced *a = table(1, 0);
	for (size_t i = 0; i < 20; i++)
		ck_assert_int_eq(add(a, i, i + 1, i < 10 ? T0 : T0 + 5000), 0);
	json_t *o = ask(a, NULL, inst(15), 9, T0 + 14999);
	ck_assert_uint_eq(fleet_size(o), 20);
	json_decref(o);
	/* The first ten lapsed: no announcement since, the ring is ten. */
	o = ask(a, NULL, inst(15), 9, T0 + 15000);
	ck_assert_uint_eq(fleet_size(o), 10);
	json_decref(o);
	/* A lapsed one is in no ring. */
	o = ask(a, NULL, inst(3), 9, T0 + 15000);
	ck_assert_uint_eq(fleet_size(o), 0);
	json_decref(o);
	/* Below fleet_from: the asker's own subset, no ring. */
	o = ask(a, NULL, inst(15), 11, T0 + 15000);
	ck_assert_uint_eq(fleet_size(o), 0);
	ck_assert_uint_eq(json_array_size(json_object_get(o, "reseeders")), 10);
	json_decref(o);
	o = ask(a, NULL, inst(15), 9, T0 + 20000);
	ck_assert_uint_eq(fleet_size(o), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "live")), 0);
	json_decref(o);
	sfs_announced_free(a);
}
END_TEST

/* Callers read their clocks before the lock: an announcement may come
 * in with a time before an ask's that lapsed it.  It is in the ring at
 * the next ask all the same (it was left out until the next change). */
START_TEST(clock_out_of_order)
{
	struct sfs_announced *a = table(1, 0);
	uint64_t u = T0 + SFS_ANNOUNCED_TTL_MS;
	ck_assert_int_eq(say(a, "10.9.0.1:1", "10.9.0.1", 77, T0, NULL), 0);
	for (size_t i = 0; i < 10; i++)
		ck_assert_int_eq(add(a, i, i + 1, T0 + 5000), 0);
	json_t *o = ask(a, NULL, inst(1), 2, u); /* 10.9.0.1 lapsed now */
	ck_assert_uint_eq(fleet_size(o), 10);
	json_decref(o);
	ck_assert_int_eq(say(a, "10.9.0.1:1", "10.9.0.1", 77, u - 1, NULL), 0);
	o = ask(a, NULL, inst(77), 2, u + 1);
	ck_assert_uint_eq(fleet_size(o), 11);
	json_decref(o);
	sfs_announced_free(a);
}
END_TEST

struct rank {
	uint64_t score;
	size_t i;
};

static int by_rank(const void *x_, const void *y_)
{
	const struct rank *x = x_, *y = y_;
	if (x->score != y->score)
		return x->score < y->score ? 1 : -1;
	return x->i < y->i ? -1 : x->i > y->i;
}

START_TEST(rendezvous_subsets)
{
	enum { N = SFS_ANNOUNCED_MAX, ASKERS = 200 };
	struct sfs_announced *a = table(3, 0);
	static char addr[N][32];
	static struct rank r[N];
	static unsigned char seen[N];
	size_t covered = 0;
	for (size_t i = 0; i < N; i++) {
		addr_of(i, addr[i], sizeof(addr[i]));
		ck_assert_int_eq(add(a, i, 0, T0), 0);
	}
	memset(seen, 0, sizeof(seen));
	for (size_t q = 0; q < ASKERS; q++) {
		char asker[32];
		snprintf(asker, sizeof(asker), "asker-%zu", q);
		json_t *o = ask(a, asker, 0, 9, T0 + 1);
		ck_assert_ptr_null(json_object_get(o, "fleet"));
		ck_assert_uint_eq(
			json_array_size(json_object_get(o, "reseeders")),
			SFS_ANNOUNCED_LISTED);
		/* Exactly the 16 a full ranking on the keyed places puts
		 * first, in its order. */
		uint64_t seed = XXH3_64bits(asker, strlen(asker));
		for (size_t i = 0; i < N; i++) {
			uint64_t place = sfs_announced_place(a, addr[i]);
			r[i] = (struct rank){XXH3_64bits_withSeed(&place,
								  sizeof(place),
								  seed),
					     i};
		}
		qsort(r, N, sizeof(r[0]), by_rank);
		for (size_t k = 0; k < SFS_ANNOUNCED_LISTED; k++) {
			ck_assert_str_eq(listed_addr(o, k), addr[r[k].i]);
			covered += !seen[r[k].i];
			seen[r[k].i] = 1;
		}
		json_decref(o);
	}
	/* 200 askers x 16 of 1,024: about 980 of them listed to someone. */
	SFS_TEST_BOUND_GE("askers_cover", 900, covered);
	sfs_announced_free(a);
}
END_TEST

/* The route's parser: the run's proof is 64 hex digits. */
START_TEST(parse_announce)
{
	struct ctl_announce an;
	char err[256];
	static const char ok[] =
		"{\"address\": \"0.0.0.0:9\", \"instance\": "
		"\"0x66687aadf862bd77\", \"proof\": "
		"\"00000000000000000000000000000000000000000000000000000000000"
		"00000\"}";
	ck_assert_int_eq(
		ctl_parse_announce(ok, strlen(ok), &an, err, sizeof(err)), 0);
	ck_assert_str_eq(an.addr, "0.0.0.0:9");
	ck_assert_int_eq(an.has_proof, 1);
	ck_assert_uint_eq(an.instance, 0x66687aadf862bd77ull);
	ck_assert_uint_eq(sfs_run_instance(an.proof), an.instance);
	static const char *const bad[] = {
		"{\"address\": \"0.0.0.0:9\", \"proof\": \"00\"}",
		"{\"address\": \"0.0.0.0:9\", \"proof\": 7}",
		"{\"address\": \"0.0.0.0:9\", \"proof\": \"zz00000000000000000"
		"00000000000000000000000000000000000000000000\"}",
	};
	for (size_t i = 0; i < 3; i++) {
		ck_assert_int_eq(ctl_parse_announce(bad[i], strlen(bad[i]), &an,
						    err, sizeof(err)),
				 -EINVAL);
		ck_assert_str_eq(err, "announce: proof: 64 hex digits (the "
				      "run's secret) expected");
	}
	static const char none[] = "{\"address\": \"10.0.0.1:9\"}";
	ck_assert_int_eq(
		ctl_parse_announce(none, strlen(none), &an, err, sizeof(err)),
		0);
	ck_assert_int_eq(an.has_proof, 0);
	ck_assert_uint_eq(an.instance, 0);
}
END_TEST

/* Refusals are told once per 10 s per caller, with a count; callers
 * past the 64 told apart share one line per 10 s. */
START_TEST(refusals_told)
{
	struct ctl_refusals *r = calloc(1, sizeof(*r));
	uint64_t n = 0;
	ck_assert_int_eq(
		ctl_note_refusal(r, CTL_REFUSED_ADDRESS, "10.0.0.1", T0, &n),
		1);
	ck_assert_uint_eq(n, 1);
	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(ctl_note_refusal(r, CTL_REFUSED_CAP,
						  "10.0.0.1", T0 + 9 * i, &n),
				 0);
	ck_assert_int_eq(ctl_note_refusal(r, CTL_REFUSED_CAP, "10.0.0.1",
					  T0 + CTL_REFUSAL_SAY_MS, &n),
			 1);
	ck_assert_uint_eq(n, 1002);
	ck_assert_uint_eq(r->total[CTL_REFUSED_ADDRESS], 1);
	ck_assert_uint_eq(r->total[CTL_REFUSED_CAP], 1001);
	/* 63 more callers fill the table; the next ones share a line. */
	int lines = 0;
	for (int i = 2; i < 200; i++) {
		char c[32];
		snprintf(c, sizeof(c), "10.0.1.%d", i);
		lines += ctl_note_refusal(r, CTL_REFUSED_FULL, c,
					  T0 + CTL_REFUSAL_SAY_MS + 1, &n) != 0;
	}
	ck_assert_int_eq(lines, CTL_REFUSERS_MAX - 1 + 1);
	/* Ten seconds on, quiet callers give their places up. */
	ck_assert_int_eq(ctl_note_refusal(r, CTL_REFUSED_FULL, "10.0.2.1",
					  T0 + 3 * CTL_REFUSAL_SAY_MS, &n),
			 1);
	ck_assert_uint_eq(n, 1);
	free(r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("announce");
	TCase *t = tcase_create("announce");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, ring_of_1000);
	tcase_add_test(t, cap_1024);
	tcase_add_test(t, cap_per_caller);
	tcase_add_test(t, bound_to_caller);
	tcase_add_test(t, run_needs_proof);
	tcase_add_test(t, keyed_order);
	tcase_add_test(t, ring_shrinks_as_they_lapse);
	tcase_add_test(t, clock_out_of_order);
	tcase_add_test(t, rendezvous_subsets);
	tcase_add_test(t, parse_announce);
	tcase_add_test(t, refusals_told);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
