/* SPDX-License-Identifier: MIT */
/*
 * verbs.c - the raw ibverbs backend (protocol "rdma"): RC queue pairs and
 * IBV_WR_RDMA_READ, no libfabric in between.
 *
 * A replica makes one RC QP per seed.  The two sides exchange connection
 * data (QPN, PSN, LID, GID, MTU, read depth) through the seed's control
 * port: the replica's hello goes to sfs_xport_accept on the seed, which
 * creates and connects a QP of its own and answers with its data; the
 * replica then connects its QP (sfs_xport_peer_add).  Seed memory is
 * registered with IBV_ACCESS_REMOTE_READ only.  Reads need no CPU on the
 * seed: only the replica runs a progress thread, which sleeps on the
 * CQ's completion channel.
 */
#include "xport_impl.h"
#include "xreq.h"

#include "common/log.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define VB_WIRE_MAGIC 0x56534653u /* "SFSV" */
#define VB_WIRE_VERSION 1
#define VB_WIRE_LEN 44
#define VB_MAX_PEERS 1024    /* QPs a seed keeps at once */
#define VB_MAX_PER_CLIENT 32 /* of them for one client address */
#define VB_CHECK_MS 10000    /* a seed probes its replicas this often */
#define VB_RECV_TAG 1u	     /* wr_id of receives: (peer << 1) | 1 */
#define VB_SQ_DEPTH 256
#define VB_CQ_DEPTH 1024
#define VB_RD_ATOMIC 16 /* reads in flight per QP, at most */
#define VB_WAIT_MS 100

/* Connection data as it travels: see wire_put/wire_get. */
struct vb_wire {
	uint8_t mtu;	    /* enum ibv_mtu, 1..5 */
	uint8_t rd_atomic;  /* hello: reads it will keep in flight;
			      reply: reads the seed accepts in flight */
	uint8_t link_layer; /* IBV_LINK_LAYER_* */
	uint16_t lid;
	uint32_t qpn;	   /* 24 bits */
	uint32_t psn;	   /* 24 bits */
	uint32_t peer_qpn; /* reply: the hello's QPN; hello: 0 */
	uint8_t gid[16];
};

/* A queue pair and its state.  Slots whose qp is NULL are free (a seed
 * reuses them; a replica never does: its peer ids are indexes). */
struct vb_peer {
	struct ibv_qp *qp;
	uint32_t psn; /* our starting PSN */
	uint8_t rd_atomic;
	int connected;
	char client[64];  /* seed: who asked for it */
	int probing;	  /* seed: a probe SEND is in flight */
	atomic_int posts; /* replica: work requests in flight */
};

struct vb_xport {
	struct sfs_xport base;
	const struct sfs_xport_proto *proto;
	enum sfs_xport_role role;
	unsigned int timeout_ms;

	struct ibv_context *ctx;
	char dev_name[IBV_SYSFS_NAME_MAX];
	uint8_t port;
	struct ibv_port_attr pattr;
	struct ibv_device_attr dattr;
	int gid_index;
	union ibv_gid gid;
	struct ibv_pd *pd;
	struct ibv_comp_channel *chan;
	struct ibv_cq *cq;

	/* Peers are created under lock; their QPs are destroyed (reset,
	 * peer_remove, the seed's reclaim) with qp_lock held for writing,
	 * and posted to with it held for reading. */
	pthread_mutex_t lock;
	pthread_rwlock_t qp_lock;
	size_t npeers, cap_peers; /* protected by lock */
	struct vb_peer **peers;	  /* protected by lock; each one stays
				     where it is until close */
	size_t live;		  /* seed: QPs connected; protected by lock */
	unsigned int check_ms;	  /* seed: probe period */
	unsigned int max_peers;	  /* seed: queue pairs kept at once */
	struct sfs_xreq_list inflight;

	pthread_t thread;
	int thread_started;
	atomic_bool stop;

	size_t addr_len;
	uint8_t addr[VB_WIRE_LEN];
};

/* Ops are allocated by sfs_xreq_new: pointers, so their low bit is 0. */

struct vb_mr {
	struct sfs_xport_mr base;
	struct ibv_mr *mr;
};

struct vb_op {
	struct sfs_xreq *req;
	struct vb_peer *peer;
};

#define to_vb(p) ((struct vb_xport *)(p))

/* Map a work completion status to a negative errno, once, here. */
static int vb_wc_errno(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -ETIMEDOUT;
	case IBV_WC_REM_ACCESS_ERR:
		return -EACCES;
	case IBV_WC_LOC_PROT_ERR:
		return -EFAULT;
	case IBV_WC_WR_FLUSH_ERR:
		/* The QP went to the error state (ours: reset, removal; or
		 * after another request failed): not this request's fault. */
		return -ECANCELED;
	default:
		return -EIO;
	}
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* magic u32, version u8, mtu u8, rd_atomic u8, link_layer u8, lid u16,
 * pad u16, qpn u32, psn u32, peer_qpn u32, gid[16], pad u32. */
static void wire_put(const struct vb_wire *w, uint8_t *b)
{
	memset(b, 0, VB_WIRE_LEN);
	put32(b, VB_WIRE_MAGIC);
	b[4] = VB_WIRE_VERSION;
	b[5] = w->mtu;
	b[6] = w->rd_atomic;
	b[7] = w->link_layer;
	b[8] = (uint8_t)w->lid;
	b[9] = (uint8_t)(w->lid >> 8);
	put32(b + 12, w->qpn);
	put32(b + 16, w->psn);
	put32(b + 20, w->peer_qpn);
	memcpy(b + 24, w->gid, 16);
}

/* Parse connection data from the network; -EINVAL names the field. */
static int wire_get(const void *buf, size_t len, struct vb_wire *w,
		    const char **bad)
{
	const uint8_t *b = buf;
	if (len != VB_WIRE_LEN)
		return *bad = "length", -EINVAL;
	if (get32(b) != VB_WIRE_MAGIC)
		return *bad = "magic", -EINVAL;
	if (b[4] != VB_WIRE_VERSION)
		return *bad = "version", -EINVAL;
	w->mtu = b[5];
	w->rd_atomic = b[6];
	w->link_layer = b[7];
	w->lid = (uint16_t)(b[8] | b[9] << 8);
	w->qpn = get32(b + 12);
	w->psn = get32(b + 16);
	w->peer_qpn = get32(b + 20);
	memcpy(w->gid, b + 24, 16);
	if (w->mtu < IBV_MTU_256 || w->mtu > IBV_MTU_4096)
		return *bad = "mtu", -EINVAL;
	if (w->rd_atomic == 0 || w->rd_atomic > VB_RD_ATOMIC)
		return *bad = "rd_atomic", -EINVAL;
	if (w->link_layer != IBV_LINK_LAYER_ETHERNET &&
	    w->link_layer != IBV_LINK_LAYER_INFINIBAND)
		return *bad = "link_layer", -EINVAL;
	if (w->qpn == 0 || w->qpn > 0xffffff)
		return *bad = "qpn", -EINVAL;
	if (w->psn > 0xffffff || w->peer_qpn > 0xffffff)
		return *bad = "psn", -EINVAL;
	return 0;
}

/* Keep one receive posted on a replica's QP: the seed's liveness probe
 * (a zero-byte SEND) lands there. */
static int post_recv(struct ibv_qp *qp, size_t idx)
{
	struct ibv_recv_wr wr = {.wr_id = ((uint64_t)idx << 1) | VB_RECV_TAG,
				 .num_sge = 0},
			   *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

static void vb_seed_probe_done(struct vb_xport *x, const struct ibv_wc *wc);
static void *vb_keeper(void *arg);

/* Take every completion there is.  Returns how many. */
static int vb_drain(struct vb_xport *x)
{
	struct ibv_wc wc[32];
	int n, total = 0;

	if (!x->cq)
		return 0;

	while ((n = ibv_poll_cq(x->cq, 32, wc)) > 0) {
		total += n;
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id & VB_RECV_TAG) {
				/* A probe from the seed (replica), or the
				 * answer to ours (seed). */
				if (x->role == SFS_XPORT_SEED) {
					vb_seed_probe_done(x, &wc[i]);
					continue;
				}
				size_t idx = (size_t)(wc[i].wr_id >> 1);
				pthread_mutex_lock(&x->lock);
				struct vb_peer *p =
					idx < x->npeers ? x->peers[idx] : NULL;
				if (p && p->qp && !wc[i].status &&
				    post_recv(p->qp, idx))
					SFS_LOG(SFS_WARN, "xport",
						"rdma: cannot post a receive "
						"on QP %u",
						p->qp->qp_num);
				pthread_mutex_unlock(&x->lock);
				continue;
			}
			struct vb_op *op =
				(struct vb_op *)(uintptr_t)wc[i].wr_id;
			int st = vb_wc_errno(wc[i].status);
			if (st && atomic_load(&op->req->status) == 0)
				SFS_LOG(wc[i].status == IBV_WC_WR_FLUSH_ERR
						? SFS_DEBUG
						: SFS_WARN,
					"xport",
					"rdma: read on QP %u failed: %s "
					"(vendor error 0x%x)",
					wc[i].qp_num,
					ibv_wc_status_str(wc[i].status),
					wc[i].vendor_err);
			atomic_fetch_sub(&op->peer->posts, 1);
			sfs_xreq_put(&x->inflight, op->req, 1, st);
		}
	}
	if (n < 0)
		SFS_LOG(SFS_WARN, "xport", "rdma: ibv_poll_cq failed");
	return total;
}

/* Replica progress: sleep on the completion channel, drain the CQ. */
static void *vb_progress(void *arg)
{
	struct vb_xport *x = arg;

	while (!atomic_load(&x->stop)) {
		struct pollfd p = {.fd = x->chan->fd, .events = POLLIN};
		if (poll(&p, 1, VB_WAIT_MS) > 0) {
			struct ibv_cq *cq;
			void *ctx;
			if (ibv_get_cq_event(x->chan, &cq, &ctx) == 0) {
				ibv_ack_cq_events(cq, 1);
				/* Re-arm before draining: a completion that
				 * lands in between raises a new event. */
				ibv_req_notify_cq(cq, 0);
			}
		}
		vb_drain(x);
	}
	return NULL;
}

static void vb_stop_thread(struct vb_xport *x)
{
	if (x->thread_started) {
		atomic_store(&x->stop, 1);
		pthread_join(x->thread, NULL);
		x->thread_started = 0;
	}
}

static int vb_start_thread(struct vb_xport *x, void *(*fn)(void *))
{
	atomic_store(&x->stop, 0);
	int rc = pthread_create(&x->thread, NULL, fn, x);
	if (!rc)
		x->thread_started = 1;
	return -rc;
}

/*
 * Tear down the QPs of @p[0..n) (x->qp_lock held for writing): to the
 * error state, so the device flushes what is posted; completions taken
 * (here, and by the progress thread if it runs; bounded wait);
 * destroyed; then taken again.  Whatever never completed is cancelled by
 * the caller (or, with the thread running, fails its reader's deadline).
 */
static void destroy_qps(struct vb_xport *x, struct vb_peer **p, size_t n)
{
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	uint64_t until = sfs_now_ms() + 1000;
	int busy = 0;

	for (size_t i = 0; i < n; i++)
		if (p[i]->qp && ibv_modify_qp(p[i]->qp, &err, IBV_QP_STATE))
			SFS_LOG(SFS_WARN, "xport",
				"rdma: QP %u to the error state: %s",
				p[i]->qp->qp_num, strerror(errno));
	do {
		vb_drain(x);
		busy = 0;
		for (size_t i = 0; i < n; i++)
			busy += p[i]->qp && atomic_load(&p[i]->posts) > 0;
		if (busy) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	} while (busy && sfs_now_ms() < until);
	for (size_t i = 0; i < n; i++) {
		if (p[i]->qp && ibv_destroy_qp(p[i]->qp))
			SFS_LOG(SFS_WARN, "xport", "rdma: ibv_destroy_qp: %s",
				strerror(errno));
		pthread_mutex_lock(&x->lock);
		if (p[i]->qp && p[i]->connected && x->live)
			x->live--;
		p[i]->qp = NULL;
		p[i]->connected = 0;
		p[i]->probing = 0;
		pthread_mutex_unlock(&x->lock);
	}
	vb_drain(x);
}

/* Every peer there is now (x->qp_lock held for writing: none is
 * destroyed meanwhile; new ones may be added).  [new] or NULL. */
static struct vb_peer **snapshot(struct vb_xport *x, size_t *n)
{
	pthread_mutex_lock(&x->lock);
	struct vb_peer **p = malloc((x->npeers ? x->npeers : 1) * sizeof(*p));
	*n = p ? x->npeers : 0;
	if (p && *n)
		memcpy(p, x->peers, *n * sizeof(*p));
	pthread_mutex_unlock(&x->lock);
	return p;
}

static void destroy_all(struct vb_xport *x)
{
	size_t n;
	pthread_rwlock_wrlock(&x->qp_lock);
	struct vb_peer **p = snapshot(x, &n);
	if (p)
		destroy_qps(x, p, n);
	free(p);
	pthread_rwlock_unlock(&x->qp_lock);
}

/* Best GID of @port: RoCE v2 with the IPv4 address @node if given, else
 * the first RoCE v2 IPv4 one, else the first RoCE v2, else index 0. */
static int pick_gid(struct ibv_context *ctx, uint8_t port, int len,
		    const char *node, union ibv_gid *gid)
{
	struct in_addr want;
	int have_want = node && inet_pton(AF_INET, node, &want) == 1;
	int best = -1, score = -1;

	for (int i = 0; i < len; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(ctx, port, (uint32_t)i, &e, 0))
			continue;
		int s = 0;
		const uint8_t *g = e.gid.raw;
		int v4 = !memcmp(g, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12);
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2) {
			s = 1 + v4;
			if (v4 && have_want && !memcmp(g + 12, &want, 4))
				s = 4;
		}
		if (s > score) {
			score = s;
			best = i;
			*gid = e.gid;
		}
	}
	if (best < 0 && !ibv_query_gid(ctx, port, 0, gid))
		best = 0;
	return best;
}

/* First device (or $SEEDFS_RDMA_DEVICE) with an active port. */
static int vb_pick_device(struct vb_xport *x, const char *node, char *why,
			  size_t len)
{
	const char *want = getenv("SEEDFS_RDMA_DEVICE");
	int n = 0;
	struct ibv_device **devs = ibv_get_device_list(&n);

	if (!devs) {
		snprintf(why, len, "ibv_get_device_list: %s", strerror(errno));
		return -ENODEV;
	}
	snprintf(why, len, "ibv_get_device_list: %s",
		 n ? "no device with an active port" : "no devices");
	for (int i = 0; i < n && !x->ctx; i++) {
		const char *name = ibv_get_device_name(devs[i]);
		if (want && strcmp(want, name))
			continue;
		struct ibv_context *ctx = ibv_open_device(devs[i]);
		struct ibv_device_attr da;
		if (!ctx)
			continue;
		if (ibv_query_device(ctx, &da)) {
			ibv_close_device(ctx);
			continue;
		}
		for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
			struct ibv_port_attr pa;
			if (ibv_query_port(ctx, p, &pa) ||
			    pa.state != IBV_PORT_ACTIVE)
				continue;
			x->ctx = ctx;
			x->port = p;
			x->pattr = pa;
			x->dattr = da;
			snprintf(x->dev_name, sizeof(x->dev_name), "%s", name);
			break;
		}
		if (!x->ctx)
			ibv_close_device(ctx);
	}
	ibv_free_device_list(devs);
	if (!x->ctx)
		return -ENODEV;
	x->gid_index =
		pick_gid(x->ctx, x->port, x->pattr.gid_tbl_len, node, &x->gid);
	if (x->pattr.link_layer == IBV_LINK_LAYER_ETHERNET &&
	    x->gid_index < 0) {
		snprintf(why, len, "%s port %u has no GID", x->dev_name,
			 x->port);
		return -ENODEV;
	}
	return 0;
}

static size_t vb_quiesce(struct sfs_xport *base)
{
	struct vb_xport *x = to_vb(base);

	vb_stop_thread(x);
	/* Destroyed QPs write nothing more into our memory. */
	destroy_all(x);
	sfs_xreq_cancel_all(&x->inflight);
	return 0;
}

/* Replica: every QP goes; peers must connect again (a new hello). */
static int vb_reset(struct sfs_xport *base)
{
	struct vb_xport *x = to_vb(base);

	if (x->role != SFS_XPORT_REPLICA)
		return -EOPNOTSUPP;
	vb_stop_thread(x);
	destroy_all(x);
	sfs_xreq_cancel_all(&x->inflight);
	int rc = vb_start_thread(x, vb_progress);
	if (rc)
		SFS_LOG(SFS_ERR, "xport", "rdma: reset: progress thread: %s",
			strerror(-rc));
	else
		SFS_LOG(SFS_INFO, "xport",
			"rdma: queue pairs torn down: peers connect again");
	return rc;
}

static void vb_peer_remove(struct sfs_xport *base, uint64_t peer)
{
	struct vb_xport *x = to_vb(base);

	pthread_rwlock_wrlock(&x->qp_lock);
	pthread_mutex_lock(&x->lock);
	struct vb_peer *p = peer < x->npeers ? x->peers[peer] : NULL;
	pthread_mutex_unlock(&x->lock);
	if (p && p->qp) {
		SFS_LOG(SFS_DEBUG, "xport", "rdma: QP %u released",
			p->qp->qp_num);
		destroy_qps(x, &p, 1);
	}
	pthread_rwlock_unlock(&x->qp_lock);
}

static void vb_close(struct sfs_xport *base)
{
	struct vb_xport *x = to_vb(base);

	if (!x)
		return;
	vb_quiesce(base);
	if (x->cq && ibv_destroy_cq(x->cq))
		SFS_LOG(SFS_WARN, "xport", "rdma: ibv_destroy_cq: %s",
			strerror(errno));
	if (x->chan)
		ibv_destroy_comp_channel(x->chan);
	if (x->pd && ibv_dealloc_pd(x->pd))
		SFS_LOG(SFS_WARN, "xport", "rdma: ibv_dealloc_pd: %s",
			strerror(errno));
	if (x->ctx)
		ibv_close_device(x->ctx);
	for (size_t i = 0; i < x->npeers; i++)
		free(x->peers[i]);
	free(x->peers);
	pthread_mutex_destroy(&x->lock);
	pthread_rwlock_destroy(&x->qp_lock);
	pthread_mutex_destroy(&x->inflight.lock);
	free(x);
}

static void local_wire(struct vb_xport *x, struct vb_wire *w, uint32_t qpn,
		       uint32_t psn, uint8_t rd_atomic, uint32_t peer_qpn)
{
	memset(w, 0, sizeof(*w));
	w->mtu = (uint8_t)x->pattr.active_mtu;
	w->rd_atomic = rd_atomic;
	w->link_layer = x->pattr.link_layer == IBV_LINK_LAYER_ETHERNET
				? IBV_LINK_LAYER_ETHERNET
				: IBV_LINK_LAYER_INFINIBAND;
	w->lid = x->pattr.lid;
	w->qpn = qpn;
	w->psn = psn;
	w->peer_qpn = peer_qpn;
	memcpy(w->gid, x->gid.raw, 16);
}

static int vb_open(const struct sfs_xport_proto *p,
		   const struct sfs_xport_cfg *cfg, struct sfs_xport **out,
		   char *err, size_t errlen)
{
	struct vb_xport *x = calloc(1, sizeof(*x));
	char why[256];
	const char *step;
	int rc;

	if (!x)
		return -ENOMEM;
	x->base.ops = &sfs_verbs_ops;
	x->proto = p;
	x->role = cfg->role;
	x->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 10000;
	pthread_mutex_init(&x->lock, NULL);
	pthread_mutex_init(&x->inflight.lock, NULL);
	sfs_rwlock_init_writer(&x->qp_lock);
	const char *ck = getenv("SEEDFS_RDMA_PEER_CHECK_MS");
	uint64_t v;
	x->check_ms = ck && !sfs_parse_u64(ck, &v) && v >= 100 && v <= 3600000
			      ? (unsigned int)v
			      : VB_CHECK_MS;
	/* Tests: a smaller limit shows its release sooner. */
	const char *mp = getenv("SEEDFS_RDMA_MAX_PEERS");
	x->max_peers = mp && !sfs_parse_u64(mp, &v) && v >= VB_MAX_PER_CLIENT &&
				       v <= VB_MAX_PEERS
			       ? (unsigned int)v
			       : VB_MAX_PEERS;

	rc = vb_pick_device(x, cfg->node, why, sizeof(why));
	if (rc) {
		snprintf(err, errlen, "protocol %s: %s (%s); %s", p->name,
			 p->missing, why, p->hint);
		goto err;
	}
	step = "ibv_alloc_pd";
	if (!(x->pd = ibv_alloc_pd(x->ctx)))
		goto err_step;
	step = "ibv_create_comp_channel";
	if (!(x->chan = ibv_create_comp_channel(x->ctx)))
		goto err_step;
	fcntl(x->chan->fd, F_SETFL, fcntl(x->chan->fd, F_GETFL) | O_NONBLOCK);
	step = "ibv_create_cq";
	int cqe = SFS_MIN(VB_CQ_DEPTH, x->dattr.max_cqe);
	if (!(x->cq = ibv_create_cq(x->ctx, cqe, NULL, x->chan, 0)))
		goto err_step;
	step = "ibv_req_notify_cq";
	if ((errno = ibv_req_notify_cq(x->cq, 0)))
		goto err_step;
	step = "pthread_create";
	if ((errno = -vb_start_thread(x, x->role == SFS_XPORT_REPLICA
						 ? vb_progress
						 : vb_keeper)))
		goto err_step;
	struct vb_wire w;
	local_wire(x, &w, 1, 0, 1, 0);
	wire_put(&w, x->addr);
	x->addr_len = VB_WIRE_LEN;
	char gid[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, x->gid.raw, gid, sizeof(gid));
	SFS_LOG(SFS_INFO, "xport",
		"%s: device %s port %u (%s), gid[%d] %s, lid %u, mtu %d, "
		"max_msg %u, read depth %d",
		p->name, x->dev_name, x->port,
		x->pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB",
		x->gid_index, gid, x->pattr.lid, 128 << x->pattr.active_mtu,
		x->pattr.max_msg_sz,
		SFS_MIN(VB_RD_ATOMIC, x->dattr.max_qp_init_rd_atom));
	*out = &x->base;
	return 0;

err_step:
	rc = errno ? -errno : -EIO;
	snprintf(err, errlen, "protocol %s: %s on %s failed: %s; %s", p->name,
		 step, x->dev_name, strerror(-rc), p->hint);
err:
	vb_close(&x->base);
	return rc;
}

static void vb_info(struct sfs_xport *base, struct sfs_xport_info *info)
{
	struct vb_xport *x = to_vb(base);

	memset(info, 0, sizeof(*info));
	snprintf(info->protocol, sizeof(info->protocol), "%s", x->proto->name);
	snprintf(info->provider, sizeof(info->provider), "ibverbs");
	snprintf(info->fabric, sizeof(info->fabric), "%.40s port %u",
		 x->dev_name, x->port);
	snprintf(info->domain, sizeof(info->domain), "%s gid[%d]",
		 x->pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB",
		 x->gid_index);
	info->max_msg_size = x->pattr.max_msg_sz;
	snprintf(info->mr_desc, sizeof(info->mr_desc),
		 "LOCAL|VIRT_ADDR|PROV_KEY (ibv_reg_mr)");
	info->virt_addr = 1;
	info->local_mr = 1;
	info->pins = 1; /* ibv_reg_mr pins */
	info->addr_len = x->addr_len;
	memcpy(info->addr, x->addr, x->addr_len);
}

static int vb_mr_reg(struct sfs_xport *base, void *buf, size_t len,
		     unsigned int access, struct sfs_xport_mr **out)
{
	struct vb_xport *x = to_vb(base);
	int acc = 0;

	/* The seed grants remote read and nothing else. */
	if (access & SFS_XPORT_REMOTE_READ)
		acc |= IBV_ACCESS_REMOTE_READ;
	if (access & SFS_XPORT_LOCAL_DST)
		acc |= IBV_ACCESS_LOCAL_WRITE;
	if (!acc || !len)
		return -EINVAL;
	struct vb_mr *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->base.ops = &sfs_verbs_ops;
	m->mr = ibv_reg_mr(x->pd, buf, len, acc);
	if (!m->mr) {
		int rc = -errno;
		SFS_LOG(rc == -EFAULT ? SFS_DEBUG : SFS_ERR, "xport",
			"rdma: ibv_reg_mr(%zu bytes): %s", len, strerror(-rc));
		free(m);
		return rc ? rc : -EIO;
	}
	*out = &m->base;
	return 0;
}

static void vb_mr_dereg(struct sfs_xport_mr *base)
{
	struct vb_mr *m = (struct vb_mr *)base;
	if (ibv_dereg_mr(m->mr))
		SFS_LOG(SFS_WARN, "xport", "rdma: ibv_dereg_mr: %s",
			strerror(errno));
	free(m);
}

static void vb_mr_export(const struct sfs_xport_mr *base, uint64_t *raddr,
			 uint64_t *key, uint8_t *raw, size_t *raw_len)
{
	const struct vb_mr *m = (const struct vb_mr *)base;
	*raddr = (uint64_t)(uintptr_t)m->mr->addr;
	*key = m->mr->rkey;
}

/*
 * A new QP in INIT, remembered as peer *idx (x->lock held).  A seed
 * reuses the slot of a QP it tore down; a replica's peer ids are never
 * reused.  @client: who asked (seed), counted against its limit.
 */
static int new_qp(struct vb_xport *x, int remote_read, const char *client,
		  size_t *idx)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = x->cq,
		.recv_cq = x->cq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
		.cap = {.max_send_wr = (uint32_t)SFS_MIN(VB_SQ_DEPTH,
							 x->dattr.max_qp_wr),
			.max_recv_wr = 2,
			.max_send_sge = 1,
			.max_recv_sge = 1},
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = x->port,
		.qp_access_flags = remote_read ? IBV_ACCESS_REMOTE_READ : 0};
	struct vb_peer *p = NULL;
	size_t slot = x->npeers, mine = 0, used = 0;
	uint32_t psn;

	for (size_t i = 0; i < x->npeers; i++) {
		struct vb_peer *q = x->peers[i];
		if (q->qp) {
			used++;
			mine += client && !strcmp(q->client, client);
		} else if (x->role == SFS_XPORT_SEED && slot == x->npeers) {
			slot = i;
		}
	}
	if (used >= x->max_peers)
		return -EMFILE;
	if (client && mine >= VB_MAX_PER_CLIENT)
		return -EUSERS;
	if (slot == x->npeers) {
		if (sfs_grow((void **)&x->peers, &x->cap_peers, x->npeers + 1,
			     sizeof(x->peers[0])) ||
		    !(p = calloc(1, sizeof(*p))))
			return -ENOMEM;
	} else {
		p = x->peers[slot];
	}
	struct ibv_qp *qp = ibv_create_qp(x->pd, &ia);
	if (!qp) {
		if (slot == x->npeers)
			free(p);
		return errno ? -errno : -EIO;
	}
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) ||
	    (x->role == SFS_XPORT_REPLICA && post_recv(qp, slot))) {
		int rc = errno ? -errno : -EIO;
		ibv_destroy_qp(qp);
		if (slot == x->npeers)
			free(p);
		return rc;
	}
	if (getrandom(&psn, sizeof(psn), 0) != sizeof(psn))
		psn = (uint32_t)sfs_now_ns();
	memset(p, 0, sizeof(*p));
	p->qp = qp;
	p->psn = psn & 0xffffff;
	snprintf(p->client, sizeof(p->client), "%s", client ? client : "");
	if (slot == x->npeers)
		x->peers[x->npeers++] = p;
	*idx = slot;
	return 0;
}

/* INIT -> RTR -> RTS towards @w; @rd_in is what we accept in flight,
 * @rd_out what we keep in flight.  A seed's probes retry a few times
 * only, so a replica that is gone, or that stopped taking them, is
 * found. */
static int connect_qp(struct vb_xport *x, struct vb_peer *p,
		      const struct vb_wire *w, uint8_t rd_in, uint8_t rd_out)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = SFS_MIN((enum ibv_mtu)w->mtu, x->pattr.active_mtu),
		.dest_qp_num = w->qpn,
		.rq_psn = w->psn,
		.max_dest_rd_atomic = rd_in,
		.min_rnr_timer = 12,
		.ah_attr = {.dlid = w->lid, .sl = 0, .port_num = x->port},
	};
	if (x->pattr.link_layer == IBV_LINK_LAYER_ETHERNET ||
	    w->link_layer == IBV_LINK_LAYER_ETHERNET) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, w->gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)x->gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	if (ibv_modify_qp(p->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		return errno ? -errno : -EIO;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14; /* 4.096 us * 2^14 = 67 ms per try */
	/* 7 means "for ever" to rxe (and RNR's 7 to the spec): the seed's
	 * probes must end, in about half a second, when no one answers. */
	a.retry_cnt = x->role == SFS_XPORT_SEED ? 6 : 7;
	a.rnr_retry = x->role == SFS_XPORT_SEED ? 6 : 7;
	a.sq_psn = p->psn;
	a.max_rd_atomic = rd_out;
	if (ibv_modify_qp(p->qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		return errno ? -errno : -EIO;
	p->rd_atomic = rd_out;
	p->connected = 1;
	return 0;
}

static int vb_hello(struct sfs_xport *base, void *buf, size_t *len)
{
	struct vb_xport *x = to_vb(base);
	struct vb_wire w;
	size_t idx;
	int rc;

	if (*len < VB_WIRE_LEN)
		return -ENOSPC;
	pthread_mutex_lock(&x->lock);
	rc = new_qp(x, 0, NULL, &idx);
	if (!rc) {
		uint8_t rd = (uint8_t)SFS_MIN(VB_RD_ATOMIC,
					      x->dattr.max_qp_init_rd_atom);
		local_wire(x, &w, x->peers[idx]->qp->qp_num, x->peers[idx]->psn,
			   rd ? rd : 1, 0);
	}
	pthread_mutex_unlock(&x->lock);
	if (rc) {
		SFS_LOG(SFS_ERR, "xport", "rdma: cannot create a QP: %s",
			strerror(-rc));
		return rc;
	}
	wire_put(&w, buf);
	*len = VB_WIRE_LEN;
	return 0;
}

/* The replica's own hello that got no answer: its QP goes. */
static void vb_hello_abort(struct sfs_xport *base, const void *hello,
			   size_t len)
{
	struct vb_xport *x = to_vb(base);
	struct vb_wire w;
	const char *bad;
	if (wire_get(hello, len, &w, &bad))
		return;
	pthread_mutex_lock(&x->lock);
	size_t found = x->npeers;
	for (size_t i = 0; i < x->npeers; i++)
		if (x->peers[i]->qp && !x->peers[i]->connected &&
		    x->peers[i]->qp->qp_num == w.qpn)
			found = i;
	pthread_mutex_unlock(&x->lock);
	if (found < x->npeers)
		vb_peer_remove(base, found);
}

static int vb_accept(struct sfs_xport *base, const void *hello, size_t len,
		     const char *client, void *reply, size_t *rlen)
{
	struct vb_xport *x = to_vb(base);
	struct vb_wire in, w;
	const char *bad = "";
	size_t idx;
	int rc;

	if ((rc = wire_get(hello, len, &in, &bad))) {
		SFS_LOG(SFS_WARN, "xport", "rdma: bad hello from %s: field %s",
			client ? client : "?", bad);
		return rc;
	}
	if (*rlen < VB_WIRE_LEN)
		return -ENOSPC;
	uint8_t rd_in = (uint8_t)SFS_MIN(VB_RD_ATOMIC, x->dattr.max_qp_rd_atom);
	rd_in = rd_in ? rd_in : 1;
	pthread_mutex_lock(&x->lock);
	rc = new_qp(x, 1, client ? client : "", &idx);
	if (!rc) {
		rc = connect_qp(x, x->peers[idx], &in, rd_in, 1);
		if (!rc) {
			local_wire(x, &w, x->peers[idx]->qp->qp_num,
				   x->peers[idx]->psn, rd_in, in.qpn);
			x->live++;
		} else {
			ibv_destroy_qp(x->peers[idx]->qp);
			x->peers[idx]->qp = NULL;
		}
	}
	size_t live = x->live;
	pthread_mutex_unlock(&x->lock);
	if (rc) {
		SFS_LOG(SFS_WARN, "xport",
			"rdma: cannot accept QP %u from %s: %s", in.qpn,
			client ? client : "?",
			rc == -EUSERS ? "too many queue pairs for this client"
				      : strerror(-rc));
		return rc;
	}
	SFS_LOG(SFS_INFO, "xport",
		"rdma: QP %u connected to replica QP %u of %s (%zu connected)",
		w.qpn, in.qpn, client ? client : "?", live);
	wire_put(&w, reply);
	*rlen = VB_WIRE_LEN;
	return 0;
}

/*
 * The seed's side of a probe: a zero-byte SEND to every connected
 * replica each check period.  A replica that is alive has a receive
 * posted and the SEND completes; one that went away (its QP destroyed,
 * its host gone) fails it (retries exceeded), and its QP is torn down so
 * its slot serves a new replica.  Runs on the keeper thread.
 */
static void vb_seed_probe_done(struct vb_xport *x, const struct ibv_wc *wc)
{
	size_t idx = (size_t)(wc->wr_id >> 1);
	pthread_mutex_lock(&x->lock);
	struct vb_peer *p = idx < x->npeers ? x->peers[idx] : NULL;
	if (p && p->probing) {
		SFS_LOG(SFS_DEBUG, "xport", "rdma: probe of QP %u: %s",
			wc->qp_num, ibv_wc_status_str(wc->status));
		p->probing = 0;
		if (wc->status != IBV_WC_SUCCESS) {
			p->probing = -1; /* dead: torn down by the keeper */
			SFS_LOG(SFS_INFO, "xport",
				"rdma: replica of QP %u (%s) is gone (%s): its "
				"queue pair is released",
				wc->qp_num, p->client,
				ibv_wc_status_str(wc->status));
		}
	}
	pthread_mutex_unlock(&x->lock);
}

static void *vb_keeper(void *arg)
{
	struct vb_xport *x = arg;
	uint64_t next = sfs_now_ms() + x->check_ms;

	while (!atomic_load(&x->stop)) {
		struct timespec ts = {0, 20000000};
		nanosleep(&ts, NULL);
		vb_drain(x);
		/* Tear down the dead ones. */
		pthread_rwlock_wrlock(&x->qp_lock);
		pthread_mutex_lock(&x->lock);
		for (size_t i = 0; i < x->npeers; i++) {
			struct vb_peer *p = x->peers[i];
			if (p->qp && p->probing < 0) {
				ibv_destroy_qp(p->qp);
				p->qp = NULL;
				p->connected = 0;
				p->probing = 0;
				x->live--;
			}
		}
		pthread_mutex_unlock(&x->lock);
		pthread_rwlock_unlock(&x->qp_lock);
		if (sfs_now_ms() < next)
			continue;
		next = sfs_now_ms() + x->check_ms;
		pthread_mutex_lock(&x->lock);
		for (size_t i = 0; i < x->npeers; i++) {
			struct vb_peer *p = x->peers[i];
			if (!p->qp || !p->connected || p->probing)
				continue;
			struct ibv_send_wr wr = {.wr_id = ((uint64_t)i << 1) |
							  VB_RECV_TAG,
						 .num_sge = 0,
						 .opcode = IBV_WR_SEND,
						 .send_flags =
							 IBV_SEND_SIGNALED},
					   *bad;
			int rc = ibv_post_send(p->qp, &wr, &bad);
			if (rc == 0)
				p->probing = 1;
			else
				SFS_LOG(SFS_DEBUG, "xport",
					"rdma: cannot probe QP %u: %s",
					p->qp->qp_num, strerror(rc));
		}
		pthread_mutex_unlock(&x->lock);
	}
	return NULL;
}

static int vb_peer_add(struct sfs_xport *base, const void *addr, size_t len,
		       uint64_t *peer)
{
	struct vb_xport *x = to_vb(base);
	struct vb_wire w;
	const char *bad = "";
	int rc;

	if ((rc = wire_get(addr, len, &w, &bad))) {
		SFS_LOG(SFS_ERR, "xport",
			"rdma: bad reply from the seed: "
			"field %s",
			bad);
		return rc;
	}
	rc = -ENOENT;
	pthread_mutex_lock(&x->lock);
	for (size_t i = 0; i < x->npeers; i++) {
		struct vb_peer *p = x->peers[i];
		if (p->connected || !p->qp || p->qp->qp_num != w.peer_qpn)
			continue;
		uint8_t rd = (uint8_t)SFS_MIN(
			SFS_MIN(VB_RD_ATOMIC, x->dattr.max_qp_init_rd_atom),
			w.rd_atomic);
		rc = connect_qp(x, p, &w, 1, rd ? rd : 1);
		if (!rc)
			*peer = i;
		break;
	}
	pthread_mutex_unlock(&x->lock);
	if (rc)
		SFS_LOG(SFS_ERR, "xport",
			"rdma: cannot connect to seed QP %u: %s", w.qpn,
			strerror(-rc));
	return rc;
}

static int vb_read(struct sfs_xport *base, uint64_t peer,
		   const struct sfs_xport_rd *rds, size_t n,
		   sfs_xport_done_fn done, void *arg)
{
	struct vb_xport *x = to_vb(base);
	uint64_t max = x->pattr.max_msg_sz ? x->pattr.max_msg_sz : (1u << 30);
	size_t nops = 0, posted = 0;
	struct vb_peer *p = NULL;
	int status = 0;

	for (size_t i = 0; i < n; i++) {
		if (rds[i].len == 0)
			continue;
		if (!rds[i].lmr || rds[i].rkey > UINT32_MAX)
			return -EINVAL;
		nops += 1 + (rds[i].len - 1) / max;
	}
	/* Held while posting: the QP is not destroyed meanwhile. */
	pthread_rwlock_rdlock(&x->qp_lock);
	pthread_mutex_lock(&x->lock);
	if (peer < x->npeers && x->peers[peer]->connected)
		p = x->peers[peer];
	pthread_mutex_unlock(&x->lock);
	if (!p) {
		pthread_rwlock_unlock(&x->qp_lock);
		return -ENOTCONN;
	}
	struct sfs_xreq *r = sfs_xreq_new(&x->inflight, nops,
					  sizeof(struct vb_op), done, arg);
	if (!r) {
		pthread_rwlock_unlock(&x->qp_lock);
		return -ENOMEM;
	}
	uint64_t deadline = sfs_now_ms() + x->timeout_ms;
	for (size_t i = 0; i < n && !status; i++) {
		const struct sfs_xport_rd *rd = &rds[i];
		uint32_t lkey = ((struct vb_mr *)rd->lmr)->mr->lkey;
		for (size_t off = 0; off < rd->len && !status;) {
			size_t len = (size_t)SFS_MIN(rd->len - off, max);
			struct vb_op *op = sfs_xreq_op(r, posted, sizeof(*op));
			op->req = r;
			op->peer = p;
			struct ibv_sge sge = {
				.addr = (uint64_t)(uintptr_t)rd->local + off,
				.length = (uint32_t)len,
				.lkey = lkey};
			struct ibv_send_wr
				wr = {.wr_id = (uint64_t)(uintptr_t)op,
				      .sg_list = &sge,
				      .num_sge = 1,
				      .opcode = IBV_WR_RDMA_READ,
				      .send_flags = IBV_SEND_SIGNALED,
				      .wr.rdma = {.remote_addr =
							  rd->raddr + off,
						  .rkey = (uint32_t)rd->rkey}},
				*bad;
			int rc;
			atomic_fetch_add(&p->posts, 1);
			/* A full send queue drains as reads complete. */
			while ((rc = ibv_post_send(p->qp, &wr, &bad)) ==
			       ENOMEM) {
				if (sfs_now_ms() > deadline) {
					rc = ETIMEDOUT;
					break;
				}
				struct timespec ts = {0, 50000};
				nanosleep(&ts, NULL);
			}
			if (rc) {
				atomic_fetch_sub(&p->posts, 1);
				SFS_LOG(SFS_WARN, "xport",
					"rdma: ibv_post_send(%zu bytes at "
					"0x%llx): %s",
					len,
					(unsigned long long)(rd->raddr + off),
					strerror(rc));
				status = -rc;
				break;
			}
			posted++;
			off += len;
		}
	}
	pthread_rwlock_unlock(&x->qp_lock);
	return sfs_xreq_end_post(&x->inflight, r, nops, posted, status);
}

const struct sfs_xport_ops sfs_verbs_ops = {
	.name = "verbs",
	.open = vb_open,
	.quiesce = vb_quiesce,
	.reset = vb_reset,
	.peer_remove = vb_peer_remove,
	.close = vb_close,
	.info = vb_info,
	.mr_reg = vb_mr_reg,
	.mr_dereg = vb_mr_dereg,
	.mr_export = vb_mr_export,
	.peer_add = vb_peer_add,
	.hello = vb_hello,
	.accept = vb_accept,
	.hello_abort = vb_hello_abort,
	.read = vb_read,
};
