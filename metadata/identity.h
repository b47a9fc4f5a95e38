/* SPDX-License-Identifier: MIT */
/*
 * identity.h - what a published model is, for matching a replica to a
 * source with exactly the layout it needs: model, revision, generation,
 * dtype, quantization (method and parameters), layout, parallelism and
 * framework.  docs/identity.md lists the keys.
 *
 * The canonical form is JSON with sorted keys and no blanks; its
 * XXH3-64, as 12 hex digits, is the short id shown in manifests and in
 * status.  Decoding treats the JSON as hostile and names the field.
 * Not thread safe per object; pure functions otherwise.
 */
#ifndef SFS_IDENTITY_H
#define SFS_IDENTITY_H

#include <stddef.h>
#include <stdint.h>

#define SFS_ID_STR_MAX 128 /* bytes of a string value ... */
#define SFS_ID_MODEL_MAX                                                       \
	256			/* ... but the model's: a model name, one
				   path component of up to 255 bytes */
#define SFS_ID_PARAMS_MAX 16384 /* bytes of quant_params, canonical */
#define SFS_ID_SHORT 12		/* hex digits of the short id */
#define SFS_ID_MAX_PARALLEL 65536

struct sfs_identity {
	char model[SFS_ID_MODEL_MAX];  /* UTF-8, no '/' or control bytes */
	char revision[SFS_ID_STR_MAX]; /* "" when not known */
	uint64_t generation;
	char dtype[SFS_ID_STR_MAX];  /* e.g. bfloat16; "" when not known */
	char quant[SFS_ID_STR_MAX];  /* fp8, awq, gptq, ...; "none" */
	char layout[SFS_ID_STR_MAX]; /* checkpoint | processed */
	uint64_t layout_version;     /* processed layouts: which */
	uint64_t tp_size, tp_rank, pp_size, pp_rank, ep_size, ep_rank;
	char framework[SFS_ID_STR_MAX]; /* sglang, vllm, ...; "none" */
	char *quant_params; /* canonical JSON object, owned; NULL: {} */
};

/* sfs_identity_init - the defaults: quant none, layout checkpoint,
 * sizes 1, ranks 0, framework none, no params. */
void sfs_identity_init(struct sfs_identity *id, const char *model,
		       uint64_t generation);

/* sfs_identity_clear - free what it owns; init again before reuse. */
void sfs_identity_clear(struct sfs_identity *id);

/* sfs_identity_copy - *dst (initialised or cleared) = @src.  Returns 0
 * or -ENOMEM. */
int sfs_identity_copy(struct sfs_identity *dst, const struct sfs_identity *src);

/*
 * sfs_identity_set - set key @key (one of docs/identity.md's, e.g.
 * "quant", "tp_rank") from text @value.  Returns 0, or -EINVAL with a
 * line in @err naming the key (unknown key, not a number, too long).
 */
int sfs_identity_set(struct sfs_identity *id, const char *key,
		     const char *value, char *err, size_t errlen);

/*
 * sfs_identity_set_params - quantization parameters from JSON object
 * text (canonicalised and kept).  Returns 0, -EINVAL (not an object, too
 * big: @err says), -ENOMEM.
 */
int sfs_identity_set_params(struct sfs_identity *id, const char *json,
			    char *err, size_t errlen);

/*
 * sfs_identity_check - 0 if consistent (ranks below sizes, layout one
 * of checkpoint/processed, processed has a version), else -EINVAL with
 * @err naming the field.
 */
int sfs_identity_check(const struct sfs_identity *id, char *err, size_t errlen);

/* sfs_identity_canonical - *out [new, free()]: the canonical JSON.
 * Returns 0 or -ENOMEM. */
int sfs_identity_canonical(const struct sfs_identity *id, char **out);

/*
 * sfs_identity_differs - 0 when @a and @b are the same identity but for
 * the generation, else 1 with @why naming the first field that differs
 * ("identity.quant: \"fp8\" here, \"none\" there").
 */
int sfs_identity_differs(const struct sfs_identity *a,
			 const struct sfs_identity *b, char *why, size_t len);

/* sfs_identity_short_id - the 12 hex digit id into @out (13 bytes).
 * Returns 0 or -ENOMEM. */
int sfs_identity_short_id(const struct sfs_identity *id, char out[13]);

/*
 * sfs_identity_from_json - read JSON object text @json into @id
 * (initialised).  Every key must be known and of its type; missing keys
 * keep their defaults.  Returns 0, or -EINVAL with @err naming the
 * field ("identity.tp_rank: ..."), -ENOMEM.
 */
int sfs_identity_from_json(struct sfs_identity *id, const char *json,
			   size_t len, char *err, size_t errlen);

/*
 * sfs_layout_is - 1 if tensor layout @layout ("processed",
 * "processed:fp8-block128", ...) is of kind @kind: the part before the
 * first ':' equals it.  Else 0.
 */
int sfs_layout_is(const char *layout, const char *kind);

/* A --require list: key=value pairs, ANDed. */
struct sfs_require;

/*
 * sfs_require_parse - parse "key=value[,key=value...]"; *out [new].  An
 * unknown key, a missing '=', an empty value or a number that is not
 * one: -EINVAL with @err naming it.
 */
int sfs_require_parse(const char *spec, struct sfs_require **out, char *err,
		      size_t errlen);

void sfs_require_free(struct sfs_require *r);

/*
 * sfs_require_match - 1 if @id meets every requirement of @r (NULL: no
 * requirement), else 0 with @why saying which field differs and how
 * ("quant is fp8, required awq").
 */
int sfs_require_match(const struct sfs_require *r,
		      const struct sfs_identity *id, char *why, size_t len);

/* sfs_require_value - the value @r requires for @key, or NULL.
 * [borrowed] */
const char *sfs_require_value(const struct sfs_require *r, const char *key);

#endif /* SFS_IDENTITY_H */
