/* SPDX-License-Identifier: MIT */
/*
 * status.h - MOUNTPOINT/.seedfs/status: what this mount is doing, for an
 * SRE with cat and grep.  One "key: value" per line.
 */
#ifndef SFS_STATUS_H
#define SFS_STATUS_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

struct sfs_cache;
struct sfs_disk;
struct sfs_gens;

struct sfs_status {
	const char *seed;      /* HOST:PORT [borrowed] */
	struct sfs_gens *gens; /* [borrowed] */
	char protocol[32];
	char provider[64];
	struct sfs_cache *cache; /* [borrowed] */
	struct sfs_disk *disk;	 /* [borrowed] or NULL */
	const char *control;	 /* the control socket [borrowed] or NULL */
	const char *require;	 /* --require [borrowed] or NULL */
	time_t mounted;		 /* wall clock */
	uint64_t mounted_ns;	 /* monotonic */
	uint64_t ready_ms; /* protected by lock: start to ready; 0: not yet */
	uint64_t transport_ms; /* of it, opening the transport (set before
				    the session starts) */
	pthread_mutex_t lock;
	uint64_t last_ns, last_bytes; /* protected by lock */
	double rate_now;	      /* bytes/s; protected by lock */
};

/* sfs_status_init - set the clocks and the lock; fill the rest first. */
void sfs_status_init(struct sfs_status *s);
void sfs_status_destroy(struct sfs_status *s);

/*
 * sfs_status_render - the text, into *text [new, free()].  @arg is a
 * struct sfs_status.  Returns 0 or -ENOMEM.  Thread safe.
 */
int sfs_status_render(void *arg, char **text, size_t *len);

#endif /* SFS_STATUS_H */
