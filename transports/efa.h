/* SPDX-License-Identifier: MIT */
/*
 * efa.h - what the EFA devices of this host can do, asked of the device
 * itself (efadv_query_device), not guessed from the instance type.
 * Only transports/ includes this.
 */
#ifndef SFS_EFA_H
#define SFS_EFA_H

#include <stddef.h>
#include <stdint.h>

struct sfs_efa_caps {
	int devices;		/* EFA devices found */
	char name[64];		/* the first one's */
	int rdma_read;		/* every device can serve RDMA read */
	uint32_t max_rdma_size; /* smallest over devices, 0 when unknown */
};

/* sfs_efa_query - fill @c from the EFA devices present (none here is
 * devices == 0).  Returns 0.  Thread safe. */
int sfs_efa_query(struct sfs_efa_caps *c);

/*
 * sfs_efa_env_check - FI_EFA_USE_DEVICE_RDMA (@use_device_rdma, NULL when
 * unset) forced on for a device without RDMA read aborts the process at
 * the first transfer: refuse it at start instead, one line in @err.
 * seedfs itself never sets the variable.  Returns 0 or -EINVAL.  Pure.
 */
int sfs_efa_env_check(const struct sfs_efa_caps *c, const char *use_device_rdma,
		      char *err, size_t errlen);

#endif /* SFS_EFA_H */
