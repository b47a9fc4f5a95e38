/* SPDX-License-Identifier: MIT */
/*
 * secmem.h - memory for secrets (tokens, private keys) that core dumps
 * leave out (docs/security.md, "Secrets in memory").
 *
 * Two layers.  The daemons (seedfs seed, mount, pull, prefetch, probe)
 * make the whole process undumpable at start (sfs_secmem_no_dumps):
 * that covers what libraries copy where we cannot reach (libcurl's
 * request buffers, GnuTLS's and libmicrohttpd's copies of a TLS key, a
 * manifest's remote keys).  libseedfs runs inside an engine's process,
 * whose dumpability is the engine's to choose: there the secrets seedfs
 * holds itself live on pages of their own marked MADV_DONTDUMP (and
 * locked where the limit allows, so they are not swapped either).
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef SFS_SECMEM_H
#define SFS_SECMEM_H

#include <stddef.h>

/*
 * sfs_secmem_alloc - @len bytes, zeroed, on pages of their own (an
 * anonymous mapping) that core dumps leave out (MADV_DONTDUMP) and, when
 * RLIMIT_MEMLOCK allows, that are locked in memory.  [new:
 * sfs_secmem_free with the same @len]  NULL when no mapping can be had
 * or the kernel refuses MADV_DONTDUMP (a secret is not kept where a
 * dump would show it).
 */
void *sfs_secmem_alloc(size_t len);

/* sfs_secmem_free - wipe @len bytes at @p and unmap them.  NULL is
 * fine. */
void sfs_secmem_free(void *p, size_t len);

/*
 * sfs_secmem_no_dumps - make this process undumpable
 * (prctl(PR_SET_DUMPABLE, 0)): no core dump, no ptrace or /proc/PID
 * access (mem, environ, smaps, fd) by other processes of the same user;
 * root (CAP_SYS_PTRACE) keeps them.  For the daemons only, never for a
 * library's host process.  0 or -errno.
 */
int sfs_secmem_no_dumps(void);

#endif /* SFS_SECMEM_H */
