/* SPDX-License-Identifier: MIT */
/*
 * announce.h - the re-seeders that announced themselves to a seed, and
 * what it tells each asker of them: its own subset, or its place in the
 * fleet's ring.  No I/O and no clock: the caller passes the time, so a
 * test can move it.
 *
 * Every token holder may announce, so the table trusts no announcer
 * (docs/security.md): an address is listed only for the host it came
 * from, each caller address lists at most a few (per_caller), a run
 * (instance) is claimed only with its proof (control/run.h), and the
 * ring's places and the askers' subsets are keyed by a secret of the
 * seed, so no one can place an address beside a chosen victim.
 */
#ifndef SFS_SEED_ANNOUNCE_H
#define SFS_SEED_ANNOUNCE_H

#include <stddef.h>
#include <stdint.h>

#define SFS_ANNOUNCED_MAX 1024	   /* re-seeders listed at once */
#define SFS_ANNOUNCED_TTL_MS 15000 /* an announcement lasts this long */
#define SFS_ANNOUNCED_LISTED 16	   /* re-seeders one answer lists */
#define SFS_ANNOUNCED_PER_CALLER 4 /* live ones from one caller address */
#define SFS_ANNOUNCED_KEY_LEN 32   /* the ring's secret */
#define SFS_ANNOUNCED_ADDR_MAX 300 /* an address listed, with its NUL */

struct sfs_announced;

struct sfs_announced_cfg {
	/* The secret the ring's places and the askers' subsets are keyed
	 * with, SFS_ANNOUNCED_KEY_LEN bytes [borrowed: copied]; NULL: drawn
	 * at random now. */
	const uint8_t *key;
	/* Live announcements listed per caller address; 0:
	 * SFS_ANNOUNCED_PER_CALLER. */
	uint32_t per_caller;
};

/*
 * sfs_announced_new - an empty table into *out [new: sfs_announced_free,
 * which takes NULL].  0, -ENOMEM, or -EIO when no random key can be
 * drawn.
 */
int sfs_announced_new(const struct sfs_announced_cfg *cfg,
		      struct sfs_announced **out);
void sfs_announced_free(struct sfs_announced *a);

/* One announcement, as it came. [borrowed] */
struct sfs_announce {
	/* "HOST:PORT" as said: HOST the caller's own address, or "",
	 * "0.0.0.0" or "::" for it. */
	const char *addr;
	const char *caller; /* the numeric address it came from */
	uint64_t instance;  /* its run; 0: none said */
	/* With @instance: the run's secret (SFS_RUN_SECRET_LEN bytes),
	 * whose hash is @instance (control/run.h); NULL: none. */
	const uint8_t *proof;
};

/* What sfs_announced_add made of an announcement. */
struct sfs_announced_res {
	/* The address as listed: the caller's numeric address in its
	 * canonical form (IPv6 in brackets), the port; "" when the
	 * announcement did not parse. */
	char listed[SFS_ANNOUNCED_ADDR_MAX];
	int fresh; /* listed now, not before */
	/* Its run was listed at this other address until now (the run
	 * moved: the newest address wins), or "". */
	char moved_from[SFS_ANNOUNCED_ADDR_MAX];
};

/*
 * sfs_announced_add - @an is alive at @now_ms: listed for the next
 * SFS_ANNOUNCED_TTL_MS (those that lapsed are dropped first), *@res
 * filled.  An address listed already is renewed, and takes the run it
 * says now.  A run listed at another address moves here.  Refused,
 * nothing changed:
 *   -EINVAL  @an->addr is not HOST:PORT (port 1-65535), or @an->caller
 *            not a numeric address;
 *   -EPERM   HOST is neither the caller's address nor a wildcard;
 *   -EACCES  @an->instance without a proof of it (control/run.h);
 *   -EDQUOT  the caller has per_caller live ones listed, this not one;
 *   -ENOSPC  SFS_ANNOUNCED_MAX live ones are listed, this not one;
 *   -ENOMEM.
 * Time never goes back: a @now_ms below one already passed counts as
 * that one.  Thread safe.
 */
int sfs_announced_add(struct sfs_announced *a, const struct sfs_announce *an,
		      uint64_t now_ms, struct sfs_announced_res *res);

/*
 * sfs_announced_sources - {"reseeders": [{"address", "expires_in_ms"}],
 * "live": N} into *buf [new], at @now_ms.  Of the N live re-seeders:
 * the SFS_ANNOUNCED_LISTED that rank first for @asker (rendezvous
 * hashing on the keyed hashes of their addresses: each asker its own
 * subset, stable as others come and go; NULL: as for ""); or, when @me
 * is the run of one of them and @fleet_from (at least 2) or more that
 * proved theirs are live, the fleet's lanes: those in the order of the
 * keyed hashes of their addresses (the same for every asker of this
 * seed), "fleet": {"size": n, "index": its place, "members": [the
 * addresses at places -1, -2, -4, ... from it, while below n]}, and
 * "reseeders" lists exactly those members.  The ring is sorted once per
 * change of its membership, not per ask: an ask costs one pass over the
 * table.  0 or -ENOMEM.  Thread safe.
 */
int sfs_announced_sources(struct sfs_announced *a, const char *asker,
			  uint64_t me, uint32_t fleet_from, uint64_t now_ms,
			  char **buf, size_t *len);

/* sfs_announced_live - how many are live at @now_ms.  Thread safe. */
size_t sfs_announced_live(struct sfs_announced *a, uint64_t now_ms);

/*
 * sfs_announced_place - the keyed hash that orders @addr in @a's ring
 * (its place's key; the subsets rank by it too).  For tests and
 * diagnostics.  Thread safe.
 */
uint64_t sfs_announced_place(const struct sfs_announced *a, const char *addr);

#endif
