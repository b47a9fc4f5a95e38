/* SPDX-License-Identifier: MIT */
/* bound.h - a bound a unit test asserts, printed as it is checked:
 * "bound: KEY OP LIMIT: VALUE", the line tests/claims_bounds.py compares
 * with the bound docs/claims.md states for the test. */
#ifndef SFS_TEST_BOUND_H
#define SFS_TEST_BOUND_H

#include <check.h>
#include <stdio.h>

/* SFS_TEST_BOUND(KEY, OP, LIMIT, VALUE): assert VALUE OP LIMIT (integers;
 * OP one of <= >= < > ==, printed "=" for ==, as docs/claims.md writes
 * it), printing the line first (flushed: a failed assertion ends the
 * forked test at once). */
#define SFS_TEST_BOUND(key, op, limit, value)                                  \
	do {                                                                   \
		long long l_ = (long long)(limit), v_ = (long long)(value);    \
		printf("bound: %s %s %lld: %lld\n", key,                       \
		       sfs_test_bound_op(#op), l_, v_);                        \
		fflush(stdout);                                                \
		ck_assert_msg(v_ op l_, "%s: %lld, bound %s %lld", key, v_,    \
			      sfs_test_bound_op(#op), l_);                     \
	} while (0)

#define SFS_TEST_BOUND_LE(key, limit, value)                                   \
	SFS_TEST_BOUND(key, <=, limit, value)
#define SFS_TEST_BOUND_GE(key, limit, value)                                   \
	SFS_TEST_BOUND(key, >=, limit, value)
#define SFS_TEST_BOUND_LT(key, limit, value)                                   \
	SFS_TEST_BOUND(key, <, limit, value)
#define SFS_TEST_BOUND_GT(key, limit, value)                                   \
	SFS_TEST_BOUND(key, >, limit, value)
#define SFS_TEST_BOUND_EQ(key, limit, value)                                   \
	SFS_TEST_BOUND(key, ==, limit, value)

/* The comparison as docs/claims.md writes it ("==" is "="). */
static inline const char *sfs_test_bound_op(const char *op)
{
	return op[0] == '=' ? "=" : op;
}

#endif /* SFS_TEST_BOUND_H */
