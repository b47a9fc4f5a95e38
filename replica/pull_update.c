/* SPDX-License-Identifier: MIT */
/*
 * pull_update.c - `seedfs pull --update`: make a directory that holds an
 * earlier copy of a model (of any generation) the current generation,
 * pulling only the chunks whose bytes differ.
 *
 * Nothing in DEST is trusted: each file of the generation is read whole
 * and compared with the manifest, checksum block by checksum block
 * (XXH3-64; SHA-256 only with --trust-key, and then a block without
 * SHA-256 is pulled).  A file without chunk checksums (small, inline) is
 * kept when its whole-file XXH3-64 matches.  A file that changed is
 * built as a new file (the old one is never written: a process that
 * maps it keeps reading its generation, and hard links of it stay as
 * they were): its matching blocks copied from the old file
 * (copy_file_range: shared extents where the filesystem can), the
 * others pulled, verified by the cache.
 *
 * Steps, and what a crash leaves:
 *   1. DEST/.seedfs-pull/ (ours: a directory of this user, locked while
 *      an update runs) gets a state file saying what is under way; the
 *      files are compared, DEST unchanged;
 *   2. each changed file is built in DEST/.seedfs-pull/f<N> (N its index
 *      in the new manifest), fsync'd: DEST still the old copy, whole;
 *   3. the changed files' old names are removed, then what the
 *      generation does not have, then each new file is renamed into its
 *      name; directories fsync'd; DEST/.seedfs-pull goes.
 * From the first removal of step 3 to its last rename, the changed
 * files are missing under their names: a loader finds DEST incomplete,
 * never two generations mixed that look whole.  Before step 3 DEST is
 * the old copy, after it the new one.  The next --update takes a whole
 * f<N> it finds (compared like any copy) and finishes.
 *
 * What DEST has that the generation does not is removed (a loader that
 * globs *.safetensors must not find an old shard): only in a directory
 * that holds some of the model already (never a wrong DEST emptied), and
 * never across a mount point.
 */
#include "replica/pull_impl.h"

#include "common/log.h"
#include "common/util.h"
#include "metadata/manifest.h"
#include "replica/replica.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <gnutls/crypto.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define UPD_DIR ".seedfs-pull"
#define UPD_READ (4u << 20) /* bytes read at once to compare */

/* One file of the generation. */
struct ufile {
	int changed;  /* a new file goes under its name in step 3 */
	int built;    /* f<N> is whole already: nothing to build */
	int from_old; /* f<N> is built from the file under its name */
	uint8_t *bad; /* per checksum block: to be pulled (NULL: all) */
};

struct upd {
	struct pull *p;
	char dest[SFS_MF_PATH_MAX / 2 + 1]; /* no trailing slash */
	size_t dest_len;
	int updfd;	    /* DEST/.seedfs-pull, locked */
	const char **names; /* the generation's files and dirs, sorted */
	const char **files; /* its files only, sorted */
	size_t nnames, nfiles;
	size_t removed;
	int err;       /* of the walk that removes */
	char *errpath; /* [new] what it could not remove */
	uint8_t *buf;  /* UPD_READ bytes */
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int is_in(const char *const *v, size_t n, const char *name)
{
	return bsearch(&name, v, n, sizeof(*v), name_cmp) != NULL;
}

/* f<i>'s name in DEST/.seedfs-pull. */
static void part_name(size_t i, char *buf, size_t len)
{
	snprintf(buf, len, "f%zu", i);
}

/* Block @k of @f (@b, @len bytes) has the manifest's checksums? */
static int block_matches(const struct pull *p, const struct sfs_mfile *f,
			 uint64_t k, const uint8_t *b, size_t len)
{
	if (XXH3_64bits(b, len) != f->sums[k])
		return 0;
	if (!p->strong)
		return 1;
	uint8_t d[32];
	return f->sha256 && !gnutls_hash_fast(GNUTLS_DIG_SHA256, b, len, d) &&
	       !memcmp(d, f->sha256 + 32 * k, 32);
}

/* Compare @fd (@have bytes) with @f: *bad per block [new], *same when
 * every byte is the generation's. */
static int compare(struct upd *up, const struct sfs_mfile *f, int fd,
		   uint64_t have, uint8_t **bad, int *same)
{
	const struct pull *p = up->p;
	uint8_t *buf = up->buf;
	*bad = NULL;
	*same = 0;
	if (!f->csum_shift || !f->sums) {
		/* The whole file's XXH3-64 (no SHA-256 to keep it on). */
		XXH3_state_t *st = XXH3_createState();
		if (!st)
			return -ENOMEM;
		XXH3_64bits_reset(st);
		int rc = 0;
		for (uint64_t at = 0; at < have && !rc;) {
			ssize_t n = pread(fd, buf, UPD_READ, (off_t)at);
			if (n <= 0)
				rc = n < 0 ? -errno : -EIO;
			else
				XXH3_64bits_update(st, buf, (size_t)n);
			at += n > 0 ? (uint64_t)n : 0;
		}
		*same = !rc && have == f->size && !p->strong &&
			XXH3_64bits_digest(st) == f->xxh3;
		XXH3_freeState(st);
		return rc;
	}
	uint64_t bs = 1ull << f->csum_shift;
	uint64_t nb = (f->size + bs - 1) >> f->csum_shift;
	uint8_t *b = calloc(nb ? nb : 1, 1);
	/* Read in steps of whole blocks (a block larger than a step is
	 * read in one go into a buffer of its size). */
	size_t step = (size_t)SFS_MAX((uint64_t)UPD_READ, bs);
	uint8_t *big = step > UPD_READ ? malloc(step) : buf;
	int rc = 0, differs = have != f->size;
	if (!b || !big) {
		free(b);
		return -ENOMEM;
	}
	for (uint64_t k = 0; k < nb && !rc;) {
		uint64_t off = k << f->csum_shift;
		uint64_t want = SFS_MIN((uint64_t)step, f->size - off);
		uint64_t got = 0;
		if (off < have) {
			ssize_t n = pread(fd, big,
					  (size_t)SFS_MIN(want, have - off),
					  (off_t)off);
			if (n < 0)
				rc = -errno;
			got = n > 0 ? (uint64_t)n : 0;
		}
		for (uint64_t at = 0; at < want && !rc; at += bs, k++) {
			uint64_t len = SFS_MIN(bs, f->size - off - at);
			b[k] = at + len > got ||
			       !block_matches(p, f, k, big + at, len);
			differs |= b[k];
		}
	}
	if (big != buf)
		free(big);
	*bad = b;
	*same = !rc && !differs;
	return rc;
}

/* Compare the regular file @name (under @dirfd) with @f. 0 with *ok 0:
 * not there, or not a regular file. */
static int compare_at(struct upd *up, int dirfd, const char *name,
		      const struct sfs_mfile *f, int *ok, uint8_t **bad,
		      int *same, char *err, size_t errlen)
{
	struct stat st;
	*ok = 0;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT || errno == ELOOP || errno == ENOTDIR
			       ? 0
			       : (snprintf(err, errlen,
					   "cannot read %.400s: %s", name,
					   strerror(errno)),
				  -errno);
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return 0;
	}
	*ok = 1;
	int rc = compare(up, f, fd, (uint64_t)st.st_size, bad, same);
	close(fd);
	if (rc)
		snprintf(err, errlen, "comparing %.400s: %s", name,
			 strerror(-rc));
	return rc;
}

/* Step 1 for file @i: what DEST has under its name, and in f<i>. */
static int prepare(struct upd *up, size_t i, struct ufile *u, char *err,
		   size_t errlen)
{
	const struct sfs_mfile *f = &up->p->m->files[i];
	char path[SFS_MF_PATH_MAX * 2], part[32];
	uint8_t *bad = NULL;
	int ok, same, rc;

	snprintf(path, sizeof(path), "%s/%s", up->dest, f->path);
	part_name(i, part, sizeof(part));
	/* The file under its name: the same bytes, nothing to do. */
	rc = compare_at(up, AT_FDCWD, path, f, &ok, &bad, &same, err, errlen);
	if (rc)
		return rc;
	if (ok && same) {
		free(bad);
		unlinkat(up->updfd, part, 0); /* a stale one, if any */
		return 0;
	}
	u->changed = 1;
	/* A f<i> of an earlier run (ours): patched where it is. */
	uint8_t *pbad = NULL;
	int pok, psame;
	rc = compare_at(up, up->updfd, part, f, &pok, &pbad, &psame, err,
			errlen);
	if (rc) {
		free(bad);
		return rc;
	}
	if (pok) {
		free(bad);
		u->built = psame;
		u->bad = pbad;
		return 0;
	}
	u->from_old = ok;
	u->bad = bad;
	return 0;
}

/* Bytes of @f that @u's build pulls. */
static uint64_t to_pull(const struct sfs_mfile *f, const struct ufile *u)
{
	if (!u->bad || !f->csum_shift)
		return f->size;
	uint64_t n = 0, bs = 1ull << f->csum_shift;
	for (uint64_t k = 0; k << f->csum_shift < f->size; k++)
		if (u->bad[k])
			n += SFS_MIN(bs, f->size - (k << f->csum_shift));
	return n;
}

/* Copy [off, off+len) of @in to @out, at the same offsets. */
static int copy_kept(int in, int out, uint64_t off, uint64_t len, uint8_t *buf)
{
	loff_t oi = (loff_t)off, oo = (loff_t)off;
	while (len) {
		ssize_t n = copy_file_range(in, &oi, out, &oo, len, 0);
		if (n < 0 && (errno == EXDEV || errno == EINVAL ||
			      errno == ENOSYS || errno == EOPNOTSUPP))
			break; /* copied by hand below */
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		len -= (uint64_t)n;
	}
	while (len) {
		ssize_t n = pread(in, buf, SFS_MIN((uint64_t)UPD_READ, len),
				  (off_t)oi);
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		for (ssize_t done = 0; done < n;) {
			ssize_t w = pwrite(out, buf + done, (size_t)(n - done),
					   (off_t)(oo + done));
			if (w < 0)
				return -errno;
			done += w;
		}
		oi += n;
		oo += n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* Step 2: f<i> made whole: built from the old file and pulls, or patched
 * where it is; its mode and time. */
static int build(struct upd *up, size_t i, const struct ufile *u, char *err,
		 size_t errlen)
{
	struct pull *p = up->p;
	const struct sfs_mfile *f = &p->m->files[i];
	char part[32], path[SFS_MF_PATH_MAX * 2];
	struct sfs_rfile rf;
	int in = -1, rc = 0;

	part_name(i, part, sizeof(part));
	snprintf(path, sizeof(path), "%s/%s", up->dest, f->path);
	int flags =
		O_RDWR | O_CLOEXEC | O_NOFOLLOW |
		(!u->built && (u->from_old || !u->bad) ? O_CREAT | O_TRUNC : 0);
	int fd = openat(up->updfd, part, flags, 0600);
	if (fd < 0 || (!u->built && ftruncate(fd, (off_t)f->size))) {
		rc = -errno;
		goto out;
	}
	if (u->from_old &&
	    (in = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		rc = -errno;
		goto out;
	}
	sfs_replica_rfile(p->view, i, &rf);
	uint64_t pulled = 0;
	uint64_t nb = f->csum_shift ? (f->size + (1ull << f->csum_shift) - 1) >>
					      f->csum_shift
				    : 0;
	if (u->built) {
		/* whole already: its mode and time below */
	} else if (!u->bad || !nb) {
		rc = f->size ? pull_copy_range(p, fd, &rf, 0, f->size) : 0;
		pulled = f->size;
	}
	for (uint64_t k = 0; !u->built && u->bad && nb && k < nb && !rc;) {
		uint64_t k2 = k;
		while (k2 < nb && u->bad[k2] == u->bad[k])
			k2++;
		uint64_t off = k << f->csum_shift;
		uint64_t len = SFS_MIN(f->size, k2 << f->csum_shift) - off;
		if (u->bad[k]) {
			rc = pull_copy_range(p, fd, &rf, off, len);
			pulled += len;
		} else if (in >= 0) {
			rc = copy_kept(in, fd, off, len, up->buf);
		}
		k = k2;
	}
	struct timespec ts[2] = {sfs_ns_timespec(f->meta.mtime_ns),
				 sfs_ns_timespec(f->meta.mtime_ns)};
	if (!rc && (fsync(fd) ||
		    fchmod(fd, f->meta.has ? pull_local_mode(p, f->meta.mode)
					   : 0644 & ~p->umask) ||
		    (f->meta.has && futimens(fd, ts))))
		rc = -errno;
	if (!rc) {
		p->pulled_bytes += pulled;
		p->kept_bytes += f->size - pulled;
	}
out:
	if (in >= 0)
		close(in);
	if (fd >= 0 && close(fd) && !rc)
		rc = -errno;
	if (rc)
		snprintf(err, errlen, "%s (building %s/" UPD_DIR "/%s): %s",
			 f->path, up->dest, part,
			 rc == -EBADMSG ? "bytes do not match the seed's "
					  "checksum"
					: strerror(-rc));
	return rc;
}

/* A file that did not change: the seed's mode and time. */
static int touch_kept(struct upd *up, const struct sfs_mfile *f, char *err,
		      size_t errlen)
{
	char path[SFS_MF_PATH_MAX * 2];
	snprintf(path, sizeof(path), "%s/%s", up->dest, f->path);
	struct timespec ts[2] = {sfs_ns_timespec(f->meta.mtime_ns),
				 sfs_ns_timespec(f->meta.mtime_ns)};
	if (f->meta.has &&
	    (chmod(path, pull_local_mode(up->p, f->meta.mode)) ||
	     utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW))) {
		snprintf(err, errlen, "%.400s: %s", path, strerror(errno));
		return -errno;
	}
	return 0;
}

static __thread struct upd *walk_up; /* nftw has no argument */

/* Step 3: what the generation does not have goes (files, links, and
 * directories it does not have or has as a file), deepest first. */
static int remove_one(const char *path, const struct stat *st, int type,
		      struct FTW *ftw)
{
	struct upd *up = walk_up;
	(void)st;
	if (ftw->level == 0)
		return 0;
	const char *rel = path + up->dest_len;
	while (*rel == '/')
		rel++;
	if (!strcmp(rel, UPD_DIR) ||
	    !strncmp(rel, UPD_DIR "/", sizeof(UPD_DIR)))
		return 0;
	int dir = type == FTW_DP || type == FTW_D || type == FTW_DNR;
	if (is_in(up->names, up->nnames, rel) &&
	    !(dir && is_in(up->files, up->nfiles, rel)))
		return 0;
	if (dir ? rmdir(path) : unlink(path)) {
		up->err = -errno;
		free(up->errpath);
		up->errpath = strdup(path);
		return 1;
	}
	up->removed++;
	return 0;
}

/* fsync a directory (what a rename in it did). */
static int sync_dir(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = fd < 0 || fsync(fd) ? -errno : 0;
	if (fd >= 0)
		close(fd);
	if (rc)
		snprintf(err, errlen, "syncing %.400s: %s", path,
			 strerror(-rc));
	return rc;
}

/* DEST/.seedfs-pull/state: what is under way (fsync'd). */
static int write_state(const struct upd *up, char *err, size_t errlen)
{
	const struct sfs_manifest *m = up->p->m;
	int fd = openat(up->updfd, "state",
			O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			0600);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	int rc = 0;
	if (!f) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
	} else {
		fprintf(f,
			"seedfs pull --update of model %s to generation "
			"%" PRIu64 " (content %016" PRIx64
			") is under way: the changed files are built here, "
			"named f<index in its manifest>, then moved into "
			"their names.  Run seedfs pull --update again to "
			"finish.\n",
			m->model, m->generation, m->content);
		rc = fflush(f) || fsync(fileno(f)) || fsync(up->updfd) ? -errno
								       : 0;
		if (fclose(f) && !rc)
			rc = -errno;
	}
	if (rc)
		snprintf(err, errlen, "%s/" UPD_DIR "/state: %s", up->dest,
			 strerror(-rc));
	return rc;
}

/* DEST and DEST/.seedfs-pull (ours, locked): 0, or -errno with @err. */
static int open_dest(struct upd *up, const char *dest, char *err, size_t errlen)
{
	size_t l = strlen(dest);
	while (l > 1 && dest[l - 1] == '/')
		l--;
	if (l > SFS_MF_PATH_MAX / 2) {
		snprintf(err, errlen, "%.200s...: %s", dest,
			 strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	memcpy(up->dest, dest, l);
	up->dest[l] = '\0';
	up->dest_len = l;
	if (mkdir(up->dest, 0755) && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %.400s: %s", up->dest,
			 strerror(errno));
		return -errno;
	}
	int dfd = open(up->dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		snprintf(err, errlen, "%.400s: %s", up->dest, strerror(errno));
		return -errno;
	}
	struct stat st;
	int rc = 0;
	if (mkdirat(dfd, UPD_DIR, 0700) && errno != EEXIST)
		rc = -errno;
	else if ((up->updfd = openat(dfd, UPD_DIR,
				     O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					     O_CLOEXEC)) < 0 ||
		 fstat(up->updfd, &st))
		rc = -errno;
	else if (st.st_uid != geteuid())
		rc = -EPERM;
	else if (flock(up->updfd, LOCK_EX | LOCK_NB))
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
	close(dfd);
	if (rc)
		snprintf(err, errlen, "%s/" UPD_DIR ": %s", up->dest,
			 rc == -EBUSY ? "another seedfs pull --update runs here"
			 : rc == -EPERM ? "not this user's directory"
			 : rc == -ENOTDIR || rc == -ELOOP
				 ? "not a directory (a link?)"
				 : strerror(-rc));
	return rc;
}

/* DEST holds some of the model, or nothing: an update may remove what
 * the model does not have.  Else -ENOTEMPTY with @err. */
static int looks_like_copy(const struct upd *up, char *err, size_t errlen)
{
	const struct sfs_manifest *m = up->p->m;
	DIR *d = opendir(up->dest);
	struct dirent *e;
	int other = 0;
	while (d && (e = readdir(d)))
		other |= strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
			 strcmp(e->d_name, UPD_DIR);
	if (d)
		closedir(d);
	if (!other || !faccessat(up->updfd, "state", F_OK, AT_SYMLINK_NOFOLLOW))
		return 0; /* empty, or an update under way */
	char path[SFS_MF_PATH_MAX * 2];
	struct stat st;
	for (size_t i = 0; i < m->nfiles; i++) {
		snprintf(path, sizeof(path), "%s/%s", up->dest,
			 m->files[i].path);
		if (!lstat(path, &st) && S_ISREG(st.st_mode))
			return 0;
	}
	snprintf(err, errlen,
		 "%s holds none of model %s's files: not a copy of it "
		 "(--update removes what the model does not have)",
		 up->dest, m->model);
	return -ENOTEMPTY;
}

/* Step 3: removals, directories, renames, syncs. */
static int commit(struct upd *up, struct ufile *u, char *err, size_t errlen)
{
	const struct sfs_manifest *m = up->p->m;
	char path[SFS_MF_PATH_MAX * 2], part[32];
	struct stat st;
	int rc = 0;
	/* The changed files' old names first: from here on DEST is
	 * incomplete until the last rename. */
	for (size_t i = 0; i < m->nfiles && !rc; i++) {
		snprintf(path, sizeof(path), "%s/%s", up->dest,
			 m->files[i].path);
		if (u[i].changed && !lstat(path, &st) && !S_ISDIR(st.st_mode) &&
		    unlink(path))
			rc = -errno;
	}
	if (!rc) {
		walk_up = up;
		if (nftw(up->dest, remove_one, 32,
			 FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0 &&
		    !up->err)
			up->err = -errno;
		walk_up = NULL;
		rc = up->err;
		if (rc)
			snprintf(path, sizeof(path), "%s",
				 up->errpath ? up->errpath : up->dest);
	}
	/* Tests only (pull_update): a pause where a kill leaves the changed
	 * files missing under their names. */
	const char *pause = getenv("SEEDFS_TEST_UPDATE_PAUSE_MS");
	if (!rc && pause)
		usleep((useconds_t)SFS_MIN(strtoul(pause, NULL, 10), 60000ul) *
		       1000);
	for (size_t i = 0; i < m->ndirs && !rc; i++) {
		snprintf(path, sizeof(path), "%s/%s", up->dest, m->dirs[i]);
		if (!lstat(path, &st) && !S_ISDIR(st.st_mode) && unlink(path))
			rc = -errno;
		else if (mkdir(path, 0755) && errno != EEXIST)
			rc = -errno;
	}
	for (size_t i = 0; i < m->nfiles && !rc; i++) {
		if (!u[i].changed)
			continue;
		part_name(i, part, sizeof(part));
		snprintf(path, sizeof(path), "%s/%s", up->dest,
			 m->files[i].path);
		if (renameat(up->updfd, part, AT_FDCWD, path))
			rc = -errno;
	}
	if (rc) {
		snprintf(err, errlen, "%.400s: %s", path, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < m->ndirs && !rc; i++) {
		snprintf(path, sizeof(path), "%s/%s", up->dest, m->dirs[i]);
		rc = sync_dir(path, err, errlen);
	}
	return rc ? rc : sync_dir(up->dest, err, errlen);
}

/* What is left in DEST/.seedfs-pull goes (stale f<N>, the state), and
 * the directory. */
static void clear_upd(struct upd *up)
{
	int fd = dup(up->updfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(up->updfd, e->d_name, 0);
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	char path[SFS_MF_PATH_MAX];
	snprintf(path, sizeof(path), "%s/" UPD_DIR, up->dest);
	if (rmdir(path))
		SFS_LOG(SFS_WARN, "pull", "cannot remove %s: %s", path,
			strerror(errno));
}

int pull_update(struct pull *p, const char *dest, char *err, size_t errlen)
{
	const struct sfs_manifest *m = p->m;
	struct upd up = {.p = p, .updfd = -1};
	struct ufile *u = calloc(m->nfiles ? m->nfiles : 1, sizeof(*u));
	int rc = 0;

	up.buf = malloc(UPD_READ);
	up.names = malloc((m->nfiles + m->ndirs + 1) * sizeof(*up.names));
	up.files = malloc((m->nfiles + 1) * sizeof(*up.files));
	if (!u || !up.buf || !up.names || !up.files) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < m->nfiles; i++)
		up.names[up.nnames++] = up.files[up.nfiles++] =
			m->files[i].path;
	for (size_t i = 0; i < m->ndirs; i++)
		up.names[up.nnames++] = m->dirs[i];
	qsort(up.names, up.nnames, sizeof(*up.names), name_cmp);
	qsort(up.files, up.nfiles, sizeof(*up.files), name_cmp);
	for (size_t i = 0; i < up.nnames && !rc; i++)
		if (!strcmp(up.names[i], UPD_DIR) ||
		    !strncmp(up.names[i], UPD_DIR "/", sizeof(UPD_DIR))) {
			rc = -EEXIST;
			snprintf(err, errlen,
				 "model %s has a " UPD_DIR
				 " of its own: it cannot be updated in place",
				 m->model);
		}
	if (rc || (rc = open_dest(&up, dest, err, errlen)) ||
	    (rc = looks_like_copy(&up, err, errlen)) ||
	    (rc = write_state(&up, err, errlen)))
		goto out;
	uint64_t total = 0;
	for (size_t i = 0; i < m->nfiles; i++)
		total += m->files[i].size;
	char what[300];
	snprintf(what, sizeof(what), "compare %s", m->model);
	sfs_progress_start(&p->prog, what, total);
	/* Step 1: compare; DEST as it was. */
	for (size_t i = 0; i < m->nfiles && !rc; i++) {
		rc = prepare(&up, i, &u[i], err, errlen);
		sfs_progress_add(&p->prog, m->files[i].size);
	}
	sfs_progress_end(&p->prog, rc == 0);
	/* Step 2: the changed files built aside; DEST as it was. */
	total = 0;
	for (size_t i = 0; i < m->nfiles; i++)
		total += u[i].changed && !u[i].built
				 ? to_pull(&m->files[i], &u[i])
				 : 0;
	snprintf(what, sizeof(what), "update %s", m->model);
	sfs_progress_start(&p->prog, what, total);
	for (size_t i = 0; i < m->nfiles && !rc; i++) {
		if (!u[i].changed) {
			p->kept_files++;
			p->kept_bytes += m->files[i].size;
			continue;
		}
		p->changed_files++;
		rc = build(&up, i, &u[i], err, errlen);
	}
	sfs_progress_end(&p->prog, rc == 0);
	/* Step 3. */
	if (!rc)
		rc = commit(&up, u, err, errlen);
	for (size_t i = 0; i < m->nfiles && !rc; i++)
		if (!u[i].changed)
			rc = touch_kept(&up, &m->files[i], err, errlen);
	if (!rc && m->nskipped)
		rc = pull_left_out(m, err, errlen);
	if (!rc) {
		clear_upd(&up);
		if ((rc = pull_dir_times(p, up.dest)))
			snprintf(err, errlen, "setting directory times: %s",
				 strerror(-rc));
	}
	if (!rc && up.removed)
		SFS_LOG(SFS_INFO, "pull",
			"%s: %zu entries the generation does not have removed",
			up.dest, up.removed);
out:
	for (size_t i = 0; u && i < m->nfiles; i++)
		free(u[i].bad);
	free(u);
	free(up.buf);
	free(up.names);
	free(up.files);
	free(up.errpath);
	if (up.updfd >= 0)
		close(up.updfd);
	if (rc) {
		size_t l = strlen(err);
		snprintf(err + l, errlen - l,
			 " (%s is the old copy, or incomplete: run seedfs pull "
			 "--update again)",
			 up.dest[0] ? up.dest : dest);
	}
	return rc;
}
