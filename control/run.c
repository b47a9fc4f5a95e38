/* SPDX-License-Identifier: MIT */
/* run.c - a re-seeder's run and the proof of it (run.h). */
#include "control/run.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <string.h>
#include <sys/random.h>

uint64_t sfs_run_instance(const uint8_t secret[SFS_RUN_SECRET_LEN])
{
	uint8_t d[32];
	uint64_t v = 0;
	if (gnutls_hash_fast(GNUTLS_DIG_SHA256, secret, SFS_RUN_SECRET_LEN, d))
		return 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | d[i];
	return v;
}

int sfs_run_new(uint8_t secret[SFS_RUN_SECRET_LEN], uint64_t *instance)
{
	/* A secret whose instance is 0 (one in 2^64) is drawn again. */
	for (int tries = 0; tries < 4; tries++) {
		if (getrandom(secret, SFS_RUN_SECRET_LEN, 0) !=
		    SFS_RUN_SECRET_LEN)
			break;
		if ((*instance = sfs_run_instance(secret)))
			return 0;
	}
	explicit_bzero(secret, SFS_RUN_SECRET_LEN);
	*instance = 0;
	return -EIO;
}
