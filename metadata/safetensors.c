/* SPDX-License-Identifier: MIT */
#include "safetensors.h"

#include "common/util.h"
#include "metadata/jsonlim.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	unsigned int size;
} dtypes[] = {
	{"BOOL", 1},	{"U8", 1},  {"I8", 1},	{"F8_E5M2", 1}, {"F8_E4M3", 1},
	{"F8_E8M0", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},	{"BF16", 2},
	{"I32", 4},	{"U32", 4}, {"F32", 4}, {"F64", 8},	{"I64", 8},
	{"U64", 8},	{"C64", 8},
};

unsigned int sfs_dtype_size(const char *dtype)
{
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (strcmp(dtypes[i].name, dtype) == 0)
			return dtypes[i].size;
	return 0;
}

int sfs_st_tensor_bytes(const uint64_t *shape, uint32_t ndim, unsigned int elem,
			uint64_t *out)
{
	uint64_t n = elem;
	for (uint32_t i = 0; i < ndim; i++) {
		if (shape[i] && n > UINT64_MAX / shape[i])
			return -EOVERFLOW;
		n *= shape[i];
	}
	*out = n;
	return 0;
}

int sfs_st_header_len(const uint8_t *first8, uint64_t file_size,
		      uint64_t *json_len, char *err, size_t errlen)
{
	uint64_t n = 0;

	if (file_size < 8)
		return sfs_fail(err, errlen,
				"file is %" PRIu64 " bytes, too short for the "
				"8-byte header length",
				file_size);
	for (int i = 7; i >= 0; i--)
		n = n << 8 | first8[i];
	if (n > SFS_ST_HEADER_MAX)
		return sfs_fail(err, errlen,
				"header length %" PRIu64
				" exceeds the cap of %u",
				n, SFS_ST_HEADER_MAX);
	if (n < 2)
		return sfs_fail(err, errlen,
				"header length %" PRIu64
				" too short for a JSON "
				"object",
				n);
	if (n > file_size - 8)
		return sfs_fail(err, errlen,
				"header length %" PRIu64
				" runs past the end of "
				"the file (%" PRIu64 " bytes)",
				n, file_size);
	*json_len = n;
	return 0;
}

/* A non-negative JSON integer, as uint64. */
static int json_u64(const json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int parse_tensor(const char *name, json_t *v, uint64_t data_len,
			struct sfs_st_tensor *t, char *err, size_t errlen)
{
	json_t *dt, *shape, *offs;
	unsigned int esz;
	uint64_t bytes;

	if (!*name || strlen(name) > SFS_ST_NAME_MAX)
		return sfs_fail(err, errlen,
				"tensor name of %zu bytes: must be "
				"1..%u",
				strlen(name), SFS_ST_NAME_MAX);
	if (!json_is_object(v))
		return sfs_fail(err, errlen,
				"tensor '%s': entry is not an object", name);
	dt = json_object_get(v, "dtype");
	shape = json_object_get(v, "shape");
	offs = json_object_get(v, "data_offsets");
	if (!json_is_string(dt))
		return sfs_fail(err, errlen,
				"tensor '%s': field 'dtype' missing or not a "
				"string",
				name);
	esz = sfs_dtype_size(json_string_value(dt));
	if (!esz)
		return sfs_fail(err, errlen,
				"tensor '%s': unknown dtype '%.32s'", name,
				json_string_value(dt));
	if (!json_is_array(shape))
		return sfs_fail(err, errlen,
				"tensor '%s': field 'shape' missing or not an "
				"array",
				name);
	if (json_array_size(shape) > SFS_ST_MAX_DIMS)
		return sfs_fail(err, errlen,
				"tensor '%s': shape has %zu dimensions, cap %d",
				name, json_array_size(shape), SFS_ST_MAX_DIMS);
	if (!json_is_array(offs) || json_array_size(offs) != 2)
		return sfs_fail(
			err, errlen,
			"tensor '%s': field 'data_offsets' missing or not "
			"[begin, end]",
			name);
	t->ndim = (uint32_t)json_array_size(shape);
	for (uint32_t i = 0; i < t->ndim; i++)
		if (json_u64(json_array_get(shape, i), &t->shape[i]))
			return sfs_fail(err, errlen,
					"tensor '%s': shape[%u] is not a "
					"non-negative integer",
					name, i);
	if (json_u64(json_array_get(offs, 0), &t->begin) ||
	    json_u64(json_array_get(offs, 1), &t->end))
		return sfs_fail(
			err, errlen,
			"tensor '%s': data_offsets are not non-negative "
			"integers",
			name);
	if (t->begin > t->end)
		return sfs_fail(err, errlen,
				"tensor '%s': data_offsets [%" PRIu64
				", %" PRIu64 "] end before they begin",
				name, t->begin, t->end);
	if (t->end > data_len)
		return sfs_fail(
			err, errlen,
			"tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
			"] run past the data section (%" PRIu64 " bytes)",
			name, t->begin, t->end, data_len);
	if (sfs_st_tensor_bytes(t->shape, t->ndim, esz, &bytes))
		return sfs_fail(err, errlen, "tensor '%s': shape overflows",
				name);
	if (bytes != t->end - t->begin)
		return sfs_fail(err, errlen,
				"tensor '%s': shape x %s is %" PRIu64
				" bytes but data_offsets span %" PRIu64,
				name, json_string_value(dt), bytes,
				t->end - t->begin);
	snprintf(t->dtype, sizeof(t->dtype), "%s", json_string_value(dt));
	t->name = strdup(name);
	return t->name ? 0 : -ENOMEM;
}

static int cmp_tensor(const void *a, const void *b)
{
	const struct sfs_st_tensor *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int check_metadata(json_t *md, char *err, size_t errlen)
{
	const char *k;
	json_t *v;

	if (!json_is_object(md))
		return sfs_fail(err, errlen, "__metadata__ is not an object");
	json_object_foreach (md, k, v) {
		if (!json_is_string(v))
			return sfs_fail(
				err, errlen,
				"__metadata__: value of '%.64s' is not a "
				"string",
				k);
	}
	return 0;
}

/* Sorted by begin: ranges must tile [0, data_len) exactly. */
static int check_tiling(const struct sfs_st_header *h, uint64_t data_len,
			char *err, size_t errlen)
{
	uint64_t at = 0;
	const char *prev = NULL;

	for (size_t i = 0; i < h->ntensors; i++) {
		const struct sfs_st_tensor *t = &h->tensors[i];
		if (t->begin < at)
			return sfs_fail(
				err, errlen,
				"tensors '%s' and '%s' overlap at offset "
				"%" PRIu64,
				prev, t->name, t->begin);
		if (t->begin > at)
			return sfs_fail(err, errlen,
					"gap of %" PRIu64
					" bytes before tensor "
					"'%s' at offset %" PRIu64,
					t->begin - at, t->name, t->begin);
		at = t->end;
		prev = t->name;
	}
	if (at != data_len)
		return sfs_fail(err, errlen,
				"%" PRIu64
				" bytes at the end of the data section "
				"belong to no tensor",
				data_len - at);
	return 0;
}

int sfs_st_parse(const char *json, uint64_t json_len, uint64_t file_size,
		 struct sfs_st_header **out, char *err, size_t errlen)
{
	struct sfs_st_header *h;
	json_t *root, *v;
	const char *k;
	int rc;

	if (json_len > SFS_ST_HEADER_MAX || file_size < 8 ||
	    json_len > file_size - 8)
		return sfs_fail(err, errlen,
				"header length %" PRIu64 " invalid", json_len);
	if (json[0] != '{')
		return sfs_fail(err, errlen, "header does not start with '{'");
	if (sfs_json_load(SFS_JSON_SAFETENSORS, json, (size_t)json_len,
			  JSON_REJECT_DUPLICATES, &root, err, errlen))
		return -EINVAL;
	if (!json_is_object(root)) {
		json_decref(root);
		return sfs_fail(err, errlen, "header is not a JSON object");
	}
	size_t n = json_object_size(root);
	if (n > SFS_ST_MAX_TENSORS + 1) {
		json_decref(root);
		return sfs_fail(err, errlen, "header lists %zu tensors, cap %d",
				n, SFS_ST_MAX_TENSORS);
	}
	h = calloc(1, sizeof(*h));
	if (!h || !(h->tensors = calloc(n ? n : 1, sizeof(h->tensors[0])))) {
		free(h);
		json_decref(root);
		return -ENOMEM;
	}
	h->json_len = json_len;
	h->data_off = 8 + json_len;
	uint64_t data_len = file_size - h->data_off;
	rc = 0;
	json_object_foreach (root, k, v) {
		if (strcmp(k, "__metadata__") == 0) {
			rc = check_metadata(v, err, errlen);
		} else {
			rc = parse_tensor(k, v, data_len,
					  &h->tensors[h->ntensors], err,
					  errlen);
			if (!rc)
				h->ntensors++;
		}
		if (rc)
			break;
	}
	json_decref(root);
	if (!rc) {
		qsort(h->tensors, h->ntensors, sizeof(h->tensors[0]),
		      cmp_tensor);
		rc = check_tiling(h, data_len, err, errlen);
	}
	if (rc) {
		sfs_st_free(h);
		return rc;
	}
	*out = h;
	return 0;
}

void sfs_st_free(struct sfs_st_header *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->ntensors; i++)
		free(h->tensors[i].name);
	free(h->tensors);
	free(h);
}
