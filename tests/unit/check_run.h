/* SPDX-License-Identifier: MIT */
/* check_run.h - run one Check suite; the exit status of a test binary. */
#ifndef SFS_CHECK_RUN_H
#define SFS_CHECK_RUN_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static inline int sfs_check_run(Suite *s)
{
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}

/*
 * Shards: a suite whose tests mostly wait (timeouts, stalls, holds) runs
 * as SFS_CHECK_SHARDS processes side by side, so that its wall time is
 * that of its slowest shard rather than the sum (make test's 20
 * minutes).  Tests are added with sfs_check_add(), which keeps test i in
 * shard i % n; each test still forks on its own under Check, with its
 * own timeout.  A test whose assertion depends on the scheduling (a
 * share of work between two endpoints) is added with
 * sfs_check_add_alone(): it runs after the shards, alone.  Tests use
 * their own endpoints (ephemeral ports, their own memory): nothing is
 * shared between two tests.
 */
#define SFS_CHECK_SHARDS 4

enum sfs_check_mode {
	SFS_CHECK_ALL,	 /* one process, every test */
	SFS_CHECK_SHARD, /* test i if i % n == k */
	SFS_CHECK_ALONE, /* the tests that run alone */
};
/* (Unused in the suites that do not shard.) */
static __attribute__((unused)) enum sfs_check_mode sfs_check_mode;
static __attribute__((unused)) int sfs_check_shard_k, sfs_check_shard_n = 1,
						      sfs_check_shard_i;

/* Add @t to @tc if it falls in this process's shard. */
#define sfs_check_add(tc, t)                                                   \
	do {                                                                   \
		if (sfs_check_mode == SFS_CHECK_ALL ||                         \
		    (sfs_check_mode == SFS_CHECK_SHARD &&                      \
		     sfs_check_shard_i++ % sfs_check_shard_n ==                \
			     sfs_check_shard_k))                               \
			tcase_add_test((tc), (t));                             \
	} while (0)

/* Add @t to @tc to run after the shards, alone. */
#define sfs_check_add_alone(tc, t)                                             \
	do {                                                                   \
		if (sfs_check_mode != SFS_CHECK_SHARD)                         \
			tcase_add_test((tc), (t));                             \
	} while (0)

/*
 * sfs_check_run_shards - run the suite with @build as SFS_CHECK_SHARDS
 * processes at once, each keeping its shard, then the tests added to
 * run alone.  Each shard is this program executed again (fork, then
 * exec of /proc/self/exe with SFS_CHECK_SHARD=K and
 * SFS_CHECK_SHARD_PARENT=<this pid> in its environment), a fresh
 * process as ctest starts one: with bare forks, a ThreadSanitizer run
 * once had a pull never posted in 10 s (cause not proven; not seen
 * since).  Returns the exit status: 1 if any shard failed or did not
 * exit by itself, or a test run alone failed.  The shards' output
 * interleaves (a long report may be cut by another's).  With CK_FORK=no,
 * CK_RUN_CASE or CK_RUN_SUITE set (one test, under a debugger), a Check
 * log file named (CK_LOG_FILE_NAME, CK_XML_LOG_FILE_NAME,
 * CK_TAP_LOG_FILE_NAME: one file, one writer) or SFS_CHECK_SHARDS=1:
 * one process, every test, as sfs_check_run().  SFS_CHECK_SHARD left in
 * an environment by anything but the parent is ignored, with a line.
 */
static inline int sfs_check_run_shards(Suite *(*build)(void))
{
	const char *fork_env = getenv("CK_FORK");
	const char *n_env = getenv("SFS_CHECK_SHARDS");
	const char *k_env = getenv("SFS_CHECK_SHARD");
	int n = SFS_CHECK_SHARDS;
	pid_t pids[64];
	int failed = 0;

	if (n_env && atoi(n_env) >= 1 && atoi(n_env) <= 64)
		n = atoi(n_env);
	if ((fork_env && strcmp(fork_env, "no") == 0) ||
	    getenv("CK_RUN_CASE") || getenv("CK_RUN_SUITE") ||
	    getenv("CK_LOG_FILE_NAME") || getenv("CK_XML_LOG_FILE_NAME") ||
	    getenv("CK_TAP_LOG_FILE_NAME") || n == 1)
		return sfs_check_run(build());
	if (k_env) {
		const char *parent = getenv("SFS_CHECK_SHARD_PARENT");
		int k = atoi(k_env);
		if (parent && atol(parent) == (long)getppid() && k >= 0 &&
		    k < n) { /* one shard, executed by the run below */
			sfs_check_mode = SFS_CHECK_SHARD;
			sfs_check_shard_k = k;
			sfs_check_shard_n = n;
			return sfs_check_run(build());
		}
		fprintf(stderr,
			"SFS_CHECK_SHARD=%s not set by this run's "
			"parent: ignored, every shard run\n",
			k_env);
		unsetenv("SFS_CHECK_SHARD");
	}

	char nbuf[16], pbuf[24];
	snprintf(nbuf, sizeof(nbuf), "%d", n);
	snprintf(pbuf, sizeof(pbuf), "%ld", (long)getpid());
	fflush(NULL);
	for (int k = 0; k < n; k++) {
		pids[k] = fork();
		if (pids[k] < 0) {
			perror("fork");
			failed = 1;
			continue;
		}
		if (pids[k] == 0) {
			char kbuf[16];
			snprintf(kbuf, sizeof(kbuf), "%d", k);
			setenv("SFS_CHECK_SHARD", kbuf, 1);
			setenv("SFS_CHECK_SHARDS", nbuf, 1);
			setenv("SFS_CHECK_SHARD_PARENT", pbuf, 1);
			execl("/proc/self/exe", "check-shard", (char *)NULL);
			perror("exec /proc/self/exe");
			_exit(127);
		}
	}
	for (int k = 0; k < n; k++) {
		int st;
		if (pids[k] <= 0)
			continue;
		if (waitpid(pids[k], &st, 0) != pids[k] || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0) {
			fprintf(stderr, "shard %d of %d failed\n", k, n);
			failed = 1;
		}
	}
	sfs_check_mode = SFS_CHECK_ALONE;
	if (sfs_check_run(build()))
		failed = 1;
	return failed;
}

#endif /* SFS_CHECK_RUN_H */
