/* SPDX-License-Identifier: MIT */
#include "walk.h"

#include "common/log.h"
#include "common/util.h"
#include "metadata/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WALK_DEPTH_MAX 64
#define BASE_ROOT 0
#define BASE_BLOBS 1

struct walk_ctx {
	struct sfs_walk *w;
	struct {
		dev_t dev;
		ino_t ino;
	} stack[WALK_DEPTH_MAX];
	int depth;
	char *err;
	size_t errlen;
};

/* Where the path below @base starts in @path, which is inside it. */
static size_t below_off(const char *base)
{
	size_t n = strlen(base);
	return n == 1 ? 1 : n + 1; /* "/" */
}

/* 1 when the absolute path @path is strictly inside directory @base. */
static int inside(const char *base, const char *path)
{
	size_t n = strlen(base);
	if (n == 1)
		return path[0] == '/' && path[1] != '\0';
	return !strncmp(path, base, n) && path[n] == '/' && path[n + 1];
}

/*
 * Open @path (relative, '/'-separated, no empty, "." or ".." part) below
 * directory @dfd: every directory on the way with O_NOFOLLOW, the last
 * part with @flags | O_NOFOLLOW.  The descriptor, or -errno (-ENOTDIR or
 * -ELOOP where a link stands).
 */
static int open_below(int dfd, const char *path, int flags)
{
	char part[NAME_MAX + 1];
	int cur = dfd, rc;

	for (const char *p = path;;) {
		size_t n = strcspn(p, "/");
		if (n == 0 || n > NAME_MAX) {
			rc = -EINVAL;
			break;
		}
		memcpy(part, p, n);
		part[n] = '\0';
		if (!strcmp(part, ".") || !strcmp(part, "..")) {
			rc = -EINVAL;
			break;
		}
		if (!p[n]) {
			rc = openat(cur, part, flags | O_NOFOLLOW | O_CLOEXEC);
			if (rc < 0)
				rc = -errno;
			break;
		}
		int next =
			openat(cur, part,
			       O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			rc = -errno;
			break;
		}
		if (cur != dfd)
			close(cur);
		cur = next;
		p += n + 1;
	}
	if (cur != dfd)
		close(cur);
	return rc;
}

static int add(struct walk_ctx *c, const char *rel, const char *abs,
	       unsigned int base, enum sfs_walk_type type,
	       const struct stat *st)
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
	if (!e->rel || !e->abs) {
		free(e->rel);
		free(e->abs);
		return -ENOMEM;
	}
	e->below = e->abs + below_off(w->base_path[base]);
	e->base = base;
	e->type = type;
	e->size = type == SFS_WALK_FILE ? (uint64_t)st->st_size : 0;
	e->mtime_ns = sfs_timespec_ns(st->st_mtim);
	e->mode = st->st_mode & 07777;
	e->dev = (uint64_t)st->st_dev;
	e->ino = (uint64_t)st->st_ino;
	w->n++;
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int walk(struct walk_ctx *c, int dfd, unsigned int base, const char *abs,
		const char *rel);

/*
 * Symbolic link @rel at @abs: what it resolves to, if that is inside a
 * base (files only in the blobs), opened below the base's descriptor
 * into *pfd (O_PATH) with *st, its path in @resolved and its base in
 * *base.  0, or 1 when skipped (logged).
 */
static int follow(struct walk_ctx *c, const char *abs, const char *rel,
		  char *resolved, unsigned int *base, int *pfd, struct stat *st)
{
	struct sfs_walk *w = c->w;
	unsigned int b;

	if (!realpath(abs, resolved)) {
		SFS_LOG(SFS_WARN, "seed", "skipping symlink %s: %s", rel,
			strerror(errno));
		return 1;
	}
	for (b = 0; b < SFS_WALK_BASES; b++)
		if (w->base_path[b] && inside(w->base_path[b], resolved))
			break;
	if (b == SFS_WALK_BASES) {
		SFS_LOG(SFS_WARN, "seed",
			"skipping symlink %s: it points outside the model "
			"directory (%s)",
			rel, resolved);
		return 1;
	}
	*pfd = open_below(w->base_fd[b], resolved + below_off(w->base_path[b]),
			  O_PATH);
	if (*pfd < 0 || fstat(*pfd, st)) {
		int e = *pfd < 0 ? -*pfd : errno;
		SFS_LOG(SFS_WARN, "seed",
			"skipping symlink %s: %s: %s (it changed while the "
			"directory was walked)",
			rel, resolved, strerror(e));
		if (*pfd >= 0)
			close(*pfd);
		return 1;
	}
	if (b == BASE_BLOBS && !S_ISREG(st->st_mode)) {
		SFS_LOG(SFS_WARN, "seed",
			"skipping symlink %s: %s is in the repository's blobs "
			"but not a file",
			rel, resolved);
		close(*pfd);
		return 1;
	}
	*base = b;
	return 0;
}

/* One entry @name of directory @dfd (at @dir_abs, in base @base); @rel
 * its path in the model. */
static int visit(struct walk_ctx *c, int dfd, unsigned int base,
		 const char *dir_abs, const char *name, const char *rel)
{
	char resolved[PATH_MAX], *cabs;
	struct stat st;
	const char *why;
	int fd = -1, rc = 0;

	if (sfs_path_check(rel, &why)) {
		SFS_LOG(SFS_WARN, "seed", "skipping %s: path %s", rel, why);
		/* Said in the manifest: a pull must not pass without it. */
		struct sfs_walk *w = c->w;
		if (w->nskipped < SFS_WALK_SKIPPED_KEPT &&
		    !(w->skipped[w->nskipped] = strdup(rel)))
			return -ENOMEM;
		w->nskipped++;
		return 0;
	}
	if (asprintf(&cabs, "%s%s%s", dir_abs, strcmp(dir_abs, "/") ? "/" : "",
		     name) < 0)
		return -ENOMEM;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		SFS_LOG(SFS_WARN, "seed", "skipping %s: %s", rel,
			strerror(errno));
		goto out;
	}
	if (S_ISLNK(st.st_mode)) {
		int pfd;
		if (follow(c, cabs, rel, resolved, &base, &pfd, &st))
			goto out;
		if (S_ISDIR(st.st_mode))
			fd = openat(pfd, ".",
				    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(pfd);
		free(cabs);
		if (!(cabs = strdup(resolved)))
			return -ENOMEM;
	} else if (S_ISDIR(st.st_mode)) {
		struct stat now;
		fd = openat(dfd, name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && (fstat(fd, &now) || now.st_dev != st.st_dev ||
				now.st_ino != st.st_ino)) {
			close(fd);
			fd = -1;
			errno = ESTALE;
		}
	}
	if (S_ISDIR(st.st_mode)) {
		if (fd < 0) {
			SFS_LOG(SFS_WARN, "seed",
				"skipping %s: %s (it changed while the "
				"directory was walked)",
				rel, strerror(errno));
			goto out;
		}
		for (int i = 0; i < c->depth; i++)
			if (c->stack[i].dev == st.st_dev &&
			    c->stack[i].ino == st.st_ino) {
				SFS_LOG(SFS_WARN, "seed",
					"skipping %s: it loops back to a "
					"parent directory",
					rel);
				goto out;
			}
		if (c->depth >= WALK_DEPTH_MAX) {
			SFS_LOG(SFS_WARN, "seed",
				"skipping %s: deeper than %d levels", rel,
				WALK_DEPTH_MAX);
			goto out;
		}
		rc = add(c, rel, cabs, base, SFS_WALK_DIR, &st);
		if (!rc)
			rc = walk(c, fd, base, cabs, rel);
	} else if (S_ISREG(st.st_mode)) {
		rc = add(c, rel, cabs, base, SFS_WALK_FILE, &st);
	} else {
		SFS_LOG(SFS_WARN, "seed", "skipping %s: not a regular file",
			rel);
	}
out:
	if (fd >= 0)
		close(fd);
	free(cabs);
	return rc;
}

/* Directory @dfd (at @abs, in base @base; @rel in the model): its
 * entries, sorted, each visited. */
static int walk(struct walk_ctx *c, int dfd, unsigned int base, const char *abs,
		const char *rel)
{
	struct stat st;
	struct dirent *d;
	char **names = NULL;
	size_t n = 0, cap = 0;
	DIR *dir = NULL;
	int rc = 0, fd;

	/* A descriptor of its own: readdir moves its offset. */
	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || !(dir = fdopendir(fd))) {
		rc = -errno;
		snprintf(c->err, c->errlen, "cannot read directory %s: %s",
			 *rel ? rel : abs, strerror(errno));
		if (fd >= 0)
			close(fd);
		return rc;
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
	if (n)
		qsort(names, n, sizeof(*names), cmp_name);
	for (size_t i = 0; i < n && !rc; i++) {
		char *crel;
		if (asprintf(&crel, "%s%s%s", rel, *rel ? "/" : "", names[i]) <
		    0) {
			rc = -ENOMEM;
			break;
		}
		rc = visit(c, dfd, base, abs, names[i], crel);
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

/*
 * A Hugging Face cache keeps a repository as REPO/blobs/HASH (the
 * files) and REPO/snapshots/REV/PATH (links to ../../blobs/HASH).  When
 * the model directory @root (resolved) is such a snapshot, open REPO/blobs
 * as base BASE_BLOBS: links into it are followed.  Best effort.
 */
static void hf_blobs(struct sfs_walk *w, const char *root)
{
	char repo[PATH_MAX], *slash, blobs[PATH_MAX + 8];

	snprintf(repo, sizeof(repo), "%s", root);
	if (!(slash = strrchr(repo, '/')) || slash == repo)
		return;
	*slash = '\0'; /* REPO/snapshots */
	if (!(slash = strrchr(repo, '/')) || strcmp(slash + 1, "snapshots"))
		return;
	*slash = '\0'; /* REPO */
	snprintf(blobs, sizeof(blobs), "%s/blobs", repo);
	int fd = open(blobs, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (!(w->base_path[BASE_BLOBS] = strdup(blobs))) {
		close(fd);
		return;
	}
	w->base_fd[BASE_BLOBS] = fd;
	SFS_LOG(SFS_DEBUG, "seed",
		"%s is a Hugging Face cache snapshot: links to files in %s "
		"are followed",
		root, blobs);
}

int sfs_walk_dir(const char *root, struct sfs_walk **out, char *err,
		 size_t errlen)
{
	char resolved[PATH_MAX];
	struct walk_ctx c = {.err = err, .errlen = errlen};
	struct stat st;
	int fd, rc;

	if (!realpath(root, resolved) ||
	    (fd = open(resolved, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		rc = -errno;
		if (rc == -ENOTDIR)
			snprintf(err, errlen,
				 "model directory %s: not a directory", root);
		else
			snprintf(err, errlen, "model directory %s: %s", root,
				 strerror(errno));
		return rc;
	}
	if (fstat(fd, &st)) {
		rc = -errno;
		snprintf(err, errlen, "model directory %s: %s", root,
			 strerror(errno));
		close(fd);
		return rc;
	}
	if (!(c.w = calloc(1, sizeof(*c.w)))) {
		close(fd);
		return -ENOMEM;
	}
	for (int b = 0; b < SFS_WALK_BASES; b++)
		c.w->base_fd[b] = -1;
	c.w->base_fd[BASE_ROOT] = fd;
	if (!(c.w->base_path[BASE_ROOT] = strdup(resolved))) {
		sfs_walk_free(c.w);
		return -ENOMEM;
	}
	c.w->root_mtime_ns = sfs_timespec_ns(st.st_mtim);
	c.w->root_mode = st.st_mode & 07777;
	hf_blobs(c.w, resolved);
	rc = walk(&c, fd, BASE_ROOT, resolved, "");
	if (rc) {
		sfs_walk_free(c.w);
		return rc;
	}
	*out = c.w;
	return 0;
}

int sfs_walk_open(const struct sfs_walk *w, const struct sfs_walk_entry *e,
		  int *fd, char *err, size_t errlen)
{
	struct stat st;
	const char *why = NULL;
	int f = open_below(w->base_fd[e->base], e->below,
			   O_RDONLY | O_NONBLOCK | O_NOCTTY);

	if (f == -ELOOP || f == -ENOTDIR)
		why = "a symbolic link where the walk saw a file";
	else if (f < 0) {
		snprintf(err, errlen, "cannot open %s: %s", e->rel,
			 strerror(-f));
		return f;
	} else if (fstat(f, &st)) {
		int rc = -errno;
		snprintf(err, errlen, "cannot open %s: %s", e->rel,
			 strerror(errno));
		close(f);
		return rc;
	} else if (!S_ISREG(st.st_mode)) {
		why = "not a regular file any more";
	} else if ((uint64_t)st.st_dev != e->dev ||
		   (uint64_t)st.st_ino != e->ino) {
		why = "another file than the one walked (renamed over it?)";
	} else if ((uint64_t)st.st_size != e->size) {
		snprintf(err, errlen,
			 "refusing %s: %" PRIu64 " bytes when walked, %" PRIu64
			 " now: it changed since the directory was walked",
			 e->rel, e->size, (uint64_t)st.st_size);
		close(f);
		return -ESTALE;
	}
	if (why) {
		snprintf(err, errlen,
			 "refusing %s: %s: it changed since the directory was "
			 "walked",
			 e->rel, why);
		if (f >= 0)
			close(f);
		return -ESTALE;
	}
	*fd = f;
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
	for (size_t i = 0; i < SFS_WALK_SKIPPED_KEPT; i++)
		free(w->skipped[i]);
	for (int b = 0; b < SFS_WALK_BASES; b++) {
		if (w->base_fd[b] >= 0)
			close(w->base_fd[b]);
		free(w->base_path[b]);
	}
	free(w);
}
