/* SPDX-License-Identifier: MIT */
#include "disk.h"

#include "common/log.h"
#include "common/util.h"
#include "common/xxh.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_LEN 32 /* hex of a 128-bit hash */
#define ABOUT "about"
#define ABOUT_TMP "about.tmp"
#define LOCK "lock"

/* Every name under the directory is opened relative to a directory
 * descriptor and never through a symbolic link. */
#define OPEN_DIR (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
#define OPEN_FILE (O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)

struct sfs_disk_src {
	struct sfs_disk *d;
	char name[NAME_LEN + 1];
	int dfd;	/* its directory, checked; protected by d->lock */
	int bad_logged; /* protected by d->lock */
	size_t nregions;
	int *fds;	 /* protected by d->lock; -1: not open yet */
	uint64_t *bytes; /* protected by d->lock: allocated per file */
	int dropped;	 /* protected by d->lock */
	int released;	 /* protected by d->lock: freed by the last I/O */
	/* Reads and writes using fds outside the lock; a dropped source's
	 * files are closed by the last of them.  Protected by d->lock. */
	unsigned int busy;
	struct sfs_disk_src *next;
};

struct sfs_disk {
	char *dir;
	int dfd, lock_fd;
	uid_t uid; /* the mount's effective uid: owns all it uses */
	uint64_t max;
	pthread_mutex_t lock;
	uint64_t used;		   /* protected by lock */
	int full_logged;	   /* protected by lock */
	struct sfs_disk_src *srcs; /* protected by lock */
};

static int is_ours(const char *name)
{
	if (strlen(name) != NAME_LEN)
		return 0;
	for (const char *p = name; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return 1;
}

/* A directory the mount may use: its own, and nobody else may write in
 * it. */
static int dir_ok(const struct sfs_disk *d, const struct stat *st)
{
	return S_ISDIR(st->st_mode) && st->st_uid == d->uid &&
	       !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* A file the mount may read and write: a regular file of its own with
 * no other name (never a link to someone's file). */
static int file_ok(const struct sfs_disk *d, const struct stat *st)
{
	return S_ISREG(st->st_mode) && st->st_uid == d->uid &&
	       st->st_nlink == 1;
}

/* What entry @name of the cache directory is. */
enum entry {
	ENTRY_NONE,    /* nothing by that name */
	ENTRY_OURS,    /* a directory to use */
	ENTRY_STRAY,   /* anything else the mount may remove */
	ENTRY_FOREIGN, /* another user's directory: left alone */
};

static enum entry entry_kind(const struct sfs_disk *d, const char *name,
			     struct stat *st)
{
	if (fstatat(d->dfd, name, st, AT_SYMLINK_NOFOLLOW))
		return ENTRY_NONE;
	if (!S_ISDIR(st->st_mode) || (st->st_uid == d->uid && !dir_ok(d, st)))
		return ENTRY_STRAY;
	return st->st_uid == d->uid ? ENTRY_OURS : ENTRY_FOREIGN;
}

static const char *stray_what(const struct stat *st)
{
	return S_ISLNK(st->st_mode)    ? "a symbolic link"
	       : !S_ISDIR(st->st_mode) ? "not a directory"
				       : "a directory others may write";
}

/* Subdirectory @name opened, if it is one of ours; -errno otherwise. */
static int open_sub(const struct sfs_disk *d, const char *name)
{
	struct stat st;
	int fd = openat(d->dfd, name, OPEN_DIR);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !dir_ok(d, &st)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* Bytes allocated to the regular files in directory @fd; *mtime of its
 * about file (0 when missing). */
static uint64_t fd_bytes(int fd, time_t *mtime)
{
	uint64_t sum = 0;
	struct stat st;
	if (mtime)
		*mtime = fstatat(fd, ABOUT, &st, AT_SYMLINK_NOFOLLOW) ||
					 !S_ISREG(st.st_mode)
				 ? 0
				 : st.st_mtime;
	int dup_fd = dup(fd);
	DIR *dp = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!dp) {
		if (dup_fd >= 0)
			close(dup_fd);
		return 0;
	}
	rewinddir(dp);
	struct dirent *e;
	while ((e = readdir(dp)))
		if (!fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
		    S_ISREG(st.st_mode))
			sum += (uint64_t)st.st_blocks * 512;
	closedir(dp);
	return sum;
}

/* Bytes allocated to the files of subdirectory @name (0 unless it is
 * one of ours); *mtime of its about file (0 when missing). */
static uint64_t dir_bytes(const struct sfs_disk *d, const char *name,
			  time_t *mtime)
{
	int fd = open_sub(d, name);
	if (mtime)
		*mtime = 0;
	if (fd < 0)
		return 0;
	uint64_t sum = fd_bytes(fd, mtime);
	close(fd);
	return sum;
}

/* Unlink every name in directory @fd: links and files go, never what a
 * link points to (unlinkat does not follow). */
static void empty_dir(int fd)
{
	int dup_fd = dup(fd);
	DIR *dp = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!dp) {
		if (dup_fd >= 0)
			close(dup_fd);
		return;
	}
	rewinddir(dp);
	struct dirent *e;
	while ((e = readdir(dp)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(fd, e->d_name, 0);
	closedir(dp);
}

/*
 * Remove entry @name of the cache directory without following a link:
 * a directory of ours with the files in it, anything else but another
 * user's directory by its name alone.  0, or -errno (another user's
 * directory: -EPERM, left as it is).
 */
static int remove_entry(struct sfs_disk *d, const char *name)
{
	struct stat st;
	enum entry k = entry_kind(d, name, &st);

	if (k == ENTRY_NONE)
		return 0;
	if (k == ENTRY_FOREIGN)
		return -EPERM;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(d->dfd, name, 0) && errno != ENOENT ? -errno
								    : 0;
	/* Ours (or ours but writable by others: what is in it goes). */
	int fd = openat(d->dfd, name, OPEN_DIR);
	if (fd >= 0) {
		struct stat now;
		if (!fstat(fd, &now) && now.st_dev == st.st_dev &&
		    now.st_ino == st.st_ino && now.st_uid == d->uid)
			empty_dir(fd);
		close(fd);
	}
	if (unlinkat(d->dfd, name, AT_REMOVEDIR) && errno != ENOENT) {
		int rc = -errno;
		SFS_LOG(SFS_WARN, "disk", "cannot remove %s/%s: %s", d->dir,
			name, strerror(errno));
		return rc;
	}
	return 0;
}

static int attached(const struct sfs_disk *d, const char *name)
{
	for (const struct sfs_disk_src *s = d->srcs; s; s = s->next)
		if (!strcmp(s->name, name))
			return 1;
	return 0;
}

struct victim {
	char name[NAME_LEN + 1];
	time_t mtime;
};

static int cmp_victim(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;
	return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/*
 * Remove the oldest directory not in use by this mount (another user's
 * are never candidates; one that cannot be removed is passed over); 0,
 * or -ENOSPC when there is none.  Called with d->lock held.
 */
static int evict_one(struct sfs_disk *d)
{
	struct victim *v = NULL;
	size_t n = 0, cap = 0;
	int fd = dup(d->dfd), rc = -ENOSPC;
	DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dp) {
		if (fd >= 0)
			close(fd);
		return -ENOSPC;
	}
	rewinddir(dp);
	struct dirent *e;
	while ((e = readdir(dp))) {
		struct stat st;
		if (!is_ours(e->d_name) || attached(d, e->d_name) ||
		    entry_kind(d, e->d_name, &st) == ENTRY_FOREIGN)
			continue;
		if (sfs_grow((void **)&v, &cap, n + 1, sizeof(*v)))
			break;
		memcpy(v[n].name, e->d_name, NAME_LEN + 1); /* is_ours */
		dir_bytes(d, e->d_name, &v[n].mtime);
		n++;
	}
	closedir(dp);
	if (n)
		qsort(v, n, sizeof(*v), cmp_victim);
	for (size_t i = 0; i < n && rc; i++) {
		uint64_t b = dir_bytes(d, v[i].name, NULL);
		if (remove_entry(d, v[i].name))
			continue;
		d->used = d->used > b ? d->used - b : 0;
		SFS_LOG(SFS_INFO, "disk",
			"%s: removed %s (%" PRIu64 " bytes, least recently "
			"used) to stay within %" PRIu64 " bytes",
			d->dir, v[i].name, b, d->max);
		rc = 0;
	}
	free(v);
	return rc;
}

/*
 * The cache directory itself, opened into d->dfd: a real directory (not
 * a link), the mount's own, that nobody else may write; its parents
 * only root or the mount's user may change (or sticky, as /tmp).  One
 * line in @err naming what is wrong and how to fix it.
 */
static int open_top(struct sfs_disk *d, char *err, size_t errlen)
{
	const char *dir = d->dir;
	struct stat ls, st;

	if (mkdir(dir, 0700) && errno != EEXIST)
		goto err_errno;
	if (lstat(dir, &ls))
		goto err_errno;
	if (S_ISLNK(ls.st_mode)) {
		snprintf(err, errlen,
			 "--cache-dir %s: a symbolic link: give the directory "
			 "itself",
			 dir);
		return -ELOOP;
	}
	if (!S_ISDIR(ls.st_mode)) {
		snprintf(err, errlen, "--cache-dir %s: not a directory", dir);
		return -ENOTDIR;
	}
	if ((d->dfd = open(dir, OPEN_DIR)) < 0 || fstat(d->dfd, &st))
		goto err_errno;
	if (st.st_dev != ls.st_dev || st.st_ino != ls.st_ino) {
		snprintf(err, errlen,
			 "--cache-dir %s: replaced while it was opened", dir);
		return -ESTALE;
	}
	if (st.st_uid != d->uid) {
		snprintf(err, errlen,
			 "--cache-dir %s: owned by uid %u, not by uid %u that "
			 "mounts: chown %u it, or give another directory",
			 dir, (unsigned int)st.st_uid, (unsigned int)d->uid,
			 (unsigned int)d->uid);
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, errlen,
			 "--cache-dir %s: group or others can write it (mode "
			 "%03o): chmod go-w it",
			 dir, (unsigned int)(st.st_mode & 0777));
		return -EPERM;
	}
	/* Who can change a parent can put another directory in its place
	 * (the descriptor is checked, but a path is not). */
	char path[PATH_MAX];
	if (!realpath(dir, path))
		goto err_errno;
	for (char *slash; (slash = strrchr(path, '/'));) {
		slash[slash == path] = '\0'; /* "/a/b" -> "/a", "/a" -> "/" */
		if (stat(path, &st))
			goto err_errno;
		if (st.st_uid != 0 && st.st_uid != d->uid) {
			snprintf(err, errlen,
				 "--cache-dir %s: its parent %s is owned by "
				 "uid %u: give a directory whose parents only "
				 "root or uid %u can change",
				 dir, path, (unsigned int)st.st_uid,
				 (unsigned int)d->uid);
			return -EPERM;
		}
		if ((st.st_mode & (S_IWGRP | S_IWOTH)) &&
		    !(st.st_mode & S_ISVTX)) {
			snprintf(
				err, errlen,
				"--cache-dir %s: group or others can write its "
				"parent %s (mode %03o, not sticky): give a "
				"directory whose parents only root or uid %u "
				"can change",
				dir, path, (unsigned int)(st.st_mode & 0777),
				(unsigned int)d->uid);
			return -EPERM;
		}
		if (!strcmp(path, "/"))
			break;
	}
	return 0;

err_errno:;
	int rc = -errno;
	snprintf(err, errlen, "--cache-dir %s: %s", dir, strerror(errno));
	return rc;
}

/* The lock file, opened into d->lock_fd: anything else by its name (a
 * link planted there) is removed first, never followed. */
static int open_lock(struct sfs_disk *d)
{
	struct stat st;
	for (int tries = 0; tries < 2; tries++) {
		int fd = openat(d->dfd, LOCK, O_RDWR | O_CREAT | OPEN_FILE,
				0600);
		if (fd >= 0 && !fstat(fd, &st) && file_ok(d, &st)) {
			d->lock_fd = fd;
			return 0;
		}
		if (fd < 0 && errno != ELOOP)
			return -errno;
		if (fd >= 0)
			close(fd);
		SFS_LOG(SFS_WARN, "disk",
			"%s/%s is not a file of uid %u's own: removed, never "
			"followed",
			d->dir, LOCK, (unsigned int)d->uid);
		if (unlinkat(d->dfd, LOCK, 0) && errno != ENOENT)
			return -errno;
	}
	return -EPERM;
}

int sfs_disk_open(const char *dir, uint64_t max, struct sfs_disk **out,
		  char *err, size_t errlen)
{
	struct sfs_disk *d;
	int rc;

	if (!(d = calloc(1, sizeof(*d))) || !(d->dir = strdup(dir))) {
		free(d);
		return -ENOMEM;
	}
	d->dfd = d->lock_fd = -1;
	d->uid = geteuid();
	d->max = max;
	pthread_mutex_init(&d->lock, NULL);
	if ((rc = open_top(d, err, errlen)))
		goto err_free;
	if ((rc = open_lock(d))) {
		snprintf(err, errlen,
			 "--cache-dir %s: cannot create its lock: %s", dir,
			 strerror(-rc));
		goto err_free;
	}
	if (flock(d->lock_fd, LOCK_EX | LOCK_NB)) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		snprintf(err, errlen, "--cache-dir %s: %s", dir,
			 rc == -EBUSY ? "another seedfs mount uses it"
				      : strerror(errno));
		goto err_free;
	}
	int fd = dup(d->dfd);
	DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dp) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "--cache-dir %s: %s", dir, strerror(-rc));
		goto err_free;
	}
	/* What others left is never used: links and files where our
	 * directories go are removed (by name), another user's
	 * directories left alone. */
	struct dirent *e;
	while ((e = readdir(dp))) {
		struct stat st;
		if (!is_ours(e->d_name))
			continue;
		switch (entry_kind(d, e->d_name, &st)) {
		case ENTRY_OURS:
			d->used += dir_bytes(d, e->d_name, NULL);
			break;
		case ENTRY_STRAY:
			SFS_LOG(SFS_WARN, "disk",
				"%s/%s: %s: removed, never followed", dir,
				e->d_name, stray_what(&st));
			remove_entry(d, e->d_name);
			break;
		case ENTRY_FOREIGN:
			SFS_LOG(SFS_WARN, "disk",
				"%s/%s: owned by uid %u: left alone, never "
				"used",
				dir, e->d_name, (unsigned int)st.st_uid);
			break;
		case ENTRY_NONE:
			break;
		}
	}
	closedir(dp);
	while (d->max && d->used > d->max && !evict_one(d))
		;
	*out = d;
	return 0;

err_free:
	sfs_disk_close(d);
	return rc;
}

void sfs_disk_close(struct sfs_disk *d)
{
	if (!d)
		return;
	for (struct sfs_disk_src *s = d->srcs, *next; s; s = next) {
		next = s->next;
		for (size_t i = 0; i < s->nregions; i++)
			if (s->fds[i] >= 0)
				close(s->fds[i]);
		if (s->dfd >= 0)
			close(s->dfd);
		free(s->fds);
		free(s->bytes);
		free(s);
	}
	if (d->lock_fd >= 0)
		close(d->lock_fd); /* releases the flock */
	if (d->dfd >= 0)
		close(d->dfd);
	pthread_mutex_destroy(&d->lock);
	free(d->dir);
	free(d);
}

/* A new about file holding @text replaces the old one in directory @fd:
 * written beside it and renamed over it.  A link planted as the
 * temporary file's name goes first; the temporary file goes when it
 * cannot be written (a full filesystem). */
static int replace_about(int fd, const char *text, size_t len)
{
	if (unlinkat(fd, ABOUT_TMP, 0) && errno != ENOENT)
		return -errno;
	int tfd = openat(fd, ABOUT_TMP, O_WRONLY | O_CREAT | O_EXCL | OPEN_FILE,
			 0600);
	if (tfd < 0)
		return -errno;
	int rc = 0;
	for (size_t put = 0; put < len && !rc;) {
		ssize_t n = write(tfd, text + put, len - put);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			rc = n < 0 ? -errno : -EIO;
		else
			put += (size_t)n;
	}
	if (close(tfd) && !rc)
		rc = -errno;
	if (!rc && renameat(fd, ABOUT_TMP, fd, ABOUT))
		rc = -errno;
	if (rc)
		unlinkat(fd, ABOUT_TMP, 0);
	return rc;
}

/*
 * The about file @afd (open, of this key: src_dir checked) could not be
 * replaced (@why, -errno; a full filesystem): rewritten in place, which
 * takes no new block where the text still fits in the file's own, else
 * kept as it was.  Its first line, the key, is the same bytes either
 * way, so even a write cut short leaves it valid; the rest is for
 * humans.  Its time, the directory's last use, is set.  Reading what
 * the directory holds needs no free space: never fails.
 */
static void keep_about(const struct sfs_disk *d, const char *name, int afd,
		       const char *text, size_t len, int why)
{
	ssize_t n = pwrite(afd, text, len, 0);
	int in_place = n == (ssize_t)len && !ftruncate(afd, (off_t)len);
	futimens(afd, NULL);
	SFS_LOG(SFS_INFO, "disk",
		"%s/%s: about file %s (%s): what it holds is used", d->dir,
		name, in_place ? "rewritten in place" : "kept as it was",
		strerror(-why));
}

/*
 * The about file in directory @fd of source @name (d->lock held): first
 * line the key, then @about.  When it already says that, only its time
 * (the directory's last use) is set, nothing written; otherwise it is
 * replaced, and where that fails but there is an about file of this
 * key (a full filesystem) that one is kept (keep_about).  0, or -errno
 * when there is no about file of this key and none can be written.
 */
static int write_about(const struct sfs_disk *d, int fd, const char *name,
		       const char *key, const char *about)
{
	int len = snprintf(NULL, 0, "key: %s\n%s\n", key, about);
	char *text = len > 0 ? malloc((size_t)len + 1) : NULL, *old = NULL;
	struct stat st;
	int rc = 0;

	if (!text)
		return -ENOMEM;
	snprintf(text, (size_t)len + 1, "key: %s\n%s\n", key, about);
	int afd = openat(fd, ABOUT, O_RDWR | OPEN_FILE);
	if (afd >= 0 && (fstat(afd, &st) || !file_ok(d, &st))) {
		close(afd);
		afd = -1;
	}
	if (afd >= 0 && st.st_size == len && (old = malloc((size_t)len)) &&
	    pread(afd, old, (size_t)len, 0) == len &&
	    !memcmp(old, text, (size_t)len)) {
		futimens(afd, NULL);
		goto out;
	}
	rc = replace_about(fd, text, (size_t)len);
	if (rc && afd >= 0) {
		keep_about(d, name, afd, text, (size_t)len, rc);
		rc = 0;
	}
out:
	if (afd >= 0)
		close(afd);
	free(old);
	free(text);
	return rc;
}

/* 1 when the about file in directory @fd (a regular file of ours)
 * starts with the line "key: @key". */
static int key_matches(const struct sfs_disk *d, int fd, const char *key)
{
	char line[1024], want[1024];
	struct stat st;
	int afd = openat(fd, ABOUT, O_RDONLY | OPEN_FILE);
	if (afd < 0)
		return 0;
	ssize_t n = !fstat(afd, &st) && file_ok(d, &st)
			    ? read(afd, line, sizeof(line) - 1)
			    : -1;
	close(afd);
	if (n <= 0)
		return 0;
	line[n] = '\0';
	int w = snprintf(want, sizeof(want), "key: %s\n", key);
	return w > 0 && (size_t)w < sizeof(want) &&
	       !strncmp(line, want, (size_t)w);
}

/*
 * The directory of source @name, opened (d->lock held): anything else
 * by that name (a link, a file) is removed first, one of ours whose
 * about file names another key (or none) is emptied, another user's is
 * refused (-EPERM).  Returns the descriptor or -errno.
 */
static int src_dir(struct sfs_disk *d, const char *name, const char *key)
{
	struct stat st;
	int fd;

	switch (entry_kind(d, name, &st)) {
	case ENTRY_FOREIGN:
		SFS_LOG(SFS_WARN, "disk", "%s/%s: owned by uid %u: not used",
			d->dir, name, (unsigned int)st.st_uid);
		return -EPERM;
	case ENTRY_STRAY:
		SFS_LOG(SFS_WARN, "disk", "%s/%s: %s: removed, never followed",
			d->dir, name, stray_what(&st));
		if (remove_entry(d, name))
			return -EPERM;
		break;
	case ENTRY_NONE:
	case ENTRY_OURS:
		break;
	}
	if (mkdirat(d->dfd, name, 0700) && errno != EEXIST)
		return -errno;
	if ((fd = open_sub(d, name)) < 0)
		return fd;
	/* Another key with the same hash, or a directory someone edited:
	 * start it afresh rather than trust it. */
	if (!key_matches(d, fd, key)) {
		uint64_t b = fd_bytes(fd, NULL);
		empty_dir(fd);
		d->used = d->used > b ? d->used - b : 0;
	}
	return fd;
}

int sfs_disk_attach(struct sfs_disk *d, const char *key, const char *about,
		    size_t nregions, struct sfs_disk_src **out)
{
	struct sfs_disk_src *s;
	XXH128_hash_t h = XXH3_128bits(key, strlen(key));
	int rc = -ENOMEM;

	if (!(s = calloc(1, sizeof(*s))))
		return -ENOMEM;
	s->d = d;
	s->dfd = -1;
	s->nregions = nregions;
	snprintf(s->name, sizeof(s->name), "%016" PRIx64 "%016" PRIx64,
		 (uint64_t)h.high64, (uint64_t)h.low64);
	s->fds = malloc((nregions ? nregions : 1) * sizeof(*s->fds));
	s->bytes = calloc(nregions ? nregions : 1, sizeof(*s->bytes));
	if (!s->fds || !s->bytes)
		goto err_free;
	for (size_t i = 0; i < nregions; i++)
		s->fds[i] = -1;
	pthread_mutex_lock(&d->lock);
	rc = src_dir(d, s->name, key);
	if (rc >= 0) {
		s->dfd = rc;
		rc = write_about(d, s->dfd, s->name, key, about);
	}
	if (!rc) {
		s->next = d->srcs;
		d->srcs = s;
	}
	pthread_mutex_unlock(&d->lock);
	if (rc) {
		SFS_LOG(SFS_WARN, "disk", "%s/%s: %s", d->dir, s->name,
			strerror(-rc));
		goto err_free;
	}
	SFS_LOG(SFS_DEBUG, "disk", "%s/%s: %s", d->dir, s->name, about);
	*out = s;
	return 0;

err_free:
	if (s->dfd >= 0)
		close(s->dfd);
	free(s->fds);
	free(s->bytes);
	free(s);
	return rc;
}

/*
 * The region file's descriptor, opened (created with @create) on first
 * use; -errno when it cannot be (-ENOENT: nothing stored).  Anything
 * but a regular file of ours with one name (a link, a hard link to
 * another file) is removed by its name, never read or written through.
 * Called with d->lock held.
 */
static int region_fd(struct sfs_disk_src *s, uint32_t region, int create)
{
	struct sfs_disk *d = s->d;
	char name[16];
	struct stat st;
	if (region >= s->nregions)
		return -EINVAL;
	if (s->fds[region] >= 0)
		return s->fds[region];
	snprintf(name, sizeof(name), "r%u", region);
	int fd = openat(s->dfd, name, O_RDWR | OPEN_FILE);
	int link = fd < 0 && errno == ELOOP;
	if (fd < 0 && !link && errno != ENOENT)
		return -errno;
	if (link || (fd >= 0 && (fstat(fd, &st) || !file_ok(d, &st)))) {
		if (fd >= 0)
			close(fd);
		fd = -1;
		if (!s->bad_logged)
			SFS_LOG(SFS_WARN, "disk",
				"%s/%s/%s: %s: removed, never followed", d->dir,
				s->name, name,
				link ? "a symbolic link"
				     : "not a file of this mount's own");
		s->bad_logged = 1;
		if (unlinkat(s->dfd, name, 0) && errno != ENOENT)
			return -errno;
	}
	if (fd < 0 && !create)
		return -ENOENT;
	if (fd < 0 &&
	    (fd = openat(s->dfd, name, O_RDWR | O_CREAT | O_EXCL | OPEN_FILE,
			 0600)) < 0)
		return -errno;
	if (!fstat(fd, &st))
		s->bytes[region] = (uint64_t)st.st_blocks * 512;
	s->fds[region] = fd;
	return fd;
}

/* Close every file of @s (d->lock held): it was dropped and nothing
 * uses them.  The space they held goes back to the filesystem. */
static void close_files(struct sfs_disk_src *s)
{
	for (size_t i = 0; i < s->nregions; i++) {
		if (s->fds[i] >= 0)
			close(s->fds[i]);
		s->fds[i] = -1;
	}
}

/* Free @s, dropped, released and idle: out of the list (d->lock
 * held). */
static void src_free(struct sfs_disk_src *s)
{
	struct sfs_disk *d = s->d;
	for (struct sfs_disk_src **ps = &d->srcs; *ps; ps = &(*ps)->next)
		if (*ps == s) {
			*ps = s->next;
			break;
		}
	close_files(s);
	free(s->fds);
	free(s->bytes);
	free(s);
}

/* An I/O on @s is over (d->lock held). */
static void unbusy(struct sfs_disk_src *s)
{
	if (--s->busy == 0 && s->dropped)
		close_files(s);
	if (!s->busy && s->released)
		src_free(s);
}

int sfs_disk_read(struct sfs_disk_src *s, uint32_t region, uint64_t off,
		  void *buf, size_t len)
{
	struct sfs_disk *d = s->d; /* @s may be freed by unbusy */
	pthread_mutex_lock(&d->lock);
	int fd = s->dropped ? -ENOENT : region_fd(s, region, 0);
	s->busy += fd >= 0;
	pthread_mutex_unlock(&d->lock);
	if (fd < 0)
		return fd;
	size_t got = 0;
	int rc = 0;
	while (got < len && !rc) {
		ssize_t n = pread(fd, (char *)buf + got, len - got,
				  (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = -errno;
		else if (n == 0)
			rc = -ENODATA;
		else
			got += (size_t)n;
	}
	pthread_mutex_lock(&d->lock);
	unbusy(s);
	pthread_mutex_unlock(&d->lock);
	return rc;
}

int sfs_disk_write(struct sfs_disk_src *s, uint32_t region, uint64_t off,
		   const void *buf, size_t len)
{
	struct sfs_disk *d = s->d;
	int rc = 0, fd;

	pthread_mutex_lock(&d->lock);
	if (s->dropped) {
		pthread_mutex_unlock(&d->lock);
		return -ESTALE;
	}
	while (d->max && d->used + len > d->max && !(rc = evict_one(d)))
		;
	if (rc) {
		if (!d->full_logged)
			SFS_LOG(SFS_WARN, "disk",
				"%s holds %" PRIu64 " of %" PRIu64 " bytes and "
				"nothing else can go: new chunks stay in memory",
				d->dir, d->used, d->max);
		d->full_logged = 1;
		pthread_mutex_unlock(&d->lock);
		return rc;
	}
	fd = region_fd(s, region, 1);
	d->used += len; /* reserved; corrected below */
	s->busy += fd >= 0;
	pthread_mutex_unlock(&d->lock);
	if (fd < 0)
		rc = fd;
	size_t put = 0;
	while (!rc && put < len) {
		ssize_t n = pwrite(fd, (const char *)buf + put, len - put,
				   (off_t)(off + put));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			rc = n < 0 ? -errno : -EIO;
		else
			put += (size_t)n;
	}
	struct stat st;
	pthread_mutex_lock(&d->lock);
	d->used = d->used > len ? d->used - len : 0;
	/* A source dropped meanwhile was taken out of the count whole: what
	 * this write added went with it. */
	if (fd >= 0 && !s->dropped && !fstat(fd, &st)) {
		uint64_t now = (uint64_t)st.st_blocks * 512;
		d->used = d->used + now > s->bytes[region]
				  ? d->used + now - s->bytes[region]
				  : 0;
		s->bytes[region] = now;
	}
	if (fd >= 0)
		unbusy(s);
	if (rc == -ENOSPC && !d->full_logged) {
		SFS_LOG(SFS_WARN, "disk",
			"%s: the filesystem is full: new chunks stay in memory",
			d->dir);
		d->full_logged = 1;
	}
	pthread_mutex_unlock(&d->lock);
	return rc;
}

void sfs_disk_drop(struct sfs_disk_src *s)
{
	struct sfs_disk *d;
	if (!s)
		return;
	d = s->d;
	pthread_mutex_lock(&d->lock);
	if (!s->dropped) {
		s->dropped = 1;
		uint64_t b = dir_bytes(d, s->name, NULL);
		remove_entry(d, s->name);
		/* No file is opened in it any more (region_fd). */
		close(s->dfd);
		s->dfd = -1;
		d->used = d->used > b ? d->used - b : 0;
		for (size_t i = 0; i < s->nregions; i++)
			s->bytes[i] = 0;
		/* Unlinked files hold their space while open: closed now,
		 * or by the last read or write still using them. */
		if (!s->busy)
			close_files(s);
		SFS_LOG(SFS_DEBUG, "disk", "%s/%s removed: no longer served",
			d->dir, s->name);
	}
	pthread_mutex_unlock(&d->lock);
}

void sfs_disk_release(struct sfs_disk_src *s)
{
	if (!s)
		return;
	struct sfs_disk *d = s->d;
	sfs_disk_drop(s);
	pthread_mutex_lock(&d->lock);
	s->released = 1;
	if (!s->busy)
		src_free(s);
	pthread_mutex_unlock(&d->lock);
}

void sfs_disk_usage(struct sfs_disk *d, uint64_t *used, uint64_t *max)
{
	pthread_mutex_lock(&d->lock);
	*used = d->used;
	*max = d->max;
	pthread_mutex_unlock(&d->lock);
}

size_t sfs_disk_sources(struct sfs_disk *d)
{
	size_t n = 0;
	pthread_mutex_lock(&d->lock);
	for (const struct sfs_disk_src *s = d->srcs; s; s = s->next)
		n++;
	pthread_mutex_unlock(&d->lock);
	return n;
}

const char *sfs_disk_path(const struct sfs_disk *d)
{
	return d->dir;
}
