/* SPDX-License-Identifier: MIT */
/*
 * xport_impl.h - the contract between transport.c and its backends.
 * Only files under transports/ include this.
 */
#ifndef SFS_XPORT_IMPL_H
#define SFS_XPORT_IMPL_H

#include "transport.h"

struct sfs_xport_proto;

/* One ops table per backend; found through struct sfs_xport_proto. */
struct sfs_xport_ops {
	const char *name;
	int (*open)(const struct sfs_xport_proto *proto,
		    const struct sfs_xport_cfg *cfg, struct sfs_xport **out,
		    char *err, size_t errlen);
	size_t (*quiesce)(struct sfs_xport *x);
	/* Optional (NULL: -EOPNOTSUPP): see sfs_xport_reset. */
	int (*reset)(struct sfs_xport *x);
	/* Optional (NULL: a reset of everything): see sfs_xport_peer_reset. */
	int (*peer_reset)(struct sfs_xport *x, uint64_t peer);
	/* Optional (NULL: nothing to tear down). */
	void (*peer_remove)(struct sfs_xport *x, uint64_t peer);
	void (*close)(struct sfs_xport *x);
	void (*info)(struct sfs_xport *x, struct sfs_xport_info *info);
	int (*mr_reg)(struct sfs_xport *x, void *buf, size_t len,
		      unsigned int access, struct sfs_xport_mr **out);
	/* Optional (NULL: this backend cannot register GPU memory). */
	int (*mr_reg_cuda)(struct sfs_xport *x, void *buf, size_t len,
			   int device, unsigned int access,
			   struct sfs_xport_mr **out, char *err, size_t errlen);
	void (*mr_dereg)(struct sfs_xport_mr *mr);
	void (*mr_export)(const struct sfs_xport_mr *mr, uint64_t *raddr,
			  uint64_t *key, uint8_t *raw, size_t *raw_len);
	/* Optional (NULL: no raw keys), both or neither. */
	int (*key_import)(struct sfs_xport *x, uint64_t raddr,
			  const uint8_t *raw, size_t len, uint64_t *key);
	void (*key_release)(struct sfs_xport *x, uint64_t key);
	int (*peer_add)(struct sfs_xport *x, const void *addr, size_t len,
			uint64_t *peer);
	/* Optional (NULL: no exchange needed): see sfs_xport_hello. */
	int (*hello)(struct sfs_xport *x, void *buf, size_t *len);
	int (*accept)(struct sfs_xport *x, const void *hello, size_t len,
		      const char *client, void *reply, size_t *rlen);
	void (*hello_abort)(struct sfs_xport *x, const void *hello, size_t len);
	int (*read)(struct sfs_xport *x, uint64_t peer,
		    const struct sfs_xport_rd *rds, size_t n,
		    sfs_xport_done_fn done, void *arg);
};

/* A protocol name bound to a backend and its parameters. */
struct sfs_xport_proto {
	const char *name; /* "tcp" */
	const struct sfs_xport_ops *ops;
	const char *provider; /* backend parameter, e.g. "tcp;ofi_rxm" */
	int ip_node; /* the provider binds to an IP address (cfg->node) */
	const char *missing; /* what this host lacks when it can't open */
	const char *hint;    /* what to try instead */
};

/* Every backend object starts with this. */
struct sfs_xport {
	const struct sfs_xport_ops *ops;
};

struct sfs_xport_mr {
	const struct sfs_xport_ops *ops;
};

extern const struct sfs_xport_ops sfs_fabric_ops;
extern const struct sfs_xport_ops sfs_verbs_ops;

#endif /* SFS_XPORT_IMPL_H */
