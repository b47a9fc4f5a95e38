/* SPDX-License-Identifier: MIT */
/*
 * memgen.c - a generation of an in-memory model (libseedfs): tensors in
 * the caller's memory are presented as safetensors shards synthesized
 * deterministically, with model.safetensors.index.json, beside small
 * files given as bytes.
 *
 * Shard k of n is "model-0000k-of-0000n.safetensors": u64 N, N bytes of
 * JSON ("__metadata__" first: format and the identity without its
 * generation; then the
 * tensors in the order they were added, data offsets contiguous), padded
 * with blanks so the data starts 8-byte aligned, then each tensor's
 * bytes.  The header is inline in the manifest; each tensor's bytes are
 * a region registered over the caller's memory (remote read only).
 */
#include "seed/publish.h"

#include "common/log.h"
#include "common/util.h"
#include "metadata/manifest.h"
#include "metadata/safetensors.h"
#include "seed/seed.h"
#include "common/xxh.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The header of a shard holding tensors [a, b): *out [new]. */
static int shard_header(const struct seed_mem *mm, size_t a, size_t b,
			const char *id_json, uint8_t **out, size_t *len)
{
	json_t *o = json_object(), *meta;
	uint64_t off = 0;
	int bad = !o;

	meta = json_pack("{s:s,s:s}", "format", "pt", "seedfs.identity",
			 id_json);
	bad = bad || !meta || json_object_set_new(o, "__metadata__", meta);
	for (size_t i = a; i < b && !bad; i++) {
		const struct seed_mem_tensor *t = &mm->tensors[i];
		json_t *shape = json_array();
		for (uint32_t d = 0; shape && d < t->ndim; d++)
			json_array_append_new(
				shape, json_integer((json_int_t)t->shape[d]));
		json_t *e =
			json_pack("{s:s,s:o*,s:[I,I]}", "dtype", t->dtype,
				  "shape", shape, "data_offsets",
				  (json_int_t)off, (json_int_t)(off + t->len));
		bad = !e || json_object_set_new(o, t->name, e);
		off += t->len;
	}
	char *text =
		bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!text)
		return -ENOMEM;
	size_t n = strlen(text), pad = (8 - (8 + n) % 8) % 8;
	uint8_t *h = malloc(8 + n + pad);
	if (!h) {
		free(text);
		return -ENOMEM;
	}
	uint64_t hl = n + pad;
	for (int i = 0; i < 8; i++)
		h[i] = (uint8_t)(hl >> (8 * i));
	memcpy(h + 8, text, n);
	memset(h + 8 + n, ' ', pad);
	free(text);
	*out = h;
	*len = 8 + n + pad;
	return 0;
}

/* The identity for shard headers: canonical, without the generation,
 * so that a shard whose tensors did not change is byte-identical in the
 * next generation (replicas keep its inode and pages).  [new] */
static char *identity_sans_generation(const struct sfs_identity *id)
{
	char *c = NULL, *out = NULL;
	if (sfs_identity_canonical(id, &c))
		return NULL;
	json_t *o = json_loads(c, 0, NULL);
	free(c);
	if (o && !json_object_del(o, "generation"))
		out = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return out;
}

/* Shards hold consecutive tensors, up to shard_max bytes of data (at
 * least one tensor): the end of the one starting at tensor @a, and its
 * data bytes in *bytes. */
static size_t shard_end(const struct seed_mem *mm, size_t a, uint64_t *bytes)
{
	size_t b = a;
	uint64_t acc = 0;
	while (b < mm->ntensors &&
	       (b == a || !acc || acc + mm->tensors[b].len <= mm->shard_max))
		acc += mm->tensors[b++].len;
	*bytes = acc;
	return b;
}

static int add_inline_file(struct seed_gen *s, uint32_t shift, int sha256,
			   const char *path, const void *data, size_t len)
{
	size_t fidx;
	struct seed_sums ss;
	int rc = sfs_manifest_add_file(s->m, path, &fidx);
	if (!rc && len)
		rc = sfs_manifest_add_inline(s->m, fidx, data, len);
	if (!rc && !(rc = seed_sums_start(&ss, shift, sha256))) {
		rc = seed_sums_add(&ss, len ? data : "", len);
		if (!rc)
			rc = seed_sums_finish(&ss, s->m, fidx);
		seed_sums_free(&ss);
	}
	if (!rc)
		s->total_bytes += len;
	return rc;
}

/* Directories of @path, parents first, unless listed already. */
static int add_parents(struct seed_gen *s, const char *path)
{
	char buf[SFS_MF_PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = strchr(buf, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		int seen = 0;
		for (size_t i = 0; i < s->m->ndirs && !seen; i++)
			seen = !strcmp(s->m->dirs[i], buf);
		int rc = seen ? 0 : sfs_manifest_add_dir(s->m, buf);
		if (rc)
			return rc;
		*p = '/';
	}
	return 0;
}

int seed_gen_prepare_mem(struct seed_gen *s, const struct seed_mem *mm,
			 uint32_t shift, int sha256, char *err, size_t errlen)
{
	char *id_json = NULL;
	json_t *index = NULL, *wmap = NULL;
	int rc = -ENOMEM;

	if (!mm->ntensors && !mm->nfiles) {
		snprintf(err, errlen,
			 "nothing to publish: no tensors, no "
			 "files");
		return -EINVAL;
	}
	for (size_t i = 0; i < mm->nfiles; i++) {
		const struct seed_mem_file *f = &mm->files[i];
		if ((rc = add_parents(s, f->path)) ||
		    (rc = add_inline_file(s, shift, sha256, f->path, f->data,
					  f->len)))
			goto out;
	}
	if (!mm->ntensors) {
		rc = 0;
		goto out;
	}
	/* A checkpoint model holds no processed tensor, and so on: a
	 * replica that requires a layout gets nothing else. */
	for (size_t i = 0; i < mm->ntensors; i++) {
		const struct seed_mem_tensor *t = &mm->tensors[i];
		if (t->layout[0] &&
		    !sfs_layout_is(t->layout, s->m->id.layout)) {
			snprintf(
				err, errlen,
				"tensor '%.200s': layout '%s' in a model whose "
				"layout is %s (identity layout=...)",
				t->name, t->layout, s->m->id.layout);
			rc = -EINVAL;
			goto out;
		}
	}
	size_t nshards = 0;
	uint64_t acc;
	for (size_t a = 0; a < mm->ntensors; a = shard_end(mm, a, &acc))
		nshards++;
	rc = -ENOMEM;
	if (!(s->files = calloc(mm->ntensors, sizeof(s->files[0]))) ||
	    !(id_json = identity_sans_generation(&s->m->id)) ||
	    !(index = json_object()) || !(wmap = json_object()))
		goto out;
	uint64_t total = 0;
	size_t a = 0;
	for (size_t k = 1; k <= nshards; k++) {
		size_t b = shard_end(mm, a, &acc);
		char name[64];
		snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors",
			 k, nshards);
		size_t fidx;
		if ((rc = sfs_manifest_add_file(s->m, name, &fidx)))
			goto out;
		uint8_t *hdr;
		size_t hlen;
		if ((rc = shard_header(mm, a, b, id_json, &hdr, &hlen)))
			goto out;
		/* Our own parser must accept what we present. */
		struct sfs_st_header *h = NULL;
		char why[300];
		rc = sfs_st_parse((const char *)hdr + 8, hlen - 8, hlen + acc,
				  &h, why, sizeof(why));
		if (!rc)
			sfs_st_free(h);
		if (rc) {
			free(hdr);
			snprintf(err, errlen, "shard %s: %s", name, why);
			goto out;
		}
		uint64_t off = hlen;
		for (size_t i = a; i < b; i++) {
			const struct seed_mem_tensor *t = &mm->tensors[i];
			struct seed_file *f = &s->files[s->nfiles++];
			f->map = (void *)t->data;
			f->size = t->len;
			f->fidx = fidx;
			f->borrowed = 1;
			f->last = i + 1 == b;
			if (i == a) {
				f->prefix = hdr;
				f->prefix_len = hlen;
			}
			if ((rc = seed_add_tensor(s->m, t->name, t->dtype,
						  t->ndim, t->shape, fidx, off,
						  t->len, t->data)))
				goto out;
			snprintf(s->m->tensors[s->m->ntensors - 1].layout,
				 sizeof(t->layout), "%s", t->layout);
			if (json_object_set_new(wmap, t->name,
						json_string(name))) {
				rc = -ENOMEM;
				goto out;
			}
			off += t->len;
		}
		total += acc;
		s->total_bytes += hlen + acc;
		a = b;
	}
	json_t *meta = json_pack("{s:I}", "total_size", (json_int_t)total);
	if (!meta || json_object_set_new(index, "metadata", meta) ||
	    json_object_set(index, "weight_map", wmap)) {
		rc = -ENOMEM;
		goto out;
	}
	char *text = json_dumps(index, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (!text) {
		rc = -ENOMEM;
		goto out;
	}
	rc = add_inline_file(s, shift, sha256, "model.safetensors.index.json",
			     text, strlen(text));
	free(text);
out:
	json_decref(index);
	json_decref(wmap);
	free(id_json);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	else if (rc && !*err)
		snprintf(err, errlen, "%s", strerror(-rc));
	return rc;
}

int seed_gen_publish_mem(struct seed_gen *s, const struct sfs_seed_cfg *cfg)
{
	struct seed_sums ss;
	int started = 0, rc = 0;

	/* A shard's digest and checksums run over its bytes as a loader
	 * sees them: the header, then each tensor's bytes. */
	for (size_t i = 0; i < s->nfiles && !rc; i++) {
		struct seed_file *f = &s->files[i];
		if (f->prefix) { /* the first piece of a shard */
			if ((rc = seed_sums_start(&ss, cfg->csum_shift,
						  cfg->digest_sha256)))
				break;
			started = 1;
			rc = seed_sums_add(&ss, f->prefix, f->prefix_len);
			if (!rc)
				rc = sfs_manifest_add_inline(s->m, f->fidx,
							     f->prefix,
							     f->prefix_len);
		}
		if (!rc && f->size) {
			rc = seed_sums_add(&ss, f->map, f->size);
			if (!rc)
				rc = seed_piece_publish(s, cfg, f);
		}
		if (!rc && f->last) {
			rc = seed_sums_finish(&ss, s->m, f->fidx);
			seed_sums_free(&ss);
			started = 0;
		}
	}
	if (started)
		seed_sums_free(&ss);
	return rc;
}
