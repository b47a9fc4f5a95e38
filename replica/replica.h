/* SPDX-License-Identifier: MIT */
/*
 * replica.h - the replica's core: what a mount, `seedfs pull`,
 * `seedfs prefetch` and the engine API share.
 *
 * A replica asks its seeds what they publish, checks every manifest,
 * opens one transport, a chunk cache in registered memory (and its disk
 * tier), builds the tree of files (one directory per model) and follows
 * the seeds' generations.  Every seed that publishes a model's content
 * is a source of it: reads are striped over them and fail over between
 * them (cache.h).  It reads files through the cache: sfs_replica_read
 * pins the chunks of a byte range and hands back pointers into them.
 * Nothing here knows FUSE: fs/ turns the tree and these reads into
 * replies.
 *
 * All functions are thread safe unless said otherwise.
 */
#ifndef SFS_REPLICA_H
#define SFS_REPLICA_H

#define SFS_REPLICA_CACHE_IDLE_MS 30000u /* --cache-idle 30 */

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct sfs_cache;
struct sfs_xport;
struct sfs_xport_mr;
struct sfs_chunk;
struct sfs_mfile;
struct sfs_require;
struct sfs_tree;
struct sfs_view;
struct sfs_ra;

struct sfs_replica;

#define SFS_REPLICA_SEEDS_MAX 64

struct sfs_auth;
struct sfs_control_cred;
struct sfs_tls_pair;

struct sfs_replica_cfg {
	/* The seeds, HOST:PORT each, in order of preference [borrowed]:
	 * the first that publishes a model and answers leads it. */
	const char *const *seeds;
	size_t nseeds;
	const char *only;	 /* only this model (pull), or NULL */
	const char *protocol;	 /* NULL: the seed's first that opens */
	unsigned int timeout_ms; /* no progress for this long: give up */
	uint64_t cache_size;	 /* bytes of registered chunk memory */
	uint32_t chunk_size;	 /* bytes per pull, a power of two */
	const char *cache_dir;	 /* the disk tier, or NULL [borrowed] */
	/* With cred's trust key: where the signed generations taken are
	 * remembered (control/signstate.h); NULL: cache_dir if given,
	 * else sfs_signstate_default_dir.  [borrowed] */
	const char *state_dir;
	uint64_t cache_dir_size; /* its bound; 0: the filesystem's */
	int no_verify;		 /* serve pulled bytes unchecked */
	/* Show a model only while its identity matches [borrowed], or
	 * NULL; @require_text is how the user wrote it. */
	const struct sfs_require *require;
	const char *require_text;
	/* The layout --require asks for (the tensor view shows only its
	 * tensors), or NULL [borrowed]. */
	const char *layout;
	uint64_t start_ms; /* when the command started (monotonic) */
	const char *who;   /* "seedfs mount": what error lines start with */
	/* Serve what it holds to other replicas on this control address
	 * (HOST:PORT) (replica/reseed.h), or NULL. [borrowed] */
	const char *reseed;
	/* The cache holds all it pulls until full, as with reseed (-o
	 * direct_io: no page cache keeps what readers read). */
	int hold_all;
	/* The cache gives free memory back after this many ms without a
	 * pull (sfs_cache_cfg.idle_ms); 0: never.  A mount's default:
	 * SFS_REPLICA_CACHE_IDLE_MS. */
	unsigned int cache_idle_ms;
	/* With reseed: when the token changes, the slab is registered again
	 * under a new key and the old one reads this many seconds more. */
	uint32_t reseed_grace_s;
	/* Tests only: a hostile re-seeder, whose holdings answers point
	 * 64 bytes past each chunk (others pull wrong bytes). */
	int reseed_test_corrupt;
	/* Tests only: each pulled chunk's verification waits this long
	 * first (sfs_cache_cfg.test_verify_delay_ms). */
	unsigned int test_verify_delay_ms;
	/* The fleet registry (control/registry.h), or NULL: its records
	 * are sources too, followed by watch.  [borrowed] */
	struct sfs_reg *registry;
	/* The token and TLS every control port is spoken to with, or NULL
	 * (control/control.h); a re-seeder's own port asks for the same
	 * token.  [borrowed] */
	struct sfs_control_cred *cred;
	/* With reseed and TLS: the re-seeder's certificate and key.
	 * [borrowed] */
	const struct sfs_tls_pair *reseed_tls;
	/* Answer GET /metrics (and /v1/health) on this HOST:PORT, behind
	 * cred's token when it has one, or NULL. [borrowed] */
	const char *metrics_listen;
	/* A read-only scrape token that opens its /metrics too, or NULL.
	 * [borrowed] */
	struct sfs_auth *metrics_auth;
	/* Serve it over TLS only with this certificate and key, or NULL.
	 * [borrowed] */
	const struct sfs_tls_pair *metrics_tls;
	/* The most models shown at once (a source brings in at most a
	 * quarter of them, and at most 256); 0: SFS_MODELS_MAX. */
	size_t max_models;
};

#define SFS_MODELS_MAX 1024 /* models a replica holds at once, default */

/*
 * sfs_replica_open - ask every seed what it publishes, fetch and check
 * the manifests, open the disk tier, the transport and the cache, build
 * the tree and start following generations.  Writes one line into @err
 * on failure (no seed answers, a bad manifest, a protocol this host
 * cannot serve, nothing to show).  Seeds that do not answer now are
 * asked again behind.  *out [new], freed with sfs_replica_close.
 * Returns 0 or -errno.
 */
int sfs_replica_open(const struct sfs_replica_cfg *cfg,
		     struct sfs_replica **out, char *err, size_t errlen);

/* sfs_replica_ready - what had to be quick is done (a mount is
 * ready): record the time for status and fault the rest of the cache
 * in behind. */
void sfs_replica_ready(struct sfs_replica *r);

/*
 * sfs_replica_set_inval - where to send page cache invalidations of a
 * generation that is no longer served (@fn(@arg, ino)), for a mount;
 * NULL stops them.  Returns once no call to the previous @fn is under
 * way, so its @arg can go (the FUSE session, at the unmount), or after
 * 5 s (a call blocked in the kernel; logged).  Thread safe; not from
 * inside @fn.
 */
void sfs_replica_set_inval(struct sfs_replica *r, void (*fn)(void *, uint64_t),
			   void *arg);

/*
 * sfs_replica_stop - stop following generations (no more
 * invalidations) and stop the control socket's prefetches: before the
 * FUSE session goes.  Idempotent.
 */
void sfs_replica_stop(struct sfs_replica *r);

/* sfs_replica_close - stop, quiesce the transport, free.  NULL is fine.
 * Not thread safe with anything else on @r. */
void sfs_replica_close(struct sfs_replica *r);

/*
 * The tree of files [borrowed]: read it holding the lock for reading
 * (a new generation rewrites it under the lock held for writing).
 */
struct sfs_tree *sfs_replica_tree(struct sfs_replica *r);
pthread_rwlock_t *sfs_replica_lock(struct sfs_replica *r);

/* The cache [borrowed], for what reads chunks itself (prefetch). */
struct sfs_cache *sfs_replica_cache(struct sfs_replica *r);

/* The transport [borrowed], for registering a reader's own memory (the
 * engine API), and the protocol it reads through. */
struct sfs_xport *sfs_replica_xport(struct sfs_replica *r);

/*
 * sfs_replica_keep_mr - @mr [taken] is done with, but a read that gave
 * up may still be written into its memory by the transport (its
 * sfs_cache_dst_free said -EBUSY): deregistered by sfs_replica_close
 * once the transport's reads are ended, before the transport closes
 * (kept, with a warning, if some could not be).  Out of memory: left
 * registered, logged.  NULL is fine.  Thread safe.
 */
void sfs_replica_keep_mr(struct sfs_replica *r, struct sfs_xport_mr *mr);
const char *sfs_replica_protocol(struct sfs_replica *r);

/* sfs_replica_seeds - the seeds given, "HOST:PORT,HOST:PORT" into
 * @buf. */
char *sfs_replica_seeds(struct sfs_replica *r, char *buf, size_t len);

/* sfs_replica_models - the models shown, "a, b" into @buf (hidden ones
 * marked so). */
char *sfs_replica_models(struct sfs_replica *r, char *buf, size_t len);

/* sfs_replica_hidden - 1 when some model is hidden by the requirement
 * (@why, if not NULL, says which and which field differs), else 0. */
int sfs_replica_hidden(struct sfs_replica *r, char *why, size_t len);

/*
 * sfs_replica_revalidate - close-to-open for the model @ino belongs to
 * (the root: every model): its leading seed is asked for its current
 * generation (concurrent callers share one question), and a newer one
 * is adopted.  A seed that did not answer last time is asked behind
 * instead, a timeout after the last question, so opens do not each
 * wait for it.  sfs_replica_revalidate_missing - the same for a lookup
 * of a name that is not there in directory @ino: at most every 200 ms,
 * waiting a second at most.  The tree lock must not be held.
 */
void sfs_replica_revalidate(struct sfs_replica *r, uint64_t ino);
void sfs_replica_revalidate_missing(struct sfs_replica *r, uint64_t ino);

/*
 * Views: the generation a node's bytes come from.  sfs_replica_ref -
 * take a reference on @v, read from a tree node under the lock: 0, or
 * -ESTALE when it is no longer served (no reference taken).
 * sfs_replica_unref - drop one.  sfs_replica_alive - 0 once no seed
 * serves @v.  sfs_replica_warming - a prefetch of every file of @v
 * (referenced) starts (@delta 1) or ends (-1): a re-seeder says so in
 * its holdings, and replicas loading @v together share the seeds'
 * chunks among those that do (see sfs_cache_set_lanes).
 */
int sfs_replica_ref(struct sfs_replica *r, struct sfs_view *v);
void sfs_replica_unref(struct sfs_replica *r, struct sfs_view *v);
void sfs_replica_warming(struct sfs_replica *r, struct sfs_view *v, int delta);

/*
 * sfs_replica_wait_listed - a re-seeding replica: wait (at most @ms)
 * until a seed lists it among its re-seeders.  Returns 0 once listed,
 * -ETIMEDOUT, or -ENOENT (not re-seeding).
 */
int sfs_replica_wait_listed(struct sfs_replica *r, unsigned int ms);
int sfs_replica_alive(struct sfs_replica *r, struct sfs_view *v);

/* The pointers a read hands back, and the chunks they pin. */
#define SFS_RVEC_STACK 32
struct sfs_rvec {
	struct iovec *iov;
	struct sfs_chunk **pins; /* [i]: pins iov[i], or NULL (inline) */
	size_t n, cap;
	struct iovec iov_stack[SFS_RVEC_STACK];
	struct sfs_chunk *pins_stack[SFS_RVEC_STACK];
};

/* sfs_rvec_init - empty, on its stack arrays.  sfs_rvec_release - put
 * every pin, free what grew.  Not thread safe on one rvec. */
void sfs_rvec_init(struct sfs_rvec *v);
void sfs_rvec_release(struct sfs_replica *r, struct sfs_rvec *v);

/* One open file's reading state, owned by its caller. */
struct sfs_rfile {
	struct sfs_view *view;	      /* referenced by the caller */
	const struct sfs_mfile *file; /* in view's manifest */
	uint32_t set;		      /* the view's cache set */
	uint32_t obj;		      /* @file's index: its object in @set */
	uint64_t base;		  /* a tensor: where its bytes start in @file */
	uint64_t size;		  /* bytes readable from @base */
	pthread_mutex_t *ra_lock; /* guards @ra, or NULL: no read-ahead */
	struct sfs_ra *ra;
};

/*
 * sfs_replica_read - the bytes [off, off+len) of @f (from its base) into
 * @out: pulls are queued for all of them first, then read-ahead as the
 * access pattern deserves, then each chunk is waited for and pinned.
 * Returns 0, -ESTALE (the generation is no longer served), or the
 * cache's error (-EIO, -ETIMEDOUT, -EBADMSG, ...); logged.  @out holds
 * what was pinned either way: release it.
 */
int sfs_replica_read(struct sfs_replica *r, struct sfs_rfile *f, uint64_t off,
		     uint64_t len, struct sfs_rvec *out);

/*
 * sfs_replica_end_waits - the mount is going: reads waiting for a
 * source, and later ones that would wait, end at once with -ESHUTDOWN
 * (sfs_cache_end_waits); requests to the sources' control ports end
 * within about a second (sfs_control_abort: for the whole process, so
 * only for one about to exit).  Thread safe.
 */
void sfs_replica_end_waits(struct sfs_replica *r);

/*
 * sfs_replica_fetch - queue read-ahead pulls for @f's bytes [off,
 * off+len) and return without waiting (a copy keeping a window full).
 */
void sfs_replica_fetch(struct sfs_replica *r, const struct sfs_rfile *f,
		       uint64_t off, uint64_t len);

/*
 * sfs_replica_current - the current generation of model @name: *v
 * [referenced: sfs_replica_unref it] and its manifest in *m [borrowed
 * from *v].  -ENOENT when no such model is shown.
 */
struct sfs_manifest;
int sfs_replica_current(struct sfs_replica *r, const char *name,
			struct sfs_view **v, const struct sfs_manifest **m);

/* sfs_replica_rfile - what reading file @idx of @v whole needs (no
 * read-ahead: the caller keeps its own window with sfs_replica_fetch). */
void sfs_replica_rfile(struct sfs_view *v, size_t idx, struct sfs_rfile *f);

/* sfs_replica_resident - how many of @f's bytes [off, off+len) are in
 * memory now (a snapshot, for display). */
uint64_t sfs_replica_resident(struct sfs_replica *r, const struct sfs_rfile *f,
			      uint64_t off, uint64_t len);

/* Read-ahead bounds for callers of sfs_replica_read; @tensors: a read
 * in a safetensors tensor also pulls the rest of it (up to @max past
 * the read).  Call before the mount serves reads. */
void sfs_replica_set_ahead(struct sfs_replica *r, uint64_t min, uint64_t max,
			   int tensors);

/*
 * sfs_replica_status - .seedfs/status: *text [new, free()].  @arg is the
 * replica.  Returns 0 or -ENOMEM.  (status.c)
 */
int sfs_replica_status(void *arg, char **text, size_t *len);

/*
 * sfs_replica_metrics - .seedfs/metrics and --metrics-listen's GET
 * /metrics: the same numbers as Prometheus text (docs/metrics.md).
 * *text [new, free()].  Returns 0 or -ENOMEM.  Thread safe.
 * (metrics.c)
 */
int sfs_replica_metrics(void *arg, char **text, size_t *len);

/* sfs_replica_metrics_address - where --metrics-listen answers
 * ("HOST:PORT", the port bound), or NULL [borrowed]. */
const char *sfs_replica_metrics_address(const struct sfs_replica *r);

/*
 * sfs_replica_serve_control - start the mount's control socket (seedfs
 * prefetch talks to it), named in status; with @prefetch_all, warm
 * every file in the background.  Logs when it cannot.
 */
void sfs_replica_serve_control(struct sfs_replica *r, int prefetch_all);

/*
 * sfs_replica_mounted - the device of the mount that serves this replica
 * (st_dev of its mount point), for the control socket's "identify"
 * (replica/mctl.h).  Nothing without a control socket.
 */
void sfs_replica_mounted(struct sfs_replica *r, unsigned int major,
			 unsigned int minor);

/* sfs_replica_reseeding - 1 when it serves what it holds (--reseed). */
int sfs_replica_reseeding(struct sfs_replica *r);

/* sfs_replica_total_bytes - the bytes of every file shown now. */
uint64_t sfs_replica_total_bytes(struct sfs_replica *r);

#endif /* SFS_REPLICA_H */
