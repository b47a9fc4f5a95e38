/* SPDX-License-Identifier: MIT */
/* Unit tests: the read-ahead window. */
#include "bound.h"
#include "check_run.h"

#include "metadata/manifest.h"
#include "replica/readahead.h"

#include <check.h>
#include <string.h>

#define MB (1ull << 20)

START_TEST(sequential_window_grows_to_max)
{
	struct sfs_ra ra = {0};
	uint64_t a, b, size = 1000 * MB;
	uint64_t want[] = {4 * MB, 8 * MB, 16 * MB, 32 * MB, 64 * MB, 64 * MB};
	for (int i = 0; i < 6; i++) {
		sfs_ra_step(&ra, i * MB, (i + 1) * MB, size, 4 * MB, 64 * MB,
			    &a, &b);
		char key[32];
		snprintf(key, sizeof(key), "window_step%d_mib", i + 1);
		SFS_TEST_BOUND_EQ(key, want[i] / MB,
				  ra.window % MB ? -1
						 : (long long)(ra.window / MB));
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
	SFS_TEST_BOUND_EQ("window_after_random", 0, ra.window);
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

/* Tensors listed out of order, in two files, with the gaps a header
 * leaves: each byte finds its tensor's end, a gap none. */
START_TEST(tensor_ends)
{
	struct sfs_mtensor t[] = {
		{.file = 1, .off = 8 + 100, .len = 50},
		{.file = 0, .off = 200 + 3 * MB, .len = MB},
		{.file = 0, .off = 200, .len = 3 * MB},
		{.file = 0, .off = 200 + 4 * MB, .len = 0}, /* empty: none */
		{.file = 7, .off = 0, .len = 10},	    /* no such file */
	};
	struct sfs_manifest m = {.nfiles = 2, .ntensors = 5, .tensors = t};
	struct sfs_ra_tensors *rt;
	ck_assert_int_eq(sfs_ra_tensors_new(&m, &rt), 0);
	ck_assert_uint_eq(sfs_ra_tensor_end(rt, 0, 0), 0);   /* header */
	ck_assert_uint_eq(sfs_ra_tensor_end(rt, 0, 199), 0); /* header */
	ck_assert_uint_eq(sfs_ra_tensor_end(rt, 0, 200), 200 + 3 * MB);
	ck_assert_uint_eq(sfs_ra_tensor_end(rt, 0, 200 + 3 * MB - 1),
			  200 + 3 * MB);
	ck_assert_uint_eq(sfs_ra_tensor_end(rt, 0, 200 + 3 * MB), 200 + 4 * MB);
	ck_assert_uint_eq(sfs_ra_tensor_end(rt, 0, 200 + 4 * MB), 0);
	ck_assert_uint_eq(sfs_ra_tensor_end(rt, 1, 107), 0);
	ck_assert_uint_eq(sfs_ra_tensor_end(rt, 1, 108), 158);
	ck_assert_uint_eq(sfs_ra_tensor_end(rt, 1, 157), 158);
	ck_assert_uint_eq(sfs_ra_tensor_end(rt, 1, 158), 0);
	ck_assert_uint_eq(sfs_ra_tensor_end(rt, 2, 5), 0);
	ck_assert_uint_eq(sfs_ra_tensor_end(NULL, 0, 200), 0);
	/* Where each file's header ends: its first tensor. */
	ck_assert_uint_eq(sfs_ra_tensors_start(rt, 0), 200);
	ck_assert_uint_eq(sfs_ra_tensors_start(rt, 1), 108);
	ck_assert_uint_eq(sfs_ra_tensors_start(rt, 2), UINT64_MAX);
	ck_assert_uint_eq(sfs_ra_tensors_start(NULL, 0), UINT64_MAX);
	sfs_ra_tensors_free(rt);
	sfs_ra_tensors_free(NULL);
}
END_TEST

/* A read in a tensor pulls the rest of it (at most max past the read),
 * once: reads after it in that tensor pull nothing again. */
START_TEST(tensor_rest_pulled_once)
{
	struct sfs_ra ra = {0};
	uint64_t a, b;
	uint64_t t0 = 10 * MB, t1 = 30 * MB; /* a tensor of 20 MiB */
	sfs_ra_tensor_step(&ra, t0 + 128 * 1024, t1, 64 * MB, &a, &b);
	ck_assert_uint_eq(a, t0 + 128 * 1024);
	ck_assert_uint_eq(b, t1);
	sfs_ra_tensor_step(&ra, t0 + 256 * 1024, t1, 64 * MB, &a, &b);
	ck_assert_uint_eq(a, b);
	/* Capped: 4 MiB past the read, then on from there. */
	memset(&ra, 0, sizeof(ra));
	sfs_ra_tensor_step(&ra, t0 + MB, t1, 4 * MB, &a, &b);
	ck_assert_uint_eq(a, t0 + MB);
	ck_assert_uint_eq(b, t0 + 5 * MB);
	sfs_ra_tensor_step(&ra, t0 + 2 * MB, t1, 4 * MB, &a, &b);
	ck_assert_uint_eq(a, t0 + 5 * MB);
	ck_assert_uint_eq(b, t0 + 6 * MB);
	/* Another tensor: its own rest. */
	sfs_ra_tensor_step(&ra, 50 * MB, 52 * MB, 4 * MB, &a, &b);
	ck_assert_uint_eq(a, 50 * MB);
	ck_assert_uint_eq(b, 52 * MB);
	/* A read that ends a tensor, or in none, pulls nothing. */
	sfs_ra_tensor_step(&ra, 52 * MB, 52 * MB, 4 * MB, &a, &b);
	ck_assert_uint_eq(a, b);
	sfs_ra_tensor_step(&ra, 60 * MB, 0, 4 * MB, &a, &b);
	ck_assert_uint_eq(a, b);
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
	tcase_add_test(t, tensor_ends);
	tcase_add_test(t, tensor_rest_pulled_once);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
