/* SPDX-License-Identifier: MIT */
#include "manifest.h"

#include "common/util.h"
#include "metadata/gguf.h"
#include "metadata/jsonlim.h"
#include "common/xxh.h"

#include <ctype.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- builder ---------------------------------------------------------- */

struct sfs_manifest *sfs_manifest_new(const char *model, uint64_t generation)
{
	struct sfs_manifest *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->version = SFS_MANIFEST_VERSION;
	m->generation = generation;
	m->model = strdup(model);
	m->revision = strdup("");
	sfs_identity_init(&m->id, model, generation);
	if (!m->model || !m->revision) {
		sfs_manifest_free(m);
		return NULL;
	}
	return m;
}

int sfs_manifest_add_endpoint(struct sfs_manifest *m, const char *protocol,
			      const char *provider, const char *compat,
			      const void *addr, size_t len)
{
	struct sfs_endpoint *e = &m->eps[m->neps];
	if (m->neps >= SFS_MF_MAX_ENDPOINTS)
		return -E2BIG;
	if (!compat)
		compat = "";
	if (len > sizeof(e->addr) || strlen(protocol) >= sizeof(e->protocol) ||
	    strlen(provider) >= sizeof(e->provider) ||
	    strlen(compat) >= sizeof(e->compat))
		return -EINVAL;
	strcpy(e->protocol, protocol);
	strcpy(e->provider, provider);
	strcpy(e->compat, compat);
	memcpy(e->addr, addr, len);
	e->addr_len = len;
	m->neps++;
	return 0;
}

int sfs_manifest_add_region(struct sfs_manifest *m, uint64_t len, uint32_t *id)
{
	if (m->nregions >= SFS_MF_MAX_REGIONS)
		return -E2BIG;
	if (sfs_grow((void **)&m->regions, &m->cap_regions, m->nregions + 1,
		     sizeof(m->regions[0])))
		return -ENOMEM;
	memset(&m->regions[m->nregions], 0, sizeof(m->regions[0]));
	m->regions[m->nregions].len = len;
	*id = (uint32_t)m->nregions++;
	return 0;
}

void sfs_manifest_set_remote(struct sfs_manifest *m, uint32_t id, size_t ep,
			     uint64_t raddr, uint64_t key)
{
	struct sfs_remote *r = &m->regions[id].rem[ep];
	free(r->raw);
	*r = (struct sfs_remote){.raddr = raddr, .key = key};
}

int sfs_manifest_set_checksums(struct sfs_manifest *m, size_t idx,
			       uint32_t shift, const uint64_t *sums, size_t n)
{
	struct sfs_mfile *f = &m->files[idx];
	if (shift < SFS_MF_CSUM_MIN_SHIFT || shift > SFS_MF_CSUM_MAX_SHIFT ||
	    n != sfs_csum_count(f->size, shift))
		return -EINVAL;
	uint64_t *copy = malloc((n ? n : 1) * sizeof(*copy));
	if (!copy)
		return -ENOMEM;
	if (n)
		memcpy(copy, sums, n * sizeof(*copy));
	free(f->sums);
	f->sums = copy;
	f->csum_shift = shift;
	return 0;
}

int sfs_manifest_set_sha256(struct sfs_manifest *m, size_t idx,
			    const uint8_t *sha256, size_t n)
{
	struct sfs_mfile *f = &m->files[idx];
	if (!f->csum_shift || n != sfs_csum_count(f->size, f->csum_shift))
		return -EINVAL;
	uint8_t *copy = malloc(n ? 32 * n : 1);
	if (!copy)
		return -ENOMEM;
	if (n)
		memcpy(copy, sha256, 32 * n);
	free(f->sha256);
	f->sha256 = copy;
	return 0;
}

/* Path order for the content digest (qsort has no context). */
static __thread const struct sfs_manifest *content_m;
static int by_file_path(const void *a, const void *b)
{
	return strcmp(content_m->files[*(const size_t *)a].path,
		      content_m->files[*(const size_t *)b].path);
}
static int by_dir_path(const void *a, const void *b)
{
	return strcmp(content_m->dirs[*(const size_t *)a],
		      content_m->dirs[*(const size_t *)b]);
}

static void put_u64(XXH3_state_t *st, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	XXH3_64bits_update(st, b, sizeof(b));
}

int sfs_manifest_content(const struct sfs_manifest *m, uint64_t *out)
{
	size_t n = SFS_MAX(m->nfiles, m->ndirs);
	size_t *ix = malloc((n ? n : 1) * sizeof(*ix));
	XXH3_state_t *st = XXH3_createState();
	int rc = -ENOMEM;

	if (!ix || !st)
		goto out;
	rc = -EINVAL;
	for (size_t i = 0; i < m->nfiles; i++)
		if (!m->files[i].has_xxh3)
			goto out;
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, "seedfs-content-1", 16);
	content_m = m;
	for (size_t i = 0; i < m->ndirs; i++)
		ix[i] = i;
	qsort(ix, m->ndirs, sizeof(*ix), by_dir_path);
	put_u64(st, m->ndirs);
	for (size_t i = 0; i < m->ndirs; i++)
		XXH3_64bits_update(st, m->dirs[ix[i]],
				   strlen(m->dirs[ix[i]]) + 1);
	for (size_t i = 0; i < m->nfiles; i++)
		ix[i] = i;
	qsort(ix, m->nfiles, sizeof(*ix), by_file_path);
	put_u64(st, m->nfiles);
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct sfs_mfile *f = &m->files[ix[i]];
		XXH3_64bits_update(st, f->path, strlen(f->path) + 1);
		put_u64(st, f->size);
		put_u64(st, f->xxh3);
	}
	content_m = NULL;
	*out = XXH3_64bits_digest(st);
	rc = 0;
out:
	XXH3_freeState(st);
	free(ix);
	return rc;
}

int sfs_manifest_set_remote_raw(struct sfs_manifest *m, uint32_t id, size_t ep,
				uint64_t raddr, const uint8_t *raw, size_t len)
{
	struct sfs_remote *r = &m->regions[id].rem[ep];
	uint8_t *copy;
	if (len == 0 || len > SFS_MF_RAWKEY_MAX)
		return -EINVAL;
	if (!(copy = malloc(len)))
		return -ENOMEM;
	memcpy(copy, raw, len);
	free(r->raw);
	*r = (struct sfs_remote){
		.raddr = raddr, .raw_len = (uint32_t)len, .raw = copy};
	return 0;
}

ssize_t sfs_manifest_endpoint(const struct sfs_manifest *m,
			      const char *protocol)
{
	for (size_t i = 0; i < m->neps; i++)
		if (!strcmp(m->eps[i].protocol, protocol))
			return (ssize_t)i;
	return -1;
}

char *sfs_manifest_protocols(const struct sfs_manifest *m, char *buf,
			     size_t len)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < m->neps; i++) {
		int k = snprintf(buf + o, len - o, "%s%s", i ? ", " : "",
				 m->eps[i].protocol);
		if (k < 0 || (size_t)k >= len - o)
			break;
		o += (size_t)k;
	}
	return buf;
}

void sfs_manifest_add_skipped(struct sfs_manifest *m, const char *path)
{
	if (m->nskipped_shown < SFS_MF_SKIPPED_SHOWN)
		snprintf(m->skipped[m->nskipped_shown++], sizeof(m->skipped[0]),
			 "%s", path);
	m->nskipped++;
}

int sfs_manifest_add_dir(struct sfs_manifest *m, const char *path)
{
	char *p;
	if (sfs_grow((void **)&m->dirs, &m->cap_dirs, m->ndirs + 1,
		     sizeof(m->dirs[0])) ||
	    sfs_grow((void **)&m->dir_meta, &m->cap_dir_meta, m->ndirs + 1,
		     sizeof(m->dir_meta[0])))
		return -ENOMEM;
	if (!(p = strdup(path)))
		return -ENOMEM;
	memset(&m->dir_meta[m->ndirs], 0, sizeof(m->dir_meta[0]));
	m->dirs[m->ndirs++] = p;
	return 0;
}

void sfs_mmeta_set(struct sfs_mmeta *mm, int64_t mtime_ns, uint32_t mode)
{
	mm->has = 1;
	mm->mtime_ns = mtime_ns;
	mm->mode = mode & 07777;
}

int sfs_manifest_add_file(struct sfs_manifest *m, const char *path, size_t *idx)
{
	struct sfs_mfile *f;
	if (sfs_grow((void **)&m->files, &m->cap_files, m->nfiles + 1,
		     sizeof(m->files[0])))
		return -ENOMEM;
	f = &m->files[m->nfiles];
	memset(f, 0, sizeof(*f));
	if (!(f->path = strdup(path)))
		return -ENOMEM;
	*idx = m->nfiles++;
	return 0;
}

static struct sfs_extent *new_extent(struct sfs_manifest *m, size_t idx,
				     uint64_t len)
{
	struct sfs_mfile *f = &m->files[idx];
	struct sfs_extent *e;
	if (len == 0 || f->size > SFS_MF_FILE_MAX - len)
		return NULL;
	if (sfs_grow((void **)&f->ext, &f->cap_ext, f->next + 1,
		     sizeof(f->ext[0])))
		return NULL;
	e = &f->ext[f->next];
	memset(e, 0, sizeof(*e));
	e->off = f->size;
	e->len = len;
	return e;
}

int sfs_manifest_add_inline(struct sfs_manifest *m, size_t idx,
			    const void *data, uint64_t len)
{
	struct sfs_extent *e = new_extent(m, idx, len);
	if (!e)
		return -ENOMEM;
	if (!(e->data = malloc(len)))
		return -ENOMEM;
	memcpy(e->data, data, len);
	e->kind = SFS_EXT_INLINE;
	m->files[idx].next++;
	m->files[idx].size += len;
	return 0;
}

int sfs_manifest_add_remote(struct sfs_manifest *m, size_t idx, uint32_t region,
			    uint64_t roff, uint64_t len)
{
	struct sfs_extent *e = new_extent(m, idx, len);
	if (!e)
		return -ENOMEM;
	e->kind = SFS_EXT_REGION;
	e->region = region;
	e->roff = roff;
	m->files[idx].next++;
	m->files[idx].size += len;
	return 0;
}

int sfs_manifest_add_tensor(struct sfs_manifest *m, const char *name,
			    const char *dtype, uint32_t ndim,
			    const uint64_t *shape, size_t file, uint64_t off,
			    uint64_t len)
{
	struct sfs_mtensor *t;
	if (ndim > SFS_ST_MAX_DIMS || strlen(dtype) >= SFS_DTYPE_MAX)
		return -EINVAL;
	if (sfs_grow((void **)&m->tensors, &m->cap_tensors, m->ntensors + 1,
		     sizeof(m->tensors[0])))
		return -ENOMEM;
	t = &m->tensors[m->ntensors];
	memset(t, 0, sizeof(*t));
	if (!(t->name = strdup(name)))
		return -ENOMEM;
	strcpy(t->dtype, dtype);
	t->ndim = ndim;
	memcpy(t->shape, shape, ndim * sizeof(shape[0]));
	t->file = file;
	t->off = off;
	t->len = len;
	m->ntensors++;
	return 0;
}

void sfs_manifest_free(struct sfs_manifest *m)
{
	if (!m)
		return;
	free(m->model);
	free(m->revision);
	for (size_t i = 0; i < m->nregions; i++)
		for (size_t j = 0; j < SFS_MF_MAX_ENDPOINTS; j++)
			free(m->regions[i].rem[j].raw);
	free(m->regions);
	for (size_t i = 0; i < m->ndirs; i++)
		free(m->dirs[i]);
	free(m->dirs);
	free(m->dir_meta);
	for (size_t i = 0; i < m->nfiles; i++) {
		struct sfs_mfile *f = &m->files[i];
		for (size_t j = 0; j < f->next; j++)
			free(f->ext[j].data);
		free(f->ext);
		free(f->path);
		free(f->sums);
		free(f->sha256);
	}
	free(m->files);
	for (size_t i = 0; i < m->ntensors; i++)
		free(m->tensors[i].name);
	free(m->tensors);
	sfs_identity_clear(&m->id);
	free(m);
}

ssize_t sfs_mfile_find_extent(const struct sfs_mfile *f, uint64_t off)
{
	size_t lo = 0, hi = f->next;
	if (off >= f->size)
		return -1;
	while (lo + 1 < hi) { /* invariant: ext[lo].off <= off */
		size_t mid = lo + (hi - lo) / 2;
		if (f->ext[mid].off <= off)
			lo = mid;
		else
			hi = mid;
	}
	return (ssize_t)lo;
}

/* ---- encode ----------------------------------------------------------- */

static json_t *hex_u64(uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	return json_string(buf);
}

static json_t *encode_extent(const struct sfs_extent *e)
{
	if (e->kind == SFS_EXT_INLINE) {
		char *b64 = malloc(sfs_b64_enc_len(e->len));
		if (!b64)
			return NULL;
		sfs_b64_encode(e->data, e->len, b64);
		json_t *o = json_pack("{s:s}", "inline", b64);
		free(b64);
		return o;
	}
	return json_pack("{s:I,s:I,s:I}", "region", (json_int_t)e->region,
			 "offset", (json_int_t)e->roff, "length",
			 (json_int_t)e->len);
}

/* "mtime_ns" and "mode" into @o, when @mm has them.  0 or -1. */
static int encode_meta(json_t *o, const struct sfs_mmeta *mm)
{
	if (!o)
		return -1;
	if (!mm->has)
		return 0;
	if (json_object_set_new(o, "mtime_ns",
				json_integer((json_int_t)mm->mtime_ns)) ||
	    json_object_set_new(o, "mode", json_integer((json_int_t)mm->mode)))
		return -1;
	return 0;
}

/* {"algorithm": "xxh3-64", "chunk_size": 2^k, "values": HEX[, "sha256":
 * HEX]}, or NULL */
static json_t *encode_checksum(uint32_t shift, const uint64_t *sums,
			       const uint8_t *sha256, uint64_t n)
{
	char *hex = malloc(sha256 ? 64 * n + 1 : 16 * n + 1);
	if (!hex)
		return NULL;
	hex[0] = '\0';
	for (uint64_t k = 0; k < n; k++)
		snprintf(hex + 16 * k, 17, "%016" PRIx64, sums[k]);
	json_t *o =
		json_pack("{s:s,s:I,s:s}", "algorithm", "xxh3-64", "chunk_size",
			  (json_int_t)(1ll << shift), "values", hex);
	if (o && sha256) {
		sfs_hex_encode(sha256, (size_t)(32 * n), hex);
		if (json_object_set_new(o, "sha256", json_string(hex))) {
			json_decref(o);
			o = NULL;
		}
	}
	free(hex);
	return o;
}

static json_t *encode_file(const struct sfs_mfile *f, unsigned flags, int bare)
{
	json_t *ext = json_array();
	for (size_t i = 0; ext && i < f->next; i++)
		if (json_array_append_new(ext, encode_extent(&f->ext[i]))) {
			json_decref(ext);
			return NULL;
		}
	if (bare) { /* a re-seeder serves by its holdings */
		json_decref(ext);
		ext = NULL;
	}
	json_t *o = json_pack("{s:s,s:I,s:o*}", "path", f->path, "size",
			      (json_int_t)f->size, "extents", ext);
	if ((o && f->has_xxh3 &&
	     json_object_set_new(o, "xxh3", hex_u64(f->xxh3))) ||
	    (o && f->csum_shift && !(flags & SFS_MF_ENC_THIN) &&
	     json_object_set_new(
		     o, "checksum",
		     encode_checksum(
			     f->csum_shift, f->sums, f->sha256,
			     sfs_csum_count(f->size, f->csum_shift)))) ||
	    encode_meta(o, &f->meta)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *encode_dir(const char *path, const struct sfs_mmeta *mm)
{
	json_t *o = json_pack("{s:s}", "path", path);
	if (encode_meta(o, mm)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *encode_tensor(const struct sfs_manifest *m,
			     const struct sfs_mtensor *t)
{
	json_t *shape = json_array();
	for (uint32_t i = 0; shape && i < t->ndim; i++)
		json_array_append_new(shape,
				      json_integer((json_int_t)t->shape[i]));
	json_t *o = json_pack("{s:s,s:s,s:o*,s:s,s:I,s:I}", "name", t->name,
			      "dtype", t->dtype, "shape", shape, "file",
			      m->files[t->file].path, "offset",
			      (json_int_t)t->off, "length", (json_int_t)t->len);
	if (o && t->has_xxh3 &&
	    json_object_set_new(o, "xxh3", hex_u64(t->xxh3))) {
		json_decref(o);
		return NULL;
	}
	if (o && t->layout[0] &&
	    json_object_set_new(o, "layout", json_string(t->layout))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *encode_endpoint(const struct sfs_endpoint *e, unsigned flags)
{
	json_t *o = json_pack("{s:s,s:s}", "protocol", e->protocol, "provider",
			      e->provider);
	if (o && !(flags & SFS_MF_ENC_PUBLIC)) {
		char addr[2 * SFS_MF_ADDR_MAX + 1];
		sfs_hex_encode(e->addr, e->addr_len, addr);
		if (json_object_set_new(o, "address", json_string(addr))) {
			json_decref(o);
			return NULL;
		}
	}
	if (o && e->compat[0] &&
	    json_object_set_new(o, "compat", json_string(e->compat))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *encode_region(const struct sfs_manifest *m, size_t i,
			     unsigned flags)
{
	const struct sfs_region *r = &m->regions[i];
	if (flags & (SFS_MF_ENC_PUBLIC | SFS_MF_ENC_SIGNED))
		return json_pack("{s:I,s:I}", "id", (json_int_t)i, "length",
				 (json_int_t)r->len);
	json_t *rem = json_array();
	for (size_t j = 0; rem && j < m->neps; j++) {
		const struct sfs_remote *x = &r->rem[j];
		json_t *e;
		if (flags & SFS_MF_ENC_NO_REMOTE) {
			e = json_pack("{s:s,s:s}", "address", "0x0", "key",
				      "0x0");
		} else if (x->raw_len) {
			char hex[2 * SFS_MF_RAWKEY_MAX + 1];
			sfs_hex_encode(x->raw, x->raw_len, hex);
			e = json_pack("{s:o,s:s}", "address", hex_u64(x->raddr),
				      "raw_key", hex);
		} else {
			e = json_pack("{s:o,s:o}", "address", hex_u64(x->raddr),
				      "key", hex_u64(x->key));
		}
		if (json_array_append_new(rem, e)) {
			json_decref(rem);
			return NULL;
		}
	}
	return json_pack("{s:I,s:I,s:o*}", "id", (json_int_t)i, "length",
			 (json_int_t)r->len, "remote", rem);
}

int sfs_manifest_identity_id(const struct sfs_manifest *m,
			     char out[SFS_ID_SHORT + 1])
{
	struct sfs_identity id;
	sfs_identity_init(&id, m->model, m->generation);
	int rc = sfs_identity_copy(&id, &m->id) ? -ENOMEM : 0;
	if (!rc) {
		snprintf(id.model, sizeof(id.model), "%s", m->model);
		id.generation = m->generation;
		rc = sfs_identity_short_id(&id, out) ? -ENOMEM : 0;
	}
	sfs_identity_clear(&id);
	return rc;
}

/* "identity" and "identity_id", the identity's model and generation
 * being the manifest's.  Returns 0 or -ENOMEM. */
static int encode_identity(const struct sfs_manifest *m, json_t *root)
{
	struct sfs_identity id;
	char *text = NULL, sid[SFS_ID_SHORT + 1];
	int rc = -ENOMEM;

	sfs_identity_init(&id, m->model, m->generation);
	if (sfs_identity_copy(&id, &m->id))
		goto out;
	snprintf(id.model, sizeof(id.model), "%s", m->model);
	id.generation = m->generation;
	if (sfs_identity_canonical(&id, &text) ||
	    sfs_identity_short_id(&id, sid))
		goto out;
	json_t *o = json_loads(text, 0, NULL);
	if (!o || json_object_set_new(root, "identity", o) ||
	    json_object_set_new(root, "identity_id", json_string(sid)))
		goto out;
	rc = 0;
out:
	free(text);
	sfs_identity_clear(&id);
	return rc;
}

int sfs_manifest_encode(const struct sfs_manifest *m, char **out, size_t *len)
{
	return sfs_manifest_encode_with(m, 0, out, len);
}

/* "skipped": {"count": N, "paths": [...]}; 0 or -1. */
static int encode_skipped(const struct sfs_manifest *m, json_t *root)
{
	json_t *paths = json_array();
	for (size_t i = 0; paths && i < m->nskipped_shown; i++)
		if (json_array_append_new(paths, json_string(m->skipped[i])))
			break;
	return json_object_set_new(root, "skipped",
				   json_pack("{s:I,s:o*}", "count",
					     (json_int_t)m->nskipped, "paths",
					     paths));
}

int sfs_manifest_encode_with(const struct sfs_manifest *m, unsigned flags,
			     char **out, size_t *len)
{
	json_t *root, *eps, *regions, *dirs, *files, *tensors;
	int rc = -ENOMEM;

	eps = json_array();
	regions = json_array();
	dirs = json_array();
	files = json_array();
	tensors = json_array();
	root = json_pack("{s:i,s:s,s:s,s:I,s:o,s:I,s:o*,s:o*,s:o*,s:o*,s:o*}",
			 "seedfs_manifest", (int)m->version, "model", m->model,
			 "revision", m->revision, "generation",
			 (json_int_t)m->generation, "instance",
			 hex_u64(m->instance), "grace_seconds",
			 (json_int_t)m->grace_seconds, "endpoints", eps,
			 "regions", regions, "dirs", dirs, "files", files,
			 "tensors", tensors);
	if (!root)
		return -ENOMEM;
	uint64_t content;
	if ((rc = sfs_manifest_content(m, &content)))
		goto out;
	rc = -ENOMEM;
	if (encode_identity(m, root) || encode_meta(root, &m->root_meta) ||
	    json_object_set_new(root, "content", hex_u64(content)) ||
	    (m->holdings &&
	     json_object_set_new(root, "holdings", json_true())) ||
	    ((flags & SFS_MF_ENC_PUBLIC) &&
	     json_object_set_new(root, "public", json_true())) ||
	    ((flags & SFS_MF_ENC_THIN) &&
	     json_object_set_new(root, "thin", json_true())) ||
	    (m->key_epoch &&
	     json_object_set_new(root, "key_epoch",
				 json_integer((json_int_t)m->key_epoch))) ||
	    (m->signed_at &&
	     json_object_set_new(root, "signed_at",
				 json_integer((json_int_t)m->signed_at))) ||
	    (m->valid_until &&
	     json_object_set_new(root, "valid_until",
				 json_integer((json_int_t)m->valid_until))) ||
	    (m->signer[0] &&
	     json_object_set_new(root, "signer", json_string(m->signer))) ||
	    (m->signer_run &&
	     json_object_set_new(root, "signer_run", hex_u64(m->signer_run))) ||
	    (m->nskipped && encode_skipped(m, root)))
		goto out;
	for (size_t i = 0; i < m->neps; i++)
		if (json_array_append_new(eps,
					  encode_endpoint(&m->eps[i], flags)))
			goto out;
	for (size_t i = 0; i < m->nregions; i++)
		if (json_array_append_new(regions, encode_region(m, i, flags)))
			goto out;
	for (size_t i = 0; i < m->ndirs; i++)
		if (json_array_append_new(
			    dirs, encode_dir(m->dirs[i], &m->dir_meta[i])))
			goto out;
	/* Extents left out only of a re-seeder's thin manifest, asked so. */
	int bare = (flags & SFS_MF_ENC_THIN) && (flags & SFS_MF_ENC_BARE) &&
		   m->holdings;
	for (size_t i = 0; i < m->nfiles; i++)
		if (json_array_append_new(
			    files, encode_file(&m->files[i], flags, bare)))
			goto out;
	for (size_t i = 0; !(flags & SFS_MF_ENC_THIN) && i < m->ntensors; i++)
		if (json_array_append_new(tensors,
					  encode_tensor(m, &m->tensors[i])))
			goto out;
	if (flags & SFS_MF_ENC_SIGNED) {
		/* What differs between sources of one generation, or
		 * across key epochs, is not signed. */
		static const char *const unsigned_keys[] = {
			"instance", "grace_seconds", "endpoints",
			"holdings", "key_epoch",     "public"};
		for (size_t i = 0; i < SFS_ARRAY_SIZE(unsigned_keys); i++)
			json_object_del(root, unsigned_keys[i]);
		*out = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
	} else {
		if (m->has_sig && !(flags & SFS_MF_ENC_THIN)) {
			char b64[SFS_SIGN_LEN * 2];
			sfs_b64_encode(m->sig, SFS_SIGN_LEN, b64);
			if (json_object_set_new(
				    root, "signature",
				    json_pack("{s:s,s:s,s:s}", "algorithm",
					      "ed25519", "key", m->sig_key,
					      "value", b64)))
				goto out;
		}
		*out = json_dumps(root, JSON_INDENT(1));
	}
	if (*out) {
		*len = strlen(*out);
		rc = 0;
	}
out:
	json_decref(root);
	return rc;
}

int sfs_manifest_signed_digest(const struct sfs_manifest *m, uint8_t out[32])
{
	char *text;
	size_t len;
	int rc = sfs_manifest_encode_with(m, SFS_MF_ENC_SIGNED, &text, &len);
	if (rc)
		return rc;
	rc = gnutls_hash_fast(GNUTLS_DIG_SHA256, text, len, out) ? -EIO : 0;
	free(text);
	return rc;
}

/* ---- validate --------------------------------------------------------- */

int sfs_path_check(const char *path, const char **why)
{
	size_t n = strlen(path);
	const char *c = path;

	if (n == 0)
		return *why = "empty", -EINVAL;
	if (n > SFS_MF_PATH_MAX)
		return *why = "longer than 4096 bytes", -EINVAL;
	if (path[0] == '/')
		return *why = "absolute", -EINVAL;
	/* A name shows in status lines, logs and messages: a newline in one
	 * would forge a line there (escaped anyway; refused here). */
	if (sfs_unprintable(path, n) < n)
		return *why = "holds a control character or a byte that is "
			      "not UTF-8",
		       -EINVAL;
	while (*c) {
		const char *e = strchr(c, '/');
		size_t l = e ? (size_t)(e - c) : strlen(c);
		if (l == 0)
			return *why = "empty component", -EINVAL;
		if (l > SFS_MF_NAME_MAX)
			return *why = "component longer than 255 bytes",
			       -EINVAL;
		if ((l == 1 && c[0] == '.') ||
		    (l == 2 && c[0] == '.' && c[1] == '.'))
			return *why = "'.' or '..' component", -EINVAL;
		if (!e)
			break;
		c = e + 1;
		if (!*c)
			return *why = "trailing '/'", -EINVAL;
	}
	if (strncmp(path, SFS_MF_RESERVED, sizeof(SFS_MF_RESERVED) - 1) == 0 &&
	    (path[sizeof(SFS_MF_RESERVED) - 1] == '\0' ||
	     path[sizeof(SFS_MF_RESERVED) - 1] == '/'))
		return *why = "'.seedfs' is reserved", -EINVAL;
	return 0;
}

/* Parent of @path must be the root or a directory in @set. */
static int parent_is_dir(json_t *set, const char *path)
{
	const char *slash = strrchr(path, '/');
	char buf[SFS_MF_PATH_MAX + 1];
	if (!slash)
		return 1;
	size_t n = (size_t)(slash - path);
	memcpy(buf, path, n);
	buf[n] = '\0';
	json_t *v = json_object_get(set, buf);
	return v && json_integer_value(v) < 0; /* dirs are stored as -1 */
}

static int validate_file(const struct sfs_manifest *m, size_t i,
			 size_t *total_ext, char *err, size_t errlen)
{
	const struct sfs_mfile *f = &m->files[i];
	uint64_t at = 0;

	if (f->size > SFS_MF_FILE_MAX)
		return sfs_fail(err, errlen,
				"files[%zu] '%s': size %" PRIu64
				" exceeds the cap",
				i, f->path, f->size);
	if (!f->has_xxh3)
		return sfs_fail(err, errlen,
				"files[%zu].xxh3: missing (the file's digest)",
				i);
	if (f->csum_shift &&
	    (f->csum_shift < SFS_MF_CSUM_MIN_SHIFT ||
	     f->csum_shift > SFS_MF_CSUM_MAX_SHIFT || !f->sums))
		return sfs_fail(err, errlen, "files[%zu].checksum: malformed",
				i);
	*total_ext += f->next;
	if (*total_ext > SFS_MF_MAX_EXTENTS)
		return sfs_fail(err, errlen,
				"files: more than %d extents in all",
				SFS_MF_MAX_EXTENTS);
	for (size_t j = 0; j < f->next; j++) {
		const struct sfs_extent *e = &f->ext[j];
		if (e->len == 0)
			return sfs_fail(err, errlen,
					"files[%zu].extents[%zu]: length is 0",
					i, j);
		if (e->off != at || e->len > f->size - at)
			return sfs_fail(err, errlen,
					"files[%zu].extents[%zu]: %" PRIu64
					" bytes at %" PRIu64
					" run past size %" PRIu64 " of '%s'",
					i, j, e->len, at, f->size, f->path);
		if (e->kind == SFS_EXT_REGION) {
			if (e->region >= m->nregions)
				return sfs_fail(
					err, errlen,
					"files[%zu].extents[%zu].region: "
					"%u is not a region (%zu regions)",
					i, j, e->region, m->nregions);
			const struct sfs_region *r = &m->regions[e->region];
			if (e->roff > r->len || e->len > r->len - e->roff)
				return sfs_fail(
					err, errlen,
					"files[%zu].extents[%zu]: offset "
					"%" PRIu64 " + length %" PRIu64
					" run past region %u (%" PRIu64
					" bytes)",
					i, j, e->roff, e->len, e->region,
					r->len);
		} else if (e->kind != SFS_EXT_INLINE || !e->data) {
			return sfs_fail(err, errlen,
					"files[%zu].extents[%zu]: bad kind", i,
					j);
		}
		at += e->len;
	}
	/* A re-seeder's thin manifest may give files no extents. */
	if (at != f->size && !(m->thin && m->holdings && !f->next))
		return sfs_fail(err, errlen,
				"files[%zu] '%s': extents cover %" PRIu64
				" bytes, size says %" PRIu64,
				i, f->path, at, f->size);
	return 0;
}

static int validate_tensor(const struct sfs_manifest *m, size_t i, char *err,
			   size_t errlen)
{
	const struct sfs_mtensor *t = &m->tensors[i];
	unsigned int esz = sfs_dtype_size(t->dtype);
	uint64_t bytes;

	if (!t->name[0] || strlen(t->name) > SFS_ST_NAME_MAX)
		return sfs_fail(err, errlen,
				"tensors[%zu].name: empty or too long", i);
	if (t->file >= m->nfiles)
		return sfs_fail(err, errlen, "tensors[%zu].file: no such file",
				i);
	uint32_t blk, bsz;
	if (!esz && sfs_ggml_dtype(t->dtype, &blk, &bsz))
		return sfs_fail(err, errlen, "tensors[%zu].dtype: unknown '%s'",
				i, t->dtype);
	if (t->ndim > SFS_ST_MAX_DIMS)
		return sfs_fail(err, errlen,
				"tensors[%zu].shape: too many dims", i);
	/* A safetensors dtype, else a ggml one (GGUF: blocks). */
	if ((esz ? sfs_st_tensor_bytes(t->shape, t->ndim, esz, &bytes)
		 : sfs_ggml_tensor_bytes(t->dtype, t->shape, t->ndim,
					 &bytes)) ||
	    bytes != t->len)
		return sfs_fail(
			err, errlen,
			"tensors[%zu] '%s': shape x %s is not length %" PRIu64,
			i, t->name, t->dtype, t->len);
	if (t->layout[0] && !sfs_manifest_layout_ok(t->layout))
		return sfs_fail(
			err, errlen,
			"tensors[%zu].layout: not 1-63 of [A-Za-z0-9._:+-]", i);
	if (t->layout[0] && !sfs_layout_is(t->layout, m->id.layout))
		return sfs_fail(
			err, errlen,
			"tensors[%zu].layout: '%s' in a model whose layout "
			"is %s",
			i, t->layout, m->id.layout);
	uint64_t fsz = m->files[t->file].size;
	if (t->off > fsz || t->len > fsz - t->off)
		return sfs_fail(err, errlen,
				"tensors[%zu] '%s': bytes [%" PRIu64
				", +%" PRIu64 ") run past file '%s' (%" PRIu64
				" bytes)",
				i, t->name, t->off, t->len,
				m->files[t->file].path, fsz);
	return 0;
}

int sfs_manifest_validate(const struct sfs_manifest *m, char *err,
			  size_t errlen)
{
	const char *why;
	size_t total_ext = 0;
	json_t *set;
	int rc = 0;

	if (m->version < SFS_MANIFEST_VERSION_MIN ||
	    m->version > SFS_MANIFEST_VERSION)
		return sfs_fail(err, errlen,
				"seedfs_manifest: version %u, this "
				"build reads %d to %d",
				m->version, SFS_MANIFEST_VERSION_MIN,
				SFS_MANIFEST_VERSION);
	if (sfs_path_check(m->model, &why) || strchr(m->model, '/'))
		return sfs_fail(err, errlen,
				"model: '%.64s' is not a valid name", m->model);
	if (m->nfiles > SFS_MF_MAX_FILES || m->ndirs > SFS_MF_MAX_FILES)
		return sfs_fail(err, errlen, "files: more than %d entries",
				SFS_MF_MAX_FILES);
	if (m->ntensors > SFS_MF_MAX_TENSORS)
		return sfs_fail(err, errlen, "tensors: more than %d",
				SFS_MF_MAX_TENSORS);
	if (m->neps == 0 || m->neps > SFS_MF_MAX_ENDPOINTS)
		return sfs_fail(err, errlen, "endpoints: %zu, must be 1..%d",
				m->neps, SFS_MF_MAX_ENDPOINTS);
	for (size_t i = 0; i < m->neps; i++) {
		if (!m->eps[i].protocol[0] || !m->eps[i].addr_len)
			return sfs_fail(
				err, errlen,
				"endpoints[%zu]: empty protocol or address", i);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(m->eps[i].protocol, m->eps[j].protocol))
				return sfs_fail(err, errlen,
						"endpoints[%zu]: protocol %s "
						"listed twice",
						i, m->eps[i].protocol);
	}
	for (size_t i = 0; i < m->nregions; i++) {
		const struct sfs_region *r = &m->regions[i];
		if (r->len == 0)
			return sfs_fail(err, errlen, "regions[%zu]: length 0",
					i);
		for (size_t j = 0; j < m->neps; j++)
			if (r->rem[j].raddr > UINT64_MAX - r->len)
				return sfs_fail(
					err, errlen,
					"regions[%zu].remote[%zu]: length "
					"%" PRIu64 " at address 0x%" PRIx64
					" wraps",
					i, j, r->len, r->rem[j].raddr);
	}
	if (!(set = json_object()))
		return -ENOMEM;
	/* Directories first (value -1), then files (their index). */
	for (size_t i = 0; i < m->ndirs && !rc; i++) {
		const char *p = m->dirs[i];
		if (sfs_path_check(p, &why))
			rc = sfs_fail(err, errlen, "dirs[%zu] '%.64s': %s", i,
				      p, why);
		else if (json_object_get(set, p))
			rc = sfs_fail(err, errlen,
				      "dirs[%zu] '%.64s': duplicate", i, p);
		else if (!parent_is_dir(set, p))
			rc = sfs_fail(
				err, errlen,
				"dirs[%zu] '%.64s': parent not listed before "
				"it",
				i, p);
		else
			rc = json_object_set_new(set, p, json_integer(-1))
				     ? -ENOMEM
				     : 0;
	}
	for (size_t i = 0; i < m->nfiles && !rc; i++) {
		const char *p = m->files[i].path;
		if (sfs_path_check(p, &why))
			rc = sfs_fail(err, errlen,
				      "files[%zu].path '%.64s': %s", i, p, why);
		else if (json_object_get(set, p))
			rc = sfs_fail(err, errlen,
				      "files[%zu].path '%.64s': duplicate", i,
				      p);
		else if (!parent_is_dir(set, p))
			rc = sfs_fail(
				err, errlen,
				"files[%zu].path '%.64s': parent directory "
				"not listed",
				i, p);
		else if (json_object_set_new(set, p,
					     json_integer((json_int_t)i)))
			rc = -ENOMEM;
		else
			rc = validate_file(m, i, &total_ext, err, errlen);
	}
	json_decref(set);
	for (size_t i = 0; i < m->ntensors && !rc; i++)
		rc = validate_tensor(m, i, err, errlen);
	return rc;
}

/* ---- decode ----------------------------------------------------------- */

/* A JSON integer in [0, max]. */
static int get_u64(json_t *o, const char *key, uint64_t max, uint64_t *out)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* A "0x..." (or decimal) string holding a full 64-bit value. */
static int get_hex(json_t *o, const char *key, uint64_t *out)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v) || json_string_length(v) > 18)
		return -1;
	return sfs_parse_u64(json_string_value(v), out) ? -1 : 0;
}

static const char *get_str(json_t *o, const char *key, size_t max)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v) || json_string_length(v) > max ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return NULL;
	return json_string_value(v);
}

/* Printable ASCII only (bytes 0x20..0x7e). */
static int printable(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return 0;
	return 1;
}

static int decode_endpoints(struct sfs_manifest *m, json_t *a, char *err,
			    size_t errlen)
{
	size_t i;
	json_t *ep;

	if (!json_is_array(a) || json_array_size(a) == 0 ||
	    json_array_size(a) > SFS_MF_MAX_ENDPOINTS)
		return sfs_fail(err, errlen,
				"endpoints: missing, or not an array of 1..%d",
				SFS_MF_MAX_ENDPOINTS);
	json_array_foreach (a, i, ep) {
		const char *proto, *prov, *addr, *compat = "";
		uint8_t buf[SFS_MF_ADDR_MAX];
		size_t n;
		if (!json_is_object(ep))
			return sfs_fail(err, errlen,
					"endpoints[%zu]: not an object", i);
		proto = get_str(ep, "protocol", sizeof(m->eps[0].protocol) - 1);
		prov = get_str(ep, "provider", sizeof(m->eps[0].provider) - 1);
		addr = get_str(ep, "address", 2 * SFS_MF_ADDR_MAX);
		if (!proto || !*proto)
			return sfs_fail(
				err, errlen,
				"endpoints[%zu].protocol: missing, empty or "
				"too long",
				i);
		if (!prov)
			return sfs_fail(
				err, errlen,
				"endpoints[%zu].provider: missing or too "
				"long",
				i);
		if (!addr || sfs_hex_decode(addr, buf, sizeof(buf), &n) ||
		    n == 0)
			return sfs_fail(
				err, errlen,
				"endpoints[%zu].address: missing, or not "
				"hex of 1..%d bytes",
				i, SFS_MF_ADDR_MAX);
		/* Optional (seeds before it had none); printed in messages,
		 * so printable ASCII only. */
		if (json_object_get(ep, "compat") &&
		    (!(compat = get_str(ep, "compat",
					sizeof(m->eps[0].compat) - 1)) ||
		     !printable(compat)))
			return sfs_fail(err, errlen,
					"endpoints[%zu].compat: not a string "
					"of at most %zu printable characters",
					i, sizeof(m->eps[0].compat) - 1);
		int rc = sfs_manifest_add_endpoint(m, proto, prov, compat, buf,
						   n);
		if (rc)
			return rc;
	}
	return 0;
}

/* files[i].checksum: {"algorithm": "xxh3-64", "chunk_size": 2^k,
 * "values": 16 hex digits per chunk of the file} */
static int decode_checksum(struct sfs_manifest *m, size_t fi, json_t *cs,
			   char *err, size_t errlen)
{
	const struct sfs_mfile *f = &m->files[fi];
	const char *algo = get_str(cs, "algorithm", 16);
	uint64_t size, n;
	json_t *v = json_object_get(cs, "values");

	if (!json_is_object(cs) || !algo || strcmp(algo, "xxh3-64"))
		return sfs_fail(err, errlen,
				"files[%zu].checksum.algorithm: not xxh3-64",
				fi);
	if (get_u64(cs, "chunk_size", 1ull << SFS_MF_CSUM_MAX_SHIFT, &size) ||
	    size < (1u << SFS_MF_CSUM_MIN_SHIFT) || (size & (size - 1)))
		return sfs_fail(
			err, errlen,
			"files[%zu].checksum.chunk_size: not a power of "
			"two in 4 KiB..1 GiB",
			fi);
	uint32_t shift = (uint32_t)__builtin_ctzll(size);
	n = sfs_csum_count(f->size, shift);
	if (!json_is_string(v) || json_string_length(v) != 16 * n)
		return sfs_fail(err, errlen,
				"files[%zu].checksum.values: not %" PRIu64
				" hex values of 16 digits",
				fi, n);
	const char *hex = json_string_value(v);
	uint64_t *sums = malloc((size_t)(n ? n : 1) * sizeof(*sums));
	if (!sums)
		return -ENOMEM;
	for (uint64_t k = 0; k < n; k++) {
		uint64_t x = 0;
		for (int d = 0; d < 16; d++) {
			int c = hex[16 * k + (uint64_t)d];
			int val = c >= '0' && c <= '9'	 ? c - '0'
				  : c >= 'a' && c <= 'f' ? c - 'a' + 10
							 : -1;
			if (val < 0) {
				free(sums);
				return sfs_fail(err, errlen,
						"files[%zu].checksum.values: "
						"not lowercase hex",
						fi);
			}
			x = x << 4 | (uint64_t)val;
		}
		sums[k] = x;
	}
	int rc = sfs_manifest_set_checksums(m, fi, shift, sums, (size_t)n);
	free(sums);
	json_t *sv = json_object_get(cs, "sha256");
	if (rc || !sv)
		return rc;
	if (!json_is_string(sv) || json_string_length(sv) != 64 * n)
		return sfs_fail(err, errlen,
				"files[%zu].checksum.sha256: not %" PRIu64
				" hex values of 64 digits",
				fi, n);
	uint8_t *d = malloc(n ? 32 * n : 1);
	size_t got;
	if (!d)
		return -ENOMEM;
	if (sfs_hex_decode(json_string_value(sv), d, (size_t)(32 * n), &got) ||
	    got != 32 * n) {
		free(d);
		return sfs_fail(err, errlen,
				"files[%zu].checksum.sha256: not hex", fi);
	}
	rc = sfs_manifest_set_sha256(m, fi, d, (size_t)n);
	free(d);
	return rc;
}

static int decode_regions(struct sfs_manifest *m, json_t *a, char *err,
			  size_t errlen)
{
	size_t i, j;
	json_t *r, *rem, *x;

	if (!json_is_array(a))
		return sfs_fail(err, errlen,
				"regions: missing or not an array");
	if (json_array_size(a) > SFS_MF_MAX_REGIONS)
		return sfs_fail(err, errlen, "regions: more than %d",
				SFS_MF_MAX_REGIONS);
	json_array_foreach (a, i, r) {
		uint64_t id, len, addr, key;
		uint32_t got;
		if (!json_is_object(r))
			return sfs_fail(err, errlen,
					"regions[%zu]: not an object", i);
		if (get_u64(r, "id", UINT32_MAX, &id) || id != i)
			return sfs_fail(err, errlen,
					"regions[%zu].id: missing or not %zu",
					i, i);
		if (get_u64(r, "length", INT64_MAX, &len) || len == 0)
			return sfs_fail(err, errlen,
					"regions[%zu].length: missing or not a "
					"positive integer",
					i);
		rem = json_object_get(r, "remote");
		if (!json_is_array(rem) || json_array_size(rem) != m->neps)
			return sfs_fail(
				err, errlen,
				"regions[%zu].remote: missing, or not one "
				"entry per endpoint (%zu)",
				i, m->neps);
		int rc = sfs_manifest_add_region(m, len, &got);
		if (rc)
			return rc;
		json_array_foreach (rem, j, x) {
			if (!json_is_object(x) || get_hex(x, "address", &addr))
				return sfs_fail(
					err, errlen,
					"regions[%zu].remote[%zu].address: "
					"missing or not a 64-bit hex string",
					i, j);
			if (json_object_get(x, "raw_key")) {
				const char *raw = get_str(
					x, "raw_key", 2 * SFS_MF_RAWKEY_MAX);
				uint8_t bytes[SFS_MF_RAWKEY_MAX];
				size_t n;
				if (!raw ||
				    sfs_hex_decode(raw, bytes, sizeof(bytes),
						   &n) ||
				    n == 0)
					return sfs_fail(
						err, errlen,
						"regions[%zu].remote[%zu]."
						"raw_key: not hex of 1..%d "
						"bytes",
						i, j, SFS_MF_RAWKEY_MAX);
				rc = sfs_manifest_set_remote_raw(
					m, got, j, addr, bytes, n);
				if (rc)
					return rc;
				continue;
			}
			if (get_hex(x, "key", &key))
				return sfs_fail(
					err, errlen,
					"regions[%zu].remote[%zu].key: "
					"missing or not a 64-bit hex string",
					i, j);
			sfs_manifest_set_remote(m, got, j, addr, key);
		}
	}
	return 0;
}

static int decode_extent(struct sfs_manifest *m, size_t fi, size_t j, json_t *e,
			 char *err, size_t errlen)
{
	struct sfs_mfile *f = &m->files[fi];
	json_t *in;

	if (!json_is_object(e))
		return sfs_fail(err, errlen,
				"files[%zu].extents[%zu]: not an "
				"object",
				fi, j);
	in = json_object_get(e, "inline");
	if (in) {
		size_t n = json_string_length(in), got;
		if (!json_is_string(in) || n == 0)
			return sfs_fail(err, errlen,
					"files[%zu].extents[%zu].inline: not a "
					"non-empty string",
					fi, j);
		uint8_t *buf = malloc(n / 4 * 3 + 3);
		if (!buf)
			return -ENOMEM;
		if (sfs_b64_decode(json_string_value(in), n, buf, &got) ||
		    got == 0 || f->size > SFS_MF_FILE_MAX - got) {
			free(buf);
			return sfs_fail(err, errlen,
					"files[%zu].extents[%zu].inline: not "
					"valid base64 of 1 or more bytes",
					fi, j);
		}
		int rc = sfs_manifest_add_inline(m, fi, buf, got);
		free(buf);
		return rc;
	}
	uint64_t region, off, len;
	if (get_u64(e, "region", UINT32_MAX, &region))
		return sfs_fail(
			err, errlen,
			"files[%zu].extents[%zu]: neither 'inline' nor a "
			"valid 'region'",
			fi, j);
	if (get_u64(e, "offset", INT64_MAX, &off))
		return sfs_fail(err, errlen,
				"files[%zu].extents[%zu].offset: missing or "
				"invalid",
				fi, j);
	if (get_u64(e, "length", INT64_MAX, &len) || len == 0 ||
	    f->size > SFS_MF_FILE_MAX - len)
		return sfs_fail(
			err, errlen,
			"files[%zu].extents[%zu].length: missing, zero or "
			"too large",
			fi, j);
	return sfs_manifest_add_remote(m, fi, (uint32_t)region, off, len);
}

/* Optional "mtime_ns" and "mode" of @o (named @what in errors). */
static int decode_meta(json_t *o, struct sfs_mmeta *mm, const char *what,
		       char *err, size_t errlen)
{
	json_t *t = json_object_get(o, "mtime_ns");
	json_t *md = json_object_get(o, "mode");
	if (!t && !md)
		return 0;
	if (!json_is_integer(t))
		return sfs_fail(err, errlen,
				"%s.mtime_ns: missing or not an "
				"integer",
				what);
	if (!json_is_integer(md) || json_integer_value(md) < 0 ||
	    json_integer_value(md) > 07777)
		return sfs_fail(err, errlen,
				"%s.mode: missing or not permission bits "
				"(0..4095)",
				what);
	sfs_mmeta_set(mm, (int64_t)json_integer_value(t),
		      (uint32_t)json_integer_value(md));
	return 0;
}

static int decode_files(struct sfs_manifest *m, json_t *a, char *err,
			size_t errlen)
{
	size_t i, j, total = 0;
	json_t *f, *e;

	if (!json_is_array(a))
		return sfs_fail(err, errlen, "files: missing or not an array");
	if (json_array_size(a) > SFS_MF_MAX_FILES)
		return sfs_fail(err, errlen, "files: more than %d",
				SFS_MF_MAX_FILES);
	json_array_foreach (a, i, f) {
		const char *path;
		uint64_t size;
		json_t *ext;
		size_t idx;
		int rc;

		if (!json_is_object(f))
			return sfs_fail(err, errlen,
					"files[%zu]: not an object", i);
		path = get_str(f, "path", SFS_MF_PATH_MAX);
		if (!path)
			return sfs_fail(
				err, errlen,
				"files[%zu].path: missing, not a string or "
				"too long",
				i);
		if (get_u64(f, "size", SFS_MF_FILE_MAX, &size))
			return sfs_fail(
				err, errlen,
				"files[%zu].size: missing or out of range", i);
		ext = json_object_get(f, "extents");
		/* A re-seeder's thin manifest leaves them out: it serves
		 * what its holdings say, and the asker has the content's
		 * bytes and layout from the whole manifest. */
		int bare = !ext && m->thin && m->holdings;
		if (!json_is_array(ext) && !bare)
			return sfs_fail(err, errlen,
					"files[%zu].extents: missing or not an "
					"array",
					i);
		total += json_array_size(ext);
		if (total > SFS_MF_MAX_EXTENTS)
			return sfs_fail(err, errlen,
					"files: more than %d extents in all",
					SFS_MF_MAX_EXTENTS);
		if ((rc = sfs_manifest_add_file(m, path, &idx)))
			return rc;
		if (get_hex(f, "xxh3", &m->files[idx].xxh3))
			return sfs_fail(err, errlen,
					"files[%zu].xxh3: missing or not a "
					"64-bit hex string (the file's digest)",
					i);
		m->files[idx].has_xxh3 = 1;
		char what[32];
		snprintf(what, sizeof(what), "files[%zu]", i);
		if ((rc = decode_meta(f, &m->files[idx].meta, what, err,
				      errlen)))
			return rc;
		json_array_foreach (ext, j, e) {
			if ((rc = decode_extent(m, idx, j, e, err, errlen)))
				return rc;
		}
		if (bare)
			m->files[idx].size = size;
		if (m->files[idx].size != size)
			return sfs_fail(err, errlen,
					"files[%zu].size: says %" PRIu64
					", extents cover %" PRIu64,
					i, size, m->files[idx].size);
		json_t *cs = json_object_get(f, "checksum");
		if (cs && (rc = decode_checksum(m, idx, cs, err, errlen)))
			return rc;
	}
	return 0;
}

/* Optional "identity": checked against the manifest and its id. */
static int decode_identity(struct sfs_manifest *m, json_t *root, char *err,
			   size_t errlen)
{
	json_t *o = json_object_get(root, "identity");
	char sid[SFS_ID_SHORT + 1];

	if (o) {
		char *text = json_dumps(o, JSON_COMPACT);
		if (!text)
			return -ENOMEM;
		int rc = sfs_identity_from_json(&m->id, text, strlen(text), err,
						errlen);
		free(text);
		if (rc)
			return rc;
		if (strcmp(m->id.model, m->model))
			return sfs_fail(err, errlen,
					"identity.model: '%s', the manifest's "
					"model is '%s'",
					m->id.model, m->model);
		if (m->id.generation != m->generation)
			return sfs_fail(err, errlen,
					"identity.generation: %" PRIu64
					", the manifest's is %" PRIu64,
					m->id.generation, m->generation);
	}
	if (sfs_identity_short_id(&m->id, sid))
		return -ENOMEM;
	if (o) {
		const char *said = get_str(root, "identity_id", SFS_ID_SHORT);
		if (!said || strcmp(said, sid))
			return sfs_fail(
				err, errlen,
				"identity_id: '%s' is not the identity's "
				"id %s",
				said ? said : "(missing)", sid);
	}
	memcpy(m->id_short, sid, sizeof(sid));
	return 0;
}

int sfs_manifest_layout_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= SFS_MF_LAYOUT_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._:+-", s[i]))
			return 0;
	return 1;
}

/* The optional members of tensor @i: "xxh3", "layout". */
static int decode_tensor_extras(struct sfs_mtensor *mt, size_t i, json_t *t,
				char *err, size_t errlen)
{
	json_t *v;
	if (json_object_get(t, "xxh3")) {
		if (get_hex(t, "xxh3", &mt->xxh3))
			return sfs_fail(err, errlen,
					"tensors[%zu].xxh3: not a 64-bit hex "
					"string",
					i);
		mt->has_xxh3 = 1;
	}
	if ((v = json_object_get(t, "layout"))) {
		const char *l = get_str(t, "layout", SFS_MF_LAYOUT_MAX - 1);
		if (!l || !sfs_manifest_layout_ok(l))
			return sfs_fail(err, errlen,
					"tensors[%zu].layout: not 1-63 of "
					"[A-Za-z0-9._:+-]",
					i);
		strcpy(mt->layout, l);
	}
	return 0;
}

static int decode_tensors(struct sfs_manifest *m, json_t *a, char *err,
			  size_t errlen)
{
	json_t *byname, *t;
	size_t i;
	int rc = 0;

	if (!json_is_array(a))
		return sfs_fail(err, errlen,
				"tensors: missing or not an array");
	if (json_array_size(a) > SFS_MF_MAX_TENSORS)
		return sfs_fail(err, errlen, "tensors: more than %d",
				SFS_MF_MAX_TENSORS);
	if (!(byname = json_object()))
		return -ENOMEM;
	for (i = 0; i < m->nfiles && !rc; i++)
		if (json_object_set_new(byname, m->files[i].path,
					json_integer((json_int_t)i)))
			rc = -ENOMEM;
	json_array_foreach (a, i, t) {
		uint64_t shape[SFS_ST_MAX_DIMS], off, len;
		const char *name, *dtype, *file;
		json_t *sh, *fi;

		if (rc)
			break;
		if (!json_is_object(t)) {
			rc = sfs_fail(err, errlen,
				      "tensors[%zu]: not an object", i);
			break;
		}
		name = get_str(t, "name", SFS_ST_NAME_MAX);
		dtype = get_str(t, "dtype", SFS_DTYPE_MAX - 1);
		file = get_str(t, "file", SFS_MF_PATH_MAX);
		sh = json_object_get(t, "shape");
		fi = file ? json_object_get(byname, file) : NULL;
		if (!name)
			rc = sfs_fail(err, errlen,
				      "tensors[%zu].name: missing or "
				      "invalid",
				      i);
		else if (!dtype)
			rc = sfs_fail(err, errlen,
				      "tensors[%zu].dtype: missing or "
				      "invalid",
				      i);
		else if (!fi)
			rc = sfs_fail(
				err, errlen,
				"tensors[%zu].file: missing or not a file of "
				"the manifest",
				i);
		else if (!json_is_array(sh) ||
			 json_array_size(sh) > SFS_ST_MAX_DIMS)
			rc = sfs_fail(
				err, errlen,
				"tensors[%zu].shape: missing or more than %d "
				"dims",
				i, SFS_ST_MAX_DIMS);
		else if (get_u64(t, "offset", INT64_MAX, &off) ||
			 get_u64(t, "length", INT64_MAX, &len))
			rc = sfs_fail(err, errlen,
				      "tensors[%zu]: offset/length missing or "
				      "invalid",
				      i);
		if (rc)
			break;
		for (size_t d = 0; d < json_array_size(sh) && !rc; d++) {
			json_t *v = json_array_get(sh, d);
			if (!json_is_integer(v) || json_integer_value(v) < 0)
				rc = sfs_fail(err, errlen,
					      "tensors[%zu].shape[%zu]: not a "
					      "non-negative integer",
					      i, d);
			else
				shape[d] = (uint64_t)json_integer_value(v);
		}
		if (!rc)
			rc = sfs_manifest_add_tensor(
				m, name, dtype, (uint32_t)json_array_size(sh),
				shape, (size_t)json_integer_value(fi), off,
				len);
		if (!rc)
			rc = decode_tensor_extras(&m->tensors[m->ntensors - 1],
						  i, t, err, errlen);
	}
	json_decref(byname);
	return rc;
}

/* "signature": {"algorithm": "ed25519", "key": ID, "value": BASE64} */
static int decode_signature(struct sfs_manifest *m, json_t *o, char *err,
			    size_t errlen)
{
	if (!o)
		return 0;
	const char *algo = get_str(o, "algorithm", 16),
		   *id = get_str(o, "key", SFS_SIGN_ID_LEN),
		   *val = get_str(o, "value", 128);
	uint8_t sig[128 / 4 * 3];
	size_t n = 0;
	if (!json_is_object(o) || !algo || strcmp(algo, "ed25519"))
		return sfs_fail(err, errlen,
				"signature.algorithm: not ed25519");
	if (!id || strlen(id) != SFS_SIGN_ID_LEN ||
	    strspn(id, "0123456789abcdef") != SFS_SIGN_ID_LEN)
		return sfs_fail(err, errlen,
				"signature.key: not %d lowercase hex digits",
				SFS_SIGN_ID_LEN);
	if (!val || sfs_b64_decode(val, strlen(val), sig, &n) ||
	    n != SFS_SIGN_LEN)
		return sfs_fail(err, errlen,
				"signature.value: not %d bytes of base64",
				SFS_SIGN_LEN);
	memcpy(m->sig, sig, SFS_SIGN_LEN);
	memcpy(m->sig_key, id, SFS_SIGN_ID_LEN + 1);
	m->has_sig = 1;
	return 0;
}

int sfs_manifest_signer_ok(const char *s)
{
	size_t n = strlen(s);
	return n && n <= SFS_MF_SIGNER_MAX &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			 "0123456789._:-") == n;
}

/* "valid_until", "signer", "signer_run" (docs/manifest.md): optional,
 * each checked when there. */
static int decode_signed_extras(struct sfs_manifest *m, json_t *root, char *err,
				size_t errlen)
{
	json_t *v = json_object_get(root, "valid_until");
	if (v && (!json_is_integer(v) || json_integer_value(v) <= 0))
		return sfs_fail(err, errlen,
				"valid_until: not a positive integer");
	m->valid_until = v ? (int64_t)json_integer_value(v) : 0;
	if (m->valid_until && m->signed_at && m->valid_until <= m->signed_at)
		return sfs_fail(err, errlen,
				"valid_until: %" PRId64 " is not after "
				"signed_at %" PRId64,
				m->valid_until, m->signed_at);
	if ((v = json_object_get(root, "signer"))) {
		const char *s = get_str(root, "signer", SFS_MF_SIGNER_MAX);
		if (!s || !sfs_manifest_signer_ok(s))
			return sfs_fail(err, errlen,
					"signer: not 1 to %d of A-Z a-z 0-9 . "
					"_ : -",
					SFS_MF_SIGNER_MAX);
		snprintf(m->signer, sizeof(m->signer), "%s", s);
	}
	if (json_object_get(root, "signer_run") &&
	    (get_hex(root, "signer_run", &m->signer_run) || !m->signer_run))
		return sfs_fail(err, errlen,
				"signer_run: not a non-zero 64-bit hex "
				"string");
	return 0;
}

/* "skipped", if there: a count in [1, 2^32] and at most
 * SFS_MF_SKIPPED_SHOWN (and count) paths of at most
 * SFS_MF_SKIPPED_PATH_MAX bytes without NUL (any other bytes: whoever
 * shows them escapes them). */
static int decode_skipped(struct sfs_manifest *m, json_t *root, char *err,
			  size_t errlen)
{
	json_t *s = json_object_get(root, "skipped"), *paths, *v;
	size_t i;
	if (!s)
		return 0;
	if (!json_is_object(s) ||
	    get_u64(s, "count", 1ull << 32, &m->nskipped) || !m->nskipped)
		return sfs_fail(err, errlen,
				"skipped.count: not an integer in [1, 2^32]");
	paths = json_object_get(s, "paths");
	if (!json_is_array(paths) ||
	    json_array_size(paths) > SFS_MF_SKIPPED_SHOWN ||
	    json_array_size(paths) > m->nskipped)
		return sfs_fail(err, errlen,
				"skipped.paths: not an array of at most %d "
				"and at most skipped.count",
				SFS_MF_SKIPPED_SHOWN);
	json_array_foreach (paths, i, v) {
		const char *p = json_string_value(v);
		size_t n = p ? json_string_length(v) : 0;
		if (!p || n > SFS_MF_SKIPPED_PATH_MAX || strlen(p) != n)
			return sfs_fail(err, errlen,
					"skipped.paths[%zu]: not a string of "
					"at most %d bytes without NUL",
					i, SFS_MF_SKIPPED_PATH_MAX);
		memcpy(m->skipped[i], p, n + 1);
	}
	m->nskipped_shown = json_array_size(paths);
	return 0;
}

int sfs_manifest_decode(const char *json, size_t len, struct sfs_manifest **out,
			char *err, size_t errlen)
{
	struct sfs_manifest *m = NULL;
	json_t *root, *v;
	uint64_t ver, gen;
	const char *model, *rev;
	size_t i;
	int rc;

	if (len > SFS_MANIFEST_MAX)
		return sfs_fail(err, errlen,
				"manifest: %zu bytes exceeds the cap "
				"of %u",
				len, SFS_MANIFEST_MAX);
	/* Counted before jansson allocates: within the byte cap, 256 MiB
	 * of "{}," would cost it some 20 GB. */
	if (sfs_json_load(SFS_JSON_MANIFEST, json, len, JSON_REJECT_DUPLICATES,
			  &root, err, errlen))
		return -EINVAL;
	rc = -EINVAL;
	if (!json_is_object(root)) {
		sfs_fail(err, errlen, "manifest: not a JSON object");
		goto out;
	}
	if (get_u64(root, "seedfs_manifest", UINT32_MAX, &ver)) {
		sfs_fail(err, errlen,
			 "seedfs_manifest: missing version number");
		goto out;
	}
	if (ver < SFS_MANIFEST_VERSION_MIN || ver > SFS_MANIFEST_VERSION) {
		sfs_fail(err, errlen,
			 "seedfs_manifest: version %" PRIu64
			 ", this build reads %d%s",
			 ver, SFS_MANIFEST_VERSION,
			 ver < SFS_MANIFEST_VERSION_MIN
				 ? " (the seed is older than this replica: "
				   "upgrade it)"
				 : " (the seed is newer than this replica: "
				   "upgrade it)");
		goto out;
	}
	model = get_str(root, "model", SFS_MF_NAME_MAX);
	rev = get_str(root, "revision", SFS_MF_NAME_MAX);
	if (!model) {
		sfs_fail(err, errlen,
			 "model: missing, not a string or too long");
		goto out;
	}
	if (!rev) {
		sfs_fail(err, errlen, "revision: missing or too long");
		goto out;
	}
	if (get_u64(root, "generation", INT64_MAX, &gen)) {
		sfs_fail(err, errlen,
			 "generation: missing or not a non-negative "
			 "integer");
		goto out;
	}
	rc = -ENOMEM;
	if (!(m = sfs_manifest_new(model, gen)))
		goto out;
	m->version = (uint32_t)ver;
	free(m->revision);
	if (!(m->revision = strdup(rev)))
		goto out;
	/* Optional: a seed of an earlier build does not send them. */
	if (json_object_get(root, "instance") &&
	    get_hex(root, "instance", &m->instance)) {
		rc = sfs_fail(err, errlen, "instance: not a 64-bit hex string");
		goto out;
	}
	if (json_object_get(root, "grace_seconds") &&
	    get_u64(root, "grace_seconds", 1u << 30, &m->grace_seconds)) {
		rc = sfs_fail(err, errlen,
			      "grace_seconds: not a small integer");
		goto out;
	}
	if (json_object_get(root, "key_epoch") &&
	    get_u64(root, "key_epoch", 1ull << 53, &m->key_epoch)) {
		rc = sfs_fail(err, errlen, "key_epoch: not an integer");
		goto out;
	}
	if ((rc = decode_signature(m, json_object_get(root, "signature"), err,
				   errlen)))
		goto out;
	v = json_object_get(root, "signed_at");
	if (v && (!json_is_integer(v) || json_integer_value(v) <= 0)) {
		rc = sfs_fail(err, errlen, "signed_at: not a positive integer");
		goto out;
	}
	m->signed_at = v ? (int64_t)json_integer_value(v) : 0;
	if ((rc = decode_signed_extras(m, root, err, errlen)))
		goto out;
	if ((rc = decode_skipped(m, root, err, errlen)))
		goto out;
	if ((rc = decode_identity(m, root, err, errlen)))
		goto out;
	v = json_object_get(root, "holdings");
	if (v && !json_is_boolean(v)) {
		rc = sfs_fail(err, errlen, "holdings: not true or false");
		goto out;
	}
	m->holdings = json_is_true(v);
	v = json_object_get(root, "thin");
	if (v && !json_is_boolean(v)) {
		rc = sfs_fail(err, errlen, "thin: not true or false");
		goto out;
	}
	m->thin = json_is_true(v);
	if ((rc = decode_endpoints(m, json_object_get(root, "endpoints"), err,
				   errlen)))
		goto out;
	if ((rc = decode_regions(m, json_object_get(root, "regions"), err,
				 errlen)))
		goto out;
	v = json_object_get(root, "dirs");
	if (!json_is_array(v) || json_array_size(v) > SFS_MF_MAX_FILES) {
		rc = sfs_fail(err, errlen,
			      "dirs: missing, not an array or too "
			      "long");
		goto out;
	}
	for (i = 0; i < json_array_size(v); i++) {
		json_t *d = json_array_get(v, i), *po = d;
		char what[32];
		snprintf(what, sizeof(what), "dirs[%zu]", i);
		/* {"path", "mtime_ns", "mode"} */
		po = json_is_object(d) ? json_object_get(d, "path") : NULL;
		if (!json_is_string(po) ||
		    strlen(json_string_value(po)) != json_string_length(po)) {
			rc = sfs_fail(err, errlen, "%s.path: not a string",
				      what);
			goto out;
		}
		if ((rc = sfs_manifest_add_dir(m, json_string_value(po))))
			goto out;
		if ((rc = decode_meta(d, &m->dir_meta[m->ndirs - 1], what, err,
				      errlen)))
			goto out;
	}
	if ((rc = decode_meta(root, &m->root_meta, "manifest", err, errlen)))
		goto out;
	if ((rc = decode_files(m, json_object_get(root, "files"), err, errlen)))
		goto out;
	if ((rc = decode_tensors(m, json_object_get(root, "tensors"), err,
				 errlen)))
		goto out;
	if ((rc = sfs_manifest_validate(m, err, errlen)))
		goto out;
	/* The content digest must be what the files say. */
	uint64_t want;
	if (get_hex(root, "content", &m->content)) {
		rc = sfs_fail(err, errlen,
			      "content: missing or not a 64-bit hex string");
		goto out;
	}
	if ((rc = sfs_manifest_content(m, &want)))
		goto out;
	if (want != m->content)
		rc = sfs_fail(
			err, errlen,
			"content: 0x%016" PRIx64 " published, but the "
			"files' paths, sizes and digests give 0x%016" PRIx64,
			m->content, want);
out:
	json_decref(root);
	if (rc) {
		sfs_manifest_free(m);
		return rc;
	}
	*out = m;
	return 0;
}
