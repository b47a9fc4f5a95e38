/* SPDX-License-Identifier: MIT */
/*
 * jsonlim.h - JSON from the network, another process or a model
 * directory, parsed within bounds.  A byte cap alone does not bound
 * jansson: `[{},{},...]` costs it about 75 times its size (256 MiB of
 * `{}` would be some 20 GB).  So before jansson sees the text, a scan
 * that allocates nothing counts its values (every object, array,
 * string, number, true, false and null; object keys count too), how
 * many of them are objects and arrays (the costly ones: 224 and 128
 * bytes each in jansson, a number 32) and its nesting depth, and an
 * answer over the limits of its kind is refused in one line naming the
 * answer and the limit:
 *
 *   manifest: 9000001 JSON values, more than the 8000000 allowed
 *
 * The limits of each kind are what a legitimate answer at fleet scale
 * needs, measured (docs/security.md, "Bounded parsing").  Thread safe;
 * nothing is kept between calls.
 */
#ifndef SFS_JSONLIM_H
#define SFS_JSONLIM_H

#include <jansson.h>
#include <stddef.h>

/* The kinds of JSON read from outside, each with its own limits. */
enum sfs_json_kind {
	SFS_JSON_MANIFEST,    /* GET /v1/manifest (256 MiB) */
	SFS_JSON_HOLDINGS,    /* a re-seeder's GET /v1/holdings (64 MiB) */
	SFS_JSON_MODELS,      /* GET /v1/models (4 MiB) */
	SFS_JSON_SOURCES,     /* a seed's GET /v1/sources (1 MiB) */
	SFS_JSON_ANNOUNCE,    /* POST /v1/announce (4 KiB) */
	SFS_JSON_RECORD,      /* one registry record's value (64 KiB) */
	SFS_JSON_REG_ANSWER,  /* etcd: a range answer, any other (64 MiB) */
	SFS_JSON_REG_WATCH,   /* etcd: one watch message (16 MiB) */
	SFS_JSON_IDENTITY,    /* an identity, quant_params (64 KiB) */
	SFS_JSON_SAFETENSORS, /* a safetensors header (100 MiB) */
	SFS_JSON_CONFIG,      /* a model's config.json (16 MiB) */
	SFS_JSON_KINDS
};

/* What one kind of answer may hold. */
struct sfs_json_limit {
	const char *what;  /* the answer, as messages name it */
	size_t values;	   /* JSON values, object keys included */
	size_t containers; /* of them objects and arrays */
	size_t depth;	   /* nesting: 1 for {} or [], 2 for [[]] */
};

/* sfs_json_limit - the limits of @kind [borrowed, static]. */
const struct sfs_json_limit *sfs_json_limit(enum sfs_json_kind kind);

/* What sfs_json_scan counted. */
struct sfs_json_count {
	size_t values, containers, depth;
};

/*
 * sfs_json_scan - count the values in @len bytes of JSON text, the
 * objects and arrays among them and the deepest nesting, without
 * allocating and without judging whether it is valid JSON (jansson does
 * that next): strings are skipped with their escapes, every token
 * outside them counted.  One pass, any bytes.
 */
void sfs_json_scan(const char *buf, size_t len, struct sfs_json_count *c);

/*
 * sfs_json_load - json_loadb(@buf, @len, @flags) once the text is
 * within the limits of @kind.  *out [new, json_decref()]; NULL on
 * failure.  Returns 0, -E2BIG (over a limit) or -EINVAL (not JSON) with
 * one line in @err, the first that holds of:
 *   "WHAT: nested N deep, more than the M allowed"
 *   "WHAT: N JSON values, more than the M allowed"
 *   "WHAT: N JSON objects and arrays, more than the M allowed"
 *   "WHAT: not valid JSON: JANSSON'S REASON (line L column C)"
 */
int sfs_json_load(enum sfs_json_kind kind, const char *buf, size_t len,
		  size_t flags, json_t **out, char *err, size_t errlen);

/*
 * sfs_json_load_lim - the same within @lim [borrowed], limits the caller
 * derived from what it expects (a re-seeder's holdings: from the
 * model's chunk count).
 */
int sfs_json_load_lim(const struct sfs_json_limit *lim, const char *buf,
		      size_t len, size_t flags, json_t **out, char *err,
		      size_t errlen);

#endif /* SFS_JSONLIM_H */
