/* SPDX-License-Identifier: MIT */
/*
 * ctl_impl.h - what the seed's control routes (ctl.c) parse of a
 * request, out of ctl.c so that the fuzzer (tests/unit/test_fuzz.c)
 * runs the very code the seed runs.  Only seed/ and the tests include
 * this.
 */
#ifndef SFS_SEED_CTL_IMPL_H
#define SFS_SEED_CTL_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define CTL_REPLICAS_MAX 1024 /* replicas whose reports are kept */
#define CTL_REPLICA_TTL_MS 15000
#define CTL_PROTOS_MAX 8 /* protocols replicas report reading with */

/* What a replica last reported. */
struct ctl_replica {
	uint64_t id, last_ms, read_bytes;
	size_t proto; /* index in the protocols seen */
};

/* The read reports of GET /v1/models?replica=ID&protocol=P&read_bytes=N,
 * as counters.  The control thread's alone (handlers run on it). */
struct ctl_reports {
	struct ctl_replica replicas[CTL_REPLICAS_MAX];
	size_t nreplicas;
	char protos[CTL_PROTOS_MAX][32];
	uint64_t read_bytes[CTL_PROTOS_MAX]; /* counters: never go back */
	size_t nprotos;
};

/*
 * ctl_note_report - one report, the query arguments as given (NULL:
 * absent) at @now_ms: @id 1 to 16 hex digits (not 0), @protocol a
 * protocol this build knows, @read_bytes a whole number.  Untrusted
 * (whoever holds the token may say anything): it moves counters only,
 * never what is served; one that does not parse is passed over.
 * Returns 0 when counted, -EINVAL when passed over, -ENOSPC when
 * CTL_REPLICAS_MAX replicas report at once.
 */
int ctl_note_report(struct ctl_reports *rp, const char *id,
		    const char *protocol, const char *read_bytes,
		    uint64_t now_ms);

/*
 * ctl_parse_announce - a re-seeder's POST /v1/announce body
 * {"address": "HOST:PORT", "instance": "HEX"} from @client (its
 * numeric address): the address to list into @addr (@client's when the
 * host is missing, 0.0.0.0 or ::; IPv6 hosts in brackets), and the run
 * into *@instance (0 when not said).  Returns 0, or -EINVAL with one
 * line in @err.
 */
int ctl_parse_announce(const char *body, size_t len, const char *client,
		       char *addr, size_t addrlen, uint64_t *instance,
		       char *err, size_t errlen);

#endif /* SFS_SEED_CTL_IMPL_H */
