/* SPDX-License-Identifier: MIT */
/*
 * replica_impl.h - what the files of replica/ share.  Only replica/
 * includes this; the layers above (fs/, cli/, lib/) include
 * replica/replica.h, its entry (and pull.h, prefetch.h for those
 * commands).
 *
 * The files depend downward, from the top:
 *
 *   replica.c   open and close: starts and stops every part below
 *   mctl.c      the mount's control socket (seedfs prefetch) -> prefetch.c
 *   status.c, metrics.c   what the mount says of itself
 *   prefetch.c, pull.c, reseed.c   warming, copying out, serving others
 *   fleet.c     the registry's records: sources added and dropped
 *   source.c    sources: a seed's (or re-seeder's) control port, asked
 *               what it publishes; its connection; offering what it
 *               publishes to the models
 *   model.c     models and their views: matching a source's content,
 *               adopting a new one, holders, expiry (the sweeper)
 *   read.c      reading files through the cache; the replica's parts
 *               (tree, lock, cache, views) as the files above see them
 *   tree.c, tview.c, readahead.c, parse.h   no replica: the tree of
 *               files, the tensor view, read-ahead, parsing
 *
 * One circle is left, on purpose: model.c, source.c and fleet.c are
 * three sides of one relation, which source publishes which model.  A
 * source's answer adopts, prunes and retires models (source -> model);
 * a model asks which sources still publish it before it goes (model ->
 * source); the registry adds and drops sources (fleet -> source) and a
 * model the registry still lists is kept (source -> fleet).  Split by
 * callbacks, the same calls would be there, hidden.
 *
 * Locks, outermost first: a model's adopt_lock (one offer at a time),
 * the tree lock (an adoption rewrites the tree; a reader holds it while
 * it takes a view's reference), a model's lock; a source's lock and a
 * model's lock are never held together; r->lock is taken alone but for
 * a model's lock tried under it (the sweeper, freeing a model nobody
 * holds); r->xlock (transport connections) is taken alone; the cache's
 * lock and r->signstate's are below all.
 *
 * Models come and go: a pointer to one is good while a reference from
 * model_get, model_make or model_all is held (model_put), or while one
 * of its views is referenced (a view keeps its model).
 */
#ifndef SFS_REPLICA_IMPL_H
#define SFS_REPLICA_IMPL_H

#include "metadata/manifest.h"
#include "replica/model.h"
#include "replica/parse.h"
#include "replica/replica.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct sfs_cache;
struct sfs_cache_hobj;
struct sfs_cache_piece;
struct sfs_disk;
struct sfs_signstate;
struct sfs_mctl;
struct sfs_tree;
struct sfs_xport;
struct rsrc;

#define RSRC_MAX 64	 /* live sources of one replica */
#define RSRC_PEERS_MAX 8 /* ... re-seeders among them: its peers */
#define RSRC_GONE_MS                                                           \
	10000			  /* a found re-seeder silent (or listed by
				     no seed) this long is freed */
#define RSRC_POLL_MS 1000	  /* each source is asked this often, behind */
#define RSRC_RESEEDER_POLL_MS 250 /* ... a re-seeder (its holdings grow) */
#define RSRC_REG_POLL_MS 10000	  /* ... a seed the registry's watch follows */
#define RSRC_ASK_MS 3000	  /* the longest an open waits for a source */
#define RSRC_LOOKUP_MS 1000	  /* ... a lookup of a missing name */
#define RSRC_FRESH_MS 200	  /* a missing name asks at most this often */
#define ADOPT_BACKOFF_MS 1000	  /* a failed adoption is retried after this, */
#define ADOPT_BACKOFF_MAX_MS 60000 /* doubling up to this */

/* One source serving one view's content.  Protected by the model's
 * lock. */
struct sfs_vholder {
	struct rsrc *src;
	uint64_t instance;	/* of the source's run */
	uint64_t generation;	/* its number for this content */
	uint64_t key_epoch;	/* of the keys in @m (a token rotation) */
	struct sfs_manifest *m; /* its manifest: owned, the pieces borrow */
	int view_m;		/* @m is the view's (not owned) */
	int partial;		/* a re-seeder's: pieces from its holdings */
	size_t ep;		/* partial: its endpoint in @m */
	uint64_t version;	/* partial: of the holdings its pieces are */
	int have_version;
	/* partial: the slot of every chunk of each file of @m as the last
	 * answer left it (holdruns.h codes), owned; a form 2 delta applies
	 * onto it.  @base: the re-seeder's set those are of (0: none). */
	struct model_slots slots;
	uint64_t base;
	int prefetching; /* partial: it says it loads the whole content */
	struct sfs_cache_hobj *hobjs; /* per canonical file: owned */
	struct sfs_cache_piece *pieces;
	/* Raw keys (FI_MR_RAW) its pieces read with, imported for it and
	 * given back (sfs_xport_key_release) when it goes: its regions'
	 * (@rawkeys), and a partial holder's slab key (replaced with each
	 * holdings answer). */
	uint64_t *rawkeys;
	size_t nrawkeys;
	int slab_raw;
	uint64_t slab_key;
	uint32_t holder;     /* the cache's */
	uint64_t expires_ms; /* its grace ends then (monotonic); 0: current */
	struct sfs_vholder *next;
};

/* A model of the replica. */
struct sfs_model {
	struct sfs_replica *r;
	char *name;
	/* The source whose offer made it: it counts against that source's
	 * cap until freed.  References (model_get): protected by r->lock. */
	struct rsrc *origin;
	int refs;
	pthread_mutex_t adopt_lock; /* one offer at a time; before lock */
	pthread_mutex_t lock;
	struct sfs_view *views;	  /* protected by lock: newest first */
	struct sfs_view *current; /* protected by lock; NULL: none yet */
	int hidden;		  /* protected by lock: fails --require */
	char why[256];		  /* protected by lock: how */
	/* An adoption that failed is not tried again before adopt_retry_ms
	 * (doubling back-off), unless the content changes; protected by
	 * lock. */
	uint64_t failed_content, adopt_retry_ms;
	unsigned int adopt_failures;
};

/* What a source said of one model in its last answer.  Protected by
 * the source's lock. */
struct rsrc_known {
	char name[SFS_MF_NAME_MAX + 1];
	uint64_t generation, content;
	size_t nserved;
	uint64_t served[RSERVED_MAX];	 /* generations still served */
	int64_t expires_in[RSERVED_MAX]; /* ms left; -1: current */
	int listed;			 /* in the last answer */
	uint64_t offered; /* the generation offered to the model; 0 */
	uint64_t offered_content;
	uint64_t offered_epoch; /* and the keys it offered */
	int64_t offered_signed; /* and when that was signed */
	char why[300];		/* refused for the model: why; "" */
	char hold_why[200];	/* its holdings answer was refused: why; "" */
	uint64_t hold_answers;	/* holdings answers taken (status) */
	uint64_t hold_version;	/* and the version of the last */
	/* Holdings answers refused in a row (over their caps, malformed):
	 * not asked again before hold_next_ms (250 ms doubling, at most
	 * 30 s), and not at all once HOLD_REFUSED_MAX were (hold_off, until
	 * the re-seeder is another run: hold_off_instance). */
	unsigned int hold_refused;
	uint64_t hold_next_ms;
	int hold_off;
	uint64_t hold_off_instance;
	int used; /* a holder of one of the model's views */
	/* Offering this generation failed (not refused): not again
	 * before retry_ms (doubling back-off) unless it moves on. */
	uint64_t failed_gen, retry_ms;
	unsigned int failures;
	/* What the registry's record of it says (fleet.c). */
	int reg_known;
	uint64_t reg_generation, reg_content;
};

/*
 * rsrc_self_addr - the address under which a seed lists this replica as
 * a re-seeder, into @buf.  0, or -ENOENT (not re-seeding, or not listed
 * yet).
 */
int rsrc_self_addr(struct sfs_replica *r, char *buf, size_t len);

/*
 * rsrc_publishes - 1 when @s is a re-seeder (not this replica) that
 * answers and whose last answer listed model @name with @content.
 */
int rsrc_publishes(struct rsrc *s, const char *name, uint64_t content);
/* rsrc_serves - 1 when @s answers and its last answer listed model
 * @name. */
int rsrc_serves(struct rsrc *s, const char *name);

/*
 * One control address: a seed given with --seed, a source the registry
 * lists, or a re-seeder a seed listed.
 *
 * Sources come and go.  r->srcs[] holds the live ones (a NULL slot is
 * free; the first cfg.nseeds are --seed's and stay).  A pointer to a
 * source is good while a reference is held: rsrc_get (a slot),
 * rsrc_find, rsrc_leader, rsrc_all; given back with rsrc_put.
 * rsrc_retire takes a source out of the table at once (its slot is free
 * for another) and stops its poller; the sweeper then buries it
 * (rsrc_bury: its holders and its connection go) and it is freed at its
 * last reference.
 */
struct rsrc {
	struct sfs_replica *r;
	size_t idx; /* its slot */
	char *addr; /* HOST:PORT */
	int reseeder;
	/* Its run's manifest says "holdings": a re-seeder, however it was
	 * found (one given as a --seed too).  Protected by lock. */
	int holdings;
	int found;	   /* a seed's /v1/sources listed it; lock */
	int refs;	   /* protected by r->lock: the table's is one */
	int retired;	   /* protected by r->lock: out of the table */
	struct rsrc *next; /* protected by r->lock: on r->retired */
	char retire_why[160];
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a check finished; stop */
	/* The control port; all protected by lock. */
	int checking;	       /* a check is running */
	uint64_t checks;       /* checks finished */
	uint64_t check_starts; /* checks begun (numbered from 1) */
	uint64_t check_ended;  /* the number of the last one finished */
	uint64_t checked_ms;   /* the last one ended */
	int unreachable;       /* the last question got no answer (logged) */
	atomic_int quiet;      /* the same, read without lock (r->lock) */
	uint64_t retry_ms;     /* while unreachable: not asked before */
	uint64_t silent_since; /* no answer since */
	char ctl_err[512];
	char src_why[200]; /* its /v1/sources was refused: why; "" */
	int bg_wanted;	   /* ask behind an open */
	int stop;
	/* A re-seeder listed that is this replica: not asked.  Set once,
	 * under lock; read under r->lock too (rsrc_add, rsrc_caps). */
	atomic_int self;
	int registered; /* found in the registry (fleet.c) */
	int dropped;	/* its records in the registry went, or it is
			   retired: not asked */
	/* Found: when a seed's /v1/sources listed it last, and which;
	 * protected by lock. */
	uint64_t listed_ms;
	char listed_by[280];
	/* A seed: when its /v1/sources answered last (sfs_now_ms). */
	_Atomic uint64_t sources_ms;
	/* A seed: this re-seeder's place in the fleet's lanes, as it last
	 * said (size 0: none); protected by lock. */
	struct rsrc_fleet fleet;
	/* The connection, to the run of @instance; protected by lock. */
	uint64_t instance; /* 0: none yet */
	uint64_t xpeer;	   /* the transport's */
	uint32_t cpeer;	   /* the cache's; SFS_CACHE_NONE: none */
	struct sfs_endpoint ep;
	int has_ep;
	/* The manifest the mount opened the transport with [owned]: the
	 * first offer of the same model, generation, content and run takes
	 * it instead of fetching it again; protected by lock. */
	struct sfs_manifest *primed;
	size_t nknown, cap_known; /* protected by lock */
	struct rsrc_known *known;
	/* Models it brought in, alive; refused at the cap, and when that
	 * was last said: protected by r->lock. */
	size_t nmodels;
	uint64_t models_refused, cap_said_ms;
	pthread_t thread;
	int thread_started;
};

struct sfs_replica {
	struct sfs_replica_cfg cfg; /* strings borrowed from the caller */
	char proto[32];		    /* the protocol read through */
	uint64_t instance; /* this replica's run, in reports to seeds */
	struct sfs_xport *x;
	pthread_mutex_t xlock; /* connecting and reconnecting peers */
	struct sfs_disk *disk;
	/* With --trust-key: the signed generations taken, remembered
	 * across restarts (control/signstate.h); NULL without.  Its own
	 * lock. */
	struct sfs_signstate *signstate;
	struct sfs_cache *cache;
	uint32_t chunk_size;
	struct sfs_tree *tree;
	pthread_rwlock_t tree_lock; /* guards tree */
	/* Sources and models, under lock: a source stays until it is
	 * retired (struct rsrc), a model until the sweeper frees it (no
	 * source lists it, no view of it is left, nobody holds it). */
	pthread_mutex_t lock;
	pthread_cond_t cond;	     /* sweeper: stop, or something to expire */
	size_t nsrcs;		     /* slots in use: [0, nsrcs) */
	struct rsrc *srcs[RSRC_MAX]; /* NULL: free */
	struct rsrc *retired;	     /* to bury (rsrc_bury) */
	/* Refused at the caps (RSRC_MAX, RSRC_PEERS_MAX), freed, and the
	 * last refusal: said once a minute, and in status. */
	uint64_t srcs_refused, peers_refused, srcs_freed, src_cap_said_ms;
	char src_cap_why[200];
	/* Re-seeders freed because they went silent, and when: a seed
	 * lists a dead one until its announcement lapses (15 s), and it
	 * is not taken again before RSRC_GONE_MS x 3.  A ring. */
	struct {
		char addr[64];
		uint64_t until_ms;
	} gone[RSRC_MAX];
	size_t gone_next;
	size_t nmodels, cap_models; /* protected by lock */
	/* Registrations a read that gave up may still write into
	 * (sfs_replica_keep_mr): deregistered at close.  Protected by
	 * lock. */
	struct sfs_xport_mr **kept_mrs;
	size_t nkept_mrs, cap_kept_mrs;
	struct sfs_model **models;
	size_t max_models;	 /* at most this many; a source a quarter */
	uint64_t models_refused; /* protected by lock: at the caps */
	int stop;		 /* protected by lock */
	pthread_t sweeper;
	int sweeper_started;
	void (*inval)(void *arg, uint64_t ino); /* protected by lock */
	void *inval_arg;			/* protected by lock */
	unsigned int inval_busy; /* calls of inval under way; lock, cond */
	struct sfs_mctl *ctl;
	/* --reseed, or NULL: set after the pollers start (they read it) */
	struct sfs_reseed *_Atomic reseed;
	_Atomic uint64_t reseed_instance; /* its run (0: none): sources see
					     it without calling reseed.c */
	atomic_int warming;		/* prefetches of a whole view running */
	struct sfs_ctlsrv *metrics_srv; /* --metrics-listen, or NULL */
	char metrics_addr[300];
	struct sfs_fleet *fleet; /* --registry, or NULL */
	uint64_t ra_min, ra_max; /* read-ahead window; ra_max 0: off */
	int ra_tensors;		 /* ... and to a tensor's end */
	/* status */
	uint64_t mounted_ns; /* monotonic */
	time_t mounted;	     /* wall clock */
	uint64_t ready_ms;   /* protected by lock: start to ready */
	/* sfs_replica_open returned: a model refused before says so in
	 * its error line, and is logged at info only. */
	atomic_int opened;
	uint64_t transport_ms;
	uint64_t last_ns, last_bytes; /* protected by lock */
	double rate_now;	      /* protected by lock */
	const char *control;	      /* the control socket, or NULL */
	char provider[64];
};

/* source.c */
/* Ask @s what it publishes (GET /v1/models), checked: 0, or -errno
 * with @err naming the field. */
int rsrc_list(struct rsrc *s, unsigned int timeout_ms, struct rsrc_answer *a,
	      char *err, size_t errlen);
int rsrc_new(struct sfs_replica *r, const char *addr, int reseeder,
	     struct rsrc **out);
void rsrc_free(struct rsrc *s);
/*
 * rsrc_add - @addr is a source from now on (unless known): asked behind
 * once its poller starts (@start: now).  A re-seeder is refused
 * (-ENOSPC) when RSRC_PEERS_MAX re-seeders are live (RSRC_FLEET_MEMBERS
 * for a member of this one's place in the fleet's ring that a seed
 * named: source.c's add_reseeder), any source when
 * RSRC_MAX are, unless @reseeder is 0 and a re-seeder can be retired to
 * make room (a seed is preferred over an extra peer): the refusal is
 * counted, said once a minute and shown in status.  *out, when not
 * NULL: the source [referenced: rsrc_put], known or new.  0 or -errno.
 */
int rsrc_add(struct sfs_replica *r, const char *addr, int reseeder, int start,
	     struct rsrc **out);
/*
 * rsrc_get - the source in slot @i, referenced, or NULL.  rsrc_all -
 * every live source, referenced, into *out [new: rsrc_put_all]; how
 * many.  rsrc_put - give a reference back (NULL is fine); the last one
 * of a retired source frees it.
 */
struct rsrc *rsrc_get(struct sfs_replica *r, size_t i);
size_t rsrc_all(struct sfs_replica *r, struct rsrc ***out);
void rsrc_put(struct rsrc *s);
void rsrc_put_all(struct rsrc **all, size_t n);
/*
 * rsrc_retire - @s leaves: out of the table now (its slot is free), not
 * asked again, its poller told to stop; @why is logged.  Never a --seed
 * source.  Any thread, no lock held.  rsrc_bury - the sweeper: each
 * retired source whose poller ended and that no open is asking loses
 * its holders and its connection, and the table's reference.  Returns
 * how many.
 */
void rsrc_retire(struct rsrc *s, const char *why);
size_t rsrc_bury(struct sfs_replica *r); /* how many were buried */
/* The source table's numbers, now.  Takes r->lock. */
struct rsrc_caps {
	size_t live, peers; /* live sources; re-seeders among them */
	uint64_t freed, refused, peers_refused;
};
void rsrc_caps(struct sfs_replica *r, struct rsrc_caps *c);
/* rsrc_cap_status - status lines on the caps, into @buf. */
void rsrc_cap_status(struct sfs_replica *r, char *buf, size_t len);
/* The transport peer @xpeer, connected to endpoint @ep of the run that
 * published @m, is @s's: a cache peer for it.  0 or -errno with @err. */
int rsrc_adopt_peer(struct rsrc *s, const struct sfs_manifest *m, size_t ep,
		    uint64_t xpeer, char *err, size_t errlen);
/* Ask @s now (or share a question running): see sfs_replica_revalidate.
 * @fresh_ms: not when an answer is younger than that. */
void rsrc_revalidate(struct rsrc *s, unsigned int ask_ms, uint64_t fresh_ms);
int rsrc_start(struct rsrc *s); /* the thread that asks behind */
void rsrc_stop(struct rsrc *s);
/* The first seed that publishes @model and answers (else the first
 * that publishes it; NULL: none), referenced (rsrc_put).  A re-seeder
 * given as a --seed leads only when no seed publishes @model. */
struct rsrc *rsrc_leader(struct sfs_replica *r, const char *model);
/* rsrc_lists - 1 when the last answer of some source lists @name. */
int rsrc_lists(struct sfs_replica *r, const char *name);
/* rsrc_find - the live source at @addr, referenced (rsrc_put), or
 * NULL. */
struct rsrc *rsrc_find(struct sfs_replica *r, const char *addr);
/*
 * rsrc_drop - the registry no longer lists @s: its holders and its
 * connection go, it is not asked until rsrc_registered.  rsrc_registered
 * - the registry lists @s (again) with @name at @generation, @content:
 * asked now when that is news.
 */
void rsrc_drop(struct rsrc *s);
void rsrc_registered(struct rsrc *s, const char *name, uint64_t generation,
		     uint64_t content);
/* rsrc_reg_fresh - 1 when the registry's record of @name from @s says
 * what @s last answered (no need to ask it). */
int rsrc_reg_fresh(struct rsrc *s, const char *name);
/* The cache's reconnect callback (@arg: the replica). */
int rsrc_reconnect(void *arg, uint32_t cpeer, uint64_t id, uint64_t *new_id);

/* model.c */
/* The chunk size a cache needs for @m: @want, or the largest checksum
 * chunk of its files if that is larger (chunks are verified whole). */
uint32_t model_chunk_size(const struct sfs_manifest *m, uint32_t want);
/*
 * model_get - the model named @name, referenced (model_put), or NULL.
 * model_make - the same, made for source @src if missing: 0, or
 * -ENOSPC when the replica holds max_models, or @src brought in its
 * share (a quarter of them, at most RMODEL_MAX), with @why (counted,
 * and said once a minute per source in the log), or -ENOMEM.
 * model_room - would model_make find or make it now: 0 or -ENOSPC as
 * model_make's, nothing made.  model_all - every model, referenced,
 * into *out [new: model_put_all]; how many.
 */
struct sfs_model *model_get(struct sfs_replica *r, const char *name);
int model_make(struct sfs_replica *r, const char *name, struct rsrc *src,
	       struct sfs_model **out, char *why, size_t whylen);
int model_room(struct sfs_replica *r, const char *name, struct rsrc *src,
	       char *why, size_t whylen);
size_t model_all(struct sfs_replica *r, struct sfs_model ***out);
/* model_put - drop a reference (NULL is fine); model_put_all - every
 * one of model_all's, and the array. */
void model_put(struct sfs_model *mo);
void model_put_all(struct sfs_model **all, size_t n);
/* model_share - the most models one source may bring in: a quarter of
 * max_models, at most RMODEL_MAX (what one answer may list). */
size_t model_share(const struct sfs_replica *r);
void model_free(struct sfs_model *mo);
/*
 * model_offer - source @src publishes @m (owned from now on, freed
 * here on refusal) for @mo, as its generation
 * m->generation: a holder of the view of the same content, or (from the
 * leader, or for a model without a view) the new current view.
 * Returns 1 when used, 0 when refused (@why says which field differs),
 * or -errno (@why says why).
 */
int model_offer(struct sfs_model *mo, struct rsrc *src, struct sfs_manifest *m,
		int leader, char *why, size_t whylen);
/* model_has_content - 1 when model @name has a view of @content that
 * has not expired: a source's manifest of it may come thin
 * (SFS_MF_ENC_THIN).  Thread safe. */
int model_has_content(struct sfs_replica *r, const char *name,
		      uint64_t content);
/*
 * model_prune - @src now serves its generations @served (@n of them,
 * with @expires_in ms left each; -1: current) of @mo, from its run
 * @instance: its holders of other runs or generations go, the others'
 * expiry is set.  @n 0: it serves none.  Returns how many holders it
 * still has.
 */
size_t model_prune(struct sfs_model *mo, struct rsrc *src, uint64_t instance,
		   const uint64_t *served, const int64_t *expires_in, size_t n);
/*
 * model_view_seeded - under @v's model's lock: 1 when a seed serves @v
 * (a holder whose source is not a re-seeder), with *left_ms (unless
 * NULL) the most any such holder has left of its grace period at @now
 * (-1: without end, as its current generation); 0 when none does.  A
 * superseded view lives only while this is 1: re-seeders list what they
 * hold, so a view kept for their listing would keep itself (two of them
 * listing each other's).
 */
int model_view_seeded(const struct sfs_view *v, uint64_t now, int64_t *left_ms);
int model_hidden(struct sfs_model *mo, char *why, size_t len);
/*
 * model_holdings - re-seeder @src's holdings answer (@json) for
 * @content, asked at @asked_ms (sfs_now_ms): the pieces of its holder of
 * that view, replaced, and read only until the keep the answer gives
 * them ends (an "unchanged" answer keeps the ones it has again).  0, or
 * -errno with @why naming the field.  model_holdings_version - 0 when
 * @src is no re-seeding holder of @content, 1 when it is but holds
 * nothing known yet, 2 with *version of what the pieces are.
 */
struct model_hold_caps;
struct sfs_json_limit;
#define HOLDINGS_KEEP_MAX_MS 3600000 /* a holdings answer's keep_ms */
int model_holdings(struct sfs_model *mo, struct rsrc *src, uint64_t content,
		   const char *json, size_t len, uint64_t asked_ms,
		   const struct sfs_json_limit *lim, char *why, size_t whylen);
/* model_holdings_limits - the caps of a holdings answer for @content
 * (model_holdings_caps of its view's manifest): 0, or -ENOENT when this
 * mount has no view of it. */
int model_holdings_limits(struct sfs_model *mo, uint64_t content,
			  struct model_hold_caps *caps);
int model_holdings_version(struct sfs_model *mo, struct rsrc *src,
			   uint64_t content, uint64_t *version, uint64_t *base);
/*
 * model_retire - no source publishes @mo any more (the registry says
 * so): its directory leaves the mount, its views expire once nobody
 * serves them.  A source that publishes it again brings it back.
 */
void model_retire(struct sfs_model *mo, const char *why);
/* The sweeper thread (replica.c starts it). */
void *model_sweeper(void *arg);

/* fleet.c: the registry (--registry) as a source of sources. */
struct sfs_fleet;
/* fleet_open - read every record now: its sources join r->srcs (not
 * started).  0, or -errno with one line in @err. */
int fleet_open(struct sfs_replica *r, char *err, size_t errlen);
/* fleet_start - watch from the revision fleet_open read. */
int fleet_start(struct sfs_replica *r, char *err, size_t errlen);
void fleet_stop(struct sfs_replica *r);
void fleet_free(struct sfs_replica *r);
/* fleet_healthy - 1 while the watch runs (news comes within ms). */
int fleet_healthy(struct sfs_replica *r);
/* fleet_lists - 1 when some record names model @name. */
int fleet_lists(struct sfs_replica *r, const char *name);
/* metrics.c: --metrics-listen's port (0 or -errno with @err), and
 * its end (NULL is fine). */
int metrics_serve(struct sfs_replica *r, const char *listen, char *err,
		  size_t errlen);
void metrics_stop(struct sfs_replica *r);

/* fleet_status - lines for .seedfs/status into @buf. */
void fleet_status(struct sfs_replica *r, char *buf, size_t len);

#endif /* SFS_REPLICA_IMPL_H */
