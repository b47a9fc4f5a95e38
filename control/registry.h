/* SPDX-License-Identifier: MIT */
/*
 * registry.h - the fleet registry client: etcd v3 through its JSON
 * gateway (libcurl + jansson; etcd 3.4's /v3/... routes), so no Go or
 * C++ client is needed.  Keys and values travel base64, int64 values
 * as decimal strings.
 *
 * One struct sfs_reg is one registry: its endpoints (tried in turn, the
 * one that answered first), its prefix, TLS and the user it logs in as.
 * Every request has a bound; a watch is a long request that ends when
 * etcd goes away, when it is compacted past, or when asked to stop.
 *
 * Everything etcd answers is untrusted: sizes are capped, every field
 * is checked, and a bad answer is -EPROTO with one line naming it.
 *
 * Thread safety: every function may be called from any thread on the
 * same struct sfs_reg (a lock guards the endpoint and the auth token;
 * requests run unlocked).
 */
#ifndef SFS_REGISTRY_H
#define SFS_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#define SFS_REG_ENDPOINTS_MAX 8
#define SFS_REG_KEY_MAX 1024	      /* bytes of a key we read or write */
#define SFS_REG_VALUE_MAX (64u << 10) /* bytes of a value we accept */
#define SFS_REG_PREFIX_DEFAULT "/seedfs"

struct sfs_reg;

struct sfs_reg_cfg {
	/* etcd://HOST:PORT[,HOST:PORT...][/PREFIX]; etcds:// is TLS. */
	const char *url;
	const char *ca_file;	 /* etcds: the CA to verify against; NULL:
				* the system's */
	const char *auth_file;	 /* "USER:PASSWORD" on its first line, or
				* NULL: no authentication */
	unsigned int timeout_ms; /* of each request (0: 5000) */
};

/*
 * sfs_reg_open - parse @cfg (the URL, the auth file) into *out [new,
 * sfs_reg_free].  Does not talk to etcd (see sfs_reg_check).  Returns 0
 * or -EINVAL / -ENOENT / -EACCES / -ENOMEM with one line in @err naming
 * the part at fault.  The password is kept in memory only; its file is a
 * secret (sfs_auth_open_secret: 0600 or 0400, this user's or root's).
 * A password with etcd:// (no TLS) to a host that is not loopback is
 * warned about in one line (it would cross the network in clear).
 */
int sfs_reg_open(const struct sfs_reg_cfg *cfg, struct sfs_reg **out, char *err,
		 size_t errlen);

/* sfs_reg_free - accepts NULL.  The password is wiped. */
void sfs_reg_free(struct sfs_reg *g);

/* The prefix, without a trailing '/' ("/seedfs" by default) [borrowed]. */
const char *sfs_reg_prefix(const struct sfs_reg *g);

/* The URL as given, for messages (holds no secret) [borrowed]. */
const char *sfs_reg_url(const struct sfs_reg *g);

/*
 * sfs_reg_model_key - the key of @kind ("seed", "reseeder") @control
 * (its HOST:PORT) serving model @name: PREFIX/models/NAME/KIND/CONTROL
 * (docs/registry.md), into @buf.  0, or -ENAMETOOLONG.
 * sfs_reg_models_prefix - PREFIX/models/, what a mount watches.
 */
int sfs_reg_model_key(const struct sfs_reg *g, const char *name,
		      const char *kind, const char *control, char *buf,
		      size_t len);
void sfs_reg_models_prefix(const struct sfs_reg *g, char *buf, size_t len);

/*
 * sfs_reg_local_ip - this host's address on the way to etcd (the last
 * request's), "[...]" around IPv6, into @buf: what others in the fleet
 * most likely reach it at.  0, or -ENOENT before any answer.
 */
int sfs_reg_local_ip(struct sfs_reg *g, char *buf, size_t len);

/*
 * sfs_reg_check - etcd answers (and, with an auth file, takes the user
 * and password).  0, or -errno with one line in @err: unreachable,
 * refused TLS, refused credentials.
 */
int sfs_reg_check(struct sfs_reg *g, char *err, size_t errlen);

/* sfs_reg_grant - a lease of @ttl_s seconds: *lease.  0 or -errno. */
int sfs_reg_grant(struct sfs_reg *g, unsigned int ttl_s, int64_t *lease,
		  char *err, size_t errlen);

/*
 * sfs_reg_keepalive - renew @lease: *ttl_s is what it has left.
 * -ENOENT when it expired (or was never granted): its keys are gone.
 */
int sfs_reg_keepalive(struct sfs_reg *g, int64_t lease, int64_t *ttl_s,
		      char *err, size_t errlen);

/* sfs_reg_revoke - end @lease now: its keys go at once. */
int sfs_reg_revoke(struct sfs_reg *g, int64_t lease, char *err, size_t errlen);

/* sfs_reg_put - @key = @len bytes of @val, under @lease (0: none). */
int sfs_reg_put(struct sfs_reg *g, const char *key, const void *val, size_t len,
		int64_t lease, char *err, size_t errlen);

/* sfs_reg_delete - @key (0 also when it was not there). */
int sfs_reg_delete(struct sfs_reg *g, const char *key, char *err,
		   size_t errlen);

enum sfs_reg_type { SFS_REG_PUT, SFS_REG_DELETE };

/* One key as a range or a watch delivers it; everything borrowed for
 * the callback's duration.  @key and @value are NUL terminated. */
struct sfs_reg_event {
	enum sfs_reg_type type;
	const char *key; /* "" when it could not be decoded (@why) */
	size_t klen;
	const char *value; /* "" for a delete */
	size_t vlen;
	int64_t mod_revision;
	/* Not NULL: the key or value could not be taken (not base64, over
	 * SFS_REG_KEY_MAX or SFS_REG_VALUE_MAX): why.  The caller ignores
	 * the record (and forgets what it had under @key, if decoded). */
	const char *why;
};

/* Called per key.  Return 0 to go on. */
typedef int (*sfs_reg_fn)(void *arg, const struct sfs_reg_event *e);

/*
 * sfs_reg_range - every key under @prefix (keys starting with it), each
 * to @fn; *rev is the store's revision the answer is of (watch from
 * *rev + 1).  At most @max keys (more: -E2BIG).  0 or -errno.
 */
int sfs_reg_range(struct sfs_reg *g, const char *prefix, size_t max,
		  sfs_reg_fn fn, void *arg, int64_t *rev, char *err,
		  size_t errlen);

/*
 * sfs_reg_watch - every change under @prefix from revision @start on,
 * each to @fn, until @stop(@stop_arg) says so (looked at every second,
 * -ECANCELED then), etcd goes away or stops answering (-EIO, -ETIMEDOUT:
 * a dead connection is noticed within about 10 s by TCP keepalive), or
 * the revisions wanted were compacted (-ESTALE: range again, then watch
 * from that answer).  *next is where to watch from again.  @on_created
 * (may be NULL) is called once etcd accepted the watch.
 */
int sfs_reg_watch(struct sfs_reg *g, const char *prefix, int64_t start,
		  sfs_reg_fn fn, void *arg, int (*stop)(void *), void *stop_arg,
		  void (*on_created)(void *), int64_t *next, char *err,
		  size_t errlen);

/*
 * The answers' codec, apart for the unit tests (recorded answers).
 * sfs_reg_parse_range - a /v3/kv/range answer.  sfs_reg_parse_watch - one
 * message of a /v3/watch stream: its events to @fn, *next past them,
 * *created / *canceled set when it says so, *compact the revision it
 * was compacted to (with canceled).  0 or -EPROTO / -E2BIG / the
 * callback's value, @err naming the field.
 */
int sfs_reg_parse_range(const char *body, size_t len, size_t max, sfs_reg_fn fn,
			void *arg, int64_t *rev, char *err, size_t errlen);
int sfs_reg_parse_watch(const char *msg, size_t len, sfs_reg_fn fn, void *arg,
			int64_t *next, int *created, int *canceled,
			int64_t *compact, char *err, size_t errlen);

/*
 * A publisher: records kept under one lease of @ttl_s seconds, renewed
 * every third of it by a thread of its own.  When the lease is lost
 * (etcd restarted or was cut off longer than the TTL) a new one is
 * granted and every record put again; while etcd does not answer it
 * tries again every second (one line when it goes, one when it is
 * back).  The records vanish with the lease when the process dies, and
 * at once on sfs_reg_pub_stop (the lease is revoked).
 */
struct sfs_reg_pub;

/*
 * sfs_reg_pub_start - grant the lease now (0, or -errno with one line in
 * @err: etcd is not there, refused, ...) and start the thread.  @g is
 * borrowed and must outlive *out [new].  @name says whose records they
 * are in log lines ("seed", "re-seeder").
 */
int sfs_reg_pub_start(struct sfs_reg *g, unsigned int ttl_s, const char *name,
		      struct sfs_reg_pub **out, char *err, size_t errlen);

/*
 * sfs_reg_pub_set - @key is @val from now on (copied; put behind, at
 * once).  sfs_reg_pub_del - @key goes.  0 or -ENOMEM.  Thread safe.
 */
int sfs_reg_pub_set(struct sfs_reg_pub *p, const char *key, const char *val);
int sfs_reg_pub_del(struct sfs_reg_pub *p, const char *key);

/*
 * sfs_reg_pub_wait - wait up to @ms for every record set so far to be
 * in etcd: 0, or -ETIMEDOUT.  Thread safe.
 */
int sfs_reg_pub_wait(struct sfs_reg_pub *p, unsigned int ms);

/* sfs_reg_pub_state - one line for status: the lease, the records,
 * what failed last. */
void sfs_reg_pub_state(struct sfs_reg_pub *p, char *buf, size_t len);

/* sfs_reg_pub_stop - revoke the lease (its records go at once), stop
 * the thread, free.  Accepts NULL. */
void sfs_reg_pub_stop(struct sfs_reg_pub *p);

#endif /* SFS_REGISTRY_H */
