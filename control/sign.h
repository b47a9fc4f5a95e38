/* SPDX-License-Identifier: MIT */
/*
 * sign.h - signed manifests (docs/security.md, "verified" trust mode).
 *
 * A seed holds an Ed25519 private key (--sign-key FILE, PEM, e.g. from
 * `openssl genpkey -algorithm ed25519`) and signs each manifest it
 * publishes; replicas pin the public key (--trust-key FILE, PEM "PUBLIC
 * KEY" blocks, one or more: `openssl pkey -in KEY -pubout`) and refuse a
 * manifest that is not signed by one of them.  A key is named by its id:
 * the first 16 hex digits of the SHA-256 of its DER SubjectPublicKeyInfo.
 *
 * What is signed is the SHA-256 of the manifest's signed form
 * (sfs_manifest_signed_digest): everything a replica shows and checks
 * bytes against, nothing that differs between a seed and a re-seeder of
 * the same generation (addresses, keys, runs).
 *
 * Thread safety: a loaded key or trust set is read-only after loading;
 * every call may run in any number of threads at once.  GnuTLS.
 */
#ifndef SFS_SIGN_H
#define SFS_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "metadata/manifest.h" /* SFS_SIGN_LEN, SFS_SIGN_ID_LEN */

#define SFS_SIGN_KEYS_MAX 16
/* How long a seed's signature holds by default (--sign-validity); it
 * signs every generation it serves again at half of it. */
#define SFS_SIGN_VALIDITY_S (24 * 3600)
#define SFS_SIGN_VALIDITY_MIN_S 10
#define SFS_SIGN_VALIDITY_MAX_S (366 * 24 * 3600)
/* A replica's clock and a seed's may differ this much: a signature is
 * taken this long after it lapsed, and this long before it was made. */
#define SFS_SIGN_SKEW_S 300

struct sfs_sign_key;
struct sfs_trust;

/*
 * sfs_sign_key_load - the Ed25519 private key in @path.  The file must
 * be a regular file that group and others cannot read.  *out [new,
 * sfs_sign_key_free].  0, or -errno with one line in @err naming the
 * file and what is wrong.
 */
int sfs_sign_key_load(const char *path, struct sfs_sign_key **out, char *err,
		      size_t errlen);
void sfs_sign_key_free(struct sfs_sign_key *k);
/* Its id, SFS_SIGN_ID_LEN hex digits [borrowed]. */
const char *sfs_sign_key_id(const struct sfs_sign_key *k);

/* sfs_sign - the signature of the @len bytes at @msg into @sig.  0 or
 * -EIO. */
int sfs_sign(const struct sfs_sign_key *k, const void *msg, size_t len,
	     uint8_t sig[SFS_SIGN_LEN]);

/*
 * sfs_trust_load - the Ed25519 public keys in @path (1 to
 * SFS_SIGN_KEYS_MAX PEM blocks).  *out [new, sfs_trust_free].  0, or
 * -errno with one line in @err.
 */
int sfs_trust_load(const char *path, struct sfs_trust **out, char *err,
		   size_t errlen);
void sfs_trust_free(struct sfs_trust *t);
/* The file it was read from [borrowed]. */
const char *sfs_trust_path(const struct sfs_trust *t);

/*
 * sfs_trust_verify - 0 when @sig is a signature of @msg by the trusted
 * key @id; -ENOKEY when no trusted key has that id, -EBADMSG when the
 * signature does not verify.
 */
int sfs_trust_verify(const struct sfs_trust *t, const char *id, const void *msg,
		     size_t len, const uint8_t sig[SFS_SIGN_LEN]);

/*
 * sfs_sign_manifest - sign @m with @k as made at @now_ns (ns since the
 * epoch), for @validity_s seconds: sets its signed_at, valid_until,
 * signer (@signer, sfs_manifest_signer_ok), signer_run (@run, not 0)
 * and the signature over its signed form.  0, -EINVAL (a bad signer or
 * run), -ENOMEM or -EIO.  Not thread safe on one @m.
 */
int sfs_sign_manifest(const struct sfs_sign_key *k, struct sfs_manifest *m,
		      const char *signer, uint64_t run, int64_t now_ns,
		      uint32_t validity_s);

/*
 * sfs_sign_signer - this host's name as a signer (its host name, bytes
 * outside [A-Za-z0-9._:-] as '-', at most SFS_MF_SIGNER_MAX; "seed"
 * when it has none) into @out.
 */
void sfs_sign_signer(char out[SFS_MF_SIGNER_MAX + 1]);

/*
 * sfs_sign_current - whether @m's signature (verified already) holds at
 * @now_ns: it says until when (valid_until), by whom and in which run
 * (signer, signer_run) and when it was made (signed_at); it has not
 * lapsed, nor was it made in the future, each by more than
 * SFS_SIGN_SKEW_S.  0, or with one line in @why: -EINVAL (a field
 * missing: a seed older than this replica), -EKEYEXPIRED ("manifest
 * signature expired 7200 s ago (valid until ...)"), -ERANGE (made in
 * the future).  Pure.
 */
int sfs_sign_current(const struct sfs_manifest *m, int64_t now_ns, char *why,
		     size_t len);

/* sfs_sign_now - the time signatures are made and checked at: ns since
 * the epoch (CLOCK_REALTIME). */
int64_t sfs_sign_now(void);

#endif /* SFS_SIGN_H */
