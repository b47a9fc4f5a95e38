/* SPDX-License-Identifier: MIT */
/*
 * manifest.h - what a seed publishes: model, generation, endpoint,
 * registered regions, files as extents, tensors.  docs/manifest.md is
 * the wire format.
 *
 * The seed builds one with the sfs_manifest_add_* calls and encodes it;
 * the replica decodes it.  Decoding treats the text as hostile: sizes are
 * capped, every extent is checked against its region, every tensor
 * against its file, every path is checked, and a failure names the
 * field.  A decoded manifest is immutable and may be read from any
 * number of threads.  The builder calls are not thread safe.
 */
#ifndef SFS_MANIFEST_H
#define SFS_MANIFEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "metadata/identity.h"
#include "metadata/safetensors.h"

/* A manifest's signature (made and checked by control/sign.h). */
#define SFS_SIGN_LEN 64	     /* an Ed25519 signature */
#define SFS_SIGN_ID_LEN 16   /* hex digits of a key id */
#define SFS_MF_SIGNER_MAX 64 /* bytes of a signer's name (a host name) */

#define SFS_MANIFEST_VERSION 4	      /* what this build writes */
#define SFS_MANIFEST_VERSION_MIN 4    /* and the oldest it reads */
#define SFS_MANIFEST_MAX (256u << 20) /* bytes of JSON accepted */
#define SFS_MF_MAX_FILES 1000000
#define SFS_MF_MAX_REGIONS 1000000
#define SFS_MF_MAX_EXTENTS 4000000 /* all files together */
#define SFS_MF_MAX_TENSORS 4000000
#define SFS_MF_NAME_MAX 255 /* one path component */
#define SFS_MF_PATH_MAX 4096
#define SFS_MF_FILE_MAX (1ull << 50)
#define SFS_MF_ADDR_MAX 256
#define SFS_MF_MAX_ENDPOINTS 8	  /* protocols one seed serves at once */
#define SFS_MF_RESERVED ".seedfs" /* never a top-level entry */
#define SFS_MF_LAYOUT_MAX 64
/* Entries left out for their names: how many paths a manifest shows,
 * and bytes of each. */
#define SFS_MF_SKIPPED_SHOWN 4
#define SFS_MF_SKIPPED_PATH_MAX 200

enum sfs_extent_kind {
	SFS_EXT_INLINE = 1,
	SFS_EXT_REGION = 2,
};

struct sfs_extent {
	uint64_t off; /* offset in the file */
	uint64_t len; /* > 0 */
	enum sfs_extent_kind kind;
	uint32_t region; /* REGION: index into regions[] */
	uint64_t roff;	 /* REGION: offset in the region */
	uint8_t *data;	 /* INLINE: @len bytes, owned */
};

/* When a file or directory last changed on the seed, and its permission
 * bits (manifest version 3; absent from version 2). */
struct sfs_mmeta {
	int has;	  /* published: the fields below hold */
	int64_t mtime_ns; /* nanoseconds since the epoch */
	uint32_t mode;	  /* permission bits, 0..07777 */
};

struct sfs_mfile {
	char *path; /* relative, '/'-separated, no "." or ".." */
	uint64_t size;
	struct sfs_mmeta meta;
	/* The whole file's XXH3-64: its digest.  Two sources publish the
	 * same file when path, size and digest are equal (always set in
	 * version 4). */
	int has_xxh3;
	uint64_t xxh3;
	/* XXH3-64 of every 1 << csum_shift bytes of the file, from its
	 * first byte (the last one shorter); csum_shift 0: none
	 * published.  Owned, sfs_csum_count(size, csum_shift) values. */
	uint32_t csum_shift;
	uint64_t *sums;
	/* With --digest sha256: the SHA-256 of the same chunks, 32 bytes
	 * each, or NULL.  Owned. */
	uint8_t *sha256;
	size_t next, cap_ext;
	struct sfs_extent *ext; /* tile [0, size) in order */
};

#define SFS_MF_RAWKEY_MAX 64

/* Where a region is, for one endpoint. */
struct sfs_remote {
	uint64_t raddr;	  /* remote address of byte 0 */
	uint64_t key;	  /* when raw_len == 0 */
	uint32_t raw_len; /* a raw key (FI_MR_RAW) of this many bytes: */
	uint8_t *raw;	  /* owned */
};

#define SFS_MF_CSUM_MIN_SHIFT 12 /* checksum chunks of 4 KiB .. */
#define SFS_MF_CSUM_MAX_SHIFT 30 /* .. 1 GiB */

struct sfs_region {
	uint64_t len;				     /* > 0 */
	struct sfs_remote rem[SFS_MF_MAX_ENDPOINTS]; /* [i]: endpoint i */
};

struct sfs_mtensor {
	char *name;
	char dtype[SFS_DTYPE_MAX];
	uint32_t ndim;
	uint64_t shape[SFS_ST_MAX_DIMS];
	size_t file;	   /* index into files[] */
	uint64_t off, len; /* byte range in that file */
	int has_xxh3;	   /* xxh3 is XXH3-64 of the tensor's bytes */
	uint64_t xxh3;
	/* How the bytes are laid out, [A-Za-z0-9._:+-]{1,63}; "" when the
	 * seed did not say (the model's layout applies). */
	char layout[SFS_MF_LAYOUT_MAX];
};

struct sfs_endpoint {
	char protocol[32];
	char provider[64];
	/* Provider parameters both ends must share ("FI_X=1 FI_Y=2"; ""
	 * when none or not told): a peer with others cannot connect. */
	char compat[64];
	size_t addr_len;
	uint8_t addr[SFS_MF_ADDR_MAX];
};

struct sfs_manifest {
	uint32_t version;
	char *model;
	char *revision;
	uint64_t generation;
	uint64_t instance; /* random per seed run: tells restarts apart */
	/* What the files hold (sfs_manifest_content): equal content means
	 * the same bytes in every file, whoever publishes them. */
	uint64_t content;
	/* A re-seeder's: its bytes are where GET /v1/holdings says, not in
	 * the regions (which it leaves empty of meaning). */
	int holdings;
	/* Thin (SFS_MF_ENC_THIN): no checksums, tensors or signature; only
	 * for a replica that holds its content already. */
	int thin;
	uint64_t grace_seconds; /* a superseded generation stays served */
	/* The seed's keys: a token rotation registers every region again
	 * under new keys, the next epoch (0: not told). */
	uint64_t key_epoch;
	size_t neps; /* 1..SFS_MF_MAX_ENDPOINTS, the seed's preference order */
	struct sfs_endpoint eps[SFS_MF_MAX_ENDPOINTS];
	size_t nregions, cap_regions;
	struct sfs_region *regions;
	size_t ndirs, cap_dirs, cap_dir_meta;
	char **dirs; /* every directory, parents before children */
	struct sfs_mmeta *dir_meta; /* [i]: of dirs[i] */
	struct sfs_mmeta root_meta; /* of the model's own directory */
	/* Entries of the model directory the seed left out because it
	 * cannot publish their names (sfs_path_check: a control character,
	 * a byte that is not UTF-8, too long): how many, and the first
	 * SFS_MF_SKIPPED_SHOWN paths, cut to SFS_MF_SKIPPED_PATH_MAX
	 * bytes (raw: escape them to show them).  A pull fails naming
	 * them.  Signed. */
	uint64_t nskipped;
	size_t nskipped_shown;
	char skipped[SFS_MF_SKIPPED_SHOWN][SFS_MF_SKIPPED_PATH_MAX + 1];
	size_t nfiles, cap_files;
	struct sfs_mfile *files;
	size_t ntensors, cap_tensors;
	struct sfs_mtensor *tensors;
	/* Signed by the seed's Ed25519 key @sig_key (control/sign.h) over
	 * sfs_manifest_signed_digest; has_sig 0: unsigned. */
	int has_sig;
	int64_t signed_at; /* when, ns since the epoch (signed); 0: not told */
	/* Until when the signature holds, ns since the epoch (signed): a
	 * replica refuses it after that (control/sign.h); 0: not told. */
	int64_t valid_until;
	/* Whose clock signed_at is on (signed): the signing seed's host
	 * name, SFS_MF_SIGNER_MAX of [A-Za-z0-9._:-]; "": not told.  And
	 * that seed's run (its instance when it signed; signed, unlike
	 * @instance, which a re-seeder replaces); 0: not told.  Generation
	 * numbers are comparable within one run only. */
	char signer[SFS_MF_SIGNER_MAX + 1];
	uint64_t signer_run;
	char sig_key[SFS_SIGN_ID_LEN + 1];
	uint8_t sig[SFS_SIGN_LEN];
	/* What the model is (docs/identity.md); its model and generation
	 * are always the manifest's.  id_short: its short id. */
	struct sfs_identity id;
	char id_short[SFS_ID_SHORT + 1];
};

/* Builder.  Each returns 0 or -errno (-EINVAL names nothing: the seed
 * validates the finished manifest with sfs_manifest_validate). */
struct sfs_manifest *sfs_manifest_new(const char *model, uint64_t generation);
/* @compat: see struct sfs_endpoint; NULL: none. */
int sfs_manifest_add_endpoint(struct sfs_manifest *m, const char *protocol,
			      const char *provider, const char *compat,
			      const void *addr, size_t len);
/* A region of @len bytes; its remote address and key for endpoint @ep
 * are set with sfs_manifest_set_remote. */
int sfs_manifest_add_region(struct sfs_manifest *m, uint64_t len, uint32_t *id);
void sfs_manifest_set_remote(struct sfs_manifest *m, uint32_t id, size_t ep,
			     uint64_t raddr, uint64_t key);
/* Checksums of file @idx: @n XXH3-64 values of 1 << @shift bytes each
 * from its first byte (copied).  Returns 0, -EINVAL or -ENOMEM. */
int sfs_manifest_set_checksums(struct sfs_manifest *m, size_t idx,
			       uint32_t shift, const uint64_t *sums, size_t n);
/* The SHA-256 of the same @n chunks of file @idx, 32 bytes each
 * (copied), after sfs_manifest_set_checksums.  0, -EINVAL or -ENOMEM. */
int sfs_manifest_set_sha256(struct sfs_manifest *m, size_t idx,
			    const uint8_t *sha256, size_t n);

/*
 * sfs_manifest_signed_digest - the SHA-256 of @m's signed form: its
 * canonical JSON (sorted keys, compact) without what differs between
 * sources of one generation or across key epochs: endpoints, the
 * regions' remotes, instance, key_epoch, holdings, grace_seconds and
 * the signature itself.  What a seed signs and a replica verifies.
 * 0 or -ENOMEM.  Only reads @m.
 */
int sfs_manifest_signed_digest(const struct sfs_manifest *m, uint8_t out[32]);
/* sfs_manifest_signer_ok - 1 if @s is a valid signer name (1 to
 * SFS_MF_SIGNER_MAX of [A-Za-z0-9._:-]), else 0. */
int sfs_manifest_signer_ok(const char *s);

/*
 * sfs_manifest_content - the content digest of @m's files: XXH3-64 over
 * every directory path and every file's path, size and digest, in path
 * order (docs/manifest.md).  Independent of how the bytes are laid out
 * in a seed's memory, of inline limits and of checksum chunk sizes.
 * Returns 0, -EINVAL (a file without a digest) or -ENOMEM.
 */
int sfs_manifest_content(const struct sfs_manifest *m, uint64_t *out);
/* sfs_manifest_layout_ok - 1 if @s is a valid layout name (1..63 of
 * [A-Za-z0-9._:+-]), else 0. */
int sfs_manifest_layout_ok(const char *s);

/* The number of checksum chunks of a region of @len bytes. */
static inline uint64_t sfs_csum_count(uint64_t len, uint32_t shift)
{
	return (len + (1ull << shift) - 1) >> shift;
}

/* The same with a raw key of @len (1..SFS_MF_RAWKEY_MAX) bytes. */
int sfs_manifest_set_remote_raw(struct sfs_manifest *m, uint32_t id, size_t ep,
				uint64_t raddr, const uint8_t *raw, size_t len);
int sfs_manifest_add_dir(struct sfs_manifest *m, const char *path);
/* An entry left out for its name, @path (any bytes): counted, and
 * kept while fewer than SFS_MF_SKIPPED_SHOWN are. */
void sfs_manifest_add_skipped(struct sfs_manifest *m, const char *path);
/* sfs_mmeta_set - @mm holds @mtime_ns and @mode (its permission bits). */
void sfs_mmeta_set(struct sfs_mmeta *mm, int64_t mtime_ns, uint32_t mode);
int sfs_manifest_add_file(struct sfs_manifest *m, const char *path,
			  size_t *idx);
/* Append an extent to file @idx: a copy of @data, or a region range. */
int sfs_manifest_add_inline(struct sfs_manifest *m, size_t idx,
			    const void *data, uint64_t len);
int sfs_manifest_add_remote(struct sfs_manifest *m, size_t idx, uint32_t region,
			    uint64_t roff, uint64_t len);
int sfs_manifest_add_tensor(struct sfs_manifest *m, const char *name,
			    const char *dtype, uint32_t ndim,
			    const uint64_t *shape, size_t file, uint64_t off,
			    uint64_t len);

/* sfs_manifest_identity_id - the identity_id @m publishes: the short id
 * of its identity with the manifest's model and generation.  0 or
 * -ENOMEM. */
int sfs_manifest_identity_id(const struct sfs_manifest *m,
			     char out[SFS_ID_SHORT + 1]);

/*
 * sfs_manifest_encode - JSON text into *out [new, NUL-terminated, free()]
 * and its length into *len.  Returns 0 or -ENOMEM.
 */
int sfs_manifest_encode(const struct sfs_manifest *m, char **out, size_t *len);

/*
 * What sfs_manifest_encode_with leaves out:
 * SFS_MF_ENC_PUBLIC: the endpoints' addresses and the regions' remotes,
 *   what a mount shows (docs/security.md); adds "public": true, and is
 *   no manifest a reader can use;
 * SFS_MF_ENC_NO_REMOTE: every region's remote is written as address 0,
 *   key 0 (a re-seeder's manifest);
 * SFS_MF_ENC_SIGNED: the signed form (sfs_manifest_signed_digest);
 * SFS_MF_ENC_THIN: the files' checksums, the tensors and the signature,
 *   most of a manifest at small chunks; adds "thin": true.  For a
 *   replica that has a manifest of the same content (equal "content")
 *   and wants to know only how this source serves it.
 */
#define SFS_MF_ENC_PUBLIC 0x1
#define SFS_MF_ENC_NO_REMOTE 0x2
#define SFS_MF_ENC_SIGNED 0x4
#define SFS_MF_ENC_THIN 0x8
/* SFS_MF_ENC_BARE: with SFS_MF_ENC_THIN, a re-seeder's (holdings) files
 *   also without extents (their inline bytes with them); asked with
 *   thin=2, which builds before it did not send (they required them). */
#define SFS_MF_ENC_BARE 0x10

/*
 * sfs_manifest_encode_with - sfs_manifest_encode with @flags
 * (SFS_MF_ENC_*).  Only reads @m: safe on a shared decoded manifest, or
 * on a struct copy of one whose endpoints, instance, generation or
 * holdings were changed.  Returns 0 or -ENOMEM.
 */
int sfs_manifest_encode_with(const struct sfs_manifest *m, unsigned flags,
			     char **out, size_t *len);

/*
 * sfs_manifest_decode - parse and validate @len bytes of JSON.
 * *out [new] is freed with sfs_manifest_free.  Returns 0, -EINVAL with
 * one line naming the field in @err, or -ENOMEM.
 */
int sfs_manifest_decode(const char *json, size_t len, struct sfs_manifest **out,
			char *err, size_t errlen);

/*
 * sfs_manifest_validate - every rule decode applies, on a built
 * manifest.  Returns 0 or -EINVAL with one line in @err.
 */
int sfs_manifest_validate(const struct sfs_manifest *m, char *err,
			  size_t errlen);

void sfs_manifest_free(struct sfs_manifest *m);

/*
 * sfs_mfile_find_extent - index of the extent of @f holding byte @off,
 * or -1 when @off >= size.  O(log n).
 */
ssize_t sfs_mfile_find_extent(const struct sfs_mfile *f, uint64_t off);

/*
 * sfs_manifest_endpoint - index of the endpoint serving @protocol, or -1.
 * sfs_manifest_protocols - "tcp, rdma": the protocols served, for
 * messages; returns @buf.
 */
ssize_t sfs_manifest_endpoint(const struct sfs_manifest *m,
			      const char *protocol);
char *sfs_manifest_protocols(const struct sfs_manifest *m, char *buf,
			     size_t len);

/*
 * sfs_path_check - 0 if @path is a relative path of valid components
 * (non-empty, no "." or "..", no NUL, each <= SFS_MF_NAME_MAX, total
 * <= SFS_MF_PATH_MAX) in valid UTF-8 without control characters (C0,
 * DEL, C1, U+2028, U+2029: sfs_unprintable); else -EINVAL with the
 * reason in @why.  Model names and file paths from manifests, model
 * lists, the registry and the seed's own walk all pass here.
 */
int sfs_path_check(const char *path, const char **why);

#endif /* SFS_MANIFEST_H */
