/* SPDX-License-Identifier: MIT */
/*
 * client.c - libseedfs's engine API (seedfs.h, sfs_client_*): a replica
 * core (replica/replica.h) with no FUSE and no tree walk, one model's
 * current generation pinned, and reads that land in the caller's
 * registered memory (sfs_cache_read_into).
 */
#include "lib/seedfs.h"

#include "cache/cache.h"
#include "lib/gpu.h"
#include "common/log.h"
#include "common/util.h"
#include "control/auth.h"
#include "control/control.h"
#include "metadata/manifest.h"
#include "control/registry.h"
#include "replica/replica.h"
#include "transports/hmem.h"
#include "transports/transport.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define CLIENT_CACHE (64ull << 20)
#define CLIENT_CACHE_MIN (16ull << 20)
#define CLIENT_TIMEOUT_MS 10000
#define CLIENT_CHUNK (1u << 20)
#define CLIENT_RD_STACK 64

struct sfs_client {
	struct sfs_replica *r;
	struct sfs_reg *reg;
	struct sfs_control_cred *cred; /* token and TLS, or NULL */
	char *seeds[SFS_REPLICA_SEEDS_MAX];
	size_t nseeds;
	char *model;
	struct sfs_view *view;	      /* referenced */
	const struct sfs_manifest *m; /* the view's */
	uint32_t set;
	struct sfs_gpu *gpu; /* reads into device memory */
};

struct sfs_client_mr {
	struct sfs_client *c;
	struct sfs_xport_mr *mr;   /* host memory */
	struct sfs_cache_dst *dst; /* host memory */
	int dev; /* CUDA device memory: its ordinal; else -1 */
	uint8_t *base;
	size_t len;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_rc;

static void curl_init(void)
{
	curl_rc = sfs_control_init();
}

/* The file of the keys manifests must be signed by (docs/security.md,
 * the verified mode): cfg->trust_key, else $SEEDFS_TRUST_KEY_FILE, else
 * NULL. */
static const char *trust_key_file(const struct sfs_client_cfg *cfg)
{
	if (cfg->trust_key)
		return cfg->trust_key;
	const char *f = getenv("SEEDFS_TRUST_KEY_FILE");
	return f && *f ? f : NULL;
}

/* sfs_client_open, whichever ABI node was called: @cfg whole. */
static int open_cfg(const struct sfs_client_cfg *cfg, const char *model,
		    struct sfs_client **out, char *err, size_t errlen)
{
	struct sfs_client *c;
	int rc;

	*out = NULL;
	snprintf(err, errlen, "out of memory");
	if (!cfg || !model || !*model) {
		snprintf(err, errlen, "no config or model name");
		return -EINVAL;
	}
	if (cfg->trust_key && !*cfg->trust_key) {
		snprintf(err, errlen, "trust_key: an empty path");
		return -EINVAL;
	}
	const char *trust = trust_key_file(cfg);
	/* Fail closed: no source is asked anything without the key. */
	if (cfg->require_signed && !trust) {
		snprintf(err, errlen,
			 "require_signed: no trust key (neither trust_key nor "
			 "$SEEDFS_TRUST_KEY_FILE): unsigned manifests are not "
			 "read");
		return -EINVAL;
	}
	if (trust && cfg->no_verify) {
		snprintf(err, errlen,
			 "no_verify cannot go with a trust key (%s): signed "
			 "digests are there to be checked",
			 trust);
		return -EINVAL;
	}
	if ((!cfg->seeds || !*cfg->seeds) && !cfg->registry) {
		snprintf(err, errlen, "neither seeds nor registry given");
		return -EINVAL;
	}
	if (cfg->log_level && sfs_log_set_level(cfg->log_level)) {
		snprintf(err, errlen,
			 "log_level: '%s' is not err, warn, info or debug",
			 cfg->log_level);
		return -EINVAL;
	}
	if (!cfg->log_level)
		sfs_log_set_level("warn");
	uint64_t cache = cfg->cache_size ? cfg->cache_size : CLIENT_CACHE;
	if (cache < CLIENT_CACHE_MIN) {
		snprintf(err, errlen, "cache_size: at least 16 MiB");
		return -EINVAL;
	}
	pthread_once(&curl_once, curl_init);
	if (curl_rc) {
		snprintf(err, errlen, "cannot initialize libcurl");
		return curl_rc;
	}
	if (!(c = calloc(1, sizeof(*c))) || !(c->model = strdup(model))) {
		rc = -ENOMEM;
		goto err_free;
	}
	int https = -1;
	if (cfg->seeds &&
	    (rc = sfs_control_parse_seeds(cfg->seeds, "seeds", c->seeds,
					  SFS_REPLICA_SEEDS_MAX, &c->nseeds,
					  &https, err, errlen)))
		goto err_free;
	struct sfs_control_cred_cfg cc = {
		.token_file = sfs_auth_file(cfg->token_file),
		.tls_ca = cfg->tls_ca,
		.tls_pin = cfg->tls_pin,
		.https = https == 1,
		/* As the mount's --trust-key: the replica's sources check
		 * every manifest against it (replica/source.c). */
		.trust_key = trust};
	if ((rc = sfs_control_cred_new(&cc, &c->cred, err, errlen)))
		goto err_free;
	if (cfg->registry) {
		struct sfs_reg_cfg rcfg = {.url = cfg->registry,
					   .ca_file = cfg->registry_ca,
					   .auth_file =
						   cfg->registry_auth_file};
		if ((rc = sfs_reg_open(&rcfg, &c->reg, err, errlen)))
			goto err_free;
	}
	struct sfs_replica_cfg rcfg = {
		.seeds = (const char *const *)c->seeds,
		.nseeds = c->nseeds,
		.only = c->model,
		.protocol = sfs_xport_choose(cfg->protocol,
					     getenv("SEEDFS_PROTOCOL")),
		.timeout_ms =
			cfg->timeout_ms ? cfg->timeout_ms : CLIENT_TIMEOUT_MS,
		.cache_size = cache,
		.chunk_size = CLIENT_CHUNK,
		.no_verify = cfg->no_verify,
		.start_ms = sfs_now_ms(),
		.who = "libseedfs",
		.registry = c->reg,
		.cred = c->cred,
	};
	if ((rc = sfs_replica_open(&rcfg, &c->r, err, errlen)))
		goto err_reg;
	sfs_replica_ready(c->r);
	if ((rc = sfs_replica_current(c->r, model, &c->view, &c->m))) {
		char seeds[512], models[512];
		snprintf(err, errlen,
			 "%s publishes no model %s (it publishes %s)",
			 sfs_replica_seeds(c->r, seeds, sizeof(seeds)), model,
			 sfs_replica_models(c->r, models, sizeof(models)));
		goto err_replica;
	}
	struct sfs_rfile rf;
	sfs_replica_rfile(c->view, 0, &rf);
	c->set = rf.set;
	/* Device reads' pieces end on checksum blocks where they can. */
	uint64_t align = CLIENT_CHUNK;
	for (size_t i = 0; i < c->m->nfiles; i++) {
		uint32_t sh = c->m->files[i].csum_shift;
		if (sh > 20 && sh <= 23 && (1ull << sh) > align)
			align = 1ull << sh;
	}
	if ((rc = sfs_gpu_new(sfs_replica_cache(c->r), sfs_replica_xport(c->r),
			      align, rcfg.timeout_ms, &c->gpu)))
		goto err_view;
	*out = c;
	return 0;

err_view:
	sfs_replica_unref(c->r, c->view);
err_replica:
	sfs_replica_close(c->r);
err_reg:
	sfs_reg_free(c->reg);
err_free:
	if (c) {
		sfs_control_cred_free(c->cred);
		for (size_t i = 0; i < c->nseeds; i++)
			free(c->seeds[i]);
		free(c->model);
		free(c);
	}
	/* The line may carry a seed's words: one line, escaped. */
	if (errlen) {
		char raw[1024];
		snprintf(raw, sizeof(raw), "%s", err);
		sfs_escape(raw, strlen(raw), err, errlen);
	}
	return rc;
}

/*
 * sfs_client_open, in two ABI nodes.  SEEDFS_0.3 (the default, what a
 * program built against this seedfs.h calls) reads the whole cfg.
 * SEEDFS_0.1 is what a program built before trust_key existed calls:
 * its cfg ends where trust_key begins, so only that much is read (and
 * $SEEDFS_TRUST_KEY_FILE still applies).
 */
#define CFG_0_1 offsetof(struct sfs_client_cfg, trust_key)

int sfs_libclient_open_0_3(const struct sfs_client_cfg *cfg, const char *model,
			   struct sfs_client **out, char *err, size_t errlen);
int sfs_libclient_open_0_1(const struct sfs_client_cfg *cfg, const char *model,
			   struct sfs_client **out, char *err, size_t errlen);
__asm__(".symver sfs_libclient_open_0_3, sfs_client_open@@SEEDFS_0.3");
__asm__(".symver sfs_libclient_open_0_1, sfs_client_open@SEEDFS_0.1");

int sfs_libclient_open_0_3(const struct sfs_client_cfg *cfg, const char *model,
			   struct sfs_client **out, char *err, size_t errlen)
{
	return open_cfg(cfg, model, out, err, errlen);
}

int sfs_libclient_open_0_1(const struct sfs_client_cfg *cfg, const char *model,
			   struct sfs_client **out, char *err, size_t errlen)
{
	struct sfs_client_cfg whole;
	memset(&whole, 0, sizeof(whole));
	if (cfg)
		memcpy(&whole, cfg, CFG_0_1);
	return open_cfg(cfg ? &whole : NULL, model, out, err, errlen);
}

void sfs_client_close(struct sfs_client *c)
{
	if (!c)
		return;
	if (c->view)
		sfs_replica_unref(c->r, c->view);
	sfs_gpu_stop(c->gpu);
	sfs_replica_close(c->r);
	sfs_gpu_free(c->gpu);
	sfs_reg_free(c->reg);
	sfs_control_cred_free(c->cred);
	for (size_t i = 0; i < c->nseeds; i++)
		free(c->seeds[i]);
	free(c->model);
	free(c);
}

void sfs_client_info(struct sfs_client *c, struct sfs_client_info *out)
{
	struct sfs_cache_stats st;
	memset(out, 0, sizeof(*out));
	out->model = c->m->model;
	out->generation = c->m->generation;
	out->identity = c->m->id_short;
	out->protocol = sfs_replica_protocol(c->r);
	out->nfiles = c->m->nfiles;
	out->ntensors = c->m->ntensors;
	for (size_t i = 0; i < c->m->nfiles; i++)
		out->bytes += c->m->files[i].size;
	sfs_cache_stats(sfs_replica_cache(c->r), &st);
	out->bytes_pulled = st.bytes_pulled;
}

int sfs_client_status(struct sfs_client *c, char *buf, size_t len,
		      size_t *needed)
{
	char *text = NULL;
	size_t n = 0;
	int rc = sfs_replica_status(c->r, &text, &n);
	if (rc)
		return rc;
	if (needed)
		*needed = n;
	if (len) {
		size_t k = n < len - 1 ? n : len - 1;
		memcpy(buf, text, k);
		buf[k] = 0;
	}
	free(text);
	return 0;
}

int sfs_client_file(struct sfs_client *c, size_t i, struct sfs_client_file *out)
{
	if (i >= c->m->nfiles)
		return -ERANGE;
	out->path = c->m->files[i].path;
	out->size = c->m->files[i].size;
	return 0;
}

int sfs_client_tensor(struct sfs_client *c, size_t i,
		      struct sfs_client_tensor *out)
{
	if (i >= c->m->ntensors)
		return -ERANGE;
	const struct sfs_mtensor *t = &c->m->tensors[i];
	memset(out, 0, sizeof(*out));
	out->name = t->name;
	out->dtype = t->dtype;
	out->ndim = t->ndim;
	for (uint32_t d = 0; d < t->ndim && d < 16; d++)
		out->shape[d] = t->shape[d];
	out->file = t->file;
	out->off = t->off;
	out->len = t->len;
	out->layout = t->layout;
	return 0;
}

int sfs_client_find(struct sfs_client *c, const char *name, size_t *i)
{
	for (size_t k = 0; k < c->m->ntensors; k++)
		if (!strcmp(c->m->tensors[k].name, name)) {
			*i = k;
			return 0;
		}
	return -ENOENT;
}

/* Are the first and last byte of [@buf, @buf+@len) memory this process
 * can read?  A device's address range (CUDA reserves it PROT_NONE in
 * the process) is not.  0 or -EFAULT (0 too where the kernel will not
 * say: process_vm_readv refused by a seccomp profile). */
static int host_memory(const void *buf, size_t len)
{
	char b[2];
	struct iovec local[2] = {{b, 1}, {b + 1, 1}};
	struct iovec remote[2] = {{(void *)buf, 1}, {(char *)buf + len - 1, 1}};
	ssize_t n = process_vm_readv(getpid(), local, 2, remote, 2, 0);
	if (n == 2)
		return 0;
	/* Not permitted here (a seccomp profile): no telling; the
	 * transport's registration is the check left. */
	return n < 0 && errno != EFAULT ? 0 : -EFAULT;
}

int sfs_client_cuda_devices(char *err, size_t errlen)
{
	return sfs_hmem_cuda_devices(err, errlen);
}

int sfs_client_reg(struct sfs_client *c, void *buf, size_t len,
		   struct sfs_client_mr **out, char *err, size_t errlen)
{
	struct sfs_client_mr *m = calloc(1, sizeof(*m));
	char why[256];
	int rc, dev;

	*out = NULL;
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (!buf || !len) {
		snprintf(err, errlen, "register: no memory given");
		free(m);
		return -EINVAL;
	}
	m->c = c;
	m->dev = -1;
	m->base = buf;
	m->len = len;
	/* CUDA device memory (a build with CUDA, a driver): reads land in
	 * a stage on the host first.  Anything else must be host memory
	 * this process can read: not a device's address range. */
	rc = sfs_hmem_cuda_device(buf, len, &dev, why, sizeof(why));
	if (!rc) {
		if ((rc = sfs_gpu_prepare(c->gpu, dev, err, errlen))) {
			free(m);
			return rc;
		}
		m->dev = dev;
		*out = m;
		return 0;
	}
	if (rc == -ERANGE) {
		snprintf(err, errlen, "register: %s", why);
		free(m);
		return -EINVAL;
	}
	if (host_memory(buf, len)) {
		snprintf(err, errlen,
			 "register: %zu bytes at %p are not host memory this "
			 "process can read%s",
			 len, buf,
			 rc == -EOPNOTSUPP
				 ? " (device memory needs a libseedfs "
				   "built with -DSEEDFS_CUDA=ON)"
			 : rc == -ENODEV ? " (device memory needs the CUDA "
					   "driver loaded in this process)"
					 : "");
		free(m);
		return -EFAULT;
	}
	rc = sfs_xport_mr_reg(sfs_replica_xport(c->r), buf, len,
			      SFS_XPORT_LOCAL_DST, &m->mr);
	if (rc) {
		snprintf(err, errlen, "cannot register %zu bytes at %p: %s",
			 len, buf, strerror(-rc));
		free(m);
		return rc;
	}
	rc = sfs_cache_dst_new(sfs_replica_cache(c->r), buf, len, m->mr,
			       &m->dst);
	if (rc) {
		snprintf(err, errlen, "out of memory");
		sfs_xport_mr_dereg(m->mr);
		free(m);
		return rc;
	}
	*out = m;
	return 0;
}

int sfs_client_dereg(struct sfs_client_mr *m)
{
	if (!m)
		return 0;
	if (m->dev >= 0) {
		free(m); /* its reads have ended: they end before returning */
		return 0;
	}
	if (sfs_cache_dst_free(m->dst)) {
		/* A read the transport still has: the registration stays
		 * (the transport releases it at close). */
		SFS_LOG(SFS_WARN, "client",
			"a timed-out read may still write into a registration: "
			"kept until sfs_client_close");
		sfs_replica_keep_mr(m->c->r, m->mr);
		free(m);
		return -EBUSY;
	}
	sfs_xport_mr_dereg(m->mr);
	free(m);
	return 0;
}

/* Is @r a read the device path can take: inside its file and its
 * registration? */
static int dev_read_ok(const struct sfs_client *c,
		       const struct sfs_client_rd *r)
{
	const struct sfs_client_mr *m = r->mr;
	const uint8_t *to = r->dst;
	uint64_t size = c->m->files[r->file].size;
	return r->off <= size && r->len <= size - r->off && to >= m->base &&
	       (size_t)(to - m->base) <= m->len &&
	       r->len <= m->len - (size_t)(to - m->base);
}

int sfs_client_read(struct sfs_client *c, struct sfs_client_rd *rds, size_t n,
		    char *err, size_t errlen)
{
	struct sfs_cache_rd stack[CLIENT_RD_STACK], *crd = stack;
	size_t pstack[CLIENT_RD_STACK], *perm = pstack;
	int dstack[CLIENT_RD_STACK], *devs = dstack;
	size_t nh = 0, nd = 0;
	int rc = 0;

	if (errlen)
		err[0] = '\0';
	if (n > CLIENT_RD_STACK && (!(crd = calloc(n, sizeof(*crd))) ||
				    !(perm = calloc(n, sizeof(*perm))) ||
				    !(devs = calloc(n, sizeof(*devs))))) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		nd += rds[i].mr && rds[i].mr->dev >= 0;
	/* Host reads first, then reads into device memory. */
	for (size_t i = 0, h = 0, d = n - nd; i < n; i++) {
		const struct sfs_client_rd *r = &rds[i];
		int dev = r->mr ? r->mr->dev : -1;
		int bad = r->file >= c->m->nfiles || !r->mr;
		size_t k = dev >= 0 ? d++ : h++;
		crd[k] = (struct sfs_cache_rd){
			.set = c->set,
			.obj = bad ? UINT32_MAX : (uint32_t)r->file,
			.off = r->off,
			.len = r->len,
			.to = r->dst,
			.dst = r->mr ? r->mr->dst : NULL,
		};
		if (dev >= 0 && (bad || !dev_read_ok(c, r)))
			crd[k].status = -EINVAL;
		perm[k] = i;
		devs[k] = dev;
	}
	nh = n - nd;
	if (nh)
		rc = sfs_cache_read_into(sfs_replica_cache(c->r), crd, nh, 0);
	char gerr[256] = "";
	if (nd) {
		int grc = sfs_gpu_read(c->gpu, crd + nh, devs + nh, nd, gerr,
				       sizeof(gerr));
		if (!rc)
			rc = grc;
	}
	for (size_t k = 0; k < n; k++)
		rds[perm[k]].status = crd[k].status;
	rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		const struct sfs_client_rd *r = &rds[i];
		if (!(rc = r->status))
			continue;
		const char *path = r->file < c->m->nfiles
					   ? c->m->files[r->file].path
					   : "(no such file)";
		int on_dev = r->mr && r->mr->dev >= 0;
		snprintf(err, errlen,
			 "read %zu: %s bytes [%" PRIu64 ", +%" PRIu64 "): %s",
			 i, path, r->off, r->len,
			 rc == -EINVAL ? "outside the file or the registration"
			 : rc == -ESTALE
				 ? "generation no longer served: open again"
			 : rc == -EBADMSG
				 ? "bytes do not match the seed's checksum"
			 : on_dev && gerr[0] ? gerr
					     : strerror(-rc));
	}
out:
	if (crd != stack)
		free(crd);
	if (perm != pstack)
		free(perm);
	if (devs != dstack)
		free(devs);
	return rc;
}
