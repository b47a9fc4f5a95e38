/* SPDX-License-Identifier: MIT */
/* bound.h - a bound a unit test asserts, printed as it is checked:
 * "bound: KEY OP LIMIT: VALUE", the line tests/claims_bounds.py compares
 * with the bound docs/claims.md states for the test. */
#ifndef SFS_TEST_BOUND_H
#define SFS_TEST_BOUND_H

#include <check.h>
#include <stdio.h>

/* SFS_TEST_BOUND_LE(KEY, LIMIT, VALUE): assert VALUE <= LIMIT (integers),
 * printing the line first (flushed: a failed assertion ends the forked
 * test at once). */
#define SFS_TEST_BOUND_LE(key, limit, value)                                   \
	do {                                                                   \
		long long l_ = (long long)(limit), v_ = (long long)(value);    \
		printf("bound: %s <= %lld: %lld\n", key, l_, v_);              \
		fflush(stdout);                                                \
		ck_assert_msg(v_ <= l_, "%s: %lld, bound <= %lld", key, v_,    \
			      l_);                                             \
	} while (0)

#endif /* SFS_TEST_BOUND_H */
