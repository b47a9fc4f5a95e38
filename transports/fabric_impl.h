/* SPDX-License-Identifier: MIT */
/*
 * fabric_impl.h - what the two files of the libfabric backend share:
 * fabric.c (open, registrations, peers, reads) and fabric_conn.c
 * (connections: endpoints, completion, progress, reset, quiesce).
 * Only transports/fabric*.c include this.
 */
#ifndef SFS_FABRIC_IMPL_H
#define SFS_FABRIC_IMPL_H

#include "rawkey.h"
#include "xport_impl.h"
#include "xreq.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#define FAB_API FI_VERSION(1, 14)
#define FAB_CQ_BATCH 32
#define FAB_WAIT_MS 100	    /* longest nap of the progress thread */
#define FAB_POST_WAIT_MS 20 /* a busy provider: then -EAGAIN */

/*
 * A connection: an endpoint with its own completion queue and address
 * vector.  A seed has one (x->cur, its published address).  A replica
 * has one per peer (each peer's reads go to its own, so one seed that
 * stalls is reset without touching the others), besides x->cur; where
 * registrations are bound to endpoints (FI_MR_ENDPOINT) every peer
 * shares x->cur instead.  A reset moves a connection to x->old and
 * opens a new one; the old one keeps being progressed (its reads
 * complete or fail as they will) and is closed once nothing is in
 * flight on it, because libfabric 1.17's tcp provider crashes when an
 * endpoint is closed while a read's answer is partly received
 * (measured: a seed stopped in the middle of a transfer).
 */
struct fab_conn {
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	int wait_fd;	     /* the CQ's (FI_WAIT_FD), or -1: polled */
	atomic_int inflight; /* operations posted, not completed */
	struct fab_conn *next;
	char name[SFS_XPORT_ADDR_MAX + 1]; /* its address, as a string
					      when the provider's is one */
	struct fi_info *info; /* what its endpoint was opened with, when
				 not x->info (a peer's routed info, copied):
				 owned, freed after the endpoint */
	/* Its listener's address, capped (fabcap.h) while it is open;
	 * listen_len 0: not capped (no listener that accept()s). */
	struct sockaddr_storage listen;
	size_t listen_len;
};

struct fab_op {
	struct fi_context2 fctx; /* must stay first: the CQ gives it back */
	struct sfs_xreq *req;
	struct fab_conn *conn;
};

struct fab_peer {
	size_t len;
	uint8_t addr[SFS_XPORT_ADDR_MAX];
	struct fab_conn *conn; /* its own (per_peer), else NULL */
	/* Its own connections' info (per_peer, bound to the local address
	 * that routes to it when that is not x->info's), or NULL: x->info.
	 * Owned; each connection opened with it has its own copy. */
	struct fi_info *info;
	int removed;  /* sfs_xport_peer_remove: no more reads */
	uint32_t gen; /* of its index: see FAB_PEER_ID */
};

/*
 * Peer ids (per_peer): gen << 32 | index.  A removed peer's index is
 * reused by the next fab_peer_add with gen one higher, so the peers
 * array holds no more than the live ones, and an id kept past its
 * removal names nothing (-EINVAL, -ENOTCONN), not the peer that has
 * its index now.  Reads in flight pin the connection, never the peer.
 * Shared mode: the index is the AV's fi_addr, never reused.
 */
#define FAB_PEER_ID(i, g) ((uint64_t)(g) << 32 | (uint64_t)(i))
#define FAB_PEER_IDX(id) ((size_t)((id)&0xffffffffu))
#define FAB_PEER_GEN(id) ((uint32_t)((id) >> 32))

struct fab_xport {
	struct sfs_xport base;
	const struct sfs_xport_proto *proto;
	enum sfs_xport_role role;
	unsigned int timeout_ms;

	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	/* Whoever changes connections or peers (add, reset, remove,
	 * quiesce) holds change_lock from stopping the progress thread to
	 * starting it again: one change at a time, so the thread is never
	 * joined twice nor started twice.  Before ep_lock. */
	pthread_mutex_t change_lock;
	int quiesced; /* protected by change_lock: progress stays stopped */
	/* Posters hold ep_lock for reading while they post to cur; a
	 * change holds it for writing (with the progress thread stopped)
	 * to replace or drop cur.  A poster never waits for room in the
	 * provider's queue with it held: the room comes from the progress
	 * thread, which a change has stopped.  old: retired connections,
	 * touched only by the progress thread, or with it stopped. */
	pthread_rwlock_t ep_lock;
	struct fab_conn *cur;
	struct fab_conn *old;
	uint64_t mr_mode;
	uint64_t max_msg;
	int hmem; /* opened with FI_HMEM */
	/* Raw keys mapped with fi_mr_map_raw, counted (rawkey.h):
	 * protected by inflight.lock. */
	struct sfs_rawkeys mapped;
	size_t key_size; /* bytes of a requested key (domain mr_key_size) */
	atomic_bool key_said;  /* the provider chose its own keys: logged */
	atomic_uint cq_faults; /* error completions that failed no request */

	pthread_t thread;
	int thread_started;
	atomic_bool stop;
	int wake_fd; /* eventfd: ends the progress thread's nap, or -1 */

	struct sfs_xreq_list inflight;
	/* A connection per peer (replicas, unless FI_MR_ENDPOINT). */
	int per_peer;
	/* The peers, in the order they were added (their ids): changed
	 * under ep_lock for writing with the progress thread stopped, read
	 * under ep_lock or by the progress thread. */
	size_t npeers, cap_peers;
	struct fab_peer **peers;
	/* Removed peers' indexes, reused first (per_peer).  Changed like
	 * the peers. */
	size_t nfree_peers, cap_free_peers;
	size_t *free_peers;
	size_t abandoned; /* quiesce: reads left on unclosable connections */

	size_t addr_len;
	uint8_t addr[SFS_XPORT_ADDR_MAX];
};

struct fab_mr {
	struct sfs_xport_mr base;
	struct fab_xport *x;
	struct fid_mr *mr;
	void *desc;
	uint64_t raddr;
	uint64_t key;
	size_t raw_len; /* FI_MR_RAW: the key's bytes, else 0 */
	uint8_t raw[SFS_XPORT_RAWKEY_MAX];
};

#define to_fab(p) ((struct fab_xport *)(p))

/* The peer with id @id, not removed, or NULL (x->ep_lock held, or the
 * progress thread stopped under change_lock). */
static inline struct fab_peer *fab_peer_live(const struct fab_xport *x,
					     uint64_t id)
{
	size_t i = FAB_PEER_IDX(id);
	struct fab_peer *p = i < x->npeers ? x->peers[i] : NULL;
	return p && !p->removed && p->gen == FAB_PEER_GEN(id) ? p : NULL;
}

/* fab_errno - a libfabric error (negative) as a negative errno. */
int fab_errno(ssize_t rc);

/*
 * fab_conn_open - a new connection of @x with the @n peers @ins
 * inserted in their order (fi_addr 0..n-1) (x->ep_lock held for
 * writing, or @x not shared yet).  @main: it is x->cur, whose address
 * @x publishes.  Returns 0 or a libfabric error, *step naming the call.
 */
int fab_conn_open(struct fab_xport *x, struct fab_peer *const *ins, size_t n,
		  int main, struct fab_conn **out, const char **step);

/*
 * fab_change_begin - the right to change @x's connections and peers:
 * x->change_lock taken, the progress thread stopped (when @stop: it
 * walks the connections), x->ep_lock taken for writing.  Returns with
 * all three.  fab_change_end - undo it: ep_lock released, the progress
 * thread started again (if it was stopped, and @x is not quiesced),
 * change_lock released; 0, or -errno when the thread cannot start
 * (logged).
 */
void fab_change_begin(struct fab_xport *x, int stop);
int fab_change_end(struct fab_xport *x, int stop);

/* fab_stop_progress - stop the progress thread (before changing what
 * it reads; x->change_lock held, or @x not shared yet);
 * fab_start_progress starts it again. */
void fab_stop_progress(struct fab_xport *x);

/* fab_retire - @c leaves service: progressed until idle, then closed
 * (progress thread stopped). */
void fab_retire(struct fab_xport *x, struct fab_conn *c);

/* fab_start_progress - the progress thread.  0 or -errno. */
int fab_start_progress(struct fab_xport *x);

/* fab_reset, fab_peer_reset, fab_peer_remove, fab_quiesce - the ops
 * (see transport.h). */
int fab_reset(struct sfs_xport *base);
int fab_peer_reset(struct sfs_xport *base, uint64_t peer);
void fab_peer_remove(struct sfs_xport *base, uint64_t peer);
size_t fab_quiesce(struct sfs_xport *base);

#endif /* SFS_FABRIC_IMPL_H */
