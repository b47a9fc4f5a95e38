/* SPDX-License-Identifier: MIT */
#include "efa.h"

#include <errno.h>
#include <infiniband/efadv.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int sfs_efa_query(struct sfs_efa_caps *c)
{
	struct ibv_device **devs;
	int n = 0;

	memset(c, 0, sizeof(*c));
	c->rdma_read = 1;
	devs = ibv_get_device_list(&n);
	for (int i = 0; devs && i < n; i++) {
		struct ibv_context *ctx = ibv_open_device(devs[i]);
		struct efadv_device_attr a;
		if (!ctx)
			continue;
		memset(&a, 0, sizeof(a));
		/* Fails (EOPNOTSUPP) on devices that are not EFA. */
		if (efadv_query_device(ctx, &a, sizeof(a)) == 0) {
			if (!c->devices++)
				snprintf(c->name, sizeof(c->name), "%s",
					 ibv_get_device_name(devs[i]));
			if (!(a.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_READ))
				c->rdma_read = 0;
			if (!c->max_rdma_size ||
			    a.max_rdma_size < c->max_rdma_size)
				c->max_rdma_size = a.max_rdma_size;
		}
		ibv_close_device(ctx);
	}
	if (devs)
		ibv_free_device_list(devs);
	if (!c->devices)
		c->rdma_read = 0;
	return 0;
}

/* libfabric's boolean parameters: 1/true/yes/on, any case. */
static int truthy(const char *v)
{
	static const char *const yes[] = {"1", "true", "yes", "on", "y"};
	for (size_t i = 0; v && i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!strcasecmp(v, yes[i]))
			return 1;
	return 0;
}

int sfs_efa_env_check(const struct sfs_efa_caps *c, const char *use_device_rdma,
		      char *err, size_t errlen)
{
	if (!truthy(use_device_rdma) || c->rdma_read || !c->devices)
		return 0;
	snprintf(err, errlen,
		 "protocol efa: FI_EFA_USE_DEVICE_RDMA=%s, but device %s has "
		 "no RDMA read (efadv_query_device); unset it and the efa "
		 "provider emulates reads",
		 use_device_rdma, c->name);
	return -EINVAL;
}
