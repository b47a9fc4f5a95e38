/* SPDX-License-Identifier: MIT */
/*
 * guard.c - a SIGBUS on a guarded thread, reading the range it guards,
 * ends the guarded call, not the process (guard.h).
 *
 * One process-wide handler.  Each thread keeps its innermost guard:
 * where it returns to and the range it reads.  The handler jumps there
 * for a fault (the kernel's, si_code > 0) at an address in that range;
 * anything else goes where it went before us: the handler there was, or
 * the default action (raised again: the process ends, as without us).
 * A handler installed over ours later (a host process that embeds
 * libseedfs, say) is found at the next guard, which puts ours back in
 * front of it.
 */
#include "guard.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* This thread's innermost guard, and the address its last fault read.
 * Initial-exec: the handler reads them on any thread, and libseedfs
 * (which publishes through this code) may be loaded by dlopen, where
 * the general model could allocate on a thread's first access.
 * Volatile: the handler reads what the guarded call's thread wrote. */
#define GUARD_TLS _Thread_local __attribute__((tls_model("initial-exec")))
struct guard {
	sigjmp_buf jb;
	uintptr_t lo, hi; /* the range it reads: [lo, hi) */
};
static GUARD_TLS struct guard *volatile guard_cur;
static GUARD_TLS const void *volatile guard_addr;

/* What SIGBUS did before us; written under guard_lock before our
 * handler is (re)installed, read by the handler. */
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction guard_prev;
static atomic_int guard_installed; /* ours was put in front once */

static void on_sigbus(int sig, siginfo_t *si, void *uc);

static int ours(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_sigbus;
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	struct guard *g = guard_cur;
	uintptr_t a = si ? (uintptr_t)si->si_addr : 0;
	/* A fault of this thread's own read in the range it guards (not a
	 * SIGBUS another process sent, nor a fault elsewhere: in malloc,
	 * say, whose locks a jump would leave held). */
	if (g && si && si->si_code > 0 && a >= g->lo && a < g->hi) {
		guard_cur = NULL;
		guard_addr = si->si_addr;
		siglongjmp(g->jb, 1);
	}
	/* Not ours: what it did before us.  SIG_DFL and SIG_IGN first,
	 * whatever the flags say (the union's other member is then no
	 * function). */
	struct sigaction prev = guard_prev;
	int sent = !si || si->si_code <= 0;
	if (prev.sa_handler == SIG_IGN && sent)
		return; /* ignored, as before us */
	if (prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN) {
		/* The default, now: the process ends with SIGBUS. */
		signal(SIGBUS, SIG_DFL);
		raise(SIGBUS);
		return;
	}
	if (prev.sa_flags & SA_SIGINFO)
		prev.sa_sigaction(sig, si, uc);
	else
		prev.sa_handler(sig);
}

/* Our handler in front, with what is there now behind it (unless that
 * is ours already).  0 or -ENOSYS. */
static int install(void)
{
	struct sigaction sa, cur;
	int rc = 0;
	pthread_mutex_lock(&guard_lock);
	if (sigaction(SIGBUS, NULL, &cur)) {
		rc = -ENOSYS;
	} else if (!ours(&cur)) {
		guard_prev = cur;
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigbus;
		sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGBUS, &sa, NULL))
			rc = -ENOSYS;
		else
			atomic_store(&guard_installed, 1);
	}
	pthread_mutex_unlock(&guard_lock);
	return rc;
}

int sfs_guard_run(int (*fn)(void *arg), void *arg, const void *lo, size_t len,
		  const void **fault)
{
	struct guard g;
	struct guard *outer;
	struct sigaction cur;

	/* Ours, still in front? (One system call: a guard covers a file's
	 * hashing or a header's copy, not a byte.) */
	if (!atomic_load(&guard_installed) || sigaction(SIGBUS, NULL, &cur) ||
	    !ours(&cur)) {
		int rc = install();
		if (rc)
			return rc;
	}
	g.lo = (uintptr_t)lo;
	g.hi = (uintptr_t)lo + len;
	outer = guard_cur;
	/* The signal mask too: restored as it was here. */
	if (sigsetjmp(g.jb, 1)) {
		guard_cur = outer;
		if (fault)
			*fault = guard_addr;
		return -EFAULT;
	}
	guard_cur = &g;
	int rc = fn(arg);
	guard_cur = outer;
	return rc;
}

struct guard_copy {
	void *dst;
	const void *src;
	size_t len;
};

static int copy_fn(void *arg)
{
	struct guard_copy *c = arg;
	memcpy(c->dst, c->src, c->len);
	return 0;
}

int sfs_guard_copy(void *dst, const void *src, size_t len, const void **fault)
{
	struct guard_copy c = {dst, src, len};
	return len ? sfs_guard_run(copy_fn, &c, src, len, fault) : 0;
}
