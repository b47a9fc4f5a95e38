/* SPDX-License-Identifier: MIT */
/*
 * reseed.h - a replica that serves what it holds to other replicas
 * (mount --reseed): reseed.c says how.
 */
#ifndef SFS_RESEED_H
#define SFS_RESEED_H

#include <stddef.h>
#include <stdint.h>

struct sfs_replica;
struct sfs_reseed;

/*
 * sfs_reseed_start - register @r's cache slab (remote read only) with a
 * seed transport of @r's protocol, answer on control port @listen
 * (HOST:PORT; port 0: any) and announce it to @r's seeds.  *out [new].
 * Returns 0 or -errno with one line in @err.
 */
int sfs_reseed_start(struct sfs_replica *r, const char *listen,
		     struct sfs_reseed **out, char *err, size_t errlen);

/* sfs_reseed_address - where it answers, as announced [borrowed]. */
const char *sfs_reseed_address(const struct sfs_reseed *rs);

/* sfs_reseed_instance - its run's instance (0 for NULL), derived from
 * the run's random secret (control/run.h), which its announcements
 * carry as the proof: a replica that finds itself among its sources
 * knows it by this. */
uint64_t sfs_reseed_instance(const struct sfs_reseed *rs);

struct sfs_metrics;

/* sfs_reseed_metrics - its control port's requests by route and code
 * into @m (nothing for NULL).  Thread safe. */
void sfs_reseed_metrics(const struct sfs_reseed *rs, struct sfs_metrics *m);

/* sfs_reseed_stop - stop answering and announcing, quiesce its
 * transport, deregister the slab.  Before the cache goes.  NULL is
 * fine. */
void sfs_reseed_stop(struct sfs_reseed *rs);

#endif /* SFS_RESEED_H */
