/* SPDX-License-Identifier: MIT */
/*
 * regpub.c - records under a lease in the registry: granted, put,
 * renewed every third of the TTL, granted and put again when lost,
 * revoked at the end.
 */
#include "control/registry.h"

#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_MS 1000 /* etcd did not answer: again after this */

struct rec {
	char *key, *val; /* val NULL: to delete */
	uint64_t ver;	 /* bumped by each set */
	uint64_t put;	 /* the version in etcd; 0: not yet */
};

struct sfs_reg_pub {
	struct sfs_reg *g;
	unsigned int ttl_s;
	char name[32];
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* work, stop; and records put (waiters) */
	/* All protected by lock: */
	int stop;
	int64_t lease; /* 0: none (to grant) */
	int down;      /* the last request failed (logged once) */
	char last_err[300];
	uint64_t renew_ms; /* next keepalive (monotonic) */
	uint64_t regrants; /* leases granted after the first */
	size_t n, cap;
	struct rec *recs;
};

static int pending(const struct sfs_reg_pub *p)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->recs[i].put != p->recs[i].ver)
			return 1;
	return 0;
}

/* A request failed with @rc (@err): logged when it starts failing. */
static void failed(struct sfs_reg_pub *p, const char *what, int rc,
		   const char *err)
{
	if (!p->down)
		SFS_LOG(SFS_WARN, "registry",
			"%s: %s: %s; serving goes on, the registry is tried "
			"again every second",
			p->name, what, err);
	p->down = 1;
	snprintf(p->last_err, sizeof(p->last_err), "%s: %s (%s)", what, err,
		 strerror(-rc));
}

static void answered(struct sfs_reg_pub *p)
{
	if (p->down)
		SFS_LOG(SFS_INFO, "registry", "%s: the registry answers again",
			p->name);
	p->down = 0;
	p->last_err[0] = '\0';
}

/* One round of work (p->lock held; dropped around requests).  Returns
 * the ms to wait before the next. */
static uint64_t work(struct sfs_reg_pub *p)
{
	char err[512];
	int rc;

	if (!p->lease) {
		int64_t lease;
		pthread_mutex_unlock(&p->lock);
		rc = sfs_reg_grant(p->g, p->ttl_s, &lease, err, sizeof(err));
		pthread_mutex_lock(&p->lock);
		if (rc) {
			failed(p, "cannot take a lease", rc, err);
			return RETRY_MS;
		}
		answered(p);
		p->lease = lease;
		p->regrants++;
		p->renew_ms = sfs_now_ms() + p->ttl_s * 1000u / 3;
		for (size_t i = 0; i < p->n; i++)
			p->recs[i].put = 0; /* all again, under this lease */
		SFS_LOG(SFS_INFO, "registry",
			"%s: registered again under a new lease (%zu "
			"records)",
			p->name, p->n);
	}
	for (size_t i = 0; i < p->n && !p->stop; i++) {
		struct rec *r = &p->recs[i];
		if (r->put == r->ver)
			continue;
		char *key = strdup(r->key),
		     *val = r->val ? strdup(r->val) : NULL;
		uint64_t ver = r->ver;
		int64_t lease = p->lease;
		int del = !r->val;
		if (!key || (!del && !val)) {
			free(key);
			free(val);
			return RETRY_MS;
		}
		pthread_mutex_unlock(&p->lock);
		rc = del ? sfs_reg_delete(p->g, key, err, sizeof(err))
			 : sfs_reg_put(p->g, key, val, strlen(val), lease, err,
				       sizeof(err));
		free(val);
		pthread_mutex_lock(&p->lock);
		if (rc == -ENOENT) {
			/* Its lease is gone: a new one, then everything. */
			SFS_LOG(SFS_WARN, "registry",
				"%s: lease %" PRIx64 " was lost: %s", p->name,
				(uint64_t)lease, err);
			if (p->lease == lease)
				p->lease = 0;
			free(key);
			return 0;
		}
		if (rc) {
			char what[SFS_REG_KEY_MAX + 32];
			snprintf(what, sizeof(what), "cannot %s %s",
				 del ? "delete" : "put", key);
			free(key);
			failed(p, what, rc, err);
			return RETRY_MS;
		}
		answered(p);
		/* The array may have moved meanwhile: find it again. */
		for (size_t k = 0; k < p->n; k++)
			if (!strcmp(p->recs[k].key, key)) {
				if (p->recs[k].ver == ver)
					p->recs[k].put = ver;
				if (del && p->recs[k].ver == ver) {
					free(p->recs[k].key);
					p->recs[k] = p->recs[--p->n];
				}
				break;
			}
		free(key);
		pthread_cond_broadcast(&p->cond);
		i = (size_t)-1; /* from the start: the array changed */
	}
	uint64_t now = sfs_now_ms();
	if (now >= p->renew_ms && p->lease) {
		int64_t lease = p->lease, ttl;
		pthread_mutex_unlock(&p->lock);
		rc = sfs_reg_keepalive(p->g, lease, &ttl, err, sizeof(err));
		pthread_mutex_lock(&p->lock);
		if (rc == -ENOENT) {
			SFS_LOG(SFS_WARN, "registry",
				"%s: lease %" PRIx64
				" expired (%s): its records "
				"are gone; registering again",
				p->name, (uint64_t)lease, err);
			if (p->lease == lease)
				p->lease = 0;
			return 0;
		}
		if (rc) {
			failed(p, "cannot renew the lease", rc, err);
			p->renew_ms = sfs_now_ms() + RETRY_MS;
			return RETRY_MS;
		}
		answered(p);
		p->renew_ms = sfs_now_ms() + p->ttl_s * 1000u / 3;
	}
	now = sfs_now_ms();
	return p->renew_ms > now ? p->renew_ms - now : 0;
}

static void *run(void *arg)
{
	struct sfs_reg_pub *p = arg;
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		uint64_t wait = work(p);
		if (p->stop)
			break;
		if (!wait || (pending(p) && !p->down && p->lease))
			continue;
		struct timespec ts = sfs_abstime(SFS_MIN(wait, 1000u));
		pthread_cond_timedwait(&p->cond, &p->lock, &ts);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int sfs_reg_pub_start(struct sfs_reg *g, unsigned int ttl_s, const char *name,
		      struct sfs_reg_pub **out, char *err, size_t errlen)
{
	struct sfs_reg_pub *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->g = g;
	p->ttl_s = ttl_s < 3 ? 3 : ttl_s;
	snprintf(p->name, sizeof(p->name), "%s", name);
	pthread_mutex_init(&p->lock, NULL);
	if ((rc = sfs_cond_init(&p->cond)))
		goto err_free;
	char why[512];
	if ((rc = sfs_reg_grant(g, p->ttl_s, &p->lease, why, sizeof(why)))) {
		snprintf(err, errlen, "registry %s: %s", sfs_reg_url(g), why);
		goto err_cond;
	}
	p->renew_ms = sfs_now_ms() + p->ttl_s * 1000u / 3;
	if ((rc = -pthread_create(&p->thread, NULL, run, p))) {
		snprintf(err, errlen, "cannot start a thread: %s",
			 strerror(-rc));
		sfs_reg_revoke(g, p->lease, why, sizeof(why));
		goto err_cond;
	}
	*out = p;
	return 0;
err_cond:
	pthread_cond_destroy(&p->cond);
err_free:
	pthread_mutex_destroy(&p->lock);
	free(p);
	return rc;
}

static int set(struct sfs_reg_pub *p, const char *key, const char *val)
{
	char *v = val ? strdup(val) : NULL;
	if (val && !v)
		return -ENOMEM;
	pthread_mutex_lock(&p->lock);
	struct rec *r = NULL;
	for (size_t i = 0; i < p->n && !r; i++)
		if (!strcmp(p->recs[i].key, key))
			r = &p->recs[i];
	if (!r && !val) {
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	if (!r) {
		char *k = strdup(key);
		if (!k || sfs_grow((void **)&p->recs, &p->cap, p->n + 1,
				   sizeof(p->recs[0]))) {
			pthread_mutex_unlock(&p->lock);
			free(k);
			free(v);
			return -ENOMEM;
		}
		r = &p->recs[p->n++];
		*r = (struct rec){.key = k};
	} else if (r->val && val && !strcmp(r->val, val)) {
		pthread_mutex_unlock(&p->lock);
		free(v);
		return 0; /* the same: nothing to put */
	}
	free(r->val);
	r->val = v;
	r->ver++;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int sfs_reg_pub_set(struct sfs_reg_pub *p, const char *key, const char *val)
{
	return set(p, key, val);
}

int sfs_reg_pub_del(struct sfs_reg_pub *p, const char *key)
{
	return set(p, key, NULL);
}

int sfs_reg_pub_wait(struct sfs_reg_pub *p, unsigned int ms)
{
	struct timespec ts = sfs_abstime(ms);
	int rc = 0;
	pthread_mutex_lock(&p->lock);
	while (pending(p) && !rc)
		rc = pthread_cond_timedwait(&p->cond, &p->lock, &ts);
	rc = pending(p) ? -ETIMEDOUT : 0;
	pthread_mutex_unlock(&p->lock);
	return rc;
}

void sfs_reg_pub_state(struct sfs_reg_pub *p, char *buf, size_t len)
{
	pthread_mutex_lock(&p->lock);
	size_t n = 0, put = 0;
	for (size_t i = 0; i < p->n; i++)
		if (p->recs[i].val) {
			n++;
			put += p->recs[i].put == p->recs[i].ver;
		}
	snprintf(buf, len,
		 "%s, lease %" PRIx64 " (TTL %u s, %" PRIu64
		 " granted again), %zu records, %zu in etcd%s%s",
		 p->down ? "unreachable" : "registered", (uint64_t)p->lease,
		 p->ttl_s, p->regrants, n, put,
		 *p->last_err ? "; last error: " : "", p->last_err);
	pthread_mutex_unlock(&p->lock);
}

void sfs_reg_pub_stop(struct sfs_reg_pub *p)
{
	char err[512];
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	if (p->lease && sfs_reg_revoke(p->g, p->lease, err, sizeof(err)))
		SFS_LOG(SFS_INFO, "registry",
			"%s: cannot revoke the lease (%s): its records go "
			"when it expires",
			p->name, err);
	for (size_t i = 0; i < p->n; i++) {
		free(p->recs[i].key);
		free(p->recs[i].val);
	}
	free(p->recs);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
