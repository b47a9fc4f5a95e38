/* SPDX-License-Identifier: MIT */
/*
 * parse.h - the replica's parsers of what its sources and the registry
 * send, out of source.c, model.c and fleet.c so that the fuzzer
 * (tests/unit/test_fuzz.c) runs the very code a mount runs.  Only
 * replica/ and the tests include this.  Everything they read is
 * untrusted: bounded (metadata/jsonlim.h), checked, and refused in one
 * line naming the field.  All are thread safe and keep nothing.
 */
#ifndef SFS_REPLICA_PARSE_H
#define SFS_REPLICA_PARSE_H

#include "metadata/manifest.h"
#include "control/registry.h"
#include "metadata/jsonlim.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct sfs_cache_hobj;
struct sfs_cache_piece;

#define RMODEL_MAX 256 /* models one source may list */
#define RSERVED_MAX 16 /* generations of a model a source serves */

/* A /v1/models answer. */
struct rsrc_ans_model {
	char name[SFS_MF_NAME_MAX + 1];
	uint64_t generation, content;
	uint64_t key_epoch; /* of the current generation's keys; 0: not told */
	int64_t signed_at;  /* when it was signed (again); 0: not told */
	size_t nserved;
	uint64_t served[RSERVED_MAX];
	int64_t expires_in[RSERVED_MAX];
};
struct rsrc_answer {
	uint64_t instance;
	size_t n;
	struct rsrc_ans_model *models; /* owned: free() */
};

/*
 * rsrc_parse_models - a source's /v1/models answer into @a
 * (a->models [new, free()] on success, NULL otherwise).  Returns 0,
 * -EPROTO with @err naming the field, or -ENOMEM.
 */
int rsrc_parse_models(const char *body, size_t len, struct rsrc_answer *a,
		      char *err, size_t errlen);

#define RSRC_FLEET_MAX                                                         \
	4096 /* replicas in the fleet's lanes (a seed lists 1024) */
#define RSRC_FLEET_MEMBERS 16 /* ... of which one works with: log2 */
#define RSRC_FLEET_KEEP_MS                                                     \
	15000 /* a place is good this long after the
				    seed said it (its announcements') */

/* A seed's answer of where this re-seeder is in the fleet's lanes. */
struct rsrc_fleet {
	size_t size;  /* replicas in them; 0: none given */
	size_t index; /* this one's place */
	size_t nmembers;
	char members[RSRC_FLEET_MEMBERS][300]; /* at places -1, -2, -4... */
	uint64_t at_ms; /* when the seed said it (sfs_now_ms) */
};

/*
 * rsrc_parse_sources - a seed's /v1/sources answer: @fn(@arg, ADDRESS)
 * for every re-seeder listed with a valid HOST:PORT [borrowed for the
 * call]; entries that are not are passed over.  Its "fleet" into
 * *@fleet (may be NULL; size 0: none, or not one).  Returns 0, -E2BIG
 * (over the limits) or -EINVAL (not JSON) with @err, or -EBADMSG with
 * @err naming the field when its "fleet" is not one (a size of 2 to
 * RSRC_FLEET_MAX, an index below it, one valid HOST:PORT for each power
 * of two below the size): the re-seeders were passed all the same.
 */
int rsrc_parse_sources(const char *body, size_t len,
		       void (*fn)(void *arg, const char *addr), void *arg,
		       struct rsrc_fleet *fleet, char *err, size_t errlen);

/*
 * model_holdings_load - a re-seeder's /v1/holdings answer: *o [new,
 * json_decref()] and its version.  0 or -EPROTO with @why.
 * model_holdings_pieces - its pieces for the files of @cm (a view's
 * manifest) from @o, checked against @hm (the re-seeder's manifest of
 * the same content: one list per file, one slot per chunk of its chunk
 * size, or runs of them (form 2, holdruns.h); slots whose chunk fits in
 * the address space; at most HOLDINGS_CHUNKS_MAX chunks in all).  @ms:
 * the slot of every chunk of each file of @hm as the last answer left
 * them, with the chunk size, slab address and key they are of [owned by
 * the caller, model_slots_free]: a delta ("since") applies onto them
 * only when those match, a full answer replaces them; on any error
 * they are freed (the next answer must be a full one).  Every chunk it
 * holds at the slab address of its slot, every one it has coming (slot
 * -2: a piece with no bytes, address 0); other slots are passed over.
 * *hobjs (one per file of @cm) and *pieces (one array) [new, free()];
 * the pieces' keys are left 0: @slab (its @raw bytes in @raw) is the
 * slab's address and key as published.  0, -EPROTO with @why, -ENOMEM.
 */
#define HOLDINGS_CHUNKS_MAX (1u << 22) /* chunks of one holdings answer */
#define HOLDINGS_BYTES_MAX (64u << 20) /* bytes of one, whatever the model */
struct model_slots {
	uint32_t **s; /* per file of the re-seeder's manifest; NULL: none */
	size_t nfiles;
	uint64_t chunk, addr, keyhash; /* what @s are of */
};
void model_slots_free(struct model_slots *ms);
int model_holdings_load(const char *json, size_t len, json_t **o,
			uint64_t *version, char *why, size_t whylen);

/*
 * What one holdings answer may cost, from the model it is of: a
 * re-seeder's answer lists at most every chunk of @cm's files, at
 * chunks no smaller than a quarter of this replica's @chunk (4 KiB at
 * least): about two JSON values a chunk (a slot, or a run's parts in a
 * string) plus a constant, and bytes in proportion.  Within the global
 * caps of SFS_JSON_HOLDINGS (a model bigger than they allow is bounded
 * by them).  Pure.
 */
struct model_hold_caps {
	size_t bytes;		   /* the answer's byte cap */
	struct sfs_json_limit lim; /* its JSON limits */
	uint64_t chunks;	   /* the chunk count they come from */
};
void model_holdings_caps(const struct sfs_manifest *cm, uint32_t chunk,
			 struct model_hold_caps *caps);
int model_holdings_load_lim(const char *json, size_t len,
			    const struct sfs_json_limit *lim, json_t **o,
			    uint64_t *version, char *why, size_t whylen);
int model_holdings_pieces(json_t *o, const struct sfs_manifest *hm,
			  const struct sfs_manifest *cm, struct model_slots *ms,
			  struct sfs_remote *slab,
			  uint8_t raw[SFS_MF_RAWKEY_MAX],
			  struct sfs_cache_hobj **hobjs,
			  struct sfs_cache_piece **pieces, char *why,
			  size_t whylen);

/* A registry record: PREFIX/models/NAME/KIND/CONTROL and its value. */
struct frec {
	char *key;
	char name[SFS_MF_NAME_MAX + 1];
	char control[300];
	int reseeder;
	uint64_t generation, content;
	int seen; /* a range's pass */
};

/*
 * fleet_parse_key - @key, under @prefix (PREFIX/models/), into @f's
 * name, kind and control address.  fleet_parse_value - a put's value,
 * which must say what its key says, into @f's generation and content.
 * Both return 0, or -1 with *why naming what is wrong [static text, or
 * @buf].  @f->key is not touched.
 */
int fleet_parse_key(const char *prefix, const char *key, struct frec *f,
		    const char **why);
int fleet_parse_value(const struct sfs_reg_event *e, struct frec *f,
		      const char **why, char *buf, size_t buflen);

#endif /* SFS_REPLICA_PARSE_H */
