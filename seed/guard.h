/* SPDX-License-Identifier: MIT */
/*
 * guard.h - reading a mapping of a file that may shrink under the
 * reader.
 *
 * The seed serves a model's files through private mappings of them.
 * Another process may truncate or rewrite one in place meanwhile (cp or
 * torch.save onto the same name): a read of a page past the file's new
 * end then raises SIGBUS, whose default action ends the seed.  Code
 * that reads such a mapping on the seed's own threads (hashing, header
 * parsing, inline copies) runs under sfs_guard_run: a SIGBUS taken on
 * that thread inside the guarded call ends the call with -EFAULT, and
 * the file is refused.  A SIGBUS anywhere else keeps the action it had
 * (the default, or a sanitizer's handler).
 *
 * What a guarded function may do: read mappings, compute, and allocate
 * only into objects its caller can reach and free (it may stop at any
 * read of a mapping, and nothing after that read runs).  It must not
 * take a lock, start or join a thread, or call into a library that
 * does, while it reads a mapping.
 */
#ifndef SFS_GUARD_H
#define SFS_GUARD_H

#include <stddef.h>

/*
 * sfs_guard_run - fn(@arg) on this thread, guarding the @len bytes at
 * @lo (the mapping it reads).  Returns what fn returned, or -EFAULT when
 * it read a page there that has no file behind it any more (SIGBUS):
 * *@fault (if not NULL) is then the address it read.  A fault outside
 * [@lo, @lo + @len) is not caught (the process ends, as without a
 * guard).  -ENOSYS when the handler could not be installed (nothing was
 * run).  Guards nest: the innermost takes the faults in its range.
 * Thread safe: each thread has its own guard.  The handler is
 * process-wide and stays once installed (a host process of libseedfs
 * keeps its own behind it: see guard.c).
 */
int sfs_guard_run(int (*fn)(void *arg), void *arg, const void *lo, size_t len,
		  const void **fault);

/*
 * sfs_guard_copy - memcpy(@dst, @src, @len) under a guard: 0, or
 * -EFAULT (@src's file shrank; *@fault as above).  Thread safe.
 */
int sfs_guard_copy(void *dst, const void *src, size_t len, const void **fault);

#endif /* SFS_GUARD_H */
