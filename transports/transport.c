/* SPDX-License-Identifier: MIT */
/* transport.c - the protocol registry and dispatch to backends. */
#include "xport_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const struct sfs_xport_proto protocols[] = {
	{.name = "tcp",
	 .ops = &sfs_fabric_ops,
	 .provider = "tcp;ofi_rxm",
	 .hint = "try --protocol shm on one host"},
	{.name = "shm",
	 .ops = &sfs_fabric_ops,
	 .provider = "shm",
	 .hint = "try --protocol tcp"},
	{.name = "sockets",
	 .ops = &sfs_fabric_ops,
	 .provider = "sockets",
	 .hint = "try --protocol tcp"},
};

static const struct sfs_xport_proto *find_proto(const char *name)
{
	for (size_t i = 0; i < sizeof(protocols) / sizeof(protocols[0]); i++)
		if (strcmp(protocols[i].name, name) == 0)
			return &protocols[i];
	return NULL;
}

int sfs_xport_known(const char *protocol, char *list, size_t len)
{
	if (list && len) {
		size_t o = 0;
		list[0] = '\0';
		for (size_t i = 0; i < sizeof(protocols) / sizeof(protocols[0]);
		     i++) {
			int n = snprintf(list + o, len - o, "%s%s",
					 i ? ", " : "", protocols[i].name);
			if (n < 0 || (size_t)n >= len - o)
				break;
			o += (size_t)n;
		}
	}
	return protocol && find_proto(protocol) != NULL;
}

int sfs_xport_open(const struct sfs_xport_cfg *cfg, struct sfs_xport **out,
		   char *err, size_t errlen)
{
	const struct sfs_xport_proto *p = find_proto(cfg->protocol);

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

void sfs_xport_quiesce(struct sfs_xport *x)
{
	if (x)
		x->ops->quiesce(x);
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

void sfs_xport_mr_dereg(struct sfs_xport_mr *mr)
{
	if (mr)
		mr->ops->mr_dereg(mr);
}

void sfs_xport_mr_export(const struct sfs_xport_mr *mr, uint64_t *raddr,
			 uint64_t *key)
{
	mr->ops->mr_export(mr, raddr, key);
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
