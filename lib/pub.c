/* SPDX-License-Identifier: MIT */
/*
 * pub.c - libseedfs (seedfs.h): a seed serving an in-memory model.  The
 * staged tensors and files are a struct seed_mem that every commit
 * publishes as the next generation; a thread releases superseded
 * generations when their grace period ends.
 */
#include "lib/seedfs.h"

#include "common/log.h"
#include "common/util.h"
#include "control/auth.h"
#include "control/ctlsrv.h"
#include "control/tls.h"
#include "metadata/manifest.h"
#include "metadata/safetensors.h"
#include "seed/publish.h"
#include "seed/seed.h"
#include "transports/transport.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PUB_SHARD_MAX (4ull << 30)

struct sfs_pub {
	struct sfs_seed_cfg cfg;
	char *name, *identity, *protocol;
	char host[256], port[16];
	struct seed_mem mem;
	struct sfs_seed *seed; /* NULL until the first commit */
	struct sfs_ctl *ctl;
	struct sfs_auth *auth;	  /* the token, or NULL */
	struct sfs_tls_pair *tls; /* or NULL */
	unsigned int bound;
	pthread_t reaper;
	int reaper_started;
	/* The seed's generations and keys change in one thread at a time
	 * (seed.h): the reaper's and a commit's. */
	pthread_mutex_t seed_lock;
	uint64_t rekeyed; /* sfs_auth_changes at the last re-key (commits') */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* stop, or a commit */
	int stopping;	     /* protected by lock */
};

static void *reaper(void *arg)
{
	struct sfs_pub *p = arg;
	pthread_mutex_lock(&p->lock);
	while (!p->stopping) {
		pthread_mutex_unlock(&p->lock);
		pthread_mutex_lock(&p->seed_lock);
		int64_t next = sfs_seed_reap(p->seed);
		pthread_mutex_unlock(&p->seed_lock);
		pthread_mutex_lock(&p->lock);
		if (p->stopping)
			break;
		struct timespec until = sfs_abstime(
			next < 0 ? 60000u
				 : (unsigned int)SFS_MIN(next + 1, 60000));
		pthread_cond_timedwait(&p->cond, &p->lock, &until);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int sfs_pub_new(const struct sfs_pub_cfg *cfg, struct sfs_pub **out, char *err,
		size_t errlen)
{
	struct sfs_pub *p;
	const char *why;
	int rc = -ENOMEM;

	if (!cfg || !cfg->name || sfs_path_check(cfg->name, &why) ||
	    strchr(cfg->name, '/')) {
		snprintf(err, errlen, "name: '%s' is not a valid model name",
			 cfg && cfg->name ? cfg->name : "(none)");
		return -EINVAL;
	}
	if (cfg->log_level && sfs_log_set_level(cfg->log_level)) {
		snprintf(err, errlen,
			 "log_level: '%s' is not err, warn, info "
			 "or debug",
			 cfg->log_level);
		return -EINVAL;
	}
	if (!cfg->log_level)
		sfs_log_set_level("warn");
	if (!(p = calloc(1, sizeof(*p))))
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->seed_lock, NULL);
	if (sfs_cond_init(&p->cond))
		goto err_free;
	const char *tf = sfs_auth_file(cfg->token_file);
	if (tf && (rc = sfs_auth_load(tf, "token_file", &p->auth, err, errlen)))
		goto err_free;
	if (!cfg->tls_cert != !cfg->tls_key) {
		snprintf(err, errlen, "tls_cert and tls_key go together");
		rc = -EINVAL;
		goto err_free;
	}
	if (cfg->tls_cert &&
	    (rc = sfs_tls_pair_load(cfg->tls_cert, cfg->tls_key, &p->tls, err,
				    errlen)))
		goto err_free;
	const char *listen = cfg->listen ? cfg->listen
			     : p->auth	 ? "0.0.0.0:7070"
					 : "127.0.0.1:7070";
	if (sfs_parse_hostport(listen, p->host, sizeof(p->host), p->port,
			       sizeof(p->port))) {
		snprintf(err, errlen, "listen: '%s' is not HOST:PORT", listen);
		rc = -EINVAL;
		goto err_free;
	}
	if (!p->auth && !sfs_ctlsrv_loopback(p->host))
		SFS_LOG(SFS_WARN, "seed",
			"libseedfs: listening on %s without a token: whoever "
			"reaches it reads the model (docs/security.md)",
			listen);
	const char *proto =
		sfs_xport_choose(cfg->protocol, getenv("SEEDFS_PROTOCOL"));
	if (!(p->name = strdup(cfg->name)) ||
	    !(p->protocol = strdup(proto ? proto : "tcp")) ||
	    (cfg->identity && !(p->identity = strdup(cfg->identity))))
		goto err_free;
	p->mem.shard_max = cfg->shard_max ? cfg->shard_max : PUB_SHARD_MAX;
	p->cfg = (struct sfs_seed_cfg){
		.mem = &p->mem,
		.name = p->name,
		.protocol = p->protocol,
		.timeout_ms = 10000,
		.inline_max = 64 << 10,
		.mr_max = 1ull << 30,
		.csum_shift = 20,
		.digest_sha256 = 1, /* re-seeders may serve it (security.md) */
		.grace_s = cfg->grace_s,
		.identity = p->identity,
	};
	if (*p->host && strcmp(p->host, "0.0.0.0") && strcmp(p->host, "::"))
		p->cfg.fabric_node = p->host;
	*out = p;
	return 0;
err_free:
	sfs_pub_free(p);
	return rc;
}

static int tensor_ok(const char *name, const char *dtype, uint32_t ndim,
		     const uint64_t *shape, const void *data, uint64_t len,
		     const char *layout, char *err, size_t errlen)
{
	unsigned int esz = dtype ? sfs_dtype_size(dtype) : 0;
	uint64_t bytes;
	if (!name || !*name || strlen(name) > SFS_ST_NAME_MAX ||
	    !strcmp(name, "__metadata__")) {
		snprintf(err, errlen,
			 "tensor name: empty, too long or "
			 "reserved");
		return -EINVAL;
	}
	if (!esz) {
		snprintf(err, errlen,
			 "tensor '%s': dtype '%s' is not a "
			 "safetensors dtype",
			 name, dtype ? dtype : "(none)");
		return -EINVAL;
	}
	if (ndim > SFS_ST_MAX_DIMS || (ndim && !shape)) {
		snprintf(err, errlen, "tensor '%s': %u dimensions (at most %d)",
			 name, ndim, SFS_ST_MAX_DIMS);
		return -EINVAL;
	}
	if (sfs_st_tensor_bytes(shape, ndim, esz, &bytes) || bytes != len) {
		snprintf(err, errlen,
			 "tensor '%s': %llu bytes, its shape x %s says %llu",
			 name, (unsigned long long)len, dtype,
			 (unsigned long long)bytes);
		return -EINVAL;
	}
	if (len && !data) {
		snprintf(err, errlen, "tensor '%s': no data", name);
		return -EINVAL;
	}
	if (layout && *layout && !sfs_manifest_layout_ok(layout)) {
		snprintf(err, errlen,
			 "tensor '%s': layout '%s' is not 1-63 of "
			 "[A-Za-z0-9._:+-]",
			 name, layout);
		return -EINVAL;
	}
	return 0;
}

int sfs_pub_add_tensor(struct sfs_pub *p, const char *name, const char *dtype,
		       uint32_t ndim, const uint64_t *shape, const void *data,
		       uint64_t len, const char *layout, char *err,
		       size_t errlen)
{
	int rc = tensor_ok(name, dtype, ndim, shape, data, len, layout, err,
			   errlen);
	if (rc)
		return rc;
	struct seed_mem *mm = &p->mem;
	struct seed_mem_tensor *t = NULL;
	for (size_t i = 0; i < mm->ntensors && !t; i++)
		if (!strcmp(mm->tensors[i].name, name))
			t = &mm->tensors[i];
	if (!t) {
		if (mm->ntensors >= SFS_MF_MAX_TENSORS) {
			snprintf(err, errlen, "more than %d tensors",
				 SFS_MF_MAX_TENSORS);
			return -E2BIG;
		}
		if (sfs_grow((void **)&mm->tensors, &mm->cap_tensors,
			     mm->ntensors + 1, sizeof(*mm->tensors)))
			return -ENOMEM;
		t = &mm->tensors[mm->ntensors];
		memset(t, 0, sizeof(*t));
		if (!(t->name = strdup(name)))
			return -ENOMEM;
		mm->ntensors++;
	}
	snprintf(t->dtype, sizeof(t->dtype), "%s", dtype);
	t->ndim = ndim;
	if (ndim)
		memcpy(t->shape, shape, ndim * sizeof(*shape));
	t->data = data;
	t->len = len;
	snprintf(t->layout, sizeof(t->layout), "%s", layout ? layout : "");
	return 0;
}

int sfs_pub_add_file(struct sfs_pub *p, const char *path, const void *data,
		     size_t len, char *err, size_t errlen)
{
	const char *why;
	struct seed_mem *mm = &p->mem;

	if (!path || sfs_path_check(path, &why) ||
	    !strncmp(path, SFS_MF_RESERVED, strlen(SFS_MF_RESERVED)) ||
	    !strcmp(path, "model.safetensors.index.json") ||
	    (!strncmp(path, "model-", 6) && strstr(path, ".safetensors") &&
	     !strchr(path, '/'))) {
		snprintf(err, errlen,
			 "file '%s': not a relative path, or a name the "
			 "synthesized shards use",
			 path ? path : "(none)");
		return -EINVAL;
	}
	if (len > (16u << 20)) {
		snprintf(err, errlen,
			 "file '%s': %zu bytes, small files only "
			 "(16 MiB)",
			 path, len);
		return -EFBIG;
	}
	struct seed_mem_file *f = NULL;
	for (size_t i = 0; i < mm->nfiles && !f; i++)
		if (!strcmp(mm->files[i].path, path))
			f = &mm->files[i];
	if (!f) {
		if (sfs_grow((void **)&mm->files, &mm->cap_files,
			     mm->nfiles + 1, sizeof(*mm->files)))
			return -ENOMEM;
		f = &mm->files[mm->nfiles];
		memset(f, 0, sizeof(*f));
		if (!(f->path = strdup(path)))
			return -ENOMEM;
		mm->nfiles++;
	}
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	if (len)
		memcpy(copy, data, len);
	free(f->data);
	f->data = copy;
	f->len = len;
	return 0;
}

int sfs_pub_commit(struct sfs_pub *p, uint64_t *generation, char *err,
		   size_t errlen)
{
	char e[SFS_XPORT_ERR_MAX] = "";
	int rc;

	if (p->auth && (rc = sfs_auth_reload(p->auth, NULL, err, errlen)))
		return rc; /* a rotated token that does not parse */
	/* A new token (since the last re-key that worked): a new key
	 * epoch, the old keys read for the grace period
	 * (docs/security.md). */
	uint64_t changes = p->auth ? sfs_auth_changes(p->auth) : 0;
	if (p->seed && changes != p->rekeyed) {
		pthread_mutex_lock(&p->seed_lock);
		rc = sfs_seed_rekey(p->seed, p->cfg.grace_s, e, sizeof(e));
		pthread_mutex_unlock(&p->seed_lock);
		if (rc) {
			snprintf(err, errlen,
				 "a new token, but the old keys stay: %s", e);
			return rc;
		}
		p->rekeyed = changes;
	}
	if (p->seed) {
		pthread_mutex_lock(&p->seed_lock);
		rc = sfs_seed_republish(p->seed, e, sizeof(e));
		pthread_mutex_unlock(&p->seed_lock);
	} else {
		struct sfs_ctlsrv_cfg sc = {.host = p->host,
					    .port = p->port,
					    .auth = p->auth,
					    .tls = p->tls};
		rc = sfs_seed_open(&p->cfg, &p->seed, e, sizeof(e));
		p->rekeyed = changes; /* its keys are new anyway */
		if (!rc)
			rc = sfs_ctl_start(p->seed, &sc, &p->ctl, &p->bound, e,
					   sizeof(e));
		if (!rc) {
			rc = -pthread_create(&p->reaper, NULL, reaper, p);
			p->reaper_started = !rc;
		}
		if (rc) {
			sfs_ctl_stop(p->ctl);
			sfs_seed_close(p->seed);
			p->ctl = NULL;
			p->seed = NULL;
		}
	}
	if (rc) {
		snprintf(err, errlen, "%s", *e ? e : strerror(-rc));
		return rc;
	}
	pthread_mutex_lock(&p->lock);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	char summary[300];
	sfs_seed_summary(p->seed, summary, sizeof(summary));
	SFS_LOG(SFS_INFO, "seed", "libseedfs: serving %s on port %u", summary,
		p->bound);
	if (generation)
		*generation = sfs_seed_current(p->seed);
	return 0;
}

unsigned int sfs_pub_port(const struct sfs_pub *p)
{
	return p && p->seed ? p->bound : 0;
}

void sfs_pub_free(struct sfs_pub *p)
{
	if (!p)
		return;
	if (p->reaper_started) {
		pthread_mutex_lock(&p->lock);
		p->stopping = 1;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->reaper, NULL);
	}
	sfs_ctl_stop(p->ctl);
	sfs_seed_close(p->seed);
	sfs_auth_free(p->auth);
	sfs_tls_pair_free(p->tls);
	for (size_t i = 0; i < p->mem.ntensors; i++)
		free(p->mem.tensors[i].name);
	free(p->mem.tensors);
	for (size_t i = 0; i < p->mem.nfiles; i++) {
		free(p->mem.files[i].path);
		free(p->mem.files[i].data);
	}
	free(p->mem.files);
	free(p->name);
	free(p->identity);
	free(p->protocol);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->seed_lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}
