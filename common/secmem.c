/* SPDX-License-Identifier: MIT */
/* secmem.c - memory for secrets that core dumps leave out (secmem.h). */
#include "common/secmem.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

/* @len rounded up to whole pages (at least one). */
static size_t pages(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	return len ? (len + pg - 1) / pg * pg : pg;
}

void *sfs_secmem_alloc(size_t len)
{
	size_t n = pages(len);
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (madvise(p, n, MADV_DONTDUMP)) {
		munmap(p, n);
		return NULL;
	}
	/* Not swapped out either, where RLIMIT_MEMLOCK leaves room: a
	 * secret on a swap device outlives the process. */
	(void)mlock(p, n);
	return p;
}

void sfs_secmem_free(void *p, size_t len)
{
	if (!p)
		return;
	size_t n = pages(len);
	explicit_bzero(p, n);
	munlock(p, n);
	munmap(p, n);
}

int sfs_secmem_no_dumps(void)
{
	return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) ? -errno : 0;
}
