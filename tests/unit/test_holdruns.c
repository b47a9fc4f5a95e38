/* SPDX-License-Identifier: MIT */
/*
 * test_holdruns.c - the compact form of a re-seeder's holdings: what is
 * encoded is what is applied (full and delta, random lists), a delta
 * costs bytes in proportion to what changed, and hostile text is
 * refused with the fault named, never written past the list.
 */
#include "bound.h"
#include "check_run.h"

#include "common/util.h"
#include "metadata/holdruns.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define N 65536

static uint32_t rnd_state = 12345;
static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

/* A list as a re-seeder's cache makes one: held chunks in runs of
 * consecutive slots, some coming, the rest not held. */
static void fill(uint32_t *s, uint64_t n, uint32_t slot_max)
{
	uint64_t i = 0;
	while (i < n) {
		uint64_t len = 1 + rnd() % 64;
		uint32_t kind = rnd() % 4, first = rnd() % (slot_max - 64);
		for (uint64_t k = 0; k < len && i < n; k++, i++)
			s[i] = kind == 0   ? SFS_RUNS_NONE
			       : kind == 1 ? SFS_RUNS_COMING
					   : first + (uint32_t)k;
	}
}

START_TEST(full_round_trip)
{
	uint32_t *a = malloc(N * sizeof(*a)), *b = malloc(N * sizeof(*b));
	char why[200];
	for (int round = 0; round < 20; round++) {
		fill(a, N, 1u << 20);
		char *text;
		ck_assert_int_eq(sfs_runs_encode(a, N, 1, &text), 0);
		for (uint64_t i = 0; i < N; i++)
			b[i] = SFS_RUNS_NONE;
		ck_assert_int_eq(sfs_runs_apply(text, strlen(text), b, N,
						1u << 20, why, sizeof(why)),
				 0);
		ck_assert_int_eq(memcmp(a, b, N * sizeof(*a)), 0);
		free(text);
	}
	free(a);
	free(b);
}
END_TEST

/* A delta: 1 % of the chunks changed; applied onto the old list it
 * gives the new one, and it costs at most 8 bytes a change. */
START_TEST(delta_round_trip_and_size)
{
	uint32_t *old = malloc(N * sizeof(*old)),
		 *now = malloc(N * sizeof(*now)), *d = malloc(N * sizeof(*d));
	char why[200];
	fill(old, N, 1u << 20);
	memcpy(now, old, N * sizeof(*now));
	size_t changed = 0;
	for (int k = 0; k < N / 100; k++) {
		uint64_t i = rnd() % N;
		uint32_t v = rnd() % 3 == 0   ? SFS_RUNS_NONE
			     : rnd() % 2 == 0 ? SFS_RUNS_COMING
					      : rnd() % (1u << 20);
		changed += now[i] != v;
		now[i] = v;
	}
	for (uint64_t i = 0; i < N; i++)
		d[i] = now[i] == old[i] ? SFS_RUNS_SAME : now[i];
	char *text;
	ck_assert_int_eq(sfs_runs_encode(d, N, 0, &text), 0);
	ck_assert_int_eq(sfs_runs_apply(text, strlen(text), old, N, 1u << 20,
					why, sizeof(why)),
			 0);
	ck_assert_int_eq(memcmp(old, now, N * sizeof(*now)), 0);
	/* At most 8 bytes a change beyond 8: the bytes past 8, a change's
	 * share rounded up. */
	ck_assert_uint_gt(changed, 0);
	printf("delta: %zu bytes for %zu changes\n", strlen(text), changed);
	SFS_TEST_BOUND_LE("delta_bytes_per_change", 8,
			  ((long long)strlen(text) - 8 + (long long)changed -
			   1) / (long long)changed);
	free(text);
	/* Nothing changed: nothing said. */
	for (uint64_t i = 0; i < N; i++)
		d[i] = SFS_RUNS_SAME;
	ck_assert_int_eq(sfs_runs_encode(d, N, 0, &text), 0);
	ck_assert_str_eq(text, "");
	free(text);
	free(old);
	free(now);
	free(d);
}
END_TEST

/* A load: a lane's chunks every 8th, each coming then held, in slots
 * taken in order; what each change costs. */
START_TEST(strided_load_is_small)
{
	uint32_t *d = malloc(N * sizeof(*d));
	for (uint64_t i = 0; i < N; i++)
		d[i] = i % 8 == 3 ? (uint32_t)(i / 8) : SFS_RUNS_SAME;
	char *text;
	ck_assert_int_eq(sfs_runs_encode(d, N, 0, &text), 0);
	/* 8192 changes: gap 7, head, slot delta 0: 3 bytes, 4 in base64;
	 * at most 4 a change beyond 4 (the bytes past 4, a change's share
	 * rounded up). */
	SFS_TEST_BOUND_LE("strided_bytes_per_chunk", 4,
			  ((long long)strlen(text) - 4 + N / 8 - 1) / (N / 8));
	free(text);
	free(d);
}
END_TEST

static int apply_raw(const uint8_t *raw, size_t len, uint32_t *s, uint64_t n,
		     uint64_t slot_max, char *why, size_t whylen)
{
	char *text = malloc(sfs_b64_enc_len(len));
	sfs_b64_encode(raw, len, text);
	int rc =
		sfs_runs_apply(text, strlen(text), s, n, slot_max, why, whylen);
	free(text);
	return rc;
}

START_TEST(hostile_refused)
{
	uint32_t s[17];
	char why[200];
	for (int i = 0; i < 17; i++)
		s[i] = 0xdeadbeef;
	/* Not base64. */
	ck_assert_int_eq(
		sfs_runs_apply("@@@@", 4, s, 16, 100, why, sizeof(why)),
		-EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "base64"));
	/* A varint cut short. */
	const uint8_t cut[] = {0x00, 0x85};
	ck_assert_int_eq(
		apply_raw(cut, sizeof(cut), s, 16, 100, why, sizeof(why)),
		-EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "varint"));
	/* A varint past 64 bits. */
	const uint8_t big[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
			       0xff, 0xff, 0xff, 0x7f, 0x04};
	ck_assert_int_eq(
		apply_raw(big, sizeof(big), s, 16, 100, why, sizeof(why)),
		-EPROTO);
	/* A run past the end: gap 10, 7 not held. */
	const uint8_t past[] = {10, 7 << 2 | 1};
	ck_assert_int_eq(
		apply_raw(past, sizeof(past), s, 16, 100, why, sizeof(why)),
		-EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "past the file's 16 chunks"));
	/* A gap that wraps. */
	const uint8_t wrap[] = {0xff, 0xff, 0xff, 0xff, 0xff,	   0xff,
				0xff, 0xff, 0xff, 0x01, 1 << 2 | 1};
	ck_assert_int_eq(
		apply_raw(wrap, sizeof(wrap), s, 16, 100, why, sizeof(why)),
		-EPROTO);
	/* Kind 3, and a count of 0. */
	const uint8_t k3[] = {0, 1 << 2 | 3}, c0[] = {0, 0 << 2 | 1};
	ck_assert_int_eq(
		apply_raw(k3, sizeof(k3), s, 16, 100, why, sizeof(why)),
		-EPROTO);
	ck_assert_int_eq(
		apply_raw(c0, sizeof(c0), s, 16, 100, why, sizeof(why)),
		-EPROTO);
	/* Slots past the slab, and before slot 0. */
	const uint8_t hi[] = {0, 4 << 2 | 0, 0xc4, 0x01}, /* +98 */
		lo[] = {0, 1 << 2 | 0, 1};		  /* -1 */
	ck_assert_int_eq(
		apply_raw(hi, sizeof(hi), s, 16, 100, why, sizeof(why)),
		-EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "outside the slab's 100"));
	ck_assert_int_eq(
		apply_raw(lo, sizeof(lo), s, 16, 100, why, sizeof(why)),
		-EPROTO);
	/* A slot that would be a code: never taken for one. */
	const uint8_t code[] = {0, 1 << 2 | 0, 0xfa, 0xff, 0xff, 0xff, 0x1f};
	ck_assert_int_eq(apply_raw(code, sizeof(code), s, 16, UINT64_MAX, why,
				   sizeof(why)),
			 -EPROTO);
	/* Never written past the list. */
	ck_assert_uint_eq(s[16], 0xdeadbeef);
	/* And a good one, to show the checks can pass: slots 96..99. */
	const uint8_t ok[] = {2, 4 << 2 | 0, 0xc0, 0x01}; /* +96 */
	ck_assert_int_eq(
		apply_raw(ok, sizeof(ok), s, 16, 100, why, sizeof(why)), 0);
	ck_assert_uint_eq(s[2], 96);
	ck_assert_uint_eq(s[5], 99);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("holdruns");
	TCase *t = tcase_create("runs");
	tcase_add_test(t, full_round_trip);
	tcase_add_test(t, delta_round_trip_and_size);
	tcase_add_test(t, strided_load_is_small);
	tcase_add_test(t, hostile_refused);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
