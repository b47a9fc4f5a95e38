/* SPDX-License-Identifier: MIT */
/*
 * tls.h - the control port's TLS material: a server's certificate and
 * key (--tls-cert, --tls-key), checked before it serves, and the
 * public-key pins a client may hold it to (--tls-pin).
 *
 * A pin is the SHA-256 of the certificate's public key (its DER
 * SubjectPublicKeyInfo), written "sha256//BASE64" (what a seed prints,
 * and curl's --pinnedpubkey form) or as 64 hex digits (colons allowed,
 * "sha256:" before them allowed): what
 *   openssl x509 -in CERT -pubkey -noout | openssl pkey -pubin
 *     -outform der | sha256sum
 * prints.  Pinning the key, not the whole certificate, lets a
 * certificate be renewed with the same key.
 *
 * Thread safety: a loaded pair is read-only; the parser is pure.
 */
#ifndef SFS_TLS_H
#define SFS_TLS_H

#include <stddef.h>

#define SFS_TLS_PIN_MAX 64 /* "sha256//" and 44 base64 characters, NUL */
#define SFS_TLS_FILE_MAX (1u << 20)

/*
 * What TLS the control plane speaks, server and client alike
 * (docs/security.md, "TLS on the control port"): TLS 1.2 and 1.3 only;
 * in TLS 1.2 only forward-secret key exchange (ECDHE) and AEAD ciphers
 * (AES-GCM, ChaCha20-Poly1305): no CBC, no RC4, no 3DES, no static RSA,
 * no SHA-1 MAC.  SFS_TLS_PRIORITIES is the GnuTLS priority string of
 * the control port (libmicrohttpd); the client's are set by
 * sfs_tls_curl_limit.
 */
#define SFS_TLS_PRIORITIES                                                     \
	"SECURE:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-256-GCM:" \
	"+CHACHA20-POLY1305:+AES-128-GCM:-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:" \
	"+ECDHE-RSA:%SERVER_PRECEDENCE"
/* The same for a client built on OpenSSL (libcurl's OpenSSL backend):
 * TLS 1.2's suites, then TLS 1.3's. */
#define SFS_TLS_OPENSSL_CIPHERS                                                \
	"ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"           \
	"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"           \
	"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256"
#define SFS_TLS_OPENSSL_TLS13                                                  \
	"TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:"                 \
	"TLS_AES_128_GCM_SHA256"

struct sfs_tls_pair;

/*
 * sfs_tls_pair_load - read the PEM certificate (chain) in @cert and the
 * PEM private key in @key, check that they belong together, and compute
 * the certificate's pin.  A certificate that expired or is not valid
 * yet is warned about (clients will refuse it), not refused.  The key
 * file is a secret: its mode and owner are checked as
 * sfs_auth_open_secret does (0600 or 0400, this user's or root's).
 * *out [new].  0, or -errno with one line in @err naming the file.
 */
int sfs_tls_pair_load(const char *cert, const char *key,
		      struct sfs_tls_pair **out, char *err, size_t errlen);

/* sfs_tls_pair_free - the key is wiped.  NULL is fine. */
void sfs_tls_pair_free(struct sfs_tls_pair *p);

/* The PEM texts, NUL-terminated, and the pin [borrowed]. */
const char *sfs_tls_pair_cert(const struct sfs_tls_pair *p);
const char *sfs_tls_pair_key(const struct sfs_tls_pair *p);
const char *sfs_tls_pair_pin(const struct sfs_tls_pair *p);

/* What a file sfs_tls_slurp reads holds, and so how it is checked. */
enum sfs_tls_file {
	SFS_TLS_FILE_PUBLIC, /* a certificate: not checked */
	SFS_TLS_FILE_SECRET, /* a private key: sfs_auth_open_secret */
	SFS_TLS_FILE_ANCHOR, /* a public key trusted: sfs_auth_open_anchor */
};

/*
 * sfs_tls_slurp - the whole of the small file @path (a regular file of
 * at most SFS_TLS_FILE_MAX bytes), NUL-terminated, into *out [new; the
 * caller wipes it if it is a secret] and its length into *len.  A
 * secret is opened as sfs_auth_open_secret does (owner and mode
 * checked: 0600 or 0400), a trust anchor as sfs_auth_open_anchor does
 * (owner checked, nobody else may write it).  0, or -errno with one
 * line in @err naming @opt and the file.
 */
int sfs_tls_slurp(const char *opt, const char *path, enum sfs_tls_file kind,
		  char **out, size_t *len, char *err, size_t errlen);

/*
 * sfs_tls_curl_limit - hold the libcurl handle @curl (a CURL *) to the
 * versions and ciphers above: TLS 1.2 at least, and the cipher lists in
 * the form its TLS backend takes (OpenSSL's names; GnuTLS's priority
 * string, which libcurl 7.88's GnuTLS backend ignores: it keeps its own
 * NORMAL list, so only the version floor holds there; another backend
 * gets the version floor alone).  Call it on every handle that may
 * speak TLS, after curl_easy_reset.  Returns 0, or -EINVAL when libcurl
 * refuses the version floor (no TLS 1.2).  Thread safe.
 */
int sfs_tls_curl_limit(void *curl);

/*
 * sfs_tls_parse_pin - @text in one of the forms above, as
 * "sha256//BASE64" into @out (@len >= SFS_TLS_PIN_MAX).  0, or -EINVAL
 * with one line in @err.  Pure; fuzzed.
 */
int sfs_tls_parse_pin(const char *text, char *out, size_t len, char *err,
		      size_t errlen);

#endif /* SFS_TLS_H */
