/* SPDX-License-Identifier: MIT */
/*
 * register.c - a seed's records in the fleet registry: one per model,
 * PREFIX/models/NAME/seed/CONTROL, under the seed's lease.
 */
#include "seed/register.h"

#include "common/log.h"
#include "control/registry.h"
#include "seed/seed.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sfs_seed_reg {
	struct sfs_seed *s;
	struct sfs_reg *g;
	struct sfs_reg_pub *pub;
	char control[300];
};

void sfs_seed_reg_update(struct sfs_seed_reg *r)
{
	char key[SFS_REG_KEY_MAX + 1];
	if (!r)
		return;
	for (size_t i = 0; i < sfs_seed_nmodels(r->s); i++) {
		char *val = NULL;
		const char *name = sfs_seed_model_name(r->s, i);
		int rc = sfs_reg_model_key(r->g, name, "seed", r->control, key,
					   sizeof(key));
		if (!rc)
			rc = sfs_seed_record(r->s, i, "seed", r->control, &val);
		if (!rc)
			rc = sfs_reg_pub_set(r->pub, key, val);
		free(val);
		if (rc)
			SFS_LOG(SFS_ERR, "registry",
				"cannot record model %s: %s", name,
				strerror(-rc));
	}
}

int sfs_seed_reg_start(struct sfs_seed *s, struct sfs_reg *g,
		       unsigned int ttl_s, const char *control,
		       struct sfs_seed_reg **out, char *err, size_t errlen)
{
	struct sfs_seed_reg *r = calloc(1, sizeof(*r));
	int rc;

	*out = NULL;
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->s = s;
	r->g = g;
	snprintf(r->control, sizeof(r->control), "%s", control);
	if ((rc = sfs_reg_pub_start(g, ttl_s, "seed", &r->pub, err, errlen))) {
		free(r);
		return rc;
	}
	sfs_seed_reg_update(r);
	if ((rc = sfs_reg_pub_wait(r->pub, 5000))) {
		char state[600];
		sfs_reg_pub_state(r->pub, state, sizeof(state));
		snprintf(err, errlen,
			 "registry %s: records not written in 5 s: %s",
			 sfs_reg_url(g), state);
		sfs_seed_reg_stop(r);
		return rc;
	}
	*out = r;
	return 0;
}

void sfs_seed_reg_stop(struct sfs_seed_reg *r)
{
	if (!r)
		return;
	sfs_reg_pub_stop(r->pub);
	free(r);
}
