/* SPDX-License-Identifier: MIT */
/*
 * test_cache_oom.c - a cache whose segment table cannot be allocated:
 * sfs_cache_new fails with -ENOMEM and a message naming the segments,
 * and frees what it made without walking a table it does not have
 * (cache/slab.c sets nsegs only with its array).
 *
 * The allocator that fails on purpose: this binary is linked with
 * -Wl,--wrap=calloc, so the cache's calls to calloc() come here; one
 * of them, the segment table's (its count and element size), is
 * refused once when armed.  Every other call is the C library's (or
 * the sanitizer's).
 */
#include "check_run.h"

#include "cache/cache.h"
#include "cache/core.h"
#include "transports/transport.h"

#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);

static atomic_size_t fail_n; /* 0: none armed */
static atomic_size_t failed;

void *__wrap_calloc(size_t n, size_t size)
{
	size_t f = atomic_load(&fail_n);
	if (f && n == f && size == sizeof(struct cache_seg) &&
	    atomic_compare_exchange_strong(&fail_n, &f, 0)) {
		atomic_fetch_add(&failed, 1);
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(n, size);
}

START_TEST(segment_table_refused)
{
	char err[SFS_XPORT_ERR_MAX];
	struct sfs_xport *x;
	struct sfs_xport_cfg rc = {.protocol = "tcp",
				   .role = SFS_XPORT_REPLICA,
				   .timeout_ms = 5000};
	ck_assert_msg(sfs_xport_open(&rc, &x, err, sizeof(err)) == 0, "%s",
		      err);
	/* 200 MiB of 64 KiB chunks: 25 segments of 8 MiB. */
	struct sfs_cache_cfg cfg = {.xport = x,
				    .size = 200ull << 20,
				    .chunk_size = 64 << 10,
				    .timeout_ms = 5000};
	size_t nsegs = (cfg.size + SFS_SLAB_SEG - 1) / SFS_SLAB_SEG;
	ck_assert_uint_eq(nsegs, 25);
	struct sfs_cache *c = NULL;
	atomic_store(&fail_n, nsegs);
	ck_assert_int_eq(sfs_cache_new(&cfg, &c, err, sizeof(err)), -ENOMEM);
	ck_assert_uint_eq(atomic_load(&failed), 1);
	ck_assert_msg(strstr(err, "out of memory for 25 segments"), "%s", err);
	/* And the same cache once the allocator gives: the refusal above
	 * was the only thing in the way. */
	ck_assert_msg(sfs_cache_new(&cfg, &c, err, sizeof(err)) == 0, "%s",
		      err);
	sfs_cache_free(c);
	sfs_xport_close(x);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cache_oom");
	TCase *t = tcase_create("alloc");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, segment_table_refused);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
