/* SPDX-License-Identifier: MIT */
/*
 * seed/guard.c and the seed's hashing under it (seed/publish.c): a
 * real file, mapped privately as the seed maps what it publishes, then
 * truncated under the mapping.  A guarded read past the new end is
 * -EFAULT with the address it read; the process goes on; an unguarded
 * one still ends the process.
 */
#include "seed/guard.h"
#include "seed/publish.h"

#include "check_run.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MB (1u << 20)

/* A file of @size bytes (byte i is i * 7 mod 251), mapped read-only and
 * private, then cut to @keep bytes.  *@fd stays open. */
static uint8_t *mapped_then_cut(size_t size, size_t keep, int *fd)
{
	char path[] = "/tmp/sfs-guard.XXXXXX";
	int f = mkstemp(path);
	ck_assert_int_ge(f, 0);
	unlink(path);
	uint8_t *buf = malloc(size);
	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i < size; i++)
		buf[i] = (uint8_t)(i * 7 % 251);
	ck_assert_int_eq(write(f, buf, size), (ssize_t)size);
	free(buf);
	uint8_t *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, f, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	ck_assert_int_eq(ftruncate(f, (off_t)keep), 0);
	*fd = f;
	return map;
}

START_TEST(copy_past_the_end)
{
	int fd;
	uint8_t *map = mapped_then_cut(4 * MB, MB, &fd);
	uint8_t *dst = malloc(MB);
	const void *at = NULL;
	/* Before the cut: the bytes. */
	ck_assert_int_eq(sfs_guard_copy(dst, map + 4096, 8192, &at), 0);
	for (size_t i = 0; i < 8192; i++)
		ck_assert_uint_eq(dst[i], (uint8_t)((4096 + i) * 7 % 251));
	/* Across it: -EFAULT, at an address past it, and again. */
	for (int k = 0; k < 3; k++) {
		at = NULL;
		ck_assert_int_eq(
			sfs_guard_copy(dst, map + MB - 4096, 2 * 4096, &at),
			-EFAULT);
		ck_assert((const uint8_t *)(at) >= (map + MB));
		ck_assert((const uint8_t *)(at) < (map + 4 * MB));
	}
	/* The process and its signal mask are as before: SIGBUS is not
	 * left blocked. */
	sigset_t now;
	ck_assert_int_eq(pthread_sigmask(SIG_SETMASK, NULL, &now), 0);
	ck_assert_int_eq(sigismember(&now, SIGBUS), 0);
	free(dst);
	munmap(map, 4 * MB);
	close(fd);
}
END_TEST

struct nest {
	const uint8_t *bad;
	int inner_rc;
};

static int inner(void *arg)
{
	const uint8_t *p = arg;
	return *(const volatile uint8_t *)p;
}

static int outer(void *arg)
{
	struct nest *n = arg;
	n->inner_rc = sfs_guard_run(inner, (void *)n->bad, n->bad, 1, NULL);
	return 42; /* goes on after the inner guard's fault */
}

START_TEST(nested)
{
	int fd;
	uint8_t *map = mapped_then_cut(2 * MB, MB, &fd);
	struct nest n = {map + MB + 100, 0};
	ck_assert_int_eq(sfs_guard_run(outer, &n, map, 2 * MB, NULL), 42);
	ck_assert_int_eq(n.inner_rc, -EFAULT);
	/* And the outer one still guards, once the inner has returned. */
	ck_assert_int_eq(
		sfs_guard_run(inner, map + MB + 8192, map, 2 * MB, NULL),
		-EFAULT);
	ck_assert_int_eq(sfs_guard_run(inner, map + 5, map, 2 * MB, NULL),
			 map[5]);
	munmap(map, 2 * MB);
	close(fd);
}
END_TEST

struct hit {
	const uint8_t *p;
	int rc;
};

static void *hit_run(void *arg)
{
	struct hit *h = arg;
	for (int k = 0; k < 200 && !h->rc; k++) {
		uint8_t b[64];
		int rc = sfs_guard_copy(b, h->p, sizeof(b), NULL);
		if (rc != -EFAULT)
			h->rc = rc ? rc : -EINVAL;
	}
	return NULL;
}

/* Four threads fault at once, 200 times each: each its own guard. */
START_TEST(threads)
{
	int fd;
	uint8_t *map = mapped_then_cut(2 * MB, 4096, &fd);
	pthread_t t[4];
	struct hit h[4];
	for (int i = 0; i < 4; i++) {
		h[i] = (struct hit){map + MB + (size_t)i * 8192, 0};
		ck_assert_int_eq(pthread_create(&t[i], NULL, hit_run, &h[i]),
				 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(h[i].rc, 0);
	}
	munmap(map, 2 * MB);
	close(fd);
}
END_TEST

/* A SIGBUS queued to this thread by a process (si_code SI_QUEUE) that
 * names an address in the guarded range @arg, as a fault would. */
static int send_bus(void *arg)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	si.si_signo = SIGBUS;
	si.si_code = SI_QUEUE;
	si.si_addr = arg;
	syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid),
		SIGBUS, &si);
	return 0;
}

/* An unguarded read past the end ends the process as it did before the
 * handler was installed (the default action; under ASan, its report). */
START_TEST(unguarded_still_ends)
{
	int fd;
	uint8_t *map = mapped_then_cut(2 * MB, MB, &fd);
	ck_assert_int_eq(sfs_guard_copy(&(uint8_t){0}, map, 1, NULL), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		volatile uint8_t b = map[MB + 10];
		(void)b;
		_exit(0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(!(WIFEXITED(st) && WEXITSTATUS(st) == 0),
		      "an unguarded read past the end went on");
	if (WIFSIGNALED(st))
		ck_assert_int_eq(WTERMSIG(st), SIGBUS);
	/* A SIGBUS another process sends (kill -BUS) is no fault of a
	 * read: inside a guard too, the process ends as before. */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		sfs_guard_run(send_bus, map + MB + 100, map, 2 * MB, NULL);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(!(WIFEXITED(st) && WEXITSTATUS(st) == 0),
		      "a SIGBUS sent inside a guard was taken for a fault");
	if (WIFSIGNALED(st))
		ck_assert_int_eq(WTERMSIG(st), SIGBUS);
	munmap(map, 2 * MB);
	close(fd);
}
END_TEST

/* A child's exit status after @fn(@map). */
static int in_child(void (*fn)(uint8_t *map), uint8_t *map)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		fn(map);
		_exit(0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return st;
}

/* A fault outside the range a guard reads is not its to take. */
static void fault_outside(uint8_t *map)
{
	sfs_guard_run(inner, map + MB + 100, map, 4096, NULL);
	_exit(3); /* it went on */
}

static void exit_77(int sig)
{
	(void)sig;
	_exit(77);
}

/* A handler a host installs over ours later: ours is put back in front
 * at the next guard, the host's behind it takes what is not ours. */
static void later_handler(uint8_t *map)
{
	ck_assert_int_eq(sfs_guard_run(inner, map + 5, map, 2 * MB, NULL),
			 map[5]);
	signal(SIGBUS, exit_77);
	if (sfs_guard_run(inner, map + MB + 100, map, 2 * MB, NULL) != -EFAULT)
		_exit(4);
	volatile uint8_t b = map[MB + 200]; /* unguarded: the host's */
	(void)b;
	_exit(5);
}

/* SIG_IGN with SA_SIGINFO before us: a SIGBUS sent is still ignored. */
static void ignored_before(uint8_t *map)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGBUS, &sa, NULL);
	ck_assert_int_eq(sfs_guard_run(inner, map + 5, map, 2 * MB, NULL),
			 map[5]);
	kill(getpid(), SIGBUS);
}

START_TEST(not_ours)
{
	int fd;
	uint8_t *map = mapped_then_cut(2 * MB, MB, &fd);
	int st = in_child(fault_outside, map);
	ck_assert_msg(!(WIFEXITED(st) && WEXITSTATUS(st) == 3),
		      "a fault outside the guarded range was caught");
	st = in_child(later_handler, map);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 77,
		      "host handler: status %#x", st);
	st = in_child(ignored_before, map);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "an ignored SIGBUS: status %#x", st);
	munmap(map, 2 * MB);
	close(fd);
}
END_TEST

/* The seed's sums over a mapping whose file shrank: -EFAULT and where,
 * on the parallel path (every CPU hashes whole chunks) and the
 * sequential one, with SHA-256 too; seed_sums_free frees the rest. */
START_TEST(sums_of_a_shrunk_file)
{
	int fd;
	size_t size = 64 * MB;
	uint8_t *map = mapped_then_cut(size, 40 * MB, &fd);
	struct seed_sums ss;
	/* 64 chunks of 1 MiB: the parallel path. */
	ck_assert_int_eq(seed_sums_start(&ss, 20, 1), 0);
	ck_assert_int_eq(seed_sums_add(&ss, map, size), -EFAULT);
	ck_assert((const uint8_t *)(ss.fault) >= (map + 40 * MB));
	ck_assert((const uint8_t *)(ss.fault) < (map + size));
	seed_sums_free(&ss);
	/* In small pieces: the streaming states. */
	ck_assert_int_eq(seed_sums_start(&ss, 20, 1), 0);
	int rc = 0;
	size_t off = 0;
	for (; off < size && !rc; off += 300000)
		rc = seed_sums_add(&ss, map + off,
				   off + 300000 <= size ? 300000 : size - off);
	ck_assert_int_eq(rc, -EFAULT);
	ck_assert_uint_gt(off, 40 * MB);
	ck_assert((const uint8_t *)(ss.fault) >= (map + 40 * MB));
	seed_sums_free(&ss);
	/* Below the cut, the same sums as from a copy of the bytes. */
	uint8_t *copy = malloc(40 * MB);
	memcpy(copy, map, 40 * MB);
	struct seed_sums a, b;
	ck_assert_int_eq(seed_sums_start(&a, 20, 1), 0);
	ck_assert_int_eq(seed_sums_start(&b, 20, 1), 0);
	ck_assert_int_eq(seed_sums_add(&a, map, 40 * MB), 0);
	ck_assert_int_eq(seed_sums_add(&b, copy, 40 * MB), 0);
	ck_assert_uint_eq(a.n, 40);
	ck_assert_int_eq(memcmp(a.sums, b.sums, 40 * sizeof(a.sums[0])), 0);
	ck_assert_int_eq(memcmp(a.shas, b.shas, 40 * 32), 0);
	seed_sums_free(&a);
	seed_sums_free(&b);
	free(copy);
	munmap(map, size);
	close(fd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("guard");
	TCase *t = tcase_create("guard");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, copy_past_the_end);
	tcase_add_test(t, nested);
	tcase_add_test(t, threads);
	tcase_add_test(t, unguarded_still_ends);
	tcase_add_test(t, not_ours);
	tcase_add_test(t, sums_of_a_shrunk_file);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
