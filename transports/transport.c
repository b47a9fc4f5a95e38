/* SPDX-License-Identifier: MIT */
/* transport.c - the protocol registry and dispatch to backends. */
#include "xport_impl.h"
#include "hmem.h"

#include "common/log.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Every protocol seedfs speaks, by the name users type.  Order matters
 * only for listing. */
static const struct sfs_xport_proto protocols[] = {
	{.name = "efa",
	 .ops = &sfs_fabric_ops,
	 .missing = "no EFA device",
	 .provider = "efa",
	 .hint = "try --protocol tcp"},
	{.name = "rdma",
	 .ops = &sfs_verbs_ops,
	 .ip_node = 1,
	 .missing = "no RDMA device",
	 .hint = "try --protocol tcp"},
	{.name = "rdma-fabric",
	 .ops = &sfs_fabric_ops,
	 .ip_node = 1,
	 .missing = "no RDMA device for libfabric verbs",
	 .provider = "verbs;ofi_rxm",
	 .hint = "try --protocol tcp"},
	{.name = "tcp",
	 .ops = &sfs_fabric_ops,
	 .ip_node = 1,
	 .missing = "no libfabric tcp provider",
	 .provider = "tcp;ofi_rxm",
	 .hint = "try --protocol shm on one host"},
	{.name = "shm",
	 .ops = &sfs_fabric_ops,
	 .missing = "no libfabric shm provider",
	 .provider = "shm",
	 .hint = "try --protocol tcp"},
	{.name = "sockets",
	 .ops = &sfs_fabric_ops,
	 .ip_node = 1,
	 .missing = "no libfabric sockets provider",
	 .provider = "sockets",
	 .hint = "try --protocol tcp"},
};

/* What "auto" tries, in order: the fastest fabric a host can serve. */
static const char *const auto_order[] = {"efa", "rdma", "tcp"};

static const struct sfs_xport_proto *find_proto(const char *name)
{
	for (size_t i = 0; i < SFS_ARRAY_SIZE(protocols); i++)
		if (strcmp(protocols[i].name, name) == 0)
			return &protocols[i];
	return NULL;
}

const char *sfs_xport_choose(const char *option, const char *env)
{
	if (option && *option)
		return option;
	if (env && *env)
		return env;
	return NULL;
}

size_t sfs_xport_count(void)
{
	return SFS_ARRAY_SIZE(protocols);
}

const char *sfs_xport_name(size_t i)
{
	return i < SFS_ARRAY_SIZE(protocols) ? protocols[i].name : NULL;
}

int sfs_xport_route_node(const char *protocol, const uint8_t *addr, size_t len,
			 char *node, size_t nodelen)
{
	const struct sfs_xport_proto *p = find_proto(protocol);
	struct sockaddr_storage peer = {0}, self = {0};
	socklen_t slen = sizeof(self);
	uint16_t family = 0;

	/* libfabric's IP providers name themselves with socket addresses
	 * (raw verbs publishes device data). */
	if (!p || !p->ip_node || p->ops != &sfs_fabric_ops ||
	    len < sizeof(family))
		return -ENOENT;
	memcpy(&family, addr, sizeof(family));
	if (!((family == AF_INET && len == sizeof(struct sockaddr_in)) ||
	      (family == AF_INET6 && len == sizeof(struct sockaddr_in6))))
		return -ENOENT;
	memcpy(&peer, addr, len);
	/* A datagram socket's connect() asks the routing table and sends
	 * nothing. */
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int rc = 0;
	if (connect(fd, (struct sockaddr *)&peer, (socklen_t)len) ||
	    getsockname(fd, (struct sockaddr *)&self, &slen))
		rc = -errno;
	close(fd);
	if (rc)
		return rc;
	const void *ip =
		family == AF_INET
			? (const void *)&((struct sockaddr_in *)&self)->sin_addr
			: (const void *)&((struct sockaddr_in6 *)&self)
				  ->sin6_addr;
	if (!inet_ntop(family, ip, node, (socklen_t)nodelen))
		return -errno;
	return 0;
}

int sfs_xport_known(const char *protocol, char *list, size_t len)
{
	if (list && len) {
		size_t o = 0;
		list[0] = '\0';
		for (size_t i = 0; i <= SFS_ARRAY_SIZE(protocols); i++) {
			const char *n = i < SFS_ARRAY_SIZE(protocols)
						? protocols[i].name
						: SFS_XPORT_AUTO;
			int k = snprintf(list + o, len - o, "%s%s",
					 i ? ", " : "", n);
			if (k < 0 || (size_t)k >= len - o)
				break;
			o += (size_t)k;
		}
	}
	return protocol &&
	       (find_proto(protocol) || !strcmp(protocol, SFS_XPORT_AUTO));
}

/* auto: the first of auto_order this host can open; says why. */
static int open_auto(const struct sfs_xport_cfg *cfg, struct sfs_xport **out,
		     char *err, size_t errlen)
{
	char why[3 * SFS_XPORT_ERR_MAX] = "";
	size_t o = 0;

	for (size_t i = 0; i < SFS_ARRAY_SIZE(auto_order); i++) {
		const struct sfs_xport_proto *p = find_proto(auto_order[i]);
		struct sfs_xport_cfg c = *cfg;
		char e[SFS_XPORT_ERR_MAX];
		c.protocol = p->name;
		if (p->ops->open(p, &c, out, e, sizeof(e)) == 0) {
			SFS_LOG(SFS_INFO, "xport",
				"protocol auto: chose %s%s%s", p->name,
				o ? "; not available: " : "", why);
			return 0;
		}
		SFS_LOG(SFS_INFO, "xport", "protocol auto: %s", e);
		int k = snprintf(why + o, sizeof(why) - o, "%s%s",
				 o ? "; " : "", e);
		if (k > 0 && (size_t)k < sizeof(why) - o)
			o += (size_t)k;
	}
	snprintf(err, errlen, "protocol auto: no protocol is available (%s)",
		 why);
	return -ENODEV;
}

int sfs_xport_open(const struct sfs_xport_cfg *cfg, struct sfs_xport **out,
		   char *err, size_t errlen)
{
	const struct sfs_xport_proto *p = find_proto(cfg->protocol);

	if (!strcmp(cfg->protocol, SFS_XPORT_AUTO))
		return open_auto(cfg, out, err, errlen);
	if (!p) {
		char names[128];
		sfs_xport_known(NULL, names, sizeof(names));
		snprintf(err, errlen,
			 "protocol %s: unknown protocol; known: %s",
			 cfg->protocol, names);
		return -EPROTONOSUPPORT;
	}
	return p->ops->open(p, cfg, out, err, errlen);
}

void sfs_xport_close(struct sfs_xport *x)
{
	if (x)
		x->ops->close(x);
}

size_t sfs_xport_quiesce(struct sfs_xport *x)
{
	return x ? x->ops->quiesce(x) : 0;
}

int sfs_xport_reset(struct sfs_xport *x)
{
	return x->ops->reset ? x->ops->reset(x) : -EOPNOTSUPP;
}

int sfs_xport_peer_reset(struct sfs_xport *x, uint64_t peer)
{
	if (x->ops->hello)
		return -EOPNOTSUPP;
	if (x->ops->peer_reset)
		return x->ops->peer_reset(x, peer);
	return sfs_xport_reset(x);
}

void sfs_xport_peer_remove(struct sfs_xport *x, uint64_t peer)
{
	if (x->ops->peer_remove)
		x->ops->peer_remove(x, peer);
}

void sfs_xport_info(struct sfs_xport *x, struct sfs_xport_info *info)
{
	x->ops->info(x, info);
}

int sfs_xport_mr_reg(struct sfs_xport *x, void *buf, size_t len,
		     unsigned int access, struct sfs_xport_mr **out)
{
	return x->ops->mr_reg(x, buf, len, access, out);
}

int sfs_xport_mr_reg_cuda(struct sfs_xport *x, void *dptr, size_t len,
			  unsigned int access, struct sfs_xport_mr **out,
			  char *err, size_t errlen)
{
	struct sfs_xport_info info;
	int dev, rc;

	sfs_xport_info(x, &info);
	if (!x->ops->mr_reg_cuda) {
		snprintf(err, errlen,
			 "protocol %s cannot register GPU memory; use efa or "
			 "rdma-fabric",
			 info.protocol);
		return -EOPNOTSUPP;
	}
	rc = sfs_hmem_cuda_device(dptr, len, &dev, err, errlen);
	if (rc)
		return rc;
	return x->ops->mr_reg_cuda(x, dptr, len, dev, access, out, err, errlen);
}

void sfs_xport_mr_dereg(struct sfs_xport_mr *mr)
{
	if (mr)
		mr->ops->mr_dereg(mr);
}

void sfs_xport_mr_export(const struct sfs_xport_mr *mr, uint64_t *raddr,
			 uint64_t *key, uint8_t *raw, size_t *raw_len)
{
	*raw_len = 0;
	mr->ops->mr_export(mr, raddr, key, raw, raw_len);
}

int sfs_xport_key_import(struct sfs_xport *x, uint64_t raddr,
			 const uint8_t *raw, size_t len, uint64_t *key)
{
	return x->ops->key_import ? x->ops->key_import(x, raddr, raw, len, key)
				  : -EOPNOTSUPP;
}

void sfs_xport_key_release(struct sfs_xport *x, uint64_t key)
{
	if (x && x->ops->key_release)
		x->ops->key_release(x, key);
}

int sfs_xport_peer_add(struct sfs_xport *x, const void *addr, size_t len,
		       uint64_t *peer)
{
	return x->ops->peer_add(x, addr, len, peer);
}

int sfs_xport_read(struct sfs_xport *x, uint64_t peer,
		   const struct sfs_xport_rd *rds, size_t n,
		   sfs_xport_done_fn done, void *arg)
{
	return x->ops->read(x, peer, rds, n, done, arg);
}

int sfs_xport_needs_hello(struct sfs_xport *x)
{
	return x->ops->hello != NULL;
}

int sfs_xport_hello(struct sfs_xport *x, void *buf, size_t *len)
{
	return x->ops->hello ? x->ops->hello(x, buf, len) : -EOPNOTSUPP;
}

int sfs_xport_accept(struct sfs_xport *x, const void *hello, size_t len,
		     const char *client, void *reply, size_t *rlen)
{
	return x->ops->accept
		       ? x->ops->accept(x, hello, len, client, reply, rlen)
		       : -EOPNOTSUPP;
}

void sfs_xport_hello_abort(struct sfs_xport *x, const void *hello, size_t len)
{
	if (x->ops->hello_abort)
		x->ops->hello_abort(x, hello, len);
}
