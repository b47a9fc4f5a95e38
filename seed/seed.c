/* SPDX-License-Identifier: MIT */
/*
 * seed.c - the seed: its transports, opened once, and the generations
 * of each model it serves (one per --model-dir).  A model's newest
 * generation is current; the ones before it stay registered (readable)
 * for the grace period, then are released.  The control port reads the
 * generations from its own threads, under s->lock.
 */
#include "seed.h"

#include "common/blob.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "control/sign.h"
#include "control/ctlsrv.h"
#include "metadata/manifest.h"
#include "metadata/identity.h"
#include "seed/announce.h"
#include "seed/publish.h"
#include "transports/transport.h"

#include <errno.h>
#include <jansson.h>
#include <inttypes.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SEED_MAX_GENS 8 /* generations alive at once */

/* One published model. */
struct seed_model {
	struct sfs_seed_cfg cfg; /* its own: model_dir or mem, name */
	char *name;
	size_t ngens;			      /* protected by s->lock */
	struct seed_gen *gens[SEED_MAX_GENS]; /* protected by s->lock; the
						 last one is current */
	/* Republishes by result, and files withdrawn (changed under the
	 * seed); protected by s->lock. */
	uint64_t published, unchanged, failed, withdrawn;
};

struct sfs_seed {
	struct sfs_seed_cfg cfg; /* strings borrowed from the caller */
	uint64_t instance;
	size_t nx; /* transports, = manifest endpoints, same order */
	struct sfs_xport *x[SFS_MF_MAX_ENDPOINTS];
	char pname[SFS_MF_MAX_ENDPOINTS][32];
	int writable; /* some transport needs writable memory */
	char protocols[SFS_MF_MAX_ENDPOINTS * 32];
	pthread_mutex_t lock;
	/* Re-seeders that announced themselves (its own lock). */
	struct sfs_announced *ann;
	size_t nmodels; /* fixed once open */
	struct seed_model *models;
	/* inotify on every published file (IN_MODIFY): a file that changes
	 * under the seed is withdrawn.  -1: none (in-memory models).  The
	 * watches are managed by the thread that publishes. */
	int wfd;
	/* The keys every region is registered under now (sfs_seed_rekey);
	 * protected by lock. */
	uint64_t key_epoch;
	/* Registrations of earlier key epochs, released when their grace
	 * ends; protected by lock. */
	struct seed_retired *retired;
};

/* The registrations of one file under keys of an earlier epoch. */
struct seed_retired {
	const struct seed_gen *g;  /* whose mapping they cover */
	const struct seed_file *f; /* which file of it */
	struct sfs_xport_mr **mr;
	size_t n;
	uint64_t epoch;
	uint64_t expires_ms; /* monotonic */
	struct seed_retired *next;
};

/* Release @n registrations and their array: their keys read nothing
 * from now on. */
static void mrs_free(struct sfs_xport_mr **mr, size_t n)
{
	if (!mr)
		return;
	for (size_t i = 0; i < n; i++)
		sfs_xport_mr_dereg(mr[i]);
	free(mr);
}

static void retired_free(struct seed_retired *r)
{
	mrs_free(r->mr, r->n);
	free(r);
}

/* Watch the files @g serves from disk. */
static void watch_gen(struct sfs_seed *s, struct seed_gen *g)
{
	for (size_t i = 0; s->wfd >= 0 && i < g->nfiles; i++) {
		struct seed_file *f = &g->files[i];
		struct stat st;
		if (!f->abs || !f->nmr)
			continue; /* inline or empty: copied, nothing to back */
		int wd = inotify_add_watch(s->wfd, f->abs,
					   IN_MODIFY | IN_DONT_FOLLOW);
		/* The path must still name the inode that is mapped. */
		if (wd < 0 || lstat(f->abs, &st) ||
		    (uint64_t)st.st_dev != f->dev ||
		    (uint64_t)st.st_ino != f->ino) {
			if (wd < 0)
				SFS_LOG(SFS_WARN, "seed",
					"cannot watch %s for changes: %s",
					f->abs, strerror(errno));
			continue;
		}
		f->wd = wd;
	}
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Stop watching what only @g watched: it is being freed and is no longer
 * in its model's gens (an unchanged file has the same watch in every
 * generation that serves it).  The publishing thread's, like every
 * change of the generations: no lock needed to read them. */
static void unwatch_gen(struct sfs_seed *s, struct seed_gen *g)
{
	size_t n = 0, cap = 0;
	int *kept = NULL;
	if (s->wfd < 0)
		return;
	for (size_t mi = 0; mi < s->nmodels; mi++) {
		for (size_t k = 0; k < s->models[mi].ngens; k++) {
			const struct seed_gen *o = s->models[mi].gens[k];
			for (size_t j = 0; j < o->nfiles; j++) {
				if (o->files[j].wd <= 0)
					continue;
				if (sfs_grow((void **)&kept, &cap, n + 1,
					     sizeof(*kept))) {
					free(kept);
					return; /* kept until the seed stops */
				}
				kept[n++] = o->files[j].wd;
			}
		}
	}
	if (n)
		qsort(kept, n, sizeof(*kept), cmp_int);
	for (size_t i = 0; i < g->nfiles; i++) {
		int wd = g->files[i].wd;
		if (wd > 0 &&
		    (!n || !bsearch(&wd, kept, n, sizeof(*kept), cmp_int)))
			inotify_rm_watch(s->wfd, wd);
	}
	free(kept);
}

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
		for (size_t i = 0; i < s->nx; i++)
			if (!strcmp(s->pname[i], info.protocol)) {
				snprintf(err, errlen,
					 "protocol %s listed twice",
					 info.protocol);
				sfs_xport_close(s->x[s->nx]);
				return -EINVAL;
			}
		snprintf(s->pname[s->nx], sizeof(s->pname[0]), "%s",
			 info.protocol);
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

/* A model's name: --name (or NAME=), or the directory's basename. */
static int resolve_name(struct seed_model *mo, char *err, size_t errlen)
{
	const char *why;
	if (mo->cfg.name) {
		mo->name = strdup(mo->cfg.name);
	} else if (!mo->cfg.model_dir) {
		snprintf(err, errlen, "a model name is required");
		return -EINVAL;
	} else {
		char *tmp = strdup(mo->cfg.model_dir);
		if (tmp) {
			size_t l = strlen(tmp);
			while (l > 1 && tmp[l - 1] == '/')
				tmp[--l] = '\0';
			mo->name = strdup(basename(tmp));
			free(tmp);
		}
	}
	if (!mo->name)
		return -ENOMEM;
	if (sfs_path_check(mo->name, &why) || strchr(mo->name, '/')) {
		snprintf(err, errlen,
			 "model name '%s' is not a valid directory name; use "
			 "--name or --model-dir NAME=DIR",
			 mo->name);
		return -EINVAL;
	}
	return 0;
}

int sfs_seed_open(const struct sfs_seed_cfg *cfg, struct sfs_seed **out,
		  char *err, size_t errlen)
{
	struct seed_gen **g = NULL;
	struct sfs_seed *s;
	int rc = -ENOMEM;

	if (!(s = calloc(1, sizeof(*s))))
		return -ENOMEM;
	s->cfg = *cfg;
	s->wfd = -1;
	pthread_mutex_init(&s->lock, NULL);
	struct sfs_announced_cfg acfg = {.key = cfg->ring_key,
					 .per_caller = cfg->announce_per_host};
	if (sfs_announced_new(&acfg, &s->ann)) {
		snprintf(err, errlen,
			 "the announced re-seeders' table: no memory or no "
			 "randomness for its key");
		goto err;
	}
	s->nmodels = 1 + cfg->nmore;
	if (!(s->models = calloc(s->nmodels, sizeof(*s->models))) ||
	    !(g = calloc(s->nmodels, sizeof(*g))))
		goto err;
	for (size_t i = 0; i < s->nmodels; i++) {
		struct seed_model *mo = &s->models[i];
		mo->cfg = *cfg;
		if (i) {
			mo->cfg.mem = NULL;
			mo->cfg.model_dir = cfg->more[i - 1].dir;
			mo->cfg.name = cfg->more[i - 1].name;
		}
		if ((rc = resolve_name(mo, err, errlen)))
			goto err;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(s->models[j].name, mo->name)) {
				snprintf(err, errlen,
					 "two models named %s: name one with "
					 "--model-dir NAME=DIR",
					 mo->name);
				rc = -EINVAL;
				goto err;
			}
	}
	if (!cfg->mem && (s->wfd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) < 0)
		SFS_LOG(SFS_WARN, "seed",
			"inotify: %s: files changed under the seed will not be "
			"noticed",
			strerror(errno));
	if (getrandom(&s->instance, sizeof(s->instance), 0) !=
	    sizeof(s->instance))
		s->instance = sfs_now_ns() ^ (uint64_t)getpid() << 32;
	s->key_epoch = 1;
	/* Validate everything before touching the fabric: a bad file is
	 * the one line the user sees. */
	for (size_t i = 0; i < s->nmodels; i++) {
		struct seed_model *mo = &s->models[i];
		if ((rc = seed_gen_prepare(&mo->cfg, mo->name, 1, s->instance,
					   cfg->grace_s, NULL, &g[i], err,
					   errlen)))
			goto err;
		g[i]->m->key_epoch = s->key_epoch;
	}
	if ((rc = open_transports(s, cfg, err, errlen)))
		goto err;
	for (size_t i = 0; i < s->nmodels; i++) {
		struct seed_model *mo = &s->models[i];
		if ((rc = seed_gen_publish(g[i], &mo->cfg, s->nx, s->x,
					   s->writable, s->protocols, err,
					   errlen)))
			goto err;
		mo->gens[mo->ngens++] = g[i];
		g[i] = NULL;
		watch_gen(s, mo->gens[0]);
	}
	free(g);
	*out = s;
	return 0;
err:
	for (size_t i = 0; g && i < s->nmodels; i++)
		seed_gen_free(g[i]);
	free(g);
	sfs_seed_close(s);
	return rc;
}

size_t sfs_seed_nmodels(const struct sfs_seed *s)
{
	return s->nmodels;
}

const char *sfs_seed_model_name(const struct sfs_seed *s, size_t i)
{
	return i < s->nmodels ? s->models[i].name : NULL;
}

int sfs_seed_republish_model(struct sfs_seed *s, size_t i, char *err,
			     size_t errlen)
{
	struct seed_model *mo = &s->models[i];
	struct seed_gen *g = NULL, *cur;
	uint64_t number;
	int rc;

	pthread_mutex_lock(&s->lock);
	number = mo->gens[mo->ngens - 1]->number + 1;
	/* Only this thread frees generations, and withdraws their files:
	 * it stays as it is while we publish. */
	const struct seed_gen *before = mo->gens[mo->ngens - 1];
	const struct sfs_manifest *prev = before->m;
	pthread_mutex_unlock(&s->lock);
	uint64_t t0 = sfs_now_ms();
	rc = seed_gen_prepare(&mo->cfg, mo->name, number, s->instance,
			      s->cfg.grace_s, before, &g, err, errlen);
	if (!rc) {
		pthread_mutex_lock(&s->lock);
		g->m->key_epoch = s->key_epoch;
		pthread_mutex_unlock(&s->lock);
		g->prev = prev;
		rc = seed_gen_publish(g, &mo->cfg, s->nx, s->x, s->writable,
				      s->protocols, err, errlen);
		g->prev = NULL;
	}
	uint64_t done_ms = sfs_now_ms();
	if (rc) {
		seed_gen_free(g);
		pthread_mutex_lock(&s->lock);
		mo->failed++;
		pthread_mutex_unlock(&s->lock);
		return rc;
	}
	pthread_mutex_lock(&s->lock);
	cur = mo->gens[mo->ngens - 1];
	int same = s->cfg.keep_unchanged && g->m->content == cur->m->content;
	for (size_t k = 0; same && k < cur->nfiles; k++)
		same = !cur->files[k].withdrawn;
	mo->unchanged += same;
	pthread_mutex_unlock(&s->lock);
	if (same) {
		/* The same bytes: replicas keep what they have (and a
		 * token rotation by SIGHUP moves nobody). */
		snprintf(err, errlen,
			 "nothing changed: generation %" PRIu64
			 " is still served",
			 cur->number);
		seed_gen_free(g);
		return -EALREADY;
	}
	pthread_mutex_lock(&s->lock);
	if (mo->ngens == SEED_MAX_GENS) {
		mo->failed++;
		pthread_mutex_unlock(&s->lock);
		snprintf(err, errlen,
			 "%d generations are still served; wait for the "
			 "grace period (--grace) to end",
			 SEED_MAX_GENS);
		seed_gen_free(g);
		return -EBUSY;
	}
	cur = mo->gens[mo->ngens - 1];
	cur->expires_ms = sfs_now_ms() + (uint64_t)s->cfg.grace_s * 1000;
	mo->gens[mo->ngens++] = g;
	mo->published++;
	uint64_t old = cur->number;
	pthread_mutex_unlock(&s->lock);
	watch_gen(s, g);
	SFS_LOG(SFS_INFO, "seed",
		"%s: generation %" PRIu64 " published; generation %" PRIu64
		" stays served for %u s",
		mo->name, number, old, s->cfg.grace_s);
	if (!mo->cfg.mem)
		SFS_LOG(SFS_INFO, "seed",
			"%s: generation %" PRIu64 ": %zu of %zu registered "
			"files (%" PRIu64 " of %" PRIu64
			" MiB) unchanged since the seed read them (inode, "
			"size, times): their checksums taken from generation "
			"%" PRIu64 ", not read again; %zu on a filesystem "
			"whose times may miss a write (read at every "
			"republish); ready in %" PRIu64 " ms",
			mo->name, number, g->nsame, g->nreg,
			g->same_bytes >> 20, g->reg_bytes >> 20, g->same_from,
			g->nunfit, done_ms - t0);
	return 0;
}

int sfs_seed_republish(struct sfs_seed *s, char *err, size_t errlen)
{
	int first = 0;
	size_t same = 0;
	for (size_t i = 0; i < s->nmodels; i++) {
		char e[SFS_XPORT_ERR_MAX];
		int rc = sfs_seed_republish_model(s, i, e, sizeof(e));
		if (rc == -EALREADY) {
			if (s->nmodels > 1)
				SFS_LOG(SFS_INFO, "seed", "%s: %s",
					s->models[i].name, e);
			else
				snprintf(err, errlen, "%s", e);
			same++;
		} else if (rc && !first) {
			first = rc;
			if (s->nmodels > 1)
				snprintf(err, errlen, "%s: %s",
					 s->models[i].name, e);
			else
				snprintf(err, errlen, "%s", e);
		} else if (rc) {
			SFS_LOG(SFS_ERR, "seed", "%s: not republished: %s",
				s->models[i].name, e);
		}
	}
	if (!first && same == s->nmodels) {
		if (s->nmodels > 1)
			snprintf(err, errlen,
				 "nothing changed: every model's generation "
				 "is still served");
		return -EALREADY;
	}
	return first;
}

/* Release the earlier keys of @g (of its file @f only, if not NULL),
 * which goes or is withdrawn: they cover its mappings. */
static void retired_drop(struct sfs_seed *s, const struct seed_gen *g,
			 const struct seed_file *f)
{
	struct seed_retired *gone = NULL;
	pthread_mutex_lock(&s->lock);
	for (struct seed_retired **pr = &s->retired; *pr;) {
		struct seed_retired *r = *pr;
		if (r->g != g || (f && r->f != f)) {
			pr = &r->next;
			continue;
		}
		*pr = r->next;
		r->next = gone;
		gone = r;
	}
	pthread_mutex_unlock(&s->lock);
	while (gone) {
		struct seed_retired *r = gone;
		gone = r->next;
		retired_free(r);
	}
}

/* One file's new registrations, between sfs_seed_rekey's two steps;
 * @mr NULL: a withdrawn file that cannot be registered again (its zero
 * pages are read-only, and a transport wants writable memory): its
 * keys are retired all the same, none made in their place. */
struct rekey_one {
	struct seed_gen *g;
	struct seed_file *f;
	struct sfs_xport_mr **mr;
};

int sfs_seed_rekey(struct sfs_seed *s, uint32_t grace_s, char *err,
		   size_t errlen)
{
	struct rekey_one *todo = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (errlen)
		err[0] = '\0';
	/* 1. Every file of every generation served registered again: the
	 * generations change in this thread alone, so they stay. */
	for (size_t mi = 0; !rc && mi < s->nmodels; mi++) {
		struct seed_model *mo = &s->models[mi];
		for (size_t k = 0; !rc && k < mo->ngens; k++) {
			struct seed_gen *g = mo->gens[k];
			for (size_t i = 0; !rc && i < g->nfiles; i++) {
				struct seed_file *f = &g->files[i];
				/* A withdrawn file's too: its keys read the
				 * zero pages now, and must not outlive a
				 * revocation (on verbs they still pin the
				 * pages they were made on). */
				if (!f->nmr)
					continue;
				if ((rc = sfs_grow((void **)&todo, &cap, n + 1,
						   sizeof(*todo))))
					break;
				todo[n] = (struct rekey_one){.g = g, .f = f};
				rc = seed_file_rekey(g, f, s->cfg.mr_max,
						     &todo[n].mr);
				if (rc && f->withdrawn && rc != -ENOMEM) {
					SFS_LOG(SFS_WARN, "seed",
						"%s: %s (withdrawn) cannot be "
						"registered again (%s): its "
						"keys are retired with the "
						"others, none in their place",
						mo->name,
						g->m->files[f->fidx].path,
						strerror(-rc));
					todo[n++].mr = NULL;
					rc = 0;
				} else if (rc)
					snprintf(err, errlen,
						 "%s: cannot register %s "
						 "again: %s",
						 mo->name,
						 g->m->files[f->fidx].path,
						 strerror(-rc));
				else
					n++;
			}
		}
	}
	if (rc && !*err)
		snprintf(err, errlen, "out of memory");
	if (rc) {
		for (size_t i = 0; i < n; i++)
			mrs_free(todo[i].mr, todo[i].f->nmr);
		free(todo);
		return rc;
	}

	/* 2. Published at once, every generation: the old registrations
	 * are kept for @grace_s, then released. */
	uint64_t expires = sfs_now_ms() + (uint64_t)grace_s * 1000;
	pthread_mutex_lock(&s->lock);
	uint64_t epoch = ++s->key_epoch;
	for (size_t i = 0; i < n; i++) {
		struct seed_file *f = todo[i].f;
		struct seed_retired *r = calloc(1, sizeof(*r));
		/* No new registration (todo[i].mr NULL): a withdrawn file
		 * that could not be registered again; its keys retire with
		 * none in their place. */
		if (!r || (todo[i].mr &&
			   seed_file_rekey_publish(todo[i].g, f, todo[i].mr))) {
			/* Cannot happen for a file already published (its
			 * regions and keys have their places); keep the
			 * old keys rather than publish half of the new. */
			free(r);
			mrs_free(todo[i].mr, f->nmr);
			rc = -ENOMEM;
			continue;
		}
		*r = (struct seed_retired){.g = todo[i].g,
					   .f = f,
					   .mr = f->mr,
					   .n = f->nmr,
					   .epoch = epoch - 1,
					   .expires_ms = expires,
					   .next = s->retired};
		s->retired = r;
		f->mr = todo[i].mr;
		if (!f->mr)
			f->nmr = 0;
	}
	for (size_t mi = 0; mi < s->nmodels; mi++) {
		struct seed_model *mo = &s->models[mi];
		for (size_t k = 0; k < mo->ngens; k++) {
			struct seed_gen *g = mo->gens[k];
			char *json;
			size_t len;
			struct sfs_blob *b;
			g->m->key_epoch = epoch;
			if (sfs_manifest_encode(g->m, &json, &len)) {
				rc = -ENOMEM;
				continue;
			}
			if (sfs_blob_wrap(json, len, &b)) {
				free(json);
				rc = -ENOMEM;
				continue;
			}
			/* Answers going out keep the old keys' copies. */
			sfs_blob_put(g->json);
			g->json = b;
			sfs_blob_put(g->gz);
			g->gz = NULL;
			g->gz_tried = 0;
		}
	}
	pthread_mutex_unlock(&s->lock);
	free(todo);
	if (rc)
		snprintf(err, errlen,
			 "out of memory while publishing the new keys");
	SFS_LOG(SFS_INFO, "seed",
		"every region registered again under new keys (epoch %" PRIu64
		"); the old ones %s",
		epoch,
		grace_s ? "read for the grace period, then are revoked"
			: "are revoked now");
	if (!grace_s)
		sfs_seed_reap(s);
	return rc;
}

/* @a, or @b when sooner (-1: never). */
static int64_t sooner(int64_t a, int64_t b)
{
	return a < 0 || (b >= 0 && b < a) ? b : a;
}

/* Every generation served whose signature is half through its
 * validity, signed again: a replica refuses a signature that lapsed,
 * and a seed may serve one generation for weeks.  Only this thread
 * changes the generations and their manifests; the control port reads
 * their JSON under s->lock.  The ms until the next is due, or -1. */
static int64_t resign(struct sfs_seed *s)
{
	int64_t next = -1;
	for (size_t mi = 0; s->cfg.sign_key && mi < s->nmodels; mi++) {
		struct seed_model *mo = &s->models[mi];
		struct seed_gen *gens[SEED_MAX_GENS];
		pthread_mutex_lock(&s->lock);
		size_t n = mo->ngens;
		memcpy(gens, mo->gens, n * sizeof(*gens));
		pthread_mutex_unlock(&s->lock);
		for (size_t k = 0; k < n; k++) {
			struct seed_gen *g = gens[k];
			const struct sfs_manifest *m = g->m;
			int64_t now = sfs_sign_now() +
				      mo->cfg.test_sign_clock_s * 1000000000;
			int64_t due = m->signed_at +
				      (m->valid_until - m->signed_at) / 2;
			if (due > now) {
				next = sooner(next, (due - now) / 1000000 + 1);
				continue;
			}
			/* Signed and encoded in a copy (it shares the
			 * files, which nothing changes meanwhile): the
			 * control port reads the manifest under s->lock. */
			char *json = NULL, when[32];
			size_t len;
			struct sfs_blob *blob = NULL;
			struct sfs_manifest c = *m;
			int rc = seed_gen_sign(&c, &mo->cfg);
			if (!rc)
				rc = sfs_manifest_encode(&c, &json, &len);
			if (!rc && (rc = sfs_blob_wrap(json, len, &blob)))
				free(json); /* else the blob owns it */
			if (rc) {
				SFS_LOG(SFS_ERR, "seed",
					"%s: generation %" PRIu64
					" not signed again: %s (next try in "
					"a minute)",
					mo->name, g->number, strerror(-rc));
				next = sooner(next, 60000);
				continue;
			}
			pthread_mutex_lock(&s->lock);
			g->m->signed_at = c.signed_at;
			g->m->valid_until = c.valid_until;
			memcpy(g->m->sig, c.sig, sizeof(c.sig));
			/* Readers of the old text hold their own references. */
			struct sfs_blob *old_json = g->json, *old_gz = g->gz;
			g->json = blob;
			g->gz = NULL; /* the old signature's */
			g->gz_tried = 0;
			pthread_mutex_unlock(&s->lock);
			sfs_blob_put(old_json);
			sfs_blob_put(old_gz);
			time_t until = (time_t)(m->valid_until / 1000000000);
			struct tm tm;
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ",
				 gmtime_r(&until, &tm));
			SFS_LOG(SFS_INFO, "seed",
				"%s: generation %" PRIu64
				" signed again, valid until %s",
				mo->name, g->number, when);
			next = sooner(
				next,
				(m->valid_until - m->signed_at) / 2000000 + 1);
		}
	}
	return next;
}

int64_t sfs_seed_reap(struct sfs_seed *s)
{
	int64_t next = resign(s);
	uint64_t now = sfs_now_ms();

	/* Keys of earlier epochs whose grace ended. */
	struct seed_retired *gone = NULL;
	pthread_mutex_lock(&s->lock);
	for (struct seed_retired **pr = &s->retired; *pr;) {
		struct seed_retired *r = *pr;
		if (r->expires_ms > now) {
			if (next < 0 || (int64_t)(r->expires_ms - now) < next)
				next = (int64_t)(r->expires_ms - now);
			pr = &r->next;
			continue;
		}
		*pr = r->next;
		r->next = gone;
		gone = r;
	}
	pthread_mutex_unlock(&s->lock);
	uint64_t told = 0; /* one line per epoch revoked */
	while (gone) {
		struct seed_retired *r = gone;
		uint64_t epoch = r->epoch;
		gone = r->next;
		retired_free(r);
		if (epoch != told)
			SFS_LOG(SFS_INFO, "seed",
				"keys of epoch %" PRIu64 " revoked: they read "
				"nothing from now on",
				epoch);
		told = epoch;
	}
	for (size_t mi = 0; mi < s->nmodels; mi++) {
		struct seed_model *mo = &s->models[mi];
		struct seed_gen *dead[SEED_MAX_GENS];
		size_t ndead = 0, keep = 0;
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < mo->ngens; i++) {
			struct seed_gen *g = mo->gens[i];
			int current = i + 1 == mo->ngens;
			if (!current && g->expires_ms <= now) {
				dead[ndead++] = g;
				continue;
			}
			if (!current &&
			    (next < 0 || (int64_t)(g->expires_ms - now) < next))
				next = (int64_t)(g->expires_ms - now);
			mo->gens[keep++] = g;
		}
		mo->ngens = keep;
		pthread_mutex_unlock(&s->lock);
		for (size_t i = 0; i < ndead; i++) {
			retired_drop(s, dead[i], NULL);
			SFS_LOG(SFS_INFO, "seed",
				"%s: generation %" PRIu64
				" is no longer served",
				mo->name, dead[i]->number);
			unwatch_gen(s, dead[i]);
			seed_gen_free(dead[i]);
		}
	}
	return next;
}

int sfs_seed_watch_fd(const struct sfs_seed *s)
{
	return s->wfd;
}

#define SEED_AGAIN_SAY_MS 10000 /* a withdrawn file changing: said once */

/* Withdraw every file of @g watched by @wd; how many were served.  Its
 * keys, of earlier epochs too, stay until they would go anyway when
 * seed_gen_withdraw keeps its current ones (they read the zero pages put
 * in place of the file's, refused by checksum); else every key goes.
 * *@again counts the files already withdrawn that changed again (a
 * repair in place: the next generation may take it). */
static int withdraw_wd(struct sfs_seed *s, struct seed_gen *g, int wd,
		       int *again)
{
	int n = 0;
	for (size_t i = 0; i < g->nfiles; i++) {
		struct seed_file *f = &g->files[i];
		if (f->wd != wd)
			continue;
		if (!seed_gen_withdraw(g, i)) {
			/* Only the current generation's (an older one in
			 * its grace shares the inode's watch with it). */
			if (!f->withdrawn || !again)
				continue;
			(*again)++;
			uint64_t now = sfs_now_ms();
			if (f->again_ms &&
			    now - f->again_ms < SEED_AGAIN_SAY_MS)
				continue;
			f->again_ms = now;
			SFS_LOG(SFS_INFO, "seed",
				"%s, withdrawn from generation %" PRIu64
				" of %s, changed on disk again: the next "
				"generation is tried once the directory is "
				"quiet",
				g->m->files[f->fidx].path, g->number,
				g->m->model);
			continue;
		}
		if (!f->nmr) /* its keys went: the earlier ones go too */
			retired_drop(s, g, f);
		n++;
		SFS_LOG(SFS_WARN, "seed",
			"%s changed on disk under the seed: its bytes are "
			"withdrawn from generation %" PRIu64
			" of %s (replicas get an I/O error for it, never "
			"other bytes); the next generation follows once the "
			"directory is quiet",
			g->m->files[g->files[i].fidx].path, g->number,
			g->m->model);
	}
	return n;
}

int sfs_seed_files_changed(struct sfs_seed *s, uint64_t *changed,
			   uint64_t *again_in)
{
	char buf[4096]
		__attribute__((aligned(__alignof__(struct inotify_event))));
	int withdrawn = 0;
	ssize_t n;

	while ((n = read(s->wfd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const void *)p;
			p += sizeof(*ev) + ev->len;
			if (!(ev->mask & IN_MODIFY))
				continue;
			for (size_t mi = 0; mi < s->nmodels; mi++) {
				int k = 0, again = 0;
				size_t ng = s->models[mi].ngens;
				for (size_t j = 0; j < ng; j++)
					k += withdraw_wd(
						s, s->models[mi].gens[j],
						ev->wd,
						j + 1 == ng ? &again : NULL);
				if (k && changed && mi < 64)
					*changed |= 1ull << mi;
				if (again && again_in && mi < 64)
					*again_in |= 1ull << mi;
				pthread_mutex_lock(&s->lock);
				s->models[mi].withdrawn += (uint64_t)k;
				pthread_mutex_unlock(&s->lock);
				withdrawn += k;
			}
		}
	}
	return withdrawn;
}

/* The model named @name, or with NULL the only one; NULL when none. */
static struct seed_model *model_of(struct sfs_seed *s, const char *name)
{
	if (!name)
		return s->nmodels == 1 ? &s->models[0] : NULL;
	for (size_t i = 0; i < s->nmodels; i++)
		if (!strcmp(s->models[i].name, name))
			return &s->models[i];
	return NULL;
}

int sfs_seed_manifest_get(struct sfs_seed *s, const char *model,
			  uint64_t generation, int gzip, struct sfs_blob **out,
			  int *gzipped)
{
	struct seed_model *mo = model_of(s, model);
	int rc = -ENOENT;
	*gzipped = 0;
	*out = NULL;
	if (!mo)
		return model ? -ESRCH : -EISDIR;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < mo->ngens; i++) {
		struct seed_gen *g = mo->gens[i];
		if (generation ? g->number != generation : i + 1 != mo->ngens)
			continue;
		if (gzip && !g->gz_tried) { /* once per generation and keys */
			char *z;
			size_t zn;
			int zr = sfs_gzip(sfs_blob_data(g->json),
					  sfs_blob_len(g->json), &z, &zn);
			if (!zr && sfs_blob_wrap(z, zn, &g->gz)) {
				free(z);
				zr = -ENOMEM;
			}
			g->gz_tried = zr != -ENOMEM;
		}
		*gzipped = gzip && g->gz;
		*out = sfs_blob_get(*gzipped ? g->gz : g->json);
		rc = 0;
		break;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* One model's generations as JSON (s->lock held). */
static json_t *model_json(const struct sfs_seed *s, const struct seed_model *mo,
			  uint64_t now)
{
	const struct seed_gen *cur = mo->gens[mo->ngens - 1];
	char inst[24], content[24], id[SFS_ID_SHORT + 1] = "";
	sfs_manifest_identity_id(cur->m, id);
	snprintf(inst, sizeof(inst), "0x%" PRIx64, s->instance);
	snprintf(content, sizeof(content), "0x%" PRIx64, cur->m->content);
	json_t *served = json_array();
	for (size_t i = 0; served && i < mo->ngens; i++) {
		const struct seed_gen *g = mo->gens[i];
		json_t *e =
			json_pack("{s:I}", "generation", (json_int_t)g->number);
		if (e && g->expires_ms)
			json_object_set_new(
				e, "expires_in_ms",
				json_integer(
					(json_int_t)(g->expires_ms > now
							     ? g->expires_ms -
								       now
							     : 0)));
		json_array_append_new(served, e);
	}
	json_t *o = json_pack("{s:s,s:I,s:s,s:s,s:s,s:I,s:o*}", "model",
			      mo->name, "generation", (json_int_t)cur->number,
			      "instance", inst, "content", content,
			      "identity_id", id, "key_epoch",
			      (json_int_t)cur->m->key_epoch, "served", served);
	/* Signed again (resign): replicas fetch the manifest anew. */
	if (o && cur->m->signed_at &&
	    json_object_set_new(o, "signed_at",
				json_integer((json_int_t)cur->m->signed_at))) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

int sfs_seed_record(struct sfs_seed *s, size_t i, const char *kind,
		    const char *control, char **json)
{
	if (i >= sfs_seed_nmodels(s))
		return -ENOENT;
	const struct seed_model *mo = &s->models[i];
	char *id = NULL;
	pthread_mutex_lock(&s->lock);
	const struct seed_gen *cur = mo->gens[mo->ngens - 1];
	json_t *o = model_json(s, mo, sfs_now_ms()), *protos = json_array();
	int rc = sfs_identity_canonical(&cur->m->id, &id);
	for (size_t k = 0; protos && k < cur->m->neps; k++)
		json_array_append_new(protos,
				      json_string(cur->m->eps[k].protocol));
	pthread_mutex_unlock(&s->lock);
	json_error_t je;
	json_t *ido = id ? json_loads(id, 0, &je) : NULL;
	free(id);
	if (!rc && (!o || !protos || !ido))
		rc = -ENOMEM;
	if (!rc) {
		json_object_del(o, "served");
		json_object_del(o, "signed_at"); /* not a record's news */
		json_object_set_new(o, "version", json_integer(1));
		json_object_set_new(o, "kind", json_string(kind));
		json_object_set_new(o, "control", json_string(control));
		json_object_set_new(o, "identity", ido);
		json_object_set_new(o, "protocols", protos);
		ido = protos = NULL;
		*json = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
		rc = *json ? 0 : -ENOMEM;
	}
	json_decref(ido);
	json_decref(protos);
	json_decref(o);
	return rc;
}

int sfs_seed_generations(struct sfs_seed *s, const char *model, char **buf,
			 size_t *len)
{
	struct seed_model *mo = model_of(s, model);
	if (!mo)
		return model ? -ESRCH : -EISDIR;
	pthread_mutex_lock(&s->lock);
	json_t *o = model_json(s, mo, sfs_now_ms());
	pthread_mutex_unlock(&s->lock);
	*buf = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!*buf)
		return -ENOMEM;
	*len = strlen(*buf);
	return 0;
}

int sfs_seed_models(struct sfs_seed *s, char **buf, size_t *len)
{
	char inst[24];
	snprintf(inst, sizeof(inst), "0x%" PRIx64, s->instance);
	json_t *a = json_array();
	uint64_t now = sfs_now_ms();
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; a && i < s->nmodels; i++)
		if (json_array_append_new(a,
					  model_json(s, &s->models[i], now))) {
			json_decref(a);
			a = NULL;
		}
	pthread_mutex_unlock(&s->lock);
	json_t *o = json_pack("{s:s,s:o*}", "instance", inst, "models", a);
	*buf = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!*buf)
		return -ENOMEM;
	*len = strlen(*buf);
	return 0;
}

int sfs_seed_announce(struct sfs_seed *s, const struct sfs_announce *an,
		      struct sfs_announced_res *res)
{
	int rc = sfs_announced_add(s->ann, an, sfs_now_ms(), res);
	if (!rc && *res->moved_from)
		SFS_LOG(SFS_INFO, "seed",
			"re-seeder run 0x%016" PRIx64
			" moved from %s to %s (it proved the run)",
			an->instance, res->moved_from, res->listed);
	else if (!rc && res->fresh)
		SFS_LOG(SFS_INFO, "seed", "re-seeder %s announced itself",
			res->listed);
	return rc;
}

int sfs_seed_sources(struct sfs_seed *s, const char *asker, uint64_t me,
		     char **buf, size_t *len)
{
	uint32_t from =
		s->cfg.fleet_from ? s->cfg.fleet_from : SFS_SEED_FLEET_FROM;
	return sfs_announced_sources(s->ann, asker, me, from, sfs_now_ms(), buf,
				     len);
}

/* One model's numbers, for the metrics. */
struct model_nums {
	const char *name;
	uint64_t v[9];
};

/* What model @mo serves (s->lock held), in sfs_seed_metrics' order. */
static void model_nums(const struct seed_model *mo, struct model_nums *n)
{
	const struct seed_gen *cur = mo->gens[mo->ngens - 1];
	uint64_t reg = 0;
	for (size_t i = 0; i < mo->ngens; i++)
		for (size_t k = 0; k < mo->gens[i]->nfiles; k++) {
			const struct seed_file *f = &mo->gens[i]->files[k];
			reg += f->nmr && !f->withdrawn ? f->size : 0;
		}
	n->name = mo->name;
	uint64_t v[9] = {cur->number, mo->ngens,     cur->total_bytes,
			 reg,	      mo->published, mo->unchanged,
			 mo->failed,  mo->withdrawn, 0};
	memcpy(n->v, v, sizeof(v));
}

void sfs_seed_metrics(struct sfs_seed *s, struct sfs_metrics *m)
{
	/* Per model; the publishes family has three results. */
	static const struct {
		const char *name, *type, *help, *result;
	} fam[] = {
		{"seedfs_seed_generation", "gauge",
		 "The model's current generation.", NULL},
		{"seedfs_seed_generations_served", "gauge",
		 "Generations of the model still readable (the current one "
		 "and those in their grace period).",
		 NULL},
		{"seedfs_seed_model_bytes", "gauge",
		 "Bytes of the model's current generation.", NULL},
		{"seedfs_seed_registered_bytes", "gauge",
		 "Bytes registered for remote reads, every generation served.",
		 NULL},
		{"seedfs_seed_publishes_total", "counter",
		 "Republishes (SIGHUP, changed files) by result.", "published"},
		{"seedfs_seed_publishes_total", NULL, NULL, "unchanged"},
		{"seedfs_seed_publishes_total", NULL, NULL, "failed"},
		{"seedfs_seed_files_withdrawn_total", "counter",
		 "Files withdrawn because they changed on disk under the seed.",
		 NULL},
	};
	struct model_nums *n = calloc(s->nmodels, sizeof(*n));
	uint64_t now = sfs_now_ms();
	size_t live = 0;
	if (!n)
		return; /* the text ends short; the caller's -ENOMEM */
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->nmodels; i++)
		model_nums(&s->models[i], &n[i]);
	pthread_mutex_unlock(&s->lock);
	live = sfs_announced_live(s->ann, now);
	for (size_t f = 0; f < SFS_ARRAY_SIZE(fam); f++) {
		if (fam[f].type)
			sfs_metrics_family(m, fam[f].name, fam[f].type,
					   fam[f].help);
		for (size_t i = 0; i < s->nmodels; i++)
			sfs_metrics_u64(m, fam[f].name, n[i].v[f], "model",
					n[i].name,
					fam[f].result ? "result" : NULL,
					fam[f].result, NULL);
	}
	free(n);
	sfs_metrics_family(m, "seedfs_seed_reseeders", "gauge",
			   "Re-seeders announced in the last 15 s.");
	sfs_metrics_u64(m, "seedfs_seed_reseeders", live, NULL);
	sfs_xport_listen_metrics(m);
}

void sfs_seed_errors(struct sfs_seed *s, uint64_t *publish, uint64_t *withdrawn)
{
	*publish = *withdrawn = 0;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->nmodels; i++) {
		*publish += s->models[i].failed;
		*withdrawn += s->models[i].withdrawn;
	}
	pthread_mutex_unlock(&s->lock);
}

uint64_t sfs_seed_current(struct sfs_seed *s)
{
	pthread_mutex_lock(&s->lock);
	uint64_t g = s->models[0].gens[s->models[0].ngens - 1]->number;
	pthread_mutex_unlock(&s->lock);
	return g;
}

const char *sfs_seed_protocol(const struct sfs_seed *s)
{
	return s->protocols;
}

int sfs_seed_accept(struct sfs_seed *s, const char *protocol, const void *hello,
		    size_t len, const char *client, void *reply, size_t *rlen)
{
	for (size_t i = 0; protocol && i < s->nx; i++)
		if (!strcmp(s->pname[i], protocol))
			return sfs_xport_needs_hello(s->x[i])
				       ? sfs_xport_accept(s->x[i], hello, len,
							  client, reply, rlen)
				       : -EPROTONOSUPPORT;
	return -EPROTONOSUPPORT;
}

void sfs_seed_summary(struct sfs_seed *s, char *buf, size_t len)
{
	size_t o = 0;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->nmodels && o < len; i++) {
		char b[32], id[SFS_ID_SHORT + 1] = "?";
		const struct seed_model *mo = &s->models[i];
		const struct seed_gen *g = mo->gens[mo->ngens - 1];
		sfs_identity_short_id(&g->m->id, id);
		int n = snprintf(buf + o, len - o,
				 "%smodel %s generation %" PRIu64
				 " identity %s (quant %s, layout %s), %zu "
				 "files, %s, %zu tensors, %zu regions",
				 i ? "; " : "", g->m->model, g->number, id,
				 g->m->id.quant, g->m->id.layout, g->m->nfiles,
				 sfs_fmt_bytes(g->total_bytes, b, sizeof(b)),
				 g->m->ntensors, g->m->nregions);
		o += n > 0 ? (size_t)n : 0;
	}
	pthread_mutex_unlock(&s->lock);
}

void sfs_seed_close(struct sfs_seed *s)
{
	if (!s)
		return;
	while (s->retired) {
		struct seed_retired *r = s->retired;
		s->retired = r->next;
		retired_free(r);
	}
	for (size_t m = 0; s->models && m < s->nmodels; m++) {
		for (size_t i = 0; i < s->models[m].ngens; i++)
			seed_gen_free(s->models[m].gens[i]);
		free(s->models[m].name);
	}
	free(s->models);
	for (size_t i = 0; i < s->nx; i++)
		sfs_xport_close(s->x[i]);
	if (s->wfd >= 0)
		close(s->wfd);
	sfs_announced_free(s->ann);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
