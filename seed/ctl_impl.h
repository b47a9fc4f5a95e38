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

/* A POST /v1/announce body, parsed. */
struct ctl_announce {
	char addr[300];	   /* "HOST:PORT" as said */
	uint64_t instance; /* its run (0: not said) */
	uint8_t proof[32]; /* the run's secret (SFS_RUN_SECRET_LEN) */
	int has_proof;
};

/*
 * ctl_parse_announce - a re-seeder's POST /v1/announce body
 * {"address": "HOST:PORT", "instance": "0xHEX", "proof": "64 HEX"} into
 * *@out: the address as said (checked against the caller, and listed,
 * by sfs_announced_add), the run (0 when not said) and the run's secret
 * (has_proof 0 when not said).  Returns 0, or -EINVAL with one line in
 * @err naming the field.
 */
int ctl_parse_announce(const char *body, size_t len, struct ctl_announce *out,
		       char *err, size_t errlen);

/* Why an announcement was refused (seedfs_seed_announce_refused_total's
 * reason label, ctl_refusal_names). */
enum ctl_refusal {
	CTL_REFUSED_MALFORMED, /* the body does not parse */
	CTL_REFUSED_ADDRESS,   /* not the caller's address */
	CTL_REFUSED_PROOF,     /* a run without its proof */
	CTL_REFUSED_CAP,       /* the caller's --announce-per-host */
	CTL_REFUSED_FULL,      /* SFS_ANNOUNCED_MAX listed */
	CTL_REFUSED_KINDS
};
extern const char *const ctl_refusal_names[CTL_REFUSED_KINDS];

#define CTL_REFUSERS_MAX 64	 /* callers whose refusals are told apart */
#define CTL_REFUSAL_SAY_MS 10000 /* a caller's refusals: one line per */

/* The refusals of announcements: counters, and who was told when.  The
 * control thread's alone (handlers run on it). */
struct ctl_refusals {
	uint64_t total[CTL_REFUSED_KINDS]; /* counters: never go back */
	struct ctl_refuser {
		char caller[64];
		uint64_t n;	  /* refused from it so far */
		uint64_t said_ms; /* its last line */
	} who[CTL_REFUSERS_MAX];
	size_t nwho;
	/* Callers past the CTL_REFUSERS_MAX told apart in the last
	 * CTL_REFUSAL_SAY_MS: refused since their last line, and when. */
	uint64_t others, others_said_ms;
};

/*
 * ctl_note_refusal - one more refusal of @kind from @caller at @now_ms,
 * counted.  Whether to log it now: 1 (*@n: how many from @caller so
 * far), when @caller had no line in the last CTL_REFUSAL_SAY_MS; 2 (*@n:
 * how many from callers not told apart since their last line) when
 * CTL_REFUSERS_MAX others had one in that time and theirs had none;
 * else 0.  So a flood from any number of addresses logs at most
 * CTL_REFUSERS_MAX + 1 lines per CTL_REFUSAL_SAY_MS.
 */
int ctl_note_refusal(struct ctl_refusals *r, enum ctl_refusal kind,
		     const char *caller, uint64_t now_ms, uint64_t *n);

#endif /* SFS_SEED_CTL_IMPL_H */
