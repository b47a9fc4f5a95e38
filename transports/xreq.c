/* SPDX-License-Identifier: MIT */
#include "xreq.h"

#include <errno.h>
#include <stdlib.h>

struct sfs_xreq *sfs_xreq_new(struct sfs_xreq_list *l, size_t nops,
			      size_t op_size, sfs_xport_done_fn done, void *arg)
{
	struct sfs_xreq *r = malloc(sizeof(*r) + nops * op_size);
	if (!r)
		return NULL;
	r->done = done;
	r->arg = arg;
	r->prev = NULL;
	atomic_init(&r->pending, (int)nops + 1);
	atomic_init(&r->status, 0);
	pthread_mutex_lock(&l->lock);
	r->next = l->head;
	if (r->next)
		r->next->prev = r;
	l->head = r;
	pthread_mutex_unlock(&l->lock);
	return r;
}

static void unlink_req(struct sfs_xreq_list *l, struct sfs_xreq *r)
{
	pthread_mutex_lock(&l->lock);
	if (r->prev)
		r->prev->next = r->next;
	else
		l->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	pthread_mutex_unlock(&l->lock);
}

void sfs_xreq_put(struct sfs_xreq_list *l, struct sfs_xreq *r, int n,
		  int status)
{
	if (status) {
		int zero = 0;
		atomic_compare_exchange_strong(&r->status, &zero, status);
	}
	if (atomic_fetch_sub(&r->pending, n) != n)
		return;
	unlink_req(l, r);
	r->done(r->arg, atomic_load(&r->status));
	free(r);
}

int sfs_xreq_end_post(struct sfs_xreq_list *l, struct sfs_xreq *r, size_t nops,
		      size_t posted, int status)
{
	if (posted == 0 && status) {
		unlink_req(l, r);
		free(r);
		return status;
	}
	sfs_xreq_put(l, r, (int)(nops - posted) + 1, status);
	return 0;
}

void sfs_xreq_cancel_all(struct sfs_xreq_list *l)
{
	pthread_mutex_lock(&l->lock);
	struct sfs_xreq *r = l->head;
	l->head = NULL;
	pthread_mutex_unlock(&l->lock);
	while (r) {
		struct sfs_xreq *next = r->next;
		r->done(r->arg, -ECANCELED);
		free(r);
		r = next;
	}
}
