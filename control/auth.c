/* SPDX-License-Identifier: MIT */
/* auth.c - the control port's token (auth.h). */
#include "control/auth.h"

#include "common/secmem.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIGEST_LEN 32 /* SHA-256 */

/* On pages of its own that core dumps leave out (common/secmem.h): it
 * holds the token. */
struct sfs_auth {
	char *path;
	char opt[32];
	pthread_mutex_t lock;
	char token[SFS_AUTH_TOKEN_MAX + 1]; /* protected by lock */
	size_t len;			    /* protected by lock */
	uint8_t digest[DIGEST_LEN];	    /* protected by lock */
	uint64_t changes; /* protected by lock: reloads that changed it */
};

static int in_set(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~' || c == '+' || c == '/';
}

static int blank(unsigned char c)
{
	return c == ' ' || c == '\t';
}

int sfs_auth_parse_token(const char *buf, size_t n, size_t *off, size_t *len,
			 char *err, size_t errlen)
{
	size_t i = 0, end;

	while (i < n && blank((unsigned char)buf[i]))
		i++;
	size_t start = i;
	while (i < n && in_set((unsigned char)buf[i]))
		i++;
	while (i < n && buf[i] == '=') /* b64token's padding, at the end */
		i++;
	end = i;
	while (i < n && blank((unsigned char)buf[i]))
		i++;
	if (i < n && buf[i] == '\r')
		i++;
	int eol = i < n && buf[i] == '\n';
	if (eol)
		i++;
	if (i < n) {
		if (eol)
			snprintf(err, errlen,
				 "holds more than one line; the token is its "
				 "only line");
		else {
			size_t at = i > end ? end : i; /* a blank inside */
			snprintf(err, errlen,
				 "byte %zu (0x%02x) is not a token character "
				 "(A-Z a-z 0-9 - . _ ~ + / and trailing =; "
				 "e.g. openssl rand -hex 32)",
				 at + 1, (unsigned char)buf[at]);
		}
		return -EINVAL;
	}
	if (end - start < SFS_AUTH_TOKEN_MIN ||
	    end - start > SFS_AUTH_TOKEN_MAX) {
		snprintf(err, errlen,
			 "the token has %zu characters; it needs %d to %d "
			 "(e.g. openssl rand -hex 32)",
			 end - start, SFS_AUTH_TOKEN_MIN, SFS_AUTH_TOKEN_MAX);
		return -EINVAL;
	}
	*off = start;
	*len = end - start;
	return 0;
}

int sfs_auth_parse_bearer(const char *value, const char **tok, size_t *len)
{
	const char *p = value;

	if (!value || strncasecmp(p, "Bearer", 6) ||
	    !blank((unsigned char)p[6]))
		return -EBADMSG;
	p += 6;
	while (blank((unsigned char)*p))
		p++;
	const char *t = p;
	while (in_set((unsigned char)*p))
		p++;
	while (*p == '=')
		p++;
	size_t n = (size_t)(p - t);
	while (blank((unsigned char)*p))
		p++;
	if (*p || !n || n > SFS_AUTH_TOKEN_MAX)
		return -EBADMSG;
	*tok = t;
	*len = n;
	return 0;
}

/* Open @path for reading and check its type and owner (this user's or
 * root's); the caller checks its mode. */
static int open_owned(const char *path, const char *opt, struct stat *st,
		      char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), rc;

	if (fd < 0 || fstat(fd, st)) {
		rc = -errno;
		snprintf(err, errlen, "%s %s: %s", opt, path, strerror(-rc));
		goto err_close;
	}
	if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "%s %s: not a regular file", opt, path);
		rc = -EINVAL;
		goto err_close;
	}
	if (st->st_uid != geteuid() && st->st_uid != 0) {
		snprintf(err, errlen,
			 "%s %s: owned by uid %u, not by this user (uid %u) "
			 "or root",
			 opt, path, (unsigned int)st->st_uid,
			 (unsigned int)geteuid());
		rc = -EACCES;
		goto err_close;
	}
	return fd;

err_close:
	if (fd >= 0)
		close(fd);
	return rc;
}

int sfs_auth_open_anchor(const char *path, const char *opt, struct stat *st,
			 char *err, size_t errlen)
{
	int fd = open_owned(path, opt, st, err, errlen);
	if (fd >= 0 && (st->st_mode & (S_IWGRP | S_IWOTH))) {
		snprintf(err, errlen,
			 "%s %s: mode %04o lets %s write it, and whoever "
			 "writes it decides what this trusts; chmod go-w %s",
			 opt, path, (unsigned int)(st->st_mode & 07777),
			 (st->st_mode & S_IWOTH) ? "others" : "its group",
			 path);
		close(fd);
		return -EACCES;
	}
	return fd;
}

int sfs_auth_open_secret(const char *path, const char *opt, struct stat *st,
			 char *err, size_t errlen)
{
	int fd = open_owned(path, opt, st, err, errlen);
	if (fd >= 0 && (st->st_mode & 077)) {
		snprintf(err, errlen,
			 "%s %s: mode %04o gives its group or others access "
			 "(0600 or 0400 wanted); chmod 600 %s",
			 opt, path, (unsigned int)(st->st_mode & 07777), path);
		close(fd);
		return -EACCES;
	}
	return fd;
}

/* Read and parse the file into @tok (@cap bytes); 0 or -errno. */
static int read_token(const char *path, const char *opt, char *tok, size_t cap,
		      size_t *tlen, char *err, size_t errlen)
{
	char buf[SFS_AUTH_FILE_MAX + 1], why[256];
	struct stat st;
	ssize_t n;
	size_t off, len;
	int rc;

	int fd = sfs_auth_open_secret(path, opt, &st, err, errlen);
	if (fd < 0)
		return fd;
	if (st.st_size > SFS_AUTH_FILE_MAX) {
		close(fd);
		snprintf(err, errlen,
			 "%s %s: %lld bytes; a token file holds "
			 "at most %d",
			 opt, path, (long long)st.st_size, SFS_AUTH_FILE_MAX);
		return -EFBIG;
	}
	n = read(fd, buf, SFS_AUTH_FILE_MAX);
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc) {
		snprintf(err, errlen, "%s %s: %s", opt, path, strerror(-rc));
		return rc;
	}
	rc = sfs_auth_parse_token(buf, (size_t)n, &off, &len, why, sizeof(why));
	if (!rc && len >= cap)
		rc = -EINVAL;
	if (rc) {
		snprintf(err, errlen, "%s %s: %s", opt, path, why);
	} else {
		memcpy(tok, buf + off, len);
		tok[len] = '\0';
		*tlen = len;
	}
	explicit_bzero(buf, sizeof(buf));
	return rc;
}

static void digest(const char *t, size_t n, uint8_t *out)
{
	/* Cannot fail for SHA-256 short of a broken library; a zero
	 * digest then matches nothing a client can send. */
	if (gnutls_hash_fast(GNUTLS_DIG_SHA256, t, n, out))
		memset(out, 0, DIGEST_LEN);
}

int sfs_auth_load(const char *path, const char *opt, struct sfs_auth **out,
		  char *err, size_t errlen)
{
	struct sfs_auth *a = sfs_secmem_alloc(sizeof(*a));
	int rc = -ENOMEM;

	if (!a || !(a->path = strdup(path)))
		goto err_free;
	snprintf(a->opt, sizeof(a->opt), "%s", opt);
	rc = read_token(path, opt, a->token, sizeof(a->token), &a->len, err,
			errlen);
	if (rc)
		goto err_free;
	digest(a->token, a->len, a->digest);
	if ((rc = -pthread_mutex_init(&a->lock, NULL)))
		goto err_free;
	*out = a;
	return 0;

err_free:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "%s: out of memory", opt);
	if (a)
		free(a->path);
	sfs_secmem_free(a, sizeof(*a));
	return rc;
}

int sfs_auth_reload(struct sfs_auth *a, int *changed, char *err, size_t errlen)
{
	char tok[SFS_AUTH_TOKEN_MAX + 1];
	size_t len;
	int rc = read_token(a->path, a->opt, tok, sizeof(tok), &len, err,
			    errlen);
	if (rc)
		return rc;
	pthread_mutex_lock(&a->lock);
	int diff = len != a->len || memcmp(tok, a->token, len);
	a->changes += diff;
	memcpy(a->token, tok, len + 1);
	a->len = len;
	digest(a->token, a->len, a->digest);
	pthread_mutex_unlock(&a->lock);
	explicit_bzero(tok, sizeof(tok));
	if (changed)
		*changed = diff;
	return 0;
}

int sfs_auth_same(struct sfs_auth *a, struct sfs_auth *b)
{
	uint8_t da[DIGEST_LEN], db[DIGEST_LEN];
	pthread_mutex_lock(&a->lock);
	memcpy(da, a->digest, DIGEST_LEN);
	pthread_mutex_unlock(&a->lock);
	pthread_mutex_lock(&b->lock);
	memcpy(db, b->digest, DIGEST_LEN);
	pthread_mutex_unlock(&b->lock);
	return !memcmp(da, db, DIGEST_LEN);
}

void sfs_auth_digest(struct sfs_auth *a, uint8_t out[DIGEST_LEN])
{
	pthread_mutex_lock(&a->lock);
	memcpy(out, a->digest, DIGEST_LEN);
	pthread_mutex_unlock(&a->lock);
}

void sfs_auth_free(struct sfs_auth *a)
{
	if (!a)
		return;
	pthread_mutex_destroy(&a->lock);
	free(a->path);
	sfs_secmem_free(a, sizeof(*a)); /* wiped */
}

const char *sfs_auth_file(const char *given)
{
	const char *f = given ? given : getenv("SEEDFS_TOKEN_FILE");
	return f && *f ? f : NULL;
}

uint64_t sfs_auth_changes(struct sfs_auth *a)
{
	pthread_mutex_lock(&a->lock);
	uint64_t n = a->changes;
	pthread_mutex_unlock(&a->lock);
	return n;
}

const char *sfs_auth_path(const struct sfs_auth *a)
{
	return a->path;
}

int sfs_auth_check(struct sfs_auth *a, const char *value)
{
	uint8_t got[DIGEST_LEN], want[DIGEST_LEN];
	const char *tok;
	size_t len;

	if (!value)
		return -ENOKEY;
	if (sfs_auth_parse_bearer(value, &tok, &len))
		return -EBADMSG;
	digest(tok, len, got);
	pthread_mutex_lock(&a->lock);
	memcpy(want, a->digest, DIGEST_LEN);
	pthread_mutex_unlock(&a->lock);
	volatile uint8_t d = 0;
	for (size_t i = 0; i < DIGEST_LEN; i++)
		d |= got[i] ^ want[i];
	return d ? -EACCES : 0;
}

int sfs_auth_header(struct sfs_auth *a, char *buf, size_t len)
{
	pthread_mutex_lock(&a->lock);
	int n = snprintf(buf, len, "Authorization: Bearer %s", a->token);
	pthread_mutex_unlock(&a->lock);
	return n < 0 || (size_t)n >= len ? -ENOBUFS : 0;
}
