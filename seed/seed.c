/* SPDX-License-Identifier: MIT */
#include "seed.h"

#include "common/log.h"
#include "common/util.h"
#include "metadata/manifest.h"
#include "metadata/safetensors.h"
#include "seed/walk.h"
#include "transports/transport.h"

#include <errno.h>
#include <xxhash.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEED_INLINE_HDR_MAX (16u << 20) /* larger headers stay remote */

struct seed_file {
	void *map; /* whole file, read-only; NULL when empty */
	uint64_t size;
	size_t fidx;	   /* index in the manifest */
	uint64_t data_off; /* safetensors: bytes of header to inline */
	size_t nmr;
	struct sfs_xport_mr **mr; /* piece p, transport t: [p * nx + t] */
};

struct sfs_seed {
	size_t nx; /* transports served, = manifest endpoints, same order */
	struct sfs_xport *x[SFS_MF_MAX_ENDPOINTS];
	int writable; /* some transport needs writable memory */
	char protocols[SFS_MF_MAX_ENDPOINTS * 32];
	struct sfs_manifest *m;
	char *json;
	size_t json_len;
	size_t nfiles;
	struct seed_file *files;
	uint64_t total_bytes;
};

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Validate a safetensors file; add its tensors to the manifest. */
static int add_safetensors(struct sfs_seed *s, size_t fidx, const char *rel,
			   const uint8_t *map, uint64_t size,
			   uint64_t *data_off, char *err, size_t errlen)
{
	struct sfs_st_header *h;
	char why[400];
	uint64_t n;
	int rc;

	rc = sfs_st_header_len(map, size, &n, why, sizeof(why));
	if (!rc)
		rc = sfs_st_parse((const char *)map + 8, n, size, &h, why,
				  sizeof(why));
	if (rc) {
		snprintf(err, errlen, "refusing %s: %s", rel, why);
		return rc;
	}
	for (size_t i = 0; i < h->ntensors && !rc; i++) {
		const struct sfs_st_tensor *t = &h->tensors[i];
		rc = sfs_manifest_add_tensor(
			s->m, t->name, t->dtype, t->ndim, t->shape, fidx,
			h->data_off + t->begin, t->end - t->begin);
	}
	*data_off = h->data_off;
	sfs_st_free(h);
	return rc;
}

/* Register @f in pieces; each piece becomes one manifest region. */
/*
 * Some providers (libfabric verbs under rxm) add local write access to
 * every registration, and the kernel cannot pin read-only memory for
 * that (EFAULT).  Find out once per transport with one page of
 * read-only memory, which fails the same way a read-only file mapping
 * does (measured on soft-RoCE).
 */
static int needs_writable(struct sfs_xport *x)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct sfs_xport_mr *mr;
	char *p = mmap(NULL, (size_t)pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (p == MAP_FAILED)
		return 0;
	(void)*(volatile char *)p; /* map it */
	int rc = sfs_xport_mr_reg(x, p, (size_t)pg, SFS_XPORT_REMOTE_READ, &mr);
	if (!rc)
		sfs_xport_mr_dereg(mr);
	munmap(p, (size_t)pg);
	return rc == -EFAULT;
}

/* Map @f again, privately and writable: copy on write when pinned,
 * nothing ever writes through it.  Remote peers still only read. */
static int map_writable(struct seed_file *f, const char *abs)
{
	int fd = open(abs, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	void *p =
		mmap(NULL, f->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	munmap(f->map, f->size);
	f->map = p;
	return 0;
}

/* Register @f in pieces with every transport; each piece becomes one
 * region with one remote address and key per endpoint. */
static int register_file(struct sfs_seed *s, struct seed_file *f,
			 uint64_t piece, uint32_t shift, const uint64_t *sums,
			 uint32_t *first)
{
	size_t n = (size_t)((f->size + piece - 1) / piece);
	int rc;

	if (!(f->mr = calloc(n * s->nx, sizeof(f->mr[0]))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint64_t off = i * piece;
		uint64_t len = SFS_MIN(piece, f->size - off);
		uint32_t id;
		rc = sfs_manifest_add_region(s->m, len, &id);
		if (rc)
			return rc;
		if (i == 0)
			*first = id;
		/* Pieces are whole checksum chunks: a slice of the file's. */
		if (sums && (rc = sfs_manifest_set_checksums(
				     s->m, id, shift, sums + (off >> shift),
				     (size_t)sfs_csum_count(len, shift))))
			return rc;
		for (size_t t = 0; t < s->nx; t++) {
			struct sfs_xport_mr **mr = &f->mr[i * s->nx + t];
			uint8_t raw[SFS_XPORT_RAWKEY_MAX];
			uint64_t raddr, key;
			size_t rl;
			rc = sfs_xport_mr_reg(s->x[t], (char *)f->map + off,
					      len, SFS_XPORT_REMOTE_READ, mr);
			if (rc)
				return rc;
			f->nmr = i * s->nx + t + 1;
			sfs_xport_mr_export(*mr, &raddr, &key, raw, &rl);
			if (rl)
				rc = sfs_manifest_set_remote_raw(
					s->m, id, t, raddr, raw, rl);
			else
				sfs_manifest_set_remote(s->m, id, t, raddr,
							key);
			if (rc)
				return rc;
		}
	}
	return 0;
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

/* Pass 1: map the file, validate it, list it and its tensors. */
static int map_file(struct sfs_seed *s, const struct sfs_walk_entry *e,
		    struct seed_file *f, char *err, size_t errlen)
{
	struct stat st;
	int fd, rc;

	rc = sfs_manifest_add_file(s->m, e->rel, &f->fidx);
	if (rc)
		return rc;
	fd = open(e->abs, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s: %s", e->rel,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	f->size = (uint64_t)st.st_size;
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
	if (ends_with(e->rel, ".safetensors")) {
		rc = add_safetensors(s, f->fidx, e->rel, f->map, f->size,
				     &f->data_off, err, errlen);
		if (f->data_off > SEED_INLINE_HDR_MAX)
			f->data_off = 0;
	}
	return rc;
}

/* Pass 2: small files inline; others registered, header inline. */
static int publish_file(struct sfs_seed *s, const struct sfs_seed_cfg *cfg,
			const struct sfs_walk_entry *e, struct seed_file *f,
			char *err, size_t errlen)
{
	uint32_t first = 0;
	int rc;

	if (f->size == 0)
		return 0;
	if (f->size <= cfg->inline_max) {
		rc = sfs_manifest_add_inline(s->m, f->fidx, f->map, f->size);
		munmap(f->map, f->size);
		f->map = NULL;
		return rc;
	}
	/* Checksums of what is on disk, before anything else happens. */
	uint64_t *sums = NULL;
	if (cfg->csum_shift) {
		uint64_t cs = 1ull << cfg->csum_shift;
		size_t n = (size_t)sfs_csum_count(f->size, cfg->csum_shift);
		if (!(sums = malloc(n * sizeof(*sums))))
			return -ENOMEM;
		for (size_t k = 0; k < n; k++)
			sums[k] = XXH3_64bits(
				(const char *)f->map + k * cs,
				(size_t)SFS_MIN(cs, f->size - k * cs));
	}
	int corrupt = cfg->test_corrupt_path &&
		      !strcmp(cfg->test_corrupt_path, e->rel) &&
		      cfg->test_corrupt_off < f->size;
	rc = s->writable || corrupt ? map_writable(f, e->abs) : 0;
	if (!rc && corrupt) {
		((volatile uint8_t *)f->map)[cfg->test_corrupt_off] ^= 0xff;
		SFS_LOG(SFS_WARN, "seed",
			"test: published byte %" PRIu64 " of %s is corrupt",
			cfg->test_corrupt_off, e->rel);
	}
	if (!rc)
		rc = register_file(s, f, cfg->mr_max, cfg->csum_shift, sums,
				   &first);
	free(sums);
	if (rc) {
		snprintf(err, errlen, "cannot register %s with protocol %s: %s",
			 e->rel, s->protocols, strerror(-rc));
		return rc;
	}
	/* The published file is byte-identical: the header inline, the
	 * rest remote ranges over the file's own registration. */
	if (f->data_off)
		rc = sfs_manifest_add_inline(s->m, f->fidx, f->map,
					     f->data_off);
	if (!rc)
		rc = add_remote_range(s->m, f->fidx, first, cfg->mr_max,
				      f->data_off, f->size);
	return rc;
}

/*
 * Open every protocol of @cfg->protocol ("tcp", "tcp,rdma", "auto"), one
 * manifest endpoint each, in that order.
 */
static int open_transports(struct sfs_seed *s, const struct sfs_seed_cfg *cfg,
			   char *err, size_t errlen)
{
	char list[256], *save = NULL;
	size_t o = 0;

	snprintf(list, sizeof(list), "%s", cfg->protocol);
	for (char *p = strtok_r(list, ",", &save); p;
	     p = strtok_r(NULL, ",", &save)) {
		struct sfs_xport_cfg xc = {.protocol = p,
					   .role = SFS_XPORT_SEED,
					   .node = cfg->fabric_node,
					   .timeout_ms = cfg->timeout_ms};
		struct sfs_xport_info info;
		int rc;
		if (s->nx == SFS_MF_MAX_ENDPOINTS) {
			snprintf(err, errlen, "more than %d protocols",
				 SFS_MF_MAX_ENDPOINTS);
			return -E2BIG;
		}
		rc = sfs_xport_open(&xc, &s->x[s->nx], err, errlen);
		if (rc)
			return rc;
		sfs_xport_info(s->x[s->nx], &info);
		if (sfs_manifest_endpoint(s->m, info.protocol) >= 0) {
			snprintf(err, errlen, "protocol %s listed twice",
				 info.protocol);
			sfs_xport_close(s->x[s->nx]);
			return -EINVAL;
		}
		rc = sfs_manifest_add_endpoint(s->m, info.protocol,
					       info.provider, info.addr,
					       info.addr_len);
		if (rc) {
			sfs_xport_close(s->x[s->nx]);
			return rc;
		}
		if (needs_writable(s->x[s->nx]) && !s->writable) {
			s->writable = 1;
			SFS_LOG(SFS_INFO, "seed",
				"protocol %s registers memory with local write "
				"access: model files are mapped privately and "
				"writable (copied when registered)",
				info.protocol);
		}
		o += (size_t)snprintf(s->protocols + o,
				      sizeof(s->protocols) - o, "%s%s",
				      s->nx ? "," : "", info.protocol);
		s->nx++;
	}
	if (!s->nx) {
		snprintf(err, errlen, "no protocol given");
		return -EINVAL;
	}
	return 0;
}

int sfs_seed_open(const struct sfs_seed_cfg *cfg, struct sfs_seed **out,
		  char *err, size_t errlen)
{
	struct sfs_walk *w = NULL;
	struct sfs_seed *s;
	char *name_buf = NULL;
	const char *name = cfg->name;
	int rc;

	if (!(s = calloc(1, sizeof(*s))))
		return -ENOMEM;
	rc = sfs_walk_dir(cfg->model_dir, &w, err, errlen);
	if (rc)
		goto err;
	if (!name) {
		char *tmp = strdup(cfg->model_dir);
		if (!tmp) {
			rc = -ENOMEM;
			goto err;
		}
		/* basename of the path without trailing slashes */
		size_t l = strlen(tmp);
		while (l > 1 && tmp[l - 1] == '/')
			tmp[--l] = '\0';
		name_buf = strdup(basename(tmp));
		free(tmp);
		name = name_buf;
	}
	const char *why;
	if (!name || sfs_path_check(name, &why) || strchr(name, '/')) {
		snprintf(err, errlen,
			 "model name '%s' is not a valid directory name; use "
			 "--name",
			 name ? name : "");
		rc = -EINVAL;
		goto err;
	}

	rc = -ENOMEM;
	if (!(s->m = sfs_manifest_new(name, 1)))
		goto err;
	if (!(s->files = calloc(w->n ? w->n : 1, sizeof(s->files[0]))))
		goto err;
	/* Validate everything before touching the fabric: a bad file is
	 * the one line the user sees. */
	for (size_t i = 0; i < w->n; i++) {
		const struct sfs_walk_entry *e = &w->e[i];
		if (e->type == SFS_WALK_DIR) {
			rc = sfs_manifest_add_dir(s->m, e->rel);
		} else {
			rc = map_file(s, e, &s->files[s->nfiles], err, errlen);
			s->nfiles++;
		}
		if (rc)
			goto err_msg;
	}

	rc = open_transports(s, cfg, err, errlen);
	if (rc)
		goto err;
	for (size_t i = 0, k = 0; i < w->n; i++) {
		const struct sfs_walk_entry *e = &w->e[i];
		if (e->type != SFS_WALK_FILE)
			continue;
		rc = publish_file(s, cfg, e, &s->files[k++], err, errlen);
		if (rc)
			goto err_msg;
	}
	char why2[400];
	rc = sfs_manifest_validate(s->m, why2, sizeof(why2));
	if (rc) {
		snprintf(err, errlen, "manifest self-check failed: %s", why2);
		goto err;
	}
	rc = sfs_manifest_encode(s->m, &s->json, &s->json_len);
	if (rc)
		goto err;
	if (s->json_len > SFS_MANIFEST_MAX) {
		snprintf(err, errlen,
			 "manifest of %zu bytes exceeds the cap of %u: too "
			 "many files or tensors",
			 s->json_len, SFS_MANIFEST_MAX);
		rc = -E2BIG;
		goto err;
	}
	sfs_walk_free(w);
	free(name_buf);
	*out = s;
	return 0;
err_msg:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
err:
	sfs_walk_free(w);
	free(name_buf);
	sfs_seed_close(s);
	return rc;
}

void sfs_seed_manifest(const struct sfs_seed *s, const char **json, size_t *len)
{
	*json = s->json;
	*len = s->json_len;
}

const char *sfs_seed_protocol(const struct sfs_seed *s)
{
	return s->protocols;
}

int sfs_seed_accept(struct sfs_seed *s, const char *protocol, const void *hello,
		    size_t len, void *reply, size_t *rlen)
{
	ssize_t i = protocol ? sfs_manifest_endpoint(s->m, protocol) : -1;
	if (i < 0 || !sfs_xport_needs_hello(s->x[i]))
		return -EPROTONOSUPPORT;
	return sfs_xport_accept(s->x[i], hello, len, reply, rlen);
}

void sfs_seed_summary(const struct sfs_seed *s, char *buf, size_t len)
{
	char b[32];
	snprintf(buf, len,
		 "model %s generation %" PRIu64
		 ", %zu files, %s, %zu tensors, %zu regions",
		 s->m->model, s->m->generation, s->m->nfiles,
		 sfs_fmt_bytes(s->total_bytes, b, sizeof(b)), s->m->ntensors,
		 s->m->nregions);
}

void sfs_seed_close(struct sfs_seed *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nfiles; i++) {
		struct seed_file *f = &s->files[i];
		for (size_t j = 0; j < f->nmr; j++)
			sfs_xport_mr_dereg(f->mr[j]);
		free(f->mr);
		if (f->map)
			munmap(f->map, f->size);
	}
	free(s->files);
	for (size_t i = 0; i < s->nx; i++)
		sfs_xport_close(s->x[i]);
	sfs_manifest_free(s->m);
	free(s->json);
	free(s);
}
