/* SPDX-License-Identifier: MIT */
#include "disk.h"

#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define NAME_LEN 32 /* hex of a 128-bit hash */
#define ABOUT "about"

struct sfs_disk_src {
	struct sfs_disk *d;
	char name[NAME_LEN + 1];
	size_t nregions;
	int *fds;	 /* protected by d->lock; -1: not open yet */
	uint64_t *bytes; /* protected by d->lock: allocated per file */
	int dropped;	 /* protected by d->lock */
	/* Reads and writes using fds outside the lock; a dropped source's
	 * files are closed by the last of them.  Protected by d->lock. */
	unsigned int busy;
	struct sfs_disk_src *next;
};

struct sfs_disk {
	char *dir;
	int dfd, lock_fd;
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

/* Bytes allocated to the files of subdirectory @name; *mtime of its
 * about file (0 when missing). */
static uint64_t dir_bytes(int dfd, const char *name, time_t *mtime)
{
	uint64_t sum = 0;
	struct stat st;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (mtime)
		*mtime = fstatat(fd, ABOUT, &st, 0) ? 0 : st.st_mtime;
	DIR *dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return 0;
	}
	struct dirent *e;
	while ((e = readdir(dp)))
		if (!fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
		    S_ISREG(st.st_mode))
			sum += (uint64_t)st.st_blocks * 512;
	closedir(dp);
	return sum;
}

/* Remove subdirectory @name and the files in it. */
static void remove_dir(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		DIR *dp = fdopendir(fd);
		if (dp) {
			struct dirent *e;
			while ((e = readdir(dp)))
				if (strcmp(e->d_name, ".") &&
				    strcmp(e->d_name, ".."))
					unlinkat(fd, e->d_name, 0);
			closedir(dp);
		} else {
			close(fd);
		}
	}
	if (unlinkat(dfd, name, AT_REMOVEDIR) && errno != ENOENT)
		SFS_LOG(SFS_WARN, "disk", "cannot remove %s: %s", name,
			strerror(errno));
}

static int attached(const struct sfs_disk *d, const char *name)
{
	for (const struct sfs_disk_src *s = d->srcs; s; s = s->next)
		if (!strcmp(s->name, name))
			return 1;
	return 0;
}

/*
 * Remove the oldest directory not in use by this mount; 0, or -ENOSPC
 * when there is none.  Called with d->lock held.
 */
static int evict_one(struct sfs_disk *d)
{
	char victim[NAME_LEN + 1] = "";
	time_t oldest = 0;
	int fd = dup(d->dfd);
	DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dp) {
		if (fd >= 0)
			close(fd);
		return -ENOSPC;
	}
	rewinddir(dp);
	struct dirent *e;
	while ((e = readdir(dp))) {
		time_t mt;
		if (!is_ours(e->d_name) || attached(d, e->d_name))
			continue;
		dir_bytes(d->dfd, e->d_name, &mt);
		if (!*victim || mt < oldest) {
			memcpy(victim, e->d_name, NAME_LEN + 1); /* is_ours */
			oldest = mt;
		}
	}
	closedir(dp);
	if (!*victim)
		return -ENOSPC;
	uint64_t b = dir_bytes(d->dfd, victim, NULL);
	remove_dir(d->dfd, victim);
	d->used = d->used > b ? d->used - b : 0;
	SFS_LOG(SFS_INFO, "disk",
		"%s: removed %s (%" PRIu64 " bytes, least recently used) to "
		"stay within %" PRIu64 " bytes",
		d->dir, victim, b, d->max);
	return 0;
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
	d->max = max;
	pthread_mutex_init(&d->lock, NULL);
	if (mkdir(dir, 0700) && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "--cache-dir %s: %s", dir,
			 strerror(errno));
		goto err_free;
	}
	d->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->dfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "--cache-dir %s: %s", dir,
			 strerror(errno));
		goto err_free;
	}
	d->lock_fd = openat(d->dfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (d->lock_fd < 0) {
		rc = -errno;
		snprintf(err, errlen,
			 "--cache-dir %s: cannot create its lock: %s", dir,
			 strerror(errno));
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
	struct dirent *e;
	while ((e = readdir(dp)))
		if (is_ours(e->d_name))
			d->used += dir_bytes(d->dfd, e->d_name, NULL);
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

/* Write the about file of @s (d->lock held): first line the key. */
static int write_about(struct sfs_disk *d, const char *name, const char *key,
		       const char *about)
{
	char tmp[NAME_LEN + 16], dst[NAME_LEN + 16];
	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", name, ABOUT);
	snprintf(dst, sizeof(dst), "%s/%s", name, ABOUT);
	int fd = openat(d->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			0600);
	if (fd < 0)
		return -errno;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	fprintf(f, "key: %s\n%s\n", key, about);
	if (fclose(f) || renameat(d->dfd, tmp, d->dfd, dst))
		return -errno;
	return 0;
}

/* 1 when @name/about starts with the line "key: @key". */
static int key_matches(struct sfs_disk *d, const char *name, const char *key)
{
	char path[NAME_LEN + 16], line[1024], want[1024];
	snprintf(path, sizeof(path), "%s/%s", name, ABOUT);
	int fd = openat(d->dfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	line[n] = '\0';
	int w = snprintf(want, sizeof(want), "key: %s\n", key);
	return w > 0 && (size_t)w < sizeof(want) &&
	       !strncmp(line, want, (size_t)w);
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
	/* Another key with the same hash, or a directory someone edited:
	 * start it afresh rather than trust it. */
	if (!key_matches(d, s->name, key)) {
		uint64_t b = dir_bytes(d->dfd, s->name, NULL);
		remove_dir(d->dfd, s->name);
		d->used = d->used > b ? d->used - b : 0;
	}
	if (mkdirat(d->dfd, s->name, 0700) && errno != EEXIST)
		rc = -errno;
	else
		rc = write_about(d, s->name, key, about); /* and its mtime */
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
	free(s->fds);
	free(s->bytes);
	free(s);
	return rc;
}

/* The region file's descriptor, opened (created with @create) on first
 * use; -errno when it cannot be.  Called with d->lock held. */
static int region_fd(struct sfs_disk_src *s, uint32_t region, int create)
{
	char path[NAME_LEN + 16];
	if (region >= s->nregions)
		return -EINVAL;
	if (s->fds[region] >= 0)
		return s->fds[region];
	snprintf(path, sizeof(path), "%s/r%u", s->name, region);
	int fd = openat(s->d->dfd, path,
			O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
	if (fd < 0)
		return -errno;
	struct stat st;
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

/* An I/O on @s is over (d->lock held). */
static void unbusy(struct sfs_disk_src *s)
{
	if (--s->busy == 0 && s->dropped)
		close_files(s);
}

int sfs_disk_read(struct sfs_disk_src *s, uint32_t region, uint64_t off,
		  void *buf, size_t len)
{
	pthread_mutex_lock(&s->d->lock);
	int fd = s->dropped ? -ENOENT : region_fd(s, region, 0);
	s->busy += fd >= 0;
	pthread_mutex_unlock(&s->d->lock);
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
	pthread_mutex_lock(&s->d->lock);
	unbusy(s);
	pthread_mutex_unlock(&s->d->lock);
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
		uint64_t b = dir_bytes(d->dfd, s->name, NULL);
		remove_dir(d->dfd, s->name);
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

void sfs_disk_usage(struct sfs_disk *d, uint64_t *used, uint64_t *max)
{
	pthread_mutex_lock(&d->lock);
	*used = d->used;
	*max = d->max;
	pthread_mutex_unlock(&d->lock);
}

const char *sfs_disk_path(const struct sfs_disk *d)
{
	return d->dir;
}
