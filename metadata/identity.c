/* SPDX-License-Identifier: MIT */
#include "identity.h"

#include "common/util.h"
#include "metadata/jsonlim.h"
#include "common/xxh.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum key_type { KEY_STR, KEY_U64 };

static const struct id_key {
	const char *name;
	enum key_type type;
	size_t off;
} keys[] = {
#define S(k)                                                                   \
	{                                                                      \
#k, KEY_STR, offsetof(struct sfs_identity, k)                  \
	}
#define U(k)                                                                   \
	{                                                                      \
#k, KEY_U64, offsetof(struct sfs_identity, k)                  \
	}
	S(model),   S(revision),       U(generation), S(dtype),	    S(quant),
	S(layout),  U(layout_version), U(tp_size),    U(tp_rank),   U(pp_size),
	U(pp_rank), U(ep_size),	       U(ep_rank),    S(framework),
#undef S
#undef U
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))
#define PARAMS_KEY "quant_params"

static const struct id_key *find_key(const char *name)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (!strcmp(keys[i].name, name))
			return &keys[i];
	return NULL;
}

static char *str_at(struct sfs_identity *id, const struct id_key *k)
{
	return (char *)id + k->off;
}

static uint64_t *u64_at(struct sfs_identity *id, const struct id_key *k)
{
	return (uint64_t *)(void *)((char *)id + k->off);
}

static const char *key_list(void)
{
	static char buf[256];
	if (!buf[0])
		for (size_t i = 0, o = 0; i < NKEYS; i++)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s",
					      i ? ", " : "", keys[i].name);
	return buf;
}

void sfs_identity_init(struct sfs_identity *id, const char *model,
		       uint64_t generation)
{
	memset(id, 0, sizeof(*id));
	snprintf(id->model, sizeof(id->model), "%s", model ? model : "");
	id->generation = generation;
	strcpy(id->quant, "none");
	strcpy(id->layout, "checkpoint");
	strcpy(id->framework, "none");
	id->tp_size = id->pp_size = id->ep_size = 1;
}

void sfs_identity_clear(struct sfs_identity *id)
{
	if (!id)
		return;
	free(id->quant_params);
	id->quant_params = NULL;
}

int sfs_identity_copy(struct sfs_identity *dst, const struct sfs_identity *src)
{
	free(dst->quant_params);
	*dst = *src;
	dst->quant_params = NULL;
	if (src->quant_params &&
	    !(dst->quant_params = strdup(src->quant_params)))
		return -ENOMEM;
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (!*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

/* Printable ASCII without '"', '\\', ',' and '=': it goes on command
 * lines and in status lines. */
static int str_ok(const char *s)
{
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e || strchr("\"\\,=", *s))
			return 0;
	return 1;
}

static const char *value_rule(const struct id_key *k)
{
	return k->off == offsetof(struct sfs_identity, model)
		       ? "0-255 bytes of UTF-8 without '/' or control "
			 "characters"
		       : "0-127 printable characters without blanks, quotes, "
			 "',' or '='";
}

/* @v (@n bytes) fits @k: the model a model name (UTF-8 without control
 * bytes or '/', below SFS_ID_MODEL_MAX: what a manifest's name may be),
 * any other string str_ok below SFS_ID_STR_MAX. */
static int value_ok(const struct id_key *k, const char *v, size_t n)
{
	if (strlen(v) != n)
		return 0;
	if (k->off == offsetof(struct sfs_identity, model))
		return n < SFS_ID_MODEL_MAX && sfs_unprintable(v, n) == n &&
		       !strchr(v, '/');
	return n < SFS_ID_STR_MAX && str_ok(v);
}

int sfs_identity_set(struct sfs_identity *id, const char *key,
		     const char *value, char *err, size_t errlen)
{
	const struct id_key *k = find_key(key);
	if (!strcmp(key, PARAMS_KEY))
		return sfs_identity_set_params(id, value, err, errlen);
	if (!k)
		return sfs_fail(err, errlen,
				"unknown identity key '%.64s' (known: %s)", key,
				key_list());
	if (k->type == KEY_U64) {
		if (parse_u64(value, u64_at(id, k)))
			return sfs_fail(err, errlen,
					"identity %s: '%.64s' is not a "
					"non-negative integer",
					key, value);
		return 0;
	}
	if (!value_ok(k, value, strlen(value)))
		return sfs_fail(err, errlen, "identity %s: '%.64s' is not %s",
				key, value, value_rule(k));
	strcpy(str_at(id, k), value);
	return 0;
}

static int set_params_json(struct sfs_identity *id, json_t *o, char *err,
			   size_t errlen)
{
	if (!json_is_object(o))
		return sfs_fail(err, errlen,
				"identity.quant_params: not an object");
	char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text)
		return -ENOMEM;
	if (strlen(text) > SFS_ID_PARAMS_MAX) {
		free(text);
		return sfs_fail(err, errlen,
				"identity.quant_params: more than %d bytes",
				SFS_ID_PARAMS_MAX);
	}
	free(id->quant_params);
	id->quant_params = text;
	return 0;
}

int sfs_identity_set_params(struct sfs_identity *id, const char *json,
			    char *err, size_t errlen)
{
	if (strlen(json) > 4 * SFS_ID_PARAMS_MAX)
		return sfs_fail(err, errlen,
				"identity.quant_params: more than %d bytes",
				SFS_ID_PARAMS_MAX);
	json_t *o;
	char why[256];
	if (sfs_json_load(SFS_JSON_IDENTITY, json, strlen(json),
			  JSON_REJECT_DUPLICATES, &o, why, sizeof(why)))
		return sfs_fail(err, errlen, "identity.quant_params: %s", why);
	int rc = set_params_json(id, o, err, errlen);
	json_decref(o);
	return rc;
}

int sfs_identity_check(const struct sfs_identity *id, char *err, size_t errlen)
{
	static const char *const names[] = {"tp", "pp", "ep"};
	const uint64_t sz[] = {id->tp_size, id->pp_size, id->ep_size};
	const uint64_t rk[] = {id->tp_rank, id->pp_rank, id->ep_rank};

	if (!id->model[0])
		return sfs_fail(err, errlen, "identity.model: empty");
	if (strcmp(id->layout, "checkpoint") && strcmp(id->layout, "processed"))
		return sfs_fail(
			err, errlen,
			"identity.layout: '%s' is neither checkpoint nor "
			"processed",
			id->layout);
	if (!strcmp(id->layout, "processed") && id->layout_version == 0)
		return sfs_fail(err, errlen,
				"identity.layout_version: a processed layout "
				"needs a version (1 or more)");
	for (int i = 0; i < 3; i++) {
		if (sz[i] == 0 || sz[i] > SFS_ID_MAX_PARALLEL)
			return sfs_fail(err, errlen,
					"identity.%s_size: %" PRIu64
					" is not 1..%d",
					names[i], sz[i], SFS_ID_MAX_PARALLEL);
		if (rk[i] >= sz[i])
			return sfs_fail(err, errlen,
					"identity.%s_rank: %" PRIu64
					" is not below %s_size %" PRIu64,
					names[i], rk[i], names[i], sz[i]);
	}
	return 0;
}

static json_t *to_json(const struct sfs_identity *id)
{
	json_t *o = json_object();
	int bad = !o;
	for (size_t i = 0; i < NKEYS && !bad; i++) {
		const struct id_key *k = &keys[i];
		struct sfs_identity *w = (struct sfs_identity *)id;
		json_t *v = k->type == KEY_STR
				    ? json_string(str_at(w, k))
				    : json_integer((json_int_t)*u64_at(w, k));
		bad = json_object_set_new(o, k->name, v);
	}
	json_t *p = !bad && id->quant_params
			    ? json_loads(id->quant_params, 0, NULL)
			    : json_object();
	if (bad || !p || json_object_set_new(o, PARAMS_KEY, p)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int sfs_identity_canonical(const struct sfs_identity *id, char **out)
{
	json_t *o = to_json(id);
	if (!o)
		return -ENOMEM;
	*out = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return *out ? 0 : -ENOMEM;
}

int sfs_identity_differs(const struct sfs_identity *a,
			 const struct sfs_identity *b, char *why, size_t len)
{
	json_t *x = to_json(a), *y = to_json(b), *v;
	const char *k;
	int rc = 0;
	if (!x || !y) {
		json_decref(x);
		json_decref(y);
		snprintf(why, len, "identity: out of memory");
		return 1;
	}
	json_object_del(x, "generation");
	json_object_del(y, "generation");
	/* Keys in the same order on both sides: the first that differs. */
	json_object_foreach (x, k, v) {
		json_t *w = json_object_get(y, k);
		if (w && json_equal(v, w))
			continue;
		char *sv = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
		char *sw = w ? json_dumps(w, JSON_ENCODE_ANY | JSON_COMPACT)
			     : NULL;
		snprintf(why, len, "identity.%s: %.64s here, %.64s there", k,
			 sv ? sv : "?", sw ? sw : "none");
		free(sv);
		free(sw);
		rc = 1;
		break;
	}
	json_decref(x);
	json_decref(y);
	return rc;
}

int sfs_identity_short_id(const struct sfs_identity *id, char out[13])
{
	char *c;
	if (sfs_identity_canonical(id, &c))
		return -ENOMEM;
	uint64_t h = XXH3_64bits(c, strlen(c));
	free(c);
	snprintf(out, 13, "%012" PRIx64, h >> 16);
	return 0;
}

int sfs_identity_from_json(struct sfs_identity *id, const char *json,
			   size_t len, char *err, size_t errlen)
{
	json_t *o;
	const char *k;
	json_t *v;
	int rc = 0;

	if (sfs_json_load(SFS_JSON_IDENTITY, json, len, JSON_REJECT_DUPLICATES,
			  &o, err, errlen))
		return -EINVAL;
	if (!json_is_object(o))
		rc = sfs_fail(err, errlen, "identity: not an object");
	json_object_foreach (o, k, v) {
		if (rc)
			break;
		if (!strcmp(k, PARAMS_KEY)) {
			rc = set_params_json(id, v, err, errlen);
			continue;
		}
		const struct id_key *key = find_key(k);
		if (!key) {
			rc = sfs_fail(err, errlen,
				      "identity.%.64s: unknown key", k);
		} else if (key->type == KEY_U64) {
			if (!json_is_integer(v) || json_integer_value(v) < 0)
				rc = sfs_fail(err, errlen,
					      "identity.%s: not a non-negative "
					      "integer",
					      k);
			else
				*u64_at(id, key) =
					(uint64_t)json_integer_value(v);
		} else if (!json_is_string(v) ||
			   !value_ok(key, json_string_value(v),
				     json_string_length(v))) {
			rc = sfs_fail(err, errlen,
				      "identity.%s: not a string of %s", k,
				      value_rule(key));
		} else {
			strcpy(str_at(id, key), json_string_value(v));
		}
	}
	json_decref(o);
	return rc ? rc : sfs_identity_check(id, err, errlen);
}

int sfs_layout_is(const char *layout, const char *kind)
{
	size_t n = strcspn(layout, ":");
	return strlen(kind) == n && !strncmp(layout, kind, n);
}

struct sfs_require {
	size_t n;
	struct req {
		const struct id_key *key;
		char *value;
		uint64_t num;
	} r[NKEYS];
};

void sfs_require_free(struct sfs_require *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		free(r->r[i].value);
	free(r);
}

int sfs_require_parse(const char *spec, struct sfs_require **out, char *err,
		      size_t errlen)
{
	struct sfs_require *r = calloc(1, sizeof(*r));
	char *dup = strdup(spec), *save = NULL, *tok;
	int rc = 0;

	if (!r || !dup) {
		free(r);
		free(dup);
		return -ENOMEM;
	}
	for (tok = strtok_r(dup, ",", &save); tok && !rc;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq || eq == tok || !eq[1]) {
			rc = sfs_fail(err, errlen,
				      "--require: '%.64s' is not key=value",
				      tok);
			break;
		}
		*eq = '\0';
		const struct id_key *k = find_key(tok);
		if (!k) {
			rc = sfs_fail(
				err, errlen,
				"--require: unknown key '%.64s' (known: %s)",
				tok, key_list());
			break;
		}
		for (size_t i = 0; i < r->n; i++)
			if (r->r[i].key == k)
				rc = sfs_fail(err, errlen,
					      "--require: %s given twice", tok);
		struct req *q = &r->r[r->n];
		if (!rc && k->type == KEY_U64 && parse_u64(eq + 1, &q->num))
			rc = sfs_fail(
				err, errlen,
				"--require: %s=%.64s is not a non-negative "
				"integer",
				tok, eq + 1);
		if (rc)
			break;
		q->key = k;
		if (!(q->value = strdup(eq + 1))) {
			rc = -ENOMEM;
			break;
		}
		r->n++;
	}
	if (!rc && r->n == 0)
		rc = sfs_fail(err, errlen, "--require: empty");
	free(dup);
	if (rc) {
		sfs_require_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

int sfs_require_match(const struct sfs_require *r,
		      const struct sfs_identity *id, char *why, size_t len)
{
	struct sfs_identity *w = (struct sfs_identity *)id;
	for (size_t i = 0; r && i < r->n; i++) {
		const struct req *q = &r->r[i];
		if (q->key->type == KEY_U64) {
			uint64_t have = *u64_at(w, q->key);
			if (have != q->num) {
				snprintf(why, len,
					 "%s is %" PRIu64 ", required %" PRIu64,
					 q->key->name, have, q->num);
				return 0;
			}
		} else if (strcmp(str_at(w, q->key), q->value)) {
			snprintf(why, len, "%s is '%s', required '%s'",
				 q->key->name, str_at(w, q->key), q->value);
			return 0;
		}
	}
	return 1;
}

const char *sfs_require_value(const struct sfs_require *r, const char *key)
{
	for (size_t i = 0; r && i < r->n; i++)
		if (!strcmp(r->r[i].key->name, key))
			return r->r[i].value;
	return NULL;
}
