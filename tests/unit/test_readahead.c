/* SPDX-License-Identifier: MIT */
/* Unit tests: the read-ahead window. */
#include "check_run.h"

#include "replica/readahead.h"

#include <check.h>

#define MB (1ull << 20)

START_TEST(sequential_window_grows_to_max)
{
	struct sfs_ra ra = {0};
	uint64_t a, b, size = 1000 * MB;
	uint64_t want[] = {4 * MB, 8 * MB, 16 * MB, 32 * MB, 64 * MB, 64 * MB};
	for (int i = 0; i < 6; i++) {
		sfs_ra_step(&ra, i * MB, (i + 1) * MB, size, 4 * MB, 64 * MB,
			    &a, &b);
		ck_assert_uint_eq(ra.window, want[i]);
		ck_assert_uint_eq(b, (i + 1) * MB + want[i]);
		/* Never pull twice what was pulled already. */
		ck_assert_uint_ge(a, (i + 1) * MB);
	}
	/* Step 2 pulled [2M, 10M) after step 1's [1M, 5M): from 5M on. */
	struct sfs_ra r2 = {0};
	sfs_ra_step(&r2, 0, MB, size, 4 * MB, 64 * MB, &a, &b);
	sfs_ra_step(&r2, MB, 2 * MB, size, 4 * MB, 64 * MB, &a, &b);
	ck_assert_uint_eq(a, 5 * MB);
	ck_assert_uint_eq(b, 10 * MB);
}
END_TEST

START_TEST(random_access_resets)
{
	struct sfs_ra ra = {0};
	uint64_t a, b, size = 1000 * MB;
	sfs_ra_step(&ra, 0, MB, size, 4 * MB, 64 * MB, &a, &b);
	sfs_ra_step(&ra, MB, 2 * MB, size, 4 * MB, 64 * MB, &a, &b);
	ck_assert_uint_gt(ra.window, 0);
	sfs_ra_step(&ra, 500 * MB, 500 * MB + 4096, size, 4 * MB, 64 * MB, &a,
		    &b);
	ck_assert_uint_eq(ra.window, 0);
	ck_assert_uint_eq(a, b);
	/* Back to a small window once it looks sequential again. */
	sfs_ra_step(&ra, 500 * MB + 4096, 501 * MB, size, 4 * MB, 64 * MB, &a,
		    &b);
	ck_assert_uint_eq(ra.window, 4 * MB);
}
END_TEST

START_TEST(out_of_order_within_slack_is_sequential)
{
	struct sfs_ra ra = {0};
	uint64_t a, b, size = 1000 * MB;
	sfs_ra_step(&ra, 0, MB, size, 4 * MB, 64 * MB, &a, &b);
	sfs_ra_step(&ra, 3 * MB, 4 * MB, size, 4 * MB, 64 * MB, &a, &b);
	sfs_ra_step(&ra, 2 * MB, 3 * MB, size, 4 * MB, 64 * MB, &a, &b);
	ck_assert_uint_eq(ra.window, 16 * MB);
}
END_TEST

START_TEST(stops_at_end_of_file)
{
	struct sfs_ra ra = {0};
	uint64_t a, b, size = 6 * MB;
	sfs_ra_step(&ra, 0, MB, size, 4 * MB, 64 * MB, &a, &b);
	ck_assert_uint_eq(b, 5 * MB);
	sfs_ra_step(&ra, MB, 2 * MB, size, 4 * MB, 64 * MB, &a, &b);
	ck_assert_uint_eq(a, 5 * MB);
	ck_assert_uint_eq(b, 6 * MB);
	sfs_ra_step(&ra, 2 * MB, 3 * MB, size, 4 * MB, 64 * MB, &a, &b);
	ck_assert_uint_eq(a, b); /* nothing left */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("readahead");
	TCase *t = tcase_create("window");
	tcase_add_test(t, sequential_window_grows_to_max);
	tcase_add_test(t, random_access_resets);
	tcase_add_test(t, out_of_order_within_slack_is_sequential);
	tcase_add_test(t, stops_at_end_of_file);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
