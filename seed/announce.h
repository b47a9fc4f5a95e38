/* SPDX-License-Identifier: MIT */
/*
 * announce.h - the re-seeders that announced themselves to a seed, and
 * what it tells each asker of them: its own subset, or its place in the
 * fleet's ring.  No I/O and no clock: the caller passes the time, so a
 * test can move it.
 */
#ifndef SFS_SEED_ANNOUNCE_H
#define SFS_SEED_ANNOUNCE_H

#include <stddef.h>
#include <stdint.h>

#define SFS_ANNOUNCED_MAX 1024	   /* re-seeders listed at once */
#define SFS_ANNOUNCED_TTL_MS 15000 /* an announcement lasts this long */
#define SFS_ANNOUNCED_LISTED 16	   /* re-seeders one answer lists */

struct sfs_announced;

/*
 * sfs_announced_new - an empty table into *out [new:
 * sfs_announced_free, which takes NULL].  0 or -ENOMEM.
 */
int sfs_announced_new(struct sfs_announced **out);
void sfs_announced_free(struct sfs_announced *a);

/*
 * sfs_announced_add - a re-seeder at control address @addr [borrowed],
 * its run @instance (0: not said), is alive at @now_ms: listed for the
 * next SFS_ANNOUNCED_TTL_MS.  Those that lapsed are dropped first.  0,
 * -ENOSPC when SFS_ANNOUNCED_MAX live ones are listed, -ENAMETOOLONG
 * for an address of 300 bytes or more, or -EEXIST when a live one at
 * another address said @instance (then @addr is not listed, or, when
 * it was, it is out of the ring until it says another run), -ENOMEM.
 * *@fresh (may be NULL): 1 when @addr was not listed before.  Time
 * never goes back: a @now_ms below one already passed counts as that
 * one.  Thread safe.
 */
int sfs_announced_add(struct sfs_announced *a, const char *addr,
		      uint64_t instance, uint64_t now_ms, int *fresh);

/*
 * sfs_announced_sources - {"reseeders": [{"address", "expires_in_ms"}],
 * "live": N} into *buf [new], at @now_ms.  Of the N live re-seeders:
 * the SFS_ANNOUNCED_LISTED that rank first for @asker (rendezvous
 * hashing: each asker its own subset, stable as others come and go;
 * NULL: as for ""); or, when @me is the run of one of them and
 * @fleet_from (at least 2) or more that said theirs are live, the
 * fleet's lanes: those in the order of their addresses' hashes (the
 * same for every asker), "fleet": {"size": n, "index": its place,
 * "members": [the addresses at places -1, -2, -4, ... from it, while
 * below n]}, and "reseeders" lists exactly those members.  The ring is
 * sorted once per change of its membership, not per ask: an ask costs
 * one pass over the table.  0 or -ENOMEM.  Thread safe.
 */
int sfs_announced_sources(struct sfs_announced *a, const char *asker,
			  uint64_t me, uint32_t fleet_from, uint64_t now_ms,
			  char **buf, size_t *len);

/* sfs_announced_live - how many are live at @now_ms.  Thread safe. */
size_t sfs_announced_live(struct sfs_announced *a, uint64_t now_ms);

#endif
