/* SPDX-License-Identifier: MIT */
/*
 * auth.h - the control port's shared secret (--token-file), checked as
 * "Authorization: Bearer TOKEN" (docs/security.md).
 *
 * A token comes from a file, never from argv or the environment (an
 * environment variable may name the file).  The file holds one line of
 * SFS_AUTH_TOKEN_MIN..SFS_AUTH_TOKEN_MAX characters of RFC 6750's
 * b64token set (A-Z a-z 0-9 - . _ ~ + / and trailing '='), e.g. what
 * `openssl rand -hex 32` prints.  A file its group or others can read,
 * or that another user owns, is refused (sfs_auth_open_secret).  The
 * same object serves both sides: a server checks headers against it, a
 * client sends it.  It can be re-read (SIGHUP: rotation).
 *
 * Thread safety: every function may be called from any thread (a lock
 * guards the token); the parsers are pure.
 */
#ifndef SFS_AUTH_H
#define SFS_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define SFS_AUTH_TOKEN_MIN 16
#define SFS_AUTH_TOKEN_MAX 512
#define SFS_AUTH_FILE_MAX 4096 /* bytes of a token file we read */

struct sfs_auth;

/*
 * sfs_auth_open_secret - open the file of a secret (a token, a TLS
 * private key, etcd's USER:PASSWORD) for reading, as ssh opens its
 * keys: after symlinks (a Kubernetes secret volume links to its files)
 * it must be a regular file owned by this process's effective user or
 * by root, that neither its group nor others may read, write or run
 * (mode 0600 or 0400).  Never blocks (a FIFO is refused, not waited
 * on).  @opt names the option in messages ("--token-file").  Returns an
 * fd [new, O_CLOEXEC; the caller closes it] with *st filled, or -errno
 * with one line in @err naming the file: -ENOENT and the like as
 * open(2) gives them; -EINVAL (not a regular file); -EACCES ("--token-file
 * F: mode 0644 gives its group or others access (0600 or 0400 wanted);
 * chmod 600 F", or "owned by uid N, not by this user (uid M) or
 * root").  Thread safe.
 */
int sfs_auth_open_secret(const char *path, const char *opt, struct stat *st,
			 char *err, size_t errlen);

/*
 * sfs_auth_open_anchor - open a trust anchor (--trust-key, --tls-ca: a
 * public key or a CA that decides what this process trusts) for
 * reading: after symlinks a regular file owned by this process's
 * effective user or by root that neither its group nor others may
 * write (0644 is fine).  Returns an fd [new, O_CLOEXEC] with *st
 * filled, or -errno with one line in @err naming the file: as
 * sfs_auth_open_secret, and -EACCES ("--trust-key F: mode 0666 lets
 * others write it, and whoever writes it decides what this trusts;
 * chmod go-w F"; "mode 0664 lets its group write it, ...").  Thread safe.
 */
int sfs_auth_open_anchor(const char *path, const char *opt, struct stat *st,
			 char *err, size_t errlen);

/*
 * sfs_auth_load - read the token in @path.  @opt names the option in
 * messages ("--token-file").  *out [new, sfs_auth_free].  Returns 0, or
 * -ENOENT / -EACCES / -EINVAL / -EFBIG / -ENOMEM with one line in @err
 * naming the file and what is wrong with it (never the token); the file
 * is opened with sfs_auth_open_secret (its mode and owner checked).
 */
int sfs_auth_load(const char *path, const char *opt, struct sfs_auth **out,
		  char *err, size_t errlen);

/*
 * sfs_auth_reload - read the file again.  *changed (may be NULL) says
 * whether the token differs.  On failure the old token stays and @err
 * says why.  Returns 0 or -errno as sfs_auth_load.
 */
int sfs_auth_reload(struct sfs_auth *a, int *changed, char *err, size_t errlen);

/* sfs_auth_same - whether @a and @b hold the same token now (compared
 * as their SHA-256 digests).  Thread safe. */
int sfs_auth_same(struct sfs_auth *a, struct sfs_auth *b);

/* sfs_auth_digest - the SHA-256 of @a's token now into @out (32 bytes):
 * a key derived from a secret file of the token's format (a seed's
 * --ring-key-file).  Thread safe. */
void sfs_auth_digest(struct sfs_auth *a, uint8_t out[32]);

/* sfs_auth_free - wipe and free.  NULL is fine. */
void sfs_auth_free(struct sfs_auth *a);

/* sfs_auth_file - the token file to use: @given, else what
 * $SEEDFS_TOKEN_FILE names; NULL for none (or empty) [borrowed]. */
const char *sfs_auth_file(const char *given);

/* sfs_auth_changes - how many reloads found a new token so far: whoever
 * must act on a rotation (a re-seeder's keys) compares it with what it
 * saw last, whichever thread reloaded. */
uint64_t sfs_auth_changes(struct sfs_auth *a);

/* The file it reads [borrowed, lives as long as @a]. */
const char *sfs_auth_path(const struct sfs_auth *a);

/*
 * sfs_auth_check - compare the value of an Authorization header
 * (@value, NULL when the request had none) with the token, in constant
 * time (the SHA-256 of both are compared, so neither the token's length
 * nor its bytes show in the timing).  Returns 0 when it matches,
 * -ENOKEY when there is no header, -EBADMSG when it is not "Bearer
 * TOKEN", -EACCES when the token differs.
 */
int sfs_auth_check(struct sfs_auth *a, const char *value);

/*
 * sfs_auth_header - "Authorization: Bearer TOKEN" into @buf, for a
 * request.  0, or -ENOBUFS.  The caller wipes @buf after use.
 */
int sfs_auth_header(struct sfs_auth *a, char *buf, size_t len);

/*
 * sfs_auth_parse_token - the token in the @n bytes of a token file at
 * @buf: its offset and length.  Surrounding blanks and one trailing
 * line end are allowed; anything else (a second line, a character out
 * of the set, too short or long) is -EINVAL with one line in @err.
 * Pure; fuzzed.
 */
int sfs_auth_parse_token(const char *buf, size_t n, size_t *off, size_t *len,
			 char *err, size_t errlen);

/*
 * sfs_auth_parse_bearer - the token of an Authorization header value
 * "Bearer TOKEN" (scheme in any case, blanks around the token): 0 with
 * @tok [borrowed: into @value] and @len, or -EBADMSG.  Pure; fuzzed.
 */
int sfs_auth_parse_bearer(const char *value, const char **tok, size_t *len);

#endif /* SFS_AUTH_H */
