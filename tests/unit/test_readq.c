/* SPDX-License-Identifier: MIT */
/* Unit tests: the mount's read threads (fs/readq.h). */
#include "check_run.h"

#include "fs/readq.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

/* A job that, when @gated, waits until the gate opens. */
struct job {
	struct sfs_readq_job j;
	int gated;
	int ran; /* 1: run, 2: refused (stopping) */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int open_gate, running, ran_count;

static void run(struct sfs_readq_job *j, int stopping)
{
	struct job *b = (struct job *)j;
	pthread_mutex_lock(&lock);
	running++;
	pthread_cond_broadcast(&cond);
	while (b->gated && !open_gate && !stopping)
		pthread_cond_wait(&cond, &lock);
	b->ran = stopping ? 2 : 1;
	ran_count++;
	running--;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void reset(void)
{
	pthread_mutex_lock(&lock);
	open_gate = running = ran_count = 0;
	pthread_mutex_unlock(&lock);
}

static void wait_running(int n)
{
	pthread_mutex_lock(&lock);
	while (running < n)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
}

static void gate(int open)
{
	pthread_mutex_lock(&lock);
	open_gate = open;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void *open_later(void *p)
{
	(void)p;
	usleep(200 * 1000);
	gate(1);
	return NULL;
}

/* Two threads busy, three queued: the cap refuses the next one (the
 * caller answers it itself); once the gate opens every job runs. */
START_TEST(cap_refuses_then_all_run)
{
	struct sfs_readq *q;
	struct job jobs[6] = {0};
	reset();
	ck_assert_int_eq(sfs_readq_new(2, 3, &q), 0);
	for (int i = 0; i < 6; i++) {
		jobs[i].j.run = run;
		jobs[i].gated = 1;
	}
	ck_assert_int_eq(sfs_readq_push(q, &jobs[0].j), 0);
	ck_assert_int_eq(sfs_readq_push(q, &jobs[1].j), 0);
	wait_running(2); /* both threads taken */
	for (int i = 2; i < 5; i++)
		ck_assert_int_eq(sfs_readq_push(q, &jobs[i].j), 0);
	ck_assert_int_eq(sfs_readq_push(q, &jobs[5].j), -EAGAIN);
	gate(1);
	pthread_mutex_lock(&lock);
	while (ran_count < 5)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(jobs[i].ran, 1);
	ck_assert_int_eq(jobs[5].ran, 0);
	sfs_readq_free(q);
}
END_TEST

/* Freeing with jobs queued behind busy threads: those are refused
 * (run with stopping), never run, and free returns once the busy ones
 * did. */
START_TEST(free_refuses_queued)
{
	struct sfs_readq *q;
	struct job jobs[5] = {0};
	pthread_t t;
	reset();
	ck_assert_int_eq(sfs_readq_new(2, 8, &q), 0);
	for (int i = 0; i < 5; i++) {
		jobs[i].j.run = run;
		jobs[i].gated = i < 2;
	}
	ck_assert_int_eq(sfs_readq_push(q, &jobs[0].j), 0);
	ck_assert_int_eq(sfs_readq_push(q, &jobs[1].j), 0);
	wait_running(2);
	for (int i = 2; i < 5; i++)
		ck_assert_int_eq(sfs_readq_push(q, &jobs[i].j), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, open_later, NULL), 0);
	sfs_readq_free(q); /* the gate opens 200 ms into it */
	pthread_join(t, NULL);
	ck_assert_int_eq(jobs[0].ran, 1);
	ck_assert_int_eq(jobs[1].ran, 1);
	for (int i = 2; i < 5; i++)
		ck_assert_int_eq(jobs[i].ran, 2);
}
END_TEST

/* No thread before a job needs one; freeing an unused queue is fine,
 * and so is NULL. */
START_TEST(idle_queue_frees)
{
	struct sfs_readq *q;
	ck_assert_int_eq(sfs_readq_new(64, 65536, &q), 0);
	sfs_readq_free(q);
	sfs_readq_free(NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("readq");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, cap_refuses_then_all_run);
	tcase_add_test(tc, free_refuses_queued);
	tcase_add_test(tc, idle_queue_frees);
	suite_add_tcase(s, tc);
	return sfs_check_run(s);
}
