/* SPDX-License-Identifier: MIT */
/*
 * seed.h - publish a model directory: validate it, map and register its
 * files read-only with the transport, build and encode the manifest,
 * serve it on the control port.
 */
#ifndef SFS_SEED_H
#define SFS_SEED_H

#include <stddef.h>
#include <stdint.h>

struct sfs_seed;
struct seed_mem;
struct sfs_sign_key;

/* A further model of the same seed: its name (NULL: the directory's
 * basename) and directory [borrowed]. */
struct sfs_seed_dir {
	const char *name;
	const char *dir;
};

struct sfs_seed_cfg {
	const char *model_dir;
	/* Instead of a directory: tensors and files in memory (libseedfs),
	 * read again at every republish. [borrowed] */
	const struct seed_mem *mem;
	const char *name;	 /* model name; NULL: basename of model_dir */
	const char *protocol;	 /* transport registry name */
	const char *fabric_node; /* local address for the fabric, or NULL */
	unsigned int timeout_ms;
	uint64_t inline_max; /* files up to this size go inline */
	uint64_t mr_max;     /* register files in pieces of at most this */
	uint32_t csum_shift; /* XXH3-64 per 1 << shift bytes; 0: none */
	int digest_sha256;   /* and SHA-256 of the same chunks */
	/* Sign every manifest with this key (--sign-key), or NULL.
	 * [borrowed, outlives the seed] */
	const struct sfs_sign_key *sign_key;
	/* How long a signature holds (--sign-validity); every generation
	 * served is signed again at half of it (sfs_seed_reap).  0:
	 * SFS_SIGN_VALIDITY_S. */
	uint32_t sign_validity_s;
	/* Tests only: sign as if the clock read this many seconds later
	 * (negative: earlier), to make a signature that lapsed. */
	int64_t test_sign_clock_s;
	uint32_t grace_s; /* a superseded generation stays served */
	/* With this many re-seeders live or more, each that asks is given
	 * its place in the fleet's lanes (sfs_seed_sources); 0: the
	 * default, SFS_SEED_FLEET_FROM. */
	uint32_t fleet_from;
	/* Live announcements listed per caller address
	 * (--announce-per-host); 0: SFS_ANNOUNCED_PER_CALLER. */
	uint32_t announce_per_host;
	/* The secret the fleet's ring is keyed with, 32 bytes
	 * (--ring-key-file) [borrowed: copied at open]; NULL: 32 random
	 * bytes drawn at open. */
	const uint8_t *ring_key;
	/* "key=value[,key=value...]" over what config.json says of the
	 * identity (docs/identity.md); NULL: config.json alone. */
	const char *identity;
	/* More models served by this seed, each its own directory in a
	 * mount (--model-dir NAME=DIR ...) [borrowed]. */
	const struct sfs_seed_dir *more;
	size_t nmore;
	/* A republish whose content (sfs_manifest_content) equals the
	 * current generation's, none of its files withdrawn, keeps that
	 * generation: -EALREADY. */
	int keep_unchanged;
	/* Tests only: flip the published byte at this offset of this file
	 * (after the checksums), to prove replicas refuse it. */
	const char *test_corrupt_path;
	uint64_t test_corrupt_off;
	/* Tests only: after each walk of a model directory, wait until this
	 * file exists (and remove it) before opening the files, so a test
	 * can change the directory in between. */
	const char *test_after_walk;
};

/*
 * sfs_seed_open - do everything but serve.  A bad safetensors file or a
 * transport the host cannot serve fails here with one line in @err.
 * *out [new] is freed with sfs_seed_close.  Not thread safe.
 */
int sfs_seed_open(const struct sfs_seed_cfg *cfg, struct sfs_seed **out,
		  char *err, size_t errlen);

/* The models, in the order given: how many, and the name of each
 * [borrowed].  Thread safe. */
size_t sfs_seed_nmodels(const struct sfs_seed *s);
const char *sfs_seed_model_name(const struct sfs_seed *s, size_t i);

/*
 * sfs_seed_manifest_get - the manifest of @model (NULL: the only one)
 * at @generation (0: the current one) as a reference to the
 * generation's encoded copy into *out [new reference: sfs_blob_put]:
 * every answer of one generation sends the same bytes, held while any
 * is going out (a rekey or the generation's end makes or frees the
 * seed's own, never those).  With @gzip, gzipped when that is smaller
 * (*gzipped 1): compressed once per generation and key epoch, kept
 * beside it.  -ENOENT when that generation is no longer served,
 * -ESRCH when there is no such model, -EISDIR when @model is NULL and
 * the seed serves several.  Thread safe.
 */
struct sfs_blob;
int sfs_seed_manifest_get(struct sfs_seed *s, const char *model,
			  uint64_t generation, int gzip, struct sfs_blob **out,
			  int *gzipped);

/* sfs_seed_generations - one line of JSON for @model (NULL: the only
 * one): model, current generation, instance, content, identity id, and
 * the generations served (with the milliseconds left of their grace
 * period, for the superseded ones).  *buf [new, free()].  0, -ESRCH,
 * -EISDIR (as above) or -ENOMEM.  Thread safe. */
int sfs_seed_generations(struct sfs_seed *s, const char *model, char **buf,
			 size_t *len);

/*
 * sfs_seed_record - model @i as the fleet registry records it
 * (docs/registry.md): its name, generation, instance, content, identity
 * (id and fields), protocols, @kind ("seed") and @control, the address
 * its control port is reached at.  *json [new, free()].  0, -ENOENT or
 * -ENOMEM.  Thread safe.
 */
int sfs_seed_record(struct sfs_seed *s, size_t i, const char *kind,
		    const char *control, char **json);

/* sfs_seed_models - {"instance": ..., "models": [each as
 * sfs_seed_generations]}: all a replica asks to follow every model.
 * *buf [new].  0 or -ENOMEM.  Thread safe. */
int sfs_seed_models(struct sfs_seed *s, char **buf, size_t *len);

/*
 * sfs_seed_republish_model - walk, validate and publish model @i again
 * as its next generation; the current one stays served for the grace
 * period.  On failure the current generation goes on being served and
 * @err says why.  With cfg.keep_unchanged, the same content is not
 * published again: -EALREADY, @err says which generation stays.
 * sfs_seed_republish - every model (@err: the first failure, the others
 * logged; -EALREADY only when no model changed).  Return 0 or -errno.
 * Not thread safe with themselves.
 */
int sfs_seed_republish_model(struct sfs_seed *s, size_t i, char *err,
			     size_t errlen);
int sfs_seed_republish(struct sfs_seed *s, char *err, size_t errlen);

/*
 * sfs_seed_rekey - a new key epoch (a token rotation): every region of
 * every generation served is registered again, and the manifests
 * publish the new addresses, keys and key_epoch at once.  The old
 * registrations keep reading for @grace_s seconds (0: none), then
 * sfs_seed_reap releases them.  On failure nothing changed (the old
 * keys stay) and @err says why.  Returns 0 or -errno.  Call from the
 * thread that republishes.
 */
int sfs_seed_rekey(struct sfs_seed *s, uint32_t grace_s, char *err,
		   size_t errlen);

/*
 * sfs_seed_reap - release the generations whose grace period ended,
 * and registrations of earlier key epochs whose grace ended; sign again
 * every generation served whose signature is half through its validity
 * (--sign-validity).  Returns the milliseconds until the next of those
 * is due, or -1.  Call from the thread that republishes.
 */
int64_t sfs_seed_reap(struct sfs_seed *s);

/*
 * sfs_seed_watch_fd - readable when a published file may have changed on
 * disk (then call sfs_seed_files_changed), or -1.
 * sfs_seed_files_changed - withdraw every published file that changed
 * under the seed (one line each): its bytes are no longer served by any
 * generation (see seed_gen_withdraw); returns how many, and sets bit i
 * of *@changed (if not NULL) for each model i they belong to, and of
 * *@again (if not NULL) for each model a withdrawn file of whose current
 * generation changed again (repaired in place, say: said once every
 * SEED_AGAIN_SAY_MS a file).  The caller publishes the next generation
 * of those models once the directory is quiet: a withdrawal waits for a
 * quiet second, a change again only arms that wait if none is set (a
 * file written on and on does not hold every republish back).  Call
 * from the thread that republishes.
 */
int sfs_seed_watch_fd(const struct sfs_seed *s);
int sfs_seed_files_changed(struct sfs_seed *s, uint64_t *changed,
			   uint64_t *again);

/* A re-seeder is told its place in the fleet once this many are live
 * (more than one replica's peers: fewer all work with all). */
#define SFS_SEED_FLEET_FROM 9

/*
 * sfs_seed_announce - a re-seeder's announcement @an (its control
 * address, the caller's address, its run and the run's proof): as
 * sfs_announced_add (seed/announce.h), the address listed for the next
 * 15 s (it announces itself again every 5); one line when it is new or
 * its run moved.  *@res filled.  0 or the refusal (-EINVAL, -EPERM,
 * -EACCES, -EDQUOT, -ENOSPC), -ENOMEM.
 *
 * sfs_seed_sources - what sfs_announced_sources answers @asker (@me:
 * its run, if it is a re-seeder that said it), the fleet's ring from
 * cfg.fleet_from live ones on.  0 or -ENOMEM.  Thread safe.
 */
struct sfs_announce;
struct sfs_announced_res;
int sfs_seed_announce(struct sfs_seed *s, const struct sfs_announce *an,
		      struct sfs_announced_res *res);
int sfs_seed_sources(struct sfs_seed *s, const char *asker, uint64_t me,
		     char **buf, size_t *len);

struct sfs_metrics;

/*
 * sfs_seed_metrics - each model's generation, generations served,
 * bytes, registered bytes, republishes by result and files withdrawn,
 * and the re-seeders announced, into @m (Prometheus text,
 * docs/metrics.md).  Thread safe.
 */
void sfs_seed_metrics(struct sfs_seed *s, struct sfs_metrics *m);

/* sfs_seed_errors - republishes that failed and files withdrawn so far,
 * every model.  Thread safe. */
void sfs_seed_errors(struct sfs_seed *s, uint64_t *publish,
		     uint64_t *withdrawn);

/* sfs_seed_current - the first model's current generation.  Thread
 * safe. */
uint64_t sfs_seed_current(struct sfs_seed *s);

/* sfs_seed_protocol - the protocol it serves (what "auto" chose). */
const char *sfs_seed_protocol(const struct sfs_seed *s);

/*
 * sfs_seed_accept - answer a replica's connection hello for @protocol
 * from @client (its address; see sfs_xport_accept).  -EPROTONOSUPPORT
 * when the seed does not serve @protocol or it needs no exchange.
 * Thread safe.
 */
int sfs_seed_accept(struct sfs_seed *s, const char *protocol, const void *hello,
		    size_t len, const char *client, void *reply, size_t *rlen);

/* sfs_seed_summary - one human line: each model, its generation,
 * files, bytes. */
void sfs_seed_summary(struct sfs_seed *s, char *buf, size_t len);

/* sfs_seed_close - deregister, unmap, close the transport.  NULL ok. */
void sfs_seed_close(struct sfs_seed *s);

/*
 * The control port: HTTP/1.1, GET /v1/models, /v1/manifest,
 * /v1/generation, /v1/sources, /v1/health, /metrics, POST /v1/connect,
 * /v1/announce (ctl.c, on control/ctlsrv.h).
 * sfs_ctl_start binds @cfg->host:@cfg->port ("" host: all addresses;
 * port "0": any), with @cfg's token and TLS (its body_max is ours), and
 * fills *bound_port.  Returns 0 or -errno with a line in @err.
 */
struct sfs_ctl;
struct sfs_ctlsrv_cfg;
int sfs_ctl_start(struct sfs_seed *s, const struct sfs_ctlsrv_cfg *cfg,
		  struct sfs_ctl **out, unsigned int *bound_port, char *err,
		  size_t errlen);
void sfs_ctl_stop(struct sfs_ctl *c);

#endif /* SFS_SEED_H */
