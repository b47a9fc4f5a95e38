/* SPDX-License-Identifier: MIT */
/* sign.c - Ed25519 keys and signatures for manifests, on GnuTLS. */
#include "sign.h"

#include "common/util.h"
#include "control/tls.h"

#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct sfs_sign_key {
	gnutls_privkey_t priv;
	char id[SFS_SIGN_ID_LEN + 1];
};

struct sfs_trust {
	char *path;
	size_t n;
	gnutls_pubkey_t pub[SFS_SIGN_KEYS_MAX];
	char id[SFS_SIGN_KEYS_MAX][SFS_SIGN_ID_LEN + 1];
};

/* The id of @pub: 16 hex digits of the SHA-256 of its SPKI.  0 or -1. */
static int key_id(gnutls_pubkey_t pub, char out[SFS_SIGN_ID_LEN + 1])
{
	unsigned char d[32];
	size_t n = sizeof(d);
	if (gnutls_pubkey_get_key_id(pub, GNUTLS_KEYID_USE_SHA256, d, &n) ||
	    n < SFS_SIGN_ID_LEN / 2)
		return -1;
	sfs_hex_encode(d, SFS_SIGN_ID_LEN / 2, out);
	return 0;
}

static int is_ed25519(gnutls_pubkey_t pub)
{
	return gnutls_pubkey_get_pk_algorithm(pub, NULL) ==
	       GNUTLS_PK_EDDSA_ED25519;
}

int sfs_sign_key_load(const char *path, struct sfs_sign_key **out, char *err,
		      size_t errlen)
{
	struct sfs_sign_key *k = calloc(1, sizeof(*k));
	gnutls_pubkey_t pub = NULL;
	char *pem = NULL;
	size_t len = 0;
	int rc;

	if (!k)
		return -ENOMEM;
	if ((rc = sfs_tls_slurp("--sign-key", path, SFS_TLS_FILE_SECRET, &pem,
				&len, err, errlen)))
		goto err;
	gnutls_datum_t d = {.data = (unsigned char *)pem,
			    .size = (unsigned int)len};
	if (gnutls_privkey_init(&k->priv) ||
	    gnutls_privkey_import_x509_raw(k->priv, &d, GNUTLS_X509_FMT_PEM,
					   NULL, 0) ||
	    gnutls_pubkey_init(&pub) ||
	    gnutls_pubkey_import_privkey(pub, k->priv, 0, 0)) {
		snprintf(err, errlen,
			 "--sign-key %s: not a PEM private key (make one with "
			 "openssl genpkey -algorithm ed25519)",
			 path);
		rc = -EINVAL;
		goto err;
	}
	if (!is_ed25519(pub) || key_id(pub, k->id)) {
		snprintf(err, errlen,
			 "--sign-key %s: not an Ed25519 key (openssl genpkey "
			 "-algorithm ed25519)",
			 path);
		rc = -EINVAL;
		goto err;
	}
	gnutls_pubkey_deinit(pub);
	explicit_bzero(pem, len);
	free(pem);
	*out = k;
	return 0;
err:
	if (pub)
		gnutls_pubkey_deinit(pub);
	if (pem) {
		explicit_bzero(pem, len);
		free(pem);
	}
	sfs_sign_key_free(k);
	return rc;
}

void sfs_sign_key_free(struct sfs_sign_key *k)
{
	if (!k)
		return;
	if (k->priv)
		gnutls_privkey_deinit(k->priv);
	free(k);
}

const char *sfs_sign_key_id(const struct sfs_sign_key *k)
{
	return k->id;
}

int sfs_sign(const struct sfs_sign_key *k, const void *msg, size_t len,
	     uint8_t sig[SFS_SIGN_LEN])
{
	gnutls_datum_t d = {.data = (unsigned char *)msg,
			    .size = (unsigned int)len},
		       s = {0};
	int rc = gnutls_privkey_sign_data2(k->priv, GNUTLS_SIGN_EDDSA_ED25519,
					   0, &d, &s);
	if (!rc && s.size == SFS_SIGN_LEN)
		memcpy(sig, s.data, SFS_SIGN_LEN);
	else
		rc = -1;
	gnutls_free(s.data);
	return rc ? -EIO : 0;
}

int sfs_trust_load(const char *path, struct sfs_trust **out, char *err,
		   size_t errlen)
{
	static const char begin[] = "-----BEGIN PUBLIC KEY-----",
			  end[] = "-----END PUBLIC KEY-----";
	struct sfs_trust *t = calloc(1, sizeof(*t));
	char *pem = NULL;
	size_t len = 0;
	int rc;

	if (!t || !(t->path = strdup(path))) {
		free(t);
		return -ENOMEM;
	}
	if ((rc = sfs_tls_slurp("--trust-key", path, SFS_TLS_FILE_ANCHOR, &pem,
				&len, err, errlen)))
		goto err;
	for (char *p = strstr(pem, begin); p; p = strstr(p, begin)) {
		char *e = strstr(p, end);
		if (!e)
			break;
		e += sizeof(end) - 1;
		if (t->n == SFS_SIGN_KEYS_MAX) {
			snprintf(err, errlen,
				 "--trust-key %s: more than %d keys", path,
				 SFS_SIGN_KEYS_MAX);
			rc = -E2BIG;
			goto err;
		}
		gnutls_datum_t d = {.data = (unsigned char *)p,
				    .size = (unsigned int)(e - p)};
		gnutls_pubkey_t pub;
		if (gnutls_pubkey_init(&pub))
			goto nomem;
		t->pub[t->n] = pub;
		if (gnutls_pubkey_import(pub, &d, GNUTLS_X509_FMT_PEM) ||
		    !is_ed25519(pub) || key_id(pub, t->id[t->n])) {
			snprintf(err, errlen,
				 "--trust-key %s: key %zu is not an Ed25519 "
				 "public key (openssl pkey -in KEY -pubout)",
				 path, t->n + 1);
			t->n++;
			rc = -EINVAL;
			goto err;
		}
		t->n++;
		p = e;
	}
	if (!t->n) {
		snprintf(err, errlen,
			 "--trust-key %s: no PEM public key (-----BEGIN PUBLIC "
			 "KEY-----) in it",
			 path);
		rc = -EINVAL;
		goto err;
	}
	free(pem);
	*out = t;
	return 0;
nomem:
	snprintf(err, errlen, "--trust-key %s: out of memory", path);
	rc = -ENOMEM;
err:
	free(pem);
	sfs_trust_free(t);
	return rc;
}

void sfs_trust_free(struct sfs_trust *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		gnutls_pubkey_deinit(t->pub[i]);
	free(t->path);
	free(t);
}

const char *sfs_trust_path(const struct sfs_trust *t)
{
	return t->path;
}

int sfs_trust_verify(const struct sfs_trust *t, const char *id, const void *msg,
		     size_t len, const uint8_t sig[SFS_SIGN_LEN])
{
	for (size_t i = 0; i < t->n; i++) {
		if (strcmp(t->id[i], id))
			continue;
		gnutls_datum_t d = {.data = (unsigned char *)msg,
				    .size = (unsigned int)len},
			       s = {.data = (unsigned char *)sig,
				    .size = SFS_SIGN_LEN};
		return gnutls_pubkey_verify_data2(t->pub[i],
						  GNUTLS_SIGN_EDDSA_ED25519, 0,
						  &d, &s) < 0
			       ? -EBADMSG
			       : 0;
	}
	return -ENOKEY;
}

int64_t sfs_sign_now(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

void sfs_sign_signer(char out[SFS_MF_SIGNER_MAX + 1])
{
	char host[256] = "";
	size_t n = 0;
	if (gethostname(host, sizeof(host) - 1))
		host[0] = '\0';
	for (const char *c = host; *c && n < SFS_MF_SIGNER_MAX; c++)
		out[n++] =
			strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrs"
			       "tuvwxyz0123456789._:-",
			       *c)
				? *c
				: '-';
	out[n] = '\0';
	if (!n)
		snprintf(out, SFS_MF_SIGNER_MAX + 1, "seed");
}

int sfs_sign_manifest(const struct sfs_sign_key *k, struct sfs_manifest *m,
		      const char *signer, uint64_t run, int64_t now_ns,
		      uint32_t validity_s)
{
	uint8_t d[32];
	int rc;
	if (!sfs_manifest_signer_ok(signer) || !run || now_ns <= 0)
		return -EINVAL;
	snprintf(m->signer, sizeof(m->signer), "%s", signer);
	m->signer_run = run;
	m->signed_at = now_ns;
	m->valid_until = now_ns + (int64_t)validity_s * 1000000000;
	if ((rc = sfs_manifest_signed_digest(m, d)) ||
	    (rc = sfs_sign(k, d, sizeof(d), m->sig)))
		return rc;
	snprintf(m->sig_key, sizeof(m->sig_key), "%s", k->id);
	m->has_sig = 1;
	return 0;
}

/* @ns since the epoch as "2026-12-05T01:00:00Z" into @buf. */
static const char *utc(int64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	if (!gmtime_r(&t, &tm) ||
	    !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, len, "%lld s after the epoch", (long long)t);
	return buf;
}

int sfs_sign_current(const struct sfs_manifest *m, int64_t now_ns, char *why,
		     size_t len)
{
	const int64_t skew = (int64_t)SFS_SIGN_SKEW_S * 1000000000;
	char when[64];
	if (!m->valid_until || !m->signed_at || !m->signer[0] ||
	    !m->signer_run) {
		snprintf(why, len,
			 "manifest signed without valid_until, signed_at, "
			 "signer or signer_run: a seed older than this "
			 "replica, whose signatures never lapse; upgrade it");
		return -EINVAL;
	}
	if (now_ns > m->valid_until && now_ns - m->valid_until > skew) {
		snprintf(why, len,
			 "manifest signature expired %.0f s ago (valid until "
			 "%s, signed by %s; clocks may differ by %d s): an "
			 "old manifest played back, or a seed that no longer "
			 "signs again",
			 (double)(now_ns - m->valid_until) / 1e9,
			 utc(m->valid_until, when, sizeof(when)), m->signer,
			 SFS_SIGN_SKEW_S);
		return -EKEYEXPIRED;
	}
	if (m->signed_at > now_ns && m->signed_at - now_ns > skew) {
		snprintf(why, len,
			 "manifest signed %.0f s in the future (at %s by %s's "
			 "clock; clocks may differ by %d s)",
			 (double)(m->signed_at - now_ns) / 1e9,
			 utc(m->signed_at, when, sizeof(when)), m->signer,
			 SFS_SIGN_SKEW_S);
		return -ERANGE;
	}
	return 0;
}
