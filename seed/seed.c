/* SPDX-License-Identifier: MIT */
/*
 * seed.c - the seed: its transports, opened once, and the generations
 * of the model it serves.  The newest generation is current; the ones
 * before it stay registered (readable) for the grace period, then are
 * released.  The control port reads the generations from its own
 * threads, under s->lock.
 */
#include "seed.h"

#include "common/log.h"
#include "common/util.h"
#include "metadata/manifest.h"
#include "seed/publish.h"
#include "transports/transport.h"

#include <errno.h>
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
#include <unistd.h>

#define SEED_MAX_GENS 8 /* generations alive at once */

struct sfs_seed {
	struct sfs_seed_cfg cfg; /* strings borrowed from the caller */
	char *name;
	uint64_t instance;
	size_t nx; /* transports, = manifest endpoints, same order */
	struct sfs_xport *x[SFS_MF_MAX_ENDPOINTS];
	char pname[SFS_MF_MAX_ENDPOINTS][32];
	int writable; /* some transport needs writable memory */
	char protocols[SFS_MF_MAX_ENDPOINTS * 32];
	pthread_mutex_t lock;
	size_t ngens;			      /* protected by lock */
	struct seed_gen *gens[SEED_MAX_GENS]; /* protected by lock; the
						 last one is current */
	/* inotify on every published file (IN_MODIFY): a file that changes
	 * under the seed is withdrawn.  -1: none (in-memory models).  The
	 * watches are managed by the thread that publishes. */
	int wfd;
};

/* Watch the files @g serves from disk. */
static void watch_gen(struct sfs_seed *s, struct seed_gen *g)
{
	for (size_t i = 0; s->wfd >= 0 && i < g->nfiles; i++) {
		struct seed_file *f = &g->files[i];
		struct stat st;
		if (!f->abs || !f->nmr)
			continue; /* inline or empty: copied, nothing to back */
		int wd = inotify_add_watch(s->wfd, f->abs, IN_MODIFY);
		/* The path must still name the inode that is mapped. */
		if (wd < 0 || stat(f->abs, &st) ||
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
 * in s->gens (an unchanged file has the same watch in every generation
 * that serves it).  The publishing thread's, like every change of
 * s->gens: no lock needed to read them. */
static void unwatch_gen(struct sfs_seed *s, struct seed_gen *g)
{
	size_t n = 0, cap = 0;
	int *kept = NULL;
	if (s->wfd < 0)
		return;
	for (size_t k = 0; k < s->ngens; k++) {
		const struct seed_gen *o = s->gens[k];
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

/* The model's name: --name, or the directory's basename. */
static int resolve_name(struct sfs_seed *s, char *err, size_t errlen)
{
	const char *why;
	if (s->cfg.name) {
		s->name = strdup(s->cfg.name);
	} else if (!s->cfg.model_dir) {
		snprintf(err, errlen, "a model name is required");
		return -EINVAL;
	} else {
		char *tmp = strdup(s->cfg.model_dir);
		if (tmp) {
			size_t l = strlen(tmp);
			while (l > 1 && tmp[l - 1] == '/')
				tmp[--l] = '\0';
			s->name = strdup(basename(tmp));
			free(tmp);
		}
	}
	if (!s->name)
		return -ENOMEM;
	if (sfs_path_check(s->name, &why) || strchr(s->name, '/')) {
		snprintf(err, errlen,
			 "model name '%s' is not a valid directory name; use "
			 "--name",
			 s->name);
		return -EINVAL;
	}
	return 0;
}

int sfs_seed_open(const struct sfs_seed_cfg *cfg, struct sfs_seed **out,
		  char *err, size_t errlen)
{
	struct seed_gen *g = NULL;
	struct sfs_seed *s;
	int rc;

	if (!(s = calloc(1, sizeof(*s))))
		return -ENOMEM;
	s->cfg = *cfg;
	s->wfd = -1;
	pthread_mutex_init(&s->lock, NULL);
	if (!cfg->mem && (s->wfd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) < 0)
		SFS_LOG(SFS_WARN, "seed",
			"inotify: %s: files changed under the seed will not be "
			"noticed",
			strerror(errno));
	if (getrandom(&s->instance, sizeof(s->instance), 0) !=
	    sizeof(s->instance))
		s->instance = sfs_now_ns() ^ (uint64_t)getpid() << 32;
	if ((rc = resolve_name(s, err, errlen)))
		goto err;
	/* Validate everything before touching the fabric: a bad file is
	 * the one line the user sees. */
	if ((rc = seed_gen_prepare(cfg, s->name, 1, s->instance, cfg->grace_s,
				   &g, err, errlen)))
		goto err;
	if ((rc = open_transports(s, cfg, err, errlen)))
		goto err;
	if ((rc = seed_gen_publish(g, cfg, s->nx, s->x, s->writable,
				   s->protocols, err, errlen)))
		goto err;
	s->gens[s->ngens++] = g;
	watch_gen(s, g);
	*out = s;
	return 0;
err:
	seed_gen_free(g);
	sfs_seed_close(s);
	return rc;
}

int sfs_seed_republish(struct sfs_seed *s, char *err, size_t errlen)
{
	struct seed_gen *g = NULL, *cur;
	uint64_t number;
	int rc;

	pthread_mutex_lock(&s->lock);
	number = s->gens[s->ngens - 1]->number + 1;
	/* Only this thread frees generations: it stays while we publish. */
	const struct sfs_manifest *prev = s->gens[s->ngens - 1]->m;
	pthread_mutex_unlock(&s->lock);
	rc = seed_gen_prepare(&s->cfg, s->name, number, s->instance,
			      s->cfg.grace_s, &g, err, errlen);
	if (!rc) {
		g->prev = prev;
		rc = seed_gen_publish(g, &s->cfg, s->nx, s->x, s->writable,
				      s->protocols, err, errlen);
		g->prev = NULL;
	}
	if (rc) {
		seed_gen_free(g);
		return rc;
	}
	pthread_mutex_lock(&s->lock);
	if (s->ngens == SEED_MAX_GENS) {
		pthread_mutex_unlock(&s->lock);
		snprintf(err, errlen,
			 "%d generations are still served; wait for the "
			 "grace period (--grace) to end",
			 SEED_MAX_GENS);
		seed_gen_free(g);
		return -EBUSY;
	}
	cur = s->gens[s->ngens - 1];
	cur->expires_ms = sfs_now_ms() + (uint64_t)s->cfg.grace_s * 1000;
	s->gens[s->ngens++] = g;
	uint64_t old = cur->number;
	pthread_mutex_unlock(&s->lock);
	watch_gen(s, g);
	SFS_LOG(SFS_INFO, "seed",
		"generation %" PRIu64 " published; generation %" PRIu64
		" stays served for %u s",
		number, old, s->cfg.grace_s);
	return 0;
}

int64_t sfs_seed_reap(struct sfs_seed *s)
{
	struct seed_gen *dead[SEED_MAX_GENS];
	size_t ndead = 0, keep = 0;
	int64_t next = -1;
	uint64_t now = sfs_now_ms();

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->ngens; i++) {
		struct seed_gen *g = s->gens[i];
		int current = i + 1 == s->ngens;
		if (!current && g->expires_ms <= now) {
			dead[ndead++] = g;
			continue;
		}
		if (!current &&
		    (next < 0 || (int64_t)(g->expires_ms - now) < next))
			next = (int64_t)(g->expires_ms - now);
		s->gens[keep++] = g;
	}
	s->ngens = keep;
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < ndead; i++) {
		SFS_LOG(SFS_INFO, "seed",
			"generation %" PRIu64 " is no longer served",
			dead[i]->number);
		unwatch_gen(s, dead[i]);
		seed_gen_free(dead[i]);
	}
	return next;
}

int sfs_seed_watch_fd(const struct sfs_seed *s)
{
	return s->wfd;
}

int sfs_seed_files_changed(struct sfs_seed *s)
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
			for (size_t k = 0; k < s->ngens; k++) {
				struct seed_gen *g = s->gens[k];
				for (size_t i = 0; i < g->nfiles; i++) {
					if (g->files[i].wd != ev->wd ||
					    !seed_gen_withdraw(g, i))
						continue;
					withdrawn++;
					SFS_LOG(SFS_WARN, "seed",
						"%s changed on disk under the "
						"seed: its bytes are withdrawn "
						"from generation %" PRIu64
						" (replicas get an I/O error "
						"for it, never other bytes); "
						"the next generation follows "
						"once the directory is quiet",
						g->m->files[g->files[i].fidx]
							.path,
						g->number);
				}
			}
		}
	}
	return withdrawn;
}

int sfs_seed_manifest_copy(struct sfs_seed *s, uint64_t generation, char **json,
			   size_t *len)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->ngens; i++) {
		struct seed_gen *g = s->gens[i];
		if (generation ? g->number != generation : i + 1 != s->ngens)
			continue;
		*json = malloc(g->json_len + 1);
		rc = *json ? 0 : -ENOMEM;
		if (*json) {
			memcpy(*json, g->json, g->json_len + 1);
			*len = g->json_len;
		}
		break;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int sfs_seed_generations(struct sfs_seed *s, char *buf, size_t len)
{
	size_t o = 0;
	pthread_mutex_lock(&s->lock);
	o += (size_t)snprintf(
		buf, len,
		"{\"model\": \"%s\", \"generation\": %" PRIu64
		", \"instance\": \"0x%" PRIx64 "\", \"served\": [",
		s->name, s->gens[s->ngens - 1]->number, s->instance);
	uint64_t now = sfs_now_ms();
	for (size_t i = 0; i < s->ngens && o < len; i++) {
		const struct seed_gen *g = s->gens[i];
		if (g->expires_ms)
			o += (size_t)snprintf(
				buf + o, len - o,
				"%s{\"generation\": %" PRIu64
				", \"expires_in_ms\": %" PRIu64 "}",
				i ? ", " : "", g->number,
				g->expires_ms > now ? g->expires_ms - now : 0);
		else
			o += (size_t)snprintf(buf + o, len - o,
					      "%s{\"generation\": %" PRIu64 "}",
					      i ? ", " : "", g->number);
	}
	if (o < len)
		o += (size_t)snprintf(buf + o, len - o, "]}\n");
	pthread_mutex_unlock(&s->lock);
	return o < len ? 0 : -ENOSPC;
}

uint64_t sfs_seed_current(struct sfs_seed *s)
{
	pthread_mutex_lock(&s->lock);
	uint64_t g = s->gens[s->ngens - 1]->number;
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
	char b[32], id[SFS_ID_SHORT + 1] = "?";
	pthread_mutex_lock(&s->lock);
	const struct seed_gen *g = s->gens[s->ngens - 1];
	sfs_identity_short_id(&g->m->id, id);
	snprintf(buf, len,
		 "model %s generation %" PRIu64
		 " identity %s (quant %s, layout %s), %zu files, %s, %zu "
		 "tensors, %zu regions",
		 g->m->model, g->number, id, g->m->id.quant, g->m->id.layout,
		 g->m->nfiles, sfs_fmt_bytes(g->total_bytes, b, sizeof(b)),
		 g->m->ntensors, g->m->nregions);
	pthread_mutex_unlock(&s->lock);
}

void sfs_seed_close(struct sfs_seed *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->ngens; i++)
		seed_gen_free(s->gens[i]);
	for (size_t i = 0; i < s->nx; i++)
		sfs_xport_close(s->x[i]);
	if (s->wfd >= 0)
		close(s->wfd);
	pthread_mutex_destroy(&s->lock);
	free(s->name);
	free(s);
}
