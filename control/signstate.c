/* SPDX-License-Identifier: MIT */
/* signstate.c - the signed generations a replica took (signstate.h). */
#include "control/signstate.h"

#include "common/log.h"
#include "common/util.h"
#include "metadata/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HEADER "seedfs-signed-generations 1\n"
#define TMP SFS_SIGNSTATE_FILE ".tmp"
#define LINE_MAX_BYTES 1024 /* a record's line, at most */
#define LOCK_WAIT_MS 5000   /* another process's save, at most */

/* One record: the newest of (model, key, signer) taken. */
struct rec {
	char model[SFS_MF_NAME_MAX + 1];
	char key[SFS_SIGN_ID_LEN + 1];
	char signer[SFS_MF_SIGNER_MAX + 1];
	uint64_t run, generation;
	int64_t signed_at;
};

struct recs {
	struct rec *r;
	size_t n, cap;
};

struct sfs_signstate {
	pthread_mutex_t lock;
	pthread_mutex_t save_lock; /* one save at a time; before lock */
	char *path;		   /* "": in memory only */
	int dfd;		   /* its directory; -1: in memory only */
	struct recs recs;	   /* protected by lock */
	int dirty;		   /* protected by lock: changed since saved */
	/* The file as last read or written (another process may replace
	 * it); protected by lock. */
	int seen;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	char said[256]; /* protected by lock: the last reload refusal */
};

/* ---- records ----------------------------------------------------------- */

static int same_key(const struct rec *a, const struct rec *b)
{
	return !strcmp(a->model, b->model) && !strcmp(a->key, b->key) &&
	       !strcmp(a->signer, b->signer);
}

/* @a is newer than @b (of one key): a later generation of one run, or
 * the same signed later; another run signed later. */
static int newer(const struct rec *a, const struct rec *b)
{
	if (a->run == b->run)
		return a->generation > b->generation ||
		       (a->generation == b->generation &&
			a->signed_at > b->signed_at);
	return a->signed_at > b->signed_at;
}

static ssize_t find(const struct recs *rs, const struct rec *k)
{
	for (size_t i = 0; i < rs->n; i++)
		if (same_key(&rs->r[i], k))
			return (ssize_t)i;
	return -1;
}

/* @r into @rs, unless @rs holds a newer one of its key; when full, the
 * record signed longest ago goes.  1: changed, 0: not, -ENOMEM. */
static int put(struct recs *rs, const struct rec *r)
{
	ssize_t i = find(rs, r);
	if (i >= 0) {
		if (!newer(r, &rs->r[i]))
			return 0;
		/* The newest signature time seen stays: a record never
		 * moves back in time (a run taken after another, signed a
		 * little before it, would otherwise let the first run's
		 * older generations back in). */
		int64_t at = SFS_MAX(rs->r[i].signed_at, r->signed_at);
		rs->r[i] = *r;
		rs->r[i].signed_at = at;
		return 1;
	}
	if (rs->n == SFS_SIGNSTATE_MAX) {
		size_t old = 0;
		for (size_t k = 1; k < rs->n; k++)
			if (rs->r[k].signed_at < rs->r[old].signed_at)
				old = k;
		rs->r[old] = *r;
		return 1;
	}
	if (sfs_grow((void **)&rs->r, &rs->cap, rs->n + 1, sizeof(*rs->r)))
		return -ENOMEM;
	rs->r[rs->n++] = *r;
	return 1;
}

/* ---- the file's form ---------------------------------------------------- */

static int unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '~' ||
	       c == '-';
}

/* @n bytes at @p are exactly 16 lowercase hex digits: into *v. */
static int hex16(const char *p, size_t n, uint64_t *v)
{
	if (n != 16 || strspn(p, "0123456789abcdef") < 16)
		return -1;
	*v = 0;
	for (size_t i = 0; i < 16; i++)
		*v = *v << 4 | (uint64_t)sfs_hex_val(p[i]);
	return 0;
}

/* @n bytes at @p are a decimal number without leading zeros, at most
 * INT64_MAX: into *v. */
static int dec(const char *p, size_t n, int64_t *v)
{
	uint64_t x = 0;
	if (!n || n > 19 || (p[0] == '0' && n > 1))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		x = x * 10 + (uint64_t)(p[i] - '0');
	}
	if (x > INT64_MAX)
		return -1;
	*v = (int64_t)x;
	return 0;
}

/* The model name written %XX: into @out (SFS_MF_NAME_MAX + 1). */
static int unpct(const char *p, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (o == SFS_MF_NAME_MAX)
			return -1;
		if (unreserved(c)) {
			out[o++] = (char)c;
			continue;
		}
		if (c != '%' || n - i < 3)
			return -1;
		int hi = sfs_hex_val(p[i + 1]), lo = sfs_hex_val(p[i + 2]);
		if (hi < 0 || lo < 0 || (p[i + 1] >= 'a' && p[i + 1] <= 'f') ||
		    (p[i + 2] >= 'a' && p[i + 2] <= 'f') || (!hi && !lo))
			return -1;
		out[o++] = (char)(hi << 4 | lo);
		i += 2;
	}
	out[o] = '\0';
	const char *why;
	return o && !sfs_path_check(out, &why) && !strchr(out, '/') ? 0 : -1;
}

/* One line (without its newline) into @r; 0, or -1 with @what naming
 * the field. */
static int parse_line(const char *p, size_t n, struct rec *r, const char **what)
{
	const char *f[6];
	size_t l[6], k = 0, start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && p[i] != ' ')
			continue;
		if (k == 6) {
			*what = "more than 6 fields";
			return -1;
		}
		f[k] = p + start;
		l[k++] = i - start;
		start = i + 1;
	}
	if (k != 6) {
		*what = "not 6 fields separated by one space";
		return -1;
	}
	int64_t gen;
	char signer[SFS_MF_SIGNER_MAX + 1];
	*r = (struct rec){0};
	if (unpct(f[0], l[0], r->model))
		return *what = "model: not a model name written with %XX", -1;
	if (l[1] != SFS_SIGN_ID_LEN ||
	    strspn(f[1], "0123456789abcdef") < SFS_SIGN_ID_LEN)
		return *what = "key: not 16 lowercase hex digits", -1;
	memcpy(r->key, f[1], SFS_SIGN_ID_LEN);
	if (l[2] > SFS_MF_SIGNER_MAX)
		return *what = "signer: longer than 64 bytes", -1;
	memcpy(signer, f[2], l[2]);
	signer[l[2]] = '\0';
	if (!sfs_manifest_signer_ok(signer))
		return *what = "signer: not 1 to 64 of A-Z a-z 0-9 . _ : -", -1;
	memcpy(r->signer, signer, l[2] + 1);
	if (hex16(f[3], l[3], &r->run) || !r->run)
		return *what = "run: not 16 lowercase hex digits, not all zero",
		       -1;
	if (dec(f[4], l[4], &gen))
		return *what = "generation: not a decimal number of at most "
			       "19 digits (no leading zero)",
		       -1;
	r->generation = (uint64_t)gen;
	if (dec(f[5], l[5], &r->signed_at) || !r->signed_at)
		return *what = "signed_at: not a positive decimal number of "
			       "at most 19 digits (no leading zero)",
		       -1;
	return 0;
}

/* @len bytes of the file's form into @rs (empty).  @name names it. */
static int parse(const char *text, size_t len, const char *name,
		 struct recs *rs, char *err, size_t errlen)
{
	size_t hl = sizeof(HEADER) - 1, line = 1;
	if (len > SFS_SIGNSTATE_BYTES) {
		snprintf(err, errlen, "%s: %zu bytes, more than the %u allowed",
			 name, len, SFS_SIGNSTATE_BYTES);
		return -E2BIG;
	}
	if (len < hl || memcmp(text, HEADER, hl)) {
		snprintf(err, errlen,
			 "%s: line 1: not \"seedfs-signed-generations 1\"",
			 name);
		return -EINVAL;
	}
	for (size_t at = hl; at < len;) {
		const char *p = text + at, *what = NULL;
		const char *nl = memchr(p, '\n', len - at);
		size_t n = nl ? (size_t)(nl - p) : len - at;
		struct rec r;
		line++;
		if (!nl)
			what = "no newline at its end";
		else if (n > LINE_MAX_BYTES)
			what = "longer than 1024 bytes";
		else if (memchr(p, '\0', n))
			what = "a NUL byte";
		else if (!parse_line(p, n, &r, &what) && find(rs, &r) >= 0)
			what = "a model, key and signer listed before";
		else if (!what && rs->n == SFS_SIGNSTATE_MAX)
			what = "more than 4096 records";
		if (what) {
			snprintf(err, errlen, "%s: line %zu: %s", name, line,
				 what);
			return -EINVAL;
		}
		if (put(rs, &r) < 0) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		at += n + 1;
	}
	return 0;
}

/* The records in the file's form, into *out [new]. */
static int render(const struct recs *rs, char **out, size_t *len)
{
	FILE *f = open_memstream(out, len);
	if (!f)
		return -ENOMEM;
	fputs(HEADER, f);
	for (size_t i = 0; i < rs->n; i++) {
		const struct rec *r = &rs->r[i];
		for (const unsigned char *c = (const unsigned char *)r->model;
		     *c; c++)
			if (unreserved(*c))
				fputc(*c, f);
			else
				fprintf(f, "%%%02X", *c);
		fprintf(f, " %s %s %016" PRIx64 " %" PRIu64 " %" PRId64 "\n",
			r->key, r->signer, r->run, r->generation, r->signed_at);
	}
	return fclose(f) ? -ENOMEM : 0;
}

/* ---- the directory ------------------------------------------------------ */

int sfs_signstate_default_dir(char *buf, size_t len, char *err, size_t errlen)
{
	const char *e = getenv("SEEDFS_STATE_DIR");
	int n;
	if (e && *e) {
		n = snprintf(buf, len, "%s", e);
	} else if (geteuid() == 0) {
		n = snprintf(buf, len, "/var/lib/seedfs");
	} else if ((e = getenv("XDG_STATE_HOME")) && e[0] == '/') {
		n = snprintf(buf, len, "%s/seedfs", e);
	} else {
		const char *home = getenv("HOME");
		struct passwd pw, *res = NULL;
		char pwbuf[4096];
		if ((!home || home[0] != '/') &&
		    !getpwuid_r(geteuid(), &pw, pwbuf, sizeof(pwbuf), &res) &&
		    res)
			home = res->pw_dir;
		if (!home || home[0] != '/') {
			snprintf(err, errlen,
				 "no directory for the signed-generation "
				 "state: neither HOME nor XDG_STATE_HOME nor "
				 "SEEDFS_STATE_DIR names one");
			return -ENOENT;
		}
		n = snprintf(buf, len, "%s/.local/state/seedfs", home);
	}
	if (n < 0 || (size_t)n >= len) {
		snprintf(err, errlen,
			 "signed-generation state directory: name "
			 "too long");
		return -ENAMETOOLONG;
	}
	return 0;
}

/* mkdir -p @dir, 0700 each made. */
static int make_dirs(const char *dir)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return mkdir(p, 0700) && errno != EEXIST ? -errno : 0;
}

/* @st may hold what others must not change: this user's (or root's,
 * when @root_ok), and nobody else may write it, unless sticky. */
static const char *unfit(const struct stat *st, int root_ok, int sticky_ok)
{
	if (st->st_uid != geteuid() && !(root_ok && st->st_uid == 0))
		return "owned by another user";
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) &&
	    !(sticky_ok && (st->st_mode & S_ISVTX)))
		return "its group or others can write it";
	return NULL;
}

/* @dir made if missing and opened into *dfd, checked with its parents. */
static int open_dir(const char *dir, int *dfd, char *err, size_t errlen)
{
	char real[PATH_MAX];
	struct stat st;
	int rc;

	if (dir[0] != '/') {
		snprintf(err, errlen,
			 "signed-generation state directory %s: not an "
			 "absolute path",
			 dir);
		return -EINVAL;
	}
	if ((rc = make_dirs(dir))) {
		snprintf(err, errlen,
			 "signed-generation state directory %s: cannot "
			 "create it: %s",
			 dir, strerror(-rc));
		return rc;
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		rc = -errno;
		if (!lstat(dir, &st) && S_ISLNK(st.st_mode))
			rc = -ELOOP;
		snprintf(err, errlen,
			 "signed-generation state directory %s: %s", dir,
			 rc == -ELOOP ? "a symbolic link" : strerror(-rc));
		goto err;
	}
	const char *why = unfit(&st, 0, 0);
	if (why) {
		snprintf(err, errlen,
			 "signed-generation state directory %s: %s (uid %u, "
			 "mode %04o); it must be this user's (uid %u) and "
			 "nobody else's to write",
			 dir, why, (unsigned int)st.st_uid,
			 (unsigned int)(st.st_mode & 07777),
			 (unsigned int)geteuid());
		rc = -EPERM;
		goto err;
	}
	if (!realpath(dir, real)) {
		rc = -errno;
		snprintf(err, errlen,
			 "signed-generation state directory %s: %s", dir,
			 strerror(-rc));
		goto err;
	}
	/* Whoever may rename a parent may put another directory here. */
	for (char *s = strrchr(real, '/'); s; s = strrchr(real, '/')) {
		if (s == real)
			s[1] = '\0';
		else
			*s = '\0';
		if (stat(real, &st) || (why = unfit(&st, 1, 1))) {
			snprintf(err, errlen,
				 "signed-generation state directory %s: its "
				 "parent %s: %s",
				 dir, real, why ? why : strerror(errno));
			rc = -EPERM;
			goto err;
		}
		if (s == real)
			break;
	}
	*dfd = fd;
	return 0;
err:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* ---- reading and writing the file --------------------------------------- */

/* The file read into @rs (empty when missing); *st of it.  @s->lock not
 * needed: only s->dfd and s->path are read. */
static int read_file(struct sfs_signstate *s, struct recs *rs, struct stat *st,
		     int *exists, char *err, size_t errlen)
{
	char *buf = NULL;
	int rc = 0;
	*exists = 0;
	int fd = openat(s->dfd, SFS_SIGNSTATE_FILE,
			O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0 || fstat(fd, st)) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", s->path,
			 rc == -ELOOP ? "a symbolic link" : strerror(-rc));
		goto out;
	}
	const char *why = unfit(st, 0, 0);
	if (!S_ISREG(st->st_mode) || why || st->st_nlink != 1) {
		snprintf(err, errlen, "%s: %s", s->path,
			 !S_ISREG(st->st_mode) ? "not a regular file"
			 : why		       ? why
					       : "it has another name (a hard "
						 "link)");
		rc = -EPERM;
		goto out;
	}
	if (st->st_size > SFS_SIGNSTATE_BYTES) {
		snprintf(err, errlen,
			 "%s: %lld bytes, more than the %u allowed", s->path,
			 (long long)st->st_size, SFS_SIGNSTATE_BYTES);
		rc = -E2BIG;
		goto out;
	}
	size_t want = (size_t)st->st_size, got = 0;
	if (!(buf = malloc(want + 1))) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	while (got < want) {
		ssize_t k = read(fd, buf + got, want - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = k ? -errno : -EIO;
			snprintf(err, errlen, "%s: %s", s->path,
				 k ? strerror(errno) : "shorter than it said");
			goto out;
		}
		got += (size_t)k;
	}
	*exists = 1;
	rc = parse(buf, got, s->path, rs, err, errlen);
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return rc;
}

static void remember(struct sfs_signstate *s, const struct stat *st)
{
	s->seen = 1;
	s->dev = st->st_dev;
	s->ino = st->st_ino;
	s->size = st->st_size;
	s->mtime = st->st_mtim;
}

static int changed(const struct sfs_signstate *s, const struct stat *st)
{
	return !s->seen || s->dev != st->st_dev || s->ino != st->st_ino ||
	       s->size != st->st_size ||
	       s->mtime.tv_sec != st->st_mtim.tv_sec ||
	       s->mtime.tv_nsec != st->st_mtim.tv_nsec;
}

/* Another process replaced the file: its records merged in (s->lock
 * held).  One that does not parse is said once and left: this state
 * keeps what it has, and the next save replaces it. */
static void reload(struct sfs_signstate *s)
{
	struct stat st;
	struct recs rs = {0};
	char err[sizeof(s->said)];
	int exists;
	if (s->dfd < 0 ||
	    fstatat(s->dfd, SFS_SIGNSTATE_FILE, &st, AT_SYMLINK_NOFOLLOW) ||
	    !changed(s, &st))
		return;
	if (read_file(s, &rs, &st, &exists, err, sizeof(err))) {
		if (strcmp(err, s->said))
			SFS_LOG(SFS_WARN, "trust",
				"not read again: %s (what this process took "
				"stays; its next save replaces the file)",
				err);
		snprintf(s->said, sizeof(s->said), "%s", err);
	} else {
		for (size_t i = 0; i < rs.n; i++)
			put(&s->recs, &rs.r[i]);
		remember(s, &st);
		s->said[0] = '\0';
	}
	free(rs.r);
}

/* The directory's flock, waited for LOCK_WAIT_MS at most. */
static int lock_dir(int dfd)
{
	for (int waited = 0;; waited += 10) {
		if (!flock(dfd, LOCK_EX | LOCK_NB))
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (waited >= LOCK_WAIT_MS)
			return -ETIMEDOUT;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

/* @len bytes of @text as the file: a temporary file, synced, renamed
 * over it, the directory synced. */
static int write_file(struct sfs_signstate *s, const char *text, size_t len,
		      struct stat *st, char *err, size_t errlen)
{
	int rc = 0;
	if (unlinkat(s->dfd, TMP, 0) && errno != ENOENT)
		goto err_errno;
	int fd = openat(s->dfd, TMP,
			O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			0600);
	if (fd < 0)
		goto err_errno;
	for (size_t put = 0; put < len;) {
		ssize_t k = write(fd, text + put, len - put);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = k ? -errno : -EIO;
			break;
		}
		put += (size_t)k;
	}
	if (!rc && (fsync(fd) || fstat(fd, st)))
		rc = -errno;
	close(fd);
	if (!rc && renameat(s->dfd, TMP, s->dfd, SFS_SIGNSTATE_FILE))
		rc = -errno;
	if (!rc && fsync(s->dfd))
		rc = -errno;
	if (rc) {
		unlinkat(s->dfd, TMP, 0);
		snprintf(err, errlen, "%s: cannot write it: %s", s->path,
			 strerror(-rc));
	}
	return rc;
err_errno:
	rc = -errno;
	snprintf(err, errlen, "%s: cannot write it: %s", s->path,
		 strerror(-rc));
	return rc;
}

/* ---- the API ------------------------------------------------------------ */

static struct sfs_signstate *state_new(void)
{
	struct sfs_signstate *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->save_lock, NULL);
	s->dfd = -1;
	return s;
}

int sfs_signstate_parse(const char *text, size_t len, const char *name,
			struct sfs_signstate **out, char *err, size_t errlen)
{
	struct sfs_signstate *s = state_new();
	int rc;
	if (!s || !(s->path = strdup(""))) {
		sfs_signstate_free(s);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if ((rc = parse(text, len, name, &s->recs, err, errlen))) {
		sfs_signstate_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int sfs_signstate_open(const char *dir, struct sfs_signstate **out, char *err,
		       size_t errlen)
{
	struct sfs_signstate *s = state_new();
	struct stat st;
	int rc, exists;

	if (!s || asprintf(&s->path, "%s/%s", dir, SFS_SIGNSTATE_FILE) < 0) {
		if (s)
			s->path = NULL;
		sfs_signstate_free(s);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if ((rc = open_dir(dir, &s->dfd, err, errlen)))
		goto err;
	if ((rc = read_file(s, &s->recs, &st, &exists, err, errlen))) {
		size_t l = strlen(err);
		snprintf(err + l, errlen > l ? errlen - l : 0,
			 "; remove it to start afresh (forgetting which "
			 "generations were taken)");
		goto err;
	}
	if (exists)
		remember(s, &st);
	*out = s;
	return 0;
err:
	sfs_signstate_free(s);
	return rc;
}

void sfs_signstate_free(struct sfs_signstate *s)
{
	if (!s)
		return;
	if (s->dfd >= 0)
		close(s->dfd);
	free(s->recs.r);
	free(s->path);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->save_lock);
	free(s);
}

const char *sfs_signstate_path(const struct sfs_signstate *s)
{
	return s->path;
}

size_t sfs_signstate_count(struct sfs_signstate *s)
{
	pthread_mutex_lock(&s->lock);
	size_t n = s->recs.n;
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* "in FILE" or "in memory", for messages. */
static const char *where(const struct sfs_signstate *s)
{
	return *s->path ? s->path : "memory";
}

int sfs_signstate_take(struct sfs_signstate *s, const struct sfs_manifest *m,
		       char *why, size_t whylen)
{
	struct rec r = {.run = m->signer_run,
			.generation = m->generation,
			.signed_at = m->signed_at};
	int rc = 0;

	if (!m->has_sig || !m->signer[0] || !m->signer_run || !m->signed_at) {
		snprintf(why, whylen,
			 "manifest signed without signer, signer_run or "
			 "signed_at");
		return -EINVAL;
	}
	snprintf(r.model, sizeof(r.model), "%s", m->model);
	snprintf(r.key, sizeof(r.key), "%s", m->sig_key);
	snprintf(r.signer, sizeof(r.signer), "%s", m->signer);
	pthread_mutex_lock(&s->lock);
	reload(s);
	ssize_t i = find(&s->recs, &r);
	const struct rec *o = i >= 0 ? &s->recs.r[i] : NULL;
	if (o && o->run == r.run && r.generation < o->generation) {
		snprintf(why, whylen,
			 "generation %" PRIu64 " of %s's run %016" PRIx64
			 " is older than generation %" PRIu64
			 " of that run, which this replica took (remembered "
			 "in %s): an older generation played back?",
			 r.generation, r.signer, r.run, o->generation,
			 where(s));
		rc = -ESTALE;
	} else if (o && o->run != r.run &&
		   r.signed_at < o->signed_at - (int64_t)SFS_SIGN_STEP_S *
							1000000000) {
		snprintf(why, whylen,
			 "generation %" PRIu64 " of %s's run %016" PRIx64
			 " was signed %.0f s before generation %" PRIu64
			 " of its run %016" PRIx64
			 ", which this replica took (remembered in %s; a "
			 "signer's clock may step back %d s): an older run "
			 "played back?",
			 r.generation, r.signer, r.run,
			 (double)(o->signed_at - r.signed_at) / 1e9,
			 o->generation, o->run, where(s), SFS_SIGN_STEP_S);
		rc = -ESTALE;
	} else {
		/* Another run taken replaces the record even when signed a
		 * little before it (a clock stepped back): it is the run
		 * this replica follows now. */
		if (o && o->run != r.run) {
			/* ...at the newest time seen (put's rule). */
			r.signed_at = SFS_MAX(r.signed_at, o->signed_at);
			s->recs.r[i] = r;
			s->dirty = 1;
		} else {
			int p = put(&s->recs, &r);
			if (p < 0) {
				snprintf(why, whylen, "out of memory");
				rc = -ENOMEM;
			}
			s->dirty |= p > 0;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int sfs_signstate_save(struct sfs_signstate *s, char *err, size_t errlen)
{
	struct recs rs = {0};
	struct stat st;
	char *text = NULL, why[512];
	size_t len = 0;
	int rc = 0, exists;

	if (s->dfd < 0)
		return 0;
	pthread_mutex_lock(&s->save_lock);
	pthread_mutex_lock(&s->lock);
	int dirty = s->dirty;
	s->dirty = 0;
	pthread_mutex_unlock(&s->lock);
	if (!dirty)
		goto out;
	if ((rc = lock_dir(s->dfd))) {
		snprintf(err, errlen, "%s: cannot lock its directory: %s",
			 s->path,
			 rc == -ETIMEDOUT ? "another process holds it"
					  : strerror(-rc));
		goto out_dirty;
	}
	/* What another process wrote meanwhile is kept; a file that does
	 * not parse is replaced (said). */
	if (read_file(s, &rs, &st, &exists, why, sizeof(why))) {
		SFS_LOG(SFS_WARN, "trust",
			"%s: replaced with what this "
			"process took",
			why);
		rs.n = 0;
	}
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < rs.n; i++)
		put(&s->recs, &rs.r[i]);
	rc = render(&s->recs, &text, &len);
	pthread_mutex_unlock(&s->lock);
	if (rc)
		snprintf(err, errlen, "out of memory");
	else
		rc = write_file(s, text, len, &st, err, errlen);
	if (!rc) {
		pthread_mutex_lock(&s->lock);
		remember(s, &st);
		pthread_mutex_unlock(&s->lock);
	}
	flock(s->dfd, LOCK_UN);
out_dirty:
	if (rc) {
		pthread_mutex_lock(&s->lock);
		s->dirty = 1;
		pthread_mutex_unlock(&s->lock);
	}
out:
	pthread_mutex_unlock(&s->save_lock);
	free(rs.r);
	free(text);
	return rc;
}

int sfs_signstate_text(struct sfs_signstate *s, char **out, size_t *len)
{
	pthread_mutex_lock(&s->lock);
	int rc = render(&s->recs, out, len);
	pthread_mutex_unlock(&s->lock);
	return rc;
}
