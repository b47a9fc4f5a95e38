/* SPDX-License-Identifier: MIT */
/*
 * seedfs.h - libseedfs: publish tensors that live in memory, as a seed
 * (sfs_pub_*), and read published tensors straight into an engine's
 * memory (sfs_client_*, below).
 *
 * An inference engine holds its weights in memory.  With libseedfs it
 * publishes them without files: replicas mount them (seedfs mount) and
 * see safetensors shards synthesized from the tensors, with
 * model.safetensors.index.json and the small files given (config.json,
 * tokenizer), and read the bytes with one-sided reads straight from the
 * engine's memory.
 *
 *   struct sfs_pub *p;
 *   struct sfs_pub_cfg cfg = {.name = "llama-8b", .listen = "0.0.0.0:7070",
 *                             .token_file = "/etc/seedfs/token"};
 *   sfs_pub_new(&cfg, &p, err, sizeof(err));
 *   sfs_pub_add_file(p, "config.json", cfg_json, cfg_len, err, ...);
 *   sfs_pub_add_tensor(p, "model.embed_tokens.weight", "BF16", 2, shape,
 *                      ptr, bytes, NULL, err, ...);
 *   sfs_pub_commit(p, &generation, err, ...);   now served
 *   ... update tensors in place ...
 *   sfs_pub_commit(p, &generation, err, ...);   generation + 1
 *   sfs_pub_free(p);
 *
 * Memory: tensor memory is borrowed.  It must stay valid while any
 * generation that lists it is served: until the next commit plus the
 * grace period, or sfs_pub_free.  It is registered for remote read only.
 * Updating a tensor in place changes what the served generation holds:
 * replicas verify checksums and refuse such bytes (EIO) rather than mix
 * generations, so commit right after an update, and use grace 0 when
 * you update in place.
 *
 * Errors: functions return 0 or a negative errno and write one line
 * into @err.  Thread safety: one struct sfs_pub is used by one thread at
 * a time; distinct ones are independent.
 */
#ifndef SEEDFS_H
#define SEEDFS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sfs_pub;

struct sfs_pub_cfg {
	const char *name;      /* model name: the directory replicas see */
	const char *listen;    /* control port HOST:PORT; NULL: 0.0.0.0:7070
				 with a token, else 127.0.0.1:7070; port 0
				 picks a free one (sfs_pub_port) */
	const char *protocol;  /* tcp, rdma, efa, shm, auto, or a list;
				 NULL: $SEEDFS_PROTOCOL, else tcp */
	const char *identity;  /* "K=V,..." as seedfs seed --identity; NULL */
	unsigned int grace_s;  /* a superseded generation stays served */
	uint64_t shard_max;    /* tensor bytes per shard; 0: 4 GiB */
	const char *log_level; /* err, warn, info, debug; NULL: warn */
	/* Security (docs/security.md).  Every control route but
	 * /v1/health asks for the token in this file (one line; NULL:
	 * $SEEDFS_TOKEN_FILE, else none: unauthenticated, and a warning
	 * when listening beyond loopback); sfs_pub_commit reads it again.
	 * TLS on the control port with this PEM certificate and key (both,
	 * or neither). */
	const char *token_file;
	const char *tls_cert, *tls_key;
};

/* sfs_pub_new - check @cfg; nothing is served before the first commit.
 * *out [new].  Returns 0, -EINVAL or -ENOMEM. */
int sfs_pub_new(const struct sfs_pub_cfg *cfg, struct sfs_pub **out, char *err,
		size_t errlen);

/*
 * sfs_pub_add_tensor - stage tensor @name (safetensors dtype: F32, BF16,
 * ...; row-major @shape of @ndim <= 16 dims) at @data, @len bytes
 * [borrowed], with its own @layout or NULL (the model's).  A name staged
 * before is replaced.  Shown at the next commit, in the order added.
 * Returns 0, -EINVAL (bad name, dtype, shape, or @len not shape x dtype
 * size) or -ENOMEM.
 */
int sfs_pub_add_tensor(struct sfs_pub *p, const char *name, const char *dtype,
		       uint32_t ndim, const uint64_t *shape, const void *data,
		       uint64_t len, const char *layout, char *err,
		       size_t errlen);

/* sfs_pub_add_file - stage a small file (copied), e.g. config.json; a
 * path staged before is replaced.  Returns 0, -EINVAL (bad path, or a
 * name the shards use) or -ENOMEM. */
int sfs_pub_add_file(struct sfs_pub *p, const char *path, const void *data,
		     size_t len, char *err, size_t errlen);

/*
 * sfs_pub_commit - publish what is staged as the next generation (the
 * first: open the transports and the control port).  The previous
 * generation stays served for the grace period.  *generation: its
 * number.  Returns 0 or -errno; on failure the previous generation goes
 * on being served.
 */
int sfs_pub_commit(struct sfs_pub *p, uint64_t *generation, char *err,
		   size_t errlen);

/* sfs_pub_port - the control port bound, once committed; else 0. */
unsigned int sfs_pub_port(const struct sfs_pub *p);

/* sfs_pub_free - stop serving, deregister, free.  NULL is fine. */
void sfs_pub_free(struct sfs_pub *p);

/*
 * Reading: the engine API (ABI node SEEDFS_0.1; trust_key and
 * require_signed in struct sfs_client_cfg: SEEDFS_0.3).
 *
 *   struct sfs_client_cfg cfg = {.seeds = "10.0.0.1:7070,10.0.0.2:7070"};
 *   struct sfs_client *c;
 *   sfs_client_open(&cfg, "llama-8b", &c, err, sizeof(err));
 *   sfs_client_tensor(c, i, &t);               name, dtype, shape, bytes
 *   sfs_client_reg(c, buf, len, &mr, err, sizeof(err));
 *   struct sfs_client_rd rd = {.file = t.file, .off = t.off,
 *                              .len = t.len, .dst = buf, .mr = mr};
 *   sfs_client_read(c, &rd, 1, err, sizeof(err));   many at once
 *   sfs_client_dereg(mr);
 *   sfs_client_close(c);
 *
 * A client reads one generation of one model (the current one when it
 * opened) from every source of its content: the seeds given, the
 * registry's records, re-seeding replicas they list.  Reads are one-
 * sided transport reads into the caller's registered memory, spread
 * over the sources by their measured throughput and moved off a source
 * that fails or stalls (the mount's cache does the same, cache.h).
 * Each checksum block (the manifest's, 1 MiB unless the seed chose
 * otherwise) a read covers whole is verified in place; the parts of
 * blocks at a read's two ends come through a small cache and are
 * copied.  So read whole tensors, or better a whole file's data at
 * once, and almost every byte lands where it belongs with no copy.
 * Every wait is bounded by cfg.timeout_ms of no progress.  All
 * functions are thread safe: many threads may read at once.
 */
struct sfs_client;
struct sfs_client_mr;

struct sfs_client_cfg {
	const char *seeds;	 /* "[https://]HOST:PORT[,...]", or NULL */
	const char *registry;	 /* "etcd://HOST:PORT[,...][/PREFIX]", or NULL
				 (one of the two is needed) */
	const char *registry_ca; /* etcds://: its CA file, or NULL */
	const char *registry_auth_file; /* USER:PASSWORD file, or NULL */
	const char *protocol;	 /* NULL: $SEEDFS_PROTOCOL, else the seed's
				 first protocol this host can use */
	unsigned int timeout_ms; /* no progress this long: give up; 0: 10 s */
	uint64_t cache_size;	 /* bytes for reads' ends; 0: 64 MiB */
	int no_verify;		 /* take bytes unchecked (measuring only) */
	const char *log_level;	 /* err, warn, info, debug; NULL: warn */
	/* Security (docs/security.md): the seeds' token in this file (NULL:
	 * $SEEDFS_TOKEN_FILE, else none); TLS to their control ports when
	 * seeds are https://, or verified against tls_ca (a PEM CA file),
	 * or held to tls_pin (sha256//BASE64 of the public key). */
	const char *token_file;
	const char *tls_ca, *tls_pin;
	/* Fields from ABI node SEEDFS_0.3 on (appended: a program built
	 * against an older seedfs.h reaches sfs_client_open@SEEDFS_0.1,
	 * which reads none of them).
	 * Manifests must be signed by a key in trust_key (PEM Ed25519
	 * public keys, `openssl pkey -in KEY -pubout`; NULL:
	 * $SEEDFS_TRUST_KEY_FILE, else none: unsigned manifests are
	 * taken), every chunk then checked with its SHA-256, as a mount's
	 * --trust-key.  require_signed: refuse to open when no trust key is
	 * given either way, before any source is asked (fail closed: a
	 * deployment that lost its key file setting stops, it does not
	 * read unsigned manifests). */
	const char *trust_key;
	int require_signed;
};

/*
 * sfs_client_open - ask the seeds (and the registry) what they publish,
 * check the manifest of @model, connect.  *out [new], freed with
 * sfs_client_close.  Returns 0, or -errno with one line in @err: no
 * source answers, no such model (the line names what is published), a
 * bad manifest, a protocol this host cannot use; -EINVAL when
 * require_signed finds no trust key, or a trust key goes with
 * no_verify; a trust key file that cannot be read or holds no key; a
 * manifest not signed by one of its keys.  (ABI node SEEDFS_0.3: the
 * cfg with trust_key and require_signed; SEEDFS_0.1's reads the fields
 * before them only.)
 */
int sfs_client_open(const struct sfs_client_cfg *cfg, const char *model,
		    struct sfs_client **out, char *err, size_t errlen);

/* sfs_client_close - end every read (after any in flight ends or is
 * cancelled), deregister what is left, free.  A read that gave up and
 * whose source still has not answered cannot be ended: its connection
 * and registration are kept, with one log line (see
 * sfs_client_dereg).  NULL is fine. */
void sfs_client_close(struct sfs_client *c);

struct sfs_client_info {
	const char *model;    /* [borrowed from the client] */
	uint64_t generation;  /* the generation read */
	const char *identity; /* its short identity [borrowed] */
	const char *protocol; /* the protocol read through [borrowed] */
	size_t nfiles, ntensors;
	uint64_t bytes;	       /* of every file */
	uint64_t bytes_pulled; /* from the sources so far, verified */
};
void sfs_client_info(struct sfs_client *c, struct sfs_client_info *out);

/*
 * sfs_client_status - the same text a mount shows in .seedfs/status
 * (every source: state, bytes, rate, errors; the cache; the model)
 * into @buf, cut at @len - 1 bytes and terminated; *needed (if not
 * NULL) its whole length.  Returns 0 or -ENOMEM.
 */
int sfs_client_status(struct sfs_client *c, char *buf, size_t len,
		      size_t *needed);

struct sfs_client_file {
	const char *path; /* relative, '/'-separated [borrowed] */
	uint64_t size;
};

struct sfs_client_tensor {
	const char *name;  /* [borrowed] */
	const char *dtype; /* safetensors': F32, BF16, F8_E4M3, ... */
	uint32_t ndim;
	uint64_t shape[16];
	size_t file;	    /* the file its bytes are in */
	uint64_t off, len;  /* its bytes in that file */
	const char *layout; /* its layout (post-processing), "" if none */
};

/* sfs_client_file, sfs_client_tensor - entry @i (< nfiles, ntensors):
 * 0 or -ERANGE.  sfs_client_find - the tensor named @name: 0 and *i, or
 * -ENOENT.  What they point to lives as long as the client. */
int sfs_client_file(struct sfs_client *c, size_t i,
		    struct sfs_client_file *out);
int sfs_client_tensor(struct sfs_client *c, size_t i,
		      struct sfs_client_tensor *out);
int sfs_client_find(struct sfs_client *c, const char *name, size_t *i);

/*
 * sfs_client_reg - register [@buf, @buf+@len) as a destination of
 * reads: host memory, or CUDA device memory (cudaMalloc's, in a build
 * with -DSEEDFS_CUDA=ON and a CUDA driver).  Reads into device memory
 * are pulled into a page-locked stage on the host (two parts of 16 MiB
 * per device, made at the first registration on that device), verified
 * there against the checksums, and only then copied to the device,
 * while the next part is pulled; they have ended, copies included, when
 * sfs_client_read returns.  *out [new].  Returns 0 or -errno with one
 * line in @err.
 * sfs_client_dereg - done with it.  Returns 0, or -EBUSY when a read
 * that gave up (-ETIMEDOUT) may still be written into it by the
 * transport: keep the memory valid until sfs_client_close then, and
 * for the life of the process if sfs_client_close logs reads "left
 * open" (their source never answered: the transport keeps the
 * registration and may still write into it).  NULL is fine.
 */
int sfs_client_reg(struct sfs_client *c, void *buf, size_t len,
		   struct sfs_client_mr **out, char *err, size_t errlen);
int sfs_client_dereg(struct sfs_client_mr *mr);

/* One read: bytes [off, off+len) of file @file into @dst, which lies
 * inside @mr's memory. */
struct sfs_client_rd {
	size_t file;
	uint64_t off, len;
	void *dst;
	struct sfs_client_mr *mr;
	int status; /* out: 0 or -errno */
};

/*
 * sfs_client_read - every read of @rds, at once (issue many: they are
 * kept in flight together).  Returns 0 when all hold their bytes,
 * verified; else the first error, each read's in ->status, and one line
 * in @err naming the first that failed: -EINVAL (outside its file or
 * its registration), -ESTALE (the generation is no longer served: open
 * again), -ETIMEDOUT (no source made progress for the timeout),
 * -EBADMSG (no source gave bytes that match the checksums), the
 * sources' error (-EIO, -ECONNREFUSED...), or for device memory -EIO
 * when the CUDA driver refused a copy (its error in @err).  Host reads
 * of a batch are made first, then reads into device memory.
 */
int sfs_client_read(struct sfs_client *c, struct sfs_client_rd *rds, size_t n,
		    char *err, size_t errlen);

/*
 * sfs_client_cuda_devices - how many CUDA devices reads can land in
 * (> 0), or -EOPNOTSUPP (this libseedfs was built without CUDA) or
 * -ENODEV (no CUDA driver, or no device), with one line in @err saying
 * which.  No client needed.  Thread safe.  (ABI node SEEDFS_0.2.)
 */
int sfs_client_cuda_devices(char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* SEEDFS_H */
