/* SPDX-License-Identifier: MIT */
/*
 * test_announce.c - the re-seeders a seed lists: a ring of 1,000 that
 * every member sees the same (each its own place, its members at -1,
 * -2, -4, ...), the cap of 1,024 live ones, a ring that shrinks when
 * announcements lapse with no announcement after them, a run said at
 * two addresses, and the rendezvous subsets (each asker the 16 that
 * rank first for it, together covering the table).
 */
#include "check_run.h"

#include "seed/announce.h"

#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define T0 1000000 /* the clock the tests start from, ms */

static void addr_of(size_t i, char *buf, size_t len)
{
	snprintf(buf, len, "10.%zu.%zu.%zu:7070", i >> 16 & 255, i >> 8 & 255,
		 i & 255);
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

static size_t fleet_size(json_t *o)
{
	json_t *f = json_object_get(o, "fleet");
	return f ? (size_t)json_integer_value(json_object_get(f, "size")) : 0;
}

START_TEST(ring_of_1000)
{
	enum { N = 1000 };
	struct sfs_announced *a;
	static char addr[N][32], at[N][32];
	static size_t idx[N];
	ck_assert_int_eq(sfs_announced_new(&a), 0);
	for (size_t i = 0; i < N; i++) {
		int fresh;
		addr_of(i, addr[i], sizeof(addr[i]));
		ck_assert_int_eq(
			sfs_announced_add(a, addr[i], i + 1, T0 + i, &fresh),
			0);
		ck_assert_int_eq(fresh, 1);
	}
	memset(at, 0, sizeof(at));
	for (size_t i = 0; i < N; i++) {
		json_t *o = ask(a, addr[i], i + 1, 9, T0 + N);
		json_t *f = json_object_get(o, "fleet");
		ck_assert_ptr_nonnull(f);
		ck_assert_uint_eq(fleet_size(o), N);
		ck_assert_int_eq(json_integer_value(json_object_get(o, "live")),
				 N);
		idx[i] =
			(size_t)json_integer_value(json_object_get(f, "index"));
		ck_assert_uint_lt(idx[i], N);
		ck_assert_str_eq(at[idx[i]], ""); /* each place once */
		snprintf(at[idx[i]], sizeof(at[0]), "%s", addr[i]);
		json_decref(o);
	}
	/* The ring is in the order of the addresses' hashes. */
	for (size_t k = 1; k < N; k++)
		ck_assert_uint_le(XXH3_64bits(at[k - 1], strlen(at[k - 1])),
				  XXH3_64bits(at[k], strlen(at[k])));
	/* Each one's members are at places -1, -2, ..., -512 from it, and
	 * they are exactly what it is listed. */
	for (size_t i = 0; i < N; i++) {
		json_t *o = ask(a, "any", i + 1, 9, T0 + N + 1);
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
	ck_assert_int_eq(
		sfs_announced_add(a, "10.9.9.9:7070", 5000, T0 + N + 2, NULL),
		0);
	json_t *o = ask(a, "any", 1, 9, T0 + N + 2);
	ck_assert_uint_eq(fleet_size(o), N + 1);
	json_decref(o);
	sfs_announced_free(a);
}
END_TEST

START_TEST(cap_1024)
{
	struct sfs_announced *a;
	char ad[32];
	ck_assert_int_eq(sfs_announced_new(&a), 0);
	for (size_t i = 0; i < SFS_ANNOUNCED_MAX; i++) {
		addr_of(i, ad, sizeof(ad));
		ck_assert_int_eq(sfs_announced_add(a, ad, 0, T0, NULL), 0);
	}
	ck_assert_uint_eq(sfs_announced_live(a, T0), SFS_ANNOUNCED_MAX);
	addr_of(SFS_ANNOUNCED_MAX, ad, sizeof(ad));
	ck_assert_int_eq(sfs_announced_add(a, ad, 0, T0 + 1, NULL), -ENOSPC);
	/* One already listed renews itself at the cap. */
	addr_of(7, ad, sizeof(ad));
	ck_assert_int_eq(sfs_announced_add(a, ad, 0, T0 + 2, NULL), 0);
	/* Once the others lapse there is room again. */
	addr_of(SFS_ANNOUNCED_MAX, ad, sizeof(ad));
	ck_assert_int_eq(
		sfs_announced_add(a, ad, 0, T0 + SFS_ANNOUNCED_TTL_MS, NULL),
		0);
	ck_assert_uint_eq(sfs_announced_live(a, T0 + SFS_ANNOUNCED_TTL_MS), 2);
	char longer[400];
	memset(longer, 'a', sizeof(longer));
	memcpy(longer + sizeof(longer) - 6, ":7070", 6);
	ck_assert_int_eq(sfs_announced_add(a, longer, 0, T0, NULL),
			 -ENAMETOOLONG);
	sfs_announced_free(a);
}
END_TEST

START_TEST(ring_shrinks_as_they_lapse)
{
	struct sfs_announced *a;
	char ad[32];
	ck_assert_int_eq(sfs_announced_new(&a), 0);
	for (size_t i = 0; i < 20; i++) {
		addr_of(i, ad, sizeof(ad));
		ck_assert_int_eq(sfs_announced_add(a, ad, i + 1,
						   i < 10 ? T0 : T0 + 5000,
						   NULL),
				 0);
	}
	json_t *o = ask(a, NULL, 15, 9, T0 + 14999);
	ck_assert_uint_eq(fleet_size(o), 20);
	json_decref(o);
	/* The first ten lapsed: no announcement since, the ring is ten. */
	o = ask(a, NULL, 15, 9, T0 + 15000);
	ck_assert_uint_eq(fleet_size(o), 10);
	json_decref(o);
	/* A lapsed one is in no ring. */
	o = ask(a, NULL, 3, 9, T0 + 15000);
	ck_assert_uint_eq(fleet_size(o), 0);
	json_decref(o);
	/* Below fleet_from: the asker's own subset, no ring. */
	o = ask(a, NULL, 15, 11, T0 + 15000);
	ck_assert_uint_eq(fleet_size(o), 0);
	ck_assert_uint_eq(json_array_size(json_object_get(o, "reseeders")), 10);
	json_decref(o);
	o = ask(a, NULL, 15, 9, T0 + 20000);
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
	struct sfs_announced *a;
	char ad[32];
	uint64_t u = T0 + SFS_ANNOUNCED_TTL_MS;
	ck_assert_int_eq(sfs_announced_new(&a), 0);
	ck_assert_int_eq(sfs_announced_add(a, "10.9.0.1:1", 77, T0, NULL), 0);
	for (size_t i = 0; i < 10; i++) {
		addr_of(i, ad, sizeof(ad));
		ck_assert_int_eq(
			sfs_announced_add(a, ad, i + 1, T0 + 5000, NULL), 0);
	}
	json_t *o = ask(a, NULL, 1, 2, u); /* 10.9.0.1 lapsed just now */
	ck_assert_uint_eq(fleet_size(o), 10);
	json_decref(o);
	ck_assert_int_eq(sfs_announced_add(a, "10.9.0.1:1", 77, u - 1, NULL),
			 0);
	o = ask(a, NULL, 77, 2, u + 1);
	ck_assert_uint_eq(fleet_size(o), 11);
	json_decref(o);
	sfs_announced_free(a);
}
END_TEST

START_TEST(one_run_one_place)
{
	struct sfs_announced *a;
	char ad[32];
	ck_assert_int_eq(sfs_announced_new(&a), 0);
	for (size_t i = 0; i < 3; i++) {
		addr_of(i, ad, sizeof(ad));
		ck_assert_int_eq(sfs_announced_add(a, ad, i + 1, T0, NULL), 0);
	}
	/* Another address says run 2: refused, not listed. */
	ck_assert_int_eq(sfs_announced_add(a, "10.7.7.7:1", 2, T0, NULL),
			 -EEXIST);
	ck_assert_uint_eq(sfs_announced_live(a, T0), 3);
	json_t *o = ask(a, NULL, 2, 2, T0 + 1);
	ck_assert_uint_eq(fleet_size(o), 3);
	for (size_t k = 0; k < 2; k++)
		ck_assert_str_ne(listed_addr(o, k), "10.7.7.7:1");
	json_decref(o);
	/* Says another run: in the ring. */
	ck_assert_int_eq(sfs_announced_add(a, "10.7.7.7:1", 9, T0 + 2, NULL),
			 0);
	o = ask(a, NULL, 9, 2, T0 + 3);
	ck_assert_uint_eq(fleet_size(o), 4);
	json_decref(o);
	/* A listed one whose run another says drops out of the ring. */
	addr_of(0, ad, sizeof(ad));
	ck_assert_int_eq(sfs_announced_add(a, ad, 9, T0 + 4, NULL), -EEXIST);
	o = ask(a, NULL, 9, 2, T0 + 5);
	ck_assert_uint_eq(fleet_size(o), 3);
	ck_assert_uint_eq(sfs_announced_live(a, T0 + 5), 4);
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
	struct sfs_announced *a;
	static char addr[N][32];
	static struct rank r[N];
	static unsigned char seen[N];
	size_t covered = 0;
	ck_assert_int_eq(sfs_announced_new(&a), 0);
	for (size_t i = 0; i < N; i++) {
		addr_of(i, addr[i], sizeof(addr[i]));
		ck_assert_int_eq(sfs_announced_add(a, addr[i], 0, T0, NULL), 0);
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
		/* Exactly the 16 a full ranking puts first, in its order. */
		uint64_t seed = XXH3_64bits(asker, strlen(asker));
		for (size_t i = 0; i < N; i++)
			r[i] = (struct rank){
				XXH3_64bits_withSeed(addr[i], strlen(addr[i]),
						     seed),
				i};
		qsort(r, N, sizeof(r[0]), by_rank);
		for (size_t k = 0; k < SFS_ANNOUNCED_LISTED; k++) {
			ck_assert_str_eq(listed_addr(o, k), addr[r[k].i]);
			covered += !seen[r[k].i];
			seen[r[k].i] = 1;
		}
		json_decref(o);
	}
	/* 200 askers x 16 of 1,024: about 980 of them listed to someone. */
	ck_assert_uint_ge(covered, 900);
	sfs_announced_free(a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("announce");
	TCase *t = tcase_create("announce");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, ring_of_1000);
	tcase_add_test(t, cap_1024);
	tcase_add_test(t, ring_shrinks_as_they_lapse);
	tcase_add_test(t, one_run_one_place);
	tcase_add_test(t, clock_out_of_order);
	tcase_add_test(t, rendezvous_subsets);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
