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
	if ((rc = sfs_tls_slurp("--sign-key", path, 1, &pem, &len, err,
				errlen)))
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
	if ((rc = sfs_tls_slurp("--trust-key", path, 0, &pem, &len, err,
				errlen)))
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
