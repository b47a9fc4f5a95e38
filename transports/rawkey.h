/* SPDX-License-Identifier: MIT */
/*
 * rawkey.h - the raw keys a transport imported (FI_MR_RAW providers:
 * fi_mr_map_raw), counted.  Importing a raw key that is already mapped
 * (every holdings answer of a re-seeder carries its slab's key again)
 * shares that mapping; the mapping is undone (fi_mr_unmap_key) when its
 * last import is released, or when the transport closes.  So a replica
 * that runs for months holds one mapping per key its holders use, not
 * one per answer it ever parsed.
 *
 * The bookkeeping alone, with the mapping calls passed in, so a unit
 * test can run it where no provider has raw keys.  Not locked: the
 * owner's lock guards a table (the fabric backend's inflight.lock).
 */
#ifndef SFS_RAWKEY_H
#define SFS_RAWKEY_H

#include "transport.h"

#include <stddef.h>
#include <stdint.h>

struct sfs_rawkey {
	uint64_t raddr;
	uint64_t key; /* what the mapping gave */
	uint32_t len;
	uint32_t refs; /* imports not released yet */
	uint8_t raw[SFS_XPORT_RAWKEY_MAX];
};

struct sfs_rawkeys {
	struct sfs_rawkey *v;
	size_t n, cap;
};

/* How a table maps and unmaps, for its transport. */
struct sfs_rawkey_ops {
	/* Map @len bytes of raw key @raw for remote address @raddr into
	 * *key: 0 or -errno. */
	int (*map)(void *arg, uint64_t raddr, const uint8_t *raw, size_t len,
		   uint64_t *key);
	/* Undo a mapping. */
	void (*unmap)(void *arg, uint64_t key);
	void *arg;
};

/*
 * sfs_rawkeys_get - the key of raw key (@raddr, @raw, @len): the mapping
 * already made for the same bytes (one more reference), or a new one by
 * @ops->map.  A new mapping that cannot be recorded is undone at once
 * (-ENOMEM).  0, -EINVAL (@len 0 or over SFS_XPORT_RAWKEY_MAX), or what
 * @ops->map returned.
 */
int sfs_rawkeys_get(struct sfs_rawkeys *t, uint64_t raddr, const uint8_t *raw,
		    size_t len, const struct sfs_rawkey_ops *ops,
		    uint64_t *key);

/*
 * sfs_rawkeys_put - one import of @key is no longer used; the last one
 * undoes the mapping (@ops->unmap).  0, or -ENOENT for a key this table
 * did not give (nothing done).
 */
int sfs_rawkeys_put(struct sfs_rawkeys *t, uint64_t key,
		    const struct sfs_rawkey_ops *ops);

/* sfs_rawkeys_clear - undo every mapping (the transport closes) and free
 * the table; it can be used again. */
void sfs_rawkeys_clear(struct sfs_rawkeys *t, const struct sfs_rawkey_ops *ops);

#endif /* SFS_RAWKEY_H */
