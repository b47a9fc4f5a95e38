/* SPDX-License-Identifier: MIT */
#include "seed/publish.h"

#include "common/blob.h"
#include "common/log.h"
#include "common/util.h"
#include "control/sign.h"
#include "metadata/gguf.h"
#include "metadata/jsonlim.h"
#include "metadata/manifest.h"
#include "metadata/safetensors.h"
#include "seed/guard.h"
#include "seed/walk.h"
#include "transports/transport.h"
#include "common/xxh.h"

#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SEED_INLINE_HDR_MAX (16u << 20) /* larger headers stay remote */

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A tensor with its XXH3-64: @known, or else of its @len @bytes. */
static int add_tensor(struct sfs_manifest *m, const char *name,
		      const char *dtype, uint32_t ndim, const uint64_t *shape,
		      size_t fidx, uint64_t off, uint64_t len,
		      const void *bytes, const uint64_t *known)
{
	int rc = sfs_manifest_add_tensor(m, name, dtype, ndim, shape, fidx, off,
					 len);
	if (rc)
		return rc;
	/* For the tensor view: a loader can check one tensor. */
	struct sfs_mtensor *mt = &m->tensors[m->ntensors - 1];
	mt->xxh3 = known ? *known : XXH3_64bits(len ? bytes : "", (size_t)len);
	mt->has_xxh3 = 1;
	return 0;
}

int seed_add_tensor(struct sfs_manifest *m, const char *name, const char *dtype,
		    uint32_t ndim, const uint64_t *shape, size_t fidx,
		    uint64_t off, uint64_t len, const void *bytes)
{
	return add_tensor(m, name, dtype, ndim, shape, fidx, off, len, bytes,
			  NULL);
}

/* The error for file @rel, mapped at @map, that shrank under a read of
 * @at (-EFAULT from a guard): a refused file, never a signal. */
static int shrank(const char *rel, const void *map, const void *at, char *err,
		  size_t errlen)
{
	const uint8_t *a = at, *m = map;
	if (a >= m)
		snprintf(err, errlen,
			 "%s changed while it was read: byte %" PRIu64
			 " is gone (truncated or rewritten in place); not "
			 "published",
			 rel, (uint64_t)(a - m));
	else
		snprintf(err, errlen,
			 "%s changed while it was read (truncated or rewritten "
			 "in place); not published",
			 rel);
	return -EFAULT;
}

/* The first @len bytes of file @rel's mapping @map, copied out under a
 * guard: *out [new] (never NULL), or -EFAULT with @err set. */
static int copy_head(const char *rel, const uint8_t *map, uint64_t len,
		     uint8_t **out, char *err, size_t errlen)
{
	const void *at = NULL;
	uint8_t *b = malloc(len ? (size_t)len : 1);
	if (!b)
		return -ENOMEM;
	int rc = sfs_guard_copy(b, map, (size_t)len, &at);
	if (rc) {
		free(b);
		if (rc != -EFAULT) {
			snprintf(err, errlen, "%s: cannot guard its reads: %s",
				 rel, strerror(-rc));
			return rc;
		}
		return shrank(rel, map, at, err, errlen);
	}
	*out = b;
	return 0;
}

/* A file's tensors into the manifest, each with its XXH3 over the
 * mapping: guarded, what it adds is the manifest's. */
struct tensors_add {
	struct seed_gen *s;
	size_t fidx;
	const uint8_t *map;
	uint64_t size;			/* of the mapping: the range guarded */
	const struct sfs_st_header *st; /* or: */
	const struct sfs_gguf *gg;
	/* The file unchanged since the generation before: its tensors'
	 * XXH3 taken from there (reuse.c), or NULL. */
	const struct seed_reuse *r;
	const struct seed_file *same;
};

/* Tensor @i of the file: added, its XXH3 taken or computed. */
static int tensor_add(struct tensors_add *a, size_t i, const char *name,
		      const char *dtype, uint32_t ndim, const uint64_t *shape,
		      uint64_t off, uint64_t len)
{
	uint64_t x;
	int known = a->same &&
		    seed_reuse_tensor(a->r, a->same, i, name, off, len, &x);
	return add_tensor(a->s->m, name, dtype, ndim, shape, a->fidx, off, len,
			  a->map + off, known ? &x : NULL);
}

static int tensors_add(void *arg)
{
	struct tensors_add *a = arg;
	int rc = 0;
	for (size_t i = 0; a->st && i < a->st->ntensors && !rc; i++) {
		const struct sfs_st_tensor *t = &a->st->tensors[i];
		rc = tensor_add(a, i, t->name, t->dtype, t->ndim, t->shape,
				a->st->data_off + t->begin, t->end - t->begin);
	}
	for (size_t i = 0; a->gg && i < a->gg->ntensors && !rc; i++) {
		const struct sfs_gguf_tensor *t = &a->gg->tensors[i];
		rc = tensor_add(a, i, t->name, t->dtype, t->ndim, t->shape,
				t->off, t->len);
	}
	return rc;
}

/* Validate a safetensors file; add its tensors to the manifest.  Its
 * header is parsed from a copy: the file may change under the mapping. */
static int add_safetensors(struct seed_gen *s, size_t fidx, const char *rel,
			   const uint8_t *map, uint64_t size,
			   const struct seed_reuse *r,
			   const struct seed_file *same, uint64_t *data_off,
			   char *err, size_t errlen)
{
	struct sfs_st_header *h = NULL;
	uint8_t *first8 = NULL, *json = NULL;
	char why[400];
	uint64_t n;
	int rc;

	if ((rc = copy_head(rel, map, SFS_MIN(size, 8), &first8, err, errlen)))
		return rc;
	rc = sfs_st_header_len(first8, size, &n, why, sizeof(why));
	free(first8);
	if (!rc && (rc = copy_head(rel, map + 8, n, &json, err, errlen)))
		return rc;
	if (!rc)
		rc = sfs_st_parse((const char *)json, n, size, &h, why,
				  sizeof(why));
	free(json);
	if (rc) {
		snprintf(err, errlen, "refusing %s: %s", rel, why);
		return rc;
	}
	struct tensors_add a = {s, fidx, map, size, h, NULL, r, same};
	const void *at = NULL;
	rc = sfs_guard_run(tensors_add, &a, map, (size_t)size, &at);
	if (rc == -EFAULT)
		shrank(rel, map, at, err, errlen);
	*data_off = h->data_off;
	sfs_st_free(h);
	return rc;
}

/* A GGUF header is copied this much first, then 4 times more at a time. */
#define GGUF_HEAD_FIRST (1u << 20)

/* Validate a GGUF file; add its tensors to the manifest.  Its header is
 * parsed from a copy, as above. */
static int add_gguf(struct seed_gen *s, size_t fidx, const char *rel,
		    const uint8_t *map, uint64_t size,
		    const struct seed_reuse *r, const struct seed_file *same,
		    uint64_t *data_off, char *err, size_t errlen)
{
	struct sfs_gguf *g = NULL;
	char why[400];
	uint64_t whole = SFS_MIN(size, (uint64_t)SFS_GGUF_HEADER_MAX);
	uint64_t want = SFS_MIN(whole, (uint64_t)GGUF_HEAD_FIRST);
	int rc;
	for (;;) {
		uint8_t *head;
		if ((rc = copy_head(rel, map, want, &head, err, errlen)))
			return rc;
		rc = sfs_gguf_parse_head(head, want, size, &g, why,
					 sizeof(why));
		free(head);
		if (rc != -EAGAIN || want >= whole)
			break;
		want = SFS_MIN(whole, want * 4);
	}
	if (rc) {
		if (rc == -EINVAL || rc == -EAGAIN)
			snprintf(err, errlen, "refusing %s: %s", rel, why);
		return rc == -EAGAIN ? -EINVAL : rc;
	}
	struct tensors_add a = {s, fidx, map, size, NULL, g, r, same};
	const void *at = NULL;
	rc = sfs_guard_run(tensors_add, &a, map, (size_t)size, &at);
	if (rc == -EFAULT)
		shrank(rel, map, at, err, errlen);
	*data_off = g->data_off;
	sfs_gguf_free(g);
	return rc;
}

/* Map @f (entry @e of walk @w) again, privately and writable: copy on
 * write when pinned, nothing ever writes through it.  Remote peers still
 * only read.  The same file as before or nothing (sfs_walk_open). */
static int map_writable(const struct sfs_walk *w,
			const struct sfs_walk_entry *e, struct seed_file *f,
			char *err, size_t errlen)
{
	int fd, rc = sfs_walk_open(w, e, &fd, err, errlen);
	if (rc)
		return rc;
	void *p =
		mmap(NULL, f->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		rc = -errno;
		snprintf(err, errlen, "cannot map %s: %s", e->rel,
			 strerror(errno));
		return rc;
	}
	munmap(f->map, f->size);
	f->map = p;
	return 0;
}

/* Register the @n pieces of @f (of @piece bytes, regions @first..) with
 * every transport into @mr (n * nx entries, counted in *nmr as they
 * are made); nothing is published yet. */
static int register_pieces(struct seed_gen *s, struct seed_file *f,
			   uint64_t piece, size_t n, struct sfs_xport_mr **mr,
			   size_t *nmr)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t off = i * piece;
		uint64_t len = SFS_MIN(piece, f->size - off);
		for (size_t t = 0; t < s->nx; t++) {
			int rc = sfs_xport_mr_reg(s->x[t], (char *)f->map + off,
						  len, SFS_XPORT_REMOTE_READ,
						  &mr[i * s->nx + t]);
			if (rc)
				return rc;
			*nmr = i * s->nx + t + 1;
		}
	}
	return 0;
}

/* The remote address and key of each of @f's registrations @mr into its
 * regions of @m.  0 or -errno. */
static int publish_pieces(struct sfs_manifest *m, const struct seed_file *f,
			  size_t nx, struct sfs_xport_mr **mr)
{
	for (size_t j = 0; j < f->nmr; j++) {
		uint8_t raw[SFS_XPORT_RAWKEY_MAX];
		uint64_t raddr, key;
		size_t rl;
		uint32_t id = f->region0 + (uint32_t)(j / nx);
		int rc = 0;
		sfs_xport_mr_export(mr[j], &raddr, &key, raw, &rl);
		if (rl)
			rc = sfs_manifest_set_remote_raw(m, id, j % nx, raddr,
							 raw, rl);
		else
			sfs_manifest_set_remote(m, id, j % nx, raddr, key);
		if (rc)
			return rc;
	}
	return 0;
}

/* Register @f in pieces with every transport; each piece becomes one
 * region with one remote address and key per endpoint. */
static int register_file(struct seed_gen *s, struct seed_file *f,
			 uint64_t piece, uint32_t *first)
{
	size_t n = (size_t)((f->size + piece - 1) / piece);
	int rc;

	if (!(f->mr = calloc(n * s->nx, sizeof(f->mr[0]))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint32_t id;
		if ((rc = sfs_manifest_add_region(
			     s->m, SFS_MIN(piece, f->size - i * piece), &id)))
			return rc;
		if (i == 0)
			*first = f->region0 = id;
	}
	if ((rc = register_pieces(s, f, piece, n, f->mr, &f->nmr)))
		return rc;
	return publish_pieces(s->m, f, s->nx, f->mr);
}

int seed_file_rekey(struct seed_gen *g, struct seed_file *f, uint64_t piece,
		    struct sfs_xport_mr ***out)
{
	size_t n = f->nmr / (g->nx ? g->nx : 1), made = 0;
	struct sfs_xport_mr **mr = calloc(f->nmr ? f->nmr : 1, sizeof(*mr));
	int rc = mr ? 0 : -ENOMEM;

	if (!rc && n * g->nx != f->nmr)
		rc = -EINVAL; /* registered in part: never published */
	if (!rc)
		rc = register_pieces(g, f, piece, n, mr, &made);
	if (rc) {
		for (size_t j = 0; mr && j < made; j++)
			sfs_xport_mr_dereg(mr[j]);
		free(mr);
		return rc;
	}
	*out = mr;
	return 0;
}

int seed_file_rekey_publish(struct seed_gen *g, struct seed_file *f,
			    struct sfs_xport_mr **mr)
{
	return publish_pieces(g->m, f, g->nx, mr);
}

/* File bytes [a, b) as region extents, split at piece boundaries. */
static int add_remote_range(struct sfs_manifest *m, size_t fidx, uint32_t first,
			    uint64_t piece, uint64_t a, uint64_t b)
{
	while (a < b) {
		uint64_t k = a / piece, roff = a % piece;
		uint64_t len = SFS_MIN(b - a, piece - roff);
		int rc = sfs_manifest_add_remote(m, fidx, first + (uint32_t)k,
						 roff, len);
		if (rc)
			return rc;
		a += len;
	}
	return 0;
}

int seed_piece_publish(struct seed_gen *s, const struct sfs_seed_cfg *cfg,
		       struct seed_file *f)
{
	uint32_t first = 0;
	int rc = register_file(s, f, cfg->mr_max, &first);
	if (!rc)
		rc = add_remote_range(s->m, f->fidx, first, cfg->mr_max, 0,
				      f->size);
	return rc;
}

/* Pass 1: map the file, validate it, list it and its tensors. */
static int map_file(struct seed_gen *s, const struct sfs_walk_entry *e,
		    struct seed_file *f, const struct seed_reuse *r,
		    int republish, char *err, size_t errlen)
{
	const struct seed_file *same = NULL;
	struct stat st;
	int fd, rc;

	rc = sfs_manifest_add_file(s->m, e->rel, &f->fidx);
	if (rc)
		return rc;
	/* The file the walk saw, or nothing: never a link, a FIFO (which
	 * would block) or another file put in its place since. */
	if ((rc = sfs_walk_open(s->w, e, &fd, err, errlen)))
		return rc;
	/* A republish's files may be taken by the next (reuse.c): their
	 * write-out started, then the time, then the stat. */
	f->reusable = republish && seed_reuse_ready(fd);
	f->read_ns = seed_reuse_now_ns();
	if (fstat(fd, &st)) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s: %s", e->rel,
			 strerror(errno));
		close(fd);
		return rc;
	}
	f->size = (uint64_t)st.st_size;
	/* What replicas show (rsync and make compare times), and what the
	 * seed watches: this inode, as it is now. */
	sfs_mmeta_set(&s->m->files[f->fidx].meta, sfs_timespec_ns(st.st_mtim),
		      st.st_mode);
	f->dev = (uint64_t)st.st_dev;
	f->ino = (uint64_t)st.st_ino;
	f->mtime_ns = sfs_timespec_ns(st.st_mtim);
	f->ctime_ns = sfs_timespec_ns(st.st_ctim);
	f->wd = -1;
	if ((same = seed_reuse_find(r, e->rel, f))) {
		/* Unchanged since it was read: when it was, and what. */
		f->read_ns = same->read_ns;
		f->same = seed_reuse_mfile(r, same);
		s->nsame++;
		s->same_bytes += f->size;
	}
	if (!(f->abs = strdup(e->abs))) {
		close(fd);
		return -ENOMEM;
	}
	if (f->size == 0) {
		close(fd);
		return 0;
	}
	/* Private and read-only: the page cache's pages, never copied (we
	 * never write), and pinnable for RDMA with remote read access
	 * alone, which a shared file mapping is not (EFAULT on 6.1). */
	f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		snprintf(err, errlen, "cannot map %s: %s", e->rel,
			 strerror(errno));
		return -errno;
	}
	s->total_bytes += f->size;
	if (ends_with(e->rel, ".safetensors") || ends_with(e->rel, ".gguf")) {
		rc = ends_with(e->rel, ".gguf")
			     ? add_gguf(s, f->fidx, e->rel, f->map, f->size, r,
					same, &f->data_off, err, errlen)
			     : add_safetensors(s, f->fidx, e->rel, f->map,
					       f->size, r, same, &f->data_off,
					       err, errlen);
		if (f->data_off > SEED_INLINE_HDR_MAX)
			f->data_off = 0;
	}
	return rc;
}

/* After its bytes were read (hashed, copied): is file @f still what was
 * mapped, untouched?  A write that shrank nothing (in place, the same
 * size, or a writer ahead of the reader) faults no read: its times
 * say it.  0, or -ESTALE with @err set. */
static int still_same(const struct seed_file *f, const char *rel, char *err,
		      size_t errlen)
{
	struct stat st;
	if (!lstat(f->abs, &st) && (uint64_t)st.st_dev == f->dev &&
	    (uint64_t)st.st_ino == f->ino && (uint64_t)st.st_size == f->size &&
	    sfs_timespec_ns(st.st_mtim) == f->mtime_ns &&
	    sfs_timespec_ns(st.st_ctim) == f->ctime_ns)
		return 0;
	snprintf(err, errlen,
		 "%s changed while it was read (written, replaced or "
		 "removed); not published",
		 rel);
	return -ESTALE;
}

/* Pass 2: small files inline; others registered, header inline. */
static int publish_file(struct seed_gen *s, const struct sfs_seed_cfg *cfg,
			const struct sfs_walk_entry *e, struct seed_file *f,
			char *err, size_t errlen)
{
	struct seed_sums ss;
	uint32_t first = 0;
	int rc;

	/* The whole file's digest (replicas keep what did not change
	 * across generations; sources of the same content are known by
	 * it) and its checksums: of what is on disk, before anything
	 * else.  Set once the file's extents are in the manifest. */
	if ((rc = seed_sums_start(&ss, cfg->csum_shift, cfg->digest_sha256)))
		return rc;
	if (f->size && f->size <= cfg->inline_max) {
		/* Small: copied out of the mapping first (under a guard),
		 * and what is hashed is what is published. */
		uint8_t *copy;
		if ((rc = copy_head(e->rel, f->map, f->size, &copy, err,
				    errlen)))
			goto out;
		munmap(f->map, f->size);
		f->map = NULL;
		rc = seed_sums_add(&ss, copy, f->size);
		if (!rc)
			rc = sfs_manifest_add_inline(s->m, f->fidx, copy,
						     f->size);
		free(copy);
		if (!rc)
			rc = still_same(f, e->rel, err, errlen);
		goto out;
	}
	if (f->size) { /* registered: one a later generation may take */
		s->nreg++;
		s->reg_bytes += f->size;
		s->nunfit += s->same_from && !f->reusable;
	}
	/* Unchanged since the generation before read it: not read. */
	rc = f->same ? 0 : seed_sums_add(&ss, f->size ? f->map : "", f->size);
	if (rc == -EFAULT)
		shrank(e->rel, f->map, ss.fault, err, errlen);
	if (rc || f->size == 0)
		goto out;
	int corrupt = cfg->test_corrupt_path &&
		      !strcmp(cfg->test_corrupt_path, e->rel) &&
		      cfg->test_corrupt_off < f->size;
	if ((s->writable || corrupt) &&
	    (rc = map_writable(s->w, e, f, err, errlen)))
		goto out;
	if (corrupt) {
		((volatile uint8_t *)f->map)[cfg->test_corrupt_off] ^= 0xff;
		SFS_LOG(SFS_WARN, "seed",
			"test: published byte %" PRIu64 " of %s is corrupt",
			cfg->test_corrupt_off, e->rel);
	}
	rc = register_file(s, f, cfg->mr_max, &first);
	if (rc) {
		snprintf(err, errlen, "cannot register %s with protocol %s: %s",
			 e->rel, s->protocols, strerror(-rc));
		goto out;
	}
	/* The published file is byte-identical: the header inline, the
	 * rest remote ranges over the file's own registration. */
	if (f->data_off) {
		uint8_t *hdr;
		rc = copy_head(e->rel, f->map, f->data_off, &hdr, err, errlen);
		if (!rc) {
			rc = sfs_manifest_add_inline(s->m, f->fidx, hdr,
						     f->data_off);
			free(hdr);
		}
	}
	if (!rc)
		rc = add_remote_range(s->m, f->fidx, first, cfg->mr_max,
				      f->data_off, f->size);
	if (!rc)
		rc = still_same(f, e->rel, err, errlen);
out:
	if (!rc)
		rc = f->same ? seed_reuse_take(s->m, f->fidx, f->same)
			     : seed_sums_finish(&ss, s->m, f->fidx);
	seed_sums_free(&ss);
	return rc;
}

#define CONFIG_JSON_MAX (4u << 20)

/* What the model's config.json says of the identity: torch_dtype, and
 * quantization_config (its quant_method, and all of it as parameters).
 * The file is published as it is whatever it holds; a config.json that
 * is not JSON only earns a warning. */
static void identity_from_config(struct seed_gen *s, const struct seed_mem *mm)
{
	const void *data = NULL;
	uint64_t size = 0;
	for (size_t i = 0, k = 0; s->w && i < s->w->n; i++) {
		if (s->w->e[i].type == SFS_WALK_DIR)
			continue;
		if (!strcmp(s->w->e[i].rel, "config.json")) {
			data = s->files[k].map;
			size = s->files[k].size;
		}
		k++;
	}
	for (size_t i = 0; mm && i < mm->nfiles; i++)
		if (!strcmp(mm->files[i].path, "config.json")) {
			data = mm->files[i].data;
			size = mm->files[i].len;
		}
	if (!data || size > CONFIG_JSON_MAX)
		return;
	/* A file's: parsed from a copy (it may change under its mapping;
	 * publishing it then fails, and says so). */
	uint8_t *copy = NULL;
	char why[256];
	if (s->w &&
	    copy_head("config.json", data, size, &copy, why, sizeof(why))) {
		SFS_LOG(SFS_WARN, "seed", "%s", why);
		return;
	}
	json_t *o;
	if (!sfs_json_load(SFS_JSON_CONFIG, (const char *)(copy ? copy : data),
			   (size_t)size, 0, &o, why, sizeof(why)) &&
	    !json_is_object(o))
		snprintf(why, sizeof(why), "config.json: not an object");
	free(copy);
	if (!json_is_object(o)) {
		SFS_LOG(SFS_WARN, "seed",
			"%s; its identity fields are not used", why);
		json_decref(o);
		return;
	}
	char err[256];
	json_t *dt = json_object_get(o, "torch_dtype");
	if (json_is_string(dt) &&
	    sfs_identity_set(&s->m->id, "dtype", json_string_value(dt), err,
			     sizeof(err)))
		SFS_LOG(SFS_WARN, "seed", "config.json torch_dtype: %s", err);
	json_t *q = json_object_get(o, "quantization_config");
	if (json_is_object(q)) {
		json_t *meth = json_object_get(q, "quant_method");
		if (json_is_string(meth) &&
		    sfs_identity_set(&s->m->id, "quant",
				     json_string_value(meth), err, sizeof(err)))
			SFS_LOG(SFS_WARN, "seed",
				"config.json quant_method: %s", err);
		char *text = json_dumps(q, JSON_COMPACT);
		if (text &&
		    sfs_identity_set_params(&s->m->id, text, err, sizeof(err)))
			SFS_LOG(SFS_WARN, "seed",
				"config.json quantization_config: %s", err);
		free(text);
	}
	json_decref(o);
}

/* The generation's identity: config.json, then --identity over it. */
static int gen_identity(struct seed_gen *s, const struct sfs_seed_cfg *cfg,
			char *err, size_t errlen)
{
	int rc = 0;
	identity_from_config(s, cfg->mem);
	if (cfg->identity) {
		char *dup = strdup(cfg->identity), *save = NULL, *tok;
		if (!dup)
			return -ENOMEM;
		for (tok = strtok_r(dup, ",", &save); tok && !rc;
		     tok = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(tok, '=');
			if (!eq) {
				rc = -EINVAL;
				snprintf(err, errlen,
					 "--identity: '%.64s' is not key=value",
					 tok);
				break;
			}
			*eq = '\0';
			if (!strcmp(tok, "model") ||
			    !strcmp(tok, "generation")) {
				rc = -EINVAL;
				snprintf(err, errlen,
					 "--identity: %s is the seed's own "
					 "(--name; generations count up)",
					 tok);
				break;
			}
			char why[300];
			rc = sfs_identity_set(&s->m->id, tok, eq + 1, why,
					      sizeof(why));
			if (rc)
				snprintf(err, errlen, "--identity: %s", why);
		}
		free(dup);
	}
	if (!rc) {
		char why[300];
		if ((rc = sfs_identity_check(&s->m->id, why, sizeof(why))))
			snprintf(err, errlen, "--identity: %s", why);
	}
	if (!rc && s->m->id.revision[0]) {
		char *r = strdup(s->m->id.revision);
		if (!r)
			return -ENOMEM;
		free(s->m->revision);
		s->m->revision = r;
	}
	return rc;
}

/* An in-memory model changes when it is committed: its files and
 * directories carry that time. */
static void mem_times(struct sfs_manifest *m)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t t = sfs_timespec_ns(now);
	sfs_mmeta_set(&m->root_meta, t, 0755);
	for (size_t i = 0; i < m->ndirs; i++)
		sfs_mmeta_set(&m->dir_meta[i], t, 0755);
	for (size_t i = 0; i < m->nfiles; i++)
		sfs_mmeta_set(&m->files[i].meta, t, 0644);
}

/* Tests only: between the walk and the opening of the files, wait
 * (10 s at most) for @flag to appear, and take it away. */
static void test_wait(const char *flag, const char *dir)
{
	SFS_LOG(SFS_WARN, "seed", "test: %s walked; waiting for %s", dir, flag);
	for (int i = 0; i < 200; i++) {
		if (!unlink(flag))
			return;
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	SFS_LOG(SFS_WARN, "seed", "test: no %s after 10 s: going on", flag);
}

int seed_gen_prepare(const struct sfs_seed_cfg *cfg, const char *name,
		     uint64_t number, uint64_t instance, uint64_t grace_s,
		     const struct seed_gen *prev, struct seed_gen **out,
		     char *err, size_t errlen)
{
	struct seed_reuse *r = NULL;
	struct seed_gen *s;
	int rc;

	if (!(s = calloc(1, sizeof(*s))))
		return -ENOMEM;
	s->number = number;
	rc = cfg->mem ? 0 : sfs_walk_dir(cfg->model_dir, &s->w, err, errlen);
	if (rc)
		goto err;
	if (s->w && cfg->test_after_walk)
		test_wait(cfg->test_after_walk, cfg->model_dir);
	rc = -ENOMEM;
	if (!(s->m = sfs_manifest_new(name, number)))
		goto err_msg;
	s->m->instance = instance;
	s->m->grace_seconds = grace_s;
	if (cfg->mem) {
		/* The identity first: the shards' headers carry it. */
		if ((rc = gen_identity(s, cfg, err, errlen)) ||
		    (rc = seed_gen_prepare_mem(s, cfg->mem, cfg->csum_shift,
					       cfg->digest_sha256, err,
					       errlen)))
			goto err;
		mem_times(s->m);
		*out = s;
		return 0;
	}
	sfs_mmeta_set(&s->m->root_meta, s->w->root_mtime_ns, s->w->root_mode);
	for (size_t i = 0; i < SFS_WALK_SKIPPED_KEPT && s->w->skipped[i]; i++)
		sfs_manifest_add_skipped(s->m, s->w->skipped[i]);
	s->m->nskipped = s->w->nskipped;
	if (!(s->files = calloc(s->w->n ? s->w->n : 1, sizeof(s->files[0]))))
		goto err_msg;
	if ((rc = seed_reuse_new(prev, cfg, &r)))
		goto err_msg;
	s->same_from = prev ? prev->number : 0;
	for (size_t i = 0; i < s->w->n; i++) {
		const struct sfs_walk_entry *e = &s->w->e[i];
		if (e->type == SFS_WALK_DIR) {
			rc = sfs_manifest_add_dir(s->m, e->rel);
			if (!rc)
				sfs_mmeta_set(&s->m->dir_meta[s->m->ndirs - 1],
					      e->mtime_ns, e->mode);
		} else {
			rc = map_file(s, e, &s->files[s->nfiles], r,
				      prev != NULL, err, errlen);
			s->nfiles++;
		}
		if (rc)
			goto err_msg;
	}
	if ((rc = gen_identity(s, cfg, err, errlen)))
		goto err_msg;
	seed_reuse_free(r);
	*out = s;
	return 0;
err_msg:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
err:
	seed_reuse_free(r);
	seed_gen_free(s);
	return rc;
}

/*
 * An in-memory model's files carry the time of the commit that changed
 * them: a file with the same path, size and hash as in the generation
 * before keeps that one's time (replicas keep its inode and page
 * cache), and so do directories that were there before.
 */
static void inherit_times(struct sfs_manifest *m, const struct sfs_manifest *p)
{
	/* Best effort: without memory, the times of this commit. */
	json_t *files = json_object(), *dirs = json_object(), *v;
	for (size_t j = 0; files && j < p->nfiles; j++)
		json_object_set_new_nocheck(files, p->files[j].path,
					    json_integer((json_int_t)j));
	for (size_t j = 0; dirs && j < p->ndirs; j++)
		json_object_set_new_nocheck(dirs, p->dirs[j],
					    json_integer((json_int_t)j));
	for (size_t i = 0; i < m->nfiles; i++) {
		struct sfs_mfile *f = &m->files[i];
		if (!(v = json_object_get(files, f->path)))
			continue;
		const struct sfs_mfile *o = &p->files[json_integer_value(v)];
		if (o->size == f->size && o->has_xxh3 && f->has_xxh3 &&
		    o->xxh3 == f->xxh3 && o->meta.has)
			f->meta = o->meta;
	}
	for (size_t i = 0; i < m->ndirs; i++) {
		if (!(v = json_object_get(dirs, m->dirs[i])))
			continue;
		const struct sfs_mmeta *o = &p->dir_meta[json_integer_value(v)];
		if (o->has)
			m->dir_meta[i] = *o;
	}
	if (p->root_meta.has)
		m->root_meta = p->root_meta;
	json_decref(files);
	json_decref(dirs);
}

int seed_gen_sign(struct sfs_manifest *m, const struct sfs_seed_cfg *cfg)
{
	char signer[SFS_MF_SIGNER_MAX + 1];
	uint32_t validity = cfg->sign_validity_s ? cfg->sign_validity_s
						 : SFS_SIGN_VALIDITY_S;
	sfs_sign_signer(signer);
	/* Signed: until when, and by which run of which host, so that a
	 * replica takes no older generation (a replay) and no signature
	 * that lapsed. */
	return sfs_sign_manifest(
		cfg->sign_key, m, signer, m->instance,
		sfs_sign_now() + cfg->test_sign_clock_s * 1000000000, validity);
}

int seed_gen_publish(struct seed_gen *s, const struct sfs_seed_cfg *cfg,
		     size_t nx, struct sfs_xport *const *x, int writable,
		     const char *protocols, char *err, size_t errlen)
{
	char why[400];
	int rc = 0;

	if (errlen)
		err[0] = '\0';
	s->nx = nx;
	s->x = x;
	s->writable = writable;
	s->protocols = protocols;
	for (size_t t = 0; t < nx && !rc; t++) {
		struct sfs_xport_info info;
		sfs_xport_info(x[t], &info);
		rc = sfs_manifest_add_endpoint(s->m, info.protocol,
					       info.provider, info.compat,
					       info.addr, info.addr_len);
	}
	if (!s->w && !rc && (rc = seed_gen_publish_mem(s, cfg)) &&
	    rc != -ENOMEM)
		snprintf(err, errlen,
			 "cannot register tensor memory with protocol %s: %s",
			 protocols, strerror(-rc));
	for (size_t i = 0, k = 0; s->w && i < s->w->n && !rc; i++) {
		const struct sfs_walk_entry *e = &s->w->e[i];
		if (e->type == SFS_WALK_FILE)
			rc = publish_file(s, cfg, e, &s->files[k++], err,
					  errlen);
	}
	/* Each file was checked once read; once more now that all are,
	 * just before the seed watches them: a file written meanwhile
	 * (another's hashing can take minutes) is not published. */
	for (size_t i = 0, k = 0; s->w && i < s->w->n && !rc; i++) {
		const struct sfs_walk_entry *e = &s->w->e[i];
		if (e->type == SFS_WALK_FILE)
			rc = still_same(&s->files[k++], e->rel, err, errlen);
	}
	if (rc) {
		if (rc == -ENOMEM)
			snprintf(err, errlen, "out of memory");
		else if (!*err)
			snprintf(err, errlen, "cannot publish: %s",
				 strerror(-rc));
		return rc;
	}
	if (!s->w && s->prev)
		inherit_times(s->m, s->prev);
	rc = sfs_manifest_validate(s->m, why, sizeof(why));
	if (rc) {
		snprintf(err, errlen, "manifest self-check failed: %s", why);
		return rc;
	}
	if ((rc = sfs_manifest_content(s->m, &s->m->content))) {
		snprintf(err, errlen, "content digest: %s", strerror(-rc));
		return rc;
	}
	if (cfg->sign_key && (rc = seed_gen_sign(s->m, cfg))) {
		snprintf(err, errlen, "cannot sign the manifest: %s",
			 strerror(-rc));
		return rc;
	}
	char *json;
	size_t json_len;
	rc = sfs_manifest_encode(s->m, &json, &json_len);
	if (rc)
		return rc;
	if (json_len > SFS_MANIFEST_MAX) {
		free(json);
		snprintf(err, errlen,
			 "manifest of %zu bytes exceeds the cap of %u: too "
			 "many files or tensors",
			 json_len, SFS_MANIFEST_MAX);
		return -E2BIG;
	}
	if ((rc = sfs_blob_wrap(json, json_len, &s->json))) {
		free(json);
		return rc;
	}
	sfs_walk_free(s->w);
	s->w = NULL;
	for (size_t i = 0; i < s->nfiles; i++)
		s->files[i].same = NULL; /* the generation before's */
	return 0;
}

/* Release @f's registrations: its keys read nothing from now on. */
static void file_mrs_release(struct seed_file *f)
{
	for (size_t j = 0; j < f->nmr; j++) {
		sfs_xport_mr_dereg(f->mr[j]);
		f->mr[j] = NULL;
	}
	f->nmr = 0;
}

int seed_gen_withdraw(struct seed_gen *g, size_t i)
{
	struct seed_file *f = &g->files[i];
	const struct sfs_mfile *mf = &g->m->files[f->fidx];
	if (f->withdrawn || !f->nmr)
		return 0;
	/* Zero pages go in place of the file's: nothing can fault on a page
	 * past a truncated end.  Its registrations stay when replicas can
	 * refuse what they read (checksums of its chunks published): a
	 * read with its keys gets zeros (on the providers that read the
	 * seed's memory through its mappings: tcp, sockets, shm), refused
	 * by checksum, an error of that one pull.  A key taken away makes
	 * the provider drop the connection, failing every pull in flight
	 * on it, of every file (docs/limits.md). */
	int keep = mf->csum_shift && mf->sums;
	if (!keep)
		file_mrs_release(f);
	if (f->map && !f->borrowed &&
	    mmap(f->map, f->size, PROT_READ,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
		 0) == MAP_FAILED) {
		SFS_LOG(SFS_WARN, "seed",
			"%s: cannot replace its mapping: %s; its keys are "
			"released (a replica reading it loses its connection)",
			mf->path, strerror(errno));
		file_mrs_release(f); /* they would still read the file */
	}
	f->withdrawn = 1;
	return 1;
}

void seed_gen_free(struct seed_gen *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nfiles; i++) {
		struct seed_file *f = &s->files[i];
		for (size_t j = 0; j < f->nmr; j++)
			sfs_xport_mr_dereg(f->mr[j]);
		free(f->mr);
		free(f->prefix);
		free(f->abs);
		if (f->map && !f->borrowed)
			munmap(f->map, f->size);
	}
	free(s->files);
	sfs_walk_free(s->w);
	sfs_manifest_free(s->m);
	sfs_blob_put(s->json);
	sfs_blob_put(s->gz);
	free(s);
}
