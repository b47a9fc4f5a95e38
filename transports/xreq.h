/* SPDX-License-Identifier: MIT */
/*
 * xreq.h - bookkeeping of one sfs_xport_read call, shared by backends:
 * the operations it was split into, the first error, the list of calls
 * in flight (so close can cancel them).  Only transports/ includes it.
 *
 * A request starts with nops + 1 references (the +1 belongs to the
 * poster until it has posted everything); each completion drops one;
 * the last one calls done() and frees the request.
 */
#ifndef SFS_XREQ_H
#define SFS_XREQ_H

#include "transport.h"

#include <pthread.h>
#include <stdatomic.h>

struct sfs_xreq {
	struct sfs_xreq *prev, *next; /* protected by the list's lock */
	sfs_xport_done_fn done;
	void *arg;
	atomic_int pending;
	atomic_int status; /* first error */
};

struct sfs_xreq_list {
	pthread_mutex_t lock;
	struct sfs_xreq *head; /* protected by lock */
};

/*
 * sfs_xreq_new - a request of @nops operations of @op_size bytes each,
 * allocated right after the header (sfs_xreq_op); linked into @l.
 * Returns NULL when out of memory.
 */
struct sfs_xreq *sfs_xreq_new(struct sfs_xreq_list *l, size_t nops,
			      size_t op_size, sfs_xport_done_fn done,
			      void *arg);

/* sfs_xreq_op - operation @i of @r. */
static inline void *sfs_xreq_op(struct sfs_xreq *r, size_t i, size_t op_size)
{
	return (char *)(r + 1) + i * op_size;
}

/* sfs_xreq_put - drop @n references with @status (0 or -errno); the last
 * completes the request.  Thread safe. */
void sfs_xreq_put(struct sfs_xreq_list *l, struct sfs_xreq *r, int n,
		  int status);

/*
 * sfs_xreq_end_post - the poster is done: @posted of the @nops
 * operations went out, posting stopped at @status.  When nothing went
 * out the request is freed and @status returned (done() is not called);
 * otherwise the operations never posted and the poster's own reference
 * are dropped and 0 returned (done() runs when the posted ones
 * complete).  The return value of a backend's read.
 */
int sfs_xreq_end_post(struct sfs_xreq_list *l, struct sfs_xreq *r, size_t nops,
		      size_t posted, int status);

/* sfs_xreq_cancel_all - complete every request in @l with -ECANCELED.
 * Only once nothing can complete them any more. */
void sfs_xreq_cancel_all(struct sfs_xreq_list *l);

#endif /* SFS_XREQ_H */
