/* SPDX-License-Identifier: MIT */
/*
 * holdruns.h - the compact form of a re-seeder's holdings (GET
 * /v1/holdings with form=2): for one file, runs of chunks, each run a
 * stretch of consecutive chunks in consecutive slab slots, or not held,
 * or being pulled.  A full answer lists what is held and coming (the
 * rest is not held); a delta lists only the chunks whose state changed
 * since the version the asker named, not-held ones included.  Bytes in
 * proportion to what changed, not to the model's size.
 *
 * Wire form: base64 (RFC 4648) of a sequence of runs, each
 *   varint gap     chunks skipped since the end of the previous run
 *   varint head    count << 2 | kind (kind 0: slots, 1: not held,
 *                  2: coming; count >= 1)
 *   varint delta   kind 0 only: zigzag of (first slot - the slot after
 *                  the previous slots run, 0 at first)
 * with LEB128 varints of at most 10 bytes.  Decoding treats the text as
 * hostile and names what is wrong.  Pure functions; thread safe.
 */
#ifndef SFS_HOLDRUNS_H
#define SFS_HOLDRUNS_H

#include <stddef.h>
#include <stdint.h>

/* A chunk's state in a slot array (else its slot). */
#define SFS_RUNS_NONE UINT32_MAX	 /* not held */
#define SFS_RUNS_COMING (UINT32_MAX - 1) /* being pulled, held soon */
#define SFS_RUNS_SAME (UINT32_MAX - 2)	 /* encode: unchanged, left out */

/*
 * sfs_runs_encode - the runs of @slots[0..@n), as base64 into *out
 * [new, free()].  @full: not-held chunks are left out (the asker starts
 * from nothing held), else listed.  SFS_RUNS_SAME is always left out.
 * 0 or -ENOMEM.
 */
int sfs_runs_encode(const uint32_t *slots, uint64_t n, int full, char **out);

/*
 * sfs_runs_apply - apply the runs in @b64 (@len bytes) to @slots[0..@n):
 * each chunk a run names takes its slot, SFS_RUNS_NONE or
 * SFS_RUNS_COMING.  A slot must be below @slot_max.  On error nothing
 * is promised of @slots (the caller throws them away): -EPROTO with
 * @why naming the fault.
 */
int sfs_runs_apply(const char *b64, size_t len, uint32_t *slots, uint64_t n,
		   uint64_t slot_max, char *why, size_t whylen);

#endif /* SFS_HOLDRUNS_H */
