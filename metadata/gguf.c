/* SPDX-License-Identifier: MIT */
#include "gguf.h"

#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ggml types by their number in GGUF: elements and bytes per block.
 * Numbers ggml retired (4, 5, 31-33) are absent, so refused. */
static const struct ggml_type {
	uint32_t id;
	const char *name;
	uint32_t block, bytes;
} types[] = {
	{0, "F32", 1, 4},	  {1, "F16", 1, 2},
	{2, "Q4_0", 32, 18},	  {3, "Q4_1", 32, 20},
	{6, "Q5_0", 32, 22},	  {7, "Q5_1", 32, 24},
	{8, "Q8_0", 32, 34},	  {9, "Q8_1", 32, 36},
	{10, "Q2_K", 256, 84},	  {11, "Q3_K", 256, 110},
	{12, "Q4_K", 256, 144},	  {13, "Q5_K", 256, 176},
	{14, "Q6_K", 256, 210},	  {15, "Q8_K", 256, 292},
	{16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
	{18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
	{20, "IQ4_NL", 32, 18},	  {21, "IQ3_S", 256, 110},
	{22, "IQ2_S", 256, 82},	  {23, "IQ4_XS", 256, 136},
	{24, "I8", 1, 1},	  {25, "I16", 1, 2},
	{26, "I32", 1, 4},	  {27, "I64", 1, 8},
	{28, "F64", 1, 8},	  {29, "IQ1_M", 256, 56},
	{30, "BF16", 1, 2},	  {34, "TQ1_0", 256, 54},
	{35, "TQ2_0", 256, 66},
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

/* Metadata value types. */
enum {
	GT_U8,
	GT_I8,
	GT_U16,
	GT_I16,
	GT_U32,
	GT_I32,
	GT_F32,
	GT_BOOL,
	GT_STRING,
	GT_ARRAY,
	GT_U64,
	GT_I64,
	GT_F64,
	GT_COUNT
};
static const uint8_t scalar_size[GT_COUNT] = {1, 1, 2, 2, 4, 4, 4,
					      1, 0, 0, 8, 8, 8};

int sfs_ggml_dtype(const char *name, uint32_t *block, uint32_t *bytes)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (!strcmp(types[i].name, name)) {
			*block = types[i].block;
			*bytes = types[i].bytes;
			return 0;
		}
	return -ENOENT;
}

int sfs_ggml_tensor_bytes(const char *dtype, const uint64_t *shape,
			  uint32_t ndim, uint64_t *out)
{
	uint32_t block, bytes;
	if (sfs_ggml_dtype(dtype, &block, &bytes))
		return -ENOENT;
	/* Blocks run along the innermost (last, row-major) dimension. */
	uint64_t inner = ndim ? shape[ndim - 1] : 1;
	if (inner % block)
		return -EINVAL;
	/* The outer dimensions times a block's bytes, times the blocks of
	 * a row. */
	uint64_t n, blocks = inner / block;
	if (sfs_st_tensor_bytes(shape, ndim ? ndim - 1 : 0, bytes, &n) ||
	    (blocks && n > UINT64_MAX / blocks))
		return -EOVERFLOW;
	*out = n * blocks;
	return 0;
}

/* A cursor over the header: every read is checked against the end. */
struct rd {
	const uint8_t *p;
	uint64_t pos, end;
	uint64_t whole; /* what a header may span: the file, capped */
	int partial;	/* end is where the caller's copy ends, not whole */
	int ran_out;	/* a read went past it that more of it would serve */
	char *err;
	size_t errlen;
};

/* @n items of @size bytes from the cursor run past its end.  Past a
 * partial copy but within what the header may span: more of the copy
 * would do (ran_out); past that, no copy would (a hostile count is
 * refused at once, never read further for). */
static int past(struct rd *r, uint64_t n, uint64_t size)
{
	if (n <= (r->end - r->pos) / size)
		return 0;
	if (r->partial && r->pos <= r->whole && n <= (r->whole - r->pos) / size)
		r->ran_out = 1;
	return 1;
}

static int need(struct rd *r, uint64_t n, const char *what)
{
	if (past(r, n, 1))
		return sfs_fail(r->err, r->errlen,
				"%s at byte %" PRIu64 ": needs %" PRIu64
				" bytes, the file ends %" PRIu64 " bytes later",
				what, r->pos, n, r->end - r->pos);
	return 0;
}

static uint64_t le(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;
	for (unsigned int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static int get(struct rd *r, unsigned int n, uint64_t *v, const char *what)
{
	if (need(r, n, what))
		return -EINVAL;
	*v = le(r->p + r->pos, n);
	r->pos += n;
	return 0;
}

/* A GGUF string: u64 length, bytes (no NUL).  *s points into the file. */
static int get_str(struct rd *r, uint64_t max, const char **s, uint64_t *len,
		   const char *what)
{
	if (get(r, 8, len, what))
		return -EINVAL;
	if (*len > max)
		return sfs_fail(r->err, r->errlen,
				"%s: string of %" PRIu64
				" bytes (at most %" PRIu64 ")",
				what, *len, max);
	if (need(r, *len, what))
		return -EINVAL;
	*s = (const char *)r->p + r->pos;
	r->pos += *len;
	return 0;
}

static int skip_value(struct rd *r, uint32_t type, int depth, const char *key)
{
	uint64_t v, n;
	const char *s;

	if (type >= GT_COUNT)
		return sfs_fail(r->err, r->errlen,
				"metadata '%.64s': unknown value type %" PRIu32,
				key, type);
	if (type == GT_STRING)
		return get_str(r, SFS_GGUF_STR_MAX, &s, &n, key);
	if (type != GT_ARRAY)
		return get(r, scalar_size[type], &v, key);
	if (depth >= SFS_GGUF_ARRAY_DEPTH)
		return sfs_fail(
			r->err, r->errlen,
			"metadata '%.64s': arrays nested deeper than %d", key,
			SFS_GGUF_ARRAY_DEPTH);
	uint64_t et;
	if (get(r, 4, &et, key) || get(r, 8, &n, key))
		return -EINVAL;
	if (et >= GT_COUNT)
		return sfs_fail(
			r->err, r->errlen,
			"metadata '%.64s': array of unknown type %" PRIu64, key,
			et);
	if (et != GT_STRING && et != GT_ARRAY) {
		/* Fixed size: check the whole array at once. */
		if (past(r, n, scalar_size[et]))
			return sfs_fail(
				r->err, r->errlen,
				"metadata '%.64s': array of %" PRIu64
				" elements runs past the end of the file",
				key, n);
		r->pos += n * scalar_size[et];
		return 0;
	}
	/* Each element takes at least 8 bytes: a bound before the loop. */
	if (past(r, n, 8))
		return sfs_fail(r->err, r->errlen,
				"metadata '%.64s': array of %" PRIu64
				" elements runs past the end of the file",
				key, n);
	for (uint64_t i = 0; i < n; i++)
		if (skip_value(r, (uint32_t)et, depth + 1, key))
			return -EINVAL;
	return 0;
}

static int by_off(const void *a, const void *b)
{
	const struct sfs_gguf_tensor *x =
		*(const struct sfs_gguf_tensor *const *)a;
	const struct sfs_gguf_tensor *y =
		*(const struct sfs_gguf_tensor *const *)b;
	return x->off < y->off ? -1 : x->off > y->off;
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(const struct sfs_gguf_tensor *const *)a)->name,
		      (*(const struct sfs_gguf_tensor *const *)b)->name);
}

static int read_kv(struct rd *r, struct sfs_gguf *g)
{
	for (uint64_t i = 0; i < g->nkv; i++) {
		const char *k;
		uint64_t kl, type;
		char key[80];
		if (get_str(r, 65535, &k, &kl, "metadata key"))
			return -EINVAL;
		snprintf(key, sizeof(key), "%.*s", (int)(kl < 64 ? kl : 64), k);
		if (kl == 0 || memchr(k, '\0', kl))
			return sfs_fail(r->err, r->errlen,
					"metadata %" PRIu64 ": key is empty or "
					"holds a NUL",
					i);
		if (get(r, 4, &type, key))
			return -EINVAL;
		if (kl == 17 && !memcmp(k, "general.alignment", 17)) {
			uint64_t a;
			if (type != GT_U32)
				return sfs_fail(
					r->err, r->errlen,
					"general.alignment: type %" PRIu64
					", must be uint32 (4)",
					type);
			if (get(r, 4, &a, key))
				return -EINVAL;
			if (a == 0 || (a & (a - 1)) || a > (1u << 20))
				return sfs_fail(
					r->err, r->errlen,
					"general.alignment: %" PRIu64
					" is not a power of two up to 1 MiB",
					a);
			g->alignment = (uint32_t)a;
			continue;
		}
		if (skip_value(r, (uint32_t)type, 0, key))
			return -EINVAL;
	}
	return 0;
}

static int read_tensor(struct rd *r, struct sfs_gguf_tensor *t, uint64_t i)
{
	const char *name;
	uint64_t nl, nd, type, off;
	char what[96];

	snprintf(what, sizeof(what), "tensor %" PRIu64 " name", i);
	if (get_str(r, SFS_GGUF_NAME_MAX, &name, &nl, what))
		return -EINVAL;
	if (nl == 0 || memchr(name, '\0', nl))
		return sfs_fail(
			r->err, r->errlen,
			"tensor %" PRIu64 ": name is empty or holds a NUL", i);
	memcpy(t->name, name, nl);
	t->name[nl] = '\0';
	if (get(r, 4, &nd, t->name))
		return -EINVAL;
	if (nd == 0 || nd > SFS_GGUF_MAX_DIMS)
		return sfs_fail(r->err, r->errlen,
				"tensor '%s': %" PRIu64 " dimensions (1 to %d)",
				t->name, nd, SFS_GGUF_MAX_DIMS);
	t->ndim = (uint32_t)nd;
	for (uint64_t d = 0; d < nd; d++) {
		uint64_t ne;
		if (get(r, 8, &ne, t->name))
			return -EINVAL;
		if (ne > INT64_MAX)
			return sfs_fail(r->err, r->errlen,
					"tensor '%s': dimension %" PRIu64
					" is negative",
					t->name, d);
		t->shape[nd - 1 - d] = ne; /* ne[0] is the innermost */
	}
	if (get(r, 4, &type, t->name) || get(r, 8, &off, t->name))
		return -EINVAL;
	const struct ggml_type *ty = NULL;
	for (size_t k = 0; k < NTYPES; k++)
		if (types[k].id == type)
			ty = &types[k];
	if (!ty)
		return sfs_fail(r->err, r->errlen,
				"tensor '%s': unknown ggml type %" PRIu64,
				t->name, type);
	snprintf(t->dtype, sizeof(t->dtype), "%s", ty->name);
	int rc = sfs_ggml_tensor_bytes(t->dtype, t->shape, t->ndim, &t->len);
	if (rc == -EINVAL)
		return sfs_fail(r->err, r->errlen,
				"tensor '%s': %s rows of %" PRIu64
				" elements are not whole blocks of %" PRIu32,
				t->name, ty->name, t->shape[nd - 1], ty->block);
	if (rc)
		return sfs_fail(r->err, r->errlen,
				"tensor '%s': size overflows", t->name);
	t->off = off; /* relative to the data section until the end */
	return 0;
}

int sfs_gguf_parse(const uint8_t *buf, uint64_t size, struct sfs_gguf **out,
		   char *err, size_t errlen)
{
	return sfs_gguf_parse_head(buf, size, size, out, err, errlen);
}

int sfs_gguf_parse_head(const uint8_t *buf, uint64_t head_len, uint64_t size,
			struct sfs_gguf **out, char *err, size_t errlen)
{
	uint64_t whole = SFS_MIN(size, (uint64_t)SFS_GGUF_HEADER_MAX);
	struct rd r = {.p = buf,
		       .pos = 0,
		       .end = SFS_MIN(head_len, size),
		       .whole = whole,
		       .partial = head_len < whole,
		       .err = err,
		       .errlen = errlen};
	struct sfs_gguf *g = calloc(1, sizeof(*g));
	struct sfs_gguf_tensor **order = NULL;
	uint64_t v, nt;
	int rc = -EINVAL;

	if (!g)
		return -ENOMEM;
	g->alignment = 32;
	if (r.end < 24) {
		r.ran_out = r.partial;
		sfs_fail(err, errlen,
			 "%" PRIu64 " bytes: too short for a GGUF "
			 "header (24)",
			 size);
		goto out;
	}
	if (memcmp(buf, "GGUF", 4)) {
		sfs_fail(err, errlen, "magic: not \"GGUF\"");
		goto out;
	}
	r.pos = 4;
	get(&r, 4, &v, "version");
	if (v != SFS_GGUF_VERSION) {
		sfs_fail(err, errlen,
			 "version %" PRIu64 ": this build reads %d", v,
			 SFS_GGUF_VERSION);
		goto out;
	}
	g->version = (uint32_t)v;
	get(&r, 8, &nt, "tensor count");
	get(&r, 8, &g->nkv, "metadata count");
	if (nt > SFS_GGUF_MAX_TENSORS) {
		sfs_fail(err, errlen, "tensor count %" PRIu64 " (at most %d)",
			 nt, SFS_GGUF_MAX_TENSORS);
		goto out;
	}
	if (g->nkv > SFS_GGUF_MAX_KV) {
		sfs_fail(err, errlen, "metadata count %" PRIu64 " (at most %d)",
			 g->nkv, SFS_GGUF_MAX_KV);
		goto out;
	}
	/* The header is read from the file but may not exceed the cap. */
	if (r.end > SFS_GGUF_HEADER_MAX)
		r.end = SFS_GGUF_HEADER_MAX;
	if ((rc = read_kv(&r, g)))
		goto out;
	rc = -ENOMEM;
	if (!(g->tensors = calloc(nt ? nt : 1, sizeof(*g->tensors))) ||
	    !(order = malloc((nt ? nt : 1) * sizeof(*order))))
		goto out;
	rc = 0;
	for (uint64_t i = 0; i < nt && !rc; i++) {
		rc = read_tensor(&r, &g->tensors[i], i);
		order[i] = &g->tensors[i];
	}
	if (rc)
		goto out;
	g->ntensors = (size_t)nt;
	rc = -EINVAL;
	uint64_t a = g->alignment;
	g->data_off = (r.pos + a - 1) / a * a;
	if (g->data_off > size) {
		sfs_fail(err, errlen,
			 "data section at byte %" PRIu64 " is past the end of "
			 "the file (%" PRIu64 " bytes)",
			 g->data_off, size);
		goto out;
	}
	qsort(order, g->ntensors, sizeof(*order), by_name);
	for (size_t i = 1; i < g->ntensors; i++)
		if (!strcmp(order[i - 1]->name, order[i]->name)) {
			sfs_fail(err, errlen, "tensor '%s': listed twice",
				 order[i]->name);
			goto out;
		}
	for (size_t i = 0; i < g->ntensors; i++) {
		struct sfs_gguf_tensor *t = &g->tensors[i];
		if (t->off % a) {
			sfs_fail(err, errlen,
				 "tensor '%s': offset %" PRIu64
				 " is not a multiple of the alignment %" PRIu64,
				 t->name, t->off, a);
			goto out;
		}
		if (t->off > size - g->data_off ||
		    t->len > size - g->data_off - t->off) {
			sfs_fail(
				err, errlen,
				"tensor '%s': bytes [%" PRIu64 ", +%" PRIu64
				") of the data section run past the end of the "
				"file",
				t->name, t->off, t->len);
			goto out;
		}
		t->off += g->data_off;
	}
	qsort(order, g->ntensors, sizeof(*order), by_off);
	for (size_t i = 1; i < g->ntensors; i++)
		if (order[i]->off < order[i - 1]->off + order[i - 1]->len) {
			sfs_fail(err, errlen, "tensors '%s' and '%s' overlap",
				 order[i - 1]->name, order[i]->name);
			goto out;
		}
	rc = 0;
out:
	free(order);
	if (rc) {
		sfs_gguf_free(g);
		/* Past the caller's copy: more of it, then again. */
		return r.ran_out ? -EAGAIN : rc;
	}
	*out = g;
	return 0;
}

void sfs_gguf_free(struct sfs_gguf *g)
{
	if (!g)
		return;
	free(g->tensors);
	free(g);
}
