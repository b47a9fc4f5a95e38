/* SPDX-License-Identifier: MIT */
/*
 * fabric.c - the libfabric backend: RDM endpoints, fi_read, a progress
 * thread per transport.  Protocols tcp (tcp;ofi_rxm), shm and sockets
 * use it; the registry in transport.c names the provider.
 *
 * Facts this code relies on (docs/transports.md has the measurements):
 * the target side makes no progress unless someone reads its CQ, so
 * both roles run a progress thread; the first reads to a peer answer
 * -FI_EAGAIN while the connection is set up; only the mr_mode bits the
 * provider kept are obeyed.
 */
#include "xport_impl.h"
#include "efa.h"
#include "xreq.h"

#include "common/log.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "fabric_impl.h"

static struct sfs_rawkey_ops raw_ops(struct fab_xport *x);

static void fab_close(struct sfs_xport *base)
{
	struct fab_xport *x = to_fab(base);

	if (!x)
		return;
	if (fab_quiesce(base)) {
		/* Reads in flight: the provider may still write into what
		 * they point at. */
		sfs_keep_forever(x);
		return;
	}
	struct sfs_rawkey_ops ko = raw_ops(x);
	sfs_rawkeys_clear(&x->mapped, &ko);
	for (size_t i = 0; i < x->npeers; i++) {
		if (x->peers[i]->info)
			fi_freeinfo(x->peers[i]->info);
		free(x->peers[i]);
	}
	free(x->peers);
	free(x->free_peers);
	if (x->domain)
		fi_close(&x->domain->fid);
	if (x->fabric)
		fi_close(&x->fabric->fid);
	if (x->info)
		fi_freeinfo(x->info);
	if (x->wake_fd >= 0)
		close(x->wake_fd);
	pthread_mutex_destroy(&x->inflight.lock);
	pthread_mutex_destroy(&x->change_lock);
	pthread_rwlock_destroy(&x->ep_lock);
	free(x);
}

/* The mr_mode bits seedfs obeys, by name. */
static void mr_mode_desc(uint64_t mode, char *buf, size_t len)
{
	static const struct {
		uint64_t bit;
		const char *name;
	} bits[] = {{FI_MR_LOCAL, "LOCAL"},
		    {FI_MR_VIRT_ADDR, "VIRT_ADDR"},
		    {FI_MR_ALLOCATED, "ALLOCATED"},
		    {FI_MR_PROV_KEY, "PROV_KEY"},
		    {FI_MR_ENDPOINT, "ENDPOINT"},
		    {FI_MR_RAW, "RAW"},
		    {FI_MR_HMEM, "HMEM"}};
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < SFS_ARRAY_SIZE(bits); i++) {
		if (!(mode & bits[i].bit))
			continue;
		int k = snprintf(buf + o, len - o, "%s%s", o ? "|" : "",
				 bits[i].name);
		if (k < 0 || (size_t)k >= len - o)
			break;
		o += (size_t)k;
	}
	if (!o)
		snprintf(buf, len, "none");
}

/*
 * rxm sizes its verbs CQs from FI_UNIVERSE_SIZE (default 256); soft-RoCE
 * allows 32767 CQ entries and fi_enable then fails with EINVAL ("Unable
 * to create verbs CQ"): 64 works, 128 does not.  Unless the user chose a
 * value, derive one from the smallest max_cqe of the RDMA devices here,
 * before libfabric reads it (its first fi_getinfo).  Once per process.
 */
static void fab_universe(void)
{
	struct ibv_device **devs;
	int n = 0, min_cqe = 0;

	if (getenv("FI_UNIVERSE_SIZE"))
		return;
	devs = ibv_get_device_list(&n);
	for (int i = 0; devs && i < n; i++) {
		struct ibv_context *ctx = ibv_open_device(devs[i]);
		struct ibv_device_attr a;
		if (!ctx)
			continue;
		if (!ibv_query_device(ctx, &a) &&
		    (min_cqe == 0 || a.max_cqe < min_cqe))
			min_cqe = a.max_cqe;
		ibv_close_device(ctx);
	}
	if (devs)
		ibv_free_device_list(devs);
	if (min_cqe == 0)
		return; /* no RDMA device: nothing to size */
	int u = min_cqe / 512;
	u = u < 4 ? 4 : u > 256 ? 256 : u;
	char v[16];
	snprintf(v, sizeof(v), "%d", u);
	setenv("FI_UNIVERSE_SIZE", v, 0);
	SFS_LOG(SFS_INFO, "xport",
		"FI_UNIVERSE_SIZE=%d (smallest max_cqe of the RDMA devices here "
		"is %d)",
		u, min_cqe);
}

/*
 * Provider parameters, set once per process before libfabric reads them
 * (its first fi_getinfo), and only where the user has not.  rxm posts
 * 4096 bounce buffers of 16 KiB on its shared receive queue by default
 * (64 MiB of RSS per endpoint, measured); seedfs only does one-sided
 * reads, which never use them, so a few are enough.  Each endpoint
 * also fills 1024 of rxm's 16 KiB buffers (17 MiB of RSS, and there is
 * an endpoint per peer: a re-seeder of the fan-out bench had 230-260
 * MiB more than a plain mount); 1 KiB ones do as well for reads.  rxm refuses a peer whose buffer size differs,
 * so the endpoint publishes it (compat) and a peer that differs is told
 * why before it connects.
 */
static void fab_params_once(void)
{
	setenv("FI_OFI_RXM_MSG_RX_SIZE", "64", 0);
	setenv("FI_OFI_RXM_RX_SIZE", "64", 0);
	setenv("FI_OFI_RXM_BUFFER_SIZE", "1024", 0);
	fab_universe();
}

static pthread_once_t fab_once = PTHREAD_ONCE_INIT;

static struct fi_info *fab_hints(const char *provider, int hmem)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		return NULL;
	h->caps = FI_RMA | FI_READ | FI_REMOTE_READ;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->threading = FI_THREAD_SAFE;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				  FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				  FI_MR_ENDPOINT | FI_MR_RAW;
	if (hmem) { /* GPU memory: fi_mr(3), fi_efa(7) */
		h->caps |= FI_HMEM;
		h->domain_attr->mr_mode |= FI_MR_HMEM;
	}
	h->fabric_attr->prov_name = strdup(provider);
	if (!h->fabric_attr->prov_name) {
		fi_freeinfo(h);
		return NULL;
	}
	return h;
}

static int fab_open(const struct sfs_xport_proto *p,
		    const struct sfs_xport_cfg *cfg, struct sfs_xport **out,
		    char *err, size_t errlen)
{
	struct fab_xport *x;
	struct fi_info *hints;
	const char *step;
	int rc;

	pthread_once(&fab_once, fab_params_once);
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->base.ops = &sfs_fabric_ops;
	x->wake_fd = -1;
	x->proto = p;
	x->role = cfg->role;
	x->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 10000;
	pthread_mutex_init(&x->inflight.lock, NULL);
	pthread_mutex_init(&x->change_lock, NULL);
	/* A reset must not wait behind a stream of posters. */
	sfs_rwlock_init_writer(&x->ep_lock);

	if (!strcmp(p->provider, "efa")) {
		/* Ask the device, not the instance type, whether it can
		 * serve RDMA read; refuse a setting that would abort. */
		struct sfs_efa_caps caps;
		sfs_efa_query(&caps);
		if (caps.devices)
			SFS_LOG(SFS_INFO, "xport",
				"efa: %d device(s), %s: RDMA read %s, "
				"max_rdma_size %u",
				caps.devices, caps.name,
				caps.rdma_read ? "yes"
					       : "no (reads are emulated with "
						 "messages by the seed)",
				caps.max_rdma_size);
		rc = sfs_efa_env_check(&caps, getenv("FI_EFA_USE_DEVICE_RDMA"),
				       err, errlen);
		if (rc)
			goto err;
	}
	hints = fab_hints(p->provider, cfg->hmem);
	x->hmem = cfg->hmem;
	if (!hints) {
		rc = -ENOMEM;
		step = "fi_allocinfo";
		goto err_msg;
	}
	/* Only IP providers take a node name (shm and efa name
	 * themselves). */
	const char *node = p->ip_node ? cfg->node : NULL;
	if (node && !*node)
		node = NULL;
	rc = fi_getinfo(FAB_API, node, NULL, node ? FI_SOURCE : 0, hints,
			&x->info);
	fi_freeinfo(hints);
	if (rc) {
		snprintf(err, errlen,
			 "protocol %s: %s (fi_getinfo provider=%s%s%s: %s); %s",
			 p->name, p->missing, p->provider, node ? " node=" : "",
			 node ? node : "", fi_strerror(-rc), p->hint);
		x->info = NULL;
		rc = fab_errno(rc);
		goto err;
	}
	x->mr_mode = x->info->domain_attr->mr_mode;
	x->key_size = x->info->domain_attr->mr_key_size;
	x->max_msg = x->info->ep_attr->max_msg_size;
	if (x->max_msg == 0)
		x->max_msg = 1u << 20;

	step = "fi_fabric";
	rc = fi_fabric(x->info->fabric_attr, &x->fabric, NULL);
	if (rc)
		goto err_fi;
	step = "fi_domain";
	rc = fi_domain(x->fabric, x->info, &x->domain, NULL);
	if (rc)
		goto err_fi;
	/* A replica's peers get a connection each, so one that stalls is
	 * reset alone; not where registrations belong to an endpoint. */
	x->per_peer = cfg->role == SFS_XPORT_REPLICA &&
		      !(x->mr_mode & FI_MR_ENDPOINT);
	rc = fab_conn_open(x, NULL, 0, 1, &x->cur, &step);
	if (rc)
		goto err_fi;

	rc = fab_start_progress(x);
	if (rc) {
		step = "pthread_create";
		goto err_msg;
	}
	char mr[96], mm[32];
	mr_mode_desc(x->mr_mode, mr, sizeof(mr));
	SFS_LOG(SFS_INFO, "xport",
		"%s: provider %s fabric %s domain %s mr_mode %s max_msg %s, %s",
		p->name, x->info->fabric_attr->prov_name,
		x->info->fabric_attr->name, x->info->domain_attr->name, mr,
		sfs_fmt_size_limit(x->max_msg, mm, sizeof(mm)),
		x->cur->wait_fd >= 0 ? "cq wait fd" : "cq polled");
	*out = &x->base;
	return 0;

err_fi:
	snprintf(err, errlen, "protocol %s: %s failed on provider %s: %s; %s",
		 p->name, step, p->provider, fi_strerror(-rc), p->hint);
	rc = fab_errno(rc);
	goto err;
err_msg:
	snprintf(err, errlen, "protocol %s: %s failed: %s", p->name, step,
		 strerror(-rc));
err:
	fab_close(&x->base);
	return rc;
}

/* Does provider @prov ("tcp;ofi_rxm") pin what it registers?  Only
 * the providers known not to (their reads are copies by a thread or
 * the kernel: tcp, udp, sockets, shm, and the rxm/rxd layers over
 * them) say no; any other may pin (verbs, efa, psm3 register with the
 * NIC). */
static int prov_pins(const char *prov)
{
	static const char *const unpinned[] = {
		"tcp", "udp", "sockets", "shm", "ofi_rxm", "ofi_rxd", "net"};
	char name[64];
	snprintf(name, sizeof(name), "%s", prov);
	char *save = NULL;
	for (char *t = strtok_r(name, ";", &save); t;
	     t = strtok_r(NULL, ";", &save)) {
		size_t i = 0;
		while (i < SFS_ARRAY_SIZE(unpinned) && strcmp(t, unpinned[i]))
			i++;
		if (i == SFS_ARRAY_SIZE(unpinned))
			return 1;
	}
	return 0;
}

static void fab_info(struct sfs_xport *base, struct sfs_xport_info *info)
{
	struct fab_xport *x = to_fab(base);

	memset(info, 0, sizeof(*info));
	snprintf(info->protocol, sizeof(info->protocol), "%s", x->proto->name);
	snprintf(info->provider, sizeof(info->provider), "%s",
		 x->info->fabric_attr->prov_name);
	snprintf(info->fabric, sizeof(info->fabric), "%s",
		 x->info->fabric_attr->name);
	snprintf(info->domain, sizeof(info->domain), "%s",
		 x->info->domain_attr->name);
	info->max_msg_size = x->max_msg;
	info->mr_mode = x->mr_mode;
	mr_mode_desc(x->mr_mode, info->mr_desc, sizeof(info->mr_desc));
	info->virt_addr = !!(x->mr_mode & FI_MR_VIRT_ADDR);
	info->local_mr = !!(x->mr_mode & FI_MR_LOCAL);
	info->pins = prov_pins(info->provider);
	info->addr_len = x->addr_len;
	memcpy(info->addr, x->addr, x->addr_len);
	/* rxm refuses a connection whose peer's eager limit differs. */
	if (strstr(info->provider, "ofi_rxm")) {
		const char *b = getenv("FI_OFI_RXM_BUFFER_SIZE");
		const char *e = getenv("FI_OFI_RXM_EAGER_LIMIT");
		snprintf(info->compat, sizeof(info->compat),
			 "FI_OFI_RXM_BUFFER_SIZE=%s%s%s", b ? b : "16384",
			 e ? " FI_OFI_RXM_EAGER_LIMIT=" : "", e ? e : "");
	}
}

/*
 * The key to ask for a registration (providers that let the application
 * choose, no FI_MR_PROV_KEY): 64 random bits cut to the provider's key
 * size, so a peer that never saw the manifest cannot guess it.  0 when
 * the provider picks its own.
 */
static uint64_t want_key_of(const struct fab_xport *x)
{
	uint64_t k = 0;
	if (x->mr_mode & FI_MR_PROV_KEY)
		return 0;
	if (getrandom(&k, sizeof(k), 0) != (ssize_t)sizeof(k)) {
		/* No entropy source (never on Linux >= 3.17): still not a
		 * small sequential number (splitmix64 of the clock). */
		k = sfs_now_ns() + 0x9e3779b97f4a7c15ull;
		k = (k ^ (k >> 30)) * 0xbf58476d1ce4e5b9ull;
		k = (k ^ (k >> 27)) * 0x94d049bb133111ebull;
		k ^= k >> 31;
	}
	if (x->key_size && x->key_size < sizeof(k))
		k &= (1ull << (8 * x->key_size)) - 1;
	return k ? k : 1;
}

/*
 * The provider gave @m another key than the random one asked for
 * (@want; 0: none asked): its keys are as guessable as it makes them,
 * not 64 random bits.  Said once per transport (docs/security.md).
 */
static void key_check(struct fab_xport *x, const struct fab_mr *m,
		      uint64_t want)
{
	if (!want || m->key == want || atomic_exchange(&x->key_said, 1))
		return;
	SFS_LOG(SFS_WARN, "xport",
		"%s: provider %s ignored the random registration key asked "
		"for and chose its own (%zu-byte keys): a reader without the "
		"manifest may guess them as easily as the provider allows "
		"(docs/security.md, \"What protects a region\")",
		x->proto->name, x->info->fabric_attr->prov_name,
		x->key_size ? x->key_size : sizeof(uint64_t));
}

static int fab_mr_reg(struct sfs_xport *base, void *buf, size_t len,
		      unsigned int access, struct sfs_xport_mr **out)
{
	struct fab_xport *x = to_fab(base);
	struct fab_mr *m;
	uint64_t acc = 0, want_key = 0;
	int rc;

	if (access & SFS_XPORT_REMOTE_READ)
		acc |= FI_REMOTE_READ;
	if (access & SFS_XPORT_LOCAL_DST)
		acc |= FI_READ;
	if (!acc || len == 0)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->base.ops = &sfs_fabric_ops;
	m->x = x;
	/* A random key that collides with one in use is drawn again. */
	for (int tries = 0; tries < 4; tries++) {
		want_key = want_key_of(x);
		rc = fi_mr_reg(x->domain, buf, len, acc, 0, want_key, 0, &m->mr,
			       NULL);
		if (rc != -FI_ENOKEY || !want_key)
			break;
	}
	if (rc) {
		/* EFAULT is expected on read-only memory for some providers:
		 * the caller decides what it means. */
		SFS_LOG(rc == -FI_EFAULT ? SFS_DEBUG : SFS_ERR, "xport",
			"%s: fi_mr_reg(%zu bytes): %s", x->proto->name, len,
			fi_strerror(-rc));
		goto err_free;
	}
	if (x->mr_mode & FI_MR_ENDPOINT) {
		rc = fi_mr_bind(m->mr, &x->cur->ep->fid, 0);
		if (!rc)
			rc = fi_mr_enable(m->mr);
		if (rc) {
			SFS_LOG(SFS_ERR, "xport", "%s: fi_mr_bind/enable: %s",
				x->proto->name, fi_strerror(-rc));
			goto err_close;
		}
	}
	m->desc = fi_mr_desc(m->mr);
	m->key = fi_mr_key(m->mr);
	if (!(x->mr_mode & FI_MR_RAW))
		key_check(x, m, want_key);
	if (x->mr_mode & FI_MR_RAW) {
		/* Raw keys: base address and key bytes (fi_mr(3)). */
		uint64_t raw_base = 0;
		m->raw_len = sizeof(m->raw);
		rc = fi_mr_raw_attr(m->mr, &raw_base, m->raw, &m->raw_len, 0);
		if (rc) {
			SFS_LOG(SFS_ERR, "xport", "%s: fi_mr_raw_attr: %s",
				x->proto->name, fi_strerror(-rc));
			goto err_close;
		}
		m->raddr = raw_base;
		*out = &m->base;
		return 0;
	}
	if (m->key == FI_KEY_NOTAVAIL) {
		SFS_LOG(SFS_ERR, "xport", "%s: no key for the registration",
			x->proto->name);
		rc = -FI_ENOSYS;
		goto err_close;
	}
	m->raddr =
		(x->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
	*out = &m->base;
	return 0;

err_close:
	fi_close(&m->mr->fid);
err_free:
	free(m);
	return fab_errno(rc);
}

/* fi_mr_regattr with iface FI_HMEM_CUDA and device.cuda (a CUdevice),
 * as fi_mr(3) describes; the rest as fab_mr_reg.  Cannot run here. */
static int fab_mr_reg_cuda(struct sfs_xport *base, void *buf, size_t len,
			   int device, unsigned int access,
			   struct sfs_xport_mr **out, char *err, size_t errlen)
{
	struct fab_xport *x = to_fab(base);
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct fi_mr_attr attr = {.mr_iov = &iov,
				  .iov_count = 1,
				  .iface = FI_HMEM_CUDA,
				  .device.cuda = device};
	struct fab_mr *m;
	int rc;

	if (!x->hmem) {
		snprintf(err, errlen,
			 "protocol %s was opened without FI_HMEM (set hmem in "
			 "its configuration)",
			 x->proto->name);
		return -EOPNOTSUPP;
	}
	if (access & SFS_XPORT_REMOTE_READ)
		attr.access |= FI_REMOTE_READ;
	if (access & SFS_XPORT_LOCAL_DST)
		attr.access |= FI_READ;
	attr.requested_key = want_key_of(x);
	if (!(m = calloc(1, sizeof(*m))))
		return -ENOMEM;
	m->base.ops = &sfs_fabric_ops;
	m->x = x;
	rc = fi_mr_regattr(x->domain, &attr, 0, &m->mr);
	if (!rc && (x->mr_mode & FI_MR_ENDPOINT)) {
		rc = fi_mr_bind(m->mr, &x->cur->ep->fid, 0);
		if (!rc)
			rc = fi_mr_enable(m->mr);
		if (rc)
			fi_close(&m->mr->fid);
	}
	if (rc) {
		snprintf(err, errlen,
			 "protocol %s: fi_mr_regattr(FI_HMEM_CUDA, "
			 "device %d, %zu bytes): %s",
			 x->proto->name, device, len, fi_strerror(-rc));
		free(m);
		return fab_errno(rc);
	}
	m->desc = fi_mr_desc(m->mr);
	m->key = fi_mr_key(m->mr);
	if (!(x->mr_mode & FI_MR_RAW))
		key_check(x, m, attr.requested_key);
	m->raddr =
		(x->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
	*out = &m->base;
	return 0;
}

static void fab_mr_dereg(struct sfs_xport_mr *base)
{
	struct fab_mr *m = (struct fab_mr *)base;
	int rc = fi_close(&m->mr->fid);
	if (rc)
		SFS_LOG(SFS_WARN, "xport", "fi_close(mr): %s",
			fi_strerror(-rc));
	free(m);
}

static void fab_mr_export(const struct sfs_xport_mr *base, uint64_t *raddr,
			  uint64_t *key, uint8_t *raw, size_t *raw_len)
{
	const struct fab_mr *m = (const struct fab_mr *)base;
	*raddr = m->raddr;
	*key = m->key;
	if (m->raw_len) {
		memcpy(raw, m->raw, m->raw_len);
		*raw_len = m->raw_len;
	}
}

/* fi_mr_map_raw (fi_mr(3)): a raw key of a peer into a usable key. */
static int raw_map(void *arg, uint64_t raddr, const uint8_t *raw, size_t len,
		   uint64_t *key)
{
	struct fab_xport *x = arg;
	uint8_t copy[SFS_XPORT_RAWKEY_MAX];
	memcpy(copy, raw, len); /* the call takes it non-const */
	int rc = fi_mr_map_raw(x->domain, raddr, copy, len, key, 0);
	if (rc) {
		SFS_LOG(SFS_ERR, "xport", "%s: fi_mr_map_raw: %s",
			x->proto->name, fi_strerror(-rc));
		return fab_errno(rc);
	}
	return 0;
}

static void raw_unmap(void *arg, uint64_t key)
{
	struct fab_xport *x = arg;
	int rc = fi_mr_unmap_key(x->domain, key);
	if (rc)
		SFS_LOG(SFS_WARN, "xport", "%s: fi_mr_unmap_key: %s",
			x->proto->name, fi_strerror(-rc));
}

static struct sfs_rawkey_ops raw_ops(struct fab_xport *x)
{
	return (struct sfs_rawkey_ops){
		.map = raw_map, .unmap = raw_unmap, .arg = x};
}

/* One mapping per distinct raw key, shared and counted (rawkey.h). */
static int fab_key_import(struct sfs_xport *base, uint64_t raddr,
			  const uint8_t *raw, size_t len, uint64_t *key)
{
	struct fab_xport *x = to_fab(base);

	if (!(x->mr_mode & FI_MR_RAW))
		return -EOPNOTSUPP;
	struct sfs_rawkey_ops ko = raw_ops(x);
	pthread_mutex_lock(&x->inflight.lock);
	int rc = sfs_rawkeys_get(&x->mapped, raddr, raw, len, &ko, key);
	pthread_mutex_unlock(&x->inflight.lock);
	return rc;
}

static void fab_key_release(struct sfs_xport *base, uint64_t key)
{
	struct fab_xport *x = to_fab(base);

	if (!(x->mr_mode & FI_MR_RAW))
		return;
	struct sfs_rawkey_ops ko = raw_ops(x);
	pthread_mutex_lock(&x->inflight.lock);
	sfs_rawkeys_put(&x->mapped, key, &ko);
	pthread_mutex_unlock(&x->inflight.lock);
}

/*
 * The info a connection of its own to the peer at @addr is opened with:
 * x->info with its source address the local one that routes to the
 * peer, when that is another than x->info's (sources on several
 * interfaces: each connection's listener is where its peer is, none on
 * an interface the mount does not use).  NULL: x->info does.
 */
static struct fi_info *routed_info(struct fab_xport *x, const void *addr,
				   size_t len)
{
	char node[64], have[64] = "";
	const struct sockaddr *src = x->info->src_addr;
	if (sfs_xport_route_node(x->proto->name, addr, len, node,
				 sizeof(node)) ||
	    !src || (src->sa_family != AF_INET && src->sa_family != AF_INET6))
		return NULL;
	const void *ip =
		src->sa_family == AF_INET
			? (const void *)&((const struct sockaddr_in *)src)
				  ->sin_addr
			: (const void *)&((const struct sockaddr_in6 *)src)
				  ->sin6_addr;
	inet_ntop(src->sa_family, ip, have, sizeof(have));
	if (!strcmp(node, have))
		return NULL;
	struct sockaddr_storage ss = {0};
	size_t sl;
	if (inet_pton(AF_INET, node, &((struct sockaddr_in *)&ss)->sin_addr) ==
	    1) {
		ss.ss_family = AF_INET;
		sl = sizeof(struct sockaddr_in);
	} else if (inet_pton(AF_INET6, node,
			     &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		ss.ss_family = AF_INET6;
		sl = sizeof(struct sockaddr_in6);
	} else {
		return NULL;
	}
	if (ss.ss_family != src->sa_family)
		return NULL;
	struct fi_info *fi = fi_dupinfo(x->info);
	void *a = fi ? malloc(sl) : NULL;
	if (!a) {
		if (fi)
			fi_freeinfo(fi);
		return NULL;
	}
	memcpy(a, &ss, sl);
	free(fi->src_addr);
	fi->src_addr = a;
	fi->src_addrlen = sl;
	SFS_LOG(SFS_DEBUG, "xport", "%s: a peer reached from %s, not %s",
		x->proto->name, node, have);
	return fi;
}

static int fab_peer_add(struct sfs_xport *base, const void *addr, size_t len,
			uint64_t *peer)
{
	struct fab_xport *x = to_fab(base);
	fi_addr_t fa = FI_ADDR_NOTAVAIL;

	/* The peer runs the same protocol: its address has our form.  A
	 * string address (shm: "fi_shm://PID...") varies in length with
	 * the peer's pid; it must at least end within what was sent. */
	if (x->info->addr_format == FI_ADDR_STR) {
		if (len == 0 || len > SFS_XPORT_ADDR_MAX ||
		    !memchr(addr, '\0', len)) {
			SFS_LOG(SFS_ERR, "xport",
				"%s: peer address is not a string of at most "
				"%d bytes",
				x->proto->name, SFS_XPORT_ADDR_MAX);
			return -EINVAL;
		}
	} else if (len != x->addr_len) {
		SFS_LOG(SFS_ERR, "xport",
			"%s: peer address is %zu bytes, this provider uses %zu",
			x->proto->name, len, x->addr_len);
		return -EINVAL;
	}
	if (x->info->addr_format == FI_SOCKADDR_IN ||
	    x->info->addr_format == FI_SOCKADDR_IN6) {
		const struct sockaddr *sa = addr;
		int fam = x->info->addr_format == FI_SOCKADDR_IN ? AF_INET
								 : AF_INET6;
		if (sa->sa_family != fam) {
			SFS_LOG(SFS_ERR, "xport",
				"%s: peer address family %d, expected %d",
				x->proto->name, sa->sa_family, fam);
			return -EINVAL;
		}
	}
	struct fab_peer *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->len = len;
	memcpy(p->addr, addr, len);
	if (x->per_peer)
		p->info = routed_info(x, addr, len);
	const char *step = "fi_av_insert";
	int rc;
	/* A connection of its own is opened with the progress thread
	 * stopped: it walks the peers. */
	fab_change_begin(x, x->per_peer);
	/* Room for it, and for its index on the free list (removing a
	 * peer never fails). */
	rc = sfs_grow((void **)&x->peers, &x->cap_peers, x->npeers + 1,
		      sizeof(x->peers[0]));
	if (!rc && x->per_peer)
		rc = sfs_grow((void **)&x->free_peers, &x->cap_free_peers,
			      x->npeers + 1, sizeof(x->free_peers[0]));
	if (rc) {
		rc = -FI_ENOMEM;
	} else if (!x->cur || x->quiesced) {
		rc = -FI_ESHUTDOWN;
	} else if (x->per_peer) {
		rc = fab_conn_open(x, &p, 1, 0, &p->conn, &step);
	} else {
		int k = fi_av_insert(x->cur->av, addr, 1, &fa, 0, NULL);
		rc = k == 1 && fa == x->npeers ? 0 /* a table: in order */
		     : k < 0		       ? k
					       : -FI_EINVAL;
	}
	if (!rc && x->per_peer && x->nfree_peers) {
		/* A removed peer's index (nothing in flight names a peer:
		 * reads pin connections). */
		size_t i = x->free_peers[--x->nfree_peers];
		struct fab_peer *old = x->peers[i];
		p->gen = old->gen + 1;
		if (old->info) /* its connections have their own copies */
			fi_freeinfo(old->info);
		free(old);
		x->peers[i] = p;
		*peer = FAB_PEER_ID(i, p->gen);
	} else if (!rc) {
		*peer = x->npeers;
		x->peers[x->npeers++] = p;
	}
	fab_change_end(x, x->per_peer);
	if (rc) {
		if (p->info)
			fi_freeinfo(p->info);
		free(p);
		SFS_LOG(SFS_ERR, "xport", "%s: adding a peer: %s: %s",
			x->proto->name, step, fi_strerror(-rc));
		return fab_errno(rc);
	}
	return 0;
}

static int fab_read(struct sfs_xport *base, uint64_t peer,
		    const struct sfs_xport_rd *rds, size_t n,
		    sfs_xport_done_fn done, void *arg)
{
	struct fab_xport *x = to_fab(base);
	struct sfs_xreq *r;
	size_t nops = 0, posted = 0;
	int status = 0;

	for (size_t i = 0; i < n; i++) {
		if (rds[i].len == 0)
			continue;
		if ((x->mr_mode & FI_MR_LOCAL) && !rds[i].lmr)
			return -EINVAL;
		nops += 1 + (rds[i].len - 1) / x->max_msg;
	}
	/* A reset or quiesce replaces the endpoint under the write lock;
	 * once quiesced there is none, and reads are refused. */
	pthread_rwlock_rdlock(&x->ep_lock);
	struct fab_conn *c = x->cur;
	fi_addr_t fa = peer;
	if (x->per_peer) {
		struct fab_peer *p = fab_peer_live(x, peer);
		if (!p) {
			size_t i = FAB_PEER_IDX(peer);
			pthread_rwlock_unlock(&x->ep_lock);
			/* Removed (its index maybe reused), or never added. */
			return i < x->npeers ? -ENOTCONN : -EINVAL;
		}
		c = p->conn;
		fa = 0;
	}
	if (!c) {
		pthread_rwlock_unlock(&x->ep_lock);
		return -ESHUTDOWN;
	}
	r = sfs_xreq_new(&x->inflight, nops, sizeof(struct fab_op), done, arg);
	if (!r) {
		pthread_rwlock_unlock(&x->ep_lock);
		return -ENOMEM;
	}

	/* The provider answers -FI_EAGAIN while it connects (25 ms on tcp,
	 * 0.7 s on soft-RoCE) or while it is full.  The first operation
	 * waits a little, then gives the read back (-EAGAIN, nothing
	 * posted): the caller queues it and its own deadlines decide.  Once
	 * part of a read is out, the rest waits up to the timeout. */
	uint64_t start = sfs_now_ms();
	/* Every op of the read is counted on @c at once: while we are
	 * here @c cannot reach zero and be closed, even while ep_lock is
	 * let go below and @c is retired meanwhile.  What is not posted is
	 * given back at the end. */
	atomic_fetch_add(&c->inflight, (int)nops);
	for (size_t i = 0; i < n && !status; i++) {
		const struct sfs_xport_rd *rd = &rds[i];
		void *desc = rd->lmr ? ((struct fab_mr *)rd->lmr)->desc : NULL;
		for (size_t off = 0; off < rd->len && !status;) {
			size_t len = SFS_MIN(rd->len - off, x->max_msg);
			struct fab_op *op = sfs_xreq_op(r, posted, sizeof(*op));
			op->req = r;
			op->conn = c;
			ssize_t rc;
			unsigned spins = 0;
			while ((rc = fi_read(c->ep, (char *)rd->local + off,
					     len, desc, fa, rd->raddr + off,
					     rd->rkey, &op->fctx)) ==
			       -FI_EAGAIN) {
				uint64_t el = sfs_now_ms() - start;
				if (!posted && el > FAB_POST_WAIT_MS)
					break;
				if (el > x->timeout_ms) {
					rc = -FI_ETIMEDOUT;
					break;
				}
				if (++spins > 16) {
					/* The room comes from the progress
					 * thread, which a change of peers
					 * stops before it takes ep_lock for
					 * writing: let it in while we wait
					 * (@c stays open: the read's ops
					 * are counted on it). */
					struct timespec ts = {0, 50000};
					pthread_rwlock_unlock(&x->ep_lock);
					nanosleep(&ts, NULL);
					pthread_rwlock_rdlock(&x->ep_lock);
					/* Quiesced, or the peer removed
					 * (its keys are not to be used
					 * again): no more posts. */
					if (x->quiesced ||
					    (x->per_peer &&
					     !fab_peer_live(x, peer))) {
						rc = -FI_ESHUTDOWN;
						break;
					}
				}
			}
			if (rc == -FI_EAGAIN) {
				status = -EAGAIN; /* nothing posted */
				break;
			}
			if (rc) {
				SFS_LOG(SFS_WARN, "xport",
					"%s: fi_read(%zu bytes at 0x%llx): %s",
					x->proto->name, len,
					(unsigned long long)(rd->raddr + off),
					fi_strerror((int)-rc));
				status = fab_errno(rc);
				break;
			}
			posted++;
			off += len;
		}
	}
	atomic_fetch_sub(&c->inflight, (int)(nops - posted));
	pthread_rwlock_unlock(&x->ep_lock);
	return sfs_xreq_end_post(&x->inflight, r, nops, posted, status);
}

const struct sfs_xport_ops sfs_fabric_ops = {
	.name = "fabric",
	.open = fab_open,
	.quiesce = fab_quiesce,
	.reset = fab_reset,
	.peer_reset = fab_peer_reset,
	.peer_remove = fab_peer_remove,
	.close = fab_close,
	.info = fab_info,
	.mr_reg = fab_mr_reg,
	.mr_reg_cuda = fab_mr_reg_cuda,
	.mr_dereg = fab_mr_dereg,
	.mr_export = fab_mr_export,
	.key_import = fab_key_import,
	.key_release = fab_key_release,
	.peer_add = fab_peer_add,
	.read = fab_read,
};
