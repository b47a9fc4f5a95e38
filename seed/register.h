/* SPDX-License-Identifier: MIT */
/*
 * register.h - a seed's models in the fleet registry: one record per
 * model under the seed's lease (control/registry.h), put again after
 * each republish.  Keys and values: docs/registry.md.
 */
#ifndef SFS_SEED_REGISTER_H
#define SFS_SEED_REGISTER_H

#include <stddef.h>

struct sfs_reg;
struct sfs_seed;
struct sfs_seed_reg;

/*
 * sfs_seed_reg_start - take a lease of @ttl_s seconds in @g and record
 * every model of @s, reached at control address @control (HOST:PORT).
 * Waits up to 5 s for the records to be in etcd.  @s and @g are
 * borrowed and outlive *out [new].  0, or -errno with one line in @err
 * (etcd unreachable, refused).
 */
int sfs_seed_reg_start(struct sfs_seed *s, struct sfs_reg *g,
		       unsigned int ttl_s, const char *control,
		       struct sfs_seed_reg **out, char *err, size_t errlen);

/* sfs_seed_reg_update - the models changed (a republish): their records
 * again.  Accepts NULL.  Thread safe. */
void sfs_seed_reg_update(struct sfs_seed_reg *r);

/* sfs_seed_reg_stop - the records go (the lease is revoked).  Accepts
 * NULL. */
void sfs_seed_reg_stop(struct sfs_seed_reg *r);

#endif /* SFS_SEED_REGISTER_H */
