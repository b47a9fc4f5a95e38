/* SPDX-License-Identifier: MIT */
#include "walk.h"

#include "common/log.h"
#include "common/util.h"
#include "metadata/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WALK_DEPTH_MAX 64

struct walk_ctx {
	struct sfs_walk *w;
	const char *root; /* resolved */
	size_t root_len;
	struct {
		dev_t dev;
		ino_t ino;
	} stack[WALK_DEPTH_MAX];
	int depth;
	char *err;
	size_t errlen;
};

static int add(struct walk_ctx *c, const char *rel, const char *abs,
	       enum sfs_walk_type type, const struct stat *st)
{
	struct sfs_walk *w = c->w;
	if (w->n >= SFS_MF_MAX_FILES) {
		snprintf(c->err, c->errlen, "more than %d entries",
			 SFS_MF_MAX_FILES);
		return -E2BIG;
	}
	if (sfs_grow((void **)&w->e, &w->cap, w->n + 1, sizeof(w->e[0])))
		return -ENOMEM;
	struct sfs_walk_entry *e = &w->e[w->n];
	e->rel = strdup(rel);
	e->abs = strdup(abs);
	e->type = type;
	e->size = type == SFS_WALK_FILE ? (uint64_t)st->st_size : 0;
	e->mtime_ns = sfs_timespec_ns(st->st_mtim);
	e->mode = st->st_mode & 07777;
	if (!e->rel || !e->abs) {
		free(e->rel);
		free(e->abs);
		return -ENOMEM;
	}
	w->n++;
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int inside_root(struct walk_ctx *c, const char *resolved)
{
	return strncmp(resolved, c->root, c->root_len) == 0 &&
	       resolved[c->root_len] == '/';
}

static int walk(struct walk_ctx *c, const char *abs, const char *rel);

/* One directory entry: @abs is its path as listed, @rel its name. */
static int visit(struct walk_ctx *c, const char *abs, const char *rel)
{
	char resolved[PATH_MAX];
	struct stat st;
	const char *why;
	const char *target = abs;

	if (sfs_path_check(rel, &why)) {
		SFS_LOG(SFS_WARN, "seed", "skipping %s: path %s", rel, why);
		return 0;
	}
	if (lstat(abs, &st)) {
		SFS_LOG(SFS_WARN, "seed", "skipping %s: %s", rel,
			strerror(errno));
		return 0;
	}
	if (S_ISLNK(st.st_mode)) {
		if (!realpath(abs, resolved)) {
			SFS_LOG(SFS_WARN, "seed", "skipping symlink %s: %s",
				rel, strerror(errno));
			return 0;
		}
		if (!inside_root(c, resolved)) {
			SFS_LOG(SFS_WARN, "seed",
				"skipping symlink %s: it points outside the "
				"model directory (%s)",
				rel, resolved);
			return 0;
		}
		if (stat(resolved, &st)) {
			SFS_LOG(SFS_WARN, "seed", "skipping symlink %s: %s",
				rel, strerror(errno));
			return 0;
		}
		target = resolved;
	}
	if (S_ISDIR(st.st_mode)) {
		for (int i = 0; i < c->depth; i++)
			if (c->stack[i].dev == st.st_dev &&
			    c->stack[i].ino == st.st_ino) {
				SFS_LOG(SFS_WARN, "seed",
					"skipping %s: it loops back to a "
					"parent directory",
					rel);
				return 0;
			}
		if (c->depth >= WALK_DEPTH_MAX) {
			SFS_LOG(SFS_WARN, "seed",
				"skipping %s: deeper than %d levels", rel,
				WALK_DEPTH_MAX);
			return 0;
		}
		int rc = add(c, rel, target, SFS_WALK_DIR, &st);
		return rc ? rc : walk(c, target, rel);
	}
	if (S_ISREG(st.st_mode))
		return add(c, rel, target, SFS_WALK_FILE, &st);
	SFS_LOG(SFS_WARN, "seed", "skipping %s: not a regular file", rel);
	return 0;
}

static int walk(struct walk_ctx *c, const char *abs, const char *rel)
{
	struct stat st;
	struct dirent *d;
	char **names = NULL;
	size_t n = 0, cap = 0;
	DIR *dir;
	int rc = 0;

	if (stat(abs, &st) || !(dir = opendir(abs))) {
		snprintf(c->err, c->errlen, "cannot read directory %s: %s",
			 *rel ? rel : abs, strerror(errno));
		return -errno;
	}
	c->stack[c->depth].dev = st.st_dev;
	c->stack[c->depth].ino = st.st_ino;
	c->depth++;
	while ((d = readdir(dir))) {
		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		if (!*rel && !strcmp(d->d_name, SFS_MF_RESERVED)) {
			SFS_LOG(SFS_WARN, "seed",
				"skipping %s: the name is reserved for the "
				"mount's debug view",
				d->d_name);
			continue;
		}
		if (sfs_grow((void **)&names, &cap, n + 1, sizeof(*names)) ||
		    !(names[n] = strdup(d->d_name))) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(dir);
	qsort(names, n, sizeof(*names), cmp_name);
	for (size_t i = 0; i < n && !rc; i++) {
		char *cabs, *crel;
		if (asprintf(&cabs, "%s/%s", abs, names[i]) < 0) {
			rc = -ENOMEM;
			break;
		}
		if (asprintf(&crel, "%s%s%s", rel, *rel ? "/" : "", names[i]) <
		    0) {
			free(cabs);
			rc = -ENOMEM;
			break;
		}
		rc = visit(c, cabs, crel);
		free(cabs);
		free(crel);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	c->depth--;
	if (rc == -ENOMEM)
		snprintf(c->err, c->errlen, "out of memory walking %s", abs);
	return rc;
}

int sfs_walk_dir(const char *root, struct sfs_walk **out, char *err,
		 size_t errlen)
{
	char resolved[PATH_MAX];
	struct walk_ctx c = {.err = err, .errlen = errlen};
	struct stat st;
	int rc;

	if (!realpath(root, resolved) || stat(resolved, &st)) {
		snprintf(err, errlen, "model directory %s: %s", root,
			 strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "model directory %s: not a directory",
			 root);
		return -ENOTDIR;
	}
	if (!(c.w = calloc(1, sizeof(*c.w))))
		return -ENOMEM;
	c.w->root_mtime_ns = sfs_timespec_ns(st.st_mtim);
	c.w->root_mode = st.st_mode & 07777;
	c.root = resolved;
	c.root_len = strlen(resolved);
	if (c.root_len == 1) /* "/": every path is inside */
		c.root_len = 0;
	rc = walk(&c, resolved, "");
	if (rc) {
		sfs_walk_free(c.w);
		return rc;
	}
	*out = c.w;
	return 0;
}

void sfs_walk_free(struct sfs_walk *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++) {
		free(w->e[i].rel);
		free(w->e[i].abs);
	}
	free(w->e);
	free(w);
}
