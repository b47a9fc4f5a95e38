/* SPDX-License-Identifier: MIT */
/* tls.c - certificates, keys and pins for the control port (tls.h). */
#include "control/tls.h"

#include "control/auth.h"

#include "common/log.h"
#include "common/secmem.h"
#include "common/util.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct sfs_tls_pair {
	char *cert;
	char *key; /* on pages core dumps leave out (common/secmem.h) */
	size_t key_len;
	char pin[SFS_TLS_PIN_MAX];
};

int sfs_tls_curl_limit(void *curl)
{
	const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
	const char *ssl = v && v->ssl_version ? v->ssl_version : "";

	if (curl_easy_setopt(curl, CURLOPT_SSLVERSION,
			     (long)(CURL_SSLVERSION_TLSv1_2 |
				    CURL_SSLVERSION_MAX_DEFAULT)))
		return -EINVAL;
	/* The names are the backend's: "OpenSSL/3.0.15", "GnuTLS/3.7.9". */
	if (!strncmp(ssl, "OpenSSL/", 8)) {
		curl_easy_setopt(curl, CURLOPT_SSL_CIPHER_LIST,
				 SFS_TLS_OPENSSL_CIPHERS);
		curl_easy_setopt(curl, CURLOPT_TLS13_CIPHERS,
				 SFS_TLS_OPENSSL_TLS13);
	} else if (!strncmp(ssl, "GnuTLS/", 7)) {
		curl_easy_setopt(curl, CURLOPT_SSL_CIPHER_LIST,
				 SFS_TLS_PRIORITIES);
	}
	return 0;
}

/* @digest (32 bytes) as "sha256//BASE64". */
static int pin_text(const uint8_t *digest, char *out, size_t len)
{
	char b64[48]; /* sfs_b64_enc_len(32) is 45 */
	sfs_b64_encode(digest, 32, b64);
	int n = snprintf(out, len, "sha256//%s", b64);
	return n < 0 || (size_t)n >= len ? -ENOBUFS : 0;
}

int sfs_tls_parse_pin(const char *text, char *out, size_t len, char *err,
		      size_t errlen)
{
	uint8_t d[33]; /* 44 base64 characters decode into up to 33 */
	size_t n = 0;

	if (!text || !*text) {
		snprintf(err, errlen, "--tls-pin is empty");
		return -EINVAL;
	}
	if (!strncmp(text, "sha256//", 8)) {
		size_t l = strnlen(text + 8, 64), got = 0;
		int ok = l == 44 && !sfs_b64_decode(text + 8, l, d, &got) &&
			 got == 32;
		if (!ok) {
			snprintf(err, errlen,
				 "--tls-pin: after sha256// comes the base64 "
				 "of 32 bytes (44 characters)");
			return -EINVAL;
		}
	} else {
		const char *p = text;
		if (!strncasecmp(p, "sha256:", 7))
			p += 7;
		for (; *p; p++) {
			if (*p == ':')
				continue;
			int hi = sfs_hex_val(p[0]);
			int lo = hi < 0 || !p[1] ? -1 : sfs_hex_val(p[1]);
			if (lo < 0 || n == 32) {
				snprintf(err, errlen,
					 "--tls-pin: not sha256//BASE64 nor 64 "
					 "hex digits (the SHA-256 of the "
					 "certificate's public key)");
				return -EINVAL;
			}
			d[n++] = (uint8_t)(hi << 4 | lo);
			p++;
		}
		if (n != 32) {
			snprintf(err, errlen,
				 "--tls-pin: %zu bytes of hex; a SHA-256 has "
				 "32",
				 n);
			return -EINVAL;
		}
	}
	if (pin_text(d, out, len)) {
		snprintf(err, errlen, "--tls-pin: no room");
		return -ENOBUFS;
	}
	return 0;
}

/* The whole of a small file, NUL-terminated, into *out [new]; a
 * secret (a key) opened with sfs_auth_open_secret, a trust anchor with
 * sfs_auth_open_anchor. */
int sfs_tls_slurp(const char *opt, const char *path, enum sfs_tls_file kind,
		  char **out, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	int fd, rc = 0;
	char *b = NULL;

	if (kind == SFS_TLS_FILE_SECRET) {
		if ((fd = sfs_auth_open_secret(path, opt, &st, err, errlen)) <
		    0)
			return fd;
	} else if (kind == SFS_TLS_FILE_ANCHOR) {
		if ((fd = sfs_auth_open_anchor(path, opt, &st, err, errlen)) <
		    0)
			return fd;
	} else if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY |
					    O_NONBLOCK)) < 0 ||
		   fstat(fd, &st)) {
		rc = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > SFS_TLS_FILE_MAX) {
		snprintf(err, errlen,
			 "%s %s: not a regular file of at most %u "
			 "bytes",
			 opt, path, SFS_TLS_FILE_MAX);
		rc = -EINVAL;
		goto out_quiet;
	}
	if (!(b = malloc((size_t)st.st_size + 1))) {
		rc = -ENOMEM;
		goto out;
	}
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t k = read(fd, b + got, (size_t)st.st_size - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = k < 0 ? -errno : -EIO;
			goto out;
		}
		got += (size_t)k;
	}
	b[got] = '\0';
	*out = b;
	*len = got;
	b = NULL;
out:
	if (rc)
		snprintf(err, errlen, "%s %s: %s", opt, path, strerror(-rc));
out_quiet:
	if (b) {
		explicit_bzero(b, (size_t)st.st_size);
		free(b);
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Check @p's key against its certificate; its pin; its dates. */
static int check_pair(struct sfs_tls_pair *p, const char *cert, const char *key,
		      size_t cert_len, char *err, size_t errlen)
{
	gnutls_certificate_credentials_t cred = NULL;
	gnutls_x509_crt_t crt = NULL;
	gnutls_datum_t c = {.data = (unsigned char *)p->cert,
			    .size = (unsigned int)cert_len},
		       k = {.data = (unsigned char *)p->key,
			    .size = (unsigned int)p->key_len};
	uint8_t id[64];
	size_t idlen = sizeof(id);
	int g, rc = -EINVAL;

	if (gnutls_x509_crt_init(&crt) ||
	    gnutls_certificate_allocate_credentials(&cred)) {
		snprintf(err, errlen, "--tls-cert: out of memory");
		rc = -ENOMEM;
		goto out;
	}
	if ((g = gnutls_x509_crt_import(crt, &c, GNUTLS_X509_FMT_PEM))) {
		snprintf(err, errlen,
			 "--tls-cert %s: not a PEM certificate: %s", cert,
			 gnutls_strerror(g));
		goto out;
	}
	g = gnutls_certificate_set_x509_key_mem2(cred, &c, &k,
						 GNUTLS_X509_FMT_PEM, NULL, 0);
	if (g < 0) {
		snprintf(err, errlen, "--tls-key %s: %s (with --tls-cert %s)",
			 key,
			 g == GNUTLS_E_CERTIFICATE_KEY_MISMATCH
				 ? "not the key of that certificate"
				 : gnutls_strerror(g),
			 cert);
		goto out;
	}
	if ((g = gnutls_x509_crt_get_key_id(crt, GNUTLS_KEYID_USE_SHA256, id,
					    &idlen)) ||
	    idlen != 32 || pin_text(id, p->pin, sizeof(p->pin))) {
		snprintf(err, errlen, "--tls-cert %s: its public key: %s", cert,
			 g ? gnutls_strerror(g) : "not SHA-256");
		goto out;
	}
	time_t now = time(NULL), nb = gnutls_x509_crt_get_activation_time(crt),
	       na = gnutls_x509_crt_get_expiration_time(crt);
	if (na != (time_t)-1 && na < now)
		SFS_LOG(SFS_WARN, "tls",
			"--tls-cert %s expired %lld s ago: replicas will "
			"refuse it",
			cert, (long long)(now - na));
	else if (nb != (time_t)-1 && nb > now)
		SFS_LOG(SFS_WARN, "tls",
			"--tls-cert %s is valid only in %lld s: replicas will "
			"refuse it until then",
			cert, (long long)(nb - now));
	rc = 0;
out:
	gnutls_x509_crt_deinit(crt);
	gnutls_certificate_free_credentials(cred);
	return rc;
}

int sfs_tls_pair_load(const char *cert, const char *key,
		      struct sfs_tls_pair **out, char *err, size_t errlen)
{
	struct sfs_tls_pair *p = calloc(1, sizeof(*p));
	char *heap = NULL;
	size_t cert_len;
	int rc;

	if (!p) {
		snprintf(err, errlen, "--tls-cert: out of memory");
		return -ENOMEM;
	}
	if ((rc = sfs_tls_slurp("--tls-cert", cert, SFS_TLS_FILE_PUBLIC,
				&p->cert, &cert_len, err, errlen)) ||
	    (rc = sfs_tls_slurp("--tls-key", key, SFS_TLS_FILE_SECRET, &heap,
				&p->key_len, err, errlen)))
		goto err;
	/* The key moves to pages of its own; the heap copy is wiped. */
	if (!(p->key = sfs_secmem_alloc(p->key_len + 1))) {
		snprintf(err, errlen, "--tls-key %s: no memory for it", key);
		rc = -ENOMEM;
		goto err;
	}
	memcpy(p->key, heap, p->key_len + 1);
	explicit_bzero(heap, p->key_len);
	free(heap);
	heap = NULL;
	if ((rc = check_pair(p, cert, key, cert_len, err, errlen)))
		goto err;
	*out = p;
	return 0;

err:
	if (heap) {
		explicit_bzero(heap, p->key_len);
		free(heap);
	}
	sfs_tls_pair_free(p);
	return rc;
}

void sfs_tls_pair_free(struct sfs_tls_pair *p)
{
	if (!p)
		return;
	sfs_secmem_free(p->key, p->key_len + 1); /* wiped */
	free(p->cert);
	free(p);
}

const char *sfs_tls_pair_cert(const struct sfs_tls_pair *p)
{
	return p->cert;
}

const char *sfs_tls_pair_key(const struct sfs_tls_pair *p)
{
	return p->key;
}

const char *sfs_tls_pair_pin(const struct sfs_tls_pair *p)
{
	return p->pin;
}
