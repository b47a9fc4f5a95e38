/* SPDX-License-Identifier: MIT */
/*
 * run.h - a re-seeder's run and the proof of it.  Each run of a
 * re-seeding mount draws a secret; its instance (the 64-bit run id in
 * its manifests, holdings and announcements) is derived from it, so
 * only the run that drew the secret can claim the instance: it sends
 * the secret with its announcements (POST /v1/announce "proof"), and a
 * seed checks the two agree (docs/security.md).
 */
#ifndef SFS_CONTROL_RUN_H
#define SFS_CONTROL_RUN_H

#include <stdint.h>

#define SFS_RUN_SECRET_LEN 32

/*
 * sfs_run_instance - the instance @secret proves: the first 8 bytes of
 * its SHA-256, big-endian; 0 (no run proves 0) when those are all zero
 * or the hash fails.  Pure; thread safe.
 */
uint64_t sfs_run_instance(const uint8_t secret[SFS_RUN_SECRET_LEN]);

/*
 * sfs_run_new - a new run: SFS_RUN_SECRET_LEN random bytes into
 * @secret and the (nonzero) instance they prove into *instance.  0, or
 * -EIO when the system gives no randomness.  Thread safe.
 */
int sfs_run_new(uint8_t secret[SFS_RUN_SECRET_LEN], uint64_t *instance);

#endif
