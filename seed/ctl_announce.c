/* SPDX-License-Identifier: MIT */
/*
 * ctl_announce.c - what the seed's control port makes of a re-seeder's
 * POST /v1/announce (ctl_impl.h): the body parsed, and its refusals
 * counted and told, never more than a few lines however many come.
 */
#include "seed/ctl_impl.h"

#include "common/util.h"
#include "control/run.h"
#include "metadata/jsonlim.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

_Static_assert(sizeof(((struct ctl_announce *)0)->proof) == SFS_RUN_SECRET_LEN,
	       "a proof is a run's secret");

const char *const ctl_refusal_names[CTL_REFUSED_KINDS] = {
	[CTL_REFUSED_MALFORMED] = "malformed",
	[CTL_REFUSED_ADDRESS] = "address",
	[CTL_REFUSED_PROOF] = "proof",
	[CTL_REFUSED_CAP] = "cap",
	[CTL_REFUSED_FULL] = "full",
};

int ctl_parse_announce(const char *body, size_t len, struct ctl_announce *out,
		       char *err, size_t errlen)
{
	char host[256], port[16];
	json_t *o;
	memset(out, 0, sizeof(*out));
	if (sfs_json_load(SFS_JSON_ANNOUNCE, body, len, 0, &o, err, errlen))
		return -EINVAL;
	const char *a = json_string_value(json_object_get(o, "address"));
	const char *in = json_string_value(json_object_get(o, "instance"));
	const char *pr = json_string_value(json_object_get(o, "proof"));
	size_t plen = 0;
	int rc = -EINVAL;
	if (!a || strlen(a) >= sizeof(out->addr) ||
	    sfs_parse_hostport(a, host, sizeof(host), port, sizeof(port)) ||
	    !*port)
		snprintf(err, errlen,
			 "announce: {\"address\": \"HOST:PORT\"} expected");
	else if (json_object_get(o, "instance") &&
		 (!in || sfs_parse_u64(in, &out->instance) || !out->instance))
		snprintf(err, errlen,
			 "announce: instance: a number (0x...) expected");
	else if (json_object_get(o, "proof") &&
		 (!pr || strlen(pr) != 2 * sizeof(out->proof) ||
		  sfs_hex_decode(pr, out->proof, sizeof(out->proof), &plen) ||
		  plen != sizeof(out->proof)))
		snprintf(err, errlen,
			 "announce: proof: %zu hex digits (the run's secret) "
			 "expected",
			 2 * sizeof(out->proof));
	else
		rc = 0;
	if (!rc) {
		memcpy(out->addr, a, strlen(a) + 1);
		out->has_proof = pr != NULL;
	}
	json_decref(o);
	return rc;
}

int ctl_note_refusal(struct ctl_refusals *r, enum ctl_refusal kind,
		     const char *caller, uint64_t now_ms, uint64_t *n)
{
	struct ctl_refuser *w = NULL, *stale = NULL;
	if ((unsigned int)kind < CTL_REFUSED_KINDS)
		r->total[kind]++;
	for (size_t i = 0; i < r->nwho && !w; i++) {
		struct ctl_refuser *c = &r->who[i];
		if (!strcmp(c->caller, caller))
			w = c;
		else if (now_ms - c->said_ms >= CTL_REFUSAL_SAY_MS &&
			 (!stale || c->said_ms < stale->said_ms))
			stale = c;
	}
	if (!w && (r->nwho < CTL_REFUSERS_MAX || stale)) {
		/* A caller not seen lately takes the place of one quiet for
		 * a while (its count starts again). */
		w = r->nwho < CTL_REFUSERS_MAX ? &r->who[r->nwho++] : stale;
		snprintf(w->caller, sizeof(w->caller), "%s", caller);
		w->n = 0;
		w->said_ms = 0;
	}
	if (!w) {
		r->others++;
		if (r->others_said_ms &&
		    now_ms - r->others_said_ms < CTL_REFUSAL_SAY_MS)
			return 0;
		*n = r->others;
		r->others = 0;
		r->others_said_ms = now_ms;
		return 2;
	}
	w->n++;
	if (w->said_ms && now_ms - w->said_ms < CTL_REFUSAL_SAY_MS)
		return 0;
	w->said_ms = now_ms ? now_ms : 1;
	*n = w->n;
	return 1;
}
