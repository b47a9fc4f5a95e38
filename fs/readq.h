/* SPDX-License-Identifier: MIT */
/*
 * readq.h - threads of the mount's own, apart from libfuse's workers.
 * A read that may wait for a source is queued in one such queue (the
 * read threads), an open that may in another (the open threads), and
 * answered from one of its threads, so libfuse's workers stay free for
 * status, lookups, listings and attributes however many wait (FUSE
 * low-level replies may come from any thread).
 *
 * At most @nthreads threads, started as reads need them (none for a
 * mount whose reads all hit the cache); at most @cap jobs queued.  A
 * job is the caller's (embedded in its own struct): the queue only
 * links it.
 */
#ifndef SFS_READQ_H
#define SFS_READQ_H

#include <stddef.h>

struct sfs_readq;

/* What the read threads are called (pthread_setname_np; tests count
 * the mount's other threads apart from them). */
#define SFS_READQ_THREAD_NAME "seedfs-read"

struct sfs_readq_job {
	struct sfs_readq_job *next; /* protected by the queue's lock */
	/*
	 * run - answer the job on a read thread (@stopping 0) or refuse it
	 * unrun because the queue is being freed (@stopping 1: answer it
	 * with an error); either way the job is the callee's from then.
	 */
	void (*run)(struct sfs_readq_job *j, int stopping);
};

/*
 * sfs_readq_new - a queue of at most @cap jobs served by at most
 * @nthreads threads (each >= 1).  *out [new].  Returns 0 or -ENOMEM.
 */
int sfs_readq_new(unsigned int nthreads, size_t cap, struct sfs_readq **out);

/*
 * sfs_readq_push - queue @j [given to the queue on 0] for a read
 * thread, starting one if every thread is busy and fewer than nthreads
 * run.  Returns 0; -EAGAIN when @cap jobs wait already or no thread
 * runs nor could start; -ESHUTDOWN once freeing began (@j stays the
 * caller's on an error: it answers it itself).  Thread safe.
 */
int sfs_readq_push(struct sfs_readq *q, struct sfs_readq_job *j);

/*
 * sfs_readq_free - refuse the jobs still queued (run with @stopping 1),
 * wait for the jobs running to return and join the threads, free.  The
 * caller makes the running jobs end (their waits must be bounded: the
 * mount ends its cache waits first, sfs_cache_end_waits).  NULL is
 * fine.  Not thread safe with sfs_readq_push.
 */
void sfs_readq_free(struct sfs_readq *q);

#endif /* SFS_READQ_H */
