/* SPDX-License-Identifier: MIT */
/*
 * fabric_conn.c - connections of the libfabric backend: endpoints and
 * their completion queues, the progress thread, reset and quiesce.
 *
 * The progress thread reads every connection's CQ (which also drives
 * the provider's progress, without which the seed serves nothing) and
 * completes requests.  When idle it sleeps in poll() on the CQs' wait
 * fds after fi_trywait says it may; providers without them are polled
 * with short naps.  (fi_cq_sread is not used: shm's waits by spinning
 * in sched_yield and ignored its timeout.)
 */
#include "fabric_impl.h"
#include "fabcap.h"

#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/eventfd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#define FAB_OLD_WARN 8 /* retired connections still busy: worth a line */
#define FAB_NAP_FDS 64 /* more connections than this: polled */

int fab_errno(ssize_t rc)
{
	long e = rc < 0 ? -rc : rc;
	if (e == 0)
		return 0;
	return e < FI_ERRNO_OFFSET ? -(int)e : -EIO;
}

/* One completed operation of @c. */
static void op_done(struct fab_xport *x, struct fab_op *op, int status)
{
	atomic_fetch_sub(&op->conn->inflight, 1);
	sfs_xreq_put(&x->inflight, op->req, 1, status);
}

/*
 * Take one error completion of @c and fail its request.  Returns 0 when
 * an entry was taken, -1 when none could be (fi_cq_readerr failed).  An
 * error without a context (seen from shm when its copy from the peer
 * fails) cannot be matched to a request: that request never completes
 * here, and the cache above finds it (later reads overtake it) and
 * resets the transport.  Both are logged once per 1000.
 */
static int cq_error(struct fab_xport *x, struct fab_conn *c)
{
	struct fi_cq_err_entry e = {0};
	char buf[256];
	ssize_t rc = fi_cq_readerr(c->cq, &e, 0);

	if (rc < 0) {
		if (rc != -FI_EAGAIN &&
		    atomic_fetch_add(&x->cq_faults, 1) % 1000 == 0)
			SFS_LOG(SFS_WARN, "xport", "%s: fi_cq_readerr: %s",
				x->proto->name, fi_strerror((int)-rc));
		return -1;
	}
	struct fab_op *op = e.op_context;
	int st = fab_errno(-(ssize_t)e.err);
	/* -ECANCELED means "cancelled by us" to callers; tcp answers a key
	 * the seed no longer has with FI_ECANCELED. */
	if (st == -ECANCELED)
		st = -EREMOTEIO;
	if (!op) {
		if (atomic_fetch_add(&x->cq_faults, 1) % 1000 == 0)
			SFS_LOG(SFS_WARN, "xport",
				"%s: completion error without context (flags "
				"0x%llx): %s; the read it belonged to cannot "
				"complete",
				x->proto->name, (unsigned long long)e.flags,
				fi_strerror(e.err));
		return 0;
	}
	/* Log the cause once per request: the first failing op. */
	if (atomic_load(&op->req->status) == 0)
		SFS_LOG(SFS_WARN, "xport", "%s: read failed: %s (provider: %s)",
			x->proto->name, fi_strerror(e.err),
			fi_cq_strerror(c->cq, e.prov_errno, e.err_data, buf,
				       sizeof(buf)));
	op_done(x, op, st ? st : -EIO);
	return 0;
}

/* Everything @c's CQ holds now.  Returns how many entries; -1 when its
 * errors cannot be read. */
static int drain(struct fab_xport *x, struct fab_conn *c)
{
	struct fi_cq_entry ents[FAB_CQ_BATCH];
	int total = 0;
	for (;;) {
		ssize_t n = fi_cq_read(c->cq, ents, FAB_CQ_BATCH);
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++)
				op_done(x, ents[i].op_context, 0);
			total += (int)n;
			continue;
		}
		if (n == -FI_EAVAIL) {
			if (cq_error(x, c))
				return -1;
			total++;
			continue;
		}
		if (n != -FI_EAGAIN) {
			SFS_LOG(SFS_WARN, "xport", "%s: fi_cq_read: %s",
				x->proto->name, fi_strerror((int)-n));
			return -1;
		}
		return total;
	}
}

/* Close @c: only with nothing in flight on it (see fab_conn). */
static void conn_close(struct fab_xport *x, struct fab_conn *c)
{
	int rc;
	if (c->listen_len)
		fab_cap_unlisten(&c->listen, c->listen_len);
	if (c->ep && (rc = fi_close(&c->ep->fid)))
		SFS_LOG(SFS_WARN, "xport", "%s: fi_close(ep): %s",
			x->proto->name, fi_strerror(-rc));
	if (c->cq)
		fi_close(&c->cq->fid);
	if (c->av)
		fi_close(&c->av->fid);
	if (c->info)
		fi_freeinfo(c->info);
	free(c);
}

int fab_conn_open(struct fab_xport *x, struct fab_peer *const *ins, size_t n,
		  int main, struct fab_conn **out, const char **step)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fab_conn *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -FI_ENOMEM;
	c->wait_fd = -1;
	*step = "fi_av_open";
	if ((rc = fi_av_open(x->domain, &av_attr, &c->av, NULL)))
		goto err;
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT,
				     .wait_obj = FI_WAIT_FD};
	*step = "fi_cq_open";
	rc = fi_cq_open(x->domain, &cq_attr, &c->cq, NULL);
	if (!rc && fi_control(&c->cq->fid, FI_GETWAIT, &c->wait_fd)) {
		fi_close(&c->cq->fid);
		c->cq = NULL;
		c->wait_fd = -1;
		rc = -FI_ENOSYS;
	}
	if (rc) {
		/* No fd to sleep on here: the progress thread polls. */
		cq_attr.wait_obj = FI_WAIT_NONE;
		rc = fi_cq_open(x->domain, &cq_attr, &c->cq, NULL);
	}
	if (rc)
		goto err;
	*step = "fi_endpoint";
	/* A peer's own connection listens where that peer is reached:
	 * its own copy of that info, which lives as long as the endpoint
	 * (the peer may go first). */
	struct fi_info *fi = x->info;
	if (!main && n == 1 && ins[0]->info) {
		*step = "fi_dupinfo";
		if (!(fi = c->info = fi_dupinfo(ins[0]->info))) {
			rc = -FI_ENOMEM;
			goto err;
		}
		*step = "fi_endpoint";
	}
	if ((rc = fi_endpoint(x->domain, fi, &c->ep, NULL)))
		goto err;
	*step = "fi_ep_bind(av)";
	if ((rc = fi_ep_bind(c->ep, &c->av->fid, 0)))
		goto err;
	*step = "fi_ep_bind(cq)";
	if ((rc = fi_ep_bind(c->ep, &c->cq->fid, FI_TRANSMIT | FI_RECV)))
		goto err;
	*step = "fi_enable";
	if ((rc = fi_enable(c->ep)))
		goto err;
	uint8_t addr[SFS_XPORT_ADDR_MAX];
	size_t alen = sizeof(addr);
	*step = "fi_getname";
	if ((rc = fi_getname(&c->ep->fid, addr, &alen)))
		goto err;
	if (main) {
		memcpy(x->addr, addr, alen);
		x->addr_len = alen;
	}
	if (x->info->addr_format == FI_ADDR_STR)
		snprintf(c->name, sizeof(c->name), "%.*s", (int)alen,
			 (const char *)addr);
	/* The providers whose listeners accept() (rxm over tcp, sockets):
	 * their address is the listener's. */
	const char *prov = x->info->fabric_attr->prov_name;
	int tcp = !strcmp(prov, "tcp;ofi_rxm");
	if ((tcp || !strcmp(prov, "sockets")) && alen <= sizeof(c->listen) &&
	    (x->info->addr_format == FI_SOCKADDR_IN ||
	     x->info->addr_format == FI_SOCKADDR_IN6)) {
		memcpy(&c->listen, addr, alen);
		c->listen_len = alen;
		fab_cap_listen(addr, alen, tcp);
	}
	*step = "fi_av_insert";
	for (size_t i = 0; !rc && i < n; i++) {
		fi_addr_t fa = FI_ADDR_NOTAVAIL;
		int k = fi_av_insert(c->av, ins[i]->addr, 1, &fa, 0, NULL);
		if (k != 1 || fa != i) /* a table: indexes in order */
			rc = k < 0 ? k : -FI_EINVAL;
	}
	if (rc)
		goto err;
	*out = c;
	return 0;
err:
	conn_close(x, c); /* nothing posted yet */
	return rc;
}

/* What the progress thread drains next: every connection, or only
 * those whose CQ's fd the last nap found ready. */
struct fab_wake {
	int all;
	size_t n;
	struct fab_conn *ready[FAB_NAP_FDS];
};

/* Add @c's CQ to what nap waits on; 0 when it cannot be waited on. */
static int nap_add(struct fab_conn *c, struct fid **fids, struct pollfd *pfd,
		   struct fab_conn **conns, size_t *n)
{
	if (!c)
		return 1;
	if (*n == FAB_NAP_FDS || c->wait_fd < 0)
		return 0;
	fids[*n] = &c->cq->fid;
	pfd[*n].fd = c->wait_fd;
	pfd[*n].events = POLLIN;
	conns[*n] = c;
	(*n)++;
	return 1;
}

/* Sleep until a CQ may have something, at most FAB_WAIT_MS; @w says
 * which to drain then. */
static void nap(struct fab_xport *x, unsigned int *idle, struct fab_wake *w)
{
	struct fid *fids[FAB_NAP_FDS];
	struct pollfd pfd[FAB_NAP_FDS + 1];
	struct fab_conn *conns[FAB_NAP_FDS];
	size_t n = 0;
	int fds = nap_add(x->cur, fids, pfd, conns, &n);

	for (size_t i = 0; fds && x->per_peer && i < x->npeers; i++)
		fds = nap_add(x->peers[i]->conn, fids, pfd, conns, &n);
	for (struct fab_conn *c = x->old; fds && c; c = c->next)
		fds = nap_add(c, fids, pfd, conns, &n);
	w->all = 1;
	if (n && fds) {
		if (fi_trywait(x->fabric, fids, (int)n) != FI_SUCCESS)
			return;
		/* And the fd that ends the nap for fab_stop_progress. */
		pfd[n] = (struct pollfd){.fd = x->wake_fd, .events = POLLIN};
		if (poll(pfd, n + (x->wake_fd >= 0), FAB_WAIT_MS) <= 0 ||
		    atomic_load(&x->stop))
			return;
		/* Only the connections that woke us: with a connection per
		 * peer, draining every CQ after each packet cost a
		 * provider's progress (several system calls) per idle
		 * connection, and a re-seeder's mount most of its CPU. */
		w->n = 0;
		for (size_t i = 0; i < n; i++)
			if (pfd[i].revents)
				w->ready[w->n++] = conns[i];
		w->all = w->n == 0;
	} else if (++*idle > 64) {
		/* Spin briefly after activity, then nap. */
		struct timespec ts = {0, *idle > 4096 ? 200000 : 20000};
		nanosleep(&ts, NULL);
	}
}

/* Drain @c into *got; 1 if its CQ could not be read. */
static int drain_one(struct fab_xport *x, struct fab_conn *c, int *got)
{
	int n = c ? drain(x, c) : 0;
	*got += n > 0 ? n : 0;
	return n < 0;
}

static void *progress(void *arg)
{
	struct fab_xport *x = arg;
	unsigned int idle = 0;
	struct fab_wake w = {.all = 1};
	uint64_t swept = 0;

	while (!atomic_load(&x->stop)) {
		int got = 0, bad = 0;
		uint64_t now = sfs_now_ms();
		/* Everything at least every FAB_WAIT_MS all the same: a
		 * retired connection's end, a provider that wants progress
		 * without its fd saying so. */
		if (now >= swept + FAB_WAIT_MS)
			w.all = 1;
		if (!w.all) {
			for (size_t i = 0; i < w.n; i++)
				bad |= drain_one(x, w.ready[i], &got);
			goto done;
		}
		swept = now;
		fab_cap_tick();
		bad |= drain_one(x, x->cur, &got);
		/* Shared (not per_peer): peers have no connection, and
		 * the array may grow under us (a peer added, progress
		 * running). */
		for (size_t i = 0; x->per_peer && i < x->npeers; i++)
			bad |= drain_one(x, x->peers[i]->conn, &got);
		/* Retired connections: progressed until nothing is in
		 * flight on them, then closed. */
		for (struct fab_conn **pc = &x->old; *pc;) {
			struct fab_conn *c = *pc;
			bad |= drain_one(x, c, &got);
			if (atomic_load(&c->inflight) == 0) {
				*pc = c->next;
				conn_close(x, c);
				SFS_LOG(SFS_DEBUG, "xport",
					"%s: a retired endpoint is closed",
					x->proto->name);
				continue;
			}
			pc = &c->next;
		}
	done:
		if (got > 0) {
			idle = 0;
			continue; /* the same ones again, until dry */
		}
		if (bad) {
			struct timespec ts = {0, 10000000};
			nanosleep(&ts, NULL);
			w.all = 1;
			continue;
		}
		nap(x, &idle, &w);
	}
	return NULL;
}

int fab_start_progress(struct fab_xport *x)
{
	/* Without it (no fds left) a stop waits for the nap's end. */
	if (x->wake_fd < 0)
		x->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	else /* a wake-up left from the last stop */
		while (eventfd_read(x->wake_fd, &(eventfd_t){0}) == 0)
			;
	atomic_store(&x->stop, 0);
	int rc = pthread_create(&x->thread, NULL, progress, x);
	if (rc)
		return -rc;
	x->thread_started = 1;
	return 0;
}

void fab_stop_progress(struct fab_xport *x)
{
	if (x->thread_started) {
		atomic_store(&x->stop, 1);
		/* Adding a peer stops and starts the thread: without this,
		 * each waited for the nap's end (up to FAB_WAIT_MS), and a
		 * re-seeder connected to its swarm one peer per 0.2 s. */
		if (x->wake_fd >= 0)
			eventfd_write(x->wake_fd, 1);
		pthread_join(x->thread, NULL);
		x->thread_started = 0;
	}
}

void fab_change_begin(struct fab_xport *x, int stop)
{
	pthread_mutex_lock(&x->change_lock);
	if (stop)
		fab_stop_progress(x);
	pthread_rwlock_wrlock(&x->ep_lock);
}

int fab_change_end(struct fab_xport *x, int stop)
{
	int rc = 0;
	pthread_rwlock_unlock(&x->ep_lock);
	if (stop && !x->quiesced && (rc = fab_start_progress(x)))
		SFS_LOG(SFS_ERR, "xport", "%s: progress thread lost: %s",
			x->proto->name, strerror(-rc));
	pthread_mutex_unlock(&x->change_lock);
	return rc;
}

void fab_retire(struct fab_xport *x, struct fab_conn *c)
{
	if (!c)
		return;
	c->next = x->old;
	x->old = c;
}

static size_t count_old(const struct fab_xport *x)
{
	size_t n = 0;
	for (const struct fab_conn *c = x->old; c; c = c->next)
		n++;
	return n;
}

/* A fresh connection in place of x->cur, or of peer @i's own (@i <
 * npeers): x->ep_lock held for writing, progress stopped.  The reads
 * left on the old one, or -errno. */
static int renew(struct fab_xport *x, size_t i, const char **step)
{
	struct fab_conn *fresh = NULL, **slot;
	int rc;
	if (i < x->npeers) {
		slot = &x->peers[i]->conn;
		rc = fab_conn_open(x, &x->peers[i], 1, 0, &fresh, step);
	} else {
		slot = &x->cur;
		rc = fab_conn_open(x, x->per_peer ? NULL : x->peers,
				   x->per_peer ? 0 : x->npeers, 1, &fresh,
				   step);
	}
	if (rc)
		return fab_errno(rc);
	int left = *slot ? atomic_load(&(*slot)->inflight) : 0;
	fab_retire(x, *slot);
	*slot = fresh;
	return left;
}

/*
 * New connections: every peer is reached anew by the next read.  Reads
 * in flight on the old ones are not cancelled: they complete or fail as
 * the old connection allows, and it is closed after (see fab_conn).
 * Registrations belong to the domain and stay valid, unless they are
 * bound to the endpoint (FI_MR_ENDPOINT): then a reset is refused.
 */
int fab_reset(struct sfs_xport *base)
{
	struct fab_xport *x = to_fab(base);
	const char *step = "";
	int left = 0, rc = 0;

	if (x->mr_mode & FI_MR_ENDPOINT)
		return -EOPNOTSUPP;
	fab_change_begin(x, 1);
	if (x->quiesced)
		rc = -ESHUTDOWN;
	for (size_t i = 0; i <= x->npeers && rc >= 0; i++) {
		if (i < x->npeers && (!x->per_peer || x->peers[i]->removed))
			continue;
		rc = renew(x, i, &step);
		left += rc > 0 ? rc : 0;
	}
	size_t nold = count_old(x);
	int prc = fab_change_end(x, 1);
	if (rc < 0) {
		SFS_LOG(SFS_ERR, "xport", "%s: reset: %s failed: %s",
			x->proto->name, x->quiesced ? "quiesced" : step,
			strerror(-rc));
		return rc;
	}
	if (prc)
		return prc;
	SFS_LOG(nold >= FAB_OLD_WARN ? SFS_WARN : SFS_INFO, "xport",
		"%s: new endpoint: the next read connects again (%d reads "
		"left on the old one, %zu old endpoint%s still busy)",
		x->proto->name, left, nold, nold == 1 ? "" : "s");
	return 0;
}

int fab_peer_reset(struct sfs_xport *base, uint64_t peer)
{
	struct fab_xport *x = to_fab(base);
	const char *step = "";

	if (!x->per_peer)
		return fab_reset(base);
	fab_change_begin(x, 1);
	int rc = x->quiesced		  ? -ESHUTDOWN
		 : fab_peer_live(x, peer) ? renew(x, FAB_PEER_IDX(peer), &step)
					  : -EINVAL;
	size_t nold = count_old(x);
	int prc = fab_change_end(x, 1);
	if (rc < 0) {
		SFS_LOG(SFS_ERR, "xport", "%s: reset of peer %llu: %s: %s",
			x->proto->name, (unsigned long long)peer,
			rc == -EINVAL	   ? "no such peer"
			: rc == -ESHUTDOWN ? "quiesced"
					   : step,
			strerror(-rc));
		return rc;
	}
	if (prc)
		return prc;
	SFS_LOG(nold >= FAB_OLD_WARN ? SFS_WARN : SFS_INFO, "xport",
		"%s: new endpoint for peer %llu: its next read connects "
		"again (%d reads left on the old one, %zu old endpoint%s "
		"still busy)",
		x->proto->name, (unsigned long long)peer, rc, nold,
		nold == 1 ? "" : "s");
	return 0;
}

void fab_peer_remove(struct sfs_xport *base, uint64_t peer)
{
	struct fab_xport *x = to_fab(base);
	if (!x->per_peer)
		return; /* shared: nothing of its own */
	fab_change_begin(x, 1);
	struct fab_peer *p = fab_peer_live(x, peer);
	if (p) {
		p->removed = 1;
		fab_retire(x, p->conn);
		p->conn = NULL;
		/* Its index is the next peer's (room made when added). */
		x->free_peers[x->nfree_peers++] = FAB_PEER_IDX(peer);
	}
	fab_change_end(x, 1);
}

/*
 * Stop the progress thread and close every connection with nothing in
 * flight.  One that still has reads in flight is left open and its
 * reads never complete: their memory stays the transport's (the caller
 * must not free it).  Returns how many reads were left so.
 */
size_t fab_quiesce(struct sfs_xport *base)
{
	struct fab_xport *x = to_fab(base);

	fab_change_begin(x, 1);
	x->quiesced = 1;
	for (size_t i = 0; i < x->npeers; i++) {
		fab_retire(x, x->peers[i]->conn);
		x->peers[i]->conn = NULL;
	}
	fab_retire(x, x->cur);
	struct fab_conn *all = x->old;
	x->cur = x->old = NULL;
	for (struct fab_conn *c = all, *next; c; c = next) {
		next = c->next;
		drain(x, c);
		int n = atomic_load(&c->inflight);
		if (!n) {
			conn_close(x, c);
			continue;
		}
		x->abandoned += (size_t)n;
		SFS_LOG(SFS_WARN, "xport",
			"%s: %d reads still in flight on an endpoint that "
			"cannot be closed safely: left open",
			x->proto->name, n);
		/* shm names its endpoint's region after it, and removes it
		 * when the endpoint closes: this one never will. */
		if (!strncmp(c->name, "fi_shm://", 9)) {
			char path[SFS_XPORT_ADDR_MAX + 16];
			snprintf(path, sizeof(path), "/dev/shm/%s",
				 c->name + 9);
			unlink(path);
		}
		sfs_keep_forever(c);
	}
	size_t left = x->abandoned;
	fab_change_end(x, 1); /* quiesced: progress stays stopped */
	return left;
}
