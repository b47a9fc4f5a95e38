/* SPDX-License-Identifier: MIT */
/*
 * util.h - small helpers shared by every layer: time, parsing, base64.
 * All functions are thread safe and allocate nothing unless stated.
 */
#ifndef SFS_UTIL_H
#define SFS_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define SFS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define SFS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SFS_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Monotonic clock in nanoseconds / milliseconds. */
uint64_t sfs_now_ns(void);
static inline uint64_t sfs_now_ms(void)
{
	return sfs_now_ns() / 1000000u;
}

/*
 * sfs_abstime - CLOCK_MONOTONIC deadline @ms from now, for
 * pthread_cond_timedwait on a condvar made by sfs_cond_init.
 */
struct timespec sfs_abstime(uint64_t ms);

/* Wall-clock times as signed nanoseconds since the epoch (a manifest's
 * mtime_ns) and back; before 1970 too. */
int64_t sfs_timespec_ns(struct timespec ts);
struct timespec sfs_ns_timespec(int64_t ns);

/* sfs_cond_init - condvar that waits on CLOCK_MONOTONIC.  0 or -errno. */
#include <pthread.h>
int sfs_cond_init(pthread_cond_t *c);
/* sfs_rwlock_init_writer - a rwlock whose writer does not wait behind a
 * stream of readers (a reset behind posters).  0 or -errno. */
int sfs_rwlock_init_writer(pthread_rwlock_t *l);

/*
 * sfs_parse_hostport - split "HOST:PORT", "[V6]:PORT" or ":PORT" into
 * @host (empty when absent) and @port.  Returns 0 or -EINVAL.
 */
int sfs_parse_hostport(const char *s, char *host, size_t hostlen, char *port,
		       size_t portlen);

/*
 * sfs_parse_size - "4096", "64K", "1M", "2G", "1T" (powers of 1024,
 * optional "iB"/"B").  Returns 0 or -EINVAL / -ERANGE.
 */
int sfs_parse_size(const char *s, uint64_t *out);

/*
 * sfs_parse_u64 - a whole decimal or 0x-prefixed hex number, nothing
 * else.  Returns 0 or -EINVAL / -ERANGE.
 */
int sfs_parse_u64(const char *s, uint64_t *out);

/* Base64 (RFC 4648, padded).  sfs_b64_enc_len includes the NUL. */
size_t sfs_b64_enc_len(size_t n);
void sfs_b64_encode(const void *src, size_t n, char *dst);
/*
 * sfs_b64_decode - strict: rejects bad characters, bad padding and
 * non-canonical trailing bits.  @dst must hold len/4*3 bytes.
 * Returns 0 and *outlen, or -EINVAL.
 */
int sfs_b64_decode(const char *src, size_t len, void *dst, size_t *outlen);

/* Hex of @n bytes into @dst (2n+1 bytes); strict decode, 0 or -EINVAL. */
void sfs_hex_encode(const void *src, size_t n, char *dst);

/* sfs_url_escape - @s with every byte but [A-Za-z0-9._~-] as %XX, for a
 * URL's query: [new, free()], NULL when out of memory. */
char *sfs_url_escape(const char *s);
/*
 * sfs_escape - @n bytes of untrusted text at @s (a name or an error
 * message that came from the network or from disk) as one line that
 * cannot be mistaken for more, into @out (@outlen bytes, always
 * NUL-terminated): \n \r \t for those, \\ for a backslash, \xNN for
 * every other control character (C0, DEL, C1), for U+2028 and U+2029
 * (line and paragraph separators) byte by byte, and for every byte that
 * is not part of valid UTF-8 (overlong forms, surrogates, past
 * U+10FFFF, cut sequences); anything else kept as it is.  When @out is
 * too small the text is cut at a whole character and ends in "...".
 * Returns @out.  Pure; thread safe.
 */
char *sfs_escape(const char *s, size_t n, char *out, size_t outlen);

/*
 * sfs_unprintable - the offset of the first byte of the @n at @s that
 * sfs_escape would turn into \xNN or \n, \r, \t (a control character,
 * U+2028, U+2029, or a byte that is not part of valid UTF-8), or @n when
 * there is none.  Pure; thread safe.
 */
size_t sfs_unprintable(const char *s, size_t n);

/* sfs_hex_val - the value of hex digit @c (either case), or -1. */
int sfs_hex_val(char c);
int sfs_hex_decode(const char *src, void *dst, size_t cap, size_t *outlen);

/* sfs_fmt_bytes - "1.5 GiB" style into @buf; returns @buf. */
char *sfs_fmt_bytes(uint64_t n, char *buf, size_t len);

/* sfs_fmt_size_limit - like sfs_fmt_bytes, "unlimited" from 2^62 up. */
char *sfs_fmt_size_limit(uint64_t n, char *buf, size_t len);

/*
 * sfs_grow - make room for @need elements of @elem bytes in *p (capacity
 * *cap), growing geometrically.  Returns 0 or -ENOMEM (*p unchanged).
 */
int sfs_grow(void **p, size_t *cap, size_t need, size_t elem);

/*
 * sfs_keep_forever - @p must never be freed (a transport may still
 * write into it): keep it reachable, so leak checkers do not count it,
 * until the process ends.  Thread safe.
 */
void sfs_keep_forever(void *p);

/*
 * sfs_raise_nofile - raise this process's soft limit of open files to
 * its hard limit (a seed's control port holds a socket per client).
 * Best effort.
 */
void sfs_raise_nofile(void);

/*
 * sfs_umask - the process's file mode creation mask, as a file created
 * now gets it: from /proc/self/status, else by umask(2) set to 077 for
 * an instant and back (a file another thread creates meanwhile gets at
 * most owner access, never more than it would).  Thread safe.
 */
mode_t sfs_umask(void);

/*
 * sfs_fail - write one line into @err (@errlen bytes) and return -EINVAL:
 * how the parsers of untrusted input refuse it, naming the field.
 */
__attribute__((format(printf, 3, 4))) int sfs_fail(char *err, size_t errlen,
						   const char *fmt, ...);

#endif /* SFS_UTIL_H */
