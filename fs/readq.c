/* SPDX-License-Identifier: MIT */
/*
 * readq.c - read threads of the mount's own (readq.h): a FIFO of jobs
 * and threads started as jobs find every thread busy.
 */
#include "fs/readq.h"

#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct sfs_readq {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct sfs_readq_job *head, *tail; /* protected by lock */
	size_t queued;			   /* protected by lock */
	size_t cap;
	unsigned int idle;     /* threads waiting for a job: lock */
	unsigned int nthreads; /* started: lock */
	unsigned int max_threads;
	int stopping;	    /* protected by lock */
	pthread_t *threads; /* [max_threads]; [0, nthreads) started */
};

static void *readq_thread(void *p)
{
	struct sfs_readq *q = p;

	/* By name in /proc/PID/task/TID/comm: a pool that grows as reads
	 * wait, to its bound, told apart from threads that would leak. */
	pthread_setname_np(pthread_self(), SFS_READQ_THREAD_NAME);
	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (!q->head && !q->stopping) {
			q->idle++;
			pthread_cond_wait(&q->cond, &q->lock);
			q->idle--;
		}
		if (!q->head) /* stopping, and nothing left to run */
			break;
		struct sfs_readq_job *j = q->head;
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
		q->queued--;
		int stopping = q->stopping;
		pthread_mutex_unlock(&q->lock);
		j->run(j, stopping);
		pthread_mutex_lock(&q->lock);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int sfs_readq_new(unsigned int nthreads, size_t cap, struct sfs_readq **out)
{
	struct sfs_readq *q = calloc(1, sizeof(*q));

	*out = NULL;
	if (!q)
		return -ENOMEM;
	q->max_threads = nthreads ? nthreads : 1;
	q->cap = cap ? cap : 1;
	if (!(q->threads = calloc(q->max_threads, sizeof(*q->threads)))) {
		free(q);
		return -ENOMEM;
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	*out = q;
	return 0;
}

int sfs_readq_push(struct sfs_readq *q, struct sfs_readq_job *j)
{
	int rc = 0;

	pthread_mutex_lock(&q->lock);
	if (q->stopping) {
		rc = -ESHUTDOWN;
		goto out;
	}
	if (q->queued >= q->cap) {
		rc = -EAGAIN;
		goto out;
	}
	/* Every thread busy with a job (or about to take one queued): one
	 * more, while there may be. */
	if (q->idle <= q->queued && q->nthreads < q->max_threads) {
		int err = pthread_create(&q->threads[q->nthreads], NULL,
					 readq_thread, q);
		if (!err)
			q->nthreads++;
		else if (!q->nthreads) {
			SFS_LOG(SFS_WARN, "fs",
				"cannot start a read thread: %s",
				strerror(err));
			rc = -EAGAIN;
			goto out;
		}
	}
	j->next = NULL;
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	q->queued++;
	if (q->idle)
		pthread_cond_signal(&q->cond);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

void sfs_readq_free(struct sfs_readq *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stopping = 1;
	pthread_cond_broadcast(&q->cond);
	unsigned int n = q->nthreads;
	pthread_mutex_unlock(&q->lock);
	for (unsigned int i = 0; i < n; i++)
		pthread_join(q->threads[i], NULL);
	/* No thread ever started: what is queued is refused here. */
	for (struct sfs_readq_job *j = q->head, *next; j; j = next) {
		next = j->next;
		j->run(j, 1);
	}
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->lock);
	free(q->threads);
	free(q);
}
